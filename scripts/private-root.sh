#!/bin/bash
# Usage: scripts/private-root.sh ROOT CMD [ARG...]
#
# Runs CMD (as root) in a private mount and pid namespace (unshare(1)) in which nri-qos's default
# paths are ROOT's, so that a plain `nri-qos invoke` — the command line containerd runs, with no
# options — can be tested and measured on a scratch tree:
#   /etc/nri        = ROOT/etc/nri     (ROOT/etc is the upper layer of a private overlay of /etc)
#   /var            = ROOT/var, empty but for var/run -> /run, var/lock -> /run/lock and var/tmp
#                     (the event log /var/log/nri-qos, the metrics textfile under
#                     /var/lib/node_exporter, the last good policy copies /var/lib/nri-qos start
#                     empty: nothing of the host's own files shows through)
#   /run/nri-qos    = ROOT/run/nri-qos (ROOT/run is bind-mounted over /run)
#   /sys/fs/cgroup  = ROOT/cgroup
#   /proc           = the namespace's own (a request's pid can only name a process started here)
# Nothing of the host changes; the mounts vanish with the namespace. ROOT must be an absolute
# path; its etc/nri, run/nri-qos and cgroup directories are created if missing.
set -euo pipefail
ROOT=${1:?usage: private-root.sh ROOT CMD [ARG...]}
shift
[ $# -gt 0 ] || { echo "private-root.sh: no command" >&2; exit 2; }
case $ROOT in /*) ;; *) echo "private-root.sh: ROOT must be absolute" >&2; exit 2 ;; esac
[ "$(id -u)" = 0 ] || { echo "private-root.sh: needs root (mount namespaces)" >&2; exit 2; }
mkdir -p "$ROOT/etc/nri" "$ROOT/.etc-work" "$ROOT/var/tmp" "$ROOT/run/nri-qos" "$ROOT/cgroup"
chmod 1777 "$ROOT/var/tmp"
[ -L "$ROOT/var/run" ] || ln -s /run "$ROOT/var/run"
[ -L "$ROOT/var/lock" ] || ln -s /run/lock "$ROOT/var/lock"
# shellcheck disable=SC2016
exec unshare --mount --propagation private --pid --fork --mount-proc bash -c '
  set -e
  R=$1; shift
  mount -t overlay overlay -o "lowerdir=/etc,upperdir=$R/etc,workdir=$R/.etc-work" /etc
  mount --bind "$R/var" /var
  mount --bind "$R/run" /run
  mount --bind "$R/cgroup" /sys/fs/cgroup
  exec "$@"' private-root "$ROOT" "$@"
