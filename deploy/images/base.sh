#!/bin/sh
# Make a Debian base image from the machine's own apt mirrors with mmdebstrap, for hosts that can
# reach no container registry:  base.sh SUITE TAG PACKAGES
#   base.sh bookworm localhost/echo-base:bookworm python3,python3-venv,ca-certificates
# The rootfs keeps the mirrors in its sources.list, so RUN apt-get works in builds on top of it.
set -eu
SUITE=${1:?suite (bookworm, trixie)}; TAG=${2:?image tag}; PACKAGES=${3:-ca-certificates}
# The first two URIs of the host's deb822 sources: the archive and the security archive.
SOURCES=/etc/apt/sources.list.d/debian.sources
MIRROR=$(awk '/^URIs:/{print $2}' "$SOURCES" | sed -n 1p)
SECURITY=$(awk '/^URIs:/{print $2}' "$SOURCES" | sed -n 2p)
: "${MIRROR:?no Debian mirror found in $SOURCES}"
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
set -- --variant=minbase --include="$PACKAGES" \
  --dpkgopt='path-exclude=/usr/share/man/*' \
  --dpkgopt='path-exclude=/usr/share/doc/*' \
  --dpkgopt='path-include=/usr/share/doc/*/copyright' \
  --dpkgopt='path-exclude=/usr/share/locale/*' \
  --dpkgopt='path-exclude=/usr/share/info/*' \
  --aptopt='Acquire::Languages "none"' \
  --aptopt='APT::Install-Recommends "false"' \
  --customize-hook='rm -rf "$1"/var/lib/apt/lists/* "$1"/var/cache/apt/*.bin'
# bookworm's debootstrap-era layout needs the merged-/usr hook; trixie is merged by base-files.
[ "$SUITE" = bookworm ] && set -- "$@" --hook-dir=/usr/share/mmdebstrap/hooks/merged-usr
mmdebstrap "$@" "$SUITE" "$WORK/rootfs.tar" \
  "deb $MIRROR $SUITE main" "deb $MIRROR $SUITE-updates main" ${SECURITY:+"deb $SECURITY $SUITE-security main"}
podman import \
  --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
  --change 'ENV LANG=C.UTF-8' \
  --change 'CMD ["/bin/sh"]' \
  --message "mmdebstrap --variant=minbase $SUITE + $PACKAGES" \
  "$WORK/rootfs.tar" "$TAG" >/dev/null
echo "$TAG"
