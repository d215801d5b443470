#!/bin/bash
# Shared code of the real-containerd end-to-end suites (containerd16.sh, containerd17.sh, and
# inside the node VM of nodevm.sh). Source, don't run. Every suite:
#   - prints ONLY result lines on stdout: `PASS name`, `FAIL name (why)`, `SKIP name (why)`;
#     diagnostics go to stderr;
#   - runs one isolated containerd (own root/state/sockets under $D) started with setsid;
#   - on exit (trap, also on failure or signal) stops everything it started BY PID, unmounts,
#     removes its cgroups and restores /etc/nri, /opt/nri and /run/nri-qos from a backup.
# Global paths containerd hard-codes (/etc/nri/conf.json, /opt/nri/bin, /opt/nri/plugins,
# /etc/nri/conf.d) are shared by all host suites: a flock serialises them (suite_main).
#
# A suite script sets S (result name prefix), D (state dir), CONTAINERD, CTR, SHIM_PATH and
# calls `suite_main UP_FUNCTION SCENARIOS_FUNCTION`. Scenarios are the sc_* functions below:
# they know the cgroup layout (v1 / v2) and driver (cgroupfs / systemd) and read every value
# back from the kernel.

E2E_HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$E2E_HERE/../.." && pwd)
PY=/usr/bin/python3                       # Debian python: has python3-grpcio/grpc-tools
E2E_CACHE=${E2E_CACHE:-/var/cache/nri-qos-e2e}
E2E_WORK=${E2E_WORK:-/var/lib/nri-qos-e2e} # per-suite state dirs + the /etc/nri backup
NRI_QOS_BIN=${NRI_QOS_BIN:-$REPO/build/nri-qos}
BUNDLED_POLICY=$REPO/conf/nri.d/nri-qos.toml
# The mechanics scenarios run on the fixture policy whose classes write on every event
# (tests/fixtures/policy/classic.toml, as tests/lib.sh; the bundled policy does what the seed
# systems do, which is nothing for most pods); sc_koord_batch runs the bundled policy itself.
TEST_POLICY=${E2E_POLICY:-$REPO/tests/fixtures/policy/classic.toml}
# cgroupfs (the host) or systemd (the node VM: systemd is PID 1 there)
E2E_CGROUP_DRIVER=${E2E_CGROUP_DRIVER:-cgroupfs}
# shellcheck disable=SC2034  # used by containerd17.sh and nodevm.sh
C21_SUITE=${E2E_C21_SUITE:-sid}        # Debian suite whose containerd is the "2.1" runtime
# containerd builds Debian does not package (v2.2.7, v2.3.4: containerd-<v>/ with their README),
# beside the checkout in this workplace; the 2.2/2.3 suites SKIP when they are absent
E2E_RUNTIMES=${E2E_RUNTIMES:-$(dirname "$REPO")/shared/runtimes}
E2E_PREFIX=${E2E_PREFIX:-}                # prefix of every result name ("vm-" inside the VM)
# E2E_NODE_SUBSET=1 (the node VM): only the scenarios whose outcome depends on the node's shape
# (cgroup v2, systemd driver); protocol-level ones (registration, child crash, restart, v0.1
# annotations) are covered on the host and would cost minutes under TCG (host_only).
E2E_NODE_SUBSET=${E2E_NODE_SUBSET:-}
IMAGE=localhost/e2e/busybox:1             # workload image (mkimage.py, busybox-static)
PAUSE=localhost/e2e/pause:1               # CRI sandbox_image (same image)
UIDP=0e2e0000                             # every test pod uid starts with this (cleanup key)
BACKUP=$E2E_WORK/nri-backup               # copy of /etc/nri, /opt/nri, /run/nri-qos, /var/lib/nri-qos before a suite
BACKUP_PATHS=(/etc/nri /opt/nri /run/nri-qos /var/lib/nri-qos)  # /var/lib/nri-qos: last good policy copies
APT_PKGS=(containerd runc python3-grpcio python3-grpc-tools busybox-static jq debian-archive-keyring)
export CRI_PYGEN_DIR=$E2E_CACHE/cri-pygen  # generated python gRPC stubs

NPASS=0; NFAIL=0; NSKIP=0

log() { printf '[%(%T)T] %s\n' -1 "$*" >&2; }   # no fork: cheap inside the TCG VM too
pass() { echo "PASS $E2E_PREFIX$1"; NPASS=$((NPASS + 1)); }
fail() { echo "FAIL $E2E_PREFIX$1${2:+ ($2)}"; NFAIL=$((NFAIL + 1)); log "FAIL $1: ${2:-}"; }
skip() { echo "SKIP $E2E_PREFIX$1${2:+ ($2)}"; NSKIP=$((NSKIP + 1)); }

# ---------------------------------------------------------------------------------------------
# Preconditions. preflight prints the reason the machine cannot run the e2e (empty = it can).
# ---------------------------------------------------------------------------------------------
cgroup_layout() { # v1 (cpu controller mounted at /sys/fs/cgroup/cpu) | v2 | none
  if [ -f /sys/fs/cgroup/cpu/cpu.shares ]; then echo v1
  elif [ -f /sys/fs/cgroup/cgroup.controllers ] && grep -qw cpu /sys/fs/cgroup/cgroup.controllers; then echo v2
  else echo none; fi
}
LAYOUT=$(cgroup_layout)

apt_missing() {
  local p miss=()
  for p in "${APT_PKGS[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || miss+=("$p")
  done
  echo "${miss[*]}"
}

# Install missing Debian packages (waits for another apt/dpkg to finish). Non-zero on failure.
apt_ensure() {
  local miss; miss=$(apt_missing)
  [ -z "$miss" ] && return 0
  command -v apt-get >/dev/null || return 1
  log "apt-get install $miss"
  local _
  for _ in 1 2 3 4 5 6; do   # apt-get update has no lock timeout of its own: retry
    apt-get -o DPkg::Lock::Timeout=300 update -qq </dev/null >&2 && break
    sleep 10
  done
  # shellcheck disable=SC2086
  DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=300 install -y -qq \
    --no-install-recommends $miss </dev/null >&2 || return 1
  [ -z "$(apt_missing)" ]
}

# Refuse to let apt replace a containerd that is not Debian's test package: a running one (a
# real node), or a binary that another package (Docker's containerd.io, a vendor build) or no
# package at all put in place. Prints the reason (empty = fine).
containerd_guard() {
  local p owner
  for p in $(pgrep -x containerd 2>/dev/null); do
    grep -qs -- "$E2E_WORK/" "/proc/$p/cmdline" && continue
    echo "containerd (pid $p) is running on this host: make check/e2e must not run on a production node"; return
  done
  for p in containerd.io moby-containerd; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' && {
      echo "containerd is installed from package $p, not Debian's containerd: refusing to replace it"; return; }
  done
  if [ -e /usr/bin/containerd ]; then
    owner=$(dpkg-query -S /usr/bin/containerd 2>/dev/null | cut -d: -f1)
    [ "$owner" = containerd ] || { echo "/usr/bin/containerd is not from Debian's containerd package (${owner:-no package}): refusing to replace it"; return; }
  fi
}

preflight() {
  [ "$(id -u)" = 0 ] || { echo "not root"; return; }
  local g; g=$(containerd_guard); [ -z "$g" ] || { echo "$g"; return; }
  [ "$LAYOUT" != none ] || { echo "no cgroup v1 cpu controller or cgroup v2 mount under /sys/fs/cgroup"; return; }
  command -v dpkg-query >/dev/null || { echo "not a Debian system (no dpkg)"; return; }
  if [ -n "$(apt_missing)" ] && ! apt_ensure; then
    echo "apt unavailable: cannot install $(apt_missing)"; return
  fi
  if [ "$E2E_CGROUP_DRIVER" = systemd ] && [ "$(cat /proc/1/comm 2>/dev/null)" != systemd ]; then
    echo "E2E_CGROUP_DRIVER=systemd needs systemd as PID 1"; return
  fi
  local p
  for p in $(pgrep -x containerd 2>/dev/null; pgrep -x dockerd 2>/dev/null); do
    grep -qs -- "$E2E_WORK/" "/proc/$p/cmdline" && continue
    echo "a containerd/dockerd (pid $p) already runs on this host: refusing to touch /etc/nri and /opt/nri"
    return
  done
}

# Serialise suites (global /etc/nri, /opt/nri paths). fd 9 stays open for the suite's lifetime.
take_lock() {
  mkdir -p "$E2E_WORK"
  exec 9>"$E2E_WORK/lock"
  flock -w 600 9 || { log "another e2e run holds $E2E_WORK/lock"; return 1; }
}

# ---------------------------------------------------------------------------------------------
# Debian packages of another suite (trixie's containerd 1.7, sid's 2.1) in a private root:
# `apt-get download` + `dpkg -x` with a private apt configuration under $E2E_CACHE. The system's
# apt sources, lists and dpkg database are not touched, and no archive host is written in this
# tree: the mirror is the one this machine's apt already uses.
# ---------------------------------------------------------------------------------------------

# The Debian archive URI of this machine's apt sources: the first enabled `deb` entry whose URI
# path ends in /debian (deb822 *.sources first, then one-line *.list). E2E_DEBIAN_MIRROR overrides.
debian_mirror() {
  [ -n "${E2E_DEBIAN_MIRROR:-}" ] && { echo "${E2E_DEBIAN_MIRROR%/}"; return 0; }
  local f uri
  for f in /etc/apt/sources.list.d/*.sources; do
    [ -f "$f" ] || continue
    # deb822: stanzas separated by blank lines (awk paragraph mode); comments dropped
    uri=$(awk 'BEGIN { RS = "" }
      { en = 1; deb = 0; u = ""; n = split($0, L, "\n")
        for (i = 1; i <= n; i++) { l = L[i]; sub(/#.*/, "", l)
          if (l ~ /^Enabled:[ \t]*[Nn]o/) en = 0
          if (l ~ /^Types:/ && l ~ /[ \t]deb([ \t]|$)/) deb = 1
          if (l ~ /^URIs:/) { sub(/^URIs:[ \t]*/, "", l); m = split(l, U, /[ \t]+/)
            for (k = 1; k <= m; k++) if (u == "" && U[k] ~ /^https?:\/\/.*\/debian\/?$/) u = U[k] } }
        if (en && deb && u != "") { sub(/\/$/, "", u); print u; exit } }' "$f")
    [ -n "$uri" ] && { echo "$uri"; return 0; }
  done
  for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
    [ -f "$f" ] || continue
    uri=$(sed -n 's|^[[:space:]]*deb[[:space:]]\+\(\[[^]]*\][[:space:]]\+\)\?\(https\?://[^[:space:]]*/debian\)/\?[[:space:]].*|\2|p' "$f" | head -1)
    [ -n "$uri" ] && { echo "$uri"; return 0; }
  done
  return 1
}

# apt options for the private configuration of Debian SUITE (array APT_OPTS); runs `apt-get
# update` once per suite (again with E2E_APT_REFRESH=1).
debian_apt() { # SUITE
  local s=$1 c=$E2E_CACHE/apt-$1 mirror
  # the file name ends in .sources: apt parses it as deb822 only then
  APT_OPTS=(-o Dir::Etc::sourcelist="$c/$s.sources" -o Dir::Etc::sourceparts=/dev/null
            -o Dir::State::Lists="$c/lists" -o Dir::Cache="$c/cache" -o Dir::State::status=/dev/null
            -o APT::Sandbox::User=root)
  [ -f "$c/updated" ] && [ -z "${E2E_APT_REFRESH:-}" ] && return 0
  [ -z "${E2E_OFFLINE:-}" ] || { echo "offline (E2E_OFFLINE): no $s packages in $E2E_CACHE" >&2; return 1; }
  mirror=$(debian_mirror) || { echo "no Debian mirror in this machine's apt sources" >&2; return 1; }
  mkdir -p "$c/lists/partial" "$c/cache/archives/partial"
  printf 'Types: deb\nURIs: %s\nSuites: %s\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' \
    "$mirror" "$s" > "$c/$s.sources"
  apt-get "${APT_OPTS[@]}" update -qq </dev/null >&2 || { echo "apt-get update of Debian $s failed" >&2; return 1; }
  touch "$c/updated"
}

# debian_root SUITE PKG...: download PKGs of Debian SUITE and dpkg -x them into
# $E2E_CACHE/SUITE-root. Cached: packages already extracted there are not fetched again.
# Errors go to stderr and $E2E_CACHE/SUITE.err.
debian_root() {
  local s=$1; shift
  local root=$E2E_CACHE/$s-root debs=$E2E_CACHE/debs-$s want=() p
  for p in "$@"; do grep -qxF "$p" "$root/.e2e-packages" 2>/dev/null || want+=("$p"); done
  [ ${#want[@]} = 0 ] && return 0
  mkdir -p "$E2E_CACHE"
  # one fetcher at a time per cache (the VM suite prepares sid while the host suites run)
  exec 8>"$E2E_CACHE/fetch.lock"
  flock -w 900 8 || { echo "another run holds $E2E_CACHE/fetch.lock" >&2; exec 8>&-; return 1; }
  want=()
  for p in "$@"; do grep -qxF "$p" "$root/.e2e-packages" 2>/dev/null || want+=("$p"); done
  [ ${#want[@]} = 0 ] && { exec 8>&-; return 0; }
  local rc=0
  debian_fetch "$s" "$root" "$debs" "${want[@]}" 2> >(tee "$E2E_CACHE/$s.err" >&2) || rc=1
  exec 8>&-   # never inherited by containerd or the VM
  return $rc
}
debian_fetch() { # SUITE ROOT DEBS PKG...: the download + extraction (messages on stderr)
  local s=$1 root=$2 debs=$3 p f; shift 3
  debian_apt "$s" || return 1
  log "fetching $# package(s) of Debian $s into $root (apt-get download + dpkg -x)"
  mkdir -p "$debs" "$root"
  # lists older than the archive name superseded versions: update once and retry
  (cd "$debs" && apt-get "${APT_OPTS[@]}" download -qq "$@" </dev/null) \
    || { E2E_APT_REFRESH=1 debian_apt "$s" && (cd "$debs" && apt-get "${APT_OPTS[@]}" download -qq "$@" </dev/null); } \
    || { echo "apt-get download from Debian $s failed" >&2; return 1; }
  for p in "$@"; do
    f=$(ls "$debs/${p}"_*.deb 2>/dev/null | sort -V | tail -1)
    if [ -z "$f" ] || ! dpkg -x "$f" "$root"; then echo "cannot extract $p" >&2; return 1; fi
    echo "$p" >> "$root/.e2e-packages"
  done
}

# Debian package version of PKG in the private root of SUITE (from the .deb kept in debs-SUITE)
debian_version() { # SUITE PKG
  local f; f=$(ls "$E2E_CACHE/debs-$1/$2"_*.deb 2>/dev/null | sort -V | tail -1)
  if [ -n "$f" ]; then dpkg-deb -f "$f" Version; else echo "version unknown"; fi
}

# ---------------------------------------------------------------------------------------------
# /etc/nri, /opt/nri, /run/nri-qos: exact backup before, exact restore after (also after a
# previous run was killed: a complete backup left behind is restored first).
# ---------------------------------------------------------------------------------------------
nri_backup() {
  nri_restore
  rm -rf "$BACKUP"; mkdir -p "$BACKUP"
  local p n
  for p in "${BACKUP_PATHS[@]}"; do
    n=$(echo "$p" | tr / _)
    if [ -e "$p" ]; then cp -a "$p" "$BACKUP/$n"; else touch "$BACKUP/$n.absent"; fi
  done
  # kubepods cgroup dirs that exist already are not ours to remove
  for p in /sys/fs/cgroup/*/kubepods /sys/fs/cgroup/*/kubepods/burstable /sys/fs/cgroup/*/kubepods/besteffort; do
    [ -d "$p" ] && echo "$p"
  done > "$BACKUP/preexisting-cgroups" || true
  touch "$BACKUP/.complete"
}

nri_restore() {
  [ -e "$BACKUP/.complete" ] || { rm -rf "$BACKUP"; return 0; }
  local p n
  for p in "${BACKUP_PATHS[@]}"; do
    n=$(echo "$p" | tr / _)
    rm -rf "$p"
    [ -e "$BACKUP/$n" ] && cp -a "$BACKUP/$n" "$p"
  done
  rm -rf "$BACKUP"
}

# ---------------------------------------------------------------------------------------------
# containerd lifecycle. Suites set: D (state dir), CONTAINERD, CTR, SHIM_PATH (dir with
# containerd-shim-runc-v2, first in PATH), and write $D/config.toml with write_config_common.
# ---------------------------------------------------------------------------------------------
cri() { "$PY" "$E2E_HERE/cri/criclient.py" -s "$D/containerd.sock" "$@"; }

# NRI section of containerd's config for the native suites (same on 1.7 and 2.x: 2.x migrates a
# version 2 config). Timeouts are containerd's defaults, written out so that a changed default
# cannot change what is tested.
nri_block() {
  cat <<TOML
[plugins."io.containerd.nri.v1.nri"]
  disable = false
  disable_connections = false
  plugin_config_path = "/etc/nri/conf.d"
  plugin_path = "/opt/nri/plugins"
  plugin_registration_timeout = "5s"
  plugin_request_timeout = "2s"
  socket_path = "$(nri_sock)"
TOML
}
# containerd's NRI socket: private under $D, or E2E_NRI_SOCK (the node VM's native suite: NRI's
# default /var/run/nri/nri.sock, where the packaged nri-qos-relay.service connects)
nri_sock() { echo "${E2E_NRI_SOCK:-$D/nri.sock}"; }

# write_config_common NRI_BLOCK [POD_ANNOTATIONS_LINE]: containerd config v2 with everything
# private under $D; the second argument replaces the pod_annotations line ("" = none: what
# Debian's containerd 1.6 does by default, sc_not_passed).
# pod_annotations: CRI copies only allow-listed pod annotations into the OCI spec (and so into
# v0.1 requests); containerd matches them with Go's filepath.Match, where "*" does not match "/",
# so "*" alone would not pass "openfuyao.com/qos-level": "*/*" does. runc Root under $D;
# restrict_oom_score_adj because root here may lack CAP_SYS_RESOURCE (pause's -998 would make
# runc fail). SystemdCgroup follows E2E_CGROUP_DRIVER.
write_config_common() {
  rm -rf "$D/logs"
  mkdir -p "$D"/{root,state,runc,cni/net.d,cni/bin,opt,logs}
  local sd=false; [ "$E2E_CGROUP_DRIVER" = systemd ] && sd=true
  local pa=${2-'pod_annotations = ["*", "*/*"]'}
  cat > "$D/config.toml" <<TOML
version = 2
root = "$D/root"
state = "$D/state"
disabled_plugins = ["io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs",
                    "io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.devmapper",
                    "io.containerd.tracing.processor.v1.otlp"]
[grpc]
  address = "$D/containerd.sock"
[ttrpc]
  address = "$D/containerd.sock.ttrpc"
[debug]
  address = "$D/debug.sock"
  level = "info"
[plugins."io.containerd.internal.v1.opt"]
  path = "$D/opt"
$1
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "$PAUSE"
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "$D/cni/bin"
    conf_dir = "$D/cni/net.d"
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      $pa
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        BinaryName = "/usr/bin/runc"
        Root = "$D/runc"
        SystemdCgroup = $sd
TOML
}

containerd_pid() { [ -f "$D/containerd.pid" ] && cat "$D/containerd.pid"; }
containerd_alive() { local p; p=$(containerd_pid) && kill -0 "$p" 2>/dev/null; }

# CTD_UNIT=1 (ctd_unit_on: the node VM's external-relay scenarios): containerd runs as the node's
# containerd.service, as on a real node (Debian's unit, unmasked, with a runtime drop-in for the
# suite's binary and config): its log goes to the journal, where the relay's failure recorder
# reads it by default (journal:containerd). A follower copies it into $D/logs/containerd.log for
# the scenarios' greps. ctd_unit_off (teardown) removes the drop-in and masks the unit again.
CTD_UNIT=""
CTD_DROPIN=/run/systemd/system/containerd.service.d/50-nri-qos-e2e.conf
ctd_unit_on() {
  stop_containerd
  mkdir -p "$(dirname "$CTD_DROPIN")"
  printf '[Service]\n# e2e (tests/e2e/lib.sh ctd_unit_on): the suite'"'"'s containerd and config\nExecStart=\nExecStart=%s --config %s\nEnvironment=PATH=%s\n' \
    "$CONTAINERD" "$D/config.toml" "${SHIM_PATH:+$SHIM_PATH:}/usr/sbin:/usr/bin:/sbin:/bin" > "$CTD_DROPIN"
  if [ "$(systemctl is-enabled containerd.service 2>/dev/null)" = masked ]; then
    systemctl unmask containerd.service >/dev/null 2>&1 && touch "$D/ctd-unmasked"
  fi
  systemctl daemon-reload
  CTD_UNIT=1
  ( exec 9>&-; exec journalctl -q -u containerd.service -f -n 0 -o cat --no-pager ) >> "$D/logs/containerd.log" 2>/dev/null </dev/null &
  echo $! > "$D/ctd-journal.pid"
  log "containerd as containerd.service (drop-in $CTD_DROPIN; journal copied to $D/logs/containerd.log)"
}
ctd_unit_off() {
  [ -n "$CTD_UNIT" ] || [ -f "$CTD_DROPIN" ] || return 0
  systemctl stop containerd.service >/dev/null 2>&1
  rm -f "$CTD_DROPIN"; rmdir "$(dirname "$CTD_DROPIN")" 2>/dev/null
  [ -f "$D/ctd-unmasked" ] && systemctl mask containerd.service >/dev/null 2>&1
  rm -f "$D/ctd-unmasked"
  systemctl daemon-reload
  [ -f "$D/ctd-journal.pid" ] && kill "$(cat "$D/ctd-journal.pid")" 2>/dev/null
  rm -f "$D/ctd-journal.pid"
  CTD_UNIT=""
}

start_containerd() {
  containerd_alive && return 0
  rm -f "$D/containerd.sock"
  if [ -n "$CTD_UNIT" ]; then
    log "starting containerd.service ($CONTAINERD)"
    systemctl start containerd.service || { journalctl -q -u containerd.service -n 20 --no-pager >&2; log "containerd.service did not start"; return 1; }
    systemctl show -P MainPID containerd.service > "$D/containerd.pid"
  else
    log "starting $CONTAINERD ($("$CONTAINERD" --version | awk '{print $3}'))"
    # setsid: own session; PATH decides which containerd-shim-runc-v2 is used
    PATH="${SHIM_PATH:+$SHIM_PATH:}/usr/sbin:/usr/bin:/sbin:/bin" setsid "$CONTAINERD" \
      --config "$D/config.toml" </dev/null >>"$D/logs/containerd.log" 2>&1 9>&- &
    echo $! > "$D/containerd.pid"
  fi
  local _; for _ in $(seq 1 300); do
    [ -S "$D/containerd.sock" ] && cri version >/dev/null 2>&1 && return 0
    containerd_alive || { tail -20 "$D/logs/containerd.log" >&2; log "containerd exited"; return 1; }
    sleep 0.2
  done
  tail -20 "$D/logs/containerd.log" >&2; log "containerd did not come up"; return 1
}

stop_containerd() { # TERM, KILL after 5 s; by PID (containerd.service: systemctl stop)
  if [ -n "$CTD_UNIT" ]; then systemctl stop containerd.service; rm -f "$D/containerd.pid"; return 0; fi
  local pid; pid=$(containerd_pid) || return 0
  if kill -0 "$pid" 2>/dev/null; then
    kill "$pid" 2>/dev/null || true
    local _; for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -0 "$pid" 2>/dev/null && kill -9 "$pid" 2>/dev/null
  fi
  rm -f "$D/containerd.pid"
}

# $E2E_CACHE/image.tar (busybox image, both tags), written atomically: the VM suite stages it
# while the host suites import it
image_tar() {
  [ -f "$E2E_CACHE/image.tar" ] && return 0
  mkdir -p "$E2E_CACHE"
  "$PY" "$E2E_HERE/mkimage.py" "$E2E_CACHE/image.tar.$$" "$IMAGE" "$PAUSE" >/dev/null &&
    mv -f "$E2E_CACHE/image.tar.$$" "$E2E_CACHE/image.tar"
}
import_image() {
  image_tar && "$CTR" -a "$D/containerd.sock" -n k8s.io images import "$E2E_CACHE/image.tar" >/dev/null
}

# pids of processes with an argument containing $1 (fixed string). One grep over all cmdlines
# (no fork per process); grep's own pid may be listed, it is gone when kill_pids looks at it.
pids_with_arg() {
  grep -laF -- "$1" /proc/[0-9]*/cmdline 2>/dev/null | sed -n 's|^/proc/\([0-9]*\)/cmdline$|\1|p'
  return 0
}

kill_pids() { # kill -9 the given pids (logged)
  local p
  for p in "$@"; do
    kill -0 "$p" 2>/dev/null || continue
    log "killing leftover pid $p: $(tr '\0' ' ' 2>/dev/null < "/proc/$p/cmdline" | cut -c1-100)"
    kill -9 "$p" 2>/dev/null || true
  done
}

# our pod cgroups in every hierarchy: cgroupfs pod<uid> dirs and systemd pod slices
our_pod_cgroups() {
  find /sys/fs/cgroup/ -maxdepth 5 -type d \( -name "pod$UIDP*" -o -name "kubepods-*-pod${UIDP}*.slice" \) 2>/dev/null
}

# Stop everything this suite started, by PID. Idempotent; never fails.
teardown_all() {
  set +e
  # what the suite script adds (containerd17.sh: the packaged relay service, the .deb)
  declare -F suite_teardown >/dev/null && suite_teardown
  # the external relay's restart supervisor (containerd17.sh ext_start), then the relay
  # processes on our NRI socket: before containerd goes, so that nothing reconnects
  [ -f "$D/relay-sup.pid" ] && kill_pids "$(cat "$D/relay-sup.pid")"
  rm -f "$D/relay-sup.pid"
  # shellcheck disable=SC2046
  kill_pids $(pids_with_arg "$(nri_sock)")
  if containerd_alive && [ -S "$D/containerd.sock" ]; then
    local c
    for c in $("$CTR" -a "$D/containerd.sock" -n k8s.io containers ls -q 2>/dev/null); do
      "$CTR" -a "$D/containerd.sock" -n k8s.io tasks kill -s SIGKILL "$c" >/dev/null 2>&1
    done
    sleep 0.3
    for c in $("$CTR" -a "$D/containerd.sock" -n k8s.io containers ls -q 2>/dev/null); do
      "$CTR" -a "$D/containerd.sock" -n k8s.io tasks delete -f "$c" >/dev/null 2>&1
      "$CTR" -a "$D/containerd.sock" -n k8s.io containers delete "$c" >/dev/null 2>&1
    done
  fi
  stop_containerd
  ctd_unit_off
  # shims carry "-address $D/containerd.sock"; NRI plugins we installed are named below
  # shellcheck disable=SC2046  # pid lists: word splitting wanted
  kill_pids $(pids_with_arg "$D/containerd.sock")
  # shellcheck disable=SC2046
  kill_pids $(pids_with_arg /opt/nri/plugins/10-nri-qos) $(pids_with_arg /opt/nri/plugins/00-v010-adapter)
  # container processes still in our pod cgroups (the shim was gone before it could kill them)
  local h d
  our_pod_cgroups | while read -r d; do
    # shellcheck disable=SC2046
    kill_pids $(find "$d" -name cgroup.procs -exec cat {} + 2>/dev/null)
  done
  # mounts under our state dir (overlay rootfs, sandbox shm), deepest first
  { grep -o " $D/[^ ]*" /proc/mounts || true; } | sort -r | while read -r m; do umount -l "$m"; done
  # our cgroups and below (systemd removes its own units' directories), then the kubepods
  # levels we created (only if empty)
  our_pod_cgroups | sort -r | while read -r d; do find "$d" -depth -type d -exec rmdir {} \; 2>/dev/null; done
  for h in /sys/fs/cgroup/*; do
    for d in "$h/kubepods/burstable" "$h/kubepods/besteffort" "$h/kubepods"; do
      [ -d "$d" ] || continue
      grep -qxF "$d" "$BACKUP/preexisting-cgroups" 2>/dev/null && continue
      rmdir "$d" 2>/dev/null
    done
  done
  nri_restore
  rm -rf "$D/root" "$D/state" "$D/runc" "$D/opt" "$D/cni" "$D"/*.sock* "$D/tmp"
  return 0
}

# Leftovers of any earlier run that was killed before its trap ran (all suites share the global
# NRI paths and the pod uid prefix): stop/unmount/remove what each suite dir still holds.
cleanup_stale() {
  local self=$D d
  for d in "$E2E_WORK"/containerd*/; do
    [ -d "$d" ] || continue
    D=${d%/}
    if [ "$D" = "$self" ] || [ -f "$D/containerd.pid" ] || [ -d "$D/root" ]; then teardown_all; fi
  done
  D=$self
  teardown_all
}

# suite_main UP SCENARIOS: the frame every suite runs in. Skips (one SKIP line, exit 0) when the
# machine does not allow it; takes the lock; traps EXIT for teardown; cleans up what a killed
# earlier run left; UP returns 0 (ready), 2 (SKIP already printed) or 1 (FAIL printed); then
# SCENARIOS. `DOWN_ONLY=1` only tears down (after E2E_KEEP=1). Exit status: 1 if anything failed.
suite_main() {
  local up=$1 scen=$2 why t0=$SECONDS
  why=$(preflight)
  [ -z "$why" ] || { skip "$S" "$why"; return 0; }
  take_lock || { fail "$S-setup" "lock $E2E_WORK/lock held by another run for 600 s"; return 1; }
  [ -n "${DOWN_ONLY:-}" ] && { teardown_all; return 0; }
  trap 'teardown_all' EXIT
  trap 'exit 130' INT TERM
  cleanup_stale
  local rc=0; "$up" || rc=$?
  [ $rc = 2 ] && return 0
  [ $rc = 0 ] || return 1
  log "$S: containerd up in $((SECONDS - t0)) s ($("$CONTAINERD" --version | awk '{print $3}'), $LAYOUT, $E2E_CGROUP_DRIVER driver)"
  "$scen"
  log "$S: $NPASS passed, $NFAIL failed, $NSKIP skipped in $((SECONDS - t0)) s"
  if [ -n "${E2E_KEEP:-}" ]; then trap - EXIT; log "E2E_KEEP: containerd left running (socket $D/containerd.sock)"; fi
  [ "$NFAIL" = 0 ]
}

# ---------------------------------------------------------------------------------------------
# Pods. run_pod OUT NAME CGROUP_PARENT_TEMPLATE [criclient up-pod options]: RunPodSandbox,
# CreateContainer, StartContainer; JSON summary in $D/logs/OUT.json. Returns criclient's status.
# ---------------------------------------------------------------------------------------------
# Kubernetes cgroup parent of a pod of QoS class $1 (burstable|besteffort|guaranteed), as the
# kubelet names it for the active driver; {uid}/{uid_} are filled in by criclient.py.
kube_parent() {
  if [ "$E2E_CGROUP_DRIVER" = systemd ]; then
    case $1 in guaranteed) echo "kubepods-pod{uid_}.slice" ;; *) echo "kubepods-$1-pod{uid_}.slice" ;; esac
  else
    case $1 in guaranteed) echo "/kubepods/pod{uid}" ;; *) echo "/kubepods/$1/pod{uid}" ;; esac
  fi
}

run_pod() {
  local out=$1 name=$2 cgp=$3; shift 3
  local rc=0
  unset "CG_REL[$out:ctr]" "CG_REL[$out:pod]"
  cri up-pod --name "$name" --uid-prefix "$UIDP" --cgroup-parent "$cgp" --image "$IMAGE" "$@" \
    > "$D/logs/$out.json" 2>"$D/logs/$out.err" || rc=$?
  log "$out: $(jq -c '{ok, steps: (.steps|map_values(if .ok then .seconds else .error end))}' "$D/logs/$out.json" 2>/dev/null || cat "$D/logs/$out.err")"
  return $rc
}
j() { jq -r "$2" "$D/logs/$1.json" 2>/dev/null; }   # j OUT FILTER
stop_pod() {
  local p; p=$(j "$1" '.pod_id // empty')
  [ -n "${RES_DIGEST:-}" ] && [ -n "$p" ] && res_snapshot "$1" "$p"
  [ -n "$p" ] && { cri down-pod "$p" >&2 || true; }; return 0
}
first_error() { j "$1" '[.steps | to_entries[] | select(.value.ok|not) | "\(.key): \(.value.error)"][0] // "?"'; }

# systemd slice name -> its path: a-b-c.slice is /a.slice/a-b.slice/a-b-c.slice (systemd.slice(5))
slice_path() {
  local name=${1%.slice} acc="" out="" part
  local IFS=-
  for part in $name; do acc=${acc:+$acc-}$part; out="$out/$acc.slice"; done
  echo "$out"
}
# cgroup path of the pod / container of OUT, relative to a hierarchy root. cgroupfs driver:
# <parent>/<id>; systemd driver: the slice path and the container's scope cri-containerd-<id>.scope
# (runc's systemd driver: cgroupsPath "slice:cri-containerd:id").
declare -A CG_REL=()   # OUT:ctr / OUT:pod -> path; filled by cg_prime in the calling shell
cg_prime() { # OUT: one jq per pod (forks are slow inside the TCG VM)
  [ -n "${CG_REL[$1:ctr]:-}" ] && return 0
  local parent id
  { read -r parent; read -r id; } < <(jq -r '.cgroup_parent, .ctr_id' "$D/logs/$1.json" 2>/dev/null)
  if [[ $parent == *.slice ]]; then
    parent=$(slice_path "$parent")
    CG_REL[$1:ctr]="$parent/cri-containerd-$id.scope"
  else
    CG_REL[$1:ctr]="$parent/$id"
  fi
  CG_REL[$1:pod]=$parent
}
cg_rel() { # OUT ctr|pod
  [ -n "${CG_REL[$1:$2]:-}" ] || cg_prime "$1"
  echo "${CG_REL[$1:$2]}"
}
# v1 controller directory of a v1 knob file name
v1_ctrl() { case $1 in cpuset.*) echo cpuset ;; memory.*) echo memory ;; blkio.*) echo blkio ;; *) echo cpu ;; esac; }
cg_dir() { # OUT ctr|pod [v1-knob]: absolute cgroup directory (v1: of the knob's controller)
  if [ "$LAYOUT" = v1 ]; then echo "/sys/fs/cgroup/$(v1_ctrl "${3:-cpu.shares}")$(cg_rel "$1" "$2")"
  else echo "/sys/fs/cgroup$(cg_rel "$1" "$2")"; fi
}

# read_knob KIND(ctr|pod) OUT KNOB: the kernel's value of a knob named by its cgroup v1 file, or
# by its v2 file on a v2 host. On v2 the v1 names map as the kernel's cgroup-v2.rst and runc do:
#   cpu.shares -> cpu.weight, cpu.cfs_quota_us -> cpu.max (first field), cpu.cfs_burst_us ->
#   cpu.max.burst, memory.limit_in_bytes -> memory.max, blkio.weight -> io.weight ("default N").
read_knob() {
  local dir knob=$3 f
  dir=$(cg_dir "$2" "$1" "$knob")
  if [ "$LAYOUT" = v1 ]; then
    cat "$dir/$knob" 2>/dev/null || echo "<missing $dir/$knob>"
    return
  fi
  case $knob in
    cpu.shares) f=cpu.weight ;;
    cpu.cfs_quota_us|cpu.cfs_period_us) f=cpu.max ;;
    cpu.cfs_burst_us) f=cpu.max.burst ;;
    memory.limit_in_bytes) f=memory.max ;;
    blkio.weight) f=io.weight ;;
    *) f=$knob ;;
  esac
  local v; v=$(cat "$dir/$f" 2>/dev/null) || { echo "<missing $dir/$f>"; return; }
  case $knob in
    cpu.cfs_quota_us) echo "${v%% *}" ;;
    cpu.cfs_period_us) echo "${v##* }" ;;
    blkio.weight) sed -n 's/^default //p' <<<"$v" ;;
    *) echo "$v" ;;
  esac
}
# expected value of a knob as the kernel shows it on this host
#   v2 cpu.weight from shares: runc 1.1's linear conversion 1 + ((shares-2)*9999)/262142 (what
#   runc does with CRI's shares; for 2 every formula gives 1); v2 blkio.weight: io.weight by
#   runc's 1 + (w-10)*9999/990; memory.high/max are kept in pages: rounded down to 4 KiB.
want_knob() { # KNOB VALUE
  if [ "$LAYOUT" = v1 ]; then echo "$2"; return; fi
  case $1 in
    cpu.shares) echo $((1 + (($2 - 2) * 9999) / 262142)) ;;
    blkio.weight) echo $((1 + ($2 - 10) * 9999 / 990)) ;;
    memory.high|memory.limit_in_bytes|memory.low|memory.min)
      if [ "$2" = max ]; then echo max; else echo $(($2 / 4096 * 4096)); fi ;;
    *) echo "$2" ;;
  esac
}
# pid of the container's process (first pid in its cgroup.procs)
ctr_pid() { head -1 "$(cg_dir "$1" ctr cpu.shares)/cgroup.procs" 2>/dev/null; }

# expect_knob OUT KIND KNOB VALUE: compares the kernel file with the expected value.
# Collects mismatches into $MISMATCH (the caller reports one PASS/FAIL line per scenario).
expect_knob() {
  local out=$1 kind=$2 knob=$3 want got
  cg_prime "$out"
  want=$(want_knob "$knob" "$4"); got=$(read_knob "$kind" "$out" "$knob")
  if [ "$got" != "$want" ]; then MISMATCH="${MISMATCH:+$MISMATCH; }$kind $knob=$got want $want"; fi
  log "  $out: $kind $knob = $got (want $want)"
  res_note "$out $kind $knob=$got"
}
# await_knob OUT KIND KNOB VALUE [SECONDS]: polls (0.2 s) until the kernel shows VALUE, at most
# SECONDS (10). For values the runtime writes after an event has been answered: containerd
# applies a Synchronize reply's container updates only after the relay has logged and sent it,
# so the relay's log line alone does not mean the kernel has them. Reports nothing itself: the
# expect_* that follows compares (and FAILs after the wait).
await_knob() {
  local want end=$((SECONDS + ${5:-10})) t0=$EPOCHREALTIME
  cg_prime "$1"
  want=$(want_knob "$3" "$4")
  while [ "$(read_knob "$2" "$1" "$3")" != "$want" ] && [ $SECONDS -lt $end ]; do sleep 0.2; done
  log "  $1: waited $(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }') s for $2 $3 = $want"
}
expect_oom() { # OUT VALUE
  cg_prime "$1"
  local pid got; pid=$(ctr_pid "$1")
  got=$(cat "/proc/$pid/oom_score_adj" 2>/dev/null || echo "<no pid>")
  [ "$got" = "$2" ] || MISMATCH="${MISMATCH:+$MISMATCH; }oom_score_adj(pid $pid)=$got want $2"
  res_note "$1 ctr oom_score_adj=$got"
  log "  $1: /proc/$pid/oom_score_adj = $got (want $2)"
}
# the cgroup directories have the shape the driver promises (systemd: slices and a scope)
expect_shape() { # OUT
  cg_prime "$1"
  local c p; c=$(cg_dir "$1" ctr); p=$(cg_dir "$1" pod)
  [ -d "$c" ] || MISMATCH="${MISMATCH:+$MISMATCH; }no container cgroup $c"
  [ -d "$p" ] || MISMATCH="${MISMATCH:+$MISMATCH; }no pod cgroup $p"
  log "  $1: container cgroup $c"
}
# OCI bundle config.json of the container of OUT (runc v2 shim state dir; native suites)
oci() { jq -r "$2" "$D/state/io.containerd.runtime.v2.task/k8s.io/$(j "$1" .ctr_id)/config.json" 2>/dev/null; }
expect_oci() { # OUT FILTER WANT
  local got; got=$(oci "$1" "$2")
  [ "$got" = "$3" ] || MISMATCH="${MISMATCH:+$MISMATCH; }config.json $2=$got want $3"
  res_note "$1 config.json $2=$got"
  log "  $1: config.json $2 = $got (want $3)"
}

# ---- the results digest of a pass (resident-same, containerd17.sh; issue #34 §2) -------------
# With RES_DIGEST set (a file), every value the expect_* functions read is noted in it, and
# stop_pod first notes the container's and pod's kernel files and the adjustable parts of the
# container's config.json (what the runtime made of the adjustment), and lists the pod's sandbox
# id in $RES_DIGEST.pods for res_records. Ids, pod uids and pids are left out (res_note), so two
# passes over the same scenarios give the same digest when the results are the same.
res_note() { # LINE
  [ -n "${RES_DIGEST:-}" ] || return 0
  sed -E 's/[0-9a-f]{64}/<id>/g; s/'"$UIDP"'-[0-9a-f-]+/<uid>/g' <<<"$*" >> "$RES_DIGEST"
}
res_snapshot() { # OUT POD_ID
  local out=$1 k
  echo "$2" >> "$RES_DIGEST.pods"
  cg_prime "$out"
  for k in cpu.shares cpu.cfs_quota_us cpu.cfs_period_us cpu.cfs_burst_us memory.limit_in_bytes cpuset.cpus; do
    res_note "$out stop ctr $k=$(read_knob ctr "$out" $k)"
  done
  [ "$LAYOUT" = v2 ] && for k in memory.high blkio.weight; do res_note "$out stop ctr $k=$(read_knob ctr "$out" $k)"; done
  for k in cpu.shares cpu.cfs_quota_us cpu.idle memory.limit_in_bytes; do
    res_note "$out stop pod $k=$(read_knob pod "$out" $k)"
  done
  res_note "$out stop ctr oom_score_adj=$(cat "/proc/$(ctr_pid "$out")/oom_score_adj" 2>/dev/null || echo '<no pid>')"
  res_note "$out stop config.json $(oci "$out" '{resources: .linux.resources, oom: .process.oomScoreAdj, scheduler: .process.scheduler, io: .process.ioPriority, memory_policy: .linux.memoryPolicy} | tojson')"
}
# res_records FROM_BYTE: the event-log records (E2E_EVENT_LOG from that offset, and the rotated
# file's tail when it was rotated meanwhile) of the pods listed in $RES_DIGEST.pods, without what
# differs between two runs of the same events (time, duration, ids, the evaluator field, the
# policy's hash: the two policies differ by their evaluator_events line), one per line, sorted.
# $RES_DIGEST.modes gets the evaluator field of those records of source nri-eval ("N value ...").
res_log_since() { # FROM_BYTE
  local size; size=$(stat -c %s "$E2E_EVENT_LOG" 2>/dev/null || echo 0)
  if [ "$size" -ge "$1" ]; then tail -c +$(($1 + 1)) "$E2E_EVENT_LOG"
  else tail -c +$(($1 + 1)) "$E2E_EVENT_LOG.1" 2>/dev/null; cat "$E2E_EVENT_LOG"; fi
}
res_records() { # FROM_BYTE
  local sel
  sel=$(res_log_since "$1" | jq -c --rawfile ids "$RES_DIGEST.pods" \
    '($ids | split("\n") | map(select(. != "") | {(.): true}) | add // {}) as $m
     | select($m[.sandbox_id // ""] or $m[.id // ""])' 2>/dev/null)
  jq -r 'select(.source == "nri-eval") | .evaluator // "none"' <<<"$sel" | sort | uniq -c | awk '{print $1, $2}' | tr '\n' ' ' > "$RES_DIGEST.modes"
  jq -c 'del(.time, .duration_us, .id, .sandbox_id, .evaluator, .policy_sha256, .pid)' <<<"$sel" |
    sed -E 's/[0-9a-f]{64}/<id>/g; s/'"$UIDP"'-[0-9a-f-]+/<uid>/g' | sort
}
# wait until the event log has stopped growing for 0.6 s (at most 5 s): the records of the last
# pod's stop events
res_settle() {
  local a b end=$((SECONDS + 5))
  a=$(stat -c %s "$E2E_EVENT_LOG" 2>/dev/null)
  while [ $SECONDS -lt $end ]; do
    sleep 0.6; b=$(stat -c %s "$E2E_EVENT_LOG" 2>/dev/null)
    [ "$a" = "$b" ] && return 0; a=$b
  done
}
# host_only: true unless running the node VM's subset (scenario lists: `host_only && sc_...`)
host_only() { [ -z "$E2E_NODE_SUBSET" ]; }
# want NAME: true unless E2E_ONLY (an extended regex over scenario names, e.g. 'sync|relay-back')
# is set and NAME does not match it. Scenario lists: `want be-label && sc_be ...`.
want() { [ -z "${E2E_ONLY:-}" ] || [[ $1 =~ $E2E_ONLY ]]; }
verdict() { # NAME: PASS when no mismatch was collected
  if [ -z "$MISMATCH" ]; then pass "$1"; else fail "$1" "$MISMATCH"; fi
}

# ---------------------------------------------------------------------------------------------
# Policies used by the scenarios.
# ---------------------------------------------------------------------------------------------
# The test policy (TEST_POLICY), copied so the test never depends on /etc/nri/nri-qos.toml, with
# test rules put first: pods labelled e2e.nri-qos/class=knobs get class E2E-KNOBS, which sets
# the cgroup v2 knobs the other classes do not (io.weight, memory.high at another ratio); pods
# labelled e2e.nri-qos/class=burst get E2E-BURST (burst 100 % of the quota, memory.high 90 %),
# so that the update scenarios test the burst ordering whatever the policy's LS class sets;
# e2e.nri-qos/class=resize gets E2E-RESIZE (container cpu.shares 2 and burst from the pod's
# volcano.sh/quota-burst-time, an untrusted fact; pod cpu.shares 4: sc_resize);
# e2e.nri-qos/class=proc gets E2E-PROC (sched_policy idle, io_class idle, memory_policy bind
# to node 0: sc_proc). Every other pod is classified by the policy's rules exactly as written.
install_test_policy() { # DEST
  [ -f "$TEST_POLICY" ] || { log "test policy $TEST_POLICY missing"; return 1; }
  grep -q '^\[\[rules\]\]' "$TEST_POLICY" || { log "no [[rules]] in $TEST_POLICY"; return 1; }
  mkdir -p "$(dirname "$1")"
  awk '!done && /^\[\[rules\]\]/ {
         print "# e2e (tests/e2e/lib.sh): test-only rule, first"
         print "[[rules]]"; print "name = \"e2e-knobs\""; print "class = \"E2E-KNOBS\""
         print "match.labels = { \"e2e.nri-qos/class\" = \"knobs\" }"; print ""
         print "[[rules]]"; print "name = \"e2e-proc\""; print "class = \"E2E-PROC\""
         print "match.labels = { \"e2e.nri-qos/class\" = \"proc\" }"; print ""
         print "[[rules]]"; print "name = \"e2e-burst\""; print "class = \"E2E-BURST\""
         print "match.labels = { \"e2e.nri-qos/class\" = \"burst\" }"; print ""
         print "[[rules]]"; print "name = \"e2e-resize\""; print "class = \"E2E-RESIZE\""
         print "match.labels = { \"e2e.nri-qos/class\" = \"resize\" }"; print ""; done = 1 }
       { print }
       END {
         print ""; print "# e2e (tests/e2e/lib.sh): test-only class"
         print "[classes.E2E-KNOBS]"; print "description = \"e2e: cgroup v2 knobs of no bundled class\""
         print "[classes.E2E-KNOBS.container]"
         print "blkio_weight = 500"; print "memory_high = \"75%\""; print "cpu_burst_us = \"50%\""
         print ""; print "[classes.E2E-BURST]"
         print "description = \"e2e: the LS values the update scenarios check, whatever the bundled LS does\""
         print "[classes.E2E-BURST.container]"
         print "cpu_burst_us = \"100%\""; print "memory_high = \"90%\""
         print ""; print "[classes.E2E-RESIZE]"
         print "description = \"e2e: fixed shares on the container and the pod, a pod-written burst (sc_resize)\""
         print "pod_cpu_weight_formula = \"linear\""
         print "[classes.E2E-RESIZE.container]"
         print "cpu_shares = 2"; print "cpu_burst_us = { fact = \"volcano.cpu_burst_us\" }"
         print "[classes.E2E-RESIZE.pod]"; print "cpu_shares = 4"
         print ""; print "[classes.E2E-PROC]"
         print "description = \"e2e: the process knobs (NRI io_priority, scheduler, memory_policy)\""
         print "[classes.E2E-PROC.container]"
         print "sched_policy = \"idle\""; print "io_class = \"idle\""
         print "memory_policy = \"bind\""; print "memory_policy_nodes = \"0\"" }' \
    "$TEST_POLICY" > "$1"
  # E2E_EVALUATOR_EVENTS=N: the same scenarios with resident evaluators (settings.evaluator_events,
  # issue #34; docs/e2e.md), which must give the same results as one process per event.
  if [ -n "${E2E_EVALUATOR_EVENTS:-}" ]; then
    grep -q '^\[settings\]$' "$1" || { log "no [settings] in $TEST_POLICY for E2E_EVALUATOR_EVENTS"; return 1; }
    sed -i "s/^\[settings\]\$/[settings]\nevaluator_events = ${E2E_EVALUATOR_EVENTS}/" "$1"
    log "test policy: evaluator_events = ${E2E_EVALUATOR_EVENTS}"
  fi
}
# A fail-closed policy: every container is class FC (fail = "closed") whose only knob is a raw
# file write the kernel rejects with EINVAL (v1: cpu.cfs_period_us must be >= 1000 us; v2:
# cpu.weight must be 1..10000); sandboxes get a class without knobs, so RunPodSandbox succeeds.
# Schema: man/nri-qos.toml.5 (version 1).
if [ "$LAYOUT" = v2 ]; then FAIL_KNOB_FILE=cpu.weight FAIL_KNOB_VALUE=0
else FAIL_KNOB_FILE=cpu.cfs_period_us FAIL_KNOB_VALUE=1; fi
write_fail_closed_policy() { # DEST
  if [ -n "${E2E_FAIL_POLICY:-}" ]; then install -D -m 0644 "$E2E_FAIL_POLICY" "$1"; return; fi
  mkdir -p "$(dirname "$1")"
  cat > "$1" <<TOML
# e2e (tests/e2e/lib.sh): containers fail closed on a knob the kernel rejects
version = 1

[settings]
default_class = "none"

[classes.none]
description = "sandboxes: nothing to set"

[classes.FC]
description = "fail-closed class with a broken raw knob"
fail = "closed"

[[classes.FC.container.raw]]
file = "$FAIL_KNOB_FILE"
value = "$FAIL_KNOB_VALUE"

[[rules]]
name = "containers-fail-closed"
class = "FC"
match = { kind = "container" }
TOML
}

# v0.1: list /opt/nri/bin/nri-qos in /etc/nri/conf.json with conf.policy = $1
# (containerd 1.6 and the adapter re-read it on every event: no restart needed).
set_v01_conf() {
  mkdir -p /etc/nri
  printf '{"version": "0.1", "plugins": [{"type": "nri-qos", "conf": {"policy": "%s"}}]}\n' "$1" > /etc/nri/conf.json
}

# ---------------------------------------------------------------------------------------------
# Scenarios. Each prints one PASS/FAIL line, named by its first argument; OUT names the pod's
# JSON record in $D/logs. OCI_CHECKS=1 additionally reads the runc bundle's config.json (native).
# Expected values are the spec of the test policy (tests/fixtures/policy/classic.toml):
#   BE: container cpu.shares 2, cpu.cfs_burst_us 0, oom_score_adj 1000; pod cgroup cpu.idle 0
#       (the bundled policy leaves cpu_idle off: the kernel refuses cpu.shares/cpu.weight writes
#       to an idle group, and kubelet writes them to the pod cgroup on resize)
#   LS: cpu.cfs_burst_us = 100 % of the CFS quota, memory.high = 90 % of the limit (v2 only);
#       cpu.shares, quota and memory limit as CRI asked
# The containers ask for cpu_shares 512, CFS quota 50000/period 100000 and 64 MiB, so that a
# hook that did nothing (or classified wrongly) fails every check.
# ---------------------------------------------------------------------------------------------
MIB=1048576
RES=(--cpu-shares 512 --cpu-quota 50000 --cpu-period 100000 --memory $((64 * MIB)))
# NRI 0.8+ runtimes (containerd 2.x) carry oom_score_adj in the adjustment: then config.json
# has it too (set by the suite: OCI_OOM=1)
OCI_OOM=${OCI_OOM:-}

start_or_fail() { # NAME OUT QOS [criclient options]: run the pod; FAIL + cleanup when CRI failed
  local name=$1 out=$2 qos=$3; shift 3
  run_pod "$out" "$out" "$(kube_parent "$qos")" "${RES[@]}" "$@" && return 0
  fail "$name" "CRI: $(first_error "$out")"; stop_pod "$out"; return 1
}

# the BE class's values on the pod of OUT (read back from the kernel)
expect_be() { # OUT
  expect_shape "$1"
  expect_knob "$1" ctr cpu.shares 2
  expect_knob "$1" ctr cpu.cfs_burst_us 0
  expect_oom "$1" 1000
  expect_knob "$1" pod cpu.idle 0
}
# the LS class's values for a container that asked for QUOTA (us) and MEM (bytes), shares 512
expect_ls() { # OUT QUOTA MEM
  expect_shape "$1"
  expect_knob "$1" ctr cpu.cfs_burst_us "$2"
  expect_knob "$1" ctr cpu.cfs_quota_us "$2"
  expect_knob "$1" ctr memory.limit_in_bytes "$3"
  [ "$LAYOUT" = v2 ] && expect_knob "$1" ctr memory.high $(($3 * 90 / 100))
  expect_knob "$1" ctr cpu.shares 512
}

# sc_be NAME OUT QOS [criclient options selecting BE]: a pod the policy must class BE.
sc_be() {
  local name=$1 out=$2 qos=$3; shift 3
  start_or_fail "$name" "$out" "$qos" "$@" || return
  MISMATCH=""
  expect_be "$out"
  if [ -n "${OCI_CHECKS:-}" ]; then
    expect_oci "$out" .linux.resources.cpu.shares 2
    # NRI 0.6 (containerd 1.7) has no oom_score_adj adjustment: the relay writes /proc itself
    [ -n "$OCI_OOM" ] && expect_oci "$out" .process.oomScoreAdj 1000
  fi
  stop_pod "$out"
  verdict "$name"
}

# sc_ls NAME OUT: burstable pod without any class label/annotation -> LS (kube fallback).
sc_ls() {
  local name=$1 out=$2
  start_or_fail "$name" "$out" burstable || return
  MISMATCH=""
  expect_ls "$out" 50000 $((64 * MIB))
  if [ -n "${OCI_CHECKS:-}" ]; then
    expect_oci "$out" .linux.resources.cpu.shares 512
    expect_oci "$out" .linux.resources.cpu.quota 50000
    expect_oci "$out" .linux.resources.memory.limit $((64 * MIB))
  fi
  stop_pod "$out"
  verdict "$name"
}

# sc_knobs NAME OUT: class E2E-KNOBS of the test policy (cgroup v2 only: io.weight,
# memory.high 75 %, cpu.max.burst 50 % of the quota).
sc_knobs() {
  local name=$1 out=$2
  [ "$LAYOUT" = v2 ] || { skip "$name" "cgroup v2 knobs (io.weight, memory.high): this host is cgroup v1"; return; }
  start_or_fail "$name" "$out" burstable --label e2e.nri-qos/class=knobs || return
  MISMATCH=""
  expect_shape "$out"
  expect_knob "$out" ctr blkio.weight 500
  expect_knob "$out" ctr memory.high $((64 * MIB * 75 / 100))
  expect_knob "$out" ctr cpu.cfs_burst_us 25000
  expect_knob "$out" ctr cpu.cfs_quota_us 50000
  expect_knob "$out" ctr cpu.cfs_period_us 100000
  expect_knob "$out" ctr memory.limit_in_bytes $((64 * MIB))
  stop_pod "$out"
  verdict "$name"
}

# sc_proc NAME (issue #31 item 5, native suites): the process knobs of E2E-PROC. containerd
# copies an NRI adjustment's io_priority (NRI >= 0.10), scheduler (>= 0.11) and memory_policy
# (>= 0.12) into the OCI spec (containerd/nri pkg/runtime-tools/generate Generator.Adjust), so
# the bundle's config.json must show process.ioPriority / process.scheduler / linux.memoryPolicy
# exactly where the runtime's NRI has the field; where it has not, the CreateContainer record
# must name the knob skipped with the reason (NRI version, and why nri-qos does not set it
# itself). Whether the kernel then shows them is runc's part: runc applies process.scheduler
# and process.ioPriority from 1.2.0 (libcontainer/init_linux.go, process.go) and
# linux.memoryPolicy from 1.4.0 (libcontainer/configs/memorypolicy.go); bookworm's runc 1.1.5
# ignores all three (Go's JSON decoder drops unknown fields), so with it the kernel must show
# the defaults (SCHED_OTHER, no I/O class) — asserted, so that the scenario notices a runc that
# applies them — and with runc >= 1.2 (E2E_RUNC) the applied values.
sc_proc() {
  local name=$1 out=proc pid rec sk runc_v chrt_o ion_o
  start_or_fail "$name" "$out" burstable --label e2e.nri-qos/class=proc || return
  MISMATCH=""
  cg_prime "$out"
  pid=$(ctr_pid "$out")
  rec=$(jq -c --arg id "$(j "$out" .ctr_id)" 'select(.id == $id and .event == "CreateContainer")' "$E2E_EVENT_LOG" 2>/dev/null | tail -1)
  [ -n "$rec" ] || rec='{}'
  sk=$(jq -r '.skipped // ""' <<<"$rec" 2>/dev/null)
  log "  $out: CreateContainer record skipped: ${sk:-none}"
  log "  $out: CreateContainer record runtime: $(jq -r '.runtime // "none"' <<<"$rec" 2>/dev/null)"
  local sched=SCHED_IDLE io=IOPRIO_CLASS_IDLE mpol=MPOL_BIND
  case $RT in
    2.3) ;;
    2.2) mpol=null ;;
    *) sched=null io=null mpol=null ;;
  esac
  expect_oci "$out" .process.scheduler.policy "$sched"
  expect_oci "$out" .process.ioPriority.class "$io"
  expect_oci "$out" .linux.memoryPolicy.mode "$mpol"
  [ "$mpol" = null ] || expect_oci "$out" .linux.memoryPolicy.nodes 0
  [ "$mpol" = null ] && { [[ $sk == *"memory_policy: containerd "*" which has no NRI memory_policy (NRI >= 0.12, containerd >= 2.3.0); no process can set another's memory policy"* ]] ||
    MISMATCH="${MISMATCH:+$MISMATCH; }the record does not say why memory_policy was skipped: ${sk:-no record}"; }
  [ "$sched" = null ] && { [[ $sk == *"sched_policy: containerd "*" which has no NRI scheduler (NRI >= 0.11, containerd >= 2.2.1); nri-qos does not call sched_setattr(2)"* ]] ||
    MISMATCH="${MISMATCH:+$MISMATCH; }the record does not say why sched_policy was skipped: ${sk:-no record}"; }
  [ "$io" = null ] && { [[ $sk == *"io_class: containerd "*" which has no NRI io_priority (NRI >= 0.10, containerd >= 2.2.0); nri-qos does not call ioprio_set(2)"* ]] ||
    MISMATCH="${MISMATCH:+$MISMATCH; }the record does not say why io_class was skipped: ${sk:-no record}"; }
  # the kernel's view of the container's process
  runc_v=$("${E2E_RUNC:-runc}" --version 2>/dev/null | sed -n 's/^runc version \([0-9.]*\).*/\1/p')
  chrt_o=$(chrt -p "$pid" 2>&1 | head -1); ion_o=$(ionice -p "$pid" 2>&1)
  log "  $out: pid $pid, runc ${runc_v:-?}: chrt -p: $chrt_o; ionice -p: $ion_o; $(grep Mems_allowed_list "/proc/$pid/status" 2>/dev/null); numa_maps: $(head -1 "/proc/$pid/numa_maps" 2>/dev/null)"
  if [ "$sched" != null ]; then
    if [ "$(printf '%s\n' "$runc_v" 1.2.0 | sort -V | head -1)" = 1.2.0 ]; then
      [[ $chrt_o == *SCHED_IDLE* ]] || MISMATCH="${MISMATCH:+$MISMATCH; }runc $runc_v: chrt -p $pid: $chrt_o (want SCHED_IDLE)"
      [[ $ion_o == idle* ]] || MISMATCH="${MISMATCH:+$MISMATCH; }runc $runc_v: ionice -p $pid: $ion_o (want idle)"
    else
      log "  $out: runc ${runc_v:-?} < 1.2.0 does not apply process.scheduler/ioPriority: the kernel keeps the defaults"
      [[ $chrt_o == *SCHED_OTHER* ]] || MISMATCH="${MISMATCH:+$MISMATCH; }runc $runc_v applied a scheduling policy it is not known to apply: $chrt_o"
    fi
  fi
  stop_pod "$out"
  verdict "$name"
}

# sc_koord_batch NAME: a Koordinator batch pod under the bundled policy (issue #10 §4): a
# BestEffort pod labelled koordinator.sh/qosClass=BE with the node.koordinator.sh/
# extended-resource-spec annotation koord-manager's webhook writes (batch-cpu request 500 /
# limit 1k, batch-memory limit 256Mi). koordlet's batchresource hook (koordinator-sh/koordinator
# @v1.8.0 pkg/koordlet/runtimehooks/hooks/batchresource/batch_resource.go) gives the container
# cpu.shares 512 (MilliCPUToShares(500)), CFS quota 100000 (1000m × 100000 / 1000) and 256 MiB,
# and the pod cgroup the sums over its containers (the same here). Read back from the kernel.
# The bundled policy trusts no pod-writable annotation (issue #19): with KOORD_TRUSTED=1 the
# policy in force declares node.koordinator.sh/extended-resource-spec in [guarded.annotations]
# (koordlet's full values); without it the batch limits (restrictions) apply and the batch
# cpu.shares above kubelet's 2 is refused, so the container keeps kubelet's 2.
sc_koord_batch() {
  local name=$1 out=koord-batch shares=2
  [ "${KOORD_TRUSTED:-}" = 1 ] && shares=512
  local spec='{"containers":{"koord-batch-c":{"limits":{"kubernetes.io/batch-cpu":"1k","kubernetes.io/batch-memory":"256Mi"},"requests":{"kubernetes.io/batch-cpu":"500","kubernetes.io/batch-memory":"256Mi"}}}}'
  run_pod "$out" "$out" "$(kube_parent besteffort)" --cpu-shares 2 --label koordinator.sh/qosClass=BE \
    --annotation "node.koordinator.sh/extended-resource-spec=$spec" || { fail "$name" "CRI: $(first_error "$out")"; stop_pod "$out"; return; }
  MISMATCH=""
  expect_shape "$out"
  expect_knob "$out" ctr cpu.cfs_quota_us 100000
  expect_knob "$out" pod cpu.cfs_quota_us 100000
  expect_knob "$out" ctr memory.limit_in_bytes $((256 * MIB))
  expect_knob "$out" pod memory.limit_in_bytes $((256 * MIB))
  expect_knob "$out" ctr cpu.shares "$shares"
  if [ -n "${OCI_CHECKS:-}" ]; then
    expect_oci "$out" .linux.resources.cpu.quota 100000
    expect_oci "$out" .linux.resources.memory.limit $((256 * MIB))
  fi
  stop_pod "$out"
  verdict "$name"
}

# declare_koordinator IN OUT: the policy IN with its commented [guarded.annotations] line for
# node.koordinator.sh/extended-resource-spec enabled (what an operator whose koord-manager owns
# the annotation writes).
declare_koordinator() {
  sed 's|^# "node.koordinator.sh/extended-resource-spec" = |"node.koordinator.sh/extended-resource-spec" = |' "$1" > "$2"
  grep -q '^"node.koordinator.sh/extended-resource-spec"' "$2" || log "  declare_koordinator: no Koordinator [guarded] line in $1"
}

# sc_not_passed NAME (issue #25 §1; NRI v0.1 on containerd < 1.7, host only): containerd
# restarted without the pod_annotations allow-list, as Debian's package leaves it, so no pod
# annotation reaches the hook. `nri-qos register` records that in the hook's state dir; a
# Koordinator batch pod (label koordinator.sh/qosClass=BE plus the extended-resource-spec
# annotation, which it does carry) under the bundled policy must then get a record saying the
# annotation is "not passed by containerd ...: add ... to pod_annotations" (level warn,
# not_passed=...) — not "no ... annotation" — and the metric counts it. Its CFS quota stays
# kubelet's (-1): the batch limit never reached the hook. containerd gets its allow-list back
# afterwards, and the record is refreshed.
sc_not_passed() {
  local name=$1 out=np-batch line q prom
  local spec='{"containers":{"np-batch-c":{"limits":{"kubernetes.io/batch-cpu":"1k","kubernetes.io/batch-memory":"256Mi"},"requests":{"kubernetes.io/batch-cpu":"500"}}}}'
  local reg=("$NRI_QOS_BIN" register --conf-json "$D/register-conf.json" --containerd-config "$D/config.toml" --mode v01 --policy "$BUNDLED_COPY")
  MISMATCH=""
  stop_containerd
  write_config_common "" ""
  start_containerd || { fail "$name" "containerd did not restart without pod_annotations"; return; }
  "${reg[@]}" >/dev/null 2>"$D/register.err"
  log "  register: $(grep -c WARNING "$D/register.err") warning line(s); record: $(cat /run/nri-qos/annotation-passlist 2>/dev/null | head -c 300)"
  grep -q 'WARNING: .*node.koordinator.sh/extended-resource-spec' "$D/register.err" || MISMATCH="register did not warn about the annotation"
  set_v01_conf "$BUNDLED_COPY"
  if run_pod "$out" "$out" "$(kube_parent besteffort)" --cpu-shares 2 --label koordinator.sh/qosClass=BE \
       --annotation "node.koordinator.sh/extended-resource-spec=$spec"; then
    line=$(grep "nri-qos: time=.* container=$out-c " "$D/logs/containerd.log" | tail -1)
    log "  record: ${line:0:900}"
    case $line in *"level=warn "*) ;; *) MISMATCH="${MISMATCH:+$MISMATCH; }record level is not warn" ;; esac
    case $line in *"not_passed=node.koordinator.sh/extended-resource-spec"*) ;; *) MISMATCH="${MISMATCH:+$MISMATCH; }no not_passed=... in the record" ;; esac
    case $line in *"not passed by containerd 1."*": add node.koordinator.sh/extended-resource-spec to pod_annotations"*) ;;
      *) MISMATCH="${MISMATCH:+$MISMATCH; }the record does not say containerd does not pass the annotation" ;; esac
    case $line in *"no node.koordinator.sh/extended-resource-spec annotation"*) MISMATCH="${MISMATCH:+$MISMATCH; }the record calls it absent" ;; esac
    q=$(read_knob ctr "$out" cpu.cfs_quota_us); log "  container CFS quota (the batch limit never arrived): $q"
    prom=$(grep -h '^nri_qos_annotation_not_passed_total' /var/lib/node_exporter/textfile_collector/nri_qos.prom /var/lib/prometheus/node-exporter/nri_qos.prom 2>/dev/null | head -1)
    log "  metrics: ${prom:-none}"
    case $prom in *'key="node.koordinator.sh/extended-resource-spec"'*) ;; *) MISMATCH="${MISMATCH:+$MISMATCH; }not counted in nri_qos_annotation_not_passed_total" ;; esac
    "$NRI_QOS_BIN" status 2>/dev/null | grep '^annotations: ' | head -1 | grep -q 'extended-resource-spec' ||
      MISMATCH="${MISMATCH:+$MISMATCH; }status does not name the annotation"
  else
    MISMATCH="${MISMATCH:+$MISMATCH; }CRI: $(first_error "$out")"
  fi
  stop_pod "$out"
  set_v01_conf "$D/policy/nri-qos.toml"
  # the allow-list back (the other scenarios pass annotations), and the record with it
  stop_containerd
  write_config_common ""
  start_containerd || MISMATCH="${MISMATCH:+$MISMATCH; }containerd did not restart with pod_annotations"
  "${reg[@]}" >/dev/null 2>>"$D/register.err"
  verdict "$name"
}

# sc_weight_order NAME (issue #24; cgroup v2, NRI v0.1): under the bundled policy
# (settings.cpu_weight_formula = "auto"), a Koordinator batch pod (BestEffort, CRI shares 2,
# batch-cpu request 250 -> koordlet's cpu.shares 256, written by nri-qos) and a burstable pod
# without a colocation class (CRI shares 512, converted by runc itself) end with container
# weights in the order of their shares — and the batch weight is the value runc's own formula
# gives for 256: the formula the burstable pod's weight shows (bookworm's runc 1.1.5: linear,
# 10 < 20; runc >= 1.3.2: log-quadratic, 35 < 59).
sc_weight_order() {
  local name=$1 b=wo-batch u=wo-burst wb wu want lin lq
  local spec='{"containers":{"wo-batch-c":{"limits":{"kubernetes.io/batch-cpu":"1k"},"requests":{"kubernetes.io/batch-cpu":"250"}}}}'
  # The bundled policy with the operator's declaration that koord-manager owns the batch
  # annotation (the bundled policy trusts none: issue #19), so that koordlet's shares 256 apply.
  declare_koordinator "$BUNDLED_COPY" "$D/policy/bundled-koord.toml"
  set_v01_conf "$D/policy/bundled-koord.toml"
  run_pod "$b" "$b" "$(kube_parent besteffort)" --cpu-shares 2 --label koordinator.sh/qosClass=BE \
    --annotation "node.koordinator.sh/extended-resource-spec=$spec" || { fail "$name" "CRI: $(first_error "$b")"; stop_pod "$b"; set_v01_conf "$D/policy/nri-qos.toml"; return; }
  run_pod "$u" "$u" "$(kube_parent burstable)" --cpu-shares 512 || { fail "$name" "CRI: $(first_error "$u")"; stop_pod "$b"; stop_pod "$u"; set_v01_conf "$D/policy/nri-qos.toml"; return; }
  set_v01_conf "$D/policy/nri-qos.toml"
  wb=$(cat "$(cg_dir "$b" ctr)/cpu.weight" 2>/dev/null); wu=$(cat "$(cg_dir "$u" ctr)/cpu.weight" 2>/dev/null)
  lin=$((1 + ((512 - 2) * 9999) / 262142))
  case $wu in
    "$lin") want=$((1 + ((256 - 2) * 9999) / 262142)) ;;   # runc < 1.3.2: linear
    59) want=35 ;;                                         # runc >= 1.3.2: log-quadratic of 512 / 256
    *) want="?" ;;
  esac
  log "  $name: batch (shares 256) cpu.weight $wb, burstable (shares 512) cpu.weight $wu (runc wrote it); want batch $want;" \
      "runtime probe: $(cat /run/nri-qos/runc-formula 2>/dev/null || echo none)"
  MISMATCH=""
  [ "$want" != "?" ] || MISMATCH="burstable cpu.weight $wu is neither formula's value of 512"
  [ "$wb" = "$want" ] || MISMATCH="${MISMATCH:+$MISMATCH; }batch cpu.weight $wb want $want"
  [ -n "$wb" ] && [ -n "$wu" ] && [ "$wb" -lt "$wu" ] 2>/dev/null || MISMATCH="${MISMATCH:+$MISMATCH; }batch $wb not below burstable $wu"
  stop_pod "$b"; stop_pod "$u"
  verdict "$name"
}

# sc_fail_closed NAME POLICY: with the fail-closed policy active, CreateContainer or
# StartContainer must fail with nri-qos's message naming the broken knob's file.
sc_fail_closed() {
  local name=$1 pol=$2 msg
  if ! msg=$("$NRI_QOS_BIN" check "$pol" --cache-dir "$D/tmp/check-cache" 2>&1); then
    fail "$name" "test policy rejected by 'nri-qos check': $(echo "$msg" | head -1)"; return
  fi
  if run_pod fail-closed fail-closed "$(kube_parent burstable)" "${RES[@]}"; then
    fail "$name" "container started although the fail-closed class's knob cannot be applied"
    stop_pod fail-closed; return
  fi
  msg=$(first_error fail-closed)
  stop_pod fail-closed
  log "  fail-closed: $msg"
  case $msg in
    CreateContainer:*|StartContainer:*) ;;
    *) fail "$name" "wrong step failed: $msg"; return ;;
  esac
  if [[ $msg == *nri-qos* && $msg == *"$FAIL_KNOB_FILE"* ]]; then pass "$name"
  else fail "$name" "error does not name nri-qos and $FAIL_KNOB_FILE: $msg"; fi
}

# ---------------------------------------------------------------------------------------------
# Updates (native NRI): the kubelet changes a running container with CRI
# UpdateContainerResources — the static CPU manager sends the cpuset alone, an in-place pod
# resize sends shares/quota/period/memory. containerd calls the plugin's UpdateContainer before
# runc applies the result, then PostUpdateContainer. The class must stay in force after every
# update, and percentage knobs must follow the new limits. Each step is its own result line.
# ---------------------------------------------------------------------------------------------
# update_ctr OUT STEP [criclient update options]: the update; FAIL text in $UPDATE_ERR
update_ctr() {
  local out=$1 step=$2; shift 2
  local r rc=0
  r=$(cri update "$(j "$out" .ctr_id)" "$@" 2>&1) || rc=$?
  log "  $out: update $step ($*): $r"
  UPDATE_ERR=""
  [ $rc = 0 ] || UPDATE_ERR="UpdateContainerResources refused: $({ jq -r '.error // empty' <<<"$r" 2>/dev/null || echo "$r"; } | tr -s '\n' ' ')"
  return $rc
}
# The evaluator's event record (publish.hpp; the relay's default path unless E2E_EVENT_LOG):
# the last UpdateContainer record of the container of OUT must list WRITE (file=value) as applied.
E2E_EVENT_LOG=${E2E_EVENT_LOG:-/var/log/nri-qos/events.log}
want_burst_file() { if [ "$LAYOUT" = v2 ]; then echo cpu.max.burst; else echo cpu.cfs_burst_us; fi; }
expect_update_record() { # OUT WRITE
  local rec; rec=$(jq -c --arg id "$(j "$1" .ctr_id)" 'select(.id == $id and .event == "UpdateContainer")' "$E2E_EVENT_LOG" 2>/dev/null | tail -1)
  log "  $1: UpdateContainer record: ${rec:-none in $E2E_EVENT_LOG}"
  [ -n "$rec" ] && case " $(jq -r '.applied // ""' <<<"$rec") " in *" $2 "*) return 0 ;; esac
  MISMATCH="${MISMATCH:+$MISMATCH; }the UpdateContainer record in $E2E_EVENT_LOG does not list $2 as applied"
}
# cpuset the static CPU manager would pin to: the first CPU the pod's cgroup may use
first_cpu() {
  local f=/sys/fs/cgroup/cpuset.cpus.effective
  [ "$LAYOUT" = v1 ] && f=/sys/fs/cgroup/cpuset/cpuset.effective_cpus
  cut -d, -f1 "$f" 2>/dev/null | cut -d- -f1
}

# sc_update_be PREFIX: a BE pod (Koordinator label) through
#   PREFIX-cpuset: cpuset-only update -> cpuset applied; shares 2, burst 0, oom 1000, pod cpu.idle 0
#   PREFIX-resize: resize to shares 1024, quota 80000, 128 MiB -> quota and memory follow the
#                  resize; shares stay 2, burst 0, oom 1000, pod cpu.idle 0
sc_update_be() {
  local p=$1 out=upd-be cpu; cpu=$(first_cpu)
  start_or_fail "$p-cpuset" "$out" burstable --label koordinator.sh/qosClass=BE || { skip "$p-resize" "pod did not start"; return; }
  MISMATCH=""
  if update_ctr "$out" cpuset --cpuset-cpus "$cpu"; then
    expect_knob "$out" ctr cpuset.cpus "$cpu"
    expect_be "$out"
  else MISMATCH=$UPDATE_ERR; fi
  verdict "$p-cpuset"
  MISMATCH=""
  if update_ctr "$out" resize --cpu-shares 1024 --cpu-quota 80000 --cpu-period 100000 --memory $((128 * MIB)); then
    expect_knob "$out" ctr cpu.cfs_quota_us 80000
    expect_knob "$out" ctr memory.limit_in_bytes $((128 * MIB))
    expect_be "$out"
  else MISMATCH=$UPDATE_ERR; fi
  verdict "$p-resize"
  stop_pod "$out"
}

# sc_update_ls PREFIX: a burstable pod of the test class E2E-BURST (label
# e2e.nri-qos/class=burst: the LS values of expect_ls, independent of the bundled policy) through
#   PREFIX-up:     resize to quota 80000, 128 MiB -> burst 80000 (100 % of the new quota),
#                  memory.high 90 % of 128 MiB (v2)
#   PREFIX-down:   resize to quota 30000, 48 MiB -> the update succeeds (the kernel refuses a
#                  quota below the current burst, so nri-qos lowers the burst at UpdateContainer,
#                  before runc writes the quota), burst 30000, memory.high 90 % of 48 MiB (v2);
#                  the relay's event record lists that write
#   PREFIX-cpuset: cpuset-only update -> the class's ratios still hold for the limits the
#                  container has (containerd restores its spec after a refused update)
sc_update_ls() {
  local p=$1 out=upd-ls cpu q m; cpu=$(first_cpu)
  start_or_fail "$p-up" "$out" burstable --label e2e.nri-qos/class=burst ||
    { skip "$p-down" "pod did not start"; skip "$p-cpuset" "pod did not start"; return; }
  q=50000 m=$((64 * MIB))
  MISMATCH=""
  expect_ls "$out" $q $m
  [ -z "$MISMATCH" ] || MISMATCH="before the updates: $MISMATCH"
  if update_ctr "$out" up --cpu-shares 512 --cpu-quota 80000 --cpu-period 100000 --memory $((128 * MIB)); then
    q=80000 m=$((128 * MIB))
    expect_ls "$out" $q $m
  else MISMATCH=$UPDATE_ERR; fi
  verdict "$p-up"
  MISMATCH=""
  if update_ctr "$out" down --cpu-shares 512 --cpu-quota 30000 --cpu-period 100000 --memory $((48 * MIB)); then
    q=30000 m=$((48 * MIB))
    expect_ls "$out" $q $m
    expect_update_record "$out" "$(want_burst_file)=30000"
  else MISMATCH=$UPDATE_ERR; fi
  verdict "$p-down"
  MISMATCH=""
  if update_ctr "$out" cpuset --cpuset-cpus "$cpu"; then
    expect_knob "$out" ctr cpuset.cpus "$cpu"
    expect_ls "$out" $q $m
  else MISMATCH=$UPDATE_ERR; fi
  verdict "$p-cpuset"
  stop_pod "$out"
}

# ---- in-place pod resize as kubelet drives it (issue #31 §3) -------------------------------------
# kubelet's order (cri-api api.proto: UpdatePodSandboxResources "is called _after_ the Kubelet
# reconfigures the pod-level cgroups"): it writes the pod cgroup, calls UpdatePodSandboxResources
# with the pod's new totals, then UpdateContainerResources for each container. containerd v2.3
# relays the pod call to NRI as UpdatePodSandbox/PostUpdatePodSandbox (internal/cri/server/
# sandbox_update_resources.go, internal/nri/nri.go UpdatePodSandbox); v2.2.7 answers it
# UNIMPLEMENTED "not implemented" (internal/cri/instrument/instrumented_service.go at v2.2.7:
# errdefs.ErrNotImplemented) and sends NRI nothing, so there the pod cgroup keeps
# kubelet's values until the next pod event.
# kubelet_pod_write OUT SHARES QUOTA MEM: what kubelet writes to the pod cgroup (cgroupfs driver;
# v2: cpu.weight by the conversion want_knob uses, cpu.max, memory.max)
kubelet_pod_write() {
  local out=$1 sh=$2 q=$3 m=$4
  if [ "$LAYOUT" = v1 ]; then
    echo "$q" > "$(cg_dir "$out" pod cpu.cfs_quota_us)/cpu.cfs_quota_us" &&
    echo "$sh" > "$(cg_dir "$out" pod cpu.shares)/cpu.shares" &&
    echo "$m" > "$(cg_dir "$out" pod memory.limit_in_bytes)/memory.limit_in_bytes"
  else
    echo "$q 100000" > "$(cg_dir "$out" pod)/cpu.max" &&
    want_knob cpu.shares "$sh" > "$(cg_dir "$out" pod)/cpu.weight" &&
    echo "$m" > "$(cg_dir "$out" pod)/memory.max"
  fi
}
# resize_values OUT: the kernel's values the resize scenarios check, on one line
resize_values() {
  local k out=$1 line=""
  for k in cpu.shares cpu.cfs_quota_us memory.limit_in_bytes; do line+=" pod $k=$(read_knob pod "$out" $k)"; done
  for k in cpu.shares cpu.cfs_quota_us cpu.cfs_burst_us memory.limit_in_bytes; do line+=" ctr $k=$(read_knob ctr "$out" $k)"; done
  echo "${line# }"
}
# kubelet_resize OUT STEP SHARES QUOTA MEM: the pod cgroup, UpdatePodSandboxResources, then the
# container (the pod has one). Sets POD_UPDATE_ERR ("" = the runtime took the pod call) and
# UPDATE_ERR (the container call; returns 1 when that was refused).
kubelet_resize() {
  local out=$1 step=$2 sh=$3 q=$4 m=$5 r rc=0
  log "  $out: kernel before $step: $(resize_values "$out")"
  kubelet_pod_write "$out" "$sh" "$q" "$m" || { UPDATE_ERR="could not write the pod cgroup as kubelet"; return 1; }
  r=$(cri update-pod "$(j "$out" .pod_id)" --cpu-shares "$sh" --cpu-quota "$q" --cpu-period 100000 --memory "$m" 2>&1) || rc=$?
  log "  $out: UpdatePodSandboxResources $step: $r"
  POD_UPDATE_ERR=""
  [ $rc = 0 ] || POD_UPDATE_ERR=$({ jq -r '.error // empty' <<<"$r" 2>/dev/null || echo "$r"; } | tr -s '\n' ' ')
  update_ctr "$out" "$step" --cpu-shares "$sh" --cpu-quota "$q" --cpu-period 100000 --memory "$m" || return 1
  log "  $out: kernel after $step: $(resize_values "$out")"
}
# the last event-log record of ID and EVENT (one JSON line, "" = none)
last_record() { jq -c --arg id "$1" --arg ev "$2" 'select(.id == $id and .event == $ev)' "$E2E_EVENT_LOG" 2>/dev/null | tail -1; }

# sc_resize PREFIX: a pod of the test class E2E-RESIZE (container cpu.shares 2, burst from the
# pod's untrusted annotation volcano.sh/quota-burst-time = 70000 (rubik's reading: applied only
# within the quota; the trust rule: an untrusted burst never above the quota); pod cpu.shares 4),
# created with shares 512, quota 50000, 64 MiB, then resized twice as kubelet does:
#   PREFIX-pod:       resize 1 (pod 1024 shares / quota 60000 / 96 MiB): 2.3: containerd relays
#                     UpdatePodSandbox, nri-qos writes the pod's cpu.shares 4 over kubelet's 1024
#                     and records it (event log: UpdatePodSandbox, applied pod:cpu.shares=4); 2.2:
#                     the call is refused UNIMPLEMENTED, no record, kubelet's 1024 stays
#   PREFIX-no-lift:   after resize 1, the container: quota 60000 and 96 MiB as resized, shares
#                     still 2, burst still 0 (the pod asks 70000, above the new quota: a resize
#                     does not let it in)
#   PREFIX-recompute: resize 2 (quota 80000, 128 MiB): the burst recomputed from the new quota:
#                     70000 (within it now), shares 2; pod cpu.shares 4 again (2.3)
# On cgroup v2 (the node VM) the class converts its pod shares linearly (pod_cpu_weight_formula),
# so pod cpu.shares 4 is cpu.weight 1, the conversion expect_knob applies.
sc_resize() {
  local p=$1 out=resize m1=$((96 * MIB)) m2=$((128 * MIB)) rec want_pod
  start_or_fail "$p-pod" "$out" burstable --label e2e.nri-qos/class=resize --annotation volcano.sh/quota-burst-time=70000 ||
    { skip "$p-no-lift" "pod did not start"; skip "$p-recompute" "pod did not start"; return; }
  MISMATCH=""
  expect_knob "$out" ctr cpu.shares 2
  expect_knob "$out" ctr cpu.cfs_burst_us 0
  expect_knob "$out" pod cpu.shares 4
  [ -z "$MISMATCH" ] || MISMATCH="at start: $MISMATCH"
  if kubelet_resize "$out" resize-1 1024 60000 $m1; then
    if [ "$RT" = 2.2 ]; then
      # containerd v2.2.7: no NRI event; the pod cgroup keeps what kubelet wrote
      [[ $POD_UPDATE_ERR == *"not implemented"* ]] ||
        MISMATCH="${MISMATCH:+$MISMATCH; }UpdatePodSandboxResources: want containerd 2.2's UNIMPLEMENTED 'not implemented', got '${POD_UPDATE_ERR:-accepted}'"
      rec=$(last_record "$(j "$out" .pod_id)" UpdatePodSandbox)
      [ -z "$rec" ] || MISMATCH="${MISMATCH:+$MISMATCH; }an UpdatePodSandbox record on 2.2: $rec"
      want_pod=1024
    else
      [ -z "$POD_UPDATE_ERR" ] || MISMATCH="${MISMATCH:+$MISMATCH; }UpdatePodSandboxResources refused: $POD_UPDATE_ERR"
      rec=$(last_record "$(j "$out" .pod_id)" UpdatePodSandbox)
      log "  $out: UpdatePodSandbox record: ${rec:-none in $E2E_EVENT_LOG}"
      case " $(jq -r '.applied // ""' <<<"$rec" 2>/dev/null) " in
        *" pod:cpu.shares=4 "*|*" pod:cpu.weight=1 "*) ;;
        *) MISMATCH="${MISMATCH:+$MISMATCH; }the UpdatePodSandbox record does not list pod:cpu.shares=4 as applied: ${rec:-none}" ;;
      esac
      [ "$(jq -r '.class // .metadata.class // empty' <<<"$rec" 2>/dev/null)" = E2E-RESIZE ] ||
        MISMATCH="${MISMATCH:+$MISMATCH; }the UpdatePodSandbox record's class is not E2E-RESIZE"
      want_pod=4
    fi
    expect_knob "$out" pod cpu.shares $want_pod
    expect_knob "$out" pod cpu.cfs_quota_us 60000
  else MISMATCH="${MISMATCH:+$MISMATCH; }$UPDATE_ERR"; fi
  verdict "$p-pod"
  MISMATCH=""
  if [ -z "$UPDATE_ERR" ]; then
    expect_knob "$out" ctr cpu.cfs_quota_us 60000
    expect_knob "$out" ctr memory.limit_in_bytes $m1
    expect_knob "$out" ctr cpu.shares 2
    expect_knob "$out" ctr cpu.cfs_burst_us 0
  else MISMATCH=$UPDATE_ERR; fi
  verdict "$p-no-lift"
  MISMATCH=""
  if kubelet_resize "$out" resize-2 1024 80000 $m2; then
    expect_knob "$out" ctr cpu.cfs_quota_us 80000
    expect_knob "$out" ctr memory.limit_in_bytes $m2
    expect_knob "$out" ctr cpu.shares 2
    expect_knob "$out" ctr cpu.cfs_burst_us 70000
    [ "$RT" = 2.2 ] || expect_knob "$out" pod cpu.shares 4
  else MISMATCH=$UPDATE_ERR; fi
  verdict "$p-recompute"
  stop_pod "$out"
}

# sc_reconcile NAME: the one-shot model's known hole and its remedy (issue #11 §4). A BE container
# (cpu.shares 2 by nri-qos) gets a kubelet-style UpdateContainerResources carrying only a cpuset
# (what the static CPU manager sends); containerd 1.6 re-applies the OCI spec's resources without
# calling the v0.1 hook, putting cpu.shares back to the CRI value 512. `nri-qos reconcile` (state
# dir /run/nri-qos, the hook's default) must restore 2 and report the drift it fixed. Also checks
# that containerd's log carries the hook's record line for the container (v0.1 stderr).
# sc_daemon_reload NAME (issue #25 §2; systemd cgroup driver, cgroup v2, NRI v0.1): a BestEffort
# pod of class DR (a policy of its own: container cpu.weight 1, cpu.max 20000, memory.max 32 MiB;
# pod slice cpu.weight 1, cpu.max 30000, memory.max 48 MiB; runc registered weight-of-512, 50000
# and 64 MiB for the container and nothing for the slice). With the reconcile timer stopped,
# `systemctl daemon-reload` makes systemd re-apply the units' properties: the kernel must still
# hold nri-qos's values, which it set as unit properties (SetUnitProperties, runtime) before
# writing the files. Logs the values read before and after and what systemd shows.
sc_daemon_reload() {
  local name=$1 out=daemon-reload kind f k v unit
  [ "$LAYOUT" = v2 ] || { skip "$name" "cgroup v2 only"; return; }
  local pol=$D/policy/daemon-reload.toml
  cat > "$pol" <<'TOML'
# e2e (tests/e2e/lib.sh sc_daemon_reload): values runc did not register
version = 1
[settings]
default_class = "none"
[classes.none]
description = "everything else: nothing"
[classes.DR]
description = "e2e: values that must survive systemctl daemon-reload"
[classes.DR.container]
cpu_shares = 2
cpu_quota_us = 20000
memory_limit = "32Mi"
[classes.DR.pod]
cpu_shares = 2
cpu_quota_us = 30000
memory_limit = "48Mi"
[[rules]]
name = "e2e-daemon-reload"
class = "DR"
match.labels = { "e2e.nri-qos/class" = "daemon-reload" }
TOML
  set_v01_conf "$pol"
  # The node VM runs under TCG: on a loaded machine an event takes longer than the hook's own 1 s
  # deadline (then it answers fail-open before the knobs: nothing to test). This scenario tests
  # daemon-reload, not the deadline: the hook runs with --deadline-ms 0 here (a wrapper, removed
  # after the pod started).
  local hook=/opt/nri/bin/nri-qos
  mv "$hook" "$hook.under-test" && printf '#!/bin/sh\nexec %s "$@" --deadline-ms 0\n' "$hook.under-test" > "$hook" && chmod 0755 "$hook"
  run_pod "$out" "$out" "$(kube_parent besteffort)" "${RES[@]}" --label e2e.nri-qos/class=daemon-reload
  local rc=$?
  mv -f "$hook.under-test" "$hook"
  set_v01_conf "$D/policy/nri-qos.toml"
  [ $rc = 0 ] || { fail "$name" "CRI: $(first_error "$out")"; stop_pod "$out"; return; }
  systemctl stop nri-qos-reconcile.timer >/dev/null 2>&1 || true
  declare -A want=([ctr:cpu.weight]=1 [ctr:cpu.max]="20000 100000" [ctr:memory.max]=$((32 * MIB))
                   [pod:cpu.weight]=1 [pod:cpu.max]="30000 100000" [pod:memory.max]=$((48 * MIB)))
  declare -A before=()
  MISMATCH=""
  for k in ctr:cpu.weight ctr:cpu.max ctr:memory.max pod:cpu.weight pod:cpu.max pod:memory.max; do
    kind=${k%%:*} f=${k#*:}
    before[$k]=$(cat "$(cg_dir "$out" "$kind")/$f" 2>/dev/null || echo "<missing>")
    [ "${before[$k]}" = "${want[$k]}" ] || MISMATCH="${MISMATCH:+$MISMATCH; }before daemon-reload: $kind $f=${before[$k]} want ${want[$k]}"
  done
  for kind in ctr pod; do
    unit=$(basename "$(cg_dir "$out" "$kind")")
    log "  $name: systemctl show $unit: $(systemctl show -p CPUWeight -p CPUQuotaPerSecUSec -p CPUQuotaPeriodUSec -p MemoryMax "$unit" 2>&1 | tr '\n' ' ')"
  done
  # what the records say of the properties (event log: systemd), the events' durations, and the companion's own cost: one run on the container's scope, timed
  log "  $name: records: $(jq -c 'select(.event == "create") | {id: .id[0:12], duration_us, systemd}' \
      /var/log/nri-qos/events.log 2>/dev/null | tail -2 | tr '\n' ' ' | head -c 3000)"
  unit=$(basename "$(cg_dir "$out" ctr)")
  local t0=$EPOCHREALTIME
  v=$(printf '%s\tCPUWeight\tt\t1\n' "$unit" | /usr/libexec/nri-qos/nri-qos-systemd 2>&1)
  log "  $name: companion run by hand on $unit: '$v' in $(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f ms", (b - a) * 1000 }')"
  systemctl daemon-reload || MISMATCH="${MISMATCH:+$MISMATCH; }systemctl daemon-reload failed"
  sleep 2
  for k in ctr:cpu.weight ctr:cpu.max ctr:memory.max pod:cpu.weight pod:cpu.max pod:memory.max; do
    kind=${k%%:*} f=${k#*:}
    v=$(cat "$(cg_dir "$out" "$kind")/$f" 2>/dev/null || echo "<missing>")
    log "  $name: $kind $f before daemon-reload '${before[$k]}', after '$v' (nri-qos's: '${want[$k]}')"
    [ "$v" = "${want[$k]}" ] || MISMATCH="${MISMATCH:+$MISMATCH; }after daemon-reload: $kind $f=$v want ${want[$k]}"
  done
  stop_pod "$out"
  verdict "$name"
}

sc_reconcile() {
  local name=$1 out=reconcile cid got rec
  start_or_fail "$name" "$out" burstable --label koordinator.sh/qosClass=BE || return
  cid=$(j "$out" .ctr_id)
  MISMATCH=""
  expect_knob "$out" ctr cpu.shares 2
  [ -z "$MISMATCH" ] || { fail "$name" "before the update: $MISMATCH"; stop_pod "$out"; return; }
  grep -q "nri-qos: time=.* container=$out-c id=${cid:0:12} class=BE" "$D/logs/containerd.log" ||
    MISMATCH="no record line for the container in containerd's log"
  cri update "$cid" --cpuset-cpus 0 >&2 || { fail "$name" "UpdateContainerResources failed"; stop_pod "$out"; return; }
  got=$(read_knob ctr "$out" cpu.shares)
  log "  after UpdateContainerResources(cpuset only): cpu.shares = $got"
  if [ "$got" != "$(want_knob cpu.shares 512)" ]; then
    MISMATCH="${MISMATCH:+$MISMATCH; }containerd did not put cpu.shares back (got $got): the scenario tests nothing"
  fi
  rec=$("$NRI_QOS_BIN" reconcile 2>>"$D/logs/reconcile.err"); log "  reconcile: $(tr '\n' '|' <<<"$rec")"
  expect_knob "$out" ctr cpu.shares 2
  # reconcile names the kernel file it restored: cpu.shares (v1), cpu.weight (v2)
  case $rec in *"restored default/$out/$out-c (${cid:0:12}) class BE: cpu.shares "*"->"*|*"restored default/$out/$out-c (${cid:0:12}) class BE: cpu.weight "*"->"*) ;;
    *) MISMATCH="${MISMATCH:+$MISMATCH; }reconcile did not report the drift: $(head -c 300 <<<"$rec")" ;; esac
  # Quiet reconcile (issue #25 §4): the drift pass recorded the drift; a pass with nothing
  # drifted writes no event-log byte and no journal (stderr) line, and exits 0.
  grep -q "\"source\":\"reconcile\".*\"id\":\"$cid\".*\"drift\":\"cpu\.\(shares\|weight\) " "$E2E_EVENT_LOG" 2>/dev/null ||
    MISMATCH="${MISMATCH:+$MISMATCH; }no reconcile drift record for the container in $E2E_EVENT_LOG"
  local size0 size1 err rc=0
  size0=$(stat -c %s "$E2E_EVENT_LOG" 2>/dev/null || echo 0)
  rec=$("$NRI_QOS_BIN" reconcile 2>"$D/logs/reconcile2.err") || rc=$?
  size1=$(stat -c %s "$E2E_EVENT_LOG" 2>/dev/null || echo 0); err=$(grep -c '^nri-qos: time=' "$D/logs/reconcile2.err")
  log "  quiet pass: exit $rc, event log +$((size1 - size0)) bytes, $err record line(s): $(tr '\n' '|' <<<"$rec")"
  [ "$rc" = 0 ] && [ "$size1" = "$size0" ] && [ "$err" = 0 ] ||
    MISMATCH="${MISMATCH:+$MISMATCH; }a pass with nothing drifted: exit $rc, event log +$((size1 - size0)) bytes, $err record line(s)"
  case $rec in *" 0 restored (0 knobs)"*) ;; *) MISMATCH="${MISMATCH:+$MISMATCH; }second pass restored something: $(head -c 300 <<<"$rec")" ;; esac
  stop_pod "$out"
  verdict "$name"
}

# sc_discover NAME (issue #25 §3): a BE pod started while nri-qos is not registered keeps the
# runtime's values; after registering, `nri-qos reconcile --discover` over the runtime's CRI socket
# adopts it: the BE class's kernel values on the container and pod cgroups, and `status` marks
# the pod's sandbox and container "discovered".
sc_discover() {
  local name=$1 out=discover cid sid rec st cri missing
  # The CRI client is linked with Debian's gRPC: a node without its libraries (the node VM's image
  # has none unless the .deb's dependencies were staged) cannot run it — a SKIP with the reason.
  cri=$(dirname "$NRI_QOS_BIN")/nri-qos-cri
  [ -x "$cri" ] || cri=/usr/libexec/nri-qos/nri-qos-cri
  missing=$(ldd "$cri" 2>/dev/null | awk '/not found/ {print $1}' | tr '\n' ' ')
  if [ ! -x "$cri" ] || [ -n "$missing" ]; then
    skip "$name" "the CRI client $cri cannot run here (missing: ${missing:-the binary}; install the .deb's dependencies)"; return
  fi
  printf '{"version": "0.1", "plugins": []}\n' > /etc/nri/conf.json   # not registered
  start_or_fail "$name" "$out" burstable --label koordinator.sh/qosClass=BE || { set_v01_conf "$D/policy/nri-qos.toml"; return; }
  set_v01_conf "$D/policy/nri-qos.toml"
  cid=$(j "$out" .ctr_id); sid=$(j "$out" .pod_id)
  MISMATCH=""
  local before; before=$(read_knob ctr "$out" cpu.shares)
  log "  before discovery: container cpu.shares = $before"
  [ "$before" = "$(want_knob cpu.shares 512)" ] || MISMATCH="the pod was adjusted before discovery (cpu.shares $before): the scenario tests nothing"
  rec=$("$NRI_QOS_BIN" reconcile --discover --cri-socket "$D/containerd.sock" 2>>"$D/logs/discover.err"); local rc=$?
  log "  reconcile --discover (exit $rc): $(tr '\n' '|' <<<"$rec")"
  [ "$rc" = 0 ] || MISMATCH="${MISMATCH:+$MISMATCH; }reconcile --discover exited $rc"
  case $rec in *"adopted  default/$out/$out-c (${cid:0:12}) class BE"*) ;;
    *) MISMATCH="${MISMATCH:+$MISMATCH; }no adopted line for the container: $(head -c 400 <<<"$rec")" ;; esac
  expect_be "$out"
  st=$("$NRI_QOS_BIN" status --format json 2>/dev/null)
  local origins; origins=$(jq -r --arg c "$cid" --arg s "$sid" '[.entries[] | select(.id == $c or .id == $s) | "\(.sandbox) \(.origin)"] | sort | join(",")' <<<"$st")
  log "  status: $origins"
  [ "$origins" = "false discovered,true discovered" ] || MISMATCH="${MISMATCH:+$MISMATCH; }status origin: '$origins'"
  stop_pod "$out"
  verdict "$name"
}

# ---------------------------------------------------------------------------------------------
# The project's .deb over its life on a node (node VM only: systemd as PID 1, so that its units,
# the postinst's daemon-reload and the reconcile timer are real). Issue #25's points in the order
# an operator meets them, then issue #20's "deb upgraded" and the purge; each step is one result:
#   pkg-install           a batch pod already runs; containerd is configured as Debian ships it
#                         (no pod_annotations). `dpkg -i`: register warns that containerd passes
#                         none of the annotations the policy reads; the postinst adopts the pod
#                         (reconcile --discover through the CRI client, /usr/libexec/nri-qos/
#                         nri-qos-cri): its batch limits are in the kernel after the whole
#                         postinst, its daemon-reload included
#   pkg-not-passed        a batch pod created now: its record (the Result's metadata: skipped,
#                         not_passed) says "not passed by containerd ...: add ... to
#                         pod_annotations", never "no ... annotation"; the metric and `status`
#                         name it; no batch limit reached the kernel
#   pkg-pass-annotations  `nri-qos register --pass-annotations`, containerd restarted: the next
#                         batch pod gets its limits
#   pkg-reconcile         nri-qos-reconcile.service run once with nothing drifted: no record (event
#                         log, journal), its own nri_qos_reconcile_* metrics move, the runtime-event
#                         ones do not; a value drifted by hand, run again: exactly that correction
#                         recorded, the kernel value back
#   pkg-upgrade           `dpkg -i $E2E_DEB_UPGRADE` (the same build as version +e2eupgrade1,
#                         nodevm.sh stage_deb): the new version installed, its files on disk, the
#                         timer active, earlier values kept, a pod created afterwards classified
#   pkg-purge             `dpkg --purge`: no file, registration, unit or metrics file left
# Selecting any of them (E2E_ONLY) runs them all: each needs the ones before it. Afterwards the
# suite's own hook and containerd's configuration are put back.
# ---------------------------------------------------------------------------------------------
PKG_KEY=node.koordinator.sh/extended-resource-spec
PKG_PROM=/var/lib/prometheus/node-exporter/nri_qos.prom   # the .deb's metrics file (debian/rules)
PKG_NQ=/usr/sbin/nri-qos                                  # the packaged binary (link to /opt/nri/bin)
PKG_INSTALLED=""   # set by sc_pkg_install once dpkg -i succeeded
PKG_PODS=()

sc_pkg_lifecycle() { # PREFIX
  local p=$1
  if [ -z "${E2E_DEB:-}" ] || [ ! -f "${E2E_DEB:-}" ]; then skip "$p-pkg" "no .deb staged (make deb before the VM run)"; return; fi
  # The node before the install: no hook registered, no state of nri-qos; containerd as Debian's
  # package configures it (pod_annotations unset: containerd 1.6 passes no pod annotation to a
  # v0.1 hook), its CRI socket where the postinst looks for it.
  rm -rf /opt/nri/bin/nri-qos /etc/nri/conf.json /etc/nri/nri-qos.toml /run/nri-qos /var/lib/nri-qos /var/log/nri-qos
  cp -f "$D/config.toml" "$D/config.toml.suite"
  sed -i '/^[[:space:]]*pod_annotations[[:space:]]*=/d' "$D/config.toml"
  stop_containerd
  if ! start_containerd; then fail "$p-pkg-install" "containerd did not restart without pod_annotations"; pkg_restore; return; fi
  mkdir -p /run/containerd && ln -sfn "$D/containerd.sock" /run/containerd/containerd.sock
  sc_pkg_install "$p-pkg-install"
  sc_pkg_not_passed "$p-pkg-not-passed"
  sc_pkg_pass_annotations "$p-pkg-pass-annotations"
  sc_pkg_reconcile "$p-pkg-reconcile"
  sc_pkg_upgrade "$p-pkg-upgrade"
  sc_pkg_purge "$p-pkg-purge"
  pkg_restore
}

pkg_needs() { # NAME: false (and SKIP) when the package is not installed
  [ -n "$PKG_INSTALLED" ] && return 0
  skip "$1" "the package is not installed (pkg-install failed)"; return 1
}

# pkg_batch_pod OUT: a Koordinator batch pod as koord-manager makes it (sc_koord_batch):
# BestEffort, CRI shares 2, label koordinator.sh/qosClass=BE, the extended-resource-spec
# annotation for its container OUT-c (batch-cpu 500 / 1k, batch-memory 256Mi).
pkg_batch_pod() {
  local out=$1
  PKG_PODS+=("$out")
  run_pod "$out" "$out" "$(kube_parent besteffort)" --cpu-shares 2 --label koordinator.sh/qosClass=BE \
    --annotation "$PKG_KEY={\"containers\":{\"$out-c\":{\"limits\":{\"kubernetes.io/batch-cpu\":\"1k\",\"kubernetes.io/batch-memory\":\"256Mi\"},\"requests\":{\"kubernetes.io/batch-cpu\":\"500\",\"kubernetes.io/batch-memory\":\"256Mi\"}}}}" ||
    { MISMATCH="${MISMATCH:+$MISMATCH; }CRI: $(first_error "$out")"; return 1; }
  cg_prime "$out"
}
# The bundled policy's values for it (koordlet's batchresource hook): container and pod CFS
# quota 100000 and memory limit 256 MiB; the batch shares are refused while the annotation is not
# declared in [guarded.annotations] (issue #19), so the container keeps kubelet's 2 (weight 1).
expect_batch() { # OUT
  expect_knob "$1" ctr cpu.cfs_quota_us 100000
  expect_knob "$1" pod cpu.cfs_quota_us 100000
  expect_knob "$1" ctr memory.limit_in_bytes $((256 * MIB))
  expect_knob "$1" pod memory.limit_in_bytes $((256 * MIB))
  expect_knob "$1" ctr cpu.shares 2
}
pkg_kernel() { # OUT WHEN: one log line with the container's and the pod's values, as the kernel holds them
  local k d line=""
  for k in ctr pod; do
    d=$(cg_dir "$1" "$k")
    line="$line $k cpu.weight $(cat "$d/cpu.weight" 2>/dev/null), cpu.max '$(cat "$d/cpu.max" 2>/dev/null)', memory.max $(cat "$d/memory.max" 2>/dev/null);"
  done
  log "  $1 $2:$line"
}
pkg_metric() { # NAME: its value in the .deb's metrics file (summed over labels; 0 when absent)
  [ -f "$PKG_PROM" ] || { echo 0; return; }
  awk -v n="$1" '$1 == n || index($1, n "{") == 1 { s += $2 } END { printf "%d\n", s }' "$PKG_PROM"
}
pkg_record() { # ID EVENT: the last event-log record of that id and event (JSON, one line)
  jq -c --arg id "$1" --arg ev "$2" 'select(.id == $id and .event == $ev)' "$E2E_EVENT_LOG" 2>/dev/null | tail -1
}

sc_pkg_install() {
  local name=$1 out=pkg-pre rc cid st rec l=$D/logs/pkg-install.log
  MISMATCH=""
  pkg_batch_pod "$out" || { fail "$name" "$MISMATCH"; return; }
  cid=$(j "$out" .ctr_id)
  expect_shape "$out"
  pkg_kernel "$out" "before the install"
  [ "$(read_knob ctr "$out" cpu.cfs_quota_us)" = max ] || MISMATCH="the container had a CPU limit before the install: the scenario tests nothing"
  DEBIAN_FRONTEND=noninteractive dpkg -i "$E2E_DEB" > "$l" 2>&1; rc=$?
  log "  dpkg -i $(basename "$E2E_DEB") (exit $rc): $(tr '\n' '|' < "$l" | tail -c 3000)"
  if [ $rc = 0 ]; then PKG_INSTALLED=1; else MISMATCH="${MISMATCH:+$MISMATCH; }dpkg -i exited $rc"; fi
  # register's warning: the policy reads annotations containerd's (absent) allow-list drops
  grep -q '^nri-qos: WARNING: .*pod_annotations' "$l" && grep -q "^nri-qos: WARNING: .*$PKG_KEY" "$l" ||
    MISMATCH="${MISMATCH:+$MISMATCH; }no pod_annotations allow-list warning naming $PKG_KEY at install"
  grep -q '^nri-qos: discover: .* live in containerd' "$l" || MISMATCH="${MISMATCH:+$MISMATCH; }the postinst printed no discover line"
  # adopted: the batch limits, read after the whole postinst (its daemon-reload included)
  expect_batch "$out"
  pkg_kernel "$out" "after the install"
  # adopted through systemd too (what the postinst's daemon-reload, and every later one, re-applies)
  local k unit props
  for k in ctr pod; do
    unit=$(basename "$(cg_dir "$out" "$k")")
    props=$(systemctl show -p CPUQuotaPerSecUSec -p MemoryMax "$unit" | sort | tr '\n' ' ')
    log "  systemctl show $unit: $props"
    [ "$props" = "CPUQuotaPerSecUSec=1s MemoryMax=268435456 " ] || MISMATCH="${MISMATCH:+$MISMATCH; }$k unit properties after the adoption: $props"
  done
  st=$("$PKG_NQ" status --format json 2>/dev/null | jq -r --arg c "$cid" '.entries[] | select(.id == $c) | "\(.origin) \(.class)"')
  rec=$(pkg_record "$cid" discover)
  log "  status: container $st; record: ${rec:0:1200}"
  [ "$st" = "discovered KOORD-BE" ] || MISMATCH="${MISMATCH:+$MISMATCH; }status of the container: '$st' (want discovered KOORD-BE)"
  [ -n "$rec" ] || MISMATCH="${MISMATCH:+$MISMATCH; }no discover record for the container in $E2E_EVENT_LOG"
  [ "$(systemctl is-active nri-qos-reconcile.timer)" = active ] || MISMATCH="${MISMATCH:+$MISMATCH; }nri-qos-reconcile.timer is not active after the install"
  verdict "$name"
}

sc_pkg_not_passed() {
  local name=$1 out=pkg-np cid rec line prom st
  pkg_needs "$name" || return
  MISMATCH=""
  pkg_batch_pod "$out" || { fail "$name" "$MISMATCH"; return; }
  cid=$(j "$out" .ctr_id)
  rec=$(pkg_record "$cid" create)
  log "  record: ${rec:0:1500}"
  [ "$(jq -r .level <<<"$rec")" = warn ] || MISMATCH="the record's level is not warn"
  [ "$(jq -r .not_passed <<<"$rec")" = "$PKG_KEY" ] || MISMATCH="${MISMATCH:+$MISMATCH; }the record's not_passed is not $PKG_KEY"
  case $(jq -r '.skipped // ""' <<<"$rec") in
    *"not passed by containerd 1."*": add $PKG_KEY to pod_annotations"*) ;;
    *) MISMATCH="${MISMATCH:+$MISMATCH; }the record's skipped does not say containerd does not pass $PKG_KEY" ;;
  esac
  case $rec in *"no $PKG_KEY annotation"*) MISMATCH="${MISMATCH:+$MISMATCH; }the record calls the annotation absent" ;; esac
  line=$(grep "nri-qos: time=.* container=$out-c " "$D/logs/containerd.log" | tail -1)
  log "  containerd's log: ${line:0:600}"
  case $line in *"not_passed=$PKG_KEY"*) ;; *) MISMATCH="${MISMATCH:+$MISMATCH; }containerd's log has no record line with not_passed=$PKG_KEY" ;; esac
  # what the kernel holds: the batch limits never reached the hook
  expect_knob "$out" ctr cpu.cfs_quota_us max
  expect_knob "$out" ctr memory.limit_in_bytes max
  pkg_kernel "$out" "(annotation not passed)"
  prom=$(grep -F "nri_qos_annotation_not_passed_total{key=\"$PKG_KEY\"}" "$PKG_PROM" 2>/dev/null)
  st=$("$PKG_NQ" status 2>/dev/null | grep '^annotations: ')
  log "  metrics: ${prom:-none in $PKG_PROM}; status: ${st:0:400}"
  [ -n "$prom" ] || MISMATCH="${MISMATCH:+$MISMATCH; }not counted in nri_qos_annotation_not_passed_total"
  case $st in *"$PKG_KEY"*) ;; *) MISMATCH="${MISMATCH:+$MISMATCH; }status does not name $PKG_KEY" ;; esac
  verdict "$name"
}

sc_pkg_pass_annotations() {
  local name=$1 out=pkg-pass reg rc cid rec
  pkg_needs "$name" || return
  MISMATCH=""
  reg=$("$PKG_NQ" register --pass-annotations 2>&1); rc=$?
  log "  register --pass-annotations (exit $rc): $(tr '\n' '|' <<<"$reg" | head -c 2000)"
  log "  containerd's config now: $(grep -m1 'pod_annotations' "$D/config.toml")"
  [ $rc = 0 ] || MISMATCH="register --pass-annotations exited $rc"
  grep -q "^[[:space:]]*pod_annotations = \[.*\"$PKG_KEY\"" "$D/config.toml" || MISMATCH="${MISMATCH:+$MISMATCH; }$PKG_KEY not added to pod_annotations in $D/config.toml"
  local bak; bak=$(grep -o 'backup: [^)]*' <<<"$reg" | head -1); bak=${bak#backup: }
  [ -n "$bak" ] && [ -f "$bak" ] || MISMATCH="${MISMATCH:+$MISMATCH; }no backup of containerd's config named or found ('$bak')"
  # the operator restarts containerd (pods keep running)
  stop_containerd
  start_containerd || { fail "$name" "containerd did not restart with the new allow-list"; return; }
  pkg_batch_pod "$out" || { fail "$name" "$MISMATCH"; return; }
  cid=$(j "$out" .ctr_id)
  expect_batch "$out"
  pkg_kernel "$out" "(annotation passed)"
  rec=$(pkg_record "$cid" create)
  log "  record: ${rec:0:1200}"
  [ "$(jq -r '"\(.class) \(.not_passed // "")"' <<<"$rec")" = "KOORD-BE " ] || MISMATCH="${MISMATCH:+$MISMATCH; }record: class/not_passed not 'KOORD-BE' and none"
  verdict "$name"
}

sc_pkg_reconcile() {
  local name=$1 out=pkg-pass cid d n0 n1 n2 k v inv new _
  pkg_needs "$name" || return
  cid=$(j "$out" '.ctr_id // empty')
  [ -n "$cid" ] || { skip "$name" "no pod of pkg-pass-annotations to drift"; return; }
  MISMATCH=""
  systemctl stop nri-qos-reconcile.timer
  for _ in $(seq 1 60); do   # a pass the timer started finishes first (oneshot: activating)
    [ "$(systemctl show -p ActiveState --value nri-qos-reconcile.service)" = activating ] || break; sleep 1
  done
  declare -A m0=() m1=() m2=()
  local names=(nri_qos_reconcile_passes_total nri_qos_reconcile_containers_total nri_qos_reconcile_drift_found_total
               nri_qos_reconcile_corrected_total nri_qos_events_total nri_qos_last_event_timestamp_seconds)
  for k in "${names[@]}"; do m0[$k]=$(pkg_metric "$k"); done
  n0=$(wc -l < "$E2E_EVENT_LOG")
  # 1. nothing drifted: a quiet pass
  systemctl start nri-qos-reconcile.service || MISMATCH="systemctl start nri-qos-reconcile.service failed"
  inv=$(systemctl show -p InvocationID --value nri-qos-reconcile.service)
  for k in "${names[@]}"; do m1[$k]=$(pkg_metric "$k"); done
  n1=$(wc -l < "$E2E_EVENT_LOG")
  sleep 2   # the journal receives the unit's output asynchronously
  v=$(journalctl -q -o cat "_SYSTEMD_INVOCATION_ID=$inv" 2>/dev/null)
  log "  quiet pass ($(systemctl show -p Result --value nri-qos-reconcile.service)): event log $n0 -> $n1 lines; journal: $(tr '\n' '|' <<<"$v")"
  log "  metrics before/after: $(for k in "${names[@]}"; do printf '%s %s->%s; ' "${k#nri_qos_}" "${m0[$k]}" "${m1[$k]}"; done)"
  [ "$n1" = "$n0" ] || MISMATCH="${MISMATCH:+$MISMATCH; }the quiet pass wrote $((n1 - n0)) event-log record(s)"
  grep -q 'nri-qos: time=' <<<"$v" && MISMATCH="${MISMATCH:+$MISMATCH; }the quiet pass wrote a record line to the journal"
  [ "${m1[nri_qos_reconcile_passes_total]}" = $((m0[nri_qos_reconcile_passes_total] + 1)) ] || MISMATCH="${MISMATCH:+$MISMATCH; }nri_qos_reconcile_passes_total did not move by 1"
  [ "${m1[nri_qos_reconcile_containers_total]}" -gt "${m0[nri_qos_reconcile_containers_total]}" ] || MISMATCH="${MISMATCH:+$MISMATCH; }nri_qos_reconcile_containers_total did not move"
  for k in nri_qos_reconcile_drift_found_total nri_qos_events_total nri_qos_last_event_timestamp_seconds; do
    [ "${m1[$k]}" = "${m0[$k]}" ] || MISMATCH="${MISMATCH:+$MISMATCH; }the quiet pass moved $k"
  done
  # 2. a value drifted by hand (the container's CFS quota lifted): exactly that correction
  d=$(cg_dir "$out" ctr)
  echo "max 100000" > "$d/cpu.max"
  log "  drifted by hand: $out ctr cpu.max '$(cat "$d/cpu.max")'"
  systemctl start nri-qos-reconcile.service || MISMATCH="${MISMATCH:+$MISMATCH; }systemctl start nri-qos-reconcile.service failed"
  inv=$(systemctl show -p InvocationID --value nri-qos-reconcile.service)
  for k in "${names[@]}"; do m2[$k]=$(pkg_metric "$k"); done
  n2=$(wc -l < "$E2E_EVENT_LOG")
  new=$(tail -n +$((n1 + 1)) "$E2E_EVENT_LOG")
  sleep 2
  v=$(journalctl -q -o cat "_SYSTEMD_INVOCATION_ID=$inv" 2>/dev/null)
  log "  correcting pass: event log $n1 -> $n2 lines: $(tr '\n' '|' <<<"$new" | head -c 1500); journal: $(tr '\n' '|' <<<"$v" | head -c 1500)"
  log "  metrics before/after: $(for k in "${names[@]}"; do printf '%s %s->%s; ' "${k#nri_qos_}" "${m1[$k]}" "${m2[$k]}"; done)"
  [ "$n2" = $((n1 + 1)) ] || MISMATCH="${MISMATCH:+$MISMATCH; }the correcting pass wrote $((n2 - n1)) record(s), want 1"
  [ "$(jq -r '"\(.source) \(.id) \(.outcome)"' <<<"$new" 2>/dev/null)" = "reconcile $cid ok" ] || MISMATCH="${MISMATCH:+$MISMATCH; }the new record is not reconcile's for $out's container"
  case $(jq -r '.drift // ""' <<<"$new" 2>/dev/null) in "cpu.max max 100000->"*) ;; *) MISMATCH="${MISMATCH:+$MISMATCH; }the record's drift is not the cpu.max correction" ;; esac
  # set through systemd too, so that the next daemon-reload keeps the correction
  case $(jq -r '.systemd // ""' <<<"$new" 2>/dev/null) in "applied: cpu.max"*) ;; *) MISMATCH="${MISMATCH:+$MISMATCH; }the correction was not set as a unit property (record systemd: '$(jq -r '.systemd // ""' <<<"$new" 2>/dev/null)')" ;; esac
  [ "$(grep -c 'nri-qos: time=' <<<"$v")" = 1 ] || MISMATCH="${MISMATCH:+$MISMATCH; }the correcting pass's journal has not exactly one record line"
  v=$(cat "$d/cpu.max")
  log "  after the pass: $out ctr cpu.max '$v'"
  [ "$v" = "100000 100000" ] || MISMATCH="${MISMATCH:+$MISMATCH; }cpu.max '$v' after the pass, want '100000 100000'"
  [ "${m2[nri_qos_reconcile_drift_found_total]}" -gt "${m1[nri_qos_reconcile_drift_found_total]}" ] &&
    [ $((m2[nri_qos_reconcile_corrected_total] - m1[nri_qos_reconcile_corrected_total])) = $((m2[nri_qos_reconcile_drift_found_total] - m1[nri_qos_reconcile_drift_found_total])) ] ||
    MISMATCH="${MISMATCH:+$MISMATCH; }drift_found/corrected metrics did not move together"
  [ "${m2[nri_qos_last_event_timestamp_seconds]}" = "${m1[nri_qos_last_event_timestamp_seconds]}" ] || MISMATCH="${MISMATCH:+$MISMATCH; }the correcting pass moved the last-event timestamp"
  systemctl start nri-qos-reconcile.timer
  verdict "$name"
}

sc_pkg_upgrade() {
  local name=$1 out=pkg-upg rc vnew got cid rec l=$D/logs/pkg-upgrade.log
  pkg_needs "$name" || return
  [ -f "${E2E_DEB_UPGRADE:-}" ] || { skip "$name" "no upgrade .deb staged (E2E_DEB_UPGRADE)"; return; }
  MISMATCH=""
  vnew=$(dpkg-deb -f "$E2E_DEB_UPGRADE" Version)
  log "  installed: $(dpkg-query -W -f='${Version}' nri-qos); upgrading to $vnew"
  DEBIAN_FRONTEND=noninteractive dpkg -i "$E2E_DEB_UPGRADE" > "$l" 2>&1; rc=$?
  log "  dpkg -i $(basename "$E2E_DEB_UPGRADE") (exit $rc): $(tr '\n' '|' < "$l" | tail -c 2000)"
  [ $rc = 0 ] || MISMATCH="dpkg -i of the upgrade exited $rc"
  got=$(dpkg-query -W -f='${Version} ${Status}' nri-qos 2>&1)
  log "  dpkg-query: $got; timer: $(systemctl is-active nri-qos-reconcile.timer) (since $(systemctl show -p ActiveEnterTimestamp --value nri-qos-reconcile.timer))"
  [ "$got" = "$vnew install ok installed" ] || MISMATCH="${MISMATCH:+$MISMATCH; }dpkg shows '$got'"
  [ "$(systemctl is-active nri-qos-reconcile.timer)" = active ] || MISMATCH="${MISMATCH:+$MISMATCH; }nri-qos-reconcile.timer not active after the upgrade"
  # the files on disk are the new package's: its md5sums match and its marker file is there
  got=$(dpkg --verify nri-qos 2>&1)
  log "  dpkg --verify: ${got:-clean}; marker: $(cat /usr/share/doc/nri-qos/e2e-upgrade 2>&1); $("$PKG_NQ" --version 2>&1 | head -1)"
  [ -z "$got" ] || MISMATCH="${MISMATCH:+$MISMATCH; }dpkg --verify: $got"
  [ "$(cat /usr/share/doc/nri-qos/e2e-upgrade 2>/dev/null)" = "$vnew" ] || MISMATCH="${MISMATCH:+$MISMATCH; }the new package's marker file is missing"
  jq -e '.plugins[] | select(.type == "nri-qos")' /etc/nri/conf.json >/dev/null 2>&1 || MISMATCH="${MISMATCH:+$MISMATCH; }nri-qos not registered in /etc/nri/conf.json after the upgrade"
  # the values set before survived the upgrade's daemon-reload
  [ -n "$(j pkg-pass '.ctr_id // empty')" ] && { expect_batch pkg-pass; pkg_kernel pkg-pass "after the upgrade"; }
  # the new version serves: a pod created now
  pkg_batch_pod "$out" || { fail "$name" "$MISMATCH"; return; }
  cid=$(j "$out" .ctr_id)
  expect_batch "$out"
  pkg_kernel "$out" "(created after the upgrade)"
  rec=$(pkg_record "$cid" create)
  log "  record: ${rec:0:1000}"
  [ "$(jq -r .class <<<"$rec")" = KOORD-BE ] || MISMATCH="${MISMATCH:+$MISMATCH; }no create record with class KOORD-BE for $out's container"
  verdict "$name"
}

sc_pkg_purge() {
  local name=$1 l=$D/logs/pkg-purge.log left="" p rc
  pkg_needs "$name" || return
  MISMATCH=""
  log "  before purge: $(ls -d /var/lib/nri-qos /var/log/nri-qos/* /run/nri-qos "$PKG_PROM" /etc/nri/* 2>/dev/null | tr '\n' ' ')"
  DEBIAN_FRONTEND=noninteractive dpkg --purge nri-qos > "$l" 2>&1; rc=$?
  log "  dpkg --purge (exit $rc): $(tr '\n' '|' < "$l" | tail -c 1500)"
  [ $rc = 0 ] || MISMATCH="dpkg --purge exited $rc"
  PKG_INSTALLED=""
  for p in /var/lib/nri-qos /var/log/nri-qos /run/nri-qos /etc/nri/nri-qos.toml /opt/nri/bin/nri-qos /usr/libexec/nri-qos \
           /usr/sbin/nri-qos /usr/share/doc/nri-qos /etc/logrotate.d/nri-qos /usr/share/man/man8/nri-qos.8.gz \
           /lib/systemd/system/nri-qos-reconcile.timer /lib/systemd/system/nri-qos-reconcile.service /lib/systemd/system/nri-qos-relay.service \
           /etc/systemd/system/timers.target.wants/nri-qos-reconcile.timer \
           "$PKG_PROM" "$(dirname "$PKG_PROM")/.nri_qos.prom.state" "$(dirname "$PKG_PROM")/.nri_qos.prom.pending"; do
    if [ -e "$p" ] || [ -L "$p" ]; then left="$left $p"; fi
  done
  # the metrics directory the hook made (this node has no prometheus-node-exporter to own it)
  for p in "$(dirname "$PKG_PROM")" /var/lib/prometheus; do
    if [ -d "$p" ] && ! dpkg-query -S "$p" >/dev/null 2>&1; then left="$left $p"; fi
  done
  for p in $(find /var/lib/systemd/deb-systemd-helper-enabled /var/lib/systemd/deb-systemd-helper-masked -name '*nri-qos*' 2>/dev/null); do left="$left $p"; done
  [ -f /etc/nri/conf.json ] && grep -q '"nri-qos"' /etc/nri/conf.json && left="$left /etc/nri/conf.json(nri-qos entry)"
  dpkg-query -W -f='${Status}' nri-qos 2>/dev/null | grep -q 'installed\|config-files' && left="$left (dpkg: $(dpkg-query -W -f='${Status}' nri-qos))"
  systemctl list-timers --all 2>/dev/null | grep -q nri-qos && left="$left (timer still listed)"
  log "  after purge, left:${left:- nothing}; /etc/nri: $(ls -A /etc/nri 2>/dev/null | tr '\n' ' ')"
  [ -z "$left" ] || MISMATCH="${MISMATCH:+$MISMATCH; }left after purge:$left"
  verdict "$name"
}

# The suite as it was: the pods stopped, containerd's own configuration back (restarted), its hook.
pkg_restore() {
  local out
  for out in "${PKG_PODS[@]}"; do stop_pod "$out"; done
  PKG_PODS=()
  rm -f /run/containerd/containerd.sock
  if [ -f "$D/config.toml.suite" ]; then
    mv -f "$D/config.toml.suite" "$D/config.toml"
    stop_containerd; start_containerd || log "containerd did not restart with the suite's configuration"
  fi
  install -D -m 0755 "$NRI_QOS_BIN" /opt/nri/bin/nri-qos
  if [ "$E2E_CGROUP_DRIVER" = systemd ] && [ -x "$(dirname "$NRI_QOS_BIN")/nri-qos-systemd" ]; then
    install -D -m 0755 "$(dirname "$NRI_QOS_BIN")/nri-qos-systemd" /usr/libexec/nri-qos/nri-qos-systemd
  fi
  set_v01_conf "$D/policy/nri-qos.toml"
}
