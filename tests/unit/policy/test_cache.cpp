// Unit tests of the compiled policy cache (src/policy/policy_cache.hpp, issue 4): the flat format
// round-trips, is never trusted when damaged, the rule index never changes a classification,
// and load_policy rebuilds / invalidates entries as documented.
#include <catch2/catch.hpp>

#include <cstdio>
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <fstream>
#include <random>
#include <sys/stat.h>
#include <chrono>
#include <thread>
#include <unistd.h>

#include "event/classify.hpp"
#include "facts/fact_state.hpp"
#include "facts/facts.hpp"
#include "event/pipeline.hpp"
#include "policy/policy.hpp"
#include "policy/policy_cache.hpp"
#include "model/request.hpp"
#include "os/sha256.hpp"

#include "../scratch.hpp"

using namespace nriqos;
namespace pc = nriqos::policy_cache;

namespace {

const char* kBundled = NRI_QOS_SRCDIR "/conf/nri.d/nri-qos.toml";

std::string slurp_file(const std::string& p) {
    std::ifstream in(p, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
}
void spit(const std::string& p, const std::string& s) {
    std::ofstream out(p, std::ios::binary | std::ios::trunc);
    out << s;
    REQUIRE(out.good());
}

/// Scratch directory (mode 0700), removed at the end of the test.
struct TempDir : unit::ScratchDir {
    TempDir() : ScratchDir("cache-test") {}
};

std::string dump(const Policy& p) { return policy_to_json(p).dump(); }

std::string error_of_load(const std::string& policy, const std::string& cache) {
    try {
        load_policy(policy, cache);
    } catch (const InputError& e) { return e.what(); }
    return "";
}

/// A policy exercising every kind of rule condition the index files rules under.
const char* kMixedPolicy = R"(version = 1
[settings]
default_class = "LS"
[[rules]]
name = "lit-label"
class = "BE"
match.labels = { "app" = "batch" }
[[rules]]
name = "glob-label"
class = "HLS"
match.labels = { "app" = "web-*" }
[[rules]]
name = "lit-ann"
class = "BE"
match.annotations = { "example.com/tier" = "offline" }
[[rules]]
name = "glob-ann"
class = "BE"
match.annotations = { "example.com/tier" = "off*" }
[[rules]]
name = "l-or-a"
class = "HLS"
match.labels_or_annotations = { "qos" = "high" }
[[rules]]
name = "l-or-a-glob"
class = "BE"
match.labels_or_annotations = { "qos" = "lo?" }
[[rules]]
name = "ns-list"
class = "BE"
match.namespace = ["batch", "jobs"]
[[rules]]
name = "ns-glob"
class = "HLS"
match.namespace = ["online-*"]
[[rules]]
name = "pod"
class = "BE"
match.pod_name = "cron-1"
[[rules]]
name = "ctr"
class = "HLS"
match.container_name = ["sidecar", "proxy"]
[[rules]]
name = "ctr-glob"
class = "BE"
match.container_name = "log*"
[[rules]]
name = "two-conds"
class = "HLS"
match.labels = { "team" = "a", "app" = "*" }
match.kind = "container"
[[rules]]
name = "qos-only"
class = "BE"
match.kube_qos = "besteffort"
[[rules]]
name = "sandbox-only"
class = "HLS"
match.kind = "sandbox"
match.namespace = "kube-system"
[classes.LS]
[classes.BE]
[classes.BE.container]
cpu_shares = 2
[classes.HLS]
gate.namespaces = ["online-*"]
gate.fallback = "LS"
)";

}  // namespace

TEST_CASE("cache: the flat form round-trips the bundled policy", "[cache]") {
    Policy p = load_policy_toml(kBundled);
    p.guarded_labels = {{"koordinator.sh/qosClass", "koord-manager webhook"}};
    std::string blob = pc::compile(p, "key", false, 42, "abc123");
    Policy q;
    pc::DecodeInfo info;
    REQUIRE(pc::decode(blob, "key", nullptr, q, &info) == pc::Decoded::Ok);
    CHECK(info.text_hash == 42);
    CHECK(info.sha256 == "abc123");
    CHECK(dump(q) == dump(p));
    CHECK(q.guarded_labels == p.guarded_labels);
    CHECK(q.rules.size() == p.rules.size());
    // A racy entry decodes but tells the caller to verify the policy text.
    std::string racy = pc::compile(p, "key", true, 7);
    CHECK(pc::decode(racy, "key", nullptr, q, &info) == pc::Decoded::Racy);
    CHECK(info.text_hash == 7);
}

TEST_CASE("settings.evaluator_events: 1 by default, 1..1000000, survives the flat form", "[cache][policy][resident]") {
    Policy d = load_policy_toml(kBundled);
    CHECK(d.evaluator_events == 1);  // one process per event unless the operator says otherwise
    const std::string head = "version = 1\n[settings]\ndefault_class = \"X\"\n";
    const std::string tail = "[classes.X.container]\ncpu_shares = 2\n";
    Policy p = parse_policy_toml(head + "evaluator_events = 1000\n" + tail, "p.toml");
    CHECK(p.evaluator_events == 1000);
    std::string blob = pc::compile(p, "key", false, 1, "s");
    Policy q;
    REQUIRE(pc::decode(blob, "key", nullptr, q, nullptr) == pc::Decoded::Ok);
    CHECK(q.evaluator_events == 1000);
    for (const char* bad : {"0", "1000001", "\"many\"", "2.5"}) {
        try {
            parse_policy_toml(head + "evaluator_events = " + bad + "\n" + tail, "p.toml");
            FAIL("accepted evaluator_events = " << bad);
        } catch (const InputError& e) {
            CHECK(std::string(e.what()).find("settings.evaluator_events: expected an integer from 1") != std::string::npos);
        }
    }
}

TEST_CASE("cache: settings.cpu_weight_formula survives the flat form, all three values", "[cache][weight]") {
    for (WeightFormula f : {WeightFormula::Auto, WeightFormula::LogQuadratic, WeightFormula::Linear}) {
        Policy p = load_policy_toml(kBundled);
        p.cpu_weight_formula = f;
        std::string blob = pc::compile(p, "key", false, 1, "s");
        Policy q;
        REQUIRE(pc::decode(blob, "key", nullptr, q, nullptr) == pc::Decoded::Ok);
        CHECK(q.cpu_weight_formula == f);
    }
}

TEST_CASE("cache: a broken entry carries the error, and is never trusted when damaged", "[cache]") {
    std::string blob = pc::compile_broken("key", false, 9, "feed", "p.toml:3: unknown knob \"x\"");
    Policy q;
    pc::DecodeInfo info;
    REQUIRE(pc::decode(blob, "key", nullptr, q, &info) == pc::Decoded::Broken);
    CHECK(info.error == "p.toml:3: unknown knob \"x\"");
    CHECK(info.sha256 == "feed");
    CHECK(info.text_hash == 9);
    CHECK_FALSE(info.racy);
    CHECK(pc::decode(pc::compile_broken("key", true, 9, "feed", "e"), "key", nullptr, q, &info) == pc::Decoded::Broken);
    CHECK(info.racy);
    CHECK(pc::decode(blob, "other", nullptr, q, &info) == pc::Decoded::Invalid);
    for (size_t n = 0; n < blob.size(); ++n)
        REQUIRE(pc::decode(std::string_view(blob).substr(0, n), "key", nullptr, q, nullptr) == pc::Decoded::Invalid);
    for (size_t i = 0; i < blob.size(); ++i) {
        std::string bad = blob;
        bad[i] = static_cast<char>(bad[i] ^ 0x41);
        REQUIRE(pc::decode(bad, "key", nullptr, q, nullptr) == pc::Decoded::Invalid);
    }
}

TEST_CASE("cache: a foreign key, foreign or damaged bytes are never trusted", "[cache]") {
    Policy p = load_policy_toml(kBundled);
    const std::string ref = dump(p);
    std::string blob = pc::compile(p, "key", false, 0);
    Policy q;
    CHECK(pc::decode(blob, "other key", nullptr, q, nullptr) == pc::Decoded::Invalid);
    CHECK(pc::decode("", "key", nullptr, q, nullptr) == pc::Decoded::Invalid);
    CHECK(pc::decode("{\"key\": 1}", "key", nullptr, q, nullptr) == pc::Decoded::Invalid);
    CHECK(pc::decode(std::string(4096, '\0'), "key", nullptr, q, nullptr) == pc::Decoded::Invalid);

    // Every truncation is refused.
    for (size_t n = 0; n < blob.size(); ++n)
        REQUIRE(pc::decode(std::string_view(blob).substr(0, n), "key", nullptr, q, nullptr) == pc::Decoded::Invalid);

    // Every single-byte change either is refused or (a byte the load does not use) yields the
    // very same policy: a damaged file never produces a different policy.
    Request r;
    r.labels = {{"app", "x"}};
    r.pod_namespace = "default";
    size_t refused = 0;
    for (size_t i = 0; i < blob.size(); ++i) {
        std::string bad = blob;
        bad[i] = static_cast<char>(bad[i] ^ 0x41);
        const Request* filters[] = {nullptr, &r};
        for (const Request* f : filters) {
            Policy d;
            pc::Decoded res = pc::decode(bad, "key", f, d, nullptr);
            if (res == pc::Decoded::Invalid) {
                ++refused;
                continue;
            }
            if (!f) REQUIRE(dump(d) == ref);
        }
    }
    CHECK(refused == 2 * blob.size());  // a small file is verified whole, in both modes
}

TEST_CASE("cache: the rule index never changes a classification", "[cache]") {
    Policy p = parse_policy_toml(kMixedPolicy, "mixed.toml");
    std::string blob = pc::compile(p, "k", false, 0);
    const std::vector<std::string> label_keys = {"app", "team", "qos", "other"};
    const std::vector<std::string> values = {"batch", "web-1", "web-", "a", "high", "low", "lo", "offline", "off", "x", ""};
    const std::vector<std::string> names = {"batch", "jobs", "online-1", "kube-system", "default", "cron-1", "sidecar", "proxy", "log1", "app"};
    std::mt19937 rng(1234);
    auto pick = [&](const std::vector<std::string>& v) { return v[rng() % v.size()]; };
    size_t narrowed = 0;
    for (int iter = 0; iter < 3000; ++iter) {
        Request r;
        r.is_sandbox = rng() % 3 == 0;
        for (int i = rng() % 3; i > 0; --i) r.labels[pick(label_keys)] = pick(values);
        for (int i = rng() % 3; i > 0; --i) r.annotations[rng() % 2 ? "example.com/tier" : pick(label_keys)] = pick(values);
        r.pod_namespace = pick(names);
        r.pod_name = pick(names);
        if (!r.is_sandbox) r.container_name = pick(names);
        KubeQos q = static_cast<KubeQos>(rng() % 4);
        Policy some;
        REQUIRE(pc::decode(blob, "k", &r, some, nullptr) == pc::Decoded::Ok);
        if (some.rules.size() < p.rules.size()) ++narrowed;
        Decision full = classify(p, Facts{&r, q}), part = classify(some, Facts{&r, q});
        INFO("iteration " << iter);
        REQUIRE(full.rule == part.rule);
        REQUIRE(full.cls->name == part.cls->name);
        REQUIRE(full.gate_note == part.gate_note);
        // Kept rules stay in policy order.
        for (size_t i = 1; i < some.rules.size(); ++i) REQUIRE(some.rules[i - 1].line < some.rules[i].line);
    }
    CHECK(narrowed > 2900);  // the index does narrow the rule list down
}

TEST_CASE("cache: load_policy builds, hits, invalidates and rebuilds", "[cache]") {
    TempDir t;
    std::string policy = t.path + "/policy.toml", cache = t.path + "/cache";
    spit(policy, slurp_file(kBundled));
    const std::string ref = dump(load_policy_toml(policy));
    bool hit = true;

    // Cold: compiled and stored in a 0700 directory, file 0600.
    CHECK(dump(load_policy(policy, cache, &hit)) == ref);
    CHECK_FALSE(hit);
    std::string entry = cache + "/" + pc::cache_file_name(policy);
    struct stat st {};
    REQUIRE(stat(cache.c_str(), &st) == 0);
    CHECK((st.st_mode & 0777) == 0700);
    REQUIRE(stat(entry.c_str(), &st) == 0);
    CHECK((st.st_mode & 0777) == 0600);

    // A policy written just now is stored "racy": it is a hit only after its text is checked.
    CHECK(dump(load_policy(policy, cache, &hit)) == ref);
    CHECK(hit);

    // No cache: never a hit, same policy.
    CHECK(dump(load_policy(policy, "", &hit)) == ref);
    CHECK_FALSE(hit);

    // Corrupt, truncated, foreign: ignored, rebuilt, then hit again.
    std::string good = slurp_file(entry);
    for (std::string bad : {good.substr(0, good.size() / 2), std::string("garbage"), std::string(), good}) {
        if (bad == good) bad[60] ^= 1;  // a flipped bit in the key
        spit(entry, bad);
        CHECK(dump(load_policy(policy, cache, &hit)) == ref);
        CHECK_FALSE(hit);
        CHECK(slurp_file(entry) != bad);
        CHECK(dump(load_policy(policy, cache, &hit)) == ref);
        CHECK(hit);
    }

    // Policy change invalidates (same size, only a value differs).
    std::string text = slurp_file(policy);
    size_t at = text.find("default_class = \"DEFAULT\"");
    REQUIRE(at != std::string::npos);
    text.replace(at, 25, "default_class = \"OFFLINE\"");
    spit(policy, text);
    Policy changed = load_policy(policy, cache, &hit);
    CHECK_FALSE(hit);
    CHECK(changed.default_class == "OFFLINE");
    CHECK(load_policy(policy, cache, &hit).default_class == "OFFLINE");
    CHECK(hit);

    // A broken policy is reported as without a cache; the error is cached too ("broken"
    // entry), so the next event gets it without parsing the TOML again.
    spit(policy, "version = 1\n[classes.A]\ncolour = 1\n");
    std::string want = error_of_load(policy, "");
    CHECK(
        want ==
        policy +
            ":3: classes.A: unknown key \"colour\" (allowed: description, fail, container, pod, sandbox, gate, pod_cpu_weight_formula, container_cpu_weight_formula, accept_merge) (+1 more error: run nri-qos check)");
    FileLoad f = load_policy_file(policy, cache, nullptr);
    CHECK_FALSE(f.ok);
    CHECK_FALSE(f.from_cache);
    CHECK(f.error == want);
    f = load_policy_file(policy, cache, nullptr);
    CHECK_FALSE(f.ok);
    CHECK(f.from_cache);
    CHECK(f.error == want);
    CHECK(f.sha256 == sha256_hex(slurp_file(policy)));
    // Fixed: the broken entry is replaced (a change of the file's identity).
    spit(policy, slurp_file(kBundled));
    f = load_policy_file(policy, cache, nullptr);
    CHECK(f.ok);
    CHECK(f.error.empty());
}

TEST_CASE("cache: a racy entry whose policy text changed is not a hit", "[cache]") {
    TempDir t;
    std::string policy = t.path + "/policy.toml", cache = t.path + "/cache";
    spit(policy, slurp_file(kBundled));
    struct stat st {};
    REQUIRE(stat(policy.c_str(), &st) == 0);
    // Pretend the entry was compiled from other text with the very same file identity (an
    // in-place rewrite within one timestamp tick): a racy entry with a wrong text hash.
    Policy other = parse_policy_toml(kMixedPolicy, policy);
    REQUIRE(mkdir(cache.c_str(), 0700) == 0);
    spit(cache + "/" + pc::cache_file_name(policy), pc::compile(other, pc::cache_key(policy, st), true, 12345));
    bool hit = true;
    Policy p = load_policy(policy, cache, &hit);
    CHECK_FALSE(hit);
    CHECK(dump(p) == dump(load_policy_toml(policy)));
    // The same entry with the right text hash is a hit.
    std::string text = slurp_file(policy);
    spit(cache + "/" + pc::cache_file_name(policy), pc::compile(other, pc::cache_key(policy, st), true, pc::hash64(text.data(), text.size())));
    p = load_policy(policy, cache, &hit);
    CHECK(hit);
    CHECK(dump(p) == dump(other));
}

TEST_CASE("cache: directories and files others could write are not trusted", "[cache]") {
    TempDir t;
    std::string policy = t.path + "/policy.toml", cache = t.path + "/cache";
    spit(policy, slurp_file(kBundled));
    bool hit = true;
    load_policy(policy, cache, &hit);
    load_policy(policy, cache, &hit);
    REQUIRE(hit);
    std::string entry = cache + "/" + pc::cache_file_name(policy);

    REQUIRE(chmod(entry.c_str(), 0666) == 0);  // world-writable entry: ignored (and replaced)
    load_policy(policy, cache, &hit);
    CHECK_FALSE(hit);

    REQUIRE(chmod(cache.c_str(), 0777) == 0);  // world-writable directory: never read nor written
    load_policy(policy, cache, &hit);
    CHECK_FALSE(hit);
    load_policy(policy, cache, &hit);
    CHECK_FALSE(hit);
    REQUIRE(chmod(cache.c_str(), 0700) == 0);

    // A symlink in place of the entry is not followed.
    std::string elsewhere = t.path + "/elsewhere.bin";
    rename(entry.c_str(), elsewhere.c_str());
    REQUIRE(symlink(elsewhere.c_str(), entry.c_str()) == 0);
    load_policy(policy, cache, &hit);
    CHECK_FALSE(hit);
}

TEST_CASE("cache: keys depend on the file identity and the build", "[cache]") {
    struct stat a {
    }, b{};
    a.st_ino = 1;
    b.st_ino = 2;
    CHECK(pc::cache_key("/p", a) != pc::cache_key("/p", b));
    CHECK(pc::cache_key("/p", a) != pc::cache_key("/q", a));
    b = a;
    b.st_ctim.tv_nsec = 1;
    CHECK(pc::cache_key("/p", a) != pc::cache_key("/p", b));
    CHECK(pc::cache_key("/p", a).find(pc::build_identity()) != std::string::npos);
    CHECK(pc::build_identity().rfind("build-id:", 0) == 0);  // the Makefile's gcc emits a GNU build-id
    CHECK(pc::cache_file_name("/etc/nri/nri-qos.toml") != pc::cache_file_name("/etc/nri/other.toml"));
}

// The deadline's SIGALRM handler _exit()s. Fired while store_file() writes (the last good copy, a
// cache entry), it must not leave a temporary file behind: the write finishes first.
TEST_CASE("store_file: a deadline during the write leaves no temporary file", "[cache]") {
    const unit::ScratchDir t("store", "/dev/shm");  // tmpfs: the write's speed is part of the timing below
    const std::string dir = t / "d";
    const std::string big(256u << 20, 'x');  // long enough to be under way when the timer fires
    pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
        struct sigaction sa {};
        sa.sa_handler = [](int) { _exit(3); };
        sigaction(SIGALRM, &sa, nullptr);
        struct itimerval it {};
        // 20 ms: past the child's start (2 ms was spent before store_file began on a loaded or
        // THP-compacting machine: no file at all), well inside the 256 MiB write (≥ 50 ms on tmpfs).
        it.it_value.tv_usec = 20000;
        setitimer(ITIMER_REAL, &it, nullptr);
        pc::store_file(dir, "entry.bin", big);
        pause();
        _exit(0);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    CHECK((WIFEXITED(st) && WEXITSTATUS(st) == 3));
    std::vector<std::string> names;
    if (DIR* d = opendir(dir.c_str())) {
        while (struct dirent* e = readdir(d))
            if (e->d_name[0] != '.' || std::string(e->d_name).find(".tmp") != std::string::npos) names.push_back(e->d_name);
        closedir(d);
    }
    CHECK(names == std::vector<std::string>{"entry.bin"});
}

// The zygote preloads before every spare. On a node the policy file is old: its entry is a
// normal one, not racy (the test above works on a policy written just now). An unchanged policy
// keeps the copy; a changed one must be seen: a new stat is a new key, the copy is not handed
// out for it, and the next preload reads the new entry.
TEST_CASE("cache: preload of an unchanged, settled policy keeps its copy; a changed one is read again", "[cache]") {
    TempDir t;
    std::string policy = t.path + "/policy.toml", cache = t.path + "/cache";
    spit(policy, slurp_file(kBundled));
    std::this_thread::sleep_for(std::chrono::milliseconds((pc::kRacySeconds + 1) * 1000 + 100));  // settled
    REQUIRE(load_policy(policy, cache, nullptr).default_class == "DEFAULT");  // a normal entry
    std::string name = pc::cache_file_name(policy), entry = cache + "/" + name;
    struct stat st {};
    REQUIRE(stat(policy.c_str(), &st) == 0);
    pc::preload(policy, cache);
    pc::DecodeInfo info;
    Policy p;
    REQUIRE(pc::read_file(cache, name, pc::cache_key(policy, st), nullptr, p, &info) == pc::Decoded::Ok);
    CHECK_FALSE(info.racy);
    REQUIRE(unlink(entry.c_str()) == 0);
    pc::preload(policy, cache);  // unchanged: the copy stays (the entry on disk is gone)
    Policy q;
    CHECK(pc::read_file(cache, name, pc::cache_key(policy, st), nullptr, q, nullptr) == pc::Decoded::Ok);
    CHECK(q.default_class == "DEFAULT");

    // Changed in place, same size: new ctime/mtime, new key; the copy is not handed out for it,
    // and the next preload reads the entry of the new text.
    std::string text = slurp_file(policy);
    size_t at = text.find("default_class = \"DEFAULT\"");
    REQUIRE(at != std::string::npos);
    text.replace(at, 25, "default_class = \"OFFLINE\"");
    spit(policy, text);
    REQUIRE(stat(policy.c_str(), &st) == 0);
    Policy r;
    CHECK(pc::read_file(cache, name, pc::cache_key(policy, st), nullptr, r, nullptr) == pc::Decoded::Invalid);
    REQUIRE(load_policy(policy, cache, nullptr).default_class == "OFFLINE");  // stores its entry
    pc::preload(policy, cache);
    REQUIRE(unlink(entry.c_str()) == 0);
    Policy u;
    CHECK(pc::read_file(cache, name, pc::cache_key(policy, st), nullptr, u, nullptr) != pc::Decoded::Invalid);
    CHECK(u.default_class == "OFFLINE");
}

TEST_CASE("cache: preload keeps the entry in memory, and never hands out a stale one", "[cache]") {
    TempDir t;
    std::string policy = t.path + "/policy.toml", cache = t.path + "/cache";
    spit(policy, slurp_file(kBundled));
    const std::string ref = dump(load_policy_toml(policy));
    REQUIRE(dump(load_policy(policy, cache, nullptr)) == ref);  // compiles and stores the entry
    std::string name = pc::cache_file_name(policy), entry = cache + "/" + name;
    struct stat st {};
    REQUIRE(stat(policy.c_str(), &st) == 0);
    const std::string key = pc::cache_key(policy, st);

    pc::preload(policy, cache);
    REQUIRE(unlink(entry.c_str()) == 0);  // from now on only the copy in memory has it
    Policy p;
    CHECK(pc::read_file(cache, name, key, nullptr, p, nullptr) != pc::Decoded::Invalid);
    CHECK(dump(p) == ref);
    CHECK(dump(load_policy(policy, cache, nullptr)) == ref);

    // The policy changes: its key changes, the copy is never used for it.
    std::string text = slurp_file(policy);
    size_t at = text.find("default_class = \"DEFAULT\"");
    REQUIRE(at != std::string::npos);
    text.replace(at, 25, "default_class = \"OFFLINE\"");
    spit(policy, text);
    REQUIRE((unlink(entry.c_str()) == 0 || errno == ENOENT));
    REQUIRE(stat(policy.c_str(), &st) == 0);
    Policy q;
    CHECK(pc::read_file(cache, name, pc::cache_key(policy, st), nullptr, q, nullptr) == pc::Decoded::Invalid);
    CHECK(load_policy(policy, cache, nullptr).default_class == "OFFLINE");

    // preload again reads the new entry; a cache directory others could write is never read.
    pc::preload(policy, cache);
    REQUIRE(unlink(entry.c_str()) == 0);
    Policy r;
    CHECK(pc::read_file(cache, name, pc::cache_key(policy, st), nullptr, r, nullptr) != pc::Decoded::Invalid);
    CHECK(r.default_class == "OFFLINE");
    REQUIRE(chmod(cache.c_str(), 0777) == 0);
    spit(policy, slurp_file(kBundled));
    REQUIRE(load_policy(policy, t.path + "/cache2", nullptr).default_class == "DEFAULT");
    REQUIRE(rename((t.path + "/cache2/" + name).c_str(), entry.c_str()) == 0);
    pc::preload(policy, cache);  // untrusted directory: keeps the old copy, which no longer matches
    REQUIRE(stat(policy.c_str(), &st) == 0);
    Policy s;
    CHECK(pc::read_file(cache, name, pc::cache_key(policy, st), nullptr, s, nullptr) == pc::Decoded::Invalid);
    REQUIRE(chmod(cache.c_str(), 0700) == 0);
}

namespace {

/// Every field of a knob list, for exact comparisons.
std::string knob_list(const std::vector<KnobSetting>& v) {
    std::string s;
    for (const auto& k : v)
        s += std::to_string(static_cast<int>(k.id)) + "/" + std::to_string(static_cast<int>(k.value.kind)) + "/" + std::to_string(k.value.num) + "/" +
             k.value.text + "/" + k.raw_file + "/" + k.raw_ctrl + "/" + k.note + ";";
    return s;
}

/// A filtered (lazy) decode of `p`'s compiled form gives, class by class through decode_knobs,
/// exactly the knob lists of the eager decode; a class not asked for stays encoded.
void check_lazy_equals_eager(const Policy& p, const Request& r) {
    std::string blob = pc::compile(p, "k", false, 0);
    Policy eager, lazy;
    REQUIRE(pc::decode(blob, "k", nullptr, eager, nullptr) == pc::Decoded::Ok);
    REQUIRE(pc::decode(blob, "k", &r, lazy, nullptr) == pc::Decoded::Ok);
    REQUIRE(lazy.classes.size() == eager.classes.size());
    CHECK(eager.packed_knobs.empty());
    CHECK_FALSE(lazy.packed_knobs.empty());
    for (const auto& [n, c] : eager.classes) CHECK_FALSE(c.knobs_pending());
    for (const auto& [n, c] : lazy.classes) {
        CHECK(c.knobs_pending());
        CHECK(c.container.empty());
        CHECK(c.pod.empty());
    }
    CHECK_THROWS_AS(policy_to_json(lazy), std::logic_error);  // never a silently empty list
    // One class at a time, in reverse order: each is exact, and the rest stay pending.
    size_t decoded = 0, knobs = 0;
    for (auto it = eager.classes.rbegin(); it != eager.classes.rend(); ++it) {
        const std::string& n = it->first;
        INFO("class " << n);
        REQUIRE(pc::decode_knobs(lazy, n));
        ++decoded;
        const ClassDef& l = lazy.classes.at(n);
        CHECK_FALSE(l.knobs_pending());
        CHECK(knob_list(l.container) == knob_list(it->second.container));
        CHECK(knob_list(l.pod) == knob_list(it->second.pod));
        knobs += l.container.size() + l.pod.size();
        REQUIRE(pc::decode_knobs(lazy, n));  // a second call changes nothing
        CHECK(knob_list(lazy.classes.at(n).container) == knob_list(it->second.container));
        size_t pending = 0;
        for (const auto& [m, c] : lazy.classes) pending += c.knobs_pending();
        CHECK(pending == lazy.classes.size() - decoded);
    }
    CHECK(knobs > 0);
    CHECK_FALSE(pc::decode_knobs(lazy, "no such class"));
    // All decoded: the classes are those of the eager decode (and of the policy itself).
    CHECK(policy_to_json(lazy)["classes"] == policy_to_json(eager)["classes"]);
    CHECK(policy_to_json(lazy)["classes"] == policy_to_json(p)["classes"]);
}

}  // namespace

TEST_CASE("cache: lazily decoded knob lists equal the eager ones, class by class", "[cache]") {
    Request r;
    r.labels = {{"koordinator.sh/qosClass", "BE"}};
    r.pod_namespace = "default";
    r.container_name = "c";
    SECTION("bundled policy") {
        Policy p = load_policy_toml(kBundled);
        size_t facts = 0;
        for (const auto& [n, c] : p.classes)
            for (const auto* l : {&c.container, &c.pod})
                for (const auto& k : *l) facts += k.value.kind == KnobValue::Fact;
        CHECK(facts > 10);  // fact names are checked at decode_knobs time: exercised
        check_lazy_equals_eager(p, r);
    }
    SECTION("1000 generated rules (bench/gen-policy.sh)") {
        TempDir t;
        std::string gen = t.path + "/gen.toml";
        REQUIRE(std::system(("bash " NRI_QOS_SRCDIR "/bench/gen-policy.sh 1000 '" + std::string(kBundled) + "' > '" + gen + "'").c_str()) == 0);
        Policy p = load_policy_toml(gen);
        REQUIRE(p.rules.size() > 1000);
        check_lazy_equals_eager(p, r);
    }
    SECTION("a policy over 256 KiB (verified section by section)") {
        Policy p = load_policy_toml(kBundled);
        std::vector<Rule> more;
        for (int i = 0; i < 3000; ++i) {
            Rule x = p.rules[static_cast<size_t>(i) % p.rules.size()];
            x.name += "-copy-" + std::to_string(i);
            more.push_back(std::move(x));
        }
        p.rules.insert(p.rules.end(), more.begin(), more.end());
        REQUIRE(pc::compile(p, "k", false, 0).size() > (256u << 10));
        check_lazy_equals_eager(p, r);
    }
}

TEST_CASE("cache: knob lists that do not decode are never used, not even in part", "[cache]") {
    // A writer defect: checksums right, but class BE's second container knob names an unknown
    // fact. The eager decode refuses the entry; the lazy one only when BE's lists are decoded.
    Policy p = parse_policy_toml(kMixedPolicy, "mixed.toml");
    ClassDef& be = p.classes.at("BE");
    REQUIRE(be.container.size() == 1);
    KnobSetting bad = be.container.front();
    bad.value.kind = KnobValue::Fact;
    bad.value.text = "no.such_fact";
    be.container.push_back(bad);
    std::string blob = pc::compile(p, "k", false, 0);
    Policy eager, lazy;
    CHECK(pc::decode(blob, "k", nullptr, eager, nullptr) == pc::Decoded::Invalid);
    Request r;
    r.pod_namespace = "default";
    REQUIRE(pc::decode(blob, "k", &r, lazy, nullptr) == pc::Decoded::Ok);
    CHECK_FALSE(pc::decode_knobs(lazy, "BE"));
    CHECK(lazy.classes.at("BE").knobs_pending());  // still pending, nothing filled in
    CHECK(lazy.classes.at("BE").container.empty());
    CHECK_FALSE(pc::decode_knobs(lazy, "BE"));  // and stays refused
    CHECK(pc::decode_knobs(lazy, "LS"));  // another class decodes as usual
    // The fact layer refuses a class whose lists were never decoded (never plans empty lists).
    TempDir t;
    FactState st(t.path + "/state");
    FactInput in;
    in.req = &r;
    in.dry_run = true;
    CHECK_THROWS_AS(resolve_facts(lazy.classes.at("BE"), in, st), std::logic_error);
    // Cut bytes: refused too.
    Policy cut;
    REQUIRE(pc::decode(pc::compile(parse_policy_toml(kMixedPolicy, "mixed.toml"), "k", false, 0), "k", &r, cut, nullptr) == pc::Decoded::Ok);
    REQUIRE(cut.classes.at("BE").knobs_pending());
    cut.packed_knobs.resize(cut.classes.at("BE").packed_end - 1);
    CHECK_FALSE(pc::decode_knobs(cut, "BE"));
    CHECK(cut.classes.at("BE").container.empty());
}

TEST_CASE("cache: an event whose class's knob lists do not decode reads the policy again and rebuilds the entry", "[cache]") {
    TempDir t;
    const std::string policy = t.path + "/policy.toml", cache = t.path + "/cache";
    spit(policy,
         "version = 1\n[settings]\ndefault_class = \"BE\"\n"
         "[[rules]]\nname = \"online\"\nclass = \"LS\"\nmatch.namespace = \"online\"\n"
         "[classes.LS.container]\ncpu_shares = 1024\n"
         "[classes.BE.container]\ncpu_shares = 2\noom_score_adj = 1000\n[classes.BE.pod]\ncpu_shares = 3\n");
    const std::string req = R"({"version":"0.1","state":"create","id":"c1","sandboxID":"s1","pid":123,)"
                            R"("spec":{"cgroupsPath":"/kubepods/besteffort/pod1/c1","annotations":{}}})";
    auto run = [&](const std::string& cache_dir, const std::string& tag) {
        Options o;
        o.policy = policy;
        o.policy_from_flag = true;
        o.cgroup_root = t.path + "/cg";
        o.proc_root = t.path + "/proc";
        o.resctrl_root = t.path + "/resctrl";
        o.sysfs_root = t.path + "/sys";
        o.state_dir = t.path + "/state-" + tag;
        o.cache_dir = cache_dir;
        o.last_good_dir_set = true;
        o.last_good_dir = "";
        o.layout = Layout::V1;
        int code = -1;
        std::string out = run_pipeline(Mode::Explain, o, req, code);
        CHECK(code == 0);
        return out;
    };
    const std::string want = run("", "nocache");
    CHECK(want.find("cpu.shares") != std::string::npos);
    CHECK(want.find("oom_score_adj") != std::string::npos);

    // The entry the file would get, but BE's second container knob names an unknown fact
    // (checksums right): stored as a settled (not racy) entry, so the event takes it as a hit.
    Policy p = load_policy_toml(policy);
    KnobSetting bad = p.classes.at("BE").container.back();
    bad.value.kind = KnobValue::Fact;
    bad.value.text = "no.such_fact";
    p.classes.at("BE").container.push_back(bad);
    struct stat st {};
    REQUIRE(stat(policy.c_str(), &st) == 0);
    const std::string name = pc::cache_file_name(policy), entry = cache + "/" + name;
    const std::string damaged = pc::compile(p, pc::cache_key(policy, st), false, 0);
    REQUIRE(pc::store_file(cache, name, damaged));
    Policy lazy;
    Request r;
    REQUIRE(pc::read_file(cache, name, pc::cache_key(policy, st), &r, lazy, nullptr) == pc::Decoded::Ok);

    // The event's class is BE: its lists do not decode, so the event loads the policy again,
    // which finds the entry damaged and rebuilds it from the TOML: same answer as without cache.
    CHECK(run(cache, "damaged") == want);
    CHECK(slurp_file(entry) != damaged);
    Policy again;
    CHECK(pc::read_file(cache, name, pc::cache_key(policy, st), nullptr, again, nullptr) != pc::Decoded::Invalid);
    // And with the rebuilt entry (a hit, decoded lazily) the answer is the same again.
    CHECK(run(cache, "rebuilt") == want);
}

TEST_CASE("cache: the Katalyst agent settings survive the flat form (format 10)", "[cache]") {
    Policy p = load_policy_toml(kBundled);
    CHECK_FALSE(p.katalyst_default_numa_exclusive);  // the bundled policy keeps the agents' defaults
    CHECK(p.katalyst_dedicated_default_burst == Policy::KatalystBurst::Unset);
    CHECK(p.katalyst_default_burst_percent == 100);
    p.katalyst_default_numa_exclusive = true;
    p.katalyst_dedicated_default_burst = Policy::KatalystBurst::Closed;
    p.katalyst_default_burst_percent = 35;
    Policy q;
    REQUIRE(pc::decode(pc::compile(p, "key", false, 1, "s"), "key", nullptr, q, nullptr) == pc::Decoded::Ok);
    CHECK(q.katalyst_default_numa_exclusive);
    CHECK(q.katalyst_dedicated_default_burst == Policy::KatalystBurst::Closed);
    CHECK(q.katalyst_default_burst_percent == 35);
}

TEST_CASE("cache: merge rules, pod_cpu_weight_formula, accept_merge and koordinator_quota_lift survive the flat form (format 5)", "[cache][merge]") {
    Policy p = load_policy_toml(kBundled);
    p.koordinator_quota_lift = Policy::QuotaLift::Fits;
    std::string blob = pc::compile(p, "key", false, 1, "s");
    Policy q;
    REQUIRE(pc::decode(blob, "key", nullptr, q, nullptr) == pc::Decoded::Ok);
    CHECK(dump(q) == dump(p));
    CHECK(q.koordinator_quota_lift == Policy::QuotaLift::Fits);
    CHECK(q.classes.at("KOORD-BE").pod_weight_formula_set);
    CHECK(q.classes.at("KOORD-BE").pod_weight_formula == WeightFormula::Linear);
    CHECK(q.classes.at("KOORD-BE").ctr_weight_formula_set);  // issue #32 §6: high nibble of the same byte
    CHECK(q.classes.at("KOORD-BE").ctr_weight_formula == WeightFormula::Linear);
    CHECK(!q.classes.at("KOORD-LSR").ctr_weight_formula_set);
    CHECK(!q.classes.at("SYSTEM").accept_merge);
    CHECK(q.classes.at("OFFLINE").accept_merge);
    size_t merges = 0;
    for (const auto& r : q.rules) merges += r.merge;
    CHECK(merges == 5);  // rubik-offline, volcano-be, openfuyao-be and its doc spelling, koordinator-cpuset
    // "never" (koordlet --disable-unset-cpu-quota) survives the flat form too
    p.koordinator_quota_lift = Policy::QuotaLift::Never;
    Policy n;
    REQUIRE(pc::decode(pc::compile(p, "key", false, 1, "s"), "key", nullptr, n, nullptr) == pc::Decoded::Ok);
    CHECK(n.koordinator_quota_lift == Policy::QuotaLift::Never);
    // One event's filtered decode: the merge rule is among the rules that can match, and the
    // merged class's lists decode on demand (pipeline.cpp), giving the same class as a full load.
    Request r = parse_v01_request([] {
        nlohmann::json j = nlohmann::json::parse(slurp_file(NRI_QOS_SRCDIR "/tests/fixtures/requests/containerd-1.6.20/container-create.json"));
        j["spec"]["cgroupsPath"] = "/kubepods/besteffort/pod0e2e0000-6edd-4127-830b-934cae53b469/f9159d083de2";
        j["labels"]["koordinator.sh/qosClass"] = "BE";
        j["spec"]["annotations"]["volcano.sh/qos-level"] = "BE";
        return j.dump();
    }());
    Policy f;
    REQUIRE(pc::decode(blob, "key", &r, f, nullptr) == pc::Decoded::Ok);
    Facts facts{&r, KubeQos::BestEffort};
    Decision d = classify(f, facts);
    REQUIRE(d.merges.size() == 1);
    CHECK(d.merges[0].note.empty());  // lists still encoded: not combined yet
    CHECK(!merge_classes(f, d));
    REQUIRE(pc::decode_knobs(f, d.cls->name));
    REQUIRE(pc::decode_knobs(f, d.merges[0].cls));
    REQUIRE(merge_classes(f, d));
    Decision full = classify(p, facts);
    CHECK(policy_to_json([&] {
              Policy x;
              x.default_class = "A";
              x.classes["A"] = *d.cls;
              return x;
          }())
              .dump() == policy_to_json([&] {
                             Policy x;
                             x.default_class = "A";
                             x.classes["A"] = *full.cls;
                             return x;
                         }())
                             .dump());
    CHECK(d.merge_text() == full.merge_text());
}
