// Native NRI relay: Synchronize (issue #20). The parts of a pass are collected, its pods and
// containers evaluated ahead of the runtime's events, and the updates go out in the last part's
// reply; at the pass's deadline the reply goes out with what is there, and the rest is evaluated
// after it (SynchronizeLate). The pass's evaluations are decoded and answered with the other
// events' (relay_contract.cpp Relay::prepare, finish_event); the pass itself: src/nri/sync.hpp.
#include <unistd.h>

#include <algorithm>
#include <memory>
#include <string>

#include "nri/evaluator.hpp"
#include "nri/nri.pb.h"
#include "nri/relay_internal.hpp"
#include "nri/sync.hpp"
#include "nri/ttrpc.hpp"
#include "os/clock.hpp"

namespace nriqos::nri {

// Synchronize (issue #20): the runtime's existing pods and containers, at registration (NRI
// v0.7+; v0.6 only for external plugins) and at every reconnect. A part with more = true is
// collected and acknowledged at once with an empty reply that echoes `more` (NRI pkg/stub
// collectSync; the runtime closes a plugin whose reply to such a part carries an update). The
// last part starts the pass: every pod, then every container, all evaluated in one evaluator
// process (fork mode; each item like an event, "Synchronize"), ahead of any event the runtime sends
// meanwhile; the last part's reply carries the containers' updates (reply_sync). Nothing here
// can fail the runtime: an error reply to Synchronize closes the plugin, so a failure is
// recorded and the item answered without an update (fail-open).

namespace {
/// One queue entry of Synchronize pass `pass`: item `item` (an index into pass->items,
/// kBatchItem for the whole pass in one evaluator, kReplyItem for the pass's reply), arrived at
/// `arrival_ms` (monotonic ms; the reply keeps Pending's default 0).
Pending sync_entry(std::shared_ptr<SyncPass> pass, int item, int64_t arrival_ms) {
    Pending p;
    p.method = "Synchronize";
    p.arrival_ms = arrival_ms;
    p.sync = std::move(pass);
    p.item = item;
    return p;
}
}  // namespace

void Relay::on_synchronize(uint32_t stream, const RequestEnvelope& req) {
    pb::SynchronizeRequest part;
    if (!part.ParseFromString(req.payload)) {
        logf("Synchronize: malformed request; answered without evaluating the existing containers");
        sync_parts_.reset();
        reply_ok(stream, std::string());
        record_failure("malformed", "Synchronize", false, "open", "malformed Synchronize request: existing pods and containers not evaluated",
                       nullptr, -1);
        return;
    }
    if (!sync_parts_) {
        sync_parts_ = std::make_shared<SyncPass>();
        sync_parts_->started_ms = nriqos::monotonic_ms();
    }
    const bool more = part.more();
    sync_add_part(*sync_parts_, part);
    if (more) {
        pb::SynchronizeResponse rsp;
        rsp.set_more(true);
        reply_ok(stream, rsp.SerializeAsString());
        return;
    }
    std::shared_ptr<SyncPass> pass = std::move(sync_parts_);
    pass->stream = stream;
    // One deadline for the whole pass: the runtime's context spans every part (NRI pkg/adaptation
    // plugin.go synchronize: the plugin request timeout), so the last part's timeout_nano is what
    // is left of it.
    const int64_t now = nriqos::monotonic_ms();
    int64_t limit = pass->started_ms + (request_timeout_ms_ > 0 ? request_timeout_ms_ : kDefaultRequestTimeoutMs);
    if (req.timeout_nano > 0) limit = std::min<int64_t>(limit, now + req.timeout_nano / 1000000);
    pass->deadline_ms = limit - kReplyMarginMs;
    sync_plan(*pass);
    created_at_sync_.clear();
    for (const SyncPass::Item& it : pass->items)
        if (it.ctr >= 0 && pass->containers[size_t(it.ctr)].state() == pb::CONTAINER_CREATED)
            created_at_sync_.insert(pass->containers[size_t(it.ctr)].id());
    for (const std::string& why : pass->skipped) logf("Synchronize %s: not evaluated", why.c_str());
    if (pass->dropped > 0) {
        std::string why = std::to_string(pass->dropped) + " pods/containers past the relay's bounds (" + std::to_string(kMaxSyncObjects) +
                          " objects, " + std::to_string(kMaxSyncBytes >> 20) + " MiB) not evaluated";
        logf("Synchronize: %s", why.c_str());
        record_failure("overloaded", "Synchronize", false, "open", why, nullptr, -1);
    }
    if (o_.debug) {
        logf("Synchronize: %zu pods, %zu containers in %u part(s); %zu evaluations within %lld ms", pass->pods.size(), pass->containers.size(),
             pass->parts, pass->items.size(), (long long)(pass->deadline_ms - now));
    }
    if (sup_.batch_mode() && !pass->items.empty()) {
        // One request, one evaluator (issue #31 §8): every item in one sandboxed process
        // (prepare_batch, finish_batch); what it does not answer is evaluated alone, as below.
        syncq_.push_back(sync_entry(pass, kBatchItem, now));
    } else {  // exec mode (a command per event), an evaluator without it: one evaluator per item
        for (size_t i = 0; i < pass->items.size(); ++i) syncq_.push_back(sync_entry(pass, int(i), now));
    }
    syncq_.push_back(sync_entry(std::move(pass), kReplyItem, 0));  // the reply, once every evaluation ended
}

void Relay::sync_queue_items(const std::shared_ptr<SyncPass>& pass, size_t from, size_t to) {
    const int64_t now = nriqos::monotonic_ms();
    for (size_t i = to; i-- > from;) syncq_.push_front(sync_entry(pass, int(i), now));
}

// Who item `item` of `pass` is, as prepare() names a Synchronize item (records, logs, the update).
void Relay::sync_identity(const std::shared_ptr<SyncPass>& pass, int item, Current& c) const {
    c = Current();
    c.method = "Synchronize";
    c.event = "Synchronize";
    c.sync = pass;
    c.item = item;
    const SyncPass::Item& it = pass->items[size_t(item)];
    const pb::PodSandbox& pod = pass->pods[size_t(it.pod)];
    c.subject = pod.namespace_() + "/" + pod.name();
    c.ns = pod.namespace_();
    c.pod = pod.name();
    c.sandbox_id = pod.id();
    if (it.ctr >= 0) {
        const pb::Container& ctr = pass->containers[size_t(it.ctr)];
        c.subject += "/" + ctr.name();
        c.container_id = ctr.id();
        c.container = ctr.name();
    }
}

// The evaluator's input for the whole pass (sync.hpp kBatchHeader): the header with the pids its
// sandbox is narrowed to, then each item as prepare() prints one, in the pass's order (pods first:
// a pod's memo is stored before its containers are evaluated, as at the runtime's events).
void Relay::prepare_batch(const std::shared_ptr<SyncPass>& pass, Current& c) {
    c = Current();
    c.method = "Synchronize";
    c.event = "Synchronize";
    c.sync = pass;
    c.item = kBatchItem;
    c.subject = "(" + std::to_string(pass->items.size()) + " pods and containers in one evaluator)";
    std::string pids;
    for (const SyncPass::Item& it : pass->items) {
        const uint32_t pid = it.ctr >= 0 ? pass->containers[size_t(it.ctr)].pid() : pass->pods[size_t(it.pod)].pid();
        if (pid > 0) pids += (pids.empty() ? "" : ",") + std::to_string(pid);
    }
    c.input.reserve(pass->bytes * 2 + pids.size() + 64);
    c.input = kBatchHeader + std::to_string(pass->items.size()) + ",\"pids\":[" + pids + "]}\n";
    for (const SyncPass::Item& it : pass->items) {
        print_event(c.input, "Synchronize", runtime_name_, runtime_version_, pass->pods[size_t(it.pod)],
                    it.ctr >= 0 ? &pass->containers[size_t(it.ctr)] : nullptr, nullptr);
        c.input.push_back('\n');
    }
}

// The pass's evaluator ended: each answer line is taken as one item's evaluation ended
// (finish_event: its update into the reply, or its failure recorded), in order; the items it did
// not answer are evaluated alone after it — before the reply while the pass's deadline allows,
// else after the reply (SynchronizeLate). An evaluator that ended without its end line (a crash,
// its deadline, the relay's kill) is on the record when it failed; the item it was evaluating is
// evaluated alone again, and fails or is answered there on its own record.
void Relay::finish_batch(Outcome& oc) {
    Current batch = std::move(cur_);
    cur_ = Current();
    std::shared_ptr<SyncPass> pass = batch.sync;
    if (oc.after_answer) {  // its last item's records: a records-cut or died-after-answer names the pass
        Current& who = answered_[oc.id];
        who = batch;
        std::string().swap(who.input);
    }
    const size_t n = pass->items.size();
    size_t k = 0;
    bool ended = false;
    std::string out;
    out.swap(oc.output);
    size_t pos = 0;
    while (pos < out.size() && !ended) {
        size_t e = out.find('\n', pos);
        if (e == std::string::npos) break;  // an unfinished line: not an answer
        std::string line = out.substr(pos, e - pos);
        pos = e + 1;
        if (line.empty()) continue;
        if (line.compare(0, sizeof kBatchEnd - 1, kBatchEnd) == 0) {
            ended = true;
            break;
        }
        if (k >= n) continue;  // more answers than items: never expected, ignored
        sync_identity(pass, int(k++), cur_);
        Outcome one;
        one.output = std::move(line);
        one.took_ms = oc.took_ms;
        finish_event(one);
    }
    cur_ = Current();
    if (!ended) {
        std::string why = oc.failure.empty() ? std::string("ended without its end line (its own deadline, or died)") : oc.failure;
        logf("Synchronize: the evaluator of %zu pods/containers %s after %zu answers; the other %zu are evaluated one by one", n, why.c_str(), k,
             n - k);
        if (!oc.failure.empty())
            record_failure(oc.kind.empty() ? "crash" : oc.kind.c_str(), "Synchronize", false, "open",
                           "Synchronize evaluator of " + std::to_string(n) + " pods/containers: " + oc.failure + " after " + std::to_string(k) +
                               " answers; the other " + std::to_string(n - k) + " are evaluated one by one",
                           nullptr, oc.took_ms);
    } else if (o_.debug) {
        logf("Synchronize: one evaluator answered %zu of %zu pods/containers in %lld ms", k, n, (long long)oc.took_ms);
    }
    if (k < n) {
        if (pass->replied) pass->late += n - k;  // behind the runtime's events, each alone
        sync_queue_items(pass, k, n);
    }
}

void Relay::reply_sync(SyncPass& pass, bool in_flight) {
    logf(
        "Synchronize: %zu pods, %zu containers (%u part(s)): %zu evaluated, %zu failed (open), %zu not evaluated%s; "
        "%d container updates; %lld ms",
        pass.pods.size(), pass.containers.size(), pass.parts, pass.evaluated, pass.failed, pass.skipped.size() + pass.dropped,
        pass.late || in_flight
            ? (", " + std::to_string(pass.late) + (in_flight ? " (and the one in flight)" : "") + " evaluated after this reply (SynchronizeLate)")
                  .c_str()
            : "",
        pass.response.update_size(), (long long)(nriqos::monotonic_ms() - pass.started_ms));
    reply_ok(pass.stream, pass.response.SerializeAsString());
    pass.replied = true;
    pb::SynchronizeResponse().Swap(&pass.response);
    if (o_.status_fd >= 0) {
        ssize_t w = write(o_.status_fd, "synced\n", 7);
        (void)w;
    }
}

// The pass's deadline comes before its last evaluation: answer the runtime now with the updates
// gathered so far (a late reply would only make containerd close the plugin), and evaluate the
// rest after the reply, every knob written directly (SynchronizeLate), so that on a node too
// large or too slow for one request timeout every existing container still gets its class.
void Relay::sync_go_late(SyncPass& pass) {
    for (const Pending& q : syncq_) {
        if (q.sync.get() != &pass) continue;
        if (q.item >= 0) ++pass.late;
        else if (q.item == kBatchItem) pass.late += pass.items.size();  // not started: each alone, late
    }
    // The container being evaluated now: its update can no longer be answered. It is counted late
    // only once it ends and is queued again (relay_contract.cpp finish_event); if its evaluation
    // fails instead, it is recorded as a failure and never evaluated late.
    reply_sync(pass, sup_.busy() && cur_.sync.get() == &pass && !cur_.container_id.empty());
}

// The Synchronize pass whose reply has not gone out yet: being evaluated, or next in syncq_.
SyncPass* Relay::unreplied_pass() {
    if (sup_.busy() && cur_.sync && !cur_.sync->replied) return cur_.sync.get();
    for (const Pending& q : syncq_)
        if (q.sync && !q.sync->replied) return q.sync.get();
    return nullptr;
}

}  // namespace nriqos::nri
