// Relay-level failures on the operator's record, see failure_record.hpp.
#include "nri/failure_record.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cctype>
#include <cstring>
#include <deque>

#include <nlohmann/json.hpp>

#include "event/publish.hpp"
#include "os/clock.hpp"

namespace nriqos::nri {

namespace {

using nlohmann::json;

// Bounds of the message's strings (bytes). Kubernetes names: at most 253 (DNS subdomain);
// runtime ids are 64 hex digits, 128 leaves room for other runtimes.
constexpr size_t kMaxName = 253;
constexpr size_t kMaxId = 128;
constexpr size_t kMaxReason = 512;
constexpr size_t kMaxPlugin = 64;

// An NRI plugin name ("10-nri-qos"): [A-Za-z0-9_.-], 1-64 bytes.
bool plugin_name(const std::string& v) {
    if (v.empty() || v.size() > kMaxPlugin) return false;
    for (unsigned char c : v)
        if (!(isalnum(c) || c == '_' || c == '-' || c == '.')) return false;
    return true;
}

const char* const kEvents[] = {"RunPodSandbox",    "RemovePodSandbox", "CreateContainer", "StartContainer",  "UpdateContainer", "PostUpdateContainer",
                               "UpdatePodSandbox", "StateChange",      "Synchronize",     "SynchronizeLate", "unknown",         "relay"};
const char* const kKinds[] = {"timeout",  "crash",       "bad-output",        "unavailable", "malformed",   "overloaded",         "unknown-method",
                              "shutdown", "records-cut", "died-after-answer", "keeper-lost", "zygote-lost", "adjustment-rejected"};
const char* const kOutcomes[] = {"failed", "refused", "answered", "replaced", "undone"};
const char* const kFailModes[] = {"", "open", "closed"};

template <size_t N>
bool one_of(const std::string& v, const char* const (&set)[N]) {
    for (const char* s : set)
        if (v == s) return true;
    return false;
}

// Cut to `max` bytes without splitting a UTF-8 sequence.
std::string cut(const std::string& s, size_t max) {
    if (s.size() <= max) return s;
    size_t n = max;
    while (n > 0 && (static_cast<unsigned char>(s[n]) & 0xC0) == 0x80) --n;
    return s.substr(0, n);
}

// Names and ids: no control characters (the relay replaces them before sending, see
// failure_message; a message that still has one did not come from the relay's code).
bool plain(const std::string& v) {
    for (unsigned char c : v)
        if (c < ' ' || c == 0x7f) return false;
    return true;
}

// Relay side: control characters of runtime-given names become '?' (a record is never refused
// for a strange name).
std::string printable(const std::string& v, size_t max) {
    std::string s = cut(v, max);
    for (char& c : s)
        if (static_cast<unsigned char>(c) < ' ' || c == 0x7f) c = '?';
    return s;
}

void say(const std::string& s) {
    std::string line = "nri-qos: " + s + "\n";
    ssize_t w = write(STDERR_FILENO, line.data(), line.size());
    (void)w;
}

}  // namespace

std::string failure_message(const RelayFailure& f) {
    json j = json::object();
    j["event"] = f.event;
    j["outcome"] = f.outcome;
    j["kind"] = f.kind;
    if (!f.fail_mode.empty()) j["fail_mode"] = f.fail_mode;
    j["reason"] = cut(f.reason, kMaxReason);
    auto put = [&j](const char* k, const std::string& v, size_t max) {
        if (!v.empty()) j[k] = printable(v, max);
    };
    put("namespace", f.ns, kMaxName);
    put("pod", f.pod, kMaxName);
    put("container", f.container, kMaxName);
    put("id", f.id, kMaxId);
    put("sandbox_id", f.sandbox_id, kMaxId);
    put("self", f.self, kMaxPlugin);
    put("fields", f.fields, kMaxName);
    put("other", f.other, kMaxPlugin);
    if (f.duration_us >= 0) j["duration_us"] = f.duration_us;
    // Worst case (all fields at their bounds, every byte escaped as \u00XX) stays below
    // kMaxFailureMsg only for plain text; the replace handler keeps invalid UTF-8 from throwing.
    std::string s = j.dump(-1, ' ', false, json::error_handler_t::replace);
    if (s.size() >= kMaxFailureMsg) {  // escaped reason too long: drop it to what fits
        j["reason"] = cut(f.reason, 64);
        s = j.dump(-1, ' ', false, json::error_handler_t::replace);
    }
    return s;
}

bool parse_failure_message(const std::string& msg, RelayFailure& f, std::string& err) {
    f = RelayFailure();
    if (msg.size() >= kMaxFailureMsg) {
        err = "message of " + std::to_string(msg.size()) + " bytes (at most " + std::to_string(kMaxFailureMsg - 1) + ")";
        return false;
    }
    json j = json::parse(msg, nullptr, false);
    if (!j.is_object()) {
        err = "not a JSON object";
        return false;
    }
    for (auto it = j.begin(); it != j.end(); ++it) {
        const std::string& k = it.key();
        if (k == "duration_us") {
            if (!it->is_number_integer() || it->get<int64_t>() < 0 || it->get<int64_t>() > 3600LL * 1000000) {
                err = "duration_us is not an integer of 0..3600 s";
                return false;
            }
            f.duration_us = it->get<int64_t>();
            continue;
        }
        std::string* dst = nullptr;
        size_t max = kMaxName;
        bool names = true;
        if (k == "event") dst = &f.event;
        else if (k == "outcome") dst = &f.outcome;
        else if (k == "kind") dst = &f.kind;
        else if (k == "fail_mode") dst = &f.fail_mode;
        else if (k == "reason") {
            dst = &f.reason;
            max = kMaxReason;
            names = false;
        } else if (k == "namespace") dst = &f.ns;
        else if (k == "pod") dst = &f.pod;
        else if (k == "container") dst = &f.container;
        else if (k == "id") {
            dst = &f.id;
            max = kMaxId;
        } else if (k == "sandbox_id") {
            dst = &f.sandbox_id;
            max = kMaxId;
        } else if (k == "self") {
            dst = &f.self;
            max = kMaxPlugin;
        } else if (k == "other") {
            dst = &f.other;
            max = kMaxPlugin;
        } else if (k == "fields") {
            dst = &f.fields;
        }
        if (!dst) {
            err = "unknown key \"" + cut(k, 40) + "\"";
            return false;
        }
        if (!it->is_string()) {
            err = k + " is not a string";
            return false;
        }
        const std::string& v = it->get_ref<const std::string&>();
        if (v.size() > max || (names && !plain(v))) {
            err = k + " is longer than " + std::to_string(max) + " bytes or has control characters";
            return false;
        }
        *dst = v;
    }
    if (!one_of(f.event, kEvents)) err = "event \"" + cut(f.event, 40) + "\" is not an NRI event the relay serves";
    else if (!one_of(f.outcome, kOutcomes)) err = "outcome \"" + f.outcome + "\" is not failed/refused/answered/replaced";
    else if (!one_of(f.kind, kKinds)) err = "kind \"" + f.kind + "\" is not a relay failure kind";
    else if (!one_of(f.fail_mode, kFailModes)) err = "fail_mode \"" + f.fail_mode + "\" is not open/closed";
    else if (f.reason.empty()) err = "no reason";
    else if ((!f.self.empty() && !plugin_name(f.self)) || (!f.other.empty() && !plugin_name(f.other))) err = "self/other is not an NRI plugin name";
    // The reason is free text: one line (record_logfmt/record_json escape the rest).
    for (char& c : f.reason)
        if (c == '\n' || c == '\r') c = ' ';
    return err.empty();
}

nriqos::EventRecord failure_record(const RelayFailure& f) {
    nriqos::EventRecord r;
    r.source = "relay";
    r.event = f.event;
    r.ns = f.ns;
    r.pod = f.pod;
    r.container = f.container;
    r.id = f.id;
    r.sandbox_id = f.sandbox_id;
    r.sandbox = f.container.empty() && f.id.empty() && !f.pod.empty();
    r.outcome = f.outcome;
    r.failure = f.kind;
    r.fail_mode = f.fail_mode;
    r.duration_us = f.duration_us;
    r.message = f.reason;
    return r;
}

namespace {

const char kConflictMark[] = "both tried to set";

// The lines of `text` holding kConflictMark, the last `max` of them.
std::string conflict_lines(const std::string& text, size_t max) {
    std::deque<std::string> keep;
    size_t at = 0;
    while (at < text.size()) {
        size_t nl = text.find('\n', at);
        size_t end = nl == std::string::npos ? text.size() : nl;
        std::string line = text.substr(at, end - at);
        if (line.find(kConflictMark) != std::string::npos) {
            keep.push_back(cut(line, 4096));
            if (keep.size() > max) keep.pop_front();
        }
        at = end + 1;
    }
    std::string out;
    for (const auto& l : keep) out += l + "\n";
    return out;
}

// The last `max` bytes of a regular file.
bool tail_file(const std::string& path, size_t max, std::string& out, std::string& why) {
    int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    if (fd < 0) {
        why = path + ": " + strerror(errno);
        return false;
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        why = path + ": not a regular file";
        close(fd);
        return false;
    }
    off_t from = st.st_size > off_t(max) ? st.st_size - off_t(max) : 0;
    out.resize(size_t(st.st_size - from));
    ssize_t n = pread(fd, &out[0], out.size(), from);
    close(fd);
    out.resize(n > 0 ? size_t(n) : 0);
    return true;
}

// journalctl's output for `unit`, killed at `deadline` (monotonic ms).
bool journal_lines(const std::string& unit, int64_t deadline, std::string& out, std::string& why) {
    int p[2];
    if (pipe2(p, O_CLOEXEC) != 0) {
        why = std::string("pipe: ") + strerror(errno);
        return false;
    }
    pid_t pid = fork();
    if (pid < 0) {
        why = std::string("fork: ") + strerror(errno);
        close(p[0]);
        close(p[1]);
        return false;
    }
    if (pid == 0) {
        dup2(p[1], STDOUT_FILENO);
        int devnull = open("/dev/null", O_RDWR | O_CLOEXEC);
        if (devnull >= 0) {
            dup2(devnull, STDIN_FILENO);
            dup2(devnull, STDERR_FILENO);
        }
        const char* argv[] = {"journalctl", "-q",    "--no-pager", "-o",          "cat", "-u", unit.c_str(),
                              "--since",    "-5min", "-g",         kConflictMark, "-n",  "64", nullptr};
        for (const char* bin : {"/usr/bin/journalctl", "/bin/journalctl"}) execv(bin, const_cast<char* const*>(argv));
        _exit(127);
    }
    close(p[1]);
    char buf[8192];
    bool timed_out = false;
    for (;;) {
        int64_t left = deadline - nriqos::monotonic_ms();
        if (left <= 0) {
            timed_out = true;
            break;
        }
        struct pollfd pf = {p[0], POLLIN, 0};
        int r = poll(&pf, 1, int(left));
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) {
            timed_out = r == 0;
            break;
        }
        ssize_t n = read(p[0], buf, sizeof buf);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        if (out.size() < (1u << 20)) out.append(buf, size_t(n));
    }
    close(p[0]);
    if (timed_out) kill(pid, SIGKILL);
    int st = 0;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {}
    if (timed_out) why = "journalctl -u " + unit + ": no answer in time";
    else if (WIFEXITED(st) && WEXITSTATUS(st) == 127) why = "journalctl: not found";
    // exit 1 with no output: no matching entry (journalctl -g), not an error
    return !timed_out;
}

// A conflict's subject in the words of NRI <= v0.10 (pkg/adaptation/result.go conflict():
// "CPU shares", "annotation <key>"). NRI v0.11+ writes the field's enum name and its qualifiers
// instead (v0.11.0/v0.12.0 pkg/api/owners.go Conflict/qualify: Field(f).String() + " " +
// qualifiers, so "CPUShares " with a trailing space, "Annotations nri-qos/class"): those are
// turned into the older words, the ones RelayFailure::fields uses. An unknown name is kept as
// written.
std::string conflict_subject(const std::string& s) {
    static const struct {
        const char* field;
        const char* words;
    } kFields[] = {
        {"Annotations", "annotation"},
        {"Mounts", "mount"},
        {"Devices", "device"},
        {"CdiDevices", "CDI device"},
        {"Env", "env"},
        {"MemLimit", "memory limit"},
        {"MemReservation", "memory reservation"},
        {"MemSwapLimit", "memory swap limit"},
        {"MemKernelLimit", "memory kernel limit"},
        {"MemTCPLimit", "memory TCP limit"},
        {"MemSwappiness", "memory swappiness"},
        {"MemDisableOomKiller", "memory disable OOM killer"},
        {"CPUShares", "CPU shares"},
        {"CPUQuota", "CPU quota"},
        {"CPUPeriod", "CPU period"},
        {"CPURealtimeRuntime", "CPU realtime runtime"},
        {"CPURealtimePeriod", "CPU realtime period"},
        {"CPUSetCPUs", "CPU pinning"},
        {"CPUSetMems", "memory pinning"},
        {"PidsLimit", "pids limit"},
        {"HugepageLimits", "hugepage limit of size"},
        {"BlockioClass", "block I/O class"},
        {"RdtClass", "RDT class"},
        {"CgroupsUnified", "unified resource"},
        {"CgroupsPath", "cgroups path"},
        {"OomScoreAdj", "oom score adj"},
        {"Rlimits", "rlimit"},
        // v0.11/v0.12 Field names of the process knobs (pkg/api/api.proto enum Field 31, 36, 40).
        {"IoPriority", "I/O priority"},
        {"LinuxSched", "scheduling policy"},
        {"MemoryPolicy", "memory policy"},
    };
    size_t sp = s.find(' ');
    const std::string head = s.substr(0, sp);
    for (const auto& f : kFields) {
        if (head != f.field) continue;
        std::string out = f.words;
        if (sp != std::string::npos) out += s.substr(sp);
        while (!out.empty() && out.back() == ' ') out.pop_back();
        return out;
    }
    return s;
}

}  // namespace

std::string runtime_log_excerpt(const std::string& spec_in, int budget_ms, std::string& why) {
    std::string spec = spec_in;
    if (spec.empty()) {
        struct stat st;
        spec = stat("/run/systemd/journal/socket", &st) == 0 ? "journal:containerd" : "none";
    }
    if (spec == "none") {
        why = "no runtime log configured (plugin config runtime_log)";
        return "";
    }
    std::string text;
    if (spec.rfind("journal:", 0) == 0) {
        const std::string unit = spec.substr(8);
        if (!plugin_name(unit)) {
            why = "runtime_log \"" + cut(spec, 80) + "\": expected journal:<unit name>";
            return "";
        }
        if (!journal_lines(unit, nriqos::monotonic_ms() + budget_ms, text, why)) return "";
    } else if (spec[0] == '/') {
        if (!tail_file(spec, 1u << 20, text, why)) return "";
    } else {
        why = "runtime_log \"" + cut(spec, 80) + "\": expected a file path, journal:<unit> or none";
        return "";
    }
    std::string lines = conflict_lines(text, 64);
    if (lines.empty() && why.empty()) why = "no \"" + std::string(kConflictMark) + "\" line in " + spec;
    return lines;
}

RuntimeConflict runtime_conflict(const std::string& excerpt, const std::string& sandbox_id, const std::string& container, const std::string& self) {
    RuntimeConflict c;
    if (sandbox_id.empty()) return c;
    // Lines from the last: the newest report wins.
    size_t end = excerpt.size();
    while (end > 0) {
        size_t start = excerpt.rfind('\n', end - 1);
        start = start == std::string::npos ? 0 : start + 1;
        std::string line = excerpt.substr(start, end - start);
        end = start == 0 ? 0 : start - 1;
        // Unescape \" (logfmt, JSON) so that the quotes are plain.
        std::string plain;
        for (size_t i = 0; i < line.size(); ++i) {
            if (line[i] == '\\' && i + 1 < line.size() && (line[i + 1] == '"' || line[i + 1] == '\\')) continue;
            plain.push_back(line[i]);
        }
        if (plain.find("sandbox \"" + sandbox_id + "\"") == std::string::npos) continue;
        // the container's CRI metadata: "&ContainerMetadata{Name:app,Attempt:0,}" (gogo String(),
        // containerd 1.7/2.x) or protobuf text "name:\"app\""
        if (!container.empty() && plain.find("Name:" + container + ",") == std::string::npos &&
            plain.find("name:\"" + container + "\"") == std::string::npos)
            continue;
        size_t mark = plain.rfind(kConflictMark);
        size_t pl = plain.rfind("plugins \"", mark);
        if (mark == std::string::npos || pl == std::string::npos) continue;
        // plugins "A" and "B" both tried to set <subject>
        size_t a0 = pl + 9, a1 = plain.find('"', a0);
        if (a1 == std::string::npos) continue;
        size_t b0 = plain.find("\" and \"", a1);
        if (b0 != a1) continue;
        b0 += 7;
        size_t b1 = plain.find('"', b0);
        if (b1 == std::string::npos || b1 > mark) continue;
        std::string a = plain.substr(a0, a1 - a0), b = plain.substr(b0, b1 - b0);
        if (!plugin_name(a) || !plugin_name(b)) continue;
        c.other = a == self ? b : b == self ? a : (a.find("nri-qos") != std::string::npos ? b : a);
        std::string subject = plain.substr(mark + sizeof kConflictMark);
        size_t q = subject.find_first_of("\"\n");
        c.subject = printable(cut(subject.substr(0, q), 128), 128);
        while (!c.subject.empty() && c.subject.back() == ' ') c.subject.pop_back();
        c.subject = conflict_subject(c.subject);
        return c;
    }
    return c;
}

nriqos::MetricsEvent failure_metrics(const RelayFailure& f) {
    nriqos::MetricsEvent m;
    m.event = f.event;
    m.outcome = f.outcome;  // class "none": the relay never knows one
    m.relay_failure = f.kind;
    m.duration_us = f.duration_us;
    if (f.kind == "adjustment-rejected") m.rejected_by = f.other.empty() ? "unknown" : f.other;
    if (f.outcome == "answered" || f.outcome == "replaced" || f.outcome == "undone") {
        // The evaluator answered and may have counted the event itself before its records were cut:
        // only nri_qos_relay_failures_total counts it here, never the event or its duration twice.
        m.count_event = false;
        m.duration_us = -1;
    }
    return m;
}

int publish_relay_failure(const std::string& msg, const nriqos::SinkPaths& paths, const std::string& excerpt, const std::string& log_spec) {
    RelayFailure f;
    std::string err;
    if (!parse_failure_message(msg, f, err)) {
        say("relay failure record refused: " + err);
        return 2;
    }
    if (f.kind == "adjustment-rejected") {
        // The other plugin, from the runtime's own words (never from the relay's message).
        f.other.clear();
        RuntimeConflict rc = runtime_conflict(excerpt, f.sandbox_id, f.container, f.self);
        f.other = rc.other;
        const std::string where = log_spec.empty() ? "the runtime's log" : log_spec;
        if (!rc.other.empty())
            f.reason += "; the runtime's log (" + where + "): plugins \"" + f.self + "\" and \"" + rc.other + "\" both tried to set " + rc.subject +
                        "; to run beside it, name its fields in settings.leave_to_others";
        else
            f.reason += "; the other plugin is not known (" +
                        (excerpt.empty() ? std::string("nothing read from ") + where : "no matching line in " + where) + ")";
    }
    nriqos::EventRecord r = failure_record(f);
    std::string line = nriqos::record_logfmt(r);
    ssize_t w = write(STDERR_FILENO, line.data(), line.size());
    (void)w;
    // The metrics first (as publish_event does): an event log that hangs (records-cut is often
    // about one) still leaves the count; the recorder's alarm ends the wait.
    int rc = 0;
    std::string e = nriqos::update_metrics(paths.metrics_file, {failure_metrics(f)}, nriqos::PolicyIdentity{});
    if (!e.empty()) {
        say(e);
        rc = 1;
    }
    e = nriqos::append_event_log(paths.event_log, paths.event_log_max_bytes, nriqos::record_json(r));
    if (!e.empty()) {
        say(e);
        rc = 1;
    }
    return rc;
}

}  // namespace nriqos::nri
