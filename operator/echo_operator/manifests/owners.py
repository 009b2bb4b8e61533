"""ownerReferences, so Kubernetes garbage-collects what only makes sense with its parent."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def owner_reference(owner: Mapping[str, Any]) -> dict[str, Any]:
    """A controller ownerReference pointing at ``owner`` (a full object with uid)."""
    meta = owner["metadata"]
    return {
        "apiVersion": owner["apiVersion"],
        "kind": owner["kind"],
        "name": meta["name"],
        "uid": meta["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }


def owned_by(manifest: dict[str, Any], owner: Mapping[str, Any]) -> dict[str, Any]:
    """``manifest`` with ``owner`` set as its controller (returned for chaining)."""
    manifest.setdefault("metadata", {})["ownerReferences"] = [owner_reference(owner)]
    return manifest
