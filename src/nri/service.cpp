// The external relay as a service: reconnect with back-off, liveness on record. See service.hpp.
#include "nri/service.hpp"

#include "os/kernel.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <vector>

#include <nlohmann/json.hpp>

#include "nri/evaluator.hpp"
#include "records/record.hpp"
#include "os/clock.hpp"

namespace nriqos::nri {

namespace {

using nlohmann::json;

volatile sig_atomic_t g_stop = 0;
void on_stop(int) { g_stop = 1; }

// Write `text` to `path` atomically (a temporary file in the same directory, then rename).
void write_atomic(const std::string& path, const std::string& text) {
    if (path.empty()) return;
    if (path[0] == '/') nriqos::make_dirs(nriqos::dir_name(path), 0755);
    // A new temporary file: O_EXCL, never through a symlink (kernel.hpp create_temp; issue 19 §2).
    std::string tmp, why;
    int fd = nriqos::create_temp(-1, path, 0644, tmp, why);
    if (fd < 0) {
        static int warned = 0;
        if (warned++ == 0) logf("service: cannot write %s: %s", path.c_str(), why.c_str());
        return;
    }
    size_t off = 0;
    while (off < text.size()) {
        ssize_t n = write(fd, text.data() + off, text.size() - off);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        off += size_t(n);
    }
    bool ok = off == text.size() && close(fd) == 0;
    if (!ok || rename(tmp.c_str(), path.c_str()) != 0) unlink(tmp.c_str());
}

struct State {
    int64_t started = 0;
    pid_t relay_pid = 0;
    bool connected = false, registered = false;
    std::string runtime, runtime_version, nri_version;
    unsigned long reconnects = 0;
    int64_t connected_since = 0, last_sync = 0;
    int64_t synced_mono = 0;  ///< monotonic ms of this connection's last Synchronize reply (0: none yet)
    unsigned long unseen_passes = 0;  ///< unseen passes ended (ServiceOptions::unseen_argv)
    int64_t last_unseen_pass = 0;  ///< unix s of the last one's end, 0 none
    int last_unseen_status = 0;  ///< its exit status (128 + signal when killed)
};

void publish(const ServiceOptions& so, const RelayOptions& o, const State& s) {
    json j = {{"pid", int64_t(getpid())},
              {"started", s.started},
              {"relay_pid", int64_t(s.relay_pid)},
              {"connected", s.connected},
              {"registered", s.registered},
              {"runtime", s.runtime},
              {"runtime_version", s.runtime_version},
              {"nri_version", s.nri_version},
              {"reconnects", s.reconnects},
              {"connected_since", s.connected_since},
              {"last_sync", s.last_sync},
              {"socket", o.socket_path}};
    if (so.unseen_interval_ms > 0 && !so.unseen_argv.empty())
        j["unseen"] = {{"interval_s", so.unseen_interval_ms / 1000},
                       {"passes", s.unseen_passes},
                       {"last", s.last_unseen_pass},
                       {"last_status", s.last_unseen_status}};
    write_atomic(so.status_file, j.dump() + "\n");
    if (so.metrics_file.empty()) return;
    std::string m;
    m += "# HELP nri_qos_relay_up 1 while the external NRI relay is registered with the runtime.\n";
    m += "# TYPE nri_qos_relay_up gauge\n";
    m += "nri_qos_relay_up " + std::string(s.registered ? "1" : "0") + "\n";
    m +=
        "# HELP nri_qos_relay_reconnects_total Attempts to connect to the runtime after the first one (a runtime restart, a socket not there yet).\n";
    m += "# TYPE nri_qos_relay_reconnects_total counter\n";
    m += "nri_qos_relay_reconnects_total " + std::to_string(s.reconnects) + "\n";
    m += "# HELP nri_qos_relay_start_time_seconds Start time of the relay service (unix seconds).\n";
    m += "# TYPE nri_qos_relay_start_time_seconds gauge\n";
    m += "nri_qos_relay_start_time_seconds " + std::to_string(s.started) + "\n";
    m += "# HELP nri_qos_build_info The nri-qos build and the policy in force when the relay service started.\n";
    m += "# TYPE nri_qos_build_info gauge\n";
    m += "nri_qos_build_info{version=\"" + prom_label(so.version) + "\",policy_sha256=\"" + prom_label(so.policy_sha256) + "\"} 1\n";
    write_atomic(so.metrics_file, m);
}

// One line of the connected relay's status pipe (RelayOptions::status_fd).
void take_line(const std::string& line, State& s) {
    std::vector<std::string> f;
    std::istringstream in(line);
    std::string x;
    while (std::getline(in, x, '\t')) f.push_back(x);
    if (f.empty()) return;
    if (f[0] == "configured") {
        s.registered = true;
        s.runtime = f.size() > 1 ? f[1] : "";
        s.runtime_version = f.size() > 2 ? f[2] : "";
        s.nri_version = f.size() > 3 ? f[3] : "";
    } else if (f[0] == "synced") {
        s.last_sync = int64_t(::time(nullptr));
        s.synced_mono = nriqos::monotonic_ms();
    }
}

// ---- the unseen pass (ServiceOptions::unseen_argv): its own process, never waited for.
struct UnseenPass {
    pid_t pid = 0;
    int64_t started = 0;  ///< monotonic ms
    int64_t next_due = 0;  ///< monotonic ms of the next pass (0: after the next Synchronize)
    int64_t synced_seen = 0;
    unsigned long runs = 0;
};

// Reap a finished pass (WNOHANG); kill one past its timeout. Logs failures only. True when one
// ended (its count, time and status are in `s`).
bool unseen_reap(const ServiceOptions& so, State& s, UnseenPass& u) {
    if (u.pid <= 0) return false;
    int st = 0;
    pid_t w = waitpid(u.pid, &st, WNOHANG);
    if (w == 0) {
        if (nriqos::monotonic_ms() - u.started > so.unseen_timeout_ms) {
            logf("service: unseen pass %lu (pid %d) still runs after %d ms: killed", u.runs, int(u.pid), so.unseen_timeout_ms);
            kill(u.pid, SIGKILL);
            waitpid(u.pid, &st, 0);
            u.pid = 0;
            ++s.unseen_passes;
            s.last_unseen_pass = int64_t(::time(nullptr));
            s.last_unseen_status = 128 + SIGKILL;
            return true;
        }
        return false;
    }
    if (w != u.pid) return false;
    if (!(WIFEXITED(st) && WEXITSTATUS(st) == 0))
        logf("service: unseen pass %lu ended with %s %d after %lld ms", u.runs, WIFEXITED(st) ? "exit status" : "signal",
             WIFEXITED(st)     ? WEXITSTATUS(st)
             : WIFSIGNALED(st) ? WTERMSIG(st)
                               : 0,
             (long long)(nriqos::monotonic_ms() - u.started));
    u.pid = 0;
    ++s.unseen_passes;
    s.last_unseen_pass = int64_t(::time(nullptr));
    s.last_unseen_status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + (WIFSIGNALED(st) ? WTERMSIG(st) : 0);
    return true;
}

// One tick of the service loop: reap, then start a pass when one is due. Due: the relay is
// registered, its connection's Synchronize was answered, and the interval has passed since that
// reply (the first pass) or since the previous pass started. True when a pass ended (publish).
bool unseen_tick(const ServiceOptions& so, State& s, UnseenPass& u) {
    if (so.unseen_argv.empty() || so.unseen_interval_ms <= 0) return false;
    const bool ended = unseen_reap(so, s, u);
    if (!s.registered || s.synced_mono == 0) return ended;
    const int64_t now = nriqos::monotonic_ms();
    if (u.synced_seen != s.synced_mono) {  // a (new) Synchronize: the next pass one interval after it
        u.synced_seen = s.synced_mono;
        if (u.next_due == 0 || u.next_due > s.synced_mono + so.unseen_interval_ms) u.next_due = s.synced_mono + so.unseen_interval_ms;
    }
    if (u.pid > 0 || now < u.next_due) return ended;
    u.next_due = now + so.unseen_interval_ms;
    pid_t pid = fork();
    if (pid < 0) {
        logf("service: unseen pass: fork: %s", strerror(errno));
        return ended;
    }
    if (pid == 0) {
        signal(SIGTERM, SIG_DFL);
        signal(SIGINT, SIG_DFL);
        prctl(PR_SET_PDEATHSIG, SIGKILL);  // the service gone: so is its pass
        int null = open("/dev/null", O_RDONLY | O_CLOEXEC);
        if (null >= 0) dup2(null, STDIN_FILENO);
        dup2(STDERR_FILENO, STDOUT_FILENO);
        std::vector<char*> argv;
        for (const auto& a : so.unseen_argv) argv.push_back(const_cast<char*>(a.c_str()));
        argv.push_back(nullptr);
        execv(argv[0], argv.data());
        dprintf(STDERR_FILENO, "service: unseen pass: cannot run %s: %s\n", argv[0], strerror(errno));
        _exit(127);
    }
    u.pid = pid;
    u.started = now;
    ++u.runs;
    return ended;
}

// At the service's stop: a pass still running is ended (SIGTERM, then reaped).
void unseen_stop(UnseenPass& u) {
    if (u.pid <= 0) return;
    kill(u.pid, SIGTERM);
    int st;
    waitpid(u.pid, &st, 0);
    u.pid = 0;
}

// Sleep `ms`, waking early on SIGTERM/SIGINT.
void nap(int ms) {
    int64_t end = nriqos::monotonic_ms() + ms;
    while (!g_stop) {
        int64_t left = end - nriqos::monotonic_ms();
        if (left <= 0) break;
        poll(nullptr, 0, int(std::min<int64_t>(left, 200)));
    }
}

}  // namespace

pid_t start_metrics_server(const ServiceOptions& so, const std::string& status_file, std::string& why) {
    std::vector<std::string> args = {so.metrics_server, "--listen",       so.metrics_listen, "--version", so.version,
                                     "--policy-sha256", so.policy_sha256, "--ready-fd",      "3"};
    if (!so.events_metrics_file.empty()) args.insert(args.end(), {"--metrics-file", so.events_metrics_file});
    if (!status_file.empty()) args.insert(args.end(), {"--status-file", status_file});
    int rp[2];
    if (pipe2(rp, O_CLOEXEC) != 0) {
        why = std::string("pipe: ") + strerror(errno);
        return -1;
    }
    pid_t pid = fork();
    if (pid < 0) {
        why = std::string("fork: ") + strerror(errno);
        close(rp[0]);
        close(rp[1]);
        return -1;
    }
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGTERM);  // the service gone: so is its metrics server
        signal(SIGTERM, SIG_DFL);
        signal(SIGINT, SIG_DFL);
        signal(SIGPIPE, SIG_DFL);
        if (dup2(rp[1], 3) < 0) _exit(127);  // --ready-fd 3 (dup2 clears close-on-exec)
        std::vector<char*> argv;
        for (auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
        argv.push_back(nullptr);
        execv(argv[0], argv.data());
        std::string e = "cannot run " + so.metrics_server + ": " + strerror(errno) + "\n";
        ssize_t n = write(3, e.data(), e.size());
        (void)n;
        _exit(127);
    }
    close(rp[1]);
    std::string line;
    for (int64_t end = nriqos::monotonic_ms() + 5000; line.find('\n') == std::string::npos;) {
        int64_t left = end - nriqos::monotonic_ms();
        struct pollfd p = {rp[0], POLLIN, 0};
        if (left <= 0 || poll(&p, 1, int(left)) <= 0) break;
        char b[256];
        ssize_t n = read(rp[0], b, sizeof b);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        line.append(b, size_t(n));
    }
    close(rp[0]);
    if (line == "ok\n") return pid;
    why = line.empty() ? "the metrics server " + so.metrics_server + " did not start within 5 s" : line.substr(0, line.find('\n'));
    kill(pid, SIGKILL);
    waitpid(pid, nullptr, 0);
    return -1;
}

int run_relay_service(RelayOptions opts, const ServiceOptions& so) {
    struct sigaction sa {};
    sa.sa_handler = on_stop;
    sigaction(SIGTERM, &sa, nullptr);
    sigaction(SIGINT, &sa, nullptr);
    signal(SIGPIPE, SIG_IGN);
    State s;
    s.started = int64_t(::time(nullptr));
    int backoff = so.backoff_min_ms;
    bool first = true;
    UnseenPass unseen;
    if (!so.unseen_argv.empty() && so.unseen_interval_ms > 0)
        logf("service: unseen pass every %d ms after each Synchronize (%s ...)", so.unseen_interval_ms,
             so.unseen_argv.size() > 2 ? (so.unseen_argv[1] + " " + so.unseen_argv[2]).c_str() : so.unseen_argv[0].c_str());
    else logf("service: no unseen pass (--unseen-interval 0): a container the runtime creates during a Synchronize stays unclassified");
    publish(so, opts, s);
    // The metrics server: started before any relay process exists (none inherits its socket),
    // started again when it dies (checked with each poll of the relay's status pipe).
    pid_t metrics_pid = -1;
    int64_t metrics_retry_at = 0;
    if (!so.metrics_listen.empty()) {
        std::string why;
        metrics_pid = start_metrics_server(so, so.status_file, why);
        if (metrics_pid < 0) {
            logf("service: metrics on %s: %s", so.metrics_listen.c_str(), why.c_str());
            return 2;
        }
        logf("service: metrics on http://%s/metrics (pid %d)", so.metrics_listen.c_str(), int(metrics_pid));
    }
    auto keep_metrics = [&]() {
        if (so.metrics_listen.empty()) return;
        if (metrics_pid > 0) {
            int ws = 0;
            if (waitpid(metrics_pid, &ws, WNOHANG) != metrics_pid) return;
            logf("service: the metrics server (pid %d) ended (%s %d); starting it again", int(metrics_pid),
                 WIFSIGNALED(ws) ? "signal" : "exit status", WIFSIGNALED(ws) ? WTERMSIG(ws) : WEXITSTATUS(ws));
            metrics_pid = -1;
        }
        if (nriqos::monotonic_ms() < metrics_retry_at) return;
        std::string why;
        metrics_pid = start_metrics_server(so, so.status_file, why);
        if (metrics_pid < 0) {
            logf("service: metrics on %s: %s (next attempt in 5 s)", so.metrics_listen.c_str(), why.c_str());
            metrics_retry_at = nriqos::monotonic_ms() + 5000;
        }
    };
    while (!g_stop) {
        int sp[2];
        if (pipe2(sp, O_CLOEXEC) != 0) {
            logf("service: pipe: %s", strerror(errno));
            nap(backoff);
            continue;
        }
        if (!first) {
            ++s.reconnects;
            logf("service: connecting to %s again (reconnect %lu)", opts.socket_path.c_str(), s.reconnects);
        }
        first = false;
        int64_t t0 = nriqos::monotonic_ms();
        pid_t pid = fork();
        if (pid < 0) {
            logf("service: fork: %s", strerror(errno));
            close(sp[0]);
            close(sp[1]);
            nap(backoff);
            continue;
        }
        if (pid == 0) {
            close(sp[0]);
            signal(SIGTERM, SIG_DFL);
            signal(SIGINT, SIG_DFL);
            prctl(PR_SET_PDEATHSIG, SIGTERM);  // the service gone (killed): so is its relay
            fcntl(sp[1], F_SETFL, O_NONBLOCK);  // a full pipe loses a line, never blocks the relay
            opts.status_fd = sp[1];
            _exit(run_relay(opts));
        }
        close(sp[1]);
        s.relay_pid = pid;
        s.connected = true;
        s.registered = false;
        s.connected_since = int64_t(::time(nullptr));
        publish(so, opts, s);
        std::string buf;
        int status = 0;
        bool reaped = false, forwarded = false;
        while (!reaped) {
            if (g_stop && !forwarded) {
                kill(pid, SIGTERM);
                forwarded = true;
            }
            struct pollfd p = {sp[0], POLLIN, 0};
            int r = poll(&p, sp[0] >= 0 ? 1 : 0, 200);
            if (r > 0 && sp[0] >= 0) {
                char tmp[512];
                ssize_t n = read(sp[0], tmp, sizeof tmp);
                if (n > 0) {
                    buf.append(tmp, size_t(n));
                    size_t nl;
                    bool changed = false;
                    while ((nl = buf.find('\n')) != std::string::npos) {
                        take_line(buf.substr(0, nl), s);
                        buf.erase(0, nl + 1);
                        changed = true;
                    }
                    if (buf.size() > 4096) buf.clear();
                    if (changed) publish(so, opts, s);
                } else if (n == 0 || (errno != EINTR && errno != EAGAIN)) {
                    close(sp[0]);
                    sp[0] = -1;
                }
            }
            pid_t w = waitpid(pid, &status, WNOHANG);
            if (w == pid) reaped = true;
            keep_metrics();
            if (!g_stop && unseen_tick(so, s, unseen)) publish(so, opts, s);
        }
        if (sp[0] >= 0) close(sp[0]);
        const int64_t lasted = nriqos::monotonic_ms() - t0;
        s.relay_pid = 0;
        s.connected = s.registered = false;
        s.connected_since = 0;
        s.synced_mono = 0;
        unseen.next_due = 0;  // the next connection: one interval after its own Synchronize
        unseen_reap(so, s, unseen);
        publish(so, opts, s);
        if (g_stop) break;
        if (lasted >= so.stable_after_ms) backoff = so.backoff_min_ms;
        std::string how = WIFEXITED(status) ? "exit status " + std::to_string(WEXITSTATUS(status))
                                            : "signal " + std::to_string(WIFSIGNALED(status) ? WTERMSIG(status) : 0);
        logf("service: connection to %s ended after %lld ms (%s); next attempt in %d ms", opts.socket_path.c_str(), (long long)lasted, how.c_str(),
             backoff);
        nap(backoff);
        backoff = std::min(backoff * 2, so.backoff_max_ms);
    }
    if (metrics_pid > 0) {
        kill(metrics_pid, SIGTERM);
        waitpid(metrics_pid, nullptr, 0);
    }
    unseen_stop(unseen);
    logf("service: stopping");
    return 0;
}

}  // namespace nriqos::nri
