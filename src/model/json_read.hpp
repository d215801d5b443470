// Reading untrusted JSON under nri-qos's limits with nlohmann's SAX interface (json::sax_parse):
// the building blocks of the request reader (request.cpp) and parse_json_limited (request.hpp).
// nlohmann tokenises and validates the text (syntax, UTF-8, numbers); these add the limits of
// the document itself and, where a DOM is wanted, build it. Messages are one line (InputError).
#pragma once

#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

#include <nlohmann/json.hpp>

#include "model/request.hpp"

namespace nriqos::json_read {

/// Size (≤ limits::kMaxRequestBytes), not only whitespace, no raw NUL (nlohmann's lexer would
/// take it as the end of the input and ignore the rest). Throws InputError.
void precheck(std::string_view text);

/// nlohmann's syntax error (parse_error callback) as "malformed JSON: parse error at line 1,
/// column 9: ..." (or its full text for other exceptions, e.g. number overflow). Throws.
[[noreturn]] void fail_syntax(const std::exception& e);

/// Escape a key for use in a JSON pointer (RFC 6901) in messages; control characters → '?',
/// cut to 80 bytes.
std::string ptr_key(const std::string& k);

/// Nesting depth, keys per object and duplicate keys, fed with every SAX container and key
/// event; throws InputError at the first violation. Duplicate keys are refused everywhere (Go's
/// encoding/json keeps the last, nlohmann's DOM the first: a smuggling vector between the
/// runtime and the hook). The keys of each open object are kept in reused buffers; small
/// objects are scanned, larger ones hashed, so hostile documents of 4096-key objects cost
/// linear time.
class DocLimits {
public:
    explicit DocLimits(int max_depth);
    void open(bool object);  ///< start_object / start_array
    void close();  ///< end_object / end_array
    void key(const std::string& k);

private:
    static constexpr size_t kScanKeys = 24;
    struct Level {
        std::vector<std::string> keys;  // the first kScanKeys keys (buffers reused)
        size_t n = 0;
        bool hashed = false;
        std::unordered_set<std::string> set;
    };
    int max_depth_;
    std::vector<bool> stack_;  // open containers, true = object
    std::vector<Level> levels_;  // per open object
    size_t objects_ = 0;
};

/// Builds a nlohmann DOM from SAX events (parse_json_limited; the v0.1 `conf` object).
class DomBuilder {
public:
    explicit DomBuilder(nlohmann::json& root) : root_(root) {}
    void value(nlohmann::json&& v) { place(std::move(v)); }
    void open(bool object);
    void key(const std::string& k) { key_ = k; }
    void close() { stack_.pop_back(); }

private:
    nlohmann::json* place(nlohmann::json&& v);
    nlohmann::json& root_;
    std::vector<nlohmann::json*> stack_;
    std::string key_;
};

/// Run `h` (a nlohmann SAX handler) over `text`: strict (nothing but whitespace may follow the
/// value), no comments.
template <class Handler>
void sax_read(std::string_view text, Handler& h) {
    nlohmann::json::sax_parse(text.begin(), text.end(), &h, nlohmann::json::input_format_t::json, /*strict=*/true,
                              /*ignore_comments=*/false);
}

}  // namespace nriqos::json_read
