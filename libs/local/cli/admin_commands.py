"""Commands that act on one org: init-db, token, scope, mcp (stdio)."""

from __future__ import annotations

from types import ModuleType
from typing import Any


def _admin() -> ModuleType:
    # Loaded when one of these commands runs: it pulls in the database driver, which other
    # commands (the edge's `service edge` above all) must not load.
    from echo_memory.libs.local.cli import admin

    return admin


def register(sub: Any) -> None:
    init_db = sub.add_parser("init-db", help="apply pending schema migrations (ECHO_MEMORY_DATABASE_URL or the embedded db)")
    init_db.set_defaults(func=lambda s, a: _admin().init_db(s))

    mcp = sub.add_parser("mcp", help="serve MCP over stdio for clients that launch a command")
    mcp.add_argument("--token", help="agent token (default: ECHO_MEMORY_TOKEN)")
    mcp.set_defaults(func=lambda s, a: _admin().mcp_stdio(s, a.token))

    token = sub.add_parser("token", help="manage agent tokens")
    token_sub = token.add_subparsers(dest="token_command", required=True)
    create = token_sub.add_parser("create", help="issue a token for an agent (shown once)")
    create.add_argument("--agent", required=True, help="the agent id the token acts as (not `admin`)")
    create.add_argument("--read", default="shared,solo", help="comma-separated scopes it may read")
    create.add_argument("--write", default="shared,solo", help="comma-separated scopes it may write")
    token_sub.add_parser("list", help="list tokens (prefixes only)")
    revoke = token_sub.add_parser("revoke", help="revoke a token by id, or every token of an agent")
    revoke.add_argument("--id", dest="token_id", help="the token's id, as `token list` shows it")
    revoke.add_argument("--agent", help="revoke every token of this agent id")
    grant = token_sub.add_parser("grant", help="let an existing token read or write more scopes")
    grant.add_argument("--id", dest="token_id", required=True, help="the token's id, as `token list` shows it")
    grant.add_argument("--read", default="", help="comma-separated scopes it may also read")
    grant.add_argument("--write", default="", help="comma-separated scopes it may also write")
    token.set_defaults(func=lambda s, a: _admin().token(s, a))

    scope = sub.add_parser("scope", help="manage named scopes")
    scope_sub = scope.add_subparsers(dest="scope_command", required=True)
    scope_create = scope_sub.add_parser("create", help="create a named scope")
    scope_create.add_argument("name", help="the scope's name (not shared, solo or solo:...)")
    scope_create.add_argument("--description", default="", help="what the scope holds, shown by status")
    scope_sub.add_parser("list", help="list every scope with its facts and when it was created")
    scope_show = scope_sub.add_parser("show", help="a scope's readers and writers, and the tokens that may use it")
    scope_show.add_argument("name", help="the scope's name (solo:AGENT for an agent's solo scope)")
    scope_delete = scope_sub.add_parser("delete", help="delete an empty named scope (erase it first with `forget`)")
    scope_delete.add_argument("name", help="the named scope to delete")
    scope_delete.add_argument("--erase", action="store_true",
                              help="does not erase: prints the command that does (`echo-memory forget`)")
    scope.set_defaults(func=lambda s, a: _admin().scope(s, a))
