"""Which of the model's candidates are kept: verbatim quotes, known entities, limits, secrets, one claim per edge."""

from __future__ import annotations

from datetime import UTC, datetime

from echo_memory.libs.core.contracts.distil import PendingEpisode
from echo_memory.libs.core.contracts.post_hoc import UnhintedFact
from echo_memory.libs.local.llm.distil import DistilEntity, DistilFact, DistilReply, plan
from echo_memory.libs.local.llm.hints import HintCandidate, HintReply, keep
from echo_memory.libs.local.llm.jobs import Report

TURN = "assistant: We moved the queue to NATS because Kafka was too heavy for one laptop."
QUOTE = "We moved the queue to NATS because Kafka was too heavy"


def episode() -> PendingEpisode:
    return PendingEpisode(episode_id="0b5c2f4e-0000-4000-8000-000000000001", scope="shared", source="codex",
                          agent_id="codex", project="app", session_id="s-1", occurred_at=datetime.now(UTC),
                          content=TURN)


def fact(quote: str = QUOTE, source: str = "queue", target: str = "NATS", relation: str = "moved to",
         text: str = "The queue moved to NATS because Kafka was too heavy.") -> DistilFact:
    return DistilFact(source=source, target=target, relation=relation, fact=text, confidence="extracted", quote=quote)


ENTITIES = [DistilEntity(name="queue", type="component"), DistilEntity(name="NATS", type="service"),
            DistilEntity(name="Kafka", type="service")]


def test_only_candidates_that_pass_every_check_are_written_with_their_provenance() -> None:
    report = Report(command="distil", write=False)
    reply = DistilReply(entities=ENTITIES, facts=[
        fact(),
        fact(quote="we moved the queue to nats"),  # case differs: not verbatim
        fact(quote="NATS"),  # verbatim but too short to show where the fact comes from
        fact(source="broker", quote=QUOTE),  # not among the reply's entities
        fact(text="The queue's password is hunter2hunter2 AKIAIOSFODNN7EXAMPLE.", relation="stores"),
        fact(text="The queue moved to NATS.", relation="Moved  to"),  # a second claim on the same edge
        fact(relation="x" * 101, target="Kafka"),  # longer than write_episode accepts
    ])
    args = plan(episode(), reply, report)
    assert args is not None
    assert [f.fact for f in args.facts] == ["The queue moved to NATS because Kafka was too heavy."]
    assert {e.name for e in args.entities} == {"queue", "NATS"}  # only the entities a kept fact uses
    assert args.source_episode_ids == [episode().episode_id] and args.scope == "shared" and args.project == "app"
    assert args.idempotency_key is not None and args.idempotency_key.startswith(f"distil:{episode().episode_id}:")
    assert report.candidates == 7
    assert report.dropped == {"quote not verbatim in the turn": 2, "entity not in the reply's entities": 1,
                              "holds a secret": 1, "a second claim on one edge": 1,
                              "outside write_episode's limits": 1}


def test_the_same_facts_give_the_same_key_and_other_facts_another() -> None:
    one = plan(episode(), DistilReply(entities=ENTITIES, facts=[fact()]), Report(command="distil", write=False))
    two = plan(episode(), DistilReply(entities=ENTITIES, facts=[fact()]), Report(command="distil", write=False))
    other = plan(episode(), DistilReply(entities=ENTITIES, facts=[fact(target="Kafka", relation="replaced")]),
                 Report(command="distil", write=False))
    assert one is not None and two is not None and other is not None
    assert one.idempotency_key == two.idempotency_key != other.idempotency_key


def test_nothing_to_write_when_no_candidate_survives() -> None:
    report = Report(command="distil", write=False)
    assert plan(episode(), DistilReply(entities=ENTITIES, facts=[fact(quote="not in the turn at all")]), report) is None
    assert plan(episode(), DistilReply(entities=[], facts=[]), report) is None
    assert report.dropped == {"quote not verbatim in the turn": 1}


def test_a_hint_is_kept_only_for_a_sent_sentence_it_quotes() -> None:
    batch = [UnhintedFact(fact_id=f"f-{i}", scope="shared", source="a", target="b", relation="r", text=text)
             for i, text in enumerate(["Builds broke because the cache was cold.", "Latency rose after the upgrade."],
                                      start=1)]
    reply = HintReply(hints=[
        HintCandidate(id="1", causal_hint="caused_by", quote="because the cache was cold"),
        HintCandidate(id="1", causal_hint="led_to", quote="because the cache was cold"),  # a second hint, one sentence
        HintCandidate(id="2", causal_hint="caused_by", quote="after an upgrade"),  # not the sentence's words
        HintCandidate(id="3", causal_hint="led_to", quote="because the cache was cold"),  # an id nobody sent
        HintCandidate(id="2", causal_hint="none", quote=""),  # declined: not a candidate
    ])
    report = Report(command="infer-causal-hints", write=False)
    assert keep(batch, reply, report) == [{"fact_id": "f-1", "causal_hint": "caused_by",
                                           "quote": "because the cache was cold"}]
    assert report.candidates == 4
    assert report.dropped == {"a second hint for one sentence": 1, "quote not verbatim in the sentence": 1,
                              "id not among the items sent": 1}
