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
import pytest
from k8s_emulator import ApiServer
from k8s_support import RecordingBackend, closed_schema, eventually, newest_k8s_minors, validate_strict

from echo_memory.operator import OperatorConfig
from echo_memory.operator.manifests import b64, decode_secret

pytestmark = [pytest.mark.kmock(cls=ApiServer), pytest.mark.timeout(60)]

NS = "default"
GROUP_PATH = "/apis/echo-memory.io/v1alpha1/namespaces/default"
SCHEMA = 3
ORGS, SCOPES, AGENTS = ("echo-memory.io/v1alpha1/memoryorgs", "echo-memory.io/v1alpha1/memoryscopes",
                        "echo-memory.io/v1alpha1/memoryagents")
STS, SVC, SECRET, JOB = "apps/v1/statefulsets", "v1/services", "v1/secrets", "batch/v1/jobs"
CLUSTERS = "postgresql.cnpg.io/v1/clusters"
MERGE = {"Content-Type": "application/merge-patch+json"}


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
    """Strict schema check of what actually reached the API server, for the newest two minors."""
    validate_strict(obj, newest_k8s_minors())


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
    # (kopf may run a finalizer twice when a timer is still stopping; finalizers are idempotent)
    assert set(backend.unregistered) == {"acme"} and backend.registered == {}


async def test_cloudnativepg_cluster_when_its_crd_is_installed(cluster: Cluster, operator_factory: Any) -> None:
    backend = RecordingBackend()
    await cluster.install_cnpg_crd()
    await operator_factory(config=config(), backend=backend)
    await cluster.apply_org("beta", {"deletionPolicy": "Delete",
                                     "database": {"instances": 3, "storage": "20Gi", "storageClass": "fast"}})

    pg = await eventually(lambda: cluster.live(CLUSTERS, "beta-db"))
    assert pg["spec"]["instances"] == 3 and pg["spec"]["storage"] == {"size": "20Gi", "storageClass": "fast"}
    initdb = pg["spec"]["bootstrap"]["initdb"]
    assert initdb["database"] == "echo" and initdb["owner"] == "echo"
    assert "CREATE EXTENSION IF NOT EXISTS vector;" in initdb["postInitApplicationSQL"]
    assert any("pg_available_extensions" in sql and "age" in sql for sql in initdb["postInitApplicationSQL"])
    await eventually(lambda: cluster.live(ORGS, "beta")["status"]["provider"] == "CloudNativePG")
    assert cluster.live(STS, "beta-db") is None

    # Play CloudNativePG: it writes the app Secret and reports ready instances.
    uri = "postgresql://echo:pw@beta-db-rw.default.svc:5432/echo"
    await cluster.secret("beta-db-app", {"uri": uri, "host": "beta-db-rw", "port": "5432", "username": "echo",
                                         "password": "pw", "dbname": "echo"})
    await cluster.patch_status(f"/apis/postgresql.cnpg.io/v1/namespaces/{NS}/clusters/beta-db",
                               {"readyInstances": 3, "instances": 3})
    await cluster.migrate("beta")
    assert backend.registered == {"beta": uri}

    # deletionPolicy Delete: the Cluster goes with the org.
    await cluster.delete(f"{GROUP_PATH}/memoryorgs/beta")
    await eventually(lambda: cluster.live(ORGS, "beta") is None)
    assert cluster.live(CLUSTERS, "beta-db") is None and set(backend.unregistered) == {"beta"}


async def test_missing_dependency_is_a_condition_not_a_crash(cluster: Cluster, operator_factory: Any) -> None:
    await operator_factory(config=config(), backend=RecordingBackend())
    await cluster.apply_org("gamma", {"database": {"provider": "CloudNativePG"}})

    degraded = await eventually(lambda: cond(cluster.live(ORGS, "gamma"), "Degraded").get("status") == "True"
                                and cond(cluster.live(ORGS, "gamma"), "Degraded"))
    assert degraded["reason"] == "DependencyMissing"
    db = cond(cluster.live(ORGS, "gamma"), "DatabaseReady")
    assert db["status"] == "False" and "clusters.postgresql.cnpg.io" in db["message"]
    assert cluster.live(ORGS, "gamma")["status"]["phase"] == "Waiting for CloudNativePG"
    assert cond(cluster.live(ORGS, "gamma"), "Ready")["status"] == "False"

    # Installing the dependency later is enough: the next resync creates the Cluster.
    await cluster.install_cnpg_crd()
    await eventually(lambda: cluster.live(CLUSTERS, "gamma-db"))
    await eventually(lambda: cond(cluster.live(ORGS, "gamma"), "DatabaseReady")["reason"] == "Provisioning")


async def test_external_database_is_validated(cluster: Cluster, operator_factory: Any) -> None:
    backend = RecordingBackend()
    await operator_factory(config=config(), backend=backend)
    await cluster.apply_org("delta", {"database": {"provider": "External", "secretRef": {"name": "rds"}}})

    await eventually(lambda: cond(cluster.live(ORGS, "delta"), "DatabaseReady")["reason"] == "SecretMissing")
    await cluster.secret("rds", {"url": "postgresql://x@rds.example:5432/echo"})  # wrong key
    await eventually(lambda: cond(cluster.live(ORGS, "delta"), "DatabaseReady")["reason"] == "SecretInvalid")
    assert "uri" in cond(cluster.live(ORGS, "delta"), "DatabaseReady")["message"]
    async with cluster.http.patch(f"/api/v1/namespaces/{NS}/secrets/rds", headers=MERGE,
                                  json={"data": {"uri": b64("postgresql://x@rds.example:5432/echo")}}) as resp:
        assert resp.status == 200
    job = await cluster.migrate("delta")
    assert job["spec"]["template"]["spec"]["containers"][0]["env"][0]["valueFrom"]["secretKeyRef"] == {
        "name": "rds", "key": "uri"}
    assert backend.registered == {"delta": "postgresql://x@rds.example:5432/echo"}
    assert cluster.live(STS, "delta-db") is None and cluster.live(CLUSTERS, "delta-db") is None

    # Even with deletionPolicy Delete the operator never deletes a Secret it did not create.
    async with cluster.http.patch(f"{GROUP_PATH}/memoryorgs/delta", headers=MERGE,
                                  json={"spec": {"deletionPolicy": "Delete"}}) as resp:
        assert resp.status == 200
    await cluster.delete(f"{GROUP_PATH}/memoryorgs/delta")
    await eventually(lambda: cluster.live(ORGS, "delta") is None)
    assert cluster.live(SECRET, "rds") is not None


async def test_delete_policy_removes_statefulset_data(cluster: Cluster, operator_factory: Any) -> None:
    await operator_factory(config=config(), backend=RecordingBackend())
    await cluster.apply_org("eps", {"deletionPolicy": "Delete"})
    sts = await eventually(lambda: cluster.live(STS, "eps-db"))
    assert sts["spec"]["persistentVolumeClaimRetentionPolicy"]["whenDeleted"] == "Delete"
    await eventually(lambda: cluster.live(SECRET, "eps-db-app") and cluster.live(SVC, "eps-db"))
    await cluster.delete(f"{GROUP_PATH}/memoryorgs/eps")
    await eventually(lambda: cluster.live(ORGS, "eps") is None)
    assert cluster.live(STS, "eps-db") is None
    assert cluster.live(SVC, "eps-db") is None and cluster.live(SECRET, "eps-db-app") is None


async def test_registration_failure_degrades_then_recovers(cluster: Cluster, operator_factory: Any) -> None:
    backend = RecordingBackend()
    backend.fail_register = ConnectionRefusedError("nats down")
    await operator_factory(config=config(), backend=backend)
    await cluster.secret("ext", {"uri": "postgresql://e@db:5432/echo"})
    await cluster.apply_org("zeta", {"database": {"provider": "External", "secretRef": {"name": "ext"}}})
    degraded = await eventually(lambda: cond(cluster.live(ORGS, "zeta"), "Degraded").get("reason")
                                == "RegistrationFailed" and cond(cluster.live(ORGS, "zeta"), "Degraded"))
    assert "ConnectionRefusedError" in degraded["message"]
    # The name is claimed before the database is touched: no migration Job while the bus is down.
    assert cluster.live(JOB, f"zeta-migrate-v{SCHEMA}") is None
    backend.fail_register = None
    job = await eventually(lambda: cluster.live(JOB, f"zeta-migrate-v{SCHEMA}"))
    await cluster.patch_status(f"/apis/batch/v1/namespaces/{NS}/jobs/{job['metadata']['name']}", {"succeeded": 1})
    await eventually(lambda: cond(cluster.live(ORGS, "zeta"), "Ready").get("status") == "True")
    assert backend.registered == {"zeta": "postgresql://e@db:5432/echo"}


async def test_failed_migration_job_is_reported(cluster: Cluster, operator_factory: Any) -> None:
    await operator_factory(config=config(), backend=RecordingBackend())
    await cluster.secret("ext", {"uri": "postgresql://e@db:5432/echo"})
    await cluster.apply_org("eta", {"database": {"provider": "External", "secretRef": {"name": "ext"}}})
    job = await eventually(lambda: cluster.live(JOB, f"eta-migrate-v{SCHEMA}"))
    await cluster.patch_status(f"/apis/batch/v1/namespaces/{NS}/jobs/{job['metadata']['name']}", {
        "failed": 4, "conditions": [{"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded"}]})
    await eventually(lambda: cluster.live(ORGS, "eta")["status"]["phase"] == "Migration failed")
    migrated = cond(cluster.live(ORGS, "eta"), "Migrated")
    assert migrated["reason"] == "MigrationFailed" and "kubectl logs job/eta-migrate-v3" in migrated["message"]


async def test_invalid_spec_is_reported(cluster: Cluster, operator_factory: Any) -> None:
    await operator_factory(config=config(), backend=RecordingBackend())
    await cluster.apply_org("theta", {"database": {"provider": "External"}})  # no secretRef
    ready = await eventually(lambda: cond(cluster.live(ORGS, "theta"), "Ready"))
    assert ready["reason"] == "InvalidSpec" and "secretRef" in ready["message"]
    assert cluster.live(ORGS, "theta")["status"]["phase"] == "Invalid spec"


async def ready_external_org(cluster: Cluster, name: str, uri: str) -> None:
    await cluster.secret(f"{name}-ext", {"uri": uri})
    await cluster.apply_org(name, {"database": {"provider": "External", "secretRef": {"name": f"{name}-ext"}}})
    await cluster.migrate(name)


async def test_scope_and_agent(cluster: Cluster, operator_factory: Any, crds: dict[str, Any]) -> None:
    backend = RecordingBackend()
    await operator_factory(config=config(), backend=backend)
    uri = "postgresql://e@db:5432/echo"
    # Created before the org exists: they wait with a reason, then proceed.
    await cluster.create(f"{GROUP_PATH}/memoryscopes", {
        "metadata": {"name": "team-a"},
        "spec": {"org": "iota", "description": "Team A", "writers": ["ci-bot"], "retentionDays": 30}})
    await cluster.create(f"{GROUP_PATH}/memoryagents", {
        "metadata": {"name": "ci-bot"}, "spec": {"org": "iota", "readScopes": ["team-a", "shared"],
                                                 "writeScopes": ["team-a"]}})
    await eventually(lambda: cond(cluster.live(SCOPES, "team-a"), "Ready")["reason"] == "OrgNotFound")
    await eventually(lambda: cond(cluster.live(AGENTS, "ci-bot"), "Ready")["reason"] == "OrgNotFound")

    await ready_external_org(cluster, "iota", uri)
    await eventually(lambda: cond(cluster.live(SCOPES, "team-a"), "Ready").get("status") == "True")
    assert backend.scopes[(uri, "team-a")] == {"description": "Team A", "readers": [], "writers": ["ci-bot"],
                                               "retention_days": 30}
    scope = cluster.live(SCOPES, "team-a")
    assert scope["status"]["facts"] == 3 and scope["status"]["org"] == "iota"

    secret = await eventually(lambda: cluster.live(SECRET, "ci-bot-token"))
    assert_valid(secret)
    first = decode_secret(secret)
    assert first["token"] == backend.tokens["ci-bot"][0] and first["org"] == "iota"
    agent = cluster.live(AGENTS, "ci-bot")
    assert secret["metadata"]["ownerReferences"][0]["uid"] == agent["metadata"]["uid"]
    await eventually(lambda: cond(cluster.live(AGENTS, "ci-bot"), "Ready").get("status") == "True")
    for kind, obj in (("MemoryScope", cluster.live(SCOPES, "team-a")), ("MemoryAgent", cluster.live(AGENTS, "ci-bot"))):
        schema = crds[kind]["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
        jsonschema.validate({"status": obj["status"]}, closed_schema(schema))

    # A token Secret deleted by hand: the old token is revoked and a new one issued.
    await cluster.delete(f"/api/v1/namespaces/{NS}/secrets/ci-bot-token")
    second = decode_secret(await eventually(lambda: cluster.live(SECRET, "ci-bot-token")))
    assert second["token"] != first["token"] and first["token"] in backend.revoked

    # Changed scopes re-issue the token in place.
    async with cluster.http.patch(f"{GROUP_PATH}/memoryagents/ci-bot", headers=MERGE,
                                  json={"spec": {"writeScopes": ["team-a", "shared"]}}) as resp:
        assert resp.status == 200
    await eventually(lambda: decode_secret(cluster.live(SECRET, "ci-bot-token"))["token"] != second["token"])
    assert second["token"] in backend.revoked and len(backend.tokens["ci-bot"]) == 1

    # Deleting the agent revokes its token and removes the Secret.
    await cluster.delete(f"{GROUP_PATH}/memoryagents/ci-bot")
    await eventually(lambda: cluster.live(AGENTS, "ci-bot") is None)
    assert "ci-bot" not in backend.tokens and cluster.live(SECRET, "ci-bot-token") is None
    # Deleting a scope never deletes facts: no finalizer, nothing asked of the backend.
    await cluster.delete(f"{GROUP_PATH}/memoryscopes/team-a")
    await eventually(lambda: cluster.live(SCOPES, "team-a") is None)
    assert (uri, "team-a") in backend.scopes


async def test_namespaced_mode(cluster: Cluster, operator_factory: Any) -> None:
    """One namespace watched, namespace scanning off (the chart's watchNamespaces setting)."""
    backend = RecordingBackend()
    await operator_factory(config=config(namespaces=(NS,)), backend=backend)
    await ready_external_org(cluster, "kappa", "postgresql://k@db:5432/echo")
    assert backend.registered == {"kappa": "postgresql://k@db:5432/echo"}
