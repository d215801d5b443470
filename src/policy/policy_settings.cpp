// The one declaration of the policy's [settings] (policy_settings.hpp): the table, and the small
// helpers its readers and writers share.
#include "policy/policy_settings.hpp"

#include <algorithm>

#include "os/cpuset.hpp"

namespace nriqos {

namespace {

using T = SettingType;

/// The rows, in the order `check` lists the allowed keys ("settings: unknown key ... allowed:").
std::vector<SettingDef> make_table() {
    return {
        setting("default_class", T::Text, NRIQOS_SETTING_REF(default_class))
            .longest(63)
            .flat(kFlatHead, 0)
            .json("default_class", -1, true)
            .documented("the class of a request no rule matches (required; must exist and not be gated)"),
        setting("fail", T::FailMode, NRIQOS_SETTING_REF(fail_closed))
            .flat(kFlatHead, 1)
            .json("fail_closed", -1, true)
            .documented("\"open\" or \"closed\": what an error before a class is known does to the container"),
        setting("cpu_weight_formula", T::Choice, NRIQOS_SETTING_REF(cpu_weight_formula))
            .one_of("auto", "log-quadratic", "linear")
            .expecting("expected \"auto\", \"log-quadratic\" or \"linear\"")
            .flat(kFlatHead, 2)
            .json("cpu_weight_formula", -1, true)
            .documented("the cgroup v2 cpu.shares -> cpu.weight conversion of writes (auto: the runtime's own)"),
        setting("koordinator_quota_lift", T::Choice, NRIQOS_SETTING_REF(koordinator_quota_lift))
            .one_of("cpuset", "fits", "never")
            .expecting(
                "expected \"cpuset\" (koordlet: lift whenever bound to a cpuset), \"fits\" (only when the quota pays for the cpuset) or \"never\" (koordlet --disable-unset-cpu-quota)")
            .flat(kFlatHead, 3)
            .json("koordinator_quota_lift")
            .documented("when koordinator.cpuset_quota lifts the CFS quota of a pod bound to a cpuset"),
        setting("metrics_file", T::Path, NRIQOS_SETTING_REF(sinks.metrics_file))
            .with_aux(NRIQOS_SETTING_REF(sinks.metrics_file_set))
            .flat(kFlatMiddle, 1)
            .json("sinks", 0)
            .documented("the node_exporter textfile the hook writes its metrics to (\"\": none)"),
        setting("event_log", T::Path, NRIQOS_SETTING_REF(sinks.event_log))
            .with_aux(NRIQOS_SETTING_REF(sinks.event_log_set))
            .flat(kFlatMiddle, 2)
            .json("sinks", 2)
            .documented("the JSON-lines event log (\"\": stderr only)"),
        setting("event_log_max_bytes", T::Count, NRIQOS_SETTING_REF(sinks.event_log_max_bytes))
            .range(65536, int64_t(1) << 40)
            .by_default(0)
            .expecting("expected an integer from {lo} to 2^40")
            .flat(kFlatMiddle, 3)
            .json("sinks", 4)
            .read_last()
            .documented("the size (bytes) beyond which the event log is rotated (0: the default)"),
        setting("leave_to_others", T::FieldOwners, NRIQOS_SETTING_REF(leave_to_others))
            .flat(kFlatMiddle, 0)
            .json("leave_to_others")
            .documented("NRI fields another plugin owns: nri-qos never sets the knobs they cover"),
        setting("katalyst_reserved_cpus", T::CpusOrCount, NRIQOS_SETTING_REF(katalyst_reserved_cpus))
            .with_aux(NRIQOS_SETTING_REF(katalyst_reserved_count))
            .range(0, CpuSet::kMaxId + 1)
            .expecting("expected a CPU list (\"0-1\") or a count (2)")
            .flat(kFlatTail, 0)
            .json("katalyst_reserved", 0)
            .documented("the CPUs Katalyst's QRM CPU plugin reserves for the system: a list or a count"),
        setting("katalyst_default_numa_exclusive", T::Bool, NRIQOS_SETTING_REF(katalyst_default_numa_exclusive))
            .expecting("expected true (Katalyst --qos-enhancement-default-values numa_exclusive=true) or false")
            .flat(kFlatTail, 1)
            .json("katalyst_agent", 0)
            .documented("a dedicated_cores numa_binding pod that declares no numa_exclusive is exclusive"),
        setting("katalyst_dedicated_default_burst", T::Choice, NRIQOS_SETTING_REF(katalyst_dedicated_default_burst))
            .one_of("unset", "static", "closed")
            .expecting("expected \"unset\" (Katalyst's default), \"static\" (EnableDedicatedCoresDefaultCPUBurst true) or \"closed\" (false)")
            .flat(kFlatTail, 2)
            .json("katalyst_agent", 1)
            .documented("the CPU burst policy of a dedicated_cores pod whose cpu_enhancement says default"),
        setting("katalyst_default_burst_percent", T::Count, NRIQOS_SETTING_REF(katalyst_default_burst_percent))
            .range(0, 100)
            .by_default(100)
            .expecting("expected an integer from {lo} to {hi} (Katalyst DefaultCPUBurstPercent)")
            .flat(kFlatTail, 3)
            .json("katalyst_agent", 2)
            .documented("the percent of a static burst whose pod names no cpu_burst_percent"),
        setting("evaluator_events", T::Count, NRIQOS_SETTING_REF(evaluator_events))
            .range(1, kMaxEvaluatorEvents)
            .by_default(1)
            .expecting("expected an integer from {lo} (one evaluator process per event) to {hi}")
            .flat(kFlatMiddle, 4)
            .json("evaluator_events")
            .documented("how many events one sandboxed evaluator of the native relay serves"),
    };
}

}  // namespace

SettingsTable settings_table() {
    static const std::vector<SettingDef> rows = make_table();
    return {rows.data(), rows.data() + rows.size()};
}

const std::vector<const SettingDef*>& flat_settings(FlatBlock block) {
    static const auto blocks = [] {
        std::vector<std::vector<const SettingDef*>> b(kFlatTail + 1);
        for (const SettingDef& d : settings_table()) b[d.flat_block].push_back(&d);
        for (auto& v : b) std::sort(v.begin(), v.end(), [](const SettingDef* x, const SettingDef* y) { return x->flat_order < y->flat_order; });
        return b;
    }();
    return blocks[block];
}

std::string setting_expect(const SettingDef& d) {
    std::string s = d.expect;
    for (const auto& [mark, v] : {std::pair<const char*, int64_t>{"{lo}", d.lo}, {"{hi}", d.hi}})
        for (size_t at = s.find(mark); at != std::string::npos; at = s.find(mark)) s.replace(at, 4, std::to_string(v));
    return s;
}

size_t choice_count(const SettingDef& d) {
    size_t n = 0;
    while (n < 4 && d.choices[n]) ++n;
    return n;
}

bool setting_value_ok(const SettingDef& d, int64_t v) {
    switch (d.type) {
        case T::Bool:
        case T::FailMode: return v == 0 || v == 1;
        case T::Choice: return v >= 0 && static_cast<size_t>(v) < choice_count(d);
        case T::Count: return v == d.def || (v >= d.lo && v <= d.hi);
        default: return true;
    }
}

}  // namespace nriqos
