#!/bin/bash
# Build the nri-qos installer image WITHOUT a container engine: a single-layer image written as
# a docker-archive tarball (manifest.json + config + layer.tar), which
#   ctr -n k8s.io images import FILE      (containerd, on each node or via your registry tooling)
#   podman load -i FILE / skopeo copy docker-archive:FILE docker://REGISTRY/nri-qos:TAG
# accept. Deterministic: same inputs → same image ID.
#
# Usage: deploy/kubernetes/build-image.sh [--binary FILE | --deb FILE] [--tag REF] [--out FILE]
#   --binary  static nri-qos binary (default: build/nri-qos); the image's architecture is the
#             binary's (amd64 or arm64, from its ELF header); BUSYBOX must be of the same one
#             (an arm64 image: BUSYBOX=<arm64 busybox-static>, see build-image-index.sh)
#   --deb     take /opt/nri/bin/nri-qos from this .deb instead (dpkg-deb -x)
#   --tag     image reference (default: localhost/nri-qos:$(cat VERSION)), as in the manifests
#   --out     output (default: build/image/nri-qos-image.tar)
# Image content (root file system):
#   /opt/nri/bin/nri-qos              the static binary (same path as on the node)
#   /opt/nri/bin/nri-qos-metrics      the metrics server and its shared libraries (when built)
#   /usr/local/bin/nri-qos-install    deploy/kubernetes/install.sh
#   /bin/busybox + applet symlinks    Debian's busybox-static (/bin/sh, cp, cmp, mv, sleep, ...)
#   /etc/passwd, /etc/group           root and nobody (65534)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BIN=$ROOT/build/nri-qos
DEB=
TAG=
OUT=$ROOT/build/image/nri-qos-image.tar
BUSYBOX=${BUSYBOX:-/bin/busybox}
while [ $# -gt 0 ]; do
  case "$1" in
    --binary) BIN=$2; shift 2 ;;
    --deb) DEB=$2; shift 2 ;;
    --tag) TAG=$2; shift 2 ;;
    --out) OUT=$2; shift 2 ;;
    *) echo "usage: build-image.sh [--binary FILE | --deb FILE] [--tag REF] [--out FILE]" >&2; exit 2 ;;
  esac
done
[ -n "$TAG" ] || TAG=localhost/nri-qos:$(cat "$ROOT/VERSION" 2>/dev/null || echo 0.0.0)

is_static() { ! readelf -l "$1" 2>/dev/null | grep -q 'program interpreter'; }

WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
RFS=$WORK/rootfs
mkdir -p "$RFS"/{bin,etc,tmp,opt/nri/bin,usr/local/bin,host,run}
chmod 1777 "$RFS/tmp"

if [ -n "$DEB" ]; then
  dpkg-deb -x "$DEB" "$WORK/deb"
  BIN=$WORK/deb/opt/nri/bin/nri-qos
fi
[ -x "$BIN" ] || { echo "build-image.sh: no executable $BIN (run make, or pass --binary/--deb)" >&2; exit 1; }
is_static "$BIN" || { echo "build-image.sh: $BIN is not statically linked" >&2; exit 1; }
[ -x "$BUSYBOX" ] && is_static "$BUSYBOX" || {
  echo "build-image.sh: need a static busybox at $BUSYBOX (apt-get install busybox-static)" >&2; exit 1; }
# The OCI architecture of an ELF file (its e_machine, readelf -h)
elf_arch() {
  case "$(readelf -h "$1" 2>/dev/null | sed -n 's/^ *Machine: *//p')" in
    *X86-64*) echo amd64 ;; AArch64) echo arm64 ;; *) echo unknown ;;
  esac
}
ARCH=$(elf_arch "$BIN")
[ "$ARCH" != unknown ] || { echo "build-image.sh: $BIN is neither x86-64 nor aarch64" >&2; exit 1; }
[ "$(elf_arch "$BUSYBOX")" = "$ARCH" ] || {
  echo "build-image.sh: $BUSYBOX is $(elf_arch "$BUSYBOX"), the binary $ARCH (set BUSYBOX to an $ARCH busybox-static)" >&2; exit 1; }

install -m 0755 "$BIN" "$RFS/opt/nri/bin/nri-qos"
install -m 0755 "$ROOT/deploy/kubernetes/install.sh" "$RFS/usr/local/bin/nri-qos-install"
install -m 0755 "$BUSYBOX" "$RFS/bin/busybox"
# the applet list from the build machine's busybox (the same Debian version; another
# architecture's busybox may not run here)
LIST_BUSYBOX=$BUSYBOX; [ "$ARCH" = "$(elf_arch /bin/busybox 2>/dev/null || true)" ] || LIST_BUSYBOX=/bin/busybox
for a in $("$LIST_BUSYBOX" --list); do
  case "$a" in busybox|*/*) continue ;; esac
  ln -s busybox "$RFS/bin/$a"
done
# The metrics server (`relay --metrics-listen`, `serve-metrics`: the chart's metrics.enabled) is
# dynamically linked with Debian's cpp-httplib (no static library): beside the binary, with the
# shared libraries and loader it names (ldd of this machine's, at their paths). Absent from the
# .deb or the build: the image has none and metrics.enabled fails with the reason.
# The CRI client of the relay's unseen pass (`relay --cri-socket`; src/cli/main.cpp unseen_argv
# looks for nri-qos-cri beside the binary) likewise, with Debian's gRPC.
for comp in nri-qos-metrics nri-qos-cri; do
  MSRV=$(dirname "$BIN")/$comp
  [ -z "$DEB" ] || MSRV=$WORK/deb/usr/libexec/nri-qos/$comp
  [ -x "$MSRV" ] || continue
  install -m 0755 "$MSRV" "$RFS/opt/nri/bin/$comp"
  for lib in $(ldd "$MSRV" | sed -n 's/.*=> \(\/[^ ]*\) .*/\1/p; s/^[[:space:]]*\(\/[^ ]*\) (.*/\1/p' | sort -u); do
    install -D -m 0755 "$(readlink -f "$lib")" "$RFS$lib"
  done
done
printf 'root:x:0:0:root:/:/bin/sh\nnobody:x:65534:65534:nobody:/:/bin/false\n' > "$RFS/etc/passwd"
printf 'root:x:0:\nnogroup:x:65534:\n' > "$RFS/etc/group"
chmod 0644 "$RFS/etc/passwd" "$RFS/etc/group"

IMG=$WORK/img
mkdir -p "$IMG"
tar --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner --format=posix \
    --pax-option=exthdr.name=%d/PaxHeaders/%f,delete=atime,delete=ctime \
    -C "$RFS" -cf "$WORK/layer.tar" .
LAYER_SHA=$(sha256sum "$WORK/layer.tar" | cut -d' ' -f1)
mkdir -p "$IMG/$LAYER_SHA"
mv "$WORK/layer.tar" "$IMG/$LAYER_SHA/layer.tar"

CONFIG='{"architecture":"'$ARCH'","os":"linux","config":{"Env":["PATH=/bin:/usr/local/bin:/opt/nri/bin"],"Cmd":["/bin/sh","/usr/local/bin/nri-qos-install","install"],"WorkingDir":"/","Labels":{"org.opencontainers.image.title":"nri-qos installer"}},"rootfs":{"type":"layers","diff_ids":["sha256:'$LAYER_SHA'"]},"history":[{"created_by":"deploy/kubernetes/build-image.sh"}]}'
CONFIG_SHA=$(printf '%s' "$CONFIG" | sha256sum | cut -d' ' -f1)
printf '%s' "$CONFIG" > "$IMG/$CONFIG_SHA.json"
printf '[{"Config":"%s.json","RepoTags":["%s"],"Layers":["%s/layer.tar"]}]' \
  "$CONFIG_SHA" "$TAG" "$LAYER_SHA" > "$IMG/manifest.json"

mkdir -p "$(dirname "$OUT")"
tar --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner -C "$IMG" -cf "$OUT.tmp" .
mv -f "$OUT.tmp" "$OUT"
echo "build-image.sh: $OUT ($TAG, image id sha256:$CONFIG_SHA)"
