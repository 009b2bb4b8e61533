"""Where the research datasets live: a folder beside the checkout, or ECHO_DATASETS_DIR.

The datasets (agent-facts, LoCoMo, MADial-Bench) are read where they are, never copied into the
repository. The lab and the test suite look for them in `$ECHO_DATASETS_DIR` when it is set, else
in `../shared/datasets` next to the repository; the product itself only reads the paths it is
given.
"""

from __future__ import annotations

import os
from pathlib import Path

ENV = "ECHO_DATASETS_DIR"
REPOSITORY = Path(__file__).resolve().parents[1]
AGENT_FACTS = Path("agent-facts") / "agent-facts.json"
LOCOMO = Path("locomo") / "locomo10.json"
MADIAL = Path("madial_bench")
MEMDAILY = Path("memdaily")


class DatasetMissing(Exception):
    """A dataset file the experiment needs is not where it was looked for."""


def datasets_dir() -> Path:
    """The datasets folder: `$ECHO_DATASETS_DIR` when set (even if it does not exist), else
    `../shared/datasets` beside the repository. Whether it exists is the caller's question."""
    value = os.environ.get(ENV, "").strip()
    return Path(value) if value else REPOSITORY.parent / "shared" / "datasets"


def dataset(relative: Path, given: str | Path | None = None) -> Path:
    """`given` when a path was given, else `relative` inside `datasets_dir()`.

    Raises DatasetMissing, naming the path tried and how to give another, when it does not exist.
    """
    path = Path(given) if given is not None else datasets_dir() / relative
    if not path.exists():
        hint = "" if given is not None else f" (set {ENV} to the folder holding {relative.parts[0]}/)"
        raise DatasetMissing(f"no dataset at {path}{hint}")
    return path
