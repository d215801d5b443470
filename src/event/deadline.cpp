#include "event/deadline.hpp"

#include <csignal>
#include <cstring>
#include <sys/time.h>
#include <unistd.h>

#include "event/pipeline.hpp"
#include "event/publish.hpp"
#include "os/clock.hpp"

namespace nriqos {

namespace {

static_assert(std::atomic<int>::is_always_lock_free, "the deadline handler needs a lock-free atomic");

Deadline g_deadline;  // the one instance (Deadline::the): static storage, zero-initialised

extern "C" void on_deadline(int) { g_deadline.on_signal(); }

void copy_into(char* dst, size_t cap, size_t& len, const std::string& s) {
    len = std::min(s.size(), cap);
    std::memcpy(dst, s.data(), len);
}

}  // namespace

Deadline& Deadline::the() { return g_deadline; }

void Deadline::on_signal() {
    int reading = 1;
    if (input_phase.compare_exchange_strong(reading, 2)) {
        // The read in progress returns EINTR; run_pipeline answers with the policy's fail mode.
        // If that does not happen within the grace, this handler runs again and answers below.
        struct itimerval it {};
        it.it_value.tv_usec = kDeadlineInputGraceMs * 1000;
        setitimer(ITIMER_REAL, &it, nullptr);
        return;
    }
    if (answered.load(std::memory_order_acquire)) {
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
    const int slot = active.load(std::memory_order_acquire);
    const Answer& a = answers[slot];
    ssize_t r = write(STDOUT_FILENO, a.out, a.out_len);
    (void)r;
    r = write(STDERR_FILENO, a.err, a.err_len);
    (void)r;
    // The event's record and its count, of the same stage as the answer (publish.hpp): async-signal-safe.
    record_on_deadline(slot);
    _exit(a.code);
}

void Deadline::arm(Mode mode_, int ms_) {
    start_ns = monotonic_ns();
    if (ms_ <= 0 || mode_ == Mode::Explain) return;
        // Nothing is known yet (no request, no policy): fail-open, built without a json object.
#define NRIQOS_DEADLINE_WARNING "deadline exceeded: nri-qos gave up (fail-open); knobs may be partly applied"
    static const char kInvoke[] =
        "{\"error\":\"\",\"metadata\":{\"warning\":\"" NRIQOS_DEADLINE_WARNING "\"},\"plugin\":\"nri-qos\",\"version\":\"0.1\"}\n";
    // nri-eval: "deadline": true tells the relay that this answer was written before the policy
    // was known, so its on_child_failure is not the policy's (src/nri relay: never cached from
    // it). The answers prepared again later (stage) carry the policy's own mode.
    static const char kEval[] = "{\"adjustment\":null,\"deadline\":true,\"error\":\"\",\"metadata\":{\"warning\":\"" NRIQOS_DEADLINE_WARNING
                                "\"},\"on_child_failure\":\"open\",\"update\":null}\n";
#undef NRIQOS_DEADLINE_WARNING
    static const char kErr[] = "nri-qos: deadline exceeded; printed a fail-open result (knobs may be partly applied)\n";
    const char* s = mode_ == Mode::Invoke ? kInvoke : kEval;
    Answer& a = answers[0];
    a.out_len = std::min(std::strlen(s), sizeof a.out);
    std::memcpy(a.out, s, a.out_len);
    a.err_len = sizeof kErr - 1;
    std::memcpy(a.err, kErr, a.err_len);
    a.code = 0;
    active.store(0, std::memory_order_release);
    mode = mode_;
    ms = ms_;
    struct sigaction sa {};
    sa.sa_handler = on_deadline;
    sigaction(SIGALRM, &sa, nullptr);
    struct itimerval it {};
    it.it_value.tv_sec = ms_ / 1000;
    it.it_value.tv_usec = (ms_ % 1000) * 1000;
    setitimer(ITIMER_REAL, &it, nullptr);
}

void Deadline::disarm() {
    struct itimerval it {};
    setitimer(ITIMER_REAL, &it, nullptr);
    ms = 0;
}

void Deadline::reset_event() {
    disarm();
    answered.store(0, std::memory_order_release);
    input_phase.store(0);
}

void Deadline::stage(const EventRecord& rec, const SinkPaths& paths, bool closed, bool answer, bool policy_closed, const std::string& cls,
                     const char* mode_from) {
    if (ms <= 0) return;
    int cur = active.load(std::memory_order_relaxed), next = 1 - cur;
    prepare_deadline_record(rec, paths, int64_t(ms) * 1000, closed, next);
    if (answer) {
        int code = 0;
        std::string text = deadline_answer(mode, closed, policy_closed, cls, ms, code, mode_from);
        std::string err = std::string("nri-qos: deadline exceeded; printed a ") + (closed ? "fail-closed" : "fail-open") + " result" +
                          (cls.empty() ? "" : " (class " + cls + ")") + " (knobs may be partly applied)\n";
        Answer& a = answers[next];
        copy_into(a.out, sizeof a.out, a.out_len, text);
        copy_into(a.err, sizeof a.err, a.err_len, err);
        a.code = code;
    } else {
        answers[next] = answers[cur];
    }
    active.store(next, std::memory_order_release);
}

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

int64_t invocation_start_ns() { return g_deadline.start_ns; }

void prepare_deadline_record(Mode mode, const Options& opt) {
    Deadline& dl = g_deadline;
    if (mode == Mode::Explain || dl.ms <= 0) return;
    EventRecord rec;
    rec.source = mode == Mode::Invoke ? "invoke" : "nri-eval";
    rec.evaluator = opt.evaluator_mode;
    rec.event = "unparsed";
    // The record into the slot the handler is not reading, with a copy of the current answer;
    // one store makes both current.
    int cur = dl.active.load(std::memory_order_relaxed), next = 1 - cur;
    prepare_deadline_record(rec, resolve_sink_paths(opt.metrics_file, opt.event_log, nullptr, opt.default_sinks), int64_t(dl.ms) * 1000, false, next);
    dl.answers[next] = dl.answers[cur];
    dl.active.store(next, std::memory_order_release);
}

void deadline_input_begin() {
    if (g_deadline.ms > 0) g_deadline.input_phase.store(1);
}

bool deadline_input_cut() { return g_deadline.input_phase.load() == 2; }

bool deadline_input_end() {
    int reading = 1;
    g_deadline.input_phase.compare_exchange_strong(reading, 0);
    return deadline_input_cut();
}

void arm_deadline(Mode mode, int ms) { g_deadline.arm(mode, ms); }

void arm_next_deadline(Mode mode, int ms, const Options& opt) {
    g_deadline.reset_event();
    deadline_record_new_event();  // the last event's publish_event took its own record, not this one's
    arm_deadline(mode, ms);
    prepare_deadline_record(mode, opt);
}

std::string deadline_answer_in_force() {
    if (!g_deadline.armed()) return std::string();
    const Deadline::Answer& a = g_deadline.answers[g_deadline.active.load(std::memory_order_acquire)];
    return std::string(a.out, a.out_len);
}

}  // namespace nriqos
