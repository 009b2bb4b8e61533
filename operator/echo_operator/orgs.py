"""Reconciliation of a MemoryOrg: database, migration Job, registration.

:func:`reconcile_org` is called by kopf's handlers (on create/update and on
every resync tick).  It is idempotent: it creates whatever child is missing,
reads the children's state and returns the complete new ``status`` block.
:func:`finalize_org` runs when a MemoryOrg is deleted.  Neither raises for
conditions a user can fix (a missing dependency, a missing Secret): those
become conditions with a message, and the next resync tries again.
"""

from __future__ import annotations

import dataclasses
import logging
import secrets
from collections.abc import Awaitable, Callable, Mapping
from typing import Any
from urllib.parse import unquote, urlsplit

from echo_memory.operator import conditions as c
from echo_memory.operator import names
from echo_memory.operator.backend import OrgNameTaken
from echo_memory.operator.context import Context
from echo_memory.operator.kube import KubeError
from echo_memory.operator.manifests import (
    b64,
    build_cnpg_cluster,
    build_connection_secret,
    build_db_service,
    build_db_statefulset,
    build_migration_job,
    decode_secret,
    owned_by,
)
from echo_memory.operator.manifests.pods import PodSettings
from echo_memory.operator.specs import InvalidSpec, OrgSpec, parse_agent, parse_org

log = logging.getLogger(__name__)

CONCRETE_PROVIDERS = ("CloudNativePG", "StatefulSet", "External")


@dataclasses.dataclass(frozen=True)
class DatabaseState:
    """Where provisioning of an org's database stands."""

    ready: bool
    reason: str
    message: str
    phase: str
    secret_name: str | None = None
    secret_key: str = "uri"
    database_url: str | None = None
    degraded: bool = False


async def resolve_provider(ctx: Context, spec: OrgSpec, status: Mapping[str, Any]) -> str:
    """The concrete provider: the spec's, or for ``Auto`` the one chosen before, else by discovery.

    ``Auto`` is pinned in ``status.provider`` once chosen, so installing
    CloudNativePG later never moves an existing org's data.
    """
    if spec.provider != "Auto":
        return spec.provider
    if status.get("provider") in CONCRETE_PROVIDERS:
        return str(status["provider"])
    return "CloudNativePG" if await ctx.kube.crd_installed(names.CNPG_CRD) else "StatefulSet"


async def _secret_url(ctx: Context, namespace: str, name: str, key: str) -> str | None:
    secret = await ctx.kube.get("v1", "Secret", name, namespace)
    if secret is None:
        return None
    return decode_secret(secret).get(key)


async def _external(ctx: Context, spec: OrgSpec, namespace: str) -> DatabaseState:
    assert spec.secret_ref is not None  # parse_org guarantees it for External
    ref = spec.secret_ref
    secret = await ctx.kube.get("v1", "Secret", ref.name, namespace)
    if secret is None:
        return DatabaseState(False, c.REASON_SECRET_MISSING,
                             f"Secret {namespace}/{ref.name} named in spec.database.secretRef does not exist",
                             "Waiting for database Secret", degraded=True)
    url = decode_secret(secret).get(ref.key, "")
    if not url.startswith(("postgresql://", "postgres://")):
        return DatabaseState(False, c.REASON_SECRET_INVALID,
                             f"Secret {namespace}/{ref.name} has no key {ref.key!r} holding a postgresql:// URI",
                             "Waiting for database Secret", degraded=True)
    return DatabaseState(True, c.REASON_DATABASE_AVAILABLE, f"external database from Secret {ref.name}",
                         "Database ready", ref.name, ref.key, url)


async def _cloudnativepg(ctx: Context, spec: OrgSpec, name: str, namespace: str) -> DatabaseState:
    if not await ctx.kube.crd_installed(names.CNPG_CRD):
        return DatabaseState(
            False, c.REASON_DEPENDENCY_MISSING,
            f"CloudNativePG is not installed (CRD {names.CNPG_CRD} not found): install its operator, "
            "or set spec.database.provider to StatefulSet or External",
            "Waiting for CloudNativePG", degraded=True)
    cluster = await ctx.kube.ensure(build_cnpg_cluster(
        org_resource=name, namespace=namespace, instances=spec.instances, storage=spec.storage,
        storage_class=spec.storage_class, image=spec.image_name or ctx.config.cnpg_image))
    secret_name = names.db_secret_name(name)
    ready_instances = int((cluster.get("status") or {}).get("readyInstances") or 0)
    url = await _secret_url(ctx, namespace, secret_name, "uri")
    if ready_instances < 1 or url is None:
        return DatabaseState(False, c.REASON_PROVISIONING,
                             f"waiting for CloudNativePG Cluster {names.db_cluster_name(name)} "
                             f"({ready_instances}/{spec.instances} instances ready)", "Provisioning database",
                             secret_name)
    return DatabaseState(True, c.REASON_DATABASE_AVAILABLE,
                         f"CloudNativePG Cluster {names.db_cluster_name(name)} has {ready_instances} ready "
                         "instance(s)", "Database ready", secret_name, "uri", url)


async def _statefulset(ctx: Context, spec: OrgSpec, name: str, namespace: str) -> DatabaseState:
    secret_name = names.db_secret_name(name)
    sts_name = names.db_cluster_name(name)
    secret = await ctx.kube.get("v1", "Secret", secret_name, namespace)
    sts = await ctx.kube.get("apps/v1", "StatefulSet", sts_name, namespace)
    if secret is None and sts is not None:
        # A new password would not match the existing data directory: a person must restore it.
        return DatabaseState(False, c.REASON_SECRET_MISSING,
                             f"connection Secret {secret_name} was deleted while StatefulSet {sts_name} still "
                             "holds the data; restore the Secret (the operator will not invent a new password)",
                             "Database Secret lost", secret_name, degraded=True)
    if secret is None:
        secret = await ctx.kube.ensure(build_connection_secret(
            org_resource=name, namespace=namespace, password=secrets.token_urlsafe(24)))
    await ctx.kube.ensure(build_db_service(org_resource=name, namespace=namespace))
    if sts is None:
        sts = await ctx.kube.ensure(build_db_statefulset(
            org_resource=name, namespace=namespace, image=spec.image_name or ctx.config.postgres_image,
            storage=spec.storage, storage_class=spec.storage_class,
            delete_volumes_with_set=spec.deletion_policy == "Delete",
            pod=PodSettings.model_validate(ctx.config.pod_settings_json)))
    if int((sts.get("status") or {}).get("readyReplicas") or 0) < 1:
        return DatabaseState(False, c.REASON_PROVISIONING, f"waiting for StatefulSet {sts_name} to be ready",
                             "Provisioning database", secret_name)
    url = decode_secret(secret).get("uri")
    return DatabaseState(True, c.REASON_DATABASE_AVAILABLE, f"StatefulSet {sts_name} is ready",
                         "Database ready", secret_name, "uri", url)


async def ensure_database(ctx: Context, spec: OrgSpec, provider: str, name: str, namespace: str) -> DatabaseState:
    """Create the org's database objects if missing and report whether the database is usable."""
    if provider == "External":
        return await _external(ctx, spec, namespace)
    if provider == "CloudNativePG":
        return await _cloudnativepg(ctx, spec, name, namespace)
    return await _statefulset(ctx, spec, name, namespace)


def _job_outcome(job: Mapping[str, Any]) -> str:
    """``succeeded``, ``failed`` or ``running`` from a Job's status."""
    status = job.get("status") or {}
    if int(status.get("succeeded") or 0) >= 1:
        return "succeeded"
    for cond in status.get("conditions") or []:
        if cond.get("type") == "Failed" and cond.get("status") == "True":
            return "failed"
    backoff = int((job.get("spec") or {}).get("backoffLimit", 6))
    if int(status.get("failed") or 0) > backoff:
        return "failed"
    return "running"


def _where(url: str) -> str:
    """A database URL without its credentials, for messages."""
    parts = urlsplit(url)
    return f"{parts.hostname}:{parts.port or 5432}{parts.path}"


def registry_owner(namespace: str, name: str) -> str:
    """How a MemoryOrg is named as the owner of its registry entry."""
    return f"MemoryOrg {namespace}/{name}"


async def _registry(ctx: Context, out: c.StatusBuilder, org: str,
                    call: Callable[[], Awaitable[None]]) -> dict[str, Any] | None:
    """Run one registry write; ``None`` when it went through, else the status block reporting why not."""
    try:
        await call()
    except OrgNameTaken as exc:
        where = f" ({_where(exc.where)})" if exc.where else ""
        msg = (f"org {org} is already registered by {exc.owner or 'another registrant'}{where}; choose another "
               "spec.orgName, or delete that registration's owner")
        out.field("registered", False)
        out.set_false(c.READY, c.REASON_ORG_CONFLICT, msg)
        out.set_true(c.DEGRADED, c.REASON_ORG_CONFLICT, msg)
        out.phase("Org name in use", msg)
        return out.build()
    except Exception as exc:  # any bus failure (bounded by the backend's timeout): report it, retry at resync
        msg = f"registering org {org} on NATS failed ({type(exc).__name__}: {exc})"
        log.warning(msg)
        out.field("registered", False)
        out.set_false(c.READY, c.REASON_REGISTRATION_FAILED, msg)
        out.set_true(c.DEGRADED, c.REASON_REGISTRATION_FAILED, msg)
        out.phase("Registration failed", msg)
        return out.build()
    return None


async def _store_credentials(ctx: Context, org: str, database_url: str) -> str | None:
    """Put the org's password in the services' credentials Secret; returns its key (``None``: not configured).

    The registry entry then carries the URL without its password and this key, so the password lives in
    Secrets only (the connection Secret and the one the services mount), never in the NATS bucket.
    """
    secret_name, namespace = ctx.config.credentials_secret, ctx.config.credentials_namespace
    if not secret_name or not namespace:
        return None
    password = urlsplit(database_url).password
    if password is None:
        return None
    wanted = b64(unquote(password))
    secret = await ctx.kube.get("v1", "Secret", secret_name, namespace)
    if secret is None:
        raise KubeError(f"credentials Secret {namespace}/{secret_name} does not exist (the chart creates it)", 404)
    if (secret.get("data") or {}).get(org) != wanted:
        await ctx.kube.patch("v1", "Secret", secret_name, namespace, {"data": {org: wanted}})
    return org


async def reconcile_org(ctx: Context, body: Mapping[str, Any]) -> dict[str, Any]:
    """Move one MemoryOrg one step closer to Ready; returns its complete new ``status``."""
    meta, status = body["metadata"], dict(body.get("status") or {})
    name, namespace = meta["name"], meta["namespace"]
    out = c.StatusBuilder(status, meta.get("generation"))
    try:
        spec = parse_org(name, body.get("spec") or {})
    except InvalidSpec as exc:
        out.set_false(c.READY, c.REASON_INVALID_SPEC, str(exc))
        out.set_true(c.DEGRADED, c.REASON_INVALID_SPEC, str(exc))
        out.phase("Invalid spec", str(exc))
        return out.build()

    pinned = status.get("provider")
    if pinned in CONCRETE_PROVIDERS and spec.provider not in ("Auto", pinned):
        msg = (f"spec.database.provider changed from {pinned} to {spec.provider}: an org's data is never moved "
               f"between providers; set it back to {pinned} (or Auto), or create a new MemoryOrg")
        out.set_false(c.READY, c.REASON_INVALID_SPEC, msg)
        out.set_true(c.DEGRADED, c.REASON_INVALID_SPEC, msg)
        out.phase("Invalid spec", msg)
        return out.build()
    provider = await resolve_provider(ctx, spec, status)
    out.field("org", spec.org)
    out.field("provider", provider)
    db = await ensure_database(ctx, spec, provider, name, namespace)
    if db.secret_name:
        out.field("connectionSecret", db.secret_name)
        out.field("connectionSecretKey", db.secret_key)
    if not db.ready or db.database_url is None:
        out.set_false(c.DATABASE_READY, db.reason, db.message)
        if not c.is_true(status, c.MIGRATED):
            out.set_false(c.MIGRATED, c.REASON_WAITING_FOR_DATABASE, "waiting for the database")
        out.set_false(c.READY, db.reason, db.message)
        if db.degraded:
            out.set_true(c.DEGRADED, db.reason, db.message)
        else:
            out.set_false(c.DEGRADED, c.REASON_HEALTHY, "nothing wrong so far")
        out.phase(db.phase, db.message)
        return out.build()
    out.set_true(c.DATABASE_READY, db.reason, db.message)

    # The name is won before anything touches the database: a MemoryOrg that lost a name conflict never
    # runs a migration Job against the database its Secret names.
    owner = registry_owner(namespace, name)
    claimed = await _registry(ctx, out, spec.org, lambda: ctx.backend.claim_org(
        spec.org, owner=owner, database_url=db.database_url or "", serve=False))
    if claimed is not None:
        return claimed

    target = ctx.config.target_schema_version()
    version = int(status.get("schemaVersion") or 0)
    if not (c.is_true(status, c.MIGRATED) and version >= target):
        job_manifest = owned_by(build_migration_job(
            org_resource=name, namespace=namespace, schema_version=target, image=ctx.config.image,
            image_pull_policy=ctx.config.image_pull_policy, secret_name=db.secret_name or "",
            secret_key=db.secret_key, pod=PodSettings.model_validate(ctx.config.pod_settings_json)), body)
        job = await ctx.kube.ensure(job_manifest)
        job_name = job["metadata"]["name"]
        out.field("migrationJob", job_name)
        outcome = _job_outcome(job)
        if outcome == "failed":
            msg = f"migration Job {job_name} failed: see `kubectl logs job/{job_name}`"
            out.set_false(c.MIGRATED, c.REASON_MIGRATION_FAILED, msg)
            out.set_false(c.READY, c.REASON_MIGRATION_FAILED, msg)
            out.set_true(c.DEGRADED, c.REASON_MIGRATION_FAILED, msg)
            out.phase("Migration failed", msg)
            return out.build()
        if outcome == "running":
            msg = f"migration Job {job_name} is bringing the schema to version {target}"
            out.set_false(c.MIGRATED, c.REASON_MIGRATING, msg)
            out.set_false(c.READY, c.REASON_MIGRATING, msg)
            out.set_false(c.DEGRADED, c.REASON_HEALTHY, "nothing wrong so far")
            out.phase("Migrating schema", msg)
            return out.build()
        version = target
        out.set_true(c.MIGRATED, c.REASON_MIGRATED, f"schema is at version {target} (Job {job_name})")

    async def serve() -> None:
        password_file = await _store_credentials(ctx, spec.org, db.database_url or "")
        await ctx.backend.claim_org(spec.org, owner=owner, database_url=db.database_url or "", serve=True,
                                    password_file=password_file)

    served = await _registry(ctx, out, spec.org, serve)
    if served is not None:
        return served
    out.field("schemaVersion", version)
    out.field("registered", True)
    msg = f"org {spec.org} is served (schema version {version})"
    out.set_true(c.READY, c.REASON_REGISTERED, msg)
    out.set_false(c.DEGRADED, c.REASON_HEALTHY, "all children are healthy")
    out.phase("Ready", msg)
    return out.build()


async def finalize_org(ctx: Context, body: Mapping[str, Any]) -> list[str]:
    """Revoke the org's agent tokens, unregister it, and with ``deletionPolicy: Delete`` delete its database objects.

    The tokens of every MemoryAgent naming this org are revoked in the org's database and their token
    Secrets deleted: the database outlives the MemoryOrg with ``Orphan``, and a token must not come back
    to life when an org is later created on it again.  Only this MemoryOrg's own registry entry is
    removed (a MemoryOrg that lost a name conflict removes nothing).  Returns the ``Kind/name`` of every
    object deleted.  An External database's Secret is never deleted: the operator did not create it.

    Raises:
        Exception: the org's database could not be reached to revoke tokens (kopf retries the finalizer).
    """
    meta, status = body["metadata"], dict(body.get("status") or {})
    name, namespace = meta["name"], meta["namespace"]
    try:
        spec = parse_org(name, body.get("spec") or {})
    except InvalidSpec:
        return []  # nothing was ever provisioned for an invalid spec
    deleted = await _revoke_org_agents(ctx, body)
    try:
        await ctx.backend.release_org(spec.org, owner=registry_owner(namespace, name))
    except Exception as exc:  # the org's routing entry is harmless once its tokens are revoked
        log.warning("unregistering org %s failed (%s: %s)", spec.org, type(exc).__name__, exc)
    await _drop_credentials(ctx, spec.org)
    if spec.deletion_policy != "Delete":
        return deleted
    provider = status.get("provider") or spec.provider
    children: list[tuple[str, str, str]] = []
    if provider in ("CloudNativePG", "Auto"):
        children.append((names.CNPG_API_VERSION, "Cluster", names.db_cluster_name(name)))
    if provider in ("StatefulSet", "Auto"):
        children += [("apps/v1", "StatefulSet", names.db_cluster_name(name)),
                     ("v1", "Service", names.db_cluster_name(name)),
                     ("v1", "Secret", names.db_secret_name(name))]
    for api_version, kind, child in children:
        if kind == "Cluster" and not await ctx.kube.crd_installed(names.CNPG_CRD):
            continue
        if await ctx.kube.delete(api_version, kind, child, namespace):
            deleted.append(f"{kind}/{child}")
    return deleted


async def _revoke_org_agents(ctx: Context, org_body: Mapping[str, Any]) -> list[str]:
    """Revoke the tokens of every MemoryAgent of this org and delete their Secrets; returns what was deleted."""
    meta = org_body["metadata"]
    namespace = meta["namespace"]
    agents = [a for a in await ctx.kube.list(names.API_VERSION, names.AGENT_KIND, namespace)
              if (a.get("spec") or {}).get("org") == meta["name"]]
    if not agents:
        return []
    url = await org_database_url(ctx, org_body)
    deleted = []
    for agent in agents:
        try:
            agent_spec = parse_agent(agent["metadata"]["name"], agent.get("spec") or {})
        except InvalidSpec:
            continue
        if url:
            await ctx.backend.revoke_agent_tokens(url, agent_id=agent_spec.agent_id)
        secret = agent_spec.secret_name or names.token_secret_name(agent["metadata"]["name"])
        if await ctx.kube.delete("v1", "Secret", secret, namespace):
            deleted.append(f"Secret/{secret}")
    return deleted


async def _drop_credentials(ctx: Context, org: str) -> None:
    secret_name, namespace = ctx.config.credentials_secret, ctx.config.credentials_namespace
    if not secret_name or not namespace:
        return
    secret = await ctx.kube.get("v1", "Secret", secret_name, namespace)
    if secret is not None and org in (secret.get("data") or {}):
        await ctx.kube.patch("v1", "Secret", secret_name, namespace, {"data": {org: None}})


async def org_database_url(ctx: Context, org_body: Mapping[str, Any]) -> str | None:
    """The database URL of a Ready MemoryOrg, read from its connection Secret (``None`` if unknown)."""
    status = org_body.get("status") or {}
    secret = status.get("connectionSecret")
    if not secret:
        return None
    return await _secret_url(ctx, org_body["metadata"]["namespace"], secret,
                             status.get("connectionSecretKey") or "uri")
