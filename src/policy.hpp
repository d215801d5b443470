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
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "knobs.hpp"
#include "model.hpp"

namespace nriqos {

/// Policy format version this build understands.
constexpr int kPolicyVersion = 1;
/// Largest policy file accepted (bytes).
constexpr size_t kMaxPolicyBytes = 8u << 20;

using GlobMap = std::vector<std::pair<std::string, std::string>>;  ///< key → fnmatch(3) glob
/// Pod label/annotation key → the operator's note naming the admission policy that controls it
/// ([guarded.labels] / [guarded.annotations]); sorted by key.
using KeyNotes = std::vector<std::pair<std::string, std::string>>;

/// Conditions of a rule; all given conditions must hold (an empty Match matches everything).
struct Match {
    GlobMap labels;                 ///< pod labels: key present and value matches the glob
    GlobMap annotations;            ///< annotations (the request's, plus the sandbox's remembered ones)
    GlobMap labels_or_annotations;  ///< key in labels or annotations (rubik reads either)
    std::vector<std::string> namespaces, pod_names, container_names;  ///< any glob matches
    int kind = 0;                   ///< 0 any, 1 sandbox only, 2 container only
    std::vector<KubeQos> kube_qos;  ///< any of these Kubernetes QoS classes
};

struct Rule {
    std::string name;
    Match match;
    std::string cls;  ///< class name (validated to exist)
    int line = 0;     ///< line in the policy file, for explain
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
    bool fail_closed = false;              ///< a failed knob fails the container start
    std::vector<KnobSetting> container;    ///< knobs on the container's own cgroup/process
    std::vector<KnobSetting> pod;          ///< knobs on the pod (parent) cgroup
    Gate gate;
    /// Lazy decode only (policy_cache::decode with a request filter): `container` and `pod` are
    /// still in the compiled cache's encoding, at byte offsets [packed_at, packed_end) of
    /// Policy::packed_knobs, and empty until policy_cache::decode_knobs decodes them. Both 0
    /// otherwise (the lists are complete).
    uint32_t packed_at = 0, packed_end = 0;
    /// True while `container` and `pod` are not decoded yet (see packed_at): never read them then.
    bool knobs_pending() const { return packed_end != 0; }
};

/// Where the hook's own sinks write (settings.metrics_file, settings.event_log,
/// settings.event_log_max_bytes; man nri-qos.toml(5)). Unset fields fall back to the command
/// line and then to the defaults of src/pipeline.hpp; an empty path disables that sink.
struct SinkSettings {
    bool metrics_file_set = false;
    std::string metrics_file;         ///< node_exporter textfile (.prom) path; "" = no metrics
    bool event_log_set = false;
    std::string event_log;            ///< JSON-lines event log path; "" = stderr only
    uint64_t event_log_max_bytes = 0; ///< rotate beyond this size (bytes); 0 = default
};

struct Policy {
    int version = kPolicyVersion;
    std::string default_class;
    bool fail_closed = false;      ///< errors before a class is known (bad request/policy)
    /// settings.cpu_weight_formula: the cgroup v2 cpu.shares→cpu.weight conversion of writes
    /// (knobs.hpp WeightFormula); Auto (the default) detects the node runtime's own per event.
    WeightFormula cpu_weight_formula = WeightFormula::Auto;
    /// settings.katalyst_reserved_cpus: the CPUs Katalyst's QRM CPU plugin reserves for the system
    /// (never handed to dedicated_cores pods; numa.hpp choose_numa): a canonical cpuset list
    /// ("0-1"), or "" with katalyst_reserved_count, the count form (0: none).
    std::string katalyst_reserved_cpus;
    unsigned katalyst_reserved_count = 0;
    std::vector<Rule> rules;
    std::map<std::string, ClassDef> classes;
    KeyNotes guarded_labels;       ///< [guarded.labels]: keys an admission policy controls
    KeyNotes guarded_annotations;  ///< [guarded.annotations]
    std::string source;            ///< path it was loaded from ("builtin" for the built-in one)
    SinkSettings sinks;            ///< settings.metrics_file / event_log / event_log_max_bytes
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
    int line = 0;          ///< 1-based line in the policy file; 0 = the file as a whole
    std::string message;   ///< one line, without the file name
};

/// Everything check_policy_text found.
struct PolicyCheck {
    Policy policy;                    ///< usable only when errors() == 0
    std::vector<PolicyDiag> diags;    ///< errors and warnings, ordered by line
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
