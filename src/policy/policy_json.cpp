// The lossless JSON form of a compiled Policy (policy_to_json, policy_from_json: tests and tools).
#include "policy/policy.hpp"
#include "policy/policy_settings.hpp"

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

// ---- [settings] (policy_settings.hpp: the table fixes their keys and shapes) ----------------

/// Where row `d` (plus `off`) is in `j`, creating it.
json& slot(json& j, const SettingDef& d, int off = 0) { return d.json_at < 0 ? j[d.json_key] : j[d.json_key][static_cast<size_t>(d.json_at + off)]; }

void settings_to_json(const Policy& p, json& j) {
    for (const SettingDef& d : settings_table()) {
        if (!d.json_key) continue;
        switch (d.type) {
            case SettingType::Text: slot(j, d) = d.ref.of<std::string>(p); break;
            case SettingType::FailMode:
            case SettingType::Bool: slot(j, d) = d.ref.of<bool>(p); break;
            case SettingType::Choice:
                if (d.json_at < 0) slot(j, d) = d.choices[d.ref.of<uint8_t>(p)];
                else slot(j, d) = static_cast<int>(d.ref.of<uint8_t>(p));
                break;
            case SettingType::Count:
                if (d.ref.kind == SettingRef::U64) slot(j, d) = d.ref.of<uint64_t>(p);
                else slot(j, d) = d.ref.of<uint32_t>(p);
                break;
            case SettingType::Path:
                slot(j, d) = d.aux.of<bool>(p);
                slot(j, d, 1) = d.ref.of<std::string>(p);
                break;
            case SettingType::CpusOrCount:
                slot(j, d) = d.ref.of<std::string>(p);
                slot(j, d, 1) = d.aux.of<uint32_t>(p);
                break;
            case SettingType::FieldOwners: {
                json leave = json::array();
                for (const auto& lf : d.ref.of<std::vector<LeftField>>(p)) leave.push_back({lf.field, lf.plugin});
                slot(j, d) = std::move(leave);
                break;
            }
        }
    }
}

/// Row `d` (plus `off`) in `j`, or nullptr when `j` lacks an optional one.
const json* find_slot(const json& j, const SettingDef& d, int off = 0) {
    if (!d.json_key || (!d.json_required && !j.contains(d.json_key))) return nullptr;
    const json& v = j.at(d.json_key);
    return d.json_at < 0 ? &v : &v.at(static_cast<size_t>(d.json_at + off));
}

/// Setting `d` from its JSON value `v`; throws InputError "compiled policy: bad <key>".
void setting_from_json(const SettingDef& d, const json& j, const json& v, Policy& p) {
    const std::string bad = std::string("compiled policy: bad ") + d.key;
    switch (d.type) {
        case SettingType::Text: d.ref.of<std::string>(p) = v.get<std::string>(); return;
        case SettingType::FailMode:
        case SettingType::Bool: d.ref.of<bool>(p) = v.get<bool>(); return;
        case SettingType::Choice: {
            int64_t i = -1;
            if (d.json_at >= 0) i = v.get<int>();
            else
                for (size_t k = 0; k < choice_count(d); ++k)
                    if (v.get<std::string>() == d.choices[k]) i = static_cast<int64_t>(k);
            if (!setting_value_ok(d, i)) throw InputError(bad);
            d.ref.of<uint8_t>(p) = static_cast<uint8_t>(i);
            return;
        }
        case SettingType::Count:
            if (d.ref.kind == SettingRef::U64) d.ref.of<uint64_t>(p) = v.get<uint64_t>();
            else d.ref.of<uint32_t>(p) = v.get<unsigned>();
            if (!setting_value_ok(d, d.ref.kind == SettingRef::U64 ? static_cast<int64_t>(d.ref.of<uint64_t>(p)) : d.ref.of<uint32_t>(p)))
                throw InputError(bad);
            return;
        case SettingType::Path:
            d.aux.of<bool>(p) = v.get<bool>();
            d.ref.of<std::string>(p) = find_slot(j, d, 1)->get<std::string>();
            return;
        case SettingType::CpusOrCount:
            d.ref.of<std::string>(p) = v.get<std::string>();
            d.aux.of<uint32_t>(p) = find_slot(j, d, 1)->get<unsigned>();
            return;
        case SettingType::FieldOwners:
            for (const auto& e : v) {
                LeftField lf;
                lf.field = e.at(0).get<std::string>();
                lf.plugin = e.at(1).get<std::string>();
                std::string err;
                if (!field_knobs(lf.field, lf.covers, err)) throw InputError(std::string("compiled policy: ") + d.key + ": " + err);
                d.ref.of<std::vector<LeftField>>(p).push_back(std::move(lf));
            }
            return;
    }
}

void settings_from_json(const json& j, Policy& p) {
    for (const SettingDef& d : settings_table())
        if (const json* v = find_slot(j, d)) setting_from_json(d, j, *v, p);
}

json rule_json(const Rule& r) {
    json kq = json::array();
    for (auto q : r.match.kube_qos) kq.push_back(static_cast<int>(q));
    return {{"n", r.name},
            {"c", r.cls},
            {"l", r.line},
            {"merge", r.merge},
            {"m",
             {globmap_json(r.match.labels), globmap_json(r.match.annotations), globmap_json(r.match.labels_or_annotations), r.match.namespaces,
              r.match.pod_names, r.match.container_names, r.match.kind, kq}}};
}

Rule rule_from_json(const json& r) {
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
    return x;
}

/// A class's weight formula ("pwf"/"cwf": a name, or null for the settings' one).
void formula_from_json(const json& c, const char* key, const char* what, bool& set, WeightFormula& f) {
    if (!c.contains(key) || c.at(key).is_null()) return;
    const std::string v = c.at(key).get<std::string>();
    set = true;
    if (v == "linear") f = WeightFormula::Linear;
    else if (v == "log-quadratic") f = WeightFormula::LogQuadratic;
    else if (v == "auto") f = WeightFormula::Auto;
    else throw InputError(std::string("compiled policy: bad ") + what);
}

ClassDef class_from_json(const std::string& n, const json& c) {
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
    formula_from_json(c, "pwf", "pod_cpu_weight_formula", cd.pod_weight_formula_set, cd.pod_weight_formula);
    formula_from_json(c, "cwf", "container_cpu_weight_formula", cd.ctr_weight_formula_set, cd.ctr_weight_formula);
    return cd;
}

ResctrlGroupDef resctrl_from_json(const std::string& n, const json& g) {
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
    return d;
}
}  // namespace

json policy_to_json(const Policy& p) {
    json j;
    j["version"] = p.version;
    settings_to_json(p, j);
    j["source"] = p.source;
    json rules = json::array();
    for (const auto& r : p.rules) rules.push_back(rule_json(r));
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
    return j;
}

Policy policy_from_json(const json& j) {
    try {
        Policy p;
        p.version = j.at("version").get<int>();
        if (p.version != kPolicyVersion) throw InputError("compiled policy: wrong version");
        settings_from_json(j, p);
        p.source = j.at("source").get<std::string>();
        for (const auto& r : j.at("rules")) p.rules.push_back(rule_from_json(r));
        for (const auto& [n, c] : j.at("classes").items()) p.classes.emplace(n, class_from_json(n, c));
        p.guarded_labels = globmap_from(j.at("guarded_labels"));
        p.guarded_annotations = globmap_from(j.at("guarded_annotations"));
        if (j.contains("resctrl"))
            for (const auto& [n, g] : j.at("resctrl").items()) p.resctrl_groups.emplace(n, resctrl_from_json(n, g));
        if (!p.classes.count(p.default_class)) throw InputError("compiled policy: unknown default class");
        for (const auto& r : p.rules)
            if (!p.classes.count(r.cls)) throw InputError("compiled policy: unknown class in rule");
        return p;
    } catch (const json::exception& e) { throw InputError(std::string("compiled policy: ") + e.what()); }
}

}  // namespace nriqos
