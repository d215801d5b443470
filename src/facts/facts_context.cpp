// The evaluation context of the fact readers (issue #23, split out of facts.cpp): Outcome's
// constructors and the members of Ctx (facts_internal.hpp) that every seed system's readers use —
// the request's carriers (the extended-resource-spec cache, a pinned cpuset's check), the CFS
// quota and period the container and the pod have, the CPUs a container asks for, and its NUMA
// placement (numa.hpp). The raise check of the trust rule (Ctx::raise_of) is in facts.cpp.
#include "facts/facts_internal.hpp"

#include <algorithm>

#include "os/cpuset.hpp"

namespace nriqos {
namespace facts_internal {

Outcome value_int(int64_t n, std::string calc) {
    Outcome o;
    o.s = Outcome::Value;
    o.v.kind = KnobValue::Int;
    o.v.num = n;
    o.calc = std::move(calc);
    return o;
}
Outcome value_max(std::string calc) {
    Outcome o;
    o.s = Outcome::Value;
    o.v.kind = KnobValue::Max;
    o.calc = std::move(calc);
    return o;
}
Outcome value_text(std::string t, std::string calc) {
    Outcome o;
    o.s = Outcome::Value;
    o.v.kind = KnobValue::Text;
    o.v.text = std::move(t);
    o.calc = std::move(calc);
    return o;
}
Outcome absent(std::string why) {
    Outcome o;
    o.s = Outcome::Absent;
    o.why = std::move(why);
    return o;
}
Outcome absent_ann(const char* key, const std::string& tail) {
    Outcome o = absent(std::string("no ") + key + " annotation" + tail);
    o.missing_key = key;
    return o;
}
Outcome error(std::string why) {
    Outcome o;
    o.s = Outcome::Error;
    o.why = std::move(why);
    return o;
}

std::string q(const std::string& s) {
    std::string o = "\"";
    for (char c : s.substr(0, 64)) o += (static_cast<unsigned char>(c) < 0x20 || c == '"') ? '?' : c;
    return o + (s.size() > 64 ? "...\"" : "\"");
}

NumaRequest Ctx::numa_request() const {
    NumaRequest rq;
    rq.sysfs_root = in.sysfs_root;
    rq.cgroup_root = in.cgroup_root;
    rq.kubelet_cpu_state = in.kubelet_cpu_state;
    rq.layout = in.layout;
    rq.container_id = r.id;
    rq.sandbox_id = r.sandbox_id;
    rq.pod_uid = r.pod_uid;
    if (in.paths) {
        rq.pod_dir = in.paths->pod;
        rq.ctr_dir = in.paths->container;
    }
    rq.dry_run = in.dry_run;
    return rq;
}

std::string Ctx::pin_check(const std::string& set) {
    if (!pin_done) {
        pin_done = true;
        if (!in.paths) {
            pin_error = "no cgroupsPath in the request: the cpuset cannot be checked";
        } else if (std::string lerr = lock(); !lerr.empty()) {
            pin_error = lerr;
        } else {
            try {
                const CpuSet want = *CpuSet::parse(set);
                const NumaRequest rq = numa_request();
                pin_how = check_pinned_cpuset(rq, want, st);
                if (!in.dry_run) {
                    pending = pin_record(rq, want, true);
                    pending_pin = true;
                }
            } catch (const InputError& ex) { pin_error = ex.what(); }
        }
    }
    return pin_error;
}

std::optional<Outcome> Ctx::ers_problem() {
    if (!ers_read) {
        ers_read = true;
        if (const std::string* a = ann(kExtRes)) {
            try {
                ers = parse_extended_resource_spec(*a);
            } catch (const InputError& e) { ers_error = e.what(); }
        }
    }
    if (!ers_error.empty()) return error(ers_error);
    if (!ann(kExtRes)) return absent_ann(kExtRes, " (koordlet keeps kubelet's values)");
    if (!ers.present) return absent(std::string(kExtRes) + " lists no containers (koordlet keeps kubelet's values)");
    return std::nullopt;
}

const BatchResources* Ctx::ers_container(Outcome& why) {
    if (auto p = ers_problem()) {
        why = *p;
        return nullptr;
    }
    auto it = ers.containers.find(r.container_name);
    if (it == ers.containers.end()) {
        why = absent("container " + q(r.container_name) + " is not in " + kExtRes + " (koordlet keeps kubelet's values)");
        return nullptr;
    }
    return &it->second;
}

std::optional<int64_t> Ctx::container_quota(std::string& how) const {
    if (ctr_knobs)
        for (const auto& k : *ctr_knobs) {
            if (k.id != KnobId::CpuQuota) continue;
            if (k.value.kind == KnobValue::Int) {
                how = "the class's cpu_quota_us " + std::to_string(k.value.num);
                return k.value.num;
            }
            if (k.value.kind == KnobValue::Max) {
                how = "the class's cpu_quota_us max";
                return std::nullopt;
            }
            if (k.value.kind == KnobValue::Percent && r.resources.cpu_quota && *r.resources.cpu_quota > 0) {
                int64_t v = *r.resources.cpu_quota / 100 * k.value.num + (*r.resources.cpu_quota % 100) * k.value.num / 100;
                how = "the class's cpu_quota_us " + std::to_string(k.value.num) + "% of " + std::to_string(*r.resources.cpu_quota);
                return v;
            }
        }
    if (r.resources.cpu_quota && *r.resources.cpu_quota > 0) {
        how = "the container's CFS quota " + std::to_string(*r.resources.cpu_quota);
        return *r.resources.cpu_quota;
    }
    how = "the container has no CFS quota";
    return std::nullopt;
}

int64_t Ctx::container_period() const {
    if (ctr_knobs)
        for (const auto& k : *ctr_knobs)
            if (k.id == KnobId::CpuPeriod && k.value.kind == KnobValue::Int) return k.value.num;
    return r.resources.cpu_period && *r.resources.cpu_period > 0 ? *r.resources.cpu_period : 100000;
}

std::optional<int64_t> Ctx::pod_quota(int64_t& period, std::string& how, std::string& err) const {
    period = 100000;
    if (pod_knobs)
        for (const auto& k : *pod_knobs) {
            if (k.id == KnobId::CpuPeriod && k.value.kind == KnobValue::Int) period = k.value.num;
        }
    if (pod_knobs)
        for (const auto& k : *pod_knobs) {
            if (k.id != KnobId::CpuQuota) continue;
            if (k.value.kind == KnobValue::Int) {
                how = "the class's pod cpu_quota_us " + std::to_string(k.value.num);
                return k.value.num;
            }
            if (k.value.kind == KnobValue::Max) {
                how = "the class's pod cpu_quota_us max";
                return std::nullopt;
            }
        }
    if (!in.paths || !in.kernel) {
        err = "no pod cgroup in the request";
        return std::nullopt;
    }
    const bool v2 = in.layout == Layout::V2;
    const std::string& pod = in.paths->pod;
    if (v2) {
        auto t = in.kernel->read(Root::Cgroup, pod + "/cpu.max");
        if (!t) {
            err = "cannot read " + pod + "/cpu.max";
            return std::nullopt;
        }
        std::string s = *t;
        while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
        size_t sp = s.find(' ');
        std::string qs = s.substr(0, sp);
        if (sp != std::string::npos) {
            if (auto p = go_parse_int(s.substr(sp + 1)); p && *p > 0) period = *p;
        }
        how = "the pod's cpu.max \"" + s + "\"";
        if (qs == "max") return std::nullopt;
        auto qv = go_parse_int(qs);
        if (!qv) {
            err = pod + "/cpu.max: unexpected \"" + s.substr(0, 40) + "\"";
            return std::nullopt;
        }
        return *qv;
    }
    auto t = in.kernel->read(Root::Cgroup, "cpu/" + pod + "/cpu.cfs_quota_us");
    auto p = in.kernel->read(Root::Cgroup, "cpu/" + pod + "/cpu.cfs_period_us");
    if (!t) {
        err = "cannot read cpu/" + pod + "/cpu.cfs_quota_us";
        return std::nullopt;
    }
    auto trim = [](std::string s) {
        while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
        return s;
    };
    if (p)
        if (auto pv = go_parse_int(trim(*p)); pv && *pv > 0) period = *pv;
    auto qv = go_parse_int(trim(*t));
    if (!qv) {
        err = "cpu/" + pod + "/cpu.cfs_quota_us: unexpected \"" + trim(*t).substr(0, 40) + "\"";
        return std::nullopt;
    }
    how = "the pod's cpu.cfs_quota_us " + std::to_string(*qv);
    if (*qv < 0) return std::nullopt;
    return *qv;
}

Outcome Ctx::untrusted_refusal(const std::string& what) const {
    Outcome o = error("refused: " + what + "; untrusted annotation " + untrusted_keys + " (declare it in [guarded.annotations] to trust it)");
    o.untrusted = true;
    return o;
}

unsigned Ctx::online_cpus(std::string& err) const {
    try {
        return read_topology(in.sysfs_root).online.count();
    } catch (const InputError& e) {
        err = e.what();
        return 0;
    }
}

unsigned Ctx::cpus_requested(std::string& how) const {
    if (in.paths && kube_qos_from_path(in.paths->pod) == KubeQos::BestEffort) {
        how = "a BestEffort pod has no CPU request";
        return 0;
    }
    if (r.resources.cpu_shares && *r.resources.cpu_shares > 2) {
        int64_t n = (*r.resources.cpu_shares + 1023) / 1024;
        how = "ceil(shares " + std::to_string(*r.resources.cpu_shares) + " / 1024) = " + std::to_string(n);
        return static_cast<unsigned>(std::max<int64_t>(1, std::min<int64_t>(n, CpuSet::kMaxId + 1)));
    }
    how =
        "the container has no CPU request (shares " + (r.resources.cpu_shares ? std::to_string(*r.resources.cpu_shares) : std::string("unset")) + ")";
    return 0;
}

unsigned Ctx::cpus_needed(std::string& how) const {
    std::string qh;
    auto quota = container_quota(qh);
    int64_t period = container_period();
    if (quota && *quota > 0) {
        int64_t n = (*quota + period - 1) / period;
        how = "ceil(quota " + std::to_string(*quota) + " / period " + std::to_string(period) + ") = " + std::to_string(n);
        return static_cast<unsigned>(std::max<int64_t>(1, std::min<int64_t>(n, CpuSet::kMaxId + 1)));
    }
    if (r.resources.cpu_shares && *r.resources.cpu_shares > 2) {
        int64_t n = (*r.resources.cpu_shares + 1023) / 1024;
        how = "ceil(shares " + std::to_string(*r.resources.cpu_shares) + " / 1024) = " + std::to_string(n);
        return static_cast<unsigned>(std::max<int64_t>(1, n));
    }
    how = "no CPU request: 1";
    return 1;
}

Outcome Ctx::numa_place(NumaMode mode, bool mems, const std::string& because, bool katalyst, const NumaSpan& span) {
    if (!trusted && (raises & kRaiseNumaReservation)) return untrusted_refusal("would reserve CPUs of a NUMA node (" + because + ")");
    if (numa_done && numa_mode != numa_mode_name(mode)) return error("one NUMA placement per container: the class mixes NUMA modes");
    if (!numa_done) {
        numa_done = true;
        numa_mode = numa_mode_name(mode);
        std::string how;
        NumaRequest rq = numa_request();
        rq.mode = mode;
        rq.span = span;
        rq.need = mode == NumaMode::Shared ? cpus_needed(how) : cpus_requested(how);
        if (katalyst && in.policy) {
            if (!in.policy->katalyst_reserved_cpus.empty()) rq.reserved_cpus = CpuSet::parse(in.policy->katalyst_reserved_cpus);
            rq.reserved_count = in.policy->katalyst_reserved_count;
        }
        if (!in.paths) {
            numa_error = "no cgroupsPath in the request";
        } else if (rq.need == 0) {
            // A placement that reserves CPUs is sized by the CPU request: a BestEffort pod, or
            // one without a request, never reserves a NUMA node.
            numa_absent = how + ": no " + numa_mode + " NUMA placement (it would reserve CPUs nobody requested)";
        } else if (std::string lerr = lock(); !lerr.empty()) {
            numa_error = lerr;
        } else {
            try {
                numa = place_numa(rq, st);
                if (numa->record) pending = std::move(numa->record);
                numa->why = numa_mode + " placement of " + how + " CPU(s): " + numa->why;
                if (because.size()) numa->why = because + "; " + numa->why;
            } catch (const InputError& ex) { numa_error = ex.what(); }
        }
    }
    if (!numa_absent.empty()) return absent(numa_absent);
    if (!numa) return error(numa_error);
    if (mems) return value_text(numa->nodes.str(), numa->why);
    return value_text(numa->cpus.str(), numa->why);
}
}  // namespace facts_internal
}  // namespace nriqos
