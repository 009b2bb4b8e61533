"""The small-install database: one Postgres+pgvector pod in a StatefulSet.

Used when CloudNativePG is not installed.  It runs a single instance (no
replication); ``spec.database.instances`` only applies to CloudNativePG.
"""

from __future__ import annotations

from typing import Any

from echo_memory.operator import names
from echo_memory.operator.manifests.pods import PodSettings

_PG_UID = 999  # the postgres user of the official (and pgvector/pgvector) Debian images


def build_db_service(*, org_resource: str, namespace: str) -> dict[str, Any]:
    """The headless Service that governs the StatefulSet and gives the DNS name in the Secret."""
    labels = names.child_labels(org_resource, "database")
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": names.db_cluster_name(org_resource), "namespace": namespace, "labels": labels},
        "spec": {
            "clusterIP": "None",
            "selector": {names.LABEL_ORG: org_resource, names.LABEL_COMPONENT: "database"},
            "ports": [{"name": "postgres", "port": names.DB_PORT, "targetPort": "postgres"}],
        },
    }


def build_db_statefulset(
    *, org_resource: str, namespace: str, image: str, storage: str,
    storage_class: str | None, delete_volumes_with_set: bool, pod: PodSettings | None = None,
) -> dict[str, Any]:
    """A one-replica Postgres StatefulSet reading its credentials from the connection Secret.

    ``delete_volumes_with_set`` maps the org's ``deletionPolicy`` onto the
    StatefulSet's PVC retention policy, so ``Orphan`` keeps the volume.
    """
    pod = pod or PodSettings()
    labels = names.child_labels(org_resource, "database")
    secret = names.db_secret_name(org_resource)

    def from_secret(var: str, key: str) -> dict[str, Any]:
        return {"name": var, "valueFrom": {"secretKeyRef": {"name": secret, "key": key}}}

    claim_spec: dict[str, Any] = {
        "accessModes": ["ReadWriteOnce"],
        "resources": {"requests": {"storage": storage}},
    }
    if storage_class:
        claim_spec["storageClassName"] = storage_class
    probe_cmd = ["pg_isready", "-U", names.DB_USER, "-d", names.DB_NAME, "-h", "127.0.0.1"]
    policy = "Delete" if delete_volumes_with_set else "Retain"
    sts: dict[str, Any] = {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {"name": names.db_cluster_name(org_resource), "namespace": namespace, "labels": labels},
        "spec": {
            "serviceName": names.db_cluster_name(org_resource),
            "replicas": 1,
            "selector": {"matchLabels": {names.LABEL_ORG: org_resource, names.LABEL_COMPONENT: "database"}},
            "persistentVolumeClaimRetentionPolicy": {"whenDeleted": policy, "whenScaled": "Retain"},
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    # Pod Security Standards `restricted`: non-root, RuntimeDefault seccomp, no escalation.
                    "securityContext": {"runAsUser": _PG_UID, "runAsGroup": _PG_UID, "fsGroup": _PG_UID,
                                        "runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}},
                    "containers": [{
                        "name": "postgres",
                        "image": image,
                        "ports": [{"name": "postgres", "containerPort": names.DB_PORT}],
                        "env": [
                            from_secret("POSTGRES_USER", "username"),
                            from_secret("POSTGRES_PASSWORD", "password"),
                            from_secret("POSTGRES_DB", "dbname"),
                            {"name": "PGDATA", "value": "/var/lib/postgresql/data/pgdata"},
                        ],
                        "readinessProbe": {"exec": {"command": probe_cmd}, "periodSeconds": 10},
                        "livenessProbe": {"exec": {"command": probe_cmd}, "periodSeconds": 30,
                                          "failureThreshold": 6},
                        "resources": pod.postgres_resources,
                        "securityContext": {"allowPrivilegeEscalation": False,
                                            "capabilities": {"drop": ["ALL"]}},
                        "volumeMounts": [{"name": "data", "mountPath": "/var/lib/postgresql/data"}],
                    }],
                },
            },
            "volumeClaimTemplates": [{"metadata": {"name": "data", "labels": labels}, "spec": claim_spec}],
        },
    }
    pod.apply(sts["spec"]["template"])
    return sts
