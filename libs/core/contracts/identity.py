"""Who is who on the bus: the admin identity and the builtin scope names.

Pure rules, no database: the edge and the CLI use them without loading a driver, and the access
policy (libs/server/store/access.py) builds everything else on them.
"""

from __future__ import annotations

from echo_memory.libs.core.contracts.bus import Caller
from echo_memory.libs.core.contracts.errors import ScopeDenied

ADMIN_AGENT = "admin"
WILDCARD = "*"  # in a token's grants: every scope; in a scope's readers/writers: every agent
SHARED = "shared"
SOLO = "solo"
SOLO_PREFIX = "solo:"
BUILTIN_SCOPES = frozenset({SHARED, SOLO})
DEFAULT_GRANTS = (SHARED, SOLO)  # what a new token may read and write unless told otherwise
# The identities of the opt-in CLI commands that ask the user's own model (`echo-memory distil`,
# `echo-memory infer-causal-hints`). No token can carry them, so only the CLI on the host writes
# as them: every row they write is audited as post-hoc, and `--clear` finds exactly their writes.
DISTIL_AGENT = "echo-distil"
HINTS_AGENT = "echo-causal-hints"
POST_HOC_AGENTS = frozenset({DISTIL_AGENT, HINTS_AGENT})
# What `echo-memory consolidate abstract` stores digest abstracts as. Reserved like the others, but
# it writes no fact, so `--clear` of the fact-writing commands has nothing of it to end.
ABSTRACTS_AGENT = "echo-abstracts"


def admin_caller(org: str) -> Caller:
    """The caller the CLI and the operator send over the bus to act as `org`'s admin."""
    return Caller(org=org, agent_id=ADMIN_AGENT, read_scopes=[WILDCARD], write_scopes=[WILDCARD])


def is_admin(caller: Caller) -> bool:
    """True only for the admin identity: agent `admin` granted every scope to read and write."""
    return (
        caller.agent_id == ADMIN_AGENT
        and WILDCARD in caller.read_scopes
        and WILDCARD in caller.write_scopes
    )


def require_admin(caller: Caller, action: str) -> None:
    """Return when `caller` is the admin identity.

    Raises:
        ScopeDenied: any other caller, naming `action` (e.g. "manage tokens", "export").
    """
    if not is_admin(caller):
        raise ScopeDenied(
            f"agent '{caller.agent_id}' may not {action}: only the org's admin identity may "
            "(the echo-memory CLI on the host, or the Kubernetes operator)"
        )


def is_reserved_agent(agent_id: str) -> bool:
    """True for the agent ids no token may carry: the admin identity's and the opt-in model commands'."""
    return agent_id in (ADMIN_AGENT, ABSTRACTS_AGENT) or agent_id in POST_HOC_AGENTS


def is_post_hoc(caller: Caller) -> bool:
    """True when `caller` is one of the post-hoc commands (POST_HOC_AGENTS): its writes are audited as such."""
    return caller.agent_id in POST_HOC_AGENTS
