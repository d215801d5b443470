#include "cli/status.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <set>
#include <memory>
#include <sys/stat.h>
#include <unistd.h>

#include "event/detect.hpp"
#include "os/kernel.hpp"
#include "nri/service.hpp"
#include "event/pipeline.hpp"
#include "policy/policy_cache.hpp"
#include "policy/policy_store.hpp"
#include "event/publish.hpp"
#include "event/resctrl.hpp"
#include "cli/register.hpp"
#include "event/sinks.hpp"
#include "os/clock.hpp"

using nlohmann::json;

namespace nriqos {

namespace {

/// Policies by configured path, resolved once per command the way the hook resolves them
/// (policy_store.hpp effective_policy: the file, else its last good copy, else the built-in
/// policy), each with what was used and why: status and reconcile compare the kernel with what
/// the hook applies, also while the file is broken or absent.
/// The file `path` as it is now (device, inode, size, modification and change times), "" when
/// it cannot be stat(2)ed: a policy edited (or replaced) since it was read has another one.
std::string file_identity(const std::string& path) {
    struct stat s {};
    if (stat(path.c_str(), &s) != 0) return "";
    char b[160];
    snprintf(b, sizeof b, "%llu:%llu:%lld:%lld.%09ld:%lld.%09ld", (unsigned long long)s.st_dev, (unsigned long long)s.st_ino, (long long)s.st_size,
             (long long)s.st_mtim.tv_sec, s.st_mtim.tv_nsec, (long long)s.st_ctim.tv_sec, s.st_ctim.tv_nsec);
    return b;
}

struct PolicySet {
    PolicyPlaces where;
    struct Entry {
        std::shared_ptr<Policy> policy;  // nullptr: internal error (err)
        PolicyInfo info;
        std::string err;
        std::string identity;  // file_identity(path) before it was loaded
    };
    std::map<std::string, Entry> byPath;
    const Entry& get(const std::string& path) {
        auto it = byPath.find(path);
        if (it == byPath.end()) {
            Entry e;
            e.identity = file_identity(path);
            try {
                e.policy = std::make_shared<Policy>(effective_policy(path, path == defaults::kPolicy, where, nullptr, e.info));
            } catch (const std::exception& x) { e.err = x.what(); }
            it = byPath.emplace(path, std::move(e)).first;
        }
        return it->second;
    }
};

/// The hook's places: a policy status or reconcile compiles goes into the cache and becomes the
/// last good copy, as an event's would (policy_store.hpp PolicyPlaces::write).
PolicyPlaces places_of(const StateCommandOptions& o) {
    PolicyPlaces w;
    w.cache_dir = o.roots.cache_dir;
    w.last_good_dir = o.last_good_dir;
    return w;
}

std::string policy_for(const StateCommandOptions& o, const LastRequest& r) {
    if (o.roots.policy) return *o.roots.policy;
    return r.policy.empty() ? defaults::kPolicy : r.policy;
}

std::string short_id(const std::string& id) { return id.substr(0, 12); }

std::string label(const Write& w) {
    std::string f = w.rel.substr(w.rel.rfind('/') + 1);
    if (w.root == Root::Proc) f = "oom_score_adj";
    if (w.root == Root::Resctrl) f = "resctrl:" + w.rel.substr(0, w.rel.find('/'));
    return (w.scope == "pod" || w.scope == "sandbox" ? w.scope + ":" : "") + f;
}

/// `s` on one line (newlines → spaces), cut to 60 bytes with "..." (kernel file contents in the
/// text table). Policy errors are never cut: see whole_line.
std::string one_line(std::string s) {
    for (char& c : s)
        if (c == '\n') c = ' ';
    if (s.size() > 60) s = s.substr(0, 57) + "...";
    return s;
}

/// `s` on one line, whole (a policy error: the operator needs all of it, issue #25 §5).
std::string whole_line(std::string s) {
    for (char& c : s)
        if (c == '\n' || c == '\r') c = ' ';
    return s;
}

/// The wanted value in the form the kernel shows the file, so that the text table compares like
/// with like (issue #25 §5): cgroup v2 cpu.max is written as "QUOTA" (the period stays, as runc's
/// fs2 writes it when only the quota is set) and read back as "QUOTA PERIOD": the kernel's period
/// is shown after the wanted quota. Any other file: the value as written.
std::string want_as_kernel(const std::string& rel, const std::string& want, const std::optional<std::string>& cur) {
    const bool cpu_max = rel.size() >= 7 && rel.compare(rel.size() - 7, 7, "cpu.max") == 0 && (rel.size() == 7 || rel[rel.size() - 8] == '/');
    if (!cpu_max || !cur || want.find(' ') != std::string::npos) return want;
    std::string k = *cur;
    while (!k.empty() && (k.back() == '\n' || k.back() == ' ')) k.pop_back();
    const size_t sp = k.find(' ');
    if (sp == std::string::npos) return want;
    return want + k.substr(sp);
}

/// The container's cgroup directory (relative to the cgroup root) exists? nullopt: cannot tell.
std::optional<bool> cgroup_exists(const Desired& d) {
    if (!d.req.cgroups_path) return std::nullopt;
    CgroupPaths p;
    try {
        p = resolve_cgroups_path(*d.req.cgroups_path);
    } catch (...) { return std::nullopt; }
    FsKernel k(d.cgroup_root, d.proc_root, d.resctrl_root);
    Layout l = detect_layout(d.cgroup_root);
    if (l == Layout::V2) return k.exists(Root::Cgroup, p.container);
    for (const char* ctrl : {"cpu", "memory", "pids", "cpuset"})
        if (k.exists(Root::Cgroup, ctrl)) return k.exists(Root::Cgroup, std::string(ctrl) + "/" + p.container);
    return std::nullopt;
}

/// The pod annotations the policy at `ppath` reads that the runtime does not pass to the v0.1
/// hook, by the record `register`/reconcile left in the state dir (detect.hpp
/// AnnotationPasslist; issue #25 §1); `line` gets the status line naming them and the fix, ""
/// when there is none (no record, a runtime passing all of them, nothing missing).
std::vector<std::string> annotations_not_passed(const StateCommandOptions& o, PolicySet& pols, const std::string& ppath, std::string& line) {
    std::vector<std::string> missing;
    line.clear();
    StateDir st(o.state_dir);
    auto text = st.read_file(kAnnotationPasslistFile, 65536);
    std::optional<AnnotationPasslist> pl = text ? load_annotation_passlist(*text) : std::nullopt;
    if (!pl || pl->passes_all) return missing;
    const PolicySet::Entry& pe = pols.get(ppath);
    if (!pe.policy) return missing;
    for (const auto& k : policy_annotation_keys(*pe.policy))
        if (!annotation_passed(pl->patterns, k)) missing.push_back(k);
    if (missing.empty()) return missing;
    std::string keys;
    for (const auto& k : missing) keys += (keys.empty() ? "" : ", ") + k;
    line = "annotations: " + pl->runtime + " does not pass " + keys + " to the hook (the rules and facts reading them see nothing): add them to " +
           pl->where + " (nri-qos register --pass-annotations), then restart containerd\n";
    return missing;
}

}  // namespace

/// Adjustments the runtime undid (nri_qos_adjustment_rejected_total{other} in the metrics
/// textfile, src/nri/failure_record.hpp "adjustment-rejected"): one line naming the other NRI
/// plugins, "" when there are none (or no metrics file). `j` gets {plugin: count}.
static std::string rejected_line(const StateCommandOptions& o, json& j) {
    SinkPaths p = sink_paths_before_parse(o.metrics_file, o.event_log, o.state_dir);
    if (p.metrics_file.empty()) return "";
    std::string text;
    if (FILE* f = fopen(p.metrics_file.c_str(), "re")) {
        char buf[8192];
        size_t n;
        while ((n = fread(buf, 1, sizeof buf, f)) > 0 && text.size() < (4u << 20)) text.append(buf, n);
        fclose(f);
    }
    const std::string key = "nri_qos_adjustment_rejected_total{other=\"";
    uint64_t total = 0;
    std::string who;
    j = json::object();
    for (size_t at = text.find(key); at != std::string::npos; at = text.find(key, at + 1)) {
        if (at > 0 && text[at - 1] != '\n') continue;
        size_t q = text.find('"', at + key.size());
        if (q == std::string::npos || text.compare(q, 3, "\"} ") != 0) continue;
        std::string other = text.substr(at + key.size(), q - at - key.size());
        unsigned long long v = std::strtoull(text.c_str() + q + 3, nullptr, 10);
        if (v == 0) continue;
        j[other] = v;
        total += v;
        who += (who.empty() ? "" : ", ") + other + ": " + std::to_string(v);
    }
    if (total == 0) return "";
    return "adjustments undone by the runtime: " + std::to_string(total) + " (" + who +
           "): another NRI plugin set the same field; see the event log (failure=adjustment-rejected) and settings.leave_to_others\n";
}

/// The external relay service's liveness line ("relay: up (service pid …), registered with …"),
/// "" when no service writes <state_dir>/relay.json; `ok`: up and registered.
static std::string relay_line(const StateCommandOptions& o, bool* ok = nullptr) {
    if (ok) *ok = false;
    json relay = nri::read_service_status(o.state_dir + "/relay.json");
    if (relay.is_object()) {
        if (ok) *ok = !relay.contains("error") && relay.value("up", false) && relay.value("registered", false);
        if (relay.contains("error")) {
            return "relay: " + relay["error"].get<std::string>() + "\n";
        } else {
            auto num = [&relay](const char* k) { return relay.value(k, int64_t(0)); };
            auto when = [](int64_t t) {
                char b[64] = "-";
                struct tm tm {};
                time_t tt = static_cast<time_t>(t);
                if (t > 0) strftime(b, sizeof b, "%Y-%m-%dT%H:%M:%SZ", gmtime_r(&tt, &tm));
                return std::string(b);
            };
            std::string line =
                std::string("relay: ") + (relay.value("up", false) ? "up" : "DOWN") + " (service pid " + std::to_string(num("pid")) + ", started " +
                when(num("started")) + "), " +
                (relay.value("registered", false)
                     ? "registered with " + relay.value("runtime", std::string("?")) + " " + relay.value("runtime_version", std::string()) +
                           " (relay pid " + std::to_string(num("relay_pid")) + ", since " + when(num("connected_since")) + ")"
                     : std::string("not registered")) +
                ", " + std::to_string(num("reconnects")) + " reconnect(s), last Synchronize " + when(num("last_sync"));
            return line + "\n";
        }
    }
    return "";
}

/// One "warning: ..." line per problem of the v0.1 conf.json (register.hpp conf_json_problems),
/// "" when none or not asked. The runtime is detected only when the file exists.
static std::string conf_json_lines(const StateCommandOptions& o, json& problems) {
    struct stat st {};
    if (o.conf_json.empty() || ::stat(o.conf_json.c_str(), &st) != 0) return "";
    const RuntimeInfo info = detect_runtime();
    json relay = nri::read_service_status(o.state_dir + "/relay.json");
    const bool relay_up = relay.is_object() && !relay.contains("error") && relay.value("up", false);
    std::string text;
    for (const auto& w : conf_json_problems(o.conf_json, kDefaultType, info, native_entry_present(o.plugins_dir) || relay_up, v01_search_path())) {
        text += "warning: " + w + "\n";
        problems.push_back(w);
    }
    return text;
}

int run_status(const StateCommandOptions& o, std::string& out) {
    StateDir st(o.state_dir);
    std::vector<LastRequest> all = load_last(st);
    if (o.only) all.erase(std::remove_if(all.begin(), all.end(), [&](const LastRequest& r) { return !o.only->count(r.id); }), all.end());
    PolicySet pols{places_of(o), {}};
    json arr = json::array();
    std::string text;
    char buf[512];
    snprintf(buf, sizeof buf, "%-36s %-20s %-12s %-10s %-22s %-16s %s\n", "NAMESPACE/POD", "CONTAINER", "ID", "CLASS", "RULE", "LAST EVENT", "TIME");
    text += buf;
    size_t drifted = 0, discovered = 0, resident = 0;
    for (const auto& r : all) {
        json e = {{"namespace", r.ns},
                  {"pod", r.pod},
                  {"container", r.sandbox ? "" : r.container},
                  {"id", r.id},
                  {"sandbox_id", r.sandbox_id},
                  {"sandbox", r.sandbox},
                  {"class", r.cls},
                  {"rule", r.rule},
                  {"last_event", r.event},
                  {"time", r.time},
                  {"outcome", r.outcome},
                  // where the record came from: the runtime's events, or `reconcile --discover`
                  {"origin", r.source == "discover" ? "discovered"
                             : r.source == "unseen" ? "unseen"
                                                    : "event"}};
        // Which evaluator of the native relay served the last event (settings.evaluator_events).
        if (!r.evaluator.empty()) e["evaluator"] = r.evaluator;
        if (r.evaluator == "resident") ++resident;
        if (r.source == "discover" || r.source == "unseen") ++discovered;
        snprintf(buf, sizeof buf, "%-36s %-20s %-12s %-10s %-22s %-16s %s\n", (r.ns + "/" + r.pod).c_str(),
                 r.sandbox ? "(sandbox)" : r.container.c_str(), short_id(r.id).c_str(), r.cls.c_str(), r.rule.c_str(), r.event.c_str(),
                 r.time.c_str());
        text += buf;
        const std::string ppath = policy_for(o, r);
        const PolicySet::Entry& pe = pols.get(ppath);
        const Policy* pol = pe.policy.get();
        json knobs = json::array();
        if (pol) {
            e["policy"] = policy_source_name(pe.info.source);
            if (pe.info.broken()) {
                e["policy_error"] = pe.info.error_line();
                text += "    (policy: " + whole_line(pe.info.error_line()) + ")\n";
            }
        }
        if (!pol) {
            e["error"] = "policy " + ppath + ": " + pe.err;
            text += "    (policy " + ppath + " cannot be loaded: " + whole_line(pe.err) + ")\n";
        } else {
            Desired d = desired_plan(r, *pol, o.roots, st);
            if (!d.error.empty()) {
                e["error"] = d.error;
                text += "    (" + d.error + ")\n";
            } else {
                if (d.plan.decision.cls && d.plan.decision.cls->name != r.cls) e["class_now"] = d.plan.decision.cls->name;
                FsKernel k(d.cgroup_root, d.proc_root, d.resctrl_root);
                if (!d.plan.weight_formula.empty()) {
                    e["cpu_weight_formula"] = d.plan.weight_formula;
                    text += "    cpu.weight formula in force: " + d.plan.weight_formula + "\n";
                }
                for (const auto& w : d.plan.writes) {
                    auto cur = k.read(w.root, w.rel);
                    std::string file = (w.root == Root::Proc ? "proc:" : w.root == Root::Resctrl ? "resctrl:" : "") + w.rel;
                    bool drift = !cur || !kernel_value_matches(w.rel, w.value, *cur);
                    std::string shown = cur ? one_line(*cur) : "(missing)";
                    while (!shown.empty() && (shown.back() == ' ')) shown.pop_back();
                    json kj = {{"knob", w.knob},
                               {"scope", w.scope},
                               {"file", file},
                               {"value", w.value},
                               {"kernel", cur ? json(shown) : json(nullptr)},
                               {"drift", drift && cur.has_value()}};
                    // A cpu.weight on the other formula's scale for the class's shares: written
                    // under another runtime's formula (a runc upgrade left a mixed node).
                    std::string scale;
                    if (drift && cur && w.from_shares) {
                        const std::string other = std::string(d.plan.weight_formula.rfind("linear", 0) == 0 ? "log-quadratic" : "linear");
                        if (shown == std::to_string(
                                         shares_to_weight(w.from_shares, other == "linear" ? WeightFormula::Linear : WeightFormula::LogQuadratic))) {
                            scale = other;
                            kj["scale"] = other;
                        }
                    }
                    knobs.push_back(std::move(kj));
                    if (drift && cur) ++drifted;
                    const std::string want = want_as_kernel(w.rel, w.value, cur);
                    const std::string flag = !cur            ? "  (not present)"
                                             : !drift        ? ""
                                             : scale.empty() ? "  DRIFT"
                                                             : "  DRIFT (" + scale + " of shares " + std::to_string(w.from_shares) +
                                                                   ": another formula than the one in force)";
                    snprintf(buf, sizeof buf, "    %-28s want %-16s kernel %-16s%s\n", label(w).c_str(), want.c_str(), shown.c_str(), flag.c_str());
                    text += buf;
                }
            }
        }
        e["knobs"] = knobs;
        arr.push_back(std::move(e));
    }
    if (all.empty()) text += "(no pods or containers recorded in " + o.state_dir + "/last)\n";
    else
        text += std::to_string(all.size()) + " recorded" +
                (discovered ? " (" + std::to_string(discovered) + " discovered by `reconcile --discover`, the rest from runtime events)"
                            : std::string()) +
                ", " + std::to_string(drifted) + " knob(s) drifted" + (drifted ? ": run `nri-qos reconcile` to restore them\n" : "\n");
    if (resident)
        text += std::to_string(resident) +
                " last event(s) served by a resident evaluator of the native relay (settings.evaluator_events > 1), the rest by one-shot ones\n";
    // The external relay service's liveness (src/nri/service.hpp), when it runs on this state dir.
    text += relay_line(o);
    std::string np_line;
    const std::vector<std::string> np = annotations_not_passed(o, pols, o.roots.policy ? *o.roots.policy : std::string(defaults::kPolicy), np_line);
    text += np_line;
    json rejected;
    text += rejected_line(o, rejected);
    json cj = json::array();
    text += conf_json_lines(o, cj);
    if (o.format == "json") {
        json j = {{"state_dir", o.state_dir}, {"entries", arr}, {"drifted", drifted}, {"discovered", discovered}};
        if (resident) j["resident_evaluator_events"] = resident;
        if (!cj.empty()) j["conf_json_problems"] = cj;
        if (!rejected.empty()) j["adjustment_rejected"] = rejected;
        json relay = nri::read_service_status(o.state_dir + "/relay.json");
        if (!relay.is_null()) j["relay"] = relay;
        if (!np.empty()) j["annotations_not_passed"] = np;
        out = j.dump(2, ' ', false, json::error_handler_t::replace) + "\n";
    } else {
        out = text;
    }
    return 0;
}

namespace {

/// One `reconcile` pass over the containers of the state dir (run_reconcile): the pass's state
/// (policies compiled, counters, records, the pass metrics) and its steps, in the order
/// run_reconcile calls them — each container (reconcile_one), the resctrl groups no policy in
/// use names (cleanup_groups), the summary line and the sinks (write_sinks). Output lines are
/// appended to `out`; `rc` is the pass's exit status.
struct Reconciler {
    const StateCommandOptions& o;
    std::string& out;
    StateDir st;
    std::vector<LastRequest> all;
    PolicySet pols;
    std::set<std::string> used_policies;
    std::string resctrl_root;  // the containers' own (their last event's), unless --resctrl-root
    int64_t pass_t0 = 0;
    int rc = 0;
    size_t n_ok = 0, n_fixed = 0, n_knobs = 0, n_gone = 0, n_failed = 0;
    // The pass's own metrics (issue #25 §4): not runtime events — no nri_qos_events_total, no
    // event-latency observation, no last-event time.
    ReconcilePass pass;
    // Records only for what changed or failed: drift found (and corrected), gone, errors. A
    // container already in force leaves no record and no journal line.
    std::vector<EventRecord> recs;
    // The systemd driver: unit properties first, then the files (systemd_unit.hpp), as the hook
    // sets them — a correction or an adoption written as a file only would be undone by the next
    // daemon-reload (the postinst's, right after `reconcile --discover`). The companion runs only
    // for a container with something to write back.
    HelperSetter helper;
    UnitSetter* setter = nullptr;
    PolicyIdentity pid;
    const PolicySet::Entry* last_pe = nullptr;  // policy of the last container (sink settings)
    std::set<std::string> said;  // broken policy files reported

    /// Loads the state (restricted to o.only) and compiles the configured policy.
    Reconciler(const StateCommandOptions& opts, std::string& output)
        : o(opts), out(output), st(o.state_dir), all(load_last(st)), pols{places_of(o), {}}, helper(o.systemd_helper) {
        if (o.only) all.erase(std::remove_if(all.begin(), all.end(), [&](const LastRequest& r) { return !o.only->count(r.id); }), all.end());
        // The configured policy is compiled even when no container uses it yet (after a reboot, an
        // edit): the next event then finds it in the cache instead of compiling it within its
        // deadline (a large policy cannot be: BENCHMARKS.md "cold path"). The policy files the
        // containers name are compiled as they come, below.
        pols.get(o.roots.policy ? *o.roots.policy : std::string(defaults::kPolicy));
        used_policies.insert(o.roots.policy ? *o.roots.policy : std::string(defaults::kPolicy));
        pass_t0 = monotonic_ns();
        pass.containers = all.size();
        setter = o.systemd_setter ? o.systemd_setter : &helper;
    }

    /// Settles the plan's writes already in force (Applied) or absent (Skipped) from what the
    /// kernel holds now; a drifted one keeps Planned, its kernel value in `was[i]` (under
    /// --dry-run it is only described in `drift` and marked Applied).
    void sweep_drift(Desired& d, FsKernel& k, std::vector<std::optional<std::string>>& was, std::string& drift) {
        for (size_t i = 0; i < d.plan.writes.size(); ++i) {
            Write& w = d.plan.writes[i];
            if (w.id == KnobId::ResctrlGroup && w.status != Write::Planned) continue;  // settled by ensure_plan_groups
            auto cur = k.read(w.root, w.rel);
            if (!cur) {
                w.status = Write::Skipped;
                w.reason = "not present";
                continue;
            }
            if (kernel_value_matches(w.rel, w.value, *cur)) {
                w.status = Write::Applied;  // already in force
                continue;
            }
            std::string v = one_line(*cur);
            while (!v.empty() && v.back() == ' ') v.pop_back();
            was[i] = v;
            ++pass.drift_found;
            if (o.dry_run) {
                drift += (drift.empty() ? "" : " ") + label(w) + " " + v + "->" + w.value;
                w.status = Write::Applied;
            }
        }
    }

    /// Writes the drifted knobs back through the hook's own writer (sinks.hpp apply_plan, the
    /// systemd driver first) and reports them in the order written: corrected ones in `drift`
    /// and m.drift_knobs, failed ones in `failed` and m.failed_knobs.
    void write_back(Desired& d, FsKernel& k, const std::vector<std::optional<std::string>>& was, EventRecord& rec, MetricsEvent& m,
                    std::string& drift, std::string& failed) {
        SystemdSink sd;
        sd.setter = setter;
        if (!o.systemd_setter) sd.off = systemd_sink_off(o.systemd_helper, d.cgroup_root);
        apply_plan(d.plan, k, &sd);
        rec.systemd = systemd_summary(d.plan);
        // Reported in the order written.
        std::vector<size_t> order;
        for (size_t i = 0; i < d.plan.writes.size(); ++i)
            if (was[i]) order.push_back(i);
        std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return d.plan.writes[a].seq < d.plan.writes[b].seq; });
        for (size_t i : order) {
            const Write& w = d.plan.writes[i];
            if (w.status == Write::Applied) {
                drift += (drift.empty() ? "" : " ") + label(w) + " " + *was[i] + "->" + w.value;
                m.drift_knobs.push_back(w.knob);
            } else if (w.status == Write::Failed) {
                failed += (failed.empty() ? "" : " ") + label(w) + " (" + w.reason + ")";
                m.failed_knobs.push_back(w.knob);
            }
        }
    }

    /// A container whose cgroup exists and whose plan was made: its drift found and (unless
    /// --dry-run) corrected, its line in `out`, the counters and `rec`/`m` filled.
    void reconcile_plan(Desired& d, const Policy* pol, bool adopted, const std::string& subject, EventRecord& rec, MetricsEvent& m) {
        rec.cls = m.cls = d.plan.decision.cls->name;
        rec.rule = d.plan.decision.rule;
        FsKernel k(d.cgroup_root, d.proc_root, d.resctrl_root);
        // A declared group that went missing is made again before its tasks write is
        // checked (resctrl.hpp); one that cannot be made fails that knob with the reason.
        // Its lock is held until this container's writes are done (ResctrlLock).
        ResctrlLock resctrl_lock = ensure_plan_groups(d.plan, *pol, d.resctrl_root, o.state_dir, o.dry_run);
        if (resctrl_root.empty()) resctrl_root = d.resctrl_root;
        std::string drift, failed;
        // What the kernel holds now: files in force are settled (Applied) before the
        // writer runs; the drifted ones stay Planned and go through the hook's own writer
        // (sinks.hpp apply_plan: runc's orders, the EINVAL retries), in its steps.
        std::vector<std::optional<std::string>> was(d.plan.writes.size());
        sweep_drift(d, k, was, drift);
        for (const Write& w : d.plan.writes)  // its group could not be made: said, never silent
            if (w.id == KnobId::ResctrlGroup && w.status == Write::Failed) {
                failed += (failed.empty() ? "" : " ") + label(w) + " (" + w.reason + ")";
                m.failed_knobs.push_back(w.knob);
            }
        if (!o.dry_run) write_back(d, k, was, rec, m, drift, failed);
        rec.drift = drift;
        rec.failed = failed;
        rec.outcome = m.outcome = failed.empty() ? "ok" : "partial";
        if (!failed.empty()) {
            ++n_failed;
            if (d.fail_closed) rc = 1;
            out += "failed   " + subject + " class " + rec.cls + ": " + failed + (drift.empty() ? "" : "; corrected " + drift) + "\n";
        } else if (!drift.empty()) {
            ++n_fixed;
            out += std::string(o.dry_run ? "drift    " : adopted ? "adopted  " : "restored ") + subject + " class " + rec.cls + ": " + drift + "\n";
        } else {
            ++n_ok;
            if (adopted) out += "adopted  " + subject + " class " + rec.cls + ": already in force\n";
        }
        n_knobs += m.drift_knobs.size();
        if (o.dry_run) n_knobs += std::count(drift.begin(), drift.end(), '>');
    }

    /// One recorded container: its policy loaded (a broken one warned about once), then gone,
    /// error or its plan reconciled (reconcile_plan); its record kept when it says something.
    void reconcile_one(const LastRequest& r) {
        const int64_t t0 = monotonic_ns();
        // Adopted by this discovery (discover.hpp): the first application of its class.
        const bool adopted = o.discovered.count(r.id) > 0;
        EventRecord rec;
        rec.source = "reconcile";
        rec.event = adopted ? o.adopt_event : "reconcile";
        rec.ns = r.ns;
        rec.pod = r.pod;
        rec.container = r.sandbox ? "" : r.container;
        rec.id = r.id;
        rec.sandbox_id = r.sandbox_id;
        rec.sandbox = r.sandbox;
        MetricsEvent m;  // what this container adds to the pass
        std::string subject = r.ns + "/" + r.pod + (r.sandbox ? " (sandbox " : "/" + r.container + " (") + short_id(r.id) + ")";
        const std::string ppath = policy_for(o, r);
        used_policies.insert(ppath);
        const PolicySet::Entry& pe = pols.get(ppath);
        const Policy* pol = pe.policy.get();
        if (pol) {
            // As the hook does: a broken file is reported on every event, and its last good copy
            // (else the built-in policy) is what is restored meanwhile.
            last_pe = &pe;
            pid = policy_identity(&pe.info);
            set_record_policy(rec, pe.info);
            if (pe.info.broken()) {
                // Not a failure of the pass: the copy in force is what the hook applies too. One
                // warning line per broken file; exit 0 (a unit left "failed" every 30 s hides
                // real failures); nri_qos_reconcile_policy_broken 1.
                pass.policy_broken = true;
                if (said.insert(ppath).second) out += "warning: policy " + whole_line(pe.info.error_line()) + "\n";
            }
        }
        if (!pol) {
            rec.outcome = m.outcome = "error";
            rec.message = "policy " + ppath + ": " + pe.err + "; nothing changed";
            out += "error    " + subject + ": policy " + ppath + " cannot be loaded (" + whole_line(pe.err) + "); nothing changed\n";
            rc = 1;
            ++n_failed;
        } else {
            Desired d = desired_plan(r, *pol, o.roots, st);
            std::optional<bool> exists = d.error.empty() ? cgroup_exists(d) : std::nullopt;
            if (exists && !*exists) {
                // --dry-run writes nothing, the state dir included: it only says what a pass would drop.
                std::string e;
                if (!o.dry_run) e = r.sandbox ? st.remove_last_sandbox(r.sandbox_dir) : st.remove_last(r.sandbox_dir, r.file_id);
                rec.outcome = m.outcome = "gone";
                rec.cls = m.cls = r.cls;
                out += "gone     " + subject + ": cgroup no longer exists; " +
                       (o.dry_run ? "would be dropped from the state" : "dropped from the state") + (e.empty() ? "" : " (" + e + ")") + "\n";
                ++n_gone;
            } else if (!d.error.empty()) {
                rec.outcome = m.outcome = "error";
                rec.message = d.error;
                out += "error    " + subject + ": " + d.error + "\n";
                ++n_failed;
            } else {
                reconcile_plan(d, pol, adopted, subject, rec, m);
            }
        }
        rec.duration_us = (monotonic_ns() - t0) / 1000;
        if (m.outcome == "error") ++pass.errors;
        if (m.outcome == "gone") ++pass.gone;
        for (auto& k : m.drift_knobs) pass.corrected_knobs.push_back(std::move(k));
        for (auto& k : m.failed_knobs) pass.failed_knobs.push_back(std::move(k));
        // an adoption (reconcile --discover) is always recorded: the pod is new to the state
        const bool quiet = !adopted && m.outcome == "ok" && rec.drift.empty() && rec.failed.empty();
        if (!o.dry_run && !quiet) recs.push_back(rec);
    }

    /// resctrl groups nri-qos made that no class of the policies in use names any more: removed
    /// when empty of tasks (resctrl.hpp cleanup_resctrl_groups); none while a policy is broken.
    void cleanup_groups() {
        std::set<std::string> in_use;
        for (const auto& pp : used_policies)
            if (const Policy* pl = pols.get(pp).policy.get())
                for (const auto& g : resctrl_groups_in_use(*pl)) in_use.insert(g);
        if (o.roots.resctrl_root) resctrl_root = *o.roots.resctrl_root;
        if (resctrl_root.empty()) resctrl_root = defaults::kResctrlRoot;
        bool broken = false;
        for (const auto& pp : used_policies) broken = broken || !pols.get(pp).policy || pols.get(pp).info.broken();
        if (broken) {
            if (!created_resctrl_groups(o.state_dir).empty()) out += "kept     resctrl groups: a policy is broken, none removed\n";
        } else if (cleanup_resctrl_groups(in_use, resctrl_root, o.state_dir, o.dry_run, out, [&] {
                       // Under the mount's lock: a policy edited since this pass read it may name a
                       // group an event has just made ready for the runtime to join (native NRI's
                       // rdt_class, joined after the answer): none is removed on the old word.
                       for (const auto& pp : used_policies)
                           if (file_identity(pp) != pols.get(pp).identity) return false;
                       return true;
                   }) > 0) {
            rc = 1;
        }
    }

    /// The records to the journal (stderr) and the event log, and the pass's metrics, with the
    /// sink settings of the last container's policy. Nothing under --dry-run.
    void write_sinks() {
        SinkPaths paths = resolve_sink_paths(o.metrics_file, o.event_log, nullptr);
        if (last_pe) paths = resolve_sink_paths(o.metrics_file, o.event_log, &last_pe->policy->sinks);
        for (auto& rec : recs) {
            std::string line = record_logfmt(rec);
            ssize_t w = write(STDERR_FILENO, line.data(), line.size());
            (void)w;
            std::string e = append_event_log(paths.event_log, paths.event_log_max_bytes, record_json(rec));
            if (!e.empty()) out += "warning: " + e + "\n";
        }
        {  // also folds in events counted by deadline handlers since the last update
            pass.duration_us = (monotonic_ns() - pass_t0) / 1000;
            std::string e = update_metrics(paths.metrics_file, {}, pid, 500, &pass);
            if (!e.empty()) out += "warning: " + e + "\n";
        }
    }
};

}  // namespace

int run_reconcile(const StateCommandOptions& o, std::string& out) {
    Reconciler p(o, out);
    for (const auto& r : p.all) p.reconcile_one(r);
    // resctrl groups nri-qos made that no class of the policies in use names any more: removed
    // when empty of tasks (resctrl.hpp cleanup_resctrl_groups).
    p.cleanup_groups();
    out += "reconcile: " + std::to_string(p.all.size()) + " recorded, " + std::to_string(p.n_ok) + " in force, " + std::to_string(p.n_fixed) +
           (o.dry_run ? " drifted (" : " restored (") + std::to_string(p.n_knobs) + " knobs), " + std::to_string(p.n_gone) + " gone, " +
           std::to_string(p.n_failed) + " failed" + (o.dry_run ? " (dry run: nothing written)" : "") + "\n";
    if (!o.dry_run) p.write_sinks();
    return p.rc;
}

int relay_liveness(const StateCommandOptions& o, std::string& out) {
    bool ok = false;
    out = relay_line(o, &ok);
    if (out.empty()) out = "relay: not running here (no " + o.state_dir + "/relay.json)\n";
    return ok ? 0 : 1;
}

}  // namespace nriqos
