// Editing containerd's config for `register` (issue #23: split out of register.cpp):
// --enable-nri (enable_containerd_nri: the NRI plugin's disable = false) and --pass-annotations
// (pass_annotations: the default runtime's pod_annotations), both declared in register.hpp.
// Where each lives in a given config version, for the node's containerd release, is
// event/containerd_config.hpp's (the reader detect uses too). The edit is textual (comments and
// layout kept), re-read through read_containerd_layers before anything is written and again from
// disk after (restored when containerd would not read it as intended); the edited file is first
// copied into a backup directory no `imports` glob reads (issue #30 §4).
#include "cli/register_internal.hpp"

#include <fnmatch.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <exception>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "event/containerd_config.hpp"

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

std::string toml_quote(const std::string& key) {
    std::string s = "\"";
    for (char ch : key) {
        if (ch == '"' || ch == '\\') s += '\\';
        s += ch;
    }
    return s + "\"";
}

/// Indentation of the first key line of the table whose header is line `h` ("  " when none).
std::string body_indent(const std::vector<std::string>& lines, size_t h) {
    size_t end = table_end(lines, h);
    for (size_t i = h + 1; i < end; ++i) {
        std::string t = trim_left(lines[i]);
        if (t.empty() || t[0] == '#') continue;
        return lines[i].substr(0, lines[i].size() - t.size());
    }
    return "  ";
}

/// `key = <value>  # comment` with the value replaced and everything else (indent, spacing,
/// comment) kept; a line without a comment gets `note` as one.
std::string replace_scalar(const std::string& line, const std::string& value, const std::string& note) {
    size_t eq = line.find('=');
    size_t v = line.find_first_not_of(" \t", eq + 1);
    if (v == std::string::npos) return line.substr(0, eq + 1) + " " + value + "  # " + note;
    size_t e = v;
    if (line[v] == '"' || line[v] == '\'') {
        for (++e; e < line.size() && line[e] != line[v]; ++e)
            if (line[v] == '"' && line[e] == '\\') ++e;
        ++e;
    } else {
        while (e < line.size() && line[e] != ' ' && line[e] != '\t' && line[e] != '#') ++e;
    }
    std::string rest = line.substr(std::min(e, line.size()));
    if (rest.find('#') == std::string::npos) rest = "  # " + note;
    return line.substr(0, v) + value + rest;
}

/// Where the array value of `key = [ ... ]` starting on line `at` lies, read with TOML's string
/// and comment rules: '[' and ']' (byte offsets in `text`), the end of the last element and
/// whether a ',' follows it. false when the value is not an array of strings this can edit.
struct ArraySpan {
    size_t open = 0, close = 0;
    size_t last_end = std::string::npos;  // npos: no element
    bool trailing_comma = false;
};
bool find_array(const std::string& text, size_t line_start, ArraySpan& a) {
    size_t i = text.find('=', line_start);
    if (i == std::string::npos) return false;
    i = text.find_first_not_of(" \t", i + 1);
    if (i == std::string::npos || text[i] != '[') return false;
    a.open = i;
    for (++i; i < text.size(); ++i) {
        char ch = text[i];
        if (ch == '#') {
            i = text.find('\n', i);
            if (i == std::string::npos) return false;
            continue;
        }
        if (ch == '"' || ch == '\'') {
            if (text.compare(i, 3, std::string(3, ch)) == 0) return false;  // a multi-line string: not ours to edit
            size_t j = i + 1;
            for (; j < text.size() && text[j] != ch && text[j] != '\n'; ++j)
                if (ch == '"' && text[j] == '\\') ++j;
            if (j >= text.size() || text[j] != ch) return false;
            i = j;
            a.last_end = j + 1;
            a.trailing_comma = false;
            continue;
        }
        if (ch == ',') {
            a.trailing_comma = true;
            continue;
        }
        if (ch == ']') {
            a.close = i;
            return true;
        }
        if (ch != ' ' && ch != '\t' && ch != '\n' && ch != '\r') return false;  // a nested array, a number: refuse
    }
    return false;
}

/// Add `items` (quoted) to the array of `key` starting on line `at`, keeping every comment and
/// line of it: on the line after the last element (a multi-line array, that element's
/// indentation, each with a trailing ','), else right after the last element.
bool append_to_array(std::vector<std::string>& lines, size_t at, const std::vector<std::string>& items) {
    std::string text = join_lines(lines);
    size_t line_start = 0;
    for (size_t i = 0; i < at; ++i) line_start += lines[i].size() + 1;
    ArraySpan a;
    if (!find_array(text, line_start, a)) return false;
    auto line_begin = [&](size_t pos) {
        size_t b = text.rfind('\n', pos == 0 ? 0 : pos - 1);
        return b == std::string::npos || pos == 0 ? size_t(0) : b + 1;
    };
    const size_t close_line = line_begin(a.close);
    std::string list;
    if (a.last_end == std::string::npos) {
        if (line_begin(a.open) == close_line) {  // [] on one line
            for (size_t i = 0; i < items.size(); ++i) list += (i ? ", " : "") + toml_quote(items[i]);
            text.insert(a.open + 1, list);
        } else {
            std::string ind = lines[at].substr(0, lines[at].size() - trim_left(lines[at]).size()) + "  ";
            for (const auto& it : items) list += ind + toml_quote(it) + ",\n";
            text.insert(close_line, list);
        }
    } else if (line_begin(a.last_end) != close_line) {  // multi-line: new lines before the ']' line
        const size_t el_line = line_begin(a.last_end - 1);
        size_t k = text.find_first_not_of(" \t", el_line);
        std::string ind = text.substr(el_line, k - el_line);
        for (const auto& it : items) list += ind + toml_quote(it) + ",\n";
        text.insert(close_line, list);
        if (!a.trailing_comma) text.insert(a.last_end, ",");
    } else {
        for (const auto& it : items) list += (a.trailing_comma ? " " : ", ") + toml_quote(it) + (a.trailing_comma ? "," : "");
        size_t pos = a.last_end;
        if (a.trailing_comma) pos = text.find(',', a.last_end) + 1;
        text.insert(pos, list);
    }
    lines = split_lines(text);
    return true;
}

/// Does the file's text hold a table header at or below `keys` ([keys] or [keys.sub])?
bool has_header_under(const std::vector<std::string>& lines, const std::vector<std::string>& keys) {
    for (const auto& l : lines)
        if (auto k = header_keys(l); k && k->size() >= keys.size() && std::equal(keys.begin(), keys.end(), k->begin())) return true;
    return false;
}

/// One planned file change: new text for `path` (exists = it is rewritten, else created).
struct FileEdit {
    std::string path, text;
    bool exists = false;
};

/// The files of `info` (as read from disk now), for read_containerd_view / read_containerd_layers.
std::string current_layers(const RuntimeInfo& info, std::vector<std::pair<std::string, std::string>>& layers) {
    layers.clear();
    for (const auto& f : info.config_files) {
        ReadOutcome in = read_file(f);
        if (!in.error.empty()) return in.error;
        layers.emplace_back(f, in.text);
    }
    return "";
}

/// Re-read containerd's config with `edit` applied; "" when it parses.
std::string simulate(const RuntimeInfo& info, const FileEdit& edit, RuntimeInfo& out) {
    std::vector<std::pair<std::string, std::string>> layers;
    if (std::string e = current_layers(info, layers); !e.empty()) return e;
    bool placed = false;
    for (auto& [f, text] : layers)
        if (f == edit.path) {
            text = edit.text;
            placed = true;
        }
    if (!placed) layers.emplace_back(edit.path, edit.text);  // a new drop-in, read last
    out = info;
    out.error.clear();
    read_containerd_layers(layers, out);
    return out.error;
}

/// Where the backup of `target` goes: `<backup_dir>/<target's absolute path>.<stamp>` (".N" added
/// when taken). "" and `error` set when an `imports` entry of the config would read it.
std::string backup_path(const RuntimeInfo& info, const std::string& target, const std::string& backup_dir, const std::string& stamp,
                        std::string& error) {
    std::string abs = target;
    if (abs.empty() || abs[0] != '/') {
        char cwd[4096];
        abs = std::string(::getcwd(cwd, sizeof cwd) ? cwd : "") + "/" + target;
    }
    std::string base = backup_dir + abs + "." + stamp;
    std::string name = base;
    struct stat st {};
    for (int n = 1; ::lstat(name.c_str(), &st) == 0; ++n) name = base + "." + std::to_string(n);
    for (const auto& pat : info.import_patterns)
        if (pat == name || (pat.find('*') != std::string::npos && ::fnmatch(pat.c_str(), name.c_str(), FNM_PATHNAME) == 0)) {
            error = "the backup " + name + " would be read by containerd (imports entry " + pat + "); give --backup-dir outside every imports glob";
            return "";
        }
    return name;
}

/// Back up (when the file exists) and write `edit`; returns "" or an error, the backup path and
/// the text it replaced (`had`: the file existed).
std::string apply_edit(const RuntimeInfo& info, const FileEdit& edit, const std::string& stamp, const std::string& backup_dir, std::string& backup,
                       std::string& old_text, bool& had) {
    const std::string target = write_target(edit.path);
    ReadOutcome in = read_file(target);
    if (!in.error.empty()) return in.error;
    mode_t mode = 0644;
    uid_t uid = static_cast<uid_t>(-1);
    gid_t gid = static_cast<gid_t>(-1);
    had = in.st.st_mode != 0;
    old_text = in.text;
    if (had) {
        mode = in.st.st_mode & 07777;
        uid = in.st.st_uid;
        gid = in.st.st_gid;
        std::string err;
        backup = backup_path(info, target, backup_dir, stamp, err);
        if (backup.empty()) return err;
        if (std::string e = make_dirs(dir_of(backup)); !e.empty()) return "backup failed: " + e;
        if (std::string e = atomic_write(backup, in.text, mode, uid, gid); !e.empty()) return "backup failed: " + e;
    } else if (std::string e = make_dirs(dir_of(target)); !e.empty()) {
        return e;
    }
    return atomic_write(target, edit.text, mode, uid, gid);
}

/// Where a new section goes: a new drop-in in info.dropin_dir, else the main config (appended).
/// `section(file_version)` gives the section's text for a file of that version (its plugin names
/// follow containerd_config.hpp).
FileEdit new_section_edit(const RuntimeInfo& info, const ContainerdConfigView& view, const std::function<std::string(int)>& section,
                          const std::string& stamp, const std::string& why) {
    FileEdit e;
    const std::string comment = "# Added by `nri-qos register " + why + "` (" + stamp + ").\n";
    if (!info.dropin_dir.empty()) {
        e.path = info.dropin_dir + "/90-nri-qos.toml";
        ReadOutcome in = read_file(e.path);
        int fv = new_file_version(view);
        if (in.exists) {
            e.exists = true;
            e.text = in.text + (in.text.back() == '\n' ? "" : "\n") + "\n" + comment + section(fv);
        } else {
            e.text = (fv ? "version = " + std::to_string(fv) + "\n\n" : std::string()) + comment + section(fv);
        }
        return e;
    }
    e.path = info.config_files.empty() ? info.config : info.config_files.front();
    ReadOutcome in = read_file(e.path);
    if (in.exists) {
        e.exists = true;
        e.text = in.text + (in.text.back() == '\n' ? "" : "\n") + "\n" + comment + section(view.root_version);
    } else {
        int v = info.major >= 2 ? 3 : 2;
        e.text = "version = " + std::to_string(v) + "\n\n" + comment + section(v);
    }
    return e;
}

/// containerd's view of the files of `info` as they are on disk now (the release of info.version).
ContainerdConfigView view_of(const RuntimeInfo& info, std::string& error) {
    std::vector<std::pair<std::string, std::string>> layers;
    error = current_layers(info, layers);
    ContainerdRelease rel;
    parse_containerd_release(info.version, rel);
    ContainerdConfigView v = read_containerd_view(layers, rel);
    if (error.empty()) error = v.error;
    return v;
}

/// The edits nri-qos refuses before it plans one: a config containerd would refuse, and a
/// version-1 config (no `version`) when containerd's release is unknown (1.x reads its short
/// plugin names, 2.x migrates it: where NRI lives differs).
std::string refuse_unsafe(const RuntimeInfo& info, const ContainerdConfigView& v, const std::string& err) {
    if (!err.empty()) return err;
    if (v.release_inferred && !info.config_files.empty() && v.written_version <= 1)
        return join_list(info.config_files) +
               " set no config version above 1 and containerd's version is unknown: containerd 1.x "
               "reads such a config by short plugin names ([plugins.cri], [plugins.nri]), 2.x migrates it; give "
               "--containerd-version";
    return "";
}

RegisterResult write_verified(const RuntimeInfo& info, const FileEdit& edit, const std::string& stamp, const std::string& backup_dir,
                              const std::function<std::string(const RuntimeInfo&)>& check, const std::string& done) {
    RuntimeInfo after;
    if (std::string e = simulate(info, edit, after); !e.empty())
        return fail_result("the edit of " + edit.path + " would not be read by containerd (" + e + "); nothing written: edit it by hand");
    if (std::string e = check(after); !e.empty())
        return fail_result("after editing " + edit.path + " containerd would still " + e + "; nothing written: edit it by hand");
    std::string backup, old_text;
    bool had = false;
    if (std::string e = apply_edit(info, edit, stamp, backup_dir, backup, old_text, had); !e.empty()) return fail_result(e);
    // Read again what containerd will read at its next start (every imports file as it is now,
    // in its order): a drop-in that appeared since, a glob that does not cover the new file.
    RuntimeInfo now = info;
    now.error.clear();
    read_containerd_config(now);
    std::string why = !now.error.empty() ? now.error : check(now);
    if (!why.empty()) {
        const std::string target = write_target(edit.path);
        std::string r = had ? atomic_write(target, old_text, 0644, static_cast<uid_t>(-1), static_cast<gid_t>(-1)) : std::string();
        if (had) {
            struct stat st {};
            if (::stat(backup.c_str(), &st) == 0) {
                ::chmod(target.c_str(), st.st_mode & 07777);
                if (::chown(target.c_str(), st.st_uid, st.st_gid) != 0) { /* kept as written */
                }
            }
        } else if (::unlink(target.c_str()) != 0) {
            r = "cannot remove " + target + ": " + errno_text(errno);
        }
        return fail_result("wrote " + edit.path + ", but containerd reading its config now would still " +
                           (!now.error.empty() ? "fail: " + now.error : why) + "; " +
                           (r.empty() ? (had ? "restored it from " + backup : "removed it again")
                                      : "RESTORE FAILED (" + r + ")" + (had ? ": the original is " + backup : "")) +
                           "; edit it by hand");
    }
    return ok_result(true,
                     done + " in " + edit.path + (backup.empty() ? " (new file)" : " (backup: " + backup + ")") + "; restart containerd to apply it");
}

}  // namespace

RegisterResult enable_containerd_nri(const RuntimeInfo& info, const std::string& stamp, const std::string& backup_dir) {
    try {
        if (!info.version.empty() && !containerd_native_capable(info))
            return fail_result("--enable-nri: containerd " + info.version +
                               " has no native NRI (1.7 or later needed); "
                               "it calls NRI v0.1 hooks from /etc/nri/conf.json");
        if (!info.error.empty()) return fail_result("--enable-nri: " + info.error + "; nothing written");
        std::string err;
        const ContainerdConfigView view = view_of(info, err);
        if (std::string e = refuse_unsafe(info, view, err); !e.empty()) return fail_result("--enable-nri: " + e + "; nothing written");
        if (!info.nri_disabled_in.empty())
            return fail_result("--enable-nri: " + info.nri_disabled_in +
                               " lists the NRI plugin in disabled_plugins; nothing written: "
                               "remove it from that list by hand (nri-qos does not edit disabled_plugins)");
        const bool disabled = info.nri_disable ? *info.nri_disable : (info.major < 2);
        if (!disabled)
            return ok_result(false, "native NRI already enabled " +
                                        (info.nri_disable ? "in " + info.nri_file : std::string("(the default of containerd 2.x)")) + " (unchanged)");
        const std::string note = "nri-qos register --enable-nri (" + stamp + ")";
        const ConfigNode* section = view.plugins.at({view.nri_id});
        if (section && !section->is_table) section = nullptr;
        const ConfigNode* dis = section ? section->at({"disable"}) : nullptr;
        const bool has_timeout = section && section->at({"plugin_request_timeout"});
        FileEdit edit;
        if (section) {
            // The file (and table) that sets `disable`, else the last file defining the section
            // (on 1.x it replaces the whole section: a key written anywhere else is lost).
            const std::string file = dis ? dis->file : section->file;
            std::vector<std::string> table = dis ? dis->path : section->path;
            if (dis) table.pop_back();
            ReadOutcome in = read_file(file);
            if (!in.error.empty()) return fail_result(in.error);
            std::vector<std::string> lines = split_lines(in.text);
            long h = find_table(lines, table);
            if (h < 0 && (dis || !has_header_under(lines, table)))
                return fail_result("--enable-nri: " + file + " sets the NRI plugin without a " + toml_header(table) +
                                   " table header (dotted keys or an inline table); nothing written: edit it by hand: disable = false");
            if (h < 0) {  // only sub-tables of the section have headers: the section's own header goes last
                lines.push_back("");
                lines.push_back(toml_header(table) + "  # " + note);
                h = static_cast<long>(lines.size()) - 1;
            }
            const size_t hh = static_cast<size_t>(h);
            const size_t end = table_end(lines, hh);
            const std::string indent = body_indent(lines, hh);
            std::vector<std::string> add;
            long d = find_key(lines, hh + 1, end, "disable");
            if (d >= 0) lines[static_cast<size_t>(d)] = replace_scalar(lines[static_cast<size_t>(d)], "false", note);
            else add.push_back(indent + "disable = false  # " + note);
            if (!has_timeout && find_key(lines, hh + 1, end, "plugin_request_timeout") < 0) add.push_back(indent + "plugin_request_timeout = \"2s\"");
            lines.insert(lines.begin() + h + 1, add.begin(), add.end());
            edit.path = file;
            edit.exists = true;
            edit.text = join_lines(lines);
        } else {
            edit = new_section_edit(
                info, view,
                [&](int fv) {
                    return toml_header({"plugins", nri_id_for_file(view, fv)}) + "\n  disable = false\n  plugin_request_timeout = \"2s\"\n";
                },
                stamp, "--enable-nri");
        }
        return write_verified(
            info, edit, stamp, backup_dir,
            [](const RuntimeInfo& a) { return a.nri_disable && !*a.nri_disable ? std::string() : std::string("read NRI as disabled"); },
            "enabled containerd's native NRI (" +
                (section ? toml_header(dis ? std::vector<std::string>(dis->path.begin(), dis->path.end() - 1) : section->path)
                         : toml_header({"plugins", nri_id_for_file(view, new_file_version(view))})) +
                " disable = false)");
    } catch (const std::exception& e) { return fail_result(std::string("--enable-nri: ") + e.what()); }
}

RegisterResult pass_annotations(const RuntimeInfo& info, const std::vector<std::string>& keys, const std::string& stamp,
                                const std::string& backup_dir) {
    try {
        if (!info.error.empty()) return fail_result("--pass-annotations: " + info.error + "; nothing written");
        std::string err;
        const ContainerdConfigView view = view_of(info, err);
        if (std::string e = refuse_unsafe(info, view, err); !e.empty()) return fail_result("--pass-annotations: " + e + "; nothing written");
        const std::vector<std::string> have = info.pod_annotations ? *info.pod_annotations : std::vector<std::string>{};
        std::vector<std::string> missing;
        for (const auto& k : keys)
            if (!annotation_passed(have, k)) missing.push_back(k);
        const std::string table_name = info.runtime_section;
        if (missing.empty())
            return ok_result(false, "every annotation the policy reads is already in " + table_name + " pod_annotations (unchanged)");
        const std::string note = "nri-qos register --pass-annotations (" + stamp + ")";
        std::string value = "pod_annotations = [";
        for (size_t i = 0; i < missing.size(); ++i) value += (i ? ", " : "") + toml_quote(missing[i]);
        value += "]";
        const ConfigNode* cri = view.plugins.at({view.cri_runtime_id});
        if (cri && !cri->is_table) cri = nullptr;
        const ConfigNode* rt = cri ? cri->at({"containerd", "runtimes", info.runtime_name}) : nullptr;
        if (rt && !rt->is_table) rt = nullptr;
        const ConfigNode* pa = rt ? rt->at({"pod_annotations"}) : nullptr;
        FileEdit edit;
        if (rt) {
            const std::string file = pa ? pa->file : rt->file;
            std::vector<std::string> table = pa ? pa->path : rt->path;
            if (pa) table.pop_back();
            ReadOutcome in = read_file(file);
            if (!in.error.empty()) return fail_result(in.error);
            std::vector<std::string> lines = split_lines(in.text);
            long h = find_table(lines, table);
            if (h < 0)
                return fail_result("--pass-annotations: " + file + " sets " + toml_header(table) +
                                   " without its own table header (dotted keys or an inline table); nothing written: add " + join_list(missing) +
                                   " to its pod_annotations by hand");
            const size_t hh = static_cast<size_t>(h);
            const size_t end = table_end(lines, hh);
            long at = find_key(lines, hh + 1, end, "pod_annotations");
            if (at >= 0) {
                if (!append_to_array(lines, static_cast<size_t>(at), missing))
                    return fail_result("--pass-annotations: the pod_annotations of " + toml_header(table) + " in " + file +
                                       " is not a plain array of strings; nothing written: add " + join_list(missing) + " by hand");
            } else {
                lines.insert(lines.begin() + h + 1, body_indent(lines, hh) + value + "  # " + note);
            }
            edit.path = file;
            edit.exists = true;
            edit.text = join_lines(lines);
        } else {
            if (info.runtime_name != "runc")
                return fail_result("--pass-annotations: no " + table_name + " table in containerd's config (the default runtime " +
                                   info.runtime_name + "); nothing written: add pod_annotations = [" + join_list(missing) +
                                   "] to the runtime's table by hand");
            auto table_text = [&](const std::vector<std::string>& where) {
                return toml_header(where) + "\n  runtime_type = \"io.containerd.runc.v2\"\n  " + value + "\n";
            };
            if (cri) {
                // The CRI section's (last) file: on 1.x a section written anywhere else replaces it.
                std::vector<std::string> where = cri->path;
                if (where.size() > 2) where.resize(2);
                for (const char* k : {"containerd", "runtimes"}) where.push_back(k);
                where.push_back(info.runtime_name);
                ReadOutcome in = read_file(cri->file);
                if (!in.error.empty()) return fail_result(in.error);
                edit.path = cri->file;
                edit.exists = true;
                edit.text = in.text + (in.text.empty() || in.text.back() == '\n' ? "" : "\n") + "\n# Added by `" + note + "`.\n" + table_text(where);
            } else {
                edit = new_section_edit(
                    info, view,
                    [&](int fv) {
                        return table_text({"plugins", cri_runtime_id_for_file(view, fv), "containerd", "runtimes", "runc"});
                    },
                    stamp, "--pass-annotations");
            }
        }
        return write_verified(
            info, edit, stamp, backup_dir,
            [keys](const RuntimeInfo& a) {
                std::vector<std::string> still;
                for (const auto& k : keys)
                    if (!a.pod_annotations || !annotation_passed(*a.pod_annotations, k)) still.push_back(k);
                return still.empty() ? std::string() : "drop " + join_list(still);
            },
            "added " + join_list(missing) + " to " + table_name + " pod_annotations");
    } catch (const std::exception& e) { return fail_result(std::string("--pass-annotations: ") + e.what()); }
}

}  // namespace nriqos

namespace nriqos {

RegisterResult require_plugin(const RuntimeInfo& info, const std::string& name, const std::string& stamp, const std::string& backup_dir) {
    try {
        if (info.version.empty())
            return fail_result(
                "--require: containerd's version is unknown (give --containerd-version): required_plugins needs "
                "containerd 2.2 or later (NRI's default validator); nothing written");
        if (info.major < 2 || (info.major == 2 && info.minor < 2))
            return fail_result("--require: containerd " + info.version +
                               " has no NRI default validator (required_plugins needs containerd 2.2 or later); nothing written");
        if (!info.error.empty()) return fail_result("--require: " + info.error + "; nothing written");
        std::string err;
        const ContainerdConfigView view = view_of(info, err);
        if (std::string e = refuse_unsafe(info, view, err); !e.empty()) return fail_result("--require: " + e + "; nothing written");
        auto listed = [&name](const RuntimeInfo& a) {
            return a.required_plugins && std::find(a.required_plugins->begin(), a.required_plugins->end(), name) != a.required_plugins->end();
        };
        const bool enabled = info.validator_enable && *info.validator_enable;
        if (enabled && listed(info)) return ok_result(false, "NRI's default validator already requires " + name + " (unchanged)");
        const std::string note = "nri-qos register --require (" + stamp + ")";
        const ConfigNode* section = view.plugins.at({view.nri_id});
        if (section && !section->is_table) section = nullptr;
        const ConfigNode* val = section ? section->at({"default_validator"}) : nullptr;
        if (val && !val->is_table) val = nullptr;
        const ConfigNode* en = val ? val->at({"enable"}) : nullptr;
        const ConfigNode* rp = val ? val->at({"required_plugins"}) : nullptr;
        FileEdit edit;
        std::string where;
        if (val) {
            // The file setting the keys (both in one file), else the last file defining the table.
            if (en && rp && en->file != rp->file)
                return fail_result("--require: " + en->file + " sets the default validator's enable and " + rp->file +
                                   " its required_plugins; nothing written: edit them by hand (enable = true, add \"" + name +
                                   "\" to required_plugins)");
            const ConfigNode* key = rp ? rp : en;
            const std::string file = key ? key->file : val->file;
            std::vector<std::string> table = key ? key->path : val->path;
            if (key) table.pop_back();
            ReadOutcome in = read_file(file);
            if (!in.error.empty()) return fail_result(in.error);
            std::vector<std::string> lines = split_lines(in.text);
            const long h = find_table(lines, table);
            if (h < 0)
                return fail_result("--require: " + file + " sets " + toml_header(table) +
                                   " without its own table header (dotted keys or an inline table); nothing written: edit it by hand");
            const size_t hh = static_cast<size_t>(h);
            size_t end = table_end(lines, hh);
            if (long at = find_key(lines, hh + 1, end, "required_plugins"); at >= 0 && !listed(info)) {
                if (!append_to_array(lines, static_cast<size_t>(at), {name}))
                    return fail_result("--require: the required_plugins of " + toml_header(table) + " in " + file +
                                       " is not a plain array of strings; nothing written: add \"" + name + "\" by hand");
            } else if (at < 0) {
                lines.insert(lines.begin() + h + 1, body_indent(lines, hh) + "required_plugins = [" + toml_quote(name) + "]  # " + note);
            }
            end = table_end(lines, hh);
            if (long e = find_key(lines, hh + 1, end, "enable"); e >= 0)
                lines[static_cast<size_t>(e)] = replace_scalar(lines[static_cast<size_t>(e)], "true", note);
            else lines.insert(lines.begin() + h + 1, body_indent(lines, hh) + "enable = true  # " + note);
            edit.path = file;
            edit.exists = true;
            edit.text = join_lines(lines);
            where = toml_header(table);
        } else {
            auto table_text = [&](const std::vector<std::string>& keys) {
                return toml_header(keys) + "\n  enable = true\n  required_plugins = [" + toml_quote(name) + "]\n";
            };
            if (section) {
                // A new table beside the NRI section, in the last file that defines it.
                std::vector<std::string> keys = section->path;
                keys.push_back("default_validator");
                ReadOutcome in = read_file(section->file);
                if (!in.error.empty()) return fail_result(in.error);
                edit.path = section->file;
                edit.exists = true;
                edit.text = in.text + (in.text.empty() || in.text.back() == '\n' ? "" : "\n") + "\n# Added by `" + note + "`.\n" + table_text(keys);
                where = toml_header(keys);
            } else {
                edit = new_section_edit(
                    info, view,
                    [&](int fv) {
                        return table_text({"plugins", nri_id_for_file(view, fv), "default_validator"});
                    },
                    stamp, "--require");
                where = toml_header({"plugins", nri_id_for_file(view, new_file_version(view)), "default_validator"});
            }
        }
        return write_verified(
            info, edit, stamp, backup_dir,
            [listed, name](const RuntimeInfo& a) {
                if (!(a.validator_enable && *a.validator_enable)) return std::string("read the default validator as disabled");
                return listed(a) ? std::string() : "not list " + name + " in required_plugins";
            },
            "NRI's default validator requires " + name + " (" + where + " enable = true, required_plugins)");
    } catch (const std::exception& e) { return fail_result(std::string("--require: ") + e.what()); }
}

}  // namespace nriqos
