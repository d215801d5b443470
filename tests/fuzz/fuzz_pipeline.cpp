// libFuzzer target: the whole pipeline (pipeline.hpp run_pipeline) in explain, invoke (NRI v0.1)
// and nri-eval mode, against a scratch tree made in LLVMFuzzerInitialize: a cgroup v1 root and a
// cgroup v2 root with the seeds' cgroups, a procfs root, a resctrl root, state and cache dirs,
// and symlinks inside the roots that point at an "outside" directory of sentinel files.
// Oracles, after every input:
//  * the output is exactly one JSON object with the contract's keys and string-only metadata
//    (invoke: plugin/version/error/metadata; nri-eval: error/on_child_failure/metadata);
//  * the exit code is 0 or 1 (invoke: 1 iff error is non-empty);
//  * nothing in the outside directory changed (no write followed a symlink out of a root);
//  * no file descriptor leaked (the set of open fds is the same before and after).
// The policy comes from the flag (conf.policy is ignored: the fuzzer must not open random
// paths); the self-imposed deadline is off (its SIGALRM handler _exit()s).
#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <dirent.h>
#include <fcntl.h>
#include <ftw.h>
#include <string>
#include <sys/stat.h>
#include <unistd.h>
#include <vector>

#include <nlohmann/json.hpp>

#include "fuzz_common.hpp"
#include "model/knobs.hpp"
#include "model/model.hpp"
#include "event/pipeline.hpp"

using nlohmann::json;

namespace {

std::string g_root, g_outside;
std::string g_policy[2];

std::vector<int> open_fds() {
    std::vector<int> fds;
    DIR* d = opendir("/proc/self/fd");
    if (!d) return fds;
    int self = dirfd(d);
    while (dirent* e = readdir(d)) {
        if (e->d_name[0] == '.') continue;
        int f = std::atoi(e->d_name);
        if (f != self) fds.push_back(f);
    }
    closedir(d);
    std::sort(fds.begin(), fds.end());
    return fds;
}

const char* kRichPolicy = R"(version = 1
[settings]
default_class = "BE"
fail = "closed"
[[rules]]
name = "hls"
class = "HLS"
match.labels = { "koordinator.sh/qosClass" = "LS[ER]" }
[[rules]]
name = "pod"
class = "BE"
match.kind = "sandbox"
[classes.BE]
[classes.BE.container]
cpu_shares = "50%"
memory_limit = "512Mi"
memory_swap = "max"
pids_max = "50%"
cpuset_cpus = "0-3,8"
cpuset_mems = "0"
blkio_weight = 500
cpu_weight = 100
cpu_period_us = 100000
cpu_quota_us = "80%"
cpu_burst_us = "100%"
memory_low = "1Gi"
memory_min = 0
memory_high = "90%"
memory_soft_limit = "10%"
cpu_qos_level = -1
memory_qos_level = -1
resctrl_group = "BE"
oom_score_adj = 1000
raw = [ { file = "cpu.bvt_warp_ns", value = 2 } ]
[classes.BE.pod]
cpu_idle = 1
cpu_period_us = 50000
cpu_quota_us = "max"
[classes.HLS]
fail = "closed"
gate = { namespaces = ["online-*"], fallback = "BE" }
[classes.HLS.container]
cpu_qos_level = 2
oom_score_adj = -1000
)";

void must(bool ok, const std::string& what) {
    if (!ok) {
        std::fprintf(stderr, "fuzz_pipeline init: %s: %s\n", what.c_str(), std::strerror(errno));
        std::exit(2);
    }
}

void mkdirs(const std::string& p) {
    for (size_t pos = p.find('/', 1);; pos = p.find('/', pos + 1)) {
        std::string part = p.substr(0, pos);
        must(mkdir(part.c_str(), 0755) == 0 || errno == EEXIST, "mkdir " + part);
        if (pos == std::string::npos) break;
    }
}

void put(const std::string& path, const std::string& text) {
    int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    must(fd >= 0, "create " + path);
    must(write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size()), "write " + path);
    close(fd);
}

std::string slurp(const std::string& path) {
    int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return {};
    std::string s;
    char buf[4096];
    ssize_t n;
    while ((n = read(fd, buf, sizeof buf)) > 0) s.append(buf, static_cast<size_t>(n));
    close(fd);
    return s;
}

const char* kFiles[] = {"cpu.shares",
                        "cpu.weight",
                        "cpu.cfs_period_us",
                        "cpu.cfs_quota_us",
                        "cpu.cfs_burst_us",
                        "cpu.max",
                        "cpu.max.burst",
                        "cpu.idle",
                        "cpu.qos_level",
                        "cpuset.cpus",
                        "cpuset.mems",
                        "memory.limit_in_bytes",
                        "memory.max",
                        "memory.memsw.limit_in_bytes",
                        "memory.swap.max",
                        "memory.high",
                        "memory.low",
                        "memory.min",
                        "memory.soft_limit_in_bytes",
                        "memory.qos_level",
                        "pids.max",
                        "blkio.weight",
                        "io.weight",
                        "cpu.bvt_warp_ns"};
const char* kCtrls[] = {"cpu", "cpuset", "memory", "pids", "blkio"};

void make_cgroup(const std::string& dir) {
    mkdirs(dir);
    for (const char* f : kFiles) put(dir + "/" + f, "");
}

void make_tree() {
    const char* cg_paths[] = {
        "/kubepods/burstable/pod0e2e0000-28d7-429f-8840-10cdbf93fd03/6d9979550c29c47abdb26b0efa127acf7136b8811158c5fcd739251fccae01b3",
        "/kubepods/burstable/pod0e2e0000-28d7-429f-8840-10cdbf93fd03/6da22b5e7c46dace6536ec6df90d57889a0983b41c1246254de5e62f6f6c28ac",
        "/kubepods/burstable/pod0e2e0000-6edd-4127-830b-934cae53b469/97f836f797313b8c1bbda96922a46fc700e505e212b0350c0b7e3d951d01c666",
        "/kubepods/burstable/pod0e2e0000-6edd-4127-830b-934cae53b469/f9159d083de20134b90778a5c6d8ee69ecb3b500f2ef34976b11b59554b7bc8e",
        "/kubepods/burstable/pod0e2e0000-914a-4285-9247-c48afc45d669/410ae9e4aab4c8b190f1244e944470d6e4e0a2516813fe54ddd4e18c57631e39",
        "/kubepods/burstable/pod0e2e0000-914a-4285-9247-c48afc45d669/49cc8f6195d1c96955bb4efb5e5f6d04e196c5e4752e2955bf45b7747c3dee76",
        "kubepods-besteffort-pod0e2e0000_6edd_4127_830b_934cae53b469.slice:cri-containerd:f9159d083de20134b90778a5c6d8ee69ecb3b500f2ef34976b11b59554b7bc8e",
        "kubepods-burstable-pod0e2e0000_6edd_4127_830b_934cae53b469.slice:cri-containerd:f9159d083de20134b90778a5c6d8ee69ecb3b500f2ef34976b11b59554b7bc8e",
        "/kubepods/besteffort/pod1/c1",
    };
    for (const char* p : cg_paths) {
        nriqos::CgroupPaths cp = nriqos::resolve_cgroups_path(p);
        for (const char* c : kCtrls) {
            make_cgroup(g_root + "/cg1/" + c + "/" + cp.container);
            make_cgroup(g_root + "/cg1/" + c + "/" + cp.pod);
        }
        make_cgroup(g_root + "/cg2/" + cp.container);
        make_cgroup(g_root + "/cg2/" + cp.pod);
    }
    // Symlink traps inside every root, pointing at the sentinel directory.
    mkdirs(g_outside);
    for (const char* f : kFiles) put(g_outside + "/" + f, "sentinel");
    put(g_outside + "/oom_score_adj", "sentinel");
    put(g_outside + "/tasks", "sentinel");
    for (const char* c : kCtrls) {
        must(symlink(g_outside.c_str(), (g_root + "/cg1/" + c + "/kubepods/burstable/evil").c_str()) == 0, "symlink");
        must(symlink(g_outside.c_str(), (g_root + "/cg1/" + c + "/kubepods/besteffort/pod1/evil").c_str()) == 0, "symlink");
    }
    must(symlink(g_outside.c_str(), (g_root + "/cg2/kubepods/burstable/evil").c_str()) == 0, "symlink");
    for (const char* pid : {"2470", "2529", "3468", "3525", "21544", "21599"}) {
        mkdirs(g_root + "/proc/" + pid);
        put(g_root + "/proc/" + pid + "/oom_score_adj", "0");
    }
    must(symlink(g_outside.c_str(), (g_root + "/proc/1").c_str()) == 0, "symlink");
    mkdirs(g_root + "/resctrl/BE");
    put(g_root + "/resctrl/BE/tasks", "");
    must(symlink(g_outside.c_str(), (g_root + "/resctrl/evil").c_str()) == 0, "symlink");
    mkdirs(g_root + "/state");
    must(symlink(g_outside.c_str(), (g_root + "/state/evil").c_str()) == 0, "symlink");
    must(symlink((g_outside + "/tasks").c_str(), (g_root + "/state/trap.json").c_str()) == 0, "symlink");
}

void check_outside() {
    DIR* d = opendir(g_outside.c_str());
    if (!d) fuzz::die("outside dir vanished");
    size_t n = 0;
    while (dirent* e = readdir(d)) {
        std::string name = e->d_name;
        if (name == "." || name == "..") continue;
        ++n;
        if (slurp(g_outside + "/" + name) != "sentinel") fuzz::die("a write escaped its root into", g_outside + "/" + name);
    }
    closedir(d);
    if (n != sizeof kFiles / sizeof *kFiles + 2) fuzz::die("a file was created outside the roots", g_outside);
}

void check_result(nriqos::Mode mode, const std::string& out, int code) {
    if (code != 0 && code != 1) fuzz::die("exit code", std::to_string(code));
    if (mode != nriqos::Mode::Explain && (out.empty() || out.back() != '\n' || out.find('\n') != out.size() - 1))
        fuzz::die("output is not one line", out);
    json j;
    try {
        j = json::parse(out);
    } catch (const std::exception& e) { fuzz::die("output is not JSON", out); }
    if (!j.is_object()) fuzz::die("output is not an object", out);
    const char* inv[] = {"plugin", "version", "error", "metadata"};
    const char* ev[] = {"error", "on_child_failure", "metadata"};
    if (mode == nriqos::Mode::Invoke) {
        for (const char* k : inv)
            if (!j.contains(k)) fuzz::die("Result lacks key", k);
        if (j["plugin"] != "nri-qos" || !j["version"].is_string()) fuzz::die("bad plugin/version", out);
        if ((code == 1) != !j["error"].get<std::string>().empty()) fuzz::die("exit code does not match error", out);
    } else if (mode == nriqos::Mode::NriEval) {
        for (const char* k : ev)
            if (!j.contains(k)) fuzz::die("nri-eval result lacks key", k);
        if (j["on_child_failure"] != "open" && j["on_child_failure"] != "closed") fuzz::die("bad on_child_failure", out);
        if (code != 0) fuzz::die("nri-eval exit code must be 0", out);
    }
    if (mode != nriqos::Mode::Explain && !j["error"].is_string()) fuzz::die("error is not a string", out);
    if (mode == nriqos::Mode::Explain && j.contains("error") && !j["error"].is_string()) fuzz::die("error is not a string", out);
    if (!j["metadata"].is_object()) fuzz::die("metadata is not an object", out);
    for (auto& [k, v] : j["metadata"].items())
        if (!v.is_string()) fuzz::die("metadata value is not a string", k);
}

int rm_entry(const char* path, const struct stat*, int, struct FTW*) { return remove(path); }

/// Remove the scratch root when the fuzzer exits normally (-max_total_time, -runs); a crash
/// leaves it for inspection.
void remove_scratch() {
    if (!g_root.empty() && std::getenv("FUZZ_KEEP_SCRATCH") == nullptr) nftw(g_root.c_str(), rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
    const char* base = std::getenv("FUZZ_SCRATCH");
    std::string tmpl = std::string(base && *base ? base : "/tmp") + "/nri-qos-fuzz.XXXXXX";
    std::vector<char> buf(tmpl.begin(), tmpl.end());
    buf.push_back('\0');
    must(mkdtemp(buf.data()) != nullptr, "mkdtemp");
    g_root = buf.data();
    g_outside = g_root + "/outside";
    make_tree();
    const char* bundled = std::getenv("FUZZ_POLICY");
    std::string text = slurp(bundled && *bundled ? bundled : "conf/nri.d/nri-qos.toml");
    must(!text.empty(), "read bundled policy (run from the repository root or set FUZZ_POLICY)");
    g_policy[0] = g_root + "/bundled.toml";
    g_policy[1] = g_root + "/rich.toml";
    put(g_policy[0], text);
    put(g_policy[1], kRichPolicy);
    std::atexit(remove_scratch);
    std::fprintf(stderr, "fuzz_pipeline: scratch root %s\n", g_root.c_str());
    return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    // fds open before and after the pipeline runs (libFuzzer's own, e.g. the symbolizer's pipe,
    // come and go between inputs, never during one)
    std::vector<int> before = open_fds();
    std::string_view in(reinterpret_cast<const char*>(data), size);
    nriqos::Options o;
    o.policy = g_policy[size % 2];
    o.policy_from_flag = true;
    o.proc_root = g_root + "/proc";
    o.resctrl_root = g_root + "/resctrl";
    o.state_dir = g_root + "/state";
    // FUZZ_NO_CACHE=1: no compiled-policy cache (to fuzz the rest while a cache bug is open).
    static const bool no_cache = std::getenv("FUZZ_NO_CACHE") && *std::getenv("FUZZ_NO_CACHE") == '1';
    o.cache_dir = no_cache ? std::string() : g_root + "/cache";
    o.deadline_ms = 0;
    struct Run {
        nriqos::Mode mode;
        nriqos::Layout layout;
        bool json;
    };
    const Run runs[] = {{nriqos::Mode::Explain, nriqos::Layout::V2, true},
                        {nriqos::Mode::Invoke, nriqos::Layout::V1, false},
                        {nriqos::Mode::NriEval, nriqos::Layout::V2, false}};
    for (const Run& r : runs) {
        o.layout = r.layout;
        o.cgroup_root = g_root + (r.layout == nriqos::Layout::V2 ? "/cg2" : "/cg1");
        o.explain_json = r.json;
        int code = -1;
        std::string out = nriqos::run_pipeline(r.mode, o, in, code);
        check_result(r.mode, out, code);
    }
    check_outside();
    std::vector<int> after = open_fds();
    if (after != before) {
        std::string what;
        for (int f : after) {
            char target[512] = {0};
            std::string link = "/proc/self/fd/" + std::to_string(f);
            ssize_t n = readlink(link.c_str(), target, sizeof target - 1);
            (void)n;
            what += std::to_string(f) + "->" + target + " ";
        }
        fuzz::die("file descriptor leak; open now:", what);
    }
    return 0;
}
