"""Phrasings written after the rules were tuned on corpus.py, kept apart to show how the prose rules
do on wording they were not fitted to. Measured once when written (14 of 20 caught, none of the 20
ordinary sentences flagged); "clave" then moved from the key words to the password words. The
misses that remain have no credential word at all ("type … to unlock it") or put one in another
clause; they are reported, not tuned away.
"""

from __future__ import annotations

SECRET_PHRASINGS = (
    "the SFTP account for the bank feed is finance with {p}",
    "if the kiosk locks, type {p} to unlock it",
    "Grafana admin creds: admin {p}",
    "jenkins: user deploy pass {p}",
    "I changed the mailbox password; the new one is {p}",
    "ops@acme.io / {p} gets you into the status page",
    "Passwort: {p} (gilt bis Freitag)",
    "Benutzer root, Kennwort {p}",
    "mot de passe provisoire : {p}",
    "usuario: soporte, clave: {p}",
    "账号 admin，密码 {p}",
    "ユーザー名 admin パスワード {p}",
    "pw for the test tenant -> {p}",
    "the shared 1Password vault is down, so here's the db password: {p}",
    "Login to the router at 192.168.1.1 using admin and {p}",
    "La password del server è {p}",
    "A senha do banco é {p}",
    "het wachtwoord is {p}",
    "пароль от сервера {p}",
    "creds for the demo box are demo:{p}",
)

ORDINARY = (
    "the password reset flow sends one email",
    "we moved passwords to 1Password in March",
    "ask for the password in #ops, never in DMs",
    "the login button is broken on Safari 17.2",
    "tokens are hashed with sha256 before storage",
    "the API key header is X-Api-Key",
    "Passwort vergessen? Dann den Helpdesk anrufen.",
    "le mot de passe est trop court",
    "la contraseña expiró ayer",
    "密码错误三次会锁定账号",
    "パスワードを忘れた場合は管理者に連絡してください",
    "login latency p99 went from 120ms to 480ms after v2.3.1",
    "the token endpoint returned HTTP 429 for build 8812",
    "rotate keys after every incident, see INC-2041",
    "the secret rotation lambda is rotate-db-secret-prod",
    "password complexity: 3 of 4 character classes",
    "login: see https://wiki.acme.io/Onboarding#Accounts",
    "credentials were revoked at 14:05 UTC",
    "key takeaways: ship smaller PRs, review faster",
    "the API key for staging lives in AWS Secrets Manager",
)
