// Native NRI relay: protocol dispatch. The trunk socket (mux/ttrpc), RegisterPlugin, Configure,
// the NRI methods and their replies, the queue of event requests and its deadlines, the records
// of what the relay refuses or fails itself, and the main poll() loop. Synchronize passes are in
// relay_sync.cpp, the child contract of one event (request in, answer out) in relay_contract.cpp,
// the process set-up, confinement and log file in relay_process.cpp (relay_internal.hpp lists
// them). The evaluator processes are supervised in evaluator.cpp. See relay.hpp and
// docs/native-nri.md.
#include "nri/relay.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "event/adjust.hpp"

#include "nri/evaluator.hpp"
#include "nri/failure_record.hpp"
#include "nri/mux.hpp"
#include "nri/nri.pb.h"
#include "nri/relay_internal.hpp"
#include "nri/sync.hpp"
#include "nri/ttrpc.hpp"
#include "os/clock.hpp"

namespace nriqos::nri {

namespace {

using nlohmann::json;

void set_flags(int fd, int fdflags, int flflags) {
    if (fdflags) fcntl(fd, F_SETFD, fcntl(fd, F_GETFD) | fdflags);
    if (flflags) fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | flflags);
}

uint32_t event_bit(pb::Event e) { return 1u << (int(e) - 1); }

// The events nri-qos does something with (and only those, issue #12):
//   RunPodSandbox(1)        pod knobs, sandbox memo
//   RemovePodSandbox(3)     memo removed
//   CreateContainer(4)      adjustment (knobs the runtime applies)
//   StartContainer(6)       knobs written by nri-qos after start
//   UpdateContainer(8)      the class's values again, on the updated resources
//   PostUpdateContainer(9)  knobs written by nri-qos again (the runtime's update may undo them)
//   RemoveContainer(11)     not evaluated: a container nri-qos adjusted at CreateContainer and
//                           the runtime removes without a StartContainer was undone — most often
//                           another NRI plugin set the same field (Relay::on_removed)
//   UpdatePodSandbox(12)    pod knobs again (NRI v0.10+ only: v0.6-v0.9 runtimes reject bits
//                           >= 0x800 in Configure, fatal on containerd 1.7.0-1.7.25)
// = 0x5ad (0xdad with UpdatePodSandbox).
constexpr int kUpdatePodSandboxEvent = 12;
uint32_t subscription_mask(int nri_minor) {
    uint32_t m = event_bit(pb::RUN_POD_SANDBOX) | event_bit(pb::REMOVE_POD_SANDBOX) | event_bit(pb::CREATE_CONTAINER) |
                 event_bit(pb::START_CONTAINER) | event_bit(pb::UPDATE_CONTAINER) | event_bit(pb::POST_UPDATE_CONTAINER) |
                 event_bit(pb::REMOVE_CONTAINER);
    if (nri_minor >= 10) m |= 1u << (kUpdatePodSandboxEvent - 1);
    return m;
}

}  // namespace

// NRI minor version a runtime speaks (6 = v0.6 ... 12 = v0.12), from ConfigureRequest: the
// NRI_version field when present (v0.12+: "v0.12.0"), else the runtime's name and version as the
// evaluator maps them (event/adjust.hpp nri_api_minor: containerd's go.mod per tag). Only `>= 10`
// gates behaviour here (UpdatePodSandbox in the subscription); the value is logged at Configure.
int runtime_nri_minor(const std::string& name, const std::string& version, const std::string& nri_version) {
    unsigned maj = 0, min = 0;
    const char* n = nri_version.c_str();
    if (*n == 'v') ++n;
    if (!nri_version.empty() && std::sscanf(n, "%u.%u", &maj, &min) == 2 && maj == 0) return int(min);
    return nriqos::nri_api_minor(name, version);
}

// Events whose failure may block the workload (on_child_failure "closed" applies). Teardown
// events (RemovePodSandbox) always fail open: refusing them would wedge pod deletion;
// PostUpdateContainer errors are only logged by the runtime.
bool is_admission(const std::string& ev) {
    return ev == "RunPodSandbox" || ev == "CreateContainer" || ev == "StartContainer" || ev == "UpdateContainer" || ev == "UpdatePodSandbox";
}

SupervisorOptions supervisor_options(const RelayOptions& o) {
    SupervisorOptions s;
    s.child_argv = o.child_argv;
    s.deadline_flag = o.deadline_flag;
    s.inproc = o.inproc;
    s.max_output = o.max_child_output;
    s.debug = o.debug;
    return s;
}

// ------------------------------------------------------------------ trunk

bool Relay::open_trunk() {
    if (o_.fd >= 0) {
        if (fcntl(o_.fd, F_GETFD) < 0) {
            logf("NRI trunk fd %d is not open: %s", o_.fd, strerror(errno));
            return false;
        }
        fd_ = o_.fd;
    } else if (!o_.socket_path.empty()) {
        struct sockaddr_un sa;
        memset(&sa, 0, sizeof sa);
        sa.sun_family = AF_UNIX;
        if (o_.socket_path.size() >= sizeof sa.sun_path) {
            logf("socket path too long: %s", o_.socket_path.c_str());
            return false;
        }
        memcpy(sa.sun_path, o_.socket_path.c_str(), o_.socket_path.size());
        fd_ = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd_ < 0 || connect(fd_, reinterpret_cast<struct sockaddr*>(&sa), sizeof sa) != 0) {
            logf("cannot connect to NRI socket %s: %s", o_.socket_path.c_str(), strerror(errno));
            if (fd_ >= 0) close(fd_);
            fd_ = -1;
            return false;
        }
    } else {
        logf("no NRI connection: neither NRI_PLUGIN_SOCKET nor --socket given");
        return false;
    }
    // Children must not inherit the trunk; replies are queued when the socket is full.
    set_flags(fd_, FD_CLOEXEC, O_NONBLOCK);
    return true;
}

void Relay::send_message(uint32_t conn, uint32_t stream, uint8_t type, const std::string& payload) {
    if (closed_) return;
    std::string msg = ttrpc_encode(stream, type, 0, payload);
    mux_encode(conn, msg, outq_);
    flush_out();
    if (outq_.size() - out_off_ > kMaxOutq) {
        logf("runtime does not read its NRI socket (%zu bytes pending); closing", outq_.size() - out_off_);
        closed_ = true;
    }
}

void Relay::reply_ok(uint32_t stream, const std::string& payload) {
    if (stream == 0) return;  // a Synchronize evaluation: the pass replies once (reply_sync)
    send_message(kPluginServiceConn, stream, kTtrpcResponse, encode_ok_response(payload));
}

void Relay::reply_error(uint32_t stream, int code, const std::string& message) {
    if (stream == 0) return;
    send_message(kPluginServiceConn, stream, kTtrpcResponse, encode_error_response(code, message));
}

void Relay::flush_out() {
    while (!closed_ && out_off_ < outq_.size()) {
        ssize_t n = send(fd_, outq_.data() + out_off_, outq_.size() - out_off_, MSG_NOSIGNAL);
        if (n < 0 && errno == ENOTSOCK) n = write(fd_, outq_.data() + out_off_, outq_.size() - out_off_);
        if (n > 0) {
            out_off_ += size_t(n);
            continue;
        }
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
        if (o_.debug || (errno != EPIPE && errno != ECONNRESET)) { logf("write to NRI socket failed: %s; closing", strerror(errno)); }
        closed_ = true;
    }
    if (out_off_ >= outq_.size()) {
        if (outq_.capacity() > 16384) std::string().swap(outq_);
        else outq_.clear();
        out_off_ = 0;
    }
}

void Relay::read_trunk() {
    char buf[16384];
    for (int i = 0; i < 64 && !closed_; ++i) {
        ssize_t n = read(fd_, buf, sizeof buf);
        if (n == 0) {
            if (o_.debug) logf("NRI connection closed by the runtime; exiting");
            closed_ = true;
            break;
        }
        if (n < 0) {
            if (errno == EINTR) continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK) break;
            if (o_.debug || errno != ECONNRESET) logf("read from NRI socket failed: %s; exiting", strerror(errno));
            closed_ = true;
            break;
        }
        if (!mux_.feed(buf, size_t(n))) {
            logf("protocol error: %s; closing the connection", mux_.error().c_str());
            record_failure("malformed", "unknown", true, "", "protocol error: " + mux_.error() + "; connection closed", nullptr, -1);
            closed_ = true;
            exit_code_ = 1;
            break;
        }
        for (uint32_t conn = 1; conn <= 2; ++conn) {
            TtrpcMessage m;
            while (!closed_ && conns_[conn - 1].next(m)) handle_message(conn, m);
        }
        if (size_t(n) < sizeof buf) break;
    }
}

// ------------------------------------------------------------------ ttrpc dispatch

void Relay::handle_message(uint32_t conn, TtrpcMessage& m) {
    if (conn == kRuntimeServiceConn) {
        if (m.type != kTtrpcResponse) return;  // the runtime never calls us on conn 2
        ResponseEnvelope r;
        if (m.oversized || !decode_response(m.payload, r)) {
            logf("malformed ttrpc response on stream %u", m.stream_id);
            return;
        }
        if (m.stream_id == register_stream_) {
            if (r.code != kCodeOk) {
                logf("RegisterPlugin %s-%s rejected by the runtime: code %d: %s", o_.plugin_idx.c_str(), o_.plugin_name.c_str(), r.code,
                     r.message.c_str());
            } else if (o_.debug) {
                logf("registered as %s-%s", o_.plugin_idx.c_str(), o_.plugin_name.c_str());
            }
        }
        return;
    }
    if (m.type != kTtrpcRequest) return;  // data/response messages are not used by NRI here
    if (m.oversized) {
        std::string msg =
            "message length " + std::to_string(m.announced_len) + " exceeds maximum message size of " + std::to_string(kTtrpcMaxMessage);
        refuse(m.stream_id, kCodeResourceExhausted, msg, "malformed", "ttrpc request refused: " + msg);
        return;
    }
    RequestEnvelope req;
    if (!decode_request(m.payload, req)) {
        refuse(m.stream_id, kCodeUnknown, "nri-qos: malformed ttrpc request", "malformed", "malformed ttrpc request");
        return;
    }
    handle_request(m.stream_id, req);
}

void Relay::handle_request(uint32_t stream, RequestEnvelope& req) {
    if (req.service != kPluginService) {
        refuse(stream, kCodeUnimplemented, "service " + req.service, "unknown-method",
               "service \"" + req.service + "\" is not served (UNIMPLEMENTED)");
        return;
    }
    const std::string& m = req.method;
    if (m == "Configure") {
        on_configure(stream, req.payload);
    } else if (m == "Synchronize") {
        on_synchronize(stream, req);
    } else if (m == "Shutdown") {
        if (o_.debug) logf("Shutdown requested by the runtime");
        reply_ok(stream, std::string());
        shutdown_ = true;
    } else if (bool with_container = false; int ev = dedicated_event(m, with_container)) {
        // NRI v0.12 (containerd 2.3+): one RPC per event. A subscribed one is served like its
        // StateChange (queued, the same evaluation: Relay::prepare); the others are answered with
        // their empty response, as containerd/nri's stub does for an event without a handler
        // (v0.12.0 pkg/stub/stub.go). Never UNIMPLEMENTED: that sends the runtime to its deprecated
        // StateChange fallback (pkg/adaptation/plugin_type.go), logged as a deprecated interface.
        if (subscription_mask(nri_minor_) & event_bit(pb::Event(ev))) {
            enqueue(stream, req);
        } else {
            if (o_.debug) logf("%s: not subscribed; answered empty", m.c_str());
            reply_ok(stream, std::string());
        }
    } else if (m == "CreateContainer" || m == "UpdateContainer" || m == "StateChange" || (m == "UpdatePodSandbox" && nri_minor_ >= 10)) {
        enqueue(stream, req);
    } else {
        refuse(stream, kCodeUnimplemented, "method " + m, "unknown-method", "method \"" + m + "\" is not served (UNIMPLEMENTED)");
    }
}

// An event request into the queue (or, past its bounds, answered at once).
void Relay::enqueue(uint32_t stream, RequestEnvelope& req) {
    const std::string& m = req.method;
    Pending p;
    p.stream = stream;
    p.method = m;
    p.payload = std::move(req.payload);
    p.timeout_nano = req.timeout_nano;
    p.arrival_ms = nriqos::monotonic_ms();
    if (queue_.size() >= kMaxQueued || queued_bytes_ + p.payload.size() > kMaxQueuedBytes) {
        // Answered at once with the fail mode of the event it carries (a StateChange is decoded:
        // RunPodSandbox and StartContainer are admission events, refused under "closed"), named
        // on the record like an evaluated event. prepare() answers itself what needs no
        // evaluation (an unsubscribed StateChange, a malformed request).
        Current c;
        if (prepare(p, c)) {
            fail_event(stream, c.event, c.subject,
                       "relay overloaded (" + std::to_string(queue_.size()) + " requests, " + std::to_string(queued_bytes_) +
                           " bytes queued; limits " + std::to_string(kMaxQueued) + ", " + std::to_string(kMaxQueuedBytes) + ")",
                       "overloaded", &c);
        }
        return;
    }
    queued_bytes_ += p.payload.size();
    queue_.push_back(std::move(p));
}

void Relay::on_configure(uint32_t stream, const std::string& payload) {
    pb::ConfigureRequest req;
    if (!req.ParseFromString(payload)) {
        // Never fail Configure: for NRI v0.6 runtimes that takes containerd's CRI down.
        logf("malformed ConfigureRequest; subscribing anyway");
    }
    runtime_name_ = req.runtime_name();
    runtime_version_ = req.runtime_version();
    nri_version_ = req.nri_version();
    nri_minor_ = runtime_nri_minor(runtime_name_, runtime_version_, req.nri_version());
    request_timeout_ms_ = req.request_timeout();
    config_flags_.clear();
    if (o_.config_to_child_flags && !req.config().empty()) {
        json cfg = json::parse(req.config(), nullptr, false);
        if (!cfg.is_object()) {
            logf("plugin config is not a JSON object; ignored");
        } else {
            static const struct {
                const char* key;
                const char* alt;
                const char* flag;
            } kMap[] = {
                {"policy", "policy", "--policy"},
                {"cgroup_root", "cgroup-root", "--cgroup-root"},
                {"cgroup_layout", "cgroup-layout", "--cgroup-layout"},
                {"proc_root", "proc-root", "--proc-root"},
                {"resctrl_root", "resctrl-root", "--resctrl-root"},
                {"sysfs_root", "sysfs-root", "--sysfs-root"},
                {"dev_root", "dev-root", "--dev-root"},
                {"kubelet_cpu_state", "kubelet-cpu-state", "--kubelet-cpu-state"},
                {"state_dir", "state-dir", "--state-dir"},
                {"cache_dir", "cache-dir", "--cache-dir"},
                {"last_good_dir", "last-good-dir", "--last-good-dir"},
                {"runtime_log", "runtime-log", "--runtime-log"},
                {"debug", "debug", "--debug"},
                {"log_file", "log-file", ""},  // the relay's own option, see below
            };
            for (auto it = cfg.begin(); it != cfg.end(); ++it) {
                bool known = false;
                for (const auto& e : kMap) known = known || it.key() == e.key || it.key() == e.alt;
                if (!known) logf("plugin config key \"%s\" is not known; ignored", it.key().c_str());
            }
            for (const auto& e : kMap) {  // table order: deterministic child argv
                auto it = cfg.find(e.key);
                if (it == cfg.end()) it = cfg.find(e.alt);
                if (it == cfg.end() || it->is_null()) continue;
                const std::string flag = e.flag;
                if (flag.empty()) {  // log_file: the relay's stderr, unless set on the command line
                    if (!it->is_string()) logf("plugin config \"%s\" must be a string; ignored", it.key().c_str());
                    else if (o_.log_file.empty()) redirect_log(it->get<std::string>());
                    continue;
                }
                bool given = false;  // command-line flags win over the plugin config
                for (const auto& a : o_.child_argv) given = given || a == flag || a.compare(0, flag.size() + 1, flag + "=") == 0;
                if (given) continue;
                if (flag == "--debug") {
                    if (!it->is_boolean()) logf("plugin config \"debug\" must be a boolean; ignored");
                    else if (it->get<bool>()) config_flags_.push_back(flag);
                } else if (!it->is_string() || it->get_ref<const std::string&>().empty()) {
                    logf("plugin config \"%s\" must be a non-empty string; ignored", it.key().c_str());
                } else {
                    config_flags_.push_back(flag);
                    config_flags_.push_back(it->get<std::string>());
                }
            }
        }
    }
    sup_.set_flags(config_flags_);
    configured_ = true;
    pb::ConfigureResponse rsp;
    rsp.set_events(int32_t(subscription_mask(nri_minor_)));
    reply_ok(stream, rsp.SerializeAsString());
    if (o_.status_fd >= 0) {  // the service's liveness record (service.hpp); a full pipe only loses a line
        std::string line = "configured\t" + runtime_name_ + "\t" + runtime_version_ + "\t" + nri_version_ + "\n";
        for (char& ch : line)
            if (ch != '\n' && ch != '\t' && (ch < 32 || ch == 127)) ch = '?';
        ssize_t w = write(o_.status_fd, line.data(), line.size());
        (void)w;
    }
    if (o_.debug) {
        logf("configured by %s %s (NRI v0.%d), events 0x%x", runtime_name_.c_str(), runtime_version_.c_str(), nri_minor_,
             subscription_mask(nri_minor_));
    }
}

// The relay's one path to the runtime's own service (conn 2). An unsolicited UpdateContainers
// is refused here below NRI v0.12.1: it can deadlock containerd (containerd/containerd#13733;
// sync.hpp unsolicited_updates_safe). nri-qos sends none today — Synchronize carries its updates
// in the reply — and this guard keeps it so for any runtime that could deadlock.
bool Relay::call_runtime(const char* method, const std::string& payload) {
    if (std::strcmp(method, "UpdateContainers") == 0 && !unsolicited_updates_safe(nri_version_)) {
        logf(
            "UpdateContainers not sent: the runtime's NRI (%s) is older than v0.12.1, where an unsolicited update can "
            "deadlock containerd (containerd/containerd#13733)",
            nri_version_.empty() ? "before v0.12" : nri_version_.c_str());
        return false;
    }
    uint32_t id = client_ids_.next();
    if (std::strcmp(method, "RegisterPlugin") == 0) register_stream_ = id;
    send_message(kRuntimeServiceConn, id, kTtrpcRequest, encode_request(kRuntimeService, method, payload));
    return true;
}

// ------------------------------------------------------------------ evaluation

int64_t Relay::budget_ms(const Pending& p) const {
    int64_t b = o_.child_deadline_ms > 0 ? o_.child_deadline_ms : 1500;
    if (p.timeout_nano > 0) b = std::min<int64_t>(b, p.timeout_nano / 1000000 - kReplyMarginMs);
    if (request_timeout_ms_ > 0) b = std::min<int64_t>(b, request_timeout_ms_ - kReplyMarginMs);
    return std::max<int64_t>(b, kMinBudgetMs);
}

// Until when a request may wait for its evaluator: its own deadline, or for a Synchronize
// evaluation the pass's.
int64_t Relay::wait_limit_ms(const Pending& p) const {
    if (p.sync && p.sync->replied) return nriqos::monotonic_ms() + sync_budget_ms();  // SynchronizeLate: no runtime waits on it
    return p.sync ? p.sync->deadline_ms : p.arrival_ms + budget_ms(p);
}

// A relay-level failure on the operator's record (event log + metrics, issue #11), written by
// the keeper's recorder (the confined relay cannot): see failure_record.hpp.
void Relay::record_failure(const char* kind, const std::string& event, bool refused, const std::string& fail_mode, const std::string& reason,
                           const Current* who, int64_t took_ms, bool answered, bool replaced) {
    RelayFailure f;
    f.event = event;
    f.outcome = replaced ? "replaced" : answered ? "answered" : refused ? "refused" : "failed";
    f.kind = kind;
    f.fail_mode = fail_mode;
    f.reason = reason;
    if (who) {
        f.ns = who->ns;
        f.pod = who->pod;
        f.container = who->container;
        f.id = who->container_id;
        f.sandbox_id = who->sandbox_id;
    }
    if (took_ms >= 0) f.duration_us = took_ms * 1000;
    std::string why = sup_.record_failure(failure_message(f));
    if (!why.empty() && unrecorded_++ % 100 == 0) {  // the first, then every 100th
        logf("%s: failure not written to the event log or the metrics: %s (%llu so far)", event.c_str(), why.c_str(),
             (unsigned long long)unrecorded_);
    }
}

// A request the relay refuses itself (protocol level): the error reply, a log line, the record.
void Relay::refuse(uint32_t stream, int code, const std::string& message, const char* kind, const std::string& reason) {
    logf("refused: %s", reason.c_str());
    reply_error(stream, code, message);
    record_failure(kind, "unknown", true, "", reason, nullptr, -1);
}

// `kind` nullptr: the evaluator has recorded the event itself (its own deadline answer).
void Relay::fail_event(uint32_t stream, const std::string& event, const std::string& subject, const std::string& reason, const char* kind,
                       const Current* who, int64_t took_ms) {
    bool closed = fail_closed_ && is_admission(event);
    if (who && who->sync) ++who->sync->failed;  // an existing container: always open, no reply of its own
    logf("%s%s%s: evaluation failed: %s; failing %s", event.c_str(), subject.empty() ? "" : " ", subject.c_str(), reason.c_str(),
         closed ? "closed" : "open");
    if (closed) {
        reply_error(stream, kCodeUnknown, "nri-qos: " + event + " evaluation failed (" + reason + "); policy on_child_failure=closed");
    } else {
        // Every reply message of the Plugin service is empty when nothing is adjusted.
        reply_ok(stream, std::string());
    }
    if (kind) record_failure(kind, event, closed, closed ? "closed" : "open", reason, who, took_ms);
}

void Relay::start_next() {
    // A spare the zygote is still cloning arrives within a fraction of a millisecond: wait for it
    // (the poll loop wakes on its answer) rather than fork another.
    // A Synchronize pass (syncq_) goes before the events queued meanwhile.
    while (!sup_.busy() && !next_queue().empty() && !closed_ && !shutdown_) {
        std::deque<Pending>& q = next_queue();
        if (q.front().sync && q.front().item == kBatchItem) {
            // The whole pass in one evaluator, unless it could not answer anything before the pass's
            // deadline (its items then go alone, as the deadline allows: before or after the reply).
            SyncPass& pass = *q.front().sync;
            if (pass.replied || pass.deadline_ms - nriqos::monotonic_ms() < kMinBudgetMs + kChildMarginMs + kBatchSoftMarginMs + 10) {
                std::shared_ptr<SyncPass> sp = std::move(q.front().sync);
                q.pop_front();
                sync_queue_items(sp, 0, sp->items.size());
                continue;
            }
        }
        if (q.front().sync && q.front().item == kReplyItem) {  // the pass's evaluations all ended: its reply
            std::shared_ptr<SyncPass> pass = std::move(q.front().sync);
            q.pop_front();
            if (!pass->replied) {
                reply_sync(*pass);
            } else {
                logf("Synchronize (after the reply): %zu pods/containers evaluated late, %zu evaluated in all, %zu failed (open); %lld ms",
                     pass->late, pass->evaluated, pass->failed, (long long)(nriqos::monotonic_ms() - pass->started_ms));
            }
            // The pods and containers are no longer needed (evaluations still finishing keep the pass).
            std::vector<pb::PodSandbox>().swap(pass->pods);
            std::vector<pb::Container>().swap(pass->containers);
            continue;
        }
        // No time left for this pass's next evaluation before the runtime's deadline: reply now.
        if (q.front().sync && !q.front().sync->replied && q.front().sync->deadline_ms - nriqos::monotonic_ms() < kMinBudgetMs / 2) {
            sync_go_late(*q.front().sync);
            continue;
        }
        if (!sup_.ready_to_start()) {
            // Waiting for the spare: but never past the request's own deadline.
            Pending& f = q.front();
            if (nriqos::monotonic_ms() < wait_limit_ms(f) - kMinBudgetMs) break;
            if (f.sync && !f.sync->replied) {  // the pass's deadline: reply, evaluate the rest after it
                sync_go_late(*f.sync);
                continue;
            }
            Pending p = std::move(q.front());
            q.pop_front();
            if (!p.sync) queued_bytes_ -= p.payload.size();
            if (prepare(p, cur_)) fail_event(p.stream, cur_.event, cur_.subject, "no evaluator became ready in time", "unavailable", &cur_);
            continue;
        }
        Pending p = std::move(q.front());
        q.pop_front();
        if (!p.sync) queued_bytes_ -= p.payload.size();
        if (!prepare(p, cur_)) continue;
        // A Synchronize evaluation has an event's budget of its own: the pass's reply goes out at the
        // pass's deadline whether it ended or not (the poll loop, sync_go_late). The pass's one
        // evaluator ends before that deadline (its kill kMinBudgetMs ahead of it), so that the
        // reply carries every answer it gave.
        const bool batch = p.sync && p.item == kBatchItem;
        int64_t deadline = batch    ? p.sync->deadline_ms - kMinBudgetMs
                           : p.sync ? nriqos::monotonic_ms() + sync_budget_ms()
                                    : p.arrival_ms + budget_ms(p);
        ++events_;
        if (batch) {
            std::string err;
            if (!sup_.start(cur_.input, deadline, err, kMaxBatchOutputBytes, kBatchEnd)) {
                logf("Synchronize: no evaluator for the pass (%s); each pod and container is evaluated alone", err.c_str());
                std::shared_ptr<SyncPass> sp = cur_.sync;
                cur_ = Current();
                sync_queue_items(sp, 0, sp->items.size());
                continue;
            }
            std::string().swap(cur_.input);
            continue;
        }
        if (!sup_.can_evaluate()) {
            fail_event(p.stream, cur_.event, cur_.subject, "no evaluation command configured", "unavailable", &cur_);
            continue;
        }
        if (deadline - nriqos::monotonic_ms() < kMinBudgetMs / 2) {
            fail_event(p.stream, cur_.event, cur_.subject, "no time left before the runtime's deadline", "timeout", &cur_);
            continue;
        }
        std::string err;
        if (!sup_.start(cur_.input, deadline, err)) {
            fail_event(p.stream, cur_.event, cur_.subject, err, "unavailable", &cur_);
            continue;
        }
        std::string().swap(cur_.input);
    }
}

// Queued events whose deadline comes while the evaluation ahead of them still runs (a later
// request with a shorter timeout_nano, or a long queue behind slow evaluations): answered now,
// with their fail mode, not after the runtime gave up on them (containerd disconnects a plugin
// that misses plugin_request_timeout). Recorded as "overloaded". Synchronize evaluations are
// not here (syncq_: the pass has one deadline and one reply, reply_sync).
void Relay::expire_queued() {
    const int64_t now = nriqos::monotonic_ms();
    for (size_t i = 0; i < queue_.size();) {
        if (wait_limit_ms(queue_[i]) - now >= kMinBudgetMs / 2) {
            ++i;
            continue;
        }
        Pending p = std::move(queue_[i]);
        queue_.erase(queue_.begin() + std::ptrdiff_t(i));
        queued_bytes_ -= p.payload.size();
        Current c;
        if (prepare(p, c)) {
            fail_event(p.stream, c.event, c.subject,
                       "relay overloaded: waited " + std::to_string(now - p.arrival_ms) + " ms in the queue behind an evaluation and " +
                           std::to_string(i) + " requests; no time left before the runtime's deadline",
                       "overloaded", &c);
        }
    }
}

// Evaluators that answered, then ended (their records written) or not as they should: the answer
// was replied and stands; a records-cut or died-after-answer goes on the record (outcome
// "answered"), so that a missing event-log line or count has a trace.
void Relay::after_answer() {
    // Lost helper processes (keeper, zygote), replaced by the supervisor: on the record too (event
    // "relay", outcome "replaced"), through the keeper now in charge.
    std::vector<std::pair<std::string, std::string>> lost;
    if (sup_.take_losses(lost))
        for (const auto& l : lost) record_failure(l.first.c_str(), "relay", false, "", l.second, nullptr, -1, false, true);
    std::vector<AfterAnswer> v;
    if (!sup_.take_after_answer(v)) return;
    for (const AfterAnswer& a : v) {
        auto it = answered_.find(a.id);
        if (it == answered_.end()) continue;
        Current who = std::move(it->second);
        answered_.erase(it);
        if (a.kind.empty()) continue;
        logf("%s %s: answered, but %s", who.event.c_str(), who.subject.c_str(), a.reason.c_str());
        record_failure(a.kind.c_str(), who.event, false, "", a.reason, &who, a.took_ms, true);
    }
}

// ------------------------------------------------------------------ main loop

int Relay::run() {
    if (!open_trunk()) return 1;
    signal(SIGPIPE, SIG_IGN);  // peer/child gone: handled as EPIPE, never a signal death
    // The start-up pages (static initialisers, main's command-line parsing: ~2.5 MiB of text with
    // fault-around) go before the relay's own set-up faults in more: otherwise the two add up in
    // VmHWM (3.0 MiB, over the 3 MiB budget of tests/nri_relay.sh, once the binary grew).
    drop_resident_text();
    // Register first: containerd 1.7 (NRI v0.6) exits fatally when a launched plugin does not
    // register within 5 s. The write is buffered by the kernel even before containerd reads.
    pb::RegisterPluginRequest reg;
    reg.set_plugin_name(o_.plugin_name);
    reg.set_plugin_idx(o_.plugin_idx);
    reg.set_nri_version(kNriProtocolVersion);  // containerd 2.3+ logs it; older runtimes skip it
    call_runtime("RegisterPlugin", reg.SerializeAsString());
    setup_process();
    if (!o_.log_file.empty()) redirect_log(o_.log_file);
    else if (stderr_is_devnull()) redirect_log(kDefaultRelayLog);
    drop_resident_text();  // again: registration's and the set-up's code ran once
    if (o_.debug) {
        logf("started (trunk fd %d), registering as %s-%s; evaluator: %s", fd_, o_.plugin_idx.c_str(), o_.plugin_name.c_str(),
             sup_.fork_mode()      ? "forked spare"
             : sup_.can_evaluate() ? "exec per event"
                                   : "none");
    }

    int64_t shutdown_deadline = 0;
    while (!closed_) {
        start_next();
        if (shutdown_) {
            if (sup_.busy()) {
                Outcome oc = sup_.abort_running("runtime requested Shutdown");
                finish_event(oc);
            }
            if (shutdown_deadline == 0) shutdown_deadline = nriqos::monotonic_ms() + 1000;
            if (out_off_ >= outq_.size() || nriqos::monotonic_ms() >= shutdown_deadline) break;
        }
        if (configured_ && !confine_done_) {
            confine();
            drop_resident_text();  // again: the code of Configure and of the confinement ran once
        }
        // Off the critical path: the reply went out; the next event finds its evaluator ready.
        // Not before Configure: the plugin config's flags are part of the evaluator's set-up.
        // (With a request waiting and no spare ready, this asks for one now.)
        if (configured_ && !shutdown_ && !sup_.busy()) {
            sup_.ensure_spare();
            start_next();
        }
        struct pollfd pfd[8];
        pfd[0] = {fd_, short(POLLIN | (out_off_ < outq_.size() ? POLLOUT : 0)), 0};
        int n = 1 + sup_.add_pollfds(pfd + 1);
        int timeout = sup_.poll_timeout(nriqos::monotonic_ms());
        if (!sup_.busy() && !next_queue().empty()) {  // a request waits for its spare: wake at its deadline
            const Pending& f = next_queue().front();
            int64_t left = std::max<int64_t>(0, wait_limit_ms(f) - kMinBudgetMs - nriqos::monotonic_ms());
            timeout = timeout < 0 ? int(left) : std::min<int>(timeout, int(left));
        }
        if (sup_.busy()) {  // queued events wait behind the evaluation: wake at the first one's deadline
            for (const Pending& q : queue_) {
                int64_t left = std::max<int64_t>(0, wait_limit_ms(q) - kMinBudgetMs / 2 - nriqos::monotonic_ms());
                timeout = timeout < 0 ? int(left) : std::min<int>(timeout, int(left));
            }
        }
        if (SyncPass* sp = unreplied_pass()) {  // the pass's reply is due at its deadline, evaluation or not
            int64_t left = std::max<int64_t>(0, sp->deadline_ms - kMinBudgetMs / 2 - nriqos::monotonic_ms());
            timeout = timeout < 0 ? int(left) : std::min<int>(timeout, int(left));
        }
        if (shutdown_) timeout = timeout < 0 ? 50 : std::min(timeout, 50);
        int r = poll(pfd, nfds_t(n), timeout);
        if (r < 0 && errno != EINTR) {
            logf("poll failed: %s", strerror(errno));
            break;
        }
        if (r < 0) {
            for (int i = 0; i < n; ++i) pfd[i].revents = 0;
        }
        if (pfd[0].revents & POLLOUT) flush_out();
        if (pfd[0].revents & (POLLIN | POLLHUP | POLLERR)) read_trunk();
        Outcome oc;
        bool ended = sup_.service(pfd + 1, oc);
        int mode = 0;
        if (sup_.take_policy_fail_mode(mode) && fail_closed_ != (mode == 1)) {
            fail_closed_ = mode == 1;
            if (o_.debug || fail_closed_) logf("policy fail mode: %s (reported by the evaluator zygote)", fail_closed_ ? "closed" : "open");
        }
        if (ended) finish_event(oc);
        if (SyncPass* sp = unreplied_pass(); sp && sp->deadline_ms - nriqos::monotonic_ms() < kMinBudgetMs / 2) sync_go_late(*sp);
        if (sup_.busy()) expire_queued();
        after_answer();
    }
    // Evaluators still writing their records get a moment (they need ~1 ms), then are killed and
    // recorded; the keeper writes those records before it exits (stop_all).
    sup_.drain_finishing(300);
    after_answer();
    sup_.stop_all();
    if (o_.debug) logf("exiting after %llu events", (unsigned long long)events_);
    return exit_code_;
}

int run_relay(const RelayOptions& opts) {
    try {
        Relay r(opts);
        return r.run();
    } catch (const std::exception& e) {  // e.g. std::bad_alloc; never let it escape to main
        logf("internal error: %s", e.what());
        return 1;
    }
}

}  // namespace nriqos::nri
