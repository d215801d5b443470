// Koordinator's facts (koordinator.*, issue #23: split out of facts.cpp): koordlet's batch
// resources of a BestEffort pod from node.koordinator.sh/extended-resource-spec (CPU shares, CFS
// quota, memory limit of the container and their pod sums) and koord-scheduler's cpuset from
// scheduling.koordinator.sh/resource-status with the CFS quota lift that goes with it. The
// registry (entries() in facts.cpp) maps each fact name to its evaluator here.
#include "facts/facts_internal.hpp"

#include "os/cpuset.hpp"

namespace nriqos {
namespace facts_internal {

namespace {

constexpr const char* kResStatus = "scheduling.koordinator.sh/resource-status";

/// "1k (1000m)" or "25m": how a batch-cpu quantity was written and read.
std::string milli_text(const std::string& written, int64_t m) {
    std::string v = std::to_string(m) + "m";
    return written.empty() || written == std::to_string(m) ? v : written + " (" + v + ")";
}

}  // namespace

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

namespace {

/// Pod sum of a batch limit: -1 once a listed container has none (SetPodCFSQuota/SetPodMemoryLimit).
Outcome koord_pod_limit(Ctx& c, bool cpu) {
    if (auto p = c.ers_problem()) return *p;
    int64_t sum = 0;
    std::string terms;
    const char* res = cpu ? "batch-cpu" : "batch-memory";
    for (const auto& [n, b] : c.ers.containers) {
        const std::optional<int64_t>& l = cpu ? b.cpu_limit : b.mem_limit;
        if (!b.has_limits || !l || *l <= 0) return value_max("container " + q(n) + " has no " + res + " limit → the pod is unlimited (-1)");
        if (sum > kMaxQuantityValue - *l) return error(std::string("sum of ") + res + " limits overflows");
        sum += *l;
        terms += (terms.empty() ? "" : " + ") + std::to_string(*l) + (cpu ? "m" : "");
    }
    if (terms.empty()) return value_max("no container listed → unlimited");
    if (!cpu) return value_int(sum, "Σ batch-memory limits " + terms + " = " + std::to_string(sum));
    return value_int(milli_cpu_to_quota(sum), "Σ batch-cpu limits (" + terms + " = " + std::to_string(sum) + "m) × period 100000 / 1000");
}

}  // namespace

Outcome koord_pod_quota(Ctx& c, uint8_t) { return koord_pod_limit(c, true); }
Outcome koord_pod_memory(Ctx& c, uint8_t) { return koord_pod_limit(c, false); }

namespace {

Outcome koord_cpuset_read(Ctx& c, std::string& set) {
    const std::string* a = c.ann(kResStatus);
    if (!a) return absent_ann(kResStatus, " (not bound by koord-scheduler)");
    try {
        set = parse_resource_status_cpuset(*a);
    } catch (const InputError& e) { return error(e.what()); }
    if (set.empty()) return absent(std::string(kResStatus) + " has no cpuset");
    // Whoever wrote the annotation, the cpuset must fit the node, the pod's cgroup and the CPUs
    // other pods hold exclusively (numa.hpp check_pinned_cpuset); else it is refused.
    if (std::string bad = c.pin_check(set); !bad.empty()) return error(std::string(kResStatus) + ": " + bad);
    return value_text(set, std::string("cpuset ") + set + " from " + kResStatus + ", " + c.pin_how);
}

}  // namespace

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
    if (c.in.policy && c.in.policy->koordinator_quota_lift == Policy::QuotaLift::Never)
        return absent("bound to cpuset " + set +
                      " by koord-scheduler: quota kept (settings.koordinator_quota_lift = \"never\", koordlet --disable-unset-cpu-quota)");
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

/// koordlet's OOMScoreAdj hook (koordinator-sh/koordinator@a7a1b76bbf81abd26f9c377de1f31a60dd965f6e
/// pkg/koordlet/runtimehooks/hooks/oomscoreadj/helper.go getOOMScoreAdjForContainer,
/// oom_score_adj.go SetContainerOOMScoreAdj): the container's entry of
/// koordinator.sh/oom-score-adj-spec, else koordinator.sh/oom-score-adj (Go ParseInt); an empty
/// value counts as absent; a spec that does not parse sets nothing (no fallback); a value outside
/// [-1000, 1000] is skipped. koordlet reconciles every container but the sandbox.
Outcome koord_oom_score_adj(Ctx& c, uint8_t) {
    static const char* kSpec = "koordinator.sh/oom-score-adj-spec";
    static const char* kPod = "koordinator.sh/oom-score-adj";
    std::optional<int64_t> v;
    std::string how;
    if (const std::string* s = c.ann(kSpec); s && !s->empty()) {
        std::map<std::string, int64_t> m;
        try {
            m = parse_oom_score_adj_spec(*s);
        } catch (const InputError& e) { return error(std::string(e.what()) + " (koordlet sets nothing for the pod's containers)"); }
        if (auto it = m.find(c.r.container_name); it != m.end()) v = it->second, how = std::string(kSpec) + " " + q(c.r.container_name);
    }
    if (!v) {
        const std::string* p = c.ann(kPod);
        if (!p || p->empty()) {
            if (c.ann(kSpec)) return absent(std::string(kSpec) + " does not list container " + q(c.r.container_name) + " and there is no " + kPod);
            return absent_ann(kPod);
        }
        v = go_parse_int(*p);
        if (!v) return error(std::string(kPod) + " " + q(*p) + " is not an integer (koordlet: failed to parse, sets nothing)");
        how = kPod;
    }
    if (*v < -1000 || *v > 1000) return absent(how + " = " + std::to_string(*v) + " is outside [-1000, 1000]: koordlet skips it");
    return value_int(*v, how + " = " + std::to_string(*v));
}

}  // namespace facts_internal
}  // namespace nriqos
