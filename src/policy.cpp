#include "policy.hpp"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <set>
#include <sstream>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <toml.hpp>

using nlohmann::json;

namespace nriqos {

namespace {

using TV = toml::value;

struct Ctx {
    std::string file;
    [[noreturn]] void fail(const TV& v, const std::string& msg) const {
        unsigned line = v.location().line();
        throw InputError(file + ":" + std::to_string(line) + ": " + msg);
    }
    [[noreturn]] void fail_top(const std::string& msg) const { throw InputError(file + ": " + msg); }
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

const toml::table& as_table(const Ctx& c, const TV& v, const std::string& what) {
    if (!v.is_table()) c.fail(v, what + ": expected a table, got " + toml_type(v));
    return v.as_table();
}

void check_keys(const Ctx& c, const TV& v, const std::string& what, std::initializer_list<const char*> allowed) {
    for (const auto& [k, val] : as_table(c, v, what)) {
        bool ok = false;
        for (const char* a : allowed) ok = ok || k == a;
        if (!ok) {
            std::string list;
            for (const char* a : allowed) list += std::string(list.empty() ? "" : ", ") + a;
            c.fail(val, what + ": unknown key \"" + k + "\" (allowed: " + list + ")");
        }
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
    c.fail(v, what + ": expected \"open\" or \"closed\", got \"" + s + "\"");
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

std::vector<KnobSetting> parse_knobs(const Ctx& c, const TV& v, const std::string& what) {
    std::vector<KnobSetting> out;
    const auto& t = as_table(c, v, what);
    for (const auto& def : knob_table()) {
        auto it = t.find(def.key);
        if (it == t.end()) continue;
        const TV& val = it->second;
        KnobSetting ks{def.id, {}, {}, {}};
        if (!val.is_integer() && !val.is_string())
            c.fail(val, what + "." + def.key + ": expected an integer or a string, got " + toml_type(val));
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
        out.push_back(std::move(ks));
    }
    for (const auto& [k, val] : t) {
        if (k == "raw") continue;
        if (!find_knob(k)) c.fail(val, what + ": unknown knob \"" + k + "\" (see nri-qos.toml(5))");
    }
    if (const TV* raw = get(v, "raw")) {
        if (!raw->is_array()) c.fail(*raw, what + ".raw: expected an array of tables");
        if (raw->as_array().size() > 64) c.fail(*raw, what + ".raw: more than 64 entries");
        for (const auto& e : raw->as_array()) {
            check_keys(c, e, what + ".raw", {"file", "controller", "value"});
            KnobSetting ks{KnobId::Raw, {}, {}, {}};
            const TV* f = get(e, "file");
            const TV* val = get(e, "value");
            if (!f || !val) c.fail(e, what + ".raw: needs file and value");
            ks.raw_file = str(c, *f, what + ".raw.file", 64);
            if (!raw_file_allowed(ks.raw_file))
                c.fail(*f, what + ".raw.file: \"" + ks.raw_file + "\" is not an allowed kernel file name (controller.name; cgroup.*, tasks and *.procs are refused)");
            if (const TV* ctl = get(e, "controller")) {
                ks.raw_ctrl = str(c, *ctl, what + ".raw.controller", 32);
                if (!v1_controllers().count(ks.raw_ctrl)) c.fail(*ctl, what + ".raw.controller: unknown cgroup v1 controller \"" + ks.raw_ctrl + "\"");
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
        }
    }
    return out;
}

std::vector<KubeQos> kube_qos_list(const Ctx& c, const TV& v) {
    std::vector<KubeQos> out;
    for (const auto& s : str_or_list(c, v, "match.kube_qos")) {
        if (s == "besteffort" || s == "BestEffort") out.push_back(KubeQos::BestEffort);
        else if (s == "burstable" || s == "Burstable") out.push_back(KubeQos::Burstable);
        else if (s == "guaranteed" || s == "Guaranteed") out.push_back(KubeQos::Guaranteed);
        else c.fail(v, "match.kube_qos: expected besteffort, burstable or guaranteed, got \"" + s + "\"");
    }
    return out;
}

Match parse_match(const Ctx& c, const TV& v) {
    Match m;
    check_keys(c, v, "match", {"labels", "annotations", "labels_or_annotations", "namespace", "pod_name", "container_name", "kind", "kube_qos"});
    if (const TV* x = get(v, "labels")) m.labels = glob_map(c, *x, "match.labels");
    if (const TV* x = get(v, "annotations")) m.annotations = glob_map(c, *x, "match.annotations");
    if (const TV* x = get(v, "labels_or_annotations")) m.labels_or_annotations = glob_map(c, *x, "match.labels_or_annotations");
    if (const TV* x = get(v, "namespace")) m.namespaces = str_or_list(c, *x, "match.namespace");
    if (const TV* x = get(v, "pod_name")) m.pod_names = str_or_list(c, *x, "match.pod_name");
    if (const TV* x = get(v, "container_name")) m.container_names = str_or_list(c, *x, "match.container_name");
    if (const TV* x = get(v, "kind")) {
        std::string k = str(c, *x, "match.kind");
        if (k == "sandbox") m.kind = 1;
        else if (k == "container") m.kind = 2;
        else c.fail(*x, "match.kind: expected \"sandbox\" or \"container\", got \"" + k + "\"");
    }
    if (const TV* x = get(v, "kube_qos")) m.kube_qos = kube_qos_list(c, *x);
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
    auto at = [&](const std::string& m) { throw InputError(c.file + ":" + std::to_string(line) + ": " + m); };
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

std::string one_line_toml_error(const std::string& what, const std::string& file) {
    // toml11 messages are multi-line: "[error] headline\n --> file\n   |\n 3 | text\n ...".
    std::string head = what.substr(0, what.find('\n'));
    if (head.rfind("[error] ", 0) == 0) head = head.substr(8);
    std::string line;
    std::istringstream in(what);
    for (std::string l; std::getline(in, l);) {
        size_t bar = l.find(" | ");
        if (bar == std::string::npos) continue;
        std::string num = l.substr(0, bar);
        num.erase(0, num.find_first_not_of(' '));
        if (!num.empty() && num.find_first_not_of("0123456789") == std::string::npos) {
            line = num;
            break;
        }
    }
    return file + (line.empty() ? "" : ":" + line) + ": TOML syntax error: " + head;
}

}  // namespace

Policy parse_policy_toml(const std::string& text, const std::string& name) {
    Ctx c{name};
    if (text.size() > kMaxPolicyBytes) c.fail_top("policy larger than " + std::to_string(kMaxPolicyBytes) + " bytes");
    prescan(c, text);
    TV root;
    try {
        std::istringstream in(text);
        root = toml::parse(in, name);
    } catch (const toml::exception& e) {
        throw InputError(one_line_toml_error(e.what(), name));
    } catch (const std::exception& e) {
        throw InputError(name + ": cannot parse: " + std::string(e.what()).substr(0, 200));
    }
    Policy p;
    p.source = name;
    check_keys(c, root, "policy", {"version", "settings", "rules", "classes"});
    const TV* ver = get(root, "version");
    if (!ver) c.fail_top("missing \"version = " + std::to_string(kPolicyVersion) + "\"");
    if (!ver->is_integer() || ver->as_integer() != kPolicyVersion)
        c.fail(*ver, "version: this nri-qos reads policy version " + std::to_string(kPolicyVersion));

    if (const TV* s = get(root, "settings")) {
        check_keys(c, *s, "settings", {"default_class", "fail", "cpu_weight_formula", "metrics_file", "event_log", "event_log_max_bytes"});
        if (const TV* x = get(*s, "default_class")) p.default_class = str(c, *x, "settings.default_class", 63);
        if (const TV* x = get(*s, "fail")) p.fail_closed = fail_mode(c, *x, "settings.fail");
        if (const TV* x = get(*s, "cpu_weight_formula")) {
            std::string f = str(c, *x, "settings.cpu_weight_formula");
            if (f == "linear") p.linear_weight = true;
            else if (f != "log-quadratic") c.fail(*x, "settings.cpu_weight_formula: expected \"log-quadratic\" or \"linear\"");
        }
        // The hook's own sinks (src/record.hpp, src/metrics.hpp): absolute paths or "" (off).
        auto sink_path = [&](const TV& x, const char* key) {
            if (!x.is_string()) c.fail(x, std::string("settings.") + key + ": expected a path string (\"\" disables)");
            std::string v = x.as_string().str;
            if (!v.empty() && (v[0] != '/' || v.size() > 4000 || v.back() == '/' || v.find('\0') != std::string::npos))
                c.fail(x, std::string("settings.") + key + ": expected an absolute file path or \"\"");
            return v;
        };
        if (const TV* x = get(*s, "metrics_file")) {
            p.sinks.metrics_file = sink_path(*x, "metrics_file");
            p.sinks.metrics_file_set = true;
        }
        if (const TV* x = get(*s, "event_log")) {
            p.sinks.event_log = sink_path(*x, "event_log");
            p.sinks.event_log_set = true;
        }
        if (const TV* x = get(*s, "event_log_max_bytes")) {
            if (!x->is_integer() || x->as_integer() < 65536 || x->as_integer() > (int64_t(1) << 40))
                c.fail(*x, "settings.event_log_max_bytes: expected an integer from 65536 to 2^40");
            p.sinks.event_log_max_bytes = static_cast<uint64_t>(x->as_integer());
        }
    }

    const TV* classes = get(root, "classes");
    if (!classes) c.fail_top("no [classes] defined");
    for (const auto& [cname, cv] : as_table(c, *classes, "classes")) {
        if (!valid_name(cname)) c.fail(cv, "classes." + cname + ": class names are 1-63 characters [A-Za-z0-9_.-]");
        std::string w = "classes." + cname;
        check_keys(c, cv, w, {"description", "fail", "container", "pod", "gate"});
        ClassDef cd;
        cd.name = cname;
        if (const TV* x = get(cv, "description")) cd.description = str(c, *x, w + ".description", 1024);
        if (const TV* x = get(cv, "fail")) cd.fail_closed = fail_mode(c, *x, w + ".fail");
        if (const TV* x = get(cv, "container")) cd.container = parse_knobs(c, *x, w + ".container");
        if (const TV* x = get(cv, "pod")) {
            cd.pod = parse_knobs(c, *x, w + ".pod");
            for (const auto& k : cd.pod)
                if (k.id == KnobId::OomScoreAdj || k.id == KnobId::ResctrlGroup)
                    c.fail(*x, w + ".pod: " + knob_def(k.id).key + " applies to processes, set it under .container");
        }
        if (const TV* g = get(cv, "gate")) {
            check_keys(c, *g, w + ".gate", {"namespaces", "labels", "fallback"});
            cd.gate.enabled = true;
            if (const TV* x = get(*g, "namespaces")) cd.gate.namespaces = str_or_list(c, *x, w + ".gate.namespaces");
            if (const TV* x = get(*g, "labels")) cd.gate.labels = glob_map(c, *x, w + ".gate.labels");
            const TV* fb = get(*g, "fallback");
            if (!fb) c.fail(*g, w + ".gate: needs fallback = \"<class>\"");
            cd.gate.fallback = str(c, *fb, w + ".gate.fallback", 63);
        }
        p.classes.emplace(cname, std::move(cd));
    }
    if (p.classes.size() > 1024) c.fail_top("more than 1024 classes");
    for (const auto& [n, cd] : p.classes) {
        if (cd.gate.enabled) {
            auto fb = p.classes.find(cd.gate.fallback);
            if (fb == p.classes.end()) c.fail_top("classes." + n + ".gate.fallback: unknown class \"" + cd.gate.fallback + "\"");
            if (fb->second.gate.enabled) c.fail_top("classes." + n + ".gate.fallback: \"" + cd.gate.fallback + "\" is gated itself");
        }
    }
    if (p.default_class.empty()) c.fail_top("settings.default_class is required");
    if (!p.classes.count(p.default_class)) c.fail_top("settings.default_class: unknown class \"" + p.default_class + "\"");
    if (p.classes.at(p.default_class).gate.enabled) c.fail_top("settings.default_class: \"" + p.default_class + "\" must not be gated");

    if (const TV* rules = get(root, "rules")) {
        if (!rules->is_array()) c.fail(*rules, "rules: expected an array of tables ([[rules]])");
        if (rules->as_array().size() > 100000) c.fail(*rules, "rules: more than 100000 rules");
        std::set<std::string> names;
        for (const auto& rv : rules->as_array()) {
            check_keys(c, rv, "rules", {"name", "class", "match"});
            Rule r;
            r.line = static_cast<int>(rv.location().line());
            const TV* cl = get(rv, "class");
            if (!cl) c.fail(rv, "rules: every rule needs class = \"<class>\"");
            r.cls = str(c, *cl, "rules.class", 63);
            if (!p.classes.count(r.cls)) c.fail(*cl, "rules.class: unknown class \"" + r.cls + "\"");
            if (const TV* n = get(rv, "name")) r.name = str(c, *n, "rules.name", 128);
            if (r.name.empty()) r.name = "rule@" + std::to_string(r.line);
            if (!names.insert(r.name).second) c.fail(rv, "rules.name: duplicate rule name \"" + r.name + "\"");
            if (const TV* m = get(rv, "match")) r.match = parse_match(c, *m);
            p.rules.push_back(std::move(r));
        }
    }
    return p;
}

Policy load_policy_toml(const std::string& path) {
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
    return parse_policy_toml(text, path);
}

// ---- JSON form (compiled cache) ---------------------------------------------------------

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
        if (id < 0 || id > static_cast<int>(KnobId::Raw) || kind < 0 || kind > KnobValue::Text) throw InputError("compiled policy: bad knob");
        k.id = static_cast<KnobId>(id);
        k.value.kind = static_cast<KnobValue::Kind>(kind);
        k.value.num = e.at(2).get<int64_t>();
        k.value.text = e.at(3).get<std::string>();
        k.raw_file = e.at(4).get<std::string>();
        k.raw_ctrl = e.at(5).get<std::string>();
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
    j["linear_weight"] = p.linear_weight;
    j["source"] = p.source;
    j["sinks"] = {p.sinks.metrics_file_set, p.sinks.metrics_file, p.sinks.event_log_set, p.sinks.event_log, p.sinks.event_log_max_bytes};
    json rules = json::array();
    for (const auto& r : p.rules) {
        json kq = json::array();
        for (auto q : r.match.kube_qos) kq.push_back(static_cast<int>(q));
        rules.push_back({{"n", r.name}, {"c", r.cls}, {"l", r.line},
                         {"m", {globmap_json(r.match.labels), globmap_json(r.match.annotations), globmap_json(r.match.labels_or_annotations),
                                r.match.namespaces, r.match.pod_names, r.match.container_names, r.match.kind, kq}}});
    }
    j["rules"] = std::move(rules);
    json classes = json::object();
    for (const auto& [n, c] : p.classes)
        classes[n] = {{"d", c.description}, {"f", c.fail_closed}, {"c", knobs_json(c.container)}, {"p", knobs_json(c.pod)},
                      {"g", {c.gate.enabled, c.gate.namespaces, globmap_json(c.gate.labels), c.gate.fallback}}};
    j["classes"] = std::move(classes);
    return j;
}

Policy policy_from_json(const json& j) {
    try {
        Policy p;
        p.version = j.at("version").get<int>();
        if (p.version != kPolicyVersion) throw InputError("compiled policy: wrong version");
        p.default_class = j.at("default_class").get<std::string>();
        p.fail_closed = j.at("fail_closed").get<bool>();
        p.linear_weight = j.at("linear_weight").get<bool>();
        p.source = j.at("source").get<std::string>();
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
            p.classes.emplace(n, std::move(cd));
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
