// Sink — Prometheus metrics in the node_exporter textfile-collector convention.
//
// Every invocation (hook, relay child, reconcile) adds its events to counters kept in a state
// file next to the metrics file (<dir>/.<name>.state, 0600) and rewrites the metrics file
// (<dir>/<name>, 0644) from it: both under an exclusive flock(2) of the state file, the metrics
// file written to a temporary file in the same directory and rename(2)d over the old one, so
// node_exporter never reads a half-written file and no increment is lost, whatever the number
// of concurrent invocations (tests/ops.sh: hundreds of parallel invokes, exact totals).
// A missing or unreadable state file starts the counters from zero (a counter reset, which
// Prometheus' rate()/increase() handle).
//
// Series (docs/operations.md has alert rules):
//   nri_qos_events_total{event,class,outcome}      counter
//   nri_qos_knob_failures_total{knob}               counter
//   nri_qos_drift_corrected_total{knob}             counter (reconcile)
//   nri_qos_relay_failures_total{event,reason}      counter (native relay: events the relay failed
//                                                   itself, src/nri/failure_record.hpp kinds)
//   nri_qos_event_duration_seconds                  histogram (per invocation, µs resolution)
//   nri_qos_policy_info{sha256,source,path}         gauge 1 (policy in force at the last event:
//                                                   source file / last-good / builtin, policy_store.hpp)
//   nri_qos_policy_errors_total                     counter (events at which the configured policy
//                                                   file was broken and a fallback applied)
//   nri_qos_last_event_timestamp_seconds            gauge
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace nriqos {

/// What one event adds to the metrics.
struct MetricsEvent {
    std::string event;    ///< label event ("create", "StartContainer", "reconcile", ...)
    std::string cls;      ///< label class ("" → "none": no class known)
    std::string outcome;  ///< label outcome (record.hpp EventRecord::outcome)
    std::vector<std::string> failed_knobs;   ///< policy knob keys that failed ("cpu_shares")
    std::vector<std::string> drift_knobs;    ///< knob keys reconcile corrected
    int64_t duration_us = -1;                ///< -1: not observed in the histogram
    bool policy_error = false;               ///< the configured policy file was broken (PolicyInfo::broken)
    /// Relay-level failure kind ("timeout", "crash", ...; src/nri/failure_record.hpp): counted in
    /// nri_qos_relay_failures_total{event,reason}. "" = none.
    std::string relay_failure;
    /// false: count only relay_failure, not nri_qos_events_total nor the last-event time (a
    /// relay failure after the evaluator's answer: the event may be counted by its evaluator).
    bool count_event = true;
    /// A container nri-qos adjusted that the runtime undid (failure_record.hpp
    /// "adjustment-rejected"): the other NRI plugin's name, or "unknown". Counted in
    /// nri_qos_adjustment_rejected_total{other}. "" = none.
    std::string rejected_by;
};

/// Identity of the policy in force, for nri_qos_policy_info: taken from the event's
/// policy_store.hpp PolicyInfo (never read from the file here: the hook hashes a policy text
/// once, when it compiles it).
struct PolicyIdentity {
    std::string path;     ///< the configured policy file (what the policy was, or should have been, read from)
    std::string source;   ///< "file", "last-good", "builtin" (policy_source_name); "" = unknown: left as it was
    std::string sha256;   ///< hex SHA-256 of the policy text in force
};

/// Add `events` to the metrics behind `prom_path` and rewrite it. `prom_path` "" = disabled
/// (returns ""). Waits at most `wait_ms` for the lock. Returns "" or a one-line error; never throws.
std::string update_metrics(const std::string& prom_path, const std::vector<MetricsEvent>& events, const PolicyIdentity& policy,
                           int wait_ms = 500);

/// One line of the pending file (<dir>/.<name>.pending) for an event recorded without the lock
/// (the deadline handler); folded into the counters by the next update_metrics.
/// `policy_error`: the event's policy file was broken (counted in nri_qos_policy_errors_total).
std::string metrics_pending_line(const std::string& event, const std::string& cls, const std::string& outcome, int64_t duration_us,
                                 bool policy_error = false);

/// Bucket upper bounds of nri_qos_event_duration_seconds, in µs.
inline constexpr int64_t kDurationBucketsUs[] = {250, 500, 1000, 2000, 5000, 10000, 25000, 50000, 100000, 250000, 500000, 1000000, 2500000};

}  // namespace nriqos
