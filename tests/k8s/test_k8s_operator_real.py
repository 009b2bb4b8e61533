"""The operator against the real Echo Memory: a MemoryOrg registered while the services run is served.

Kubernetes is the emulator (there is no API server here); everything else is
real: the services and the HTTP edge (EchoStack) on a real nats-server, the
embedded Postgres standing in for the org's database, the operator's
``LiveBackend`` (``echo_memory.libs.server.orgs`` + ``echo_memory.libs.server.store.admin``), and the migration Job's
own command run against that database.
"""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import nats
import pytest
from k8s_emulator import ApiServer
from k8s_support import ROOT, eventually

from echo_memory.libs.server.orgs import lookup_org
from echo_memory.libs.server.store import admin
from echo_memory.libs.server.store.migrations import CODE_SCHEMA_VERSION
from echo_memory.libs.testing import EchoStack
from echo_memory.operator import LiveBackend, OperatorConfig
from echo_memory.operator.manifests import b64, decode_secret

pytestmark = [pytest.mark.kmock(cls=ApiServer), pytest.mark.timeout(90)]

NS = "default"
API = f"/apis/echo-memory.io/v1alpha1/namespaces/{NS}"
MERGE = {"Content-Type": "application/merge-patch+json"}
FACT = {
    "session_id": "k8s-1",
    "entities": [{"name": "Billing API", "type": "service"}, {"name": "Postgres", "type": "database"}],
    "facts": [{"source": "Billing API", "target": "Postgres", "relation": "stores invoices in",
               "fact": "The billing API stores its invoices in Postgres.", "confidence": "extracted"}],
}


def ready(obj: dict[str, Any] | None) -> bool:
    conditions = (obj or {}).get("status", {}).get("conditions", [])
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)


def run_job(job: dict[str, Any], secrets: dict[str, dict[str, str]]) -> subprocess.CompletedProcess[str]:
    """Play the kubelet: run the Job's container command with its env resolved from Secrets.

    ``echo-memory`` is the console script of this distribution; ``python -m echo_memory.libs.local.cli``
    is the same entry point, so the test does not depend on the script being on PATH.
    """
    container = job["spec"]["template"]["spec"]["containers"][0]
    env = {"PATH": os.environ["PATH"], "PYTHONPATH": str(ROOT)}
    for var in container["env"]:
        ref = var["valueFrom"]["secretKeyRef"]
        env[var["name"]] = secrets[ref["name"]][ref["key"]]
    command = container["command"]
    assert command[0] == "echo-memory"
    return subprocess.run([sys.executable, "-m", "echo_memory.libs.local.cli", *command[1:]], env=env, capture_output=True,
                          text=True, timeout=60, check=False)


@pytest.fixture()
async def edge_for_every_org(monkeypatch: pytest.MonkeyPatch, database_url: str, nats_url: str, org: str,
                             embedder: Any) -> AsyncIterator[EchoStack]:
    """The whole system with the edge configured as the chart configures it: tokens of every registered org."""
    monkeypatch.setenv("ECHO_MEMORY_EDGE_ORGS", '["*"]')
    async with EchoStack(database_url=database_url, nats_url=nats_url, org=org, embedder=embedder) as running:
        yield running


async def test_org_scope_and_agent_served_without_restarting_services(
    edge_for_every_org: EchoStack, empty_database_url: str, nats_url: str, operator_factory: Any, api: ApiServer,
) -> None:
    stack = edge_for_every_org
    org = "k8s-" + uuid.uuid4().hex[:8]
    config = OperatorConfig(image="registry.example/echo-memory:test", resync_seconds=0.3,
                            liveness_endpoint=None)  # schema version: the code's own
    await operator_factory(config=config, backend=LiveBackend(nats_url))
    async with aiohttp.ClientSession(base_url=str(api.url)) as http:
        async def post(path: str, body: dict[str, Any]) -> None:
            async with http.post(path, json=body) as resp:
                assert resp.status == 200, await resp.text()

        # An org on an existing (empty) database; the services are already running.
        await post(f"/api/v1/namespaces/{NS}/secrets", {
            "metadata": {"name": "org-db"}, "data": {"uri": b64(empty_database_url)}})
        await post(f"{API}/memoryorgs", {"metadata": {"name": "tenant"}, "spec": {
            "orgName": org, "database": {"provider": "External", "secretRef": {"name": "org-db"}}}})
        await post(f"{API}/memoryscopes", {"metadata": {"name": "billing"}, "spec": {
            "org": "tenant", "description": "Billing team", "writers": ["billing-bot"]}})
        await post(f"{API}/memoryagents", {"metadata": {"name": "billing-bot"}, "spec": {
            "org": "tenant", "readScopes": ["billing"], "writeScopes": ["billing"]}})

        # The migration Job's real command brings the empty database to the code's schema.
        job = await eventually(lambda: api.live("batch/v1/jobs", NS, f"tenant-migrate-v{CODE_SCHEMA_VERSION}"))
        done = run_job(job, {"org-db": {"uri": empty_database_url}})
        assert done.returncode == 0, done.stderr
        assert admin.schema_version(empty_database_url) == CODE_SCHEMA_VERSION
        async with http.patch(f"/apis/batch/v1/namespaces/{NS}/jobs/{job['metadata']['name']}/status",
                              json={"status": {"succeeded": 1}}, headers=MERGE) as resp:
            assert resp.status == 200

        await eventually(lambda: ready(api.live("echo-memory.io/v1alpha1/memoryorgs", NS, "tenant")), timeout=20)
        client = await nats.connect(nats_url)
        try:
            assert await lookup_org(client, org) == empty_database_url  # what the services will find
        finally:
            await client.close()

        await eventually(lambda: ready(api.live("echo-memory.io/v1alpha1/memoryscopes", NS, "billing")), timeout=20)
        assert "billing" in {s["name"] for s in admin.scope_stats(empty_database_url)}
        secret = await eventually(lambda: api.live("v1/secrets", NS, "billing-bot-token"), timeout=20)
        token = decode_secret(secret)["token"]

        # The real edge accepts the operator's token, and a real write lands in the operator's scope.
        async with stack.client(token) as mcp:
            written = await mcp.call_tool("write_episode", {**FACT, "scope": "billing"})
            assert not written.is_error, written.content
            assert written.structured_content["stored"] is True
            recalled = await mcp.call_tool("query_memory", {"query": "where are invoices kept?",
                                                           "scope": "billing"})
            assert not recalled.is_error, recalled.content
            assert recalled.structured_content["results"][0]["provenance"]["agent_id"] == "billing-bot"
        stats = {s["name"]: s for s in admin.scope_stats(empty_database_url)}
        assert stats["billing"]["facts"] == 1
        await eventually(lambda: api.live("echo-memory.io/v1alpha1/memoryscopes", NS, "billing")
                         ["status"].get("facts") == 1, timeout=20)

        # Deleting the agent revokes its token in the org's database.
        async with http.delete(f"{API}/memoryagents/billing-bot") as resp:
            assert resp.status == 200
        await eventually(lambda: api.live("echo-memory.io/v1alpha1/memoryagents", NS, "billing-bot") is None)
        # The token was live a moment ago (it just wrote); now the operator has revoked it, so there is
        # nothing left to revoke.  (The edge caches verifications briefly, so this is checked in the database.)
        assert admin.revoke_agent_tokens(empty_database_url, agent_id="billing-bot") == 0
