"""Secrets are never stored: every service that stores text refuses or redacts what these find.

`find_secret(text)` names the kind of the first secret ("an AWS access key") or returns None;
`redact_secrets(text)` replaces each one with `[redacted <kind>]`. Both look through NFKC folding,
invisible characters, letter-by-letter spacing and base64 (see normalise.py); the kinds are in
kinds.py and documented in docs/security.md.
"""

from echo_memory.libs.core.secrets.detector import Finding, find_secret, findings, redact_secrets

__all__ = ["Finding", "find_secret", "findings", "redact_secrets"]
