// register.cpp — see register.hpp for the contract of every function.
#include "cli/register.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <climits>
#include <ctime>
#include <set>
#include <sstream>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "event/detect.hpp"
#include "facts/facts.hpp"
#include "nri/service.hpp"
#include "policy/policy.hpp"
#include "policy/policy_builtin.hpp"
#include "policy/policy_store.hpp"

namespace nriqos {
namespace {

using ojson = nlohmann::ordered_json;

RegisterResult ok_result(bool changed, const std::string& msg) {
    return RegisterResult{0, changed, "nri-qos: " + msg};
}

RegisterResult fail_result(const std::string& msg, int code = 1) {
    std::string m = "nri-qos: error: " + msg;
    for (char& c : m)
        if (c == '\n' || c == '\r') c = ' ';
    return RegisterResult{code, false, m};
}

std::string errno_text(int e) { return std::strerror(e); }

std::string dir_of(const std::string& path) {
    auto pos = path.find_last_of('/');
    if (pos == std::string::npos) return ".";
    if (pos == 0) return "/";
    return path.substr(0, pos);
}

std::string base_of(const std::string& path) {
    auto pos = path.find_last_of('/');
    return pos == std::string::npos ? path : path.substr(pos + 1);
}

bool valid_type(const std::string& t) {
    if (t.empty() || t == "." || t == "..") return false;
    for (unsigned char c : t)
        if (!(std::isalnum(c) || c == '.' || c == '_' || c == '-')) return false;
    return true;
}

bool valid_index(const std::string& idx) {
    return idx.size() == 2 && std::isdigit(static_cast<unsigned char>(idx[0])) &&
           std::isdigit(static_cast<unsigned char>(idx[1]));
}

/// mkdir -p with mode 0755; returns "" or an error text naming the failing component.
std::string make_dirs(const std::string& dir) {
    if (dir.empty() || dir == "/" || dir == ".") return "";
    struct stat st {};
    if (::stat(dir.c_str(), &st) == 0) {
        if (S_ISDIR(st.st_mode)) return "";
        return "cannot create directory " + dir + ": " + errno_text(ENOTDIR);
    }
    if (errno != ENOENT) return "cannot access " + dir + ": " + errno_text(errno);
    std::string parent = dir_of(dir);
    if (parent != dir) {
        std::string err = make_dirs(parent);
        if (!err.empty()) return err;
    }
    if (::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST)
        return "cannot create directory " + dir + ": " + errno_text(errno);
    return "";
}

struct ReadOutcome {
    bool exists = false;     // file exists and is not whitespace-only
    std::string text;        // content
    std::string error;       // non-empty: could not read
    struct stat st {};       // valid when the file exists
};

ReadOutcome read_file(const std::string& path) {
    ReadOutcome r;
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        if (errno == ENOENT) return r;
        r.error = "cannot read " + path + ": " + errno_text(errno);
        return r;
    }
    if (::fstat(fd, &r.st) != 0 || !S_ISREG(r.st.st_mode)) {
        int e = S_ISDIR(r.st.st_mode) ? EISDIR : errno;
        ::close(fd);
        r.error = "cannot read " + path + ": " + (e ? errno_text(e) : "not a regular file");
        return r;
    }
    char buf[65536];
    for (;;) {
        ssize_t n = ::read(fd, buf, sizeof buf);
        if (n < 0) {
            if (errno == EINTR) continue;
            r.error = "cannot read " + path + ": " + errno_text(errno);
            ::close(fd);
            return r;
        }
        if (n == 0) break;
        r.text.append(buf, static_cast<size_t>(n));
    }
    ::close(fd);
    r.exists = r.text.find_first_not_of(" \t\r\n") != std::string::npos;
    return r;
}

/// Resolve `path` to the file that must actually be rewritten: the target when `path` is a
/// symlink (so the link survives), `path` itself otherwise.
std::string write_target(const std::string& path) {
    struct stat st {};
    if (::lstat(path.c_str(), &st) == 0 && S_ISLNK(st.st_mode)) {
        char resolved[PATH_MAX];
        if (::realpath(path.c_str(), resolved) != nullptr) return resolved;
    }
    return path;
}

/// Write `text` to `path` atomically (temp file in the same directory, fsync, rename, fsync of
/// the directory). `mode`/`uid`/`gid` are applied to the new file (uid == -1: leave as is).
std::string atomic_write(const std::string& path, const std::string& text, mode_t mode, uid_t uid,
                         gid_t gid) {
    std::string dir = dir_of(path);
    std::string tmpl = dir + "/." + base_of(path) + ".nri-qos.XXXXXX";
    std::vector<char> tmp(tmpl.begin(), tmpl.end());
    tmp.push_back('\0');
    int fd = ::mkostemp(tmp.data(), O_CLOEXEC);
    if (fd < 0) return "cannot write " + path + ": cannot create a temporary file in " + dir + ": " +
                       errno_text(errno);
    std::string tmp_path(tmp.data());
    auto fail = [&](const std::string& what) {
        int e = errno;
        ::close(fd);
        ::unlink(tmp_path.c_str());
        return "cannot write " + path + ": " + what + ": " + errno_text(e);
    };
    if (::fchmod(fd, mode) != 0) return fail("fchmod");
    if (uid != static_cast<uid_t>(-1) && ::fchown(fd, uid, gid) != 0 && errno != EPERM)
        return fail("fchown");
    size_t off = 0;
    while (off < text.size()) {
        ssize_t n = ::write(fd, text.data() + off, text.size() - off);
        if (n < 0) {
            if (errno == EINTR) continue;
            return fail("write");
        }
        off += static_cast<size_t>(n);
    }
    if (::fsync(fd) != 0) return fail("fsync");
    if (::close(fd) != 0) {
        int e = errno;
        ::unlink(tmp_path.c_str());
        return "cannot write " + path + ": close: " + errno_text(e);
    }
    if (::rename(tmp_path.c_str(), path.c_str()) != 0) {
        int e = errno;
        ::unlink(tmp_path.c_str());
        return "cannot write " + path + ": rename: " + errno_text(e);
    }
    int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) {
        ::fsync(dfd);  // best effort: the rename is already visible
        ::close(dfd);
    }
    return "";
}

std::string json_text(const ojson& doc) { return doc.dump(2) + "\n"; }

/// Parse + shape check. Returns an error text ("" when fine).
std::string parse_conf(const std::string& path, const std::string& text, ojson& doc) {
    try {
        doc = ojson::parse(text);
    } catch (const nlohmann::json::parse_error& e) {
        std::string w = e.what();
        auto pos = w.find("] ");
        if (w.rfind("[json.exception.", 0) == 0 && pos != std::string::npos) w = w.substr(pos + 2);
        return path + " is not valid JSON (" + w + "); left untouched";
    }
    auto shape = [&](const std::string& what) {
        return path + " is not an NRI v0.1 config: " + what + "; left untouched";
    };
    if (!doc.is_object()) return shape("top level is not an object");
    if (doc.contains("version") && !doc["version"].is_string())
        return shape("\"version\" is not a string");
    if (doc.contains("plugins")) {
        const ojson& plugins = doc["plugins"];
        if (!plugins.is_array()) return shape("\"plugins\" is not an array");
        for (size_t i = 0; i < plugins.size(); ++i) {
            const ojson& p = plugins[i];
            std::string at = "plugins[" + std::to_string(i) + "]";
            if (!p.is_object()) return shape(at + " is not an object");
            if (!p.contains("type") || !p["type"].is_string())
                return shape(at + " has no string \"type\"");
        }
    }
    return "";
}

ojson fresh_conf(const std::string& type, const ojson& plugin_conf) {
    ojson entry = ojson::object();
    entry["type"] = type;
    entry["conf"] = plugin_conf;
    ojson doc = ojson::object();
    doc["version"] = "0.1";
    doc["plugins"] = ojson::array({entry});
    return doc;
}

}  // namespace

RegisterResult register_v01(const std::string& conf_json_path, const std::string& type,
                            const nlohmann::json& plugin_conf, bool replace_conf) {
    ojson conf;
    try {
        conf = ojson::parse(plugin_conf.dump());
    } catch (const std::exception& e) {
        return fail_result(std::string("invalid plugin conf: ") + e.what(), 2);
    }
    return register_v01_ordered(conf_json_path, type, conf, replace_conf);
}

namespace {
/// The plugin conf must be a JSON object the hook accepts: it refuses a conf with an unknown key
/// (a typo like "polcy") on every event, so none is written (policy_store.hpp plugin_conf_error).
RegisterResult check_plugin_conf(const ojson& plugin_conf) {
    if (!plugin_conf.is_object())
        return fail_result("plugin conf must be a JSON object, got " + std::string(plugin_conf.type_name()), 2);
    if (std::string e = plugin_conf_error(nlohmann::json::parse(plugin_conf.dump())); !e.empty())
        return fail_result("invalid plugin conf: " + e, 2);
    return RegisterResult{};
}
}  // namespace

RegisterResult register_v01_ordered(const std::string& conf_json_path, const std::string& type,
                                    const ojson& plugin_conf, bool replace_conf) {
    try {
        if (!valid_type(type))
            return fail_result("invalid plugin type \"" + type +
                                   "\" (allowed: letters, digits, '.', '_', '-')",
                               2);
        if (RegisterResult bad = check_plugin_conf(plugin_conf); !bad.ok()) return bad;
        if (conf_json_path.empty()) return fail_result("empty --conf-json path", 2);

        const std::string target = write_target(conf_json_path);
        ReadOutcome in = read_file(target);
        if (!in.error.empty()) return fail_result(in.error);

        if (!in.exists) {
            std::string err = make_dirs(dir_of(target));
            if (err.empty()) {
                mode_t mode = in.st.st_mode ? (in.st.st_mode & 07777) : 0644;
                uid_t uid = in.st.st_mode ? in.st.st_uid : static_cast<uid_t>(-1);
                gid_t gid = in.st.st_mode ? in.st.st_gid : static_cast<gid_t>(-1);
                err = atomic_write(target, json_text(fresh_conf(type, plugin_conf)), mode, uid, gid);
            }
            if (!err.empty()) return fail_result(err);
            return ok_result(true, "registered \"" + type + "\" in " + conf_json_path +
                                       " (new file; NRI v0.1 reads it at every pod/container event)");
        }

        ojson doc;
        std::string err = parse_conf(conf_json_path, in.text, doc);
        if (!err.empty()) return fail_result(err);
        const ojson before = doc;

        if (!doc.contains("plugins")) doc["plugins"] = ojson::array();
        ojson& plugins = doc["plugins"];
        ojson kept = ojson::array();
        bool found = false;
        std::string kept_conf_error;  // an administrator's conf kept as it is, but the hook refuses it
        for (auto& p : plugins) {
            if (p["type"].get<std::string>() != type) {
                kept.push_back(p);
                continue;
            }
            if (found) continue;  // drop duplicates of our type
            found = true;
            if (replace_conf || !p.contains("conf")) p["conf"] = plugin_conf;
            else kept_conf_error = plugin_conf_error(nlohmann::json::parse(p["conf"].dump()));
            kept.push_back(p);
        }
        const std::string warn = kept_conf_error.empty() ? std::string()
                                 : "; warning: its conf has an error the hook reports on every event (" + kept_conf_error +
                                       "): fix it with --plugin-conf";
        if (!found) {
            ojson entry = ojson::object();
            entry["type"] = type;
            entry["conf"] = plugin_conf;
            kept.push_back(entry);
        }
        plugins = kept;

        if (doc == before)
            return ok_result(false, "\"" + type + "\" already registered in " + conf_json_path +
                                        " (unchanged)" + warn);
        err = atomic_write(target, json_text(doc), in.st.st_mode & 07777, in.st.st_uid,
                           in.st.st_gid);
        if (!err.empty()) return fail_result(err);
        return ok_result(true, std::string(found ? "updated" : "registered") + " \"" + type +
                                   "\" in " + conf_json_path +
                                   " (NRI v0.1 reads it at every pod/container event)" + warn);
    } catch (const std::exception& e) {
        return fail_result(std::string("register: ") + e.what());
    }
}

RegisterResult unregister_v01(const std::string& conf_json_path, const std::string& type) {
    try {
        if (!valid_type(type))
            return fail_result("invalid plugin type \"" + type +
                                   "\" (allowed: letters, digits, '.', '_', '-')",
                               2);
        if (conf_json_path.empty()) return fail_result("empty --conf-json path", 2);
        const std::string target = write_target(conf_json_path);
        ReadOutcome in = read_file(target);
        if (!in.error.empty()) return fail_result(in.error);
        if (!in.exists)
            return ok_result(false, "\"" + type + "\" not registered (" + conf_json_path +
                                        " absent or empty)");
        ojson doc;
        std::string err = parse_conf(conf_json_path, in.text, doc);
        if (!err.empty()) return fail_result(err);

        if (!doc.contains("plugins"))
            return ok_result(false, "\"" + type + "\" not registered in " + conf_json_path);
        ojson kept = ojson::array();
        size_t removed = 0;
        for (const auto& p : doc["plugins"]) {
            if (p["type"].get<std::string>() == type)
                ++removed;
            else
                kept.push_back(p);
        }
        if (removed == 0)
            return ok_result(false, "\"" + type + "\" not registered in " + conf_json_path);

        // Exactly what register_v01 creates from scratch → remove the file.
        const ojson& plugins = doc["plugins"];
        bool ours_only = doc.size() == 2 && doc.begin().key() == "version" &&
                         doc["version"] == "0.1" && plugins.size() == 1 &&
                         plugins[0].size() == 2 && plugins[0].begin().key() == "type" &&
                         plugins[0].contains("conf");
        if (ours_only) {
            if (::unlink(target.c_str()) != 0)
                return fail_result("cannot remove " + target + ": " + errno_text(errno));
            int dfd = ::open(dir_of(target).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
            if (dfd >= 0) {
                ::fsync(dfd);
                ::close(dfd);
            }
            return ok_result(true, "unregistered \"" + type + "\": removed " + conf_json_path +
                                       " (it listed no other plugin)");
        }
        doc["plugins"] = kept;
        err = atomic_write(target, json_text(doc), in.st.st_mode & 07777, in.st.st_uid,
                           in.st.st_gid);
        if (!err.empty()) return fail_result(err);
        return ok_result(true, "unregistered \"" + type + "\" from " + conf_json_path);
    } catch (const std::exception& e) {
        return fail_result(std::string("unregister: ") + e.what());
    }
}

namespace {

std::optional<std::string> read_link(const std::string& path) {
    std::vector<char> buf(PATH_MAX + 1);
    ssize_t n = ::readlink(path.c_str(), buf.data(), buf.size() - 1);
    if (n < 0) return std::nullopt;
    return std::string(buf.data(), static_cast<size_t>(n));
}

/// Names `NN-<name>` (two digits) present in `dir`; empty when the directory is missing.
std::vector<std::string> plugin_entries(const std::string& dir, const std::string& name,
                                        std::string& error) {
    std::vector<std::string> out;
    DIR* d = ::opendir(dir.c_str());
    if (d == nullptr) {
        if (errno != ENOENT) error = "cannot list " + dir + ": " + errno_text(errno);
        return out;
    }
    while (struct dirent* e = ::readdir(d)) {
        std::string n = e->d_name;
        if (n.size() == name.size() + 3 && valid_index(n.substr(0, 2)) && n[2] == '-' &&
            n.compare(3, std::string::npos, name) == 0)
            out.push_back(n);
    }
    ::closedir(d);
    return out;
}

}  // namespace

RegisterResult enable_native(const std::string& plugins_dir, const std::string& idx,
                             const std::string& binary_path, const std::string& name) {
    try {
        if (!valid_index(idx))
            return fail_result("invalid plugin index \"" + idx + "\" (need two digits, 00-99)", 2);
        if (!valid_type(name)) return fail_result("invalid plugin name \"" + name + "\"", 2);
        if (binary_path.empty() || binary_path[0] != '/')
            return fail_result("--binary must be an absolute path, got \"" + binary_path + "\"", 2);
        struct stat st {};
        if (::stat(binary_path.c_str(), &st) != 0)
            return fail_result("cannot use " + binary_path + ": " + errno_text(errno));
        if (!S_ISREG(st.st_mode) || ::access(binary_path.c_str(), X_OK) != 0 ||
            (st.st_mode & 0111) == 0)
            return fail_result(binary_path + " is not an executable regular file");

        std::string err = make_dirs(plugins_dir);
        if (!err.empty()) return fail_result(err);
        const std::string entry = idx + "-" + name;
        const std::string link = plugins_dir + "/" + entry;

        bool changed = false;
        struct stat lst {};
        if (::lstat(link.c_str(), &lst) == 0) {
            if (!S_ISLNK(lst.st_mode))
                return fail_result(link + " exists and is not a symlink (remove it first)");
            auto cur = read_link(link);
            if (!cur || *cur != binary_path) {
                std::string tmp = plugins_dir + "/." + entry + ".nri-qos-tmp";
                ::unlink(tmp.c_str());
                if (::symlink(binary_path.c_str(), tmp.c_str()) != 0)
                    return fail_result("cannot create symlink in " + plugins_dir + ": " +
                                       errno_text(errno));
                if (::rename(tmp.c_str(), link.c_str()) != 0) {
                    int e = errno;
                    ::unlink(tmp.c_str());
                    return fail_result("cannot replace " + link + ": " + errno_text(e));
                }
                changed = true;
            }
        } else if (errno == ENOENT) {
            if (::symlink(binary_path.c_str(), link.c_str()) != 0)
                return fail_result("cannot create " + link + ": " + errno_text(errno));
            changed = true;
        } else {
            return fail_result("cannot access " + link + ": " + errno_text(errno));
        }

        // Other indices of the same plugin pointing at the same binary: the index moved.
        std::string lerr;
        std::vector<std::string> moved;
        for (const auto& other : plugin_entries(plugins_dir, name, lerr)) {
            if (other == entry) continue;
            std::string p = plugins_dir + "/" + other;
            auto target = read_link(p);
            if (target && *target == binary_path && ::unlink(p.c_str()) == 0) {
                moved.push_back(other);
                changed = true;
            }
        }
        if (!changed)
            return ok_result(false, "native NRI plugin " + link + " -> " + binary_path +
                                        " already in place");
        std::string extra;
        for (const auto& m : moved) extra += (extra.empty() ? "; removed " : ", ") + m;
        return ok_result(true, "enabled native NRI plugin " + link + " -> " + binary_path + extra +
                                   " (restart the runtime, e.g. containerd, to load it)");
    } catch (const std::exception& e) {
        return fail_result(std::string("register --native: ") + e.what());
    }
}

RegisterResult disable_native(const std::string& plugins_dir, const std::string& idx,
                              const std::string& binary_path, const std::string& name) {
    try {
        if (!idx.empty() && !valid_index(idx))
            return fail_result("invalid plugin index \"" + idx + "\" (need two digits, 00-99)", 2);
        if (!valid_type(name)) return fail_result("invalid plugin name \"" + name + "\"", 2);
        std::vector<std::string> candidates;
        std::string err;
        if (!idx.empty()) {
            struct stat lst {};
            if (::lstat((plugins_dir + "/" + idx + "-" + name).c_str(), &lst) == 0)
                candidates.push_back(idx + "-" + name);
        } else {
            candidates = plugin_entries(plugins_dir, name, err);
            if (!err.empty()) return fail_result(err);
        }
        std::vector<std::string> removed, kept;
        for (const auto& c : candidates) {
            std::string p = plugins_dir + "/" + c;
            auto target = read_link(p);
            if (target && *target == binary_path) {
                if (::unlink(p.c_str()) != 0)
                    return fail_result("cannot remove " + p + ": " + errno_text(errno));
                removed.push_back(p);
            } else {
                kept.push_back(p);
            }
        }
        auto join = [](const std::vector<std::string>& v) {
            std::string s;
            for (const auto& x : v) s += (s.empty() ? "" : ", ") + x;
            return s;
        };
        if (!kept.empty())
            return fail_result((removed.empty() ? std::string() : "removed " + join(removed) + "; ") +
                               "kept " + join(kept) + ": not a symlink to " + binary_path);
        if (removed.empty())
            return ok_result(false, "no native NRI plugin entry for \"" + name + "\" in " +
                                        plugins_dir);
        return ok_result(true, "disabled native NRI plugin: removed " + join(removed) +
                                   " (restart the runtime to stop the running relay)");
    } catch (const std::exception& e) {
        return fail_result(std::string("unregister --native: ") + e.what());
    }
}

std::string external_relay_serving(const std::string& state_dir, const std::string& proc_root) {
    try {
        nlohmann::json st = nri::read_service_status(state_dir + "/relay.json", proc_root);
        if (!st.is_object() || !st.value("up", false)) return "";
        std::string s = "nri-qos relay service (pid " + std::to_string(st.value("pid", int64_t(0)));
        if (st.value("registered", false) && st.contains("runtime") && st["runtime"].is_string())
            s += ", registered with " + st["runtime"].get<std::string>().substr(0, 64) + " " +
                 st.value("runtime_version", std::string()).substr(0, 64);
        return s + ")";
    } catch (...) {
        return "";
    }
}

// ---- Reading the node's runtime (issue #20 §4, issue #25 §1) ----

namespace {

/// "prefix.domain/name" tokens of a FactDef::reads text (annotation keys; "node*/cpulist" and
/// other sysfs paths have no dotted prefix right before the '/').
std::vector<std::string> annotation_tokens(const std::string& text) {
    std::vector<std::string> out;
    auto left_ok = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-'; };
    auto right_ok = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' || c == '_'; };
    for (size_t slash = text.find('/'); slash != std::string::npos; slash = text.find('/', slash + 1)) {
        size_t a = slash;
        while (a > 0 && left_ok(text[a - 1])) --a;
        size_t b = slash + 1;
        while (b < text.size() && right_ok(text[b])) ++b;
        std::string prefix = text.substr(a, slash - a);
        if (prefix.find('.') == std::string::npos || b == slash + 1) continue;
        out.push_back(text.substr(a, b - a));
    }
    return out;
}

/// Annotation keys each fact reads, by fact name (see policy_annotation_keys).
std::map<std::string, std::vector<std::string>> fact_annotation_keys() {
    std::map<std::string, std::vector<std::string>> m;
    std::vector<std::string> prev;
    for (const FactDef& f : fact_table()) {
        std::string reads = f.reads ? f.reads : "";
        std::vector<std::string> keys = annotation_tokens(reads);
        if (reads.find("the same annotations") != std::string::npos) keys.insert(keys.end(), prev.begin(), prev.end());
        if (!keys.empty()) prev = keys;
        m[f.name] = keys;
    }
    return m;
}

}  // namespace

std::vector<std::string> policy_annotation_keys(const Policy& policy) {
    std::set<std::string> keys;
    for (const Rule& r : policy.rules) {
        for (const auto& kv : r.match.annotations) keys.insert(kv.first);
        for (const auto& kv : r.match.labels_or_annotations) keys.insert(kv.first);
    }
    const auto facts = fact_annotation_keys();
    for (const auto& [name, cls] : policy.classes)
        for (const auto* list : {&cls.container, &cls.pod})
            for (const KnobSetting& k : *list)
                if (k.value.kind == KnobValue::Fact)
                    if (auto it = facts.find(k.value.text); it != facts.end()) keys.insert(it->second.begin(), it->second.end());
    return {keys.begin(), keys.end()};
}

namespace {

std::string join_list(const std::vector<std::string>& v, const std::string& sep = ", ") {
    std::string s;
    for (const auto& x : v) s += (s.empty() ? "" : sep) + x;
    return s;
}

std::string cri_plugin_id(const RuntimeInfo& c) {
    return c.config_version >= 3 ? "io.containerd.cri.v1.runtime" : "io.containerd.grpc.v1.cri";
}

bool containerd_known(const RuntimeInfo& c) { return !c.version.empty(); }
bool containerd_native_capable(const RuntimeInfo& c) { return c.major > 1 || (c.major == 1 && c.minor >= 7); }

}  // namespace

RegisterPlan plan_register(const RuntimeInfo& c, const NativeRuntimeInfo& isulad, const NativeRuntimeInfo& crio,
                           const std::string& requested, const std::vector<std::string>& needed) {
    RegisterPlan p;
    const NativeRuntimeInfo* other = isulad.found ? &isulad : crio.found ? &crio : nullptr;
    const HookMode called = mode_called(c);
    // The mode.
    if (requested == "v01" || requested == "native") {
        p.mode = requested;
    } else if (containerd_known(c)) {
        p.mode = called == HookMode::V01 ? "v01" : "native";
        if (called == HookMode::None && c.adapter) p.mode = "v01";
    } else if (other) {
        p.mode = "native";
    } else {
        p.mode = "v01";
    }
    if (containerd_known(c)) {
        p.notes.push_back(describe(c) + ": registering the " +
                          (p.mode == "native" ? "native NRI plugin" : "NRI v0.1 hook (conf.json)") +
                          (c.config_files.size() > 1 ? " (config files read: " + join_list(c.config_files) + ")" : ""));
        if (called == HookMode::None) {
            p.warnings.push_back(
                "containerd " + c.version + " has native NRI DISABLED (" +
                (c.nri_disable ? "[plugins.\"io.containerd.nri.v1.nri\"] disable = true in " + c.nri_file
                               : std::string("the default of containerd 1.7, not set in ") +
                                     (c.config_found ? join_list(c.config_files) : c.config + " (absent)")) +
                ").\n"
                "nri-qos will NEVER be called until NRI is enabled: no QoS knob is applied to any pod.\n"
                "Fix: nri-qos register --enable-nri   (writes the NRI section after a backup), then restart containerd.");
        } else if (called == HookMode::V01 && p.mode == "native") {
            p.warnings.push_back("containerd " + c.version + " (" + c.binary + ") calls only NRI v0.1 hooks (/etc/nri/conf.json)" +
                                 (c.adapter ? " through the v010-adapter" : "") + ":\nthe native plugin in " +
                                 c.plugin_path + " is never started. Fix: nri-qos register --mode v01");
        } else if (called == HookMode::Native && p.mode == "v01") {
            p.warnings.push_back("containerd " + c.version + " has native NRI and no v010-adapter in " + c.plugin_path +
                                 ":\n/etc/nri/conf.json is never read, nri-qos is never called. Fix: nri-qos register --native, "
                                 "then restart containerd");
        }
        if (p.mode == "native" && c.adapter && called != HookMode::None)
            p.warnings.push_back("the v010-adapter in " + c.plugin_path +
                                 " already passes every event to the conf.json plugins:\nuse conf.json (nri-qos register --mode v01) "
                                 "or remove the adapter, never both (every event would be handled twice)");
        // containerd < 1.7 hands an NRI v0.1 hook only the pod annotations its default runtime's
        // pod_annotations allow (issue #25); native NRI passes all of them.
        if (p.mode == "v01" && !containerd_native_capable(c)) {
            const std::vector<std::string> pats = c.pod_annotations ? *c.pod_annotations : std::vector<std::string>{};
            for (const auto& k : needed)
                if (!annotation_passed(pats, k)) p.missing_annotations.push_back(k);
            if (!p.missing_annotations.empty()) {
                std::string table = "[plugins.\"" + cri_plugin_id(c) + "\".containerd.runtimes." + c.runtime_name + "] pod_annotations";
                p.warnings.push_back(
                    "containerd " + c.version + " passes NRI v0.1 hooks only the pod annotations listed in\n" + table + " (" +
                    (c.pod_annotations ? "[" + join_list(*c.pod_annotations) + "]" : std::string("not set")) + " in " +
                    (c.cri_file.empty() ? (c.config_found ? join_list(c.config_files) : c.config + " (absent)") : c.cri_file) +
                    ").\nThe policy reads these annotations, which nri-qos will NOT see (their rules and facts are skipped):\n  " +
                    join_list(p.missing_annotations) +
                    "\nFix: nri-qos register --pass-annotations   (adds them after a backup), then restart containerd.");
            }
        }
        return p;
    }
    if (other) {
        p.notes.push_back(describe_native(*other) + ": registering the " +
                          (p.mode == "native" ? "native NRI plugin" : "NRI v0.1 hook (conf.json)"));
        if (p.mode == "v01")
            p.warnings.push_back(other->name + " runs only native NRI (ttrpc) plugins: /etc/nri/conf.json is never read,\n"
                                 "nri-qos is never called. Fix: nri-qos register --native");
        if (!other->nri_enabled || !*other->nri_enabled) {
            std::string how = other->name == "iSulad" ? "set \"nri-support\": true in /etc/isulad/daemon.json"
                                                      : "set enable_nri = true in [crio.nri] (/etc/crio/crio.conf or a crio.conf.d drop-in)";
            p.warnings.push_back(other->name + " native NRI is " + (other->nri_enabled ? "DISABLED" : "NOT ENABLED (switch not set)") +
                                 ": nri-qos will NEVER be called.\nFix: " + how + ", then restart " + other->name +
                                 " (nri-qos does not edit " + other->name + "'s configuration).");
        }
        if (p.mode == "native" && other->plugin_path != kDefaultPluginsDir)
            p.notes.push_back(other->name + " loads plugins from " + other->plugin_path + ": use --plugins-dir " + other->plugin_path);
        return p;
    }
    if (requested != "native") {
        p.warnings.push_back(
            "no container runtime found (no containerd with a known version, no iSulad, no CRI-O):\n"
            "registered NRI v0.1 in /etc/nri/conf.json, which only containerd 1.5/1.6 (or 1.7+ with the v010-adapter) reads.\n"
            "Nothing calls nri-qos until such a runtime runs. Once the runtime is installed, run nri-qos register again\n"
            "(or --containerd-version V / --mode native to say which one this node runs).");
    } else {
        p.warnings.push_back("no container runtime found: the native plugin is started only by containerd >= 1.7 with NRI "
                             "enabled, iSulad or CRI-O with NRI enabled");
    }
    return p;
}

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

namespace {

/// Local time "YYYYmmddTHHMMSS" for backup names.
std::string backup_stamp() {
    char buf[32];
    std::time_t t = std::time(nullptr);
    struct tm tmv {};
    localtime_r(&t, &tmv);
    std::strftime(buf, sizeof buf, "%Y%m%dT%H%M%S", &tmv);
    return buf;
}

/// Annotation keys of the policy at `path` ("" = /etc/nri/nri-qos.toml); the built-in policy's
/// when the file is absent or invalid (`note` then says so).
std::vector<std::string> needed_annotations(const std::string& path, std::string& note) {
    const std::string p = path.empty() ? "/etc/nri/nri-qos.toml" : path;
    struct stat st {};
    if (::stat(p.c_str(), &st) != 0) {
        if (!path.empty()) note = "policy " + p + " not found: checking the annotations of the built-in policy";
        return policy_annotation_keys(builtin_policy());
    }
    try {
        PolicyCheck c = check_policy_text(read_policy_file(p), p);
        if (c.errors() == 0) return policy_annotation_keys(c.policy);
        note = "policy " + p + " has errors (nri-qos check " + p + "): checking the annotations of the built-in policy";
    } catch (const std::exception& e) {
        note = std::string(e.what()) + ": checking the annotations of the built-in policy";
    }
    return policy_annotation_keys(builtin_policy());
}

}  // namespace

void add_register_commands(CLI::App& app) {
    struct Opts {
        std::string conf_json = kDefaultConfJson;
        std::string type = kDefaultType;
        std::string plugin_conf = "{}";
        bool native = false;
        std::string plugins_dir = kDefaultPluginsDir;
        std::string index;
        std::string binary = kDefaultBinary;
        std::string mode = "auto";
        std::string containerd_config, containerd_version;
        bool enable_nri = false, pass_annotations = false;
        std::string policy, isulad_config, crio_config;
        std::string state_dir = "/run/nri-qos";
    };
    // Shared by both subcommands; CLI11 keeps the callbacks alive as long as `app`.
    auto reg = std::make_shared<Opts>();
    auto unreg = std::make_shared<Opts>();
    reg->index = kDefaultIndex;

    auto finish = [](const RegisterResult& r) {
        if (r.ok()) {
            std::cout << r.message << std::endl;
            return;
        }
        std::cerr << r.message << std::endl;
        throw CLI::RuntimeError(r.exit_code);
    };

    CLI::App* r = app.add_subcommand(
        "register", "Enable nri-qos: add it to the NRI v0.1 conf.json, or with --native install "
                    "the native NRI plugin symlink");
    r->add_option("--conf-json", reg->conf_json, "NRI v0.1 config file")->capture_default_str();
    r->add_option("--type", reg->type, "plugin type (binary name) / native plugin name")
        ->capture_default_str();
    CLI::Option* pc = r->add_option("--plugin-conf", reg->plugin_conf,
                                    "JSON object passed as the request's conf (default {}; "
                                    "without it an existing entry keeps its conf)");
    r->add_flag("--native", reg->native, "install <plugins-dir>/<index>-<type> -> <binary> instead");
    r->add_option("--plugins-dir", reg->plugins_dir, "native NRI plugin_path")->capture_default_str();
    r->add_option("--index", reg->index, "native NRI plugin index (two digits)")->capture_default_str();
    r->add_option("--binary", reg->binary, "absolute path of the nri-qos binary (symlink target)")
        ->capture_default_str();
    r->add_option("--mode", reg->mode, "auto (detect the runtime: src/event/detect.hpp), v01 (conf.json) or native")
        ->check(CLI::IsMember({"auto", "v01", "native"}))
        ->capture_default_str();
    r->add_option("--containerd-config", reg->containerd_config, "containerd config.toml to inspect (default: the running containerd's, else /etc/containerd/config.toml)");
    r->add_option("--containerd-version", reg->containerd_version, "containerd version to assume instead of asking `containerd --version`");
    r->add_flag("--enable-nri", reg->enable_nri,
                "enable containerd's native NRI in its config (disable = false, plugin_request_timeout = \"2s\"), after a backup");
    r->add_flag("--pass-annotations", reg->pass_annotations,
                "add the pod annotations the policy reads to containerd 1.6's pod_annotations allow-list, after a backup");
    r->add_option("--policy", reg->policy, "policy whose annotations must reach the hook (default: --plugin-conf's policy, else /etc/nri/nri-qos.toml, else the built-in one)");
    r->add_option("--isulad-config", reg->isulad_config, "iSulad daemon.json to inspect (default /etc/isulad/daemon.json)");
    r->add_option("--state-dir", reg->state_dir,
                  "where the hook keeps its state: the annotations the runtime passes to v0.1 hooks are recorded there (annotation-passlist)")
        ->capture_default_str();
    r->add_option("--crio-config", reg->crio_config, "CRI-O crio.conf to inspect, with its <file>.d/*.conf drop-ins (default /etc/crio/crio.conf)");
    r->callback([reg, pc, finish]() {
        // A bad --plugin-conf is refused whatever the mode turns out to be (before detection).
        nlohmann::ordered_json conf;
        try {
            conf = nlohmann::ordered_json::parse(reg->plugin_conf);
        } catch (const nlohmann::json::parse_error& e) {
            std::string w = e.what();
            auto pos = w.find("] ");
            if (pos != std::string::npos) w = w.substr(pos + 2);
            finish(fail_result("--plugin-conf is not valid JSON (" + w + ")", 2));
            return;
        }
        if (pc->count() > 0) {
            RegisterResult bad = check_plugin_conf(conf);
            if (!bad.ok()) {
                finish(bad);
                return;
            }
        }
        // Which runtime runs here, which mode will it call, what does it drop? Register the mode
        // it calls (auto), warn loudly about everything that keeps nri-qos from being called or
        // from seeing the annotations its policy reads (issues #11 §6, #20 §4, #25 §1).
        RuntimeInfo info = detect_runtime(reg->containerd_config, reg->containerd_version);
        const std::string stamp = backup_stamp();
        if (reg->enable_nri) {
            if (info.version.empty() && !info.config_found)
                return finish(fail_result("--enable-nri: no containerd found (give --containerd-config / --containerd-version)"));
            RegisterResult e = enable_containerd_nri(info, stamp);
            if (!e.ok()) {
                finish(e);
                return;
            }
            std::cerr << e.message << std::endl;
            if (e.changed) info = detect_runtime(reg->containerd_config, reg->containerd_version);
        }
        const NativeRuntimeInfo isulad = detect_isulad(reg->isulad_config);
        const NativeRuntimeInfo crio = detect_crio(reg->crio_config);
        std::string policy_path = reg->policy;
        if (policy_path.empty() && conf.is_object() && conf.contains("policy") && conf["policy"].is_string())
            policy_path = conf["policy"].get<std::string>();
        std::string policy_note;
        const std::vector<std::string> needed = needed_annotations(policy_path, policy_note);
        if (reg->native) reg->mode = "native";
        const bool asked_native = reg->mode == "native";
        RegisterPlan plan = plan_register(info, isulad, crio, reg->mode, needed);
        if (reg->pass_annotations && !plan.missing_annotations.empty()) {
            RegisterResult e = pass_annotations(info, plan.missing_annotations, stamp);
            if (!e.ok()) {
                finish(e);
                return;
            }
            std::cerr << e.message << std::endl;
            info = detect_runtime(reg->containerd_config, reg->containerd_version);
            plan = plan_register(info, isulad, crio, reg->mode, needed);
        } else if (reg->pass_annotations) {
            std::cerr << "nri-qos: --pass-annotations: nothing to add (the runtime passes every annotation the policy reads"
                      << (info.version.empty() || containerd_native_capable(info) ? ", or is not an NRI v0.1 containerd" : "")
                      << ")" << std::endl;
        }
        // What the runtime passes to a v0.1 hook, for the events to say "not passed by
        // containerd" instead of "no ... annotation" (issue #25 §1; detect.hpp).
        if (plan.mode == "v01")
            if (auto pl = annotation_passlist_of(info)) {
                std::string e = record_annotation_passlist(reg->state_dir, *pl);
                if (!e.empty()) std::cerr << "nri-qos: " << e << std::endl;
            }
        if (!policy_note.empty()) std::cerr << "nri-qos: " << policy_note << std::endl;
        for (const auto& n : plan.notes) std::cerr << "nri-qos: " << n << std::endl;
        for (const auto& w : plan.warnings) {
            std::istringstream lines(w);
            std::string line;
            while (std::getline(lines, line)) std::cerr << "nri-qos: WARNING: " << line << std::endl;
        }
        reg->mode = plan.mode;
        if (reg->mode == "native") {
            // The external relay serves the runtime already (the operator switched to it, and a
            // package upgrade's postinst runs `register` again): a launched plugin beside it would
            // be a second 10-nri-qos at the runtime's next start (issue #20 §2: never both).
            const std::string serving = external_relay_serving(reg->state_dir);
            if (!serving.empty()) {
                const std::string link = reg->plugins_dir + "/" + reg->index + "-" + reg->type;
                struct stat lst {};
                const bool have_link = ::lstat(link.c_str(), &lst) == 0;
                const std::string what = "the " + serving + " serves the runtime as an external NRI plugin (" +
                                         reg->state_dir + "/relay.json)";
                if (asked_native) {
                    finish(fail_result(what + ": not installing the launched plugin " + link +
                                       " beside it (the runtime would see two " + reg->index + "-" + reg->type +
                                       "); stop it first: systemctl disable --now nri-qos-relay"));
                    return;
                }
                if (have_link)
                    std::cerr << "nri-qos: WARNING: " << link << " exists as well: the runtime will start it beside "
                              << "the relay service at its next start. Fix: nri-qos unregister --native" << std::endl;
                finish(ok_result(false, "native NRI: " + what + "; no launched plugin installed in " + reg->plugins_dir));
                return;
            }
            finish(enable_native(reg->plugins_dir, reg->index, reg->binary, reg->type));
            return;
        }
        finish(register_v01_ordered(reg->conf_json, reg->type, conf, pc->count() > 0));
    });

    CLI::App* u = app.add_subcommand(
        "unregister", "Disable nri-qos: remove it from the NRI v0.1 conf.json, or with --native "
                      "remove the native NRI plugin symlink(s)");
    u->add_option("--conf-json", unreg->conf_json, "NRI v0.1 config file")->capture_default_str();
    u->add_option("--type", unreg->type, "plugin type / native plugin name")->capture_default_str();
    u->add_flag("--native", unreg->native, "remove <plugins-dir>/NN-<type> symlinks to <binary>");
    u->add_option("--plugins-dir", unreg->plugins_dir, "native NRI plugin_path")->capture_default_str();
    u->add_option("--index", unreg->index, "only this index (default: every NN-<type>)");
    u->add_option("--binary", unreg->binary, "only links to this path are removed")
        ->capture_default_str();
    u->callback([unreg, finish]() {
        if (unreg->native)
            finish(disable_native(unreg->plugins_dir, unreg->index, unreg->binary, unreg->type));
        else
            finish(unregister_v01(unreg->conf_json, unreg->type));
    });
}

}  // namespace nriqos
