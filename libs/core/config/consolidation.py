"""The consolidation policy: when a fact is hot, consolidated or archived, and what a digest holds.

Tiers are derived from what the store already records (writes, the read log, saves, supersession);
a change of any default here is a new policy, so bump `policy_version`: every tier move records the
version that made it.
"""

from __future__ import annotations

from pydantic import BaseModel, Field


class ConsolidationSettings(BaseModel):
    auto: bool = Field(
        True, description="run by itself: a scope whose facts changed, once quiet for `debounce_seconds`, and every "
        "scope every `sweep_minutes`; off, only `echo-memory consolidate` runs it"
    )
    debounce_seconds: float = Field(60.0, gt=0, description="quiet time after a scope's last fact event before it runs")
    max_wait_seconds: float = Field(
        900.0, gt=0, description="a scope written without pause still runs after this long"
    )
    sweep_minutes: float = Field(60.0, gt=0, description="every scope of every org seen runs at least this often")
    # A run over 1M facts takes ~11 minutes; meanwhile a hot search reads the facts written since
    # the last run from `hot_pending`, and past 2,000 of them it filters the facts table instead.
    hot_copy_seconds: float = Field(
        5.0, ge=0, description="how often facts written since a scope's last run are copied into the hot tier's "
        "indexes, between runs; 0: only runs copy them"
    )
    policy_version: int = Field(2, ge=1, description="recorded with every run and tier move")
    hot_days: float = Field(
        30.0, gt=0, description="a fact written, read or touching an entity read within this many days is hot"
    )
    archive_after_days: float = Field(
        90.0, gt=0, description="a version superseded (ended) more than this many days ago is archived"
    )
    # The hot tier is what a default-sized search reads in full, so its size sets that search's
    # cost: at 100,000 a 1M store searches nearly as a 100k one does (docs/BENCHMARKS.md, run aa).
    hot_cap: int = Field(
        100_000, ge=1, description="hot facts per scope at most; above it the least recently active are demoted"
    )
    digest_min_facts: int = Field(3, ge=1, description="an entity gets a digest once this many current facts touch it")
    digest_facts_per_relation: int = Field(3, ge=1, description="the newest facts a digest quotes per relation")
    digest_relations: int = Field(6, ge=1, description="relations a digest quotes, the most used first")
    digest_neighbours: int = Field(5, ge=0, description="entities most often joined to it that a digest names")
    topic_threshold: float = Field(
        0.5, ge=-1, le=1, description="a fact joins a topic only if its cosine to the topic's centre is at least this "
        "and it shares an entity or a session with the topic"
    )
    topic_cap: int = Field(48, ge=2, description="facts a topic holds at most; a full topic takes no more")
    topic_sentences: int = Field(3, ge=1, description="member sentences a topic digest quotes (central and diverse)")
    area_threshold: float = Field(
        0.35, ge=-1, le=1, description="a topic joins an area only if its centre's cosine to the area's centre is at "
        "least this and it shares an entity or a session with the area"
    )
    area_cap: int = Field(32, ge=2, description="topics an area holds at most; a full area takes no more")
