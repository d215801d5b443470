#include "os/sandbox.hpp"

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <linux/landlock.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <vector>

#include "os/sandbox_syscalls.hpp"
#include "seccomp_bpf.h"  // generated at build time: kSeccompBpf, kSeccompZygoteBpf, ...

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
constexpr uint64_t kFsExecute = 1ULL << 0, kFsWriteFile = 1ULL << 1, kFsRemoveDir = 1ULL << 4, kFsRemoveFile = 1ULL << 5, kFsMakeChar = 1ULL << 6,
                   kFsMakeDir = 1ULL << 7, kFsMakeReg = 1ULL << 8, kFsMakeSock = 1ULL << 9, kFsMakeFifo = 1ULL << 10, kFsMakeBlock = 1ULL << 11,
                   kFsMakeSym = 1ULL << 12,
                   kFsRefer = 1ULL << 13,  // ABI 2
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

/// mkdir -p: the directory itself first, its parents (recursively) only when that fails with
/// ENOENT. Returns 0 or -errno.
int mkdir_p(const std::string& path, mode_t mode) {
    if (path.empty()) return -EINVAL;
    if (mkdir(path.c_str(), mode) == 0 || errno == EEXIST) return 0;
    if (errno != ENOENT) return -errno;
    size_t slash = path.find_last_not_of('/');
    slash = slash == std::string::npos ? std::string::npos : path.rfind('/', slash);
    if (slash == std::string::npos || slash == 0) return -ENOENT;  // no parent to make (relative or "/")
    if (int r = mkdir_p(path.substr(0, slash), mode); r != 0) return r;
    return mkdir(path.c_str(), mode) == 0 || errno == EEXIST ? 0 : -errno;
}

/// O_PATH descriptor of directory `path` (symlinks followed, as a Landlock rule's parent_fd
/// wants), or -1. With `create`, a missing directory is made first (with its parents, `mode`):
/// it is opened first and created only on ENOENT, so that a node where it exists (every event
/// but the first) pays one openat and no mkdir.
int open_root(const std::string& path, bool create, mode_t mode) {
    int fd = open(path.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0 || !create || errno != ENOENT) return fd;
    mkdir_p(path, mode);
    return open(path.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
}

/// The file-system accesses a ruleset of this ABI handles (everything that writes or executes).
uint64_t handled_fs(int abi) {
    uint64_t fs = kFsExecute | kFsWriteFile | kFsRemoveDir | kFsRemoveFile | kFsMakeChar | kFsMakeDir | kFsMakeReg | kFsMakeSock | kFsMakeFifo |
                  kFsMakeBlock | kFsMakeSym;
    if (abi >= 2) fs |= kFsRefer;
    if (abi >= 3) fs |= kFsTruncate;
    return fs;
}

/// A new ruleset fd handling writes and execute (and TCP bind/connect on ABI 4+) with no rule
/// yet, or -errno.
int new_ruleset(int abi) {
    RulesetAttr attr{handled_fs(abi), abi >= 4 ? (kNetBindTcp | kNetConnectTcp) : 0};
    size_t size = abi >= 4 ? sizeof attr : sizeof attr.handled_access_fs;
    int rfd = ll_create(&attr, size, 0);
    return rfd < 0 ? -errno : rfd;
}

/// Allow writes beneath directory `dirfd` in ruleset `rfd`: everything but execute and device
/// nodes. Returns "" or why not (`name` says which directory).
std::string add_beneath(int abi, int rfd, int dirfd, const std::string& name) {
    PathBeneathAttr pb{handled_fs(abi) & ~(kFsExecute | kFsMakeChar | kFsMakeBlock), dirfd};
    if (syscall(__NR_landlock_add_rule, rfd, 1 /* LANDLOCK_RULE_PATH_BENEATH */, &pb, 0) == 0) return "";
    return "landlock_add_rule(" + name + "): " + errno_name(errno);
}

/// Allow executing the file `fd` (O_PATH) in ruleset `rfd`: a rule on a file, execute only.
std::string add_exec(int rfd, int fd, const std::string& name) {
    PathBeneathAttr pb{kFsExecute, fd};
    if (syscall(__NR_landlock_add_rule, rfd, 1 /* LANDLOCK_RULE_PATH_BENEATH */, &pb, 0) == 0) return "";
    return "landlock_add_rule(execute " + name + "): " + errno_name(errno);
}

/// Enforce ruleset `rfd` on the calling thread (a new layer: Landlock layers only narrow) and
/// close it. Returns "" or why not.
std::string restrict_and_close(int rfd) {
    long r = syscall(__NR_landlock_restrict_self, rfd, 0);
    int e = errno;
    close(rfd);
    return r == 0 ? std::string() : "landlock_restrict_self: " + errno_name(e);
}

/// Apply a Landlock ruleset allowing writes beneath the directories `fds` (names for messages)
/// only; -1 entries are skipped (absent root: nothing can be written there anyway). The fds stay
/// open. Returns "" or why not.
std::string apply_landlock(int abi, const std::vector<int>& fds, const std::vector<std::string>& names, const std::vector<int>& exec_fds = {},
                           const std::vector<std::string>& exec_names = {}) {
    int rfd = new_ruleset(abi);
    if (rfd < 0) return "landlock_create_ruleset: " + errno_name(-rfd);
    for (size_t i = 0; i < fds.size(); ++i) {
        if (fds[i] < 0) continue;
        if (std::string e = add_beneath(abi, rfd, fds[i], names[i]); !e.empty()) {
            close(rfd);
            return e;
        }
    }
    for (size_t i = 0; i < exec_fds.size(); ++i) {
        if (exec_fds[i] < 0) continue;
        if (std::string e = add_exec(rfd, exec_fds[i], exec_names[i]); !e.empty()) {
            close(rfd);
            return e;
        }
    }
    return restrict_and_close(rfd);
}

/// What install_sandbox keeps for the narrowing layer (narrow_installed_sandbox), so that it
/// walks no path again: the O_PATH fds of the writable roots but procfs (opened once, by
/// install_sandbox), the procfs root's (for /proc/<pid>), and, once prepared, a ruleset already
/// holding the static rules. The fds are O_CLOEXEC and never closed: the process exits soon
/// (one-shot, evaluator), or hands them to its spares (zygote). An O_PATH fd gives no access the
/// path does not: Landlock judges the file reached, however it is named.
struct Held {
    int abi = 0;
    std::vector<int> fds;  ///< static writable roots (cgroup, resctrl, state, cache, last good, sinks)
    std::vector<std::string> names;  ///< their paths, for messages
    std::vector<int> exec_fds;  ///< files that may be executed (SandboxRoots::exec_files)
    std::vector<std::string> exec_names;
    int proc_fd = -1;  ///< the procfs root, or -1
    int ready = -1;  ///< prepared narrowing ruleset (static rules only), or -1
};

/// A fresh ruleset holding the static rules of `h` (no procfs), or -1 with the reason in `why`.
int static_ruleset(const Held& h, std::string& why) {
    int rfd = new_ruleset(h.abi);
    if (rfd < 0) {
        why = "landlock_create_ruleset: " + errno_name(-rfd);
        return -1;
    }
    for (size_t i = 0; i < h.fds.size(); ++i) {
        if (h.fds[i] < 0) continue;
        if ((why = add_beneath(h.abi, rfd, h.fds[i], h.names[i])).empty()) continue;
        close(rfd);
        return -1;
    }
    for (size_t i = 0; i < h.exec_fds.size(); ++i) {
        if (h.exec_fds[i] < 0) continue;
        if ((why = add_exec(rfd, h.exec_fds[i], h.exec_names[i])).empty()) continue;
        close(rfd);
        return -1;
    }
    return rfd;
}

/// The narrowing layer over `h`: its prepared ruleset (or a new one with the static rules),
/// plus /proc/<pid> of each of `pids` resolved beneath the held procfs root (pids <= 0: none),
/// enforced as one layer.
std::string narrow_held(Held& h, const std::string& proc_root, const long* pids, size_t n) {
    std::string why;
    int rfd = h.ready;
    h.ready = -1;  // used once: the next narrowing (tests) builds its own
    if (rfd < 0 && (rfd = static_ruleset(h, why)) < 0) return why;
    for (size_t i = 0; i < n && h.proc_fd >= 0; ++i) {
        const long pid = pids[i];
        if (pid <= 0) continue;  // a repeated pid only adds the same rule again
        const std::string name = std::to_string(pid);
        int pfd = openat(h.proc_fd, name.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (pfd >= 0) {  // absent: the task is gone, nothing to write there
            why = add_beneath(h.abi, rfd, pfd, proc_root + "/" + name);
            close(pfd);
            if (!why.empty()) {
                close(rfd);
                return why;
            }
        }
    }
    return restrict_and_close(rfd);
}

std::string narrow_held(Held& h, const std::string& proc_root, long pid) { return narrow_held(h, proc_root, &pid, 1); }

// ---- seccomp -----------------------------------------------------------------------------
// libseccomp compiles the allow-list (sandbox_syscalls.hpp) into a BPF program at build time
// (src/tools/seccomp-bpf-gen.cpp → build/gen/seccomp_bpf.h): building it at run time cost ~0.27 M
// instructions, a quarter of an invocation. Here the program is copied, the placeholder pid of
// the tgkill rule replaced by ours (programs that have one), and loaded with seccomp(2).
std::string load_program(const struct sock_filter* src, size_t n, bool patch_pid) {
    // A program without a pid to patch (the spare's drop filter) is loaded as it is: seccomp(2)
    // copies it and never writes it. The heap copy made a freshly cloned spare allocate, and so
    // fault in copy-on-write heap pages, before it had read anything (docs/hot-path.md).
    std::vector<struct sock_filter> prog;
    if (patch_pid) prog.assign(src, src + n);
    int patched = 0;
    if (patch_pid) {
        for (auto& ins : prog)
            if (ins.k == kTgkillPidPlaceholder) {
                ins.k = static_cast<uint32_t>(getpid());
                ++patched;
            }
        if (patched != 1) return "seccomp: compiled program has " + std::to_string(patched) + " pid placeholders (want 1)";
    }
    struct sock_fprog fp {};
    fp.len = static_cast<unsigned short>(n);
    fp.filter = patch_pid ? prog.data() : const_cast<struct sock_filter*>(src);
    if (syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_TSYNC, &fp) != 0)
        return std::string("seccomp(SECCOMP_SET_MODE_FILTER): ") + std::strerror(errno);
    return "";
}

std::string install_seccomp(SandboxProfile profile) {
    if (profile == SandboxProfile::EvaluatorSystemd)
        return load_program(kSeccompSystemdBpf, sizeof kSeccompSystemdBpf / sizeof kSeccompSystemdBpf[0], true);
    if (profile == SandboxProfile::Zygote) return load_program(kSeccompZygoteBpf, sizeof kSeccompZygoteBpf / sizeof kSeccompZygoteBpf[0], true);
    return load_program(kSeccompBpf, sizeof kSeccompBpf / sizeof kSeccompBpf[0], true);
}

bool g_installed = false;
SandboxStatus g_status;
SandboxRoots g_roots;
Held g_held;  // install_sandbox's roots, when its Landlock layer is enforced

}  // namespace

const char* const* sandbox_allowed_syscalls() { return kSandboxAllowed; }

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
    Held h;
    h.abi = st.landlock_abi;
    for (const std::string* d : {&roots.cgroup_root, &roots.resctrl_root, &roots.state_dir, &roots.cache_dir, &roots.last_good_dir})
        if (!d->empty()) h.fds.push_back(open_root(*d, false, 0)), h.names.push_back(*d);
    for (const auto& d : roots.sink_dirs) h.fds.push_back(open_root(d, false, 0)), h.names.push_back(d);
    for (const auto& f : roots.exec_files)
        if (!f.empty()) h.exec_fds.push_back(open(f.c_str(), O_PATH | O_CLOEXEC)), h.exec_names.push_back(f);
    if (!roots.proc_root.empty()) h.proc_fd = open_root(roots.proc_root, false, 0);
    std::string why = narrow_held(h, roots.proc_root, pid);
    for (int fd : h.fds)
        if (fd >= 0) close(fd);
    for (int fd : h.exec_fds)
        if (fd >= 0) close(fd);
    if (h.proc_fd >= 0) close(h.proc_fd);
    return why;
}

std::string narrow_installed_sandbox(long pid) {
    if (!g_installed || !g_status.landlock) return "";
    return narrow_held(g_held, g_roots.proc_root, pid);
}

std::string narrow_installed_sandbox_union(const std::vector<long>& pids) {
    if (!g_installed || !g_status.landlock) return "";
    return narrow_held(g_held, g_roots.proc_root, pids.data(), pids.size());
}

std::string prepare_narrowing() {
    if (!g_installed || !g_status.landlock || g_held.ready >= 0) return "";
    std::string why;
    g_held.ready = static_ruleset(g_held, why);
    return why;
}

const SandboxStatus* installed_sandbox() { return g_installed ? &g_status : nullptr; }

std::string SandboxStatus::summary() const {
    std::string s = seccomp ? "seccomp on" : "seccomp OFF (" + error + ")";
    if (landlock) s += "; landlock ABI " + std::to_string(landlock_abi) + " on";
    else s += "; landlock off: " + landlock_why + (seccomp ? "; seccomp only" : "");
    return s;
}

std::string drop_zygote_calls() { return load_program(kSeccompDropZygoteBpf, sizeof kSeccompDropZygoteBpf / sizeof kSeccompDropZygoteBpf[0], false); }

std::string confine_relay() {
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return std::string("PR_SET_NO_NEW_PRIVS: ") + std::strerror(errno);
    std::string why;
    int abi = landlock_abi_version(&why);
    std::string ll = abi > 0 ? apply_landlock(abi, {}, {}) : "landlock: " + why;
    std::string sc = load_program(kSeccompRelayBpf, sizeof kSeccompRelayBpf / sizeof kSeccompRelayBpf[0], true);
    std::string out = sc;
    if (!ll.empty() && abi > 0) out += (out.empty() ? "" : "; ") + ll;
    return out;
}

SandboxStatus install_sandbox(const SandboxRoots& roots, SandboxProfile profile) {
    SandboxStatus st;
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) {
        st.error = std::string("PR_SET_NO_NEW_PRIVS: ") + std::strerror(errno);
        st.landlock_why = "needs no_new_privs";
        return st;
    }
    std::string why;
    st.landlock_abi = landlock_abi_version(&why);
    if (st.landlock_abi > 0) {
        // Each root is opened once (O_PATH), here; the descriptors serve this layer and the
        // narrowing one (narrow_installed_sandbox), which so walks no path again.
        Held h;
        h.abi = st.landlock_abi;
        auto keep = [&h](const std::string& d, bool create, mode_t mode) {
            if (d.empty()) return;
            for (const auto& n : h.names)
                if (n == d) return;  // named twice (a sink in the state dir): one rule is enough
            h.fds.push_back(open_root(d, create, mode));
            h.names.push_back(d);
        };
        keep(roots.cgroup_root, false, 0);
        keep(roots.resctrl_root, false, 0);
        // Landlock rules need an existing directory: the state, cache and last-good directories
        // are created when missing, 0700 like StateDir/the cache; the sinks' 0755 (node_exporter,
        // not root, reads the metrics file).
        for (const std::string* d : {&roots.state_dir, &roots.cache_dir, &roots.last_good_dir}) keep(*d, true, 0700);
        for (const auto& d : roots.sink_dirs) keep(d, true, 0755);
        if (!roots.proc_root.empty()) h.proc_fd = open_root(roots.proc_root, false, 0);
        for (const auto& f : roots.exec_files) {
            if (f.empty()) continue;
            h.exec_fds.push_back(open(f.c_str(), O_PATH | O_CLOEXEC));
            h.exec_names.push_back(f);
        }
        std::vector<int> fds = h.fds;
        std::vector<std::string> names = h.names;
        fds.push_back(h.proc_fd);
        names.push_back(roots.proc_root);
        why = apply_landlock(st.landlock_abi, fds, names, h.exec_fds, h.exec_names);
        st.landlock = why.empty();
        if (st.landlock) {
            // An evaluator narrows once the request is parsed: its ruleset is readied now. The
            // zygote's never is (a ruleset fd is one kernel object, shared by every process
            // that inherits it): each of its spares readies its own (prepare_narrowing).
            if (profile == SandboxProfile::Evaluator || profile == SandboxProfile::EvaluatorSystemd) {
                std::string later;  // on failure narrow_installed_sandbox tries again and says why
                h.ready = static_ruleset(h, later);
            }
            for (int fd : g_held.fds)  // a second install (tests): the first one's are unused now
                if (fd >= 0) close(fd);
            for (int fd : g_held.exec_fds)
                if (fd >= 0) close(fd);
            if (g_held.proc_fd >= 0) close(g_held.proc_fd);
            if (g_held.ready >= 0) close(g_held.ready);
            g_held = std::move(h);
        } else {
            for (int fd : fds)
                if (fd >= 0) close(fd);
            for (int fd : h.exec_fds)
                if (fd >= 0) close(fd);
        }
    }
    st.landlock_why = why;
    st.error = install_seccomp(profile);
    st.seccomp = st.error.empty();
    g_installed = true;
    g_status = st;
    g_roots = roots;
    return st;
}

}  // namespace nriqos
