// Reading the policy's TOML values with diagnostics (private helpers: policy_parse.hpp): the
// TOML type names of messages, the "did you mean" hints (closest_name), and typed access to
// tables, strings, lists, glob maps and fail modes, each recording its error in the Ctx.
#include "policy/policy_parse.hpp"

#include <algorithm>

namespace nriqos {

const char* toml_type(const TV& v) {
    switch (v.type()) {
        case toml::value_t::boolean: return "boolean";
        case toml::value_t::integer: return "integer";
        case toml::value_t::floating: return "float";
        case toml::value_t::string: return "string";
        case toml::value_t::array: return "array";
        case toml::value_t::table: return "table";
        default: return "date/time";
    }
}

namespace {

// ---- "did you mean" ------------------------------------------------------------------------

/// Optimal-string-alignment distance (Levenshtein plus adjacent transpositions), capped: returns
/// cap + 1 as soon as it is certain to exceed `cap`.
size_t edit_distance(const std::string& a, const std::string& b, size_t cap) {
    if ((a.size() > b.size() ? a.size() - b.size() : b.size() - a.size()) > cap) return cap + 1;
    std::vector<size_t> p2(b.size() + 1), p1(b.size() + 1), cur(b.size() + 1);
    for (size_t j = 0; j <= b.size(); ++j) p1[j] = j;
    for (size_t i = 1; i <= a.size(); ++i) {
        cur[0] = i;
        size_t best = cur[0];
        for (size_t j = 1; j <= b.size(); ++j) {
            size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
            cur[j] = std::min({p1[j] + 1, cur[j - 1] + 1, p1[j - 1] + cost});
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) cur[j] = std::min(cur[j], p2[j - 2] + 1);
            best = std::min(best, cur[j]);
        }
        if (best > cap) return cap + 1;
        std::swap(p2, p1);
        std::swap(p1, cur);
    }
    return p1[b.size()];
}

std::string lower(std::string s) {
    for (auto& ch : s) ch = static_cast<char>(tolower(static_cast<unsigned char>(ch)));
    return s;
}

/// The known name closest to `word` ("" when none is close): equal ignoring case, or within
/// 1 edit (words of 4-6 characters) / 2 edits (longer ones).
std::string closest(const std::string& word, const std::vector<std::string>& known) {
    const std::string lw = lower(word);
    for (const auto& k : known)
        if (lower(k) == lw) return k;
    const size_t cap = word.size() <= 3 ? 0 : word.size() <= 6 ? 1 : 2;
    if (cap == 0) return "";
    size_t best = cap + 1;
    std::string out;
    for (const auto& k : known) {
        size_t d = edit_distance(lw, lower(k), cap);
        if (d < best) best = d, out = k;
    }
    return out;
}

}  // namespace

std::string did_you_mean(const std::string& word, const std::vector<std::string>& known) {
    std::string c = closest(word, known);
    return c.empty() ? "" : "did you mean \"" + c + "\"?";
}

// ---- typed access --------------------------------------------------------------------------

const toml::table& as_table(const Ctx& c, const TV& v, const std::string& what) {
    if (!v.is_table()) c.fail(v, what + ": expected a table, got " + toml_type(v));
    return v.as_table();
}

/// Record every key of table `v` that is not in `allowed` (each one an error, with the closest
/// allowed key suggested). Unknown keys are otherwise ignored, so the rest is still checked.
void check_keys(const Ctx& c, const TV& v, const std::string& what, std::initializer_list<const char*> allowed) {
    check_keys(c, v, what, std::vector<std::string>(allowed.begin(), allowed.end()));
}

void check_keys(const Ctx& c, const TV& v, const std::string& what, const std::vector<std::string>& names) {
    for (const auto& [k, val] : as_table(c, v, what)) {
        if (std::find(names.begin(), names.end(), k) != names.end()) continue;
        std::string list;
        for (const auto& a : names) list += (list.empty() ? "" : ", ") + a;
        std::string hint = did_you_mean(k, names);
        c.error(val, what + ": unknown key \"" + k + "\" (" + (hint.empty() ? "" : hint + " ") + "allowed: " + list + ")");
    }
}

const TV* get(const TV& table, const char* key) {
    const auto& t = table.as_table();
    auto it = t.find(key);
    return it == t.end() ? nullptr : &it->second;
}

std::string str(const Ctx& c, const TV& v, const std::string& what, size_t max) {  // max: 4096 by default (policy_parse.hpp)
    if (!v.is_string()) c.fail(v, what + ": expected a string, got " + toml_type(v));
    const std::string& s = v.as_string().str;
    if (s.size() > max) c.fail(v, what + ": longer than " + std::to_string(max) + " bytes");
    return s;
}

std::vector<std::string> str_or_list(const Ctx& c, const TV& v, const std::string& what) {
    std::vector<std::string> out;
    if (v.is_string()) {
        out.push_back(str(c, v, what));
    } else if (v.is_array()) {
        if (v.as_array().size() > 4096) c.fail(v, what + ": more than 4096 entries");
        for (const auto& e : v.as_array()) out.push_back(str(c, e, what));
        if (out.empty()) c.fail(v, what + ": empty list matches nothing");
    } else {
        c.fail(v, what + ": expected a string or an array of strings, got " + toml_type(v));
    }
    return out;
}

GlobMap glob_map(const Ctx& c, const TV& v, const std::string& what) {
    GlobMap out;
    const auto& t = as_table(c, v, what);
    if (t.size() > 4096) c.fail(v, what + ": more than 4096 entries");
    for (const auto& [k, val] : t) {
        if (k.empty() || k.size() > 317) c.fail(val, what + ": key must be 1-317 bytes");
        out.emplace_back(k, str(c, val, what + "." + k));
    }
    std::sort(out.begin(), out.end());
    return out;
}

bool fail_mode(const Ctx& c, const TV& v, const std::string& what) {
    std::string s = str(c, v, what);
    if (s == "open") return false;
    if (s == "closed") return true;
    std::string hint = did_you_mean(s, {"open", "closed"});
    c.fail(v, what + ": expected \"open\" or \"closed\", got \"" + s + "\"" + (hint.empty() ? "" : " (" + hint + ")"));
}

std::string closest_name(const std::string& word, const std::vector<std::string>& known) { return closest(word, known); }

}  // namespace nriqos
