// Stage 3 — classify: first matching rule wins; the class's promotion gate is then checked.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "model/model.hpp"
#include "policy/glob.hpp"
#include "policy/policy.hpp"

namespace nriqos {

/// Facts a rule can match on (a view over the Request plus derived data).
struct Facts {
    const Request* req = nullptr;
    KubeQos kube_qos = KubeQos::Unknown;
};

/// The classification of one request.
struct Decision {
    const ClassDef* cls = nullptr;  ///< never null after classify()
    std::string rule;  ///< matching rule's name, or "default"
    std::string requested;  ///< class the rule asked for (differs from cls->name when gated)
    std::string gate_note;  ///< why a gate refused the requested class ("" when not gated)
    std::string gate_pass;  ///< why a gated class was granted, for explain ("" otherwise)
    /// Rules with `merge = true` that matched after the rule giving the class (Rule::merge), in
    /// policy order: the class each contributes and what it added ("" until merge_classes ran).
    struct Merge {
        std::string rule, cls;
        bool applied = false;  ///< false: its class is gated and the pod does not qualify
        std::string note;  ///< the knobs added ("cpu_qos_level pod:cpu_qos_level"), or why none
    };
    std::vector<Merge> merges;
    /// The combined class when merges added knobs (cls then points to it): owned here, so that
    /// copies of the Decision keep it alive.
    std::shared_ptr<const ClassDef> merged;
    /// One line for the Result metadata and explain: "OFFLINE (rule volcano-be): cpu_qos_level ...;
    /// ..." ("" when no merge rule matched).
    std::string merge_text() const;
};

/// Evaluate `policy.rules` in order against `facts`; the first match wins, else the default
/// class. Globs are fnmatch(3) patterns without flags. Then, if the chosen class has a gate,
/// the pod qualifies (trust model: policy.hpp) when
///   1. its namespace matches gate.namespaces (an allow-list the operator edits), or
///   2. it carries every gate.labels entry and each of those keys is declared in
///      [guarded.labels], or
///   3. the rule that asked for the class matched on at least one pod label/annotation and on
///      guarded keys only (the label when it matched as a label, the annotation when it matched
///      as one), i.e. an admission policy vouches for the request itself;
/// otherwise the gate's fallback class is used and gate_note says why. A label the pod author
/// can set freely never passes a gate.
///
/// Merge order (issue #21 §3): after the first match, unless the class says accept_merge = false,
/// every later rule with `merge = true` that matches contributes its class (gated classes only when the pod qualifies for that gate with
/// that rule; never their fallback). The class's knobs are the first class's, then, per scope and
/// in rule order, each knob of a merged class that no class before it sets (Raw knobs by file).
/// The fail mode is closed when any contributing class says closed; pod_cpu_weight_formula is
/// the first class's, else the first merged class's that sets it. The combined class keeps the
/// first class's name, description and gate. classify() combines the knobs itself when every
/// involved class's knob lists are decoded; else (a cache hit) the caller decodes them and calls
/// merge_classes.
Decision classify(const Policy& policy, const Facts& facts);

/// Combine the knobs of `d.merges` into `d.cls` (see classify). Returns false, leaving `d`
/// unchanged, when a class involved still has its knob lists encoded (ClassDef::knobs_pending).
bool merge_classes(const Policy& policy, Decision& d);

/// Why `rule` does not match `facts` ("" when it matches): the first condition that fails, e.g.
/// "labels: koordinator.sh/qosClass absent" or "namespace \"default\" not in [kube-system]".
/// Same conditions and order as classify() (for explain's rule trace).
std::string rule_mismatch(const Rule& rule, const Facts& facts);

}  // namespace nriqos
