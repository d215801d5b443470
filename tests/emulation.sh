# Sourced by tests/lib.sh and tests/hostile.sh (BIN set): is the binary under test emulated?
# The binary under test under qemu-user (tests/aarch64.sh: NRI_QOS_BIN is a wrapper running the
# aarch64 ELF NRI_QOS_ELF on this x86_64 machine). Detected from the ELF itself: its machine is
# not the build machine's, so it runs only emulated (no binfmt handler is registered here).
# QEMU_USER=1 lets a case accept what qemu-user cannot reproduce (qemu 7.2 has no openat2,
# Landlock nor seccomp for the guest: docs/aarch64.md), and only then; native runs keep every
# assertion. DEADLINE_MS: the hook's default deadline in this run — 1000 natively; under
# qemu-user the wrapper passes --deadline-ms NRI_QOS_DEADLINE_MS explicitly (TCG translation).
QEMU_USER=0
if [ -n "${NRI_QOS_ELF:-}" ] && command -v readelf >/dev/null; then
  case "$(uname -m):$(readelf -h "$NRI_QOS_ELF" 2>/dev/null | sed -n 's/^ *Machine: *//p')" in
    aarch64:AArch64 | x86_64:*X86-64 | *:) ;;
    *) QEMU_USER=1 ;;
  esac
fi
# TIME_SCALE: what the suites' own time limits are multiplied by (1 natively; under qemu-user the
# deadline's factor, DEADLINE_MS / 1000: TCG runs the parsers of a hostile policy 5-20x slower).
DEADLINE_MS=1000; [ "$QEMU_USER" = 1 ] && DEADLINE_MS=${NRI_QOS_DEADLINE_MS:-1000}
TIME_SCALE=$(( DEADLINE_MS >= 2000 ? DEADLINE_MS / 1000 : 1 ))
