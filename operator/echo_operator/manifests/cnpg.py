"""The CloudNativePG ``Cluster`` of an org, used when that operator is installed.

Its bootstrap creates the ``echo`` database owned by ``echo`` and the
``vector`` extension, plus ``age`` when the image ships it (the recipe in
``deploy/postgres/`` does).  CloudNativePG writes the ``<cluster>-app`` Secret
with ``uri``/``host``/``port``/``username``/``password``/``dbname``.
"""

from __future__ import annotations

from typing import Any

from echo_memory.operator import names

# A DO block, so an image without Apache AGE still bootstraps (AGE is optional, see ARCHITECTURE §3).
_CREATE_AGE_IF_AVAILABLE = (
    "DO $$ BEGIN "
    "IF EXISTS (SELECT 1 FROM pg_available_extensions WHERE name = 'age') THEN "
    "CREATE EXTENSION IF NOT EXISTS age; END IF; END $$;"
)


def build_cnpg_cluster(
    *, org_resource: str, namespace: str, instances: int, storage: str,
    storage_class: str | None, image: str,
) -> dict[str, Any]:
    """A ``postgresql.cnpg.io/v1`` Cluster for the org's database."""
    storage_spec: dict[str, Any] = {"size": storage}
    if storage_class:
        storage_spec["storageClass"] = storage_class
    return {
        "apiVersion": names.CNPG_API_VERSION,
        "kind": "Cluster",
        "metadata": {
            "name": names.db_cluster_name(org_resource),
            "namespace": namespace,
            "labels": names.child_labels(org_resource, "database"),
        },
        "spec": {
            "instances": instances,
            "imageName": image,
            "storage": storage_spec,
            "bootstrap": {
                "initdb": {
                    "database": names.DB_NAME,
                    "owner": names.DB_USER,
                    # vector and age need superuser; CloudNativePG runs these as postgres in the app DB.
                    "postInitApplicationSQL": [
                        "CREATE EXTENSION IF NOT EXISTS vector;",
                        _CREATE_AGE_IF_AVAILABLE,
                    ],
                },
            },
        },
    }
