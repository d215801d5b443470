// Volcano's and rubik's facts (volcano.*, rubik.*; issue #23: split out of facts.cpp): the
// Volcano agent's and openEuler rubik's QoS levels, rubik's dynCache level and ioLimit device
// limits, and the CFS burst of a container and its pod by the Volcano agent's or rubik's reading
// of the quota-burst annotations. The registry (entries() in facts.cpp) maps each fact name to
// its evaluator here.
#include "facts/facts_internal.hpp"

#include <cerrno>
#include <cstring>
#include <ctime>

#include <sys/stat.h>
#include <sys/sysmacros.h>

namespace nriqos {
namespace facts_internal {

namespace {

constexpr const char* kVolcanoLevel = "volcano.sh/qos-level";
constexpr const char* kPreemptable = "volcano.sh/preemptable";
constexpr const char* kBurstEnable = "volcano.sh/enable-quota-burst";
constexpr const char* kBurstTime = "volcano.sh/quota-burst-time";

}  // namespace

Outcome volcano_level(Ctx& c, uint8_t) {
    const std::string* a = c.ann(kVolcanoLevel);
    if (!a) return absent_ann(kVolcanoLevel);
    int v = *a == "LC" || *a == "HLS" ? 2 : *a == "LS" ? 1 : *a == "BE" ? -1 : 0;
    return value_int(v, std::string(kVolcanoLevel) + " " + q(*a) + " → " + std::to_string(v) + " (GetQosLevel: LC/HLS 2, LS 1, BE -1, other 0)");
}

Outcome volcano_mem_level(Ctx& c, uint8_t s) {
    Outcome o = volcano_level(c, s);
    if (o.s != Outcome::Value) return o;
    int64_t v = o.v.num < 0 ? -1 : 0;
    return value_int(v, o.calc + ", NormalizeQosLevel → " + std::to_string(v));
}

namespace {

constexpr const char* kColocation = "volcano.sh/colocation-config";

/// The Volcano agent's memoryqosv2 value of one file (volcano-sh/volcano@ed72c7c815a9fd547a787134676f73d42e9d049c
/// pkg/agent/events/handlers/memoryqosv2/memoryqosv2_linux.go Handle): `which` 0 high, 1 low,
/// 2 min. memory.high = limit × highRatio / 100, unlimited when the limit is zero or highRatio
/// ≥ 100; memory.low / memory.min = request × ratio / 100; any negative product is written as
/// "max" (pkg/agent/utils/cgroup/memory.go memoryInterfaceImpl.Set). The quantity is the
/// container's standard memory limit / request for LC/HLS pods (qos level 2); for any other
/// level the agent takes the container's extended memory resource when it has one
/// (getMemoryQuantity, extension.AllowedUseExtRes: level ≤ 1), which the request does not
/// carry: the value is given only where the ratio alone decides it.
Outcome volcano_memory(Ctx& c, int which) {
    static const char* const kFile[] = {"memory.high", "memory.low", "memory.min"};
    static const char* const kRatio[] = {"highRatio", "lowRatio", "minRatio"};
    if (c.in.layout != Layout::V2)
        return absent(std::string("cgroup v1: the Volcano agent's memoryqosv2 handler sets ") + kFile[which] + " on cgroup v2 only");
    const std::string* a = c.ann(kColocation);
    if (!a) return absent_ann(kColocation, " (no ColocationConfiguration selects the pod)");
    // The controller clears the value (keeps the key) when no configuration selects the pod any
    // longer; the agent then skips the pod (Handle: cfgStr == "").
    if (a->empty()) return absent(std::string(kColocation) + " is empty: the agent skips the pod");
    ColocationMemoryQos cfg;
    try {
        cfg = parse_colocation_memory_qos(*a);
    } catch (const InputError& e) { return error(std::string(e.what()) + " (the agent sets nothing: ColocationConfigParseFailed)"); }
    const int64_t ratio = which == 0 ? cfg.high_ratio : which == 1 ? cfg.low_ratio : cfg.min_ratio;
    const std::string rtext =
        std::string(kRatio[which]) + " " + std::to_string(ratio) + (cfg.defaulted ? " (no memoryQos: the agent's default)" : "");
    if (which == 0 && ratio >= 100) return value_max(rtext + " ≥ 100 → max (unlimited)");
    if (which != 0 && ratio == 0) return value_int(0, rtext + " → 0");
    // The quantity: the standard memory resource of an LC/HLS pod.
    const std::string* lv = c.ann("volcano.sh/qos-level");
    const bool level2 = lv && (*lv == "LC" || *lv == "HLS");
    if (!level2)
        return absent(std::string("volcano.sh/qos-level ") + (lv ? q(*lv) : std::string("absent")) +
                      ": qos level ≤ 1 takes the container's extended memory resource when it has one "
                      "(getMemoryQuantity), which the request does not carry");
    int64_t qty = 0;
    std::string qhow;
    if (which == 0) {
        if (c.r.resources.mem_limit && *c.r.resources.mem_limit > 0) qty = *c.r.resources.mem_limit, qhow = "memory limit " + std::to_string(qty);
        else return value_max(rtext + ", the container has no memory limit → max (unlimited)");
    } else if (c.in.kube_qos == KubeQos::BestEffort) {
        return value_int(0, rtext + ", BestEffort: no memory request → 0");
    } else if (c.in.kube_qos == KubeQos::Guaranteed && c.r.resources.mem_limit && *c.r.resources.mem_limit > 0) {
        qty = *c.r.resources.mem_limit;
        qhow = "memory request " + std::to_string(qty) + " (Guaranteed: request = limit)";
    } else {
        return absent(std::string("the request does not carry the container's memory request (") + kube_qos_name(c.in.kube_qos) +
                      " pod; kubelet hands the runtime only the limit)");
    }
    int64_t p = 0;
    if (__builtin_mul_overflow(qty, static_cast<int64_t>(ratio), &p)) return error(rtext + ": " + qhow + " × ratio overflows int64");
    const int64_t v = p / 100;  // Go's integer division truncates toward 0
    const std::string calc = qhow + " × " + rtext + " / 100 = " + std::to_string(v);
    if (v < 0) return value_max(calc + ", negative → max (the agent writes \"max\" for any negative value)");
    return value_int(v, calc);
}

}  // namespace

Outcome volcano_memory_high(Ctx& c, uint8_t) { return volcano_memory(c, 0); }
Outcome volcano_memory_low(Ctx& c, uint8_t) { return volcano_memory(c, 1); }
Outcome volcano_memory_min(Ctx& c, uint8_t) { return volcano_memory(c, 2); }

Outcome rubik_level(Ctx& c, uint8_t) {
    const std::string* a = c.label_or_ann(kPreemptable);
    if (!a || *a != "true") return absent(std::string(kPreemptable) + " is not \"true\": online, rubik leaves the level");
    return value_int(-1, std::string(kPreemptable) + " = \"true\" → offline -1 (SetQoSLevel)");
}

/// rubik dynCache's level of an offline pod (openeuler-mirror/rubik pkg/services/dyncache/sync.go
/// syncLevel, writeTasksToResctrl): volcano.sh/cache-limit = low | middle | high | max | dynamic
/// picks the group rubik_<level>; without it rubik's defaultLimitMode "static" gives max. The
/// annotation is the pod author's: it may only choose a level at or below the class's default
/// (`default = "<level>"`, else max) — a level above it is held at the default, said in the note.
/// Ranks: low 1, middle 2, dynamic 3 (rubik moves it between the low and high percentages,
/// dynamic.go flush), high 3, max 4. Only offline pods (volcano.sh/preemptable = "true", rubik's
/// listOfflinePods): absent for the others.
Outcome rubik_cache_limit(Ctx& c, uint8_t) {
    static const char* const kLevels[] = {"", "max", "high", "middle", "low", "dynamic"};
    static const int kRank[] = {4, 4, 3, 2, 1, 3};
    const std::string* off = c.label_or_ann(kPreemptable);
    if (!off || *off != "true") return absent(std::string(kPreemptable) + " is not \"true\": online, rubik's dynCache leaves the pod");
    const int64_t d = c.param >= 1 && c.param <= 5 ? c.param : 1;
    const std::string def = kLevels[d];
    const std::string dflt_how = c.param ? "the class's default " + def : std::string("rubik's defaultLimitMode static → max");
    const std::string* a = c.ann("volcano.sh/cache-limit");
    if (!a || a->empty()) return value_text("rubik_" + def, "no volcano.sh/cache-limit: " + dflt_how);
    int lv = 0;
    for (int i = 1; i <= 5; ++i)
        if (*a == kLevels[i]) lv = i;
    if (!lv) return error("volcano.sh/cache-limit " + q(*a) + " is not low, middle, high, max or dynamic (rubik: invalid cache limit level)");
    if (kRank[lv] > kRank[d])
        return value_text("rubik_" + def,
                          "volcano.sh/cache-limit " + q(*a) + " is above " + dflt_how + ": a pod-written annotation only lowers, kept " + def);
    return value_text("rubik_" + *a, "volcano.sh/cache-limit " + q(*a) + " → rubik_" + *a);
}

namespace {

/// rubik's convertToMajorMinorImpl (openeuler-mirror/rubik@1b6fece7a319ebed2ece3dd74ae873633262ce41
/// pkg/services/iolimit/iolimit.go) made strict: "MAJ:MIN" in decimal is taken as is; a path
/// "/dev/<name>" is stat(2)ed (symlinks followed, as Go's os.Stat) below `dev_root` and must be
/// a block device (rubik accepts any device node; the kernel refuses a character device). Then
/// the device must be a whole disk of this node: <sysfs>/dev/block/MAJ:MIN exists and has no
/// "partition" file (blk-throttle refuses partitions with ENODEV: block/blk-cgroup.c
/// blkcg_conf_open_bdev; rubik's docs: only whole-disk devices take effect). Returns the device
/// or nullopt with `why` (one line).
std::optional<std::pair<uint32_t, uint32_t>> block_device(const std::string& dev, const std::string& dev_root, const std::string& sysfs_root,
                                                          std::string& why) {
    uint64_t ma = 0, mi = 0;
    auto digits = [](const std::string& t, uint64_t maxv, uint64_t& v) { return parse_decimal(t, 7, maxv, v); };
    const size_t colon = dev.find(':');
    if (colon != std::string::npos && dev.find(':', colon + 1) == std::string::npos && dev.rfind("/dev/", 0) != 0) {
        if (!digits(dev.substr(0, colon), 4095, ma) || !digits(dev.substr(colon + 1), (1u << 20) - 1, mi)) {
            why = q(dev) + ": not MAJ:MIN in decimal";
            return std::nullopt;
        }
    } else if (dev.rfind("/dev/", 0) == 0) {
        const std::string rest = dev.substr(5);
        if (dev.size() > 255 || rest.empty() || ("/" + rest + "/").find("/../") != std::string::npos) {
            why = q(dev) + ": not a device path below /dev";
            return std::nullopt;
        }
        struct stat st {};
        if (::stat((dev_root + "/" + rest).c_str(), &st) != 0) {
            why = q(dev) + ": " + std::strerror(errno);
            return std::nullopt;
        }
        if (!S_ISBLK(st.st_mode)) {
            why = q(dev) + ": not a block device";
            return std::nullopt;
        }
        ma = major(st.st_rdev);
        mi = minor(st.st_rdev);
    } else {
        why = q(dev) + ": neither MAJ:MIN nor a /dev/ path (rubik: unsupported device name format)";
        return std::nullopt;
    }
    const std::string mm = std::to_string(ma) + ":" + std::to_string(mi);
    const std::string sys = sysfs_root + "/dev/block/" + mm;
    struct stat st {};
    if (::stat(sys.c_str(), &st) != 0) {
        why = q(dev) + ": no block device " + mm + " on this node (sysfs dev/block)";
        return std::nullopt;
    }
    if (::stat((sys + "/partition").c_str(), &st) == 0) {
        why = q(dev) + ": " + mm + " is a partition; the kernel throttles whole disks only";
        return std::nullopt;
    }
    return std::make_pair(static_cast<uint32_t>(ma), static_cast<uint32_t>(mi));
}

}  // namespace

/// rubik ioLimit (openeuler-mirror/rubik@1b6fece7a319ebed2ece3dd74ae873633262ce41
/// pkg/services/iolimit/iolimit.go configIOLimit → parseIOLimitConfig, applyIOLimitConfig,
/// applyDeviceConfig): every pod carrying volcano.sh/blkio-limit, online or offline, gets the
/// listed per-device limits in each container's cgroup (never the pod's: "blkio cgroup
/// hierarchical is not enabled default, only set container cgroups"). As in applyDeviceConfig an
/// entry without device or value, or whose device does not resolve, is skipped and the others
/// apply; here also a rate that is not a decimal integer 1..2^63-1 (0 would lift a limit: rubik's
/// documented "set 0 to cancel" is not honoured from a pod-written annotation) and, on cgroup v2,
/// a rate of 1 (io.max refuses it: block/blk-throttle.c tg_set_limit). Malformed JSON: error
/// (rubik applies nothing). Order: all read_bps, write_bps, read_iops, write_iops (rubik's and
/// runc's order).
Outcome rubik_blkio_limit(Ctx& c, uint8_t) {
    constexpr const char* kKey = "volcano.sh/blkio-limit";
    const std::string* a = c.ann(kKey);
    if (!a || a->empty()) return absent(std::string("no ") + kKey + " annotation (rubik: no I/O limit)");
    BlkioLimit cfg;
    try {
        cfg = parse_blkio_limit(*a);
    } catch (const InputError& e) { return error(e.what()); }
    static const char* const kList[] = {"device_read_bps", "device_write_bps", "device_read_iops", "device_write_iops"};
    std::vector<ThrottleEntry> out;
    std::string skipped, calc;
    size_t nskipped = 0;
    for (int k = 0; k < 4; ++k) {
        for (const auto& dv : cfg.lists[k]) {
            const std::string where = std::string(kList[k]) + " " + q(dv.device);
            auto skip = [&](const std::string& why) {  // the first 4 reasons, then a count
                if (++nskipped <= 4) skipped += (skipped.empty() ? "" : "; ") + why;
            };
            if (dv.device.empty() || dv.value.empty()) {
                skip(std::string(kList[k]) + ": an entry without device or value");
                continue;
            }
            std::string why;
            auto d = block_device(dv.device, c.in.dev_root, c.in.sysfs_root, why);
            if (!d) {
                skip(std::string(kList[k]) + " " + why);
                continue;
            }
            uint64_t rate = 0;
            bool ok = !dv.value.empty() && dv.value.size() <= 19;
            for (char ch : dv.value) {
                if (ch < '0' || ch > '9') ok = false;
                else rate = rate * 10 + static_cast<uint64_t>(ch - '0');
            }
            if (!ok || rate > static_cast<uint64_t>(INT64_MAX)) {
                skip(where + ": value " + q(dv.value) + " is not an integer 1..2^63-1");
                continue;
            }
            if (rate == 0) {
                skip(where + ": value 0 would lift a limit, not set one (not taken from a pod annotation)");
                continue;
            }
            if (rate == 1 && c.in.layout == Layout::V2) {
                skip(where + ": value 1: cgroup v2 io.max takes rates from 2");
                continue;
            }
            ThrottleEntry e;
            e.key = static_cast<ThrottleEntry::Key>(k);
            e.major = d->first;
            e.minor = d->second;
            e.rate = rate;
            if (out.size() >= kMaxThrottleEntries) break;
            out.push_back(e);
            calc += (calc.empty() ? "" : ", ") + where + " → " + std::to_string(e.major) + ":" + std::to_string(e.minor) + " " +
                    throttle_key_name(e.key) + "=" + dv.value;
        }
    }
    if (nskipped > 4) skipped += "; " + std::to_string(nskipped - 4) + " more";
    if (out.empty()) return absent(std::string(kKey) + ": no usable device limit" + (skipped.empty() ? "" : " (" + skipped + ")"));
    return value_text(throttle_text(out), std::string(kKey) + ": " + calc + (skipped.empty() ? "" : "; skipped: " + skipped));
}

/// The container's CFS burst by the pod's carrier (see the registry entry).
Outcome burst_container(Ctx& c, uint8_t) {
    const std::string* en = c.ann(kBurstEnable);
    const std::string* bt = c.ann(kBurstTime);
    std::string how;
    auto quota = c.container_quota(how);
    if (en) {  // Volcano agent semantics
        auto on = go_parse_bool(*en);
        if (!on || !*on) return absent(std::string(kBurstEnable) + " " + q(*en) + " is not true (Volcano: no burst)");
        if (!quota) return absent(how + ": no burst without a quota (Volcano skips quota -1)");
        int64_t t = 0;
        if (bt)
            if (auto v = go_parse_int(*bt); v && *v > 0) t = *v;
        if (t == 0)
            return value_int(*quota, std::string(kBurstEnable) + " → burst = quota: " + how +
                                         (bt ? std::string(" (") + kBurstTime + " " + q(*bt) + " unusable)" : ""));
        if (t > *quota) return value_int(*quota, std::string(kBurstTime) + " " + std::to_string(t) + " capped at " + how);
        return value_int(t, std::string(kBurstTime) + " " + std::to_string(t) + " (≤ " + how + ")");
    }
    if (bt && !bt->empty()) {  // rubik semantics
        auto t = go_parse_int(*bt);
        if (!t) return error(std::string(kBurstTime) + " " + q(*bt) + ": not an integer (rubik parseQuotaBurst)");
        if (*t < 0) return error(std::string(kBurstTime) + " " + q(*bt) + ": negative (rubik parseQuotaBurst)");
        if (!quota) return absent(how + ": rubik refuses a burst without a quota (matchQuota)");
        std::string err;
        unsigned ncpu = c.online_cpus(err);
        if (!ncpu) return error("cannot count online CPUs: " + err);
        int64_t period = c.container_period();
        if (*quota >= period * static_cast<int64_t>(ncpu))
            return absent(how + " ≥ period " + std::to_string(period) + " × " + std::to_string(ncpu) + " CPUs: rubik refuses (matchQuota)");
        if (*quota < *t) return absent(std::string(kBurstTime) + " " + std::to_string(*t) + " above " + how + ": rubik refuses (matchQuota)");
        return value_int(*t, std::string(kBurstTime) + " " + std::to_string(*t) + " (rubik: ≤ " + how + ")");
    }
    return absent(std::string("no ") + kBurstEnable + " or " + kBurstTime + " annotation (no burst)");
}

Outcome burst_pod(Ctx& c, uint8_t) {
    const std::string* en = c.ann(kBurstEnable);
    const std::string* bt = c.ann(kBurstTime);
    bool volcano = en != nullptr;
    if (volcano) {
        auto on = go_parse_bool(*en);
        if (!on || !*on) return absent(std::string(kBurstEnable) + " " + q(*en) + " is not true (Volcano: no burst)");
    } else if (!bt || bt->empty()) {
        return absent(std::string("no ") + kBurstEnable + " or " + kBurstTime + " annotation (no burst)");
    } else if (auto t = go_parse_int(*bt); !t || *t < 0) {
        return absent(std::string(kBurstTime) + " " + q(*bt) + " unusable (rubik parseQuotaBurst)");
    }
    // Σ of the containers' bursts recorded in the ledger (this container's own value included).
    if (std::string e = c.lock(); !e.empty()) return error(e);
    auto led = c.st.ledger(c.r.sandbox_id);
    if (c.in.dry_run || c.ledger_dropped) {
        led.erase(c.r.id);
        if (c.own_burst_known && c.own_burst && !c.ledger_dropped) led[c.r.id].kv["cpu_burst_us"] = *c.own_burst;
    }
    // A container whose cgroup is gone no longer counts (native NRI reports no container removal):
    // its entry is dropped once past the grace period of a container still being created.
    const int64_t now = static_cast<int64_t>(::time(nullptr));
    const std::string prefix = c.in.layout == Layout::V2 ? "" : "cpu/";
    int64_t sum = 0;
    std::string terms;
    for (const auto& [id, e] : led) {
        if (id != c.r.id && !e.ctr_dir.empty() && c.in.kernel && !c.in.kernel->exists(Root::Cgroup, prefix + e.ctr_dir)) {
            if (now - e.time > kFactRecordGraceSeconds) {
                if (!c.in.dry_run) c.st.drop_ledger(c.r.sandbox_id, id);
                continue;
            }
        }
        auto it = e.kv.find("cpu_burst_us");
        if (it == e.kv.end() || it->second < 0) continue;
        sum += it->second;
        terms += (terms.empty() ? "" : " + ") + std::to_string(it->second);
    }
    int64_t period = 100000;
    std::string how, err;
    auto pq = c.pod_quota(period, how, err);
    if (!err.empty()) return error(err);
    std::string calc = "Σ container bursts " + (terms.empty() ? std::string("(none yet)") : terms) + " = " + std::to_string(sum);
    if (volcano) {
        if (!pq) return absent(how + ": unlimited pod quota, Volcano writes no pod burst");
        return value_int(sum, calc);
    }
    if (!pq) return absent(how + ": rubik refuses a pod burst without a pod quota (matchQuota)");
    unsigned ncpu = c.online_cpus(err);
    if (!ncpu) return error("cannot count online CPUs: " + err);
    if (*pq >= period * static_cast<int64_t>(ncpu)) return absent(how + " ≥ period × " + std::to_string(ncpu) + " CPUs: rubik refuses (matchQuota)");
    if (*pq < sum) return absent(calc + " above " + how + ": rubik refuses (matchQuota)");
    return value_int(sum, calc);
}

}  // namespace facts_internal
}  // namespace nriqos
