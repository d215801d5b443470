// Fact resolution (facts.hpp resolve_facts; issue #23: the evaluators are in the files of their
// seed system, facts_koordinator.cpp, facts_volcano.cpp, facts_katalyst.cpp, their shared context
// in facts_context.cpp, all declared in facts_internal.hpp). Here: the registry of evaluators
// (entries(): fact name → evaluator and phase), the trust rule (fact_trust, and the raise check
// Ctx::raise_of against what kubelet granted), and resolve_facts — which knobs are resolved at
// which event, the checks every value passes (BestEffort-only facts, trust, the knob's range),
// the ledger of pod sums and the NUMA records kept and dropped, and the FactPlan reported.
#include "facts/facts.hpp"

#include <algorithm>
#include <stdexcept>

#include "policy/glob.hpp"
#include "os/cpuset.hpp"
#include "facts/facts_internal.hpp"

namespace nriqos {

using namespace facts_internal;

namespace {

// Events whose container knobs are planned with the class's facts resolved. PostUpdateContainer
// too: it writes what StartContainer writes on the updated resources (adjust.cpp build_plan),
// which for a knob that is no NRI field (the CFS burst) is where a resize's recomputed value is
// written at all (UpdateContainer leaves it there: the quota must be in force first).
bool is_container_start(Event e, bool sandbox) {
    switch (e) {
        case Event::Create:
        case Event::Update: return !sandbox;
        case Event::CreateContainer:
        case Event::StartContainer:
        case Event::UpdateContainer:
        case Event::PostUpdateContainer: return true;
        case Event::Synchronize:
        case Event::SynchronizeLate: return !sandbox;  // an existing container, evaluated like an update
        default: return false;
    }
}
bool is_container_end(Event e, bool sandbox) {
    switch (e) {
        case Event::Delete: return !sandbox;
        case Event::StopContainer:
        case Event::RemoveContainer: return true;
        default: return false;
    }
}
bool is_pod_start(Event e, bool sandbox) {
    // Synchronize of a pod: all its pod knobs, as at RunPodSandbox
    return (e == Event::Create && sandbox) || e == Event::RunPodSandbox || ((e == Event::Synchronize || e == Event::SynchronizeLate) && sandbox);
}
bool is_pod_end(Event e, bool sandbox) { return (e == Event::Delete && sandbox) || e == Event::StopPodSandbox || e == Event::RemovePodSandbox; }

using EvalFn = Outcome (*)(Ctx&, uint8_t scope);

struct Entry {
    const char* name;  ///< a fact of fact_table()
    EvalFn fn;
    int phase;  ///< 1: needs the class's other container knobs resolved first (effective quota)
};

// ---- the registry ---------------------------------------------------------------------------

/// Evaluator of each fact of the registry (fact_table.cpp), and its phase.
const std::vector<Entry>& entries() {
    static const std::vector<Entry> e = {
        {"koordinator.batch_cpu_shares", koord_shares, 0},
        {"koordinator.batch_cfs_quota", koord_quota, 0},
        {"koordinator.batch_memory_limit", koord_memory, 0},
        {"koordinator.pod_batch_cpu_shares", koord_pod_shares, 0},
        {"koordinator.pod_batch_cfs_quota", koord_pod_quota, 0},
        {"koordinator.pod_batch_memory_limit", koord_pod_memory, 0},
        {"koordinator.cpuset", koord_cpuset, 0},
        {"koordinator.cpuset_quota", koord_cpuset_quota, 0},
        {"volcano.qos_level", volcano_level, 0},
        {"volcano.memory_qos_level", volcano_mem_level, 0},
        {"volcano.memory_high", volcano_memory_high, 0},
        {"volcano.memory_low", volcano_memory_low, 0},
        {"volcano.memory_min", volcano_memory_min, 0},
        {"koordinator.oom_score_adj", koord_oom_score_adj, 0},
        {"rubik.qos_level", rubik_level, 0},
        {"rubik.cache_limit", rubik_cache_limit, 0},
        {"rubik.blkio_limit", rubik_blkio_limit, 0},
        {"volcano.cpu_burst_us", burst_container, 1},
        {"volcano.pod_cpu_burst_us", burst_pod, 1},
        {"katalyst.numa_cpus", katalyst_cpus, 1},
        {"katalyst.numa_mems", katalyst_mems, 1},
        {"katalyst.cpu_burst_us", katalyst_burst, 1},
        {"numa.exclusive_cpus", numa_excl_cpus, 1},
        {"numa.exclusive_mems", numa_excl_mems, 1},
        {"numa.bound_cpus", numa_bound_cpus, 1},
        {"numa.bound_mems", numa_bound_mems, 1},
        {"numa.shared_cpus", numa_shared_cpus, 1},
        {"numa.shared_mems", numa_shared_mems, 1},
    };
    return e;
}

const Entry* find_entry(std::string_view name) {
    for (const auto& e : entries())
        if (name == e.name) return &e;
    return nullptr;
}

/// The name explain shows for a fact value: the cgroup v1 file (its unit is the fact's: shares,
/// µs, bytes; on cgroup v2 the write line shows the converted cpu.weight / cpu.max), else the
/// v2 file, else the policy key.
std::string file_of(KnobId id) {
    if (id == KnobId::BlkioThrottle) return "blkio.throttle.*_device / io.max";
    const KnobDef& d = knob_def(id);
    return d.v1_file ? d.v1_file : d.v2_file ? d.v2_file : d.key;
}

std::string shown(const KnobValue& v) {
    switch (v.kind) {
        case KnobValue::Max: return "max";
        case KnobValue::Text: return v.text;
        default: return std::to_string(v.num);
    }
}

/// Whether a fact's value may raise for this pod (issue #19): trusted when it reads no
/// pod-written key, when the pod's namespace is in its class's gate.namespaces, or when every
/// annotation key it reads is declared in [guarded.annotations].
struct Trust {
    bool trusted = false;
    std::string why;  ///< trusted: the reason ("annotation X is guarded (note)")
    std::string undeclared;  ///< untrusted: the keys not declared, "a, b"
};
Trust fact_trust(const FactDef& f, const ClassDef& cls, const FactInput& in) {
    Trust t;
    if (!*f.trust_keys) {
        t.trusted = true;
        t.why = "reads no pod-written key";
        return t;
    }
    const Request& r = *in.req;
    if (cls.gate.enabled)
        for (const auto& g : cls.gate.namespaces)
            if (glob_match(g, r.pod_namespace)) {
                t.trusted = true;
                t.why = "namespace \"" + r.pod_namespace + "\" is in classes." + cls.name + ".gate.namespaces";
                return t;
            }
    std::string keys = f.trust_keys, guarded;
    for (size_t at = 0; at <= keys.size();) {
        size_t comma = keys.find(',', at);
        std::string k = keys.substr(at, comma == std::string::npos ? std::string::npos : comma - at);
        at = comma == std::string::npos ? keys.size() + 1 : comma + 1;
        const std::string* note = in.policy ? guarded_note(in.policy->guarded_annotations, k) : nullptr;
        if (note) guarded += (guarded.empty() ? "" : ", ") + k + " is guarded (" + *note + ")";
        else t.undeclared += (t.undeclared.empty() ? "" : ", ") + k;
    }
    t.trusted = t.undeclared.empty();
    t.why = "annotation " + guarded;
    return t;
}

/// A raise check's value as its messages show it: "max" or the integer (Ctx::raise_of).
std::string raise_num(const KnobValue& v) { return v.kind == KnobValue::Max ? std::string("max") : std::to_string(v.num); }

}  // namespace

// ---- the trust rule's raise check: what kubelet granted the container and the pod ---------

namespace facts_internal {

std::optional<int64_t> Ctx::kubelet_quota(uint8_t scope, int64_t& period, std::string& how, std::string& err) const {
    if (scope == kFactPod) {
        Ctx bare = *this;
        bare.pod_knobs = nullptr;
        return bare.pod_quota(period, how, err);
    }
    period = r.resources.cpu_period && *r.resources.cpu_period > 0 ? *r.resources.cpu_period : 100000;
    if (r.resources.cpu_quota && *r.resources.cpu_quota > 0) {
        how = "kubelet's CFS quota " + std::to_string(*r.resources.cpu_quota);
        return *r.resources.cpu_quota;
    }
    how = "kubelet set no CFS quota";
    return std::nullopt;
}

std::optional<int64_t> Ctx::pod_file(const std::string& v1, const std::string& v2, bool& max) const {
    max = false;
    if (!in.paths || !in.kernel) return std::nullopt;
    auto t = in.layout == Layout::V2 ? in.kernel->read(Root::Cgroup, in.paths->pod + "/" + v2)
                                     : in.kernel->read(Root::Cgroup, v1 + "/" + in.paths->pod + "/" + v1 + "." + v2);
    if (!t) return std::nullopt;
    std::string s = *t;
    while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
    if (s == "max") {
        max = true;
        return std::nullopt;
    }
    return go_parse_int(s);
}

std::string Ctx::raise_of_cfs(KnobId id, uint8_t scope, const KnobValue& v, std::string& proof) const {
    auto num = [&] { return raise_num(v); };
    int64_t period = 100000;
    std::string how, err;
    auto q = kubelet_quota(scope, period, how, err);
    if (!err.empty()) return "cannot tell kubelet's quota (" + err + ")";
    if (!q) {
        proof = how + ": " + (id == KnobId::CpuQuota ? "a quota only restricts" : "no quota to exceed");
        return "";
    }
    if (id == KnobId::CpuQuota) {
        if (v.kind == KnobValue::Max) return "would lift the CFS quota (" + how + " → max)";
        if (v.num > *q) return "would raise the CFS quota (" + how + " → " + num() + ")";
        proof = num() + " ≤ " + how;
        return "";
    }
    if (v.kind == KnobValue::Max || v.num > *q) return "would set a CFS burst " + num() + " above " + how;
    proof = "burst " + num() + " ≤ " + how;
    return "";
}

std::string Ctx::raise_of_cpu_shares(uint8_t scope, const KnobValue& v, std::string& proof) const {
    const bool pod = scope == kFactPod;
    auto num = [&] { return raise_num(v); };
    std::optional<int64_t> base;
    std::string how;
    if (!pod) {
        if (r.resources.cpu_shares) base = *r.resources.cpu_shares, how = "kubelet's cpu.shares " + std::to_string(*base);
    } else {
        bool max = false;
        if (in.layout == Layout::V2) {
            if (auto w = pod_file("cpu", "cpu.weight", max)) {
                // The weight it would be written as: the policy's formula, or under
                // "auto" (decided per write, knobs.hpp) the larger of the two, so that no
                // formula the node may use lets an untrusted value raise the pod.
                const uint64_t sh = static_cast<uint64_t>(std::max<int64_t>(v.num, 2));
                const WeightFormula wf = cls && cls->pod_weight_formula_set ? cls->pod_weight_formula
                                         : in.policy                        ? in.policy->cpu_weight_formula
                                                                            : WeightFormula::Auto;
                uint64_t fw = wf == WeightFormula::Auto ? std::max(shares_to_weight_linear(sh), shares_to_weight(sh)) : shares_to_weight(sh, wf);
                if (static_cast<int64_t>(fw) > *w)
                    return "would raise the pod's cpu.weight (" + std::to_string(*w) + " → " + std::to_string(fw) + ")";
                proof = "cpu.weight " + std::to_string(fw) + " ≤ the pod's " + std::to_string(*w);
                return "";
            }
        } else if (auto sh = pod_file("cpu", "shares", max)) {
            base = *sh, how = "the pod's cpu.shares " + std::to_string(*sh);
        }
        if (!base && in.kube_qos == KubeQos::BestEffort) base = 2, how = "kubelet's BestEffort pod cpu.shares 2";
    }
    if (!base) return "would set cpu.shares " + num() + " where kubelet's value is unknown";
    if (v.num > *base) return "would raise cpu.shares (" + how + " → " + num() + ")";
    proof = num() + " ≤ " + how;
    return "";
}

std::string Ctx::raise_of_memory_limit(KnobId id, uint8_t scope, const KnobValue& v, std::string& proof) const {
    const bool pod = scope == kFactPod;
    const std::string where = pod ? "the pod's " : "the container's ";
    auto num = [&] { return raise_num(v); };
    std::optional<int64_t> base;
    bool unlimited = false, known = false;
    if (!pod) {
        known = true;
        if (r.resources.mem_limit && *r.resources.mem_limit > 0) base = *r.resources.mem_limit;
        else unlimited = true;
    } else {
        bool max = false;
        auto b = in.layout == Layout::V2 ? pod_file("memory", "memory.max", max) : pod_file("memory", "limit_in_bytes", max);
        if (b || max) {
            known = true;
            if (max || *b >= (int64_t(1) << 62)) unlimited = true;
            else base = *b;
        } else if (in.kube_qos == KubeQos::BestEffort) {
            known = unlimited = true;  // kubelet sets no memory limit on a BestEffort pod
        }
    }
    if (!known) return "would set " + std::string(knob_def(id).key) + " " + num() + " where the pod's memory limit is unknown";
    if (unlimited) {
        proof = where + "memory is unlimited: a limit only restricts";
        return "";
    }
    if (v.kind == KnobValue::Max || v.num > *base)
        return "would set " + std::string(knob_def(id).key) + " " + num() + " above " + where + "memory limit " + std::to_string(*base);
    proof = num() + " ≤ " + where + "memory limit " + std::to_string(*base);
    return "";
}

std::string Ctx::raise_of_cpuset_cpus(uint8_t scope, const KnobValue& v, std::string& proof) const {
    auto set = CpuSet::parse(v.text);
    unsigned n = set ? set->count() : 0;
    int64_t period = 100000;
    std::string how, err;
    auto q = kubelet_quota(scope, period, how, err);
    if (!err.empty()) return "cannot tell kubelet's quota (" + err + ")";
    std::string cpus = std::to_string(n) + " CPUs (" + v.text + ") × period " + std::to_string(period);
    if (!q) return "would pin to " + cpus + " that no CFS quota pays for (" + how + ")";
    if (static_cast<int64_t>(n) * period > *q) return "would pin to " + cpus + ", more than " + how + " pays for";
    proof = cpus + " ≤ " + how;
    return "";
}

std::string Ctx::raise_of_memory_protection(KnobId id, const KnobValue& v, std::string& proof) const {
    auto num = [&] { return raise_num(v); };
    // The kernel bounds a child's effective protection by its parent's (cgroup-v2.rst
    // "memory.min"/"memory.low": protection is distributed from the parent): a container
    // value at or below the pod cgroup's, which kubelet set (0 without its MemoryQoS
    // gate), grants nothing kubelet did not.
    const char* f = id == KnobId::MemoryLow ? "memory.low" : "memory.min";
    if (v.kind == KnobValue::Int && v.num == 0) {
        proof = std::string(f) + " 0 protects nothing";
        return "";
    }
    bool max = false;
    auto base = in.layout == Layout::V2 ? pod_file("memory", f, max) : std::nullopt;
    if (!base && !max) return "would set " + std::string(f) + " " + num() + " where the pod's " + f + " is unknown";
    if (max) {
        proof = std::string("the pod's ") + f + " is max";
        return "";
    }
    if (v.kind == KnobValue::Max || v.num > *base)
        return "would protect " + num() + " bytes (" + f + ") above the pod's " + f + " " + std::to_string(*base);
    proof = num() + " ≤ the pod's " + f + " " + std::to_string(*base);
    return "";
}

std::string Ctx::raise_of_oom_score_adj(uint8_t scope, const KnobValue& v, std::string& proof) const {
    const bool pod = scope == kFactPod;
    auto num = [&] { return raise_num(v); };
    // kubelet's value (kubernetes pkg/kubelet/qos/policy.go GetContainerOOMScoreAdjust):
    // Guaranteed -997, BestEffort 1000, Burstable 1000 - 1000 × request / capacity held in
    // [3, 999]. With the container's process, the value runc set from kubelet's spec;
    // else the bound of its QoS class (Burstable: 999, the highest kubelet gives).
    std::optional<int64_t> base;
    std::string how;
    if (!pod && r.pid && in.kernel)
        if (auto t = in.kernel->read(Root::Proc, std::to_string(*r.pid) + "/oom_score_adj")) {
            std::string s = *t;
            while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
            if ((base = go_parse_int(s))) how = "the process's oom_score_adj " + s + " (kubelet's, set by the runtime)";
        }
    if (!base) {
        if (in.kube_qos == KubeQos::Guaranteed) base = -997, how = "kubelet's Guaranteed oom_score_adj -997";
        else if (in.kube_qos == KubeQos::BestEffort) base = 1000, how = "kubelet's BestEffort oom_score_adj 1000";
        else if (in.kube_qos == KubeQos::Burstable) base = 999, how = "kubelet's Burstable oom_score_adj (at most 999)";
    }
    if (!base) return "would set oom_score_adj " + num() + " where kubelet's value is unknown";
    if (v.num < *base) return "would lower oom_score_adj below " + how + " → " + num();
    proof = num() + " ≥ " + how;
    return "";
}

std::string Ctx::raise_of(KnobId id, uint8_t scope, const KnobValue& v, std::string& proof) const {
    auto num = [&] { return raise_num(v); };
    switch (id) {
        case KnobId::CpuQuota:
        case KnobId::CpuBurst: return raise_of_cfs(id, scope, v, proof);
        case KnobId::CpuShares: return raise_of_cpu_shares(scope, v, proof);
        case KnobId::MemoryLimit:
        case KnobId::MemoryHigh:
        case KnobId::MemorySwap:
        case KnobId::MemorySoftLimit: return raise_of_memory_limit(id, scope, v, proof);
        case KnobId::CpuQosLevel:
        case KnobId::MemoryQosLevel:
            if (v.num > 0) return "would raise " + std::string(knob_def(id).key) + " to " + num() + " (unclassified pods have 0)";
            proof = std::string(knob_def(id).key) + " " + num() + " ≤ 0";
            return "";
        case KnobId::CpusetCpus: return raise_of_cpuset_cpus(scope, v, proof);
        case KnobId::CpusetMems: proof = "a memory-node pin only restricts"; return "";
        case KnobId::MemoryLow:
        case KnobId::MemoryMin: return raise_of_memory_protection(id, v, proof);
        case KnobId::OomScoreAdj: return raise_of_oom_score_adj(scope, v, proof);
        default: return "would set " + std::string(knob_def(id).key) + " " + num() + " (no rule shows it stays within kubelet's grant)";
    }
}

}  // namespace facts_internal

bool fact_has_evaluator(std::string_view name) { return find_entry(name) != nullptr; }

namespace {

/// resolve_facts' resolution of its knob lists: references to its fact context `c`, the class
/// `cls` being resolved, the input `in`, and the plan `out` that receives the values, notes,
/// refusals and records to keep. Made and used within one resolve_facts call (its locals).
struct ListResolver {
    Ctx& c;
    const ClassDef& cls;
    const FactInput& in;
    FactPlan& out;

    /// Resolve the fact knobs of `list` (scope "container"/"pod"; "sandbox": the pause
    /// container's) in place, phase by phase (Entry::phase): accepted values replace their fact,
    /// refused and absent ones leave the list, with their line in `out`.
    void resolve(std::vector<KnobSetting>& list, uint8_t scope, const char* scope_name);
    /// One fact knob `k` of evaluator `e`: evaluated with its trust, checked (check_trust, then
    /// check_range), then taken (take_value) or reported (report_not_taken). true: drop it.
    bool resolve_one(KnobSetting& k, const Entry* e, uint8_t scope, bool sandbox, const char* scope_name);
    /// The BestEffort-only rule of Koordinator's batch facts, then the trust rule (issue #19): an
    /// untrusted fact applies only where Ctx::raise_of shows it does not raise. `o` becomes the
    /// refusal when one fails; `trust_note` says how trust was decided for the note.
    void check_trust(const KnobSetting& k, const FactDef* fd, const Trust& trust, uint8_t scope, bool sandbox, Outcome& o, std::string& trust_note);
    /// A value within knob `d`'s own range and form (int range, "max", cpuset list, device
    /// limit list), else `o` becomes the error saying why.
    void check_range(const KnobDef& d, Outcome& o);
    /// An accepted value: its placement or pin record kept (issue #30 §2), its calc line in
    /// `out.calcs`, and knob `k` set to it with its note.
    void take_value(KnobSetting& k, const Entry* e, const Trust& trust, uint8_t scope, bool sandbox, const char* scope_name, const Outcome& o,
                    const std::string& trust_note);
    /// A value not taken: its line (`key`: the knob as shown) in `out.refused` (an error, or a
    /// required fact) or `out.skipped`; an annotation the runtime does not pass says so (issue #25 §1).
    void report_not_taken(const KnobSetting& k, const Entry* e, const std::string& key, Outcome& o);
};

void ListResolver::resolve(std::vector<KnobSetting>& list, uint8_t scope, const char* scope_name) {
    // The sandbox (pause) container: container facts, the pod's grant for the trust rule.
    const bool sandbox = std::string(scope_name) == "sandbox";
    std::vector<bool> drop(list.size(), false);
    for (int phase = 0; phase < 2; ++phase) {
        for (size_t i = 0; i < list.size(); ++i) {
            KnobSetting& k = list[i];
            if (k.value.kind != KnobValue::Fact) continue;
            const Entry* e = find_entry(k.value.text);
            if (!e || e->phase != phase) continue;
            if (resolve_one(k, e, scope, sandbox, scope_name)) drop[i] = true;
        }
        if (phase == 0 && scope == kFactContainer && !sandbox) c.ctr_knobs = &list;
    }
    std::vector<KnobSetting> kept;
    for (size_t i = 0; i < list.size(); ++i)
        if (!drop[i] && list[i].value.kind != KnobValue::Fact) kept.push_back(std::move(list[i]));
    list = std::move(kept);
}

bool ListResolver::resolve_one(KnobSetting& k, const Entry* e, uint8_t scope, bool sandbox, const char* scope_name) {
    const KnobDef& d = knob_def(k.id);
    std::string key = std::string(scope == kFactPod ? "pod:" : sandbox ? "sandbox:" : "") + d.key;
    const FactDef* fd = find_fact(e->name);
    const Trust trust = fact_trust(*fd, cls, in);
    c.trusted = trust.trusted;
    c.raises = fd->raises;
    c.untrusted_keys = trust.undeclared;
    c.param = k.value.num >> 4;
    Outcome o = e->fn(c, scope);
    std::string trust_note;
    check_trust(k, fd, trust, scope, sandbox, o, trust_note);
    check_range(d, o);
    bool drop = false;
    if (o.s == Outcome::Value) {
        take_value(k, e, trust, scope, sandbox, scope_name, o, trust_note);
    } else {
        drop = true;
        report_not_taken(k, e, key, o);
    }
    if (e->fn == burst_container) {
        c.own_burst_known = true;
        c.own_burst = o.s == Outcome::Value ? std::optional<int64_t>(o.v.num) : std::nullopt;
    }
    return drop;
}

void ListResolver::check_trust(const KnobSetting& k, const FactDef* fd, const Trust& trust, uint8_t scope, bool sandbox, Outcome& o,
                               std::string& trust_note) {
    // Koordinator batch resources: koord-manager writes them on BestEffort pods only.
    if (o.s == Outcome::Value && fd->besteffort_only && in.kube_qos != KubeQos::BestEffort) {
        o = error(std::string("refused: koord-manager gives batch resources only to BestEffort pods, this pod is ") + kube_qos_name(in.kube_qos) +
                  " (kubelet's values stay)");
        o.untrusted = true;
    }
    // The trust rule: an untrusted fact applies only where it does not raise.
    if (o.s == Outcome::Value && fd->raises) {
        if (trust.trusted) {
            if (*fd->trust_keys) trust_note = "; trusted: " + trust.why;
        } else {
            std::string proof = o.no_raise;
            std::string raise = proof.empty() ? c.raise_of(k.id, sandbox ? static_cast<uint8_t>(kFactPod) : scope, o.v, proof) : std::string();
            if (!raise.empty()) o = c.untrusted_refusal(raise);
            else trust_note = "; untrusted, applied: does not raise (" + proof + ")";
        }
    }
}

void ListResolver::check_range(const KnobDef& d, Outcome& o) {
    if (o.s == Outcome::Value) {
        // the knob's own range (a fact may exceed a knob it is allowed to feed)
        std::string bad;
        if (o.v.kind == KnobValue::Int && (o.v.num < d.min || o.v.num > d.max))
            bad = std::to_string(o.v.num) + " outside " + d.key + "'s range [" + std::to_string(d.min) + ", " + std::to_string(d.max) + "]";
        else if (o.v.kind == KnobValue::Max && !d.allow_max) bad = std::string("\"max\" is not a value of ") + d.key;
        else if (o.v.kind == KnobValue::Text && d.kind == ValueKind::Cpuset && !valid_cpuset(o.v.text))
            bad = "\"" + o.v.text + "\" is not a cpuset list";
        else if (std::vector<ThrottleEntry> te; d.kind == ValueKind::Throttle && (o.v.kind != KnobValue::Text || !parse_throttle(o.v.text, te, bad)))
            bad = "not a device limit list: " + bad;
        if (!bad.empty()) o = error(bad);
    }
}

void ListResolver::take_value(KnobSetting& k, const Entry* e, const Trust& trust, uint8_t scope, bool sandbox, const char* scope_name,
                              const Outcome& o, const std::string& trust_note) {
    // Its placement or pin record, now that the value is accepted (issue #30 §2):
    // an untrusted pin is the container's own, never a reservation.
    if (c.pending && !c.pending_kept && scope == kFactContainer && !sandbox && (k.id == KnobId::CpusetCpus || k.id == KnobId::CpusetMems)) {
        FactRecord fr{k.id, *c.pending};
        if (c.pending_pin) fr.rec.mode = trust.trusted ? "pin" : "pin-shared";
        out.keep.push_back(std::move(fr));
        c.pending_kept = true;
    }
    std::string note = o.calc + " [" + e->name + "]" + trust_note;
    out.calcs.push_back(std::string(scope_name) + " " + file_of(k.id) + " = " + shown(o.v) + " = " + note);
    k.value = o.v;
    k.note = note;
    k.needs_cpuset = o.needs_cpuset;
}

void ListResolver::report_not_taken(const KnobSetting& k, const Entry* e, const std::string& key, Outcome& o) {
    // An annotation the runtime may not hand this hook (issue #25 §1): said so,
    // not reported as a plain absence.
    std::string np;
    if (o.s == Outcome::Absent && !o.missing_key.empty() && in.not_passed) np = in.not_passed(o.missing_key);
    if (np.rfind("not passed", 0) == 0) {
        o.why = np;
        if (std::find(out.not_passed.begin(), out.not_passed.end(), o.missing_key) == out.not_passed.end()) out.not_passed.push_back(o.missing_key);
    } else if (!np.empty()) {
        o.why = "no " + o.missing_key + " annotation (" + np + ")";
    }
    std::string line = key + ": fact " + e->name + (o.s == Outcome::Absent ? " absent: " : o.untrusted ? " " : ": ") + o.why;
    if (o.s == Outcome::Error || (k.value.num & 1)) out.refused.push_back(line);
    else out.skipped.push_back(line);
}

}  // namespace

FactPlan resolve_facts(const ClassDef& cls, const FactInput& in, FactState& state) {
    // Knob lists still encoded (a cache hit without policy_cache::decode_knobs): never plan
    // with their empty stand-ins.
    if (cls.knobs_pending()) throw std::logic_error("class " + cls.name + ": knob lists not decoded");
    FactPlan out;
    out.cls = cls;
    const Request& r = *in.req;
    Ctx c{in, state, r};
    c.cls = &cls;
    const bool ctr_start = is_container_start(r.event, r.is_sandbox);
    const bool ctr_end = is_container_end(r.event, r.is_sandbox);
    const bool pod_start = is_pod_start(r.event, r.is_sandbox);
    // NRI UpdatePodSandbox (v0.10+): kubelet rewrote the pod cgroup; every pod knob is written
    // again (adjust.hpp build_plan), the fact-valued ones recomputed as at the pod's start (from
    // the event's pod annotations, the ledger and the pod cgroup as it is now).
    const bool pod_update = r.event == Event::UpdatePodSandbox;
    const bool pod_end = is_pod_end(r.event, r.is_sandbox);
    c.record = ctr_start && !in.dry_run;

    auto has_fact = [](const std::vector<KnobSetting>& l) {
        return std::any_of(l.begin(), l.end(), [](const KnobSetting& k) { return k.value.kind == KnobValue::Fact; });
    };
    auto literal_only = [](std::vector<KnobSetting>& l) {
        l.erase(std::remove_if(l.begin(), l.end(), [](const KnobSetting& k) { return k.value.kind == KnobValue::Fact; }), l.end());
    };
    ListResolver lists{c, cls, in, out};

    // The class's literal knobs are the base the derived facts look at.
    c.pod_knobs = &out.cls.pod;
    if (ctr_start && has_fact(out.cls.container)) {
        c.ctr_knobs = &out.cls.container;
        lists.resolve(out.cls.container, kFactContainer, "container");
        c.ctr_knobs = &out.cls.container;
        // This container's share of pod-level sums goes into the ledger before the pod re-sums.
        if (c.own_burst_known && c.record && (c.own_burst || state.has_container(r.sandbox_id, r.id))) {
            std::string e = c.lock();
            if (e.empty())
                e = c.own_burst
                        ? state.put_ledger(r.sandbox_id, r.id, {{"cpu_burst_us", *c.own_burst}}, in.paths ? in.paths->container : std::string())
                        : state.drop_ledger(r.sandbox_id, r.id);
            if (!e.empty()) out.warnings.push_back(e);
        }
    } else {
        literal_only(out.cls.container);
    }
    if (ctr_end && !in.dry_run) {
        // Whatever the class is now (the policy may have changed): drop what is kept for it.
        if (state.has_container(r.sandbox_id, r.id)) {
            std::string e = c.lock();
            if (e.empty()) e = state.drop_ledger(r.sandbox_id, r.id);
            if (e.empty()) e = state.drop_numa(r.id);
            if (!e.empty()) out.warnings.push_back(e);
        }
    }
    if (ctr_end) c.ledger_dropped = true;
    if (pod_end && !in.dry_run && state.has_pod(r.sandbox_id)) {
        std::string e = c.lock();
        if (e.empty()) e = state.drop_pod(r.sandbox_id);
        if (!e.empty()) out.warnings.push_back(e);
    }
    // Pod knobs: all of them at the pod's start and update; the pod-level sums again at
    // container events.
    if (pod_start || pod_update) {
        if (has_fact(out.cls.pod)) lists.resolve(out.cls.pod, kFactPod, "pod");
        if (has_fact(out.cls.sandbox)) lists.resolve(out.cls.sandbox, kFactContainer, "sandbox");
    } else {
        literal_only(out.cls.sandbox);
        if ((ctr_start || ctr_end) && in.paths) {
            std::vector<KnobSetting> sums;
            for (const auto& k : cls.pod)
                if (k.value.kind == KnobValue::Fact)
                    if (const FactDef* f = find_fact(k.value.text); f && f->pod_sum) sums.push_back(k);
            if (!sums.empty()) {
                lists.resolve(sums, kFactPod, "pod");
                out.pod_refresh = std::move(sums);
            }
        }
        literal_only(out.cls.pod);
    }
    for (auto& w : c.warnings) out.warnings.push_back(std::move(w));
    return out;
}

}  // namespace nriqos
