// The pipeline: request → model → classify → adjustment → sinks, for `invoke` (NRI v0.1),
// `explain` (dry run) and `nri-eval` (one event of the native NRI relay).
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "model.hpp"

namespace nriqos {

/// Default locations (documented in nri-qos(8)).
namespace defaults {
constexpr const char* kPolicy = "/etc/nri/nri-qos.toml";
constexpr const char* kCgroupRoot = "/sys/fs/cgroup";
constexpr const char* kProcRoot = "/proc";
constexpr const char* kResctrlRoot = "/sys/fs/resctrl";
constexpr const char* kStateDir = "/run/nri-qos";
constexpr const char* kCacheDir = "/run/nri-qos/cache";
constexpr int kDeadlineMs = 1000;  ///< well under containerd's 2 s NRI request timeout
}  // namespace defaults

/// Options shared by invoke, explain and nri-eval.
struct Options {
    std::string policy = defaults::kPolicy;
    bool policy_from_flag = false;  ///< --policy given: overrides the request's conf.policy
    std::string cgroup_root = defaults::kCgroupRoot;
    std::string proc_root = defaults::kProcRoot;
    std::string resctrl_root = defaults::kResctrlRoot;
    std::string state_dir = defaults::kStateDir;
    std::string cache_dir = defaults::kCacheDir;  ///< "" disables the compiled-policy cache
    std::optional<Layout> layout;                 ///< nullopt: detect with statfs
    bool debug = false;
    int deadline_ms = defaults::kDeadlineMs;      ///< self-imposed; 0 disables
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
};

enum class Mode { Invoke, Explain, NriEval };

/// CLOCK_MONOTONIC (ns) when arm_deadline() was called, i.e. at the start of the invocation
/// (0 when it was not): the start of the event's duration in the record and the metrics.
int64_t invocation_start_ns();

/// Arm the self-imposed deadline (setitimer + SIGALRM): when `ms` pass before the pipeline
/// returns, a prepared Result (invoke) or nri-eval result is written to stdout and the process
/// exits. Call it before reading the request, so a stdin that never closes is bounded too.
/// Until the policy is loaded the answer is fail-open (nothing says otherwise yet: no request,
/// no policy); run_pipeline prepares it again with the policy's fail mode once the policy is
/// loaded, and with the class's once the request is classified, before any write. No-op for
/// Explain or ms <= 0.
void arm_deadline(Mode mode, int ms);

/// The deadline answer for `mode` (Invoke or NriEval): fail-closed (`closed`) puts
/// "nri-qos: deadline exceeded after <ms> ms (class <cls>): fail-closed, ..." into `error` (invoke
/// exit status 1); fail-open puts a warning into metadata. nri-eval's on_child_failure is the
/// policy's mode (`policy_closed`). `cls` ("" unknown) goes into metadata.class. One JSON line.
std::string deadline_answer(Mode mode, bool closed, bool policy_closed, const std::string& cls, int ms, int& exit_code);

/// Prepare the event record the deadline handler writes if the deadline fires before the
/// request is even parsed (sandbox set-up, a slow stdin): call right after arm_deadline().
void prepare_deadline_record(Mode mode, const Options& opt);

/// Run one request through the pipeline. `input` is the request document; the return value is
/// what goes to stdout (one JSON object and a newline, or explain's text); `exit_code` is set
/// (invoke: 1 when the Result carries an error, else 0). Never throws; one-line diagnostics go to
/// stderr. It disarms the deadline armed by arm_deadline() before returning.
std::string run_pipeline(Mode mode, const Options& opt, std::string_view input, int& exit_code);

/// `nri-qos check`: validate a policy (and refresh its compiled cache when cache_dir is set).
/// Returns 0 and a summary line in `out`, or 1 and "<file>:<line>: <message>" in `out`.
int check_policy(const std::string& path, const std::string& cache_dir, std::string& out);

}  // namespace nriqos
