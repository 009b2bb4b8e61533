"""kopf handlers: thin plain functions over the reconcilers, and the registry that wires them.

Every kind gets the same three hooks: a resync timer (fires as soon as an
object is seen, then every ``resync_seconds``: it creates, heals drift and
notices children becoming ready), an update hook on ``spec`` for a quick
reaction, and a delete hook (which makes kopf add our finalizer).  A
per-object lock keeps the timer and the update hook from reconciling the
same object at once.  The functions stay callable directly in tests with a
``kopf.Body``, a ``kopf.Patch`` and a memo holding a
:class:`~echo_memory.operator.context.Context`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import kopf

from echo_memory.operator import names
from echo_memory.operator.backend import LiveBackend
from echo_memory.operator.config import OperatorConfig
from echo_memory.operator.context import Context
from echo_memory.operator.dependents import finalize_agent, reconcile_agent, reconcile_scope
from echo_memory.operator.kube import Kube
from echo_memory.operator.orgs import finalize_org, reconcile_org

Reconciler = Callable[[Context, Mapping[str, Any]], Awaitable[dict[str, Any]]]

_locks: dict[str, asyncio.Lock] = {}


TIMER_EXIT_POLL_SECONDS = 1.0


def _lock(body: Mapping[str, Any]) -> asyncio.Lock:
    meta = body["metadata"]
    key = meta.get("uid") or f"{body.get('kind')}/{meta.get('namespace')}/{meta['name']}"
    return _locks.setdefault(key, asyncio.Lock())


def _post_phase_event(body: kopf.Body, old: Mapping[str, Any], new: Mapping[str, Any]) -> None:
    """Post a Kubernetes Event when the phase changes (warnings for failing phases)."""
    if new.get("phase") == old.get("phase"):
        return
    reason = "".join(w.capitalize() for w in str(new.get("phase", "Unknown")).split()) or "Unknown"
    message = str(new.get("message", ""))[:1024]
    degraded = any(cond.get("type") == "Degraded" and cond.get("status") == "True"
                   for cond in new.get("conditions") or [])
    with contextlib.suppress(LookupError):  # called outside a running operator (unit tests): no event queue
        (kopf.warn if degraded else kopf.info)(body, reason=reason, message=message)


async def _still_there(ctx: Context, body: Mapping[str, Any]) -> bool:
    """Whether the object exists and is not being deleted, read now from the API server."""
    meta = body["metadata"]
    live = await ctx.kube.get(body["apiVersion"], body["kind"], meta["name"], meta.get("namespace"))
    return live is not None and not live["metadata"].get("deletionTimestamp")


async def _reconcile(reconciler: Reconciler, body: kopf.Body, patch: kopf.Patch, memo: kopf.Memo) -> None:
    if body["metadata"].get("deletionTimestamp"):
        return  # being deleted: never recreate children the finalizer may be removing
    async with _lock(body):
        # A finalizer may have run while this waited for the lock: never re-create what it removed
        # (a token issued after the agent's tokens were revoked would stay live).
        if not await _still_there(memo.ctx, body):
            return
        status = await reconciler(memo.ctx, body)
    _post_phase_event(body, body.get("status") or {}, status)
    patch.status.update(status)


async def org_reconcile(body: kopf.Body, patch: kopf.Patch, memo: kopf.Memo, **_: Any) -> None:
    """Reconcile a MemoryOrg and write its status."""
    await _reconcile(reconcile_org, body, patch, memo)


async def scope_reconcile(body: kopf.Body, patch: kopf.Patch, memo: kopf.Memo, **_: Any) -> None:
    """Reconcile a MemoryScope and write its status."""
    await _reconcile(reconcile_scope, body, patch, memo)


async def agent_reconcile(body: kopf.Body, patch: kopf.Patch, memo: kopf.Memo, **_: Any) -> None:
    """Reconcile a MemoryAgent and write its status."""
    await _reconcile(reconcile_agent, body, patch, memo)


async def org_delete(body: kopf.Body, memo: kopf.Memo, logger: logging.Logger, **_: Any) -> None:
    """Unregister a MemoryOrg and apply its deletionPolicy."""
    async with _lock(body):
        deleted = await finalize_org(memo.ctx, body)
    logger.info("MemoryOrg deleted; removed %s", ", ".join(deleted) or "nothing (deletionPolicy Orphan)")
    _locks.pop(body["metadata"].get("uid", ""), None)


async def agent_delete(body: kopf.Body, memo: kopf.Memo, logger: logging.Logger, **_: Any) -> None:
    """Revoke a MemoryAgent's tokens and delete its Secret."""
    async with _lock(body):
        revoked = await finalize_agent(memo.ctx, body)
    logger.info("MemoryAgent deleted; %d token(s) revoked", revoked)
    _locks.pop(body["metadata"].get("uid", ""), None)


async def login(**kwargs: Any) -> kopf.ConnectionInfo | None:
    """In-cluster service account first, then ``$KUBECONFIG`` (a custom registry has no default)."""
    return kopf.login_with_service_account(**kwargs) or kopf.login_with_kubeconfig(**kwargs)


async def startup(settings: kopf.OperatorSettings, memo: kopf.Memo, **_: Any) -> None:
    """Tune kopf and build the shared :class:`Context` (unless a test put one in the memo)."""
    config: OperatorConfig = memo.get("config") or OperatorConfig.from_env()
    settings.persistence.finalizer = names.FINALIZER
    # Keep kopf's bookkeeping in our own annotations so the CRD status schema stays explicit.
    settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix=names.GROUP)
    settings.persistence.diffbase_storage = kopf.AnnotationsDiffBaseStorage(prefix=names.GROUP)
    # Phase changes are posted as Events (kopf.info/warn); kopf's own per-object chatter ("Timer 'resync'
    # succeeded", every resync) follows the configured log level, so it neither logs nor posts by default.
    settings.posting.level = logging.INFO
    # A deletion that meets a resync run in progress waits for it to end, then kopf checks again
    # after this many seconds (60 by default): a run takes well under a second.
    settings.background.cancellation_polling = TIMER_EXIT_POLL_SECONDS
    logging.getLogger("kopf").setLevel(logging.getLevelName(config.log_level.upper()))
    if config.namespaces:
        settings.scanning.disabled = True  # fixed namespace names: no need to list namespaces (least RBAC)
    if "ctx" not in memo:
        memo.ctx = Context(kube=Kube(), config=config, backend=memo.get("backend") or LiveBackend(
            config.nats_url, timeout=config.bus_timeout_seconds))


async def cleanup(memo: kopf.Memo, **_: Any) -> None:
    """Close the API client and the NATS connection when the operator stops."""
    ctx = memo.get("ctx")
    if ctx is not None:
        await ctx.kube.close()
        close = getattr(ctx.backend, "close", None)
        if close is not None:
            await close()


def build_registry(config: OperatorConfig) -> kopf.OperatorRegistry:
    """A fresh kopf registry with every handler of the operator, timed by ``config``."""
    reg = kopf.OperatorRegistry()
    kopf.on.login(registry=reg)(login)
    kopf.on.startup(registry=reg)(startup)
    kopf.on.cleanup(registry=reg)(cleanup)
    kinds: list[tuple[str, Callable[..., Awaitable[None]], Callable[..., Awaitable[None]] | None]] = [
        (names.ORG_PLURAL, org_reconcile, org_delete),
        (names.SCOPE_PLURAL, scope_reconcile, None),  # a scope's facts are never deleted
        (names.AGENT_PLURAL, agent_reconcile, agent_delete),
    ]
    # A failed reconcile (an API call timing out under load) is tried again after one resync
    # interval, as a healthy object would be, not after kopf's default of 60 s.
    retry = config.resync_seconds
    for plural, reconcile_fn, delete_fn in kinds:
        kopf.timer(group=names.GROUP, version=names.VERSION, plural=plural, id="resync",
                   interval=config.resync_seconds, backoff=retry, registry=reg)(reconcile_fn)
        kopf.on.update(group=names.GROUP, version=names.VERSION, plural=plural, id="spec-changed",
                       field="spec", backoff=retry, registry=reg)(reconcile_fn)
        if delete_fn is not None:
            kopf.on.delete(group=names.GROUP, version=names.VERSION, plural=plural, id="finalize",
                           registry=reg)(delete_fn)
    return reg
