// sandbox-probe: loads the one-shot hook's sandbox (src/os/sandbox.cpp install_sandbox, the
// evaluator profile: the build's compiled seccomp program and Landlock) in this process, then
// makes calls the filter forbids and calls it allows, and prints one line per call:
//   "<call> ok" or "<call> <errno name>"
// then "probe: PASS" when the forbidden calls failed with EPERM and the allowed ones worked, else
// "probe: FAIL". Exit status 0 on PASS, 1 on FAIL. Used by tests/aarch64.sh inside an arm64 VM
// (qemu-system-aarch64): that the filter compiled for aarch64 loads and confines on a real arm64
// kernel. The same calls as tests/unit/os/test_sandbox.cpp "after install, execve, socket and
// ptrace fail with EPERM", without Catch2 and the rest of the library's tests.
// Usage: sandbox-probe SCRATCH_DIR   (an empty, writable directory)
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <string>
#include <sys/ptrace.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "os/sandbox.hpp"

namespace {

int g_bad = 0;

/// Print the outcome of a call whose return value is `rc` (errno read right after it); count it
/// as bad when it is not what `want_errno` (0: success) says.
void report(const char* name, long rc, int want_errno) {
    const int e = rc < 0 ? errno : 0;
    std::printf("%s %s\n", name, e ? strerrorname_np(e) : "ok");
    if (e != want_errno) ++g_bad;
}

}  // namespace

int main(int argc, char** argv) {
    if (argc != 2) return std::fprintf(stderr, "usage: sandbox-probe SCRATCH_DIR\n"), 2;
    std::setvbuf(stdout, nullptr, _IONBF, 0);  // every line out before the next call
    const std::string d = argv[1];
    for (const char* sub : {"/cg", "/proc", "/resctrl", "/run"}) mkdir((d + sub).c_str(), 0755);
    nriqos::SandboxRoots roots;
    roots.cgroup_root = d + "/cg";
    roots.proc_root = d + "/proc";
    roots.resctrl_root = d + "/resctrl";
    roots.state_dir = d + "/run/state";
    roots.cache_dir = d + "/run/cache";
    roots.last_good_dir = d + "/run/last-good";
    roots.policy_path = d + "/policy.toml";
    const nriqos::SandboxStatus st = nriqos::install_sandbox(roots);
    std::printf("sandbox: %s\n", st.summary().c_str());
    // Unconfined (qemu-user: no seccomp(2)), the execve below would replace this process.
    if (!st.seccomp) return std::printf("probe: FAIL (seccomp not loaded: %s)\n", st.error.c_str()), 1;
    char* args[] = {const_cast<char*>("/bin/true"), nullptr};
    char* envp[] = {nullptr};
    report("execve", execve("/bin/true", args, envp), EPERM);
    report("socket", socket(AF_INET, SOCK_STREAM, 0), EPERM);
    report("ptrace", ptrace(PTRACE_TRACEME, 0, nullptr, nullptr), EPERM);
    report("kill_other", kill(1, 0), EPERM);
    report("chmod", chmod(roots.cgroup_root.c_str(), 0777), EPERM);
    report("getpid", getpid(), 0);
    report("write", write(STDOUT_FILENO, "", 0), 0);
    std::printf("probe: %s\n", g_bad ? "FAIL" : "PASS");
    std::fflush(stdout);
    return g_bad ? 1 : 0;
}
