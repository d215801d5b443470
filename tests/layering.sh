#!/bin/bash
# Includes only go down the stack (issue #23). The folders of src/, bottom first, are the
# Makefile's SRC_DIRS (os model records policy facts event nri cli; src/README.md argues the
# cut). A file in src/<F>/ may include "<G>/x.hpp" only when G is F or below F; every project
# include names its folder ("policy/policy.hpp", never "policy.hpp"), so the direction is visible
# in the line itself. src/tools (build-time generators) sit on top.
#   LAYERING_SRC=DIR bash tests/layering.sh   checks another tree (the test's own self-check).
# Prints PASS/FAIL lines and a summary; exit 1 on any violation.
set -u
cd "$(dirname "$0")/.."
SRC=${LAYERING_SRC:-src}
order=$(sed -n 's/^SRC_DIRS *:= *//p' Makefile)
[ -n "$order" ] || { echo "FAIL layering: no SRC_DIRS in the Makefile"; exit 1; }
pass=0 fail=0
ok() { echo "PASS $*"; pass=$((pass + 1)); }
bad() { echo "FAIL $*"; fail=$((fail + 1)); }

# rank of a folder: its position in SRC_DIRS (1 = bottom); tools on top
declare -A rank
i=0
for d in $order; do i=$((i + 1)); rank[$d]=$i; done
rank[tools]=$((i + 1))

check_tree() {  # prints one line per violation
  local f dir inc tgt
  for f in "$SRC"/*/*.cpp "$SRC"/*/*.hpp; do
    [ -f "$f" ] || continue
    dir=$(basename "$(dirname "$f")")
    [ -n "${rank[$dir]:-}" ] || continue  # cri, helper: programs of their own
    while IFS= read -r inc; do
      case $inc in
        */*) tgt=${inc%%/*} ;;
        *) # a bare name: only generated files (build/gen) and the folder's own are allowed
          if [ -f "$SRC/$dir/$inc" ] || [ -z "$(find "$SRC" -name "$inc" -print -quit)" ]; then continue; fi
          echo "$f: #include \"$inc\" without its folder"; continue ;;
      esac
      [ -n "${rank[$tgt]:-}" ] || continue  # nri/nri.pb.h resolves to build/gen/nri: same folder
      if [ "${rank[$tgt]}" -gt "${rank[$dir]}" ]; then
        echo "$f ($dir) includes $inc ($tgt is above $dir)"
      fi
    done < <(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$f")
  done
}

# 1. the tree
v=$(check_tree)
if [ -z "$v" ]; then
  ok "layering: every include in $SRC goes down the stack ($order)"
else
  bad "layering: $(echo "$v" | wc -l) include(s) up the stack:"; echo "$v" | sed 's/^/  /'
fi

# 2. the check itself can fail: a scratch copy with one include up the stack (os -> cli) and one
#    without its folder is refused on both counts.
if [ -z "${LAYERING_SRC:-}" ]; then
  tmp=$(mktemp -d /tmp/nri-qos-layering.XXXXXX)
  cp -r "$SRC" "$tmp/src"
  f=$(ls "$tmp"/src/os/*.cpp | head -1)
  printf '#include "cli/status.hpp"\n#include "pipeline.hpp"\n' >>"$f"
  out=$(LAYERING_SRC="$tmp/src" bash "$0" 2>&1)
  if echo "$out" | grep -q "includes cli/status.hpp (cli is above os)" && echo "$out" | grep -q '"pipeline.hpp" without its folder'; then
    ok "layering: an include up the stack and one without its folder are refused (self-check)"
  else
    bad "layering: the self-check's planted includes were not refused: $out"
  fi
  rm -rf "$tmp"
fi

# 3. every folder opens with a README that names what it may include
for d in $order; do
  if [ -f "$SRC/$d/README.md" ] && grep -qi "may include" "$SRC/$d/README.md"; then
    ok "layering: src/$d/README.md says what the folder may include"
  else
    bad "layering: src/$d/README.md missing or without a \"may include\" line"
  fi
done
# 4. a newcomer finds a file in one step: every source file of a folder is named in its README
for d in $order; do
  missing=""
  for f in "$SRC/$d"/*.cpp "$SRC/$d"/*.hpp "$SRC/$d"/*.proto; do
    [ -f "$f" ] || continue
    b=$(basename "$f"); stem=${b%.*}
    grep -q "\b$stem\.\(cpp\|hpp\|proto\)\|\b$stem\.hpp/\.cpp\|\b$b\b" "$SRC/$d/README.md" 2>/dev/null || missing="$missing $b"
  done
  if [ -z "$missing" ]; then ok "layering: src/$d/README.md names every file of the folder"
  else bad "layering: src/$d/README.md does not name:$missing"; fi
done

# 5. no stale path: every src/... and tests/unit/... file that the docs, man pages, READMEs and
#    comments name exists (a move that forgot a reference fails here). Brace forms
#    (src/os/kernel.{hpp,cpp}) name each file; a glob (src/nri/relay*.cpp) must match one at least.
if [ -z "${LAYERING_SRC:-}" ]; then
  stale=$(git ls-files -- '*.md' '*.cpp' '*.hpp' '*.sh' '*.py' 'man/*' 'Makefile' 2>/dev/null | grep -v '^tests/conformance/cases/' |
    xargs grep -ohE '(^|[^A-Za-z0-9_./-])(src|tests/unit)/[A-Za-z0-9_/*-]+\.(cpp|hpp|proto|sh|ld|specs|\{[a-z,]+\})' 2>/dev/null |
    sed -E 's/^[^st]*//' | sort -u | while read -r path; do
      case $path in
        *.\{*\}) stem=${path%.\{*}; exts=${path##*.\{}; exts=${exts%\}}
                 for e in ${exts//,/ }; do [ -e "$stem.$e" ] || echo "$stem.$e"; done ;;
        *\**) compgen -G "$path" >/dev/null || echo "$path" ;;
        *) [ -e "$path" ] || echo "$path" ;;
      esac
    done)
  if [ -z "$stale" ]; then ok "layering: every src/ and tests/unit/ path named in the tree exists"
  else bad "layering: named but missing: $(echo $stale)"; fi
fi
# 6. docs/architecture.md points at real code: in every table row "| ... | [path](..) | `symbol` |"
#    the file exists and contains the symbol (the four-click trail of cpu.cfs_burst_us included)
if [ -z "${LAYERING_SRC:-}" ] && [ -f docs/architecture.md ]; then
  arch=$(python3 - <<'PY'
import re
n = bad = 0
for line in open("docs/architecture.md"):
    m = re.match(r"^\|.*\]\(\.\./([^)]+)\)\s*\|\s*`([^`]+)`\s*\|\s*$", line)
    if not m:
        continue
    path, sym = m.group(1), m.group(2)
    n += 1
    try:
        text = open(path).read()
    except OSError:
        print("missing file %s" % path); bad += 1; continue
    if sym not in text:
        print("%s has no %s" % (path, sym)); bad += 1
print("rows %d" % n)
PY
)
  rows=$(echo "$arch" | sed -n 's/^rows //p')
  if [ "$(echo "$arch" | grep -vc '^rows ')" -eq 0 ] && [ "${rows:-0}" -ge 20 ]; then
    ok "layering: docs/architecture.md: all $rows file/symbol rows point at real code"
  else
    bad "layering: docs/architecture.md: $(echo "$arch" | tr '\n' ';')"
  fi
fi
echo "== layering: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
