#include "event/classify.hpp"

#include <algorithm>

namespace nriqos {

namespace {
using SMap = std::map<std::string, std::string>;

bool map_matches(const GlobMap& want, const SMap& have) {
    for (const auto& [k, g] : want) {
        auto it = have.find(k);
        if (it == have.end() || !glob_match(g, it->second)) return false;
    }
    return true;
}

bool any_glob(const std::vector<std::string>& globs, const std::string& v) {
    if (globs.empty()) return true;
    for (const auto& g : globs)
        if (glob_match(g, v)) return true;
    return false;
}

bool rule_matches(const Match& m, const Facts& f) {
    const Request& r = *f.req;
    if (m.kind == 1 && !r.is_sandbox) return false;
    if (m.kind == 2 && r.is_sandbox) return false;
    if (!m.kube_qos.empty()) {
        bool ok = false;
        for (auto q : m.kube_qos) ok = ok || q == f.kube_qos;
        if (!ok) return false;
    }
    if (!any_glob(m.namespaces, r.pod_namespace) || !any_glob(m.pod_names, r.pod_name)) return false;
    if (!m.container_names.empty() && (r.is_sandbox || !any_glob(m.container_names, r.container_name))) return false;
    if (!map_matches(m.labels, r.labels) || !map_matches(m.annotations, r.annotations)) return false;
    for (const auto& [k, g] : m.labels_or_annotations) {
        auto l = r.labels.find(k);
        auto a = r.annotations.find(k);
        bool ok = (l != r.labels.end() && glob_match(g, l->second)) || (a != r.annotations.end() && glob_match(g, a->second));
        if (!ok) return false;
    }
    return true;
}
/// Why the pod qualifies for `gate` (rules 1-3 of classify.hpp), or "" when it does not; `why_not`
/// then says why.
std::string gate_pass(const Policy& p, const Gate& gate, const Rule* rule, const Request& r, std::string& why_not) {
    if (!gate.namespaces.empty() && any_glob(gate.namespaces, r.pod_namespace)) return "namespace \"" + r.pod_namespace + "\" is in gate.namespaces";
    why_not = "namespace \"" + r.pod_namespace + "\" does not qualify";
    if (!gate.labels.empty()) {
        const std::string* undeclared = nullptr;
        for (const auto& [k, g] : gate.labels)
            if (!undeclared && !guarded_note(p.guarded_labels, k)) undeclared = &k;
        if (undeclared) why_not += " and gate label \"" + *undeclared + "\" is not declared in [guarded.labels]";
        else if (map_matches(gate.labels, r.labels))
            return "gate.labels match (guarded: " + *guarded_note(p.guarded_labels, gate.labels.front().first) + ")";
    }
    if (!rule) return "";
    const Match& m = rule->match;
    std::string first;  // a guarded key the rule matched on, for the reason
    auto need = [&](const KeyNotes& notes, const std::string& k, const char* kind) {
        const std::string* note = guarded_note(notes, k);
        if (!note) {
            why_not += std::string(" and ") + kind + " \"" + k + "\" is not declared in [guarded." + kind + "s]";
            return false;
        }
        if (first.empty()) first = std::string(kind) + " \"" + k + "\" is guarded (" + *note + ")";
        return true;
    };
    for (const auto& [k, g] : m.labels)
        if (!need(p.guarded_labels, k, "label")) return "";
    for (const auto& [k, g] : m.annotations)
        if (!need(p.guarded_annotations, k, "annotation")) return "";
    for (const auto& [k, g] : m.labels_or_annotations) {
        auto l = r.labels.find(k);
        bool as_label = l != r.labels.end() && glob_match(g, l->second);
        if (!need(as_label ? p.guarded_labels : p.guarded_annotations, k, as_label ? "label" : "annotation")) return "";
    }
    return first;  // "" when the rule matched on no pod label/annotation at all
}

std::string list_text(const std::vector<std::string>& v) {
    std::string s = "[";
    for (size_t i = 0; i < v.size() && i < 8; ++i) s += (i ? ", " : "") + v[i];
    if (v.size() > 8) s += ", ...";
    return s + "]";
}

std::string map_mismatch(const char* what, const GlobMap& want, const SMap& have) {
    for (const auto& [k, g] : want) {
        auto it = have.find(k);
        if (it == have.end()) return std::string(what) + ": " + k + " absent";
        if (!glob_match(g, it->second)) return std::string(what) + ": " + k + "=\"" + it->second + "\" does not match \"" + g + "\"";
    }
    return "";
}
}  // namespace

std::string rule_mismatch(const Rule& rule, const Facts& f) {
    const Match& m = rule.match;
    const Request& r = *f.req;
    if (m.kind == 1 && !r.is_sandbox) return "kind: sandbox only, this is a container";
    if (m.kind == 2 && r.is_sandbox) return "kind: container only, this is a sandbox";
    if (!m.kube_qos.empty()) {
        bool ok = false;
        std::string want;
        for (auto q : m.kube_qos) {
            ok = ok || q == f.kube_qos;
            want += std::string(want.empty() ? "" : ", ") + kube_qos_name(q);
        }
        if (!ok) return std::string("kube_qos: ") + kube_qos_name(f.kube_qos) + " not in [" + want + "]";
    }
    if (!any_glob(m.namespaces, r.pod_namespace)) return "namespace \"" + r.pod_namespace + "\" not in " + list_text(m.namespaces);
    if (!any_glob(m.pod_names, r.pod_name)) return "pod name \"" + r.pod_name + "\" not in " + list_text(m.pod_names);
    if (!m.container_names.empty()) {
        if (r.is_sandbox) return "container_name: a sandbox has no container name";
        if (!any_glob(m.container_names, r.container_name))
            return "container name \"" + r.container_name + "\" not in " + list_text(m.container_names);
    }
    std::string e = map_mismatch("labels", m.labels, r.labels);
    if (e.empty()) e = map_mismatch("annotations", m.annotations, r.annotations);
    if (!e.empty()) return e;
    for (const auto& [k, g] : m.labels_or_annotations) {
        auto l = r.labels.find(k);
        auto a = r.annotations.find(k);
        bool ok = (l != r.labels.end() && glob_match(g, l->second)) || (a != r.annotations.end() && glob_match(g, a->second));
        if (ok) continue;
        if (l == r.labels.end() && a == r.annotations.end()) return "labels_or_annotations: " + k + " absent";
        const std::string& v = l != r.labels.end() ? l->second : a->second;
        return "labels_or_annotations: " + k + "=\"" + v + "\" does not match \"" + g + "\"";
    }
    return rule_matches(m, f) ? "" : "does not match";
}

Decision classify(const Policy& policy, const Facts& facts) {
    Decision d;
    d.rule = "default";
    std::string cls = policy.default_class;
    const Rule* matched = nullptr;
    size_t at = policy.rules.size();
    for (size_t i = 0; i < policy.rules.size(); ++i) {
        const Rule& rule = policy.rules[i];
        if (rule_matches(rule.match, facts)) {
            d.rule = rule.name;
            cls = rule.cls;
            matched = &rule;
            at = i;
            break;
        }
    }
    d.requested = cls;
    const ClassDef* c = &policy.classes.at(cls);
    if (c->gate.enabled) {
        std::string why_not;
        d.gate_pass = gate_pass(policy, c->gate, matched, *facts.req, why_not);
        if (d.gate_pass.empty()) {
            d.gate_note = "class " + cls + " is gated: " + why_not + "; using " + c->gate.fallback;
            c = &policy.classes.at(c->gate.fallback);
        } else {
            d.gate_pass = "class " + cls + " allowed: " + d.gate_pass;
        }
    }
    d.cls = c;
    // Later rules with merge = true that match too (classify.hpp merge order).
    for (size_t i = at + 1; i < policy.rules.size(); ++i) {
        const Rule& rule = policy.rules[i];
        if (!rule.merge || !rule_matches(rule.match, facts)) continue;
        Decision::Merge m;
        m.rule = rule.name;
        m.cls = rule.cls;
        const ClassDef& mc = policy.classes.at(rule.cls);
        if (!d.cls->accept_merge) {
            m.note = "class " + d.cls->name + " takes no merges (accept_merge = false)";
        } else if (rule.cls == d.cls->name ||
                   std::any_of(d.merges.begin(), d.merges.end(), [&](const Decision::Merge& o) { return o.applied && o.cls == rule.cls; })) {
            m.note = "class " + rule.cls + " already applies";
        } else if (mc.gate.enabled) {
            std::string why_not;
            if (gate_pass(policy, mc.gate, &rule, *facts.req, why_not).empty())
                m.note = "class " + rule.cls + " is gated: " + why_not + "; not merged";
            else m.applied = true;
        } else {
            m.applied = true;
        }
        d.merges.push_back(std::move(m));
    }
    merge_classes(policy, d);
    return d;
}

bool merge_classes(const Policy& policy, Decision& d) {
    if (d.merged) return true;
    const bool any = std::any_of(d.merges.begin(), d.merges.end(), [](const Decision::Merge& m) { return m.applied; });
    if (!any) return true;
    if (d.cls->knobs_pending()) return false;
    for (const auto& m : d.merges)
        if (m.applied && policy.classes.at(m.cls).knobs_pending()) return false;
    auto out = std::make_shared<ClassDef>(*d.cls);
    auto same = [](const KnobSetting& a, const KnobSetting& b) {
        return a.id == b.id && (a.id != KnobId::Raw || (a.raw_file == b.raw_file && a.raw_ctrl == b.raw_ctrl));
    };
    auto key = [](const KnobSetting& k, const char* scope) {
        return std::string(scope) + (k.id == KnobId::Raw ? "raw:" + k.raw_file : std::string(knob_def(k.id).key));
    };
    for (auto& m : d.merges) {
        if (!m.applied) continue;
        const ClassDef& mc = policy.classes.at(m.cls);
        std::string added;
        auto take = [&](std::vector<KnobSetting>& into, const std::vector<KnobSetting>& from, const char* scope) {
            const size_t before = into.size();
            for (const auto& k : from) {
                bool have = false;
                for (size_t i = 0; i < before && !have; ++i) have = same(into[i], k);
                if (have) continue;
                into.push_back(k);
                added += (added.empty() ? "" : " ") + key(k, scope);
            }
        };
        take(out->container, mc.container, "");
        take(out->pod, mc.pod, "pod:");
        take(out->sandbox, mc.sandbox, "sandbox:");
        out->fail_closed = out->fail_closed || mc.fail_closed;
        if (!out->pod_weight_formula_set && mc.pod_weight_formula_set) {
            out->pod_weight_formula_set = true;
            out->pod_weight_formula = mc.pod_weight_formula;
        }
        if (!out->ctr_weight_formula_set && mc.ctr_weight_formula_set) {
            out->ctr_weight_formula_set = true;
            out->ctr_weight_formula = mc.ctr_weight_formula;
        }
        m.note = added.empty() ? "nothing new (every knob of " + m.cls + " is set by an earlier class)" : added;
    }
    d.merged = out;
    d.cls = out.get();
    return true;
}

std::string Decision::merge_text() const {
    std::string t;
    for (const auto& m : merges) t += (t.empty() ? "" : "; ") + m.cls + " (rule " + m.rule + "): " + (m.note.empty() ? "pending" : m.note);
    return t;
}

}  // namespace nriqos
