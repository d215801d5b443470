#include "classify.hpp"

#include <fnmatch.h>

namespace nriqos {

bool glob_match(const std::string& glob, const std::string& value) {
    if (glob == "*") return true;
    if (glob.find_first_of("*?[") == std::string::npos) return glob == value;
    return fnmatch(glob.c_str(), value.c_str(), 0) == 0;
}

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
}  // namespace

Decision classify(const Policy& policy, const Facts& facts) {
    Decision d;
    d.rule = "default";
    std::string cls = policy.default_class;
    for (const auto& rule : policy.rules) {
        if (rule_matches(rule.match, facts)) {
            d.rule = rule.name;
            cls = rule.cls;
            break;
        }
    }
    d.requested = cls;
    const ClassDef* c = &policy.classes.at(cls);
    if (c->gate.enabled) {
        const Request& r = *facts.req;
        bool ns_ok = !c->gate.namespaces.empty() && any_glob(c->gate.namespaces, r.pod_namespace);
        bool label_ok = !c->gate.labels.empty() && map_matches(c->gate.labels, r.labels);
        if (!ns_ok && !label_ok) {
            d.gate_note = "class " + cls + " is gated: namespace \"" + r.pod_namespace + "\" does not qualify; using " + c->gate.fallback;
            c = &policy.classes.at(c->gate.fallback);
        }
    }
    d.cls = c;
    return d;
}

}  // namespace nriqos
