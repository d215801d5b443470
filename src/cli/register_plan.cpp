// What `register` will do on this node (issue #23: split out of register.cpp): the pod
// annotation keys a policy reads (policy_annotation_keys) and the plan — the mode the runtime
// calls, and every warning and note about what keeps nri-qos from being called or from seeing
// those annotations (plan_register, register.hpp; issues #20 §4, #25 §1).
#include "cli/register_internal.hpp"

#include <cctype>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "facts/facts.hpp"
#include "policy/policy.hpp"

namespace nriqos {

using namespace register_internal;

// ---- Reading the node's runtime (issue #20 §4, issue #25 §1) ----

namespace {

/// "prefix.domain/name" tokens of a FactDef::reads text (annotation keys; "node*/cpulist" and
/// other sysfs paths have no dotted prefix right before the '/').
std::vector<std::string> annotation_tokens(const std::string& text) {
    std::vector<std::string> out;
    auto left_ok = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-'; };
    auto right_ok = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' || c == '_'; };
    for (size_t slash = text.find('/'); slash != std::string::npos; slash = text.find('/', slash + 1)) {
        size_t a = slash;
        while (a > 0 && left_ok(text[a - 1])) --a;
        size_t b = slash + 1;
        while (b < text.size() && right_ok(text[b])) ++b;
        std::string prefix = text.substr(a, slash - a);
        if (prefix.find('.') == std::string::npos || b == slash + 1) continue;
        out.push_back(text.substr(a, b - a));
    }
    return out;
}

/// Annotation keys each fact reads, by fact name (see policy_annotation_keys).
std::map<std::string, std::vector<std::string>> fact_annotation_keys() {
    std::map<std::string, std::vector<std::string>> m;
    std::vector<std::string> prev;
    for (const FactDef& f : fact_table()) {
        std::string reads = f.reads ? f.reads : "";
        std::vector<std::string> keys = annotation_tokens(reads);
        if (reads.find("the same annotations") != std::string::npos) keys.insert(keys.end(), prev.begin(), prev.end());
        if (!keys.empty()) prev = keys;
        m[f.name] = keys;
    }
    return m;
}

}  // namespace

std::vector<std::string> policy_annotation_keys(const Policy& policy) {
    std::set<std::string> keys;
    for (const Rule& r : policy.rules) {
        for (const auto& kv : r.match.annotations) keys.insert(kv.first);
        for (const auto& kv : r.match.labels_or_annotations) keys.insert(kv.first);
    }
    const auto facts = fact_annotation_keys();
    for (const auto& [name, cls] : policy.classes)
        for (const auto* list : {&cls.container, &cls.pod})
            for (const KnobSetting& k : *list)
                if (k.value.kind == KnobValue::Fact)
                    if (auto it = facts.find(k.value.text); it != facts.end()) keys.insert(it->second.begin(), it->second.end());
    return {keys.begin(), keys.end()};
}

namespace register_internal {

std::string join_list(const std::vector<std::string>& v, const std::string& sep) {
    std::string s;
    for (const auto& x : v) s += (s.empty() ? "" : sep) + x;
    return s;
}

bool containerd_native_capable(const RuntimeInfo& c) { return c.major > 1 || (c.major == 1 && c.minor >= 7); }

}  // namespace register_internal

namespace {

bool containerd_known(const RuntimeInfo& c) { return !c.version.empty(); }

}  // namespace

RegisterPlan plan_register(const RuntimeInfo& c, const NativeRuntimeInfo& isulad, const NativeRuntimeInfo& crio, const std::string& requested,
                           const std::vector<std::string>& needed) {
    RegisterPlan p;
    const NativeRuntimeInfo* other = isulad.found ? &isulad : crio.found ? &crio : nullptr;
    const HookMode called = mode_called(c);
    // The mode.
    if (requested == "v01" || requested == "native") {
        p.mode = requested;
    } else if (requested == "both") {
        // Native always; conf.json only where it adds events the native plugin does not get
        // (register.hpp plan_register; issue #31 §6).
        if (!containerd_known(c)) p.mode = other ? "native" : "both";
        else if (!containerd_native_capable(c)) p.mode = "both";
        else if (c.adapter && called != HookMode::None) p.mode = "v01";
        else p.mode = "native", p.drop_v01 = true;
    } else if (containerd_known(c)) {
        p.mode = called == HookMode::V01 ? "v01" : "native";
        if (called == HookMode::None && c.adapter) p.mode = "v01";
    } else if (other) {
        p.mode = "native";
    } else {
        p.mode = "v01";
    }
    if (containerd_known(c)) {
        p.notes.push_back(describe(c) + ": registering the " +
                          (p.mode == "native" ? "native NRI plugin"
                           : p.mode == "both" ? "NRI v0.1 hook (conf.json) and the native NRI plugin"
                                              : "NRI v0.1 hook (conf.json)") +
                          (c.config_files.size() > 1 ? " (config files read: " + join_list(c.config_files) + ")" : ""));
        for (const auto& n : c.config_notes) p.notes.push_back(n);
        // A backup an earlier register wrote beside a drop-in, which an imports glob loads after
        // the file it copied (issue #30 §4): its old section can undo the edit.
        for (const auto& f : c.config_files)
            if (f.find(".nri-qos.bak.") != std::string::npos)
                p.warnings.push_back("containerd loads " + f +
                                     " (an imports glob matches it): a backup an earlier nri-qos register\n"
                                     "wrote beside the file it edited. Its sections are read after that file's and can undo the edit.\n"
                                     "Fix: move it out of that directory (register now keeps its backups in " +
                                     std::string(kDefaultBackupDir) + ").");
        if (called == HookMode::None) {
            p.warnings.push_back(
                "containerd " + c.version + " has native NRI DISABLED (" +
                (!c.nri_disabled_in.empty() ? "disabled_plugins names it in " + c.nri_disabled_in
                 : c.nri_disable            ? c.nri_section + " disable = true in " + c.nri_file
                                            : std::string("the default of containerd 1.7, not set in ") +
                                       (c.config_found ? join_list(c.config_files) : c.config + " (absent)")) +
                ").\n"
                "nri-qos will NEVER be called until NRI is enabled: no QoS knob is applied to any pod.\n" +
                (!c.nri_disabled_in.empty()
                     ? "Fix: remove the NRI plugin from disabled_plugins in " + c.nri_disabled_in + ", then restart containerd."
                     : std::string("Fix: nri-qos register --enable-nri   (writes the NRI section after a backup), then restart containerd.")));
        } else if (called == HookMode::V01 && p.mode == "native") {
            p.warnings.push_back("containerd " + c.version + " (" + c.binary + ") calls only NRI v0.1 hooks (/etc/nri/conf.json)" +
                                 (c.adapter ? " through the v010-adapter" : "") + ":\nthe native plugin in " + c.plugin_path +
                                 " is never started. Fix: nri-qos register --mode v01");
        } else if (called == HookMode::Native && p.mode == "v01") {
            // 1.7: the CRI plugin has no v0.1 client (only the experimental sbserver, with
            // ENABLE_CRI_SANDBOXES); 2.x: the podsandbox controller runs the conf.json hooks for
            // the sandbox only (internal/cri/server/podsandbox/sandbox_run.go Controller.Start,
            // opts.go WithNRISandboxDelete).
            p.warnings.push_back("containerd " + c.version + " has native NRI and no v010-adapter in " + c.plugin_path + ":\n" +
                                 (c.major >= 2 ? "it runs /etc/nri/conf.json hooks only at pod sandbox start and stop, never for a container:\n"
                                                 "nri-qos would set no container knob. Fix: nri-qos register --native, then restart containerd"
                                               : "/etc/nri/conf.json is never read, nri-qos is never called. Fix: nri-qos register --native, "
                                                 "then restart containerd"));
        }
        if (p.drop_v01)
            p.notes.push_back(std::string("--mode both: the native plugin gets every event here") +
                              (called == HookMode::None ? " once NRI is on; " : "; ") +
                              (c.major >= 2 ? "a conf.json entry would make containerd evaluate each pod sandbox a second time"
                                            : "containerd 1.7 never reads conf.json") +
                              ": registering the native plugin only (nri-qos's conf.json entry is removed)");
        if (requested == "both" && p.mode == "v01")
            p.notes.push_back(
                "--mode both: the v010-adapter passes every event to the conf.json hooks: registering conf.json only "
                "(a native plugin beside it would handle every event twice)");
        if (p.mode == "native" && c.adapter && called != HookMode::None)
            p.warnings.push_back("the v010-adapter in " + c.plugin_path +
                                 " already passes every event to the conf.json plugins:\nuse conf.json (nri-qos register --mode v01) "
                                 "or remove the adapter, never both (every event would be handled twice)");
        // containerd < 1.7 hands an NRI v0.1 hook only the pod annotations its default runtime's
        // pod_annotations allow (issue #25); native NRI passes all of them.
        if ((p.mode == "v01" || p.mode == "both") && !containerd_native_capable(c)) {
            const std::vector<std::string> pats = c.pod_annotations ? *c.pod_annotations : std::vector<std::string>{};
            for (const auto& k : needed)
                if (!annotation_passed(pats, k)) p.missing_annotations.push_back(k);
            if (!p.missing_annotations.empty()) {
                std::string table = c.runtime_section + " pod_annotations";
                p.warnings.push_back("containerd " + c.version + " passes NRI v0.1 hooks only the pod annotations listed in\n" + table + " (" +
                                     (c.pod_annotations ? "[" + join_list(*c.pod_annotations) + "]" : std::string("not set")) + " in " +
                                     (c.cri_file.empty() ? (c.config_found ? join_list(c.config_files) : c.config + " (absent)") : c.cri_file) +
                                     ").\nThe policy reads these annotations, which nri-qos will NOT see (their rules and facts are skipped):\n  " +
                                     join_list(p.missing_annotations) +
                                     "\nFix: nri-qos register --pass-annotations   (adds them after a backup), then restart containerd.");
            }
        }
        return p;
    }
    if (other) {
        p.notes.push_back(describe_native(*other) + ": registering the " + (p.mode == "native" ? "native NRI plugin" : "NRI v0.1 hook (conf.json)"));
        if (p.mode == "v01")
            p.warnings.push_back(other->name +
                                 " runs only native NRI (ttrpc) plugins: /etc/nri/conf.json is never read,\n"
                                 "nri-qos is never called. Fix: nri-qos register --native");
        for (const auto& n : other->notes) p.notes.push_back(n);
        const bool is_isulad = other->name == "iSulad";
        // iSulad calls NRI plugins only from its CRI v1 services (enable-cri-v1) and only when
        // built with NRI (libisula_nri of isula-rust-extensions): detect.hpp read_isulad_config.
        if (is_isulad && other->nri_built && !*other->nri_built)
            p.warnings.push_back("iSulad (" + other->binary +
                                 ") is built without NRI (it does not link libisula_nri.so, which "
                                 "isula-rust-extensions provides; ENABLE_NRI needs ENABLE_CRI_API_V1):\nnri-qos will NEVER be called. "
                                 "Fix: install an iSulad package built with NRI (and isula-rust-extensions)");
        if (is_isulad && (!other->cri_v1 || !*other->cri_v1))
            p.warnings.push_back(std::string("iSulad's CRI v1 is ") +
                                 (other->cri_v1 ? "DISABLED (\"enable-cri-v1\": false" : "NOT ENABLED (\"enable-cri-v1\" not set") + " in " +
                                 (other->config_files.empty() ? std::string("/etc/isulad/daemon.json, absent") : other->config_files.back()) +
                                 "):\nonly its CRI v1 services call NRI plugins, so nri-qos is never called for a pod.\n"
                                 "Fix: set \"enable-cri-v1\": true in /etc/isulad/daemon.json, then restart iSulad.");
        if (!other->nri_enabled || !*other->nri_enabled) {
            std::string how = is_isulad ? "set \"nri-support\": true in /etc/isulad/daemon.json"
                                        : "set enable_nri = true in [crio.nri] (/etc/crio/crio.conf or a crio.conf.d drop-in)";
            p.warnings.push_back(other->name + " native NRI is " + (other->nri_enabled ? "DISABLED" : "NOT ENABLED (switch not set)") +
                                 ": nri-qos will NEVER be called.\nFix: " + how + ", then restart " + other->name + " (nri-qos does not edit " +
                                 other->name + "'s configuration).");
        }
        if (p.mode == "native" && other->plugin_path != kDefaultPluginsDir)
            p.notes.push_back(other->name + " loads plugins from " + other->plugin_path + ": use --plugins-dir " + other->plugin_path);
        return p;
    }
    if (requested == "both") {
        p.warnings.push_back(
            "no container runtime found (no containerd with a known version, no iSulad, no CRI-O): registered both.\n"
            "On containerd 2.x the conf.json entry makes every pod sandbox evaluated twice (its podsandbox controller runs\n"
            "the conf.json hooks beside the native plugin): run nri-qos register --mode both again once the runtime runs.");
    } else if (requested != "native") {
        p.warnings.push_back(
            "no container runtime found (no containerd with a known version, no iSulad, no CRI-O):\n"
            "registered NRI v0.1 in /etc/nri/conf.json, which containerd 1.5/1.6 (or 1.7+ with the v010-adapter) reads at every\n"
            "event, containerd 2.x at pod sandbox start and stop only (never for a container).\n"
            "Nothing calls nri-qos until such a runtime runs. Once the runtime is installed, run nri-qos register again\n"
            "(or --containerd-version V / --mode native to say which one this node runs).");
    } else {
        p.warnings.push_back(
            "no container runtime found: the native plugin is started only by containerd >= 1.7 with NRI "
            "enabled, iSulad or CRI-O with NRI enabled");
    }
    return p;
}

}  // namespace nriqos
