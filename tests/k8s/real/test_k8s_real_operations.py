"""Running the operator on a real API server: outages, noise, namespaced mode and an operator upgrade."""

from __future__ import annotations

import json
import pathlib
import subprocess
import time
import urllib.request
import uuid
from collections.abc import Iterator
from typing import Any

import nats
import psycopg
import pytest
from real_actors import Actors
from real_cluster import Client, ControlPlane, condition, encode, wait_for

from echo_memory.libs.local.supervisor.nats import nats_binary
from echo_memory.libs.local.supervisor.ports import free_port
from echo_memory.libs.server.orgs import read_entry
from echo_memory.libs.server.store.migrations import CODE_SCHEMA_VERSION

pytestmark = [pytest.mark.timeout(240)]


class MonitoredNats:
    """A nats-server of its own (JetStream on disk, so a restart keeps the registry), with /varz."""

    def __init__(self, base: pathlib.Path) -> None:
        self.base, self.port, self.monitor = base, free_port(), free_port()
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"nats://127.0.0.1:{self.port}"

    def start(self) -> None:
        self.proc = subprocess.Popen([str(nats_binary()), "-a", "127.0.0.1", "-p", str(self.port), "-m",
                                      str(self.monitor), "-js", "-sd", str(self.base / "js")],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_for(lambda: self.varz(), timeout=20, what="nats-server up")

    def varz(self) -> dict[str, Any] | None:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.monitor}/varz", timeout=2) as resp:
                return dict(json.load(resp))
        except OSError:
            return None

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(10)


@pytest.fixture()
def own_nats(tmp_path: pathlib.Path) -> Iterator[MonitoredNats]:
    server = MonitoredNats(tmp_path)
    server.start()
    yield server
    server.stop()


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


async def test_a_nats_outage_shows_in_the_status_within_seconds_on_one_connection(
    admin: Client, kubelet: Any, namespace: str, operator_factory: Any, pg: Any, own_nats: MonitoredNats,
) -> None:
    operator_factory(nats=own_nats.url)
    act = Actors(admin, kubelet, namespace)
    external_org(admin, namespace, "acme", new_database(pg))
    act.migrate("acme")
    act.ready("MemoryOrg", "acme")
    time.sleep(5)  # five resyncs
    varz = own_nats.varz() or {}
    # One long-lived connection: not one per reconcile (the test's own reads are not counted yet).
    assert varz["connections"] == 1 and varz["total_connections"] == 1, varz

    own_nats.stop()
    began = time.monotonic()
    failed = wait_for(lambda: (lambda c: c if c.get("reason") == "RegistrationFailed" else None)(
        condition(admin.get("MemoryOrg", "acme", namespace), "Ready")), timeout=30, what="outage reported")
    took = time.monotonic() - began
    assert "NATS" in failed["message"] or "nats" in failed["message"].lower()
    print(f"\nNATS outage reported in the status after {took:.1f} s")
    assert took < 30

    own_nats.start()  # same port and store: the operator's connection comes back by itself
    act.ready("MemoryOrg", "acme", timeout=60)


async def test_a_healthy_org_costs_no_conflicts_and_no_info_logs(
    control_plane: ControlPlane, admin: Client, kubelet: Any, namespace: str, operator_factory: Any, pg: Any,
) -> None:
    operator = operator_factory()  # the chart's default logLevel: WARNING
    act = Actors(admin, kubelet, namespace)
    admin.create({"apiVersion": "echo-memory.io/v1alpha1", "kind": "MemoryOrg",
                  "metadata": {"name": "quiet", "namespace": namespace}, "spec": {"database": {"provider":
                                                                                             "StatefulSet"}}})
    act.statefulset_db("quiet", new_database(pg))
    act.migrate("quiet")
    act.ready("MemoryOrg", "quiet")
    admin.create({"apiVersion": "echo-memory.io/v1alpha1", "kind": "MemoryAgent",
                  "metadata": {"name": "bot", "namespace": namespace}, "spec": {"org": "quiet"}})
    act.ready("MemoryAgent", "bot")
    before = len(control_plane.audit(operator.username))
    time.sleep(8)  # eight resyncs of each object
    events = control_plane.audit(operator.username)[before:]
    assert events, "the operator made no request at all: the audit log is not being read"
    conflicts = [e for e in events if e.get("responseStatus", {}).get("code") == 409]
    creates = [e for e in events if e["verb"] == "create" and e["objectRef"]["resource"] != "events"]
    assert conflicts == [] and creates == [], (conflicts + creates)[:3]
    log = operator.log()
    assert " INFO " not in log and "Timer 'resync' succeeded" not in log, log[-2000:]


async def test_namespaced_operator_acts_only_in_its_namespaces(
    admin: Client, kubelet: Any, operator_factory: Any, pg: Any,
) -> None:
    watched, other = "t-" + uuid.uuid4().hex[:8], "t-" + uuid.uuid4().hex[:8]
    for name in (watched, other):
        admin.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
    try:
        operator_factory({"operator": {"watchNamespaces": [watched]}})
        for name in (watched, other):
            external_org(admin, name, "acme", new_database(pg), f"ns-{name}")
        Actors(admin, kubelet, watched).migrate("acme")
        Actors(admin, kubelet, watched).ready("MemoryOrg", "acme")
        time.sleep(3)
        assert not (admin.get("MemoryOrg", "acme", other) or {}).get("status")  # never touched
        assert not admin.list("Job", other)
    finally:
        for name in (watched, other):
            admin.delete("Namespace", name)


async def test_operator_upgrade_migrates_a_served_org_before_it_reports_ready(
    admin: Client, kubelet: Any, namespace: str, operator_factory: Any, pg: Any, nats_url: str,
) -> None:
    """Old release (schema target N-1) -> new release (N): a new Job per version, the org served throughout."""
    org = "up-" + uuid.uuid4().hex[:6]
    old = operator_factory()
    old.stop()
    old.env["ECHO_OPERATOR_SCHEMA_VERSION"] = str(CODE_SCHEMA_VERSION - 1)  # what the previous image ran
    old.start()
    act = Actors(admin, kubelet, namespace)
    external_org(admin, namespace, "acme", new_database(pg), org)
    act.migrate("acme", version=CODE_SCHEMA_VERSION - 1)
    assert act.ready("MemoryOrg", "acme")["status"]["schemaVersion"] == CODE_SCHEMA_VERSION - 1

    old.stop()  # the upgrade: the new operator image knows one more migration
    del old.env["ECHO_OPERATOR_SCHEMA_VERSION"]
    old.start()
    wait_for(lambda: condition(admin.get("MemoryOrg", "acme", namespace), "Ready").get("reason") == "Migrating",
             timeout=30, what="the new release migrates")
    nc = await nats.connect(nats_url)
    try:
        assert (await read_entry(nc, org)).state == "serving"  # still served while it migrates
    finally:
        await nc.close()
    act.migrate("acme", version=CODE_SCHEMA_VERSION)
    status = act.ready("MemoryOrg", "acme")["status"]
    assert status["schemaVersion"] == CODE_SCHEMA_VERSION
    assert status["migrationJob"] == f"acme-migrate-v{CODE_SCHEMA_VERSION}"
