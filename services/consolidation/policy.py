"""Which tier a fact belongs in, decided from what the store records about it. Pure: no I/O.

- archived: a version that was ended (superseded or closed) more than `archive_after_days` ago and
  has not been read since `hot_days`;
- hot: saved by an agent (a save pins it), written or read within `hot_days`, or current and
  touching an entity that was read within `hot_days`;
- consolidated: everything else — old, unread, still true.

A scope holding more hot facts than `hot_cap` demotes the least recently active of them.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from echo_memory.libs.core.config.consolidation import ConsolidationSettings
from echo_memory.libs.core.contracts.consolidation import Tier

HOT_CAP = "hot_cap"
TIER_ORDER: dict[Tier, int] = {"hot": 0, "consolidated": 1, "archived": 2}


@dataclass(frozen=True)
class FactActivity:
    id: str
    tier: Tier
    written_at: datetime
    t_invalid: datetime | None
    last_read: datetime | None
    last_saved: datetime | None
    entity_read: bool

    @property
    def last_active(self) -> datetime:
        """The latest of its write, read and save: what the hot cap orders by."""
        return max(t for t in (self.written_at, self.last_read, self.last_saved) if t is not None)


@dataclass(frozen=True)
class Placement:
    fact: FactActivity
    tier: Tier
    reason: str

    @property
    def moves(self) -> bool:
        return self.tier != self.fact.tier


def decide(fact: FactActivity, now: datetime, policy: ConsolidationSettings) -> Placement:
    """The tier the policy gives `fact` at `now`, with the reason."""
    hot_since = now - timedelta(days=policy.hot_days)
    read_lately = fact.last_read is not None and fact.last_read >= hot_since
    if fact.t_invalid is not None and fact.t_invalid < now - timedelta(days=policy.archive_after_days) \
            and not read_lately:
        return Placement(fact, "archived", "ended_long_ago")
    if fact.last_saved is not None:
        return Placement(fact, "hot", "saved")
    if fact.written_at >= hot_since:
        return Placement(fact, "hot", "recent_write")
    if read_lately:
        return Placement(fact, "hot", "recent_read")
    if fact.t_invalid is None and fact.entity_read:
        return Placement(fact, "hot", "entity_read")
    return Placement(fact, "consolidated", "inactive")


def place_all(facts: list[FactActivity], now: datetime, policy: ConsolidationSettings) -> list[Placement]:
    """Every fact's placement, the hot cap applied: the least recently active hot facts (ties by id)
    become consolidated until at most `hot_cap` stay hot."""
    placed = [decide(fact, now, policy) for fact in facts]
    hot = [p for p in placed if p.tier == "hot"]
    excess = len(hot) - policy.hot_cap
    if excess <= 0:
        return placed
    coldest = sorted(hot, key=lambda p: (p.fact.last_active, p.fact.id))[:excess]
    demoted = {p.fact.id for p in coldest}
    return [Placement(p.fact, "consolidated", HOT_CAP) if p.fact.id in demoted else p for p in placed]


def direction(placement: Placement) -> str:
    """`promoted`, `demoted` or `unchanged`, by the tiers' order hot < consolidated < archived."""
    before, after = TIER_ORDER[placement.fact.tier], TIER_ORDER[placement.tier]
    return "unchanged" if before == after else ("promoted" if after < before else "demoted")
