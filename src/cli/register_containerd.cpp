// Editing containerd's config for `register` (issue #23: split out of register.cpp):
// --enable-nri (enable_containerd_nri: [plugins."io.containerd.nri.v1.nri"] disable = false) and
// --pass-annotations (pass_annotations: the default runtime's pod_annotations), both declared in
// register.hpp. The edit is textual (comments and layout kept), re-read through
// read_containerd_layers before anything is written, and the edited file is backed up first.
#include "cli/register_internal.hpp"

#include <cctype>
#include <exception>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace nriqos {

using namespace register_internal;

namespace {

// ---- textual TOML edits (comments and layout kept; the result is verified by parsing) ----

std::vector<std::string> split_lines(const std::string& text) {
    std::vector<std::string> out;
    std::string cur;
    for (char ch : text) {
        if (ch == '\n') {
            out.push_back(cur);
            cur.clear();
        } else {
            cur += ch;
        }
    }
    if (!cur.empty()) out.push_back(cur);
    return out;
}

std::string join_lines(const std::vector<std::string>& lines) {
    std::string s;
    for (const auto& l : lines) s += l + "\n";
    return s;
}

std::string trim_left(const std::string& s) {
    size_t a = s.find_first_not_of(" \t");
    return a == std::string::npos ? "" : s.substr(a);
}

/// Keys of a standard table header line "[a."b".c]  # x"; nullopt when the line is not one.
std::optional<std::vector<std::string>> header_keys(const std::string& line) {
    std::string t = trim_left(line);
    if (t.size() < 2 || t[0] != '[' || t[1] == '[') return std::nullopt;
    std::vector<std::string> keys;
    size_t i = 1;
    for (;;) {
        while (i < t.size() && (t[i] == ' ' || t[i] == '\t')) ++i;
        if (i >= t.size()) return std::nullopt;
        std::string k;
        if (t[i] == '"' || t[i] == '\'') {
            char q = t[i++];
            while (i < t.size() && t[i] != q) {
                if (q == '"' && t[i] == '\\' && i + 1 < t.size()) ++i;
                k += t[i++];
            }
            if (i >= t.size()) return std::nullopt;
            ++i;
        } else {
            while (i < t.size() && (std::isalnum(static_cast<unsigned char>(t[i])) || t[i] == '_' || t[i] == '-')) k += t[i++];
            if (k.empty()) return std::nullopt;
        }
        keys.push_back(k);
        while (i < t.size() && (t[i] == ' ' || t[i] == '\t')) ++i;
        if (i < t.size() && t[i] == '.') {
            ++i;
            continue;
        }
        if (i < t.size() && t[i] == ']') return keys;
        return std::nullopt;
    }
}

bool is_header(const std::string& line) {
    std::string t = trim_left(line);
    return !t.empty() && t[0] == '[';
}

/// Line index of the header [keys] in `lines`, or -1.
long find_table(const std::vector<std::string>& lines, const std::vector<std::string>& keys) {
    for (size_t i = 0; i < lines.size(); ++i)
        if (auto k = header_keys(lines[i]); k && *k == keys) return static_cast<long>(i);
    return -1;
}

/// End (exclusive) of the table body starting after `header`.
size_t table_end(const std::vector<std::string>& lines, size_t header) {
    size_t i = header + 1;
    while (i < lines.size() && !is_header(lines[i])) ++i;
    return i;
}

/// Line of `key = ...` in [from, to), or -1.
long find_key(const std::vector<std::string>& lines, size_t from, size_t to, const std::string& key) {
    for (size_t i = from; i < to; ++i) {
        std::string t = trim_left(lines[i]);
        if (t.compare(0, key.size(), key) != 0) continue;
        std::string rest = trim_left(t.substr(key.size()));
        if (!rest.empty() && rest[0] == '=') return static_cast<long>(i);
    }
    return -1;
}

/// Last line of the (possibly multi-line) array value starting on line `at` ("key = [ ...").
size_t array_value_end(const std::vector<std::string>& lines, size_t at) {
    int depth = 0;
    bool seen = false;
    for (size_t i = at; i < lines.size(); ++i) {
        const std::string& l = lines[i];
        size_t j = i == at ? l.find('=') + 1 : 0;
        for (; j < l.size(); ++j) {
            char ch = l[j];
            if (ch == '#') break;
            if (ch == '"' || ch == '\'') {
                for (++j; j < l.size() && l[j] != ch; ++j)
                    if (ch == '"' && l[j] == '\\') ++j;
                continue;
            }
            if (ch == '[') {
                ++depth;
                seen = true;
            } else if (ch == ']') {
                --depth;
            }
        }
        if (seen && depth <= 0) return i;
        if (!seen && i == at) return i;  // not an array: one line
    }
    return lines.size() - 1;
}

std::string toml_quote(const std::string& key) {
    std::string s = "\"";
    for (char ch : key) {
        if (ch == '"' || ch == '\\') s += '\\';
        s += ch;
    }
    return s + "\"";
}

std::string header_text(const std::vector<std::string>& keys) {
    std::string s = "[";
    for (size_t i = 0; i < keys.size(); ++i) {
        bool bare = !keys[i].empty();
        for (unsigned char ch : keys[i])
            if (!(std::isalnum(ch) || ch == '_' || ch == '-')) bare = false;
        s += (i ? "." : "") + (bare ? keys[i] : toml_quote(keys[i]));
    }
    return s + "]";
}

std::string backup_name(const std::string& file, const std::string& stamp) {
    std::string base = file + ".nri-qos.bak." + stamp;
    std::string name = base;
    struct stat st {};
    for (int n = 1; ::lstat(name.c_str(), &st) == 0; ++n) name = base + "." + std::to_string(n);
    return name;
}

/// One planned file change: new text for `path` (exists = it is rewritten, else created).
struct FileEdit {
    std::string path, text;
    bool exists = false;
};

/// Re-read containerd's config with `edit` applied; "" when it parses.
std::string simulate(const RuntimeInfo& info, const FileEdit& edit, RuntimeInfo& out) {
    std::vector<std::pair<std::string, std::string>> layers;
    bool placed = false;
    for (const auto& f : info.config_files) {
        if (f == edit.path) {
            layers.emplace_back(f, edit.text);
            placed = true;
        } else {
            ReadOutcome in = read_file(f);
            if (!in.error.empty()) return in.error;
            layers.emplace_back(f, in.text);
        }
    }
    if (!placed) layers.emplace_back(edit.path, edit.text);  // a new drop-in, read last
    out = info;
    out.error.clear();
    read_containerd_layers(layers, out);
    return out.error;
}

/// Back up (when the file exists) and write `edit`; returns "" or an error, and the backup path.
std::string apply_edit(const FileEdit& edit, const std::string& stamp, std::string& backup) {
    const std::string target = write_target(edit.path);
    ReadOutcome in = read_file(target);
    if (!in.error.empty()) return in.error;
    mode_t mode = 0644;
    uid_t uid = static_cast<uid_t>(-1);
    gid_t gid = static_cast<gid_t>(-1);
    if (in.st.st_mode) {
        mode = in.st.st_mode & 07777;
        uid = in.st.st_uid;
        gid = in.st.st_gid;
        backup = backup_name(target, stamp);
        if (std::string e = atomic_write(backup, in.text, mode, uid, gid); !e.empty()) return "backup failed: " + e;
    } else if (std::string e = make_dirs(dir_of(target)); !e.empty()) {
        return e;
    }
    return atomic_write(target, edit.text, mode, uid, gid);
}

/// Where a new section goes: a new drop-in in info.dropin_dir, else the main config (appended).
FileEdit new_section_edit(const RuntimeInfo& info, const std::string& section, const std::string& stamp,
                          const std::string& why) {
    FileEdit e;
    const std::string comment = "# Added by `nri-qos register " + why + "` (" + stamp + ").\n";
    if (!info.dropin_dir.empty()) {
        e.path = info.dropin_dir + "/90-nri-qos.toml";
        ReadOutcome in = read_file(e.path);
        if (in.exists) {
            e.exists = true;
            e.text = in.text + (in.text.back() == '\n' ? "" : "\n") + "\n" + comment + section;
        } else {
            e.text = (info.config_version ? "version = " + std::to_string(info.config_version) + "\n\n" : std::string()) + comment + section;
        }
        return e;
    }
    e.path = info.config_files.empty() ? info.config : info.config_files.front();
    ReadOutcome in = read_file(e.path);
    if (in.exists) {
        e.exists = true;
        e.text = in.text + (in.text.back() == '\n' ? "" : "\n") + "\n" + comment + section;
    } else {
        int v = info.config_version ? info.config_version : info.major >= 2 ? 3 : 2;
        e.text = "version = " + std::to_string(v) + "\n\n" + comment + section;
    }
    return e;
}

RegisterResult write_verified(const RuntimeInfo& info, const FileEdit& edit, const std::string& stamp,
                              const std::function<std::string(const RuntimeInfo&)>& check, const std::string& done) {
    RuntimeInfo after;
    if (std::string e = simulate(info, edit, after); !e.empty())
        return fail_result("the edit of " + edit.path + " would not parse (" + e + "); nothing written: edit it by hand");
    if (std::string e = check(after); !e.empty())
        return fail_result("after editing " + edit.path + " containerd would still " + e + "; nothing written: edit it by hand");
    std::string backup;
    if (std::string e = apply_edit(edit, stamp, backup); !e.empty()) return fail_result(e);
    return ok_result(true, done + " in " + edit.path + (backup.empty() ? " (new file)" : " (backup: " + backup + ")") +
                               "; restart containerd to apply it");
}

}  // namespace

RegisterResult enable_containerd_nri(const RuntimeInfo& info, const std::string& stamp) {
    try {
        if (!info.version.empty() && !containerd_native_capable(info))
            return fail_result("--enable-nri: containerd " + info.version + " has no native NRI (1.7 or later needed); "
                               "it calls NRI v0.1 hooks from /etc/nri/conf.json");
        if (!info.error.empty()) return fail_result("--enable-nri: " + info.error + "; nothing written");
        const bool disabled = info.nri_disable ? *info.nri_disable : (info.major < 2);
        if (!disabled)
            return ok_result(false, "native NRI already enabled " +
                                        (info.nri_disable ? "in " + info.nri_file : std::string("(the default of containerd 2.x)")) +
                                        " (unchanged)");
        const std::vector<std::string> keys{"plugins", "io.containerd.nri.v1.nri"};
        FileEdit edit;
        if (!info.nri_file.empty()) {
            ReadOutcome in = read_file(info.nri_file);
            if (!in.error.empty()) return fail_result(in.error);
            std::vector<std::string> lines = split_lines(in.text);
            long h = find_table(lines, keys);
            if (h < 0)
                return fail_result(info.nri_file + " sets the NRI plugin without a [plugins.\"io.containerd.nri.v1.nri\"] table "
                                   "header (dotted keys or an inline table); edit it by hand: disable = false");
            size_t end = table_end(lines, static_cast<size_t>(h));
            std::string indent = "  ";
            if (static_cast<size_t>(h) + 1 < end) {
                const std::string& l = lines[static_cast<size_t>(h) + 1];
                indent = l.substr(0, l.find_first_not_of(" \t") == std::string::npos ? 0 : l.find_first_not_of(" \t"));
            }
            std::vector<std::string> add;
            long d = find_key(lines, static_cast<size_t>(h) + 1, end, "disable");
            if (d >= 0) lines[static_cast<size_t>(d)] = lines[static_cast<size_t>(d)].substr(0, lines[static_cast<size_t>(d)].find('d')) +
                                                       "disable = false  # nri-qos register --enable-nri (" + stamp + ")";
            else add.push_back(indent + "disable = false");
            if (find_key(lines, static_cast<size_t>(h) + 1, end, "plugin_request_timeout") < 0)
                add.push_back(indent + "plugin_request_timeout = \"2s\"");
            lines.insert(lines.begin() + h + 1, add.begin(), add.end());
            edit.path = info.nri_file;
            edit.exists = true;
            edit.text = join_lines(lines);
        } else {
            edit = new_section_edit(info,
                                    "[plugins.\"io.containerd.nri.v1.nri\"]\n  disable = false\n  plugin_request_timeout = \"2s\"\n",
                                    stamp, "--enable-nri");
        }
        return write_verified(
            info, edit, stamp,
            [](const RuntimeInfo& a) {
                return a.nri_disable && !*a.nri_disable ? std::string() : std::string("read NRI as disabled");
            },
            "enabled containerd's native NRI ([plugins.\"io.containerd.nri.v1.nri\"] disable = false)");
    } catch (const std::exception& e) {
        return fail_result(std::string("--enable-nri: ") + e.what());
    }
}

RegisterResult pass_annotations(const RuntimeInfo& info, const std::vector<std::string>& keys, const std::string& stamp) {
    try {
        if (!info.error.empty()) return fail_result("--pass-annotations: " + info.error + "; nothing written");
        const std::vector<std::string> have = info.pod_annotations ? *info.pod_annotations : std::vector<std::string>{};
        std::vector<std::string> missing;
        for (const auto& k : keys)
            if (!annotation_passed(have, k)) missing.push_back(k);
        const std::string table_name = "[plugins.\"" + cri_plugin_id(info) + "\".containerd.runtimes." + info.runtime_name + "]";
        if (missing.empty())
            return ok_result(false, "every annotation the policy reads is already in " + table_name + " pod_annotations (unchanged)");
        std::vector<std::string> all = have;
        all.insert(all.end(), missing.begin(), missing.end());
        std::string value = "pod_annotations = [";
        for (size_t i = 0; i < all.size(); ++i) value += (i ? ", " : "") + toml_quote(all[i]);
        value += "]";
        const std::vector<std::string> tkeys{"plugins", cri_plugin_id(info), "containerd", "runtimes", info.runtime_name};
        auto new_table = [&]() -> std::optional<std::string> {
            if (info.runtime_name != "runc") return std::nullopt;
            return header_text(tkeys) + "\n  runtime_type = \"io.containerd.runc.v2\"\n  " + value + "\n";
        };
        FileEdit edit;
        if (!info.cri_file.empty()) {
            ReadOutcome in = read_file(info.cri_file);
            if (!in.error.empty()) return fail_result(in.error);
            std::vector<std::string> lines = split_lines(in.text);
            long h = find_table(lines, tkeys);
            if (h >= 0) {
                size_t end = table_end(lines, static_cast<size_t>(h));
                long at = find_key(lines, static_cast<size_t>(h) + 1, end, "pod_annotations");
                const std::string note = "  # nri-qos register --pass-annotations (" + stamp + ")";
                if (at >= 0) {
                    size_t last = array_value_end(lines, static_cast<size_t>(at));
                    std::string indent = lines[static_cast<size_t>(at)].substr(0, lines[static_cast<size_t>(at)].find('p'));
                    lines.erase(lines.begin() + at, lines.begin() + static_cast<long>(last) + 1);
                    lines.insert(lines.begin() + at, indent + value + note);
                } else {
                    std::string indent = "  ";
                    if (static_cast<size_t>(h) + 1 < end) {
                        const std::string& l = lines[static_cast<size_t>(h) + 1];
                        size_t k = l.find_first_not_of(" \t");
                        indent = l.substr(0, k == std::string::npos ? 0 : k);
                    }
                    lines.insert(lines.begin() + h + 1, indent + value + note);
                }
                edit.path = info.cri_file;
                edit.exists = true;
                edit.text = join_lines(lines);
            } else {
                auto t = new_table();
                if (!t)
                    return fail_result(info.cri_file + " has no " + table_name + " table; add pod_annotations = [" +
                                       join_list(missing) + "] to the runtime's table by hand");
                edit.path = info.cri_file;
                edit.exists = true;
                edit.text = in.text + (in.text.empty() || in.text.back() == '\n' ? "" : "\n") + "\n# Added by `nri-qos register "
                            "--pass-annotations` (" + stamp + ").\n" + *t;
            }
        } else {
            auto t = new_table();
            if (!t) return fail_result("no " + table_name + " table in containerd's config; add pod_annotations by hand");
            edit = new_section_edit(info, *t, stamp, "--pass-annotations");
        }
        return write_verified(
            info, edit, stamp,
            [keys](const RuntimeInfo& a) {
                std::vector<std::string> still;
                for (const auto& k : keys)
                    if (!a.pod_annotations || !annotation_passed(*a.pod_annotations, k)) still.push_back(k);
                return still.empty() ? std::string() : "drop " + join_list(still);
            },
            "added " + join_list(missing) + " to " + table_name + " pod_annotations");
    } catch (const std::exception& e) {
        return fail_result(std::string("--pass-annotations: ") + e.what());
    }
}

}  // namespace nriqos
