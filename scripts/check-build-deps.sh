#!/bin/sh
# Called by the Makefile before anything is compiled: are the build dependencies there?
# Without them `make` would stop at the first missing command with "Error 127" (or a missing
# header deep in a compile); this names everything missing at once and the command that
# installs it.
# Usage: scripts/check-build-deps.sh CXX PROTOC ITEM...   ITEM = header-or-lib:debian-package
#   (a name ending in .a is a static library looked up with $CXX -print-file-name, anything
#   else a header looked up in $CXX's #include <...> search path). Exit 0 = all there.
cxx=$1 protoc=$2
shift 2
missing="" pkgs=""
add() { missing="$missing
    $1"; case " $pkgs " in *" $2 "*) ;; *) pkgs="$pkgs $2" ;; esac; }

if command -v "$cxx" >/dev/null 2>&1; then
  dirs=$("$cxx" -xc++ -E -v /dev/null 2>&1 | sed -n '/#include <\.\.\.> search starts here:/,/End of search list/p' | sed -n 's/^ //p')
  for item in "$@"; do
    name=${item%%:*} pkg=${item#*:}
    case $name in
      *.a) p=$("$cxx" -print-file-name="$name" 2>/dev/null); [ -n "$p" ] && [ "$p" != "$name" ] && [ -f "$p" ] || add "$name (static library; Debian package $pkg)" "$pkg" ;;
      *) found=""; for d in $dirs; do [ -f "$d/$name" ] && found=1 && break; done
         [ -n "$found" ] || add "<$name> (header; Debian package $pkg)" "$pkg" ;;
    esac
  done
else
  add "$cxx (the C++ compiler; Debian package g++; headers and libraries not checked)" g++
fi
command -v "$protoc" >/dev/null 2>&1 || add "$protoc (protobuf compiler; Debian package protobuf-compiler)" protobuf-compiler

[ -z "$missing" ] && exit 0
cat >&2 <<MSG
nri-qos: cannot build, missing build dependencies:$missing
Install them, then run make again:
    make deps            (Debian/Ubuntu, as root: scripts/deps.sh build, i.e. apt-get install$pkgs)
    make demo / make check install them by themselves.
On openEuler/Fedora: dnf install the BuildRequires of packaging/rpm/nri-qos.spec.
MSG
exit 1
