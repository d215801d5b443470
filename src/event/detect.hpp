// Mode detection for `nri-qos register`: which way will the node's container runtime actually
// call nri-qos? containerd 1.5/1.6 has only NRI v0.1 (reads /etc/nri/conf.json at every
// event); containerd 1.7 has native NRI, disabled unless its config enables it; 2.x has it on
// by default (config key [plugins."io.containerd.nri.v1.nri"] disable, plugin_path). With native
// NRI on, conf.json is read for every event only through the v010-adapter plugin; without it
// 1.7's CRI plugin never reads it, while 2.x's podsandbox controller runs its hooks at every pod
// sandbox start and stop, never for a container (internal/cri/server/podsandbox/sandbox_run.go
// Controller.Start, opts.go WithNRISandboxDelete): mode_called says Native there, and register
// warns about a conf.json entry (register.hpp conf_json_problems). Sources: containerd
// docs/NRI.md and the defaults of containerd's nri plugin config (1.7: Disable true; 2.x false).
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "model/knobs.hpp"

namespace nriqos {

enum class HookMode { Unknown, V01, Native, None };
const char* hook_mode_name(HookMode m);

/// What was found on the node.
struct RuntimeInfo {
    std::string binary;  ///< containerd executable examined ("" = none found)
    std::string version;  ///< "1.6.20", "2.1.3", "" = unknown
    int major = 0, minor = 0, patch = 0;
    bool running = false;  ///< a containerd process runs (its binary and --config used)
    std::string config;  ///< config.toml examined
    bool config_found = false;
    std::optional<bool> nri_disable;  ///< the NRI plugin's `disable`, if set (its section: nri_section)
    std::string plugin_path = "/opt/nri/plugins";
    bool adapter = false;  ///< a v010-adapter plugin is installed in plugin_path
    std::string error;  ///< config could not be parsed (then defaults apply)
    /// The OCI runtime binary of the CRI default runtime (runtimes.<default_runtime_name>.options
    /// .BinaryName of plugins."io.containerd.grpc.v1.cri".containerd (1.x) or
    /// "io.containerd.cri.v1.runtime".containerd (2.x)); "" = not configured: "runc" on PATH.
    std::string runtime_binary;
    // Filled by read_containerd_layers (the main config and its `imports`, issue #20 §4), read
    // as this containerd release reads them (containerd_config.hpp read_containerd_view):
    std::vector<std::string> config_files;  ///< files loaded, in containerd's load order
    /// The version containerd reads the plugin names as: 1.x the last non-zero `version` (1 when
    /// none is set: short plugin IDs), 2.0-2.2 the merged one (3 unless a file says 2), 2.3: 4.
    int config_version = 0;
    std::string nri_file;  ///< file whose NRI section sets `disable` (else the last defining the section; "" = none)
    std::string nri_section;  ///< that section as the file names it: [plugins.nri] (1.x, version 1) or [plugins."io.containerd.nri.v1.nri"]
    std::string nri_disabled_in;  ///< a file whose `disabled_plugins` names the NRI plugin ("" = none): NRI is off whatever `disable` says
    /// NRI's default validator (containerd >= 2.2: [plugins."io.containerd.nri.v1.nri".default_validator],
    /// containerd/nri plugins/default-validator DefaultValidatorConfig): its `enable` and its
    /// `required_plugins` (plugin names or index-names a container's creation needs), if set.
    std::optional<bool> validator_enable;
    std::optional<std::vector<std::string>> required_plugins;
    std::string cri_file;  ///< file that sets the runtime's pod_annotations (else defines its table, else the CRI section; "" = none)
    std::string runtime_name = "runc";  ///< CRI default_runtime_name
    bool runtime_table = false;  ///< the CRI section has a table for runtime_name
    std::string runtime_section;  ///< that table as the file names it (or as it would be written): [plugins.cri.containerd.runtimes.runc], ...
    std::optional<std::vector<std::string>> pod_annotations;  ///< its pod_annotations, if set
    std::string dropin_dir;  ///< a directory an `imports` glob `<dir>/*.toml` covers ("" = none)
    std::vector<std::string> import_patterns;  ///< every `imports` entry of the files read, resolved (path or glob)
    std::vector<std::string> config_notes;  ///< one line each: settings this release ignores (containerd_config.hpp)
};

/// A runtime other than containerd that only runs native NRI (ttrpc) plugins: iSulad or CRI-O.
struct NativeRuntimeInfo {
    std::string name;  ///< "iSulad" or "CRI-O"
    bool found = false;  ///< binary, running process or config file present
    std::string binary;  ///< executable found ("" = none)
    bool running = false;
    std::vector<std::string> config_files;  ///< configuration files read, in order
    std::optional<bool> nri_enabled;  ///< the NRI switch, when a file sets it
    std::string plugin_path = "/opt/nri/plugins";
    std::string error;  ///< a configuration file could not be parsed
    /// iSulad: "enable-cri-v1", when set. Its NRI hooks are in the CRI v1 services only, which
    /// run only with it true (cri_service.cc CRIService::Init; the v1 services call NRIAdaptation).
    std::optional<bool> cri_v1;
    /// iSulad: the binary links libisula_nri (built with ENABLE_NRI, which needs ENABLE_CRI_API_V1
    /// and isula-rust-extensions' libisula_nri.so: cmake/options.cmake, cmake/checker.cmake);
    /// nullopt: no binary read.
    std::optional<bool> nri_built;
    /// One line each: what the configuration sets that the runtime does not read (a key it does
    /// not parse), or how it limits nri-qos (external connections off, timeouts).
    std::vector<std::string> notes;
};

/// "1.6.20" from `containerd --version` output ("containerd github.com/containerd/containerd
/// 1.6.20~ds1 ..." or "... v1.7.24 ..."); false when no version is found.
bool parse_containerd_version(const std::string& out, std::string& version, int& major, int& minor);

/// Read the NRI settings of one containerd config.toml text (toml11) as info's release reads it
/// alone (read_containerd_layers on that file). Sets nri_disable, plugin_path, runtime_binary;
/// an unparsable text, or one containerd refuses, sets `error`.
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
std::string implicit_runtime_probe(const std::string& state_dir, const std::string& default_state_dir, bool only_if_missing, int timeout_ms = 2000);

/// The cached probe of STATE_DIR (nullopt: never probed, or the file is not ours).
std::optional<RuntimeFormula> load_runtime_formula(const std::string& text);

/// The mode the runtime will call: V01, Native, None (native NRI disabled on containerd ≥ 1.7
/// and no adapter), Unknown (no containerd found).
HookMode mode_called(const RuntimeInfo& r);

/// One line describing the runtime, e.g. "containerd 1.7.24 (/usr/bin/containerd), NRI disabled
/// in /etc/containerd/config.toml".
std::string describe(const RuntimeInfo& r);

// ---- containerd config `imports`, iSulad, CRI-O (issue #20 §4, issue #25 §1) ----

/// Where containerd looks for the `imports` entry `imp` of config file `importer`
/// (resolveImports): a relative path without `*` is relative to the importer's directory; a
/// relative glob is too on containerd 2.x (cmd/containerd/server/config/config.go joins before it
/// globs), while 1.6/1.7 (services/server/config/config.go) glob it as written, from containerd's
/// working directory: taken as "/", containerd.service's. `containerd_major` 0 = unknown (the 1.x
/// rule). Absolute entries are returned as written (a glob) or cleaned; the result may hold `*`.
std::string resolve_import(const std::string& imp, const std::string& importer, int containerd_major);

/// The files containerd loads for config `main_path`, in its order: the main file, then its
/// `imports` breadth-first, each file once (containerd LoadConfig + resolveImports; an entry is
/// resolved by resolve_import for `containerd_major`, a glob expanded sorted as filepath.Glob).
/// `texts` gets each file's content; a file that cannot be read or parsed sets `error` (one line)
/// and stops there, as containerd would refuse to start.
std::vector<std::string> containerd_config_files(const std::string& main_path, std::vector<std::string>& texts, std::string& error,
                                                 int containerd_major = 0);

/// Apply containerd's merge of `files` (path, TOML text; load order) to `info`, with the rules of
/// the release info.version names (containerd_config.hpp read_containerd_view: 1.x replaces a
/// plugin's whole section with the last file's and reads a version-1 config by short plugin
/// IDs; 2.x migrates version 1/2 files and merges plugin sections key by key). Sets nri_disable
/// / plugin_path (from the NRI plugin section), config_version, nri_file, nri_section, cri_file,
/// runtime_name (CRI `containerd.default_runtime_name`, default "runc"), runtime_table,
/// runtime_section, pod_annotations (of that runtime), runtime_binary, config_files,
/// import_patterns, config_notes and dropin_dir (the directory of an `imports` glob ending in
/// "/*.toml", resolved by resolve_import for info.major). A parse error, or a config that
/// containerd release refuses, sets `error`.
void read_containerd_layers(const std::vector<std::pair<std::string, std::string>>& files, RuntimeInfo& info);

/// The config containerd will read at its next start: `r.config` and its `imports`, as they are
/// on disk now (containerd_config_files, for r.major), through read_containerd_layers into `r`;
/// an unreadable file sets `r.error` unless a parse error already did. detect_runtime reads the
/// node's config with it, register re-reads the config after an edit.
void read_containerd_config(RuntimeInfo& r);

/// containerd matches pod_annotations patterns with Go path.Match (pkg/cri/server/helpers.go
/// getPassthroughAnnotations): `*` and `?` never match '/', so "*" does not cover
/// "volcano.sh/qos-level" but "volcano.sh/*" does. True when some pattern passes `key`.
bool annotation_passed(const std::vector<std::string>& patterns, const std::string& key);

// ---- What the runtime passes to an NRI v0.1 hook, recorded for the events (issue #25 §1) ----

/// Name of the record in the state dir (`--state-dir`, /run/nri-qos): small JSON, replaced
/// atomically (StateDir::write_file: kernel.hpp replace_file).
constexpr const char* kAnnotationPasslistFile = "annotation-passlist";

/// The pod annotations the node's runtime hands an NRI v0.1 hook, as `register` (and reconcile,
/// when the record is missing or containerd's config changed since) read them from containerd's
/// config (read_containerd_layers, following `imports`). The event path reads it only when an
/// annotation a fact needs is absent (facts.hpp FactInput::not_passed): no cost otherwise.
struct AnnotationPasslist {
    std::string runtime;  ///< "containerd 1.6.20"
    /// true: every pod annotation reaches the hook (containerd ≥ 1.7 through the v010-adapter,
    /// which gets them from native NRI); false: only those `patterns` match.
    bool passes_all = false;
    std::vector<std::string> patterns;  ///< the default runtime's pod_annotations (Go path.Match patterns; empty = unset)
    bool set = false;  ///< pod_annotations is set in the config
    std::string where;  ///< "[plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.runc] pod_annotations in /etc/containerd/config.toml"
    /// The config files read and their mtimes (ns), and containerd's binary: a change makes
    /// reconcile read the config again.
    std::vector<std::pair<std::string, int64_t>> files;
};

/// The record of `info` (a containerd found by detect_runtime). nullopt: no containerd version
/// known (nothing honest to record).
std::optional<AnnotationPasslist> annotation_passlist_of(const RuntimeInfo& info);

/// Write `p` to STATE_DIR/annotation-passlist. "" or a one-line error.
std::string record_annotation_passlist(const std::string& state_dir, const AnnotationPasslist& p);

/// Parse the record (nullopt: not ours / unreadable).
std::optional<AnnotationPasslist> load_annotation_passlist(const std::string& text);

/// True when a file the record names changed since (mtime differs, or it is gone): the record is
/// stale. A record naming no file is never stale.
bool annotation_passlist_stale(const AnnotationPasslist& p);

/// Reconcile's refresh: for the default state dir only (as implicit_runtime_probe; a relocated
/// one — a test, a second instance — only when NRI_QOS_CONTAINERD_CONFIG names the config to
/// read), write the record when it is missing or stale. "" when nothing was done, else one line
/// (what was recorded, or the error).
std::string refresh_annotation_passlist(const std::string& state_dir, const std::string& default_state_dir);

/// Why annotation `key`, absent from a v0.1 request, is absent, given the record (nullopt: no
/// record): "" when the runtime passes it (a plain absence: the pod does not carry it), else the
/// reason: either one that replaces "no <key> annotation" (the runtime drops it; the pod may
/// well carry it)
///   "not passed by containerd 1.6.20: add <key> to pod_annotations (<where>; nri-qos register --pass-annotations)"
/// or, with no record (nothing known), one added to it in parentheses
///   "containerd may not pass it: check pod_annotations; nri-qos register records what it passes"
std::string annotation_not_passed_reason(const std::optional<AnnotationPasslist>& p, const std::string& key);

/// iSulad's daemon.json as iSulad parses it: the keys of libisula's schema (openeuler-mirror/lcr
/// src/json/schema/isulad-daemon-configs.json, the generated isulad_daemon_configs parser; values
/// copied in iSulad src/daemon/config/isulad_config.c merge_json_confs_into_global, under
/// ENABLE_CRI_API_V1 / ENABLE_NRI; getters conf_get_nri_*): "nri-support" (bool, default false)
/// switches NRI on, "plugin-path" (default /opt/nri/plugins, DEFAULT_PLUGIN_PATH) is the plugin
/// directory, "plugin-config-path" (/etc/nri/conf.d), "disable-connections" (bool: no external
/// plugin may connect, so the relay service cannot), "plugin-registration-timeout" and
/// "plugin-requst-timeout" (sic; uint64 seconds, defaults 5 and 2), "enable-cri-v1" (bool: the
/// CRI v1 services, the only ones that call NRI plugins). Keys with '_' ("plugin_path",
/// "disable_connections", ..., as iSulad's NRI design doc spells them) are not parsed: each present
/// is a note naming the key iSulad reads. Fills nri_enabled, plugin_path, cri_v1, notes; invalid
/// JSON, or a key of the wrong type (iSulad refuses to start), sets `error`.
void read_isulad_config(const std::string& json_text, NativeRuntimeInfo& info);

/// Whether the iSulad executable `binary` was built with NRI: it names libisula_nri.so (a
/// DT_NEEDED entry of the dynamic executable). nullopt: unreadable.
std::optional<bool> isulad_links_nri(const std::string& binary);

/// CRI-O's crio.conf and crio.conf.d drop-ins (TOML, load order; a later file overrides the keys
/// it sets): `[crio.nri] enable_nri`, `nri_plugin_dir` (crio.conf(5), CRIO.NRI TABLE; defaults
/// false and /opt/nri/plugins in that page). A parse error sets `error`.
void read_crio_configs(const std::vector<std::pair<std::string, std::string>>& files, NativeRuntimeInfo& info);

/// Look for iSulad: /usr/bin/isulad (or /usr/local/bin), a running `isulad`, `config` (default
/// /etc/isulad/daemon.json).
NativeRuntimeInfo detect_isulad(const std::string& config = "");

/// Look for CRI-O: /usr/bin/crio (or /usr/local/bin), a running `crio`, `config` (default
/// /etc/crio/crio.conf) and the *.conf files of `<config>.d`, sorted.
NativeRuntimeInfo detect_crio(const std::string& config = "");

/// One line describing an iSulad/CRI-O found, e.g. "iSulad (/usr/bin/isulad), native NRI
/// enabled in /etc/isulad/daemon.json".
std::string describe_native(const NativeRuntimeInfo& r);

}  // namespace nriqos
