#include "numa.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <ctime>
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kernel.hpp"
#include "request.hpp"

namespace nriqos {

namespace {

constexpr size_t kMaxSysfsFile = 64u << 10;
constexpr unsigned kMaxNodes = 1024;
constexpr unsigned kMaxScan = 16384;
constexpr int kMaxDepth = 4;

struct Fd {
    int fd = -1;
    explicit Fd(int f) : fd(f) {}
    ~Fd() {
        if (fd >= 0) close(fd);
    }
    Fd(const Fd&) = delete;
    Fd& operator=(const Fd&) = delete;
};

/// Read a small file beneath `dirfd`; nullopt when absent/unreadable; throws when too large.
std::optional<std::string> read_small(int dirfd, const std::string& rel, const std::string& shown) {
    int fd = open_beneath(dirfd, rel, O_RDONLY | O_NONBLOCK);
    if (fd < 0) return std::nullopt;
    Fd f(fd);
    std::string out;
    char buf[4096];
    while (true) {
        ssize_t n = read(fd, buf, sizeof buf);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) return std::nullopt;
        if (n == 0) break;
        out.append(buf, static_cast<size_t>(n));
        if (out.size() > kMaxSysfsFile) throw InputError(shown + ": larger than 64 KiB");
    }
    return out;
}

CpuSet parse_list(const std::string& text, const std::string& shown) {
    std::string why;
    auto s = CpuSet::parse(text, &why);
    if (!s) throw InputError(shown + ": " + why);
    return *s;
}

int open_root(const std::string& path, const char* what) {
    int fd = open(path.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) throw InputError(std::string(what) + " " + path + ": " + std::strerror(errno));
    return fd;
}

/// Subdirectory names of `rel` beneath `rootfd` (at most `room` of them).
std::vector<std::string> subdirs(int rootfd, const std::string& rel, unsigned room) {
    std::vector<std::string> out;
    int fd = open_beneath(rootfd, rel, O_RDONLY | O_DIRECTORY);
    if (fd < 0) return out;
    DIR* d = fdopendir(fd);
    if (!d) {
        close(fd);
        return out;
    }
    while (struct dirent* e = readdir(d)) {
        if (e->d_name[0] == '.') continue;
        if (e->d_type != DT_DIR && e->d_type != DT_UNKNOWN) continue;
        if (e->d_type == DT_UNKNOWN) {
            struct stat st {};
            if (fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISDIR(st.st_mode)) continue;
        }
        out.emplace_back(e->d_name);
        if (out.size() > room) break;
    }
    closedir(d);
    return out;
}

bool pool_tier(const std::string& rel_below_base) {
    return rel_below_base.find("burstable") != std::string::npos || rel_below_base.find("besteffort") != std::string::npos;
}

}  // namespace

const char* numa_mode_name(NumaMode m) {
    switch (m) {
        case NumaMode::Exclusive: return "exclusive";
        case NumaMode::Bound: return "bound";
        case NumaMode::Shared: return "shared";
    }
    return "?";
}

NumaTopology read_topology(const std::string& sysfs_root) {
    Fd root(open_root(sysfs_root, "sysfs root"));
    NumaTopology t;
    const std::string sys = sysfs_root + "/";
    auto online_text = read_small(root.fd, "devices/system/cpu/online", sys + "devices/system/cpu/online");
    std::optional<CpuSet> online;
    if (online_text) online = parse_list(*online_text, sys + "devices/system/cpu/online");

    std::vector<unsigned> ids;
    if (auto nl = read_small(root.fd, "devices/system/node/online", sys + "devices/system/node/online")) {
        for (unsigned id : parse_list(*nl, sys + "devices/system/node/online").ids()) ids.push_back(id);
    } else {
        for (const auto& n : subdirs(root.fd, "devices/system/node", kMaxNodes)) {
            if (n.size() < 5 || n.compare(0, 4, "node") != 0 || n.find_first_not_of("0123456789", 4) != std::string::npos || n.size() > 8) continue;
            ids.push_back(static_cast<unsigned>(std::stoul(n.substr(4))));
        }
        std::sort(ids.begin(), ids.end());
    }
    if (ids.size() > kMaxNodes) throw InputError(sys + "devices/system/node: more than " + std::to_string(kMaxNodes) + " nodes");
    if (ids.empty()) {
        // No NUMA information (CONFIG_NUMA=n): the machine is one node 0.
        if (!online) throw InputError(sys + "devices/system/cpu/online: missing, and no NUMA nodes");
        t.online = *online;
        t.nodes.push_back({0, *online});
        return t;
    }
    CpuSet all;
    for (unsigned id : ids) {
        std::string rel = "devices/system/node/node" + std::to_string(id) + "/cpulist";
        auto text = read_small(root.fd, rel, sys + rel);
        if (!text) throw InputError(sys + rel + ": cannot read");
        NumaNode n{id, parse_list(*text, sys + rel)};
        all |= n.cpus;
        t.nodes.push_back(std::move(n));
    }
    t.online = online ? *online : all;
    std::vector<NumaNode> kept;
    for (auto& n : t.nodes) {
        n.cpus = n.cpus & t.online;
        if (!n.cpus.empty()) kept.push_back(std::move(n));  // memory-only nodes hold no CPU to place on
    }
    t.nodes = std::move(kept);
    if (t.nodes.empty()) throw InputError(sys + "devices/system/node: no node with an online CPU");
    return t;
}

namespace {
/// Thread siblings of the online CPUs (cpu<N>/topology/thread_siblings_list); unknown → {N}.
void read_siblings(const std::string& sysfs_root, NumaTopology& t) {
    Fd root(open_root(sysfs_root, "sysfs root"));
    auto ids = t.online.ids();
    if (ids.empty()) return;
    t.siblings.assign(ids.back() + 1, CpuSet());
    for (unsigned c : ids) {
        std::string rel = "devices/system/cpu/cpu" + std::to_string(c) + "/topology/thread_siblings_list";
        std::optional<CpuSet> s;
        if (auto text = read_small(root.fd, rel, sysfs_root + "/" + rel)) s = CpuSet::parse(*text);
        CpuSet v = s && s->has(c) ? *s : CpuSet();
        if (v.empty()) v.add(c);
        t.siblings[c] = v;
    }
}

/// `need` CPUs of `free`: whole cores (all their thread siblings free) first, lowest first,
/// then single CPUs (kubelet's and Katalyst's TakeByTopology prefer whole cores too).
CpuSet take_by_cores(const NumaTopology& t, const CpuSet& free, unsigned need) {
    CpuSet out;
    unsigned got = 0;
    if (!t.siblings.empty()) {
        CpuSet seen;
        for (unsigned c : free.ids()) {
            if (got >= need) break;
            if (seen.has(c)) continue;
            const CpuSet& core = c < t.siblings.size() && !t.siblings[c].empty() ? t.siblings[c] : CpuSet();
            if (core.empty()) continue;
            // sysfs siblings lists are symmetric; if they are not, never count a CPU twice
            bool overlaps = core.intersects(seen);
            seen |= core;
            if (!overlaps && core.subset_of(free) && core.count() <= need - got) {
                out |= core;
                got += core.count();
            }
        }
    }
    for (unsigned c : free.ids()) {
        if (got >= need) break;
        if (out.has(c)) continue;
        out.add(c);
        ++got;
    }
    return out;
}
}  // namespace

HeldCpus scan_held_cpus(const std::string& cgroup_root, Layout layout, const std::string& pod_dir, const CpuSet& online) {
    HeldCpus h;
    Fd root(open_root(cgroup_root, "cgroup root"));
    std::string kube = pod_dir.substr(0, pod_dir.find('/'));
    if (kube.empty() || kube == pod_dir) return h;  // the pod is not below a kubepods-like parent
    const std::string prefix = layout == Layout::V2 ? "" : "cpuset/";
    const std::string own = prefix + pod_dir;
    CpuSet cand;
    struct Item {
        std::string rel;
        int depth;
    };
    std::vector<Item> stack{{prefix + kube, 0}};
    while (!stack.empty()) {
        Item it = stack.back();
        stack.pop_back();
        if (it.depth > 0) {
            if (++h.scanned > kMaxScan) throw InputError("more than " + std::to_string(kMaxScan) + " cgroups under " + prefix + kube);
            std::string shown = cgroup_root + "/" + it.rel + "/cpuset.cpus";
            auto text = read_small(root.fd, it.rel + "/cpuset.cpus", shown);
            std::optional<CpuSet> s = text ? CpuSet::parse(*text) : std::nullopt;
            if (s && !s->empty() && s->strict_subset_of(online)) {
                std::string below = it.rel.substr(prefix.size() + kube.size());
                if (pool_tier(below)) {
                    h.pool |= *s;
                } else if (!s->subset_of(cand)) {
                    cand |= *s;
                    if (h.by.size() < 8) h.by.push_back(s->str() + " (" + it.rel.substr(prefix.size()) + ")");
                }
            }
        }
        if (it.depth >= kMaxDepth) continue;
        for (const auto& n : subdirs(root.fd, it.rel, kMaxScan)) {
            std::string rel = it.rel + "/" + n;
            if (rel == own) continue;  // the pod's own cgroups
            stack.push_back({rel, it.depth + 1});
        }
    }
    h.cpus = cand - h.pool;
    return h;
}

std::optional<NumaChoice> choose_numa(const NumaTopology& topo, const CpuSet& held, NumaMode mode, unsigned need,
                                      std::optional<unsigned> prefer, std::string& why) {
    if (need == 0) need = 1;
    std::vector<const NumaNode*> order;
    if (prefer)
        for (const auto& n : topo.nodes)
            if (n.id == *prefer) order.push_back(&n);
    for (const auto& n : topo.nodes)
        if (!prefer || n.id != *prefer) order.push_back(&n);
    std::string tried;
    auto note = [&](const NumaNode& n, const std::string& s) {
        tried += (tried.empty() ? "" : "; ") + std::string("node") + std::to_string(n.id) + " " + s;
    };
    switch (mode) {
        case NumaMode::Exclusive:
            for (const NumaNode* n : order) {
                if (prefer && n->id == *prefer) {
                    return NumaChoice{n->id, n->cpus, "node" + std::to_string(n->id) + ": the node of the pod's other containers"};
                }
                CpuSet busy = n->cpus & held;
                if (!busy.empty()) {
                    note(*n, "has held CPUs " + busy.str());
                    continue;
                }
                if (n->cpus.count() < need) {
                    note(*n, "has " + std::to_string(n->cpus.count()) + " CPUs, " + std::to_string(need) + " needed");
                    continue;
                }
                return NumaChoice{n->id, n->cpus, "node" + std::to_string(n->id) + " (" + n->cpus.str() + "): lowest node with no held CPU" +
                                                      (tried.empty() ? "" : " (" + tried + ")")};
            }
            break;
        case NumaMode::Bound:
            for (const NumaNode* n : order) {
                CpuSet free = n->cpus - held;
                if (free.count() < need) {
                    note(*n, "has " + std::to_string(free.count()) + " free CPUs, " + std::to_string(need) + " needed");
                    continue;
                }
                CpuSet take = take_by_cores(topo, free, need);
                return NumaChoice{n->id, take, "node" + std::to_string(n->id) + ": " + std::to_string(need) + " of its free CPUs " + free.str() +
                                                   (prefer && n->id == *prefer ? " (the node of the pod's other containers)" : "") +
                                                   (tried.empty() ? "" : " (" + tried + ")")};
            }
            break;
        case NumaMode::Shared: {
            const NumaNode* best = nullptr;
            unsigned best_free = 0;
            for (const NumaNode* n : order) {
                unsigned f = (n->cpus - held).count();
                if (f >= need && (!best || f > best_free)) {
                    best = n;
                    best_free = f;
                }
                if (f < need) note(*n, "has " + std::to_string(f) + " free CPUs, " + std::to_string(need) + " needed");
            }
            if (best) {
                CpuSet free = best->cpus - held;
                return NumaChoice{best->id, free, "node" + std::to_string(best->id) + ": the node with the most free CPUs (" + std::to_string(best_free) + ")"};
            }
            break;
        }
    }
    why = "no NUMA node fits " + std::string(numa_mode_name(mode)) + " placement of " + std::to_string(need) + " CPU(s)" +
          (tried.empty() ? "" : ": " + tried);
    return std::nullopt;
}

NumaChoice place_numa(const NumaRequest& rq, FactState& state) {
    if (auto r = state.numa_record(rq.container_id); r && r->pod_dir == rq.pod_dir && r->mode == numa_mode_name(rq.mode)) {
        std::string why;
        auto cpus = CpuSet::parse(r->cpus, &why);
        if (cpus && !cpus->empty()) return NumaChoice{r->node, *cpus, "node" + std::to_string(r->node) + ": recorded at an earlier event of this container"};
    }
    NumaTopology topo = read_topology(rq.sysfs_root);
    if (rq.mode == NumaMode::Bound) read_siblings(rq.sysfs_root, topo);
    HeldCpus h = scan_held_cpus(rq.cgroup_root, rq.layout, rq.pod_dir, topo.online);
    CpuSet held = h.cpus;
    std::optional<unsigned> prefer;
    std::string from_records;
    Fd root(open_root(rq.cgroup_root, "cgroup root"));
    const std::string prefix = rq.layout == Layout::V2 ? "" : "cpuset/";
    for (const auto& r : state.numa_records()) {
        if (r.container_id == rq.container_id) continue;
        if (!rq.dry_run) {
            auto gone = [&](const std::string& dir) {
                int fd = open_beneath(root.fd, prefix + dir, O_PATH | O_DIRECTORY);
                if (fd >= 0) close(fd);
                return fd == -ENOENT || fd == -ENOTDIR;
            };
            const bool old = static_cast<int64_t>(::time(nullptr)) - r.time > kFactRecordGraceSeconds;
            if (gone(r.pod_dir) || (old && !r.ctr_dir.empty() && gone(r.ctr_dir))) {
                state.drop_numa(r.container_id);  // its pod or its container is gone
                continue;
            }
        }
        auto cpus = CpuSet::parse(r.cpus);
        if (!cpus) continue;
        if (r.sandbox_id == rq.sandbox_id) {
            if (r.mode == numa_mode_name(rq.mode)) prefer = r.node;
            if (rq.mode == NumaMode::Exclusive) continue;  // the pod shares its node
        }
        if (r.mode == "shared") continue;
        bool seen = cpus->subset_of(held);  // already visible as a cgroup's cpuset
        held |= *cpus;
        if (!seen && from_records.size() < 200) from_records += (from_records.empty() ? "" : ", ") + r.cpus + " (nri-qos " + r.mode + " " + r.container_id.substr(0, 12) + ")";
    }
    std::string why;
    auto c = choose_numa(topo, held, rq.mode, rq.need, prefer, why);
    std::string held_txt = held.empty() ? "none" : held.str();
    std::string detail = "held CPUs: " + held_txt;
    if (!h.by.empty() || !from_records.empty()) {
        std::string by;
        for (const auto& b : h.by) by += (by.empty() ? "" : ", ") + b;
        if (!from_records.empty()) by += (by.empty() ? "" : ", ") + from_records;
        detail += " = " + by;
    }
    if (!h.pool.empty()) detail += "; shared pool " + h.pool.str() + " not held";
    if (!c) throw InputError(why + "; " + detail);
    c->why += "; " + detail;
    if (!rq.dry_run) {
        NumaRecord rec;
        rec.container_id = rq.container_id;
        rec.sandbox_id = rq.sandbox_id;
        rec.pod_dir = rq.pod_dir;
        rec.ctr_dir = rq.ctr_dir;
        rec.mode = numa_mode_name(rq.mode);
        rec.node = c->node;
        rec.cpus = c->cpus.str();
        std::string e = state.put_numa(rec);
        if (!e.empty()) throw InputError("cannot record the NUMA placement: " + e);
    }
    return *c;
}

}  // namespace nriqos
