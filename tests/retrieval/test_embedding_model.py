"""Which embedding model made a scope's vectors: recorded on the first write, flagged by queries
and `lexical_status` when it is not the service's model, and cleared only by a complete reindex.

"Another model" is simulated by rewriting the record (the code ships with one model); everything
else is the real write path, the real reindex service and the real query path, on the handler
tier (every service's routes on one rolled-back transaction, which the reads below share).
"""

from __future__ import annotations

from typing import Any

from echo_memory.libs.server.embed import MiniLM
from echo_memory.libs.testing.rows import sql
from echo_memory.libs.testing.tiers import Handlers

OLD = "older-model-v0"


def _write(scope: str, index: int) -> dict[str, Any]:
    source, target = f"ledger service {index}", f"ledger store {index}"
    return {
        "scope": scope, "session_id": "em",
        "entities": [{"name": source, "type": "service"}, {"name": target, "type": "database"}],
        "entity_resolutions": [{"mention": n, "entity_id": "new", "rationale": "test"} for n in (source, target)],
        "facts": [{"source": source, "target": target, "relation": "keeps data in",
                   "fact": f"The ledger service {index} keeps its rows in ledger store {index}.",
                   "confidence": "extracted"}],
    }


async def _recorded(handlers: Handlers, scope: str) -> str | None:
    rows = await sql(handlers.conn, "SELECT e.model FROM scope_embeddings e JOIN scopes s ON s.id = e.scope_id "
                                    "WHERE s.name = %s", (scope,))
    return str(rows[0][0]) if rows else None


async def _set_recorded(handlers: Handlers, scope: str, model: str) -> None:
    await sql(handlers.conn, "UPDATE scope_embeddings SET model = %s WHERE scope_id = (SELECT id FROM scopes WHERE name = %s)",
              (model, scope))


async def _note(handlers: Handlers, scope: str) -> str:
    result = await handlers.admin_call("retrieval", "query_memory", {"query": "where are the ledger rows?", "scope": scope})
    assert result["results"], result
    return result["note"] or ""


async def test_model_is_recorded_flagged_and_cleared_by_a_complete_reindex(handlers: Handlers, embedder: MiniLM) -> None:
    scope = "em-a"
    await handlers.admin_call("writes", "scope_create", {"name": scope})
    for index in range(3):
        stored = await handlers.admin_call("writes", "write_episode", _write(scope, index))
        assert stored["stored"] is True, stored.get("error")
    model = embedder.name
    assert await _recorded(handlers, scope) == model
    assert "embedding model" not in await _note(handlers, scope)

    await _set_recorded(handlers, scope, OLD)
    note = await _note(handlers, scope)
    assert f"'{scope}' ({OLD})" in note and f"echo-memory reindex --scope {scope}" in note
    status = await handlers.admin_call("reindex", "lexical_status", {"scope": scope})
    assert status["embedding_model"] == OLD and status["code_embedding_model"] == model
    assert "echo-memory reindex" in status["embedding_reason"]

    # A write with today's model adds today's vectors but cannot vouch for the old ones.
    stored = await handlers.admin_call("writes", "write_episode", _write(scope, 3))
    assert stored["stored"] is True
    assert await _recorded(handlers, scope) == OLD

    # A walk resumed from a cursor, without its first page, never claims the whole scope.
    first = await handlers.admin_call("reindex", "reindex", {"scope": scope, "step": "embeddings", "limit": 3})
    assert first["next"] is not None
    await _set_recorded(handlers, scope, OLD)
    cursor: str | None = first["next"]
    while cursor is not None:
        page = await handlers.admin_call("reindex", "reindex", {"scope": scope, "step": "embeddings", "after": cursor,
                                                                "limit": 3})
        cursor = page["next"]
    assert await _recorded(handlers, scope) == OLD

    # A complete walk, page by page: in progress after the first page, the model after the last.
    page = await handlers.admin_call("reindex", "reindex", {"scope": scope, "step": "embeddings", "limit": 3})
    assert await _recorded(handlers, scope) == f"{model} (reindex in progress)"
    assert "reindex in progress" in await _note(handlers, scope)
    while page["next"] is not None:
        page = await handlers.admin_call("reindex", "reindex", {"scope": scope, "step": "embeddings",
                                                                "after": page["next"], "limit": 3})
    assert await _recorded(handlers, scope) == model
    assert "embedding model" not in await _note(handlers, scope)
    status = await handlers.admin_call("reindex", "lexical_status", {"scope": scope})
    assert status["embedding_model"] == model and status["embedding_reason"] is None


async def test_imported_turns_record_the_model_and_a_write_that_stores_nothing_records_nothing(
    handlers: Handlers, embedder: MiniLM,
) -> None:
    await handlers.admin_call("writes", "scope_create", {"name": "em-import"})
    await handlers.admin_call("writes", "import_episodes", {
        "scope": "em-import", "episodes": [{"content": "Alice: the kiln fired my vase", "session_id": "s", "seq": 0}],
    })
    assert await _recorded(handlers, "em-import") == embedder.name

    await handlers.admin_call("writes", "scope_create", {"name": "em-empty"})
    result = await handlers.admin_call("writes", "write_episode", {"scope": "em-empty", "session_id": "s", "facts": []})
    assert result["stored"] is False
    assert await _recorded(handlers, "em-empty") is None
