// Native NRI registration (issue #23: split out of register.cpp): the plugin entry
// <plugin_path>/NN-nri-qos, a symlink to the binary, that containerd >= 1.7, iSulad and CRI-O
// start when NRI starts — enable_native, disable_native — and whether the external relay service
// already serves the runtime (external_relay_serving), all declared in register.hpp.
#include "cli/register_internal.hpp"

#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <climits>
#include <cstdint>
#include <exception>
#include <optional>
#include <string>
#include <vector>

#include "nri/service.hpp"
#include "os/dir.hpp"

namespace nriqos {

using namespace register_internal;

namespace {

bool valid_index(const std::string& idx) {
    return idx.size() == 2 && std::isdigit(static_cast<unsigned char>(idx[0])) && std::isdigit(static_cast<unsigned char>(idx[1]));
}

std::optional<std::string> read_link(const std::string& path) {
    std::vector<char> buf(PATH_MAX + 1);
    ssize_t n = ::readlink(path.c_str(), buf.data(), buf.size() - 1);
    if (n < 0) return std::nullopt;
    return std::string(buf.data(), static_cast<size_t>(n));
}

/// Names `NN-<name>` (two digits) present in `dir`; empty when the directory is missing.
std::vector<std::string> plugin_entries(const std::string& dir, const std::string& name, std::string& error) {
    std::vector<std::string> out;
    int err = list_dir(dir.c_str(), [&](const DirEntry& e) {
        std::string n = e.name;
        if (n.size() == name.size() + 3 && valid_index(n.substr(0, 2)) && n[2] == '-' && n.compare(3, std::string::npos, name) == 0) out.push_back(n);
        return true;
    });
    if (err < 0 && err != -ENOENT) error = "cannot list " + dir + ": " + errno_text(-err);
    return out;
}

}  // namespace

RegisterResult enable_native(const std::string& plugins_dir, const std::string& idx, const std::string& binary_path, const std::string& name) {
    try {
        if (!valid_index(idx)) return fail_result("invalid plugin index \"" + idx + "\" (need two digits, 00-99)", 2);
        if (!valid_type(name)) return fail_result("invalid plugin name \"" + name + "\"", 2);
        if (binary_path.empty() || binary_path[0] != '/') return fail_result("--binary must be an absolute path, got \"" + binary_path + "\"", 2);
        struct stat st {};
        if (::stat(binary_path.c_str(), &st) != 0) return fail_result("cannot use " + binary_path + ": " + errno_text(errno));
        if (!S_ISREG(st.st_mode) || ::access(binary_path.c_str(), X_OK) != 0 || (st.st_mode & 0111) == 0)
            return fail_result(binary_path + " is not an executable regular file");

        std::string err = make_dirs(plugins_dir);
        if (!err.empty()) return fail_result(err);
        const std::string entry = idx + "-" + name;
        const std::string link = plugins_dir + "/" + entry;

        bool changed = false;
        struct stat lst {};
        if (::lstat(link.c_str(), &lst) == 0) {
            if (!S_ISLNK(lst.st_mode)) return fail_result(link + " exists and is not a symlink (remove it first)");
            auto cur = read_link(link);
            if (!cur || *cur != binary_path) {
                std::string tmp = plugins_dir + "/." + entry + ".nri-qos-tmp";
                ::unlink(tmp.c_str());
                if (::symlink(binary_path.c_str(), tmp.c_str()) != 0)
                    return fail_result("cannot create symlink in " + plugins_dir + ": " + errno_text(errno));
                if (::rename(tmp.c_str(), link.c_str()) != 0) {
                    int e = errno;
                    ::unlink(tmp.c_str());
                    return fail_result("cannot replace " + link + ": " + errno_text(e));
                }
                changed = true;
            }
        } else if (errno == ENOENT) {
            if (::symlink(binary_path.c_str(), link.c_str()) != 0) return fail_result("cannot create " + link + ": " + errno_text(errno));
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
        if (!changed) return ok_result(false, "native NRI plugin " + link + " -> " + binary_path + " already in place");
        std::string extra;
        for (const auto& m : moved) extra += (extra.empty() ? "; removed " : ", ") + m;
        return ok_result(true,
                         "enabled native NRI plugin " + link + " -> " + binary_path + extra + " (restart the runtime, e.g. containerd, to load it)");
    } catch (const std::exception& e) { return fail_result(std::string("register --native: ") + e.what()); }
}

RegisterResult disable_native(const std::string& plugins_dir, const std::string& idx, const std::string& binary_path, const std::string& name) {
    try {
        if (!idx.empty() && !valid_index(idx)) return fail_result("invalid plugin index \"" + idx + "\" (need two digits, 00-99)", 2);
        if (!valid_type(name)) return fail_result("invalid plugin name \"" + name + "\"", 2);
        std::vector<std::string> candidates;
        std::string err;
        if (!idx.empty()) {
            struct stat lst {};
            if (::lstat((plugins_dir + "/" + idx + "-" + name).c_str(), &lst) == 0) candidates.push_back(idx + "-" + name);
        } else {
            candidates = plugin_entries(plugins_dir, name, err);
            if (!err.empty()) return fail_result(err);
        }
        std::vector<std::string> removed, kept;
        for (const auto& c : candidates) {
            std::string p = plugins_dir + "/" + c;
            auto target = read_link(p);
            if (target && *target == binary_path) {
                if (::unlink(p.c_str()) != 0) return fail_result("cannot remove " + p + ": " + errno_text(errno));
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
            return fail_result((removed.empty() ? std::string() : "removed " + join(removed) + "; ") + "kept " + join(kept) + ": not a symlink to " +
                               binary_path);
        if (removed.empty()) return ok_result(false, "no native NRI plugin entry for \"" + name + "\" in " + plugins_dir);
        return ok_result(true, "disabled native NRI plugin: removed " + join(removed) + " (restart the runtime to stop the running relay)");
    } catch (const std::exception& e) { return fail_result(std::string("unregister --native: ") + e.what()); }
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
    } catch (...) { return ""; }
}

}  // namespace nriqos
