"""Echo Memory: one shared, temporal memory for AI agents, served over MCP.

The one import package of the `echo-mem` distribution. Its subfolders are links to the
repository's top-level folders, so a module's import path is its path in the repository:

- `echo_memory.libs.core`: contracts, configuration, the secret filter. Imports nothing of ours.
- `echo_memory.libs.server`: what every service process loads (store, bus, service runtime,
  embedder, telemetry, orgs).
- `echo_memory.services.<name>`: one service's behaviour each (edge, writes, retrieval, ...).
- `echo_memory.operator`: the Kubernetes operator.
- `echo_memory.libs.local`: the laptop tool (CLI, supervisor, client wiring, history readers,
  hook runtime, the user's-model client, evaluation commands).
- `echo_memory.libs.testing`: fixtures and factories for tests.

The layers import downwards only (pyproject.toml, import-linter's `layers` contract).
"""
