// The policy document → Policy: read_policy_file, the structure of the TOML document (version,
// [settings], [guarded], [resctrl.<name>], [classes.<name>] with their gates, [[rules]] and their
// match) with its cross-references, and the entry points check_policy_text, parse_policy_toml and
// load_policy_toml; the resctrl group validators and the Policy lookups (left_to_other,
// guarded_note). Split by concern (issue #23): policy_toml.cpp typed access and "did you mean",
// policy_text.cpp the text around toml11, policy_knobs.cpp the knob tables, policy_check.cpp the
// warnings and notes of `check`, policy_json.cpp the JSON form; shared helpers: policy_parse.hpp.
#include "policy/policy.hpp"
#include "policy/policy_parse.hpp"
#include "policy/policy_settings.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <set>
#include <sstream>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include "os/cpuset.hpp"
#include "model/fact_table.hpp"

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
    c.guard([&] {
        if (const TV* x = get(v, "labels")) m.labels = glob_map(c, *x, "match.labels");
    });
    c.guard([&] {
        if (const TV* x = get(v, "annotations")) m.annotations = glob_map(c, *x, "match.annotations");
    });
    c.guard([&] {
        if (const TV* x = get(v, "labels_or_annotations")) m.labels_or_annotations = glob_map(c, *x, "match.labels_or_annotations");
    });
    c.guard([&] {
        if (const TV* x = get(v, "namespace")) m.namespaces = str_or_list(c, *x, "match.namespace");
    });
    c.guard([&] {
        if (const TV* x = get(v, "pod_name")) m.pod_names = str_or_list(c, *x, "match.pod_name");
    });
    c.guard([&] {
        if (const TV* x = get(v, "container_name")) m.container_names = str_or_list(c, *x, "match.container_name");
    });
    c.guard([&] {
        if (const TV* x = get(v, "kind")) {
            std::string k = str(c, *x, "match.kind");
            if (k == "sandbox") m.kind = 1;
            else if (k == "container") m.kind = 2;
            else c.fail(*x, "match.kind: expected \"sandbox\" or \"container\", got \"" + k + "\"");
        }
    });
    c.guard([&] {
        if (const TV* x = get(v, "kube_qos")) m.kube_qos = kube_qos_list(c, *x);
    });
    return m;
}

bool valid_name(const std::string& s) {
    if (s.empty() || s.size() > 63) return false;
    for (unsigned char ch : s)
        if (!(isalnum(ch) || ch == '_' || ch == '-' || ch == '.')) return false;
    return true;
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
    // The NRI fields that cover a knob, one spelling each (unified.<file> names are a knob's v2 file)
    size_t nf = 0;
    const NriField* rows = nri_field_table(nf);
    for (size_t i = 0; i < nf; ++i)
        if (rows[i].covers && !rows[i].alias_of && std::strncmp(rows[i].name, "unified.", 8) != 0) known.push_back(rows[i].name);
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

/// An absolute file path or "" (the hook's own sinks: src/records/record.hpp, src/records/metrics.hpp).
std::string sink_path(const Ctx& c, const TV& x, const std::string& what) {
    if (!x.is_string()) c.fail(x, what + ": expected a path string (\"\" disables)");
    std::string v = x.as_string().str;
    if (!v.empty() && (v[0] != '/' || v.size() > 4000 || v.back() == '/' || v.find('\0') != std::string::npos))
        c.fail(x, what + ": expected an absolute file path or \"\"");
    return v;
}

/// Katalyst's reserved CPUs (katalyst-core GetCoresReservedForSystem): the list it logs / its
/// ReservedCPUList, or the count (--cpu-resource-plugin-reserved).
void read_cpus_or_count(const Ctx& c, const SettingDef& d, const TV& x, Policy& p, const std::string& what) {
    if (x.is_integer()) {
        if (x.as_integer() < d.lo || x.as_integer() > d.hi)
            c.fail(x, what + ": a count from " + std::to_string(d.lo) + " to " + std::to_string(d.hi));
        d.aux.of<uint32_t>(p) = static_cast<uint32_t>(x.as_integer());
    } else if (x.is_string()) {
        std::string why;
        auto set = x.as_string().str.empty() ? std::optional<CpuSet>(CpuSet()) : CpuSet::parse(x.as_string().str, &why);
        if (!set) c.fail(x, what + ": " + why);
        d.ref.of<std::string>(p) = set->str();
    } else {
        c.fail(x, what + ": " + setting_expect(d));
    }
}

/// Setting `d` from its TOML value `x` into `p`; fails with "settings.<key>: ..." (the row's
/// `expect` for a value it does not allow).
void read_setting(const Ctx& c, const SettingDef& d, const TV& x, Policy& p) {
    const std::string what = std::string("settings.") + d.key;
    switch (d.type) {
        case SettingType::Text: d.ref.of<std::string>(p) = str(c, x, what, static_cast<size_t>(d.hi)); return;
        case SettingType::FailMode: d.ref.of<bool>(p) = fail_mode(c, x, what); return;
        case SettingType::Bool:
            if (!x.is_boolean()) c.fail(x, what + ": " + setting_expect(d));
            d.ref.of<bool>(p) = x.as_boolean();
            return;
        case SettingType::Choice: {
            const std::string v = str(c, x, what);
            for (size_t i = 0; i < choice_count(d); ++i)
                if (v == d.choices[i]) return void(d.ref.of<uint8_t>(p) = static_cast<uint8_t>(i));
            c.fail(x, what + ": " + setting_expect(d));
        }
        case SettingType::Count:
            if (!x.is_integer() || x.as_integer() < d.lo || x.as_integer() > d.hi) c.fail(x, what + ": " + setting_expect(d));
            if (d.ref.kind == SettingRef::U64) d.ref.of<uint64_t>(p) = static_cast<uint64_t>(x.as_integer());
            else d.ref.of<uint32_t>(p) = static_cast<uint32_t>(x.as_integer());
            return;
        case SettingType::Path:
            d.ref.of<std::string>(p) = sink_path(c, x, what);
            d.aux.of<bool>(p) = true;
            return;
        case SettingType::CpusOrCount: read_cpus_or_count(c, d, x, p, what); return;
        case SettingType::FieldOwners: d.ref.of<std::vector<LeftField>>(p) = leave_to_others(c, x); return;
    }
}

/// [settings] of `root` into `p`, each key on its own (settings_table()); `lines[i]` gets the
/// line of row i (0: not given). FieldOwners rows are read after the others, each on its own.
void read_settings(const Ctx& c, const TV& root, Policy& p, std::vector<int>& lines) {
    const SettingsTable table = settings_table();
    lines.assign(table.size(), 0);
    const TV* s = get(root, "settings");
    if (!s) return;
    auto read_row = [&](size_t i) {
        if (const TV* x = get(*s, table.begin()[i].key)) {
            lines[i] = Ctx::line_of(*x);
            c.guard([&] { read_setting(c, table.begin()[i], *x, p); });
        }
    };
    c.guard([&] {
        std::vector<std::string> keys;
        for (const SettingDef& d : table) keys.push_back(d.key);
        check_keys(c, *s, "settings", keys);
        for (bool last : {false, true})
            for (size_t i = 0; i < table.size(); ++i)
                if (table.begin()[i].type != SettingType::FieldOwners && table.begin()[i].toml_last == last) read_row(i);
    });
    if (!s->is_table()) return;  // recorded above (check_keys)
    for (size_t i = 0; i < table.size(); ++i)
        if (table.begin()[i].type == SettingType::FieldOwners) read_row(i);
}

/// The line of setting `key` that read_settings found (0: not given).
int setting_line(const std::vector<int>& lines, const char* key) {
    const SettingsTable table = settings_table();
    for (size_t i = 0; i < table.size(); ++i)
        if (std::string(table.begin()[i].key) == key) return lines[i];
    return 0;
}

/// The TOML document of `text`, after the prescan; fails at a syntax error's line.
TV parse_document(const Ctx& c, const std::string& text) {
    if (text.size() > kMaxPolicyBytes) c.fail_top("policy larger than " + std::to_string(kMaxPolicyBytes) + " bytes");
    prescan(c, text);
    TV root;
    try {
        std::istringstream in(text);
        root = toml::parse(in, c.file);
    } catch (const toml::exception& e) {
        auto [line, msg] = toml_error(e.what());
        c.fail_line(line, msg);
    } catch (const std::exception& e) { c.fail_top("cannot parse: " + std::string(e.what()).substr(0, 200)); }
    return root;
}

void parse_version(const Ctx& c, const TV& root) {
    const TV* ver = get(root, "version");
    if (!ver) c.fail_top("missing \"version = " + std::to_string(kPolicyVersion) + "\"");
    if (!ver->is_integer() || ver->as_integer() != kPolicyVersion)
        c.fail(*ver, "version: this nri-qos reads policy version " + std::to_string(kPolicyVersion));
}

/// [guarded]: the label and annotation keys an admission policy controls.
void parse_guarded(const Ctx& c, const TV& g, Policy& p) {
    check_keys(c, g, "guarded", {"labels", "annotations"});
    c.guard([&] {
        if (const TV* x = get(g, "labels")) p.guarded_labels = key_notes(c, *x, "guarded.labels");
    });
    c.guard([&] {
        if (const TV* x = get(g, "annotations")) p.guarded_annotations = key_notes(c, *x, "guarded.annotations");
    });
}

/// One [resctrl.<name>] table; fails on the first error that leaves no usable group.
ResctrlGroupDef parse_resctrl_group(const Ctx& c, const std::string& gname, const TV& gv) {
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
    if (g.l3_percent >= 0 && g.l3_start_percent >= g.l3_percent) c.error(gv, w + ": l3_start_percent must be below l3_percent");
    if (g.l3_round_down && g.l3_start_percent > 0) c.error(gv, w + ": l3_round = \"down\" counts ways from way 0 (no l3_start_percent)");
    if (g.l3.empty() && g.mb.empty() && g.l3_percent < 0 && g.mb_percent < 0)
        c.error(gv, w + ": declares no schemata (l3, l3_percent, mb or mb_percent)");
    return g;
}

/// [resctrl]: every group on its own.
void parse_resctrl(const Ctx& c, const TV& rg, Policy& p) {
    const auto& t = as_table(c, rg, "resctrl");
    if (t.size() > 64) c.fail(rg, "resctrl: more than 64 groups");
    for (const auto& [gname, gv] : t) c.guard([&, &gname = gname, &gv = gv] { p.resctrl_groups.emplace(gname, parse_resctrl_group(c, gname, gv)); });
}

/// `<w>.<key>` (pod_cpu_weight_formula, container_cpu_weight_formula) of a class into `set`, `f`.
void class_formula(const Ctx& c, const TV& cv, const std::string& w, const char* key, bool& set, WeightFormula& f) {
    c.guard([&] {
        if (const TV* x = get(cv, key)) {
            std::string v = str(c, *x, w + "." + key);
            if (v == "linear") f = WeightFormula::Linear;
            else if (v == "log-quadratic") f = WeightFormula::LogQuadratic;
            else if (v == "auto") f = WeightFormula::Auto;
            else c.fail(*x, w + "." + key + ": expected \"auto\", \"log-quadratic\" or \"linear\"");
            set = true;
        }
    });
}

/// `<w>.container`: its knobs, and set_mempolicy(2)'s rule that the mode decides whether a node
/// list is needed, allowed or refused.
std::vector<KnobSetting> container_knobs(const Ctx& c, const TV& x, const std::string& w) {
    std::vector<KnobSetting> ks = parse_knobs(c, x, w + ".container", kFactContainer);
    const KnobSetting *mode = nullptr, *nodes = nullptr;
    for (const auto& k : ks) {
        if (k.id == KnobId::MemoryPolicy) mode = &k;
        if (k.id == KnobId::MemoryPolicyNodes) nodes = &k;
    }
    if (nodes && !mode) c.error(x, w + ".container: memory_policy_nodes needs memory_policy (the mode)");
    if (mode && mode->value.kind == KnobValue::Int) {
        const std::string m = knob_choices(KnobId::MemoryPolicy)[static_cast<size_t>(mode->value.num)].name;
        if (!nodes && mempolicy_needs_nodes(mode->value.num))
            c.error(x, w + ".container: memory_policy = \"" + m + "\" needs memory_policy_nodes (set_mempolicy(2))");
        if (nodes && mempolicy_forbids_nodes(mode->value.num))
            c.error(x, w + ".container: memory_policy = \"" + m + "\" takes no memory_policy_nodes (set_mempolicy(2))");
    }
    return ks;
}

/// `what` (<class>.pod or <class>.sandbox): the knobs of a cgroup that is no process of the
/// container's, so no process knobs (oom_score_adj, resctrl_group, sched_*, io_*, memory_policy*).
std::vector<KnobSetting> cgroup_knobs(const Ctx& c, const TV& x, const std::string& what, uint8_t scope) {
    std::vector<KnobSetting> ks = parse_knobs(c, x, what, scope);
    for (const auto& k : ks)
        if (k.id == KnobId::OomScoreAdj || k.id == KnobId::ResctrlGroup || is_process_knob(k.id))
            c.error(x, what + ": " + knob_def(k.id).key + " applies to processes, set it under .container");
    return ks;
}

/// `<w>.gate` of class `cname`; `fallback_line` gets the line of its fallback.
void parse_gate(const Ctx& c, const TV& g, const std::string& w, const std::string& cname, const Policy& p, Gate& gate,
                std::map<std::string, int>& fallback_line) {
    check_keys(c, g, w + ".gate", {"namespaces", "labels", "fallback"});
    gate.enabled = true;
    c.guard([&] {
        if (const TV* x = get(g, "namespaces")) gate.namespaces = str_or_list(c, *x, w + ".gate.namespaces");
    });
    c.guard([&] {
        const TV* x = get(g, "labels");
        if (!x) return;
        gate.labels = glob_map(c, *x, w + ".gate.labels");
        for (const auto& [k, glob] : gate.labels)
            if (!guarded_note(p.guarded_labels, k))
                c.warn(x->as_table().at(k),
                       w + ".gate.labels: \"" + k +
                           "\" is a pod label the pod author can set, and it is not declared in [guarded.labels]: "
                           "it never qualifies a pod (declare it there, naming the admission policy that controls it, or remove it)");
    });
    const TV* fb = get(g, "fallback");
    if (!fb) c.fail(g, w + ".gate: needs fallback = \"<class>\"");
    fallback_line[cname] = Ctx::line_of(*fb);
    gate.fallback = str(c, *fb, w + ".gate.fallback", 63);
}

/// One [classes.<name>] table, each key on its own. A broken class is still returned (no
/// follow-on "unknown class" errors).
ClassDef parse_class(const Ctx& c, const std::string& cname, const TV& cv, const Policy& p, std::map<std::string, int>& fallback_line) {
    const std::string w = "classes." + cname;
    ClassDef cd;
    cd.name = cname;
    c.guard([&] {
        if (!valid_name(cname)) c.fail(cv, w + ": class names are 1-63 characters [A-Za-z0-9_.-]");
        check_keys(
            c, cv, w,
            {"description", "fail", "container", "pod", "sandbox", "gate", "pod_cpu_weight_formula", "container_cpu_weight_formula", "accept_merge"});
        c.guard([&] {
            if (const TV* x = get(cv, "description")) cd.description = str(c, *x, w + ".description", 1024);
        });
        c.guard([&] {
            if (const TV* x = get(cv, "fail")) cd.fail_closed = fail_mode(c, *x, w + ".fail");
        });
        class_formula(c, cv, w, "pod_cpu_weight_formula", cd.pod_weight_formula_set, cd.pod_weight_formula);
        class_formula(c, cv, w, "container_cpu_weight_formula", cd.ctr_weight_formula_set, cd.ctr_weight_formula);
        c.guard([&] {
            if (const TV* x = get(cv, "accept_merge")) {
                if (!x->is_boolean()) c.fail(*x, w + ".accept_merge: expected true or false");
                cd.accept_merge = x->as_boolean();
            }
        });
        c.guard([&] {
            if (const TV* x = get(cv, "container")) cd.container = container_knobs(c, *x, w);
        });
        c.guard([&] {
            if (const TV* x = get(cv, "pod")) cd.pod = cgroup_knobs(c, *x, w + ".pod", kFactPod);
        });
        c.guard([&] {
            // The sandbox (pause) container's own cgroup: container-scoped facts (it is a
            // container of the pod), no process knobs (its process is the runtime's).
            if (const TV* x = get(cv, "sandbox")) cd.sandbox = cgroup_knobs(c, *x, w + ".sandbox", kFactContainer);
        });
        c.guard([&] {
            if (const TV* g = get(cv, "gate")) parse_gate(c, *g, w, cname, p, cd.gate, fallback_line);
        });
    });
    return cd;
}

/// [classes]: every class on its own; `class_line` and `fallback_line` get their lines.
void parse_classes(const Ctx& c, const TV& classes, Policy& p, std::map<std::string, int>& class_line, std::map<std::string, int>& fallback_line) {
    const auto& ct = as_table(c, classes, "classes");
    if (ct.size() > 1024) c.fail(classes, "more than 1024 classes");
    for (const auto& entry : ct) {
        const std::string& cname = entry.first;
        class_line[cname] = Ctx::line_of(entry.second);
        p.classes.emplace(cname, parse_class(c, cname, entry.second, p, fallback_line));  // kept even when broken
    }
}

/// "<what>: unknown class \"<name>\"", with the closest class of `p` as a hint.
std::string unknown_class(const Policy& p, const std::string& what, const std::string& name) {
    std::vector<std::string> class_names;
    for (const auto& [n, cd] : p.classes) class_names.push_back(n);
    std::string hint = did_you_mean(name, class_names);
    return what + ": unknown class \"" + name + "\"" + (hint.empty() ? "" : " (" + hint + ")");
}

/// The classes that gate.fallback and settings.default_class name exist and are not gated.
void check_class_refs(const Ctx& c, const Policy& p, std::map<std::string, int>& fallback_line, int default_line, bool have_classes) {
    for (const auto& [n, cd] : p.classes) {
        if (!cd.gate.enabled || cd.gate.fallback.empty()) continue;
        auto fb = p.classes.find(cd.gate.fallback);
        int line = fallback_line.count(n) ? fallback_line[n] : 0;
        if (fb == p.classes.end()) c.add(PolicyDiag::Error, line, unknown_class(p, "classes." + n + ".gate.fallback", cd.gate.fallback));
        else if (fb->second.gate.enabled)
            c.add(PolicyDiag::Error, line, "classes." + n + ".gate.fallback: \"" + cd.gate.fallback + "\" is gated itself");
    }
    if (p.default_class.empty()) {
        if (default_line == 0) c.add(PolicyDiag::Error, 0, "settings.default_class is required");
    } else if (!p.classes.count(p.default_class)) {
        if (have_classes) c.add(PolicyDiag::Error, default_line, unknown_class(p, "settings.default_class", p.default_class));
    } else if (p.classes.at(p.default_class).gate.enabled) {
        c.add(PolicyDiag::Error, default_line, "settings.default_class: \"" + p.default_class + "\" must not be gated");
    }
}

/// One [[rules]] entry into `r`; fails when it cannot be used. `names`: the rule names so far.
void parse_rule(const Ctx& c, const TV& rv, const Policy& p, bool have_classes, std::set<std::string>& names, Rule& r) {
    check_keys(c, rv, "rules", {"name", "class", "match", "merge"});
    r.line = Ctx::line_of(rv);
    c.guard([&] {
        if (const TV* n = get(rv, "name")) r.name = str(c, *n, "rules.name", 128);
    });
    if (r.name.empty()) r.name = "rule@" + std::to_string(r.line);
    if (!names.insert(r.name).second) c.error(rv, "rules.name: duplicate rule name \"" + r.name + "\"");
    c.guard([&] {
        if (const TV* m = get(rv, "match")) r.match = parse_match(c, *m);
    });
    c.guard([&] {
        if (const TV* m = get(rv, "merge")) {
            if (!m->is_boolean()) c.fail(*m, "rules.merge: expected true or false");
            r.merge = m->as_boolean();
        }
    });
    const TV* cl = get(rv, "class");
    if (!cl) c.fail(rv, "rules: every rule needs class = \"<class>\"");
    r.cls = str(c, *cl, "rules.class", 63);
    if (have_classes && !p.classes.count(r.cls)) c.fail(*cl, unknown_class(p, "rules.class", r.cls));
}

/// [[rules]]: every rule on its own; a rule that cannot be used is left out.
void parse_rules(const Ctx& c, const TV& rules, Policy& p, bool have_classes) {
    if (!rules.is_array()) c.fail(rules, "rules: expected an array of tables ([[rules]])");
    if (rules.as_array().size() > 100000) c.fail(rules, "rules: more than 100000 rules");
    std::set<std::string> names;
    for (const auto& rv : rules.as_array()) {
        Rule r;
        bool ok = false;
        c.guard([&] {
            parse_rule(c, rv, p, have_classes, names, r);
            ok = true;
        });
        if (ok) p.rules.push_back(std::move(r));
    }
}

/// Parse and validate `text` into `p`, recording every error; `class_line` gets the line of each
/// class (for warnings).
void parse_into(const Ctx& c, const std::string& text, Policy& p, std::map<std::string, int>& class_line) {
    const TV root = parse_document(c, text);
    p.source = c.file;
    check_keys(c, root, "policy", {"version", "settings", "guarded", "resctrl", "rules", "classes"});
    c.guard([&] { parse_version(c, root); });
    std::vector<int> setting_lines;
    read_settings(c, root, p, setting_lines);
    const int default_line = setting_line(setting_lines, "default_class");
    if (const TV* g = get(root, "guarded")) c.guard([&] { parse_guarded(c, *g, p); });
    if (const TV* rg = get(root, "resctrl")) c.guard([&] { parse_resctrl(c, *rg, p); });
    std::map<std::string, int> fallback_line;
    const TV* classes = get(root, "classes");
    if (!classes) c.add(PolicyDiag::Error, 0, "no [classes] defined");
    if (classes) c.guard([&] { parse_classes(c, *classes, p, class_line, fallback_line); });
    check_class_refs(c, p, fallback_line, default_line, classes != nullptr);
    if (const TV* rules = get(root, "rules")) c.guard([&] { parse_rules(c, *rules, p, classes != nullptr); });
}

}  // namespace

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
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || fstatfs(fd, &sfs) != 0 || static_cast<long>(sfs.f_type) == kProcMagic ||
        static_cast<long>(sfs.f_type) == kSysfsMagic) {
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

}  // namespace nriqos
