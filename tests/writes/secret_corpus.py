"""A labelled corpus for the secret detector: FAKE secrets in each provider's format and look-alikes
that are not secrets.

Every random-looking part comes from a seeded RNG at import time, so the corpus is the same on every
run and no key is written in this file; provider prefixes are split so the file holds no literal a
scanner would flag. The values only follow the providers' formats (no checksums), so no provider
would accept one.
"""

from __future__ import annotations

import base64
import random
import string
import uuid

_rng = random.Random(20261201)
ALNUM = string.ascii_letters + string.digits
UPPER_DIGITS = string.ascii_uppercase + string.digits
HEX = "0123456789abcdef"
B64 = ALNUM + "+/"
B64URL = ALNUM + "-_"


def _r(alphabet: str, n: int) -> str:
    """n characters from `alphabet`, always mixing letters and digits (as issued tokens do)."""
    letters, digits = any(c.isalpha() for c in alphabet), any(c.isdigit() for c in alphabet)
    while True:
        value = "".join(_rng.choice(alphabet) for _ in range(n))
        if n < 4 or ((not letters or any(c.isalpha() for c in value)) and (not digits or any(c.isdigit() for c in value))):
            return value


def _b64_secret(n: int) -> str:
    """A 40-character-style random base64 value mixing upper, lower and digits."""
    while True:
        value = _r(B64, n)
        if any(c.isupper() for c in value) and any(c.islower() for c in value) and any(c.isdigit() for c in value):
            return value


def _uuid() -> str:
    return str(uuid.UUID(int=_rng.getrandbits(128), version=4))


def _zero_width(value: str) -> str:
    """A zero-width space (or joiner, soft hyphen) after every few characters."""
    marks = ["\u200b", "\u200c", "\u200d", "\u00ad", "\u2060", "\ufeff"]
    return "".join(c + (_rng.choice(marks) if i % 3 == 2 else "") for i, c in enumerate(value))


def _fullwidth(value: str) -> str:
    return "".join(chr(ord(c) + 0xFEE0) if "!" <= c <= "~" else c for c in value)


def _spaced(value: str) -> str:
    return " ".join(value)


def _bidi(value: str) -> str:
    half = len(value) // 2
    return "\u202a" + value[:half] + "\u202c\u2066" + value[half:] + "\u2069"


PEM_HEADER = "-----BEGIN " + "RSA PRIVATE KEY-----"
PEM_BODY = "\n".join(_r(B64, 64) for _ in range(3))


def _token(kind: str) -> str:
    """A fresh fake token of `kind` in the provider's format."""
    if kind == "aws":
        return "AK" + "IA" + _r(UPPER_DIGITS, 16)
    if kind == "github":
        return _rng.choice(["gh" + "p_", "gh" + "o_", "gh" + "s_"]) + _r(ALNUM, 36)
    if kind == "github_pat":
        return "github" + "_pat_" + _r(ALNUM, 22) + "_" + _r(ALNUM, 59)
    if kind == "gitlab":
        return "gl" + "pat-" + _r(B64URL, 20)
    if kind == "slack":
        return "xo" + "xb-" + _r(string.digits, 12) + "-" + _r(string.digits, 13) + "-" + _r(ALNUM, 24)
    if kind == "google":
        return "AI" + "za" + _r(ALNUM + "-_", 35)
    if kind == "stripe":
        return _rng.choice(["sk", "rk"]) + "_" + _rng.choice(["live", "test"]) + "_" + _r(ALNUM, 24)
    if kind == "openai":
        return "sk-" + "proj-" + _r(B64URL, 48)
    if kind == "anthropic":
        return "sk-" + "ant-api03-" + _r(B64URL, 93) + "AA"
    if kind == "npm":
        return "np" + "m_" + _r(ALNUM, 36)
    if kind == "hf":
        return "h" + "f_" + _r(ALNUM, 34)
    if kind == "sendgrid":
        return "S" + "G." + _r(B64URL, 22) + "." + _r(B64URL, 43)
    if kind == "twilio":
        return _rng.choice(["S" + "K", "A" + "C"]) + _r(HEX, 32)
    if kind == "mailgun":
        return "ke" + "y-" + _r(HEX, 32)
    if kind == "digitalocean":
        return "do" + "p_v1_" + _r(HEX, 64)
    if kind == "shopify":
        return _rng.choice(["shp" + "at_", "shp" + "ss_"]) + _r(HEX, 32)
    if kind == "pypi":
        return "py" + "pi-" + "AgEI" + "cHlwaS5vcmc" + _r(B64URL, 70)
    if kind == "databricks":
        return "da" + "pi" + _r(HEX, 32)
    if kind == "echo":
        return "em_" + "team_" + _r(B64URL, 43)
    if kind == "jwt":
        header = base64.urlsafe_b64encode(b'{"alg":"HS256","typ":"JWT"}').decode().rstrip("=")
        body = base64.urlsafe_b64encode(('{"sub":"' + _r(string.digits, 10) + '"}').encode()).decode().rstrip("=")
        return header + "." + body + "." + _r(B64URL, 43)
    raise AssertionError(kind)


_PLAIN = {
    "aws": ["CI pushes images with {t}", "export AWS_ACCESS_KEY_ID={t}", "the old key {t} was leaked"],
    "github": ["the bot token {t} has repo scope", "git clone https://x:{t}@github.com/o/r", "GH_TOKEN {t}"],
    "github_pat": ["use {t} for the release job", "fine-grained token: {t}"],
    "gitlab": ["the runner uses {t}", "GITLAB_TOKEN {t} for the mirror"],
    "slack": ["slack alerts go through {t}", "the bot posts with {t}"],
    "google": ["maps use {t}", "the geocoder key {t}"],
    "stripe": ["billing calls Stripe with {t}", "stripe key {t} in staging"],
    "openai": ["the model key is {t}", "OPENAI key {t} for the summariser"],
    "anthropic": ["claude calls use {t}", "the anthropic key {t}"],
    "npm": ["publish with {t}", "the registry token is {t}", "//registry.npmjs.org/:_authToken {t}"],
    "hf": ["download weights with {t}", "the hub token {t} has write access"],
    "sendgrid": ["mail goes out through {t}", "sendgrid {t} for receipts"],
    "twilio": ["sms uses {t}", "twilio credentials start with {t}"],
    "mailgun": ["mailgun api {t}", "the mail relay authenticates with {t}"],
    "digitalocean": ["terraform uses {t}", "the droplet API token {t}"],
    "shopify": ["the store admin token {t}", "shopify app uses {t}"],
    "pypi": ["twine uploads with {t}", "the release token {t}"],
    "databricks": ["notebooks call the API with {t}", "DATABRICKS_TOKEN {t}"],
    "echo": ["my echo token is {t}", "the agent connects with {t}"],
    "jwt": ["the session cookie holds {t}", "sample id_token {t}"],
}

NOUN = {
    "aws": "AWS access key", "github": "GitHub token", "github_pat": "GitHub token", "gitlab": "GitLab token",
    "slack": "Slack token", "google": "Google API key", "stripe": "Stripe key", "openai": "API key",
    "anthropic": "API key", "npm": "npm token", "hf": "Hugging Face token", "sendgrid": "SendGrid key",
    "twilio": "Twilio key", "mailgun": "Mailgun key", "digitalocean": "DigitalOcean token",
    "shopify": "Shopify token", "pypi": "PyPI token", "databricks": "Databricks token",
    "echo": "Echo Memory token", "jwt": "JSON web token",
}


def _secrets() -> list[tuple[str, str]]:
    """(text, kind noun) pairs: each provider in plain sentences, then disguised."""
    out: list[tuple[str, str]] = []
    for kind, templates in _PLAIN.items():
        for template in templates:
            out.append((template.format(t=_token(kind)), NOUN[kind]))
    # Disguised: zero-width characters, fullwidth letters, bidi controls, letter-by-letter spacing.
    for disguise in (_zero_width, _fullwidth, _bidi, _spaced):
        for kind in ("aws", "github", "npm", "hf", "stripe", "slack", "sendgrid", "openai", "gitlab", "databricks"):
            out.append((f"the key is {disguise(_token(kind))}", NOUN[kind]))
    aws_secret = "AWS secret access key"
    for template in ("the aws secret is {s}", "AWS_SECRET_ACCESS_KEY {s}", "aws_secret_access_key = {s}",
                     "secret key for the s3 bucket: {s}", "iam user deploy, secret {s}",
                     "[default]\nregion = eu-west-1\naws_secret_access_key = {s}",
                     "the AWS credentials: {s}", "Secret access key\n{s}"):
        out.append((template.format(s=_b64_secret(40), i=_r(UPPER_DIGITS, 16)), aws_secret))
    prose = "password in prose"
    for value in ("Hunter2-Quokka!", "Tr0ub4dor&3xx", "Winter2026!", "correct-Horse-7", "P@ssw0rd99",
                  "zX9!kLm2qR", "Summer#2025", "Gr33n-Apple-Sky", "hunter2hunter2", "Quokka_77_Blue",
                  "Spring2026$", "b4ckup-Pl3ase", "Kx8#mQ2v", "Marmot!Delta9", "pa55-W0RD-x"):
        out.append((_rng.choice(["the root password is {v}", "Her VPN password was {v} until May",
                                 "password for the NAS is {v}", "the wifi password is now {v}",
                                 "My password is '{v}'."]).format(v=value), prose))
    azure = "Azure storage or Service Bus key"
    for _ in range(4):
        out.append(("DefaultEndpointsProtocol=https;AccountName=acme;AccountKey=" + _r(B64, 86) + "==;"
                    "EndpointSuffix=core.windows.net", azure))
        out.append(("Endpoint=sb://acme.servicebus.windows.net/;SharedAccessKeyName=Root;SharedAccessKey="
                    + _r(B64, 43) + "=", azure))
    gcp = "Google service-account key"
    for _ in range(3):
        out.append(('{"type": "service_account", "project_id": "acme", "private_key_id": "' + _r(HEX, 40)
                    + '", "private_key": "' + PEM_HEADER.replace("RSA ", "") + "\\n" + _r(B64, 64) + '\\n"}', gcp))
    for _ in range(4):
        out.append(("HEROKU_API_KEY " + _uuid(), "Heroku API key"))
        out.append(("the heroku api key is " + _uuid(), "Heroku API key"))
    pem = "private key"
    out.append((f"the deploy key is {PEM_HEADER}\n{PEM_BODY}\n-----END RSA PRIVATE KEY-----", pem))
    out.append(("use -----BEGIN " + "OPENSSH PRIVATE KEY----- for the bastion", pem))
    out.append(("-----BEGIN " + "EC PRIVATE KEY-----\n" + _r(B64, 64), pem))
    for header in (PEM_HEADER, "-----BEGIN " + "PRIVATE KEY-----", "-----BEGIN " + "OPENSSH PRIVATE KEY-----"):
        blob = base64.b64encode(f"{header}\n{PEM_BODY}\n".encode()).decode()
        out.append((f"tls.key: {blob}", pem))
        out.append((f"the secret data is {blob[:60]}", pem))
    conn = "password in a connection string"
    for scheme in ("postgres", "mysql", "redis", "amqp", "mongodb+srv", "postgresql", "rediss", "ftp"):
        out.append((f"the db is {scheme}://app:{_r(ALNUM, 14)}@db.internal:5432/app", conn))
    assignment = "password or secret in an assignment"
    for template in ("set DB_PASSWORD={v} in the env file", '"api_key": "{v}"', "client_secret: {v}",
                     "SESSION_SECRET = '{v}'", "AUTH_TOKEN := {v}", "export REDIS_PASSWORD={v}",
                     "spring.datasource.password={v}", "  secret_key: \"{v}\""):
        out.append((template.format(v=_r(ALNUM, 18)), assignment))
    for template in ("Authorization: Bearer {v}", "curl -H 'authorization: bearer {v}'"):
        out.append((template.format(v=_r(B64URL, 32)), "bearer token"))
    for _ in range(2):
        out.append(("Authorization: Basic " + base64.b64encode(f"deploy:{_r(ALNUM, 12)}".encode()).decode(),
                    "basic-auth credential"))
    out.append(("alerts post to https://hooks.slack.com/services/T" + _r(UPPER_DIGITS, 8) + "/B"
                + _r(UPPER_DIGITS, 10) + "/" + _r(ALNUM, 24), "Slack token"))
    out.append(("https://acme.blob.core.windows.net/c/f.txt?sv=2022-11-02&se=2026-01-01&sig=" + _r(ALNUM, 43)
                + "%3D", azure))
    out.append(("the bot is " + _r(string.digits, 10) + ":AA" + _r(B64URL, 33), "Telegram bot token"))
    out += [
        ("the password to the router is Ch@ngeMe2024", prose), ("pw is Xk2!mmQ9z", prose),
        ("my pass is Gx7#pLq2r", prose), ("passphrase was 'Tiger-Lily-42'", prose),
        ("ssh root:Zx81!qqW@10.0.0.5", conn), ("backup user bk:Rt5%uuIo@nas.local nightly", conn),
        ("mysql -u root -pS3cr3tPass! payments", "password on a command line"),
        ("the api key is " + _r(HEX, 32), "API key or token in prose"),
        ("the token for the staging cluster is " + _r(ALNUM, 28), "API key or token in prose"),
        ("dbpassword=" + _r(ALNUM, 10), assignment), ('{"password": "' + _r(ALNUM, 12) + '"}', assignment),
        ("--password=" + _r(ALNUM, 14), assignment), ("apiKey: '" + _r(ALNUM, 24) + "'", assignment),
        (base64.b64encode(f"password={_r(ALNUM, 12)} for the db".encode()).decode(), assignment),
        ("-----BEGIN " + "PGP PRIVATE KEY BLOCK-----", pem),
    ]
    return out


_WORDS = (
    "deploy", "service", "payments", "stripe", "vault", "kubernetes", "billing", "cluster", "release",
    "staging", "rotate", "policy", "team", "review", "memory", "agent", "scope", "fact", "episode", "index",
    "query", "token", "budget", "limit", "password", "reset", "secret", "manager", "config", "file", "path",
    "version", "build", "image", "registry", "cache", "model", "weights",
)


def _sentence(n: int) -> str:
    return " ".join(_rng.choice(_WORDS) for _ in range(n)).capitalize() + "."


def _non_secrets() -> list[str]:
    out: list[str] = []
    for _ in range(12):
        out.append(f"commit {_r(HEX, 40)} fixed the flaky test")
        out.append(f"sha256: {_r(HEX, 64)}")
        out.append(f"md5sum of the archive is {_r(HEX, 32)}")
    for _ in range(4):
        out.append(f"the aws secret rotation job ran, its sha1 is {_r(HEX, 40)}")
        out.append(f"secret manager version {_r(HEX, 32)}")
        out.append(f"AWS request id {_uuid()}")
        out.append(f"ETag for the s3 object: \"{_r(HEX, 32)}\"")
    for _ in range(12):
        out.append(f"request id {_uuid()}")
        out.append(f"trace_id={_uuid()} in the log")
    for _ in range(4):
        out.append(f"token_id: {_uuid()}")
        out.append(f"session_token_count: {_rng.randint(1, 9000)}")
    for _ in range(12):
        out.append("the payload is " + base64.b64encode(_sentence(_rng.randint(5, 12)).encode()).decode())
    for _ in range(4):
        out.append("aws secret note: " + base64.b64encode(_sentence(5).encode()).decode())
    for _ in range(6):
        out.append(f"merged {_r(HEX, 7)} and {_r(HEX, 12)} into main")
    out += [
        "the password policy requires 12 characters", "Password: at least twelve characters, one digit",
        "rotate the API key every 90 days", "store the secret in Vault, never in the repo",
        "Secret: keep it in the team vault", "set max_tokens=4000 for summaries", "token: 1200 per request is the budget",
        "the bearer tokens expire after one hour", "api_key = os.environ['OPENAI_API_KEY']",
        "DB_PASSWORD=${DB_PASSWORD} comes from the secret manager", "password=<your password here>",
        "PASSWORD_MIN_LENGTH=12", "password_hash = bcrypt(raw_password)", "the token field is required",
        "connect with postgres://app@db.internal/app (no password, IAM auth)",
        "https://example.com:8080/path is the health endpoint", "scikit-learn is imported as sk-learn in old notebooks",
        "SSH keys live in ~/.ssh and are never committed", "api_key: none for the local dev server",
        "use the passwd file to list users", "the password is stored in 1Password", "the password was reset on Monday",
        "the password is 8-16 characters long", "the password was rotated on 2026-05-01",
        "my password is not something I share", "the password is bcrypt-hashed before storage",
        "the password is SHA-256 hashed", "the root password is in the vault under ops/root",
        "the password for staging is the same as prod's, ask Dana", "password is required for sudo",
        "the password was changed by the on-call engineer", "the password is 12-characters minimum",
        "the passphrase is at least five words", "the AWS secret is in Secrets Manager under prod/api",
        "aws_secret_access_key comes from the instance profile", "AWS_SECRET_ACCESS_KEY=${AWS_SECRET_ACCESS_KEY}",
        "the secret key rotation happens quarterly", "hf_hub_download fetches the model files",
        "npm_config_cache points at /tmp/npm", "we use a key-value store for sessions",
        "SG.example.com is the Singapore endpoint", "the Heroku app id is " + _uuid(),
        "heroku dyno " + _uuid() + " restarted", "dapi is the Databricks API prefix, never paste one",
        "glpat- tokens expire after a year", "AccountKey is in the portal, copy it to the vault",
        "the SharedAccessKey must never be committed", "sk_live_ keys are for production only",
        "ghp_ tokens are classic personal access tokens", "pypi- tokens are scoped per project",
        "AKIA keys are long-term credentials; prefer roles", "-----BEGIN CERTIFICATE----- is a public certificate",
        "ssh-rsa AAAAB3NzaC1yc2EAAAADAQABAAABAQ is a public key prefix", "the JWT header starts with eyJ",
        "/etc/ssl/private/server.key is readable by root only", "~/.aws/credentials holds the profiles",
        "C:\\Users\\dana\\secrets\\readme.txt explains the vault", "/var/run/secrets/kubernetes.io/serviceaccount/token",
        "https://github.com/acme/payments/blob/main/docs/secrets.md", "https://user@git.example.com/repo.git",
        "s3://acme-artifacts/releases/v2.3.1/app.tar.gz", "redis://cache.internal:6379/0",
        "python 3.11.4 and numpy 2.1.0", "release v1.2.3-rc.1+build.5", "node v20.11.1 on the runners",
        "kubernetes 1.31.2-gke.1200000", "image sha256:" + _r(HEX, 64),
        "AbstractSingletonProxyFactoryBean is the Spring class", "test_the_password_reset_flow_sends_one_email",
        "PasswordResetTokenExpiredException is raised after an hour", "the_secret_of_monkey_island_special_edition",
        "use getPasswordHash(user) for comparison", "token = tokenizer.encode(text)",
        "password: required", "secret: ***", "password=xxxxxxxx", "api_key: <redacted>", "token: null",
        "the model has 1.3B parameters and a 4096-token context", "max_tokens: 8192",
        "auth_token_ttl: 3600", "refresh_token_expiry=30d", "password_min_length: 14", "secret_name: prod-db",
        "api_key_path: /etc/acme/api.key", "token_url: https://auth.example.com/oauth/token",
        "the bearer scheme is defined in RFC 6750", "Authorization: Bearer <token>",
        "Authorization: Bearer $TOKEN", "the vault path is secret/data/payments/stripe",
        "rotate AWS keys with aws iam create-access-key", "the secret sauce is caching",
        "our secret weapon is the on-call runbook", "she keeps her passwords in a password manager",
        "the password prompt times out after 30 seconds", "two-factor codes are 6 digits",
        "the PIN is four digits", "uuid v4 ids look like 123e4567-e89b-12d3-a456-426614174000",
        "base64 of 'hello world' is aGVsbG8gd29ybGQ=",
        "we renamed AWS_SECRET to AWS_SECRET_NAME", "the s3 bucket acme-logs-2026-us-east-1 holds the logs",
        "IAM role arn:aws:iam::123456789012:role/deploy", "arn:aws:secretsmanager:us-east-1:123456789012:secret:prod",
        "the commit that removed the secret was reviewed", "SECRET_KEY_BASE is generated at deploy time",
        "the token bucket refills at 10 per second", "tokens per minute: 90k", "api keys are per agent",
        "tokenizer: bert-base-uncased", "secretary: Dana-Smith2", "api_key_env=OPENAI_API_KEY",
        "the token is required for login", "the boarding pass is on my phone", "meet at 10:30@cafe.de",
        "git@github.com:acme/payments.git", "the api key is stored in Vault since 2024-01-01",
        "the token was 16 characters long", "user@example.com: Hello", "tokenizer_name=gpt2-large",
        "keyboard: us-intl", "password manager: 1Password8", "the passkey is stored on the YubiKey-5C",
        "monkey=banana-split-2", "sessionTokenCookieName=em_session", "privateKeyPath: ./certs/dev.pem",
        "password reset link expires in 24h", "the passwords table has 12k rows", "secret=false",
        "我的下属的邮箱地址是lizixuan0218@goldendragonlaw.com。输出重写后的用户消息：我的邮箱是lz0218@example.com。",
        "联系人：王伟2024@example.cn", "Note:meet-at-10am@cafe.example.com",
        "see PASSWORDS.md for the policy", "password strength meter uses zxcvbn", "Passw0rd policy doc v2",
        "the string 'sk-' prefixes OpenAI keys", "ask in #secrets-help", "secret-santa-2026 channel",
    ]
    for _ in range(4):
        out.append(f"the cache key is {_b64_secret(40)}")
        out.append("data:image/png;base64,iVBORw0KGgo" + _r(B64, 60))
        out.append(f"ipv6 2001:db8:{_r(HEX, 4)}:{_r(HEX, 4)}::{_r(HEX, 4)} answers pings")
        out.append(f"docker pull ghcr.io/acme/api@sha256:{_r(HEX, 64)}")
        out.append(f"the fixture file is tests/data/{_r(string.ascii_lowercase, 12)}_{_r(HEX, 8)}.json")
        out.append(f"the secret's fingerprint is SHA256:{_r(B64, 43)}")
    for _ in range(6):
        out.append(f"build {_r(HEX, 8)}-{_r(HEX, 4)} of service-{_rng.randint(1, 99)} passed")
        out.append(f"the identifier is {'_'.join(_rng.choice(_WORDS) for _ in range(5))}")
    return out


SECRETS: list[tuple[str, str]] = _secrets()
NON_SECRETS: list[str] = _non_secrets()
