"""health: read the store's own tables, score how well the memory is used, and say what to fix.

Reads only, admin only (it lists every agent's tokens and writes). Each figure comes from one
statement of health.sql; `score_checks` turns the figures into weighted checks (docs/health.md
lists every check, its weight and its rule), so the score is reproducible from the figures alone.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
from psycopg.rows import dict_row

from echo_memory.libs.core.contracts.bus import Caller
from echo_memory.libs.core.contracts.demo import is_demo_scope
from echo_memory.libs.core.contracts.health import (
    AgentWrites,
    CalibrationState,
    CheckStatus,
    ConsolidationState,
    EmbeddingState,
    HealthCheck,
    HealthFigures,
    HealthInput,
    HealthResult,
    LexicalState,
)
from echo_memory.libs.core.contracts.identity import ADMIN_AGENT
from echo_memory.libs.core.contracts.reindex import CODE_EMBEDDING_MODEL as CODE_MODEL
from echo_memory.libs.core.contracts.reindex import LEXICAL_FORMAT_VERSION
from echo_memory.libs.server.store.access import Scope, accessible_scopes, require_admin, resolve_scope, token_grants
from echo_memory.libs.server.store.migrations import CODE_SCHEMA_VERSION
from echo_memory.libs.server.store.schema import read_version_async
from echo_memory.services.audit.health_queries import sql

FRESH_HOURS = 24  # a real write within a day: fresh; within a week: half the points
STALE_HOURS = 24 * 7
BULK_SHARE_MAX = 0.5
READS_PER_DAY_GOOD = 1.0
READ_HIT_GOOD = 0.8
RECALL_SHARE_GOOD = 0.5
SAVES_PER_READ_GOOD = 0.05


async def health(conn: psycopg.AsyncConnection, caller: Caller, args: HealthInput) -> HealthResult:
    """The score, the checks (strong or weak, with an action) and every figure they come from.

    `args.scope` limits it to one scope; default every scope of the org. An empty store scores
    low and says why (nobody writes or reads yet); it is not an error. Raises ScopeDenied unless
    the caller is the admin identity, NotFound for a scope that does not exist.
    """
    require_admin(caller, "see the health of the memory")
    scopes = await _scopes(conn, caller, args.scope, args.include_demo)
    now = datetime.now(tz=UTC)
    figures = await read_figures(conn, scopes, now, args.window_days)
    checks = score_checks(figures)
    weak = sorted((c for c in checks if c.status != "strong"), key=lambda c: c.points - c.weight)
    return HealthResult(
        score=round(sum(c.points for c in checks)), generated_at=now, checks=checks, figures=figures,
        strong=[c.name for c in checks if c.status == "strong"], weak=[c.name for c in weak],
    )


async def _scopes(conn: psycopg.AsyncConnection, caller: Caller, name: str | None, include_demo: bool) -> list[Scope]:
    if name is not None:
        return [await resolve_scope(conn, caller, name, "read")]
    # Invented demo data would otherwise raise or sink the score of the user's own memory.
    return [s for s in await accessible_scopes(conn, caller, "read") if include_demo or not is_demo_scope(s.name)]


async def _one(conn: psycopg.AsyncConnection, name: str, params: dict[str, Any]) -> dict[str, Any]:
    async with conn.cursor(row_factory=dict_row) as cur:
        await cur.execute(sql(name), params)
        row = await cur.fetchone()
    return dict(row or {})


async def _all(conn: psycopg.AsyncConnection, name: str, params: dict[str, Any]) -> list[dict[str, Any]]:
    async with conn.cursor(row_factory=dict_row) as cur:
        await cur.execute(sql(name), params)
        return list(await cur.fetchall())


async def read_figures(
    conn: psycopg.AsyncConnection, scopes: list[Scope], now: datetime, window_days: int
) -> HealthFigures:
    """Every figure of `scopes` from the store's tables; the read figures cover the last `window_days`."""
    ids = [s.id for s in scopes if s.id is not None]
    names = {s.id: s.name for s in scopes}
    params = {"scope_ids": ids, "stored_names": [s.stored_name for s in scopes], "admin": ADMIN_AGENT,
              "since": now - timedelta(days=window_days)}
    facts = await _one(conn, "facts", params)
    reads = await _one(conn, "reads", params)
    writers = [AgentWrites(**r) for r in await _all(conn, "writers", params)]
    wired = _wired_agents(await _all(conn, "live_tokens", params), scopes)
    wrote = {w.agent_id for w in writers}
    count, hits = int(reads["reads"]), int(reads["reads_with_results"])
    saves = int((await _one(conn, "saves", params))["saves"])
    dump = int(facts["full_dump_tokens"])
    recall_mean = reads["recall_tokens_mean"]
    last_real = facts["last_real_write"]
    calibration = await _one(conn, "calibration", params)
    flagged = await _one(conn, "instruction_like", params)
    return HealthFigures(
        scopes=[s.name for s in scopes], window_days=window_days,
        facts=facts["facts"], active_facts=facts["active_facts"], bulk_facts=facts["bulk_facts"],
        bulk_share=facts["bulk_facts"] / facts["facts"] if facts["facts"] else None,
        imported_episodes=(await _one(conn, "imported_episodes", params))["imported_episodes"],
        last_real_write=last_real, last_write=facts["last_write"],
        hours_since_real_write=(now - last_real).total_seconds() / 3600 if last_real else None,
        writers=writers, agents_wired=wired, agents_never_writing=[a for a in wired if a not in wrote],
        reads=count, reads_per_day=count / window_days, reads_with_results=hits,
        read_hit_share=hits / count if count else None,
        recall_tokens_mean=recall_mean, full_dump_tokens=dump,
        recall_share_of_dump=recall_mean / dump if recall_mean is not None and dump else None,
        saves=saves, saves_per_read=saves / count if count else None,
        deferred_waiting=(await _one(conn, "deferred_waiting", params))["deferred_waiting"],
        instruction_like_facts=flagged["instruction_like_facts"],
        instruction_like_episodes=flagged["instruction_like_episodes"],
        lexical_stale=_lexical_stale(await _all(conn, "lexical", params), names),
        embedding_mismatch=[EmbeddingState(scope=names[str(r["scope_id"])], model=r["model"])
                            for r in await _all(conn, "embedding_models", params) if r["model"] != CODE_MODEL],
        code_embedding_model=CODE_MODEL,
        schema_version=await read_version_async(conn), code_schema_version=CODE_SCHEMA_VERSION,
        calibration=CalibrationState(ran=bool(calibration), last_run=calibration.get("created_at"),
                                     kind=calibration.get("kind"), reason=calibration.get("reason")),
        consolidation=ConsolidationState(**await _one(conn, "consolidation", params)),
    )


def _wired_agents(tokens: list[dict[str, Any]], scopes: list[Scope]) -> list[str]:
    """Agents holding a live token that grants writing at least one of `scopes`."""
    wired: list[str] = []
    for row in tokens:
        caller = Caller(org="-", agent_id=row["agent_id"], write_scopes=list(row["write_scopes"]))
        if row["agent_id"] not in wired and any(token_grants(caller, s.name, "write") for s in scopes):
            wired.append(row["agent_id"])
    return wired


def _lexical_stale(rows: list[dict[str, Any]], names: dict[str | None, str]) -> list[LexicalState]:
    """Corpora whose statistics are missing, of another format, or count other rows than exist."""
    out: list[LexicalState] = []
    for r in rows:
        reason = None
        if r["stats_rows"] is None:
            reason = "no statistics" if r["rows"] else None
        elif r["format_version"] != LEXICAL_FORMAT_VERSION:
            reason = f"statistics are format {r['format_version']}, the code reads {LEXICAL_FORMAT_VERSION}"
        elif r["stats_rows"] != r["rows"]:
            reason = f"statistics count {r['stats_rows']} rows, the corpus holds {r['rows']}"
        if reason:
            out.append(LexicalState(scope=names[str(r["scope_id"])], corpus=r["corpus"], rows=r["rows"],
                                    stats_rows=r["stats_rows"], format_version=r["format_version"], reason=reason))
    return out


def _check(name: str, weight: int, share: float, detail: str, action: str | None, *, known: bool = True) -> HealthCheck:
    """A check earning `share` (0..1) of its weight; strong only at the full share."""
    share = max(0.0, min(1.0, share)) if known else 0.0
    status: CheckStatus = "unknown" if not known else ("strong" if share >= 1.0 else "weak")
    return HealthCheck(name=name, status=status, weight=weight, points=round(weight * share, 2), detail=detail,
                       action=None if status == "strong" else action)


def score_checks(f: HealthFigures) -> list[HealthCheck]:
    """The weighted checks (weights add up to 100) from the figures alone."""
    return [
        _freshness(f), _bulk(f), _agents(f), _read_rate(f), _read_hits(f), _recall_cost(f), _saves(f),
        _deferred(f), _indexes(f), _schema(f), _calibration(f), _consolidation(f), _instruction_like(f),
    ]


def _freshness(f: HealthFigures) -> HealthCheck:
    hours = f.hours_since_real_write
    if hours is None:
        return _check("write_freshness", 20, 0, "no agent has written a fact yet (only bulk imports, if any)",
                      "wire an agent (`echo-memory install --for <client>`) and let it write as it works")
    share = 1.0 if hours <= FRESH_HOURS else 0.5 if hours <= STALE_HOURS else 0.0
    return _check("write_freshness", 20, share, f"the last agent write was {hours:.1f} hours ago",
                  "agents have stopped writing: check they are still connected (`echo-memory status`)")


def _bulk(f: HealthFigures) -> HealthCheck:
    if f.bulk_share is None:
        return _check("bulk_share", 5, 0, "the memory holds no facts", "let agents write facts", known=False)
    detail = (f"{f.bulk_share:.0%} of {f.facts} facts came from bulk import; "
              f"{f.imported_episodes} episodes were imported")
    share = 1.0 if f.bulk_share <= BULK_SHARE_MAX else (1 - f.bulk_share) / (1 - BULK_SHARE_MAX)
    return _check("bulk_share", 5, share, detail,
                  "most facts were imported, not written by agents at work: wire agents to write")


def _agents(f: HealthFigures) -> HealthCheck:
    if not f.agents_wired:
        return _check("agents_writing", 15, 0, "no agent holds a token that may write here",
                      "wire an agent: `echo-memory install --for <client>` or `echo-memory token create --agent <agent>`")
    writing = len(f.agents_wired) - len(f.agents_never_writing)
    detail = f"{writing} of {len(f.agents_wired)} wired agents have written"
    if f.agents_never_writing:
        detail += f"; never: {', '.join(f.agents_never_writing)}"
    return _check("agents_writing", 15, writing / len(f.agents_wired), detail,
                  "check those clients load the Echo Memory instructions (`echo-memory install --for <client>`), "
                  "or revoke tokens nobody uses")


def _read_rate(f: HealthFigures) -> HealthCheck:
    return _check("read_rate", 10, f.reads_per_day / READS_PER_DAY_GOOD,
                  f"{f.reads} agent reads in {f.window_days} days ({f.reads_per_day:.2f} a day)",
                  "agents rarely recall: make sure their instructions ask them to query_memory before work")


def _read_hits(f: HealthFigures) -> HealthCheck:
    if f.read_hit_share is None:
        return _check("read_hits", 10, 0, "no reads to judge", "let agents read", known=False)
    return _check("read_hits", 10, f.read_hit_share / READ_HIT_GOOD,
                  f"{f.reads_with_results} of {f.reads} reads returned something ({f.read_hit_share:.0%})",
                  "many reads find nothing: agents may read scopes nobody writes, or memory is missing")


def _recall_cost(f: HealthFigures) -> HealthCheck:
    if f.recall_tokens_mean is None or f.recall_share_of_dump is None:
        return _check("recall_cost", 10, 0, "no reads, or no facts, to compare", "let agents read", known=False)
    share = f.recall_share_of_dump
    detail = (f"a recall returns {f.recall_tokens_mean:.0f} tokens on average; pasting every active fact "
              f"would cost {f.full_dump_tokens} ({share:.1%})")
    return _check("recall_cost", 10, 1.0 if share <= RECALL_SHARE_GOOD else 0.0, detail,
                  "recall costs close to a full dump: lower top_k or set max_tokens in the agents' reads")


def _saves(f: HealthFigures) -> HealthCheck:
    if f.saves_per_read is None:
        return _check("saves_per_read", 5, 0, "no reads to judge", "let agents read", known=False)
    return _check("saves_per_read", 5, f.saves_per_read / SAVES_PER_READ_GOOD,
                  f"{f.saves} saves for {f.reads} reads ({f.saves_per_read:.2f} per read)",
                  "agents never say when a recalled fact helped: ask them to call record_recall_save")


def _deferred(f: HealthFigures) -> HealthCheck:
    return _check("deferred_writes", 5, 1.0 if f.deferred_waiting == 0 else 0.0,
                  f"{f.deferred_waiting} deferred mentions wait for the agent to name the entity",
                  "facts naming those mentions are not stored: the agent must answer with entity_resolutions")


def _indexes(f: HealthFigures) -> HealthCheck:
    problems = [f"{s.scope} {s.corpus}: {s.reason}" for s in f.lexical_stale]
    problems += [f"{e.scope}: vectors by {e.model}, the code embeds with {f.code_embedding_model}"
                 for e in f.embedding_mismatch]
    scopes = sorted({s.scope for s in f.lexical_stale} | {e.scope for e in f.embedding_mismatch})
    detail = "; ".join(problems) if problems else "lexical statistics and vectors are current"
    return _check("index_state", 10, 0.0 if problems else 1.0, detail,
                  "; ".join(f"echo-memory reindex --scope {s}" for s in scopes) or None)


def _schema(f: HealthFigures) -> HealthCheck:
    same = f.schema_version == f.code_schema_version
    return _check("schema_version", 3, 1.0 if same else 0.0,
                  f"schema {f.schema_version}, code {f.code_schema_version}", "run `echo-memory init-db`")


def _instruction_like(f: HealthFigures) -> HealthCheck:
    """Worth no points (the text is stored and labelled either way), but listed so a person reviews it."""
    found = f.instruction_like_facts + f.instruction_like_episodes
    detail = (f"{f.instruction_like_facts} active facts and {f.instruction_like_episodes} episodes address the "
              "agent reading them (labelled instruction_like, ranked below other evidence)")
    return _check("instruction_like", 0, 0.0 if found else 1.0, detail,
                  "review them in the dashboard (filter: instruction-like) and ask `why` about each fact: "
                  "someone may be trying to steer agents through shared memory")


def _calibration(f: HealthFigures) -> HealthCheck:
    c = f.calibration
    detail = (f"calibration last ran {c.last_run:%Y-%m-%d %H:%M} UTC ({c.kind})" if c.ran and c.last_run
              else "calibration has never run on this store")
    return _check("calibration", 2, 1.0 if c.ran else 0.0, detail,
                  "run `echo-memory calibrate` to learn whether entity resolution is trustworthy here")


def _consolidation(f: HealthFigures) -> HealthCheck:
    """Weak while the newest consolidation attempt failed: tiers and digests are then stale, and a
    failing run must not look like a quiet one. Half the points when runs failed in the window but a
    later one succeeded. A store never consolidated loses nothing (small stores need no tiers)."""
    c = f.consolidation
    if c.last_failure_at is not None and (c.last_run is None or c.last_failure_at > c.last_run):
        return _check("consolidation", 5, 0.0,
                      f"the last consolidation attempt failed at {c.last_failure_at:%Y-%m-%d %H:%M} UTC "
                      f"({c.last_failure}); {c.failures} failures in {f.window_days} days",
                      "read the consolidation service's log, and run `echo-memory consolidate` to see the error")
    if c.failures:
        return _check("consolidation", 5, 0.5,
                      f"{c.failures} consolidation runs failed in {f.window_days} days; the last run, "
                      f"{c.last_run:%Y-%m-%d %H:%M} UTC, succeeded",
                      "read the consolidation service's log for what failed")
    detail = (f"consolidation last ran {c.last_run:%Y-%m-%d %H:%M} UTC, no failure in {f.window_days} days"
              if c.last_run else "consolidation has not run on these scopes yet (it runs once facts change)")
    return _check("consolidation", 5, 1.0, detail, None)
