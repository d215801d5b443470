// The knob table: every resource setting nri-qos knows, defined once with its cgroup v1 file,
// its cgroup v2 file, the conversion between them, its valid range and its NRI adjustment field.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "model/request.hpp"

namespace nriqos {

enum class KnobId {
    CpuShares,
    CpuWeight,
    CpuQuota,
    CpuPeriod,
    CpuBurst,
    CpuIdle,
    CpusetCpus,
    CpusetMems,
    MemoryLimit,
    MemoryHigh,
    MemoryLow,
    MemoryMin,
    MemorySwap,
    MemorySoftLimit,
    PidsMax,
    BlkioWeight,
    CpuQosLevel,
    MemoryQosLevel,
    OomScoreAdj,
    ResctrlGroup,
    BlkioThrottle,
    // Process attributes the runtime sets at create from an NRI adjustment (NRI >= 0.10/0.11/0.12:
    // LinuxContainerAdjustment io_priority, scheduler, memory_policy); nri-qos never writes them
    // itself (adjust.cpp Builder::no_own_write says why per knob).
    SchedPolicy,
    SchedNice,
    IoClass,
    IoLevel,
    MemoryPolicy,
    MemoryPolicyNodes,
    // Group identity of Anolis / Alibaba Cloud Linux kernels (cpu.bvt_warp_ns, -1..2): written
    // directly; skipped where the kernel lacks the file (knobs.cpp kTable).
    CpuBvtWarpNs,
    Raw,
};

/// What a "N%" value is a percentage of: a field of the request's own OCI LinuxResources.
enum class PctBase { None, CpuShares, CpuQuota, MemLimit, PidsLimit };

/// Value syntax a knob accepts in the policy.
enum class ValueKind {
    Int,  ///< integer (bytes accept Ki/Mi/Gi/Ti and K/M/G/T suffixes), optionally "max"
    Cpuset,  ///< cpuset list "0-3,8"
    Name,  ///< identifier [A-Za-z0-9_.-]{1,64} (resctrl group)
    Throttle,  ///< block I/O throttle list "MAJ:MIN KEY=RATE[,...]" (parse_throttle)
    Choice,  ///< one of the knob's names (knob_choices); stored as its index in KnobValue::num
};

/// Static description of a knob (see knobs.cpp for the table and man/nri-qos.toml.5).
struct KnobDef {
    KnobId id;
    const char* key;  ///< policy key, e.g. "cpu_shares"
    ValueKind kind;
    int64_t min, max;  ///< valid range after resolution (kernel-documented)
    bool allow_max;  ///< accepts "max" (unlimited; -1 in cgroup v1)
    bool bytes;  ///< integer with byte-size suffixes
    PctBase pct;
    const char* v1_ctrl;  ///< cgroup v1 controller directory (nullptr: not in v1)
    const char* v1_file;
    const char* v2_file;  ///< cgroup v2 file (nullptr: not in v2)
    const char* unit;  ///< for docs/explain: "bytes", "us", "shares", ...
};

/// The names a Choice knob accepts, in index order (KnobValue::num is the index), each with
/// the NRI enum value it maps to (containerd/nri pkg/api/api.proto v0.11.0 LinuxSchedulerPolicy,
/// IOPrioClass; v0.12.0 MpolMode) and that enum's NRI name:
///  * sched_policy: "other" (SCHED_OTHER 1), "batch" (SCHED_BATCH 4), "idle" (SCHED_IDLE 6) —
///    sched(7); the realtime and deadline policies are not QoS knobs of nri-qos;
///  * io_class: "rt" (IOPRIO_CLASS_RT 1), "be" (IOPRIO_CLASS_BE 2), "idle" (IOPRIO_CLASS_IDLE 3)
///    — ioprio_set(2);
///  * memory_policy: "default" (MPOL_DEFAULT 0), "preferred" (1), "bind" (2), "interleave" (3),
///    "local" (4), "preferred_many" (5), "weighted_interleave" (6) — set_mempolicy(2).
/// Empty for any other knob.
struct KnobChoice {
    const char* name;  ///< policy spelling, e.g. "idle"
    int nri;  ///< NRI enum number
    const char* nri_name;  ///< NRI enum name, e.g. "SCHED_IDLE"
};
const std::vector<KnobChoice>& knob_choices(KnobId id);
/// The process-attribute knobs (sched_policy, sched_nice, io_class, io_level, memory_policy,
/// memory_policy_nodes): container-only, applied by the runtime from the NRI adjustment.
inline bool is_process_knob(KnobId id) {
    return id == KnobId::SchedPolicy || id == KnobId::SchedNice || id == KnobId::IoClass || id == KnobId::IoLevel || id == KnobId::MemoryPolicy ||
           id == KnobId::MemoryPolicyNodes;
}
/// True when memory_policy mode index `mode` (knob_choices(MemoryPolicy)) needs a non-empty
/// node list (bind, interleave, preferred_many, weighted_interleave), and `forbids` when it
/// takes none (default, local): set_mempolicy(2) EINVAL otherwise. "preferred" takes either
/// (an empty list means local allocation).
bool mempolicy_needs_nodes(int64_t mode);
bool mempolicy_forbids_nodes(int64_t mode);

/// All knobs except Raw, in application order.
const std::vector<KnobDef>& knob_table();
/// Look up by policy key; nullptr when unknown.
const KnobDef* find_knob(const std::string& key);
const KnobDef& knob_def(KnobId id);

/// What a field name of settings.leave_to_others (man 5 nri-qos.toml, LIVING BESIDE OTHER NRI
/// PLUGINS) stands for. The vocabulary is nri-qos's own knob keys ("cpu_shares") and NRI's
/// ContainerAdjustment fields below linux.resources, as containerd/nri pkg/api adjustment.go
/// names them ("cpu.shares", "memory.limit", "unified.memory.high", "rdt_class",
/// "oom_score_adj", ... and "cpuset.cpus"/"cpuset.mems" for "cpu.cpus"/"cpu.mems"), plus
/// "raw:<file>" for a raw knob.
struct FieldKnobs {
    uint64_t knobs = 0;  ///< bit (1 << int(KnobId)) of each knob the field covers
    std::string raw_file;  ///< "raw:<file>": the raw knob's kernel file name ("" otherwise)
    /// An NRI field nri-qos never sets (annotations, mounts, env, hugepage_limits, ...): valid,
    /// nothing to leave (knobs 0, raw_file ""). `check` says so.
    bool never_set = false;
};
/// Resolve a leave_to_others field name. Returns false (with `err`: one line, with the closest
/// known name when there is one) for an unknown name.
bool field_knobs(const std::string& field, FieldKnobs& out, std::string& err);
/// Bit of `id` in FieldKnobs::knobs.
constexpr uint64_t knob_bit(KnobId id) { return uint64_t(1) << static_cast<int>(id); }

/// How nri-qos puts a knob's resolved value into its NRI field (containerd/nri pkg/api/api.proto
/// message types; a "max" value is -1 in the integer forms, as OCI LinuxResources has it).
enum class NriValue : uint8_t {
    None,  ///< nri-qos never puts a value there: the row only names what the field covers
    OptInt,  ///< OptionalInt64 / OptionalUInt64: {"value": n}
    Int,  ///< a plain int64 (LinuxPids.limit)
    Text,  ///< a plain string (LinuxCPU.cpus, .mems)
    OptText,  ///< OptionalString: {"value": "text"} (rdt_class)
    UnifiedNum,  ///< a linux.resources.unified entry (cgroup v2 only): the decimal number
    UnifiedMax,  ///< a unified entry (cgroup v2 only): the number, or "max" for unlimited
    /// blkio_weight on cgroup v2: io.bfq.weight as is when the pod cgroup has it, else io.weight
    /// "default N" with the linear conversion (opencontainers/cgroups fs2/io.go setIo)
    UnifiedIoWeight,
    /// a LinuxContainerAdjustment message of two process knobs, merged (adjust.cpp process_knob)
    Process,
};

/// When the runtime can apply a knob from the field (else nri-qos writes the knob itself).
enum class NriGate : uint8_t {
    Always,  ///< every NRI version nri-qos speaks
    Nri08,  ///< NRI 0.8+ (containerd 1.7.26+, 2.x): pids.limit, oom_score_adj
    /// cgroup v2 and the pod cgroup has the knob's v2 file: runc fails the container for a
    /// unified file the kernel lacks (opencontainers/cgroups fs2 setUnified)
    V2PodFile,
    V2PodIo,  ///< cgroup v2 and the pod cgroup has io.bfq.weight or io.weight
    Nri10,  ///< NRI 0.10+ (containerd 2.2.0): io_priority
    Nri11,  ///< NRI 0.11+ (containerd 2.2.1): scheduler
    Nri12,  ///< NRI 0.12+ (containerd 2.3): memory_policy
};

/// One NRI ContainerAdjustment field nri-qos knows: the one table of which field carries a knob
/// (the adjustment event/adjust.cpp builds) and which knobs set the same thing (the fields
/// settings.leave_to_others names, field_knobs). Names as containerd/nri pkg/api adjustment.go
/// spells them below linux.resources ("cpu.shares", "unified.cpu.weight"), or the
/// LinuxContainerAdjustment field ("oom_score_adj", "io_priority"). "The same thing" is decided by
/// the kernel file: cpu.shares becomes cpu.weight on cgroup v2 (runc), so it covers cpu_weight too;
/// OCI memory.reservation is memory.soft_limit_in_bytes on v1 and memory.low on v2 (runc fs2
/// setMemory); blockio_class sets blkio/io weights (goresctrl blockio classes).
struct NriField {
    const char* name;
    const char* ptr;  ///< JSON pointer below the ContainerAdjustment; nullptr when value is None
    NriValue value;
    NriGate gate;
    uint64_t carries;  ///< knob_bit of each knob whose value nri-qos puts here
    uint64_t covers;  ///< knob_bit of each knob setting the same thing (carries included); 0: nri-qos never sets it
    const char* alias_of;  ///< another spelling of that field ("cpuset.cpus" of "cpu.cpus"), else nullptr
};
/// The table, in containerd/nri's field order; `n` is set to its length. Static storage.
const NriField* nri_field_table(size_t& n);
/// The field that carries knob `id` (its carries bit is set); nullptr for a knob nri-qos always
/// writes itself (qos levels, soft limit, throttle, raw files).
const NriField* nri_carrier(KnobId id);

/// A knob value as written in the policy.
///  * Int, Max ("max"/-1), Percent ("N%" of the effective base value), Text (cpuset list, name);
///  * Fact ({ fact = "NAME" }): computed per request by the fact readers (facts.hpp); `text` is
///    the fact name, `num` is 1 when the policy says if_absent = "fail" (else 0: skip).
struct KnobValue {
    enum Kind { Int, Max, Percent, Text, Fact } kind = Int;
    int64_t num = 0;  ///< Int: the value; Percent: 0..100 (× the base); Fact: 1 = fail when absent
    std::string text;  ///< Text: cpuset list or group name; Fact: the fact name
};

/// A configured knob of a class.
struct KnobSetting {
    KnobId id;
    KnobValue value;
    // Raw knobs only: the kernel file name and the v1 controller directory.
    std::string raw_file, raw_ctrl;
    /// Per request, after fact resolution: how the value was computed ("100000 = batch-cpu
    /// limit 1000m × period 100000 / 1000 [koordinator.batch_cfs_quota]"); "" for literals.
    std::string note;
    /// Per request, after fact resolution: the cpuset (canonical list) that must be in the
    /// container's cpuset.cpus, written and read back, before this knob is written — a quota lift
    /// that the cpuset pays for (koordinator.cpuset_quota). "" for everything else. Not part of
    /// the policy (never compiled or cached). See sinks.hpp apply_plan.
    std::string needs_cpuset;
};

/// Parse a policy value for `def` (from TOML: integer or string). Throws InputError with a
/// message that names the knob and the accepted range.
KnobValue parse_knob_value(const KnobDef& def, const std::string* s, const int64_t* i);

/// One device limit of a blkio_throttle value: the kernel's blk-throttle limits, named as
/// cgroup v2 io.max names them (Documentation/admin-guide/cgroup-v2.rst "IO Interface Files").
struct ThrottleEntry {
    enum Key : uint8_t { Rbps = 0, Wbps = 1, Riops = 2, Wiops = 3 } key = Rbps;
    uint32_t major = 0, minor = 0;
    uint64_t rate = 0;  ///< bytes/s (rbps, wbps) or I/O operations/s (riops, wiops); 1..2^63-1
};
/// At most this many entries in one blkio_throttle value (hostile annotations are bounded).
constexpr size_t kMaxThrottleEntries = 64;
/// "rbps", "wbps", "riops", "wiops".
const char* throttle_key_name(ThrottleEntry::Key k);
/// The cgroup v1 file of a key: "blkio.throttle.read_bps_device", "..write_bps_device",
/// "..read_iops_device", "..write_iops_device" (Documentation/admin-guide/cgroup-v1/blkio-controller.rst).
const char* throttle_v1_file(ThrottleEntry::Key k);
/// Parse a blkio_throttle value: comma-separated "MAJ:MIN KEY=RATE" (KEY rbps|wbps|riops|wiops,
/// MAJ and MIN decimal < 2^20 (the kernel's MINORBITS), RATE decimal 1..2^63-1; 0 is refused:
/// the kernel reads it as "no limit", which would lift a limit set by others). At most
/// kMaxThrottleEntries entries, 4096 characters. false with a one-line `err` otherwise.
bool parse_throttle(const std::string& s, std::vector<ThrottleEntry>& out, std::string& err);

/// `t` as an unsigned decimal: 1..`max_digits` ASCII digits, value ≤ `maxv` (no sign, no
/// spaces, no leading '+'). The device numbers and rates of blkio_throttle and of the
/// rubik.blkio_limit fact. False when it is not.
bool parse_decimal(const std::string& t, size_t max_digits, uint64_t maxv, uint64_t& v);
/// The canonical text of `e` (parse_throttle's syntax), in the given order.
std::string throttle_text(const std::vector<ThrottleEntry>& e);
/// True for the kernel files blk-throttle keys by device: io.max and blkio.throttle.*_device
/// (`file` may be a path).
bool is_throttle_file(const std::string& file);
/// What such a file shows after `written` (one device line, as a write of nri-qos or runc) is
/// written while it shows `current`: the kernel keeps one line per device, lines sorted here by
/// device. v1 ("MAJ:MIN RATE"; RATE 0 removes the device), v2 io.max ("MAJ:MIN rbps=.. wbps=..
/// riops=.. wiops=..", unset keys "max", a device with all four "max" not shown). For previews
/// on plain files (explain --pod), which store each write verbatim; the real kernel merges itself.
std::string merge_throttle_file(const std::string& file, const std::string& current, const std::string& written);

/// Validate a cpuset list (cpuset(7) "List format"): "0-3,8,10-11", ascending ranges, ≤ 8192.
bool valid_cpuset(const std::string& s);

/// Which cpu.shares → cpu.weight conversion (cgroup v2) a write uses: settings.cpu_weight_formula
/// of the policy (man 5 nri-qos.toml). Auto: the node runtime's own formula, detected per event
/// (adjust.hpp WeightChoice; the order of evidence is issue #24's).
enum class WeightFormula : uint8_t { Auto = 0, LogQuadratic = 1, Linear = 2 };
/// "auto", "log-quadratic", "linear".
const char* weight_formula_name(WeightFormula f);

/// runc/crun/Kubernetes (2025) cgroup v1 cpu.shares → v2 cpu.weight, log-quadratic form:
/// L = log2(shares), weight = ceil(10^((L² + 125 L)/612 − 7/34)); shares clamped to [2, 262144];
/// 0 means unset. Source: opencontainers/cgroups PR #20 (runc ≥ 1.3.2), crun ≥ 1.23.
uint64_t shares_to_weight(uint64_t shares);
/// The older linear form: weight = 1 + (shares − 2) × 9999 / 262142 (runc < 1.3.2; integer
/// division). Source: opencontainers/cgroups utils.go ConvertCPUSharesToCgroupV2Value before
/// PR #20, runc 1.1's libcontainer/cgroups/utils.go.
uint64_t shares_to_weight_linear(uint64_t shares);
/// `shares` (0 = unset → 0) converted with `f`; Auto converts like LogQuadratic (the default
/// when nothing on the node says otherwise).
uint64_t shares_to_weight(uint64_t shares, WeightFormula f);

/// Which formula maps `shares` to exactly `weight`: the evidence a (shares, cpu.weight) pair
/// the runtime wrote gives about its formula. Both: the two formulas agree there (shares 2 → 1,
/// 262144 → 10000, ...): no evidence. None: neither does (someone else wrote the weight), or
/// shares outside [2, 262144] (runc refuses or clamps them: no evidence either).
enum class WeightFit { None, LogQuadratic, Linear, Both };
WeightFit weight_fit(uint64_t shares, uint64_t weight);

/// The node's runtime as last probed (`<runtime> --version`, run outside the hook's sandbox:
/// detect.hpp refresh_runtime_formula), cached in the state dir file runc-formula.
struct RuntimeFormula {
    WeightFormula formula = WeightFormula::Auto;  ///< Auto: the output named no known version
    std::string version;  ///< "runc 1.1.5" ("" unknown)
    std::string binary;  ///< the binary run ("runc", "/usr/sbin/runc")
};

/// The formula of a runtime from the first line of its `--version` output: "runc version 1.1.5"
/// → Linear (runc < 1.3.2), "runc version 1.3.2" → LogQuadratic (runc PR #4785 vendors
/// opencontainers/cgroups PR #20 from 1.3.2 on); "crun version 1.23" → LogQuadratic (crun ≥ 1.23,
/// crun issue #1721), older crun → Linear. Anything else (no version found): Auto (= unknown).
/// `version` gets "runc 1.1.5" (name and version) when one is found.
WeightFormula runtime_version_formula(const std::string& version_output, std::string& version);
/// runc's blkio.weight (10–1000) → io.weight (1–10000): 1 + (w − 10) × 9999 / 990.
uint64_t blkio_to_io_weight(uint64_t w);

}  // namespace nriqos
