#include "event/resctrl.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <dirent.h>
#include <fcntl.h>
#include <map>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include "os/kernel.hpp"
#include "records/record.hpp"
#include "os/fd.hpp"
#include "os/dir.hpp"

namespace nriqos {

namespace {

constexpr const char* kCreatedFile = "resctrl-groups";  ///< in the state dir: one group name a line
constexpr long kResctrlMagic = 0x7655821;  ///< RDTGROUP_SUPER_MAGIC (include/uapi/linux/magic.h)
constexpr int kLockWaitMs = 500;

/// An fd of a directory (O_RDONLY: flock needs a real open file), or -errno.
int open_dir(const std::string& path) {
    int fd = open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    return fd >= 0 ? fd : -errno;
}

std::optional<std::string> read_rel(int dirfd, const std::string& rel) {
    int fd = open_beneath(dirfd, rel, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) return std::nullopt;
    std::string out;
    char buf[4096];
    for (;;) {
        ssize_t n = read(fd, buf, sizeof buf);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0 || out.size() > 65536) break;
        out.append(buf, static_cast<size_t>(n));
    }
    close(fd);
    return out;
}

std::string trim(std::string s) {
    while (!s.empty() && (s.back() == '\n' || s.back() == ' ' || s.back() == '\t')) s.pop_back();
    size_t a = 0;
    while (a < s.size() && (s[a] == ' ' || s[a] == '\t')) ++a;
    return s.substr(a);
}

std::optional<long long> read_num(int dirfd, const std::string& rel, int base = 10) {
    auto t = read_rel(dirfd, rel);
    if (!t) return std::nullopt;
    std::string s = trim(*t);
    if (s.empty()) return std::nullopt;
    char* end = nullptr;
    errno = 0;
    long long v = std::strtoll(s.c_str(), &end, base);
    if (errno || *end) return std::nullopt;
    return v;
}

/// The ids of resource `prefix`'s line in a schemata text ("L3:0=fff;1=fff" → {"0", "1"}), and
/// the value of its first entry.
std::vector<std::string> line_ids(const std::string& schemata, const std::string& prefix, std::string* first_value = nullptr) {
    std::vector<std::string> ids;
    size_t at = 0;
    while (at < schemata.size()) {
        size_t nl = schemata.find('\n', at);
        std::string l = trim(schemata.substr(at, nl == std::string::npos ? std::string::npos : nl - at));
        at = nl == std::string::npos ? schemata.size() : nl + 1;
        if (l.compare(0, prefix.size() + 1, prefix + ":") != 0) continue;
        std::string rest = l.substr(prefix.size() + 1);
        size_t p = 0;
        while (p <= rest.size()) {
            size_t semi = rest.find(';', p);
            std::string e = trim(rest.substr(p, semi == std::string::npos ? std::string::npos : semi - p));
            p = semi == std::string::npos ? rest.size() + 1 : semi + 1;
            size_t eq = e.find('=');
            if (eq == std::string::npos) continue;
            if (ids.empty() && first_value) *first_value = trim(e.substr(eq + 1));
            ids.push_back(trim(e.substr(0, eq)));
        }
        break;
    }
    return ids;
}

std::string join_line(const std::string& prefix, const std::vector<std::string>& ids, const std::string& value) {
    std::string l = prefix + ":";
    for (size_t i = 0; i < ids.size(); ++i) l += (i ? ";" : "") + ids[i] + "=" + value;
    return l;
}

std::string hex(unsigned long long v) {
    char b[32];
    snprintf(b, sizeof b, "%llx", v);
    return b;
}

std::set<std::string> read_created(int statefd) {
    std::set<std::string> out;
    if (statefd < 0) return out;
    auto t = read_small_beneath(statefd, kCreatedFile, 64 * 1024);
    if (!t) return out;
    size_t at = 0;
    while (at < t->size()) {
        size_t nl = t->find('\n', at);
        std::string n = t->substr(at, nl == std::string::npos ? std::string::npos : nl - at);
        at = nl == std::string::npos ? t->size() : nl + 1;
        if (resctrl_group_name_error(n).empty()) out.insert(n);
    }
    return out;
}

std::string write_created(int statefd, const std::set<std::string>& names) {
    std::string text;
    for (const auto& n : names) text += n + "\n";
    std::string why;
    bool temp_failed = false;
    if (replace_file(statefd, kCreatedFile, text, 0600, why, temp_failed)) return "";
    return "cannot record the groups nri-qos made in the state dir (" + why + ")";
}

/// The state dir's fd (created 0700 when missing), or -errno.
int open_state(const std::string& state_dir, bool create) {
    if (create) make_dirs(state_dir, 0700);
    return open_dir(state_dir);
}

bool is_resctrl_fs(int fd) {
    struct statfs s {};
    return fstatfs(fd, &s) == 0 && static_cast<long>(s.f_type) == kResctrlMagic;
}

/// Entries of the mount's root that are groups (directories other than the kernel's own).
std::vector<std::string> list_groups(const std::string& root) {
    std::vector<std::string> out;
    list_dir(root.c_str(), [&](const DirEntry& e) {
        std::string n = e.name;
        if (n == "info" || n == "mon_groups" || n == "mon_data") return true;
        if (e.type == DT_DIR) out.push_back(n);
        return true;
    });
    return out;
}

/// Write `text` to `rel` beneath `dirfd` in one write(2); `create` for a scratch tree only.
std::string write_rel(int dirfd, const std::string& rel, const std::string& text, bool create) {
    int fd = open_beneath(dirfd, rel, O_WRONLY | O_CLOEXEC | (create ? O_CREAT | O_TRUNC : 0), 0644);
    if (fd < 0) return rel + ": " + std::strerror(-fd);
    ssize_t n = write(fd, text.data(), text.size());
    int e = errno;
    close(fd);
    if (n != static_cast<ssize_t>(text.size())) return rel + ": " + (n < 0 ? std::strerror(e) : "short write");
    return "";
}

/// True when every entry of `want`'s lines is in `have` with the same value. The kernel prints
/// a group's masks zero-padded to the cbm width ("0003f") and pads lines with spaces, so entries
/// are compared as numbers (hex for caches, decimal for MB); the group's other resources stay.
bool schemata_holds(const std::string& have, const std::string& want) {
    auto entries = [](const std::string& t) {
        std::map<std::string, unsigned long long> m;  // "L3:0" -> value
        size_t at = 0;
        while (at < t.size()) {
            size_t nl = t.find('\n', at);
            std::string l = trim(t.substr(at, nl == std::string::npos ? std::string::npos : nl - at));
            at = nl == std::string::npos ? t.size() : nl + 1;
            l.erase(std::remove(l.begin(), l.end(), ' '), l.end());
            size_t colon = l.find(':');
            if (colon == std::string::npos) continue;
            const std::string res = l.substr(0, colon);
            const int base = res == "MB" ? 10 : 16;
            std::string rest = l.substr(colon + 1);
            size_t p = 0;
            while (p <= rest.size()) {
                size_t semi = rest.find(';', p);
                std::string e = rest.substr(p, semi == std::string::npos ? std::string::npos : semi - p);
                p = semi == std::string::npos ? rest.size() + 1 : semi + 1;
                size_t eq = e.find('=');
                if (eq == std::string::npos) continue;
                m[res + ":" + e.substr(0, eq)] = std::strtoull(e.c_str() + eq + 1, nullptr, base);
            }
        }
        return m;
    };
    auto h = entries(have);
    for (const auto& [k, v] : entries(want)) {
        auto it = h.find(k);
        if (it == h.end() || it->second != v) return false;
    }
    return true;
}

}  // namespace

std::string resctrl_schemata(const ResctrlGroupDef& g, const std::string& root, std::string& why, std::vector<std::string>* notes) {
    Fd r(open_dir(root));
    if (r.get() < 0) {
        why = "resctrl is not mounted at " + root + " (" + std::strerror(-r.get()) + ")";
        return "";
    }
    auto base = read_rel(r.get(), "schemata");
    if (!base) {
        why = "resctrl is not mounted at " + root + " (no schemata file)";
        return "";
    }
    std::string out;
    if (!g.l3.empty()) out += g.l3 + "\n";
    if (g.l3_percent > 0) {
        auto mask_text = read_rel(r.get(), "info/L3/cbm_mask");
        if (!mask_text) {
            why = "no L3 cache allocation on this node (info/L3/cbm_mask missing; CDP mounts have L3CODE/L3DATA: give l3 lines)";
            return "";
        }
        char* end = nullptr;
        std::string mt = trim(*mask_text);
        unsigned long long cbm = std::strtoull(mt.c_str(), &end, 16);
        if (mt.empty() || *end || cbm == 0 || (cbm & (cbm + 1)) != 0) {
            why = "info/L3/cbm_mask \"" + mt.substr(0, 32) + "\" is not a contiguous mask from bit 0";
            return "";
        }
        int ways = 64 - __builtin_clzll(cbm);
        long long min_bits = read_num(r.get(), "info/L3/min_cbm_bits").value_or(1);
        int start, stop;
        std::string rule;
        if (g.l3_round_down) {
            // rubik pkg/services/dyncache/dyncache_init.go calcLimitedCacheValue: floor, at least 1.
            start = 0;
            stop = std::max(1, ways * g.l3_percent / 100);
            rule = "floor";
        } else {
            // koordlet pkg/koordlet/util/system/resctrl.go CalculateCatL3MaskValue: ways
            // [ceil(ways × start%), ceil(ways × end%)).
            start = (ways * g.l3_start_percent + 99) / 100;
            stop = (ways * g.l3_percent + 99) / 100;
            rule = "ceil";
        }
        std::string widened;
        if (stop - start < min_bits) {
            // Documentation/arch/x86/resctrl.rst "min_cbm_bits": fewer set bits are refused.
            stop = std::min(ways, start + static_cast<int>(min_bits));
            start = stop - static_cast<int>(min_bits);
            widened = ", widened to min_cbm_bits " + std::to_string(min_bits);
        }
        if (start < 0 || stop <= start) {
            why = "L3 " + std::to_string(g.l3_percent) + "% leaves no cache way";
            return "";
        }
        unsigned long long m = (stop >= 64 ? ~0ULL : ((1ULL << stop) - 1)) & ~((1ULL << start) - 1);
        auto ids = line_ids(*base, "L3");
        if (ids.empty()) {
            why = "the default group's schemata has no L3 line";
            return "";
        }
        out += join_line("L3", ids, hex(m)) + "\n";
        if (notes)
            notes->push_back("L3 " + (g.l3_start_percent ? std::to_string(g.l3_start_percent) + "-" : std::string()) + std::to_string(g.l3_percent) +
                             "% of " + std::to_string(ways) + " ways (cbm_mask " + mt + ", " + rule + ") = ways " + std::to_string(start) + "-" +
                             std::to_string(stop - 1) + widened + ": " + hex(m) + " on cache ids " + std::to_string(ids.size()));
    }
    if (!g.mb.empty()) out += g.mb + "\n";
    if (g.mb_percent > 0) {
        auto gran = read_num(r.get(), "info/MB/bandwidth_gran");
        if (!gran) {
            why = "no memory bandwidth allocation on this node (info/MB/bandwidth_gran missing)";
            return "";
        }
        long long minbw = read_num(r.get(), "info/MB/min_bandwidth").value_or(*gran);
        std::string first;
        auto ids = line_ids(*base, "MB", &first);
        if (ids.empty()) {
            why = "the default group's schemata has no MB line";
            return "";
        }
        if (std::strtoll(first.c_str(), nullptr, 10) > 100) {
            // AMD (and the mba_MBps mount option) take bandwidth, not a percentage.
            why = "MB values here are not percentages (the default group has MB " + first + "): give mb as a raw line";
            return "";
        }
        long long g10 = std::max(1LL, *gran);
        long long v = (g.mb_percent + g10 - 1) / g10 * g10;
        v = std::min(100LL, std::max(v, minbw));
        out += join_line("MB", ids, std::to_string(v)) + "\n";
        if (notes)
            notes->push_back("MB " + std::to_string(g.mb_percent) + "% → " + std::to_string(v) + " (bandwidth_gran " + std::to_string(*gran) +
                             ", min_bandwidth " + std::to_string(minbw) + ") on " + std::to_string(ids.size()) + " domains");
    }
    return out;
}

std::set<std::string> created_resctrl_groups(const std::string& state_dir) {
    Fd s(open_state(state_dir, false));
    return read_created(s.get());
}

namespace {

GroupOutcome group_fail(const ResctrlGroupDef& g, GroupOutcome::Status st, const std::string& why) {
    GroupOutcome o;
    o.status = st;
    o.note = "resctrl group " + g.name + ": " + why;
    return o;
}

/// The mount at `root` opened into `r` (once) and, unless `dry_run`, locked (once): nullopt when
/// ready, else the outcome of every group on it (not mounted: Skipped; lock not had: Failed).
std::optional<GroupOutcome> open_mount(const ResctrlGroupDef& g, const std::string& root, bool dry_run, int& r, bool& locked) {
    if (r < 0) {
        r = open_dir(root);
        if (r >= 0 && !read_rel(r, "schemata")) {
            close(r);
            r = -ENOENT;
        }
    }
    if (r < 0) return group_fail(g, GroupOutcome::Skipped, "resctrl is not mounted at " + root + " (no schemata file)");
    if (!dry_run && !locked) {
        if (!lock_within(r, kLockWaitMs)) return group_fail(g, GroupOutcome::Failed, "resctrl mount locked by another process (flock) for 500 ms");
        locked = true;
    }
    return std::nullopt;
}

/// ensure_resctrl_group on the mount open as `rfd` (its lock held unless `dry_run`).
GroupOutcome ensure_on(const ResctrlGroupDef& g, int rfd, const std::string& root, const std::string& state_dir, bool dry_run) {
    GroupOutcome o;
    auto fail = [&](GroupOutcome::Status st, const std::string& why) { return o = group_fail(g, st, why); };
    std::vector<std::string> notes;
    std::string why;
    std::string want = resctrl_schemata(g, root, why, &notes);
    if (want.empty()) return fail(GroupOutcome::Failed, why);
    std::string how;
    for (const auto& n : notes) how += "; " + n;
    Fd st(dry_run ? open_state(state_dir, false) : open_state(state_dir, true));
    std::set<std::string> created = read_created(st.get());
    struct stat sb {};
    const bool exists = fstatat(rfd, g.name.c_str(), &sb, AT_SYMLINK_NOFOLLOW) == 0;
    if (exists && !S_ISDIR(sb.st_mode)) return fail(GroupOutcome::Failed, root + "/" + g.name + " is not a directory");
    if (exists) {
        const bool ours = created.count(g.name) != 0;
        if (!ours && !g.manage) {
            o.note = "resctrl group " + g.name + " exists, not made by nri-qos: joined as it is (manage = true to set its schemata)";
            return o;
        }
        auto have = read_rel(rfd, g.name + "/schemata");
        if (have && schemata_holds(*have, want)) {
            o.note = "resctrl group " + g.name + " in force (" + (ours ? "made by nri-qos" : "managed") + ")";
            return o;
        }
        if (dry_run) {
            o.note = "resctrl group " + g.name + ": schemata would be rewritten" + how;
            return o;
        }
        std::string e = write_rel(rfd, g.name + "/schemata", want, !is_resctrl_fs(rfd));
        if (!e.empty()) return fail(GroupOutcome::Failed, "schemata not written: " + e);
        o.note = "resctrl group " + g.name + ": schemata rewritten" + how;
        return o;
    }
    // Missing: a free CLOSID first (the default group holds one).
    long long closids = -1;
    for (const char* res : {"L3", "MB", "L2", "L3CODE", "SMBA"})
        if (auto n = read_num(rfd, std::string("info/") + res + "/num_closids")) closids = closids < 0 ? *n : std::min(closids, *n);
    const size_t used = list_groups(root).size() + 1;
    if (closids > 0 && used >= static_cast<size_t>(closids))
        return fail(GroupOutcome::Failed, "no free CLOSID (" + std::to_string(used) + " groups incl. the default use all num_closids " +
                                              std::to_string(closids) + "): not created");
    if (dry_run) {
        o.note = "resctrl group " + g.name + " would be created" + how;
        return o;
    }
    if (st.get() < 0) return fail(GroupOutcome::Failed, "state dir " + state_dir + ": " + std::strerror(-st.get()) + ": not created");
    created.insert(g.name);
    if (std::string e = write_created(st.get(), created); !e.empty()) return fail(GroupOutcome::Failed, e + ": not created");
    auto forget = [&] {
        created.erase(g.name);
        write_created(st.get(), created);
    };
    if (mkdirat(rfd, g.name.c_str(), 0755) != 0) {
        int e = errno;
        forget();
        if (e == ENOSPC) return fail(GroupOutcome::Failed, "no free CLOSID (mkdir: " + std::string(std::strerror(e)) + "): not created");
        return fail(GroupOutcome::Failed, "mkdir " + root + "/" + g.name + ": " + std::strerror(e));
    }
    const bool scratch = !is_resctrl_fs(rfd);
    std::string e = scratch ? write_rel(rfd, g.name + "/tasks", "", true) : "";
    if (e.empty()) e = write_rel(rfd, g.name + "/schemata", want, scratch);
    if (!e.empty()) {
        // Never half made: the group goes again (it has no tasks yet).
        if (scratch) {
            unlinkat(rfd, (g.name + "/schemata").c_str(), 0);
            unlinkat(rfd, (g.name + "/tasks").c_str(), 0);
        }
        unlinkat(rfd, g.name.c_str(), AT_REMOVEDIR);
        forget();
        return fail(GroupOutcome::Failed, "schemata not written (" + e + "): group removed again");
    }
    o.note = "resctrl group " + g.name + " created" + how;
    return o;
}

}  // namespace

void ResctrlLock::unlock() {
    close(fd_);  // the only fd of its open file description: the flock(2) ends with it
    fd_ = -1;
}

GroupOutcome ensure_resctrl_group(const ResctrlGroupDef& g, const std::string& root, const std::string& state_dir, bool dry_run) {
    int rfd = -1;
    bool locked = false;
    std::optional<GroupOutcome> bad = open_mount(g, root, dry_run, rfd, locked);
    Fd r(rfd);
    if (bad) return *bad;
    return ensure_on(g, r.get(), root, state_dir, dry_run);
}

ResctrlLock ensure_plan_groups(Plan& plan, const Policy& policy, const std::string& root, const std::string& state_dir, bool dry_run) {
    if (policy.resctrl_groups.empty()) return ResctrlLock();
    std::map<std::string, GroupOutcome> done;
    // One open of the mount and one lock for all the plan's groups (a second open file
    // description of the same directory would wait for our own flock).
    int rfd = -1;
    bool locked = false, joins = false;
    auto ensure = [&](const std::string& name) -> const GroupOutcome* {
        auto d = policy.resctrl_groups.find(name);
        if (d == policy.resctrl_groups.end()) return nullptr;  // joined as today: the group must exist
        auto it = done.find(name);
        if (it == done.end()) {
            std::optional<GroupOutcome> bad = open_mount(d->second, root, dry_run, rfd, locked);
            it = done.emplace(name, bad ? *bad : ensure_on(d->second, rfd, root, state_dir, dry_run)).first;
        }
        return &it->second;
    };
    for (auto& w : plan.writes) {
        if (w.id != KnobId::ResctrlGroup || w.status != Write::Planned) continue;
        const GroupOutcome* o = ensure(w.rel.substr(0, w.rel.find('/')));
        if (!o) continue;
        if (o->status == GroupOutcome::Ready) {
            w.note = o->note + (w.note.empty() ? "" : "; " + w.note);
            joins = true;
        } else {
            w.status = o->status == GroupOutcome::Skipped ? Write::Skipped : Write::Failed;
            w.reason = o->note;
        }
    }
    static const nlohmann::json::json_pointer kRdt("/linux/resources/rdt_class");
    if (plan.adjustment.is_object() && plan.adjustment.contains(kRdt)) {
        const nlohmann::json& v = plan.adjustment.at(kRdt);
        std::string name = v.is_object() && v.contains("value") && v["value"].is_string() ? v["value"].get<std::string>() : "";
        const GroupOutcome* o = ensure(name);
        if (o && o->status != GroupOutcome::Ready) {
            plan.adjustment["linux"]["resources"].erase("rdt_class");
            if (plan.adjustment["linux"]["resources"].empty()) plan.adjustment["linux"].erase("resources");
            if (plan.adjustment["linux"].empty()) plan.adjustment.erase("linux");
            (o->status == GroupOutcome::Skipped ? plan.skipped : plan.refused).push_back("resctrl_group: " + o->note);
        }
    }
    // A tasks write joins a group made ready here: the lock goes to the caller, who holds it
    // through that write (no cleanup can remove the group in between); else it ends here.
    if (locked && joins) return ResctrlLock(rfd);
    if (rfd >= 0) close(rfd);
    return ResctrlLock();
}

std::set<std::string> resctrl_groups_in_use(const Policy& policy) {
    std::set<std::string> out;
    for (const auto& [n, c] : policy.classes)
        if (c.knobs_pending())  // lists not decoded: every declared group counts as used
            for (const auto& [g, d] : policy.resctrl_groups) out.insert(g);
    for (const auto& [n, c] : policy.classes)
        for (const auto& k : c.container) {
            if (k.id != KnobId::ResctrlGroup) continue;
            if (k.value.kind == KnobValue::Text) out.insert(k.value.text);
            else if (k.value.kind == KnobValue::Fact && k.value.text == "rubik.cache_limit")
                for (const char* l : {"rubik_max", "rubik_high", "rubik_middle", "rubik_low", "rubik_dynamic"}) out.insert(l);
        }
    return out;
}

int cleanup_resctrl_groups(const std::set<std::string>& in_use, const std::string& root, const std::string& state_dir, bool dry_run, std::string& out,
                           const std::function<bool()>& still_current) {
    Fd st(open_state(state_dir, false));
    std::set<std::string> created = read_created(st.get());
    if (created.empty()) return 0;
    Fd r(open_dir(root));
    int failures = 0;
    if (!dry_run && r.get() >= 0 && !lock_within(r.get(), kLockWaitMs)) {
        out += "failed   resctrl: mount locked by another process (flock); groups not cleaned up\n";
        return 1;
    }
    if (!dry_run && still_current && !still_current()) {
        out += "kept     resctrl groups: a policy changed during this pass; none removed (the next pass decides)\n";
        return 0;
    }
    std::set<std::string> keep = created;
    for (const auto& n : created) {
        if (in_use.count(n)) continue;
        struct stat sb {};
        if (r.get() < 0 || fstatat(r.get(), n.c_str(), &sb, AT_SYMLINK_NOFOLLOW) != 0) {
            if (!dry_run) keep.erase(n);
            out += "gone     resctrl group " + n + ": no longer exists; dropped from the state\n";
            continue;
        }
        auto tasks = read_rel(r.get(), n + "/tasks");
        if (!tasks) {
            out += "failed   resctrl group " + n + ": tasks unreadable; kept\n";
            ++failures;
            continue;
        }
        if (!trim(*tasks).empty()) {
            size_t cnt = std::count(tasks->begin(), tasks->end(), '\n') + (tasks->back() == '\n' ? 0 : 1);
            out += "kept     resctrl group " + n + ": no class uses it, but it holds " + std::to_string(cnt) + " task(s)\n";
            continue;
        }
        if (dry_run) {
            out += "unused   resctrl group " + n + ": no class uses it, no tasks (would be removed)\n";
            continue;
        }
        if (!is_resctrl_fs(r.get())) {  // scratch tree: the files the kernel would drop with the group
            unlinkat(r.get(), (n + "/schemata").c_str(), 0);
            unlinkat(r.get(), (n + "/tasks").c_str(), 0);
        }
        if (unlinkat(r.get(), n.c_str(), AT_REMOVEDIR) != 0) {
            out += "failed   resctrl group " + n + ": rmdir: " + std::strerror(errno) + "\n";
            ++failures;
            continue;
        }
        keep.erase(n);
        out += "removed  resctrl group " + n + ": made by nri-qos, no class uses it, no tasks\n";
    }
    if (!dry_run && keep != created) {
        std::string e = write_created(st.get(), keep);
        if (!e.empty()) {
            out += "warning: " + e + "\n";
            ++failures;
        }
    }
    return failures;
}

}  // namespace nriqos
