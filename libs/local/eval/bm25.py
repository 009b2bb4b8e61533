"""Plain Okapi BM25 over the same documents and queries a harness gives the system: the baseline.

A gain over this baseline, computed in the same run on the same corpus, is what the system's
dense, graph and fusion parts add beyond matching words. Deliberately plain: lower-cased word
tokens, no stemming, no stop words, Lucene's k1 = 1.2 and b = 0.75. Text without spaces (Chinese,
Japanese, Korean) is split into overlapping character pairs, the usual n-gram treatment, so the
baseline is not empty on such text.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Iterable, Mapping

K1 = 1.2
B = 0.75
_WORD = re.compile(r"[^\W_]+", re.UNICODE)
# CJK ideographs (with extension A and compatibility), kana and Hangul syllables.
_CJK = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\u3040-\u30ff\uac00-\ud7af]+")


def tokens(text: str) -> list[str]:
    """Lower-cased word tokens; each run of CJK characters becomes its character bigrams."""
    out: list[str] = []
    for word in _WORD.findall(text.lower()):
        position = 0
        for run in _CJK.finditer(word):
            out += _latin(word[position : run.start()])
            chars = run.group()
            out += [chars] if len(chars) == 1 else [chars[i : i + 2] for i in range(len(chars) - 1)]
            position = run.end()
        out += _latin(word[position:])
    return out


def _latin(part: str) -> list[str]:
    return [part] if part else []


class BM25:
    """An index over `documents` (id -> text); `rank(query)` gives ids best first."""

    def __init__(self, documents: Mapping[str, str]) -> None:
        self._terms = {ident: Counter(tokens(text)) for ident, text in documents.items()}
        self._length = {ident: sum(counts.values()) for ident, counts in self._terms.items()}
        self._average = (sum(self._length.values()) / len(self._length)) if self._length else 0.0
        df: Counter[str] = Counter()
        for counts in self._terms.values():
            df.update(counts.keys())
        n = len(self._terms)
        self._idf = {term: math.log(1 + (n - f + 0.5) / (f + 0.5)) for term, f in df.items()}

    def scores(self, query: str) -> dict[str, float]:
        """Every document's BM25 score for `query` (documents sharing no term score 0 and are left out)."""
        wanted = set(tokens(query)) & self._idf.keys()
        out: dict[str, float] = {}
        for ident, counts in self._terms.items():
            score = 0.0
            norm = K1 * (1 - B + B * self._length[ident] / self._average) if self._average else K1
            for term in wanted:
                tf = counts.get(term, 0)
                if tf:
                    score += self._idf[term] * tf * (K1 + 1) / (tf + norm)
            if score > 0:
                out[ident] = score
        return out

    def rank(self, query: str, k: int | None = None) -> list[str]:
        """Ids by descending score, ties by id; only documents that share a term with the query."""
        scored = self.scores(query)
        ordered = sorted(scored, key=lambda ident: (-scored[ident], ident))
        return ordered[:k] if k else ordered


def lead(system: Iterable[float], baseline: Iterable[float]) -> dict[str, object]:
    """Mean of the paired differences system − baseline with its 95% bootstrap interval."""
    from echo_memory.libs.local.eval.metrics import bootstrap_ci

    diffs = [a - b for a, b in zip(system, baseline, strict=True)]
    if not diffs:
        return {"mean": 0.0, "ci95": [0.0, 0.0]}
    low, high = bootstrap_ci(diffs, samples=1000)
    return {"mean": round(sum(diffs) / len(diffs), 4), "ci95": [round(low, 4), round(high, 4)]}
