"""The agent token format: `em_<org>_<random>`, stored only as a hash.

The org is readable so the edge knows which org's services to ask before it can verify anything;
the random part carries 256 bits. The edge (which parses) and the store (which issues and hashes)
both import this module.
"""

from __future__ import annotations

import hashlib
import secrets

TOKEN_PREFIX = "em_"


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
