#!/bin/bash
# Short functions at the centre (issue #35): the length of every function in src/, read with
# universal-ctags (first to end line; a lambda counts in its enclosing function). Lists the 15
# longest. Rules:
#   function-length-max      no function over 150 lines, except those of
#                            tests/function-length.baseline (the functions over 100 lines when the
#                            check came in, with their lengths then), none of which may grow
#   function-length-baseline the baseline is exact: a listed function down to 100 lines or gone
#                            must leave it, so it only gets shorter
#   function-length-why      a function over 100 lines outside the baseline has a comment saying
#                            why in the 3 lines above its first line ("// long: <why>")
#   function-length-detects  the check finds a 151-line function (it can fail)
# SKIP with the reason without universal-ctags (scripts/deps.sh test installs it).
set -u
cd "$(dirname "$0")/.." || exit 1
if ! ctags --version 2>/dev/null | grep -q 'Universal Ctags'; then
  echo "SKIP function-length: universal-ctags is not installed (scripts/deps.sh test)"; exit 0
fi
lengths() { # DIR...: "LINES PATH NAME START" per function, longest first
  ctags --output-format=json --fields=+ne --kinds-c++=f --kinds-c=f -R -f - "$@" | python3 -c '
import json, sys
out = []
for line in sys.stdin:
    t = json.loads(line)
    if "end" not in t: continue
    name = (t["scope"] + "::" if t.get("scope") else "") + t["name"]
    out.append((t["end"] - t["line"] + 1, t["path"], name, t["line"]))
for n, p, name, l in sorted(out, reverse=True): print(n, p, name, l, sep="\t")'
}
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
lengths src > "$T/all"
echo "# the 15 longest functions in src/ (lines, file, function):"
head -15 "$T/all" | awk -F'\t' '{ print "#   " $1, $2, $3 }'
# anonymous namespaces and lambdas get a hash from ctags (__anonXXXX): names are compared without it
BASE=tests/function-length.baseline
python3 - "$T/all" "$BASE" <<'PY'
import re, sys
anon = lambda s: re.sub(r"__anon[0-9a-f]+", "__anon", s)
base = {}
for l in open(sys.argv[2]):
    l = l.split("#")[0].split()
    if l: base[(l[1], l[2])] = int(l[0])
src = {}
def above(path, start):
    if path not in src: src[path] = open(path, encoding="utf-8", errors="replace").read().split("\n")
    return "\n".join(src[path][max(0, start - 4):start - 1])
bad, why, shrunk, seen = [], [], [], set()
for n, path, name, start in (l.rstrip("\n").split("\t") for l in open(sys.argv[1])):
    n, start, key = int(n), int(start), (path, anon(name))
    if key[1].split("::")[-1].startswith("__anon"): continue   # a lambda: counted in its function
    if key in base:
        seen.add(key)
        if n > base[key]: bad.append("%s %s: %d lines, grew past its baseline %d" % (path, key[1], n, base[key]))
        elif n <= 100: shrunk.append("%s %s (%d lines now)" % (path, key[1], n))
    elif n > 150: bad.append("%s %s: %d lines" % (path, key[1], n))
    elif n > 100 and not re.search(r"//\s*long:", above(path, start)): why.append("%s %s: %d lines" % (path, key[1], n))
stale = ["%s %s (not found)" % k for k in base if k not in seen]
left = sum(1 for v in base.values() if v > 150)
if bad: print("FAIL function-length-max: " + "; ".join(bad))
else: print("PASS function-length-max: no function over 150 lines, none grew; %d baselined ones over 150 left to split (issue #35)" % left)
if shrunk or stale: print("FAIL function-length-baseline: remove from %s: %s" % (sys.argv[2], "; ".join(shrunk + stale)))
else: print("PASS function-length-baseline: every one of its %d functions is still there, over 100 lines" % len(base))
if why: print("FAIL function-length-why: over 100 lines without a '// long: <why>' comment in the 3 lines above: " + "; ".join(why))
else: print("PASS function-length-why: every function over 100 lines outside the baseline says why")
PY
# the check can fail: a generated 151-line function is found over 150
mkdir -p "$T/src"
{ echo 'int f() {'; for i in $(seq 149); do echo "  int v$i = $i;"; done; echo '}'; } > "$T/src/long.cpp"
n=$(lengths "$T/src" | awk -F'\t' 'NR == 1 { print $1 }')
if [ "${n:-0}" = 151 ]; then echo "PASS function-length-detects: a 151-line function measures 151"
else echo "FAIL function-length-detects: a 151-line function measures '${n:-nothing}'"; fi
