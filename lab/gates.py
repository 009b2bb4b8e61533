"""Quality gates on against off, every dataset, one throw-away system: what the gates cost in
recall and what they save in tokens, and how often an off-topic question is told "nothing relevant".

    python -m lab gates [--locomo N] [--memdaily-per-type N] [--madial N]

For each dataset the product's own harness runs twice on one system: first with the gates off
(`QualityGates(0, 0, 0)`), then, after retrieval restarts with the shipped gates, again (each run
loads the data into scopes of its own, so both runs rank the same store contents). Every
query_memory call is watched on the way back: tokens returned, items returned, and whether the
answer was "nothing relevant". Off-topic questions: LoCoMo's questions asked of the agent-facts
store and agent-facts' queries asked of a LoCoMo conversation; the right answer there is nothing.
"""

from __future__ import annotations

import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from echo_memory.libs.core.config.retrieval import QualityGates, RetrievalSettings
from echo_memory.libs.local.eval import agent_facts, locomo
from echo_memory.libs.local.eval.madial import run_madial
from echo_memory.libs.local.eval.memdaily import run_memdaily
from echo_memory.libs.local.eval.runner import (
    import_conversation,
    measure_agent_facts,
    new_scope,
    run_locomo,
    write_agent_facts,
)
from echo_memory.libs.local.eval.system import restart_service, stack_call, throwaway_stack

Call = Callable[[str, str, dict[str, Any]], Awaitable[dict[str, Any]]]
OFF = QualityGates.off()


class Watch:
    """A harness `call` that also records what every query_memory answer cost and whether it was empty."""

    def __init__(self, call: Call) -> None:
        self.inner = call
        self.answers: list[dict[str, Any]] = []

    async def __call__(self, service: str, verb: str, args: dict[str, Any]) -> dict[str, Any]:
        result = await self.inner(service, verb, args)
        if verb == "query_memory":
            note = result.get("note") or ""
            self.answers.append({"top_k": int(args.get("top_k", 10)), "tokens": int(result["total_tokens"]),
                                 "items": len(result["results"]), "nothing": note.startswith("nothing relevant"),
                                 "left_out": "left out" in note})
        return result

    def summary(self, top_k: int | None = None) -> dict[str, Any]:
        rows = [a for a in self.answers if top_k is None or a["top_k"] == top_k]
        n = len(rows) or 1
        return {"queries": len(rows), "tokens_per_recall": round(sum(a["tokens"] for a in rows) / n, 1),
                "items_per_recall": round(sum(a["items"] for a in rows) / n, 2),
                "nothing_relevant": sum(a["nothing"] for a in rows),
                "with_items_left_out": sum(a["left_out"] for a in rows)}


async def _off_topic(call: Call, facts: agent_facts.AgentFacts, conv: locomo.Conversation) -> dict[str, Any]:
    """LoCoMo questions of the agent-facts store, agent-facts queries of one LoCoMo conversation."""
    facts_scope = await new_scope(call, "gates-facts")
    await write_agent_facts(call, facts_scope, facts, False)
    turns_scope = await new_scope(call, "gates-turns")
    await import_conversation(call, turns_scope, conv)
    out: dict[str, Any] = {}
    for label, scope, questions in (
        ("locomo_questions_of_agent_facts", facts_scope, [qa.question for qa in conv.questions]),
        ("agent_facts_queries_of_locomo", turns_scope, [text for _, text, _, _ in facts.queries]),
    ):
        watch = Watch(call)
        for text in questions:
            await watch("retrieval", "query_memory", {"query": text, "scope": scope, "top_k": 10})
        out[label] = watch.summary()
    return out


async def run(facts_path: Path, locomo_path: Path, madial_path: Path | None, memdaily_path: Path | None, *,
              conversations: int, per_type: int, dialogues: int | None) -> dict[str, Any]:
    """Each dataset's harness report with the gates off and on, and the cost watched on every query."""
    facts = agent_facts.load(facts_path)
    first_conversation = locomo.load(locomo_path)[0]
    report: dict[str, Any] = {"gates": QualityGates().model_dump()}
    async with throwaway_stack(retrieval=RetrievalSettings(gates=OFF)) as stack:
        for label, gates in (("off", OFF), ("on", QualityGates())):
            if label == "on":
                await restart_service(stack, "retrieval", retrieval=RetrievalSettings(gates=gates))
            sys.stderr.write(f"gates {label}\n")
            runs: dict[str, Any] = {}
            watch = Watch(stack_call(stack))
            runs["agent_facts"] = {"report": _agent_facts_brief(await measure_agent_facts(watch, facts, context=True)),
                                   "cost_top10": watch.summary(10)}
            watch = Watch(stack_call(stack))
            runs["locomo"] = {"report": _brief(await run_locomo(watch, locomo_path, conversations=conversations)),
                              "cost": watch.summary()}
            if madial_path is not None:
                watch = Watch(stack_call(stack))
                runs["madial"] = {"report": _brief(await run_madial(watch, madial_path, dialogues=dialogues)),
                                  "cost": watch.summary()}
            if memdaily_path is not None:
                watch = Watch(stack_call(stack))
                runs["memdaily"] = {"report": _brief(await run_memdaily(watch, memdaily_path, per_file=per_type)),
                                    "cost": watch.summary()}
            runs["off_topic"] = await _off_topic(stack_call(stack), facts, first_conversation)
            report[label] = runs
    return report


def _brief(report: dict[str, Any]) -> dict[str, Any]:
    return {key: report[key] for key in ("overall", "lead_over_bm25") if key in report}


def _agent_facts_brief(report: dict[str, Any]) -> dict[str, Any]:
    return {key: report[key] for key in ("overall", "by_kind", "context") if key in report}
