#!/bin/bash
# `make images`: build the service image (deploy/Containerfile) and the org database image
# (deploy/postgres/Containerfile) with podman on a machine with no Docker and no reachable registry.
#   - installs podman, buildah, skopeo, mmdebstrap and runc with apt-get when they are missing (root);
#   - makes the Debian bases from the machine's apt mirrors with mmdebstrap once (base.sh), or uses
#     registry bases with BASES=registry (python:3.11-slim-bookworm, debian:trixie-slim);
#   - prints the references it built, one per line, last.
# Environment: APP_IMAGE, PG_IMAGE (references to build), BASES=local|registry, REFRESH_BASES=1
# (remake the local bases, e.g. for security updates), NO_CACHE=1 (cold build).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
HERE=$ROOT/deploy/images
export CONTAINERS_CONF=${CONTAINERS_CONF:-$HERE/containers.conf}
VERSION=$(sed -n 's/^version = "\(.*\)"$/\1/p' "$ROOT/pyproject.toml" | head -1)
APP_IMAGE=${APP_IMAGE:-localhost/echo-memory:$VERSION}
PG_IMAGE=${PG_IMAGE:-localhost/echo-postgres:17}
BASES=${BASES:-local}
TOOLS=(podman buildah skopeo mmdebstrap runc)

say() { echo "images: $*" >&2; }
elapsed() { local start=$1; echo "$(( SECONDS - start )) s"; }

missing=()
for tool in "${TOOLS[@]}"; do command -v "$tool" >/dev/null || missing+=("$tool"); done
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then
    say "missing ${missing[*]}: install podman, buildah, skopeo, mmdebstrap and runc (apt-get needs root here)"
    exit 1
  fi
  start=$SECONDS
  say "installing ${missing[*]} with apt-get"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
    podman buildah skopeo mmdebstrap runc uidmap netavark aardvark-dns >/dev/null
  say "build tools installed in $(elapsed "$start")"
fi

if [ "$BASES" = local ]; then
  PY_BASE=localhost/echo-base:bookworm
  PG_BASE=localhost/echo-base:trixie
  for spec in "bookworm $PY_BASE python3,python3-venv,ca-certificates" "trixie $PG_BASE ca-certificates"; do
    set -- $spec
    if [ -n "${REFRESH_BASES:-}" ] || ! podman image exists "$2"; then
      start=$SECONDS
      say "making $2 with mmdebstrap from this machine's Debian mirrors"
      sh "$HERE/base.sh" "$1" "$2" "$3" >/dev/null
      say "$2 made in $(elapsed "$start")"
    fi
  done
else
  PY_BASE=python:3.11-slim-bookworm
  PG_BASE=debian:trixie-slim
fi

build=(podman build --network host --layers)
[ -n "${NO_CACHE:-}" ] && build+=(--no-cache)
# The build host's CA bundle, bind-mounted read-only into RUN steps only (pip and apt behind a
# TLS-inspecting proxy need it); it is never copied into an image.
CA=/etc/ssl/certs/ca-certificates.crt
[ -f "$CA" ] && build+=(-v "$CA:$CA:ro")

start=$SECONDS
"${build[@]}" --build-arg "BASE_IMAGE=$PY_BASE" -f "$ROOT/deploy/Containerfile" \
  --ignorefile "$ROOT/deploy/Containerfile.containerignore" -t "$APP_IMAGE" "$ROOT" >&2
say "$APP_IMAGE built in $(elapsed "$start")"
start=$SECONDS
"${build[@]}" --build-arg "BASE_IMAGE=$PG_BASE" -f "$ROOT/deploy/postgres/Containerfile" \
  -t "$PG_IMAGE" "$ROOT/deploy/postgres" >&2
say "$PG_IMAGE built in $(elapsed "$start")"
for ref in "$APP_IMAGE" "$PG_IMAGE"; do
  say "$ref $(( $(podman image inspect --format '{{.Size}}' "$ref") / 1000000 )) MB"
done
echo "$APP_IMAGE"
echo "$PG_IMAGE"
