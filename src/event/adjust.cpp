#include "event/adjust.hpp"

#include <cinttypes>
#include <cstdio>

using nlohmann::json;

namespace nriqos {

std::string nri_api_level(const std::string& name, const std::string& version) {
    if (name != "containerd") return "0.6";
    unsigned maj = 0, min = 0, patch = 0;
    const char* v = version.c_str();
    if (*v == 'v') ++v;  // upstream builds report "v1.7.24"
    if (std::sscanf(v, "%u.%u.%u", &maj, &min, &patch) < 2) return "0.6";
    if (maj >= 2) return "0.8+";
    if (maj == 1 && min == 7 && patch >= 26) return "0.8+";
    if (maj == 1 && min > 7) return "0.8+";
    return "0.6";
}

int nri_api_minor(const std::string& name, const std::string& version) {
    if (name != "containerd") return 6;
    unsigned maj = 0, min = 0, patch = 0;
    const char* v = version.c_str();
    if (*v == 'v') ++v;
    if (std::sscanf(v, "%u.%u.%u", &maj, &min, &patch) < 2) return 6;
    // The containerd/nri module each release's go.mod requires (containerd tags v1.7.26,
    // v2.0.0, v2.1.x: v0.8.0; v2.2.0: v0.10.0; v2.2.1-v2.2.7: v0.11.0; v2.3.x: v0.12.0;
    // v2.4.0-beta.0: v0.12.1).
    if (maj > 2 || (maj == 2 && min >= 3)) return 12;
    if (maj == 2 && min == 2) return patch >= 1 ? 11 : 10;
    return nri_api_level(name, version) == "0.8+" ? 8 : 6;
}

const char* process_knob_field(KnobId id, int& min_nri) {
    const NriField* f = nri_carrier(id);
    min_nri = 0;
    if (!f || f->value != NriValue::Process) return nullptr;
    min_nri = f->gate == NriGate::Nri10 ? 10 : f->gate == NriGate::Nri11 ? 11 : 12;
    return f->name;
}

namespace {

// NriSync: an existing container at Synchronize: what NRI can carry goes into `update` (the
// runtime applies it after the reply, like UpdateContainer's), the rest is written directly (as
// StartContainer writes it).
enum class Mode { None, Direct, NriCreate, NriStart, NriUpdate, NriSync };

/// A knob resolved for this request: integer (or "max") or text.
struct Resolved {
    bool ok = false;
    bool is_max = false;
    bool is_text = false;
    int64_t num = 0;
    std::string text;
    std::string why;  ///< when !ok
};

/// Resolve `k` for this request. A percentage is taken of the class's own value of its base
/// knob when the class (`all`) sets it — so "cpu_burst_us = 100%" follows the class's
/// cpu_quota_us and a burst never exceeds the quota the class writes — else of the request's
/// OCI value (the base knob's own percentage is always of the OCI value: no recursion).
Resolved resolve(const KnobSetting& k, const Resources& res, const std::vector<KnobSetting>& all) {
    Resolved r;
    const KnobDef& d = knob_def(k.id);
    switch (k.value.kind) {
        case KnobValue::Max:
            r.ok = true;
            r.is_max = true;
            return r;
        case KnobValue::Text:
            r.ok = true;
            r.is_text = true;
            r.text = k.value.text;
            return r;
        case KnobValue::Int:
            r.ok = true;
            r.num = k.value.num;
            return r;
        case KnobValue::Fact: r.why = "fact " + k.value.text + " not resolved for this event"; return r;  // facts.hpp resolves them first
        case KnobValue::Percent: break;
    }
    std::optional<int64_t> base;
    const char* bname = "";
    KnobId bid = k.id;
    switch (d.pct) {
        case PctBase::CpuShares:
            base = res.cpu_shares;
            bname = "cpu.shares";
            bid = KnobId::CpuShares;
            break;
        case PctBase::CpuQuota:
            base = res.cpu_quota;
            bname = "cpu.quota";
            bid = KnobId::CpuQuota;
            break;
        case PctBase::MemLimit:
            base = res.mem_limit;
            bname = "memory.limit";
            bid = KnobId::MemoryLimit;
            break;
        case PctBase::PidsLimit:
            base = res.pids_limit;
            bname = "pids.limit";
            bid = KnobId::PidsMax;
            break;
        case PctBase::None: break;
    }
    const std::string pct = std::to_string(k.value.num) + "%";
    if (bid != k.id) {
        for (const auto& o : all) {
            if (o.id != bid) continue;
            Resolved ro = resolve(o, res, all);
            const std::string okey = knob_def(bid).key;
            if (!ro.ok) {
                r.why = "the class's " + okey + " is not applicable (" + ro.why + "): no value to take " + pct + " of";
                return r;
            }
            if (ro.is_max) {
                r.why = "the class's " + okey + " is max: no limit to take " + pct + " of";
                return r;
            }
            base = ro.num;
            break;
        }
    }
    if (!base || *base <= 0) {
        r.why = std::string("no OCI ") + bname + " to take " + pct + " of";
        return r;
    }
    // base × pct / 100 without overflow (pct ≤ 100)
    r.num = *base > INT64_MAX / 100 ? (*base / 100) * k.value.num : (*base * k.value.num) / 100;
    if (r.num < d.min) r.num = d.min;
    if (r.num > d.max) r.num = d.max;
    r.ok = true;
    return r;
}

std::string num_or(const Resolved& r, const char* max_word) { return r.is_max ? std::string(max_word) : std::to_string(r.num); }

/// memory_swap = 0 means "unset" (runc: Resources.MemorySwap 0 is not written, on v1 and v2).
bool swap_unset(const Resolved& r) { return r.ok && !r.is_max && !r.is_text && r.num == 0; }

/// "20" → 20; nullopt for anything that is not a plain integer in [1, 10000] (cpu.weight's range).
std::optional<uint64_t> read_weight(Kernel* k, const std::string& rel) {
    if (!k) return std::nullopt;
    auto t = k->read(Root::Cgroup, rel);
    if (!t) return std::nullopt;
    uint64_t v = 0;
    size_t i = 0;
    while (i < t->size() && (*t)[i] >= '0' && (*t)[i] <= '9' && i < 6) v = v * 10 + static_cast<uint64_t>((*t)[i++] - '0');
    if (i == 0 || v < 1 || v > 10000) return std::nullopt;
    while (i < t->size() && ((*t)[i] == '\n' || (*t)[i] == ' ')) ++i;
    if (i != t->size()) return std::nullopt;
    return v;
}

/// The reason of a knob left to another plugin (skipped lines, explain, records).
std::string left_reason(const LeftField& lf) { return "left to " + lf.plugin + " (settings.leave_to_others: " + lf.field + ")"; }

struct Builder {
    const PlanInput& in;
    Plan& plan;
    Mode mode;
    bool v2;
    bool nri08;
    std::optional<WeightChoice>* weight;  ///< the event's formula, decided at the first conversion (shared by the pod builder)

    static std::string label(const std::string& knob, const std::string& scope) { return (scope == "container" ? "" : scope + ":") + knob; }

    void skip(const std::string& knob, const std::string& scope, const std::string& why) { plan.skipped.push_back(label(knob, scope) + ": " + why); }
    void refuse(const std::string& knob, const std::string& scope, const std::string& why) {
        plan.refused.push_back(label(knob, scope) + ": " + why);
    }

    Write& add(const std::string& knob, KnobId id, const std::string& scope, Root root, std::string rel, std::string value) {
        Write w;
        w.knob = knob;
        w.id = id;
        w.scope = scope;
        w.root = root;
        w.rel = std::move(rel);
        w.value = std::move(value);
        plan.writes.push_back(std::move(w));
        return plan.writes.back();
    }

    std::string cg_file(const char* ctrl, const std::string& dir, const std::string& file) const {
        if (v2) return dir.empty() ? file : dir + "/" + file;
        std::string base = ctrl;
        return base + (dir.empty() ? "" : "/" + dir) + "/" + file;
    }

    /// The formula of this event's cpu.shares → cpu.weight conversions: the policy's, or (auto)
    /// decide_weight_formula on the request, its pod and the runtime probe; decided once, at the
    /// first conversion (no kernel read for events that convert nothing).
    const WeightChoice& weight_choice() {
        if (*weight) return **weight;
        WeightChoice c;
        const WeightFormula pf = in.policy ? in.policy->cpu_weight_formula : WeightFormula::Auto;
        if (pf != WeightFormula::Auto) {
            c.formula = pf;
            c.why = "settings.cpu_weight_formula";
            weight->emplace(std::move(c));
            return **weight;
        }
        const Request& req = *in.req;
        std::optional<WeightPair> own;
        std::string own_none;
        if (!in.own_weight_evidence) {
            own_none = "the container's own cpu.weight is the value checked, not evidence";
        } else if (!req.resources.cpu_shares || *req.resources.cpu_shares <= 0) {
            own_none = "no OCI shares in the request: no evidence of its own";
        } else if (!in.paths) {
            own_none = "no cgroupsPath: no evidence of its own";
        } else if (auto w = read_weight(in.kernel, cg_file("", in.paths->container, "cpu.weight"))) {
            own = WeightPair{static_cast<uint64_t>(*req.resources.cpu_shares), *w, req.is_sandbox ? "sandbox's own" : "container's own"};
        } else {
            own_none = "no cpu.weight of its own yet";
        }
        weight->emplace(decide_weight_formula(own, own_none, in.sibling_weights, in.runtime_formula));
        return **weight;
    }

    bool pod_has(const std::string& file) const {
        if (!in.paths || in.paths->root_or_default || !in.kernel) return false;
        return in.kernel->exists(Root::Cgroup, cg_file("", in.paths->pod, file));
    }

    /// Can the runtime apply this container knob from an NRI adjustment (native NRI mode)?
    /// A container cpu_shares whose cgroup v2 cpu.weight the class converts itself
    /// (ClassDef::ctr_weight_formula, issue #32 §6): the runtime gets the shares as usual at
    /// CreateContainer / UpdateContainer (its own formula), and cpu.weight is then written with the
    /// class's formula, as the node agent's reconciler rewrites it after the runtime.
    bool ctr_weight_rewrite(const KnobSetting& k, const std::string& scope) const {
        const ClassDef* cls = in.decision.cls;
        return v2 && k.id == KnobId::CpuShares && scope == "container" && cls && cls->ctr_weight_formula_set &&
               cls->ctr_weight_formula != WeightFormula::Auto;
    }

    /// Can the runtime apply this container knob from an NRI adjustment (native NRI mode)? The
    /// gate of the knob's row in the NRI field table (knobs.hpp NriGate); false for a knob with
    /// no NRI field (openEuler qos levels, soft limit, raw files: written directly).
    bool nri_capable(const KnobSetting& k) const {
        const NriField* f = nri_carrier(k.id);
        if (!f || f->value == NriValue::Process) return false;  // process knobs: process_knob
        switch (f->gate) {
            case NriGate::Always: return true;
            case NriGate::Nri08: return nri08;
            case NriGate::V2PodFile: return v2 && pod_has(knob_def(k.id).v2_file);
            case NriGate::V2PodIo: return v2 && (pod_has("io.bfq.weight") || pod_has("io.weight"));
            default: return false;
        }
    }

    /// The NRI ContainerAdjustment field (JSON pointer below the adjustment) and value that
    /// carry this knob, if any: its row of the NRI field table, in that row's NriValue form
    /// (cgroup v2 files go through linux.resources.unified, on cgroup v2 only).
    std::optional<std::pair<std::string, json>> nri_field(const KnobSetting& k, const Resolved& r) const {
        const NriField* f = nri_carrier(k.id);
        if (!f || f->value == NriValue::Process) return std::nullopt;
        const int64_t n = r.is_max ? -1 : r.num;
        auto field = [&](json v) { return std::make_optional(std::make_pair(std::string(f->ptr), std::move(v))); };
        switch (f->value) {
            case NriValue::OptInt: return field(json{{"value", n}});
            case NriValue::Int: return field(json(n));
            case NriValue::Text: return field(json(r.text));
            case NriValue::OptText: return field(json{{"value", r.text}});
            default: break;
        }
        if (!v2) return std::nullopt;
        switch (f->value) {
            case NriValue::UnifiedNum: return field(json(std::to_string(n)));
            case NriValue::UnifiedMax: return field(json(num_or(r, "max")));
            case NriValue::UnifiedIoWeight:
                // opencontainers/cgroups fs2/io.go setIo: BFQ's io.bfq.weight takes the blkio
                // weight as is when the file exists, else io.weight with the linear conversion.
                if (pod_has("io.bfq.weight")) return std::make_pair(std::string("/linux/resources/unified/io.bfq.weight"), json(std::to_string(n)));
                return field(json("default " + std::to_string(blkio_to_io_weight(static_cast<uint64_t>(n)))));
            default: return std::nullopt;
        }
    }

    /// The class's memory limit for this request, as runc sees Resources.Memory: -1 unlimited,
    /// nullopt unknown (neither the class nor the request sets one).
    std::optional<int64_t> effective_memory_limit(const std::vector<KnobSetting>& all) const {
        std::optional<int64_t> limit = in.req->resources.mem_limit;
        for (const auto& o : all)
            if (o.id == KnobId::MemoryLimit) {
                Resolved lo = resolve(o, in.req->resources, all);
                if (lo.ok) limit = lo.is_max ? -1 : lo.num;
            }
        if (limit && *limit == 0) return std::nullopt;
        return limit;
    }

    /// The cgroup v2 value of knob `k` (resolved `r`, request key `key`) on cgroup directory
    /// `dir`, with the file (`file`, the knob's v2 file unless the kernel's offers another) and
    /// the note of its conversion. False when nothing is to be written: the knob is written with
    /// another (cpu.max), or refused (the reason is in the plan).
    bool v2_value(const KnobSetting& k, const Resolved& r, const std::string& key, const std::string& scope, const std::string& dir,
                  const std::vector<KnobSetting>& all, std::string& file, std::string& value, std::string& note) {
        const Request& req = *in.req;
        switch (k.id) {
            case KnobId::CpuShares: {
                uint64_t s = static_cast<uint64_t>(r.num);
                // A class's pod_cpu_weight_formula: the pod-level conversion of the node agent
                // that writes the pod cgroup itself (koordlet's linear ConvertCPUSharesToWeight);
                // container knobs keep the runtime's (settings.cpu_weight_formula).
                const ClassDef* cls = in.decision.cls;
                if (scope == "pod" && cls && cls->pod_weight_formula_set && cls->pod_weight_formula != WeightFormula::Auto) {
                    value = std::to_string(shares_to_weight(s, cls->pod_weight_formula));
                    note = std::string(weight_formula_name(cls->pod_weight_formula)) + " of shares " + std::to_string(s) + " (classes." + cls->name +
                           ".pod_cpu_weight_formula)";
                    break;
                }
                if (ctr_weight_rewrite(k, scope)) {
                    value = std::to_string(shares_to_weight(s, cls->ctr_weight_formula));
                    note = std::string(weight_formula_name(cls->ctr_weight_formula)) + " of shares " + std::to_string(s) + " (classes." + cls->name +
                           ".container_cpu_weight_formula): the node agent's periodic rewrite of the "
                           "container's cpu.weight (koordlet's container reconciler, every 10 s), not the runtime's formula";
                    break;
                }
                const WeightChoice& wc = weight_choice();
                value = std::to_string(shares_to_weight(s, wc.formula));
                plan.weight_formula = wc.text();
                break;
            }
            case KnobId::CpuQuota:
            case KnobId::CpuPeriod: {
                // cpu.max = "$MAX $PERIOD": one write for both; keep what is not configured.
                if (k.id == KnobId::CpuPeriod) {
                    for (const auto& o : all)
                        if (o.id == KnobId::CpuQuota) return false;  // written together with the quota
                }
                std::string quota = "max", period;
                for (const auto& o : all) {
                    if (o.id != KnobId::CpuQuota && o.id != KnobId::CpuPeriod) continue;
                    Resolved ro = resolve(o, req.resources, all);
                    if (!ro.ok) continue;
                    if (o.id == KnobId::CpuQuota) quota = num_or(ro, "max");
                    else period = std::to_string(ro.num);
                }
                if (k.id == KnobId::CpuPeriod) {
                    // only the period: keep the current quota
                    auto cur = in.kernel ? in.kernel->read(Root::Cgroup, cg_file("", dir, "cpu.max")) : std::nullopt;
                    if (cur && !cur->empty()) quota = cur->substr(0, cur->find_first_of(" \n"));
                }
                value = period.empty() ? quota : quota + " " + period;
                break;
            }
            case KnobId::MemorySwap: {
                // OCI memory.swap is memory+swap; cgroup v2 memory.swap.max is swap alone.
                // opencontainers/cgroups utils.go ConvertMemorySwapToCgroupV2Value.
                if (r.is_max) {
                    value = "max";
                    break;
                }
                std::optional<int64_t> limit = effective_memory_limit(all);
                if (!limit) {
                    refuse(key, scope, "memory+swap needs a memory limit (runc)");
                    return false;
                }
                if (*limit == -1) {
                    value = std::to_string(r.num);  // unlimited memory: the swap value as is (runc)
                    break;
                }
                if (r.num < *limit) {
                    refuse(key, scope, "memory+swap " + std::to_string(r.num) + " is below the memory limit " + std::to_string(*limit));
                    return false;
                }
                value = std::to_string(r.num - *limit);
                break;
            }
            case KnobId::BlkioWeight:
                // opencontainers/cgroups fs2/io.go setIo: with the BFQ scheduler, io.bfq.weight
                // takes the blkio weight (10-1000) as is; else io.weight, converted.
                if (in.kernel && in.kernel->exists(Root::Cgroup, cg_file("", dir, "io.bfq.weight"))) {
                    file = "io.bfq.weight";
                    value = std::to_string(r.num);
                    note = "BFQ: io.bfq.weight takes the blkio weight as is (runc fs2 setIo)";
                } else {
                    value = "default " + std::to_string(blkio_to_io_weight(static_cast<uint64_t>(r.num)));
                }
                break;
            default: value = r.is_text ? r.text : num_or(r, "max");
        }
        return true;
    }

    /// Direct writes for one knob on cgroup directory `dir` (container or pod cgroup).
    void direct(const KnobSetting& k, const Resolved& r, const std::string& scope, const std::string& dir, const std::vector<KnobSetting>& all) {
        const KnobDef& d = knob_def(k.id);
        const std::string key = k.id == KnobId::Raw ? "raw:" + k.raw_file : std::string(d.key);
        const Request& req = *in.req;
        switch (k.id) {
            case KnobId::OomScoreAdj:
                if (!req.pid) return refuse(key, scope, "no pid in the request");
                add(key, k.id, scope, Root::Proc, std::to_string(*req.pid) + "/oom_score_adj", std::to_string(r.num));
                return;
            case KnobId::ResctrlGroup:
                if (!req.pid) return refuse(key, scope, "no pid in the request");
                add(key, k.id, scope, Root::Resctrl, r.text + "/tasks", std::to_string(*req.pid));
                return;
            case KnobId::Raw: add(key, k.id, scope, Root::Cgroup, cg_file(k.raw_ctrl.c_str(), dir, k.raw_file), r.text); return;
            case KnobId::BlkioThrottle: {
                // One write per device and limit, as runc writes OCI throttle devices
                // (opencontainers/cgroups fs/blkio.go Set: "MAJ:MIN RATE" to the key's
                // blkio.throttle.*_device file; fs2/io.go setIo: "MAJ:MIN rbps=RATE" etc. to
                // io.max — the kernel parses one device per write, other limits of the device
                // and other devices keep theirs). Nothing is cleared first (rubik's
                // clearAllBlkioThrottleFiles sets every listed device to 0 = unlimited).
                std::vector<ThrottleEntry> list;
                std::string err;
                if (!parse_throttle(r.text, list, err)) return refuse(key, scope, err);
                for (const auto& e : list) {
                    const std::string dev = std::to_string(e.major) + ":" + std::to_string(e.minor);
                    if (v2)
                        add(key, k.id, scope, Root::Cgroup, cg_file("", dir, "io.max"),
                            dev + " " + throttle_key_name(e.key) + "=" + std::to_string(e.rate));
                    else add(key, k.id, scope, Root::Cgroup, cg_file("blkio", dir, throttle_v1_file(e.key)), dev + " " + std::to_string(e.rate));
                }
                return;
            }
            default: break;
        }
        const char* f = v2 ? d.v2_file : d.v1_file;
        if (!f) return skip(key, scope, std::string("no cgroup ") + (v2 ? "v2" : "v1") + " file");
        std::string file = f;
        std::string value, note;
        if (!v2) {
            value = r.is_text ? r.text : num_or(r, "-1");
        } else if (!v2_value(k, r, key, scope, dir, all, file, value, note)) {
            return;
        }
        Write& added = add(key, k.id, scope, Root::Cgroup, cg_file(d.v1_ctrl ? d.v1_ctrl : "", dir, file), value);
        added.note = note;
        if (v2 && k.id == KnobId::CpuShares) added.from_shares = static_cast<uint64_t>(r.num);

        // opencontainers/cgroups fs/memory.go setMemoryAndSwap and utils.go
        // ConvertMemorySwapToCgroupV2Value: an unlimited memory limit without an explicit swap
        // limit makes swap unlimited too (on v1 the kernel would refuse memory above memsw).
        if (k.id == KnobId::MemoryLimit && r.is_max && !left(KnobId::MemorySwap)) {
            for (const auto& o : all)
                if (o.id == KnobId::MemorySwap && !swap_unset(resolve(o, req.resources, all))) return;
            const std::string sw = cg_file("memory", dir, v2 ? "memory.swap.max" : "memory.memsw.limit_in_bytes");
            if (in.kernel && in.kernel->exists(Root::Cgroup, sw))
                add("memory_swap", KnobId::MemorySwap, scope, Root::Cgroup, sw, v2 ? "max" : "-1").note =
                    "implied by memory_limit = max: swap unlimited too (runc)";
        }
    }

    /// NRI UpdateContainer: a CFS burst above the quota the update brings is lowered now, before
    /// the runtime applies the update (the relay replies after the child's writes).
    ///
    /// The kernel refuses a limited CFS quota below the group's burst: every write of
    /// cpu.cfs_quota_us / cpu.cfs_period_us / cpu.cfs_burst_us (v2: cpu.max, cpu.max.burst) is
    /// checked with the other two's current values, and "burst > quota" is -EINVAL
    /// (kernel/sched/core.c tg_set_cfs_bandwidth). runc orders the two itself only when it
    /// writes both: opencontainers/cgroups fs/cpu.go CpuGroup.Set and fs2/cpu.go setCPU write
    /// Resources.CpuBurst *before* the quota and, on EINVAL, again after it. Here runc never
    /// has the burst: NRI's LinuxCPU has no burst field (so the update cannot carry one), CRI
    /// UpdateContainerResources has none, runc 1.1 (Debian bookworm, our e2e nodes) does not
    /// know CpuBurst at all, and on cgroup v2 the update's `unified` cpu.max.burst is written by
    /// fs2 Manager.setUnified after setCPU wrote cpu.max. So a lowered limit (an in-place
    /// resize down) would fail in `runc update` with "cpu.max: invalid argument" while the old,
    /// larger burst is still in force. The write planned here is recorded like any other; the
    /// class's final burst follows the new quota afterwards, in the update's `unified`
    /// (cgroup v2, written by runc after cpu.max) or at PostUpdateContainer (cgroup v1).
    ///
    /// Applies when the class sets cpu_burst_us (the burst is nri-qos's): the value is the
    /// class's burst on the updated resources, or the new quota when that is not lower. A burst
    /// the class does not own is left alone and reported in `skipped`, with the failure it will
    /// cause. Nothing happens when the new quota is unlimited (any burst is valid then) or the
    /// burst is already within it.
    void lower_burst_first(const std::vector<KnobSetting>& list, const std::string* dir) {
        if (!dir || !in.kernel || left(KnobId::CpuBurst)) return;  // another plugin's burst: never written
        const KnobDef& d = knob_def(KnobId::CpuBurst);
        const KnobSetting* burst = nullptr;
        std::optional<int64_t> quota = in.req->resources.cpu_quota;
        for (const auto& k : list) {
            if (k.id == KnobId::CpuBurst) burst = &k;
            if (k.id != KnobId::CpuQuota) continue;
            Resolved q = resolve(k, in.req->resources, list);
            if (q.ok) quota = q.is_max ? std::optional<int64_t>(-1) : std::optional<int64_t>(q.num);
        }
        if (!quota || *quota <= 0) return;
        const std::string rel = cg_file(d.v1_ctrl, *dir, v2 ? d.v2_file : d.v1_file);
        auto cur_text = in.kernel->read(Root::Cgroup, rel);
        if (!cur_text) return;  // no burst file (kernel < 5.14, or no such cgroup): nothing to order
        int64_t cur = 0;
        if (std::sscanf(cur_text->c_str(), "%" SCNd64, &cur) != 1 || cur <= *quota) return;
        const std::string what = "the container's CFS burst " + std::to_string(cur) + " us is above the updated quota " + std::to_string(*quota) +
                                 " us, which the kernel refuses (EINVAL) while that burst is in force";
        if (!burst) {
            skip(d.key, "container",
                 what + "; the class does not set cpu_burst_us, so nri-qos leaves the burst alone and the runtime's update will fail");
            return;
        }
        int64_t value = *quota;
        Resolved r = resolve(*burst, in.req->resources, list);
        if (r.ok && !r.is_max && !r.is_text && r.num < value) value = r.num;
        add(d.key, KnobId::CpuBurst, "container", Root::Cgroup, rel, std::to_string(value)).note =
            "lowered before the runtime's update: " + what + " (runc writes the quota without the burst)";
    }

    /// Why nri-qos does not set a process knob itself, when the runtime cannot.
    static std::string no_own_write(KnobId id) {
        switch (id) {
            case KnobId::SchedPolicy:
            case KnobId::SchedNice:
                return "nri-qos does not call sched_setattr(2) on the container's process itself (not in its hook's seccomp allow-list; "
                       "threads already running would keep their policy)";
            case KnobId::IoClass:
            case KnobId::IoLevel:
                return "nri-qos does not call ioprio_set(2) on the container's process itself (not in its hook's seccomp allow-list; "
                       "threads already running would keep their priority)";
            default: return "no process can set another's memory policy (set_mempolicy(2) acts on the calling thread only)";
        }
    }

    /// A process-attribute knob (is_process_knob): into the CreateContainer adjustment when the
    /// runtime's NRI has the field (nri_api_minor >= process_knob_field's minimum: the runtime
    /// copies it into the OCI spec, containerd/nri pkg/runtime-tools/generate Generator.Adjust:
    /// AdjustIOPriority → process.ioPriority, AdjustLinuxScheduler → process.scheduler,
    /// AdjustMemoryPolicy → linux.memoryPolicy); else skipped with the reason. The two knobs of
    /// one NRI message are merged into it (class order: the first fills the defaults the second
    /// overrides): scheduler {policy, nice} (a nice without a policy: SCHED_OTHER), io_priority
    /// {class, priority} (a level without a class: IOPRIO_CLASS_BE; a class without a level: 4,
    /// the kernel's IOPRIO_NORM, or 0 for the idle class, which has no levels), memory_policy
    /// {mode, nodes}.
    void process_knob(const KnobSetting& k, const Resolved& r, const std::string& scope, json& adj) {
        const std::string key = knob_def(k.id).key;
        if (scope != "container") return skip(key, scope, "a process attribute: set under .container");
        int need = 0;
        const char* field = process_knob_field(k.id, need);
        const Request& req = *in.req;
        const bool nri = req.wire == Request::Wire::NriEvent;
        const int have = nri ? nri_api_minor(req.runtime_name, req.runtime_version) : 0;
        const std::string runtime = req.runtime_name.empty() ? std::string("the runtime") : req.runtime_name + " " + req.runtime_version;
        const std::string needs = std::string("NRI ") + field + " (NRI >= 0." + std::to_string(need) + ", containerd >= " +
                                  (need == 10   ? "2.2.0"
                                   : need == 11 ? "2.2.1"
                                                : "2.3.0") +
                                  ")";
        if (!nri) return skip(key, scope, "the v0.1 hook has no NRI adjustment to carry it in " + needs + "; " + no_own_write(k.id));
        if (have < need)
            return skip(key, scope, runtime + " speaks NRI 0." + std::to_string(have) + ", which has no " + needs + "; " + no_own_write(k.id));
        if (mode == Mode::NriStart) return;  // carried in the CreateContainer adjustment: the runtime applied it
        if (mode != Mode::NriCreate)
            return skip(key, scope,
                        std::string("set by the runtime at CreateContainer only: an NRI update carries linux.resources, not ") + field +
                            "; the running container keeps what it was created with");
        const auto& ch = knob_choices(k.id);
        auto name = [&](int64_t i) { return std::string(ch.at(static_cast<size_t>(i)).nri_name); };
        const std::string shown = r.is_text ? r.text : ch.empty() ? std::to_string(r.num) : std::string(ch.at(static_cast<size_t>(r.num)).name);
        plan.via_runtime.push_back(key + "=" + shown + " (NRI " + field + (ch.empty() ? "" : " " + name(r.num)) + ")");
        json& o = adj["linux"][field];
        switch (k.id) {
            case KnobId::SchedPolicy:
                o["policy"] = name(r.num);
                if (!o.contains("nice")) o["nice"] = 0;
                break;
            case KnobId::SchedNice:
                o["nice"] = r.num;
                if (!o.contains("policy")) o["policy"] = "SCHED_OTHER";
                break;
            case KnobId::IoClass:
                o["class"] = name(r.num);
                if (!o.contains("priority")) o["priority"] = ch.at(static_cast<size_t>(r.num)).nri == 3 ? 0 : 4;
                break;
            case KnobId::IoLevel:
                o["priority"] = r.num;
                if (!o.contains("class")) o["class"] = "IOPRIO_CLASS_BE";
                break;
            case KnobId::MemoryPolicy: o["mode"] = name(r.num); break;
            case KnobId::MemoryPolicyNodes: o["nodes"] = r.text; break;
            default: break;
        }
    }

    /// The settings.leave_to_others entry owning knob `id` (nullptr: nri-qos's to set).
    const LeftField* left(KnobId id) const {
        if (!in.policy) return nullptr;
        KnobSetting k;
        k.id = id;
        return left_to_other(in.policy->leave_to_others, k);
    }

    void knobs(const std::vector<KnobSetting>& list, const std::string& scope, const std::string* dir) {
        const bool nri_mode = mode == Mode::NriCreate || mode == Mode::NriStart || mode == Mode::NriUpdate || mode == Mode::NriSync;
        json adj = json::object();
        for (const auto& k : list) {
            const KnobDef& d = knob_def(k.id);
            const std::string key = k.id == KnobId::Raw ? "raw:" + k.raw_file : std::string(d.key);
            // Another NRI plugin owns it: neither in the adjustment/update nor written.
            if (const LeftField* lf = in.policy ? left_to_other(in.policy->leave_to_others, k) : nullptr) {
                skip(key, scope, left_reason(*lf));
                continue;
            }
            Resolved r = resolve(k, in.req->resources, list);
            if (!r.ok) {
                skip(key, scope, r.why);
                continue;
            }
            if (k.id == KnobId::MemorySwap && swap_unset(r)) {
                skip(key, scope, "0 means unset (runc): not written");
                continue;
            }
            if (is_process_knob(k.id)) {
                process_knob(k, r, scope, adj);
                continue;
            }
            auto field = scope == "container" ? nri_field(k, r) : std::nullopt;
            if (nri_mode && scope == "container" && !k.needs_cpuset.empty()) {
                // A quota lift paid for by a cpuset is never handed to the runtime with it: it is
                // written directly at StartContainer (and PostUpdateContainer), once the kernel
                // shows the container's cpuset.cpus as asked (sinks.hpp apply_plan).
                if (mode == Mode::NriCreate)
                    skip(key, scope, "written at StartContainer, after the container's cpuset " + k.needs_cpuset + " is read back");
                if (mode != Mode::NriStart) continue;
            } else if (nri_mode && ctr_weight_rewrite(k, scope)) {
                // The runtime converts the shares with its formula at create and update; the
                // class's formula is written over it at StartContainer / PostUpdateContainer and
                // at Synchronize (where the update then carries no shares to undo it).
                if ((mode == Mode::NriCreate || mode == Mode::NriUpdate) && field) {
                    adj[json::json_pointer(field->first)] = field->second;
                    continue;
                }
            } else if (nri_mode && scope == "container" && field && nri_capable(k) &&
                       !(mode == Mode::NriSync && field->first.rfind("/linux/resources/", 0) != 0)) {
                // (At Synchronize the container runs and NRI's ContainerUpdate carries only
                // linux.resources: oom_score_adj is written directly below, never dropped.)
                // The runtime applies it from the adjustment; at StartContainer it is already there.
                if (mode != Mode::NriStart) adj[json::json_pointer(field->first)] = field->second;
                continue;
            }
            if (mode == Mode::NriCreate || mode == Mode::NriUpdate) continue;  // written at StartContainer
            size_t before = plan.writes.size();
            if (!dir && k.id != KnobId::OomScoreAdj && k.id != KnobId::ResctrlGroup) {
                refuse(key, scope, "no cgroupsPath in the request");
                continue;
            }
            static const std::string none;
            direct(k, r, scope, dir ? *dir : none, list);
            if (!k.needs_cpuset.empty() && plan.writes.size() > before) plan.writes[before].needs_cpuset = k.needs_cpuset;
            // A fact value says how it was computed (facts.hpp), first in the write's note.
            if (!k.note.empty() && plan.writes.size() > before) {
                std::string& n = plan.writes[before].note;
                n = k.note + (n.empty() ? "" : "; " + n);
            }
            // v0.1: report in NRI terms what was written (finalised after the writes ran).
            if (field && plan.writes.size() > before) {
                plan.writes[before].nri_ptr = field->first;
                plan.writes[before].nri_value = field->second;
            }
        }
        if (scope == "container" && mode == Mode::NriUpdate) lower_burst_first(list, dir);
        if (scope != "container" || adj.empty()) return;
        if (mode == Mode::NriUpdate || mode == Mode::NriSync) {
            if (adj.contains("linux") && adj["linux"].contains("resources")) plan.update = adj["linux"]["resources"];
            return;
        }
        plan.adjustment = adj;
    }
};

/// Group the plan's writes into the sink's steps (see Step): the cpu files of one cgroup, and on
/// cgroup v1 memory.limit_in_bytes with memory.memsw.limit_in_bytes of one cgroup. A step sits
/// where its first write was; the others keep their order.
void sequence(Plan& plan, bool v2) {
    std::vector<std::pair<std::string, size_t>> groups;  // group key → index into plan.steps
    for (size_t i = 0; i < plan.writes.size(); ++i) {
        const Write& w = plan.writes[i];
        std::string key;
        if (w.root == Root::Cgroup) {
            size_t slash = w.rel.rfind('/');
            std::string dir = slash == std::string::npos ? std::string() : w.rel.substr(0, slash);
            switch (w.id) {
                case KnobId::CpuShares:
                case KnobId::CpuWeight:
                case KnobId::CpuPeriod:
                case KnobId::CpuQuota:
                case KnobId::CpuBurst:
                case KnobId::CpuIdle: key = "cpu\n" + dir; break;
                case KnobId::MemoryLimit:
                case KnobId::MemorySwap:
                    if (!v2) key = "mem\n" + dir;
                    break;
                default: break;
            }
        }
        size_t g = groups.size();
        for (size_t j = 0; !key.empty() && j < groups.size(); ++j)
            if (groups[j].first == key) g = j;
        if (!key.empty() && g < groups.size()) {
            plan.steps[groups[g].second].w.push_back(i);
            continue;
        }
        Step s;
        s.kind = key.empty() ? Step::Single : key[0] == 'c' ? Step::Cpu : Step::MemorySwap;
        s.w.push_back(i);
        if (!key.empty()) groups.emplace_back(key, plan.steps.size());
        plan.steps.push_back(std::move(s));
    }
    for (auto& s : plan.steps) {
        if (s.w.size() == 1) s.kind = Step::Single;
        if (s.kind != Step::MemorySwap) continue;
        if (s.w.size() == 2 && plan.writes[s.w[0]].id == KnobId::MemorySwap) std::swap(s.w[0], s.w[1]);
        if (s.w.size() != 2 || plan.writes[s.w[0]].id != KnobId::MemoryLimit || plan.writes[s.w[1]].id != KnobId::MemorySwap)
            s.kind = Step::Cpu;  // not the limit/memsw pair: the generic retry still applies
    }
}

}  // namespace

Plan build_plan(const PlanInput& in) {
    Plan plan;
    plan.decision = in.decision;
    plan.kube_qos = in.kube_qos;
    plan.layout = in.layout;
    if (in.paths) plan.driver = in.paths->driver;
    plan.adjustment = nullptr;
    plan.update = nullptr;
    const Request& req = *in.req;
    const bool nri = req.wire == Request::Wire::NriEvent;
    if (nri) plan.nri_api = nri_api_level(req.runtime_name, req.runtime_version);

    Mode mode = Mode::None;
    bool pod_knobs = false;
    switch (req.event) {
        case Event::Create:
            if (req.is_sandbox) pod_knobs = true;
            else mode = Mode::Direct;
            break;
        case Event::Update:
            if (!req.is_sandbox) mode = Mode::Direct;
            break;
        case Event::RunPodSandbox: pod_knobs = true; break;
        case Event::CreateContainer: mode = Mode::NriCreate; break;
        // A container the relay first saw CREATED in its Synchronize (Request::unadjusted): no
        // adjustment of ours reached its creation, so every knob is written here, in runc's order.
        case Event::StartContainer: mode = req.unadjusted ? Mode::Direct : Mode::NriStart; break;
        case Event::UpdateContainer: mode = Mode::NriUpdate; break;
        // After the runtime applied an update (which may rewrite files nri-qos wrote itself, e.g.
        // cpu.weight from the spec's shares): what StartContainer writes, on the updated values.
        case Event::PostUpdateContainer: mode = Mode::NriStart; break;
        case Event::UpdatePodSandbox:
            pod_knobs = true;
            break;  // kubelet rewrote the pod cgroup
        // Registration/reconnect: a pod as at RunPodSandbox (its pod knobs), a container as
        // UpdateContainer (NRI fields, applied by the runtime) plus StartContainer (the rest).
        case Event::Synchronize:
            if (req.is_sandbox) pod_knobs = true;
            else mode = Mode::NriSync;
            break;
        // After the relay answered the pass (its deadline came first): no reply can carry an
        // update any more, so every knob of the container is written directly, in runc's order.
        case Event::SynchronizeLate:
            if (req.is_sandbox) pod_knobs = true;
            else mode = Mode::Direct;
            break;
        default: break;
    }
    std::optional<WeightChoice> weight;
    Builder b{in, plan, mode, in.layout == Layout::V2, plan.nri_api == "0.8+", &weight};
    const ClassDef& cls = *in.decision.cls;
    if (pod_knobs && !cls.pod.empty()) {
        auto key = [](const KnobSetting& k) { return k.id == KnobId::Raw ? "raw:" + k.raw_file : std::string(knob_def(k.id).key); };
        if (!in.paths) {
            for (const auto& k : cls.pod) b.refuse(key(k), "pod", "no cgroupsPath in the request");
        } else if (!in.paths->no_pod.empty()) {
            // Never write pod knobs at the hierarchy root (or into system.slice): they would
            // apply to every process on the node.
            for (const auto& k : cls.pod) b.refuse(key(k), "pod", in.paths->no_pod + " (pod knobs are never written there)");
        } else {
            Builder pb{in, plan, Mode::Direct, b.v2, b.nri08, &weight};
            pb.knobs(cls.pod, "pod", &in.paths->pod);
        }
    }
    // The sandbox (pause) container's own cgroup, at the sandbox's events: the cgroupsPath of the
    // sandbox request is that container's (policy.hpp ClassDef::sandbox). Written directly.
    if (pod_knobs && !cls.sandbox.empty()) {
        auto key = [](const KnobSetting& k) { return k.id == KnobId::Raw ? "raw:" + k.raw_file : std::string(knob_def(k.id).key); };
        if (!in.paths) {
            const std::string why = nri ? "the runtime gave no sandbox cgroups_path (PodSandbox linux.cgroups_path is empty: "
                                          "no sandbox container spec, e.g. a sandboxer without a pause container)"
                                        : "no cgroupsPath in the sandbox request";
            for (const auto& k : cls.sandbox) b.skip(key(k), "sandbox", why);
        } else {
            Builder sb{in, plan, Mode::Direct, b.v2, b.nri08, &weight};
            sb.knobs(cls.sandbox, "sandbox", &in.paths->container);
        }
    }
    if (mode != Mode::None && !cls.container.empty()) b.knobs(cls.container, "container", in.paths ? &in.paths->container : nullptr);
    // Pod-level sums over the pod's containers (facts.hpp pod_sum), after the container's own knobs.
    if (!pod_knobs && !in.pod_refresh.empty()) {
        if (!in.paths) {
            for (const auto& k : in.pod_refresh) b.skip(knob_def(k.id).key, "pod", "no cgroupsPath in the request");
        } else if (!in.paths->no_pod.empty()) {
            for (const auto& k : in.pod_refresh) b.refuse(knob_def(k.id).key, "pod", in.paths->no_pod + " (pod knobs are never written there)");
        } else {
            Builder pb{in, plan, Mode::Direct, b.v2, b.nri08, &weight};
            pb.knobs(in.pod_refresh, "pod", &in.paths->pod);
        }
    }
    sequence(plan, b.v2);
    return plan;
}

std::vector<std::string> leave_to_others(ClassDef& cls, const Policy& p) {
    std::vector<std::string> skipped;
    if (p.leave_to_others.empty()) return skipped;
    for (auto* list : {&cls.container, &cls.pod, &cls.sandbox}) {
        const std::string prefix = list == &cls.pod ? "pod:" : list == &cls.sandbox ? "sandbox:" : "";
        auto keep = list->begin();
        for (auto it = list->begin(); it != list->end(); ++it) {
            if (const LeftField* lf = left_to_other(p.leave_to_others, *it)) {
                const std::string key = it->id == KnobId::Raw ? "raw:" + it->raw_file : std::string(knob_def(it->id).key);
                skipped.push_back(prefix + key + ": " + left_reason(*lf));
                continue;
            }
            if (keep != it) *keep = std::move(*it);
            ++keep;
        }
        list->erase(keep, list->end());
    }
    return skipped;
}

bool resources_adjusted(const Request& r) {
    return r.wire == Request::Wire::NriEvent && !r.is_sandbox && (r.event == Event::StartContainer || r.event == Event::PostUpdateContainer);
}

bool settle_adjusted_percentages(ClassDef& cls, const Request& r) {
    bool changed = false;
    const bool nri08 = nri_api_level(r.runtime_name, r.runtime_version) == "0.8+";
    for (auto& k : cls.container) {
        if (k.value.kind != KnobValue::Percent) continue;
        std::optional<int64_t> now;
        switch (k.id) {
            case KnobId::CpuShares: now = r.resources.cpu_shares; break;
            case KnobId::CpuQuota: now = r.resources.cpu_quota; break;
            case KnobId::MemoryLimit: now = r.resources.mem_limit; break;
            case KnobId::PidsMax:
                if (nri08) now = r.resources.pids_limit;
                break;
            default: break;
        }
        if (!now || *now <= 0) continue;
        k.note = std::to_string(k.value.num) + "% already applied by the runtime from nri-qos's adjustment: the request's " + knob_def(k.id).key +
                 " " + std::to_string(*now);
        k.value.kind = KnobValue::Int;
        k.value.num = *now;
        changed = true;
    }
    return changed;
}

WeightChoice decide_weight_formula(const std::optional<WeightPair>& own, const std::string& own_none,
                                   const std::function<std::vector<WeightPair>()>& siblings,
                                   const std::function<std::optional<RuntimeFormula>()>& runtime_of) {
    WeightChoice c;
    std::vector<std::string> nots;  // evidence looked at that decided nothing, in order
    auto fits = [&](const WeightPair& p) -> WeightFit {
        WeightFit f = weight_fit(p.shares, p.weight);
        if (f == WeightFit::Both)
            nots.push_back(p.what + " cpu.weight " + std::to_string(p.weight) + " of shares " + std::to_string(p.shares) + " fits both formulas");
        else if (f == WeightFit::None)
            nots.push_back(p.what + " cpu.weight " + std::to_string(p.weight) + " fits no formula of shares " + std::to_string(p.shares) +
                           " (written by someone else)");
        return f;
    };
    auto decided = [&](const WeightPair& p, WeightFit f) {
        c.formula = f == WeightFit::Linear ? WeightFormula::Linear : WeightFormula::LogQuadratic;
        c.why = p.what + " cpu.weight " + std::to_string(p.weight) + " = " + weight_formula_name(c.formula) + " of OCI shares " +
                std::to_string(p.shares);
        return c;
    };
    auto with_nots = [&](std::string why) {
        for (const auto& n : nots) why += "; " + n;
        return why;
    };
    if (own) {
        WeightFit f = fits(*own);
        if (f == WeightFit::Linear || f == WeightFit::LogQuadratic) return decided(*own, f);
    } else if (!own_none.empty()) {
        nots.push_back(own_none);
    }
    if (siblings) {
        std::vector<WeightPair> sib = siblings();
        const WeightPair *lin = nullptr, *lq = nullptr;
        for (const auto& p : sib) {
            WeightFit f = weight_fit(p.shares, p.weight);
            if (f == WeightFit::Linear && !lin) lin = &p;
            if (f == WeightFit::LogQuadratic && !lq) lq = &p;
        }
        if (lin && lq) {
            nots.push_back(lin->what + " (linear) and " + lq->what + " (log-quadratic) disagree");
        } else if (lin || lq) {
            decided(lin ? *lin : *lq, lin ? WeightFit::Linear : WeightFit::LogQuadratic);
            c.why = with_nots(c.why);
            return c;
        } else if (!sib.empty()) {
            nots.push_back("the pod's " + std::to_string(sib.size()) + " other pair(s) fit both formulas or none");
        }
    }
    std::optional<RuntimeFormula> runtime = runtime_of ? runtime_of() : std::nullopt;
    if (runtime && runtime->formula != WeightFormula::Auto) {
        c.formula = runtime->formula;
        c.why = with_nots(runtime->version + " (" + runtime->binary + " --version, cached in the state dir runc-formula)");
        return c;
    }
    c.formula = WeightFormula::LogQuadratic;
    c.why = with_nots(runtime ? "default (runtime " + runtime->binary + " reported no known version)"
                              : "default (no pair decided, runtime not probed: run nri-qos check or register)");
    return c;
}

void finalize_adjustment(Plan& plan) {
    json adj = json::object();
    for (const auto& w : plan.writes)
        if (!w.nri_ptr.empty() && (w.status == Write::Applied || w.status == Write::Planned)) adj[json::json_pointer(w.nri_ptr)] = w.nri_value;
    if (!adj.empty()) plan.adjustment = adj;
}

}  // namespace nriqos
