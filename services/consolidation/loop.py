"""Keeping the services' event loop free while a run works.

On a laptop every service shares one process and one event loop, and a run's Python work over a
large scope (seconds of CPU at 100k facts) would hold every write and query that process serves
until it ends. A run therefore turns fetched rows into Python a slice at a time, letting the loop
run between slices, sends its statements' rows a slice at a time likewise, and does its pure
computing (tier placement, digests) in a worker thread.
"""

from __future__ import annotations

import asyncio
from typing import Any

from psycopg import AsyncCursor

# Rows turned into Python, or statements sent, between two turns of the loop: at 2,000 fact rows
# (vectors included) a slice held the loop ~100 ms on a shared 2-core machine.
SLICE_ROWS = 500


async def fetch_all(cur: AsyncCursor[Any]) -> list[Any]:
    """Every row of the statement `cur` executed; the loop runs between slices of SLICE_ROWS."""
    rows: list[Any] = []
    while True:
        part = await cur.fetchmany(SLICE_ROWS)
        rows.extend(part)
        if len(part) < SLICE_ROWS:
            return rows
        await asyncio.sleep(0)


async def execute_in_slices(cur: AsyncCursor[Any], sql: str, params: list[dict[str, Any]]) -> None:
    """`sql` once per item of `params`, pipelined SLICE_ROWS at a time: psycopg adapts a whole
    batch's parameters before the loop runs again, tens of thousands of ids for a large scope."""
    for start in range(0, len(params), SLICE_ROWS):
        await cur.executemany(sql, params[start:start + SLICE_ROWS])
