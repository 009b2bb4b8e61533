"""Agent tokens: minted once, stored as a hash, bound to an org, an agent and its scopes.

A token looks like `em_<org>_<random>`; the org is readable so the edge knows which org's
services to ask before it can verify anything, and the random part carries 256 bits.
"""

from __future__ import annotations

import hashlib
import secrets

TOKEN_PREFIX = "em_"

UPSERT_AGENT = "INSERT INTO agents (id) VALUES (%s) ON CONFLICT (id) DO NOTHING"
INSERT_TOKEN = """
INSERT INTO tokens (token_hash, prefix, agent_id, read_scopes, write_scopes)
VALUES (%s, %s, %s, %s, %s) RETURNING id
"""
VERIFY_TOKEN = """
SELECT agent_id, read_scopes, write_scopes FROM tokens
WHERE token_hash = %s AND revoked_at IS NULL
"""
LIST_TOKENS = """
SELECT id, prefix, agent_id, read_scopes, write_scopes, created_at, revoked_at
FROM tokens ORDER BY created_at
"""
REVOKE_BY_ID = "UPDATE tokens SET revoked_at = now() WHERE id = %s AND revoked_at IS NULL"
REVOKE_BY_AGENT = "UPDATE tokens SET revoked_at = now() WHERE agent_id = %s AND revoked_at IS NULL"


def mint(org: str) -> str:
    """A new random token for `org` (not yet stored)."""
    return f"{TOKEN_PREFIX}{org}_{secrets.token_urlsafe(32)}"


def hash_token(token: str) -> str:
    """What is stored and looked up: the sha256 of the whole token."""
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def display_prefix(token: str) -> str:
    return token[: len(TOKEN_PREFIX) + 12]


def org_of(token: str) -> str | None:
    """The org a token names, or None when it is not one of ours."""
    if not token.startswith(TOKEN_PREFIX):
        return None
    org, sep, rest = token[len(TOKEN_PREFIX) :].partition("_")
    return org if sep and org and rest else None
