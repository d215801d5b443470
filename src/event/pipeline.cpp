#include "event/pipeline.hpp"

#include <atomic>
#include <csignal>
#include <ctime>
#include <sys/stat.h>
#include <cstdio>
#include <cstring>
#include <sys/time.h>
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

// ---- self-imposed deadline ---------------------------------------------------------------
// The answer printed when the deadline fires is prepared beforehand, and prepared again as soon
// as the pipeline knows more: the policy's fail mode once the policy is loaded, then the class's
// once the request is classified — always before any kernel file is written. A new answer goes
// into the buffer the handler is not using; one lock-free atomic store then makes it the active
// one. The handler only reads the active buffer, write(2)s it and _exit(2)s (async-signal-safe).
struct DeadlineAnswer {
    char out[1024];
    size_t out_len;
    char err[256];
    size_t err_len;
    int code;  // exit status: invoke fail-closed 1 (the Result carries an error), else 0
};
DeadlineAnswer g_deadline[2];
std::atomic<int> g_deadline_active{0};
static_assert(std::atomic<int>::is_always_lock_free, "the deadline handler needs a lock-free atomic");
Mode g_deadline_mode = Mode::Invoke;
int g_deadline_ms = 0;  // 0: not armed

// 0: not reading the request; 1: reading it; 2: the deadline cut it (deadline_input_begin()).
std::atomic<int> g_input_phase{0};
// 1 once Options::deliver has delivered the answer: a deadline then cuts the records only.
std::atomic<int> g_answered{0};

extern "C" void on_deadline(int) {
    int reading = 1;
    if (g_input_phase.compare_exchange_strong(reading, 2)) {
        // The read in progress returns EINTR; run_pipeline answers with the policy's fail mode.
        // If that does not happen within the grace, this handler runs again and answers below.
        struct itimerval it {};
        it.it_value.tv_usec = kDeadlineInputGraceMs * 1000;
        setitimer(ITIMER_REAL, &it, nullptr);
        return;
    }
    if (g_answered.load(std::memory_order_acquire)) {
        // The real answer is out and stands: no second answer, no "deadline exceeded, fail-open/
        // closed" record (it would be false). The records publish_event has not written yet are
        // cut; the relay records that (reason records-cut) from our exit status.
        static const char kCut[] =
            "nri-qos: deadline exceeded after the answer was delivered: this event's records "
            "(event log, metrics, last request) may be incomplete\n";
        ssize_t w = write(STDERR_FILENO, kCut, sizeof kCut - 1);
        (void)w;
        _exit(kExitRecordsCut);
    }
    const int slot = g_deadline_active.load(std::memory_order_acquire);
    const DeadlineAnswer& a = g_deadline[slot];
    ssize_t r = write(STDOUT_FILENO, a.out, a.out_len);
    (void)r;
    r = write(STDERR_FILENO, a.err, a.err_len);
    (void)r;
    // The event's record and its count, of the same stage as the answer (publish.hpp): async-signal-safe.
    record_on_deadline(slot);
    _exit(a.code);
}

void copy_into(char* dst, size_t cap, size_t& len, const std::string& s) {
    len = std::min(s.size(), cap);
    std::memcpy(dst, s.data(), len);
}

/// Fill the answer of `slot` with `text`/`err` (not from the handler).
void set_deadline_answer(int slot, const std::string& text, const std::string& err, int code) {
    DeadlineAnswer& a = g_deadline[slot];
    copy_into(a.out, sizeof a.out, a.out_len, text);
    copy_into(a.err, sizeof a.err, a.err_len, err);
    a.code = code;
}

int64_t g_start_ns = 0;

}  // namespace

std::string deadline_answer(Mode mode, bool closed, bool policy_closed, const std::string& cls, int ms, int& exit_code, const char* mode_from) {
    // Byte-compatible with nlohmann's dump() of the same object (keys sorted). Class names are
    // [A-Za-z0-9_.-] (policy.cpp validates them), `mode_from` is one of our fixed phrases
    // (compile_fail_mode): nothing to escape.
    std::string md;
    if (!cls.empty()) md = "\"class\":\"" + cls + "\"";
    const std::string during = mode_from ? std::string(" while the policy was being compiled") : std::string();
    const std::string whose = mode_from ? std::string(" (") + mode_from + ")" : std::string();
    std::string error;
    if (closed) {
        error = "nri-qos: deadline exceeded after " + std::to_string(ms) + " ms" + during + (cls.empty() ? "" : " (class " + cls + ")") +
                ": fail-closed" + whose + ", container refused; knobs may be partly applied";
    } else {
        md += std::string(md.empty() ? "" : ",") + "\"warning\":\"deadline exceeded" + during + ": nri-qos gave up (fail-open)" + whose +
              "; knobs may be partly applied\"";
    }
    exit_code = closed && mode == Mode::Invoke ? 1 : 0;
    if (mode == Mode::Invoke) return "{\"error\":\"" + error + "\",\"metadata\":{" + md + "},\"plugin\":\"nri-qos\",\"version\":\"0.1\"}\n";
    // "deadline": true — the mode is not the policy's (see arm_deadline): the relay never caches it.
    return std::string("{\"adjustment\":null,") + (mode_from ? "\"deadline\":true," : "") + "\"error\":\"" + error + "\",\"metadata\":{" + md +
           "},\"on_child_failure\":\"" + (policy_closed ? "closed" : "open") + "\",\"update\":null}\n";
}

bool compile_fail_mode(std::optional<bool> text_closed, std::optional<bool> last_good_closed, bool builtin_closed, std::string& why) {
    const bool fb = last_good_closed ? *last_good_closed : builtin_closed;
    const char* fb_name = last_good_closed ? "its last good copy" : "the built-in policy";
    if (!text_closed) {
        why = std::string("the fail mode of ") + fb_name +
              ", which applies when the compile rejects the file; the file's settings.fail could not be read ahead of its compile";
        return fb;
    }
    if (*text_closed || !fb) {
        why = "the policy file's settings.fail, read ahead of its compile";
        return *text_closed;
    }
    why = std::string("the fail mode of ") + fb_name + ", which applies if the compile rejects the file; the file's own settings.fail is open";
    return true;
}

int64_t invocation_start_ns() { return g_start_ns; }

void prepare_deadline_record(Mode mode, const Options& opt) {
    if (mode == Mode::Explain || g_deadline_ms <= 0) return;
    EventRecord rec;
    rec.source = mode == Mode::Invoke ? "invoke" : "nri-eval";
    rec.evaluator = opt.evaluator_mode;
    rec.event = "unparsed";
    // The record into the slot the handler is not reading, with a copy of the current answer;
    // one store makes both current.
    int cur = g_deadline_active.load(std::memory_order_relaxed), next = 1 - cur;
    prepare_deadline_record(rec, resolve_sink_paths(opt.metrics_file, opt.event_log, nullptr, opt.default_sinks), int64_t(g_deadline_ms) * 1000,
                            false, next);
    g_deadline[next] = g_deadline[cur];
    g_deadline_active.store(next, std::memory_order_release);
}

void deadline_input_begin() {
    if (g_deadline_ms > 0) g_input_phase.store(1);
}

bool deadline_input_cut() { return g_input_phase.load() == 2; }

bool deadline_input_end() {
    int reading = 1;
    g_input_phase.compare_exchange_strong(reading, 0);
    return deadline_input_cut();
}

void arm_deadline(Mode mode, int ms) {
    g_start_ns = monotonic_ns();
    if (ms <= 0 || mode == Mode::Explain) return;
        // Nothing is known yet (no request, no policy): fail-open, built without a json object.
#define NRIQOS_DEADLINE_WARNING "deadline exceeded: nri-qos gave up (fail-open); knobs may be partly applied"
    static const char kInvoke[] =
        "{\"error\":\"\",\"metadata\":{\"warning\":\"" NRIQOS_DEADLINE_WARNING "\"},\"plugin\":\"nri-qos\",\"version\":\"0.1\"}\n";
    // nri-eval: "deadline": true tells the relay that this answer was written before the policy
    // was known, so its on_child_failure is not the policy's (src/nri relay: never cached from
    // it). The answers prepared again later (deadline_stage) carry the policy's own mode.
    static const char kEval[] = "{\"adjustment\":null,\"deadline\":true,\"error\":\"\",\"metadata\":{\"warning\":\"" NRIQOS_DEADLINE_WARNING
                                "\"},\"on_child_failure\":\"open\",\"update\":null}\n";
#undef NRIQOS_DEADLINE_WARNING
    static const char kErr[] = "nri-qos: deadline exceeded; printed a fail-open result (knobs may be partly applied)\n";
    const char* s = mode == Mode::Invoke ? kInvoke : kEval;
    DeadlineAnswer& a = g_deadline[0];
    a.out_len = std::min(std::strlen(s), sizeof a.out);
    std::memcpy(a.out, s, a.out_len);
    a.err_len = sizeof kErr - 1;
    std::memcpy(a.err, kErr, a.err_len);
    a.code = 0;
    g_deadline_active.store(0, std::memory_order_release);
    g_deadline_mode = mode;
    g_deadline_ms = ms;
    struct sigaction sa {};
    sa.sa_handler = on_deadline;
    sigaction(SIGALRM, &sa, nullptr);
    struct itimerval it {};
    it.it_value.tv_sec = ms / 1000;
    it.it_value.tv_usec = (ms % 1000) * 1000;
    setitimer(ITIMER_REAL, &it, nullptr);
}

void arm_next_deadline(Mode mode, int ms, const Options& opt) {
    struct itimerval off {};
    setitimer(ITIMER_REAL, &off, nullptr);
    g_deadline_ms = 0;
    g_answered.store(0, std::memory_order_release);
    g_input_phase.store(0);
    arm_deadline(mode, ms);
    prepare_deadline_record(mode, opt);
}

namespace {

/// One stage of the deadline (see the comment above): the record `rec` (publish.hpp
/// prepare_deadline_record, outcome per `closed`) and — when `answer` — the answer with the fail
/// mode `closed` (the policy's `policy_closed`, class `cls`; else the current answer is kept) go
/// into the slot the handler is not reading; one atomic store makes both current, so a deadline
/// never writes the answer of one stage with the record of another.
/// `mode_from`: see deadline_answer (the answer's fail mode is not the policy's own yet).
void deadline_stage(const EventRecord& rec, const SinkPaths& paths, bool closed, bool answer, bool policy_closed, const std::string& cls,
                    const char* mode_from = nullptr) {
    if (g_deadline_ms <= 0) return;
    int cur = g_deadline_active.load(std::memory_order_relaxed), next = 1 - cur;
    prepare_deadline_record(rec, paths, int64_t(g_deadline_ms) * 1000, closed, next);
    if (answer) {
        int code = 0;
        std::string text = deadline_answer(g_deadline_mode, closed, policy_closed, cls, g_deadline_ms, code, mode_from);
        std::string err = std::string("nri-qos: deadline exceeded; printed a ") + (closed ? "fail-closed" : "fail-open") + " result" +
                          (cls.empty() ? "" : " (class " + cls + ")") + " (knobs may be partly applied)\n";
        set_deadline_answer(next, text, err, code);
    } else {
        g_deadline[next] = g_deadline[cur];
    }
    g_deadline_active.store(next, std::memory_order_release);
}

void disarm_deadline() {
    struct itimerval it {};
    setitimer(ITIMER_REAL, &it, nullptr);
    g_deadline_ms = 0;
}

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

struct Ctx {
    Mode mode;
    const Options& opt;
    PolicyInfo policy;  // which policy is in force (Result metadata policy, policy_sha256, policy_error)
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

}  // namespace

std::string run_pipeline(Mode mode, const Options& opt, std::string_view input, int& exit_code) {
    Ctx c{mode, opt};
    std::optional<Request> req;
    std::string ppath = opt.policy;  // policy file of this event
    bool policy_known = false;  // c.policy says which policy is in force
    const SinkSettings* sink_settings = nullptr;
    std::string layout;
    Policy policy;  // outlives render(): c.plan.decision.cls points into policy.classes
    // Every way out renders the Result, feeds the operator's sinks (record, metrics, last
    // request: publish.hpp) and disarms the deadline.
    auto finish = [&](const Request* r) {
        std::string out = render(c, r, exit_code);
        SinkPaths paths;
        if (mode != Mode::Explain) {
            paths = resolve_sink_paths(opt.metrics_file, opt.event_log, sink_settings, opt.default_sinks);
            // Before the answer, like the sandbox memo: the relay checks this memo right after
            // its reply, to replace evaluators confined to the old record paths (evaluator.hpp
            // roots_signature).
            if (sink_settings && (sink_settings->metrics_file_set || sink_settings->event_log_set)) {
                std::string e = remember_sink_paths(opt.state_dir, paths);
                if (!e.empty()) log_line(e);
            }
        }
        if (mode == Mode::NriEval && opt.deliver) {
            // The answer is final: out first, the records after (Options::deliver). SIGALRM
            // waits meanwhile, so a deadline never writes a second answer into this one; one
            // that fires during the write runs after it and only cuts the records.
            sigset_t s, old;
            sigemptyset(&s);
            sigaddset(&s, SIGALRM);
            sigprocmask(SIG_BLOCK, &s, &old);
            opt.deliver(out);
            g_answered.store(1, std::memory_order_release);
            sigprocmask(SIG_SETMASK, &old, nullptr);
        }
        if (mode != Mode::Explain) {
            EventOutcome o;
            o.source = mode == Mode::Invoke ? "invoke" : "nri-eval";
            o.evaluator = opt.evaluator_mode;
            o.req = r;
            o.plan = c.have_plan ? &c.plan : nullptr;
            o.error = c.error;
            o.early_error = c.early;
            o.policy_path = ppath;
            o.policy = policy_known ? &c.policy : nullptr;
            o.start_ns = g_start_ns;
            o.input = input;
            o.layout = layout;
            o.cgroup_root = opt.cgroup_root;
            o.proc_root = opt.proc_root;
            o.resctrl_root = opt.resctrl_root;
            o.state_dir = opt.state_dir;
            publish_event(o, paths);
        }
        disarm_deadline();
        return out;
    };
    // The policy in force is known (c.policy): say which in the Result metadata, and a broken
    // file's error on stderr too (the record and the metrics take it from c.policy).
    auto note_policy = [&] {
        policy_known = true;
        c.metadata["policy"] = policy_source_name(c.policy.source);
        c.metadata["policy_sha256"] = c.policy.sha256;
        if (c.policy.broken()) {
            c.metadata["policy_error"] = c.policy.error_line();
            log_line("policy: " + c.policy.error_line());
        }
    };
    // The deadline's record and answer, refined at each stage (deadline_stage): the request
    // known (record only; the answer stays fail-open), the policy (its fail mode), the class
    // (the class's fail mode, before any write).
    auto prepare_deadline = [&](const Request* r, const SinkSettings* ss, bool answer, bool closed = false, const std::string& cls = "",
                                const char* mode_from = nullptr) {
        if (mode == Mode::Explain || g_deadline_ms <= 0) return;
        EventRecord rec;
        rec.source = mode == Mode::Invoke ? "invoke" : "nri-eval";
        rec.evaluator = opt.evaluator_mode;
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
        if (policy_known) set_record_policy(rec, c.policy);
        deadline_stage(rec, resolve_sink_paths(opt.metrics_file, opt.event_log, ss, opt.default_sinks), closed, answer,
                       mode_from ? closed : c.fail_closed_policy, cls, mode_from);
    };
    // A policy about to be parsed and compiled (a cache miss: up to seconds for a large policy,
    // BENCHMARKS.md "cold path"): the compiled policy's fail mode is known only afterwards. Until
    // then a deadline answers with compile_fail_mode's: the text's settings.fail read ahead
    // (policy.hpp read_fail_mode, one linear pass over the text), closed as well when the policy
    // that applies should the compile reject the file — its last good copy (its side file, one
    // small read), else the built-in policy — is closed. Never the fail-open of arm_deadline.
    const std::function<void()> before_compile = [&] {
        if (mode == Mode::Explain || g_deadline_ms <= 0 || policy_known) return;
        std::optional<bool> lg = last_good_fail_closed(last_good_dir_of(opt), ppath);
        const std::string* text = compiling_policy_text();
        std::string why;  // deadline_stage copies it into the answer
        const bool closed = compile_fail_mode(text ? read_fail_mode(*text) : std::nullopt, lg, builtin_policy().fail_closed, why);
        prepare_deadline(req ? &*req : nullptr, nullptr, true, closed, "", why.c_str());
    };
    try {
        if (deadline_input_cut())
            throw InputError("deadline exceeded after " + std::to_string(g_deadline_ms) +
                             " ms while reading the request (stdin not closed by the runtime)");
        req = (mode == Mode::NriEval || opt.explain_nri_event) ? parse_nri_event(input) : parse_v01_request(input);
        prepare_deadline(&*req, nullptr, false);
    } catch (const InputError& e) {
        // Without a valid request the policy's settings.fail still decides (default: open), and
        // its sink settings say where the record goes.
        try {
            policy = effective_policy(opt.policy, opt.policy == defaults::kPolicy, places_for(opt, mode, &before_compile), nullptr, c.policy);
            note_policy();
            c.fail_closed_policy = policy.fail_closed;
            sink_settings = &policy.sinks;
            if (opt.policy_evaluator_events) *opt.policy_evaluator_events = policy.evaluator_events;
        } catch (...) {}
        early_error(c, deadline_input_cut() ? std::string(e.what()) : std::string("bad request: ") + e.what());
        return finish(nullptr);
    }
    FactPlan fplan;  // outlives render() too: the decision points at its resolved class
    std::optional<FactState> fstate;  // the fact lock is held until the writes are done
    try {
        Request& r = *req;
        // The pid is known now: shrink the sandbox's procfs write access to /proc/<pid>.
        if (!opt.sandbox_keep_wide)
            if (std::string e = narrow_installed_sandbox(r.pid ? static_cast<long>(*r.pid) : 0L); !e.empty()) log_line("sandbox: " + e);
        ppath = policy_path_for(opt, &r);
        // The sandbox memo is merged first: the compiled policy then materialises only the
        // rules that can match this request (policy_cache.hpp load_policy_for).
        StateDir state(opt.state_dir);
        std::optional<Memo> memo;
        if (!r.is_sandbox && (r.event == Event::Create || r.event == Event::Update || r.event == Event::CreateContainer ||
                              r.event == Event::StartContainer || r.event == Event::UpdateContainer || r.event == Event::PostUpdateContainer ||
                              r.event == Event::Synchronize || r.event == Event::SynchronizeLate)) {
            if ((memo = state.load(r.sandbox_id))) {
                for (auto& [k, v] : memo->annotations) r.annotations.emplace(k, v);  // the request's own win
                if (r.pod_namespace.empty()) r.pod_namespace = memo->pod_namespace;
                if (r.pod_name.empty()) r.pod_name = memo->pod_name;
            }
        }
        // Never missing, never silently off: the file, else its last good copy, else the
        // built-in policy — and a broken file is reported on every event (policy_store.hpp): in
        // the Result metadata, on stderr, in the event record and the metrics. explain with a
        // trace lists every rule: it needs the whole rule list, not the cache's per-request subset.
        // `filter`: the request, or nullptr for the whole policy (also what a reload below uses).
        auto use_policy = [&](const Request* filter) {
            policy = effective_policy(ppath, ppath == defaults::kPolicy, places_for(opt, mode, &before_compile), filter, c.policy);
            c.metadata.erase("policy_error");  // a reload's note_policy says it again if it still holds
            note_policy();
            sink_settings = &policy.sinks;
            c.fail_closed_policy = policy.fail_closed;
            if (opt.policy_evaluator_events) *opt.policy_evaluator_events = policy.evaluator_events;
            prepare_deadline(&r, sink_settings, true, c.fail_closed_policy);
        };
        use_policy(opt.explain_trace ? nullptr : &r);

        std::optional<CgroupPaths> paths;
        if (r.cgroups_path) paths = resolve_cgroups_path(*r.cgroups_path);
        Facts facts{&r, paths ? kube_qos_from_path(paths->pod) : KubeQos::Unknown};
        Decision d = classify(policy, facts);
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
            use_policy(nullptr);
            d = classify(policy, facts);
        }
        c.fail_closed_class = d.cls->fail_closed;
        // From here on a deadline answers with the class's fail mode (before any write).
        prepare_deadline(&r, sink_settings, true, c.fail_closed_class, d.cls->name);
        if (memo && !memo->cls.empty() && memo->cls != d.cls->name) note_pod_class(c, policy, r, facts, *memo, *d.cls);
        if (opt.explain_trace) explain_trace(policy, facts, d, c.trace, c.trace_json);

        FsKernel kernel(opt.cgroup_root, opt.proc_root, opt.resctrl_root);
        PlanInput pin;
        pin.req = &r;
        pin.policy = &policy;
        pin.kube_qos = facts.kube_qos;
        pin.layout = opt.layout ? *opt.layout : detect_layout(opt.cgroup_root);
        layout = layout_name(pin.layout);
        pin.paths = paths;
        pin.kernel = &kernel;
        // Facts (facts.hpp): the class's fact-valued knobs computed for this request. The fact
        // state (its lock, NUMA records, ledger) lives until the writes are done.
        fstate.emplace(opt.state_dir);
        FactInput fin;
        fin.req = &r;
        fin.policy = &policy;
        fin.kube_qos = facts.kube_qos;
        fin.paths = paths;
        fin.layout = pin.layout;
        fin.kernel = &kernel;
        fin.cgroup_root = opt.cgroup_root;
        fin.sysfs_root = opt.sysfs_root;
        fin.dev_root = opt.dev_root;
        fin.kubelet_cpu_state = opt.kubelet_cpu_state;
        fin.dry_run = mode == Mode::Explain && !opt.explain_simulate;
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
        // Percentages of the value in force where the request already holds our adjustment.
        ClassDef settled;
        const ClassDef* base = d.cls;
        // Knobs another NRI plugin owns (settings.leave_to_others) leave the class first: never
        // computed, planned or written; each is reported skipped, "left to <plugin>".
        std::vector<std::string> left;
        if (!policy.leave_to_others.empty()) {
            settled = *d.cls;
            left = leave_to_others(settled, policy);
            if (!left.empty()) base = &settled;
        }
        if (resources_adjusted(r)) {
            if (base != &settled) settled = *d.cls;
            if (settle_adjusted_percentages(settled, r)) base = &settled;
        }
        fplan = resolve_facts(*base, fin, *fstate);
        d.cls = &fplan.cls;  // same name, fail mode and gate; fact knobs resolved
        pin.decision = d;
        pin.pod_refresh = fplan.pod_refresh;
        // settings.cpu_weight_formula = "auto": evidence beyond the request's own pair, read only
        // when that decides nothing (adjust.hpp decide_weight_formula).
        pin.runtime_formula = [&state] { return cached_runtime_formula(state); };
        pin.sibling_weights = [&] { return sibling_weight_pairs(state, r, facts.kube_qos, kernel); };
        c.fact_calcs = fplan.calcs;
        for (const auto& w : fplan.warnings) {
            log_line(w);
            c.metadata["warning"] = w;
        }
        c.plan = build_plan(pin);
        for (auto& s : left) c.plan.skipped.push_back(std::move(s));
        for (auto& s : fplan.skipped) c.plan.skipped.push_back(std::move(s));
        for (auto& s : fplan.refused) c.plan.refused.push_back(std::move(s));
        c.plan.not_passed = fplan.not_passed;
        c.have_plan = true;
        if (opt.explain_trace) explain_calculations(policy, d, r, c.plan, c.trace, c.trace_json);
        // Declared resctrl groups exist (created, under the mount's lock) before a container is
        // handed to one: in the adjustment (the runtime joins it at create) or the tasks write.
        // The mount's lock stays held through the writes when a tasks write joins such a group:
        // a reconcile cleanup cannot remove the group in between (resctrl.hpp ResctrlLock).
        ResctrlLock resctrl_lock = ensure_plan_groups(c.plan, policy, opt.resctrl_root, opt.state_dir, mode == Mode::Explain);
        if (opt.before_writes) opt.before_writes();
        const bool applies = mode != Mode::Explain || opt.explain_simulate;  // explain --pod: its scratch node
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
            if (!fin.dry_run) keep_fact_records(fplan, c.plan, *fstate, c);
        }
        if (r.wire == Request::Wire::V01) finalize_adjustment(c.plan);
        if (applies) {
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
    } catch (const InputError& e) {
        early_error(c, std::string("bad request: ") + e.what());
        c.have_plan = false;
    } catch (const std::exception& e) {
        early_error(c, std::string("internal error: ") + e.what());
        c.have_plan = false;
    }
    // The kernel writes are done: the fact lock is not held through the records (with an early
    // answer the next event's evaluator may need it while this one still writes them).
    fstate.reset();
    return finish(req ? &*req : nullptr);
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
