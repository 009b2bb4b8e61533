"""Export to and import from JSON Lines over the bus, in pages and chunks bounded in bytes.

`export_to` streams pages from the audit service (each at most `page_bytes` of encoded records)
into a file: header, records, end line. `read_partial_export` + `export_to(resume=…)` continue a
file cut short after its last complete line. `import_lines` stages a checked file in chunks of at
most `chunk_bytes` and asks the audit service to restore it in one transaction.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from echo_memory.libs.core.contracts.audit import (
    EXPORT_FORMAT,
    EXPORT_PAGE_BYTES,
    MAX_EXPORT_PAGE,
    MAX_EXPORT_PAGE_BYTES,
    SECTIONS,
    ExportFileError,
    ImportResult,
    parse_export,
    wire_size,
)
from echo_memory.libs.core.contracts.errors import Internal

Call = Callable[[str, str, dict[str, Any], float], Awaitable[dict[str, Any]]]

PARTIAL_SUFFIX = ".partial"


class Progress:
    """`<verb> done/total <unit>` on a stream, at most every `interval` seconds; silent without one."""

    def __init__(self, stream: TextIO | None, verb: str, unit: str = "records") -> None:
        self.stream = stream
        self.verb = verb
        self.unit = unit
        self.tty = bool(stream is not None and stream.isatty())
        self.interval = 0.2 if self.tty else 2.0
        self._last = 0.0

    def update(self, done: int, total: int | None, *, force: bool = False) -> None:
        if self.stream is None or (not force and time.monotonic() - self._last < self.interval):
            return
        self._last = time.monotonic()
        text = f"{self.verb} {done}/{total} {self.unit}" if total else f"{self.verb} {done} {self.unit}"
        self.stream.write(f"\r{text}" if self.tty else f"{text}\n")
        self.stream.flush()

    def say(self, text: str) -> None:
        if self.stream is not None:
            self.stream.write(("\n" if self.tty else "") + text + "\n")
            self.stream.flush()


# ---- export ------------------------------------------------------------------------------------


@dataclass
class PartialExport:
    """An export file cut short: its header, what it holds, and where its complete lines end."""

    header: dict[str, Any]
    counts: dict[str, int]
    last: dict[str, Any] | None  # the last complete record; None when only the header is there
    complete_bytes: int  # the file's length up to the end of its last complete line


async def export_to(
    call: Call, out: TextIO, *, scope: str | None, progress: TextIO | None, timeout: float,
    page_bytes: int = EXPORT_PAGE_BYTES, resume: PartialExport | None = None,
) -> dict[str, int]:
    """Write a whole export to `out` (after `resume`'s lines when given); returns records per section.

    Raises EchoError from the service (nothing more is written, and the lines written so far end
    at a record boundary), or Internal when the records do not add up to the header's counts.
    """
    counts = dict(resume.counts) if resume else dict.fromkeys(SECTIONS, 0)
    expected: dict[str, int] = resume.header["counts"] if resume else {}
    shown = Progress(progress, "exported")
    args: dict[str, Any] = {"max_bytes": page_bytes, "limit": MAX_EXPORT_PAGE, **({"scope": scope} if scope else {})}
    if resume:
        args["resume"] = {"cutoff": resume.header["cutoff"], "after": resume.last}
    while True:
        page = await call("audit", "export", args, timeout)
        text = []
        if page.get("header"):
            expected = page["header"]["counts"]
            text.append(_line(page["header"]))
        for record in page["records"]:
            counts[record["type"]] += 1
            text.append(_line(record))
        out.write("".join(text))
        out.flush()  # a page on disk is a point an interrupted export resumes from
        shown.update(sum(counts.values()), sum(expected.values()))
        cursor = page.get("next_cursor")
        if not cursor:
            break
        args.pop("resume", None)
        args["cursor"] = cursor
    if any(counts[n] != expected.get(n, 0) for n in SECTIONS):
        raise Internal(f"the export holds {counts} records but its header counted {expected}; the file is incomplete")
    out.write(_line({"type": "end", "counts": counts}))
    out.flush()
    shown.update(sum(counts.values()), sum(expected.values()), force=True)
    shown.say(", ".join(f"{n}: {c}" for n, c in counts.items() if c))
    return counts


def read_partial_export(path: str | Path) -> PartialExport:
    """What an interrupted export file holds, up to its last complete line.

    A last line without its newline (the write was cut) is not counted. Raises ExportFileError for
    a file that does not start with an export header, that is already complete (it has its end
    line), or that has a line which is not an export record before its last one.
    """
    counts = dict.fromkeys(SECTIONS, 0)
    header: dict[str, Any] | None = None
    last: dict[str, Any] | None = None
    complete = 0
    with Path(path).open("rb") as handle:
        for number, raw in enumerate(handle, start=1):
            if not raw.endswith(b"\n"):
                break  # cut mid-line: the resumed export writes this record again
            try:
                line = json.loads(raw)
            except ValueError:
                raise ExportFileError(f"line {number} of {path} is not JSON; only a cut last line can be resumed") from None
            if header is None:
                if not isinstance(line, dict) or line.get("format") != EXPORT_FORMAT or "cutoff" not in line:
                    raise ExportFileError(f"{path} does not start with an Echo Memory export header")
                header = line
            elif not isinstance(line, dict) or line.get("type") not in counts:
                if isinstance(line, dict) and line.get("type") == "end":
                    raise ExportFileError(f"{path} is a complete export already (it has its end line)")
                raise ExportFileError(f"line {number} of {path} is not an export record")
            else:
                counts[line["type"]] += 1
                last = line
            complete += len(raw)
    if header is None:
        raise ExportFileError(f"{path} holds no complete header line; start a new export instead")
    return PartialExport(header=header, counts=counts, last=last, complete_bytes=complete)


def resume_paths(given: str | Path) -> tuple[Path, Path]:
    """(file to continue, file it becomes when complete) for `export --resume FILE`.

    FILE may be the `--out` path of the interrupted export (its `.partial` file is continued) or
    the partial file itself; a file of another name is continued in place. Raises ExportFileError
    when neither exists.
    """
    path = Path(given)
    if path.name.endswith(PARTIAL_SUFFIX) and path.exists():
        return path, path.with_name(path.name.removesuffix(PARTIAL_SUFFIX))
    partial = path.with_name(path.name + PARTIAL_SUFFIX)
    if partial.exists():
        return partial, path
    if path.exists():
        return path, path
    raise ExportFileError(f"there is no {path} or {partial} to resume")


def _line(obj: dict[str, Any]) -> str:
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":")) + "\n"


# ---- import ------------------------------------------------------------------------------------


def read_export_file(path: str | Path) -> list[Any]:
    """Every line of the file, JSON-decoded and checked as a whole export (raises ExportFileError)."""
    lines: list[Any] = []
    with Path(path).open(encoding="utf-8") as handle:
        for number, text in enumerate(handle, start=1):
            if not text.strip():
                continue
            try:
                lines.append(json.loads(text))
            except json.JSONDecodeError as exc:
                raise ExportFileError(f"line {number} is not JSON ({exc.msg})") from None
    parse_export(lines)
    return lines


def chunks(lines: list[Any], chunk_bytes: int) -> list[tuple[int, int]]:
    """(start, end) line ranges whose encoded lines add up to at most `chunk_bytes` each.

    A line larger than `chunk_bytes` is a chunk of its own. Raises ExportFileError naming a line
    that is larger than one bus message can carry.
    """
    out: list[tuple[int, int]] = []
    start, used = 0, 0
    for number, line in enumerate(lines):
        size = wire_size(line) + 1
        if size > MAX_EXPORT_PAGE_BYTES:
            raise ExportFileError(f"line {number + 1} encodes to {size} bytes, more than one bus message carries "
                                  f"({MAX_EXPORT_PAGE_BYTES} bytes)")
        if number > start and (used + size > chunk_bytes or number - start >= MAX_EXPORT_PAGE):
            out.append((start, number))
            start, used = number, 0
        used += size
    if start < len(lines):
        out.append((start, len(lines)))
    return out


async def import_lines(
    call: Call, lines: list[Any], *, scope: str | None, progress: TextIO | None, timeout: float,
    chunk_bytes: int = EXPORT_PAGE_BYTES,
) -> ImportResult:
    """Stage `lines` in byte-bounded chunks, then restore them in one transaction.

    An import cut short (here or in the service) restored nothing; running it again starts over.
    Raises ExportFileError for a bad file (before anything is sent) and EchoError from the service.
    """
    parse_export(lines)
    import_id = str(uuid.uuid4())
    shown = Progress(progress, "staged", "lines")
    for start, end in chunks(lines, chunk_bytes):
        await call("audit", "import_stage", {"import_id": import_id, "first_line": start, "lines": lines[start:end]},
                   timeout)
        shown.update(end, len(lines), force=end == len(lines))
    shown.say(f"restoring {len(lines) - 2} records in one transaction")
    args: dict[str, Any] = {"import_id": import_id, **({"scope": scope} if scope else {})}
    return ImportResult.model_validate(await call("audit", "import", args, timeout))
