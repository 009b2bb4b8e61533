"""The texts a secret is looked for in: the input folded (NFKC, invisible characters removed), the
same with letter-by-letter spacing collapsed, and the decoded form of base64 runs.

Each variant keeps, for every character, the index of the input character it came from, so a match
in a variant can be redacted in the input itself.
"""

from __future__ import annotations

import base64
import binascii
import re
import unicodedata
from collections.abc import Iterator
from dataclasses import dataclass

# Characters that render as nothing: the invisible format characters (soft hyphen, zero-width
# space/joiners, bidi controls, word joiner, BOM, tags, variation selectors) and a few others that
# look blank (combining grapheme joiner, Hangul fillers, Mongolian separators, Khmer inherent vowels).
_INVISIBLE = re.compile(
    "[\u00ad\u034f\u061c\u115f\u1160\u17b4\u17b5\u180b-\u180f\u200b-\u200f\u202a-\u202e\u2060-\u2064"
    "\u2066-\u206f\u3164\ufe00-\ufe0f\ufeff\uffa0\ufff9-\ufffb\U0001d173-\U0001d17a\U000e0000-\U000e0fff]"
)
# Six or more single non-space characters each separated by one run of spaces: "A K I A …".
_SPACED_OUT = re.compile(r"(?<!\S)\S(?:[ \t\u00a0]+\S(?!\S)){5,}")
_SPACES = re.compile(r"[ \t\u00a0]+")
# A base64 (or base64url) run long enough to hide a key header; shorter runs are ordinary words.
_BASE64_RUN = re.compile(r"(?<![A-Za-z0-9+/=_\-])[A-Za-z0-9+/_\-]{24,}={0,2}")


@dataclass(frozen=True)
class Variant:
    """One text to match, and where each of its characters came from in the input.

    `origin` is None when the variant is the input itself (the common, all-ASCII case).
    """

    text: str
    origin: tuple[int, ...] | None
    run: tuple[int, int] | None = None  # decoded base64: every match stands for the whole run

    def span(self, start: int, end: int) -> tuple[int, int]:
        """The input's [start, end) that produced this variant's [start, end)."""
        if self.run is not None:
            return self.run
        if self.origin is None:
            return start, end
        if end <= start:
            return self.origin[start], self.origin[start]
        return self.origin[start], self.origin[end - 1] + 1


def folded(text: str) -> Variant:
    """`text` under NFKC with invisible characters removed (fullwidth "ＡＫＩＡ" becomes "AKIA")."""
    if text.isascii() or (not _INVISIBLE.search(text) and unicodedata.is_normalized("NFKC", text)):
        return Variant(text, None)
    chars: list[str] = []
    origin: list[int] = []
    for index, char in enumerate(text):
        # Character by character, so every output character knows its source; a base letter and
        # its combining mark then stay two characters, which no secret shape cares about.
        for out in _INVISIBLE.sub("", unicodedata.normalize("NFKC", char)):
            chars.append(out)
            origin.append(index)
    return Variant("".join(chars), tuple(origin))


def collapsed(variant: Variant) -> Variant | None:
    """`variant` with the spaces inside letter-by-letter runs removed; None when it has no such run."""
    if not _SPACED_OUT.search(variant.text):
        return None
    chars: list[str] = []
    origin: list[int] = []
    last = 0
    source = variant.origin
    for run in _SPACED_OUT.finditer(variant.text):
        keep = [(i, variant.text[i]) for i in range(last, run.start())]
        for i in range(run.start(), run.end()):
            if not _SPACES.match(variant.text[i]):
                keep.append((i, variant.text[i]))
        last = run.end()
        for i, char in keep:
            chars.append(char)
            origin.append(i if source is None else source[i])
    for i in range(last, len(variant.text)):
        chars.append(variant.text[i])
        origin.append(i if source is None else source[i])
    return Variant("".join(chars), tuple(origin))


def _decode(run: str) -> str | None:
    body = run.rstrip("=").replace("-", "+").replace("_", "/")
    body = body[: len(body) - len(body) % 4] if len(body) % 4 == 1 else body
    try:
        raw = base64.b64decode(body + "=" * (-len(body) % 4), validate=True)
    except (binascii.Error, ValueError):
        return None
    text = raw.decode("utf-8", errors="replace")
    printable = sum(1 for c in text if c.isprintable() or c in "\n\r\t")
    # Random keys decode to bytes, not text; only text can hold a header worth matching.
    return text if text and printable >= 0.9 * len(text) else None


def decoded_runs(variant: Variant) -> Iterator[Variant]:
    """The decoded text of each base64 run in `variant` that decodes to readable text.

    A match in a decoded variant stands for its whole run, so redaction removes the run.
    """
    for run in _BASE64_RUN.finditer(variant.text):
        text = _decode(run.group())
        if text is not None:
            yield Variant(text, None, run=variant.span(run.start(), run.end()))


def variants(text: str) -> Iterator[Variant]:
    """Every text a secret in `text` may hide in: folded, spacing collapsed, base64 decoded."""
    base = folded(text)
    yield base
    squeezed = collapsed(base)
    if squeezed is not None:
        yield squeezed
    for source in (base, squeezed):
        if source is not None:
            yield from decoded_runs(source)
