"""The distribution installs exactly one import package, `echo_memory`, with its data files.

`libs` and `services` are common names on the package index; a wheel that installed them at the
top level could collide with unrelated packages in any environment.
"""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_wheel_installs_one_top_level_package_with_its_data(tmp_path: Path) -> None:
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "--disable-pip-version-check",
                    "-w", str(tmp_path), str(ROOT)], check=True, capture_output=True, timeout=240)
    (wheel,) = tmp_path.glob("echo_mem-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    top = {name.split("/")[0] for name in names if not name.split("/")[0].endswith(".dist-info")}
    assert top == {"echo_memory"}
    files = set(names)
    # Every layer and service is inside, with the files read at run time (migrations, SQL, the
    # tokenizer, the dashboard's page, the skill) and the operator.
    for expected in ("echo_memory/libs/core/contracts/verbs.py", "echo_memory/libs/server/store/migrations/0001_schema_v1.sql",
                     "echo_memory/libs/server/embed/minilm-tokenizer.json", "echo_memory/services/writes/entity_pairs.tsv",
                     "echo_memory/services/dashboard/static/index.html", "echo_memory/operator/handlers.py",
                     "echo_memory/libs/local/cli/main.py", "echo_memory/libs/testing/tiers.py"):
        assert expected in files, expected
    assert not any(name.startswith(("echo_memory/lab", "lab/", "tests/")) for name in names)
