// The fact registry: every fact's name, scope, the knobs it may feed, what it reads, what it can
// raise and whose keys it trusts (issue #10 §1, issue #19). The vocabulary a policy is written
// in, like the knob table (model/knobs.hpp): the policy parser and the build-time compiler of the
// built-in policy check fact names against it without linking the readers. How a fact's value is
// computed for a request is facts/facts.hpp (resolve_facts; a unit test checks both lists agree).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "model/knobs.hpp"

namespace nriqos {

/// Where a fact may be used.
enum FactScope : uint8_t { kFactContainer = 1, kFactPod = 2, kFactBoth = 3 };

/// Static description of a fact (the registry; see facts.cpp and man/nri-qos.toml.5).
struct FactDef {
    const char* name;  ///< "koordinator.batch_cfs_quota"
    uint8_t scope;  ///< FactScope bits
    uint32_t knobs;  ///< bit (1 << KnobId) per knob it may feed
    const char* unit;  ///< "shares", "us", "bytes", "level", "cpus", "nodes"
    const char* reads;  ///< the annotation(s) / kernel files it reads
    const char* source;  ///< the seed system's function it reproduces (owner/repo@tag:path Function)
    const char* summary;  ///< one line: what the value is
    bool pod_sum;  ///< pod fact summed over the pod's containers: re-evaluated at container events
    bool kernel;  ///< reads kernel state (sysfs, cgroups) besides the request
    /// What the fact can raise above what the pod's Kubernetes spec gave it (FactRaise bits; 0:
    /// its value only restricts). A raise needs trust (issue #19): see trust_keys.
    uint32_t raises = 0;
    /// The pod-writable annotation keys the value comes from, comma-separated ("" = none: the
    /// fact is as trusted as the rule that chose its class). The fact is trusted for a pod when
    /// every key is declared in [guarded.annotations], or the pod's namespace is in its class's
    /// gate.namespaces.
    const char* trust_keys = "";
    /// Koordinator batch resources: koord-manager writes them only on pods whose Kubernetes QoS
    /// is BestEffort (batch-* extended resources do not count for the QoS class); any other pod
    /// gets the knob refused.
    bool besteffort_only = false;
};

/// What a fact can raise (FactDef::raises): the direction the pod's Kubernetes spec does not
/// allow, checked per request against what kubelet gave (the OCI request, the pod cgroup).
enum FactRaise : uint32_t {
    kRaiseQuotaLift = 1u << 0,  ///< a CFS quota above kubelet's (up to -1/max)
    kRaiseCpusetPin = 1u << 1,  ///< a cpuset naming more CPUs than the quota pays for
    kRaiseNumaReservation = 1u << 2,  ///< a recorded NUMA placement other pods' placements avoid
    kRaiseSharesAboveKubelet = 1u << 3,  ///< cpu.shares/weight above kubelet's
    kRaiseMemoryAbovePod = 1u << 4,  ///< a memory limit above the pod's (or a memory protection)
    kRaiseBurstAboveQuota = 1u << 5,  ///< a CFS burst above the quota
    kRaiseQosLevel = 1u << 6,  ///< an openEuler qos level above 0 (the unclassified level)
    kRaiseOomBelowKubelet = 1u << 7,  ///< an oom_score_adj below kubelet's (the OOM killer spares the pod longer)
    kRaiseMemoryProtection = 1u << 8,  ///< memory.low / memory.min above the pod cgroup's (protection kubelet did not grant)
};
/// "quota lift, cpuset pin" — the names of the bits of `raises` (for check and the docs).
std::string raise_names(uint32_t raises);

/// All facts, in documentation order (the registry: src/model/fact_table.cpp).
const std::vector<FactDef>& fact_table();
/// Look up by name; nullptr when unknown.
const FactDef* find_fact(std::string_view name);
/// "" when `fact` may feed knob `knob` in `scope` (kFactContainer or kFactPod), else a one-line
/// reason for the policy error ("fact X is a pod-level sum; use it under [classes.*.pod]").
std::string fact_usable(const FactDef& fact, KnobId knob, uint8_t scope);
/// Closest fact name to `name` (edit distance ≤ 3), or "" — for "did you mean" in policy errors.
std::string closest_fact(std::string_view name);
}  // namespace nriqos
