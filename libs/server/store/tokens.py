"""Agent tokens in the store: minted once, stored as a hash, bound to an org, an agent and its scopes.

The format itself (minting, hashing, reading the org) is a contract: libs/core/contracts/tokens.py.
"""

from __future__ import annotations

from echo_memory.libs.core.contracts.tokens import TOKEN_PREFIX, display_prefix, hash_token, mint, org_of

UPSERT_AGENT = "INSERT INTO agents (id) VALUES (%s) ON CONFLICT (id) DO NOTHING"
INSERT_TOKEN = """
INSERT INTO tokens (token_hash, prefix, agent_id, read_scopes, write_scopes)
VALUES (%s, %s, %s, %s, %s) RETURNING id
"""
VERIFY_TOKEN = """
SELECT agent_id, read_scopes, write_scopes, id FROM tokens
WHERE token_hash = %s AND revoked_at IS NULL
"""
LIST_TOKENS = """
SELECT id, prefix, agent_id, read_scopes, write_scopes, created_at, revoked_at
FROM tokens ORDER BY created_at
"""
REVOKE_BY_ID = "UPDATE tokens SET revoked_at = now() WHERE id = %s AND revoked_at IS NULL"
REVOKE_BY_AGENT = "UPDATE tokens SET revoked_at = now() WHERE agent_id = %s AND revoked_at IS NULL"

__all__ = [
    "INSERT_TOKEN", "LIST_TOKENS", "REVOKE_BY_AGENT", "REVOKE_BY_ID", "TOKEN_PREFIX", "UPSERT_AGENT", "VERIFY_TOKEN",
    "display_prefix", "hash_token", "mint", "org_of",
]
