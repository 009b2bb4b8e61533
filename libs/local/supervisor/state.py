"""The supervisor's public record in the data directory: what runs, where, since when.

`echo-memory status`, `down`, `mcp` and the CLI read it to find the running system. It never
holds a secret: the database password stays in its own 0600 file.
"""

from __future__ import annotations

import json
import os
from datetime import datetime
from pathlib import Path

from pydantic import BaseModel, Field

STATE_FILE = "state.json"


class Component(BaseModel):
    name: str
    pid: int | None = None
    port: int | None = None
    status: str = "starting"  # starting | running | restarting | stopped | failed
    restarts: int = 0
    last_exit: int | None = None
    log: str | None = None


class State(BaseModel):
    supervisor_pid: int
    home: str
    org: str
    started_at: datetime
    ready: bool = False
    nats_url: str | None = None
    edge_url: str | None = None
    pg_port: int | None = None
    # What this start moved and the user must hear: `up --detach` prints these from here.
    notices: list[str] = Field(default_factory=list)
    edge_moved_from: int | None = None  # the remembered edge port that was taken at this start
    components: dict[str, Component] = Field(default_factory=dict)


def state_path(home: Path) -> Path:
    return home / STATE_FILE


def write_state(home: Path, state: State) -> None:
    """Replace the file atomically, so a reader never sees half of it."""
    path = state_path(home)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(state.model_dump_json(indent=2))
    os.replace(tmp, path)


def read_state(home: Path) -> State | None:
    try:
        return State.model_validate(json.loads(state_path(home).read_text()))
    except (OSError, ValueError):
        return None
