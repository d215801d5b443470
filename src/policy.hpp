// The static policy: ordered classification rules and, per QoS class, the knobs to set.
// Written by the operator in TOML (man/nri-qos.toml.5, conf/nri.d/nri-qos.toml), validated
// strictly (unknown keys, wrong types and out-of-range values are errors with file:line), and
// compiled into a Policy, which round-trips through JSON for the compiled cache (policy_cache.hpp).
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
/// namespace matches one of `namespaces` or all `labels` match; otherwise it gets `fallback`.
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
    bool linear_weight = false;    ///< cpu.shares→cpu.weight formula: false = log-quadratic (runc ≥ 1.3.2)
    std::vector<Rule> rules;
    std::map<std::string, ClassDef> classes;
    std::string source;            ///< path it was loaded from
    SinkSettings sinks;            ///< settings.metrics_file / event_log / event_log_max_bytes
};

/// Read and validate a TOML policy file. The file must be a regular file (FIFOs, devices and
/// /proc files are refused before reading) of at most kMaxPolicyBytes. Throws InputError
/// "<file>:<line>: <message>".
Policy load_policy_toml(const std::string& path);

/// Parse policy text (used by load_policy_toml and the fuzzer). `name` appears in messages.
Policy parse_policy_toml(const std::string& text, const std::string& name);

/// Lossless JSON form of a compiled Policy (for the compiled cache), and back.
/// policy_from_json throws InputError on a malformed document.
nlohmann::json policy_to_json(const Policy& p);
Policy policy_from_json(const nlohmann::json& j);

}  // namespace nriqos
