"""Send a source's records through `write_episode`, in batches, and count what became of each.

Every record goes the way an agent's write goes: entity resolution (a near match defers the
record with its candidates), supersession of the active edge, the secret filter, an audit row
naming the agent and the tool (`echo-memory import --from <source>`). A batch is one
write_episode call (at most MAX_FACTS facts, MAX_ENTITIES entities, one claim per edge, one
agent and session); its idempotency key is a digest of its records, so a batch sent twice is
answered from the store and stores nothing twice. Batches are sent a few at a time (the model
embeds outside the scope's lock); two batches that touch one edge are never in flight together,
so versions of a record land in their source order. A batch the store refuses is sent again
one record at a time, so each refusal names its record.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol, TextIO

from echo_memory.libs.core.contracts.end_facts import MAX_END_FACTS, EndFactsInput
from echo_memory.libs.core.contracts.errors import EchoError
from echo_memory.libs.core.contracts.parsing import parse_args
from echo_memory.libs.core.contracts.verbs import END_FACTS, WRITE_EPISODE, In, Out, Verb
from echo_memory.libs.core.contracts.write import MAX_ENTITIES, MAX_FACTS, WriteEpisodeInput, WriteEpisodeResult
from echo_memory.libs.local.importers.records import OUTCOMES, WRITTEN, Outcome, SourceRecord
from echo_memory.libs.local.importers.state import FromState


class Send(Protocol):
    """Sends `verb` with `args` as `agent`: its result, or the EchoError the store refused it with.

    The verb is WRITE_EPISODE, or END_FACTS for a record that ends an edge (a deletion at the source).
    """

    async def __call__(self, agent: str, verb: Verb[In, Out], args: In) -> Out: ...


IN_FLIGHT = 4
RETRIES = 4  # a retryable error (conflict, unavailable, bus_timeout) is tried again this often
# Errors about the whole import, not one record (the scope, the caller, the schema): they end the run.
RUN_ERRORS = frozenset({"scope_denied", "not_found", "unauthenticated", "schema_too_old", "schema_too_new",
                        "not_built"})


def _key(name: str) -> str:
    return name.strip().lower()


def _edge(record: SourceRecord) -> tuple[str, str, str]:
    assert record.fact is not None
    f = record.fact
    return _key(f.source), _key(f.target), " ".join(f.relation.split()).lower()


@dataclass
class Batch:
    agent: str
    session: str
    project: str | None
    ends: bool = False  # an end_facts call instead of a write_episode
    records: list[SourceRecord] = field(default_factory=list)
    entities: dict[str, dict[str, str]] = field(default_factory=dict)
    edges: set[tuple[str, str, str]] = field(default_factory=set)

    def fits(self, record: SourceRecord, agent: str) -> bool:
        new = {_key(e.name) for e in record.entities} - self.entities.keys()
        return (agent == self.agent and record.session == self.session and record.project == self.project
                and record.ends == self.ends and len(self.records) < (MAX_END_FACTS if self.ends else MAX_FACTS)
                and len(self.entities) + len(new) <= MAX_ENTITIES
                and _edge(record) not in self.edges)

    def add(self, record: SourceRecord) -> None:
        self.records.append(record)
        for e in record.entities:
            self.entities.setdefault(_key(e.name), {"name": e.name, "type": e.type})
        self.edges.add(_edge(record))

    def body(self, scope: str | None) -> dict[str, Any]:
        """The batch's arguments as JSON, only the fields it sets: what is sent, and what its key digests."""
        if self.ends:
            ended = [{"source": r.fact.source, "target": r.fact.target, "relation": r.fact.relation,
                      "reason": r.reason or "ended at the source"} for r in self.records if r.fact is not None]
            return {"session_id": self.session, "facts": ended, **({"scope": scope} if scope else {})}
        facts = [{"source": r.fact.source, "target": r.fact.target, "relation": r.fact.relation,
                  "fact": r.fact.text, "confidence": "extracted"} for r in self.records if r.fact is not None]
        body: dict[str, Any] = {"session_id": self.session, "entities": list(self.entities.values()), "facts": facts}
        if self.project:
            body["project"] = self.project
        if scope:
            body["scope"] = scope
        return body

    def write_input(self, scope: str | None, key: str) -> WriteEpisodeInput:
        """The write_episode arguments; InvalidArgument, as the service would answer, for a record it refuses."""
        return parse_args(WriteEpisodeInput, {**self.body(scope), "idempotency_key": key})

    def end_input(self, scope: str | None) -> EndFactsInput:
        """The end_facts arguments; InvalidArgument, as the service would answer, for a record it refuses."""
        return parse_args(EndFactsInput, self.body(scope))

    def key(self, source: str, scope: str | None) -> str:
        body = json.dumps([source, self.agent, self.body(scope), [r.key for r in self.records]],
                          sort_keys=True, ensure_ascii=False)
        return f"import-from:{source}:{hashlib.sha256(body.encode('utf-8')).hexdigest()[:48]}"


@dataclass
class Report:
    """What became of every record: counts per outcome, and a reason for every record not stored."""

    source: str
    dry_run: bool = False
    records: int = 0
    kinds: dict[str, int] = field(default_factory=dict)
    outcomes: dict[str, int] = field(default_factory=lambda: dict.fromkeys(OUTCOMES, 0))
    would_write: int = 0  # a dry run: records that would be sent
    earlier_run: int = 0  # of `unchanged`: records an earlier run stored (skipped, not sent)
    reasons: list[dict[str, Any]] = field(default_factory=list)
    unmapped: list[str] = field(default_factory=list)  # what the source holds that the mapping leaves out

    def note(self, record: SourceRecord, outcome: Outcome, reason: str | None = None, **extra: Any) -> None:
        self.outcomes[outcome] += 1
        if outcome not in WRITTEN:
            self.reasons.append({"where": record.where, "kind": record.kind, "outcome": outcome,
                                 "reason": reason or outcome, **extra})

    def as_dict(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items()}


class Importer:
    """Runs one import of `source`'s records through `send` (None: a dry run that sends and writes nothing)."""

    def __init__(self, source: str, state: FromState, send: Send | None, *, scope: str | None,
                 agent: str, progress: TextIO | None = None, in_flight: int = IN_FLIGHT) -> None:
        self.source = source
        self.state = state
        self.send = send
        self.scope = scope
        self.agent = agent
        self.progress = progress
        self.in_flight = in_flight
        self.report = Report(source, dry_run=send is None)
        self._flying: list[tuple[Batch, str, asyncio.Task[list[tuple[Outcome, str | None, dict[str, Any]]]]]] = []
        self._seen: dict[str, str] = {}
        self._shown = 0.0
        self._started = time.monotonic()

    async def run(self, records: Iterable[SourceRecord]) -> Report:
        """Every record stored or reported; raises EchoError when the system fails past its retries."""
        batch: Batch | None = None
        try:
            for record in records:
                self.report.records += 1
                self.report.kinds[record.kind] = self.report.kinds.get(record.kind, 0) + 1
                if record.outcome is not None:
                    self.report.note(record, record.outcome, record.reason)
                    continue
                first = self._seen.get(record.key)
                if first is not None:
                    self.report.note(record, "unchanged", f"the same record as {first}")
                    continue
                self._seen[record.key] = record.where
                agent = record.agent or self.agent
                if self.send is not None and self.state.done(self.source, self._digest(record, agent)) is not None:
                    self.report.note(record, "unchanged", "stored by an earlier run of this import")
                    self.report.earlier_run += 1
                    continue
                if batch is not None and not batch.fits(record, agent):
                    await self._launch(batch)
                    batch = None
                if batch is None:
                    batch = Batch(agent, record.session, record.project, ends=record.ends)
                batch.add(record)
                self._show()
            if batch is not None:
                await self._launch(batch)
            while self._flying:
                await self._land()
        finally:
            for _, _, task in self._flying:
                task.cancel()
        self._show(force=True)
        return self.report

    async def _launch(self, batch: Batch) -> None:
        if self.send is None:
            self.report.would_write += len(batch.records)
            return
        key = batch.key(self.source, self.scope)
        while self._flying and (len(self._flying) >= self.in_flight
                                or any(batch.edges & b.edges for b, _, _ in self._flying)):
            await self._land()
        self._flying.append((batch, key, asyncio.create_task(self._write(batch, key))))

    async def _land(self) -> None:
        batch, key, task = self._flying.pop(0)
        results = await task
        done: list[tuple[str, str]] = []
        for record, (outcome, reason, extra) in zip(batch.records, results, strict=True):
            self.report.note(record, outcome, reason, **extra)
            if outcome in WRITTEN or outcome == "unchanged":
                done.append((self._digest(record, batch.agent), outcome))
        self.state.mark_done(self.source, done)

    def _digest(self, record: SourceRecord, agent: str) -> str:
        body = json.dumps([record.key, agent, self.scope, record.session, record.project,
                           record.model_dump(mode="json", include={"entities", "fact"})], sort_keys=True)
        return hashlib.sha256(body.encode("utf-8")).hexdigest()

    async def _write(self, batch: Batch, key: str) -> list[tuple[Outcome, str | None, dict[str, Any]]]:
        try:
            if batch.ends:
                ended = await self._call(batch.agent, END_FACTS, batch.end_input(self.scope))
                return [("ended", None, {"fact_id": r.fact_id}) if r.outcome == "ended" else
                        ("unchanged", "no current fact on that edge (ended already, or never stored)", {})
                        for r in ended.results]
            result = await self._call(batch.agent, WRITE_EPISODE, batch.write_input(self.scope, key))
        except EchoError as exc:
            if exc.retryable or exc.code in RUN_ERRORS:
                raise  # the system or the scope, not a record: the run stops, acknowledged records stay
            if len(batch.records) == 1:
                return [("refused", f"{exc.code}: {exc.message}", {})]
            # One record of the batch is refused (a secret, a clash once names resolve): find which.
            out: list[tuple[Outcome, str | None, dict[str, Any]]] = []
            for record in batch.records:
                single = Batch(batch.agent, batch.session, batch.project, ends=batch.ends)
                single.add(record)
                out += await self._write(single, single.key(self.source, self.scope))
            return out
        return outcomes_of(batch.records, result)

    async def _call(self, agent: str, verb: Verb[In, Out], args: In) -> Out:
        assert self.send is not None
        for attempt in range(RETRIES + 1):
            try:
                return await self.send(agent, verb, args)
            except EchoError as exc:
                if not exc.retryable or attempt == RETRIES:
                    raise
                await asyncio.sleep(exc.retry_after or 0.5 * 2 ** attempt)
        raise AssertionError("unreachable: the last attempt raises")

    def _show(self, *, force: bool = False) -> None:
        if self.progress is None or (not force and time.monotonic() - self._shown < 0.5):
            return
        self._shown = time.monotonic()
        r = self.report
        rate = r.records / max(time.monotonic() - self._started, 1e-6)
        done = ", ".join(f"{n} {o}" for o, n in r.outcomes.items() if n)
        text = f"{self.source}: {r.records} records read ({rate:.0f}/s){'; ' + done if done else ''}"
        tty = self.progress.isatty()
        self.progress.write(f"\r{text}" if tty else f"{text}\n")
        if force and tty:
            self.progress.write("\n")
        self.progress.flush()


def outcomes_of(records: list[SourceRecord], result: WriteEpisodeResult) -> list[tuple[Outcome, str | None,
                                                                                         dict[str, Any]]]:
    """Each record's outcome in the batch's answer, in record order.

    A deferred record is named by position in the result; the others are matched by edge, in order
    (created edges and restated ones keep the order of the facts they answer).
    """
    waiting: dict[int, dict[str, Any]] = {}
    for d in result.deferred:
        for position in d.waiting_facts:
            waiting[position] = {"mention": d.mention, "candidates": [
                {"entity_id": c.entity_id, "name": c.name, "score": c.score} for c in d.candidates]}
    created, restated = list(result.edges_created), list(result.restated)
    out: list[tuple[Outcome, str | None, dict[str, Any]]] = []
    for position, record in enumerate(records, start=1):
        if position in waiting:
            extra = waiting[position]
            out.append(("deferred", f"'{extra['mention']}' may be a stored entity; not stored until answered", extra))
            continue
        assert record.fact is not None
        relation = " ".join(record.fact.relation.split()).lower()
        if restated and restated[0].relation.lower() == relation and (
                not created or created[0].relation.lower() != relation or _same_ends(restated[0], record)):
            restated.pop(0)
            out.append(("unchanged", "the store holds this claim already", {}))
        elif created:
            edge = created.pop(0)
            out.append(("superseded", None, {}) if edge.supersedes else ("stored", None, {}))
        else:
            raise EchoError(f"the store answered fewer edges than the batch sent ({record.where})")
    return out


def _same_ends(edge: Any, record: SourceRecord) -> bool:
    assert record.fact is not None
    return bool(_key(edge.source) == _key(record.fact.source) and _key(edge.target) == _key(record.fact.target))
