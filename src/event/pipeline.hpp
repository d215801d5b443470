// The pipeline: request → model → classify → adjustment → sinks, for `invoke` (NRI v0.1),
// `explain` (dry run) and `nri-eval` (one event of the native NRI relay).
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "event/deadline.hpp"
#include "model/model.hpp"

namespace nriqos {

/// Default locations (documented in nri-qos(8)).
namespace defaults {
constexpr const char* kPolicy = "/etc/nri/nri-qos.toml";
constexpr const char* kCgroupRoot = "/sys/fs/cgroup";
constexpr const char* kProcRoot = "/proc";
constexpr const char* kResctrlRoot = "/sys/fs/resctrl";
constexpr const char* kSysfsRoot = "/sys";  ///< NUMA topology for the numa.* facts (facts.hpp)
/// kubelet's static CPU manager checkpoint: CPUs held exclusively by pods (numa.hpp), read only.
constexpr const char* kKubeletCpuState = "/var/lib/kubelet/cpu_manager_state";
constexpr const char* kStateDir = "/run/nri-qos";
constexpr const char* kCacheDir = "/run/nri-qos/cache";
constexpr const char* kLastGoodDir = "/var/lib/nri-qos";  ///< last good policy copies (policy_store.hpp)
constexpr int kDeadlineMs = 1000;  ///< well under containerd's 2 s NRI request timeout
}  // namespace defaults

/// Options shared by invoke, explain and nri-eval (and the relay's in-process evaluators).
struct Options {
    std::string policy = defaults::kPolicy;
    bool policy_from_flag = false;  ///< --policy given: overrides the request's conf.policy
    std::string cgroup_root = defaults::kCgroupRoot;
    std::string proc_root = defaults::kProcRoot;
    std::string resctrl_root = defaults::kResctrlRoot;
    std::string sysfs_root = defaults::kSysfsRoot;  ///< read only: devices/system/{node,cpu}, dev/block
    std::string dev_root = "/dev";  ///< read only (stat): device nodes of blkio_throttle paths (facts.hpp FactInput)
    std::string kubelet_cpu_state = defaults::kKubeletCpuState;  ///< read only; "" = no kubelet CPU manager state
    std::string state_dir = defaults::kStateDir;
    std::string cache_dir = defaults::kCacheDir;  ///< "" disables the compiled-policy cache
    std::string last_good_dir = defaults::kLastGoodDir;  ///< last good policy copies, when last_good_dir_set ("" disables)
    bool last_good_dir_set = false;  ///< --last-good-dir given; else last_good_dir_of() decides
    std::optional<Layout> layout;  ///< nullopt: detect with statfs
    /// Native relay only (its failure recorder, src/nri/failure_record.hpp runtime_log_excerpt):
    /// where the runtime logs NRI ownership conflicts — a file path, "journal:<unit>", "none";
    /// "" = journal:containerd when systemd's journal runs. Read, never written.
    std::string runtime_log;
    /// The companion that sets unit properties on the systemd cgroup driver (systemd_unit.hpp;
    /// --systemd-helper; "" disables).
    std::string systemd_helper = "/usr/libexec/nri-qos/nri-qos-systemd";
    bool debug = false;
    int deadline_ms = defaults::kDeadlineMs;  ///< self-imposed; 0 disables
    bool explain_json = false;
    /// --metrics-file / --event-log (nullopt: not given; policy [settings], then the defaults of
    /// record.hpp apply; "" disables the sink).
    std::optional<std::string> metrics_file, event_log;
    /// Unset sink paths fall back to the defaults of record.hpp (the command line sets this;
    /// in-process callers such as unit tests get no sinks unless they name them).
    bool default_sinks = false;
    /// explain --container: add the rule trace and the percentage calculations (replay.hpp).
    bool explain_trace = false;
    /// explain of a native NRI event (the relay child's input shape) instead of a v0.1 request.
    bool explain_nri_event = false;
    /// explain --pod (pod_preview.hpp): the event runs against the preview's scratch node — the
    /// plan is applied to its scratch cgroup/procfs/resctrl trees, the sandbox memo and the fact
    /// state (ledger, NUMA records) are recorded in its scratch state dir — so that the pod's
    /// later events see what the earlier ones did. Explain's output and no records otherwise.
    bool explain_simulate = false;
    /// Keep the sandbox's first layer as installed: no narrowing of procfs writes to the
    /// request's pid (explain --pod runs all the pod's events, with their made-up pids below a
    /// scratch procfs, in one sandboxed process).
    bool sandbox_keep_wide = false;
    /// NriEval only (the relay's evaluator, src/nri/eval_pipeline.cpp): deliver the answer as
    /// soon as it is final — knobs applied, the sandbox memo stored (the pod's next event reads
    /// it), the policy's record paths remembered (the relay replaces its evaluators by them right
    /// after its reply) — and before the operator's records (publish.hpp publish_event), which are then off
    /// the runtime's critical path. Called once, with SIGALRM blocked, with exactly the text
    /// run_pipeline returns; it must write it all and end the answer (close the pipe's write
    /// end). From then on the deadline never answers again (on_deadline: kExitRecordsCut).
    /// Empty: run_pipeline's caller writes the returned text (invoke, explain, `nri-eval`).
    std::function<void(const std::string& answer)> deliver;
    /// NriEval in the relay's forked evaluator: which evaluator serves the event, "one-shot" or
    /// "resident" (EventRecord::evaluator; src/nri/evaluator.hpp). "" elsewhere.
    std::string evaluator_mode;
    /// Out (optional): settings.evaluator_events of the policy this event loaded (left as it was
    /// when none was loaded). The relay's resident evaluator asks it after each event: a policy
    /// that went back to 1 ends it (src/nri/eval_pipeline.cpp).
    uint32_t* policy_evaluator_events = nullptr;
    /// Tests only (empty otherwise): called once the plan is built and its declared resctrl
    /// groups are ready (their mount's lock held when a tasks write joins one), right before the
    /// first write — where a concurrent `reconcile` could act between the two steps.
    std::function<void()> before_writes;
};

/// Where the last good policy copies (policy_store.hpp) live for `o`: last_good_dir when it was
/// set; else STATE_DIR/last-good when the state dir is not the default (a relocated state — a
/// second instance, a test — keeps everything together); else /var/lib/nri-qos.
std::string last_good_dir_of(const Options& o);

/// Run one request through the pipeline. `input` is the request document; the return value is
/// what goes to stdout (one JSON object and a newline, or explain's text); `exit_code` is set
/// (invoke: 1 when the Result carries an error, else 0). Never throws; one-line diagnostics go to
/// stderr. It disarms the deadline armed by arm_deadline() before returning.
std::string run_pipeline(Mode mode, const Options& opt, std::string_view input, int& exit_code);

/// For --version: which policy the hook would apply with the default options (read only), e.g.
///   "policy: builtin (no /etc/nri/nri-qos.toml)\nbuilt-in policy: sha256 <hex> (19 rules, 5 classes)"
/// or "policy: file /etc/nri/nri-qos.toml (sha256 <hex>)\n..." or "policy: last-good (<error>)\n...".
std::string default_policy_status();

/// `nri-qos check`: validate a policy, reporting every error and warning in one run.
///  * `err` gets one line per finding, "nri-qos: <file>:<line>: [warning: ]<message>", by line;
///  * `out` gets the summary: "<file>: OK (N rules, N classes, default class X)" (plus
///    "; N warnings"), or "<file>: N errors[, N warnings]" followed by what the hook applies
///    meanwhile ("the hook applies the last good copy (sha256 ...) saved <time>" / "the built-in
///    policy") — the same choice invoke makes (policy_store.hpp).
///  * with `cache_dir`, a valid policy is also precompiled into it, and saved as the last good
///    copy in `last_good_dir` (when not empty): what the packages run on install. A cache that
///    cannot be written adds one "warning: not precompiled" line to `err` (exit stays 0: the
///    policy is valid, the hook compiles it per event until the cache can be written).
/// Returns 0 (valid, warnings or not) or 1 (an error, or the file cannot be read).
int check_policy(const std::string& path, const std::string& cache_dir, const std::string& last_good_dir, std::string& out, std::string& err);

}  // namespace nriqos
