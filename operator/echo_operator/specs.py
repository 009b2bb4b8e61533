"""Typed, validated views of the three custom resources' ``spec`` blocks.

The CRD schema already rejects most bad input at admission time; these
parsers repeat the checks the operator relies on (and apply defaults), so a
handler works with plain dataclasses and an invalid object becomes an
:class:`InvalidSpec` with a message fit for a status condition.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from typing import Any

PROVIDERS = ("Auto", "CloudNativePG", "StatefulSet", "External")
DELETION_POLICIES = ("Orphan", "Delete")
_NAME_RE = re.compile(r"^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$")
_STORAGE_RE = re.compile(r"^[0-9]+(Mi|Gi|Ti)$")


class InvalidSpec(ValueError):
    """Raised when a custom resource's spec cannot be acted on; the message names the field."""


@dataclasses.dataclass(frozen=True)
class SecretRef:
    """A key in a Secret of the object's namespace."""

    name: str
    key: str = "uri"


@dataclasses.dataclass(frozen=True)
class OrgSpec:
    """What a MemoryOrg asks for."""

    org: str
    provider: str = "Auto"
    instances: int = 1
    storage: str = "10Gi"
    storage_class: str | None = None
    image_name: str | None = None
    secret_ref: SecretRef | None = None
    deletion_policy: str = "Orphan"


@dataclasses.dataclass(frozen=True)
class ScopeSpec:
    """What a MemoryScope asks for."""

    org_resource: str
    scope: str
    description: str = ""
    readers: tuple[str, ...] = ()
    writers: tuple[str, ...] = ()
    retention_days: int | None = None


@dataclasses.dataclass(frozen=True)
class AgentSpec:
    """What a MemoryAgent asks for."""

    org_resource: str
    agent_id: str
    read_scopes: tuple[str, ...] = ()
    write_scopes: tuple[str, ...] = ()
    secret_name: str | None = None


def _name(value: Any, field: str) -> str:
    if not isinstance(value, str) or not _NAME_RE.match(value):
        raise InvalidSpec(f"{field} must be a lowercase DNS label (a-z, 0-9, '-'), got {value!r}")
    return value


def _names(value: Any, field: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise InvalidSpec(f"{field} must be a list of non-empty strings")
    return tuple(value)


def parse_org(name: str, spec: Mapping[str, Any]) -> OrgSpec:
    """Validate a MemoryOrg spec; raises :class:`InvalidSpec` naming the bad field."""
    db = dict(spec.get("database") or {})
    provider = db.get("provider", "Auto")
    if provider not in PROVIDERS:
        raise InvalidSpec(f"spec.database.provider must be one of {', '.join(PROVIDERS)}, got {provider!r}")
    policy = spec.get("deletionPolicy", "Orphan")
    if policy not in DELETION_POLICIES:
        raise InvalidSpec(f"spec.deletionPolicy must be Orphan or Delete, got {policy!r}")
    instances = db.get("instances", 1)
    if not isinstance(instances, int) or isinstance(instances, bool) or not 1 <= instances <= 9:
        raise InvalidSpec(f"spec.database.instances must be an integer from 1 to 9, got {instances!r}")
    storage = db.get("storage", "10Gi")
    if not isinstance(storage, str) or not _STORAGE_RE.match(storage):
        raise InvalidSpec(f"spec.database.storage must look like 10Gi, got {storage!r}")
    secret_ref = None
    if db.get("secretRef") is not None:
        ref = dict(db["secretRef"])
        secret_ref = SecretRef(name=_name(ref.get("name"), "spec.database.secretRef.name"),
                               key=str(ref.get("key") or "uri"))
    if provider == "External" and secret_ref is None:
        raise InvalidSpec("spec.database.secretRef is required when provider is External")
    return OrgSpec(
        org=_name(spec.get("orgName") or name, "spec.orgName"),
        provider=provider,
        instances=instances,
        storage=storage,
        storage_class=db.get("storageClass") or None,
        image_name=db.get("imageName") or None,
        secret_ref=secret_ref,
        deletion_policy=policy,
    )


def parse_scope(name: str, spec: Mapping[str, Any]) -> ScopeSpec:
    """Validate a MemoryScope spec; raises :class:`InvalidSpec` naming the bad field."""
    retention = spec.get("retentionDays")
    if retention is not None and (not isinstance(retention, int) or retention < 1):
        raise InvalidSpec(f"spec.retentionDays must be a positive integer, got {retention!r}")
    scope = spec.get("scopeName") or name
    if not isinstance(scope, str) or not re.match(r"^[a-z0-9][a-z0-9._-]{0,127}$", scope):
        raise InvalidSpec(f"spec.scopeName must be lowercase letters, digits, '.', '_' or '-', got {scope!r}")
    from echo_memory.libs.server.store.access import (
        BUILTIN_SCOPES,  # the project's one list, imported as backend.py does
    )

    if scope in BUILTIN_SCOPES:
        raise InvalidSpec(f"spec.scopeName {scope!r} is a built-in scope; it always exists and cannot be declared")
    return ScopeSpec(
        org_resource=_name(spec.get("org"), "spec.org"),
        scope=scope,
        description=str(spec.get("description") or ""),
        readers=_names(spec.get("readers"), "spec.readers"),
        writers=_names(spec.get("writers"), "spec.writers"),
        retention_days=retention,
    )


def parse_agent(name: str, spec: Mapping[str, Any]) -> AgentSpec:
    """Validate a MemoryAgent spec; raises :class:`InvalidSpec` naming the bad field."""
    agent_id = spec.get("agentId") or name
    if not isinstance(agent_id, str) or not re.match(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$", agent_id):
        raise InvalidSpec(f"spec.agentId must be letters, digits, '.', '_' or '-', got {agent_id!r}")
    from echo_memory.libs.server.store.access import is_reserved_agent

    if is_reserved_agent(agent_id):
        raise InvalidSpec(f"spec.agentId {agent_id!r} is reserved for the operator identity; no token can carry it")
    secret_name = spec.get("secretName")
    return AgentSpec(
        org_resource=_name(spec.get("org"), "spec.org"),
        agent_id=agent_id,
        read_scopes=_names(spec.get("readScopes"), "spec.readScopes"),
        write_scopes=_names(spec.get("writeScopes"), "spec.writeScopes"),
        secret_name=_name(secret_name, "spec.secretName") if secret_name else None,
    )
