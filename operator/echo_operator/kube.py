"""The operator's one seam to the Kubernetes API: dicts in, dicts out.

Reconcilers never touch lightkube directly; they call :class:`Kube`, which
uses only verbs the test emulator implements faithfully (create, get, list,
merge-patch, delete: no server-side apply, no PUT, no label selectors).
:meth:`Kube.ensure` reads before it creates, so a resync of a healthy object
sends no create at all (no 409 per child per resync); a create that still
meets an existing object (a race) returns the existing one, so every
reconciliation step is safe to repeat.
"""

from __future__ import annotations

import functools
from typing import Any

import lightkube
from lightkube.core import resource as lk_resource
from lightkube.generic_resource import (
    GenericGlobalResource,
    GenericGlobalStatus,
    GenericNamespacedResource,
    GenericNamespacedStatus,
    create_api_info,
)
from lightkube.types import PatchType

from echo_memory.operator import names

#: Every kind the operator touches, with its plural and whether it is namespaced.
KINDS: dict[tuple[str, str], tuple[str, bool]] = {
    ("v1", "Secret"): ("secrets", True),
    ("v1", "Service"): ("services", True),
    ("apps/v1", "StatefulSet"): ("statefulsets", True),
    ("batch/v1", "Job"): ("jobs", True),
    (names.CNPG_API_VERSION, "Cluster"): ("clusters", True),
    (names.API_VERSION, names.ORG_KIND): (names.ORG_PLURAL, True),
    (names.API_VERSION, names.SCOPE_KIND): (names.SCOPE_PLURAL, True),
    (names.API_VERSION, names.AGENT_KIND): (names.AGENT_PLURAL, True),
    ("apiextensions.k8s.io/v1", "CustomResourceDefinition"): ("customresourcedefinitions", False),
}


@functools.cache
def _model(api_version: str, kind: str) -> Any:
    """An untyped (dict-based) lightkube resource class for one kind.

    Deliberately not lightkube's typed models: those reject objects missing
    fields a controller normally fills in, and we only need a few keys.  The
    classes are not put in lightkube's global registry, so they cannot clash
    with typed models other code may load.
    """
    plural, namespaced = KINDS[(api_version, kind)]
    group, _, version = api_version.rpartition("/")
    info = create_api_info(group, version, kind, plural)
    main, status = ((GenericNamespacedResource, GenericNamespacedStatus) if namespaced
                    else (GenericGlobalResource, GenericGlobalStatus))
    status_info = lk_resource.ApiInfo(resource=info.resource, parent=info.resource, plural=plural,
                                      verbs=["get", "patch"], action="status")
    status_cls = type(f"{kind}Status", (status,), {"_api_info": status_info})
    return type(kind, (main,), {"_api_info": info, "Status": status_cls})


class KubeError(RuntimeError):
    """Raised when the API server refuses a request for a reason other than 404 on a read."""

    def __init__(self, message: str, code: int) -> None:
        super().__init__(message)
        self.code = code


def _as_dict(obj: Any) -> dict[str, Any]:
    return dict(obj.to_dict()) if hasattr(obj, "to_dict") else dict(obj)


def _code(exc: lightkube.ApiError) -> int:
    return int(getattr(exc.status, "code", 0) or 0)


class Kube:
    """Async access to the API server for the reconcilers.

    Args:
        client: a lightkube ``AsyncClient``; by default one is built from
            ``$KUBECONFIG`` or the in-cluster service account.
    """

    def __init__(self, client: lightkube.AsyncClient | None = None) -> None:
        self._client = client or lightkube.AsyncClient(field_manager="echo-memory-operator")

    async def close(self) -> None:
        """Close the HTTP connections."""
        await self._client.close()

    async def get(self, api_version: str, kind: str, name: str, namespace: str | None) -> dict[str, Any] | None:
        """The object as a dict, or ``None`` when it does not exist (or its kind is unknown)."""
        try:
            obj = await self._client.get(_model(api_version, kind), name, namespace=namespace)
        except lightkube.ApiError as exc:
            if _code(exc) == 404:
                return None
            raise KubeError(f"reading {kind} {namespace}/{name}: {exc}", _code(exc)) from exc
        return _as_dict(obj)

    async def create(self, manifest: dict[str, Any]) -> tuple[dict[str, Any], bool]:
        """Create the object; returns ``(object, created)``, with the existing one when it was there."""
        meta = manifest["metadata"]
        model = _model(manifest["apiVersion"], manifest["kind"])
        try:
            obj = await self._client.create(model.from_dict(manifest))  # namespace: from the manifest
            return _as_dict(obj), True
        except lightkube.ApiError as exc:
            if _code(exc) != 409:
                raise KubeError(f"creating {manifest['kind']} {meta.get('namespace')}/{meta['name']}: {exc}",
                                _code(exc)) from exc
        existing = await self.get(manifest["apiVersion"], manifest["kind"], meta["name"], meta.get("namespace"))
        if existing is None:  # deleted between our create and our read: the next resync retries
            raise KubeError(f"{manifest['kind']} {meta['name']} vanished while being created", 409)
        return existing, False

    async def ensure(self, manifest: dict[str, Any]) -> dict[str, Any]:
        """The live object of that kind and name, created from ``manifest`` only when it is missing."""
        meta = manifest["metadata"]
        existing = await self.get(manifest["apiVersion"], manifest["kind"], meta["name"], meta.get("namespace"))
        if existing is not None:
            return existing
        obj, _ = await self.create(manifest)
        return obj

    async def list(self, api_version: str, kind: str, namespace: str) -> list[dict[str, Any]]:
        """Every object of a kind in a namespace (an unknown kind lists nothing)."""
        try:
            return [_as_dict(obj) async for obj in self._client.list(_model(api_version, kind), namespace=namespace)]
        except lightkube.ApiError as exc:
            if _code(exc) == 404:
                return []
            raise KubeError(f"listing {kind} in {namespace}: {exc}", _code(exc)) from exc

    async def patch(self, api_version: str, kind: str, name: str, namespace: str | None,
                    patch: dict[str, Any], *, status: bool = False) -> dict[str, Any]:
        """Merge-patch the object (or its ``/status``) and return the result."""
        model = _model(api_version, kind)
        try:
            obj = await self._client.patch(model.Status if status else model, name, patch,
                                           namespace=namespace, patch_type=PatchType.MERGE)
        except lightkube.ApiError as exc:
            raise KubeError(f"patching {kind} {namespace}/{name}: {exc}", _code(exc)) from exc
        return _as_dict(obj)

    async def delete(self, api_version: str, kind: str, name: str, namespace: str | None) -> bool:
        """Delete the object; returns ``False`` when it was already gone."""
        try:
            await self._client.delete(_model(api_version, kind), name, namespace=namespace)
        except lightkube.ApiError as exc:
            if _code(exc) == 404:
                return False
            raise KubeError(f"deleting {kind} {namespace}/{name}: {exc}", _code(exc)) from exc
        return True

    async def crd_installed(self, crd_name: str) -> bool:
        """Whether a CustomResourceDefinition of that name exists (e.g. CloudNativePG's)."""
        try:
            await self._client.get(_model("apiextensions.k8s.io/v1", "CustomResourceDefinition"), crd_name)
        except lightkube.ApiError as exc:
            if _code(exc) == 404:
                return False
            raise KubeError(f"reading CRD {crd_name}: {exc}", _code(exc)) from exc
        return True
