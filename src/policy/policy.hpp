// The static policy: ordered classification rules and, per QoS class, the knobs to set.
// Written by the operator in TOML (man/nri-qos.toml.5, conf/nri.d/nri-qos.toml), validated
// strictly (unknown keys, wrong types and out-of-range values are errors with file:line), and
// compiled into a Policy (the flat compiled form: policy_cache.hpp; the lossless JSON form below
// is for tests and tools).
//
// Validation collects every error of a file in one pass (check_policy_text, used by
// `nri-qos check`), with the closest known name suggested for unknown keys, knobs and classes,
// and warnings for suspicious but valid policies (a memory knob below 1 MiB, a rule no request
// can reach, an unused class, a promotion gate resting on a pod label nobody guards). Loading
// (parse_policy_toml) reports the first error, plus how many more there are.
//
// Trust model (issue 9 §3): pod labels and annotations are written by the pod author, so they may
// pick a class but never, on their own, pass a promotion gate. A gate admits a pod by its
// namespace (an allow-list the operator edits) or by a label/annotation the operator declared in
// [guarded] as controlled by an admission policy (classify.hpp).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "model/knobs.hpp"
#include "model/model.hpp"

namespace nriqos {

/// Policy format version this build understands.
constexpr int kPolicyVersion = 1;
/// Largest policy file accepted (bytes).
constexpr size_t kMaxPolicyBytes = 8u << 20;
/// Largest settings.evaluator_events: an evaluator is replaced at least every million events.
constexpr uint32_t kMaxEvaluatorEvents = 1000000;

using GlobMap = std::vector<std::pair<std::string, std::string>>;  ///< key → fnmatch(3) glob
/// Pod label/annotation key → the operator's note naming the admission policy that controls it
/// ([guarded.labels] / [guarded.annotations]); sorted by key.
using KeyNotes = std::vector<std::pair<std::string, std::string>>;

/// Conditions of a rule; all given conditions must hold (an empty Match matches everything).
struct Match {
    GlobMap labels;  ///< pod labels: key present and value matches the glob
    GlobMap annotations;  ///< annotations (the request's, plus the sandbox's remembered ones)
    GlobMap labels_or_annotations;  ///< key in labels or annotations (rubik reads either)
    std::vector<std::string> namespaces, pod_names, container_names;  ///< any glob matches
    int kind = 0;  ///< 0 any, 1 sandbox only, 2 container only
    std::vector<KubeQos> kube_qos;  ///< any of these Kubernetes QoS classes
};

struct Rule {
    std::string name;
    Match match;
    std::string cls;  ///< class name (validated to exist)
    int line = 0;  ///< line in the policy file, for explain
    /// `merge = true` (issue #21 §3): when an earlier rule already gave the pod its class, this
    /// rule, if it matches too, adds its class's knobs to that class — each knob the classes
    /// before it do not set (per scope; the earlier rule wins a knob both set). A merge rule
    /// that is the first to match gives the class like any rule. classify.hpp merge order.
    bool merge = false;
};

/// Who may enter a class that raises priority (promotion gate). A pod qualifies when its
/// namespace matches one of `namespaces`, or it carries all `labels` and every one of those keys
/// is declared in Policy::guarded_labels, or the rule that asked for the class matched on pod
/// labels/annotations only through guarded keys; otherwise it gets `fallback` (classify.hpp).
struct Gate {
    bool enabled = false;
    std::vector<std::string> namespaces;
    GlobMap labels;
    std::string fallback;
};

struct ClassDef {
    std::string name, description;
    bool fail_closed = false;  ///< a failed knob fails the container start
    std::vector<KnobSetting> container;  ///< knobs on the container's own cgroup/process
    std::vector<KnobSetting> pod;  ///< knobs on the pod (parent) cgroup
    /// `[classes.X.sandbox]`: knobs on the sandbox (pause) container's own cgroup — the
    /// cgroupsPath of the sandbox event: NRI v0.1's sandbox request (spec.cgroupsPath), native
    /// RunPodSandbox / UpdatePodSandbox / Synchronize's PodSandbox linux.cgroups_path (NRI
    /// api.proto LinuxPodSandbox field 4 since v0.2.0; containerd 1.7 pkg/cri/nri and 2.x
    /// internal/cri/nri nri_api_linux.go criPodSandbox.GetCgroupsPath: the sandbox container's
    /// OCI spec Linux.CgroupsPath, "" when containerd has no sandbox container spec). Written at
    /// those events only, directly; each knob skipped with the reason where there is no such path.
    /// No process knobs (oom_score_adj, resctrl_group, sched_*, io_*, memory_policy*).
    std::vector<KnobSetting> sandbox;
    Gate gate;
    /// `pod_cpu_weight_formula` of the class: the cgroup v2 cpu.shares→cpu.weight conversion of
    /// its pod-level cpu_shares (a node agent that writes the pod cgroup itself converts with its
    /// own formula: koordlet's linear ConvertCPUSharesToWeight, koordinator-sh/koordinator@v1.8.0
    /// pkg/koordlet/util/system/cgroup2.go). `pod_weight_formula_set` false: the policy's
    /// settings.cpu_weight_formula, as for container knobs.
    bool pod_weight_formula_set = false;
    WeightFormula pod_weight_formula = WeightFormula::Auto;
    /// `container_cpu_weight_formula` of the class (issue #32 §6): the cgroup v2 conversion of its
    /// container-level cpu_shares when a node agent rewrites the container's cpu.weight itself,
    /// after the runtime wrote its own conversion: koordlet's container reconciler writes the
    /// batch shares of BE containers every 10 s with its linear ConvertCPUSharesToWeight
    /// (koordinator-sh/koordinator@a7a1b76bbf81abd26f9c377de1f31a60dd965f6e
    /// pkg/koordlet/runtimehooks/hooks/batchresource/batch_resource.go Register:
    /// RegisterCgroupReconciler(ContainerLevel, CPUShares, SetContainerCPUShares); the executor
    /// converts with pkg/koordlet/util/system/cgroup2.go ConvertCPUSharesToWeight). Set and not
    /// "auto": the runtime still gets the shares (its adjustment or update, its formula), and
    /// nri-qos writes cpu.weight with this formula at StartContainer, PostUpdateContainer and
    /// Synchronize (and directly on the v0.1 path). false: the runtime's formula
    /// (settings.cpu_weight_formula).
    bool ctr_weight_formula_set = false;
    WeightFormula ctr_weight_formula = WeightFormula::Auto;
    /// `accept_merge = false`: rules with merge = true add nothing to this class when it is the
    /// one the first matching rule gave (SYSTEM: system pods are left alone whatever they carry).
    bool accept_merge = true;
    /// Lazy decode only (policy_cache::decode with a request filter): `container`, `pod` and `sandbox` are
    /// still in the compiled cache's encoding, at byte offsets [packed_at, packed_end) of
    /// Policy::packed_knobs, and empty until policy_cache::decode_knobs decodes them. Both 0
    /// otherwise (the lists are complete).
    uint32_t packed_at = 0, packed_end = 0;
    /// True while `container` and `pod` are not decoded yet (see packed_at): never read them then.
    bool knobs_pending() const { return packed_end != 0; }
};

/// A resctrl group the policy declares (`[resctrl.<name>]`, man nri-qos.toml(5) RESCTRL GROUPS):
/// nri-qos creates it under the resctrl mount when missing and writes its schemata (resctrl.hpp
/// ensure_group). Each resource is given either as a raw schemata line or as a percentage:
///  * `l3` — a raw line ("L3:0=ff;1=ff"), written as given; or `l3_percent` (1..100) of the
///    cache ways of info/L3/cbm_mask, from way ceil(ways × l3_start_percent / 100) up to way
///    ceil(ways × l3_percent / 100) (koordlet pkg/koordlet/util/system/resctrl.go
///    CalculateCatL3MaskValue), or with `l3_round = "down"` floor(ways × l3_percent / 100) ways
///    from way 0, at least 1 (rubik pkg/services/dyncache/dyncache_init.go calcLimitedCacheValue);
///    never fewer than info/L3/min_cbm_bits; the same mask on every cache id of the root's L3 line;
///  * `mb` — a raw line ("MB:0=50;1=50"); or `mb_percent` (1..100), rounded up to a step of
///    info/MB/bandwidth_gran and at least info/MB/min_bandwidth (kernel resctrl.rst "Memory
///    bandwidth Allocation"; koordlet calculateIntel rounds up to 10), on every MB domain.
/// `manage`: the group may already exist without nri-qos having made it; by default its schemata
/// is then left alone (joined only); manage = true writes it anyway.
struct ResctrlGroupDef {
    std::string name;  ///< directory name under the resctrl mount ([A-Za-z0-9_.-]{1,64})
    std::string l3, mb;  ///< raw schemata lines ("" = not given)
    int l3_percent = -1;  ///< -1 = not given
    int l3_start_percent = 0;
    bool l3_round_down = false;  ///< rubik's floor rule instead of koordlet's ceil rule
    int mb_percent = -1;  ///< -1 = not given
    bool manage = false;
    int line = 0;  ///< line in the policy file (diagnostics)
};

/// "" when `name` may name a resctrl group directory: 1-64 characters [A-Za-z0-9_.-], not "."
/// or "..", and not one of the kernel's own entries of the mount ("info", "mon_groups",
/// "mon_data"); else the one-line reason.
std::string resctrl_group_name_error(const std::string& name);

/// "" when `line` is a schemata line of resource `prefix` ("L3" or "MB"): "<prefix>:<id>=<value>"
/// pairs separated by ';', ids decimal, values hex (L3) or decimal (MB); else the reason.
std::string resctrl_line_error(const std::string& line, const char* prefix);

/// Where the hook's own sinks write (settings.metrics_file, settings.event_log,
/// settings.event_log_max_bytes; man nri-qos.toml(5)). Unset fields fall back to the command
/// line and then to the defaults of src/event/pipeline.hpp; an empty path disables that sink.
struct SinkSettings {
    bool metrics_file_set = false;
    std::string metrics_file;  ///< node_exporter textfile (.prom) path; "" = no metrics
    bool event_log_set = false;
    std::string event_log;  ///< JSON-lines event log path; "" = stderr only
    uint64_t event_log_max_bytes = 0;  ///< rotate beyond this size (bytes); 0 = default
};

/// One entry of settings.leave_to_others: a field another NRI plugin owns. nri-qos never sets
/// the knobs it covers (neither in an NRI adjustment/update nor by a file write) and reports each
/// as skipped, "left to <plugin>" (adjust.hpp leave_to_others). Why: containerd refuses a
/// container when two plugins set the same adjustment field (containerd/nri
/// pkg/adaptation/result.go: "plugins %q and %q both tried to set %s"), and two writers of one
/// kernel file undo each other.
struct LeftField {
    std::string field;  ///< as written: a knob key or an NRI field name (knobs.hpp field_knobs)
    std::string plugin;  ///< the owner's name, for the reports ("koordlet", "05-balloons")
    FieldKnobs covers;  ///< what it stands for (recomputed from `field` when a cache is loaded)
};

/// The entry of `p.leave_to_others` that covers knob `k` (a raw knob by its file), or nullptr.
const LeftField* left_to_other(const std::vector<LeftField>& leave, const KnobSetting& k);

struct Policy {
    int version = kPolicyVersion;
    std::string default_class;
    bool fail_closed = false;  ///< errors before a class is known (bad request/policy)
    /// settings.cpu_weight_formula: the cgroup v2 cpu.shares→cpu.weight conversion of writes
    /// (knobs.hpp WeightFormula); Auto (the default) detects the node runtime's own per event.
    WeightFormula cpu_weight_formula = WeightFormula::Auto;
    /// settings.koordinator_quota_lift: when koordinator.cpuset_quota lifts the CFS quota of a
    /// pod bound to a koord-scheduler cpuset. Cpuset (the default): whenever the pod has a
    /// cpuset, as koordlet does (koordinator-sh/koordinator@v1.8.0 pkg/util/pod_qos_utils.go
    /// IsPodCfsQuotaNeedUnset); Fits: only when the cpuset holds no more CPUs than the quota pays
    /// for (CPUs × period ≤ quota), a wider cpuset keeps the quota (skipped, trusted or not).
    /// Both follow the facts' trust rule (a lift beyond what the quota paid needs trust).
    /// Never: the quota is never lifted for a cpuset, koordlet's `--disable-unset-cpu-quota`
    /// (pkg/koordlet/runtimehooks/config.go RuntimeHookDisableUnsetCPUQuota, read by
    /// hooks/cpuset/cpuset.go UnsetPodCPUQuota / UnsetContainerCPUQuota); the cpuset still applies.
    enum class QuotaLift : uint8_t { Cpuset = 0, Fits = 1, Never = 2 };
    QuotaLift koordinator_quota_lift = QuotaLift::Cpuset;
    /// settings.katalyst_reserved_cpus: the CPUs Katalyst's QRM CPU plugin reserves for the system
    /// (never handed to dedicated_cores pods; numa.hpp choose_numa): a canonical cpuset list
    /// ("0-1"), or "" with katalyst_reserved_count, the count form (0: none).
    std::string katalyst_reserved_cpus;
    unsigned katalyst_reserved_count = 0;
    /// settings.katalyst_default_numa_exclusive: a dedicated_cores numa_binding pod whose
    /// memory_enhancement declares no numa_exclusive is exclusive, as Katalyst started with
    /// `--qos-enhancement-default-values numa_exclusive=true` (katalyst-core@d8c28ea
    /// cmd/base/options/qos.go, pkg/config/generic/qos.go QoSEnhancementDefaultValues, applied
    /// by FilterQoSEnhancementMap to keys the pod did not declare). Off by default (the flag's
    /// default is empty).
    bool katalyst_default_numa_exclusive = false;
    /// settings.katalyst_dedicated_default_burst: the CPU burst policy of a dedicated_cores pod
    /// whose cpu_enhancement says default (or nothing) — katalyst-core@d8c28ea
    /// pkg/agent/qrm-plugins/cpu/util/util.go getOverriddenDedicatedCoresPodBurstPolicy. Unset:
    /// no change (the agent's default: EnableDedicatedCoresDefaultCPUBurst nil and
    /// --enable-default-dedicated-cores-cpu-burst false); Static: quota × percent / 100 (the flag,
    /// or the AdminQoSConfiguration's cpuBurstConfig.enableDedicatedCoresDefaultCPUBurst true);
    /// Closed: 0 (that field false).
    enum class KatalystBurst : uint8_t { Unset = 0, Static = 1, Closed = 2 };
    KatalystBurst katalyst_dedicated_default_burst = KatalystBurst::Unset;
    /// settings.katalyst_default_burst_percent: the percent of a static burst whose pod names no
    /// cpu_burst_percent — the AdminQoSConfiguration's cpuBurstConfig.defaultCPUBurstPercent
    /// (pkg/config/agent/dynamic/adminqos/finegrainedresource/cpu_burst.go, default 100), 0..100.
    unsigned katalyst_default_burst_percent = 100;
    std::vector<Rule> rules;
    std::map<std::string, ClassDef> classes;
    KeyNotes guarded_labels;  ///< [guarded.labels]: keys an admission policy controls
    KeyNotes guarded_annotations;  ///< [guarded.annotations]
    std::string source;  ///< path it was loaded from ("builtin" for the built-in one)
    SinkSettings sinks;  ///< settings.metrics_file / event_log / event_log_max_bytes
    /// settings.evaluator_events (man nri-qos.toml(5)): how many events one sandboxed evaluator of
    /// the native relay serves before it exits and a fresh one takes its place (1: one process per
    /// event, the default; src/nri/evaluator.hpp "resident"). 1..kMaxEvaluatorEvents.
    uint32_t evaluator_events = 1;
    /// [resctrl.<name>]: the groups nri-qos creates and keeps (ResctrlGroupDef), by name.
    std::map<std::string, ResctrlGroupDef> resctrl_groups;
    /// settings.leave_to_others, in policy order (one entry per field; an entry with a list of
    /// fields is flattened).
    std::vector<LeftField> leave_to_others;
    /// Lazy decode only: the classes' knob lists as the compiled cache encodes them (a copy of
    /// that part of the cache entry; ClassDef::packed_at); "" otherwise.
    std::string packed_knobs;
};

/// The name in `known` closest to `word`, for "did you mean" hints: equal ignoring case, or
/// within 1 edit (4-6 characters) / 2 edits (longer); "" when none is that close.
std::string closest_name(const std::string& word, const std::vector<std::string>& known);

/// Note of `key` in `notes` (a KeyNotes), or nullptr when the key is not declared.
const std::string* guarded_note(const KeyNotes& notes, const std::string& key);

/// One finding of the policy checker.
struct PolicyDiag {
    enum Level { Error, Warning, Note } level = Error;  ///< Note: information only (PolicyCheck::notes)
    int line = 0;  ///< 1-based line in the policy file; 0 = the file as a whole
    std::string message;  ///< one line, without the file name
};

/// Everything check_policy_text found.
struct PolicyCheck {
    Policy policy;  ///< usable only when errors() == 0
    std::vector<PolicyDiag> diags;  ///< errors and warnings, ordered by line
    /// Information (level Note), never in `diags`: per raising fact the policy uses, whether its
    /// annotation keys are trusted and which [guarded] declaration unlocks the seed system's full
    /// behaviour (issue #19). Only for a policy without errors.
    std::vector<PolicyDiag> notes;
    size_t errors() const;
    size_t warnings() const;
};

/// "<file>:<line>: <message>" for an error, "<file>:<line>: warning: <message>" for a warning,
/// "<file>: note: <message>" for a note (no ":<line>" when line is 0).
std::string format_diag(const std::string& file, const PolicyDiag& d);

/// Validate all of a policy text, collecting every error instead of stopping at the first: each
/// key, knob, class, gate and rule is checked on its own, and cross-references (rules.class,
/// gate.fallback, settings.default_class) carry the line they are written on. A TOML syntax error
/// or a prescan refusal (invalid UTF-8, over-long line, deep nesting, 64-bit overflow) stops the
/// check at that point (toml11 cannot go on). Never throws on bad content; `name` prefixes
/// messages. Warnings never make a policy invalid.
PolicyCheck check_policy_text(const std::string& text, const std::string& name);

/// Read a policy file: it must be a regular file (FIFOs, devices and /proc, /sys files are
/// refused before reading) of at most kMaxPolicyBytes. Throws InputError "<path>: <why>".
std::string read_policy_file(const std::string& path);

/// Read and validate a TOML policy file. The file must be a regular file (FIFOs, devices and
/// /proc files are refused before reading) of at most kMaxPolicyBytes. Throws InputError
/// "<file>:<line>: <message>".
Policy load_policy_toml(const std::string& path);

/// settings.fail of a policy text, read ahead of its parse and compile by one linear pass that
/// follows TOML's structure (table headers, dotted keys, inline tables, strings and their escapes,
/// comments) without building a document (policy_text.cpp; a few ms per MiB, against about a
/// second per 10,000 rules for the compile: BENCHMARKS.md "cold path"). What a deadline that
/// fires during the compile answers with (event/pipeline.cpp; nri-qos(8) --deadline-ms).
/// true: "closed"; false: "open", or no settings.fail in a document the pass read to its end
/// (the default is "open"); the pass stops at the first settings.fail. nullopt: the pass lost
/// the structure (text that is not TOML: unterminated string, bad escape, key without "=", ...)
/// before finding settings.fail, or settings.fail is not "open"/"closed" — text the compile will
/// reject, so that the file's own mode will not apply. It is not a validation: a text it reads
/// may still be rejected by the compile (then its last good copy or the built-in policy applies).
std::optional<bool> read_fail_mode(const std::string& text);

/// Parse policy text (used by load_policy_toml and the fuzzer). `name` appears in messages.
/// Throws InputError with the first error ("<name>:<line>: <message>"), followed by
/// " (+N more errors: run nri-qos check)" when there are more. Warnings are not reported here.
Policy parse_policy_toml(const std::string& text, const std::string& name);

/// Lossless JSON form of a compiled Policy (for the compiled cache), and back.
/// policy_from_json throws InputError on a malformed document; policy_to_json throws
/// std::logic_error on a class whose knob lists are still encoded (ClassDef::knobs_pending).
nlohmann::json policy_to_json(const Policy& p);
Policy policy_from_json(const nlohmann::json& j);

}  // namespace nriqos
