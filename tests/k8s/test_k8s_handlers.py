"""Handlers and builders as plain functions: no API server, a fake at our own ``Kube`` seam.

Every manifest a handler sends is validated with kubernetes-validate in strict
mode for the two newest Kubernetes minors it ships.
"""

from __future__ import annotations

import logging
from typing import Any

import kopf
import pytest
from k8s_support import FakeKube, RecordingBackend, newest_k8s_minors, validate_strict

from echo_memory.operator import OperatorConfig, conditions, handlers
from echo_memory.operator.context import Context
from echo_memory.operator.manifests import (
    b64,
    build_cnpg_cluster,
    build_connection_secret,
    build_db_service,
    build_db_statefulset,
    build_migration_job,
    build_token_secret,
    decode_secret,
)
from echo_memory.operator.specs import InvalidSpec, parse_agent, parse_org, parse_scope

VERSIONS = newest_k8s_minors()


@pytest.fixture(autouse=True)
def _bodies_exist(monkeypatch: pytest.MonkeyPatch) -> None:
    """The handlers here get bodies that FakeKube does not store: treat them as live (the real tier checks it)."""

    async def still_there(ctx: Any, body: Any) -> bool:
        return not body["metadata"].get("deletionTimestamp")

    monkeypatch.setattr(handlers, "_still_there", still_there)


def org_body(name: str = "acme", spec: dict[str, Any] | None = None, status: dict[str, Any] | None = None,
             kind: str = "MemoryOrg") -> kopf.Body:
    return kopf.Body({"apiVersion": "echo-memory.io/v1alpha1", "kind": kind,
                      "metadata": {"name": name, "namespace": "ns1", "uid": f"uid-{name}", "generation": 2},
                      "spec": spec or {}, "status": status or {}})


@pytest.fixture()
def memo() -> kopf.Memo:
    config = OperatorConfig(image="registry.example/echo:1", schema_version=4, liveness_endpoint=None)
    return kopf.Memo(ctx=Context(kube=FakeKube(), backend=RecordingBackend(), config=config))  # type: ignore[arg-type]


@pytest.fixture(autouse=True)
def events(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    posted: list[dict[str, Any]] = []
    monkeypatch.setattr(kopf, "info", lambda body, **kw: posted.append({"type": "Normal", **kw}))
    monkeypatch.setattr(kopf, "warn", lambda body, **kw: posted.append({"type": "Warning", **kw}))
    return posted


def test_builders_produce_strictly_valid_manifests() -> None:
    manifests = [
        build_connection_secret(org_resource="acme", namespace="ns1", password="p@ss/word"),
        build_db_service(org_resource="acme", namespace="ns1"),
        build_db_statefulset(org_resource="acme", namespace="ns1", image="pgvector/pgvector:pg17",
                             storage="5Gi", storage_class="fast", delete_volumes_with_set=False),
        build_db_statefulset(org_resource="acme", namespace="ns1", image="pg", storage="1Gi",
                             storage_class=None, delete_volumes_with_set=True),
        build_migration_job(org_resource="acme", namespace="ns1", schema_version=7, image="img:1",
                            image_pull_policy="Always", secret_name="acme-db-app", secret_key="uri"),
        build_token_secret(agent_resource="bot", secret_name="bot-token", namespace="ns1", org="acme",
                           agent_id="bot", token="t0k", spec_hash="abc"),
    ]
    for manifest in manifests:
        validate_strict(manifest, VERSIONS)
    uri = decode_secret(manifests[0])["uri"]
    assert uri == "postgresql://echo:p%40ss%2Fword@acme-db.ns1.svc:5432/echo"  # password is URL-quoted


def test_validation_is_strict_enough_to_catch_a_typo() -> None:
    """Guard for the test above: a misspelt field must fail, or the check proves nothing."""
    import kubernetes_validate

    job = build_migration_job(org_resource="a", namespace="n", schema_version=1, image="i",
                              image_pull_policy="Always", secret_name="s", secret_key="uri")
    job["spec"]["template"]["spec"]["containers"][0]["imagePulPolicy"] = "Always"
    with pytest.raises(kubernetes_validate.ValidationError):
        validate_strict(job, VERSIONS)


def test_cnpg_cluster_bootstraps_vector_and_optional_age() -> None:
    cluster = build_cnpg_cluster(org_resource="acme", namespace="ns1", instances=2, storage="3Gi",
                                 storage_class=None, image="ghcr.io/echo-memory/postgres:17")
    assert cluster["apiVersion"] == "postgresql.cnpg.io/v1" and cluster["metadata"]["name"] == "acme-db"
    assert cluster["spec"]["storage"] == {"size": "3Gi"} and cluster["spec"]["instances"] == 2
    sql = " ".join(cluster["spec"]["bootstrap"]["initdb"]["postInitApplicationSQL"])
    assert "CREATE EXTENSION IF NOT EXISTS vector" in sql
    assert "IF EXISTS (SELECT 1 FROM pg_available_extensions WHERE name = 'age')" in sql


@pytest.mark.parametrize(("spec", "message"), [
    ({"database": {"provider": "Mongo"}}, "provider"),
    ({"database": {"provider": "External"}}, "secretRef"),
    ({"database": {"instances": 0}}, "instances"),
    ({"database": {"storage": "lots"}}, "storage"),
    ({"deletionPolicy": "Shred"}, "deletionPolicy"),
    ({"orgName": "Not_A_Label"}, "orgName"),
])
def test_invalid_org_specs_name_the_field(spec: dict[str, Any], message: str) -> None:
    with pytest.raises(InvalidSpec, match=message):
        parse_org("acme", spec)


def test_spec_defaults() -> None:
    org = parse_org("acme", {})
    assert (org.org, org.provider, org.instances, org.storage, org.deletion_policy) == (
        "acme", "Auto", 1, "10Gi", "Orphan")
    assert parse_scope("team-a", {"org": "acme"}).scope == "team-a"
    assert parse_agent("bot", {"org": "acme"}).agent_id == "bot"
    with pytest.raises(InvalidSpec, match="spec.org"):
        parse_agent("bot", {})
    with pytest.raises(InvalidSpec, match="retentionDays"):
        parse_scope("s", {"org": "acme", "retentionDays": 0})


@pytest.mark.parametrize("name", ["shared", "solo"])
def test_builtin_scopes_cannot_be_declared(name: str) -> None:
    with pytest.raises(InvalidSpec, match="built-in"):
        parse_scope("s", {"org": "acme", "scopeName": name})
    with pytest.raises(InvalidSpec, match="built-in"):
        parse_scope(name, {"org": "acme"})


def test_no_memory_agent_gets_the_admin_identity() -> None:
    with pytest.raises(InvalidSpec, match="reserved"):
        parse_agent("admin", {"org": "acme"})
    with pytest.raises(InvalidSpec, match="reserved"):
        parse_agent("ops", {"org": "acme", "agentId": "admin"})


def test_status_builder_keeps_transition_time_when_status_is_unchanged() -> None:
    first = conditions.StatusBuilder({}, 1)
    first.set_false(conditions.READY, "Provisioning", "waiting")
    built = first.build()
    old_time = "2020-01-01T00:00:00Z"
    built["conditions"][0]["lastTransitionTime"] = old_time
    again = conditions.StatusBuilder(built, 2)
    again.set_false(conditions.READY, "Migrating", "still waiting")
    cond = again.build()["conditions"][0]
    assert cond["lastTransitionTime"] == old_time and cond["observedGeneration"] == 2
    flipped = conditions.StatusBuilder(built, 2)
    flipped.set_true(conditions.READY, "OrgRegistered", "ok")
    assert flipped.build()["conditions"][0]["lastTransitionTime"] != old_time
    with pytest.raises(ValueError, match="CamelCase"):
        flipped.set_true(conditions.READY, "not camel case", "x")


async def test_org_handler_steps_to_ready(memo: kopf.Memo, events: list[dict[str, Any]]) -> None:
    kube: FakeKube = memo.ctx.kube
    backend: RecordingBackend = memo.ctx.backend
    body, patch = org_body(), kopf.Patch()
    await handlers.org_reconcile(body=body, patch=patch, memo=memo, logger=logging.getLogger("t"))
    assert patch["status"]["provider"] == "StatefulSet"
    assert patch["status"]["phase"] == "Provisioning database"
    assert patch["status"]["observedGeneration"] == 2
    assert {o["kind"] for o in kube.created} == {"Secret", "Service", "StatefulSet"}
    assert events == [{"type": "Normal", "reason": "ProvisioningDatabase",
                       "message": "waiting for StatefulSet acme-db to be ready"}]

    kube.objects[("StatefulSet", "ns1", "acme-db")]["status"] = {"replicas": 1, "readyReplicas": 1}
    body, patch = org_body(status=patch["status"]), kopf.Patch()
    await handlers.org_reconcile(body=body, patch=patch, memo=memo, logger=logging.getLogger("t"))
    job = kube.objects[("Job", "ns1", "acme-migrate-v4")]
    assert job["metadata"]["ownerReferences"][0] == {
        "apiVersion": "echo-memory.io/v1alpha1", "kind": "MemoryOrg", "name": "acme", "uid": "uid-acme",
        "controller": True, "blockOwnerDeletion": True}
    assert patch["status"]["phase"] == "Migrating schema"

    job["status"] = {"succeeded": 1}
    body, patch = org_body(status=patch["status"]), kopf.Patch()
    await handlers.org_reconcile(body=body, patch=patch, memo=memo, logger=logging.getLogger("t"))
    assert conditions.is_true(patch["status"], conditions.READY)
    assert patch["status"]["schemaVersion"] == 4 and patch["status"]["registered"] is True
    assert backend.registered["acme"].startswith("postgresql://echo:")

    # Once migrated, a deleted finished Job is not re-run.
    del kube.objects[("Job", "ns1", "acme-migrate-v4")]
    body, patch = org_body(status=patch["status"]), kopf.Patch()
    await handlers.org_reconcile(body=body, patch=patch, memo=memo, logger=logging.getLogger("t"))
    assert ("Job", "ns1", "acme-migrate-v4") not in kube.objects
    assert conditions.is_true(patch["status"], conditions.READY)


async def test_auto_provider_is_pinned_once_chosen(memo: kopf.Memo) -> None:
    """Installing CloudNativePG later must never move an existing org's data."""
    memo.ctx.kube.crds.add("clusters.postgresql.cnpg.io")
    patch = kopf.Patch()
    await handlers.org_reconcile(body=org_body(status={"provider": "StatefulSet"}), patch=patch, memo=memo,
                                 logger=logging.getLogger("t"))
    assert patch["status"]["provider"] == "StatefulSet"
    assert ("Cluster", "ns1", "acme-db") not in memo.ctx.kube.objects


async def test_lost_connection_secret_is_not_regenerated(memo: kopf.Memo) -> None:
    kube: FakeKube = memo.ctx.kube
    await handlers.org_reconcile(body=org_body(), patch=kopf.Patch(), memo=memo, logger=logging.getLogger("t"))
    del kube.objects[("Secret", "ns1", "acme-db-app")]
    patch = kopf.Patch()
    await handlers.org_reconcile(body=org_body(), patch=patch, memo=memo, logger=logging.getLogger("t"))
    assert ("Secret", "ns1", "acme-db-app") not in kube.objects
    degraded = conditions.find(patch["status"], conditions.DEGRADED)
    assert degraded and degraded["reason"] == "SecretMissing" and "restore" in degraded["message"]


async def test_deleting_objects_are_left_alone(memo: kopf.Memo) -> None:
    body = org_body()
    body_dict = dict(body)
    body_dict["metadata"] = {**body["metadata"], "deletionTimestamp": "2026-01-01T00:00:00Z"}
    patch = kopf.Patch()
    await handlers.org_reconcile(body=kopf.Body(body_dict), patch=patch, memo=memo, logger=logging.getLogger("t"))
    assert memo.ctx.kube.created == [] and not patch


async def test_agent_handler_waits_for_its_org_then_issues(memo: kopf.Memo) -> None:
    kube: FakeKube = memo.ctx.kube
    agent = org_body("bot", {"org": "acme", "readScopes": ["shared"]}, kind="MemoryAgent")
    patch = kopf.Patch()
    await handlers.agent_reconcile(body=agent, patch=patch, memo=memo, logger=logging.getLogger("t"))
    assert conditions.find(patch["status"], conditions.READY)["reason"] == "OrgNotFound"

    kube.objects[("MemoryOrg", "ns1", "acme")] = {
        "metadata": {"name": "acme", "namespace": "ns1"},
        "status": {"org": "acme", "connectionSecret": "acme-db-app", "connectionSecretKey": "uri",
                   "conditions": [{"type": "Ready", "status": "True"}]}}
    kube.objects[("Secret", "ns1", "acme-db-app")] = {"data": {"uri": b64("postgresql://a@h/echo")}}
    patch = kopf.Patch()
    await handlers.agent_reconcile(body=agent, patch=patch, memo=memo, logger=logging.getLogger("t"))
    assert conditions.is_true(patch["status"], conditions.READY)
    token = decode_secret(kube.objects[("Secret", "ns1", "bot-token")])
    assert token == {"token": "tok-acme-bot-1", "org": "acme", "agentId": "bot"}

    # An unchanged spec does not churn tokens.
    await handlers.agent_reconcile(body=agent, patch=kopf.Patch(), memo=memo, logger=logging.getLogger("t"))
    assert memo.ctx.backend.tokens == {"bot": ["tok-acme-bot-1"]}

    await handlers.agent_delete(body=agent, memo=memo, logger=logging.getLogger("t"))
    assert memo.ctx.backend.revoked == ["tok-acme-bot-1"] and ("Secret", "ns1", "bot-token") not in kube.objects


def test_registry_wires_every_kind() -> None:
    registry = handlers.build_registry(OperatorConfig(resync_seconds=5))
    timers = {(h.selector.plural, h.id, h.interval) for h in registry._spawning.get_all_handlers()}
    assert timers == {(p, "resync", 5) for p in ("memoryorgs", "memoryscopes", "memoryagents")}
    changing = {(h.selector.plural, h.id) for h in registry._changing.get_all_handlers()}
    assert changing == {("memoryorgs", "spec-changed/spec"), ("memoryscopes", "spec-changed/spec"),
                        ("memoryagents", "spec-changed/spec"), ("memoryorgs", "finalize"),
                        ("memoryagents", "finalize")}  # no finalizer on scopes: their facts stay


async def test_changing_a_pinned_provider_is_refused(memo: kopf.Memo) -> None:
    patch = kopf.Patch()
    body = org_body(spec={"database": {"provider": "CloudNativePG"}}, status={"provider": "StatefulSet"})
    await handlers.org_reconcile(body=body, patch=patch, memo=memo, logger=logging.getLogger("t"))
    degraded = conditions.find(patch["status"], conditions.DEGRADED)
    assert degraded and degraded["reason"] == "InvalidSpec"
    assert "from StatefulSet to CloudNativePG" in degraded["message"]
    assert memo.ctx.kube.created == []  # nothing provisioned next to the existing data


async def test_org_name_taken_by_another_database_is_a_conflict(memo: kopf.Memo) -> None:
    kube: FakeKube = memo.ctx.kube
    backend: RecordingBackend = memo.ctx.backend
    backend.registered["acme"] = "postgresql://someone:pw@other-db.team-b.svc:5432/echo"
    kube.objects[("Secret", "ns1", "ext")] = {"data": {"uri": b64("postgresql://me:pw@mine.ns1.svc:5432/echo")}}
    spec = {"database": {"provider": "External", "secretRef": {"name": "ext"}}}
    status = {"provider": "External", "schemaVersion": 4,
              "conditions": [{"type": "Migrated", "status": "True", "lastTransitionTime": "2020-01-01T00:00:00Z"}]}
    patch = kopf.Patch()
    await handlers.org_reconcile(body=org_body(spec=spec, status=status), patch=patch, memo=memo,
                                 logger=logging.getLogger("t"))
    ready = conditions.find(patch["status"], conditions.READY)
    assert ready and ready["reason"] == "OrgNameInUse"
    assert "other-db.team-b.svc:5432/echo" in ready["message"] and "pw" not in ready["message"]
    assert backend.registered["acme"].startswith("postgresql://someone")  # not hijacked

    # The same database with rotated credentials is not a conflict.
    backend.registered["acme"] = "postgresql://me:old@mine.ns1.svc/echo"
    patch = kopf.Patch()
    await handlers.org_reconcile(body=org_body(spec=spec, status=status), patch=patch, memo=memo,
                                 logger=logging.getLogger("t"))
    assert conditions.is_true(patch["status"], conditions.READY)
    assert backend.registered["acme"] == "postgresql://me:pw@mine.ns1.svc:5432/echo"


def test_operator_settings_come_from_the_environment_through_pydantic_settings(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from pydantic import ValidationError

    monkeypatch.setenv("ECHO_OPERATOR_NAMESPACES", "team-a, team-b")
    monkeypatch.setenv("ECHO_OPERATOR_LIVENESS", "")
    monkeypatch.setenv("ECHO_OPERATOR_RESYNC_SECONDS", "7.5")
    monkeypatch.setenv("ECHO_MEMORY_NATS_URL", "nats://bus:4222")
    config = OperatorConfig.from_env()
    assert config.namespaces == ("team-a", "team-b") and config.liveness_endpoint is None
    assert config.resync_seconds == 7.5 and config.nats_url == "nats://bus:4222"
    # A given mapping (a rendered chart's env) wins over the process environment.
    given = OperatorConfig.from_env({"ECHO_OPERATOR_IMAGE": "reg/echo:2", "ECHO_OPERATOR_NAMESPACES": "ops"})
    assert given.image == "reg/echo:2" and given.namespaces == ("ops",)
    monkeypatch.setenv("ECHO_OPERATOR_RESYNC_SECONDS", "soon")
    with pytest.raises(ValidationError, match="resync_seconds"):
        OperatorConfig.from_env()
