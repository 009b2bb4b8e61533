"""An idempotency key seen before returns the first call's response, and stores nothing again."""

from __future__ import annotations

import psycopg
from psycopg.types.json import Jsonb

from libs.contracts.bus import Caller
from libs.contracts.write import WriteEpisodeResult

LOOKUP = "SELECT response FROM idempotency WHERE agent_id = %s AND key = %s"
REMEMBER = """
INSERT INTO idempotency (agent_id, key, response) VALUES (%s, %s, %s)
ON CONFLICT (agent_id, key) DO NOTHING
"""


async def lookup(conn: psycopg.AsyncConnection, caller: Caller, key: str) -> WriteEpisodeResult | None:
    row = await (await conn.execute(LOOKUP, (caller.agent_id, key))).fetchone()
    return WriteEpisodeResult.model_validate(row[0]) if row else None


async def remember(conn: psycopg.AsyncConnection, caller: Caller, key: str, result: WriteEpisodeResult) -> None:
    await conn.execute(REMEMBER, (caller.agent_id, key, Jsonb(result.model_dump(mode="json"))))
