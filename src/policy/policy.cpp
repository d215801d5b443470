#include "policy/policy.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <set>
#include <sstream>
#include <stdexcept>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <toml.hpp>

#include "os/cpuset.hpp"
#include "model/fact_table.hpp"

using nlohmann::json;

namespace nriqos {

std::string resctrl_group_name_error(const std::string& name) {
    if (name.empty() || name.size() > 64) return "group names are 1-64 characters [A-Za-z0-9_.-]";
    for (unsigned char c : name)
        if (!(isalnum(c) || c == '_' || c == '-' || c == '.')) return "group names are 1-64 characters [A-Za-z0-9_.-]";
    if (name == "." || name == ".." || name == "info" || name == "mon_groups" || name == "mon_data")
        return "\"" + name + "\" is an entry of the resctrl mount itself, not a group name";
    return "";
}

std::string resctrl_line_error(const std::string& line, const char* prefix) {
    const std::string p = std::string(prefix) + ":";
    if (line.compare(0, p.size(), p) != 0) return "expected a schemata line \"" + p + "<id>=<value>;...\"";
    std::string rest = line.substr(p.size());
    if (rest.empty()) return "no <id>=<value> entry";
    const bool is_hex = std::string(prefix) == "L3";
    size_t at = 0;
    while (at <= rest.size()) {
        size_t semi = rest.find(';', at);
        std::string e = rest.substr(at, semi == std::string::npos ? std::string::npos : semi - at);
        at = semi == std::string::npos ? rest.size() + 1 : semi + 1;
        size_t eq = e.find('=');
        if (eq == std::string::npos || eq == 0 || eq + 1 == e.size()) return "entry \"" + e + "\" is not <id>=<value>";
        for (size_t i = 0; i < eq; ++i)
            if (!isdigit(static_cast<unsigned char>(e[i]))) return "entry \"" + e + "\": the id is a decimal number";
        for (size_t i = eq + 1; i < e.size(); ++i)
            if (!(is_hex ? isxdigit(static_cast<unsigned char>(e[i])) : isdigit(static_cast<unsigned char>(e[i]))))
                return "entry \"" + e + "\": the value is " + (is_hex ? "a hex cache bit mask" : "a decimal number");
    }
    return "";
}


namespace {

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
        } catch (const Skip&) {
        }
    }
};

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

std::string did_you_mean(const std::string& word, const std::vector<std::string>& known) {
    std::string c = closest(word, known);
    return c.empty() ? "" : "did you mean \"" + c + "\"?";
}

std::vector<std::string> knob_names() {
    std::vector<std::string> v;
    for (const auto& d : knob_table()) v.emplace_back(d.key);
    v.emplace_back("raw");
    return v;
}

// ---- typed access --------------------------------------------------------------------------

const toml::table& as_table(const Ctx& c, const TV& v, const std::string& what) {
    if (!v.is_table()) c.fail(v, what + ": expected a table, got " + toml_type(v));
    return v.as_table();
}

/// Record every key of table `v` that is not in `allowed` (each one an error, with the closest
/// allowed key suggested). Unknown keys are otherwise ignored, so the rest is still checked.
void check_keys(const Ctx& c, const TV& v, const std::string& what, std::initializer_list<const char*> allowed) {
    const std::vector<std::string> names(allowed.begin(), allowed.end());
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

std::string str(const Ctx& c, const TV& v, const std::string& what, size_t max = 4096) {
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

/// Kernel file names a raw knob may never write: cgroup core files move tasks or change
/// delegation; they are not resource settings.
bool raw_file_allowed(const std::string& f) {
    if (f.empty() || f.size() > 64 || f.find('.') == std::string::npos) return false;
    for (unsigned char ch : f)
        if (!(isalnum(ch) || ch == '_' || ch == '.')) return false;
    if (f.rfind("cgroup.", 0) == 0 || f == "tasks" || f == "notify_on_release" || f == "release_agent") return false;
    if (f.size() >= 6 && f.compare(f.size() - 6, 6, ".procs") == 0) return false;
    if (f.find("..") != std::string::npos) return false;
    return true;
}

const std::set<std::string>& v1_controllers() {
    static const std::set<std::string> s = {"cpu", "cpuacct", "cpuset", "memory", "blkio", "pids",
                                            "hugetlb", "net_cls", "net_prio", "freezer", "devices", "perf_event", "rdma", "misc"};
    return s;
}

constexpr int64_t kMiB = 1 << 20;

/// Warn about a valid but suspicious knob value: a memory knob below 1 MiB (most likely a
/// forgotten unit: `memory_limit = 512` is 512 bytes). 0 means "none" for the protections,
/// the soft limit and swap, so it is not suspicious there.
void warn_knob(const Ctx& c, const TV& v, const std::string& what, const KnobDef& def, const KnobValue& kv) {
    if (!def.bytes || kv.kind != KnobValue::Int || kv.num >= kMiB) return;
    if (kv.num == 0 && def.id != KnobId::MemoryHigh) return;
    std::string n = std::to_string(kv.num);
    c.warn(v, what + " = " + n + " bytes is below 1 MiB (" +
                  (kv.num > 0 && kv.num < 1024 ? "did you mean \"" + n + "Mi\"?" : std::string("sizes take a unit: \"Ki\", \"Mi\", \"Gi\"")) + ")");
}

/// A fact value: { fact = "NAME" [, if_absent = "skip" | "fail"] } (model/fact_table.hpp). `scope` is
/// kFactContainer or kFactPod: the section the knob is in.
KnobValue parse_fact_value(const Ctx& c, const TV& val, const KnobDef& def, const std::string& what, uint8_t scope) {
    const std::string w = what + "." + def.key;
    check_keys(c, val, w, {"fact", "if_absent", "default"});
    const TV* f = get(val, "fact");
    if (!f) c.fail(val, w + ": an inline table value needs fact = \"<name>\" (see FACTS in nri-qos.toml(5))");
    std::string name = str(c, *f, w + ".fact", 64);
    const FactDef* fd = find_fact(name);
    if (!fd) {
        std::string near = closest_fact(name);
        c.fail(*f, w + ".fact: unknown fact \"" + name + "\"" + (near.empty() ? "" : " (did you mean \"" + near + "\"?)") +
                       " (see FACTS in nri-qos.toml(5))");
    }
    if (std::string bad = fact_usable(*fd, def.id, scope); !bad.empty()) c.fail(*f, w + ": " + bad);
    KnobValue v;
    v.kind = KnobValue::Fact;
    v.text = name;
    if (const TV* a = get(val, "if_absent")) {
        std::string s = str(c, *a, w + ".if_absent");
        if (s == "fail") v.num = 1;
        else if (s != "skip") c.fail(*a, w + ".if_absent: expected \"skip\" or \"fail\", got \"" + s + "\"");
    }
    if (const TV* d = get(val, "default")) {
        // rubik.cache_limit only: the class's level, the ceiling of the pod's own annotation.
        if (name != "rubik.cache_limit") c.fail(*d, w + ".default: only rubik.cache_limit takes a default");
        std::string s = str(c, *d, w + ".default");
        static const char* const levels[] = {"max", "high", "middle", "low", "dynamic"};
        int64_t i = 0;
        for (int n = 0; n < 5; ++n)
            if (s == levels[n]) i = n + 1;
        if (!i) c.fail(*d, w + ".default: expected \"max\", \"high\", \"middle\", \"low\" or \"dynamic\"");
        v.num |= i << 4;
    }
    return v;
}

std::vector<KnobSetting> parse_knobs(const Ctx& c, const TV& v, const std::string& what, uint8_t scope) {
    std::vector<KnobSetting> out;
    const auto& t = as_table(c, v, what);
    for (const auto& def : knob_table()) {
        auto it = t.find(def.key);
        if (it == t.end()) continue;
        c.guard([&] {
            const TV& val = it->second;
            KnobSetting ks{def.id, {}, {}, {}, {}};
            if (val.is_table()) {
                ks.value = parse_fact_value(c, val, def, what, scope);
                out.push_back(std::move(ks));
                return;
            }
            if (!val.is_integer() && !val.is_string())
                c.fail(val, what + "." + def.key + ": expected an integer, a string or { fact = \"...\" }, got " + toml_type(val));
            try {
                if (val.is_integer()) {
                    int64_t i = val.as_integer();
                    ks.value = parse_knob_value(def, nullptr, &i);
                } else {
                    ks.value = parse_knob_value(def, &val.as_string().str, nullptr);
                }
            } catch (const InputError& e) {
                c.fail(val, what + "." + e.what());
            }
            warn_knob(c, val, what + "." + def.key, def, ks.value);
            out.push_back(std::move(ks));
        });
    }
    for (const auto& [k, val] : t) {
        if (k == "raw" || find_knob(k)) continue;
        std::string hint = did_you_mean(k, knob_names());
        c.error(val, what + ": unknown knob \"" + k + "\" (" + (hint.empty() ? "" : hint + " ") + "see nri-qos.toml(5))");
    }
    if (const TV* raw = get(v, "raw")) {
        c.guard([&] {
            if (!raw->is_array()) c.fail(*raw, what + ".raw: expected an array of tables");
            if (raw->as_array().size() > 64) c.fail(*raw, what + ".raw: more than 64 entries");
            for (const auto& e : raw->as_array()) {
                c.guard([&] {
                    check_keys(c, e, what + ".raw", {"file", "controller", "value"});
                    KnobSetting ks{KnobId::Raw, {}, {}, {}, {}};
                    const TV* f = get(e, "file");
                    const TV* val = get(e, "value");
                    if (!f || !val) c.fail(e, what + ".raw: needs file and value");
                    ks.raw_file = str(c, *f, what + ".raw.file", 64);
                    if (!raw_file_allowed(ks.raw_file))
                        c.fail(*f, what + ".raw.file: \"" + ks.raw_file + "\" is not an allowed kernel file name (controller.name; cgroup.*, tasks and *.procs are refused)");
                    if (const TV* ctl = get(e, "controller")) {
                        ks.raw_ctrl = str(c, *ctl, what + ".raw.controller", 32);
                        if (!v1_controllers().count(ks.raw_ctrl)) {
                            std::string hint = did_you_mean(ks.raw_ctrl, {v1_controllers().begin(), v1_controllers().end()});
                            c.fail(*ctl, what + ".raw.controller: unknown cgroup v1 controller \"" + ks.raw_ctrl + "\"" + (hint.empty() ? "" : " (" + hint + ")"));
                        }
                    } else {
                        ks.raw_ctrl = ks.raw_file.substr(0, ks.raw_file.find('.'));
                        if (!v1_controllers().count(ks.raw_ctrl)) c.fail(*f, what + ".raw: give controller = \"...\" (cannot infer it from the file name)");
                    }
                    ks.value.kind = KnobValue::Text;
                    if (val->is_integer()) ks.value.text = std::to_string(val->as_integer());
                    else ks.value.text = str(c, *val, what + ".raw.value", 256);
                    for (unsigned char ch : ks.value.text)
                        if (ch < 0x20 && ch != '\t') c.fail(*val, what + ".raw.value: control characters are not allowed");
                    out.push_back(std::move(ks));
                });
            }
        });
    }
    return out;
}

std::vector<KubeQos> kube_qos_list(const Ctx& c, const TV& v) {
    std::vector<KubeQos> out;
    for (const auto& s : str_or_list(c, v, "match.kube_qos")) {
        if (s == "besteffort" || s == "BestEffort") out.push_back(KubeQos::BestEffort);
        else if (s == "burstable" || s == "Burstable") out.push_back(KubeQos::Burstable);
        else if (s == "guaranteed" || s == "Guaranteed") out.push_back(KubeQos::Guaranteed);
        else {
            std::string hint = did_you_mean(s, {"besteffort", "burstable", "guaranteed"});
            c.fail(v, "match.kube_qos: expected besteffort, burstable or guaranteed, got \"" + s + "\"" + (hint.empty() ? "" : " (" + hint + ")"));
        }
    }
    return out;
}

Match parse_match(const Ctx& c, const TV& v) {
    Match m;
    check_keys(c, v, "match", {"labels", "annotations", "labels_or_annotations", "namespace", "pod_name", "container_name", "kind", "kube_qos"});
    c.guard([&] { if (const TV* x = get(v, "labels")) m.labels = glob_map(c, *x, "match.labels"); });
    c.guard([&] { if (const TV* x = get(v, "annotations")) m.annotations = glob_map(c, *x, "match.annotations"); });
    c.guard([&] { if (const TV* x = get(v, "labels_or_annotations")) m.labels_or_annotations = glob_map(c, *x, "match.labels_or_annotations"); });
    c.guard([&] { if (const TV* x = get(v, "namespace")) m.namespaces = str_or_list(c, *x, "match.namespace"); });
    c.guard([&] { if (const TV* x = get(v, "pod_name")) m.pod_names = str_or_list(c, *x, "match.pod_name"); });
    c.guard([&] { if (const TV* x = get(v, "container_name")) m.container_names = str_or_list(c, *x, "match.container_name"); });
    c.guard([&] {
        if (const TV* x = get(v, "kind")) {
            std::string k = str(c, *x, "match.kind");
            if (k == "sandbox") m.kind = 1;
            else if (k == "container") m.kind = 2;
            else c.fail(*x, "match.kind: expected \"sandbox\" or \"container\", got \"" + k + "\"");
        }
    });
    c.guard([&] { if (const TV* x = get(v, "kube_qos")) m.kube_qos = kube_qos_list(c, *x); });
    return m;
}

bool valid_name(const std::string& s) {
    if (s.empty() || s.size() > 63) return false;
    for (unsigned char ch : s)
        if (!(isalnum(ch) || ch == '_' || ch == '-' || ch == '.')) return false;
    return true;
}

/// Length of the UTF-8 sequence starting at s[i] (1-4), or 0 when ill-formed (overlong forms,
/// surrogates and code points above U+10FFFF included; RFC 3629).
size_t utf8_seq(const std::string& s, size_t i) {
    auto u = [&](size_t k) { return k < s.size() ? static_cast<unsigned char>(s[k]) : 0u; };
    unsigned c = u(i);
    if (c < 0x80) return 1;
    auto cont = [&](size_t k) { return (u(k) & 0xC0) == 0x80; };
    if (c >= 0xC2 && c <= 0xDF) return cont(i + 1) ? 2 : 0;
    if (c >= 0xE0 && c <= 0xEF) {
        unsigned d = u(i + 1);
        if ((c == 0xE0 && d < 0xA0) || (c == 0xED && d > 0x9F)) return 0;
        return cont(i + 1) && cont(i + 2) ? 3 : 0;
    }
    if (c >= 0xF0 && c <= 0xF4) {
        unsigned d = u(i + 1);
        if ((c == 0xF0 && d < 0x90) || (c == 0xF4 && d > 0x8F)) return 0;
        return cont(i + 1) && cont(i + 2) && cont(i + 3) ? 4 : 0;
    }
    return 0;
}

/// An integer literal token (TOML 1.0: decimal with optional sign and '_', or 0x/0o/0b) that does
/// not fit in 64 bits. toml11 would silently wrap it. Dates, times and floats are not integers.
bool int_out_of_range(const std::string& tok) {
    std::string t;
    for (char ch : tok)
        if (ch != '_') t += ch;
    int base = 10;
    size_t i = 0;
    bool neg = false;
    if (t.size() > 2 && t[0] == '0' && (t[1] == 'x' || t[1] == 'o' || t[1] == 'b')) {
        base = t[1] == 'x' ? 16 : t[1] == 'o' ? 8 : 2;
        i = 2;
    } else if (!t.empty() && (t[0] == '+' || t[0] == '-')) {
        neg = t[0] == '-';
        i = 1;
    }
    if (i >= t.size()) return false;
    uint64_t v = 0;
    for (; i < t.size(); ++i) {
        char ch = t[i];
        int d = isdigit(static_cast<unsigned char>(ch)) ? ch - '0'
                : (base == 16 && isxdigit(static_cast<unsigned char>(ch))) ? 10 + (tolower(ch) - 'a') : -1;
        if (d < 0 || d >= base) return false;  // not an integer literal (float, date, bare key...)
        if (v > (UINT64_MAX - static_cast<uint64_t>(d)) / static_cast<uint64_t>(base)) return true;
        v = v * static_cast<uint64_t>(base) + static_cast<uint64_t>(d);
    }
    const uint64_t lim = static_cast<uint64_t>(INT64_MAX) + (neg ? 1 : 0);
    return v > lim;
}

/// Checks toml11 (a recursive-descent parser that asserts on some malformed input) must never
/// see fail: ill-formed UTF-8 (TOML documents are UTF-8), lines over 16 KiB, nesting over 32
/// levels, integer literals beyond 64 bits.
void prescan(const Ctx& c, const std::string& text) {
    int depth = 0, line = 1;
    size_t line_start = 0;
    // Where we are: code, a comment, or one of TOML 1.0's four strings ("...", '...', and the
    // multi-line forms, which close on the last three quotes of a run of 3 to 5). A scan by
    // quote parity loses track on '''it's''' and would skip the checks below from there on.
    enum { Code, Comment, Basic, Literal, MlBasic, MlLiteral } st = Code;
    auto run = [&](size_t k, char q) {
        size_t n = 0;
        while (k + n < text.size() && text[k + n] == q) ++n;
        return n;
    };
    auto at = [&](const std::string& m) { c.fail_line(line, m); };
    for (size_t i = 0; i < text.size(); ++i) {
        unsigned char ch = static_cast<unsigned char>(text[i]);
        if (ch >= 0x80) {
            size_t n = utf8_seq(text, i);
            if (n == 0) at("invalid UTF-8");
            i += n - 1;
            continue;
        }
        if (ch == '\n') {
            if (st == Comment || st == Basic || st == Literal) st = Code;  // toml11 reports an unterminated string
            ++line;
            line_start = i + 1;
            continue;
        }
        if (i - line_start > 16384) at("line longer than 16384 bytes");
        if (st == Comment) continue;
        if (st == Basic || st == MlBasic) {
            if (ch == '\\') {
                if (i + 1 < text.size() && text[i + 1] != '\n') ++i;  // skip the escaped character
            } else if (ch == '"' && (st == Basic || run(i, '"') >= 3)) {
                i += (st == Basic ? 1 : run(i, '"')) - 1;
                st = Code;
            }
            continue;
        }
        if (st == Literal || st == MlLiteral) {
            if (ch == '\'' && (st == Literal || run(i, '\'') >= 3)) {
                i += (st == Literal ? 1 : run(i, '\'')) - 1;
                st = Code;
            }
            continue;
        }
        if (ch == '#') {
            st = Comment;  // a comment runs to the end of the line
        } else if (ch == '"' || ch == '\'') {
            bool ml = run(i, static_cast<char>(ch)) >= 3;
            st = ch == '"' ? (ml ? MlBasic : Basic) : (ml ? MlLiteral : Literal);
            if (ml) i += 2;
        } else if (ch == '[' || ch == '{') {
            if (++depth > 32) at("nesting deeper than 32 levels");
        } else if (ch == ']' || ch == '}') {
            if (depth > 0) --depth;
        } else if ((isdigit(ch) || ch == '+' || ch == '-') && (i == 0 || !(isalnum(static_cast<unsigned char>(text[i - 1])) || text[i - 1] == '_' || text[i - 1] == '.' || text[i - 1] == '-'))) {
            size_t j = i;
            while (j < text.size() && (isalnum(static_cast<unsigned char>(text[j])) || text[j] == '_' || text[j] == '+' || text[j] == '-' || text[j] == '.' || text[j] == ':'))
                ++j;
            if (int_out_of_range(text.substr(i, j - i))) at("integer literal out of the 64-bit range");
            i = j - 1;
        }
    }
}

/// toml11's multi-line message ("[error] headline\n --> file\n   |\n 3 | text\n ...") as
/// (line, "TOML syntax error: headline"); line 0 when it names none.
std::pair<int, std::string> toml_error(const std::string& what) {
    std::string head = what.substr(0, what.find('\n'));
    if (head.rfind("[error] ", 0) == 0) head = head.substr(8);
    int line = 0;
    std::istringstream in(what);
    for (std::string l; std::getline(in, l);) {
        size_t bar = l.find(" | ");
        if (bar == std::string::npos) continue;
        std::string num = l.substr(0, bar);
        num.erase(0, num.find_first_not_of(' '));
        if (!num.empty() && num.size() < 9 && num.find_first_not_of("0123456789") == std::string::npos) {
            line = std::stoi(num);
            break;
        }
    }
    return {line, "TOML syntax error: " + head};
}


// ---- warnings over the whole policy ---------------------------------------------------------

bool glob_covers(const std::string& a, const std::string& b) { return a == "*" || a == b; }

/// True when every glob of `b` is covered by one of `a` (an empty `a` means "any").
bool list_covers(const std::vector<std::string>& a, const std::vector<std::string>& b) {
    if (a.empty()) return true;
    if (b.empty()) return false;
    for (const auto& g : b) {
        bool ok = false;
        for (const auto& h : a) ok = ok || glob_covers(h, g);
        if (!ok) return false;
    }
    return true;
}

const std::string* glob_of(const GlobMap& m, const std::string& k) {
    for (const auto& [key, g] : m)
        if (key == k) return &g;
    return nullptr;
}

/// Conservative: true only when rule condition set `a` certainly matches every request `b`
/// matches (then a rule with `b` after a rule with `a` can never be reached).
bool match_covers(const Match& a, const Match& b) {
    if (a.kind != 0 && a.kind != b.kind) return false;
    if (!a.kube_qos.empty()) {
        if (b.kube_qos.empty()) return false;
        for (auto q : b.kube_qos)
            if (std::find(a.kube_qos.begin(), a.kube_qos.end(), q) == a.kube_qos.end()) return false;
    }
    if (!list_covers(a.namespaces, b.namespaces) || !list_covers(a.pod_names, b.pod_names) ||
        !list_covers(a.container_names, b.container_names))
        return false;
    for (const auto& [k, g] : a.labels) {
        const std::string* h = glob_of(b.labels, k);
        if (!h || !glob_covers(g, *h)) return false;
    }
    for (const auto& [k, g] : a.annotations) {
        const std::string* h = glob_of(b.annotations, k);
        if (!h || !glob_covers(g, *h)) return false;
    }
    for (const auto& [k, g] : a.labels_or_annotations) {
        const std::string* h = glob_of(b.labels, k);
        if (!h) h = glob_of(b.annotations, k);
        if (!h) h = glob_of(b.labels_or_annotations, k);
        if (!h || !glob_covers(g, *h)) return false;
    }
    return true;
}

/// What makes a class a promotion (raises priority over an ordinary pod), for the "no gate"
/// warning: "" when nothing does.
std::string promotion_of(const ClassDef& cd) {
    for (const auto* ks : {&cd.container, &cd.pod})
        for (const auto& k : *ks) {
            // A fact raises only for a pod that the fact's own trust rule admits (model/fact_table.hpp
            // FactDef::raises, trust_keys): resolve_facts refuses an untrusted raise per request.
            if (k.value.kind == KnobValue::Fact) continue;
            if (k.id == KnobId::CpuQosLevel && k.value.kind == KnobValue::Int && k.value.num > 0) return "cpu_qos_level = " + std::to_string(k.value.num);
            if (k.id == KnobId::CpuQuota && k.value.kind == KnobValue::Max) return "cpu_quota_us = \"max\"";
            if (k.id == KnobId::OomScoreAdj && k.value.num < 0) return "oom_score_adj = " + std::to_string(k.value.num);
            if ((k.id == KnobId::MemoryMin || k.id == KnobId::MemoryLow) && (k.value.kind == KnobValue::Max || k.value.num > 0))
                return std::string(knob_def(k.id).key) + " protection";
        }
    return "";
}

/// First pod label/annotation key rule `r` matches on, as "label \"k\"" / "annotation \"k\"" /
/// "label or annotation \"k\"" ("" when it matches on none).
std::string author_key_of(const Match& m) {
    if (!m.labels.empty()) return "label \"" + m.labels.front().first + "\"";
    if (!m.annotations.empty()) return "annotation \"" + m.annotations.front().first + "\"";
    if (!m.labels_or_annotations.empty()) return "label or annotation \"" + m.labels_or_annotations.front().first + "\"";
    return "";
}

/// True when every pod label/annotation condition of `m` is on a guarded key (a
/// labels_or_annotations key must be guarded as both).
bool all_keys_guarded(const Policy& p, const Match& m) {
    for (const auto& [k, g] : m.labels)
        if (!guarded_note(p.guarded_labels, k)) return false;
    for (const auto& [k, g] : m.annotations)
        if (!guarded_note(p.guarded_annotations, k)) return false;
    for (const auto& [k, g] : m.labels_or_annotations)
        if (!guarded_note(p.guarded_labels, k) || !guarded_note(p.guarded_annotations, k)) return false;
    return true;
}

/// The trust notes of `check` (issue #19): per raising fact the policy uses, what it can raise,
/// the annotation keys it reads, and whether they are trusted (declared in [guarded.annotations])
/// or which declaration would unlock the seed system's full behaviour. Information, not warnings:
/// an untrusted raise is refused per request (resolve_facts), so no policy makes one possible.
void trust_notes(const Policy& p, std::vector<PolicyDiag>& notes) {
    for (const auto& f : fact_table()) {
        if (!f.raises || !*f.trust_keys) continue;
        std::string classes;
        for (const auto& [n, cd] : p.classes)
            for (const auto* ks : {&cd.container, &cd.pod})
                if (std::any_of(ks->begin(), ks->end(), [&](const KnobSetting& k) { return k.value.kind == KnobValue::Fact && k.value.text == f.name; })) {
                    classes += (classes.empty() ? " " : ", ") + n;
                    break;
                }
        if (classes.empty()) continue;
        std::string undeclared, declared, keys = f.trust_keys;
        for (size_t at = 0; at <= keys.size();) {
            size_t comma = keys.find(',', at);
            std::string k = keys.substr(at, comma == std::string::npos ? std::string::npos : comma - at);
            at = comma == std::string::npos ? keys.size() + 1 : comma + 1;
            std::string& to = guarded_note(p.guarded_annotations, k) ? declared : undeclared;
            to += std::string(to.empty() ? "" : ", ") + "\"" + k + "\"";
        }
        std::string src = f.source;
        std::string system = src.substr(0, src.find('@'));
        std::string msg = std::string("fact ") + f.name + " (class" + (classes.find(',') != std::string::npos ? "es" : "") + classes + ") can raise: " +
                          raise_names(f.raises) + (f.besteffort_only ? " (BestEffort pods only)" : "") + "; ";
        if (undeclared.empty())
            msg += "trusted: [guarded.annotations] declares " + declared + ": " + system + "'s full behaviour";
        else
            msg += "untrusted: applied only where it does not raise; declaring " + undeclared +
                   " in [guarded.annotations] (or a pod namespace in the class's gate.namespaces) unlocks " + system + "'s full behaviour";
        notes.push_back({PolicyDiag::Note, 0, msg});
    }
}

/// The notes of `check` for settings.leave_to_others: per entry, the knobs nri-qos leaves and the
/// classes that set them (or that nri-qos never sets that field).
void leave_notes(const Policy& p, std::vector<PolicyDiag>& notes) {
    for (const auto& lf : p.leave_to_others) {
        std::string knobs, classes;
        for (const auto& d : knob_table())
            if (lf.covers.knobs & knob_bit(d.id)) knobs += std::string(knobs.empty() ? "" : ", ") + d.key;
        if (!lf.covers.raw_file.empty()) knobs = "raw:" + lf.covers.raw_file;
        for (const auto& [n, cd] : p.classes)
            for (const auto* ks : {&cd.container, &cd.pod})
                if (std::any_of(ks->begin(), ks->end(), [&](const KnobSetting& k) { return left_to_other({lf}, k) != nullptr; })) {
                    classes += std::string(classes.empty() ? "" : ", ") + n;
                    break;
                }
        std::string msg = "settings.leave_to_others: " + lf.field + " left to " + lf.plugin + ": ";
        if (lf.covers.never_set) msg += "nri-qos never sets this NRI field";
        else msg += "nri-qos never sets " + knobs + (classes.empty() ? " (no class sets it)" : " (set by class " + classes + ": skipped, \"left to " + lf.plugin + "\")");
        notes.push_back({PolicyDiag::Note, 0, msg});
    }
}

void policy_warnings(const Ctx& c, const Policy& p, const std::map<std::string, int>& class_line) {
    // A rule made unreachable by an earlier one that matches everything it matches (a merge
    // rule still adds its class after an earlier match: never unreachable that way).
    for (size_t j = 1; j < p.rules.size(); ++j)
        for (size_t i = 0; i < j && !p.rules[j].merge; ++i)
            if (match_covers(p.rules[i].match, p.rules[j].match)) {
                c.add(PolicyDiag::Warning, p.rules[j].line,
                      "rules: \"" + p.rules[j].name + "\" can never match: rule \"" + p.rules[i].name + "\" (line " +
                          std::to_string(p.rules[i].line) + ") comes first and matches everything it matches");
                break;
            }
    // A class no rule, default_class or gate.fallback uses.
    std::set<std::string> used = {p.default_class};
    for (const auto& r : p.rules) used.insert(r.cls);
    for (const auto& [n, cd] : p.classes)
        if (cd.gate.enabled) used.insert(cd.gate.fallback);
    for (const auto& [n, cd] : p.classes)
        if (!used.count(n)) {
            auto it = class_line.find(n);
            c.add(PolicyDiag::Warning, it == class_line.end() ? 0 : it->second,
                  "classes." + n + ": no rule, settings.default_class or gate.fallback uses this class");
        }
    // A class that raises priority, without a gate, reachable from a key the pod author sets.
    for (const auto& r : p.rules) {
        const ClassDef& cd = p.classes.at(r.cls);
        if (cd.gate.enabled || all_keys_guarded(p, r.match)) continue;
        std::string promo = promotion_of(cd), key = author_key_of(r.match);
        if (promo.empty() || key.empty()) continue;
        c.add(PolicyDiag::Warning, r.line,
              "rules: \"" + r.name + "\" gives class " + r.cls + " (" + promo + ") on pod " + key +
                  ", which the pod author sets, and the class has no gate: add one (classes." + r.cls + ".gate) or declare the key in [guarded]");
    }
}

/// Parse [guarded.labels] / [guarded.annotations]: key → non-empty note.
KeyNotes key_notes(const Ctx& c, const TV& v, const std::string& what) {
    KeyNotes out;
    const auto& t = as_table(c, v, what);
    if (t.size() > 4096) c.fail(v, what + ": more than 4096 entries");
    for (const auto& kv : t)  // (no structured bindings: clang 14 cannot capture them in a lambda)
        c.guard([&, &k = kv.first, &val = kv.second] {
            if (k.empty() || k.size() > 317) c.fail(val, what + ": key must be 1-317 bytes");
            std::string note = str(c, val, what + ".\"" + k + "\"", 1024);
            if (note.empty()) c.fail(val, what + ".\"" + k + "\": name the admission policy that controls this key (a non-empty note)");
            out.emplace_back(k, std::move(note));
        });
    std::sort(out.begin(), out.end());
    return out;
}

/// A plugin name of settings.leave_to_others: 1-64 characters [A-Za-z0-9_.-] (an NRI plugin's
/// name, with or without its index: containerd/nri pkg/api/plugin.go ParsePluginName).
bool plugin_name_ok(const std::string& n) {
    if (n.empty() || n.size() > 64) return false;
    for (unsigned char ch : n)
        if (!(isalnum(ch) || ch == '_' || ch == '-' || ch == '.')) return false;
    return true;
}

/// Parse settings.leave_to_others: an array of inline tables {field = "<name>" or ["<name>",
/// ...], plugin = "<name>"}. Each field is validated against the knob table and NRI's adjustment
/// fields (knobs.hpp field_knobs); a field given twice is an error (one owner per field).
std::vector<LeftField> leave_to_others(const Ctx& c, const TV& v) {
    const std::string what = "settings.leave_to_others";
    if (!v.is_array()) c.fail(v, what + ": expected an array of {field = \"...\", plugin = \"...\"}");
    const auto& arr = v.as_array();
    if (arr.size() > 256) c.fail(v, what + ": more than 256 entries");
    std::vector<LeftField> out;
    std::vector<std::string> known;
    for (const auto& d : knob_table()) known.push_back(d.key);
    for (const char* n : {"cpu.shares", "cpu.quota", "cpu.period", "cpu.cpus", "cpu.mems", "memory.limit", "memory.swap",
                          "memory.reservation", "pids.limit", "rdt_class", "blockio_class", "oom_score_adj"})
        known.push_back(n);
    for (size_t i = 0; i < arr.size(); ++i)
        c.guard([&, i] {
            const TV& e = arr[i];
            const std::string at = what + "[" + std::to_string(i) + "]";
            if (!e.is_table()) c.fail(e, at + ": expected {field = \"...\", plugin = \"...\"}");
            check_keys(c, e, at, {"field", "plugin"});
            const TV* pl = get(e, "plugin");
            const TV* f = get(e, "field");
            if (!pl || !f) c.fail(e, at + ": needs both field and plugin");
            std::string plugin = str(c, *pl, at + ".plugin", 64);
            if (!plugin_name_ok(plugin)) c.fail(*pl, at + ".plugin: expected a plugin name of 1-64 characters [A-Za-z0-9_.-]");
            std::vector<const TV*> fields;
            if (f->is_array()) {
                if (f->as_array().empty()) c.fail(*f, at + ".field: an empty list");
                for (const auto& x : f->as_array()) fields.push_back(&x);
            } else {
                fields.push_back(f);
            }
            for (const TV* x : fields)
                c.guard([&, x] {
                    LeftField lf;
                    lf.field = str(c, *x, at + ".field", 80);
                    lf.plugin = plugin;
                    std::string err;
                    if (!field_knobs(lf.field, lf.covers, err)) {
                        std::string hint = closest_name(lf.field, known);
                        c.fail(*x, at + ".field: " + err + (hint.empty() ? "" : " (did you mean \"" + hint + "\"?)"));
                    }
                    for (const auto& o : out)
                        if (o.field == lf.field) c.fail(*x, at + ".field: \"" + lf.field + "\" is already left to " + o.plugin);
                    out.push_back(std::move(lf));
                });
        });
    return out;
}

/// Parse and validate `text` into `p`, recording every error; `class_line` gets the line of each
/// class (for warnings).
void parse_into(const Ctx& c, const std::string& text, Policy& p, std::map<std::string, int>& class_line) {
    if (text.size() > kMaxPolicyBytes) c.fail_top("policy larger than " + std::to_string(kMaxPolicyBytes) + " bytes");
    prescan(c, text);
    TV root;
    try {
        std::istringstream in(text);
        root = toml::parse(in, c.file);
    } catch (const toml::exception& e) {
        auto [line, msg] = toml_error(e.what());
        c.fail_line(line, msg);
    } catch (const std::exception& e) {
        c.fail_top("cannot parse: " + std::string(e.what()).substr(0, 200));
    }
    p.source = c.file;
    check_keys(c, root, "policy", {"version", "settings", "guarded", "resctrl", "rules", "classes"});
    c.guard([&] {
        const TV* ver = get(root, "version");
        if (!ver) c.fail_top("missing \"version = " + std::to_string(kPolicyVersion) + "\"");
        if (!ver->is_integer() || ver->as_integer() != kPolicyVersion)
            c.fail(*ver, "version: this nri-qos reads policy version " + std::to_string(kPolicyVersion));
    });

    int default_line = 0;
    if (const TV* s = get(root, "settings")) {
        c.guard([&] {
            check_keys(c, *s, "settings", {"default_class", "fail", "cpu_weight_formula", "koordinator_quota_lift", "metrics_file", "event_log", "event_log_max_bytes", "leave_to_others",
                                           "katalyst_reserved_cpus"});
            c.guard([&] {
                if (const TV* x = get(*s, "default_class")) {
                    default_line = Ctx::line_of(*x);
                    p.default_class = str(c, *x, "settings.default_class", 63);
                }
            });
            c.guard([&] { if (const TV* x = get(*s, "fail")) p.fail_closed = fail_mode(c, *x, "settings.fail"); });
            c.guard([&] {
                if (const TV* x = get(*s, "cpu_weight_formula")) {
                    std::string f = str(c, *x, "settings.cpu_weight_formula");
                    if (f == "linear") p.cpu_weight_formula = WeightFormula::Linear;
                    else if (f == "log-quadratic") p.cpu_weight_formula = WeightFormula::LogQuadratic;
                    else if (f == "auto") p.cpu_weight_formula = WeightFormula::Auto;
                    else c.fail(*x, "settings.cpu_weight_formula: expected \"auto\", \"log-quadratic\" or \"linear\"");
                }
            });
            c.guard([&] {
                if (const TV* x = get(*s, "koordinator_quota_lift")) {
                    std::string f = str(c, *x, "settings.koordinator_quota_lift");
                    if (f == "cpuset") p.koordinator_quota_lift = Policy::QuotaLift::Cpuset;
                    else if (f == "fits") p.koordinator_quota_lift = Policy::QuotaLift::Fits;
                    else c.fail(*x, "settings.koordinator_quota_lift: expected \"cpuset\" (koordlet: lift whenever bound to a cpuset) or \"fits\" (only when the quota pays for the cpuset)");
                }
            });
            // The hook's own sinks (src/records/record.hpp, src/records/metrics.hpp): absolute paths or "" (off).
            auto sink_path = [&](const TV& x, const char* key) {
                if (!x.is_string()) c.fail(x, std::string("settings.") + key + ": expected a path string (\"\" disables)");
                std::string v = x.as_string().str;
                if (!v.empty() && (v[0] != '/' || v.size() > 4000 || v.back() == '/' || v.find('\0') != std::string::npos))
                    c.fail(x, std::string("settings.") + key + ": expected an absolute file path or \"\"");
                return v;
            };
            c.guard([&] {
                if (const TV* x = get(*s, "metrics_file")) {
                    p.sinks.metrics_file = sink_path(*x, "metrics_file");
                    p.sinks.metrics_file_set = true;
                }
            });
            c.guard([&] {
                if (const TV* x = get(*s, "event_log")) {
                    p.sinks.event_log = sink_path(*x, "event_log");
                    p.sinks.event_log_set = true;
                }
            });
            // Katalyst's reserved CPUs (katalyst-core GetCoresReservedForSystem): the list it
            // logs / its ReservedCPUList, or the count (--cpu-resource-plugin-reserved).
            c.guard([&] {
                if (const TV* x = get(*s, "katalyst_reserved_cpus")) {
                    if (x->is_integer()) {
                        if (x->as_integer() < 0 || x->as_integer() > CpuSet::kMaxId + 1)
                            c.fail(*x, "settings.katalyst_reserved_cpus: a count from 0 to " + std::to_string(CpuSet::kMaxId + 1));
                        p.katalyst_reserved_count = static_cast<unsigned>(x->as_integer());
                    } else if (x->is_string()) {
                        std::string why;
                        auto set = x->as_string().str.empty() ? std::optional<CpuSet>(CpuSet()) : CpuSet::parse(x->as_string().str, &why);
                        if (!set) c.fail(*x, "settings.katalyst_reserved_cpus: " + why);
                        p.katalyst_reserved_cpus = set->str();
                    } else {
                        c.fail(*x, "settings.katalyst_reserved_cpus: expected a CPU list (\"0-1\") or a count (2)");
                    }
                }
            });
            c.guard([&] {
                if (const TV* x = get(*s, "event_log_max_bytes")) {
                    if (!x->is_integer() || x->as_integer() < 65536 || x->as_integer() > (int64_t(1) << 40))
                        c.fail(*x, "settings.event_log_max_bytes: expected an integer from 65536 to 2^40");
                    p.sinks.event_log_max_bytes = static_cast<uint64_t>(x->as_integer());
                }
            });
        });
    }

    if (const TV* s = get(root, "settings"))
        if (const TV* x = get(*s, "leave_to_others")) c.guard([&] { p.leave_to_others = leave_to_others(c, *x); });

    if (const TV* g = get(root, "guarded")) {
        c.guard([&] {
            check_keys(c, *g, "guarded", {"labels", "annotations"});
            c.guard([&] { if (const TV* x = get(*g, "labels")) p.guarded_labels = key_notes(c, *x, "guarded.labels"); });
            c.guard([&] { if (const TV* x = get(*g, "annotations")) p.guarded_annotations = key_notes(c, *x, "guarded.annotations"); });
        });
    }

    if (const TV* rg = get(root, "resctrl")) {
        c.guard([&] {
            const auto& t = as_table(c, *rg, "resctrl");
            if (t.size() > 64) c.fail(*rg, "resctrl: more than 64 groups");
            for (const auto& [gname, gv] : t) c.guard([&, &gname = gname, &gv = gv] {
                const std::string w = "resctrl." + gname;
                ResctrlGroupDef g;
                g.name = gname;
                g.line = Ctx::line_of(gv);
                std::string why = resctrl_group_name_error(gname);
                if (!why.empty()) c.fail(gv, w + ": " + why);
                check_keys(c, gv, w, {"l3", "mb", "l3_percent", "l3_start_percent", "l3_round", "mb_percent", "manage"});
                auto pct = [&](const char* key, int lo) {
                    const TV* x = get(gv, key);
                    if (!x) return -1;
                    if (!x->is_integer() || x->as_integer() < lo || x->as_integer() > 100)
                        c.fail(*x, w + "." + key + ": expected an integer from " + std::to_string(lo) + " to 100");
                    return static_cast<int>(x->as_integer());
                };
                auto line = [&](const char* key, const char* prefix) {
                    const TV* x = get(gv, key);
                    if (!x) return std::string();
                    std::string v = str(c, *x, w + "." + key, 1024);
                    std::string e = resctrl_line_error(v, prefix);
                    if (!e.empty()) c.fail(*x, w + "." + key + ": " + e);
                    return v;
                };
                c.guard([&] { g.l3 = line("l3", "L3"); });
                c.guard([&] { g.mb = line("mb", "MB"); });
                c.guard([&] { g.l3_percent = pct("l3_percent", 1); });
                c.guard([&] {
                    int v = pct("l3_start_percent", 0);
                    if (v >= 0) g.l3_start_percent = v;
                });
                c.guard([&] { g.mb_percent = pct("mb_percent", 1); });
                c.guard([&] {
                    if (const TV* x = get(gv, "l3_round")) {
                        std::string r = str(c, *x, w + ".l3_round");
                        if (r == "down") g.l3_round_down = true;
                        else if (r != "up") c.fail(*x, w + ".l3_round: expected \"up\" (koordlet) or \"down\" (rubik)");
                    }
                });
                c.guard([&] {
                    if (const TV* x = get(gv, "manage")) {
                        if (!x->is_boolean()) c.fail(*x, w + ".manage: expected true or false");
                        g.manage = x->as_boolean();
                    }
                });
                if (!g.l3.empty() && g.l3_percent >= 0) c.error(gv, w + ": give l3 or l3_percent, not both");
                if (!g.mb.empty() && g.mb_percent >= 0) c.error(gv, w + ": give mb or mb_percent, not both");
                if (g.l3_percent >= 0 && g.l3_start_percent >= g.l3_percent)
                    c.error(gv, w + ": l3_start_percent must be below l3_percent");
                if (g.l3_round_down && g.l3_start_percent > 0) c.error(gv, w + ": l3_round = \"down\" counts ways from way 0 (no l3_start_percent)");
                if (g.l3.empty() && g.mb.empty() && g.l3_percent < 0 && g.mb_percent < 0)
                    c.error(gv, w + ": declares no schemata (l3, l3_percent, mb or mb_percent)");
                p.resctrl_groups.emplace(gname, std::move(g));
            });
        });
    }

    std::map<std::string, int> fallback_line;
    const TV* classes = get(root, "classes");
    if (!classes) c.add(PolicyDiag::Error, 0, "no [classes] defined");
    if (classes) c.guard([&] {
        const auto& ct = as_table(c, *classes, "classes");
        if (ct.size() > 1024) c.fail(*classes, "more than 1024 classes");
        for (const auto& entry : ct) {
            const std::string& cname = entry.first;
            const TV& cv = entry.second;
            std::string w = "classes." + cname;
            ClassDef cd;
            cd.name = cname;
            class_line[cname] = Ctx::line_of(cv);
            c.guard([&] {
                if (!valid_name(cname)) c.fail(cv, w + ": class names are 1-63 characters [A-Za-z0-9_.-]");
                check_keys(c, cv, w, {"description", "fail", "container", "pod", "gate", "pod_cpu_weight_formula", "accept_merge"});
                c.guard([&] { if (const TV* x = get(cv, "description")) cd.description = str(c, *x, w + ".description", 1024); });
                c.guard([&] { if (const TV* x = get(cv, "fail")) cd.fail_closed = fail_mode(c, *x, w + ".fail"); });
                c.guard([&] {
                    if (const TV* x = get(cv, "pod_cpu_weight_formula")) {
                        std::string f = str(c, *x, w + ".pod_cpu_weight_formula");
                        if (f == "linear") cd.pod_weight_formula = WeightFormula::Linear;
                        else if (f == "log-quadratic") cd.pod_weight_formula = WeightFormula::LogQuadratic;
                        else if (f == "auto") cd.pod_weight_formula = WeightFormula::Auto;
                        else c.fail(*x, w + ".pod_cpu_weight_formula: expected \"auto\", \"log-quadratic\" or \"linear\"");
                        cd.pod_weight_formula_set = true;
                    }
                });
                c.guard([&] {
                    if (const TV* x = get(cv, "accept_merge")) {
                        if (!x->is_boolean()) c.fail(*x, w + ".accept_merge: expected true or false");
                        cd.accept_merge = x->as_boolean();
                    }
                });
                c.guard([&] { if (const TV* x = get(cv, "container")) cd.container = parse_knobs(c, *x, w + ".container", kFactContainer); });
                c.guard([&] {
                    if (const TV* x = get(cv, "pod")) {
                        cd.pod = parse_knobs(c, *x, w + ".pod", kFactPod);
                        for (const auto& k : cd.pod)
                            if (k.id == KnobId::OomScoreAdj || k.id == KnobId::ResctrlGroup)
                                c.error(*x, w + ".pod: " + knob_def(k.id).key + " applies to processes, set it under .container");
                    }
                });
                c.guard([&] {
                    const TV* g = get(cv, "gate");
                    if (!g) return;
                    check_keys(c, *g, w + ".gate", {"namespaces", "labels", "fallback"});
                    cd.gate.enabled = true;
                    c.guard([&] { if (const TV* x = get(*g, "namespaces")) cd.gate.namespaces = str_or_list(c, *x, w + ".gate.namespaces"); });
                    c.guard([&] {
                        const TV* x = get(*g, "labels");
                        if (!x) return;
                        cd.gate.labels = glob_map(c, *x, w + ".gate.labels");
                        for (const auto& [k, glob] : cd.gate.labels)
                            if (!guarded_note(p.guarded_labels, k))
                                c.warn(x->as_table().at(k), w + ".gate.labels: \"" + k +
                                                                "\" is a pod label the pod author can set, and it is not declared in [guarded.labels]: "
                                                                "it never qualifies a pod (declare it there, naming the admission policy that controls it, or remove it)");
                    });
                    const TV* fb = get(*g, "fallback");
                    if (!fb) c.fail(*g, w + ".gate: needs fallback = \"<class>\"");
                    fallback_line[cname] = Ctx::line_of(*fb);
                    cd.gate.fallback = str(c, *fb, w + ".gate.fallback", 63);
                });
            });
            p.classes.emplace(cname, std::move(cd));  // kept even when broken: no follow-on "unknown class"
        }
    });
    std::vector<std::string> class_names;
    for (const auto& [n, cd] : p.classes) class_names.push_back(n);
    auto unknown_class = [&](const std::string& what, const std::string& name) {
        std::string hint = did_you_mean(name, class_names);
        return what + ": unknown class \"" + name + "\"" + (hint.empty() ? "" : " (" + hint + ")");
    };
    for (const auto& [n, cd] : p.classes) {
        if (!cd.gate.enabled || cd.gate.fallback.empty()) continue;
        auto fb = p.classes.find(cd.gate.fallback);
        int line = fallback_line.count(n) ? fallback_line[n] : 0;
        if (fb == p.classes.end()) c.add(PolicyDiag::Error, line, unknown_class("classes." + n + ".gate.fallback", cd.gate.fallback));
        else if (fb->second.gate.enabled) c.add(PolicyDiag::Error, line, "classes." + n + ".gate.fallback: \"" + cd.gate.fallback + "\" is gated itself");
    }
    if (p.default_class.empty()) {
        if (default_line == 0) c.add(PolicyDiag::Error, 0, "settings.default_class is required");
    } else if (!p.classes.count(p.default_class)) {
        if (classes) c.add(PolicyDiag::Error, default_line, unknown_class("settings.default_class", p.default_class));
    } else if (p.classes.at(p.default_class).gate.enabled) {
        c.add(PolicyDiag::Error, default_line, "settings.default_class: \"" + p.default_class + "\" must not be gated");
    }

    if (const TV* rules = get(root, "rules")) {
        c.guard([&] {
            if (!rules->is_array()) c.fail(*rules, "rules: expected an array of tables ([[rules]])");
            if (rules->as_array().size() > 100000) c.fail(*rules, "rules: more than 100000 rules");
            std::set<std::string> names;
            for (const auto& rv : rules->as_array()) {
                Rule r;
                bool ok = true;
                c.guard([&] {
                    ok = false;
                    check_keys(c, rv, "rules", {"name", "class", "match", "merge"});
                    r.line = Ctx::line_of(rv);
                    c.guard([&] {
                        if (const TV* n = get(rv, "name")) r.name = str(c, *n, "rules.name", 128);
                    });
                    if (r.name.empty()) r.name = "rule@" + std::to_string(r.line);
                    if (!names.insert(r.name).second) c.error(rv, "rules.name: duplicate rule name \"" + r.name + "\"");
                    c.guard([&] { if (const TV* m = get(rv, "match")) r.match = parse_match(c, *m); });
                    c.guard([&] {
                        if (const TV* m = get(rv, "merge")) {
                            if (!m->is_boolean()) c.fail(*m, "rules.merge: expected true or false");
                            r.merge = m->as_boolean();
                        }
                    });
                    const TV* cl = get(rv, "class");
                    if (!cl) c.fail(rv, "rules: every rule needs class = \"<class>\"");
                    r.cls = str(c, *cl, "rules.class", 63);
                    if (classes && !p.classes.count(r.cls)) c.fail(*cl, unknown_class("rules.class", r.cls));
                    ok = true;
                });
                if (ok) p.rules.push_back(std::move(r));
            }
        });
    }
}

}  // namespace

std::string closest_name(const std::string& word, const std::vector<std::string>& known) { return closest(word, known); }

const LeftField* left_to_other(const std::vector<LeftField>& leave, const KnobSetting& k) {
    for (const auto& lf : leave) {
        if (k.id == KnobId::Raw ? (!lf.covers.raw_file.empty() && lf.covers.raw_file == k.raw_file) : (lf.covers.knobs & knob_bit(k.id)) != 0)
            return &lf;
    }
    return nullptr;
}

const std::string* guarded_note(const KeyNotes& notes, const std::string& key) {
    auto it = std::lower_bound(notes.begin(), notes.end(), key, [](const auto& e, const std::string& k) { return e.first < k; });
    return it != notes.end() && it->first == key ? &it->second : nullptr;
}

size_t PolicyCheck::errors() const {
    size_t n = 0;
    for (const auto& d : diags) n += d.level == PolicyDiag::Error;
    return n;
}

size_t PolicyCheck::warnings() const { return diags.size() - errors(); }

std::string format_diag(const std::string& file, const PolicyDiag& d) {
    return file + (d.line > 0 ? ":" + std::to_string(d.line) : "") + ": " + (d.level == PolicyDiag::Warning ? "warning: " : d.level == PolicyDiag::Note ? "note: " : "") + d.message;
}

PolicyCheck check_policy_text(const std::string& text, const std::string& name) {
    PolicyCheck out;
    Ctx c{name, &out.diags};
    std::map<std::string, int> class_line;
    c.guard([&] { parse_into(c, text, out.policy, class_line); });
    // Warnings are about a policy that loads: only computed when there is no error.
    if (out.errors() == 0) policy_warnings(c, out.policy, class_line);
    if (out.errors() == 0) trust_notes(out.policy, out.notes);
    if (out.errors() == 0) leave_notes(out.policy, out.notes);
    // By line; findings about the file as a whole (line 0) last.
    auto key = [](const PolicyDiag& d) { return d.line > 0 ? d.line : INT32_MAX; };
    std::stable_sort(out.diags.begin(), out.diags.end(), [&](const PolicyDiag& a, const PolicyDiag& b) { return key(a) < key(b); });
    return out;
}

Policy parse_policy_toml(const std::string& text, const std::string& name) {
    PolicyCheck r = check_policy_text(text, name);
    size_t n = r.errors();
    if (n == 0) return std::move(r.policy);
    for (const auto& d : r.diags)
        if (d.level == PolicyDiag::Error)
            throw InputError(format_diag(name, d) +
                             (n > 1 ? " (+" + std::to_string(n - 1) + " more error" + (n > 2 ? "s" : "") + ": run nri-qos check)" : ""));
    throw InputError(name + ": invalid policy");  // not reached
}

std::string read_policy_file(const std::string& path) {
    // O_NONBLOCK: a FIFO must not hang the hook; fstat before reading refuses non-regular files.
    int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
    if (fd < 0) throw InputError(path + ": cannot open policy: " + std::strerror(errno));
    struct stat st {};
    struct statfs sfs {};
    // procfs/sysfs files claim to be regular files of size 0: refuse them too.
    constexpr long kProcMagic = 0x9fa0, kSysfsMagic = 0x62656572;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || fstatfs(fd, &sfs) != 0 ||
        static_cast<long>(sfs.f_type) == kProcMagic || static_cast<long>(sfs.f_type) == kSysfsMagic) {
        close(fd);
        throw InputError(path + ": policy is not a regular file");
    }
    if (static_cast<uint64_t>(st.st_size) > kMaxPolicyBytes) {
        close(fd);
        throw InputError(path + ": policy larger than " + std::to_string(kMaxPolicyBytes) + " bytes");
    }
    std::string text(static_cast<size_t>(st.st_size), '\0');
    size_t got = 0;
    while (got < text.size()) {
        ssize_t n = read(fd, &text[got], text.size() - got);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        got += static_cast<size_t>(n);
    }
    close(fd);
    text.resize(got);
    return text;
}

Policy load_policy_toml(const std::string& path) { return parse_policy_toml(read_policy_file(path), path); }

// ---- JSON form (tests and tools) ---------------------------------------------------------

namespace {
json globmap_json(const GlobMap& m) {
    json a = json::array();
    for (const auto& [k, v] : m) a.push_back({k, v});
    return a;
}
GlobMap globmap_from(const json& a) {
    GlobMap m;
    for (const auto& e : a) m.emplace_back(e.at(0).get<std::string>(), e.at(1).get<std::string>());
    return m;
}
json knobs_json(const std::vector<KnobSetting>& ks) {
    json a = json::array();
    for (const auto& k : ks)
        a.push_back({static_cast<int>(k.id), static_cast<int>(k.value.kind), k.value.num, k.value.text, k.raw_file, k.raw_ctrl});
    return a;
}
std::vector<KnobSetting> knobs_from(const json& a) {
    std::vector<KnobSetting> out;
    for (const auto& e : a) {
        KnobSetting k;
        int id = e.at(0).get<int>(), kind = e.at(1).get<int>();
        if (id < 0 || id > static_cast<int>(KnobId::Raw) || kind < 0 || kind > KnobValue::Fact) throw InputError("compiled policy: bad knob");
        k.id = static_cast<KnobId>(id);
        k.value.kind = static_cast<KnobValue::Kind>(kind);
        k.value.num = e.at(2).get<int64_t>();
        k.value.text = e.at(3).get<std::string>();
        k.raw_file = e.at(4).get<std::string>();
        k.raw_ctrl = e.at(5).get<std::string>();
        if (k.value.kind == KnobValue::Fact && !find_fact(k.value.text)) throw InputError("compiled policy: unknown fact");
        out.push_back(std::move(k));
    }
    return out;
}
}  // namespace

json policy_to_json(const Policy& p) {
    json j;
    j["version"] = p.version;
    j["default_class"] = p.default_class;
    j["fail_closed"] = p.fail_closed;
    j["cpu_weight_formula"] = weight_formula_name(p.cpu_weight_formula);
    j["koordinator_quota_lift"] = p.koordinator_quota_lift == Policy::QuotaLift::Fits ? "fits" : "cpuset";
    j["katalyst_reserved"] = {p.katalyst_reserved_cpus, p.katalyst_reserved_count};
    j["source"] = p.source;
    j["sinks"] = {p.sinks.metrics_file_set, p.sinks.metrics_file, p.sinks.event_log_set, p.sinks.event_log, p.sinks.event_log_max_bytes};
    json rules = json::array();
    for (const auto& r : p.rules) {
        json kq = json::array();
        for (auto q : r.match.kube_qos) kq.push_back(static_cast<int>(q));
        rules.push_back({{"n", r.name}, {"c", r.cls}, {"l", r.line}, {"merge", r.merge},
                         {"m", {globmap_json(r.match.labels), globmap_json(r.match.annotations), globmap_json(r.match.labels_or_annotations),
                                r.match.namespaces, r.match.pod_names, r.match.container_names, r.match.kind, kq}}});
    }
    j["rules"] = std::move(rules);
    json classes = json::object();
    for (const auto& [n, c] : p.classes) {
        if (c.knobs_pending()) throw std::logic_error("policy_to_json: class " + n + ": knob lists not decoded (policy_cache::decode_knobs)");
        classes[n] = {{"d", c.description}, {"f", c.fail_closed}, {"c", knobs_json(c.container)}, {"p", knobs_json(c.pod)},
                      {"g", {c.gate.enabled, c.gate.namespaces, globmap_json(c.gate.labels), c.gate.fallback}},
                      {"pwf", c.pod_weight_formula_set ? json(weight_formula_name(c.pod_weight_formula)) : json(nullptr)},
                      {"am", c.accept_merge}};
    }
    j["classes"] = std::move(classes);
    j["guarded_labels"] = globmap_json(p.guarded_labels);
    j["guarded_annotations"] = globmap_json(p.guarded_annotations);
    json groups = json::object();
    for (const auto& [n, g] : p.resctrl_groups)
        groups[n] = {g.l3, g.mb, g.l3_percent, g.l3_start_percent, g.mb_percent, g.l3_round_down, g.manage, g.line};
    j["resctrl"] = std::move(groups);
    json leave = json::array();
    for (const auto& lf : p.leave_to_others) leave.push_back({lf.field, lf.plugin});
    j["leave_to_others"] = std::move(leave);
    return j;
}

Policy policy_from_json(const json& j) {
    try {
        Policy p;
        p.version = j.at("version").get<int>();
        if (p.version != kPolicyVersion) throw InputError("compiled policy: wrong version");
        p.default_class = j.at("default_class").get<std::string>();
        p.fail_closed = j.at("fail_closed").get<bool>();
        {
            const std::string f = j.at("cpu_weight_formula").get<std::string>();
            if (f == "linear") p.cpu_weight_formula = WeightFormula::Linear;
            else if (f == "log-quadratic") p.cpu_weight_formula = WeightFormula::LogQuadratic;
            else if (f == "auto") p.cpu_weight_formula = WeightFormula::Auto;
            else throw InputError("compiled policy: bad cpu_weight_formula");
        }
        if (j.contains("koordinator_quota_lift")) {
            const std::string f = j.at("koordinator_quota_lift").get<std::string>();
            if (f == "fits") p.koordinator_quota_lift = Policy::QuotaLift::Fits;
            else if (f != "cpuset") throw InputError("compiled policy: bad koordinator_quota_lift");
        }
        p.source = j.at("source").get<std::string>();
        if (j.contains("katalyst_reserved")) {
            p.katalyst_reserved_cpus = j.at("katalyst_reserved").at(0).get<std::string>();
            p.katalyst_reserved_count = j.at("katalyst_reserved").at(1).get<unsigned>();
        }
        if (j.contains("sinks")) {
            const json& s = j.at("sinks");
            p.sinks.metrics_file_set = s.at(0).get<bool>();
            p.sinks.metrics_file = s.at(1).get<std::string>();
            p.sinks.event_log_set = s.at(2).get<bool>();
            p.sinks.event_log = s.at(3).get<std::string>();
            p.sinks.event_log_max_bytes = s.at(4).get<uint64_t>();
        }
        for (const auto& r : j.at("rules")) {
            Rule x;
            x.name = r.at("n").get<std::string>();
            x.cls = r.at("c").get<std::string>();
            x.line = r.at("l").get<int>();
            if (r.contains("merge")) x.merge = r.at("merge").get<bool>();
            const json& m = r.at("m");
            x.match.labels = globmap_from(m.at(0));
            x.match.annotations = globmap_from(m.at(1));
            x.match.labels_or_annotations = globmap_from(m.at(2));
            x.match.namespaces = m.at(3).get<std::vector<std::string>>();
            x.match.pod_names = m.at(4).get<std::vector<std::string>>();
            x.match.container_names = m.at(5).get<std::vector<std::string>>();
            x.match.kind = m.at(6).get<int>();
            for (const auto& q : m.at(7)) x.match.kube_qos.push_back(static_cast<KubeQos>(q.get<int>()));
            p.rules.push_back(std::move(x));
        }
        for (const auto& [n, c] : j.at("classes").items()) {
            ClassDef cd;
            cd.name = n;
            cd.description = c.at("d").get<std::string>();
            cd.fail_closed = c.at("f").get<bool>();
            cd.container = knobs_from(c.at("c"));
            cd.pod = knobs_from(c.at("p"));
            const json& g = c.at("g");
            cd.gate.enabled = g.at(0).get<bool>();
            cd.gate.namespaces = g.at(1).get<std::vector<std::string>>();
            cd.gate.labels = globmap_from(g.at(2));
            cd.gate.fallback = g.at(3).get<std::string>();
            if (c.contains("am")) cd.accept_merge = c.at("am").get<bool>();
            if (c.contains("pwf") && !c.at("pwf").is_null()) {
                const std::string f = c.at("pwf").get<std::string>();
                cd.pod_weight_formula_set = true;
                if (f == "linear") cd.pod_weight_formula = WeightFormula::Linear;
                else if (f == "log-quadratic") cd.pod_weight_formula = WeightFormula::LogQuadratic;
                else if (f == "auto") cd.pod_weight_formula = WeightFormula::Auto;
                else throw InputError("compiled policy: bad pod_cpu_weight_formula");
            }
            p.classes.emplace(n, std::move(cd));
        }
        p.guarded_labels = globmap_from(j.at("guarded_labels"));
        p.guarded_annotations = globmap_from(j.at("guarded_annotations"));
        if (j.contains("resctrl"))
            for (const auto& [n, g] : j.at("resctrl").items()) {
                ResctrlGroupDef d;
                d.name = n;
                d.l3 = g.at(0).get<std::string>();
                d.mb = g.at(1).get<std::string>();
                d.l3_percent = g.at(2).get<int>();
                d.l3_start_percent = g.at(3).get<int>();
                d.mb_percent = g.at(4).get<int>();
                d.l3_round_down = g.at(5).get<bool>();
                d.manage = g.at(6).get<bool>();
                d.line = g.at(7).get<int>();
                p.resctrl_groups.emplace(n, std::move(d));
            }
        if (j.contains("leave_to_others"))
            for (const auto& e : j.at("leave_to_others")) {
                LeftField lf;
                lf.field = e.at(0).get<std::string>();
                lf.plugin = e.at(1).get<std::string>();
                std::string err;
                if (!field_knobs(lf.field, lf.covers, err)) throw InputError("compiled policy: leave_to_others: " + err);
                p.leave_to_others.push_back(std::move(lf));
            }
        if (!p.classes.count(p.default_class)) throw InputError("compiled policy: unknown default class");
        for (const auto& r : p.rules)
            if (!p.classes.count(r.cls)) throw InputError("compiled policy: unknown class in rule");
        return p;
    } catch (const json::exception& e) {
        throw InputError(std::string("compiled policy: ") + e.what());
    }
}

}  // namespace nriqos
