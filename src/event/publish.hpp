// Sinks for the operator, run once at the end of every hook invocation (src/event/pipeline.cpp
// run_pipeline) and by reconcile: the event record (record.hpp), the metrics (metrics.hpp) and
// the last request of the container (state.hpp, for status/reconcile/explain --container).
// Each sink is best effort: a failure is one line on stderr and never changes the Result.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "records/metrics.hpp"
#include "policy/policy.hpp"
#include "policy/policy_store.hpp"
#include "records/record.hpp"
#include "os/clock.hpp"

namespace nriqos {

struct Plan;
struct Request;

/// Where the sinks write, resolved: command line > policy [settings] > defaults.
struct SinkPaths {
    std::string metrics_file;  ///< "" = no metrics
    std::string event_log;  ///< "" = stderr only
    uint64_t event_log_max_bytes = defaults::kEventLogMaxBytes;
};

/// Resolve the sink paths from the command-line values (nullopt = not given) and the policy's
/// settings (nullptr = no policy loaded); what is still unset gets the default path when
/// `use_defaults`, else "" (no sink).
SinkPaths resolve_sink_paths(const std::optional<std::string>& metrics_flag, const std::optional<std::string>& log_flag, const SinkSettings* policy,
                             bool use_defaults = true);

/// Directories the confined hook must be able to write for its sinks, known before the request
/// is parsed: those of the command-line/default paths and of the paths the last loaded policy
/// named (remembered in <state_dir>/sinks, see remember_sink_paths). Landlock (sandbox.hpp)
/// needs them before parsing; a policy that moves a sink takes effect from the next event.
std::vector<std::string> sink_dirs_before_parse(const std::optional<std::string>& metrics_flag, const std::optional<std::string>& log_flag,
                                                const std::string& state_dir);

/// The sink paths known before a policy is loaded, as sink_dirs_before_parse sees them:
/// command line > the paths the last loaded policy named (<state_dir>/sinks) > defaults. Used
/// where no policy is loaded at all (the relay's failure recorder, src/nri/failure_record.hpp).
SinkPaths sink_paths_before_parse(const std::optional<std::string>& metrics_flag, const std::optional<std::string>& log_flag,
                                  const std::string& state_dir);

/// Identity of <state_dir>/sinks for a process that may not open files (the confined relay:
/// one stat, no read): "dev:ino:mtime_ns:size", or "none" when it does not exist. It changes when
/// remember_sink_paths() records new paths (a new file is renamed over the old one).
std::string sinks_memo_signature(const std::string& state_dir);

/// Remember the policy's sink paths in <state_dir>/sinks when they differ from what is there.
/// Returns "" or a one-line error.
std::string remember_sink_paths(const std::string& state_dir, const SinkPaths& p);

/// Everything one finished event tells the sinks.
struct EventOutcome {
    std::string source;  ///< "invoke", "nri-eval", "reconcile"
    std::string evaluator;  ///< EventRecord::evaluator ("one-shot", "resident" or "")
    const Request* req = nullptr;  ///< nullptr: the request could not be parsed
    const Plan* plan = nullptr;  ///< nullptr: no class was decided
    std::string error;  ///< Result error ("" = none): outcome "refused"
    std::string early_error;  ///< fail-open error before a class was known: outcome "error"
    std::string policy_path;  ///< the configured policy file (kept with the last request)
    /// The policy in force and why (source, sha256, the broken file's error): the record's
    /// policy/policy_error, nri_qos_policy_info and nri_qos_policy_errors_total. nullptr: not
    /// resolved (the event failed before, e.g. a bad plugin conf).
    const PolicyInfo* policy = nullptr;
    int64_t start_ns = 0;  ///< CLOCK_MONOTONIC at process start (0: unknown)
    std::string_view input;  ///< the request document as received (kept as last request)
    std::string layout;  ///< cgroup layout used ("v1", "hybrid", "v2")
    // options of the invocation, kept with the last request so that a replay uses the same trees
    std::string cgroup_root, proc_root, resctrl_root, state_dir;
};

/// Outcome word of an event (record.hpp EventRecord::outcome).
std::string outcome_of(const EventOutcome& o);

/// Build the record of an event (no I/O).
EventRecord make_record(const EventOutcome& o);

/// The record's policy fields (policy, policy_sha256, policy_error) from `info`.
void set_record_policy(EventRecord& r, const PolicyInfo& info);

/// nri_qos_policy_info's identity from `info` (nullptr: source "" = left as it was).
PolicyIdentity policy_identity(const PolicyInfo* info);

/// The JSON document kept as the last request of the event's container (replay.hpp reads it).
std::string make_last_request(const EventOutcome& o, const EventRecord& r);

/// Write the record (stderr + event log), the metrics and the last request (or remove it, for
/// delete/stop/remove events). Problems go to stderr as one line each. Never throws.
void publish_event(const EventOutcome& o, const SinkPaths& paths);

/// Events cut off by the self-imposed deadline (deadline.cpp Deadline::on_signal) are recorded too:
/// prepare_deadline_record() keeps a ready record (stderr line, event-log line, metrics line)
/// current as the event progresses; record_on_deadline() — async-signal-safe: open, flock,
/// write, close only — writes whatever publish_event has not written yet. Its metrics line goes
/// to <dir>/.<name>.pending, which the next update_metrics folds into the counters, so even
/// deadline-killed events are counted exactly once. Not once the relay's evaluator delivered its
/// answer (pipeline.hpp Options::deliver): a "deadline exceeded" record would then be false; the
/// handler exits kExitRecordsCut instead and the relay records records-cut.
///
/// The record is kept in two slots (0, 1): prepare_deadline_record writes `slot`, the one the
/// handler is not reading; the caller then makes it current with the one atomic store that also
/// switches the deadline answer of the same stage (deadline.cpp Deadline::stage), and the handler passes the
/// current slot to record_on_deadline. So the handler never reads a record being written, and
/// never prints an answer with the record of another stage (a fail-closed answer with a
/// fail-open record, or the reverse). Preparing is incremental: the long groups (who, policy)
/// are printed again only when they changed since the previous stage (record.hpp RecordPart);
/// the lines are byte for byte record_logfmt/record_json of `r` with outcome "refused"
/// (`closed`) or "error", duration_us = `deadline_us` and the deadline message. `r.time_ns` 0 =
/// now (the stage's time). Not thread-safe (one event per process).
void prepare_deadline_record(const EventRecord& r, const SinkPaths& paths, int64_t deadline_us, bool closed, int slot);
/// Async-signal-safe (write, open, flock, close; no allocation): writes slot `slot`'s record if
/// one was prepared there and publish_event has not taken over.
void record_on_deadline(int slot);
/// A new event in the same process (deadline.hpp arm_next_deadline: a resident evaluator's next
/// event): the deadline's record is again the handler's to write, in full. Call with the timer off.
void deadline_record_new_event();

/// The lines prepared in `slot` (stderr, event log, metrics pending), for tests.
struct DeadlineRecordText {
    bool ready;
    std::string stderr_line, log_line, log_path, pending_line, pending_path;
};
DeadlineRecordText deadline_record_text(int slot);

}  // namespace nriqos
