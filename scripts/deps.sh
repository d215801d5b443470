#!/bin/bash
# Install the Debian packages nri-qos needs, only those missing (idempotent).
# Usage: scripts/deps.sh [build|demo|test|fuzz|e2e|pkg|bench|cross ...]   (demo: what `make demo` needs: build nri-qos, jq)   (default: build test)
#        scripts/deps.sh --list SET...   prints the packages of the sets, one a line (installs nothing)
# Runs apt-get only when something is missing; needs root for that.
set -euo pipefail
declare -A SETS=(
  [build]="g++ make pkg-config nlohmann-json3-dev libcli11-dev libtoml11-dev libseccomp-dev libprotobuf-dev protobuf-compiler nettle-dev libgrpc++-dev protobuf-compiler-grpc libyaml-cpp-dev libsystemd-dev libcpp-httplib-dev"
  # demo: the packages of the Makefile's HOOK_DEP_ITEMS, the compiler, protoc and jq; nothing for the
  # companions (tests/policy.sh checks the match)
  [demo]="g++ make nlohmann-json3-dev libcli11-dev libtoml11-dev libseccomp-dev libprotobuf-dev protobuf-compiler nettle-dev libyaml-cpp-dev jq"
  [test]="catch2 python3 jq strace python3-prometheus-client ccache clang-format universal-ctags"
  [fuzz]="clang libclang-rt-14-dev"
  [e2e]="containerd runc python3-grpcio python3-grpc-tools busybox-static jq debian-archive-keyring"
  [pkg]="rpm debhelper dpkg-dev fakeroot lintian mandoc groff-base busybox-static jq golang-go golang-github-masterminds-sprig-dev golang-gopkg-yaml.v3-dev python3-jsonschema python3-yaml prometheus"
  [bench]="valgrind debian-archive-keyring"
  # aarch64 (issue #33 §1): Debian's cross compiler (with the arm64 glibc/libstdc++ it links
  # statically) and qemu-user to run the result; the arm64 libraries come from
  # scripts/cross-root.sh, extracted into a private root (no dpkg foreign architecture added);
  # qemu-system-arm boots an arm64 kernel to show the seccomp filter confining on a real arm64
  # kernel (tests/aarch64.sh: qemu-user does not pass seccomp(2) through)
  [cross]="g++-aarch64-linux-gnu binutils-aarch64-linux-gnu qemu-user-static qemu-system-arm ipxe-qemu cpio skopeo debian-archive-keyring file"
)
want=()
LIST=0; [ "${1:-}" = --list ] && { LIST=1; shift; }
[ $# -eq 0 ] && set -- build test
for s in "$@"; do
  [ -n "${SETS[$s]+x}" ] || { echo "deps.sh: unknown set '$s'" >&2; exit 2; }
  want+=(${SETS[$s]})
done
[ $LIST = 1 ] && { printf '%s\n' "${want[@]}"; exit 0; }
missing=()
for p in "${want[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
if [ "$(id -u)" != 0 ]; then
  echo "deps.sh: missing packages: ${missing[*]} (run as root or install them)" >&2; exit 1
fi
# One apt at a time: make check may run `deps.sh cross` in the background (tests/aarch64.sh
# --prebuild) while another set is installed; apt-get would fail on the dpkg lock.
exec 8>/run/lock/nri-qos-deps.lock
flock 8
echo "deps.sh: apt-get install ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
# --force-unsafe-io: dpkg unpacks without an fsync per file, as Debian's build chroots do
# (mmdebstrap, sbuild); on a fresh machine it takes the demo's ~70 s install down by about half.
# A power cut during the install may leave a package to reinstall, nothing else.
apt-get install -y -qq --no-install-recommends -o Dpkg::Options::=--force-unsafe-io "${missing[@]}" >/dev/null
