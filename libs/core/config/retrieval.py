"""The retrieval section of the settings tree (`Settings.retrieval`), and the fusion weights tuned on the dev sets.

Set from the environment as `ECHO_MEMORY_RETRIEVAL__<FIELD>` (e.g. `ECHO_MEMORY_RETRIEVAL__LEXICAL_BM25=0`,
`ECHO_MEMORY_RETRIEVAL__FUSION__REPLY=0.5`); tests and harnesses pass a `RetrievalSettings` instead.

The weights were tuned on agent-facts (facts) and LoCoMo (imported chat turns) with
`echo-memory eval`, `echo-memory eval-external locomo` and the lab's fusion grid; lab/NOTES.md
has the rounds.
Equal-weight RRF is deliberately not used: it loses to dense alone on paraphrased queries.
"""

from __future__ import annotations

from pydantic import BaseModel, Field


class FusionWeights(BaseModel):
    """fused = cos + (lexical + coordination·[matched ≥ min(3, query terms)])·bm25/max_bm25
    + proximity·prox/max_bm25 (+ graph·ppr/max_ppr for facts); for episodes, a turn that asks a
    question gives reply·its value to its reply (the first turn of its session after it that another
    speaker said, within a few turns; the next turn when no speaker is recorded) and loses
    question_penalty·its value (when that reply is a candidate too), then + neighbour·best such
    value of the adjacent turns. Ranking only; the `score` callers see is always the cosine.

    Facts get no plain BM25 boost: on agent-facts any boost for one or two shared words pulls
    distractors above true paraphrases, while matching three query words (or every word of a
    shorter query) is strong enough evidence, and query words found close together in order
    (proximity) a little more. Chat turns need the plain boost (dense alone is weak on LoCoMo).

    The neighbour share trades recall for session coverage: each adjacent turn it pulls into the
    top 10 comes from a session already there. The reply credit is what LoCoMo's misses showed:
    a question asked in the conversation ("What pet do you have?") outranked its answer, the
    next turn. reply 0.6, question_penalty 0.2 with neighbour 0.15 (lexical 0.7, coordination
    0.3): MRR 0.530 → 0.588, recall@10 +0.036, session@10 ≥ 0.90 on both halves of the set; the
    region around it (reply 0.4–0.8, penalty 0.1–0.3) gives MRR 0.57–0.59 (lab/NOTES.md,
    "reply credit")."""

    fact_lexical: float = Field(0.0, description="weight of max-normalised BM25 for facts")
    episode_lexical: float = Field(0.7, description="weight of max-normalised BM25 for episodes")
    fact_coordination: float = Field(
        0.05, description="extra max-normalised BM25 for a fact that matches min(3, query terms) distinct terms"
    )
    # Turns get neither refinement: tuned on LoCoMo (coordination 0.3, proximity 0.8), together they
    # gave it +0.006 recall@10 and +0.018 MRR@10 but cost MADial-Bench 0.043 recall@10 and MemDaily
    # 0.005 recall@5, both outside the paired intervals (docs/BENCHMARKS.md, "Heuristics across datasets").
    episode_coordination: float = Field(
        0.0, description="extra max-normalised BM25 for a turn that matches min(3, query terms) distinct terms"
    )
    fact_proximity: float = Field(
        0.1, description="weight of proximity (query word pairs close together, idf) / max BM25 for facts"
    )
    episode_proximity: float = Field(
        0.0, description="weight of proximity (query word pairs close together, idf) / max BM25 for episodes"
    )
    graph: float = Field(0.05, description="weight of max-normalised personalized PageRank for facts")
    reply: float = Field(
        0.6, description="share of a question turn's value added to its reply (the first turn after it that another "
        "speaker said, within a few turns)"
    )
    question_penalty: float = Field(
        0.2, description="share of its own value a question turn loses when its reply is a candidate too"
    )
    neighbour: float = Field(0.15, description="share of an adjacent turn's fused score added to a turn")
    # Max-normalised BM25 gave the best word match the whole lexical boost however little of the
    # query it covered; a long query (a dialogue, a prompt) then lifted an item sharing one word
    # above the item that meant the same. Floors 0–1 on every set: MADial-Bench gains with the
    # floor (0.25: MRR@20 +0.038, R@5 +0.028; 0.5: +0.079, +0.054), LoCoMo and MemDaily are
    # unchanged at 0.25 and lose a little from 0.5 on (docs/BENCHMARKS.md, "The lexical floor").
    lexical_floor: float = Field(
        0.25, description="BM25 is normalised by max(best match, this × what an item holding every query term once "
        "would score): the best match gets the whole lexical boost only when it covers enough of the query"
    )


class QualityGates(BaseModel):
    """What query_memory leaves out of a search's ranking before it answers (0 switches a gate off).

    Measured with `python -m lab gates` on every dataset, gates on against off in one run
    (docs/BENCHMARKS.md, "Quality gates"). Only the search path is gated: `about` and `digest`
    answer exact look-ups.
    """

    nothing_below: float = Field(
        0.2, ge=0, le=1,
        description="best cosine below which, with no item found by words or entities, the answer is "
        "'nothing relevant' (all-MiniLM-L6-v2: agent-facts' own queries score 0.25-0.78, off-topic ones 0.12-0.28)",
    )
    far_below: float = Field(
        0.5, ge=0, le=1,
        description="an item found by the dense channel alone is left out when its cosine is below this share "
        "of the best item's cosine, unless the turn next to it in its session clears that floor",
    )
    near_duplicate: float = Field(
        0.9, ge=0, le=1,
        description="word-set Jaccard similarity at or above which an item repeats a better-ranked one and is "
        "left out",
    )

    @classmethod
    def off(cls) -> QualityGates:
        """Every gate switched off: the fused ranking as it is (baselines and harness tests)."""
        return cls(nothing_below=0, far_below=0, near_duplicate=0)


class RetrievalSettings(BaseModel):
    """How query_memory searches and fuses; read once when the retrieval service starts."""

    lexical_bm25: bool = Field(True, description="0 forces the ts_rank fallback for the lexical channel")
    hnsw_threshold: int = Field(
        4_000,
        description="rows of a corpus in the scopes read above which dense search uses HNSW: an exact scan "
        "costs ~2 µs a row on a 2-core VM (10k facts: +20 ms a query), HNSW ~3-4 ms at any size; an `as_of` "
        "search ranks exactly at any size, so its answer cannot change with the index",
    )
    candidates: int = Field(50, description="candidates each channel contributes before fusion")
    digests_expanded: int = Field(
        5, ge=1, description="a `tier: \"hot\"` search expands this many topic digests nearest the query, and as many "
        "holding its rarest words, into their members"
    )
    members_per_digest: int = Field(20, ge=1, description="member facts nearest the query taken from each expanded digest")
    graph_edge_cap: int = Field(
        150,
        description="edges loaded around the seeds for PageRank (per hop); at 100k facts an entity has ~90 "
        "edges, and 500 per hop made the graph channel the slowest part of a query",
    )
    channels: tuple[str, ...] = Field(
        ("dense", "lexical", "graph", "neighbour"), description="channels switched on (ablation)"
    )
    fusion: FusionWeights = Field(default_factory=FusionWeights)
    gates: QualityGates = Field(default_factory=QualityGates)
