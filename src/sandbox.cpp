#include "sandbox.hpp"

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

#include "sandbox_syscalls.hpp"
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

int mkdir_p(const std::string& path, mode_t mode = 0700) {
    if (path.empty()) return -EINVAL;
    for (size_t pos = path.find('/', 1);; pos = path.find('/', pos + 1)) {
        std::string part = path.substr(0, pos);
        if (!part.empty() && mkdir(part.c_str(), mode) != 0 && errno != EEXIST) return -errno;
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
// libseccomp compiles the allow-list (sandbox_syscalls.hpp) into a BPF program at build time
// (src/tools/seccomp-bpf-gen.cpp → build/gen/seccomp_bpf.h): building it at run time cost ~0.27 M
// instructions, a quarter of an invocation. Here the program is copied, the placeholder pid of
// the tgkill rule replaced by ours, and loaded with seccomp(2).
std::string load_program(const struct sock_filter* src, size_t n, bool patch_pid) {
    std::vector<struct sock_filter> prog(src, src + n);
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
    fp.filter = prog.data();
    if (syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_TSYNC, &fp) != 0)
        return std::string("seccomp(SECCOMP_SET_MODE_FILTER): ") + std::strerror(errno);
    return "";
}

std::string install_seccomp(SandboxProfile profile) {
    if (profile == SandboxProfile::Zygote)
        return load_program(kSeccompZygoteBpf, sizeof kSeccompZygoteBpf / sizeof kSeccompZygoteBpf[0], true);
    return load_program(kSeccompBpf, sizeof kSeccompBpf / sizeof kSeccompBpf[0], true);
}

bool g_installed = false;
SandboxStatus g_status;
SandboxRoots g_roots;

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
    std::vector<std::string> dirs;
    for (const std::string* d : {&roots.cgroup_root, &roots.resctrl_root, &roots.state_dir, &roots.cache_dir, &roots.last_good_dir})
        if (!d->empty()) dirs.push_back(*d);
    for (const auto& d : roots.sink_dirs) dirs.push_back(d);
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

std::string drop_zygote_calls() {
    return load_program(kSeccompDropZygoteBpf, sizeof kSeccompDropZygoteBpf / sizeof kSeccompDropZygoteBpf[0], false);
}

std::string confine_relay() {
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return std::string("PR_SET_NO_NEW_PRIVS: ") + std::strerror(errno);
    std::string why;
    int abi = landlock_abi_version(&why);
    std::string ll = abi > 0 ? [&] { int n = 0; return apply_landlock(abi, {}, n); }() : "landlock: " + why;
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
        std::vector<std::string> dirs;
        for (const std::string* d : {&roots.cgroup_root, &roots.proc_root, &roots.resctrl_root})
            if (!d->empty()) dirs.push_back(*d);
        for (const std::string* d : {&roots.state_dir, &roots.cache_dir, &roots.last_good_dir}) {
            if (d->empty()) continue;
            mkdir_p(*d);  // Landlock rules need an existing directory; 0700 like StateDir/the cache
            dirs.push_back(*d);
        }
        for (const auto& d : roots.sink_dirs) {
            mkdir_p(d, 0755);  // node_exporter (not root) reads the metrics file
            dirs.push_back(d);
        }
        int n = 0;
        why = apply_landlock(st.landlock_abi, dirs, n);
        st.landlock = why.empty();
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
