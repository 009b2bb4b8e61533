"""The post-hoc commands' identities are reserved: no token carries them, so only the host's CLI writes as them."""

from __future__ import annotations

import psycopg
import pytest

from echo_memory.libs.core.contracts.errors import InvalidArgument
from echo_memory.libs.core.contracts.identity import POST_HOC_AGENTS
from echo_memory.libs.server.store import admin


@pytest.mark.parametrize("agent", sorted(POST_HOC_AGENTS))
def test_no_token_is_issued_for_a_post_hoc_identity(database_url: str, org: str, agent: str) -> None:
    with pytest.raises(InvalidArgument, match="reserved"):
        admin.issue_token(database_url, org=org, agent_id=agent, read_scopes=["shared"], write_scopes=["shared"])
    with psycopg.connect(database_url) as conn:
        assert conn.execute("SELECT count(*) FROM tokens").fetchone() == (0,)
