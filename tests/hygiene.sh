#!/bin/bash
# Tree hygiene: no package-registry host is written anywhere in the tree. Scripts that need a
# Debian mirror read it from the machine's apt sources at run time (tests/e2e/lib.sh
# debian_mirror); docs say "the mirror this machine's apt uses". The hosts checked are those of
# this machine's apt sources (/etc/apt/sources.list, /etc/apt/sources.list.d/*, also disabled
# ones and URIs in comments) and of npm's configured registry.
# Prints PASS/FAIL/SKIP lines; exit 1 on failure.
set -u
cd "$(dirname "$0")/.." || exit 1

# The shell suites' scratch dirs (tests/lib.sh scratch, called in $(...) subshells) are gone
# once the suite exits.
left=$(bash -c '. tests/lib.sh; R=$(scratch); Q=$(scratch); touch "$R/f"; echo "$R $Q"')
if [ -n "$left" ] && ! ls -d $left >/dev/null 2>&1; then echo "PASS scratch-dirs-removed-at-exit"
else echo "FAIL scratch-dirs-removed-at-exit (left: $left)"; rm -rf $left; exit 1; fi

hosts=$( { cat /etc/apt/sources.list /etc/apt/sources.list.d/* 2>/dev/null
           command -v npm >/dev/null && timeout 20 npm config get registry 2>/dev/null; } \
         | grep -oE '[a-z][a-z0-9+.-]*://[^/[:space:]"]+' | sed 's|^[^:]*://||; s|^[^@]*@||; s|:[0-9]*$||' \
         | grep '\.' | sort -u)
if [ -z "$hosts" ]; then echo "SKIP no-registry-hosts (no apt sources or npm registry on this machine)"; exit 0; fi

if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  files() { git ls-files -z --cached --others --exclude-standard; }
else
  files() { find . -path ./build -prune -o -path ./dist -prune -o -path ./.git -prune -o -type f -print0; }
fi
found=""
while read -r h; do
  hits=$(files | xargs -0 grep -I -l -i -F -e "$h" 2>/dev/null | head -5 | tr '\n' ' ')
  [ -n "$hits" ] && found="$found $h in: $hits;"
done <<<"$hosts"
if [ -z "$found" ]; then echo "PASS no-registry-hosts ($(echo "$hosts" | wc -l) hosts checked)"
else echo "FAIL no-registry-hosts ($found)"; exit 1; fi
