"""Playwright driving Debian's chromium (its own browser download is not used), with a page that
records every console error, page error, failed request and error response, and every request
that leaves the dashboard's origin."""

from __future__ import annotations

import asyncio
import shutil
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

from playwright.async_api import Page, async_playwright

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]


def chromium_path() -> str:
    """Debian's chromium; AssertionError naming the fix when it is missing (`make browser-deps`)."""
    found = shutil.which("chromium") or (CHROMIUM if shutil.which(CHROMIUM) else None)
    assert found, "chromium is not installed: run `make browser-deps` (apt-get install -y chromium)"
    return found


@dataclass
class Watched:
    page: Page
    origin: str
    problems: list[str] = field(default_factory=list)
    requests: list[str] = field(default_factory=list)

    def check(self) -> None:
        """Fail when the page logged an error, a request failed or left the origin."""
        foreign = [u for u in self.requests if not u.startswith(self.origin) and not u.startswith("data:")]
        assert not foreign, f"requests left the dashboard: {foreign}"
        assert not self.problems, "the page reported problems:\n" + "\n".join(self.problems)

    async def until(self, expression: str, timeout: float = 60.0) -> Any:
        """Poll `expression` until it is truthy; its value. (Playwright's own wait_for_function
        evaluates strings with eval, which the page's Content-Security-Policy rightly forbids.)"""
        deadline = asyncio.get_running_loop().time() + timeout
        while True:
            value = await self.page.evaluate(expression)
            if value:
                return value
            assert asyncio.get_running_loop().time() < deadline, f"timed out waiting for {expression}"
            await asyncio.sleep(0.1)

    async def painted(self) -> None:
        """Wait until the graph has been drawn once since the page loaded."""
        await self.until("performance.getEntriesByName('graph-painted').length > 0")

    async def js(self, expression: str, arg: Any = None) -> Any:
        return await self.page.evaluate(expression, arg)

    async def click_canvas(self, xy: list[float]) -> None:
        box = await self.page.locator("#graph").bounding_box()
        assert box is not None
        await self.page.mouse.click(box["x"] + xy[0], box["y"] + xy[1])


@asynccontextmanager
async def browser_page(origin: str, width: int = 1440, height: int = 900) -> AsyncIterator[Watched]:
    async with async_playwright() as pw:
        browser = await pw.chromium.launch(executable_path=chromium_path(), args=CHROMIUM_ARGS)
        try:
            page = await browser.new_page(viewport={"width": width, "height": height})
            watched = Watched(page=page, origin=origin)
            page.on("console", lambda m: watched.problems.append(f"console {m.type}: {m.text}")
                    if m.type == "error" else None)
            page.on("pageerror", lambda e: watched.problems.append(f"page error: {e}"))
            page.on("requestfailed", lambda r: watched.problems.append(f"request failed: {r.url} {r.failure}"))
            page.on("response", lambda r: watched.problems.append(f"HTTP {r.status}: {r.url}")
                    if r.status >= 400 else None)
            page.on("request", lambda r: watched.requests.append(r.url))
            yield watched
        finally:
            await browser.close()
