"""Which embedding model made a scope's vectors (migration 0006, table `scope_embeddings`).

Vectors of different models are not comparable. The first write that stores vectors in a scope
records its model (`RECORD`, never overwriting); a complete re-embedding by the reindex service
replaces the record (`REPLACE`). Queries compare the record with the model they embed with
(`OTHER_MODELS`) and say which scopes need `echo-memory reindex`.
"""

from __future__ import annotations

RECORD = """
INSERT INTO scope_embeddings (scope_id, model) VALUES (%(scope_id)s, %(model)s)
ON CONFLICT (scope_id) DO NOTHING
"""
REPLACE = """
INSERT INTO scope_embeddings (scope_id, model) VALUES (%(scope_id)s, %(model)s)
ON CONFLICT (scope_id) DO UPDATE SET model = EXCLUDED.model, recorded_at = now()
"""
OTHER_MODELS = """
SELECT s.name, e.model FROM scope_embeddings e JOIN scopes s ON s.id = e.scope_id
WHERE e.scope_id = ANY(%(scope_ids)s) AND e.model <> %(model)s
ORDER BY s.name
"""
MODEL_OF_SCOPE = "SELECT model FROM scope_embeddings WHERE scope_id = %(scope_id)s"
# A re-embedding walks the scope page by page: its first page marks the record as in progress
# (`pending`), and only the last page of that same walk, finding the mark, records the model.
# A walk resumed from a cursor without a first page never claims the whole scope.
FINISH = """
UPDATE scope_embeddings SET model = %(model)s, recorded_at = now()
WHERE scope_id = %(scope_id)s AND model = %(pending)s
"""


def pending(model: str) -> str:
    """The record of a scope whose re-embedding with `model` has started but not finished."""
    return f"{model} (reindex in progress)"


def mismatch_note(others: list[tuple[str, str]], model: str) -> str | None:
    """What a query says when scopes it read hold vectors of another model; None when none do.

    `others` pairs a scope's public name with the model its vectors came from.
    """
    if not others:
        return None
    listed = ", ".join(f"'{scope}' ({made_by})" for scope, made_by in others)
    commands = "; ".join(f"echo-memory reindex --scope {scope}" for scope, _ in others)
    return (
        f"vectors of {listed} were made by another embedding model than this service's ({model}), "
        f"so dense ranking and scores there are unreliable: run {commands}"
    )
