"""Tenancy on a real API server: org-name ownership, tokens revoked with their org, passwords kept in Secrets.

Each test names the failure it guards against; all of them failed before the registry recorded owners,
the operator revoked an org's agent tokens on delete, and kept passwords out of the NATS bucket.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import nats
import psycopg
import pytest
from real_actors import Actors
from real_cluster import RELEASE_NS, Client, condition, decode, encode, wait_for

from echo_memory.libs.server.orgs import read_entry, resolve_url, same_database
from echo_memory.libs.server.store import admin as store_admin
from echo_memory.libs.server.store.tokens import VERIFY_TOKEN, hash_token

pytestmark = [pytest.mark.timeout(240)]


@pytest.fixture()
def namespaces(admin: Client) -> Iterator[list[str]]:
    made = ["t-" + uuid.uuid4().hex[:8] for _ in range(3)]
    for name in made:
        admin.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
    yield made
    for name in made:
        admin.delete("Namespace", name)


def external_org(admin: Client, namespace: str, name: str, url: str, org: str | None = None) -> None:
    admin.create({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": f"{name}-ext", "namespace": namespace},
                  "data": encode({"uri": url})})
    spec: dict[str, Any] = {"database": {"provider": "External", "secretRef": {"name": f"{name}-ext"}}}
    if org:
        spec["orgName"] = org
    admin.create({"apiVersion": "echo-memory.io/v1alpha1", "kind": "MemoryOrg",
                  "metadata": {"name": name, "namespace": namespace}, "spec": spec})


def new_database(pg: Any) -> str:
    name = "x_" + uuid.uuid4().hex[:10]
    with psycopg.connect(pg.dsn, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    return str(pg.admin_url(name))


async def entry(nats_url: str, org: str) -> Any:
    nc = await nats.connect(nats_url)
    try:
        return await read_entry(nc, org)
    finally:
        await nc.close()


def token_live(database_url: str, token: str) -> bool:
    with psycopg.connect(database_url) as conn:
        return conn.execute(VERIFY_TOKEN, (hash_token(token),)).fetchone() is not None


async def test_a_losing_org_neither_migrates_nor_unregisters_the_owner(
    admin: Client, kubelet: Any, namespaces: list[str], operator_factory: Any, pg: Any, nats_url: str,
) -> None:
    owner_ns, intruder_ns, waiter_ns = namespaces
    org = "shared-" + uuid.uuid4().hex[:6]
    operator_factory()
    owner_db, intruder_db, waiter_db = new_database(pg), new_database(pg), new_database(pg)

    external_org(admin, owner_ns, "owner", owner_db, org)
    Actors(admin, kubelet, owner_ns).migrate("owner")
    Actors(admin, kubelet, owner_ns).ready("MemoryOrg", "owner")

    external_org(admin, intruder_ns, "intruder", intruder_db, org)
    lost = wait_for(lambda: (lambda c: c if c.get("reason") == "OrgNameInUse" else None)(
        condition(admin.get("MemoryOrg", "intruder", intruder_ns), "Ready")), timeout=30, what="intruder refused")
    assert f"MemoryOrg {owner_ns}/owner" in lost["message"]
    assert "password" not in lost["message"] and pg.server.password not in lost["message"]
    external_org(admin, waiter_ns, "waiter", waiter_db, org)
    wait_for(lambda: condition(admin.get("MemoryOrg", "waiter", waiter_ns), "Ready").get("reason") == "OrgNameInUse",
             timeout=30)
    # No migration before the name is won: the loser's database is untouched and it has no Job.
    assert not admin.list("Job", intruder_ns)
    assert store_admin.schema_version(intruder_db) == 0

    # Deleting the loser removes nothing of the owner's; the waiter never gets the name.
    admin.delete("MemoryOrg", "intruder", intruder_ns)
    wait_for(lambda: admin.get("MemoryOrg", "intruder", intruder_ns) is None, timeout=30)
    for _ in range(3):  # a few resyncs of the waiter (resync is 1 s)
        current = await entry(nats_url, org)
        assert current is not None and current.owner == f"MemoryOrg {owner_ns}/owner"
        assert same_database(current.database_url, owner_db)
        wait_for(lambda: condition(admin.get("MemoryOrg", "waiter", waiter_ns), "Ready").get("reason")
                 == "OrgNameInUse", timeout=10)
    assert not admin.list("Job", waiter_ns) and store_admin.schema_version(waiter_db) == 0

    # Only when the owner goes does the name pass on (to the waiter, now migrated and served).
    admin.delete("MemoryOrg", "owner", owner_ns)
    Actors(admin, kubelet, waiter_ns).migrate("waiter")
    Actors(admin, kubelet, waiter_ns).ready("MemoryOrg", "waiter")
    assert same_database((await entry(nats_url, org)).database_url, waiter_db)


async def test_deleting_an_org_revokes_its_agents_tokens_for_good(
    admin: Client, kubelet: Any, namespace: str, operator_factory: Any, pg: Any,
) -> None:
    operator_factory()
    act = Actors(admin, kubelet, namespace)
    db = new_database(pg)
    external_org(admin, namespace, "acme", db)
    act.migrate("acme")
    act.ready("MemoryOrg", "acme")
    admin.create({"apiVersion": "echo-memory.io/v1alpha1", "kind": "MemoryAgent",
                  "metadata": {"name": "bot", "namespace": namespace},
                  "spec": {"org": "acme", "readScopes": ["shared"], "writeScopes": ["shared"]}})
    act.ready("MemoryAgent", "bot")
    token = decode(admin.get("Secret", "bot-token", namespace) or {})["token"]
    assert token_live(db, token)

    # The org goes first (Orphan: its database stays): the agent's token must die with it.
    admin.delete("MemoryOrg", "acme", namespace)
    wait_for(lambda: admin.get("MemoryOrg", "acme", namespace) is None, timeout=30, what="org finalized")
    assert not token_live(db, token)
    wait_for(lambda: admin.get("Secret", "bot-token", namespace) is None, timeout=30)
    wait_for(lambda: condition(admin.get("MemoryAgent", "bot", namespace), "Ready").get("reason") == "OrgNotFound",
             timeout=30)
    admin.delete("MemoryAgent", "bot", namespace)
    wait_for(lambda: admin.get("MemoryAgent", "bot", namespace) is None, timeout=30)

    # Re-creating the org on the same database does not bring the token back.
    admin.delete("Secret", "acme-ext", namespace)
    wait_for(lambda: not admin.list("Job", namespace), timeout=60, what="old migration Job collected")
    external_org(admin, namespace, "acme", db)
    act.migrate("acme")
    act.ready("MemoryOrg", "acme")
    assert not token_live(db, token)


async def test_org_passwords_stay_in_secrets_not_in_the_nats_bucket(
    admin: Client, kubelet: Any, namespace: str, operator_factory: Any, pg: Any, nats_url: str,
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch,
) -> None:
    operator = operator_factory()
    act = Actors(admin, kubelet, namespace)
    db = new_database(pg)
    org = "cred-" + uuid.uuid4().hex[:6]
    external_org(admin, namespace, "acme", db, org)
    act.migrate("acme")
    act.ready("MemoryOrg", "acme")

    stored = await entry(nats_url, org)
    assert stored.state == "serving" and stored.password_file == org
    assert pg.server.password not in stored.to_json().decode()  # the bucket never sees the password
    assert same_database(stored.database_url, db)
    secret = admin.get("Secret", f"{operator.release}-echo-memory-org-credentials", RELEASE_NS)
    assert secret is not None and decode(secret)[org] == pg.server.password

    # A service pod mounts that Secret: the registry entry resolves to a working URL there, and only there.
    assert resolve_url(stored) is None
    for key, value in decode(secret).items():
        (tmp_path / key).write_text(value)
    monkeypatch.setenv("ECHO_MEMORY_ORG_CREDENTIALS_DIR", str(tmp_path))
    url = resolve_url(stored)
    assert url is not None and store_admin.schema_version(url) > 0

    # Deleting the org removes its key from the Secret, and then its finalizer (a resync still running
    # at deletion must not hold the finalizer back: kopf re-checks after 1 s, not its default 60 s).
    admin.delete("MemoryOrg", "acme", namespace)
    wait_for(lambda: org not in decode(admin.get("Secret", f"{operator.release}-echo-memory-org-credentials",
                                                 RELEASE_NS) or {}), timeout=30, what="org key removed")
    wait_for(lambda: admin.get("MemoryOrg", "acme", namespace) is None, timeout=30, what="org finalized")
