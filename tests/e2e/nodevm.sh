#!/bin/bash
# A production-shaped Kubernetes node in a VM: systemd as PID 1, pure cgroup v2, the systemd
# cgroup driver (runc SystemdCgroup = true). The build machine is none of these (its PID 1 is not
# systemd and its cgroups are v1 hybrid), so this suite boots Debian bookworm under qemu and runs
# the e2e suites *inside* it, with the very same scenario code (lib.sh):
#   vm-c16-*         containerd 1.6.20 (the VM's bookworm package), nri-qos as NRI v0.1 hook
#   vm-c21-native-*  containerd 2.1 (sid's binaries, copied in from $E2E_CACHE/sid-root), relay;
#                    then the .deb's nri-qos-relay.service under systemd, containerd as
#                    containerd.service (the node's life: containerd17.sh external_scenarios)
#   vm-c23-native-*  containerd v2.3.4 (../shared/runtimes, NRI 0.12; unpacked and checked against
#                    its SHA256SUMS on the host by `containerd17.sh prepare 2.3`, staged unpacked), in
#                    the same boot after native21: 2.1's containerd stopped, 2.3.4's started, the
#                    node-shaped scenarios again (create-time values, updates, sync-launched) and
#                    nri-v012; not the external relay's (2.1 covers the packaged service in the VM,
#                    2.3.4 the external relay on the host). With it, vm-c21-native-* runs only the
#                    packaged service's scenarios (E2E_VM_C23=1): the node-shaped ones are 2.3.4's.
#                    SKIP vm-c23-native with the reason when ../shared/runtimes is absent (then
#                    vm-c21-native-* runs them all, as before).
# Every value is read back from the VM's cgroup v2 files under kubepods.slice/... (slices for
# pods, cri-containerd-<id>.scope for containers).
#
#   nodevm.sh            the suite: build/reuse the image, one boot, print PASS/FAIL/SKIP lines
#   nodevm.sh image      only build (or reuse) the cached image
#   nodevm.sh run SCRIPT [FILE...]   boot once, run SCRIPT as root inside (FILEs beside it in
#                        /root/in), print what SCRIPT printed; for poking at the node by hand
#   nodevm.sh clean      remove the cached image
#
# How: `mmdebstrap` builds a bookworm root filesystem (kernel, systemd, containerd, runc, python3
# gRPC for the CRI client) from the Debian mirror this machine's apt already uses, once; it is
# kept as an ext4 disk image $E2E_CACHE/nodevm/base.img. Each run boots that image read-only
# (qemu snapshot=on: writes are discarded) plus a small second disk with the tree under test
# (tests/e2e, the policy, build/nri-qos, sid's containerd), mounted at /root/in; a systemd unit
# runs /root/in/test.sh after boot and powers off; the output is read from the second disk with
# debugfs. No network device. qemu runs with TCG: /dev/kvm may exist, but nested KVM is not
# reliable on the machines this runs on (E2E_VM_ACCEL=kvm to try it).
#
# Env: E2E_CACHE (/var/cache/nri-qos-e2e), E2E_VM_TIMEOUT (s, 2400), E2E_VM_MEM (MiB, 2048),
#      E2E_VM_CPUS (2), E2E_VM_ACCEL (tcg), E2E_VM_NICE (10), E2E_VM_BOOT_TIMEOUT (s, 600: no
#      login prompt by then = a failed boot, retried once), E2E_VM_SUITES ("16 native21
#      native23", native23 only when ../shared/runtimes has 2.3.4: suites run inside).
# Prints only result lines on stdout (the inner ones prefixed "vm-"); diagnostics on stderr.
set -uo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "$0")/lib.sh"

VMC=$E2E_CACHE/nodevm
BASE=$VMC/base.img
# Bump when the recipe below changes: a cached image of another recipe is rebuilt.
VM_RECIPE=3
VM_PKGS=systemd,systemd-sysv,udev,dbus,linux-image-amd64,kmod,procps,containerd,runc,jq,busybox-static,python3,python3-grpcio,python3-grpc-tools,python3-pkg-resources,debian-archive-keyring

vm_log() { log "[vm] $*"; }

# qemu, mmdebstrap, debugfs: installed with apt when missing. Prints a reason when impossible.
vm_tools() {
  local miss=()
  command -v qemu-system-x86_64 >/dev/null || miss+=(qemu-system-x86)
  command -v mmdebstrap >/dev/null || miss+=(mmdebstrap)
  command -v debugfs >/dev/null || miss+=(e2fsprogs)
  [ ${#miss[@]} = 0 ] && return 0
  vm_log "apt-get install ${miss[*]}"
  DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=300 install -y -qq \
    --no-install-recommends "${miss[@]}" </dev/null >&2 \
    || { apt-get -o DPkg::Lock::Timeout=300 update -qq </dev/null >&2 &&
         DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=300 install -y -qq \
           --no-install-recommends "${miss[@]}" </dev/null >&2; } \
    || { echo "cannot install ${miss[*]}"; return 1; }
}

image_key() { echo "recipe $VM_RECIPE; packages $VM_PKGS; mirror $(debian_mirror)"; }

# Build the node image once: bookworm minbase + VM_PKGS, containerd's own service disabled (the
# suites start their own instance, as on the host), the test unit, and the unit that runs the test script.
vm_image() {
  [ -f "$BASE" ] && [ "$(cat "$VMC/base.key" 2>/dev/null)" = "$(image_key)" ] && return 0
  local mirror; mirror=$(debian_mirror) || { echo "no Debian mirror in this machine's apt sources"; return 1; }
  vm_log "building the node image (mmdebstrap bookworm from $mirror; a few minutes under load)"
  local t0=$SECONDS root="$VMC/rootfs"
  rm -rf "$root" "$BASE" "$VMC/base.key"; mkdir -p "$VMC"
  # The unit that runs the test after boot and powers the VM off whatever the script does.
  mkdir -p "$VMC/files"
  cat > "$VMC/files/e2e-test.service" <<'UNIT'
[Unit]
Description=nri-qos e2e test script (tests/e2e/nodevm.sh)
After=multi-user.target
ConditionPathExists=/root/in/test.sh
[Service]
Type=oneshot
TimeoutStartSec=infinity
ExecStart=/bin/sh -c '/root/in/test.sh > /root/in/out.txt 2> /root/in/err.txt; echo $? > /root/in/rc; sync'
ExecStopPost=/bin/systemctl --no-block poweroff
[Install]
WantedBy=multi-user.target
UNIT
  # shellcheck disable=SC2016  # the hooks are run by mmdebstrap, which passes the root as $1
  if ! nice -n "${E2E_VM_NICE:-10}" mmdebstrap --variant=minbase --include="$VM_PKGS" \
      --customize-hook='chroot "$1" passwd -d root >/dev/null' \
      --customize-hook='echo e2e-node > "$1/etc/hostname"; printf "127.0.0.1 localhost e2e-node\n" > "$1/etc/hosts"' \
      --customize-hook='printf "/dev/vda / ext4 rw,errors=remount-ro 0 1\n/dev/vdb /root/in ext4 rw,nofail 0 0\n" > "$1/etc/fstab"; mkdir -p "$1/root/in"' \
      --customize-hook='chroot "$1" systemctl disable containerd.service >/dev/null 2>&1; chroot "$1" systemctl mask containerd.service >/dev/null 2>&1; true' \
      --customize-hook="upload $VMC/files/e2e-test.service /etc/systemd/system/e2e-test.service" \
      --customize-hook='chroot "$1" systemctl enable e2e-test.service >/dev/null 2>&1' \
      bookworm "$root" "$mirror" > "$VMC/mmdebstrap.log" 2>&1; then
    tail -5 "$VMC/mmdebstrap.log" >&2; rm -rf "$root"
    echo "mmdebstrap failed (see $VMC/mmdebstrap.log)"; return 1
  fi
  # One ext4 disk image (sparse); the directory tree is not kept.
  if ! mkfs.ext4 -q -F -L e2e-root -d "$root" "$BASE.tmp" 3G; then
    rm -rf "$root" "$BASE.tmp"; echo "mkfs.ext4 -d failed"; return 1
  fi
  cp "$root"/boot/vmlinuz-* "$VMC/vmlinuz"; cp "$root"/boot/initrd.img-* "$VMC/initrd.img"
  rm -rf "$root"
  mv -f "$BASE.tmp" "$BASE"
  image_key > "$VMC/base.key"
  vm_log "node image ready in $((SECONDS - t0)) s ($(du -sh "$BASE" | cut -f1) used)"
}

# vm_boot INDIR: boot the image with INDIR as /root/in; OUT files are read back into
# INDIR.result. A boot that fails before the test starts (TCG on a starved host: the kernel's
# timer check, a panic; or no login prompt within E2E_VM_BOOT_TIMEOUT) is retried once.
vm_boot() {
  local in=$1 try why=""
  for try in 1 2; do
    why=$(vm_boot_once "$in") && return 0
    [ "$why" = retry ] || { echo "$why"; return 1; }
    vm_log "boot failed before the test started (console: $(grep -a -m1 -o 'Kernel panic[^]]*' "$in.console" || echo 'no login prompt')); retrying"
    cp -f "$in.console" "$in.console.$try"
  done
  echo "the VM failed to boot twice (consoles: $in.console.1, $in.console)"; return 1
}

vm_boot_once() { # prints "retry" when the boot failed before the test started
  local in=$1 io=$1.img
  rm -f "$io"; rm -rf "$in.result"
  # room for what the suites write (logs, containerd root of 2.1 with the image) beside the input
  mkfs.ext4 -q -F -L e2e-in -d "$in" "$io" 2G >&2 || { echo "mkfs.ext4 of the input disk failed"; return 1; }
  local accel=${E2E_VM_ACCEL:-tcg} cpu=max
  [ "$accel" = kvm ] && cpu=host
  vm_log "booting ($accel, ${E2E_VM_CPUS:-2} CPUs, ${E2E_VM_MEM:-2048} MiB)"
  local t0=$SECONDS rc=0 q
  # nice: the VM runs beside timing-sensitive suites (make check); it only gets slower.
  # no_timer_check: the kernel's IO-APIC timer test fails when TCG is starved ("IO-APIC + timer
  # doesn't work!" panic); panic=-1 with -no-reboot: a panicking guest ends qemu at once.
  timeout "${E2E_VM_TIMEOUT:-2400}" nice -n "${E2E_VM_NICE:-10}" qemu-system-x86_64 -accel "$accel" -cpu "$cpu" \
    -m "${E2E_VM_MEM:-2048}" -smp "${E2E_VM_CPUS:-2}" -nographic -no-reboot -nic none \
    -kernel "$VMC/vmlinuz" -initrd "$VMC/initrd.img" \
    -drive file="$BASE",if=virtio,format=raw,snapshot=on \
    -drive file="$io",if=virtio,format=raw \
    -append "root=/dev/vda rw console=ttyS0 quiet no_timer_check panic=-1 systemd.unified_cgroup_hierarchy=1 systemd.show_status=0" \
    </dev/null > "$in.console" 2>&1 &
  q=$!
  # boot watchdog: the login prompt appears with multi-user.target, when the test starts
  local booted=""
  while kill -0 "$q" 2>/dev/null; do
    if [ -z "$booted" ]; then
      if grep -aq 'login:' "$in.console"; then booted=1; vm_log "booted in $((SECONDS - t0)) s"
      elif [ $((SECONDS - t0)) -gt "${E2E_VM_BOOT_TIMEOUT:-600}" ]; then
        kill "$q" 2>/dev/null; wait "$q" 2>/dev/null; echo retry; return 1   # timeout passes TERM on to qemu
      fi
    fi
    sleep 5
  done
  wait "$q" || rc=$?
  vm_log "VM ran $((SECONDS - t0)) s (qemu exit $rc)"
  mkdir -p "$in.result"
  local f
  for f in out.txt err.txt rc; do
    debugfs -R "dump /$f $in.result/$f" "$io" >/dev/null 2>&1 || true
  done
  debugfs -R "rdump /work $in.result" "$io" >/dev/null 2>&1 || true   # suite logs (containerd, pods)
  if [ $rc = 124 ]; then echo "VM did not power off within ${E2E_VM_TIMEOUT:-2400} s"; return 1; fi
  if [ ! -f "$in.result/rc" ]; then
    [ -z "$booted" ] && { echo retry; return 1; }
    echo "the test unit did not finish (console: $in.console)"; return 1
  fi
  return 0
}

# Inside the VM: the same run.sh, systemd cgroup driver, result names prefixed "vm-".
write_inner() { # FILE
  cat > "$1" <<'SH'
#!/bin/bash
# runs inside the node VM (tests/e2e/nodevm.sh)
cd /root/in/repo || exit 1
echo "node: $(uname -r); PID 1 $(cat /proc/1/comm); $(stat -fc %T /sys/fs/cgroup)" >&2
export E2E_CGROUP_DRIVER=systemd E2E_PREFIX=vm- E2E_NODE_SUBSET=1 NRI_QOS_BIN=/root/in/repo/build/nri-qos \
       E2E_CACHE=/root/in/cache E2E_WORK=/root/in/work E2E_OFFLINE=1 E2E_C21_SUITE=@C21@ E2E_ONLY='@ONLY@' \
       E2E_RUNTIMES=/root/in/runtimes E2E_VM_C23=@C23@
# The .deb (pkg-* scenarios) and the libraries its CRI client needs that the image lacks (what apt
# would pull in on a node with a network); the libraries also serve build/nri-qos-cri (discover).
if [ -d /root/in/pkg ]; then
  if ls /root/in/pkg/deps/*.deb >/dev/null 2>&1; then
    dpkg -i /root/in/pkg/deps/*.deb > /root/in/pkg/deps.log 2>&1 || echo "dpkg -i of the CRI client's libraries failed: $(tail -2 /root/in/pkg/deps.log)" >&2
  fi
  export E2E_DEB=/root/in/pkg/nri-qos.deb E2E_DEB_UPGRADE=/root/in/pkg/nri-qos-upgrade.deb
fi
exec bash tests/e2e/run.sh $E2E_VM_SUITES
SH
  local c23=""; [[ " $VM_SUITES " == *" native23 "* ]] && c23=1
  sed -i "s|\$E2E_VM_SUITES|$VM_SUITES|; s|@C21@|$C21_SUITE|; s/@ONLY@/${E2E_ONLY:-}/; s/@C23@/$c23/" "$1"
  chmod 0755 "$1"
}

# stage_deb DIR: the project's .deb (E2E_DEB, else the newest build/deb/nri-qos_*.deb: `make deb`)
# into DIR/pkg, with the .debs of its dependencies that the node image lacks (their closure by
# apt-cache, downloaded once with apt-get download into $E2E_CACHE/nodevm-debs): the VM has no
# network, so this is what `apt install ./nri-qos.deb` would fetch. No .deb: nothing staged.
stage_deb() {
  local in=$1 deb=${E2E_DEB:-}
  [ -n "$deb" ] || deb=$(ls -t "$REPO"/build/deb/nri-qos_*.deb 2>/dev/null | head -1)
  [ -n "$deb" ] && [ -f "$deb" ] || { vm_log "no .deb to stage (make deb): the pkg-* scenarios will SKIP"; return 0; }
  mkdir -p "$in/pkg/deps" "$VMC/../nodevm-debs" && cp -a "$deb" "$in/pkg/nri-qos.deb" || return 1
  # The upgrade: the same package under a higher version (VERSION+e2eupgrade1), repacked with
  # dpkg-deb, so that `dpkg -i` of it runs the maintainer scripts' upgrade path (prerm upgrade,
  # unpack over the old files, postinst configure <old version>) without a second source build.
  local x=$in/pkg/upgrade-root v
  rm -rf "$x" && dpkg-deb -R "$deb" "$x" || return 1
  v=$(dpkg-deb -f "$deb" Version)+e2eupgrade1
  sed -i "s/^Version: .*/Version: $v/" "$x/DEBIAN/control"
  # one file only the upgrade has (in its md5sums too): sc_pkg_upgrade's proof that its files are on disk
  echo "$v" > "$x/usr/share/doc/nri-qos/e2e-upgrade" && (cd "$x" && md5sum usr/share/doc/nri-qos/e2e-upgrade >> DEBIAN/md5sums) || return 1
  dpkg-deb --root-owner-group -b "$x" "$in/pkg/nri-qos-upgrade.deb" >/dev/null || return 1
  rm -rf "$x"
  local want have missing p
  want=$(dpkg-deb -f "$deb" Depends | tr ',' '\n' | sed 's/(.*//; s/|.*//; s/[[:space:]]//g' | grep -v '^$')
  # shellcheck disable=SC2086
  want=$(apt-cache depends --recurse --no-recommends --no-suggests --no-conflicts --no-breaks --no-replaces --no-enhances $want 2>/dev/null |
         grep -v '^[[:space:]<]' | sort -u)
  have=$(debugfs -R 'cat /var/lib/dpkg/status' "$BASE" 2>/dev/null | awk '/^Package: /{p=$2} /^Status: install ok installed/{print p}' | sort -u)
  missing=$(comm -23 <(echo "$want") <(echo "$have"))
  vm_log "staging $(basename "$deb") and the packages the image lacks: ${missing//$'\n'/ }"
  for p in $missing; do
    ls "$VMC/../nodevm-debs/${p}_"*.deb >/dev/null 2>&1 ||
      (cd "$VMC/../nodevm-debs" && apt-get download "$p" >&2) || { vm_log "apt-get download $p failed"; return 1; }
    cp -a "$VMC/../nodevm-debs/${p}_"*.deb "$in/pkg/deps/"
  done
}

# The tree under test, self-contained: tests/e2e, the bundled and the test policy, the binary, the generated
# CRI stubs and the busybox image (built here: the VM has Debian's busybox too, but one archive
# keeps the image digest identical), sid's containerd/shim/ctr.
stage_input() { # DIR
  local in=$1
  rm -rf "$in"; mkdir -p "$in/repo/tests" "$in/repo/conf/nri.d" "$in/repo/build" "$in/cache/$C21_SUITE-root/usr/bin"
  cp -a "$E2E_HERE" "$in/repo/tests/e2e"
  cp -a "$BUNDLED_POLICY" "$in/repo/conf/nri.d/nri-qos.toml"
  mkdir -p "$in/repo/tests/fixtures/policy" && cp -a "$TEST_POLICY" "$in/repo/tests/fixtures/policy/classic.toml"
  cp -a "$NRI_QOS_BIN" "$in/repo/build/nri-qos"
  [ -x "$(dirname "$NRI_QOS_BIN")/nri-qos-cri" ] && cp -a "$(dirname "$NRI_QOS_BIN")/nri-qos-cri" "$in/repo/build/"
  stage_deb "$in" || return 1
  # the companion that sets systemd unit properties (dynamically linked: libsystemd0 is in the image)
  [ -x "$(dirname "$NRI_QOS_BIN")/nri-qos-systemd" ] && cp -a "$(dirname "$NRI_QOS_BIN")/nri-qos-systemd" "$in/repo/build/"
  local b
  for b in containerd containerd-shim-runc-v2 ctr; do
    cp -a "$E2E_CACHE/$C21_SUITE-root/usr/bin/$b" "$in/cache/$C21_SUITE-root/usr/bin/" || return 1
  done
  # bench/gostub (static), the second NRI plugin of vm-c21-native-plugin-conflict: built on the
  # host by `containerd17.sh prepare 2.1` (the VM has no Go); none: that scenario SKIPs
  if [ -x "$E2E_CACHE/bin/gostub" ]; then mkdir -p "$in/cache/bin" && cp -a "$E2E_CACHE/bin/gostub" "$in/cache/bin/"; fi
  # containerd v2.3.4 (native23 inside): the binaries the host unpacked and checked against the
  # build's SHA256SUMS, with that file as E2E_RUNTIMES/containerd-2.3.4/SHA256SUMS (fetch_runtime
  # takes an unpacked root whose recorded sums equal the build's)
  if [[ " $VM_SUITES " == *" native23 "* ]]; then
    local r=$E2E_CACHE/containerd-2.3.4-root
    mkdir -p "$in/cache/containerd-2.3.4-root/usr/bin" "$in/runtimes/containerd-2.3.4" || return 1
    for b in containerd containerd-shim-runc-v2 ctr; do cp -a "$r/usr/bin/$b" "$in/cache/containerd-2.3.4-root/usr/bin/" || return 1; done
    cp -a "$r/.e2e-sha256" "$in/cache/containerd-2.3.4-root/" && cp -a "$E2E_RUNTIMES/containerd-2.3.4/SHA256SUMS" "$in/runtimes/containerd-2.3.4/" || return 1
  fi
  image_tar && cp -a "$E2E_CACHE/image.tar" "$in/cache/" || return 1
  "$PY" "$E2E_HERE/cri/criclient.py" --gen-only >/dev/null 2>&1 || true
  [ -d "$CRI_PYGEN_DIR" ] && cp -a "$CRI_PYGEN_DIR" "$in/cache/cri-pygen"
  write_inner "$in/test.sh"
}

suite() {
  local why
  [ "$(id -u)" = 0 ] || { skip vm "not root"; return 0; }
  why=$(vm_tools) || { skip vm "qemu cannot run here: $why"; return 0; }
  [ -r /dev/kvm ] || [ "${E2E_VM_ACCEL:-tcg}" = tcg ] || { skip vm "no /dev/kvm for E2E_VM_ACCEL=kvm"; return 0; }
  qemu-system-x86_64 -accel help 2>/dev/null | grep -qx "${E2E_VM_ACCEL:-tcg}" \
    || { skip vm "qemu-system-x86_64 has no ${E2E_VM_ACCEL:-tcg} accelerator"; return 0; }
  why=$(vm_image) || { skip vm "cannot build the node image: $why"; return 0; }
  # sid's containerd 2.1 (same private-root recipe as the host suite)
  bash "$E2E_HERE/containerd17.sh" prepare 2.1 </dev/null >&2 \
    || { skip vm "cannot fetch Debian sid's containerd: $(tail -1 "$E2E_CACHE/sid.err" 2>/dev/null)"; return 0; }
  # containerd v2.3.4 from ../shared/runtimes, unpacked and checked on the host (the VM needs
  # no xz); absent: its scenarios SKIP with the reason
  VM_SUITES=${E2E_VM_SUITES:-16 native21 native23}
  if [[ " $VM_SUITES " == *" native23 "* ]]; then
    if [ ! -f "$E2E_RUNTIMES/containerd-2.3.4/SHA256SUMS" ]; then
      skip vm-c23-native "no containerd v2.3.4 build: $E2E_RUNTIMES/containerd-2.3.4/SHA256SUMS absent (E2E_RUNTIMES, ../shared/runtimes beside the checkout)"
      VM_SUITES=${VM_SUITES//native23/}
    elif ! bash "$E2E_HERE/containerd17.sh" prepare 2.3 </dev/null >&2 || [ ! -f "$E2E_CACHE/containerd-2.3.4-root/.e2e-sha256" ]; then
      fail vm-c23-native-setup "containerd v2.3.4 could not be unpacked from $E2E_RUNTIMES/containerd-2.3.4 and checked against its SHA256SUMS"
      VM_SUITES=${VM_SUITES//native23/}
    fi
  fi
  local in=$VMC/run
  rm -rf "$in" "$in.img" "$in.result" "$in.console"
  stage_input "$in" || { fail vm-setup "staging the input disk failed"; return 1; }
  why=$(vm_boot "$in") || { fail vm "$why"; tail -c 3000 "$in.console" | tr -d '\r' >&2; return 1; }
  cat "$in.result/err.txt" >&2 2>/dev/null
  local rc; rc=$(cat "$in.result/rc")
  # the inner run.sh's result lines, renamed; its counts are recomputed by the outer run.sh
  grep -E '^(PASS|FAIL|SKIP) ' "$in.result/out.txt" | tee "$in.result/lines"
  if ! grep -q '^PASS ' "$in.result/lines"; then fail vm "no scenario passed inside the VM (inner exit $rc)"; fi
  [ "$rc" = 0 ] || { grep -q '^FAIL ' "$in.result/lines" || fail vm "inner run.sh exited $rc without a FAIL line"; }
  rm -rf "$in" "$in.img"   # keep result/ and the console log for inspection
  ! grep -q '^FAIL ' "$in.result/lines"
}

case "${1:-suite}" in
  suite) suite ;;
  image) why=$(vm_tools) && why=$(vm_image) || { echo "nodevm: $why" >&2; exit 1; } ;;
  run)
    shift; [ $# -ge 1 ] || { echo "usage: $0 run SCRIPT [FILE...]" >&2; exit 2; }
    why=$(vm_tools) && why=$(vm_image) || { echo "nodevm: $why" >&2; exit 1; }
    in=$VMC/manual; rm -rf "$in" "$in.img" "$in.result"; mkdir -p "$in"
    install -m 0755 "$1" "$in/test.sh"; shift
    for f in "$@"; do cp -a "$f" "$in/"; done
    why=$(vm_boot "$in") || { echo "nodevm: $why" >&2; tail -c 3000 "$in.console" >&2; exit 1; }
    cat "$in.result/out.txt" "$in.result/err.txt" 2>/dev/null; exit "$(cat "$in.result/rc" 2>/dev/null || echo 1)" ;;
  clean) rm -rf "$VMC" ;;
  *) sed -n '2,30p' "$0" >&2; exit 2 ;;
esac
