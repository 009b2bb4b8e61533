"""The kinds of secret, each a token shape plus, where the shape alone would catch ordinary text,
a check on the match. Ordered from most to least specific, so a refusal names the best-fitting kind.

A shape with a `secret` group redacts only that group (the value after `password=`), else the whole
match.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class Kind:
    """One kind of secret: `noun` names it ("AWS access key"), `article` makes it a phrase."""

    noun: str
    article: str
    pattern: re.Pattern[str]
    check: Callable[[re.Match[str]], bool] | None = None
    # Lower-case fragments one of which every match contains: a text without any skips the
    # pattern (a substring test is far cheaper than a regex scan over a long document).
    hints: tuple[str, ...] = ()

    def may_match(self, lowered: str) -> bool:
        """False when `lowered` (the text in lower case) cannot hold this kind."""
        return not self.hints or any(hint in lowered for hint in self.hints)

    @property
    def phrase(self) -> str:
        """"an AWS access key": what a refusal says."""
        return f"{self.article} {self.noun}"


def _classes(value: str) -> int:
    return (any(c.islower() for c in value) + any(c.isupper() for c in value)
            + any(c.isdigit() for c in value) + any(not c.isalnum() for c in value))


def _random_looking(match: re.Match[str]) -> bool:
    """Issued tokens are random: letters and digits mixed. Rules out `sk-learn-…`, `hf_model_name`."""
    body = match.group("secret") if "secret" in match.re.groupindex else match.group()
    return any(c.isdigit() for c in body) and any(c.isalpha() for c in body)


def _decodes_to_text(value: str) -> bool:
    try:
        raw = base64.b64decode(value + "=" * (-len(value) % 4), validate=True)
        raw.decode("utf-8")
    except (binascii.Error, ValueError):
        return False
    return True


def _aws_secret(match: re.Match[str]) -> bool:
    """40 base64 characters mixing upper, lower and digits (hex digests and commit ids do not) that
    are not base64 of ordinary text."""
    value = match.group("secret")
    return (any(c.isupper() for c in value) and any(c.islower() for c in value)
            and any(c.isdigit() for c in value) and not _decodes_to_text(value))


# Values after "password is …" that are ordinary: numbers with units, dates, versions.
PLAIN_VALUE = re.compile(
    r"^(?:\d+[-\s]?[a-z]+|\d{4}-\d{2}-\d{2}|v?\d+(?:\.\d+)+[a-z0-9.\-]*|[a-z]+(?:-[a-z]+)*-?\d{0,3})$"
)


def looks_like_password(value: str) -> bool:
    """A value a person chose as a password: ≥ 8 ASCII characters mixing at least three of lower case,
    upper case, digits and symbols (or letters and digits), and not a plain word, number with a unit,
    date or version."""
    value = value.rstrip(".,;:)]}'\"”’")
    # Non-ASCII values are words of a script written without spaces far more often than passwords.
    if len(value) < 8 or not value.isascii() or PLAIN_VALUE.match(value):
        return False
    return _classes(value) >= 3 or (_classes(value) == 2 and any(c.isdigit() for c in value)
                                    and any(c.isalpha() for c in value) and not value.isdigit())


def _prose_password(match: re.Match[str]) -> bool:
    return looks_like_password(match.group("secret"))


def _prose_token(match: re.Match[str]) -> bool:
    """An issued value: long, letters and digits mixed ("the token is required" is not one)."""
    value = match.group("secret").rstrip(".,;:)]}'\"”’")
    return len(value) >= 16 and _random_looking(match)


_UUID = r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"
_B64 = r"[A-Za-z0-9+/]"

_AWS_WORDS = ("aws", "amazon", "secret", "s3", "iam")
_AWS_CONTEXT = r"(?i:aws|amazon|secret|s3|iam)"
_ALONE_40 = r"(?<![A-Za-z0-9+/])(?P<secret>" + _B64 + r"{40})(?![A-Za-z0-9+/=])"
_PASSWORD_SAID = (
    r"(?i:\b(?:password|passphrase|passwd|passcode|pwd|pw|pass)(?:\s+(?:for|of|on|to)(?:\s+[\w.@\-]+){1,3}?)?"
    r"\s+(?:is|was)\s+(?:now\s+|still\s+|set\s+to\s+)?)[\"'“‘`]?(?P<secret>[^\s\"'”’`]+)"
)

_TOKEN_SAID = (
    r"(?i:\b(?:api[ _\-]?key|secret(?:[ _\-]?key)?|token|access[ _\-]?key|client[ _\-]?secret)"
    r"(?:\s+(?:for|of|on|to)(?:\s+[\w.@\-]+){1,3}?)?\s+(?:is|was)\s+(?:now\s+|still\s+)?)"
    r"[\"'“‘`]?(?P<secret>[^\s\"'”’`]+)"
)


def _k(noun: str, article: str, pattern: str, hints: tuple[str, ...],
       check: Callable[[re.Match[str]], bool] | None = None) -> Kind:
    return Kind(noun, article, re.compile(pattern), check, hints)


KINDS: tuple[Kind, ...] = (
    _k("Google service-account key", "a",
       r"\"private_key\"\s*:\s*\"(?P<secret>-----BEGIN[^\"]{20,})|\"private_key_id\"\s*:\s*\"(?P<id>[0-9a-f]{40})\"",
       ("private_key",)),
    _k("private key", "a", r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY[A-Z ]*-----", ("private key",)),
    _k("AWS access key", "an", r"\b(?:AKIA|ASIA|ABIA|ACCA)[0-9A-Z]{16}\b", ("akia", "asia", "abia", "acca")),
    # A bare AWS secret is 40 random base64 characters: only with a context word before it (one
    # line break allowed) or after it, which keeps other 40-character values out.
    _k("AWS secret access key", "an", _AWS_CONTEXT + r"[^\n]{0,60}?\n?[^\n]{0,20}?" + _ALONE_40, _AWS_WORDS,
       _aws_secret),
    _k("AWS secret access key", "an", _ALONE_40 + r"(?=[^\n]{0,60}?" + _AWS_CONTEXT + ")", _AWS_WORDS, _aws_secret),
    _k("GitHub token", "a", r"\b(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{30,})",
       ("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_")),
    _k("GitLab token", "a", r"\bgl(?:pat|dt|rt|ptt|soat|cbt|ft|imt)-[A-Za-z0-9_\-]{20,}",
       ("glpat-", "gldt-", "glrt-", "glptt-", "glsoat-", "glcbt-", "glft-", "glimt-"), _random_looking),
    _k("Slack token", "a",
       r"\bxox[abprse]-[A-Za-z0-9-]{10,}|https://hooks\.slack\.com/services/T[A-Z0-9]+/B[A-Z0-9]+/[A-Za-z0-9]{16,}",
       ("xox", "hooks.slack.com")),
    _k("Google API key", "a", r"\bAIza[0-9A-Za-z_\-]{35}", ("aiza",)),
    _k("Stripe key", "a", r"\b(?:[rs]k_(?:live|test)_[A-Za-z0-9]{16,}|whsec_[A-Za-z0-9]{24,})",
       ("k_live_", "k_test_", "whsec_")),
    _k("npm token", "an", r"\bnpm_[A-Za-z0-9]{36}\b", ("npm_",), _random_looking),
    _k("Hugging Face token", "a", r"\bhf_[A-Za-z0-9]{30,}\b", ("hf_",), _random_looking),
    _k("SendGrid key", "a", r"\bSG\.[A-Za-z0-9_\-]{16,32}\.[A-Za-z0-9_\-]{30,50}", ("sg.",)),
    _k("Azure storage or Service Bus key", "an",
       r"(?i:AccountKey|SharedAccessKey)\s*=\s*(?P<secret>" + _B64 + r"{20,}={0,2})"
       r"|[?&]sig=(?P<sig>[A-Za-z0-9%+/]{20,}(?:%3D|=){0,2})", ("accountkey", "sharedaccesskey", "sig=")),
    _k("Twilio key", "a", r"\b(?:SK|AC)[0-9a-f]{32}\b", ()),
    _k("Mailgun key", "a", r"\bkey-[0-9a-zA-Z]{32}\b", ("key-",), _random_looking),
    _k("DigitalOcean token", "a", r"\bdo[opr]_v1_[a-f0-9]{64}\b", ("_v1_",)),
    _k("Shopify token", "a", r"\bshp(?:at|ca|pa|ss)_[a-fA-F0-9]{32}\b", ("shpat_", "shpca_", "shppa_", "shpss_")),
    _k("PyPI token", "a", r"\bpypi-AgEI[A-Za-z0-9_\-]{50,}", ("pypi-",)),
    _k("Databricks token", "a", r"\bdapi[a-f0-9]{32}(?:-\d+)?\b", ("dapi",)),
    _k("Telegram bot token", "a", r"\b\d{8,10}:AA[A-Za-z0-9_\-]{33}\b", (":aa",)),
    _k("API key", "an", r"\bsk-(?:ant-(?:api\d\d-)?|proj-|live-|test-|svcacct-|admin-)?[A-Za-z0-9_\-]{20,}",
       ("sk-",), _random_looking),
    _k("Echo Memory token", "an", r"\bem_[a-z0-9-]+_[A-Za-z0-9_\-]{30,}", ("em_",)),
    _k("JSON web token", "a", r"\beyJ[A-Za-z0-9_\-]{8,}\.eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}", ("eyj",)),
    _k("bearer token", "a", r"(?i:bearer)\s+(?![<$%{])(?P<secret>[A-Za-z0-9._~+/\-]{20,}=*)", ("bearer",),
       _random_looking),
    _k("basic-auth credential", "a", r"(?i:authorization:?\s*basic)\s+(?P<secret>" + _B64 + r"{12,}={0,2})",
       ("basic",)),
    _k("password in a connection string", "a",
       r"\b[a-z][a-z0-9+.\-]*://[^/\s:@]+:(?![<$%{*])(?P<secret>[^/\s@]{3,})@", ("://",)),
    # A UUID is a secret only where its name says so (Heroku's API keys are UUIDs).
    _k("Heroku API key", "a",
       r"(?i:heroku[A-Za-z_\- ]{0,20}?(?:key|token|secret|password|api)\b[\s:=\"']{0,5}(?:(?:is|was)\s+)?)"
       r"(?P<secret>" + _UUID + r")", ("heroku",)),
    _k("password in prose", "a", _PASSWORD_SAID, ("pass", "pwd", "pw"), _prose_password),
    _k("API key or token in prose", "an", _TOKEN_SAID, ("key", "secret", "token"), _prose_token),
    _k("password in a connection string", "a",
       r"(?<![\w.\-])[A-Za-z0-9_.\-]+:(?P<secret>[!-.0-9;-?A-~]{6,})@[A-Za-z0-9\-]+(?:\.[A-Za-z0-9\-]+)+", ("@",),
       _prose_password),
    _k("password on a command line", "a", r"\bmysql(?:dump|admin)?\b[^\n]*?\s-p(?P<secret>[^\s\-]\S{5,})",
       ("mysql",), _prose_password),
)
