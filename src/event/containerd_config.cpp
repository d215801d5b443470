// containerd's config files read as a given release reads them (issue #30 §4): versions, plugin
// names, the merge of `imports`, the migrations. Declared in containerd_config.hpp, which cites
// containerd's functions for every rule.
#include "event/containerd_config.hpp"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <exception>
#include <sstream>

#include "event/detect.hpp"

namespace nriqos {

namespace {

constexpr const char* kNriUri = "io.containerd.nri.v1.nri";
constexpr const char* kCriGrpc = "io.containerd.grpc.v1.cri";
constexpr const char* kCriRuntime = "io.containerd.cri.v1.runtime";

ConfigNode from_toml(const toml::value& v, const std::string& file, const std::vector<std::string>& path, int fv) {
    ConfigNode n;
    n.file = file;
    n.path = path;
    n.file_version = fv;
    if (v.is_table()) {
        n.is_table = true;
        for (const auto& [k, x] : v.as_table()) {
            std::vector<std::string> p = path;
            p.push_back(k);
            n.kids.emplace(k, from_toml(x, file, p, fv));
        }
    } else {
        n.leaf = v;
    }
    return n;
}

/// mergo.Merge(WithOverride) of one map value into another (2.x mergeConfig on plugins): tables
/// merge key by key, anything else is replaced by the later file's value.
void deep_merge(ConfigNode& dst, const ConfigNode& src) {
    if (!dst.is_table || !src.is_table) {
        dst = src;
        return;
    }
    dst.file = src.file;
    dst.path = src.path;
    dst.file_version = src.file_version;
    for (const auto& [k, v] : src.kids) {
        auto it = dst.kids.find(k);
        if (it == dst.kids.end()) dst.kids.emplace(k, v);
        else deep_merge(it->second, v);
    }
}

/// v1MigratePluginName (2.x cmd/containerd/server/config/config.go): a name without '.' becomes
/// a URI; of the names nri-qos reads, "cri" is io.containerd.grpc.v1.cri, and "nri", being no
/// core plugin of that table, becomes io.containerd.grpc.v1.nri.
std::string v1_plugin_uri(const std::string& name) {
    if (name.find('.') != std::string::npos) return name;
    static const std::map<std::string, std::string> core{
        {"cri", kCriGrpc},
        {"cgroups", "io.containerd.monitor.v1.cgroups"},
        {"linux", "io.containerd.runtime.v1.linux"},
        {"scheduler", "io.containerd.gc.v1.scheduler"},
        {"bolt", "io.containerd.metadata.v1.bolt"},
        {"task", "io.containerd.runtime.v2.task"},
        {"opt", "io.containerd.internal.v1.opt"},
        {"restart", "io.containerd.internal.v1.restart"},
        {"tracing", "io.containerd.internal.v1.tracing"},
        {"otlp", "io.containerd.tracing.processor.v1.otlp"},
        {"aufs", "io.containerd.snapshotter.v1.aufs"},
        {"btrfs", "io.containerd.snapshotter.v1.btrfs"},
        {"devmapper", "io.containerd.snapshotter.v1.devmapper"},
        {"native", "io.containerd.snapshotter.v1.native"},
        {"overlayfs", "io.containerd.snapshotter.v1.overlayfs"},
        {"zfs", "io.containerd.snapshotter.v1.zfs"},
    };
    if (auto it = core.find(name); it != core.end()) return it->second;
    const std::string suffix = "-service";
    if (name.size() > suffix.size() && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0)
        return "io.containerd.service.v1." + name;
    if (name == "windows" || name == "windows-lcow") return "io.containerd.snapshotter.v1." + name;
    return "io.containerd.grpc.v1." + name;
}

void v1_migrate(ConfigNode& plugins, const std::string& file, std::vector<std::string>& notes) {
    std::map<std::string, ConfigNode> out;
    for (auto& [k, v] : plugins.kids) {
        const std::string uri = v1_plugin_uri(k);
        if (k == "nri")
            notes.push_back("containerd 2.x ignores [plugins.nri] in " + file +
                            " (a version-1 file: its migration names it io.containerd.grpc.v1.nri, not the NRI plugin; "
                            "write [plugins.\"io.containerd.nri.v1.nri\"])");
        out[uri] = std::move(v);
    }
    plugins.kids = std::move(out);
}

/// The CRI runtime plugin's ConfigMigration (2.x plugins/cri/runtime/plugin.go configMigration,
/// migrateConfig): io.containerd.grpc.v1.cri's keys are copied into io.containerd.cri.v1.runtime
/// where that has none, its `containerd` table key by key (less the image service's keys); the
/// runtime plugin's own keys win.
void cri_migrate(ConfigNode& plugins) {
    auto src_it = plugins.kids.find(kCriGrpc);
    if (src_it == plugins.kids.end() || !src_it->second.is_table) return;
    const ConfigNode src = src_it->second;
    auto dst_it = plugins.kids.find(kCriRuntime);
    if (dst_it == plugins.kids.end() || !dst_it->second.is_table) {
        ConfigNode fresh;
        fresh.is_table = true;
        fresh.file = src.file;
        fresh.path = src.path;
        fresh.file_version = src.file_version;
        dst_it = plugins.kids.insert_or_assign(kCriRuntime, fresh).first;
    }
    ConfigNode& dst = dst_it->second;
    static const std::vector<std::string> skip{"cni",
                                               "containerd",
                                               "sandbox_image",
                                               "registry",
                                               "image_decryption",
                                               "max_concurrent_downloads",
                                               "image_pull_progress_timeout",
                                               "image_pull_with_sync_fs",
                                               "stats_collect_period",
                                               "disable_tcp_service",
                                               "stream_server_address",
                                               "stream_server_port",
                                               "stream_idle_timeout",
                                               "enable_tls_streaming",
                                               "x509_key_pair_streaming"};
    for (const auto& [k, v] : src.kids) {
        bool skipped = false;
        for (const auto& s : skip) skipped = skipped || s == k;
        if (!skipped && !dst.kids.count(k)) dst.kids.emplace(k, v);
    }
    auto c = src.kids.find("containerd");
    if (c == src.kids.end() || !c->second.is_table) return;
    auto dc = dst.kids.find("containerd");
    if (dc == dst.kids.end() || !dc->second.is_table) {
        ConfigNode fresh;
        fresh.is_table = true;
        fresh.file = c->second.file;
        fresh.path = c->second.path;
        fresh.file_version = c->second.file_version;
        dc = dst.kids.insert_or_assign("containerd", fresh).first;
    }
    for (const auto& [k, v] : c->second.kids)
        if (k != "snapshotter" && k != "disable_snapshot_annotations" && k != "discard_unpacked_layers" && !dc->second.kids.count(k))
            dc->second.kids.emplace(k, v);
}

bool at_least(const ContainerdRelease& r, int major, int minor, int patch) {
    if (r.major != major) return r.major > major;
    if (r.minor != minor) return r.minor > minor;
    return r.patch >= patch;
}

std::string release_text(const ContainerdRelease& r) {
    return "containerd " + std::to_string(r.major) + "." + std::to_string(r.minor) + "." + std::to_string(r.patch);
}

}  // namespace

bool parse_containerd_release(const std::string& version, ContainerdRelease& rel) {
    int a = 0, b = 0, c = 0;
    std::string t = !version.empty() && version[0] == 'v' ? version.substr(1) : version;
    if (t.empty() || !std::isdigit(static_cast<unsigned char>(t[0]))) return false;
    int n = std::sscanf(t.c_str(), "%d.%d.%d", &a, &b, &c);
    if (n < 2) return false;
    rel = ContainerdRelease{a, b, n >= 3 ? c : 0};
    return true;
}

const ConfigNode* ConfigNode::at(const std::vector<std::string>& keys) const {
    const ConfigNode* n = this;
    for (const auto& k : keys) {
        if (!n->is_table) return nullptr;
        auto it = n->kids.find(k);
        if (it == n->kids.end()) return nullptr;
        n = &it->second;
    }
    return n;
}

namespace {

/// One of the files of read_containerd_view, parsed, with its own `version` (0: unset).
struct ParsedConfig {
    std::string path;
    toml::value value;
    int version = 0;
};

/// Each file parsed first (its version decides how an unknown release is inferred), in order,
/// until the first that does not parse or has a version containerd cannot read (`v.error`).
std::vector<ParsedConfig> parse_config_files(const std::vector<std::pair<std::string, std::string>>& files, ContainerdConfigView& v) {
    std::vector<ParsedConfig> parsed;
    for (const auto& [path, text] : files) {
        ParsedConfig p;
        p.path = path;
        try {
            std::istringstream in(text);
            p.value = toml::parse(in, path);
        } catch (const std::exception& e) {
            std::string w = e.what();
            v.error = "cannot parse " + path + ": " + w.substr(0, w.find('\n'));
            break;
        }
        if (p.value.is_table() && p.value.contains("version")) {
            const toml::value& x = p.value.at("version");
            if (!x.is_integer() || x.as_integer() < 0 || x.as_integer() > 1000) {
                v.error = path + ": `version` must be a small non-negative integer (containerd cannot read this config)";
                break;
            }
            p.version = static_cast<int>(x.as_integer());
        }
        parsed.push_back(std::move(p));
    }
    return parsed;
}

/// A file's disabled_plugins: appended across files by both merges; which name disables NRI is
/// decided by the merge, once the release's reading of the names is known.
std::vector<std::string> disabled_of(const ParsedConfig& p) {
    std::vector<std::string> out;
    if (p.value.is_table() && p.value.contains("disabled_plugins") && p.value.at("disabled_plugins").is_array())
        for (const auto& x : p.value.at("disabled_plugins").as_array())
            if (x.is_string()) out.push_back(x.as_string().str);
    return out;
}

/// A file's plugins table (an empty table when it has none).
ConfigNode plugins_of(const ParsedConfig& p) {
    ConfigNode n;
    n.is_table = true;
    n.file = p.path;
    n.path = {"plugins"};
    n.file_version = p.version;
    if (p.value.is_table() && p.value.contains("plugins") && p.value.at("plugins").is_table())
        n = from_toml(p.value.at("plugins"), p.path, {"plugins"}, p.version);
    return n;
}

/// 1.6 / 1.7: the last non-zero version wins (default 1); sections replace whole.
void merge_1x(const std::vector<ParsedConfig>& parsed, ContainerdConfigView& v) {
    const ContainerdRelease& r = v.release;
    for (const auto& p : parsed) {
        if (p.version != 0) v.written_version = p.version;
        ConfigNode n = plugins_of(p);
        for (auto& [k, section] : n.kids) v.plugins.kids.insert_or_assign(k, section);
    }
    v.version = v.written_version ? v.written_version : 1;
    const bool refuses_above_2 = (r.major == 1 && r.minor == 6 && r.patch >= 32) || (r.major == 1 && r.minor >= 7 && at_least(r, 1, 7, 17));
    if (v.error.empty() && v.version > 2)
        v.error = refuses_above_2 ? release_text(r) + " refuses config version " + std::to_string(v.version) +
                                        " (it reads versions 1 and 2: services/server/config/config.go ValidateV2)"
                                  : release_text(r) + " reads config version " + std::to_string(v.version) +
                                        " as version 2 and ignores the plugin names of containerd 2.x (use version 2)";
    if (v.error.empty() && v.version >= 2)
        for (const auto& [k, section] : v.plugins.kids) {
            size_t dots = 0;
            for (char ch : k) dots += ch == '.';
            if (dots < 3) {
                v.error = release_text(r) + " refuses to start: plugin name \"" + k + "\" in " + section.file +
                          " is not a URI (io.containerd.x.vx.name), which config version 2 needs (ValidateV2)";
                break;
            }
        }
    v.nri_id = v.version == 1 ? "nri" : kNriUri;
    v.cri_runtime_id = v.version == 1 ? "cri" : kCriGrpc;
    for (const auto& p : parsed)
        for (const auto& d : disabled_of(p))
            if (d == v.nri_id) v.nri_disabled_in = p.path;
    if (v.version == 1)
        for (const char* uri : {kNriUri, kCriGrpc, kCriRuntime})
            if (auto it = v.plugins.kids.find(uri); it != v.plugins.kids.end())
                v.notes.push_back(release_text(r) + " ignores [plugins.\"" + std::string(uri) + "\"] in " + it->second.file +
                                  ": a config without `version` (version 1) names plugins by their short ID ([plugins." +
                                  (std::string(uri) == kNriUri ? "nri" : "cri") + "])");
}

/// 2.0 - 2.2: version 0/1 files migrated alone, the merged config by server.New.
void merge_20_22(const std::vector<ParsedConfig>& parsed, ContainerdConfigView& v) {
    const ContainerdRelease& r = v.release;
    int out_version = 3;
    for (const auto& p : parsed) {
        ConfigNode n = plugins_of(p);
        if (p.version <= 1) v1_migrate(n, p.path, v.notes);
        else out_version = p.version;
        if (p.version != 0) v.written_version = p.version;
        deep_merge(v.plugins, n);
    }
    v.version = out_version;
    if (v.error.empty() && out_version > 3)
        v.error = release_text(r) + " refuses config version " + std::to_string(out_version) +
                  " (it reads up to version 3: cmd/containerd/server/config/config.go ValidateVersion)";
    if (out_version < 3) cri_migrate(v.plugins);
    else if (const ConfigNode* g = v.plugins.at({kCriGrpc, "containerd", "runtimes"})) {
        std::vector<std::string> table = g->path;
        table.pop_back();
        v.notes.push_back(release_text(r) + " ignores the runtimes under " + toml_header(table) + " in " + g->file +
                          ": the merged config is version 3, read from [plugins.\"" + kCriRuntime +
                          "\".containerd] without migrating the CRI plugin's older name");
    }
}

/// 2.3 and later: every file below 4 migrated alone; no drop-in above the root's version.
void merge_23(const std::vector<ParsedConfig>& parsed, ContainerdConfigView& v) {
    const ContainerdRelease& r = v.release;
    int root = 0;
    for (const auto& p : parsed) {
        if (root == 0) root = p.version;
        if (v.error.empty() && p.version > root)
            v.error = release_text(r) + " refuses to start: " + p.path + " has version " + std::to_string(p.version) + ", above the root config's " +
                      std::to_string(root) + " (LoadConfigWithPlugins)";
        if (v.error.empty() && p.version > 4)
            v.error = release_text(r) + " refuses config version " + std::to_string(p.version) + " in " + p.path +
                      " (it reads up to version 4: ValidateVersion)";
        if (p.version != 0) v.written_version = p.version;
        ConfigNode n = plugins_of(p);
        if (p.version <= 1) v1_migrate(n, p.path, v.notes);
        if (p.version < 4) cri_migrate(n);
        deep_merge(v.plugins, n);
    }
    v.version = 4;
}

}  // namespace

ContainerdConfigView read_containerd_view(const std::vector<std::pair<std::string, std::string>>& files, const ContainerdRelease& release) {
    ContainerdConfigView v;
    v.plugins.is_table = true;
    const std::vector<ParsedConfig> parsed = parse_config_files(files, v);
    int max_version = 0;
    for (const auto& p : parsed) max_version = std::max(max_version, p.version);
    if (!parsed.empty()) v.root_version = parsed.front().version;
    v.release = release;
    if (release.major == 0) {
        v.release_inferred = true;
        v.release = max_version >= 4 ? ContainerdRelease{2, 3, 0} : max_version == 3 ? ContainerdRelease{2, 2, 0} : ContainerdRelease{1, 7, 17};
    }
    const ContainerdRelease& r = v.release;
    for (const auto& p : parsed) {
        if (p.value.is_table() && p.value.contains("imports") && p.value.at("imports").is_array())
            for (const auto& x : p.value.at("imports").as_array())
                if (x.is_string()) v.import_patterns.push_back(resolve_import(x.as_string().str, p.path, r.major));
    }
    if (r.major < 2) {
        merge_1x(parsed, v);
        return v;
    }
    v.nri_id = kNriUri;
    v.cri_runtime_id = kCriRuntime;
    for (const auto& p : parsed)
        for (const auto& d : disabled_of(p))
            if ((p.version <= 1 ? v1_plugin_uri(d) : d) == kNriUri) v.nri_disabled_in = p.path;
    if (!at_least(r, 2, 3, 0)) merge_20_22(parsed, v);
    else merge_23(parsed, v);
    return v;
}

std::string nri_id_for_file(const ContainerdConfigView& v, int) { return v.release.major < 2 && v.version == 1 ? "nri" : kNriUri; }

std::string cri_runtime_id_for_file(const ContainerdConfigView& v, int file_version) {
    if (v.release.major < 2) return v.version == 1 ? "cri" : kCriGrpc;
    if (file_version >= 3) return kCriRuntime;
    if (!at_least(v.release, 2, 3, 0) && v.version >= 3) return kCriRuntime;
    return file_version <= 1 ? "cri" : kCriGrpc;
}

int new_file_version(const ContainerdConfigView& v) {
    if (v.release.major >= 2 && at_least(v.release, 2, 3, 0)) return v.root_version;
    return v.written_version;
}

std::string toml_header(const std::vector<std::string>& keys) {
    std::string s = "[";
    for (size_t i = 0; i < keys.size(); ++i) {
        bool bare = !keys[i].empty();
        for (unsigned char ch : keys[i])
            if (!(std::isalnum(ch) || ch == '_' || ch == '-')) bare = false;
        std::string k = keys[i];
        if (!bare) {
            std::string q = "\"";
            for (char ch : k) {
                if (ch == '"' || ch == '\\') q += '\\';
                q += ch;
            }
            k = q + "\"";
        }
        s += (i ? "." : "") + k;
    }
    return s + "]";
}

}  // namespace nriqos
