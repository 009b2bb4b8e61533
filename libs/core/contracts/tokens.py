"""The agent token format: `em_<org>_<random>`, stored only as a hash.

The org is readable so the edge knows which org's services to ask before it can verify anything;
the random part carries 256 bits. The edge (which parses) and the store (which issues and hashes)
both import this module.
"""

from __future__ import annotations

import hashlib
import re
import secrets

TOKEN_PREFIX = "em_"
RANDOM_BYTES = 32
# What `mint` makes: the prefix, an org name, `_`, then the 43 characters of token_urlsafe(32).
_WELL_FORMED = re.compile(r"^em_[a-z0-9][a-z0-9-]{0,62}_[A-Za-z0-9_-]{43}$")


def mint(org: str) -> str:
    """A new random token for `org` (not yet stored)."""
    return f"{TOKEN_PREFIX}{org}_{secrets.token_urlsafe(RANDOM_BYTES)}"


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


def well_formed(token: str) -> bool:
    """True when `token` has the exact shape `mint` produces; anything else cannot be a live token."""
    return bool(_WELL_FORMED.match(token))


TOKEN_ENV = "ECHO_MEMORY_TOKEN"
# A client that reads `${ECHO_MEMORY_TOKEN}` (or `${env:…}`, `$…`) from a config file whose
# variable is not set passes the placeholder itself, or nothing, as the token.
_PLACEHOLDER = re.compile(r"^\$(\{(env:)?[A-Za-z_][A-Za-z0-9_]*\}|[A-Za-z_][A-Za-z0-9_]*)$")
_SET_IT = (f"set {TOKEN_ENV} to a token from `echo-memory token create --agent NAME` in the environment "
           "that starts the client (export it in the shell, then restart the client)")


def token_problem(token: str | None) -> str | None:
    """Why `token` cannot be a token at all, before asking anyone: empty, or an unexpanded
    `${ECHO_MEMORY_TOKEN}`-style placeholder; None for anything else (which may still be refused)."""
    if token is None:
        return None
    text = token.strip()
    if not text:
        return f"the token is empty: {_SET_IT}"
    if _PLACEHOLDER.match(text) or text.startswith("${"):
        return f"the token is the unexpanded placeholder '{text[:64]}', so {TOKEN_ENV} was not set: {_SET_IT}"
    return None
