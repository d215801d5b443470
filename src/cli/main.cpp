// nri-qos: command line. See man/nri-qos.8.
#include <cerrno>
#include <fcntl.h>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <ios>
#include <memory>
#include <new>
#include <string>
#include <string_view>
#include <unistd.h>

#include <CLI/CLI.hpp>

#include "os/arena.hpp"
#include "nri/eval_pipeline.hpp"
#include "nri/relay.hpp"
#include "nri/service.hpp"
#include "policy/policy_store.hpp"
#include "records/record.hpp"
#include "event/pipeline.hpp"
#include "cli/pod_preview.hpp"
#include "event/publish.hpp"
#include "records/record.hpp"
#include "event/detect.hpp"
#include "os/sandbox.hpp"
#include "event/systemd_unit.hpp"
#include "cli/register.hpp"
#include "event/replay.hpp"
#include "cli/status.hpp"
#include "cli/discover.hpp"
#include "model/request.hpp"
#include "os/sandbox.hpp"
#include "event/systemd_unit.hpp"
#include "os/fd.hpp"

// ---- standard streams, started on demand -------------------------------------------------
// Every object file that includes <iostream> — CLI11, our relay files and all 27 objects of
// libprotobuf-lite.a — carries a static std::ios_base::Init, and the first one to run builds
// the standard streams and the whole classic locale: ~44,000 instructions and ~5 page faults
// before main(), on every container start, for streams the hook's hot path never uses (it
// writes with write(2)). The static binary is linked with
//   -Wl,--wrap=_ZNSt8ios_base4InitC1Ev -Wl,--wrap=_ZNSt8ios_base4InitD1Ev
// (Makefile), so those static objects are no-ops, and start_iostreams() runs the real
// std::ios_base::Init once, first thing on every path except plain `invoke` (containerd's call
// for every container), which must therefore never touch std::cout/cerr/clog/cin. The unit-test
// and fuzz binaries are linked without --wrap and keep the eager initialisation.
extern "C" {
void __real__ZNSt8ios_base4InitC1Ev(void*);
void __real__ZNSt8ios_base4InitD1Ev(void*);
void __wrap__ZNSt8ios_base4InitC1Ev(void*) {}
void __wrap__ZNSt8ios_base4InitD1Ev(void*) {}
}

// ---- plain `invoke` from the first instruction ------------------------------------------
// containerd runs a plain `nri-qos invoke` (no options) for every sandbox and container; main()
// sends it straight to run_mode and ends it with _exit (below). Two things are decided for it
// before the first static constructor, which glibc calls with (argc, argv, envp) in a static
// binary too (csu/libc-start.c call_init; priority 101 runs before every default-priority one):
//  - the arena (os/arena.hpp) serves operator new from here on, so that the constructors'
//    allocations share the arena's pages rather than growing malloc's heap;
//  - __cxa_atexit (the Makefile links with -Wl,--wrap=__cxa_atexit) registers nothing: the
//    ~130 destructors of static objects that the constructors register (CLI11, protobuf-lite,
//    yaml-cpp, libstdc++) never run on this path, which ends with _exit, never exit() — their
//    registration cost ~9,000 instructions and four calloc'd 1 KiB blocks of glibc's exit list
//    on the heap (bench/oneshot-profile.sh).
// Any other command line is untouched: the arena is enabled, if at all, in run_mode, and every
// destructor is registered and runs at exit as usual.
namespace {
bool g_plain_invoke = false;
}
__attribute__((constructor(101))) static void plain_invoke_early(int argc, char** argv, char**) {
    if (argc == 2 && argv && argv[1] && std::strcmp(argv[1], "invoke") == 0) {
        g_plain_invoke = true;
        nriqos::arena::enable();
    }
}
extern "C" {
int __real___cxa_atexit(void (*fn)(void*), void* arg, void* dso);
int __wrap___cxa_atexit(void (*fn)(void*), void* arg, void* dso) {
    if (g_plain_invoke) return 0;
    return __real___cxa_atexit(fn, arg, dso);
}
}

namespace {

alignas(std::ios_base::Init) unsigned char g_ios_init[sizeof(std::ios_base::Init)];

/// The real std::ios_base::Init, once; its destructor (flush cout/cerr/clog) runs at exit.
void start_iostreams() {
    static bool started = false;
    if (started) return;
    started = true;
    __real__ZNSt8ios_base4InitC1Ev(g_ios_init);
    std::atexit([] { __real__ZNSt8ios_base4InitD1Ev(g_ios_init); });
}

using nriqos::Options;
using nriqos::write_all;

/// Read all of stdin, up to the request size limit (+1 byte to detect "too large"), into `buf`
/// (its first `len` bytes). The buffer is allocated uninitialised and read into directly: only
/// the pages the request fills are touched (a 64 KiB stack buffer copied into a string touched
/// two stack pages and copied the request once more; bench/oneshot-profile.sh). It starts at
/// 64 KiB, the size of one read of the old loop, and doubles while the request fills it; at the
/// end, the arena takes back what the request left unused (arena::trim). Not os/fd.hpp read_all:
/// the deadline is checked before every read(2), one that EINTR ended included.
bool read_stdin(std::unique_ptr<char[]>& buf, size_t& len) {
    size_t cap = 65536;
    buf.reset(new char[cap]);
    len = 0;
    while (true) {
        if (nriqos::deadline_input_cut()) return false;  // run_pipeline answers the deadline
        if (len == cap) {
            std::unique_ptr<char[]> bigger(new char[cap * 2]);
            std::memcpy(bigger.get(), buf.get(), len);
            buf = std::move(bigger);
            cap *= 2;
        }
        ssize_t n = read(STDIN_FILENO, buf.get() + len, cap - len);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) return false;
        if (n == 0) {
            nriqos::arena::trim(buf.get(), cap, len);  // the rest of the buffer is never used
            return true;
        }
        len += static_cast<size_t>(n);
        if (len > nriqos::limits::kMaxRequestBytes) return true;  // the parser reports it
    }
}

void add_eval_options(CLI::App* app, Options& o, std::string& layout) {
    app->add_option("--policy", o.policy, "policy file (default /etc/nri/nri-qos.toml; overrides conf.policy)");
    app->add_option("--cgroup-root", o.cgroup_root, "cgroup filesystem root (default /sys/fs/cgroup)");
    app->add_option("--cgroup-layout", layout, "auto|v1|hybrid|v2 (default auto: detect with statfs)");
    app->add_option("--proc-root", o.proc_root, "procfs root (default /proc)");
    app->add_option("--resctrl-root", o.resctrl_root, "resctrl root (default /sys/fs/resctrl)");
    app->add_option("--sysfs-root", o.sysfs_root, "sysfs root for NUMA topology and block devices, read only (default /sys)");
    app->add_option("--dev-root", o.dev_root, "where /dev/<name> device paths of blkio limits are looked up, stat only (default /dev)");
    app->add_option("--kubelet-cpu-state", o.kubelet_cpu_state,
                    "kubelet's CPU manager checkpoint, read only (default /var/lib/kubelet/cpu_manager_state; \"\" none)");
    app->add_option("--state-dir", o.state_dir, "per-sandbox memo directory (default /run/nri-qos)");
    app->add_option("--cache-dir", o.cache_dir, "compiled policy cache (default /run/nri-qos/cache; \"\" disables)");
    app->add_option("--last-good-dir", o.last_good_dir,
                    "last good policy copies (default /var/lib/nri-qos, or STATE_DIR/last-good with --state-dir; \"\" disables)");
    app->add_option("--systemd-helper", o.systemd_helper,
                    "companion that sets systemd unit properties on the systemd cgroup driver "
                    "(default /usr/libexec/nri-qos/nri-qos-systemd; \"\" disables)");
    app->add_option("--deadline-ms", o.deadline_ms, "self-imposed deadline in ms (default 1000; 0 disables)");
    app->add_flag("--debug", o.debug, "log skipped knobs to stderr");
    app->add_option("--runtime-log", o.runtime_log,
                    "relay: where the runtime logs NRI plugin conflicts: FILE, journal:UNIT or none; unset: journal:containerd under systemd");
    app->add_option_function<std::string>(
        "--metrics-file", [&o](const std::string& v) { o.metrics_file = v; },
        "Prometheus textfile (default " NRI_QOS_METRICS_FILE "; \"\" disables)");
    app->add_option_function<std::string>(
        "--event-log", [&o](const std::string& v) { o.event_log = v; }, "JSON-lines event log (default /var/log/nri-qos/events.log; \"\" disables)");
}

/// Without --last-good-dir, pipeline.hpp last_good_dir_of() decides (STATE_DIR/last-good for a
/// relocated --state-dir, else /var/lib/nri-qos).
void note_last_good_dir(CLI::App* app, Options& o) { o.last_good_dir_set = app->count("--last-good-dir") > 0; }

int run_mode(nriqos::Mode mode, Options& o, const std::string& layout, bool policy_set, const std::string* given_input = nullptr) {
    nriqos::arena::enable();  // one-shot and single-threaded from here on (arena.hpp)
    o.policy_from_flag = policy_set;
    o.default_sinks = true;
    try {
        o.layout = nriqos::parse_layout(layout);
    } catch (const nriqos::InputError& e) {
        write_all(STDERR_FILENO, std::string("nri-qos: ") + e.what() + "\n");
        return 2;
    }
    nriqos::arm_deadline(mode, o.deadline_ms);
    nriqos::prepare_deadline_record(mode, o);
    // settings.cpu_weight_formula = "auto": the runtime's version is read by exec, which the
    // sandbox forbids — so here, before it, and only once (the cache in the state dir missing).
    if (mode == nriqos::Mode::Invoke)
        if (std::string l = nriqos::implicit_runtime_probe(o.state_dir, nriqos::defaults::kStateDir, true, 500); l.rfind("cannot", 0) == 0)
            write_all(STDERR_FILENO, "nri-qos: " + l + "\n");
    // Confine the process before any untrusted byte is parsed (src/os/sandbox.hpp). The policy and
    // the compiled cache are read later: reads are not restricted; the cache dir is writable.
    if (!nriqos::sandbox_disabled_by_env()) {
        // explain writes no memo: its sandbox gets no state dir (which would be created).
        std::string state = mode == nriqos::Mode::Explain ? std::string() : o.state_dir;
        nriqos::SandboxRoots roots{o.cgroup_root, o.proc_root, o.resctrl_root, state, o.cache_dir, o.policy, {}, {}};
        if (mode != nriqos::Mode::Explain) {
            roots.last_good_dir = nriqos::last_good_dir_of(o);
            roots.sink_dirs = nriqos::sink_dirs_before_parse(o.metrics_file, o.event_log, o.state_dir);
        } else if (!o.cache_dir.empty()) {
            // explain compiles an edited policy into the cache and saves it as the last good
            // copy, as an event does (policy_store.hpp PolicyPlaces::write); without a cache, neither.
            roots.last_good_dir = nriqos::last_good_dir_of(o);
        }
        // A systemd node (systemd_unit.hpp): the hook may run the companion that sets unit
        // properties, and only that (with its ELF interpreter).
        nriqos::SandboxProfile profile = nriqos::SandboxProfile::Evaluator;
        if (mode == nriqos::Mode::Invoke && nriqos::systemd_sink_off(o.systemd_helper, o.cgroup_root).empty()) {
            profile = nriqos::SandboxProfile::EvaluatorSystemd;
            roots.exec_files = {o.systemd_helper, nriqos::elf_interpreter(o.systemd_helper)};
        }
        nriqos::SandboxStatus sb = nriqos::install_sandbox(roots, profile);
        if (o.debug || !sb.seccomp) write_all(STDERR_FILENO, "nri-qos: sandbox: " + sb.summary() + "\n");
    }
    std::unique_ptr<char[]> stdin_buf;
    std::string_view input("", 0);  // a failed read: empty, as before
    if (given_input) input = *given_input;
    else {
        size_t len = 0;
        nriqos::deadline_input_begin();
        if (read_stdin(stdin_buf, len)) input = std::string_view(stdin_buf.get(), len);
        nriqos::deadline_input_end();
    }
    int code = 0;
    std::string out = nriqos::run_pipeline(mode, o, input, code);
    write_all(STDOUT_FILENO, out);
    return code;
}

/// Child argv for the relay: this binary's nri-eval with the evaluation options given to `relay`.
// The metrics server executable (src/metrics/nri-qos-metrics.cpp): `given`, else beside this
// binary, else the packages' /usr/libexec/nri-qos/nri-qos-metrics (as run_cri_client finds nri-qos-cri).
std::string metrics_server_path(const std::string& given) {
    if (!given.empty()) return given;
    char self[4096];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n > 0) {
        std::string beside = nriqos::dir_name(std::string(self, static_cast<size_t>(n))) + "/nri-qos-metrics";
        if (access(beside.c_str(), X_OK) == 0) return beside;
    }
    return "/usr/libexec/nri-qos/nri-qos-metrics";
}

// SHA-256 of the policy in force now, read only (policy_store.hpp); "" when unknown.
std::string policy_in_force_sha256(const Options& o) {
    try {
        nriqos::PolicyInfo info;
        nriqos::PolicyPlaces w;
        w.cache_dir = o.cache_dir;
        w.last_good_dir = nriqos::last_good_dir_of(o);
        w.write = false;
        nriqos::effective_policy(o.policy, o.policy == nriqos::defaults::kPolicy, w, nullptr, info);
        return info.sha256;
    } catch (...) { return ""; }
}

/// Append `flag v` to `argv` when `relay`'s command line gave `flag`: what a child of the relay
/// (its evaluators, the unseen pass) gets passed on; the others keep the defaults both share.
void pass_given(CLI::App* relay, std::vector<std::string>& argv, const char* flag, const std::string& v) {
    if (relay->count(flag) > 0) {
        argv.emplace_back(flag);
        argv.push_back(v);
    }
}

std::vector<std::string> eval_argv(CLI::App* relay, const Options& o, const std::string& layout) {
    std::vector<std::string> a = {"/proc/self/exe", "nri-eval"};
    auto pass = [&](const char* flag, const std::string& v) { pass_given(relay, a, flag, v); };
    pass("--policy", o.policy);
    pass("--cgroup-root", o.cgroup_root);
    pass("--cgroup-layout", layout);
    pass("--proc-root", o.proc_root);
    pass("--resctrl-root", o.resctrl_root);
    pass("--sysfs-root", o.sysfs_root);
    pass("--dev-root", o.dev_root);
    pass("--kubelet-cpu-state", o.kubelet_cpu_state);
    pass("--state-dir", o.state_dir);
    pass("--cache-dir", o.cache_dir);
    pass("--last-good-dir", o.last_good_dir);
    pass("--systemd-helper", o.systemd_helper);
    pass("--metrics-file", o.metrics_file.value_or(""));
    pass("--event-log", o.event_log.value_or(""));
    pass("--runtime-log", o.runtime_log);
    if (o.debug) a.emplace_back("--debug");
    return a;
}

/// The relay service's unseen pass (service.hpp ServiceOptions::unseen_argv): this binary's
/// `reconcile --unseen` on the relay's own state dir, policy, cache and sinks, so that what it
/// adopts is classified and recorded as the relay's evaluators would (the roots and sinks given
/// to `relay` are passed on; the others keep the defaults both commands share).
std::vector<std::string> unseen_argv(CLI::App* relay, const Options& o, const std::string& layout, const std::string& cri_socket,
                                     const std::string& cri_client) {
    std::vector<std::string> a = {"/proc/self/exe", "reconcile", "--unseen",     "--policy", o.policy,
                                  "--state-dir",    o.state_dir, "--cri-socket", cri_socket};
    if (!cri_client.empty()) a.insert(a.end(), {"--cri-client", cri_client});
    auto pass = [&](const char* flag, const std::string& v) { pass_given(relay, a, flag, v); };
    pass("--cgroup-root", o.cgroup_root);
    pass("--cgroup-layout", layout);
    pass("--proc-root", o.proc_root);
    pass("--resctrl-root", o.resctrl_root);
    pass("--kubelet-cpu-state", o.kubelet_cpu_state);
    pass("--cache-dir", o.cache_dir);
    pass("--last-good-dir", o.last_good_dir);
    pass("--systemd-helper", o.systemd_helper);
    pass("--metrics-file", o.metrics_file.value_or(""));
    pass("--event-log", o.event_log.value_or(""));
    return a;
}

// ---- the commands: one add_<command> each (as cli/register.cpp add_register_commands) --------
// Each adds its subcommand and options to the CLI11 tree and returns what runs when the command
// line chose it; main() parses once, then runs the one chosen. Option values live in the
// command's own state (a shared_ptr the run function holds) or, for the evaluation options
// several commands share, in Shared.

/// The evaluation options (invoke, explain, nri-eval, relay, serve-metrics) and the layout word
/// (--cgroup-layout, parsed by each run with nriqos::parse_layout).
struct Shared {
    Options o;
    std::string layout = "auto";
};

/// One subcommand: its node in the CLI11 tree and what runs when the command line chose it
/// (the exit code of the process).
struct Command {
    CLI::App* app = nullptr;
    std::function<int()> run;
};

/// Writes "nri-qos: <what>" to stderr; returns 2 (a usage error's exit code).
int usage_error(const std::string& what) {
    write_all(STDERR_FILENO, "nri-qos: " + what + "\n");
    return 2;
}

/// `invoke`: NRI v0.1 with options (the plain `nri-qos invoke` never gets here: main()).
Command add_invoke(CLI::App& app, Shared& s) {
    CLI::App* c = app.add_subcommand("invoke", "NRI v0.1: read a request on stdin, apply, print the Result");
    add_eval_options(c, s.o, s.layout);
    return {c, [c, &s] {
                note_last_good_dir(c, s.o);
                return run_mode(nriqos::Mode::Invoke, s.o, s.layout, c->count("--policy") > 0);
            }};
}

/// `explain`'s own options.
struct ExplainArgs {
    std::string format = "text";
    std::string container, pod_file, driver;
};

/// `explain --pod`: kubelet's view of a Pod manifest through the policy (cli/pod_preview.hpp).
int run_explain_pod(CLI::App* c, Shared& s, const ExplainArgs& a) {
    if (c->count("--container") > 0) return usage_error("explain: --pod and --container exclude each other");
    nriqos::PodPreviewOptions po;
    po.eval = s.o;
    po.eval.policy_from_flag = c->count("--policy") > 0;
    try {
        po.eval.layout = nriqos::parse_layout(s.layout);
    } catch (const nriqos::InputError& e) { return usage_error(e.what()); }
    po.manifest = a.pod_file;
    if (!a.driver.empty()) po.driver = a.driver == "systemd" ? nriqos::CgroupDriver::Systemd : nriqos::CgroupDriver::Cgroupfs;
    po.json = s.o.explain_json;
    return nriqos::explain_pod(po);
}

/// `explain --container`: the container's last request (state dir) again, with the current
/// policy and a rule trace; the recorded roots and policy unless given.
int run_explain_container(CLI::App* c, Shared& s, const ExplainArgs& a) {
    Options& o = s.o;
    nriqos::StateDir st(o.state_dir);
    auto found = nriqos::find_last(nriqos::load_last(st), a.container);
    if (found.empty()) {
        write_all(STDERR_FILENO, "nri-qos: explain: no live container or pod \"" + a.container + "\" in " + o.state_dir + "/last\n");
        return 1;
    }
    if (found.size() > 1 && found[0].id != a.container && (found[0].sandbox || !found[1].sandbox)) {
        std::string m = "nri-qos: explain: \"" + a.container + "\" is ambiguous:";
        for (const auto& r : found) m += "\n  " + r.id.substr(0, 12) + " " + r.ns + "/" + r.pod + (r.sandbox ? " (sandbox)" : "/" + r.container);
        write_all(STDERR_FILENO, m + "\n");
        return 2;
    }
    const nriqos::LastRequest& r = found[0];
    if (r.request.empty()) {
        write_all(STDERR_FILENO, "nri-qos: explain: the last request of " + r.id + " was too large to keep\n");
        return 1;
    }
    if (c->count("--policy") == 0 && !r.policy.empty()) o.policy = r.policy;
    if (c->count("--cgroup-root") == 0 && !r.cgroup_root.empty()) o.cgroup_root = r.cgroup_root;
    if (c->count("--proc-root") == 0 && !r.proc_root.empty()) o.proc_root = r.proc_root;
    if (c->count("--resctrl-root") == 0 && !r.resctrl_root.empty()) o.resctrl_root = r.resctrl_root;
    o.explain_trace = true;
    o.explain_nri_event = r.source == "nri-eval";
    write_all(STDOUT_FILENO, o.explain_json ? ""
                                            : "replay:   last request of " + r.id.substr(0, 12) + " (" + r.event + " at " + r.time + ", class then " +
                                                  r.cls + (r.evaluator.empty() ? std::string() : ", served by the " + r.evaluator + " evaluator") +
                                                  ") with policy " + o.policy + "\n");
    // The recorded policy was the one in force: use it as if given with --policy.
    return run_mode(nriqos::Mode::Explain, o, s.layout, true, &r.request);
}

/// `explain`: like invoke, writing nothing; or --pod (a manifest), or --container (a replay).
Command add_explain(CLI::App& app, Shared& s) {
    auto a = std::make_shared<ExplainArgs>();
    CLI::App* c = app.add_subcommand("explain", "like invoke, but only print what would be done");
    add_eval_options(c, s.o, s.layout);
    c->add_option("--format", a->format, "text|json")->check(CLI::IsMember({"text", "json"}));
    c->add_option("--container", a->container,
                  "replay the last request of this live container (id, id prefix, pod or namespace/pod) from the state dir, with a rule trace");
    c->add_option(
        "--pod", a->pod_file,
        "preview a Kubernetes Pod manifest (YAML or JSON; - for stdin): kubelet's requests for it through the policy, and the end state of its cgroups");
    c->add_option("--cgroup-driver", a->driver, "with --pod: systemd|cgroupfs (default: the node's)")->check(CLI::IsMember({"systemd", "cgroupfs"}));
    return {c, [c, &s, a] {
                note_last_good_dir(c, s.o);
                s.o.explain_json = a->format == "json";
                if (c->count("--pod") > 0) return run_explain_pod(c, s, *a);
                if (c->count("--cgroup-driver") > 0) return usage_error("explain: --cgroup-driver goes with --pod");
                if (c->count("--container") == 0) return run_mode(nriqos::Mode::Explain, s.o, s.layout, c->count("--policy") > 0);
                return run_explain_container(c, s, *a);
            }};
}

/// `nri-eval`: one native NRI event (the relay's exec'd child; --evaluator exec).
Command add_nri_eval(CLI::App& app, Shared& s) {
    CLI::App* c = app.add_subcommand("nri-eval", "evaluate one native NRI event (the relay's child)");
    add_eval_options(c, s.o, s.layout);
    c->add_option("--event-deadline-ms", s.o.deadline_ms, "deadline for this event in ms");
    return {c, [c, &s] {
                note_last_good_dir(c, s.o);
                return run_mode(nriqos::Mode::NriEval, s.o, s.layout, c->count("--policy") > 0);
            }};
}

/// `relay`'s own options.
struct RelayArgs {
    nriqos::nri::RelayOptions ro;
    std::string evaluator = "fork";
    bool once = false;
    std::string metrics_listen, metrics_server;
    int unseen_interval_s = 30;
    std::string cri_socket = nriqos::DiscoverOptions{}.cri_socket, cri_client;
};

/// `relay --socket` without --once: the external plugin as a service that reconnects (issue
/// #20), its liveness in <state_dir>/relay.json and a textfile next to the hook's metrics.
int run_relay_as_service(CLI::App* c, Shared& s, RelayArgs& a) {
    const Options& o = s.o;
    nriqos::nri::ServiceOptions sv;
    sv.status_file = o.state_dir + "/relay.json";
    const std::string mf = o.metrics_file ? *o.metrics_file : std::string(nriqos::defaults::kMetricsFile);
    if (!mf.empty()) sv.metrics_file = nriqos::dir_name(mf) + "/nri_qos_relay.prom";
    sv.version = NRI_QOS_VERSION;
    sv.policy_sha256 = policy_in_force_sha256(o);  // read only: which policy is in force now
    sv.metrics_listen = a.metrics_listen;
    sv.metrics_server = metrics_server_path(a.metrics_server);
    sv.events_metrics_file = mf;
    sv.unseen_interval_ms = a.unseen_interval_s * 1000;
    sv.unseen_argv = unseen_argv(c, o, s.layout, a.cri_socket, a.cri_client);
    if (!a.ro.log_file.empty()) {  // the service's own lines go to the relay's log too
        int lfd = open(a.ro.log_file.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0640);
        if (lfd >= 0) {
            dup2(lfd, 2);
            close(lfd);
        }
    }
    return nriqos::nri::run_relay_service(a.ro, sv);
}

/// `relay`: the native NRI plugin (launched by the runtime, or --socket as a service).
Command add_relay(CLI::App& app, Shared& s, const char* argv0) {
    auto a = std::make_shared<RelayArgs>();
    nriqos::nri::RelayOptions& opts = a->ro;
    CLI::App* c = app.add_subcommand("relay", "native NRI plugin: relay runtime events to one-shot nri-eval children");
    add_eval_options(c, s.o, s.layout);
    c->add_option("--socket", opts.socket_path, "connect to the runtime's NRI socket (e.g. /var/run/nri/nri.sock) instead of NRI_PLUGIN_SOCKET");
    c->add_option("--plugin-name", opts.plugin_name, "plugin name to register (default nri-qos)");
    c->add_option("--plugin-idx", opts.plugin_idx, "two-digit plugin index to register (default 10)");
    c->add_option("--child-deadline-ms", opts.child_deadline_ms, "hard deadline of one evaluation child (default 1500)");
    c->add_option("--log-file", opts.log_file, "append the relay's log here (containerd gives launched plugins stderr = /dev/null)");
    c->add_option("--evaluator", a->evaluator, "fork (default: a spare evaluator forked ahead of each event) or exec (nri-eval exec'd per event)")
        ->check(CLI::IsMember({"fork", "exec"}));
    c->add_option(
        "--metrics-listen", a->metrics_listen,
        "with --socket: serve GET /metrics on ADDRESS:PORT (numeric, e.g. 0.0.0.0:9470): the metrics textfile, the relay's liveness, nri_qos_build_info");
    c->add_option("--metrics-server", a->metrics_server,
                  "the metrics server executable; unset: nri-qos-metrics beside this binary, else /usr/libexec/nri-qos/nri-qos-metrics");
    c->add_option("--unseen-interval", a->unseen_interval_s,
                  "with --socket: every this many seconds (the first one that long after each Synchronize) adopt the runtime's "
                  "sandboxes and containers no event reported (reconcile --unseen, through CRI, read-only); default 30, 0 disables")
        ->check(CLI::Range(0, 86400));
    c->add_option("--cri-socket", a->cri_socket,
                  "the runtime's CRI endpoint for the unseen pass (default unix:///run/containerd/containerd.sock; CRI-O "
                  "/var/run/crio/crio.sock)");
    c->add_option("--cri-client", a->cri_client,
                  "the CRI client of the unseen pass (default nri-qos-cri beside this binary, else "
                  "/usr/libexec/nri-qos/nri-qos-cri)");
    c->add_flag("--once", a->once, "with --socket: serve one connection and exit (default: reconnect with back-off when the runtime goes away)");
    return {c, [c, &s, a, argv0] {
                Options& o = s.o;
                nriqos::nri::RelayOptions& ro = a->ro;
                note_last_good_dir(c, o);  // for the in-process evaluators
                nriqos::nri::RelayOptions env;
                nriqos::nri::relay_options_from_env(env, argv0);
                if (ro.socket_path.empty()) ro.fd = env.fd;
                if (c->count("--plugin-name") == 0) ro.plugin_name = env.plugin_name;
                if (c->count("--plugin-idx") == 0) ro.plugin_idx = env.plugin_idx;
                if (ro.fd < 0 && ro.socket_path.empty()) ro.socket_path = "/var/run/nri/nri.sock";
                ro.child_argv = eval_argv(c, o, s.layout);
                ro.debug = o.debug;
                if (a->evaluator == "fork") {
                    try {
                        o.layout = nriqos::parse_layout(s.layout);
                    } catch (const nriqos::InputError& e) { return usage_error(e.what()); }
                    o.policy_from_flag = c->count("--policy") > 0;
                    ro.inproc = nriqos::nri::pipeline_evaluator(o);
                }
                if (ro.fd >= 0 || a->once) return nriqos::nri::run_relay(ro);
                return run_relay_as_service(c, s, *a);
            }};
}

/// `serve-metrics`: GET /metrics where no relay service runs (the metrics server, exec'd).
Command add_serve_metrics(CLI::App& app, Shared& s) {
    struct ServeArgs {
        std::string metrics_listen, metrics_server;
    };
    auto a = std::make_shared<ServeArgs>();
    CLI::App* c = app.add_subcommand(
        "serve-metrics", "serve GET /metrics (the metrics textfile and nri_qos_build_info) where no relay service runs (modes v01, native)");
    c->add_option("--listen", a->metrics_listen, "ADDRESS:PORT, numeric (e.g. 0.0.0.0:9470)")->required();
    c->add_option("--metrics-server", a->metrics_server, "as for relay");
    Options& eo = s.o;
    c->add_option_function<std::string>(
        "--metrics-file", [&eo](const std::string& v) { eo.metrics_file = v; }, "the metrics textfile to serve (default: the hook's)");
    c->add_option("--policy", eo.policy, "the policy whose SHA-256 nri_qos_build_info shows (default /etc/nri/nri-qos.toml)");
    return {c, [&s, a] {
                // No relay here: the textfile and the build only (a relay.json left by an earlier
                // external mode would show a relay that is not meant to run).
                const Options& o = s.o;
                const std::string mf = o.metrics_file ? *o.metrics_file : std::string(nriqos::defaults::kMetricsFile);
                std::string server = metrics_server_path(a->metrics_server), sha = policy_in_force_sha256(o);
                std::vector<std::string> args = {server, "--listen", a->metrics_listen, "--version", NRI_QOS_VERSION, "--policy-sha256", sha};
                if (!mf.empty()) args.insert(args.end(), {"--metrics-file", mf});
                std::vector<char*> av;
                for (auto& x : args) av.push_back(const_cast<char*>(x.c_str()));
                av.push_back(nullptr);
                execv(av[0], av.data());
                write_all(STDERR_FILENO, "nri-qos: serve-metrics: cannot run " + server + ": " + std::strerror(errno) + "\n");
                return 2;
            }};
}

/// The options of `status` and `reconcile` (one set: both read the state dir the same way).
struct StateArgs {
    nriqos::StateCommandOptions so;
    nriqos::DiscoverOptions dopt;
    bool discover = false, unseen = false;
    int64_t unseen_min_age_ms = 10000;
    StateArgs() {
        so.state_dir = nriqos::defaults::kStateDir;
        so.roots.cache_dir = nriqos::defaults::kCacheDir;
    }
};

/// The options `status` and `reconcile` share: the state dir and the roots a replay uses.
void add_state_options(CLI::App* c, Shared& s, StateArgs& a) {
    nriqos::StateCommandOptions& so = a.so;
    c->add_option("--state-dir", so.state_dir, "state directory of the hook (default /run/nri-qos)");
    c->add_option_function<std::string>(
        "--policy", [&so](const std::string& v) { so.roots.policy = v; }, "policy file (default: the one each container's last event used)");
    c->add_option_function<std::string>(
        "--cgroup-root", [&so](const std::string& v) { so.roots.cgroup_root = v; }, "cgroup root (default: as recorded)");
    c->add_option_function<std::string>(
        "--proc-root", [&so](const std::string& v) { so.roots.proc_root = v; }, "procfs root (default: as recorded)");
    c->add_option_function<std::string>(
        "--resctrl-root", [&so](const std::string& v) { so.roots.resctrl_root = v; }, "resctrl root (default: as recorded)");
    c->add_option("--cgroup-layout", s.layout, "auto|v1|hybrid|v2 (default auto)");
    c->add_option("--kubelet-cpu-state", so.roots.kubelet_cpu_state,
                  "kubelet's CPU manager checkpoint (default /var/lib/kubelet/cpu_manager_state; \"\" none)");
    c->add_option("--cache-dir", so.roots.cache_dir, "compiled policy cache (default /run/nri-qos/cache)");
    c->add_option("--last-good-dir", so.last_good_dir,
                  "last good policy copies (default /var/lib/nri-qos, or STATE_DIR/last-good with --state-dir; \"\" disables)");
}

/// `status` or `reconcile` (`is_status`), after the parse: the defaults that depend on other
/// options, then the command; its report goes to stdout.
int run_state_command(CLI::App* c, bool is_status, Shared& s, StateArgs& a) {
    nriqos::StateCommandOptions& so = a.so;
    if (c->count("--last-good-dir") == 0) {  // the hook's rule (pipeline.hpp last_good_dir_of)
        Options lo;
        lo.state_dir = so.state_dir;
        so.last_good_dir = nriqos::last_good_dir_of(lo);
    }
    try {
        so.roots.layout = nriqos::parse_layout(s.layout);
    } catch (const nriqos::InputError& e) { return usage_error(e.what()); }
    std::string out;
    // reconcile reads the runtime's version again (settings.cpu_weight_formula = "auto"): a
    // runtime upgraded since the last probe changes the formula in force from now on.
    if (!is_status && !so.dry_run && !a.unseen)  // the unseen pass: as cheap as possible
    {
        if (std::string l = nriqos::implicit_runtime_probe(so.state_dir, nriqos::defaults::kStateDir, false); !l.empty())
            out += "runtime  " + l + "\n";
        // the annotations containerd passes to v0.1 hooks, when the record is missing (a
        // reboot emptied /run) or containerd's config changed since (issue #25 §1)
        if (std::string l = nriqos::refresh_annotation_passlist(so.state_dir, nriqos::defaults::kStateDir); !l.empty()) out += l + "\n";
    }
    int rc = is_status    ? (so.relay_only ? nriqos::relay_liveness(so, out) : nriqos::run_status(so, out))
             : a.discover ? nriqos::run_discover(so, a.dopt, out)
             : a.unseen   ? nriqos::run_unseen(so, a.dopt, a.unseen_min_age_ms, out)
                          : nriqos::run_reconcile(so, out);
    write_all(STDOUT_FILENO, out);
    return rc;
}

/// `status`: the table of what nri-qos handled, or --relay (the relay's liveness probe).
Command add_status(CLI::App& app, Shared& s, std::shared_ptr<StateArgs> a) {
    nriqos::StateCommandOptions& so = a->so;
    CLI::App* c = app.add_subcommand("status", "table of the pods and containers nri-qos handled: class, rule, last event, wanted vs kernel values");
    add_state_options(c, s, *a);
    c->add_option("--format", so.format, "text|json")->check(CLI::IsMember({"text", "json"}));
    so.conf_json = "/etc/nri/conf.json";
    c->add_option("--conf-json", so.conf_json,
                  "NRI v0.1 conf.json to check: an entry whose binary is gone fails every pod start, nri-qos's beside the "
                  "native plugin doubles each sandbox on containerd 2.x (\"\" = not checked)")
        ->capture_default_str();
    c->add_flag("--relay", so.relay_only,
                "only the external relay's liveness (<state-dir>/relay.json); exit 1 unless up and registered (a liveness probe)");
    c->add_option_function<std::string>(
        "--metrics-file", [&so](const std::string& v) { so.metrics_file = v; },
        "metrics textfile to read adjustments undone by the runtime from; as for invoke");
    return {c, [c, &s, a] { return run_state_command(c, true, s, *a); }};
}

/// `reconcile`: the policy again on every live container nri-qos knows; --discover, --unseen.
Command add_reconcile(CLI::App& app, Shared& s, std::shared_ptr<StateArgs> a) {
    nriqos::StateCommandOptions& so = a->so;
    CLI::App* c = app.add_subcommand("reconcile", "re-apply the current policy to every live container nri-qos knows; drop the gone ones");
    add_state_options(c, s, *a);
    c->add_flag("--dry-run", so.dry_run, "report drift, write nothing");
    c->add_option("--systemd-helper", so.systemd_helper,
                  "systemd cgroup driver: the companion that sets the unit properties of what is written back, before the files "
                  "(default /usr/libexec/nri-qos/nri-qos-systemd; \"\" disables)");
    c->add_option_function<std::string>(
        "--metrics-file", [&so](const std::string& v) { so.metrics_file = v; }, "as for invoke");
    c->add_option_function<std::string>(
        "--event-log", [&so](const std::string& v) { so.event_log = v; }, "as for invoke");
    c->add_flag("--discover", a->discover,
                "first list the runtime's live pods and containers through CRI and record those nri-qos has not seen (adopt them)");
    c->add_option(
        "--cri-socket", a->dopt.cri_socket,
        "with --discover: the runtime's CRI endpoint (default unix:///run/containerd/containerd.sock; CRI-O /var/run/crio/crio.sock, iSulad /var/run/isulad.sock)");
    c->add_option("--cri-client", a->dopt.cri_client,
                  "with --discover: the CRI client (default nri-qos-cri beside this binary, else /usr/libexec/nri-qos/nri-qos-cri)");
    c->add_option("--nri-conf", a->dopt.nri_conf,
                  "with --discover: NRI v0.1 conf.json whose nri-qos conf the requests get (default /etc/nri/conf.json)");
    c->add_flag("--unseen", a->unseen,
                "only adopt the runtime's sandboxes and containers nri-qos never saw (CRI listing; the relay service runs it "
                "every --unseen-interval); nothing else is reconciled")
        ->excludes("--discover");
    c->add_option("--min-age-ms", a->unseen_min_age_ms,
                  "with --unseen: leave a sandbox or container younger than this to the next pass (its own event may be "
                  "in flight; default 10000)")
        ->check(CLI::Range(int64_t(0), int64_t(86400000)));
    c->add_flag("--verbose-pass", so.verbose_pass, "with --unseen: print the summary line even when nothing is new");
    return {c, [c, &s, a] { return run_state_command(c, false, s, *a); }};
}

/// `check`'s arguments.
struct CheckArgs {
    std::string path = nriqos::defaults::kPolicy, cache, last_good = nriqos::defaults::kLastGoodDir;
};

/// `check`: validate a policy file (and precompile it with --cache-dir).
Command add_check(CLI::App& app) {
    auto a = std::make_shared<CheckArgs>();
    CLI::App* c = app.add_subcommand("check", "validate a policy file (and precompile it)");
    c->add_option("policy", a->path, "policy file (default /etc/nri/nri-qos.toml)");
    c->add_option("--cache-dir", a->cache, "also precompile it there and save it as the last good copy");
    c->add_option("--last-good-dir", a->last_good, "where --cache-dir saves the last good copy (default /var/lib/nri-qos; \"\" disables)");
    return {c, [a] {
                std::string out, err;
                int rc = nriqos::check_policy(a->path, a->cache, a->last_good, out, err);
                write_all(STDERR_FILENO, err);
                write_all(STDOUT_FILENO, out + "\n");
                return rc;
            }};
}

}  // namespace

int main(int argc, char** argv) {
    // A hook started with fd 0-2 closed must not have its first opened file become "stdout".
    for (int fd = 0; fd <= 2; ++fd)
        if (fcntl(fd, F_GETFD) < 0 && open("/dev/null", fd == 0 ? O_RDONLY : O_WRONLY) != fd) return 2;
    // Hot path: containerd (NRI v0.1, /etc/nri/conf.json) runs `nri-qos invoke` with no options
    // for every sandbox and container. That command line has one meaning — every option at its
    // default — so it goes straight to the pipeline, without building the CLI11 command tree
    // (~0.19 M instructions) and without the standard streams. Any other command line, including
    // `invoke` with options, is parsed by CLI11 below.
    if (argc == 2 && std::strcmp(argv[1], "invoke") == 0) {
        int rc;
        {
            Options o;
            rc = run_mode(nriqos::Mode::Invoke, o, "auto", false);
        }
        // The Result is out (write(2), no stdio buffer); skip the exit handlers: destructors of
        // static objects (protobuf defaults, CLI11 validators) that this path never used.
        _exit(rc);
    }
    start_iostreams();
    // Launched by the runtime from /opt/nri/plugins (no arguments, NRI_PLUGIN_SOCKET set):
    // register at once — nothing that can fail or take time comes first.
    if (argc == 1 && getenv("NRI_PLUGIN_SOCKET")) {
        nriqos::nri::RelayOptions ro;
        nriqos::nri::relay_options_from_env(ro, argv[0]);
        ro.child_argv = {"/proc/self/exe", "nri-eval"};
        ro.inproc = nriqos::nri::pipeline_evaluator(nriqos::Options{});  // forked spare evaluators
        return nriqos::nri::run_relay(ro);
    }
    CLI::App app{"nri-qos: classify pods into QoS classes with a static TOML policy and apply cgroup knobs (NRI hook)", "nri-qos"};
    app.set_version_flag("--version", [] {
        std::string why;
        int abi = nriqos::landlock_abi_version(&why);
        return std::string("nri-qos ") + NRI_QOS_VERSION + "\nsandbox: seccomp allow-list (EPERM); " +
               (abi > 0 ? "landlock ABI " + std::to_string(abi) : "landlock unavailable: " + why + "; seccomp only") + "\n" +
               nriqos::default_policy_status();
    });
    app.require_subcommand(0, 1);

    // CLI11 checks every new option against all existing ones, so building the whole command
    // tree costs ~0.6 M instructions — half of an invocation. On the hot paths (`invoke`, run by
    // containerd for every container; `nri-eval`, the relay's child) only that subcommand is
    // built; anything else (help, other commands) gets the full tree, in the order of --help.
    const std::string first = argc > 1 ? argv[1] : "";
    const bool full = first != "invoke" && first != "nri-eval";
    Shared s;
    std::vector<Command> commands;
    if (full || first == "invoke") commands.push_back(add_invoke(app, s));
    if (full) commands.push_back(add_explain(app, s));
    if (full || first == "nri-eval") commands.push_back(add_nri_eval(app, s));
    if (full) {
        commands.push_back(add_relay(app, s, argv[0]));
        nriqos::add_register_commands(app);  // register/unregister run in their CLI11 callbacks
        commands.push_back(add_serve_metrics(app, s));
        auto state = std::make_shared<StateArgs>();
        commands.push_back(add_status(app, s, state));
        commands.push_back(add_reconcile(app, s, state));
        commands.push_back(add_check(app));
    }
    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError& e) { return app.exit(e); }
    for (const Command& c : commands)
        if (c.app->parsed()) return c.run();
    // register/unregister did their work in their callbacks (a failure threw CLI::RuntimeError).
    if (app.got_subcommand("register") || app.got_subcommand("unregister")) return 0;
    write_all(STDERR_FILENO, app.help());
    return 2;
}
