"""Test harness shipped with the package: real Postgres, real NATS, real services, real HTTP.

`EchoStack` starts every built service and the edge inside the current event loop, so a test can
drive the system through the real MCP client and still read the spans it produced.
"""

import tempfile
from pathlib import Path

from libs.testing.stack import EchoStack, mcp_http_client, tool_error


def server_dir(prefix: str) -> Path:
    """A fresh directory for a test server's data, outside pytest's temp root.

    As root, Postgres runs as the `embedded_postgres` user and must traverse every parent of its
    data directory; pytest re-tightens its temp root to 0700 whenever another pytest session starts
    on the machine, which would lock a running server out mid-session.
    """
    return Path(tempfile.mkdtemp(prefix=f"echo-{prefix}-", dir="/tmp"))


__all__ = ["EchoStack", "mcp_http_client", "server_dir", "tool_error"]
