#include "policy/policy_store.hpp"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "policy/policy_builtin.hpp"
#include "policy/policy_cache.hpp"

namespace nriqos {

namespace pc = policy_cache;

const char* policy_source_name(PolicySource s) {
    switch (s) {
        case PolicySource::File: return "file";
        case PolicySource::LastGood: return "last-good";
        default: return "builtin";
    }
}

std::string PolicyInfo::error_line() const {
    if (error.empty()) return "";
    if (source == PolicySource::LastGood)
        return error + "; applying the last good copy of " + path + " (sha256 " + sha256.substr(0, 12) + ") until it is fixed";
    return error + "; applying the built-in policy until it is fixed";
}

std::string last_good_name(const std::string& path) { return "last-good-" + pc::name_hash(path) + ".toml"; }

std::string last_good_mode_name(const std::string& path) { return "last-good-" + pc::name_hash(path) + ".fail"; }

namespace {

bool owned_private(const struct stat& st) { return st.st_uid == geteuid() && !(st.st_mode & 022); }

/// `dir`/`name` if it is a trusted file (see the file comment): its full name, else "".
std::string trusted_file(const std::string& dir, const std::string& name) {
    struct stat dst {
    }, fst{};
    if (dir.empty() || stat(dir.c_str(), &dst) != 0 || !S_ISDIR(dst.st_mode) || !owned_private(dst)) return "";
    std::string file = dir + "/" + name;
    if (lstat(file.c_str(), &fst) != 0 || !S_ISREG(fst.st_mode) || !owned_private(fst)) return "";
    return file;
}

/// The last good copy of `path`, if there is a trusted one: its full file name, else "".
std::string trusted_copy(const std::string& dir, const std::string& path) { return trusted_file(dir, last_good_name(path)); }

const char* mode_text(bool fail_closed) { return fail_closed ? "closed\n" : "open\n"; }

Policy builtin(const Request* filter, PolicyInfo& info) {
    info.source = PolicySource::Builtin;
    info.sha256 = builtin_policy_sha256();
    info.from_cache = true;
    return builtin_policy(filter);
}

}  // namespace

std::string save_last_good(const std::string& dir, const std::string& path, const std::string& text, std::optional<bool> fail_closed) {
    if (dir.empty()) return "";
    const std::string fail =
        "cannot save the last good copy of " + path + " in " + dir + " (it must be a directory owned by this user, not writable by others)";
    bool same = false;
    if (std::string have = trusted_copy(dir, path); !have.empty()) {
        try {
            same = read_policy_file(have) == text;
        } catch (const InputError&) {}
    }
    if (!same && !pc::store_file(dir, last_good_name(path), text)) return fail;
    if (fail_closed && last_good_fail_closed(dir, path) != fail_closed && !pc::store_file(dir, last_good_mode_name(path), mode_text(*fail_closed)))
        return fail;
    return "";
}

std::optional<bool> last_good_fail_closed(const std::string& dir, const std::string& path) {
    std::string file = trusted_file(dir, last_good_mode_name(path));
    if (file.empty()) return std::nullopt;
    int fd = open(file.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY);
    if (fd < 0) return std::nullopt;
    char buf[16];
    ssize_t n = read(fd, buf, sizeof buf);
    close(fd);
    if (n < 0) return std::nullopt;
    std::string_view v(buf, static_cast<size_t>(n));
    if (v == mode_text(true)) return true;
    if (v == mode_text(false)) return false;
    return std::nullopt;
}

Policy effective_policy(const std::string& path, bool default_path, const PolicyPlaces& where, const Request* filter, PolicyInfo& info) {
    info = PolicyInfo{};
    info.path = path;
    const std::function<void()>* hook = where.before_compile;
    FileLoad f = load_policy_file(path, where.cache_dir, filter, where.write, hook);
    if (f.ok) {
        info.source = PolicySource::File;
        info.sha256 = std::move(f.sha256);
        info.from_cache = f.from_cache;
        // Compiled just now (a cache miss): remember it as the last good copy, whoever compiled it.
        if (!f.from_cache && where.write && !where.last_good_dir.empty() && (!where.cache_dir.empty() || where.save_uncached))
            save_last_good(where.last_good_dir, path, f.text, f.policy.fail_closed);
        return std::move(f.policy);
    }
    if (f.missing && default_path) return builtin(filter, info);  // no policy file: the built-in one, no error
    info.error = f.error;
    if (std::string copy = trusted_copy(where.last_good_dir, path); !copy.empty()) {
        FileLoad g = load_policy_file(copy, where.cache_dir, filter, where.write, hook);
        if (g.ok) {
            info.source = PolicySource::LastGood;
            info.sha256 = std::move(g.sha256);
            info.from_cache = g.from_cache;
            g.policy.source = path;
            return std::move(g.policy);
        }
        // A copy this build rejects (or damaged): the built-in policy, and say so.
        info.error += " (its last good copy is not usable either: " + g.error + ")";
    }
    return builtin(filter, info);
}

std::string plugin_conf_error(const nlohmann::json& conf) {
    if (!conf.is_object()) return std::string("expected a JSON object, got ") + conf.type_name();
    std::string out;
    for (const auto& [k, v] : conf.items()) {
        std::string e;
        if (k == "policy") {
            if (!v.is_string() || v.get_ref<const std::string&>().empty() || v.get_ref<const std::string&>().size() > 4096)
                e = "\"policy\": expected a non-empty path string";
        } else {
            std::string hint = closest_name(k, {"policy"});
            e = "unknown key \"" + k.substr(0, 64) + "\" (" + (hint.empty() ? "" : "did you mean \"" + hint + "\"?; ") + "known: policy)";
        }
        if (e.empty()) continue;  // a valid "policy" next to a bad key adds no separator
        out += (out.empty() ? "" : "; ") + e;
    }
    return out;
}

}  // namespace nriqos
