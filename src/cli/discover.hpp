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

#include <cstdint>
#include <optional>
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
    /// Passed as the client's --verbose-ids (comma-separated; "" none): only these get a status
    /// call, the rest is printed as listed ("brief"). nullopt: every item's status (discover).
    std::optional<std::string> verbose_ids;
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
    int64_t created_ns = 0;  ///< CRI created_at (unix ns; 0 unknown)
    bool brief = false;  ///< listed without its status (nri-qos-cri --verbose-ids): no request
};

/// What the CRI client reported.
struct Discovery {
    std::string runtime;  ///< "containerd 1.6.20~ds1" ("" unknown)
    std::vector<DiscoveredEntry> entries;  ///< sandboxes first, then containers, each in the client's order
    std::vector<std::string> errors;  ///< the client's per-item errors, one line each
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

/// Most sandboxes/containers one unseen pass adopts; the rest waits for the next pass.
inline constexpr size_t kMaxUnseenPerPass = 256;

/// What one unseen pass does with the runtime's listing (plan_unseen).
struct UnseenPlan {
    std::vector<std::string> adopt;  ///< ids to adopt now, in listing order (sandboxes first)
    size_t known = 0;  ///< already in the state dir (an event, a Synchronize, an earlier pass)
    size_t too_new = 0;  ///< younger than the minimum age, or of an unseen pod that is: next pass
    size_t deferred = 0;  ///< past max_adopt: next pass
    size_t no_pod = 0;  ///< a container whose sandbox is not listed (not ready)
    size_t given_up = 0;  ///< an earlier pass could not adopt it (said then): not asked again
    std::vector<std::string> still_given_up;  ///< those ids (the ones the runtime still lists)
};

/// The state-dir file (StateDir::read_file) of the ids an unseen pass could not adopt, one per line.
inline constexpr const char* kUnseenSkippedFile = "unseen-skipped";

/// The unseen pass's decision (issue #33 §4): which of the runtime's live sandboxes and
/// containers (`listed`: the CRI client's brief listing, discovery_from_cri_json) nri-qos never
/// saw. An id in `known` (the ids of the state dir's last-request records) was seen: by its own
/// event, a Synchronize, a discover or an earlier pass — left alone. An unknown one is adopted
/// unless it is younger than `min_age_ms` by CRI's created_at against `now_ns` (both unix ns; 0
/// = unknown age, counted old enough): containerd lists a container once its NRI
/// CreateContainer returned (internal/cri/server container_create.go adds it to the container
/// store last), and the relay records an event after answering it, so a young container may be
/// one whose own event is still being recorded — it waits for the next pass. A container of an
/// unseen pod that waits makes none of the pod's containers adopted before it. An id in
/// `given_up` (an earlier pass skipped it with its reason) is not asked again. At most
/// `max_adopt` ids are adopted (the rest: `deferred`). Pure: no I/O.
UnseenPlan plan_unseen(const Discovery& listed, const std::set<std::string>& known, const std::set<std::string>& given_up, int64_t now_ns,
                       int64_t min_age_ms, size_t max_adopt);

/// `reconcile --unseen` (issue #33 §4; the relay service runs it every --unseen-interval): list
/// the runtime through CRI without status calls (read-only: Version, ListPodSandbox,
/// ListContainers), decide with plan_unseen against the state dir, and only when something is
/// unseen ask the status of those ids alone, record each as discover does (source and event
/// "unseen"; just before each is stored the state dir is read again: a record its own event
/// left meanwhile wins) and apply their class with run_reconcile restricted to them (records
/// and output lines "unseen"/"adopted"). Nothing new: no output (unless o.verbose_pass), no
/// policy load, no record. Exit status: run_reconcile's, 1 when the runtime cannot be asked.
int run_unseen(StateCommandOptions& o, const DiscoverOptions& d, int64_t min_age_ms, std::string& out);

}  // namespace nriqos
