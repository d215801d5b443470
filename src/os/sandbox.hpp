// The hook's own sandbox: a seccomp allow-list and, where the kernel has it, Landlock.
//
// nri-qos runs as root for every container and parses input written by whoever may create a
// pod. Before that input is parsed, the process confines itself:
//  * seccomp (seccomp(2) SECCOMP_SET_MODE_FILTER): only the system calls the one-shot hook makes
//    after start-up are allowed (list in sandbox_syscalls.hpp, taken from strace(1) of real
//    invocations; compiled to BPF by libseccomp at build time, src/tools/seccomp-bpf-gen.cpp).
//    Any other call fails with EPERM — it does not kill the process, so the hook can still print
//    its Result. execve, socket, ptrace, mount, bpf, ioctl, ... all fail.
//  * Landlock (Linux 5.13+, landlock(7), raw syscalls; ABI probed with
//    LANDLOCK_CREATE_RULESET_VERSION): file-system writes (write-open, truncate, create, remove,
//    rename/link, make device/fifo/socket/symlink) and execute are allowed only beneath the cgroup
//    root, the resctrl root, the procfs root (for /proc/<pid>/oom_score_adj; the pid is not known
//    before the request is parsed), the state directory and the compiled-policy cache directory.
//    Reads are not restricted (the policy file may be anywhere). On ABI 4+ TCP bind/connect are
//    handled and denied too. Where Landlock is missing (openEuler 22.03: Linux 5.10) or disabled
//    (not in the boot `lsm=` list), the hook carries on with seccomp alone and says so.
// Both are irreversible for the process. The state, cache and last-good directories are created
// (mode 0700, with parents) before Landlock is applied when they are missing, because a Landlock
// rule needs an existing directory.
//
// System calls (issue #13): each writable root is opened once (O_PATH; mkdir only on ENOENT) and
// its descriptor kept for the second, narrowing layer; that layer's ruleset with the static rules
// is readied before the request is read (an evaluator by install_sandbox, a spare of the relay's
// zygote by prepare_narrowing), so that narrowing once the pid is known costs openat(/proc/<pid>),
// landlock_add_rule, landlock_restrict_self and two closes.
#pragma once

#include <string>
#include <vector>

namespace nriqos {

/// Directories the sandboxed hook may write beneath (absolute or relative paths as configured;
/// symlinks in them are followed once, here). Empty members are skipped. `policy_path` is only
/// reported: reads are never restricted.
struct SandboxRoots {
    std::string cgroup_root, proc_root, resctrl_root, state_dir, cache_dir, policy_path;
    std::string last_good_dir;  ///< last good policy copies (policy_store.hpp); writable like the cache
    /// Directories of the hook's own sinks (event log, metrics file: publish.hpp
    /// sink_dirs_before_parse), created (0755) when missing and writable beneath.
    std::vector<std::string> sink_dirs;
    /// Files the sandboxed process may execute (Landlock execute right on each file; nothing
    /// else is executable): with SandboxProfile::EvaluatorSystemd, the systemd companion and its
    /// ELF interpreter (systemd_unit.hpp). Symlinks followed; missing files are skipped.
    std::vector<std::string> exec_files;
};

/// What install_sandbox achieved.
struct SandboxStatus {
    bool seccomp = false;  ///< allow-list filter loaded
    int landlock_abi = 0;  ///< kernel's Landlock ABI version (0: unavailable)
    bool landlock = false;  ///< Landlock ruleset enforced
    std::string landlock_why;  ///< when !landlock: why ("kernel has no Landlock (ENOSYS)", ...)
    std::string error;  ///< when !seccomp: why ("" otherwise)
    /// One line for --version/--debug/metadata, e.g.
    /// "seccomp on; landlock ABI 7 on (writes beneath 5 roots)" or
    /// "seccomp on; landlock off: kernel has no Landlock (ENOSYS); seccomp only".
    std::string summary() const;
};

/// Which seccomp program install_sandbox loads (src/os/sandbox_syscalls.hpp).
enum class SandboxProfile {
    Evaluator,  ///< the hook / an evaluator: kSandboxAllowed
    /// The one-shot hook on a systemd node (systemd_unit.hpp systemd_sink_off says yes): the
    /// evaluator's list plus what running the companion nri-qos-systemd needs — vfork, execve,
    /// wait4, pipe2, the dynamic loader's calls, and for its sd-bus connection socket(AF_UNIX,
    /// SOCK_STREAM) only, connect, send/recvmsg, get/setsockopt, ppoll, prctl(PR_CAPBSET_READ)
    /// only (sandbox_syscalls.hpp kSystemdExtra). With Landlock, execute is allowed for
    /// SandboxRoots::exec_files only.
    EvaluatorSystemd,
    Zygote,  ///< the relay's evaluator zygote: kSandboxAllowed + kZygoteExtra + checked
    ///< clone(CLONE_PARENT|SIGCHLD), prctl(PR_SET_PDEATHSIG | PR_SET_NAME),
    ///< seccomp(SET_MODE_FILTER)
};

/// Install Landlock (if available) and then the seccomp filter, in the calling process (all its
/// threads: SCMP_FLTATR_CTL_TSYNC). Sets PR_SET_NO_NEW_PRIVS. Never throws; failures are in the
/// returned status (the caller decides whether to go on; nri-qos goes on and reports it).
/// Call it once, after the command line is parsed and before stdin is parsed. Both layers are
/// inherited by children (fork/clone), which is how the relay's zygote hands them out.
SandboxStatus install_sandbox(const SandboxRoots& roots, SandboxProfile profile = SandboxProfile::Evaluator);

/// In a process cloned by the zygote (Zygote profile inherited): stack a second filter that
/// fails kZygoteDrop (clone, fork, socket messages, prctl, seccomp, ...) with EPERM, so that what
/// stays allowed is the Evaluator profile. Returns "" or why not. About 16 µs (a 17-instruction
/// program) instead of ~170 µs for loading the full allow-list in every evaluator.
std::string drop_zygote_calls();

/// Second Landlock layer, once the request is parsed and the task's pid is known: the same
/// writable roots except that procfs shrinks to /proc/<pid> (pid ≤ 0: no procfs writes at all),
/// so /proc/sys, /proc/sysrq-trigger and other tasks' files are out of reach. Landlock layers
/// only ever narrow. No-op (returns "") when the first layer was not enforced. Returns "" or why
/// it failed (the first layer stays in force either way).
std::string narrow_sandbox(const SandboxStatus& st, const SandboxRoots& roots, long pid);

/// narrow_sandbox with the status and roots of this process's install_sandbox call (no-op, ""
/// when install_sandbox was not called or its Landlock layer is not enforced). This is what the
/// pipeline calls after parsing. It walks no configured path again: the roots' directories are
/// the ones install_sandbox opened (held O_PATH fds), /proc/<pid> is resolved beneath the procfs
/// root it opened, and the static rules are in the ruleset readied before the request (else
/// added now). Each call adds a layer (Landlock allows 16 per process).
std::string narrow_installed_sandbox(long pid);

/// narrow_installed_sandbox for several tasks at once (the relay's Synchronize evaluator, which
/// evaluates every pod and container of one Synchronize request in one process): one layer whose
/// procfs part is exactly the union of /proc/<pid> of `pids` (pids <= 0 and tasks that are gone
/// add nothing; an empty list: no procfs writes at all). Every other root as in
/// narrow_installed_sandbox (the cgroup root is not narrowed by either). One Landlock layer
/// whatever the count (a ruleset has no rule limit short of memory; landlock(7)). Returns "" or
/// why it failed (the first layer stays in force).
std::string narrow_installed_sandbox_union(const std::vector<long>& pids);

/// Ready the narrowing layer of this process ahead of its event: a new ruleset holding the static
/// rules (every writable root but procfs), from install_sandbox's held fds; narrow_installed_sandbox
/// then only adds /proc/<pid> and enforces it. install_sandbox does this itself for the Evaluator
/// profile; a spare cloned by the relay's zygote (Zygote profile: none readied, since a ruleset
/// fd is one kernel object shared by every process that inherits it) calls it for its own,
/// before its event. No-op ("") without an enforced Landlock layer or when one is ready. Returns
/// "" or why not (narrowing then builds the ruleset itself).
std::string prepare_narrowing();

/// Confine the native NRI relay (issue #12 §5): PR_SET_NO_NEW_PRIVS, Landlock with no writable
/// path and no execute (the relay opens nothing after Configure: its log is already open), and
/// the kRelayAllowed seccomp filter (any other call fails with EPERM). Irreversible; inherited by
/// any child forked later (the relay forks none after this). Returns "" or why a layer could not
/// be applied (the others are applied anyway); a kernel without Landlock gives seccomp only.
std::string confine_relay();

/// Status of this process's install_sandbox call (nullptr when not called), for --debug output.
const SandboxStatus* installed_sandbox();

/// Landlock ABI version of the running kernel (landlock_create_ruleset(NULL, 0,
/// LANDLOCK_CREATE_RULESET_VERSION)); 0 when unsupported, with the reason in `why` if given.
int landlock_abi_version(std::string* why = nullptr);

/// The system-call names the filter allows (for docs and tests). Names unknown on the running
/// architecture are skipped when the filter is built.
const char* const* sandbox_allowed_syscalls();

/// True when the environment asks to skip the sandbox (NRI_QOS_NO_SANDBOX=1: debugging with
/// strace/gdb, which the filter does not hinder, or running under a sanitizer).
bool sandbox_disabled_by_env();

}  // namespace nriqos
