"""`echo-memory dashboard --out FILE`: the dashboard page as one self-contained HTML file, to share.

The file holds the page, its style and script inline, and the answers of the same bus verbs the
served dashboard reads (the graph, each cluster of an overview, the best-connected entities' facts,
recall cost), taken at one instant. It needs no server: the script reads the inlined answers
instead of the API. It carries no secret: no dashboard secret is made, no token is read, and its
Content-Security-Policy allows only its own inline script and style and no network requests.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import tempfile
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from echo_memory.libs.core.config import Settings
from echo_memory.libs.core.contracts.verbs import DASHBOARD_GRAPH, ENTITY_FACTS, RECALL_COST, Verb
from echo_memory.libs.server.bus.client import BusClient
from echo_memory.services.dashboard.app import call_json, static_file

# Bounds on what one file inlines: one bus call each, so a big graph neither takes minutes nor
# yields a file a browser cannot open. The file says how many were left out.
SNAPSHOT_CLUSTERS = 40
SNAPSHOT_ENTITIES = 200
SNAPSHOT_ENTITY_FACTS = 50
LIVE_HINT = "open the live dashboard with `echo-memory dashboard --serve` for it"


@dataclass(frozen=True)
class SnapshotSummary:
    """What a written snapshot holds."""

    path: Path
    nodes: int
    edges: int
    clusters_inlined: int
    entities_inlined: int
    entities_left_out: int
    bytes: int


async def snapshot_data(settings: Settings, bus: BusClient, scopes: list[str] | None) -> dict[str, Any]:
    """The verbs' answers the page needs, all taken at one `as_of` (the graph's).

    Raises the verbs' typed errors (NotFound or ScopeDenied for a scope, Unavailable, BusTimeout).
    """
    async def call(verb: Verb[Any, Any], args: dict[str, Any]) -> dict[str, Any]:
        return await call_json(bus, settings, verb, args)

    filters: dict[str, Any] = {"scope": scopes} if scopes else {}
    graph = await call(DASHBOARD_GRAPH, filters)
    # Every later answer describes the same instant as the graph, whatever is written meanwhile.
    pinned = {**filters, "as_of": graph["as_of"]}
    clusters: dict[str, Any] = {}
    if graph["view"] == "overview":
        largest = sorted(graph["clusters"], key=lambda c: (-c["edges"], c["id"]))[:SNAPSHOT_CLUSTERS]
        for cluster in largest:
            clusters[cluster["id"]] = await call(DASHBOARD_GRAPH, {**pinned, "cluster": cluster["id"]})
    nodes: dict[str, dict[str, Any]] = {}
    for view in (graph, *clusters.values()):
        for node in view["nodes"]:
            nodes.setdefault(node["id"], node)
    best = sorted(nodes.values(), key=lambda n: (-n["degree"], n["id"]))
    entities = {}
    for node in best[:SNAPSHOT_ENTITIES]:
        entities[node["id"]] = await call(ENTITY_FACTS, {**pinned, "entity_id": node["id"], "limit": SNAPSHOT_ENTITY_FACTS})
    recall = await call(RECALL_COST, filters)
    return {
        "taken_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "graph": graph, "clusters": clusters, "entities": entities, "recall_cost": recall,
        "left_out": {"clusters": max(0, len(graph["clusters"]) - len(clusters)) if graph["view"] == "overview" else 0,
                     "entities": max(0, len(nodes) - len(entities))},
        "live_hint": LIVE_HINT,
    }


def _csp_hash(text: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode("utf-8")).digest()).decode("ascii") + "'"


def snapshot_html(data: dict[str, Any]) -> str:
    """The page with its style, script and `data` inline.

    Raises RuntimeError when the packaged page no longer has the tags this replaces (a build error,
    never a half-made file).
    """
    page = static_file("index.html").decode("utf-8")
    css = static_file("app.css").decode("utf-8")
    js = static_file("app.js").decode("utf-8")
    # Inside <script>, "</" would end the element early; JSON may spell "<" as \u003c instead.
    payload = json.dumps(data, ensure_ascii=False, separators=(",", ":")).replace("<", "\\u003c")
    if "</script" in js.lower() or "</style" in css.lower():
        raise RuntimeError("the dashboard's script or style contains a closing tag and cannot be inlined")
    policy = (f"default-src 'none'; script-src {_csp_hash(js)}; style-src {_csp_hash(css)}; img-src data:; "
              "connect-src 'none'; base-uri 'none'; form-action 'none'")
    replacements = [
        ('<meta charset="utf-8">',
         f'<meta charset="utf-8">\n<meta http-equiv="Content-Security-Policy" content="{policy}">'),
        ('<link rel="stylesheet" href="/static/app.css">', f"<style>{css}</style>"),
        ('<script src="/static/app.js" defer></script>\n', ""),
        ("<title>Echo Memory — dashboard</title>", "<title>Echo Memory — snapshot</title>"),
        ("</body>", f'<script type="application/json" id="snapshot">{payload}</script>\n<script>{js}</script>\n</body>'),
    ]
    for old, new in replacements:
        if page.count(old) != 1:
            raise RuntimeError(f"the dashboard page no longer holds {old!r}; the snapshot cannot be built")
        page = page.replace(old, new)
    return page


def write_private(path: Path, text: str) -> int:
    """Write `text` to `path` readable by its owner only (0600), replacing the file at once; the bytes written.

    Raises OSError (a missing folder, a directory at `path`, no permission); nothing is left behind then.
    """
    data = text.encode("utf-8")
    fd, temp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")  # created 0600
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.chmod(temp, 0o600)
        os.replace(temp, path)
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise
    return len(data)


async def write_snapshot(settings: Settings, bus: BusClient, path: Path, scopes: list[str] | None) -> SnapshotSummary:
    """Take the snapshot and write it to `path` (mode 0600); what it holds.

    Raises the verbs' typed errors, or OSError when `path` cannot be written (nothing is written then).
    """
    data = await snapshot_data(settings, bus, scopes)
    size = write_private(path, snapshot_html(data))
    graph = data["graph"]
    return SnapshotSummary(path=path, nodes=graph["total_nodes"], edges=graph["total_edges"],
                           clusters_inlined=len(data["clusters"]), entities_inlined=len(data["entities"]),
                           entities_left_out=data["left_out"]["entities"], bytes=size)
