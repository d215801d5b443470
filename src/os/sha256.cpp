#include "os/sha256.hpp"

#include <cstdint>

#include <nettle/sha2.h>

namespace nriqos {

std::string sha256_hex(std::string_view data) {
    struct sha256_ctx ctx;
    sha256_init(&ctx);
    sha256_update(&ctx, data.size(), reinterpret_cast<const uint8_t*>(data.data()));
    uint8_t d[SHA256_DIGEST_SIZE];
    sha256_digest(&ctx, sizeof d, d);
    static const char kHex[] = "0123456789abcdef";
    std::string s(2 * sizeof d, '0');
    for (size_t i = 0; i < sizeof d; ++i) {
        s[2 * i] = kHex[d[i] >> 4];
        s[2 * i + 1] = kHex[d[i] & 15];
    }
    return s;
}

}  // namespace nriqos
