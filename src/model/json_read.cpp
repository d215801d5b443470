#include "model/json_read.hpp"

using nlohmann::json;

namespace nriqos {
namespace json_read {

namespace {
[[noreturn, gnu::cold]] void fail_doc(const std::string& what) { throw InputError(what); }
}  // namespace

std::string ptr_key(const std::string& k) {
    std::string out;
    for (char c : k) {
        if (c == '~') out += "~0";
        else if (c == '/') out += "~1";
        else if (static_cast<unsigned char>(c) < 0x20) out += '?';
        else out += c;
    }
    return out.size() > 80 ? out.substr(0, 80) + "..." : out;
}

void precheck(std::string_view text) {
    if (text.size() > limits::kMaxRequestBytes) fail_doc("request larger than " + std::to_string(limits::kMaxRequestBytes) + " bytes");
    if (text.find_first_not_of(" \t\r\n") == std::string_view::npos) fail_doc("empty input");
    if (text.find('\0') != std::string_view::npos) fail_doc("malformed JSON: NUL byte in the request");
}

void fail_syntax(const std::exception& e) {
    std::string m = e.what();
    auto p = m.find("parse error");
    fail_doc("malformed JSON: " + (p == std::string::npos ? m : m.substr(p)));
}

// ---- DocLimits -----------------------------------------------------------------------------

DocLimits::DocLimits(int max_depth) : max_depth_(max_depth) { stack_.reserve(16); }

void DocLimits::open(bool object) {
    if (static_cast<int>(stack_.size()) >= max_depth_) fail_doc("JSON nested deeper than " + std::to_string(max_depth_) + " levels");
    stack_.push_back(object);
    if (object) {
        if (objects_ == levels_.size()) levels_.emplace_back();
        Level& l = levels_[objects_++];
        l.n = 0;
        l.hashed = false;
    }
}

void DocLimits::close() {
    if (stack_.back()) --objects_;
    stack_.pop_back();
}

void DocLimits::key(const std::string& k) {
    Level& l = levels_[objects_ - 1];
    if (l.n >= limits::kMaxMapEntries) fail_doc("JSON object with more than " + std::to_string(limits::kMaxMapEntries) + " keys");
    bool dup = false;
    if (l.hashed) {
        dup = !l.set.insert(k).second;
    } else {
        for (size_t i = 0; i < l.n && !dup; ++i) dup = l.keys[i] == k;
        if (!dup) {
            if (l.n == l.keys.size()) l.keys.emplace_back(k);
            else l.keys[l.n].assign(k);
            if (l.n + 1 == kScanKeys) {  // from here on: hashed
                l.set.clear();
                l.set.insert(l.keys.begin(), l.keys.begin() + kScanKeys);
                l.hashed = true;
            }
        }
    }
    if (dup) fail_doc("duplicate JSON key \"" + ptr_key(k) + "\"");
    ++l.n;
}

// ---- DomBuilder ----------------------------------------------------------------------------

void DomBuilder::open(bool object) { stack_.push_back(place(object ? json::object() : json::array())); }

json* DomBuilder::place(json&& v) {
    if (stack_.empty()) {
        root_ = std::move(v);
        return &root_;
    }
    json& top = *stack_.back();
    if (top.is_array()) {
        top.push_back(std::move(v));
        return &top.back();
    }
    json& slot = top[key_];  // keys are unique (DocLimits)
    slot = std::move(v);
    return &slot;
}

namespace {

/// SAX handler of parse_json_limited: the limits plus a DOM.
class LimitedDom {
public:
    LimitedDom(json& root, int max_depth) : limits_(max_depth), dom_(root) {}
    bool null() { return dom_.value(nullptr), true; }
    bool boolean(bool v) { return dom_.value(v), true; }
    bool number_integer(json::number_integer_t v) { return dom_.value(v), true; }
    bool number_unsigned(json::number_unsigned_t v) { return dom_.value(v), true; }
    bool number_float(json::number_float_t v, const std::string&) { return dom_.value(v), true; }
    bool string(std::string& v) { return dom_.value(v), true; }  // copied: the lexer keeps its buffer
    bool binary(json::binary_t&) { return false; }  // not produced by the JSON reader
    bool start_object(std::size_t) { return limits_.open(true), dom_.open(true), true; }
    bool key(std::string& k) { return limits_.key(k), dom_.key(k), true; }
    bool end_object() { return limits_.close(), dom_.close(), true; }
    bool start_array(std::size_t) { return limits_.open(false), dom_.open(false), true; }
    bool end_array() { return limits_.close(), dom_.close(), true; }
    bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& e) { fail_syntax(e); }

private:
    DocLimits limits_;
    DomBuilder dom_;
};

}  // namespace
}  // namespace json_read

json parse_json_limited(std::string_view text, int max_depth) {
    json_read::precheck(text);
    json j;
    json_read::LimitedDom h(j, max_depth);
    json_read::sax_read(text, h);
    return j;
}

}  // namespace nriqos
