// nri-qos as an external NRI plugin run as a service (issue #20 §2): `nri-qos relay --socket
// PATH` keeps a relay connected to the runtime. Each connection is a relay process of its own
// (run_relay in a forked child: it registers, gets a full Synchronize, confines itself); when
// it ends — containerd restarted, the socket is not there yet — the service connects again with
// back-off. It also keeps the relay's liveness on record: a status file in the state directory
// (`nri-qos status` shows it) and a metrics file next to the hook's (node_exporter textfile).
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "nri/relay.hpp"

namespace nriqos::nri {

/// Where the service keeps the relay's liveness, and what goes into it.
struct ServiceOptions {
    /// `<state_dir>/relay.json`, rewritten atomically (temporary file + rename) at each change:
    /// {"pid": service pid, "started": unix s, "relay_pid": pid of the connected relay or 0,
    ///  "connected": bool, "registered": bool (Configure received on this connection),
    ///  "runtime": name, "runtime_version", "nri_version", "reconnects": connection attempts after the
    ///  first, "connected_since": unix s or 0, "last_sync": unix s of the last Synchronize reply or 0,
    ///  "socket": path, and with the unseen pass on: "unseen": {"interval_s", "passes": ended so
    ///  far, "last": unix s of the last one's end or 0, "last_status": its exit status, 128 +
    ///  signal when killed}}. Empty: none.
    std::string status_file;
    /// Prometheus textfile (e.g. .../textfile_collector/nri_qos_relay.prom), rewritten atomically:
    /// nri_qos_relay_up (1 while registered), nri_qos_relay_reconnects_total,
    /// nri_qos_relay_start_time_seconds, nri_qos_build_info{version,policy_sha256} 1. Empty: none.
    std::string metrics_file;
    /// `--metrics-listen`: "ADDRESS:PORT" on which the metrics server (metrics_server) answers
    /// GET /metrics (issue #33 §2); "" = none. The server is a process of its own, exec'd before
    /// the first connection and again when it dies: the relay processes never hold its socket.
    std::string metrics_listen;
    /// The metrics server executable (nri-qos-metrics, src/metrics/): beside this binary, else
    /// /usr/libexec/nri-qos/nri-qos-metrics (main.cpp picks it).
    std::string metrics_server;
    /// The hook's metrics textfile the server answers with (records/metrics.hpp); "" = none.
    std::string events_metrics_file;
    std::string version;  ///< build version (nri_qos_build_info)
    std::string policy_sha256;  ///< of the policy in force when the service started ("" unknown)
    int backoff_min_ms = 500;  ///< first retry delay; doubled per failure up to backoff_max_ms
    int backoff_max_ms = 5000;
    /// A connection that lasted this long resets the back-off to backoff_min_ms.
    int stable_after_ms = 10000;
    /// The unseen pass (issue #33 §4): a command run every `unseen_interval_ms` while the relay is
    /// registered, the first one that long after the connection's Synchronize was answered —
    /// `nri-qos reconcile --unseen ...` (src/cli/discover.hpp run_unseen), which adopts the
    /// containers the runtime never reported (created during a Synchronize:
    /// containerd/containerd#13698, cri-o/cri-o#10090). It runs as a process of its own (fork +
    /// exec; stdin /dev/null, stdout and stderr the service's stderr, i.e. the relay's log), never
    /// inside the relay's ttrpc loop and never waited for by the service's loop: it is reaped with
    /// WNOHANG at the loop's 200 ms ticks, killed (SIGKILL, one log line) when it runs longer than
    /// `unseen_timeout_ms`, and never two at once. A non-zero exit is logged. Empty argv or an
    /// interval <= 0: no pass.
    std::vector<std::string> unseen_argv;
    int unseen_interval_ms = 0;
    int unseen_timeout_ms = 120000;
};

/// Run the relay as a service: connect (RelayOptions::socket_path), serve until the connection
/// ends, then reconnect after the back-off — forever, until SIGTERM/SIGINT (forwarded to the
/// connected relay; returns 0). Every connection gets a fresh relay process, hence a full
/// registration and Synchronize. Writes one log line per connection lost and per reconnect
/// attempt on stderr (the relay's log). With metrics_listen, first starts the metrics server
/// and waits for it to bind: returns 2 with one log line when it cannot (a bad address, a port
/// in use, the server missing). Never throws.
int run_relay_service(RelayOptions opts, const ServiceOptions& so);

/// Read a service status file (ServiceOptions::status_file) for `nri-qos status`. Returns the
/// parsed object with "up" added (the service pid is alive and is an nri-qos process), or null
/// when the file does not exist; an unreadable or malformed file gives {"error": "..."}.
nlohmann::json read_service_status(const std::string& path, const std::string& proc_root = "/proc");

/// A Prometheus label value escaped as the text exposition format asks (backslash, double quote,
/// newline: prometheus.io docs "Exposition formats", text format). For nri_qos_build_info, which
/// both the relay service (its textfile) and nri-qos-metrics (its /metrics) print.
std::string prom_label(const std::string& v);

/// Start the metrics server `so.metrics_server --listen so.metrics_listen ...` (its status file
/// status_file: the relay's liveness) as a child with PR_SET_PDEATHSIG SIGTERM, and wait up to
/// 5 s for it to bind. Returns its pid, or -1 with `why` set (its one-line error).
pid_t start_metrics_server(const ServiceOptions& so, const std::string& status_file, std::string& why);

}  // namespace nriqos::nri
