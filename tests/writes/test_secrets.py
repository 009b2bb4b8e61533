"""The secret detector: every kind it names, and prose about secrets that must pass."""

from __future__ import annotations

import pytest

from echo_memory.libs.core.secrets import find_secret, redact_secrets

# Built from parts so this file never holds a literal that a scanner would flag.
AWS = "AKIA" + "Q3ZK7T2M" + "WX4HB6PN"
GITHUB = "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"
SLACK = "xoxb-" + "123456789012-abcdefGHIJ"
GOOGLE = "AIza" + "SyA1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q"
STRIPE = "sk_live_" + "4eC39HqLyjWDarjtT1zdp7dc"
OPENAI = "sk-proj-" + "abcdefghijklmnopqrstuvwx12345"
ECHO = "em_local_" + "Zx9" * 12
JWT = "eyJhbGciOiJIUzI1NiJ9" + "." + "eyJzdWIiOiIxMjM0NTY3ODkwIn0" + "." + "dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U"
AWS_SECRET = "wJalrXUtnFEMI/K7MDENG/" + "bPxRfiCYq7ZkT3vBNw"
NPM = "npm_" + "aB3dE5fG7hJ9kL1mN3pQ5rS7tU9vW1xY3zA5"
HF = "hf_" + "aB3dE5fG7hJ9kL1mN3pQ5rS7tU9vW1xY3z"
SENDGRID = "SG." + "aB3dE5fG7hJ9kL1mN3pQ5r" + "." + "sT7uV9wX1yZ3aB5cD7eF9gH1iJ3kL5mN7oP9qR1sT3u"
PEM = "-----BEGIN " + "RSA PRIVATE KEY-----\nMIIEow...\n-----END RSA PRIVATE KEY-----"
OPENSSH = "-----BEGIN " + "OPENSSH PRIVATE KEY-----"


@pytest.mark.parametrize(
    "text, kind",
    [
        (f"the deploy key is {PEM}", "a private key"),
        (f"use {OPENSSH} for the bastion", "a private key"),
        (f"CI uses {AWS} to push images", "an AWS access key"),
        (f"the bot token {GITHUB} has repo scope", "a GitHub token"),
        (f"slack alerts go through {SLACK}", "a Slack token"),
        (f"maps use {GOOGLE}", "a Google API key"),
        (f"billing calls Stripe with {STRIPE}", "a Stripe key"),
        (f"the model key is {OPENAI}", "an API key"),
        (f"my echo token is {ECHO}", "an Echo Memory token"),
        (f"the session cookie holds {JWT}", "a JSON web token"),
        ("send Authorization: Bearer abcdefghijklmnopqrstuvwxyz0123", "a bearer token"),
        ("the db is postgres://app:hunter22@db.internal:5432/app", "a password in a connection string"),
        ("set DB_PASSWORD=hunter22 in the env file", "a password or secret in an assignment"),
        ('config has "api_key": "abcd1234efgh"', "a password or secret in an assignment"),
        ("aws_secret_access_key = wJalrXUtnFEMIK7MDENGbPxRfiCY", "a password or secret in an assignment"),
        ("password: Tr0ub4dor&3", "a password or secret in an assignment"),
        ("client_secret: 9f8e7d6c5b4a", "a password or secret in an assignment"),
        ("AUTH_TOKEN := s3cr3t-value", "a password or secret in an assignment"),
        ("the admin password is 'password = correcthorse'", "a password or secret in an assignment"),
    ],
)
def test_each_kind_of_secret_is_named(text: str, kind: str) -> None:
    assert find_secret(text) == kind


@pytest.mark.parametrize(
    "text",
    [
        "the password policy requires 12 characters",
        "Password: at least twelve characters, one digit",
        "rotate the API key every 90 days",
        "store the secret in Vault, never in the repo",
        "Secret: keep it in the team vault",
        "set max_tokens=4000 for summaries",
        "token: 1200 per request is the budget",
        "the bearer tokens expire after one hour",
        "api_key = os.environ['OPENAI_API_KEY']",
        "DB_PASSWORD=${DB_PASSWORD} comes from the secret manager",
        "password=<your password here>",
        "PASSWORD_MIN_LENGTH=12",
        "password_hash = bcrypt(raw_password)",
        "the token field is required",
        "connect with postgres://app@db.internal/app (no password, IAM auth)",
        "https://example.com:8080/path is the health endpoint",
        "scikit-learn is imported as sk-learn in old notebooks",
        "SSH keys live in ~/.ssh and are never committed",
        "api_key: none for the local dev server",
        "use the passwd file to list users",
    ],
)
def test_prose_about_secrets_is_not_a_secret(text: str) -> None:
    assert find_secret(text) is None


@pytest.mark.parametrize(
    "text, kind",
    [
        (f"the prod box uses {AWS_SECRET} for uploads to the aws bucket", "an AWS secret access key"),
        ("the root password is Hunter2-Quokka!", "a password in prose"),
        (f"publish with {NPM}", "an npm token"),
        (f"download weights with {HF}", "a Hugging Face token"),
        (f"receipts go out through {SENDGRID}", "a SendGrid key"),
        ("DefaultEndpointsProtocol=https;AccountName=acme;AccountKey=" + "Zm9vYmFy" * 11 + "==;",
         "an Azure storage or Service Bus key"),
        ("CI uses " + "\u200b".join(AWS) + " to push", "an AWS access key"),
        ("CI uses " + "".join(chr(ord(c) + 0xFEE0) for c in AWS) + " to push", "an AWS access key"),
        ("CI uses " + " ".join(AWS) + " to push", "an AWS access key"),
        ("tls.key: " + "LS0tLS1CRUdJTi" + "BSU0EgUFJJVkFURSBLRVktLS0tLQo=", "a private key"),
    ],
)
def test_disguised_and_newer_kinds_are_found(text: str, kind: str) -> None:
    assert find_secret(text) == kind


def test_redaction_replaces_each_secret_with_its_kind_and_keeps_the_rest() -> None:
    text = f"why does {GITHUB} fail and DB_PASSWORD=hunter22 work?"
    assert redact_secrets(text) == (
        "why does [redacted GitHub token] fail and DB_PASSWORD=[redacted password or secret in an assignment] work?"
    )
    assert redact_secrets("which vendor charges cards?") == "which vendor charges cards?"


def test_redaction_covers_disguised_secrets_in_the_original_text() -> None:
    hidden = "\u200b".join(AWS)
    assert redact_secrets(f"key {hidden} leaked") == "key [redacted AWS access key] leaked"
    assert redact_secrets(f"key {' '.join(AWS)} leaked") == "key [redacted AWS access key] leaked"
    encoded = "LS0tLS1CRUdJTi" + "BSU0EgUFJJVkFURSBLRVktLS0tLQo="
    assert redact_secrets(f"blob {encoded} end") == "blob [redacted private key] end"


def test_the_refusal_names_the_kind_never_the_value() -> None:
    from echo_memory.libs.core.contracts.errors import InvalidArgument
    from echo_memory.libs.core.contracts.write import WriteEpisodeInput
    from echo_memory.services.writes.episode import check_shape

    args = WriteEpisodeInput(
        session_id="s",
        entities=[{"name": "CI", "type": "system"}, {"name": "AWS", "type": "vendor"}],
        facts=[{"source": "CI", "target": "AWS", "relation": "pushes with", "fact": f"CI pushes with {AWS}",
                "confidence": "extracted"}],
    )
    with pytest.raises(InvalidArgument) as caught:
        check_shape(args)
    assert "an AWS access key" in caught.value.message
    assert "fact 1" in caught.value.message
    assert AWS not in caught.value.message
