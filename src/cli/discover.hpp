// `nri-qos reconcile --discover` (issue #25 §3): adopt the pods and containers that were running
// before nri-qos was installed (a v0.1 one-shot hook is only called for the events after it).
//
// The runtime is asked over CRI by a companion executable, nri-qos-cri (src/cri/: gRPC lives
// there, never in this static binary), which prints one JSON document: the ready sandboxes and
// the created/running containers with their verbose status (containerd's "info": pid and the OCI
// runtimeSpec with cgroupsPath, linux.resources and annotations). Each becomes the request
// containerd 1.6 hands a v0.1 hook at its create (discovery_from_cri_json), is validated by the
// same parser (request.hpp parse_v01_request), recorded in the state dir as its last request
// (source and event "discover", state.hpp), and the sandbox's memo is written as the hook writes
// it; the reconcile pass that follows (status.hpp run_reconcile) then classifies them with the
// current policy and applies their classes through the same writer, records and metrics.
#pragma once

#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/status.hpp"

namespace nriqos {

/// Where the runtime and the CRI client are.
struct DiscoverOptions {
    /// CRI endpoint: "unix:///path" or "/path" (containerd's default; CRI-O:
    /// /var/run/crio/crio.sock; iSulad: /var/run/isulad.sock)
    std::string cri_socket = "unix:///run/containerd/containerd.sock";
    /// The CRI client; "" = nri-qos-cri beside this executable, else kCriClient
    std::string cri_client;
    /// NRI v0.1 conf.json: the conf of its nri-qos entry is the discovered requests' "conf" (its
    /// policy is the one the hook would use); absent or unreadable: {"policy": the default}
    std::string nri_conf = "/etc/nri/conf.json";
    int timeout_ms = 30000;  ///< the whole CRI client run (it is killed after that)
};

/// Default install path of the CRI client (Makefile install, packaging).
inline constexpr const char* kCriClient = "/usr/libexec/nri-qos/nri-qos-cri";

/// One sandbox or container as the runtime reported it, turned into an NRI v0.1 request.
struct DiscoveredEntry {
    bool sandbox = false;
    std::string id, sandbox_id, ns, pod, container;
    /// The v0.1 request document containerd 1.6 would have passed at its create:
    /// {conf, version "0.1", state "create", id, sandboxID, pid, spec{resources, cgroupsPath,
    /// annotations}, labels} — spec fields from the runtime spec, labels the pod's CRI labels
    /// (containerd's v0.1 client passes the sandbox's labels for both), annotations the runtime
    /// spec's plus the pod's CRI annotations it lacks (containerd < 1.7 copies into the spec
    /// only those its pod_annotations allow-list passes). "" when `skip` is set.
    std::string request;
    std::string skip;  ///< not adoptable: why, one line ("no runtimeSpec in the verbose status", a bad field)
};

/// What the CRI client reported.
struct Discovery {
    std::string runtime;                  ///< "containerd 1.6.20~ds1" ("" unknown)
    std::vector<DiscoveredEntry> entries; ///< sandboxes first, then containers, each in the client's order
    std::vector<std::string> errors;      ///< the client's per-item errors, one line each
};

/// Convert the CRI client's document (format: src/cri/nri-qos-cri.cpp) into requests. `conf` is
/// the plugin conf put in each request. Reads from each item's verbose "info" entry (a JSON
/// object; containerd and CRI-O name it "info"): "pid" and "runtimeSpec" {annotations,
/// linux{cgroupsPath, resources}}; the sandbox's CRI "annotations" are added to its own and its
/// containers' requests for every key the runtime spec lacks (the spec's value wins); a
/// container without a runtimeSpec falls back to the CRI
/// status's resources (cpu_*, memory_limit_in_bytes, cpuset_*) but still needs a cgroupsPath.
/// Each request is checked with parse_v01_request; an entry that fails gets `skip`. Throws
/// InputError when the document itself is not the client's (not JSON, no "v": 1).
Discovery discovery_from_cri_json(const std::string& text, const nlohmann::json& conf);

/// The conf of the first "nri-qos" plugin of an NRI v0.1 conf.json, or {"policy": default}
/// when the file is absent, unreadable, malformed or has no such entry.
nlohmann::json v01_plugin_conf(const std::string& conf_json_path);

/// Run the CRI client (argv: client --socket S --timeout-ms T) and return its stdout; on failure
/// "" and `err` set to one line (the client's stderr line, its exit status, or a timeout).
std::string run_cri_client(const DiscoverOptions& d, std::string& err);

/// `reconcile --discover`: ask the runtime (run_cri_client), record every sandbox and container
/// that the state dir does not know yet (its last request with source/event "discover"; a
/// sandbox's memo as the hook writes it at the sandbox's create), print one line per entry
/// skipped and a summary, then run the reconcile pass (run_reconcile) with those ids marked as
/// discovered: their records and output lines say "discover"/"adopted". Entries the state dir
/// knows already (from events) are left as they are. Exit status: run_reconcile's, or 1 when the
/// runtime could not be asked (the reconcile pass still runs on what is recorded).
int run_discover(StateCommandOptions& o, const DiscoverOptions& d, std::string& out);

}  // namespace nriqos
