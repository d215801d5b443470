// Private to src/policy: the one declaration of the policy's [settings] (issue #35). Each setting
// is one row of settings_table() (policy_settings.cpp): its key, type, range or choices, default,
// the Policy member that holds it, where the flat compiled form and the JSON form put it, and its
// doc line. The TOML reader (policy.cpp read_settings, which `check` runs), the flat encoder and
// decoder (policy_flat.cpp encode_settings / decode_settings) and the JSON form (policy_json.cpp
// settings_to_json / settings_from_json) are all derived from that table; only a new *type* of
// setting needs code in them. Not part of the public API: include it only from src/policy/*.cpp
// and the unit tests.
//
// Adding a setting: a Policy member (policy.hpp, with its doc comment), a row of the table, and
// its entry in man/nri-qos.toml.5 (tests/unit/policy/test_policy.cpp checks that every key of the
// table is documented there). A new row goes last in flat block kFlatTail, which changes the
// compiled form's bytes: the cache key carries the build identity (policy_cache.hpp
// build_identity), so a cache of another build is never read, and kFormatVersion stays a
// belt-and-braces marker (raise it too).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "policy/policy.hpp"

namespace nriqos {

/// How a setting is written in TOML, and so how it is held, encoded and checked.
enum class SettingType : uint8_t {
    Text,  ///< a string of at most `hi` bytes (std::string). Flat: str; JSON: string.
    FailMode,  ///< "open" or "closed" (bool: true = closed). Flat: u8 0/1; JSON: bool.
    Bool,  ///< true or false (bool). Flat: u8 0/1; JSON: bool.
    Choice,  ///< one of `choices`, held as its index (an enum class : uint8_t). Flat: u8; JSON:
    ///< the name under its own key, the index inside an array.
    Count,  ///< an integer from lo to hi, or the default (uint32_t or uint64_t). Flat: u32/u64.
    Path,  ///< an absolute file path or "" (std::string; `aux`: bool, given). Flat: the block's
    ///< "given" bits in one u8 at its first Path (bit i: its i-th Path), then str each;
    ///< JSON: [given, path] at json_at, json_at + 1.
    CpusOrCount,  ///< a CPU list "0-1" (std::string, canonical) or a count 0..hi (`aux`:
    ///< unsigned). Flat: str, u32; JSON: [list, count] at json_at, json_at + 1.
    FieldOwners,  ///< [{field, plugin}] of NRI fields other plugins own (std::vector<LeftField>).
    ///< Read after the other settings, outside their guard. Flat: u32 count, then
    ///< (str field, str plugin) each; JSON: [[field, plugin], ...].
};

/// A typed reference to a member of Policy: `at(p)` is the member's address, `kind` its C++ type
/// (checked where the table is written: NRIQOS_SETTING_REF).
struct SettingRef {
    enum Kind : uint8_t { None, Str, Bool, U8, U32, U64, Fields };
    Kind kind = None;
    void* (*at)(Policy&) = nullptr;
    /// The member as T (T must be the type `kind` names).
    template <class T>
    T& of(Policy& p) const {
        return *static_cast<T*>(at(p));
    }
    /// The member as const T.
    template <class T>
    const T& of(const Policy& p) const {
        return *static_cast<const T*>(at(const_cast<Policy&>(p)));
    }
};

/// The SettingRef::Kind of a member type; any other type does not compile.
template <class T>
constexpr SettingRef::Kind setting_kind() {
    if constexpr (std::is_same_v<T, std::string>) return SettingRef::Str;
    else if constexpr (std::is_same_v<T, bool>) return SettingRef::Bool;
    else if constexpr (std::is_enum_v<T>) {
        static_assert(std::is_same_v<std::underlying_type_t<T>, uint8_t>, "a Choice setting is an enum class : uint8_t");
        return SettingRef::U8;
    } else if constexpr (std::is_same_v<T, uint32_t>) return SettingRef::U32;
    else if constexpr (std::is_same_v<T, uint64_t>) return SettingRef::U64;
    else if constexpr (std::is_same_v<T, std::vector<LeftField>>) return SettingRef::Fields;
    else static_assert(!sizeof(T), "no SettingRef::Kind for this member type");
}

/// SettingRef to Policy member `member` (a member path: `sinks.event_log` works).
#define NRIQOS_SETTING_REF(member)                                                                             \
    SettingRef {                                                                                               \
        setting_kind<decltype(std::declval<Policy&>().member)>(), [](Policy& p) -> void* { return &p.member; } \
    }

/// Where in section A of the flat form a setting's bytes are (policy_cache.hpp "Flat format").
enum FlatBlock : uint8_t {
    kFlatHead = 1,  ///< right after the policy version, before the source
    kFlatMiddle = 2,  ///< after [guarded], before the [resctrl.*] groups
    kFlatTail = 3,  ///< after the [resctrl.*] groups, before the classes
};

/// One [settings] key.
struct SettingDef {
    const char* key = "";  ///< under [settings]
    SettingType type = SettingType::Text;
    SettingRef ref;  ///< the value
    SettingRef aux;  ///< Path: the bool "given"; CpusOrCount: the count; else none
    int64_t lo = 0, hi = 0;  ///< Count: the range; CpusOrCount: the count's; Text: hi = longest (bytes)
    int64_t def = 0;  ///< Bool, FailMode, Choice, Count: the default ("" / unset / empty for the others)
    const char* choices[4] = {};  ///< Choice: the names, in the order of the enum's values
    /// The message after "settings.<key>: " for a value of the right TOML type that is not
    /// allowed (Choice, Count, Bool: also of the wrong type); "{lo}" and "{hi}" become lo and hi.
    const char* expect = "";
    FlatBlock flat_block = kFlatTail;
    uint8_t flat_order = 0;  ///< position within its flat block
    const char* json_key = nullptr;  ///< nullptr: not in the JSON form
    int json_at = -1;  ///< -1: the value is json_key's; else its index in json_key's array
    bool json_required = false;  ///< policy_from_json refuses a document without json_key
    /// Read after the other rows (still inside their guard): the order in which errors written on
    /// one line (an inline [settings] table) are reported, as before the table existed.
    bool toml_last = false;
    const char* doc = "";  ///< one line; the whole story: man/nri-qos.toml.5

    // Setters, so that a row of the table names what it sets.
    SettingDef& with_aux(SettingRef r) { return aux = r, *this; }
    SettingDef& range(int64_t l, int64_t h) { return lo = l, hi = h, *this; }
    SettingDef& longest(int64_t bytes) { return hi = bytes, *this; }
    SettingDef& by_default(int64_t v) { return def = v, *this; }
    SettingDef& one_of(const char* a, const char* b, const char* c) { return choices[0] = a, choices[1] = b, choices[2] = c, *this; }
    SettingDef& expecting(const char* e) { return expect = e, *this; }
    SettingDef& flat(FlatBlock block, uint8_t order) { return flat_block = block, flat_order = order, *this; }
    SettingDef& json(const char* k, int at = -1, bool required = false) { return json_key = k, json_at = at, json_required = required, *this; }
    SettingDef& documented(const char* d) { return doc = d, *this; }
    SettingDef& read_last() { return toml_last = true, *this; }
};

/// A row: key, type and member; the setters above add the rest.
inline SettingDef setting(const char* key, SettingType type, SettingRef ref) {
    SettingDef d;
    d.key = key;
    d.type = type;
    d.ref = ref;
    return d;
}

/// The [settings] table: rows in the order `check` lists the allowed keys.
struct SettingsTable {
    const SettingDef* b;
    const SettingDef* e;
    const SettingDef* begin() const { return b; }
    const SettingDef* end() const { return e; }
    size_t size() const { return static_cast<size_t>(e - b); }
};
/// The one declaration of [settings] (policy_settings.cpp).
SettingsTable settings_table();

/// The rows of flat block `block` in their flat order.
const std::vector<const SettingDef*>& flat_settings(FlatBlock block);

/// `d.expect` with "{lo}" and "{hi}" replaced by d.lo and d.hi.
std::string setting_expect(const SettingDef& d);

/// Number of choices of a Choice row.
size_t choice_count(const SettingDef& d);

/// True when integer `v` may be held by row `d` (Count: lo..hi or the default; Choice: an index;
/// FailMode/Bool: 0 or 1). What the decoders accept from a compiled form.
bool setting_value_ok(const SettingDef& d, int64_t v);

}  // namespace nriqos
