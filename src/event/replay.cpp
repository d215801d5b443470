#include "event/replay.hpp"

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <set>

#include "event/detect.hpp"

#include "facts/facts.hpp"
#include "facts/fact_state.hpp"
#include "os/kernel.hpp"
#include "model/knobs.hpp"

using nlohmann::json;

namespace nriqos {

std::optional<LastRequest> parse_last(const StateDir::LastFile& f) {
    try {
        json j = parse_json_limited(f.text);
        if (!j.is_object() || j.value("v", 0) != 1) return std::nullopt;
        LastRequest r;
        r.sandbox_dir = f.sandbox_id;
        r.file_id = f.id;
        auto s = [&](const char* k) { return j.contains(k) && j[k].is_string() ? j[k].get<std::string>() : std::string(); };
        r.time = s("time");
        r.source = s("source");
        r.evaluator = s("evaluator");
        r.event = s("event");
        r.id = s("id");
        r.sandbox_id = s("sandbox_id");
        r.ns = s("namespace");
        r.pod = s("pod");
        r.container = s("container");
        r.cls = s("class");
        r.rule = s("rule");
        r.outcome = s("outcome");
        r.sandbox = j.value("sandbox", false);
        if (j.contains("options") && j["options"].is_object()) {
            const json& o = j["options"];
            auto os = [&](const char* k) { return o.contains(k) && o[k].is_string() ? o[k].get<std::string>() : std::string(); };
            r.policy = os("policy");
            r.cgroup_root = os("cgroup_root");
            r.proc_root = os("proc_root");
            r.resctrl_root = os("resctrl_root");
            r.layout = os("layout");
        }
        r.writes = j.contains("writes") && j["writes"].is_array() ? j["writes"] : json::array();
        if (j.contains("request") && !j["request"].is_null()) r.request = j["request"].dump();
        if (r.id.empty() || r.id != f.id) return std::nullopt;
        return r;
    } catch (...) { return std::nullopt; }
}

std::vector<LastRequest> load_last(StateDir& st) {
    std::vector<LastRequest> out;
    for (const auto& f : st.list_last())
        if (auto r = parse_last(f)) out.push_back(std::move(*r));
    return out;
}

std::vector<LastRequest> find_last(const std::vector<LastRequest>& all, const std::string& q) {
    std::vector<LastRequest> exact, out;
    for (const auto& r : all) {
        if (r.id == q) exact.push_back(r);
        else if (q.size() >= 4 && r.id.compare(0, q.size(), q) == 0) out.push_back(r);
        else if (!r.pod.empty() && (r.pod == q || r.ns + "/" + r.pod == q)) out.push_back(r);
    }
    if (!exact.empty()) return exact;
    std::stable_sort(out.begin(), out.end(), [](const LastRequest& a, const LastRequest& b) { return !a.sandbox && b.sandbox; });
    return out;
}

std::vector<WeightPair> sibling_weight_pairs(StateDir& state, const Request& r, KubeQos kube_qos, Kernel& kernel) {
    std::vector<WeightPair> out;
    if (kube_qos == KubeQos::BestEffort || r.sandbox_id.empty()) return out;
    for (const auto& f : state.list_last_of(r.sandbox_id, 32)) {
        if (f.id == r.id) continue;
        std::optional<LastRequest> lr = parse_last(f);
        if (!lr || lr->request.empty()) continue;
        bool rewritten = false;
        for (const auto& w : lr->writes) {
            const std::string file = w.is_object() && w.contains("file") && w["file"].is_string() ? w["file"].get<std::string>() : "";
            if (file.size() >= 11 && file.compare(file.size() - 11, 11, "/cpu.weight") == 0) rewritten = true;
        }
        if (rewritten) continue;
        try {
            Request q = lr->source == "nri-eval" ? parse_nri_event(lr->request) : parse_v01_request(lr->request);
            if (!q.resources.cpu_shares || *q.resources.cpu_shares <= 0 || !q.cgroups_path) continue;
            CgroupPaths p = resolve_cgroups_path(*q.cgroups_path);
            auto t = kernel.read(Root::Cgroup, p.container + "/cpu.weight");
            if (!t) continue;
            int64_t w = 0;
            if (std::sscanf(t->c_str(), "%" SCNd64, &w) != 1 || w < 1 || w > 10000) continue;
            out.push_back({static_cast<uint64_t>(*q.resources.cpu_shares), static_cast<uint64_t>(w),
                           std::string(q.is_sandbox ? "pod sandbox " : "sibling container ") + q.id.substr(0, 12)});
        } catch (const std::exception&) {
            continue;  // not replayable: no evidence
        }
    }
    return out;
}

std::optional<RuntimeFormula> cached_runtime_formula(StateDir& state) {
    auto text = state.read_file(kRuntimeFormulaFile);
    if (!text) return std::nullopt;
    return load_runtime_formula(*text);
}

FactInput fact_input(const PlanInput& pin, const std::string& cgroup_root, const std::string& sysfs_root, const std::string& dev_root,
                     const std::string& kubelet_cpu_state, bool dry_run) {
    FactInput fin;
    fin.req = pin.req;
    fin.policy = pin.policy;
    fin.kube_qos = pin.kube_qos;
    fin.paths = pin.paths;
    fin.layout = pin.layout;
    fin.kernel = pin.kernel;
    fin.cgroup_root = cgroup_root;
    fin.sysfs_root = sysfs_root;
    fin.dev_root = dev_root;
    fin.kubelet_cpu_state = kubelet_cpu_state;
    fin.dry_run = dry_run;
    return fin;
}

void merge_memo(Request& r, const Memo& m) {
    for (const auto& [k, v] : m.annotations) r.annotations.emplace(k, v);  // the request's own win
    if (r.pod_namespace.empty()) r.pod_namespace = m.pod_namespace;
    if (r.pod_name.empty()) r.pod_name = m.pod_name;
}

Desired desired_plan(const LastRequest& rec, const Policy& policy, const ReplayRoots& roots, StateDir& state) {
    Desired d;
    d.cgroup_root = roots.cgroup_root ? *roots.cgroup_root : rec.cgroup_root.empty() ? "/sys/fs/cgroup" : rec.cgroup_root;
    d.proc_root = roots.proc_root ? *roots.proc_root : rec.proc_root.empty() ? "/proc" : rec.proc_root;
    d.resctrl_root = roots.resctrl_root ? *roots.resctrl_root : rec.resctrl_root.empty() ? "/sys/fs/resctrl" : rec.resctrl_root;
    d.fail_closed = policy.fail_closed;
    if (rec.request.empty()) {
        d.error = "the request was too large to keep";
        return d;
    }
    try {
        d.req = rec.source == "nri-eval" ? parse_nri_event(rec.request) : parse_v01_request(rec.request);
    } catch (const InputError& e) {
        d.error = std::string("stored request: ") + e.what();
        return d;
    }
    Request& r = d.req;
    // A native StartContainer / PostUpdateContainer carries the container's resources as the
    // runtime holds them: already the values nri-qos's own adjustment (CreateContainer) or update
    // (UpdateContainer) gave it.
    const bool adjusted = resources_adjusted(r);
    r.event = Event::Create;  // direct writes: container knobs, or the pod knobs of a sandbox
    if (!r.is_sandbox) {
        if (auto m = state.load(r.sandbox_id)) merge_memo(r, *m);
    }
    try {
        std::optional<CgroupPaths> paths;
        if (r.cgroups_path) paths = resolve_cgroups_path(*r.cgroups_path);
        Facts facts{&r, paths ? kube_qos_from_path(paths->pod) : KubeQos::Unknown};
        Decision dec = classify(policy, facts);
        d.fail_closed = dec.cls->fail_closed;
        FsKernel kernel(d.cgroup_root, d.proc_root, d.resctrl_root);
        PlanInput pin;
        pin.req = &r;
        pin.policy = &policy;
        pin.kube_qos = facts.kube_qos;
        pin.layout = roots.layout ? *roots.layout : detect_layout(d.cgroup_root);
        pin.paths = paths;
        pin.kernel = &kernel;
        // Fact-valued knobs (facts.hpp) computed as the hook computes them, read-only (dry run:
        // no lock, nothing recorded; a NUMA placement is the one recorded for the container).
        FactState fstate(state.path());
        FactInput fin = fact_input(pin, d.cgroup_root, roots.sysfs_root, roots.dev_root, roots.kubelet_cpu_state, true);
        ClassDef settled;
        const ClassDef* base = dec.cls;
        if (adjusted) {
            settled = *dec.cls;
            if (settle_adjusted_percentages(settled, r)) base = &settled;
        }
        FactPlan fplan = resolve_facts(*base, fin, fstate);
        d.resolved_cls = std::make_shared<const ClassDef>(std::move(fplan.cls));
        dec.cls = d.resolved_cls.get();  // same name, fail mode and gate; fact knobs resolved
        pin.decision = dec;
        pin.pod_refresh = fplan.pod_refresh;
        // The formula in force for the node (status flags a weight on another scale): the
        // container's own weight is what is checked, so the pod, its siblings and the runtime decide.
        pin.own_weight_evidence = false;
        pin.runtime_formula = [&state] { return cached_runtime_formula(state); };
        pin.sibling_weights = [&] { return sibling_weight_pairs(state, r, facts.kube_qos, kernel); };
        d.plan = build_plan(pin);
        for (auto& s : fplan.skipped) d.plan.skipped.push_back(std::move(s));
        for (auto& s : fplan.refused) d.plan.refused.push_back(std::move(s));
        d.have_plan = true;
    } catch (const std::exception& e) { d.error = e.what(); }
    return d;
}

namespace {

std::string trim(const std::string& s) {
    size_t a = s.find_first_not_of(" \t\n");
    if (a == std::string::npos) return "";
    size_t b = s.find_last_not_of(" \t\n");
    return s.substr(a, b - a + 1);
}

bool ends_with(const std::string& s, const char* suf) {
    size_t n = std::char_traits<char>::length(suf);
    return s.size() >= n && s.compare(s.size() - n, n, suf) == 0;
}

bool to_i64(const std::string& s, int64_t& v) {
    if (s.empty()) return false;
    char* end = nullptr;
    errno = 0;
    long long x = std::strtoll(s.c_str(), &end, 10);
    if (errno || !end || *end) return false;
    v = x;
    return true;
}

std::optional<std::set<int>> cpu_set(const std::string& s) {
    std::set<int> out;
    if (s.empty()) return out;
    size_t a = 0;
    while (a <= s.size()) {
        size_t b = s.find(',', a);
        std::string part = s.substr(a, b == std::string::npos ? std::string::npos : b - a);
        size_t dash = part.find('-');
        int64_t lo = 0, hi = 0;
        if (dash == std::string::npos) {
            if (!to_i64(part, lo)) return std::nullopt;
            hi = lo;
        } else if (!to_i64(part.substr(0, dash), lo) || !to_i64(part.substr(dash + 1), hi)) {
            return std::nullopt;
        }
        if (lo < 0 || hi < lo || hi > 65535) return std::nullopt;
        for (int64_t i = lo; i <= hi; ++i) out.insert(static_cast<int>(i));
        if (b == std::string::npos) break;
        a = b + 1;
    }
    return out;
}

}  // namespace

bool kernel_value_matches(const std::string& file, const std::string& wanted_in, const std::string& actual_in) {
    const std::string w = trim(wanted_in), a = trim(actual_in);
    if (w == a) return true;
    if (ends_with(file, "/tasks")) {  // resctrl: the pid must be listed
        size_t p = 0;
        while (p < a.size()) {
            size_t e = a.find('\n', p);
            if (trim(a.substr(p, e == std::string::npos ? std::string::npos : e - p)) == w) return true;
            if (e == std::string::npos) break;
            p = e + 1;
        }
        return false;
    }
    if (ends_with(file, "io.max") || (file.find("blkio.throttle.") != std::string::npos && ends_with(file, "_device"))) {
        // keyed by device, one line each (blk-throttle): v1 "MAJ:MIN RATE" must be a line; v2
        // "MAJ:MIN KEY=RATE" must be a token of the device's line ("8:0 rbps=2 wbps=max ...")
        const size_t sp = w.find(' ');
        if (sp == std::string::npos) return false;
        const std::string dev = w.substr(0, sp + 1), rest = w.substr(sp + 1);
        size_t p = 0;
        while (p < a.size()) {
            size_t e = a.find('\n', p);
            const std::string line = trim(a.substr(p, e == std::string::npos ? std::string::npos : e - p));
            if (line.rfind(dev, 0) == 0) {
                if (!ends_with(file, "io.max")) return trim(line.substr(dev.size())) == rest;
                return (" " + line + " ").find(" " + rest + " ") != std::string::npos;
            }
            if (e == std::string::npos) break;
            p = e + 1;
        }
        return false;
    }
    if (ends_with(file, "cpu.max")) {  // "Q" or "Q P" against "Q P"
        std::string aq = a.substr(0, a.find(' ')), ap = a.find(' ') == std::string::npos ? "" : a.substr(a.find(' ') + 1);
        std::string wq = w.substr(0, w.find(' ')), wp = w.find(' ') == std::string::npos ? "" : w.substr(w.find(' ') + 1);
        return aq == wq && (wp.empty() || wp == ap);
    }
    if (ends_with(file, "cpuset.cpus") || ends_with(file, "cpuset.mems")) {
        auto ws = cpu_set(w), as = cpu_set(a);
        return ws && as && *ws == *as;
    }
    if (file.find("memory") != std::string::npos) {
        int64_t wv = 0, av = 0;
        const bool w_unlimited = w == "-1" || w == "max";
        if (w_unlimited) return a == "max" || (to_i64(a, av) && av >= (int64_t(1) << 62));
        if (to_i64(w, wv) && to_i64(a, av)) return av == (wv / 4096) * 4096;  // page-rounded by the kernel
    }
    return false;
}

void explain_trace(const Policy& p, const Facts& f, const Decision& d, std::string& text, json& j) {
    json rules = json::array();
    text += "rules:    (in policy order, until the first match)\n";
    bool matched = false;
    for (const auto& rule : p.rules) {
        // After the first match only the merge rules that match too (classify.hpp merge order).
        std::string why = matched && !rule.merge ? "after the first match" : rule_mismatch(rule, f);
        if (matched && !why.empty()) continue;
        json e = {{"rule", rule.name}, {"line", rule.line}, {"class", rule.cls}, {"matched", why.empty()}};
        if (matched) e["merge"] = true;
        if (!why.empty()) e["why_not"] = why;
        rules.push_back(e);
        const char* tag = why.empty() ? (matched ? "MERGE " : "MATCH ") : "no    ";
        text += "  " + std::string(tag) + rule.name + " (line " + std::to_string(rule.line) + ", class " + rule.cls + ")" +
                (why.empty() ? "" : ": " + why) + "\n";
        if (why.empty()) matched = true;
    }
    if (!matched) text += "  -> no rule matched: default class " + p.default_class + "\n";
    if (!d.gate_note.empty()) text += "  gate: " + d.gate_note + "\n";
    j["rules"] = rules;
    j["default_used"] = !matched;
    j["requested_class"] = d.requested;
}

void explain_calculations(const Policy& p, const Decision& d, const Request& r, const Plan& plan, std::string& text, json& j) {
    (void)p;
    json calcs = json::array();
    auto one = [&](const KnobSetting& k, const char* scope) {
        if (k.value.kind != KnobValue::Percent) return;
        const KnobDef& def = knob_def(k.id);
        std::optional<int64_t> base;
        const char* bname = "";
        switch (def.pct) {
            case PctBase::CpuShares:
                base = r.resources.cpu_shares;
                bname = "cpu.shares";
                break;
            case PctBase::CpuQuota:
                base = r.resources.cpu_quota;
                bname = "cpu.quota";
                break;
            case PctBase::MemLimit:
                base = r.resources.mem_limit;
                bname = "memory.limit";
                break;
            case PctBase::PidsLimit:
                base = r.resources.pids_limit;
                bname = "pids.limit";
                break;
            case PctBase::None: break;
        }
        std::string key = (std::string(scope) == "container" ? "" : std::string(scope) + ":") + std::string(def.key);
        json c = {{"knob", key}, {"percent", k.value.num}, {"of", std::string("OCI ") + bname}};
        std::string line = "calc:     " + key + " = " + std::to_string(k.value.num) + "% of OCI " + bname;
        if (!base || *base <= 0) {
            c["result"] = nullptr;
            line += ": the request has none; skipped";
        } else {
            int64_t v = *base > INT64_MAX / 100 ? (*base / 100) * k.value.num : (*base * k.value.num) / 100;
            int64_t clamped = std::min(std::max(v, def.min), def.max);
            c["base"] = *base;
            c["result"] = clamped;
            line +=
                " " + std::to_string(*base) + " = " + std::to_string(*base) + " × " + std::to_string(k.value.num) + " / 100 = " + std::to_string(v);
            if (clamped != v)
                line += " → clamped to " + std::to_string(clamped) + " (range " + std::to_string(def.min) + ".." + std::to_string(def.max) + ")";
            if (def.unit && *def.unit) line += std::string(" ") + def.unit;
        }
        calcs.push_back(c);
        text += line + "\n";
    };
    bool pod = false, ctr = false, sbx = false;
    for (const auto& w : plan.writes) (w.scope == "pod" ? pod : w.scope == "sandbox" ? sbx : ctr) = true;
    if (!plan.adjustment.is_null() || !plan.update.is_null()) ctr = true;
    for (const auto& s : plan.skipped) (s.rfind("pod:", 0) == 0 ? pod : s.rfind("sandbox:", 0) == 0 ? sbx : ctr) = true;
    if (ctr)
        for (const auto& k : d.cls->container) one(k, "container");
    if (pod)
        for (const auto& k : d.cls->pod) one(k, "pod");
    if (sbx)
        for (const auto& k : d.cls->sandbox) one(k, "sandbox");
    j["calculations"] = calcs;
}

}  // namespace nriqos
