// NRI v0.1 registration (issue #23: split out of register.cpp): the plugin entry of nri-qos in
// /etc/nri/conf.json, which containerd 1.5/1.6 (or 1.7+ with the v010-adapter) reads at every pod
// and container event, and containerd 2.x's podsandbox controller at every pod sandbox start and
// stop only (issue #31 §6) — register_v01, register_v01_ordered, unregister_v01, what a conf.json
// will do wrong (conf_json_problems; register.hpp) and the plugin conf check the CLI shares
// (check_plugin_conf).
#include "cli/register_internal.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <exception>
#include <string>
#include <vector>

#include "policy/policy_store.hpp"
#include "os/dir.hpp"

namespace nriqos {

using namespace register_internal;

namespace {

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
    auto shape = [&](const std::string& what) { return path + " is not an NRI v0.1 config: " + what + "; left untouched"; };
    if (!doc.is_object()) return shape("top level is not an object");
    if (doc.contains("version") && !doc["version"].is_string()) return shape("\"version\" is not a string");
    if (doc.contains("plugins")) {
        const ojson& plugins = doc["plugins"];
        if (!plugins.is_array()) return shape("\"plugins\" is not an array");
        for (size_t i = 0; i < plugins.size(); ++i) {
            const ojson& p = plugins[i];
            std::string at = "plugins[" + std::to_string(i) + "]";
            if (!p.is_object()) return shape(at + " is not an object");
            if (!p.contains("type") || !p["type"].is_string()) return shape(at + " has no string \"type\"");
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

RegisterResult register_v01(const std::string& conf_json_path, const std::string& type, const nlohmann::json& plugin_conf, bool replace_conf) {
    ojson conf;
    try {
        conf = ojson::parse(plugin_conf.dump());
    } catch (const std::exception& e) { return fail_result(std::string("invalid plugin conf: ") + e.what(), 2); }
    return register_v01_ordered(conf_json_path, type, conf, replace_conf);
}

namespace register_internal {

RegisterResult check_plugin_conf(const ojson& plugin_conf) {
    if (!plugin_conf.is_object()) return fail_result("plugin conf must be a JSON object, got " + std::string(plugin_conf.type_name()), 2);
    if (std::string e = plugin_conf_error(nlohmann::json::parse(plugin_conf.dump())); !e.empty()) return fail_result("invalid plugin conf: " + e, 2);
    return RegisterResult{};
}

}  // namespace register_internal

RegisterResult register_v01_ordered(const std::string& conf_json_path, const std::string& type, const ojson& plugin_conf, bool replace_conf) {
    try {
        if (!valid_type(type)) return fail_result("invalid plugin type \"" + type + "\" (allowed: letters, digits, '.', '_', '-')", 2);
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
            return ok_result(true,
                             "registered \"" + type + "\" in " + conf_json_path + " (new file; NRI v0.1 reads it at every pod/container event)");
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

        if (doc == before) return ok_result(false, "\"" + type + "\" already registered in " + conf_json_path + " (unchanged)" + warn);
        err = atomic_write(target, json_text(doc), in.st.st_mode & 07777, in.st.st_uid, in.st.st_gid);
        if (!err.empty()) return fail_result(err);
        return ok_result(true, std::string(found ? "updated" : "registered") + " \"" + type + "\" in " + conf_json_path +
                                   " (NRI v0.1 reads it at every pod/container event)" + warn);
    } catch (const std::exception& e) { return fail_result(std::string("register: ") + e.what()); }
}

RegisterResult unregister_v01(const std::string& conf_json_path, const std::string& type) {
    try {
        if (!valid_type(type)) return fail_result("invalid plugin type \"" + type + "\" (allowed: letters, digits, '.', '_', '-')", 2);
        if (conf_json_path.empty()) return fail_result("empty --conf-json path", 2);
        const std::string target = write_target(conf_json_path);
        ReadOutcome in = read_file(target);
        if (!in.error.empty()) return fail_result(in.error);
        if (!in.exists) return ok_result(false, "\"" + type + "\" not registered (" + conf_json_path + " absent or empty)");
        ojson doc;
        std::string err = parse_conf(conf_json_path, in.text, doc);
        if (!err.empty()) return fail_result(err);

        if (!doc.contains("plugins")) return ok_result(false, "\"" + type + "\" not registered in " + conf_json_path);
        ojson kept = ojson::array();
        size_t removed = 0;
        for (const auto& p : doc["plugins"]) {
            if (p["type"].get<std::string>() == type) ++removed;
            else kept.push_back(p);
        }
        if (removed == 0) return ok_result(false, "\"" + type + "\" not registered in " + conf_json_path);

        // Exactly what register_v01 creates from scratch → remove the file.
        const ojson& plugins = doc["plugins"];
        bool ours_only = doc.size() == 2 && doc.begin().key() == "version" && doc["version"] == "0.1" && plugins.size() == 1 &&
                         plugins[0].size() == 2 && plugins[0].begin().key() == "type" && plugins[0].contains("conf");
        if (ours_only) {
            if (::unlink(target.c_str()) != 0) return fail_result("cannot remove " + target + ": " + errno_text(errno));
            int dfd = ::open(dir_of(target).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
            if (dfd >= 0) {
                ::fsync(dfd);
                ::close(dfd);
            }
            return ok_result(true, "unregistered \"" + type + "\": removed " + conf_json_path + " (it listed no other plugin)");
        }
        doc["plugins"] = kept;
        err = atomic_write(target, json_text(doc), in.st.st_mode & 07777, in.st.st_uid, in.st.st_gid);
        if (!err.empty()) return fail_result(err);
        return ok_result(true, "unregistered \"" + type + "\" from " + conf_json_path);
    } catch (const std::exception& e) { return fail_result(std::string("unregister: ") + e.what()); }
}

std::string v01_search_path() {
    const char* p = std::getenv("PATH");
    const std::string path = p && *p ? p : "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
    return path + ":/opt/nri/bin";
}

namespace {

/// exec.LookPath as the v0.1 client meets it: a name with '/' is used as written, else the
/// first directory of `search_path` holding an executable regular file of that name.
bool executable_found(const std::string& name, const std::string& search_path) {
    auto exe = [](const std::string& f) {
        struct stat st {};
        return ::stat(f.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(f.c_str(), X_OK) == 0;
    };
    if (name.find('/') != std::string::npos) return exe(name);
    size_t a = 0;
    while (a <= search_path.size()) {
        size_t b = search_path.find(':', a);
        if (b == std::string::npos) b = search_path.size();
        const std::string dir = b > a ? search_path.substr(a, b - a) : ".";
        if (exe(dir + "/" + name)) return true;
        a = b + 1;
    }
    return false;
}

}  // namespace

bool native_entry_present(const std::string& plugins_dir, const std::string& type) {
    bool found = false;
    list_dir(plugins_dir.c_str(), [&](const DirEntry& e) {
        const std::string n = e.name;
        if (n.size() == type.size() + 3 && std::isdigit(static_cast<unsigned char>(n[0])) && std::isdigit(static_cast<unsigned char>(n[1])) &&
            n[2] == '-' && n.compare(3, std::string::npos, type) == 0)
            found = true;
        return true;
    });
    return found;
}

std::vector<std::string> conf_json_problems(const std::string& conf_json_path, const std::string& type, const RuntimeInfo& c, bool native_serves,
                                            const std::string& search_path) {
    std::vector<std::string> out;
    try {
        const bool known = !c.version.empty();
        // containerd 1.7's CRI plugin has no v0.1 client (only the experimental sbserver has).
        if (known && c.major == 1 && c.minor >= 7 && !c.adapter) return out;
        const std::string who = !known                       ? "containerd 1.5/1.6 and 2.x"
                                : c.major >= 2 && !c.adapter ? "containerd " + c.version + " (at every pod sandbox start)"
                                                             : "containerd " + c.version;
        ReadOutcome in = read_file(conf_json_path);
        if (!in.error.empty()) {
            out.push_back(in.error);
            return out;
        }
        if (!in.exists) return out;
        ojson doc;
        std::string err = parse_conf(conf_json_path, in.text, doc);
        if (!err.empty()) {
            const std::string tail = "; left untouched";
            if (err.size() > tail.size() && err.compare(err.size() - tail.size(), tail.size(), tail) == 0) err.resize(err.size() - tail.size());
            out.push_back(err + ": " + who + " cannot read it and fails every pod start (\"unable to create nri client\")");
            return out;
        }
        bool ours = false;
        if (doc.contains("plugins"))
            for (const auto& p : doc["plugins"]) {
                const std::string t = p["type"].get<std::string>();
                if (t == type) ours = true;
                if (!executable_found(t, search_path))
                    out.push_back(conf_json_path + " lists \"" + t + "\", which is no executable in PATH or /opt/nri/bin: " + who +
                                  " fails every pod start with it (\"nri invoke: plugin: " + t + ": exec: ...\"). Fix: nri-qos unregister --type " +
                                  t + " --conf-json " + conf_json_path + ", or reinstall " + t);
            }
        if (ours && native_serves && known && c.major >= 2 && mode_called(c) == HookMode::Native)
            out.push_back(conf_json_path + " lists \"" + type + "\" beside the native plugin: containerd " + c.version +
                          " still runs it at every pod sandbox start and stop (podsandbox controller), so each sandbox is evaluated twice. "
                          "Fix: nri-qos unregister --conf-json " +
                          conf_json_path);
    } catch (const std::exception& e) { out.push_back(conf_json_path + ": " + e.what()); }
    return out;
}

}  // namespace nriqos
