"""Status conditions in the ``metav1.Condition`` shape, the CloudNativePG way.

A reconciler starts a :class:`StatusBuilder` from the object's current status,
records one outcome per condition type with :meth:`StatusBuilder.set_true`,
:meth:`~StatusBuilder.set_false` or :meth:`~StatusBuilder.set_unknown`, sets the
plain-English phase, and hands :meth:`StatusBuilder.build` to kopf's status
patch.  ``lastTransitionTime`` only moves when a condition's status changes.
"""

from __future__ import annotations

import datetime
import re
from collections.abc import Mapping
from typing import Any

# Condition types.
READY = "Ready"
DATABASE_READY = "DatabaseReady"
MIGRATED = "Migrated"
DEGRADED = "Degraded"

# Reasons (CamelCase, as metav1.Condition requires).
REASON_INVALID_SPEC = "InvalidSpec"
REASON_DEPENDENCY_MISSING = "DependencyMissing"
REASON_PROVISIONING = "Provisioning"
REASON_DATABASE_AVAILABLE = "DatabaseAvailable"
REASON_SECRET_MISSING = "SecretMissing"
REASON_SECRET_INVALID = "SecretInvalid"
REASON_WAITING_FOR_DATABASE = "WaitingForDatabase"
REASON_MIGRATING = "Migrating"
REASON_MIGRATION_FAILED = "MigrationFailed"
REASON_MIGRATED = "SchemaUpToDate"
REASON_REGISTERED = "OrgRegistered"
REASON_REGISTRATION_FAILED = "RegistrationFailed"
REASON_ORG_CONFLICT = "OrgNameInUse"
REASON_ORG_NOT_FOUND = "OrgNotFound"
REASON_ORG_NOT_READY = "OrgNotReady"
REASON_SCOPE_ENSURED = "ScopeEnsured"
REASON_TOKEN_ISSUED = "TokenIssued"
REASON_BACKEND_ERROR = "BackendError"
REASON_HEALTHY = "Healthy"

_REASON_RE = re.compile(r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$")


def now_rfc3339() -> str:
    """Current UTC time in the second-precision RFC 3339 form Kubernetes uses."""
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def find(status: Mapping[str, Any] | None, type_: str) -> dict[str, Any] | None:
    """The condition of ``type_`` in a status block, or ``None``."""
    for cond in (status or {}).get("conditions") or []:
        if cond.get("type") == type_:
            return dict(cond)
    return None


def is_true(status: Mapping[str, Any] | None, type_: str) -> bool:
    """Whether the condition ``type_`` is present with status ``"True"``."""
    cond = find(status, type_)
    return bool(cond and cond.get("status") == "True")


class StatusBuilder:
    """Accumulates one reconciliation's outcome into a new ``status`` block."""

    def __init__(self, previous: Mapping[str, Any] | None, generation: int | None) -> None:
        self._previous = dict(previous or {})
        self._generation = int(generation or 0)
        self._conditions: dict[str, dict[str, Any]] = {
            c["type"]: dict(c) for c in self._previous.get("conditions") or [] if "type" in c
        }
        self._fields: dict[str, Any] = {}

    def _set(self, type_: str, status: str, reason: str, message: str) -> None:
        if not _REASON_RE.match(reason):
            raise ValueError(f"condition reason {reason!r} is not CamelCase")
        old = self._conditions.get(type_) or {}
        unchanged = old.get("status") == status and old.get("lastTransitionTime")
        self._conditions[type_] = {
            "type": type_,
            "status": status,
            "observedGeneration": self._generation,
            "lastTransitionTime": old["lastTransitionTime"] if unchanged else now_rfc3339(),
            "reason": reason,
            "message": message,
        }

    def set_true(self, type_: str, reason: str, message: str) -> None:
        """Record that ``type_`` holds."""
        self._set(type_, "True", reason, message)

    def set_false(self, type_: str, reason: str, message: str) -> None:
        """Record that ``type_`` does not hold (yet)."""
        self._set(type_, "False", reason, message)

    def set_unknown(self, type_: str, reason: str, message: str) -> None:
        """Record that the operator cannot tell whether ``type_`` holds."""
        self._set(type_, "Unknown", reason, message)

    def field(self, key: str, value: Any) -> None:
        """Set a plain status field (``provider``, ``schemaVersion``…)."""
        self._fields[key] = value

    def phase(self, phase: str, message: str) -> None:
        """Set the plain-English phase and the message ``kubectl get`` shows."""
        self._fields["phase"] = phase
        self._fields["message"] = message

    def build(self) -> dict[str, Any]:
        """The status block to merge-patch: fields, observedGeneration and all conditions."""
        order = [READY, DATABASE_READY, MIGRATED, DEGRADED]
        conditions = sorted(
            self._conditions.values(),
            key=lambda c: (order.index(c["type"]) if c["type"] in order else len(order), c["type"]),
        )
        return {**self._fields, "observedGeneration": self._generation, "conditions": conditions}
