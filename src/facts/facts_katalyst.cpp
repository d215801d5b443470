// Katalyst's facts and the NUMA placements (katalyst.*, numa.*; issue #23: split out of
// facts.cpp): Katalyst's NUMA binding (katalyst.kubewharf.io/memory_enhancement) and CPU burst
// policy (cpu_enhancement), and the numa.exclusive/bound/shared placements, all placed by
// Ctx::numa_place (facts_context.cpp, numa.hpp). The registry (entries() in facts.cpp) maps each
// fact name to its evaluator here.
#include "facts/facts_internal.hpp"

#include <cerrno>
#include <cmath>
#include <cstdlib>

namespace nriqos {
namespace facts_internal {

namespace {

constexpr const char* kKatalystLevel = "katalyst.kubewharf.io/qos_level";
constexpr const char* kKatalystMem = "katalyst.kubewharf.io/memory_enhancement";

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

}  // namespace

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

}  // namespace facts_internal
}  // namespace nriqos
