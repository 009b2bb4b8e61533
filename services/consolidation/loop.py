"""Keeping the services' event loop free while a run works.

On a laptop every service shares one process and one event loop, and a run's Python work over a
large scope (seconds of CPU at 100k facts) would hold every write and query that process serves
until it ends. A run therefore turns fetched rows into Python a slice at a time, letting the loop
run between slices, and does its pure computing (tier placement, digests) in a worker thread.
"""

from __future__ import annotations

import asyncio
from typing import Any

from psycopg import AsyncCursor

SLICE_ROWS = 2000


async def fetch_all(cur: AsyncCursor[Any]) -> list[Any]:
    """Every row of the statement `cur` executed; the loop runs between slices of SLICE_ROWS."""
    rows: list[Any] = []
    while True:
        part = await cur.fetchmany(SLICE_ROWS)
        rows.extend(part)
        if len(part) < SLICE_ROWS:
            return rows
        await asyncio.sleep(0)
