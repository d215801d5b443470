// Small validated readers for the values seed systems put in pod annotations. Each reader takes
// untrusted text (written by the pod author or a webhook), bounds it, parses it with the same
// semantics as the system's own Go code (cited per function) and returns a plain C++ value or a
// one-line error. JSON goes through nlohmann (parse_json_limited: depth, size, duplicate keys,
// UTF-8), never a hand-written parser. Used by the fact evaluators (facts_*.cpp); fuzzed by
// tests/fuzz/fuzz_fact_readers.cpp.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "os/cpuset.hpp"

namespace nriqos {

/// Largest annotation value a reader parses (bytes). Kubernetes caps all of a pod's annotations
/// together at 256 KiB (apimachinery ValidateAnnotationsSize), so does the request parser.
constexpr size_t kMaxFactAnnotationBytes = 256u << 10;
/// JSON nesting a fact annotation may have (extended-resource-spec needs 4).
constexpr int kMaxFactJsonDepth = 8;
/// Largest quantity text (bytes). apimachinery's canonical forms are far shorter.
constexpr size_t kMaxQuantityBytes = 64;
/// Quantities above this (2^62) are refused: every consumer works in int64 and multiplies.
constexpr int64_t kMaxQuantityValue = int64_t(1) << 62;

// ---- Go / Kubernetes value syntaxes ---------------------------------------------------------

/// k8s.io/apimachinery pkg/api/resource ParseQuantity + Quantity.Value(): the value rounded up
/// (ceil) to an integer. Grammar: [+-] digits [. digits] then a suffix: binary Ki Mi Gi Ti Pi Ei,
/// decimal m "" k M G T P E, or an exponent e/E [+-] digits. "1k" = 1000, "3456Mi" = 3623878656,
/// "1.5" = 2, "500m" = 1, "-1" = -1. Returns nullopt with `why` on a syntax error, text longer
/// than kMaxQuantityBytes, or |value| > kMaxQuantityValue. A binary suffix with more than 18
/// fraction digits is refused rather than rounded (no published manifest comes near it).
std::optional<int64_t> parse_quantity(std::string_view s, std::string* why);

/// Quantity.MilliValue() (apimachinery quantity.go: ScaledValue(Milli), rounded up): "500m" =
/// 500, "0.5" = 500, "2" = 2000, "1k" = 1000000 — a CPU quantity in millicores. Errors as
/// parse_quantity (the bound applies to the millicore value).
std::optional<int64_t> parse_quantity_milli(std::string_view s, std::string* why);

/// The value × 10^scale10, rounded up as Value(): parse_quantity is scale 0, parse_quantity_milli 3.
std::optional<int64_t> parse_quantity_scaled(std::string_view s, int scale10, std::string* why);

/// A Quantity as it appears in JSON (Quantity.UnmarshalJSON): a string (surrounding spaces
/// trimmed), an integer, a float (its shortest decimal form), or null (zero).
std::optional<int64_t> quantity_from_json(const nlohmann::json& v, std::string* why);

/// Go strconv.ParseBool: "1", "t", "T", "TRUE", "true", "True" → true; "0", "f", "F", "FALSE",
/// "false", "False" → false; anything else → nullopt.
std::optional<bool> go_parse_bool(std::string_view s);

/// Go strconv.ParseInt(s, 10, 64): optional sign, decimal digits, no spaces, in int64 range.
std::optional<int64_t> go_parse_int(std::string_view s);

// ---- Kubernetes / koordlet arithmetic ---------------------------------------------------------

/// koordinator-sh/koordinator pkg/koordlet/util/system/cgroup.go MilliCPUToShares (same as
/// kubelet's pkg/kubelet/cm/helpers_linux.go for m > 0): m ≤ 0 → 2; else m × 1024 / 1000
/// (integer division) clamped to [2, 262144]. Units: millicores → cpu.shares.
int64_t milli_cpu_to_shares(int64_t milli);

/// koordinator-sh/koordinator pkg/koordlet/util/system/cgroup.go MilliCPUToQuota: m × 100000 /
/// 1000 with the fixed base period CFSBasePeriodValue = 100000 µs; ≤ 0 → -1 (unlimited); below
/// 1000 → 1000 (the kernel's minimum quota). Units: millicores → µs.
int64_t milli_cpu_to_quota(int64_t milli);

// ---- annotation documents ---------------------------------------------------------------------

/// Batch resources of one container in node.koordinator.sh/extended-resource-spec. A field is
/// nullopt when its resource is absent (koordinator pkg/util/extended_resource.go
/// GetBatchMilliCPUFromResourceList / GetBatchMemoryFromResourceList return -1 then).
struct BatchResources {
    bool has_requests = false, has_limits = false;  ///< the "requests" / "limits" maps exist
    std::optional<int64_t> cpu_request, cpu_limit;  ///< kubernetes.io/batch-cpu, millicores (Quantity.Value())
    std::optional<int64_t> mem_request, mem_limit;  ///< kubernetes.io/batch-memory, bytes
    std::string cpu_request_text, cpu_limit_text, mem_request_text, mem_limit_text;  ///< as written, for explain
};

/// node.koordinator.sh/extended-resource-spec (koordinator apis/extension/resource.go
/// ExtendedResourceSpec): {"containers": {"<name>": {"requests": {RES: QTY}, "limits": {...}}}}.
/// `present` is false when "containers" is missing or null: koordlet then keeps kubelet's values
/// (runtimehooks/protocol/pod_context.go FromNri: spec.Containers == nil). Other keys and other
/// resources are ignored, like Go's json.Unmarshal. Throws InputError (one line) on malformed
/// JSON, a wrong type, a bad quantity or more than 4096 containers.
struct ExtendedResourceSpec {
    bool present = false;
    std::map<std::string, BatchResources> containers;
};
ExtendedResourceSpec parse_extended_resource_spec(std::string_view text);

/// scheduling.koordinator.sh/resource-status (koordinator apis/extension/numa_aware.go
/// ResourceStatus): the "cpuset" member, "" when absent/null/empty. The cpuset is validated in
/// the kernel's list format (CpuSet::parse) and returned canonical. Other members
/// (numaNodeResources, ...) are ignored. Throws InputError on malformed JSON or a bad cpuset.
std::string parse_resource_status_cpuset(std::string_view text);

/// katalyst.kubewharf.io/memory_enhancement and cpu_enhancement (katalyst-core
/// pkg/util/native/qos... GetQoSEnhancementKVs → json.Unmarshal into map[string]string): a JSON
/// object of string values. nullopt with `why` when it is not one (Katalyst then ignores the
/// whole annotation), including any non-string value.
std::optional<std::map<std::string, std::string>> parse_string_map(std::string_view text, std::string* why);

/// rubik's volcano.sh/blkio-limit (openeuler-mirror/rubik@1b6fece7a319ebed2ece3dd74ae873633262ce41
/// pkg/services/iolimit/iolimit.go BlkConfig, DeviceConfig, parseIOLimitConfig): a JSON object
///     {"device_read_bps": [{"device": "/dev/sda", "value": "10485760"}, ...],
///      "device_write_bps": [...], "device_read_iops": [...], "device_write_iops": [...]}
/// decoded as Go's encoding/json decodes it into BlkConfig: keys matched case-insensitively,
/// other keys ignored, a list or member that is null left empty, "device" and "value" strings
/// (absent: ""). Throws InputError (one line) when the document is malformed or a type is wrong
/// (rubik then applies nothing: "parse blkio config ... failed"), or a list has more than
/// kMaxBlkioDevices entries (a bound of nri-qos's own). Checking the entries is the caller's.
struct BlkioDeviceValue {
    std::string device;  ///< "/dev/sda" or "8:0", as written
    std::string value;  ///< the rate, as written ("10485760")
};
constexpr size_t kMaxBlkioDevices = 16;
struct BlkioLimit {
    /// Indexed by ThrottleEntry::Key: device_read_bps, device_write_bps, device_read_iops,
    /// device_write_iops.
    std::vector<BlkioDeviceValue> lists[4];
};
BlkioLimit parse_blkio_limit(std::string_view text);

/// volcano.sh/colocation-config (volcano-sh/volcano@ed72c7c815a9fd547a787134676f73d42e9d049c
/// staging/src/volcano.sh/apis/pkg/apis/config/v1alpha1/types.go Configuration, MemoryQos; read by
/// pkg/agent/events/handlers/memoryqosv2/memoryqosv2_linux.go parseColocationConfig): a JSON
/// object {"memoryQos": {"highRatio": N, "lowRatio": N, "minRatio": N}} decoded as Go's
/// encoding/json decodes it into Configuration: keys matched case-insensitively, other keys
/// ignored, null or an absent member leaves Go's zero value, and a document without memoryQos (or
/// with "memoryQos": null, or the JSON null itself) gets the agent's defaults high 100, low 0,
/// min 0. A ratio must be a JSON integer in Go's int (int64) range: a float, a string or a bool is
/// an error, as json.Unmarshal into int refuses it. The ratios are not bounded here (the CRD's
/// 0..100 is the API server's validation, which an annotation written by hand never passes):
/// the caller reproduces what the agent does with any value. Throws InputError (one line) on
/// malformed JSON or a wrong type.
struct ColocationMemoryQos {
    int64_t high_ratio = 100, low_ratio = 0, min_ratio = 0;
    bool defaulted = false;  ///< no memoryQos member: the agent's defaults
};
ColocationMemoryQos parse_colocation_memory_qos(std::string_view text);

/// koordinator.sh/oom-score-adj-spec (koordinator-sh/koordinator@a7a1b76bbf81abd26f9c377de1f31a60dd965f6e
/// pkg/koordlet/runtimehooks/hooks/oomscoreadj/helper.go getOOMScoreAdjForContainer: json.Unmarshal
/// into map[string]int64): a JSON object of container name → integer. Throws InputError (one
/// line) when it is not one: malformed JSON, a non-object, a value that is not a JSON integer in
/// int64 range (a float, a string, a bool); null stores 0, as encoding/json does. koordlet then sets nothing for any container of the
/// pod (it does not fall back to the pod-level annotation on a parse error).
std::map<std::string, int64_t> parse_oom_score_adj_spec(std::string_view text);

/// kubelet's CPU manager checkpoint (kubernetes pkg/kubelet/cm/cpumanager/state/checkpoint.go
/// CPUManagerCheckpointV2, written to /var/lib/kubelet/cpu_manager_state):
///     {"policyName":"static","defaultCpuSet":"0-3","entries":{"<podUID>":{"<container>":"4-5"}},"checksum":N}
/// `entries` are the CPUs the static policy gave containers exclusively; policy "none" holds
/// nothing. The V1 form (entries keyed by container id: {"<containerID>":"4-5"}) is read too, its
/// CPUs held by an unknown pod. The checksum is not verified (kubelet's is a hash of its Go
/// struct dump); the file is node state written by kubelet (root), not by a pod author.
struct KubeletCpuState {
    std::string policy;  ///< "static", "none", ...
    std::map<std::string, CpuSet> by_pod;  ///< pod UID ("" for V1 entries) → union of its exclusive CPUs
    CpuSet held;  ///< union of all entries
};
/// Parse the checkpoint text. Throws InputError (one line) on malformed JSON, wrong types, a bad
/// CPU list, more than 1 MiB or more than 16384 entries.
KubeletCpuState parse_kubelet_cpu_state(std::string_view text);
/// Read and parse the checkpoint at `path`: nullopt when the file does not exist (numa.hpp
/// kubelet_held_cpus tells "nothing held" from "unknown" by kubelet's directory); throws
/// InputError naming the path when it cannot be read or parsed (callers then refuse to pin:
/// fail-safe).
std::optional<KubeletCpuState> read_kubelet_cpu_state(const std::string& path);

}  // namespace nriqos
