// Native NRI relay: protocol dispatch (trunk socket, mux/ttrpc, NRI methods, child contract
// JSON in and out). The evaluator processes are supervised in evaluator.cpp. See relay.hpp and
// docs/native-nri.md.
#include "nri/relay.hpp"

#include <fcntl.h>
#include <malloc.h>
#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "nri/evaluator.hpp"
#include "nri/failure_record.hpp"
#include "nri/mux.hpp"
#include "nri/nri.pb.h"
#include "nri/nri_json.hpp"
#include "nri/sync.hpp"
#include "nri/ttrpc.hpp"
#include "records/record.hpp"
#include "os/kernel.hpp"
#include "os/sandbox.hpp"

namespace nri {

namespace {

using nlohmann::json;

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

void redirect_log(const std::string& path);

void set_flags(int fd, int fdflags, int flflags) {
  if (fdflags) fcntl(fd, F_SETFD, fcntl(fd, F_GETFD) | fdflags);
  if (flflags) fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | flflags);
}

uint32_t event_bit(pb::Event e) { return 1u << (int(e) - 1); }

// NRI minor version a runtime speaks (6 = v0.6 ... 12 = v0.12), from ConfigureRequest: the
// NRI_version field when present (v0.12+: "v0.12.0"), else the runtime's own version:
// containerd 1.7.0-1.7.25 vendor NRI v0.6, 1.7.26+/2.0/2.1 v0.8, 2.2 v0.10, 2.3 v0.12 (containerd
// go.mod of each tag). Anything else (iSulad, CRI-O, unknown) is taken as v0.6, the oldest.
int runtime_nri_minor(const std::string& name, const std::string& version, const std::string& nri_version) {
  unsigned maj = 0, min = 0, patch = 0;
  const char* n = nri_version.c_str();
  if (*n == 'v') ++n;
  if (!nri_version.empty() && std::sscanf(n, "%u.%u", &maj, &min) == 2 && maj == 0) return int(min);
  if (name != "containerd") return 6;
  const char* v = version.c_str();
  if (*v == 'v') ++v;
  if (std::sscanf(v, "%u.%u.%u", &maj, &min, &patch) < 2) return 6;
  if (maj == 1) return min > 7 || (min == 7 && patch >= 26) ? 8 : 6;
  if (maj == 2) return min >= 3 ? 12 : min == 2 ? 10 : 8;
  return maj > 2 ? 12 : 6;
}

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

// Child-contract event name of a StateChange event, or nullptr when not evaluated (not
// subscribed; a runtime that sends it anyway gets an empty reply).
const char* state_change_name(pb::Event e) {
  switch (e) {
    case pb::RUN_POD_SANDBOX: return "RunPodSandbox";
    case pb::REMOVE_POD_SANDBOX: return "RemovePodSandbox";
    case pb::START_CONTAINER: return "StartContainer";
    case pb::POST_UPDATE_CONTAINER: return "PostUpdateContainer";
    default: return nullptr;
  }
}

// Events whose failure may block the workload (on_child_failure "closed" applies). Teardown
// events (RemovePodSandbox) always fail open: refusing them would wedge pod deletion;
// PostUpdateContainer errors are only logged by the runtime.
bool is_admission(const std::string& ev) {
  return ev == "RunPodSandbox" || ev == "CreateContainer" || ev == "StartContainer" ||
         ev == "UpdateContainer" || ev == "UpdatePodSandbox";
}

// The container's resources as the runtime will have them after an UpdateContainer: the
// request's values over the current ones, where a zero or empty value means "unchanged"
// (containerd internal/cri/opts/spec_linux_opts.go WithResources, applied to the OCI spec by
// CRI UpdateContainerResources; NRI passes the CRI request with zero wrappers, containerd
// internal/cri/nri/nri_api_linux.go fromCRILinuxResources). Percentage knobs resolve on this.
pb::LinuxResources updated_resources(const pb::LinuxResources& cur, const pb::LinuxResources& req) {
  pb::LinuxResources r = cur;
  const pb::LinuxCPU& c = req.cpu();
  if (c.shares().value() != 0) r.mutable_cpu()->mutable_shares()->set_value(c.shares().value());
  if (c.quota().value() != 0) r.mutable_cpu()->mutable_quota()->set_value(c.quota().value());
  if (c.period().value() != 0) r.mutable_cpu()->mutable_period()->set_value(c.period().value());
  if (!c.cpus().empty()) r.mutable_cpu()->set_cpus(c.cpus());
  if (!c.mems().empty()) r.mutable_cpu()->set_mems(c.mems());
  const pb::LinuxMemory& m = req.memory();
  if (m.limit().value() != 0) {
    r.mutable_memory()->mutable_limit()->set_value(m.limit().value());
    if (m.swap().value() == 0 && r.memory().has_swap()) r.mutable_memory()->mutable_swap()->set_value(m.limit().value());
  }
  if (m.swap().value() != 0) r.mutable_memory()->mutable_swap()->set_value(m.swap().value());
  for (const auto& kv : req.unified()) (*r.mutable_unified())[kv.first] = kv.second;
  if (req.hugepage_limits_size() > 0) *r.mutable_hugepage_limits() = req.hugepage_limits();
  return r;
}

// The fields an adjustment sets, in containerd's words (containerd/nri pkg/adaptation/result.go,
// the subjects of its "both tried to set" conflicts), comma-separated; "" when it sets nothing.
std::string adjusted_fields(const pb::ContainerAdjustment& a) {
  std::string out;
  auto add = [&out](const std::string& w) { out += (out.empty() ? "" : ", ") + w; };
  for (const auto& kv : a.annotations()) add("annotation " + kv.first);
  if (a.has_linux()) {
    const pb::LinuxContainerAdjustment& l = a.linux();
    if (l.has_resources()) {
      const pb::LinuxResources& r = l.resources();
      if (r.has_memory()) {
        if (r.memory().has_limit()) add("memory limit");
        if (r.memory().has_reservation()) add("memory reservation");
        if (r.memory().has_swap()) add("memory swap limit");
      }
      if (r.has_cpu()) {
        if (r.cpu().has_shares()) add("CPU shares");
        if (r.cpu().has_quota()) add("CPU quota");
        if (r.cpu().has_period()) add("CPU period");
        if (!r.cpu().cpus().empty()) add("CPU pinning");
        if (!r.cpu().mems().empty()) add("memory pinning");
      }
      if (r.has_pids()) add("pids limit");
      if (r.has_blockio_class()) add("block I/O class");
      if (r.has_rdt_class()) add("RDT class");
      for (const auto& kv : r.unified()) add("unified resource " + kv.first);
    }
    if (l.has_oom_score_adj()) add("oom_score_adj");
  }
  return out;
}

std::string snippet(const std::string& s) {
  std::string r;
  for (char c : s.substr(0, 60)) r.push_back((c >= 32 && c < 127) ? c : '.');
  if (s.size() > 60) r += "...";
  return r;
}

struct Pending {
  uint32_t stream = 0;
  std::string method;
  std::string payload;
  int64_t timeout_nano = 0;
  int64_t arrival_ms = 0;
  // One evaluation of a Synchronize pass (method "Synchronize", stream 0: no reply of its own;
  // `item` indexes sync->items), or the pass's reply (item -1) after its last evaluation.
  std::shared_ptr<SyncPass> sync;
  int item = -1;
};

// The event being evaluated (the request's identity; the process is the supervisor's).
struct Current {
  uint32_t stream = 0;
  std::string method;
  std::string event;
  std::string subject;       // "ns/pod[/container]" for logs
  std::string container_id;  // UpdateContainer reply target
  std::string ns, pod, container, sandbox_id;  // for the failure record
  std::string input;         // child contract JSON
  std::shared_ptr<SyncPass> sync;  // a Synchronize evaluation: its update goes into the pass's reply
  int item = -1;                   // its index in sync->items
};

SupervisorOptions supervisor_options(const RelayOptions& o) {
  SupervisorOptions s;
  s.child_argv = o.child_argv;
  s.deadline_flag = o.deadline_flag;
  s.inproc = o.inproc;
  s.max_output = o.max_child_output;
  s.debug = o.debug;
  return s;
}

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
  void on_configure(uint32_t stream, const std::string& payload);
  void on_synchronize(uint32_t stream, const RequestEnvelope& req);
  void reply_sync(SyncPass& pass);
  bool call_runtime(const char* method, const std::string& payload);
  void start_next();
  void expire_queued();
  void confine();
  bool prepare(Pending& p, Current& c);
  void finish_event(Outcome& oc);
  void after_answer();
  void on_removed(const pb::StateChangeEvent& sc);
  void fail_event(uint32_t stream, const std::string& event, const std::string& subject,
                  const std::string& reason, const char* kind, const Current* who = nullptr, int64_t took_ms = -1);
  void record_failure(const char* kind, const std::string& event, bool refused, const std::string& fail_mode,
                      const std::string& reason, const Current* who, int64_t took_ms, bool answered = false,
                      bool replaced = false);
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
  bool closed_ = false;     // trunk gone (EOF, error)
  bool shutdown_ = false;   // Shutdown RPC answered
  int exit_code_ = 0;
  std::string outq_;
  size_t out_off_ = 0;
  TtrpcReassembler conns_[2];
  MuxDecoder mux_{[this](uint32_t conn, const char* d, size_t n) {
    conns_[conn - 1].append(d, n);
  }};
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
};

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
    logf("runtime does not read its NRI socket (%zu bytes pending); closing",
         outq_.size() - out_off_);
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
    if (o_.debug || (errno != EPIPE && errno != ECONNRESET)) {
      logf("write to NRI socket failed: %s; closing", strerror(errno));
    }
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
        logf("RegisterPlugin %s-%s rejected by the runtime: code %d: %s", o_.plugin_idx.c_str(),
             o_.plugin_name.c_str(), r.code, r.message.c_str());
      } else if (o_.debug) {
        logf("registered as %s-%s", o_.plugin_idx.c_str(), o_.plugin_name.c_str());
      }
    }
    return;
  }
  if (m.type != kTtrpcRequest) return;  // data/response messages are not used by NRI here
  if (m.oversized) {
    std::string msg = "message length " + std::to_string(m.announced_len) + " exceeds maximum message size of " +
                      std::to_string(kTtrpcMaxMessage);
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
  } else if (m == "CreateContainer" || m == "UpdateContainer" || m == "StateChange" ||
             (m == "UpdatePodSandbox" && nri_minor_ >= 10)) {
    Pending p;
    p.stream = stream;
    p.method = m;
    p.payload = std::move(req.payload);
    p.timeout_nano = req.timeout_nano;
    p.arrival_ms = now_ms();
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
  } else {
    refuse(stream, kCodeUnimplemented, "method " + m, "unknown-method", "method \"" + m + "\" is not served (UNIMPLEMENTED)");
  }
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
      static const struct { const char* key; const char* alt; const char* flag; } kMap[] = {
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
    logf("UpdateContainers not sent: the runtime's NRI (%s) is older than v0.12.1, where an unsolicited update can "
         "deadlock containerd (containerd/containerd#13733)", nri_version_.empty() ? "before v0.12" : nri_version_.c_str());
    return false;
  }
  uint32_t id = client_ids_.next();
  if (std::strcmp(method, "RegisterPlugin") == 0) register_stream_ = id;
  send_message(kRuntimeServiceConn, id, kTtrpcRequest, encode_request(kRuntimeService, method, payload));
  return true;
}

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

void Relay::reply_sync(SyncPass& pass) {
  logf("Synchronize: %zu pods, %zu containers (%u part(s)): %zu evaluated, %zu failed (open), %zu not evaluated%s; "
       "%d container updates; %lld ms",
       pass.pods.size(), pass.containers.size(), pass.parts, pass.evaluated, pass.failed, pass.skipped.size() + pass.dropped,
       pass.late ? (", " + std::to_string(pass.late) + " evaluated after this reply (SynchronizeLate)").c_str() : "",
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
  // the container being evaluated now: its update can no longer be answered (evaluated again, late)
  if (sup_.busy() && cur_.sync.get() == &pass && !cur_.container_id.empty()) ++pass.late;
  reply_sync(pass);
}

// The Synchronize pass whose reply has not gone out yet: being evaluated, or next in syncq_.
SyncPass* Relay::unreplied_pass() {
  if (sup_.busy() && cur_.sync && !cur_.sync->replied) return cur_.sync.get();
  for (const Pending& q : syncq_)
    if (q.sync && !q.sync->replied) return q.sync.get();
  return nullptr;
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
  if (p.sync && p.sync->replied) return now_ms() + sync_budget_ms();  // SynchronizeLate: no runtime waits on it
  return p.sync ? p.sync->deadline_ms : p.arrival_ms + budget_ms(p);
}

// A relay-level failure on the operator's record (event log + metrics, issue #11), written by
// the keeper's recorder (the confined relay cannot): see failure_record.hpp.
void Relay::record_failure(const char* kind, const std::string& event, bool refused, const std::string& fail_mode,
                           const std::string& reason, const Current* who, int64_t took_ms, bool answered, bool replaced) {
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
void Relay::fail_event(uint32_t stream, const std::string& event, const std::string& subject,
                       const std::string& reason, const char* kind, const Current* who, int64_t took_ms) {
  bool closed = fail_closed_ && is_admission(event);
  if (who && who->sync) ++who->sync->failed;  // an existing container: always open, no reply of its own
  logf("%s%s%s: evaluation failed: %s; failing %s", event.c_str(), subject.empty() ? "" : " ",
       subject.c_str(), reason.c_str(), closed ? "closed" : "open");
  if (closed) {
    reply_error(stream, kCodeUnknown,
                "nri-qos: " + event + " evaluation failed (" + reason + "); policy on_child_failure=closed");
  } else {
    // Every reply message of the Plugin service is empty when nothing is adjusted.
    reply_ok(stream, std::string());
  }
  if (kind) record_failure(kind, event, closed, closed ? "closed" : "open", reason, who, took_ms);
}

// Decode the request, build the child's stdin. Returns false when no child is needed;
// `answered` tells whether a reply was already sent.
bool Relay::prepare(Pending& p, Current& c) {
  c = Current();
  c.stream = p.stream;
  c.method = p.method;
  const pb::PodSandbox* pod = nullptr;
  const pb::LinuxResources* linux_resources = nullptr;  // "linux_resources" of the input
  pb::LinuxResources updated;
  const pb::Container* ctr = nullptr;
  pb::CreateContainerRequest creq;
  pb::UpdateContainerRequest ureq;
  pb::UpdatePodSandboxRequest preq;
  pb::StateChangeEvent sc;
  bool ok = true;
  if (p.method == "CreateContainer") {
    ok = creq.ParseFromString(p.payload);
    c.event = "CreateContainer";
    pod = &creq.pod();
    ctr = creq.has_container() ? &creq.container() : nullptr;
  } else if (p.method == "UpdateContainer") {
    ok = ureq.ParseFromString(p.payload);
    c.event = "UpdateContainer";
    pod = &ureq.pod();
    ctr = ureq.has_container() ? &ureq.container() : nullptr;
    if (ok && ureq.has_linux_resources()) {
      updated = updated_resources(ctr && ctr->has_linux() ? ctr->linux().resources() : pb::LinuxResources(),
                                  ureq.linux_resources());
      linux_resources = &updated;
    }
  } else if (p.method == "UpdatePodSandbox") {
    ok = preq.ParseFromString(p.payload);
    c.event = "UpdatePodSandbox";
    pod = &preq.pod();
    if (ok && preq.has_linux_resources()) linux_resources = &preq.linux_resources();
  } else if (p.sync) {  // one pod or container of a Synchronize pass (decoded already)
    const SyncPass::Item& it = p.sync->items[size_t(p.item)];
    c.event = p.sync->replied ? "SynchronizeLate" : "Synchronize";
    c.sync = p.sync;
    c.item = p.item;
    pod = &p.sync->pods[size_t(it.pod)];
    ctr = it.ctr >= 0 ? &p.sync->containers[size_t(it.ctr)] : nullptr;
  } else {  // StateChange
    ok = sc.ParseFromString(p.payload);
    const char* name = ok ? state_change_name(sc.event()) : "StateChange";
    if (ok && sc.event() == pb::REMOVE_CONTAINER) {  // never evaluated: see on_removed
      reply_ok(p.stream, std::string());
      on_removed(sc);
      return false;
    }
    if (!name) {  // not subscribed (e.g. POST_* events): nothing to evaluate
      reply_ok(p.stream, std::string());
      return false;
    }
    if (sc.event() == pb::START_CONTAINER && sc.has_container()) adjusted_.erase(sc.container().id());
    c.event = name;
    pod = &sc.pod();
    ctr = sc.has_container() ? &sc.container() : nullptr;
  }
  c.subject = pod->namespace_() + "/" + pod->name();
  if (ctr) {
    c.subject += "/" + ctr->name();
    c.container_id = ctr->id();
  }
  if (!ok) {
    fail_event(p.stream, c.event, "", "malformed " + p.method + " request", "malformed");
    return false;
  }
  c.ns = pod->namespace_();
  c.pod = pod->name();
  c.sandbox_id = pod->id();
  if (ctr) c.container = ctr->name();
  // The child contract's input, printed member by member: byte for byte what the DOM of
  // event_to_json() dumps, without building it (nri_json.hpp print_event).
  c.input.reserve(2 * p.payload.size() + 256);
  print_event(c.input, c.event, runtime_name_, runtime_version_, *pod, ctr, linux_resources);
  c.input.push_back('\n');
  return true;
}

void Relay::start_next() {
  // A spare the zygote is still cloning arrives within a fraction of a millisecond: wait for it
  // (the poll loop wakes on its answer) rather than fork another.
  // A Synchronize pass (syncq_) goes before the events queued meanwhile.
  while (!sup_.busy() && !next_queue().empty() && !closed_ && !shutdown_) {
    std::deque<Pending>& q = next_queue();
    if (q.front().sync && q.front().item < 0) {  // the pass's evaluations all ended: its reply
      std::shared_ptr<SyncPass> pass = std::move(q.front().sync);
      q.pop_front();
      if (!pass->replied) {
        reply_sync(*pass);
      } else {
        logf("Synchronize (after the reply): %zu pods/containers evaluated late, %zu evaluated in all, %zu failed (open); %lld ms",
             pass->late, pass->evaluated, pass->failed, (long long)(now_ms() - pass->started_ms));
      }
      // The pods and containers are no longer needed (evaluations still finishing keep the pass).
      std::vector<pb::PodSandbox>().swap(pass->pods);
      std::vector<pb::Container>().swap(pass->containers);
      continue;
    }
    // No time left for this pass's next evaluation before the runtime's deadline: reply now.
    if (q.front().sync && !q.front().sync->replied && q.front().sync->deadline_ms - now_ms() < kMinBudgetMs / 2) {
      sync_go_late(*q.front().sync);
      continue;
    }
    if (!sup_.ready_to_start()) {
      // Waiting for the spare: but never past the request's own deadline.
      Pending& f = q.front();
      if (now_ms() < wait_limit_ms(f) - kMinBudgetMs) break;
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
    // A Synchronize evaluation: its own budget, within what is left of the pass's.
    // A Synchronize evaluation has an event's budget of its own: the pass's reply goes out at the
    // pass's deadline whether it ended or not (the poll loop, sync_go_late).
    int64_t deadline = p.sync ? now_ms() + sync_budget_ms() : p.arrival_ms + budget_ms(p);
    ++events_;
    if (!sup_.can_evaluate()) {
      fail_event(p.stream, cur_.event, cur_.subject, "no evaluation command configured", "unavailable", &cur_);
      continue;
    }
    if (deadline - now_ms() < kMinBudgetMs / 2) {
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
  const int64_t now = now_ms();
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

// RemoveContainer of a container nri-qos adjusted and that never started: the runtime undid its
// creation after the NRI call (containerd's CRI: UndoCreateContainer sends StopContainer and
// RemoveContainer to the plugins, internal/cri/nri/nri_api_linux.go; pkg/cri/nri on 1.7). The
// usual cause is another NRI plugin that set one of the same fields: containerd/nri
// pkg/adaptation/result.go refuses the create with "plugins %q and %q both tried to set %s". On
// the record (event log, nri_qos_relay_failures_total and nri_qos_adjustment_rejected_total); the
// recorder names the other plugin from the runtime's log (failure_record.hpp runtime_conflict).
void Relay::on_removed(const pb::StateChangeEvent& sc) {
  if (!sc.has_container()) return;
  auto it = adjusted_.find(sc.container().id());
  if (it == adjusted_.end()) return;
  Adjusted a = std::move(it->second);
  adjusted_.erase(it);
  RelayFailure f;
  f.event = "CreateContainer";
  f.outcome = "undone";
  f.kind = "adjustment-rejected";
  f.reason = "the runtime removed the container without starting it, after nri-qos's CreateContainer adjustment set " + a.fields +
             ": the create failed after the NRI call, most often because another NRI plugin set one of these fields";
  f.ns = a.ns;
  f.pod = a.pod;
  f.container = a.container;
  f.id = sc.container().id();
  f.sandbox_id = a.sandbox_id;
  f.self = o_.plugin_idx + "-" + o_.plugin_name;
  f.fields = a.fields;
  logf("CreateContainer %s/%s/%s: %s", a.ns.c_str(), a.pod.c_str(), a.container.c_str(), f.reason.c_str());
  std::string why = sup_.record_failure(failure_message(f));
  if (!why.empty() && unrecorded_++ % 100 == 0)
    logf("CreateContainer: adjustment-rejected not written to the event log or the metrics: %s", why.c_str());
}

void Relay::finish_event(Outcome& oc) {
  Current& c = cur_;
  if (oc.after_answer) {  // its evaluator still writes the event's records (or ended badly after)
    Current& who = answered_[oc.id];
    who = c;
    std::string().swap(who.input);
  }
  std::string failure = oc.failure;
  std::string kind = oc.failure.empty() ? std::string() : oc.kind.empty() ? std::string("crash") : oc.kind;
  json out;
  bool deadline_answer = false;
  if (failure.empty()) {
    out = parse_answer(oc.output);  // the members read below; metadata and writes are skipped
    // A deadline answer ("deadline": true) is prepared before the policy is known: its
    // on_child_failure is not the policy's choice and must never change ours (issue #9).
    if (out.is_object()) {
      auto d = out.find("deadline");
      deadline_answer = d != out.end() && d->is_boolean() && d->get<bool>();
    }
    if (out.is_object() && !deadline_answer) {  // cache the policy's choice even if the rest is unusable
      auto f = out.find("on_child_failure");
      if (f != out.end() && f->is_string()) {
        if (*f == "open") fail_closed_ = false;
        else if (*f == "closed") fail_closed_ = true;
        else logf("child: on_child_failure \"%s\" is neither \"open\" nor \"closed\"; ignored", f->get<std::string>().c_str());
      }
    }
    if (oc.output.empty()) {
      failure = "child printed nothing";
    } else if (!out.is_object()) {
      failure = "child output is not a JSON object: \"" + snippet(oc.output) + "\"";
    }
    if (!failure.empty()) kind = "bad-output";
  }
  std::string().swap(oc.output);

  if (!failure.empty()) {
    fail_event(c.stream, c.event, c.subject, failure, kind.c_str(), &c, oc.took_ms);
    return;
  }
  if (c.sync) {  // a Synchronize evaluation: its update joins the pass's reply (reply_sync)
    auto e = out.find("error");
    if (e != out.end() && e->is_string() && !e->get_ref<const std::string&>().empty()) {
      // A running container cannot be refused: the evaluator's error is on its record; said here too.
      logf("Synchronize %s: %s (the container already runs: nothing to refuse)", c.subject.c_str(),
           e->get_ref<const std::string&>().c_str());
    }
    auto u = out.find("update");
    if (!c.container_id.empty() && c.event == "Synchronize" && c.sync->replied) {
      // Evaluated for the reply, which went out meanwhile (the pass's deadline): what NRI would
      // have carried was not written; the container is evaluated again, late (writes directly).
      if (o_.debug) logf("Synchronize %s: ended after the pass's reply; evaluated again after it", c.subject.c_str());
      Pending again;
      again.method = "Synchronize";
      again.arrival_ms = now_ms();
      again.sync = c.sync;
      again.item = c.item;
      syncq_.push_front(std::move(again));
      return;
    }
    if (!c.container_id.empty() && u != out.end() && !u->is_null()) {
      pb::ContainerUpdate up;
      up.set_container_id(c.container_id);
      std::string err;
      if (!resources_from_json(*u, *up.mutable_linux()->mutable_resources(), err)) {
        fail_event(c.stream, c.event, c.subject, "bad child output: " + err, "bad-output", &c, oc.took_ms);
        return;
      }
      *c.sync->response.add_update() = std::move(up);
    }
    ++c.sync->evaluated;
    if (o_.debug) logf("Synchronize %s: answered in %lld ms", c.subject.c_str(), (long long)oc.took_ms);
    return;
  }
  auto e = out.find("error");
  if (e != out.end() && !e->is_null()) {
    if (!e->is_string()) {
      fail_event(c.stream, c.event, c.subject, "child output: \"error\" is not a string", "bad-output", &c, oc.took_ms);
      return;
    }
    if (!e->get_ref<const std::string&>().empty()) {
      logf("%s %s: refused: %s", c.event.c_str(), c.subject.c_str(), e->get_ref<const std::string&>().c_str());
      reply_error(c.stream, kCodeUnknown, e->get<std::string>());
      return;
    }
  }
  if (deadline_answer && fail_closed_ && is_admission(c.event)) {
    // The child gave up at its own deadline without an error of its own: under the cached
    // "closed" this is a failed evaluation like any other.
    // Not recorded again: the evaluator's deadline handler wrote the record (outcome refused).
    fail_event(c.stream, c.event, c.subject, "child hit its own deadline", nullptr);
    return;
  }
  std::string reply;
  std::string err;
  if (c.method == "CreateContainer") {
    auto a = out.find("adjustment");
    pb::CreateContainerResponse rsp;
    if (a != out.end() && !a->is_null()) {
      if (!adjustment_from_json(*a, *rsp.mutable_adjust(), err)) {
        fail_event(c.stream, c.event, c.subject, "bad child output: " + err, "bad-output", &c, oc.took_ms);
        return;
      }
    }
    // Remembered until it starts: a removal before that is the runtime undoing the create.
    std::string fields = rsp.has_adjust() ? adjusted_fields(rsp.adjust()) : std::string();
    if (!fields.empty() && !c.container_id.empty()) {
      if (!adjusted_.count(c.container_id)) adjusted_order_.push_back(c.container_id);
      adjusted_[c.container_id] = Adjusted{c.ns, c.pod, c.container, c.sandbox_id, fields};
      while (adjusted_order_.size() > kMaxAdjusted || (!adjusted_order_.empty() && !adjusted_.count(adjusted_order_.front()))) {
        if (adjusted_order_.size() > kMaxAdjusted) adjusted_.erase(adjusted_order_.front());
        adjusted_order_.pop_front();
      }
    }
    reply = rsp.SerializeAsString();
  } else if (c.method == "UpdateContainer") {
    auto u = out.find("update");
    pb::UpdateContainerResponse rsp;
    if (u != out.end() && !u->is_null()) {
      pb::ContainerUpdate* up = rsp.add_update();
      up->set_container_id(c.container_id);
      if (!resources_from_json(*u, *up->mutable_linux()->mutable_resources(), err)) {
        fail_event(c.stream, c.event, c.subject, "bad child output: " + err, "bad-output", &c, oc.took_ms);
        return;
      }
    }
    reply = rsp.SerializeAsString();
  }
  if (o_.debug) {
    logf("%s %s: answered in %lld ms (%zu reply bytes)", c.event.c_str(), c.subject.c_str(),
         (long long)oc.took_ms, reply.size());
  }
  reply_ok(c.stream, reply);
}

// ------------------------------------------------------------------ main loop

// Drop the page-table entries of our read-only, file-backed mappings (text, rodata) of the
// executable. Start-up code (static initialisers, command-line parsing) is never run again, but
// its pages, and their 64 KiB fault-around neighbours, would stay in our RSS for the life of the
// plugin. MADV_DONTNEED on a private file mapping whose pages were never written only unmaps
// them: they stay in the page cache and fault back in on use (madvise(2)). A mapping with any
// anonymous (copy-on-write) page, e.g. RELRO after relocation, is skipped: dropping it would
// lose the relocated data. Writable mappings are never touched.
// Called three times: on entry (what main ran), after registration and set-up, and after
// Configure and the confinement (their code — the config's JSON, the keeper's fork, the
// sandbox's set-up — runs once: ~0.25-0.3 MiB of the relay's RSS for good). Later calls reuse
// the ranges the first one found (a confined relay cannot open /proc/self/smaps).
std::vector<std::pair<unsigned long, unsigned long>> g_text_ranges;
bool g_text_ranges_known = false;

void drop_resident_text() {
  if (g_text_ranges_known) {
    for (const auto& r : g_text_ranges) madvise(reinterpret_cast<void*>(r.first), r.second - r.first, MADV_DONTNEED);
    return;
  }
  g_text_ranges_known = true;
  char exe[4096];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n <= 0) return;
  exe[n] = '\0';
  FILE* f = fopen("/proc/self/smaps", "re");
  if (!f) return;
  struct Range {
    unsigned long lo, hi;
  };
  std::vector<Range> drop;
  char line[4352];
  bool candidate = false;
  Range cur = {0, 0};
  while (fgets(line, sizeof line, f)) {
    unsigned long lo = 0, hi = 0;
    char perms[8] = {0};
    int path_at = 0;
    if (sscanf(line, "%lx-%lx %7s %*s %*s %*s %n", &lo, &hi, perms, &path_at) >= 3 && strchr(line, '-') &&
        line[0] != ' ' && strlen(perms) == 4) {  // header line of a new mapping
      char* path = path_at > 0 ? line + path_at : line + strlen(line);
      path[strcspn(path, "\n")] = '\0';
      candidate = perms[0] == 'r' && perms[1] == '-' && perms[3] == 'p' && strcmp(path, exe) == 0;
      cur = {lo, hi};
      continue;
    }
    unsigned long anon_kb = 0;
    if (candidate && sscanf(line, "Anonymous: %lu kB", &anon_kb) == 1) {
      if (anon_kb == 0) drop.push_back(cur);
      candidate = false;
    }
  }
  fclose(f);
  for (const Range& r : drop) {
    madvise(reinterpret_cast<void*>(r.lo), r.hi - r.lo, MADV_DONTNEED);
    g_text_ranges.emplace_back(r.lo, r.hi);
  }
}

// Send our stderr (and the children's) to `path`, appending. containerd starts launched plugins
// with fds 0-2 on /dev/null, so without this nothing the relay logs is visible.
constexpr const char* kDefaultRelayLog = "/var/log/nri-qos/relay.log";

void redirect_log(const std::string& path) {
  if (path.empty()) return;
  if (path[0] == '/') nriqos::make_dirs(nriqos::dir_name(path), 0750);
  // open_record: a FIFO or device at the log path must not block the relay's start or its
  // writes (issue 19 §2); stderr stays where it was.
  std::string why;
  int fd = nriqos::open_record(-1, path, O_WRONLY | O_APPEND | O_CREAT, 0640, why);
  if (fd < 0) {
    logf("cannot open log file %s: %s", path.c_str(), why.c_str());
    return;
  }
  dup2(fd, 2);
  close(fd);
}

// stderr is /dev/null (containerd's launch) or closed: then the relay logs to the default file
// (issue #11: never to /dev/null by default). Its evaluators inherit it, so the log also holds
// the one record line per event each evaluation writes to stderr.
bool stderr_is_devnull() {
  struct stat st, dn;
  if (fstat(2, &st) != 0) return true;
  return S_ISCHR(st.st_mode) && stat("/dev/null", &dn) == 0 && st.st_rdev == dn.st_rdev;
}

void Relay::setup_process() {
  // fds 0-2 must be open so that pipes never land on them (containerd gives /dev/null).
  for (int fd = 0; fd <= 2; ++fd) {
    if (fcntl(fd, F_GETFD) < 0) {
      int n = open("/dev/null", O_RDWR);
      if (n >= 0 && n != fd) {
        dup2(n, fd);
        close(n);
      }
    }
  }
  sup_.setup();
  // Keep the heap small: large blocks go to mmap and are returned on free.
  mallopt(M_MMAP_THRESHOLD, 64 * 1024);
  mallopt(M_TRIM_THRESHOLD, 128 * 1024);
}

// After Configure (the plugin config's flags are final): the keeper is forked while the relay can
// still fork, then the relay confines itself (issue #12 §5). From then on it only moves bytes
// between the runtime's socket and its evaluators' pipes.
void Relay::confine() {
  confine_done_ = true;
  if (!sup_.fork_mode()) return;  // exec mode: the relay itself execs every child
  if (!sup_.start_keeper()) {
    logf("cannot fork the evaluator keeper: %s; the relay stays unconfined", strerror(errno));
    return;
  }
  if (!o_.confine || nriqos::sandbox_disabled_by_env()) return;
  std::string why = nriqos::confine_relay();
  sup_.set_confined();  // attempted: never fork again (a child would inherit what did apply)
  if (!why.empty()) logf("relay confinement incomplete: %s", why.c_str());
  else if (o_.debug) logf("confined: seccomp allow-list, no filesystem writes, no exec");
  if (o_.after_confine) o_.after_confine();
}

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
  call_runtime("RegisterPlugin", reg.SerializeAsString());
  setup_process();
  if (!o_.log_file.empty()) redirect_log(o_.log_file);
  else if (stderr_is_devnull()) redirect_log(kDefaultRelayLog);
  drop_resident_text();  // again: registration's and the set-up's code ran once
  if (o_.debug) {
    logf("started (trunk fd %d), registering as %s-%s; evaluator: %s", fd_, o_.plugin_idx.c_str(),
         o_.plugin_name.c_str(), sup_.fork_mode() ? "forked spare" : sup_.can_evaluate() ? "exec per event" : "none");
  }

  int64_t shutdown_deadline = 0;
  while (!closed_) {
    start_next();
    if (shutdown_) {
      if (sup_.busy()) {
        Outcome oc = sup_.abort_running("runtime requested Shutdown");
        finish_event(oc);
      }
      if (shutdown_deadline == 0) shutdown_deadline = now_ms() + 1000;
      if (out_off_ >= outq_.size() || now_ms() >= shutdown_deadline) break;
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
    int timeout = sup_.poll_timeout(now_ms());
    if (!sup_.busy() && !next_queue().empty()) {  // a request waits for its spare: wake at its deadline
      const Pending& f = next_queue().front();
      int64_t left = std::max<int64_t>(0, wait_limit_ms(f) - kMinBudgetMs - now_ms());
      timeout = timeout < 0 ? int(left) : std::min<int>(timeout, int(left));
    }
    if (sup_.busy()) {  // queued events wait behind the evaluation: wake at the first one's deadline
      for (const Pending& q : queue_) {
        int64_t left = std::max<int64_t>(0, wait_limit_ms(q) - kMinBudgetMs / 2 - now_ms());
        timeout = timeout < 0 ? int(left) : std::min<int>(timeout, int(left));
      }
    }
    if (SyncPass* sp = unreplied_pass()) {  // the pass's reply is due at its deadline, evaluation or not
      int64_t left = std::max<int64_t>(0, sp->deadline_ms - kMinBudgetMs / 2 - now_ms());
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
    if (SyncPass* sp = unreplied_pass(); sp && sp->deadline_ms - now_ms() < kMinBudgetMs / 2) sync_go_late(*sp);
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

}  // namespace

void relay_options_from_env(RelayOptions& o, const char* argv0) {
  const char* s = getenv("NRI_PLUGIN_SOCKET");
  if (s && *s) {
    char* end = nullptr;
    long v = strtol(s, &end, 10);
    if (end && *end == '\0' && v >= 0 && v < 65536) o.fd = int(v);
  }
  const char* name = getenv("NRI_PLUGIN_NAME");
  const char* idx = getenv("NRI_PLUGIN_IDX");
  std::string base = argv0 ? argv0 : "";
  auto slash = base.rfind('/');
  if (slash != std::string::npos) base = base.substr(slash + 1);
  bool nri_form = base.size() > 3 && isdigit((unsigned char)base[0]) && isdigit((unsigned char)base[1]) &&
                  base[2] == '-';
  if (name && *name) o.plugin_name = name;
  else if (nri_form) o.plugin_name = base.substr(3);
  if (idx && *idx) o.plugin_idx = idx;
  else if (nri_form) o.plugin_idx = base.substr(0, 2);
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

}  // namespace nri
