// The pattern syntax of the policy's match rules, gates and guarded keys: fnmatch(3) globs, with a
// pattern that has no wildcard compared as a plain string (the compiled cache's rule index relies
// on that: policy/policy_cache.hpp). Used by classify (event/) and by the facts' gate check
// (facts/), which both sit above the policy.
#pragma once

#include <string>

namespace nriqos {

/// True when `value` matches fnmatch(3) `glob` (no flags: '*' matches '/', no escapes beyond
/// fnmatch's own). "*" matches everything, the empty string included; a glob without '*', '?'
/// or '[' matches only the identical string.
bool glob_match(const std::string& glob, const std::string& value);

}  // namespace nriqos
