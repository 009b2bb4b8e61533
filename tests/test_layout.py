"""Guards on the test tree itself."""

from collections import Counter
from pathlib import Path


def test_test_modules_have_unique_basenames() -> None:
    # pytest's default (prepend) import mode imports test modules by basename; a duplicate breaks
    # collection of the whole suite.
    names = Counter(p.name for p in Path(__file__).parent.rglob("test_*.py"))
    assert [n for n, c in names.items() if c > 1] == []
