#include "sinks.hpp"

using nlohmann::json;

namespace nriqos {

void apply_plan(Plan& plan, Kernel& kernel) {
    for (auto& w : plan.writes) {
        if (w.status != Write::Planned) continue;
        IoResult r = kernel.write(w.root, w.rel, w.value);
        switch (r.status) {
            case IoResult::Ok: w.status = Write::Applied; break;
            case IoResult::Missing:
                w.status = Write::Skipped;
                w.reason = "not present";
                break;
            case IoResult::Failed:
                w.status = Write::Failed;
                w.reason = r.message;
                break;
        }
    }
}

namespace {
const char* root_prefix(Root r) {
    switch (r) {
        case Root::Proc: return "proc:";
        case Root::Resctrl: return "resctrl:";
        default: return "";
    }
}
std::string label(const Write& w) {
    // "cpu.shares=2" for the container, "pod:cpu.idle=1" for the pod, file name only.
    std::string file = w.rel.substr(w.rel.rfind('/') + 1);
    return (w.scope == "pod" ? "pod:" : "") + file + "=" + w.value;
}
void append(std::string& s, const std::string& item) {
    if (!s.empty()) s += ' ';
    s += item;
}
}  // namespace

Summary summarize(const Plan& plan) {
    Summary s;
    for (const auto& w : plan.writes) {
        switch (w.status) {
            case Write::Applied: append(s.applied, label(w)); ++s.n_applied; break;
            case Write::Skipped: append(s.skipped, label(w) + " (" + w.reason + ")"); ++s.n_skipped; break;
            case Write::Failed: append(s.failed, label(w) + " (" + w.reason + ")"); ++s.n_failed; break;
            case Write::Planned: break;
        }
    }
    for (const auto& k : plan.skipped) {
        append(s.skipped, k);
        ++s.n_skipped;
    }
    return s;
}

json writes_json(const Plan& plan) {
    json a = json::array();
    static const char* kStatus[] = {"planned", "applied", "skipped", "failed"};
    for (const auto& w : plan.writes) {
        json e = {{"knob", w.knob}, {"scope", w.scope}, {"file", root_prefix(w.root) + w.rel}, {"value", w.value}, {"status", kStatus[w.status]}};
        if (!w.reason.empty()) e["reason"] = w.reason;
        a.push_back(std::move(e));
    }
    return a;
}

std::string dump_result(json r) {
    if (r.contains("metadata")) {
        for (auto& [k, v] : r["metadata"].items())
            if (!v.is_string()) v = v.dump();
    }
    // Replace invalid UTF-8 instead of throwing: output must always be one valid JSON object.
    return r.dump(-1, ' ', false, json::error_handler_t::replace) + "\n";
}

}  // namespace nriqos
