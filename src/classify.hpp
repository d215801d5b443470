// Stage 3 — classify: first matching rule wins; the class's promotion gate is then checked.
#pragma once

#include <string>

#include "model.hpp"
#include "policy.hpp"

namespace nriqos {

/// Facts a rule can match on (a view over the Request plus derived data).
struct Facts {
    const Request* req = nullptr;
    KubeQos kube_qos = KubeQos::Unknown;
};

/// The classification of one request.
struct Decision {
    const ClassDef* cls = nullptr;  ///< never null after classify()
    std::string rule;               ///< matching rule's name, or "default"
    std::string requested;          ///< class the rule asked for (differs from cls->name when gated)
    std::string gate_note;          ///< why a gate refused the requested class ("" when not gated)
    std::string gate_pass;          ///< why a gated class was granted, for explain ("" otherwise)
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
Decision classify(const Policy& policy, const Facts& facts);

/// Why `rule` does not match `facts` ("" when it matches): the first condition that fails, e.g.
/// "labels: koordinator.sh/qosClass absent" or "namespace \"default\" not in [kube-system]".
/// Same conditions and order as classify() (for explain's rule trace).
std::string rule_mismatch(const Rule& rule, const Facts& facts);

/// True when `value` matches fnmatch(3) `glob`.
bool glob_match(const std::string& glob, const std::string& value);

}  // namespace nriqos
