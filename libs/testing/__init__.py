"""Test harness shipped with the package: real Postgres, real NATS, real services, real HTTP.

`EchoStack` starts every built service and the edge inside the current event loop, so a test can
drive the system through the real MCP client and still read the spans it produced.
"""

from libs.testing.stack import EchoStack

__all__ = ["EchoStack"]
