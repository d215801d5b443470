// The fact registry (model/fact_table.hpp): every fact's name, scope, the knobs it may feed, what it reads
// and the seed-system function it reproduces. Data only, so that the policy parser and the
// build-time compiler of the built-in policy (src/tools/policy-builtin-gen.cpp) link it without
// the readers; the evaluators are registered in facts.cpp entries() (a unit test checks both
// lists agree) and written in src/facts/facts_<seed system>.cpp.
#include <algorithm>
#include <vector>

#include "model/fact_table.hpp"

namespace nriqos {

namespace {

constexpr uint32_t B(KnobId k) { return uint32_t(1) << static_cast<unsigned>(k); }
constexpr uint32_t kBytesKnobs =
    B(KnobId::MemoryLimit) | B(KnobId::MemoryHigh) | B(KnobId::MemoryLow) | B(KnobId::MemoryMin) | B(KnobId::MemorySwap) | B(KnobId::MemorySoftLimit);
constexpr const char* kExtRes = "node.koordinator.sh/extended-resource-spec";
constexpr const char* kResStatus = "scheduling.koordinator.sh/resource-status";
constexpr const char* kVolcanoLevel = "volcano.sh/qos-level";
constexpr const char* kBurstKeys = "volcano.sh/enable-quota-burst,volcano.sh/quota-burst-time";
constexpr const char* kKatalystNuma =
    "katalyst.kubewharf.io/memory_enhancement,katalyst.kubewharf.io/qos_level,katalyst.kubewharf.io/cpu_enhancement";
constexpr const char* kColocation = "volcano.sh/colocation-config";
constexpr const char* kOomKeys = "koordinator.sh/oom-score-adj-spec,koordinator.sh/oom-score-adj";
constexpr const char* kVolcanoMemQos =
    "volcano-sh/volcano@ed72c7c815a9fd547a787134676f73d42e9d049c:"
    "pkg/agent/events/handlers/memoryqosv2/memoryqosv2_linux.go Handle, getMemoryQuantity, parseColocationConfig";
constexpr const char* kKatalystBurst = "katalyst.kubewharf.io/cpu_enhancement,katalyst.kubewharf.io/qos_level";

size_t edit_distance(std::string_view a, std::string_view b) {
    std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
    for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
    for (size_t i = 1; i <= a.size(); ++i) {
        cur[0] = i;
        for (size_t j = 1; j <= b.size(); ++j) cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
        std::swap(prev, cur);
    }
    return prev[b.size()];
}

}  // namespace

const std::vector<FactDef>& fact_table() {
    static const std::vector<FactDef> t = {
        {"koordinator.batch_cpu_shares", kFactContainer, B(KnobId::CpuShares), "shares", kExtRes,
         "koordinator-sh/koordinator@v1.8.0:pkg/koordlet/runtimehooks/hooks/batchresource/batch_resource.go SetContainerCPUShares",
         "MilliCPUToShares of the container's kubernetes.io/batch-cpu request (absent or ≤ 0: 2)", false, false, kRaiseSharesAboveKubelet, kExtRes,
         true},
        {"koordinator.batch_cfs_quota", kFactContainer, B(KnobId::CpuQuota), "us", kExtRes,
         "koordinator-sh/koordinator@v1.8.0:pkg/koordlet/runtimehooks/hooks/batchresource/batch_resource.go SetContainerCFSQuota",
         "batch-cpu limit (millicores) × 100000 / 1000, at least 1000; no limit: max", false, false, kRaiseQuotaLift, kExtRes, true},
        {"koordinator.batch_memory_limit", kFactContainer, kBytesKnobs, "bytes", kExtRes,
         "koordinator-sh/koordinator@v1.8.0:pkg/koordlet/runtimehooks/hooks/batchresource/batch_resource.go SetContainerMemoryLimit",
         "the container's kubernetes.io/batch-memory limit; no limit: max", false, false, kRaiseMemoryAbovePod, kExtRes, true},
        {"koordinator.pod_batch_cpu_shares", kFactPod, B(KnobId::CpuShares), "shares", kExtRes,
         "koordinator-sh/koordinator@v1.8.0:pkg/koordlet/runtimehooks/hooks/batchresource/batch_resource.go SetPodCPUShares",
         "MilliCPUToShares of the sum of the listed containers' batch-cpu requests", false, false, kRaiseSharesAboveKubelet, kExtRes, true},
        {"koordinator.pod_batch_cfs_quota", kFactPod, B(KnobId::CpuQuota), "us", kExtRes,
         "koordinator-sh/koordinator@v1.8.0:pkg/koordlet/runtimehooks/hooks/batchresource/batch_resource.go SetPodCFSQuota",
         "sum of the listed containers' batch-cpu limits × 100000 / 1000; max once one has none", false, false, kRaiseQuotaLift, kExtRes, true},
        {"koordinator.pod_batch_memory_limit", kFactPod, kBytesKnobs, "bytes", kExtRes,
         "koordinator-sh/koordinator@v1.8.0:pkg/koordlet/runtimehooks/hooks/batchresource/batch_resource.go SetPodMemoryLimit",
         "sum of the listed containers' batch-memory limits; max once one has none", false, false, kRaiseMemoryAbovePod, kExtRes, true},
        {"koordinator.cpuset", kFactContainer, B(KnobId::CpusetCpus), "cpus", kResStatus,
         "koordinator-sh/koordinator@v1.8.0:pkg/koordlet/runtimehooks/hooks/cpuset/cpuset.go SetContainerCPUSet (pkg/util/pod.go GetCPUSetFromPod)",
         "the \"cpuset\" koord-scheduler bound the pod to (LSE/LSR), if within the online CPUs and the pod cgroup's "
         "effective cpuset and clear of CPUs other pods hold exclusively",
         false, true, kRaiseCpusetPin, kResStatus, false},
        {"koordinator.cpuset_quota", kFactBoth, B(KnobId::CpuQuota), "us", kResStatus,
         "koordinator-sh/koordinator@v1.8.0:pkg/koordlet/runtimehooks/hooks/cpuset/cpuset.go UnsetContainerCPUQuota / UnsetPodCPUQuota",
         "max (CFS quota lifted) when the pod has a scheduler cpuset", false, true, kRaiseQuotaLift, kResStatus, false},
        {"volcano.qos_level", kFactBoth, B(KnobId::CpuQosLevel), "level", kVolcanoLevel,
         "volcano-sh/volcano@v1.15.1:pkg/agent/apis/extension/qos.go GetQosLevel", "LC/HLS 2, LS 1, BE -1, any other value 0", false, false,
         kRaiseQosLevel, kVolcanoLevel, false},
        {"volcano.memory_qos_level", kFactBoth, B(KnobId::MemoryQosLevel), "level", kVolcanoLevel,
         "volcano-sh/volcano@v1.15.1:pkg/agent/apis/extension/qos.go NormalizeQosLevel", "-1 for BE, else 0", false, false, 0, "", false},
        {"rubik.qos_level", kFactBoth, B(KnobId::CpuQosLevel) | B(KnobId::MemoryQosLevel), "level", "volcano.sh/preemptable (annotation or label)",
         "openeuler-mirror/rubik@v2.0.1:pkg/services/preemption/preemption.go SetQoSLevel (pkg/core/typedef/podinfo.go Offline)",
         "-1 when volcano.sh/preemptable is \"true\"; absent for online pods", false, false, 0, "", false},
        {"rubik.cache_limit", kFactContainer, B(KnobId::ResctrlGroup), "group", "volcano.sh/cache-limit (annotation), volcano.sh/preemptable",
         "openeuler-mirror/rubik@v2.0.1:pkg/services/dyncache/sync.go syncLevel, writeTasksToResctrl",
         "rubik_<level> of an offline pod: its cache-limit level, at most the class's default (default = \"<level>\", else max)", false, false, 0, "",
         false},
        // A throttle only lowers (it caps the container's block I/O below what it had: nothing),
        // so the pod's own annotation needs no trust: raises 0, no trust keys (issue #21).
        {"rubik.blkio_limit", kFactContainer, B(KnobId::BlkioThrottle), "devices",
         "volcano.sh/blkio-limit (annotation); the device nodes below /dev (--dev-root), sysfs dev/block",
         "openeuler-mirror/rubik@1b6fece7a319ebed2ece3dd74ae873633262ce41:pkg/services/iolimit/iolimit.go configIOLimit, "
         "parseIOLimitConfig, applyDeviceConfig, convertToMajorMinorImpl",
         "the annotation's device_{read,write}_{bps,iops} limits, each device a whole block disk of the node "
         "(MAJ:MIN, or /dev/<name> resolved by stat); unusable entries skipped with the reason",
         false, true, 0, "", false},
        {"volcano.cpu_burst_us", kFactContainer, B(KnobId::CpuBurst), "us",
         "volcano.sh/enable-quota-burst, volcano.sh/quota-burst-time; the effective CFS quota",
         "volcano-sh/volcano@v1.15.1:pkg/agent/events/handlers/cpuburst/cpu_burst_linux.go walkFunc; "
         "openeuler-mirror/rubik@v2.0.1:pkg/services/quotaburst/quotaburst.go setQuotaBurst",
         "enable-quota-burst true (Volcano): quota-burst-time capped at the quota, 0/absent = the quota; "
         "only quota-burst-time (rubik): that value, refused above the quota, without a quota or at ≥ period × CPUs",
         false, true, kRaiseBurstAboveQuota, kBurstKeys, false},
        {"volcano.pod_cpu_burst_us", kFactPod, B(KnobId::CpuBurst), "us", "the same annotations; the pod cgroup's CFS quota; the ledger",
         "volcano-sh/volcano@v1.15.1:pkg/agent/events/handlers/cpuburst/cpu_burst_linux.go Handle; "
         "openeuler-mirror/rubik@v2.0.1:pkg/services/quotaburst/quotaburst.go setPodQuotaBurst",
         "sum of the pod's containers' volcano.cpu_burst_us, rewritten as containers start and stop; "
         "none when the pod quota is unlimited",
         true, true, kRaiseBurstAboveQuota, kBurstKeys, false},
        // Volcano agent memoryqosv2 (feature MemoryQoSV2, off by default): cgroup v2 only, the
        // container cgroups of every pod that carries the annotation (issue #32 §3). memory.high
        // only throttles (below memory.max it changes nothing kubelet granted): raises nothing.
        {"volcano.memory_high", kFactContainer, B(KnobId::MemoryHigh), "bytes",
         "volcano.sh/colocation-config memoryQos.highRatio; the container's memory limit (OCI)", kVolcanoMemQos,
         "memory limit × highRatio / 100; max when highRatio ≥ 100, the limit is 0/none or the product is negative (cgroup v2 only)", false, false, 0,
         "", false},
        {"volcano.memory_low", kFactContainer, B(KnobId::MemoryLow), "bytes",
         "volcano.sh/colocation-config memoryQos.lowRatio; the container's memory request (Guaranteed: its limit, BestEffort: 0)", kVolcanoMemQos,
         "memory request × lowRatio / 100; max when negative (the agent writes \"max\" for a negative value; cgroup v2 only)", false, false,
         kRaiseMemoryProtection, kColocation, false},
        {"volcano.memory_min", kFactContainer, B(KnobId::MemoryMin), "bytes",
         "volcano.sh/colocation-config memoryQos.minRatio; the container's memory request (Guaranteed: its limit, BestEffort: 0)", kVolcanoMemQos,
         "memory request × minRatio / 100; max when negative (cgroup v2 only)", false, false, kRaiseMemoryProtection, kColocation, false},
        // koordlet OOMScoreAdj runtime hook (feature gate OOMScoreAdj, alpha, off by default).
        {"koordinator.oom_score_adj", kFactContainer, B(KnobId::OomScoreAdj), "score",
         "koordinator.sh/oom-score-adj-spec (container name → value), else koordinator.sh/oom-score-adj",
         "koordinator-sh/koordinator@a7a1b76bbf81abd26f9c377de1f31a60dd965f6e:pkg/koordlet/runtimehooks/hooks/oomscoreadj/helper.go "
         "getOOMScoreAdjForContainer (oom_score_adj.go SetContainerOOMScoreAdj)",
         "the container's value in the -spec map, else the pod-level annotation; outside [-1000, 1000] nothing (koordlet skips it)", false, false,
         kRaiseOomBelowKubelet, kOomKeys, false},
        {"katalyst.numa_cpus", kFactContainer, B(KnobId::CpusetCpus), "cpus",
         "katalyst.kubewharf.io/memory_enhancement numa_binding/numa_exclusive, katalyst.kubewharf.io/qos_level, "
         "katalyst.kubewharf.io/cpu_enhancement numa_number/numa_ids; sysfs, kubelet cpu_manager_state",
         "kubewharf/katalyst-core@v0.5.47:pkg/agent/qrm-plugins/cpu/dynamicpolicy/policy_allocation_handlers.go "
         "dedicatedCoresWithNUMABindingAllocationHandler / allocateNumaBindingCPUs",
         "NUMA node CPUs: dedicated_cores + numa_exclusive the fewest whole free nodes holding the CPU request, "
         "dedicated_cores the container's requested CPUs of one node (of exactly numa_number nodes when it is 2 or more), "
         "other levels a node's free CPUs; none for BestEffort or no request",
         false, true, kRaiseCpusetPin | kRaiseNumaReservation, kKatalystNuma, false},
        {"katalyst.numa_mems", kFactContainer, B(KnobId::CpusetMems), "nodes", "the same annotations; sysfs, kubelet cpu_manager_state",
         "kubewharf/katalyst-core@v0.5.47:pkg/agent/qrm-plugins/memory/dynamicpolicy/policy_allocation_handlers.go numaBindingAllocationHandler",
         "the NUMA node(s) of katalyst.numa_cpus", false, true, kRaiseNumaReservation, kKatalystNuma, false},
        {"katalyst.cpu_burst_us", kFactContainer, B(KnobId::CpuBurst), "us",
         "katalyst.kubewharf.io/cpu_enhancement cpu_burst_policy, cpu_burst_percent; the effective CFS quota",
         "kubewharf/katalyst-core@v0.5.47:pkg/agent/qrm-plugins/cpu/dynamicpolicy/cpuburst/manager.go UpdateCPUBurst "
         "(pkg/util/qos/cpu_enhancement.go GetPodCPUBurstPolicyFromCPUEnhancement)",
         "static: quota × cpu_burst_percent (default 100, at most 100) / 100; closed (and reclaimed_cores): 0; default: absent", false, false,
         kRaiseBurstAboveQuota, kKatalystBurst, false},
        {"numa.exclusive_cpus", kFactContainer, B(KnobId::CpusetCpus), "cpus", "sysfs node*/cpulist, kubelet cpu_manager_state",
         "nri-qos (Katalyst numa_exclusive semantics: policy_hint_handlers.go calculateHints)",
         "all CPUs of the fewest free NUMA nodes holding the CPU request (ceil shares/1024), lowest first", false, true,
         kRaiseCpusetPin | kRaiseNumaReservation, "", false},
        {"numa.exclusive_mems", kFactContainer, B(KnobId::CpusetMems), "nodes", "as numa.exclusive_cpus", "nri-qos",
         "the node(s) of numa.exclusive_cpus", false, true, kRaiseNumaReservation, "", false},
        {"numa.bound_cpus", kFactContainer, B(KnobId::CpusetCpus), "cpus", "sysfs node*/cpulist, cpu*/topology, kubelet cpu_manager_state",
         "nri-qos (Katalyst dedicated_cores numa_binding semantics: allocateNumaBindingCPUs TakeByTopology)",
         "the container's requested CPUs (ceil shares/1024) from one NUMA node, whole cores first", false, true,
         kRaiseCpusetPin | kRaiseNumaReservation, "", false},
        {"numa.bound_mems", kFactContainer, B(KnobId::CpusetMems), "nodes", "as numa.bound_cpus", "nri-qos", "the node of numa.bound_cpus", false,
         true, kRaiseNumaReservation, "", false},
        {"numa.shared_cpus", kFactContainer, B(KnobId::CpusetCpus), "cpus", "sysfs node*/cpulist, kubelet cpu_manager_state",
         "nri-qos (NUMA affinity: locality without exclusivity)", "the free CPUs of the NUMA node with the most free CPUs (not held against others)",
         false, true, kRaiseCpusetPin, "", false},
        {"numa.shared_mems", kFactContainer, B(KnobId::CpusetMems), "nodes", "as numa.shared_cpus", "nri-qos", "the node of numa.shared_cpus", false,
         true, 0, "", false}};
    return t;
}

std::string raise_names(uint32_t raises) {
    static const std::pair<uint32_t, const char*> names[] = {{kRaiseQuotaLift, "quota lift"},
                                                             {kRaiseCpusetPin, "cpuset pin"},
                                                             {kRaiseNumaReservation, "NUMA reservation"},
                                                             {kRaiseSharesAboveKubelet, "shares above kubelet's"},
                                                             {kRaiseMemoryAbovePod, "memory above the pod's"},
                                                             {kRaiseBurstAboveQuota, "burst above the quota"},
                                                             {kRaiseQosLevel, "qos level above 0"},
                                                             {kRaiseOomBelowKubelet, "oom_score_adj below kubelet's"},
                                                             {kRaiseMemoryProtection, "memory protection above the pod's"}};
    std::string out;
    for (const auto& [bit, n] : names)
        if (raises & bit) out += std::string(out.empty() ? "" : ", ") + n;
    return out;
}

const FactDef* find_fact(std::string_view name) {
    for (const auto& f : fact_table())
        if (name == f.name) return &f;
    return nullptr;
}

std::string closest_fact(std::string_view name) {
    std::string best;
    size_t bd = 4;
    for (const auto& f : fact_table()) {
        size_t d = edit_distance(name, f.name);
        if (d < bd) {
            bd = d;
            best = f.name;
        }
    }
    return best;
}

std::string fact_usable(const FactDef& f, KnobId knob, uint8_t scope) {
    if (!(f.knobs & B(knob))) {
        std::string ok;
        for (const auto& k : knob_table())
            if (f.knobs & B(k.id)) ok += std::string(ok.empty() ? "" : ", ") + k.key;
        return std::string("fact ") + f.name + " (" + f.unit + ") cannot feed " + knob_def(knob).key + "; it feeds " + ok;
    }
    if (!(f.scope & scope)) {
        return std::string("fact ") + f.name +
               (f.scope == kFactPod ? " is a pod-level value: use it under [classes.*.pod]"
                                    : " is a container-level value: use it under [classes.*.container]");
    }
    return "";
}

}  // namespace nriqos
