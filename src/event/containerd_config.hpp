// containerd_config.hpp — containerd's config files read the way a given containerd release reads
// them (issue #30 §4): which `version` it accepts, which plugin names each version uses, how the
// `imports` files merge, and the migrations a release runs. The one definition of "where in this
// config does the NRI switch / the default runtime's pod_annotations live", used by detect
// (what the runtime delivers, read at every event) and by `register` (where it edits).
//
// Sources (containerd's own code, tags named):
//  * 1.6 / 1.7 — services/server/config/config.go: GetVersion (0 is version 1), Decode (version 1
//    looks a plugin up by its short ID, e.g. [plugins.cri], [plugins.nri]; version 2 by its URI,
//    e.g. [plugins."io.containerd.grpc.v1.cri"]), ValidateV2 (version 2 refuses a plugin key that
//    is not a URI; version > 2 refused from v1.6.32 / v1.7.17), mergeConfig (mergo with override:
//    the last non-zero `version` wins; each file's plugins.<id> REPLACES that plugin's section).
//    The default config's version is 1 (cmd/containerd/command/config.go).
//  * 2.0 – 2.2 — cmd/containerd/server/config/config.go (ConfigVersion 3): LoadConfig migrates a
//    version 0/1 file alone (v1Migrate: short names to URIs; "cri" is io.containerd.grpc.v1.cri,
//    an unknown name such as "nri" becomes io.containerd.grpc.v1.<name>, which is NOT the NRI
//    plugin), mergeConfig deep-merges plugins key by key (mergo, override: tables merge, arrays
//    and scalars are replaced), the last non-zero `version` wins; a merged version above 3 is
//    refused (ValidateVersion); below 3, server.New runs the plugins' ConfigMigration on the
//    merged plugins: the CRI runtime plugin copies io.containerd.grpc.v1.cri's keys (its
//    `containerd` table key by key) into io.containerd.cri.v1.runtime where that has none
//    (plugins/cri/runtime/plugin.go configMigration / migrateConfig).
//  * 2.3 — the same file, ConfigVersion 4 (version/version.go); LoadConfigWithPlugins migrates
//    every file below 4 on its own before the merge (v1Migrate, then the plugins' migrations,
//    which for the CRI runtime plugin run for every version below 4), refuses a drop-in whose
//    version is above the root file's, and version 3 → 4 (serviceMigrate) only moves the grpc,
//    ttrpc, debug and metrics server settings into plugins: nothing of NRI or CRI.
//  * The NRI plugin is io.containerd.nri.v1.nri (ID "nri") on every release with native NRI.
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

#include <toml.hpp>

namespace nriqos {

/// A containerd release: major.minor.patch; 0.0.0 = unknown.
struct ContainerdRelease {
    int major = 0, minor = 0, patch = 0;
};

/// "1.7.24" (patch defaults to 0) into `rel`; false when `version` holds no "N.N".
bool parse_containerd_release(const std::string& version, ContainerdRelease& rel);

/// One value of the merged config and where it was written: `file` and `path` (its keys in that
/// file, e.g. {"plugins","cri","containerd"}) of the file that set it; for a table, of the last
/// file that contributed to it. `file_version` is that file's own `version` (0 = unset).
struct ConfigNode {
    bool is_table = false;
    std::map<std::string, ConfigNode> kids;  ///< a table's keys
    toml::value leaf;  ///< anything else (arrays included)
    std::string file;
    std::vector<std::string> path;
    int file_version = 0;
    /// The node at `keys` below this one, or nullptr (a missing key or a non-table on the way).
    const ConfigNode* at(const std::vector<std::string>& keys) const;
};

/// containerd's config as the release reads it. Filled even when `error` is set (as far as read).
struct ContainerdConfigView {
    ContainerdRelease release;  ///< the release whose rules were applied
    bool release_inferred = false;  ///< the release was unknown: 1.7 for versions 0-2, 2.2 for 3, 2.3 for 4
    int version = 0;  ///< the version containerd reads the plugin names as (after its merge; 1.x: 1 when unset)
    int written_version = 0;  ///< the last non-zero `version` of the files (0: none sets one)
    int root_version = 0;  ///< the main file's `version` (0 = unset)
    ConfigNode plugins;  ///< the merged (and migrated) plugins table, keyed as containerd looks plugins up
    std::string nri_id;  ///< key of the NRI plugin in `plugins` ("nri" in a 1.x version-1 config)
    std::string cri_runtime_id;  ///< key of the CRI runtime settings (containerd.runtimes) in `plugins`
    std::vector<std::string> import_patterns;  ///< every `imports` entry resolved (a path or a glob)
    /// The file whose `disabled_plugins` turns the NRI plugin off ("" = none): 1.x matches the
    /// merged list by short ID in a version-1 config, by URI otherwise (services/server/server.go
    /// V1DisabledFilter / V2DisabledFilter); 2.x by URI after a version-1 file's names are
    /// migrated ("nri" there names io.containerd.grpc.v1.nri: it disables nothing of NRI).
    std::string nri_disabled_in;
    std::string error;  ///< one line: containerd would refuse to start with these files
    std::vector<std::string> notes;  ///< one line each: settings this release ignores (e.g. [plugins.nri] in a version-1 file on 2.x)
};

/// Read `files` (path, TOML text; containerd's load order: containerd_config_files) with the
/// rules of `release` (unknown: inferred from the files' versions, see `release_inferred`).
/// A file that does not parse, a version the release refuses, a negative or non-integer version,
/// a drop-in above the root's version (2.3), a plugin name version 2 refuses (1.x): `error`.
/// `imports` are resolved with resolve_import (detect.hpp) for the release's major. Never throws.
ContainerdConfigView read_containerd_view(const std::vector<std::pair<std::string, std::string>>& files, const ContainerdRelease& release);

/// The plugin name a file whose own version is `file_version` must use for the NRI plugin so
/// that `v`'s release reads it: "nri" when 1.x reads the config as version 1, else
/// "io.containerd.nri.v1.nri" (2.x maps no short name to it).
std::string nri_id_for_file(const ContainerdConfigView& v, int file_version);

/// The same for the CRI runtime settings (`containerd.runtimes.<name>`): 1.x "cri" (version 1)
/// or "io.containerd.grpc.v1.cri"; 2.x "io.containerd.cri.v1.runtime" for a file of version 3 or
/// 4, else the name the file's version uses ("cri", "io.containerd.grpc.v1.cri", migrated) —
/// except on 2.0-2.2 when the merged version is 3 (no migration runs): the runtime plugin's name.
std::string cri_runtime_id_for_file(const ContainerdConfigView& v, int file_version);

/// The version a new drop-in must carry to change nothing else: 2.3, the root's (a drop-in may
/// not be above it); else the last non-zero version of the files (it decides the merged version).
/// 0: write no `version`.
int new_file_version(const ContainerdConfigView& v);

/// A TOML table header for `keys`: [plugins."io.containerd.nri.v1.nri"], [plugins.cri.containerd].
std::string toml_header(const std::vector<std::string>& keys);

}  // namespace nriqos
