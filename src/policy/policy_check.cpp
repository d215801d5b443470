// The findings of `nri-qos check` beyond errors: the warnings over a whole valid policy (a rule
// no request can reach, an unused class, a promotion without a gate), the trust notes of the
// raising facts (issue #19) and the notes of settings.leave_to_others; PolicyCheck's counts and
// format_diag. The checker itself is check_policy_text (policy.cpp).
#include "policy/policy_parse.hpp"

#include <algorithm>
#include <set>

#include "model/fact_table.hpp"

namespace nriqos {

namespace {

// ---- warnings over the whole policy ---------------------------------------------------------

bool glob_covers(const std::string& a, const std::string& b) { return a == "*" || a == b; }

/// True when every glob of `b` is covered by one of `a` (an empty `a` means "any").
bool list_covers(const std::vector<std::string>& a, const std::vector<std::string>& b) {
    if (a.empty()) return true;
    if (b.empty()) return false;
    for (const auto& g : b) {
        bool ok = false;
        for (const auto& h : a) ok = ok || glob_covers(h, g);
        if (!ok) return false;
    }
    return true;
}

const std::string* glob_of(const GlobMap& m, const std::string& k) {
    for (const auto& [key, g] : m)
        if (key == k) return &g;
    return nullptr;
}

/// Conservative: true only when rule condition set `a` certainly matches every request `b`
/// matches (then a rule with `b` after a rule with `a` can never be reached).
bool match_covers(const Match& a, const Match& b) {
    if (a.kind != 0 && a.kind != b.kind) return false;
    if (!a.kube_qos.empty()) {
        if (b.kube_qos.empty()) return false;
        for (auto q : b.kube_qos)
            if (std::find(a.kube_qos.begin(), a.kube_qos.end(), q) == a.kube_qos.end()) return false;
    }
    if (!list_covers(a.namespaces, b.namespaces) || !list_covers(a.pod_names, b.pod_names) || !list_covers(a.container_names, b.container_names))
        return false;
    for (const auto& [k, g] : a.labels) {
        const std::string* h = glob_of(b.labels, k);
        if (!h || !glob_covers(g, *h)) return false;
    }
    for (const auto& [k, g] : a.annotations) {
        const std::string* h = glob_of(b.annotations, k);
        if (!h || !glob_covers(g, *h)) return false;
    }
    for (const auto& [k, g] : a.labels_or_annotations) {
        const std::string* h = glob_of(b.labels, k);
        if (!h) h = glob_of(b.annotations, k);
        if (!h) h = glob_of(b.labels_or_annotations, k);
        if (!h || !glob_covers(g, *h)) return false;
    }
    return true;
}

/// What makes a class a promotion (raises priority over an ordinary pod), for the "no gate"
/// warning: "" when nothing does.
std::string promotion_of(const ClassDef& cd) {
    for (const auto* ks : {&cd.container, &cd.pod, &cd.sandbox})
        for (const auto& k : *ks) {
            // A fact raises only for a pod that the fact's own trust rule admits (model/fact_table.hpp
            // FactDef::raises, trust_keys): resolve_facts refuses an untrusted raise per request.
            if (k.value.kind == KnobValue::Fact) continue;
            if (k.id == KnobId::CpuQosLevel && k.value.kind == KnobValue::Int && k.value.num > 0)
                return "cpu_qos_level = " + std::to_string(k.value.num);
            // Group identity above 0 runs ahead of unclassified groups (koordlet: LS/LSR 2).
            if (k.id == KnobId::CpuBvtWarpNs && k.value.kind == KnobValue::Int && k.value.num > 0)
                return "cpu_bvt_warp_ns = " + std::to_string(k.value.num);
            if (k.id == KnobId::CpuQuota && k.value.kind == KnobValue::Max) return "cpu_quota_us = \"max\"";
            if (k.id == KnobId::OomScoreAdj && k.value.num < 0) return "oom_score_adj = " + std::to_string(k.value.num);
            if ((k.id == KnobId::MemoryMin || k.id == KnobId::MemoryLow) && (k.value.kind == KnobValue::Max || k.value.num > 0))
                return std::string(knob_def(k.id).key) + " protection";
            // A negative nice and the realtime I/O class run ahead of ordinary pods (sched(7),
            // ioprio_set(2)).
            if (k.id == KnobId::SchedNice && k.value.kind == KnobValue::Int && k.value.num < 0) return "sched_nice = " + std::to_string(k.value.num);
            if (k.id == KnobId::IoClass && k.value.kind == KnobValue::Int && k.value.num == 0) return "io_class = \"rt\"";
        }
    return "";
}

/// First pod label/annotation key rule `r` matches on, as "label \"k\"" / "annotation \"k\"" /
/// "label or annotation \"k\"" ("" when it matches on none).
std::string author_key_of(const Match& m) {
    if (!m.labels.empty()) return "label \"" + m.labels.front().first + "\"";
    if (!m.annotations.empty()) return "annotation \"" + m.annotations.front().first + "\"";
    if (!m.labels_or_annotations.empty()) return "label or annotation \"" + m.labels_or_annotations.front().first + "\"";
    return "";
}

/// True when every pod label/annotation condition of `m` is on a guarded key (a
/// labels_or_annotations key must be guarded as both).
bool all_keys_guarded(const Policy& p, const Match& m) {
    for (const auto& [k, g] : m.labels)
        if (!guarded_note(p.guarded_labels, k)) return false;
    for (const auto& [k, g] : m.annotations)
        if (!guarded_note(p.guarded_annotations, k)) return false;
    for (const auto& [k, g] : m.labels_or_annotations)
        if (!guarded_note(p.guarded_labels, k) || !guarded_note(p.guarded_annotations, k)) return false;
    return true;
}

}  // namespace

/// The trust notes of `check` (issue #19): per raising fact the policy uses, what it can raise,
/// the annotation keys it reads, and whether they are trusted (declared in [guarded.annotations])
/// or which declaration would unlock the seed system's full behaviour. Information, not warnings:
/// an untrusted raise is refused per request (resolve_facts), so no policy makes one possible.
void trust_notes(const Policy& p, std::vector<PolicyDiag>& notes) {
    for (const auto& f : fact_table()) {
        if (!f.raises || !*f.trust_keys) continue;
        std::string classes;
        for (const auto& [n, cd] : p.classes)
            for (const auto* ks : {&cd.container, &cd.pod, &cd.sandbox})
                if (std::any_of(ks->begin(), ks->end(),
                                [&](const KnobSetting& k) { return k.value.kind == KnobValue::Fact && k.value.text == f.name; })) {
                    classes += (classes.empty() ? " " : ", ") + n;
                    break;
                }
        if (classes.empty()) continue;
        std::string undeclared, declared, keys = f.trust_keys;
        for (size_t at = 0; at <= keys.size();) {
            size_t comma = keys.find(',', at);
            std::string k = keys.substr(at, comma == std::string::npos ? std::string::npos : comma - at);
            at = comma == std::string::npos ? keys.size() + 1 : comma + 1;
            std::string& to = guarded_note(p.guarded_annotations, k) ? declared : undeclared;
            to += std::string(to.empty() ? "" : ", ") + "\"" + k + "\"";
        }
        std::string src = f.source;
        std::string system = src.substr(0, src.find('@'));
        std::string msg = std::string("fact ") + f.name + " (class" + (classes.find(',') != std::string::npos ? "es" : "") + classes +
                          ") can raise: " + raise_names(f.raises) + (f.besteffort_only ? " (BestEffort pods only)" : "") + "; ";
        if (undeclared.empty()) msg += "trusted: [guarded.annotations] declares " + declared + ": " + system + "'s full behaviour";
        else
            msg += "untrusted: applied only where it does not raise; declaring " + undeclared +
                   " in [guarded.annotations] (or a pod namespace in the class's gate.namespaces) unlocks " + system + "'s full behaviour";
        notes.push_back({PolicyDiag::Note, 0, msg});
    }
}

/// The notes of `check` for settings.leave_to_others: per entry, the knobs nri-qos leaves and the
/// classes that set them (or that nri-qos never sets that field).
void leave_notes(const Policy& p, std::vector<PolicyDiag>& notes) {
    for (const auto& lf : p.leave_to_others) {
        std::string knobs, classes;
        for (const auto& d : knob_table())
            if (lf.covers.knobs & knob_bit(d.id)) knobs += std::string(knobs.empty() ? "" : ", ") + d.key;
        if (!lf.covers.raw_file.empty()) knobs = "raw:" + lf.covers.raw_file;
        for (const auto& [n, cd] : p.classes)
            for (const auto* ks : {&cd.container, &cd.pod, &cd.sandbox})
                if (std::any_of(ks->begin(), ks->end(), [&](const KnobSetting& k) { return left_to_other({lf}, k) != nullptr; })) {
                    classes += std::string(classes.empty() ? "" : ", ") + n;
                    break;
                }
        std::string msg = "settings.leave_to_others: " + lf.field + " left to " + lf.plugin + ": ";
        if (lf.covers.never_set) msg += "nri-qos never sets this NRI field";
        else
            msg += "nri-qos never sets " + knobs +
                   (classes.empty() ? " (no class sets it)" : " (set by class " + classes + ": skipped, \"left to " + lf.plugin + "\")");
        notes.push_back({PolicyDiag::Note, 0, msg});
    }
}

void policy_warnings(const Ctx& c, const Policy& p, const std::map<std::string, int>& class_line) {
    // A rule made unreachable by an earlier one that matches everything it matches (a merge
    // rule still adds its class after an earlier match: never unreachable that way).
    for (size_t j = 1; j < p.rules.size(); ++j)
        for (size_t i = 0; i < j && !p.rules[j].merge; ++i)
            if (match_covers(p.rules[i].match, p.rules[j].match)) {
                c.add(PolicyDiag::Warning, p.rules[j].line,
                      "rules: \"" + p.rules[j].name + "\" can never match: rule \"" + p.rules[i].name + "\" (line " +
                          std::to_string(p.rules[i].line) + ") comes first and matches everything it matches");
                break;
            }
    // A class no rule, default_class or gate.fallback uses.
    std::set<std::string> used = {p.default_class};
    for (const auto& r : p.rules) used.insert(r.cls);
    for (const auto& [n, cd] : p.classes)
        if (cd.gate.enabled) used.insert(cd.gate.fallback);
    for (const auto& [n, cd] : p.classes)
        if (!used.count(n)) {
            auto it = class_line.find(n);
            c.add(PolicyDiag::Warning, it == class_line.end() ? 0 : it->second,
                  "classes." + n + ": no rule, settings.default_class or gate.fallback uses this class");
        }
    // A class that raises priority, without a gate, reachable from a key the pod author sets.
    for (const auto& r : p.rules) {
        const ClassDef& cd = p.classes.at(r.cls);
        if (cd.gate.enabled || all_keys_guarded(p, r.match)) continue;
        std::string promo = promotion_of(cd), key = author_key_of(r.match);
        if (promo.empty() || key.empty()) continue;
        c.add(PolicyDiag::Warning, r.line,
              "rules: \"" + r.name + "\" gives class " + r.cls + " (" + promo + ") on pod " + key +
                  ", which the pod author sets, and the class has no gate: add one (classes." + r.cls + ".gate) or declare the key in [guarded]");
    }
}

size_t PolicyCheck::errors() const {
    size_t n = 0;
    for (const auto& d : diags) n += d.level == PolicyDiag::Error;
    return n;
}

size_t PolicyCheck::warnings() const { return diags.size() - errors(); }

std::string format_diag(const std::string& file, const PolicyDiag& d) {
    return file + (d.line > 0 ? ":" + std::to_string(d.line) : "") + ": " +
           (d.level == PolicyDiag::Warning ? "warning: "
            : d.level == PolicyDiag::Note  ? "note: "
                                           : "") +
           d.message;
}

}  // namespace nriqos
