// Private to src/policy: the byte writer of the flat compiled form (policy_cache.hpp "Flat
// format": host byte order, strings as u32 length + bytes), shared by the encoder
// (policy_flat.cpp compile) and the cache key (policy_cache.cpp cache_key). Not part of the
// public API: include it only from src/policy/*.cpp.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "policy/policy.hpp"

namespace nriqos {
namespace policy_cache {

// ---- writer -------------------------------------------------------------------------------
struct Writer {
    std::string b;
    void u8(uint8_t v) { b.push_back(static_cast<char>(v)); }
    void u32(uint32_t v) { b.append(reinterpret_cast<const char*>(&v), 4); }
    void u64(uint64_t v) { b.append(reinterpret_cast<const char*>(&v), 8); }
    void i64(int64_t v) { u64(static_cast<uint64_t>(v)); }
    void str(std::string_view s) {
        u32(static_cast<uint32_t>(s.size()));
        b.append(s.data(), s.size());
    }
    void strs(const std::vector<std::string>& v) {
        u32(static_cast<uint32_t>(v.size()));
        for (const auto& s : v) str(s);
    }
    void globs(const GlobMap& m) {
        u32(static_cast<uint32_t>(m.size()));
        for (const auto& [k, g] : m) {
            str(k);
            str(g);
        }
    }
    void knobs(const std::vector<KnobSetting>& ks) {
        u32(static_cast<uint32_t>(ks.size()));
        for (const auto& k : ks) {
            u8(static_cast<uint8_t>(k.id));
            u8(static_cast<uint8_t>(k.value.kind));
            i64(k.value.num);
            str(k.value.text);
            str(k.raw_file);
            str(k.raw_ctrl);
        }
    }
    void put32(size_t at, uint32_t v) { std::memcpy(&b[at], &v, 4); }
    void put64(size_t at, uint64_t v) { std::memcpy(&b[at], &v, 8); }
};

}  // namespace policy_cache
}  // namespace nriqos
