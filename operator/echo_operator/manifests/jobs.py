"""The migration Job: ``echo-memory init-db`` against one org's database."""

from __future__ import annotations

from typing import Any

from echo_memory.operator import names
from echo_memory.operator.manifests.pods import PodSettings


def build_migration_job(
    *, org_resource: str, namespace: str, schema_version: int, image: str,
    image_pull_policy: str, secret_name: str, secret_key: str, pod: PodSettings | None = None,
) -> dict[str, Any]:
    """A Job that applies pending migrations, reading the database URL from the connection Secret.

    One Job per schema version (its name carries the version), so an image
    upgrade runs a new Job and a finished one is never re-run.
    """
    pod = pod or PodSettings()
    labels = names.child_labels(org_resource, "migration")
    labels[f"{names.GROUP}/schema-version"] = str(schema_version)
    job: dict[str, Any] = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": names.migration_job_name(org_resource, schema_version),
            "namespace": namespace,
            "labels": labels,
        },
        "spec": {
            "backoffLimit": 3,
            "activeDeadlineSeconds": 900,
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "restartPolicy": "Never",
                    "automountServiceAccountToken": False,
                    "securityContext": {"runAsNonRoot": True, "runAsUser": 10001,
                                        "seccompProfile": {"type": "RuntimeDefault"}},
                    "containers": [{
                        "name": "init-db",
                        "image": image,
                        "imagePullPolicy": image_pull_policy,
                        "command": ["echo-memory", "init-db"],
                        "env": [{"name": "ECHO_MEMORY_DATABASE_URL",
                                 "valueFrom": {"secretKeyRef": {"name": secret_name, "key": secret_key}}}],
                        "resources": pod.job_resources,
                        "securityContext": {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True,
                                            "capabilities": {"drop": ["ALL"]}},
                        "volumeMounts": [{"name": "tmp", "mountPath": "/tmp"}],
                    }],
                    "volumes": [{"name": "tmp", "emptyDir": {}}],
                },
            },
        },
    }
    pod.apply(job["spec"]["template"])
    return job
