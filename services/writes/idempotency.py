"""An idempotency key seen before returns the first call's response and stores nothing again.

Keys belong to the agent (two agents may use the same key). The key is locked for the rest of
the write's transaction, so two concurrent calls with one key cannot both write: the second waits,
then finds the first's response. A key reused with different arguments is refused, because
answering with a response to another request would hide that the new one was never stored.
Only responses that stored something (stored, partial) are remembered: an outcome that stored
nothing (deferred, unchanged, no_facts, refused) leaves no row at all, and re-running it answers
the same or better — after a deferral the same key may carry the follow-up with
entity_resolutions.
"""

from __future__ import annotations

import hashlib
import json

import psycopg
from psycopg.types.json import Jsonb

from echo_memory.libs.core.contracts.bus import Caller
from echo_memory.libs.core.contracts.errors import InvalidArgument
from echo_memory.libs.core.contracts.write import WriteEpisodeInput, WriteEpisodeResult

KEY_LOCK = "SELECT pg_advisory_xact_lock(hashtext('echo-memory:idempotency:' || %s || ':' || %s))"
LOOKUP = "SELECT response, request_hash FROM idempotency WHERE agent_id = %s AND key = %s"
REMEMBER = """
INSERT INTO idempotency (agent_id, key, response, request_hash) VALUES (%s, %s, %s, %s)
ON CONFLICT (agent_id, key) DO NOTHING
"""


def request_hash(args: WriteEpisodeInput) -> str:
    """A digest of the call's arguments without the key itself (defaults filled, keys sorted)."""
    body = args.model_dump(mode="json", exclude={"idempotency_key"})
    return hashlib.sha256(json.dumps(body, sort_keys=True, ensure_ascii=False).encode()).hexdigest()


async def lookup(
    conn: psycopg.AsyncConnection, caller: Caller, args: WriteEpisodeInput
) -> WriteEpisodeResult | None:
    """The first response for this agent's key, after locking the key; None when the key is new.

    Raises InvalidArgument when the key was first used with different arguments.
    """
    assert args.idempotency_key is not None
    await conn.execute(KEY_LOCK, (caller.agent_id, args.idempotency_key))
    row = await (await conn.execute(LOOKUP, (caller.agent_id, args.idempotency_key))).fetchone()
    if row is None:
        return None
    response, first_hash = row
    if first_hash is not None and first_hash != request_hash(args):
        raise InvalidArgument(
            f"idempotency_key '{args.idempotency_key[:80]}' was first used with different arguments; "
            "use a new key for a different call"
        )
    return WriteEpisodeResult.model_validate(response)


async def remember(
    conn: psycopg.AsyncConnection, caller: Caller, args: WriteEpisodeInput, result: WriteEpisodeResult
) -> None:
    """Keep the response for the key, in the write's own transaction (so both commit or neither)."""
    if not result.stored:
        return
    assert args.idempotency_key is not None
    await conn.execute(
        REMEMBER,
        (caller.agent_id, args.idempotency_key, Jsonb(result.model_dump(mode="json")), request_hash(args)),
    )
