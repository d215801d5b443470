// `explain --pod`: a Kubernetes Pod manifest (YAML or JSON: what `kubectl get pod -o yaml`
// prints, or a manifest about to be applied) turned into what kubelet and containerd would hand
// nri-qos on a node — the pod cgroup kubelet creates, the sandbox and container requests the
// runtime sends over NRI — with kubelet's rules, each cited below (Kubernetes v1.28–v1.31
// sources; the rules quoted have not changed since v1.20 unless said):
//  * API defaulting: a container's missing request of a resource it limits is the limit
//    (pkg/apis/core/v1/defaults.go SetDefaults_Pod);
//  * QoS class: pkg/apis/core/v1/helper/qos/qos.go GetPodQOS;
//  * pod cgroup name and parent: pkg/kubelet/cm/pod_container_manager_linux.go GetPodContainerName,
//    qos_container_manager_linux.go (kubepods / burstable / besteffort), cgroup_manager_linux.go
//    (systemd: ToSystemd, "kubepods-burstable-pod<uid with _>.slice");
//  * pod cgroup values: pkg/kubelet/cm/helpers_linux.go ResourceConfigForPod (sums over the
//    containers, init containers by max, overhead added), MilliCPUToShares, MilliCPUToQuota;
//  * container values: pkg/kubelet/kuberuntime/kuberuntime_container_linux.go
//    calculateLinuxResources (shares from the request, or from the limit when no request; quota
//    from the limit with the period 100000; memory limit);
//  * what containerd makes of them: internal/cri/opts/spec_linux.go WithResources (a zero quota
//    or period is left out; swap = the memory limit), sandbox spec WithDefaultSandboxShares
//    (the pause container gets cpu.shares 2), internal/cri/server/helpers.go getCgroupsPath.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "model/model.hpp"
#include "model/request.hpp"

namespace nriqos {

/// Limits on a manifest (untrusted input): the document size, containers per pod.
namespace manifest_limits {
constexpr size_t kMaxBytes = limits::kMaxRequestBytes;  ///< 4 MiB, as a request
constexpr size_t kMaxContainers = 256;  ///< init + app containers
constexpr int kMaxDepth = 64;  ///< YAML/JSON nesting
constexpr size_t kMaxNodes = 200000;  ///< nodes, each use of an alias counted (a pod with
    ///< managedFields has a few thousand)
}  // namespace manifest_limits

/// One container of the manifest, with API defaulting applied (requests default to limits).
struct ManifestContainer {
    std::string name;
    bool init = false;  ///< spec.initContainers
    bool sidecar = false;  ///< an init container with restartPolicy: Always (runs beside the app)
    /// CPU in millicores (Quantity.MilliValue), memory in bytes (Quantity.Value); nullopt: not set.
    std::optional<int64_t> cpu_request, cpu_limit, mem_request, mem_limit;
};

/// The parts of a Pod manifest the preview reads.
struct PodManifest {
    std::string name, ns = "default", uid;
    bool uid_made_up = false;  ///< metadata.uid missing: a stable one derived from namespace/name
    std::map<std::string, std::string> labels, annotations;
    std::vector<ManifestContainer> containers;  ///< init containers first (in order), then the app containers
    std::optional<int64_t> overhead_cpu, overhead_mem;  ///< spec.overhead (millicores, bytes)
    std::string status_qos;  ///< status.qosClass as printed by the API server ("" when absent)
};

/// Parse a Pod manifest: YAML (1.2, which includes JSON) with yaml-cpp. Accepts kind Pod, or a
/// kind List holding exactly one Pod (`kubectl get pod X -o yaml` of one pod). Throws InputError
/// with one line ("spec.containers[1].resources.limits.cpu: quantity \"x\": ...") on anything
/// else: not a mapping, a missing spec.containers, more than kMaxContainers containers, a bad
/// quantity, a non-string label, a key or value over the request limits, a document over kMaxBytes
/// or deeper than kMaxDepth, a YAML syntax error (with its line and column).
PodManifest parse_pod_manifest(std::string_view text);

/// The stable made-up uid of a manifest without metadata.uid: a version-4-shaped UUID from the
/// SHA-256 of "namespace/name" (same manifest, same uid; cgroup names stay the same across runs).
std::string made_up_uid(const std::string& ns, const std::string& name);

/// pkg/apis/core/v1/helper/qos/qos.go GetPodQOS over init and app containers: no CPU or memory
/// request or limit anywhere → BestEffort; every container limits both CPU and memory and the
/// sums of requests equal the sums of limits → Guaranteed; else Burstable. Zero quantities count
/// as absent (IsZero).
KubeQos pod_qos(const PodManifest& m);

/// pkg/kubelet/cm/helpers_linux.go ResourceConfigForPod (enforceCPULimits = true, period 100000):
/// what kubelet writes into the pod cgroup. Units: shares, µs, bytes. nullopt: left as created.
struct PodCgroupConfig {
    int64_t cpu_shares = 2;
    std::optional<int64_t> cpu_quota, cpu_period, memory_limit;
};
/// Requests: Σ app containers (and sidecars), then max with each other init container (the
/// sidecars started before it added), then + overhead (resource PodRequests); limits likewise
/// (PodLimits; overhead only on a limit that is set). Guaranteed: shares, quota, period, memory;
/// Burstable: shares, and quota/period only when every container limits CPU, memory only when
/// every container limits memory; BestEffort: shares 2.
PodCgroupConfig resource_config_for_pod(const PodManifest& m, KubeQos qos);

/// The OCI LinuxResources containerd gives one container (kuberuntime_container_linux.go
/// calculateLinuxResources, then WithResources): shares = MilliCPUToShares(request, or the limit
/// without a request); period 100000; quota = MilliCPUToQuota(limit) when a limit is set;
/// memory limit and swap (= limit) when a memory limit is set.
Resources container_oci_resources(const ManifestContainer& c);

/// One container (or the sandbox) as the runtime reports it to NRI.
struct PreviewContainer {
    std::string name;  ///< "" for the sandbox
    bool init = false, sidecar = false;
    std::string id;  ///< made up, stable: hex SHA-256 of uid + "/" + name
    std::string cgroups_path;  ///< OCI cgroupsPath (getCgroupsPath)
    Resources oci;
};

/// The pod as kubelet and containerd lay it out on a node with `driver`.
struct KubeletPod {
    KubeQos qos = KubeQos::BestEffort;
    CgroupDriver driver = CgroupDriver::Cgroupfs;
    std::string cgroup_parent;  ///< as kubelet passes it to the CRI (cgroupfs "/kubepods/burstable/pod<uid>",
        ///< systemd "kubepods-burstable-pod<uid_>.slice")
    std::string pod_dir;  ///< the pod cgroup below a hierarchy root ("kubepods/burstable/pod<uid>",
        ///< "kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod<uid_>.slice")
    PodCgroupConfig pod;
    PreviewContainer sandbox;
    std::vector<PreviewContainer> containers;  ///< init containers first, then app containers
};

/// Lay the pod out for a node whose kubelet uses `driver` (the rules in the file comment).
KubeletPod kubelet_pod(const PodManifest& m, CgroupDriver driver);

/// The native NRI events the runtime sends for the pod, in the relay child's input shape
/// (request.hpp parse_nri_event): RunPodSandbox, and CreateContainer / StartContainer of
/// container `i` (its resources as given: at StartContainer the caller passes them with the
/// CreateContainer adjustment applied). `pid` is the task's (made up by the caller).
nlohmann::json nri_pod_event(const PodManifest& m, const KubeletPod& k, const char* event, int64_t pid);
nlohmann::json nri_container_event(const PodManifest& m, const KubeletPod& k, size_t i, const char* event, const Resources& res,
                                   std::optional<int64_t> pid);

/// OCI LinuxResources in NRI Go JSON ({"cpu": {"shares": {"value": N}}, ...}).
nlohmann::json nri_resources_json(const Resources& r);

}  // namespace nriqos
