// Where the native NRI relay's fork-mode evaluators come from (see evaluator.hpp): the spare
// evaluators, the zygote that clones them, the keeper that makes zygotes (the confined relay
// cannot fork) and its reserve, the plugin-config flags they were made with, their losses on
// the record, and the hand-off of relay-level failure records to the keeper or a recorder. The
// evaluation itself (start, feed, deadline, outcome, reaping) is in evaluator.cpp; what runs
// inside these processes is in evaluator_procs.cpp.
#include <fcntl.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "nri/evaluator.hpp"
#include "nri/evaluator_internal.hpp"
#include "nri/evaluator_procs.hpp"
#include "nri/failure_record.hpp"
#include "os/clock.hpp"

namespace nriqos::nri {

namespace {

using procs::kMsgFailMode;
using procs::kMsgSpare;

// Ready (or requested) spares kept: one; the next is asked for after each reply.
constexpr size_t kSpares = 1;

}  // namespace

void Supervisor::set_flags(const std::vector<std::string>& flags) {
    if (flags == flags_) return;
    if (confined_) {  // the keeper holds the flags it was forked with (Configure comes once)
        logf("plugin configuration changed after the relay was confined: ignored until the relay restarts");
        return;
    }
    if (keeper_pid_ > 0) {
        close(keeper_ctl_);
        keeper_ctl_ = -1;
        kill_group(keeper_pid_);
        stragglers_.push_back(keeper_pid_);
        keeper_pid_ = -1;
        keeper_asked_ = false;
    }
    if (reserve_pid_ > 0) {
        close(reserve_ctl_);
        reserve_ctl_ = -1;
        kill_group(reserve_pid_);
        stragglers_.push_back(reserve_pid_);
        reserve_pid_ = -1;
    }
    reserve_asked_ = false;
    flags_ = flags;
    ++flags_gen_;
    for (auto& p : spares_) retire(p);
    spares_.clear();
    if (!res_fin_active_) retire_resident(nullptr);  // prepared with the old flags (a finishing one: start() retires it)
    if (zyg_pid_ > 0) retire_zygote(nullptr);
}

void Supervisor::retire_zygote(const char* why) {
    if (why) {  // lost, not retired for new flags or record paths: on the record (take_losses)
        std::string what = zyg_pid_ > 0 ? std::to_string(zyg_pid_) + " " + why : std::string(why);
        const char* next = keeper_pid_ > 0 || !confined_ ? "replaced" : "no keeper is left to make another: events fail the way the policy says";
        logf("evaluator zygote %s; %s", what.c_str(), next);
        losses_.emplace_back("zygote-lost", "evaluator zygote " + what + "; " + next);
    }
    if (zyg_ctl_ >= 0) close(zyg_ctl_);  // EOF: it exits
    zyg_ctl_ = -1;
    if (zyg_pid_ > 0) {
        kill_group(zyg_pid_);
        stragglers_.push_back(zyg_pid_);
    }
    zyg_pid_ = -1;
    // Spares it may have cloned without telling us the pid read EOF on stdin and exit; they are
    // our children (CLONE_PARENT) and reaped as unknown children.
    for (auto& p : zyg_pending_) close_fds(p);
    zyg_pending_.clear();
}

bool Supervisor::fork_spare(Proc& p) {
    int in_p[2], out_p[2];
    if (pipe2(in_p, O_CLOEXEC) != 0) return false;
    if (pipe2(out_p, O_CLOEXEC) != 0) {
        int e = errno;
        close(in_p[0]);
        close(in_p[1]);
        errno = e;
        return false;
    }
    pid_t relay = getpid();
    pid_t pid = fork();
    if (pid == 0) procs::spare_main(in_p[0], out_p[1], relay, o_.inproc, flags_);
    int e = errno;
    close(in_p[0]);
    close(out_p[1]);
    if (pid < 0) {
        close(in_p[1]);
        close(out_p[0]);
        errno = e;
        return false;
    }
    setpgid(pid, pid);  // also done by the child; whichever runs first
    ++started_;
    p.pid = pid;
    p.in_fd = in_p[1];
    p.out_fd = out_p[0];
    p.gen = flags_gen_;
    set_nonblock(p.in_fd);
    set_nonblock(p.out_fd);
    return true;
}

bool Supervisor::start_keeper() {
    if (!fork_mode() || keeper_pid_ > 0) return keeper_pid_ > 0;
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0) return false;
    pid_t relay = getpid();
    pid_t pid = fork();
    if (pid == 0) procs::keeper_main(sv[1], relay, o_.inproc, flags_);
    int e = errno;
    close(sv[1]);
    if (pid < 0) {
        close(sv[0]);
        errno = e;
        return false;
    }
    setpgid(pid, pid);
    keeper_pid_ = pid;
    keeper_ctl_ = sv[0];
    keeper_gen_ = flags_gen_;
    set_nonblock(keeper_ctl_);
    return true;
}

void Supervisor::keeper_answer() {
    int32_t answer[2] = {0, 0};
    int fd = -1;
    ssize_t n = procs::recv_with_fds(keeper_ctl_, answer, sizeof answer, &fd, 1);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    if (n != ssize_t(sizeof answer) || (answer[0] != 'Z' && answer[0] != 'K')) {
        if (fd >= 0) close(fd);
        lose_keeper(n == 0 ? "closed its socket" : "sent a malformed answer", false);
        return;
    }
    const bool keeper = answer[0] == 'K';
    (keeper ? reserve_asked_ : keeper_asked_) = false;
    if (answer[1] <= 0 || fd < 0) {
        if (fd >= 0) close(fd);
        logf("evaluator keeper could not make a %s: %s", keeper ? "reserve keeper" : "zygote", strerror(answer[1] < 0 ? -answer[1] : EINVAL));
        (keeper ? reserve_backoff_until_ : zyg_backoff_until_) = nriqos::monotonic_ms() + 1000;
        return;
    }
    setpgid(answer[1], answer[1]);
    if (keeper) {
        if (reserve_pid_ > 0) {  // not asked twice; correct all the same
            close(fd);
            kill(answer[1], SIGKILL);
            stragglers_.push_back(pid_t(answer[1]));
            return;
        }
        reserve_pid_ = pid_t(answer[1]);
        reserve_ctl_ = fd;
        set_nonblock(reserve_ctl_);
        return;
    }
    ++zygotes_;
    zyg_pid_ = pid_t(answer[1]);
    zyg_ctl_ = fd;
    zyg_gen_ = keeper_gen_;
    set_nonblock(zyg_ctl_);
}

// The keeper died (reaped: its pid is free) or broke its protocol (killed here). Its reserve, if
// any, takes over at once — the zygote request or failure records sent to the dead one are lost:
// ensure_spare asks the new keeper again — and the new keeper is asked for a reserve of its own.
// The loss goes on the record (take_losses) through the new keeper's recorder.
void Supervisor::lose_keeper(const std::string& why, bool reaped) {
    const pid_t lost = keeper_pid_;
    close(keeper_ctl_);
    keeper_ctl_ = -1;
    if (!reaped) {
        kill_group(keeper_pid_);
        stragglers_.push_back(keeper_pid_);
    }
    keeper_pid_ = -1;
    keeper_asked_ = reserve_asked_ = false;
    std::string reason = "evaluator keeper " + std::to_string(lost) + " " + why;
    if (reserve_pid_ > 0) {
        keeper_pid_ = reserve_pid_;
        keeper_ctl_ = reserve_ctl_;
        reserve_pid_ = -1;
        reserve_ctl_ = -1;
        reserve_backoff_until_ = 0;
        reason += "; its reserve " + std::to_string(keeper_pid_) + " took over";
    } else {
        reason += confined_ ? "; no reserve keeper: no zygote can be made once the current one is gone" : "; zygotes are forked by the relay";
    }
    logf("%s", reason.c_str());
    losses_.emplace_back("keeper-lost", reason);
}

void Supervisor::ask_reserve() {
    char byte = 'K';
    if (send(keeper_ctl_, &byte, 1, MSG_NOSIGNAL | MSG_DONTWAIT) == 1) reserve_asked_ = true;
    else reserve_backoff_until_ = nriqos::monotonic_ms() + 1000;
}

bool Supervisor::take_losses(std::vector<std::pair<std::string, std::string>>& out) {
    if (losses_.empty()) return false;
    for (auto& l : losses_) out.push_back(std::move(l));
    losses_.clear();
    return true;
}

bool Supervisor::start_zygote() {
    if (keeper_pid_ > 0) {  // the keeper makes it; the answer comes through the poll loop
        if (keeper_asked_) return true;
        char byte = 'Z';
        if (send(keeper_ctl_, &byte, 1, MSG_NOSIGNAL) != 1) return false;
        keeper_asked_ = true;
        return true;
    }
    if (confined_) {
        errno = ECHILD;  // no keeper (nor reserve) any more, and a confined relay cannot fork a usable one
        return false;
    }
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0) return false;
    pid_t relay = getpid();
    pid_t pid = fork();
    if (pid == 0) procs::zygote_main(sv[1], relay, o_.inproc, flags_);
    int e = errno;
    close(sv[1]);
    if (pid < 0) {
        close(sv[0]);
        errno = e;
        return false;
    }
    setpgid(pid, pid);
    ++zygotes_;
    zyg_pid_ = pid;
    zyg_ctl_ = sv[0];
    zyg_gen_ = flags_gen_;
    set_nonblock(zyg_ctl_);
    return true;
}

bool Supervisor::ask_zygote() {
    int in_p[2], out_p[2];
    if (pipe2(in_p, O_CLOEXEC) != 0) return false;
    if (pipe2(out_p, O_CLOEXEC) != 0) {
        close(in_p[0]);
        close(in_p[1]);
        return false;
    }
    char byte = 'S';
    int give[2] = {in_p[0], out_p[1]};
    ssize_t n = procs::send_with_fds(zyg_ctl_, &byte, 1, give, 2);
    close(in_p[0]);
    close(out_p[1]);
    if (n != 1) {
        close(in_p[1]);
        close(out_p[0]);
        return false;
    }
    Proc p;
    p.in_fd = in_p[1];
    p.out_fd = out_p[0];
    p.gen = zyg_gen_;
    set_nonblock(p.in_fd);
    set_nonblock(p.out_fd);
    if (zyg_pending_.empty()) zyg_asked_ms_ = nriqos::monotonic_ms();
    zyg_pending_.push_back(p);
    return true;
}

void Supervisor::zygote_answers() {
    while (zyg_ctl_ >= 0) {
        int32_t msg[2] = {0, 0};
        ssize_t n = recv(zyg_ctl_, msg, sizeof msg, 0);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
        bool ok = n == ssize_t(sizeof msg) &&
                  (msg[0] == kMsgFailMode || msg[0] == procs::kMsgEvaluatorEvents || (msg[0] == kMsgSpare && !zyg_pending_.empty()));
        if (!ok) {
            retire_zygote(n == 0 ? "closed its socket" : "sent a malformed answer");
            ++zyg_deaths_;
            zyg_backoff_until_ = zyg_deaths_ > 1 ? nriqos::monotonic_ms() + 1000 : 0;
            return;
        }
        if (msg[0] == procs::kMsgEvaluatorEvents) {
            if (msg[1] >= 1 && msg[1] <= 1000000) set_evaluator_events(uint32_t(msg[1]));
            continue;
        }
        if (msg[0] == kMsgFailMode) {
            if (msg[1] >= 0) policy_fail_mode_ = msg[1];
            continue;
        }
        int32_t answer = msg[1];
        Proc p = zyg_pending_.front();
        zyg_pending_.pop_front();
        if (!zyg_pending_.empty()) zyg_asked_ms_ = nriqos::monotonic_ms();
        if (answer <= 0) {
            logf("evaluator zygote could not clone a spare: %s", strerror(-answer));
            close_fds(p);
            continue;
        }
        p.pid = pid_t(answer);
        setpgid(p.pid, p.pid);  // our child (CLONE_PARENT): own process group, killed as a whole
        ++started_;
        spares_.push_back(p);
    }
}

void Supervisor::ensure_spare() {
    if (!fork_mode() || active_) return;
    int64_t now = nriqos::monotonic_ms();
    // Evaluators are confined to the record paths known when they were made: a policy that moved
    // them (remembered by the first event under it) needs a new zygote and new spares, or every
    // later event's records would be refused until the relay restarts.
    // The memo changes only when an evaluation ran (it is written before the answer); a 1 s
    // backstop catches anything else. Each check is a stat and a copy of the options: it ran on
    // every wake-up of the loop before (3 per event).
    if (o_.inproc.roots_signature && (roots_check_ || now - roots_checked_ms_ >= 1000)) {
        roots_check_ = false;
        roots_checked_ms_ = now;
        std::string sig = o_.inproc.roots_signature(flags_);
        if (roots_sig_known_ && sig != roots_sig_) {
            logf("record paths changed (%s): evaluator zygote%s and %zu spare(s) replaced", sig.c_str(), zyg_pid_ > 0 ? "" : " (none)",
                 spares_.size());
            if (zyg_pid_ > 0) retire_zygote(nullptr);
            for (auto& p : spares_) retire(p);
            spares_.clear();
            if (!res_fin_active_) retire_resident("the record paths changed");
        }
        roots_sig_ = sig;
        roots_sig_known_ = true;
    }
    if (zyg_pid_ > 0 && zyg_gen_ != flags_gen_ && !confined_) retire_zygote(nullptr);
    if (zyg_pid_ <= 0 && now >= zyg_backoff_until_ && !start_zygote()) {
        logf("cannot make the evaluator zygote: %s%s", strerror(errno),
             confined_ ? "; events fail the way the policy says" : " (spares are forked by the relay)");
        zyg_backoff_until_ = now + 5000;
    }
    if (spares_.size() + zyg_pending_.size() >= kSpares) {
        // A reserve keeper, so that a lost keeper is replaced (the confined relay cannot fork one):
        // asked for once a spare is ready (not while one is being cloned) and no zygote is asked of
        // the keeper, so that cloning it never delays an event's evaluator.
        if (keeper_pid_ > 0 && reserve_pid_ <= 0 && !reserve_asked_ && !keeper_asked_ && zyg_pending_.empty() && !spares_.empty() &&
            now >= reserve_backoff_until_)
            ask_reserve();
        return;
    }
    if (zyg_pid_ <= 0 && keeper_asked_) return;  // the zygote is on its way
    if (zyg_pid_ > 0) {
        if (ask_zygote()) return;
        retire_zygote("does not take requests");
        ++zyg_deaths_;
        zyg_backoff_until_ = now + 1000;
    }
    // No zygote: the relay forks the spare (off the critical path all the same) — not once the relay
    // is confined (its children would inherit its confinement: no cgroup writes).
    if (confined_ || now < spare_backoff_until_) return;
    Proc p;
    if (fork_spare(p)) {
        spares_.push_back(p);
    } else {
        logf("cannot fork a spare evaluator: %s (the next event forks its own)", strerror(errno));
        spare_backoff_until_ = now + 1000;
    }
}

std::string Supervisor::record_failure(const std::string& msg) {
    if (msg.size() + 1 > kMaxFailureMsg) return "record of " + std::to_string(msg.size()) + " bytes is too long";
    if (keeper_ctl_ >= 0) {
        std::string m = "R" + msg;
        if (send(keeper_ctl_, m.data(), m.size(), MSG_NOSIGNAL | MSG_DONTWAIT) == ssize_t(m.size())) return "";
        if (errno == EAGAIN || errno == EWOULDBLOCK) return "the keeper has too many records queued";
        return std::string("cannot reach the keeper: ") + strerror(errno);
    }
    if (!o_.inproc.record) return fork_mode() ? "no recorder configured" : "exec mode has no recorder";
    if (confined_) return "the keeper is gone and the confined relay cannot fork a recorder";
    pid_t pid = procs::run_recorder(o_.inproc, flags_, msg, false);
    if (pid < 0) return std::string("cannot fork a recorder: ") + strerror(errno);
    stragglers_.push_back(pid);  // reaped like any child that ended
    return "";
}

}  // namespace nriqos::nri
