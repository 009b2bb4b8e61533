"""The CRDs (charts/echo-memory/files/crds, installed by templates/crds.yaml) and the examples in deploy/examples.

The API server prunes status fields a CRD does not declare and rejects spec
fields it does not know; kmock does neither, so these checks stand in for it.
"""

from __future__ import annotations

import logging
from typing import Any

import jsonschema
import kopf
import pytest
import yaml
from k8s_support import EXAMPLES, FakeKube, RecordingBackend, closed_schema, newest_k8s_minors, validate_strict

from echo_memory.operator import OperatorConfig, handlers, names
from echo_memory.operator.context import Context
from echo_memory.operator.manifests import b64
from echo_memory.operator.specs import parse_agent, parse_org, parse_scope

KINDS = {names.ORG_KIND: names.ORG_PLURAL, names.SCOPE_KIND: names.SCOPE_PLURAL, names.AGENT_KIND: names.AGENT_PLURAL}
PARSERS = {names.ORG_KIND: parse_org, names.SCOPE_KIND: parse_scope, names.AGENT_KIND: parse_agent}


def schema_of(crd: dict[str, Any]) -> dict[str, Any]:
    (version,) = crd["spec"]["versions"]
    return dict(version["schema"]["openAPIV3Schema"])


def test_crds_match_the_operator(crds: dict[str, dict[str, Any]]) -> None:
    assert set(crds) == set(KINDS)
    for kind, crd in crds.items():
        validate_strict(crd, newest_k8s_minors())
        spec = crd["spec"]
        assert spec["group"] == names.GROUP and spec["names"]["plural"] == KINDS[kind]
        assert crd["metadata"]["name"] == f"{KINDS[kind]}.{names.GROUP}"
        (version,) = spec["versions"]
        assert version["name"] == names.VERSION and version["served"] and version["storage"]
        assert version["subresources"] == {"status": {}}  # kopf then patches /status separately


def test_every_field_is_described_for_kubectl_explain(crds: dict[str, dict[str, Any]]) -> None:
    missing: list[str] = []

    def walk(node: dict[str, Any], path: str) -> None:
        for key, child in (node.get("properties") or {}).items():
            if key != "metadata" and not child.get("description"):
                missing.append(f"{path}.{key}")
            walk(child, f"{path}.{key}")
        if isinstance(node.get("items"), dict):
            walk(node["items"], f"{path}[]")

    for kind, crd in crds.items():
        walk(schema_of(crd), kind)
    assert missing == []


def test_printer_columns(crds: dict[str, dict[str, Any]]) -> None:
    columns = [c["name"] for c in crds["MemoryOrg"]["spec"]["versions"][0]["additionalPrinterColumns"]
               if not c.get("priority")]
    assert columns == ["Org", "Provider", "Ready", "Phase", "Schema", "Age"]
    scope_columns = [c["name"] for c in crds["MemoryScope"]["spec"]["versions"][0]["additionalPrinterColumns"]]
    assert {"Org", "Facts", "Last Write"} <= set(scope_columns)
    for crd in crds.values():
        schema = schema_of(crd)
        for column in crd["spec"]["versions"][0]["additionalPrinterColumns"]:
            path = column["jsonPath"].split("[", 1)[0].strip(".").split(".")
            if path[0] == "metadata":
                continue
            node = schema
            for part in path:  # every column points at a declared field
                node = node["properties"][part]


async def _statuses_of_every_org_phase() -> list[dict[str, Any]]:
    """Run the org handler through each outcome and collect the status blocks it writes."""
    out = []
    config = OperatorConfig(schema_version=2, liveness_endpoint=None)

    async def run(kube: FakeKube, spec: dict[str, Any], status: dict[str, Any] | None = None) -> dict[str, Any]:
        raw = {"apiVersion": "echo-memory.io/v1alpha1", "kind": "MemoryOrg",
               "metadata": {"name": "o", "namespace": "n", "uid": "u", "generation": 1},
               "spec": spec, "status": status or {}}
        kube.objects[("MemoryOrg", "n", "o")] = raw  # the handler re-reads its object before reconciling
        body = kopf.Body(raw)
        patch = kopf.Patch()
        memo = kopf.Memo(ctx=Context(kube=kube, backend=RecordingBackend(), config=config))  # type: ignore[arg-type]
        await handlers.org_reconcile(body=body, patch=patch, memo=memo, logger=logging.getLogger("t"))
        out.append(dict(patch["status"]))
        return dict(patch["status"])

    await run(FakeKube(), {"database": {"provider": "Mongo"}})                      # invalid spec
    await run(FakeKube(), {"database": {"provider": "CloudNativePG"}})              # dependency missing
    kube = FakeKube()
    kube.objects[("Secret", "n", "ext")] = {"data": {"uri": b64("postgresql://x@h/db")}}
    spec = {"database": {"provider": "External", "secretRef": {"name": "ext"}}}
    status = await run(kube, spec)                                                   # migrating
    kube.objects[("Job", "n", "o-migrate-v2")]["status"] = {"failed": 4}
    await run(kube, spec, status)                                                    # migration failed
    kube.objects[("Job", "n", "o-migrate-v2")]["status"] = {"succeeded": 1}
    await run(kube, spec, status)                                                    # ready
    return out


async def test_status_schemas_keep_what_the_operator_writes(crds: dict[str, dict[str, Any]]) -> None:
    schema = closed_schema(schema_of(crds["MemoryOrg"]))
    statuses = await _statuses_of_every_org_phase()
    assert {s["phase"] for s in statuses} == {"Invalid spec", "Waiting for CloudNativePG", "Migrating schema",
                                              "Migration failed", "Ready"}
    for status in statuses:
        jsonschema.validate({"status": status}, schema)


def test_closed_schema_catches_an_undeclared_status_field(crds: dict[str, dict[str, Any]]) -> None:
    """Guard: the check above must be able to fail."""
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"status": {"phase": "Ready", "sneaky": 1}}, closed_schema(schema_of(crds["MemoryOrg"])))


def example_docs() -> list[tuple[str, dict[str, Any]]]:
    docs = []
    for path in sorted(EXAMPLES.glob("*.yaml")):
        docs += [(f"{path.name}:{d['kind']}/{d['metadata']['name']}", d)
                 for d in yaml.safe_load_all(path.read_text()) if d]
    return docs


def test_there_are_examples_of_every_kind() -> None:
    kinds = [doc["kind"] for _, doc in example_docs()]
    assert set(KINDS) <= set(kinds)
    providers = {doc["spec"]["database"]["provider"] for _, doc in example_docs() if doc["kind"] == "MemoryOrg"}
    assert providers == {"Auto", "CloudNativePG", "External"}


@pytest.mark.parametrize(("where", "doc"), example_docs(), ids=[w for w, _ in example_docs()])
def test_example_is_valid(crds: dict[str, dict[str, Any]], where: str, doc: dict[str, Any]) -> None:
    if doc["kind"] in crds:
        jsonschema.validate(doc, closed_schema(schema_of(crds[doc["kind"]])))  # unknown fields rejected
        PARSERS[doc["kind"]](doc["metadata"]["name"], doc["spec"])              # and the operator accepts it
    else:
        validate_strict(doc, newest_k8s_minors())


def test_crd_schema_rejects_a_bad_example(crds: dict[str, dict[str, Any]]) -> None:
    bad = {"apiVersion": "echo-memory.io/v1alpha1", "kind": "MemoryOrg", "metadata": {"name": "x"},
           "spec": {"database": {"provider": "Auto", "storage": "lots"}}}
    with pytest.raises(jsonschema.ValidationError, match="lots"):
        jsonschema.validate(bad, closed_schema(schema_of(crds["MemoryOrg"])))
