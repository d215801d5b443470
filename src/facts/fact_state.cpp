#include "facts/fact_state.hpp"

#include <cerrno>
#include <cstring>
#include <ctime>
#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "os/kernel.hpp"
#include "model/request.hpp"
#include "os/dir.hpp"

using nlohmann::json;

namespace nriqos {

namespace {
constexpr size_t kMaxFileBytes = 4096;
constexpr size_t kMaxEntries = 4096;

int mkdir_p(const std::string& path) {
    if (path.empty()) return -EINVAL;
    for (size_t pos = path.find('/', 1);; pos = path.find('/', pos + 1)) {
        std::string part = path.substr(0, pos);
        if (!part.empty() && mkdir(part.c_str(), 0700) != 0 && errno != EEXIST) return -errno;
        if (pos == std::string::npos) break;
    }
    return 0;
}

bool safe_name(const std::string& s) {
    if (s.empty() || s.size() > 200 || s == "." || s == "..") return false;
    for (unsigned char c : s)
        if (!(isalnum(c) || c == '-' || c == '_' || c == '.')) return false;
    return true;
}
}  // namespace

FactState::FactState(std::string dir) : dir_(std::move(dir) + "/facts") {}

FactState::~FactState() {
    if (lock_fd_ >= 0) close(lock_fd_);  // releases the flock
    if (dir_fd_ >= 0) close(dir_fd_);
}

int FactState::dir_fd(bool create) {
    if (dir_fd_ >= 0) return dir_fd_;
    if (absent_ && !create) return -ENOENT;  // probed once per process: pods without fact state pay one openat
    int fd = open(dir_.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0 && errno == ENOENT && !create) {
        absent_ = true;
        return -ENOENT;
    }
    if (fd < 0 && errno == ENOENT && create) {
        int e = mkdir_p(dir_);
        if (e < 0) return e;
        fd = open(dir_.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
    }
    if (fd < 0) return -errno;
    dir_fd_ = fd;
    return fd;
}

int FactState::sub_fd(const std::string& rel, bool create) {
    int d = dir_fd(create);
    if (d < 0) return d;
    int fd = open_beneath(d, rel, O_PATH | O_DIRECTORY);
    if (fd == -ENOENT && create) {
        // one or two levels ("numa", "ledger/<id>"): create them in order
        size_t slash = rel.find('/');
        if (slash != std::string::npos && mkdirat(d, rel.substr(0, slash).c_str(), 0700) != 0 && errno != EEXIST) return -errno;
        if (mkdirat(d, rel.c_str(), 0700) != 0 && errno != EEXIST) return -errno;
        fd = open_beneath(d, rel, O_PATH | O_DIRECTORY);
    }
    return fd;
}

std::string FactState::lock() {
    if (lock_fd_ >= 0) return "";
    int d = dir_fd(true);
    if (d < 0) return "state dir " + dir_ + ": " + std::strerror(-d);
    int fd = open_beneath(d, "lock", O_RDWR | O_CREAT | O_NOFOLLOW, 0600);
    if (fd < 0) return "state dir " + dir_ + ": lock: " + std::strerror(-fd);
    while (flock(fd, LOCK_EX) != 0) {
        if (errno == EINTR) continue;
        int e = errno;
        close(fd);
        return "state dir " + dir_ + ": flock(lock): " + std::strerror(e);
    }
    lock_fd_ = fd;
    return "";
}

std::string FactState::write_file(int dfd, const std::string& name, const std::string& text) {
    std::string why;
    bool temp_failed;
    if (replace_file(dfd, name, text, 0600, why, temp_failed)) return "";
    return temp_failed ? "state " + dir_ + ": ." + name + ".*.tmp: " + why : "state " + dir_ + ": cannot write " + name + ": " + why;
}

std::optional<std::string> FactState::read_file(int dfd, const std::string& name) { return read_small_beneath(dfd, name, kMaxFileBytes); }

std::vector<std::string> FactState::list(int dfd, const char* suffix) {
    std::vector<std::string> out;
    int fd = openat(dfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return out;
    size_t sl = std::strlen(suffix);
    list_dir(fd, [&](const DirEntry& e) {
        std::string n = e.name;
        if (n.empty() || n[0] == '.') return true;
        if (sl && (n.size() <= sl || n.compare(n.size() - sl, sl, suffix) != 0)) return true;
        out.push_back(n.substr(0, n.size() - sl));
        return out.size() < kMaxEntries;
    });
    return out;
}

namespace {
json record_json(const NumaRecord& r) {
    return {{"container", r.container_id},
            {"sandbox", r.sandbox_id},
            {"pod", r.pod_dir},
            {"cgroup", r.ctr_dir},
            {"mode", r.mode},
            {"node", r.node},
            {"nodes", r.nodes},
            {"cpus", r.cpus},
            {"time", r.time}};
}
std::optional<NumaRecord> record_from(const std::string& text) {
    try {
        json j = parse_json_limited(text, 3);
        NumaRecord r;
        r.container_id = j.at("container").get<std::string>();
        r.sandbox_id = j.at("sandbox").get<std::string>();
        r.pod_dir = j.at("pod").get<std::string>();
        r.ctr_dir = j.value("cgroup", std::string());
        r.mode = j.at("mode").get<std::string>();
        r.node = j.at("node").get<unsigned>();
        r.nodes = j.value("nodes", std::string());
        r.cpus = j.at("cpus").get<std::string>();
        r.time = j.at("time").get<int64_t>();
        if (r.mode != "exclusive" && r.mode != "bound" && r.mode != "shared" && r.mode != "pin" && r.mode != "pin-shared") return std::nullopt;
        return r;
    } catch (...) { return std::nullopt; }
}
}  // namespace

std::vector<NumaRecord> FactState::numa_records(std::vector<std::string>* problems) {
    std::vector<NumaRecord> out;
    int d = sub_fd("numa", false);
    if (d < 0) return out;
    for (const auto& id : list(d, ".json")) {
        auto text = read_file(d, id + ".json");
        auto r = text ? record_from(*text) : std::nullopt;
        if (!r || r->container_id != id) {
            if (problems) problems->push_back("numa/" + id + ".json: unreadable or corrupt record ignored");
            continue;
        }
        out.push_back(std::move(*r));
    }
    close(d);
    return out;
}

std::optional<NumaRecord> FactState::numa_record(const std::string& id) {
    if (!safe_name(id)) return std::nullopt;
    int d = sub_fd("numa", false);
    if (d < 0) return std::nullopt;
    auto text = read_file(d, id + ".json");
    close(d);
    auto r = text ? record_from(*text) : std::nullopt;
    if (r && r->container_id != id) return std::nullopt;
    return r;
}

std::string FactState::put_numa(const NumaRecord& r) {
    if (!safe_name(r.container_id)) return "state: bad container id";
    int d = sub_fd("numa", true);
    if (d < 0) return "state dir " + dir_ + "/numa: " + std::strerror(-d);
    NumaRecord x = r;
    if (!x.time) x.time = static_cast<int64_t>(::time(nullptr));
    std::string e = write_file(d, r.container_id + ".json", record_json(x).dump());
    close(d);
    return e;
}

std::string FactState::drop_numa(const std::string& id) {
    if (!safe_name(id)) return "";
    int d = sub_fd("numa", false);
    if (d < 0) return "";
    std::string out;
    if (unlinkat(d, (id + ".json").c_str(), 0) != 0 && errno != ENOENT) out = "state " + dir_ + ": numa/" + id + ".json: " + std::strerror(errno);
    close(d);
    return out;
}

std::map<std::string, FactState::LedgerEntry> FactState::ledger(const std::string& sandbox) {
    std::map<std::string, LedgerEntry> out;
    if (!safe_name(sandbox)) return out;
    int d = sub_fd("ledger/" + sandbox, false);
    if (d < 0) return out;
    for (const auto& id : list(d, ".json")) {
        auto text = read_file(d, id + ".json");
        if (!text) continue;
        try {
            json j = parse_json_limited(*text, 3);
            LedgerEntry e;
            for (const auto& [k, v] : j.at("kv").items()) e.kv[k] = v.get<int64_t>();
            e.ctr_dir = j.at("cgroup").get<std::string>();
            e.time = j.at("time").get<int64_t>();
            out[id] = std::move(e);
        } catch (...) {
            continue;  // corrupt: ignored (never trusted)
        }
    }
    close(d);
    return out;
}

std::string FactState::put_ledger(const std::string& sandbox, const std::string& id, const std::map<std::string, int64_t>& kv,
                                  const std::string& ctr_dir) {
    if (!safe_name(sandbox) || !safe_name(id)) return "state: bad id";
    int d = sub_fd("ledger/" + sandbox, true);
    if (d < 0) return "state dir " + dir_ + "/ledger: " + std::strerror(-d);
    json j = {{"kv", kv}, {"cgroup", ctr_dir}, {"time", static_cast<int64_t>(::time(nullptr))}};
    std::string e = write_file(d, id + ".json", j.dump());
    close(d);
    return e;
}

std::string FactState::drop_ledger(const std::string& sandbox, const std::string& id) {
    if (!safe_name(sandbox) || !safe_name(id)) return "";
    int d = sub_fd("ledger/" + sandbox, false);
    if (d < 0) return "";
    std::string out;
    if (unlinkat(d, (id + ".json").c_str(), 0) != 0 && errno != ENOENT) out = "state " + dir_ + ": ledger entry: " + std::strerror(errno);
    close(d);
    return out;
}

bool FactState::has_container(const std::string& sandbox, const std::string& id) {
    if (!safe_name(sandbox) || !safe_name(id)) return false;
    bool found = false;
    if (int d = sub_fd("ledger/" + sandbox, false); d >= 0) {
        struct stat st {};
        found = fstatat(d, (id + ".json").c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0;
        close(d);
    }
    if (!found)
        if (int d = sub_fd("numa", false); d >= 0) {
            struct stat st {};
            found = fstatat(d, (id + ".json").c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0;
            close(d);
        }
    return found;
}

bool FactState::has_pod(const std::string& sandbox) {
    if (!safe_name(sandbox)) return false;
    if (int d = sub_fd("ledger/" + sandbox, false); d >= 0) {
        close(d);
        return true;
    }
    for (const auto& r : numa_records())
        if (r.sandbox_id == sandbox) return true;
    return false;
}

std::string FactState::drop_pod(const std::string& sandbox) {
    if (!safe_name(sandbox)) return "";
    std::string out;
    if (int d = sub_fd("ledger/" + sandbox, false); d >= 0) {
        for (const auto& id : list(d, "")) unlinkat(d, id.c_str(), 0);
        close(d);
        if (int l = sub_fd("ledger", false); l >= 0) {
            if (unlinkat(l, sandbox.c_str(), AT_REMOVEDIR) != 0 && errno != ENOENT)
                out = "state " + dir_ + ": ledger/" + sandbox + ": " + std::strerror(errno);
            close(l);
        }
    }
    for (const auto& r : numa_records())
        if (r.sandbox_id == sandbox) drop_numa(r.container_id);
    return out;
}

}  // namespace nriqos
