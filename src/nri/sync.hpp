// Native NRI Synchronize (issue #20): the runtime's existing pods and containers, sent at
// registration (and at every reconnect of an external plugin), possibly split over several
// calls (NRI v0.8+ `more`). The relay collects the parts here, then evaluates every pod and
// container in one evaluator process for the whole pass (event "Synchronize", below
// kBatchHeader; src/nri/relay_sync.cpp) and answers the last part with the containers' updates.
// See docs/native-nri.md "Synchronize".
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "nri/nri_json.hpp"

namespace nriqos::nri {

/// Bounds of one Synchronize pass (all its parts together). Past them the rest is not
/// evaluated (logged and recorded once, reason "overloaded"); what was kept is.
constexpr size_t kMaxSyncBytes = 32u << 20;  ///< encoded pods + containers, bytes
constexpr size_t kMaxSyncObjects = 16384;  ///< pods + containers

/// The Synchronize evaluator's contract (one sandboxed process for a whole pass, issue #31 §8;
/// docs/native-nri.md "Synchronize"). Input: one header line
///   {"synchronize_batch":N,"pids":[P1,...]}
/// (N items; the pids of the pods and containers whose requests carry one, the union the
/// evaluator narrows its procfs write access to, in one Landlock layer), then N lines, each the
/// child-contract input of one item in SyncPass::items order (print_event, event "Synchronize").
/// Output: one child-contract answer line per item, in order, as each is final (its records are
/// written before the next item starts, except the last item's), then the end line
///   {"synchronize_batch_end":K}
/// (K items answered; K < N: the evaluator stopped at its own soft deadline, the rest were not
/// started). Output without the end line: the process ended early (its deadline answered the
/// item in flight, a crash, the relay's kill); the items after the last answer were not answered.
constexpr char kBatchHeader[] = "{\"synchronize_batch\":";
constexpr char kBatchEnd[] = "{\"synchronize_batch_end\":";
/// Bound of the evaluator's input for a Synchronize batch: the pass's own bound (kMaxSyncBytes of
/// protobuf) printed as JSON (at most ~3x, escapes included) plus the header; each item's line is
/// still bounded by the request parser (model/request.hpp limits::kMaxRequestBytes).
constexpr size_t kMaxBatchInputBytes = 3 * kMaxSyncBytes + (1u << 20);
/// Bound of its output: an answer line per item (a Synchronize answer is a few hundred bytes;
/// the evaluator's per-event bound, 1 MiB, for the largest), at most kMaxSyncObjects of them.
constexpr size_t kMaxBatchOutputBytes = 64u << 20;
/// The evaluator stops starting items this long before its own deadline (ms), so that the
/// relay's reply carries every answer it gave (the rest: evaluated after the reply).
constexpr int kBatchSoftMarginMs = 40;

/// One Synchronize pass: the parts received so far, then the evaluation order and the answer.
struct SyncPass {
    std::vector<pb::PodSandbox> pods;
    std::vector<pb::Container> containers;
    size_t bytes = 0;  ///< encoded size of what was kept
    unsigned parts = 0;  ///< Synchronize calls received
    size_t dropped = 0;  ///< pods + containers past the bounds (not evaluated)
    /// One evaluation: `pod` indexes pods; `ctr` indexes containers, or -1 for the pod itself.
    struct Item {
        int pod = -1;
        int ctr = -1;
    };
    std::vector<Item> items;  ///< evaluation order (sync_plan)
    std::vector<std::string> skipped;  ///< "ns/pod/name (id): reason", containers not evaluated
    pb::SynchronizeResponse response;  ///< the updates, answered to the last part
    uint32_t stream = 0;  ///< the last part's ttrpc stream (the reply's)
    int64_t started_ms = 0;  ///< CLOCK_MONOTONIC ms of the first part
    int64_t deadline_ms = 0;  ///< reply by then (CLOCK_MONOTONIC ms)
    size_t evaluated = 0, failed = 0;  ///< items answered by an evaluator / failed (fail-open)
    /// The reply went out before every item was evaluated (the deadline came first): the rest is
    /// evaluated after it as "SynchronizeLate" (every knob written directly), behind the
    /// runtime's events, each with an event's own budget.
    bool replied = false;
    size_t late = 0;  ///< items handed to the evaluators after the reply (counted when queued late)
};

/// Add one part's pods and containers to `pass` (moved out of `part`), within kMaxSyncBytes and
/// kMaxSyncObjects; what does not fit is counted in `pass.dropped`. Never throws except
/// std::bad_alloc.
void sync_add_part(SyncPass& pass, pb::SynchronizeRequest& part);

/// Fill `pass.items` in the event path's order: every pod first (its pod knobs and class memo,
/// as at RunPodSandbox), then every container whose pod is in the pass and whose state has a
/// cgroup to write (CREATED, RUNNING, PAUSED; NRI pkg/api ContainerState). A STOPPED or UNKNOWN
/// container, or one whose pod the runtime did not list, goes to `pass.skipped` with the reason.
void sync_plan(SyncPass& pass);

/// Whether a runtime's NRI may safely receive an unsolicited UpdateContainers request (Runtime
/// service) from a plugin: only NRI v0.12.1 and later. Earlier versions can deadlock containerd
/// when a plugin's UpdateContainers arrives while the runtime waits on that plugin
/// (containerd/containerd#13733). `nri_version` is ConfigureRequest.NRI_version ("v0.12.1"; sent
/// by NRI v0.12+ runtimes only): empty or unparsable means older, i.e. false.
/// nri-qos sends no unsolicited updates at all (Synchronize carries them in its reply); the
/// relay's one path to the Runtime service refuses UpdateContainers unless this holds.
bool unsolicited_updates_safe(const std::string& nri_version);

}  // namespace nriqos::nri
