// Sink — the event record: one structured line per event, so that every hook invocation,
// reconcile pass and relay failure leaves a trace an operator can find.
//
//  * stderr, logfmt, always (info level for "ok", warn otherwise). In NRI v0.1 mode containerd
//    copies the hook's stderr into its own log (containerd/nri v0.1 client.go invokePlugin:
//    cmd.Stderr = os.Stderr), i.e. `journalctl -u containerd`; in native mode the relay's log
//    (src/nri/relay_process.cpp) receives the evaluation children's stderr.
//  * a node-local JSON-lines file (default /var/log/nri-qos/events.log; settings.event_log,
//    --event-log), appended with one write(2) per line under flock(2), size-rotated to
//    events.log.1 / events.log.2 under the same lock: concurrent hooks never tear or lose a line,
//    and the three files together stay below 3 × event_log_max_bytes. Why a file and not
//    journald/syslog: docs/operations.md ("Where the records are").
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace nriqos {

/// Default paths of the hook's own sinks (documented in nri-qos(8) and nri-qos.toml(5)).
namespace defaults {
constexpr const char* kEventLog = "/var/log/nri-qos/events.log";
constexpr uint64_t kEventLogMaxBytes = 8u << 20;  ///< per generation; 3 generations kept
/// The node_exporter textfile default. Upstream and the rpm: node_exporter's documented
/// directory; the Debian package builds with NRI_QOS_METRICS_FILE set to the directory Debian's
/// prometheus-node-exporter reads (/var/lib/prometheus/node-exporter; its
/// /etc/default/prometheus-node-exporter --collector.textfile.directory), see the Makefile's
/// METRICS_FILE and packaging/deb/debian/rules.
#ifndef NRI_QOS_METRICS_FILE
#define NRI_QOS_METRICS_FILE "/var/lib/node_exporter/textfile_collector/nri_qos.prom"
#endif
constexpr const char* kMetricsFile = NRI_QOS_METRICS_FILE;
}  // namespace defaults

/// One event as recorded. Empty strings are left out of the line.
struct EventRecord {
    int64_t time_ns = 0;  ///< CLOCK_REALTIME; 0 = now
    std::string source;  ///< "invoke", "nri-eval", "reconcile", "relay" (relay-level failures)
    /// nri-eval in the native relay's forked evaluator: which evaluator served the event,
    /// "one-shot" (a process for this event only) or "resident" (one that serves up to
    /// settings.evaluator_events events; src/nri/evaluator.hpp). "" elsewhere.
    std::string evaluator;
    std::string event;  ///< request event ("create", "RunPodSandbox", ...) or "reconcile"
    std::string ns, pod, container, id, sandbox_id;
    bool sandbox = false;
    std::string cls, rule;  ///< QoS class and the rule that chose it
    std::string applied, skipped, failed;  ///< "cpu.shares=2 pod:cpu.idle=1" summaries (sinks.hpp)
    std::string
        runtime;  ///< process knobs handed to the runtime in the NRI adjustment ("sched_policy=idle (NRI scheduler SCHED_IDLE)"; Plan::via_runtime)
    std::string drift;  ///< reconcile: "cpu.shares 512->2 ..." (what was corrected)
    /// Pod annotation keys the class's facts needed that the runtime does not pass to the hook
    /// ("node.koordinator.sh/extended-resource-spec ...", adjust.hpp Plan::not_passed; issue
    /// #25 §1): the record's level is then "warn" whatever the outcome.
    std::string not_passed;
    /// cgroup v2 cpu.shares → cpu.weight formula of the event's writes and why (adjust.hpp
    /// Plan::weight_formula); "" when nothing was converted.
    std::string weight_formula;
    /// systemd cgroup driver: the writes' unit-property outcomes (sinks.hpp systemd_summary);
    /// "" on the cgroupfs driver.
    std::string systemd;
    int64_t duration_us = -1;  ///< -1: unknown
    /// "ok" (every knob applied or skipped with a reason), "partial" (a knob failed, fail-open:
    /// the container runs with the rest), "refused" (error returned to the runtime: fail-closed),
    /// "error" (bad request/policy or internal error before a class was known; fail-open),
    /// "gone" (reconcile: container no longer exists, dropped from the state), "failed" (the relay
    /// could not evaluate the event and answered it empty: fail-open; `failure` says why),
    /// "answered" (relay: the evaluator's answer was replied, its records failed after it).
    std::string outcome;
    std::string message;  ///< error or warning text, one line
    /// Relay-level failures (source "relay", src/nri/failure_record.hpp): the kind ("timeout",
    /// "crash", "bad-output", "unavailable", "malformed", "overloaded", "unknown-method",
    /// "shutdown"; after an answer "records-cut", "died-after-answer") and the fail mode the
    /// relay applied ("open", "closed"; "" = none applies).
    std::string failure, fail_mode;
    /// Policy in force (policy_store.hpp): "file", "last-good" or "builtin"; "" = not known yet.
    std::string policy;
    std::string policy_sha256;  ///< of its text (JSON form only)
    /// While the configured policy file is broken: PolicyInfo::error_line() ("<file>:<line>:
    /// <message>; applying the last good copy ... until it is fixed"), on every event; the
    /// record's level is then "warn" whatever the outcome.
    std::string policy_error;
};

/// "2026-11-22T05:00:00.123456Z" (UTC, µs; `time_ns` in ns since the epoch, 0 = now).
std::string rfc3339_utc(int64_t time_ns);
/// The same text into `buf` (no allocation, no locale, no time zone: async-signal-safe); returns
/// its length (27; not NUL-terminated).
size_t rfc3339_utc(int64_t time_ns, char (&buf)[32]);

/// The stderr form: "nri-qos: time=... level=info source=invoke event=create ns=... outcome=ok ...\n".
/// Values with spaces, '=' or '"' are quoted (logfmt); control characters are escaped.
std::string record_logfmt(const EventRecord& r);

/// The file form: one JSON object and '\n'. Invalid UTF-8 is replaced, never fatal.
std::string record_json(const EventRecord& r);

/// The record's members in groups, in the order both forms print them: Head (time, level), Who
/// (source, event, namespace, pod, container, id, sandbox_id, sandbox), Class (class, rule),
/// Outcome (outcome, failure, fail_mode, duration_us, applied, skipped, failed, drift), Policy
/// (policy, policy_sha256, policy_error), Message. For printing a record group by group:
/// publish.cpp's deadline record is prepared again at each stage of an event and reprints only
/// the groups whose members changed.
enum class RecordPart { Head, Who, Class, Outcome, Policy, Message };

/// Appends one group of record_logfmt's text (" key=value" per non-empty member; no "nri-qos:"
/// prefix, no '\n'). record_logfmt(r) == "nri-qos:" + every group in order + "\n".
void record_logfmt_part(std::string& out, const EventRecord& r, RecordPart part);

/// Appends one group of record_json's text: Head opens the object (`{"time":...,"level":...`),
/// the others print `,"key":value` per non-empty member. record_json(r) == every group in order
/// + "}\n".
void record_json_part(std::string& out, const EventRecord& r, RecordPart part);

/// Append `line` (ending in '\n') to `path` with one write(2) under an exclusive flock(2) of the
/// file, reopening when another process rotated it meanwhile; afterwards rotate when the file
/// exceeds `max_bytes` (path → path.1 → path.2; path.2 is dropped). Creates the directory (0750)
/// and the file (0640) when missing. Waits at most `wait_ms` for the lock; without it the line
/// is still appended (one O_APPEND write), only the rotation check is left to the next writer.
/// Returns "" or a one-line error. Never throws.
std::string append_event_log(const std::string& path, uint64_t max_bytes, const std::string& line, int wait_ms = 300);

/// Take an exclusive flock(2) on `fd`, polling every 1 ms for at most `wait_ms` (the hook must
/// stay well within its deadline even when another process holds the lock). True when locked.
bool lock_within(int fd, int wait_ms);

/// mkdir -p with `mode` for the created components. Returns 0 or -errno.
int make_dirs(const std::string& dir, unsigned mode);

/// Directory part of a path ("/a/b" → "/a", "b" → ".").
std::string dir_name(const std::string& path);

}  // namespace nriqos
