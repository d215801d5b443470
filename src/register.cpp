// register.cpp — see register.hpp for the contract of every function.
#include "register.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "detect.hpp"
#include "policy_store.hpp"

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
    r->add_option("--mode", reg->mode, "auto (detect the runtime: src/detect.hpp), v01 (conf.json) or native")
        ->check(CLI::IsMember({"auto", "v01", "native"}))
        ->capture_default_str();
    r->add_option("--containerd-config", reg->containerd_config, "containerd config.toml to inspect (default: the running containerd's, else /etc/containerd/config.toml)");
    r->add_option("--containerd-version", reg->containerd_version, "containerd version to assume instead of asking `containerd --version`");
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
        // Which mode will the runtime call? Register that one (auto) and warn when the one
        // registered will never be called (issue #11 §6).
        RuntimeInfo info = detect_runtime(reg->containerd_config, reg->containerd_version);
        HookMode called = mode_called(info);
        if (reg->native) reg->mode = "native";
        if (reg->mode == "auto") {
            reg->mode = called == HookMode::Native ? "native" : "v01";
            std::cerr << "nri-qos: " << describe(info) << ": registering the "
                      << (reg->mode == "native" ? "native NRI plugin" : "NRI v0.1 hook (conf.json)")
                      << (called == HookMode::Unknown ? " (no containerd found: the default)" : "") << std::endl;
        }
        std::string warn = never_called_warning(info, reg->mode == "native" ? HookMode::Native : HookMode::V01);
        if (!warn.empty()) std::cerr << "nri-qos: " << warn << std::endl;
        if (reg->mode == "native") {
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
