"""The emulator's own fixes (k8s_emulator.ApiServer), pinned so a kmock upgrade cannot hide a regression."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import aiohttp
import pytest
from k8s_emulator import ApiServer

pytestmark = [pytest.mark.kmock(cls=ApiServer), pytest.mark.timeout(30)]

CMS = "/api/v1/namespaces/ns1/configmaps"
ORGS = "/apis/echo-memory.io/v1alpha1/namespaces/ns1/memoryorgs"
MERGE = {"Content-Type": "application/merge-patch+json"}


@pytest.fixture()
async def http(api: ApiServer) -> Any:
    async with aiohttp.ClientSession(base_url=str(api.url)) as session:
        yield session


async def test_create_fills_what_an_api_server_fills(http: aiohttp.ClientSession) -> None:
    async with http.post(CMS, json={"metadata": {"generateName": "ev-"}}) as resp:
        obj = await resp.json()
    meta = obj["metadata"]
    assert obj["apiVersion"] == "v1" and obj["kind"] == "ConfigMap"
    assert meta["name"].startswith("ev-") and len(meta["name"]) == 8 and meta["namespace"] == "ns1"
    assert meta["uid"] and meta["resourceVersion"].isdigit() and meta["generation"] == 1
    assert meta["creationTimestamp"].endswith("Z")


async def test_status_and_body_are_patched_separately(http: aiohttp.ClientSession) -> None:
    async with http.post(ORGS, json={"metadata": {"name": "o"}, "spec": {"a": 1}}) as resp:
        rv0 = int((await resp.json())["metadata"]["resourceVersion"])
    async with http.patch(f"{ORGS}/o/status", headers=MERGE, json={"spec": {"a": 2}, "status": {"x": 1}}) as resp:
        obj = await resp.json()
    assert obj["spec"] == {"a": 1} and obj["status"] == {"x": 1} and obj["metadata"]["generation"] == 1
    async with http.patch(f"{ORGS}/o", headers=MERGE, json={"spec": {"a": 3}, "status": {"x": 2}}) as resp:
        obj = await resp.json()
    assert obj["spec"] == {"a": 3} and obj["status"] == {"x": 1}
    assert obj["metadata"]["generation"] == 2 and int(obj["metadata"]["resourceVersion"]) > rv0


async def test_failed_json_patch_test_is_a_conflict_not_a_crash(http: aiohttp.ClientSession) -> None:
    async with http.post(CMS, json={"metadata": {"name": "c"}}) as resp:
        assert resp.status == 200
    patch = [{"op": "test", "path": "/metadata/resourceVersion", "value": "1"},
             {"op": "add", "path": "/data", "value": {"k": "v"}}]
    async with http.patch(f"{CMS}/c", json=patch, headers={"Content-Type": "application/json-patch+json"}) as resp:
        assert resp.status == 422
        assert resp.headers["Content-Type"] == "application/json"  # lightkube needs exactly this
        assert (await resp.json())["kind"] == "Status"


async def _watch(http: aiohttp.ClientSession, url: str, count: int) -> list[dict[str, Any]]:
    events = []
    async with http.get(url) as resp:
        async for line in resp.content:
            if line.strip():
                events.append(json.loads(line))
                if len(events) == count:
                    break
    return events


async def test_watch_resumes_from_a_resource_version(http: aiohttp.ClientSession) -> None:
    for name in ("a", "b"):
        async with http.post(CMS, json={"metadata": {"name": name}}) as resp:
            assert resp.status == 200
    async with http.get(CMS) as resp:
        listing = await resp.json()
    version = listing["metadata"]["resourceVersion"]
    assert version.isdigit()
    watcher = asyncio.create_task(_watch(http, f"{CMS}?watch=true&resourceVersion={version}", 1))
    await asyncio.sleep(0.1)
    async with http.post(CMS, json={"metadata": {"name": "c"}}) as resp:
        assert resp.status == 200
    (event,) = await asyncio.wait_for(watcher, 5)  # only the new object, no replay of a and b
    assert event["type"] == "ADDED" and event["object"]["metadata"]["name"] == "c"

    fresh = await asyncio.wait_for(_watch(http, f"{CMS}?watch=true", 3), 5)  # a fresh watch lists all
    assert sorted(e["object"]["metadata"]["name"] for e in fresh) == ["a", "b", "c"]
