"""The supervisor keeps the edge's port between runs while it is free (real sockets, no mocks)."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from echo_memory.libs.local.supervisor.ports import free_port
from echo_memory.libs.local.supervisor.supervisor import StartupError, choose_port, remembered_port


def test_a_free_remembered_port_is_taken_again() -> None:
    previous = free_port()
    assert choose_port(0, "the MCP edge", "ECHO_MEMORY_EDGE_PORT", previous) == previous


def test_a_remembered_port_in_use_gives_way_to_a_free_one() -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        taken = busy.getsockname()[1]
        chosen = choose_port(0, "the MCP edge", "ECHO_MEMORY_EDGE_PORT", taken)
    assert chosen != taken


def test_a_configured_port_wins_and_a_busy_one_is_an_error() -> None:
    port = free_port()
    assert choose_port(port, "the MCP edge", "ECHO_MEMORY_EDGE_PORT", previous=port + 1) == port
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        taken = busy.getsockname()[1]
        with pytest.raises(StartupError, match=f"port {taken} for the MCP edge is already in use"):
            choose_port(taken, "the MCP edge", "ECHO_MEMORY_EDGE_PORT")


def test_ports_chosen_for_the_same_start_are_avoided() -> None:
    previous = free_port()
    assert choose_port(0, "NATS", "ECHO_MEMORY_NATS_PORT", previous, avoid=frozenset({previous})) != previous


@pytest.mark.parametrize("content", ["", "not a port", "0", "70000", "-5"])
def test_a_missing_or_garbled_memory_is_ignored(tmp_path: Path, content: str) -> None:
    path = tmp_path / "edge-port"
    assert remembered_port(path) is None
    path.write_text(content)
    assert remembered_port(path) is None


def test_a_remembered_port_is_read_back(tmp_path: Path) -> None:
    path = tmp_path / "edge-port"
    path.write_text("48123\n")
    assert remembered_port(path) == 48123
