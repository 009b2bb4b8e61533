"""The chart's NATS users: one per component, the permissions of libs/server/bus/permissions.py, stable passwords.

Rendered by the real helm binary (conftest.py) from the chart without its NATS dependency
(k8s_support.strip_dependencies); `helm template` has no cluster, so `lookup` finds nothing.
test_k8s_nats_users_live.py runs a real nats-server from what is rendered here.
"""

from __future__ import annotations

import base64
import json
import pathlib
import posixpath
import subprocess
from typing import Any

import pytest
import yaml
from k8s_support import CHART, strip_dependencies

from echo_memory.libs.server.bus.permissions import (
    CHART_PERMISSIONS,
    bus_users,
    main,
    permission_table_json,
    permissions,
)

SECRET = "echo-memory-nats-auth"


@pytest.fixture(scope="module")
def chart(tmp_path_factory: pytest.TempPathFactory) -> pathlib.Path:
    return strip_dependencies(CHART, tmp_path_factory.mktemp("nats-auth") / "echo-memory")


def _template(helm_bin: pathlib.Path, chart: pathlib.Path, *sets: str, release: str = "rel",
              namespace: str = "memsys") -> subprocess.CompletedProcess[str]:
    args = [str(helm_bin), "template", release, str(chart), "-n", namespace]
    for value in sets:
        args += ["--set", value]
    return subprocess.run(args, capture_output=True, text=True, timeout=60)


def _docs(out: subprocess.CompletedProcess[str]) -> list[dict[str, Any]]:
    assert out.returncode == 0, out.stderr
    return [d for d in yaml.safe_load_all(out.stdout) if d]


def _secrets(docs: list[dict[str, Any]]) -> dict[str, dict[str, str]]:
    return {d["metadata"]["name"]: {k: base64.b64decode(v).decode() for k, v in (d.get("data") or {}).items()}
            for d in docs if d["kind"] == "Secret"}


def _passwords(out: subprocess.CompletedProcess[str]) -> dict[str, str]:
    secrets = _secrets(_docs(out))
    return {s["user"]: s["password"] for name, s in secrets.items() if name.startswith(f"{SECRET}-")}


def _secret_refs(node: Any) -> set[str]:
    """Every Secret a pod spec reads: env secretKeyRef, envFrom, secret and projected volumes."""
    found: set[str] = set()
    if isinstance(node, dict):
        for key, value in node.items():
            if key in ("secretKeyRef", "secretRef") and isinstance(value, dict):
                found.add(value["name"])
            elif key == "secret" and isinstance(value, dict) and "secretName" in value:
                found.add(value["secretName"])
            elif key == "secret" and isinstance(value, dict) and "name" in value:  # a projected source
                found.add(value["name"])
            found |= _secret_refs(value)
    elif isinstance(node, list):
        for item in node:
            found |= _secret_refs(item)
    return found


def test_the_charts_permission_table_is_the_python_one() -> None:
    assert CHART_PERMISSIONS.read_text() == permission_table_json(), "run `python -m echo_memory.libs.server.bus.permissions`"
    assert main(["permissions", "--check"]) == 0
    table = json.loads(CHART_PERMISSIONS.read_text())["users"]
    assert list(table) == sorted(bus_users())
    assert table["edge"] == permissions("edge") and table["admin"] == permissions("admin")


def test_the_check_fails_when_the_copy_differs(tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import echo_memory.libs.server.bus.permissions as module

    stale = json.loads(CHART_PERMISSIONS.read_text())
    stale["users"]["edge"]["publish"]["allow"].append("echo.v1.*.writes.token_create")
    copy = tmp_path / "nats-permissions.json"
    copy.write_text(json.dumps(stale, indent=2, sort_keys=True) + "\n")
    monkeypatch.setattr(module, "CHART_PERMISSIONS", copy)
    assert main(["permissions", "--check"]) == 1
    assert main(["permissions"]) == 0 and copy.read_text() == permission_table_json()


def test_the_schema_names_exactly_the_bus_users() -> None:
    schema = json.loads((CHART / "values.schema.json").read_text())
    assert set(schema["properties"]["natsAuth"]["properties"]["passwords"]["properties"]) == set(bus_users())
    services = yaml.safe_load((CHART / "values.yaml").read_text())["services"]
    assert set(services) | {"admin"} == set(bus_users())  # every Deployment has a user of its own name


def test_nats_includes_the_authorization_block_from_the_mounted_secret() -> None:
    """The official chart turns `$include` into `include <path>;` relative to /etc/nats-config/nats.conf."""
    nats = yaml.safe_load((CHART / "values.yaml").read_text())["nats"]
    include = nats["config"]["merge"]["$include"]
    assert "authorization" not in nats["config"]["merge"]  # no shared token any more
    (mount,) = [p["value"] for p in nats["container"]["patch"] if p["path"] == "/volumeMounts/-"]
    (volume,) = [p["value"] for p in nats["podTemplate"]["patch"] if p["path"] == "/spec/volumes/-"]
    assert posixpath.normpath(posixpath.join("/etc/nats-config", include)) == f"{mount['mountPath']}/auth.conf"
    assert mount["mountPath"].startswith("/etc/")  # the config reloader mounts /etc/ mounts and watches includes
    assert mount["name"] == volume["name"] and volume["secret"]["secretName"] == SECRET
    assert yaml.safe_load((CHART / "values.yaml").read_text())["natsAuth"]["secretName"] == SECRET


def test_each_component_reads_only_its_own_credential(helm_bin: pathlib.Path, chart: pathlib.Path) -> None:
    docs = _docs(_template(helm_bin, chart, "natsAuth.seed=s", "defaultDatabase.existingSecret=db"))
    pods = {d["metadata"]["labels"]["app.kubernetes.io/component"]: d["spec"]["template"]["spec"]
            for d in docs if d["kind"] in ("Deployment", "Job")}
    assert set(pods) == {*bus_users(), "operator", "migration"} - {"admin"}
    for component, spec in pods.items():
        user = {"operator": "admin"}.get(component, component)
        nats_secrets = {s for s in _secret_refs(spec) if s.startswith(SECRET)}
        if component == "migration":  # migrates Postgres, never touches NATS
            assert nats_secrets == set(), nats_secrets
            continue
        assert nats_secrets == {f"{SECRET}-{user}"}, (component, nats_secrets)
        env = {e["name"]: e for e in spec["containers"][0]["env"]}
        assert env["ECHO_MEMORY_NATS_USER"]["valueFrom"]["secretKeyRef"] == {"name": f"{SECRET}-{user}", "key": "user"}
        assert env["ECHO_MEMORY_NATS_PASSWORD"]["valueFrom"]["secretKeyRef"]["key"] == "password"
        assert env["ECHO_MEMORY_NATS_URL"]["value"] == "nats://rel-nats.memsys.svc:4222"  # no secret in the URL
    secrets = _secrets(docs)
    assert set(secrets) >= {SECRET} | {f"{SECRET}-{u}" for u in bus_users()}
    for user in bus_users():
        assert secrets[f"{SECRET}-{user}"]["user"] == user
    users = json.loads(secrets[SECRET]["auth.conf"])["authorization"]["users"]
    assert [u["user"] for u in users] == sorted(bus_users())
    for entry in users:
        assert entry["permissions"] == permissions(entry["user"])
        assert entry["password"] == secrets[f"{SECRET}-{entry['user']}"]["password"]
    assert "\\u003e" not in base64.b64decode(
        next(d for d in docs if d["metadata"]["name"] == SECRET)["data"]["auth.conf"]).decode()


def test_a_seed_gives_the_same_passwords_on_every_render(helm_bin: pathlib.Path, chart: pathlib.Path) -> None:
    first = _passwords(_template(helm_bin, chart, "natsAuth.seed=s3cret-from-the-vault"))
    again = _passwords(_template(helm_bin, chart, "natsAuth.seed=s3cret-from-the-vault"))
    assert first == again and set(first) == set(bus_users())
    assert len(set(first.values())) == len(first) and all(len(p) == 64 for p in first.values())
    other_seed = _passwords(_template(helm_bin, chart, "natsAuth.seed=another"))
    other_release = _passwords(_template(helm_bin, chart, "natsAuth.seed=s3cret-from-the-vault", release="other"))
    for user in bus_users():
        assert other_seed[user] != first[user] and other_release[user] != first[user]
        assert "s3cret" not in first[user]


def test_a_fixed_password_wins_over_the_seed(helm_bin: pathlib.Path, chart: pathlib.Path) -> None:
    passwords = _passwords(_template(helm_bin, chart, "natsAuth.passwords.edge=fixed-edge-pw", "natsAuth.seed=x"))
    assert passwords["edge"] == "fixed-edge-pw"
    assert passwords["admin"] == _passwords(_template(helm_bin, chart, "natsAuth.seed=x"))["admin"]
    unknown = _template(helm_bin, chart, "natsAuth.passwords.nobody=pw", "natsAuth.seed=x")
    assert unknown.returncode != 0 and "nobody" in unknown.stderr


def test_rendering_without_a_cluster_and_without_a_seed_fails_instead_of_rotating(
    helm_bin: pathlib.Path, chart: pathlib.Path
) -> None:
    out = _template(helm_bin, chart)
    assert out.returncode != 0
    assert "natsAuth.seed" in out.stderr and "natsAuth.create=false" in out.stderr
    partial = _template(helm_bin, chart, "natsAuth.passwords.edge=only-one")
    assert partial.returncode != 0 and "natsAuth.seed" in partial.stderr  # every user needs a source


def test_own_secrets_need_nothing_generated(helm_bin: pathlib.Path, chart: pathlib.Path) -> None:
    docs = _docs(_template(helm_bin, chart, "natsAuth.create=false"))
    assert not [name for name in _secrets(docs) if name.startswith(SECRET)]
    edge = next(d for d in docs if d["kind"] == "Deployment" and d["metadata"]["name"].endswith("-edge"))
    assert {s for s in _secret_refs(edge["spec"]["template"]["spec"]) if s.startswith(SECRET)} == {f"{SECRET}-edge"}


def test_an_external_nats_keeps_per_component_users_unless_turned_off(helm_bin: pathlib.Path,
                                                                     chart: pathlib.Path) -> None:
    external = ("nats.enabled=false", "externalNats.url=nats://nats.infra:4222")
    docs = _docs(_template(helm_bin, chart, *external, "natsAuth.seed=s"))
    writes = next(d for d in docs if d["kind"] == "Deployment" and d["metadata"]["name"].endswith("-writes"))
    env = {e["name"]: e for e in writes["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert env["ECHO_MEMORY_NATS_URL"]["value"] == "nats://nats.infra:4222"
    assert env["ECHO_MEMORY_NATS_USER"]["valueFrom"]["secretKeyRef"]["name"] == f"{SECRET}-writes"
    assert SECRET in _secrets(docs)  # auth.conf: the block to configure the external NATS with
    off = _docs(_template(helm_bin, chart, *external, "natsAuth.enabled=false"))
    assert not [name for name in _secrets(off) if name.startswith(SECRET)]
    for dep in (d for d in off if d["kind"] == "Deployment"):
        names = {e["name"] for e in dep["spec"]["template"]["spec"]["containers"][0]["env"]}
        assert "ECHO_MEMORY_NATS_USER" not in names and "ECHO_MEMORY_NATS_PASSWORD" not in names
    bundled = _template(helm_bin, chart, "natsAuth.enabled=false")
    assert bundled.returncode != 0 and "external NATS" in bundled.stderr
    token = _template(helm_bin, chart, "natsAuth.token=old", "natsAuth.seed=s")
    assert token.returncode != 0 and "token" in token.stderr  # the shared token is gone, loudly
