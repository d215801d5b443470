#include "records/metrics.hpp"

#include <cerrno>
#include <charconv>
#include <string_view>
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

#include "os/kernel.hpp"
#include "records/record.hpp"
#include "os/fd.hpp"

namespace nriqos {

namespace {

constexpr size_t kNBuckets = sizeof kDurationBucketsUs / sizeof kDurationBucketsUs[0];
constexpr size_t kNRBuckets = sizeof kReconcileBucketsUs / sizeof kReconcileBucketsUs[0];
constexpr size_t kMaxSeries = 2048;  // per family; beyond, labels fold into "_overflow"
constexpr size_t kMaxStateBytes = 1u << 20;
constexpr const char* kStateMagic = "nri-qos-metrics 1";

/// Tab/newline-free label value for the state file (at most 256 bytes).
std::string clean(std::string_view v) {
    std::string s(v.substr(0, 256));
    for (char& c : s)
        if (c == '\t' || c == '\n' || c == '\r') c = '_';
    return s;
}

/// Appends `v` with Prometheus text-format label value escaping (\\, \", \n); runs of other
/// bytes in one piece.
void esc_to(std::string& out, std::string_view v) {
    size_t run = 0;
    for (size_t i = 0; i < v.size(); ++i) {
        const char c = v[i];
        const char* e = c == '\\' ? "\\\\" : c == '"' ? "\\\"" : c == '\n' ? "\\n" : nullptr;
        if (!e) continue;
        out.append(v.data() + run, i - run);
        out.append(e, 2);
        run = i + 1;
    }
    out.append(v.data() + run, v.size() - run);
}

/// Appends the decimal digits of `v` (what std::to_string prints, without the temporary).
void num_to(std::string& out, uint64_t v) {
    char b[24];
    out.append(b, static_cast<size_t>(std::to_chars(b, b + sizeof b, v).ptr - b));
}

struct State {
    std::map<std::tuple<std::string, std::string, std::string>, uint64_t> events;
    std::map<std::string, uint64_t> knob_failures, drift;
    std::map<std::string, uint64_t> not_passed;  // nri_qos_annotation_not_passed_total{key}
    std::map<std::pair<std::string, std::string>, uint64_t> relay_failures;  // {event, reason}
    std::map<std::string, uint64_t> rejected;  // nri_qos_adjustment_rejected_total{other}
    uint64_t buckets[kNBuckets + 1] = {};  // per bucket (not cumulative); last = +Inf
    uint64_t sum_us = 0, count = 0;
    uint64_t policy_errors = 0;
    int64_t last_event = 0;
    std::string p_path, p_source, p_sha;  // nri_qos_policy_info of the last event
    // Reconcile passes (nri_qos_reconcile_*; the C, CH and CF lines, written once a pass counted)
    uint64_t r_passes = 0, r_containers = 0, r_drift = 0, r_corrected = 0, r_errors = 0, r_gone = 0;
    uint64_t r_broken = 0;
    int64_t r_last = 0;
    uint64_t r_buckets[kNRBuckets + 1] = {};
    uint64_t r_sum_us = 0, r_count = 0;
    std::map<std::string, uint64_t> r_knob_failures;
};

/// The tab-separated fields of `line` (views into it). More than kMaxFields fields: the count is
/// kMaxFields + 1 and the rest is not split (no line of ours has that many).
struct Fields {
    static constexpr size_t kMaxFields = 24;
    std::string_view f[kMaxFields];
    size_t n = 0;
    std::string_view operator[](size_t i) const { return f[i]; }
    size_t size() const { return n; }
};
Fields split_tabs(std::string_view line) {
    Fields r;
    size_t a = 0;
    while (true) {
        if (r.n == Fields::kMaxFields) {
            ++r.n;
            break;
        }
        size_t b = line.find('\t', a);
        r.f[r.n++] = line.substr(a, b == std::string_view::npos ? std::string_view::npos : b - a);
        if (b == std::string_view::npos) break;
        a = b + 1;
    }
    return r;
}

/// strtoull of the field (decimal; our own files hold digits only, parsed without a copy).
uint64_t num(std::string_view s) {
    uint64_t v = 0;
    auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (ec == std::errc() && p == s.data() + s.size()) return v;
    return std::strtoull(std::string(s).c_str(), nullptr, 10);  // anything else: as strtoull reads it
}

/// Our own state file (tab-separated lines written by dump_state). Anything unexpected → the
/// line is ignored.
void load_state(std::string_view text, State& st) {
    size_t a = 0;
    bool first = true;
    while (a < text.size()) {
        size_t b = text.find('\n', a);
        if (b == std::string_view::npos) break;  // incomplete last line: ignore
        std::string_view line = text.substr(a, b - a);
        a = b + 1;
        if (first) {
            if (line != kStateMagic) return;
            first = false;
            continue;
        }
        Fields f = split_tabs(line);
        const std::string_view t = f[0];
        if (t == "E" && f.size() == 5) st.events[{std::string(f[1]), std::string(f[2]), std::string(f[3])}] = num(f[4]);
        else if (t == "K" && f.size() == 3) st.knob_failures[std::string(f[1])] = num(f[2]);
        else if (t == "D" && f.size() == 3) st.drift[std::string(f[1])] = num(f[2]);
        else if (t == "A" && f.size() == 3) st.not_passed[std::string(f[1])] = num(f[2]);
        else if (t == "R" && f.size() == 4) st.relay_failures[{std::string(f[1]), std::string(f[2])}] = num(f[3]);
        else if (t == "X" && f.size() == 3) st.rejected[std::string(f[1])] = num(f[2]);
        else if (t == "H" && f.size() == 3 + kNBuckets + 1) {
            st.sum_us = num(f[1]);
            st.count = num(f[2]);
            for (size_t i = 0; i <= kNBuckets; ++i) st.buckets[i] = num(f[3 + i]);
        } else if (t == "P" && f.size() == 2) st.policy_errors = num(f[1]);
        else if (t == "T" && f.size() == 2) st.last_event = static_cast<int64_t>(num(f[1]));
        else if (t == "C" && f.size() == 9) {
            st.r_passes = num(f[1]), st.r_containers = num(f[2]), st.r_drift = num(f[3]), st.r_corrected = num(f[4]);
            st.r_errors = num(f[5]), st.r_gone = num(f[6]), st.r_broken = num(f[7]) ? 1 : 0;
            st.r_last = static_cast<int64_t>(num(f[8]));
        } else if (t == "CH" && f.size() == 3 + kNRBuckets + 1) {
            st.r_sum_us = num(f[1]);
            st.r_count = num(f[2]);
            for (size_t i = 0; i <= kNRBuckets; ++i) st.r_buckets[i] = num(f[3 + i]);
        } else if (t == "CF" && f.size() == 3) st.r_knob_failures[std::string(f[1])] = num(f[2]);
        else if (t == "I" && (f.size() == 4 || f.size() == 5)) {  // 5: an older build's file-identity field
            st.p_path = f[1];
            st.p_source = f[2];
            st.p_sha = f[3];
        }
    }
}

std::string dump_state(const State& st) {
    std::string s;
    s.reserve(512 + 48 * (st.events.size() + st.knob_failures.size() + st.drift.size() + st.relay_failures.size()) + st.p_path.size());
    s += kStateMagic;
    s += '\n';
    auto field = [&s](std::string_view v) {
        s += '\t';
        s.append(v.data(), v.size());
    };
    auto count = [&s](uint64_t v) {
        s += '\t';
        num_to(s, v);
        s += '\n';
    };
    for (const auto& [k, v] : st.events) {
        s += 'E';
        field(std::get<0>(k)), field(std::get<1>(k)), field(std::get<2>(k)), count(v);
    }
    for (const auto& [k, v] : st.knob_failures) s += 'K', field(k), count(v);
    for (const auto& [k, v] : st.drift) s += 'D', field(k), count(v);
    for (const auto& [k, v] : st.not_passed) s += 'A', field(k), count(v);
    for (const auto& [k, v] : st.relay_failures) s += 'R', field(k.first), field(k.second), count(v);
    for (const auto& [k, v] : st.rejected) s += 'X', field(k), count(v);
    s += "H\t";
    num_to(s, st.sum_us);
    s += '\t';
    num_to(s, st.count);
    for (uint64_t b : st.buckets) s += '\t', num_to(s, b);
    s += "\nP\t";
    num_to(s, st.policy_errors);
    s += "\nT\t";
    if (st.last_event < 0) s += '-', num_to(s, 0 - static_cast<uint64_t>(st.last_event));
    else num_to(s, static_cast<uint64_t>(st.last_event));
    s += '\n';
    if (!st.p_path.empty() || !st.p_source.empty()) {
        s += 'I';
        field(st.p_path), field(st.p_source), field(st.p_sha);
        s += '\n';
    }
    if (st.r_passes) {
        s += 'C';
        for (uint64_t v : {st.r_passes, st.r_containers, st.r_drift, st.r_corrected, st.r_errors, st.r_gone, st.r_broken}) s += '\t', num_to(s, v);
        s += '\t';
        num_to(s, static_cast<uint64_t>(std::max<int64_t>(st.r_last, 0)));
        s += "\nCH\t";
        num_to(s, st.r_sum_us);
        s += '\t';
        num_to(s, st.r_count);
        for (uint64_t b : st.r_buckets) s += '\t', num_to(s, b);
        s += '\n';
        for (const auto& [k, v] : st.r_knob_failures) s += "CF", field(k), count(v);
    }
    return s;
}

// Seconds from integer µs, as printf("%.6f") prints them, or with the trailing zeros (and
// point) dropped as "%g" prints these bucket bounds — without printf's floating-point path
// (~4,000 instructions and the locale lookup per number, 15 numbers per event).
void seconds_to(std::string& out, uint64_t us, bool trim) {
    num_to(out, us / 1000000);
    uint64_t frac = us % 1000000;
    char d[7];
    d[0] = '.';
    for (int i = 6; i >= 1; --i, frac /= 10) d[i] = static_cast<char>('0' + frac % 10);
    size_t n = 7;
    if (trim)
        while (n > 1 && d[n - 1] == '0') --n;
    if (n > 1) out.append(d, n);
}

std::string render(const State& st) {
    std::string s;
    s.reserve(3072 + 96 * (st.events.size() + st.knob_failures.size() + st.drift.size() + st.relay_failures.size()) + st.p_path.size() +
              st.p_sha.size());
    // `name{k1="v1",k2="v2"...} count\n`: labels as {key, value} pairs
    auto series = [&s](const char* head, std::initializer_list<std::pair<const char*, std::string_view>> labels, uint64_t v) {
        s += head;
        char sep = '{';
        for (const auto& [k, val] : labels) {
            s += sep;
            s += k;
            s += "=\"";
            esc_to(s, val);
            s += '"';
            sep = ',';
        }
        s += "} ";
        num_to(s, v);
        s += '\n';
    };
    s += "# HELP nri_qos_events_total Pod sandbox/container events handled by nri-qos, by event, QoS class and outcome.\n"
         "# TYPE nri_qos_events_total counter\n";
    for (const auto& [k, v] : st.events)
        series("nri_qos_events_total", {{"event", std::get<0>(k)}, {"class", std::get<1>(k)}, {"outcome", std::get<2>(k)}}, v);
    s += "# HELP nri_qos_knob_failures_total Knob writes that failed, by policy knob.\n# TYPE nri_qos_knob_failures_total counter\n";
    for (const auto& [k, v] : st.knob_failures) series("nri_qos_knob_failures_total", {{"knob", k}}, v);
    s += "# HELP nri_qos_drift_corrected_total Knob values nri-qos reconcile found changed and wrote back, by policy knob.\n"
         "# TYPE nri_qos_drift_corrected_total counter\n";
    for (const auto& [k, v] : st.drift) series("nri_qos_drift_corrected_total", {{"knob", k}}, v);
    s +=
        "# HELP nri_qos_relay_failures_total Events the native NRI relay failed itself (evaluator crashed, killed or timed out, request refused), by event and reason.\n"
        "# TYPE nri_qos_relay_failures_total counter\n";
    for (const auto& [k, v] : st.relay_failures) series("nri_qos_relay_failures_total", {{"event", k.first}, {"reason", k.second}}, v);
    s +=
        "# HELP nri_qos_adjustment_rejected_total Containers nri-qos adjusted that the runtime removed without starting them (another NRI plugin set the same field), by that plugin (\"unknown\" when the runtime's log did not name it).\n"
        "# TYPE nri_qos_adjustment_rejected_total counter\n";
    for (const auto& [k, v] : st.rejected) series("nri_qos_adjustment_rejected_total", {{"other", k}}, v);
    s += "# HELP nri_qos_event_duration_seconds Time one nri-qos invocation took, from start to its result.\n"
         "# TYPE nri_qos_event_duration_seconds histogram\n";
    uint64_t cum = 0;
    for (size_t i = 0; i < kNBuckets; ++i) {
        cum += st.buckets[i];
        s += "nri_qos_event_duration_seconds_bucket{le=\"";
        seconds_to(s, uint64_t(kDurationBucketsUs[i]), true);
        s += "\"} ";
        num_to(s, cum);
        s += '\n';
    }
    cum += st.buckets[kNBuckets];
    s += "nri_qos_event_duration_seconds_bucket{le=\"+Inf\"} ";
    num_to(s, cum);
    s += "\nnri_qos_event_duration_seconds_sum ";
    seconds_to(s, st.sum_us, false);
    s += "\nnri_qos_event_duration_seconds_count ";
    num_to(s, st.count);
    s += '\n';
    s += "# HELP nri_qos_policy_info Policy in force at the last event: sha256 of its text, source (file, builtin, last-good).\n"
         "# TYPE nri_qos_policy_info gauge\n";
    if (!st.p_source.empty()) series("nri_qos_policy_info", {{"sha256", st.p_sha}, {"source", st.p_source}, {"path", st.p_path}}, 1);
    s +=
        "# HELP nri_qos_policy_errors_total Events at which the configured policy file was broken (its last good copy or the built-in policy applied).\n# TYPE nri_qos_policy_errors_total counter\n";
    s += "nri_qos_policy_errors_total ";
    num_to(s, st.policy_errors);
    s += "\n# HELP nri_qos_last_event_timestamp_seconds Unix time of the last event recorded.\n"
         "# TYPE nri_qos_last_event_timestamp_seconds gauge\n";
    s += "nri_qos_last_event_timestamp_seconds ";
    if (st.last_event < 0) s += '-', num_to(s, 0 - static_cast<uint64_t>(st.last_event));
    else num_to(s, static_cast<uint64_t>(st.last_event));
    s += '\n';
    if (!st.not_passed.empty()) {
        s +=
            "# HELP nri_qos_annotation_not_passed_total Events whose facts needed a pod annotation the runtime does not pass to the hook (containerd < 1.7: add it to pod_annotations), by annotation key.\n"
            "# TYPE nri_qos_annotation_not_passed_total counter\n";
        for (const auto& [k, v] : st.not_passed) series("nri_qos_annotation_not_passed_total", {{"key", k}}, v);
    }
    if (st.r_passes) {  // reconcile passes: their own series (issue #25 §4), once one was counted
        auto counter = [&s](const char* name, const char* help, uint64_t v) {
            s += "# HELP ";
            s += name;
            s += ' ';
            s += help;
            s += "\n# TYPE ";
            s += name;
            s += " counter\n";
            s += name;
            s += ' ';
            num_to(s, v);
            s += '\n';
        };
        counter("nri_qos_reconcile_passes_total", "Reconcile passes run (nri-qos reconcile, the reconcile timer).", st.r_passes);
        counter("nri_qos_reconcile_containers_total", "Containers and sandboxes reconcile passes examined.", st.r_containers);
        counter("nri_qos_reconcile_drift_found_total", "Knobs reconcile found unlike the value the policy wants.", st.r_drift);
        counter("nri_qos_reconcile_corrected_total", "Knobs reconcile wrote back (by knob: nri_qos_drift_corrected_total).", st.r_corrected);
        s += "# HELP nri_qos_reconcile_knob_failures_total Knobs reconcile could not write back, by policy knob.\n"
             "# TYPE nri_qos_reconcile_knob_failures_total counter\n";
        for (const auto& [k, v] : st.r_knob_failures) series("nri_qos_reconcile_knob_failures_total", {{"knob", k}}, v);
        counter("nri_qos_reconcile_errors_total", "Containers whose wanted values reconcile could not compute (policy, request or cgroup path).",
                st.r_errors);
        counter("nri_qos_reconcile_gone_total", "Containers reconcile dropped from the state because their cgroup is gone.", st.r_gone);
        s += "# HELP nri_qos_reconcile_duration_seconds Time one reconcile pass took.\n"
             "# TYPE nri_qos_reconcile_duration_seconds histogram\n";
        uint64_t rc = 0;
        for (size_t i = 0; i < kNRBuckets; ++i) {
            rc += st.r_buckets[i];
            s += "nri_qos_reconcile_duration_seconds_bucket{le=\"";
            seconds_to(s, uint64_t(kReconcileBucketsUs[i]), true);
            s += "\"} ";
            num_to(s, rc);
            s += '\n';
        }
        rc += st.r_buckets[kNRBuckets];
        s += "nri_qos_reconcile_duration_seconds_bucket{le=\"+Inf\"} ";
        num_to(s, rc);
        s += "\nnri_qos_reconcile_duration_seconds_sum ";
        seconds_to(s, st.r_sum_us, false);
        s += "\nnri_qos_reconcile_duration_seconds_count ";
        num_to(s, st.r_count);
        s +=
            "\n# HELP nri_qos_reconcile_policy_broken 1 when the last reconcile pass found a policy file broken and applied its last good copy or the built-in policy.\n"
            "# TYPE nri_qos_reconcile_policy_broken gauge\nnri_qos_reconcile_policy_broken ";
        num_to(s, st.r_broken);
        s += "\n# HELP nri_qos_reconcile_last_pass_timestamp_seconds Unix time of the last reconcile pass.\n"
             "# TYPE nri_qos_reconcile_last_pass_timestamp_seconds gauge\nnri_qos_reconcile_last_pass_timestamp_seconds ";
        num_to(s, static_cast<uint64_t>(std::max<int64_t>(st.r_last, 0)));
        s += '\n';
    }
    return s;
}

template <class M, class K>
void bump(M& m, const K& k, const K& overflow) {
    auto it = m.find(k);
    if (it != m.end()) ++it->second;
    else if (m.size() < kMaxSeries) m.emplace(k, 1);
    else ++m[overflow];
}

}  // namespace

std::string metrics_pending_line(const std::string& event, const std::string& cls, const std::string& outcome, int64_t duration_us,
                                 bool policy_error) {
    return "E\t" + clean(event) + "\t" + (cls.empty() ? std::string("none") : clean(cls)) + "\t" + clean(outcome) + "\t" +
           std::to_string(duration_us) + (policy_error ? "\tP" : "") + "\n";
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
    for (const auto& k : e.not_passed) s += "A\t" + clean(k) + "\n";
    if (!e.rejected_by.empty()) s += "X\t" + clean(e.rejected_by) + "\n";
    return s;
}
/// Pending-file lines of a reconcile pass: its C line (containers, drift found, errors, gone,
/// duration µs, policy broken 0/1), then one CD line per knob corrected and one CF line per knob
/// that failed (they belong to the C line before them).
std::string pending_pass_lines(const ReconcilePass& p) {
    std::string s = "C\t" + std::to_string(p.containers) + "\t" + std::to_string(p.drift_found) + "\t" + std::to_string(p.errors) + "\t" +
                    std::to_string(p.gone) + "\t" + std::to_string(std::max<int64_t>(p.duration_us, 0)) + "\t" + (p.policy_broken ? "1" : "0") + "\n";
    for (const auto& k : p.corrected_knobs) s += "CD\t" + clean(k) + "\n";
    for (const auto& k : p.failed_knobs) s += "CF\t" + clean(k) + "\n";
    return s;
}

/// Appends the pending file's queued lines (`text`, as pending_lines / pending_pass_lines write
/// them) to `all` (events, E lines and their K/D/A/R/X lines) and `passes` (C lines and their
/// CD/CF lines); a malformed line, or a trailing one without its newline, is skipped.
void fold_pending(const std::string& text, std::vector<MetricsEvent>& all, std::vector<ReconcilePass>& passes) {
    size_t a = 0;
    while (a < text.size()) {
        size_t b = text.find('\n', a);
        if (b == std::string::npos) break;
        Fields f = split_tabs(std::string_view(text).substr(a, b - a));
        a = b + 1;
        if (f.size() == 7 && f[0] == "C") {  // a reconcile pass (pending_pass_lines)
            ReconcilePass p;
            p.containers = num(f[1]), p.drift_found = num(f[2]), p.errors = num(f[3]), p.gone = num(f[4]);
            p.duration_us = static_cast<int64_t>(num(f[5]));
            p.policy_broken = f[6] == "1";
            passes.push_back(std::move(p));
            continue;
        }
        if (f.size() == 2 && (f[0] == "CD" || f[0] == "CF")) {
            if (!passes.empty()) (f[0] == "CD" ? passes.back().corrected_knobs : passes.back().failed_knobs).emplace_back(f[1]);
            continue;
        }
        if (f.size() == 2 && (f[0] == "K" || f[0] == "D") && !all.empty()) {
            (f[0] == "K" ? all.back().failed_knobs : all.back().drift_knobs).emplace_back(f[1]);
            continue;
        }
        if (f.size() == 2 && f[0] == "A" && !all.empty()) {  // annotation not passed, of the E line before
            all.back().not_passed.emplace_back(f[1]);
            continue;
        }
        if (f.size() == 2 && f[0] == "R" && !all.empty()) {  // relay failure kind of the E line before
            all.back().relay_failure = f[1];
            continue;
        }
        if (f.size() == 2 && f[0] == "X" && !all.empty()) {  // the other plugin of a rejected adjustment
            all.back().rejected_by = f[1];
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

/// Counts `all` and `passes` into the counters `st` (bump: a key past the cap goes to _overflow),
/// `now` (wall clock) being the last event's / last pass's time.
void count_into(State& st, const std::vector<MetricsEvent>& all, const std::vector<ReconcilePass>& passes, const struct timespec& now) {
    for (const auto& e : all) {
        if (!e.event.empty() && e.count_event) {
            bump(st.events, std::make_tuple(clean(e.event), e.cls.empty() ? std::string("none") : clean(e.cls), clean(e.outcome)),
                 std::make_tuple(std::string("_overflow"), std::string("_overflow"), std::string("_overflow")));
            st.last_event = now.tv_sec;
        }
        for (const auto& k : e.failed_knobs) bump(st.knob_failures, clean(k), std::string("_overflow"));
        for (const auto& k : e.drift_knobs) bump(st.drift, clean(k), std::string("_overflow"));
        for (const auto& k : e.not_passed) bump(st.not_passed, clean(k), std::string("_overflow"));
        if (!e.relay_failure.empty())
            bump(st.relay_failures, std::make_pair(clean(e.event), clean(e.relay_failure)),
                 std::make_pair(std::string("_overflow"), std::string("_overflow")));
        if (!e.rejected_by.empty()) bump(st.rejected, clean(e.rejected_by), std::string("_overflow"));
        if (e.duration_us >= 0) {
            size_t i = 0;
            while (i < kNBuckets && e.duration_us > kDurationBucketsUs[i]) ++i;
            ++st.buckets[i];
            st.sum_us += static_cast<uint64_t>(e.duration_us);
            ++st.count;
        }
        if (e.policy_error) ++st.policy_errors;
    }
    for (const auto& p : passes) {
        ++st.r_passes;
        st.r_containers += p.containers;
        st.r_drift += p.drift_found;
        st.r_corrected += p.corrected_knobs.size();
        st.r_errors += p.errors;
        st.r_gone += p.gone;
        st.r_broken = p.policy_broken ? 1 : 0;
        st.r_last = now.tv_sec;
        for (const auto& k : p.corrected_knobs) bump(st.drift, clean(k), std::string("_overflow"));
        for (const auto& k : p.failed_knobs) bump(st.r_knob_failures, clean(k), std::string("_overflow"));
        size_t i = 0;
        const int64_t d = std::max<int64_t>(p.duration_us, 0);
        while (i < kNRBuckets && d > kReconcileBucketsUs[i]) ++i;
        ++st.r_buckets[i];
        st.r_sum_us += static_cast<uint64_t>(d);
        ++st.r_count;
    }
}
}  // namespace

std::string update_metrics(const std::string& prom_path, const std::vector<MetricsEvent>& events, const PolicyIdentity& policy, int wait_ms,
                           const ReconcilePass* pass) {
    if (prom_path.empty()) return "";
    const std::string dir = dir_name(prom_path);
    const std::string base = prom_path.substr(prom_path.find_last_of('/') + 1);
    if (base.empty()) return "metrics: " + prom_path + ": not a file path";
    // Every file here through open_record / create_temp: O_NONBLOCK, no symlink, regular files
    // only, temporary files O_EXCL — a FIFO, device or symlink planted at a record path must not
    // hold or redirect the event (issue 19 §2).
    {
        struct stat pst {};
        if (lstat(prom_path.c_str(), &pst) == 0 && !S_ISREG(pst.st_mode))
            return "metrics: " + prom_path + ": not a regular file (" + file_kind(pst.st_mode) + "); this event is not counted";
    }
    const std::string state_path = dir + "/." + base + ".state";
    std::string why;
    int fd = open_record(-1, state_path, O_RDWR | O_CREAT, 0600, why);
    if (fd < 0 && errno == ENOENT) {
        make_dirs(dir, 0755);
        fd = open_record(-1, state_path, O_RDWR | O_CREAT, 0600, why);
    }
    if (fd < 0) return "metrics: " + state_path + ": " + why + "; this event is not counted";
    const std::string pending_path = dir + "/." + base + ".pending";
    std::vector<MetricsEvent> all = events;
    std::vector<ReconcilePass> passes;
    if (pass) passes.push_back(*pass);
    if (!lock_within(fd, wait_ms)) {
        // Another updater holds the counters (a burst of events). Queue this event in the pending
        // file instead of dropping it, then try once more to become the updater. No event is left
        // behind in the queue: the updater reads the pending file last, under its lock, and lets
        // go of the counters' lock before the pending one — so whoever holds the counters' lock
        // when we try again has yet to read the queue (tests/ops.sh: exact totals).
        std::string lines;
        for (const auto& e : events) lines += pending_lines(e);
        if (pass) lines += pending_pass_lines(*pass);
        int q = open_record(-1, pending_path, O_WRONLY | O_APPEND | O_CREAT, 0600, why);
        bool queued = q >= 0 && lock_within(q, wait_ms) && write_all(q, lines);
        if (q >= 0 && !queued) why = std::strerror(errno);
        if (q >= 0) close(q);
        if (!queued) {
            close(fd);
            return "metrics: " + state_path + ": lock not obtained within " + std::to_string(wait_ms) + " ms and " + pending_path + ": " + why +
                   "; this event is not counted";
        }
        if (!lock_within(fd, 0)) {
            close(fd);
            return "";
        }
        all.clear();  // in the queue now: folded below
        passes.clear();
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
    std::string pwhy;
    int pfd = open_record(-1, pending_path, O_RDWR | O_CREAT, 0600, pwhy);
    if (pfd >= 0) {
        if (lock_within(pfd, wait_ms)) {
            struct stat pst {};
            if (fstat(pfd, &pst) == 0 && pst.st_size > 0 && static_cast<size_t>(pst.st_size) <= kMaxStateBytes) {
                std::string text(static_cast<size_t>(pst.st_size), '\0');
                if (pread(pfd, text.data(), text.size(), 0) == pst.st_size) { fold_pending(text, all, passes); }
            }
            if (ftruncate(pfd, 0) != 0) { /* counted again next time: better than lost */
            }
        }
    }
    count_into(st, all, passes, now);
    if (!policy.source.empty()) {
        st.p_path = clean(policy.path);
        st.p_source = clean(policy.source);
        st.p_sha = clean(policy.sha256);
    }
    std::string err;
    if (pfd < 0) err = "metrics: " + pending_path + ": " + pwhy;
    std::string text = dump_state(st);
    if (pwrite(fd, text.data(), text.size(), 0) != static_cast<ssize_t>(text.size()) || ftruncate(fd, static_cast<off_t>(text.size())) != 0)
        if (err.empty()) err = "metrics: " + state_path + ": " + std::strerror(errno);
    std::string tmp;
    int out = create_temp(-1, dir + "/." + base, 0644, tmp, why);
    if (out < 0) {
        if (err.empty()) err = "metrics: " + dir + "/." + base + ".*.tmp: " + why;
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
