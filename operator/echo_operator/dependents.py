"""Reconciliation of the objects that live inside an org: MemoryScope and MemoryAgent.

Both wait for their MemoryOrg to be Ready, then act on the org's database
through the :class:`~echo_memory.operator.backend.Backend`.  Each function returns
the complete new ``status`` block; waiting and backend failures become a
``Ready=False`` condition that the next resync re-examines.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Mapping
from typing import Any

from echo_memory.operator import conditions as c
from echo_memory.operator import names
from echo_memory.operator.context import Context
from echo_memory.operator.manifests import build_token_secret, owned_by
from echo_memory.operator.orgs import org_database_url
from echo_memory.operator.specs import AgentSpec, InvalidSpec, parse_agent, parse_scope

log = logging.getLogger(__name__)


class _Wait(Exception):
    """The org is not usable yet; carries the reason and message for the status."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


async def _ready_org(ctx: Context, org_resource: str, namespace: str) -> tuple[str, str]:
    """``(org name, database URL)`` of a Ready MemoryOrg, else raises :class:`_Wait`."""
    org = await ctx.kube.get(names.API_VERSION, names.ORG_KIND, org_resource, namespace)
    if org is None:
        raise _Wait(c.REASON_ORG_NOT_FOUND, f"MemoryOrg {namespace}/{org_resource} does not exist")
    if not c.is_true(org.get("status"), c.READY):
        raise _Wait(c.REASON_ORG_NOT_READY, f"waiting for MemoryOrg {org_resource} to be Ready")
    url = await org_database_url(ctx, org)
    if not url:
        raise _Wait(c.REASON_ORG_NOT_READY, f"MemoryOrg {org_resource} has no readable connection Secret")
    return str(org["status"].get("org") or org_resource), url


def _not_ready(out: c.StatusBuilder, reason: str, message: str, phase: str) -> dict[str, Any]:
    out.set_false(c.READY, reason, message)
    out.phase(phase, message)
    return out.build()


async def reconcile_scope(ctx: Context, body: Mapping[str, Any]) -> dict[str, Any]:
    """Ensure the scope exists in its org's database and refresh its fact count."""
    meta = body["metadata"]
    out = c.StatusBuilder(body.get("status"), meta.get("generation"))
    try:
        spec = parse_scope(meta["name"], body.get("spec") or {})
    except InvalidSpec as exc:
        return _not_ready(out, c.REASON_INVALID_SPEC, str(exc), "Invalid spec")
    out.field("scope", spec.scope)
    try:
        org, url = await _ready_org(ctx, spec.org_resource, meta["namespace"])
        out.field("org", org)
        await ctx.backend.ensure_scope(url, name=spec.scope, description=spec.description,
                                       readers=list(spec.readers), writers=list(spec.writers),
                                       retention_days=spec.retention_days)
        stats = {s["name"]: s for s in await ctx.backend.scope_stats(url)}
    except _Wait as exc:
        return _not_ready(out, exc.reason, str(exc), "Waiting for org")
    except Exception as exc:  # database unreachable, permission…: report and retry at next resync
        msg = f"ensuring scope {spec.scope} failed ({type(exc).__name__}: {exc})"
        log.warning(msg)
        return _not_ready(out, c.REASON_BACKEND_ERROR, msg, "Failed")
    mine = stats.get(spec.scope) or {}
    out.field("facts", int(mine.get("facts") or 0))
    last_write = mine.get("last_write")
    if last_write is not None:
        out.field("lastWrite", last_write if isinstance(last_write, str) else last_write.isoformat())
    msg = f"scope {spec.scope} exists in org {org}"
    out.set_true(c.READY, c.REASON_SCOPE_ENSURED, msg)
    out.phase("Ready", msg)
    return out.build()


def token_spec_hash(org: str, spec: AgentSpec) -> str:
    """A short digest of what a token grants; a change means the token must be re-issued."""
    doc = {"org": org, "agent": spec.agent_id, "read": sorted(spec.read_scopes),
           "write": sorted(spec.write_scopes)}
    return hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()[:16]


async def reconcile_agent(ctx: Context, body: Mapping[str, Any]) -> dict[str, Any]:
    """Make sure the agent's token Secret exists and matches its spec; re-issue it when not.

    A missing Secret (deleted by hand) or changed scopes revoke every token of
    the agent and issue a fresh one: the plain token is only known at issue time.
    """
    meta = body["metadata"]
    name, namespace = meta["name"], meta["namespace"]
    out = c.StatusBuilder(body.get("status"), meta.get("generation"))
    try:
        spec = parse_agent(name, body.get("spec") or {})
    except InvalidSpec as exc:
        return _not_ready(out, c.REASON_INVALID_SPEC, str(exc), "Invalid spec")
    secret_name = spec.secret_name or names.token_secret_name(name)
    out.field("agentId", spec.agent_id)
    out.field("tokenSecret", secret_name)
    try:
        org, url = await _ready_org(ctx, spec.org_resource, namespace)
        out.field("org", org)
        wanted = token_spec_hash(org, spec)
        secret = await ctx.kube.get("v1", "Secret", secret_name, namespace)
        current = ((secret or {}).get("metadata", {}).get("annotations") or {}).get(names.ANNOTATION_TOKEN_HASH)
        if secret is None or current != wanted:
            await ctx.backend.revoke_agent_tokens(url, agent_id=spec.agent_id)
            token = await ctx.backend.issue_token(url, org=org, agent_id=spec.agent_id,
                                                  read_scopes=list(spec.read_scopes),
                                                  write_scopes=list(spec.write_scopes))
            manifest = owned_by(build_token_secret(
                agent_resource=name, secret_name=secret_name, namespace=namespace, org=org,
                agent_id=spec.agent_id, token=token, spec_hash=wanted), body)
            _, created = await ctx.kube.create(manifest)
            if not created:
                await ctx.kube.patch("v1", "Secret", secret_name, namespace,
                                     {"metadata": {"annotations": manifest["metadata"]["annotations"]},
                                      "data": manifest["data"]})
            out.field("tokenIssuedAt", c.now_rfc3339())
    except _Wait as exc:
        return _not_ready(out, exc.reason, str(exc), "Waiting for org")
    except Exception as exc:  # database or API failure: report and retry at next resync
        msg = f"issuing the token of {spec.agent_id} failed ({type(exc).__name__}: {exc})"
        log.warning(msg)
        return _not_ready(out, c.REASON_BACKEND_ERROR, msg, "Failed")
    msg = f"token of agent {spec.agent_id} is in Secret {secret_name}"
    out.set_true(c.READY, c.REASON_TOKEN_ISSUED, msg)
    out.phase("Ready", msg)
    return out.build()


async def finalize_agent(ctx: Context, body: Mapping[str, Any]) -> int:
    """Revoke a deleted agent's tokens and delete its Secret; returns how many tokens were revoked."""
    meta = body["metadata"]
    try:
        spec = parse_agent(meta["name"], body.get("spec") or {})
    except InvalidSpec:
        return 0
    revoked = 0
    try:
        _, url = await _ready_org(ctx, spec.org_resource, meta["namespace"])
        revoked = await ctx.backend.revoke_agent_tokens(url, agent_id=spec.agent_id)
    except _Wait as exc:  # the org (and its database) is gone: no token left to revoke there
        log.info("not revoking tokens of %s: %s", spec.agent_id, exc)
    await ctx.kube.delete("v1", "Secret", spec.secret_name or names.token_secret_name(meta["name"]),
                          meta["namespace"])
    return revoked
