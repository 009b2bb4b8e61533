"""Agent-facts quality across store sizes (sweep), with channels switched off (ablation), and
beside imported turns (mixed): `python -m lab sweep|ablate|mixed`.

All three run on a throw-away system (libs/local/eval/system.py), never on the user's memory: the sweep
pads the store with thousands of synthetic distractor facts, and the ablation restarts the
retrieval service with one channel switched off (ECHO_MEMORY_CHANNELS), which only a system the
command owns may do.

- sweep: the 200 agent-facts are written first (through `write_episode`, as `echo-memory eval`
  does), then the scope is padded with synthetic engineering facts (libs/local/eval/synthetic.py,
  written in batches of 50) up to each size, and the 100 queries are asked again. Each size
  reports hit@1, hit@10, MRR with 95% bootstrap intervals and the paired MRR change against the
  unpadded store.
- ablation: one store, the queries asked once per channel set (all; each channel off in turn);
  paired bootstrap intervals of the MRR change against all channels say whether a channel's
  effect is distinguishable from noise. Optionally the same on LoCoMo conversations (episodes,
  where the neighbour and episode-lexical channels act).
- mixed: agent-facts' facts and the turns of the first N LoCoMo conversations in one scope, as a
  user's store holds facts beside imported history. Each set is scored there and in a scope of
  its own (the facts alone; the N conversations together), with the paired MRR change and how
  many items of the other corpus reach each question's top 10.
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path
from typing import Any

from echo_memory.libs.local.eval import agent_facts, synthetic
from echo_memory.libs.local.eval.metrics import bootstrap_ci
from echo_memory.libs.local.eval.runner import Call, new_scope, progress, rank_agent_facts, write_agent_facts
from echo_memory.libs.local.eval.system import channel_settings, restart_service, stack_call, throwaway_stack

ALL_CHANNELS = ("dense", "lexical", "graph", "neighbour")
DEFAULT_SWEEP = (1_000, 10_000)


async def _score(call: Call, scope: str, data: agent_facts.AgentFacts, by_id: dict[str, str]) -> list[dict[str, Any]]:
    """One row per query (in dataset order, so two runs can be paired)."""
    rows = []
    for qid, text, relevant, kind in data.queries:
        ranked = await rank_agent_facts(call, scope, text, by_id)
        rows.append({"query": qid, "kind": kind, **agent_facts.scores(ranked, relevant)})
    return rows


def _summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {"n": len(rows)}
    for key in ("hit1", "hit10", "mrr", "mrr10"):
        values = [r[key] for r in rows]
        low, high = bootstrap_ci(values, samples=1000)
        out[key] = round(statistics.fmean(values), 4)
        out[f"{key}_ci95"] = [round(low, 4), round(high, 4)]
    return out


def _paired(rows: list[dict[str, Any]], base: list[dict[str, Any]], key: str = "mrr") -> dict[str, Any]:
    """Mean change of `key` against `base` (same queries, same order) with its 95% bootstrap interval."""
    diffs = [r[key] - b[key] for r, b in zip(rows, base, strict=True)]
    low, high = bootstrap_ci(diffs, samples=1000)
    return {"delta": round(statistics.fmean(diffs), 4), "ci95": [round(low, 4), round(high, 4)],
            "significant": not (low <= 0.0 <= high)}


async def run_sweep(
    call: Call, path: str | Path, sizes: list[int], *, show: bool = False
) -> dict[str, Any]:
    """Quality at the dataset's own size and at each padded size (facts in the scope)."""
    data = agent_facts.load(path)
    scope = await new_scope(call, "eval-sweep")
    by_id = await write_agent_facts(call, scope, data, show)
    base = await _score(call, scope, data, by_id)
    stored = len(data.facts)
    points = [{"facts": stored, "distractors": 0, **_summary(base)}]
    source = synthetic.FactSource(seed=23)
    for size in sorted(s for s in sizes if s > stored):
        for facts in source.batches(size - stored):
            result = await call("writes", "write_episode", source.write_args(facts, scope, session="distractors"))
            if not result.get("stored") or result.get("partial"):
                raise RuntimeError(f"a distractor batch was not fully stored: {str(result)[:300]}")
            stored += len(result["edges_created"])
            if show:
                progress(f"pad to {size}", stored, size)
        rows = await _score(call, scope, data, by_id)
        points.append({"facts": stored, "distractors": stored - len(data.facts), **_summary(rows),
                       "mrr_vs_unpadded": _paired(rows, base)})
    return {"dataset": "agent-facts", "experiment": "sweep", "distractors": "synthetic engineering facts "
            "(libs/local/eval/synthetic.py, seed 23)", "points": points}


async def run_ablation(
    call: Call, restart: Any, path: str | Path, *, locomo: str | Path | None = None, conversations: int = 0,
    show: bool = False,
) -> dict[str, Any]:
    """Every channel switched off in turn; `restart(channels_json | None)` restarts retrieval."""
    from echo_memory.libs.local.eval.runner import run_locomo

    data = agent_facts.load(path)
    scope = await new_scope(call, "eval-ablate")
    by_id = await write_agent_facts(call, scope, data, show)
    configs = [("all channels", ALL_CHANNELS)] + [
        (f"without {name}", tuple(c for c in ALL_CHANNELS if c != name)) for name in ALL_CHANNELS
    ]
    results: list[dict[str, Any]] = []
    base: list[dict[str, Any]] | None = None
    try:
        for label, channels in configs:
            await restart(json.dumps(list(channels)))
            rows = await _score(call, scope, data, by_id)
            entry: dict[str, Any] = {"config": label, "channels": list(channels), "agent_facts": _summary(rows)}
            if base is None:
                base = rows
            else:
                entry["agent_facts"]["mrr_vs_all"] = _paired(rows, base)
            if locomo and conversations:
                report = await run_locomo(call, locomo, conversations=conversations)
                entry["locomo"] = {"questions": report["questions"], **report["overall"]}
            results.append(entry)
            if show:
                sys.stderr.write(f"{label}: agent-facts MRR {entry['agent_facts']['mrr']}\n")
    finally:
        await restart(None)
    return {"experiment": "ablation", "configs": results,
            "locomo_conversations": conversations if locomo else 0}


async def run_mixed(
    call: Call, path: str | Path, locomo_path: str | Path, conversations: int, *, show: bool = False
) -> dict[str, Any]:
    """agent-facts and LoCoMo turns in one scope against each in a scope of its own."""
    from echo_memory.libs.local.eval import locomo
    from echo_memory.libs.local.eval.runner import ask_locomo, import_conversation, summary

    data = agent_facts.load(path)
    convs = locomo.load(locomo_path)[:conversations]
    facts_scope, turns_scope, mixed_scope = [await new_scope(call, f"eval-mixed-{name}")
                                             for name in ("facts", "turns", "both")]
    by_fact: dict[str, str] = {}
    for scope in (facts_scope, mixed_scope):
        by_fact.update(await write_agent_facts(call, scope, data, show))
    by_turn: list[dict[str, str]] = []  # per conversation: episode id -> dia_id, both scopes
    for conv in convs:
        ids = await import_conversation(call, turns_scope, conv, show)
        ids.update(await import_conversation(call, mixed_scope, conv, show))
        by_turn.append(ids)

    async def facts_rows(scope: str) -> tuple[list[dict[str, Any]], float]:
        rows, intruders = [], 0
        for qid, text, relevant, kind in data.queries:
            ranked = await rank_agent_facts(call, scope, text, by_fact)
            # Every fact in these scopes is a dataset fact, so an id it does not know is a turn.
            intruders += ranked[:10].count("?")
            rows.append({"query": qid, "kind": kind, **agent_facts.scores(ranked, relevant)})
        return rows, intruders / len(rows)

    async def turn_rows(scope: str) -> tuple[list[dict[str, Any]], float]:
        rows, intruders = [], 0
        for conv, ids in zip(convs, by_turn, strict=True):
            session_of = {t.dia_id: t.session for t in conv.turns}
            for qa in conv.questions:
                answer = await ask_locomo(call, scope, qa, ids, session_of, 10)
                intruders += sum(item["kind"] == "fact" for item in answer.items)
                rows.append(answer.scores)
        return rows, intruders / max(len(rows), 1)

    out: dict[str, Any] = {"experiment": "mixed", "conversations": len(convs)}
    alone, _ = await facts_rows(facts_scope)
    together, turns_in_top10 = await facts_rows(mixed_scope)
    out["agent_facts"] = {"alone": _summary(alone), "with_turns": _summary(together),
                          "mrr_change": _paired(together, alone), "turns_in_top10": round(turns_in_top10, 2)}
    alone, _ = await turn_rows(turns_scope)
    together, facts_in_top10 = await turn_rows(mixed_scope)
    out["locomo"] = {"questions": len(alone), "alone": summary(alone, ci=False), "with_facts": summary(together, ci=False),
                     "mrr_change": _paired(together, alone), "facts_in_top10": round(facts_in_top10, 2)}
    if show:
        sys.stderr.write(f"mixed: agent-facts MRR {out['agent_facts']['alone']['mrr']} alone, "
                         f"{out['agent_facts']['with_turns']['mrr']} with turns\n")
    return out


# -- on a throw-away system (what `python -m lab` runs) ------------------------------------------

async def sweep_on_throwaway(path: str | Path, sizes: list[int]) -> dict[str, Any]:
    """`run_sweep` on a system started for it and removed afterwards."""
    async with throwaway_stack() as stack:
        return await run_sweep(stack_call(stack), path, sizes, show=True)


async def ablation_on_throwaway(
    path: str | Path, *, locomo: str | Path | None = None, conversations: int = 0
) -> dict[str, Any]:
    """`run_ablation` on a system started for it; retrieval is restarted there for each channel set."""
    async with throwaway_stack() as stack:
        async def restart(channels: str | None) -> None:
            await restart_service(stack, "retrieval", retrieval=channel_settings(channels))

        return await run_ablation(stack_call(stack), restart, path, locomo=locomo, conversations=conversations,
                                  show=True)


async def mixed_on_throwaway(path: str | Path, locomo_path: str | Path, conversations: int) -> dict[str, Any]:
    """`run_mixed` on a system started for it and removed afterwards."""
    async with throwaway_stack() as stack:
        return await run_mixed(stack_call(stack), path, locomo_path, conversations, show=True)
