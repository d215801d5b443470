// Private to src/policy: the policy checker's shared machinery, used across the files that read a
// policy document (policy.cpp the document, policy_toml.cpp typed access and "did you mean",
// policy_text.cpp the text around toml11, policy_knobs.cpp the knob tables, policy_check.cpp the
// warnings and notes of `check`). Not part of the public API (policy/policy.hpp): include it only
// from src/policy/*.cpp.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <toml.hpp>

#include "policy/policy.hpp"

namespace nriqos {

using TV = toml::value;

/// Thrown by Ctx::fail after recording an error: abandons the item being parsed (a key, a knob,
/// a rule...); Ctx::guard catches it so the next item is still checked.
struct Skip {};

struct Ctx {
    std::string file;
    std::vector<PolicyDiag>* diags;
    void add(PolicyDiag::Level lv, int line, const std::string& msg) const { diags->push_back({lv, line, msg}); }
    static int line_of(const TV& v) { return static_cast<int>(v.location().line()); }
    void error(const TV& v, const std::string& msg) const { add(PolicyDiag::Error, line_of(v), msg); }
    void warn(const TV& v, const std::string& msg) const { add(PolicyDiag::Warning, line_of(v), msg); }
    [[noreturn]] void fail(const TV& v, const std::string& msg) const {
        error(v, msg);
        throw Skip{};
    }
    [[noreturn]] void fail_line(int line, const std::string& msg) const {
        add(PolicyDiag::Error, line, msg);
        throw Skip{};
    }
    [[noreturn]] void fail_top(const std::string& msg) const { fail_line(0, msg); }
    /// Run one independent check; an error inside it is recorded, not propagated.
    template <class F>
    void guard(F&& f) const {
        try {
            f();
        } catch (const Skip&) {}
    }
};

// ---- policy_toml.cpp: typed access and "did you mean" ---------------------------------------

/// TOML type name of `v` for messages ("integer", "table", ...).
const char* toml_type(const TV& v);
/// "did you mean \"<closest of known>\"?", or "" when none is close (closest_name).
std::string did_you_mean(const std::string& word, const std::vector<std::string>& known);
/// `v` as a table, else fails "<what>: expected a table, got <type>".
const toml::table& as_table(const Ctx& c, const TV& v, const std::string& what);
/// Record every key of table `v` that is not in `allowed` (see the definition).
void check_keys(const Ctx& c, const TV& v, const std::string& what, std::initializer_list<const char*> allowed);
/// The same with the allowed keys as a list (settings_table()'s keys).
void check_keys(const Ctx& c, const TV& v, const std::string& what, const std::vector<std::string>& allowed);
/// Member `key` of table `table`, or nullptr.
const TV* get(const TV& table, const char* key);
/// `v` as a string of at most `max` bytes, else fails.
std::string str(const Ctx& c, const TV& v, const std::string& what, size_t max = 4096);
/// A string or a non-empty array of strings (at most 4096), as a list.
std::vector<std::string> str_or_list(const Ctx& c, const TV& v, const std::string& what);
/// A table of key → glob string (at most 4096, keys 1-317 bytes), sorted by key.
GlobMap glob_map(const Ctx& c, const TV& v, const std::string& what);
/// "open" → false, "closed" → true, else fails.
bool fail_mode(const Ctx& c, const TV& v, const std::string& what);

// ---- policy_text.cpp: the text before and around toml11 --------------------------------------

/// Refuse text toml11 must never see (see the definition); fails at the offending line.
void prescan(const Ctx& c, const std::string& text);
/// toml11's multi-line error message as (line, "TOML syntax error: headline").
std::pair<int, std::string> toml_error(const std::string& what);

// ---- policy_knobs.cpp: a class's knob tables -------------------------------------------------

/// The knobs of table `v` (classes.<name>.container or .pod; `scope` kFactContainer or kFactPod),
/// in knob table order, then its raw entries; each bad knob recorded on its own.
std::vector<KnobSetting> parse_knobs(const Ctx& c, const TV& v, const std::string& what, uint8_t scope);

// ---- policy_check.cpp: the findings of `check` beyond errors ---------------------------------

/// Warnings about a valid policy: unreachable rules, unused classes, ungated promotions.
void policy_warnings(const Ctx& c, const Policy& p, const std::map<std::string, int>& class_line);
/// The trust notes of `check` per raising fact (issue #19).
void trust_notes(const Policy& p, std::vector<PolicyDiag>& notes);
/// The notes of `check` for settings.leave_to_others.
void leave_notes(const Policy& p, std::vector<PolicyDiag>& notes);

}  // namespace nriqos
