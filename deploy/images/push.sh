#!/bin/bash
# `make push-images REGISTRY=registry.example.com/team`: copy the images `make images` built to your
# registry with skopeo (log in first: `skopeo login registry.example.com`, or set REGISTRY_AUTH_FILE),
# then print the Helm values that point the chart at them.
# Environment: REGISTRY (required), APP_IMAGE, PG_IMAGE (the local references), TLS_VERIFY=false
# for a registry without TLS.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
export CONTAINERS_CONF=${CONTAINERS_CONF:-$ROOT/deploy/images/containers.conf}
REGISTRY=${REGISTRY:?set REGISTRY, e.g. make push-images REGISTRY=registry.example.com/team}
REGISTRY=${REGISTRY%/}
VERSION=$(sed -n 's/^version = "\(.*\)"$/\1/p' "$ROOT/pyproject.toml" | head -1)
APP_IMAGE=${APP_IMAGE:-localhost/echo-memory:$VERSION}
PG_IMAGE=${PG_IMAGE:-localhost/echo-postgres:17}
for ref in "$APP_IMAGE" "$PG_IMAGE"; do
  podman image exists "$ref" || { echo "push-images: $ref is not built; run make images first" >&2; exit 1; }
done
pushed=()
for ref in "$APP_IMAGE" "$PG_IMAGE"; do
  target="$REGISTRY/${ref##*/}"
  # containers-storage: reads podman's local store; the digest is kept, so the pushed image is the tested one.
  skopeo copy --dest-tls-verify="${TLS_VERIFY:-true}" "containers-storage:$ref" "docker://$target" >&2
  pushed+=("$target")
  echo "push-images: $ref -> $target" >&2
done
app=${pushed[0]}
cat <<VALUES
# Helm values for the pushed images (helm install ... -f this-file, or the --set flags below):
#   --set image.repository=${app%:*} --set image.tag=${app##*:} --set operator.cnpgImage=${pushed[1]}
image:
  repository: ${app%:*}
  tag: "${app##*:}"
operator:
  cnpgImage: ${pushed[1]}
VALUES
