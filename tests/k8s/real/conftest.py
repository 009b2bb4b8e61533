"""Fixtures of the real API-server tier: one control plane per session, the operator as the chart deploys it.

Every test here is marked ``k8s_real``.  The control plane is Kubernetes 1.20.2 (see real_cluster.py)
with ``OwnerReferencesPermissionEnforcement`` on, as OpenShift runs it.  The operator runs as its own
process (``python -m echo_memory.operator``) with the environment the chart's Deployment renders and a
service-account token (TokenRequest) bound to exactly the chart's rendered Role/ClusterRole.
"""

from __future__ import annotations

import os
import pathlib
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from k8s_support import CHART, ROOT
from real_cluster import RELEASE_NS, Client, ControlPlane, Kubelet, chart_crds, copy_chart, render_chart, wait_for


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    here = pathlib.Path(__file__).parent
    for item in items:
        if here in pathlib.Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.k8s_real)


@pytest.fixture(scope="session")
def control_plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    plane = ControlPlane(tmp_path_factory.mktemp("k8s-real"),
                         apiserver_flags=["--enable-admission-plugins=OwnerReferencesPermissionEnforcement"])
    try:
        plane.start()
        admin = plane.admin()
        admin.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": RELEASE_NS}})
        wait_for(lambda: admin.get("ServiceAccount", "default", "default"), timeout=60,
                 what="the default ServiceAccount (the controller manager is up)")
        print(f"\nk8s-real: control plane up in {plane.started_seconds:.1f} s", file=sys.stderr)
        yield plane
    finally:
        plane.stop()


@pytest.fixture(scope="session")
def admin(control_plane: ControlPlane) -> Client:
    return control_plane.admin()


@pytest.fixture(scope="session")
def kubelet(admin: Client) -> Kubelet:
    return Kubelet(admin)


@pytest.fixture(scope="session")
def real_chart(tmp_path_factory: pytest.TempPathFactory) -> pathlib.Path:
    return copy_chart(CHART, tmp_path_factory.mktemp("real-chart") / "echo-memory")


@pytest.fixture(scope="session")
def crds_applied(admin: Client, real_chart: pathlib.Path, helm_bin: pathlib.Path,
                 tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    """The chart's CRDs on the server, Established (what `helm install` applies first)."""
    names = []
    for doc in chart_crds(real_chart, helm_bin, tmp_path_factory.mktemp("crd-values")):
        admin.apply(doc)
        names.append(doc["metadata"]["name"])
    for name in names:
        wait_for(lambda name=name: any(c["type"] == "Established" and c["status"] == "True"
                                       for c in (admin.get("CustomResourceDefinition", name) or {})
                                       .get("status", {}).get("conditions", [])), what=f"CRD {name} Established")
    return names


@pytest.fixture()
def namespace(admin: Client) -> Iterator[str]:
    """A fresh namespace for one test (deleted afterwards)."""
    name = "t-" + uuid.uuid4().hex[:8]
    admin.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
    yield name
    admin.delete("Namespace", name)


class OperatorProcess:
    """``python -m echo_memory.operator`` with the chart's env and a token of the chart's operator ServiceAccount."""

    def __init__(self, env: dict[str, str], work: pathlib.Path, username: str) -> None:
        self.env, self.work, self.username = env, work, username
        self.log_path = work / "operator.log"
        self.proc: subprocess.Popen[bytes] | None = None
        self.release = ""

    def start(self) -> None:
        log = open(self.log_path, "ab")  # noqa: SIM115 (the child keeps it open)
        self.proc = subprocess.Popen([sys.executable, "-m", "echo_memory.operator"], env=self.env, stdout=log,
                                     stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
        time.sleep(0.5)
        if self.proc.poll() is not None:
            raise RuntimeError(f"operator exited at once:\n{self.log()}")

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(5)


def resolve_env(container: dict[str, Any], overrides: dict[str, str]) -> dict[str, str]:
    """The container's env as the kubelet would give it, for the values these tests can honour."""
    env: dict[str, str] = {}
    for var in container.get("env") or []:
        if "value" in var:
            env[var["name"]] = var["value"]
        elif var.get("valueFrom", {}).get("fieldRef", {}).get("fieldPath") == "metadata.namespace":
            env[var["name"]] = RELEASE_NS
    env.update(overrides)
    return env


@pytest.fixture()
def operator_factory(control_plane: ControlPlane, admin: Client, crds_applied: list[str], helm_bin: pathlib.Path,
                     real_chart: pathlib.Path, tmp_path: pathlib.Path,
                     nats_url: str) -> Iterator[Callable[..., OperatorProcess]]:
    """``start(values=..., nats_url=...)``: render the chart, apply its operator RBAC, run the operator."""
    started: list[tuple[OperatorProcess, list[dict[str, Any]]]] = []

    def start(values: dict[str, Any] | None = None, *, nats: str | None = None,
              release: str | None = None) -> OperatorProcess:
        release = release or "r" + uuid.uuid4().hex[:6]
        values = {"operator": {"resyncSeconds": 1}, **(values or {})}
        values["operator"] = {"resyncSeconds": 1, **values["operator"]}
        docs = render_chart(helm_bin, real_chart, release, RELEASE_NS, values, tmp_path)
        # The operator's ServiceAccount, its RBAC, and the org-credentials Secret it writes: as rendered.
        rbac = [d for d in docs if d["kind"] in ("ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role",
                                                  "RoleBinding", "Secret")
                and d["metadata"].get("labels", {}).get("app.kubernetes.io/component") == "operator"]
        for doc in rbac:
            admin.apply(doc)
        deployment = next(d for d in docs if d["kind"] == "Deployment"
                          and d["metadata"]["labels"].get("app.kubernetes.io/component") == "operator")
        pod = deployment["spec"]["template"]["spec"]
        sa = pod["serviceAccountName"]
        token = admin.service_account_token(RELEASE_NS, sa)
        work = tmp_path / release
        work.mkdir()
        kubeconfig = control_plane.kubeconfig(token, work / "kubeconfig", RELEASE_NS)
        env = resolve_env(pod["containers"][0], {
            "ECHO_MEMORY_NATS_URL": nats or nats_url, "ECHO_OPERATOR_LIVENESS": "", "KUBECONFIG": str(kubeconfig),
            "PATH": os.environ["PATH"], "HOME": str(work),
            "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "operator")])})
        op = OperatorProcess(env, work, f"system:serviceaccount:{RELEASE_NS}:{sa}")
        op.release = release
        op.start()
        started.append((op, rbac))
        return op

    yield start
    for op, rbac in started:
        op.stop()
        for doc in rbac:
            admin.delete(doc["kind"], doc["metadata"]["name"], doc["metadata"].get("namespace"))
