"""One import run: read each source's new complete turns, redact them, store them in batches, checkpoint.

The writes service's `import_episodes` stores each batch in one transaction and reports turns
it already holds (by turn id) as `already`; only after it answered are the batch's checkpoints
committed. So a run stopped at any point resumes at its last stored batch, and a batch sent
twice stores nothing twice. A dry run reads the same turns and counts them, and sends and writes
nothing (not even checkpoints).
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, TextIO

from echo_memory.libs.core.contracts.imports import ImportEpisodesResult
from echo_memory.libs.core.secrets import find_secret, redact_secrets
from echo_memory.libs.local.history.base import Conversation, ReadStats, Source
from echo_memory.libs.local.history.projects import project_of
from echo_memory.libs.local.history.state import WATERMARK_OVERLAP, Checkpoint, ImportState
from echo_memory.libs.local.history.turns import Turn, content_hash, render

# A batch is one bus message: at most this many episodes and about this many bytes of text.
BATCH_TURNS = 128
BATCH_BYTES = 600_000

Send = Callable[[str, list[dict[str, Any]]], Awaitable[ImportEpisodesResult]]  # (source, episodes) -> result


@dataclass
class SourceReport:
    source: str
    conversations: int = 0  # conversations opened this run
    unchanged: int = 0  # conversations skipped: not changed since they were last read
    turns: int = 0  # complete turns found that no checkpoint covered yet
    imported: int = 0  # stored by this run
    already: int = 0  # the store held them already (a run killed after storing, a second importer)
    waiting: int = 0  # turns still in progress: read again next run
    before_since: int = 0  # complete turns that ended before --since (checkpointed, not stored)
    secrets_redacted: int = 0
    turns_with_secrets: int = 0
    clipped_turns: int = 0  # turns whose tool output or length was shortened (with a marker)
    refused: int = 0  # turns the detector still flagged after redaction (not stored)
    unreadable_lines: int = 0
    skipped: dict[str, int] = field(default_factory=dict)


def redact(text: str) -> tuple[str, int]:
    """`text` with its secrets replaced, and how many were replaced."""
    if not text or find_secret(text) is None:
        return text, 0
    clean = redact_secrets(text)
    return clean, max(1, clean.count("[redacted ") - text.count("[redacted "))


def episode_of(turn: Turn, report: SourceReport) -> dict[str, Any] | None:
    """The import_episodes entry of a complete turn, secrets redacted; None if one cannot be removed."""
    text, clipped = render(turn)
    project, root = project_of(turn.cwd)
    metadata: dict[str, Any] = {
        "conversation": turn.conversation, "first_message_id": turn.first_message_id,
        "last_message_id": turn.last_message_id, "tool_calls": len(turn.tools),
        **({"cwd": turn.cwd} if turn.cwd else {}), **({"git_root": root} if root else {}),
        **({"model": turn.model} if turn.model else {}),
        **({"ended_at": int(turn.ended_at)} if turn.ended_at else {}),
        **({"clipped_chars": clipped} if clipped else {}),
        **{k: v for k, v in turn.extra.items() if v is not None},
    }
    found = 0
    text, n = redact(text)
    found += n
    clean_meta: dict[str, Any] = {}
    for key, value in metadata.items():
        if isinstance(value, str):
            value, n = redact(value)
            found += n
        clean_meta[key] = value
    session, n = redact(turn.conversation)
    found += n
    project_name, n = redact(project or "")
    found += n
    if found:
        report.secrets_redacted += found
        report.turns_with_secrets += 1
        clean_meta["secrets_redacted"] = found
    if clipped:
        report.clipped_turns += 1
    if len(session) > 200:  # the store's limit: a stable digest instead of a cut id
        session = content_hash(session)
    if any(find_secret(s) for s in (text, session, project_name)):
        report.refused += 1
        return None
    occurred = turn.started_at if turn.started_at is not None else turn.ended_at
    return {
        "kind": "turn", "content": text, "session_id": session, "seq": turn.seq,
        "occurred_at": int(occurred) if occurred is not None else None,
        "project": (project_name if len(project_name) <= 200 else content_hash(project_name)) or None,
        "metadata": clean_meta,
        "source": turn.source, "external_id": turn.id,
    }


@dataclass
class _Pending:
    """A batch being filled: its episodes and the checkpoints to commit once it is stored."""

    episodes: list[dict[str, Any]] = field(default_factory=list)
    size: int = 0
    checkpoints: dict[str, Checkpoint] = field(default_factory=dict)


class Importer:
    """Runs imports of `sources` into the store through `send` (None: a dry run)."""

    def __init__(self, sources: Iterable[Source], state: ImportState, send: Send | None, *,
                 since: float | None = None, progress: TextIO | None = None) -> None:
        self.sources = list(sources)
        self.state = state
        self.send = send
        self.since = since
        self.progress = progress
        self._last_shown = 0.0

    async def run(self) -> list[SourceReport]:
        return [await self.run_source(source) for source in self.sources]

    async def run_source(self, source: Source, only: list[Conversation] | None = None) -> SourceReport:
        """Import one source (or just `only`, e.g. the one file of `--file`)."""
        report = SourceReport(source.name)
        started = time.time()
        mark = self.state.watermark(source.name)
        convs = list(only) if only is not None else list(source.conversations())
        pending = _Pending()
        for index, conv in enumerate(convs, start=1):
            cp = self.state.checkpoint(source.name, conv.key)
            if only is None and mark is not None and conv.updated < mark - WATERMARK_OVERLAP and cp is not None:
                report.unchanged += 1
                continue
            if cp is not None and cp.seen_updated == conv.updated and cp.seen_size == conv.size:
                report.unchanged += 1
                continue
            report.conversations += 1
            pending = await self._read(source, conv, cp or Checkpoint(), pending, report)
            self._show(report, index, len(convs))
        await self._flush(source.name, pending, report)
        if only is None:
            self.state.set_watermark(source.name, started)
        self._show(report, len(convs), len(convs), force=True)
        return report

    async def _read(self, source: Source, conv: Conversation, cp: Checkpoint, pending: _Pending,
                    report: SourceReport) -> _Pending:
        stats = ReadStats()
        latest = Checkpoint(cp.resume, cp.last_time, cp.last_id, cp.content_hash, cp.seen_size, cp.seen_updated)
        for turn in source.turns(conv, cp.resume, stats):
            if not turn.complete:
                report.waiting += 1
                break
            latest = Checkpoint(turn.resume, turn.ended_at, turn.id, None, None, None)
            ended = turn.ended_at if turn.ended_at is not None else turn.started_at
            if self.since is not None and ended is not None and ended < self.since:
                report.before_since += 1
                pending.checkpoints[conv.key] = latest
                continue
            report.turns += 1
            episode = episode_of(turn, report)
            if episode is None:
                pending.checkpoints[conv.key] = latest
                continue
            latest.content_hash = content_hash(episode["content"])
            size = len(episode["content"].encode("utf-8")) + 512
            if pending.episodes and (len(pending.episodes) >= BATCH_TURNS or pending.size + size > BATCH_BYTES):
                await self._flush(source.name, pending, report)
                pending = _Pending()
            pending.episodes.append(episode)
            pending.size += size
            pending.checkpoints[conv.key] = latest
        report.unreadable_lines += stats.unreadable_lines
        for why, n in stats.skipped.items():
            report.skipped[why] = report.skipped.get(why, 0) + n
        # Read to its end: an unchanged conversation is not opened again (committed with the batch).
        latest.seen_size, latest.seen_updated = conv.size, conv.updated
        pending.checkpoints[conv.key] = latest
        return pending

    async def _flush(self, source: str, pending: _Pending, report: SourceReport) -> None:
        if pending.episodes and self.send is not None:
            result = await self.send(source, pending.episodes)
            report.imported += result.imported
            report.already += result.already
        for key, cp in pending.checkpoints.items():
            self.state.save(source, key, cp)
        pending.episodes, pending.checkpoints, pending.size = [], {}, 0

    def _show(self, r: SourceReport, done: int, total: int, *, force: bool = False) -> None:
        if self.progress is None or not total or (not force and time.monotonic() - self._last_shown < 0.2):
            return
        self._last_shown = time.monotonic()
        width = 24
        filled = int(width * done / total) if total else width
        bar = "#" * filled + "." * (width - filled)
        stored = "would import" if self.send is None else "imported"
        count = r.turns if self.send is None else r.imported
        tty = self.progress.isatty()
        text = (f"{r.source:<15} [{bar}] {done}/{total} conversations · {count} turns {stored} · "
                f"{r.waiting} waiting · {r.secrets_redacted} secrets redacted")
        self.progress.write(f"\r{text}" if tty else f"{text}\n")
        if force and tty:
            self.progress.write("\n")
        self.progress.flush()
