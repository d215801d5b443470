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
//   nri_qos_drift_corrected_total{knob}             counter (reconcile: knobs written back)
//   nri_qos_relay_failures_total{event,reason}      counter (native relay: events the relay failed
//                                                   itself, src/nri/failure_record.hpp kinds)
//   nri_qos_event_duration_seconds                  histogram (per invocation, µs resolution)
//   nri_qos_policy_info{sha256,source,path}         gauge 1 (policy in force at the last event:
//                                                   source file / last-good / builtin, policy_store.hpp)
//   nri_qos_policy_errors_total                     counter (events at which the configured policy
//                                                   file was broken and a fallback applied)
//   nri_qos_last_event_timestamp_seconds            gauge (runtime events only: never reconcile)
//   nri_qos_annotation_not_passed_total{key}        counter (events whose facts needed a pod
//                                                   annotation the runtime does not pass to the
//                                                   hook; printed once counted)
// Reconcile passes (issue #25 §4: apart from the runtime events, whose counters, histogram and
// last-event time they do not touch; printed once a pass has been counted):
//   nri_qos_reconcile_passes_total                  counter
//   nri_qos_reconcile_containers_total              counter (containers examined)
//   nri_qos_reconcile_drift_found_total             counter (knobs found unlike the wanted value)
//   nri_qos_reconcile_corrected_total               counter (knobs written back; by knob: drift_corrected)
//   nri_qos_reconcile_knob_failures_total{knob}     counter (knobs whose write back failed)
//   nri_qos_reconcile_errors_total                  counter (containers whose values could not be computed)
//   nri_qos_reconcile_gone_total                    counter (containers dropped: cgroup gone)
//   nri_qos_reconcile_duration_seconds              histogram (per pass)
//   nri_qos_reconcile_policy_broken                 gauge 0/1 (the last pass ran on a last good
//                                                   copy or the built-in policy: the file is broken)
//   nri_qos_reconcile_last_pass_timestamp_seconds   gauge
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace nriqos {

/// What one event adds to the metrics.
struct MetricsEvent {
    std::string event;  ///< label event ("create", "StartContainer", "reconcile", ...)
    std::string cls;  ///< label class ("" → "none": no class known)
    std::string outcome;  ///< label outcome (record.hpp EventRecord::outcome)
    std::vector<std::string> failed_knobs;  ///< policy knob keys that failed ("cpu_shares")
    std::vector<std::string> drift_knobs;  ///< knob keys reconcile corrected
    int64_t duration_us = -1;  ///< -1: not observed in the histogram
    bool policy_error = false;  ///< the configured policy file was broken (PolicyInfo::broken)
    /// Relay-level failure kind ("timeout", "crash", ...; src/nri/failure_record.hpp): counted in
    /// nri_qos_relay_failures_total{event,reason}. "" = none.
    std::string relay_failure;
    /// false: count only relay_failure, not nri_qos_events_total nor the last-event time (a
    /// relay failure after the evaluator's answer: the event may be counted by its evaluator).
    bool count_event = true;
    /// Pod annotation keys the event's facts needed and the runtime does not pass to the hook
    /// (nri_qos_annotation_not_passed_total{key}; keys come from the fact registry, never from
    /// the pod: bounded cardinality).
    std::vector<std::string> not_passed;
    /// A container nri-qos adjusted that the runtime undid (failure_record.hpp
    /// "adjustment-rejected"): the other NRI plugin's name, or "unknown". Counted in
    /// nri_qos_adjustment_rejected_total{other}. "" = none.
    std::string rejected_by;
};

/// What one reconcile pass adds to the metrics (the nri_qos_reconcile_* series above). Counts
/// are of knobs (drift found, corrected, failed) or of containers (examined, errors, gone).
struct ReconcilePass {
    uint64_t containers = 0;  ///< containers (and sandboxes) examined
    uint64_t drift_found = 0;  ///< knobs whose kernel value differed from the wanted one
    std::vector<std::string> corrected_knobs;  ///< policy knob keys written back (one per write)
    std::vector<std::string> failed_knobs;  ///< policy knob keys whose write back failed
    uint64_t errors = 0;  ///< containers whose wanted values could not be computed
    uint64_t gone = 0;  ///< containers dropped from the state (cgroup gone)
    int64_t duration_us = 0;  ///< the whole pass, µs
    bool policy_broken = false;  ///< a policy file was broken: its fallback applied
};

/// Identity of the policy in force, for nri_qos_policy_info: taken from the event's
/// policy_store.hpp PolicyInfo (never read from the file here: the hook hashes a policy text
/// once, when it compiles it).
struct PolicyIdentity {
    std::string path;  ///< the configured policy file (what the policy was, or should have been, read from)
    std::string source;  ///< "file", "last-good", "builtin" (policy_source_name); "" = unknown: left as it was
    std::string sha256;  ///< hex SHA-256 of the policy text in force
};

/// Add `events` (and the reconcile pass `pass`, nullptr = none) to the metrics behind
/// `prom_path` and rewrite it. `prom_path` "" = disabled (returns ""). Waits at most `wait_ms`
/// for the lock. Returns "" or a one-line error; never throws.
std::string update_metrics(const std::string& prom_path, const std::vector<MetricsEvent>& events, const PolicyIdentity& policy, int wait_ms = 500,
                           const ReconcilePass* pass = nullptr);

/// One line of the pending file (<dir>/.<name>.pending) for an event recorded without the lock
/// (the deadline handler); folded into the counters by the next update_metrics.
/// `policy_error`: the event's policy file was broken (counted in nri_qos_policy_errors_total).
std::string metrics_pending_line(const std::string& event, const std::string& cls, const std::string& outcome, int64_t duration_us,
                                 bool policy_error = false);

/// Bucket upper bounds of nri_qos_event_duration_seconds, in µs.
inline constexpr int64_t kDurationBucketsUs[] = {250, 500, 1000, 2000, 5000, 10000, 25000, 50000, 100000, 250000, 500000, 1000000, 2500000};
/// Bucket upper bounds of nri_qos_reconcile_duration_seconds (a whole pass), in µs.
inline constexpr int64_t kReconcileBucketsUs[] = {1000,   5000,    10000,   25000,   50000,    100000,  250000,
                                                  500000, 1000000, 2500000, 5000000, 10000000, 30000000};

}  // namespace nriqos
