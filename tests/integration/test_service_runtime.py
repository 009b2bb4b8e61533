"""The service runtime over real NATS and Postgres: the error seam, concurrency, and what each process loads."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import psycopg
import pytest
from pydantic import BaseModel, SecretStr

from echo_memory.libs.core.config import Settings, Workers
from echo_memory.libs.core.contracts.audit import WhyResult
from echo_memory.libs.core.contracts.bus import Caller, Reply
from echo_memory.libs.core.contracts.consolidation import ConsolidateLogResult
from echo_memory.libs.core.contracts.errors import Conflict, EchoError, Internal, InvalidArgument, Unavailable
from echo_memory.libs.core.contracts.verbs import WHY, verb, verbs_of
from echo_memory.libs.local.supervisor.ports import free_port
from echo_memory.libs.server.bus.broker import make_broker
from echo_memory.libs.server.bus.client import BusClient
from echo_memory.libs.server.service.context import RequestContext
from echo_memory.libs.server.service.routes import Route, Routes, check_routes, encode_reply
from echo_memory.libs.server.service.runner import start_service
from echo_memory.libs.testing import EchoStack, tool_error

REPO = Path(__file__).resolve().parents[2]

# A test service borrows the consolidation service's verbs: any handler can sit behind a real subscriber.
SERVICE, VERB = "consolidation", "consolidate_log"


def _caller(org: str) -> Caller:
    return Caller(org=org, agent_id="admin", read_scopes=["*"], write_scopes=["*"])


async def _serve(database_url: str, nats_url: str, org: str, handler: Any, workers: int = 4) -> Any:
    settings = Settings(
        org=org, database_url=SecretStr(database_url), nats_url=nats_url,
        workers=Workers(consolidation=workers),
    )
    return await start_service(SERVICE, lambda ctx: _every_verb(handler), settings)


def _every_verb(handler: Any) -> Routes:
    """`handler` behind every verb of the borrowed service, as check_routes requires."""
    return [Route(v, handler) for v in verbs_of(SERVICE)]


async def _call(nats_url: str, org: str, timeout: float = 10) -> dict[str, Any]:
    broker = make_broker(nats_url)
    await broker.start()
    try:
        return await BusClient(broker).call_by_name(caller=_caller(org), service=SERVICE, verb=VERB, args={}, timeout=timeout)
    finally:
        await broker.stop()


def _raising_sql(sqlstate: str) -> Any:
    async def handler(rc: RequestContext, args: BaseModel) -> ConsolidateLogResult:
        await rc.conn.execute(f"DO $$ BEGIN RAISE EXCEPTION 'injected' USING ERRCODE = '{sqlstate}'; END $$")
        return ConsolidateLogResult(runs=[])

    return handler


@pytest.mark.parametrize(
    ("sqlstate", "expected"),
    [("40P01", Conflict), ("40001", Conflict), ("55P03", Conflict), ("57P01", Unavailable), ("XX000", Internal)],
    ids=["deadlock", "serialization", "lock-not-available", "admin-shutdown", "internal-error"],
)
async def test_database_errors_reach_the_caller_most_specific_first(
    database_url: str, nats_url: str, org: str, sqlstate: str, expected: type[EchoError]
) -> None:
    running = await _serve(database_url, nats_url, org, _raising_sql(sqlstate))
    try:
        with pytest.raises(EchoError) as caught:
            await _call(nats_url, org)
    finally:
        await running.stop()
    assert type(caught.value) is expected
    assert caught.value.retryable is (expected is not Internal)
    if expected is Conflict:
        assert "retry the same call" in caught.value.message


async def test_text_with_a_nul_character_is_the_callers_invalid_argument(
    database_url: str, nats_url: str, org: str
) -> None:
    async def handler(rc: RequestContext, args: BaseModel) -> ConsolidateLogResult:
        await rc.conn.execute("SELECT %s::text", ("before\x00after",))
        return ConsolidateLogResult(runs=[])

    running = await _serve(database_url, nats_url, org, handler)
    try:
        with pytest.raises(InvalidArgument, match="NUL"):
            await _call(nats_url, org)
    finally:
        await running.stop()


async def test_a_handler_that_answers_another_verbs_model_is_an_internal_error(
    database_url: str, nats_url: str, org: str
) -> None:
    # mypy refuses such a route; this is the runtime's own check for a handler that slipped past it.
    async def handler(rc: RequestContext, args: BaseModel) -> WhyResult:
        return WhyResult.model_construct()

    running = await _serve(database_url, nats_url, org, handler)
    try:
        with pytest.raises(Internal, match="answered WhyResult, not ConsolidateLogResult"):
            await _call(nats_url, org)
    finally:
        await running.stop()


async def test_one_process_answers_requests_side_by_side(database_url: str, nats_url: str, org: str) -> None:
    spans: list[tuple[float, float]] = []

    async def handler(rc: RequestContext, args: BaseModel) -> ConsolidateLogResult:
        started = time.monotonic()
        await rc.conn.execute("SELECT pg_sleep(1.0)")
        spans.append((started, time.monotonic()))
        return ConsolidateLogResult(runs=[])

    running = await _serve(database_url, nats_url, org, handler, workers=4)
    try:
        await asyncio.gather(*(_call(nats_url, org) for _ in range(4)))
    finally:
        await running.stop()
    assert len(spans) == 4
    # All four were in flight at once: the last to start began before the first to finish ended
    # (1 s each, so a slow connection open on a loaded machine still overlaps).
    assert max(start for start, _ in spans) < min(end for _, end in spans)


async def test_an_injected_deadlock_in_write_episode_is_a_retryable_conflict_and_stores_nothing(
    stack: EchoStack, database_url: str
) -> None:
    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute(
            "CREATE FUNCTION inject_deadlock() RETURNS trigger LANGUAGE plpgsql AS "
            "$$ BEGIN RAISE EXCEPTION 'injected' USING ERRCODE = '40P01'; END $$"
        )
        conn.execute("CREATE TRIGGER inject BEFORE INSERT ON facts FOR EACH ROW EXECUTE FUNCTION inject_deadlock()")
    episode = {
        "session_id": "s-deadlock",
        "entities": [{"name": "Billing API", "type": "service"}, {"name": "Razorpay", "type": "vendor"}],
        "facts": [{"source": "Billing API", "target": "Razorpay", "relation": "charges cards through",
                   "fact": "The billing API charges cards through Razorpay.", "confidence": "extracted"}],
    }
    async with stack.client(stack.issue_token("codex")) as client:
        result = await client.call_tool("write_episode", episode)
    error = tool_error(result)
    assert error["code"] == "conflict" and error["retryable"] is True
    assert result.structured_content["stored"] is False
    with psycopg.connect(database_url) as conn:
        assert conn.execute("SELECT count(*) FROM episodes").fetchone() == (0,)


def test_routes_that_disagree_with_the_verb_table_are_refused_at_start() -> None:
    async def handler(rc: RequestContext, args: BaseModel) -> ConsolidateLogResult:
        return ConsolidateLogResult(runs=[])

    check_routes(SERVICE, _every_verb(handler))
    for routes in ([], _every_verb(handler)[1:], [*_every_verb(handler), Route(verb(SERVICE, VERB), handler)],
                   [*_every_verb(handler), Route(WHY, handler)],
                   # the right name, but a look-alike verb whose result model is not the table's
                   [Route(replace(v, output=WhyResult), handler) for v in verbs_of(SERVICE)]):
        with pytest.raises(ValueError, match="verbs.py"):
            check_routes(SERVICE, routes)


def test_a_reply_too_large_for_the_bus_becomes_a_typed_error() -> None:
    reply = Reply(ok=True, result={"blob": "x" * 2_000})
    assert Reply.model_validate_json(encode_reply(reply, 10_000, "audit", "export")).ok
    refused = Reply.model_validate_json(encode_reply(reply, 1_000, "audit", "export"))
    assert not refused.ok and refused.error is not None
    assert refused.error.code == "internal" and "over the bus limit" in refused.error.message


def _loaded_libraries(pid: int) -> str:
    return Path(f"/proc/{pid}/maps").read_text()


@pytest.mark.parametrize(("name", "loads_model"), [("edge", False), ("audit", False), ("retrieval", True)])
def test_only_processes_that_embed_load_the_model_runtime_and_the_edge_no_database_driver(
    database_url: str, nats_url: str, name: str, loads_model: bool
) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ECHO_MEMORY_")}
    env.update(
        ECHO_MEMORY_NATS_URL=nats_url, ECHO_MEMORY_DATABASE_URL=database_url,
        ECHO_MEMORY_EDGE_PORT=str(free_port()),
        PYTHONPATH=os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")]),
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", "import sys; from echo_memory.libs.local.cli.main import main; sys.exit(main())", "service", name],
        env=env, cwd=REPO,
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert "ready" in line, line + proc.stdout.read()
        maps = _loaded_libraries(proc.pid)
    finally:
        proc.terminate()
        proc.wait(timeout=20)
    assert ("onnxruntime" in maps) is loads_model, name
    if name == "edge":
        assert "psycopg" not in maps
    else:
        assert "psycopg" in maps  # the check can see the driver where it is loaded


async def test_reindex_loads_the_model_only_when_it_re_embeds(database_url: str, nats_url: str, org: str) -> None:
    from echo_memory.services.reindex.app import routes

    settings = Settings(org=org, database_url=SecretStr(database_url), nats_url=nats_url)
    running = await start_service("reindex", routes, settings, lazy_model=True)
    broker = make_broker(nats_url)
    await broker.start()
    bus = BusClient(broker)
    try:
        status = await bus.call_by_name(caller=_caller(org), service="reindex", verb="lexical_status", args={}, timeout=30)
        assert status and running.ctx.embedder is None  # a freshness check needs only the model's name
        await bus.call_by_name(caller=_caller(org), service="reindex", verb="reindex", args={"step": "embeddings"},
                       timeout=120)
        assert running.ctx.embedder is not None
    finally:
        await broker.stop()
        await running.stop()


async def test_reindex_keeps_answering_while_its_model_loads(database_url: str, nats_url: str, org: str) -> None:
    from echo_memory.services.reindex.app import routes

    settings = Settings(org=org, database_url=SecretStr(database_url), nats_url=nats_url)
    running = await start_service("reindex", routes, settings, lazy_model=True)
    broker = make_broker(nats_url)
    await broker.start()
    bus = BusClient(broker)
    try:
        first = asyncio.create_task(bus.call_by_name(caller=_caller(org), service="reindex", verb="reindex",
                                             args={"step": "embeddings"}, timeout=120))
        # Ask for freshness while the first re-embedding loads the model (0.3–1 s). A load on the
        # event loop would hold this answer until the model is in memory.
        while not running.ctx._loading.locked() and not first.done():
            await asyncio.sleep(0.005)
        status = await bus.call_by_name(caller=_caller(org), service="reindex", verb="lexical_status", args={}, timeout=30)
        answered_while_loading = running.ctx.embedder is None
        await first
    finally:
        await broker.stop()
        await running.stop()
    assert status
    assert answered_while_loading
    assert running.ctx.embedder is not None
