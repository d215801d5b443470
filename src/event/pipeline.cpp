#include "event/pipeline.hpp"

#include <csignal>
#include <ctime>
#include <sys/stat.h>
#include <cstdio>
#include <cstring>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "event/adjust.hpp"
#include "event/classify.hpp"
#include "event/detect.hpp"
#include "facts/fact_state.hpp"
#include "facts/facts.hpp"
#include "os/kernel.hpp"
#include "policy/policy_builtin.hpp"
#include "policy/policy_cache.hpp"
#include "policy/policy_store.hpp"
#include "event/publish.hpp"
#include "event/replay.hpp"
#include "event/resctrl.hpp"
#include "model/request.hpp"
#include "os/sandbox.hpp"
#include "event/sinks.hpp"
#include "records/state.hpp"

using nlohmann::json;

namespace nriqos {

namespace {

constexpr const char* kPluginName = "nri-qos";

void log_line(const std::string& s) {
    std::string line = "nri-qos: " + s + "\n";
    ssize_t r = write(STDERR_FILENO, line.data(), line.size());
    (void)r;
}

/// The policy file for a request: --policy, else the v0.1 conf's "policy", else the default.
/// The conf is validated whatever wins: a key nri-qos does not know (a typo like "polcy") is a
/// bad request, never silently ignored (policy_store.hpp plugin_conf_error).
std::string policy_path_for(const Options& opt, const Request* req) {
    if (!req) return opt.policy;
    auto it = req->conf.find("policy");
    if (it != req->conf.end()) {
        if (!it->is_string() || it->get_ref<const std::string&>().empty() || it->get_ref<const std::string&>().size() > 4096)
            throw InputError("/conf/policy: expected a non-empty path string");
    }
    if (std::string e = plugin_conf_error(req->conf); !e.empty())
        throw InputError("/conf: " + e + " (the plugin conf of /etc/nri/conf.json; see nri-qos(8))");
    if (opt.policy_from_flag || it == req->conf.end()) return opt.policy;
    return it->get<std::string>();
}

/// Where the event's policy comes from. explain compiles into the cache and saves the last good
/// copy like an event (policy_store.hpp PolicyPlaces::write), but without a cache (--cache-dir
/// "") it writes nothing. `before_compile`: see PolicyPlaces.
PolicyPlaces places_for(const Options& opt, Mode mode, const std::function<void()>* before_compile) {
    PolicyPlaces w;
    w.cache_dir = opt.cache_dir;
    w.last_good_dir = last_good_dir_of(opt);
    w.save_uncached = mode != Mode::Explain;
    w.before_compile = before_compile;
    return w;
}

bool is_pod_start(const Request& r) {
    // Synchronize of a pod (registration, reconnect): its class memo is rebuilt from this pass.
    return (r.event == Event::Create && r.is_sandbox) || r.event == Event::RunPodSandbox ||
           ((r.event == Event::Synchronize || r.event == Event::SynchronizeLate) && r.is_sandbox);
}
bool is_pod_end(const Request& r) {
    return (r.event == Event::Delete && r.is_sandbox) || r.event == Event::StopPodSandbox || r.event == Event::RemovePodSandbox;
}

/// One event on its way through run_pipeline's stages: what each stage found, for the later
/// stages, the Result (render), the records (publish_records) and the deadline's answers.
/// Lives until run_pipeline returns: the plan's decision points into `policy` and `fplan`.
struct Ctx {
    Ctx(Mode m, const Options& o, std::string_view in) : mode(m), opt(o), input(in), ppath(o.policy), before_compile([this] { compiling(); }) {}
    Ctx(const Ctx&) = delete;
    Ctx& operator=(const Ctx&) = delete;

    Mode mode;
    const Options& opt;
    std::string_view input;  // the request document (the last-request record keeps it)
    PolicyInfo policy_info;  // which policy is in force (Result metadata policy, policy_sha256, policy_error)
    json metadata = json::object();
    std::string error;  // non-empty → Result.error
    bool fail_closed_policy = false;
    bool fail_closed_class = false;
    Plan plan;
    bool have_plan = false;
    std::string early;  // fail-open error before a class was known (for the record)
    std::string trace;  // explain --container: rule trace + calculations (text)
    nlohmann::json trace_json;
    std::vector<std::string> fact_calcs;  ///< explain: how fact values were computed

    std::optional<Request> req;  // read_request
    std::string ppath;  // policy file of this event (policy_path_for)
    bool policy_known = false;  // policy_info says which policy is in force (note_policy)
    const SinkSettings* sink_settings = nullptr;  // the loaded policy's record paths
    std::string layout;  // the cgroup layout's name, for the record
    Policy policy;  // outlives render(): plan.decision.cls points into policy.classes
    FactPlan fplan;  // outlives render() too: the decision points at its resolved class
    std::optional<FactState> fstate;  // the fact lock is held until the writes are done
    /// PolicyPlaces::before_compile of this event's policy loads (compiling()).
    const std::function<void()> before_compile;

    /// A policy is about to be compiled: the deadline's answer in the meantime (see the definition).
    void compiling();
};

/// Errors before a class is known: fail-open unless the policy says settings.fail = "closed".
void early_error(Ctx& c, const std::string& what) {
    log_line(what);
    c.early = what;
    if (c.fail_closed_policy) c.error = "nri-qos: " + what;
    else c.metadata["error"] = what + " (fail-open: container not adjusted)";
}

/// The container's class differs from the class its sandbox got (the memo's): the pod cgroup
/// keeps that class's pod knobs. Containers are classified under the current policy (with the
/// sandbox's annotations), so a container-only rule or a policy edit between the sandbox and the
/// container event can do that; the Result says which. To tell them apart, the same facts are
/// classified again as the sandbox: under the current policy they give the memo's class (a rule
/// for containers decided) or not (the policy changed since the sandbox event — or the facts
/// did: this request's labels/annotations are not the sandbox's).
void note_pod_class(Ctx& c, const Policy& policy, Request& r, const Facts& facts, const Memo& memo, const ClassDef& cls) {
    r.is_sandbox = true;
    Decision sd = classify(policy, facts);
    r.is_sandbox = false;
    std::string why = sd.cls->name == memo.cls
                          ? "a rule for containers chose " + cls.name
                          : "the policy changed since the sandbox event, or this request's labels/annotations differ from the sandbox's "
                            "(the sandbox would now be " +
                                sd.cls->name + ")";
    std::string what = "container class " + cls.name + " differs from its sandbox's class " + memo.cls + ": " + why +
                       "; the pod cgroup keeps class " + memo.cls + "'s pod knobs";
    c.metadata["pod_class"] = memo.cls;
    c.metadata["pod_class_note"] = what;
    log_line(what);
}

std::string render(Ctx& c, const Request* req, int& exit_code) {
    exit_code = 0;
    // Which cpu.shares → cpu.weight formula the event's cgroup v2 writes used, and why (issue #24).
    if (c.have_plan && !c.plan.weight_formula.empty()) c.metadata["cpu_weight_formula"] = c.plan.weight_formula;
    if (c.mode == Mode::Explain) {
        json j;
        if (!c.error.empty()) j["error"] = c.error;
        j["metadata"] = c.metadata;
        if (c.have_plan) {
            j["class"] = c.plan.decision.cls->name;
            j["rule"] = c.plan.decision.rule;
            j["kube_qos"] = kube_qos_name(c.plan.kube_qos);
            j["layout"] = layout_name(c.plan.layout);
            if (!c.plan.nri_api.empty()) j["nri_api"] = c.plan.nri_api;
            j["writes"] = writes_json(c.plan);
            j["via_runtime"] = c.plan.via_runtime;
            j["not_applicable"] = c.plan.skipped;
            j["refused"] = c.plan.refused;
            j["facts"] = c.fact_calcs;
            j["adjustment"] = c.plan.adjustment;
            if (!c.plan.update.is_null()) j["update"] = c.plan.update;
            if (!c.plan.decision.gate_note.empty()) j["gate"] = c.plan.decision.gate_note;
            else if (!c.plan.decision.gate_pass.empty()) j["gate"] = c.plan.decision.gate_pass;
            // The Result's own field names (metadata.class/rule/kube_qos/skipped/gate, writes,
            // adjustment), so that scripts read explain and the Result alike.
            json md = c.metadata;
            md["class"] = c.plan.decision.cls->name;
            md["rule"] = c.plan.decision.rule;
            md["kube_qos"] = kube_qos_name(c.plan.kube_qos);
            Summary s = summarize(c.plan);
            if (!s.skipped.empty()) md["skipped"] = s.skipped;
            if (!c.plan.decision.gate_note.empty()) md["gate"] = c.plan.decision.gate_note;
            if (!c.plan.decision.merges.empty()) md["merged"] = c.plan.decision.merge_text();
            j["metadata"] = md;
            j["skipped"] = c.plan.skipped;
        }
        if (!c.trace_json.is_null()) j["trace"] = c.trace_json;
        if (c.opt.explain_json) return j.dump(2, ' ', false, json::error_handler_t::replace) + "\n";
        std::string t;
        if (req)
            t += "request:  " + std::string(event_name(req->event)) + " " + (req->is_sandbox ? "sandbox " : "container ") + req->id.substr(0, 12) +
                 (req->pod_name.empty() ? "" : " pod " + req->pod_namespace + "/" + req->pod_name) + "\n";
        if (c.have_plan) {
            t += "class:    " + c.plan.decision.cls->name + " (rule " + c.plan.decision.rule + ", kube QoS " + kube_qos_name(c.plan.kube_qos) + ")\n";
            if (!c.plan.decision.gate_note.empty()) t += "gate:     " + c.plan.decision.gate_note + "\n";
            else if (!c.plan.decision.gate_pass.empty()) t += "gate:     " + c.plan.decision.gate_pass + "\n";
            for (const auto& m : c.plan.decision.merges) t += "merge:    " + m.cls + " (rule " + m.rule + "): " + m.note + "\n";
            t +=
                std::string("cgroups:  ") + layout_name(c.plan.layout) + (c.plan.nri_api.empty() ? "" : ", runtime NRI API " + c.plan.nri_api) + "\n";
            for (const auto& w : c.plan.writes)
                t += "write:    " + w.scope + " " +
                     (w.root == Root::Proc      ? "/proc/"
                      : w.root == Root::Resctrl ? "resctrl:"
                                                : "") +
                     w.rel + " = " + w.value + "\n";
            for (const auto& s : c.fact_calcs) t += "fact:     " + s + "\n";
            for (const auto& s : c.plan.via_runtime) t += "runtime:  " + s + ", applied by the runtime at create\n";
            for (const auto& s : c.plan.skipped) t += "skip:     " + s + "\n";
            for (const auto& s : c.plan.refused) t += "refuse:   " + s + "\n";
            if (!c.plan.adjustment.is_null()) t += "nri:      " + c.plan.adjustment.dump() + "\n";
            if (!c.plan.update.is_null()) t += "update:   " + c.plan.update.dump() + "\n";
        }
        for (auto& [k, v] : c.metadata.items()) t += k + ": " + v.get<std::string>() + "\n";
        if (!c.error.empty()) t += "error:    " + c.error + "\n";
        t += c.trace;
        return t;
    }
    if (c.have_plan) {
        Summary s = summarize(c.plan);
        c.metadata["class"] = c.plan.decision.cls->name;
        c.metadata["rule"] = c.plan.decision.rule;
        c.metadata["kube_qos"] = kube_qos_name(c.plan.kube_qos);
        if (!s.applied.empty()) c.metadata["applied"] = s.applied;
        if (!s.skipped.empty()) c.metadata["skipped"] = s.skipped;
        if (!s.failed.empty()) c.metadata["failed"] = s.failed;
        if (std::string sd = systemd_summary(c.plan); !sd.empty()) c.metadata["systemd"] = sd;
        if (!c.plan.decision.gate_note.empty()) c.metadata["gate"] = c.plan.decision.gate_note;
        if (!c.plan.decision.merges.empty()) c.metadata["merged"] = c.plan.decision.merge_text();
        if (!c.plan.not_passed.empty()) {
            std::string keys;
            for (const auto& k : c.plan.not_passed) keys += (keys.empty() ? "" : " ") + k;
            c.metadata["not_passed"] = keys;
        }
        if (s.n_failed > 0) {
            std::string what = "class " + c.plan.decision.cls->name + ": " + std::to_string(s.n_failed) + " knob(s) failed: " + s.failed +
                               "; applied: " + (s.applied.empty() ? "none" : s.applied);
            log_line(what);
            if (c.fail_closed_class) c.error = "nri-qos: " + what;
        }
        if (!s.skipped.empty() && c.opt.debug) log_line("skipped: " + s.skipped);
    }
    // Printed member by member, no DOM of the Result (sinks.hpp; byte-identical to dump_result).
    if (c.mode == Mode::Invoke) {
        exit_code = c.error.empty() ? 0 : 1;
        return dump_v01_result(req && !req->version.empty() ? req->version : "0.1", c.error, c.metadata, c.have_plan ? &c.plan : nullptr);
    }
    return dump_eval_result(c.error, c.fail_closed_policy, c.metadata, c.have_plan ? &c.plan : nullptr);
}

/// Whether the container knob `id` of `plan` landed: carried to the runtime in the
/// CreateContainer adjustment or the UpdateContainer/Synchronize update (the runtime applies it),
/// or written directly and Applied. Only cpuset_cpus / cpuset_mems have fact records.
bool knob_landed(const Plan& plan, KnobId id) {
    const char* field = id == KnobId::CpusetMems ? "mems" : "cpus";
    auto carries = [field](const nlohmann::json& cpu) { return cpu.is_object() && cpu.contains(field); };
    const nlohmann::json& a = plan.adjustment;
    if (a.is_object() && a.contains("linux") && a["linux"].contains("resources") && a["linux"]["resources"].contains("cpu") &&
        carries(a["linux"]["resources"]["cpu"]))
        return true;
    if (plan.update.is_object() && plan.update.contains("cpu") && carries(plan.update["cpu"])) return true;
    for (const Write& w : plan.writes)
        if (w.id == id && w.scope == "container" && w.status == Write::Applied) return true;
    return false;
}

/// Keep the fact records (NUMA placements, pinned cpusets) of values the trust rule accepted
/// whose write landed (issue #30 §2), under the fact lock still held since their choice. A value
/// whose write failed or was never made leaves no record: nothing reserves CPUs a container does
/// not have. A record already kept with the same content is not written again.
void keep_fact_records(const FactPlan& fplan, const Plan& plan, FactState& fstate, Ctx& c) {
    for (const FactRecord& fr : fplan.keep) {
        if (!knob_landed(plan, fr.knob)) continue;
        auto old = fstate.numa_record(fr.rec.container_id);
        if (old && old->mode == fr.rec.mode && old->cpus == fr.rec.cpus && old->nodes == fr.rec.nodes && old->pod_dir == fr.rec.pod_dir) continue;
        if (std::string e = fstate.put_numa(fr.rec); !e.empty()) {
            log_line("cannot keep the " + fr.rec.mode + " record of " + fr.rec.cpus + ": " + e);
            c.metadata["warning"] = "cannot keep the " + fr.rec.mode + " record of " + fr.rec.cpus + ": " + e;
        }
    }
}

// ---- the stages of run_pipeline ----------------------------------------------------------
// run_pipeline is the sequence read_request → place_request → load_policy → classify_request →
// resolve_class_facts → plan_adjustment → write_plan → keep_sandbox_memo (run_stages), then
// finish: render → remember_record_paths → deliver_answer → publish_records → disarm. The
// ordering rules, and where each is held:
//  1. The deadline's answer is refined at each stage (Deadline::stage, via prepare_deadline):
//     the request known (record only: the answer stays fail-open), the policy (its fail mode;
//     while it compiles, compile_fail_mode's), the class (the class's fail mode) — the last
//     before any write. Code: a Classified is made only by classify_request, after it prepared
//     the class's answer, and write_plan takes one. Test: tests/unit/event/test_pipeline.cpp
//     "the class's deadline answer is in force before the first write".
//  2. The sandbox is narrowed to the request's pid, and the sandbox memo merged, before the
//     policy is loaded (the compiled policy materialises only the rules that can match the
//     merged request). Code: load_policy takes the memo place_request returns.
//  3. The fact state (its lock) lives from the facts through the writes and is released before
//     the answer and the records (the next event's evaluator may need it). Code: run_pipeline
//     resets it before finish.
//  4. Resctrl groups are ready before the writes, their lock held through them (write_plan;
//     test_resctrl.cpp "an event's group survives a reconcile cleanup ...").
//  5. The sandbox memo and the record paths are stored before the answer is delivered (the
//     pod's next event and the relay read them right after it); the records come after a
//     delivered answer (Options::deliver), and on every other path before run_pipeline returns
//     (plain invoke: its caller writes the answer after the records, the deadline covering
//     both); the deadline is disarmed last. Code: finish. Tests: test_pipeline.cpp "the memo and
//     the record paths are stored before a delivered answer, the records after it", "without
//     deliver the records are written and the deadline disarmed when run_pipeline returns";
//     test_actuation.cpp "a deadline after the delivered answer cuts the records only".

/// The deadline's record and answer of the current stage (Deadline::stage): the request `r`
/// (nullptr: not parsed), the policy's record paths `ss`; with `answer`, the answer's fail mode
/// `closed` for class `cls` (`mode_from`: compile_fail_mode's phrase, deadline_answer). No-op for
/// explain or an unarmed deadline.
void prepare_deadline(const Ctx& c, const Request* r, const SinkSettings* ss, bool answer, bool closed = false, const std::string& cls = "",
                      const char* mode_from = nullptr) {
    Deadline& dl = Deadline::the();
    if (c.mode == Mode::Explain || !dl.armed()) return;
    EventRecord rec;
    rec.source = c.mode == Mode::Invoke ? "invoke" : "nri-eval";
    rec.evaluator = c.opt.evaluator_mode;
    rec.event = r ? event_name(r->event) : "unparsed";
    if (r) {
        rec.ns = r->pod_namespace;
        rec.pod = r->pod_name;
        rec.container = r->container_name;
        rec.id = r->id;
        rec.sandbox_id = r->sandbox_id;
        rec.sandbox = r->is_sandbox;
    }
    rec.cls = cls;
    if (c.policy_known) set_record_policy(rec, c.policy_info);
    dl.stage(rec, resolve_sink_paths(c.opt.metrics_file, c.opt.event_log, ss, c.opt.default_sinks), closed, answer,
             mode_from ? closed : c.fail_closed_policy, cls, mode_from);
}

// A policy about to be parsed and compiled (a cache miss: up to seconds for a large policy,
// BENCHMARKS.md "cold path"): the compiled policy's fail mode is known only afterwards. Until
// then a deadline answers with compile_fail_mode's: the text's settings.fail read ahead
// (policy.hpp read_fail_mode, one linear pass over the text), closed as well when the policy
// that applies should the compile reject the file — its last good copy (its side file, one
// small read), else the built-in policy — is closed. Never the fail-open of arm_deadline.
void Ctx::compiling() {
    if (mode == Mode::Explain || !Deadline::the().armed() || policy_known) return;
    std::optional<bool> lg = last_good_fail_closed(last_good_dir_of(opt), ppath);
    const std::string* text = compiling_policy_text();
    std::string why;  // Deadline::stage copies it into the answer
    const bool closed = compile_fail_mode(text ? read_fail_mode(*text) : std::nullopt, lg, builtin_policy().fail_closed, why);
    prepare_deadline(*this, req ? &*req : nullptr, nullptr, true, closed, "", why.c_str());
}

/// The policy in force is known (c.policy_info): say which in the Result metadata, and a broken
/// file's error on stderr too (the record and the metrics take it from c.policy_info).
void note_policy(Ctx& c) {
    c.policy_known = true;
    c.metadata["policy"] = policy_source_name(c.policy_info.source);
    c.metadata["policy_sha256"] = c.policy_info.sha256;
    if (c.policy_info.broken()) {
        c.metadata["policy_error"] = c.policy_info.error_line();
        log_line("policy: " + c.policy_info.error_line());
    }
}

/// Stage 1, the request: `c.input` parsed as a v0.1 request, or as a native NRI event for
/// nri-eval and explain of one. From here on the deadline's record names the request (its
/// answer stays fail-open: no policy yet). Throws InputError: a bad request, or a deadline that
/// cut the input (deadline_input_begin).
Request& read_request(Ctx& c) {
    if (deadline_input_cut())
        throw InputError("deadline exceeded after " + std::to_string(Deadline::the().ms) +
                         " ms while reading the request (stdin not closed by the runtime)");
    c.req = (c.mode == Mode::NriEval || c.opt.explain_nri_event) ? parse_nri_event(c.input) : parse_v01_request(c.input);
    prepare_deadline(c, &*c.req, nullptr, false);
    return *c.req;
}

/// The answer to a request read_request refused (`e`): without a valid request the policy's
/// settings.fail still decides (default: open), and its sink settings say where the record goes.
void refuse_request(Ctx& c, const InputError& e) {
    try {
        c.policy =
            effective_policy(c.opt.policy, c.opt.policy == defaults::kPolicy, places_for(c.opt, c.mode, &c.before_compile), nullptr, c.policy_info);
        note_policy(c);
        c.fail_closed_policy = c.policy.fail_closed;
        c.sink_settings = &c.policy.sinks;
        if (c.opt.policy_evaluator_events) *c.opt.policy_evaluator_events = c.policy.evaluator_events;
    } catch (...) {}
    early_error(c, deadline_input_cut() ? std::string(e.what()) : std::string("bad request: ") + e.what());
}

/// Stage 2, the request placed: the sandbox's procfs write access narrowed to the request's pid,
/// the event's policy file chosen (policy_path_for; throws InputError for a bad conf), and the
/// sandbox memo of a container event merged into the request (its pod annotations and name; the
/// request's own win). Returns the memo (nullopt: none, or not a container event).
std::optional<Memo> place_request(Ctx& c, Request& r, StateDir& state) {
    // The pid is known now: shrink the sandbox's procfs write access to /proc/<pid>.
    if (!c.opt.sandbox_keep_wide)
        if (std::string e = narrow_installed_sandbox(r.pid ? static_cast<long>(*r.pid) : 0L); !e.empty()) log_line("sandbox: " + e);
    c.ppath = policy_path_for(c.opt, &r);
    // The sandbox memo is merged first: the compiled policy then materialises only the
    // rules that can match this request (policy_cache.hpp load_policy_for).
    std::optional<Memo> memo;
    if (!r.is_sandbox && (r.event == Event::Create || r.event == Event::Update || r.event == Event::CreateContainer ||
                          r.event == Event::StartContainer || r.event == Event::UpdateContainer || r.event == Event::PostUpdateContainer ||
                          r.event == Event::Synchronize || r.event == Event::SynchronizeLate)) {
        if ((memo = state.load(r.sandbox_id))) merge_memo(r, *memo);
    }
    return memo;
}

/// Stage 3, the policy: never missing, never silently off: the file, else its last good copy,
/// else the built-in policy — and a broken file is reported on every event (policy_store.hpp):
/// in the Result metadata, on stderr, in the event record and the metrics. `filter`: the request
/// (the compiled policy's per-request subset), or nullptr for the whole policy (explain with a
/// trace lists every rule; a reload after knob lists that do not decode). The deadline answers
/// with the policy's fail mode from here on. `placed`: place_request's memo, merged already.
void load_policy(Ctx& c, const Request& r, const Request* filter, const std::optional<Memo>& placed) {
    (void)placed;
    c.policy = effective_policy(c.ppath, c.ppath == defaults::kPolicy, places_for(c.opt, c.mode, &c.before_compile), filter, c.policy_info);
    c.metadata.erase("policy_error");  // a reload's note_policy says it again if it still holds
    note_policy(c);
    c.sink_settings = &c.policy.sinks;
    c.fail_closed_policy = c.policy.fail_closed;
    if (c.opt.policy_evaluator_events) *c.opt.policy_evaluator_events = c.policy.evaluator_events;
    prepare_deadline(c, &r, c.sink_settings, true, c.fail_closed_policy);
}

/// What classify_request hands on: the request's cgroup paths, its facts (kube QoS from the
/// cgroup parent) and its class. Made only by classify_request, after the deadline's answer
/// became the class's (ordering rule 1).
struct Classified {
    std::optional<CgroupPaths> paths;
    Facts facts;
    Decision d;

private:
    Classified(std::optional<CgroupPaths> p, Facts f) : paths(std::move(p)), facts(f) {}
    friend Classified classify_request(Ctx& c, Request& r, const std::optional<Memo>& memo);
};

/// Stage 4, the class: the first matching rule (classify.hpp), the class's knob lists decoded
/// (a cache hit left them encoded; lists that do not decode reload the whole policy and classify
/// again), the deadline's answer made the class's fail mode, a class that differs from the
/// sandbox's noted (note_pod_class), explain's rule trace.
Classified classify_request(Ctx& c, Request& r, const std::optional<Memo>& memo) {
    std::optional<CgroupPaths> paths;
    if (r.cgroups_path) paths = resolve_cgroups_path(*r.cgroups_path);
    const KubeQos kube_qos = paths ? kube_qos_from_path(paths->pod) : KubeQos::Unknown;
    Classified k(std::move(paths), Facts{&r, kube_qos});
    Policy& policy = c.policy;
    Decision& d = k.d;
    d = classify(policy, k.facts);
    // A cache hit left the knob lists encoded: this class's are decoded now, the others never
    // (policy_cache.hpp decode_knobs). Lists that do not decode: the policy is loaded again
    // without the filter, which checks every list and ignores and rebuilds a damaged entry
    // from the TOML, exactly as an entry found damaged at load; no knob of it is used.
    // Rules with merge = true (classify.hpp merge order): their classes' lists too, then combined.
    auto decode_all = [&] {
        if (!policy_cache::decode_knobs(policy, d.cls->name)) return false;
        for (const auto& m : d.merges)
            if (m.applied && !policy_cache::decode_knobs(policy, m.cls)) return false;
        return merge_classes(policy, d);
    };
    if (!decode_all()) {
        load_policy(c, r, nullptr, memo);
        d = classify(policy, k.facts);
    }
    c.fail_closed_class = d.cls->fail_closed;
    // From here on a deadline answers with the class's fail mode (before any write).
    prepare_deadline(c, &r, c.sink_settings, true, c.fail_closed_class, d.cls->name);
    if (memo && !memo->cls.empty() && memo->cls != d.cls->name) note_pod_class(c, policy, r, k.facts, *memo, *d.cls);
    if (c.opt.explain_trace) explain_trace(policy, k.facts, d, c.trace, c.trace_json);
    return k;
}

/// Whether the event's plan is carried out: every event but explain's dry run (explain --pod
/// applies it to its scratch node).
bool applies_plan(const Ctx& c) { return c.mode != Mode::Explain || c.opt.explain_simulate; }

/// Stage 5, the facts: the class's fact-valued knobs computed for this request (facts.hpp), after
/// the knobs another NRI plugin owns (settings.leave_to_others) left the class and percentages
/// were settled against a request that already holds our adjustment. Takes the fact state (its
/// lock, c.fstate) for the writes to come; the decision `k.d` then points at the resolved class
/// (c.fplan.cls). Returns the knobs left to others ("left to <plugin>", skipped).
std::vector<std::string> resolve_class_facts(Ctx& c, Request& r, Classified& k, const PlanInput& pin, StateDir& state) {
    // Facts (facts.hpp): the class's fact-valued knobs computed for this request. The fact
    // state (its lock, NUMA records, ledger) lives until the writes are done.
    c.fstate.emplace(c.opt.state_dir);
    FactInput fin = fact_input(pin, c.opt.cgroup_root, c.opt.sysfs_root, c.opt.dev_root, c.opt.kubelet_cpu_state, !applies_plan(c));
    // NRI v0.1 (containerd 1.5/1.6; 1.7+ through the v010-adapter): the runtime may drop pod
    // annotations (containerd < 1.7: pod_annotations allow-list). The record `register`
    // (or reconcile) left in the state dir says which; read only when a fact's annotation is
    // absent, once per event (issue #25 §1). Native NRI passes all of them: a plain absence.
    std::optional<std::optional<AnnotationPasslist>> passlist;
    if (r.wire == Request::Wire::V01)
        fin.not_passed = [&passlist, &state](const std::string& key) {
            if (!passlist) {
                auto text = state.read_file(kAnnotationPasslistFile, 65536);
                passlist.emplace(text ? load_annotation_passlist(*text) : std::nullopt);
            }
            return annotation_not_passed_reason(*passlist, key);
        };
    const Policy& policy = c.policy;
    // Percentages of the value in force where the request already holds our adjustment.
    ClassDef settled;
    const ClassDef* base = k.d.cls;
    // Knobs another NRI plugin owns (settings.leave_to_others) leave the class first: never
    // computed, planned or written; each is reported skipped, "left to <plugin>".
    std::vector<std::string> left;
    if (!policy.leave_to_others.empty()) {
        settled = *k.d.cls;
        left = leave_to_others(settled, policy);
        if (!left.empty()) base = &settled;
    }
    if (resources_adjusted(r)) {
        if (base != &settled) settled = *k.d.cls;
        if (settle_adjusted_percentages(settled, r)) base = &settled;
    }
    c.fplan = resolve_facts(*base, fin, *c.fstate);
    k.d.cls = &c.fplan.cls;  // same name, fail mode and gate; fact knobs resolved
    return left;
}

/// The plan's input (adjust.hpp PlanInput) for request `r` of class `k` on the node `kernel`
/// reads and writes; the cgroup layout named for the record (c.layout).
PlanInput plan_input(Ctx& c, Request& r, const Classified& k, FsKernel& kernel) {
    PlanInput pin;
    pin.req = &r;
    pin.policy = &c.policy;
    pin.kube_qos = k.facts.kube_qos;
    pin.layout = c.opt.layout ? *c.opt.layout : detect_layout(c.opt.cgroup_root);
    c.layout = layout_name(pin.layout);
    pin.paths = k.paths;
    pin.kernel = &kernel;
    return pin;
}

/// Stage 6, the plan (adjust.hpp build_plan): the resolved class's knobs as cgroup writes and
/// the NRI adjustment, with what the facts and leave_to_others skipped or refused; explain's
/// calculations.
void plan_adjustment(Ctx& c, Request& r, const Classified& k, PlanInput& pin, StateDir& state, FsKernel& kernel, std::vector<std::string>& left) {
    pin.decision = k.d;
    pin.pod_refresh = c.fplan.pod_refresh;
    // settings.cpu_weight_formula = "auto": evidence beyond the request's own pair, read only
    // when that decides nothing (adjust.hpp decide_weight_formula).
    pin.runtime_formula = [&state] { return cached_runtime_formula(state); };
    pin.sibling_weights = [&state, &r, &k, &kernel] { return sibling_weight_pairs(state, r, k.facts.kube_qos, kernel); };
    c.fact_calcs = c.fplan.calcs;
    for (const auto& w : c.fplan.warnings) {
        log_line(w);
        c.metadata["warning"] = w;
    }
    c.plan = build_plan(pin);
    for (auto& s : left) c.plan.skipped.push_back(std::move(s));
    for (auto& s : c.fplan.skipped) c.plan.skipped.push_back(std::move(s));
    for (auto& s : c.fplan.refused) c.plan.refused.push_back(std::move(s));
    c.plan.not_passed = c.fplan.not_passed;
    c.have_plan = true;
    if (c.opt.explain_trace) explain_calculations(c.policy, k.d, r, c.plan, c.trace, c.trace_json);
}

/// Stage 7, the writes: the plan's declared resctrl groups made ready, then (unless explain's dry
/// run) the unit properties and the files (sinks.hpp apply_plan), the fact records of values
/// whose write landed; the v0.1 adjustment finalized. Takes the Classified of classify_request:
/// no write before the deadline answers with the class's fail mode (ordering rule 1).
void write_plan(Ctx& c, const Request& r, const Classified& k, FsKernel& kernel) {
    (void)k;
    const Mode mode = c.mode;
    const Options& opt = c.opt;
    // Declared resctrl groups exist (created, under the mount's lock) before a container is
    // handed to one: in the adjustment (the runtime joins it at create) or the tasks write.
    // The mount's lock stays held through the writes when a tasks write joins such a group:
    // a reconcile cleanup cannot remove the group in between (resctrl.hpp ResctrlLock).
    ResctrlLock resctrl_lock = ensure_plan_groups(c.plan, c.policy, opt.resctrl_root, opt.state_dir, mode == Mode::Explain);
    if (opt.before_writes) opt.before_writes();
    const bool applies = applies_plan(c);  // explain --pod: its scratch node
    if (applies) {
        // systemd driver, cgroup v2: unit properties first (systemd_unit.hpp), then the files.
        // explain --pod's scratch node is never a systemd unit.
        HelperSetter setter(opt.systemd_helper);
        SystemdSink sd;
        if (c.plan.driver == CgroupDriver::Systemd && mode != Mode::Explain) {
            sd.setter = &setter;
            sd.off = mode == Mode::NriEval ? "native NRI evaluator: unit properties not set (its sandbox runs no program); runc registers the "
                                             "CreateContainer adjustment itself; reconcile reapplies the rest after a daemon-reload"
                                           : systemd_sink_off(opt.systemd_helper, opt.cgroup_root);
        }
        apply_plan(c.plan, kernel, mode != Mode::Explain ? &sd : nullptr);
        resctrl_lock.release();
        if (setter.last_us > 0) c.metadata["systemd_helper_us"] = std::to_string(setter.last_us);
        keep_fact_records(c.fplan, c.plan, *c.fstate, c);  // not a dry run: the plan applies
    }
    if (r.wire == Request::Wire::V01) finalize_adjustment(c.plan);
}

/// Stage 8, the sandbox memo (records/state.hpp) of a plan that was carried out: a pod start
/// stores its annotations, name and class for its containers' events; a pod end removes it.
void keep_sandbox_memo(Ctx& c, const Request& r, const Decision& d, StateDir& state) {
    if (!applies_plan(c)) return;
    if (is_pod_start(r)) {
        Memo m;
        for (const auto& [k, v] : r.annotations)
            if (k.rfind("io.kubernetes.cri.", 0) != 0) m.annotations.emplace(k, v);
        m.pod_namespace = r.pod_namespace;
        m.pod_name = r.pod_name;
        m.cls = d.cls->name;
        std::string e = state.store(r.sandbox_id, m);
        if (!e.empty()) {
            log_line(e);
            c.metadata["warning"] = e;
        }
    } else if (is_pod_end(r)) {
        std::string e = state.remove(r.sandbox_id);
        if (!e.empty()) log_line(e);
    }
}

/// Where the event's records go (publish.hpp resolve_sink_paths; none for explain), remembered in
/// the state dir when the policy names them — before the answer: the relay checks this memo
/// right after its reply, to replace evaluators confined to the old record paths (evaluator.hpp
/// roots_signature).
SinkPaths remember_record_paths(const Ctx& c) {
    SinkPaths paths;
    if (c.mode == Mode::Explain) return paths;
    paths = resolve_sink_paths(c.opt.metrics_file, c.opt.event_log, c.sink_settings, c.opt.default_sinks);
    if (c.sink_settings && (c.sink_settings->metrics_file_set || c.sink_settings->event_log_set)) {
        std::string e = remember_sink_paths(c.opt.state_dir, paths);
        if (!e.empty()) log_line(e);
    }
    return paths;
}

/// NriEval with Options::deliver: the answer is final, out it goes before the records. SIGALRM
/// waits meanwhile, so a deadline never writes a second answer into this one; one that fires
/// during the write runs after it and only cuts the records (Deadline::on_signal).
void deliver_answer(const Ctx& c, const std::string& out) {
    if (c.mode != Mode::NriEval || !c.opt.deliver) return;
    sigset_t s, old;
    sigemptyset(&s);
    sigaddset(&s, SIGALRM);
    sigprocmask(SIG_BLOCK, &s, &old);
    c.opt.deliver(out);
    Deadline::the().mark_answered();
    sigprocmask(SIG_SETMASK, &old, nullptr);
}

/// The operator's records of the event (publish.hpp publish_event: the last request, the
/// metrics, the event-log line) at `paths` (remember_record_paths); none for explain.
void publish_records(const Ctx& c, const Request* r, const SinkPaths& paths) {
    if (c.mode == Mode::Explain) return;
    EventOutcome o;
    o.source = c.mode == Mode::Invoke ? "invoke" : "nri-eval";
    o.evaluator = c.opt.evaluator_mode;
    o.req = r;
    o.plan = c.have_plan ? &c.plan : nullptr;
    o.error = c.error;
    o.early_error = c.early;
    o.policy_path = c.ppath;
    o.policy = c.policy_known ? &c.policy_info : nullptr;
    o.start_ns = Deadline::the().start_ns;
    o.input = c.input;
    o.layout = c.layout;
    o.cgroup_root = c.opt.cgroup_root;
    o.proc_root = c.opt.proc_root;
    o.resctrl_root = c.opt.resctrl_root;
    o.state_dir = c.opt.state_dir;
    publish_event(o, paths);
}

/// Every way out of run_pipeline: the Result rendered, the record paths remembered, the answer
/// delivered (Options::deliver), the records published, the deadline disarmed (ordering rule 5).
/// Returns the answer for the caller to write when it was not delivered.
std::string finish(Ctx& c, const Request* r, int& exit_code) {
    std::string out = render(c, r, exit_code);
    const SinkPaths paths = remember_record_paths(c);
    deliver_answer(c, out);
    publish_records(c, r, paths);
    Deadline::the().disarm();
    return out;
}

/// Stages 2-8 of a parsed request `r`. Throws what they throw (run_pipeline reports it).
void run_stages(Ctx& c, Request& r) {
    StateDir state(c.opt.state_dir);
    const std::optional<Memo> memo = place_request(c, r, state);
    load_policy(c, r, c.opt.explain_trace ? nullptr : &r, memo);
    Classified k = classify_request(c, r, memo);
    FsKernel kernel(c.opt.cgroup_root, c.opt.proc_root, c.opt.resctrl_root);
    PlanInput pin = plan_input(c, r, k, kernel);
    std::vector<std::string> left = resolve_class_facts(c, r, k, pin, state);
    plan_adjustment(c, r, k, pin, state, kernel, left);
    write_plan(c, r, k, kernel);
    keep_sandbox_memo(c, r, k.d, state);
}

}  // namespace

std::string run_pipeline(Mode mode, const Options& opt, std::string_view input, int& exit_code) {
    Ctx c(mode, opt, input);
    try {
        read_request(c);
    } catch (const InputError& e) {
        refuse_request(c, e);
        return finish(c, nullptr, exit_code);
    }
    try {
        run_stages(c, *c.req);
    } catch (const InputError& e) {
        early_error(c, std::string("bad request: ") + e.what());
        c.have_plan = false;
    } catch (const std::exception& e) {
        early_error(c, std::string("internal error: ") + e.what());
        c.have_plan = false;
    }
    // The kernel writes are done: the fact lock is not held through the records (with an early
    // answer the next event's evaluator may need it while this one still writes them).
    c.fstate.reset();
    return finish(c, &*c.req, exit_code);
}

std::string last_good_dir_of(const Options& o) {
    if (o.last_good_dir_set) return o.last_good_dir;
    if (o.state_dir != defaults::kStateDir) return o.state_dir + "/last-good";
    return defaults::kLastGoodDir;
}

std::string default_policy_status() {
    PolicyInfo info;
    PolicyPlaces w;
    w.cache_dir = defaults::kCacheDir;
    w.last_good_dir = defaults::kLastGoodDir;
    w.write = false;
    std::string line = "policy: ";
    try {
        effective_policy(defaults::kPolicy, true, w, nullptr, info);
        line += policy_source_name(info.source);
        if (info.source == PolicySource::File) line += std::string(" ") + defaults::kPolicy + " (sha256 " + info.sha256 + ")";
        else if (!info.broken()) line += std::string(" (no ") + defaults::kPolicy + ")";
        else line += " (" + info.error_line() + ")";
    } catch (const std::exception& e) { line += std::string("unknown (") + e.what() + ")"; }
    return line + "\nbuilt-in policy: sha256 " + builtin_policy_sha256() + " (" + std::to_string(builtin_policy_rules()) + " rules, " +
           std::to_string(builtin_policy_classes()) + " classes; conf/nri.d/nri-qos.toml of this build)";
}

int check_policy(const std::string& path, const std::string& cache_dir, const std::string& last_good_dir, std::string& out, std::string& err) {
    // What the hook applies instead while the file is broken (read only: check changes nothing).
    auto meanwhile = [&] {
        PolicyInfo info;
        PolicyPlaces w;
        w.cache_dir = cache_dir.empty() ? defaults::kCacheDir : cache_dir;
        w.last_good_dir = last_good_dir;
        w.write = false;
        try {
            effective_policy(path, path == defaults::kPolicy, w, nullptr, info);
        } catch (const std::exception&) { return std::string(); }
        if (info.source == PolicySource::LastGood) {
            std::string when;
            struct stat st {};
            if (stat((last_good_dir + "/" + last_good_name(path)).c_str(), &st) == 0) {
                char buf[64];
                struct tm tm {};
                strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S %Z", localtime_r(&st.st_mtime, &tm));
                when = std::string(", saved ") + buf;
            }
            return "meanwhile the hook applies the last good copy of " + path + " (" + last_good_dir + "/" + last_good_name(path) + ", sha256 " +
                   info.sha256 + when + ")";
        }
        if (info.source == PolicySource::Builtin)
            return std::string("meanwhile the hook applies the built-in policy (no last good copy of ") + path + " in " +
                   (last_good_dir.empty() ? std::string("(none)") : last_good_dir) + ")";
        return std::string();
    };
    std::string text;
    try {
        text = read_policy_file(path);
    } catch (const InputError& e) {
        err = std::string("nri-qos: ") + e.what() + "\n";
        out = path + ": cannot be read";
        if (path == defaults::kPolicy) out += "; without it the hook applies the built-in policy";
        else if (std::string m = meanwhile(); !m.empty()) out += "; " + m;
        return 1;
    }
    PolicyCheck chk = check_policy_text(text, path);
    for (const auto& d : chk.diags) err += "nri-qos: " + format_diag(path, d) + "\n";
    size_t ne = chk.errors(), nw = chk.warnings();
    auto count = [](size_t n, const char* what) { return std::to_string(n) + " " + what + (n == 1 ? "" : "s"); };
    if (ne > 0) {
        out = path + ": " + count(ne, "error") + (nw ? ", " + count(nw, "warning") : "");
        if (std::string m = meanwhile(); !m.empty()) out += "; " + m;
        return 1;
    }
    const Policy& p = chk.policy;
    out = path + ": OK (" + std::to_string(p.rules.size()) + " rules, " + std::to_string(p.classes.size()) + " classes, default class " +
          p.default_class + ")" + (nw ? "; " + count(nw, "warning") : "");
    // Trust notes (information, not findings): after the summary, on standard output.
    for (const auto& d : chk.notes) out += "\n" + format_diag(path, d);
    if (!cache_dir.empty()) {
        // Precompile (one more parse; check is not the hot path) and keep it as the last good copy.
        // A cache that cannot be written (read-only, untrusted owner or mode, not a directory)
        // only costs the hook a compile on its next event: a warning, not an error — but said,
        // as the packages' install runs this line (nothing silent). Written = the entry's inode
        // or mtime changed, or the load was a hit.
        const std::string entry = cache_dir + "/" + policy_cache::cache_file_name(path);
        struct stat before {
        }, after{};
        const bool had = stat(entry.c_str(), &before) == 0;
        FileLoad f = load_policy_file(path, cache_dir, nullptr, true);
        const bool written = f.from_cache || (stat(entry.c_str(), &after) == 0 &&
                                              (!had || after.st_ino != before.st_ino || after.st_mtim.tv_sec != before.st_mtim.tv_sec ||
                                               after.st_mtim.tv_nsec != before.st_mtim.tv_nsec));
        if (f.ok && !written)
            err += "nri-qos: " + path + ": warning: not precompiled: the cache " + cache_dir +
                   " cannot be written (it must be a root-owned directory, not group/world-writable);"
                   " the hook compiles the policy on each event until it can be\n";
        if (f.ok && !last_good_dir.empty())
            if (std::string e = save_last_good(last_good_dir, path, text, p.fail_closed); !e.empty()) err += "nri-qos: " + e + "\n";
    }
    return 0;
}

}  // namespace nriqos
