#include "records/state.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>

#include <nlohmann/json.hpp>

#include "os/kernel.hpp"
#include "model/request.hpp"
#include "os/dir.hpp"

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
    std::optional<std::string> text = read_small_beneath(dfd, memo_name(id), kMaxMemoBytes);
    if (!text) return std::nullopt;
    try {
        json j = parse_json_limited(*text, 4);
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
    // dfd is O_PATH: renameat works on it. Rename is atomic: readers see the old or the new file.
    std::string why;
    bool temp_failed;
    if (replace_file(dfd, memo_name(id), text, 0600, why, temp_failed)) return "";
    return temp_failed ? "state " + dir_ + "/." + memo_name(id) + ".*.tmp: " + why : "state " + dir_ + ": cannot write memo: " + why;
}

std::optional<std::string> StateDir::read_file(const std::string& name, size_t max) {
    int dfd = open_dir(false);
    if (dfd < 0) return std::nullopt;
    return read_small_beneath(dfd, name, max);
}

std::string StateDir::write_file(const std::string& name, const std::string& text) {
    int dfd = open_dir(true);
    if (dfd < 0) return "state dir " + dir_ + ": " + std::strerror(-dfd);
    std::string why;
    bool temp_failed;
    if (replace_file(dfd, name, text, 0600, why, temp_failed)) return "";
    return temp_failed ? "state " + dir_ + ": ." + name + ".*.tmp: " + why : "state " + dir_ + ": cannot write " + name + ": " + why;
}

std::string StateDir::remove(const std::string& id) {
    int dfd = open_dir(false);
    if (dfd < 0) return "";
    if (unlinkat(dfd, memo_name(id).c_str(), 0) != 0 && errno != ENOENT) return "state " + dir_ + ": cannot remove memo: " + std::strerror(errno);
    return "";
}

namespace {
bool safe_id(const std::string& id) {
    if (id.empty() || id.size() > 128 || id[0] == '.') return false;
    for (unsigned char c : id)
        if (!(std::isalnum(c) || c == '_' || c == '.' || c == '-')) return false;
    return true;
}

/// Open (creating when asked, mode 0700) directory `rel` beneath `dfd`; -errno on failure.
int open_subdir(int dfd, const std::string& rel, bool create) {
    int fd = open_beneath(dfd, rel, O_PATH | O_DIRECTORY);
    if (fd == -ENOENT && create) {
        if (mkdirat(dfd, rel.c_str(), 0700) != 0 && errno != EEXIST) return -errno;
        fd = open_beneath(dfd, rel, O_PATH | O_DIRECTORY);
    }
    return fd;
}

/// Names in directory `rel` beneath `dfd` (no "." / ".."), at most `max`, sorted.
std::vector<std::string> sorted_names(int dfd, const std::string& rel, size_t max) {
    std::vector<std::string> out;
    int fd = open_beneath(dfd, rel, O_RDONLY | O_DIRECTORY);
    if (fd < 0) return out;
    list_dir(fd, [&](const DirEntry& e) {
        if (out.size() >= max) return false;
        out.emplace_back(e.name);
        return true;
    });
    std::sort(out.begin(), out.end());
    return out;
}
}  // namespace

std::string StateDir::store_last(const std::string& sandbox_id, const std::string& id, const std::string& text) {
    if (!safe_id(sandbox_id) || !safe_id(id)) return "";  // not ours to name files after
    int dfd = open_dir(true);
    if (dfd < 0) return "state dir " + dir_ + ": " + std::strerror(-dfd);
    int last = open_subdir(dfd, "last", true);
    if (last < 0) return "state " + dir_ + "/last: " + std::strerror(-last);
    int sb = open_subdir(last, sandbox_id, true);
    close(last);
    if (sb < 0) return "state " + dir_ + "/last/" + sandbox_id + ": " + std::strerror(-sb);
    const std::string name = id + ".json";
    std::string why, err;
    bool temp_failed;
    if (!replace_file(sb, name, text, 0600, why, temp_failed))
        err = temp_failed ? "state " + dir_ + "/last: " + why : "state " + dir_ + "/last: cannot write " + name + ": " + why;
    close(sb);
    return err;
}

std::string StateDir::remove_last(const std::string& sandbox_id, const std::string& id) {
    if (!safe_id(sandbox_id) || !safe_id(id)) return "";
    int dfd = open_dir(false);
    if (dfd < 0) return "";
    std::string rel = "last/" + sandbox_id + "/" + id + ".json";
    if (unlinkat(dfd, rel.c_str(), 0) != 0 && errno != ENOENT && errno != ENOTDIR)
        return "state " + dir_ + ": cannot remove " + rel + ": " + std::strerror(errno);
    return "";
}

std::string StateDir::remove_last_sandbox(const std::string& sandbox_id) {
    if (!safe_id(sandbox_id)) return "";
    int dfd = open_dir(false);
    if (dfd < 0) return "";
    std::string rel = "last/" + sandbox_id;
    for (const auto& n : sorted_names(dfd, rel, 1u << 16)) unlinkat(dfd, (rel + "/" + n).c_str(), 0);
    if (unlinkat(dfd, rel.c_str(), AT_REMOVEDIR) != 0 && errno != ENOENT)
        return "state " + dir_ + ": cannot remove " + rel + ": " + std::strerror(errno);
    unlinkat(dfd, "last", AT_REMOVEDIR);  // the last sandbox gone: leave the state dir as it was (ENOTEMPTY otherwise)
    return "";
}

std::vector<StateDir::LastFile> StateDir::list_last_of(const std::string& sandbox_id, size_t max) {
    if (!safe_id(sandbox_id)) return {};
    return list_last_in(max, &sandbox_id);
}

std::vector<StateDir::LastFile> StateDir::list_last(size_t max) { return list_last_in(max, nullptr); }

std::vector<StateDir::LastFile> StateDir::list_last_in(size_t max, const std::string* only) {
    std::vector<LastFile> out;
    int dfd = open_dir(false);
    if (dfd < 0) return out;
    for (const auto& sb : only ? std::vector<std::string>{*only} : sorted_names(dfd, "last", max)) {
        if (!safe_id(sb)) continue;
        for (const auto& f : sorted_names(dfd, "last/" + sb, max)) {
            if (out.size() >= max) return out;
            if (f.size() < 6 || f.compare(f.size() - 5, 5, ".json") != 0 || f[0] == '.') continue;
            int fd = open_beneath(dfd, "last/" + sb + "/" + f, O_RDONLY | O_NONBLOCK);
            if (fd < 0) continue;
            struct stat st {};
            if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && static_cast<size_t>(st.st_size) <= kMaxLastBytes) {
                std::string text(static_cast<size_t>(st.st_size), '\0');
                if (read(fd, text.data(), text.size()) == st.st_size) out.push_back({sb, f.substr(0, f.size() - 5), std::move(text)});
            }
            close(fd);
        }
    }
    return out;
}

}  // namespace nriqos
