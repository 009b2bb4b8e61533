"""The detector on text nobody wrote to test it: every string of the research datasets (conversations,
facts, memories in English and Chinese). Turns of real chats mention instructions, prompts and
rules all the time; almost none address a model reading them."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from echo_memory.libs.core.hygiene.instructions import instruction_reasons

MAX_FLAGGED_SHARE = 0.001


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        if len(value) > 10:
            yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)


def _documents(path: Path) -> Iterator[Any]:
    """A JSON file, or a file of one JSON document per line (MADial-Bench's)."""
    text = path.read_text(encoding="utf-8")
    try:
        yield json.loads(text)
    except json.JSONDecodeError:
        for line in text.splitlines():
            if line.strip():
                yield json.loads(line)


@pytest.mark.datasets
def test_dataset_text_is_almost_never_flagged(datasets: Path) -> None:
    texts: dict[str, None] = {}
    for path in sorted(datasets.rglob("*.json")):
        for document in _documents(path):
            texts.update(dict.fromkeys(_strings(document)))
    assert len(texts) > 10_000  # the folder really held the datasets
    flagged = [(t[:120], instruction_reasons(t)) for t in texts if instruction_reasons(t)]
    share = len(flagged) / len(texts)
    print(f"\ndatasets: {len(flagged)} of {len(texts)} distinct strings flagged instruction_like ({share:.4%})")
    assert share <= MAX_FLAGGED_SHARE, flagged[:20]
