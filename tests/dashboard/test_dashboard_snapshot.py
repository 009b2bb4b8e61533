"""`echo-memory dashboard --out FILE`: a self-contained snapshot, opened from disk in a real headless chromium."""

from __future__ import annotations

import asyncio
import os
import stat
import sys
from pathlib import Path

import pytest
from dashboard_browser import browser_page

from echo_memory.libs.local.cli.main import main
from echo_memory.libs.testing import EchoStack

pytestmark = pytest.mark.timeout(300)

# Stored text that tries to end the inline data block and run a script of its own.
HOSTILE = '</script><script>window.__pwned = 1</script><img src=x onerror="window.__pwned = 2">'
EPISODE = {
    "scope": "team-a", "session_id": "s-snapshot", "project": "billing",
    "entities": [{"name": "Billing API", "type": "service"}, {"name": "Postgres", "type": "database"},
                 {"name": "Stripe", "type": "vendor"}, {"name": "<b>evil-svc</b>", "type": "service"}],
    "facts": [
        {"source": "Billing API", "target": "Postgres", "relation": "stores invoices in", "confidence": "extracted",
         "fact": "The billing API stores invoices in Postgres."},
        {"source": "Billing API", "target": "Stripe", "relation": "charges cards through", "confidence": "extracted",
         "fact": "The billing API charges cards through Stripe."},
        {"source": "<b>evil-svc</b>", "target": "Billing API", "relation": "calls", "confidence": "extracted",
         "fact": HOSTILE},
    ],
}


async def run_cli(stack: EchoStack, *args: str) -> tuple[int, str, str]:
    env = {**os.environ, "ECHO_MEMORY_NATS_URL": stack.nats_url, "ECHO_MEMORY_ORG": stack.org}
    proc = await asyncio.create_subprocess_exec(sys.executable, "-m", "echo_memory.libs.local.cli", *args, env=env,
                                                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(proc.communicate(), timeout=200)
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


async def test_a_snapshot_opens_from_disk_shows_the_graph_and_holds_no_token(stack: EchoStack, tmp_path: Path) -> None:
    await stack.admin_call("writes", "scope_create", {"name": "team-a"})
    assert (await stack.admin_call("writes", "write_episode", EPISODE))["stored"]
    token = stack.issue_token("cursor", read=["shared", "team-a"], write=["shared", "team-a"])

    out = tmp_path / "memory.html"
    code, printed, err = await run_cli(stack, "dashboard", "--out", str(out), "--scope", "team-a")
    assert code == 0, err
    assert "4 entities, 3 facts" in printed and "holds no token" in printed
    assert stat.S_IMODE(out.stat().st_mode) == 0o600
    text = out.read_text(encoding="utf-8")
    assert token not in text and f"em_{stack.org}_" not in text
    assert "/static/" not in text and "http://" not in text  # nothing to fetch: style, script and data are inline
    assert [p.name for p in tmp_path.iterdir()] == ["memory.html"]  # no temporary file left beside it

    async with browser_page("file://") as w:
        await w.page.goto(out.as_uri())
        await w.painted()
        names = await w.js("() => window.echoDashboard.state.graph.nodes.map((n) => n.name).sort()")
        assert names == ["<b>evil-svc</b>", "Billing API", "Postgres", "Stripe"]
        assert await w.js("() => window.echoDashboard.state.graph.edges.length") == 3
        assert "snapshot taken" in await w.page.locator("#status").inner_text()
        assert await w.js("() => document.querySelector('#search').disabled") is True

        # A node's facts come from the file too, shown as text.
        at = await w.js("() => window.echoDashboard.nodeAt(window.echoDashboard.state.graph.nodes"
                        ".find((n) => n.name === 'Billing API').id)")
        await w.click_canvas(at)
        await w.page.locator("#details [data-entity]").wait_for(timeout=30_000)
        details = await w.page.locator("#details").inner_text()
        assert "Billing API (service)" in details and "window.__pwned" in details
        assert await w.js("() => window.__pwned") is None
        assert "not in this snapshot" in await w.page.locator("#health").inner_text()
        w.check()  # no console error, no request left the file
        assert all(u.startswith(("file://", "data:")) for u in w.requests), w.requests

    code, _, err = await run_cli(stack, "dashboard", "--out", str(tmp_path / "missing" / "x.html"))
    assert code == 1 and "cannot write" in err and "Traceback" not in err
    code, _, err = await run_cli(stack, "dashboard", "--out", str(out), "--scope", "no-such-scope")
    assert code == 1 and "not_found" in err


def test_serve_and_out_exclude_each_other(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert main(["dashboard", "--serve", "--out", str(tmp_path / "x.html")]) == 2
    assert "exclude each other" in capsys.readouterr().err
    assert not (tmp_path / "x.html").exists()
