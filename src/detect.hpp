// Mode detection for `nri-qos register`: which way will the node's container runtime actually
// call nri-qos? containerd 1.5/1.6 has only NRI v0.1 (reads /etc/nri/conf.json at every
// event); containerd 1.7 has native NRI, disabled unless its config enables it; 2.x has it on
// by default (config key [plugins."io.containerd.nri.v1.nri"] disable, plugin_path). With native
// NRI on, conf.json is read only through the v010-adapter plugin. Sources: containerd
// docs/NRI.md and the defaults of containerd's nri plugin config (1.7: Disable true; 2.x false).
#pragma once

#include <optional>
#include <string>

#include "knobs.hpp"

namespace nriqos {

enum class HookMode { Unknown, V01, Native, None };
const char* hook_mode_name(HookMode m);

/// What was found on the node.
struct RuntimeInfo {
    std::string binary;            ///< containerd executable examined ("" = none found)
    std::string version;           ///< "1.6.20", "2.1.3", "" = unknown
    int major = 0, minor = 0;
    bool running = false;          ///< a containerd process runs (its binary and --config used)
    std::string config;            ///< config.toml examined
    bool config_found = false;
    std::optional<bool> nri_disable;  ///< [plugins."io.containerd.nri.v1.nri"] disable, if set
    std::string plugin_path = "/opt/nri/plugins";
    bool adapter = false;          ///< a v010-adapter plugin is installed in plugin_path
    std::string error;             ///< config could not be parsed (then defaults apply)
    /// The OCI runtime binary of the CRI default runtime (runtimes.<default_runtime_name>.options
    /// .BinaryName of plugins."io.containerd.grpc.v1.cri".containerd (1.x) or
    /// "io.containerd.cri.v1.runtime".containerd (2.x)); "" = not configured: "runc" on PATH.
    std::string runtime_binary;
};

/// "1.6.20" from `containerd --version` output ("containerd github.com/containerd/containerd
/// 1.6.20~ds1 ..." or "... v1.7.24 ..."); false when no version is found.
bool parse_containerd_version(const std::string& out, std::string& version, int& major, int& minor);

/// Read the NRI settings of a containerd config.toml text (toml11). Sets nri_disable, plugin_path;
/// an unparsable text sets `error`.
void read_nri_config(const std::string& toml_text, RuntimeInfo& info);

/// Inspect the node: running containerd (via /proc) or the one on PATH, its --version, its config.
/// `config_override`/`version_override` ("" = detect) replace what is found.
RuntimeInfo detect_runtime(const std::string& config_override = "", const std::string& version_override = "");

/// Run `binary --version` (no shell; PATH search when it has no '/'; stdout only, at most 4 KiB,
/// bounded to `timeout_ms`, the child killed after it) and read its formula
/// (knobs.hpp runtime_version_formula). Never throws; a failure gives formula Auto and an empty
/// version, with `why` saying what happened.
RuntimeFormula probe_runtime_formula(const std::string& binary, std::string& why, int timeout_ms = 2000);

/// Name of the runtime probe's cache in the state dir (`--state-dir`, /run/nri-qos).
constexpr const char* kRuntimeFormulaFile = "runc-formula";

/// Probe `binary` ("" = "runc") and store the result in STATE_DIR/runc-formula, for the events
/// (sandboxed: they cannot exec) to read — settings.cpu_weight_formula = "auto", adjust.hpp
/// decide_weight_formula. Run by invoke when the cache is missing (before its sandbox) and by
/// reconcile (implicit_runtime_probe). A runtime that does not answer within `timeout_ms` is not
/// cached (the next implicit probe asks again). Returns one line ("runc 1.1.5 (runc --version): linear
/// cpu.weight formula, cached in /run/nri-qos/runc-formula") or an error line starting "cannot".
std::string refresh_runtime_formula(const std::string& state_dir, const std::string& binary, int timeout_ms = 2000);

/// The implicit probe of `invoke` (only when the cache is missing: once per boot, the state dir
/// being on /run; before the sandbox, which forbids exec) and `reconcile` (every run: catches a
/// runtime upgrade). It probes the binary named by the environment's NRI_QOS_RUNTIME_BINARY
/// ("none": never probe), else the one the cache names (register's choice), else "runc" on PATH
/// — and, without NRI_QOS_RUNTIME_BINARY, only for the default state dir `default_state_dir`: a
/// relocated one (a second instance, a test) is probed only when asked. "" or refresh's line.
/// `timeout_ms` bounds the runtime's answer (invoke: well inside its own deadline).
std::string implicit_runtime_probe(const std::string& state_dir, const std::string& default_state_dir, bool only_if_missing,
                                   int timeout_ms = 2000);

/// The cached probe of STATE_DIR (nullopt: never probed, or the file is not ours).
std::optional<RuntimeFormula> load_runtime_formula(const std::string& text);

/// The mode the runtime will call: V01, Native, None (native NRI disabled on containerd ≥ 1.7
/// and no adapter), Unknown (no containerd found).
HookMode mode_called(const RuntimeInfo& r);

/// One line describing the runtime, e.g. "containerd 1.7.24 (/usr/bin/containerd), NRI disabled
/// in /etc/containerd/config.toml".
std::string describe(const RuntimeInfo& r);

/// Warning (with what to do) when `registered` will never be called on this node; "" otherwise.
std::string never_called_warning(const RuntimeInfo& r, HookMode registered);

}  // namespace nriqos
