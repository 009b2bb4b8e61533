"""Which stored sentences state a cause: a small fixed list of connectives, not a model.

`infer-causal-hints` sends a fact's sentence to the user's model only when `causal_connective`
finds one of these in it, so a sentence without one never leaves the machine. The list is meant
to over-select a little ("after" is often only temporal): the model then declines, or quotes.
"""

from __future__ import annotations

import re

CONNECTIVES: tuple[str, ...] = (
    "because", "due to", "owing to", "thanks to", "as a result", "as a consequence", "consequently",
    "therefore", "hence", "thus", "so that", "in order to", "which is why", "that is why", "that's why",
    "caused", "causes", "causing", "led to", "leads to", "lead to", "leading to", "resulted in",
    "results in", "result of", "resulting in", "triggered", "triggers", "prevented", "prevents",
    "blocked by", "blocks", "enabled", "enables", "made possible", "after", "since",
)
# Longest first, so "due to" is reported rather than a shorter connective inside it; whole words only.
_PATTERN = re.compile(
    r"\b(" + "|".join(re.escape(c).replace(r"\ ", r"\s+") for c in sorted(CONNECTIVES, key=len, reverse=True)) + r")\b",
    re.IGNORECASE,
)


def causal_connective(sentence: str) -> str | None:
    """The first causal connective in `sentence`, lower-cased (e.g. "due to"); None when it has none."""
    found = _PATTERN.search(sentence)
    return " ".join(found.group(1).lower().split()) if found else None
