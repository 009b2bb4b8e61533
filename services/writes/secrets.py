"""Secrets are never stored: spot the common kinds and name the kind (never the value) in the refusal."""

from __future__ import annotations

import re

# Ordered from most to least specific, so the message names the best-fitting kind.
_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("a private key", re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----")),
    ("an AWS access key", re.compile(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b")),
    ("a GitHub token", re.compile(r"\b(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{30,})")),
    ("a Slack token", re.compile(r"\bxox[abprs]-[A-Za-z0-9-]{10,}")),
    ("a Google API key", re.compile(r"\bAIza[0-9A-Za-z_\-]{35}\b")),
    ("an API key", re.compile(r"\bsk-(?:ant-|proj-|live-|test-)?[A-Za-z0-9_\-]{20,}")),
    ("an Echo Memory token", re.compile(r"\bem_[a-z0-9-]+_[A-Za-z0-9_\-]{30,}")),
    ("a JSON web token", re.compile(r"\beyJ[A-Za-z0-9_\-]{8,}\.eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}")),
    ("a bearer token", re.compile(r"(?i)\bbearer\s+[A-Za-z0-9._~+/\-]{20,}=*")),
    ("a password in a connection string", re.compile(r"\b[a-z][a-z0-9+.\-]*://[^/\s:@]+:[^/\s@]{3,}@")),
    (
        "a password or secret in an assignment",
        re.compile(
            r"(?i)\b(?:password|passwd|pwd|passphrase|secret|api[_-]?key|access[_-]?key|auth[_-]?token|client[_-]?secret)"
            r"\s*[:=]\s*[\"']?[^\s\"']{4,}"
        ),
    ),
)


def find_secret(text: str) -> str | None:
    """The kind of secret `text` contains ("an AWS access key", …), or None."""
    for kind, pattern in _PATTERNS:
        if pattern.search(text):
            return kind
    return None
