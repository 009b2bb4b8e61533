"""import_episodes with source + external_id: each pair stored once in the whole store, bad pairs refused.

The writes service's verb on the handler tier; two importers racing need two connections committing,
so that one runs on the full stack.
"""

from __future__ import annotations

import asyncio
from typing import Any

import psycopg
import pytest

from echo_memory.libs.core.contracts.errors import EchoError
from echo_memory.libs.testing import EchoStack
from echo_memory.libs.testing.rows import sql
from echo_memory.libs.testing.tiers import Handlers


def turn(n: int, **extra: Any) -> dict[str, Any]:
    return {"content": f"User: question {n}\nAssistant: answer {n}", "source": "codex", "external_id": f"codex:s:{n}",
            **extra}


COUNT = "SELECT count(*) FROM episodes WHERE metadata ? 'external_id'"


def count(stack: EchoStack) -> int:
    with psycopg.connect(stack.database_url) as conn:
        return int(conn.execute(COUNT).fetchone()[0])  # type: ignore[index]


async def count_in(handlers: Handlers) -> int:
    [(n,)] = await sql(handlers.conn, COUNT)
    return int(n)


async def test_a_pair_is_stored_once_across_calls_scopes_and_within_one_call(handlers: Handlers) -> None:
    first = await handlers.admin_call("writes", "import_episodes", {"episodes": [turn(1), turn(2), turn(1)]})
    assert first["imported"] == 2 and first["already"] == 1
    assert first["episode_ids"][0] == first["episode_ids"][2]
    await handlers.admin_call("writes", "scope_create", {"name": "team-a"})
    second = await handlers.admin_call("writes", "import_episodes", {"scope": "team-a", "episodes": [turn(2), turn(3)]})
    assert second["imported"] == 1 and second["already"] == 1
    assert second["episode_ids"][0] == first["episode_ids"][1], "the stored episode's id, wherever it lives"
    assert await count_in(handlers) == 3
    plain = await handlers.admin_call("writes", "import_episodes", {"episodes": [
        {"content": "no origin"}, {"content": "no origin", "metadata": {"source": "slack"}}]})
    assert plain["imported"] == 2, "episodes without an external id are never deduplicated"


async def test_two_importers_racing_on_the_same_turns_store_each_once(stack: EchoStack) -> None:
    await stack.admin_call("writes", "scope_create", {"name": "team-b"})
    batch = [turn(n) for n in range(10, 40)]
    results = await asyncio.gather(
        stack.admin_call("writes", "import_episodes", {"episodes": batch}),
        stack.admin_call("writes", "import_episodes", {"scope": "team-b", "episodes": batch}))
    assert sum(r["imported"] for r in results) == 30 and count(stack) == 30
    assert results[0]["episode_ids"] == results[1]["episode_ids"]


@pytest.mark.parametrize("episode", [
    {"content": "x", "source": "codex"},
    {"content": "x", "external_id": "a"},
    {"content": "x", "source": "codex", "external_id": "a", "metadata": {"external_id": "b"}},
    {"content": "x", "metadata": {"external_id": "b"}},
    {"content": "x", "source": "codex", "external_id": "a", "metadata": {"source": "cursor"}},
    {"content": "x", "source": "Not A Name", "external_id": "a"},
    {"content": "x", "source": "codex", "external_id": "token ghp_aB3dE5fG7hJ9kL1mN3pQ5rS7tU9vW1xY3zA5"},
])
async def test_a_bad_origin_is_refused_and_stores_nothing(handlers: Handlers, episode: dict[str, Any]) -> None:
    with pytest.raises(EchoError) as refused:
        await handlers.admin_call("writes", "import_episodes", {"episodes": [turn(99), episode]})
    assert refused.value.code == "invalid_argument"
    assert await count_in(handlers) == 0
