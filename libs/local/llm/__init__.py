"""The opt-in jobs that ask the user's own model: distil imported turns, infer causal hints.

Only the CLI commands `echo-memory distil` and `echo-memory infer-causal-hints` import this
package; libs/local/llm/client.py holds the one outbound request of the engine. No service, write,
migration, import or hook reaches it (an import-linter contract in pyproject.toml and
tests/llm/test_llm_isolation.py check that).
"""
