"""A kmock ``KubernetesEmulator`` made faithful enough for kopf (kmock is pinned at 0.8).

Vanilla kmock 0.8 loses kopf in several ways:
no uid/resourceVersion/generation, watches that replay everything instead of
resuming, a window between a watch's snapshot and its subscription in which
events are lost, no apiVersion/kind/namespace filled from the URL, no
``generateName``, ``/status`` patches that also change the body, and 500 instead
of 422 for a failed JSON-patch ``test``, and a ``charset`` on error bodies that
hides them from lightkube.  :class:`ApiServer` fixes each of these
and nothing more; ``test_emulator.py`` pins every fix.

What it still does not do (and the tests must not assume): admission, schema
validation or pruning, label selectors, server-side apply, PUT, garbage
collection by ownerReferences, and any controller (pods, Job completion…).
"""

from __future__ import annotations

import asyncio
import collections
import datetime
import uuid
from collections.abc import AsyncIterator
from typing import Any

import attrs
import jsonpatch
import kmock
from kmock import action


@attrs.mutable(weakref_slot=True)
class _JournalBus(kmock.Bus):  # type: ignore[misc]
    """A bus that also remembers every event with its resourceVersion, for watch resumption."""

    journal: list[tuple[int, dict[str, Any]]] = attrs.field(factory=list, init=False)

    async def put(self, *items: Any) -> None:
        for item in items:
            rv = str(((item.get("object") or {}).get("metadata") or {}).get("resourceVersion", "0"))
            self.journal.append((int(rv) if rv.isdigit() else 0, item))
        await super().put(*items)


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@attrs.define(kw_only=True)
class ApiServer(kmock.KubernetesEmulator):  # type: ignore[misc]
    """kmock's emulator plus the API-server behaviour kopf depends on."""

    _last_rv: int = attrs.field(default=100, init=False)
    _writes: asyncio.Lock = attrs.field(factory=asyncio.Lock, init=False)

    def __attrs_post_init__(self) -> None:
        super().__attrs_post_init__()
        self._buses = collections.defaultdict(_JournalBus)

    def _bump(self) -> str:
        self._last_rv += 1
        return str(self._last_rv)

    def _visible(self, request: Any, event: dict[str, Any]) -> bool:
        meta = (event.get("object") or {}).get("metadata") or {}
        return ((request.namespace is None or meta.get("namespace") == request.namespace)
                and (request.name is None or meta.get("name") == request.name))

    def _current(self, request: Any) -> list[dict[str, Any]]:
        return [obj.raw for (res, ns, name), obj in self._objects.items()
                if res == request.resource and not obj.deleted
                and (request.namespace is None or ns == request.namespace)
                and (request.name is None or name == request.name)]

    async def _serve_list(self, request: Any) -> Any:
        async with self._writes:
            result = await super()._serve_list(request)
            result["metadata"]["resourceVersion"] = str(self._last_rv)  # a real, resumable version
        return result

    async def _serve_watch(self, request: Any) -> AsyncIterator[Any]:
        yield b""  # headers first, as the base class does
        since = str(request.params.get("resourceVersion", ""))
        bus = self._buses[request.resource]
        # Hold the write lock from the snapshot to the bus mark, so no event falls in between.
        async with self._writes, self._lock:
            marker = await bus.mark()
            if since.isdigit() and int(since) > 0:
                backlog = [event for rv, event in bus.journal if rv > int(since)]
            else:
                backlog = [{"type": "ADDED", "object": raw} for raw in self._current(request)]
        try:
            for event in backlog:
                if self._visible(request, event):
                    yield event
            async for event in bus.stream(since=marker):
                if self._visible(request, event):
                    yield event
        finally:
            await bus.unmark(marker)

    def _stamp_create(self, request: Any, data: dict[str, Any], rv: str) -> None:
        res = request.resource
        data.setdefault("apiVersion", f"{res.group}/{res.version}" if res.group else res.version)
        info = self._resources.get(res)
        if info is not None and info.kind:
            data.setdefault("kind", info.kind)
        meta = data.setdefault("metadata", {})
        if not meta.get("name") and meta.get("generateName"):
            meta["name"] = meta["generateName"] + uuid.uuid4().hex[:5]
        if request.namespace:
            meta.setdefault("namespace", request.namespace)
        meta.update(uid=str(uuid.uuid4()), resourceVersion=rv, generation=1, creationTimestamp=_now())

    def _stamp_merge(self, request: Any, data: dict[str, Any], rv: str) -> None:
        info = self._resources.get(request.resource)
        if request.subresource == "status":
            for key in [k for k in data if k != "status"]:
                del data[key]  # /status changes the status only
        elif info is not None and "status" in info.subresources:
            data.pop("status", None)  # and the main resource never changes the status
        meta = data.setdefault("metadata", {})
        meta["resourceVersion"] = rv
        key = (request.resource, request.namespace, request.name)
        if "spec" in data and key in self._objects and not self._objects[key].deleted:
            meta["generation"] = int(self._objects[key].get("metadata", {}).get("generation", 1)) + 1

    async def _handle(self, request: Any) -> Any:
        mutating = request.action in (action.CREATE, action.UPDATE, action.DELETE)
        if request.resource is None or not mutating:
            return await super()._handle(request)
        async with self._writes:
            data, rv = request.data, self._bump()
            if request.action == action.CREATE and isinstance(data, dict):
                self._stamp_create(request, data, rv)
            elif request.action == action.UPDATE and isinstance(data, dict):
                self._stamp_merge(request, data, rv)
            elif request.action == action.UPDATE and isinstance(data, list):
                data.append({"op": "add", "path": "/metadata/resourceVersion", "value": rv})
            elif request.action == action.DELETE and request.name:
                key = (request.resource, request.namespace, request.name)
                if key in self._objects and not self._objects[key].deleted:
                    last = self._objects[key].last
                    last["metadata"] = {**last.raw.get("metadata", {}), "resourceVersion": rv}
            try:
                return await super()._handle(request)
            except (jsonpatch.JsonPatchConflict, jsonpatch.JsonPatchTestFailed) as exc:
                return await self._render_error(kmock.KubernetesError(status=422, reason="Invalid",
                                                                      message=str(exc)))

    async def _render_error(self, exc: Exception) -> Any:
        response = await super()._render_error(exc)
        # A real API server says "application/json" without a charset; lightkube only
        # recognises a Status body (and raises ApiError) on that exact content type.
        response.charset = None
        return response

    # -- helpers for tests -------------------------------------------------------------------

    def register_crd(self, crd: dict[str, Any]) -> None:
        """Serve a CRD's resource in discovery (POSTing a CRD does not do that in kmock)."""
        spec = crd["spec"]
        for version in spec["versions"]:
            if not version.get("served", True):
                continue
            self.resources[f"{spec['group']}/{version['name']}/{spec['names']['plural']}"] = kmock.ResourceInfo(
                kind=spec["names"]["kind"], singular=spec["names"].get("singular"),
                namespaced=spec["scope"] == "Namespaced", shortnames=set(spec["names"].get("shortNames", [])),
                subresources=set(version.get("subresources") or {}),
                verbs={"get", "list", "watch", "create", "update", "patch", "delete"})

    def live(self, resource: str, namespace: str | None, name: str) -> dict[str, Any] | None:
        """The live object (a plain dict), or ``None`` when absent or deleted."""
        key = (kmock.resource(resource), namespace, name)
        if key not in self._objects or self._objects[key].deleted:
            return None
        return dict(self._objects[key].raw)
