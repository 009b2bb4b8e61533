"""Text hygiene for every string a tool is given: what is refused, and what is removed before storing.

Refused (`invalid_argument`, naming the field; nothing is stored):
  - NUL and every other C0/C1 control character (U+0000–U+001F, U+007F–U+009F) except tab, line
    feed and carriage return: Postgres cannot store NUL, and the rest can rewrite a terminal.
  - Bidirectional overrides and isolates (U+202A–U+202E, U+2066–U+2069): they can make stored text
    read differently to a human reviewer than to a model.
  - Lone surrogates: not encodable as UTF-8.
Removed (neutralised, the rest of the text is kept): zero-width characters U+200B, U+200C, U+200D,
U+2060 and U+FEFF, which hide text from a reviewer and split words so exact matching misses them.
"""

from __future__ import annotations

import re
import unicodedata
from typing import Any

from pydantic_core import PydanticCustomError

ZERO_WIDTH = "\u200b\u200c\u200d\u2060\ufeff"
BIDI_CONTROLS = "\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"
_ZERO_WIDTH_RE = re.compile(f"[{ZERO_WIDTH}]")
_CONTROL_RE = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")
_BIDI_RE = re.compile(f"[{BIDI_CONTROLS}]")
_SURROGATE_RE = re.compile("[\ud800-\udfff]")


def _refuse(where: str, kind: str, char: str, why: str) -> PydanticCustomError:
    code = f"U+{ord(char):04X}"
    name = unicodedata.name(char, "")
    label = f"{code} {name}".strip() if name else code
    return PydanticCustomError(
        "text_hygiene", "{where}contains {kind} ({label}), {why}",
        {"where": f"{where} " if where else "", "kind": kind, "label": label, "why": why},
    )


def clean_text(value: str, where: str = "", *, keep_zero_width: bool = False) -> str:
    """`value` with zero-width characters removed (unless `keep_zero_width`).

    Raises PydanticCustomError (a validation error naming `where`) for a NUL or other control
    character, a bidirectional override or isolate, or a lone surrogate.
    """
    if found := _CONTROL_RE.search(value):
        name = "a NUL character" if found.group() == "\x00" else "a control character"
        raise _refuse(where, name, found.group(), "which is not accepted in text (only tab, CR and LF are)")
    if found := _BIDI_RE.search(value):
        raise _refuse(where, "a bidirectional control", found.group(),
                      "which can make text read differently to a person than it is stored")
    if found := _SURROGATE_RE.search(value):
        raise _refuse(where, "a lone surrogate", found.group(), "which is not valid Unicode text")
    return value if keep_zero_width else _ZERO_WIDTH_RE.sub("", value)


def clean_value(value: Any, where: str = "", *, keep_zero_width: bool = False) -> Any:
    """`value` with `clean_text` applied to every string in it, dict keys included, at any depth.

    `where` names the position inside the field (e.g. `2` for a list's third item) in errors.
    Values that are not strings, lists or dicts are returned unchanged.
    """
    if isinstance(value, str):
        return clean_text(value, where, keep_zero_width=keep_zero_width)
    if isinstance(value, list | tuple):
        return [
            clean_value(item, _join(where, str(i)), keep_zero_width=keep_zero_width) for i, item in enumerate(value)
        ]
    if isinstance(value, dict):
        return {
            clean_value(k, _join(where, "key"), keep_zero_width=keep_zero_width):
                clean_value(v, _join(where, str(k)), keep_zero_width=keep_zero_width)
            for k, v in value.items()
        }
    return value


def refuse_nul(value: Any, where: str = "") -> None:
    """Raise PydanticCustomError when any string in `value`, at any depth, holds a NUL (Postgres cannot store it)."""
    if isinstance(value, str):
        if "\x00" in value:
            raise _refuse(where, "a NUL character", "\x00", "which cannot be stored")
    elif isinstance(value, list | tuple):
        for i, item in enumerate(value):
            refuse_nul(item, _join(where, str(i)))
    elif isinstance(value, dict):
        for k, v in value.items():
            refuse_nul(k, _join(where, "key"))
            refuse_nul(v, _join(where, str(k)))


def _join(where: str, part: str) -> str:
    step = f"[{part}]" if part.isdigit() else f".{part}"
    return f"{where}{step}" if where else step.removeprefix(".")
