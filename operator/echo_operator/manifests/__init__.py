"""Pure builders of the child objects the operator creates.

Each function takes plain values and returns a manifest ``dict`` ready to be
sent to the API server; nothing here does I/O, so the tests validate every
result with ``kubernetes-validate`` in strict mode.
"""

from echo_memory.operator.manifests.cnpg import build_cnpg_cluster
from echo_memory.operator.manifests.jobs import build_migration_job
from echo_memory.operator.manifests.owners import owned_by, owner_reference
from echo_memory.operator.manifests.secrets import b64, build_connection_secret, build_token_secret, decode_secret
from echo_memory.operator.manifests.statefulset import build_db_service, build_db_statefulset

__all__ = [
    "b64",
    "build_cnpg_cluster",
    "build_connection_secret",
    "build_db_service",
    "build_db_statefulset",
    "build_migration_job",
    "build_token_secret",
    "decode_secret",
    "owned_by",
    "owner_reference",
]
