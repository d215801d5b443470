#include "model/knobs.hpp"

#include <cctype>
#include <cmath>
#include <climits>
#include <cstdio>
#include <map>

namespace nriqos {

namespace {
constexpr int64_t I64 = INT64_MAX;
// Ranges are the kernel's (Documentation/admin-guide/cgroup-v2.rst, cgroup-v1/*.rst,
// kernel/sched/core.c) and openEuler's (cpu.qos_level −1..2, memory.qos_level −1..0).
const std::vector<KnobDef> kTable = {
    // id                    key                kind              min     max       max?   bytes  pct base           v1 ctrl    v1 file                          v2 file            unit
    {KnobId::CpuShares, "cpu_shares", ValueKind::Int, 2, 262144, false, false, PctBase::CpuShares, "cpu", "cpu.shares", "cpu.weight", "shares"},
    {KnobId::CpuWeight, "cpu_weight", ValueKind::Int, 1, 10000, false, false, PctBase::None, nullptr, nullptr, "cpu.weight", "weight"},
    {KnobId::CpuPeriod, "cpu_period_us", ValueKind::Int, 1000, 1000000, false, false, PctBase::None, "cpu", "cpu.cfs_period_us", "cpu.max", "us"},
    {KnobId::CpuQuota, "cpu_quota_us", ValueKind::Int, 1000, I64, true, false, PctBase::CpuQuota, "cpu", "cpu.cfs_quota_us", "cpu.max", "us"},
    {KnobId::CpuBurst, "cpu_burst_us", ValueKind::Int, 0, I64, false, false, PctBase::CpuQuota, "cpu", "cpu.cfs_burst_us", "cpu.max.burst", "us"},
    {KnobId::CpuIdle, "cpu_idle", ValueKind::Int, 0, 1, false, false, PctBase::None, "cpu", "cpu.idle", "cpu.idle", "bool"},
    {KnobId::CpuQosLevel, "cpu_qos_level", ValueKind::Int, -1, 2, false, false, PctBase::None, "cpu", "cpu.qos_level", "cpu.qos_level", "level"},
    // Group identity (Anolis / Alibaba Cloud Linux kernels only; mainline has no such file, the
    // write is then skipped): -1 low (BE), 0 none, 1, 2 highest (LS/LSR) — koordinator-sh/koordinator
    // pkg/koordlet/util/system/cgroup_resource.go CPUBVTWarpNs (v1, cpu controller) and
    // CPUBVTWarpNsV2 (the same name on v2), both SupportedIfFileExists, CPUBvtWarpNsValidator [-1, 2].
    {KnobId::CpuBvtWarpNs, "cpu_bvt_warp_ns", ValueKind::Int, -1, 2, false, false, PctBase::None, "cpu", "cpu.bvt_warp_ns", "cpu.bvt_warp_ns",
     "identity"},
    {KnobId::CpusetCpus, "cpuset_cpus", ValueKind::Cpuset, 0, 0, false, false, PctBase::None, "cpuset", "cpuset.cpus", "cpuset.cpus", "list"},
    {KnobId::CpusetMems, "cpuset_mems", ValueKind::Cpuset, 0, 0, false, false, PctBase::None, "cpuset", "cpuset.mems", "cpuset.mems", "list"},
    {KnobId::MemoryLimit, "memory_limit", ValueKind::Int, 4096, I64, true, true, PctBase::MemLimit, "memory", "memory.limit_in_bytes", "memory.max",
     "bytes"},
    {KnobId::MemorySwap, "memory_swap", ValueKind::Int, 0, I64, true, true, PctBase::MemLimit, "memory", "memory.memsw.limit_in_bytes",
     "memory.swap.max", "bytes"},
    {KnobId::MemoryHigh, "memory_high", ValueKind::Int, 0, I64, true, true, PctBase::MemLimit, "memory", "memory.high", "memory.high", "bytes"},
    {KnobId::MemoryLow, "memory_low", ValueKind::Int, 0, I64, true, true, PctBase::MemLimit, nullptr, nullptr, "memory.low", "bytes"},
    {KnobId::MemoryMin, "memory_min", ValueKind::Int, 0, I64, true, true, PctBase::MemLimit, nullptr, nullptr, "memory.min", "bytes"},
    {KnobId::MemorySoftLimit, "memory_soft_limit", ValueKind::Int, 0, I64, true, true, PctBase::MemLimit, "memory", "memory.soft_limit_in_bytes",
     nullptr, "bytes"},
    {KnobId::MemoryQosLevel, "memory_qos_level", ValueKind::Int, -1, 0, false, false, PctBase::None, "memory", "memory.qos_level", "memory.qos_level",
     "level"},
    {KnobId::PidsMax, "pids_max", ValueKind::Int, 1, 4194304, true, false, PctBase::PidsLimit, "pids", "pids.max", "pids.max", "tasks"},
    {KnobId::BlkioWeight, "blkio_weight", ValueKind::Int, 10, 1000, false, false, PctBase::None, "blkio", "blkio.weight", "io.weight", "weight"},
    // blk-throttle: cgroup v1 writes one "MAJ:MIN RATE" line per device to the key's
    // blkio.throttle.*_device file, v2 one "MAJ:MIN KEY=RATE" line to io.max (runc fs/blkio.go,
    // fs2/io.go setIo); the v1 file named here is the first of the four.
    {KnobId::BlkioThrottle, "blkio_throttle", ValueKind::Throttle, 0, 0, false, false, PctBase::None, "blkio", "blkio.throttle.read_bps_device",
     "io.max", "devices"},
    {KnobId::OomScoreAdj, "oom_score_adj", ValueKind::Int, -1000, 1000, false, false, PctBase::None, nullptr, nullptr, nullptr, "score"},
    {KnobId::ResctrlGroup, "resctrl_group", ValueKind::Name, 0, 0, false, false, PctBase::None, nullptr, nullptr, nullptr, "group"},
    // Process attributes: carried only as NRI adjustments (no cgroup file). Ranges: nice
    // -20..19 (sched(7), setpriority(2)); I/O priority level 0..7 (ioprio_set(2), IOPRIO_NR_LEVELS).
    {KnobId::SchedPolicy, "sched_policy", ValueKind::Choice, 0, 2, false, false, PctBase::None, nullptr, nullptr, nullptr, "policy"},
    {KnobId::SchedNice, "sched_nice", ValueKind::Int, -20, 19, false, false, PctBase::None, nullptr, nullptr, nullptr, "nice"},
    {KnobId::IoClass, "io_class", ValueKind::Choice, 0, 2, false, false, PctBase::None, nullptr, nullptr, nullptr, "class"},
    {KnobId::IoLevel, "io_level", ValueKind::Int, 0, 7, false, false, PctBase::None, nullptr, nullptr, nullptr, "level"},
    {KnobId::MemoryPolicy, "memory_policy", ValueKind::Choice, 0, 6, false, false, PctBase::None, nullptr, nullptr, nullptr, "mode"},
    {KnobId::MemoryPolicyNodes, "memory_policy_nodes", ValueKind::Cpuset, 0, 0, false, false, PctBase::None, nullptr, nullptr, nullptr, "nodes"},
};
const KnobDef kRaw{KnobId::Raw, "raw", ValueKind::Name, 0, 0, false, false, PctBase::None, nullptr, nullptr, nullptr, "text"};

bool parse_i64(const std::string& s, int64_t& out) {
    if (s.empty() || s.size() > 20) return false;
    size_t i = s[0] == '-' ? 1 : 0;
    if (i == s.size()) return false;
    for (size_t k = i; k < s.size(); ++k)
        if (s[k] < '0' || s[k] > '9') return false;
    try {
        out = std::stoll(s);
    } catch (...) { return false; }
    return true;
}
}  // namespace

const std::vector<KnobDef>& knob_table() { return kTable; }

const std::vector<KnobChoice>& knob_choices(KnobId id) {
    static const std::vector<KnobChoice> sched = {{"other", 1, "SCHED_OTHER"}, {"batch", 4, "SCHED_BATCH"}, {"idle", 6, "SCHED_IDLE"}};
    static const std::vector<KnobChoice> io = {{"rt", 1, "IOPRIO_CLASS_RT"}, {"be", 2, "IOPRIO_CLASS_BE"}, {"idle", 3, "IOPRIO_CLASS_IDLE"}};
    static const std::vector<KnobChoice> mpol = {{"default", 0, "MPOL_DEFAULT"},
                                                 {"preferred", 1, "MPOL_PREFERRED"},
                                                 {"bind", 2, "MPOL_BIND"},
                                                 {"interleave", 3, "MPOL_INTERLEAVE"},
                                                 {"local", 4, "MPOL_LOCAL"},
                                                 {"preferred_many", 5, "MPOL_PREFERRED_MANY"},
                                                 {"weighted_interleave", 6, "MPOL_WEIGHTED_INTERLEAVE"}};
    static const std::vector<KnobChoice> none;
    switch (id) {
        case KnobId::SchedPolicy: return sched;
        case KnobId::IoClass: return io;
        case KnobId::MemoryPolicy: return mpol;
        default: return none;
    }
}

bool mempolicy_needs_nodes(int64_t mode) { return mode == 2 || mode == 3 || mode == 5 || mode == 6; }
bool mempolicy_forbids_nodes(int64_t mode) { return mode == 0 || mode == 4; }

const KnobDef* find_knob(const std::string& key) {
    for (const auto& k : kTable)
        if (key == k.key) return &k;
    return nullptr;
}

const KnobDef& knob_def(KnobId id) {
    for (const auto& k : kTable)
        if (k.id == id) return k;
    return kRaw;
}

bool valid_cpuset(const std::string& s) {
    if (s.empty() || s.size() > 4096) return false;
    long prev = -1;
    size_t pos = 0;
    while (pos < s.size()) {
        size_t comma = s.find(',', pos);
        std::string part = s.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
        size_t dash = part.find('-');
        int64_t a = 0, b = 0;
        if (dash == std::string::npos) {
            if (!parse_i64(part, a) || a < 0) return false;
            b = a;
        } else if (!parse_i64(part.substr(0, dash), a) || !parse_i64(part.substr(dash + 1), b) || a < 0 || b < a) {
            return false;
        }
        if (b > 8191 || a <= prev) return false;
        prev = static_cast<long>(b);
        if (comma == std::string::npos) break;
        pos = comma + 1;
        if (pos == s.size()) return false;
    }
    return true;
}

const char* throttle_key_name(ThrottleEntry::Key k) {
    static const char* const n[] = {"rbps", "wbps", "riops", "wiops"};
    return n[k & 3];
}

const char* throttle_v1_file(ThrottleEntry::Key k) {
    static const char* const n[] = {"blkio.throttle.read_bps_device", "blkio.throttle.write_bps_device", "blkio.throttle.read_iops_device",
                                    "blkio.throttle.write_iops_device"};
    return n[k & 3];
}

bool parse_decimal(const std::string& t, size_t max_digits, uint64_t maxv, uint64_t& v) {
    if (t.empty() || t.size() > max_digits) return false;
    v = 0;
    for (char c : t) {
        if (c < '0' || c > '9') return false;
        v = v * 10 + static_cast<uint64_t>(c - '0');
    }
    return v <= maxv;
}

bool parse_throttle(const std::string& s, std::vector<ThrottleEntry>& out, std::string& err) {
    out.clear();
    if (s.empty() || s.size() > 4096) {
        err = s.empty() ? "empty device list" : "device list longer than 4096 characters";
        return false;
    }
    auto num = [](const std::string& t, uint64_t maxv, uint64_t& v) { return parse_decimal(t, 19, maxv, v); };
    size_t pos = 0;
    while (pos <= s.size()) {
        size_t comma = s.find(',', pos);
        std::string item = s.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
        pos = comma == std::string::npos ? s.size() + 1 : comma + 1;
        while (!item.empty() && item.front() == ' ') item.erase(0, 1);
        while (!item.empty() && item.back() == ' ') item.pop_back();
        std::string shown = "\"";  // one line: control characters and quotes as '?'
        for (char ch : item.substr(0, 40)) shown += (static_cast<unsigned char>(ch) < 0x20 || ch == '"' || ch == 0x7f) ? '?' : ch;
        shown += item.size() > 40 ? "...\"" : "\"";
        if (out.size() >= kMaxThrottleEntries) {
            err = "more than " + std::to_string(kMaxThrottleEntries) + " device limits";
            return false;
        }
        size_t sp = item.find(' '), colon = item.find(':'), eq = item.find('=');
        if (sp == std::string::npos || colon == std::string::npos || colon > sp || eq == std::string::npos || eq < sp) {
            err = shown + ": expected \"MAJ:MIN KEY=RATE\"";
            return false;
        }
        ThrottleEntry e;
        uint64_t ma = 0, mi = 0, rate = 0;
        if (!num(item.substr(0, colon), (1u << 12) - 1, ma) || !num(item.substr(colon + 1, sp - colon - 1), (1u << 20) - 1, mi)) {
            err = shown + ": device must be MAJ:MIN (decimal, major < 4096, minor < 2^20)";
            return false;
        }
        const size_t ks = item.find_first_not_of(' ', sp);  // "8:0  rbps=1": spaces between are one
        const std::string key = item.substr(ks, eq - ks);
        int k = -1;
        for (int i = 0; i < 4; ++i)
            if (key == throttle_key_name(static_cast<ThrottleEntry::Key>(i))) k = i;
        if (k < 0) {
            err = shown + ": key must be rbps, wbps, riops or wiops";
            return false;
        }
        if (!num(item.substr(eq + 1), static_cast<uint64_t>(INT64_MAX), rate) || rate == 0) {
            err = shown + ": rate must be an integer 1..2^63-1 (0 would remove a limit)";
            return false;
        }
        e.key = static_cast<ThrottleEntry::Key>(k);
        e.major = static_cast<uint32_t>(ma);
        e.minor = static_cast<uint32_t>(mi);
        e.rate = rate;
        out.push_back(e);
    }
    return true;
}

std::string throttle_text(const std::vector<ThrottleEntry>& list) {
    std::string o;
    for (const auto& e : list)
        o += (o.empty() ? "" : ",") + std::to_string(e.major) + ":" + std::to_string(e.minor) + " " + throttle_key_name(e.key) + "=" +
             std::to_string(e.rate);
    return o;
}

bool is_throttle_file(const std::string& file) {
    auto ends = [&](const std::string& suf) { return file.size() >= suf.size() && file.compare(file.size() - suf.size(), suf.size(), suf) == 0; };
    const size_t slash = file.rfind('/');
    const std::string base = slash == std::string::npos ? file : file.substr(slash + 1);
    return base == "io.max" || (base.rfind("blkio.throttle.", 0) == 0 && ends("_device"));
}

std::string merge_throttle_file(const std::string& file, const std::string& current, const std::string& written) {
    const bool v2 = file.size() >= 6 && file.compare(file.size() - 6, 6, "io.max") == 0;
    // device → v1: the rate; v2: the four keys in io.max order
    std::map<std::pair<uint64_t, uint64_t>, std::vector<std::string>> dev;
    auto apply = [&](const std::string& line) {
        std::vector<std::string> tok;
        size_t p = 0;
        while (p < line.size()) {
            size_t q = line.find_first_of(" \t", p);
            if (q != p) tok.push_back(line.substr(p, q == std::string::npos ? std::string::npos : q - p));
            if (q == std::string::npos) break;
            p = q + 1;
        }
        unsigned long long ma = 0, mi = 0;
        if (tok.size() < 2 || std::sscanf(tok[0].c_str(), "%llu:%llu", &ma, &mi) != 2) return;
        auto& v = dev[{ma, mi}];
        if (v.empty()) v = v2 ? std::vector<std::string>{"max", "max", "max", "max"} : std::vector<std::string>{"0"};
        if (!v2) {
            v[0] = tok[1];
            return;
        }
        for (size_t i = 1; i < tok.size(); ++i) {
            size_t eq = tok[i].find('=');
            if (eq == std::string::npos) continue;
            for (int k = 0; k < 4; ++k)
                if (tok[i].compare(0, eq, throttle_key_name(static_cast<ThrottleEntry::Key>(k))) == 0 &&
                    eq == std::char_traits<char>::length(throttle_key_name(static_cast<ThrottleEntry::Key>(k))))
                    v[static_cast<size_t>(k)] = tok[i].substr(eq + 1);
        }
    };
    size_t p = 0;
    const std::string all = current + "\n" + written;
    while (p <= all.size()) {
        size_t e = all.find('\n', p);
        apply(all.substr(p, e == std::string::npos ? std::string::npos : e - p));
        if (e == std::string::npos) break;
        p = e + 1;
    }
    std::string out;
    for (const auto& [d, v] : dev) {
        const std::string mm = std::to_string(d.first) + ":" + std::to_string(d.second);
        if (!v2) {
            if (v[0] != "0") out += mm + " " + v[0] + "\n";
            continue;
        }
        if (v[0] == "max" && v[1] == "max" && v[2] == "max" && v[3] == "max") continue;
        out += mm + " rbps=" + v[0] + " wbps=" + v[1] + " riops=" + v[2] + " wiops=" + v[3] + "\n";
    }
    return out;
}

KnobValue parse_knob_value(const KnobDef& def, const std::string* s, const int64_t* i) {
    KnobValue v;
    std::string k = def.key;
    if (def.kind == ValueKind::Throttle) {
        std::vector<ThrottleEntry> e;
        std::string err;
        if (!s) throw InputError(k + ": expected a string \"MAJ:MIN KEY=RATE[,...]\" (KEY rbps, wbps, riops, wiops)");
        if (!parse_throttle(*s, e, err)) throw InputError(k + ": " + err);
        v.kind = KnobValue::Text;
        v.text = throttle_text(e);
        return v;
    }
    auto range = [&]() {
        std::string r = "[" + std::to_string(def.min) + ", " + (def.max == I64 ? std::string("2^63-1") : std::to_string(def.max)) + "]";
        if (def.allow_max) r += " or \"max\"";
        if (def.pct != PctBase::None) r += " or \"N%\"";
        return r;
    };
    if (def.kind == ValueKind::Cpuset) {
        if (!s || !valid_cpuset(*s)) throw InputError(k + ": expected a cpuset list like \"0-3,8\"");
        v.kind = KnobValue::Text;
        v.text = *s;
        return v;
    }
    if (def.kind == ValueKind::Choice) {
        const auto& ch = knob_choices(def.id);
        std::string names;
        for (size_t n = 0; n < ch.size(); ++n) {
            if (s && *s == ch[n].name) {
                v.kind = KnobValue::Int;
                v.num = static_cast<int64_t>(n);
                return v;
            }
            names += std::string(n ? (n + 1 == ch.size() ? " or " : ", ") : "") + "\"" + ch[n].name + "\"";
        }
        throw InputError(k + ": expected " + names + (s ? ", got \"" + s->substr(0, 40) + "\"" : ""));
    }
    if (def.kind == ValueKind::Name) {
        if (!s || s->empty() || s->size() > 64) throw InputError(k + ": expected a name of 1-64 characters [A-Za-z0-9_.-]");
        for (unsigned char c : *s)
            if (!(isalnum(c) || c == '_' || c == '-' || c == '.')) throw InputError(k + ": expected a name of 1-64 characters [A-Za-z0-9_.-]");
        if (*s == "." || *s == "..") throw InputError(k + ": invalid name");
        v.kind = KnobValue::Text;
        v.text = *s;
        return v;
    }
    if (i) {
        if (*i == -1 && def.allow_max) {
            v.kind = KnobValue::Max;
            return v;
        }
        if (*i < def.min || *i > def.max) throw InputError(k + ": " + std::to_string(*i) + " out of range " + range());
        v.num = *i;
        return v;
    }
    if (!s) throw InputError(k + ": expected an integer or a string");
    const std::string& t = *s;
    if (t == "max" && def.allow_max) {
        v.kind = KnobValue::Max;
        return v;
    }
    if (!t.empty() && t.back() == '%') {
        int64_t p = 0;
        if (def.pct == PctBase::None) throw InputError(k + ": percentages are not supported for this knob");
        if (!parse_i64(t.substr(0, t.size() - 1), p) || p < 0 || p > 100) throw InputError(k + ": percentage must be 0%..100%");
        v.kind = KnobValue::Percent;
        v.num = p;
        return v;
    }
    int64_t n = 0;
    std::string digits = t;
    int64_t mult = 1;
    if (def.bytes) {
        static const std::pair<const char*, int64_t> kSuffix[] = {{"Ki", 1LL << 10}, {"Mi", 1LL << 20}, {"Gi", 1LL << 30},   {"Ti", 1LL << 40},
                                                                  {"K", 1000LL},     {"M", 1000000LL},  {"G", 1000000000LL}, {"T", 1000000000000LL}};
        for (const auto& [suf, m] : kSuffix) {
            size_t L = std::char_traits<char>::length(suf);
            if (digits.size() > L && digits.compare(digits.size() - L, L, suf) == 0) {
                digits = digits.substr(0, digits.size() - L);
                mult = m;
                break;
            }
        }
    }
    if (!parse_i64(digits, n)) throw InputError(k + ": \"" + t.substr(0, 40) + "\" is not a valid value " + range());
    if (n != 0 && (n > I64 / mult || n < -(I64 / mult))) throw InputError(k + ": value overflows");
    n *= mult;
    if (n == -1 && def.allow_max) {
        v.kind = KnobValue::Max;
        return v;
    }
    if (n < def.min || n > def.max) throw InputError(k + ": " + std::to_string(n) + " out of range " + range());
    v.num = n;
    return v;
}

namespace {
constexpr uint64_t B(KnobId a) { return knob_bit(a); }
constexpr uint64_t B(KnobId a, KnobId b) { return knob_bit(a) | knob_bit(b); }
constexpr const char* kNoPtr = nullptr;
using K = KnobId;
using V = NriValue;
using G = NriGate;
// containerd/nri pkg/api (api.proto LinuxResources, LinuxCPU, LinuxMemory, LinuxPids,
// LinuxContainerAdjustment; adjustment.go names). Rows that carry nothing have value None and
// gate Always (unused).
constexpr NriField kNriFields[] = {
    // name, JSON pointer below the ContainerAdjustment, value form, gate, carries, covers, alias_of
    {"cpu.shares", "/linux/resources/cpu/shares", V::OptInt, G::Always, B(K::CpuShares), B(K::CpuShares, K::CpuWeight), nullptr},
    {"cpu.quota", "/linux/resources/cpu/quota", V::OptInt, G::Always, B(K::CpuQuota), B(K::CpuQuota), nullptr},
    {"cpu.period", "/linux/resources/cpu/period", V::OptInt, G::Always, B(K::CpuPeriod), B(K::CpuPeriod), nullptr},
    {"cpu.cpus", "/linux/resources/cpu/cpus", V::Text, G::Always, B(K::CpusetCpus), B(K::CpusetCpus), nullptr},
    {"cpuset.cpus", kNoPtr, V::None, G::Always, 0, B(K::CpusetCpus), "cpu.cpus"},
    {"cpu.mems", "/linux/resources/cpu/mems", V::Text, G::Always, B(K::CpusetMems), B(K::CpusetMems), nullptr},
    {"cpuset.mems", kNoPtr, V::None, G::Always, 0, B(K::CpusetMems), "cpu.mems"},
    {"cpu.realtime_runtime", kNoPtr, V::None, G::Always, 0, 0, nullptr},
    {"cpu.realtime_period", kNoPtr, V::None, G::Always, 0, 0, nullptr},
    {"memory.limit", "/linux/resources/memory/limit", V::OptInt, G::Always, B(K::MemoryLimit), B(K::MemoryLimit), nullptr},
    {"memory.swap", "/linux/resources/memory/swap", V::OptInt, G::Always, B(K::MemorySwap), B(K::MemorySwap), nullptr},
    {"memory.reservation", kNoPtr, V::None, G::Always, 0, B(K::MemorySoftLimit, K::MemoryLow), nullptr},
    {"memory.kernel", kNoPtr, V::None, G::Always, 0, 0, nullptr},
    {"memory.kernel_tcp", kNoPtr, V::None, G::Always, 0, 0, nullptr},
    {"memory.swappiness", kNoPtr, V::None, G::Always, 0, 0, nullptr},
    {"memory.disable_oom_killer", kNoPtr, V::None, G::Always, 0, 0, nullptr},
    {"memory.use_hierarchy", kNoPtr, V::None, G::Always, 0, 0, nullptr},
    {"pids.limit", "/linux/resources/pids/limit", V::Int, G::Nri08, B(K::PidsMax), B(K::PidsMax), nullptr},
    {"rdt_class", "/linux/resources/rdt_class", V::OptText, G::Always, B(K::ResctrlGroup), B(K::ResctrlGroup), nullptr},
    {"blockio_class", kNoPtr, V::None, G::Always, 0, B(K::BlkioWeight), nullptr},
    {"oom_score_adj", "/linux/oom_score_adj", V::OptInt, G::Nri08, B(K::OomScoreAdj), B(K::OomScoreAdj), nullptr},
    // NRI v0.10-v0.12 LinuxContainerAdjustment fields (api.proto: io_priority = 5 in v0.10.0,
    // scheduler = 10 in v0.11.0, memory_policy = 12 in v0.12.0).
    {"io_priority", "/linux/io_priority", V::Process, G::Nri10, B(K::IoClass, K::IoLevel), B(K::IoClass, K::IoLevel), nullptr},
    {"scheduler", "/linux/scheduler", V::Process, G::Nri11, B(K::SchedPolicy, K::SchedNice), B(K::SchedPolicy, K::SchedNice), nullptr},
    {"memory_policy", "/linux/memory_policy", V::Process, G::Nri12, B(K::MemoryPolicy, K::MemoryPolicyNodes),
     B(K::MemoryPolicy, K::MemoryPolicyNodes), nullptr},
    {"rdt", kNoPtr, V::None, G::Always, 0, B(K::ResctrlGroup), nullptr},
    {"hugepage_limits", kNoPtr, V::None, G::Always, 0, 0, nullptr},
    {"devices", kNoPtr, V::None, G::Always, 0, 0, nullptr},
    {"annotations", kNoPtr, V::None, G::Always, 0, 0, nullptr},
    {"mounts", kNoPtr, V::None, G::Always, 0, 0, nullptr},
    {"env", kNoPtr, V::None, G::Always, 0, 0, nullptr},
    {"hooks", kNoPtr, V::None, G::Always, 0, 0, nullptr},
    {"rlimits", kNoPtr, V::None, G::Always, 0, 0, nullptr},
    {"cgroups_path", kNoPtr, V::None, G::Always, 0, 0, nullptr},
    {"seccomp_policy", kNoPtr, V::None, G::Always, 0, 0, nullptr},
    {"namespaces", kNoPtr, V::None, G::Always, 0, 0, nullptr},
    {"args", kNoPtr, V::None, G::Always, 0, 0, nullptr},
    // cgroup v2 files through linux.resources.unified (runc writes them after its own files,
    // fs2 Manager.setUnified). covers = every knob whose v2 file it is (field_knobs' rule for
    // other unified.<file> names).
    {"unified.cpu.weight", "/linux/resources/unified/cpu.weight", V::UnifiedNum, G::V2PodFile, B(K::CpuWeight), B(K::CpuShares, K::CpuWeight),
     nullptr},
    {"unified.cpu.max.burst", "/linux/resources/unified/cpu.max.burst", V::UnifiedNum, G::V2PodFile, B(K::CpuBurst), B(K::CpuBurst), nullptr},
    {"unified.cpu.idle", "/linux/resources/unified/cpu.idle", V::UnifiedNum, G::V2PodFile, B(K::CpuIdle), B(K::CpuIdle), nullptr},
    {"unified.memory.high", "/linux/resources/unified/memory.high", V::UnifiedMax, G::V2PodFile, B(K::MemoryHigh), B(K::MemoryHigh), nullptr},
    {"unified.memory.low", "/linux/resources/unified/memory.low", V::UnifiedMax, G::V2PodFile, B(K::MemoryLow), B(K::MemoryLow), nullptr},
    {"unified.memory.min", "/linux/resources/unified/memory.min", V::UnifiedMax, G::V2PodFile, B(K::MemoryMin), B(K::MemoryMin), nullptr},
    // the pointer is io.weight's; with BFQ it is io.bfq.weight's (NriValue::UnifiedIoWeight)
    {"unified.io.weight", "/linux/resources/unified/io.weight", V::UnifiedIoWeight, G::V2PodIo, B(K::BlkioWeight), B(K::BlkioWeight), nullptr},
};
}  // namespace

const NriField* nri_field_table(size_t& n) {
    n = sizeof(kNriFields) / sizeof(kNriFields[0]);
    return kNriFields;
}

const NriField* nri_carrier(KnobId id) {
    for (const auto& f : kNriFields)
        if (f.carries & knob_bit(id)) return &f;
    return nullptr;
}

bool field_knobs(const std::string& field, FieldKnobs& out, std::string& err) {
    out = FieldKnobs();
    if (field.rfind("raw:", 0) == 0) {
        const std::string f = field.substr(4);
        bool ok = !f.empty() && f.size() <= 64 && f != "." && f != "..";
        for (unsigned char c : f)
            if (!(isalnum(c) || c == '_' || c == '-' || c == '.')) ok = false;
        if (!ok) {
            err = "\"" + field.substr(0, 80) + "\": expected raw:<kernel file name>";
            return false;
        }
        out.raw_file = f;
        return true;
    }
    // NRI's names first: "memory_policy" (mode and nodes) and "oom_score_adj" are both.
    for (const auto& f : kNriFields) {
        if (field != f.name) continue;
        out.knobs = f.covers;
        out.never_set = f.covers == 0;
        return true;
    }
    if (const KnobDef* d = find_knob(field)) {
        out.knobs = knob_bit(d->id);
        return true;
    }
    if (field.rfind("unified.", 0) == 0) {  // a cgroup v2 file through linux.resources.unified
        const std::string f = field.substr(8);
        for (const auto& d : kTable)
            if (d.v2_file && f == d.v2_file) out.knobs |= knob_bit(d.id);
        if (f == "io.bfq.weight") out.knobs |= knob_bit(KnobId::BlkioWeight);
        if (f == "cpu.max") out.knobs |= knob_bit(KnobId::CpuQuota) | knob_bit(KnobId::CpuPeriod);
        if (out.knobs) return true;
        err = "\"" + field.substr(0, 80) + "\": no knob of nri-qos writes the cgroup v2 file " + f.substr(0, 64);
        return false;
    }
    err = "\"" + field.substr(0, 80) + "\" is neither a knob of nri-qos nor an NRI adjustment field";
    return false;
}

uint64_t shares_to_weight(uint64_t shares) {
    if (shares == 0) return 0;
    if (shares < 2) shares = 2;
    if (shares > 262144) shares = 262144;
    if (shares == 2) return 1;  // exact at the ends (the float form gives 1 and 10000 too)
    if (shares == 262144) return 10000;
    double l = std::log2(static_cast<double>(shares));
    double exponent = (l * l + 125.0 * l) / 612.0 - 7.0 / 34.0;
    uint64_t w = static_cast<uint64_t>(std::ceil(std::pow(10.0, exponent)));
    return w < 1 ? 1 : (w > 10000 ? 10000 : w);
}

uint64_t shares_to_weight_linear(uint64_t shares) {
    if (shares == 0) return 0;
    if (shares < 2) shares = 2;
    if (shares > 262144) shares = 262144;
    return 1 + ((shares - 2) * 9999) / 262142;
}

const char* weight_formula_name(WeightFormula f) {
    switch (f) {
        case WeightFormula::LogQuadratic: return "log-quadratic";
        case WeightFormula::Linear: return "linear";
        case WeightFormula::Auto: break;
    }
    return "auto";
}

uint64_t shares_to_weight(uint64_t shares, WeightFormula f) {
    return f == WeightFormula::Linear ? shares_to_weight_linear(shares) : shares_to_weight(shares);
}

WeightFit weight_fit(uint64_t shares, uint64_t weight) {
    if (shares < 2 || shares > 262144) return WeightFit::None;
    const bool lq = shares_to_weight(shares) == weight, lin = shares_to_weight_linear(shares) == weight;
    return lq && lin ? WeightFit::Both : lq ? WeightFit::LogQuadratic : lin ? WeightFit::Linear : WeightFit::None;
}

WeightFormula runtime_version_formula(const std::string& out, std::string& version) {
    version.clear();
    std::string line = out.substr(0, out.find('\n'));
    for (const char* name : {"runc", "crun"}) {
        const std::string key = std::string(name) + " version ";
        size_t at = line.find(key);
        if (at == std::string::npos) continue;
        unsigned maj = 0, min = 0, patch = 0;
        const char* v = line.c_str() + at + key.size();
        if (*v == 'v') ++v;
        int n = std::sscanf(v, "%u.%u.%u", &maj, &min, &patch);
        if (n < 2) return WeightFormula::Auto;
        char buf[48];
        if (n == 3) std::snprintf(buf, sizeof buf, "%s %u.%u.%u", name, maj, min, patch);
        else std::snprintf(buf, sizeof buf, "%s %u.%u", name, maj, min);
        version = buf;
        if (name[0] == 'r') {
            const bool lq = maj > 1 || (maj == 1 && (min > 3 || (min == 3 && patch >= 2)));
            return lq ? WeightFormula::LogQuadratic : WeightFormula::Linear;
        }
        return maj > 1 || (maj == 1 && min >= 23) ? WeightFormula::LogQuadratic : WeightFormula::Linear;
    }
    return WeightFormula::Auto;
}

uint64_t blkio_to_io_weight(uint64_t w) {
    if (w == 0) return 0;
    if (w < 10) w = 10;
    if (w > 1000) w = 1000;
    return 1 + (w - 10) * 9999 / 990;
}

}  // namespace nriqos
