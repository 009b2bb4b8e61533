"""A labelled corpus for the secret filter, generated at import from a seeded RNG.

`SECRETS`: synthetic credentials in each provider's format (right prefix, length, alphabet and
entropy, no checksum, so no provider would accept one) and credentials written in sentences in
English, German, French, Spanish, Chinese and Japanese. `LOOKALIKES`: text that must pass: git
SHAs, UUIDs, content hashes in logs, versions, base64 of ordinary text, the example keys providers
publish in their docs, long identifiers, URLs without credentials, and sentences that only talk about
passwords. Every value is generated here and prefixes are split, so the file holds no literal a
repository scanner would flag. The same seed gives the same corpus on every run.
"""

from __future__ import annotations

import base64
import random
import string
import uuid
from collections.abc import Callable
from dataclasses import dataclass

SEED = 20261204
# "://" kept apart from the user part, so no line of this file reads as a URL with a credential.
_AUTHORITY = ":" + "//"
_rng = random.Random(SEED)

LOWER = string.ascii_lowercase
UPPER = string.ascii_uppercase
DIGITS = string.digits
ALNUM = string.ascii_letters + DIGITS
HEX = "0123456789abcdef"
B64 = ALNUM + "+/"
B64URL = ALNUM + "-_"


@dataclass(frozen=True)
class Sample:
    """One labelled text: `kind` groups it in the report; `secret` says whether it must be caught."""

    text: str
    kind: str
    secret: bool


def _r(alphabet: str, n: int) -> str:
    """n random characters from `alphabet`, mixing letters and digits when it has both (as issued values do)."""
    letters, digits = any(c.isalpha() for c in alphabet), any(c.isdigit() for c in alphabet)
    while True:
        value = "".join(_rng.choice(alphabet) for _ in range(n))
        if (not letters or any(c.isalpha() for c in value)) and (not digits or any(c.isdigit() for c in value)):
            return value


def _mixed(alphabet: str, n: int) -> str:
    """Like _r, with upper case, lower case and digits all present."""
    while True:
        value = _r(alphabet, n)
        if any(c.isupper() for c in value) and any(c.islower() for c in value) and any(c.isdigit() for c in value):
            return value


def _uuid() -> str:
    return str(uuid.UUID(int=_rng.getrandbits(128), version=4))


_WORDS = ("quokka", "marmot", "harbor", "delta", "falcon", "cobalt", "meadow", "tiger", "lily", "orbit", "copper",
          "willow", "ember", "nimbus", "raven", "saffron", "tundra", "velvet", "zephyr", "walnut", "glacier", "pepper")
_SYMBOLS = "!#$%&*+-=?@^_~"


def password() -> str:
    """A password a person would choose: words, digits and symbols in the usual patterns."""
    w1, w2 = _rng.choice(_WORDS), _rng.choice(_WORDS)
    n = str(_rng.randint(10, 9999))
    s = _rng.choice(_SYMBOLS)
    pattern = _rng.randrange(6)
    if pattern == 0:
        return w1.capitalize() + n + s
    if pattern == 1:
        return w1.capitalize() + s + w2.capitalize() + n
    if pattern == 2:
        return _mixed(ALNUM + "!#%&*+?@", _rng.randint(10, 16))
    if pattern == 3:
        return w1.replace("a", "4").replace("e", "3").replace("o", "0").capitalize() + s + n
    if pattern == 4:
        return w1 + n + w2 + str(_rng.randint(10, 99))
    return w1 + "-" + w2.capitalize() + "-" + n


def passphrase() -> str:
    """Diceware style: four to six words joined by a hyphen."""
    return "-".join(_rng.sample(_WORDS, _rng.randint(4, 6)))


def _pem(header: str) -> str:
    body = "\n".join(_r(B64, 64) for _ in range(4))
    return f"-----BEGIN {header}-----\n{body}\n-----END {header}-----"


def _jwt() -> str:
    head = base64.urlsafe_b64encode(b'{"alg":"HS256","typ":"JWT"}').decode().rstrip("=")
    claims = '{"sub":"' + _r(DIGITS, 10) + '","exp":' + _r(DIGITS, 10) + "}"
    body = base64.urlsafe_b64encode(claims.encode()).decode().rstrip("=")
    return head + "." + body + "." + _r(B64URL, 43)


# Each format kind: how to make a value, and sentences it appears in ({v} is the value).
FORMATS: dict[str, tuple[Callable[[], str], tuple[str, ...]]] = {
    "AWS access key id": (lambda: "AK" + "IA" + _r(UPPER + DIGITS, 16), (
        "CI pushes images with {v}", "export AWS_ACCESS_KEY_ID={v}", "the old key {v} was leaked in the wiki",
        "aws configure set aws_access_key_id {v}", "IAM user deploy has key {v}", "rotate {v} before Friday")),
    "AWS secret access key": (lambda: _mixed(B64, 40), (
        "aws_secret_access_key = {v}", "the aws secret is {v}", "AWS_SECRET_ACCESS_KEY={v}",
        "secret key for the s3 bucket: {v}", "[default]\nregion = eu-west-1\naws_secret_access_key = {v}",
        "iam user deploy, secret {v}")),
    "GitHub classic token": (lambda: "gh" + "p_" + _r(ALNUM, 36), (
        "the bot token {v} has repo scope", "GH_TOKEN={v}", "git clone https" + _AUTHORITY + "x:{v}@github.com/o/r",
        "use {v} for the release job", "my github token: {v}", "gh auth login --with-token <<< {v}")),
    "GitHub app or OAuth token": (lambda: _rng.choice(["gh" + "o_", "gh" + "s_", "gh" + "u_", "gh" + "r_"]) + _r(ALNUM, 36), (
        "the app installation token is {v}", "oauth flow returned {v}", "refresh with {v}",
        "Actions leaked {v} in the log", "the integration uses {v}", "token {v} expires in an hour")),
    "GitHub fine-grained token": (lambda: "github" + "_pat_" + _r(ALNUM, 22) + "_" + _r(ALNUM, 59), (
        "fine-grained token: {v}", "the dependabot PAT is {v}", "set GITHUB_TOKEN to {v}",
        "read-only PAT {v} for the mirror", "we created {v} for the docs site")),
    "GitLab personal token": (lambda: "gl" + "pat-" + _r(B64URL, 20), (
        "the runner uses {v}", "GITLAB_TOKEN {v} for the mirror", "personal access token {v}",
        "api calls authenticate with {v}", "private-token: {v}")),
    "GitLab runner or deploy token": (lambda: _rng.choice(["gl" + "rt-", "gl" + "dt-", "gl" + "ptt-"]) + _r(B64URL, 40), (
        "register the runner with {v}", "deploy token {v} pulls images", "the pipeline trigger is {v}",
        "gitlab-runner register --token {v}", "CI_JOB_TOKEN is not {v}")),
    "Slack bot token": (lambda: "xo" + "xb-" + _r(DIGITS, 12) + "-" + _r(DIGITS, 13) + "-" + _r(ALNUM, 24), (
        "slack alerts go through {v}", "the bot posts with {v}", "SLACK_BOT_TOKEN={v}",
        "the incident bot token {v}", "our standup bot uses {v}")),
    "Slack user token": (lambda: "xo" + "xp-" + _r(DIGITS, 12) + "-" + _r(DIGITS, 12) + "-" + _r(DIGITS, 13) + "-"
                         + _r(HEX, 32), (
        "my user token {v} can read DMs", "export SLACK_TOKEN={v}", "the archiver runs as {v}",
        "legacy token {v}", "the scraper used {v}")),
    "Slack webhook": (lambda: "https://hooks.slack.com/services/T" + _r(UPPER + DIGITS, 8) + "/B" + _r(UPPER + DIGITS, 10)
                      + "/" + _r(ALNUM, 24), (
        "alerts post to {v}", "webhook: {v}", "the deploy bot posts to {v}", "curl -X POST {v}", "SLACK_WEBHOOK_URL={v}")),
    "Google API key": (lambda: "AI" + "za" + _r(ALNUM + "-_", 35), (
        "maps use {v}", "the geocoder key {v}", "GOOGLE_API_KEY={v}", "firebase apiKey {v}", "youtube data api: {v}")),
    "Stripe secret key": (lambda: "sk" + "_live_" + _r(ALNUM, 24), (
        "billing calls Stripe with {v}", "STRIPE_SECRET_KEY={v}", "stripe key {v} in prod",
        "the payments worker uses {v}", "stripe.api_key = '{v}'")),
    "Stripe restricted key": (lambda: "rk" + "_live_" + _r(ALNUM, 24), (
        "the reporting job has restricted key {v}", "read-only stripe key {v}", "export STRIPE_RK={v}",
        "analytics uses {v}", "rk for the dashboard: {v}")),
    "Stripe webhook secret": (lambda: "wh" + "sec_" + _r(ALNUM, 32), (
        "the webhook signing secret is {v}", "STRIPE_WEBHOOK_SECRET={v}", "verify signatures with {v}",
        "endpoint secret {v}", "whsec for staging: {v}")),
    "OpenAI project key": (lambda: "sk-" + "proj-" + _r(B64URL, 48), (
        "the model key is {v}", "OPENAI_API_KEY={v}", "the summariser calls the API with {v}",
        "openai key {v}", "export OPENAI_API_KEY='{v}'")),
    "OpenAI legacy key": (lambda: "sk-" + _r(ALNUM, 20) + "T3Blbk" + "FJ" + _r(ALNUM, 20), (
        "old notebook had {v}", "the 2022 key {v} still works", "openai.api_key = '{v}'", "leaked: {v}", "key {v}")),
    "Anthropic key": (lambda: "sk-" + "ant-api03-" + _r(B64URL, 93) + "AA", (
        "claude calls use {v}", "ANTHROPIC_API_KEY={v}", "the anthropic key {v}", "evals run with {v}", "x-api-key: {v}")),
    "npm token": (lambda: "np" + "m_" + _r(ALNUM, 36), (
        "publish with {v}", "//registry.npmjs.org/:_authToken={v}", "NPM_TOKEN={v}", "the automation token {v}",
        "npm login token {v}")),
    "Hugging Face token": (lambda: "h" + "f_" + _r(ALNUM, 34), (
        "download weights with {v}", "the hub token {v} has write access", "HF_TOKEN={v}",
        "huggingface-cli login --token {v}", "gated model access via {v}")),
    "SendGrid key": (lambda: "S" + "G." + _r(B64URL, 22) + "." + _r(B64URL, 43), (
        "mail goes out through {v}", "SENDGRID_API_KEY={v}", "receipts use {v}", "the marketing key {v}",
        "sendgrid: {v}")),
    "Twilio key": (lambda: "S" + "K" + _r(HEX, 32), (
        "sms uses {v}", "TWILIO_API_KEY={v}", "the verify service key {v}", "twilio api key sid {v}",
        "the call center key {v}")),
    "Mailgun key": (lambda: "ke" + "y-" + _r(HEX, 32), (
        "mailgun api {v}", "MAILGUN_API_KEY={v}", "the relay authenticates with {v}", "mg key {v}",
        "bounces are fetched with {v}")),
    "DigitalOcean token": (lambda: "do" + "p_v1_" + _r(HEX, 64), (
        "terraform uses {v}", "DIGITALOCEAN_TOKEN={v}", "the droplet API token {v}", "doctl auth init -t {v}",
        "spaces sync uses {v}")),
    "Shopify token": (lambda: "shp" + "at_" + _r(HEX, 32), (
        "the store admin token {v}", "SHOPIFY_ACCESS_TOKEN={v}", "the app uses {v}", "inventory sync: {v}",
        "X-Shopify-Access-Token: {v}")),
    "PyPI token": (lambda: "py" + "pi-" + "AgEI" + "cHlwaS5vcmc" + _r(B64URL, 70), (
        "twine uploads with {v}", "the release token {v}", "TWINE_PASSWORD={v}", "pypi token: {v}",
        "trusted publishing replaced {v}")),
    "Databricks token": (lambda: "da" + "pi" + _r(HEX, 32), (
        "notebooks call the API with {v}", "DATABRICKS_TOKEN={v}", "the jobs runner uses {v}",
        "databricks configure --token {v}", "the warehouse token {v}")),
    "Telegram bot token": (lambda: _r(DIGITS, 10) + ":AA" + _r(B64URL, 33), (
        "the bot is {v}", "TELEGRAM_BOT_TOKEN={v}", "alerts go to telegram via {v}", "botfather gave us {v}",
        "the on-call bot runs with {v}")),
    "Discord bot token": (lambda: _rng.choice("MNO") + _r(ALNUM, 23) + "." + _r(ALNUM, 6) + "." + _r(B64URL, 27), (
        "the discord bot logs in with {v}", "DISCORD_TOKEN={v}", "community bot token {v}",
        "client.run('{v}')", "the moderation bot uses {v}")),
    "JSON web token": (_jwt, (
        "the session cookie holds {v}", "id_token: {v}", "curl sends {v} as the session",
        "the service account jwt {v}", "copied from devtools: {v}")),
    "private key": (lambda: _pem(_rng.choice(["RSA PRIVATE KEY", "EC PRIVATE KEY", "OPENSSH PRIVATE KEY",
                                               "PRIVATE KEY", "DSA PRIVATE KEY"])), (
        "the deploy key is {v}", "bastion key:\n{v}", "tls.key: |\n{v}", "{v}", "the signing key\n{v}")),
    "Google service-account key": (lambda: '{"type": "service_account", "project_id": "acme", "private_key_id": "'
                                   + _r(HEX, 40) + '", "private' + '_key": "-----BEGIN ' + 'PRIVATE KEY-----\\n'
                                   + _r(B64, 64) + '\\n"}', (
        "the service account json: {v}", "GOOGLE_CREDENTIALS={v}", "credentials.json is {v}",
        "bigquery uses {v}", "pasted for debugging: {v}")),
    "Azure storage key": (lambda: "DefaultEndpointsProtocol=https;AccountName=acme" + _r(LOWER, 4) + ";AccountKey="
                          + _r(B64, 86) + "==;EndpointSuffix=core.windows.net", (
        "the blob connection string is {v}", "AZURE_STORAGE_CONNECTION_STRING={v}", "use {v}",
        "the backup job connects with {v}", "storage: {v}")),
    "Azure SAS signature": (lambda: "https://acme.blob.core.windows.net/c/f.txt?sv=2022-11-02&se=2026-01-01&sp=r&sig="
                            + _r(ALNUM, 43) + "%3D", (
        "download it from {v}", "the SAS url {v}", "share this link: {v}", "restore from {v}", "export SAS={v}")),
    "password in a connection string": (lambda: _rng.choice(["postgres", "mysql", "redis", "amqp", "mongodb+srv"])
                                        + "://app:" + password().replace("@", "").replace("/", "").replace(":", "") + "@db"
                                        + str(_rng.randint(1, 9)) + ".internal:5432/app", (
        "the db is {v}", "DATABASE_URL={v}", "connect with {v}", "the worker reads {v}", "psql {v}")),
    "basic-auth header": (lambda: "Authorization: Basic " + base64.b64encode(
        f"deploy:{password()}".encode()).decode(), (
        "the probe sends {v}", "curl -H '{v}' https://api.internal", "{v}", "nginx expects {v}", "logged header {v}")),
    "bearer header": (lambda: "Authorization: Bearer " + _r(B64URL, 40), (
        "the client sends {v}", "curl -H '{v}'", "{v}", "replayed request had {v}", "header {v}")),
    "secret in an assignment": (lambda: _rng.choice(["DB_PASSWORD", "REDIS_PASSWORD", "SESSION_SECRET", "client_secret",
                                                     "JWT_SECRET", "api_key", "AUTH_TOKEN", "SMTP_PASSWORD"]) + "="
                                + _mixed(ALNUM, 20), (
        "set {v} in the env file", "{v}", "the compose file has {v}", "export {v}", ".env: {v}")),
    "Heroku API key": (lambda: _uuid(), (
        "HEROKU_API_KEY={v}", "the heroku api key is {v}", "heroku token: {v}", "heroku auth token {v}",
        "heroku key {v}")),
    "Mailchimp key": (lambda: _r(HEX, 32) + "-us" + str(_rng.randint(1, 20)), (
        "mailchimp api key {v}", "MAILCHIMP_KEY={v}", "newsletter sync uses {v}", "the list export key {v}",
        "mc: {v}")),
    "Square OAuth secret": (lambda: "sq0" + "csp-" + _r(B64URL, 43), (
        "square oauth secret {v}", "SQUARE_APP_SECRET={v}", "the pos app secret is {v}",
        "square application secret {v}", "oauth: {v}")),
    "Artifactory key": (lambda: "AK" + "C" + _r(ALNUM, 70), (
        "artifactory api key {v}", "ARTIFACTORY_API_KEY={v}", "jfrog pulls with {v}", "the maven mirror uses {v}",
        "X-JFrog-Art-Api: {v}")),
    "Echo Memory token": (lambda: "em_" + "team_" + _r(B64URL, 43), (
        "my echo token is {v}", "the agent connects with {v}", "ECHO_MEMORY_TOKEN={v}", "hook token {v}",
        "the CI agent uses {v}")),
    "password on a command line": (password, (
        "mysql -u root -p{v} payments", "mysqldump -uadmin -p{v} shop > dump.sql", "mysqladmin -u root -p{v} status",
        "mysql --host db -u app -p{v}", "mysql -uroot -p{v} -e 'show tables'")),
    "provider key in prose": (lambda: _rng.choice([_r(HEX, 32), _mixed(ALNUM, 40), "lin_" + "api_" + _mixed(ALNUM, 40),
                                                   "dd" + _r(HEX, 38), "PMAK-" + _r(HEX, 24) + "-" + _r(HEX, 34)]), (
        "the datadog api key is {v}", "sentry auth token {v}", "our linear api key {v}", "the PagerDuty token: {v}",
        "new relic license? no, the api key {v}", "Here is the Postman key {v} for the collection",
        "the Okta token for SCIM is {v}")),
}

# Credentials in sentences: kind, the value's maker, and phrasings ({v}).
PROSE: dict[str, tuple[Callable[[], str], tuple[str, ...]]] = {
    "prose password (English)": (password, (
        "log in to staging with password {v}", "the staging DB password, {v}, rotates monthly",
        "staging login: admin / {v}", "Dana's VPN password is {v} until she resets it",
        "use {v} as the password for the grafana admin account", "I set the router password to {v} yesterday",
        "the wifi password for the office is {v}", "for the jenkins box the creds are deploy/{v}",
        "ssh into the bastion as ops, password {v}", "the root pw on the NAS is {v}",
        "new password for the shared mailbox: {v}", "remember the billing portal password {v} when you log in",
        "password for the prod replica? it's {v}", "the admin account's password was changed to {v} today",
        "sign in as qa@acme.test with {v} as password", "kibana login is elastic:{v}")),
    "prose passphrase (English)": (passphrase, (
        "the backup passphrase is {v}", "GPG passphrase: {v}", "unlock the vault with the passphrase {v}",
        "the disk encryption passphrase, {v}, is on the sticky note", "restic repository passphrase {v}",
        "the keystore passphrase was set to {v}")),
    "prose token (English)": (lambda: _mixed(ALNUM, _rng.randint(24, 40)), (
        "paste the token {v} into the CI settings", "the api key for the scheduler is {v}",
        "here's the access token: {v}", "the new secret is {v}, please don't share it",
        "the client secret for the SSO app is {v}", "my personal token {v} has admin scope")),
    "prose password (German)": (password, (
        "Das Passwort für den Staging-Server ist {v}.", "Melde dich mit dem Kennwort {v} am VPN an.",
        "Zugangsdaten für die Datenbank: admin / {v}", "Das neue WLAN-Passwort lautet {v}",
        "Das Datenbankpasswort ist {v}, bitte nicht weitergeben.", "Für den Jenkins-Login nimm {v}",
        "Das Root-Passwort auf dem NAS wurde auf {v} geändert.", "Der API-Schlüssel lautet {t}")),
    "prose password (French)": (password, (
        "Le mot de passe du serveur de staging est {v}.", "Connecte-toi avec l'identifiant admin et le mot de passe {v}",
        "Le mdp du wifi : {v}", "Voici le mot de passe de la base : {v}, il change chaque mois.",
        "Identifiants du VPN : ops / {v}", "J'ai changé le mot de passe root en {v} hier.",
        "La clé API du CRM est {t}")),
    "prose password (Spanish)": (password, (
        "La contraseña del servidor de pruebas es {v}.", "Entra con el usuario admin y la contraseña {v}",
        "Credenciales de staging: deploy / {v}", "la clave de acceso al panel es {v}",
        "Cambié la contraseña de la base de datos a {v} ayer.", "La contraseña del wifi de la oficina: {v}",
        "El token de la API es {t}")),
    "prose password (Chinese)": (password, (
        "测试服务器的密码是{v}，每月更换。", "登录staging：admin / {v}", "数据库密码：{v}", "请用密码{v}登录VPN",
        "路由器的管理员密码改成了{v}", "生产环境账号 ops 密码 {v}", "API密钥是{t}，不要外传")),
    "prose password (Japanese)": (password, (
        "ステージングのパスワードは{v}です。", "管理画面のログイン：admin / {v}", "VPNのパスワード「{v}」は来月変わります。",
        "DBパスワードは {v} に変更しました", "共有アカウントのパスワード：{v}", "APIキーは{t}です",
        "ルーターの管理パスワードを{v}に設定した")),
}


def _fill(kind: str, make: Callable[[], str], templates: tuple[str, ...], per_template: int) -> list[Sample]:
    return [Sample(t.format(v=make(), t=_mixed(ALNUM, 32)), kind, True) for t in templates for _ in range(per_template)]


def _secrets() -> list[Sample]:
    out: list[Sample] = []
    for kind, (make, templates) in FORMATS.items():
        out += _fill(kind, make, templates, 1)
    for kind, (make, templates) in PROSE.items():
        out += _fill(kind, make, templates, 2)
    return out


def _b64_text(sentence: str) -> str:
    return base64.b64encode(sentence.encode()).decode()


_PROSE_ABOUT = (
    "rotate the password monthly", "the password policy requires 12 characters",
    "log in to staging with your SSO account", "the staging DB password rotates monthly and lives in Vault",
    "staging login uses Okta, no local accounts", "reset your password at the self-service portal",
    "password login is disabled; use SSO", "the password must not contain the user name",
    "we store passwords as argon2id hashes", "the passphrase should be at least five words",
    "never paste a token into a ticket", "the API key rotates every 90 days", "tokens expire after one hour",
    "ask Dana for the staging password in person", "the wifi password is on the whiteboard in room 3",
    "password reset emails take a minute to arrive", "the admin password was rotated after the audit",
    "the secret is stored in Vault under kv/staging/db", "the password for staging is the same as prod's, ask ops",
    "change the default password on first login", "the token bucket refills at 10 per second",
    "Das Passwort muss alle 90 Tage geändert werden.", "Das Kennwort muss mindestens 12 Zeichen haben.",
    "Bitte das Passwort nie per E-Mail verschicken.", "Le mot de passe doit contenir 12 caractères.",
    "Ne partagez jamais votre mot de passe.", "Le mot de passe expire tous les 90 jours.",
    "La contraseña debe tener al menos 12 caracteres.", "Nunca compartas tu contraseña por chat.",
    "La contraseña se cambia cada trimestre.", "密码必须至少包含12个字符。", "请每90天更换一次密码。",
    "不要在聊天中发送密码。", "パスワードは12文字以上にしてください。", "パスワードを他人に教えないでください。",
    "パスワードは90日ごとに変更します。", "the login page for staging is https://staging.acme.io/login",
    "login: see the onboarding doc", "the token field is required", "password: required",
    "credentials are injected by the CSI driver", "the password manager is 1Password",
    "sign in with GitHub, then pick the org", "the password prompt times out after 30 seconds",
)


def _lookalikes() -> list[Sample]:
    out: list[Sample] = []

    def add(kind: str, texts: list[str]) -> None:
        out.extend(Sample(t, kind, False) for t in texts)

    add("git SHA", [t.format(h=_r(HEX, 40), s=_r(HEX, _rng.randint(7, 12))) for t in (
        "commit {h} fixed the flaky test", "reverted {s} after the outage", "cherry-picked {h} onto release-2.3",
        "the token refresh bug was fixed in commit {h}", "bisect points at {s}", "merged {s} into main",
        "git show {h} -- secrets.py", "HEAD is now at {s} Bump version", "the fix is {h}",
        "see {s}..{s} for the password reset change", "pinned the action to {h}",
        "build from {h} passed", "deployed {s} to staging", "tag v2.3.1 points at {h}") for _ in range(2)])
    add("UUID", [t.format(u=_uuid()) for t in (
        "request id {u}", "trace_id={u} in the log", "session id {u} expired", "the api key id is {u}",
        "tenant {u} was migrated", "token_id: {u}", "the secret's version id {u}", "idempotency key {u}",
        "correlation-id: {u}", "user {u} reset their password") for _ in range(3)])
    add("content hash in a log", [t.format(h64=_r(HEX, 64), h32=_r(HEX, 32), h40=_r(HEX, 40)) for t in (
        "sha256: {h64}", "INFO cache hit {h32}", "md5sum of the archive is {h32}", "ETag: \"{h32}\"",
        "image sha256:{h64}", "docker pull ghcr.io/acme/api@sha256:{h64}", "the aws secret rotation job ran, its sha1 is {h40}",
        "secret manager version {h32}", "checksum {h64} verified", "blob {h40} stored",
        "2026-12-04T07:30:12Z DEBUG token cache key {h32} miss", "layer {h64} already exists") for _ in range(3)])
    add("version string", [t.format(a=_rng.randint(0, 30), b=_rng.randint(0, 40), c=_rng.randint(0, 99)) for t in (
        "upgraded to {a}.{b}.{c}-rc.3+build.2026", "node v{a}.{b}.{c} on the runners", "python 3.{b}.{c} and numpy 2.{a}.0",
        "kubernetes 1.{b}.{c}-gke.1200000", "the password hashing library argon2-cffi {a}.{b}.{c}",
        "release v{a}.{b}.{c}-beta.1 of the token service", "postgres {a}.{b} with pgvector 0.{b}.{c}",
        "Helm chart echo-memory-{a}.{b}.{c}") for _ in range(3)])
    add("base64 of ordinary text", [t.format(b=_b64_text(s)) for t, s in (
        ("the payload is {b}", "Deploy the payments service after the review."),
        ("aws secret note: {b}", "Rotate keys with the runbook, not by hand."),
        ("the token claim decodes from {b}", "The user asked for a refund on Monday."),
        ("message body {b}", "Kubernetes restarted the pod twice overnight."),
        ("the secret field holds {b}", "Nothing sensitive here, just a greeting."),
        ("encoded description: {b}", "The staging cluster moved to eu-west-1."),
        ("config: {b}", "Retry three times with exponential backoff."),
        ("data: {b}", "The password policy requires twelve characters."),
    ) for _ in range(3)])
    example_aws = "AKIA" + "IOSFODNN7" + "EXAMPLE"
    example_secret = "wJalrXUtnFEMI/K7MDENG/" + "bPxRfiCY" + "EXAMPLEKEY"
    add("documented example key", [
        f"Set AWS_ACCESS_KEY_ID to {example_aws} as in the AWS docs", f"aws_access_key_id = {example_aws}",
        f"aws_secret_access_key = {example_secret}", f"the docs use {example_secret} as the secret",
        "export GITHUB_TOKEN=gh" + "p_" + "EXAMPLE" + "x" * 29, "STRIPE_KEY=sk" + "_live_" + "EXAMPLEKEY" + "0" * 14,
        "the SDK sample uses xo" + "xb-" + "EXAMPLE-TOKEN-0000", "OPENAI_API_KEY=sk-" + "proj-" + "EXAMPLE" + "x" * 30,
        "api_key: sample-api-key-1234", "password: <your password here>", "DB_PASSWORD=${DB_PASSWORD}",
        "token: YOUR_TOKEN_HERE", "Authorization: Bearer <token>", "Authorization: Bearer $TOKEN",
        "postgres" + _AUTHORITY + "user:password@localhost:5432/db is the example in the README",
        "password=xxxxxxxx", "api_key = os.environ['OPENAI_API_KEY']", f"docs example: {example_aws}",
        f"the tutorial's key {example_aws} is not a real key", "client_secret: dummy-secret-for-tests",
    ])
    idents = ("AbstractSingletonProxyFactoryBean", "test_password_reset_sends_exactly_one_email_per_request",
              "PasswordResetTokenExpiredException", "the_secret_of_monkey_island_special_edition",
              "getPasswordHashForUserWithLegacyAlgorithm", "TokenBucketRateLimiterConfiguration",
              "secret-santa-2026", "api_key_rotation_reminder_job", "payments-api-7d9f8b6c5-x2x9z",
              "feature/token-refresh-on-401", "S3_BUCKET_FOR_SECRET_BACKUPS", "kubeconfig-staging-eu-west-1",
              "tokenizer_config_bert_base_uncased", "release-2026-12-04-hotfix-2", "ACME_PAYMENTS_SERVICE_ACCOUNT_NAME")
    add("long identifier", [t.format(i=i) for i in idents for t in ("the class is {i}", "rename {i} before merging")])
    add("URL without credentials", [t.format(n=_rng.randint(100, 9999), h=_r(HEX, 8)) for t in (
        "https://github.com/acme/payments/pull/{n}", "https://grafana.internal/d/{h}/latency?orgId=1&from=now-6h",
        "https://user@git.example.com/repo.git", "s3://acme-artifacts/releases/v2.3.{n}/app.tar.gz",
        "redis://cache.internal:6379/0", "https://docs.acme.io/security/passwords#rotation",
        "git@github.com:acme/payments.git", "https://auth.example.com/oauth/token is the token endpoint",
        "https://vault.internal:8200/ui/vault/secrets/kv/show/staging/db", "postgres://app@db.internal/app (IAM auth)",
        "https://login.microsoftonline.com/{h}/oauth2/v2.0/token") for _ in range(2)])
    add("sentence about passwords", list(_PROSE_ABOUT))
    add("reference to where a secret lives", [
        "arn:aws:iam::123456789012:role/deploy", "arn:aws:secretsmanager:us-east-1:123456789012:secret:prod-db-AbCdEf",
        "secretKeyRef: name: db-creds, key: password", "the password is in 1Password under Ops/Staging DB",
        "the token comes from the CSI secret store at /mnt/secrets/api-token", "vault kv get kv/staging/db",
        "aws secretsmanager get-secret-value --secret-id prod/api", "gcloud secrets versions access latest --secret=db-pass",
        "kubectl create secret generic db-creds --from-env-file=.env", "op read op://Ops/Staging DB/password",
        "Zugangsdaten liegen im Vault unter kv/staging.", "Der Token läuft nach 60 Minuten ab.",
        "Le jeton expire après une heure.", "El token caduca en una hora.", "令牌每小时过期一次。",
        "密钥存放在Vault的kv/prod路径下。", "トークンの有効期限は1時間です。", "登录页面在 https://staging.acme.io/login",
        "APIキーはVaultに保存しています。", "La clé API se trouve dans le coffre kv/prod.",
    ])
    add("package, image or file name", [t.format(a=_rng.randint(1, 9), b=_rng.randint(0, 30)) for t in (
        "pip install python-jose=={a}.{b}.0", "npm i jsonwebtoken@{a}.{b}.2", "ghcr.io/acme/token-service:v{a}.{b}.2-alpine3.19",
        "see secrets.yaml.example for the keys", "the public key file is id_ed25519.pub", "cargo add argon2@0.{b}.{a}",
        "the password-strength meter is zxcvbn-ts {a}.{b}.1",
        "helm upgrade auth-proxy oci://ghcr.io/acme/charts/auth-proxy --version {a}.{b}.0",
        "go get golang.org/x/crypto@v0.{b}.{a}", "the keyring backend is keyrings.alt {a}.{b}") for _ in range(2)])
    add("host, time or number", [t.format(n=_rng.randint(2, 999), h=_r(HEX, 4)) for t in (
        "log in to k8s-staging-0{n}.eu-west-1.internal as admin", "the token expires at 2026-12-04T08:50:00Z",
        "password reset link expires in {n}h", "the login node is ip-10-0-{n}-12.ec2.internal",
        "ipv6 2001:db8:{h}::{h} answers pings", "the password is 8-16 characters long",
        "the passphrase is at least 5 words", "the api key quota is {n}000 requests per day",
        "pw-reset job runs at 03:{n}", "credentials for build {n} are injected at run time") for _ in range(2)])
    return out


def build(seed: int = SEED) -> tuple[list[Sample], list[Sample]]:
    """The corpus for `seed`: (secrets, look-alikes); the same seed gives the same lists."""
    global _rng
    _rng = random.Random(seed)
    return _secrets(), _lookalikes()


SECRETS, LOOKALIKES = build()
