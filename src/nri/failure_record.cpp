// Relay-level failures on the operator's record, see failure_record.hpp.
#include "nri/failure_record.hpp"

#include <unistd.h>

#include <cstring>

#include <nlohmann/json.hpp>

#include "publish.hpp"

namespace nri {

namespace {

using nlohmann::json;

// Bounds of the message's strings (bytes). Kubernetes names: at most 253 (DNS subdomain);
// runtime ids are 64 hex digits, 128 leaves room for other runtimes.
constexpr size_t kMaxName = 253;
constexpr size_t kMaxId = 128;
constexpr size_t kMaxReason = 512;

const char* const kEvents[] = {"RunPodSandbox",   "RemovePodSandbox",    "CreateContainer", "StartContainer",
                               "UpdateContainer", "PostUpdateContainer", "UpdatePodSandbox", "StateChange",
                               "Synchronize",     "unknown",             "relay"};
const char* const kKinds[] = {"timeout",  "crash",      "bad-output",     "unavailable", "malformed",
                              "overloaded", "unknown-method", "shutdown", "records-cut", "died-after-answer",
                              "keeper-lost", "zygote-lost"};
const char* const kOutcomes[] = {"failed", "refused", "answered", "replaced"};
const char* const kFailModes[] = {"", "open", "closed"};

template <size_t N>
bool one_of(const std::string& v, const char* const (&set)[N]) {
  for (const char* s : set)
    if (v == s) return true;
  return false;
}

// Cut to `max` bytes without splitting a UTF-8 sequence.
std::string cut(const std::string& s, size_t max) {
  if (s.size() <= max) return s;
  size_t n = max;
  while (n > 0 && (static_cast<unsigned char>(s[n]) & 0xC0) == 0x80) --n;
  return s.substr(0, n);
}

// Names and ids: no control characters (the relay replaces them before sending, see
// failure_message; a message that still has one did not come from the relay's code).
bool plain(const std::string& v) {
  for (unsigned char c : v)
    if (c < ' ' || c == 0x7f) return false;
  return true;
}

// Relay side: control characters of runtime-given names become '?' (a record is never refused
// for a strange name).
std::string printable(const std::string& v, size_t max) {
  std::string s = cut(v, max);
  for (char& c : s)
    if (static_cast<unsigned char>(c) < ' ' || c == 0x7f) c = '?';
  return s;
}

void say(const std::string& s) {
  std::string line = "nri-qos: " + s + "\n";
  ssize_t w = write(STDERR_FILENO, line.data(), line.size());
  (void)w;
}

}  // namespace

std::string failure_message(const RelayFailure& f) {
  json j = json::object();
  j["event"] = f.event;
  j["outcome"] = f.outcome;
  j["kind"] = f.kind;
  if (!f.fail_mode.empty()) j["fail_mode"] = f.fail_mode;
  j["reason"] = cut(f.reason, kMaxReason);
  auto put = [&j](const char* k, const std::string& v, size_t max) {
    if (!v.empty()) j[k] = printable(v, max);
  };
  put("namespace", f.ns, kMaxName);
  put("pod", f.pod, kMaxName);
  put("container", f.container, kMaxName);
  put("id", f.id, kMaxId);
  put("sandbox_id", f.sandbox_id, kMaxId);
  if (f.duration_us >= 0) j["duration_us"] = f.duration_us;
  // Worst case (all fields at their bounds, every byte escaped as \u00XX) stays below
  // kMaxFailureMsg only for plain text; the replace handler keeps invalid UTF-8 from throwing.
  std::string s = j.dump(-1, ' ', false, json::error_handler_t::replace);
  if (s.size() >= kMaxFailureMsg) {  // escaped reason too long: drop it to what fits
    j["reason"] = cut(f.reason, 64);
    s = j.dump(-1, ' ', false, json::error_handler_t::replace);
  }
  return s;
}

bool parse_failure_message(const std::string& msg, RelayFailure& f, std::string& err) {
  f = RelayFailure();
  if (msg.size() >= kMaxFailureMsg) {
    err = "message of " + std::to_string(msg.size()) + " bytes (at most " + std::to_string(kMaxFailureMsg - 1) + ")";
    return false;
  }
  json j = json::parse(msg, nullptr, false);
  if (!j.is_object()) {
    err = "not a JSON object";
    return false;
  }
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string& k = it.key();
    if (k == "duration_us") {
      if (!it->is_number_integer() || it->get<int64_t>() < 0 || it->get<int64_t>() > 3600LL * 1000000) {
        err = "duration_us is not an integer of 0..3600 s";
        return false;
      }
      f.duration_us = it->get<int64_t>();
      continue;
    }
    std::string* dst = nullptr;
    size_t max = kMaxName;
    bool names = true;
    if (k == "event") dst = &f.event;
    else if (k == "outcome") dst = &f.outcome;
    else if (k == "kind") dst = &f.kind;
    else if (k == "fail_mode") dst = &f.fail_mode;
    else if (k == "reason") {
      dst = &f.reason;
      max = kMaxReason;
      names = false;
    } else if (k == "namespace") dst = &f.ns;
    else if (k == "pod") dst = &f.pod;
    else if (k == "container") dst = &f.container;
    else if (k == "id") {
      dst = &f.id;
      max = kMaxId;
    } else if (k == "sandbox_id") {
      dst = &f.sandbox_id;
      max = kMaxId;
    }
    if (!dst) {
      err = "unknown key \"" + cut(k, 40) + "\"";
      return false;
    }
    if (!it->is_string()) {
      err = k + " is not a string";
      return false;
    }
    const std::string& v = it->get_ref<const std::string&>();
    if (v.size() > max || (names && !plain(v))) {
      err = k + " is longer than " + std::to_string(max) + " bytes or has control characters";
      return false;
    }
    *dst = v;
  }
  if (!one_of(f.event, kEvents)) err = "event \"" + cut(f.event, 40) + "\" is not an NRI event the relay serves";
  else if (!one_of(f.outcome, kOutcomes)) err = "outcome \"" + f.outcome + "\" is not failed/refused/answered/replaced";
  else if (!one_of(f.kind, kKinds)) err = "kind \"" + f.kind + "\" is not a relay failure kind";
  else if (!one_of(f.fail_mode, kFailModes)) err = "fail_mode \"" + f.fail_mode + "\" is not open/closed";
  else if (f.reason.empty()) err = "no reason";
  // The reason is free text: one line (record_logfmt/record_json escape the rest).
  for (char& c : f.reason)
    if (c == '\n' || c == '\r') c = ' ';
  return err.empty();
}

nriqos::EventRecord failure_record(const RelayFailure& f) {
  nriqos::EventRecord r;
  r.source = "relay";
  r.event = f.event;
  r.ns = f.ns;
  r.pod = f.pod;
  r.container = f.container;
  r.id = f.id;
  r.sandbox_id = f.sandbox_id;
  r.sandbox = f.container.empty() && f.id.empty() && !f.pod.empty();
  r.outcome = f.outcome;
  r.failure = f.kind;
  r.fail_mode = f.fail_mode;
  r.duration_us = f.duration_us;
  r.message = f.reason;
  return r;
}

nriqos::MetricsEvent failure_metrics(const RelayFailure& f) {
  nriqos::MetricsEvent m;
  m.event = f.event;
  m.outcome = f.outcome;  // class "none": the relay never knows one
  m.relay_failure = f.kind;
  m.duration_us = f.duration_us;
  if (f.outcome == "answered" || f.outcome == "replaced") {
    // The evaluator answered and may have counted the event itself before its records were cut:
    // only nri_qos_relay_failures_total counts it here, never the event or its duration twice.
    m.count_event = false;
    m.duration_us = -1;
  }
  return m;
}

int publish_relay_failure(const std::string& msg, const nriqos::SinkPaths& paths) {
  RelayFailure f;
  std::string err;
  if (!parse_failure_message(msg, f, err)) {
    say("relay failure record refused: " + err);
    return 2;
  }
  nriqos::EventRecord r = failure_record(f);
  std::string line = nriqos::record_logfmt(r);
  ssize_t w = write(STDERR_FILENO, line.data(), line.size());
  (void)w;
  // The metrics first (as publish_event does): an event log that hangs (records-cut is often
  // about one) still leaves the count; the recorder's alarm ends the wait.
  int rc = 0;
  std::string e = nriqos::update_metrics(paths.metrics_file, {failure_metrics(f)}, nriqos::PolicyIdentity{});
  if (!e.empty()) {
    say(e);
    rc = 1;
  }
  e = nriqos::append_event_log(paths.event_log, paths.event_log_max_bytes, nriqos::record_json(r));
  if (!e.empty()) {
    say(e);
    rc = 1;
  }
  return rc;
}

}  // namespace nri
