// Katalyst's facts and the NUMA placements (katalyst.*, numa.*; issue #23: split out of
// facts.cpp): Katalyst's NUMA binding (katalyst.kubewharf.io/memory_enhancement) and CPU burst
// policy (cpu_enhancement), and the numa.exclusive/bound/shared placements, all placed by
// Ctx::numa_place (facts_context.cpp, numa.hpp). The registry (entries() in facts.cpp) maps each
// fact name to its evaluator here.
#include "facts/facts_internal.hpp"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <map>

namespace nriqos {
namespace facts_internal {

namespace {

constexpr const char* kKatalystLevel = "katalyst.kubewharf.io/qos_level";
constexpr const char* kKatalystMem = "katalyst.kubewharf.io/memory_enhancement";

constexpr const char* kKatalystCpu = "katalyst.kubewharf.io/cpu_enhancement";

/// numa_number / numa_ids of a dedicated_cores pod: the cpu_enhancement keys
/// "katalyst.kubewharf.io/numa_number" (strconv.Atoi) and "katalyst.kubewharf.io/numa_ids" (a
/// cpuset list), katalyst-core@d8c28ea pkg/util/qos/cpu_enhancement.go AnnotationsGetNUMANumber /
/// AnnotationsGetNUMAIDs (the keys are the agent's --numa-number-annotation-key /
/// --numa-ids-annotation-key defaults). A cpu_enhancement that is not a JSON object of strings
/// gives none (GetQoSEnhancementKVs logs and returns an empty map) with a warning; a bad value
/// is an error (calculateHints fails the pod). `text` says what was read, for explain.
std::optional<NumaSpan> katalyst_span(Ctx& c, std::string& err, std::string& text) {
    NumaSpan span;
    const std::string* a = c.ann(kKatalystCpu);
    if (!a) return span;
    std::string why;
    auto m = parse_string_map(*a, &why);
    if (!m) {
        c.warnings.push_back(std::string(kKatalystCpu) + ": " + why + " (Katalyst reads no numa_number from it)");
        return span;
    }
    // calculateHints' other cpu_enhancement constraints are not reproduced: said, not silent
    for (const char* k : {"distribute_evenly_across_numa", "full_pcpus_pairing", "align_by_socket"})
        if (auto f = m->find(k); f != m->end() && f->second == "true")
            c.warnings.push_back(std::string(kKatalystCpu) + ": " + k +
                                 " is not reproduced (the CPUs are taken whole cores first from the chosen nodes)");
    if (auto n = m->find("katalyst.kubewharf.io/numa_number"); n != m->end() && !n->second.empty()) {
        const std::string& v = n->second;
        size_t i = (v[0] == '+' || v[0] == '-') ? 1 : 0;
        if (v.size() > 10 || i == v.size() || v.find_first_not_of("0123456789", i) != std::string::npos || v[0] == '-') {
            err = std::string(kKatalystCpu) + ": numa_number \"" + v.substr(0, 32) + "\" is not a number of NUMA nodes (Katalyst refuses the pod)";
            return std::nullopt;
        }
        span.number = static_cast<unsigned>(std::stoul(v.substr(i)));
        text = "numa_number " + std::to_string(span.number);
    }
    if (auto n = m->find("katalyst.kubewharf.io/numa_ids"); n != m->end() && !n->second.empty()) {
        std::string bad;
        auto ids = CpuSet::parse(n->second, &bad);
        if (!ids) {
            err = std::string(kKatalystCpu) + ": numa_ids: " + bad + " (Katalyst refuses the pod)";
            return std::nullopt;
        }
        span.ids = *ids;
        text = "numa_ids " + ids->str() + (span.number ? " (wins over numa_number)" : "");
    }
    return span;
}

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
    const bool dedicated = level == "dedicated_cores";
    // numa_exclusive: the pod's key, else the agent's --qos-enhancement-default-values
    // (settings.katalyst_default_numa_exclusive; pkg/config/generic/qos.go FilterQoSEnhancementMap
    // fills an undeclared key with QoSEnhancementDefaultValues)
    auto x = m->find("numa_exclusive");
    const bool by_default = x == m->end() && c.in.policy && c.in.policy->katalyst_default_numa_exclusive;
    bool exclusive = dedicated && ((x != m->end() && x->second == "true") || by_default);
    NumaMode mode = dedicated ? (exclusive ? NumaMode::Exclusive : NumaMode::Bound) : NumaMode::Shared;
    std::string because =
        "katalyst " + level + " numa_binding" +
        (exclusive ? by_default ? " + numa_exclusive (settings.katalyst_default_numa_exclusive: --qos-enhancement-default-values numa_exclusive=true)"
                                : " + numa_exclusive"
                   : "");
    NumaSpan span;
    if (dedicated) {  // calculateHints; shared_cores hints take no numa number
        std::string err, text;
        auto s = katalyst_span(c, err, text);
        if (!s) return error(err);
        span = *s;
        if (!text.empty()) because += " + " + text;
    }
    return c.numa_place(mode, mems, because, true, span);
}

}  // namespace

/// katalyst.kubewharf.io/cpu_enhancement cpu_burst_policy (katalyst-core@v0.5.47
/// pkg/agent/qrm-plugins/cpu/dynamicpolicy/cpuburst/manager.go UpdateCPUBurst,
/// pkg/util/qos/cpu_enhancement.go GetPodCPUBurstPolicyFromCPUEnhancement /
/// GetPodCPUBurstPercentFromCPUEnhancement, pkg/agent/qrm-plugins/cpu/util/util.go
/// GetPodCPUBurstPolicy / GetPodCPUBurstPercent / CalculateCPUBurstFromPercent): default → no
/// change; closed → 0; static → quota × percent / 100 (cpu_burst_percent, ParseFloat, above 100
/// → 100; absent → the agent's DefaultCPUBurstPercent, settings.katalyst_default_burst_percent,
/// 100 by default); reclaimed_cores never bursts (any declared policy → closed); dynamic is not
/// supported by Katalyst either. A dedicated_cores pod whose policy is default (or absent) takes
/// the agent's default (util.go getOverriddenDedicatedCoresPodBurstPolicy):
/// settings.katalyst_dedicated_default_burst "static" (--enable-default-dedicated-cores-cpu-burst,
/// or the AdminQoSConfiguration's EnableDedicatedCoresDefaultCPUBurst = true), "closed"
/// (EnableDedicatedCoresDefaultCPUBurst = false), "unset" (nil, the agent's default: no change).
/// The shared_cores override (the sole shared_cores pod of the node) needs the node's pod list
/// and is not reproduced.
Outcome katalyst_burst(Ctx& c, uint8_t) {
    const std::string* a = c.ann(kKatalystCpu);
    std::map<std::string, std::string> m;
    if (a) {
        std::string why;
        auto parsed = parse_string_map(*a, &why);
        if (!parsed) return error(std::string(kKatalystCpu) + ": " + why);
        if (!why.empty()) c.warnings.push_back(std::string(kKatalystCpu) + ": " + why);
        m = std::move(*parsed);
    }
    const std::string* lvl = c.ann(kKatalystLevel);
    auto pol = m.find("cpu_burst_policy");
    if (lvl && *lvl == "reclaimed_cores" && pol != m.end())
        return value_int(0, "reclaimed_cores never burst (cpu_burst_policy " + q(pol->second) + " → closed)");
    std::string policy = pol == m.end() ? "default" : pol->second;
    std::string policy_how = "cpu_burst_policy " + policy;
    const Policy::KatalystBurst dflt = c.in.policy ? c.in.policy->katalyst_dedicated_default_burst : Policy::KatalystBurst::Unset;
    if (policy == "default" && lvl && *lvl == "dedicated_cores" && dflt != Policy::KatalystBurst::Unset) {
        policy = dflt == Policy::KatalystBurst::Static ? "static" : "closed";
        policy_how = "dedicated_cores default → " + policy + " (settings.katalyst_dedicated_default_burst = \"" + policy + "\": " +
                     (dflt == Policy::KatalystBurst::Static ? "--enable-default-dedicated-cores-cpu-burst or EnableDedicatedCoresDefaultCPUBurst true"
                                                            : "EnableDedicatedCoresDefaultCPUBurst false") +
                     ")";
    }
    if (policy == "default") {
        if (!a) return absent_ann(kKatalystCpu, " (Katalyst: no change)");
        return absent("cpu_burst_policy default: Katalyst leaves the burst");
    }
    if (policy == "closed") return value_int(0, policy_how + " → 0");
    if (policy != "static") return absent("cpu_burst_policy " + q(policy) + " is not supported by Katalyst (default, closed, static)");
    const unsigned dpct = c.in.policy ? c.in.policy->katalyst_default_burst_percent : 100;
    double pct = dpct;
    std::string pct_how = "default percent " + std::to_string(dpct) + (dpct != 100 ? " (settings.katalyst_default_burst_percent)" : "");
    if (auto p = m.find("cpu_burst_percent"); p != m.end()) {
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
    return value_int(burst, policy_how + ": " + how + " × " + pct_how + " / 100");
}

Outcome katalyst_cpus(Ctx& c, uint8_t) { return katalyst_numa(c, false); }
Outcome katalyst_mems(Ctx& c, uint8_t) { return katalyst_numa(c, true); }
Outcome numa_excl_cpus(Ctx& c, uint8_t) { return c.numa_place(NumaMode::Exclusive, false, ""); }
Outcome numa_excl_mems(Ctx& c, uint8_t) { return c.numa_place(NumaMode::Exclusive, true, ""); }
Outcome numa_bound_cpus(Ctx& c, uint8_t) { return c.numa_place(NumaMode::Bound, false, ""); }
Outcome numa_bound_mems(Ctx& c, uint8_t) { return c.numa_place(NumaMode::Bound, true, ""); }
Outcome numa_shared_cpus(Ctx& c, uint8_t) { return c.numa_place(NumaMode::Shared, false, ""); }
Outcome numa_shared_mems(Ctx& c, uint8_t) { return c.numa_place(NumaMode::Shared, true, ""); }

}  // namespace facts_internal
}  // namespace nriqos
