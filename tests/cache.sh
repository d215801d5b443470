#!/bin/bash
# Compiled policy cache suite (issue 4): run through the built binary against scratch roots.
#  * the cache never changes behaviour: every fixture request (and policy-matching variants of
#    it), in lifecycle order, gives byte-identical stdout and exit status with no cache
#    (--cache-dir ""), on a cold cache (miss) and on a warm cache (hit), for invoke and explain;
#  * a hit does not read the TOML (the policy file is stat(2)ed, never opened — via strace);
#  * `nri-qos check POLICY --cache-dir D` prebuilds the entry; the directory is made 0700;
#  * corrupt, truncated, empty and foreign entries are ignored and rebuilt;
#  * a policy change (same size, same inode) invalidates; a different build (build-id) too;
#  * 32 parallel invocations on a cold cache all succeed with identical output, no temp files left;
#  * a cache directory others can write is neither read nor written.
# Prints PASS/FAIL/SKIP lines; exits 1 when anything failed.
# Env: NRI_QOS_BIN (default build/nri-qos).
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

[ -x "$BIN" ] || { fail "cache: binary $BIN missing (run make)"; finish; }
command -v python3 >/dev/null || { fail "cache: python3 missing (scripts/deps.sh test)"; finish; }
STRACE=$(command -v strace || true)

S=$(mktemp -d /tmp/nri-qos-cache.XXXXXX)
S=$(cd "$S" && pwd -P)
CLEANUP+=("rm -rf '$S'")
cp "$POLICY" "$S/policy.toml"
P=$S/policy.toml

# ---- requests: the captured fixtures in lifecycle order, plus variants hitting other rules --
mkdir -p "$S/req"
python3 - "$FIX/requests" "$S/req" <<'EOF'
import json, os, sys
src, dst = sys.argv[1], sys.argv[2]
order = ["sandbox-create", "container-create", "container-create-no-allowlist", "container-delete", "sandbox-delete"]
variants = {
    "": lambda r: r,
    "koord-be": lambda r: (r.setdefault("labels", {}).update({"koordinator.sh/qosClass": "BE"}), r)[1],
    "fuyao-hls": lambda r: (r.setdefault("spec", {}).setdefault("annotations", {}).update({"openfuyao.com/qos-level": "HLS"}), r)[1],
    "kube-system": lambda r: (r.setdefault("spec", {}).setdefault("annotations", {}).update({"io.kubernetes.cri.sandbox-namespace": "kube-system"}), r)[1],
    "clearcfs": lambda r: (r.setdefault("spec", {}).setdefault("annotations", {}).update({"qos.class": "ls"}), r)[1],
}
n = 0
for d in sorted(os.listdir(src)):
    files = [f[:-5] for f in os.listdir(os.path.join(src, d)) if f.endswith(".json")]
    files.sort(key=lambda f: (order.index(f) if f in order else len(order), f))
    for vname, fn in variants.items():
        seq = os.path.join(dst, d + ("@" + vname if vname else ""))
        os.makedirs(seq)
        for i, f in enumerate(files):
            with open(os.path.join(src, d, f + ".json")) as fh:
                r = json.load(fh)
            with open(os.path.join(seq, "%02d-%s.json" % (i, f)), "w") as fh:
                json.dump(fn(r), fh)
            n += 1
EOF
NREQ=$(find "$S/req" -name '*.json' | wc -l)
[ "$NREQ" -ge 20 ] && pass "cache: $NREQ fixture requests and variants" || fail "cache: only $NREQ fixture requests"

# ---- scratch cgroup v1 tree with the knob files of every request's cgroupsPath -------------
mkdir -p "$S/template/cg" "$S/template/proc" "$S/template/state"
python3 - "$S/req" "$S/template/cg" <<'EOF'
import json, os, sys
files = {"cpu": ["cpu.shares", "cpu.cfs_quota_us", "cpu.cfs_period_us", "cpu.cfs_burst_us", "cpu.qos_level", "cpu.idle"],
         "memory": ["memory.limit_in_bytes", "memory.high", "memory.qos_level", "memory.soft_limit_in_bytes"],
         "cpuset": ["cpuset.cpus", "cpuset.mems"], "pids": ["pids.max"], "blkio": ["blkio.weight"]}
for root, _, fs in os.walk(sys.argv[1]):
    for f in fs:
        cp = json.load(open(os.path.join(root, f))).get("spec", {}).get("cgroupsPath", "")
        if not cp.startswith("/"):
            continue
        parts = cp.strip("/").split("/")
        for rel in ("/".join(parts), "/".join(parts[:-1])):
            for ctl, names in files.items():
                d = os.path.join(sys.argv[2], ctl, rel)
                os.makedirs(d, exist_ok=True)
                for n in names:
                    open(os.path.join(d, n), "a").close()
EOF

# run_all MODE OUT CACHE_DIR: every request sequence on a fresh copy of the template; stdout
# and exit status of invoke, explain (text) and explain (json) appended to OUT.
run_all() {
  local mode=$1 out=$2 cache=$3 seq f r rc
  : >"$out"
  for seq in "$S"/req/*/; do
    r=$S/run-$mode
    rm -rf "$r"; cp -a "$S/template" "$r"
    for f in "$seq"*.json; do
      local args=(--policy "$P" --cgroup-root "$r/cg" --cgroup-layout v1 --proc-root "$r/proc" --state-dir "$r/state" --cache-dir "$cache")
      { echo "## $(basename "$seq")/$(basename "$f")"
        "$BIN" explain "${args[@]}" <"$f" 2>/dev/null; echo "rc=$?"
        "$BIN" explain --format json "${args[@]}" <"$f" 2>/dev/null; echo "rc=$?"
        "$BIN" invoke "${args[@]}" <"$f" 2>/dev/null; echo "rc=$?"
      } >>"$out"
    done
  done
}

C=$S/cache
run_all nocache "$S/out.nocache" ""
run_all cold "$S/out.cold" "$C"       # first request compiles the cache, the rest hit
run_all warm "$S/out.warm" "$C"
if cmp -s "$S/out.nocache" "$S/out.cold" && cmp -s "$S/out.nocache" "$S/out.warm"; then
  pass "cache: byte-identical stdout and exit status with and without the cache ($NREQ requests x invoke/explain/explain-json)"
else
  fail "cache: output differs with the cache: $(diff "$S/out.nocache" "$S/out.warm" | head -5 | tr '\n' ' ')"
fi
grep -q '"class":"BE"' "$S/out.nocache" && grep -q '"class":"LS"' "$S/out.nocache" && grep -q 'LS-unthrottled\|"HLS"' "$S/out.nocache" \
  && pass "cache: the requests exercise several classes" || fail "cache: the requests do not exercise several classes"

# ---- directory and entry ------------------------------------------------------------------
E=$(ls "$C"/policy-*.bin 2>/dev/null | head -1)
[ -n "$E" ] && [ "$(ls -A "$C" | wc -l)" = 1 ] && pass "cache: one entry, no temp files" || fail "cache: entries: $(ls -A "$C" | tr '\n' ' ')"
check "cache: directory mode" "$(stat -c %a "$C")" 700
check "cache: entry mode" "$(stat -c %a "$E")" 600
check "cache: entry magic" "$(head -c 8 "$E")" NRIQOSPC

CT=$(ls "$S"/req/containerd-1.6.20/*container-create.json | head -1)
R=$S/r1; cp -a "$S/template" "$R"
ARGS=(--cgroup-root "$R/cg" --cgroup-layout v1 --proc-root "$R/proc" --state-dir "$R/state")
ref() { "$BIN" invoke --policy "$1" "${ARGS[@]}" --cache-dir "" <"$CT" 2>/dev/null; }
inv() { "$BIN" invoke --policy "$1" "${ARGS[@]}" --cache-dir "$2" <"$CT" 2>/dev/null; }
# opens_policy POLICY CACHE: "yes" when the invocation opened the policy file (a miss)
opens_policy() {
  local log=$S/strace.log
  strace -f -e trace=open,openat,openat2 -o "$log" "$BIN" invoke --policy "$1" "${ARGS[@]}" --cache-dir "$2" <"$CT" >/dev/null 2>&1
  grep -F "\"$1\"" "$log" | grep -vq ENOENT && echo yes || echo no
}

if [ -n "$STRACE" ]; then
  check "cache: a hit does not read the TOML" "$(opens_policy "$P" "$C")" no
  check "cache: without cache the TOML is read" "$(opens_policy "$P" "")" yes
  C2=$S/sub/dir/cache2
  OUT=$("$BIN" check "$P" --cache-dir "$C2" --last-good-dir "$S/lg" 2>&1); RC=$?
  check "cache: check --cache-dir succeeds" "$RC" 0
  check_contains "cache: check output" "$OUT" "OK"
  check "cache: check --cache-dir saves the last good copy" "$(cat "$S"/lg/last-good-*.toml 2>/dev/null | cmp -s - "$P" && echo same)" same
  check "cache: check creates the directory 0700" "$(stat -c %a "$C2" 2>/dev/null)" 700
  check "cache: check prebuilds the entry (next invoke is a hit)" "$(opens_policy "$P" "$C2")" no
else
  skip "cache: strace missing: hit/miss not observed through system calls"
fi

# ---- corrupt, truncated, empty, foreign entries are ignored and rebuilt ----------------------
GOOD=$(ref "$P")
cp "$E" "$S/good.bin"
SIZE=$(stat -c %s "$E")
corrupt() { # corrupt NAME: damage the entry in one way
  case $1 in
    truncated) head -c $((SIZE / 2)) "$S/good.bin" >"$E" ;;
    empty) : >"$E" ;;
    foreign) printf '{"key":[1,2,3],"policy":{}}' >"$E" ;;
    random) head -c "$SIZE" /dev/urandom >"$E" ;;
    bitflip) cp "$S/good.bin" "$E"; python3 -c "
import sys; b=bytearray(open(sys.argv[1],'rb').read()); b[len(b)//2]^=0x10; open(sys.argv[1],'wb').write(b)" "$E" ;;
    header) cp "$S/good.bin" "$E"; printf 'XXXXXXXX' | dd of="$E" conv=notrunc status=none ;;
  esac
}
for kind in truncated empty foreign random bitflip header; do
  corrupt $kind
  BAD=$(cat "$E" | md5sum)
  OUT=$(inv "$P" "$C"); RC=$?
  if [ "$RC" = 0 ] && [ "$OUT" == "$GOOD" ] && [ "$(cat "$E" | md5sum)" != "$BAD" ] && [ "$(head -c 8 "$E")" = NRIQOSPC ]; then
    pass "cache: $kind entry ignored and rebuilt"
  else
    fail "cache: $kind entry: rc=$RC, output $( [ "$OUT" == "$GOOD" ] && echo same || echo differs), entry $( [ "$(cat "$E" | md5sum)" != "$BAD" ] && echo rewritten || echo kept)"
  fi
  [ -n "$STRACE" ] && check "cache: $kind entry: next invocation is a hit" "$(opens_policy "$P" "$C")" no
done

# ---- policy change invalidates (same inode, same size) --------------------------------------
P2=$S/p2.toml; cp "$P" "$P2"
inv "$P2" "$C" >/dev/null; inv "$P2" "$C" >/dev/null
BEFORE=$(inv "$P2" "$C")
INODE=$(stat -c %i "$P2")
SZ=$(stat -c %s "$P2")
python3 - "$P2" <<'EOF2'
import sys
p = sys.argv[1]
t = open(p).read().replace('name = "kube-burstable-guaranteed"', 'name = "kube-burstable-guaranteeX"', 1)
with open(p, "r+") as f:  # in place: same inode, same size
    f.write(t)
EOF2
AFTER=$(inv "$P2" "$C")
check "cache: policy change invalidates (output follows the new policy)" "$AFTER" "$(ref "$P2")"
[ "$AFTER" != "$BEFORE" ] && pass "cache: the policy change is visible" || fail "cache: the policy change is not visible"
check "cache: edited in place (same inode and size)" "$(stat -c %i:%s "$P2")" "$INODE:$SZ"

# ---- a different build (another GNU build-id) does not trust the entry -------------------------
if [ -n "$STRACE" ]; then
  cp "$BIN" "$S/nri-qos-other"
  if python3 - "$S/nri-qos-other" <<'EOF'
import re, subprocess, sys
path = sys.argv[1]
out = subprocess.run(["readelf", "-n", path], capture_output=True, text=True).stdout
m = re.search(r"Build ID: ([0-9a-f]+)", out)
if not m:
    sys.exit(1)
bid = bytes.fromhex(m.group(1))
data = bytearray(open(path, "rb").read())
i = data.find(bid)
if i < 0:
    sys.exit(1)
data[i] ^= 0xff
open(path, "wb").write(data)
EOF
  then
    inv "$P" "$C" >/dev/null
    check "cache: same build: hit" "$(opens_policy "$P" "$C")" no
    BIN_SAVE=$BIN; BIN=$S/nri-qos-other
    check "cache: another build: miss" "$(opens_policy "$P" "$C")" yes
    check "cache: another build: then hit" "$(opens_policy "$P" "$C")" no
    check "cache: another build: same output" "$(inv "$P" "$C")" "$GOOD"
    BIN=$BIN_SAVE
    check "cache: back to the first build: miss" "$(opens_policy "$P" "$C")" yes
  else
    skip "cache: readelf missing or no build-id: build change not tested"
  fi
fi

# ---- 32 parallel invocations on a cold cache -------------------------------------------------
# (a deadline of 60 s, not the default 1 s: 32 cold compiles at once on a loaded 2-CPU machine
# pass 1 s, and the deadline's answer is not what this block tests)
C3=$S/cold32
for i in $(seq 1 32); do
  ( "$BIN" invoke --policy "$P" "${ARGS[@]}" --cache-dir "$C3" --deadline-ms 60000 <"$CT" >"$S/par.$i.out" 2>"$S/par.$i.err"; echo $? >"$S/par.$i.rc" ) &
done
wait
BAD=0 WHY=""
for i in $(seq 1 32); do
  [ "$(cat "$S/par.$i.rc")" = 0 ] || { BAD=$((BAD + 1)); WHY=${WHY:-"#$i exit $(cat "$S/par.$i.rc"): $(head -c 300 "$S/par.$i.err")"}; }
  cmp -s "$S/par.$i.out" "$S/par.1.out" || { BAD=$((BAD + 1)); WHY=${WHY:-"#$i output differs from #1: $(head -c 300 "$S/par.$i.out")"}; }
done
[ "$BAD" = 0 ] || echo "cache: parallel: first difference: $WHY"
check "cache: 32 parallel cold invocations succeed with identical output" "$BAD" 0
check "cache: parallel: output equals the uncached one" "$(cat "$S/par.1.out")" "$GOOD"
check "cache: parallel: one entry, no temp files left" "$(ls -A "$C3" | wc -l)" 1
[ -n "$STRACE" ] && check "cache: parallel: the entry is valid (hit)" "$(opens_policy "$P" "$C3")" no

# ---- a directory others can write is not used -------------------------------------------------
C4=$S/open; mkdir -m 0777 "$C4"; chmod 0777 "$C4"
OUT=$(inv "$P" "$C4")
check "cache: world-writable directory: same output" "$OUT" "$GOOD"
check "cache: world-writable directory: nothing written" "$(ls -A "$C4" | wc -l)" 0
# check --cache-dir into it: the policy is valid (exit 0), and the missing precompile is said
ERR=$("$BIN" check "$P" --cache-dir "$C4" --last-good-dir "" 2>&1 >/dev/null); RC=$?
check "cache: check --cache-dir, unusable directory: exit 0 (the policy is valid)" "$RC" 0
check_contains "cache: check --cache-dir, unusable directory: the warning" "$ERR" "warning: not precompiled: the cache $C4 cannot be written"
ERR=$("$BIN" check "$P" --cache-dir "$S/fresh-check" --last-good-dir "" 2>&1 >/dev/null)
check "cache: check --cache-dir, usable directory: no warning" "$ERR" ""
ERR=$("$BIN" check "$P" --cache-dir "$S/fresh-check" --last-good-dir "" 2>&1 >/dev/null)
check "cache: check --cache-dir again (a hit): no warning" "$ERR" ""

finish
