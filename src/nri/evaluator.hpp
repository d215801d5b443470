// Supervision of the relay's evaluator processes: every NRI event is evaluated in a process of
// its own, which the relay starts, feeds, times out, kills and reaps here. Protocol dispatch is in
// relay.cpp; this file knows nothing of ttrpc or NRI messages (input and output are the child
// contract's JSON, docs/native-nri.md "Child contract").
//
// Two ways to get that process:
//  * fork mode (the real binary): a **spare** evaluator is ready before the event comes. Spares
//    are cloned by a **zygote**: a process forked once from the relay (after Configure, again
//    when the plugin config changes or it dies) that closed everything of the relay's and
//    confined itself (InProcessEval::prepare, zygote = true: seccomp + Landlock, inherited by
//    every clone). On request the zygote clones a spare with CLONE_PARENT, so the spare is the
//    relay's child (the relay reaps it and kills its process group); the spare narrows its
//    seccomp filter back to the evaluator's list (InProcessEval::detach) and waits on its stdin
//    pipe. An event costs a pipe round-trip plus the evaluation; the next spare is asked for
//    after the reply went out (off the critical path). Each spare evaluates one event and exits:
//    a crash or a hostile input costs that event only, and the policy is read at event time
//    (the file's current contents). Without a zygote (it could not start, or keeps dying) the
//    relay forks the spare itself and the spare confines itself (prepare, zygote = false).
//    Why a zygote: loading the evaluator's 83-instruction seccomp program costs ~170 µs per
//    process on this class of machine (JIT), the 17-instruction drop filter ~16 µs, and the
//    relay's own pages are not shared copy-on-write with a new process at every event.
//  * exec mode: `posix_spawn` of `child_argv` per event (tests' fake children, debugging,
//    comparisons). The argv gets the plugin-config flags and `<deadline_flag> <ms>` appended.
#pragma once

#include <poll.h>
#include <sys/types.h>

#include <cstdint>
#include <deque>
#include <functional>
#include <string>
#include <vector>

namespace nriqos::nri {

/// What a forked evaluator runs (fork mode). Both functions run only in the evaluator process,
/// never in the relay.
struct InProcessEval {
    /// Right after the fork from the relay, before any byte of an event exists: apply the plugin
    /// config flags (`{"--policy", "/etc/nri/x.toml", "--debug", ...}`, as for an exec'd child)
    /// and confine the process; `zygote` selects the zygote's seccomp profile (which may clone).
    /// Returns "" or one line for the relay's log.
    std::function<std::string(const std::vector<std::string>& flags, bool zygote)> prepare;
    /// In a spare cloned by the zygote, before the event: give up the zygote's extra system calls
    /// (src/os/sandbox.hpp drop_zygote_calls) and ready the spare's own narrowing layer
    /// (prepare_narrowing). Returns "" or why not (the spare then exits unused).
    std::function<std::string()> detach;
    /// In the zygote, before it clones each spare (off the event's critical path): refresh what the
    /// spare inherits from memory (the compiled policy: policy_cache::preload). Returns true when
    /// the policy file changed (compiled or not): the zygote then clones a prober
    /// (probe_fail_mode), which compiles it into the cache in the background when it is not, so
    /// that the events after it need not (a large policy cannot be compiled within an event's
    /// deadline; issue 19 §2), and tells the relay its fail mode and settings.evaluator_events.
    /// Optional; must not throw.
    std::function<bool()> before_spare;
    /// In a spare, ready and confined, before it waits for its event: prepare what the event will
    /// need while there is nothing else to do (arena, page faults: arena::prefault). Optional;
    /// must not throw.
    std::function<void()> warm;
    /// Evaluate one event: read it from fd 0 until EOF, write one answer (child contract JSON) to
    /// fd 1 and end it (EOF) as soon as it is final; whatever else the event needs (its records)
    /// may follow while the relay already replies. `budget_ms` is the evaluator's own deadline (the
    /// relay SIGKILLs `kChildMarginMs` later, answered or not). Returns the exit status (after a
    /// complete answer: 0 = records written, nriqos::kExitRecordsCut, else died after the answer).
    std::function<int(int budget_ms)> evaluate;
    /// `evaluate` also takes a whole Synchronize pass as one input (src/nri/sync.hpp kBatchHeader:
    /// every pod and container of the request in this one process, one answer line each). False
    /// (tests' fake evaluators, comparisons with the one-process-per-item path): the relay starts
    /// one evaluator per pod and container of the pass.
    bool synchronize_batch = false;
    /// Resident evaluators (settings.evaluator_events > 1; evaluator_procs.hpp kMagicResident):
    /// evaluate one event of a process that serves several: arm the deadline (`budget_ms`), read
    /// exactly `len` bytes of input from fd 0, write the answer and the line kResidentAnswered to
    /// fd 1 (which stays open) as soon as it is final, then write the event's records. Returns the
    /// status a one-shot `evaluate` would have exited with (0: records written; any other ends the
    /// evaluator); `evaluator_events` gets the settings.evaluator_events of the policy the event
    /// loaded (left 0 when none was). Procfs writes stay as wide as the sandbox's first layer
    /// (Options::sandbox_keep_wide: Landlock cannot be widened again for the next event's pid).
    /// Optional: without it every event gets an evaluator of its own.
    std::function<int(int budget_ms, uint32_t len, uint32_t& evaluator_events)> evaluate_resident;
    /// In a prober, right after probe_fail_mode: the settings.evaluator_events of the policy it
    /// loaded (0: unknown), sent to the relay as {kMsgEvaluatorEvents, n}. Optional.
    std::function<int()> probed_evaluator_events;
    /// In a prober cloned by the zygote (confined as the zygote) when it starts and when
    /// before_spare says the policy changed: load the policy the way an event does, compiling it
    /// into the cache (and saving it as the last good copy) on a miss, and return its fail mode
    /// (settings.fail): 1 closed, 0 open, -1 unknown (no policy, broken). Told to the relay as
    /// soon as known, usually before the first event (optional).
    std::function<int()> probe_fail_mode;
    /// Record one relay-level failure (src/nri/failure_record.hpp) where the confined relay cannot
    /// write: runs in a short-lived recorder process forked by the keeper for each message (or by
    /// the relay while it is not confined and has no keeper). `msg` is the relay's message,
    /// untrusted (at most nri::kMaxFailureMsg bytes), `flags` the plugin config flags. It must
    /// confine the process to the sink directories (resolved from its own options and `flags`,
    /// never from `msg`) before it parses `msg`. Returns the exit status (0 = written).
    /// Optional: without it failures are only in the relay's log.
    std::function<int(const std::vector<std::string>& flags, const std::string& msg)> record;
    /// In the relay (confined: it may stat, not open): a signature of what `prepare` confines an
    /// evaluator to that can change while the relay runs — the record paths the last policy named
    /// (<state_dir>/sinks, src/event/publish.hpp sinks_memo_signature). When it changes, the zygote and
    /// the spares made under the old one are replaced (Supervisor::ensure_spare): they could not
    /// write the records. Optional.
    std::function<std::string(const std::vector<std::string>& flags)> roots_signature;
};

/// Settings of the supervisor (filled by the relay from RelayOptions).
struct SupervisorOptions {
    /// Exec mode: argv of the child ([0] an absolute path); used when `inproc.evaluate` is empty.
    std::vector<std::string> child_argv;
    /// Exec mode: flag appended with the child's own budget in ms ("" = none).
    std::string deadline_flag;
    /// Fork mode when `evaluate` is set.
    InProcessEval inproc;
    /// Largest accepted child output in bytes; more counts as a failure.
    size_t max_output = 1u << 20;
    bool debug = false;
};

/// How one evaluation ended.
struct Outcome {
    std::string output;  ///< everything the evaluator wrote to stdout
    std::string failure;  ///< "" when `output` is the answer; else why it is not (crash, timeout, ...)
    /// With `failure`: its kind for the record (src/nri/failure_record.hpp): "timeout", "crash",
    /// "bad-output" or "shutdown" (abort_running's caller names it).
    std::string kind;
    int64_t took_ms = 0;  ///< from the start of the evaluation to its end
    /// The evaluation's serial number (1, 2, ...; 0: none ran).
    uint64_t id = 0;
    /// It ran in a resident evaluator (settings.evaluator_events > 1), not one of its own.
    bool resident = false;
    /// The evaluator answered and is still alive, writing the event's records (or it ended badly
    /// right after the answer): one AfterAnswer with this `id` follows (Supervisor::take_after_answer).
    bool after_answer = false;
};

/// How an evaluator that had answered ended (Supervisor::take_after_answer). The answer itself
/// stood and was replied; this is about the event's records, which it writes after the answer.
struct AfterAnswer {
    uint64_t id = 0;  ///< Outcome::id of its evaluation
    /// "" when it exited 0 (records written); else the relay failure kind
    /// (src/nri/failure_record.hpp): "records-cut" (killed at the deadline or by the bound of
    /// finishing evaluators, or its own deadline cut them: exit status kExitRecordsCut) or
    /// "died-after-answer" (any other non-zero exit or signal).
    std::string kind;
    std::string reason;  ///< one line for the relay's log and the record
    int64_t took_ms = 0;  ///< from the start of the evaluation to its end
};

/// Evaluators that answered and still write their records, at most. With that many, the next
/// event waits for one to end (a record takes about a millisecond), at most kFinishingWaitMs after
/// the oldest answered; then the oldest is killed and recorded as records-cut.
constexpr size_t kMaxFinishing = 4;
constexpr int64_t kFinishingWaitMs = 20;

/// Head start of the evaluator's own deadline before the relay's SIGKILL (ms).
constexpr int64_t kChildMarginMs = 100;

/// The relay's evaluator processes: at most one evaluation at a time, plus (fork mode) the zygote
/// and one idle spare, plus up to kMaxFinishing evaluators that answered and still write their
/// records. Single-threaded, driven by the relay's poll() loop. Every evaluator is killed with its
/// whole process group at its deadline (answered or not) or on shutdown, and every child reaped.
class Supervisor {
public:
    explicit Supervisor(SupervisorOptions o);
    ~Supervisor();
    Supervisor(const Supervisor&) = delete;
    Supervisor& operator=(const Supervisor&) = delete;

    /// Once, before the first start(): SIGCHLD self-pipe, exec environment (ours minus
    /// NRI_PLUGIN_SOCKET).
    void setup();
    /// An evaluation method is configured (fork or exec).
    bool can_evaluate() const;
    bool fork_mode() const { return bool(o_.inproc.evaluate); }
    /// A whole Synchronize pass may go to one evaluator (fork mode, InProcessEval::synchronize_batch).
    bool batch_mode() const { return fork_mode() && o_.inproc.synchronize_batch; }
    /// Plugin-config flags for the evaluator. The zygote and spares made with other flags are
    /// retired.
    void set_flags(const std::vector<std::string>& flags);
    /// False while the zygote is still cloning the spare the next event should use (start() would
    /// have to fork one itself); the pid arrives within a fraction of a millisecond. Also false
    /// while kMaxFinishing evaluators write their records, for at most kFinishingWaitMs.
    bool ready_to_start() const;
    /// Start evaluating `input` (JSON, newline-terminated) with the hard deadline `deadline_ms`
    /// (CLOCK_MONOTONIC ms). Uses the ready spare if there is one. False, with `err`, when no
    /// process could be started.
    /// `max_output` (bytes; 0: SupervisorOptions::max_output) bounds this evaluation's output
    /// (the Synchronize evaluator's: one answer per item, sync.hpp kMaxBatchOutputBytes).
    /// `end_line` (non-empty: an evaluation that answers in several lines, the Synchronize
    /// evaluator's sync.hpp kBatchEnd): its output is complete only once its last line starts with
    /// this; an exit before that is a failure ("crash", or "records-cut" for exit status
    /// nriqos::kExitRecordsCut), its output kept in the Outcome.
    bool start(const std::string& input, int64_t deadline_ms, std::string& err, size_t max_output = 0, const std::string& end_line = std::string());
    /// An evaluation is running.
    bool busy() const { return active_; }
    /// Fork mode: start the zygote if needed and ask it for a spare when none is ready or on its
    /// way. Call when idle, after replies were sent. Backs off after zygotes/spares died.
    void ensure_spare();
    /// Append the fds to poll (SIGCHLD pipe, keeper and zygote sockets, running evaluation's pipes,
    /// the resident evaluator's stdout) to `pfd`; at most 6.
    int add_pollfds(struct pollfd* pfd);
    /// Longest poll() timeout in ms that keeps the deadline and reaping on time (-1: none).
    int poll_timeout(int64_t now) const;
    /// After poll(): drain SIGCHLD, take the zygote's answers, move data, check the deadline,
    /// reap. True (and `out` filled) when the running evaluation ended. `pfd` is the array
    /// add_pollfds() filled.
    bool service(const struct pollfd* pfd, Outcome& out);
    /// How evaluators that had answered ended since the last call (appended to `out`); false when
    /// none did. Each Outcome with `after_answer` gets exactly one.
    bool take_after_answer(std::vector<AfterAnswer>& out);
    /// Before stop_all (the relay is exiting): give the evaluators still writing their records up to
    /// `wait_ms` to finish, then kill them (reported as records-cut by take_after_answer).
    void drain_finishing(int64_t wait_ms);
    /// End the running evaluation now with `why` as its failure (e.g. Shutdown), of kind `kind`.
    Outcome abort_running(const std::string& why, const std::string& kind = "shutdown");
    /// Fork mode, once the plugin config is known and before the relay confines itself: fork the
    /// keeper, the one process that makes zygotes from then on (with the flags as they are now).
    /// False when it could not be forked (zygotes are then forked by the relay while it can).
    /// ensure_spare then asks the keeper for a reserve keeper, which takes over when the keeper
    /// dies (the confined relay cannot fork one; issue 19 §2), and asks again after each take-over.
    bool start_keeper();
    /// The relay is confined from now on: it forks nothing any more (no fallback spares; zygotes
    /// only from the keeper).
    void set_confined() { confined_ = true; }
    bool has_keeper() const { return keeper_pid_ > 0; }
    /// A reserve keeper is ready (made by the keeper on request, ensure_spare): it takes over when
    /// the keeper dies.
    bool has_reserve_keeper() const { return reserve_pid_ > 0; }
    /// Helper processes lost since the last call (appended to `out`): {kind, reason}, kind
    /// "keeper-lost" (the keeper died: its reserve took over, when there was one) or "zygote-lost"
    /// (the zygote died or stopped answering: a new one is asked of the keeper). The relay puts
    /// each on the record (failure_record.hpp, outcome "replaced"). False when none.
    bool take_losses(std::vector<std::pair<std::string, std::string>>& out);
    /// Have a relay-level failure (`msg`: nri::failure_message) written to the event log and the
    /// metrics by a process allowed to: sent to the keeper (one datagram, never blocking), or,
    /// without a keeper and while the relay is not confined, a recorder forked here. Returns ""
    /// or why it could not be handed over (the relay logs that; the record is lost).
    std::string record_failure(const std::string& msg);
    /// Kill everything (running evaluation, spares, zygote, keeper), reap what exits within ~100 ms.
    /// The keeper first gets up to 1 s to write the failure records it was sent.
    void stop_all();
    /// settings.evaluator_events as the evaluators last reported it (a prober's
    /// {kMsgEvaluatorEvents, n}, a resident's done line): how many events one evaluator serves.
    /// 1 (the default): every event gets a process of its own. With n > 1, single events (not a
    /// Synchronize pass) go to the resident evaluator (a spare that stays: evaluator_procs.hpp
    /// kMagicResident) until it served n of them, failed in any way (crash, deadline, bad output,
    /// a non-zero status after its answer, any unexpected byte), or the flags or record paths
    /// changed; then a fresh spare takes its place. Needs InProcessEval::evaluate_resident.
    uint32_t evaluator_events() const { return ev_events_; }
    void set_evaluator_events(uint32_t n);
    /// Resident evaluators started so far, and events they served.
    uint64_t residents_started() const { return residents_; }
    uint64_t resident_events() const { return resident_served_total_; }
    /// Evaluator processes started so far (exec'd, forked or cloned), and zygotes.
    uint64_t started() const { return started_; }
    uint64_t zygotes_started() const { return zygotes_; }
    /// The policy's fail mode as a new zygote found it (1 closed, 0 open), once per report; false
    /// when nothing new was reported.
    bool take_policy_fail_mode(int& mode) {
        if (policy_fail_mode_ < 0) return false;
        mode = policy_fail_mode_;
        policy_fail_mode_ = -1;
        return true;
    }

private:
    struct Proc {
        pid_t pid = -1;
        int in_fd = -1;  // its stdin (we write)
        int out_fd = -1;  // its stdout (we read)
        uint64_t gen = 0;  // flags generation it was prepared with
    };
    bool spawn_exec(int64_t deadline_ms, Proc& p);
    bool fork_spare(Proc& p);
    bool start_zygote();
    void keeper_answer();
    void lose_keeper(const std::string& why, bool reaped);
    void ask_reserve();
    bool ask_zygote();
    void zygote_answers();
    void retire_zygote(const char* why);
    void retire(Proc& p);
    void close_fds(Proc& p);
    void kill_group(pid_t pid);
    bool known(pid_t pid) const;
    void reap_others();
    void io(short in_rev, short out_rev);
    bool finish_if_done(Outcome& out);
    bool resident_wanted(const std::string& end_line) const;
    void resident_io(short rev);
    void resident_after(const std::string& kind, const std::string& reason);
    void retire_resident(const char* why);
    Outcome end(const std::string& failure, const std::string& kind = std::string(), bool keep = false);
    void reap_finishing();
    bool reap_finishing_at(size_t i, bool exited);
    void expire_finishing(int64_t now, const char* why);

    SupervisorOptions o_;
    std::vector<std::string> flags_;
    uint64_t flags_gen_ = 1;
    std::vector<std::string> env_store_;
    std::vector<char*> envp_;

    // fork mode
    pid_t zyg_pid_ = -1;
    int zyg_ctl_ = -1;
    uint64_t zyg_gen_ = 0;
    std::deque<Proc> zyg_pending_;  // asked for, pid not known yet (fds are ours already)
    int64_t zyg_asked_ms_ = 0;
    int policy_fail_mode_ = -1;
    int zyg_deaths_ = 0;
    int64_t zyg_backoff_until_ = 0;
    std::string roots_sig_;  // InProcessEval::roots_signature when the zygote/spares were made
    bool roots_sig_known_ = false;
    bool roots_check_ = true;  // an evaluation ended (it may have moved the record paths) since
        // the last roots_signature check
    int64_t roots_checked_ms_ = 0;
    std::deque<Proc> spares_;  // ready: pid known, own process group
    int spare_deaths_ = 0;
    int64_t spare_backoff_until_ = 0;

    bool active_ = false;
    Proc run_;
    size_t run_max_output_ = 0;  // the running evaluation's output bound
    std::string run_end_line_;  // ... and its end line ("": one answer, looks_complete)
    std::string input_;
    size_t in_off_ = 0;
    std::string output_;
    bool out_eof_ = false;
    bool overflow_ = false;
    bool reaped_ = false;
    int status_ = 0;
    int64_t deadline_ms_ = 0;
    int64_t started_ms_ = 0;
    int pfd_sig_ = -1, pfd_zyg_ = -1, pfd_in_ = -1, pfd_out_ = -1, pfd_keeper_ = -1;
    pid_t keeper_pid_ = -1;
    int keeper_ctl_ = -1;
    uint64_t keeper_gen_ = 0;
    bool keeper_asked_ = false;  // a zygote was requested, the answer not read yet
    // The reserve keeper (the keeper's clone, the relay's child): idle until the keeper dies.
    pid_t reserve_pid_ = -1;
    int reserve_ctl_ = -1;
    bool reserve_asked_ = false;  // a reserve was requested, the answer not read yet
    int64_t reserve_backoff_until_ = 0;
    std::vector<std::pair<std::string, std::string>> losses_;  // take_losses
    bool confined_ = false;

    // Evaluators that answered and write their records (own process group, not reaped yet).
    struct Finishing {
        pid_t pid = -1;
        uint64_t id = 0;
        int64_t started_ms = 0, answered_ms = 0, deadline_ms = 0;
    };
    std::vector<Finishing> finishing_;  // oldest first
    std::vector<AfterAnswer> after_;  // reports not taken yet
    // The resident evaluator (settings.evaluator_events > 1): between its events, or writing the
    // records of the one it answered (res_fin_active_, res_fin_ that event); pid -1: none.
    uint32_t ev_events_ = 1;
    Proc res_;
    uint32_t res_served_ = 0;  // events it started (the running one included)
    bool res_fin_active_ = false;
    Finishing res_fin_;
    std::string res_buf_;  // its output since its last answer
    bool run_resident_ = false;  // the running evaluation is framed (kMagicResident)
    int pfd_res_ = -1;
    uint64_t residents_ = 0, resident_served_total_ = 0;
    uint64_t run_id_ = 0;  // the running (or last) evaluation's serial
    std::vector<pid_t> stragglers_;  // killed or retired, not reaped yet
    bool chld_ = true;  // SIGCHLD seen since the last reap_others()
    bool child_changed_ = false;  // ... in this service() round (for the running child)
    int64_t last_reap_ms_ = 0;
    uint64_t started_ = 0;
    uint64_t zygotes_ = 0;
};

/// The relay's log: one line "nri-qos relay[pid]: ..." to stderr. Every line the relay and its
/// supervisor write goes through here (one place to add timestamps or structure, issue #11).
void logf(const char* fmt, ...) __attribute__((format(printf, 1, 2)));

}  // namespace nriqos::nri
