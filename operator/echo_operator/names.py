"""Names shared by the operator, its CRDs and the Helm chart.

Everything that must agree between the handlers, the CRD files in
``charts/echo-memory/crds/`` and the child objects lives here: the API group,
the plural resource names, label keys and the naming rules for children.
The chart tests compare the CRDs against these constants.
"""

from __future__ import annotations

GROUP = "echo-memory.io"
VERSION = "v1alpha1"
API_VERSION = f"{GROUP}/{VERSION}"

ORG_KIND, ORG_PLURAL = "MemoryOrg", "memoryorgs"
SCOPE_KIND, SCOPE_PLURAL = "MemoryScope", "memoryscopes"
AGENT_KIND, AGENT_PLURAL = "MemoryAgent", "memoryagents"

CNPG_GROUP = "postgresql.cnpg.io"
CNPG_API_VERSION = f"{CNPG_GROUP}/v1"
CNPG_CRD = f"clusters.{CNPG_GROUP}"

FINALIZER = f"{GROUP}/cleanup"

LABEL_ORG = f"{GROUP}/org"
LABEL_COMPONENT = "app.kubernetes.io/component"
LABEL_MANAGED_BY = "app.kubernetes.io/managed-by"
LABEL_NAME = "app.kubernetes.io/name"
LABEL_PART_OF = "app.kubernetes.io/part-of"
ANNOTATION_TOKEN_HASH = f"{GROUP}/token-spec-hash"

#: Database name and role used inside operator-provisioned Postgres instances.
DB_NAME = "echo"
DB_USER = "echo"
DB_PORT = 5432


def db_cluster_name(org_resource: str) -> str:
    """Name of the CloudNativePG Cluster, StatefulSet and Service of an org's database."""
    return f"{org_resource}-db"


def db_secret_name(org_resource: str) -> str:
    """Name of the connection Secret (CloudNativePG's ``<cluster>-app`` convention)."""
    return f"{db_cluster_name(org_resource)}-app"


def migration_job_name(org_resource: str, schema_version: int) -> str:
    """Name of the migration Job for one schema version (one Job per version)."""
    return f"{org_resource}-migrate-v{schema_version}"


def token_secret_name(agent_resource: str) -> str:
    """Default name of the Secret holding a MemoryAgent's token."""
    return f"{agent_resource}-token"


def child_labels(org_resource: str, component: str) -> dict[str, str]:
    """Labels every child object of a MemoryOrg carries."""
    return {
        LABEL_NAME: "echo-memory",
        LABEL_PART_OF: "echo-memory",
        LABEL_MANAGED_BY: "echo-memory-operator",
        LABEL_COMPONENT: component,
        LABEL_ORG: org_resource,
    }
