"""Every example in deploy/examples reaches Ready on a real API server, with the chart's RBAC only.

The server enforces RBAC for the operator's service-account token and runs
OwnerReferencesPermissionEnforcement; the real StatefulSet, Job and garbage-collector controllers act
on what the operator creates.  Drift healing and deletion are checked on the same objects.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
import yaml
from k8s_support import EXAMPLES
from real_actors import CNPG_CRD, Actors
from real_cluster import Client, condition, decode, wait_for

from echo_memory.libs.server.store import admin as store_admin
from echo_memory.libs.server.store.migrations import CODE_SCHEMA_VERSION
from echo_memory.libs.server.store.tokens import VERIFY_TOKEN, hash_token

pytestmark = [pytest.mark.timeout(240)]


def example(name: str, namespace: str) -> list[dict[str, Any]]:
    docs = [d for d in yaml.safe_load_all((EXAMPLES / name).read_text()) if d]
    for doc in docs:
        doc["metadata"]["namespace"] = namespace
    return docs


def token_live(database_url: str, token: str) -> bool:
    with psycopg.connect(database_url) as conn:
        return conn.execute(VERIFY_TOKEN, (hash_token(token),)).fetchone() is not None


@pytest.fixture()
def cnpg_removed_after(admin: Client) -> Iterator[None]:
    yield
    admin.delete("CustomResourceDefinition", CNPG_CRD["metadata"]["name"])
    wait_for(lambda: admin.get("CustomResourceDefinition", CNPG_CRD["metadata"]["name"]) is None, timeout=60)


async def test_every_example_reaches_ready_then_heals_and_is_collected(
    admin: Client, kubelet: Any, namespace: str, operator_factory: Any, pg: Any, cnpg_removed_after: None,
    empty_database_url: str,
) -> None:
    operator = operator_factory()
    act = Actors(admin, kubelet, namespace)
    databases = {}
    for org in ("acme", "research", "platform"):
        databases[org] = pg.admin_url(f"x_{org}_{namespace.replace('-', '_')}")
        with psycopg.connect(pg.dsn, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "x_{org}_{namespace.replace("-", "_")}"')

    # memoryorg-auto.yaml: no CloudNativePG yet, so Auto provisions (and pins) a StatefulSet.
    for doc in example("memoryorg-auto.yaml", namespace):
        admin.create(doc)
    act.statefulset_db("acme", databases["acme"])
    assert "init-db" in " ".join(wait_for(lambda: act.admin.get("Job", f"acme-migrate-v{CODE_SCHEMA_VERSION}",
                                                                 namespace))["spec"]["template"]["spec"]
                                 ["containers"][0]["command"])
    act.migrate("acme")
    acme = act.ready("MemoryOrg", "acme")
    assert acme["status"]["provider"] == "StatefulSet"
    assert store_admin.schema_version(databases["acme"]) == CODE_SCHEMA_VERSION

    # memoryorg-cloudnativepg.yaml, once CloudNativePG's CRD exists.
    act.install_cnpg()
    for doc in example("memoryorg-cloudnativepg.yaml", namespace):
        admin.create(doc)
    act.cnpg_db("research", databases["research"])
    act.migrate("research")
    assert act.ready("MemoryOrg", "research")["status"]["provider"] == "CloudNativePG"

    # memoryorg-external.yaml, with its Secret's URI pointed at a database of this test session.
    for doc in example("memoryorg-external.yaml", namespace):
        if doc["kind"] == "Secret":
            doc["stringData"]["uri"] = databases["platform"]
        admin.create(doc)
    act.migrate("platform")
    act.ready("MemoryOrg", "platform")

    # memoryscope.yaml and memoryagent.yaml in the acme org.
    for name in ("memoryscope.yaml", "memoryagent.yaml"):
        for doc in example(name, namespace):
            admin.create(doc)
    act.ready("MemoryScope", "platform-team")
    act.ready("MemoryAgent", "claude-code")
    assert "platform-team" in {s["name"] for s in store_admin.scope_stats(databases["acme"])}
    secret = admin.get("Secret", "claude-code-token", namespace)
    assert secret is not None
    token = decode(secret)["token"]
    assert token_live(databases["acme"], token)

    # Drift: a deleted token Secret is re-issued (and the old token revoked); a deleted Service comes back.
    admin.delete("Secret", "claude-code-token", namespace)
    fresh = wait_for(lambda: (lambda s: s if s and decode(s)["token"] != token else None)(
        admin.get("Secret", "claude-code-token", namespace)), timeout=30, what="re-issued token Secret")
    assert not token_live(databases["acme"], token)
    assert token_live(databases["acme"], decode(fresh)["token"])
    admin.delete("Service", "acme-db", namespace)
    wait_for(lambda: admin.get("Service", "acme-db", namespace), timeout=30, what="Service acme-db healed")

    # Deleting the agent revokes its token; the real garbage collector removes what it owned.
    admin.delete("MemoryAgent", "claude-code", namespace)
    wait_for(lambda: admin.get("MemoryAgent", "claude-code", namespace) is None, timeout=30)
    assert not token_live(databases["acme"], decode(fresh)["token"])
    wait_for(lambda: admin.get("Secret", "claude-code-token", namespace) is None, timeout=30)

    # Delete policy on an org: its database objects go; the migration Job goes with its owner (GC).
    admin.patch("MemoryOrg", "acme", namespace, {"spec": {"deletionPolicy": "Delete"}})
    wait_for(lambda: act.org("acme")["metadata"].get("generation", 0) >= 2)
    admin.delete("MemoryOrg", "acme", namespace)
    wait_for(lambda: admin.get("MemoryOrg", "acme", namespace) is None, timeout=30, what="acme finalized")
    for kind, name in (("StatefulSet", "acme-db"), ("Service", "acme-db"), ("Secret", "acme-db-app"),
                       ("Job", f"acme-migrate-v{CODE_SCHEMA_VERSION}")):
        wait_for(lambda kind=kind, name=name: admin.get(kind, name, namespace) is None, timeout=60,
                 what=f"{kind} {name} deleted")
    # Orphan (the default) keeps the external org's Secret and database.
    admin.delete("MemoryOrg", "platform", namespace)
    wait_for(lambda: admin.get("MemoryOrg", "platform", namespace) is None, timeout=30)
    assert admin.get("Secret", "platform-db", namespace) is not None
    assert condition(admin.get("MemoryOrg", "research", namespace), "Ready")["status"] == "True"
    assert "Traceback" not in operator.log(), operator.log()[-4000:]
