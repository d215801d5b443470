// Unit tests of issue 9 §3/§4 on the policy side: `nri-qos check` reports every error with
// file:line and "did you mean", warns on suspicious policies; the built-in policy is the bundled
// one, compiled at build time; the effective policy falls back to the last good copy, then the
// built-in one, and says so; the v0.1 plugin conf refuses unknown keys; SHA-256 is right.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <fstream>
#include <sys/stat.h>
#include <unistd.h>

#include "event/classify.hpp"
#include "event/pipeline.hpp"
#include "nri/eval_pipeline.hpp"
#include "policy/policy.hpp"
#include "policy/policy_builtin.hpp"
#include "policy/policy_cache.hpp"
#include "policy/policy_settings.hpp"
#include "policy/policy_store.hpp"
#include "os/sha256.hpp"

#include "../scratch.hpp"

using namespace nriqos;
using nlohmann::json;

namespace {

const char* kBundled = NRI_QOS_SRCDIR "/conf/nri.d/nri-qos.toml";

std::string slurp(const std::string& p) {
    std::ifstream in(p, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
}
void spit(const std::string& p, const std::string& s) {
    std::ofstream out(p, std::ios::binary | std::ios::trunc);
    out << s;
    REQUIRE(out.good());
}

struct TempDir : unit::ScratchDir {
    TempDir() : ScratchDir("policy-test") {}
};

std::string dump(Policy p) {
    p.source.clear();
    return policy_to_json(p).dump();
}

/// "LINE:E|W:message" for each finding.
std::vector<std::string> findings(const std::string& text) {
    std::vector<std::string> out;
    for (const auto& d : check_policy_text(text, "p.toml").diags)
        out.push_back(std::to_string(d.line) + (d.level == PolicyDiag::Error ? ":E:" : ":W:") + d.message);
    return out;
}

bool has(const std::vector<std::string>& v, const std::string& prefix_and_part) {
    // "LINE:E:" prefix, then a part of the message
    size_t colon = prefix_and_part.find(':', prefix_and_part.find(':') + 1);
    std::string pre = prefix_and_part.substr(0, colon + 1), part = prefix_and_part.substr(colon + 1);
    for (const auto& s : v)
        if (s.rfind(pre, 0) == 0 && s.find(part) != std::string::npos) return true;
    return false;
}

}  // namespace

TEST_CASE("check: every error of a file in one run, each with its line", "[policy]") {
    const std::string text = R"(version = 1
[settings]
default_class = "Ls"
fial = "open"
[classes.LS.container]
cpu_sharez = 2
memory_limit = 1
oom_score_adj = 5000
[classes.BE]
descripton = "x"
gate.fallback = "nope"
[[rules]]
class = "be"
match.kube_qos = "besteffrot"
[[rules]]
class = "BE"
match.kind = "pod"
)";
    auto f = findings(text);
    INFO(json(f).dump(1));
    CHECK(has(f, "3:E:settings.default_class: unknown class \"Ls\" (did you mean \"LS\"?)"));
    CHECK(has(
        f,
        "4:E:settings: unknown key \"fial\" (did you mean \"fail\"? allowed: default_class, fail, cpu_weight_formula, koordinator_quota_lift, metrics_file, event_log, "
        "event_log_max_bytes, leave_to_others, katalyst_reserved_cpus, katalyst_default_numa_exclusive, katalyst_dedicated_default_burst, "
        "katalyst_default_burst_percent, evaluator_events)"));
    CHECK(has(f, "6:E:classes.LS.container: unknown knob \"cpu_sharez\" (did you mean \"cpu_shares\"? see nri-qos.toml(5))"));
    CHECK(has(f, "7:E:classes.LS.container.memory_limit: 1 out of range"));
    CHECK(has(f, "8:E:classes.LS.container.oom_score_adj: 5000 out of range [-1000, 1000]"));
    CHECK(has(f, "10:E:classes.BE: unknown key \"descripton\" (did you mean \"description\"?"));
    CHECK(has(f, "11:E:classes.BE.gate.fallback: unknown class \"nope\""));
    CHECK(has(f, "13:E:rules.class: unknown class \"be\" (did you mean \"BE\"?)"));
    CHECK(has(f, "14:E:match.kube_qos: expected besteffort, burstable or guaranteed, got \"besteffrot\" (did you mean \"besteffort\"?)"));
    CHECK(has(f, "17:E:match.kind: expected \"sandbox\" or \"container\", got \"pod\""));
    CHECK(f.size() == 10);
    // Ordered by line.
    auto chk = check_policy_text(text, "p.toml");
    for (size_t i = 1; i < chk.diags.size(); ++i) CHECK(chk.diags[i - 1].line <= chk.diags[i].line);
    CHECK(chk.errors() == 10);
    CHECK(format_diag("p.toml", chk.diags[0]) == "p.toml:3: settings.default_class: unknown class \"Ls\" (did you mean \"LS\"?)");
    // Loading reports the first and how many more.
    try {
        parse_policy_toml(text, "p.toml");
        FAIL("no error");
    } catch (const InputError& e) {
        CHECK(std::string(e.what()) ==
              "p.toml:3: settings.default_class: unknown class \"Ls\" (did you mean \"LS\"?) (+9 more errors: run nri-qos check)");
    }
}

TEST_CASE("check: [settings] that is not a table is an error, not a crash", "[policy]") {
    // Before: get(settings, "leave_to_others") outside any guard threw toml::type_error out of
    // check_policy_text, and `nri-qos check` aborted.
    std::vector<std::string> f;
    REQUIRE_NOTHROW(f = findings("version = 1\nsettings = 5\n[classes.a]\n"));
    INFO(json(f).dump(1));
    CHECK(has(f, "2:E:settings: expected a table, got integer"));
}

TEST_CASE("check: a TOML syntax error stops the check, with its line", "[policy]") {
    auto f = findings("version = 1\n[settings]\ndefault_class = = \"LS\"\n");
    REQUIRE(f.size() == 1);
    CHECK(f[0].rfind("3:E:TOML syntax error: ", 0) == 0);
}

TEST_CASE("check: warnings on suspicious but valid policies", "[policy]") {
    const std::string text = R"(version = 1
[settings]
default_class = "LS"
[[rules]]
name = "narrow"
class = "BE"
match.namespace = "batch"
match.kind = "container"
[[rules]]
name = "after-narrow"
class = "LS"
match.namespace = "batch"
match.kind = "container"
match.labels = { "x" = "y" }
[[rules]]
name = "everything"
class = "BE"
[[rules]]
name = "shadowed"
class = "LS"
match.labels = { "app" = "web" }
[classes.LS.container]
memory_limit = 65536
memory_high = 512
memory_low = 0
[classes.BE]
[classes.BE.container]
memory_swap = 0
[classes.UNUSED]
[classes.VIP]
[classes.VIP.container]
cpu_qos_level = 2
[classes.GATED]
gate.labels = { "nri-qos.io/allow" = "true" }
gate.fallback = "LS"
)";
    auto f = findings(text);
    INFO(json(f).dump(1));
    CHECK(has(f, "9:W:rules: \"after-narrow\" can never match: rule \"narrow\" (line 4) comes first and matches everything it matches"));
    CHECK(has(f, "18:W:rules: \"shadowed\" can never match: rule \"everything\" (line 15)"));
    CHECK(has(f, "23:W:classes.LS.container.memory_limit = 65536 bytes is below 1 MiB (sizes take a unit: \"Ki\", \"Mi\", \"Gi\")"));
    CHECK(has(f, "24:W:classes.LS.container.memory_high = 512 bytes is below 1 MiB (did you mean \"512Mi\"?)"));
    CHECK(has(f, "29:W:classes.UNUSED: no rule, settings.default_class or gate.fallback uses this class"));
    CHECK(has(f, "30:W:classes.VIP: no rule"));
    CHECK(has(f, "33:W:classes.GATED: no rule"));
    CHECK(has(
        f, "34:W:classes.GATED.gate.labels: \"nri-qos.io/allow\" is a pod label the pod author can set, and it is not declared in [guarded.labels]"));
    CHECK(f.size() == 8);  // memory_low = 0 and memory_swap = 0 mean "none": not suspicious
    CHECK(check_policy_text(text, "p.toml").errors() == 0);
}

TEST_CASE("check: a promoting class without a gate, reachable from a pod label, is a warning", "[policy]") {
    const std::string head = R"(version = 1
[settings]
default_class = "LS"
[[rules]]
name = "vip"
class = "VIP"
match.labels = { "tier" = "vip" }
[classes.LS]
[classes.VIP.container]
cpu_qos_level = 2
)";
    auto f = findings(head);
    INFO(json(f).dump(1));
    CHECK(
        has(f, "4:W:rules: \"vip\" gives class VIP (cpu_qos_level = 2) on pod label \"tier\", which the pod author sets, and the class has no gate"));
    // Declared guarded: fine.
    CHECK(findings(head + "[guarded.labels]\n\"tier\" = \"Kyverno policy tier-vip\"\n").empty());
    // A guarded key needs a note naming the admission policy.
    CHECK(has(findings(head + "[guarded.labels]\n\"tier\" = \"\"\n"), "12:E:guarded.labels.\"tier\": name the admission policy"));
}

TEST_CASE("check: the bundled policy has no error and no warning", "[policy]") {
    auto chk = check_policy_text(slurp(kBundled), kBundled);
    for (const auto& d : chk.diags) INFO(format_diag(kBundled, d));
    CHECK(chk.diags.empty());
}

TEST_CASE("builtin: the binary carries the bundled policy, compiled, and its SHA-256", "[policy]") {
    Policy b = builtin_policy();
    CHECK(b.source == "builtin");
    CHECK(dump(b) == dump(load_policy_toml(kBundled)));
    CHECK(std::string(builtin_policy_sha256()) == sha256_hex(slurp(kBundled)));
    CHECK(builtin_policy_rules() == b.rules.size());
    CHECK(builtin_policy_classes() == b.classes.size());
    // With a request it materialises only the rules that can match, like a cache hit.
    Request r;
    r.labels = {{"koordinator.sh/qosClass", "BE"}};
    r.pod_namespace = "default";
    Policy some = builtin_policy(&r);
    CHECK(some.rules.size() < b.rules.size());
    CHECK(classify(some, Facts{&r, KubeQos::BestEffort}).cls->name == "KOORD-BE");  // bundled: batch pods are BestEffort
}

TEST_CASE("effective policy: file, last good copy, built-in; always said", "[policy]") {
    TempDir t;
    const std::string pol = t.path + "/nri-qos.toml", cache = t.path + "/cache", lg = t.path + "/lib";
    PolicyPlaces w{cache, lg};
    PolicyInfo info;

    // No file at the default location: the built-in policy, no error.
    Policy p = effective_policy(pol, /*default_path=*/true, w, nullptr, info);
    CHECK(info.source == PolicySource::Builtin);
    CHECK(info.error.empty());
    CHECK(info.sha256 == builtin_policy_sha256());
    CHECK(p.default_class == "DEFAULT");
    // No file at a path someone configured: the built-in policy, with the error.
    effective_policy(pol, false, w, nullptr, info);
    CHECK(info.source == PolicySource::Builtin);
    CHECK(info.error == pol + ": cannot open policy: No such file or directory");
    CHECK(info.error_line() == info.error + "; applying the built-in policy until it is fixed");

    // A broken file and no last good copy yet: built-in, with the error.
    spit(pol, "version = 1\n[settings]\ndefault_class = \"LS\"\n[classes.LS.container]\ncpu_sharez = 2\n");
    effective_policy(pol, true, w, nullptr, info);
    CHECK(info.source == PolicySource::Builtin);
    CHECK(info.error.find(pol + ":5: classes.LS.container: unknown knob \"cpu_sharez\"") == 0);

    // A valid file: used, and saved as the last good copy (0600, in a 0700 directory).
    const std::string good = "version = 1\n[settings]\ndefault_class = \"BE\"\n[classes.BE.container]\ncpu_shares = 2\n";
    spit(pol, good);
    p = effective_policy(pol, true, w, nullptr, info);
    CHECK(info.source == PolicySource::File);
    CHECK(info.error.empty());
    CHECK(info.sha256 == sha256_hex(good));
    CHECK_FALSE(info.from_cache);
    const std::string copy = lg + "/" + last_good_name(pol);
    CHECK(slurp(copy) == good);
    struct stat st {};
    REQUIRE(stat(copy.c_str(), &st) == 0);
    CHECK((st.st_mode & 0777) == 0600);
    REQUIRE(stat(lg.c_str(), &st) == 0);
    CHECK((st.st_mode & 0777) == 0700);
    effective_policy(pol, true, w, nullptr, info);
    CHECK(info.from_cache);

    // Broken again (a typo after an edit): the last good copy, and the error, on every event.
    spit(pol, good + "[classes.BE.pod]\ncpu_idel = 1\n");
    for (int i = 0; i < 2; ++i) {
        p = effective_policy(pol, true, w, nullptr, info);
        CHECK(info.source == PolicySource::LastGood);
        CHECK(p.default_class == "BE");
        CHECK(info.sha256 == sha256_hex(good));
        CHECK(info.error.find(pol + ":7: classes.BE.pod: unknown knob \"cpu_idel\" (did you mean \"cpu_idle\"?") == 0);
        CHECK(info.error_line().find("; applying the last good copy of " + pol + " (sha256 " + sha256_hex(good).substr(0, 12) +
                                     ") until it is fixed") != std::string::npos);
    }
    CHECK(info.from_cache);  // the second time: the broken entry and the copy both from the cache
    // The file removed from a configured (non-default) path: also the last good copy.
    unlink(pol.c_str());
    effective_policy(pol, false, w, nullptr, info);
    CHECK(info.source == PolicySource::LastGood);
    CHECK(info.error == pol + ": cannot open policy: No such file or directory");
    // ... but at the default path, removing the file means "the built-in policy".
    effective_policy(pol, true, w, nullptr, info);
    CHECK(info.source == PolicySource::Builtin);
    CHECK(info.error.empty());

    // A copy others could have written is never trusted.
    spit(pol, "garbage =");
    REQUIRE(chmod(copy.c_str(), 0666) == 0);
    effective_policy(pol, true, w, nullptr, info);
    CHECK(info.source == PolicySource::Builtin);
    REQUIRE(chmod(copy.c_str(), 0600) == 0);
    REQUIRE(chmod(lg.c_str(), 0777) == 0);
    effective_policy(pol, true, w, nullptr, info);
    CHECK(info.source == PolicySource::Builtin);
    REQUIRE(chmod(lg.c_str(), 0700) == 0);
    // A copy this build rejects: the built-in policy, and both errors said.
    spit(copy, "version = 1\n");
    effective_policy(pol, true, w, nullptr, info);
    CHECK(info.source == PolicySource::Builtin);
    CHECK(info.error.find("(its last good copy is not usable either: " + copy + ": ") != std::string::npos);
}

TEST_CASE("effective policy: the last good copy is written only when it changes, and not read-only", "[policy]") {
    TempDir t;
    const std::string pol = t.path + "/p.toml", lg = t.path + "/lib";
    spit(pol, slurp(kBundled));
    PolicyInfo info;
    PolicyPlaces ro{"", lg};
    ro.write = false;
    effective_policy(pol, true, ro, nullptr, info);
    CHECK(access(lg.c_str(), F_OK) != 0);
    PolicyPlaces w{"", lg};  // no cache: every event compiles, the copy is compared first
    effective_policy(pol, true, w, nullptr, info);
    const std::string copy = lg + "/" + last_good_name(pol);
    struct stat a {
    }, b{};
    REQUIRE(stat(copy.c_str(), &a) == 0);
    usleep(20000);
    effective_policy(pol, true, w, nullptr, info);
    REQUIRE(stat(copy.c_str(), &b) == 0);
    CHECK(a.st_ino == b.st_ino);
    CHECK(a.st_mtim.tv_nsec == b.st_mtim.tv_nsec);
    CHECK(save_last_good(lg, pol, "other") == "");
    CHECK(slurp(copy) == "other");
}

TEST_CASE("effective policy: a compile saves the copy and its fail mode; before_compile runs on a miss only", "[policy]") {
    TempDir t;
    const std::string pol = t.path + "/p.toml", cache = t.path + "/cache", lg = t.path + "/lib";
    PolicyInfo info;
    int compiles = 0;
    const std::function<void()> count = [&] { ++compiles; };
    PolicyPlaces w{cache, lg};
    w.before_compile = &count;
    CHECK_FALSE(last_good_fail_closed(lg, pol).has_value());
    const std::string closed = "version = 1\n[settings]\ndefault_class = \"BE\"\nfail = \"closed\"\n[classes.BE.container]\ncpu_shares = 2\n";
    spit(pol, closed);
    effective_policy(pol, true, w, nullptr, info);
    CHECK(compiles == 1);
    CHECK(slurp(lg + "/" + last_good_name(pol)) == closed);
    CHECK(last_good_fail_closed(lg, pol) == std::optional<bool>(true));
    struct stat st {};
    REQUIRE(stat((lg + "/" + last_good_mode_name(pol)).c_str(), &st) == 0);
    CHECK((st.st_mode & 0777) == 0600);
    effective_policy(pol, true, w, nullptr, info);  // a hit: nothing compiled
    CHECK(compiles == 1);
    CHECK(info.from_cache);
    // An edit to fail = "open": compiled (by whoever: an event, explain, status, reconcile) and
    // the copy and its mode follow.
    std::string open = closed;
    open.replace(open.find("closed"), 6, "open");
    open += "# edited\n";
    spit(pol, open);
    effective_policy(pol, true, w, nullptr, info);
    CHECK(compiles == 2);
    CHECK(slurp(lg + "/" + last_good_name(pol)) == open);
    CHECK(last_good_fail_closed(lg, pol) == std::optional<bool>(false));
    // Broken, and its last good copy not compiled yet (a fresh cache: after a reboot): the file's
    // broken text and then the copy are compiled, the hook called before each.
    spit(pol, "version = 1\n[settings]\ndefault_class = \"BE\"\n");
    PolicyPlaces fresh{t.path + "/cache2", lg};
    fresh.before_compile = &count;
    effective_policy(pol, true, fresh, nullptr, info);
    CHECK(info.source == PolicySource::LastGood);
    CHECK(compiles == 4);
    // A side file others could have written, or with anything else in it, says nothing.
    const std::string mode = lg + "/" + last_good_mode_name(pol);
    REQUIRE(chmod(mode.c_str(), 0666) == 0);
    CHECK_FALSE(last_good_fail_closed(lg, pol).has_value());
    REQUIRE(chmod(mode.c_str(), 0600) == 0);
    spit(mode, "closed");
    CHECK_FALSE(last_good_fail_closed(lg, pol).has_value());
    // save_last_good restores it even when the copy itself is unchanged.
    CHECK(save_last_good(lg, pol, open, true) == "");
    CHECK(last_good_fail_closed(lg, pol) == std::optional<bool>(true));
    // Read-only loads (check, --version, a probe) neither compile into the cache nor save.
    PolicyPlaces ro{t.path + "/cache3", t.path + "/lib3"};
    ro.write = false;
    spit(pol, closed);
    effective_policy(pol, true, ro, nullptr, info);
    CHECK(access((t.path + "/lib3").c_str(), F_OK) != 0);
}

TEST_CASE("plugin conf: unknown keys are errors, with the closest known key", "[policy]") {
    CHECK(plugin_conf_error(json::object()) == "");
    CHECK(plugin_conf_error({{"policy", "/etc/nri/nri-qos.toml"}}) == "");
    CHECK(plugin_conf_error({{"polcy", "/x"}}) == "unknown key \"polcy\" (did you mean \"policy\"?; known: policy)");
    CHECK(plugin_conf_error({{"Policy", "/x"}}) == "unknown key \"Policy\" (did you mean \"policy\"?; known: policy)");
    CHECK(plugin_conf_error({{"debug", true}}) == "unknown key \"debug\" (known: policy)");
    // a valid "policy" beside the bad key: one message, no dangling "; "
    CHECK(plugin_conf_error({{"polcy", "x"}, {"policy", "/p"}}) == "unknown key \"polcy\" (did you mean \"policy\"?; known: policy)");
    CHECK(plugin_conf_error({{"policy", ""}}) == "\"policy\": expected a non-empty path string");
    CHECK(plugin_conf_error({{"policy", 1}, {"x", 1}}) == "\"policy\": expected a non-empty path string; unknown key \"x\" (known: policy)");
    CHECK(plugin_conf_error(json::array()) == "expected a JSON object, got array");
}

TEST_CASE("closest_name: near misses only", "[policy]") {
    CHECK(closest_name("cpu_sharez", {"cpu_shares", "cpu_weight"}) == "cpu_shares");
    CHECK(closest_name("memory_hgih", {"memory_high", "memory_low"}) == "memory_high");  // transposition
    CHECK(closest_name("be", {"BE", "LS"}) == "BE");
    CHECK(closest_name("B", {"A"}).empty());  // a short name is only matched ignoring case
    CHECK(closest_name("bogus", {"description", "fail"}).empty());
}

TEST_CASE("relay evaluator flags: --last-good-dir, and --state-dir keeps the copies with the state", "[policy]") {
    nriqos::Options o;
    CHECK(last_good_dir_of(o) == "/var/lib/nri-qos");
    CHECK(nriqos::nri::apply_eval_flags(o, {"--state-dir", "/s"}) == "");
    CHECK(last_good_dir_of(o) == "/s/last-good");
    nriqos::Options p;
    CHECK(nriqos::nri::apply_eval_flags(p, {"--last-good-dir", "/lg", "--state-dir", "/s"}) == "");
    CHECK(last_good_dir_of(p) == "/lg");
    nriqos::Options q;
    CHECK(nriqos::nri::apply_eval_flags(q, {"--last-good-dir", ""}) == "");
    CHECK(last_good_dir_of(q) == "");  // disabled
}

TEST_CASE("settings.leave_to_others: parsed, validated, cached and noted by check", "[policy][leave]") {
    const std::string head = "version = 1\n[settings]\ndefault_class = \"LS\"\n";
    const std::string tail = "[classes.LS.container]\ncpu_shares = 512\nmemory_high = \"90%\"\n";
    PolicyCheck ok = check_policy_text(head +
                                           "leave_to_others = [{field = \"cpu.shares\", plugin = \"koordlet\"},\n"
                                           "  {field = [\"unified.memory.high\", \"annotations\"], plugin = \"05-balloons\"}]\n" +
                                           tail,
                                       "p.toml");
    REQUIRE(ok.errors() == 0);
    REQUIRE(ok.policy.leave_to_others.size() == 3);
    CHECK(ok.policy.leave_to_others[0].plugin == "koordlet");
    CHECK((ok.policy.leave_to_others[0].covers.knobs & knob_bit(KnobId::CpuShares)) != 0);
    CHECK((ok.policy.leave_to_others[0].covers.knobs & knob_bit(KnobId::CpuWeight)) != 0);
    CHECK((ok.policy.leave_to_others[1].covers.knobs & knob_bit(KnobId::MemoryHigh)) != 0);
    CHECK(ok.policy.leave_to_others[2].covers.never_set);
    std::string notes;
    for (const auto& n : ok.notes) notes += n.message + "\n";
    CHECK(notes.find("settings.leave_to_others: cpu.shares left to koordlet: nri-qos never sets cpu_shares, cpu_weight (set by class LS") !=
          std::string::npos);
    CHECK(notes.find("annotations left to 05-balloons: nri-qos never sets this NRI field") != std::string::npos);

    // Through the compiled forms (JSON and the flat cache): the same entries.
    Policy back = policy_from_json(policy_to_json(ok.policy));
    REQUIRE(back.leave_to_others.size() == 3);
    CHECK(back.leave_to_others[1].field == "unified.memory.high");
    CHECK(back.leave_to_others[1].covers.knobs == ok.policy.leave_to_others[1].covers.knobs);
    TempDir d;
    spit(d.path + "/p.toml", head + "leave_to_others = [{field = \"cpu_quota_us\", plugin = \"rubik\"}]\n" + tail);
    FileLoad first = load_policy_file(d.path + "/p.toml", d.path + "/cache", nullptr);
    REQUIRE(first.ok);
    FileLoad hit = load_policy_file(d.path + "/p.toml", d.path + "/cache", nullptr);
    REQUIRE(hit.ok);
    CHECK(hit.from_cache);
    REQUIRE(hit.policy.leave_to_others.size() == 1);
    CHECK(hit.policy.leave_to_others[0].plugin == "rubik");
    CHECK((hit.policy.leave_to_others[0].covers.knobs & knob_bit(KnobId::CpuQuota)) != 0);

    // Errors: unknown field (with a hint), bad plugin name, missing keys, a field owned twice.
    auto f = findings(head +
                      "leave_to_others = [{field = \"cpu.share\", plugin = \"koordlet\"},\n"
                      "  {field = \"cpu_quota_us\", plugin = \"bad name!\"},\n"
                      "  {field = \"memory_limit\"},\n"
                      "  {field = \"cpu.shares\", plugin = \"x\"}, {field = \"cpu.shares\", plugin = \"y\"}]\n" +
                      tail);
    CHECK(has(
        f,
        "4:E:settings.leave_to_others[0].field: \"cpu.share\" is neither a knob of nri-qos nor an NRI adjustment field (did you mean \"cpu.shares\"?)"));
    CHECK(has(f, "5:E:settings.leave_to_others[1].plugin: expected a plugin name"));
    CHECK(has(f, "6:E:settings.leave_to_others[2]: needs both field and plugin"));
    CHECK(has(f, "7:E:settings.leave_to_others[4].field: \"cpu.shares\" is already left to x"));
    CHECK(has(findings(head + "leave_to_others = [{field = \"unified.cpu.pressure\", plugin = \"x\"}]\n" + tail),
              "4:E:settings.leave_to_others[0].field: \"unified.cpu.pressure\": no knob of nri-qos writes the cgroup v2 file cpu.pressure"));
}

// ---- settings.fail read ahead of a compile (policy.hpp read_fail_mode, issue #30 item 5) ------

namespace {
// read_fail_mode and the compiled policy's settings.fail agree on every text the policy parser
// accepts (the first pass is never stricter than toml11 on a valid policy).
void agrees(const std::string& text) {
    CAPTURE(text.substr(0, 400));
    Policy p;
    try {
        p = parse_policy_toml(text, "t.toml");
    } catch (const InputError&) {
        (void)read_fail_mode(text);  // not a policy: any answer, never a crash
        return;
    }
    CHECK(read_fail_mode(text) == std::optional<bool>(p.fail_closed));
}
}  // namespace

TEST_CASE("read_fail_mode: settings.fail in every TOML form, and nothing else", "[policy][failmode]") {
    const std::string cls = "\n[classes.BE.container]\ncpu_shares = 2\n";
    auto mode = [&](const std::string& head) { return read_fail_mode("version = 1\n" + head + cls); };
    const std::optional<bool> closed(true), open(false), unknown;
    CHECK(mode("[settings]\ndefault_class = \"BE\"\nfail = \"closed\"") == closed);
    CHECK(mode("[settings]\ndefault_class = \"BE\"\nfail = \"open\"") == open);
    CHECK(mode("[settings]\ndefault_class = \"BE\"") == open);  // the default
    CHECK(mode("settings.default_class = \"BE\"\nsettings.fail = \"closed\"") == closed);
    CHECK(mode("settings = { default_class = \"BE\", fail = \"closed\" }") == closed);
    CHECK(mode("[ \"settings\" ]\ndefault_class = 'BE'\n'fail' = 'closed'") == closed);
    CHECK(mode("[settings]\r\ndefault_class = \"BE\"\r\nfail=\"closed\"   # comment\r") == closed);
    CHECK(mode("[settings]\ndefault_class = \"BE\"\nfail = \"\\u0063losed\"") == closed);  // an escape
    CHECK(mode("[settings]\ndefault_class = \"BE\"\n\"f\\u0061il\" = \"closed\"") == closed);  // in the key too
    CHECK(mode("[settings]\ndefault_class = \"BE\"\nfail = \"\"\"\nclosed\"\"\"") == closed);  // multi-line
    CHECK(mode("[settings]\ndefault_class = \"BE\"\nfail = '''closed'''") == closed);
    CHECK(read_fail_mode("\xEF\xBB\xBFversion = 1\n[settings]\nfail = \"closed\"\n") == closed);  // BOM
    // Not settings.fail: other tables, arrays of tables, strings and comments that look like it.
    CHECK(mode("[settings]\ndefault_class = \"BE\"\n[settings.x]\nfail = \"closed\"") == open);
    CHECK(mode("[settings]\ndefault_class = \"BE\"\n# fail = \"closed\"\n[classes.LS]\nfail = \"closed\"") == open);
    CHECK(mode("[[rules]]\nclass = \"BE\"\nsettings.fail = \"closed\"\n[settings]\ndefault_class = \"BE\"") == open);
    CHECK(mode("x = { settings = { fail = \"closed\" } }\ny = [{ fail = \"closed\" }]\n[settings]\ndefault_class = \"BE\"") == open);
    CHECK(mode("[classes.LS]\ndescription = \"\"\"\n[settings]\nfail = \"closed\"\n\"\"\"\n[settings]\ndefault_class = \"BE\"") == open);
    CHECK(mode("[classes.LS]\ndescription = '''it's\n[settings]\nfail = \"closed\"'''\n[settings]\ndefault_class = \"BE\"") == open);
    CHECK(mode("[classes.LS]\ndescription = \"a \\\" fail = \\\"closed\\\"\"\n[settings]\ndefault_class = \"BE\"") == open);
    // Found after any amount of text (a date-time with a space, nested arrays and tables first).
    CHECK(mode("when = 1979-05-27 07:32:00Z\nn = [[1, 2], [\"a\", {b = 'c'}],]\n[settings]\ndefault_class = \"BE\"\nfail = \"closed\"") == closed);
    // Text the compile will reject: not known (the answer then is the fallback's, pipeline.hpp).
    CHECK(mode("[settings]\ndefault_class = \"BE\"\nfail = \"maybe\"") == unknown);
    CHECK(mode("[settings]\ndefault_class = \"BE\"\nfail = true") == unknown);
    CHECK(mode("[settings]\ndefault_class = \"BE\"\nfail = [\"closed\"]") == unknown);
    CHECK(mode("description = \"unterminated\n[settings]\nfail = \"closed\"") == unknown);
    CHECK(mode("[settings\ndefault_class = \"BE\"") == unknown);
    CHECK(mode("[settings]\ndefault_class \"BE\"") == unknown);
    CHECK(mode("x = \"\\q\"\n[settings]\nfail = \"open\"") == unknown);
    CHECK(read_fail_mode("x = " + std::string(40, '[') + std::string(40, ']')) == unknown);  // nesting beyond 32
    // ... but once settings.fail is read, later damage does not hide it.
    CHECK(mode("[settings]\ndefault_class = \"BE\"\nfail = \"closed\"\n[oops") == closed);
}

TEST_CASE("read_fail_mode agrees with the compiled policy on every valid text", "[policy][failmode]") {
    for (const char* f :
         {"/conf/nri.d/nri-qos.toml", "/tests/fixtures/policy/classic.toml", "/bench/native-policy.toml", "/bench/sync-policy.toml",
          "/deploy/helm/nri-qos/files/nri-qos.toml", "/tests/conformance/selftest/faithful-offline.toml", "/tests/fuzz/corpus/policy/bundled.toml",
          "/tests/fuzz/corpus/policy/gates-raw.toml", "/tests/fuzz/corpus/policy/regress-toml11-utf8-literal.toml",
          "/tests/fuzz/corpus/policy/regress-toml11-utf8-ml-literal.toml", "/tests/fuzz/corpus/policy/regress-quote-desync-nesting.toml",
          "/tests/fuzz/corpus/policy/regress-quote-desync-int.toml", "/tests/fuzz/corpus/policy/regress-int-overflow.toml"}) {
        std::string text = slurp(std::string(NRI_QOS_SRCDIR) + f);
        CAPTURE(f);
        REQUIRE(!text.empty());
        agrees(text);
        // the same file, fail-closed in each form
        const size_t at = text.find("\nfail = \"open\"");
        if (at != std::string::npos) {
            std::string c = text;
            c.replace(at, 14, "\nfail = \"closed\"");
            agrees(c);
            CHECK(read_fail_mode(c) == std::optional<bool>(true));
        }
    }
    // Every prefix of a policy (an editor's half-written save): never a crash, and where the
    // prefix is a valid policy, the same mode as its compile.
    const std::string small =
        "version = 1 # v\n[settings]\ndefault_class = \"BE\"\nfail = \"closed\"\n"
        "[[rules]]\nname = \"a\"\nclass = \"BE\"\nmatch.labels = { \"app\" = \"x\" }\n"
        "[classes.BE]\ndescription = '''multi\nline'''\n[classes.BE.container]\ncpu_shares = 2\n";
    for (size_t n = 0; n <= small.size(); ++n) agrees(small.substr(0, n));
}

TEST_CASE("settings table: every key is documented in nri-qos.toml(5), with its choices and default", "[policy][settings]") {
    const std::string man = slurp(NRI_QOS_SRCDIR "/man/nri-qos.toml.5");
    for (const SettingDef& d : settings_table()) {
        INFO(d.key);
        const std::string head = std::string("\n.BR ") + d.key + " \"";
        const size_t at = man.find(head);
        REQUIRE(at != std::string::npos);
        const std::string line = man.substr(at + 1, man.find('\n', at + 1) - at - 1);
        CHECK(std::string(d.doc).size() > 10);
        if (d.type != SettingType::Choice) continue;
        for (size_t i = 0; i < choice_count(d); ++i) CHECK(line.find(std::string("\\(dq") + d.choices[i] + "\\(dq") != std::string::npos);
        CHECK(line.find(std::string("default \\(dq") + d.choices[d.def] + "\\(dq") != std::string::npos);
    }
}

TEST_CASE("settings table: its defaults are a default Policy's", "[policy][settings]") {
    Policy p;
    for (const SettingDef& d : settings_table()) {
        INFO(d.key);
        switch (d.type) {
            case SettingType::Text: CHECK(d.ref.of<std::string>(p).empty()); break;
            case SettingType::FailMode:
            case SettingType::Bool: CHECK(int64_t(d.ref.of<bool>(p)) == d.def); break;
            case SettingType::Choice: CHECK(int64_t(d.ref.of<uint8_t>(p)) == d.def); break;
            case SettingType::Count:
                CHECK((d.ref.kind == SettingRef::U64 ? int64_t(d.ref.of<uint64_t>(p)) : int64_t(d.ref.of<uint32_t>(p))) == d.def);
                break;
            case SettingType::Path: CHECK((d.ref.of<std::string>(p).empty() && !d.aux.of<bool>(p))); break;
            case SettingType::CpusOrCount: CHECK((d.ref.of<std::string>(p).empty() && d.aux.of<uint32_t>(p) == 0)); break;
            case SettingType::FieldOwners: CHECK(d.ref.of<std::vector<LeftField>>(p).empty()); break;
        }
    }
}

TEST_CASE("settings table: every setting survives the flat form and the JSON form", "[policy][settings]") {
    // Each setting away from its default, so that a lost or swapped one shows.
    const Policy p = parse_policy_toml(R"(version = 1
[settings]
default_class = "BE"
fail = "closed"
cpu_weight_formula = "linear"
koordinator_quota_lift = "never"
metrics_file = ""
event_log = "/var/log/x.log"
event_log_max_bytes = 70000
leave_to_others = [{ field = "cpu_shares", plugin = "koordlet" }]
katalyst_reserved_cpus = "0-1"
katalyst_default_numa_exclusive = true
katalyst_dedicated_default_burst = "closed"
katalyst_default_burst_percent = 7
evaluator_events = 9
[classes.BE]
)",
                                       "p.toml");
    CHECK(p.sinks.metrics_file_set);
    CHECK(p.evaluator_events == 9);
    CHECK(p.katalyst_dedicated_default_burst == Policy::KatalystBurst::Closed);
    Policy q;
    REQUIRE(policy_cache::decode(policy_cache::compile(p, "k", false, 1, "s"), "k", nullptr, q, nullptr) == policy_cache::Decoded::Ok);
    CHECK(policy_to_json(q).dump() == policy_to_json(p).dump());
    CHECK(q.evaluator_events == 9);
    const Policy j = policy_from_json(policy_to_json(p));
    CHECK(j.evaluator_events == 9);  // was missing from the JSON form before the table said so
    CHECK(policy_to_json(j).dump() == policy_to_json(p).dump());
    // The forms are lossless only if every row names its place in both.
    for (const SettingDef& d : settings_table()) {
        INFO(d.key);
        CHECK(d.json_key != nullptr);
    }
    CHECK(policy_to_json(p)["katalyst_agent"].dump() == "[true,2,7]");
    CHECK(policy_to_json(p)["sinks"].dump() == R"([true,"",true,"/var/log/x.log",70000])");
}

TEST_CASE("settings: errors on one line come in the order they always came", "[policy][settings]") {
    // An inline [settings] table puts every error on one line; check lists them in read order
    // (event_log_max_bytes last: SettingDef::toml_last), which the table must not change.
    auto f = findings(
        "version = 1\nsettings = {default_class = \"a\", event_log_max_bytes = 1, katalyst_default_burst_percent = 500, evaluator_events = 0}\n"
        "[classes.a]\n");
    REQUIRE(f.size() == 3);
    CHECK(f[0].find("settings.katalyst_default_burst_percent:") != std::string::npos);
    CHECK(f[1].find("settings.evaluator_events:") != std::string::npos);
    CHECK(f[2].find("settings.event_log_max_bytes:") != std::string::npos);
}
