#!/bin/bash
# The one dialect (issue #35): every tracked C and C++ file is as clang-format formats it with the
# repository's .clang-format (src/README.md, "One dialect"). clang-format is Debian's
# (scripts/deps.sh check installs it); a different major version formats some constructs
# differently, so the version is printed and a missing clang-format is a SKIP with the reason.
#   format-clean   no file differs from its formatted form (the first lines of each diff shown)
#   format-detects a file with a style error is reported (the check itself can fail)
# Fix: clang-format -i $(git ls-files '*.c' '*.cpp' '*.h' '*.hpp')
set -u
cd "$(dirname "$0")/.." || exit 1
CF=${CLANG_FORMAT:-clang-format}
if ! command -v "$CF" >/dev/null; then echo "SKIP format: $CF is not installed (scripts/deps.sh check)"; exit 0; fi
echo "# $("$CF" --version)"
mapfile -t files < <(git ls-files '*.c' '*.cpp' '*.h' '*.hpp' 2>/dev/null)
if [ ${#files[@]} = 0 ]; then echo "SKIP format: not a git work tree (git ls-files lists no source)"; exit 0; fi
bad=()
for f in "${files[@]}"; do
  [ -f "$f" ] || continue
  if ! "$CF" --style=file "$f" | cmp -s - "$f"; then
    bad+=("$f")
    "$CF" --style=file "$f" | diff -u "$f" - | sed -n '3,12p' | sed "s|^|# $f: |"
  fi
done
if [ ${#bad[@]} = 0 ]; then echo "PASS format-clean: ${#files[@]} C/C++ files as .clang-format formats them"
else echo "FAIL format-clean: ${#bad[@]} of ${#files[@]} files are not formatted (clang-format -i ${bad[*]:0:8})"; fi
# the check can fail: a file formatted, then spoiled, is caught
t=$(mktemp -d); trap 'rm -rf "$t"' EXIT
cp .clang-format "$t/"
printf 'int f(int a){if(a) return 1;\n  return   0;}\n' > "$t/x.cpp"
if "$CF" --style=file "$t/x.cpp" | cmp -s - "$t/x.cpp"; then echo "FAIL format-detects: an unformatted file passes"
else echo "PASS format-detects: an unformatted file is reported"; fi
