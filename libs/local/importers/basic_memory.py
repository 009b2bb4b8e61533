"""A basic-memory knowledge base: a folder of Markdown notes (pip `basic-memory`).

Each note is `---` frontmatter (`title`, `type`, `permalink`, `tags`) and Markdown whose list
lines carry the knowledge: `- [category] text #tag (context)` is an observation,
`- relation_type [[Target]] (context)` a relation; a `[[Target]]` elsewhere in the text is a
`links_to` relation (basic-memory's own reading). Task boxes (`- [ ]`, `- [x]`) and lines in
code fences are text, not observations. Mapped as:

- a note becomes an entity of its frontmatter type (default `note`) named by its title, with the
  fact "<title> is a <type> (permalink …; tags …)" (relation `is a`): permalink and tags kept;
- an observation becomes a fact about the note, "<title> (<category>): <text>", on its own edge
  (relation `<category> #<digest>`), tags and context kept in the text;
- a relation becomes "<title> <relation_type> <Target>" between the note and the target's entity.

Only `.md` files under the folder are read, never through a symbolic link: a link is reported
and left unread (one pointing outside the folder could otherwise read any file); files are
opened with O_NOFOLLOW so a file swapped for a link meanwhile is refused too.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from echo_memory.libs.core.contracts.errors import InvalidArgument
from echo_memory.libs.local.importers.records import EntityRef, PlannedFact, SourceRecord, checked, digest, refused

SOURCE = "basic-memory"
TYPE_RELATION = "is a"
LINK_RELATION = "links_to"
MAX_NOTE_BYTES = 5_000_000
SKIPPED_DIRS = frozenset({".git", ".obsidian", ".basic-memory", ".trash"})

UNMAPPED = (
    "the prose of a note (text outside observation and relation lines) is not stored as facts",
    "frontmatter fields other than title, type, permalink and tags",
    "file times: each fact is valid from the import, written by the importing agent",
)

OBSERVATION = re.compile(r"^\s*[-*]\s+\[(?P<category>[^\[\]]+)\]\s+(?P<text>\S.*)$")
RELATION = re.compile(r"^\s*[-*]\s+(?P<relation>[^\[\]\s][^\[\]]*?)\s+\[\[(?P<target>[^\[\]]+)\]\](?P<rest>.*)$")
WIKILINK = re.compile(r"\[\[([^\[\]]+)\]\]")
TASK = re.compile(r"^\s*[-*]\s+\[[ xX]\]\s")
FENCE = re.compile(r"^\s*(```|~~~)")


def check_path(path: Path) -> Path:
    """The folder to read; InvalidArgument when it is not a folder."""
    if not path.is_dir():
        raise InvalidArgument(f"{path}: not a folder (basic-memory keeps its notes in a folder of Markdown files)")
    return path.resolve()


@dataclass
class Note:
    relpath: str
    title: str
    type: str = "note"
    permalink: str | None = None
    tags: list[str] = field(default_factory=list)
    body: list[str] = field(default_factory=list)
    body_start: int = 1


def _unquote(value: str) -> str:
    value = value.strip()
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
        return value[1:-1]
    return value


def frontmatter(lines: list[str]) -> tuple[dict[str, str | list[str]], int]:
    """The frontmatter's `key: value` pairs (lists as lists) and the index of the first body line.

    Only the flat YAML basic-memory writes is read: scalars, `[a, b]` lists and `- item` lists.
    """
    if not lines or lines[0].strip() != "---":
        return {}, 0
    fields: dict[str, str | list[str]] = {}
    last: str | None = None
    for index in range(1, len(lines)):
        line = lines[index]
        if line.strip() == "---":
            return fields, index + 1
        item = re.match(r"^\s+-\s+(.*)$|^-\s+(.*)$", line)
        if item and last is not None:
            current = fields.get(last)
            values = current if isinstance(current, list) else []
            values.append(_unquote(item.group(1) or item.group(2) or ""))
            fields[last] = values
            continue
        pair = re.match(r"^([A-Za-z_][\w-]*):\s*(.*)$", line)
        if pair:
            last, value = pair.group(1), pair.group(2).strip()
            if value.startswith("[") and value.endswith("]"):
                fields[last] = [_unquote(v) for v in value[1:-1].split(",") if v.strip()]
            else:
                fields[last] = _unquote(value)
    return {}, 0  # no closing line: not frontmatter, the whole file is the body


def _text(value: str | list[str] | None) -> str | None:
    return value if isinstance(value, str) and value else None


def parse(relpath: str, text: str) -> Note:
    lines = text.splitlines()
    fields, start = frontmatter(lines)
    body = lines[start:]
    heading = next((line[2:].strip() for line in body if line.startswith("# ")), None)
    title = _text(fields.get("title")) or heading or Path(relpath).stem
    tags = fields.get("tags")
    return Note(relpath=relpath, title=title, type=_text(fields.get("type")) or "note",
                permalink=_text(fields.get("permalink")),
                tags=tags if isinstance(tags, list) else ([t for t in tags.split() if t] if tags else []),
                body=body, body_start=start + 1)


def _walk(root: Path) -> Iterator[tuple[str, Path | None, str | None]]:
    """(relative path, path to read or None, why it is not read) for every Markdown file and link, sorted."""
    for folder, dirs, files in os.walk(root, followlinks=False):
        here = Path(folder)
        kept = []
        for name in sorted(dirs):
            if name in SKIPPED_DIRS:
                continue
            if (here / name).is_symlink():
                yield str((here / name).relative_to(root)), None, _link_reason(root, here / name)
            else:
                kept.append(name)
        dirs[:] = kept
        for name in sorted(files):
            path = here / name
            rel = str(path.relative_to(root))
            if path.is_symlink():
                if name.endswith(".md"):
                    yield rel, None, _link_reason(root, path)
            elif name.endswith(".md"):
                yield rel, path, None


def _link_reason(root: Path, link: Path) -> str:
    target = os.path.realpath(link)
    inside = target == str(root) or target.startswith(str(root) + os.sep)
    return ("a symbolic link out of the folder: not read" if not inside
            else "a symbolic link: not read (its target inside the folder is read under its own name)")


def _read(path: Path) -> str:
    """The file's text; OSError (a link put in its place included) or ValueError for non-UTF-8 or too large."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    with os.fdopen(fd, "rb") as handle:
        data = handle.read(MAX_NOTE_BYTES + 1)
    if len(data) > MAX_NOTE_BYTES:
        raise ValueError(f"larger than {MAX_NOTE_BYTES} bytes")
    return data.decode("utf-8")


def _notes(root: Path) -> Iterator[tuple[str, Note | None, str | None]]:
    for rel, path, why in _walk(root):
        if path is None:
            yield rel, None, why
            continue
        try:
            yield rel, parse(rel, _read(path)), None
        except UnicodeDecodeError as exc:
            yield rel, None, f"not UTF-8 ({exc.reason} at byte {exc.start})"
        except (OSError, ValueError) as exc:
            yield rel, None, f"not read: {exc}"


def read(root: Path) -> Iterator[SourceRecord]:
    """Every note, observation and relation of the folder; unreadable files come back refused."""
    session = f"{SOURCE} {root.name}"
    types: dict[str, str] = {}
    for _, note, _ in _notes(root):  # first pass: what each title (and permalink) names
        if note is not None:
            types.setdefault(note.title.lower(), note.type)
            if note.permalink:
                types.setdefault(note.permalink.lower(), note.type)
    for rel, note, why in _notes(root):
        if note is None:
            yield refused(f"file:{rel}", "note", rel, f"{rel}: {why}", session)
        else:
            yield from _records(note, session, types)


def _records(note: Note, session: str, types: dict[str, str]) -> Iterator[SourceRecord]:
    me = EntityRef(name=note.title, type=note.type)
    extra = [f"permalink {note.permalink}"] if note.permalink else []
    extra += [f"tags {', '.join(note.tags)}"] if note.tags else []
    yield checked(SourceRecord(
        key=f"note:{note.relpath}", kind="note", where=note.relpath, entities=[me], session=session,
        fact=PlannedFact(source=note.title, target=note.title, relation=TYPE_RELATION,
                         text=f"{note.title} is a {note.type}" + (f" ({'; '.join(extra)})" if extra else ""))))
    fenced = False
    for number, line in enumerate(note.body, start=note.body_start):
        if FENCE.match(line):
            fenced = not fenced
            continue
        if fenced or TASK.match(line):
            continue
        where = f"{note.relpath}:{number}"
        observed = OBSERVATION.match(line)
        related = RELATION.match(line) if observed is None else None
        if observed is not None:
            category, text = observed.group("category").strip(), observed.group("text").strip()
            yield checked(SourceRecord(
                key=f"observation:{note.relpath}:{digest(category + chr(31) + text)}", kind="observation",
                where=where, entities=[me], session=session,
                fact=PlannedFact(source=note.title, target=note.title, relation=f"{category} #{digest(text, 8)}",
                                 text=f"{note.title} ({category}): {text}")))
        elif related is not None:
            relation, target = related.group("relation").strip(), related.group("target").strip()
            rest = related.group("rest").strip()
            yield _relation(note, me, relation, target, rest, where, session, types)
        else:
            for target in WIKILINK.findall(line):
                yield _relation(note, me, LINK_RELATION, target.strip(), "", where, session, types)


def _relation(note: Note, me: EntityRef, relation: str, target: str, rest: str, where: str, session: str,
              types: dict[str, str]) -> SourceRecord:
    other = EntityRef(name=target, type=types.get(target.lower(), "note"))
    ends = [me] if target.lower() == note.title.lower() else [me, other]
    return checked(SourceRecord(
        key=f"relation:{note.relpath}:{relation}\x1f{target}", kind="relation", where=where, entities=ends,
        session=session, fact=PlannedFact(source=note.title, target=target, relation=relation,
                                          text=f"{note.title} {relation} {target}" + (f" {rest}" if rest else ""))))
