#!/bin/bash
# Build the source tarball dist/nri-qos-VERSION.tar.gz (top directory nri-qos-VERSION/).
# Usage: scripts/dist.sh VERSION
#
# File list: in a git work tree, every file git knows or would add — `git ls-files --cached
# --others --exclude-standard` — taken from the WORK TREE (uncommitted edits included, files
# deleted in the work tree skipped, .gitignore'd files such as build/ and dist/ never included).
# Without git (or outside a work tree): every file under the source root except .git/, build/,
# dist/ and object/dependency files.
# The tarball always carries a VERSION file holding VERSION (the Makefile reads it), so a build
# from the tarball reports the right version even if the tree has no VERSION file.
# Reproducible: sorted names, fixed owner, mtime = SOURCE_DATE_EPOCH (default: last commit time,
# else the newest file mtime), gzip -n.
set -euo pipefail

[ $# -eq 1 ] && [ -n "$1" ] || { echo "usage: scripts/dist.sh VERSION" >&2; exit 2; }
VERSION=$1
case "$VERSION" in
  *[!A-Za-z0-9.+~_-]*) echo "dist.sh: invalid VERSION '$VERSION'" >&2; exit 2 ;;
esac

ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
NAME=nri-qos-$VERSION
STAGE=build/dist-stage
OUT=dist/$NAME.tar.gz

list_files() {
  if command -v git >/dev/null 2>&1 && git -C "$ROOT" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    git -C "$ROOT" ls-files -z --cached --others --exclude-standard | tr '\0' '\n' |
      grep -v -E '^(build|dist)/' || true
  else
    find . -path ./.git -prune -o -path ./build -prune -o -path ./dist -prune -o \
      \( -type f -o -type l \) ! -name '*.o' ! -name '*.d' -print | sed 's|^\./||'
  fi
}

# Source files hidden by a .gitignore pattern would silently be left out of the tarball.
if command -v git >/dev/null 2>&1 && git -C "$ROOT" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  hidden=$(git -C "$ROOT" ls-files --others --ignored --exclude-standard -- src conf man docs packaging deploy 2>/dev/null || true)
  [ -z "$hidden" ] || echo "dist.sh: warning: git-ignored, NOT in the tarball: $(echo $hidden)" >&2
fi

rm -rf "$STAGE"
mkdir -p "$STAGE/$NAME" dist
n=0
while IFS= read -r f; do
  [ -n "$f" ] || continue
  [ -e "$f" ] || [ -L "$f" ] || continue          # deleted in the work tree
  [ -d "$f" ] && [ ! -L "$f" ] && continue        # submodule/dir entries
  mkdir -p "$STAGE/$NAME/$(dirname "$f")"
  cp -a "$f" "$STAGE/$NAME/$f"
  n=$((n + 1))
done < <(list_files | LC_ALL=C sort -u)
[ "$n" -gt 0 ] || { echo "dist.sh: no source files found" >&2; exit 1; }

if [ -z "${SOURCE_DATE_EPOCH:-}" ]; then
  SOURCE_DATE_EPOCH=$(git -C "$ROOT" log -1 --format=%ct 2>/dev/null || true)
  # No commit yet: the newest mtime among the packed files (stable for an unchanged tree).
  [ -n "$SOURCE_DATE_EPOCH" ] ||
    SOURCE_DATE_EPOCH=$(find "$STAGE/$NAME" -type f -printf '%T@\n' | sort -n | tail -1 | cut -d. -f1)
fi
printf '%s\n' "$VERSION" > "$STAGE/$NAME/VERSION"
tar --sort=name --mtime="@$SOURCE_DATE_EPOCH" --owner=0 --group=0 --numeric-owner \
    --mode='u+rw,go+r,go-w' -C "$STAGE" -cf - "$NAME" | gzip -n -9 > "$OUT.tmp"
mv -f "$OUT.tmp" "$OUT"
rm -rf "$STAGE"
echo "dist.sh: $OUT ($n files + VERSION)"
