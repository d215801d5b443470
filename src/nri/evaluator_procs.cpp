// The processes of the relay's evaluation, as they run: see evaluator_procs.hpp.
#include "nri/evaluator_procs.hpp"

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "nri/failure_record.hpp"

namespace nriqos::nri::procs {

namespace {

// Control socket fd number inside the zygote.
constexpr int kZygoteCtl = 3;

// Close every fd >= `from` (close_range(2), Linux 5.9+; else one by one).
void close_from(int from) {
#ifdef SYS_close_range
    if (syscall(SYS_close_range, unsigned(from), ~0u, 0u) == 0) return;
#endif
    long max = sysconf(_SC_OPEN_MAX);
    if (max < 0 || max > 65536) max = 65536;
    for (int fd = from; fd < max; ++fd) close(fd);
}

bool read_full(int fd, void* buf, size_t n) {
    size_t off = 0;
    while (off < n) {
        ssize_t r = read(fd, static_cast<char*>(buf) + off, n - off);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) return false;
        off += size_t(r);
    }
    return true;
}

// Process names (comm, what ps shows): the roles at a glance, and what tests kill by.
constexpr const char* kNameKeeper = "nri-qos-keeper";
constexpr const char* kNameZygote = "nri-qos-zygote";
constexpr const char* kNameEval = "nri-qos-eval";
constexpr const char* kNameRecord = "nri-qos-record";
// A failure recorder that has not finished within this time is killed (SIGALRM): its locks wait
// at most 300 ms (event log) and 500 ms (metrics); an adjustment-rejected record first reads the
// runtime's log for up to 1.5 s (eval_pipeline.cpp).
constexpr unsigned kRecordSeconds = 3;
// A prober (zygote_main) that has not loaded and compiled the policy within this time is killed
// (SIGALRM): a 10,000-rule policy compiles in about a second (BENCHMARKS.md "cold path").
constexpr int kProbeSeconds = 120;
void set_name(const char* n) { prctl(PR_SET_NAME, n, 0, 0, 0); }

// Signals of a new evaluator or zygote: defaults, nothing blocked.
void reset_signals() {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = SIG_DFL;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGCHLD, &sa, nullptr);
    sigaction(SIGPIPE, &sa, nullptr);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
}

// An evaluator with stdin/stdout on its pipes and everything else closed: wait for the header,
// evaluate, exit. The answer's end is the close of fd 1 (the relay does not wait for the exit;
// the real evaluator ends it before its records: eval_pipeline.cpp).
[[noreturn]] void evaluate_one(const InProcessEval& ev) {
    if (ev.warm) ev.warm();
    unsigned char hdr[kHeaderSize];
    if (!read_full(0, hdr, sizeof hdr)) _exit(0);  // retired before an event came
    uint32_t budget = 0;
    memcpy(&budget, hdr + 4, sizeof budget);
    if (memcmp(hdr, kMagicResident, sizeof kMagicResident) == 0 && ev.evaluate_resident) {
        // A resident evaluator (evaluator_procs.hpp kMagicResident): one event after the other until
        // the relay closes stdin, the policy says 1, or anything goes wrong.
        for (;;) {
            uint32_t len = 0, n = 0;
            memcpy(&len, hdr + 8, sizeof len);
            int rc = ev.evaluate_resident(int(std::min<uint32_t>(budget, 1u << 30)), len, n);
            std::string done = std::string(kResidentDone) + std::to_string(rc) + " " + std::to_string(n) + "\n";
            size_t off = 0;
            while (off < done.size()) {
                ssize_t w = write(1, done.data() + off, done.size() - off);
                if (w < 0 && errno == EINTR) continue;
                if (w <= 0) _exit(rc ? rc : 75);
                off += size_t(w);
            }
            if (rc != 0 || n == 1) _exit(rc);
            if (!read_full(0, hdr, sizeof hdr)) _exit(0);  // the relay retired it
            if (memcmp(hdr, kMagicResident, sizeof kMagicResident) != 0) _exit(72);
            memcpy(&budget, hdr + 4, sizeof budget);
        }
    }
    if (memcmp(hdr, kMagic, sizeof kMagic) != 0) _exit(72);
    int rc = ev.evaluate(int(std::min<uint32_t>(budget, 1u << 30)));
    close(1);
    _exit(rc);
}

}  // namespace

// A spare forked by the relay itself (no zygote): confine, then evaluate_one.
[[noreturn]] void spare_main(int in_r, int out_w, pid_t relay, const InProcessEval& ev, const std::vector<std::string>& flags) {
    reset_signals();
    set_name(kNameEval);
    prctl(PR_SET_PDEATHSIG, SIGKILL);  // die with the relay; if it is gone already, leave
    if (getppid() != relay) _exit(0);
    setpgid(0, 0);  // own process group: the deadline kills all of it
    if (dup2(in_r, 0) < 0 || dup2(out_w, 1) < 0) _exit(71);
    close_from(3);  // the trunk socket, the SIGCHLD pipe, other evaluators' pipes
    try {
        std::string note = ev.prepare ? ev.prepare(flags, false) : std::string();
        if (!note.empty()) logf("evaluator: %s", note.c_str());
        evaluate_one(ev);
    } catch (...) { _exit(70); }
}

namespace {

// A spare cloned by the zygote (CLONE_PARENT: our parent is the relay).
[[noreturn]] void cloned_spare(int in_r, int out_w, pid_t relay, const InProcessEval& ev) {
    set_name(kNameEval);
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != relay) _exit(0);
    if (dup3(in_r, 0, 0) < 0 || dup3(out_w, 1, 0) < 0) _exit(71);
    close(in_r);
    close(out_w);
    close(kZygoteCtl);
    try {
        std::string why = ev.detach ? ev.detach() : std::string();
        if (!why.empty()) {  // it would keep the zygote's powers: never evaluate like that
            logf("evaluator: %s; not used", why.c_str());
            _exit(73);
        }
        evaluate_one(ev);
    } catch (...) { _exit(70); }
}

}  // namespace

// The zygote: confined once; clones a prober that tells the relay the policy's fail mode, then one
// spare per request on its control socket. A request is one byte with two fds (SCM_RIGHTS: the
// spare's stdin read end, stdout write end); the answer is the spare's pid, or -errno.
[[noreturn]] void zygote_main(int ctl, pid_t relay, const InProcessEval& ev, const std::vector<std::string>& flags) {
    reset_signals();
    set_name(kNameZygote);
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != relay) _exit(0);
    setpgid(0, 0);
    if (ctl != kZygoteCtl && (dup2(ctl, kZygoteCtl) < 0)) _exit(71);
    close_from(kZygoteCtl + 1);
    try {
        std::string note = ev.prepare ? ev.prepare(flags, true) : std::string();
        if (!note.empty()) logf("evaluator zygote: %s", note.c_str());
        // The policy's fail mode, so that even the first event after a start fails the way the
        // policy says when its evaluation crashes or times out (issue #12 §4). Loading the policy
        // can take seconds (a large one without a compiled cache): a clone of ours does it and
        // sends it on our socket (one datagram: atomic) while we serve.
        // The same prober compiles the policy into the cache on a miss (InProcessEval::
        // probe_fail_mode), and is cloned again when the policy file changes (before_spare).
        auto probe = [&] {
            if (!ev.probe_fail_mode) return;
            long pid = syscall(SYS_clone, CLONE_PARENT | SIGCHLD, 0, nullptr, nullptr, 0);
            if (pid == 0) {
                prctl(PR_SET_PDEATHSIG, SIGKILL);
                if (getppid() != relay) _exit(0);
                struct itimerval cap {};  // a hard cap: a compile that hangs does not stay for ever
                cap.it_value.tv_sec = kProbeSeconds;
                setitimer(ITIMER_REAL, &cap, nullptr);
                // Confined like the zygote (it reads only the operator's policy, no pod data).
                int32_t msg[2] = {kMsgFailMode, int32_t(ev.probe_fail_mode())};
                ssize_t w = send(kZygoteCtl, msg, sizeof msg, MSG_NOSIGNAL);
                if (w == ssize_t(sizeof msg) && ev.probed_evaluator_events) {
                    int32_t ee[2] = {kMsgEvaluatorEvents, int32_t(ev.probed_evaluator_events())};
                    if (ee[1] > 0) w = send(kZygoteCtl, ee, sizeof ee, MSG_NOSIGNAL);
                }
                _exit(w == ssize_t(sizeof msg) ? 0 : 1);
            }
        };
        probe();
        for (;;) {
            char byte = 0;
            int fds[2] = {-1, -1};
            int nfds = 0;  // a request carries exactly two
            ssize_t n = recv_with_fds(kZygoteCtl, &byte, 1, fds, 2, &nfds);
            if (n <= 0) {  // the relay closed the socket: retired
                for (int fd : fds)
                    if (fd >= 0) close(fd);
                _exit(0);
            }
            int32_t answer[2] = {kMsgSpare, -EINVAL};
            if (nfds == 2) {
                if (ev.before_spare && ev.before_spare()) probe();
                long pid = syscall(SYS_clone, CLONE_PARENT | SIGCHLD, 0, nullptr, nullptr, 0);
                if (pid == 0) cloned_spare(fds[0], fds[1], relay, ev);
                answer[1] = pid < 0 ? -errno : int32_t(pid);
            }
            for (int fd : fds)
                if (fd >= 0) close(fd);
            if (send(kZygoteCtl, answer, sizeof answer, MSG_NOSIGNAL) != ssize_t(sizeof answer)) _exit(0);
        }
    } catch (...) { _exit(70); }
}

// A recorder for one relay-level failure message (InProcessEval::record): its own process, so
// that the parsing of what the relay sent happens confined (record() confines itself first) and a
// crash or a hang (SIGALRM after kRecordSeconds) costs that record only. Waited for: records are
// written one at a time, which also bounds what a flood of failures can cost.
int run_recorder(const InProcessEval& ev, const std::vector<std::string>& flags, const std::string& msg, bool wait) {
    pid_t pid = fork();
    if (pid == 0) {
        set_name(kNameRecord);
        reset_signals();
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        alarm(kRecordSeconds);
        close_from(3);
        int rc = 70;
        try {
            rc = ev.record(flags, msg);
        } catch (...) {}
        _exit(rc);
    }
    if (pid < 0 || !wait) return pid;
    int st = 0;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {}
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) logf("failure recorder %d %s", int(pid), describe_status(st).c_str());
    return pid;
}

// The keeper: forked once from the relay, before the relay confines itself, with the plugin
// config's flags fixed. It makes zygotes and has relay-level failures recorded. Requests on its
// control socket (SOCK_SEQPACKET: one request per datagram):
//  * "Z": clone a zygote (CLONE_PARENT: the relay's child) and send back its pid with the relay's
//    end of the zygote's control socket (SCM_RIGHTS);
//  * "K": clone a reserve keeper (CLONE_PARENT: the relay's child; the same code, flags and
//    socket protocol) and send back its pid with the relay's end of its control socket. The
//    confined relay cannot fork a keeper itself: with a reserve, a keeper that dies (OOM kill, a
//    stray kill) is replaced by the reserve, which the relay then asks for a reserve of its own
//    (evaluator_spares.cpp lose_keeper, issue 19 §2);
//  * "R" + message (at most kMaxFailureMsg bytes, else refused whole): fork a recorder for it
//    (run_recorder). No answer. The keeper itself never parses the message: it only bounds it.
// Answers ("Z", "K") are two int32: the request byte, then the pid or -errno (KeeperAnswer).
[[noreturn]] void keeper_main(int ctl, pid_t relay, const InProcessEval& ev, const std::vector<std::string>& flags) {
    reset_signals();
    set_name(kNameKeeper);
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != relay) _exit(0);
    setpgid(0, 0);
    if (ctl != kZygoteCtl && dup2(ctl, kZygoteCtl) < 0) _exit(71);
    close_from(kZygoteCtl + 1);
    static char req[kMaxFailureMsg + 1];
    for (;;) {
        // MSG_TRUNC: the datagram's real length, also when it was longer than the buffer.
        ssize_t n = recv(kZygoteCtl, req, sizeof req, MSG_TRUNC);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) _exit(0);  // the relay is gone (or closed the socket: all requests were read)
        if (req[0] == 'R') {
            if (size_t(n) > sizeof req || n < 2) logf("keeper: failure record of %zd bytes refused (at most %zu)", n, sizeof req);
            else if (ev.record) run_recorder(ev, flags, std::string(req + 1, size_t(n) - 1), true);
            continue;
        }
        if (n != 1 || (req[0] != 'Z' && req[0] != 'K')) {
            logf("keeper: unknown request of %zd bytes ignored", n);
            continue;
        }
        const bool keeper = req[0] == 'K';
        int sv[2];
        int32_t answer[2] = {req[0], 0};
        int give = -1;
        if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0) {
            answer[1] = -errno;
        } else {
            long pid = syscall(SYS_clone, CLONE_PARENT | SIGCHLD, 0, nullptr, nullptr, 0);
            if (pid == 0) {
                close(sv[0]);
                if (keeper) keeper_main(sv[1], relay, ev, flags);  // dup2 onto kZygoteCtl replaces ours
                close(kZygoteCtl);
                zygote_main(sv[1], relay, ev, flags);
            }
            answer[1] = pid < 0 ? -errno : int32_t(pid);
            close(sv[1]);
            give = sv[0];
        }
        ssize_t w = send_with_fds(kZygoteCtl, answer, sizeof answer, &give, answer[1] > 0 ? 1 : 0);
        if (give >= 0) close(give);
        // Not delivered: the relay is exiting (closed its end). The process just made reads EOF on
        // its socket and exits; the failure records still queued behind this request are read and
        // written all the same (recv returns 0 once they are: the loop ends there).
        (void)w;
    }
}

ssize_t send_with_fds(int sock, const void* buf, size_t len, const int* fds, int nfds) {
    if (nfds < 0 || nfds > 4) {
        errno = EINVAL;
        return -1;
    }
    struct iovec iov = {const_cast<void*>(buf), len};
    alignas(struct cmsghdr) char cbuf[CMSG_SPACE(4 * sizeof(int))];
    memset(cbuf, 0, sizeof cbuf);
    struct msghdr mh;
    memset(&mh, 0, sizeof mh);
    mh.msg_iov = &iov;
    mh.msg_iovlen = 1;
    if (nfds > 0) {
        mh.msg_control = cbuf;
        mh.msg_controllen = CMSG_SPACE(size_t(nfds) * sizeof(int));
        struct cmsghdr* c = CMSG_FIRSTHDR(&mh);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(size_t(nfds) * sizeof(int));
        memcpy(CMSG_DATA(c), fds, size_t(nfds) * sizeof(int));
    }
    return sendmsg(sock, &mh, MSG_NOSIGNAL);
}

ssize_t recv_with_fds(int sock, void* buf, size_t len, int* fds, int max_fds, int* total) {
    for (int i = 0; i < max_fds; ++i) fds[i] = -1;
    struct iovec iov = {buf, len};
    alignas(struct cmsghdr) char cbuf[CMSG_SPACE(4 * sizeof(int))];
    struct msghdr mh;
    memset(&mh, 0, sizeof mh);
    mh.msg_iov = &iov;
    mh.msg_iovlen = 1;
    mh.msg_control = cbuf;
    mh.msg_controllen = sizeof cbuf;
    ssize_t n;
    do n = recvmsg(sock, &mh, MSG_CMSG_CLOEXEC);
    while (n < 0 && errno == EINTR);
    if (n < 0) return n;
    int got = 0;
    for (struct cmsghdr* c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c)) {
        if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
        size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        for (size_t i = 0; i < k; ++i) {
            int fd;
            memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof fd);
            if (got < max_fds) fds[got] = fd;
            else close(fd);
            ++got;
        }
    }
    if (total) *total = got;
    return n;
}

std::string describe_status(int status) {
    if (WIFEXITED(status)) return "exited with status " + std::to_string(WEXITSTATUS(status));
    if (WIFSIGNALED(status)) return "killed by signal " + std::to_string(WTERMSIG(status));
    return "ended with wait status " + std::to_string(status);
}

}  // namespace nriqos::nri::procs
