"""The org registry: which database serves which org, kept in the NATS KV bucket `echo-orgs`.

Services look an org up on its first request, so an org registered while they run (by the
operator, or by `echo-memory up` for the embedded `local` org) is served without a restart.

Each entry records its owner (who registered it: a MemoryOrg `namespace/name`, or `echo-memory up`).
Writes are compare-and-set on the entry's revision: a name is claimed only when it is free (or already
this owner's), and only its owner can change or remove it, so losing a name conflict can never take
over or unregister the winner's entry.  A claimed entry is not served until its owner marks it
serving (after the migrations ran); services see an org only once it is serving.

A serving entry never holds a password when the registrant says where the password is kept instead:
`password_file` names a file under the services' credentials directory (a Secret volume on Kubernetes,
`ECHO_MEMORY_ORG_CREDENTIALS_DIR`), read when a service opens the org's pool.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import os
import pathlib
from urllib.parse import quote, urlsplit, urlunsplit

import nats
from nats.aio.client import Client as NATS
from nats.js.errors import BucketNotFoundError, KeyNotFoundError, KeyWrongLastSequenceError
from nats.js.kv import KeyValue

from echo_memory.libs.core.contracts.subjects import ORGS_BUCKET, valid_org
from echo_memory.libs.server.bus.auth import NatsCredentials, connect_options

STATE_CLAIMED = "claimed"
STATE_SERVING = "serving"
CREDENTIALS_DIR_ENV = "ECHO_MEMORY_ORG_CREDENTIALS_DIR"
_CAS_ATTEMPTS = 5


class OrgTaken(Exception):
    """The org name is registered by another owner; nothing was written."""

    def __init__(self, org: str, owner: str | None, database_url: str | None) -> None:
        super().__init__(f"org {org} is registered by {owner or 'an unknown owner'}")
        self.org, self.owner, self.database_url = org, owner, database_url


@dataclasses.dataclass(frozen=True)
class OrgEntry:
    """One registry entry as stored (the database URL never carries a password when `password_file` is set)."""

    org: str
    database_url: str | None
    owner: str | None = None
    state: str = STATE_SERVING
    password_file: str | None = None
    revision: int = 0

    def to_json(self) -> bytes:
        doc = {"org": self.org, "database_url": self.database_url, "owner": self.owner, "state": self.state}
        if self.password_file:
            doc["password_file"] = self.password_file
        return json.dumps(doc).encode()


def same_database(a: str | None, b: str | None) -> bool:
    """Whether two URLs name the same database (host, port, database), whatever the credentials."""
    if not a or not b:
        return False
    left, right = urlsplit(a), urlsplit(b)
    return (left.hostname, left.port or 5432, left.path) == (right.hostname, right.port or 5432, right.path)


def without_password(url: str) -> str:
    """The URL with its password removed (user, host, port, database and query kept)."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    netloc = (f"{parts.username}@" if parts.username else "") + host + (f":{parts.port}" if parts.port else "")
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))


def with_password(url: str, password: str) -> str:
    """The URL with `password` set for its user."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    netloc = f"{parts.username or ''}:{quote(password, safe='')}@{host}" + (f":{parts.port}" if parts.port else "")
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))


async def _bucket(nc: NATS, create: bool) -> KeyValue | None:
    js = nc.jetstream()
    try:
        return await js.key_value(ORGS_BUCKET)
    except BucketNotFoundError:
        if not create:
            return None
        return await js.create_key_value(bucket=ORGS_BUCKET, history=1)


def _parse(org: str, value: bytes | None, revision: int) -> OrgEntry | None:
    if not value:
        return None
    doc = json.loads(value)
    return OrgEntry(org=org, database_url=doc.get("database_url"), owner=doc.get("owner"),
                    state=doc.get("state") or STATE_SERVING, password_file=doc.get("password_file"),
                    revision=revision)


async def read_entry(nc: NATS, org: str) -> OrgEntry | None:
    """The registry entry of `org` (any state), or None."""
    kv = await _bucket(nc, create=False)
    if kv is None:
        return None
    try:
        entry = await kv.get(org)
    except KeyNotFoundError:
        return None
    return _parse(org, entry.value, int(entry.revision or 0))


async def claim_org(nc: NATS, org: str, owner: str, database_url: str, *, serve: bool = False,
                    password_file: str | None = None) -> OrgEntry:
    """Claim `org` for `owner` (or update `owner`'s entry); returns the entry as now stored.

    With `serve` False a new entry is only claimed (services do not see it yet) and an existing entry of
    this owner keeps its state; with `serve` True it is served from `database_url`.  A legacy entry without
    an owner is adopted when it names the same database.  Nothing is written when the stored entry is
    already what was asked.

    Raises:
        ValueError: an invalid org name.
        OrgTaken: another owner holds the name (nothing written).
    """
    if not valid_org(org):
        raise ValueError(f"invalid org name {org!r}: use lowercase letters, digits and dashes")
    stored_url = without_password(database_url) if password_file else database_url
    kv = await _bucket(nc, create=True)
    assert kv is not None  # create=True makes the bucket when it is missing
    for _ in range(_CAS_ATTEMPTS):
        current = await read_entry(nc, org)
        if current is not None and current.owner != owner and not (
                current.owner is None and same_database(current.database_url, database_url)):
            raise OrgTaken(org, current.owner, current.database_url)
        state = STATE_SERVING if serve or (current is not None and current.state == STATE_SERVING
                                           and current.owner == owner) else STATE_CLAIMED
        wanted = OrgEntry(org=org, database_url=stored_url, owner=owner, state=state, password_file=password_file)
        if current is not None and dataclasses.replace(current, revision=0) == wanted:
            return current
        try:
            if current is None:
                revision = await kv.create(org, wanted.to_json())
            else:
                revision = await kv.update(org, wanted.to_json(), last=current.revision)
        except KeyWrongLastSequenceError:
            continue  # someone wrote in between: read again and re-decide
        return dataclasses.replace(wanted, revision=int(revision))
    raise OrgTaken(org, None, None)


async def release_org(nc: NATS, org: str, owner: str) -> bool:
    """Remove `org` if `owner` holds it; returns whether an entry was removed (another owner's never is)."""
    kv = await _bucket(nc, create=False)
    if kv is None:
        return False
    for _ in range(_CAS_ATTEMPTS):
        current = await read_entry(nc, org)
        if current is None or current.owner != owner:
            return False
        try:
            await kv.delete(org, last=current.revision)
        except KeyWrongLastSequenceError:
            continue
        return True
    return False


async def register_org(
    nats_url: str, org: str, database_url: str, credentials: NatsCredentials | None = None, *,
    owner: str = "echo-memory up",
) -> None:
    """Serve `org` from `database_url` for `owner` (the laptop's `echo-memory up` by default), on an
    authenticated bus as the user `credentials` name.

    Raises:
        OrgTaken: another owner holds the name.
    """
    nc = await nats.connect(nats_url, **connect_options(credentials))
    try:
        await claim_org(nc, org, owner, database_url, serve=True)
    finally:
        await nc.close()


async def unregister_org(
    nats_url: str, org: str, credentials: NatsCredentials | None = None, *, owner: str = "echo-memory up"
) -> bool:
    """Forget `org` if `owner` holds it; services stop answering for it once their cache expires."""
    nc = await nats.connect(nats_url, **connect_options(credentials))
    try:
        return await release_org(nc, org, owner)
    finally:
        await nc.close()


def _credentials_dir() -> pathlib.Path | None:
    folder = os.environ.get(CREDENTIALS_DIR_ENV)
    return pathlib.Path(folder) if folder else None


def resolve_url(entry: OrgEntry) -> str | None:
    """The usable database URL of a serving entry, its password read from the credentials folder.

    None when the entry is only claimed, or names a password file this process cannot read yet (a Secret
    volume is refreshed by the kubelet within a minute; the caller asks again on a later request).
    """
    if entry.state != STATE_SERVING or not entry.database_url:
        return None
    if not entry.password_file:
        return entry.database_url
    folder = _credentials_dir()
    name = pathlib.PurePath(entry.password_file).name  # a bare key, never a path out of the folder
    if folder is None or not name:
        return None
    with contextlib.suppress(OSError):
        return with_password(entry.database_url, (folder / name).read_text().strip())
    return None


async def lookup_org(nc: NATS, org: str, timeout: float = 5.0) -> str | None:
    """The database URL serving `org`, or None (unknown, only claimed, or its password not readable yet)."""
    async with asyncio.timeout(timeout):  # not wait_for: on 3.11 it can lose a cancel that meets the reply
        entry = await read_entry(nc, org)
    return resolve_url(entry) if entry is not None else None
