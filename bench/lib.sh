#!/bin/bash
# Helpers of the benchmark scripts (bench/run.sh, bench/native.sh, bench/podstart.sh). Source,
# don't run. Caller sets TOP (the source tree) and may define log.
#
# The Debian packages the benchmark needs are those of the e2e suites, fetched by their own
# recipe into their cache ($E2E_CACHE, default /var/cache/nri-qos-e2e): `tests/e2e/containerd17.sh
# prepare` (Debian trixie: containerd 1.7, the Go toolchain, golang-github-containerd-nri-dev and
# its Go library closure, extracted with dpkg -x; the system's apt is untouched; the mirror comes
# from the machine's apt sources) and `prepare 2.1` (containerd 2.1 from Debian $E2E_C21_SUITE,
# default sid). Nothing here talks to apt itself.
#
#   bench_trixie           trixie root ready (containerd, Go, containerd/nri); non-zero if not
#   bench_c21              print the containerd 2.1 binary, fetching it first; non-zero if none
#   bench_go_bin           trixie's go binary, or nothing
#   bench_go_build SRC OUT build the Go program in directory SRC offline into OUT, when OUT is
#                          missing or older than a .go file of SRC (GOPATH mode over Debian's
#                          /usr/share/gocode, GO111MODULE=off, GOPROXY=off, CGO_ENABLED=0)
#   bench_policy DEST DIR BIN  the native/pod-start bench policy (bench/native-policy.toml) into
#                          DEST, its records (settings metrics_file, event_log) in scratch
#                          directory DIR; validated with `BIN check`; non-zero if it does not
#   bench_resident_policy SRC DEST BIN
#                          SRC with `evaluator_events = $BENCH_EVALUATOR_EVENTS` (default 1000) added
#                          to its [settings] into DEST: the resident-evaluator mode of issue #34
#                          (one sandboxed evaluator serves up to N events); validated with `BIN check`
#   bench_seed_sinks BIN POLICY STATE_DIR
#                          one `BIN invoke` with STATE_DIR, so that its sinks memo names POLICY's
#                          record paths before a relay starts on that state dir (see below)
export E2E_CACHE=${E2E_CACHE:-/var/cache/nri-qos-e2e}
BENCH_C21_SUITE=${E2E_C21_SUITE:-sid}
declare -F log >/dev/null || log() { echo "[$(date +%T)] $*" >&2; }

bench_go_bin() {
  ls -d "$E2E_CACHE"/trixie-root/usr/lib/go-1.*/bin/go 2>/dev/null | sort -V | tail -1
}

bench_trixie_ready() {
  local tr=$E2E_CACHE/trixie-root
  [ -x "$tr/usr/bin/containerd" ] && [ -n "$(bench_go_bin)" ] &&
    [ -d "$tr/usr/share/gocode/src/github.com/containerd/nri/pkg/adaptation" ]
}

bench_trixie() {
  bench_trixie_ready && return 0
  [ "$(id -u)" = 0 ] || { log "fetching Debian trixie's packages needs root"; return 1; }
  log "fetching Debian trixie's containerd, Go and containerd/nri (tests/e2e/containerd17.sh prepare)"
  bash "$TOP/tests/e2e/containerd17.sh" prepare </dev/null >&2
  bench_trixie_ready
}

bench_c21() {
  local bin=$E2E_CACHE/$BENCH_C21_SUITE-root/usr/bin/containerd
  if [ ! -x "$bin" ] && [ "$(id -u)" = 0 ]; then
    log "fetching containerd 2.1 from Debian $BENCH_C21_SUITE (tests/e2e/containerd17.sh prepare 2.1)"
    bash "$TOP/tests/e2e/containerd17.sh" prepare 2.1 </dev/null >&2 || true
  fi
  [ -x "$bin" ] || return 1
  "$bin" --version 2>/dev/null | grep -q ' v\?2\.' || { log "$bin is not containerd 2.x"; return 1; }
  echo "$bin"
}

bench_go_build() {
  local src=$1 out=$2 gb
  [ -x "$out" ] && [ -z "$(find "$src" -name '*.go' -newer "$out")" ] && return 0
  gb=$(bench_go_bin)
  [ -n "$gb" ] || { log "no Go toolchain in $E2E_CACHE/trixie-root"; return 1; }
  log "building $src offline with $gb"
  mkdir -p "$(dirname "$out")" "$E2E_CACHE/gocache"
  (cd "$src" && env -i PATH="$(dirname "$gb"):/usr/bin:/bin" HOME="$E2E_CACHE" \
      GO111MODULE=off GOPATH="$E2E_CACHE/trixie-root/usr/share/gocode" GOCACHE="$E2E_CACHE/gocache" \
      GOTOOLCHAIN=local GOPROXY=off GOFLAGS= CGO_ENABLED=0 "$gb" build -o "$out.tmp" . >&2) || return 1
  mv -f "$out.tmp" "$out"
}

bench_policy() {
  local dest=$1 dir=$2 bin=$3
  mkdir -p "$dir" "$(dirname "$dest")"
  sed "/^\[settings\]\$/a metrics_file = \"$dir/nri_qos.prom\"\nevent_log = \"$dir/events.log\"" \
    "$TOP/bench/native-policy.toml" >"$dest"
  grep -q "^event_log = \"$dir/events.log\"" "$dest" || { log "bench_policy: no [settings] in bench/native-policy.toml"; return 1; }
  "$bin" check "$dest" >&2
}

bench_resident_policy() {
  local src=$1 dest=$2 bin=$3 n=${BENCH_EVALUATOR_EVENTS:-1000}
  sed "s/^\[settings\]\$/[settings]\nevaluator_events = $n/" "$src" >"$dest"
  grep -q "^evaluator_events = $n\$" "$dest" || { log "bench_resident_policy: no [settings] in $src"; return 1; }
  "$bin" check "$dest" >&2
}

# The relay's evaluation sandbox learns the directories it may write records into from the sinks
# memo in its state dir as it is when the relay starts (src/event/publish.cpp); paths that only the
# policy's [settings] names are not writable until the relay restarts (seen with nri-qos 0.1.0:
# "Permission denied" on every event). A node keeps its state dir across relay restarts; the bench
# starts on an empty one, so it writes the memo first with one one-shot invocation.
bench_seed_sinks() {
  local bin=$1 pol=$2 state=$3 cg
  cg=$(mktemp -d /tmp/nri-qos-bench-seed.XXXXXX)
  mkdir -p "$state"
  "$bin" invoke --policy "$pol" --state-dir "$state" --cgroup-root "$cg" --cgroup-layout v1 --cache-dir "" \
    <"$TOP/tests/fixtures/requests/containerd-1.6.20/container-create.json" >/dev/null 2>&1
  rm -rf "$cg"
  grep -q '^event_log=' "$state/sinks" 2>/dev/null || { log "bench_seed_sinks: no sinks memo in $state"; return 1; }
}
