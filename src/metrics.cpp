#include "metrics.hpp"

#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <fcntl.h>
#include <algorithm>
#include <map>
#include <sys/stat.h>
#include <tuple>
#include <unistd.h>

#include "record.hpp"

namespace nriqos {

namespace {

constexpr size_t kNBuckets = sizeof kDurationBucketsUs / sizeof kDurationBucketsUs[0];
constexpr size_t kMaxSeries = 2048;  // per family; beyond, labels fold into "_overflow"
constexpr size_t kMaxStateBytes = 1u << 20;
constexpr const char* kStateMagic = "nri-qos-metrics 1";

/// Tab/newline-free label value for the state file.
std::string clean(const std::string& v) {
    std::string s = v.substr(0, 256);
    for (char& c : s)
        if (c == '\t' || c == '\n' || c == '\r') c = '_';
    return s;
}

/// Prometheus text-format label value escaping (\\, \", \n).
std::string esc(const std::string& v) {
    std::string s;
    for (char c : v) {
        if (c == '\\') s += "\\\\";
        else if (c == '"') s += "\\\"";
        else if (c == '\n') s += "\\n";
        else s += c;
    }
    return s;
}

struct State {
    std::map<std::tuple<std::string, std::string, std::string>, uint64_t> events;
    std::map<std::string, uint64_t> knob_failures, drift;
    std::map<std::pair<std::string, std::string>, uint64_t> relay_failures;  // {event, reason}
    uint64_t buckets[kNBuckets + 1] = {};  // per bucket (not cumulative); last = +Inf
    uint64_t sum_us = 0, count = 0;
    uint64_t policy_errors = 0;
    int64_t last_event = 0;
    std::string p_path, p_source, p_sha;  // nri_qos_policy_info of the last event
};

std::vector<std::string> split_tabs(const std::string& line) {
    std::vector<std::string> f;
    size_t a = 0;
    while (true) {
        size_t b = line.find('\t', a);
        f.push_back(line.substr(a, b == std::string::npos ? std::string::npos : b - a));
        if (b == std::string::npos) break;
        a = b + 1;
    }
    return f;
}

uint64_t num(const std::string& s) { return std::strtoull(s.c_str(), nullptr, 10); }

/// Our own state file (tab-separated lines written by dump_state). Anything unexpected → the
/// line is ignored.
void load_state(const std::string& text, State& st) {
    size_t a = 0;
    bool first = true;
    while (a < text.size()) {
        size_t b = text.find('\n', a);
        if (b == std::string::npos) break;  // incomplete last line: ignore
        std::string line = text.substr(a, b - a);
        a = b + 1;
        if (first) {
            if (line != kStateMagic) return;
            first = false;
            continue;
        }
        auto f = split_tabs(line);
        if (f[0] == "E" && f.size() == 5) st.events[{f[1], f[2], f[3]}] = num(f[4]);
        else if (f[0] == "K" && f.size() == 3) st.knob_failures[f[1]] = num(f[2]);
        else if (f[0] == "D" && f.size() == 3) st.drift[f[1]] = num(f[2]);
        else if (f[0] == "R" && f.size() == 4) st.relay_failures[{f[1], f[2]}] = num(f[3]);
        else if (f[0] == "H" && f.size() == 3 + kNBuckets + 1) {
            st.sum_us = num(f[1]);
            st.count = num(f[2]);
            for (size_t i = 0; i <= kNBuckets; ++i) st.buckets[i] = num(f[3 + i]);
        } else if (f[0] == "P" && f.size() == 2) st.policy_errors = num(f[1]);
        else if (f[0] == "T" && f.size() == 2) st.last_event = static_cast<int64_t>(num(f[1]));
        else if (f[0] == "I" && (f.size() == 4 || f.size() == 5)) {  // 5: an older build's file-identity field
            st.p_path = f[1];
            st.p_source = f[2];
            st.p_sha = f[3];
        }
    }
}

std::string dump_state(const State& st) {
    std::string s = std::string(kStateMagic) + "\n";
    for (const auto& [k, v] : st.events) s += "E\t" + std::get<0>(k) + "\t" + std::get<1>(k) + "\t" + std::get<2>(k) + "\t" + std::to_string(v) + "\n";
    for (const auto& [k, v] : st.knob_failures) s += "K\t" + k + "\t" + std::to_string(v) + "\n";
    for (const auto& [k, v] : st.drift) s += "D\t" + k + "\t" + std::to_string(v) + "\n";
    for (const auto& [k, v] : st.relay_failures) s += "R\t" + k.first + "\t" + k.second + "\t" + std::to_string(v) + "\n";
    s += "H\t" + std::to_string(st.sum_us) + "\t" + std::to_string(st.count);
    for (uint64_t b : st.buckets) s += "\t" + std::to_string(b);
    s += "\nP\t" + std::to_string(st.policy_errors) + "\nT\t" + std::to_string(st.last_event) + "\n";
    if (!st.p_path.empty() || !st.p_source.empty()) s += "I\t" + st.p_path + "\t" + st.p_source + "\t" + st.p_sha + "\n";
    return s;
}

// Seconds from integer µs, as printf("%.6f") prints them, or with the trailing zeros (and
// point) dropped as "%g" prints these bucket bounds — without printf's floating-point path
// (~4,000 instructions and the locale lookup per number, 15 numbers per event).
std::string seconds_of_us(uint64_t us, bool trim) {
    std::string s = std::to_string(us / 1000000) + ".";
    uint64_t frac = us % 1000000;
    char d[6];
    for (int i = 5; i >= 0; --i, frac /= 10) d[i] = static_cast<char>('0' + frac % 10);
    int n = 6;
    if (trim)
        while (n > 0 && d[n - 1] == '0') --n;
    if (n == 0) s.pop_back();
    return s.append(d, size_t(n));
}

std::string render(const State& st) {
    std::string s;
    s += "# HELP nri_qos_events_total Pod sandbox/container events handled by nri-qos, by event, QoS class and outcome.\n"
         "# TYPE nri_qos_events_total counter\n";
    for (const auto& [k, v] : st.events)
        s += "nri_qos_events_total{event=\"" + esc(std::get<0>(k)) + "\",class=\"" + esc(std::get<1>(k)) + "\",outcome=\"" + esc(std::get<2>(k)) +
             "\"} " + std::to_string(v) + "\n";
    s += "# HELP nri_qos_knob_failures_total Knob writes that failed, by policy knob.\n# TYPE nri_qos_knob_failures_total counter\n";
    for (const auto& [k, v] : st.knob_failures) s += "nri_qos_knob_failures_total{knob=\"" + esc(k) + "\"} " + std::to_string(v) + "\n";
    s += "# HELP nri_qos_drift_corrected_total Knob values nri-qos reconcile found changed and wrote back, by policy knob.\n"
         "# TYPE nri_qos_drift_corrected_total counter\n";
    for (const auto& [k, v] : st.drift) s += "nri_qos_drift_corrected_total{knob=\"" + esc(k) + "\"} " + std::to_string(v) + "\n";
    s += "# HELP nri_qos_relay_failures_total Events the native NRI relay failed itself (evaluator crashed, killed or timed out, request refused), by event and reason.\n"
         "# TYPE nri_qos_relay_failures_total counter\n";
    for (const auto& [k, v] : st.relay_failures)
        s += "nri_qos_relay_failures_total{event=\"" + esc(k.first) + "\",reason=\"" + esc(k.second) + "\"} " + std::to_string(v) + "\n";
    s += "# HELP nri_qos_event_duration_seconds Time one nri-qos invocation took, from start to its result.\n"
         "# TYPE nri_qos_event_duration_seconds histogram\n";
    uint64_t cum = 0;
    for (size_t i = 0; i < kNBuckets; ++i) {
        cum += st.buckets[i];
        s += "nri_qos_event_duration_seconds_bucket{le=\"" + seconds_of_us(uint64_t(kDurationBucketsUs[i]), true) + "\"} " + std::to_string(cum) + "\n";
    }
    cum += st.buckets[kNBuckets];
    s += "nri_qos_event_duration_seconds_bucket{le=\"+Inf\"} " + std::to_string(cum) + "\n";
    s += "nri_qos_event_duration_seconds_sum " + seconds_of_us(st.sum_us, false) + "\nnri_qos_event_duration_seconds_count " + std::to_string(st.count) + "\n";
    s += "# HELP nri_qos_policy_info Policy in force at the last event: sha256 of its text, source (file, builtin, last-good).\n"
         "# TYPE nri_qos_policy_info gauge\n";
    if (!st.p_source.empty())
        s += "nri_qos_policy_info{sha256=\"" + esc(st.p_sha) + "\",source=\"" + esc(st.p_source) + "\",path=\"" + esc(st.p_path) + "\"} 1\n";
    s += "# HELP nri_qos_policy_errors_total Events at which the configured policy file was broken (its last good copy or the built-in policy applied).\n# TYPE nri_qos_policy_errors_total counter\n";
    s += "nri_qos_policy_errors_total " + std::to_string(st.policy_errors) + "\n";
    s += "# HELP nri_qos_last_event_timestamp_seconds Unix time of the last event recorded.\n"
         "# TYPE nri_qos_last_event_timestamp_seconds gauge\n";
    s += "nri_qos_last_event_timestamp_seconds " + std::to_string(st.last_event) + "\n";
    return s;
}

template <class M, class K>
void bump(M& m, const K& k, const K& overflow) {
    auto it = m.find(k);
    if (it != m.end()) ++it->second;
    else if (m.size() < kMaxSeries) m.emplace(k, 1);
    else ++m[overflow];
}

bool write_all(int fd, const std::string& s) {
    size_t off = 0;
    while (off < s.size()) {
        ssize_t n = write(fd, s.data() + off, s.size() - off);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return false;
        off += static_cast<size_t>(n);
    }
    return true;
}

}  // namespace

std::string metrics_pending_line(const std::string& event, const std::string& cls, const std::string& outcome, int64_t duration_us, bool policy_error) {
    return "E\t" + clean(event) + "\t" + (cls.empty() ? std::string("none") : clean(cls)) + "\t" + clean(outcome) + "\t" + std::to_string(duration_us) +
           (policy_error ? "\tP" : "") + "\n";
}

namespace {
/// Pending-file lines of one event: its E line, then one K line per failed knob, one D line
/// per corrected drift and an R line with its relay failure kind (they belong to the E line
/// before them).
std::string pending_lines(const MetricsEvent& e) {
    std::string s = metrics_pending_line(e.event, e.cls, e.outcome, e.duration_us, e.policy_error);
    for (const auto& k : e.failed_knobs) s += "K\t" + clean(k) + "\n";
    for (const auto& k : e.drift_knobs) s += "D\t" + clean(k) + "\n";
    if (!e.relay_failure.empty()) s += "R\t" + clean(e.relay_failure) + "\n";
    return s;
}
}  // namespace

std::string update_metrics(const std::string& prom_path, const std::vector<MetricsEvent>& events, const PolicyIdentity& policy, int wait_ms) {
    if (prom_path.empty()) return "";
    const std::string dir = dir_name(prom_path);
    const std::string base = prom_path.substr(prom_path.find_last_of('/') + 1);
    if (base.empty()) return "metrics: " + prom_path + ": not a file path";
    const std::string state_path = dir + "/." + base + ".state";
    int fd = open(state_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY, 0600);
    if (fd < 0 && errno == ENOENT) {
        make_dirs(dir, 0755);
        fd = open(state_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY, 0600);
    }
    if (fd < 0) return "metrics: " + state_path + ": " + std::strerror(errno);
    const std::string pending_path = dir + "/." + base + ".pending";
    std::vector<MetricsEvent> all = events;
    if (!lock_within(fd, wait_ms)) {
        // Another updater holds the counters (a burst of events). Queue this event in the pending
        // file instead of dropping it, then try once more to become the updater. No event is left
        // behind in the queue: the updater reads the pending file last, under its lock, and lets
        // go of the counters' lock before the pending one — so whoever holds the counters' lock
        // when we try again has yet to read the queue (tests/ops.sh: exact totals).
        std::string lines;
        for (const auto& e : events) lines += pending_lines(e);
        int q = open(pending_path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY, 0600);
        bool queued = q >= 0 && lock_within(q, wait_ms) && write_all(q, lines);
        int e = errno;
        if (q >= 0) close(q);
        if (!queued) {
            close(fd);
            return "metrics: " + state_path + ": lock not obtained within " + std::to_string(wait_ms) + " ms and " + pending_path + ": " +
                   std::strerror(e) + "; this event is not counted";
        }
        if (!lock_within(fd, 0)) {
            close(fd);
            return "";
        }
        all.clear();  // in the queue now: folded below
    }
    State st;
    struct stat sst {};
    if (fstat(fd, &sst) == 0 && S_ISREG(sst.st_mode) && static_cast<size_t>(sst.st_size) <= kMaxStateBytes) {
        std::string text(static_cast<size_t>(sst.st_size), '\0');
        ssize_t n = pread(fd, text.data(), text.size(), 0);
        if (n == sst.st_size) load_state(text, st);
    }
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    // Events queued by deadline handlers and by updaters that did not get the lock
    // (pending_lines). Its lock is kept until the counters' lock is gone (see above).
    int pfd = open(pending_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY, 0600);
    if (pfd >= 0) {
        if (lock_within(pfd, wait_ms)) {
            struct stat pst {};
            if (fstat(pfd, &pst) == 0 && pst.st_size > 0 && static_cast<size_t>(pst.st_size) <= kMaxStateBytes) {
                std::string text(static_cast<size_t>(pst.st_size), '\0');
                if (pread(pfd, text.data(), text.size(), 0) == pst.st_size) {
                    size_t a = 0;
                    while (a < text.size()) {
                        size_t b = text.find('\n', a);
                        if (b == std::string::npos) break;
                        auto f = split_tabs(text.substr(a, b - a));
                        a = b + 1;
                        if (f.size() == 2 && (f[0] == "K" || f[0] == "D") && !all.empty()) {
                            (f[0] == "K" ? all.back().failed_knobs : all.back().drift_knobs).push_back(f[1]);
                            continue;
                        }
                        if (f.size() == 2 && f[0] == "R" && !all.empty()) {  // relay failure kind of the E line before
                            all.back().relay_failure = f[1];
                            continue;
                        }
                        if ((f.size() != 5 && f.size() != 6) || f[0] != "E") continue;
                        MetricsEvent e;
                        e.event = f[1];
                        e.cls = f[2] == "none" ? "" : f[2];
                        e.outcome = f[3];
                        e.duration_us = static_cast<int64_t>(num(f[4]));
                        e.policy_error = f.size() == 6 && f[5] == "P";
                        all.push_back(e);
                    }
                }
            }
            if (ftruncate(pfd, 0) != 0) { /* counted again next time: better than lost */ }
        }
    }
    for (const auto& e : all) {
        if (!e.event.empty() && e.count_event) {
            bump(st.events, std::make_tuple(clean(e.event), e.cls.empty() ? std::string("none") : clean(e.cls), clean(e.outcome)),
                 std::make_tuple(std::string("_overflow"), std::string("_overflow"), std::string("_overflow")));
            st.last_event = now.tv_sec;
        }
        for (const auto& k : e.failed_knobs) bump(st.knob_failures, clean(k), std::string("_overflow"));
        for (const auto& k : e.drift_knobs) bump(st.drift, clean(k), std::string("_overflow"));
        if (!e.relay_failure.empty())
            bump(st.relay_failures, std::make_pair(clean(e.event), clean(e.relay_failure)), std::make_pair(std::string("_overflow"), std::string("_overflow")));
        if (e.duration_us >= 0) {
            size_t i = 0;
            while (i < kNBuckets && e.duration_us > kDurationBucketsUs[i]) ++i;
            ++st.buckets[i];
            st.sum_us += static_cast<uint64_t>(e.duration_us);
            ++st.count;
        }
        if (e.policy_error) ++st.policy_errors;
    }
    if (!policy.source.empty()) {
        st.p_path = clean(policy.path);
        st.p_source = clean(policy.source);
        st.p_sha = clean(policy.sha256);
    }
    std::string err;
    std::string text = dump_state(st);
    if (pwrite(fd, text.data(), text.size(), 0) != static_cast<ssize_t>(text.size()) || ftruncate(fd, static_cast<off_t>(text.size())) != 0)
        err = "metrics: " + state_path + ": " + std::strerror(errno);
    std::string tmp = dir + "/." + base + "." + std::to_string(getpid()) + ".tmp";
    int out = open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY, 0644);
    if (out < 0) {
        if (err.empty()) err = "metrics: " + tmp + ": " + std::strerror(errno);
    } else {
        bool ok = write_all(out, render(st));
        ok = close(out) == 0 && ok;
        if (!ok || rename(tmp.c_str(), prom_path.c_str()) != 0) {
            if (err.empty()) err = "metrics: " + prom_path + ": " + std::strerror(errno);
            unlink(tmp.c_str());
        }
    }
    close(fd);  // the counters' lock first,
    if (pfd >= 0) close(pfd);  // then the queue's
    return err;
}

}  // namespace nriqos
