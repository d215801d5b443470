// Stage 2 — model: pod, container and cgroup paths derived from a validated Request.
#pragma once

#include <optional>
#include <string>

#include "model/request.hpp"

namespace nriqos {

/// Kubernetes QoS class of the pod, read from its cgroup parent (kubelet's naming:
/// cgroupfs `/kubepods[/burstable|/besteffort]/pod<uid>`, systemd
/// `kubepods[-burstable|-besteffort]-pod<uid_>.slice`). Unknown when the path is not kubelet's.
enum class KubeQos { Unknown, BestEffort, Burstable, Guaranteed };
const char* kube_qos_name(KubeQos q);

/// cgroup driver form of an OCI cgroupsPath.
enum class CgroupDriver { Cgroupfs, Systemd };

/// A cgroupsPath resolved to directories relative to a hierarchy root (no leading '/').
struct CgroupPaths {
    CgroupDriver driver = CgroupDriver::Cgroupfs;
    std::string container;  ///< the sandbox's/container's own cgroup, e.g. "kubepods/burstable/pod<uid>/<id>"
    std::string pod;  ///< its parent (the pod cgroup), e.g. "kubepods/burstable/pod<uid>"
    /// Non-empty when the parent is not a cgroup of the pod's own: the hierarchy root
    /// (cgroupfs "/<id>", systemd "-.slice:prefix:name"), systemd's default "system.slice"
    /// (an empty slice), or any parent whose last component is not kubelet's pod cgroup name
    /// ("pod<uid>", "<parent>-pod<uid>.slice"): containerd's "/k8s.io/<id>" (an empty
    /// CgroupParent: crictl, kubelet --cgroups-per-qos=false), "system.slice:cri-containerd:<id>",
    /// "kubepods.slice:...". Other workloads may share such a parent. Says why; pod knobs (the
    /// sandbox's and the pod-level sums of container events) are then refused, never written there.
    std::string no_pod;
    /// The parent is the hierarchy root or systemd's default system.slice (the first two cases
    /// of no_pod): no file of it is probed for the container's own knobs.
    bool root_or_default = false;
};

/// Resolve an OCI cgroupsPath (runtime-spec config-linux.md "cgroupsPath") in either form:
///  * cgroupfs: "/kubepods/burstable/pod<uid>/<id>" (used as-is below each hierarchy root);
///  * systemd:  "slice:prefix:name" → "<expanded slice>/<prefix>-<name>.scope", where a slice
///    "a-b-c.slice" expands to "a.slice/a-b.slice/a-b-c.slice" (opencontainers/cgroups
///    systemd/common.go ExpandSlice; "-.slice" is the root slice, an empty slice means
///    "system.slice"); the unit is "<prefix>-<name>.scope" even for an empty prefix
///    ("-<name>.scope"), or <name> itself when it ends in ".slice" (getUnitName).
/// Refuses, with InputError: "..", "." and empty components, control characters, backslashes,
/// more than 32 levels, malformed slices. The result never leaves the hierarchy root.
CgroupPaths resolve_cgroups_path(const std::string& oci);

/// Kubernetes QoS class from a pod cgroup path (relative, either driver). Substring test on the
/// path components, as kubelet names them (Koordinator and nri-plugins do the same).
KubeQos kube_qos_from_path(const std::string& pod_rel);

/// cgroup hierarchy layout of a cgroup root (runc IsCgroup2UnifiedMode semantics).
enum class Layout { V1, Hybrid, V2 };
const char* layout_name(Layout l);

/// Detect the layout of `root` with statfs(2): cgroup2 magic (0x63677270) on the root → V2;
/// else a cgroup2 mount at root/unified → Hybrid; else V1. In Hybrid the controllers nri-qos
/// uses are in v1, so knobs are written as in V1.
Layout detect_layout(const std::string& root);

/// Parse "auto|v1|hybrid|v2"; auto → nullopt. Throws InputError.
std::optional<Layout> parse_layout(const std::string& s);

}  // namespace nriqos
