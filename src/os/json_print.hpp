// Writing JSON text member by member, without building a DOM: the one-shot hot path prints the
// v0.1 Result (sinks.cpp), the event record and the last request (record.cpp, publish.cpp) with
// it. Keys are the caller's literals (printed as given: plain ASCII, nothing to escape); every
// value goes through nlohmann's own serializer — the code json::dump runs — with
// error_handler_t::replace (invalid UTF-8 → U+FFFD) and ensure_ascii off, so the text is
// byte-for-byte what dump(-1, ' ', false, replace) of the same object, with its members in the
// same order, prints. One serializer for a whole document: json::dump sets up a new serializer,
// output adapter and indent buffer for every call, and a DOM costs an allocation per member.
#pragma once

#include <charconv>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace nriqos {

/// Word-at-a-time byte tests (eight bytes in a uint64_t; the usual exact "is there any" forms:
/// non-zero when at least one byte qualifies, never a false positive for the whole word).
namespace swar {
constexpr uint64_t k01 = 0x0101010101010101ull, k80 = 0x8080808080808080ull;
/// A byte of `w` is 0.
constexpr uint64_t has_zero(uint64_t w) { return (w - k01) & ~w & k80; }
/// A byte of `w` equals `c`.
constexpr uint64_t has_byte(uint64_t w, unsigned char c) { return has_zero(w ^ (k01 * c)); }
/// A byte of `w` is below `n` (n <= 0x80).
constexpr uint64_t has_less(uint64_t w, unsigned char n) { return (w - k01 * n) & ~w & k80; }
}  // namespace swar

/// True when some byte of `s` satisfies `byte`; `word` is the same test on eight bytes at once
/// (swar: non-zero when any of them does). Used by the printers' "anything to escape?" checks.
template <typename Word, typename Byte>
inline bool any_byte(std::string_view s, Word word, Byte byte) {
    const char* p = s.data();
    size_t i = 0, n = s.size();
    for (; i + 8 <= n; i += 8) {
        uint64_t w;
        std::memcpy(&w, p + i, 8);
        if (word(w)) return true;
    }
    for (; i < n; ++i)
        if (byte(static_cast<unsigned char>(p[i]))) return true;
    return false;
}

/// True when every byte of `s` is printable ASCII (0x20-0x7e) other than '"' and '\\': such a
/// string is its own JSON text (json::dump, ensure_ascii off, copies it as it is).
inline bool json_plain_ascii(std::string_view s) {
    using namespace swar;
    return !any_byte(
        s,
        // >= 0x80; < 0x20; 0x7f (w + 1 sets the top bit of a byte < 0x80 only when it is 0x7f); '"'; '\\'
        [](uint64_t w) { return (w & k80) | has_less(w, 0x20) | ((w + k01) & k80) | has_byte(w, '"') | has_byte(w, '\\'); },
        [](unsigned char c) { return c < 0x20 || c >= 0x7f || c == '"' || c == '\\'; });
}

/// `s` as one JSON string literal, quotes included, for error messages and logs: control
/// characters escaped (\n, \u0007), '"' and '\\' escaped, invalid UTF-8 replaced by U+FFFD
/// (json::dump's error_handler_t::replace), so the text is always one line. Longer than `max`
/// bytes of input: the first `max` bytes and "..." after the closing quote.
/// The one escaper for keys and values that come from a request, a pod or an answer.
inline std::string json_quoted(std::string_view s, size_t max = 80) {
    bool cut = s.size() > max;
    if (cut) s = s.substr(0, max);  // a character cut in two becomes U+FFFD below
    std::string out = nlohmann::json(std::string(s)).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    if (cut) out += "...";
    return out;
}

/// Appends to `out`. Objects: open(), then key(k).<value> per member, close(); nested objects the
/// same way after a key(). The caller keeps the order (the order the DOM it replaces prints:
/// insertion order for ordered_json, sorted keys for json).
class JsonPrinter {
public:
    explicit JsonPrinter(std::string& out) : out_(out) {}
    void open() { out_ += '{', first_ = true; }
    void close() { out_ += '}', first_ = false; }
    /// Continue an object whose '{' and first member are already in the string: the next key()
    /// gets its comma (for printing one object in pieces).
    void resume() { first_ = false; }
    /// `"k":` (with the comma before it when it is not the first member), in one append.
    JsonPrinter& key(const char* k) {
        char b[64];
        size_t n = std::strlen(k), i = 0;
        if (n > sizeof b - 4) {  // no key of ours is this long; correct all the same
            if (!first_) out_ += ',';
            first_ = false;
            out_ += '"';
            out_ += k;
            out_ += "\":";
            return *this;
        }
        if (!first_) b[i++] = ',';
        first_ = false;
        b[i++] = '"';
        std::memcpy(b + i, k, n);
        i += n;
        b[i++] = '"';
        b[i++] = ':';
        out_.append(b, i);
        return *this;
    }
    /// Any JSON value, as json::dump prints it. The serializer is set up on first use only (its
    /// constructor allocates an output adapter and a 512-byte indent buffer and calls
    /// localeconv): most documents of the hot path are plain ASCII and never need it.
    void value(const nlohmann::json& v) {
        if (!ser_) ser_.emplace(nlohmann::detail::output_adapter<char>(out_), ' ', nlohmann::json::error_handler_t::replace);
        ser_->dump(v, false, false, 0);
    }
    /// A string value (escaped; invalid UTF-8 replaced). A string of printable ASCII without '"'
    /// or '\\' — most of what the hook prints: ids, paths, knob values — is its own JSON text
    /// (the serializer, ensure_ascii off, copies exactly those bytes as they are) and is appended
    /// at once; anything else goes through the serializer.
    void str(const std::string& s) {
        if (json_plain_ascii(s)) {
            size_t at = out_.size();
            out_.resize(at + s.size() + 2);
            char* p = &out_[at];
            p[0] = '"';
            std::memcpy(p + 1, s.data(), s.size());
            p[s.size() + 1] = '"';
            return;
        }
        if (!tmp_.is_string()) tmp_ = nlohmann::json::string_t();
        tmp_.get_ref<std::string&>() = s;
        value(tmp_);
    }
    /// An integer value.
    void num(int64_t n) {
        char b[24];
        out_.append(b, static_cast<size_t>(std::to_chars(b, b + sizeof b, n).ptr - b));
    }
    /// true / false.
    void boolean(bool b) { out_ += b ? "true" : "false"; }
    /// Text that already is one JSON value (e.g. a request that parsed), as is.
    void raw(const std::string& text) { out_ += text; }
    /// The string being written.
    std::string& out() { return out_; }

private:
    std::string& out_;
    std::optional<nlohmann::detail::serializer<nlohmann::json>> ser_;
    bool first_ = true;
    nlohmann::json tmp_;  // null until a string needs the serializer (a string value is an allocation)
};

}  // namespace nriqos
