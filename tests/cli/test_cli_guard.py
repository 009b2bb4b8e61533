"""main()'s guard: expected conditions become a sentence, a bug keeps its traceback."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from echo_memory.libs.core.contracts.errors import Unavailable
from echo_memory.libs.local.cli import system
from echo_memory.libs.local.cli.main import main
from echo_memory.libs.local.supervisor.ports import free_port


def _nothing_configured(monkeypatch: pytest.MonkeyPatch, home: Path) -> None:
    monkeypatch.setenv("ECHO_MEMORY_HOME", str(home))
    monkeypatch.delenv("ECHO_MEMORY_NATS_URL", raising=False)
    monkeypatch.delenv("ECHO_MEMORY_DATABASE_URL", raising=False)


def test_an_unexpected_exception_is_not_hidden(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    _nothing_configured(monkeypatch, tmp_path)

    def broken(settings: object, **options: object) -> int:
        raise ZeroDivisionError("a bug")

    monkeypatch.setattr(system, "status", broken)
    with pytest.raises(ZeroDivisionError):
        main(["status"])


def test_an_echo_error_escaping_a_command_is_one_sentence(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _nothing_configured(monkeypatch, tmp_path)

    def down(settings: object, **options: object) -> int:
        raise Unavailable("the database of org 'local' cannot be reached")

    monkeypatch.setattr(system, "status", down)
    assert main(["status"]) == 1
    assert capsys.readouterr().err == "echo-memory status: the database of org 'local' cannot be reached\n"


def test_a_refused_connection_escaping_a_command_is_one_sentence(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _nothing_configured(monkeypatch, tmp_path)

    def dial(settings: object, **options: object) -> int:
        socket.create_connection(("127.0.0.1", free_port()), timeout=5).close()  # a real refused connection
        return 0

    monkeypatch.setattr(system, "status", dial)
    assert main(["status"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "echo-memory up" in err and "Traceback" not in err


def test_invalid_settings_are_a_usage_error_in_one_sentence(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _nothing_configured(monkeypatch, tmp_path)
    monkeypatch.setenv("ECHO_MEMORY_TIMEOUTS__READ", "soon")
    assert main(["status"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "timeouts.read" in err and "ECHO_MEMORY_" in err
