#include "facts/facts.hpp"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <functional>
#include <stdexcept>

#include <sys/stat.h>
#include <sys/sysmacros.h>

#include "policy/glob.hpp"
#include "os/cpuset.hpp"
#include "facts/fact_readers.hpp"
#include "facts/numa.hpp"

namespace nriqos {

namespace {


constexpr const char* kExtRes = "node.koordinator.sh/extended-resource-spec";
constexpr const char* kResStatus = "scheduling.koordinator.sh/resource-status";
constexpr const char* kVolcanoLevel = "volcano.sh/qos-level";
constexpr const char* kPreemptable = "volcano.sh/preemptable";
constexpr const char* kBurstEnable = "volcano.sh/enable-quota-burst";
constexpr const char* kBurstTime = "volcano.sh/quota-burst-time";
constexpr const char* kKatalystLevel = "katalyst.kubewharf.io/qos_level";
constexpr const char* kKatalystMem = "katalyst.kubewharf.io/memory_enhancement";

/// What one evaluation gives.
struct Outcome {
    enum S { Value, Absent, Error } s = Absent;
    KnobValue v;
    std::string calc;  ///< Value: how it was computed
    std::string why;   ///< Absent/Error: the reason
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

Outcome value_int(int64_t n, std::string calc) {
    Outcome o;
    o.s = Outcome::Value;
    o.v.kind = KnobValue::Int;
    o.v.num = n;
    o.calc = std::move(calc);
    return o;
}
Outcome value_max(std::string calc) {
    Outcome o;
    o.s = Outcome::Value;
    o.v.kind = KnobValue::Max;
    o.calc = std::move(calc);
    return o;
}
Outcome value_text(std::string t, std::string calc) {
    Outcome o;
    o.s = Outcome::Value;
    o.v.kind = KnobValue::Text;
    o.v.text = std::move(t);
    o.calc = std::move(calc);
    return o;
}
Outcome absent(std::string why) {
    Outcome o;
    o.s = Outcome::Absent;
    o.why = std::move(why);
    return o;
}
/// Absent: the request has no annotation `key` ("no <key> annotation<tail>").
Outcome absent_ann(const char* key, const std::string& tail = "") {
    Outcome o = absent(std::string("no ") + key + " annotation" + tail);
    o.missing_key = key;
    return o;
}
Outcome error(std::string why) {
    Outcome o;
    o.s = Outcome::Error;
    o.why = std::move(why);
    return o;
}

std::string q(const std::string& s) {
    std::string o = "\"";
    for (char c : s.substr(0, 64)) o += (static_cast<unsigned char>(c) < 0x20 || c == '"') ? '?' : c;
    return o + (s.size() > 64 ? "...\"" : "\"");
}

/// "1k (1000m)" or "25m": how a batch-cpu quantity was written and read.
std::string milli_text(const std::string& written, int64_t m) {
    std::string v = std::to_string(m) + "m";
    return written.empty() || written == std::to_string(m) ? v : written + " (" + v + ")";
}

bool is_container_start(Event e, bool sandbox) {
    switch (e) {
        case Event::Create: case Event::Update: return !sandbox;
        case Event::CreateContainer: case Event::StartContainer: case Event::UpdateContainer: return true;
        case Event::Synchronize: case Event::SynchronizeLate: return !sandbox;  // an existing container, evaluated like an update
        default: return false;
    }
}
bool is_container_end(Event e, bool sandbox) {
    switch (e) {
        case Event::Delete: return !sandbox;
        case Event::StopContainer: case Event::RemoveContainer: return true;
        default: return false;
    }
}
bool is_pod_start(Event e, bool sandbox) {
    // Synchronize of a pod: all its pod knobs, as at RunPodSandbox
    return (e == Event::Create && sandbox) || e == Event::RunPodSandbox ||
           ((e == Event::Synchronize || e == Event::SynchronizeLate) && sandbox);
}
bool is_pod_end(Event e, bool sandbox) {
    return (e == Event::Delete && sandbox) || e == Event::StopPodSandbox || e == Event::RemovePodSandbox;
}

struct Ctx;
using EvalFn = Outcome (*)(Ctx&, uint8_t scope);

struct Entry {
    const char* name;  ///< a fact of fact_table()
    EvalFn fn;
    int phase;         ///< 1: needs the class's other container knobs resolved first (effective quota)
};

/// Per-request evaluation context: the request, caches of parsed carriers, the fact state.
struct Ctx {
    const FactInput& in;
    FactState& st;
    const Request& r;
    const std::vector<KnobSetting>* ctr_knobs = nullptr;  ///< container knobs resolved so far
    const std::vector<KnobSetting>* pod_knobs = nullptr;  ///< pod knobs (literal part)
    const ClassDef* cls = nullptr;                        ///< the class being resolved (its pod_cpu_weight_formula)
    bool record = false;                                  ///< container start event, not dry run
    bool ledger_dropped = false;                          ///< container end: own entry removed
    std::optional<int64_t> own_burst;                     ///< this container's burst (for the pod sum)
    bool own_burst_known = false;
    std::vector<std::string> warnings;
    /// Trust of the fact being evaluated (resolve_facts sets them before each reader runs).
    bool trusted = true;
    uint32_t raises = 0;         ///< its FactDef::raises
    std::string untrusted_keys;  ///< its undeclared annotation keys, for the refusal
    int64_t param = 0;           ///< the knob's fact parameter (KnobValue::num >> 4; rubik.cache_limit: default level)

    // caches
    bool ers_read = false;
    ExtendedResourceSpec ers;
    std::string ers_error;
    bool numa_done = false;
    std::optional<NumaChoice> numa;
    std::string numa_mode, numa_error, numa_absent;
    bool pin_done = false;
    std::string pin_error, pin_how;

    /// The NumaRequest fields of this request (mode and need left to the caller).
    NumaRequest numa_request() const {
        NumaRequest rq;
        rq.sysfs_root = in.sysfs_root;
        rq.cgroup_root = in.cgroup_root;
        rq.kubelet_cpu_state = in.kubelet_cpu_state;
        rq.layout = in.layout;
        rq.container_id = r.id;
        rq.sandbox_id = r.sandbox_id;
        rq.pod_uid = r.pod_uid;
        if (in.paths) {
            rq.pod_dir = in.paths->pod;
            rq.ctr_dir = in.paths->container;
        }
        rq.dry_run = in.dry_run;
        return rq;
    }

    /// Validate an annotation's cpuset for this container (numa.hpp check_pinned_cpuset; once
    /// per request): "" when it may be pinned, else the one-line reason it is refused.
    std::string pin_check(const std::string& set) {
        if (!pin_done) {
            pin_done = true;
            if (!in.paths) {
                pin_error = "no cgroupsPath in the request: the cpuset cannot be checked";
            } else if (std::string lerr = lock(); !lerr.empty()) {
                pin_error = lerr;
            } else {
                try {
                    pin_how = check_pinned_cpuset(numa_request(), *CpuSet::parse(set), st);
                } catch (const InputError& ex) {
                    pin_error = ex.what();
                }
            }
        }
        return pin_error;
    }

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
    std::optional<Outcome> ers_problem() {
        if (!ers_read) {
            ers_read = true;
            if (const std::string* a = ann(kExtRes)) {
                try {
                    ers = parse_extended_resource_spec(*a);
                } catch (const InputError& e) {
                    ers_error = e.what();
                }
            }
        }
        if (!ers_error.empty()) return error(ers_error);
        if (!ann(kExtRes)) return absent_ann(kExtRes, " (koordlet keeps kubelet's values)");
        if (!ers.present) return absent(std::string(kExtRes) + " lists no containers (koordlet keeps kubelet's values)");
        return std::nullopt;
    }
    /// This container's entry in the extended-resource-spec.
    const BatchResources* ers_container(Outcome& why) {
        if (auto p = ers_problem()) {
            why = *p;
            return nullptr;
        }
        auto it = ers.containers.find(r.container_name);
        if (it == ers.containers.end()) {
            why = absent("container " + q(r.container_name) + " is not in " + kExtRes + " (koordlet keeps kubelet's values)");
            return nullptr;
        }
        return &it->second;
    }

    /// OCI (or class) CFS quota of the container: the class's own cpu_quota_us when it sets one
    /// (issue #9 §1: percentages and derived values follow the effective value), else OCI.
    /// nullopt: no quota (unlimited). `how` says where it came from.
    std::optional<int64_t> container_quota(std::string& how) const {
        if (ctr_knobs)
            for (const auto& k : *ctr_knobs) {
                if (k.id != KnobId::CpuQuota) continue;
                if (k.value.kind == KnobValue::Int) {
                    how = "the class's cpu_quota_us " + std::to_string(k.value.num);
                    return k.value.num;
                }
                if (k.value.kind == KnobValue::Max) {
                    how = "the class's cpu_quota_us max";
                    return std::nullopt;
                }
                if (k.value.kind == KnobValue::Percent && r.resources.cpu_quota && *r.resources.cpu_quota > 0) {
                    int64_t v = *r.resources.cpu_quota / 100 * k.value.num + (*r.resources.cpu_quota % 100) * k.value.num / 100;
                    how = "the class's cpu_quota_us " + std::to_string(k.value.num) + "% of " + std::to_string(*r.resources.cpu_quota);
                    return v;
                }
            }
        if (r.resources.cpu_quota && *r.resources.cpu_quota > 0) {
            how = "the container's CFS quota " + std::to_string(*r.resources.cpu_quota);
            return *r.resources.cpu_quota;
        }
        how = "the container has no CFS quota";
        return std::nullopt;
    }
    int64_t container_period() const {
        if (ctr_knobs)
            for (const auto& k : *ctr_knobs)
                if (k.id == KnobId::CpuPeriod && k.value.kind == KnobValue::Int) return k.value.num;
        return r.resources.cpu_period && *r.resources.cpu_period > 0 ? *r.resources.cpu_period : 100000;
    }

    /// The pod cgroup's CFS quota and period as the kernel shows them (or as the class sets
    /// them). nullopt quota: unlimited. Error text in `err` when unreadable.
    std::optional<int64_t> pod_quota(int64_t& period, std::string& how, std::string& err) const {
        period = 100000;
        if (pod_knobs)
            for (const auto& k : *pod_knobs) {
                if (k.id == KnobId::CpuPeriod && k.value.kind == KnobValue::Int) period = k.value.num;
            }
        if (pod_knobs)
            for (const auto& k : *pod_knobs) {
                if (k.id != KnobId::CpuQuota) continue;
                if (k.value.kind == KnobValue::Int) {
                    how = "the class's pod cpu_quota_us " + std::to_string(k.value.num);
                    return k.value.num;
                }
                if (k.value.kind == KnobValue::Max) {
                    how = "the class's pod cpu_quota_us max";
                    return std::nullopt;
                }
            }
        if (!in.paths || !in.kernel) {
            err = "no pod cgroup in the request";
            return std::nullopt;
        }
        const bool v2 = in.layout == Layout::V2;
        const std::string& pod = in.paths->pod;
        if (v2) {
            auto t = in.kernel->read(Root::Cgroup, pod + "/cpu.max");
            if (!t) {
                err = "cannot read " + pod + "/cpu.max";
                return std::nullopt;
            }
            std::string s = *t;
            while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
            size_t sp = s.find(' ');
            std::string qs = s.substr(0, sp);
            if (sp != std::string::npos) {
                if (auto p = go_parse_int(s.substr(sp + 1)); p && *p > 0) period = *p;
            }
            how = "the pod's cpu.max \"" + s + "\"";
            if (qs == "max") return std::nullopt;
            auto qv = go_parse_int(qs);
            if (!qv) {
                err = pod + "/cpu.max: unexpected \"" + s.substr(0, 40) + "\"";
                return std::nullopt;
            }
            return *qv;
        }
        auto t = in.kernel->read(Root::Cgroup, "cpu/" + pod + "/cpu.cfs_quota_us");
        auto p = in.kernel->read(Root::Cgroup, "cpu/" + pod + "/cpu.cfs_period_us");
        if (!t) {
            err = "cannot read cpu/" + pod + "/cpu.cfs_quota_us";
            return std::nullopt;
        }
        auto trim = [](std::string s) {
            while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
            return s;
        };
        if (p)
            if (auto pv = go_parse_int(trim(*p)); pv && *pv > 0) period = *pv;
        auto qv = go_parse_int(trim(*t));
        if (!qv) {
            err = "cpu/" + pod + "/cpu.cfs_quota_us: unexpected \"" + trim(*t).substr(0, 40) + "\"";
            return std::nullopt;
        }
        how = "the pod's cpu.cfs_quota_us " + std::to_string(*qv);
        if (*qv < 0) return std::nullopt;
        return *qv;
    }

    /// The trust rule's refusal: `what` the value would do, and the key(s) to declare.
    Outcome untrusted_refusal(const std::string& what) const {
        Outcome o = error("refused: " + what + "; untrusted annotation " + untrusted_keys + " (declare it in [guarded.annotations] to trust it)");
        o.untrusted = true;
        return o;
    }

    /// What kubelet gave: the CFS quota of the container (the OCI request) or of the pod (its
    /// cgroup as the kernel shows it, whatever the class sets). nullopt: unlimited; `err` when
    /// the pod's is unreadable.
    std::optional<int64_t> kubelet_quota(uint8_t scope, int64_t& period, std::string& how, std::string& err) const {
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
    /// A pod cgroup file as an integer (nullopt: unreadable or "max" → `max` true).
    std::optional<int64_t> pod_file(const std::string& v1, const std::string& v2, bool& max) const {
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

    /// "" when value `v` of a fact fed to knob `id` at `scope` does not raise above what kubelet
    /// gave the pod (then `proof` says why); else what it would raise, for the refusal.
    std::string raise_of(KnobId id, uint8_t scope, const KnobValue& v, std::string& proof) const {
        const bool pod = scope == kFactPod;
        const std::string where = pod ? "the pod's " : "the container's ";
        auto num = [&] { return v.kind == KnobValue::Max ? std::string("max") : std::to_string(v.num); };
        switch (id) {
            case KnobId::CpuQuota:
            case KnobId::CpuBurst: {
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
            case KnobId::CpuShares: {
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
                                                     : in.policy                                ? in.policy->cpu_weight_formula
                                                                                                : WeightFormula::Auto;
                            uint64_t fw = wf == WeightFormula::Auto ? std::max(shares_to_weight_linear(sh), shares_to_weight(sh))
                                                                    : shares_to_weight(sh, wf);
                            if (static_cast<int64_t>(fw) > *w) return "would raise the pod's cpu.weight (" + std::to_string(*w) + " → " + std::to_string(fw) + ")";
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
            case KnobId::MemoryLimit:
            case KnobId::MemoryHigh:
            case KnobId::MemorySwap:
            case KnobId::MemorySoftLimit: {
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
            case KnobId::CpuQosLevel:
            case KnobId::MemoryQosLevel:
                if (v.num > 0) return "would raise " + std::string(knob_def(id).key) + " to " + num() + " (unclassified pods have 0)";
                proof = std::string(knob_def(id).key) + " " + num() + " ≤ 0";
                return "";
            case KnobId::CpusetCpus: {
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
            case KnobId::CpusetMems:
                proof = "a memory-node pin only restricts";
                return "";
            default:
                return "would set " + std::string(knob_def(id).key) + " " + num() + " (no rule shows it stays within kubelet's grant)";
        }
    }

    unsigned online_cpus(std::string& err) const {
        try {
            return read_topology(in.sysfs_root).online.count();
        } catch (const InputError& e) {
            err = e.what();
            return 0;
        }
    }

    /// Whole CPUs the container requests, for the NUMA placements that reserve CPUs: the request
    /// is what the scheduler accounted (a limit can be far above it, and a reservation sized by
    /// the limit would hold CPUs nobody paid for). kubelet writes the request as CPU shares
    /// (MilliCPUToShares: milli × 1024 / 1000), so CPUs = ceil(shares / 1024); Katalyst allocates
    /// integer CPUs of the request (policy_hint_handlers.go calculateHints takes the request).
    /// 0 with `how` when there is no request (BestEffort: shares 2, or no shares).
    unsigned cpus_requested(std::string& how) const {
        if (in.paths && kube_qos_from_path(in.paths->pod) == KubeQos::BestEffort) {
            how = "a BestEffort pod has no CPU request";
            return 0;
        }
        if (r.resources.cpu_shares && *r.resources.cpu_shares > 2) {
            int64_t n = (*r.resources.cpu_shares + 1023) / 1024;
            how = "ceil(shares " + std::to_string(*r.resources.cpu_shares) + " / 1024) = " + std::to_string(n);
            return static_cast<unsigned>(std::max<int64_t>(1, std::min<int64_t>(n, CpuSet::kMaxId + 1)));
        }
        how = "the container has no CPU request (shares " +
              (r.resources.cpu_shares ? std::to_string(*r.resources.cpu_shares) : std::string("unset")) + ")";
        return 0;
    }

    /// Whole CPUs the container asks for: ceil(quota / period) with a quota, else
    /// ceil(shares / 1024), at least 1 (Katalyst allocates integer CPUs of the request).
    unsigned cpus_needed(std::string& how) const {
        std::string qh;
        auto quota = container_quota(qh);
        int64_t period = container_period();
        if (quota && *quota > 0) {
            int64_t n = (*quota + period - 1) / period;
            how = "ceil(quota " + std::to_string(*quota) + " / period " + std::to_string(period) + ") = " + std::to_string(n);
            return static_cast<unsigned>(std::max<int64_t>(1, std::min<int64_t>(n, CpuSet::kMaxId + 1)));
        }
        if (r.resources.cpu_shares && *r.resources.cpu_shares > 2) {
            int64_t n = (*r.resources.cpu_shares + 1023) / 1024;
            how = "ceil(shares " + std::to_string(*r.resources.cpu_shares) + " / 1024) = " + std::to_string(n);
            return static_cast<unsigned>(std::max<int64_t>(1, n));
        }
        how = "no CPU request: 1";
        return 1;
    }

    /// The container's NUMA placement in `mode` (computed once per request).
    /// `katalyst`: a Katalyst placement (settings.katalyst_reserved_cpus apply).
    Outcome numa_place(NumaMode mode, bool mems, const std::string& because, bool katalyst = false) {
        if (!trusted && (raises & kRaiseNumaReservation)) return untrusted_refusal("would reserve CPUs of a NUMA node (" + because + ")");
        if (numa_done && numa_mode != numa_mode_name(mode)) return error("one NUMA placement per container: the class mixes NUMA modes");
        if (!numa_done) {
            numa_done = true;
            numa_mode = numa_mode_name(mode);
            std::string how;
            NumaRequest rq = numa_request();
            rq.mode = mode;
            rq.need = mode == NumaMode::Shared ? cpus_needed(how) : cpus_requested(how);
            if (katalyst && in.policy) {
                if (!in.policy->katalyst_reserved_cpus.empty()) rq.reserved_cpus = CpuSet::parse(in.policy->katalyst_reserved_cpus);
                rq.reserved_count = in.policy->katalyst_reserved_count;
            }
            if (!in.paths) {
                numa_error = "no cgroupsPath in the request";
            } else if (rq.need == 0) {
                // A placement that reserves CPUs is sized by the CPU request: a BestEffort pod, or
                // one without a request, never reserves a NUMA node.
                numa_absent = how + ": no " + numa_mode + " NUMA placement (it would reserve CPUs nobody requested)";
            } else if (std::string lerr = lock(); !lerr.empty()) {
                numa_error = lerr;
            } else {
                try {
                    numa = place_numa(rq, st);
                    numa->why = numa_mode + " placement of " + how + " CPU(s): " + numa->why;
                    if (because.size()) numa->why = because + "; " + numa->why;
                } catch (const InputError& ex) {
                    numa_error = ex.what();
                }
            }
        }
        if (!numa_absent.empty()) return absent(numa_absent);
        if (!numa) return error(numa_error);
        if (mems) return value_text(numa->nodes.str(), numa->why);
        return value_text(numa->cpus.str(), numa->why);
    }
};

// ---- Koordinator ------------------------------------------------------------------------

Outcome koord_shares(Ctx& c, uint8_t) {
    Outcome why;
    const BatchResources* b = c.ers_container(why);
    if (!b) return why;
    int64_t m = b->has_requests && b->cpu_request && *b->cpu_request > 0 ? *b->cpu_request : 0;
    int64_t s = milli_cpu_to_shares(m);
    if (m == 0) return value_int(s, "no batch-cpu request → MilliCPUToShares(0) = 2");
    std::string calc = "MilliCPUToShares(batch-cpu request " + milli_text(b->cpu_request_text, m) + ") = " + std::to_string(m) + " × 1024 / 1000";
    int64_t raw = m > INT64_MAX / 1024 ? INT64_MAX : m * 1024 / 1000;
    if (raw != s) calc += " = " + std::to_string(raw) + ", clamped to [2, 262144]";
    return value_int(s, calc);
}

Outcome koord_quota(Ctx& c, uint8_t) {
    Outcome why;
    const BatchResources* b = c.ers_container(why);
    if (!b) return why;
    int64_t m = b->has_limits && b->cpu_limit && *b->cpu_limit > 0 ? *b->cpu_limit : 0;
    if (m == 0) return value_max("no batch-cpu limit → unlimited (MilliCPUToQuota(0) = -1)");
    int64_t qv = milli_cpu_to_quota(m);
    std::string calc = "batch-cpu limit " + milli_text(b->cpu_limit_text, m) + " × period 100000 / 1000";
    if (qv == 1000 && m * 100 < 1000) calc += " = " + std::to_string(m * 100) + ", raised to the minimum 1000";
    return value_int(qv, calc);
}

Outcome koord_memory(Ctx& c, uint8_t) {
    Outcome why;
    const BatchResources* b = c.ers_container(why);
    if (!b) return why;
    if (!b->has_limits || !b->mem_limit || *b->mem_limit <= 0) return value_max("no batch-memory limit → unlimited (-1)");
    return value_int(*b->mem_limit, "batch-memory limit " + (b->mem_limit_text.empty() ? std::to_string(*b->mem_limit) : b->mem_limit_text));
}

Outcome koord_pod_shares(Ctx& c, uint8_t) {
    if (auto p = c.ers_problem()) return *p;
    int64_t sum = 0;
    std::string terms;
    for (const auto& [n, b] : c.ers.containers) {
        if (!b.has_requests || !b.cpu_request || *b.cpu_request <= 0) continue;
        if (sum > kMaxQuantityValue - *b.cpu_request) return error("sum of batch-cpu requests overflows");
        sum += *b.cpu_request;
        terms += (terms.empty() ? "" : " + ") + std::to_string(*b.cpu_request) + "m";
    }
    int64_t s = milli_cpu_to_shares(sum);
    if (terms.empty()) return value_int(s, "no container has a batch-cpu request → MilliCPUToShares(0) = 2");
    return value_int(s, "MilliCPUToShares(Σ batch-cpu requests " + terms + " = " + std::to_string(sum) + "m) = " + std::to_string(sum) +
                            " × 1024 / 1000" + (sum * 1024 / 1000 != s ? ", clamped to [2, 262144]" : ""));
}

/// Pod sum of a batch limit: -1 once a listed container has none (SetPodCFSQuota/SetPodMemoryLimit).
Outcome koord_pod_limit(Ctx& c, bool cpu) {
    if (auto p = c.ers_problem()) return *p;
    int64_t sum = 0;
    std::string terms;
    const char* res = cpu ? "batch-cpu" : "batch-memory";
    for (const auto& [n, b] : c.ers.containers) {
        const std::optional<int64_t>& l = cpu ? b.cpu_limit : b.mem_limit;
        if (!b.has_limits || !l || *l <= 0)
            return value_max("container " + q(n) + " has no " + res + " limit → the pod is unlimited (-1)");
        if (sum > kMaxQuantityValue - *l) return error(std::string("sum of ") + res + " limits overflows");
        sum += *l;
        terms += (terms.empty() ? "" : " + ") + std::to_string(*l) + (cpu ? "m" : "");
    }
    if (terms.empty()) return value_max("no container listed → unlimited");
    if (!cpu) return value_int(sum, "Σ batch-memory limits " + terms + " = " + std::to_string(sum));
    return value_int(milli_cpu_to_quota(sum), "Σ batch-cpu limits (" + terms + " = " + std::to_string(sum) + "m) × period 100000 / 1000");
}
Outcome koord_pod_quota(Ctx& c, uint8_t) { return koord_pod_limit(c, true); }
Outcome koord_pod_memory(Ctx& c, uint8_t) { return koord_pod_limit(c, false); }

Outcome koord_cpuset_read(Ctx& c, std::string& set) {
    const std::string* a = c.ann(kResStatus);
    if (!a) return absent_ann(kResStatus, " (not bound by koord-scheduler)");
    try {
        set = parse_resource_status_cpuset(*a);
    } catch (const InputError& e) {
        return error(e.what());
    }
    if (set.empty()) return absent(std::string(kResStatus) + " has no cpuset");
    // Whoever wrote the annotation, the cpuset must fit the node, the pod's cgroup and the CPUs
    // other pods hold exclusively (numa.hpp check_pinned_cpuset); else it is refused.
    if (std::string bad = c.pin_check(set); !bad.empty()) return error(std::string(kResStatus) + ": " + bad);
    return value_text(set, std::string("cpuset ") + set + " from " + kResStatus + ", " + c.pin_how);
}
Outcome koord_cpuset(Ctx& c, uint8_t) {
    std::string set;
    return koord_cpuset_read(c, set);
}
/// The quota lift of a pod bound to a scheduler cpuset. koordlet lifts it whenever the pod has a
/// cpuset (pkg/util/pod_qos_utils.go IsPodCfsQuotaNeedUnset): settings.koordinator_quota_lift =
/// "cpuset", the default. A cpuset wider than the quota pays for (CPUs × period > quota) is a
/// raise: refused unless the annotation is trusted (the pod author can write it, and a lifted
/// quota on a wide cpuset buys CPU time). With "fits" a wider cpuset keeps the quota (absent,
/// trusted or not); within the quota both lift.
Outcome koord_cpuset_quota(Ctx& c, uint8_t scope) {
    std::string set;
    Outcome o = koord_cpuset_read(c, set);
    if (o.s == Outcome::Error) return error("cpuset not applied: quota kept (" + o.why + ")");
    if (o.s != Outcome::Value) return o;
    unsigned n = CpuSet::parse(set) ? CpuSet::parse(set)->count() : 0;
    std::optional<int64_t> quota;
    int64_t period = 100000;
    std::string how, err;
    if (scope == kFactPod) {
        quota = c.pod_quota(period, how, err);
        if (!err.empty()) return error(err);
    } else {
        quota = c.container_quota(how);
        period = c.container_period();
    }
    std::string calc = "bound to cpuset " + set + " by koord-scheduler → CFS quota lifted (UnsetContainerCPUQuota/UnsetPodCPUQuota)";
    if (!quota) return value_max(calc + "; " + how);
    // Within the quota the lift buys no CPU time (the trust check accepts it untrusted); wider,
    // only a trusted annotation gets koordlet's unconditional lift. Either way the container's
    // lift waits for its cpuset: written and read back (sinks.hpp apply_plan). The pod's lift is
    // bounded by its containers' quotas, each kept until its own cpuset holds.
    std::string fits = std::to_string(n) + " CPUs × " + std::to_string(period) + " ≤ " + how;
    if (static_cast<int64_t>(n) * period > *quota) {
        if (c.in.policy && c.in.policy->koordinator_quota_lift == Policy::QuotaLift::Fits)
            return absent("cpuset " + set + " (" + std::to_string(n) + " CPUs × " + std::to_string(period) + ") is wider than " + how +
                          ": quota kept (settings.koordinator_quota_lift = \"fits\")");
        Outcome wide = value_max(calc + "; cpuset " + set + " is wider than " + how);
        if (scope != kFactPod) wide.needs_cpuset = set;
        return wide;
    }
    Outcome lift = value_max(calc + "; " + fits);
    lift.no_raise = fits;
    if (scope != kFactPod) lift.needs_cpuset = set;
    return lift;
}

// ---- Volcano / rubik ----------------------------------------------------------------------

Outcome volcano_level(Ctx& c, uint8_t) {
    const std::string* a = c.ann(kVolcanoLevel);
    if (!a) return absent_ann(kVolcanoLevel);
    int v = *a == "LC" || *a == "HLS" ? 2 : *a == "LS" ? 1 : *a == "BE" ? -1 : 0;
    return value_int(v, std::string(kVolcanoLevel) + " " + q(*a) + " → " + std::to_string(v) + " (GetQosLevel: LC/HLS 2, LS 1, BE -1, other 0)");
}

Outcome volcano_mem_level(Ctx& c, uint8_t s) {
    Outcome o = volcano_level(c, s);
    if (o.s != Outcome::Value) return o;
    int64_t v = o.v.num < 0 ? -1 : 0;
    return value_int(v, o.calc + ", NormalizeQosLevel → " + std::to_string(v));
}

Outcome rubik_level(Ctx& c, uint8_t) {
    const std::string* a = c.label_or_ann(kPreemptable);
    if (!a || *a != "true") return absent(std::string(kPreemptable) + " is not \"true\": online, rubik leaves the level");
    return value_int(-1, std::string(kPreemptable) + " = \"true\" → offline -1 (SetQoSLevel)");
}

/// rubik dynCache's level of an offline pod (openeuler-mirror/rubik pkg/services/dyncache/sync.go
/// syncLevel, writeTasksToResctrl): volcano.sh/cache-limit = low | middle | high | max | dynamic
/// picks the group rubik_<level>; without it rubik's defaultLimitMode "static" gives max. The
/// annotation is the pod author's: it may only choose a level at or below the class's default
/// (`default = "<level>"`, else max) — a level above it is held at the default, said in the note.
/// Ranks: low 1, middle 2, dynamic 3 (rubik moves it between the low and high percentages,
/// dynamic.go flush), high 3, max 4. Only offline pods (volcano.sh/preemptable = "true", rubik's
/// listOfflinePods): absent for the others.
Outcome rubik_cache_limit(Ctx& c, uint8_t) {
    static const char* const kLevels[] = {"", "max", "high", "middle", "low", "dynamic"};
    static const int kRank[] = {4, 4, 3, 2, 1, 3};
    const std::string* off = c.label_or_ann(kPreemptable);
    if (!off || *off != "true") return absent(std::string(kPreemptable) + " is not \"true\": online, rubik's dynCache leaves the pod");
    const int64_t d = c.param >= 1 && c.param <= 5 ? c.param : 1;
    const std::string def = kLevels[d];
    const std::string dflt_how = c.param ? "the class's default " + def : std::string("rubik's defaultLimitMode static → max");
    const std::string* a = c.ann("volcano.sh/cache-limit");
    if (!a || a->empty()) return value_text("rubik_" + def, "no volcano.sh/cache-limit: " + dflt_how);
    int lv = 0;
    for (int i = 1; i <= 5; ++i)
        if (*a == kLevels[i]) lv = i;
    if (!lv) return error("volcano.sh/cache-limit " + q(*a) + " is not low, middle, high, max or dynamic (rubik: invalid cache limit level)");
    if (kRank[lv] > kRank[d])
        return value_text("rubik_" + def, "volcano.sh/cache-limit " + q(*a) + " is above " + dflt_how +
                                              ": a pod-written annotation only lowers, kept " + def);
    return value_text("rubik_" + *a, "volcano.sh/cache-limit " + q(*a) + " → rubik_" + *a);
}

/// rubik's convertToMajorMinorImpl (openeuler-mirror/rubik@1b6fece7a319ebed2ece3dd74ae873633262ce41
/// pkg/services/iolimit/iolimit.go) made strict: "MAJ:MIN" in decimal is taken as is; a path
/// "/dev/<name>" is stat(2)ed (symlinks followed, as Go's os.Stat) below `dev_root` and must be
/// a block device (rubik accepts any device node; the kernel refuses a character device). Then
/// the device must be a whole disk of this node: <sysfs>/dev/block/MAJ:MIN exists and has no
/// "partition" file (blk-throttle refuses partitions with ENODEV: block/blk-cgroup.c
/// blkcg_conf_open_bdev; rubik's docs: only whole-disk devices take effect). Returns the device
/// or nullopt with `why` (one line).
std::optional<std::pair<uint32_t, uint32_t>> block_device(const std::string& dev, const std::string& dev_root,
                                                          const std::string& sysfs_root, std::string& why) {
    uint64_t ma = 0, mi = 0;
    auto digits = [](const std::string& t, uint64_t maxv, uint64_t& v) { return parse_decimal(t, 7, maxv, v); };
    const size_t colon = dev.find(':');
    if (colon != std::string::npos && dev.find(':', colon + 1) == std::string::npos && dev.rfind("/dev/", 0) != 0) {
        if (!digits(dev.substr(0, colon), 4095, ma) || !digits(dev.substr(colon + 1), (1u << 20) - 1, mi)) {
            why = q(dev) + ": not MAJ:MIN in decimal";
            return std::nullopt;
        }
    } else if (dev.rfind("/dev/", 0) == 0) {
        const std::string rest = dev.substr(5);
        if (dev.size() > 255 || rest.empty() || ("/" + rest + "/").find("/../") != std::string::npos) {
            why = q(dev) + ": not a device path below /dev";
            return std::nullopt;
        }
        struct stat st {};
        if (::stat((dev_root + "/" + rest).c_str(), &st) != 0) {
            why = q(dev) + ": " + std::strerror(errno);
            return std::nullopt;
        }
        if (!S_ISBLK(st.st_mode)) {
            why = q(dev) + ": not a block device";
            return std::nullopt;
        }
        ma = major(st.st_rdev);
        mi = minor(st.st_rdev);
    } else {
        why = q(dev) + ": neither MAJ:MIN nor a /dev/ path (rubik: unsupported device name format)";
        return std::nullopt;
    }
    const std::string mm = std::to_string(ma) + ":" + std::to_string(mi);
    const std::string sys = sysfs_root + "/dev/block/" + mm;
    struct stat st {};
    if (::stat(sys.c_str(), &st) != 0) {
        why = q(dev) + ": no block device " + mm + " on this node (sysfs dev/block)";
        return std::nullopt;
    }
    if (::stat((sys + "/partition").c_str(), &st) == 0) {
        why = q(dev) + ": " + mm + " is a partition; the kernel throttles whole disks only";
        return std::nullopt;
    }
    return std::make_pair(static_cast<uint32_t>(ma), static_cast<uint32_t>(mi));
}

/// rubik ioLimit (openeuler-mirror/rubik@1b6fece7a319ebed2ece3dd74ae873633262ce41
/// pkg/services/iolimit/iolimit.go configIOLimit → parseIOLimitConfig, applyIOLimitConfig,
/// applyDeviceConfig): every pod carrying volcano.sh/blkio-limit, online or offline, gets the
/// listed per-device limits in each container's cgroup (never the pod's: "blkio cgroup
/// hierarchical is not enabled default, only set container cgroups"). As in applyDeviceConfig an
/// entry without device or value, or whose device does not resolve, is skipped and the others
/// apply; here also a rate that is not a decimal integer 1..2^63-1 (0 would lift a limit: rubik's
/// documented "set 0 to cancel" is not honoured from a pod-written annotation) and, on cgroup v2,
/// a rate of 1 (io.max refuses it: block/blk-throttle.c tg_set_limit). Malformed JSON: error
/// (rubik applies nothing). Order: all read_bps, write_bps, read_iops, write_iops (rubik's and
/// runc's order).
Outcome rubik_blkio_limit(Ctx& c, uint8_t) {
    constexpr const char* kKey = "volcano.sh/blkio-limit";
    const std::string* a = c.ann(kKey);
    if (!a || a->empty()) return absent(std::string("no ") + kKey + " annotation (rubik: no I/O limit)");
    BlkioLimit cfg;
    try {
        cfg = parse_blkio_limit(*a);
    } catch (const InputError& e) {
        return error(e.what());
    }
    static const char* const kList[] = {"device_read_bps", "device_write_bps", "device_read_iops", "device_write_iops"};
    std::vector<ThrottleEntry> out;
    std::string skipped, calc;
    size_t nskipped = 0;
    for (int k = 0; k < 4; ++k) {
        for (const auto& dv : cfg.lists[k]) {
            const std::string where = std::string(kList[k]) + " " + q(dv.device);
            auto skip = [&](const std::string& why) {  // the first 4 reasons, then a count
                if (++nskipped <= 4) skipped += (skipped.empty() ? "" : "; ") + why;
            };
            if (dv.device.empty() || dv.value.empty()) {
                skip(std::string(kList[k]) + ": an entry without device or value");
                continue;
            }
            std::string why;
            auto d = block_device(dv.device, c.in.dev_root, c.in.sysfs_root, why);
            if (!d) {
                skip(std::string(kList[k]) + " " + why);
                continue;
            }
            uint64_t rate = 0;
            bool ok = !dv.value.empty() && dv.value.size() <= 19;
            for (char ch : dv.value) {
                if (ch < '0' || ch > '9') ok = false;
                else rate = rate * 10 + static_cast<uint64_t>(ch - '0');
            }
            if (!ok || rate > static_cast<uint64_t>(INT64_MAX)) {
                skip(where + ": value " + q(dv.value) + " is not an integer 1..2^63-1");
                continue;
            }
            if (rate == 0) {
                skip(where + ": value 0 would lift a limit, not set one (not taken from a pod annotation)");
                continue;
            }
            if (rate == 1 && c.in.layout == Layout::V2) {
                skip(where + ": value 1: cgroup v2 io.max takes rates from 2");
                continue;
            }
            ThrottleEntry e;
            e.key = static_cast<ThrottleEntry::Key>(k);
            e.major = d->first;
            e.minor = d->second;
            e.rate = rate;
            if (out.size() >= kMaxThrottleEntries) break;
            out.push_back(e);
            calc += (calc.empty() ? "" : ", ") + where + " → " + std::to_string(e.major) + ":" + std::to_string(e.minor) + " " +
                    throttle_key_name(e.key) + "=" + dv.value;
        }
    }
    if (nskipped > 4) skipped += "; " + std::to_string(nskipped - 4) + " more";
    if (out.empty())
        return absent(std::string(kKey) + ": no usable device limit" + (skipped.empty() ? "" : " (" + skipped + ")"));
    return value_text(throttle_text(out), std::string(kKey) + ": " + calc + (skipped.empty() ? "" : "; skipped: " + skipped));
}

/// The container's CFS burst by the pod's carrier (see the registry entry).
Outcome burst_container(Ctx& c, uint8_t) {
    const std::string* en = c.ann(kBurstEnable);
    const std::string* bt = c.ann(kBurstTime);
    std::string how;
    auto quota = c.container_quota(how);
    if (en) {  // Volcano agent semantics
        auto on = go_parse_bool(*en);
        if (!on || !*on) return absent(std::string(kBurstEnable) + " " + q(*en) + " is not true (Volcano: no burst)");
        if (!quota) return absent(how + ": no burst without a quota (Volcano skips quota -1)");
        int64_t t = 0;
        if (bt)
            if (auto v = go_parse_int(*bt); v && *v > 0) t = *v;
        if (t == 0)
            return value_int(*quota, std::string(kBurstEnable) + " → burst = quota: " + how + (bt ? std::string(" (") + kBurstTime + " " + q(*bt) + " unusable)" : ""));
        if (t > *quota) return value_int(*quota, std::string(kBurstTime) + " " + std::to_string(t) + " capped at " + how);
        return value_int(t, std::string(kBurstTime) + " " + std::to_string(t) + " (≤ " + how + ")");
    }
    if (bt && !bt->empty()) {  // rubik semantics
        auto t = go_parse_int(*bt);
        if (!t) return error(std::string(kBurstTime) + " " + q(*bt) + ": not an integer (rubik parseQuotaBurst)");
        if (*t < 0) return error(std::string(kBurstTime) + " " + q(*bt) + ": negative (rubik parseQuotaBurst)");
        if (!quota) return absent(how + ": rubik refuses a burst without a quota (matchQuota)");
        std::string err;
        unsigned ncpu = c.online_cpus(err);
        if (!ncpu) return error("cannot count online CPUs: " + err);
        int64_t period = c.container_period();
        if (*quota >= period * static_cast<int64_t>(ncpu))
            return absent(how + " ≥ period " + std::to_string(period) + " × " + std::to_string(ncpu) + " CPUs: rubik refuses (matchQuota)");
        if (*quota < *t) return absent(std::string(kBurstTime) + " " + std::to_string(*t) + " above " + how + ": rubik refuses (matchQuota)");
        return value_int(*t, std::string(kBurstTime) + " " + std::to_string(*t) + " (rubik: ≤ " + how + ")");
    }
    return absent(std::string("no ") + kBurstEnable + " or " + kBurstTime + " annotation (no burst)");
}

Outcome burst_pod(Ctx& c, uint8_t) {
    const std::string* en = c.ann(kBurstEnable);
    const std::string* bt = c.ann(kBurstTime);
    bool volcano = en != nullptr;
    if (volcano) {
        auto on = go_parse_bool(*en);
        if (!on || !*on) return absent(std::string(kBurstEnable) + " " + q(*en) + " is not true (Volcano: no burst)");
    } else if (!bt || bt->empty()) {
        return absent(std::string("no ") + kBurstEnable + " or " + kBurstTime + " annotation (no burst)");
    } else if (auto t = go_parse_int(*bt); !t || *t < 0) {
        return absent(std::string(kBurstTime) + " " + q(*bt) + " unusable (rubik parseQuotaBurst)");
    }
    // Σ of the containers' bursts recorded in the ledger (this container's own value included).
    if (std::string e = c.lock(); !e.empty()) return error(e);
    auto led = c.st.ledger(c.r.sandbox_id);
    if (c.in.dry_run || c.ledger_dropped) {
        led.erase(c.r.id);
        if (c.own_burst_known && c.own_burst && !c.ledger_dropped) led[c.r.id].kv["cpu_burst_us"] = *c.own_burst;
    }
    // A container whose cgroup is gone no longer counts (native NRI reports no container removal):
    // its entry is dropped once past the grace period of a container still being created.
    const int64_t now = static_cast<int64_t>(::time(nullptr));
    const std::string prefix = c.in.layout == Layout::V2 ? "" : "cpu/";
    int64_t sum = 0;
    std::string terms;
    for (const auto& [id, e] : led) {
        if (id != c.r.id && !e.ctr_dir.empty() && c.in.kernel && !c.in.kernel->exists(Root::Cgroup, prefix + e.ctr_dir)) {
            if (now - e.time > kFactRecordGraceSeconds) {
                if (!c.in.dry_run) c.st.drop_ledger(c.r.sandbox_id, id);
                continue;
            }
        }
        auto it = e.kv.find("cpu_burst_us");
        if (it == e.kv.end() || it->second < 0) continue;
        sum += it->second;
        terms += (terms.empty() ? "" : " + ") + std::to_string(it->second);
    }
    int64_t period = 100000;
    std::string how, err;
    auto pq = c.pod_quota(period, how, err);
    if (!err.empty()) return error(err);
    std::string calc = "Σ container bursts " + (terms.empty() ? std::string("(none yet)") : terms) + " = " + std::to_string(sum);
    if (volcano) {
        if (!pq) return absent(how + ": unlimited pod quota, Volcano writes no pod burst");
        return value_int(sum, calc);
    }
    if (!pq) return absent(how + ": rubik refuses a pod burst without a pod quota (matchQuota)");
    unsigned ncpu = c.online_cpus(err);
    if (!ncpu) return error("cannot count online CPUs: " + err);
    if (*pq >= period * static_cast<int64_t>(ncpu))
        return absent(how + " ≥ period × " + std::to_string(ncpu) + " CPUs: rubik refuses (matchQuota)");
    if (*pq < sum) return absent(calc + " above " + how + ": rubik refuses (matchQuota)");
    return value_int(sum, calc);
}

// ---- Katalyst and NUMA ----------------------------------------------------------------------

Outcome katalyst_numa(Ctx& c, bool mems) {
    const std::string* a = c.ann(kKatalystMem);
    if (!a) return absent_ann(kKatalystMem);
    std::string why;
    auto m = parse_string_map(*a, &why);
    if (!m) return error(std::string(kKatalystMem) + ": " + why);
    if (!why.empty()) c.warnings.push_back(std::string(kKatalystMem) + ": " + why);
    auto b = m->find("numa_binding");
    if (b == m->end() || b->second != "true") return absent(std::string(kKatalystMem) + ": numa_binding is not \"true\"");
    const std::string* lvl = c.ann(kKatalystLevel);
    std::string level = lvl ? *lvl : "shared_cores";
    auto x = m->find("numa_exclusive");
    bool exclusive = x != m->end() && x->second == "true" && level == "dedicated_cores";
    NumaMode mode = level == "dedicated_cores" ? (exclusive ? NumaMode::Exclusive : NumaMode::Bound) : NumaMode::Shared;
    std::string because = "katalyst " + level + " numa_binding" + (exclusive ? " + numa_exclusive" : "");
    return c.numa_place(mode, mems, because, true);
}
/// katalyst.kubewharf.io/cpu_enhancement cpu_burst_policy (katalyst-core@v0.5.47
/// pkg/agent/qrm-plugins/cpu/dynamicpolicy/cpuburst/manager.go UpdateCPUBurst,
/// pkg/util/qos/cpu_enhancement.go GetPodCPUBurstPolicyFromCPUEnhancement /
/// GetPodCPUBurstPercentFromCPUEnhancement, pkg/agent/qrm-plugins/cpu/util/util.go
/// CalculateCPUBurstFromPercent): default → no change; closed → 0; static → quota × percent / 100
/// (cpu_burst_percent, ParseFloat, above 100 → 100, absent → 100); reclaimed_cores never bursts;
/// dynamic is not supported by Katalyst either. The node-level overrides (EnableDefault*CPUBurst,
/// the dynamic default percent) are agent configuration, not in the request.
Outcome katalyst_burst(Ctx& c, uint8_t) {
    constexpr const char* kKatalystCpu = "katalyst.kubewharf.io/cpu_enhancement";
    const std::string* a = c.ann(kKatalystCpu);
    if (!a) return absent_ann(kKatalystCpu, " (Katalyst: no change)");
    std::string why;
    auto m = parse_string_map(*a, &why);
    if (!m) return error(std::string(kKatalystCpu) + ": " + why);
    if (!why.empty()) c.warnings.push_back(std::string(kKatalystCpu) + ": " + why);
    auto pol = m->find("cpu_burst_policy");
    if (pol == m->end() || pol->second == "default") return absent("cpu_burst_policy default: Katalyst leaves the burst");
    const std::string* lvl = c.ann(kKatalystLevel);
    if (lvl && *lvl == "reclaimed_cores") return value_int(0, "reclaimed_cores never burst (cpu_burst_policy " + q(pol->second) + " → closed)");
    if (pol->second == "closed") return value_int(0, "cpu_burst_policy closed → 0");
    if (pol->second != "static") return absent("cpu_burst_policy " + q(pol->second) + " is not supported by Katalyst (default, closed, static)");
    double pct = 100;
    std::string pct_how = "default percent 100";
    if (auto p = m->find("cpu_burst_percent"); p != m->end()) {
        const char* b = p->second.c_str();
        char* end = nullptr;
        errno = 0;
        pct = std::strtod(b, &end);
        const bool plain = !p->second.empty() && p->second.find_first_not_of("0123456789.eE+-") == std::string::npos;
        if (!plain || p->second.size() > 32 || *end != '\0' || errno != 0 || !std::isfinite(pct) || pct < 0)
            return error(std::string(kKatalystCpu) + ": cpu_burst_percent " + q(p->second) + " is not a number in [0, 100]");
        if (pct > 100) pct = 100;
        pct_how = "cpu_burst_percent " + p->second + (pct == 100 && p->second != "100" ? " (capped at 100)" : "");
    }
    std::string how;
    auto quota = c.container_quota(how);
    if (!quota) return absent(how + ": no burst without a quota");
    int64_t burst = static_cast<int64_t>(static_cast<double>(*quota) * pct / 100);
    return value_int(burst, "cpu_burst_policy static: " + how + " × " + pct_how + " / 100");
}

Outcome katalyst_cpus(Ctx& c, uint8_t) { return katalyst_numa(c, false); }
Outcome katalyst_mems(Ctx& c, uint8_t) { return katalyst_numa(c, true); }
Outcome numa_excl_cpus(Ctx& c, uint8_t) { return c.numa_place(NumaMode::Exclusive, false, ""); }
Outcome numa_excl_mems(Ctx& c, uint8_t) { return c.numa_place(NumaMode::Exclusive, true, ""); }
Outcome numa_bound_cpus(Ctx& c, uint8_t) { return c.numa_place(NumaMode::Bound, false, ""); }
Outcome numa_bound_mems(Ctx& c, uint8_t) { return c.numa_place(NumaMode::Bound, true, ""); }
Outcome numa_shared_cpus(Ctx& c, uint8_t) { return c.numa_place(NumaMode::Shared, false, ""); }
Outcome numa_shared_mems(Ctx& c, uint8_t) { return c.numa_place(NumaMode::Shared, true, ""); }

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
    std::string why;         ///< trusted: the reason ("annotation X is guarded (note)")
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

}  // namespace

bool fact_has_evaluator(std::string_view name) { return find_entry(name) != nullptr; }

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
    // Resolve the fact knobs of `list` (scope "container"/"pod") in place, phase by phase.
    auto resolve_list = [&](std::vector<KnobSetting>& list, uint8_t scope, const char* scope_name) {
        std::vector<bool> drop(list.size(), false);
        for (int phase = 0; phase < 2; ++phase) {
            for (size_t i = 0; i < list.size(); ++i) {
                KnobSetting& k = list[i];
                if (k.value.kind != KnobValue::Fact) continue;
                const Entry* e = find_entry(k.value.text);
                if (!e || e->phase != phase) continue;
                const KnobDef& d = knob_def(k.id);
                std::string key = std::string(scope == kFactPod ? "pod:" : "") + d.key;
                const FactDef* fd = find_fact(e->name);
                const Trust trust = fact_trust(*fd, cls, in);
                c.trusted = trust.trusted;
                c.raises = fd->raises;
                c.untrusted_keys = trust.undeclared;
                c.param = k.value.num >> 4;
                Outcome o = e->fn(c, scope);
                std::string trust_note;
                // Koordinator batch resources: koord-manager writes them on BestEffort pods only.
                if (o.s == Outcome::Value && fd->besteffort_only && in.kube_qos != KubeQos::BestEffort) {
                    o = error(std::string("refused: koord-manager gives batch resources only to BestEffort pods, this pod is ") +
                              kube_qos_name(in.kube_qos) + " (kubelet's values stay)");
                    o.untrusted = true;
                }
                // The trust rule: an untrusted fact applies only where it does not raise.
                if (o.s == Outcome::Value && fd->raises) {
                    if (trust.trusted) {
                        if (*fd->trust_keys) trust_note = "; trusted: " + trust.why;
                    } else {
                        std::string proof = o.no_raise;
                        std::string raise = proof.empty() ? c.raise_of(k.id, scope, o.v, proof) : std::string();
                        if (!raise.empty()) o = c.untrusted_refusal(raise);
                        else trust_note = "; untrusted, applied: does not raise (" + proof + ")";
                    }
                }
                if (o.s == Outcome::Value) {
                    // the knob's own range (a fact may exceed a knob it is allowed to feed)
                    std::string bad;
                    if (o.v.kind == KnobValue::Int && (o.v.num < d.min || o.v.num > d.max))
                        bad = std::to_string(o.v.num) + " outside " + d.key + "'s range [" + std::to_string(d.min) + ", " + std::to_string(d.max) + "]";
                    else if (o.v.kind == KnobValue::Max && !d.allow_max)
                        bad = std::string("\"max\" is not a value of ") + d.key;
                    else if (o.v.kind == KnobValue::Text && d.kind == ValueKind::Cpuset && !valid_cpuset(o.v.text))
                        bad = "\"" + o.v.text + "\" is not a cpuset list";
                    else if (std::vector<ThrottleEntry> te; d.kind == ValueKind::Throttle &&
                             (o.v.kind != KnobValue::Text || !parse_throttle(o.v.text, te, bad)))
                        bad = "not a device limit list: " + bad;
                    if (!bad.empty()) o = error(bad);
                }
                if (o.s == Outcome::Value) {
                    std::string note = o.calc + " [" + e->name + "]" + trust_note;
                    out.calcs.push_back(std::string(scope_name) + " " + file_of(k.id) + " = " + shown(o.v) + " = " + note);
                    k.value = o.v;
                    k.note = note;
                    k.needs_cpuset = o.needs_cpuset;
                } else {
                    drop[i] = true;
                    // An annotation the runtime may not hand this hook (issue #25 §1): said so,
                    // not reported as a plain absence.
                    std::string np;
                    if (o.s == Outcome::Absent && !o.missing_key.empty() && in.not_passed) np = in.not_passed(o.missing_key);
                    if (np.rfind("not passed", 0) == 0) {
                        o.why = np;
                        if (std::find(out.not_passed.begin(), out.not_passed.end(), o.missing_key) == out.not_passed.end())
                            out.not_passed.push_back(o.missing_key);
                    } else if (!np.empty()) {
                        o.why = "no " + o.missing_key + " annotation (" + np + ")";
                    }
                    std::string line = key + ": fact " + e->name + (o.s == Outcome::Absent ? " absent: " : o.untrusted ? " " : ": ") + o.why;
                    if (o.s == Outcome::Error || (k.value.num & 1)) out.refused.push_back(line);
                    else out.skipped.push_back(line);
                }
                if (e->fn == burst_container) {
                    c.own_burst_known = true;
                    c.own_burst = o.s == Outcome::Value ? std::optional<int64_t>(o.v.num) : std::nullopt;
                }
            }
            if (phase == 0 && scope == kFactContainer) c.ctr_knobs = &list;
        }
        std::vector<KnobSetting> kept;
        for (size_t i = 0; i < list.size(); ++i)
            if (!drop[i] && list[i].value.kind != KnobValue::Fact) kept.push_back(std::move(list[i]));
        list = std::move(kept);
    };

    // The class's literal knobs are the base the derived facts look at.
    c.pod_knobs = &out.cls.pod;
    if (ctr_start && has_fact(out.cls.container)) {
        c.ctr_knobs = &out.cls.container;
        resolve_list(out.cls.container, kFactContainer, "container");
        c.ctr_knobs = &out.cls.container;
        // This container's share of pod-level sums goes into the ledger before the pod re-sums.
        if (c.own_burst_known && c.record && (c.own_burst || state.has_container(r.sandbox_id, r.id))) {
            std::string e = c.lock();
            if (e.empty()) e = c.own_burst ? state.put_ledger(r.sandbox_id, r.id, {{"cpu_burst_us", *c.own_burst}}, in.paths ? in.paths->container : std::string()) : state.drop_ledger(r.sandbox_id, r.id);
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
        if (has_fact(out.cls.pod)) resolve_list(out.cls.pod, kFactPod, "pod");
    } else {
        if ((ctr_start || ctr_end) && in.paths) {
            std::vector<KnobSetting> sums;
            for (const auto& k : cls.pod)
                if (k.value.kind == KnobValue::Fact)
                    if (const FactDef* f = find_fact(k.value.text); f && f->pod_sum) sums.push_back(k);
            if (!sums.empty()) {
                resolve_list(sums, kFactPod, "pod");
                out.pod_refresh = std::move(sums);
            }
        }
        literal_only(out.cls.pod);
    }
    for (auto& w : c.warnings) out.warnings.push_back(std::move(w));
    return out;
}

}  // namespace nriqos
