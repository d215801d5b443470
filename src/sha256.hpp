// SHA-256 (FIPS 180-4) of a byte string, as lowercase hex: the identity of a policy text that an
// operator can compare with `sha256sum /etc/nri/nri-qos.toml` (Result metadata policy_sha256,
// `nri-qos check`, `--version`, the nri_qos_policy_info metric).
//
// Why our own: none of the libraries the project builds with (nlohmann-json, CLI11, toml11,
// libseccomp, protobuf-lite) offers a digest, and pulling OpenSSL's libcrypto into a fully static
// hook (and into the rpm/deb build dependencies) for one hash of a few KiB, computed only when a
// policy is compiled, costs more than the ~60 lines below. Tested against the FIPS 180-2
// appendix vectors (tests/unit/test_policy.cpp).
#pragma once

#include <string>
#include <string_view>

namespace nriqos {

/// SHA-256 of `data`: 64 lowercase hex digits.
std::string sha256_hex(std::string_view data);

}  // namespace nriqos
