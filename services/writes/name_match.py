"""Whether two entity names can mean one thing: lexical rules first, the embedding only as a tie-break.

A look-alike that differs in a number, a version or a qualifier word ("Payments API v7" /
"Payments API", "session cache" / "transaction cache", "Postgres 15" / "Postgres 16") is a
different entity whatever the embedding says: such a pair gets a score far below any deferral
threshold. A spelling variant (case, punctuation, diacritics, plural, article, typo, numeronym,
acronym, abbreviation, nickname, a vendor or generic word added) gets a score by the rule that
explains it. Only a pair that no rule explains or forbids (no token in common at all) is left to
the embedding, and then only when it is very close.

`judge` is pure: no database, no model. The caller passes the cosine of the two names' vectors.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from typing import Literal

Rule = Literal[
    "same_form",  # equal once case, punctuation, spacing, diacritics, plural and articles are ignored
    "numeronym",  # k8s / kubernetes
    "acronym",  # AWS / Amazon Web Services, TF / TensorFlow
    "nickname",  # Bob / Robert
    "typo",  # one slip of the keyboard in a long word
    "initial",  # B. Martinez / Bob Martinez
    "abbreviation",  # Postgres / PostgreSQL, env / environment, Mt. / Mount
    "generic_word",  # billing / billing service, Teams / Microsoft Teams
    "word_order",  # Wei Chen / Chen Wei
    "given_name",  # Priya / Priya Raman (people only)
    "number_differs",  # Postgres 15 / Postgres 16, Payments API v7 / Payments API
    "qualifier_differs",  # session cache / transaction cache, Redis / Redis Sentinel
    "unexplained",  # no token in common: only the embedding speaks
]

# Rules that say "a different entity": the pair is never merged or deferred.
DISTINCT_RULES: frozenset[Rule] = frozenset({"number_differs", "qualifier_differs"})

# How much each rule says "one entity"; the cosine moves a pair within its rule by at most 0.05.
_PRIOR: dict[Rule, float] = {
    "same_form": 1.0, "numeronym": 0.93, "acronym": 0.88, "nickname": 0.9, "typo": 0.88, "initial": 0.86,
    "abbreviation": 0.8, "generic_word": 0.8, "word_order": 0.84, "given_name": 0.76,
}
_UNEXPLAINED_WEIGHT = 0.7  # an unexplained pair reaches 0.6 only above cosine ~0.86
_DISTINCT_WEIGHT = 0.1

ARTICLES = frozenset({"the", "a", "an", "of", "de", "la", "le", "and", "&"})
# Words that name the kind of thing rather than which thing: adding one changes nothing.
GENERIC = frozenset({
    "service", "server", "api", "app", "application", "ci", "io", "inc", "incorporated", "corp", "corporation",
    "ltd", "llc", "co", "company", "gmbh", "hq", "headquarters", "office", "db", "database", "platform", "tool",
    "system", "project", "repo", "website", "site", "web", "software", "cloud", "dr", "mr", "mrs", "ms", "prof",
})
VENDORS = frozenset({
    "apache", "microsoft", "google", "adobe", "nintendo", "samsung", "amazon", "apple", "meta", "oracle", "ibm",
    "sony", "mozilla", "jetbrains", "hashicorp", "atlassian", "red", "hat", "elastic", "gnu", "cncf",
})
# Generation and suffix words: "John Smith" and "John Smith Jr" are two people.
MARKERS = frozenset({"jr", "sr", "ii", "iii", "iv", "vi", "vii", "viii", "ix", "junior", "senior"})
PERSON_TYPES = frozenset({
    "person", "people", "user", "engineer", "developer", "customer", "contact", "employee", "author", "human",
    "manager", "colleague", "teammate", "member", "stakeholder", "client",
})
PLACE_TYPES = frozenset({"place", "city", "country", "location", "region", "state", "site", "address"})
_NICKNAMES: tuple[tuple[str, ...], ...] = (
    ("robert", "bob", "rob", "bobby", "robbie"), ("william", "bill", "will", "billy", "liam"),
    ("elizabeth", "liz", "beth", "eliza", "betty", "lisa"), ("michael", "mike", "mick", "mikey"),
    ("katherine", "kate", "kathy", "katie", "kat", "catherine"), ("james", "jim", "jimmy", "jamie"),
    ("thomas", "tom", "tommy"), ("alexander", "alex", "sasha", "xander"), ("alexandra", "alex", "sasha", "lexi"),
    ("david", "dave", "davey"), ("samantha", "sam", "sammy"), ("samuel", "sam", "sammy"),
    ("christopher", "chris", "kit"), ("christina", "chris", "tina"), ("daniel", "dan", "danny"),
    ("richard", "rick", "dick", "rich", "ricky"), ("jennifer", "jen", "jenny"), ("joseph", "joe", "joey"),
    ("jonathan", "jon", "jonny"), ("john", "jack", "johnny"), ("margaret", "maggie", "meg", "peggy"),
    ("edward", "ed", "eddie", "ted"), ("anthony", "tony"), ("benjamin", "ben", "benny"), ("andrew", "andy", "drew"),
    ("patricia", "pat", "patty", "trish"), ("patrick", "pat", "paddy"), ("nicholas", "nick", "nicky"),
    ("steven", "steve"), ("stephen", "steve"), ("matthew", "matt"), ("timothy", "tim", "timmy"),
    ("rebecca", "becky", "becca"), ("victoria", "vicky", "tori"), ("susan", "sue", "susie"),
    ("charles", "charlie", "chuck"), ("gregory", "greg"), ("jeffrey", "jeff"), ("kenneth", "ken", "kenny"),
    ("ronald", "ron", "ronnie"), ("donald", "don", "donnie"), ("deborah", "deb", "debbie"),
    ("frederick", "fred", "freddie"), ("theodore", "theo", "ted", "teddy"), ("abigail", "abby"),
    ("zachary", "zach", "zack"), ("nathaniel", "nate", "nathan"), ("joshua", "josh"), ("peter", "pete"),
)
NICKNAMES: dict[str, frozenset[str]] = {}
for _group in _NICKNAMES:
    for _name in _group:
        NICKNAMES[_name] = NICKNAMES.get(_name, frozenset()) | frozenset(_group)

_KEYBOARD = ("qwertyuiop", "asdfghjkl", "zxcvbnm")
_ADJACENT: dict[str, set[str]] = {}
for _row_index, _row in enumerate(_KEYBOARD):
    for _col, _ch in enumerate(_row):
        near = _ADJACENT.setdefault(_ch, set())
        for _dr in (-1, 0, 1):
            if 0 <= _row_index + _dr < len(_KEYBOARD):
                other = _KEYBOARD[_row_index + _dr]
                for _dc in (-1, 0, 1):
                    if 0 <= _col + _dc < len(other) and (_dr, _dc) != (0, 0):
                        near.add(other[_col + _dc])

_FOLD = str.maketrans({"ø": "o", "æ": "ae", "œ": "oe", "ß": "ss", "ł": "l", "đ": "d", "ð": "d", "þ": "th"})
_NUMERONYM = re.compile(r"^[a-z]\d+[a-z]$")
_HAS_DIGIT = re.compile(r"\d")
_CAMEL = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|\d+")


@dataclass(frozen=True)
class Judgement:
    """How two names relate: the rule that explains (or forbids) the match and the resulting score."""

    rule: Rule
    score: float

    @property
    def distinct(self) -> bool:
        return self.rule in DISTINCT_RULES


def fold(text: str) -> str:
    """Lower-cased, diacritics removed (São → sao, Bjørn → bjorn)."""
    decomposed = unicodedata.normalize("NFKD", text.casefold().translate(_FOLD))
    return "".join(c for c in decomposed if not unicodedata.combining(c))


def tokens(name: str) -> list[str]:
    """Words of a name: folded, split on punctuation and at letter/digit boundaries ("v7" → v, 7)."""
    words = re.findall(r"[^\W_]+(?:\.\d+)*", fold(name).replace("'", "").replace("’", ""))
    out: list[str] = []
    for word in words:
        if _NUMERONYM.match(word):
            out.append(word)
            continue
        # "v7" splits (v, 7) but "7a" stays one number: Pixel 7 and Pixel 7a are two phones.
        out += re.findall(r"\d+(?:\.\d+)*[^\W\d_]*|[^\W\d_]+", word)
    return out


def _numbers(words: list[str]) -> list[str]:
    # "v7" and "version 7" are both the number 7; a lone "v" is dropped with it.
    return sorted(w.lstrip("0") or "0" for w in words if _HAS_DIGIT.search(w) and not _NUMERONYM.match(w))


def _words(words: list[str], kind: str) -> list[str]:
    kept = [w for w in words if not _HAS_DIGIT.search(w) or _NUMERONYM.match(w)]
    # In a person's name "A." is an initial and "de" part of the surname, not articles.
    dropped = {"the"} if kind == "person" else ARTICLES
    return [w for w in kept if w not in dropped and w not in {"v", "version", "ver"}]


def _singular(word: str, kind: str = "other") -> str:
    if kind != "other":
        return word  # "James", "Lucas", "Paris": a final s of a name is no plural
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    if len(word) > 3 and word.endswith("s") and not word.endswith("ss"):
        return word[:-1]
    return word


def _camel_initials(name: str) -> str:
    parts: list[str] = []
    for word in re.split(r"[\s\-_/.]+", unicodedata.normalize("NFKD", name)):
        pieces = _CAMEL.findall(word)
        parts += pieces or ([word] if word else [])
    return "".join(p[0] for p in parts if p and fold(p) not in ARTICLES and not p.isdigit()).lower()


def typo_cost(a: str, b: str) -> int:
    """Keyboard-slip edit distance: insert, delete, swap neighbours or hit an adjacent key cost 1; another key 2."""
    rows = len(a) + 1
    cols = len(b) + 1
    d = [[0] * cols for _ in range(rows)]
    for i in range(rows):
        d[i][0] = i
    for j in range(cols):
        d[0][j] = j
    for i in range(1, rows):
        for j in range(1, cols):
            if a[i - 1] == b[j - 1]:
                sub = 0
            else:
                sub = 1 if b[j - 1] in _ADJACENT.get(a[i - 1], set()) else 2
            d[i][j] = min(d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + sub)
            if i > 1 and j > 1 and a[i - 1] == b[j - 2] and a[i - 2] == b[j - 1]:
                d[i][j] = min(d[i][j], d[i - 2][j - 2] + 1)
    return d[-1][-1]


def _is_typo(a: str, b: str) -> bool:
    """One slip in a long word (two in a very long one), the first letter kept: Kuberentes, Postgress."""
    longer = max(len(a), len(b))
    if longer < 5 or a[0] != b[0] or _HAS_DIGIT.search(a + b):
        return False
    # Two slips only in a long word and never a whole added syllable (Austria / Australia).
    return typo_cost(a, b) <= (2 if longer >= 9 and abs(len(a) - len(b)) <= 1 else 1)


def _is_abbreviation(short: str, long: str, dotted: bool, kind: str) -> bool:
    """"env" for environment, "Mt." for Mount; places and people only with the period that marks it."""
    if len(short) >= len(long) or short[0] != long[0]:
        return False
    if kind in ("person", "place") and not dotted:
        return False
    if long.startswith(short) and len(short) >= 3:
        return True
    return dotted and len(short) <= 3 and _subsequence(short, long)


def _subsequence(short: str, long: str) -> bool:
    it = iter(long)
    return all(ch in it for ch in short)


def _numeronym_of(short: str, long: str) -> bool:
    if not _NUMERONYM.match(short):
        return False
    middle = int(short[1:-1])
    return len(long) == middle + 2 and long[0] == short[0] and long[-1] == short[-1]


def kind_of(*types: str) -> str:
    """person, place or other: a few rules apply only to one kind of name."""
    folded = {fold(t).strip() for t in types}
    if folded & PERSON_TYPES:
        return "person"
    if folded & PLACE_TYPES:
        return "place"
    return "other"


def judge(a: str, b: str, cosine: float, *, kind: str = "other") -> Judgement:
    """The rule relating names `a` and `b` and a score in [0, 1]; higher means more likely one entity."""
    rule = classify(a, b, kind=kind)
    if rule in DISTINCT_RULES:
        score = _DISTINCT_WEIGHT * max(cosine, 0.0)
    elif rule == "unexplained":
        score = _UNEXPLAINED_WEIGHT * max(cosine, 0.0)
    elif rule == "same_form":
        score = 1.0
    else:
        score = _PRIOR[rule] + 0.05 * max(min(cosine, 1.0), 0.0)
    return Judgement(rule=rule, score=round(min(score, 1.0), 4))


def classify(a: str, b: str, *, kind: str = "other") -> Rule:
    """Which rule relates two names (see `Rule`); forbidding rules are checked before explaining ones."""
    ta, tb = tokens(a), tokens(b)
    if _numbers(ta) != _numbers(tb):
        return "number_differs"
    wa, wb = _words(ta, kind), _words(tb, kind)
    if [_singular(w, kind) for w in wa] == [_singular(w, kind) for w in wb] or "".join(wa) == "".join(wb):
        return "same_form"
    if {w for w in wa if w in MARKERS} != {w for w in wb if w in MARKERS}:
        return "qualifier_differs"
    if len(wa) > len(wb) or (len(wa) == len(wb) and a > b):
        (a, wa), (b, wb) = (b, wb), (a, wa)  # a is the shorter name from here on
    whole = _whole_name_rule(a, b, wa, wb, kind)
    if whole is not None:
        return whole
    return _token_rule(a + " " + b, wa, wb, kind)


def _whole_name_rule(a: str, b: str, wa: list[str], wb: list[str], kind: str) -> Rule | None:
    """Rules about the short name as a whole: numeronym, acronym."""
    if len(wa) == 1:
        short = wa[0]
        joined = "".join(wb)
        if _numeronym_of(short, joined) or any(_numeronym_of(short, w) for w in wb):
            return "numeronym"
        long_words = [w for w in wb if w not in ARTICLES]
        if 2 <= len(short) <= 6 and len(long_words) >= 2 and short == "".join(w[0] for w in long_words):
            return "acronym"
        if 2 <= len(short) <= 6 and len(wb) == 1 and len(b) > len(short) + 2 and short == _camel_initials(b):
            return "acronym"
        # PS5 / PlayStation 5: the letters are the initials of the long name's camel-case parts.
        if len(wb) >= 2 and kind != "person" and short == _camel_initials(b) and len(short) >= 2:
            return "acronym"
    return None


def _token_rule(both: str, wa: list[str], wb: list[str], kind: str) -> Rule:
    """Rules about the words the two names do not share (`both`: the two names as written)."""
    sa, sb = [_singular(w, kind) for w in wa], [_singular(w, kind) for w in wb]
    if sorted(sa) == sorted(sb):
        return "word_order"
    # Compare singulars, but judge the differing words as written (Postgres is not "postgre").
    only_a = [w for w, s in zip(wa, sa, strict=True) if s not in sb]
    only_b = [w for w, s in zip(wb, sb, strict=True) if s not in sa]
    if not set(sa) & set(sb) and len(wa) + len(wb) > 2:
        shared = False
    else:
        shared = True
    dotted = {fold(w) for w in re.findall(r"([^\W\d_]+)\.(?!\d)", both)}
    compounds = _compounds(both)
    # Pair the differing words one to one, in order.
    if len(only_a) == len(only_b):
        rules: list[Rule] = []
        for x, y in zip(only_a, only_b, strict=True):
            rule = _word_pair_rule(x, y, x in dotted or y in dotted, kind, compounds)
            if rule is None:
                return "qualifier_differs" if shared or kind == "person" else "unexplained"
            rules.append(rule)
        if rules.count("typo") > 1:
            return "qualifier_differs"  # two slips in one name: more likely two names
        return min(rules, key=lambda r: _PRIOR[r])
    if not only_a:
        extra = only_b
        # Every added word is generic, or a vendor in front: "Apache Kafka", "billing service".
        leading_vendor = all(w in VENDORS for w in extra) and wb[: len(extra)] == extra
        if all(w in GENERIC for w in extra) or leading_vendor:
            return "generic_word"
        if kind == "person" and len(wa) == 1 and wb[0] == wa[0]:
            return "given_name"
        return "qualifier_differs"
    if len(only_a) < len(only_b):
        # Some words differ and some are added: the added ones must all be generic.
        rest = list(only_b)
        for x in only_a:
            match = next((y for y in rest if _word_pair_rule(x, y, x in dotted, kind, compounds) is not None), None)
            if match is None:
                return "qualifier_differs" if shared else "unexplained"
            rest.remove(match)
        return "generic_word" if all(w in GENERIC for w in rest) else "qualifier_differs"
    return "qualifier_differs" if shared else "unexplained"


def _compounds(text: str) -> dict[str, list[str]]:
    """Folded word -> its folded camel-case parts, for words written as compounds (JavaScript, SvelteKit)."""
    out: dict[str, list[str]] = {}
    for word in re.findall(r"[^\W_]+", text):
        parts = [fold(p) for p in _CAMEL.findall(word)]
        if len(parts) > 1:
            out[fold(word)] = parts
    return out


def _word_pair_rule(x: str, y: str, dotted: bool, kind: str, compounds: dict[str, list[str]]) -> Rule | None:
    """How one differing word of each name relates, or None when they are simply different words."""
    short, long = (x, y) if len(x) <= len(y) else (y, x)
    parts = compounds.get(long, [])
    if len(parts) > 1 and parts[0] == short:
        # Java / JavaScript, Svelte / SvelteKit: a word added inside a compound. Generic only (MongoDB).
        return "abbreviation" if all(p in GENERIC for p in parts[1:]) else None
    if kind == "person" and (NICKNAMES.get(x, frozenset()) & {y} or NICKNAMES.get(y, frozenset()) & {x}):
        return "nickname"
    if kind == "person" and len(short) == 1 and long.startswith(short):
        return "initial"
    if _numeronym_of(short, long):
        return "numeronym"
    if _is_abbreviation(short, long, dotted, kind):
        return "abbreviation"
    if x in GENERIC and y in GENERIC:
        return "generic_word"
    if _is_typo(x, y):
        return "typo"
    return None
