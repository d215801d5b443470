#include "sandbox.hpp"

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <linux/landlock.h>
#include <seccomp.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <vector>

namespace nriqos {

namespace {

// ---- Landlock (landlock(7); uapi linux/landlock.h) ---------------------------------------
// Debian bookworm's header stops at ABI 2; the later access bits and attribute fields are
// defined here from the kernel's uapi (stable ABI).
#ifndef __NR_landlock_create_ruleset
#define __NR_landlock_create_ruleset 444
#endif
#ifndef __NR_landlock_add_rule
#define __NR_landlock_add_rule 445
#endif
#ifndef __NR_landlock_restrict_self
#define __NR_landlock_restrict_self 446
#endif
constexpr uint64_t kFsExecute = 1ULL << 0, kFsWriteFile = 1ULL << 1, kFsRemoveDir = 1ULL << 4,
                   kFsRemoveFile = 1ULL << 5, kFsMakeChar = 1ULL << 6, kFsMakeDir = 1ULL << 7,
                   kFsMakeReg = 1ULL << 8, kFsMakeSock = 1ULL << 9, kFsMakeFifo = 1ULL << 10,
                   kFsMakeBlock = 1ULL << 11, kFsMakeSym = 1ULL << 12,
                   kFsRefer = 1ULL << 13,     // ABI 2
                   kFsTruncate = 1ULL << 14;  // ABI 3
constexpr uint64_t kNetBindTcp = 1ULL << 0, kNetConnectTcp = 1ULL << 1;  // ABI 4

struct RulesetAttr {  // struct landlock_ruleset_attr, grown per ABI
    uint64_t handled_access_fs;
    uint64_t handled_access_net;  // ABI 4
};
struct PathBeneathAttr {  // struct landlock_path_beneath_attr (packed in the uapi)
    uint64_t allowed_access;
    int32_t parent_fd;
} __attribute__((packed));

int ll_create(const RulesetAttr* attr, size_t size, uint32_t flags) {
    return static_cast<int>(syscall(__NR_landlock_create_ruleset, attr, size, flags));
}

std::string errno_name(int e) {
    switch (e) {
        case ENOSYS: return "kernel has no Landlock (ENOSYS)";
        case EOPNOTSUPP: return "Landlock is disabled on this kernel (EOPNOTSUPP: not in lsm=)";
        case EPERM: return "not permitted (EPERM)";
        default: return std::strerror(e);
    }
}

int mkdir_p(const std::string& path) {
    if (path.empty()) return -EINVAL;
    for (size_t pos = path.find('/', 1);; pos = path.find('/', pos + 1)) {
        std::string part = path.substr(0, pos);
        if (!part.empty() && mkdir(part.c_str(), 0700) != 0 && errno != EEXIST) return -errno;
        if (pos == std::string::npos) break;
    }
    return 0;
}

/// Apply a Landlock ruleset allowing writes beneath `dirs` only. Returns "" or why not.
std::string apply_landlock(int abi, const std::vector<std::string>& dirs, int& n_rules) {
    uint64_t fs = kFsExecute | kFsWriteFile | kFsRemoveDir | kFsRemoveFile | kFsMakeChar | kFsMakeDir | kFsMakeReg |
                  kFsMakeSock | kFsMakeFifo | kFsMakeBlock | kFsMakeSym;
    if (abi >= 2) fs |= kFsRefer;
    if (abi >= 3) fs |= kFsTruncate;
    RulesetAttr attr{fs, abi >= 4 ? (kNetBindTcp | kNetConnectTcp) : 0};
    size_t size = abi >= 4 ? sizeof attr : sizeof attr.handled_access_fs;
    int rfd = ll_create(&attr, size, 0);
    if (rfd < 0) return "landlock_create_ruleset: " + errno_name(errno);
    // Beneath a writable root: everything but execute and device nodes.
    const uint64_t allow = fs & ~(kFsExecute | kFsMakeChar | kFsMakeBlock);
    n_rules = 0;
    for (const auto& d : dirs) {
        int fd = open(d.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0) continue;  // absent root: nothing can be written there anyway
        PathBeneathAttr pb{allow, fd};
        long r = syscall(__NR_landlock_add_rule, rfd, 1 /* LANDLOCK_RULE_PATH_BENEATH */, &pb, 0);
        int e = errno;
        close(fd);
        if (r != 0) {
            close(rfd);
            return "landlock_add_rule(" + d + "): " + errno_name(e);
        }
        ++n_rules;
    }
    if (syscall(__NR_landlock_restrict_self, rfd, 0) != 0) {
        int e = errno;
        close(rfd);
        return "landlock_restrict_self: " + errno_name(e);
    }
    close(rfd);
    return "";
}

// ---- seccomp -----------------------------------------------------------------------------
// What the one-shot hook calls after start-up (strace -f of invoke/explain/nri-eval with and
// without a compiled-policy cache, v1 and v2 trees, every event): stdin/stdout/stderr and file
// I/O, openat2 path resolution, the state and cache directories (mkdir, temp file + rename,
// unlink), statfs for the layout probe, memory management, the deadline timer (setitimer,
// SIGALRM), exit. A few harmless relatives are added so that a libc or compiler update that
// switches between equivalents (stat/newfstatat/statx, rename/renameat2, readv/writev) does not
// break the hook. Unknown names on the running architecture are skipped.
const char* const kAllowed[] = {
    // I/O on open fds
    "read", "readv", "pread64", "write", "writev", "close", "lseek", "fcntl", "dup", "dup3",
    "fsync", "fdatasync", "flock", "getdents64",
    // opening and inspecting files
    "openat", "openat2", "open", "fstat", "newfstatat", "stat", "lstat", "statx", "statfs", "fstatfs",
    "readlink", "readlinkat", "faccessat", "faccessat2", "access", "getcwd",
    // state and cache directories
    "mkdir", "mkdirat", "rename", "renameat", "renameat2", "unlink", "unlinkat",
    // memory
    "brk", "mmap", "munmap", "mremap", "mprotect", "madvise",
    // signals and the deadline timer
    "rt_sigaction", "rt_sigprocmask", "rt_sigreturn", "sigaltstack", "setitimer", "getitimer", "alarm",
    "restart_syscall",
    // identity, time, randomness, threads
    "getpid", "gettid", "getuid", "geteuid", "getgid", "getegid", "clock_gettime", "clock_getres",
    "gettimeofday", "time", "getrandom", "futex", "sched_yield", "set_robust_list", "rseq",
    // exit
    "exit", "exit_group",
    // Landlock can only restrict further (narrow_sandbox)
    "landlock_create_ruleset", "landlock_add_rule", "landlock_restrict_self",
    nullptr,
};

std::string install_seccomp() {
    scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ERRNO(EPERM));
    if (!ctx) return "seccomp_init failed";
    std::string err;
    auto fail = [&](const std::string& what, int rc) {
        if (err.empty()) err = what + ": " + std::strerror(-rc);
    };
    int rc;
    if ((rc = seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_ERRNO(EPERM))) != 0) fail("seccomp_attr_set(BADARCH)", rc);
    if ((rc = seccomp_attr_set(ctx, SCMP_FLTATR_CTL_NNP, 1)) != 0) fail("seccomp_attr_set(NNP)", rc);
    if ((rc = seccomp_attr_set(ctx, SCMP_FLTATR_CTL_TSYNC, 1)) != 0) fail("seccomp_attr_set(TSYNC)", rc);
    for (const char* const* n = kAllowed; *n; ++n) {
        int nr = seccomp_syscall_resolve_name(*n);
        if (nr == __NR_SCMP_ERROR) continue;
        if ((rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, nr, 0)) != 0) fail(std::string("seccomp_rule_add(") + *n + ")", rc);
    }
    // abort()/raise() signal the calling thread only: tgkill(getpid(), ...), tkill(gettid()).
    int nr = seccomp_syscall_resolve_name("tgkill");
    if (nr != __NR_SCMP_ERROR && (rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, nr, 1, SCMP_A0(SCMP_CMP_EQ, static_cast<scmp_datum_t>(getpid())))) != 0)
        fail("seccomp_rule_add(tgkill)", rc);
    if (err.empty() && (rc = seccomp_load(ctx)) != 0) fail("seccomp_load", rc);
    seccomp_release(ctx);
    return err;
}

bool g_installed = false;
SandboxStatus g_status;
SandboxRoots g_roots;

}  // namespace

const char* const* sandbox_allowed_syscalls() { return kAllowed; }

bool sandbox_disabled_by_env() {
    const char* v = std::getenv("NRI_QOS_NO_SANDBOX");
    return v && *v && std::strcmp(v, "0") != 0;
}

int landlock_abi_version(std::string* why) {
    int v = ll_create(nullptr, 0, LANDLOCK_CREATE_RULESET_VERSION);
    if (v < 0) {
        if (why) *why = errno_name(errno);
        return 0;
    }
    return v;
}

std::string narrow_sandbox(const SandboxStatus& st, const SandboxRoots& roots, long pid) {
    if (!st.landlock) return "";
    std::vector<std::string> dirs;
    for (const std::string* d : {&roots.cgroup_root, &roots.resctrl_root, &roots.state_dir, &roots.cache_dir})
        if (!d->empty()) dirs.push_back(*d);
    if (pid > 0 && !roots.proc_root.empty()) dirs.push_back(roots.proc_root + "/" + std::to_string(pid));
    int n = 0;
    return apply_landlock(st.landlock_abi, dirs, n);
}

std::string narrow_installed_sandbox(long pid) {
    return g_installed ? narrow_sandbox(g_status, g_roots, pid) : std::string();
}

const SandboxStatus* installed_sandbox() { return g_installed ? &g_status : nullptr; }

std::string SandboxStatus::summary() const {
    std::string s = seccomp ? "seccomp on" : "seccomp OFF (" + error + ")";
    if (landlock) s += "; landlock ABI " + std::to_string(landlock_abi) + " on";
    else s += "; landlock off: " + landlock_why + (seccomp ? "; seccomp only" : "");
    return s;
}

SandboxStatus install_sandbox(const SandboxRoots& roots) {
    SandboxStatus st;
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) {
        st.error = std::string("PR_SET_NO_NEW_PRIVS: ") + std::strerror(errno);
        st.landlock_why = "needs no_new_privs";
        return st;
    }
    std::string why;
    st.landlock_abi = landlock_abi_version(&why);
    if (st.landlock_abi > 0) {
        std::vector<std::string> dirs;
        for (const std::string* d : {&roots.cgroup_root, &roots.proc_root, &roots.resctrl_root})
            if (!d->empty()) dirs.push_back(*d);
        for (const std::string* d : {&roots.state_dir, &roots.cache_dir}) {
            if (d->empty()) continue;
            mkdir_p(*d);  // Landlock rules need an existing directory; 0700 like StateDir/the cache
            dirs.push_back(*d);
        }
        int n = 0;
        why = apply_landlock(st.landlock_abi, dirs, n);
        st.landlock = why.empty();
    }
    st.landlock_why = why;
    st.error = install_seccomp();
    st.seccomp = st.error.empty();
    g_installed = true;
    g_status = st;
    g_roots = roots;
    return st;
}

}  // namespace nriqos
