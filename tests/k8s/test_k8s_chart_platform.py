"""What a platform team asks of the chart, rendered by the real helm binary.

Pod Security Standards ``restricted`` on every pod (the chart's and the operator's), probes on every
Deployment, two releases in one namespace, the migration hook, CRDs as kept templates, NetworkPolicies,
and the scheduling the operator applies to the pods it makes.  1.20 (the real API-server tier) has no
PodSecurity admission, so ``restricted`` is checked here, field by field, as the admission plugin does.
"""

from __future__ import annotations

import json
import pathlib
import subprocess
from typing import Any

import pytest
import yaml
from k8s_support import CHART, strip_dependencies

from echo_memory.operator import OperatorConfig
from echo_memory.operator.manifests import build_db_statefulset, build_migration_job
from echo_memory.operator.manifests.pods import PodSettings

NS = "memsys"


@pytest.fixture(scope="module")
def chart(tmp_path_factory: pytest.TempPathFactory) -> pathlib.Path:
    return strip_dependencies(CHART, tmp_path_factory.mktemp("platform-chart") / "echo-memory")


def render(helm_bin: pathlib.Path, chart: pathlib.Path, tmp: pathlib.Path, values: dict[str, Any],
           release: str = "rel") -> list[dict[str, Any]]:
    path = tmp / f"{release}-values.yaml"
    path.write_text(yaml.safe_dump(values))
    # `helm template` has no cluster to keep a generated NATS token in: the chart wants a seed.
    out = subprocess.run([str(helm_bin), "template", release, str(chart), "-n", NS, "-f", str(path),
                          "--set", "natsAuth.seed=platform-tests"],
                         capture_output=True, text=True, check=True, timeout=60)
    return [d for d in yaml.safe_load_all(out.stdout) if d]


def pod_specs(docs: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {f"{d['kind']}/{d['metadata']['name']}": d["spec"]["template"]["spec"]
            for d in docs if d["kind"] in ("Deployment", "Job", "StatefulSet")}


def restricted_violations(spec: dict[str, Any]) -> list[str]:
    """The Pod Security Standards ``restricted`` profile (v1.25+), as the PodSecurity admission checks it."""
    out = []
    pod_sc = spec.get("securityContext") or {}
    for field in ("hostNetwork", "hostPID", "hostIPC"):
        if spec.get(field):
            out.append(field)
    for volume in spec.get("volumes") or []:
        allowed = {"configMap", "csi", "downwardAPI", "emptyDir", "ephemeral", "persistentVolumeClaim",
                   "projected", "secret", "name"}
        if set(volume) - allowed:
            out.append(f"volume {volume['name']}")
    for c in spec.get("containers", []) + spec.get("initContainers", []):
        sc = c.get("securityContext") or {}
        if sc.get("privileged"):
            out.append(f"{c['name']}: privileged")
        if sc.get("allowPrivilegeEscalation") is not False:
            out.append(f"{c['name']}: allowPrivilegeEscalation must be false")
        if (sc.get("capabilities") or {}).get("drop") != ["ALL"]:
            out.append(f"{c['name']}: capabilities.drop must be [ALL]")
        if set((sc.get("capabilities") or {}).get("add") or []) - {"NET_BIND_SERVICE"}:
            out.append(f"{c['name']}: capabilities.add")
        if not (sc.get("runAsNonRoot") or pod_sc.get("runAsNonRoot")):
            out.append(f"{c['name']}: runAsNonRoot")
        if sc.get("runAsUser") == 0 or pod_sc.get("runAsUser") == 0:
            out.append(f"{c['name']}: runAsUser 0")
        seccomp = (sc.get("seccompProfile") or pod_sc.get("seccompProfile") or {}).get("type")
        if seccomp not in ("RuntimeDefault", "Localhost"):
            out.append(f"{c['name']}: seccompProfile")
        for port in c.get("ports") or []:
            if port.get("hostPort"):
                out.append(f"{c['name']}: hostPort")
    return out


def test_every_pod_of_the_chart_and_of_the_operator_is_pss_restricted(helm_bin: pathlib.Path, chart: pathlib.Path,
                                                                      tmp_path: pathlib.Path) -> None:
    docs = render(helm_bin, chart, tmp_path, {"defaultDatabase": {"existingSecret": "db"}})
    specs = pod_specs(docs)
    assert "Job/rel-echo-memory-migrate" in specs and "Deployment/rel-echo-memory-operator" in specs
    made = {"StatefulSet/acme-db": build_db_statefulset(
                org_resource="acme", namespace="t", image="pg", storage="1Gi", storage_class=None,
                delete_volumes_with_set=False)["spec"]["template"]["spec"],
            "Job/acme-migrate": build_migration_job(
                org_resource="acme", namespace="t", schema_version=1, image="i", image_pull_policy="Always",
                secret_name="s", secret_key="uri")["spec"]["template"]["spec"]}
    for name, spec in {**specs, **made}.items():
        assert restricted_violations(spec) == [], name
    # The check can fail: a root container is refused.
    bad = json.loads(json.dumps(made["StatefulSet/acme-db"]))
    bad["securityContext"].pop("seccompProfile")
    assert restricted_violations(bad) == ["postgres: seccompProfile"]


def test_every_deployment_has_liveness_and_readiness_probes(helm_bin: pathlib.Path, chart: pathlib.Path,
                                                            tmp_path: pathlib.Path) -> None:
    docs = render(helm_bin, chart, tmp_path, {})
    deployments = [d for d in docs if d["kind"] == "Deployment"]
    assert len(deployments) == 8
    for dep in deployments:
        container = dep["spec"]["template"]["spec"]["containers"][0]
        assert container.get("livenessProbe") and container.get("readinessProbe"), dep["metadata"]["name"]
        ports = {p["name"]: p["containerPort"] for p in container.get("ports") or []}
        probe_port = container["readinessProbe"]["httpGet"]["port"]
        assert probe_port in ports, dep["metadata"]["name"]
        env = {e["name"]: e.get("value") for e in container["env"]}
        name = dep["metadata"]["labels"]["app.kubernetes.io/component"]
        if name not in ("edge", "operator"):
            assert env["ECHO_MEMORY_HEALTH_PORT"] == str(ports["health"]) == "8081"


def test_two_releases_in_one_namespace_share_no_object_name(helm_bin: pathlib.Path, chart: pathlib.Path,
                                                            tmp_path: pathlib.Path) -> None:
    first = render(helm_bin, chart, tmp_path, {"defaultDatabase": {"existingSecret": "db"},
                                               "networkPolicy": {"enabled": True}}, release="alpha")
    second = render(helm_bin, chart, tmp_path, {"defaultDatabase": {"existingSecret": "db"},
                                                "networkPolicy": {"enabled": True}, "crds": {"install": False},
                                                "natsAuth": {"secretName": "beta-nats-auth"}}, release="beta")

    def names(docs: list[dict[str, Any]]) -> set[tuple[str, str]]:
        return {(d["kind"], d["metadata"]["name"]) for d in docs}

    assert names(first) & names(second) == set()
    assert not [d for d in second if d["kind"] == "CustomResourceDefinition"]  # one release owns the CRDs


def test_crds_are_templates_kept_on_uninstall(helm_bin: pathlib.Path, chart: pathlib.Path,
                                              tmp_path: pathlib.Path) -> None:
    crds = [d for d in render(helm_bin, chart, tmp_path, {}) if d["kind"] == "CustomResourceDefinition"]
    assert {c["metadata"]["name"] for c in crds} == {"memoryorgs.echo-memory.io", "memoryscopes.echo-memory.io",
                                                    "memoryagents.echo-memory.io"}
    for crd in crds:
        assert crd["metadata"]["annotations"]["helm.sh/resource-policy"] == "keep"
    assert not (CHART / "crds").exists()  # helm's crds/ folder is never upgraded: nothing may live there


def test_migration_hook_runs_before_install_and_upgrade(helm_bin: pathlib.Path, chart: pathlib.Path,
                                                        tmp_path: pathlib.Path) -> None:
    docs = render(helm_bin, chart, tmp_path, {"defaultDatabase": {"existingSecret": "local-db", "key": "url"}})
    (job,) = [d for d in docs if d["kind"] == "Job"]
    assert job["metadata"]["annotations"]["helm.sh/hook"] == "pre-install,pre-upgrade"
    container = job["spec"]["template"]["spec"]["containers"][0]
    assert container["command"] == ["echo-memory", "init-db"]
    assert container["env"] == [{"name": "ECHO_MEMORY_DATABASE_URL",
                                 "valueFrom": {"secretKeyRef": {"name": "local-db", "key": "url"}}}]
    assert not [d for d in render(helm_bin, chart, tmp_path, {}) if d["kind"] == "Job"]  # no default database


def test_network_policies_admit_only_echo_memory_traffic(helm_bin: pathlib.Path, chart: pathlib.Path,
                                                         tmp_path: pathlib.Path) -> None:
    peer = {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "ingress"}}}
    docs = render(helm_bin, chart, tmp_path, {"networkPolicy": {"enabled": True, "edgeFrom": [peer]}})
    policies = {d["metadata"]["name"]: d["spec"] for d in docs if d["kind"] == "NetworkPolicy"}
    edge = policies["rel-echo-memory-edge-ingress"]
    assert edge["ingress"] == [{"ports": [{"port": 8765, "protocol": "TCP"}], "from": [peer]}]
    egress = policies["rel-echo-memory-egress"]["egress"]
    assert {p["port"] for rule in egress for p in rule["ports"]} == {53, 4222, 5432}
    assert policies["rel-echo-memory-operator-egress"]["egress"][0]["ports"] == [{"port": 443, "protocol": "TCP"}]
    nats = policies["rel-echo-memory-nats-ingress"]
    assert nats["ingress"][0]["from"][0]["podSelector"]["matchLabels"]["app.kubernetes.io/instance"] == "rel"
    assert not [d for d in render(helm_bin, chart, tmp_path, {}) if d["kind"] == "NetworkPolicy"]


def test_operator_made_pods_get_pull_secrets_scheduling_and_resources(helm_bin: pathlib.Path, chart: pathlib.Path,
                                                                      tmp_path: pathlib.Path) -> None:
    values = {"imagePullSecrets": [{"name": "regcred"}], "podAnnotations": {"a": "1"}, "priorityClassName": "high",
              "operator": {"managedPods": {
                  "nodeSelector": {"pool": "db"}, "tolerations": [{"key": "db", "operator": "Exists"}],
                  "podLabels": {"team": "mem"},
                  "postgresResources": {"requests": {"cpu": "1", "memory": "2Gi"}, "limits": {"memory": "4Gi"}}}}}
    docs = render(helm_bin, chart, tmp_path, values)
    operator = next(d for d in docs if d["kind"] == "Deployment" and d["metadata"]["name"].endswith("-operator"))
    env = {e["name"]: e.get("value") for e in operator["spec"]["template"]["spec"]["containers"][0]["env"]}
    config = OperatorConfig.from_env(env)  # exactly what the operator process reads
    pod = PodSettings.model_validate(config.pod_settings_json)
    sts = build_db_statefulset(org_resource="acme", namespace="t", image="pg", storage="1Gi", storage_class=None,
                               delete_volumes_with_set=False, pod=pod)["spec"]["template"]
    assert sts["spec"]["imagePullSecrets"] == [{"name": "regcred"}]
    assert sts["spec"]["nodeSelector"] == {"pool": "db"} and sts["spec"]["priorityClassName"] == "high"
    assert sts["spec"]["tolerations"] == [{"key": "db", "operator": "Exists"}]
    assert sts["spec"]["containers"][0]["resources"]["limits"] == {"memory": "4Gi"}
    assert sts["metadata"]["labels"]["team"] == "mem" and sts["metadata"]["annotations"] == {"a": "1"}
    assert sts["metadata"]["labels"]["app.kubernetes.io/component"] == "database"  # operator labels win
    job = build_migration_job(org_resource="acme", namespace="t", schema_version=1, image="i",
                              image_pull_policy="Always", secret_name="s", secret_key="uri", pod=pod)
    assert job["spec"]["template"]["spec"]["nodeSelector"] == {"pool": "db"}
    assert job["spec"]["template"]["spec"]["containers"][0]["resources"]["requests"] == {"cpu": "50m",
                                                                                        "memory": "128Mi"}
    assert env["ECHO_OPERATOR_CREDENTIALS_SECRET"] == "rel-echo-memory-org-credentials"
    assert env["ECHO_MEMORY_LOG_LEVEL"] == "WARNING" and config.log_level == "WARNING"
