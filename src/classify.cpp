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
