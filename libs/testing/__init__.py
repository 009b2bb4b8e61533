"""Test harness shipped with the package: real Postgres, real NATS, real services, real HTTP.

`EchoStack` (echo_memory.libs.local.stack, where the evaluation commands use it too) starts every
built service and the edge inside the current event loop, so a test can drive the system through
the real MCP client and still read the spans it produced.
"""

from echo_memory.libs.local.stack import EchoStack, mcp_http_client, server_dir, tool_error

__all__ = ["EchoStack", "mcp_http_client", "server_dir", "tool_error"]
