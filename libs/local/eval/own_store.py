"""`echo-memory eval` on the user's own store: queries made from the stored facts, scored in a throw-away copy.

No dataset is needed because the labels come free: every query is built from one stored fact's
entities and relation words, and the facts that answer it are known from the store itself.

- `forward`: "<source> <relation words>" (what does the ledger API depend on?); answered by every
  active fact with that source and relation.
- `reverse`: "<relation words> <target>" (what owns ledger-api?); every active fact with that
  relation and target.
- `pair`: "<source> and <target>"; every active fact between the two, either way round.

These are structural queries that name the entities exactly, easier than an agent's questions: the
figures compare configurations and store sizes on the user's own data, they are not a QA score.

The user's store is only read, through the admin's `export` verb; everything is scored in a
throw-away system (libs/local/eval/system.py) the scope is restored into, so no query, read log
or import ever reaches the user's store.
"""

from __future__ import annotations

import hashlib
import io
import statistics
from collections import defaultdict
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from echo_memory.libs.core.contracts.query import QueryMemoryInput, QueryMemoryResult
from echo_memory.libs.local.eval.metrics import bootstrap_ci, hit_at, reciprocal_rank, summarise

# The throw-away system's query_memory; restores go by name (libs/local/backup.py carries the
# export's records as the service wrote them).
Ask = Callable[[QueryMemoryInput], Awaitable[QueryMemoryResult]]
TimedCall = Callable[[str, str, dict[str, Any], float], Awaitable[dict[str, Any]]]


class ThrowawayCall(Protocol):
    """The throw-away system's admin call: a time-out may be given or left to the run's."""

    def __call__(self, service: str, verb: str, args: dict[str, Any], wait: float | None = None,
                 /) -> Awaitable[dict[str, Any]]: ...


KINDS = ("forward", "reverse", "pair")
DEPTH = 10  # the recall an agent makes: hit@10 and MRR@10
BOOTSTRAP_SAMPLES = 1000


@dataclass(frozen=True)
class OwnQuery:
    """One derived query: its text, kind, and the stored fact ids that answer it."""

    text: str
    kind: str
    gold: frozenset[str]
    source_fact: str


class EmptyStore(ValueError):
    """The scope holds no active fact to make a query from."""


async def read_scope(call: TimedCall, scope: str, timeout: float) -> list[dict[str, Any]]:
    """The scope's export lines, read over the bus as the admin (a read: nothing is written)."""
    import json

    from echo_memory.libs.local.backup import export_to

    out = io.StringIO()
    await export_to(call, out, scope=scope, progress=None, timeout=timeout)
    return [json.loads(line) for line in out.getvalue().splitlines() if line]


def relation_words(relation: str) -> str:
    return " ".join(relation.replace("_", " ").replace("-", " ").split())


def active_facts(lines: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    return [r for r in lines if r.get("type") == "fact" and r.get("t_invalid") is None]


def derive_queries(lines: Sequence[dict[str, Any]], *, limit: int, seed: int = 0) -> list[OwnQuery]:
    """Up to `limit` source facts, chosen by a seeded hash of their ids (the same store and seed give
    the same queries), each giving one query of every kind; a query text met twice is kept once.

    Raises EmptyStore when the scope holds no active fact.
    """
    names = {r["id"]: r["name"] for r in lines if r.get("type") == "entity"}
    facts = active_facts(lines)
    if not facts:
        raise EmptyStore("the scope holds no active fact to make a query from")
    forward: dict[tuple[str, str], set[str]] = defaultdict(set)
    reverse: dict[tuple[str, str], set[str]] = defaultdict(set)
    pair: dict[frozenset[str], set[str]] = defaultdict(set)
    for f in facts:
        forward[(f["source_entity"], f["relation"])].add(f["id"])
        reverse[(f["relation"], f["target_entity"])].add(f["id"])
        pair[frozenset((f["source_entity"], f["target_entity"]))].add(f["id"])
    chosen = sorted(facts, key=lambda f: hashlib.sha256(f"{seed}:{f['id']}".encode()).hexdigest())[:limit]
    queries: dict[str, OwnQuery] = {}
    for f in chosen:
        source, target, words = names[f["source_entity"]], names[f["target_entity"]], relation_words(f["relation"])
        made = (
            (f"{source} {words}", "forward", forward[(f["source_entity"], f["relation"])]),
            (f"{words} {target}", "reverse", reverse[(f["relation"], f["target_entity"])]),
            (f"{source} and {target}", "pair", pair[frozenset((f["source_entity"], f["target_entity"]))]),
        )
        for text, kind, gold in made:
            if f["source_entity"] == f["target_entity"] and kind == "pair":
                continue
            queries.setdefault(text.lower(), OwnQuery(text[:4000], kind, frozenset(gold), f["id"]))
    return list(queries.values())


def subsample(lines: Sequence[dict[str, Any]], size: int, *, seed: int = 0) -> list[dict[str, Any]]:
    """An export of the same scope holding `size` of its active facts (seeded choice), their entities
    and aliases, and nothing else: a smaller store made of the user's own facts."""
    from echo_memory.libs.core.contracts.audit import SECTIONS

    facts = sorted(active_facts(lines), key=lambda f: hashlib.sha256(f"{seed}:{f['id']}".encode()).hexdigest())[:size]
    used = {f["source_entity"] for f in facts} | {f["target_entity"] for f in facts}
    kept: dict[str, list[dict[str, Any]]] = {name: [] for name in SECTIONS}
    for r in lines[1:-1]:
        kind = r["type"]
        if kind in ("scope", "agent") or (kind in ("entity",) and r["id"] in used) or (
                kind == "alias" and r["entity_id"] in used):
            kept[kind].append(r)
    kept["fact"] = [{**f, "supersedes": None, "episode_id": None} for f in sorted(facts, key=lambda f: f["t_valid"])]
    counts = {name: len(kept[name]) for name in SECTIONS}
    header = {**lines[0], "counts": counts}
    return [header, *(r for name in SECTIONS for r in kept[name]), {"type": "end", "counts": counts}]


async def restore(call: TimedCall, lines: list[dict[str, Any]], scope: str | None, timeout: float) -> dict[str, str]:
    """Import `lines` into the throw-away system (renamed to `scope` when given); old → new ids that changed."""
    from echo_memory.libs.local.backup import import_lines

    result = await import_lines(call, lines, scope=scope, progress=None, timeout=timeout)
    return dict(result.id_map)


async def score(ask: Ask, scope: str, queries: Sequence[OwnQuery], id_map: dict[str, str]) -> list[dict[str, Any]]:
    """One row per query: kind, hit@10, MRR@10 and the tokens the top-10 recall returned."""
    rows = []
    for query in queries:
        gold = {id_map.get(g, g) for g in query.gold}
        result = await ask(QueryMemoryInput(query=query.text, scope=scope, top_k=DEPTH, include_episodes=False))
        ranked = [item.id for item in result.results]
        rows.append({"kind": query.kind, "query": query.text, "hit10": hit_at(ranked, gold, DEPTH),
                     "mrr10": reciprocal_rank(ranked, gold, DEPTH), "tokens": float(result.total_tokens)})
    return rows


def report(scope: str, lines: Sequence[dict[str, Any]], rows: list[dict[str, Any]], *, context: bool) -> dict[str, Any]:
    """hit@10 and MRR@10 overall and per kind, each with its 95% bootstrap interval; with `context`,
    tokens per recall against pasting every active fact as one notes file."""
    scored = [{k: r[k] for k in ("hit10", "mrr10")} for r in rows]
    by_kind: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row, values in zip(rows, scored, strict=True):
        by_kind[row["kind"]].append(values)
    out: dict[str, Any] = {
        "dataset": "own-store", "scope": scope, "active_facts": len(active_facts(lines)), "queries": len(rows),
        "overall": summarise(scored, samples=BOOTSTRAP_SAMPLES),
        "by_kind": {k: summarise(by_kind[k], samples=BOOTSTRAP_SAMPLES) for k in KINDS if by_kind[k]},
        "per_query": rows,
    }
    if context:
        dump = sum(int(f["token_count"]) for f in active_facts(lines))
        mean = statistics.fmean(r["tokens"] for r in rows)
        out["context"] = {"tokens_per_recall_mean": round(mean, 1), "full_notes_dump_tokens": dump,
                          "ratio": round(mean / dump, 4) if dump else None, "hit10": out["overall"]["hit10"]}
    return out


def paired(base: list[dict[str, Any]], other: list[dict[str, Any]]) -> dict[str, Any]:
    """other − base per query (same queries, same order): mean and 95% paired bootstrap interval of
    hit@10 and MRR@10, overall and per kind, with how many queries went up and down."""
    if [r["query"] for r in base] != [r["query"] for r in other]:
        raise ValueError("paired runs must ask the same queries in the same order")

    def block(pairs: list[tuple[dict[str, Any], dict[str, Any]]]) -> dict[str, Any]:
        out: dict[str, Any] = {"n": len(pairs)}
        for metric in ("hit10", "mrr10"):
            diffs = [o[metric] - b[metric] for b, o in pairs]
            low, high = bootstrap_ci(diffs, samples=BOOTSTRAP_SAMPLES)
            out[metric] = {"diff": round(statistics.fmean(diffs), 4), "ci95": [round(low, 4), round(high, 4)],
                           "up": sum(d > 0 for d in diffs), "down": sum(d < 0 for d in diffs)}
        return out

    both = list(zip(base, other, strict=True))
    return {"overall": block(both),
            "by_kind": {k: block([p for p in both if p[0]["kind"] == k]) for k in KINDS
                        if any(p[0]["kind"] == k for p in both)}}


async def run(
    read: TimedCall, scope: str, *, retrieval: Any, timeout: float, limit: int = 60, seed: int = 0,
    context: bool = False, sweep: Sequence[int] = (), ablate: bool = False,
) -> dict[str, Any]:
    """Read `scope` from the user's store with `read` (the admin bus), restore it into a throw-away
    system with the user's `retrieval` settings, and score the derived queries there.

    `sweep` sizes restore subsamples of the scope's active facts, each into a scope of its own;
    `ablate` restarts retrieval with each channel off in turn and pairs it with the full system.
    Raises EmptyStore for a scope with no active fact, EchoError from either system.
    """
    from echo_memory.libs.core.contracts.verbs import QUERY_MEMORY
    from echo_memory.libs.local.eval.system import restart_service, throwaway_stack

    lines = await read_scope(read, scope, timeout)
    queries = derive_queries(lines, limit=limit, seed=seed)
    async with throwaway_stack(retrieval=retrieval) as stack:

        async def call(service: str, verb: str, args: dict[str, Any], wait: float | None = None) -> dict[str, Any]:
            return await stack.admin_call(service, verb, args, timeout=wait or timeout)

        async def ask(request: QueryMemoryInput) -> QueryMemoryResult:
            return await stack.admin_request(QUERY_MEMORY, request, timeout=timeout)

        id_map = await restore(call, lines, None, timeout)
        rows = await score(ask, scope, queries, id_map)
        out = report(scope, lines, rows, context=context or bool(sweep))
        if sweep:
            out["sweep"] = await _sweep(call, ask, lines, sweep, limit=limit, seed=seed, timeout=timeout)
        if ablate:
            out["ablation"] = {}
            channels = tuple(retrieval.channels)
            for channel in channels:
                off = retrieval.model_copy(update={"channels": tuple(c for c in channels if c != channel)})
                await restart_service(stack, "retrieval", retrieval=off)
                out["ablation"][channel] = paired(rows, await score(ask, scope, queries, id_map))
            await restart_service(stack, "retrieval", retrieval=retrieval)
        return out


async def _sweep(call: ThrowawayCall, ask: Ask, lines: list[dict[str, Any]], sizes: Sequence[int], *, limit: int,
                 seed: int, timeout: float) -> list[dict[str, Any]]:
    """Tokens per recall against the full dump and hit@10, one row per subsample size of the user's facts."""
    rows: list[dict[str, Any]] = []
    total = len(active_facts(lines))
    for size in sorted(set(sizes)):
        part = subsample(lines, min(size, total), seed=seed)
        name = f"eval-size-{min(size, total)}"
        id_map = await restore(call, part, name, timeout)
        measured = report(name, part, await score(ask, name, derive_queries(part, limit=limit, seed=seed), id_map),
                          context=True)
        ctx = measured["context"]
        rows.append({"size": size, "facts": measured["active_facts"], "queries": measured["queries"],
                     "tokens_per_recall_mean": ctx["tokens_per_recall_mean"],
                     "full_notes_dump_tokens": ctx["full_notes_dump_tokens"],
                     "saving": round(1 - ctx["ratio"], 4) if ctx["ratio"] is not None else None,
                     "hit10": measured["overall"]["hit10"]})
        if size >= total:
            break  # every larger size would be the whole scope again
    return rows


def render(out: dict[str, Any]) -> str:
    """The report a person reads: scores with intervals, then context, sweep and ablation when measured."""
    def ci(pair: list[float] | None) -> str:
        return f"[{pair[0]:.3f}, {pair[1]:.3f}]" if pair else ""

    lines = [f"own store, scope '{out['scope']}': {out['active_facts']} active facts, {out['queries']} queries "
             "derived from them (labels: the facts themselves)", "",
             f"{'':<10}{'hit@10':>8} {'95% CI':<17}{'MRR@10':>8} {'95% CI':<17}{'n':>5}"]
    for name, row in [("overall", out["overall"]), *out["by_kind"].items()]:
        lines.append(f"{name:<10}{row['hit10']:>8.3f} {ci(row.get('hit10_ci95')):<17}{row['mrr10']:>8.3f} "
                     f"{ci(row.get('mrr10_ci95')):<17}{row['n']:>5}")
    context = out.get("context")
    if context and context["ratio"] is not None:
        lines += ["", f"context: {context['tokens_per_recall_mean']:.1f} tokens per top-10 recall vs "
                  f"{context['full_notes_dump_tokens']} for every active fact as one notes file "
                  f"({context['ratio']:.1%}), hit@10 {context['hit10']:.3f}"]
    if out.get("sweep"):
        lines += ["", f"{'facts':>7}{'queries':>9}{'tokens/recall':>15}{'full dump':>11}{'saved':>9}{'hit@10':>8}"]
        for row in out["sweep"]:
            saving = f"{row['saving']:>9.1%}" if row["saving"] is not None else f"{'-':>9}"
            lines.append(f"{row['facts']:>7}{row['queries']:>9}{row['tokens_per_recall_mean']:>15.1f}"
                         f"{row['full_notes_dump_tokens']:>11}{saving}{row['hit10']:>8.3f}")
    if out.get("ablation"):
        lines += ["", "ablation: each channel off, minus the full system (paired over the same queries)",
                  f"{'channel off':<12}{'kind':<10}{'hit@10 diff':>12} {'95% CI':<19}{'MRR@10 diff':>12} {'95% CI':<19}"]
        for channel, result in out["ablation"].items():
            for kind, block in [("overall", result["overall"]), *result["by_kind"].items()]:
                h, m = block["hit10"], block["mrr10"]
                lines.append(f"{channel:<12}{kind:<10}{h['diff']:>+12.3f} {ci(h['ci95']):<19}"
                             f"{m['diff']:>+12.3f} {ci(m['ci95']):<19}")
    return "\n".join(lines)


__all__ = ["EmptyStore", "OwnQuery", "derive_queries", "paired", "read_scope", "relation_words", "report",
           "render", "restore", "run", "score", "subsample"]
