"""write_episode's observable behaviour as one JSON document, to compare two versions of the write path.

    python -m lab.write_rows OUT.json            # in each checkout; then `cmp` the two files
    python -m lab.write_rows --cpu 60 OUT.json   # event-loop CPU per one-fact write instead

Runs a fixed sequence of write_episode calls (entities that resolve exactly, by alias, as a spelling
variant, that defer and are answered with an id or "new", supersessions, a causal hint added later,
restatements, look-alike names kept apart, secrets and other refusals, a merged entity, distilled
facts, another scope) through the handler tier (libs/testing/tiers.py) on one rolled-back connection
of a throw-away Postgres. Writes every call's result or typed error, every SQL statement the calls
sent with its parameters in order, and the rows of facts, entities, entity_aliases, episodes,
audit_log, outbox, deferred_mentions and idempotency. Ids are replaced by labels numbered in order of
first appearance and timestamps are dropped, so two runs of the same code give the same bytes.

`--cpu N` measures the event loop thread's CPU time (time.thread_time) per write over N one-fact
writes shaped like lab/write_profile.py's: the write path's Python and driver work without the
model, which runs in worker threads, and far less sensitive to a busy machine than wall time.
A measurement, not a test.
"""

from __future__ import annotations

import argparse
import datetime as dt
import hashlib
import json
import re
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import psycopg

import echo_memory
from echo_memory.libs.core.contracts.bus import Caller
from echo_memory.libs.core.contracts.errors import EchoError
from echo_memory.libs.local.supervisor.ports import free_port
from echo_memory.libs.local.supervisor.postgres import EmbeddedPostgres
from echo_memory.libs.server import eventloop
from echo_memory.libs.server.embed import MiniLM
from echo_memory.libs.server.store.schema import apply_migrations
from echo_memory.libs.testing.tiers import Handlers, rolled_back

AWS = "AKIA" + "Q3ZK7T2M" + "WX4HB6PN"
UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")

TRACE: list[Any] = []


def _param(v: Any) -> Any:
    if isinstance(v, np.ndarray):
        return "vec:" + hashlib.md5(np.asarray(v, dtype=np.float32).tobytes()).hexdigest()[:12]
    if isinstance(v, (dt.datetime, dt.date)):
        return "<ts>"
    if isinstance(v, dict):
        return {k: _param(x) for k, x in sorted(v.items())}
    if isinstance(v, (list, tuple)):
        return [_param(x) for x in v]
    if hasattr(v, "obj"):  # Jsonb
        return {"jsonb": _param(v.obj)}
    return v if isinstance(v, (str, int, float, bool, type(None))) else repr(v)


# Every statement the write path sends goes through AsyncCursor.execute (conn.execute included);
# recording it there, in this throw-away process only, is what shows the statements' order is kept.
_real_execute = psycopg.AsyncCursor.execute


async def _traced(self: Any, query: Any, params: Any = None, **kw: Any) -> Any:
    TRACE.append({"sql": " ".join(str(query).split()), "params": _param(params)})
    return await _real_execute(self, query, params, **kw)


psycopg.AsyncCursor.execute = _traced  # type: ignore[method-assign]


def ep(entities: list[Any], facts: list[tuple[Any, ...]], **extra: Any) -> dict[str, Any]:
    ents = [e if isinstance(e, dict) else {"name": e[0], "type": e[1]} for e in entities]
    fs = []
    for f in facts:
        d = {"source": f[0], "target": f[1], "relation": f[2], "fact": f[3], "confidence": "extracted"}
        if len(f) > 4:
            d.update(f[4])
        fs.append(d)
    return {"session_id": extra.pop("session_id", "s-1"), "entities": ents, "facts": fs, **extra}


async def scenario(h: Handlers, agent: Caller) -> list[Any]:
    out: list[Any] = []

    async def w(label: str, body: dict[str, Any], caller: Caller = agent) -> dict[str, Any]:
        TRACE.append({"call": label})
        try:
            r = await h.call(caller, "writes", "write_episode", body)
            out.append({label: r})
            return r
        except EchoError as e:
            out.append({label: {"error": type(e).__name__, "message": str(e)}})
            return {}

    await w("first", ep(
        [("Payments API", "service"), ("Stripe", "vendor"), ("Checkout", "service"), ("session cache", "cache"),
         ("Web app", "service"), ("Kubernetes", "platform"), ("Ledger service", "service"), ("Kafka", "broker"),
         ("Grafana", "tool"), ("Redis", "cache")],
        [("Payments API", "Stripe", "charges cards through", "The payments API charges cards through Stripe."),
         ("Checkout", "session cache", "reads", "Checkout reads the session cache."),
         ("Web app", "Kubernetes", "runs on", "The web app runs on Kubernetes.", {"causal_hint": "enabled_by"}),
         ("Ledger service", "Kafka", "publishes to", "The ledger service publishes entries to Kafka."),
         ("Web app", "Grafana", "is watched in", "The web app is watched in Grafana.")],
        idempotency_key="key-1", project="proj"))
    await w("retry same key", ep(
        [("Payments API", "service"), ("Stripe", "vendor")],
        [("Payments API", "Stripe", "charges cards through", "The payments API charges cards through Stripe.")],
        idempotency_key="key-1", project="proj"))
    await w("restated", ep(
        [("payments api", "service"), ("STRIPE", "vendor")],
        [("payments api", "STRIPE", "Charges  cards through", "The payments API charges cards through Stripe.")],
        session_id="s-2"))
    await w("supersede and hint", ep(
        [("Payments API", "service"), ("Stripe", "vendor"), ("Checkout", "service"), ("session cache", "cache")],
        [("Payments API", "Stripe", "charges cards through", "The payments API charges cards through Stripe Radar.",
          {"confidence": "inferred"}),
         ("Checkout", "session cache", "reads", "Checkout reads the session cache.", {"causal_hint": "caused_by"})],
        session_id="s-3"))
    await w("variant", ep(
        [("payments-api", "service"), ("Treasury", "service")],
        [("payments-api", "Treasury", "posts to", "The payments API posts every charge to the treasury.")],
        session_id="s-4"))
    mixed = ep(
        [("k8s", "platform"), ("Billing job", "job"), ("Stripe", "vendor"), ("Reports job", "job")],
        [("Billing job", "k8s", "runs on", "The billing job runs on k8s."),
         ("Billing job", "Stripe", "charges through", "The billing job charges cards through Stripe."),
         ("Reports job", "Stripe", "reads payouts from", "The reports job reads payouts from Stripe.")],
        session_id="s-5")
    partial = await w("partial deferral", mixed)
    await w("deferred again", {**mixed, "facts": mixed["facts"][:1]})
    waiting = partial["deferred"][0]
    await w("answered with id", {**mixed, "facts": [mixed["facts"][i - 1] for i in waiting["waiting_facts"]],
                                 "entity_resolutions": [{"mention": "k8s",
                                                         "entity_id": waiting["candidates"][0]["entity_id"],
                                                         "rationale": "k8s is Kubernetes"}]})
    grafanna = ep([("Grafanna", "tool"), ("Web app", "service")],
                  [("Web app", "Grafanna", "exports to", "The web app exports dashboards to Grafanna.")],
                  session_id="s-6")
    await w("defer grafanna", grafanna)
    await w("answer new", {**grafanna, "entity_resolutions": [{"mention": "Grafanna", "entity_id": "new",
                                                               "rationale": "an internal fork"}]})
    await w("lookalikes", ep(
        [("Payments API v7", "service"), ("Postgres 15", "database"), ("Postgres 16", "database"),
         ("transaction cache", "cache"), ("Ledger", "service")],
        [("Payments API v7", "Postgres 16", "stores data in", "Payments API v7 stores data in Postgres 16."),
         ("Payments API v7", "Postgres 15", "migrated from", "Payments API v7 migrated from Postgres 15."),
         ("Ledger", "transaction cache", "writes", "The ledger writes the transaction cache.")],
        session_id="s-7"))
    await w("ledger is new", ep(
        [("Ledger", "service"), ("transaction cache", "cache")],
        [("Ledger", "transaction cache", "writes", "The ledger writes the transaction cache.")],
        entity_resolutions=[{"mention": "Ledger", "entity_id": "new", "rationale": "the accounting ledger"}],
        session_id="s-7"))
    await w("secret in fact", ep(
        [("CI", "system"), ("ECR", "registry")],
        [("CI", "ECR", "pushes to", f"CI uses {AWS} to push images")]))
    await w("secret in alias", ep(
        [{"name": "CI", "type": "system", "aliases": [AWS]}, ("ECR", "registry")],
        [("CI", "ECR", "pushes to", "CI pushes images to ECR")]))
    await w("two claims one edge (shape)", ep(
        [("CI", "system"), ("ECR", "registry")],
        [("CI", "ECR", "pushes to", "CI pushes images to ECR"), ("ci", "ecr", "Pushes to", "CI pushes to ECR.")]))
    await w("aliases declared", ep(
        [{"name": "PostgreSQL", "type": "database", "aliases": ["Postgres", "PG"]}, ("Orders service", "service")],
        [("Orders service", "PG", "stores orders in", "The orders service stores orders in PostgreSQL.")],
        session_id="s-8"))
    await w("two claims once resolved", ep(
        [("Orders service", "service"), ("PostgreSQL", "database"), ("PG", "database")],
        [("Orders service", "PostgreSQL", "uses", "The orders service uses PostgreSQL."),
         ("Orders service", "PG", "uses", "The orders service uses PG.")],
        session_id="s-9"))
    await w("same entity two mentions", ep(
        [("Kubernetes", "platform"), ("K8S", "platform"), ("Web app", "service"), ("Billing job", "job")],
        [("Web app", "Kubernetes", "is deployed by", "The web app is deployed by Kubernetes."),
         ("Billing job", "K8S", "is scheduled by", "The billing job is scheduled by k8s.")],
        session_id="s-10"))
    await w("bad id", ep([("Stripe", "vendor"), ("Treasury", "service")],
                         [("Stripe", "Treasury", "pays out to", "Stripe pays out to the treasury.")],
                         entity_resolutions=[{"mention": "Stripe", "entity_id": "not-an-id"}]))
    await w("unknown id", ep([("Stripe", "vendor"), ("Treasury", "service")],
                             [("Stripe", "Treasury", "pays out to", "Stripe pays out to the treasury.")],
                             entity_resolutions=[{"mention": "Stripe",
                                                  "entity_id": "00000000-0000-4000-8000-000000000000"}]))
    await w("two resolutions", ep([("Stripe", "vendor"), ("Treasury", "service")],
                                  [("Stripe", "Treasury", "pays out to", "Stripe pays out to the treasury.")],
                                  entity_resolutions=[{"mention": "Stripe", "entity_id": "new"},
                                                      {"mention": "stripe",
                                                       "entity_id": "00000000-0000-4000-8000-000000000000"}]))
    await w("new but exists, changed", ep(
        [("Payments API", "service"), ("Stripe", "vendor")],
        [("Payments API", "Stripe", "charges cards through", "The payments API charges every card through Stripe.")],
        entity_resolutions=[{"mention": "Stripe", "entity_id": "new"}]))
    await w("new but exists, restated", ep(
        [("Payments API", "service"), ("Stripe", "vendor")],
        [("Payments API", "Stripe", "charges cards through", "The payments API charges cards through Stripe Radar.",
          {"confidence": "inferred"})],
        entity_resolutions=[{"mention": "Stripe", "entity_id": "new"}]))
    await w("new but exists, unused", ep(
        [("Payments API", "service"), ("Ledger", "service"), ("Kafka", "broker")],
        [("Payments API", "Ledger", "reconciles with", "The payments API reconciles with the ledger.")],
        entity_resolutions=[{"mention": "Kafka", "entity_id": "new"}]))
    await w("resolution for undeclared mention", ep(
        [("Payments API", "service"), ("Ledger", "service")],
        [("Payments API", "Fraud engine", "consults", "The payments API consults the fraud engine.")],
        entity_resolutions=[{"mention": "Fraud engine", "entity_id": "new", "rationale": "new system"}]))
    await w("no facts", ep([("Payments API", "service")], []))
    await w("unknown mention", ep([("Payments API", "service")], [("Payments API", "Nope", "x", "y z.")]))
    TRACE.append({"call": "merge"})
    try:
        merged = await h.admin_call("writes", "entity_merge", {"keep": "Ledger service", "absorb": "Ledger",
                                                               "reason": "same service"})
        out.append({"merge": merged})
    except EchoError as e:
        out.append({"merge": {"error": type(e).__name__, "message": str(e)}})
    await w("after merge", ep(
        [("Ledger", "service"), ("Kafka", "broker"), ("Ledgr", "service")],
        [("Ledger", "Kafka", "consumes from", "The ledger consumes from Kafka."),
         ("Ledgr", "Kafka", "audits", "Ledgr audits Kafka topics.")],
        session_id="s-11"))
    imported = await h.call(agent, "writes", "import_episodes",
                            {"episodes": [{"content": "Alice: the payments API now retries Stripe twice."}]})
    out.append({"import": imported})
    await w("distilled", ep(
        [("Payments API", "service"), ("Stripe", "vendor")],
        [("Payments API", "Stripe", "retries", "The payments API retries Stripe twice.")],
        source_episode_ids=imported["episode_ids"], session_id="s-12"))
    await w("solo scope", {**ep([("Payments API", "service"), ("Stripe", "vendor")],
                                [("Payments API", "Stripe", "retries", "The payments API retries Stripe twice.")]),
                           "scope": "solo"})
    reader = Caller(org=h.org, agent_id="reader", read_scopes=["*"], write_scopes=[], tool="t")
    await w("no write scope", ep([("A", "x"), ("B", "x")], [("A", "B", "r", "A r B.")]), caller=reader)
    return out


DUMPS = {
    "entities": "SELECT s.name AS scope, e.name, e.type, e.created_by, md5(e.embedding::text) AS emb "
                "FROM entities e JOIN scopes s ON s.id = e.scope_id",
    "entity_aliases": "SELECT e.name, a.alias, s.name AS scope FROM entity_aliases a JOIN entities e ON e.id = a.entity_id "
                      "JOIN scopes s ON s.id = a.scope_id",
    "facts": "SELECT f.*, md5(f.embedding::text) AS emb, f.t_invalid IS NULL AS active FROM facts f",
    "episodes": "SELECT * FROM episodes",
    "audit_log": "SELECT * FROM audit_log ORDER BY id",
    "outbox": "SELECT * FROM outbox ORDER BY id",
    "deferred_mentions": "SELECT * FROM deferred_mentions",
    "idempotency": "SELECT * FROM idempotency",
}
DROP = {"created_at", "written_at", "t_valid", "t_invalid", "published_at", "first_deferred_at", "last_deferred_at",
        "resolved_at", "embedding", "tsv", "occurred_at"}


def _jsonable(v: Any) -> Any:
    if isinstance(v, dict):
        return {k: _jsonable(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_jsonable(x) for x in v]
    if isinstance(v, (dt.datetime, dt.date)):
        return "<ts>"
    if isinstance(v, (str, int, float, bool, type(None))):
        return v
    return str(v)


async def tables(conn: psycopg.AsyncConnection) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, query in DUMPS.items():
        cur = await conn.execute(query)
        cols = [c.name for c in cur.description]
        drop = DROP | {"id"} if name in ("audit_log", "outbox") else DROP  # their order is the row order
        out[name] = [{k: _jsonable(v) for k, v in zip(cols, r, strict=True) if k not in drop}
                     for r in await cur.fetchall()]
    return out


def label(doc: dict[str, Any]) -> dict[str, Any]:
    """Every UUID replaced by a label numbered in order of first appearance (results, trace, then rows)."""
    labels: dict[str, str] = {}

    def sub(m: re.Match[str]) -> str:
        return labels.setdefault(m.group(0), f"<id{len(labels)}>")

    text = json.dumps({"results": doc["results"], "trace": doc["trace"], "ordered": {
        k: doc["tables"][k] for k in ("audit_log", "outbox")}}, sort_keys=True)
    UUID.sub(sub, text)
    rest = re.sub(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d[.\d]*(Z|[+-]\d\d:\d\d)?", "<ts>", json.dumps(doc, sort_keys=True))
    done = json.loads(UUID.sub(sub, rest))
    for t in done["trace"]:  # CANONICAL's `= ANY(ids)` is built from a set: its order carries no meaning
        if isinstance(t.get("params"), dict) and isinstance(t["params"].get("ids"), list):
            t["params"]["ids"].sort()
    for k in ("entities", "entity_aliases", "facts", "episodes", "deferred_mentions", "idempotency"):
        done["tables"][k].sort(key=lambda r: json.dumps(r, sort_keys=True))
    return done


async def cpu(h: Handlers, agent: Caller, n: int) -> dict[str, Any]:
    """Main-thread (event loop) CPU ms per one-fact write: the write path's Python and psycopg work,
    not the model (it runs in worker threads). Shape as lab/write_profile: a known entity and a new one."""
    await h.call(agent, "writes", "write_episode", ep(
        [("Known service", "service"), ("Seed", "probe")],
        [("Known service", "Seed", "reports to", "The known service reports to the seed.")]))
    loop_cpu, proc_cpu, wall = [], [], []
    for i in range(n + 5):
        body = ep([("Known service", "service"), (f"probe {i}", "probe")],
                  [("Known service", f"probe {i}", "reports to", f"The known service reports item {i} to probe {i}.")],
                  entity_resolutions=[{"mention": f"probe {i}", "entity_id": "new", "rationale": "probe"}])
        t0, p0, w0 = time.thread_time(), time.process_time(), time.perf_counter()
        r = await h.call(agent, "writes", "write_episode", body)
        t1, p1, w1 = time.thread_time(), time.process_time(), time.perf_counter()
        assert r["stored"], r
        if i >= 5:
            loop_cpu.append((t1 - t0) * 1000)
            proc_cpu.append((p1 - p0) * 1000)
            wall.append((w1 - w0) * 1000)

    def spread(xs: list[float]) -> dict[str, float]:
        q = statistics.quantiles(xs, n=10)
        return {"p50": round(statistics.median(xs), 3), "p10": round(q[0], 3), "p90": round(q[-1], 3),
                "mean": round(statistics.fmean(xs), 3)}
    return {"loop_thread_cpu_ms": spread(loop_cpu), "process_cpu_ms": spread(proc_cpu), "wall_ms": spread(wall),
            "raw_loop_cpu": loop_cpu}


async def run(a: argparse.Namespace) -> int:
    sys.stderr.write(f"echo_memory from {Path(echo_memory.__file__).resolve().parent}\n")
    base = None
    server = None
    if a.dsn:
        dsn = a.dsn
    else:
        base = Path(tempfile.mkdtemp(prefix="rowdump-pg-"))
        server = EmbeddedPostgres(base, free_port(), durable=False)
        server.start()
        with psycopg.connect(server.url("postgres"), autocommit=True) as c:
            c.execute('CREATE DATABASE "dump"')
        dsn = server.url("dump")
        apply_migrations(dsn)
    try:
        embedder = MiniLM()
        org = "dump-org"
        agent = Caller(org=org, agent_id="claude", read_scopes=["*"], write_scopes=["*"], tool="claude-code")
        doc: dict[str, Any] = {}
        async with rolled_back(dsn) as conn:
            h = Handlers(conn, org, embedder)
            if a.cpu:
                doc["cpu"] = await cpu(h, agent, a.cpu)
            else:
                TRACE.clear()
                doc["results"] = await scenario(h, agent)
                doc["trace"] = [_jsonable(t) for t in TRACE]
                doc["tables"] = await tables(conn)
        if not a.cpu:
            doc = label(doc)
        Path(a.out).write_text(json.dumps(doc, indent=1, sort_keys=True, ensure_ascii=False) + "\n")
    finally:
        if server is not None:
            server.stop()
            shutil.rmtree(base, ignore_errors=True)  # type: ignore[arg-type]
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("out", help="where to write the JSON document")
    parser.add_argument("--cpu", type=int, default=0, metavar="N",
                        help="measure event-loop CPU over N one-fact writes instead of dumping rows")
    parser.add_argument("--dsn", help="a migrated, empty database to use (default: a throw-away server)")
    args = parser.parse_args(argv)
    if args.cpu < 0:
        sys.stderr.write("write_rows: --cpu takes a positive number of writes\n")
        return 2
    return eventloop.run(run(args), use_uvloop=True)


if __name__ == "__main__":
    raise SystemExit(main())
