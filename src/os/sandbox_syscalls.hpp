// The system calls the sandboxed one-shot hook may make, shared by the run-time sandbox
// (src/os/sandbox.cpp) and the build-time generator of its seccomp program
// (src/tools/seccomp-bpf-gen.cpp, which compiles this list with libseccomp).
#pragma once

#include <cstdint>

namespace nriqos {

// What the one-shot hook calls after start-up (strace -f of invoke/explain/nri-eval with and
// without a compiled-policy cache, v1 and v2 trees, every event): stdin/stdout/stderr and file
// I/O, openat2 path resolution, the state and cache directories (mkdir, temp file + rename,
// unlink), statfs for the layout probe, memory management, the deadline timer (setitimer,
// SIGALRM), exit; and for the operator's sinks (event log, metrics file, last request:
// src/event/publish.hpp) flock, pwrite64/ftruncate of the metrics state and nanosleep while waiting
// for a lock. No socket: the record goes to stderr and a file, never to journald/syslog sockets.
// A few harmless relatives are added so that a libc or compiler update that
// switches between equivalents (stat/newfstatat/statx, rename/renameat2, readv/writev) does not
// break the hook. Unknown names on the running architecture are skipped. The facts (facts.hpp)
// need nothing more: flock for their lock in the state dir, getdents64/newfstatat for the sysfs
// NUMA nodes, the kubepods cgroups and their records; sysfs is only read.
inline constexpr const char* kSandboxAllowed[] = {
    // I/O on open fds
    "read",
    "readv",
    "pread64",
    "write",
    "writev",
    "close",
    "lseek",
    "fcntl",
    "dup",
    "dup3",
    "fsync",
    "fdatasync",
    "flock",
    "getdents64",
    "pwrite64",
    "ftruncate",
    // opening and inspecting files
    "openat",
    "openat2",
    "open",
    "fstat",
    "newfstatat",
    "stat",
    "lstat",
    "statx",
    "statfs",
    "fstatfs",
    "readlink",
    "readlinkat",
    "faccessat",
    "faccessat2",
    "access",
    "getcwd",
    // state and cache directories
    "mkdir",
    "mkdirat",
    "rename",
    "renameat",
    "renameat2",
    "unlink",
    "unlinkat",
    // memory
    "brk",
    "mmap",
    "munmap",
    "mremap",
    "mprotect",
    "madvise",
    // signals and the deadline timer
    "rt_sigaction",
    "rt_sigprocmask",
    "rt_sigreturn",
    "sigaltstack",
    "setitimer",
    "getitimer",
    "alarm",
    "restart_syscall",
    // identity, time, randomness, threads
    "getpid",
    "gettid",
    "getuid",
    "geteuid",
    "getgid",
    "getegid",
    "clock_gettime",
    "clock_getres",
    "gettimeofday",
    "time",
    "getrandom",
    "futex",
    "sched_yield",
    "set_robust_list",
    "rseq",
    // the sinks' lock wait (record.hpp lock_within: flock LOCK_NB + 1 ms sleeps)
    "nanosleep",
    "clock_nanosleep",
    // exit
    "exit",
    "exit_group",
    // Landlock can only restrict further (narrow_sandbox)
    "landlock_create_ruleset",
    "landlock_add_rule",
    "landlock_restrict_self",
    nullptr,
};

/// The relay's evaluator **zygote** (src/nri/evaluator_procs.cpp) runs under the evaluator's list plus
/// what it needs to hand out spare evaluators: receive their pipe fds over its control socket,
/// report the pid, and clone. The generator adds three argument-checked rules besides these names:
/// clone only with flags == CLONE_PARENT|SIGCHLD, prctl only PR_SET_PDEATHSIG or PR_SET_NAME, seccomp only
/// SECCOMP_SET_MODE_FILTER (the spare's own, narrower filter, kZygoteDrop).
/// SandboxProfile::EvaluatorSystemd (the one-shot hook on a systemd node): what running the
/// companion nri-qos-systemd adds (src/event/systemd_unit.cpp HelperSetter; strace -f of the companion,
/// dynamically linked, talking sd-bus to systemd's private socket): spawning and reaping it, the
/// dynamic loader, and the D-Bus connection. The generator adds two argument-checked rules:
/// socket only with domain AF_UNIX and type SOCK_STREAM (flags aside), prctl only PR_CAPBSET_READ
/// (libsystemd's cap_last_cap). The companion inherits this filter (and Landlock).
inline constexpr const char* kSystemdExtra[] = {
    "vfork",      "execve",     "wait4",   "pipe2",   "arch_prctl",  "set_tid_address", "prlimit64", "uname", "sysinfo", "connect",
    "getsockopt", "setsockopt", "sendmsg", "recvmsg", "getsockname", "getpeername",     "shutdown",  "poll",  "ppoll",   nullptr,
};

inline constexpr const char* kZygoteExtra[] = {"recvmsg", "sendto", "sendmsg", "getppid", nullptr};

/// What a spare cloned by the zygote gives up at once (a second filter, default allow, these
/// fail with EPERM), so that its effective list is the evaluator's (kSandboxAllowed) again.
inline constexpr const char* kZygoteDrop[] = {"clone",   "clone3", "fork",    "vfork",   "recvmsg", "sendto",
                                              "sendmsg", "prctl",  "seccomp", "getppid", "execve",  nullptr};

/// What the native NRI relay still calls once it is confined (src/nri/relay.cpp, after
/// Configure and the keeper's fork; strace of the relay under load): I/O on the fds it already
/// has (trunk socket, pipes, the keeper's and zygotes' sockets), new pipes for spares, waiting
/// for and signalling its children, memory, signals, time, and stat of the state dir's record-path
/// memo (evaluator.hpp roots_signature). No open, no exec, no new socket, no fork (zygotes come
/// from the keeper). tgkill as for the hook (own pid).
inline constexpr const char* kRelayAllowed[] = {
    "read",          "readv",           "write",        "writev",         "close",        "fcntl",
    "poll",          "ppoll",           "pipe2",        "sendto",         "sendmsg",      "recvfrom",
    "recvmsg",       "wait4",           "waitid",       "kill",           "setpgid",      "getpid",
    "gettid",        "newfstatat",      "brk",          "mmap",           "munmap",       "mremap",
    "madvise",       "mprotect",        "rt_sigaction", "rt_sigprocmask", "rt_sigreturn", "restart_syscall",
    "clock_gettime", "clock_nanosleep", "nanosleep",    "gettimeofday",   "getrandom",    "futex",
    "exit",          "exit_group",      nullptr,
};

/// tgkill is allowed only with the hook's own pid as its first argument (abort()/raise() signal
/// the calling thread). The program is compiled with this placeholder pid, replaced at run time.
inline constexpr uint32_t kTgkillPidPlaceholder = 0x7ffffff0u;

}  // namespace nriqos
