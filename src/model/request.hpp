// Stage 1 — request: read and validate what the runtime sent.
//
// Two wire shapes become one Request:
//  * NRI v0.1 (containerd 1.5/1.6 natively, 1.7/2.x through the v010-adapter): the JSON request
//    of containerd/nri v0.1 `types.Request` — {conf, version, state, id, sandboxID, pid,
//    spec{resources (OCI LinuxResources), namespaces, cgroupsPath, annotations}, labels, results}.
//  * The relay's child event (native NRI): {event, runtime, pod, container, linux_resources} with
//    NRI's PodSandbox/Container in "NRI Go JSON" (snake_case proto names, {"value": N} wrappers).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace nriqos {

/// Bad input (request or policy): the message is one line, safe to print and to put in a Result.
struct InputError : std::runtime_error {
    using std::runtime_error::runtime_error;
};

/// Limits on untrusted input (sizes in bytes).
namespace limits {
constexpr size_t kMaxRequestBytes = 4u << 20;  ///< whole request document
constexpr int kMaxDepth = 32;  ///< JSON nesting
constexpr size_t kMaxMapEntries = 4096;  ///< labels / annotations each
constexpr size_t kMaxKeyBytes = 317;  ///< Kubernetes: 253 prefix + '/' + 63 name
constexpr size_t kMaxValueBytes = 256u << 10;  ///< Kubernetes: all annotations ≤ 256 KiB
constexpr size_t kMaxIdBytes = 128;
constexpr size_t kMaxCgroupsPathBytes = 4096;
}  // namespace limits

/// Lifecycle event, normalised over v0.1 states and native NRI events.
enum class Event {
    Create,
    Update,
    Delete,
    Pause,
    Resume,  // v0.1 `state`
    RunPodSandbox,
    StopPodSandbox,
    RemovePodSandbox,
    CreateContainer,
    StartContainer,
    UpdateContainer,
    StopContainer,
    RemoveContainer,
    PostUpdateContainer,
    UpdatePodSandbox,  // native NRI: after a container update; pod resize (NRI v0.10+)
    /// Native NRI Synchronize (registration, reconnect): one existing pod (sandbox: pod knobs and
    /// the class memo, as RunPodSandbox) or one existing container (NRI fields in `update`,
    /// the rest written directly, as UpdateContainer + StartContainer). docs/native-nri.md.
    Synchronize,
    /// A Synchronize item the relay evaluates after it answered the runtime (the pass's deadline
    /// came first, src/nri/relay_sync.cpp): nothing can go into the reply any more, so a container's
    /// knobs are all written directly (as a v0.1 create), a pod's as at Synchronize.
    SynchronizeLate,
    Other,
};
const char* event_name(Event e);

/// The subset of OCI LinuxResources (runtime-spec config-linux.md) nri-qos reads.
/// Units as in OCI: shares (relative weight), quota/period in microseconds, memory in bytes.
struct Resources {
    std::optional<int64_t> cpu_shares, cpu_quota, cpu_period;
    std::optional<std::string> cpu_cpus, cpu_mems;
    std::optional<int64_t> mem_limit, mem_swap, mem_reservation;
    std::optional<int64_t> pids_limit;
};

/// What kubelet granted the container (or the pod) after an update: `current` (the resources
/// the runtime holds, the request's /container/linux/resources or /pod/linux/resources) with the
/// fields the update *sets* laid over it, as containerd merges a CRI UpdateContainerResources
/// into the OCI spec (containerd internal/cri/server/container_update_resources_linux.go
/// updateOCIResource with internal/cri/opts/spec_linux_opts.go WithResources): a numeric field of 0 and an empty
/// cpus/mems string mean "not set by this update" and keep the current value — kubelet's
/// cpuset-only updates (cpumanager updateContainerCPUSet) reach NRI UpdateContainer with 0 in
/// every other field (containerd/nri api FromCRILinuxResources). A new memory limit without a new
/// swap limit takes the swap limit along when the container has one (kubelet's NoSwap sets swap
/// = limit; on cgroup v1 runc would refuse a memory limit above memsw). pids is taken when
/// non-zero. Units as in Resources.
///
/// The one definition every trust comparison uses (facts.cpp Ctx::raise_of reads
/// Request::resources): parse_nri_event applies it to UpdateContainer and UpdatePodSandbox, so
/// Synchronize, reconcile and status (which replay recorded requests through parse_nri_event)
/// see the same grant as the event did. An update never reads as "kubelet set no CFS quota".
Resources granted_resources(const Resources& current, const Resources& update);

/// One validated request, whatever wire shape it came in.
struct Request {
    enum class Wire { V01, NriEvent } wire = Wire::V01;
    std::string version;  ///< v0.1: request "version"
    Event event = Event::Other;
    std::string id;  ///< container id (sandbox id for sandbox events)
    std::string sandbox_id;
    bool is_sandbox = false;
    std::optional<int64_t> pid;  ///< init pid of the task, when it exists
    std::optional<std::string> cgroups_path;  ///< OCI cgroupsPath (either driver form)
    std::map<std::string, std::string> labels;  ///< pod labels
    std::map<std::string, std::string> annotations;  ///< OCI/pod annotations
    std::string pod_namespace, pod_name, pod_uid, container_name;
    Resources resources;
    nlohmann::json conf = nlohmann::json::object();  ///< v0.1 "conf" from /etc/nri/conf.json
    std::string runtime_name, runtime_version;  ///< native NRI: from Configure
    /// native NRI StartContainer only, set by the relay (child input "unadjusted": true): the
    /// container was in state CREATED in the relay's Synchronize, so its CreateContainer went by
    /// without nri-qos's adjustment, and the Synchronize's ContainerUpdate may never reach the
    /// kernel (containerd internal/cri/server/container_update_resources.go
    /// updateContainerResources updates only the spec of a container that is not RUNNING, while
    /// CRI StartContainer created its task from the spec before it waited for the plugin sync,
    /// container_start.go). StartContainer then writes every knob itself (adjust.cpp Mode::Direct).
    bool unadjusted = false;
};

/// Parse a JSON document into a DOM with nri-qos's limits: size ≤ kMaxRequestBytes, nesting ≤
/// max_depth, ≤ kMaxMapEntries keys per object, no duplicate object keys, valid UTF-8, no NUL
/// byte. Throws InputError. (The request parsers below build no DOM: they read the document
/// with nlohmann's SAX interface, under the same limits.)
nlohmann::json parse_json_limited(std::string_view text, int max_depth = limits::kMaxDepth);

/// Parse and validate an NRI v0.1 request (stdin of `invoke`). Throws InputError: a document
/// error (size, syntax, UTF-8, depth, duplicate key; the first in document order) or else the
/// first bad field in a fixed order, named by its JSON pointer, e.g.
/// "/spec/cgroupsPath: expected string, got integer". `conf` is kept as a DOM; subtrees that
/// nri-qos does not read are checked against the limits only.
Request parse_v01_request(std::string_view text);

/// Parse and validate the relay's child event (stdin of `nri-eval`). Throws InputError.
Request parse_nri_event(std::string_view text);

}  // namespace nriqos
