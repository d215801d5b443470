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

namespace nri {

// Synchronize (issue #20): the runtime's existing pods and containers, at registration (NRI
// v0.7+; v0.6 only for external plugins) and at every reconnect. A part with more = true is
// collected and acknowledged at once with an empty reply that echoes `more` (NRI pkg/stub
// collectSync; the runtime closes a plugin whose reply to such a part carries an update). The
// last part starts the pass: every pod, then every container, each evaluated in an evaluator
// process of its own like an event ("Synchronize"), ahead of any event the runtime sends
// meanwhile; the last part's reply carries the containers' updates (reply_sync). Nothing here
// can fail the runtime: an error reply to Synchronize closes the plugin, so a failure is
// recorded and the item answered without an update (fail-open).
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
    sync_parts_->started_ms = now_ms();
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
  const int64_t now = now_ms();
  int64_t limit = pass->started_ms + (request_timeout_ms_ > 0 ? request_timeout_ms_ : kDefaultRequestTimeoutMs);
  if (req.timeout_nano > 0) limit = std::min<int64_t>(limit, now + req.timeout_nano / 1000000);
  pass->deadline_ms = limit - kReplyMarginMs;
  sync_plan(*pass);
  for (const std::string& why : pass->skipped) logf("Synchronize %s: not evaluated", why.c_str());
  if (pass->dropped > 0) {
    std::string why = std::to_string(pass->dropped) + " pods/containers past the relay's bounds (" +
                      std::to_string(kMaxSyncObjects) + " objects, " + std::to_string(kMaxSyncBytes >> 20) + " MiB) not evaluated";
    logf("Synchronize: %s", why.c_str());
    record_failure("overloaded", "Synchronize", false, "open", why, nullptr, -1);
  }
  if (o_.debug) {
    logf("Synchronize: %zu pods, %zu containers in %u part(s); %zu evaluations within %lld ms", pass->pods.size(),
         pass->containers.size(), pass->parts, pass->items.size(), (long long)(pass->deadline_ms - now));
  }
  for (size_t i = 0; i < pass->items.size(); ++i) {
    Pending p;
    p.method = "Synchronize";
    p.arrival_ms = now;
    p.sync = pass;
    p.item = int(i);
    syncq_.push_back(std::move(p));
  }
  Pending last;  // the reply, once every evaluation ended
  last.method = "Synchronize";
  last.sync = std::move(pass);
  syncq_.push_back(std::move(last));
}

void Relay::reply_sync(SyncPass& pass, bool in_flight) {
  logf("Synchronize: %zu pods, %zu containers (%u part(s)): %zu evaluated, %zu failed (open), %zu not evaluated%s; "
       "%d container updates; %lld ms",
       pass.pods.size(), pass.containers.size(), pass.parts, pass.evaluated, pass.failed, pass.skipped.size() + pass.dropped,
       pass.late || in_flight
           ? (", " + std::to_string(pass.late) + (in_flight ? " (and the one in flight)" : "") +
              " evaluated after this reply (SynchronizeLate)").c_str()
           : "",
       pass.response.update_size(), (long long)(now_ms() - pass.started_ms));
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
  for (const Pending& q : syncq_)
    if (q.sync.get() == &pass && q.item >= 0) ++pass.late;
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

}  // namespace nri
