#include "records/record.hpp"

#include <algorithm>
#include <charconv>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "os/json_print.hpp"
#include "os/kernel.hpp"

namespace nriqos {

size_t rfc3339_utc(int64_t ns, char (&buf)[32]) {
    if (ns == 0) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ns = int64_t(ts.tv_sec) * 1000000000 + ts.tv_nsec;
    }
    // The civil date of a UTC time without gmtime_r: glibc's gmtime_r goes through tzset, which
    // reads /etc/localtime (6 syscalls and a parse) in every process, although UTC needs no zone.
    // Days since 1970-01-01 to year/month/day in the proleptic Gregorian calendar, counted in
    // 400-year eras of 146,097 days that start on 1 March (so that the leap day is the last day of
    // a year): the method of H. Hinnant, "chrono-Compatible Low-Level Date Algorithms"
    // (civil_from_days). Checked against gmtime_r in tests/unit (record).
    int64_t secs = ns / 1000000000;
    int64_t days = secs / 86400, sod = secs % 86400;
    if (sod < 0) sod += 86400, --days;
    days += 719468;  // 0000-03-01 to 1970-01-01
    const int64_t era = (days >= 0 ? days : days - 146096) / 146097;
    const int64_t doe = days - era * 146097;  // [0, 146096]
    const int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;  // [0, 399]
    const int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);  // [0, 365], from 1 March
    const int64_t mp = (5 * doy + 2) / 153;  // [0, 11], March = 0
    struct tm tm {};
    tm.tm_mday = int(doy - (153 * mp + 2) / 5 + 1);
    tm.tm_mon = int(mp < 10 ? mp + 2 : mp - 10);
    tm.tm_year = int(yoe + era * 400 + (tm.tm_mon <= 1 ? 1 : 0) - 1900);
    tm.tm_hour = int(sod / 3600);
    tm.tm_min = int(sod / 60 % 60);
    tm.tm_sec = int(sod % 60);
    // "%04d-%02d-%02dT%02d:%02d:%02d.%06dZ" digit by digit: snprintf costs ~4,000 instructions
    // a call, and every event formats its time several times (record_logfmt, record_json, the
    // deadline record prepared at each stage: publish.hpp).
    char* p = buf;
    auto put = [&p](long v, int width) {
        if (v < 0) v = 0;  // before 1970: no event has such a time
        for (int i = width - 1; i >= 0; --i, v /= 10) p[i] = static_cast<char>('0' + v % 10);
        p += width;
    };
    long year = std::min(tm.tm_year + 1900L, 9999L);
    put(year, 4), *p++ = '-', put(tm.tm_mon + 1, 2), *p++ = '-', put(tm.tm_mday, 2), *p++ = 'T';
    put(tm.tm_hour, 2), *p++ = ':', put(tm.tm_min, 2), *p++ = ':', put(tm.tm_sec, 2), *p++ = '.';
    put(static_cast<long>((ns % 1000000000) / 1000), 6), *p++ = 'Z';
    return static_cast<size_t>(p - buf);
}

std::string rfc3339_utc(int64_t ns) {
    char buf[32];
    return std::string(buf, rfc3339_utc(ns, buf));
}

namespace {

const char* level_of(const EventRecord& r) {
    return r.policy_error.empty() && r.not_passed.empty() && (r.outcome.empty() || r.outcome == "ok" || r.outcome == "gone") ? "info" : "warn";
}

/// True when `v` has a byte that makes a logfmt value quoted: <= ' ', '=', '"', '\\', DEL (bytes
/// >= 0x80 do not). Eight bytes at a time (json_print.hpp any_byte).
bool logfmt_special_any(std::string_view v) {
    using namespace swar;
    return any_byte(
        v, [](uint64_t w) { return has_less(w, 0x21) | has_byte(w, '=') | has_byte(w, '"') | has_byte(w, '\\') | has_byte(w, 0x7f); },
        [](unsigned char ch) { return ch <= ' ' || ch == '=' || ch == '"' || ch == '\\' || ch == 0x7f; });
}

/// ` key=value` (logfmt; nothing when `v` is empty). `key_eq` is " key=". A value with a space,
/// control character, '=', '"' or '\\' is quoted, '"' and '\\' escaped with a backslash, '\n' as
/// \n, other control characters and DEL as \xHH; the rest is appended as it is (bytes >= 0x80
/// too: the line is for people and logfmt parsers, not JSON). Runs of plain bytes are appended
/// in one piece: one append per plain value, not one per character.
void kv(std::string& out, std::string_view key_eq, std::string_view v) {
    if (v.empty()) return;
    out.append(key_eq.data(), key_eq.size());
    if (!logfmt_special_any(v)) {
        out.append(v.data(), v.size());
        return;
    }
    out += '"';
    size_t i = 0;
    size_t run = 0;  // start of the plain bytes not yet appended
    for (; i < v.size(); ++i) {
        unsigned char ch = static_cast<unsigned char>(v[i]);
        const char* esc = nullptr;
        char b[5];
        if (ch == '"') esc = "\\\"";
        else if (ch == '\\') esc = "\\\\";
        else if (ch == '\n') esc = "\\n";
        else if (ch < ' ' || ch == 0x7f) {
            static const char kHex[] = "0123456789abcdef";
            b[0] = '\\', b[1] = 'x', b[2] = kHex[ch >> 4], b[3] = kHex[ch & 15], b[4] = '\0';
            esc = b;
        }
        if (!esc) continue;
        out.append(v.data() + run, i - run);
        out += esc;
        run = i + 1;
    }
    out.append(v.data() + run, v.size() - run);
    out += '"';
}

}  // namespace

void record_logfmt_part(std::string& out, const EventRecord& r, RecordPart part) {
    switch (part) {
        case RecordPart::Head: {
            char t[32];
            kv(out, " time=", std::string_view(t, rfc3339_utc(r.time_ns, t)));
            kv(out, " level=", level_of(r));
            return;
        }
        case RecordPart::Who:
            kv(out, " source=", r.source);
            kv(out, " event=", r.event);
            kv(out, " ns=", r.ns);
            kv(out, " pod=", r.pod);
            kv(out, " container=", r.container);
            kv(out, " id=", std::string_view(r.id).substr(0, 12));
            if (r.sandbox) kv(out, " sandbox=", "true");
            kv(out, " evaluator=", r.evaluator);
            return;
        case RecordPart::Class:
            kv(out, " class=", r.cls);
            kv(out, " rule=", r.rule);
            return;
        case RecordPart::Outcome:
            kv(out, " outcome=", r.outcome);
            kv(out, " failure=", r.failure);
            kv(out, " fail_mode=", r.fail_mode);
            if (r.duration_us >= 0) {
                char d[24];
                kv(out, " duration_us=", std::string_view(d, static_cast<size_t>(std::to_chars(d, d + sizeof d, r.duration_us).ptr - d)));
            }
            kv(out, " applied=", r.applied);
            kv(out, " skipped=", r.skipped);
            kv(out, " failed=", r.failed);
            kv(out, " drift=", r.drift);
            kv(out, " not_passed=", r.not_passed);
            kv(out, " weight_formula=", r.weight_formula);
            kv(out, " systemd=", r.systemd);
            return;
        case RecordPart::Policy:
            kv(out, " policy=", r.policy);
            kv(out, " policy_error=", r.policy_error);
            return;
        case RecordPart::Message: kv(out, " msg=", r.message); return;
    }
}

namespace {
size_t record_text_size(const EventRecord& r) {
    return r.source.size() + r.evaluator.size() + r.event.size() + r.ns.size() + r.pod.size() + r.container.size() + r.id.size() +
           r.sandbox_id.size() + r.cls.size() + r.rule.size() + r.outcome.size() + r.failure.size() + r.fail_mode.size() + r.applied.size() +
           r.skipped.size() + r.failed.size() + r.drift.size() + r.not_passed.size() + r.weight_formula.size() + r.systemd.size() + r.policy.size() +
           r.policy_sha256.size() + r.policy_error.size() + r.message.size();
}
constexpr RecordPart kParts[] = {RecordPart::Head, RecordPart::Who, RecordPart::Class, RecordPart::Outcome, RecordPart::Policy, RecordPart::Message};
}  // namespace

std::string record_logfmt(const EventRecord& r) {
    std::string s;
    // Room for the keys and every value as it is (a quoted value with escapes may still grow it).
    s.reserve(320 + record_text_size(r));
    s.append("nri-qos:", 8);
    for (RecordPart p : kParts) record_logfmt_part(s, r, p);
    s += '\n';
    return s;
}

// Printed member by member (json_print.hpp): the same bytes as an ordered_json of these members
// dumped with error_handler_t::replace, without the DOM (this runs for every event, and once
// more for each deadline record prepared: publish.cpp).
void record_json_part(std::string& out, const EventRecord& r, RecordPart part) {
    JsonPrinter j(out);
    auto put = [&](const char* k, const std::string& v) {
        if (!v.empty()) j.key(k).str(v);
    };
    switch (part) {
        case RecordPart::Head: {
            j.open();
            char t[32];
            j.key("time");
            out += '"';
            out.append(t, rfc3339_utc(r.time_ns, t));  // digits, '-', ':', '.', 'T', 'Z': nothing to escape
            out += '"';
            j.key("level").str(level_of(r));
            return;
        }
        case RecordPart::Who:
            j.resume();
            put("source", r.source);
            put("event", r.event);
            put("namespace", r.ns);
            put("pod", r.pod);
            put("container", r.container);
            put("id", r.id);
            put("sandbox_id", r.sandbox_id);
            if (r.sandbox) j.key("sandbox").boolean(true);
            put("evaluator", r.evaluator);
            return;
        case RecordPart::Class:
            j.resume();
            put("class", r.cls);
            put("rule", r.rule);
            return;
        case RecordPart::Outcome:
            j.resume();
            put("outcome", r.outcome);
            put("failure", r.failure);
            put("fail_mode", r.fail_mode);
            if (r.duration_us >= 0) j.key("duration_us").num(r.duration_us);
            put("applied", r.applied);
            put("runtime", r.runtime);
            put("skipped", r.skipped);
            put("failed", r.failed);
            put("drift", r.drift);
            put("not_passed", r.not_passed);
            put("weight_formula", r.weight_formula);
            put("systemd", r.systemd);
            return;
        case RecordPart::Policy:
            j.resume();
            put("policy", r.policy);
            put("policy_sha256", r.policy_sha256);
            put("policy_error", r.policy_error);
            return;
        case RecordPart::Message:
            j.resume();
            put("message", r.message);
            return;
    }
}

std::string record_json(const EventRecord& r) {
    std::string out;
    out.reserve(400 + record_text_size(r));
    for (RecordPart p : kParts) record_json_part(out, r, p);
    out.append("}\n", 2);
    return out;
}

std::string dir_name(const std::string& path) {
    auto pos = path.find_last_of('/');
    if (pos == std::string::npos) return ".";
    return pos == 0 ? "/" : path.substr(0, pos);
}

int make_dirs(const std::string& dir, unsigned mode) {
    if (dir.empty()) return -EINVAL;
    for (size_t pos = dir.find('/', 1);; pos = dir.find('/', pos + 1)) {
        std::string part = dir.substr(0, pos);
        if (!part.empty() && mkdir(part.c_str(), mode) != 0 && errno != EEXIST) return -errno;
        if (pos == std::string::npos) break;
    }
    return 0;
}

bool lock_within(int fd, int wait_ms) {
    for (int waited = 0;; ++waited) {
        if (flock(fd, LOCK_EX | LOCK_NB) == 0) return true;
        if (errno != EWOULDBLOCK && errno != EINTR) return false;
        if (waited >= wait_ms) return false;
        struct timespec ts {
            0, 1000000
        };
        nanosleep(&ts, nullptr);
    }
}

std::string append_event_log(const std::string& path, uint64_t max_bytes, const std::string& line, int wait_ms) {
    if (path.empty()) return "";
    if (max_bytes == 0) max_bytes = defaults::kEventLogMaxBytes;
    // open_record: O_NONBLOCK, no symlink, a regular file only — a FIFO or device here must not
    // hold the event (issue 19 §2).
    const int flags = O_WRONLY | O_APPEND | O_CREAT;
    for (int attempt = 0; attempt < 4; ++attempt) {
        std::string why;
        int fd = open_record(-1, path, flags, 0640, why);
        if (fd < 0 && errno == ENOENT) {
            make_dirs(dir_name(path), 0750);
            fd = open_record(-1, path, flags, 0640, why);
        }
        if (fd < 0) return "event log " + path + ": " + why;
        if (!lock_within(fd, wait_ms)) {
            // The lock only serialises rotation. A line is never dropped for it: one O_APPEND
            // write(2) of a whole line lands at the end of the file without interleaving (a
            // concurrent rotation at worst puts it into <path>.1, still on record).
            ssize_t n = write(fd, line.data(), line.size());
            int e = errno;
            close(fd);
            if (n != static_cast<ssize_t>(line.size())) return "event log " + path + ": " + (n < 0 ? std::strerror(e) : "short write");
            return "";
        }
        struct stat fs {
        }, ps{};
        if (fstat(fd, &fs) != 0 || stat(path.c_str(), &ps) != 0 || fs.st_ino != ps.st_ino || fs.st_dev != ps.st_dev) {
            close(fd);  // rotated by another process between our open and our lock: reopen
            continue;
        }
        ssize_t n = write(fd, line.data(), line.size());
        int e = errno;
        std::string err;
        if (n != static_cast<ssize_t>(line.size())) err = "event log " + path + ": " + (n < 0 ? std::strerror(e) : "short write");
        if (static_cast<uint64_t>(fs.st_size) + line.size() > max_bytes) {
            // Under the lock of the current file: older generations first.
            std::string p1 = path + ".1", p2 = path + ".2";
            rename(p1.c_str(), p2.c_str());
            if (rename(path.c_str(), p1.c_str()) != 0 && err.empty()) err = "event log " + path + ": rotate: " + std::strerror(errno);
        }
        close(fd);  // releases the lock
        return err;
    }
    return "event log " + path + ": rotated under us repeatedly; line dropped";
}

}  // namespace nriqos
