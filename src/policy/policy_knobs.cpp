// A class's knob tables (classes.<name>.container / .pod) of the policy document: each knob of
// the knob table (model/knobs.hpp) with its value, fact values ({ fact = "..." }, model/fact_table.hpp),
// raw kernel files, and the warning about a memory size without a unit. Private helpers:
// policy_parse.hpp.
#include "policy/policy_parse.hpp"

#include <set>

#include "model/fact_table.hpp"

namespace nriqos {

namespace {

std::vector<std::string> knob_names() {
    std::vector<std::string> v;
    for (const auto& d : knob_table()) v.emplace_back(d.key);
    v.emplace_back("raw");
    return v;
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
    static const std::set<std::string> s = {"cpu",     "cpuacct",  "cpuset",  "memory",  "blkio",      "pids", "hugetlb",
                                            "net_cls", "net_prio", "freezer", "devices", "perf_event", "rdma", "misc"};
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

}  // namespace

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
            } catch (const InputError& e) { c.fail(val, what + "." + e.what()); }
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
                        c.fail(*f, what + ".raw.file: \"" + ks.raw_file +
                                       "\" is not an allowed kernel file name (controller.name; cgroup.*, tasks and *.procs are refused)");
                    if (const TV* ctl = get(e, "controller")) {
                        ks.raw_ctrl = str(c, *ctl, what + ".raw.controller", 32);
                        if (!v1_controllers().count(ks.raw_ctrl)) {
                            std::string hint = did_you_mean(ks.raw_ctrl, {v1_controllers().begin(), v1_controllers().end()});
                            c.fail(*ctl, what + ".raw.controller: unknown cgroup v1 controller \"" + ks.raw_ctrl + "\"" +
                                             (hint.empty() ? "" : " (" + hint + ")"));
                        }
                    } else {
                        ks.raw_ctrl = ks.raw_file.substr(0, ks.raw_file.find('.'));
                        if (!v1_controllers().count(ks.raw_ctrl))
                            c.fail(*f, what + ".raw: give controller = \"...\" (cannot infer it from the file name)");
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

}  // namespace nriqos
