// Private to src/nri/relay*.cpp (not API; the relay's API is relay.hpp): the Relay class, the
// requests it holds, the limits and the helpers its files share. The relay's concerns, one file
// each:
//  * relay.cpp: protocol dispatch: the trunk socket (mux, ttrpc), RegisterPlugin, Configure, the
//    NRI methods and their replies, the queue of event requests and its deadlines, the failure
//    records of what the relay refuses or fails itself, and the main poll() loop;
//  * relay_sync.cpp: Synchronize passes (parts, the pass's evaluations, its reply, what is
//    evaluated after it: SynchronizeLate);
//  * relay_contract.cpp: the child contract of one event: the NRI request decoded into the
//    evaluator's input, the evaluator's answer turned into the reply, and the CreateContainer
//    adjustments remembered until the container starts (a removal before that: the runtime undid
//    the create, on_removed);
//  * relay_process.cpp: the relay process itself: its set-up, confinement, log file, dropping of
//    start-up text pages, and the options of containerd's launch environment.
// The evaluator processes are supervised in evaluator.cpp (Supervisor).
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "nri/evaluator.hpp"
#include "nri/mux.hpp"
#include "nri/nri.pb.h"
#include "nri/relay.hpp"
#include "nri/sync.hpp"
#include "nri/ttrpc.hpp"

namespace nriqos::nri {

// Reply margin kept between the child's hard deadline and the runtime's request timeout, and
// the head start the child's own deadline gets before our SIGKILL.
constexpr int64_t kReplyMarginMs = 250;
constexpr int64_t kMinBudgetMs = 50;
// Overload bound (docs/native-nri.md "Overload"). The relay evaluates one event at a time;
// event requests that arrive meanwhile (containerd serialises events per runtime, but several
// ttrpc streams may be open at once) wait in queue_, at most kMaxQueued requests and
// kMaxQueuedBytes request bytes. A request past either limit is answered at once with its
// event's fail mode and recorded (kind "overloaded": nri_qos_relay_failures_total{reason=
// "overloaded"}); a queued one is answered within its own deadline (start_next). Synchronize
// evaluations have bounds of their own (sync.hpp kMaxSyncObjects, kMaxSyncBytes).
constexpr size_t kMaxQueued = 64;
constexpr size_t kMaxQueuedBytes = 8u << 20;
// Unsent bytes toward the runtime before we consider it gone.
constexpr size_t kMaxOutq = 8u << 20;
// The runtime's request timeout when Configure does not say (NRI < v0.8): containerd's default
// plugin_request_timeout, 2 s.
constexpr int64_t kDefaultRequestTimeoutMs = 2000;

// The relay's log when its stderr is /dev/null or closed (Relay::run, stderr_is_devnull).
constexpr const char* kDefaultRelayLog = "/var/log/nri-qos/relay.log";

// Helpers the files share, documented where they are defined: relay.cpp
bool is_admission(const std::string& ev);
int runtime_nri_minor(const std::string& name, const std::string& version, const std::string& nri_version);
SupervisorOptions supervisor_options(const RelayOptions& o);
// ... relay_contract.cpp
int dedicated_event(const std::string& method, bool& with_container);
// ... and relay_process.cpp
void drop_resident_text();
void redirect_log(const std::string& path);
bool stderr_is_devnull();

// Pending::item / Current::item of a Synchronize pass that is not one of its items.
constexpr int kReplyItem = -1;  // the pass's reply
constexpr int kBatchItem = -2;  // every item of the pass in one evaluator process

struct Pending {
    uint32_t stream = 0;
    std::string method;
    std::string payload;
    int64_t timeout_nano = 0;
    int64_t arrival_ms = 0;
    // One evaluation of a Synchronize pass (method "Synchronize", stream 0: no reply of its own;
    // `item` indexes sync->items), the whole pass in one evaluator (item kBatchItem, fork mode:
    // sync.hpp kBatchHeader), or the pass's reply (item kReplyItem) after its last evaluation.
    std::shared_ptr<SyncPass> sync;
    int item = -1;
};

// The event being evaluated (the request's identity; the process is the supervisor's).
struct Current {
    uint32_t stream = 0;
    std::string method;
    std::string event;
    std::string subject;  // "ns/pod[/container]" for logs
    std::string container_id;  // UpdateContainer reply target
    std::string ns, pod, container, sandbox_id;  // for the failure record
    std::string input;  // child contract JSON
    std::shared_ptr<SyncPass> sync;  // a Synchronize evaluation: its update goes into the pass's reply
    int item = -1;  // its index in sync->items, or kBatchItem (the whole pass)
};

class Relay {
public:
    explicit Relay(const RelayOptions& o) : o_(o), sup_(supervisor_options(o)) {}
    int run();

private:
    bool open_trunk();
    void setup_process();
    void send_message(uint32_t conn, uint32_t stream, uint8_t type, const std::string& payload);
    void reply_ok(uint32_t stream, const std::string& payload);
    void reply_error(uint32_t stream, int code, const std::string& message);
    void flush_out();
    void read_trunk();
    void handle_message(uint32_t conn, TtrpcMessage& m);
    void handle_request(uint32_t stream, RequestEnvelope& req);
    void enqueue(uint32_t stream, RequestEnvelope& req);
    void on_configure(uint32_t stream, const std::string& payload);
    void on_synchronize(uint32_t stream, const RequestEnvelope& req);
    /// Reply to the pass's runtime request. `in_flight`: a container's evaluation still runs (its
    /// update misses this reply; counted late if it ends and is queued again), said in the log line.
    void reply_sync(SyncPass& pass, bool in_flight = false);
    bool call_runtime(const char* method, const std::string& payload);
    void start_next();
    void expire_queued();
    void confine();
    bool prepare(Pending& p, Current& c);
    void finish_event(Outcome& oc);
    // Synchronize in one evaluator (relay_sync.cpp): its input, who item `item` is, its answers.
    void prepare_batch(const std::shared_ptr<SyncPass>& pass, Current& c);
    void sync_identity(const std::shared_ptr<SyncPass>& pass, int item, Current& c) const;
    void finish_batch(Outcome& oc);
    // Items [from, to) of `pass`, each evaluated alone, at the front of syncq_ in their order.
    void sync_queue_items(const std::shared_ptr<SyncPass>& pass, size_t from, size_t to);
    void after_answer();
    bool on_started(const pb::StateChangeEvent& sc);  // StartContainer: true for a container CREATED in the last Synchronize
    void on_removed(const pb::StateChangeEvent& sc);
    void fail_event(uint32_t stream, const std::string& event, const std::string& subject, const std::string& reason, const char* kind,
                    const Current* who = nullptr, int64_t took_ms = -1);
    void record_failure(const char* kind, const std::string& event, bool refused, const std::string& fail_mode, const std::string& reason,
                        const Current* who, int64_t took_ms, bool answered = false, bool replaced = false);
    void refuse(uint32_t stream, int code, const std::string& message, const char* kind, const std::string& reason);
    int64_t budget_ms(const Pending& p) const;
    int64_t wait_limit_ms(const Pending& p) const;
    // A Synchronize pass goes before the events queued meanwhile, until its reply went out: what
    // it evaluates after that (SynchronizeLate) waits behind the runtime's events.
    std::deque<Pending>& next_queue() {
        if (syncq_.empty() || (syncq_.front().sync->replied && !queue_.empty())) return queue_;
        return syncq_;
    }
    void sync_go_late(SyncPass& pass);
    SyncPass* unreplied_pass();
    int64_t sync_budget_ms() const { return o_.child_deadline_ms > 0 ? o_.child_deadline_ms : 1500; }

    const RelayOptions& o_;
    int fd_ = -1;
    bool closed_ = false;  // trunk gone (EOF, error)
    bool shutdown_ = false;  // Shutdown RPC answered
    int exit_code_ = 0;
    std::string outq_;
    size_t out_off_ = 0;
    TtrpcReassembler conns_[2];
    MuxDecoder mux_{[this](uint32_t conn, const char* d, size_t n) { conns_[conn - 1].append(d, n); }};
    StreamIds client_ids_;
    uint32_t register_stream_ = 0;
    std::string runtime_name_, runtime_version_, nri_version_;
    int64_t request_timeout_ms_ = 0;
    int nri_minor_ = 6;
    std::vector<std::string> config_flags_;
    bool fail_closed_ = false;  // cached on_child_failure ("open" by default)
    std::deque<Pending> queue_;
    size_t queued_bytes_ = 0;
    // Synchronize: the parts received so far (until the one with more = false), then the pass's
    // evaluations and its reply, served before queue_ (the runtime holds its events meanwhile).
    std::shared_ptr<SyncPass> sync_parts_;
    std::deque<Pending> syncq_;
    Supervisor sup_;
    Current cur_;
    // Who the evaluations that answered and still write their records were for (Outcome::id ->
    // identity, input dropped): their AfterAnswer may need a record. At most kMaxFinishing + 1.
    std::map<uint64_t, Current> answered_;
    bool configured_ = false;
    bool confine_done_ = false;
    uint64_t events_ = 0;
    uint64_t unrecorded_ = 0;  // failure records that could not be handed over
    // Containers whose CreateContainer nri-qos answered with an adjustment and that have not been
    // started yet (container id -> who, what was set). A RemoveContainer for one of them means the
    // runtime undid its creation (on_removed). Bounded: the oldest go first.
    struct Adjusted {
        std::string ns, pod, container, sandbox_id, fields;
    };
    static constexpr size_t kMaxAdjusted = 1024;
    std::map<std::string, Adjusted> adjusted_;
    std::deque<std::string> adjusted_order_;
    // Containers the last Synchronize pass listed in state CREATED and evaluated: their
    // CreateContainer went by without nri-qos, and the pass's ContainerUpdate may change only
    // their spec (Request::unadjusted). Their StartContainer goes to the evaluator with
    // "unadjusted": true (every knob written directly) and leaves the set; so does their removal.
    // Replaced at each pass (at most kMaxSyncObjects).
    std::set<std::string> created_at_sync_;
};

}  // namespace nriqos::nri
