#include "event/systemd_unit.hpp"

#include <csignal>

#include <cerrno>
#include <cinttypes>
#include <climits>
#include <cstdio>
#include <cstring>
#include <elf.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "os/cpuset.hpp"
#include "os/clock.hpp"

namespace nriqos {

namespace {
constexpr uint64_t kInfinity = UINT64_MAX;

bool parse_u64(const std::string& s, uint64_t& out) {
    if (s.empty() || s.size() > 20) return false;
    for (char c : s)
        if (c < '0' || c > '9') return false;
    errno = 0;
    char* end = nullptr;
    out = std::strtoull(s.c_str(), &end, 10);
    return errno == 0 && *end == '\0';
}

/// "max" → infinity, else a decimal.
bool parse_limit(const std::string& s, uint64_t& out) {
    if (s == "max") {
        out = kInfinity;
        return true;
    }
    return parse_u64(s, out);
}
}  // namespace

std::string UnitProp::text() const {
    if (bytes) {
        std::string s = name + "=0x";
        char b[3];
        for (uint8_t v : mask) {
            std::snprintf(b, sizeof b, "%02x", v);
            s += b;
        }
        return s;
    }
    return name + "=" + (num == kInfinity ? std::string("infinity") : std::to_string(num));
}

std::string UnitProp::line() const {
    std::string s = unit + "\t" + name + "\t" + (bytes ? "ay\t" : "t\t");
    if (!bytes) return s + std::to_string(num);
    char b[3];
    for (uint8_t v : mask) {
        std::snprintf(b, sizeof b, "%02x", v);
        s += b;
    }
    return s;
}

std::string systemd_unit_of(const std::string& dir) {
    std::string last = dir.substr(dir.rfind('/') == std::string::npos ? 0 : dir.rfind('/') + 1);
    auto ends = [&](const char* suf) {
        size_t n = std::strlen(suf);
        return last.size() > n && last.compare(last.size() - n, n, suf) == 0;
    };
    return ends(".scope") || ends(".slice") ? last : std::string();
}

std::optional<std::vector<uint8_t>> cpuset_to_mask(const std::string& list) {
    auto set = CpuSet::parse(list);
    if (!set || set->empty()) return std::nullopt;
    std::vector<uint8_t> out;
    for (unsigned id : set->ids()) {
        if (out.size() <= id / 8) out.resize(id / 8 + 1, 0);
        out[id / 8] |= static_cast<uint8_t>(1u << (id % 8));
    }
    return out;
}

uint64_t cpu_quota_per_sec_usec(int64_t quota, uint64_t period) {
    if (quota < 0) return kInfinity;
    if (period == 0) period = 100000;
    uint64_t v = static_cast<uint64_t>(quota) * 1000000ULL / period;
    if (v % 10000 != 0) v = (v / 10000 + 1) * 10000;
    return v;
}

std::vector<UnitProp> systemd_props_for(const std::string& file, const std::string& value, std::string& why) {
    std::vector<UnitProp> out;
    auto num = [&](const char* name, bool allow_max) {
        UnitProp p;
        p.name = name;
        if (!(allow_max ? parse_limit(value, p.num) : parse_u64(value, p.num))) {
            why = "value \"" + value.substr(0, 40) + "\" is not a number for " + name;
            return;
        }
        out.push_back(std::move(p));
    };
    if (file == "cpu.weight") num("CPUWeight", false);
    else if (file == "memory.max") num("MemoryMax", true);
    else if (file == "memory.high") num("MemoryHigh", true);
    else if (file == "memory.low") num("MemoryLow", true);
    else if (file == "memory.min") num("MemoryMin", true);
    else if (file == "memory.swap.max") num("MemorySwapMax", true);
    else if (file == "pids.max") num("TasksMax", true);
    else if (file == "cpu.max") {
        // "QUOTA PERIOD" or "max PERIOD" (fs2 cpu.max); runc sends the period first.
        size_t sp = value.find(' ');
        std::string q = value.substr(0, sp), per = sp == std::string::npos ? std::string() : value.substr(sp + 1);
        uint64_t quota = 0, period = 0;
        if ((q != "max" && !parse_u64(q, quota)) || (!per.empty() && !parse_u64(per, period)) || quota > INT64_MAX) {
            why = "cpu.max value \"" + value.substr(0, 40) + "\" is not \"QUOTA PERIOD\"";
            return out;
        }
        if (period) {
            UnitProp p;
            p.name = "CPUQuotaPeriodUSec";
            p.num = period;
            out.push_back(std::move(p));
        }
        UnitProp p;
        p.name = "CPUQuotaPerSecUSec";
        p.num = cpu_quota_per_sec_usec(q == "max" ? -1 : static_cast<int64_t>(quota), period);
        out.push_back(std::move(p));
    } else if (file == "io.weight") {
        std::string v = value.rfind("default ", 0) == 0 ? value.substr(8) : value;
        UnitProp p;
        p.name = "IOWeight";
        if (!parse_u64(v, p.num)) why = "io.weight value \"" + value.substr(0, 40) + "\" is not \"default N\"";
        else out.push_back(std::move(p));
    } else if (file == "cpuset.cpus" || file == "cpuset.mems") {
        const char* name = file == "cpuset.cpus" ? "AllowedCPUs" : "AllowedMemoryNodes";
        auto m = cpuset_to_mask(value);
        if (!m) {
            why = std::string(name) + ": \"" + value.substr(0, 40) + "\" is not a non-empty cpuset list";
            return out;
        }
        UnitProp p;
        p.name = name;
        p.bytes = true;
        p.mask = std::move(*m);
        out.push_back(std::move(p));
    } else {
        why = "systemd has no unit property for " + file + ": reconcile reapplies it after a daemon-reload";
    }
    return out;
}

std::vector<std::string> HelperSetter::set(const std::vector<UnitProp>& props) {
    const long t0 = monotonic_ns() / 1000;
    std::vector<std::string> out(props.size());
    auto fail_all = [&](const std::string& why) {
        for (auto& o : out) o = why;
        last_us = monotonic_ns() / 1000 - t0;
        return out;
    };
    std::string input;
    for (const auto& p : props) input += p.line() + "\n";
    int in[2], res[2];
    if (pipe2(in, O_CLOEXEC) != 0) return fail_all(std::string("pipe2: ") + std::strerror(errno));
    if (pipe2(res, O_CLOEXEC) != 0) {
        int e = errno;
        close(in[0]);
        close(in[1]);
        return fail_all(std::string("pipe2: ") + std::strerror(e));
    }
    const char* argv[] = {path_.c_str(), nullptr};
    const char* envp[] = {nullptr};
    // vfork: the child only moves two fds and execs (async-signal-safe calls on its own stack).
    pid_t pid = vfork();
    if (pid == 0) {
        if (dup3(in[0], 0, 0) < 0 || dup3(res[1], 1, 0) < 0) _exit(126);
        execve(argv[0], const_cast<char* const*>(argv), const_cast<char* const*>(envp));
        _exit(127);
    }
    const int spawn_err = errno;
    close(in[0]);
    close(res[1]);
    if (pid < 0) {
        close(in[1]);
        close(res[0]);
        return fail_all("cannot run " + path_ + ": vfork: " + std::strerror(spawn_err));
    }
    // The input is a few hundred bytes: it fits the pipe, no deadlock with the child's output.
    // A companion that is gone (execve failed, crashed) must give EPIPE, never kill the event
    // process with SIGPIPE: ignored while writing only (set after vfork, so the companion keeps
    // the default disposition across its execve), then restored.
    struct sigaction ign {
    }, old_pipe{};
    ign.sa_handler = SIG_IGN;
    sigemptyset(&ign.sa_mask);
    const bool restore = sigaction(SIGPIPE, &ign, &old_pipe) == 0;
    size_t off = 0;
    while (off < input.size()) {
        ssize_t n = write(in[1], input.data() + off, input.size() - off);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        off += static_cast<size_t>(n);
    }
    if (restore) sigaction(SIGPIPE, &old_pipe, nullptr);
    close(in[1]);
    std::string got;
    char buf[4096];
    for (;;) {
        ssize_t n = read(res[0], buf, sizeof buf);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        if (got.size() < 65536) got.append(buf, static_cast<size_t>(n));
    }
    close(res[0]);
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {}
    std::vector<std::string> lines;
    size_t pos = 0;
    while (pos < got.size()) {
        size_t nl = got.find('\n', pos);
        if (nl == std::string::npos) break;
        lines.push_back(got.substr(pos, nl - pos));
        pos = nl + 1;
    }
    if (lines.size() != props.size()) {
        std::string why = WIFEXITED(status) && WEXITSTATUS(status) == 127 ? "cannot run " + path_ + " (execve failed)"
                          : WIFEXITED(status) ? path_ + " answered " + std::to_string(lines.size()) + " of " + std::to_string(props.size()) +
                                                    " lines (exit " + std::to_string(WEXITSTATUS(status)) + ")"
                                              : path_ + " killed by signal " + std::to_string(WTERMSIG(status));
        return fail_all(why);
    }
    for (size_t i = 0; i < lines.size(); ++i) {
        if (lines[i] == "ok") out[i].clear();
        else if (lines[i].rfind("error ", 0) == 0) out[i] = lines[i].substr(6, 300);
        else out[i] = "unexpected answer from " + path_;
    }
    last_us = monotonic_ns() / 1000 - t0;
    return out;
}

std::string systemd_sink_off(const std::string& helper, const std::string& cgroup_root) {
    if (helper.empty()) return "--systemd-helper is empty: unit properties not set; reconcile reapplies after a daemon-reload";
    std::string root = cgroup_root;
    while (root.size() > 1 && root.back() == '/') root.pop_back();
    if (root != "/sys/fs/cgroup") return "cgroup root " + root + " is not /sys/fs/cgroup: systemd manages only the real hierarchy";
    struct stat st {};
    if (lstat("/run/systemd/system", &st) != 0 || !S_ISDIR(st.st_mode)) return "systemd is not the init system (no /run/systemd/system)";
    if (access(helper.c_str(), X_OK) != 0)
        return "cannot run " + helper + ": " + std::strerror(errno) + "; reconcile reapplies after a daemon-reload";
    return "";
}

std::string elf_interpreter(const std::string& path) {
    int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return "";
    Elf64_Ehdr eh{};
    std::string out;
    if (pread(fd, &eh, sizeof eh, 0) == static_cast<ssize_t>(sizeof eh) && std::memcmp(eh.e_ident, ELFMAG, SELFMAG) == 0 &&
        eh.e_ident[EI_CLASS] == ELFCLASS64 && eh.e_phentsize == sizeof(Elf64_Phdr) && eh.e_phnum < 256) {
        for (unsigned i = 0; i < eh.e_phnum; ++i) {
            Elf64_Phdr ph{};
            if (pread(fd, &ph, sizeof ph, static_cast<off_t>(eh.e_phoff + i * sizeof ph)) != static_cast<ssize_t>(sizeof ph)) break;
            if (ph.p_type != PT_INTERP || ph.p_filesz == 0 || ph.p_filesz > 4096) continue;
            std::string buf(ph.p_filesz, '\0');
            if (pread(fd, buf.data(), buf.size(), static_cast<off_t>(ph.p_offset)) == static_cast<ssize_t>(buf.size())) out = buf.c_str();
            break;
        }
    }
    close(fd);
    return out;
}

void set_systemd_properties(Plan& plan, const SystemdSink& sink, Kernel* kernel) {
    if (plan.driver != CgroupDriver::Systemd) return;
    std::vector<UnitProp> props;
    std::vector<std::string> assumed_of(plan.writes.size());
    for (size_t i = 0; i < plan.writes.size(); ++i) {
        Write& w = plan.writes[i];
        if (w.status != Write::Planned || w.root != Root::Cgroup) continue;
        if (plan.layout != Layout::V2) {
            w.systemd =
                "skipped: cgroup v1 on the systemd driver: unit properties not set (not implemented); reconcile reapplies after a daemon-reload";
            continue;
        }
        size_t slash = w.rel.rfind('/');
        const std::string dir = slash == std::string::npos ? std::string() : w.rel.substr(0, slash);
        const std::string file = w.rel.substr(slash == std::string::npos ? 0 : slash + 1);
        std::string why, value = w.value, assumed;
        if (file == "cpu.max" && value.find(' ') == std::string::npos) {
            // The quota alone: the period is the one in force (cpu.max "QUOTA PERIOD").
            std::optional<std::string> cur = kernel ? kernel->read(Root::Cgroup, dir + "/cpu.max") : std::nullopt;
            size_t sp = cur ? cur->find(' ') : std::string::npos;
            uint64_t period = 0;
            std::string per = sp == std::string::npos ? std::string() : cur->substr(sp + 1);
            while (!per.empty() && (per.back() == '\n' || per.back() == ' ')) per.pop_back();
            if (parse_u64(per, period) && period > 0) value += " " + per;
            else value += " 100000", assumed = " (period assumed 100000: " + dir + "/cpu.max unreadable)";
        }
        std::vector<UnitProp> ps = systemd_props_for(file, value, why);
        if (ps.empty()) {
            w.systemd = "skipped: " + why;
            continue;
        }
        const std::string unit = systemd_unit_of(dir);
        if (unit.empty()) {
            w.systemd = "skipped: cgroup " + dir + " is not a systemd unit (no .scope or .slice)";
            continue;
        }
        if (!sink.off.empty() || !sink.setter) {
            std::string t;
            for (const auto& p : ps) t += (t.empty() ? "" : " ") + p.text();
            w.systemd = "skipped: " + t + " on " + unit + ": " + (sink.off.empty() ? "no systemd setter" : sink.off);
            continue;
        }
        assumed_of[i] = assumed;
        for (auto& p : ps) {
            p.unit = unit;
            p.write = i;
            props.push_back(std::move(p));
        }
    }
    if (props.empty()) return;
    std::vector<std::string> res = sink.setter->set(props);
    res.resize(props.size(), "no answer");
    // One Write may stand for two properties (cpu.max): applied only when both were.
    std::vector<std::string> ok(plan.writes.size()), bad(plan.writes.size());
    for (size_t k = 0; k < props.size(); ++k) {
        const UnitProp& p = props[k];
        std::string& dst = res[k].empty() ? ok[p.write] : bad[p.write];
        dst += (dst.empty() ? "" : " ") + p.text();
        if (!res[k].empty()) dst += " (" + res[k] + ")";
    }
    for (size_t i = 0; i < plan.writes.size(); ++i) {
        if (ok[i].empty() && bad[i].empty()) continue;
        const std::string unit = systemd_unit_of(plan.writes[i].rel.substr(0, plan.writes[i].rel.rfind('/')));
        if (bad[i].empty()) plan.writes[i].systemd = "applied: " + ok[i] + " on " + unit + assumed_of[i];
        else plan.writes[i].systemd = "failed: " + bad[i] + " on " + unit + (ok[i].empty() ? "" : " (applied: " + ok[i] + ")");
    }
}

}  // namespace nriqos
