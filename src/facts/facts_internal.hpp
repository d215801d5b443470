// Private to src/facts (issue #23): what the fact evaluators share, split out of facts.cpp.
//  * Outcome — what one evaluation gives (a value with its calculation, absent, or an error);
//  * Ctx — the per-request evaluation context: the request, the caches of parsed carriers, the
//    fact state, and the questions a reader asks about kubelet's grant and the node;
//  * the evaluators of each seed system, by file (the registry that maps a fact name to its
//    evaluator, entries() in facts.cpp, is the one place to look a fact up).
// Where things are defined:
//    facts.cpp               resolve_facts, the registry, the trust rule (fact_trust and the raise
//                            check Ctx::raise_of with Ctx::kubelet_quota / Ctx::pod_file)
//    facts_context.cpp       Outcome's constructors and the other Ctx members
//    facts_koordinator.cpp   koordinator.*
//    facts_volcano.cpp       volcano.*, rubik.* (Volcano agent and openEuler rubik)
//    facts_katalyst.cpp      katalyst.*, numa.*
// Not public API: nothing outside src/facts includes this header. Everything here is in the
// namespace nriqos::facts_internal (it was file-local to facts.cpp; a nested namespace keeps
// these generic names, Outcome, Ctx, error, q, out of nriqos).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "facts/fact_readers.hpp"
#include "facts/facts.hpp"
#include "facts/numa.hpp"

namespace nriqos {
namespace facts_internal {

constexpr const char* kExtRes = "node.koordinator.sh/extended-resource-spec";

/// What one evaluation gives.
struct Outcome {
    enum S { Value, Absent, Error } s = Absent;
    KnobValue v;
    std::string calc;  ///< Value: how it was computed
    std::string why;  ///< Absent/Error: the reason
    std::string from;  ///< where it was read ("container \"app\"")
    std::string needs_cpuset;  ///< Value: the cpuset that must be applied first (KnobSetting::needs_cpuset)
    /// Value: the reader's proof that it does not raise above kubelet's grant ("2 CPUs × 100000
    /// ≤ the container's CFS quota 200000"), which the generic trust check then accepts.
    std::string no_raise;
    bool untrusted = false;  ///< Error: refused by the trust rule (the line says "refused: ...")
    /// Absent because this pod annotation is not in the request (the runtime may not pass it:
    /// FactInput::not_passed decides what the reason says).
    std::string missing_key;
};

// Outcome constructors (facts_context.cpp).
Outcome value_int(int64_t n, std::string calc);
Outcome value_max(std::string calc);
Outcome value_text(std::string t, std::string calc);
Outcome absent(std::string why);
/// Absent: the request has no annotation `key` ("no <key> annotation<tail>").
Outcome absent_ann(const char* key, const std::string& tail = "");
Outcome error(std::string why);

/// `s` in double quotes for a one-line reason: its first 64 bytes (then "..."), control
/// characters and '"' shown as '?'.
std::string q(const std::string& s);

/// Per-request evaluation context: the request, caches of parsed carriers, the fact state.
struct Ctx {
    const FactInput& in;
    FactState& st;
    const Request& r;
    const std::vector<KnobSetting>* ctr_knobs = nullptr;  ///< container knobs resolved so far
    const std::vector<KnobSetting>* pod_knobs = nullptr;  ///< pod knobs (literal part)
    const ClassDef* cls = nullptr;  ///< the class being resolved (its pod_cpu_weight_formula)
    bool record = false;  ///< container start event, not dry run
    bool ledger_dropped = false;  ///< container end: own entry removed
    std::optional<int64_t> own_burst;  ///< this container's burst (for the pod sum)
    bool own_burst_known = false;
    std::vector<std::string> warnings;
    /// Trust of the fact being evaluated (resolve_facts sets them before each reader runs).
    bool trusted = true;
    uint32_t raises = 0;  ///< its FactDef::raises
    std::string untrusted_keys;  ///< its undeclared annotation keys, for the refusal
    int64_t param = 0;  ///< the knob's fact parameter (KnobValue::num >> 4; rubik.cache_limit: default level)

    // caches
    bool ers_read = false;
    ExtendedResourceSpec ers;
    std::string ers_error;
    bool numa_done = false;
    std::optional<NumaChoice> numa;
    std::string numa_mode, numa_error, numa_absent;
    bool pin_done = false;
    std::string pin_error, pin_how;
    /// The record this request's pin or NUMA placement would keep (numa.hpp pin_record,
    /// NumaChoice::record): resolve_facts hands it to FactPlan::keep only with an accepted
    /// cpuset value (issue #30 §2). `pending_pin`: a pin, whose mode follows the trust rule.
    std::optional<NumaRecord> pending;
    bool pending_pin = false, pending_kept = false;

    /// The NumaRequest fields of this request (mode and need left to the caller).
    NumaRequest numa_request() const;

    /// Validate an annotation's cpuset for this container (numa.hpp check_pinned_cpuset; once
    /// per request): "" when it may be pinned, else the one-line reason it is refused.
    std::string pin_check(const std::string& set);

    const std::string* ann(const char* k) const {
        auto it = r.annotations.find(k);
        return it == r.annotations.end() ? nullptr : &it->second;
    }
    const std::string* label_or_ann(const char* k) const {
        if (auto a = ann(k)) return a;
        auto it = r.labels.find(k);
        return it == r.labels.end() ? nullptr : &it->second;
    }
    std::string lock() { return in.dry_run ? std::string() : st.lock(); }

    /// The parsed extended-resource-spec, or an Outcome saying why not.
    std::optional<Outcome> ers_problem();

    /// This container's entry in the extended-resource-spec.
    const BatchResources* ers_container(Outcome& why);

    /// OCI (or class) CFS quota of the container: the class's own cpu_quota_us when it sets one
    /// (issue #9 §1: percentages and derived values follow the effective value), else OCI.
    /// nullopt: no quota (unlimited). `how` says where it came from.
    std::optional<int64_t> container_quota(std::string& how) const;

    int64_t container_period() const;

    /// The pod cgroup's CFS quota and period as the kernel shows them (or as the class sets
    /// them). nullopt quota: unlimited. Error text in `err` when unreadable.
    std::optional<int64_t> pod_quota(int64_t& period, std::string& how, std::string& err) const;

    /// The trust rule's refusal: `what` the value would do, and the key(s) to declare.
    Outcome untrusted_refusal(const std::string& what) const;

    // The trust rule's raise check: these are defined in facts.cpp.

    /// What kubelet gave: the CFS quota of the container (the OCI request) or of the pod (its
    /// cgroup as the kernel shows it, whatever the class sets). nullopt: unlimited; `err` when
    /// the pod's is unreadable.
    std::optional<int64_t> kubelet_quota(uint8_t scope, int64_t& period, std::string& how, std::string& err) const;

    /// A pod cgroup file as an integer (nullopt: unreadable or "max" → `max` true).
    std::optional<int64_t> pod_file(const std::string& v1, const std::string& v2, bool& max) const;

    /// "" when value `v` of a fact fed to knob `id` at `scope` does not raise above what kubelet
    /// gave the pod (then `proof` says why); else what it would raise, for the refusal.
    std::string raise_of(KnobId id, uint8_t scope, const KnobValue& v, std::string& proof) const;

    // raise_of's checks by kind of knob (facts.cpp), each with raise_of's contract ("" and
    // `proof` when `v` stays within kubelet's grant, else what it would raise):
    /// cpu_cfs_quota_us / cpu_burst_us: at most kubelet's CFS quota of `scope` (none: a quota
    /// only restricts; a burst needs a quota to stay under).
    std::string raise_of_cfs(KnobId id, uint8_t scope, const KnobValue& v, std::string& proof) const;
    /// cpu_shares: at most kubelet's cpu.shares (the container's OCI value; the pod cgroup's
    /// cpu.shares, or on cgroup v2 its cpu.weight against the weight `v` would be written as).
    std::string raise_of_cpu_shares(uint8_t scope, const KnobValue& v, std::string& proof) const;
    /// memory limit, high, swap, soft limit: at most the container's OCI memory limit or the
    /// pod cgroup's memory.max / limit_in_bytes (unlimited: a limit only restricts).
    std::string raise_of_memory_limit(KnobId id, uint8_t scope, const KnobValue& v, std::string& proof) const;
    /// cpuset_cpus: the pinned CPUs × period within kubelet's CFS quota of `scope`.
    std::string raise_of_cpuset_cpus(uint8_t scope, const KnobValue& v, std::string& proof) const;
    /// memory.low / memory.min: at most the pod cgroup's (cgroup v2 only; 0 always passes).
    std::string raise_of_memory_protection(KnobId id, const KnobValue& v, std::string& proof) const;
    /// oom_score_adj: not below kubelet's (the process's value, else its QoS class's bound).
    std::string raise_of_oom_score_adj(uint8_t scope, const KnobValue& v, std::string& proof) const;

    unsigned online_cpus(std::string& err) const;

    /// Whole CPUs the container requests, for the NUMA placements that reserve CPUs: the request
    /// is what the scheduler accounted (a limit can be far above it, and a reservation sized by
    /// the limit would hold CPUs nobody paid for). kubelet writes the request as CPU shares
    /// (MilliCPUToShares: milli × 1024 / 1000), so CPUs = ceil(shares / 1024); Katalyst allocates
    /// integer CPUs of the request (policy_hint_handlers.go calculateHints takes the request).
    /// 0 with `how` when there is no request (BestEffort: shares 2, or no shares).
    unsigned cpus_requested(std::string& how) const;

    /// Whole CPUs the container asks for: ceil(quota / period) with a quota, else
    /// ceil(shares / 1024), at least 1 (Katalyst allocates integer CPUs of the request).
    unsigned cpus_needed(std::string& how) const;

    /// The container's NUMA placement in `mode` (computed once per request).
    /// `katalyst`: a Katalyst placement (settings.katalyst_reserved_cpus apply); `span`: its
    /// numa_number / numa_ids (numa.hpp NumaSpan).
    Outcome numa_place(NumaMode mode, bool mems, const std::string& because, bool katalyst = false, const NumaSpan& span = NumaSpan());
};

// ---- the evaluators: one per fact of model/fact_table.hpp (the registry, entries() in facts.cpp) --
// An evaluator computes the fact for the context's request at `scope` (kFactContainer, kFactPod).

// facts_koordinator.cpp
Outcome koord_shares(Ctx& c, uint8_t);
Outcome koord_quota(Ctx& c, uint8_t);
Outcome koord_memory(Ctx& c, uint8_t);
Outcome koord_pod_shares(Ctx& c, uint8_t);
Outcome koord_pod_quota(Ctx& c, uint8_t);
Outcome koord_pod_memory(Ctx& c, uint8_t);
Outcome koord_cpuset(Ctx& c, uint8_t);
Outcome koord_cpuset_quota(Ctx& c, uint8_t scope);
Outcome koord_oom_score_adj(Ctx& c, uint8_t);

// facts_volcano.cpp
Outcome volcano_level(Ctx& c, uint8_t);
Outcome volcano_mem_level(Ctx& c, uint8_t s);
Outcome volcano_memory_high(Ctx& c, uint8_t);
Outcome volcano_memory_low(Ctx& c, uint8_t);
Outcome volcano_memory_min(Ctx& c, uint8_t);
Outcome rubik_level(Ctx& c, uint8_t);
Outcome rubik_cache_limit(Ctx& c, uint8_t);
Outcome rubik_blkio_limit(Ctx& c, uint8_t);
Outcome burst_container(Ctx& c, uint8_t);  ///< resolve_facts records its value for the pod sum
Outcome burst_pod(Ctx& c, uint8_t);

// facts_katalyst.cpp
Outcome katalyst_burst(Ctx& c, uint8_t);
Outcome katalyst_cpus(Ctx& c, uint8_t);
Outcome katalyst_mems(Ctx& c, uint8_t);
Outcome numa_excl_cpus(Ctx& c, uint8_t);
Outcome numa_excl_mems(Ctx& c, uint8_t);
Outcome numa_bound_cpus(Ctx& c, uint8_t);
Outcome numa_bound_mems(Ctx& c, uint8_t);
Outcome numa_shared_cpus(Ctx& c, uint8_t);
Outcome numa_shared_mems(Ctx& c, uint8_t);

}  // namespace facts_internal
}  // namespace nriqos
