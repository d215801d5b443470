// The lossless JSON form of a compiled Policy (policy_to_json, policy_from_json: tests and tools).
#include "policy/policy.hpp"

#include <stdexcept>

#include "model/fact_table.hpp"

using nlohmann::json;

namespace nriqos {

// ---- JSON form (tests and tools) ---------------------------------------------------------

namespace {
json globmap_json(const GlobMap& m) {
    json a = json::array();
    for (const auto& [k, v] : m) a.push_back({k, v});
    return a;
}
GlobMap globmap_from(const json& a) {
    GlobMap m;
    for (const auto& e : a) m.emplace_back(e.at(0).get<std::string>(), e.at(1).get<std::string>());
    return m;
}
json knobs_json(const std::vector<KnobSetting>& ks) {
    json a = json::array();
    for (const auto& k : ks) a.push_back({static_cast<int>(k.id), static_cast<int>(k.value.kind), k.value.num, k.value.text, k.raw_file, k.raw_ctrl});
    return a;
}
std::vector<KnobSetting> knobs_from(const json& a) {
    std::vector<KnobSetting> out;
    for (const auto& e : a) {
        KnobSetting k;
        int id = e.at(0).get<int>(), kind = e.at(1).get<int>();
        if (id < 0 || id > static_cast<int>(KnobId::Raw) || kind < 0 || kind > KnobValue::Fact) throw InputError("compiled policy: bad knob");
        k.id = static_cast<KnobId>(id);
        k.value.kind = static_cast<KnobValue::Kind>(kind);
        k.value.num = e.at(2).get<int64_t>();
        k.value.text = e.at(3).get<std::string>();
        k.raw_file = e.at(4).get<std::string>();
        k.raw_ctrl = e.at(5).get<std::string>();
        if (k.value.kind == KnobValue::Fact && !find_fact(k.value.text)) throw InputError("compiled policy: unknown fact");
        out.push_back(std::move(k));
    }
    return out;
}
}  // namespace

json policy_to_json(const Policy& p) {
    json j;
    j["version"] = p.version;
    j["default_class"] = p.default_class;
    j["fail_closed"] = p.fail_closed;
    j["cpu_weight_formula"] = weight_formula_name(p.cpu_weight_formula);
    j["koordinator_quota_lift"] = p.koordinator_quota_lift == Policy::QuotaLift::Fits    ? "fits"
                                  : p.koordinator_quota_lift == Policy::QuotaLift::Never ? "never"
                                                                                         : "cpuset";
    j["katalyst_reserved"] = {p.katalyst_reserved_cpus, p.katalyst_reserved_count};
    j["katalyst_agent"] = {p.katalyst_default_numa_exclusive, static_cast<int>(p.katalyst_dedicated_default_burst), p.katalyst_default_burst_percent};
    j["source"] = p.source;
    j["sinks"] = {p.sinks.metrics_file_set, p.sinks.metrics_file, p.sinks.event_log_set, p.sinks.event_log, p.sinks.event_log_max_bytes};
    json rules = json::array();
    for (const auto& r : p.rules) {
        json kq = json::array();
        for (auto q : r.match.kube_qos) kq.push_back(static_cast<int>(q));
        rules.push_back({{"n", r.name},
                         {"c", r.cls},
                         {"l", r.line},
                         {"merge", r.merge},
                         {"m",
                          {globmap_json(r.match.labels), globmap_json(r.match.annotations), globmap_json(r.match.labels_or_annotations),
                           r.match.namespaces, r.match.pod_names, r.match.container_names, r.match.kind, kq}}});
    }
    j["rules"] = std::move(rules);
    json classes = json::object();
    for (const auto& [n, c] : p.classes) {
        if (c.knobs_pending()) throw std::logic_error("policy_to_json: class " + n + ": knob lists not decoded (policy_cache::decode_knobs)");
        classes[n] = {{"d", c.description},
                      {"f", c.fail_closed},
                      {"c", knobs_json(c.container)},
                      {"p", knobs_json(c.pod)},
                      {"s", knobs_json(c.sandbox)},
                      {"g", {c.gate.enabled, c.gate.namespaces, globmap_json(c.gate.labels), c.gate.fallback}},
                      {"pwf", c.pod_weight_formula_set ? json(weight_formula_name(c.pod_weight_formula)) : json(nullptr)},
                      {"cwf", c.ctr_weight_formula_set ? json(weight_formula_name(c.ctr_weight_formula)) : json(nullptr)},
                      {"am", c.accept_merge}};
    }
    j["classes"] = std::move(classes);
    j["guarded_labels"] = globmap_json(p.guarded_labels);
    j["guarded_annotations"] = globmap_json(p.guarded_annotations);
    json groups = json::object();
    for (const auto& [n, g] : p.resctrl_groups)
        groups[n] = {g.l3, g.mb, g.l3_percent, g.l3_start_percent, g.mb_percent, g.l3_round_down, g.manage, g.line};
    j["resctrl"] = std::move(groups);
    json leave = json::array();
    for (const auto& lf : p.leave_to_others) leave.push_back({lf.field, lf.plugin});
    j["leave_to_others"] = std::move(leave);
    return j;
}

Policy policy_from_json(const json& j) {
    try {
        Policy p;
        p.version = j.at("version").get<int>();
        if (p.version != kPolicyVersion) throw InputError("compiled policy: wrong version");
        p.default_class = j.at("default_class").get<std::string>();
        p.fail_closed = j.at("fail_closed").get<bool>();
        {
            const std::string f = j.at("cpu_weight_formula").get<std::string>();
            if (f == "linear") p.cpu_weight_formula = WeightFormula::Linear;
            else if (f == "log-quadratic") p.cpu_weight_formula = WeightFormula::LogQuadratic;
            else if (f == "auto") p.cpu_weight_formula = WeightFormula::Auto;
            else throw InputError("compiled policy: bad cpu_weight_formula");
        }
        if (j.contains("koordinator_quota_lift")) {
            const std::string f = j.at("koordinator_quota_lift").get<std::string>();
            if (f == "fits") p.koordinator_quota_lift = Policy::QuotaLift::Fits;
            else if (f == "never") p.koordinator_quota_lift = Policy::QuotaLift::Never;
            else if (f != "cpuset") throw InputError("compiled policy: bad koordinator_quota_lift");
        }
        p.source = j.at("source").get<std::string>();
        if (j.contains("katalyst_reserved")) {
            p.katalyst_reserved_cpus = j.at("katalyst_reserved").at(0).get<std::string>();
            p.katalyst_reserved_count = j.at("katalyst_reserved").at(1).get<unsigned>();
        }
        if (j.contains("katalyst_agent")) {
            const json& k = j.at("katalyst_agent");
            p.katalyst_default_numa_exclusive = k.at(0).get<bool>();
            const int b = k.at(1).get<int>();
            if (b < 0 || b > static_cast<int>(Policy::KatalystBurst::Closed))
                throw InputError("compiled policy: bad katalyst_dedicated_default_burst");
            p.katalyst_dedicated_default_burst = static_cast<Policy::KatalystBurst>(b);
            p.katalyst_default_burst_percent = k.at(2).get<unsigned>();
            if (p.katalyst_default_burst_percent > 100) throw InputError("compiled policy: bad katalyst_default_burst_percent");
        }
        if (j.contains("sinks")) {
            const json& s = j.at("sinks");
            p.sinks.metrics_file_set = s.at(0).get<bool>();
            p.sinks.metrics_file = s.at(1).get<std::string>();
            p.sinks.event_log_set = s.at(2).get<bool>();
            p.sinks.event_log = s.at(3).get<std::string>();
            p.sinks.event_log_max_bytes = s.at(4).get<uint64_t>();
        }
        for (const auto& r : j.at("rules")) {
            Rule x;
            x.name = r.at("n").get<std::string>();
            x.cls = r.at("c").get<std::string>();
            x.line = r.at("l").get<int>();
            if (r.contains("merge")) x.merge = r.at("merge").get<bool>();
            const json& m = r.at("m");
            x.match.labels = globmap_from(m.at(0));
            x.match.annotations = globmap_from(m.at(1));
            x.match.labels_or_annotations = globmap_from(m.at(2));
            x.match.namespaces = m.at(3).get<std::vector<std::string>>();
            x.match.pod_names = m.at(4).get<std::vector<std::string>>();
            x.match.container_names = m.at(5).get<std::vector<std::string>>();
            x.match.kind = m.at(6).get<int>();
            for (const auto& q : m.at(7)) x.match.kube_qos.push_back(static_cast<KubeQos>(q.get<int>()));
            p.rules.push_back(std::move(x));
        }
        for (const auto& [n, c] : j.at("classes").items()) {
            ClassDef cd;
            cd.name = n;
            cd.description = c.at("d").get<std::string>();
            cd.fail_closed = c.at("f").get<bool>();
            cd.container = knobs_from(c.at("c"));
            cd.pod = knobs_from(c.at("p"));
            if (c.contains("s")) cd.sandbox = knobs_from(c.at("s"));
            const json& g = c.at("g");
            cd.gate.enabled = g.at(0).get<bool>();
            cd.gate.namespaces = g.at(1).get<std::vector<std::string>>();
            cd.gate.labels = globmap_from(g.at(2));
            cd.gate.fallback = g.at(3).get<std::string>();
            if (c.contains("am")) cd.accept_merge = c.at("am").get<bool>();
            if (c.contains("pwf") && !c.at("pwf").is_null()) {
                const std::string f = c.at("pwf").get<std::string>();
                cd.pod_weight_formula_set = true;
                if (f == "linear") cd.pod_weight_formula = WeightFormula::Linear;
                else if (f == "log-quadratic") cd.pod_weight_formula = WeightFormula::LogQuadratic;
                else if (f == "auto") cd.pod_weight_formula = WeightFormula::Auto;
                else throw InputError("compiled policy: bad pod_cpu_weight_formula");
            }
            if (c.contains("cwf") && !c.at("cwf").is_null()) {
                const std::string f = c.at("cwf").get<std::string>();
                cd.ctr_weight_formula_set = true;
                if (f == "linear") cd.ctr_weight_formula = WeightFormula::Linear;
                else if (f == "log-quadratic") cd.ctr_weight_formula = WeightFormula::LogQuadratic;
                else if (f == "auto") cd.ctr_weight_formula = WeightFormula::Auto;
                else throw InputError("compiled policy: bad container_cpu_weight_formula");
            }
            p.classes.emplace(n, std::move(cd));
        }
        p.guarded_labels = globmap_from(j.at("guarded_labels"));
        p.guarded_annotations = globmap_from(j.at("guarded_annotations"));
        if (j.contains("resctrl"))
            for (const auto& [n, g] : j.at("resctrl").items()) {
                ResctrlGroupDef d;
                d.name = n;
                d.l3 = g.at(0).get<std::string>();
                d.mb = g.at(1).get<std::string>();
                d.l3_percent = g.at(2).get<int>();
                d.l3_start_percent = g.at(3).get<int>();
                d.mb_percent = g.at(4).get<int>();
                d.l3_round_down = g.at(5).get<bool>();
                d.manage = g.at(6).get<bool>();
                d.line = g.at(7).get<int>();
                p.resctrl_groups.emplace(n, std::move(d));
            }
        if (j.contains("leave_to_others"))
            for (const auto& e : j.at("leave_to_others")) {
                LeftField lf;
                lf.field = e.at(0).get<std::string>();
                lf.plugin = e.at(1).get<std::string>();
                std::string err;
                if (!field_knobs(lf.field, lf.covers, err)) throw InputError("compiled policy: leave_to_others: " + err);
                p.leave_to_others.push_back(std::move(lf));
            }
        if (!p.classes.count(p.default_class)) throw InputError("compiled policy: unknown default class");
        for (const auto& r : p.rules)
            if (!p.classes.count(r.cls)) throw InputError("compiled policy: unknown class in rule");
        return p;
    } catch (const json::exception& e) { throw InputError(std::string("compiled policy: ") + e.what()); }
}

}  // namespace nriqos
