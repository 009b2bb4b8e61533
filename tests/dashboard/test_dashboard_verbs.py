"""The audit service's dashboard verbs on the invented org restored by demo-seed.

On the handler tier: the seed's import and every verb go through the services' real routes on one
rolled-back transaction. Expected figures are counted with independent SQL on that transaction,
never copied from the verbs.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from dashboard_support import seed_tier

from echo_memory.libs.core.contracts.bus import Caller
from echo_memory.libs.core.contracts.errors import EchoError
from echo_memory.libs.server.embed import MiniLM
from echo_memory.libs.testing.rows import sql
from echo_memory.libs.testing.tiers import Handlers

pytestmark = pytest.mark.timeout(240)


async def one(handlers: Handlers, query: str, params: dict[str, Any] | None = None) -> Any:
    [row] = await sql(handlers.conn, query, params or {})
    return row[0]


VALID_AT = """
SELECT count(*) FROM facts f JOIN scopes s ON s.id = f.scope_id
WHERE s.name = 'demo' AND f.t_valid <= %(at)s AND (f.t_invalid IS NULL OR f.t_invalid > %(at)s)
"""


async def as_agent(handlers: Handlers, verb: str, args: dict[str, Any], read: list[str]) -> dict[str, Any]:
    caller = Caller(org=handlers.org, agent_id="reader-bot", read_scopes=read, write_scopes=read)
    return await handlers.call(caller, "audit", verb, args)


async def test_graph_clusters_islands_filters_and_history(handlers: Handlers, embedder: MiniLM) -> None:
    counts = await seed_tier(handlers, embedder)
    graph = await handlers.admin_call("audit", "dashboard_graph", {"scope": ["demo"]})
    now = datetime.now(UTC)
    assert graph["view"] == "detail"
    assert graph["total_edges"] == await one(handlers, VALID_AT, {"at": now}) > 0
    assert counts["fact"] > graph["total_edges"]  # superseded versions are not edges now
    ids = {n["id"] for n in graph["nodes"]}
    assert len(ids) == graph["total_nodes"] == len(graph["nodes"])
    assert all(e["source"] in ids and e["target"] in ids for e in graph["edges"])
    assert graph["components"] >= 2  # the side project is an island of its own
    # Each cluster is named after its best-connected member.
    degree = {n["id"]: n["degree"] for n in graph["nodes"]}
    for c in graph["clusters"]:
        members = [n for n in graph["nodes"] if n["cluster"] == c["id"]]
        assert len(members) == c["nodes"]
        assert degree[c["id"]] == max(m["degree"] for m in members)
        assert c["name"] == next(n["name"] for n in graph["nodes"] if n["id"] == c["id"])
    # Islands do not overlap: the bounding discs of different components are apart.
    assert len({n["x"] for n in graph["nodes"]}) > 1
    assert graph["choices"]["agents"] and "demo-ops-bot" in graph["choices"]["agents"]

    by_agent = await handlers.admin_call("audit", "dashboard_graph", {"scope": ["demo"], "agent": "demo-ops-bot"})
    assert 0 < by_agent["total_edges"] < graph["total_edges"]
    assert {e["agent_id"] for e in by_agent["edges"]} == {"demo-ops-bot"}
    by_project = await handlers.admin_call("audit", "dashboard_graph", {"scope": ["demo"], "project": "infra-live"})
    assert {e["project"] for e in by_project["edges"]} == {"infra-live"}

    earlier = now - timedelta(days=70)
    past = await handlers.admin_call("audit", "dashboard_graph", {"scope": ["demo"], "as_of": earlier.isoformat()})
    assert past["total_edges"] == await one(handlers, VALID_AT, {"at": earlier}) < graph["total_edges"]

    since = (now - timedelta(days=30)).date().isoformat()
    recent = await handlers.admin_call("audit", "dashboard_graph", {"scope": ["demo"], "since": since})
    assert all(e["written_at"] >= since for e in recent["edges"])


async def test_overview_then_one_cluster(handlers: Handlers, embedder: MiniLM) -> None:
    await seed_tier(handlers, embedder)
    overview = await handlers.admin_call("audit", "dashboard_graph", {"scope": ["demo"], "detail_edges": 40})
    assert overview["view"] == "overview" and overview["nodes"] == [] and overview["edges"] == []
    assert sum(c["nodes"] for c in overview["clusters"]) == overview["total_nodes"]
    inside = sum(c["edges"] for c in overview["clusters"])
    assert inside + sum(link["edges"] for link in overview["links"]) == overview["total_edges"]
    biggest = overview["clusters"][0]
    detail = await handlers.admin_call("audit", "dashboard_graph",
                                    {"scope": ["demo"], "detail_edges": 40, "cluster": biggest["id"]})
    assert detail["view"] == "cluster"
    assert len(detail["nodes"]) == biggest["nodes"]
    assert {n["cluster"] for n in detail["nodes"]} == {biggest["id"]}
    assert len(detail["edges"]) == biggest["edges"]
    with pytest.raises(EchoError) as missing:
        await handlers.admin_call("audit", "dashboard_graph", {"scope": ["demo"], "cluster": "not-a-cluster"})
    assert missing.value.code == "not_found"


async def test_entity_facts_and_recall_cost(handlers: Handlers, embedder: MiniLM) -> None:
    counts = await seed_tier(handlers, embedder)
    graph = await handlers.admin_call("audit", "dashboard_graph", {"scope": ["demo"]})
    hub = max(graph["nodes"], key=lambda n: n["degree"])
    facts = await handlers.admin_call("audit", "entity_facts", {"entity_id": hub["id"]})
    expected = await one(handlers, "SELECT count(*) FROM facts WHERE source_entity = %(e)s OR target_entity = %(e)s",
                   {"e": hub["id"]})
    assert facts["total"] == expected and facts["name"] == hub["name"]
    assert facts["memory_notice"].startswith("Recalled memory")
    assert sum(f["valid_at_as_of"] for f in facts["facts"]) == hub["degree"] or facts["more"]
    assert all(f["agent_id"] and f["written_at"] for f in facts["facts"])

    cost = await handlers.admin_call("audit", "recall_cost", {"scope": ["demo"]})
    assert cost["reads"] == counts["read"]
    assert cost["facts_returned"] == counts["read_result"]
    assert cost["tokens"] == await one(handlers, "SELECT sum(f.token_count) FROM read_results rr "
                                 "JOIN facts f ON f.id = rr.item_id")
    assert cost["full_dump_tokens"] == await one(handlers, "SELECT sum(token_count) FROM facts WHERE t_invalid IS NULL")
    assert sum(a["reads"] for a in cost["agents"]) == cost["reads"] == sum(d["reads"] for d in cost["days"])


async def test_scopes_the_caller_may_not_read_stay_hidden(handlers: Handlers, embedder: MiniLM) -> None:
    await seed_tier(handlers, embedder)
    graph = await handlers.admin_call("audit", "dashboard_graph", {"scope": ["demo"]})
    some_entity = graph["nodes"][0]["id"]
    hidden = await as_agent(handlers, "dashboard_graph", {}, read=["shared"])
    assert hidden["total_edges"] == 0 and hidden["choices"]["scopes"] == ["shared"]
    with pytest.raises(EchoError) as denied:
        await as_agent(handlers, "dashboard_graph", {"scope": ["demo"]}, read=["shared"])
    assert denied.value.code == "scope_denied"
    with pytest.raises(EchoError) as unknown:
        await as_agent(handlers, "entity_facts", {"entity_id": some_entity}, read=["shared"])
    assert unknown.value.code == "not_found"
    cost = await as_agent(handlers, "recall_cost", {}, read=["shared"])
    assert cost["reads"] == 0 and cost["full_dump_tokens"] == 0


async def test_bad_input_is_a_typed_error(handlers: Handlers) -> None:
    for verb, args in (("dashboard_graph", {"as_of": "yesterday-ish"}),
                       ("dashboard_graph", {"since": "2026-02-01", "until": "2026-01-01"}),
                       ("entity_facts", {"entity_id": "not-a-uuid"}),
                       ("recall_cost", {"agent": ""})):
        with pytest.raises(EchoError) as bad:
            await handlers.admin_call("audit", verb, args)
        assert bad.value.code == "invalid_argument", (verb, args)
    empty = await handlers.admin_call("audit", "dashboard_graph", {})
    assert empty["total_edges"] == 0 and empty["nodes"] == [] and empty["view"] == "detail"
