#!/bin/bash
# Hostile-input suite (issue 3, "Hardening"): every bad input the hook has been tested with, run
# through the built binary against a scratch root. For every case it asserts
#   * stdout is exactly one JSON object with the contract's keys (invoke: plugin, version, error,
#     metadata; nri-eval: error, on_child_failure, metadata) and string-only metadata;
#   * the expected error text (in "error" when fail-closed, else metadata "error");
#   * no signal: exit status 0 or 1 (nri-eval: 0), within the time limit;
#   * nothing outside the scratch root was written: every successful write-ish system call
#     (open for writing/creating, mkdir, rename, unlink, link, symlink, truncate) recorded by
#     strace -f -y is beneath the scratch root (skipped, with a SKIP line, without strace);
#   * inside the scratch root, only the expected things changed: kernel files (cgroup, proc,
#     resctrl) only when the Result reports the write as applied — no partly applied container
#     goes unreported —, the state dir only by whole memos (no temp file left), symlink targets
#     ("outside" sentinels) never.
# Prints `PASS name` / `FAIL name: why` / `SKIP name: why`; exits 1 when anything failed.
# Env: NRI_QOS_BIN (default build/nri-qos), NRI_QOS_ELF (its ELF when NRI_QOS_BIN is a wrapper),
# HOSTILE_KEEP=1 keeps the scratch root.
set -u
TOP=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BIN=${NRI_QOS_BIN:-$TOP/build/nri-qos}
POLICY_SRC=$TOP/tests/fixtures/policy/classic.toml  # mechanics fixture (tests/lib.sh)
FAILED=0
pass() { echo "PASS $*"; }
fail() { echo "FAIL $*"; FAILED=1; }
skip() { echo "SKIP $*"; }
# QEMU_USER, DEADLINE_MS (tests/aarch64.sh runs this suite on the aarch64 binary under qemu-user)
. "$TOP/tests/emulation.sh"

[ -x "$BIN" ] || { fail "hostile: binary $BIN missing (run make)"; exit 1; }
command -v python3 >/dev/null || { fail "hostile: python3 missing (scripts/deps.sh test)"; exit 1; }
# A bad request is handled by throwing InputError. In a static binary that first throw must not
# sort every FDE of the binary (libgcc's frame registry: ~25 M instructions, issue #22): the
# binary carries the linker's sorted table (PT_GNU_EH_FRAME, Makefile: src/static-eh.specs).
# NRI_QOS_ELF: the ELF itself when NRI_QOS_BIN is a wrapper (tests/aarch64.sh: qemu-user)
if command -v readelf >/dev/null; then
  if readelf -lW "${NRI_QOS_ELF:-$BIN}" | grep -q 'GNU_EH_FRAME'; then pass "hostile: binary has PT_GNU_EH_FRAME (a throw costs no FDE sort)"
  else fail "hostile: binary has no PT_GNU_EH_FRAME: its first exception sorts every FDE (link with src/static-eh.specs)"; fi
else skip "hostile: readelf missing: PT_GNU_EH_FRAME not checked"; fi
STRACE=$(command -v strace || true)
[ -n "$STRACE" ] || skip "hostile: strace missing: writes outside the scratch root are checked only through the sentinel files"

S=$(mktemp -d /tmp/nri-qos-hostile.XXXXXX)
S=$(cd "$S" && pwd -P)
[ "${HOSTILE_KEEP:-0}" = 1 ] && echo "# scratch root: $S" || trap 'rm -rf "$S"' EXIT
W=$S/work                      # logs, snapshots, inputs: not part of the checked tree
mkdir -p "$W"

# ---- scratch tree --------------------------------------------------------------------------
SB_ID=97f836f797313b8c1bbda96922a46fc700e505e212b0350c0b7e3d951d01c666
CT_ID=f9159d083de20134b90778a5c6d8ee69ecb3b500f2ef34976b11b59554b7bc8e
POD_UID=0e2e0000-6edd-4127-830b-934cae53b469
POD_REL=kubepods/burstable/pod$POD_UID
SD_POD=kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod${POD_UID//-/_}.slice
CG=$S/root/cg PROC=$S/root/proc RC_ROOT=$S/root/resctrl STATE=$S/root/state CACHE=$S/root/cache
OUTSIDE=$S/outside POLICY=$S/root/policy.toml
mkdir -p "$CG" "$PROC" "$RC_ROOT/BE" "$STATE" "$CACHE" "$OUTSIDE"
: > "$RC_ROOT/BE/tasks"
V1_FILES="cpu.shares cpu.cfs_quota_us cpu.cfs_period_us cpu.cfs_burst_us cpu.idle cpu.qos_level
 memory.limit_in_bytes memory.soft_limit_in_bytes memory.high memory.qos_level pids.max blkio.weight cpuset.cpus cpuset.mems"
mk_cgroup() { # rel: a v1 cgroup in every controller, with every file nri-qos may write
  local c f
  for c in cpu memory pids blkio cpuset; do
    mkdir -p "$CG/$c/$1"
    for f in $V1_FILES; do case $f in "$c".*) : > "$CG/$c/$1/$f" ;; esac; done
  done
}
mk_cgroup "$POD_REL"; mk_cgroup "$POD_REL/$SB_ID"; mk_cgroup "$POD_REL/$CT_ID"
mk_cgroup "$SD_POD"; mk_cgroup "$SD_POD/cri-containerd-$CT_ID.scope"
mk_cgroup kubepods/besteffort/pod1; mk_cgroup kubepods/besteffort/pod1/c1
for p in 2470 2529 4242; do mkdir -p "$PROC/$p"; echo 0 > "$PROC/$p/oom_score_adj"; done
# Sentinels outside every root, and symlinks inside the roots that point at them.
for f in $V1_FILES oom_score_adj tasks x.json; do echo sentinel > "$OUTSIDE/$f"; done
mkdir -p "$OUTSIDE/c1"; for f in $V1_FILES; do echo sentinel > "$OUTSIDE/c1/$f"; done
for c in cpu memory pids blkio cpuset; do
  ln -s "$OUTSIDE" "$CG/$c/kubepods/burstable/evil"                        # directory link
  ln -s "$OUTSIDE" "$CG/$c/kubepods.slice/kubepods-evil.slice"             # systemd slice link
  ln -s "$OUTSIDE/$c.shares" "$CG/$c/kubepods/besteffort/pod1/c1/link.file" 2>/dev/null
  ln -s ../../../../../../outside "$CG/$c/kubepods/besteffort/up"           # relative link up
done
rm -f "$CG/cpu/kubepods/besteffort/pod1/c1/cpu.shares"; ln -s "$OUTSIDE/cpu.shares" "$CG/cpu/kubepods/besteffort/pod1/c1/cpu.shares"
ln -s "$OUTSIDE" "$PROC/666"                                              # /proc/<pid> is a link
ln -s "$OUTSIDE" "$RC_ROOT/evil"
ln -s "$OUTSIDE/x.json" "$STATE/trap.json"                                # memo name is a link
cp "$POLICY_SRC" "$POLICY"
mkfifo "$S/root/fifo.toml"

# ---- the checker (python: JSON, snapshots, strace log) --------------------------------------
cat > "$W/check.py" <<'PY'
import hashlib, json, os, re, stat, sys

def snap(root, skip):
    out = {}
    for dp, dns, fns in os.walk(root, followlinks=False):
        dns[:] = [d for d in dns if os.path.join(dp, d) not in skip]
        for n in dns + fns:
            p = os.path.join(dp, n)
            st = os.lstat(p)
            if stat.S_ISLNK(st.st_mode): v = "link:" + os.readlink(p)
            elif stat.S_ISDIR(st.st_mode): v = "dir:%o" % stat.S_IMODE(st.st_mode)
            elif stat.S_ISREG(st.st_mode):
                with open(p, "rb") as f: v = "file:%o:" % stat.S_IMODE(st.st_mode) + hashlib.sha1(f.read()).hexdigest()
            else: v = "other:%o" % st.st_mode
            out[os.path.relpath(p, root)] = v
    return out

WRITE_FLAGS = re.compile(r"O_WRONLY|O_RDWR|O_CREAT|O_TRUNC")
TOKEN = re.compile(r'(AT_FDCWD)|(-?\d+)<([^>]*)>|"((?:[^"\\]|\\.)*)"')
def strace_writes(log, cwd):
    """Absolute paths of successful write-ish calls in an `strace -f -y` log: each path string is
    resolved against the fd (shown by -y as N</path>) or AT_FDCWD right before it."""
    found = []
    for line in open(log, errors="replace"):
        m = re.match(r"^\d+\s+(\w+)\((.*)\)\s+=\s+(-?\d+)", line)
        if not m or int(m.group(3)) < 0: continue
        call, args = m.group(1), m.group(2)
        if call in ("open", "openat", "openat2", "creat"):
            if call != "creat" and not WRITE_FLAGS.search(args): continue
        elif call not in ("mkdir", "mkdirat", "unlink", "unlinkat", "rmdir", "truncate", "symlink", "symlinkat",
                          "rename", "renameat", "renameat2", "link", "linkat", "mknod", "mknodat"):
            continue
        base = cwd
        paths = []
        for t in TOKEN.finditer(args):
            if t.group(1): base = cwd
            elif t.group(3) is not None: base = t.group(3)
            else:
                s = t.group(4)
                paths.append(s if s.startswith("/") else os.path.join(base, s))
                base = cwd
        if call in ("open", "openat", "openat2", "creat", "mkdir", "mkdirat", "unlink", "unlinkat", "rmdir", "truncate", "mknod", "mknodat"):
            paths = paths[:1]
        elif call.startswith("symlink"):
            paths = paths[-1:]
        found += [(call, p) for p in paths]
    return found

def main():
    cmd = sys.argv[1]
    if cmd == "snap":
        root, out = sys.argv[2], sys.argv[3]
        json.dump(snap(root, {os.path.join(root, "work")}), open(out, "w"))
        return
    # verify: name mode rc elapsed limit stdout before after root expect [key=value...]
    name, mode, rc, elapsed, limit, stdout, before, after, root, expect = sys.argv[2:12]
    want = sys.argv[12:]
    errs = []
    rc, elapsed, limit = int(rc), float(elapsed), float(limit)
    if rc not in (0, 1) or (mode == "nri-eval" and rc != 0): errs.append("exit status %d" % rc)
    if elapsed > limit: errs.append("took %.2fs > %.1fs" % (elapsed, limit))
    raw = open(stdout, "rb").read()
    res = None
    try:
        text = raw.decode("utf-8")
        if not text.endswith("\n") or text.count("\n") != 1: errs.append("stdout is not exactly one line")
        res = json.loads(text)
    except Exception as e:
        errs.append("stdout is not one JSON object (%s): %r" % (e, raw[:200]))
    if res is not None:
        if not isinstance(res, dict): errs.append("stdout is not an object")
        else:
            keys = ["plugin", "version", "error", "metadata"] if mode == "invoke" else ["error", "on_child_failure", "metadata"]
            for k in keys:
                if k not in res: errs.append("missing key " + k)
            md = res.get("metadata", {})
            if not isinstance(md, dict) or any(not isinstance(v, str) for v in md.values()): errs.append("metadata not all strings")
            if mode == "invoke" and res.get("plugin") != "nri-qos": errs.append("plugin is not nri-qos")
            if mode == "invoke" and isinstance(res.get("error"), str) and (rc == 1) != (res["error"] != ""): errs.append("exit status does not match error")
            # a broken policy is reported in policy_error (and the last good / built-in policy applies)
            errtext = (res.get("error") or "") + " | " + str(md.get("error", "")) + " | " + str(md.get("policy_error", ""))
            if expect == "-":
                if res.get("error") or "error" in md or "policy_error" in md: errs.append("unexpected error: " + errtext[:300])
            elif expect != "*" and not any(e in errtext for e in expect.split("|")):
                errs.append("expected error containing %r, got %r" % (expect, errtext[:400]))
            for kv in want:
                k, _, v = kv.partition("=")
                if k.startswith("~"):
                    if v not in str(md.get(k[1:], "")): errs.append("metadata %s=%r lacks %r" % (k[1:], md.get(k[1:]), v))
                elif k.startswith("!"):
                    if k[1:] in md: errs.append("metadata has %s=%r" % (k[1:], md[k[1:]]))
                elif md.get(k) != v: errs.append("metadata %s=%r, want %r" % (k, md.get(k), v))
    # the scratch tree: only reported kernel writes, whole memos, the cache
    b, a = json.load(open(before)), json.load(open(after))
    applied = set()
    if isinstance(res, dict):
        for w in res.get("writes", []) or []:
            if w.get("status") == "applied":
                f = w.get("file", "")
                applied.add("root/proc/" + f[5:] if f.startswith("proc:") else "root/resctrl/" + f[8:] if f.startswith("resctrl:") else "root/cg/" + f)
    for p in sorted(set(a) | set(b)):
        if a.get(p) == b.get(p): continue
        if p.startswith("root/cache/"): continue
        if p.startswith("root/state/"):
            base = os.path.basename(p)
            if base.endswith(".tmp") and p in a: errs.append("temp file left in the state dir: " + p)
            elif p == "root/state/trap.json": errs.append("state symlink replaced/followed")
            continue
        if p.startswith(("root/cg/", "root/proc/", "root/resctrl/")) and p in applied and p in a and p in b: continue
        errs.append("unreported change in the scratch tree: %s (%s -> %s)" % (p, b.get(p), a.get(p)))
    log = os.environ.get("STRACE_LOG")
    if log and os.path.exists(log):
        for call, path in strace_writes(log, os.environ.get("HOOK_CWD", os.getcwd())):
            real = os.path.normpath(path)
            if not (real == root or real.startswith(root + "/")):
                errs.append("%s outside the scratch root: %s" % (call, path))
            elif real.startswith(os.path.join(root, "outside")):
                errs.append("%s into the outside sentinels: %s" % (call, path))
    if errs:
        print("FAIL %s: %s" % (name, "; ".join(errs)[:1500]))
        sys.exit(1)
    print("PASS " + name)

def serve():
    """The resident checker (one python start per suite, not four per case: on a machine where a
    python start costs ~0.4 s that was most of this suite's time). A request on stdin: NUL-ended
    fields HOOK_CWD, STRACE_LOG, the argument count, the arguments; the reply: main()'s output,
    then the line "__END__ <status>"."""
    inp = sys.stdin.buffer
    def field():
        b = bytearray()
        while True:
            c = inp.read(1)
            if not c: raise EOFError
            if c == b"\0": return b.decode("utf-8", "surrogateescape")
            b += c
    while True:
        try:
            cwd, slog = field(), field()
            args = [field() for _ in range(int(field()))]
        except EOFError:
            return
        os.environ["HOOK_CWD"], os.environ["STRACE_LOG"] = cwd, slog
        sys.argv = ["check.py"] + args
        try:
            main(); rc = 0
        except SystemExit as e:
            rc = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
        except Exception as e:
            print("check.py: %s: %r" % (args[:2], e), file=sys.stderr); rc = 1
        sys.stdout.write("\n__END__ %d\n" % rc)
        sys.stdout.flush()

if sys.argv[1] == "serve": serve()
else: main()
PY
# check ARGS...: one request to the resident checker (check.py serve, started once below); its
# output lines are printed, its status returned.
coproc CHECKER { exec python3 "$W/check.py" serve; }
check_py() {
  local line
  printf '%s\0%s\0%d\0' "${HOOK_CWD:-}" "${STRACE_LOG:-}" $# >&"${CHECKER[1]}"
  [ $# -gt 0 ] && printf '%s\0' "$@" >&"${CHECKER[1]}"
  while IFS= read -r line <&"${CHECKER[0]}"; do
    case $line in
      "__END__ "*) return "${line#__END__ }" ;;
      "") ;;
      *) printf '%s\n' "$line" ;;
    esac
  done
  echo "FAIL hostile: the resident checker (check.py serve) ended"; FAILED=1; return 1
}

# ---- running one case ----------------------------------------------------------------------
# hook MODE INPUT_FILE [extra args...]: run the binary under strace; sets OUT RC ELAPSED.
# Default options point every root into the scratch tree; --policy is the scratch copy of the
# bundled policy unless NOPOLICY=1 (then conf.policy / the default path decide).
hook() {
  local mode=$1 input=$2; shift 2
  local args=(--cgroup-root "$CG" --cgroup-layout v1 --proc-root "$PROC" --resctrl-root "$RC_ROOT"
              --state-dir "$STATE" --cache-dir "$CACHE" --metrics-file "$W/sinks/nri_qos.prom" --event-log "$W/sinks/events.log")
  [ "${NOPOLICY:-0}" = 1 ] || args+=(--policy "${POL:-$POLICY}")
  local pre=()
  [ -n "$STRACE" ] && pre=("$STRACE" -f -y -qq -o "$W/strace.log" -e trace=%file,%desc)
  rm -f "$W/strace.log"
  local t0 t1
  t0=${EPOCHREALTIME//[^0-9]/}
  (cd "$W" && exec timeout -s KILL "$(( ${TIMEOUT:-20} * TIME_SCALE ))" "${pre[@]}" "$BIN" "$mode" "${args[@]}" "$@" <"$input" >"$W/out" 2>"$W/err")
  RC=$?
  t1=${EPOCHREALTIME//[^0-9]/}
  printf -v ELAPSED '%d.%06d' $(((t1 - t0) / 1000000)) $(((t1 - t0) % 1000000))
}

# case NAME MODE INPUT EXPECT [metadata checks...] -- [extra hook args]
#   EXPECT: "-" no error; "*" any; else a substring of error / metadata.error ("A|B": either).
#   metadata checks: key=value (equal), ~key=value (contains), !key (absent).
run_case() {
  local name=$1 mode=$2 input=$3 expect=$4; shift 4
  local checks=() extra=()
  while [ $# -gt 0 ] && [ "$1" != -- ]; do checks+=("$1"); shift; done
  [ $# -gt 0 ] && shift && extra=("$@")
  check_py snap "$S" "$W/before.json"
  hook "$mode" "$input" "${extra[@]}"
  check_py snap "$S" "$W/after.json"
  if ! HOOK_CWD=$W STRACE_LOG=$W/strace.log check_py verify "$name" "$mode" "$RC" "$ELAPSED" "$(( ${LIMIT:-5} * TIME_SCALE ))" \
       "$W/out" "$W/before.json" "$W/after.json" "$S" "$expect" "${checks[@]}"; then
    FAILED=1
    echo "    stderr: $(head -c 300 "$W/err" | tr '\n' ' ')"
  fi
}

# ---- inputs --------------------------------------------------------------------------------
FIX=$TOP/tests/fixtures/requests/containerd-1.6.20
IN=$W/in; mkdir -p "$IN"
cp "$FIX/container-create.json" "$IN/ct.json"; cp "$FIX/sandbox-create.json" "$IN/sb.json"
# gen NAME PYTHON-EXPR: write an input computed from r (the container-create request, a dict)
# or, for raw bytes, from `raw` (its bytes); the expression's value is written (str/bytes/obj).
gen() {
  python3 - "$IN/ct.json" "$IN/$1" "$2" <<'PY'
import json, sys
raw = open(sys.argv[1], "rb").read()
r = json.loads(raw)
ns = {"r": r, "raw": raw, "json": json}
exec("def _f():\n    " + sys.argv[3].replace("\n", "\n    "), ns)
v = ns["_f"]()
if isinstance(v, str): v = v.encode()
elif not isinstance(v, bytes): v = json.dumps(v).encode()
open(sys.argv[2], "wb").write(v)
PY
}

: > "$IN/empty"
printf 'null' > "$IN/null"
printf '[]' > "$IN/array"
printf '[{"version":"0.1"}]' > "$IN/array2"
gen truncated 'return raw[:len(raw)//2]'
gen bad-utf8 'return raw.replace(b"\"app\":\"nri-e2e\"", b"\"app\":\"\xff\xfe\xc0\xaf\"")'
gen overlong-slash 'return raw.replace(b"\"cgroupsPath\":\"/kubepods", b"\"cgroupsPath\":\"/\xc0\xaekubepods")'
gen lone-surrogate 'return raw.replace(b"\"app\":\"nri-e2e\"", b"\"app\":\"\\ud800\"")'
gen raw-nul 'return raw.replace(b"\"app\":\"nri-e2e\"", b"\"app\":\"a\x00b\"")'
gen esc-nul-label 'r["labels"]["app"] = "a\x00b"; return r'
gen esc-nul-id 'r["id"] = "abc\x00def"; return r'
gen esc-nul-path 'r["spec"]["cgroupsPath"] += "\x00/../../x"; return r'
gen esc-nul-annkey 'r["spec"]["annotations"]["a\x00b"] = "x"; return r'
python3 -c "import sys; sys.stdout.write('['*200000 + ']'*200000)" > "$IN/deep-array"
python3 -c "import sys; sys.stdout.write('{\"a\":'*200000 + '1' + '}'*200000)" > "$IN/deep-object"
gen deep-in-conf 'return raw.replace(b"\"conf\":{", b"\"conf\":{\"x\":" + b"["*200000 + b"]"*200000 + b",", 1)'
python3 -c "import sys; sys.stdout.write('{\"version\":\"0.1\",\"state\":\"create\",\"id\":\"' + 'a'*(64<<20) + '\"}')" > "$IN/huge-string"
gen big-ann-value 'r["spec"]["annotations"]["big"] = "v" * (300 << 10); return r'
gen dup-key 'return raw.replace(b"\"state\":\"create\"", b"\"state\":\"create\",\"state\":\"delete\"")'
gen dup-key-nested 'return raw.replace(b"\"cgroupsPath\":", b"\"cgroupsPath\":\"/etc\",\"cgroupsPath\":")'
gen trailing 'return raw + b"{}"'
gen trailing-junk 'return raw + b"\x00garbage"'
gen trailing-ws 'return raw + b" \n\t\r\n"'
gen bom 'return b"\xef\xbb\xbf" + raw'
gen comment 'return b"/* c */" + raw'
gen pid-1e400 'return raw.replace(b"\"pid\":2529", b"\"pid\":1e400")'
gen pid-2e64 'return raw.replace(b"\"pid\":2529", b"\"pid\":18446744073709551616")'
gen pid-2e63 'return raw.replace(b"\"pid\":2529", b"\"pid\":9223372036854775808")'
gen pid-neg 'return raw.replace(b"\"pid\":2529", b"\"pid\":-1")'
gen pid-float 'return raw.replace(b"\"pid\":2529", b"\"pid\":2529.5")'
gen pid-big 'return raw.replace(b"\"pid\":2529", b"\"pid\":4194305")'
gen pid-str 'return raw.replace(b"\"pid\":2529", b"\"pid\":\"2529\"")'
gen shares-2e64 'r["spec"]["resources"]["cpu"]["shares"] = 18446744073709551615; return r'
gen mem-neg 'r["spec"]["resources"]["memory"]["limit"] = -2; return r'
gen mem-1e400 'return raw.replace(b"\"limit\":67108864", b"\"limit\":1e400")'
gen state-unknown 'r["state"] = "pwn"; return r'
gen state-case 'r["state"] = "CREATE"; return r'
gen version-unknown 'r["version"] = "0.2"; return r'
gen version-1 'r["version"] = "1.0.0"; return r'
gen version-missing 'del r["version"]; return r'
gen id-slash 'r["id"] = "../../../../etc"; return r'
gen id-slash2 'r["id"] = "a/b"; return r'
gen sandboxid-slash 'r["sandboxID"] = "../evil"; return r'
gen id-dotdot 'r["id"] = ".."; return r'
gen id-long 'r["id"] = "a" * 129; return r'
gen anns-200k 'r["spec"]["annotations"] = {"k%06d" % i: "v" for i in range(200000)}; return r'
gen labels-200k 'r["labels"] = {"k%06d" % i: "v" for i in range(200000)}; return r'
gen ann-key-long 'r["spec"]["annotations"]["k" * 400] = "v"; return r'
gen ann-key-newline 'r["spec"]["annotations"]["a\nb"] = "v"; return r'
# cgroupsPath tricks, cgroupfs form
cgp() { gen "$1" "r[\"spec\"][\"cgroupsPath\"] = $2; return r"; }
cgp cg-dotdot '"/kubepods/burstable/../../../outside/c1"'
cgp cg-dotdot-rel '"../outside/c1"'
cgp cg-dot '"/kubepods/./burstable/x"'
cgp cg-double-slash '"/kubepods//burstable/x"'
cgp cg-abs-etc '"/etc/passwd"'
cgp cg-newline '"/kubepods/burstable/pod'"$POD_UID"'/x\n/etc"'
cgp cg-tab '"/kubepods/burstable/x\ty"'
cgp cg-backslash '"/kubepods\\..\\..\\outside"'
cgp cg-symlink-dir '"/kubepods/burstable/evil/c1"'
cgp cg-symlink-up '"/kubepods/besteffort/up/c1"'
cgp cg-symlink-file '"/kubepods/besteffort/pod1/c1"'
cgp cg-deep '"/" + "/".join(["d"] * 40)'
cgp cg-long-comp '"/kubepods/" + "x" * 300'
cgp cg-long '"/" + "/".join(["a" * 200] * 30)'
cgp cg-proc-self '"/../../../../proc/self"'
# cgroupsPath tricks, systemd form
cgp sd-dotdot-slice '"../../outside.slice:cri-containerd:c1"'
cgp sd-slash-name '"kubepods.slice:cri-containerd:../../outside"'
cgp sd-slash-prefix '"kubepods.slice:../..:c1"'
cgp sd-dotdot-name '"kubepods.slice:cri:.."'
cgp sd-empty-comp '"kubepods--x.slice:cri:c1"'
cgp sd-no-suffix '"kubepods:cri:c1"'
cgp sd-4-fields '"a.slice:b:c:d"'
cgp sd-newline '"kubepods.slice:cri:c1\n"'
cgp sd-symlink-slice '"kubepods-evil.slice:cri-containerd:c1"'
cgp sd-root-slice '"-.slice:cri:x"'
# conf.policy tricks (run without --policy: the request's conf.policy decides)
confp() { gen "$1" "r[\"conf\"] = {\"policy\": $2}; return r"; }
confp conf-proc '"/proc/self/status"'
confp conf-proc-mem '"/proc/self/mem"'
confp conf-fifo "\"$S/root/fifo.toml\""
confp conf-dir "\"$S/root\""
confp conf-devzero '"/dev/zero"'
confp conf-devstdin '"/dev/stdin"'
confp conf-missing "\"$S/root/nope.toml\""
confp conf-nonstring '42'
confp conf-empty '""'
confp conf-relative '"../../etc/shadow"'
# wrong types for every field of the v0.1 request
WT=()
wt() { gen "wt-$1" "$2; return r"; WT+=("wt-$1|$3"); }
wt version-num 'r["version"] = 1' '/version: expected string, got integer'
wt state-num 'r["state"] = 1' '/state: expected string, got integer'
wt state-null 'r["state"] = None' '/state: required field missing'
wt id-num 'r["id"] = 7' '/id: expected string, got integer'
wt id-obj 'r["id"] = {}' '/id: expected string, got object'
wt sandboxid-arr 'r["sandboxID"] = []' '/sandboxID: expected string, got array'
wt pid-bool 'r["pid"] = True' '/pid: expected integer, got boolean'
wt pid-obj 'r["pid"] = {}' '/pid: expected integer, got object'
wt pid-str-junk 'r["pid"] = "12x"' '/pid: expected an integer'
wt conf-str 'r["conf"] = "x"' '/conf: expected object, got string'
wt labels-arr 'r["labels"] = ["a"]' '/labels: expected object, got array'
wt label-num 'r["labels"]["app"] = 1' '/labels/app: expected string, got integer'
wt label-null 'r["labels"]["app"] = None' '/labels/app: expected string, got null'
wt spec-str 'r["spec"] = "x"' '/spec: expected object, got string'
wt cgpath-num 'r["spec"]["cgroupsPath"] = 1' '/spec/cgroupsPath: expected string, got integer'
wt cgpath-arr 'r["spec"]["cgroupsPath"] = ["/a"]' '/spec/cgroupsPath: expected string, got array'
wt anns-str 'r["spec"]["annotations"] = "x"' '/spec/annotations: expected object, got string'
wt ann-obj 'r["spec"]["annotations"]["x"] = {}' '/spec/annotations/x: expected string, got object'
wt res-arr 'r["spec"]["resources"] = []' '/spec/resources: expected object, got array'
wt cpu-str 'r["spec"]["resources"]["cpu"] = "x"' '/spec/resources/cpu: expected object, got string'
wt shares-float 'r["spec"]["resources"]["cpu"]["shares"] = 1.5' '/spec/resources/cpu/shares: expected integer, got non-integer number'
wt shares-neg 'r["spec"]["resources"]["cpu"]["shares"] = -5' '/spec/resources/cpu/shares: integer -5 out of range'
wt quota-bool 'r["spec"]["resources"]["cpu"]["quota"] = False' '/spec/resources/cpu/quota: expected integer, got boolean'
wt cpus-num 'r["spec"]["resources"]["cpu"]["cpus"] = 3' '/spec/resources/cpu/cpus: expected string, got integer'
wt mem-str 'r["spec"]["resources"]["memory"] = "1G"' '/spec/resources/memory: expected object, got string'
wt memlimit-str 'r["spec"]["resources"]["memory"]["limit"] = "1G"' '/spec/resources/memory/limit: expected an integer'
wt pids-num 'r["spec"]["resources"]["pids"] = 5' '/spec/resources/pids: expected object, got integer'
wt pidslimit-obj 'r["spec"]["resources"]["pids"] = {"limit": {}}' '/spec/resources/pids/limit: expected integer, got object'
wt ns-arr 'r["spec"]["namespaces"] = []' '/spec/namespaces: expected object, got array'
wt results-obj 'r["results"] = {}' '/results: expected array, got object'

# nri-eval (native NRI child) inputs
cat > "$IN/ev-ok.json" <<EOF
{"event":"CreateContainer","runtime":{"name":"containerd","version":"1.7.24"},"pod":{"id":"$SB_ID","name":"web","uid":"$POD_UID","namespace":"default","labels":{"koordinator.sh/qosClass":"LSE"},"annotations":{},"linux":{"cgroups_path":"/$POD_REL/$SB_ID"}},"container":{"id":"$CT_ID","pod_sandbox_id":"$SB_ID","name":"app","linux":{"cgroups_path":"/$POD_REL/$CT_ID","resources":{"cpu":{"shares":{"value":512}}}},"pid":2529}}
EOF
evgen() {
  python3 - "$IN/ev-ok.json" "$IN/$1" "$2" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
ns = {"r": r}
exec(sys.argv[3], ns)
open(sys.argv[2], "w").write(json.dumps(ns["r"]))
PY
}
evgen ev-unknown 'r["event"] = "Exec"'
evgen ev-pod-missing 'del r["pod"]'
evgen ev-podid-slash 'r["pod"]["id"] = "../x"'
evgen ev-mismatch 'r["container"]["pod_sandbox_id"] = "other"'
evgen ev-shares-str 'r["container"]["linux"]["resources"]["cpu"]["shares"] = {"value": "x"}'
evgen ev-cg-dotdot 'r["container"]["linux"]["cgroups_path"] = "/kubepods/../../outside"'
evgen ev-runtime-arr 'r["runtime"] = []'

# ---- the cases -----------------------------------------------------------------------------
LIMIT=5
run_case "baseline: valid container create" invoke "$IN/ct.json" - class=LS
run_case "empty stdin" invoke "$IN/empty" "empty input"
run_case "null" invoke "$IN/null" "/: expected a JSON object (NRI v0.1 request), got null"
run_case "an array" invoke "$IN/array" "/: expected a JSON object (NRI v0.1 request), got array"
run_case "an array of a request" invoke "$IN/array2" "expected a JSON object"
run_case "truncated JSON" invoke "$IN/truncated" "malformed JSON"
run_case "invalid UTF-8" invoke "$IN/bad-utf8" "ill-formed UTF-8"
run_case "overlong UTF-8 in cgroupsPath" invoke "$IN/overlong-slash" "ill-formed UTF-8"
run_case "lone UTF-16 surrogate" invoke "$IN/lone-surrogate" "malformed JSON"
run_case "raw NUL inside a string" invoke "$IN/raw-nul" "must be escaped|NUL byte in the request"
run_case "escaped NUL in a label value" invoke "$IN/esc-nul-label" "/labels/app: contains a NUL byte"
run_case "escaped NUL in the id" invoke "$IN/esc-nul-id" "/id: id may contain only"
run_case "escaped NUL in cgroupsPath" invoke "$IN/esc-nul-path" "/spec/cgroupsPath: contains a control character"
run_case "escaped NUL in an annotation key" invoke "$IN/esc-nul-annkey" "contains a control character"
run_case "200,000-deep array nesting" invoke "$IN/deep-array" "JSON nested deeper than 32 levels"
run_case "200,000-deep object nesting" invoke "$IN/deep-object" "JSON nested deeper than 32 levels"
run_case "200,000-deep nesting inside conf" invoke "$IN/deep-in-conf" "JSON nested deeper than 32 levels"
run_case "a 64 MiB string" invoke "$IN/huge-string" "request larger than 4194304 bytes"
run_case "a 300 KiB annotation value" invoke "$IN/big-ann-value" "longer than 262144 bytes"
run_case "duplicate keys" invoke "$IN/dup-key" 'duplicate JSON key "state"'
run_case "duplicate keys (cgroupsPath)" invoke "$IN/dup-key-nested" 'duplicate JSON key "cgroupsPath"'
run_case "trailing object" invoke "$IN/trailing" "malformed JSON"
run_case "trailing garbage after a NUL" invoke "$IN/trailing-junk" "malformed JSON: NUL byte in the request"
run_case "trailing whitespace is fine" invoke "$IN/trailing-ws" - class=LS
run_case "UTF-8 BOM is skipped (nlohmann), the request accepted" invoke "$IN/bom" - class=LS
run_case "a comment" invoke "$IN/comment" "malformed JSON"
run_case "pid 1e400" invoke "$IN/pid-1e400" "number overflow parsing '1e400'"
run_case "pid 2^64" invoke "$IN/pid-2e64" "/pid: expected integer, got non-integer number"
run_case "pid 2^63" invoke "$IN/pid-2e63" "/pid: integer out of range"
run_case "pid -1" invoke "$IN/pid-neg" "/pid: integer -1 out of range [0, 4194304]"
run_case "pid 2529.5" invoke "$IN/pid-float" "/pid: expected integer, got non-integer number"
run_case "pid above pid_max" invoke "$IN/pid-big" "/pid: integer 4194305 out of range"
run_case "pid as a decimal string is accepted" invoke "$IN/pid-str" - class=LS
run_case "cpu.shares 2^64-1" invoke "$IN/shares-2e64" "/spec/resources/cpu/shares: integer out of range"
run_case "memory.limit -2" invoke "$IN/mem-neg" "/spec/resources/memory/limit: integer -2 out of range"
run_case "memory.limit 1e400" invoke "$IN/mem-1e400" "number overflow"
for w in "${WT[@]}"; do
  run_case "wrong type: ${w%%|*}" invoke "$IN/${w%%|*}" "${w#*|}"
done
run_case "unknown state" invoke "$IN/state-unknown" '/state: unknown state "pwn"'
run_case "state in upper case" invoke "$IN/state-case" '/state: unknown state "CREATE"'
run_case "unknown version 0.2" invoke "$IN/version-unknown" 'unsupported NRI version "0.2"'
run_case "unknown version 1.0.0" invoke "$IN/version-1" 'unsupported NRI version "1.0.0"'
run_case "version missing" invoke "$IN/version-missing" '/version: required field missing'
run_case "id with ../" invoke "$IN/id-slash" "/id: id may contain only [A-Za-z0-9_.-]"
run_case "id with /" invoke "$IN/id-slash2" "/id: id may contain only"
run_case "sandboxID with ../" invoke "$IN/sandboxid-slash" "/sandboxID: id may contain only"
run_case "id .." invoke "$IN/id-dotdot" "/id: invalid id"
run_case "id of 129 bytes" invoke "$IN/id-long" "/id: id longer than 128 bytes"
LIMIT=2 run_case "200,000 annotations" invoke "$IN/anns-200k" "more than 4096"
LIMIT=2 run_case "200,000 labels" invoke "$IN/labels-200k" "more than 4096"
run_case "annotation key of 400 bytes" invoke "$IN/ann-key-long" "longer than 317 bytes"
run_case "annotation key with a newline" invoke "$IN/ann-key-newline" "contains a control character"
run_case "cgroupfs: .. components" invoke "$IN/cg-dotdot" 'component is not allowed'
run_case "cgroupfs: relative ../" invoke "$IN/cg-dotdot-rel" 'component is not allowed'
run_case "cgroupfs: . component" invoke "$IN/cg-dot" 'component is not allowed'
run_case "cgroupfs: empty component" invoke "$IN/cg-double-slash" 'component is not allowed'
run_case "cgroupfs: /etc/passwd stays below the root" invoke "$IN/cg-abs-etc" - class=LS '~failed=(cgroup cpu/etc/passwd does not exist)'
run_case "cgroupfs: newline" invoke "$IN/cg-newline" "contains a control character"
run_case "cgroupfs: tab" invoke "$IN/cg-tab" "contains a control character"
run_case "cgroupfs: backslashes" invoke "$IN/cg-backslash" "backslash"
run_case "cgroupfs: directory symlink to outside" invoke "$IN/cg-symlink-dir" "*" class=LS '~failed=path escapes its root or crosses a symlink'
run_case "cgroupfs: relative symlink up and out" invoke "$IN/cg-symlink-up" "*" '~failed=path escapes its root or crosses a symlink'
run_case "cgroupfs: kernel file is a symlink" invoke "$IN/cg-symlink-file" "*" '~failed=path escapes its root or crosses a symlink'
run_case "cgroupfs: 40 levels" invoke "$IN/cg-deep" "more than 32 levels"
run_case "cgroupfs: 300-byte component" invoke "$IN/cg-long-comp" "component longer than 255 bytes"
run_case "cgroupfs: 6 KB path" invoke "$IN/cg-long" "longer than 4096 bytes"
run_case "cgroupfs: ../proc/self" invoke "$IN/cg-proc-self" 'component is not allowed'
run_case "systemd: ../ in the slice" invoke "$IN/sd-dotdot-slice" "must not contain '/'"
run_case "systemd: / in the name" invoke "$IN/sd-slash-name" "must not contain '/'"
run_case "systemd: / in the prefix" invoke "$IN/sd-slash-prefix" "must not contain '/'"
run_case "systemd: .. as the name stays below the root" invoke "$IN/sd-dotdot-name" - '~failed=does not exist'
run_case "systemd: empty slice component" invoke "$IN/sd-empty-comp" "malformed systemd slice"
run_case "systemd: slice without .slice" invoke "$IN/sd-no-suffix" "must end in .slice"
run_case "systemd: four fields" invoke "$IN/sd-4-fields" "systemd form must be slice:prefix:name"
run_case "systemd: newline" invoke "$IN/sd-newline" "contains a control character"
run_case "systemd: slice directory is a symlink to outside" invoke "$IN/sd-symlink-slice" "*" '~failed=path escapes its root or crosses a symlink'
run_case "systemd: root slice" invoke "$IN/sd-root-slice" - '~failed=(cgroup cpu/cri-x.scope does not exist)'
NOPOLICY=1
run_case "conf.policy = /proc/self/status" invoke "$IN/conf-proc" "/proc/self/status: policy is not a regular file"
run_case "conf.policy = /proc/self/mem" invoke "$IN/conf-proc-mem" "/proc/self/mem: policy is not a regular file"
LIMIT=3 run_case "conf.policy = a FIFO (must not hang)" invoke "$IN/conf-fifo" "policy is not a regular file"
run_case "conf.policy = a directory" invoke "$IN/conf-dir" "policy is not a regular file"
run_case "conf.policy = /dev/zero" invoke "$IN/conf-devzero" "policy is not a regular file"
run_case "conf.policy = /dev/stdin" invoke "$IN/conf-devstdin" "policy"
run_case "conf.policy missing file" invoke "$IN/conf-missing" "cannot open policy"
run_case "conf.policy not a string" invoke "$IN/conf-nonstring" "/conf/policy: expected a non-empty path string"
run_case "conf.policy empty" invoke "$IN/conf-empty" "/conf/policy: expected a non-empty path string"
run_case "conf.policy relative ../../etc/shadow" invoke "$IN/conf-relative" "policy"
NOPOLICY=0
LIMIT=5
run_case "nri-eval: valid event" nri-eval "$IN/ev-ok.json" - class=LS
run_case "nri-eval: unknown event" nri-eval "$IN/ev-unknown" '/event: unknown event "Exec"'
run_case "nri-eval: pod missing" nri-eval "$IN/ev-pod-missing" "/pod: required field missing"
run_case "nri-eval: pod id with ../" nri-eval "$IN/ev-podid-slash" "/pod/id: id may contain only"
run_case "nri-eval: pod_sandbox_id mismatch" nri-eval "$IN/ev-mismatch" "/container/pod_sandbox_id: does not match /pod/id"
run_case "nri-eval: shares as junk string" nri-eval "$IN/ev-shares-str" "/container/linux/resources/cpu/shares/value: expected an integer"
run_case "nri-eval: cgroups_path with .." nri-eval "$IN/ev-cg-dotdot" "component is not allowed"
run_case "nri-eval: runtime is an array" nri-eval "$IN/ev-runtime-arr" "/runtime: expected object, got array"
run_case "nri-eval: empty stdin" nri-eval "$IN/empty" "empty input"
run_case "nri-eval: 200,000-deep nesting" nri-eval "$IN/deep-array" "JSON nested deeper than 32 levels"

# ---- hostile policy files -------------------------------------------------------------------
PD=$W/pol; mkdir -p "$PD"
pol() { printf '%s\n' "$2" > "$PD/$1.toml"; }
BASE='version = 1
[settings]
default_class = "LS"
[classes.LS]'
pol unknown-top "$BASE
bogus = 1"
pol unknown-class-key "$BASE
colour = \"red\""
pol unknown-knob "$BASE
container.cpu_sharez = 2"
pol unknown-settings 'version = 1
[settings]
default_class = "LS"
evil = true
[classes.LS]'
pol wrong-type-version 'version = "1"
[settings]
default_class = "LS"
[classes.LS]'
pol wrong-type-knob "$BASE
container.cpu_shares = 1.5"
pol wrong-type-bool "$BASE
container.oom_score_adj = true"
pol wrong-type-rules 'version = 1
rules = "x"
[settings]
default_class = "LS"
[classes.LS]'
pol wrong-type-match "$BASE
[[rules]]
class = \"LS\"
match.namespace = 5"
pol range-shares "$BASE
container.cpu_shares = 1"
pol range-shares-hi "$BASE
container.cpu_shares = 262145"
pol range-weight "$BASE
container.cpu_weight = 10001"
pol range-oom "$BASE
container.oom_score_adj = -1001"
pol range-qos "$BASE
container.cpu_qos_level = 3"
pol range-i64 "$BASE
container.memory_limit = 9223372036854775807000"
pol range-bytes "$BASE
container.memory_limit = \"9999999999Ti\""
pol range-pct "$BASE
container.memory_high = \"101%\""
pol cpuset-bad "$BASE
container.cpuset_cpus = \"3-1\""
pol cpuset-huge "$BASE
container.cpuset_cpus = \"0-100000\""
pol raw-release-agent "$BASE
container.raw = [ { file = \"release_agent\", controller = \"memory\", value = \"/tmp/x\" } ]"
pol raw-procs "$BASE
container.raw = [ { file = \"cgroup.procs\", controller = \"cpu\", value = \"1\" } ]"
pol raw-traversal "$BASE
container.raw = [ { file = \"../../x.y\", controller = \"cpu\", value = \"1\" } ]"
pol resctrl-traversal "$BASE
container.resctrl_group = \"..\""
pol gate-fallback-unknown 'version = 1
[settings]
default_class = "LS"
[classes.LS]
[classes.HLS]
gate = { namespaces = ["x"], fallback = "nope" }'
pol default-gated 'version = 1
[settings]
default_class = "HLS"
[classes.LS]
[classes.HLS]
gate = { namespaces = ["x"], fallback = "LS" }'
pol no-classes 'version = 1
[settings]
default_class = "LS"'
pol empty ''
python3 -c "
import sys
print('version = 1\n[settings]\ndefault_class = \"LS\"\n[classes.LS]\n[[rules]]\nclass = \"LS\"\nmatch.namespace = [' + ','.join('\"n%d\"' % i for i in range(100000)) + ']')" > "$PD/huge-array.toml"
python3 -c "
print('version = 1\n[settings]\ndefault_class = \"LS\"\n[classes.LS]\nx = ' + '[\n'*100000 + ']\n'*100000)" > "$PD/deep.toml"
python3 -c "
print('version = 1\n[settings]\ndefault_class = \"LS\"\n[classes.LS]\ndescription = \"' + 'x'*(10<<20) + '\"')" > "$PD/ten-mb.toml"
python3 -c "
import sys; sys.stdout.write('version = 1\n[settings]\ndefault_class = \"LS\"\n[classes.LS]\n' + '# padding\n' * ((7 << 20) // 10))" > "$PD/seven-mb-comments.toml"
head -c 65536 /dev/urandom > "$PD/binary.toml"
cp "$TOP/tests/fuzz/corpus/policy/regress-quote-desync-int.toml" "$PD/quote-desync-int.toml"
cp "$TOP/tests/fuzz/corpus/policy/regress-quote-desync-nesting.toml" "$PD/quote-desync-nesting.toml"
pol range-hex "$BASE
container.memory_limit = 0xFFFFFFFFFFFFFFFFFF"
printf 'version = 1\n[settings]\ndefault_class = "LS"\n[classes.LS]\ndescription = \x27\x27\x27caf\xe9\x27\x27\x27\n' > "$PD/utf8-ml-literal.toml"
printf 'version = 1\n[settings]\ndefault_class = "LS"\n[classes.LS]\ndescription = \x27caf\xe9\x27\n' > "$PD/utf8-literal.toml"
printf 'version = 1\n[settings]\ndefault_class = "LS"\n[classes.LS]\ndescription = "caf\xe9"\n' > "$PD/utf8-basic.toml"
printf 'version = 1\n# caf\xe9\n[settings]\ndefault_class = "LS"\n[classes.LS]\n' > "$PD/utf8-comment.toml"
python3 -c "
print('version = 1\n[settings]\ndefault_class = \"LS\"\n[classes.LS]\n[[rules]]\nclass = \"LS\"\nmatch.namespace = [\n' + ',\n'.join('\"n%d\"' % i for i in range(100000)) + ']')" > "$PD/huge-array-lines.toml"
printf 'version = 1\n[settings]\ndefault_class = "LS"\n[classes.LS]\ndescription = "a\x00b"\n' > "$PD/nul.toml"
printf '\xef\xbb\xbfversion = 1\n[settings]\ndefault_class = "LS"\n[classes.LS]\n' > "$PD/bom.toml"
python3 -c "
print('version = 1\n[settings]\ndefault_class = \"LS\"\n[classes.LS]\n' + ''.join('[[rules]]\nclass = \"LS\"\nname = \"r%d\"\n' % i for i in range(100001)))" > "$PD/too-many-rules.toml"

pcase() { # name file expect
  POL=$PD/$2.toml run_case "policy: $1" invoke "$IN/ct.json" "$3"
}
pcase "unknown top-level key" unknown-top 'unknown key "bogus"'
pcase "unknown class key" unknown-class-key 'unknown key "colour"'
pcase "unknown knob" unknown-knob 'unknown knob "cpu_sharez"'
pcase "unknown settings key" unknown-settings 'unknown key "evil"'
pcase "version as a string" wrong-type-version "version: this nri-qos reads policy version 1"
pcase "float knob" wrong-type-knob "cpu_shares: expected an integer, a string or { fact = \"...\" }, got float"
pcase "boolean knob" wrong-type-bool "oom_score_adj: expected an integer, a string or { fact = \"...\" }, got boolean"
pcase "rules as a string" wrong-type-rules "rules: expected an array of tables"
pcase "match.namespace as an integer" wrong-type-match "match.namespace: expected a string or an array of strings, got integer"
pcase "cpu_shares 1" range-shares "cpu_shares: 1 out of range [2, 262144]"
pcase "cpu_shares 262145" range-shares-hi "cpu_shares: 262145 out of range [2, 262144]"
pcase "cpu_weight 10001" range-weight "cpu_weight: 10001 out of range [1, 10000]"
pcase "oom_score_adj -1001" range-oom "oom_score_adj: -1001 out of range [-1000, 1000]"
pcase "cpu_qos_level 3" range-qos "cpu_qos_level: 3 out of range [-1, 2]"
pcase "integer beyond 64 bits" range-i64 "integer literal out of the 64-bit range"
pcase "hex integer beyond 64 bits" range-hex "integer literal out of the 64-bit range"
pcase "invalid UTF-8 in a multi-line literal string" utf8-ml-literal "invalid UTF-8"
pcase "invalid UTF-8 in a literal string" utf8-literal "invalid UTF-8"
pcase "invalid UTF-8 in a basic string" utf8-basic "invalid UTF-8|invalid utf8"
pcase "invalid UTF-8 in a comment" utf8-comment "invalid UTF-8|:2: TOML syntax error"
pcase "byte size overflow" range-bytes "memory_limit: value overflows"
pcase "percentage 101%" range-pct "memory_high: percentage must be 0%..100%"
pcase "cpuset 3-1" cpuset-bad 'cpuset_cpus: expected a cpuset list'
pcase "cpuset 0-100000" cpuset-huge 'cpuset_cpus: expected a cpuset list'
pcase "raw release_agent" raw-release-agent 'is not an allowed kernel file name'
pcase "raw cgroup.procs" raw-procs 'is not an allowed kernel file name'
pcase "raw ../../x.y" raw-traversal 'is not an allowed kernel file name'
pcase "resctrl_group .." resctrl-traversal 'resctrl_group: '
pcase "gate fallback unknown" gate-fallback-unknown 'gate.fallback: unknown class "nope"'
pcase "default class gated" default-gated 'must not be gated'
pcase "no classes" no-classes 'no [classes] defined'
pcase "empty file" empty 'missing "version = 1"'
pcase "100,000-entry array on one line" huge-array 'line longer than 16384 bytes'
pcase "100,000-entry array, one per line" huge-array-lines 'more than 4096 entries'
pcase "100,000-deep nesting" deep 'nesting deeper than 32 levels'
pcase "64-bit overflow after a '''it's''' string" quote-desync-int 'integer literal out of the 64-bit range'
pcase "20,000-deep nesting after a '''it's''' string" quote-desync-nesting 'nesting deeper than 32 levels'
pcase "10 MB file" ten-mb 'policy larger than 8388608 bytes'
pcase "7 MB of comments" seven-mb-comments '*'
pcase "64 KiB of random bytes" binary 'TOML syntax error|invalid UTF-8|control character'
pcase "NUL in a string" nul 'TOML syntax error|control character in the policy text'
pcase "UTF-8 BOM" bom '*'
# toml11 needs ~3 s for this 4 MB file: beyond the deadline, so the deadline is off here
POL=$PD/too-many-rules.toml LIMIT=15 run_case "policy: 100,001 rules" invoke "$IN/ct.json" 'more than 100000 rules' -- --deadline-ms 0

# `nri-qos check` on the same files: exit 1 with one line "nri-qos: <file>:<line>: ...", no signal
for f in utf8-ml-literal utf8-literal range-i64 deep binary nul ten-mb huge-array quote-desync-int quote-desync-nesting; do
  msg=$(timeout -s KILL $((20 * TIME_SCALE)) "$BIN" check "$PD/$f.toml" 2>&1 >/dev/null); rc=$?
  if [ "$rc" = 1 ] && [ "$(printf '%s\n' "$msg" | wc -l)" = 1 ] && [[ "$msg" == "nri-qos: $PD/$f.toml"* ]]; then
    pass "check: hostile policy $f: exit 1, one line"
  else
    fail "check: hostile policy $f: exit $rc, '${msg:0:300}'"
  fi
done

# fail-closed policy: a bad request becomes a Result error (exit 1)
{ cat "$POLICY"; } | sed 's/^fail = "open"/fail = "closed"/' > "$PD/closed.toml"
POL=$PD/closed.toml run_case "fail-closed policy: bad request is an error" invoke "$IN/null" "nri-qos: bad request: /: expected a JSON object"

# ---- promotion gates ------------------------------------------------------------------------
gen gate-default 'r["labels"]["koordinator.sh/qosClass"] = "LSE"; return r'
gen gate-online 'r["labels"]["koordinator.sh/qosClass"] = "LSE"; r["spec"]["annotations"]["io.kubernetes.cri.sandbox-namespace"] = "online-shop"; return r'
gen gate-label 'r["labels"]["koordinator.sh/qosClass"] = "LSE"; r["labels"]["nri-qos.io/allow-hls"] = "true"; return r'
gen gate-label-wrong 'r["labels"]["koordinator.sh/qosClass"] = "LSE"; r["labels"]["nri-qos.io/allow-hls"] = "yes"; return r'
gen gate-ann-only 'r["labels"]["koordinator.sh/qosClass"] = "LSE"; r["spec"]["annotations"]["nri-qos.io/allow-hls"] = "true"; return r'
gen gate-ns-spoof 'r["labels"]["koordinator.sh/qosClass"] = "LSE"; r["labels"]["io.kubernetes.pod.namespace"] = "kube-system"; return r'
gen gate-unthrottled 'r["spec"]["annotations"]["qos.class"] = "ls"; return r'
gen gate-katalyst 'r["spec"]["annotations"]["katalyst.kubewharf.io/qos_level"] = "dedicated_cores"; return r'
gen demote-be 'r["labels"]["koordinator.sh/qosClass"] = "BE"; return r'
# Pod labels and annotations are the pod author's: alone they never pass a gate (issue 9 §3).
run_case "gate: HLS from namespace default gets LS" invoke "$IN/gate-default" - class=LS rule=koordinator-lse-lsr \
  '~gate=class HLS is gated: namespace "default" does not qualify and label "koordinator.sh/qosClass" is not declared in [guarded.labels]; using LS'
run_case "gate: HLS from a namespace not in the allow-list gets LS" invoke "$IN/gate-online" - class=LS '~gate=namespace "online-shop" does not qualify'
run_case "gate: HLS with a label the pod author set gets LS" invoke "$IN/gate-label" - class=LS '~gate=is gated'
sed '/^\[guarded.labels\]$/a "koordinator.sh/qosClass" = "test: an admission policy controls it"' "$POLICY" > "$PD/guarded.toml"
POL=$PD/guarded.toml run_case "gate: HLS through a key the operator declared guarded qualifies" invoke "$IN/gate-default" - class=HLS '!gate'
POL=$PD/guarded.toml run_case "gate: guarded label, but katalyst's annotation is not guarded" invoke "$IN/gate-katalyst" - class=LS '~gate=is gated'
run_case "gate: label with a wrong value does not qualify" invoke "$IN/gate-label-wrong" - class=LS '~gate=is gated'
run_case "gate: the label as an annotation does not qualify" invoke "$IN/gate-ann-only" - class=LS '~gate=is gated'
run_case "gate: namespace spoofed through a label does not qualify" invoke "$IN/gate-ns-spoof" - class=LS '~gate=is gated'
run_case "gate: clearcfs unthrottled from default gets LS" invoke "$IN/gate-unthrottled" - class=LS '~gate=class LS-unthrottled is gated'
run_case "gate: katalyst dedicated_cores from default gets LS" invoke "$IN/gate-katalyst" - class=LS '~gate=class HLS is gated'
run_case "gate: demotion to BE needs no gate" invoke "$IN/demote-be" - class=BE '!gate'

# ---- the self-imposed deadline --------------------------------------------------------------
# A writer that never closes stdin: the hook answers within ~1 s with the fail mode of the policy
# in force (the deadline cuts the read; issue 9: fail-closed means closed, before the request too).
# Within the default deadline + 0.6 s: DEADLINE_MS (1000; under qemu-user the larger one its
# wrapper passes; the producers below outlast it, so that the deadline still cuts the read).
# Under qemu-user + 2 s: the emulator translates the binary before main() arms the deadline and
# again on the way out (10.62-10.68 s seen with two suites side by side at load 9).
DL_SLACK=0.6; [ "$QEMU_USER" = 1 ] && DL_SLACK=2.0
deadline_case() { # name producer-command [policy open|closed] (producer in its own process group, killed afterwards)
  local name=$1 producer=$2 pol=${3:-$POLICY} want=${4:-open} t0 t1 rc el pg
  rm -f "$W/stdin.fifo"; mkfifo "$W/stdin.fifo"
  setsid bash -c "$producer" >"$W/stdin.fifo" &
  pg=$!
  mkdir -p "$W/sinks"; : > "$W/sinks/deadline.log"
  t0=$(date +%s.%N)
  timeout -s KILL $((DEADLINE_MS / 1000 + 9)) "$BIN" invoke --policy "$pol" --cgroup-root "$CG" --cgroup-layout v1 --proc-root "$PROC" \
    --resctrl-root "$RC_ROOT" --state-dir "$STATE" --cache-dir "$CACHE" --metrics-file "$W/sinks/nri_qos.prom" --event-log "$W/sinks/deadline.log" <"$W/stdin.fifo" >"$W/out" 2>/dev/null
  rc=$?
  t1=$(date +%s.%N)
  kill -- -"$pg" 2>/dev/null; wait "$pg" 2>/dev/null
  el=$(python3 -c "print(round($t1-$t0, 2))")
  if python3 -c "
import json, sys
out = open(sys.argv[1]).read(); el = float(sys.argv[2]); rc = int(sys.argv[3]); want = sys.argv[4]
rec = [json.loads(l) for l in open(sys.argv[5]) if l.strip()]
limit = int(sys.argv[6]) / 1000 + float(sys.argv[7])
assert el < limit, 'took %.2fs, want < %.1fs' % (el, limit)
r = json.loads(out)
if want == 'open':
    assert rc == 0, 'exit %d' % rc
    md = r['metadata']
    assert r['error'] == '' and 'deadline exceeded' in (md.get('warning', '') + md.get('error', '')), 'not a fail-open deadline Result: %r' % out[:200]
else:
    assert rc == 1, 'exit %d, want 1 (fail-closed)' % rc
    assert 'deadline exceeded' in r['error'], 'not a fail-closed deadline Result: %r' % out[:200]
assert len(rec) == 1 and 'deadline exceeded' in rec[0].get('message', ''), 'event record: %r' % rec
assert rec[0]['outcome'] == ('refused' if want == 'closed' else 'error'), 'record outcome %r' % rec[0]['outcome']
" "$W/out" "$el" "$rc" "$want" "$W/sinks/deadline.log" "$DEADLINE_MS" "$DL_SLACK" 2>"$W/deadline.err"; then
    pass "deadline: $name (${el}s)"
  else
    fail "deadline: $name: $(tail -1 "$W/deadline.err") (${el}s, exit $rc, stdout '$(head -c 200 "$W/out")')"
  fi
}
# (the producers outlast the deadline by 7 s: natively 8 s, 80 drips)
P_SECS=$((DEADLINE_MS / 1000 + 7))
deadline_case "stdin never closes" "exec sleep $P_SECS"
deadline_case "stdin drips one byte per 100 ms" 'for i in $(seq '$((P_SECS * 10))'); do printf " "; sleep 0.1; done'
deadline_case "half a request, then silence" "head -c 300 '$IN/ct.json'; exec sleep $P_SECS"
sed 's/^fail = "open".*/fail = "closed"/' "$POLICY" > "$W/closed.toml"
deadline_case "stdin never closes, fail-closed policy: container refused" "exec sleep $P_SECS" "$W/closed.toml" closed
deadline_case "half a request, fail-closed policy: container refused" "head -c 300 '$IN/ct.json'; exec sleep $P_SECS" "$W/closed.toml" closed

# ---- concurrency: 64 parallel invocations ---------------------------------------------------
par_run() { # N input-pattern → results in $W/par/N.out
  # Under qemu-user the 64 emulated hooks share 2 CPUs with the emulated suite beside this one:
  # each gets 3 x the emulated deadline, since these cases are about concurrent memos and
  # records, not the deadline (one of 64 hit 10 s at load 9). Natively: the default, as always.
  local i pids=() dl=()
  [ "$QEMU_USER" = 1 ] && dl=(--deadline-ms $((DEADLINE_MS * 3)))
  rm -rf "$W/par"; mkdir -p "$W/par"
  for ((i = 0; i < 64; i++)); do
    "$BIN" invoke "${dl[@]}" --policy "$POLICY" --cgroup-root "$CG" --cgroup-layout v1 --proc-root "$PROC" --resctrl-root "$RC_ROOT" \
      --state-dir "$STATE" --cache-dir "$CACHE" --metrics-file "$W/sinks/nri_qos.prom" --event-log "$W/sinks/events.log" <"$(printf "$1" "$i")" >"$W/par/$i.out" 2>"$W/par/$i.err" &
    pids+=($!)
  done
  wait "${pids[@]}"  # (not a bare wait: the resident checker is a job of this shell too)
}
par_check() { # name: every output a valid Result without error
  python3 - "$W/par" "$1" <<'PY'
import json, os, sys
d, name = sys.argv[1], sys.argv[2]
bad = []
for i in range(64):
    try:
        r = json.loads(open(os.path.join(d, "%d.out" % i)).read())
        if r.get("error") or "error" in r["metadata"] or "warning" in r["metadata"]: bad.append("%d: %s" % (i, r["metadata"]))
        if any(not isinstance(v, str) for v in r["metadata"].values()): bad.append("%d: metadata" % i)
    except Exception as e:
        bad.append("%d: %s" % (i, e))
print(("FAIL %s: %s" % (name, "; ".join(bad)[:800])) if bad else "PASS " + name)
sys.exit(1 if bad else 0)
PY
}
state_check() { # name expected-count: memos parse, no temp files
  python3 - "$STATE" "$1" "$2" <<'PY'
import json, os, sys
d, name, want = sys.argv[1], sys.argv[2], int(sys.argv[3])
bad, n = [], 0
for f in os.listdir(d):
    p = os.path.join(d, f)
    if f in ("trap.json", "last-good", "sinks") or (f == "last" and os.path.isdir(p)): continue  # last-good: the last good policy copies (--state-dir/last-good); last/: per-container records (src/event/publish.hpp)
    if f.endswith(".tmp") or f.startswith("."): bad.append("temp file left: " + f); continue
    n += 1
    try:
        m = json.load(open(p))
        assert isinstance(m["annotations"], dict) and isinstance(m["class"], str), m
    except Exception as e:
        bad.append("%s: %s" % (f, e))
if want >= 0 and n != want: bad.append("%d memos, want %d" % (n, want))
print(("FAIL %s: %s" % (name, "; ".join(bad)[:800])) if bad else "PASS " + name)
sys.exit(1 if bad else 0)
PY
}
rm -f "$STATE"/*.json 2>/dev/null; ln -sf "$OUTSIDE/x.json" "$STATE/trap.json"
# same sandbox, 64 times at once: one memo; a BE pod's container: cpu.shares 2 everywhere
python3 - "$IN" "$POD_REL" <<'PY'
import json, os, sys
d, pod = sys.argv[1], sys.argv[2]
sb = json.load(open(os.path.join(d, "sb.json"))); ct = json.load(open(os.path.join(d, "ct.json")))
for r in (sb, ct): r["labels"]["koordinator.sh/qosClass"] = "BE"
json.dump(sb, open(os.path.join(d, "be-sb.json"), "w")); json.dump(ct, open(os.path.join(d, "be-ct.json"), "w"))
# 64 different sandboxes with a container each; even → BE (cpu.shares 2), odd → LS
for i in range(64):
    s, c = json.loads(json.dumps(sb)), json.loads(json.dumps(ct))
    sid, cid = "sb%02d" % i, "ct%02d" % i
    s["id"] = s["sandboxID"] = sid; c["id"] = cid; c["sandboxID"] = sid
    s["spec"]["cgroupsPath"] = "/kubepods/burstable/pod%02d/%s" % (i, sid)
    c["spec"]["cgroupsPath"] = "/kubepods/burstable/pod%02d/%s" % (i, cid)
    s["labels"]["koordinator.sh/qosClass"] = c["labels"]["koordinator.sh/qosClass"] = "BE" if i % 2 == 0 else "LS"
    c["pid"] = 5000 + i
    json.dump(s, open(os.path.join(d, "p-sb-%d.json" % i), "w")); json.dump(c, open(os.path.join(d, "p-ct-%d.json" % i), "w"))
PY
for ((i = 0; i < 64; i++)); do
  mk_cgroup "kubepods/burstable/pod$(printf %02d $i)/sb$(printf %02d $i)"; mk_cgroup "kubepods/burstable/pod$(printf %02d $i)/ct$(printf %02d $i)"
  mkdir -p "$PROC/$((5000 + i))"; echo 0 > "$PROC/$((5000 + i))/oom_score_adj"
done
par_run "$IN/be-sb.json"
par_check "parallel: 64 x the same sandbox create" || FAILED=1
state_check "parallel: same sandbox leaves one whole memo" 1 || FAILED=1
echo 7 > "$CG/cpu/$POD_REL/$CT_ID/cpu.shares"
par_run "$IN/be-ct.json"
par_check "parallel: 64 x the same container create" || FAILED=1
[ "$(cat "$CG/cpu/$POD_REL/$CT_ID/cpu.shares")" = 2 ] && pass "parallel: same container: cpu.shares = 2" \
  || fail "parallel: same container: cpu.shares = '$(cat "$CG/cpu/$POD_REL/$CT_ID/cpu.shares")', want 2"
[ "$(cat "$PROC/2529/oom_score_adj")" = 1000 ] && pass "parallel: same container: oom_score_adj = 1000" \
  || fail "parallel: same container: oom_score_adj = '$(cat "$PROC/2529/oom_score_adj")', want 1000"
rm -f "$STATE"/*.json; ln -sf "$OUTSIDE/x.json" "$STATE/trap.json"
par_run "$IN/p-sb-%d.json"
par_check "parallel: 64 different sandboxes" || FAILED=1
state_check "parallel: 64 different sandboxes leave 64 whole memos" 64 || FAILED=1
par_run "$IN/p-ct-%d.json"
par_check "parallel: their 64 containers" || FAILED=1
bad=""
for ((i = 0; i < 64; i++)); do
  d="$CG/cpu/kubepods/burstable/pod$(printf %02d $i)/ct$(printf %02d $i)"
  want=""; oom=0; [ $((i % 2)) = 0 ] && want=2 && oom=1000
  [ "$(cat "$d/cpu.shares")" = "$want" ] || bad+=" ct$i:cpu.shares=$(cat "$d/cpu.shares")"
  [ "$(cat "$PROC/$((5000 + i))/oom_score_adj")" = "$oom" ] || bad+=" ct$i:oom=$(cat "$PROC/$((5000 + i))/oom_score_adj")"
done
[ -z "$bad" ] && pass "parallel: 64 containers got their own class's values" || fail "parallel: wrong values:$bad"
# create and delete of the same sandbox racing: the memo is whole or absent, never torn
python3 - "$IN" <<'PY'
import json, os, sys
d = sys.argv[1]
r = json.load(open(os.path.join(d, "be-sb.json"))); r["state"] = "delete"
json.dump(r, open(os.path.join(d, "be-sb-del.json"), "w"))
for i in range(64):
    os.symlink(os.path.join(d, "be-sb.json" if i % 2 else "be-sb-del.json"), os.path.join(d, "race-%d.json" % i))
PY
par_run "$IN/race-%d.json"
par_check "parallel: create/delete race of one sandbox" || FAILED=1
state_check "parallel: create/delete race leaves a whole memo or none" -1 || FAILED=1
[ "$(cat "$OUTSIDE/x.json")" = sentinel ] && pass "parallel: state symlink never followed" || fail "parallel: state symlink target changed"
# ---- plain `invoke`: containerd's command line, no options --------------------------------------
# It skips the CLI11 parse and the standard streams (main.cpp). Run with its default paths on a
# private root (scripts/private-root.sh: /etc/nri, /run/nri-qos, /sys/fs/cgroup and /proc of its
# own), so nothing of the host is read or written.
plain_session() { # ROOT SCRIPT: run SCRIPT (bash) in the private root; $BIN and $IN are exported
  BIN=$BIN IN=$IN timeout -s KILL 60 "$TOP/scripts/private-root.sh" "$1" bash -c "$2"
}
plain_root() { # ROOT POLICY-FILE: a private root with that policy as /etc/nri/nri-qos.toml
  local r=$1 c f
  mkdir -p "$r/etc/nri" "$r/cgroup"
  cp "$2" "$r/etc/nri/nri-qos.toml"
  for rel in "$POD_REL" "$POD_REL/$SB_ID" "$POD_REL/$CT_ID"; do
    for c in cpu memory pids blkio cpuset; do
      mkdir -p "$r/cgroup/$c/$rel"
      for f in $V1_FILES; do case $f in "$c".*) : > "$r/cgroup/$c/$rel/$f" ;; esac; done
    done
  done
}
plain_json() { # NAME FILE PYTHON-ASSERTIONS (r = the Result)
  if python3 -c "
import json, sys
r = json.loads(open(sys.argv[1]).read())
assert isinstance(r, dict) and all(isinstance(v, str) for v in r['metadata'].values()), 'not a Result'
$3
" "$2" 2>"$W/plain.err"; then pass "$1"; else fail "$1: $(tail -1 "$W/plain.err"); stdout '$(head -c 300 "$2")'"; fi
}
if [ "$(id -u)" != 0 ] || ! unshare --mount --pid --fork true 2>/dev/null; then
  skip "plain invoke: needs root and mount/pid namespaces (unshare)"
else
  PR=$S/private; PW=$W/plain; mkdir -p "$PW"
  plain_root "$PR" "$POLICY_SRC"
  printf '%s' "$(head -c 300 "$IN/ct.json")" > "$IN/half"
  python3 - "$IN/ct.json" "$IN/ct-conf-missing.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1])); r["conf"] = {"policy": "/etc/nri/missing.toml"}
json.dump(r, open(sys.argv[2], "w"))
PY
  touch -d '-1 hour' "$PR/etc/nri/nri-qos.toml"; sleep 2.2  # out of the compiled-policy cache's racy window
  plain_session "$PR" '
    o='"$PW"'
    run() { "$BIN" invoke <"$2" >"$o/$1.out" 2>"$o/$1.err"; echo $? >"$o/$1.rc"; }
    run sb "$IN/sb.json"
    run ct-miss "$IN/ct.json"
    run ct-hit "$IN/ct.json"
    "$BIN" invoke --policy /etc/nri/nri-qos.toml --cgroup-root /sys/fs/cgroup --cgroup-layout auto --proc-root /proc \
      --resctrl-root /sys/fs/resctrl --state-dir /run/nri-qos --cache-dir /run/nri-qos/cache <"$IN/ct.json" >"$o/ct-opts.out" 2>/dev/null
    run null "$IN/null"
    run conf-missing "$IN/ct-conf-missing.json"
    (cat "$IN/half"; exec sleep '"$((DEADLINE_MS / 1000 + 4))"') | { "$BIN" invoke >"$o/half.out" 2>"$o/half.err"; echo $? >"$o/half.rc"; }
    ls /run/nri-qos >"$o/state.ls"'
  for c in sb ct-miss ct-hit null conf-missing half; do
    [ "$(cat "$PW/$c.rc" 2>/dev/null)" = 0 ] && pass "plain invoke $c: exit 0" || fail "plain invoke $c: exit $(cat "$PW/$c.rc" 2>/dev/null), stderr '$(head -c 300 "$PW/$c.err" 2>/dev/null)'"
  done
  plain_json "plain invoke: sandbox create" "$PW/sb.out" "assert r['error'] == '' and r['metadata']['class'] == 'LS', r['metadata']"
  grep -qx "$SB_ID.json" "$PW/state.ls" && pass "plain invoke: sandbox memo in /run/nri-qos" || fail "plain invoke: no memo in /run/nri-qos: $(cat "$PW/state.ls")"
  plain_json "plain invoke: container create" "$PW/ct-hit.out" "assert r['metadata']['applied'] == 'cpu.qos_level=0 memory.high=60397977', r['metadata']"
  [ "$(cat "$PR/cgroup/memory/$POD_REL/$CT_ID/memory.high")" = 60397977 ] && pass "plain invoke: memory.high written under /sys/fs/cgroup" \
    || fail "plain invoke: memory.high = '$(cat "$PR/cgroup/memory/$POD_REL/$CT_ID/memory.high")'"
  cmp -s "$PW/ct-miss.out" "$PW/ct-hit.out" && pass "plain invoke: cache miss and hit print the same Result" || fail "plain invoke: miss and hit differ"
  cmp -s "$PW/ct-hit.out" "$PW/ct-opts.out" && pass "plain invoke: same Result as invoke with the default options spelled out" \
    || fail "plain invoke: differs from the options path: '$(head -c 300 "$PW/ct-opts.out")'"
  plain_json "plain invoke: bad request is fail-open with the message" "$PW/null.out" \
    "assert r['error'] == '' and r['metadata']['error'].startswith('bad request: /: expected a JSON object'), r"
  grep -q '^nri-qos: bad request: /: expected a JSON object' "$PW/null.err" && pass "plain invoke: bad request logged on stderr" \
    || fail "plain invoke: stderr '$(head -c 200 "$PW/null.err")'"
  # A missing policy file never turns the node off: the built-in policy (a plain Burstable pod: its
  # DEFAULT class), and the reason (policy_error).
  plain_json "plain invoke: conf.policy missing: built-in policy, with the reason" "$PW/conf-missing.out" \
    "m = r['metadata']; assert r['error'] == '' and m['policy'] == 'builtin' and m['class'] == 'DEFAULT' and 'cannot open policy' in m['policy_error'], m"
  # What integ added per event stays on the fast path: the policy in force in the Result, the event
  # record, the metrics, the last good copy of the policy (default paths, in the private root).
  sha=$(sha256sum "$PR/etc/nri/nri-qos.toml" | cut -d' ' -f1)
  plain_json "plain invoke: policy metadata (file, sha256)" "$PW/ct-hit.out" \
    "m = r['metadata']; assert m['policy'] == 'file' and m['policy_sha256'] == '$sha' and 'policy_error' not in m, m"
  python3 - "$PR/var/log/nri-qos/events.log" "$CT_ID" <<'PY' && pass "plain invoke: one event record per run in /var/log/nri-qos/events.log" \
    || fail "plain invoke: event log /var/log/nri-qos/events.log"
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1])]
assert len(recs) == 7, len(recs)  # sb, ct-miss, ct-hit, ct-opts, null, conf-missing, half
hits = [x for x in recs if x.get("id", "").startswith(sys.argv[2][:12]) and x.get("outcome") == "ok" and x.get("policy") == "file"]
assert len(hits) >= 3 and all(x.get("class") == "LS" for x in hits), recs
assert any(x.get("policy_error") for x in recs), recs
PY
  prom=$PR/var/lib/node_exporter/textfile_collector/nri_qos.prom
  if grep -q '^nri_qos_events_total{' "$prom" 2>/dev/null && grep -q '^nri_qos_policy_errors_total 1$' "$prom"; then
    pass "plain invoke: metrics textfile written (events, policy errors)"
  else
    fail "plain invoke: metrics textfile '$(head -c 300 "$prom" 2>/dev/null)'"
  fi
  ls "$PR"/var/lib/nri-qos/*.toml >/dev/null 2>&1 && pass "plain invoke: last good policy copy in /var/lib/nri-qos" \
    || fail "plain invoke: no last good copy: $(ls -R "$PR/var/lib" 2>&1 | head -c 300)"
  plain_json "plain invoke: deadline on a half request" "$PW/half.out" "assert r['error'] == '' and 'deadline exceeded' in r['metadata'].get('error', '') + r['metadata'].get('warning', ''), r"
  # fail-closed policy: a bad request is a Result error, exit 1
  PC=$S/private-closed
  plain_root "$PC" "$PD/closed.toml"
  plain_session "$PC" '"$BIN" invoke <"$IN/null" >'"$PW"'/closed.out 2>/dev/null; echo $? >'"$PW"'/closed.rc'
  [ "$(cat "$PW/closed.rc")" = 1 ] && pass "plain invoke: fail-closed bad request exits 1" || fail "plain invoke: fail-closed exit $(cat "$PW/closed.rc")"
  plain_json "plain invoke: fail-closed bad request" "$PW/closed.out" "assert r['error'].startswith('nri-qos: bad request: /: expected a JSON object'), r"
  # No policy file at all (the binary alone): the compiled-in policy, no policy_error.
  PN=$S/private-nofile
  plain_root "$PN" "$POLICY_SRC"; rm "$PN/etc/nri/nri-qos.toml"
  plain_session "$PN" '"$BIN" invoke <"$IN/ct.json" >'"$PW"'/nofile.out 2>'"$PW"'/nofile.err; echo $? >'"$PW"'/nofile.rc'
  [ "$(cat "$PW/nofile.rc")" = 0 ] && pass "plain invoke: no policy file: exit 0" || fail "plain invoke: no policy file: exit $(cat "$PW/nofile.rc"), '$(head -c 300 "$PW/nofile.err")'"
  plain_json "plain invoke: no policy file: built-in policy" "$PW/nofile.out" \
    "m = r['metadata']; assert r['error'] == '' and m['policy'] == 'builtin' and m['class'] == 'DEFAULT' and 'policy_error' not in m, m"
fi
# Every other command line goes through CLI11, which prints with the standard streams: they are
# started there (main.cpp start_iostreams).
out=$("$BIN" --help 2>&1); rc=$?
[ $rc = 0 ] && [[ $out == *"Usage:"* ]] && pass "CLI: --help prints the usage" || fail "CLI: --help: exit $rc, '${out:0:200}'"
out=$("$BIN" invoke --help 2>&1); rc=$?
[ $rc = 0 ] && [[ $out == *"--cgroup-root"* ]] && pass "CLI: invoke --help" || fail "CLI: invoke --help: exit $rc, '${out:0:200}'"
out=$("$BIN" --version 2>&1); rc=$?
[ $rc = 0 ] && [[ $out == "nri-qos "* ]] && pass "CLI: --version" || fail "CLI: --version: exit $rc, '${out:0:200}'"
out=$("$BIN" frobnicate 2>&1 >/dev/null); rc=$?
[ $rc != 0 ] && [ $rc -lt 128 ] && [[ $out == *frobnicate* ]] && pass "CLI: unknown command refused on stderr (exit $rc)" \
  || fail "CLI: unknown command: exit $rc, stderr '${out:0:200}'"
out=$("$BIN" invoke --cgroup-layout v3 </dev/null 2>&1 >/dev/null); rc=$?
[ $rc = 2 ] && [[ $out == *"--cgroup-layout"* ]] && pass "CLI: invoke with a bad option value" || fail "CLI: invoke --cgroup-layout v3: exit $rc, '${out:0:200}'"

grep -rl sentinel "$OUTSIDE" | wc -l | { read -r n; want=$(find "$OUTSIDE" -type f | wc -l); [ "$n" = "$want" ] && pass "outside sentinels untouched after all cases" || fail "outside sentinels: $n of $want still sentinel"; }

exit "$FAILED"
