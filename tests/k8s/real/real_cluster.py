"""A real Kubernetes control plane for tests: etcd, kube-apiserver and kube-controller-manager on loopback.

The binaries come from ``controlplane/build.sh`` (Debian 12's kubernetes 1.20.2 source package), cached in
``$ECHO_MEMORY_K8S_REAL_DIR`` or ``~/.cache/echo-memory/k8s-real``.  There is no kubelet and no scheduler:
:class:`Kubelet` plays the node (binds a pod, sets its status) so the real StatefulSet and Job controllers
see it run, and a migration Job's command is run on the host.  The API client is stdlib ``urllib``.
"""

from __future__ import annotations

import json
import os
import pathlib
import shutil
import signal
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterable
from typing import Any

import yaml

HERE = pathlib.Path(__file__).resolve().parent
RELEASE_NS = "echo-system"  # where the tier installs the chart's operator (its ServiceAccount and Secrets)
BUILD_SCRIPT = HERE / "controlplane" / "build.sh"


def cache_dir() -> pathlib.Path:
    """Where build.sh puts (and finds) the binaries."""
    env = os.environ.get("ECHO_MEMORY_K8S_REAL_DIR")
    return pathlib.Path(env) if env else pathlib.Path.home() / ".cache" / "echo-memory" / "k8s-real"


def binaries() -> pathlib.Path:
    """The bin/ folder of a finished build, or an error that says how to make one."""
    bin_dir = cache_dir() / "bin"
    missing = [b for b in ("etcd", "kube-apiserver", "kube-controller-manager") if not (bin_dir / b).exists()]
    if missing or not (bin_dir / ".complete").exists():
        raise RuntimeError(f"no Kubernetes control plane in {bin_dir} (missing: {', '.join(missing) or 'stamp'}); "
                           f"build it with `make k8s-real-bin` (or bash {BUILD_SCRIPT})")
    return bin_dir


class ApiError(RuntimeError):
    """An API server answer that was not 2xx."""

    def __init__(self, code: int, body: str, what: str) -> None:
        super().__init__(f"{what}: HTTP {code}: {body[:600]}")
        self.code = code
        self.body = body


_PLURALS = {
    "Namespace": ("v1", "namespaces", False), "Secret": ("v1", "secrets", True),
    "ServiceAccount": ("v1", "serviceaccounts", True), "Service": ("v1", "services", True),
    "Pod": ("v1", "pods", True), "Node": ("v1", "nodes", False), "Event": ("v1", "events", True),
    "PersistentVolumeClaim": ("v1", "persistentvolumeclaims", True),
    "StatefulSet": ("apps/v1", "statefulsets", True), "Deployment": ("apps/v1", "deployments", True),
    "Job": ("batch/v1", "jobs", True),
    "Role": ("rbac.authorization.k8s.io/v1", "roles", True),
    "RoleBinding": ("rbac.authorization.k8s.io/v1", "rolebindings", True),
    "ClusterRole": ("rbac.authorization.k8s.io/v1", "clusterroles", False),
    "ClusterRoleBinding": ("rbac.authorization.k8s.io/v1", "clusterrolebindings", False),
    "CustomResourceDefinition": ("apiextensions.k8s.io/v1", "customresourcedefinitions", False),
    "MemoryOrg": ("echo-memory.io/v1alpha1", "memoryorgs", True),
    "MemoryScope": ("echo-memory.io/v1alpha1", "memoryscopes", True),
    "MemoryAgent": ("echo-memory.io/v1alpha1", "memoryagents", True),
    "Cluster": ("postgresql.cnpg.io/v1", "clusters", True),
}


def path_of(kind: str, name: str | None = None, namespace: str | None = None, sub: str = "") -> str:
    """The REST path of a kind (collection when ``name`` is None)."""
    api_version, plural, namespaced = _PLURALS[kind]
    base = f"/api/{api_version}" if "/" not in api_version else f"/apis/{api_version}"
    if namespaced and namespace:
        base += f"/namespaces/{namespace}"
    base += f"/{plural}"
    if name:
        base += f"/{name}"
    return base + (f"/{sub}" if sub else "")


class Client:
    """A bearer-token client of the API server (stdlib only, sync: the operator runs in another process)."""

    def __init__(self, server: str, token: str) -> None:
        self.server, self.token = server, token
        self._ssl = ssl.create_default_context()
        self._ssl.check_hostname = False
        self._ssl.verify_mode = ssl.CERT_NONE

    def request(self, method: str, path: str, body: Any = None, content_type: str = "application/json") -> Any:
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.server + path, data=data, method=method, headers={
            "Authorization": f"Bearer {self.token}", "Content-Type": content_type, "Accept": "application/json"})
        try:
            with urllib.request.urlopen(req, context=self._ssl, timeout=30) as resp:
                raw = resp.read()
        except urllib.error.HTTPError as exc:
            raise ApiError(exc.code, exc.read().decode(errors="replace"), f"{method} {path}") from None
        if not raw:
            return None
        try:
            return json.loads(raw)
        except ValueError:  # /readyz and friends answer plain text
            return raw.decode(errors="replace")

    def get(self, kind: str, name: str, namespace: str | None = None) -> dict[str, Any] | None:
        try:
            return dict(self.request("GET", path_of(kind, name, namespace)))
        except ApiError as exc:
            if exc.code == 404:
                return None
            raise

    def list(self, kind: str, namespace: str | None = None, selector: str = "") -> list[dict[str, Any]]:
        query = f"?labelSelector={urllib.request.quote(selector)}" if selector else ""
        return list(self.request("GET", path_of(kind, None, namespace) + query)["items"])

    def create(self, obj: dict[str, Any]) -> dict[str, Any]:
        namespace = obj.get("metadata", {}).get("namespace")
        return dict(self.request("POST", path_of(obj["kind"], None, namespace), obj))

    def apply(self, obj: dict[str, Any]) -> dict[str, Any]:
        """Create, or replace what exists (a plain `kubectl apply` for the objects these tests own)."""
        meta = obj["metadata"]
        try:
            return self.create(obj)
        except ApiError as exc:
            if exc.code != 409:
                raise
        live = self.get(obj["kind"], meta["name"], meta.get("namespace")) or {}
        obj = {**obj, "metadata": {**meta, "resourceVersion": live["metadata"]["resourceVersion"]}}
        return dict(self.request("PUT", path_of(obj["kind"], meta["name"], meta.get("namespace")), obj))

    def patch(self, kind: str, name: str, namespace: str | None, patch: dict[str, Any], sub: str = "") -> Any:
        return self.request("PATCH", path_of(kind, name, namespace, sub), patch, "application/merge-patch+json")

    def delete(self, kind: str, name: str, namespace: str | None = None, propagation: str | None = None) -> bool:
        body = {"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": propagation} if propagation else None
        try:
            self.request("DELETE", path_of(kind, name, namespace), body)
        except ApiError as exc:
            if exc.code == 404:
                return False
            raise
        return True

    def service_account_token(self, namespace: str, name: str, seconds: int = 3600) -> str:
        """A bound token for a ServiceAccount through the TokenRequest API (as a kubelet projects one)."""
        body = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                "spec": {"expirationSeconds": seconds}}
        answer = self.request("POST", path_of("ServiceAccount", name, namespace, "token"), body)
        return str(answer["status"]["token"])


def wait_for(check: Callable[[], Any], timeout: float = 30.0, interval: float = 0.2, what: str = "") -> Any:
    """Poll ``check`` until truthy; AssertionError with the last value otherwise."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while True:
        try:
            last = check()
            if last:
                return last
        except (KeyError, TypeError, IndexError, AttributeError) as exc:
            last = exc
        if time.monotonic() > deadline:
            raise AssertionError(f"{what or 'condition'} not met within {timeout}s (last: {last!r})")
        time.sleep(interval)


def condition(obj: dict[str, Any] | None, type_: str) -> dict[str, Any]:
    for cond in ((obj or {}).get("status") or {}).get("conditions") or []:
        if cond.get("type") == type_:
            return dict(cond)
    return {}


def is_ready(obj: dict[str, Any] | None) -> bool:
    return condition(obj, "Ready").get("status") == "True"


AUDIT_POLICY = {"apiVersion": "audit.k8s.io/v1", "kind": "Policy", "omitStages": ["RequestReceived"],
                "rules": [{"level": "Metadata"}]}


class ControlPlane:
    """etcd + kube-apiserver + kube-controller-manager, each a child process, on free loopback ports."""

    def __init__(self, work: pathlib.Path, *, apiserver_flags: Iterable[str] = ()) -> None:
        from echo_memory.libs.local.supervisor.ports import free_port

        self.work = work
        self.bin = binaries()
        self.apiserver_flags = list(apiserver_flags)
        self.ports = {name: free_port() for name in ("etcd", "peer", "api", "kcm")}
        self.server = f"https://127.0.0.1:{self.ports['api']}"
        self.token = os.urandom(16).hex()
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self.audit_log = work / "audit.log"
        self.started_seconds = 0.0

    def _spawn(self, name: str, args: list[str]) -> None:
        log = open(self.work / f"{name}.log", "wb")  # noqa: SIM115 (the child keeps it open)
        self.procs[name] = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                            start_new_session=True)

    def start(self) -> None:
        begin = time.monotonic()
        w, p = self.work, self.ports
        (w / "etcd").mkdir(parents=True, exist_ok=True)
        (w / "certs").mkdir(exist_ok=True)
        subprocess.run(["openssl", "genrsa", "-out", str(w / "sa.key"), "2048"], check=True, capture_output=True)
        subprocess.run(["openssl", "rsa", "-in", str(w / "sa.key"), "-pubout", "-out", str(w / "sa.pub")],
                       check=True, capture_output=True)
        (w / "tokens.csv").write_text(f"{self.token},admin,admin,system:masters\n")
        (w / "audit-policy.yaml").write_text(yaml.safe_dump(AUDIT_POLICY))
        etcd_url = f"http://127.0.0.1:{p['etcd']}"
        peer_url = f"http://127.0.0.1:{p['peer']}"
        self._spawn("etcd", [str(self.bin / "etcd"), "--name", "test", "--data-dir", str(w / "etcd"),
                             "--listen-client-urls", etcd_url, "--advertise-client-urls", etcd_url,
                             "--listen-peer-urls", peer_url, "--initial-advertise-peer-urls", peer_url,
                             "--initial-cluster", f"test={peer_url}", "--log-level", "warn"])
        issuer = "https://kubernetes.default.svc.cluster.local"
        self._spawn("apiserver", [
            str(self.bin / "kube-apiserver"), f"--etcd-servers={etcd_url}", "--bind-address=127.0.0.1",
            f"--secure-port={p['api']}", "--advertise-address=127.0.0.1", "--insecure-port=0",
            f"--cert-dir={w / 'certs'}", f"--token-auth-file={w / 'tokens.csv'}", "--authorization-mode=RBAC",
            f"--service-account-key-file={w / 'sa.pub'}", f"--service-account-signing-key-file={w / 'sa.key'}",
            f"--service-account-issuer={issuer}", f"--api-audiences={issuer}",
            "--service-cluster-ip-range=10.96.0.0/24", "--endpoint-reconciler-type=none",
            "--enable-priority-and-fairness=false", "--profiling=false",
            f"--audit-policy-file={w / 'audit-policy.yaml'}", f"--audit-log-path={self.audit_log}",
            *self.apiserver_flags])
        admin = self.admin()
        wait_for(lambda: self._readyz(admin), timeout=90, interval=0.5, what="kube-apiserver /readyz")
        kubeconfig = self.kubeconfig(self.token, w / "admin.kubeconfig")
        self._spawn("kcm", [
            str(self.bin / "kube-controller-manager"), f"--kubeconfig={kubeconfig}", "--bind-address=127.0.0.1",
            f"--secure-port={p['kcm']}", "--port=0", "--leader-elect=false",
            "--controllers=*,-nodelifecycle,-nodeipam,-cloud-node-lifecycle,-service,-route,-attachdetach,"
            "-persistentvolume-binder,-persistentvolume-expander,-pv-protection,-pvc-protection,-ttl,"
            "-bootstrapsigner,-tokencleaner,-csrsigning,-csrapproving,-csrcleaner",
            f"--service-account-private-key-file={w / 'sa.key'}", f"--root-ca-file={w / 'certs' / 'apiserver.crt'}",
            "--use-service-account-credentials=false", "--concurrent-gc-syncs=5"])
        self.started_seconds = time.monotonic() - begin

    def _readyz(self, admin: Client) -> bool:
        for name, proc in self.procs.items():
            if proc.poll() is not None:
                log = (self.work / f"{name}.log").read_text(errors="replace")[-3000:]
                raise RuntimeError(f"{name} exited with {proc.returncode}:\n{log}")
        try:
            admin.request("GET", "/readyz")
        except (ApiError, OSError):
            return False
        return True

    def admin(self) -> Client:
        return Client(self.server, self.token)

    def kubeconfig(self, token: str, path: pathlib.Path, namespace: str = "default") -> pathlib.Path:
        """A kubeconfig for ``token`` (what kopf and lightkube read from $KUBECONFIG)."""
        path.write_text(json.dumps({
            "apiVersion": "v1", "kind": "Config", "current-context": "real",
            "clusters": [{"name": "real", "cluster": {"server": self.server, "insecure-skip-tls-verify": True}}],
            "users": [{"name": "u", "user": {"token": token}}],
            "contexts": [{"name": "real", "context": {"cluster": "real", "user": "u", "namespace": namespace}}]}))
        return path

    def audit(self, username: str | None = None) -> list[dict[str, Any]]:
        """Every audit event so far (ResponseComplete stage), optionally of one user."""
        if not self.audit_log.exists():
            return []
        events = []
        for line in self.audit_log.read_text().splitlines():
            event = json.loads(line)
            if event.get("stage") != "ResponseComplete":
                continue
            if username is None or event.get("user", {}).get("username") == username:
                events.append(event)
        return events

    def stop(self) -> None:
        for name in ("kcm", "apiserver", "etcd"):
            proc = self.procs.pop(name, None)
            if proc is None or proc.poll() is not None:
                continue
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(5)


class Kubelet:
    """Plays the one node of the cluster: binds pods to it and reports their status to the API server."""

    NODE = "test-node"

    def __init__(self, client: Client) -> None:
        self.client = client
        if client.get("Node", self.NODE) is None:
            client.create({"apiVersion": "v1", "kind": "Node", "metadata": {"name": self.NODE}})

    def pods(self, namespace: str, selector: str) -> list[dict[str, Any]]:
        return self.client.list("Pod", namespace, selector)

    def bind(self, pod: dict[str, Any]) -> None:
        meta = pod["metadata"]
        if pod["spec"].get("nodeName"):
            return
        self.client.request("POST", path_of("Pod", meta["name"], meta["namespace"], "binding"), {
            "apiVersion": "v1", "kind": "Binding", "metadata": {"name": meta["name"]},
            "target": {"apiVersion": "v1", "kind": "Node", "name": self.NODE}})

    def run(self, pod: dict[str, Any], *, ready: bool = True) -> None:
        """Bind the pod and report it Running (and Ready)."""
        self.bind(pod)
        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        status = "True" if ready else "False"
        containers = [{"name": c["name"], "image": c["image"], "imageID": "", "ready": ready, "restartCount": 0,
                       "started": True, "state": {"running": {"startedAt": now}}}
                      for c in pod["spec"]["containers"]]
        meta = pod["metadata"]
        self.client.patch("Pod", meta["name"], meta["namespace"], {"status": {
            "phase": "Running", "startTime": now, "hostIP": "127.0.0.1", "podIP": "127.0.0.1",
            "conditions": [{"type": t, "status": status if t in ("Ready", "ContainersReady") else "True",
                            "lastTransitionTime": now}
                           for t in ("Initialized", "Ready", "ContainersReady", "PodScheduled")],
            "containerStatuses": containers}}, sub="status")

    def finish(self, pod: dict[str, Any], *, succeeded: bool) -> None:
        """Bind the pod and report it terminated (Succeeded or Failed), as after a Job's command exits."""
        self.bind(pod)
        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        code = 0 if succeeded else 1
        containers = [{"name": c["name"], "image": c["image"], "imageID": "", "ready": False, "restartCount": 0,
                       "state": {"terminated": {"exitCode": code, "startedAt": now, "finishedAt": now,
                                                "reason": "Completed" if succeeded else "Error"}}}
                      for c in pod["spec"]["containers"]]
        meta = pod["metadata"]
        self.client.patch("Pod", meta["name"], meta["namespace"], {"status": {
            "phase": "Succeeded" if succeeded else "Failed", "startTime": now,
            "conditions": [{"type": "Ready", "status": "False", "lastTransitionTime": now}],
            "containerStatuses": containers}}, sub="status")

    def run_job_pod(self, job: dict[str, Any], root: pathlib.Path,
                    cli: Iterable[str] = ("-m", "echo_memory.libs.local.cli")) -> subprocess.CompletedProcess[str]:
        """Run the Job's container command on the host with its Secret-resolved env, then report the pod.

        ``echo-memory`` is this distribution's console script; ``python -m echo_memory.libs.local.cli`` is the same
        entry point, so the host run does not depend on the script being on PATH.  ``cli`` replaces
        ``-m echo_memory.libs.local.cli`` to run what another image would (the previous release's, in the Helm test).
        """
        meta = job["metadata"]
        uid = job["metadata"]["uid"]
        pod = wait_for(lambda: self.pods(meta["namespace"], f"controller-uid={uid}"),
                       what=f"pod of Job {meta['name']}")[0]
        container = pod["spec"]["containers"][0]
        env = {"PATH": os.environ["PATH"], "PYTHONPATH": os.environ.get("PYTHONPATH", str(root))}
        for var in container.get("env") or []:
            if "value" in var:
                env[var["name"]] = var["value"]
                continue
            ref = var["valueFrom"]["secretKeyRef"]
            secret = self.client.get("Secret", ref["name"], meta["namespace"])
            assert secret is not None, f"Secret {ref['name']} of Job {meta['name']} is missing"
            env[var["name"]] = decode(secret)[ref["key"]]
        command = container["command"]
        assert command[0] == "echo-memory", command
        done = subprocess.run([sys.executable, *cli, *command[1:]], env=env, capture_output=True,
                              text=True, timeout=120, check=False)
        self.finish(pod, succeeded=done.returncode == 0)
        return done


def decode(secret: dict[str, Any]) -> dict[str, str]:
    import base64

    out = {k: base64.b64decode(v).decode() for k, v in (secret.get("data") or {}).items()}
    out.update(secret.get("stringData") or {})
    return out


def encode(values: dict[str, str]) -> dict[str, str]:
    import base64

    return {k: base64.b64encode(v.encode()).decode() for k, v in values.items()}


def render_chart(helm_bin: pathlib.Path, chart: pathlib.Path, release: str, namespace: str,
                 values: dict[str, Any], tmp: pathlib.Path) -> list[dict[str, Any]]:
    """``helm template`` of the chart with ``values``: the documents.

    ``helm template`` has no cluster to keep a generated NATS token in, so the chart wants a seed.
    """
    path = tmp / f"values-{release}-{os.getpid()}-{time.monotonic_ns()}.yaml"
    path.write_text(yaml.safe_dump({"natsAuth": {"seed": "k8s-real-tier"}} | values))
    out = subprocess.run([str(helm_bin), "template", release, str(chart), "-n", namespace, "-f", str(path),
                          "--kube-version", "1.30.0"], capture_output=True, text=True, check=False, timeout=60)
    if out.returncode:
        raise RuntimeError(f"helm template {release} failed ({out.returncode}):\n{out.stderr}")
    return [doc for doc in yaml.safe_load_all(out.stdout) if doc]


def copy_chart(src: pathlib.Path, dest: pathlib.Path) -> pathlib.Path:
    """The chart without its NATS dependency (not fetchable here), so helm renders it offline."""
    shutil.copytree(src, dest)
    meta = yaml.safe_load((dest / "Chart.yaml").read_text())
    meta.pop("dependencies", None)
    meta.pop("kubeVersion", None)  # the chart asks for a newer server than this 1.20 test server
    (dest / "Chart.yaml").write_text(yaml.safe_dump(meta, sort_keys=False))
    return dest


def chart_crds(chart: pathlib.Path, helm_bin: pathlib.Path, tmp: pathlib.Path) -> list[dict[str, Any]]:
    """The CRDs the chart installs (its crds/ folder and any CRD templates)."""
    docs = [yaml.safe_load(p.read_text()) for p in sorted((chart / "crds").glob("*.yaml"))] \
        if (chart / "crds").is_dir() else []
    rendered = render_chart(helm_bin, chart, "crds", RELEASE_NS, {}, tmp)
    docs += [d for d in rendered if d["kind"] == "CustomResourceDefinition"]
    return docs
