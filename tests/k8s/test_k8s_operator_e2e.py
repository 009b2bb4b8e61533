"""The real operator (kopf in a thread) against the emulated API server.

The test plays the controllers Kubernetes would run: it marks StatefulSets,
CloudNativePG Clusters and Jobs ready by patching their ``/status``, and
checks what the operator does in response.  The Echo Memory side is the
in-memory :class:`RecordingBackend`; ``test_k8s_operator_real.py`` repeats the
org/scope/agent flow against real Postgres and NATS.
"""

from __future__ import annotations

from typing import Any

import aiohttp
import jsonschema
import kubernetes_validate
import pytest
from echo_operator import OperatorConfig
from echo_operator.manifests import b64, decode_secret
from k8s_emulator import ApiServer
from k8s_support import RecordingBackend, closed_schema, eventually

pytestmark = [pytest.mark.kmock(cls=ApiServer), pytest.mark.timeout(60)]

NS = "default"
GROUP_PATH = "/apis/echo-memory.io/v1alpha1/namespaces/default"
SCHEMA = 3
ORGS, SCOPES, AGENTS = ("echo-memory.io/v1alpha1/memoryorgs", "echo-memory.io/v1alpha1/memoryscopes",
                        "echo-memory.io/v1alpha1/memoryagents")
STS, SVC, SECRET, JOB = "apps/v1/statefulsets", "v1/services", "v1/secrets", "batch/v1/jobs"
CLUSTERS = "postgresql.cnpg.io/v1/clusters"
MERGE = {"Content-Type": "application/merge-patch+json"}
K8S_VERSION = "1.37.0"


def config(**overrides: Any) -> OperatorConfig:
    return OperatorConfig(**{"image": "registry.example/echo-memory:test", "resync_seconds": 0.3,
                             "schema_version": SCHEMA, "liveness_endpoint": None, **overrides})


def cond(obj: dict[str, Any] | None, type_: str) -> dict[str, Any]:
    for c in ((obj or {}).get("status") or {}).get("conditions") or []:
        if c["type"] == type_:
            return c
    return {}


class Cluster:
    """Talks to the emulated API server the way kubectl and controllers would."""

    def __init__(self, api: ApiServer, http: aiohttp.ClientSession) -> None:
        self.api, self.http = api, http

    async def create(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        async with self.http.post(path, json=body) as resp:
            assert resp.status in (200, 201), await resp.text()
            return dict(await resp.json())

    async def apply_org(self, name: str, spec: dict[str, Any]) -> dict[str, Any]:
        return await self.create(f"{GROUP_PATH}/memoryorgs", {
            "apiVersion": "echo-memory.io/v1alpha1", "kind": "MemoryOrg",
            "metadata": {"name": name, "namespace": NS}, "spec": spec})

    async def patch_status(self, path: str, status: dict[str, Any]) -> None:
        async with self.http.patch(f"{path}/status", json={"status": status}, headers=MERGE) as resp:
            assert resp.status == 200, await resp.text()

    async def delete(self, path: str) -> None:
        async with self.http.delete(path) as resp:
            assert resp.status == 200, await resp.text()

    def live(self, resource: str, name: str) -> dict[str, Any] | None:
        return self.api.live(resource, NS, name)

    async def secret(self, name: str, values: dict[str, str]) -> None:
        await self.create(f"/api/v1/namespaces/{NS}/secrets", {
            "apiVersion": "v1", "kind": "Secret", "metadata": {"name": name, "namespace": NS},
            "data": {k: b64(v) for k, v in values.items()}})

    async def install_cnpg_crd(self) -> None:
        crd = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
               "metadata": {"name": "clusters.postgresql.cnpg.io"},
               "spec": {"group": "postgresql.cnpg.io", "scope": "Namespaced",
                        "names": {"kind": "Cluster", "plural": "clusters", "singular": "cluster"},
                        "versions": [{"name": "v1", "served": True, "storage": True,
                                      "subresources": {"status": {}},
                                      "schema": {"openAPIV3Schema": {"type": "object",
                                                                     "x-kubernetes-preserve-unknown-fields": True}}}]}}
        await self.create("/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd)
        self.api.register_crd(crd)

    async def migrate(self, org: str) -> dict[str, Any]:
        """Play the Job controller: wait for the migration Job, mark it succeeded, wait for Ready."""
        job = await eventually(lambda: self.live(JOB, f"{org}-migrate-v{SCHEMA}"))
        await self.patch_status(f"/apis/batch/v1/namespaces/{NS}/jobs/{job['metadata']['name']}",
                                {"succeeded": 1})
        await eventually(lambda: cond(self.live(ORGS, org), "Ready").get("status") == "True")
        return job


@pytest.fixture()
async def cluster(api: ApiServer) -> Any:
    async with aiohttp.ClientSession(base_url=str(api.url)) as http:
        yield Cluster(api, http)


def assert_valid(obj: dict[str, Any]) -> None:
    """Strict schema check of what actually reached the API server (server-set fields removed)."""
    clean = {**obj, "metadata": {k: v for k, v in obj["metadata"].items()
                                 if k not in ("uid", "resourceVersion", "generation", "creationTimestamp")}}
    kubernetes_validate.validate(clean, K8S_VERSION, strict=True)


async def test_statefulset_org_lifecycle(cluster: Cluster, operator_factory: Any, crds: dict[str, Any]) -> None:
    backend = RecordingBackend()
    await operator_factory(config=config(), backend=backend)
    org = await cluster.apply_org("acme", {"database": {"storage": "5Gi"}})

    # No CloudNativePG CRD: Auto falls back to a StatefulSet, a headless Service and a Secret.
    sts = await eventually(lambda: cluster.live(STS, "acme-db"))
    svc = await eventually(lambda: cluster.live(SVC, "acme-db"))
    secret = await eventually(lambda: cluster.live(SECRET, "acme-db-app"))
    for child in (sts, svc, secret):
        assert_valid(child)
    values = decode_secret(secret)
    assert set(values) == {"uri", "host", "port", "username", "password", "dbname"}
    assert values["uri"].startswith("postgresql://echo:") and values["host"] == "acme-db.default.svc"
    assert sts["spec"]["persistentVolumeClaimRetentionPolicy"]["whenDeleted"] == "Retain"  # Orphan default
    await eventually(lambda: cluster.live(ORGS, "acme")["status"]["phase"] == "Provisioning database")
    status = cluster.live(ORGS, "acme")["status"]
    assert status["provider"] == "StatefulSet" and status["connectionSecret"] == "acme-db-app"
    assert cond(cluster.live(ORGS, "acme"), "DatabaseReady")["status"] == "False"
    assert cluster.live(JOB, f"acme-migrate-v{SCHEMA}") is None  # nothing to migrate before the database is up
    assert "echo-memory.io/cleanup" in cluster.live(ORGS, "acme")["metadata"]["finalizers"]

    # The "kubelet" reports the pod ready -> the migration Job appears, owned by the org.
    await cluster.patch_status(f"/apis/apps/v1/namespaces/{NS}/statefulsets/acme-db", {"readyReplicas": 1})
    job = await eventually(lambda: cluster.live(JOB, f"acme-migrate-v{SCHEMA}"))
    assert_valid(job)
    assert job["metadata"]["ownerReferences"][0]["uid"] == org["metadata"]["uid"]
    env = job["spec"]["template"]["spec"]["containers"][0]["env"][0]
    assert env["valueFrom"]["secretKeyRef"] == {"name": "acme-db-app", "key": "uri"}
    await eventually(lambda: cond(cluster.live(ORGS, "acme"), "Migrated").get("reason") == "Migrating")
    assert "acme" not in backend.registered

    # The Job controller reports success -> Migrated, registered, Ready.
    await cluster.migrate("acme")
    final = cluster.live(ORGS, "acme")
    assert cond(final, "Migrated")["status"] == "True" and cond(final, "DatabaseReady")["status"] == "True"
    assert cond(final, "Degraded")["status"] == "False"
    assert final["status"]["schemaVersion"] == SCHEMA and final["status"]["phase"] == "Ready"
    assert backend.registered == {"acme": values["uri"]}
    # Everything the operator wrote survives the API server's pruning of undeclared status fields.
    schema = crds["MemoryOrg"]["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    jsonschema.validate({"status": final["status"]}, closed_schema(schema))

    # Drift: a StatefulSet deleted by hand comes back at the next resync.
    await cluster.delete(f"/apis/apps/v1/namespaces/{NS}/statefulsets/acme-db")
    assert cluster.live(STS, "acme-db") is None
    await eventually(lambda: cluster.live(STS, "acme-db"))

    # deletionPolicy Orphan: the org goes, its data stays, its routing entry goes.
    await cluster.delete(f"{GROUP_PATH}/memoryorgs/acme")
    await eventually(lambda: cluster.live(ORGS, "acme") is None)
    assert cluster.live(STS, "acme-db") and cluster.live(SECRET, "acme-db-app") and cluster.live(SVC, "acme-db")
    assert backend.unregistered == ["acme"] and backend.registered == {}
