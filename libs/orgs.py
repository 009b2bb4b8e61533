"""The org registry: which database serves which org, kept in the NATS KV bucket `echo-orgs`.

Services look an org up on its first request, so an org registered while they run (by the
operator, or by `echo-memory up` for the embedded `local` org) is served without a restart.
"""

from __future__ import annotations

import contextlib
import json

import nats
from nats.aio.client import Client as NATS
from nats.js.errors import BucketNotFoundError, KeyNotFoundError
from nats.js.kv import KeyValue

from libs.bus.auth import NatsCredentials, connect_options
from libs.contracts.subjects import ORGS_BUCKET, valid_org


async def _bucket(nc: NATS, create: bool) -> KeyValue | None:
    js = nc.jetstream()
    try:
        return await js.key_value(ORGS_BUCKET)
    except BucketNotFoundError:
        if not create:
            return None
        return await js.create_key_value(bucket=ORGS_BUCKET, history=1)


async def register_org(
    nats_url: str, org: str, database_url: str, credentials: NatsCredentials | None = None
) -> None:
    """Record (or replace) the database URL of `org` (on an authenticated bus, as the admin user)."""
    if not valid_org(org):
        raise ValueError(f"invalid org name {org!r}: use lowercase letters, digits and dashes")
    nc = await nats.connect(nats_url, **connect_options(credentials))
    try:
        kv = await _bucket(nc, create=True)
        assert kv is not None  # create=True makes the bucket when it is missing
        await kv.put(org, json.dumps({"org": org, "database_url": database_url}).encode())
    finally:
        await nc.close()


async def unregister_org(nats_url: str, org: str, credentials: NatsCredentials | None = None) -> None:
    """Forget `org`; its services stop answering for it once their cache expires."""
    nc = await nats.connect(nats_url, **connect_options(credentials))
    try:
        kv = await _bucket(nc, create=False)
        if kv is not None:
            with contextlib.suppress(KeyNotFoundError):
                await kv.delete(org)
    finally:
        await nc.close()


async def lookup_org(nc: NATS, org: str) -> str | None:
    """The database URL registered for `org`, or None."""
    kv = await _bucket(nc, create=False)
    if kv is None:
        return None
    try:
        entry = await kv.get(org)
    except KeyNotFoundError:
        return None
    if entry.value is None:
        return None
    return str(json.loads(entry.value)["database_url"])
