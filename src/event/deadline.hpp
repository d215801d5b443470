// The self-imposed deadline of one event: its state (one object, Deadline), the SIGALRM handler
// that answers when it fires, and the calls by which the pipeline keeps its answer current.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

namespace nriqos {

struct Options;  // pipeline.hpp
struct EventRecord;  // records/record.hpp
struct SinkPaths;  // publish.hpp

enum class Mode { Invoke, Explain, NriEval };

/// Exit status of an evaluator whose own deadline fired after it had delivered its answer
/// (Options::deliver): the answer stands (it was final), but the event's records — event log
/// line, metrics, last request — may be incomplete. The handler writes one line to stderr and
/// exits with this status; the relay records it (relay failure reason "records-cut",
/// src/nri/evaluator.cpp). 74 is EX_IOERR of sysexits.h.
constexpr int kExitRecordsCut = 74;

/// Grace (ms) after a deadline that cut the request's input: run_pipeline loads the policy and
/// answers with its fail mode within it; if even that hangs, the prepared fail-open answer goes out.
inline constexpr int kDeadlineInputGraceMs = 200;

/// The whole state of the self-imposed deadline (setitimer(ITIMER_REAL) + SIGALRM), for one event
/// at a time (one process, one thread: the hook, or the relay's evaluator, which runs its events
/// one after the other). There is one instance, Deadline::the(), in static storage: the signal
/// handler can reach nothing else.
///
/// The answer printed when the deadline fires is prepared beforehand, and prepared again as soon
/// as the pipeline knows more (stage()): the request (record only), the policy's fail mode (or,
/// while a policy is compiled, compile_fail_mode's), then the class's once the request is
/// classified — always before any kernel file is written. A new answer goes into the slot of
/// `answers` the handler is not using, with the record of the same stage (publish.hpp
/// prepare_deadline_record, same slot number); one lock-free atomic store of `active` then makes
/// both current, so the handler never prints the answer of one stage with the record of another.
///
/// Async-signal-safe, i.e. what on_signal() (the handler) touches: `answers` (read only, the
/// active slot), `active`, `input_phase`, `answered` (lock-free atomics), and write(2),
/// setitimer(2), _exit(2) and publish.hpp record_on_deadline (open, flock, write, close). Nothing
/// it reads is ever written while it could run: a slot is written only while it is not active.
/// `mode`, `ms` and `start_ns` are plain: written only with the timer disarmed (arm, disarm).
/// Everything else — the calls that build the answers — runs outside the handler and allocates.
struct Deadline {
    /// One prepared answer: what the handler writes to stdout and stderr, and its exit status.
    struct Answer {
        char out[1024]{};
        size_t out_len = 0;
        char err[256]{};
        size_t err_len = 0;
        int code = 0;  ///< exit status: invoke fail-closed 1 (the Result carries an error), else 0
    };
    Answer answers[2];  ///< two slots: stage() writes the one that is not `active`
    std::atomic<int> active{0};  ///< the slot the handler reads (and the record slot it passes on)
    Mode mode = Mode::Invoke;
    int ms = 0;  ///< 0: not armed
    /// 0: not reading the request; 1: reading it; 2: the deadline cut it (input_begin()).
    std::atomic<int> input_phase{0};
    /// 1 once Options::deliver has delivered the answer: a deadline then cuts the records only.
    std::atomic<int> answered{0};
    int64_t start_ns = 0;  ///< CLOCK_MONOTONIC at arm() (0: never armed): the event's start

    /// The one instance (static storage: the handler's).
    static Deadline& the();

    /// Arm for `mode` (no-op for Explain or `ms_` <= 0; the start time is set in any case): the
    /// fail-open answer nothing else is known for, the handler, the timer.
    void arm(Mode mode_, int ms_);
    /// Stop the timer; the deadline is no longer armed (stage() and the record calls no-ops).
    void disarm();
    /// A new event in the same process (arm_next_deadline): no answer delivered, not reading.
    void reset_event();
    /// One stage: the record `rec` (publish.hpp prepare_deadline_record, outcome per `closed`)
    /// and — when `answer` — the answer with the fail mode `closed` (the policy's
    /// `policy_closed`, class `cls`; else the current answer is kept) into the free slot, then
    /// made current by one store. `mode_from`: see deadline_answer. No-op when not armed.
    void stage(const EventRecord& rec, const SinkPaths& paths, bool closed, bool answer, bool policy_closed, const std::string& cls,
               const char* mode_from = nullptr);
    /// Options::deliver is about to write the answer: from then on (once the caller's SIGALRM
    /// block ends) a deadline cuts the records only.
    void mark_answered() { answered.store(1, std::memory_order_release); }
    bool armed() const { return ms > 0; }
    /// The handler (SIGALRM). Async-signal-safe; never returns except to extend the input grace.
    void on_signal();
};

/// CLOCK_MONOTONIC (ns) when arm_deadline() was called, i.e. at the start of the invocation
/// (0 when it was not): the start of the event's duration in the record and the metrics.
int64_t invocation_start_ns();

/// Arm the self-imposed deadline (setitimer + SIGALRM): when `ms` pass before the pipeline
/// returns, a prepared Result (invoke) or nri-eval result is written to stdout and the process
/// exits — unless the answer was delivered already (Options::deliver): then only a line on
/// stderr and exit status kExitRecordsCut, no second answer and no "deadline exceeded" record. Call it before reading the request, so a stdin that never closes is bounded too.
/// Until the policy is loaded the answer is fail-open (nothing says otherwise yet: no request,
/// no policy); run_pipeline prepares it again with compile_fail_mode's (the file's settings.fail
/// read ahead, its last good copy's, the built-in policy's) when the policy must be compiled (a cache miss), with the
/// policy's own fail mode once the policy is loaded, and with the class's once the request is
/// classified, before any write. No-op for
/// Explain or ms <= 0.
void arm_deadline(Mode mode, int ms);

/// The next event of a process that evaluates several in turn (the relay's Synchronize
/// evaluator, src/nri/eval_pipeline.cpp): as arm_deadline(mode, ms), and the event starts afresh:
/// its own start time (the duration in its record and metrics), no answer delivered yet (a
/// deadline before its answer writes this event's deadline answer and record), not reading input.
/// The deadline record is reset to "unparsed" for `opt`'s sinks (prepare_deadline_record), so a
/// deadline never writes the previous event's record. No-op for Explain or ms <= 0 (then only
/// the start time is reset).
void arm_next_deadline(Mode mode, int ms, const Options& opt);

/// The input phase of the deadline (a stdin that stays open, a runtime that writes slowly).
/// Between deadline_input_begin() and deadline_input_end() a deadline that fires does not answer
/// from the signal handler (nothing is known: no request, no policy): it interrupts the read
/// (EINTR: the handler is installed without SA_RESTART), marks the input as cut and arms a
/// kDeadlineInputGraceMs fallback. run_pipeline then answers "deadline exceeded while reading
/// the request" with the fail mode of the policy in force (fail-closed refuses the container),
/// records the event and exits. Closes issue 9's "deadline before the policy" hole. A policy
/// load that itself exceeds the grace (a compile: no cached entry) answers with compile_fail_mode's
/// (issue 19 §2, issue #30 item 5).
void deadline_input_begin();
/// True when the deadline cut the input (the reader stops; see deadline_input_begin()).
bool deadline_input_cut();
/// Leave the input phase; returns deadline_input_cut().
bool deadline_input_end();

/// The deadline answer for `mode` (Invoke or NriEval): fail-closed (`closed`) puts
/// "nri-qos: deadline exceeded after <ms> ms (class <cls>): fail-closed, ..." into `error` (invoke
/// exit status 1); fail-open puts a warning into metadata. nri-eval's on_child_failure is the
/// policy's mode (`policy_closed`). `cls` ("" unknown) goes into metadata.class. One JSON line.
/// `mode_from` (nullptr: the mode is the policy's or the class's own): the deadline fired while
/// the policy was being compiled, and `closed` is compile_fail_mode's, whose `why` phrase (no
/// '"' or '\\') goes in parentheses into the error/warning text; nri-eval then also says
/// "deadline": true, so that the relay does not take that mode for the compiled policy's.
std::string deadline_answer(Mode mode, bool closed, bool policy_closed, const std::string& cls, int ms, int& exit_code,
                            const char* mode_from = nullptr);

/// The fail mode (true: closed) of a deadline that fires while a policy file is being compiled
/// (no compiled entry: an edit, a reboot, a new or large file), when neither the compiled
/// policy's settings.fail nor the request's class is known yet: the deadline answer of the
/// stage "policy known, request not classified" (settings.fail: what applies when nri-qos
/// cannot classify, nri-qos.toml(5)), made before the compile. After the compile one of two
/// policies applies: the file (its settings.fail `text_closed`, read ahead by policy.hpp
/// read_fail_mode; nullopt when that pass found text the compile will reject), or — should the
/// compile reject the file — its last good copy (`last_good_closed`, policy_store.hpp
/// last_good_fail_closed; nullopt: none) else the built-in policy (`builtin_closed`). The
/// answer is closed when either could apply and is closed, else open: a fail-closed policy
/// never fails open because it is new or large, and a broken file never turns a closed node
/// open. `why` gets the phrase deadline_answer puts in parentheses, e.g. "the policy file's
/// settings.fail, read ahead of its compile".
bool compile_fail_mode(std::optional<bool> text_closed, std::optional<bool> last_good_closed, bool builtin_closed, std::string& why);

/// Prepare the event record the deadline handler writes if the deadline fires before the
/// request is even parsed (sandbox set-up, a slow stdin): call right after arm_deadline().
void prepare_deadline_record(Mode mode, const Options& opt);

/// Tests: the answer (stdout text) the handler would print if the deadline fired now; "" when
/// the deadline is not armed.
std::string deadline_answer_in_force();

}  // namespace nriqos
