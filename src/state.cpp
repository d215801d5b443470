#include "state.hpp"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "kernel.hpp"
#include "request.hpp"

using nlohmann::json;

namespace nriqos {

namespace {
constexpr size_t kMaxMemoBytes = 256u << 10;

int mkdir_p(const std::string& path) {
    if (path.empty()) return -EINVAL;
    std::string cur;
    size_t pos = 0;
    while (pos != std::string::npos) {
        size_t slash = path.find('/', pos + 1);
        cur = path.substr(0, slash);
        pos = slash;
        if (cur.empty() || cur == "/") continue;
        if (mkdir(cur.c_str(), 0700) != 0 && errno != EEXIST) return -errno;
    }
    return 0;
}

std::string memo_name(const std::string& id) { return id + ".json"; }
}  // namespace

StateDir::StateDir(std::string dir) : dir_(std::move(dir)) {}
StateDir::~StateDir() {
    if (fd_ >= 0) close(fd_);
}

int StateDir::open_dir(bool create) {
    if (fd_ >= 0) return fd_;
    int fd = open(dir_.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0 && errno == ENOENT && create) {
        int e = mkdir_p(dir_);
        if (e < 0) return e;
        fd = open(dir_.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
    }
    if (fd < 0) return -errno;
    fd_ = fd;
    return fd_;
}

std::optional<Memo> StateDir::load(const std::string& id) {
    int dfd = open_dir(false);
    if (dfd < 0) return std::nullopt;
    int fd = open_beneath(dfd, memo_name(id), O_RDONLY | O_NONBLOCK);
    if (fd < 0) return std::nullopt;
    struct stat st {};
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || static_cast<size_t>(st.st_size) > kMaxMemoBytes) {
        close(fd);
        return std::nullopt;
    }
    std::string text(static_cast<size_t>(st.st_size), '\0');
    ssize_t n = read(fd, text.data(), text.size());
    close(fd);
    if (n != st.st_size) return std::nullopt;
    try {
        json j = parse_json_limited(text, 4);
        Memo m;
        m.annotations = j.at("annotations").get<std::map<std::string, std::string>>();
        m.pod_namespace = j.at("namespace").get<std::string>();
        m.pod_name = j.at("name").get<std::string>();
        m.cls = j.at("class").get<std::string>();
        return m;
    } catch (...) {
        return std::nullopt;  // corrupt or foreign: ignore, never trust
    }
}

std::string StateDir::store(const std::string& id, const Memo& m) {
    int dfd = open_dir(true);
    if (dfd < 0) return "state dir " + dir_ + ": " + std::strerror(-dfd);
    json j = {{"annotations", m.annotations}, {"namespace", m.pod_namespace}, {"name", m.pod_name}, {"class", m.cls}};
    std::string text = j.dump();
    if (text.size() > kMaxMemoBytes) {
        j["annotations"] = json::object();  // keep the class, drop what does not fit
        text = j.dump();
    }
    std::string tmp = "." + memo_name(id) + "." + std::to_string(getpid()) + ".tmp";
    int fd = open_beneath(dfd, tmp, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW, 0600);
    if (fd < 0) return "state " + dir_ + "/" + tmp + ": " + std::strerror(-fd);
    bool ok = write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
    ok = close(fd) == 0 && ok;
    // dfd is O_PATH: renameat works on it. Rename is atomic: readers see the old or the new file.
    if (!ok || renameat(dfd, tmp.c_str(), dfd, memo_name(id).c_str()) != 0) {
        std::string e = std::strerror(errno);
        unlinkat(dfd, tmp.c_str(), 0);
        return "state " + dir_ + ": cannot write memo: " + e;
    }
    return "";
}

std::string StateDir::remove(const std::string& id) {
    int dfd = open_dir(false);
    if (dfd < 0) return "";
    if (unlinkat(dfd, memo_name(id).c_str(), 0) != 0 && errno != ENOENT)
        return "state " + dir_ + ": cannot remove memo: " + std::strerror(errno);
    return "";
}

}  // namespace nriqos
