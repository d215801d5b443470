#include "facts/numa.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <ctime>
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "facts/fact_readers.hpp"
#include "os/kernel.hpp"
#include "model/request.hpp"
#include "os/fd.hpp"
#include "os/dir.hpp"

namespace nriqos {

namespace {

constexpr size_t kMaxSysfsFile = 64u << 10;
constexpr unsigned kMaxNodes = 1024;

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
    list_dir(fd, [&](const DirEntry& e) {
        if (e.name[0] == '.') return true;
        if (e.type != DT_DIR && e.type != DT_UNKNOWN) return true;
        if (e.type == DT_UNKNOWN) {
            struct stat st {};
            if (fstatat(e.dir_fd, e.name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISDIR(st.st_mode)) return true;
        }
        out.emplace_back(e.name);
        return out.size() <= room;
    });
    return out;
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
    auto online_text = read_small(root.get(), "devices/system/cpu/online", sys + "devices/system/cpu/online");
    std::optional<CpuSet> online;
    if (online_text) online = parse_list(*online_text, sys + "devices/system/cpu/online");

    std::vector<unsigned> ids;
    if (auto nl = read_small(root.get(), "devices/system/node/online", sys + "devices/system/node/online")) {
        for (unsigned id : parse_list(*nl, sys + "devices/system/node/online").ids()) ids.push_back(id);
    } else {
        for (const auto& n : subdirs(root.get(), "devices/system/node", kMaxNodes)) {
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
        auto text = read_small(root.get(), rel, sys + rel);
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
        if (auto text = read_small(root.get(), rel, sysfs_root + "/" + rel)) s = CpuSet::parse(*text);
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

HeldCpus kubelet_held_cpus(const std::string& path, const std::string& own_pod_uid) {
    HeldCpus h;
    if (path.empty()) return h;
    std::optional<KubeletCpuState> st;
    try {
        st = read_kubelet_cpu_state(path);
    } catch (const InputError& e) { throw InputError(std::string(kKubeletCpusUnknown) + e.what()); }
    if (!st) {
        // No checkpoint. kubelet writes it at start under every CPU manager policy (none too), in
        // its root directory: that directory missing means it is not visible here (a container
        // without the host's /var/lib/kubelet), not that kubelet holds nothing.
        const size_t slash = path.rfind('/');
        const std::string dir = slash == std::string::npos ? std::string(".") : slash == 0 ? std::string("/") : path.substr(0, slash);
        struct stat sb {};
        const int r = stat(dir.c_str(), &sb);
        if (r != 0 || !S_ISDIR(sb.st_mode)) {
            const std::string what = r != 0 && errno != ENOENT ? std::string(": ") + std::strerror(errno) : std::string(" does not exist here");
            throw InputError(std::string(kKubeletCpusUnknown) + path + " cannot be read: kubelet's directory " + dir + what +
                             " (mount the node's kubelet directory read-only; --kubelet-cpu-state \"\" on a node without kubelet)");
        }
        return h;
    }
    for (const auto& [uid, cpus] : st->by_pod) {
        if (!own_pod_uid.empty() && uid == own_pod_uid) continue;  // the pod's own exclusive CPUs
        if (cpus.empty()) continue;
        h.cpus |= cpus;
        if (h.by.size() < 8) h.by.push_back(cpus.str() + " (kubelet static, pod " + (uid.empty() ? std::string("?") : uid.substr(0, 8)) + ")");
    }
    return h;
}

namespace {
/// The lowest-numbered combination of the fewest nodes (at least `min_nodes`) of `free` (each
/// with the CPUs it can give) whose CPUs add up to `need`: Katalyst's calculateHints (masks by
/// size, then node order; the narrowest sufficient mask preferred). `span` keeps only
/// combinations of exactly span.number nodes, or exactly the nodes span.ids (NumaSpan).
std::optional<std::vector<const NumaNode*>> pick_nodes(std::vector<const NumaNode*> free, unsigned need, unsigned min_nodes, const NumaSpan& span) {
    size_t lo = std::max<size_t>(1, min_nodes), hi = free.size();
    if (!span.ids.empty()) {
        std::vector<const NumaNode*> only;
        for (const NumaNode* n : free)
            if (span.ids.has(n->id)) only.push_back(n);
        if (only.size() != span.ids.count()) return std::nullopt;  // a named node is not available
        free = std::move(only);
        lo = std::max(lo, free.size());
        hi = free.size();
    } else if (span.number != 0) {
        lo = std::max<size_t>(lo, span.number);
        hi = std::min<size_t>(hi, span.number);
    }
    const size_t n = free.size();
    unsigned budget = 200000;  // combinations tried at most (nodes are few; this bounds a hostile sysfs)
    for (size_t k = lo; k <= hi; ++k) {
        std::vector<size_t> idx(k);
        for (size_t i = 0; i < k; ++i) idx[i] = i;
        while (true) {
            if (budget-- == 0) return std::nullopt;
            unsigned sum = 0;
            for (size_t i : idx) sum += free[i]->cpus.count();
            if (sum >= need) {
                std::vector<const NumaNode*> out;
                for (size_t i : idx) out.push_back(free[i]);
                return out;
            }
            // next combination in lexicographic order
            size_t i = k;
            while (i > 0 && idx[i - 1] == n - k + (i - 1)) --i;
            if (i == 0) break;
            ++idx[i - 1];
            for (size_t j = i; j < k; ++j) idx[j] = idx[j - 1] + 1;
        }
    }
    return std::nullopt;
}

/// How a NumaSpan reads in explain ("numa_number 2", "numa_ids 1-3").
std::string span_text(const NumaSpan& span) {
    return !span.ids.empty() ? "cpu_enhancement numa_ids " + span.ids.str() : "cpu_enhancement numa_number " + std::to_string(span.number);
}
}  // namespace

namespace {
CpuSet single(unsigned id) {
    CpuSet s;
    s.add(id);
    return s;
}
}  // namespace

CpuSet katalyst_reserved_by_count(const NumaTopology& topo, unsigned count) {
    CpuSet out;
    std::vector<std::vector<unsigned>> free;
    for (const auto& n : topo.nodes) free.push_back(n.cpus.ids());
    std::vector<size_t> next(free.size(), 0);
    unsigned got = 0;
    bool progress = true;
    while (got < count && progress) {
        progress = false;
        for (size_t i = 0; i < free.size() && got < count; ++i) {
            if (next[i] >= free[i].size()) continue;
            out.add(free[i][next[i]++]);
            ++got;
            progress = true;
        }
    }
    return out;
}

std::optional<NumaChoice> choose_numa(const NumaTopology& topo, const CpuSet& held_in, NumaMode mode, unsigned need,
                                      std::optional<unsigned> prefer_in, std::string& why, const CpuSet& reserved, const NumaSpan& span_in) {
    if (need == 0) need = 1;
    NumaSpan span = mode == NumaMode::Shared ? NumaSpan() : span_in;  // shared_cores: Katalyst passes no numa number
    if (!span.ids.empty()) span.number = span.ids.count();
    const bool prefer = prefer_in.has_value() && !span.any();  // the node of the pod's other containers
    const unsigned prefer_id = prefer ? prefer_in.value_or(0) : 0;
    // util.GetNUMANodesCountToFitCPUReq: CPUs per node = ceil(all CPUs / nodes)
    unsigned total = 0;
    for (const auto& n : topo.nodes) total += n.cpus.count();
    const unsigned nodes_n = static_cast<unsigned>(std::max<size_t>(1, topo.nodes.size()));
    const unsigned per = std::max(1u, (total + nodes_n - 1) / nodes_n);
    const unsigned min_nodes = (need + per - 1) / per;
    if (span.any()) {  // AnnotationsGetNUMANumber / AnnotationsGetNUMAIDs: within the machine's nodes
        CpuSet ids;
        for (const auto& n : topo.nodes) ids.add(n.id);
        if (span.number > topo.nodes.size() || !span.ids.subset_of(ids)) {
            why = span_text(span) + " is outside the node's NUMA nodes " + ids.str() + " (Katalyst refuses the pod)";
            return std::nullopt;
        }
    }
    // Bound and shared placements never take a reserved CPU: they are unavailable like held ones.
    const CpuSet held = mode == NumaMode::Exclusive ? held_in : held_in | reserved;
    std::vector<const NumaNode*> order;
    if (prefer)
        for (const auto& n : topo.nodes)
            if (n.id == prefer_id) order.push_back(&n);
    for (const auto& n : topo.nodes)
        if (!prefer || n.id != prefer_id) order.push_back(&n);
    std::string tried;
    auto note = [&](const NumaNode& n, const std::string& s) {
        tried += (tried.empty() ? "" : "; ") + std::string("node") + std::to_string(n.id) + " " + s;
    };
    switch (mode) {
        case NumaMode::Exclusive: {
            if (prefer)  // a later container of the same pod: the pod's nodes
                for (const NumaNode* n : order)
                    if (n->id == prefer_id) {
                        NumaChoice c{n->id, n->cpus - reserved, CpuSet(),
                                     "node" + std::to_string(n->id) + ": the node of the pod's other containers"};
                        c.nodes.add(n->id);
                        return c;
                    }
            // The nodes without held CPUs, each with its CPUs that are not reserved (Katalyst's
            // GetAvailableCPUSet(reservedCPUs)); reserved CPUs alone never disqualify a node.
            std::vector<NumaNode> avail;
            for (const auto& n : topo.nodes) {
                CpuSet busy = n.cpus & held;
                if (!busy.empty()) {
                    note(n, "has held CPUs " + busy.str());
                    continue;
                }
                CpuSet r = n.cpus & reserved;
                if (!r.empty()) note(n, "has reserved CPUs " + r.str() + " (not handed out, not disqualifying)");
                avail.push_back({n.id, n.cpus - reserved});
            }
            std::vector<const NumaNode*> free;
            for (const auto& n : avail) free.push_back(&n);
            if (auto pick = pick_nodes(free, need, min_nodes, span)) {
                NumaChoice c;
                c.node = pick->front()->id;
                for (const NumaNode* n : *pick) {
                    c.cpus |= n->cpus;
                    c.nodes.add(n->id);
                }
                const bool one = pick->size() == 1;
                c.why = std::string(one ? "node" : "nodes ") + c.nodes.str() + " (" + c.cpus.str() + "): " +
                        (span.any() ? "lowest combination of " + std::to_string(span.number) + " node(s) with no held CPU (" + span_text(span) + ")"
                         : one      ? std::string("lowest node with no held CPU")
                                    : std::string("fewest nodes with no held CPU")) +
                        " for " + std::to_string(need) + " CPU(s), at least " + std::to_string(min_nodes) + " node(s) of " + std::to_string(per) +
                        " CPUs" + (tried.empty() ? "" : " (" + tried + ")");
                return c;
            }
            if (span.any())
                tried += std::string(tried.empty() ? "" : "; ") + "no " + span_text(span) + " combination of nodes with no held CPU holds " +
                         std::to_string(need) + " CPU(s)";
            break;
        }
        case NumaMode::Bound:
            if (span.number >= 2) {  // Katalyst: numa_number > 1 lets a non-exclusive placement span nodes
                std::vector<NumaNode> avail;
                for (const auto& n : topo.nodes) avail.push_back({n.id, n.cpus - held});
                std::vector<const NumaNode*> free;
                for (const auto& n : avail) free.push_back(&n);
                if (auto pick = pick_nodes(free, need, min_nodes, span)) {
                    NumaChoice c;
                    c.node = pick->front()->id;
                    CpuSet pool;
                    for (const NumaNode* n : *pick) {
                        pool |= n->cpus;
                        c.nodes.add(n->id);
                    }
                    c.cpus = take_by_cores(topo, pool, need);
                    c.why = "nodes " + c.nodes.str() + ": " + std::to_string(need) + " of their free CPUs " + pool.str() +
                            ", the lowest combination of " + std::to_string(span.number) + " nodes holding them (" + span_text(span) + ")";
                    return c;
                }
                for (const auto& n : avail) note(n, "has " + std::to_string(n.cpus.count()) + " free CPUs");
                tried += "; no " + span_text(span) + " combination holds " + std::to_string(need) + " CPU(s)";
                break;
            }
            if (min_nodes > 1)
                tried += std::string(tried.empty() ? "" : "; ") + std::to_string(need) + " CPUs are more than one node's " + std::to_string(per) +
                         ": a non-exclusive binding spans nodes only with cpu_enhancement numa_number ≥ 2 (Katalyst calculateHints refuses it too)";
            for (const NumaNode* n : order) {
                if (!span.ids.empty() && !span.ids.has(n->id)) continue;
                CpuSet free = n->cpus - held;
                if (free.count() < need) {
                    note(*n, "has " + std::to_string(free.count()) + " free CPUs, " + std::to_string(need) + " needed");
                    continue;
                }
                CpuSet take = take_by_cores(topo, free, need);
                return NumaChoice{n->id, take, single(n->id),
                                  "node" + std::to_string(n->id) + ": " + std::to_string(need) + " of its free CPUs " + free.str() +
                                      (prefer && n->id == prefer_id ? " (the node of the pod's other containers)" : "") +
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
                return NumaChoice{best->id, free, single(best->id),
                                  "node" + std::to_string(best->id) + ": the node with the most free CPUs (" + std::to_string(best_free) + ")"};
            }
            break;
        }
    }
    why = "no NUMA node fits " + std::string(numa_mode_name(mode)) + " placement of " + std::to_string(need) + " CPU(s)" +
          (tried.empty() ? "" : ": " + tried);
    return std::nullopt;
}

namespace {
/// The records of other containers that still stand: a record whose pod cgroup is gone, or whose
/// container cgroup is gone past the grace period, is dropped (unless dry_run) and left out.
std::vector<NumaRecord> live_records(const NumaRequest& rq, FactState& state) {
    std::vector<NumaRecord> out;
    Fd root(open_root(rq.cgroup_root, "cgroup root"));
    const std::string prefix = rq.layout == Layout::V2 ? "" : "cpuset/";
    for (auto& r : state.numa_records()) {
        if (r.container_id == rq.container_id) continue;
        if (!rq.dry_run) {
            auto gone = [&](const std::string& dir) {
                int fd = open_beneath(root.get(), prefix + dir, O_PATH | O_DIRECTORY);
                if (fd >= 0) close(fd);
                return fd == -ENOENT || fd == -ENOTDIR;
            };
            const bool old = static_cast<int64_t>(::time(nullptr)) - r.time > kFactRecordGraceSeconds;
            if (gone(r.pod_dir) || (old && !r.ctr_dir.empty() && gone(r.ctr_dir))) {
                state.drop_numa(r.container_id);  // its pod or its container is gone
                continue;
            }
        }
        out.push_back(std::move(r));
    }
    return out;
}

std::string held_detail(const CpuSet& held, const std::vector<std::string>& by) {
    std::string d = "held CPUs: " + (held.empty() ? std::string("none") : held.str());
    std::string b;
    for (const auto& x : by) b += (b.empty() ? "" : ", ") + x;
    return b.empty() ? d : d + " = " + b;
}
}  // namespace

NumaChoice place_numa(const NumaRequest& rq, FactState& state) {
    if (auto r = state.numa_record(rq.container_id); r && r->pod_dir == rq.pod_dir && r->mode == numa_mode_name(rq.mode)) {
        std::string why;
        auto cpus = CpuSet::parse(r->cpus, &why);
        auto nodes = r->nodes.empty() ? std::optional<CpuSet>(single(r->node)) : CpuSet::parse(r->nodes);
        if (cpus && !cpus->empty() && nodes && !nodes->empty())
            return NumaChoice{
                r->node, *cpus, *nodes,
                "node" + std::string(nodes->count() > 1 ? "s " : "") + nodes->str() + ": recorded at an earlier event of this container"};
    }
    NumaTopology topo = read_topology(rq.sysfs_root);
    if (rq.mode == NumaMode::Bound) read_siblings(rq.sysfs_root, topo);
    HeldCpus h = kubelet_held_cpus(rq.kubelet_cpu_state, rq.pod_uid);
    CpuSet held = h.cpus;
    std::vector<std::string> by = h.by;
    std::optional<unsigned> prefer;
    std::optional<NumaChoice> pod_nodes;  // exclusive: the nodes of the pod's other containers
    for (const auto& r : live_records(rq, state)) {
        auto cpus = CpuSet::parse(r.cpus);
        if (!cpus) continue;
        if (r.sandbox_id == rq.sandbox_id) {
            if (r.mode == numa_mode_name(rq.mode)) prefer = r.node;
            if (rq.mode == NumaMode::Exclusive) {  // the pod shares its nodes
                auto nodes = r.nodes.empty() ? std::optional<CpuSet>(single(r.node)) : CpuSet::parse(r.nodes);
                if (r.mode == "exclusive" && nodes && !nodes->empty() && !cpus->empty() && !pod_nodes)
                    pod_nodes =
                        NumaChoice{r.node, *cpus, *nodes,
                                   "node" + std::string(nodes->count() > 1 ? "s " : "") + nodes->str() + ": the nodes of the pod's other containers"};
                continue;
            }
        }
        if (!r.reserves()) continue;  // locality, or an untrusted pin: not exclusivity
        bool seen = cpus->subset_of(held);
        held |= *cpus;
        if (!seen && by.size() < 16) by.push_back(r.cpus + " (nri-qos " + r.mode + " " + r.container_id.substr(0, 12) + ")");
    }
    std::string why;
    CpuSet reserved;
    if (rq.reserved_cpus) reserved = *rq.reserved_cpus & topo.online;
    else if (rq.reserved_count > 0) reserved = katalyst_reserved_by_count(topo, rq.reserved_count);
    auto c = pod_nodes ? pod_nodes : choose_numa(topo, held, rq.mode, rq.need, prefer, why, reserved, rq.span);
    std::string detail = held_detail(held, by);
    if (!reserved.empty())
        detail +=
            "; Katalyst reserved CPUs " + reserved.str() +
            (rq.reserved_cpus ? " (settings.katalyst_reserved_cpus)"
                              : " (settings.katalyst_reserved_cpus = " + std::to_string(rq.reserved_count) + ", taken as TakeHTByNUMABalance does)");
    if (!c) throw InputError(why + "; " + detail);
    c->why += "; " + detail;
    if (!rq.dry_run) {  // kept by the caller once accepted and written (NumaChoice::record)
        NumaRecord rec;
        rec.container_id = rq.container_id;
        rec.sandbox_id = rq.sandbox_id;
        rec.pod_dir = rq.pod_dir;
        rec.ctr_dir = rq.ctr_dir;
        rec.mode = numa_mode_name(rq.mode);
        rec.node = c->node;
        rec.nodes = c->nodes.str();
        rec.cpus = c->cpus.str();
        c->record = std::move(rec);
    }
    return *c;
}

NumaRecord pin_record(const NumaRequest& rq, const CpuSet& want, bool reserves) {
    NumaRecord rec;
    rec.container_id = rq.container_id;
    rec.sandbox_id = rq.sandbox_id;
    rec.pod_dir = rq.pod_dir;
    rec.ctr_dir = rq.ctr_dir;
    rec.mode = reserves ? "pin" : "pin-shared";
    rec.cpus = want.str();
    return rec;
}

std::string check_pinned_cpuset(const NumaRequest& rq, const CpuSet& want, FactState& state) {
    const std::string w = want.str();
    // online CPUs
    NumaTopology topo = read_topology(rq.sysfs_root);
    if (!want.subset_of(topo.online))
        throw InputError("cpuset " + w + " is not within the node's online CPUs " + topo.online.str() + " (CPUs " + (want - topo.online).str() + ")");
    // the pod cgroup's effective cpuset (the nearest existing ancestor)
    Fd root(open_root(rq.cgroup_root, "cgroup root"));
    const bool v2 = rq.layout == Layout::V2;
    const std::string prefix = v2 ? "" : "cpuset/";
    const char* file = v2 ? "cpuset.cpus.effective" : "cpuset.effective_cpus";
    std::string dir = rq.pod_dir;
    std::optional<CpuSet> eff;
    std::string eff_at;
    while (!dir.empty()) {
        std::string rel = prefix + dir + "/" + file;
        if (auto t = read_small(root.get(), rel, rq.cgroup_root + "/" + rel)) {
            std::string why;
            eff = CpuSet::parse(*t, &why);
            if (!eff) throw InputError(rq.cgroup_root + "/" + rel + ": " + why);
            eff_at = rel;
            break;
        }
        size_t slash = dir.rfind('/');
        dir = slash == std::string::npos ? std::string() : dir.substr(0, slash);
    }
    if (!eff) throw InputError("cannot read " + std::string(file) + " of " + prefix + rq.pod_dir + " or its parents: the cpuset cannot be checked");
    if (!want.subset_of(*eff))
        throw InputError("cpuset " + w + " is not within " + eff_at + " " + (eff->empty() ? std::string("(empty)") : eff->str()) + " (CPUs " +
                         (want - *eff).str() + ")");
    // CPUs held exclusively by other pods
    HeldCpus h = kubelet_held_cpus(rq.kubelet_cpu_state, rq.pod_uid);
    CpuSet held = h.cpus;
    std::vector<std::string> by = h.by;
    for (const auto& r : live_records(rq, state)) {
        if (r.sandbox_id == rq.sandbox_id || !r.reserves()) continue;  // the pod's own; locality or untrusted pins
        auto cpus = CpuSet::parse(r.cpus);
        if (!cpus || !cpus->intersects(want)) continue;
        held |= *cpus;
        if (by.size() < 16) by.push_back(r.cpus + " (nri-qos " + r.mode + " " + r.container_id.substr(0, 12) + ")");
    }
    if (want.intersects(held)) {
        std::string list;
        for (const auto& b : by)
            if (CpuSet::parse(b.substr(0, b.find(' '))) && CpuSet::parse(b.substr(0, b.find(' ')))->intersects(want))
                list += (list.empty() ? "" : ", ") + b;
        throw InputError("cpuset " + w + " overlaps CPUs held exclusively by another pod: " + (want & held).str() + " (" + list + ")");
    }
    return "within the online CPUs " + topo.online.str() + " and " + eff_at + " " + eff->str() + ", no CPU held by another pod (" +
           (held.empty() ? std::string("none held") : "held: " + held.str()) + ")";
}

}  // namespace nriqos
