// Unit tests for src/os/sandbox.{hpp,cpp}: the seccomp allow-list and the Landlock write roots.
// The sandbox is irreversible, so every case installs it in a forked child; the child reports
// "key=value" lines through a pipe and the parent asserts on them.
#include "../scratch.hpp"
#include <catch2/catch.hpp>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <functional>
#include <map>
#include <netinet/in.h>
#include <sstream>
#include <string>
#include <sys/ptrace.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "event/pipeline.hpp"
#include "policy/policy_store.hpp"
#include "os/sandbox.hpp"
#include "event/systemd_unit.hpp"

namespace {

struct Scratch : unit::ScratchDir {
    Scratch() : ScratchDir("sandbox-test") {}
};

void mkdirs(const std::string& p) {
    std::string cmd = "mkdir -p '" + p + "'";
    REQUIRE(std::system(cmd.c_str()) == 0);
}

void put(const std::string& path, const std::string& text) {
    int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    REQUIRE(fd >= 0);
    REQUIRE(write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size()));
    close(fd);
}

std::string slurp(const std::string& path) {
    int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return "<absent>";
    std::string s;
    char buf[4096];
    ssize_t n;
    while ((n = read(fd, buf, sizeof buf)) > 0) s.append(buf, static_cast<size_t>(n));
    close(fd);
    return s;
}

/// Run `body` in a forked child; it reports with report(key, value). Returns the reports and
/// "exit" (the child's exit status, or "signal N").
using Report = std::function<void(const std::string&, const std::string&)>;
std::map<std::string, std::string> in_child(const std::function<void(const Report&)>& body) {
    int p[2];
    REQUIRE(pipe(p) == 0);
    pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
        close(p[0]);
        Report report = [&](const std::string& k, const std::string& v) {
            std::string line = k + "=" + v + "\n";
            ssize_t r = write(p[1], line.data(), line.size());
            (void)r;
        };
        body(report);
        _exit(0);
    }
    close(p[1]);
    std::string all;
    char buf[4096];
    ssize_t n;
    while ((n = read(p[0], buf, sizeof buf)) > 0) all.append(buf, static_cast<size_t>(n));
    close(p[0]);
    int status = 0;
    REQUIRE(waitpid(pid, &status, 0) == pid);
    std::map<std::string, std::string> out;
    std::istringstream in(all);
    for (std::string line; std::getline(in, line);) {
        size_t eq = line.find('=');
        if (eq != std::string::npos) out[line.substr(0, eq)] = line.substr(eq + 1);
    }
    out["exit"] = WIFEXITED(status) ? std::to_string(WEXITSTATUS(status)) : "signal " + std::to_string(WTERMSIG(status));
    return out;
}

std::string err_of(long r) { return r >= 0 ? "ok" : std::strerror(errno); }

/// open(2) for writing (create when asked) and write one byte; "ok" or the strerror.
std::string try_write(const std::string& path, bool create) {
    int fd = open(path.c_str(), O_WRONLY | O_CLOEXEC | (create ? O_CREAT : 0), 0600);
    if (fd < 0) return std::strerror(errno);
    ssize_t n = write(fd, "1", 1);
    close(fd);
    return n == 1 ? "ok" : std::strerror(errno);
}

const std::string kEPERM = std::strerror(EPERM);
const std::string kEACCES = std::strerror(EACCES);

struct Tree {
    Scratch s;
    nriqos::SandboxRoots roots;
    Tree() {
        roots.cgroup_root = s / "cg";
        roots.proc_root = s / "proc";
        roots.resctrl_root = s / "resctrl";
        roots.state_dir = s / "run/state";  // absent: install_sandbox creates it
        roots.cache_dir = s / "run/cache";
        roots.last_good_dir = s / "var/lib/nri-qos";  // absent: install_sandbox creates it
        roots.policy_path = s / "policy.toml";
        mkdirs(s / "cg/cpu/kubepods/besteffort/pod1/c1");
        mkdirs(s / "proc/123");
        mkdirs(s / "proc/456");
        mkdirs(s / "resctrl/BE");
        mkdirs(s / "outside");
        put(s / "cg/cpu/kubepods/besteffort/pod1/c1/cpu.shares", "");
        put(s / "proc/123/oom_score_adj", "0");
        put(s / "proc/456/oom_score_adj", "0");
        put(s / "resctrl/BE/tasks", "");
        put(s / "outside/victim", "sentinel");
        // A symlink inside the cgroup root that points outside.
        REQUIRE(symlink((s / "outside").c_str(), (s / "cg/cpu/evil").c_str()) == 0);
    }
};

}  // namespace

TEST_CASE("sandbox: before install, the forbidden calls work (control)", "[sandbox]") {
    auto r = in_child([](const Report& report) {
        int fd = socket(AF_INET, SOCK_STREAM, 0);
        report("socket", err_of(fd));
        if (fd >= 0) close(fd);
    });
    CHECK(r["exit"] == "0");
    CHECK(r["socket"] == "ok");
}

TEST_CASE("sandbox: the systemd profile runs only its companion and opens only AF_UNIX stream sockets", "[sandbox][systemd]") {
    // issue #25 §2: on a systemd node the one-shot hook runs nri-qos-systemd (dynamically linked:
    // its ELF interpreter must be executable too). /bin/true stands in for the companion.
    Tree t;
    const std::string interp = nriqos::elf_interpreter("/bin/true");
    REQUIRE_FALSE(interp.empty());
    t.roots.exec_files = {"/bin/true", interp};
    auto r = in_child([&](const Report& report) {
        nriqos::SandboxStatus st = nriqos::install_sandbox(t.roots, nriqos::SandboxProfile::EvaluatorSystemd);
        report("seccomp", st.seccomp ? "on" : "off: " + st.error);
        report("landlock", st.landlock ? "on" : "off");
        nriqos::narrow_installed_sandbox(123);  // the second layer keeps the execute rules
        auto run = [](const char* path) -> std::string {
            char* argv[] = {const_cast<char*>(path), nullptr};
            char* envp[] = {nullptr};
            int fds[2];
            if (pipe2(fds, O_CLOEXEC) != 0) return std::string("pipe2: ") + std::strerror(errno);
            pid_t pid = vfork();
            if (pid == 0) {
                execve(path, argv, envp);
                int e = errno;
                ssize_t w = write(fds[1], &e, sizeof e);
                (void)w;
                _exit(127);
            }
            if (pid < 0) return std::string("vfork: ") + std::strerror(errno);
            close(fds[1]);
            int e = 0;
            ssize_t n = read(fds[0], &e, sizeof e);
            close(fds[0]);
            int status = 0;
            waitpid(pid, &status, 0);
            if (n == static_cast<ssize_t>(sizeof e)) return std::strerror(e);
            return WIFEXITED(status) ? "exit " + std::to_string(WEXITSTATUS(status)) : "signal";
        };
        report("run_companion", run("/bin/true"));
        report("run_other", run("/bin/false"));
        report("socket_inet", err_of(socket(AF_INET, SOCK_STREAM, 0)));
        report("socket_unix_dgram", err_of(socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0)));
        report("socket_unix_stream", err_of(socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0)));
        report("ptrace", err_of(ptrace(PTRACE_TRACEME, 0, nullptr, nullptr)));
        report("fork", err_of(fork()));
    });
    CHECK(r["exit"] == "0");
    CHECK(r["seccomp"] == "on");
    CHECK(r["run_companion"] == "exit 0");
    if (r["landlock"] == "on") CHECK(r["run_other"] == kEACCES);
    CHECK(r["socket_inet"] == kEPERM);
    CHECK(r["socket_unix_dgram"] == kEPERM);
    CHECK(r["socket_unix_stream"] == "ok");
    CHECK(r["ptrace"] == kEPERM);
    CHECK(r["fork"] == kEPERM);
}

TEST_CASE("sandbox: after install, execve, socket and ptrace fail with EPERM", "[sandbox]") {
    Tree t;
    auto r = in_child([&](const Report& report) {
        nriqos::SandboxStatus st = nriqos::install_sandbox(t.roots);
        report("seccomp", st.seccomp ? "on" : "off: " + st.error);
        report("summary", st.summary());
        char* argv[] = {const_cast<char*>("/bin/true"), nullptr};
        char* envp[] = {nullptr};
        report("execve", err_of(execve("/bin/true", argv, envp)));
        report("socket", err_of(socket(AF_INET, SOCK_STREAM, 0)));
        report("socket_unix", err_of(socket(AF_UNIX, SOCK_STREAM, 0)));
        report("ptrace", err_of(ptrace(PTRACE_TRACEME, 0, nullptr, nullptr)));
        report("fork", err_of(fork()));
        report("kill_other", err_of(kill(1, 0)));
        report("chmod", err_of(chmod(t.roots.cgroup_root.c_str(), 0777)));
        // still allowed: the hook's own I/O
        report("getpid", err_of(getpid()));
        report("write_stdout_pipe", err_of(write(STDERR_FILENO, "", 0)));
    });
    INFO(r["summary"]);
    CHECK(r["exit"] == "0");
    CHECK(r["seccomp"] == "on");
    CHECK(r["execve"] == kEPERM);
    CHECK(r["socket"] == kEPERM);
    CHECK(r["socket_unix"] == kEPERM);
    CHECK(r["ptrace"] == kEPERM);
    CHECK(r["fork"] == kEPERM);
    CHECK(r["kill_other"] == kEPERM);
    CHECK(r["chmod"] == kEPERM);
    CHECK(r["getpid"] == "ok");
    CHECK(r["write_stdout_pipe"] == "ok");
    CHECK(r["summary"].rfind("seccomp on; landlock ", 0) == 0);
}

TEST_CASE("sandbox: Landlock confines writes to the configured roots", "[sandbox]") {
    std::string why;
    if (nriqos::landlock_abi_version(&why) == 0) {
        WARN("Landlock unavailable (" << why << "): write confinement not testable here; seccomp only");
        return;
    }
    Tree t;
    const std::string& S = t.s.path;
    auto r = in_child([&](const Report& report) {
        nriqos::SandboxStatus st = nriqos::install_sandbox(t.roots);
        report("landlock", st.landlock ? "on" : "off: " + st.landlock_why);
        // inside the roots
        report("cgroup_write", try_write(S + "/cg/cpu/kubepods/besteffort/pod1/c1/cpu.shares", false));
        report("proc_write", try_write(S + "/proc/456/oom_score_adj", false));
        report("resctrl_write", try_write(S + "/resctrl/BE/tasks", false));
        report("state_create", try_write(S + "/run/state/.x.tmp", true));
        report("state_rename", err_of(rename((S + "/run/state/.x.tmp").c_str(), (S + "/run/state/x.json").c_str())));
        report("state_unlink", err_of(unlink((S + "/run/state/x.json").c_str())));
        report("cache_create", try_write(S + "/run/cache/p.bin", true));
        // outside the roots
        report("outside_write", try_write(S + "/outside/victim", false));
        report("outside_create", try_write(S + "/outside/new", true));
        report("tmp_create", try_write(S + "/new-in-scratch-top", true));
        report("outside_mkdir", err_of(mkdir((S + "/outside/d").c_str(), 0700)));
        report("outside_unlink", err_of(unlink((S + "/outside/victim").c_str())));
        report("via_symlink", try_write(S + "/cg/cpu/evil/victim", false));
        report("rename_out", err_of(rename((S + "/cg/cpu/kubepods/besteffort/pod1/c1/cpu.shares").c_str(), (S + "/outside/stolen").c_str())));
        report("outside_read", slurp(S + "/outside/victim"));
        // narrowed to /proc/123 once the pid is known
        report("narrow", nriqos::narrow_installed_sandbox(123));
        report("proc_own_pid", try_write(S + "/proc/123/oom_score_adj", false));
        report("proc_other_pid", try_write(S + "/proc/456/oom_score_adj", false));
        report("cgroup_after_narrow", try_write(S + "/cg/cpu/kubepods/besteffort/pod1/c1/cpu.shares", false));
    });
    CHECK(r["exit"] == "0");
    CHECK(r["landlock"] == "on");
    CHECK(r["cgroup_write"] == "ok");
    CHECK(r["proc_write"] == "ok");
    CHECK(r["resctrl_write"] == "ok");
    CHECK(r["state_create"] == "ok");
    CHECK(r["state_rename"] == "ok");
    CHECK(r["state_unlink"] == "ok");
    CHECK(r["cache_create"] == "ok");
    CHECK(r["outside_write"] == kEACCES);
    CHECK(r["outside_create"] == kEACCES);
    CHECK(r["tmp_create"] == kEACCES);
    CHECK(r["outside_mkdir"] == kEACCES);
    CHECK(r["outside_unlink"] == kEACCES);
    CHECK(r["via_symlink"] == kEACCES);
    CHECK(r["rename_out"] != "ok");
    CHECK(r["outside_read"] == "sentinel");  // reads are not restricted
    CHECK(r["narrow"] == "");
    CHECK(r["proc_own_pid"] == "ok");
    CHECK(r["proc_other_pid"] == kEACCES);
    CHECK(r["cgroup_after_narrow"] == "ok");
    // and nothing happened outside
    CHECK(slurp(S + "/outside/victim") == "sentinel");
    CHECK(slurp(S + "/outside/new") == "<absent>");
    CHECK(slurp(S + "/new-in-scratch-top") == "<absent>");
}

// Issue #31 §8: the Synchronize evaluator narrows once for every pod and container of the pass:
// procfs writes to exactly the union of their /proc/<pid> (pids <= 0 and absent tasks add
// nothing), every other root as for one event. Old code had only the one-pid narrowing: the
// evaluator of a whole pass could not have written more than one container's oom_score_adj.
TEST_CASE("sandbox: narrowing to the union of several pids", "[sandbox][sync]") {
    std::string why;
    if (nriqos::landlock_abi_version(&why) == 0) {
        WARN("Landlock unavailable (" << why << "): not testable here");
        return;
    }
    Tree t;
    const std::string& S = t.s.path;
    auto r = in_child([&](const Report& report) {
        nriqos::SandboxStatus st = nriqos::install_sandbox(t.roots);
        report("landlock", st.landlock ? "on" : "off: " + st.landlock_why);
        report("both", nriqos::narrow_installed_sandbox_union({123, 0, -5, 456, 999999}));
        report("p123", try_write(S + "/proc/123/oom_score_adj", false));
        report("p456", try_write(S + "/proc/456/oom_score_adj", false));
        report("cgroup", try_write(S + "/cg/cpu/kubepods/besteffort/pod1/c1/cpu.shares", false));
        report("outside", try_write(S + "/outside/victim", false));
    });
    CHECK(r["exit"] == "0");
    REQUIRE(r["landlock"] == "on");
    CHECK(r["both"] == "");
    CHECK(r["p123"] == "ok");
    CHECK(r["p456"] == "ok");
    CHECK(r["cgroup"] == "ok");
    CHECK(r["outside"] == kEACCES);
    auto one = in_child([&](const Report& report) {
        nriqos::install_sandbox(t.roots);
        report("one", nriqos::narrow_installed_sandbox_union({456}));
        report("p123", try_write(S + "/proc/123/oom_score_adj", false));
        report("p456", try_write(S + "/proc/456/oom_score_adj", false));
    });
    CHECK(one["one"] == "");
    CHECK(one["p123"] == kEACCES);  // not in the union
    CHECK(one["p456"] == "ok");
    auto none = in_child([&](const Report& report) {
        nriqos::install_sandbox(t.roots);
        report("none", nriqos::narrow_installed_sandbox_union({}));
        report("p123", try_write(S + "/proc/123/oom_score_adj", false));
    });
    CHECK(none["none"] == "");
    CHECK(none["p123"] == kEACCES);  // an empty union: no procfs write at all
}

// Issue #13: the narrowing layer is readied before the request and built from the directories
// install_sandbox opened. A second narrowing (no readied ruleset left: built from the held
// descriptors) narrows the same way, and layers only ever narrow: after /proc/123 then /proc/456
// neither pid is writable, the static roots still are; pid 0 leaves no procfs write at all.
TEST_CASE("sandbox: narrowing again, and to no pid, only ever narrows", "[sandbox]") {
    std::string why;
    if (nriqos::landlock_abi_version(&why) == 0) {
        WARN("Landlock unavailable (" << why << "): not testable here");
        return;
    }
    Tree t;
    const std::string& S = t.s.path;
    auto r = in_child([&](const Report& report) {
        nriqos::SandboxStatus st = nriqos::install_sandbox(t.roots);
        report("landlock", st.landlock ? "on" : "off: " + st.landlock_why);
        report("prepare_again", nriqos::prepare_narrowing());  // one is ready already: no-op
        report("narrow1", nriqos::narrow_installed_sandbox(123));
        report("p123_after1", try_write(S + "/proc/123/oom_score_adj", false));
        report("p456_after1", try_write(S + "/proc/456/oom_score_adj", false));
        report("narrow2", nriqos::narrow_installed_sandbox(456));
        report("p123_after2", try_write(S + "/proc/123/oom_score_adj", false));
        report("p456_after2", try_write(S + "/proc/456/oom_score_adj", false));
        report("cgroup_after2", try_write(S + "/cg/cpu/kubepods/besteffort/pod1/c1/cpu.shares", false));
        report("state_after2", try_write(S + "/run/state/y", true));
        report("outside_after2", try_write(S + "/outside/victim", false));
    });
    CHECK(r["exit"] == "0");
    REQUIRE(r["landlock"] == "on");
    CHECK(r["prepare_again"] == "");
    CHECK(r["narrow1"] == "");
    CHECK(r["p123_after1"] == "ok");
    CHECK(r["p456_after1"] == kEACCES);
    CHECK(r["narrow2"] == "");
    CHECK(r["p123_after2"] == kEACCES);
    CHECK(r["p456_after2"] == kEACCES);
    CHECK(r["cgroup_after2"] == "ok");
    CHECK(r["state_after2"] == "ok");
    CHECK(r["outside_after2"] == kEACCES);
    auto z = in_child([&](const Report& report) {
        nriqos::install_sandbox(t.roots);
        report("narrow0", nriqos::narrow_installed_sandbox(0));
        report("p123", try_write(S + "/proc/123/oom_score_adj", false));
        report("cgroup", try_write(S + "/cg/cpu/kubepods/besteffort/pod1/c1/cpu.shares", false));
    });
    CHECK(z["exit"] == "0");
    CHECK(z["narrow0"] == "");
    CHECK(z["p123"] == kEACCES);
    CHECK(z["cgroup"] == "ok");
}

// Issue #13: a missing state/last-good/sink directory is created (with its parents) with the
// modes it always had — 0700 for the state, cache and last-good directories, 0755 for a sink's
// (node_exporter, not root, reads the metrics file) — now that install_sandbox only creates what
// it cannot open.
TEST_CASE("sandbox: missing root directories are created with their modes", "[sandbox]") {
    if (nriqos::landlock_abi_version() == 0) {
        WARN("Landlock unavailable: directories are only created for its rules");
        return;
    }
    Tree t;
    const std::string& S = t.s.path;
    t.roots.sink_dirs = {S + "/var/log/nri-qos", S + "/var/lib/textfile/deep"};
    auto r = in_child([&](const Report& report) {
        nriqos::SandboxStatus st = nriqos::install_sandbox(t.roots);
        report("landlock", st.landlock ? "on" : "off");
        report("sink_write", try_write(S + "/var/lib/textfile/deep/m.prom", true));
    });
    CHECK(r["exit"] == "0");
    CHECK(r["landlock"] == "on");
    CHECK(r["sink_write"] == "ok");
    auto mode = [](const std::string& p) {
        struct stat sb {};
        return stat(p.c_str(), &sb) == 0 ? int(sb.st_mode & 07777) : -1;
    };
    CHECK(mode(S + "/run/state") == 0700);
    CHECK(mode(S + "/run/cache") == 0700);
    CHECK(mode(S + "/var/lib/nri-qos") == 0700);
    CHECK(mode(S + "/var/log/nri-qos") == 0755);
    CHECK(mode(S + "/var/lib/textfile") == 0755);
    CHECK(mode(S + "/var/lib/textfile/deep") == 0755);
}

TEST_CASE("sandbox: the whole pipeline still runs and prints its Result inside the sandbox", "[sandbox]") {
    Tree t;
    const std::string& S = t.s.path;
    put(t.roots.policy_path,
        "version = 1\n[settings]\ndefault_class = \"BE\"\n"
        "[classes.BE.container]\ncpu_shares = 2\noom_score_adj = 1000\n");
    const std::string req = R"({"version":"0.1","state":"create","id":"c1","sandboxID":"s1","pid":123,)"
                            R"("spec":{"cgroupsPath":"/kubepods/besteffort/pod1/c1","annotations":{}}})";
    const std::string sandbox_req =
        R"({"version":"0.1","state":"create","id":"s1","sandboxID":"s1","pid":123,)"
        R"("spec":{"cgroupsPath":"/kubepods/besteffort/pod1/s1","annotations":{"io.kubernetes.cri.container-type":"sandbox"}}})";
    auto r = in_child([&](const Report& report) {
        nriqos::SandboxStatus st = nriqos::install_sandbox(t.roots);
        report("summary", st.summary());
        nriqos::Options o;
        o.policy = t.roots.policy_path;
        o.policy_from_flag = true;
        o.cgroup_root = t.roots.cgroup_root;
        o.proc_root = t.roots.proc_root;
        o.resctrl_root = t.roots.resctrl_root;
        o.state_dir = t.roots.state_dir;
        o.cache_dir = t.roots.cache_dir;
        o.last_good_dir = t.roots.last_good_dir;
        o.last_good_dir_set = true;
        o.layout = nriqos::Layout::V1;
        int code = -1;
        // sandbox event: state memo written (mkdir, temp file, rename)
        std::string out0 = nriqos::run_pipeline(nriqos::Mode::Invoke, o, sandbox_req, code);
        report("out0", out0.substr(0, out0.size() - 1));
        report("narrow", nriqos::narrow_installed_sandbox(123));
        // container event, twice: compiled cache written, then read
        for (int i = 1; i <= 2; ++i) {
            std::string out = nriqos::run_pipeline(nriqos::Mode::Invoke, o, req, code);
            report("out" + std::to_string(i), out.substr(0, out.size() - 1));
            report("code" + std::to_string(i), std::to_string(code));
        }
    });
    INFO(r["summary"]);
    INFO(r["out1"]);
    CHECK(r["exit"] == "0");
    REQUIRE(!r["out1"].empty());
    for (const char* k : {"out0", "out1", "out2"}) {
        auto j = nlohmann::json::parse(r[k]);
        CHECK(j["plugin"] == "nri-qos");
        CHECK(j["error"] == "");
        for (auto& [mk, mv] : j["metadata"].items()) CHECK(mv.is_string());
    }
    CHECK(r["narrow"] == "");
    auto j = nlohmann::json::parse(r["out2"]);
    CHECK(j["metadata"]["class"] == "BE");
    CHECK(j["metadata"]["applied"] == "cpu.shares=2 oom_score_adj=1000");
    CHECK(!j["metadata"].contains("failed"));
    CHECK(r["code2"] == "0");
    CHECK(slurp(S + "/cg/cpu/kubepods/besteffort/pod1/c1/cpu.shares") == "2");
    CHECK(slurp(S + "/proc/123/oom_score_adj") == "1000");
    CHECK(slurp(S + "/run/state/s1.json") != "<absent>");
    // the last good copy of the policy was saved beneath its (Landlock-writable) directory
    CHECK(slurp(S + "/var/lib/nri-qos/" + nriqos::last_good_name(t.roots.policy_path)) == slurp(t.roots.policy_path));
}

TEST_CASE("sandbox: the operator's sinks write their files inside the sandbox, nothing else opens up", "[sandbox][ops]") {
    Tree t;
    const std::string& S = t.s.path;
    t.roots.sink_dirs = {S + "/var/log/nri-qos", S + "/var/lib/textfile"};  // absent: created by install_sandbox
    put(t.roots.policy_path, "version = 1\n[settings]\ndefault_class = \"BE\"\n[classes.BE.container]\ncpu_shares = 2\n");
    const std::string req = R"({"version":"0.1","state":"create","id":"c1","sandboxID":"s1","pid":123,)"
                            R"("spec":{"cgroupsPath":"/kubepods/besteffort/pod1/c1","annotations":{}}})";
    auto r = in_child([&](const Report& report) {
        nriqos::SandboxStatus st = nriqos::install_sandbox(t.roots);
        report("seccomp", st.seccomp ? "on" : "off");
        report("landlock", st.landlock ? "on" : "off");
        nriqos::Options o;
        o.policy = t.roots.policy_path;
        o.policy_from_flag = true;
        o.cgroup_root = t.roots.cgroup_root;
        o.proc_root = t.roots.proc_root;
        o.resctrl_root = t.roots.resctrl_root;
        o.state_dir = t.roots.state_dir;
        o.cache_dir = t.roots.cache_dir;
        o.layout = nriqos::Layout::V1;
        o.metrics_file = S + "/var/lib/textfile/nri_qos.prom";
        o.event_log = S + "/var/log/nri-qos/events.log";
        int code = -1;
        std::string out = nriqos::run_pipeline(nriqos::Mode::Invoke, o, req, code);
        report("code", std::to_string(code));
        // Still blocked: the journald/syslog sockets (no socket(2) at all), writes beside the
        // sink directories, and a sink path the sandbox was not told about.
        report("unix_socket", err_of(socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0)));
        report("beside_sinks", try_write(S + "/var/log/other.log", true));
        report("outside_write", try_write(S + "/outside/victim", false));
        o.metrics_file = S + "/outside/nri_qos.prom";
        o.event_log = S + "/outside/events.log";
        nriqos::run_pipeline(nriqos::Mode::Invoke, o, req, code);
        report("code_unlisted", std::to_string(code));
    });
    CHECK(r["exit"] == "0");
    CHECK(r["seccomp"] == "on");
    CHECK(r["code"] == "0");
    CHECK(r["code_unlisted"] == "0");  // a sink that cannot write never changes the Result
    CHECK(r["unix_socket"] == kEPERM);
    const std::string prom = slurp(S + "/var/lib/textfile/nri_qos.prom");
    CHECK(prom.find("nri_qos_events_total{event=\"create\",class=\"BE\",outcome=\"ok\"} 1") != std::string::npos);
    const std::string log = slurp(S + "/var/log/nri-qos/events.log");
    CHECK(log.find("\"id\":\"c1\"") != std::string::npos);
    CHECK(slurp(S + "/run/state/last/s1/c1.json").find("\"request\":{") != std::string::npos);
    if (r["landlock"] == "on") {
        CHECK(r["beside_sinks"] == kEACCES);
        CHECK(r["outside_write"] == kEACCES);
        CHECK(slurp(S + "/outside/nri_qos.prom") == "<absent>");
        CHECK(slurp(S + "/outside/events.log") == "<absent>");
    }
}
