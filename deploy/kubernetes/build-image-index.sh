#!/bin/bash
# Build the nri-qos installer image for amd64 AND arm64 as one multi-architecture image: an OCI
# image layout (OCI image-spec image-layout.md: oci-layout, index.json, blobs/sha256/) in a tar
# file, without a container engine. index.json names one image index (image-index.md,
# application/vnd.oci.image.index.v1+json) whose two manifests carry `platform`
# {architecture: amd64|arm64, os: linux}; a node pulls the one of its architecture.
#   skopeo copy --all oci-archive:FILE docker://REGISTRY/nri-qos:TAG     (push both)
#   ctr -n k8s.io images import --all-platforms FILE                     (containerd)
# Each architecture's image is made by build-image.sh (the same root file system, layer and
# config as the single-architecture image; deterministic, so the digests are too).
#
# Usage: deploy/kubernetes/build-image-index.sh --amd64 BINARY --arm64 BINARY
#                                               [--busybox-arm64 FILE] [--tag REF] [--out FILE]
#   --amd64, --arm64   the static nri-qos binaries (build/nri-qos, build/aarch64/nri-qos)
#   --busybox-arm64    arm64 busybox-static (default: the one scripts/cross-root.sh unpacked)
#   --tag              image reference (default: localhost/nri-qos:$(cat VERSION))
#   --out              output (default: build/image/nri-qos-index.tar)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
AMD64= ARM64= TAG= OUT=$ROOT/build/image/nri-qos-index.tar
BB_ARM64=${CROSS_CACHE:-/var/cache/nri-qos-cross-arm64}/bookworm-root/bin/busybox
usage() { echo "usage: build-image-index.sh --amd64 BINARY --arm64 BINARY [--busybox-arm64 FILE] [--tag REF] [--out FILE]" >&2; exit 2; }
while [ $# -gt 0 ]; do
  case "$1" in
    --amd64) AMD64=$2; shift 2 ;;
    --arm64) ARM64=$2; shift 2 ;;
    --busybox-arm64) BB_ARM64=$2; shift 2 ;;
    --tag) TAG=$2; shift 2 ;;
    --out) OUT=$2; shift 2 ;;
    *) usage ;;
  esac
done
[ -n "$AMD64" ] && [ -n "$ARM64" ] || usage
[ -n "$TAG" ] || TAG=localhost/nri-qos:$(cat "$ROOT/VERSION" 2>/dev/null || echo 0.0.0)

WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
L=$WORK/layout
mkdir -p "$L/blobs/sha256"
# blob FILE MEDIATYPE: store FILE as a blob; prints its descriptor's JSON fields
blob() {
  local d s
  d=$(sha256sum "$1" | cut -d' ' -f1); s=$(stat -c %s "$1")
  cp "$1" "$L/blobs/sha256/$d"
  printf '"mediaType":"%s","digest":"sha256:%s","size":%s' "$2" "$d" "$s"
}
MANIFESTS=""
for arch in amd64 arm64; do
  if [ $arch = amd64 ]; then bin=$AMD64 bb=${BUSYBOX:-/bin/busybox}; else bin=$ARM64 bb=$BB_ARM64; fi
  BUSYBOX=$bb "$ROOT/deploy/kubernetes/build-image.sh" --binary "$bin" --tag "$TAG" --out "$WORK/$arch.tar" >&2
  mkdir -p "$WORK/$arch"
  tar -xf "$WORK/$arch.tar" -C "$WORK/$arch"
  cfg=$(sed -n 's/.*"Config":"\([^"]*\)".*/\1/p' "$WORK/$arch/manifest.json")
  lay=$(sed -n 's/.*"Layers":\["\([^"]*\)"\].*/\1/p' "$WORK/$arch/manifest.json")
  grep -q "\"architecture\":\"$arch\"" "$WORK/$arch/$cfg" || { echo "build-image-index.sh: the $arch image's config says another architecture" >&2; exit 1; }
  # the docker-archive's config is an OCI image config as it is (image-spec config.md); the
  # layer is an uncompressed tar, whose digest is the config's diff_id
  c=$(blob "$WORK/$arch/$cfg" application/vnd.oci.image.config.v1+json)
  l=$(blob "$WORK/$arch/$lay" application/vnd.oci.image.layer.v1.tar)
  printf '{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":{%s},"layers":[{%s}]}' "$c" "$l" > "$WORK/$arch.manifest.json"
  m=$(blob "$WORK/$arch.manifest.json" application/vnd.oci.image.manifest.v1+json)
  MANIFESTS="$MANIFESTS${MANIFESTS:+,}{$m,\"platform\":{\"architecture\":\"$arch\",\"os\":\"linux\"}}"
done
printf '{"schemaVersion":2,"mediaType":"application/vnd.oci.image.index.v1+json","manifests":[%s]}' "$MANIFESTS" > "$WORK/index.json"
i=$(blob "$WORK/index.json" application/vnd.oci.image.index.v1+json)
# the reference: org.opencontainers.image.ref.name (image-layout.md: the tag) and containerd's
# io.containerd.image.name (the full name, used by `ctr images import`)
printf '{"schemaVersion":2,"mediaType":"application/vnd.oci.image.index.v1+json","manifests":[{%s,"annotations":{"io.containerd.image.name":"%s","org.opencontainers.image.ref.name":"%s"}}]}' \
  "$i" "$TAG" "${TAG##*:}" > "$L/index.json"
printf '{"imageLayoutVersion":"1.0.0"}' > "$L/oci-layout"
mkdir -p "$(dirname "$OUT")"
tar --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner -C "$L" -cf "$OUT.tmp" .
mv -f "$OUT.tmp" "$OUT"
echo "build-image-index.sh: $OUT ($TAG, index sha256:$(sha256sum "$WORK/index.json" | cut -d' ' -f1): amd64 + arm64)"
