#!/bin/bash
# Docs match the code (issue #20 §6): every default, mode and path that docs/ and man/ state is
# checked against what the binary says (`--help`, its built-in strings, what `register` does in
# a scratch directory) and against the packaging files.
# Prints PASS/FAIL/SKIP lines; exit 1 on failure.
. "$(dirname "$0")/lib.sh"
cd "$TOP" || exit 1
[ -x "$BIN" ] || { fail "docs: $BIN not built"; finish; }
R=$(scratch)

# 1. Every "(default X" of the evaluation and relay options is what man/nri-qos.8 says for the
#    same option (its last .BI definition, i.e. the OPTIONS entry, and the lines after it).
{ "$BIN" invoke --help; "$BIN" relay --help; } 2>&1 > "$R/help.txt"
python3 - "$R/help.txt" man/nri-qos.8 > "$R/defaults.out" <<'EOF'
import re, sys
help_text = open(sys.argv[1]).read()
man = open(sys.argv[2]).read().split("\n")
def plain(line):
    line = re.sub(r"^\.(BI|IR|BR|I|B|RB|RI)\s+", "", line)
    return line.replace("\\-", "-").replace('"', "").replace("\\(dq", '"')
seen = set()
for m in re.finditer(r"^\s+(--[a-z-]+) \S+\s+.*?\(default ([^;):,]+)", help_text, re.M):
    opt, default = m.group(1), m.group(2).strip()
    if opt in seen:
        continue
    seen.add(opt)
    want = default.split()[0]  # "1000", "/run/nri-qos", "auto", "{}"
    esc = opt.replace("-", "\\-")
    # An option's entry: a .BI/.BR/.B line naming it right after .TP (mentions elsewhere are not).
    defs = [i for i, l in enumerate(man) if i > 0 and man[i - 1] == ".TP" and
            any(l == p + esc or l.startswith(p + esc + " ") for p in (".BI ", ".BR ", ".B "))]
    n = 8
    if not defs:  # described in running text: ".B --opt" then "(default X)" on the next lines
        defs = [i for i, l in enumerate(man) if any(l == p + esc or l.startswith(p + esc + " ") for p in (".BI ", ".BR ", ".B "))]
        n = 3
    if not defs:
        print(f"FAIL docs-default{opt}: not described in man/nri-qos.8")
        continue
    i = defs[-1]
    block = " ".join(plain(l) for l in man[i:i + n])
    if want in block:
        print(f"PASS docs-default{opt} ({want})")
    else:
        print(f"FAIL docs-default{opt}: --help says default {want}, man/nri-qos.8 says: {block[:200]}")
EOF
cat "$R/defaults.out"; grep -q '^FAIL' "$R/defaults.out" && FAILED=1
[ -s "$R/defaults.out" ] || fail "docs-defaults: no option defaults found in --help"

# 2. The native plugin entry: `register --native` makes a symlink; the docs must not say a symlink
#    is never launched, and they name the entry register makes.
mkdir -p "$R/plugins" "$R/bin" && cp "$BIN" "$R/bin/nri-qos"
"$BIN" register --mode native --plugins-dir "$R/plugins" --binary "$R/bin/nri-qos" \
    --containerd-config /dev/null --containerd-version 2.1.0 >/dev/null 2>&1
link=$(readlink "$R/plugins/10-nri-qos" 2>/dev/null)
check docs-register-native-makes-symlink "$link" "$R/bin/nri-qos"
if grep -rqi 'symlink is not a regular file\|must be a \*\*copy\*\*' docs man README.md; then
  fail "docs-native-plugin-entry: docs say a symlink is not launched, but register --native makes one"
else pass docs-native-plugin-entry; fi
check_contains docs-native-plugin-path "$(cat docs/native-nri.md docs/install.md)" "/opt/nri/plugins/10-nri-qos"

# 3. The relay's default log file: the one compiled into the binary, the one the docs name and the
#    one logrotate rotates.
relay_log=$(grep -ao '/var/log/nri-qos/relay\.log' "$BIN" | head -1)
check docs-relay-log-in-binary "$relay_log" /var/log/nri-qos/relay.log
check_contains docs-relay-log-documented "$(cat docs/native-nri.md)" "$relay_log"
check_contains docs-relay-log-rotated "$(cat packaging/logrotate/nri-qos)" "$relay_log"
if grep -qi 'nothing the relay logs is\s*$\|nothing the relay logs is visible' docs/native-nri.md; then
  fail "docs-relay-log-default: docs/native-nri.md says the relay logs nowhere by default"
else pass docs-relay-log-default; fi

# 4. What the packages register: postinst runs `register` without a mode, i.e. detection; the
#    install guide must say so (not "the packages set up NRI v0.1").
if grep -q 'nri-qos register\( \|$\)' packaging/deb/debian/postinst && ! grep -q 'register.*--mode\|register.*--native' packaging/deb/debian/postinst; then
  if grep -qi 'packages .*set up NRI v0.1' docs/install.md || ! grep -qi 'detect' docs/install.md; then
    fail "docs-package-mode: postinst registers with mode detection; docs/install.md says otherwise"
  else pass docs-package-mode; fi
else skip "docs-package-mode (postinst does not run a plain register)"; fi
#    The package descriptions (what `apt show` / `rpm -qi` print) say the same: detection, both
#    modes, the relay service; never "native mode is enabled by hand" or iSulad as a v0.1 runtime.
for desc in packaging/deb/debian/control packaging/rpm/nri-qos.spec; do
  text=$(sed -n '/^Description:/,/^$/p; /^%description/,/^%prep/p' "$desc" | tr -s ' \n' '  ')
  if grep -qi 'enabled by hand\|(containerd, iSulad)' <<<"$text"; then
    fail "docs-package-description ($desc): still says native mode is set up by hand, or iSulad runs v0.1 hooks"
  elif grep -qi 'detects the runtime' <<<"$text" && grep -q 'nri-qos-relay' <<<"$text" && grep -q '/opt/nri/plugins' <<<"$text"; then
    pass "docs-package-description ($desc)"
  else
    fail "docs-package-description ($desc): does not name the detection, /opt/nri/plugins and the nri-qos-relay service"
  fi
done
auto=$("$BIN" register --help 2>&1 | grep -c -- '--mode .*auto')
check docs-register-mode-auto-exists "$auto" 1

# 5. The metrics textfile default of each build: the upstream one (plain make, the rpm) is what
#    --help says and what the docs name; the Debian package's is what debian/rules builds with.
up=$("$BIN" invoke --help 2>&1 | sed -n 's/.*--metrics-file.*(default \([^;]*\);.*/\1/p')
check_contains docs-metrics-default-upstream "$(cat docs/operations.md man/nri-qos.8)" "$up"
deb=$(sed -n 's/.*METRICS_FILE=\([^ ]*\).*/\1/p' packaging/deb/debian/rules | head -1)
[ -n "$deb" ] && check_contains docs-metrics-default-deb "$(cat docs/operations.md)" "$deb" \
  || fail "docs-metrics-default-deb: debian/rules sets no METRICS_FILE"

# 6. docs/native-nri.md's runtime matrix names, in its "tested by" column ("suite `X`"), exactly
#    the suites tests/e2e/run.sh runs by default (its `suites=(...)` list), and tests/run.sh
#    (make check) runs every one of them: a suite added, renamed or dropped without the matrix
#    (or the matrix claiming a suite that does not run) fails here.
e2e_suites=$(sed -n 's/.*\[ \${#suites\[@\]} = 0 \] && suites=(\([^)]*\)).*/\1/p' tests/e2e/run.sh | tr ' ' '\n' | grep . | sort -u)
matrix=$(awk '/^### Runtime matrix/ {on = 1; next} on && /^#/ {on = 0} on && /^\| /' docs/native-nri.md)
matrix_suites=$(grep -o 'suite `[a-z0-9]*`' <<<"$matrix" | sed 's/suite `\(.*\)`/\1/' | sort -u)
check_suites=$( { sed -n 's/.*suite e2e tests\/e2e\/run.sh \(.*\)$/\1/p' tests/run.sh | tr ' ' '\n'
                  grep -q 'suite e2e-vm tests/e2e/run.sh vm' tests/run.sh && echo vm; } | grep . | sort -u)
if [ -z "$e2e_suites" ] || [ -z "$matrix" ]; then
  fail "docs-runtime-matrix: no suite list in tests/e2e/run.sh or no '### Runtime matrix' table in docs/native-nri.md"
elif [ "$e2e_suites" != "$matrix_suites" ]; then
  fail "docs-runtime-matrix: run.sh runs '$(echo $e2e_suites)', the matrix names '$(echo $matrix_suites)'"
elif [ "$e2e_suites" != "$check_suites" ]; then
  fail "docs-runtime-matrix: run.sh's suites '$(echo $e2e_suites)', make check (tests/run.sh) runs '$(echo $check_suites)'"
else
  pass "docs-runtime-matrix ($(echo $e2e_suites))"
fi
finish
