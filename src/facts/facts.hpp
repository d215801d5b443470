// Facts: knob values derived from the request (and, where stated, from kernel state), so that a
// policy can say what a seed system's node agent does — "cpu_shares = the shares koordlet gives
// this container's batch-cpu request" — instead of a literal (issue #10 §1).
//
// Policy syntax (man nri-qos.toml(5) "FACTS"): wherever a knob takes a value,
//     cpu_quota_us = { fact = "koordinator.batch_cfs_quota" }
//     cpu_quota_us = { fact = "koordinator.batch_cfs_quota", if_absent = "fail" }
// The value is computed per request by a small validated reader (fact_readers.hpp, numa.hpp):
//  * value   — the knob gets it (integer, "max" = -1/unlimited, or a cpuset list) and explain
//              shows the calculation ("100000 = batch-cpu limit 1000m × period 100000 / 1000");
//  * absent  — the request does not carry it (no annotation, container not listed, feature not
//              opted into): the knob is skipped with the reason, like a missing kernel file; with
//              if_absent = "fail" it is refused instead (a failure: the class's fail mode decides);
//  * error   — the carrier is malformed (bad JSON, bad quantity) or kernel state is unreadable:
//              the knob is refused with a one-line reason (a failure; fail-open or closed as the
//              class says).
// Every fact is listed in fact_table() with the knobs it may feed, its scope, the annotation or
// kernel file it reads and the function of the seed system it reproduces.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "facts/fact_state.hpp"
#include "model/fact_table.hpp"
#include "os/kernel.hpp"
#include "model/knobs.hpp"
#include "model/model.hpp"
#include "policy/policy.hpp"
#include "model/request.hpp"

namespace nriqos {

/// True when facts.cpp has a reader for `name` (every registered fact has one; a unit test checks).
bool fact_has_evaluator(std::string_view name);

/// Inputs of fact resolution for one request.
struct FactInput {
    const Request* req = nullptr;
    /// The policy's [guarded] tables (trust of the facts' annotation keys); nullptr: nothing is
    /// guarded. The class's gate.namespaces (resolve_facts' `cls`) also make a pod trusted.
    const Policy* policy = nullptr;
    KubeQos kube_qos = KubeQos::Unknown;  ///< from the cgroup parent (besteffort_only facts)
    std::optional<CgroupPaths> paths;
    Layout layout = Layout::V1;
    Kernel* kernel = nullptr;  ///< reads of the pod cgroup (its CFS quota)
    std::string cgroup_root;  ///< for the NUMA scan of the kubepods hierarchy
    std::string sysfs_root = "/sys";
    /// Where the device nodes of /dev are (rubik.blkio_limit resolves "/dev/<name>" as
    /// <dev_root>/<name>); read only, stat(2) only. Tests point it at a scratch directory.
    std::string dev_root = "/dev";
    /// kubelet's CPU manager checkpoint: CPUs held exclusively by other pods (numa.hpp; "" none).
    std::string kubelet_cpu_state = "/var/lib/kubelet/cpu_manager_state";
    bool dry_run = false;  ///< explain: compute, record nothing, take no lock
    /// What the runtime hands the hook (issue #25 §1): called with the key of a pod annotation a
    /// fact needs and the request lacks; returns "" for a plain absence (the runtime passes it:
    /// the pod does not carry it), else the reason that replaces "no <key> annotation" (detect.hpp
    /// annotation_not_passed_reason). Unset (native NRI, which passes every annotation): plain.
    std::function<std::string(const std::string&)> not_passed;
};

/// The class with its fact values resolved for this request, and what the fact layer reports.
/// A record a fact's value leaves in the fact state (a NUMA placement, a pinned cpuset), to be
/// kept (FactState::put_numa) only once the value's write landed: in the runtime's adjustment or
/// update, or written and Applied (event/pipeline.cpp keep_fact_records; issue #30 §2).
struct FactRecord {
    KnobId knob = KnobId::CpusetCpus;  ///< the container knob whose value it records
    NumaRecord rec;
};

struct FactPlan {
    ClassDef cls;  ///< fact knobs replaced by their values (absent/error ones removed)
    std::vector<KnobSetting> pod_refresh;  ///< pod knobs (pod_sum facts) to write at this container event
    std::vector<std::string> skipped;  ///< "cpu_shares: fact koordinator.batch_cpu_shares absent: <why>"
    std::vector<std::string> refused;  ///< "cpu_quota_us: fact ...: <error>" (failures), also
        ///< "cpu_quota_us: fact X refused: would lift ... (declare ...)"
    std::vector<std::string> calcs;  ///< explain: "container cpu_quota_us = 100000 = ... [fact]"
    std::vector<std::string> warnings;  ///< state-dir problems (ledger/record writes), reported, not failures
    /// Pod annotation keys facts needed that the runtime may not pass (FactInput::not_passed gave
    /// a reason): Result metadata not_passed, the record, nri_qos_annotation_not_passed_total{key}.
    std::vector<std::string> not_passed;
    /// Records of accepted values, kept by the caller only if their write landed (FactRecord); a
    /// refused value (trust rule, range, another check) never leaves one.
    std::vector<FactRecord> keep;
};

/// Resolve the facts of `cls` for `in.req`'s event:
///  * pod start (v0.1 sandbox create, RunPodSandbox) and NRI UpdatePodSandbox: the pod knobs
///    (an update recomputes them: a fact absent or in error is skipped or refused with its
///    reason, as at the start, never dropped silently), and the sandbox knobs: container-scoped
///    facts evaluated for the sandbox (pause) container — a pinned cpuset goes through the same
///    checks as a container's (numa.hpp check_pinned_cpuset) and the trust rule weighs it against
///    the pod's grant (the pause container has no CFS quota of its own: it runs inside the pod
///    cgroup's); no pin record is kept for it (the pod's containers keep theirs);
///  * container create/start/update: the container knobs, then the pod_sum pod knobs
///    (pod_refresh) after recording this container's share in the ledger;
///  * container stop/remove/delete: the container's ledger entry and NUMA record are dropped and
///    the pod_sum pod knobs re-evaluated (pod_refresh);
///  * pod stop/remove/delete: everything kept for the pod is dropped.
/// Knobs of the other scope keep their literal values; their fact knobs are removed (never used
/// at that event). `state` is the fact state of the state directory (locked here when needed).
FactPlan resolve_facts(const ClassDef& cls, const FactInput& in, FactState& state);

}  // namespace nriqos
