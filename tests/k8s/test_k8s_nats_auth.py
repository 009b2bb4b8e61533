"""The chart's NATS token: stable across `helm template` renders (GitOps), never silently regenerated.

Rendered by the real helm binary (conftest.py) from the chart without its NATS dependency
(k8s_support.strip_dependencies); `helm template` has no cluster, so `lookup` finds nothing.
"""

from __future__ import annotations

import base64
import pathlib
import subprocess
from typing import Any

import pytest
import yaml
from k8s_support import CHART, strip_dependencies


@pytest.fixture(scope="module")
def chart(tmp_path_factory: pytest.TempPathFactory) -> pathlib.Path:
    return strip_dependencies(CHART, tmp_path_factory.mktemp("nats-auth") / "echo-memory")


def _template(helm_bin: pathlib.Path, chart: pathlib.Path, *sets: str, release: str = "rel",
              namespace: str = "memsys") -> subprocess.CompletedProcess[str]:
    args = [str(helm_bin), "template", release, str(chart), "-n", namespace]
    for value in sets:
        args += ["--set", value]
    return subprocess.run(args, capture_output=True, text=True, timeout=60)


def _token(out: subprocess.CompletedProcess[str]) -> str:
    assert out.returncode == 0, out.stderr
    docs: list[dict[str, Any]] = [d for d in yaml.safe_load_all(out.stdout) if d]
    (secret,) = [d for d in docs if d["kind"] == "Secret" and d["metadata"]["name"] == "echo-memory-nats-auth"]
    return base64.b64decode(secret["data"]["token"]).decode()


def test_a_seed_gives_the_same_token_on_every_render(helm_bin: pathlib.Path, chart: pathlib.Path) -> None:
    first = _token(_template(helm_bin, chart, "natsAuth.seed=s3cret-from-the-vault"))
    again = _token(_template(helm_bin, chart, "natsAuth.seed=s3cret-from-the-vault"))
    assert first == again and len(first) == 64
    assert _token(_template(helm_bin, chart, "natsAuth.seed=another")) != first
    assert _token(_template(helm_bin, chart, "natsAuth.seed=s3cret-from-the-vault", release="other")) != first
    assert "s3cret" not in first


def test_a_fixed_token_wins_over_the_seed(helm_bin: pathlib.Path, chart: pathlib.Path) -> None:
    assert _token(_template(helm_bin, chart, "natsAuth.token=fixed-token-123", "natsAuth.seed=x")) == "fixed-token-123"


def test_rendering_without_a_cluster_and_without_a_seed_fails_instead_of_rotating(
    helm_bin: pathlib.Path, chart: pathlib.Path
) -> None:
    out = _template(helm_bin, chart)
    assert out.returncode != 0
    assert "natsAuth.seed" in out.stderr and "natsAuth.create=false" in out.stderr


def test_an_own_secret_needs_nothing_generated(helm_bin: pathlib.Path, chart: pathlib.Path) -> None:
    out = _template(helm_bin, chart, "natsAuth.create=false")
    assert out.returncode == 0, out.stderr
    docs = [d for d in yaml.safe_load_all(out.stdout) if d]
    assert not [d for d in docs if d["kind"] == "Secret" and d["metadata"]["name"] == "echo-memory-nats-auth"]
    env = next(d for d in docs if d["kind"] == "Deployment")["spec"]["template"]["spec"]["containers"][0]["env"]
    assert {"name": "NATS_TOKEN", "valueFrom": {"secretKeyRef": {"name": "echo-memory-nats-auth", "key": "token"}}} in env
