"""Keyword-and-entropy rules for credentials written in sentences, in several languages.

A keyword (password, Passwort, mot de passe, contraseña, 密码, パスワード, token, api key, "<provider>
key" …) opens a short window of the same clause; a value in that window is a credential when it
looks chosen or issued, not like a word of the sentence:
- after a password word: at least 8 ASCII characters mixing three of lower case, upper case, digits
  and symbols (or letters and at least two digits), and not a date, version, host, e-mail, path or
  identifier that names the keyword itself;
- after a token or key word: at least 16 characters of high entropy mixing letters and digits, and
  not a digest or id the window names as such (sha, commit, md5, request id …);
- after a passphrase word: also four or more words joined by hyphens (diceware style).
Sentences that only talk about a password ("rotate the password monthly", "das Passwort muss 12
Zeichen haben") hold no such value and pass.
"""

from __future__ import annotations

import base64
import binascii
import math
import re
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass

from echo_memory.libs.core.secrets.rules import is_example

PROSE_PASSWORD = "password in prose"
PROSE_TOKEN = "API key or token in prose"

# Keyword families. Latin-script words are matched on word boundaries, case-insensitively; CJK
# words anywhere. Compound German words (Datenbankpasswort) end in the keyword, so only their
# end is anchored.
_PASSWORD_WORDS = (
    r"passwords?|passwd|passcode|pwd|pw|login|logins|credentials?|creds|sign[- ]?in|log[- ]?in"
    r"|\w*passwort|\w*kennwort|zugangsdaten|anmeldung|mot de passe|mdp|identifiants?|code d'accès"
    r"|contraseña|contrasena|clave de acceso|clave|credenciales|senha|wachtwoord|пароль|parola|haslo|hasło"
)
_PASSWORD_CJK = r"密码|密碼|口令|登录|登錄|账号|帳號|パスワード|暗証番号|ログイン|비밀번호"
_PASSPHRASE_WORDS = r"passphrases?|pass phrase|phrase secrète|frase de contraseña|\w*passphrase|パスフレーズ|口令短语"
_TOKEN_WORDS = (
    r"tokens?|api[ _\-]?keys?|apikeys?|access[ _\-]?keys?|secret[ _\-]?keys?|secrets?|keys?|client[ _\-]?secret"
    r"|app[ _\-]?password|pat|dsn|schlüssel|\w*schlüssel|clé|cle|jeton|llave|chave|sleutel|ключ|токен"
)
_TOKEN_CJK = r"密钥|密鑰|令牌|秘钥|トークン|キー|鍵|アクセスキー|토큰|키"

# A keyword is a word of the sentence, not part of a file name, URL or address (secrets.py,
# user:password@host): nothing but a space, punctuation followed by a space, or the end after it.
_ALONE = r"(?![\w@/]|[.:=][^\s])"
_KEYWORD = re.compile(
    rf"(?i:(?<![\w/.@:])(?P<pp>{_PASSPHRASE_WORDS}){_ALONE}|(?P<cjkpp>パスフレーズ|口令短语)"
    rf"|(?<![\w/.@:])(?P<pw>{_PASSWORD_WORDS}){_ALONE}|(?P<cjkpw>{_PASSWORD_CJK})"
    rf"|(?<![\w/.@:])(?P<tk>{_TOKEN_WORDS}){_ALONE}|(?P<cjktk>{_TOKEN_CJK}))"
)
# A clause ends at a sentence stop or a line break; the value must sit in the keyword's clause.
_CLAUSE_END = re.compile(r"[.;]\s|[。！；\n]|$")
# Printable ASCII runs: in CJK text a password is the ASCII inside the sentence.
_CANDIDATE = re.compile(r"[!-~]+")
_EDGE = "\"'`“”‘’«»„‚()[]{}<>.,;:!?。、，：「」『』"

_WINDOW_AFTER = 80
_WINDOW_BEFORE = 40

_DATE_OR_VERSION = re.compile(
    r"^(?:\d+[-\s]?[a-z]+(?:-[a-z]+)*|\d{1,4}[-/.]\d{1,2}[-/.]\d{1,4}(?:[T ][\d:.]+Z?)?|[vV]?\d+(?:\.\d+)+[a-zA-Z0-9.+\-]*"
    r"|\d+(?:[.,]\d+)?(?:[a-z%]+|[KMGT]i?B)?|\d+h\d*|\d{1,2}:\d{2}(?::\d{2})?)$"
)
_HOST = re.compile(r"^[a-z0-9\-]+(?:\.[a-z0-9\-]+)+(?::\d+)?$")
_EMAIL = re.compile(r"^[^@\s]+@[\w\-]+(?:\.[\w\-]+)+$")
_IDENT_PLAIN = re.compile(r"^[a-z]+(?:[-_][a-z]+)*[-_]?\d{0,3}$|^[A-Z][a-z]+(?:[A-Z][a-z]+)+\d{0,2}$")
_KEYWORD_INSIDE = re.compile(r"pass|pwd|secret|token|key|login|auth|user|admin|name|cred", re.I)
_DICEWARE = re.compile(r"^[a-z]{3,}(?:[-_.][a-z0-9]{2,}){3,}$", re.I)
# kebab-case names (pod, branch, bucket names) of short parts: identifiers, not issued values.
_KEBAB = re.compile(r"^[a-z0-9]{1,12}(?:-[a-z0-9]{1,12})+$")
_WORD_PATH = re.compile(r"^[A-Za-z][a-z]*(?:[/\\][A-Za-z][a-z]*)+$")  # Ops/Staging, kv/prod
# File names (docs/BENCHMARKS.md) and dotted code names (natsAuth.create=false).
_FILE_OR_CODE = re.compile(
    r"^[\w.\-/]+\.(?:md|py|txt|json|ya?ml|toml|sh|js|ts|go|rs|sql|cfg|ini|conf|env|lock|pub|crt|log|html|csv)$"
    r"|^[A-Za-z_]+(?:\.[A-Za-z_]+)+(?:=[A-Za-z\-]*)?$",
    re.I,
)
_WORDS = re.compile(r"^[A-Za-zÀ-ÿ]+(?:[-'’][A-Za-zÀ-ÿ]+)+$")  # Staging-Server, WLAN-Passwort, Connecte-toi
_POSSESSIVE = re.compile(r"^[A-Za-z]+['`’]s$")
_HEX_RANGE = re.compile(r"^[0-9a-f]{7,64}(?:\.{2,3}[0-9a-f]{7,64})?$")
_HEX = re.compile(r"^[0-9a-f]+$", re.I)
_UUID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$", re.I)
_DIGEST_WORDS = re.compile(
    r"(?i:\b(?:sha\d*|md5|hash(?:es)?|digest|checksum|commit|etag|fingerprint|uuid|guid|request[ _\-]?id|trace"
    r"|id|ids|build|revision|rev|hashsum|version|base64|encoded|cache)\b|哈希|校验|ハッシュ)"
)
# Values that stand for a secret rather than being one: references and placeholders.
_REFERENCE = re.compile(
    r"^(?:\$\{?[A-Za-z_]\w*\}?|%[A-Za-z_]\w*%|<[^>]*>|\{\{[^}]*\}\}|\*{3,}|\[[^\]]*\])$"
    r"|^(?:os\.|env\.|process\.|vault:|secret/|ssm:|arn:|op://|\.\.\.)",
    re.I,
)


# Keys and tokens that are not credentials: "the cache key is …", "the next page token …".
_NOT_A_CREDENTIAL = re.compile(
    r"(?i:\b(?:cache|primary|partition|sort|idempotency|foreign|public|routing|dedup|shard|lookup|hash|map|row"
    r"|index|object|composite|unique|license|licence|page|pagination|continuation|cancellation|sync|csrf|max"
    r"|input|output|translation|i18n|host|ssh[ _\-]host|gpg|signing)[ _\-]?$)"
)


_REDACTED = re.compile(r"\[redacted [^\]\n]{1,80}\]")


@dataclass(frozen=True)
class ProseFinding:
    """A credential found in a sentence: which family and the [start, end) of the value."""

    noun: str
    start: int
    end: int


def _classes(value: str) -> tuple[bool, bool, bool, bool]:
    return (any(c.islower() for c in value), any(c.isupper() for c in value),
            any(c.isdigit() for c in value), any(not c.isalnum() for c in value))


def entropy(value: str) -> float:
    """Shannon entropy of `value` in bits per character (0.0 for an empty string)."""
    if not value:
        return 0.0
    counts = Counter(value)
    return -sum(n / len(value) * math.log2(n / len(value)) for n in counts.values())


def _plain(value: str) -> bool:
    """A date, version, number, host, e-mail, path, URL, reference or plain identifier."""
    return bool(
        _DATE_OR_VERSION.match(value) or _HOST.match(value) or _EMAIL.match(value) or _REFERENCE.match(value)
        or _IDENT_PLAIN.match(value) or "://" in value or value.count("/") >= 2 or value.startswith(("/", "~", "./"))
        or is_example(value) or _WORD_PATH.match(value) is not None or _FILE_OR_CODE.match(value) is not None
        or ("<" in value and ">" in value) or _POSSESSIVE.match(value) is not None or _WORDS.match(value) is not None
    )


def chosen_password(value: str) -> bool:
    """A value a person chose as a password: see the module's rule for password words."""
    if len(value) < 8 or len(value) > 64 or not value.isascii() or _plain(value) or _KEBAB.match(value):
        return False
    if _HEX_RANGE.match(value):
        return False  # commit ids and ranges (5a86e03..9f1c2b7)
    if _KEYWORD_INSIDE.search(value) and entropy(value) < 3.2:
        return False  # Passw0rd-policy, secret-santa-2026: a name that mentions the keyword
    lower, upper, digit, symbol = _classes(value)
    if lower + upper + digit + symbol >= 3 and (digit or symbol) and (lower or upper):
        return True
    return (lower or upper) and sum(c.isdigit() for c in value) >= 2 and not value.isdigit() and len(value) >= 8


def issued_token(value: str) -> bool:
    """A value a service issued: ≥ 16 characters, letters and digits mixed, high entropy."""
    if (len(value) < 16 or not value.isascii() or _plain(value) or _UUID.match(value) or _KEBAB.match(value)
            or _HEX_RANGE.match(value) and "." in value):
        return False
    lower, upper, digit, _ = _classes(value)
    if not digit or not (lower or upper):
        return False
    if _HEX.match(value):
        return len(value) >= 20 and entropy(value) >= 3.0
    return entropy(value) >= 3.3 and not _decodes_to_text(value)


def _decodes_to_text(value: str) -> bool:
    """Base64 of ordinary text (a payload quoted in a log) is not an issued value."""
    body = value.rstrip("=").replace("-", "+").replace("_", "/")
    if len(body) % 4 == 1:
        return False
    try:
        raw = base64.b64decode(body + "=" * (-len(body) % 4), validate=True)
        decoded = raw.decode("utf-8")
    except (binascii.Error, ValueError):
        return False
    return sum(c.isprintable() for c in decoded) >= 0.95 * len(decoded)


def _strip(text: str, start: int, end: int) -> tuple[int, int]:
    # Markdown emphasis (**Stable**) is markup, not part of a value.
    while text.startswith("**", start) and end - start > 2:
        start += 2
    while text.endswith("**", start, end) and end - start > 2:
        end -= 2
    while start < end and text[start] in _EDGE:
        start += 1
    while end > start and text[end - 1] in _EDGE:
        end -= 1
    return start, end


def _candidates(text: str, start: int, end: int) -> Iterator[tuple[int, int, int]]:
    """(start, end) of each value to judge, and the end to redact up to: a value's trailing "!", "?"
    or "." may be its own last character, so redaction takes it too."""
    for match in _CANDIDATE.finditer(text, start, end):
        s, e = _strip(text, match.start(), match.end())
        if e <= s:
            continue
        redact_end = e
        while redact_end < match.end() and text[redact_end] in "!?.#*":
            redact_end += 1
        yield s, e, redact_end
        # "admin/Xy7#kq2Lm" and "admin:Xy7#kq2Lm": the part after the separator is the password.
        inner = text[s:e]
        for sep in ("/", ":"):
            if inner.count(sep) == 1 and "://" not in inner:
                cs, ce = _strip(text, s + inner.index(sep) + 1, e)
                if ce > cs:
                    yield cs, ce, redact_end


def _clause_after(text: str, start: int) -> int:
    limit = min(len(text), start + _WINDOW_AFTER)
    stop = _CLAUSE_END.search(text, start, limit)
    return stop.start() if stop else limit


def _clause_before(text: str, end: int) -> int:
    start = max(0, end - _WINDOW_BEFORE)
    cut = start
    for match in _CLAUSE_END.finditer(text, start, end):
        if match.end() > match.start():  # a stop, not the end of the window
            cut = match.end()
    return cut


def prose_findings(text: str) -> Iterator[ProseFinding]:
    """Each credential written in a sentence of `text`; nothing for text that only talks about one."""
    # A redaction marker names a kind ("[redacted password in prose]"): blank it, keeping offsets,
    # so text redacted once is clean when checked again.
    text = _REDACTED.sub(lambda m: " " * len(m.group()), text)
    for keyword in _KEYWORD.finditer(text):
        family = keyword.lastgroup or ""
        after = _clause_after(text, keyword.end())
        before = _clause_before(text, keyword.start())
        window = list(_candidates(text, keyword.end(), after)) + list(_candidates(text, before, keyword.start()))
        if family in ("tk", "cjktk"):
            if _NOT_A_CREDENTIAL.search(text, max(0, keyword.start() - 20), keyword.start()):
                continue
            if _DIGEST_WORDS.search(text, before, after):
                continue  # "the secret rotation job's sha1 is …": a digest named as such
            for s, e, redact_end in window:
                if s < keyword.start() and _HEX.match(text[s:e]):
                    continue  # a hex value before the word is a digest the sentence acts on
                if issued_token(text[s:e]):
                    yield ProseFinding(PROSE_TOKEN, s, redact_end)
            continue
        for s, e, redact_end in window:
            value = text[s:e]
            if chosen_password(value) or issued_token(value) or (
                    family in ("pp", "cjkpp") and _DICEWARE.match(value) and len(value) >= 16):
                yield ProseFinding(PROSE_PASSWORD, s, redact_end)
