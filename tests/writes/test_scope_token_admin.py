"""Scope and token administration on the writes service's real handlers (one rolled-back transaction)."""

from __future__ import annotations

from typing import Any

import pytest

from echo_memory.libs.core.contracts.bus import Caller
from echo_memory.libs.core.contracts.errors import InvalidArgument, NotFound, ScopeDenied
from echo_memory.libs.server.store import tokens
from echo_memory.libs.testing.tiers import Handlers

EPISODE = {
    "session_id": "s-admin",
    "entities": [{"name": "Billing API", "type": "service"}, {"name": "Postgres", "type": "database"}],
    "facts": [{"source": "Billing API", "target": "Postgres", "relation": "stores invoices in",
               "fact": "The billing API stores invoices in Postgres.", "confidence": "extracted"}],
}
COUNTS = "SELECT (SELECT count(*) FROM tokens), (SELECT count(*) FROM scopes), (SELECT count(*) FROM agents)"


async def _counts(handlers: Handlers) -> Any:
    return await (await handlers.conn.execute(COUNTS)).fetchone()


async def _token(handlers: Handlers, agent: str, read: list[str], write: list[str]) -> dict[str, Any]:
    return await handlers.admin_call("writes", "token_create",
                                     {"agent_id": agent, "read_scopes": read, "write_scopes": write})


async def test_scope_list_shows_every_scope_with_its_facts(handlers: Handlers) -> None:
    await handlers.admin_call("writes", "scope_create", {"name": "team-a", "description": "Team A's notes"})
    await handlers.admin_call("writes", "write_episode", {**EPISODE, "scope": "team-a"})
    listed = {s["name"]: s for s in (await handlers.admin_call("writes", "scope_list", {}))["scopes"]}
    assert listed["team-a"]["description"] == "Team A's notes"
    assert (listed["team-a"]["facts"], listed["team-a"]["active_facts"], listed["team-a"]["kind"]) == (1, 1, "named")
    assert listed["team-a"]["episodes"] >= 1 and listed["team-a"]["created_at"]
    assert listed["shared"]["kind"] == "shared"


async def test_a_token_for_a_scope_that_does_not_exist_is_refused_naming_scope_create(handlers: Handlers) -> None:
    before = await _counts(handlers)
    with pytest.raises(NotFound) as caught:
        await _token(handlers, "cursor", ["shared", "team-x"], ["shared"])
    assert "`echo-memory scope create team-x`" in caught.value.message and not caught.value.retryable
    with pytest.raises(InvalidArgument, match="cannot be granted"):
        await _token(handlers, "cursor", ["solo:claude"], [])
    assert await _counts(handlers) == before
    await handlers.admin_call("writes", "scope_create", {"name": "team-x"})
    made = await _token(handlers, "cursor", ["shared", "team-x"], ["*"])
    assert made["agent_id"] == "cursor"


async def test_token_revoke_with_an_id_that_is_not_one_is_invalid_argument(handlers: Handlers) -> None:
    with pytest.raises(InvalidArgument, match="token list"):
        await handlers.admin_call("writes", "token_revoke", {"token_id": "nope"})
    with pytest.raises(NotFound):
        await handlers.admin_call("writes", "token_revoke", {"token_id": "6f1d2c3b-0000-4000-8000-00000000abcd"})
    made = await _token(handlers, "cursor", ["shared"], ["shared"])
    assert (await handlers.admin_call("writes", "token_revoke", {"token_id": made["token_id"]}))["revoked"] == 1
    # Revoking it again is no error: nothing more was revoked.
    assert (await handlers.admin_call("writes", "token_revoke", {"token_id": made["token_id"]}))["revoked"] == 0


async def test_token_grant_adds_scopes_to_a_live_token(handlers: Handlers) -> None:
    await handlers.admin_call("writes", "scope_create", {"name": "team-b"})
    made = await _token(handlers, "codex", ["shared"], ["shared"])
    granted = await handlers.admin_call("writes", "token_grant",
                                        {"token_id": made["token_id"], "read_scopes": ["team-b", "shared"],
                                         "write_scopes": ["team-b"]})
    assert (granted["added_read"], granted["added_write"]) == (["team-b"], ["team-b"])
    assert granted["token"]["read_scopes"] == ["shared", "team-b"]
    verified = await handlers.admin_call("writes", "token_verify", {"token_hash": tokens.hash_token(made["token"])})
    assert verified["read_scopes"] == ["shared", "team-b"] and verified["write_scopes"] == ["shared", "team-b"]
    # The token may now write the new scope through the real write path.
    codex = Caller(org=handlers.org, agent_id="codex", read_scopes=verified["read_scopes"],
                   write_scopes=verified["write_scopes"])
    assert (await handlers.call(codex, "writes", "write_episode", {**EPISODE, "scope": "team-b"}))["stored"]

    again = await handlers.admin_call("writes", "token_grant", {"token_id": made["token_id"], "read_scopes": ["team-b"]})
    assert again["added_read"] == [] and again["token"]["read_scopes"] == ["shared", "team-b"]


@pytest.mark.parametrize(("args", "error", "words"), [
    ({"token_id": "nope", "read_scopes": ["shared"]}, InvalidArgument, "not a token id"),
    ({"token_id": "6f1d2c3b-0000-4000-8000-00000000abcd", "read_scopes": ["shared"]}, NotFound, "no token has id"),
    ({"token_id": "{live}", "read_scopes": ["ghost"]}, NotFound, "`echo-memory scope create ghost`"),
    ({"token_id": "{live}"}, InvalidArgument, "at least one scope"),
    ({"token_id": "{revoked}", "read_scopes": ["shared"]}, InvalidArgument, "was revoked"),
])
async def test_token_grant_refusals_change_nothing(
    handlers: Handlers, args: dict[str, Any], error: type[Exception], words: str
) -> None:
    live = await _token(handlers, "codex", ["shared"], ["shared"])
    revoked = await _token(handlers, "gone", ["shared"], ["shared"])
    await handlers.admin_call("writes", "token_revoke", {"token_id": revoked["token_id"]})
    ids = {"{live}": live["token_id"], "{revoked}": revoked["token_id"]}
    args = {**args, "token_id": ids.get(args["token_id"], args["token_id"])}
    before = await (await handlers.conn.execute("SELECT id, read_scopes, write_scopes FROM tokens ORDER BY id")).fetchall()
    with pytest.raises(error, match=words):  # type: ignore[call-overload]
        await handlers.admin_call("writes", "token_grant", args)
    after = await (await handlers.conn.execute("SELECT id, read_scopes, write_scopes FROM tokens ORDER BY id")).fetchall()
    assert after == before


async def test_scope_show_names_the_tokens_that_may_read_and_write_it(handlers: Handlers) -> None:
    await handlers.admin_call("writes", "scope_create", {"name": "team-c"})
    reader = await _token(handlers, "reader-bot", ["team-c"], ["shared"])
    both = await _token(handlers, "ci-bot", ["*"], ["*"])
    await _token(handlers, "outsider", ["shared"], ["shared"])
    gone = await _token(handlers, "old-bot", ["team-c"], ["team-c"])
    await handlers.admin_call("writes", "token_revoke", {"token_id": gone["token_id"]})
    shown = await handlers.admin_call("writes", "scope_show", {"name": "team-c"})
    assert shown["readers"] == ["*"] and shown["writers"] == ["*"] and shown["scope"]["name"] == "team-c"
    access = {t["agent_id"]: (t["read"], t["write"], t["token_id"]) for t in shown["tokens"]}
    assert access == {"reader-bot": (True, False, reader["token_id"]), "ci-bot": (True, True, both["token_id"])}

    # A solo scope is its owner's alone: another agent's `*` token does not reach it.
    owner = await _token(handlers, "claude", ["solo"], ["solo"])
    claude = Caller(org=handlers.org, agent_id="claude", read_scopes=["solo"], write_scopes=["solo"])
    await handlers.call(claude, "writes", "write_episode", {**EPISODE, "scope": "solo"})
    solo = await handlers.admin_call("writes", "scope_show", {"name": "solo:claude"})
    assert [(t["agent_id"], t["token_id"]) for t in solo["tokens"]] == [("claude", owner["token_id"])]

    with pytest.raises(NotFound, match="scope list"):
        await handlers.admin_call("writes", "scope_show", {"name": "team-zz"})


async def test_scope_delete_removes_an_empty_scope_and_its_grants(handlers: Handlers) -> None:
    await handlers.admin_call("writes", "scope_create", {"name": "scratch"})
    made = await _token(handlers, "codex", ["shared", "scratch"], ["scratch"])
    deleted = await handlers.admin_call("writes", "scope_delete", {"name": "scratch"})
    assert deleted == {"name": "scratch", "tokens_updated": 1}
    names = [s["name"] for s in (await handlers.admin_call("writes", "scope_list", {}))["scopes"]]
    assert "scratch" not in names
    verified = await handlers.admin_call("writes", "token_verify", {"token_hash": tokens.hash_token(made["token"])})
    assert (verified["read_scopes"], verified["write_scopes"]) == (["shared"], [])
    # A scope of the same name created later is not reachable through the old grant.
    await handlers.admin_call("writes", "scope_create", {"name": "scratch"})
    shown = await handlers.admin_call("writes", "scope_show", {"name": "scratch"})
    assert made["token_id"] not in [t["token_id"] for t in shown["tokens"]]


async def test_scope_delete_refuses_a_scope_holding_facts_and_names_forget(handlers: Handlers) -> None:
    await handlers.admin_call("writes", "scope_create", {"name": "team-d"})
    await handlers.admin_call("writes", "write_episode", {**EPISODE, "scope": "team-d"})
    before = await _counts(handlers)
    with pytest.raises(InvalidArgument) as caught:
        await handlers.admin_call("writes", "scope_delete", {"name": "team-d"})
    assert "`echo-memory forget --scope team-d --confirm`" in caught.value.message
    assert "1 facts" in caught.value.message
    assert await _counts(handlers) == before
    listed = {s["name"]: s for s in (await handlers.admin_call("writes", "scope_list", {}))["scopes"]}
    assert listed["team-d"]["facts"] == 1


@pytest.mark.parametrize(("name", "error"), [
    ("shared", InvalidArgument), ("solo:claude", InvalidArgument), ("nothing-here", NotFound),
])
async def test_scope_delete_refuses_builtin_and_missing_scopes(handlers: Handlers, name: str, error: type[Exception]) -> None:
    before = await _counts(handlers)
    with pytest.raises(error):  # type: ignore[call-overload]
        await handlers.admin_call("writes", "scope_delete", {"name": name})
    assert await _counts(handlers) == before


@pytest.mark.parametrize(("verb", "args"), [
    ("scope_list", {}), ("scope_show", {"name": "shared"}), ("scope_delete", {"name": "team-q"}),
    ("token_grant", {"token_id": "6f1d2c3b-0000-4000-8000-00000000abcd", "read_scopes": ["shared"]}),
])
async def test_administration_is_the_admins_only(handlers: Handlers, verb: str, args: dict[str, Any]) -> None:
    ci_bot = Caller(org=handlers.org, agent_id="ci-bot", read_scopes=["*"], write_scopes=["*"])
    with pytest.raises(ScopeDenied, match="agent 'ci-bot' may not"):
        await handlers.call(ci_bot, "writes", verb, args)
