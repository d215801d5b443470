// The built-in policy: the bundled conf/nri.d/nri-qos.toml of this build, validated and compiled
// at build time (src/tools/policy-builtin-gen.cpp) into the flat compiled form and linked into
// the binary. Loading it is a decode of those bytes (policy_cache::decode, key kBuiltinKey):
// no TOML parse, no file, the cost of a compiled-cache hit. Used when there is no policy file
// (a binary dropped alone into /opt/nri/plugins), and when the configured file is broken and
// there is no last good copy (policy_store.hpp).
#pragma once

#include <string_view>

#include "policy/policy.hpp"
#include "model/request.hpp"

namespace nriqos {

/// The compiled bytes (policy_cache format).
std::string_view builtin_policy_blob();

/// SHA-256 (hex) of the bundled TOML text it was compiled from (compare:
/// `sha256sum conf/nri.d/nri-qos.toml` of the source tree).
const char* builtin_policy_sha256();

/// Number of rules and classes of the built-in policy (for --version).
unsigned builtin_policy_rules();
unsigned builtin_policy_classes();

/// The built-in policy; with `filter`, only the rules that can match that request, knob lists
/// still encoded (like a cache hit: policy_cache::decode_knobs). Never fails: the bytes are verified at build time and by decode (checksums) — a
/// damaged binary throws std::runtime_error.
Policy builtin_policy(const Request* filter = nullptr);

}  // namespace nriqos
