"""The maintained rule set behind the normalisation layer: detect-secrets' regex plugins (pinned).

Each plugin's patterns become kinds like ours (kinds.py), matched over every variant of the text.
Left out: the public-IP plugin (an address is not a credential), and the keyword and high-entropy
plugins, which are tuned for source files and flag every git SHA and content hash; prose.py holds
our keyword-and-entropy rules instead.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from detect_secrets.plugins.artifactory import ArtifactoryDetector
from detect_secrets.plugins.aws import AWSKeyDetector
from detect_secrets.plugins.azure_storage_key import AzureStorageKeyDetector
from detect_secrets.plugins.base import RegexBasedDetector
from detect_secrets.plugins.basic_auth import BasicAuthDetector
from detect_secrets.plugins.cloudant import CloudantDetector
from detect_secrets.plugins.discord import DiscordBotTokenDetector
from detect_secrets.plugins.github_token import GitHubTokenDetector
from detect_secrets.plugins.gitlab_token import GitLabTokenDetector
from detect_secrets.plugins.ibm_cloud_iam import IbmCloudIamDetector
from detect_secrets.plugins.ibm_cos_hmac import IbmCosHmacDetector
from detect_secrets.plugins.jwt import JwtTokenDetector
from detect_secrets.plugins.mailchimp import MailchimpDetector
from detect_secrets.plugins.npm import NpmDetector
from detect_secrets.plugins.openai import OpenAIDetector
from detect_secrets.plugins.private_key import PrivateKeyDetector
from detect_secrets.plugins.pypi_token import PypiTokenDetector
from detect_secrets.plugins.sendgrid import SendGridDetector
from detect_secrets.plugins.slack import SlackDetector
from detect_secrets.plugins.softlayer import SoftlayerDetector
from detect_secrets.plugins.square_oauth import SquareOAuthDetector
from detect_secrets.plugins.stripe import StripeDetector
from detect_secrets.plugins.telegram_token import TelegramBotTokenDetector
from detect_secrets.plugins.twilio import TwilioKeyDetector

from echo_memory.libs.core.secrets.kinds import Kind

PLUGINS: tuple[type[RegexBasedDetector], ...] = (
    PrivateKeyDetector, AWSKeyDetector, AzureStorageKeyDetector, GitHubTokenDetector, GitLabTokenDetector,
    SlackDetector, StripeDetector, OpenAIDetector, SendGridDetector, NpmDetector, PypiTokenDetector,
    TwilioKeyDetector, TelegramBotTokenDetector, DiscordBotTokenDetector, JwtTokenDetector, MailchimpDetector,
    SquareOAuthDetector, ArtifactoryDetector, CloudantDetector, IbmCloudIamDetector, IbmCosHmacDetector,
    SoftlayerDetector, BasicAuthDetector,
)

# Values the providers' own documentation publishes as examples (AKIAIOSFODNN7EXAMPLE) and the
# usual placeholders: quoting one is not a leak.
_EXAMPLE = re.compile(
    r"example|sample|dummy|placeholder|x{6,}|(?:0123456789|abcdef){2}|your[_\-]|[_\-]here$|changeme|replace[_\-]?me"
    r"|^(?:password|secret|pass|pwd|mypassword|token)$",
    re.I,
)


def is_example(value: str) -> bool:
    """True when `value` is a documented example or placeholder, not an issued credential."""
    return _EXAMPLE.search(value) is not None


def _value(match: re.Match[str]) -> str:
    groups = [g for g in match.groups() if g]
    return max(groups, key=len) if groups else match.group()


def _issued(match: re.Match[str]) -> bool:
    """Issued credentials mix letters and digits; all-capital words (APACHEKAFKA) and examples do not."""
    value = _value(match).strip(" \t\"'=:")
    return (any(c.isdigit() for c in value) and any(c.isalpha() for c in value)) and not is_example(value)


def _not_example(match: re.Match[str]) -> bool:
    return not is_example(_value(match))


# Plugins whose patterns alone catch ordinary capitalised words or hex digests: require a value
# that mixes letters and digits. Key headers (private keys) carry no value to check.
_CHECKS: dict[type[RegexBasedDetector], Callable[[re.Match[str]], bool] | None] = {
    PrivateKeyDetector: None,
    ArtifactoryDetector: _issued, TwilioKeyDetector: _issued, MailchimpDetector: _issued,
    DiscordBotTokenDetector: _issued, TelegramBotTokenDetector: _issued,
}


# Lower-case fragments one of which every match of the plugin's patterns contains, so a text without
# any skips them (the keyword patterns need key/pw/pass/token whatever their optional prefix).
_ASSIGNED = ("key", "pw", "pass", "token")
_HINTS: dict[type[RegexBasedDetector], tuple[str, ...]] = {
    PrivateKeyDetector: ("private key", "putty"),
    AWSKeyDetector: ("akia", "asia", "abia", "acca", "a3t", "aws"),
    AzureStorageKeyDetector: ("accountkey",),
    GitHubTokenDetector: ("ghp_", "gho_", "ghu_", "ghs_", "ghr_"),
    GitLabTokenDetector: ("glpat-", "gldt-", "glft-", "glsoat-", "glrt-", "gr1348941", "glcbt-", "glimt-", "glptt-",
                          "glagent-", "gloas-"),
    SlackDetector: ("xox", "hooks.slack.com"),
    StripeDetector: ("k_live_",),
    OpenAIDetector: ("t3blbkfj",),
    SendGridDetector: ("sg.",),
    NpmDetector: ("_authtoken",),
    PypiTokenDetector: ("pypi-",),
    TwilioKeyDetector: ("ac", "sk"),
    TelegramBotTokenDetector: (":",),
    DiscordBotTokenDetector: (".",),
    JwtTokenDetector: ("eyj",),
    MailchimpDetector: ("-us",),
    SquareOAuthDetector: ("sq0csp-",),
    ArtifactoryDetector: ("akc", "ap"),
    CloudantDetector: (*_ASSIGNED, "cloudant"),
    IbmCloudIamDetector: _ASSIGNED,
    IbmCosHmacDetector: ("secret",),
    SoftlayerDetector: (*_ASSIGNED, "softlayer"),
    BasicAuthDetector: ("://",),
}


def _article(noun: str) -> str:
    return "an" if noun[:1].lower() in "aeiou" else "a"


def _kinds() -> tuple[Kind, ...]:
    kinds: list[Kind] = []
    for plugin in PLUGINS:
        noun = str(plugin.secret_type)
        check = _CHECKS.get(plugin, _not_example)
        patterns: list[re.Pattern[str]] = list(plugin.denylist)  # type: ignore[call-overload]
        for pattern in patterns:
            kinds.append(Kind(noun, _article(noun), pattern, check, _HINTS[plugin]))
    return tuple(kinds)


MAINTAINED: tuple[Kind, ...] = _kinds()
