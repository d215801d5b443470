// `nri-qos status` and `nri-qos reconcile`: commands over the state dir (the last request of each
// live container, kept by the hook: publish.hpp, replay.hpp). Neither needs the API server.
#pragma once

#include <optional>
#include <set>
#include <string>

#include "event/replay.hpp"
#include "event/systemd_unit.hpp"

namespace nriqos {

/// Options of status/reconcile. Unset roots/policy: each container's own (those of its last event).
struct StateCommandOptions {
    std::string state_dir;
    std::string last_good_dir;  ///< last good policy copies (policy_store.hpp; "" = none)
    ReplayRoots roots;
    std::string format = "text";  ///< status: "text" or "json"
    bool relay_only = false;  ///< status --relay: only the relay service's liveness; exit 1 unless up and registered
    bool dry_run = false;  ///< reconcile: report drift, write nothing
    std::optional<std::string> metrics_file, event_log;  ///< reconcile's sinks (as the hook's)
    size_t max_entries = 4096;  ///< bound on the records read
    /// reconcile --discover (discover.hpp): ids recorded by this discovery; their reconcile
    /// records are event "discover" and their lines say "adopted"
    std::set<std::string> discovered;
    /// reconcile --unseen: the event name of those adoptions ("discover" or "unseen")
    std::string adopt_event = "discover";
    /// reconcile only these ids (reconcile --unseen: the ones it adopted); nullopt: every record
    std::optional<std::set<std::string>> only;
    /// reconcile --unseen: print the pass's summary line even when nothing was new
    bool verbose_pass = false;
    /// reconcile on the systemd cgroup driver (cgroup v2): the companion that sets the unit
    /// properties of what it writes back, before the files, as the hook does (systemd_unit.hpp
    /// set_systemd_properties; --systemd-helper, "" disables). Without them the next
    /// `systemctl daemon-reload` undoes its corrections and adoptions again.
    std::string systemd_helper = kSystemdHelper;
    /// Sets the unit properties instead of the companion, whatever the node (tests); null: the
    /// companion, when systemd_sink_off allows it.
    UnitSetter* systemd_setter = nullptr;
    /// status: the NRI v0.1 conf.json to check (register.hpp conf_json_problems: a stale entry
    /// fails every pod start, nri-qos's entry beside the native plugin doubles each sandbox on
    /// containerd 2.x); "" = not checked (the CLI passes /etc/nri/conf.json). `plugins_dir`: where
    /// the native plugin entry would be.
    std::string conf_json;
    std::string plugins_dir = "/opt/nri/plugins";
};

/// `status`: a table (or JSON) of the pods and containers in the state dir: namespace/pod,
/// container, id, class, rule, last event and time, and per knob the value the current policy
/// wants next to the value the kernel holds now (read back; "DRIFT" marked). Returns the exit
/// status: 0, or 1 when the state dir cannot be read.
int run_status(const StateCommandOptions& o, std::string& out);

/// `status --relay`: the external relay service's liveness line from <state_dir>/relay.json
/// (src/nri/service.hpp) and the exit status a liveness probe wants: 0 when the service's pid is
/// alive and it is registered with the runtime, 1 otherwise (no file: "relay: not running here").
int relay_liveness(const StateCommandOptions& o, std::string& out);

/// `reconcile`: re-apply the current policy to every container in the state dir whose cgroup
/// still exists; containers that are gone are dropped from the state. Writes only what drifted
/// (the kernel file differs from the wanted value), through the hook's own writer (sinks.hpp
/// apply_plan: runc's memory+swap order, the CFS writes refused with EINVAL retried after the
/// others) on the plan the hook builds (adjust.hpp build_plan: percentages of the class's own
/// value, else the request's); prints one line per container changed or failed (its knobs in
/// the order written) and a summary. Quiet (issue #25 §4): an event record (stderr logfmt line +
/// event log) only for a container whose knobs drifted (corrected or not), that failed, could not
/// be evaluated or is gone — none for a container already in force. The pass is counted in its
/// own metrics (metrics.hpp ReconcilePass: nri_qos_reconcile_*, nri_qos_drift_corrected_total),
/// never as a runtime event: nri_qos_events_total, the event-latency histogram and
/// nri_qos_last_event_timestamp_seconds are left as they are.
/// On the systemd driver (cgroup v2) the knobs written back that have a unit property are first
/// set as properties, as the hook does (StateCommandOptions::systemd_helper; the record's
/// `systemd` says what became of them), so that the next `systemctl daemon-reload` keeps them.
/// The policy is resolved as the hook resolves it (policy_store.hpp): while a policy file is
/// broken its last good copy (else the built-in policy) is restored, one line
/// "warning: policy <error>" is printed per broken file, the records of the pass carry the error
/// and nri_qos_reconcile_policy_broken is 1 — and the exit status stays 0 (the hook applies the
/// same copy; a timer unit left failed every 30 s would hide real failures).
/// Exit status: 0; 1 when a policy cannot be resolved at all (internal error), or a knob of a
/// fail-closed class failed.
int run_reconcile(const StateCommandOptions& o, std::string& out);

}  // namespace nriqos
