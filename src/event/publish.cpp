#include "event/publish.hpp"

#include <cerrno>
#include <csignal>
#include <cstring>
#include <sys/file.h>
#include <ctime>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "event/adjust.hpp"
#include "os/kernel.hpp"
#include "records/metrics.hpp"
#include "records/record.hpp"
#include "model/request.hpp"
#include "event/sinks.hpp"
#include "records/state.hpp"
#include "os/clock.hpp"

namespace nriqos {

SinkPaths resolve_sink_paths(const std::optional<std::string>& metrics_flag, const std::optional<std::string>& log_flag, const SinkSettings* pol,
                             bool use_defaults) {
    SinkPaths p;
    const std::string dm = use_defaults ? defaults::kMetricsFile : "", dl = use_defaults ? defaults::kEventLog : "";
    p.metrics_file = metrics_flag ? *metrics_flag : (pol && pol->metrics_file_set) ? pol->metrics_file : dm;
    p.event_log = log_flag ? *log_flag : (pol && pol->event_log_set) ? pol->event_log : dl;
    if (pol && pol->event_log_max_bytes) p.event_log_max_bytes = pol->event_log_max_bytes;
    return p;
}

namespace {

constexpr const char* kSinksMemo = "sinks";

/// <state_dir>/sinks: "metrics_file=<path>\nevent_log=<path>\n" (paths never contain '\n':
/// policy.cpp accepts only absolute paths without NUL; a '\n' would only split the line).
bool read_memo(const std::string& state_dir, std::string& metrics, std::string& log) {
    int fd = open((state_dir + "/" + kSinksMemo).c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    if (fd < 0) return false;
    char buf[8300];
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0) return false;
    std::string t(buf, static_cast<size_t>(n));
    size_t a = 0;
    while (a < t.size()) {
        size_t b = t.find('\n', a);
        if (b == std::string::npos) break;
        std::string line = t.substr(a, b - a);
        a = b + 1;
        if (line.rfind("metrics_file=", 0) == 0) metrics = line.substr(13);
        else if (line.rfind("event_log=", 0) == 0) log = line.substr(10);
    }
    return true;
}

bool is_pod_end(const Request& r) {
    return (r.event == Event::Delete && r.is_sandbox) || r.event == Event::StopPodSandbox || r.event == Event::RemovePodSandbox;
}
bool is_container_end(const Request& r) {
    return (r.event == Event::Delete && !r.is_sandbox) || r.event == Event::StopContainer || r.event == Event::RemoveContainer;
}

void say(const std::string& s) {
    std::string line = "nri-qos: " + s + "\n";
    ssize_t w = write(STDERR_FILENO, line.data(), line.size());
    (void)w;
}

}  // namespace

std::string sinks_memo_signature(const std::string& state_dir) {
    struct stat st {};
    if (stat((state_dir + "/" + kSinksMemo).c_str(), &st) != 0) return "none";
    return std::to_string(st.st_dev) + ":" + std::to_string(st.st_ino) + ":" +
           std::to_string(int64_t(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec) + ":" + std::to_string(st.st_size);
}

std::vector<std::string> sink_dirs_before_parse(const std::optional<std::string>& metrics_flag, const std::optional<std::string>& log_flag,
                                                const std::string& state_dir) {
    std::vector<std::string> dirs;
    auto add = [&](const std::string& file) {
        if (file.empty() || file[0] != '/') return;
        std::string d = dir_name(file);
        for (const auto& x : dirs)
            if (x == d) return;
        dirs.push_back(d);
    };
    SinkPaths p = resolve_sink_paths(metrics_flag, log_flag, nullptr);
    add(p.metrics_file);
    add(p.event_log);
    std::string m, l;
    if (!state_dir.empty() && read_memo(state_dir, m, l)) {
        if (!metrics_flag) add(m);
        if (!log_flag) add(l);
    }
    return dirs;
}

SinkPaths sink_paths_before_parse(const std::optional<std::string>& metrics_flag, const std::optional<std::string>& log_flag,
                                  const std::string& state_dir) {
    SinkPaths p = resolve_sink_paths(metrics_flag, log_flag, nullptr);
    std::string m, l;
    if (!state_dir.empty() && read_memo(state_dir, m, l)) {
        if (!metrics_flag) p.metrics_file = m;
        if (!log_flag) p.event_log = l;
    }
    return p;
}

std::string remember_sink_paths(const std::string& state_dir, const SinkPaths& p) {
    if (state_dir.empty()) return "";
    std::string m, l;
    if (read_memo(state_dir, m, l) && m == p.metrics_file && l == p.event_log) return "";
    std::string text = "metrics_file=" + p.metrics_file + "\nevent_log=" + p.event_log + "\n";
    std::string path = state_dir + "/" + kSinksMemo, tmp, why;
    int fd = create_temp(-1, path, 0600, tmp, why);
    if (fd < 0) return "state " + path + ".*.tmp: " + why;
    bool ok = write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
    ok = close(fd) == 0 && ok;
    if (!ok || rename(tmp.c_str(), path.c_str()) != 0) {
        std::string e = std::strerror(errno);
        unlink(tmp.c_str());
        return "state " + path + ": " + e;
    }
    return "";
}

std::string outcome_of(const EventOutcome& o) {
    if (!o.error.empty()) return "refused";
    if (!o.plan) return o.early_error.empty() ? "ok" : "error";
    for (const auto& w : o.plan->writes)
        if (w.status == Write::Failed) return "partial";
    return "ok";
}

void set_record_policy(EventRecord& r, const PolicyInfo& info) {
    r.policy = policy_source_name(info.source);
    r.policy_sha256 = info.sha256;
    r.policy_error = info.error_line();
}

PolicyIdentity policy_identity(const PolicyInfo* info) {
    if (!info) return {};
    return {info->path, policy_source_name(info->source), info->sha256};
}

EventRecord make_record(const EventOutcome& o) {
    EventRecord r;
    r.source = o.source;
    r.evaluator = o.evaluator;
    r.outcome = outcome_of(o);
    if (o.req) {
        const Request& q = *o.req;
        r.event = event_name(q.event);
        r.ns = q.pod_namespace;
        r.pod = q.pod_name;
        r.container = q.container_name;
        r.id = q.id;
        r.sandbox_id = q.sandbox_id;
        r.sandbox = q.is_sandbox;
    } else {
        r.event = "unparsed";
    }
    if (o.plan) {
        r.cls = o.plan->decision.cls ? o.plan->decision.cls->name : "";
        r.rule = o.plan->decision.rule;
        Summary s = summarize(*o.plan);
        r.applied = s.applied;
        for (const auto& v : o.plan->via_runtime) r.runtime += (r.runtime.empty() ? "" : " ") + v;
        r.skipped = s.skipped;
        r.failed = s.failed;
        r.weight_formula = o.plan->weight_formula;
        for (const auto& k : o.plan->not_passed) r.not_passed += (r.not_passed.empty() ? "" : " ") + k;
        r.systemd = systemd_summary(*o.plan);
    }
    if (o.policy) set_record_policy(r, *o.policy);
    r.message = !o.error.empty() ? o.error : o.early_error;
    if (o.start_ns > 0) r.duration_us = (monotonic_ns() - o.start_ns) / 1000;
    return r;
}

// Printed member by member (json_print.hpp; the bytes of the ordered_json it replaces).
std::string make_last_request(const EventOutcome& o, const EventRecord& r) {
    std::string out;
    out.reserve(1024 + o.input.size());
    JsonPrinter j(out);
    j.open();
    j.key("v").num(1);
    j.key("time").str(rfc3339_utc(r.time_ns));
    j.key("source").str(r.source);
    if (!r.evaluator.empty()) j.key("evaluator").str(r.evaluator);
    j.key("event").str(r.event);
    j.key("id").str(r.id);
    j.key("sandbox_id").str(r.sandbox_id);
    j.key("sandbox").boolean(r.sandbox);
    j.key("namespace").str(r.ns);
    j.key("pod").str(r.pod);
    j.key("container").str(r.container);
    j.key("class").str(r.cls);
    j.key("rule").str(r.rule);
    j.key("outcome").str(r.outcome);
    j.key("options").open();
    j.key("policy").str(o.policy_path);
    j.key("cgroup_root").str(o.cgroup_root);
    j.key("proc_root").str(o.proc_root);
    j.key("resctrl_root").str(o.resctrl_root);
    j.key("layout").str(o.layout);
    j.close();
    j.key("writes");
    if (o.plan) print_writes(j, *o.plan);
    else out += "[]";
    // The request as received: it was parsed successfully, so it is one valid JSON value.
    if (o.input.size() + out.size() + 16 > StateDir::kMaxLastBytes) {
        out += ",\"request\":null,\"request_dropped\":\"larger than the state limit\"}\n";
        return out;
    }
    out += ",\"request\":";
    out += o.input;
    out += "}\n";
    return out;
}

namespace {
// The deadline record, prepared for record_on_deadline (written only outside the signal
// handler; the handler reads). Two slots: a stage writes the one the handler is not using, and
// the caller's single atomic store (deadline.cpp Deadline::stage, together with the deadline answer of the same
// stage) makes it the one the handler reads, so the handler always finds a whole record of the
// stage whose answer it prints. A slot's strings are packed back to back, each NUL-terminated
// and cut at the size the lines always had (stderr 2 KiB, event-log line and each path 4 KiB,
// metrics line 512 bytes): a typical slot uses one page. The offsets come first, next to the
// text's start: a slot whose offsets followed its 15 KiB of text touched a page more (a page
// fault per stage, bench/oneshot-profile.sh).
constexpr size_t kDlStderr = 2048, kDlLog = 4096, kDlPath = 4096, kDlPending = 512;
struct DeadlineSlot {
    size_t stderr_at, stderr_len, log_at, log_len, log_path_at, pending_at, pending_len, pending_path_at;
    bool ready;
    char text[kDlStderr + kDlLog + 2 * kDlPath + kDlPending];
};
DeadlineSlot g_dl[2];
// 1 once publish_event writes the record itself; the handler then leaves it (and the count) alone.
volatile sig_atomic_t g_dl_taken = 0, g_dl_metrics_done = 0, g_dl_log_done = 0;

/// Groups of the record already printed at an earlier stage, with the members they were printed
/// from (a stage reprints only the groups whose members changed: record.hpp RecordPart).
struct DeadlineParts {
    bool have_who = false, have_class = false, have_policy = false;
    std::string source, event, ns, pod, container, id, sandbox_id;
    bool sandbox = false;
    std::string who_lf, who_js;  // RecordPart::Who
    std::string cls, rule;
    std::string class_lf, class_js;  // RecordPart::Class
    std::string policy, policy_sha256, policy_error;
    std::string policy_lf, policy_js;  // RecordPart::Policy
    // RecordPart::Outcome and ::Message: fail-open [0] and fail-closed [1], for deadline tail_us
    int64_t tail_us = -1;
    std::string outcome_lf[2], outcome_js[2], message_lf[2], message_js[2];
    std::string metrics_file, pending_path;
    std::string pending, pending_event, pending_cls;  // metrics_pending_line and what it was printed from
    bool pending_closed = false, pending_perr = false;
    int64_t pending_us = -1;
    std::string line_lf, line_js;  // the stage's lines, reused
};
DeadlineParts g_dlp;

/// Append `s` to the slot's text, cut to `cap - 1` bytes, NUL-terminated; its offset in `at` and
/// its length in `len`.
void slot_put(DeadlineSlot& d, size_t& used, size_t& at, size_t& len, const char* s, size_t n, size_t cap) {
    n = std::min(n, cap - 1);
    at = used;
    len = n;
    std::memcpy(d.text + used, s, n);
    d.text[used + n] = '\0';
    used += n + 1;
}

/// Block SIGALRM (the deadline) while a sink writes, so that an event is never recorded twice
/// (by the sink and by the deadline handler) nor half.
struct NoDeadline {
    sigset_t old;
    NoDeadline() {
        sigset_t s;
        sigemptyset(&s);
        sigaddset(&s, SIGALRM);
        sigprocmask(SIG_BLOCK, &s, &old);
    }
    ~NoDeadline() { sigprocmask(SIG_SETMASK, &old, nullptr); }
};

void append_fd_line(const char* path, const char* line, size_t len) {
    if (!*path || !len) return;
    // As open_record (kernel.hpp), async-signal-safe: never blocks on a FIFO, regular files only.
    int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY, 0600);
    if (fd < 0) return;
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return;
    }
    flock(fd, LOCK_EX);  // the updater holds it for a moment only
    ssize_t w = write(fd, line, len);
    (void)w;
    close(fd);
}
}  // namespace

void prepare_deadline_record(const EventRecord& in, const SinkPaths& paths, int64_t deadline_us, bool closed, int slot) {
    DeadlineParts& P = g_dlp;
    // The record as record_logfmt/record_json print it, group by group (record.hpp RecordPart):
    // the time and level at every stage; who, class and policy when their members changed; the
    // outcome and message (fixed per fail mode) once per fail mode.
    auto print = [](std::string& lf, std::string& js, const EventRecord& rec, RecordPart part) {
        lf.clear(), js.clear();
        record_logfmt_part(lf, rec, part);
        record_json_part(js, rec, part);
    };
    if (!P.have_who || P.source != in.source || P.event != in.event || P.ns != in.ns || P.pod != in.pod || P.container != in.container ||
        P.id != in.id || P.sandbox_id != in.sandbox_id || P.sandbox != in.sandbox) {
        P.source = in.source, P.event = in.event, P.ns = in.ns, P.pod = in.pod, P.container = in.container, P.id = in.id;
        P.sandbox_id = in.sandbox_id, P.sandbox = in.sandbox;
        print(P.who_lf, P.who_js, in, RecordPart::Who);
        P.have_who = true;
    }
    if (!P.have_class || P.cls != in.cls || P.rule != in.rule) {
        P.cls = in.cls, P.rule = in.rule;
        print(P.class_lf, P.class_js, in, RecordPart::Class);
        P.have_class = true;
    }
    if (!P.have_policy || P.policy != in.policy || P.policy_sha256 != in.policy_sha256 || P.policy_error != in.policy_error) {
        P.policy = in.policy, P.policy_sha256 = in.policy_sha256, P.policy_error = in.policy_error;
        print(P.policy_lf, P.policy_js, in, RecordPart::Policy);
        P.have_policy = true;
    }
    EventRecord r;  // the members of the deadline record that are not the stage's
    r.outcome = closed ? "refused" : "error";
    r.duration_us = deadline_us;
    const int k = closed ? 1 : 0;
    if (P.tail_us != deadline_us) {
        for (auto* v : {&P.outcome_lf[0], &P.outcome_lf[1], &P.outcome_js[0], &P.outcome_js[1]}) v->clear();
        P.tail_us = deadline_us;
    }
    if (P.outcome_lf[k].empty()) {
        r.message = closed ? "deadline exceeded: fail-closed, container refused; knobs may be partly applied"
                           : "deadline exceeded: nri-qos gave up (fail-open); knobs may be partly applied";
        print(P.outcome_lf[k], P.outcome_js[k], r, RecordPart::Outcome);
        print(P.message_lf[k], P.message_js[k], r, RecordPart::Message);
    }
    // One time for both lines (the stage's: 0 = now).
    r.time_ns = in.time_ns;
    if (r.time_ns == 0) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        r.time_ns = int64_t(ts.tv_sec) * 1000000000 + ts.tv_nsec;
    }
    r.policy_error = in.policy_error;  // the level depends on it
    std::string& lf = P.line_lf;
    lf.clear();
    lf.reserve(160 + P.who_lf.size() + P.class_lf.size() + P.outcome_lf[k].size() + P.policy_lf.size() + P.message_lf[k].size());
    lf.append("nri-qos:", 8);
    record_logfmt_part(lf, r, RecordPart::Head);
    lf += P.who_lf;
    lf += P.class_lf;
    lf += P.outcome_lf[k];
    lf += P.policy_lf;
    lf += P.message_lf[k];
    lf += '\n';
    std::string& js = P.line_js;
    js.clear();
    if (!paths.event_log.empty()) {
        js.reserve(160 + P.who_js.size() + P.class_js.size() + P.outcome_js[k].size() + P.policy_js.size() + P.message_js[k].size());
        record_json_part(js, r, RecordPart::Head);
        js += P.who_js;
        js += P.class_js;
        js += P.outcome_js[k];
        js += P.policy_js;
        js += P.message_js[k];
        js.append("}\n", 2);
    }
    if (P.metrics_file != paths.metrics_file) {
        P.metrics_file = paths.metrics_file;
        P.pending_path.clear();
        if (!paths.metrics_file.empty())
            P.pending_path = dir_name(paths.metrics_file) + "/." + paths.metrics_file.substr(paths.metrics_file.find_last_of('/') + 1) + ".pending";
    }
    if (P.pending.empty() || P.pending_event != in.event || P.pending_cls != in.cls || P.pending_closed != closed ||
        P.pending_perr != !in.policy_error.empty() || P.pending_us != deadline_us) {
        P.pending = metrics_pending_line(in.event, in.cls, r.outcome, deadline_us, !in.policy_error.empty());
        P.pending_event = in.event, P.pending_cls = in.cls, P.pending_closed = closed;
        P.pending_perr = !in.policy_error.empty(), P.pending_us = deadline_us;
    }
    DeadlineSlot& d = g_dl[slot & 1];
    size_t used = 0, n = 0;
    d.ready = false;
    slot_put(d, used, d.stderr_at, d.stderr_len, lf.data(), lf.size(), kDlStderr);
    slot_put(d, used, d.log_at, d.log_len, js.data(), js.size(), kDlLog);
    slot_put(d, used, d.log_path_at, n, paths.event_log.data(), paths.event_log.size(), kDlPath);
    slot_put(d, used, d.pending_at, d.pending_len, P.pending.data(), P.pending.size(), kDlPending);
    slot_put(d, used, d.pending_path_at, n, P.pending_path.data(), P.pending_path.size(), kDlPath);
    d.ready = true;
}

void record_on_deadline(int slot) {
    const DeadlineSlot& d = g_dl[slot & 1];
    if (g_dl_taken || !d.ready) return;
    ssize_t w = write(STDERR_FILENO, d.text + d.stderr_at, d.stderr_len);
    (void)w;
    if (!g_dl_log_done) append_fd_line(d.text + d.log_path_at, d.text + d.log_at, d.log_len);
    if (!g_dl_metrics_done) append_fd_line(d.text + d.pending_path_at, d.text + d.pending_at, d.pending_len);
}

void deadline_record_new_event() { g_dl_taken = g_dl_metrics_done = g_dl_log_done = 0; }

DeadlineRecordText deadline_record_text(int slot) {
    const DeadlineSlot& d = g_dl[slot & 1];
    if (!d.ready) return {false, "", "", "", "", ""};
    return {true,
            std::string(d.text + d.stderr_at, d.stderr_len),
            std::string(d.text + d.log_at, d.log_len),
            d.text + d.log_path_at,
            std::string(d.text + d.pending_at, d.pending_len),
            d.text + d.pending_path_at};
}

void publish_event(const EventOutcome& o, const SinkPaths& paths) {
    EventRecord r = make_record(o);
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    r.time_ns = int64_t(ts.tv_sec) * 1000000000 + ts.tv_nsec;
    // Last request first (its I/O belongs in the event's duration, so does the rest).
    std::string warn;
    if (o.req && !o.state_dir.empty()) {
        StateDir st(o.state_dir);
        const Request& q = *o.req;
        if (is_pod_end(q)) warn = st.remove_last_sandbox(q.sandbox_id);
        else if (is_container_end(q)) warn = st.remove_last(q.sandbox_id, q.id);
        else warn = st.store_last(q.sandbox_id.empty() ? q.id : q.sandbox_id, q.id, make_last_request(o, r));
        if (!warn.empty()) say(warn);
    }
    MetricsEvent m;
    m.event = r.event;
    m.cls = r.cls;
    m.outcome = r.outcome;
    m.policy_error = o.policy && o.policy->broken();
    if (o.plan)
        for (const auto& w : o.plan->writes)
            if (w.status == Write::Failed) m.failed_knobs.push_back(w.knob);
    if (o.plan) m.not_passed = o.plan->not_passed;
    if (o.start_ns > 0) m.duration_us = (monotonic_ns() - o.start_ns) / 1000;
    r.duration_us = m.duration_us;
    std::string e1;
    {
        NoDeadline nd;
        e1 = update_metrics(paths.metrics_file, {m}, policy_identity(o.policy));
        g_dl_metrics_done = 1;
    }
    if (!e1.empty()) r.message += (r.message.empty() ? "" : "; ") + e1;
    std::string line = record_logfmt(r);
    std::string e2;
    {
        NoDeadline nd;
        g_dl_taken = 1;  // from here on the record is ours to write
        ssize_t w = write(STDERR_FILENO, line.data(), line.size());
        (void)w;
        e2 = append_event_log(paths.event_log, paths.event_log_max_bytes, record_json(r));
        g_dl_log_done = 1;
    }
    if (!e2.empty()) say(e2);
}

}  // namespace nriqos
