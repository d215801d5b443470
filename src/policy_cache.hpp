// Compiled policy cache: the hot path must not parse TOML. A validated policy is compiled once
// into a compact binary form, cached in a root-only directory keyed by the policy file's identity
// and the nri-qos build, and loaded cheaply afterwards.
#pragma once

#include <string>

#include "policy.hpp"

namespace nriqos {

/// Load the policy at `path`, through the cache in `cache_dir` ("" = no cache). A corrupt,
/// truncated or foreign cache file is ignored and rebuilt, never trusted. `from_cache` tells
/// whether the cache was hit. Throws InputError like load_policy_toml.
Policy load_policy(const std::string& path, const std::string& cache_dir, bool* from_cache = nullptr);

}  // namespace nriqos
