// NUMA placement from kernel state (issue #10 §2): pick one NUMA node for a container, from what
// the kernel shows at that moment, and restrict its cpuset.cpus and cpuset.mems to it.
//
// Inputs, all read at the time of the event:
//  * topology: <sysfs>/devices/system/node/online (else the node<N> directories), each node's
//    node<N>/cpulist, intersected with <sysfs>/devices/system/cpu/online; thread siblings from
//    cpu/cpu<N>/topology/thread_siblings_list (whole cores are taken first);
//  * CPUs held by others: the cpuset.cpus of every cgroup under the pod's kubepods hierarchy
//    (cgroup v1: the cpuset controller; v2: the unified tree) that is a strict subset of the
//    online CPUs — kubelet's static CPU manager, Koordinator LSE/LSR, Katalyst, another bound pod —
//    minus the CPUs of the shared pool, which is what Burstable/BestEffort containers carry
//    (kubelet never gives those exclusive CPUs, and its static policy puts them on exactly the
//    shared pool); the pod's own cgroups are left out. Plus the placements nri-qos recorded in
//    the state directory (fact_state.hpp) that the runtime has not written yet.
//    On a node with the static CPU manager and no Burstable/BestEffort container the shared pool
//    cannot be told apart from an exclusive set: it then counts as held (never hands out a CPU
//    that may be taken; the placement may fail instead).
//
// Modes (the class picks one through the fact it uses; facts.hpp):
//  * exclusive — the lowest-numbered node none of whose CPUs is held; all its online CPUs
//    (katalyst-core pkg/agent/qrm-plugins/cpu/dynamicpolicy/policy_hint_handlers.go
//    calculateHints: numa_exclusive skips nodes with allocated CPUs; policy_allocation_handlers.go
//    allocateNumaBindingCPUs: all available CPUs of the node). A later container of the same pod
//    gets the same node.
//  * bound — `need` free CPUs of one node, the node of a sibling container first, then the
//    lowest-numbered node with enough free CPUs (TakeByTopology: whole cores first).
//  * shared — the free CPUs of the node with the most free CPUs (at least `need`); not held
//    against later placements (openFuyao-style NUMA affinity: locality, not exclusivity).
// cpuset.mems is the node. A single-node machine has one node: exclusive needs the whole machine
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

#include "cpuset.hpp"
#include "fact_state.hpp"
#include "model.hpp"

namespace nriqos {

struct NumaNode {
    unsigned id = 0;
    CpuSet cpus;  ///< online CPUs of the node
};

struct NumaTopology {
    std::vector<NumaNode> nodes;  ///< ascending id; nodes without online CPUs are left out
    CpuSet online;                ///< online CPUs
    std::vector<CpuSet> siblings; ///< per CPU id: its thread siblings (empty: unknown)
};

/// Read the topology under `sysfs_root` (default /sys). Throws InputError on unreadable or
/// malformed files (each ≤ 64 KiB; at most 1024 nodes).
NumaTopology read_topology(const std::string& sysfs_root);

/// What the cgroup scan found.
struct HeldCpus {
    CpuSet cpus;                    ///< held by others
    CpuSet pool;                    ///< shared pool seen on Burstable/BestEffort containers
    std::vector<std::string> by;    ///< "1 (kubepods/pod…/abc)" for explain, at most 8 entries
    unsigned scanned = 0;           ///< cgroup directories read
};

/// Scan the kubepods hierarchy of `pod_dir` (its first path component: "kubepods",
/// "kubepods.slice", ...) below `cgroup_root` for cpusets held by others; `pod_dir` itself and
/// its children are skipped. Depth ≤ 4, at most 16384 directories (more: InputError).
HeldCpus scan_held_cpus(const std::string& cgroup_root, Layout layout, const std::string& pod_dir, const CpuSet& online);

enum class NumaMode { Exclusive, Bound, Shared };
const char* numa_mode_name(NumaMode m);

/// A chosen placement.
struct NumaChoice {
    unsigned node = 0;
    CpuSet cpus;
    std::string why;  ///< how it was chosen, for explain
};

/// The pure choice (no I/O): `held` CPUs are unavailable; `prefer` is a node a sibling container
/// of the same pod already uses. Returns nullopt with `why` when no node fits.
std::optional<NumaChoice> choose_numa(const NumaTopology& topo, const CpuSet& held, NumaMode mode, unsigned need,
                                      std::optional<unsigned> prefer, std::string& why);

/// Inputs of a placement.
struct NumaRequest {
    std::string sysfs_root, cgroup_root;
    Layout layout = Layout::V1;
    std::string container_id, sandbox_id, pod_dir, ctr_dir;
    NumaMode mode = NumaMode::Exclusive;
    unsigned need = 1;   ///< CPUs for bound/shared (≥ 1)
    bool dry_run = false;  ///< explain: choose, do not record or prune
};

/// Place (or return the recorded placement of) a container. The caller holds state.lock()
/// unless dry_run. Throws InputError with a one-line reason when nothing fits or the kernel
/// state cannot be read.
NumaChoice place_numa(const NumaRequest& rq, FactState& state);

}  // namespace nriqos
