// Evaluator supervision of the native NRI relay, see evaluator.hpp: one evaluation at a time
// (start, feed, deadline, outcome), the evaluators that answered and still write their records,
// and the reaping of every child. Where fork mode's evaluators come from (spares, zygote, keeper)
// is in evaluator_spares.cpp (evaluator_internal.hpp); what runs inside the evaluation processes
// (spare, zygote, keeper, recorder) is in evaluator_procs.cpp.
#include "nri/evaluator.hpp"

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstring>

#include "nri/evaluator_internal.hpp"
#include "nri/evaluator_procs.hpp"
#include "event/pipeline.hpp"
#include "records/record.hpp"
#include "os/clock.hpp"

extern char** environ;

namespace nriqos::nri {

void logf(const char* fmt, ...) {
    char buf[1024];
    // Every line starts with an RFC 3339 UTC timestamp: the relay's log is a file of its own
    // (containerd gives launched plugins no stderr), not a journal that stamps lines for us.
    int n = snprintf(buf, sizeof buf, "%s nri-qos relay[%d]: ", nriqos::rfc3339_utc(0).c_str(), int(getpid()));
    va_list ap;
    va_start(ap, fmt);
    int m = vsnprintf(buf + n, sizeof buf - size_t(n) - 1, fmt, ap);
    va_end(ap);
    size_t len = size_t(n) + (m < 0 ? 0 : std::min<size_t>(size_t(m), sizeof buf - size_t(n) - 2));
    buf[len++] = '\n';
    ssize_t w = write(2, buf, len);
    (void)w;
}

namespace {

using procs::describe_status;
using procs::kHeaderSize;
using procs::kMagic;

// A zygote that does not answer a request within this time is replaced.
constexpr int64_t kZygoteAnswerMs = 1000;
int g_sigchld_pipe[2] = {-1, -1};

void on_sigchld(int) {
    int saved = errno;
    char c = 0;
    ssize_t w = write(g_sigchld_pipe[1], &c, 1);
    (void)w;
    errno = saved;
}

// The answer is one JSON object: once stdout is closed and its last non-blank byte is '}', the
// answer is complete and the exit is not waited for: the evaluator delivers its answer before it
// writes the event's records (pipeline.hpp Options::deliver) and finishes them while the relay
// replies and the next event runs (Supervisor finishing_, until the event's deadline). Anything
// else waits for the exit status, to say why.
bool looks_complete(const std::string& s) {
    size_t i = s.find_last_not_of(" \t\r\n");
    return i != std::string::npos && s[i] == '}';
}

// An output of several answer lines is complete once its last line starts with `end_line`.
bool ends_with_line(const std::string& s, const std::string& end_line) {
    size_t i = s.find_last_not_of(" \t\r\n");
    if (i == std::string::npos) return false;
    size_t b = s.rfind('\n', i);
    b = b == std::string::npos ? 0 : b + 1;
    return s.compare(b, end_line.size(), end_line) == 0;
}

}  // namespace

// Our ends of the pipes and sockets: non-blocking (F_SETFL keeps the access mode; the fds are
// fresh, with no other status flag to keep).
void set_nonblock(int fd) { fcntl(fd, F_SETFL, O_NONBLOCK); }

Supervisor::Supervisor(SupervisorOptions o) : o_(std::move(o)) {}

Supervisor::~Supervisor() { stop_all(); }

void Supervisor::setup() {
    if (g_sigchld_pipe[0] < 0 && pipe2(g_sigchld_pipe, O_CLOEXEC | O_NONBLOCK) == 0) {
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = on_sigchld;
        sa.sa_flags = SA_RESTART | SA_NOCLDSTOP;
        sigemptyset(&sa.sa_mask);
        sigaction(SIGCHLD, &sa, nullptr);
    }
    // Exec'd children: our environment minus the trunk fd number (the fd itself is close-on-exec).
    env_store_.clear();
    envp_.clear();
    for (char** e = environ; e && *e; ++e) {
        if (strncmp(*e, "NRI_PLUGIN_SOCKET=", 18) != 0) env_store_.emplace_back(*e);
    }
    for (auto& s : env_store_) envp_.push_back(&s[0]);
    envp_.push_back(nullptr);
}

bool Supervisor::can_evaluate() const { return fork_mode() || !o_.child_argv.empty(); }

void Supervisor::close_fds(Proc& p) {
    if (p.in_fd >= 0) close(p.in_fd);
    if (p.out_fd >= 0) close(p.out_fd);
    p.in_fd = p.out_fd = -1;
}

void Supervisor::kill_group(pid_t pid) {
    // Only called while `pid` is not reaped yet, so the id cannot have been reused.
    if (kill(-pid, SIGKILL) != 0) kill(pid, SIGKILL);
}

void Supervisor::retire(Proc& p) {
    close_fds(p);
    if (p.pid > 0) {
        kill_group(p.pid);
        stragglers_.push_back(p.pid);
    }
    p = Proc();
}

bool Supervisor::spawn_exec(int64_t deadline_ms, Proc& p) {
    int in_p[2], out_p[2];
    if (pipe2(in_p, O_CLOEXEC) != 0) return false;
    if (pipe2(out_p, O_CLOEXEC) != 0) {
        int e = errno;
        close(in_p[0]);
        close(in_p[1]);
        errno = e;
        return false;
    }
    int64_t own = std::max<int64_t>(deadline_ms - nriqos::monotonic_ms() - kChildMarginMs, 10);
    std::vector<std::string> args = o_.child_argv;
    args.insert(args.end(), flags_.begin(), flags_.end());
    if (!o_.deadline_flag.empty()) {
        args.push_back(o_.deadline_flag);
        args.push_back(std::to_string(own));
    }
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(&a[0]);
    argv.push_back(nullptr);

    posix_spawn_file_actions_t fa;
    posix_spawnattr_t at;
    posix_spawn_file_actions_init(&fa);
    posix_spawnattr_init(&at);
    posix_spawn_file_actions_adddup2(&fa, in_p[0], 0);
    posix_spawn_file_actions_adddup2(&fa, out_p[1], 1);
    sigset_t none, def;
    sigemptyset(&none);
    sigemptyset(&def);
    sigaddset(&def, SIGPIPE);
    sigaddset(&def, SIGCHLD);
    posix_spawnattr_setsigmask(&at, &none);
    posix_spawnattr_setsigdefault(&at, &def);
    posix_spawnattr_setpgroup(&at, 0);  // own process group: the deadline kills all of it
    posix_spawnattr_setflags(&at, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETPGROUP);
    pid_t pid = -1;
    int rc = posix_spawn(&pid, argv[0], &fa, &at, argv.data(), envp_.data());
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&at);
    close(in_p[0]);
    close(out_p[1]);
    if (rc != 0) {
        close(in_p[1]);
        close(out_p[0]);
        errno = rc;
        return false;
    }
    ++started_;
    p.pid = pid;
    p.in_fd = in_p[1];
    p.out_fd = out_p[0];
    set_nonblock(p.in_fd);
    set_nonblock(p.out_fd);
    return true;
}

bool Supervisor::ready_to_start() const {
    // kMaxFinishing evaluators still write their records: the next event waits for one of them to
    // end (SIGCHLD wakes the loop), at most kFinishingWaitMs after the oldest answered; start()
    // then kills the oldest.
    if (finishing_.size() >= kMaxFinishing && nriqos::monotonic_ms() < finishing_.front().answered_ms + kFinishingWaitMs) return false;
    // The resident evaluator writes its last event's records (about a millisecond): the next event
    // waits for its done line (at most until that event's deadline, then it is killed).
    if (res_fin_active_) return false;
    if (res_.pid > 0 && ev_events_ > 1) return true;
    if (!fork_mode() || !spares_.empty()) return true;
    if (!zyg_pending_.empty() || keeper_asked_) return false;  // on its way
    // Confined: only the zygote can make one (ensure_spare asks it); without zygote and keeper,
    // start() says so. Unconfined: start() forks one itself.
    return !confined_ || (zyg_pid_ <= 0 && keeper_pid_ <= 0);
}

bool Supervisor::start(const std::string& input, int64_t deadline_ms, std::string& err, size_t max_output, const std::string& end_line) {
    if (active_) {
        err = "an evaluation is already running";
        return false;
    }
    if (chld_) reap_others();  // a spare that died while idle is noticed here, not used
    if (finishing_.size() >= kMaxFinishing) {  // the oldest (the likeliest to hang) makes room
        int64_t now = nriqos::monotonic_ms();
        const Finishing& o = finishing_.front();
        kill_group(o.pid);
        stragglers_.push_back(o.pid);
        AfterAnswer a;
        a.id = o.id;
        a.kind = "records-cut";
        a.reason = "killed " + std::to_string(now - o.answered_ms) +
                   " ms after its answer while still writing the event's records: " + std::to_string(kMaxFinishing) +
                   " evaluators were finishing theirs when the next event started";
        a.took_ms = now - o.started_ms;
        after_.push_back(std::move(a));
        finishing_.erase(finishing_.begin());
    }
    Proc p;
    input_.clear();
    const bool resident = resident_wanted(end_line);
    if (res_.pid > 0 && resident && res_fin_active_) {  // never expected: ready_to_start waits for it
        resident_after("records-cut", "still writing the event's records when the next event started (killed)");
        retire_resident(nullptr);
    }
    if (res_.pid > 0 && !res_fin_active_ && (!resident || res_.gen != flags_gen_ || res_served_ >= ev_events_))
        retire_resident(nullptr);  // another mode, other flags, or served its share
    bool reused = false;
    if (fork_mode()) {
        while (!spares_.empty() && spares_.front().gen != flags_gen_) {
            retire(spares_.front());
            spares_.pop_front();
        }
        if (resident && res_.pid > 0 && !res_fin_active_) {
            p = res_;
            res_ = Proc();
            reused = true;
        } else if (!spares_.empty()) {
            p = spares_.front();
            spares_.pop_front();
        } else if (confined_) {
            err = zyg_pid_ > 0 || keeper_pid_ > 0 ? "no evaluator ready (the zygote is being replaced)"
                                                  : "no evaluator ready: the keeper, its reserve and the zygote are gone (the relay must restart)";
            return false;
        } else if (!fork_spare(p)) {
            err = std::string("cannot fork an evaluator: ") + strerror(errno);
            return false;
        }
        int64_t own = std::max<int64_t>(deadline_ms - nriqos::monotonic_ms() - kChildMarginMs, 10);
        uint32_t budget = uint32_t(std::min<int64_t>(own, 1 << 30));
        char hdr[kHeaderSize] = {0};
        memcpy(hdr, resident ? procs::kMagicResident : kMagic, sizeof kMagic);
        memcpy(hdr + 4, &budget, sizeof budget);
        if (resident) {
            uint32_t len = uint32_t(input.size());
            memcpy(hdr + 8, &len, sizeof len);
            if (!reused) {
                res_served_ = 0;
                ++residents_;
            }
            ++res_served_;
            ++resident_served_total_;
        }
        input_.reserve(kHeaderSize + input.size());
        input_.append(hdr, sizeof hdr);
        input_ += input;
    } else {
        if (o_.child_argv.empty()) {
            err = "no evaluation command configured";
            return false;
        }
        if (!spawn_exec(deadline_ms, p)) {
            err = "cannot start " + o_.child_argv[0] + ": " + strerror(errno);
            return false;
        }
        input_ = input;
    }
    run_ = p;
    run_resident_ = resident;
    run_max_output_ = max_output ? max_output : o_.max_output;
    run_end_line_ = end_line;
    active_ = true;
    ++run_id_;
    in_off_ = 0;
    output_.clear();
    out_eof_ = overflow_ = reaped_ = false;
    status_ = 0;
    deadline_ms_ = deadline_ms;
    started_ms_ = nriqos::monotonic_ms();
    io(POLLOUT, 0);  // start feeding stdin right away
    return true;
}

int Supervisor::add_pollfds(struct pollfd* pfd) {
    int n = 0;
    pfd_sig_ = pfd_zyg_ = pfd_in_ = pfd_out_ = -1;
    if (g_sigchld_pipe[0] >= 0) {
        pfd_sig_ = n;
        pfd[n++] = {g_sigchld_pipe[0], POLLIN, 0};
    }
    if (zyg_ctl_ >= 0) {
        pfd_zyg_ = n;
        pfd[n++] = {zyg_ctl_, POLLIN, 0};
    }
    pfd_keeper_ = -1;
    if (keeper_ctl_ >= 0) {
        pfd_keeper_ = n;
        pfd[n++] = {keeper_ctl_, POLLIN, 0};
    }
    pfd_res_ = -1;
    if (res_.pid > 0 && res_.out_fd >= 0) {  // its done line, or anything unexpected while idle
        pfd_res_ = n;
        pfd[n++] = {res_.out_fd, POLLIN, 0};
    }
    if (active_ && run_.in_fd >= 0 && in_off_ < input_.size()) {  // a resident's stdin stays open
        pfd_in_ = n;
        pfd[n++] = {run_.in_fd, POLLOUT, 0};
    }
    if (active_ && run_.out_fd >= 0) {
        pfd_out_ = n;
        pfd[n++] = {run_.out_fd, POLLIN, 0};
    }
    return n;
}

int Supervisor::poll_timeout(int64_t now) const {
    int t = -1;
    auto at_most = [&t](int64_t ms) { t = t < 0 ? int(std::max<int64_t>(ms, 0)) : std::min<int>(t, int(std::max<int64_t>(ms, 0))); };
    if (active_) {
        at_most(deadline_ms_ - now);
        if (out_eof_) at_most(20);  // output ended, exit not seen yet: SIGCHLD wakes us; backstop
    }
    if (!stragglers_.empty()) at_most(200);
    for (const auto& f : finishing_) at_most(f.deadline_ms - now);  // killed there if still writing
    if (finishing_.size() >= kMaxFinishing && finishing_.front().answered_ms + kFinishingWaitMs > now)
        at_most(finishing_.front().answered_ms + kFinishingWaitMs - now);  // a waiting event starts then
    if (!zyg_pending_.empty()) at_most(zyg_asked_ms_ + kZygoteAnswerMs - now);
    if (res_fin_active_) at_most(res_fin_.deadline_ms - now);
    if (!spares_.empty() || zyg_pid_ > 0) at_most(1000);  // notice an idle process that died
    if (fork_mode() && zyg_pid_ <= 0 && zyg_backoff_until_ > now) at_most(zyg_backoff_until_ - now);
    return t;
}

void Supervisor::io(short in_rev, short out_rev) {
    if (run_.in_fd >= 0 && (in_rev & (POLLOUT | POLLERR | POLLHUP))) {
        while (in_off_ < input_.size()) {
            ssize_t n = write(run_.in_fd, input_.data() + in_off_, input_.size() - in_off_);
            if (n > 0) {
                in_off_ += size_t(n);
            } else if (n < 0 && errno == EINTR) {
                continue;
            } else {
                if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
                in_off_ = input_.size();  // EPIPE: the child does not read stdin; fine
            }
        }
        if (in_off_ >= input_.size()) {
            if (!run_resident_) {  // the one-shot evaluator reads until EOF
                close(run_.in_fd);
                run_.in_fd = -1;
            }
            std::string().swap(input_);
        }
    }
    if (run_.out_fd >= 0 && (out_rev & (POLLIN | POLLERR | POLLHUP))) {
        char buf[8192];
        for (;;) {
            ssize_t n = read(run_.out_fd, buf, sizeof buf);
            if (n > 0) {
                if (output_.size() + size_t(n) > run_max_output_) {
                    overflow_ = true;
                    out_eof_ = true;
                    close(run_.out_fd);
                    run_.out_fd = -1;
                    kill_group(run_.pid);
                    break;
                }
                output_.append(buf, size_t(n));
                continue;
            }
            if (n < 0 && errno == EINTR) continue;
            if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
            out_eof_ = true;  // EOF or error
            close(run_.out_fd);
            run_.out_fd = -1;
            break;
        }
    }
    if (!reaped_ && (child_changed_ || out_eof_)) {
        siginfo_t si;
        memset(&si, 0, sizeof si);
        if (waitid(P_PID, id_t(run_.pid), &si, WEXITED | WNOHANG | WNOWAIT) == 0 && si.si_pid == run_.pid) {
            // Exited: sweep leftovers of its process group (they may hold stdout open), then reap.
            kill(-run_.pid, SIGKILL);
            int st = 0;
            if (waitpid(run_.pid, &st, 0) == run_.pid) {
                reaped_ = true;
                status_ = st;
            }
        }
    }
}

Outcome Supervisor::end(const std::string& failure, const std::string& kind, bool keep) {
    roots_check_ = true;  // its policy may have moved the record paths (ensure_spare)
    Outcome out;
    int64_t now = nriqos::monotonic_ms();
    out.took_ms = now - started_ms_;
    out.failure = failure;
    out.kind = failure.empty() ? std::string() : kind;
    out.id = run_id_;
    out.resident = run_resident_;
    out.output.swap(output_);
    if (run_.pid <= 0) {
        // Handed over (a resident evaluator that answered: res_ now): nothing to keep or kill here.
    } else if (!reaped_ && keep) {
        // Answered: it writes the event's records now; tracked until it exits or its deadline (at
        // most kMaxFinishing: start() made room before this evaluation began).
        Finishing f;
        f.pid = run_.pid;
        f.id = run_id_;
        f.started_ms = started_ms_;
        f.answered_ms = now;
        f.deadline_ms = deadline_ms_;
        finishing_.push_back(f);
        out.after_answer = true;
    } else if (!reaped_) {  // deadline, bad output or shutdown: kill, reap later
        kill_group(run_.pid);
        int st = 0;
        if (waitpid(run_.pid, &st, WNOHANG) != run_.pid) stragglers_.push_back(run_.pid);
    }
    close_fds(run_);
    run_ = Proc();
    run_resident_ = false;
    std::string().swap(input_);
    active_ = false;
    return out;
}

bool Supervisor::resident_wanted(const std::string& end_line) const {
    return fork_mode() && o_.inproc.evaluate_resident && ev_events_ > 1 && end_line.empty();
}

void Supervisor::set_evaluator_events(uint32_t n) {
    if (n < 1) return;  // unknown: keep what we know
    if (n != ev_events_) logf("evaluator_events %u (was %u): %s", n, ev_events_, n > 1 ? "resident evaluators" : "one evaluator per event");
    ev_events_ = n;
}

// The resident's report on the event it answered last (res_fin_), once: as a finishing
// evaluator's (AfterAnswer; kind "" = records written).
void Supervisor::resident_after(const std::string& kind, const std::string& reason) {
    if (!res_fin_active_) return;
    AfterAnswer a;
    a.id = res_fin_.id;
    a.kind = kind;
    a.reason = reason;
    a.took_ms = nriqos::monotonic_ms() - res_fin_.started_ms;
    after_.push_back(std::move(a));
    res_fin_active_ = false;
}

void Supervisor::retire_resident(const char* why) {
    if (res_.pid <= 0) return;
    if (why) logf("resident evaluator %d (%u events served) ended: %s", int(res_.pid), res_served_, why);
    retire(res_);  // closes its stdin and stdout, kills its group, reaped as a straggler
    res_buf_.clear();
    res_served_ = 0;
}

void Supervisor::resident_io(short rev) {
    if (res_.pid <= 0) return;
    bool eof = res_.out_fd < 0;
    if (!eof && (rev & (POLLIN | POLLERR | POLLHUP))) {
        char buf[512];
        for (;;) {
            ssize_t n = read(res_.out_fd, buf, sizeof buf);
            if (n > 0) {
                res_buf_.append(buf, size_t(n));
                if (res_buf_.size() > 4096) break;  // no done line is that long: unexpected, below
                continue;
            }
            if (n < 0 && errno == EINTR) continue;
            if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
            eof = true;
            break;
        }
    }
    if (!res_fin_active_) {  // between events it writes nothing and does not exit
        if (!res_buf_.empty() || eof) retire_resident(eof ? "ended between its events" : "wrote between its events");
        return;
    }
    const size_t dl = sizeof procs::kResidentDone - 1;
    const size_t nl = res_buf_.find('\n');
    if (nl != std::string::npos) {
        unsigned rc = 0, n = 0;
        char tail = 0;
        const bool ok = res_buf_.compare(0, dl, procs::kResidentDone) == 0 && nl + 1 == res_buf_.size() &&
                        sscanf(res_buf_.c_str() + dl, "%u %u%c", &rc, &n, &tail) == 3 && tail == '\n';
        if (!ok) {
            resident_after("died-after-answer", "resident evaluator wrote \"" + res_buf_.substr(0, std::min<size_t>(nl, 80)) +
                                                    "\" after its answer instead of its done line; the event's records may be incomplete (ended)");
            retire_resident("unexpected output after its answer");
            return;
        }
        res_buf_.clear();
        if (rc == 0) {
            resident_after("", "");
        } else if (rc == unsigned(nriqos::kExitRecordsCut)) {
            resident_after("records-cut",
                           "the evaluator's own deadline cut the event's records after its answer (status " + std::to_string(rc) + ")");
        } else {
            resident_after("died-after-answer",
                           "resident evaluator ended with status " + std::to_string(rc) + " after its answer; the event's records may be incomplete");
        }
        if (n >= 1 && n <= 1000000) set_evaluator_events(n);
        spare_deaths_ = zyg_deaths_ = 0;
        if (rc != 0) retire_resident("a non-zero status after its answer");
        else if (res_served_ >= ev_events_) retire_resident(o_.debug ? "served its share of events" : nullptr);
        return;
    }
    if (eof || res_buf_.size() > 4096) {
        // Ended (or babbling) before its done line: how, from its exit status when it is already known.
        int st = 0;
        pid_t r = eof ? waitpid(res_.pid, &st, WNOHANG) : 0;
        for (int i = 0; eof && r == 0 && i < 20; ++i) {  // its stdout closes a moment before it is a zombie
            usleep(500);
            r = waitpid(res_.pid, &st, WNOHANG);
        }
        if (r == res_.pid) {
            kill(-res_.pid, SIGKILL);  // leftovers of its group
            res_.pid = -1;  // reaped: retire() must not kill or wait for it
            close_fds(res_);
        }
        if (r > 0 && WIFEXITED(st) && WEXITSTATUS(st) == nriqos::kExitRecordsCut) {
            resident_after("records-cut", "the evaluator's own deadline cut the event's records after its answer (exit status " +
                                              std::to_string(nriqos::kExitRecordsCut) + ")");
        } else {
            resident_after("died-after-answer", "resident evaluator " +
                                                    (r > 0 ? describe_status(st) : std::string(eof ? "closed its output" : "wrote too much")) +
                                                    " after its answer; the event's records may be incomplete");
        }
        if (res_.pid > 0) retire_resident("ended before its done line");
        else {
            res_ = Proc();
            res_buf_.clear();
            res_served_ = 0;
        }
    }
}

bool Supervisor::finish_if_done(Outcome& out) {
    if (run_resident_ && !overflow_) {
        // A resident's answer ends with the line kResidentAnswered; it lives on and writes the
        // event's records, then its done line (resident_io). Without that line the answer is
        // complete only at EOF, as a one-shot evaluator's (its own deadline answered and it exited).
        const std::string mark = std::string("\n") + procs::kResidentAnswered;
        size_t at = output_.find(mark);
        if (at != std::string::npos) {
            res_buf_ = output_.substr(at + mark.size());
            output_.resize(at + 1);
            res_ = run_;
            run_ = Proc();
            res_fin_active_ = true;
            res_fin_.pid = res_.pid;
            res_fin_.id = run_id_;
            res_fin_.started_ms = started_ms_;
            res_fin_.answered_ms = nriqos::monotonic_ms();
            res_fin_.deadline_ms = deadline_ms_;
            if (reaped_) {  // never expected: it exited right after its answer; told as a finishing one
                res_.pid = -1;
            }
            out = end("", "", false);
            out.after_answer = true;
            spare_deaths_ = zyg_deaths_ = 0;
            if (res_.pid <= 0) {
                // Already exited (and reaped): after its done line (status as it said, or a policy that
                // went back to 1), or without one. Its exit status tells how its records ended.
                unsigned rc = 0, n = 0;
                const size_t dl = sizeof procs::kResidentDone - 1;
                if (res_buf_.compare(0, dl, procs::kResidentDone) == 0 && sscanf(res_buf_.c_str() + dl, "%u %u", &rc, &n) == 2 && n >= 1 &&
                    n <= 1000000)
                    set_evaluator_events(n);
                if (WIFEXITED(status_) && WEXITSTATUS(status_) == 0 && res_buf_.compare(0, dl, procs::kResidentDone) == 0) resident_after("", "");
                else if (WIFEXITED(status_) && WEXITSTATUS(status_) == nriqos::kExitRecordsCut)
                    resident_after("records-cut", "the evaluator's own deadline cut the event's records after its answer (exit status " +
                                                      std::to_string(nriqos::kExitRecordsCut) + ")");
                else
                    resident_after("died-after-answer",
                                   "resident evaluator " + describe_status(status_) + " after its answer; the event's records may be incomplete");
                close_fds(res_);
                res_ = Proc();
                res_buf_.clear();
                res_served_ = 0;
            } else if (!res_buf_.empty() || res_.out_fd < 0) {
                resident_io(0);  // its done line came with the answer, or its output already ended
            }
            return true;
        }
    }
    if (!out_eof_) return false;
    auto complete = [this] { return run_end_line_.empty() ? looks_complete(output_) : ends_with_line(output_, run_end_line_); };
    if (!reaped_ && (overflow_ || !complete())) return false;
    std::string failure, kind;
    const bool bad_exit = reaped_ && (!WIFEXITED(status_) || WEXITSTATUS(status_) != 0);
    bool keep = false, late = false;
    if (overflow_) {
        failure = "output larger than " + std::to_string(run_max_output_) + " bytes";
        kind = "bad-output";
    } else if (complete()) {
        // The answer was complete before the exit; whatever happened after does not change it, but
        // it concerns the event's records (written after the answer): reported as after the answer.
        keep = !reaped_;
        if (bad_exit) {
            AfterAnswer a;
            a.id = run_id_;
            a.took_ms = nriqos::monotonic_ms() - started_ms_;
            if (WIFEXITED(status_) && WEXITSTATUS(status_) == nriqos::kExitRecordsCut) {
                a.kind = "records-cut";
                a.reason = "the evaluator's own deadline cut the event's records after its answer (exit status " +
                           std::to_string(nriqos::kExitRecordsCut) + ")";
            } else {
                a.kind = "died-after-answer";
                a.reason = "evaluator " + describe_status(status_) + " after its answer; the event's records may be incomplete";
            }
            after_.push_back(std::move(a));
            late = true;
        }
    } else if (bad_exit) {
        failure = "child " + describe_status(status_);
        // Exit kExitRecordsCut without a complete output: an evaluator of several answers whose own
        // deadline cut an item's records after that item's answer (its answers so far stand).
        kind = WIFEXITED(status_) && WEXITSTATUS(status_) == nriqos::kExitRecordsCut ? "records-cut" : "crash";
    }
    out = end(failure, kind, keep);
    if (late) out.after_answer = true;
    if (failure.empty()) spare_deaths_ = zyg_deaths_ = 0;
    return true;
}

bool Supervisor::known(pid_t pid) const {
    if (pid == zyg_pid_ || pid == keeper_pid_ || pid == reserve_pid_ || (active_ && pid == run_.pid) || pid == res_.pid) return true;
    for (const auto& f : finishing_)
        if (f.pid == pid) return true;
    for (const auto& p : spares_)
        if (p.pid == pid) return true;
    for (pid_t s : stragglers_)
        if (s == pid) return true;
    return false;
}

void Supervisor::reap_finishing() {
    for (size_t i = 0; i < finishing_.size();)
        if (!reap_finishing_at(i, false)) ++i;
}

// finishing_[i] when it has exited (`exited`: a waitid of the caller saw its zombie): reap it,
// note how its records ended (after_), drop it. False when it is still writing.
bool Supervisor::reap_finishing_at(size_t i, bool exited) {
    const Finishing f = finishing_[i];
    int r = 0;
    if (!exited) {
        siginfo_t si;
        memset(&si, 0, sizeof si);
        r = waitid(P_PID, id_t(f.pid), &si, WEXITED | WNOHANG | WNOWAIT);
        if (r == 0 && si.si_pid != f.pid) return false;  // still writing
    }
    int st = 0;
    bool got = false;
    if (r == 0) {
        kill(-f.pid, SIGKILL);  // sweep leftovers of its process group, then reap (as io() does)
        got = waitpid(f.pid, &st, 0) == f.pid;
    }
    int64_t now = nriqos::monotonic_ms();
    AfterAnswer a;
    a.id = f.id;
    a.took_ms = now - f.started_ms;
    std::string after = std::to_string(now - f.answered_ms) + " ms after its answer";
    if (!got) {
        a.kind = "died-after-answer";
        a.reason = "evaluator vanished " + after;
    } else if (WIFEXITED(st) && WEXITSTATUS(st) == 0) {
        // records written
    } else if (WIFEXITED(st) && WEXITSTATUS(st) == nriqos::kExitRecordsCut) {
        a.kind = "records-cut";
        a.reason = "the evaluator's own deadline cut the event's records " + after + " (exit status " + std::to_string(nriqos::kExitRecordsCut) + ")";
    } else {
        a.kind = "died-after-answer";
        a.reason = "evaluator " + describe_status(st) + " " + after + "; the event's records may be incomplete";
    }
    after_.push_back(std::move(a));
    finishing_.erase(finishing_.begin() + long(i));
    return true;
}

void Supervisor::expire_finishing(int64_t now, const char* why) {
    for (size_t i = 0; i < finishing_.size();) {
        const Finishing f = finishing_[i];
        if (!why && now < f.deadline_ms) {
            ++i;
            continue;
        }
        kill_group(f.pid);
        stragglers_.push_back(f.pid);
        AfterAnswer a;
        a.id = f.id;
        a.kind = "records-cut";
        a.took_ms = now - f.started_ms;
        a.reason = std::string(why ? why : "still writing the event's records at the event's deadline") + ", " + std::to_string(now - f.answered_ms) +
                   " ms after its answer (killed)";
        after_.push_back(std::move(a));
        finishing_.erase(finishing_.begin() + long(i));
    }
}

bool Supervisor::take_after_answer(std::vector<AfterAnswer>& out) {
    if (after_.empty()) return false;
    for (auto& a : after_) out.push_back(std::move(a));
    after_.clear();
    return true;
}

void Supervisor::drain_finishing(int64_t wait_ms) {
    int64_t until = nriqos::monotonic_ms() + wait_ms;
    while ((!finishing_.empty() || res_fin_active_) && nriqos::monotonic_ms() < until) {
        reap_finishing();
        expire_finishing(nriqos::monotonic_ms(), nullptr);
        if (res_fin_active_) resident_io(POLLIN);
        if (!finishing_.empty() || res_fin_active_) usleep(2000);
    }
    if (res_fin_active_) {
        resident_after("records-cut", "still writing the event's records when the relay exited (killed)");
        retire_resident(nullptr);
    }
    expire_finishing(nriqos::monotonic_ms(), "still writing the event's records when the relay exited");
}

void Supervisor::reap_others() {
    // Finishing evaluators are asked only when a child ended (or at the 1 s backstop): they are
    // usually alive while the stragglers' reaping runs.
    const bool backstop = nriqos::monotonic_ms() - last_reap_ms_ >= 1000;
    const bool child_ended = chld_ || backstop;
    chld_ = false;
    last_reap_ms_ = nriqos::monotonic_ms();
    // The usual SIGCHLD: a finishing evaluator ended its records. Ask the kernel which child is a
    // zombie (waitid P_ALL, WNOWAIT: it stays one) and reap that one, instead of one wait per
    // child we know of (spare, zygote, keeper, each finishing evaluator: ~7 wait calls per event
    // before, strace of the native benchmark; tests/sandbox.sh counts them). Anything
    // else (a spare, the zygote or the keeper died, the running evaluator, stragglers, the 1 s
    // backstop) takes the full scan below.
    if (!backstop && stragglers_.empty()) {
        bool full = false;
        for (int n = 0; n < 16 && !full; ++n) {
            siginfo_t si;
            memset(&si, 0, sizeof si);
            if (waitid(P_ALL, 0, &si, WEXITED | WNOHANG | WNOWAIT) != 0 || si.si_pid == 0) return;  // none (left)
            size_t i = 0;
            while (i < finishing_.size() && finishing_[i].pid != si.si_pid) ++i;
            if (i < finishing_.size()) {
                reap_finishing_at(i, true);
            } else if (active_ && !reaped_ && si.si_pid == run_.pid) {
                // The running evaluator (its records were quick, or it died): reaped as io() would;
                // its answer is still read from the pipe (finish_if_done waits for EOF).
                kill(-run_.pid, SIGKILL);
                int st = 0;
                if (waitpid(run_.pid, &st, 0) == run_.pid) {
                    reaped_ = true;
                    status_ = st;
                }
            } else if (known(si.si_pid)) {
                full = true;
            } else {  // a spare whose zygote died before telling its pid
                waitpid(si.si_pid, nullptr, WNOHANG);
            }
        }
    }
    for (size_t i = 0; i < stragglers_.size();) {
        int st = 0;
        pid_t r = waitpid(stragglers_[i], &st, WNOHANG);
        if (r == stragglers_[i] || (r < 0 && errno == ECHILD)) {
            stragglers_[i] = stragglers_.back();
            stragglers_.pop_back();
        } else {
            ++i;
        }
    }
    for (auto it = spares_.begin(); it != spares_.end();) {
        int st = 0;
        pid_t r = waitpid(it->pid, &st, WNOHANG);
        if (r == it->pid || (r < 0 && errno == ECHILD)) {
            // Died before its event (killed from outside, or its preparation failed): never used.
            logf("spare evaluator %d %s before its event; another one is made", int(it->pid),
                 r == it->pid ? describe_status(st).c_str() : "vanished");
            close_fds(*it);
            it = spares_.erase(it);
            if (++spare_deaths_ > 1) spare_backoff_until_ = nriqos::monotonic_ms() + 1000;
            if (zyg_pid_ > 0 && spare_deaths_ > 2) retire_zygote("makes spares that die");
        } else {
            ++it;
        }
    }
    if (zyg_pid_ > 0) {
        int st = 0;
        pid_t r = waitpid(zyg_pid_, &st, WNOHANG);
        if (r == zyg_pid_ || (r < 0 && errno == ECHILD)) {
            std::string why = std::to_string(zyg_pid_) + " " + (r == zyg_pid_ ? describe_status(st) : std::string("vanished"));
            zyg_pid_ = -1;  // reaped: retire_zygote must not kill or wait for it
            retire_zygote(why.c_str());
            ++zyg_deaths_;
            zyg_backoff_until_ = zyg_deaths_ > 1 ? nriqos::monotonic_ms() + 1000 : 0;
        }
    }
    if (reserve_pid_ > 0) {  // before the keeper: a keeper that died promotes only a live reserve
        int st = 0;
        pid_t r = waitpid(reserve_pid_, &st, WNOHANG);
        if (r == reserve_pid_ || (r < 0 && errno == ECHILD)) {
            logf("reserve evaluator keeper %d %s; another is asked for", int(reserve_pid_),
                 r == reserve_pid_ ? describe_status(st).c_str() : "vanished");
            close(reserve_ctl_);
            reserve_ctl_ = -1;
            reserve_pid_ = -1;
            reserve_backoff_until_ = nriqos::monotonic_ms() + 1000;
        }
    }
    if (keeper_pid_ > 0) {
        int st = 0;
        pid_t r = waitpid(keeper_pid_, &st, WNOHANG);
        if (r == keeper_pid_ || (r < 0 && errno == ECHILD)) lose_keeper(r == keeper_pid_ ? describe_status(st) : "vanished", true);
    }
    if (child_ended) reap_finishing();
    // Children we never learned the pid of (spares cloned by a zygote that died before answering).
    for (int i = 0; i < 16; ++i) {
        siginfo_t si;
        memset(&si, 0, sizeof si);
        if (waitid(P_ALL, 0, &si, WEXITED | WNOHANG | WNOWAIT) != 0 || si.si_pid == 0) break;
        if (known(si.si_pid)) break;
        waitpid(si.si_pid, nullptr, WNOHANG);
    }
}

bool Supervisor::service(const struct pollfd* pfd, Outcome& out) {
    if (pfd_sig_ >= 0 && (pfd[pfd_sig_].revents & POLLIN)) {
        char drain[64];
        ssize_t n;
        do n = read(g_sigchld_pipe[0], drain, sizeof drain);  // one read unless more than 64 bytes wait
        while (n == ssize_t(sizeof drain));
        chld_ = true;
    }
    if (pfd_keeper_ >= 0 && pfd[pfd_keeper_].revents) keeper_answer();
    if (pfd_zyg_ >= 0 && pfd[pfd_zyg_].revents) {
        if (zyg_pending_.empty() && (pfd[pfd_zyg_].revents & (POLLHUP | POLLERR))) {
            retire_zygote("closed its socket");
            ++zyg_deaths_;
            zyg_backoff_until_ = zyg_deaths_ > 1 ? nriqos::monotonic_ms() + 1000 : 0;
        } else {
            zygote_answers();
        }
    }
    if (!zyg_pending_.empty() && nriqos::monotonic_ms() >= zyg_asked_ms_ + kZygoteAnswerMs) {
        retire_zygote("did not answer within 1 s");
        ++zyg_deaths_;
        zyg_backoff_until_ = nriqos::monotonic_ms() + 1000;
    }
    // Only when a child changed state (SIGCHLD), with a periodic backstop: waitpid for every
    // child on every wake-up was the relay's most frequent system call.
    child_changed_ = chld_;
    if (chld_ || !stragglers_.empty() || nriqos::monotonic_ms() - last_reap_ms_ >= 1000) reap_others();
    if (!finishing_.empty()) expire_finishing(nriqos::monotonic_ms(), nullptr);
    if (pfd_res_ >= 0 && pfd[pfd_res_].revents) resident_io(pfd[pfd_res_].revents);
    if (res_fin_active_ && nriqos::monotonic_ms() >= res_fin_.deadline_ms) {
        resident_after("records-cut", "still writing the event's records at the event's deadline, " +
                                          std::to_string(nriqos::monotonic_ms() - res_fin_.answered_ms) + " ms after its answer (killed)");
        retire_resident("killed at the event's deadline");
    }
    if (!active_) return false;
    short in_rev = pfd_in_ >= 0 ? pfd[pfd_in_].revents : 0;
    short out_rev = pfd_out_ >= 0 ? pfd[pfd_out_].revents : 0;
    io(in_rev, out_rev);
    child_changed_ = false;
    if (finish_if_done(out)) return true;
    if (nriqos::monotonic_ms() >= deadline_ms_) {
        out = end("child did not answer within " + std::to_string(deadline_ms_ - started_ms_) + " ms (killed)", "timeout");
        return true;
    }
    return false;
}

Outcome Supervisor::abort_running(const std::string& why, const std::string& kind) {
    if (!active_) return Outcome();
    return end(why, kind);
}

void Supervisor::stop_all() {
    if (active_) end("relay exiting");
    for (const auto& f : finishing_) {  // drain_finishing reported them; here (destructor) just killed
        kill_group(f.pid);
        stragglers_.push_back(f.pid);
    }
    finishing_.clear();
    res_fin_active_ = false;
    retire_resident(nullptr);
    for (auto& p : spares_) retire(p);
    spares_.clear();
    if (zyg_pid_ > 0 || zyg_ctl_ >= 0) retire_zygote(nullptr);
    if (keeper_ctl_ >= 0) close(keeper_ctl_);  // EOF once the keeper has read every request
    keeper_ctl_ = -1;
    if (reserve_pid_ > 0) {  // idle: nothing to finish
        close(reserve_ctl_);
        reserve_ctl_ = -1;
        kill_group(reserve_pid_);
        stragglers_.push_back(reserve_pid_);
        reserve_pid_ = -1;
    }
    // Failure records sent to the keeper are written before it goes: it exits at EOF, after the
    // recorders it waits for (each killed by its alarm at the latest). We wait at most 1 s, then
    // kill the keeper's group.
    for (int i = 0; i < 200 && keeper_pid_ > 0; ++i) {
        int st = 0;
        pid_t r = waitpid(keeper_pid_, &st, WNOHANG);
        if (r == keeper_pid_ || (r < 0 && errno == ECHILD)) {
            keeper_pid_ = -1;
            break;
        }
        usleep(5000);
    }
    if (keeper_pid_ > 0) {
        kill_group(keeper_pid_);
        stragglers_.push_back(keeper_pid_);
        keeper_pid_ = -1;
    }
    // Give killed children a moment to be reaped; leftovers are reparented and reaped by init.
    for (int i = 0; i < 20 && !stragglers_.empty(); ++i) {
        reap_others();
        if (!stragglers_.empty()) usleep(5000);
    }
}

}  // namespace nriqos::nri
