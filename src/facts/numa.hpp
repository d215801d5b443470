// NUMA placement from kernel state (issue #10 §2): pick one NUMA node for a container, from what
// the kernel shows at that moment, and restrict its cpuset.cpus and cpuset.mems to it.
//
// Inputs, all read at the time of the event:
//  * topology: <sysfs>/devices/system/node/online (else the node<N> directories), each node's
//    node<N>/cpulist, intersected with <sysfs>/devices/system/cpu/online; thread siblings from
//    cpu/cpu<N>/topology/thread_siblings_list (whole cores are taken first);
//  * CPUs held exclusively by other pods: the entries of kubelet's static CPU manager checkpoint
//    (--kubelet-cpu-state, default /var/lib/kubelet/cpu_manager_state; fact_readers.hpp
//    KubeletCpuState) of pods other than this one, and the exclusive, bound and pinned placements
//    nri-qos recorded in the state directory (fact_state.hpp). Nothing else: the cpusets seen in
//    cgroups are not counted, because a shared pool (Katalyst shared_cores pods, whatever their
//    Kubernetes QoS; kubelet's default set) looks like any other pinned cpuset there, and
//    Katalyst places a dedicated pod on the pool and shrinks it. A missing checkpoint holds
//    nothing when kubelet's directory exists (kubelet writes one under every policy); when that
//    directory is missing too, or the checkpoint is unreadable or malformed, kubelet's exclusive
//    CPUs are unknown and the placement is refused (fail-safe; kubelet_held_cpus).
//
// Modes (the class picks one through the fact it uses; facts.hpp):
//  * exclusive — sized from the container's CPU request (`need` CPUs): the fewest nodes none of
//    whose CPUs is held that together have `need` CPUs, at least ceil(need / CPUs per node) of
//    them, the lowest-numbered combination first; all their online CPUs, and cpuset.mems = those
//    nodes (katalyst-core pkg/agent/qrm-plugins/cpu/dynamicpolicy/policy_hint_handlers.go
//    calculateHints: minNUMAsCountNeeded from util.GetNUMANodesCountToFitCPUReq, numa_exclusive
//    counts a node with allocated CPUs as 0 available, masks iterated by size then node order,
//    the narrowest sufficient mask preferred; policy_allocation_handlers.go
//    allocateNumaBindingCPUs: all available CPUs of the hinted nodes). The socket check of
//    calculateHints (CheckNUMACrossSockets) is not reproduced. A later container of the same pod
//    gets the same nodes.
//  * bound — `need` free CPUs of one node, the node of a sibling container first, then the
//    lowest-numbered node with enough free CPUs (TakeByTopology: whole cores first). A Katalyst
//    placement with a NumaSpan of two or more nodes takes `need` free CPUs (whole cores first)
//    of the lowest-numbered combination of exactly that many nodes whose free CPUs hold them;
//    without one, a bound placement larger than one node is refused, as Katalyst refuses it
//    (calculateHints: "NUMA not exclusive binding container ... has request larger than 1 NUMA").
//  * a NumaSpan (Katalyst's cpu_enhancement numa_number / numa_ids) restricts exclusive and
//    bound placements to combinations of exactly that many nodes (exactly those nodes).
//  * shared — the free CPUs of the node with the most free CPUs (at least `need`); not held
//    against later placements (openFuyao-style NUMA affinity: locality, not exclusivity).
// cpuset.mems is the node (the nodes, for a multi-node exclusive placement). A single-node machine has one node: exclusive needs the whole machine
// free, bound and shared work as usual (mems "0").
//
// Concurrency: the caller holds FactState::lock() around place() (read held → choose → record),
// so two containers starting at once never get the same CPUs. A placement is recorded under the
// container id and returned again for its later events; records are dropped when the container
// or its pod ends, when the pod cgroup no longer exists, or when the container's cgroup no longer
// exists and the record is older than kFactRecordGraceSeconds (native NRI reports no container
// removal; a record made at CreateContainer precedes the cgroup).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "os/cpuset.hpp"
#include "facts/fact_state.hpp"
#include "model/model.hpp"

namespace nriqos {

struct NumaNode {
    unsigned id = 0;
    CpuSet cpus;  ///< online CPUs of the node
};

struct NumaTopology {
    std::vector<NumaNode> nodes;  ///< ascending id; nodes without online CPUs are left out
    CpuSet online;  ///< online CPUs
    std::vector<CpuSet> siblings;  ///< per CPU id: its thread siblings (empty: unknown)
};

/// Read the topology under `sysfs_root` (default /sys). Throws InputError on unreadable or
/// malformed files (each ≤ 64 KiB; at most 1024 nodes).
NumaTopology read_topology(const std::string& sysfs_root);

/// CPUs held exclusively by others (see the header comment).
struct HeldCpus {
    CpuSet cpus;
    std::vector<std::string> by;  ///< "4-5 (kubelet static, pod 1234abcd)" for explain, at most 8 entries
};

/// The start of every reason kubelet_held_cpus gives when it cannot tell what kubelet holds.
inline constexpr const char* kKubeletCpusUnknown = "kubelet's exclusive CPUs unknown: ";

/// CPUs kubelet's static CPU manager holds for pods other than `own_pod_uid`, from its checkpoint
/// at `path` (fact_readers.hpp KubeletCpuState; kubernetes pkg/kubelet/cm/cpumanager/state
/// checkpoint.go). Three outcomes:
///  * known, none held: `path` is "" (the operator says the node has no kubelet CPU manager);
///    the checkpoint says policyName "none" (kubelet's none policy writes one too); or the file
///    is missing while its directory (kubelet's root, /var/lib/kubelet) exists — kubelet writes
///    the checkpoint when it starts, under every policy, so a kubelet directory without it is a
///    kubelet without a CPU manager;
///  * known, held: the static policy's entries of other pods;
///  * unknown: throws InputError starting with kKubeletCpusUnknown — the file is missing and so is
///    its directory (kubelet's directory is not visible here, as in a container that does not
///    mount it: kubelet may well run the static policy), or the file cannot be read or parsed.
/// Callers refuse the placement or pin with that reason (fail closed: a pod-written cpuset must
/// never land on another pod's exclusive CPUs because the checkpoint was out of sight).
HeldCpus kubelet_held_cpus(const std::string& path, const std::string& own_pod_uid);

enum class NumaMode { Exclusive, Bound, Shared };
const char* numa_mode_name(NumaMode m);

/// A chosen placement.
struct NumaChoice {
    unsigned node = 0;  ///< the first (lowest) node
    CpuSet cpus;
    CpuSet nodes;  ///< all nodes of the placement: cpuset.mems
    std::string why;  ///< how it was chosen, for explain
    /// A new placement: the record to keep for it (FactState::put_numa), which place_numa does
    /// not write itself — the caller keeps it once the trust rule accepted the value and its
    /// cpuset write landed (facts.hpp FactPlan::keep). nullopt: the placement recorded at an
    /// earlier event of the container, or dry_run.
    std::optional<NumaRecord> record;
};

/// Katalyst's strong constraints on the nodes of a dedicated_cores placement, from the
/// katalyst.kubewharf.io/cpu_enhancement keys "katalyst.kubewharf.io/numa_number" and
/// "katalyst.kubewharf.io/numa_ids" (katalyst-api pkg/consts/qos.go
/// PodAnnotationCPUEnhancementNumaNumber / NumaIDs; katalyst-core@d8c28ea
/// pkg/util/qos/cpu_enhancement.go AnnotationsGetNUMANumber / AnnotationsGetNUMAIDs, read by
/// pkg/agent/qrm-plugins/cpu/dynamicpolicy/policy_hint_handlers.go calculateHints): a hint is
/// kept only when its node count equals `number` (0: any), or its nodes equal `ids` (non-empty
/// ids win and set number to their count). number ≥ 2 lets a non-exclusive (bound) placement
/// span nodes.
struct NumaSpan {
    unsigned number = 0;  ///< exactly this many nodes; 0: no constraint
    CpuSet ids;  ///< exactly these node ids; empty: no constraint
    bool any() const { return number != 0 || !ids.empty(); }
};

/// The pure choice (no I/O): `held` CPUs are unavailable; `prefer` is a node a sibling container
/// of the same pod already uses. Returns nullopt with `why` when no node fits.
/// `reserved` (Katalyst's reserved CPUs, katalyst_reserved_cpus) are never handed out and do not
/// count as available, but — unlike held CPUs — they do not disqualify a node for an exclusive
/// placement: katalyst-core calculateHints gives a numa_exclusive request 0 CPUs on a node only
/// when its AllocatedCPUSet is not empty, and otherwise counts GetAvailableCPUSet(reservedCPUs)
/// (the node's CPUs minus the allocated and the reserved ones); allocateNumaBindingCPUs hands out
/// those available CPUs. The nodes needed are still counted over all CPUs
/// (GetNUMANodesCountToFitCPUReq: ceil(CPUs / nodes) per node). `span` restricts exclusive and
/// bound placements (NumaSpan; the pod's other containers' node is then not preferred).
std::optional<NumaChoice> choose_numa(const NumaTopology& topo, const CpuSet& held, NumaMode mode, unsigned need, std::optional<unsigned> prefer,
                                      std::string& why, const CpuSet& reserved = CpuSet(), const NumaSpan& span = NumaSpan());

/// Katalyst's reserved CPUs given as a count (`--cpu-resource-plugin-reserved`, or the kubelet
/// reserved quantity rounded up): katalyst-core pkg/agent/qrm-plugins/cpu/util/util.go
/// GetCoresReservedForSystem → calculator TakeHTByNUMABalance — round after round over the NUMA
/// nodes in id order, one CPU of each node (its lowest free CPU id) until `count` are taken.
/// Katalyst's accumulator orders a node's CPUs by its own topology sort; on machines whose
/// thread siblings are not numbered next to each other give the list Katalyst logs ("take
/// reservedCPUs: ...") instead of the count. More than the online CPUs: all of them.
CpuSet katalyst_reserved_by_count(const NumaTopology& topo, unsigned count);

/// Inputs of a placement.
struct NumaRequest {
    std::string sysfs_root, cgroup_root;
    std::string kubelet_cpu_state;  ///< kubelet's CPU manager checkpoint ("" none)
    Layout layout = Layout::V1;
    std::string container_id, sandbox_id, pod_uid, pod_dir, ctr_dir;
    NumaMode mode = NumaMode::Exclusive;
    unsigned need = 1;  ///< CPUs the container requests (≥ 1): exclusive sizes the nodes by it
    bool dry_run = false;  ///< explain: choose, do not record or prune
    /// Katalyst placements only (settings.katalyst_reserved_cpus): the reserved CPUs as a list,
    /// or a count resolved with katalyst_reserved_by_count; see choose_numa.
    std::optional<CpuSet> reserved_cpus;
    unsigned reserved_count = 0;
    /// Katalyst dedicated_cores placements only: numa_number / numa_ids (NumaSpan).
    NumaSpan span;
};

/// Place (or return the recorded placement of) a container. The caller holds state.lock()
/// unless dry_run, and keeps it until it has put NumaChoice::record (after the writes), so that
/// concurrent events never choose the same CPUs. Throws InputError with a one-line reason when
/// nothing fits or the kernel state cannot be read.
NumaChoice place_numa(const NumaRequest& rq, FactState& state);

/// Validate a cpuset a fact pins from an annotation (koordinator.cpuset: resource-status), for
/// `rq`'s container (mode and need unused), trusted source or not. Refused (InputError, one line)
/// unless all of:
///  * it is a subset of the node's online CPUs (<sysfs>/devices/system/cpu/online);
///  * it is a subset of the effective cpuset of the pod cgroup (cgroup v1
///    cpuset/<pod>/cpuset.effective_cpus, v2 <pod>/cpuset.cpus.effective; the nearest existing
///    ancestor when the pod cgroup is not there), which the kernel would cap it to;
///  * it overlaps no CPU held exclusively by another pod (kubelet_held_cpus, and nri-qos's
///    records of other pods that reserve: NumaRecord::reserves).
/// Unreadable inputs refuse too. Records nothing (issue #30 §2: a refused pin reserved CPUs for
/// the container's life): the caller keeps pin_record once the trust rule accepted the cpuset and
/// its write landed, holding state.lock() from this check to that write. Returns how it was
/// checked, for explain.
std::string check_pinned_cpuset(const NumaRequest& rq, const CpuSet& want, FactState& state);

/// The record of a pinned cpuset `want` for `rq`'s container: mode "pin" when its source is
/// trusted (`reserves`: koord-scheduler's allocation, held against other pods) or "pin-shared"
/// (an untrusted pin the trust rule let through: the fact table's koordinator.cpuset makes no
/// reservation of its own).
NumaRecord pin_record(const NumaRequest& rq, const CpuSet& want, bool reserves);

}  // namespace nriqos
