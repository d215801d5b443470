#include "publish.hpp"

#include <cerrno>
#include <csignal>
#include <cstring>
#include <sys/file.h>
#include <ctime>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "adjust.hpp"
#include "request.hpp"
#include "sinks.hpp"
#include "state.hpp"

namespace nriqos {

int64_t monotonic_ns() {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return int64_t(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

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
    std::string path = state_dir + "/" + kSinksMemo, tmp = path + "." + std::to_string(getpid()) + ".tmp";
    int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0) return "state " + tmp + ": " + std::strerror(errno);
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
        r.skipped = s.skipped;
        r.failed = s.failed;
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
// Prepared for record_on_deadline (written only outside the signal handler; the handler reads).
char g_dl_stderr[2048], g_dl_log[4096], g_dl_log_path[4096], g_dl_pending[512], g_dl_pending_path[4096];
volatile sig_atomic_t g_dl_ready = 0, g_dl_metrics_done = 0, g_dl_log_done = 0;

void copy_to(char* dst, size_t cap, const std::string& s) {
    size_t n = std::min(s.size(), cap - 1);
    std::memcpy(dst, s.data(), n);
    dst[n] = '\0';
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

void append_fd_line(const char* path, const char* line) {
    if (!*path || !*line) return;
    int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0) return;
    flock(fd, LOCK_EX);  // the updater holds it for a moment only
    ssize_t w = write(fd, line, std::strlen(line));
    (void)w;
    close(fd);
}
}  // namespace

void prepare_deadline_record(const EventRecord& in, const SinkPaths& paths, int64_t deadline_us, bool closed) {
    g_dl_ready = 0;
    EventRecord r = in;
    r.outcome = closed ? "refused" : "error";
    r.duration_us = deadline_us;
    r.message = closed ? "deadline exceeded: fail-closed, container refused; knobs may be partly applied"
                       : "deadline exceeded: nri-qos gave up (fail-open); knobs may be partly applied";
    copy_to(g_dl_stderr, sizeof g_dl_stderr, record_logfmt(r));
    copy_to(g_dl_log, sizeof g_dl_log, paths.event_log.empty() ? "" : record_json(r));
    copy_to(g_dl_log_path, sizeof g_dl_log_path, paths.event_log);
    std::string pend;
    if (!paths.metrics_file.empty()) {
        std::string d = dir_name(paths.metrics_file), b = paths.metrics_file.substr(paths.metrics_file.find_last_of('/') + 1);
        pend = d + "/." + b + ".pending";
    }
    copy_to(g_dl_pending_path, sizeof g_dl_pending_path, pend);
    copy_to(g_dl_pending, sizeof g_dl_pending, metrics_pending_line(r.event, r.cls, r.outcome, deadline_us, !r.policy_error.empty()));
    g_dl_ready = 1;
}

void record_on_deadline() {
    if (!g_dl_ready) return;
    ssize_t w = write(STDERR_FILENO, g_dl_stderr, std::strlen(g_dl_stderr));
    (void)w;
    if (!g_dl_log_done) append_fd_line(g_dl_log_path, g_dl_log);
    if (!g_dl_metrics_done) append_fd_line(g_dl_pending_path, g_dl_pending);
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
        g_dl_ready = 0;  // from here on the record is ours to write
        ssize_t w = write(STDERR_FILENO, line.data(), line.size());
        (void)w;
        e2 = append_event_log(paths.event_log, paths.event_log_max_bytes, record_json(r));
        g_dl_log_done = 1;
    }
    if (!e2.empty()) say(e2);
}

}  // namespace nriqos
