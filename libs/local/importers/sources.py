"""The sources `echo-memory import --from` reads, how each checks its path, and what each cannot map."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from echo_memory.libs.core.contracts.errors import InvalidArgument
from echo_memory.libs.local.importers import basic_memory, mcp_memory, mem0
from echo_memory.libs.local.importers.records import SourceRecord


@dataclass(frozen=True)
class FromSource:
    name: str
    read: Callable[[Path], Iterator[SourceRecord]]
    check: Callable[[Path], Path]  # the resolved path to read, or InvalidArgument
    unmapped: tuple[str, ...]  # what the source holds that the mapping does not carry


def plain_path(text: str) -> Path:
    """The user's PATH; InvalidArgument for a path that climbs with `..` (say where the data is, directly)."""
    path = Path(text).expanduser()
    if ".." in path.parts:
        raise InvalidArgument(f"{text}: a path with '..' is refused; give the file or folder itself")
    return path


def _file(path: Path) -> Path:
    if not path.is_file():
        raise InvalidArgument(f"{path}: not a file")
    return path.resolve()


FROM_SOURCES: dict[str, FromSource] = {
    "mcp-memory": FromSource("mcp-memory", mcp_memory.read, _file, (
        "nothing of an entity, observation or relation is left out; the file holds no times, authors or "
        "versions, so each fact is valid from the import and written by the importing agent",
    )),
    "mem0": FromSource("mem0", mem0.read, mem0.check_path, mem0.UNMAPPED),
    "basic-memory": FromSource("basic-memory", basic_memory.read, basic_memory.check_path, basic_memory.UNMAPPED),
}
FROM_NAMES = tuple(FROM_SOURCES)
