// register.hpp — enable/disable nri-qos in the container runtime's NRI configuration.
//
// Two ways to hook nri-qos into a runtime:
//
//  * NRI v0.1 (containerd 1.6, or 1.7+ with the v010-adapter): the runtime reads the JSON file
//    /etc/nri/conf.json — {"version":"0.1","plugins":[{"type":"nri-qos","conf":{...}}]} — and,
//    per pod sandbox / container event, execs `<type> invoke` (found on PATH + /opt/nri/bin) with
//    the entry's `conf` in the request (containerd/nri v0.1 client.go: ConfigList{Version,
//    Plugins[]{Type,Conf}}; a missing conf.json means "no plugins"). register_v01 /
//    unregister_v01 edit that file.
//  * Native NRI (containerd >= 1.7 with NRI enabled, iSulad): the runtime launches every
//    executable `NN-name` found in its plugin_path (default /opt/nri/plugins) once, when NRI
//    starts (NRI pkg/adaptation discoverPlugins, api.ParsePluginName: two digits, '-', name).
//    enable_native / disable_native manage that entry.
//
// Decision (native mode): the plugin entry is a SYMLINK /opt/nri/plugins/NN-nri-qos ->
// /opt/nri/bin/nri-qos, not a copy. NRI's discovery uses the directory entry's lstat mode
// (0777 for a symlink) and exec follows the link, which is also how the NRI project installs its
// v010-adapter. A symlink follows package upgrades of /opt/nri/bin/nri-qos automatically; a copy
// would silently keep running the old binary. The flip side: a dangling link is still "an
// executable" for discovery and its exec fails, which on containerd 1.7.0-1.7.25 takes the CRI
// service down — so package removal MUST run `nri-qos unregister --native` (our prerm/%preun do).
// The runtime scans plugin_path only when NRI starts: restart containerd after enabling/disabling.
//
// Exit-code convention of the CLI commands: 0 = done or nothing to do (idempotent), 1 = refused
// or failed (file left untouched), 2 = bad command-line value (e.g. --plugin-conf not JSON).
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "event/detect.hpp"

namespace CLI {
class App;
}

namespace nriqos {

/// Outcome of one register/unregister operation.
///   exit_code: 0 success or no-op, 1 refused/failed, 2 invalid argument (see file comment).
///   changed:   true when a file/link was created, rewritten or removed.
///   message:   exactly one line, no trailing newline, ready to print (stdout when exit_code==0,
///              stderr otherwise). Starts with "nri-qos: ".
struct RegisterResult {
    int exit_code = 0;
    bool changed = false;
    std::string message;
    bool ok() const { return exit_code == 0; }
};

/// Default paths/values shared by the CLI, the packages and the Kubernetes installer.
inline constexpr const char* kDefaultConfJson = "/etc/nri/conf.json";
inline constexpr const char* kDefaultType = "nri-qos";
inline constexpr const char* kDefaultPluginsDir = "/opt/nri/plugins";
inline constexpr const char* kDefaultIndex = "10";
inline constexpr const char* kDefaultBinary = "/opt/nri/bin/nri-qos";

/// Add or update the NRI v0.1 plugin entry `type` in `conf_json_path`.
///
/// File semantics:
///  * absent file, or a file holding only whitespace: treated as absent; the file (and missing
///    parent directories, mode 0755) is created as {"version":"0.1","plugins":[{"type":T,
///    "conf":C}]}, mode 0644.
///  * present: must be a JSON object whose "plugins" (if present) is an array of objects each
///    with a string "type", and whose "version" (if present) is a string; anything else is
///    refused (exit 1, file untouched, message names the problem). Only the FIRST entry of
///    `type` is added/updated (its "conf" member replaced, its other members kept); later
///    duplicates of `type` are dropped (the runtime would invoke the hook twice). Every other
///    key and plugin keeps its value and position (nlohmann::ordered_json). A missing "plugins"
///    is appended as a new array; a missing "version" is NOT added (minimal change).
///  * `replace_conf == false`: an existing entry keeps its "conf" (used by package scripts so an
///    upgrade never resets an administrator's conf); a new entry still gets `plugin_conf`.
///  * nothing to change → file not rewritten (mtime kept), exit 0, "already registered".
///  * writes go to a temporary file in the same directory, fsync'd, renamed over the original,
///    then the directory is fsync'd: readers see the old or the new file, never a truncated one.
///    The original file's mode and owner are kept. If `conf_json_path` is a symlink its target
///    is rewritten (the link stays). Output is 2-space indented JSON with a final newline
///    (whitespace/formatting of the original is not preserved, values and key order are).
/// `type` must match [A-Za-z0-9._-]+ (it is exec'd as a binary name); `plugin_conf` must be a
/// JSON object. Never throws.
RegisterResult register_v01(const std::string& conf_json_path, const std::string& type, const nlohmann::json& plugin_conf, bool replace_conf = true);

/// Same as register_v01 with an order-preserving `plugin_conf` (what the CLI uses, so the
/// administrator's key order of --plugin-conf is kept in conf.json).
RegisterResult register_v01_ordered(const std::string& conf_json_path, const std::string& type, const nlohmann::ordered_json& plugin_conf,
                                    bool replace_conf = true);

/// Remove every NRI v0.1 plugin entry `type` from `conf_json_path`.
///
///  * absent/whitespace-only file or no such entry → nothing written, exit 0 ("not registered").
///  * invalid JSON / wrong shape → refused like register_v01 (exit 1, file untouched).
///  * if the file is exactly what register_v01 creates from scratch (only keys "version":"0.1"
///    and "plugins" = [our single entry with only "type" and "conf"]), the file is deleted:
///    a missing conf.json and an empty plugin list mean the same to the runtime, and this
///    leaves a node exactly as it was before an install on a node without conf.json.
///  * otherwise the entry is removed and everything else kept (possibly leaving
///    {"version":"0.1","plugins":[]}), written atomically as in register_v01.
/// Never throws.
RegisterResult unregister_v01(const std::string& conf_json_path, const std::string& type);

/// Where containerd's NRI v0.1 client looks for a conf.json plugin's executable: its `type` is
/// exec'd by name (exec.CommandContext(type, "invoke")) on containerd's PATH with /opt/nri/bin
/// appended (containerd/nri client.go New, DefaultBinaryPath). containerd's PATH is taken as
/// this process's (a unit's default PATH; unset: the usual system directories).
std::string v01_search_path();

/// What the NRI v0.1 conf.json `conf_json_path` will do wrong on this node, one line each
/// (issue #31 §6); none when the file is absent or empty, or the runtime never reads it
/// (containerd 1.7 without the v010-adapter: its CRI plugin has no v0.1 client unless the
/// experimental ENABLE_CRI_SANDBOXES server runs, pkg/cri/sbserver). Who reads it: containerd
/// 1.5/1.6 at every pod and container event; 2.x's podsandbox controller at every pod sandbox
/// start and stop only (internal/cri/server/podsandbox/sandbox_run.go Controller.Start, opts.go
/// WithNRISandboxDelete: nri.New reads the file each time); the v010-adapter at every event.
///  * a file that is not valid JSON / not a v0.1 config: nri.New fails, so does every pod start
///    on 1.6 and 2.x (sandbox_run.go: "unable to create nri client");
///  * a plugin whose `type` is no executable on `search_path` (v01_search_path): every pod start
///    fails ("nri invoke: plugin: <type>: exec: ... executable file not found");
///  * `type` (nri-qos) listed on containerd ≥ 2.0 with native NRI on while `native_serves` (the
///    native plugin is or is being registered, or the external relay serves): each sandbox is
///    evaluated twice.
/// `c` from detect_runtime (no version known: as a runtime that reads it). Never throws.
std::vector<std::string> conf_json_problems(const std::string& conf_json_path, const std::string& type, const RuntimeInfo& c, bool native_serves,
                                            const std::string& search_path);

/// True when `plugins_dir` holds a native plugin entry `NN-<type>` (any two-digit index; a
/// symlink or a file): the runtime starts it at its next start.
bool native_entry_present(const std::string& plugins_dir, const std::string& type = kDefaultType);

/// Install the native NRI plugin entry `<plugins_dir>/<idx>-<name>` as a symlink whose content is
/// `binary_path` verbatim (see the file comment for why a symlink).
///  * `idx` must be exactly two digits (NRI api.CheckPluginIndex); `binary_path` must be absolute
///    and name an executable regular file as seen from this process (in the Kubernetes
///    installer the image carries the binary at the same path as the host).
///  * `plugins_dir` is created (0755) if missing.
///  * an existing symlink at that name is replaced atomically (symlink to a temp name + rename);
///    an existing non-symlink (e.g. a copied binary) is refused, exit 1.
///  * other `MM-<name>` symlinks in `plugins_dir` pointing at `binary_path` are removed (the
///    index moved; two relays with one name would both run).
///  * already in place → exit 0, nothing changed.
/// Never throws.
RegisterResult enable_native(const std::string& plugins_dir, const std::string& idx, const std::string& binary_path,
                             const std::string& name = kDefaultType);

/// Remove native NRI plugin entries: `<plugins_dir>/<idx>-<name>` when `idx` is non-empty,
/// otherwise every `NN-<name>` (two digits) in `plugins_dir`; only symlinks whose content is
/// `binary_path` are removed (anything else is reported and kept, exit 1). Missing directory or
/// no entry → exit 0, nothing changed. Never throws.
RegisterResult disable_native(const std::string& plugins_dir, const std::string& idx, const std::string& binary_path,
                              const std::string& name = kDefaultType);

/// The external relay that serves the runtime on this node, or "" when none does: the relay
/// service (`nri-qos relay --socket`, packaged as nri-qos-relay.service; the DaemonSet's relay)
/// whose liveness file `<state_dir>/relay.json` names a live nri-qos process (src/nri/service.hpp
/// read_service_status: "up"). Returned as one line: "nri-qos relay service (pid N, registered
/// with containerd 2.1.9)". `register` never installs the launched plugin beside it: the runtime
/// would see two plugins `10-nri-qos` at its next start (issue #20 §2, "never both",
/// docs/native-nri.md). `proc_root` is for tests. Never throws.
std::string external_relay_serving(const std::string& state_dir, const std::string& proc_root = "/proc");

struct Policy;

// ---- Reading the node's runtime (issue #20 §4, issue #25 §1) ----

/// Pod annotation keys `policy` reads: the keys of its rules' match.annotations and
/// match.labels_or_annotations, plus the annotations read by the facts its classes use
/// (FactDef::reads, src/model/fact_table.cpp: every "prefix.domain/name" token; "the same
/// annotations" means those of the fact listed before it). Sorted, unique.
std::vector<std::string> policy_annotation_keys(const Policy& policy);

/// What `register` will do on this node, decided before anything is written.
///   mode:     "v01" (conf.json) or "native" (plugin symlink).
///   warnings: each one multi-line text (lines without prefix) the CLI prints to stderr as
///             "nri-qos: WARNING: <line>"; registration still goes ahead (exit 0).
///   notes:    one line each, informational (stderr, "nri-qos: <note>").
///   missing_annotations: keys `needed` that the runtime drops before an NRI v0.1 hook sees them
///             (containerd < 1.7 passes only the default runtime's pod_annotations).
struct RegisterPlan {
    std::string mode;  ///< "v01", "native" or "both" (conf.json and the native plugin)
    std::vector<std::string> warnings, notes;
    std::vector<std::string> missing_annotations;
    /// `--mode both` where the native plugin sees every event: remove nri-qos's own conf.json
    /// entry, which would only make containerd 2.x evaluate each pod sandbox a second time.
    bool drop_v01 = false;
};

/// Decide the mode and the warnings. `requested`: "auto", "v01" or "native". Auto picks, in
/// this order: containerd (version known) → the mode it calls (native when NRI is disabled on
/// ≥ 1.7 without the v010-adapter: what it will call once NRI is enabled); else iSulad, else
/// CRI-O found → native (they run only native NRI plugins); else nothing found → v01 with a
/// warning (the packages and the Kubernetes installer rely on conf.json being written; it is
/// harmless when no runtime reads it). Every case where the registered mode is not called is a
/// warning: NRI disabled, v0.1 on a native-only runtime, native on containerd 1.6, no runtime
/// found, annotations `needed` that containerd 1.6 does not pass to v0.1 hooks.
/// `requested` "both" (the Kubernetes installer's NRI_QOS_MODE=both: whatever the node will
/// run) registers the native plugin always and conf.json only where it adds events the native
/// plugin does not get (issue #31 §6): containerd 1.5/1.6 (v0.1 only) or no containerd version
/// known (mode "both", with a warning for 2.x); with the v010-adapter conf.json only (the
/// adapter relays every native event to it); on containerd ≥ 1.7 with native NRI on or off,
/// the native plugin only and drop_v01 (1.7 never reads conf.json; 2.x's podsandbox controller
/// reads it at every sandbox start and stop, internal/cri/server/podsandbox/sandbox_run.go
/// Controller.Start and opts.go WithNRISandboxDelete, so an entry beside the native plugin
/// evaluates each sandbox twice).
RegisterPlan plan_register(const RuntimeInfo& containerd, const NativeRuntimeInfo& isulad, const NativeRuntimeInfo& crio,
                           const std::string& requested, const std::vector<std::string>& needed);

/// Where `register` keeps the copy of a containerd config file before it edits it: a directory of
/// its own, which no containerd `imports` glob reads (a copy beside a drop-in that `conf.d/*`
/// matches would be loaded after the edited file and undo the edit, issue #30 §4).
inline constexpr const char* kDefaultBackupDir = "/var/lib/nri-qos/backup";

/// `register --enable-nri`: make containerd's config enable native NRI (`disable = false`,
/// `plugin_request_timeout = "2s"` unless already set) in the NRI plugin's section as the node's
/// containerd release reads it (containerd_config.hpp read_containerd_view): [plugins.nri] in a
/// version-1 config (no `version`) on 1.7, [plugins."io.containerd.nri.v1.nri"] otherwise.
/// Where: the file and table that set `disable` (the value replaced, the line's comment kept),
/// else the last file defining the section (1.x replaces a section whole), else a new drop-in
/// `<dropin_dir>/90-nri-qos.toml` (with the `version` that changes nothing: new_file_version)
/// when an `imports` glob covers such a directory, else the main config (appended; created with
/// `version` when absent). An edited file is first copied to `<backup_dir>/<its absolute
/// path>.<stamp>` (same mode; refused when an `imports` entry would read the copy). The edit is
/// textual (comments and layout kept); it is written only when the result, re-read through
/// read_containerd_layers, reads NRI as enabled; after writing, the config is read again from
/// disk as containerd will (every imports file as it is now) and, when NRI is not enabled then,
/// the file is restored (or the new file removed) and the command fails saying why.
/// Refused (exit 1, nothing written): containerd < 1.7 (no native NRI); a config the release
/// refuses (a version above its highest, a drop-in above the root's version on 2.3, a short
/// plugin name in a version-2 config on 1.x, a version that is not an integer); a version-1
/// config when containerd's version is unknown; `disable` set by dotted keys or an inline table.
/// Already enabled → exit 0, nothing changed. `info` must come from detect_runtime /
/// read_containerd_layers. Never throws.
RegisterResult enable_containerd_nri(const RuntimeInfo& info, const std::string& stamp, const std::string& backup_dir);

/// `register --pass-annotations`: add `keys` missing from the default runtime's pod_annotations,
/// in the runtime's table as the release reads it (RuntimeInfo::runtime_section: 1.x version 1
/// [plugins.cri.containerd.runtimes.<name>], version 2 plugins."io.containerd.grpc.v1.cri", 2.x
/// plugins."io.containerd.cri.v1.runtime" or a version 1/2 file's name that containerd migrates).
/// Where: the file that sets pod_annotations (new elements added to the array, one per line in a
/// multi-line one; its comments and lines kept), else the file defining the runtime's table, else
/// a new runtime table for "runc" only (runtime_type = "io.containerd.runc.v2", containerd's
/// default for it) in the CRI section's file, a drop-in or the main config as for
/// enable_containerd_nri; another runtime without a table is refused. Backup, refusals, textual
/// edit, verification before and after writing as for enable_containerd_nri. Nothing missing →
/// exit 0, nothing changed. Never throws.
RegisterResult pass_annotations(const RuntimeInfo& info, const std::vector<std::string>& keys, const std::string& stamp,
                                const std::string& backup_dir);

/// `register --require`: make containerd refuse every container nri-qos did not see, with NRI's
/// default validator (containerd >= 2.2; containerd/nri v0.11 plugins/default-validator
/// validateRequiredPlugins, config [plugins."io.containerd.nri.v1.nri".default_validator]):
/// `enable = true` and `name` added to `required_plugins`. containerd matches an entry against
/// each plugin that saw the CreateContainer request, by its name ("nri-qos") or its index-name
/// ("10-nri-qos") (pkg/api/validate.go GetPluginMap): the plain name keeps matching whatever
/// index the launched or external relay registers with. Where: the file setting those keys
/// (both must be in one file), else a new [..default_validator] table in the last file defining
/// the NRI section, else a drop-in / the main config as for enable_containerd_nri; backup,
/// textual edit and verification before and after writing as there. The validator's
/// `tolerate_missing_plugins_annotation` is left as it is (docs/native-nri.md: the DaemonSet).
/// Refused (exit 1, nothing written): containerd's version unknown or below 2.2 (no default
/// validator), a config the release refuses, the two keys set in different files, dotted keys
/// or an inline table, a required_plugins that is not a plain array of strings. Already enabled
/// and listed → exit 0, nothing changed. Never throws.
RegisterResult require_plugin(const RuntimeInfo& info, const std::string& name, const std::string& stamp, const std::string& backup_dir);

/// Add the `register` and `unregister` subcommands to `app`.
///
///   register   [--conf-json F] [--type T] [--plugin-conf JSON]
///   register   --native [--plugins-dir D] [--index NN] [--binary B] [--type T]
///   register   ... [--mode auto|v01|native|both] [--enable-nri] [--pass-annotations] [--require] [--backup-dir D] [--policy F]
///              [--containerd-config F] [--containerd-version V] [--isulad-config F]
///              [--crio-config F]
///   unregister [--conf-json F] [--type T]
///   unregister --native [--plugins-dir D] [--index NN] [--binary B] [--type T]
///
/// Defaults: /etc/nri/conf.json, nri-qos, {} (without --plugin-conf an existing entry keeps its
/// conf), /opt/nri/plugins, 10 for register / every index for unregister, /opt/nri/bin/nri-qos,
/// kDefaultBackupDir.
/// --native works on the plugin directory only; conf.json is not touched.
/// Each callback prints one line (stdout on success, stderr on failure). On failure it throws
/// CLI::RuntimeError(exit_code); CLI11's App::exit() (used by CLI11_PARSE) turns that into the
/// process exit status without printing anything more. Success returns normally (status 0).
void add_register_commands(CLI::App& app);

}  // namespace nriqos
