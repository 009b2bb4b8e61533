"""Migrations are numbered without gaps, or each gap is one the migrations package explains."""

from __future__ import annotations

from pathlib import Path

from echo_memory.libs.server.store import migrations
from echo_memory.libs.server.store.migrations import UNSHIPPED_VERSIONS, all_migrations

REPO = Path(__file__).resolve().parents[2]


def test_every_gap_in_the_numbering_is_explained() -> None:
    versions = [m.version for m in all_migrations()]
    assert versions == sorted(set(versions)), "two migrations share a number"
    gaps = set(range(1, versions[-1] + 1)) - set(versions)
    assert gaps == UNSHIPPED_VERSIONS, f"unexplained gaps {sorted(gaps - UNSHIPPED_VERSIONS)}, " \
        f"or numbers listed as unshipped that now ship {sorted(UNSHIPPED_VERSIONS - gaps)}"


def test_the_package_and_the_operations_guide_name_each_gap() -> None:
    doc = migrations.__doc__ or ""
    guide = (REPO / "docs" / "operations.md").read_text()
    for version in UNSHIPPED_VERSIONS:
        assert f"{version:04d}" in doc and f"{version:04d}" in guide, version
