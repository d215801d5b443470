// In-process pipeline evaluator of the relay, see eval_pipeline.hpp.
#include "nri/eval_pipeline.hpp"

#include "event/publish.hpp"

#include <sched.h>
#include <sys/stat.h>
#include <unistd.h>

#include "nri/failure_record.hpp"

#include <cerrno>
#include <cstdlib>
#include <ctime>
#include <memory>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "nri/evaluator_procs.hpp"
#include "nri/sync.hpp"

#include "os/arena.hpp"
#include "policy/policy_cache.hpp"
#include "policy/policy_store.hpp"
#include "model/request.hpp"
#include "os/sandbox.hpp"
#include "os/clock.hpp"
#include "os/fd.hpp"

namespace nriqos::nri {

namespace {

bool is_batch(const std::string& in) { return in.compare(0, sizeof kBatchHeader - 1, kBatchHeader) == 0; }

// stdin until EOF, at most one event's bound (the parser reports a longer one), or a Synchronize
// batch's (sync.hpp kMaxBatchInputBytes) when it starts with the batch header: read up to the
// event's bound first, and on past it only for a batch (its header is long read by then).
bool read_all_stdin(std::string& out) {
    static_assert(kMaxBatchInputBytes >= nriqos::limits::kMaxRequestBytes, "a batch's bound is the larger");
    if (!nriqos::read_all(STDIN_FILENO, out, nriqos::limits::kMaxRequestBytes)) return false;
    if (out.size() <= nriqos::limits::kMaxRequestBytes || !is_batch(out)) return true;  // EOF, or the parser reports it
    return nriqos::read_all(STDIN_FILENO, out, kMaxBatchInputBytes);  // the batch's header check reports a longer one
}

using nriqos::write_all;

/// "dev:ino:size:mtime:ctime" of `path` (stat), or "" when it cannot be stat'ed: tells an edit.
std::string file_identity(const std::string& path) {
    struct stat st {};
    if (stat(path.c_str(), &st) != 0) return "";
    return std::to_string(st.st_dev) + ":" + std::to_string(st.st_ino) + ":" + std::to_string(st.st_size) + ":" + std::to_string(st.st_mtim.tv_sec) +
           "." + std::to_string(st.st_mtim.tv_nsec) + ":" + std::to_string(st.st_ctim.tv_sec) + "." + std::to_string(st.st_ctim.tv_nsec);
}

// The Synchronize evaluator (sync.hpp kBatchHeader): every item of one pass in this process, in
// order, each through the same pipeline as a one-event evaluator (its answer, its kernel writes,
// its memo, its records), after one narrowing of the sandbox to the union of the items' pids.
// Each item has the deadline machinery of an event (arm_next_deadline: its own start time and
// deadline answer); no item starts within kBatchSoftMarginMs of the budget's end.
int evaluate_batch(nriqos::Options& o, const std::string& input, int budget_ms, int64_t t0_ms) {
    const size_t eol = input.find('\n');
    std::vector<long> pids;
    std::vector<std::string_view> lines;
    std::string bad;
    if (eol == std::string::npos || input.size() > kMaxBatchInputBytes) {
        bad = input.size() > kMaxBatchInputBytes ? "input larger than " + std::to_string(kMaxBatchInputBytes) + " bytes" : "no header line";
    } else {
        nlohmann::json h = nlohmann::json::parse(input.begin(), input.begin() + std::ptrdiff_t(eol), nullptr, false);
        auto p = h.is_object() ? h.find("pids") : h.end();
        if (!h.is_object() || p == h.end() || !p->is_array()) {
            bad = "malformed header line";
        } else {
            for (const auto& v : *p)
                if (v.is_number_integer() && v.get<long long>() > 0 && v.get<long long>() <= 4194304) pids.push_back(long(v.get<long long>()));
            std::string_view rest(input);
            rest.remove_prefix(eol + 1);
            while (!rest.empty() && lines.size() < kMaxSyncObjects) {
                size_t e = rest.find('\n');
                std::string_view l = rest.substr(0, e);
                if (!l.empty()) lines.push_back(l);
                if (e == std::string_view::npos) break;
                rest.remove_prefix(e + 1);
            }
        }
    }
    if (!bad.empty()) {  // never expected (the relay writes it): the relay evaluates each item alone
        logf("Synchronize evaluator: %s; no item evaluated", bad.c_str());
        write_all(STDOUT_FILENO, std::string(kBatchEnd) + "0}\n");
        return 0;
    }
    o.evaluator_mode = "synchronize-pass";
    // Test-only (tests/e2e `unseen`, issue #33 §4): NRI_QOS_TEST_SYNC_DELAY_MS (1-60000) holds this
    // evaluator that long before its first item, so that the runtime's Synchronize request stays
    // open — a container created meanwhile is one the runtime never reports. The pass's deadline
    // still holds (what is left is evaluated late); said on the relay's log at every pass.
    if (const char* d = getenv("NRI_QOS_TEST_SYNC_DELAY_MS")) {
        long ms = strtol(d, nullptr, 10);
        if (ms > 0 && ms <= 60000) {
            logf("Synchronize evaluator: NRI_QOS_TEST_SYNC_DELAY_MS: waiting %ld ms before the first item (test setting)", ms);
            struct timespec ts = {ms / 1000, (ms % 1000) * 1000000};
            while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {}
        }
    }
    if (!o.sandbox_keep_wide) {
        if (std::string e = nriqos::narrow_installed_sandbox_union(pids); !e.empty()) logf("Synchronize evaluator: sandbox: %s", e.c_str());
        o.sandbox_keep_wide = true;  // narrowed once, for every item
    }
    size_t answered = 0;
    bool closed = false;
    auto end_line = [&answered] { return std::string(kBatchEnd) + std::to_string(answered) + "}\n"; };
    // The answer's end (EOF): stderr onto fd 1, as for one event (evaluate_one_shot's deliver).
    auto close_out = [&closed] {
        if (dup3(STDERR_FILENO, STDOUT_FILENO, 0) < 0) close(STDOUT_FILENO);
        closed = true;
        sched_yield();  // let the relay read it now (see evaluate_one_shot's deliver)
    };
    for (size_t i = 0; i < lines.size(); ++i) {
        const int64_t left = budget_ms - (nriqos::monotonic_ms() - t0_ms);
        if (left < kBatchSoftMarginMs) break;  // the rest after the relay's reply (SynchronizeLate)
        nriqos::arm_next_deadline(nriqos::Mode::NriEval, int(left), o);
        const bool last = i + 1 == lines.size();
        bool delivered = false;
        o.deliver = [&](const std::string& answer) {
            std::string l = answer;
            while (!l.empty() && (l.back() == '\n' || l.back() == '\r' || l.back() == ' ')) l.pop_back();
            l.push_back('\n');
            ++answered;
            if (last) l += end_line();
            write_all(STDOUT_FILENO, l);
            delivered = true;
            if (last) close_out();
        };
        int code = 0;
        std::string out = nriqos::run_pipeline(nriqos::Mode::NriEval, o, lines[i], code);
        if (!delivered) o.deliver(out);  // never expected: NriEval delivers every answer
        o.deliver = nullptr;
    }
    if (!closed) {
        write_all(STDOUT_FILENO, end_line());
        close_out();
    }
    return 0;
}

}  // namespace

std::string apply_eval_flags(nriqos::Options& o, const std::vector<std::string>& flags) {
    std::string why;
    for (size_t i = 0; i < flags.size(); ++i) {
        const std::string& f = flags[i];
        if (f == "--debug") {
            o.debug = true;
            continue;
        }
        if (i + 1 >= flags.size()) {
            why += (why.empty() ? "" : "; ") + f + ": missing value";
            break;
        }
        const std::string& v = flags[++i];
        if (f == "--policy") {
            o.policy = v;
            o.policy_from_flag = true;
        } else if (f == "--cgroup-root") {
            o.cgroup_root = v;
        } else if (f == "--proc-root") {
            o.proc_root = v;
        } else if (f == "--resctrl-root") {
            o.resctrl_root = v;
        } else if (f == "--sysfs-root") {
            o.sysfs_root = v;  // read only (facts.hpp NUMA topology): no sandbox root
        } else if (f == "--dev-root") {
            o.dev_root = v;  // read only (facts.hpp rubik.blkio_limit: stat): no sandbox root
        } else if (f == "--kubelet-cpu-state") {
            o.kubelet_cpu_state = v;  // read only (numa.hpp held CPUs): no sandbox root
        } else if (f == "--state-dir") {
            o.state_dir = v;
        } else if (f == "--cache-dir") {
            o.cache_dir = v;
        } else if (f == "--last-good-dir") {
            o.last_good_dir = v;
            o.last_good_dir_set = true;
        } else if (f == "--metrics-file") {
            o.metrics_file = v;
        } else if (f == "--event-log") {
            o.event_log = v;
        } else if (f == "--runtime-log") {
            o.runtime_log = v;  // the failure recorder's only (failure_record.hpp runtime_log_excerpt)
        } else if (f == "--cgroup-layout") {
            try {
                o.layout = nriqos::parse_layout(v);
            } catch (const std::exception& e) { why += (why.empty() ? "" : "; ") + f + ": " + e.what(); }
        } else {
            why += (why.empty() ? "" : "; ") + f + ": not an evaluation flag";
        }
    }
    return why;
}

namespace {

/// InProcessEval::prepare: the evaluation flags `flags` (plugin config) applied to the shared
/// options, the policy file's identity kept in `probed` for the zygote, and the sandbox installed
/// (zygote or evaluator profile). Returns the note for the relay's log ("": nothing to say).
std::string prepare_evaluator(const std::shared_ptr<nriqos::Options>& opts, const std::shared_ptr<std::string>& probed,
                              const std::vector<std::string>& flags, bool zygote) {
    nriqos::Options& o = *opts;
    std::string note = apply_eval_flags(o, flags);
    if (zygote) *probed = file_identity(o.policy);  // the zygote's first prober compiles this one
    if (!note.empty()) note = "plugin config: " + note;
    if (!nriqos::sandbox_disabled_by_env()) {
        nriqos::SandboxRoots roots{o.cgroup_root, o.proc_root, o.resctrl_root, o.state_dir, o.cache_dir, o.policy, nriqos::last_good_dir_of(o), {}};
        roots.sink_dirs = nriqos::sink_dirs_before_parse(o.metrics_file, o.event_log, o.state_dir);
        nriqos::SandboxStatus sb = nriqos::install_sandbox(roots, zygote ? nriqos::SandboxProfile::Zygote : nriqos::SandboxProfile::Evaluator);
        if (o.debug || !sb.seccomp) note += (note.empty() ? "" : "; ") + std::string("sandbox: ") + sb.summary();
    }
    return note;
}

/// InProcessEval::probe_fail_mode: loads the policy events will use (compiling it into the cache
/// on a miss) and returns its fail mode (1 closed, 0 open, -1 unknown); its
/// settings.evaluator_events into `probed_events`.
int probe_policy_fail_mode(const std::shared_ptr<nriqos::Options>& opts, const std::shared_ptr<int>& probed_events) {
    // The policy events will use (policy_store.hpp: the file, its last good copy or the built-in
    // policy), loaded as an event loads it: on a miss it is compiled into the cache and saved as
    // the last good copy here, in the background, not within an event's deadline.
    try {
        nriqos::PolicyInfo info;
        nriqos::PolicyPlaces w;
        w.cache_dir = opts->cache_dir;
        w.last_good_dir = nriqos::last_good_dir_of(*opts);
        nriqos::Policy p = nriqos::effective_policy(opts->policy, opts->policy == nriqos::defaults::kPolicy, w, nullptr, info);
        *probed_events = int(p.evaluator_events);
        return p.fail_closed ? 1 : 0;
    } catch (...) {
        return -1;  // the relay keeps what it knows
    }
}

/// InProcessEval::record: a relay failure message `msg` published to the sinks the options and
/// `flags` name (publish.hpp publish_relay_failure), with the runtime log's excerpt for an
/// adjustment the runtime undid. Returns publish_relay_failure's exit code.
int record_relay_failure(const std::shared_ptr<nriqos::Options>& opts, const std::vector<std::string>& flags, const std::string& msg) {
    // In a recorder process of the keeper (evaluator_procs.cpp run_recorder). The paths are ours
    // (command line, plugin config, the last policy's <state_dir>/sinks, defaults), never the
    // message's; writes are confined beneath their directories before the message is parsed.
    nriqos::Options o = *opts;
    apply_eval_flags(o, flags);  // a refused flag is reported by the zygote
    std::string note;
    nriqos::SinkPaths paths = nriqos::sink_paths_before_parse(o.metrics_file, o.event_log, o.state_dir);
    // An adjustment the runtime undid: the runtime's log names the other NRI plugin. Read here,
    // before the sandbox (journalctl is an exec), from our configured place only; the message is
    // not parsed for it (a substring test of its kind only picks the records that need it).
    // containerd logs the failed create after it undid it (the RemoveContainer that caused this
    // record came first), so the log is read after a short wait, and once more if it had nothing.
    std::string excerpt, excerpt_why;
    if (msg.find("\"adjustment-rejected\"") != std::string::npos) {
        usleep(300 * 1000);
        excerpt = nri::runtime_log_excerpt(o.runtime_log, 400, excerpt_why);
        if (excerpt.empty()) {
            usleep(400 * 1000);
            excerpt = nri::runtime_log_excerpt(o.runtime_log, 400, excerpt_why);
        }
        if (excerpt.empty()) logf("failure recorder: runtime log: %s", excerpt_why.c_str());
    }
    if (!nriqos::sandbox_disabled_by_env()) {
        nriqos::SandboxRoots roots;
        roots.sink_dirs = nriqos::sink_dirs_before_parse(o.metrics_file, o.event_log, o.state_dir);
        nriqos::SandboxStatus sb = nriqos::install_sandbox(roots);
        if (!sb.seccomp) note += (note.empty() ? "" : "; ") + std::string("sandbox: ") + sb.summary();
    }
    if (!note.empty()) logf("failure recorder: %s", note.c_str());
    return publish_relay_failure(msg, paths, excerpt, o.runtime_log.empty() ? "journal:containerd" : o.runtime_log);
}

/// InProcessEval::before_spare: the compiled policy preloaded; true when a prober should run
/// first (the policy file changed since `probed`, and is not a compiled file seen first).
bool probe_before_spare(const std::shared_ptr<nriqos::Options>& opts, const std::shared_ptr<std::string>& probed) {
    // The compiled policy the next event will most likely use, in memory (the zygote's seccomp
    // and Landlock profile allow reading the cache directory: it is one of the evaluator's roots).
    // A file that changed is probed once, compiled or not: the prober tells the relay its fail
    // mode and its settings.evaluator_events (issue #34: a policy that turns resident
    // evaluators on is compiled by the event that first reads it, not by a prober).
    const bool hit = nriqos::policy_cache::preload(opts->policy, opts->cache_dir);
    std::string id = file_identity(opts->policy);
    if (*probed == id) return false;
    const bool first = probed->empty();  // not known yet: a compiled file needs no prober
    *probed = id;
    return !(hit && first);
}

/// InProcessEval::evaluate_resident: one event of `len` bytes read from stdin and evaluated within
/// `budget_ms` by a resident evaluator; its answer, then procs::kResidentAnswered, on stdout.
/// `evaluator_events`: the policy's settings.evaluator_events. Returns the pipeline's exit code;
/// _exit(72) on input the relay never writes.
int evaluate_resident_event(const std::shared_ptr<nriqos::Options>& opts, int budget_ms, uint32_t len, uint32_t& evaluator_events) {
    nriqos::Options& o = *opts;
    // Landlock cannot be widened again: the first layer (every root an event may write) serves
    // every event of this process, never one event's /proc/<pid> (docs/native-nri.md).
    o.sandbox_keep_wide = true;
    o.evaluator_mode = "resident";
    o.policy_evaluator_events = &evaluator_events;
    nriqos::arm_next_deadline(nriqos::Mode::NriEval, budget_ms, o);
    if (len > nriqos::limits::kMaxRequestBytes + 1) _exit(72);  // never from the relay: it bounds every event
    std::string input(len, '\0');
    size_t off = 0;
    while (off < len) {
        ssize_t n = read(STDIN_FILENO, &input[off], len - off);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) _exit(72);  // the relay wrote less than it announced: not a state to go on from
        off += size_t(n);
    }
    int code = 0;
    bool delivered = false;
    o.deliver = [&delivered](const std::string& answer) {
        std::string l = answer;
        while (!l.empty() && (l.back() == '\n' || l.back() == '\r' || l.back() == ' ')) l.pop_back();
        l += '\n';
        l += procs::kResidentAnswered;
        write_all(STDOUT_FILENO, l);
        delivered = true;
        sched_yield();  // as the one-shot deliver below: the relay reads the answer now
    };
    std::string out = nriqos::run_pipeline(nriqos::Mode::NriEval, o, input, code);
    o.deliver = nullptr;
    o.policy_evaluator_events = nullptr;
    if (!delivered) write_all(STDOUT_FILENO, out + "\n" + procs::kResidentAnswered);  // never expected: NriEval delivers every answer
    return code;
}

/// InProcessEval::evaluate: a one-shot evaluator's event (or Synchronize batch, evaluate_batch)
/// read from stdin to EOF and evaluated within `budget_ms`; the answer on stdout, whose end is
/// EOF, before the records. Returns the pipeline's exit code.
int evaluate_one_shot(const std::shared_ptr<nriqos::Options>& opts, int budget_ms) {
    nriqos::Options& o = *opts;
    const int64_t t0 = nriqos::monotonic_ms();
    o.evaluator_mode = "one-shot";
    nriqos::arm_deadline(nriqos::Mode::NriEval, budget_ms);
    std::string input;
    if (!read_all_stdin(input)) input.clear();
    if (is_batch(input)) return evaluate_batch(o, input, budget_ms, t0);
    int code = 0;
    // Answer first, records after (pipeline.hpp Options::deliver): the relay replies to the
    // runtime as soon as fd 1 reaches EOF, and lets this process finish its records meanwhile.
    bool delivered = false;
    o.deliver = [&delivered](const std::string& answer) {
        write_all(STDOUT_FILENO, answer);
        // The answer's end: the pipe's write end is closed by putting stderr (the relay's log) on
        // fd 1, so that the number is never reused by a file a record opens, and a stray write to
        // stdout lands in the log. Without dup3 (never expected), close it.
        if (dup3(STDERR_FILENO, STDOUT_FILENO, 0) < 0) close(STDOUT_FILENO);
        delivered = true;
        // Let the relay have the answer now, not after our records. A pipe write wakes its reader
        // as a "sync" wakeup (fs/pipe.c pipe_write: wake_up_interruptible_sync_poll), which tells
        // the scheduler that the writer is about to sleep: the relay is queued on this CPU, behind
        // us, even with the other CPU free. We do not sleep, we write the records, and the relay
        // used to wait for the end of our time slice (a trace of the native benchmark: ~190 µs of
        // the ~220 µs between this write and the relay's read). sched_yield (allowed by the
        // evaluator's seccomp list) puts us behind it; with nothing else runnable here it returns
        // at once. tests/sandbox.sh checks the order (answer, dup3, sched_yield, records).
        sched_yield();
    };
    std::string out = nriqos::run_pipeline(nriqos::Mode::NriEval, o, input, code);
    o.deliver = nullptr;
    if (!delivered) write_all(STDOUT_FILENO, out);
    return code;
}

}  // namespace

InProcessEval pipeline_evaluator(const nriqos::Options& base) {
    auto opts = std::make_shared<nriqos::Options>(base);
    opts->default_sinks = true;  // event record, metrics, last request (src/event/publish.hpp), as `nri-eval`
    InProcessEval e;
    // The identity of the policy file the zygote last had probed (and so compiled): a changed file
    // without a compiled entry is probed once, not before every spare while it compiles.
    auto probed = std::make_shared<std::string>();
    e.prepare = [opts, probed](const std::vector<std::string>& flags, bool zygote) -> std::string {
        return prepare_evaluator(opts, probed, flags, zygote);
    };
    auto probed_events = std::make_shared<int>(0);
    e.probed_evaluator_events = [probed_events]() -> int { return *probed_events; };
    e.probe_fail_mode = [opts, probed_events]() -> int { return probe_policy_fail_mode(opts, probed_events); };
    e.record = [opts](const std::vector<std::string>& flags, const std::string& msg) -> int { return record_relay_failure(opts, flags, msg); };
    e.roots_signature = [opts](const std::vector<std::string>& flags) -> std::string {
        nriqos::Options o = *opts;
        apply_eval_flags(o, flags);
        return nriqos::sinks_memo_signature(o.state_dir);
    };
    e.before_spare = [opts, probed]() -> bool { return probe_before_spare(opts, probed); };
    e.warm = []() {
        // A spare is single-threaded (cloned from the zygote's one thread) and exits after its
        // event: the one-shot arena serves it (src/os/arena.hpp), its pages mapped before the event.
        nriqos::arena::enable();
        nriqos::arena::prefault(96u << 10);  // a native event uses ~50-80 KiB of it (gdb: arena g_top at exit)
    };
    e.detach = []() -> std::string {
        const nriqos::SandboxStatus* sb = nriqos::installed_sandbox();
        if (!sb || !sb->seccomp) return "";  // nothing to narrow (sandbox off or unavailable: said by the zygote)
        std::string why = nriqos::drop_zygote_calls();
        // This spare's own narrowing ruleset, before its event (on failure the pipeline builds it).
        if (why.empty()) nriqos::prepare_narrowing();
        return why;
    };
    e.synchronize_batch = true;  // evaluate() takes a whole Synchronize pass (evaluate_batch)
    e.evaluate_resident = [opts](int budget_ms, uint32_t len, uint32_t& evaluator_events) -> int {
        return evaluate_resident_event(opts, budget_ms, len, evaluator_events);
    };
    e.evaluate = [opts](int budget_ms) -> int { return evaluate_one_shot(opts, budget_ms); };
    return e;
}

}  // namespace nriqos::nri
