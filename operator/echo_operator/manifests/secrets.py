"""Secrets: the org's connection Secret and an agent's token Secret.

Values are written base64-encoded under ``data`` (never ``stringData``), so
what the operator sends is exactly what it later reads back.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from typing import Any
from urllib.parse import quote

from echo_memory.operator import names


def b64(text: str) -> str:
    """Base64 of a UTF-8 string, as Secret ``data`` values are stored."""
    return base64.b64encode(text.encode()).decode()


def decode_secret(secret: Mapping[str, Any]) -> dict[str, str]:
    """The decoded key/value pairs of a Secret (``data``, then ``stringData`` on top)."""
    out = {k: base64.b64decode(v).decode() for k, v in (secret.get("data") or {}).items()}
    out.update(secret.get("stringData") or {})
    return out


def build_connection_secret(*, org_resource: str, namespace: str, password: str) -> dict[str, Any]:
    """The connection Secret of a StatefulSet-provisioned database.

    It has the keys CloudNativePG writes into ``<cluster>-app``: ``uri``,
    ``host``, ``port``, ``username``, ``password`` and ``dbname``.
    """
    host = f"{names.db_cluster_name(org_resource)}.{namespace}.svc"
    uri = (f"postgresql://{names.DB_USER}:{quote(password, safe='')}@{host}:{names.DB_PORT}/"
           f"{names.DB_NAME}")
    values = {
        "uri": uri,
        "host": host,
        "port": str(names.DB_PORT),
        "username": names.DB_USER,
        "password": password,
        "dbname": names.DB_NAME,
    }
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {
            "name": names.db_secret_name(org_resource),
            "namespace": namespace,
            "labels": names.child_labels(org_resource, "database"),
        },
        "type": "Opaque",
        "data": {k: b64(v) for k, v in values.items()},
    }


def build_token_secret(
    *, agent_resource: str, secret_name: str, namespace: str, org: str, agent_id: str,
    token: str, spec_hash: str,
) -> dict[str, Any]:
    """The Secret holding an agent's bearer token (keys ``token``, ``org``, ``agentId``)."""
    labels = names.child_labels(agent_resource, "agent-token")
    labels.pop(names.LABEL_ORG)
    labels[f"{names.GROUP}/agent"] = agent_resource
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {
            "name": secret_name,
            "namespace": namespace,
            "labels": labels,
            "annotations": {names.ANNOTATION_TOKEN_HASH: spec_hash},
        },
        "type": "Opaque",
        "data": {"token": b64(token), "org": b64(org), "agentId": b64(agent_id)},
    }
