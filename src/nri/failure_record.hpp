// Relay-level failures on the operator's record (issue #11): an event the relay failed itself —
// the evaluator crashed, was killed, timed out at the relay's deadline or answered garbage; the
// request was malformed, unknown or could not be queued; no evaluator could be started — gets
// an event-log line and metrics like every evaluated event.
//
// The confined relay cannot write /var/log/nri-qos or the metrics file (src/os/sandbox.hpp
// confine_relay: no filesystem writes). It describes the failure in one bounded message (this
// file's `failure_message`) and hands it to the keeper (evaluator_procs.cpp), which was forked before
// the relay confined itself. The keeper forks a short-lived recorder per message; the recorder
// confines itself (seccomp + Landlock: writes only beneath the sink directories, which it
// resolves itself — never from the message), then parses and validates the message here
// (`parse_failure_message`: known keys and types only, bounded lengths, closed sets of values)
// and publishes it (`publish_relay_failure`). Nothing in the message names a path.
#pragma once

#include <cstdint>
#include <string>

#include "records/metrics.hpp"
#include "records/record.hpp"

namespace nriqos {
struct SinkPaths;
}

namespace nriqos::nri {

/// Largest failure message the keeper accepts, in bytes (the message is one SOCK_SEQPACKET
/// datagram; longer ones are refused whole).
constexpr size_t kMaxFailureMsg = 4096;

/// One relay-level failure. Kinds (the `reason` label of nri_qos_relay_failures_total):
///   "timeout"        the evaluator did not answer before the relay's deadline (SIGKILLed), or no
///                    time was left before the runtime's deadline
///   "crash"          the evaluator died or exited non-zero without an answer
///   "bad-output"     the answer was empty, not JSON, too large or not convertible to a reply
///   "unavailable"    no evaluator could be started or became ready in time
///   "malformed"      the request (ttrpc or NRI protobuf) could not be decoded
///   "overloaded"     too many requests queued while an evaluation ran
///   "unknown-method" a method or service the relay does not serve (UNIMPLEMENTED)
///   "shutdown"       the evaluation was cut off by the runtime's Shutdown
/// and, after the evaluator's answer was replied (outcome "answered": the answer stood; what
/// failed is the event's own records, written after the answer, evaluator.hpp AfterAnswer):
///   "records-cut"    still writing the records at the event's deadline (killed), or at its own
///                    deadline (exit status nriqos::kExitRecordsCut), or killed to keep at most
///                    kMaxFinishing evaluators finishing
///   "died-after-answer" exited non-zero or by a signal after its answer
/// and, about no event (event "relay", outcome "replaced": the relay replaced the process and
/// goes on serving; issue 19 §2):
///   "keeper-lost"    the keeper died (OOM kill, stray kill) or broke its protocol; its reserve
///                    took over (or, without one, no zygote can be made once the current one is gone)
///   "zygote-lost"    the zygote died, closed its socket or stopped answering; the keeper makes another
/// and, about a container nri-qos adjusted (event "CreateContainer", outcome "undone"):
///   "adjustment-rejected" the runtime removed it without ever starting it, right after nri-qos
///                    answered its CreateContainer with an adjustment: containerd undoes a create
///                    that failed after the NRI call (internal/cri/nri nri_api_linux.go
///                    UndoCreateContainer: StopContainer then RemoveContainer to the plugins),
///                    most often because another NRI plugin set one of the same fields
///                    (containerd/nri pkg/adaptation/result.go: "plugins %q and %q both tried to
///                    set %s"). The recorder names the other plugin from the runtime's log when
///                    it can (runtime_conflict below); also counted in
///                    nri_qos_adjustment_rejected_total{other}.
struct RelayFailure {
    std::string event;  ///< child-contract event ("CreateContainer", ...), "unknown" or "relay"
    /// "refused" (error returned to the runtime), "failed" (answered empty: fail-open),
    /// "answered" (the evaluator's answer was replied; its records failed after it) or "replaced"
    /// (a lost keeper or zygote, no event)
    std::string outcome;
    std::string kind;  ///< see above
    std::string fail_mode;  ///< "open", "closed"; "" when no fail mode applies (protocol refusals)
    std::string reason;  ///< the relay's one-line reason (as in its log)
    std::string ns, pod, container, id, sandbox_id;  ///< what the request named ("" = unknown)
    int64_t duration_us = -1;  ///< time the evaluation ran (-1: none ran)
    /// adjustment-rejected only: nri-qos's registered plugin name ("10-nri-qos"), the fields its
    /// adjustment set, in containerd's words ("CPU shares, memory limit"), and the other plugin
    /// (filled by the recorder from the runtime's log; "" unknown). Names: at most 64 bytes.
    std::string self, fields, other;
};

/// What the runtime's log says about a conflict (runtime_conflict).
struct RuntimeConflict {
    std::string other;  ///< the other plugin, as NRI names it ("05-gostub"); "" not found
    std::string subject;  ///< the field, in containerd's words ("CPU shares")
};

/// The recent lines of the runtime's log that report an NRI ownership conflict ("both tried to
/// set"), from `spec`: an absolute file path (its last 1 MiB is read), "journal:<unit>"
/// (`journalctl -u <unit> --since -5min -g "both tried to set" -o cat`, killed after
/// `budget_ms`), "none", or "" (journal:containerd when systemd's journal runs, else none).
/// Never reads anything the relay sent. Returns at most 64 lines; "" on any failure (`why`
/// says it in one line).
std::string runtime_log_excerpt(const std::string& spec, int budget_ms, std::string& why);

/// The conflict about the container `container` of sandbox `sandbox_id` in `excerpt` (the last
/// matching line wins): containerd's CRI logs the failed create as
///   ... CreateContainer within sandbox \"<sandbox id>\" for &ContainerMetadata{Name:<name>,...}
///   failed" error="... plugins \"10-nri-qos\" and \"05-other\" both tried to set CPU shares"
/// (internal/cri/instrument/instrumented_service.go; the quotes may be escaped). NRI v0.11+
/// (containerd 2.2.x, 2.3) names the field by its enum name instead ("... both tried to set
/// CPUShares", containerd/nri v0.11.0 pkg/api/owners.go Conflict): the subject is given in the
/// older words either way ("CPU shares"). The other plugin is the one of the two that is not `self`. Names are checked: [A-Za-z0-9_.-], 1-64 bytes.
RuntimeConflict runtime_conflict(const std::string& excerpt, const std::string& sandbox_id, const std::string& container, const std::string& self);

/// The message the relay sends (a JSON object; strings cut to their bounds so that it always
/// fits kMaxFailureMsg).
std::string failure_message(const RelayFailure& f);

/// Parse and validate a message (keeper side: the relay is not trusted beyond it). Unknown keys,
/// wrong types, values outside the closed sets, over-long or non-printable names are refused
/// with `err`. Returns true when `f` is usable.
bool parse_failure_message(const std::string& msg, RelayFailure& f, std::string& err);

/// The record (source "relay") and the metrics event of a failure. An "answered" failure counts
/// in nri_qos_relay_failures_total only (MetricsEvent::count_event false): the evaluator may have
/// counted the event before its records were cut; a "replaced" one too (there was no event).
nriqos::EventRecord failure_record(const RelayFailure& f);
nriqos::MetricsEvent failure_metrics(const RelayFailure& f);

/// Recorder side: parse `msg`, write the logfmt line to stderr (the relay's log), append the
/// JSON line to `paths.event_log` and count it in `paths.metrics_file`. Returns 0 when
/// everything was written, 1 when a sink failed, 2 when the message was refused (each problem
/// one line on stderr).
/// `excerpt` (runtime_log_excerpt, gathered before the recorder confined itself; `log_spec` names
/// where from) is searched for an adjustment-rejected failure's other plugin.
int publish_relay_failure(const std::string& msg, const nriqos::SinkPaths& paths, const std::string& excerpt = "", const std::string& log_spec = "");

}  // namespace nriqos::nri
