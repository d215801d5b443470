// Stage 4 — adjustment: turn a Decision into abstract knob settings resolved for this request
// (percentages of the request's own OCI values, cgroup v1/v2 file and value), and into the NRI
// ContainerAdjustment those settings correspond to.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "event/classify.hpp"
#include "os/kernel.hpp"
#include "model/model.hpp"

namespace nriqos {

/// One kernel file write of the plan, and (after the cgroup sink ran) its outcome.
struct Write {
    std::string knob;  ///< policy key ("cpu_shares", "raw:cpu.bvt_warp_ns")
    KnobId id = KnobId::Raw;
    std::string scope;  ///< "container" or "pod"
    Root root = Root::Cgroup;
    std::string rel;  ///< path below the root, e.g. "cpu/kubepods/besteffort/pod1/abc/cpu.shares"
    std::string value;  ///< bytes written, e.g. "2", "max 100000", "-1"
    enum Status { Planned, Applied, Skipped, Failed } status = Planned;
    std::string reason;  ///< why Skipped/Failed
    std::string note;  ///< how the write was derived or sequenced ("implied by memory_limit = max (runc)",
        ///< "written before memory.limit_in_bytes (runc setMemoryAndSwap)", ...)
    int seq = 0;  ///< 1-based position in the order the sink actually wrote (0: not written)
    /// Written only once the container's cpuset.cpus holds this cpuset, read back from the kernel
    /// (KnobSetting::needs_cpuset: a quota lift the cpuset pays for); else Failed with
    /// "cpuset not applied: quota kept (...)". "" for every other write.
    std::string needs_cpuset;
    /// cgroup v2 cpu.weight written for a cpu_shares knob: the shares it was converted from
    /// (0 otherwise); `status` names the scale of a drifted weight with it. Not printed.
    uint64_t from_shares = 0;
    /// systemd cgroup driver, cgroup v2: what became of the unit property this write has
    /// (systemd_unit.hpp set_systemd_properties): "applied: CPUWeight=1 on <unit>", "failed: ...",
    /// "skipped: <why>"; "" on the cgroupfs driver and for writes not of a cgroup.
    std::string systemd;
    std::string nri_ptr;  ///< JSON pointer of the NRI ContainerAdjustment field it corresponds to ("" none)
    nlohmann::json nri_value;
};

/// A group of writes the cgroup sink applies together, because the kernel validates one file
/// against the current value of another. The orders are runc's (opencontainers/cgroups):
///  * Single: one write.
///  * MemorySwap (cgroup v1; fs/memory.go setMemoryAndSwap): w = {memory.limit_in_bytes,
///    memory.memsw.limit_in_bytes} of one cgroup. The kernel keeps limit <= memsw, so the sink
///    reads the current memory.limit_in_bytes and writes memsw first when the new memsw is -1 or
///    above it (raising both), else the limit first (lowering).
///  * Cpu (fs/cpu.go Set, fs2/cpu.go setCPU): the cpu controller files of one cgroup, in plan
///    order (shares/weight, period, quota, burst, idle; cgroup v2: cpu.weight, cpu.max,
///    cpu.max.burst, cpu.idle). The kernel checks a period or burst against the current quota
///    (and the parent's), and a quota against the current burst; a write it refuses with EINVAL
///    is retried after the others, until a pass makes no progress.
struct Step {
    enum Kind { Single, MemorySwap, Cpu } kind = Single;
    std::vector<size_t> w;  ///< indices into Plan::writes, in plan order
};

/// One (OCI cpu.shares, cgroup v2 cpu.weight) pair seen on the node: evidence of the formula the
/// runtime converted with, when the runtime wrote that weight from those shares.
struct WeightPair {
    uint64_t shares = 0;  ///< OCI linux.resources.cpu.shares (2..262144; 0: none)
    uint64_t weight = 0;  ///< cpu.weight read from the kernel (1..10000)
    std::string what;  ///< whose: "container's own", "pod sandbox 1a2b3c4d5e6f", "sibling container 1a2b3c4d5e6f"
};

/// The cpu.shares → cpu.weight formula of one event's cgroup v2 writes, and why (one line, for
/// the Result metadata cpu_weight_formula, the record, explain and the writes' notes):
///   "linear: container's own cpu.weight 20 = linear of OCI shares 512".
struct WeightChoice {
    WeightFormula formula = WeightFormula::LogQuadratic;  ///< never Auto
    std::string why;
    std::string text() const { return std::string(weight_formula_name(formula)) + ": " + why; }
};

/// settings.cpu_weight_formula = "auto" (issue #24): the formula the node's runtime uses, from
/// the first evidence that decides, in this order —
///  1. `own`: the request's OCI shares and the cpu.weight the runtime wrote for that container
///     (or sandbox) — when exactly one formula maps the one to the other (weight_fit); `own_none`
///     says why there is no such pair ("" = nothing to say);
///  2. `siblings()` (called only when 1 decides nothing): the pod-level pairs — the pod's sandbox
///     (pause container) and its other containers, as recorded in the state dir, each with the
///     weight runc wrote for it (replay.hpp sibling_weight_pairs); they decide when at least one
///     fits one formula and none fits the other. The pod cgroup's own weight is not used: kubelet
///     writes it with its own vendored converter (not runc's), and the pod's shares would come
///     from an annotation a pod author can pass through containerd's allow-list;
///  3. `runtime()`: the runtime's version, as probed and cached (nullopt: never probed);
///  4. else log-quadratic (runc >= 1.3.2, crun >= 1.23, Kubernetes >= 1.35).
/// A pair that fits both formulas or neither is no evidence, and the reason says so.
WeightChoice decide_weight_formula(const std::optional<WeightPair>& own, const std::string& own_none,
                                   const std::function<std::vector<WeightPair>()>& siblings,
                                   const std::function<std::optional<RuntimeFormula>()>& runtime);

/// Everything nri-qos decided for one request.
struct Plan {
    Decision decision;
    KubeQos kube_qos = KubeQos::Unknown;
    Layout layout = Layout::V1;
    CgroupDriver driver = CgroupDriver::Cgroupfs;  ///< of the request's cgroupsPath
    std::string nri_api;  ///< native NRI: "0.6" or "0.8+" (what the runtime can take)
    std::vector<Write> writes;  ///< direct kernel writes, in plan order
    std::vector<Step> steps;  ///< how the sink applies `writes` (each write in one step);
        ///< empty: one by one in order
    nlohmann::json adjustment;  ///< NRI Go JSON ContainerAdjustment (null when none)
    nlohmann::json update;  ///< NRI Go JSON LinuxResources for UpdateContainer (null when none)
    /// Process knobs (is_process_knob) put into the CreateContainer adjustment, for the runtime to
    /// apply: "sched_policy=idle (NRI scheduler SCHED_IDLE)" — explain's "runtime:" lines and the
    /// record's `runtime`; the other paths are `skipped` with the reason.
    std::vector<std::string> via_runtime;
    std::vector<std::string> skipped;  ///< knobs not applicable here, with the reason ("memory_low: no cgroup v1 file")
    std::vector<std::string> refused;  ///< knobs the class sets that cannot be applied to this request, with the
        ///< reason ("oom_score_adj: no pid in the request"): failures, like a failed write
    /// A cgroup v2 cpu.shares write was converted to cpu.weight: the formula and why
    /// (WeightChoice::text()); "" when no conversion was planned.
    std::string weight_formula;
    /// Pod annotation keys the class's facts needed that the runtime does not pass to this hook
    /// (facts.hpp FactPlan::not_passed; issue #25 §1): Result metadata not_passed, the record's
    /// not_passed (level warn), nri_qos_annotation_not_passed_total{key}.
    std::vector<std::string> not_passed;
};

/// Inputs the plan builder needs besides the decision.
struct PlanInput {
    const Request* req = nullptr;
    const Policy* policy = nullptr;
    Decision decision;
    KubeQos kube_qos = KubeQos::Unknown;
    Layout layout = Layout::V1;
    std::optional<CgroupPaths> paths;  ///< absent when the request has no cgroupsPath
    Kernel* kernel = nullptr;  ///< for reads the plan depends on (cpu.max on v2, file probes)
    /// Pod knobs to write at a container event: pod-level sums over the pod's containers that
    /// change as containers start and stop (facts.hpp FactPlan::pod_refresh), already resolved.
    std::vector<KnobSetting> pod_refresh;
    /// settings.cpu_weight_formula = "auto" (decide_weight_formula): the runtime probe's cached
    /// result (nullopt: never probed), and the pod's other containers' (shares, weight) pairs
    /// (each called at most once, only when the evidence before it decided nothing; empty: none).
    std::function<std::optional<RuntimeFormula>()> runtime_formula;
    std::function<std::vector<WeightPair>()> sibling_weights;
    /// false for replays (status, reconcile): the container's own cpu.weight is the value being
    /// checked (nri-qos may have written it), so it is no evidence of the runtime's formula.
    bool own_weight_evidence = true;
};

/// Build the plan for the request's event:
///  * v0.1 create/update of a container: the class's container knobs, written directly;
///  * v0.1 create of a sandbox, NRI RunPodSandbox: the class's pod knobs on the pod cgroup;
///  * NRI CreateContainer: knobs the runtime can apply go into `adjustment` (OCI spec), the rest
///    wait for StartContainer, where they are written directly;
///  * NRI UpdateContainer: the class's resource knobs again, as `update`;
///  * delete/stop/remove/pause/resume: nothing.
/// A percentage ("N%") is taken of the class's own value of its base knob when the class sets it
/// (cpu_burst_us of cpu_quota_us, memory_* of memory_limit), else of the request's OCI value.
/// Knobs that cannot be applied to this request (no pid, no cgroupsPath, pod knobs for a sandbox
/// without a pod cgroup) go to `refused`; `steps` groups the writes the sink must sequence.
Plan build_plan(const PlanInput& in);

/// settings.leave_to_others: remove from `cls` (a class's copy) the container and pod knobs
/// another NRI plugin owns (policy.hpp LeftField), before its facts are resolved — a fact for a
/// field nri-qos leaves is never computed, so it can neither fail nor refuse the container.
/// Returns one skipped line per knob removed: "cpu_shares: left to koordlet
/// (settings.leave_to_others: cpu.shares)" ("pod:" before a pod knob), for Plan::skipped.
/// build_plan skips such knobs the same way when they reach it (replays, explain).
std::vector<std::string> leave_to_others(ClassDef& cls, const Policy& p);

/// True for a native StartContainer / PostUpdateContainer: the container's resources in the
/// request are the runtime's, which already hold nri-qos's adjustment (CreateContainer) or update
/// (UpdateContainer) — containerd reports the container's OCI spec as it was created/updated.
bool resources_adjusted(const Request& r);

/// For such a request (resources_adjusted): a percentage container knob the runtime applied from
/// the adjustment — cpu_shares, cpu_quota_us, memory_limit; pids_max on NRI 0.8+ (the fields of
/// nri_capable that are their own percentage base) — becomes the request's value of that field
/// (the value in force: the percentage was taken at CreateContainer/UpdateContainer of an OCI
/// value the request no longer shows; taking it again would compound: 50 % of 50 %). Percentages
/// based on it (cpu_burst_us = "100%", memory_high = "90%") then follow the value in force. The
/// knob's note says so. A field absent from the request leaves the percentage (skipped, as ever).
/// Applied before the facts are resolved (a derived fact, the burst, follows it too), by the hook
/// at those events and by the replay (status, reconcile, explain --container) of their records.
/// Returns whether a knob changed.
bool settle_adjusted_percentages(ClassDef& cls, const Request& r);

/// v0.1 mode: the NRI-shaped view of the direct writes that were Applied (or, before the sink
/// ran, Planned), for the Result's "adjustment" key. Leaves native-NRI adjustments alone.
void finalize_adjustment(Plan& plan);

/// NRI API level of a runtime, from ConfigureRequest runtime_name/runtime_version:
/// containerd 1.7.0–1.7.25 vendor NRI v0.6.x (no oom_score_adj, no pids in adjustments);
/// 1.7.26+ and 2.x vendor v0.8+. Unknown runtimes (iSulad supports API 0.6.1) → "0.6".
std::string nri_api_level(const std::string& runtime_name, const std::string& runtime_version);

/// The NRI minor version a runtime speaks, from ConfigureRequest runtime_name/runtime_version:
/// the containerd/nri module each containerd release requires in its go.mod — 1.7.0-1.7.25: 6,
/// 1.7.26+, 2.0, 2.1: 8, 2.2.0: 10, 2.2.1+: 11, 2.3 and later: 12. Other runtimes (iSulad: API
/// 0.6.1) and unparsable versions: 6.
int nri_api_minor(const std::string& runtime_name, const std::string& runtime_version);

/// The LinuxContainerAdjustment field that carries a process knob (is_process_knob) and the NRI
/// minor version that added it (containerd/nri pkg/api/api.proto: io_priority = 5 in v0.10.0,
/// scheduler = 10 in v0.11.0, memory_policy = 12 in v0.12.0); nullptr (min 0) for other knobs.
const char* process_knob_field(KnobId id, int& min_nri);

}  // namespace nriqos
