"""Time to first paint of the dashboard at 1k and 10k facts, in headless chromium.

    python lab/dashboard_bench.py --facts 1000,10000 [--runs 3] [--screenshots docs/images]

Starts a throw-away embedded Postgres and nats-server with every service, restores the invented
demo org (libs/local/demo/seed.py, real embeddings) once per size into its own scope, starts the
dashboard, and opens it `--runs` times per size in a fresh browser page (Debian's chromium driven
by Playwright). Per size it prints the median over the runs of: the browser's first contentful
paint, the moment the graph was first drawn (`graph-painted` performance mark, both from
navigation start), the /api/graph request's duration and its body size, and the view the server
chose. With --screenshots it saves the pictures docs/dashboard.md shows. A measurement, not a test.
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import psycopg
from playwright.async_api import Page, async_playwright

from echo_memory.libs.local.cli.dashboard_commands import seed_scope
from echo_memory.libs.local.supervisor.nats import NatsServer
from echo_memory.libs.local.supervisor.ports import free_port
from echo_memory.libs.local.supervisor.postgres import EmbeddedPostgres
from echo_memory.libs.server.bus.broker import make_broker
from echo_memory.libs.server.embed import MiniLM
from echo_memory.libs.server.store.schema import apply_migrations
from echo_memory.libs.testing import EchoStack, server_dir
from echo_memory.services.dashboard.app import RunningDashboard, start_dashboard

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
ORG = "dashboard-bench"

TIMINGS = """() => {
    const paint = performance.getEntriesByType('paint').find((p) => p.name === 'first-contentful-paint');
    const graph = performance.getEntriesByName('graph-painted')[0];
    const api = performance.getEntriesByType('resource').find((r) => r.name.includes('/api/graph'));
    const g = window.echoDashboard.state.graph;
    return {fcp: paint ? paint.startTime : null, graph: graph.startTime, api: api.duration,
            bytes: api.encodedBodySize, view: g.view, edges: g.total_edges, nodes: g.total_nodes,
            clusters: g.clusters.length, shown: g.view === 'overview' ? g.clusters.length : g.nodes.length};
}"""


async def until(page: Page, expression: str, timeout: float = 120.0) -> Any:
    """Poll `expression` in the page (the page's CSP forbids Playwright's eval-based waiting)."""
    deadline = time.monotonic() + timeout
    while True:
        value = await page.evaluate(expression)
        if value:
            return value
        if time.monotonic() > deadline:
            raise TimeoutError(expression)
        await asyncio.sleep(0.05)


async def measure(browser: Any, d: RunningDashboard, scope: str) -> dict[str, Any]:
    page = await browser.new_page(viewport={"width": 1440, "height": 900})
    try:
        await page.goto(f"{d.base_url}/?scope={scope}#token={d.secret}")
        await until(page, "performance.getEntriesByName('graph-painted').length > 0")
        timings: dict[str, Any] = await page.evaluate(TIMINGS)
        return timings
    finally:
        await page.close()


async def screenshots(browser: Any, d: RunningDashboard, scope: str, out: Path, big: bool) -> None:
    """The pictures of docs/dashboard.md: overview for the big store; graph, node, edge, search for the small one."""
    page = await browser.new_page(viewport={"width": 1440, "height": 900})
    try:
        await page.goto(f"{d.base_url}/?scope={scope}#token={d.secret}")
        await until(page, "performance.getEntriesByName('graph-painted').length > 0")
        box = await page.locator("#graph").bounding_box()
        assert box is not None

        async def click(xy: list[float]) -> None:
            await page.mouse.click(box["x"] + xy[0], box["y"] + xy[1])

        if big:
            await page.screenshot(path=str(out / "dashboard-overview-10k.png"))
            first = await page.evaluate("window.echoDashboard.state.graph.clusters[0].id")
            await click(await page.evaluate("(id) => window.echoDashboard.clusterAt(id)", first))
            await until(page, "window.echoDashboard.state.graph.view === 'cluster'")
            await page.screenshot(path=str(out / "dashboard-cluster-10k.png"))
            return
        await page.screenshot(path=str(out / "dashboard-graph.png"))
        hub = await page.evaluate("window.echoDashboard.state.graph.nodes.slice().sort((a, b) => b.degree - a.degree)[0].id")
        await click(await page.evaluate("(id) => window.echoDashboard.nodeAt(id)", hub))
        await page.locator("#details [data-entity]").wait_for()
        await page.screenshot(path=str(out / "dashboard-node.png"))
        found = await page.evaluate("window.echoDashboard.clickableEdge('on_call_rotation')")
        for _ in range(6):  # a dense graph's edges are short: zoom in on one until it can be clicked
            if found is not None:
                break
            first = await page.evaluate("window.echoDashboard.state.graph.edges.find((e) => e.relation === 'on_call_rotation')")
            if first is None:
                break
            at = await page.evaluate("(id) => window.echoDashboard.edgeAt(id)", first["id"])
            await page.mouse.move(box["x"] + at[0], box["y"] + at[1])
            await page.mouse.wheel(0, -400)
            found = await page.evaluate("window.echoDashboard.clickableEdge('on_call_rotation')")
        if found is not None:
            await click(found[1])
            await page.locator("#details [data-why]").wait_for()
            await page.screenshot(path=str(out / "dashboard-why.png"))
        else:
            print("screenshots: no on_call_rotation edge can be clicked clear of nodes; dashboard-why.png not taken")
        await page.fill("#search", "what caused the last incident on ledger-api")
        await page.click("#search-form button")
        await page.locator("#search-results li").first.wait_for()
        await page.screenshot(path=str(out / "dashboard-search.png"))
        slider = page.locator("#asof")
        await slider.focus()
        for _ in range(7):
            await page.keyboard.press("PageDown")
        await until(page, "window.echoDashboard.state.asOf !== null && "
                          "!document.getElementById('status').textContent.startsWith('loading')")
        await page.screenshot(path=str(out / "dashboard-as-of.png"))
    finally:
        await page.close()


async def bench(sizes: list[int], runs: int, shots: Path | None) -> None:
    pg_dir, nats_dir = server_dir("dashboard-bench-pg"), Path(tempfile.mkdtemp(prefix="echo-dashboard-bench-"))
    pg = EmbeddedPostgres(pg_dir, free_port(), durable=False)
    pg.start()
    nats_server = NatsServer(nats_dir, free_port())
    nats_server.start()
    try:
        name = "bench_" + uuid.uuid4().hex[:6]
        with psycopg.connect(pg.url("postgres"), autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        apply_migrations(pg.url(name))
        embedder = MiniLM()
        async with EchoStack(database_url=pg.url(name), nats_url=nats_server.url, org=ORG, embedder=embedder) as stack:
            for n in sizes:
                started = time.monotonic()
                counts = await seed_scope(stack.admin_call, stack.settings, f"demo-{n}", n, embed=embedder.embed)
                print(f"seeded    demo-{n}: {counts['fact']} fact versions, {counts['entity']} entities "
                      f"in {time.monotonic() - started:.1f} s", flush=True)
            broker = make_broker(nats_server.url)
            await broker.start()
            d = await start_dashboard(stack.settings, broker, free_port())
            try:
                async with async_playwright() as pw:
                    browser = await pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
                    try:
                        for n in sizes:
                            await measure(browser, d, f"demo-{n}")  # warm the services' caches and the page
                            results = [await measure(browser, d, f"demo-{n}") for _ in range(runs)]
                            _report(n, results)
                            if shots is not None:
                                shots.mkdir(parents=True, exist_ok=True)
                                await screenshots(browser, d, f"demo-{n}", shots, big=n >= 5000)
                    finally:
                        await browser.close()
            finally:
                await d.stop()
    finally:
        nats_server.stop()
        pg.stop()
        shutil.rmtree(nats_dir, ignore_errors=True)
        shutil.rmtree(pg_dir, ignore_errors=True)


def _report(n: int, results: list[dict[str, Any]]) -> None:
    def med(key: str) -> float:
        return statistics.median(float(r[key]) for r in results if r[key] is not None)

    r = results[0]
    print(f"facts {n:>6}: view {r['view']:<8} {r['edges']} edges, {r['nodes']} entities, {r['clusters']} clusters; "
          f"first contentful paint {med('fcp'):.0f} ms, graph painted {med('graph'):.0f} ms, "
          f"/api/graph {med('api'):.0f} ms ({med('bytes') / 1024:.0f} KiB), {r['shown']} drawn "
          f"(median of {len(results)})", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--facts", default="1000,10000", help="store sizes in fact versions, comma-separated")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--screenshots", type=Path, help="save the documentation's screenshots here")
    args = parser.parse_args()
    sizes = [int(s) for s in args.facts.split(",") if s.strip()]
    if not sizes or min(sizes) < 1 or args.runs < 1:
        print("dashboard_bench: --facts needs positive sizes and --runs at least 1", file=sys.stderr)
        raise SystemExit(2)
    asyncio.run(bench(sizes, args.runs, args.screenshots))


if __name__ == "__main__":
    main()
