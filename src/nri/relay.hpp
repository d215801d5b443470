// Native NRI plugin mode of nri-qos: a thin ttrpc relay that evaluates every NRI event in a
// fresh one-shot child process (`nri-qos nri-eval ...`) and turns the child's JSON answer
// into the ttrpc reply. Protocol facts and behaviour: docs/native-nri.md.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "nri/evaluator.hpp"

namespace nriqos::nri {

/// The NRI protocol version this build's copy of the API speaks (src/nri/nri.proto: the
/// messages and field numbers of containerd/nri v0.12.0 pkg/api/api.proto that nri-qos uses,
/// the dedicated event RPCs included). Sent as RegisterPluginRequest.NRI_version, as
/// containerd/nri's own stub does with its module version (v0.12.0 pkg/stub/stub.go register);
/// containerd >= 2.3 logs it at registration and says "unknown" without it.
inline constexpr const char kNriProtocolVersion[] = "v0.12.0";

/// Settings of the relay. The caller (src/cli/main.cpp) fills them from the command line and
/// from the environment containerd gives a launched plugin (relay_options_from_env()).
struct RelayOptions {
    /// Pre-connected trunk socket (containerd launch: NRI_PLUGIN_SOCKET=3). Used when >= 0.
    int fd = -1;
    /// External mode: unix stream socket of the runtime (e.g. /var/run/nri/nri.sock); used when
    /// `fd` < 0. One of `fd`/`socket_path` must be set.
    std::string socket_path;
    /// RegisterPlugin.plugin_name / plugin_idx (containerd requires a two-digit index).
    std::string plugin_name = "nri-qos";
    std::string plugin_idx = "10";
    /// argv of the per-event child; [0] must be an absolute path (containerd gives plugins no
    /// PATH), e.g. {"/proc/self/exe", "nri-eval", "--policy", "/etc/nri/nri-qos.toml"}.
    /// Empty = no evaluation: every event is answered with the failure policy.
    std::vector<std::string> child_argv;
    /// In-process evaluation (fork mode, the default of the real binary: a spare evaluator is
    /// forked ahead of each event, see evaluator.hpp). When `inproc.evaluate` is set it is used
    /// and `child_argv` only tells which evaluation flags were given on the command line (they win
    /// over the plugin config).
    InProcessEval inproc;
    /// Hard limit in ms for one child (spawn to exit). Further capped by the request's
    /// timeout_nano and ConfigureRequest.request_timeout minus a 250 ms reply margin; containerd
    /// cuts a plugin off for good after 2 s (plugin_request_timeout).
    int child_deadline_ms = 1500;
    /// Flag appended (with the child's own budget in ms = remaining time - 100 ms) to the child
    /// argv of every event, e.g. "--event-deadline-ms 1400". Empty: append nothing.
    std::string deadline_flag = "--event-deadline-ms";
    /// Largest child stdout accepted (bytes); more counts as garbage.
    size_t max_child_output = 1u << 20;
    /// Map keys of a JSON plugin config (ConfigureRequest.config) to child flags
    /// (policy → --policy, cgroup_root → --cgroup-root, ..., debug: true → --debug) unless the
    /// flag is already in child_argv. See docs/native-nri.md "Plugin configuration".
    bool config_to_child_flags = true;
    /// Fork mode: once configured, fork the keeper (the one process that makes evaluator zygotes)
    /// and confine the relay (src/os/sandbox.hpp confine_relay: seccomp allow-list, no filesystem
    /// writes, no exec). Off with NRI_QOS_NO_SANDBOX=1. Exec mode is never confined (it execs).
    bool confine = true;
    /// Tests only: called in the relay right after it confined itself.
    std::function<void()> after_confine;
    /// Log every event (one line each) to stderr, not just warnings.
    bool debug = false;
    /// Service mode (service.hpp): the write end of a pipe to the service, which keeps the
    /// relay's liveness on record. One line per change, tab-separated:
    /// "configured\t<runtime name>\t<runtime version>\t<NRI version>" after Configure, "synced"
    /// after each Synchronize reply. -1: none.
    int status_fd = -1;
    /// Append the relay's stderr (and its children's) to this file; empty = keep stderr
    /// (/dev/null for a plugin launched by containerd). The plugin config key "log_file" sets it
    /// when this is empty.
    std::string log_file;
};

/// Fill `o.fd`, `o.plugin_name` and `o.plugin_idx` from the environment of a launched NRI
/// plugin: NRI_PLUGIN_SOCKET (fd number), NRI_PLUGIN_NAME, NRI_PLUGIN_IDX; when the name/index
/// variables are missing, from the basename of `argv0` if it has the NRI form "NN-name"
/// (NRI pkg/api/plugin.go ParsePluginName). Values not found are left unchanged. Call before
/// applying command-line flags so that flags win.
void relay_options_from_env(RelayOptions& o, const char* argv0);

/// Run the relay until the runtime goes away. Sends RegisterPlugin first thing (before any
/// step that could block or fail), then serves the NRI Plugin service in one single-threaded
/// poll() loop: Configure (subscribes RunPodSandbox, RemovePodSandbox, CreateContainer,
/// StartContainer, UpdateContainer, PostUpdateContainer = mask 0x1ad, plus UpdatePodSandbox
/// 0x800 on NRI v0.10+ runtimes), Synchronize (every existing pod and container evaluated, the
/// updates in the reply to the last part: src/nri/sync.hpp), Shutdown, CreateContainer,
/// UpdateContainer, UpdatePodSandbox, StateChange, and NRI v0.12's dedicated event RPCs
/// (RunPodSandbox, StartContainer, ...: the subscribed ones evaluated as their StateChange, the
/// others answered with their empty response); any other method/service gets status 12
/// UNIMPLEMENTED. Each event is evaluated in a process of its own (evaluator.hpp; see
/// docs/native-nri.md for the JSON contract), one at a time, with a hard deadline (SIGKILL to
/// the evaluator's process group); every child is reaped. Requests arriving meanwhile wait in a
/// bounded queue (64 requests, 8 MiB): past it, or at its own deadline while still queued, a
/// request is answered at once with its event's fail mode and recorded as "overloaded"
/// (docs/native-nri.md "Overload").
/// Writes only to stderr (never stdout). Returns 0 on EOF / connection close / Shutdown, 1
/// when no connection could be obtained (bad fd, connect failure) or on a fatal protocol error
/// (mux frame > 16 MiB). Never throws.
int run_relay(const RelayOptions& opts);

}  // namespace nriqos::nri
