// Unit tests of the one-shot hot path (issue 13): the SAX request reader keeps the DOM reader's
// contract (messages, their precedence, what is kept), the Result printers print exactly what
// dump_result() printed for the same Result object, and the allocation arena.
#include "../scratch.hpp"
#include <catch2/catch.hpp>

#include <ctime>
#include <functional>
#include <string>
#include <sys/wait.h>
#include <unistd.h>

#include "os/arena.hpp"

#include <sys/resource.h>
#include "records/metrics.hpp"
#include "event/publish.hpp"
#include "records/record.hpp"
#include "model/request.hpp"
#include "event/sinks.hpp"
#include "records/state.hpp"

using namespace nriqos;
using nlohmann::json;

namespace {

std::string error_of(const std::function<void()>& f) {
    try {
        f();
    } catch (const InputError& e) { return e.what(); }
    return "";
}

const char* kHead = R"({"version":"0.1","state":"create","id":"c1","sandboxID":"s1")";

std::string v01(const std::string& rest) { return std::string(kHead) + rest + "}"; }

}  // namespace

TEST_CASE("SAX reader: a document error wins over any field error", "[request][oneshot]") {
    // Field errors come first in document order; the document is still malformed.
    CHECK(error_of([] { parse_v01_request(R"({"version":1,"state":2,"id":)"); }).rfind("malformed JSON: parse error", 0) == 0);
    CHECK(error_of([] { parse_v01_request(R"({"version":1,"labels":{"a":2},"x":[)" + std::string(40, '[')); }) ==
          "JSON nested deeper than 32 levels");
    CHECK(error_of([] { parse_v01_request(R"({"version":1,"spec":{"cgroupsPath":5},"spec":{}})"); }) == "duplicate JSON key \"spec\"");
    CHECK(error_of([] { parse_nri_event(R"({"event":"Boom","pod":{"id":"x"}} [])"); }).rfind("malformed JSON", 0) == 0);
}

TEST_CASE("SAX reader: fields are checked in a fixed order, whatever the key order", "[request][oneshot]") {
    // version before state before id, whatever comes first in the document
    CHECK(error_of([] { parse_v01_request(R"({"id":"../x","state":"pwn","version":"0.2"})"); }).rfind("/version: unsupported", 0) == 0);
    CHECK(error_of([] { parse_v01_request(R"({"id":"../x","state":"pwn","version":"0.1"})"); }).rfind("/state: unknown state", 0) == 0);
    // labels before spec
    CHECK(error_of([] { parse_v01_request(v01(R"(,"spec":{"cgroupsPath":1},"labels":{"a":1})")); }) == "/labels/a: expected string, got integer");
    // several bad entries of one map: the first in key order (as the DOM's std::map met them)
    CHECK(error_of([] { parse_v01_request(v01(R"(,"labels":{"z":1,"m":null,"b":{},"k":"ok"})")); }) == "/labels/b: expected string, got object");
    CHECK(error_of([] { parse_v01_request(v01(R"(,"labels":{"z":"a\u0000b","b\nc":"x"})")); }) == "/labels/b?c: contains a control character");
    // a duplicate key in a map is a document error even when its first value was refused
    CHECK(error_of([] { parse_v01_request(v01(R"(,"labels":{"a":1,"a":"x"})")); }) == "duplicate JSON key \"a\"");
}

TEST_CASE("SAX reader: what is kept and what is only checked", "[request][oneshot]") {
    Request r = parse_v01_request(v01(R"(,"conf":{"policy":"/p.toml","x":[1,{"y":null}]},"spec":{"process":{"args":["a"]},)"
                                      R"("resources":{"devices":[{"allow":false}],"cpu":{"shares":512,"cpus":"0-1"}},"annotations":{"a":"b"}},)"
                                      R"("results":[{"plugin":"p"}],"labels":{"app":"x"},"unknown":{"deep":[[[]]]})"));
    CHECK(r.conf == json::parse(R"({"policy":"/p.toml","x":[1,{"y":null}]})"));
    CHECK(r.resources.cpu_shares == 512);
    CHECK(r.resources.cpu_cpus == std::string("0-1"));
    CHECK(r.annotations == std::map<std::string, std::string>{{"a", "b"}});
    CHECK(r.labels == std::map<std::string, std::string>{{"app", "x"}});
    // limits apply inside subtrees that are not read
    CHECK(error_of([] { parse_v01_request(v01(R"(,"unknown":{"a":1,"a":2})")); }) == "duplicate JSON key \"a\"");
    // NRI Go JSON wrappers: {} is 0 (omitempty), {"value":null} is absent, a bare number is accepted
    std::string ev = R"({"event":"CreateContainer","pod":{"id":"p1","pid":"junk","linux":{"resources":{"cpu":"junk"}}},)"
                     R"("container":{"id":"c1","linux":{"resources":{"cpu":{"shares":{},"quota":{"value":null},"period":100000}}}}})";
    Request e = parse_nri_event(ev);
    CHECK(e.resources.cpu_shares == 0);
    CHECK_FALSE(e.resources.cpu_quota.has_value());
    CHECK(e.resources.cpu_period == 100000);
    // ... and the pod's own pid and resources are not read for a container event (as before)
    CHECK_FALSE(e.is_sandbox);
    CHECK(error_of([] { parse_nri_event(R"({"event":"RunPodSandbox","pod":{"id":"p1","pid":"junk"}})"); }) == "/pod/pid: expected an integer");
}

namespace {

Plan sample_plan() {
    Plan p;
    Write a;
    a.knob = "cpu_shares";
    a.scope = "container";
    a.rel = "cpu/kubepods/besteffort/pod1/c1/cpu.shares";
    a.value = "2";
    a.status = Write::Applied;
    a.seq = 1;
    a.note = "written before cpu.cfs_quota_us";
    Write b = a;
    b.seq = 2;
    b.note.clear();
    b.knob = "oom_score_adj";
    b.root = Root::Proc;
    b.rel = "42/oom_score_adj";
    b.value = "1000";
    b.status = Write::Failed;
    b.reason = "EACCES: \"quoted\" and invalid UTF-8 \xff\xfe";
    Write c = a;
    c.knob = "raw:resctrl";
    c.scope = "pod";
    c.root = Root::Resctrl;
    c.rel = "BE/tasks";
    c.status = Write::Skipped;
    c.reason = "not present";
    c.seq = 0;
    p.writes = {a, b, c};
    p.adjustment = json::parse(R"({"linux":{"resources":{"cpu":{"shares":{"value":2}}}},"annotations":{"k":"v\n"}})");
    p.update = json::parse(R"({"cpu":{"shares":{"value":2}}})");
    return p;
}

json sample_metadata() {
    // Strings the plain-ASCII copy takes (short, long, empty) and ones it must leave to the
    // serializer: control bytes, DEL, quotes, backslashes, valid and invalid UTF-8.
    return {{"class", "BE"},
            {"applied", "cpu.shares=2"},
            {"n", 3},
            {"o", {{"a", 1}}},
            {"bad", std::string("\xff")},
            {"z", "tab\there"},
            {"empty", ""},
            {"skipped", "cpu_burst_us: fact volcano.cpu_burst_us absent: no volcano.sh/enable-quota-burst annotation (no burst) ~}{|"},
            {"quote", "a \"quoted\" path\\x"},
            {"ctl", std::string("nul\x01 del\x7f end", 14)},  // and its terminating NUL
            {"utf8", "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80"},
            {"cut", std::string("abcdefgh\xe2\x82", 10)}};
}

}  // namespace

TEST_CASE("Result printers: byte for byte what dump_result printed for the DOM", "[sinks][oneshot]") {
    Plan plan = sample_plan();
    Plan empty_adj = plan;
    empty_adj.adjustment = nullptr;
    Plan no_writes;
    for (const json& md : {sample_metadata(), json::object()}) {
        for (const Plan* p : std::initializer_list<const Plan*>{&plan, &empty_adj, &no_writes, nullptr}) {
            for (const std::string& err : {std::string(), std::string("nri-qos: bad request: /id: \"x\"")}) {
                // invoke (render's former DOM)
                json out = {{"plugin", "nri-qos"}, {"version", "0.1.0"}, {"error", err}, {"metadata", md}};
                if (p) {
                    out["adjustment"] = p->adjustment.is_null() ? json::object() : p->adjustment;
                    out["writes"] = writes_json(*p);
                }
                CHECK(dump_v01_result("0.1.0", err, md, p) == dump_result(out));
                // nri-eval
                for (bool closed : {false, true}) {
                    json ev = {{"error", err},
                               {"on_child_failure", closed ? "closed" : "open"},
                               {"adjustment", p ? p->adjustment : json(nullptr)},
                               {"update", p ? p->update : json(nullptr)},
                               {"metadata", md}};
                    if (p) ev["writes"] = writes_json(*p);
                    CHECK(dump_eval_result(err, closed, md, p) == dump_result(ev));
                }
            }
        }
    }
}

namespace {

/// What record_json() printed before it was DOM-free (an ordered_json of the same members).
std::string record_json_dom(const EventRecord& r) {
    nlohmann::ordered_json j;
    j["time"] = rfc3339_utc(r.time_ns);
    j["level"] = r.policy_error.empty() && (r.outcome.empty() || r.outcome == "ok" || r.outcome == "gone") ? "info" : "warn";
    auto put = [&](const char* k, const std::string& v) {
        if (!v.empty()) j[k] = v;
    };
    put("source", r.source);
    put("event", r.event);
    put("namespace", r.ns);
    put("pod", r.pod);
    put("container", r.container);
    put("id", r.id);
    put("sandbox_id", r.sandbox_id);
    if (r.sandbox) j["sandbox"] = true;
    put("class", r.cls);
    put("rule", r.rule);
    put("outcome", r.outcome);
    put("failure", r.failure);
    put("fail_mode", r.fail_mode);
    if (r.duration_us >= 0) j["duration_us"] = r.duration_us;
    put("applied", r.applied);
    put("skipped", r.skipped);
    put("failed", r.failed);
    put("drift", r.drift);
    put("policy", r.policy);
    put("policy_sha256", r.policy_sha256);
    put("policy_error", r.policy_error);
    put("message", r.message);
    return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

/// What record_logfmt() printed before its appends were batched (one append per character or
/// piece, snprintf for \xHH): the reference its bytes are held to.
std::string record_logfmt_ref(const EventRecord& r) {
    auto kv = [](std::string& out, const char* key, const std::string& v) {
        if (v.empty()) return;
        out += ' ';
        out += key;
        out += '=';
        bool quote = false;
        for (unsigned char ch : v) quote = quote || ch <= ' ' || ch == '=' || ch == '"' || ch == '\\' || ch == 0x7f;
        if (!quote) {
            out += v;
            return;
        }
        out += '"';
        for (unsigned char ch : v) {
            if (ch == '"' || ch == '\\') {
                out += '\\';
                out += static_cast<char>(ch);
            } else if (ch == '\n') {
                out += "\\n";
            } else if (ch < ' ' || ch == 0x7f) {
                char b[8];
                snprintf(b, sizeof b, "\\x%02x", ch);
                out += b;
            } else {
                out += static_cast<char>(ch);
            }
        }
        out += '"';
    };
    std::string s = "nri-qos:";
    kv(s, "time", rfc3339_utc(r.time_ns));
    kv(s, "level", r.policy_error.empty() && (r.outcome.empty() || r.outcome == "ok" || r.outcome == "gone") ? "info" : "warn");
    kv(s, "source", r.source);
    kv(s, "event", r.event);
    kv(s, "ns", r.ns);
    kv(s, "pod", r.pod);
    kv(s, "container", r.container);
    kv(s, "id", r.id.substr(0, 12));
    if (r.sandbox) kv(s, "sandbox", "true");
    kv(s, "class", r.cls);
    kv(s, "rule", r.rule);
    kv(s, "outcome", r.outcome);
    kv(s, "failure", r.failure);
    kv(s, "fail_mode", r.fail_mode);
    if (r.duration_us >= 0) kv(s, "duration_us", std::to_string(r.duration_us));
    kv(s, "applied", r.applied);
    kv(s, "skipped", r.skipped);
    kv(s, "failed", r.failed);
    kv(s, "drift", r.drift);
    kv(s, "policy", r.policy);
    kv(s, "policy_error", r.policy_error);
    kv(s, "msg", r.message);
    s += '\n';
    return s;
}

/// What make_last_request() printed before it was DOM-free.
std::string last_request_dom(const EventOutcome& o, const EventRecord& r) {
    nlohmann::ordered_json j;
    j["v"] = 1;
    j["time"] = rfc3339_utc(r.time_ns);
    j["source"] = r.source;
    j["event"] = r.event;
    j["id"] = r.id;
    j["sandbox_id"] = r.sandbox_id;
    j["sandbox"] = r.sandbox;
    j["namespace"] = r.ns;
    j["pod"] = r.pod;
    j["container"] = r.container;
    j["class"] = r.cls;
    j["rule"] = r.rule;
    j["outcome"] = r.outcome;
    j["options"] = {{"policy", o.policy_path},
                    {"cgroup_root", o.cgroup_root},
                    {"proc_root", o.proc_root},
                    {"resctrl_root", o.resctrl_root},
                    {"layout", o.layout}};
    j["writes"] = o.plan ? writes_json(*o.plan) : json::array();
    std::string head = j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    head.pop_back();
    if (o.input.size() + head.size() + 16 > StateDir::kMaxLastBytes)
        return head + ",\"request\":null,\"request_dropped\":\"larger than the state limit\"}\n";
    return head + ",\"request\":" + std::string(o.input) + "}\n";
}

}  // namespace

TEST_CASE("JsonPrinter: a string is what the serializer prints, on the plain-ASCII shortcut and off it", "[record][oneshot]") {
    std::vector<std::string> cases = {"",      "plain /path/x.y",   "a\"b",    "back\\slash", "del\x7f",
                                      "tab\t", "\xc3\xa9t\xc3\xa9", "bad\xff", "\xe2\x82",    "\x01"};
    for (int c = 0; c < 256; ++c) cases.push_back(std::string("x") + static_cast<char>(c) + "y");
    // every byte value at every position of a string of two 8-byte words and a tail (the word test)
    for (int c = 0; c < 256; ++c)
        for (size_t at = 0; at < 19; ++at) {
            std::string v(19, 'a');
            v[at] = static_cast<char>(c);
            cases.push_back(v);
        }
    cases.push_back(std::string(16, '\x7e') + "\x7f");
    cases.push_back(std::string(8, '\xff') + std::string(8, '\x7e'));
    for (const std::string& v : cases) {
        std::string out;
        JsonPrinter p(out);
        p.str(v);
        CHECK(out == json(v).dump(-1, ' ', false, json::error_handler_t::replace));
    }
}

TEST_CASE("record_logfmt / record_json: every byte value in every position of a value", "[record][oneshot]") {
    std::vector<std::string> cases = {"", "plain", "a b", "a=b", "\"", "\\", "\n", "\x7f", "\xc3\xa9", "\xff", "x\"y\\z\n\x01 w"};
    for (int c = 0; c < 256; ++c) {
        std::string ch(1, static_cast<char>(c));
        for (const std::string& v : {ch, "ab" + ch, ch + "ab", "a" + ch + "b" + ch}) cases.push_back(v);
        for (size_t at = 0; at < 19; ++at) {  // every position of two 8-byte words and a tail (the word test)
            std::string w(19, 'a');
            w[at] = static_cast<char>(c);
            cases.push_back(w);
        }
    }
    cases.push_back(std::string(8, '\xff') + std::string(8, '\x7e') + "=");
    for (const std::string& v : cases) {
        EventRecord r;
        r.time_ns = 1763900000123456789;
        r.source = "invoke";
        r.pod = v;
        r.message = v;
        r.id = v + v + v + v + v + v + v + v + v + v + v + v + v;  // cut at 12 bytes in the logfmt form
        CHECK(record_logfmt(r) == record_logfmt_ref(r));
        CHECK(record_json(r) == record_json_dom(r));
    }
}

TEST_CASE("rfc3339_utc: the digits snprintf printed from gmtime_r (its own calendar arithmetic)", "[record][oneshot]") {
    uint64_t x = 88172645463325252ull;
    // leap days (2000, 2024), the non-leap 2100 around 28 February, year ends
    std::vector<int64_t> ns = {1,
                               999,
                               1000,
                               999999999,
                               1000000000,
                               951782400000000000,
                               1709164800000000000,
                               1709251199999999999,
                               1763900000123456789,
                               4102444799999999999,
                               4107456000000000000,
                               4107542399999999999,
                               4107542400000000000,
                               9223372036000000000 /* 2262-04-11, the last second of int64 ns */};
    for (int i = 0; i < 2000; ++i) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        ns.push_back(static_cast<int64_t>(x % 4102444800000000000ull) + 1);
        ns.push_back(static_cast<int64_t>(x % 9223372036854775807ull) + 1);  // any time an int64 of ns can hold
    }
    for (int64_t t : ns) {
        time_t s = static_cast<time_t>(t / 1000000000);
        struct tm tm {};
        gmtime_r(&s, &tm);
        char want[96];
        snprintf(want, sizeof want, "%04d-%02d-%02dT%02d:%02d:%02d.%06dZ", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min,
                 tm.tm_sec, static_cast<int>((t % 1000000000) / 1000));
        CHECK(rfc3339_utc(t) == want);
    }
}

TEST_CASE("Event record and last request printers: byte for byte what their DOMs printed", "[record][oneshot]") {
    Plan plan = sample_plan();
    EventRecord full;
    full.time_ns = 1763900000123456789;
    full.source = "invoke";
    full.event = "CreateContainer";
    full.ns = "default";
    full.pod = "p\"o\\d\n\x01";
    full.container = "bad \xff\xfe utf-8";
    full.id = "f9159d083de20134b90778a5c6d8ee69ecb3b500f2ef34976b11b59554b7bc8e";
    full.sandbox_id = "97f836f7";
    full.cls = "LS";
    full.rule = "kube-burstable";
    full.outcome = "ok";
    full.duration_us = 1234;
    full.applied = "cpu.shares=2 memory.high=60397977";
    full.skipped = "cpu_burst_us: no quota";
    full.failed = "oom_score_adj: EACCES";
    full.drift = "cpu_shares";
    full.policy = "file";
    full.policy_sha256 = "66b05a77";
    full.policy_error = "/etc/nri/x.toml:3: \u00e9 \xc3";
    full.message = "deadline \t exceeded /x\x7f";
    EventRecord sandbox = full;
    sandbox.sandbox = true;
    sandbox.duration_us = 0;
    sandbox.outcome = "refused";
    EventRecord empty;
    empty.time_ns = 1;
    empty.duration_us = -1;
    EventRecord relay = full;  // the relay's failure fields
    relay.source = "relay";
    relay.outcome = "failed";
    relay.failure = "timeout";
    relay.fail_mode = "open";
    relay.id = "short";
    for (const EventRecord* r : {&full, &sandbox, &empty, &relay}) {
        CHECK(record_json(*r) == record_json_dom(*r));
        CHECK(record_logfmt(*r) == record_logfmt_ref(*r));
        std::string big(StateDir::kMaxLastBytes, ' ');
        for (const std::string& input : {std::string(R"({"version":"0.1","id":"c1"})"), big}) {
            for (const Plan* p : std::initializer_list<const Plan*>{&plan, nullptr}) {
                EventOutcome o;
                o.plan = p;
                o.input = input;
                o.policy_path = "/etc/nri/nri-qos.toml";
                o.cgroup_root = "/sys/fs/cgroup";
                o.proc_root = "/proc\xff";
                o.layout = "v1";
                CHECK(make_last_request(o, *r) == last_request_dom(o, *r));
            }
        }
    }
}

TEST_CASE("arena: bump allocation, newest block given back, malloc beyond it", "[arena][oneshot]") {
    // In a child: enable() is for the whole (single-threaded) process.
    pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
        int bad = 0;
        auto expect = [&](bool ok) { bad += ok ? 0 : 1; };
        void* before = ::operator new(32);
        expect(!arena::contains(before));
        arena::enable();
        size_t u0 = arena::used();
        void* a = ::operator new(10);
        expect(arena::contains(a) && reinterpret_cast<uintptr_t>(a) % 16 == 0 && arena::used() == u0 + 16);
        void* z1 = ::operator new(0);
        void* z2 = ::operator new(0);
        expect(z1 != z2);
        ::operator delete (z2, size_t{0});  // the newest: given back
        ::operator delete (z1, size_t{0});
        expect(arena::used() == u0 + 16);
        ::operator delete(a);  // unsized: not given back, harmless
        expect(arena::used() == u0 + 16);
        void* big = ::operator new(arena::kBytes);  // does not fit: malloc
        expect(!arena::contains(big));
        ::operator delete(big);
        ::operator delete(before);  // malloc'd before enable(): freed by free()
        std::string s(100000, 'x');  // containers work across the switch
        s += std::string(300000, 'y');
        expect(s.size() == 400000);
        _exit(bad);
    }
    int st = 0;
    REQUIRE(waitpid(pid, &st, 0) == pid);
    REQUIRE(WIFEXITED(st));
    CHECK(WEXITSTATUS(st) == 0);
}

namespace {
// Frames below the caller's, as the evaluation's are below the spare's evaluate_one.
__attribute__((noinline)) void write_stack_32k() {
    volatile char pad[32 << 10];
    for (size_t i = 0; i < sizeof pad; i += 512) pad[i] = 1;
}
}  // namespace

TEST_CASE("arena: prefault maps the arena, the stack and the hot code before the event", "[arena][oneshot][page-faults]") {
    // Page faults of a child (a spare evaluator's situation: the arena untouched) writing 64 KiB
    // of arena blocks and 32 KiB of stack, with and without prefault(). Counts, not times.
    auto faults_of = [](bool warm) {
        int p[2];
        REQUIRE(pipe(p) == 0);
        pid_t pid = fork();
        REQUIRE(pid >= 0);
        if (pid == 0) {
            arena::enable();
            if (warm) arena::prefault(96u << 10);
            struct rusage a {
            }, b{};
            getrusage(RUSAGE_SELF, &b);  // its code and the vDSO are mapped (not what is measured)
            getrusage(RUSAGE_SELF, &a);
            for (int i = 0; i < 64; ++i) {
                char* blk = static_cast<char*>(::operator new(1024));
                std::memset(blk, i, 1024);
            }
            write_stack_32k();
            getrusage(RUSAGE_SELF, &b);
            long n = b.ru_minflt - a.ru_minflt;
            ssize_t w = write(p[1], &n, sizeof n);
            _exit(w == ssize_t(sizeof n) ? 0 : 1);
        }
        close(p[1]);
        long n = -1;
        CHECK(read(p[0], &n, sizeof n) == ssize_t(sizeof n));
        close(p[0]);
        int st = 0;
        waitpid(pid, &st, 0);
        return n;
    };
    long cold = faults_of(false), warm = faults_of(true);
    INFO("page faults writing 64 KiB of arena + 32 KiB of stack: cold " << cold << ", after prefault " << warm);
    CHECK(cold >= 16);  // one per fresh page at least
    CHECK(warm <= 2);
}

TEST_CASE("Deadline record: each stage's lines are record_logfmt/record_json of what the stage knows, in the slot given", "[record][oneshot]") {
    // The stages of an event as pipeline.cpp prepares them: unparsed, request, policy (and the
    // memo filling the namespace), class; then a policy error, another record path, no event log.
    EventRecord st;
    st.time_ns = 1763900000123456789;
    st.source = "invoke";
    st.event = "unparsed";
    SinkPaths paths;
    paths.metrics_file = "/var/lib/node_exporter/textfile_collector/nri_qos.prom";
    paths.event_log = "/var/log/nri-qos/events.log";
    int slot = 0;
    auto stage = [&](const EventRecord& in, const SinkPaths& p, bool closed, const char* what) {
        INFO(what);
        slot = 1 - slot;
        DeadlineRecordText before = deadline_record_text(1 - slot);
        prepare_deadline_record(in, p, 300000, closed, slot);
        EventRecord want = in;
        want.outcome = closed ? "refused" : "error";
        want.duration_us = 300000;
        want.message = closed ? "deadline exceeded: fail-closed, container refused; knobs may be partly applied"
                              : "deadline exceeded: nri-qos gave up (fail-open); knobs may be partly applied";
        DeadlineRecordText t = deadline_record_text(slot);
        CHECK(t.ready);
        CHECK(t.stderr_line == record_logfmt(want));
        CHECK(t.log_line == (p.event_log.empty() ? "" : record_json(want)));
        CHECK(t.log_path == p.event_log);
        CHECK(t.pending_line == metrics_pending_line(in.event, in.cls, want.outcome, 300000, !in.policy_error.empty()));
        std::string pend;
        if (!p.metrics_file.empty())
            pend = dir_name(p.metrics_file) + "/." + p.metrics_file.substr(p.metrics_file.find_last_of('/') + 1) + ".pending";
        CHECK(t.pending_path == pend);
        // The other slot (the one the handler may be reading) is left as it was.
        DeadlineRecordText after = deadline_record_text(1 - slot);
        CHECK(after.ready == before.ready);
        CHECK(after.stderr_line == before.stderr_line);
        CHECK(after.log_line == before.log_line);
    };
    stage(st, paths, false, "unparsed");
    st.event = "create";
    st.pod = "web \"1\"";
    st.container = "app";
    st.id = "f9159d083de20134b90778a5c6d8ee69ecb3b500f2ef34976b11b59554b7bc8e";
    st.sandbox_id = "97f836f7";
    stage(st, paths, false, "request");
    st.ns = "prod";  // the sandbox memo filled it in
    st.policy = "file";
    st.policy_sha256 = "66b05a77";
    stage(st, paths, true, "policy, fail-closed");
    st.cls = "LS";
    stage(st, paths, false, "class, fail-open");
    stage(st, paths, true, "class, fail-closed");
    st.policy = "last-good";
    st.policy_error = "/etc/nri/nri-qos.toml:3: bad \xff";
    stage(st, paths, true, "policy error");
    st.sandbox = true;
    st.time_ns = 1763900000999999999;
    SinkPaths other;
    other.metrics_file = "/run/m/x.prom";
    stage(st, other, true, "no event log, another metrics file");
    stage(st, paths, false, "back");
}

namespace {
// update_metrics' files, byte for byte as the code before issue 13's round 4 printed them (its
// output for these inputs was captured from that build): a state with every kind of line, then
// (2) with a pending queue, an event and a policy identity (the T line and the last-event gauge,
// which hold the time of the call, left out).
const char* const kStateIn = R"__(nri-qos-metrics 1
E	create	LS	ok	41
E	create	none	error	3
E	RunPodSandbox	BE "x\\y"	partial	7
E	bad	line
K	cpu.shares	2
K	pod:cpu.idle	1
D	memory.high	5
R	CreateContainer	timeout	4
R	StopPodSandbox	crash	1
H	123456789	52	1	2	3	4	5	6	7	8	9	0	1	2	3	1
P	3
T	1763900000
I	/etc/nri/nri-qos.toml	file	abcdef0123
X	unknown
)__";
const char* const kGoldenProm = R"__(# HELP nri_qos_events_total Pod sandbox/container events handled by nri-qos, by event, QoS class and outcome.
# TYPE nri_qos_events_total counter
nri_qos_events_total{event="RunPodSandbox",class="BE \"x\\\\y\"",outcome="partial"} 7
nri_qos_events_total{event="create",class="LS",outcome="ok"} 41
nri_qos_events_total{event="create",class="none",outcome="error"} 3
# HELP nri_qos_knob_failures_total Knob writes that failed, by policy knob.
# TYPE nri_qos_knob_failures_total counter
nri_qos_knob_failures_total{knob="cpu.shares"} 2
nri_qos_knob_failures_total{knob="pod:cpu.idle"} 1
# HELP nri_qos_drift_corrected_total Knob values nri-qos reconcile found changed and wrote back, by policy knob.
# TYPE nri_qos_drift_corrected_total counter
nri_qos_drift_corrected_total{knob="memory.high"} 5
# HELP nri_qos_relay_failures_total Events the native NRI relay failed itself (evaluator crashed, killed or timed out, request refused), by event and reason.
# TYPE nri_qos_relay_failures_total counter
nri_qos_relay_failures_total{event="CreateContainer",reason="timeout"} 4
nri_qos_relay_failures_total{event="StopPodSandbox",reason="crash"} 1
# HELP nri_qos_adjustment_rejected_total Containers nri-qos adjusted that the runtime removed without starting them (another NRI plugin set the same field), by that plugin ("unknown" when the runtime's log did not name it).
# TYPE nri_qos_adjustment_rejected_total counter
# HELP nri_qos_event_duration_seconds Time one nri-qos invocation took, from start to its result.
# TYPE nri_qos_event_duration_seconds histogram
nri_qos_event_duration_seconds_bucket{le="0.00025"} 1
nri_qos_event_duration_seconds_bucket{le="0.0005"} 3
nri_qos_event_duration_seconds_bucket{le="0.001"} 6
nri_qos_event_duration_seconds_bucket{le="0.002"} 10
nri_qos_event_duration_seconds_bucket{le="0.005"} 15
nri_qos_event_duration_seconds_bucket{le="0.01"} 21
nri_qos_event_duration_seconds_bucket{le="0.025"} 28
nri_qos_event_duration_seconds_bucket{le="0.05"} 36
nri_qos_event_duration_seconds_bucket{le="0.1"} 45
nri_qos_event_duration_seconds_bucket{le="0.25"} 45
nri_qos_event_duration_seconds_bucket{le="0.5"} 46
nri_qos_event_duration_seconds_bucket{le="1"} 48
nri_qos_event_duration_seconds_bucket{le="2.5"} 51
nri_qos_event_duration_seconds_bucket{le="+Inf"} 52
nri_qos_event_duration_seconds_sum 123.456789
nri_qos_event_duration_seconds_count 52
# HELP nri_qos_policy_info Policy in force at the last event: sha256 of its text, source (file, builtin, last-good).
# TYPE nri_qos_policy_info gauge
nri_qos_policy_info{sha256="abcdef0123",source="file",path="/etc/nri/nri-qos.toml"} 1
# HELP nri_qos_policy_errors_total Events at which the configured policy file was broken (its last good copy or the built-in policy applied).
# TYPE nri_qos_policy_errors_total counter
nri_qos_policy_errors_total 3
# HELP nri_qos_last_event_timestamp_seconds Unix time of the last event recorded.
# TYPE nri_qos_last_event_timestamp_seconds gauge
nri_qos_last_event_timestamp_seconds 1763900000
)__";
const char* const kGoldenState = R"__(nri-qos-metrics 1
E	RunPodSandbox	BE "x\\y"	partial	7
E	create	LS	ok	41
E	create	none	error	3
K	cpu.shares	2
K	pod:cpu.idle	1
D	memory.high	5
R	CreateContainer	timeout	4
R	StopPodSandbox	crash	1
H	123456789	52	1	2	3	4	5	6	7	8	9	0	1	2	3	1
P	3
T	1763900000
I	/etc/nri/nri-qos.toml	file	abcdef0123
)__";
const char* const kGolden2Prom = R"__(# HELP nri_qos_events_total Pod sandbox/container events handled by nri-qos, by event, QoS class and outcome.
# TYPE nri_qos_events_total counter
nri_qos_events_total{event="RunPodSandbox",class="BE \"x\\\\y\"",outcome="partial"} 7
nri_qos_events_total{event="StartContainer",class="none",outcome="refused"} 1
nri_qos_events_total{event="create",class="L\"S",outcome="partial"} 1
nri_qos_events_total{event="create",class="LS",outcome="ok"} 42
nri_qos_events_total{event="create",class="none",outcome="error"} 3
# HELP nri_qos_knob_failures_total Knob writes that failed, by policy knob.
# TYPE nri_qos_knob_failures_total counter
nri_qos_knob_failures_total{knob="a\\b"} 1
nri_qos_knob_failures_total{knob="cpu.shares"} 4
nri_qos_knob_failures_total{knob="pod:cpu.idle"} 1
# HELP nri_qos_drift_corrected_total Knob values nri-qos reconcile found changed and wrote back, by policy knob.
# TYPE nri_qos_drift_corrected_total counter
nri_qos_drift_corrected_total{knob="memory.high"} 5
nri_qos_drift_corrected_total{knob="x"} 1
# HELP nri_qos_relay_failures_total Events the native NRI relay failed itself (evaluator crashed, killed or timed out, request refused), by event and reason.
# TYPE nri_qos_relay_failures_total counter
nri_qos_relay_failures_total{event="CreateContainer",reason="timeout"} 4
nri_qos_relay_failures_total{event="StartContainer",reason="crash"} 1
nri_qos_relay_failures_total{event="StopPodSandbox",reason="crash"} 1
# HELP nri_qos_adjustment_rejected_total Containers nri-qos adjusted that the runtime removed without starting them (another NRI plugin set the same field), by that plugin ("unknown" when the runtime's log did not name it).
# TYPE nri_qos_adjustment_rejected_total counter
# HELP nri_qos_event_duration_seconds Time one nri-qos invocation took, from start to its result.
# TYPE nri_qos_event_duration_seconds histogram
nri_qos_event_duration_seconds_bucket{le="0.00025"} 1
nri_qos_event_duration_seconds_bucket{le="0.0005"} 4
nri_qos_event_duration_seconds_bucket{le="0.001"} 7
nri_qos_event_duration_seconds_bucket{le="0.002"} 11
nri_qos_event_duration_seconds_bucket{le="0.005"} 16
nri_qos_event_duration_seconds_bucket{le="0.01"} 22
nri_qos_event_duration_seconds_bucket{le="0.025"} 29
nri_qos_event_duration_seconds_bucket{le="0.05"} 37
nri_qos_event_duration_seconds_bucket{le="0.1"} 46
nri_qos_event_duration_seconds_bucket{le="0.25"} 46
nri_qos_event_duration_seconds_bucket{le="0.5"} 48
nri_qos_event_duration_seconds_bucket{le="1"} 50
nri_qos_event_duration_seconds_bucket{le="2.5"} 54
nri_qos_event_duration_seconds_bucket{le="+Inf"} 55
nri_qos_event_duration_seconds_sum 124.991656
nri_qos_event_duration_seconds_count 55
# HELP nri_qos_policy_info Policy in force at the last event: sha256 of its text, source (file, builtin, last-good).
# TYPE nri_qos_policy_info gauge
nri_qos_policy_info{sha256="0123abcd",source="last-good",path="/etc/p \"q\".toml"} 1
# HELP nri_qos_policy_errors_total Events at which the configured policy file was broken (its last good copy or the built-in policy applied).
# TYPE nri_qos_policy_errors_total counter
nri_qos_policy_errors_total 5
# HELP nri_qos_last_event_timestamp_seconds Unix time of the last event recorded.
# TYPE nri_qos_last_event_timestamp_seconds gauge
)__";
const char* const kGolden2State = R"__(nri-qos-metrics 1
E	RunPodSandbox	BE "x\\y"	partial	7
E	StartContainer	none	refused	1
E	create	L"S	partial	1
E	create	LS	ok	42
E	create	none	error	3
K	a\b	1
K	cpu.shares	4
K	pod:cpu.idle	1
D	memory.high	5
D	x	1
R	CreateContainer	timeout	4
R	StartContainer	crash	1
R	StopPodSandbox	crash	1
H	124991656	55	1	3	3	4	5	6	7	8	9	0	2	2	4	1
P	5
I	/etc/p "q".toml	last-good	0123abcd
)__";

std::string slurp_file(const std::string& p) {
    std::string s;
    FILE* f = fopen(p.c_str(), "rb");
    if (!f) return s;
    char b[4096];
    size_t n;
    while ((n = fread(b, 1, sizeof b, f)) > 0) s.append(b, n);
    fclose(f);
    return s;
}
void spit_file(const std::string& p, const std::string& text) {
    FILE* f = fopen(p.c_str(), "wb");
    REQUIRE(f);
    fwrite(text.data(), 1, text.size(), f);
    fclose(f);
}
std::string without_time(const std::string& text) {
    std::string out;
    size_t a = 0;
    while (a < text.size()) {
        size_t b = text.find('\n', a);
        b = b == std::string::npos ? text.size() : b + 1;
        std::string line = text.substr(a, b - a);
        a = b;
        if (line.rfind("T\t", 0) == 0 || line.rfind("nri_qos_last_event_timestamp_seconds ", 0) == 0) continue;
        out += line;
    }
    return out;
}
}  // namespace

TEST_CASE("update_metrics: state file and textfile byte for byte as before (every kind of line, pending queue, escaping)", "[metrics][oneshot]") {
    unit::ScratchDir scratch("metrics-golden");
    const std::string d = scratch.path;
    spit_file(d + "/.m.prom.state", kStateIn);
    REQUIRE(update_metrics(d + "/m.prom", {}, {}) == "");
    CHECK(slurp_file(d + "/m.prom") == kGoldenProm);
    CHECK(slurp_file(d + "/.m.prom.state") == kGoldenState);
    spit_file(d + "/.m.prom.state", kStateIn);
    spit_file(d + "/.m.prom.pending", "E\tcreate\tLS\tok\t300\nK\tcpu.shares\nD\tx\nE\tStartContainer\tnone\trefused\t300000\tP\nR\tcrash\nE\tbad\n");
    MetricsEvent e;
    e.event = "create";
    e.cls = "L\"S";
    e.outcome = "partial";
    e.duration_us = 1234567;
    e.failed_knobs = {"cpu.shares", "a\\b"};
    e.policy_error = true;
    REQUIRE(update_metrics(d + "/m.prom", {e}, {"/etc/p \"q\".toml", "last-good", "0123abcd"}) == "");
    CHECK(without_time(slurp_file(d + "/m.prom")) == kGolden2Prom);
    CHECK(without_time(slurp_file(d + "/.m.prom.state")) == kGolden2State);
    CHECK(slurp_file(d + "/.m.prom.pending").empty());
}
