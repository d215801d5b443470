#include "policy/policy_builtin.hpp"

#include <stdexcept>

#include "policy/policy_cache.hpp"

namespace nriqos {

namespace {
#include "policy_builtin.inc"  // build/gen: kBuiltinBlob, kBuiltinSha256, kBuiltinRules, kBuiltinClasses
}  // namespace

std::string_view builtin_policy_blob() { return {reinterpret_cast<const char*>(kBuiltinBlob), sizeof kBuiltinBlob}; }

const char* builtin_policy_sha256() { return kBuiltinSha256; }

unsigned builtin_policy_rules() { return kBuiltinRules; }

unsigned builtin_policy_classes() { return kBuiltinClasses; }

Policy builtin_policy(const Request* filter) {
    Policy p;
    if (policy_cache::decode(builtin_policy_blob(), policy_cache::kBuiltinKey, filter, p, nullptr) != policy_cache::Decoded::Ok)
        throw std::runtime_error("the built-in policy of this binary is damaged");
    return p;
}

}  // namespace nriqos
