#include "policy_cache.hpp"

#include <cerrno>
#include <fcntl.h>
#include <functional>
#include <sys/stat.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "kernel.hpp"

using nlohmann::json;

namespace nriqos {

namespace {
constexpr size_t kMaxCacheBytes = 64u << 20;

/// Identity of the policy file and of this build: any change invalidates the cache entry.
json cache_key(const struct stat& st) {
    struct stat self {};
    if (stat("/proc/self/exe", &self) != 0) self = {};
    return json::array({NRI_QOS_VERSION, static_cast<uint64_t>(st.st_dev), static_cast<uint64_t>(st.st_ino),
                        static_cast<int64_t>(st.st_size), static_cast<int64_t>(st.st_mtim.tv_sec), st.st_mtim.tv_nsec,
                        static_cast<int64_t>(st.st_ctim.tv_sec), st.st_ctim.tv_nsec,
                        static_cast<uint64_t>(self.st_ino), static_cast<int64_t>(self.st_mtim.tv_sec), self.st_mtim.tv_nsec,
                        static_cast<int64_t>(self.st_size)});
}

std::string cache_name(const std::string& path) {
    char buf[32];
    snprintf(buf, sizeof buf, "%016zx", std::hash<std::string>{}(path));
    return std::string("policy-") + buf + ".cbor";
}

bool read_all(int fd, std::string& out, size_t max) {
    struct stat st {};
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || static_cast<size_t>(st.st_size) > max) return false;
    out.resize(static_cast<size_t>(st.st_size));
    size_t got = 0;
    while (got < out.size()) {
        ssize_t n = read(fd, &out[got], out.size() - got);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return false;
        got += static_cast<size_t>(n);
    }
    return true;
}

void store(const std::string& dir, const std::string& name, const json& key, const Policy& p) {
    for (size_t pos = dir.find('/', 1);; pos = dir.find('/', pos + 1)) {  // mkdir -p, mode 0700
        std::string part = dir.substr(0, pos);
        if (mkdir(part.c_str(), 0700) != 0 && errno != EEXIST) return;
        if (pos == std::string::npos) break;
    }
    int dfd = open(dir.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0) return;
    struct stat dst {};
    // Root-only directory: refuse to use one that others can write.
    if (fstat(dfd, &dst) != 0 || dst.st_uid != geteuid() || (dst.st_mode & 022)) {
        close(dfd);
        return;
    }
    std::vector<uint8_t> bytes = json::to_cbor(json{{"key", key}, {"policy", policy_to_json(p)}});
    std::string tmp = "." + name + "." + std::to_string(getpid()) + ".tmp";
    int fd = open_beneath(dfd, tmp, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW, 0600);
    if (fd >= 0) {
        bool ok = write(fd, bytes.data(), bytes.size()) == static_cast<ssize_t>(bytes.size());
        ok = close(fd) == 0 && ok;
        if (!ok || renameat(dfd, tmp.c_str(), dfd, name.c_str()) != 0) unlinkat(dfd, tmp.c_str(), 0);
    }
    close(dfd);
}
}  // namespace

Policy load_policy(const std::string& path, const std::string& cache_dir, bool* from_cache) {
    if (from_cache) *from_cache = false;
    if (cache_dir.empty()) return load_policy_toml(path);
    struct stat st {};
    if (stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return load_policy_toml(path);  // it reports the error
    json key = cache_key(st);
    std::string name = cache_name(path);
    int dfd = open(cache_dir.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) {
        int fd = open_beneath(dfd, name, O_RDONLY | O_NONBLOCK);
        close(dfd);
        if (fd >= 0) {
            std::string bytes;
            bool ok = read_all(fd, bytes, kMaxCacheBytes);
            close(fd);
            if (ok) {
                try {
                    json j = json::from_cbor(bytes);
                    if (j.at("key") == key) {
                        Policy p = policy_from_json(j.at("policy"));
                        if (p.source == path) {
                            if (from_cache) *from_cache = true;
                            return p;
                        }
                    }
                } catch (...) {
                    // corrupt, truncated or foreign: rebuild below
                }
            }
        }
    }
    Policy p = load_policy_toml(path);
    store(cache_dir, name, key, p);
    return p;
}

}  // namespace nriqos
