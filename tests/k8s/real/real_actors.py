"""What a real cluster would do around the operator that 1.20 without nodes cannot: the tests do it here.

- the Postgres pod of a StatefulSet org: bound and reported Ready (the real StatefulSet controller then
  counts it), its connection Secret's ``uri`` pointed at a database of the test session's embedded Postgres
  (there is no pod network to reach ``<org>-db.<ns>.svc``);
- CloudNativePG: its CRD installed, a Cluster's ``status.readyInstances`` and ``<cluster>-app`` Secret
  written as that operator would;
- a migration Job: its command run on the host (``echo-memory init-db`` with the Secret-resolved env),
  then its pod reported Succeeded or Failed, so the real Job controller completes the Job.
"""

from __future__ import annotations

import pathlib
from typing import Any

from k8s_support import ROOT
from real_cluster import Client, Kubelet, decode, encode, is_ready, wait_for

from echo_memory.libs.server.store.migrations import CODE_SCHEMA_VERSION

CNPG_CRD = {
    "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
    "metadata": {"name": "clusters.postgresql.cnpg.io"},
    "spec": {"group": "postgresql.cnpg.io", "scope": "Namespaced",
             "names": {"kind": "Cluster", "plural": "clusters", "singular": "cluster", "listKind": "ClusterList"},
             "versions": [{"name": "v1", "served": True, "storage": True, "subresources": {"status": {}},
                           "schema": {"openAPIV3Schema": {"type": "object",
                                                          "x-kubernetes-preserve-unknown-fields": True}}}]}}


class Actors:
    """The kubelet, the pod network and CloudNativePG, played for one namespace."""

    def __init__(self, admin: Client, kubelet: Kubelet, namespace: str, root: pathlib.Path = ROOT) -> None:
        self.admin, self.kubelet, self.ns, self.root = admin, kubelet, namespace, root

    def org(self, name: str) -> dict[str, Any] | None:
        return self.admin.get("MemoryOrg", name, self.ns)

    def install_cnpg(self) -> None:
        if self.admin.get("CustomResourceDefinition", CNPG_CRD["metadata"]["name"]) is None:
            self.admin.create(CNPG_CRD)
        wait_for(lambda: self._served("Cluster"), what="CloudNativePG CRD served")

    def _served(self, kind: str) -> bool:
        try:
            self.admin.list(kind, self.ns)
        except Exception:  # noqa: BLE001 (404 until the CRD is established)
            return False
        return True

    def statefulset_db(self, org_resource: str, database_url: str) -> None:
        """Point the org's connection Secret at ``database_url`` and run its Postgres pod."""
        secret_name = f"{org_resource}-db-app"
        secret = wait_for(lambda: self.admin.get("Secret", secret_name, self.ns), what=f"Secret {secret_name}")
        values = decode(secret)
        if values.get("uri") != database_url:
            self.admin.patch("Secret", secret_name, self.ns, {"data": encode({"uri": database_url})})
        pod = wait_for(lambda: self.admin.get("Pod", f"{org_resource}-db-0", self.ns),
                       what=f"pod {org_resource}-db-0 made by the StatefulSet controller")
        self.kubelet.run(pod)

    def cnpg_db(self, org_resource: str, database_url: str) -> None:
        """Play CloudNativePG for the org's Cluster: its app Secret and one ready instance."""
        cluster = f"{org_resource}-db"
        wait_for(lambda: self.admin.get("Cluster", cluster, self.ns), what=f"Cluster {cluster}")
        if self.admin.get("Secret", f"{cluster}-app", self.ns) is None:
            self.admin.create({"apiVersion": "v1", "kind": "Secret",
                               "metadata": {"name": f"{cluster}-app", "namespace": self.ns},
                               "data": encode({"uri": database_url})})
        self.admin.patch("Cluster", cluster, self.ns, {"status": {"readyInstances": 1}}, sub="status")

    def migrate(self, org_resource: str, version: int = CODE_SCHEMA_VERSION, timeout: float = 60) -> str:
        """Run the org's migration Job for ``version`` on the host; returns its output."""
        job_name = f"{org_resource}-migrate-v{version}"
        job = wait_for(lambda: self.admin.get("Job", job_name, self.ns), timeout=timeout, what=f"Job {job_name}")
        done = self.kubelet.run_job_pod(job, self.root)
        assert done.returncode == 0, done.stdout + done.stderr
        return done.stdout

    def ready(self, kind: str, name: str, timeout: float = 60) -> dict[str, Any]:
        return dict(wait_for(lambda: (lambda o: o if is_ready(o) else None)(self.admin.get(kind, name, self.ns)),
                             timeout=timeout, what=f"{kind} {self.ns}/{name} Ready"))
