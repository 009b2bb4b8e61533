"""Which embedding model made a scope's vectors: recorded on the first write, flagged by queries
and `lexical_status` when it is not the service's model, and cleared only by a complete reindex.

"Another model" is simulated by rewriting the record (the code ships with one model); everything
else is the real write path, the real reindex service and the real query path over the bus.
"""

from __future__ import annotations

from typing import Any

import psycopg

from echo_memory.libs.testing import EchoStack

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


def _recorded(stack: EchoStack, scope: str) -> str | None:
    with psycopg.connect(stack.database_url) as conn:
        row = conn.execute(
            "SELECT e.model FROM scope_embeddings e JOIN scopes s ON s.id = e.scope_id WHERE s.name = %s", (scope,)
        ).fetchone()
    return None if row is None else str(row[0])


def _set_recorded(stack: EchoStack, scope: str, model: str) -> None:
    with psycopg.connect(stack.database_url) as conn:
        conn.execute(
            "UPDATE scope_embeddings SET model = %s WHERE scope_id = (SELECT id FROM scopes WHERE name = %s)",
            (model, scope),
        )


async def _note(stack: EchoStack, scope: str) -> str:
    result = await stack.admin_call("retrieval", "query_memory", {"query": "where are the ledger rows?", "scope": scope})
    assert result["results"], result
    return result["note"] or ""


async def test_model_is_recorded_flagged_and_cleared_by_a_complete_reindex(stack: EchoStack) -> None:
    scope = "em-a"
    await stack.admin_call("writes", "scope_create", {"name": scope})
    for index in range(3):
        stored = await stack.admin_call("writes", "write_episode", _write(scope, index))
        assert stored["stored"] is True, stored.get("error")
    model = stack.embedder.name
    assert _recorded(stack, scope) == model
    assert "embedding model" not in await _note(stack, scope)

    _set_recorded(stack, scope, OLD)
    note = await _note(stack, scope)
    assert f"'{scope}' ({OLD})" in note and f"echo-memory reindex --scope {scope}" in note
    status = await stack.admin_call("reindex", "lexical_status", {"scope": scope})
    assert status["embedding_model"] == OLD and status["code_embedding_model"] == model
    assert "echo-memory reindex" in status["embedding_reason"]

    # A write with today's model adds today's vectors but cannot vouch for the old ones.
    stored = await stack.admin_call("writes", "write_episode", _write(scope, 3))
    assert stored["stored"] is True
    assert _recorded(stack, scope) == OLD

    # A walk resumed from a cursor, without its first page, never claims the whole scope.
    first = await stack.admin_call("reindex", "reindex", {"scope": scope, "step": "embeddings", "limit": 3})
    assert first["next"] is not None
    _set_recorded(stack, scope, OLD)
    cursor: str | None = first["next"]
    while cursor is not None:
        page = await stack.admin_call("reindex", "reindex", {"scope": scope, "step": "embeddings", "after": cursor,
                                                             "limit": 3})
        cursor = page["next"]
    assert _recorded(stack, scope) == OLD

    # A complete walk, page by page: in progress after the first page, the model after the last.
    page = await stack.admin_call("reindex", "reindex", {"scope": scope, "step": "embeddings", "limit": 3})
    assert _recorded(stack, scope) == f"{model} (reindex in progress)"
    assert "reindex in progress" in await _note(stack, scope)
    while page["next"] is not None:
        page = await stack.admin_call("reindex", "reindex", {"scope": scope, "step": "embeddings",
                                                             "after": page["next"], "limit": 3})
    assert _recorded(stack, scope) == model
    assert "embedding model" not in await _note(stack, scope)
    status = await stack.admin_call("reindex", "lexical_status", {"scope": scope})
    assert status["embedding_model"] == model and status["embedding_reason"] is None


async def test_imported_turns_record_the_model_and_a_write_that_stores_nothing_records_nothing(
    stack: EchoStack,
) -> None:
    await stack.admin_call("writes", "scope_create", {"name": "em-import"})
    await stack.admin_call("writes", "import_episodes", {
        "scope": "em-import", "episodes": [{"content": "Alice: the kiln fired my vase", "session_id": "s", "seq": 0}],
    })
    assert _recorded(stack, "em-import") == stack.embedder.name

    await stack.admin_call("writes", "scope_create", {"name": "em-empty"})
    result = await stack.admin_call("writes", "write_episode", {"scope": "em-empty", "session_id": "s", "facts": []})
    assert result["stored"] is False
    assert _recorded(stack, "em-empty") is None
