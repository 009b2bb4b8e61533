"""`helm install`, then `helm upgrade`, of charts/echo-memory against the real API server, hooks and all.

helm 4 waits for hook Jobs and nothing else by default (``--wait=hookOnly``), which fits a cluster
without a kubelet: the Deployments are created and their pods stay Pending, while the
pre-install/pre-upgrade migration Job for the default org runs to completion because the test plays
the kubelet for it (its command run on the host with the pod's Secret-resolved env against the
session's Postgres, then its pod reported Succeeded or Failed, so the real Job controller completes
it and helm goes on).  The install plays the previous release's image (one migration behind); the
upgrade is the next chart version (new appVersion, so a new image tag, and one more CRD field).
"""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import uuid
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
import yaml
from k8s_support import CHART, ROOT
from real_cluster import HERE, Client, ControlPlane, Kubelet, chart_crds, copy_chart, decode, encode, wait_for

from echo_memory.libs.server.store import admin as store_admin
from echo_memory.libs.server.store.migrations import CODE_SCHEMA_VERSION, all_migrations

pytestmark = [pytest.mark.timeout(300)]

RELEASE = "echo-memory"  # contains the chart's name, so every object is named echo-memory-<part>
EDGE_NATS_SECRET = "echo-memory-nats-auth-edge"  # one NATS user per component: the edge's credential
HOOK_JOB = f"{RELEASE}-migrate"
SERVICES = ("edge", "writes", "retrieval", "causal", "audit", "reindex", "consolidation")
NEW_FIELD = "displayName"  # the MemoryOrg spec field the next chart version adds
HELM_SECONDS = 120  # helm's own bound on each hook Job


class Helm:
    """The chart tests' helm binary with an admin kubeconfig and its own config/cache dirs."""

    def __init__(self, binary: pathlib.Path, kubeconfig: pathlib.Path, home: pathlib.Path, namespace: str) -> None:
        self.binary, self.namespace = binary, namespace
        self.env = {"PATH": os.environ["PATH"], "HOME": str(home), "KUBECONFIG": str(kubeconfig),
                    "HELM_CONFIG_HOME": str(home / "config"), "HELM_CACHE_HOME": str(home / "cache"),
                    "HELM_DATA_HOME": str(home / "data")}

    def start(self, *args: str) -> subprocess.Popen[str]:
        """An install or upgrade, in the background (it waits for its hook Jobs)."""
        # The CRDs carry CEL rules (x-kubernetes-validations), a field Kubernetes 1.20's schema lacks: helm's
        # check against the server's OpenAPI and a server-side apply both refuse it there, while a plain
        # (client-side) apply is accepted and the server drops the field. On 1.27+ neither flag is needed.
        args = (*args, "--disable-openapi-validation", "--server-side=false", "--timeout", f"{HELM_SECONDS}s")
        return subprocess.Popen([str(self.binary), *args, "-n", self.namespace], env=self.env, text=True,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)

    def run(self, *args: str) -> str:
        done = subprocess.run([str(self.binary), *args, "-n", self.namespace], env=self.env, text=True,
                              capture_output=True, timeout=60, check=False)
        assert done.returncode == 0, f"helm {' '.join(args)}: {done.stderr}"
        return done.stdout

    def status(self) -> dict[str, Any]:
        return dict(json.loads(self.run("status", RELEASE, "-o", "json")))


def finished(proc: subprocess.Popen[str], what: str) -> tuple[int, str, str]:
    try:
        out, err = proc.communicate(timeout=HELM_SECONDS + 30)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        raise AssertionError(f"{what} did not finish within {HELM_SECONDS + 30}s: {err[-2000:]}") from None
    return proc.returncode, out, err


def hook_job(admin: Client, namespace: str, proc: subprocess.Popen[str], what: str) -> dict[str, Any]:
    """The migration hook Job once helm has created it (an AssertionError with helm's output if helm stops)."""

    def check() -> dict[str, Any] | None:
        job = admin.get("Job", HOOK_JOB, namespace)
        if job is None and proc.poll() is not None:
            out, err = proc.communicate()
            raise AssertionError(f"{what} ended ({proc.returncode}) before creating its hook Job:\n{out}\n{err}")
        return job

    return dict(wait_for(check, timeout=90, what=f"hook Job {HOOK_JOB} of {what}"))


def images(admin: Client, namespace: str) -> dict[str, str]:
    """Each Deployment of the release and the image its pods run."""
    return {d["metadata"]["name"]: d["spec"]["template"]["spec"]["containers"][0]["image"]
            for d in admin.list("Deployment", namespace, f"app.kubernetes.io/instance={RELEASE}")}


def next_chart(dest: pathlib.Path) -> pathlib.Path:
    """The chart as its next version: appVersion (so the image tag) bumped and a new MemoryOrg spec field."""
    chart = copy_chart(CHART, dest)
    meta = yaml.safe_load((chart / "Chart.yaml").read_text())
    meta["version"], meta["appVersion"] = "0.1.1", "0.1.1"
    (chart / "Chart.yaml").write_text(yaml.safe_dump(meta, sort_keys=False))
    crd_path = chart / "files" / "crds" / "memoryorgs.yaml"
    crd = yaml.safe_load(crd_path.read_text())
    spec = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    spec["properties"][NEW_FIELD] = {"type": "string", "description": "A name for people (added in 0.1.1)."}
    crd_path.write_text(yaml.safe_dump(crd, sort_keys=False))
    return chart


def release_values(path: pathlib.Path, db_secret: str, **extra: Any) -> pathlib.Path:
    """Values for a cluster of Kubernetes 1.20: no autoscaling/v2 HPAs and no policy/v1 PDBs there."""
    values: dict[str, Any] = {
        "services": {name: {"autoscaling": {"enabled": False}, "pdb": {"enabled": False}} for name in SERVICES},
        "defaultDatabase": {"existingSecret": db_secret},
        "migrations": {"backoffLimit": 0},  # one failed pod fails the hook (the kubelet here never retries)
        **extra}
    path.write_text(yaml.safe_dump(values))
    return path


def memoryorg_crd(admin: Client) -> dict[str, Any]:
    return admin.get("CustomResourceDefinition", "memoryorgs.echo-memory.io") or {}


def org_spec_fields(crd: dict[str, Any]) -> set[str]:
    return set(crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"])


@pytest.fixture()
def crds_restored(admin: Client, crds_applied: list[str], real_chart: pathlib.Path, helm_bin: pathlib.Path,
                  tmp_path: pathlib.Path) -> Iterator[None]:
    """The session's CRDs before the release adopts them, put back as they were afterwards."""
    originals = chart_crds(real_chart, helm_bin, tmp_path)
    yield
    for doc in originals:
        admin.apply(doc)


async def test_helm_install_then_upgrade_runs_the_migration_hook_before_the_services_roll(
    control_plane: ControlPlane, admin: Client, kubelet: Kubelet, namespace: str, helm_bin: pathlib.Path,
    real_chart: pathlib.Path, empty_database_url: str, pg: Any, tmp_path: pathlib.Path, crds_applied: list[str],
    crds_restored: None,
) -> None:
    helm = Helm(helm_bin, control_plane.kubeconfig(control_plane.token, tmp_path / "admin.kubeconfig", namespace),
                tmp_path / "helm", namespace)
    admin.create({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "default-db", "namespace": namespace},
                  "data": encode({"uri": empty_database_url})})
    values = release_values(tmp_path / "values.yaml", "default-db")

    # The CRDs are already on this server (the session applied them): let Helm adopt them as
    # docs/kubernetes.md says (the managed-by label and the release annotations), or the install refuses.
    for crd_name in crds_applied:
        admin.patch("CustomResourceDefinition", crd_name, None, {"metadata": {
            "labels": {"app.kubernetes.io/managed-by": "Helm"},
            "annotations": {"meta.helm.sh/release-name": RELEASE, "meta.helm.sh/release-namespace": namespace}}})

    # Install: the hook migrates before any object of the release exists.
    install = helm.start("install", RELEASE, str(real_chart), "-f", str(values))
    job = hook_job(admin, namespace, install, "helm install")
    assert images(admin, namespace) == {}, "a Deployment exists before the pre-install hook ran"
    assert job["spec"]["template"]["spec"]["containers"][0]["command"] == ["echo-memory", "init-db"]
    ran = kubelet.run_job_pod(job, ROOT, cli=[str(HERE / "previous_image_cli.py")])
    assert ran.returncode == 0, ran.stdout + ran.stderr
    code, _, err = finished(install, "helm install")
    assert code == 0, err
    previous = all_migrations()[-2].version
    assert store_admin.schema_version(empty_database_url) == previous
    assert admin.get("Job", HOOK_JOB, namespace) is None, "hook-succeeded: the finished hook Job is deleted"
    installed = images(admin, namespace)
    assert set(installed) == {f"{RELEASE}-{name}" for name in (*SERVICES, "operator")}, installed
    assert set(installed.values()) == {"localhost/echo-memory:0.1.0"}, installed
    status = helm.status()
    assert (status["version"], status["info"]["status"]) == (1, "deployed"), status["info"]
    crd = memoryorg_crd(admin)
    assert crd["metadata"]["annotations"]["meta.helm.sh/release-name"] == RELEASE
    assert crd["metadata"]["annotations"]["helm.sh/resource-policy"] == "keep"
    assert NEW_FIELD not in org_spec_fields(crd)
    nats_password = decode(admin.get("Secret", EDGE_NATS_SECRET, namespace) or {})["password"]
    assert len(nats_password) == 40  # generated on a first install with cluster access

    # A MemoryOrg made under the old CRD: the field 0.1.1 adds is pruned by the server until then.
    admin.create({"apiVersion": "echo-memory.io/v1alpha1", "kind": "MemoryOrg",
                  "metadata": {"name": "kept", "namespace": namespace},
                  "spec": {"database": {"provider": "External", "secretRef": {"name": "default-db"}},
                           NEW_FIELD: "Kept across the upgrade"}})
    assert NEW_FIELD not in (admin.get("MemoryOrg", "kept", namespace) or {})["spec"]

    # Upgrade to 0.1.1: the pre-upgrade hook runs this code's init-db while every Deployment still runs
    # the old image, and only after it succeeded do the Deployments move to the new tag.
    upgrade = helm.start("upgrade", RELEASE, str(next_chart(tmp_path / "next" / "echo-memory")), "-f", str(values))
    job = hook_job(admin, namespace, upgrade, "helm upgrade")
    assert images(admin, namespace) == installed, "a Deployment rolled before the pre-upgrade hook ran"
    assert store_admin.schema_version(empty_database_url) == previous
    ran = kubelet.run_job_pod(job, ROOT)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert f"applied {all_migrations()[-1].name}" in ran.stdout, ran.stdout
    code, _, err = finished(upgrade, "helm upgrade")
    assert code == 0, err
    assert store_admin.schema_version(empty_database_url) == CODE_SCHEMA_VERSION
    upgraded = images(admin, namespace)
    assert upgraded == {name: "localhost/echo-memory:0.1.1" for name in installed}, upgraded
    assert admin.get("Job", HOOK_JOB, namespace) is None
    status = helm.status()
    assert (status["version"], status["info"]["status"]) == (2, "deployed"), status["info"]
    history = json.loads(helm.run("history", RELEASE, "-o", "json"))
    assert [(h["revision"], h["status"]) for h in history] == [(1, "superseded"), (2, "deployed")], history
    # The CRD is a template: upgraded with the release. The MemoryOrg made before is still there and
    # now keeps the new field; the NATS passwords (looked up in the cluster) did not rotate.
    assert NEW_FIELD in org_spec_fields(memoryorg_crd(admin))
    admin.patch("MemoryOrg", "kept", namespace, {"spec": {NEW_FIELD: "Kept across the upgrade"}})
    assert (admin.get("MemoryOrg", "kept", namespace) or {})["spec"][NEW_FIELD] == "Kept across the upgrade"
    assert decode(admin.get("Secret", EDGE_NATS_SECRET, namespace) or {})["password"] == nats_password

    # A failing migration fails the upgrade and leaves the services where they were.
    broken = "x_missing_" + uuid.uuid4().hex[:6]
    admin.create({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "broken-db", "namespace": namespace},
                  "data": encode({"uri": pg.admin_url(broken)})})
    failing = helm.start("upgrade", RELEASE, str(next_chart(tmp_path / "next2" / "echo-memory")), "-f",
                         str(release_values(tmp_path / "broken.yaml", "broken-db")), "--set", "image.tag=0.1.2")
    job = hook_job(admin, namespace, failing, "the failing helm upgrade")
    ran = kubelet.run_job_pod(job, ROOT)
    assert ran.returncode == 1 and "cannot use the database" in ran.stderr, ran.stdout + ran.stderr
    code, _, err = finished(failing, "the failing helm upgrade")
    assert code != 0 and HOOK_JOB in err, err
    assert images(admin, namespace) == upgraded, "a Deployment rolled although the migration failed"
    assert admin.get("Job", HOOK_JOB, namespace) is not None, "a failed hook Job stays for `kubectl logs`"
    assert helm.status()["info"]["status"] == "failed"

    # Uninstall: the keep policy leaves the CRDs (and so every MemoryOrg) and the NATS credential Secrets.
    helm.run("uninstall", RELEASE)
    assert images(admin, namespace) == {}
    assert memoryorg_crd(admin), "the CRD went with the release"
    assert admin.get("MemoryOrg", "kept", namespace) is not None
    assert admin.get("Secret", "echo-memory-nats-auth", namespace) is not None
    assert admin.get("Secret", EDGE_NATS_SECRET, namespace) is not None
    # No operator ran here (its pod stays Pending): gone at once, so the next test's operator never sees it.
    admin.delete("MemoryOrg", "kept", namespace)
    wait_for(lambda: admin.get("MemoryOrg", "kept", namespace) is None, timeout=30, what="MemoryOrg kept deleted")
    with psycopg.connect(pg.dsn) as conn:  # the failing upgrade created nothing
        assert conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (broken,)).fetchone() is None
