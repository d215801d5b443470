// Mode detection for `nri-qos register`: which way will the node's container runtime actually
// call nri-qos? containerd 1.5/1.6 has only NRI v0.1 (reads /etc/nri/conf.json at every
// event); containerd 1.7 has native NRI, disabled unless its config enables it; 2.x has it on
// by default (config key [plugins."io.containerd.nri.v1.nri"] disable, plugin_path). With native
// NRI on, conf.json is read only through the v010-adapter plugin. Sources: containerd
// docs/NRI.md and the defaults of containerd's nri plugin config (1.7: Disable true; 2.x false).
#pragma once

#include <optional>
#include <string>

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

/// The mode the runtime will call: V01, Native, None (native NRI disabled on containerd ≥ 1.7
/// and no adapter), Unknown (no containerd found).
HookMode mode_called(const RuntimeInfo& r);

/// One line describing the runtime, e.g. "containerd 1.7.24 (/usr/bin/containerd), NRI disabled
/// in /etc/containerd/config.toml".
std::string describe(const RuntimeInfo& r);

/// Warning (with what to do) when `registered` will never be called on this node; "" otherwise.
std::string never_called_warning(const RuntimeInfo& r, HookMode registered);

}  // namespace nriqos
