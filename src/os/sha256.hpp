// SHA-256 of a policy text, as lowercase hex: the identity an operator can compare with
// `sha256sum /etc/nri/nri-qos.toml` (Result metadata policy_sha256, the event record,
// `nri-qos check`, `--version`, the nri_qos_policy_info metric). One helper for all of them,
// computed by Debian's nettle library (nettle-dev, <nettle/sha2.h>), linked statically; it is
// called when a policy file is compiled (a compiled-cache miss) and at build time for the
// built-in policy, never per event.
#pragma once

#include <string>
#include <string_view>

namespace nriqos {

/// SHA-256 (FIPS 180-4) of `data`: 64 lowercase hex digits (nettle sha256_digest).
std::string sha256_hex(std::string_view data);

}  // namespace nriqos
