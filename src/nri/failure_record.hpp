// Relay-level failures on the operator's record (issue #11): an event the relay failed itself —
// the evaluator crashed, was killed, timed out at the relay's deadline or answered garbage; the
// request was malformed, unknown or could not be queued; no evaluator could be started — gets
// an event-log line and metrics like every evaluated event.
//
// The confined relay cannot write /var/log/nri-qos or the metrics file (src/sandbox.hpp
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

#include "metrics.hpp"
#include "record.hpp"

namespace nriqos {
struct SinkPaths;
}

namespace nri {

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
struct RelayFailure {
  std::string event;      ///< child-contract event ("CreateContainer", ...), "unknown" or "relay"
  /// "refused" (error returned to the runtime), "failed" (answered empty: fail-open),
  /// "answered" (the evaluator's answer was replied; its records failed after it) or "replaced"
  /// (a lost keeper or zygote, no event)
  std::string outcome;
  std::string kind;       ///< see above
  std::string fail_mode;  ///< "open", "closed"; "" when no fail mode applies (protocol refusals)
  std::string reason;     ///< the relay's one-line reason (as in its log)
  std::string ns, pod, container, id, sandbox_id;  ///< what the request named ("" = unknown)
  int64_t duration_us = -1;  ///< time the evaluation ran (-1: none ran)
};

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
int publish_relay_failure(const std::string& msg, const nriqos::SinkPaths& paths);

}  // namespace nri
