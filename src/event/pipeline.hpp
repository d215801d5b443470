// The pipeline: request → model → classify → adjustment → sinks, for `invoke` (NRI v0.1),
// `explain` (dry run) and `nri-eval` (one event of the native NRI relay).
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>

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

/// Exit status of an evaluator whose own deadline fired after it had delivered its answer
/// (Options::deliver): the answer stands (it was final), but the event's records — event log
/// line, metrics, last request — may be incomplete. The handler writes one line to stderr and
/// exits with this status; the relay records it (relay failure reason "records-cut",
/// src/nri/evaluator.cpp). 74 is EX_IOERR of sysexits.h.
constexpr int kExitRecordsCut = 74;

enum class Mode { Invoke, Explain, NriEval };

/// Where the last good policy copies (policy_store.hpp) live for `o`: last_good_dir when it was
/// set; else STATE_DIR/last-good when the state dir is not the default (a relocated state — a
/// second instance, a test — keeps everything together); else /var/lib/nri-qos.
std::string last_good_dir_of(const Options& o);

/// CLOCK_MONOTONIC (ns) when arm_deadline() was called, i.e. at the start of the invocation
/// (0 when it was not): the start of the event's duration in the record and the metrics.
int64_t invocation_start_ns();

/// Arm the self-imposed deadline (setitimer + SIGALRM): when `ms` pass before the pipeline
/// returns, a prepared Result (invoke) or nri-eval result is written to stdout and the process
/// exits — unless the answer was delivered already (Options::deliver): then only a line on
/// stderr and exit status kExitRecordsCut, no second answer and no "deadline exceeded" record. Call it before reading the request, so a stdin that never closes is bounded too.
/// Until the policy is loaded the answer is fail-open (nothing says otherwise yet: no request,
/// no policy); run_pipeline prepares it again with compile_fail_mode's (the file's settings.fail
/// read ahead, its last good copy's, the built-in policy's) when the policy must be compiled (a cache miss), with the
/// policy's own fail mode once the policy is loaded, and with the class's once the request is
/// classified, before any write. No-op for
/// Explain or ms <= 0.
void arm_deadline(Mode mode, int ms);

/// The next event of a process that evaluates several in turn (the relay's Synchronize
/// evaluator, src/nri/eval_pipeline.cpp): as arm_deadline(mode, ms), and the event starts afresh:
/// its own start time (the duration in its record and metrics), no answer delivered yet (a
/// deadline before its answer writes this event's deadline answer and record), not reading input.
/// The deadline record is reset to "unparsed" for `opt`'s sinks (prepare_deadline_record), so a
/// deadline never writes the previous event's record. No-op for Explain or ms <= 0 (then only
/// the start time is reset).
void arm_next_deadline(Mode mode, int ms, const Options& opt);

/// Grace (ms) after a deadline that cut the request's input: run_pipeline loads the policy and
/// answers with its fail mode within it; if even that hangs, the prepared fail-open answer goes out.
inline constexpr int kDeadlineInputGraceMs = 200;

/// The input phase of the deadline (a stdin that stays open, a runtime that writes slowly).
/// Between deadline_input_begin() and deadline_input_end() a deadline that fires does not answer
/// from the signal handler (nothing is known: no request, no policy): it interrupts the read
/// (EINTR: the handler is installed without SA_RESTART), marks the input as cut and arms a
/// kDeadlineInputGraceMs fallback. run_pipeline then answers "deadline exceeded while reading
/// the request" with the fail mode of the policy in force (fail-closed refuses the container),
/// records the event and exits. Closes issue 9's "deadline before the policy" hole. A policy
/// load that itself exceeds the grace (a compile: no cached entry) answers with compile_fail_mode's
/// (issue 19 §2, issue #30 item 5).
void deadline_input_begin();
/// True when the deadline cut the input (the reader stops; see deadline_input_begin()).
bool deadline_input_cut();
/// Leave the input phase; returns deadline_input_cut().
bool deadline_input_end();

/// The deadline answer for `mode` (Invoke or NriEval): fail-closed (`closed`) puts
/// "nri-qos: deadline exceeded after <ms> ms (class <cls>): fail-closed, ..." into `error` (invoke
/// exit status 1); fail-open puts a warning into metadata. nri-eval's on_child_failure is the
/// policy's mode (`policy_closed`). `cls` ("" unknown) goes into metadata.class. One JSON line.
/// `mode_from` (nullptr: the mode is the policy's or the class's own): the deadline fired while
/// the policy was being compiled, and `closed` is compile_fail_mode's, whose `why` phrase (no
/// '"' or '\\') goes in parentheses into the error/warning text; nri-eval then also says
/// "deadline": true, so that the relay does not take that mode for the compiled policy's.
std::string deadline_answer(Mode mode, bool closed, bool policy_closed, const std::string& cls, int ms, int& exit_code,
                            const char* mode_from = nullptr);

/// The fail mode (true: closed) of a deadline that fires while a policy file is being compiled
/// (no compiled entry: an edit, a reboot, a new or large file), when neither the compiled
/// policy's settings.fail nor the request's class is known yet: the deadline answer of the
/// stage "policy known, request not classified" (settings.fail: what applies when nri-qos
/// cannot classify, nri-qos.toml(5)), made before the compile. After the compile one of two
/// policies applies: the file (its settings.fail `text_closed`, read ahead by policy.hpp
/// read_fail_mode; nullopt when that pass found text the compile will reject), or — should the
/// compile reject the file — its last good copy (`last_good_closed`, policy_store.hpp
/// last_good_fail_closed; nullopt: none) else the built-in policy (`builtin_closed`). The
/// answer is closed when either could apply and is closed, else open: a fail-closed policy
/// never fails open because it is new or large, and a broken file never turns a closed node
/// open. `why` gets the phrase deadline_answer puts in parentheses, e.g. "the policy file's
/// settings.fail, read ahead of its compile".
bool compile_fail_mode(std::optional<bool> text_closed, std::optional<bool> last_good_closed, bool builtin_closed, std::string& why);

/// Prepare the event record the deadline handler writes if the deadline fires before the
/// request is even parsed (sandbox set-up, a slow stdin): call right after arm_deadline().
void prepare_deadline_record(Mode mode, const Options& opt);

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
