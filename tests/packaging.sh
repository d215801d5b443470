#!/bin/bash
# tests/packaging.sh — packaging and installation suite (run by tests/run.sh, or alone).
# Prints `PASS name` / `FAIL name` / `SKIP name (why)`; exits 1 when anything failed.
#
#  dist-*       scripts/dist.sh: file list, VERSION file, reproducible, works without git
#  deb-*        make deb; content, conffiles, lintian; real `dpkg -i` / `dpkg -r` / `dpkg --purge`
#               of this machine's own system, chrooted into an overlay of / in a private mount
#               namespace: the real dpkg database and maintainer scripts, but every write lands in
#               a tmpfs layer, so the node (its /etc/nri, /opt/nri, dpkg database) and a
#               concurrently running containerd/e2e suite never see anything
#  rpm-*        make rpm; -qlp/-qip/-qcp/--scripts; scriptlets run for real by
#               `rpm --root SCRATCH` (static busybox as the scratch root's /bin/sh)
#  image-*      deploy/kubernetes/build-image.sh from the .deb; installer run in the image's
#               root file system (chroot) against a scratch HOST_ROOT (installer-*: modes, policy
#               sync, precompile into the node's cache, the relay's arguments)
#  k8s-*        ConfigMap in sync with conf/nri.d/nri-qos.toml; manifests validated offline
#               (deploy/kubernetes/validate: Kubernetes schemas + unknown-field check + nri-qos's
#               node rules: kubelet/resctrl/systemd mounts, the relay's capabilities, the node's
#               cache for install and policy-sync; k8s-validate-node-rules shows each one refuses)
# Needs root (dpkg -i, chroot, unshare) — SKIPs otherwise. Env: KEEP=1 keeps the scratch dir.
set -uo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
VERSION=$(cat VERSION 2>/dev/null || echo 0.0.0)
ARCH=$(dpkg --print-architecture 2>/dev/null || echo amd64)
FAILED=0
pass() { echo "PASS $1"; }
fail() { echo "FAIL $1${2:+ ($2)}"; FAILED=1; }
skip() { echo "SKIP $1 ($2)"; }
# check NAME CMD...: PASS when CMD succeeds. verdict NAME: PASS when the previous command did
# (use as `{ cond1 && cond2; }; verdict NAME` for compound conditions).
check() { local n=$1; shift; if "$@"; then pass "$n"; else fail "$n"; fi; }
verdict() { if [ $? = 0 ]; then pass "$1"; else fail "$1"; fi; }

SCRATCH=$(mktemp -d /tmp/nri-qos-packaging.XXXXXX)
cleanup() { [ -n "${KEEP:-}" ] && echo "# scratch kept: $SCRATCH" || rm -rf "$SCRATCH"; }
trap cleanup EXIT

if [ "$(id -u)" != 0 ]; then
  skip packaging "not root: dpkg -i, rpm --root, chroot and unshare need root"
  exit 0
fi
scripts/deps.sh build pkg >/dev/null || { fail deps "scripts/deps.sh build pkg"; exit 1; }

missing=""
for f in src/cli/main.cpp man/nri-qos.8 man/nri-qos.toml.5 conf/nri.d/nri-qos.toml; do
  [ -f "$f" ] || missing="$missing $f"
done

# ------------------------------------------------------------------------------------------
# dist
DIST=dist/nri-qos-$VERSION.tar.gz
if scripts/dist.sh "$VERSION" >"$SCRATCH/dist.log" 2>&1; then
  tar -tzf "$DIST" | sed "s|^nri-qos-$VERSION/||" | sort > "$SCRATCH/dist.list"
  ok=1
  for f in VERSION Makefile LICENSE scripts/dist.sh src/cli/register.cpp packaging/rpm/nri-qos.spec \
           packaging/deb/debian/rules deploy/kubernetes/install.sh tests/packaging.sh; do
    grep -qx "$f" "$SCRATCH/dist.list" || { ok=0; echo "# dist: $f missing"; }
  done
  if grep -qE '^(build|dist|\.git)/' "$SCRATCH/dist.list"; then ok=0; echo "# dist: build output inside"; fi
  [ "$(tar -xzOf "$DIST" "nri-qos-$VERSION/VERSION")" = "$VERSION" ] || ok=0
  check dist-content [ $ok = 1 ]
  if grep -q 'git-ignored' "$SCRATCH/dist.log"; then
    fail dist-ignored "$(grep git-ignored "$SCRATCH/dist.log")"
  else
    pass dist-ignored
  fi
  cp "$DIST" "$SCRATCH/dist1.tgz"
  scripts/dist.sh "$VERSION" >/dev/null 2>&1
  check dist-reproducible cmp -s "$DIST" "$SCRATCH/dist1.tgz"
  # Without git: unpack the tarball (no .git) and make the tarball again from it.
  mkdir -p "$SCRATCH/nogit" && tar -xzf "$DIST" -C "$SCRATCH/nogit"
  if (cd "$SCRATCH/nogit/nri-qos-$VERSION" && PATH=/usr/sbin:/usr/bin:/sbin:/bin GIT_DIR=/nonexistent \
        scripts/dist.sh "$VERSION" >/dev/null 2>&1); then
    tar -tzf "$SCRATCH/nogit/nri-qos-$VERSION/$DIST" | sed "s|^nri-qos-$VERSION/||" | sort > "$SCRATCH/nogit.list"
    check dist-without-git diff -q "$SCRATCH/dist.list" "$SCRATCH/nogit.list"
  else
    fail dist-without-git
  fi
else
  fail dist "$(tail -1 "$SCRATCH/dist.log")"
fi

# ------------------------------------------------------------------------------------------
# deb
DEB=build/deb/nri-qos_${VERSION}_${ARCH}.deb
if [ -n "$missing" ]; then
  skip deb "inputs not there yet:$missing"
  skip rpm "inputs not there yet:$missing"
  DEB=
# (with the caller's own parallel=N, as a Debian build farm sets it: build.sh adds none then)
elif ! DEB_BUILD_OPTIONS="parallel=$(nproc) ${DEB_BUILD_OPTIONS:-}" make -s deb >"$SCRATCH/deb.log" 2>&1 || [ ! -f "$DEB" ]; then
  fail deb-build "$(tail -3 "$SCRATCH/deb.log" | tr '\n' ' ')"
  DEB=
else
  pass deb-build
  dpkg-deb -c "$DEB" | awk '{print $6}' | sed 's|^\./|/|; s|/$||' | grep -v '^$' | sort > "$SCRATCH/deb.list"
  ok=1
  for f in /opt/nri/bin/nri-qos /usr/libexec/nri-qos/nri-qos-cri /opt/nri/plugins /etc/nri/nri-qos.toml \
           /usr/share/man/man8/nri-qos.8.gz /usr/share/man/man5/nri-qos.toml.5.gz \
           /usr/share/doc/nri-qos/copyright /usr/share/doc/nri-qos/install.md /usr/sbin/nri-qos \
           /usr/share/doc/nri-qos/operations.md /usr/share/doc/nri-qos/README.md \
           /lib/systemd/system/nri-qos-reconcile.service /lib/systemd/system/nri-qos-reconcile.timer \
           /lib/systemd/system/nri-qos-relay.service \
           /etc/logrotate.d/nri-qos /usr/libexec/nri-qos/nri-qos-systemd; do
    grep -qxE "$f(\.gz)?" "$SCRATCH/deb.list" || { ok=0; echo "# deb: $f missing"; }   # dh_compress
  done
  check deb-files [ $ok = 1 ]
  { [ "$(dpkg-deb -f "$DEB" Package)" = nri-qos ] && \
    [ "$(dpkg-deb --ctrl-tarfile "$DEB" | tar -xO ./conffiles | sort | tr '\n' ' ')" = "/etc/logrotate.d/nri-qos /etc/nri/nri-qos.toml " ]; }; verdict deb-conffiles
  mkdir -p "$SCRATCH/debx" && dpkg-deb -x "$DEB" "$SCRATCH/debx"
  # the companion that sets systemd unit properties links libsystemd (issue #25 §2)
  check deb-depends-libsystemd sh -c "dpkg-deb -f '$DEB' Depends | grep -q 'libsystemd0'"
  check deb-static-binary sh -c "! readelf -l '$SCRATCH/debx/opt/nri/bin/nri-qos' | grep -q 'program interpreter'"
  if lintian --suppress-tags-from-file /dev/null "$DEB" >"$SCRATCH/lintian.log" 2>&1 && \
     ! grep -qE '^(E|W):' "$SCRATCH/lintian.log"; then
    pass deb-lintian
  else
    fail deb-lintian "$(grep -E '^(E|W):' "$SCRATCH/lintian.log" | head -3 | tr '\n' ' ')"
  fi

  host_status=$(dpkg-query -W -f='${Status}' nri-qos 2>/dev/null)
  # Real dpkg -i of this machine's system, isolated: in a private mount namespace, an overlay
  # of / (writes go to a tmpfs upper layer; the node, its dpkg database and a concurrently
  # running containerd/e2e suite never see them) with /proc, /sys, /dev bound in; chroot there.
  if ! command -v unshare >/dev/null; then
    skip deb-install "unshare missing"
  else
    cat > "$SCRATCH/deb-install.sh" <<'EOS'
set -u
DEB=$1 OUT=$2 BIN=$3 O=$4
mkdir -p "$O" && mount -t tmpfs tmpfs "$O" && mkdir -p "$O/upper" "$O/work" "$O/m" || exit 90
mount -t overlay overlay -o "lowerdir=/,upperdir=$O/upper,workdir=$O/work" "$O/m" || exit 91
for d in proc sys dev; do mount --rbind "/$d" "$O/m/$d" || exit 92; done
for d in run tmp; do mount -t tmpfs tmpfs "$O/m/$d" || exit 93; done
M=$O/m
[ "$(findmnt -n -o FSTYPE "$M")" = overlay ] || exit 94   # never chroot-write into the real /
cp "$DEB" "$M/tmp/nri-qos.deb" && cp "$BIN" "$M/tmp/nri-qos.expected"
inroot() { chroot "$M" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin "$@"; }
# Known starting point (whatever the node has there is hidden, not touched).
inroot sh -c 'dpkg --purge nri-qos >/dev/null 2>&1; rm -rf /etc/nri /opt/nri /run/nri-qos; mkdir -p /etc/nri
  printf "{\"version\":\"0.1\",\"plugins\":[{\"type\":\"other\",\"conf\":{\"x\":1}}],\"site\":\"kept\"}\n" > /etc/nri/conf.json
  printf "# edited by the admin\nversion = 1\n" > /etc/nri/nri-qos.toml'
r() { echo "== $1"; shift; inroot "$@"; echo "rc=$?"; }
{
r install dpkg -i --force-confold /tmp/nri-qos.deb </dev/null
r conf cat /etc/nri/conf.json
r policy cat /etc/nri/nri-qos.toml
r dist-policy test -f /etc/nri/nri-qos.toml.dpkg-dist
r binary cmp /opt/nri/bin/nri-qos /tmp/nri-qos.expected
r on-path readlink -f /usr/sbin/nri-qos
r metrics-default sh -c '/opt/nri/bin/nri-qos invoke --help 2>&1 | grep -c "default /var/lib/prometheus/node-exporter/nri_qos.prom"'
r timer-enabled test -L /etc/systemd/system/timers.target.wants/nri-qos-reconcile.timer
cp "$M/opt/nri/bin/nri-qos" "$(dirname "$OUT")/installed-nri-qos"   # for the containerd e2e below
r setconf /opt/nri/bin/nri-qos register --plugin-conf '{"policy":"/etc/nri/site.toml"}'
r reinstall dpkg -i --force-confold /tmp/nri-qos.deb </dev/null
r conf2 cat /etc/nri/conf.json
r native /opt/nri/bin/nri-qos register --native
r link readlink /opt/nri/plugins/10-nri-qos
r remove dpkg -r nri-qos
r conf3 cat /etc/nri/conf.json
r nolink test ! -e /opt/nri/plugins/10-nri-qos -a ! -L /opt/nri/plugins/10-nri-qos
r nobinary test ! -e /opt/nri/bin/nri-qos
r policy-after-remove cat /etc/nri/nri-qos.toml
# What the hook left at run time: event log, metrics textfile (the deb's default: Debian's
# node-exporter directory) and its state files; purge must take them away.
inroot sh -c 'mkdir -p /var/log/nri-qos /var/lib/prometheus/node-exporter && echo x > /var/log/nri-qos/events.log &&
  for f in nri_qos.prom .nri_qos.prom.state .nri_qos.prom.pending; do echo x > /var/lib/prometheus/node-exporter/$f; done'
r purge dpkg --purge nri-qos
r policy-after-purge test ! -e /etc/nri/nri-qos.toml
r records-after-purge sh -c 'test ! -e /var/log/nri-qos -a ! -e /var/lib/prometheus/node-exporter/nri_qos.prom -a ! -e /var/lib/prometheus/node-exporter/.nri_qos.prom.state -a ! -e /var/lib/prometheus/node-exporter/.nri_qos.prom.pending'
} > "$OUT" 2>&1
EOS
    unshare -m --propagation private bash "$SCRATCH/deb-install.sh" "$ROOT/$DEB" \
      "$SCRATCH/deb-install.out" "$SCRATCH/debx/opt/nri/bin/nri-qos" "$SCRATCH/ovl"
    [ -s "$SCRATCH/deb-install.out" ] || echo "== install" > "$SCRATCH/deb-install.out"
    out=$SCRATCH/deb-install.out
    # section NAME → the lines between "== NAME" and its "rc=" line, then the rc line.
    sect() { awk -v s="== $1" '$0==s{on=1;next} on&&/^rc=/{print;exit} on' "$out"; }
    rc() { sect "$1" | tail -1; }
    body() { sect "$1" | sed '$d'; }
    check deb-install [ "$(rc install)" = rc=0 ]
    # postinst tolerates a failing `nri-qos register` (warning); here it must not have failed.
    { ! sect install | grep -q 'nri-qos: warning'; }; verdict deb-postinst-register-ok
    # Mode detection: a native registration on a containerd without native NRI is warned about.
    probe=$("$ROOT/build/nri-qos" register --conf-json /dev/null --containerd-version 1.6.20 --containerd-config /dev/null --mode native \
              --plugins-dir "$SCRATCH/plugins-probe" 2>&1)
    check deb-register-native-warns-on-1.6 grep -q 'native plugin in .* is never started' <<<"$probe"
    exp_conf='{
  "version": "0.1",
  "plugins": [
    {
      "type": "other",
      "conf": {
        "x": 1
      }
    },
    {
      "type": "nri-qos",
      "conf": {}
    }
  ],
  "site": "kept"
}'
    check deb-install-conf-json [ "$(body conf)" = "$exp_conf" ]
    { [ "$(body policy)" = "$(printf '# edited by the admin\nversion = 1')" ] && \
      [ "$(rc dist-policy)" = rc=0 ]; }; verdict deb-install-policy-kept
    check deb-install-binary [ "$(rc binary)" = rc=0 ]
    check deb-nri-qos-on-path [ "$(body on-path)" = /opt/nri/bin/nri-qos ]
    check deb-metrics-debian-dir [ "$(rc metrics-default)" = rc=0 ]
    check deb-reconcile-timer-enabled [ "$(rc timer-enabled)" = rc=0 ]
    { [ "$(rc reinstall)" = rc=0 ] && \
      body conf2 | grep -q '"policy": "/etc/nri/site.toml"'; }; verdict deb-reinstall-keeps-conf
    check deb-native-link [ "$(body link)" = /opt/nri/bin/nri-qos ]
    exp_conf3='{
  "version": "0.1",
  "plugins": [
    {
      "type": "other",
      "conf": {
        "x": 1
      }
    }
  ],
  "site": "kept"
}'
    { [ "$(rc remove)" = rc=0 ] && [ "$(body conf3)" = "$exp_conf3" ]; }; verdict deb-remove-conf-json
    { [ "$(rc nolink)" = rc=0 ] && [ "$(rc nobinary)" = rc=0 ]; }; verdict deb-remove-native-link
    check deb-remove-keeps-policy [ "$(rc policy-after-remove)" = rc=0 ]
    { [ "$(rc purge)" = rc=0 ] && [ "$(rc policy-after-purge)" = rc=0 ]; }; verdict deb-purge
    check deb-purge-records [ "$(rc records-after-purge)" = rc=0 ]
    # dh_installsystemd must not try to start the static reconcile service at install.
    { ! grep -q 'disabled or a static unit' "$out"; }; verdict deb-postinst-no-static-unit-message
    check deb-host-untouched [ "$(dpkg-query -W -f='${Status}' nri-qos 2>/dev/null)" = "$host_status" ]
    # The containerd 1.6 e2e against the binary the package installed as /opt/nri/bin/nri-qos.
    if [ -x "$SCRATCH/installed-nri-qos" ] && [ -x tests/e2e/run.sh ] && [ "${NRI_QOS_SKIP_E2E:-0}" != 1 ]; then
      if NRI_QOS_BIN=$SCRATCH/installed-nri-qos tests/e2e/run.sh 16 >"$SCRATCH/deb-e2e.log" 2>&1; then
        if grep -q '^PASS ' "$SCRATCH/deb-e2e.log"; then pass deb-e2e-containerd16
        else skip deb-e2e-containerd16 "$(grep -m1 '^SKIP' "$SCRATCH/deb-e2e.log")"; fi
      else
        fail deb-e2e-containerd16 "$(grep -E '^FAIL' "$SCRATCH/deb-e2e.log" | head -3 | tr '\n' ' ')"
      fi
    fi
    [ $FAILED = 0 ] || sed 's/^/# /' "$out"
  fi
fi

# ------------------------------------------------------------------------------------------
# rpm
RPM=build/rpm/RPMS/$(uname -m)/nri-qos-$VERSION-1.$(uname -m).rpm
if [ -z "$missing" ]; then
  if ! make -s rpm >"$SCRATCH/rpm.log" 2>&1 || [ ! -f "$RPM" ]; then
    fail rpm-build "$(tail -3 "$SCRATCH/rpm.log" | tr '\n' ' ')"
  else
    pass rpm-build
    rpm -qlp "$RPM" 2>/dev/null | grep -v '^/usr/lib/.build-id' | sort > "$SCRATCH/rpm.list"
    cat > "$SCRATCH/rpm.want" <<EOF
/etc/logrotate.d/nri-qos
/etc/nri
/etc/nri/nri-qos.toml
/opt/nri
/opt/nri/bin
/opt/nri/bin/nri-qos
/opt/nri/plugins
/usr/libexec/nri-qos
/usr/libexec/nri-qos/nri-qos-cri
/usr/libexec/nri-qos/nri-qos-metrics
/usr/share/doc/nri-qos-$VERSION
/usr/share/doc/nri-qos-$VERSION/install.md
/usr/share/doc/nri-qos-$VERSION/operations.md
/usr/share/doc/nri-qos-$VERSION/README.md
/usr/share/licenses/nri-qos-$VERSION
/usr/share/licenses/nri-qos-$VERSION/LICENSE
/usr/share/man/man5/nri-qos.toml.5
/usr/share/man/man8/nri-qos.8
/usr/sbin/nri-qos
/usr/libexec/nri-qos/nri-qos-systemd
/usr/lib/systemd/system/nri-qos-reconcile.service
/usr/lib/systemd/system/nri-qos-reconcile.timer
/usr/lib/systemd/system/nri-qos-relay.service
EOF
    sort -o "$SCRATCH/rpm.want" "$SCRATCH/rpm.want"
    check rpm-files diff -u "$SCRATCH/rpm.want" "$SCRATCH/rpm.list"
    check rpm-config [ "$(rpm -qcp "$RPM" 2>/dev/null | sort | tr '\n' ' ')" = "/etc/logrotate.d/nri-qos /etc/nri/nri-qos.toml " ]
    { sh -c "rpm -qip '$RPM' 2>/dev/null | grep -q '^License *: Apache-2.0' && \
      rpm -qp --qf '%{VERSION}' '$RPM' 2>/dev/null | grep -qx '$VERSION'"; }; verdict rpm-info
    rpm -qp --scripts "$RPM" > "$SCRATCH/rpm.scripts" 2>/dev/null
    { sh -c "grep -q '^postinstall scriptlet' '$SCRATCH/rpm.scripts' && \
      grep -q '/opt/nri/bin/nri-qos register' '$SCRATCH/rpm.scripts' && \
      grep -q '^preuninstall scriptlet' '$SCRATCH/rpm.scripts' && \
      grep -q 'nri-qos unregister --native' '$SCRATCH/rpm.scripts'"; }; verdict rpm-scriptlets

    # Scriptlets for real: rpm --root with a static busybox as /bin/sh.
    R=$SCRATCH/rpmroot
    mkdir -p "$R/bin" "$R/etc/nri" "$R/tmp" "$R/opt/nri/plugins"
    cp /bin/busybox "$R/bin/busybox" && ln -s busybox "$R/bin/sh"
    printf '{"version":"0.1","plugins":[{"type":"other"}]}\n' > "$R/etc/nri/conf.json"
    printf '# edited\nversion = 1\n' > "$R/etc/nri/nri-qos.toml"
    ln -s /opt/nri/bin/nri-qos "$R/opt/nri/plugins/20-nri-qos"   # native link made by the admin
    rpm --root "$R" --initdb
    if rpm --root "$R" -i --nodeps "$RPM" >"$SCRATCH/rpm-i.log" 2>&1; then
      pass rpm-install
      check rpm-post-register-ok sh -c "! grep -q 'nri-qos: warning' '$SCRATCH/rpm-i.log'"
      check rpm-post-registered [ "$(jq -c . "$R/etc/nri/conf.json")" = \
        '{"version":"0.1","plugins":[{"type":"other"},{"type":"nri-qos","conf":{}}]}' ]
      { sh -c "grep -q edited '$R/etc/nri/nri-qos.toml' && test -f '$R/etc/nri/nri-qos.toml.rpmnew'"; }; verdict rpm-config-noreplace
      if rpm --root "$R" -e nri-qos >"$SCRATCH/rpm-e.log" 2>&1; then
        pass rpm-erase
        check rpm-preun-unregistered [ "$(jq -c . "$R/etc/nri/conf.json")" = \
          '{"version":"0.1","plugins":[{"type":"other"}]}' ]
        { [ ! -L "$R/opt/nri/plugins/20-nri-qos" ] && [ ! -e "$R/opt/nri/bin/nri-qos" ]; }; verdict rpm-preun-native-link
      else
        fail rpm-erase "$(tail -2 "$SCRATCH/rpm-e.log" | tr '\n' ' ')"
      fi
    else
      fail rpm-install "$(tail -2 "$SCRATCH/rpm-i.log" | tr '\n' ' ')"
    fi
  fi
fi

# ------------------------------------------------------------------------------------------
# image + installer (deploy/kubernetes/install.sh in the image's root file system)
IMG=$SCRATCH/image.tar
if [ -z "$DEB" ]; then
  skip image "no .deb"
elif ! deploy/kubernetes/build-image.sh --deb "$DEB" --out "$IMG" >"$SCRATCH/img.log" 2>&1; then
  fail image-build "$(tail -2 "$SCRATCH/img.log" | tr '\n' ' ')"
else
  RFS=$SCRATCH/imgroot
  mkdir -p "$RFS" "$SCRATCH/img"
  tar -xf "$IMG" -C "$SCRATCH/img"
  layer=$(jq -r '.[0].Layers[0]' "$SCRATCH/img/manifest.json")
  config=$(jq -r '.[0].Config' "$SCRATCH/img/manifest.json")
  tar -xf "$SCRATCH/img/$layer" -C "$RFS"
  { [ "$(jq -r '.rootfs.diff_ids[0]' "$SCRATCH/img/$config")" = \
    "sha256:$(sha256sum "$SCRATCH/img/$layer" | cut -d' ' -f1)" ] && \
    [ "$(jq -r '.[0].RepoTags[0]' "$SCRATCH/img/manifest.json")" = "localhost/nri-qos:$VERSION" ]; }; verdict image-format
  { cmp -s "$RFS/opt/nri/bin/nri-qos" "$SCRATCH/debx/opt/nri/bin/nri-qos" && \
    cmp -s "$RFS/usr/local/bin/nri-qos-install" deploy/kubernetes/install.sh && [ -x "$RFS/bin/sh" ]; }; verdict image-content
  # the CRI client of the relay's unseen pass, beside the binary where `relay` looks for it
  # (src/cli/main.cpp unseen_argv), with the libraries it links (issue #33 §4)
  { cmp -s "$RFS/opt/nri/bin/nri-qos-cri" "$SCRATCH/debx/usr/libexec/nri-qos/nri-qos-cri" &&
    chroot "$RFS" /opt/nri/bin/nri-qos-cri --help >"$SCRATCH/img-cri.log" 2>&1; }; verdict image-cri-client
  [ $FAILED = 0 ] || sed 's/^/# /' "$SCRATCH/img-cri.log"
  deploy/kubernetes/build-image.sh --deb "$DEB" --out "$IMG.2" >/dev/null 2>&1
  check image-reproducible cmp -s "$IMG" "$IMG.2"

  H=$RFS/host      # the node's / as the installer sees it (HOST_ROOT=/host inside the chroot)
  mkdir -p "$RFS/dev" && mknod -m 666 "$RFS/dev/null" c 1 3   # the runtime provides /dev
  mkdir -p "$H/etc/nri" "$H/opt/nri" "$RFS/etc/nri-qos-policy"
  cp conf/nri.d/nri-qos.toml "$RFS/etc/nri-qos-policy/nri-qos.toml"
  printf '{"version":"0.1","plugins":[{"type":"other"}]}\n' > "$H/etc/nri/conf.json"
  inst2() { local a=$1; shift; chroot "$RFS" /bin/env -i PATH=/bin HOST_ROOT=/host "$@" /bin/sh /usr/local/bin/nri-qos-install "$a"; }
  out=$(inst2 install 2>&1); rc=$?
  { [ $rc = 0 ] && cmp -s "$H/opt/nri/bin/nri-qos" "$RFS/opt/nri/bin/nri-qos" && \
    cmp -s "$H/etc/nri/nri-qos.toml" conf/nri.d/nri-qos.toml && \
    [ "$(jq -c . "$H/etc/nri/conf.json")" = '{"version":"0.1","plugins":[{"type":"other"},{"type":"nri-qos","conf":{}}]}' ] && \
    [ ! -e "$H/opt/nri/plugins/10-nri-qos" ]; }; verdict installer-v01
  [ $rc = 0 ] || echo "$out" | sed "s/^/# /"
  before=$(stat -c '%i %Y' "$H/etc/nri/conf.json" "$H/opt/nri/bin/nri-qos" "$H/etc/nri/nri-qos.toml")
  out=$(inst2 install 2>&1); rc=$?
  { [ $rc = 0 ] && \
    [ "$(stat -c '%i %Y' "$H/etc/nri/conf.json" "$H/opt/nri/bin/nri-qos" "$H/etc/nri/nri-qos.toml")" = "$before" ] && \
    echo "$out" | grep -q 'already registered'; }; verdict installer-idempotent
  out=$(inst2 install NRI_QOS_MODE=native NRI_QOS_INDEX=05 2>&1); rc=$?
  { [ $rc = 0 ] && [ "$(readlink "$H/opt/nri/plugins/05-nri-qos")" = /opt/nri/bin/nri-qos ]; }; verdict installer-native
  # A new policy from the ConfigMap replaces the node's, which is kept once as .bak.
  printf '\n# site change\n' >> "$RFS/etc/nri-qos-policy/nri-qos.toml"
  out=$(inst2 install 2>&1); rc=$?
  { [ $rc = 0 ] && cmp -s "$H/etc/nri/nri-qos.toml" "$RFS/etc/nri-qos-policy/nri-qos.toml" && \
    cmp -s "$H/etc/nri/nri-qos.toml.bak" conf/nri.d/nri-qos.toml; }; verdict installer-policy-update
  # A policy `nri-qos check` rejects leaves the node unchanged.
  cp "$H/etc/nri/nri-qos.toml" "$SCRATCH/node-policy"
  printf 'this is [not a valid policy\n' > "$RFS/etc/nri-qos-policy/nri-qos.toml"
  out=$(inst2 install 2>&1); rc=$?
  { [ $rc = 1 ] && cmp -s "$H/etc/nri/nri-qos.toml" "$SCRATCH/node-policy" && \
    echo "$out" | grep -q "rejected by 'nri-qos check'; node left unchanged"; }; verdict installer-bad-policy
  cp "$SCRATCH/node-policy" "$RFS/etc/nri-qos-policy/nri-qos.toml"
  out=$(inst2 install NRI_QOS_MODE=bogus 2>&1); rc=$?
  { [ $rc = 2 ] && echo "$out" | grep -q 'NRI_QOS_MODE must be auto, external, v01, native or both'; }; verdict installer-bad-mode
  # Mode auto on a node whose runtime has an NRI socket (containerd >= 1.7 with NRI, 2.x): the
  # relay container serves as an external plugin; our conf.json entry and native links go away
  # (else the v010-adapter or a pre-installed copy would handle each event a second time).
  mkdir -p "$H/var/run/nri"
  python3 -c 'import socket,sys; s=socket.socket(socket.AF_UNIX); s.bind(sys.argv[1])' "$H/var/run/nri/nri.sock"
  inst2 install NRI_QOS_MODE=v01 >/dev/null 2>&1; inst2 install NRI_QOS_MODE=native >/dev/null 2>&1
  out=$(inst2 install 2>&1); rc=$?
  { [ $rc = 0 ] && [ "$(cat "$RFS/run/nri-qos-pod/mode")" = external ] && \
    [ "$(jq -c . "$H/etc/nri/conf.json")" = '{"version":"0.1","plugins":[{"type":"other"}]}' ] && \
    [ ! -L "$H/opt/nri/plugins/10-nri-qos" ] && echo "$out" | grep -q 'NRI socket /var/run/nri/nri.sock found'; }; verdict installer-auto-external
  [ $rc = 0 ] || echo "$out" | sed "s/^/# /"
  # The relay container execs the relay on the socket (a stand-in binary prints its arguments).
  printf '#!/bin/sh\necho "ARGS $*"\n' > "$RFS/bin/fake-nri-qos" && chmod +x "$RFS/bin/fake-nri-qos"
  out=$(inst2 relay NRI_QOS=/bin/fake-nri-qos 2>&1)
  # ... with kubelet's CPU manager checkpoint in the node's kubelet directory (issue #30 §3).
  check installer-relay-external [ "$(echo "$out" | grep '^ARGS')" = "ARGS relay --socket /var/run/nri/nri.sock --kubelet-cpu-state /var/lib/kubelet/cpu_manager_state" ]
  # Mode both with the NRI socket (containerd >= 1.7, issue #31 §6): the native plugin only and
  # our conf.json entry removed (2.x would run it at every sandbox start beside the plugin);
  # without the socket (1.5/1.6) both.
  # ... with the chart's extraArgs after its own and /metrics where metrics.enabled (issue #33).
  out=$(chroot "$RFS" /bin/env -i PATH=/bin HOST_ROOT=/host NRI_QOS=/bin/fake-nri-qos NRI_QOS_METRICS_LISTEN=0.0.0.0:9470 \
        /bin/sh /usr/local/bin/nri-qos-install relay --child-deadline-ms 3000 2>&1)
  check installer-relay-extra-args [ "$(echo "$out" | grep '^ARGS')" = "ARGS relay --socket /var/run/nri/nri.sock --kubelet-cpu-state /var/lib/kubelet/cpu_manager_state --metrics-listen 0.0.0.0:9470 --child-deadline-ms 3000" ]
  # ... with the runtime's CRI socket for the unseen pass (issue #33 §4: the DaemonSet's
  # NRI_QOS_CRI_SOCKET, its directory mounted read-only); "" turns the pass off; a relative
  # path is refused.
  out=$(inst2 relay NRI_QOS=/bin/fake-nri-qos NRI_QOS_CRI_SOCKET=/run/containerd/containerd.sock 2>&1)
  out2=$(inst2 relay NRI_QOS=/bin/fake-nri-qos NRI_QOS_CRI_SOCKET= 2>&1)
  out3=$(inst2 relay NRI_QOS=/bin/fake-nri-qos NRI_QOS_CRI_SOCKET=run/containerd.sock 2>&1); rc=$?
  { [ "$(echo "$out" | grep '^ARGS')" = "ARGS relay --socket /var/run/nri/nri.sock --kubelet-cpu-state /var/lib/kubelet/cpu_manager_state --cri-socket unix:///run/containerd/containerd.sock" ] &&
    [ "$(echo "$out2" | grep '^ARGS')" = "ARGS relay --socket /var/run/nri/nri.sock --kubelet-cpu-state /var/lib/kubelet/cpu_manager_state --unseen-interval 0" ] &&
    [ $rc = 2 ] && echo "$out3" | grep -q 'NRI_QOS_CRI_SOCKET must be an absolute path'; }; verdict installer-relay-cri-socket
  [ $FAILED = 0 ] || printf '%s\n' "$out" "$out2" "$out3" | sed 's/^/# /'
  inst2 install NRI_QOS_MODE=v01 >/dev/null 2>&1
  # The other modes run no relay: the container serves the metrics alone where asked.
  out=$(inst2 relay NRI_QOS=/bin/fake-nri-qos NRI_QOS_METRICS_LISTEN=0.0.0.0:9470 2>&1)
  check installer-relay-v01-metrics [ "$(echo "$out" | grep '^ARGS')" = "ARGS serve-metrics --listen 0.0.0.0:9470" ]
  out=$(inst2 install NRI_QOS_MODE=both 2>&1); rc=$?
  { [ $rc = 0 ] && [ "$(readlink "$H/opt/nri/plugins/10-nri-qos")" = /opt/nri/bin/nri-qos ] && \
    [ "$(jq -c . "$H/etc/nri/conf.json")" = '{"version":"0.1","plugins":[{"type":"other"}]}' ] && \
    echo "$out" | grep -q 'mode both: NRI socket /var/run/nri/nri.sock found'; }; verdict installer-both-native-only
  [ $rc = 0 ] || echo "$out" | sed "s/^/# /"
  rm -f "$H/var/run/nri/nri.sock"
  out=$(inst2 install NRI_QOS_MODE=both 2>&1); rc=$?
  { [ $rc = 0 ] && [ "$(readlink "$H/opt/nri/plugins/10-nri-qos")" = /opt/nri/bin/nri-qos ] && \
    [ "$(jq -c . "$H/etc/nri/conf.json")" = '{"version":"0.1","plugins":[{"type":"other"},{"type":"nri-qos","conf":{}}]}' ]; }; verdict installer-both-v01
  inst2 uninstall >/dev/null 2>&1; inst2 install NRI_QOS_MODE=v01 >/dev/null 2>&1
  out=$(inst2 install 2>&1); rc=$?
  { [ $rc = 0 ] && [ "$(cat "$RFS/run/nri-qos-pod/mode")" = v01 ] && \
    [ "$(jq -c . "$H/etc/nri/conf.json")" = '{"version":"0.1","plugins":[{"type":"other"},{"type":"nri-qos","conf":{}}]}' ]; }; verdict installer-auto-v01
  # policy-sync: an edited ConfigMap reaches the node without a restart; a rejected one does not.
  cp "$H/etc/nri/nri-qos.toml" "$SCRATCH/node-policy2"
  printf '\n# second site change\n' >> "$RFS/etc/nri-qos-policy/nri-qos.toml"
  out=$(inst2 sync-policy NRI_QOS_SYNC_ONCE=1 2>&1); rc=$?
  { [ $rc = 0 ] && cmp -s "$H/etc/nri/nri-qos.toml" "$RFS/etc/nri-qos-policy/nri-qos.toml"; }; verdict installer-sync-policy
  cp "$H/etc/nri/nri-qos.toml" "$SCRATCH/node-policy3"
  printf 'this is [not a valid policy\n' > "$RFS/etc/nri-qos-policy/nri-qos.toml"
  out=$(inst2 sync-policy NRI_QOS_SYNC_ONCE=1 2>&1); rc=$?
  { [ $rc = 0 ] && cmp -s "$H/etc/nri/nri-qos.toml" "$SCRATCH/node-policy3" && \
    echo "$out" | grep -q "rejected by 'nri-qos check'; node left unchanged"; }; verdict installer-sync-policy-rejected
  # install and policy-sync precompile into the node's cache and last good store (issue #30 §3:
  # before, `check` ran without --cache-dir, into an emptyDir). Here the node's directories are
  # under /host; in the DaemonSet they are mounted at their names (the defaults).
  pc() { inst2 "$1" NODE_POLICY=/host/etc/nri/nri-qos.toml NRI_QOS_CACHE_DIR=/host/run/nri-qos/cache \
           NRI_QOS_LAST_GOOD_DIR=/host/var/lib/nri-qos NRI_QOS_SYNC_ONCE=1 2>&1; }
  rm -rf "$H/run/nri-qos" "$H/var/lib/nri-qos"
  cp "$SCRATCH/node-policy3" "$RFS/etc/nri-qos-policy/nri-qos.toml"   # the ConfigMap valid again
  out=$(pc install); rc=$?
  { [ $rc = 0 ] && ls "$H"/run/nri-qos/cache/policy-*.bin >/dev/null 2>&1 && [ -n "$(ls "$H/var/lib/nri-qos")" ] && \
    echo "$out" | grep -q 'precompiled /host/etc/nri/nri-qos.toml into /host/run/nri-qos/cache'; }; verdict installer-precompile
  [ $rc = 0 ] || echo "$out" | sed "s/^/# /"
  rm -rf "$H/run/nri-qos/cache"
  printf '\n# third site change\n' >> "$RFS/etc/nri-qos-policy/nri-qos.toml"
  out=$(pc sync-policy); rc=$?
  { [ $rc = 0 ] && cmp -s "$H/etc/nri/nri-qos.toml" "$RFS/etc/nri-qos-policy/nri-qos.toml" && \
    ls "$H"/run/nri-qos/cache/policy-*.bin >/dev/null 2>&1; }; verdict installer-sync-policy-precompile
  # the node's policy out of sight (its /etc/nri not mounted at /etc/nri): said, not silent
  out=$(inst2 install 2>&1); rc=$?
  { [ $rc = 0 ] && echo "$out" | grep -q "warning: the node's policy is not at /etc/nri/nri-qos.toml here"; }; verdict installer-precompile-unseen
  out=$(inst2 uninstall 2>&1); rc=$?
  { [ $rc = 0 ] && \
    [ "$(jq -c . "$H/etc/nri/conf.json")" = '{"version":"0.1","plugins":[{"type":"other"}]}' ] && \
    [ ! -L "$H/opt/nri/plugins/05-nri-qos" ] && [ ! -e "$H/opt/nri/bin/nri-qos" ] && [ -f "$H/etc/nri/nri-qos.toml" ]; }; verdict installer-uninstall
  [ $rc = 0 ] || echo "$out" | sed "s/^/# /"
fi

# ------------------------------------------------------------------------------------------
# Kubernetes manifests
K=deploy/kubernetes
if [ -f conf/nri.d/nri-qos.toml ]; then
  deploy/kubernetes/gen-configmap.sh conf/nri.d/nri-qos.toml "$SCRATCH/policy.yaml"
  if cmp -s "$SCRATCH/policy.yaml" $K/nri-qos-policy.yaml; then pass k8s-configmap-in-sync
  else fail k8s-configmap-in-sync "run deploy/kubernetes/gen-configmap.sh"; fi
else
  skip k8s-configmap-in-sync "conf/nri.d/nri-qos.toml missing"
fi
V=build/k8s-validate
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  skip k8s-validate "node/npm not installed"
else
  mkdir -p $V
  cp $K/validate/package.json $K/validate/package-lock.json $K/validate/validate.mjs $V/
  if ! cmp -s $V/package-lock.json $V/node_modules/.nri-qos-lock 2>/dev/null; then
    (cd $V && npm ci --no-audit --no-fund --loglevel=error >"$SCRATCH/npm.log" 2>&1) &&
      cp $V/package-lock.json $V/node_modules/.nri-qos-lock
  fi
  if [ ! -f $V/node_modules/.nri-qos-lock ]; then
    skip k8s-validate "npm ci failed (offline?): $(grep -v nodedir "$SCRATCH/npm.log" | tail -1)"
  else
    if node $V/validate.mjs $K/nri-qos-daemonset.yaml $K/nri-qos-policy.yaml $K/nri-qos-uninstall.yaml $K/nri-qos-reconcile.yaml \
         >"$SCRATCH/validate.log" 2>&1; then
      pass k8s-validate
    else
      fail k8s-validate "$(grep -v '^ok' "$SCRATCH/validate.log" | head -3 | tr '\n' ' ')"
    fi
    # The validator must be able to fail: a misspelt field, a wrong type, a dangling mount.
    sed 's/readOnlyRootFilesystem:/readOnlyRootFileSystem:/' $K/nri-qos-daemonset.yaml > "$SCRATCH/bad1.yaml"
    sed 's/runAsUser: 0/runAsUser: root/' $K/nri-qos-daemonset.yaml > "$SCRATCH/bad2.yaml"
    # rename only the last "- name: policy" (the volume, not the mount)
    tac $K/nri-qos-daemonset.yaml | sed '0,/- name: policy$/s//- name: policies/' | tac > "$SCRATCH/bad3.yaml"
    n=0
    for b in bad1 bad2 bad3; do
      node $V/validate.mjs "$SCRATCH/$b.yaml" >"$SCRATCH/$b.log" 2>&1 || n=$((n + 1))
    done
    { [ $n = 3 ] && grep -q "readOnlyRootFileSystem" "$SCRATCH/bad1.log" && \
      grep -q "runAsUser must be integer" "$SCRATCH/bad2.log" && grep -q "has no volume" "$SCRATCH/bad3.log"; }; verdict k8s-validate-rejects
    # ... and nri-qos's node rules (issue #30 §3): one defect each, each named.
    D=$K/nri-qos-daemonset.yaml R=$K/nri-qos-reconcile.yaml
    sed 's/privileged: false/privileged: true/' $D > "$SCRATCH/node1.yaml"
    sed 's/add: \["DAC_OVERRIDE", "SYS_RESOURCE"\]/add: ["DAC_OVERRIDE", "SYS_RESOURCE", "SYS_ADMIN"]/' $D > "$SCRATCH/node2.yaml"
    sed '/mountPath: \/var\/lib\/kubelet$/{n;/readOnly: true/d}' $D > "$SCRATCH/node3.yaml"
    sed '/name: NRI_QOS_KUBELET_CPU_STATE/,+1d' $D > "$SCRATCH/node4.yaml"
    sed '0,/mountPath: \/sys\/fs\/resctrl/{/- name: host-resctrl$/,/mountPropagation/d}' $D > "$SCRATCH/node5.yaml"
    sed 's|path: /var/lib/nri-qos$|path: /tmp/nri-qos|' $D > "$SCRATCH/node6.yaml"
    sed 's/ --kubelet-cpu-state [^ ]*//' $R > "$SCRATCH/node7.yaml"
    sed '/path: \/var\/lib\/kubelet$/{n;s/type: Directory$/type: DirectoryOrCreate/}' $R > "$SCRATCH/node8.yaml"
    sed '/mountPath: \/run\/containerd$/{n;/readOnly: true/d}' $D > "$SCRATCH/node9.yaml"
    sed '/name: NRI_QOS_CRI_SOCKET/,+1d' $D > "$SCRATCH/node10.yaml"
    sed '/- name: host-cri$/{N;N;/mountPath/d}' $D > "$SCRATCH/node11.yaml"
    ok=1
    for t in "node1:container relay: privileged must be false (it is true)" \
             "node2:capabilities.add must be exactly [\"DAC_OVERRIDE\",\"SYS_RESOURCE\"] (docs/install.md), not [\"DAC_OVERRIDE\",\"SYS_ADMIN\",\"SYS_RESOURCE\"]" \
             "node3:container relay: /var/lib/kubelet must be mounted readOnly" \
             "node4:container relay: kubelet's CPU manager checkpoint is not given" \
             "node5:container relay: the node's /sys/fs/resctrl is not mounted" \
             "node6:container install: /var/lib/nri-qos is the node's /tmp/nri-qos, not its /var/lib/nri-qos" \
             "node7:container reconcile: kubelet's CPU manager checkpoint is not given (reconcile --kubelet-cpu-state)" \
             "node8:container reconcile: volume kubelet (/var/lib/kubelet) must be hostPath type Directory, not DirectoryOrCreate" \
             "node9:container relay: /run/containerd must be mounted readOnly" \
             "node10:container relay: the runtime's CRI socket is not given" \
             "node11:container relay: the node's /run/containerd is not mounted"; do
      if node $V/validate.mjs "$SCRATCH/${t%%:*}.yaml" >"$SCRATCH/${t%%:*}.log" 2>&1 || ! grep -qF -- "${t#*:}" "$SCRATCH/${t%%:*}.log"; then
        ok=0; echo "# ${t%%:*}: not refused with: ${t#*:}"; sed 's/^/#   /' "$SCRATCH/${t%%:*}.log" | head -4
      fi
    done
    check k8s-validate-node-rules [ $ok = 1 ]
    # gen-configmap.sh round trip on awkward inputs (leading blanks, no/extra final newline).
    ok=1
    for t in '  indented first line\nx = 1\n' 'no final newline' 'two final newlines\n\n' 'tab\there\n\n# c\n'; do
      printf "$t" > "$SCRATCH/p.toml"
      deploy/kubernetes/gen-configmap.sh "$SCRATCH/p.toml" "$SCRATCH/p.yaml"
      (cd $V && node -e '
        const fs=require("fs"), Y=require("yaml");
        const v=Y.parse(fs.readFileSync(process.argv[1],"utf8")).data["nri-qos.toml"];
        process.exit(v===fs.readFileSync(process.argv[2],"utf8")?0:1)' "$SCRATCH/p.yaml" "$SCRATCH/p.toml") || { ok=0; echo "# round trip failed: $t"; }
    done
    check k8s-configmap-roundtrip [ $ok = 1 ]
    # Helm chart (deploy/helm/nri-qos): `helm template` where Helm is installed, else the offline
    # renderer; every rendering passes the same validator; the chart makes what the static
    # manifests make; its bundled policy is conf/nri.d/nri-qos.toml.
    HC=deploy/helm/nri-qos
    check helm-policy-in-sync cmp -s $HC/files/nri-qos.toml conf/nri.d/nri-qos.toml
    if ! deploy/helm/render.sh >"$SCRATCH/helm.yaml" 2>"$SCRATCH/helm.err"; then
      fail helm-render "$(tail -2 "$SCRATCH/helm.err" | tr '\n' ' ')"
    else
      if node $V/validate.mjs "$SCRATCH/helm.yaml" >"$SCRATCH/helm-validate.log" 2>&1; then pass helm-validate
      else fail helm-validate "$(grep -v '^ok' "$SCRATCH/helm-validate.log" | head -3 | tr '\n' ' ')"; fi
      # Same pod as deploy/kubernetes/nri-qos-daemonset.yaml: containers, commands, mode, mounts.
      (cd $V && node -e '
        const fs=require("fs"), Y=require("yaml");
        const ds = f => Y.parseAllDocuments(fs.readFileSync(f,"utf8")).map(d=>d.toJS()).find(o=>o&&o.kind==="DaemonSet").spec.template.spec;
        const shape = s => JSON.stringify([...s.initContainers, ...s.containers].map(c => [c.name, c.command,
          (c.env||[]).filter(e=>e.name==="NRI_QOS_MODE").map(e=>e.value), (c.volumeMounts||[]).map(m=>m.mountPath).sort(),
          c.livenessProbe ? c.livenessProbe.exec.command : null, c.readinessProbe ? c.readinessProbe.exec.command : null])
          .concat([s.hostPID, s.volumes.map(v=>v.name).sort()]));
        const a = shape(ds(process.argv[1])), b = shape(ds(process.argv[2]));
        if (a !== b) { console.log(a); console.log(b); process.exit(1); }' "$SCRATCH/helm.yaml" "$ROOT/$K/nri-qos-daemonset.yaml") \
        >"$SCRATCH/helm-same.log" 2>&1; verdict helm-same-pod-as-manifest
      [ $FAILED = 0 ] || sed 's/^/# /' "$SCRATCH/helm-same.log"
      (cd $V && node -e '
        const fs=require("fs"), Y=require("yaml");
        const cm = Y.parseAllDocuments(fs.readFileSync(process.argv[1],"utf8")).map(d=>d.toJS()).find(o=>o&&o.kind==="ConfigMap");
        process.exit(cm.data["nri-qos.toml"] === fs.readFileSync(process.argv[2],"utf8") ? 0 : 1)' "$SCRATCH/helm.yaml" "$ROOT/conf/nri.d/nri-qos.toml"); verdict helm-bundled-policy
    fi
    # A policy variant: its own ConfigMap and DaemonSet on the labelled nodes; the default set
    # avoids them; both validate.
    printf 'policyVariants:\n  - name: batch\n    policy: |\n      version = 1\n' > "$SCRATCH/variants.yaml"
    if deploy/helm/render.sh -f "$SCRATCH/variants.yaml" >"$SCRATCH/helm2.yaml" 2>"$SCRATCH/helm2.err" && \
       node $V/validate.mjs "$SCRATCH/helm2.yaml" >"$SCRATCH/helm2-validate.log" 2>&1; then
      (cd $V && node -e '
        const fs=require("fs"), Y=require("yaml");
        const o = Y.parseAllDocuments(fs.readFileSync(process.argv[1],"utf8")).map(d=>d.toJS());
        const d = n => o.find(x=>x.kind==="DaemonSet"&&x.metadata.name===n).spec.template.spec;
        const ok = d("nri-qos-batch").nodeSelector["nri-qos.io/policy"]==="batch" &&
          d("nri-qos-batch").volumes.find(v=>v.name==="policy").configMap.name==="nri-qos-batch-policy" &&
          JSON.stringify(d("nri-qos").affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions[0]) ===
            JSON.stringify({key:"nri-qos.io/policy",operator:"NotIn",values:["batch"]}) &&
          o.find(x=>x.kind==="ConfigMap"&&x.metadata.name==="nri-qos-batch-policy").data["nri-qos.toml"]==="version = 1\n";
        process.exit(ok?0:1)' "$SCRATCH/helm2.yaml"); verdict helm-policy-variant
    else
      fail helm-policy-variant "$(cat "$SCRATCH/helm2.err" "$SCRATCH/helm2-validate.log" | grep -v '^ok' | head -2 | tr '\n' ' ')"
    fi
    # Bad values are refused with the reason: by values.schema.json (Helm, and render.sh through
    # deploy/helm/check-values.py) before the template's own check.
    out=$(deploy/helm/render.sh --set mode=bogus 2>&1 >/dev/null); rc=$?
    { [ $rc != 0 ] && echo "$out" | grep -qE "mode must be auto, external, v01, native or both|mode: .*bogus.* is not one of|mode: mode must be one of"; }; verdict helm-rejects-bad-mode
    # The schema (issue #33 §3): the chart's own values and every standard value set pass it and
    # render into objects the validator accepts, each value where it belongs; wrong values are
    # refused, each with its key named.
    cat > "$SCRATCH/std.yaml" <<'YAML'
fullnameOverride: qos
imagePullSecrets: [{name: regcred}]
podLabels: {team: infra}
podAnnotations: {example.com/owner: infra}
priorityClassName: system-node-critical
affinity:
  nodeAffinity:
    requiredDuringSchedulingIgnoredDuringExecution:
      nodeSelectorTerms:
        - matchExpressions: [{key: kubernetes.io/arch, operator: In, values: [amd64, arm64]}]
tolerations: [{key: dedicated, operator: Equal, value: colo, effect: NoSchedule}]
extraEnv: [{name: NRI_QOS_EXAMPLE, value: "1"}]
extraArgs: ["--child-deadline-ms", "3000"]
reconcile: {enabled: true, intervalSeconds: 60}
policyVariants:
  - name: batch
    policy: |
      version = 1
YAML
    if deploy/helm/render.sh -f "$SCRATCH/std.yaml" >"$SCRATCH/helm3.yaml" 2>"$SCRATCH/helm3.err" && \
       node $V/validate.mjs "$SCRATCH/helm3.yaml" >"$SCRATCH/helm3-validate.log" 2>&1; then
      (cd $V && node -e '
        const fs=require("fs"), Y=require("yaml");
        const o = Y.parseAllDocuments(fs.readFileSync(process.argv[1],"utf8")).map(d=>d.toJS());
        const ds = o.filter(x=>x.kind==="DaemonSet"), bad = [];
        const want = (c, what) => { if (!c) bad.push(what); };
        want(JSON.stringify(ds.map(d=>d.metadata.name).sort())===JSON.stringify(["qos","qos-batch","qos-reconcile"]), "names from fullnameOverride");
        for (const d of ds) {
          const t = d.spec.template, s = t.spec, n = d.metadata.name;
          want(s.imagePullSecrets && s.imagePullSecrets[0].name==="regcred", n+": imagePullSecrets");
          want(t.metadata.labels.team==="infra" && t.metadata.annotations["example.com/owner"]==="infra", n+": podLabels/podAnnotations");
          want(s.priorityClassName==="system-node-critical", n+": priorityClassName");
          want(s.tolerations[0].key==="dedicated", n+": tolerations");
          want(s.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions[0].key==="kubernetes.io/arch", n+": affinity");
          want(d.spec.updateStrategy.rollingUpdate.maxSurge===0 && d.spec.updateStrategy.rollingUpdate.maxUnavailable===1, n+": updateStrategy");
        }
        const relay = ds.find(d=>d.metadata.name==="qos").spec.template.spec.containers.find(c=>c.name==="relay");
        want(JSON.stringify(relay.args)===JSON.stringify(["--child-deadline-ms","3000"]), "relay: extraArgs");
        want(relay.env.some(e=>e.name==="NRI_QOS_EXAMPLE"&&e.value==="1"), "relay: extraEnv");
        want(/status --relay/.test(relay.readinessProbe.exec.command.join(" ")), "relay: readinessProbe on status --relay");
        const def = ds.find(d=>d.metadata.name==="qos").spec.template.spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions;
        want(def.length===2 && def[1].operator==="NotIn", "default set: the given affinity and the variants avoided");
        const rec = ds.find(d=>d.metadata.name==="qos-reconcile").spec.template.spec.containers[0];
        want(rec.env.find(e=>e.name==="NRI_QOS_RECONCILE_SECONDS").value==="60", "reconcile: intervalSeconds");
        if (bad.length) { console.log(bad.join("; ")); process.exit(1); }' "$SCRATCH/helm3.yaml") >"$SCRATCH/helm3.log" 2>&1; verdict helm-standard-values
      # the default priority is the static manifests' node-critical one; "" renders none
      { deploy/helm/render.sh 2>/dev/null | grep -qx ' *priorityClassName: system-node-critical' &&
        ! deploy/helm/render.sh --set priorityClassName= 2>/dev/null | grep -q priorityClassName; }; verdict helm-default-priority-node-critical
      [ $FAILED = 0 ] || sed 's/^/# /' "$SCRATCH/helm3.log"
      # The relay gets the runtime's CRI socket for its unseen pass (issue #33 §4): by default
      # containerd's, its directory mounted read-only from the node at its name (the validator's
      # node rules); another runtime's where set; "" = no mount, the pass off (install.sh).
      ok=1
      for t in "/run/containerd/containerd.sock:/run/containerd" "/var/run/crio/crio.sock:/var/run/crio" ":"; do
        deploy/helm/render.sh --set "criSocket=${t%%:*}" >"$SCRATCH/helm-cri.yaml" 2>"$SCRATCH/helm-cri.err" &&
          node $V/validate.mjs "$SCRATCH/helm-cri.yaml" >"$SCRATCH/helm-cri-validate.log" 2>&1 &&
          (cd $V && node -e '
            const fs=require("fs"), Y=require("yaml");
            const s = Y.parseAllDocuments(fs.readFileSync(process.argv[1],"utf8")).map(d=>d.toJS()).find(o=>o&&o.kind==="DaemonSet").spec.template.spec;
            const relay = s.containers.find(c=>c.name==="relay"), sock = process.argv[2], dir = process.argv[3];
            const env = relay.env.find(e=>e.name==="NRI_QOS_CRI_SOCKET"), vol = s.volumes.find(v=>v.name==="host-cri");
            const m = relay.volumeMounts.find(x=>x.name==="host-cri");
            const ok = env && env.value===sock && (sock==="" ? !vol && !m :
              vol && vol.hostPath.path===dir && m && m.mountPath===dir && m.readOnly===true &&
              ![...s.initContainers, ...s.containers].some(c=>c.name!=="relay" && (c.volumeMounts||[]).some(x=>x.name==="host-cri")));
            if (!ok) { console.log(JSON.stringify({env, vol, m})); process.exit(1); }' "$SCRATCH/helm-cri.yaml" "${t%%:*}" "${t#*:}") \
          >"$SCRATCH/helm-cri.log" 2>&1 || { ok=0; echo "# criSocket=${t%%:*}: $(cat "$SCRATCH/helm-cri.err" "$SCRATCH/helm-cri-validate.log" "$SCRATCH/helm-cri.log" | grep -v '^ok' | head -2)"; }
      done
      check helm-cri-socket [ $ok = 1 ]
      # the chart's reconcile DaemonSet is deploy/kubernetes/nri-qos-reconcile.yaml's pod
      (cd $V && node -e '
        const fs=require("fs"), Y=require("yaml");
        const rc = f => Y.parseAllDocuments(fs.readFileSync(f,"utf8")).map(d=>d.toJS()).find(o=>o&&o.kind==="DaemonSet"&&/reconcile$/.test(o.metadata.name)).spec.template.spec;
        const shape = s => JSON.stringify([s.containers.map(c => [c.name, c.command, c.args, c.securityContext,
          (c.volumeMounts||[]).map(m=>[m.name,m.mountPath,!!m.readOnly]).sort()]), s.hostPID||false,
          s.volumes.map(v=>JSON.stringify(v)).sort()]);
        const a = shape(rc(process.argv[1])), b = shape(rc(process.argv[2]));
        if (a !== b) { console.log(a); console.log(b); process.exit(1); }' "$SCRATCH/helm3.yaml" "$ROOT/$K/nri-qos-reconcile.yaml") \
        >"$SCRATCH/helm-rec.log" 2>&1; verdict helm-reconcile-as-manifest
      [ $FAILED = 0 ] || sed 's/^/# /' "$SCRATCH/helm-rec.log"
      check helm-reconcile-off [ "$(grep -c 'component: reconcile' "$SCRATCH/helm.yaml")" = 0 ]
    else
      fail helm-standard-values "$(cat "$SCRATCH/helm3.err" "$SCRATCH/helm3-validate.log" | grep -v '^ok' | head -2 | tr '\n' ' ')"
    fi
    ok=1
    for t in "mode=bogus:mode" "resctrl=yes:resctrl" "updateStrategy.rollingUpdate.maxSurge=1:maxSurge" \
             "updateStrategy.rollingUpdate.maxUnavailable=0:maxUnavailable" "tolerationz=x:tolerationz" \
             "priorityClassName=5:priorityClassName" "metrics.port=70000:port" "image.pullPolicy=Sometimes:pullPolicy" \
             "extraArgs=--x:extraArgs" "nameOverride=Bad_Name:nameOverride" "reconcile.enabled=maybe:enabled" \
             "kubeletDir=var/lib/kubelet:kubeletDir" "pluginIndex=7:pluginIndex" \
             "criSocket=run/containerd/containerd.sock:criSocket" "criSocket=/containerd.sock:criSocket"; do
      out=$(deploy/helm/render.sh --set "${t%:*}" 2>&1 >/dev/null) && { ok=0; echo "# --set ${t%:*}: accepted"; continue; }
      echo "$out" | grep -q -- "${t##*:}" || { ok=0; echo "# --set ${t%:*}: refused without naming ${t##*:}: $out"; }
    done
    check helm-schema-rejects [ $ok = 1 ]
    # Metrics for a cluster's Prometheus (issue #33 §2): off by default; on, the relay container
    # gets the listen address and its "metrics" port, the PodMonitor selects exactly the node
    # pods and scrapes that port, the PrometheusRule carries files/prometheus-rules.yaml, the
    # dashboard ConfigMap files/dashboard.json; all validate.
    printf 'metrics:\n  enabled: true\n  podMonitor: {enabled: true, labels: {release: kps}}\n  prometheusRule: {enabled: true}\n  dashboard: {enabled: true}\n' > "$SCRATCH/mon.yaml"
    if deploy/helm/render.sh -f "$SCRATCH/mon.yaml" >"$SCRATCH/helm4.yaml" 2>"$SCRATCH/helm4.err" && \
       node $V/validate.mjs "$SCRATCH/helm4.yaml" >"$SCRATCH/helm4-validate.log" 2>&1; then
      (cd $V && node -e '
        const fs=require("fs"), Y=require("yaml");
        const o = Y.parseAllDocuments(fs.readFileSync(process.argv[1],"utf8")).map(d=>d.toJS());
        const off = Y.parseAllDocuments(fs.readFileSync(process.argv[2],"utf8")).map(d=>d.toJS());
        const ds = o.find(x=>x.kind==="DaemonSet"), pm = o.find(x=>x.kind==="PodMonitor"), pr = o.find(x=>x.kind==="PrometheusRule");
        const relay = ds.spec.template.spec.containers.find(c=>c.name==="relay"), bad = [];
        const want = (c, what) => { if (!c) bad.push(what); };
        const port = (relay.ports||[]).find(p=>p.name==="metrics");
        want(port && port.containerPort===9470, "relay: port metrics 9470");
        want(relay.env.some(e=>e.name==="NRI_QOS_METRICS_LISTEN"&&e.value==="0.0.0.0:9470"), "relay: NRI_QOS_METRICS_LISTEN");
        want(pm && pm.metadata.labels.release==="kps", "PodMonitor labels");
        want(pm && Object.entries(pm.spec.selector.matchLabels).every(([k,v])=>ds.spec.template.metadata.labels[k]===v), "PodMonitor selects the node pods");
        want(pm && pm.spec.podMetricsEndpoints[0].port==="metrics", "PodMonitor scrapes the metrics port");
        want(pr && pr.spec.groups[0].rules.some(r=>r.alert==="NriQosRelayDown"), "PrometheusRule carries the rules");
        const dash = o.find(x=>x.kind==="ConfigMap"&&x.metadata.name==="nri-qos-dashboard");
        want(dash && dash.metadata.labels.grafana_dashboard==="1" && JSON.parse(dash.data["nri-qos.json"]).uid==="nri-qos", "dashboard ConfigMap");
        want(!off.some(x=>x&&["PodMonitor","PrometheusRule"].includes(x.kind)) && !JSON.stringify(off).includes("NRI_QOS_METRICS_LISTEN"), "off by default");
        fs.writeFileSync(process.argv[3], Y.stringify({groups: pr ? pr.spec.groups : []}));
        if (bad.length) { console.log(bad.join("; ")); process.exit(1); }' "$SCRATCH/helm4.yaml" "$SCRATCH/helm.yaml" "$SCRATCH/rendered-rules.yaml") \
        >"$SCRATCH/helm4.log" 2>&1; verdict helm-metrics-objects
      [ $FAILED = 0 ] || sed 's/^/# /' "$SCRATCH/helm4.log"
      # The alert rules: promtool's parser (Debian's prometheus package) on the file and on the
      # rendered PrometheusRule. The dashboard's queries and the rules' name only series nri-qos
      # publishes (docs/operations.md's table; tests/check_promql.py, which also checks that
      # the docs show the same rules) and parse as PromQL (promtool, as recording rules).
      if command -v promtool >/dev/null; then
        promtool check rules $HC/files/prometheus-rules.yaml "$SCRATCH/rendered-rules.yaml" >"$SCRATCH/promtool.log" 2>&1; verdict prometheus-rules
        [ $FAILED = 0 ] || sed 's/^/# /' "$SCRATCH/promtool.log"
        if /usr/bin/python3 tests/check_promql.py docs/operations.md $HC/files/dashboard.json $HC/files/prometheus-rules.yaml "$SCRATCH/dash-rules.yaml" \
             >"$SCRATCH/dash.log" 2>&1 && promtool check rules "$SCRATCH/dash-rules.yaml" >>"$SCRATCH/dash.log" 2>&1; then
          pass "dashboard-queries: $(grep -o 'check_promql: .*' "$SCRATCH/dash.log")"
        else
          fail dashboard-queries "$(grep -v '^check_promql' "$SCRATCH/dash.log" | head -3 | tr '\n' ' ')"
        fi
        # ... and the check can fail: a misspelt series in a query
        sed 's/nri_qos_knob_failures_total/nri_qos_knob_failure_total/' $HC/files/dashboard.json > "$SCRATCH/dash-bad.json"
        out=$(/usr/bin/python3 tests/check_promql.py docs/operations.md "$SCRATCH/dash-bad.json" $HC/files/prometheus-rules.yaml "$SCRATCH/dash-bad.yaml" 2>&1)
        { [ $? = 1 ] && echo "$out" | grep -q "nri_qos_knob_failure_total is no series"; }; verdict dashboard-queries-refuse
      else
        skip prometheus-rules "promtool not installed (Debian prometheus: scripts/deps.sh pkg)"
      fi
    else
      fail helm-metrics-objects "$(cat "$SCRATCH/helm4.err" "$SCRATCH/helm4-validate.log" | grep -v '^ok' | head -2 | tr '\n' ' ')"
    fi
    out=$(deploy/helm/render.sh --set metrics.podMonitor.enabled=true 2>&1 >/dev/null)
    { [ $? != 0 ] && echo "$out" | grep -q "metrics.podMonitor.enabled needs metrics.enabled"; }; verdict helm-podmonitor-needs-metrics
    # resctrl=false (nodes without RDT, where a hostPath of type Directory keeps the pod from
    # starting) drops the mount and its volume, from --set too.
    { [ "$(deploy/helm/render.sh --set resctrl=false | grep -c 'host-resctrl')" = 0 ] && \
      [ "$(grep -c 'host-resctrl' "$SCRATCH/helm.yaml")" = 2 ]; }; verdict helm-resctrl-off
  fi
fi
if command -v kubectl >/dev/null && kubectl kustomize $K >"$SCRATCH/kustomize.out" 2>&1; then
  check k8s-kustomize [ "$(grep -c '^kind: ' "$SCRATCH/kustomize.out")" = 2 ]
elif command -v kubectl >/dev/null; then
  fail k8s-kustomize "$(tail -1 "$SCRATCH/kustomize.out")"
else
  skip k8s-kustomize "kubectl not installed"
fi

exit $FAILED
