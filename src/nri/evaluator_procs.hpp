// The processes of the relay's evaluation (docs/native-nri.md "Evaluators"), as they run: the
// spare that evaluates one event, the zygote that clones spares, the keeper that re-forks the
// zygote and the failure recorders. Their supervision from the relay's side (start, feed, time
// out, kill, reap) is in evaluator.cpp, their making (fork, ask the zygote or the keeper) in
// evaluator_spares.cpp. Internal to src/nri/.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "nri/evaluator.hpp"

namespace nriqos::nri::procs {

// Header the relay writes to a forked evaluator before the event: "NQEV", the evaluator's own
// budget in ms (uint32, host order), 8 reserved bytes. A spare that reads EOF instead exits 0.
constexpr size_t kHeaderSize = 16;
constexpr char kMagic[4] = {'N', 'Q', 'E', 'V'};
// Messages zygote -> relay: {kind, value}, two int32.
constexpr int32_t kMsgFailMode = 1;  // value: the policy's fail mode, 1 closed, 0 open, -1 unknown
constexpr int32_t kMsgSpare = 2;  // value: the spare's pid, or -errno
constexpr int32_t kMsgEvaluatorEvents = 3;  // value: the policy's settings.evaluator_events (>= 1)

// A resident evaluator (settings.evaluator_events > 1, docs/native-nri.md "Resident
// evaluators"): every event comes with the header "NQER", the budget (uint32, ms), the input's
// length (uint32, bytes), 4 reserved bytes — and stdin stays open for the next one. Its output per
// event: the answer (one line), the line kResidentAnswered (the answer is final: the relay replies),
// then, once the event's records are written, "kResidentDone <status> <evaluator_events>\n":
// <status> the exit status a one-shot evaluator would have had (0: records written; any other
// ends the evaluator), <evaluator_events> the setting of the policy this event loaded (0: none
// loaded). Then it waits for the next header; EOF or anything else ends it.
constexpr char kMagicResident[4] = {'N', 'Q', 'E', 'R'};
constexpr char kResidentAnswered[] = "#nri-qos:answered\n";
constexpr char kResidentDone[] = "#nri-qos:done ";

/// sendmsg(2) of `len` bytes of `buf` on `sock` with the `nfds` (at most 4) descriptors of `fds`
/// passed along (SCM_RIGHTS; none when `nfds` is 0), MSG_NOSIGNAL. Returns sendmsg's result.
ssize_t send_with_fds(int sock, const void* buf, size_t len, const int* fds, int nfds);

/// recvmsg(2) of one message of at most `len` bytes into `buf` on `sock`, with up to `max_fds`
/// descriptors passed along (SCM_RIGHTS, received O_CLOEXEC) into `fds` (unused slots -1; any
/// more are closed); `total` (optional) gets how many came. EINTR is retried. Returns recvmsg's
/// result (errno set when < 0).
ssize_t recv_with_fds(int sock, void* buf, size_t len, int* fds, int max_fds, int* total = nullptr);

/// "exited with status N" / "killed by signal N" for a wait(2) status.
std::string describe_status(int status);

/// A spare forked by the relay itself (no zygote): stdin `in_r`, stdout `out_w`; confines
/// itself (InProcessEval::prepare with `flags`), then evaluates one event and exits.
[[noreturn]] void spare_main(int in_r, int out_w, pid_t relay, const InProcessEval& ev, const std::vector<std::string>& flags);

/// The zygote on control socket `ctl`: confined once, clones a spare per request (one byte with
/// the spare's two pipe fds), answers {kMsgSpare, pid or -errno}; tells the policy's fail mode
/// ({kMsgFailMode, ...}) once known. Exits when the relay closes the socket.
[[noreturn]] void zygote_main(int ctl, pid_t relay, const InProcessEval& ev, const std::vector<std::string>& flags);

/// The keeper on control socket `ctl`: forks zygotes and reserve keepers on request (sending the
/// relay their control sockets; answer: int32 request byte 'Z' or 'K', int32 pid or -errno) and
/// failure recorders for relay-level failures (InProcessEval::record).
[[noreturn]] void keeper_main(int ctl, pid_t relay, const InProcessEval& ev, const std::vector<std::string>& flags);

/// Fork a recorder for `msg` (InProcessEval::record, confined, killed after a bound); with
/// `wait`, wait for it and return its exit status, else return its pid (or -1).
int run_recorder(const InProcessEval& ev, const std::vector<std::string>& flags, const std::string& msg, bool wait);

}  // namespace nriqos::nri::procs
