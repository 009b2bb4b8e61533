"""`python -m lab named-month [--bonuses 0,0.1,0.2,0.3]`: LoCoMo questions that name a month.

About one LoCoMo question in eight names a month ("When did Melanie go camping in July?"), and
its evidence was nearly always said in a session dated that month or the next. This estimates
what a bonus for such turns would give, without building it. Every question's candidate pool is
captured once with the service's own channel code (lab/fusion_grid.py). The turns' `occurred_at`
is read back from the store. Then the shipped fusion is re-run, with a flat bonus added to the
fused value of each turn dated inside the named span. Reports every question and the ones that
name a month, for each bonus (0 is the shipped ranking).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import psycopg

from echo_memory.libs.core.config.retrieval import RetrievalSettings
from echo_memory.libs.local.eval.runner import locomo_scores
from echo_memory.libs.local.eval.system import throwaway_stack
from echo_memory.services.retrieval.channels import Candidate
from echo_memory.services.retrieval.fusion import fuse
from lab.fusion_grid import Captured, K, capture, means

MONTHS = ("january", "february", "march", "april", "may", "june", "july", "august", "september", "october",
          "november", "december")
_NAMED = re.compile(r"\b(" + "|".join(MONTHS) + r")\b(?:,?\s+(\d{4}))?", re.IGNORECASE)
OCCURRED = "SELECT id::text, occurred_at FROM episodes WHERE id = ANY(%(ids)s::uuid[])"


@dataclass(frozen=True)
class Span:
    """A month a question names (1–12), with its year when the question gives one."""

    month: int
    year: int | None = None

    def holds(self, when: datetime) -> bool:
        """Said in the month or the month after (people tell what happened a few weeks ago)."""
        following = self.month % 12 + 1
        if when.month not in (self.month, following):
            return False
        if self.year is None:
            return True
        year = self.year + 1 if when.month == following and following == 1 else self.year
        return when.year == year


def named_span(question: str) -> Span | None:
    """The first English month name in the question, with a year right after it if there is one."""
    match = _NAMED.search(question)
    if match is None:
        return None
    return Span(MONTHS.index(match.group(1).lower()) + 1, int(match.group(2)) if match.group(2) else None)


def with_bonus(
    ranked: list[tuple[Candidate, float]], when: dict[str, datetime], span: Span | None, bonus: float
) -> list[tuple[Candidate, float]]:
    """`ranked` with `bonus` added to every candidate said inside `span`, re-sorted as fusion sorts."""
    if span is None or bonus == 0:
        return ranked
    lifted = [(c, v + bonus if c.id in when and span.holds(when[c.id]) else v) for c, v in ranked]
    return sorted(lifted, key=lambda item: (-item[1], -item[0].cos, item[0].id))


def score(captured: list[Captured], when: dict[str, datetime], settings: RetrievalSettings,
          bonus: float) -> dict[str, Any]:
    """LoCoMo's four figures over every question and over those that name a month."""
    every: list[dict[str, float]] = []
    named: list[dict[str, float]] = []
    for item in captured:
        span = named_span(item.question)
        ranked = with_bonus(fuse(item.pool, settings.fusion, settings.channels), when, span, bonus)
        row = locomo_scores([item.by_id.get(c.id, "?") for c, _ in ranked[:K]], item.gold, item.session_of, K)
        every.append(row)
        if span is not None:
            named.append(row)
    return {"bonus": bonus, "all": means(every), "naming_a_month": {"questions": len(named), **means(named)}}


async def run(path: str | Path, bonuses: list[float], *, conversations: int | None = None) -> dict[str, Any]:
    """The whole experiment on a throw-away system: one row per bonus."""
    settings = RetrievalSettings()
    async with throwaway_stack() as stack:
        captured = await capture(stack, path, conversations=conversations, settings=settings)
        ids = sorted({cid for item in captured for cid in item.pool})
        async with await psycopg.AsyncConnection.connect(stack.database_url) as conn:
            rows = await (await conn.execute(OCCURRED, {"ids": ids})).fetchall()
    when = {ident: at for ident, at in rows if at is not None}
    return {"dataset": "locomo", "questions": len(captured),
            "rows": [score(captured, when, settings, bonus) for bonus in bonuses]}
