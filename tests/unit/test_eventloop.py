"""Every process runs its event loop on uvloop unless told not to (libs/server/eventloop.py)."""

from __future__ import annotations

import asyncio

import pytest

from echo_memory.libs.core.config import load_settings
from echo_memory.libs.server import eventloop


async def _which() -> str:
    await asyncio.sleep(0)
    return eventloop.loop_name()


def test_run_uses_uvloop_by_default_and_returns_the_result() -> None:
    assert eventloop.run(_which()) == "uvloop"


def test_run_can_be_told_to_use_asyncios_own_loop() -> None:
    assert eventloop.run(_which(), use_uvloop=False) == "asyncio"


def test_settings_switch_it_off(monkeypatch: pytest.MonkeyPatch) -> None:
    assert load_settings().uvloop is True
    monkeypatch.setenv("ECHO_MEMORY_UVLOOP", "0")
    settings = load_settings()
    assert settings.uvloop is False
    assert eventloop.run(_which(), use_uvloop=settings.uvloop) == "asyncio"


async def test_the_test_suite_itself_runs_on_uvloop() -> None:
    assert eventloop.loop_name() == "uvloop"
