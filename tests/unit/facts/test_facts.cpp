// Unit tests of the facts (issue #10 §1, §2): the annotation readers with the Go semantics they
// reproduce, the CPU-set type, NUMA placement on scratch sysfs and cgroup trees, the fact state
// (records, ledger), resolution of a class's fact knobs per event, and the policy syntax.
#include "../scratch.hpp"
#include <catch2/catch.hpp>

#include <cstdlib>
#include <fstream>
#include <functional>
#include <set>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "os/cpuset.hpp"
#include "event/detect.hpp"
#include "facts/fact_readers.hpp"
#include "facts/fact_state.hpp"
#include "facts/facts.hpp"
#include "os/kernel.hpp"
#include "facts/numa.hpp"
#include "policy/policy.hpp"
#include "policy/policy_cache.hpp"
#include "event/replay.hpp"
#include "model/request.hpp"
#include "event/sinks.hpp"

using namespace nriqos;
using nlohmann::json;

namespace {

/// A scratch tree of its own for each test (tests/unit/scratch.hpp).
struct Tmp : unit::ScratchDir {
    Tmp() : ScratchDir("facts-test") {}
};

std::string slurp(const std::string& p) {
    std::ifstream in(p);
    REQUIRE(in.good());
    return std::string(std::istreambuf_iterator<char>(in), {});
}

std::string error_of(const std::function<void()>& f) {
    try {
        f();
    } catch (const InputError& e) { return e.what(); }
    return "";
}

std::optional<int64_t> qty(const char* s) {
    std::string why;
    return parse_quantity(s, &why);
}

/// A scratch sysfs with NUMA nodes {id: cpulist} and CPUs `online`.
void make_sysfs(const Tmp& t, const std::string& online, const std::map<int, std::string>& nodes, bool smt = false) {
    t.put("sys/devices/system/cpu/online", online + "\n");
    std::string ids;
    for (const auto& [id, cpus] : nodes) {
        t.put("sys/devices/system/node/node" + std::to_string(id) + "/cpulist", cpus + "\n");
        ids += (ids.empty() ? "" : ",") + std::to_string(id);
    }
    t.put("sys/devices/system/node/online", ids + "\n");
    if (smt) {  // siblings: (0,1) (2,3) ...
        for (unsigned c : CpuSet::parse(online)->ids())
            t.put("sys/devices/system/cpu/cpu" + std::to_string(c) + "/topology/thread_siblings_list",
                  std::to_string(c & ~1u) + "-" + std::to_string((c & ~1u) + 1) + "\n");
    }
}

}  // namespace

// ---- readers ----------------------------------------------------------------------------------

TEST_CASE("Quantity: apimachinery ParseQuantity + Value() (rounded up)", "[facts][readers]") {
    CHECK(qty("1k") == 1000);
    CHECK(qty("1000") == 1000);
    CHECK(qty("25") == 25);
    CHECK(qty("3456Mi") == 3623878656);
    CHECK(qty("128Mi") == 134217728);
    CHECK(qty("1.5") == 2);
    CHECK(qty("1.001") == 2);
    CHECK(qty("500m") == 1);
    CHECK(qty("1500m") == 2);
    CHECK(qty("1e3") == 1000);
    CHECK(qty("1E3") == 1000);
    CHECK(qty("15e-1") == 2);
    CHECK(qty("1.5Gi") == 1610612736);
    CHECK(qty("0.5Ki") == 512);
    CHECK(qty("0.0001Ki") == 1);  // 0.1024 rounds up
    CHECK(qty("+5") == 5);
    CHECK(qty(".5") == 1);
    CHECK(qty("5.") == 5);
    CHECK(qty("0") == 0);
    CHECK(qty("-1") == -1);
    CHECK(qty("-0.5") == 0);  // ceil(-0.5)
    CHECK(qty("-1.5Ki") == -1536);
    CHECK(qty("2Ei") == (int64_t(1) << 61));
    CHECK(qty("4611686018427387904") == (int64_t(1) << 62));
    CHECK(qty("000000000000000000000000000000000000001k") == 1000);
    for (const char* bad : {"", "abc", "1x", "1Ki2", "Ki", "1..5", "1e", "1e99999", "8Ei", "4611686018427387905", "1 k", "--1",
                            "12345678901234567890123456789012345678901234567890123456789012345"}) {
        INFO(bad);
        CHECK_FALSE(qty(bad));
    }
    std::string why;
    CHECK_FALSE(parse_quantity("1x", &why));
    CHECK(why == "quantity \"1x\": unknown suffix \"x\" (Ki Mi Gi Ti Pi Ei, m k M G T P E, or e<N>)");
    CHECK_FALSE(parse_quantity("0.0000000000000000001Ki", &why));
    CHECK(why.find("fraction digits") != std::string::npos);
}

TEST_CASE("Quantity from JSON: string, number, null (Quantity.UnmarshalJSON)", "[facts][readers]") {
    std::string why;
    CHECK(quantity_from_json(json(nullptr), &why) == 0);
    CHECK(quantity_from_json(json(1000), &why) == 1000);
    CHECK(quantity_from_json(json(" 25 "), &why) == 25);
    CHECK(quantity_from_json(json(1.5), &why) == 2);
    CHECK_FALSE(quantity_from_json(json(true), &why));
    CHECK(why == "quantity: expected a string or a number, got boolean");
    CHECK_FALSE(quantity_from_json(json(uint64_t(1) << 63), &why));
}

TEST_CASE("Go strconv.ParseBool and ParseInt", "[facts][readers]") {
    for (const char* t : {"1", "t", "T", "TRUE", "true", "True"}) CHECK(go_parse_bool(t) == true);
    for (const char* f : {"0", "f", "F", "FALSE", "false", "False"}) CHECK(go_parse_bool(f) == false);
    for (const char* x : {"", "yes", "tRUE", " true", "2"}) CHECK_FALSE(go_parse_bool(x));
    CHECK(go_parse_int("200000") == 200000);
    CHECK(go_parse_int("+5") == 5);
    CHECK(go_parse_int("-9223372036854775808") == INT64_MIN);
    CHECK(go_parse_int("9223372036854775807") == INT64_MAX);
    for (const char* x : {"", "9223372036854775808", "1.5", " 1", "1 ", "0x10", "-", "1e3"}) CHECK_FALSE(go_parse_int(x));
}

TEST_CASE("koordlet MilliCPUToShares and MilliCPUToQuota", "[facts][readers]") {
    CHECK(milli_cpu_to_shares(0) == 2);
    CHECK(milli_cpu_to_shares(-5) == 2);
    CHECK(milli_cpu_to_shares(1) == 2);
    CHECK(milli_cpu_to_shares(25) == 25);
    CHECK(milli_cpu_to_shares(1000) == 1024);
    CHECK(milli_cpu_to_shares(1500) == 1536);
    CHECK(milli_cpu_to_shares(4025) == 4121);
    CHECK(milli_cpu_to_shares(256000) == 262144);
    CHECK(milli_cpu_to_shares(int64_t(1) << 62) == 262144);
    CHECK(milli_cpu_to_quota(0) == -1);
    CHECK(milli_cpu_to_quota(-1) == -1);
    CHECK(milli_cpu_to_quota(5) == 1000);
    CHECK(milli_cpu_to_quota(50) == 5000);
    CHECK(milli_cpu_to_quota(1000) == 100000);
    CHECK(milli_cpu_to_quota(int64_t(1) << 62) == INT64_MAX);
}

TEST_CASE("node.koordinator.sh/extended-resource-spec", "[facts][readers]") {
    auto e = parse_extended_resource_spec(
        R"({"containers":{"app":{"limits":{"kubernetes.io/batch-cpu":"1k","kubernetes.io/batch-memory":"3456Mi"},)"
        R"("requests":{"kubernetes.io/batch-cpu":"1k","kubernetes.io/batch-memory":"3456Mi","example.com/gpu":"1"}},"side":{"requests":{"kubernetes.io/batch-cpu":25}}}})");
    REQUIRE(e.present);
    REQUIRE(e.containers.size() == 2);
    const BatchResources& a = e.containers.at("app");
    CHECK(a.has_limits);
    CHECK(a.cpu_limit == 1000);
    CHECK(a.cpu_limit_text == "1k");
    CHECK(a.mem_limit == 3623878656);
    CHECK(a.cpu_request == 1000);
    const BatchResources& s = e.containers.at("side");
    CHECK_FALSE(s.has_limits);
    CHECK(s.cpu_request == 25);
    CHECK_FALSE(s.mem_request);

    CHECK_FALSE(parse_extended_resource_spec("{}").present);
    CHECK_FALSE(parse_extended_resource_spec(R"({"containers":null})").present);
    CHECK(parse_extended_resource_spec(R"({"containers":{}})").present);
    const std::string k = "node.koordinator.sh/extended-resource-spec: ";
    CHECK(error_of([] { parse_extended_resource_spec("{"); }).rfind(k + "malformed JSON", 0) == 0);
    CHECK(error_of([] { parse_extended_resource_spec("[]"); }) == k + "expected a JSON object, got array");
    CHECK(error_of([] { parse_extended_resource_spec(R"({"containers":[]})"); }) == k + "containers: expected an object, got array");
    CHECK(error_of([] { parse_extended_resource_spec(R"({"containers":{"a":{"limits":{"kubernetes.io/batch-cpu":"1x"}}}})"); }) ==
          k + "containers.a.limits.kubernetes.io/batch-cpu: quantity \"1x\": unknown suffix \"x\" (Ki Mi Gi Ti Pi Ei, m k M G T P E, or e<N>)");
    CHECK(error_of([] { parse_extended_resource_spec(R"({"containers":{"a":{},"a":{}}})"); }).find("duplicate JSON key") != std::string::npos);
    CHECK(error_of([] { parse_extended_resource_spec(R"({"containers":{"a":{"limits":{"x":[[[[[[[[[]]]]]]]]]}}}})"); }).find("nested deeper") !=
          std::string::npos);
    std::string big(kMaxFactAnnotationBytes + 1, ' ');
    CHECK(error_of([&] { parse_extended_resource_spec(big); }).find("longer than") != std::string::npos);
}

TEST_CASE("scheduling.koordinator.sh/resource-status cpuset", "[facts][readers]") {
    CHECK(parse_resource_status_cpuset(R"({"cpuset":"2-3"})") == "2-3");
    CHECK(parse_resource_status_cpuset(R"({"cpuset":"3,2","numaNodeResources":[{"node":0}]})") == "2-3");
    CHECK(parse_resource_status_cpuset(R"({"cpuset":""})") == "");
    CHECK(parse_resource_status_cpuset(R"({"numaNodeResources":[]})") == "");
    CHECK(error_of([] { parse_resource_status_cpuset(R"({"cpuset":"0-99999"})"); }).find("above 8191") != std::string::npos);
    CHECK(error_of([] { parse_resource_status_cpuset(R"({"cpuset":2})"); }) ==
          "scheduling.koordinator.sh/resource-status: cpuset: expected a string, got number");
    CHECK(error_of([] { parse_resource_status_cpuset("\"2-3\""); }) ==
          "scheduling.koordinator.sh/resource-status: expected a JSON object, got string");
}

TEST_CASE("Katalyst enhancement annotations: map[string]string with Go's partial decoding", "[facts][readers]") {
    std::string why;
    auto m = parse_string_map("{\n  \"numa_binding\": \"true\", \n  \"numa_exclusive\": \"true\"\n}", &why);
    REQUIRE(m);
    CHECK(why.empty());
    CHECK(m->at("numa_binding") == "true");
    m = parse_string_map(R"({"numa_binding":"true","numa_exclusive":true})", &why);
    REQUIRE(m);  // Go keeps the string values and reports the first type error
    CHECK(m->count("numa_binding"));
    CHECK_FALSE(m->count("numa_exclusive"));
    CHECK(why.find("\"numa_exclusive\" is a boolean") != std::string::npos);
    CHECK_FALSE(parse_string_map("{", &why));
    CHECK_FALSE(parse_string_map("[1]", &why));
}

// ---- CPU sets -----------------------------------------------------------------------------------

TEST_CASE("CpuSet: the kernel's list format", "[facts][cpuset]") {
    auto s = CpuSet::parse("0-2,5\n");
    REQUIRE(s);
    CHECK(s->str() == "0-2,5");
    CHECK(s->count() == 4);
    CHECK(CpuSet::parse("5,0-2,1")->str() == "0-2,5");
    CHECK(CpuSet::parse("")->empty());
    CHECK(CpuSet::parse("\n")->empty());
    CHECK(CpuSet::parse("8191")->str() == "8191");
    for (const char* bad : {"3-1", "a", "0-", ",1", "1,", "8192", "0-7:2", "1,,2", "-1"}) {
        INFO(bad);
        CHECK_FALSE(CpuSet::parse(bad));
    }
    std::string why;  // fuzz finding: an error message is one line whatever the input holds
    CHECK_FALSE(CpuSet::parse("+1-11\n2", &why));
    CHECK(why.find('\n') == std::string::npos);
    CpuSet a = *CpuSet::parse("0-3"), b = *CpuSet::parse("2-5");
    CHECK((a | b).str() == "0-5");
    CHECK((a & b).str() == "2-3");
    CHECK((a - b).str() == "0-1");
    CHECK((a & b).strict_subset_of(a));
    CHECK_FALSE(a.strict_subset_of(a));
    CHECK(a.subset_of(a));
    CHECK(*CpuSet::parse("100") != *CpuSet::parse("1"));
}

// ---- NUMA ----------------------------------------------------------------------------------------

TEST_CASE("NUMA choice: exclusive, bound, shared", "[facts][numa]") {
    NumaTopology t;
    t.nodes = {{0, *CpuSet::parse("0-3")}, {1, *CpuSet::parse("4-7")}};
    t.online = *CpuSet::parse("0-7");
    std::string why;
    auto c = choose_numa(t, CpuSet(), NumaMode::Exclusive, 1, std::nullopt, why);
    REQUIRE(c);
    CHECK(c->node == 0);
    CHECK(c->cpus.str() == "0-3");
    c = choose_numa(t, *CpuSet::parse("1"), NumaMode::Exclusive, 1, std::nullopt, why);
    REQUIRE(c);
    CHECK(c->node == 1);
    CHECK(c->cpus.str() == "4-7");
    CHECK_FALSE(choose_numa(t, *CpuSet::parse("1,7"), NumaMode::Exclusive, 1, std::nullopt, why));
    CHECK(why == "no NUMA node fits exclusive placement of 1 CPU(s): node0 has held CPUs 1; node1 has held CPUs 7");
    // the pod's other container holds node1: the same node again
    c = choose_numa(t, *CpuSet::parse("1"), NumaMode::Exclusive, 1, 1u, why);
    REQUIRE(c);
    CHECK(c->node == 1);
    // bound: n free CPUs of one node, never a held one
    c = choose_numa(t, *CpuSet::parse("0-2"), NumaMode::Bound, 2, std::nullopt, why);
    REQUIRE(c);
    CHECK(c->cpus.str() == "4-5");
    c = choose_numa(t, *CpuSet::parse("0-1"), NumaMode::Bound, 2, std::nullopt, why);
    REQUIRE(c);
    CHECK(c->cpus.str() == "2-3");
    CHECK_FALSE(choose_numa(t, *CpuSet::parse("0-1,4-5"), NumaMode::Bound, 3, std::nullopt, why));
    // shared: the node with the most free CPUs, all of them
    c = choose_numa(t, *CpuSet::parse("0"), NumaMode::Shared, 1, std::nullopt, why);
    REQUIRE(c);
    CHECK(c->node == 1);
    CHECK(c->cpus.str() == "4-7");
    // single-node machine: exclusive needs the whole machine free, bound works
    NumaTopology one;
    one.nodes = {{0, *CpuSet::parse("0-3")}};
    one.online = *CpuSet::parse("0-3");
    CHECK_FALSE(choose_numa(one, *CpuSet::parse("3"), NumaMode::Exclusive, 1, std::nullopt, why));
    c = choose_numa(one, *CpuSet::parse("3"), NumaMode::Bound, 2, std::nullopt, why);
    REQUIRE(c);
    CHECK(c->cpus.str() == "0-1");
}

TEST_CASE("NUMA: whole cores first (thread siblings)", "[facts][numa]") {
    NumaTopology t;
    t.nodes = {{0, *CpuSet::parse("0-7")}};
    t.online = *CpuSet::parse("0-7");
    t.siblings.resize(8);
    for (unsigned c = 0; c < 8; ++c) t.siblings[c] = *CpuSet::parse(std::to_string(c & ~1u) + "-" + std::to_string((c & ~1u) + 1));
    std::string why;
    // CPU 0 held: core (0,1) is broken; two CPUs come from core (2,3), not 1 + 2
    auto c = choose_numa(t, *CpuSet::parse("0"), NumaMode::Bound, 2, std::nullopt, why);
    REQUIRE(c);
    CHECK(c->cpus.str() == "2-3");
    // three CPUs: one whole core, then the single CPU of the already broken core (0,1) rather
    // than breaking another whole core
    c = choose_numa(t, *CpuSet::parse("0"), NumaMode::Bound, 3, std::nullopt, why);
    REQUIRE(c);
    CHECK(c->cpus.str() == "1-3");
    // fuzz finding: asymmetric sibling lists (CPU 0 alone, CPU 1 with 0) never count a CPU twice
    t.siblings[0] = *CpuSet::parse("0");
    c = choose_numa(t, CpuSet(), NumaMode::Bound, 3, std::nullopt, why);
    REQUIRE(c);
    CHECK(c->cpus.count() == 3);
}

TEST_CASE("NUMA topology from a scratch sysfs", "[facts][numa]") {
    Tmp t;
    make_sysfs(t, "0-5", {{0, "0-3"}, {1, "4-7"}, {2, ""}});
    NumaTopology topo = read_topology(t.path + "/sys");
    REQUIRE(topo.nodes.size() == 2);  // node2 has no CPU; CPUs 6-7 are offline
    CHECK(topo.nodes[1].cpus.str() == "4-5");
    CHECK(topo.online.str() == "0-5");
    // no node directory at all (CONFIG_NUMA=n): one node 0
    Tmp u;
    u.put("sys/devices/system/cpu/online", "0-1\n");
    topo = read_topology(u.path + "/sys");
    REQUIRE(topo.nodes.size() == 1);
    CHECK(topo.nodes[0].cpus.str() == "0-1");
    // malformed and oversized files are errors, not guesses
    t.put("sys/devices/system/node/node1/cpulist", "4-x\n");
    CHECK(error_of([&] { read_topology(t.path + "/sys"); }).find("node1/cpulist") != std::string::npos);
    t.put("sys/devices/system/node/node1/cpulist", std::string(70000, '1'));
    CHECK(error_of([&] { read_topology(t.path + "/sys"); }).find("larger than 64 KiB") != std::string::npos);
    CHECK(error_of([&] { read_topology(t.path + "/nonexistent"); }).find("sysfs root") == 0);
}

TEST_CASE("kubelet cpu_manager_state: held CPUs of other pods", "[facts][numa][cpuset-trust]") {
    KubeletCpuState k = parse_kubelet_cpu_state(
        R"({"policyName":"static","defaultCpuSet":"0,6-7","entries":{"podA":{"c1":"1-2","c2":"3"},"podB":{"c":"4-5"}},"checksum":1})");
    CHECK(k.policy == "static");
    CHECK(k.held.str() == "1-5");
    CHECK(k.by_pod.at("podA").str() == "1-3");
    // policy none holds nothing; V1 entries (container id → CPUs) are held by an unknown pod
    CHECK(parse_kubelet_cpu_state(R"({"policyName":"none","defaultCpuSet":"","entries":{"podA":{"c":"1"}}})").held.empty());
    CHECK(parse_kubelet_cpu_state(R"({"policyName":"static","entries":{"abc123":"6"}})").by_pod.at("").str() == "6");
    CHECK(error_of([] { parse_kubelet_cpu_state(R"({"policyName":"static","entries":{"podA":{"c":"1-x"}}})"); }).find("entries.podA.c") !=
          std::string::npos);
    CHECK(error_of([] { parse_kubelet_cpu_state("{"); }).find("kubelet cpu_manager_state: ") == 0);
    CHECK(error_of([] { parse_kubelet_cpu_state(R"({"entries":[1]})"); }).find("entries: expected an object") != std::string::npos);
    Tmp t;
    const std::string f = t.path + "/cpu_manager_state";
    CHECK(kubelet_held_cpus(f, "podA").cpus.empty());  // missing file: nothing held
    t.put("cpu_manager_state", R"({"policyName":"static","defaultCpuSet":"0,6-7","entries":{"podA":{"c1":"1-2"},"podB":{"c":"4-5"}},"checksum":1})");
    HeldCpus h = kubelet_held_cpus(f, "podA");  // the pod's own exclusive CPUs are not held against it
    CHECK(h.cpus.str() == "4-5");
    REQUIRE(h.by.size() == 1);
    CHECK(h.by[0] == "4-5 (kubelet static, pod podB)");
    t.put("cpu_manager_state", "{\"entries\":");  // malformed: refused, never "nothing held"
    CHECK(error_of([&] { kubelet_held_cpus(f, "podA"); }).find("malformed JSON") != std::string::npos);
    CHECK(error_of([&] { kubelet_held_cpus(f, "podA"); }).find(kKubeletCpusUnknown) == 0);
}

TEST_CASE("kubelet cpu_manager_state: out of sight is unknown, not none held (issue #30 §3)", "[facts][numa][cpuset-trust][kubelet-unknown]") {
    Tmp t;
    // kubelet's directory missing too (a container without the host's /var/lib/kubelet): unknown
    const std::string gone = t.path + "/var/lib/kubelet/cpu_manager_state";
    CHECK(error_of([&] { kubelet_held_cpus(gone, "podA"); }) ==
          "kubelet's exclusive CPUs unknown: " + gone + " cannot be read: kubelet's directory " + t.path +
              "/var/lib/kubelet does not exist here (mount the node's kubelet directory read-only; --kubelet-cpu-state \"\" on a node "
              "without kubelet)");
    // kubelet's directory there, no checkpoint: kubelet runs no CPU manager, nothing held
    t.mkdir("var/lib/kubelet");
    CHECK(kubelet_held_cpus(gone, "podA").cpus.empty());
    // kubelet's none policy writes a checkpoint too: nothing held, stale entries ignored
    t.put("var/lib/kubelet/cpu_manager_state", R"({"policyName":"none","defaultCpuSet":"","entries":{"podB":{"c":"4-5"}},"checksum":1})");
    CHECK(kubelet_held_cpus(gone, "podA").cpus.empty());
    // "" is the operator's word that the node has no kubelet CPU manager
    CHECK(kubelet_held_cpus("", "podA").cpus.empty());
    // a checkpoint that cannot be opened is unknown too
    t.put("var/lib/kubelet/cpu_manager_state", "{}");
    REQUIRE(chmod((t.path + "/var/lib/kubelet/cpu_manager_state").c_str(), 0) == 0);
    if (geteuid() != 0)  // root reads it anyway
        CHECK(error_of([&] { kubelet_held_cpus(gone, "podA"); }) ==
              "kubelet's exclusive CPUs unknown: kubelet cpu_manager_state " + gone + ": Permission denied");
}

namespace {
/// place_numa as an event whose cpuset write landed: its record kept, as the pipeline's
/// keep_fact_records does (place_numa itself records nothing; issue #30 §2).
NumaChoice place_kept(const NumaRequest& rq, FactState& st) {
    NumaChoice c = place_numa(rq, st);
    if (c.record) REQUIRE(st.put_numa(*c.record).empty());
    return c;
}
}  // namespace

TEST_CASE("NUMA placement: place_numa records nothing itself; the choice carries the record", "[facts][numa]") {
    Tmp t;
    make_sysfs(t, "0-7", {{0, "0-3"}, {1, "4-7"}});
    t.put("cpuset/kubepods/podA/cpuset.cpus", "0-7\n");
    FactState st(t.path + "/state");
    REQUIRE(st.lock().empty());
    NumaRequest r;
    r.sysfs_root = t.path + "/sys";
    r.cgroup_root = t.path;
    r.layout = Layout::V1;
    r.container_id = "ca";
    r.sandbox_id = "sa";
    r.pod_dir = "kubepods/podA";
    r.mode = NumaMode::Exclusive;
    NumaChoice a = place_numa(r, st);
    CHECK(a.cpus.str() == "0-3");
    CHECK(st.numa_records().empty());  // nothing reserved before the write landed
    REQUIRE(a.record);
    CHECK(a.record->mode == "exclusive");
    CHECK(a.record->cpus == "0-3");
    // a pin: checked, never recorded by the check; its record's mode follows the trust rule
    NumaRequest p = r;
    p.container_id = "cp";
    p.sandbox_id = "sp";
    t.put("cpuset/kubepods/podP/cpuset.effective_cpus", "0-7\n");
    p.pod_dir = "kubepods/podP";
    CHECK_FALSE(check_pinned_cpuset(p, *CpuSet::parse("4-5"), st).empty());
    CHECK(st.numa_records().empty());
    CHECK(pin_record(p, *CpuSet::parse("4-5"), true).mode == "pin");
    CHECK(pin_record(p, *CpuSet::parse("4-5"), false).mode == "pin-shared");
    // an untrusted pin reserves nothing: another pod's pin over it passes; a trusted one is held
    REQUIRE(st.put_numa(pin_record(p, *CpuSet::parse("4-5"), false)).empty());
    NumaRequest q = p;
    q.container_id = "cq";
    q.sandbox_id = "sq";
    CHECK_NOTHROW(check_pinned_cpuset(q, *CpuSet::parse("5-6"), st));
    REQUIRE(st.put_numa(pin_record(p, *CpuSet::parse("4-5"), true)).empty());
    CHECK(error_of([&] { check_pinned_cpuset(q, *CpuSet::parse("5-6"), st); }).find("held exclusively by another pod") != std::string::npos);
}

TEST_CASE("NUMA placement: records, sibling containers, concurrency state, pruning", "[facts][numa]") {
    Tmp t;
    make_sysfs(t, "0-7", {{0, "0-3"}, {1, "4-7"}});
    for (const char* pod : {"kubepods/podA", "kubepods/podB", "kubepods/podC"}) t.put(std::string("cpuset/") + pod + "/cpuset.cpus", "0-7\n");
    FactState st(t.path + "/state");
    REQUIRE(st.lock().empty());
    auto rq = [&](const std::string& ctr, const std::string& sb, const std::string& pod) {
        NumaRequest r;
        r.sysfs_root = t.path + "/sys";
        r.cgroup_root = t.path;
        r.layout = Layout::V1;
        r.container_id = ctr;
        r.sandbox_id = sb;
        r.pod_dir = pod;
        r.mode = NumaMode::Exclusive;
        return r;
    };
    NumaChoice a = place_kept(rq("ca", "sa", "kubepods/podA"), st);
    CHECK(a.cpus.str() == "0-3");
    NumaChoice a2 = place_kept(rq("ca2", "sa", "kubepods/podA"), st);  // same pod: same node
    CHECK(a2.cpus.str() == "0-3");
    NumaChoice b = place_kept(rq("cb", "sb", "kubepods/podB"), st);  // recorded, not yet written: node1
    CHECK(b.cpus.str() == "4-7");
    CHECK(error_of([&] { place_kept(rq("cc", "sc", "kubepods/podC"), st); }).find("no NUMA node fits exclusive placement") == 0);
    // later events of a container get its recorded placement
    CHECK(place_kept(rq("cb", "sb", "kubepods/podB"), st).why.find("recorded at an earlier event") != std::string::npos);
    auto recs = st.numa_records();
    CHECK(recs.size() == 3);
    // dry run (explain) records nothing
    auto dry = rq("cc", "sc", "kubepods/podC");
    dry.dry_run = true;
    CHECK_THROWS(place_kept(dry, st));
    CHECK(st.numa_records().size() == 3);
    // pod B is gone: its record is pruned and node1 is free again
    t.rm("cpuset/kubepods/podB");
    NumaChoice c = place_kept(rq("cc", "sc", "kubepods/podC"), st);
    CHECK(c.cpus.str() == "4-7");
    CHECK_FALSE(st.numa_record("cb"));
    // the pod ends: its records go
    CHECK(st.has_pod("sa"));
    CHECK(st.drop_pod("sa").empty());
    CHECK_FALSE(st.has_pod("sa"));
    CHECK(st.numa_records().size() == 1);
    // corrupt records are ignored, never trusted
    t.put("state/facts/numa/x.json", "{not json");
    std::vector<std::string> problems;
    CHECK(st.numa_records(&problems).size() == 1);
    CHECK(problems.size() == 1);
}

// ---- facts ----------------------------------------------------------------------------------------

TEST_CASE("fact registry: unique names, usable knobs, scopes", "[facts]") {
    std::set<std::string> names;
    for (const auto& f : fact_table()) {
        INFO(f.name);
        CHECK(names.insert(f.name).second);
        CHECK(find_fact(f.name) == &f);
        CHECK(std::string(f.source).size() > 5);
        CHECK(std::string(f.reads).size() > 3);
        CHECK(fact_has_evaluator(f.name));
    }
    CHECK(find_fact("nope") == nullptr);
    CHECK(closest_fact("koordinator.batch_cfs_qouta") == "koordinator.batch_cfs_quota");
    CHECK(closest_fact("zzz") == "");
    const FactDef& q = *find_fact("koordinator.batch_cfs_quota");
    CHECK(fact_usable(q, KnobId::CpuQuota, kFactContainer) == "");
    CHECK(fact_usable(q, KnobId::CpuPeriod, kFactContainer) ==
          "fact koordinator.batch_cfs_quota (us) cannot feed cpu_period_us; it feeds cpu_quota_us");
    CHECK(fact_usable(q, KnobId::CpuQuota, kFactPod) ==
          "fact koordinator.batch_cfs_quota is a container-level value: use it under [classes.*.container]");
    CHECK(fact_usable(*find_fact("koordinator.pod_batch_cfs_quota"), KnobId::CpuQuota, kFactContainer).find("pod-level") != std::string::npos);
}

TEST_CASE("every fact is documented in nri-qos.toml(5) with its source", "[facts][docs]") {
    std::string man = slurp(NRI_QOS_SRCDIR "/man/nri-qos.toml.5");
    for (const auto& f : fact_table()) {
        INFO(f.name);
        CHECK(man.find(f.name) != std::string::npos);
    }
    CHECK(man.find("NUMA PLACEMENT") != std::string::npos);
    CHECK(slurp(NRI_QOS_SRCDIR "/man/nri-qos.8").find("\\-\\-sysfs\\-root") != std::string::npos);
}

namespace {

/// A request from the captured containerd 1.6 fixtures with `patch` merged in.
Request req_from(const char* file, const json& patch) {
    json j = json::parse(slurp(std::string(NRI_QOS_SRCDIR "/tests/fixtures/requests/containerd-1.6.20/") + file));
    if (patch.is_object()) j.merge_patch(patch);
    return parse_v01_request(j.dump());
}

ClassDef class_of(const std::string& toml_knobs) {
    Policy p = parse_policy_toml("version = 1\n[settings]\ndefault_class = \"C\"\n[classes.C]\n" + toml_knobs, "t.toml");
    return p.classes.at("C");
}

/// A policy whose [guarded.annotations] declares `keys` (the facts reading them are trusted).
Policy guarding(std::initializer_list<const char*> keys) {
    Policy p;
    for (const char* k : keys) p.guarded_annotations.emplace_back(k, "test: only its system writes it");
    std::sort(p.guarded_annotations.begin(), p.guarded_annotations.end());
    return p;
}

struct Env {
    Tmp t;
    FsKernel kernel;
    FactState state;
    const Policy* policy = nullptr;  ///< [guarded] tables (nullptr: nothing trusted)
    std::function<std::string(const std::string&)> not_passed;  ///< FactInput::not_passed
    std::optional<std::string> kubelet_cpu_state;  ///< FactInput::kubelet_cpu_state (default: <tmp>/cpu_manager_state)
    Env() : kernel(t.path + "/cg", t.path + "/proc", t.path + "/rc"), state(t.path + "/state") {}
    FactPlan run(const ClassDef& cls, const Request& r, Layout lay = Layout::V1, bool dry = false) {
        FactInput in;
        in.req = &r;
        in.policy = policy;
        if (r.cgroups_path) in.paths = resolve_cgroups_path(*r.cgroups_path);
        if (in.paths) in.kube_qos = kube_qos_from_path(in.paths->pod);
        in.layout = lay;
        in.kernel = &kernel;
        in.cgroup_root = t.path + "/cg";
        in.sysfs_root = t.path + "/sys";
        in.dev_root = t.path + "/dev";
        in.kubelet_cpu_state = kubelet_cpu_state ? *kubelet_cpu_state : t.path + "/cpu_manager_state";
        in.dry_run = dry;
        in.not_passed = not_passed;
        FactPlan p = resolve_facts(cls, in, state);
        // as an event whose writes landed: the accepted values' records kept (the pipeline's
        // keep_fact_records; resolve_facts records nothing itself, issue #30 §2)
        if (keep)
            for (const FactRecord& fr : p.keep) REQUIRE(state.put_numa(fr.rec).empty());
        return p;
    }
    bool keep = true;  ///< run(): keep FactPlan::keep as a landed write would
};

const KnobSetting* knob(const std::vector<KnobSetting>& l, KnobId id) {
    for (const auto& k : l)
        if (k.id == id) return &k;
    return nullptr;
}

}  // namespace

TEST_CASE("facts: Koordinator batch resources per container and per pod", "[facts]") {
    ClassDef cls = class_of(R"([classes.C.container]
cpu_shares = { fact = "koordinator.batch_cpu_shares" }
cpu_quota_us = { fact = "koordinator.batch_cfs_quota" }
memory_limit = { fact = "koordinator.batch_memory_limit" }
[classes.C.pod]
cpu_shares = { fact = "koordinator.pod_batch_cpu_shares" }
cpu_quota_us = { fact = "koordinator.pod_batch_cfs_quota" }
memory_limit = { fact = "koordinator.pod_batch_memory_limit" }
)");
    const std::string spec =
        R"({"containers":{"cgfs-ctr":{"limits":{"kubernetes.io/batch-cpu":"1k","kubernetes.io/batch-memory":"3456Mi"},"requests":{"kubernetes.io/batch-cpu":"1k"}},)"
        R"("other":{"requests":{"kubernetes.io/batch-cpu":"25"}}}})";
    Env e;
    const Policy trust = guarding({"node.koordinator.sh/extended-resource-spec"});
    e.policy = &trust;  // koord-manager's webhook owns the annotation
    // batch pods are BestEffort (the fixture pod is Burstable)
    auto req_from = [](const char* file, json patch) {
        json j = json::parse(slurp(std::string(NRI_QOS_SRCDIR "/tests/fixtures/requests/containerd-1.6.20/") + file));
        if (patch.is_object()) j.merge_patch(patch);
        std::string cp = j["spec"]["cgroupsPath"];
        j["spec"]["cgroupsPath"] = "/kubepods/besteffort/" + cp.substr(std::string("/kubepods/burstable/").size());
        return parse_v01_request(j.dump());
    };
    Request c = req_from("container-create.json", {{"spec", {{"annotations", {{"node.koordinator.sh/extended-resource-spec", spec}}}}}});
    FactPlan p = e.run(cls, c);
    REQUIRE(knob(p.cls.container, KnobId::CpuShares));
    CHECK(knob(p.cls.container, KnobId::CpuShares)->value.num == 1024);
    CHECK(knob(p.cls.container, KnobId::CpuQuota)->value.num == 100000);
    CHECK(knob(p.cls.container, KnobId::CpuQuota)->note ==
          "batch-cpu limit 1k (1000m) × period 100000 / 1000 [koordinator.batch_cfs_quota]; trusted: annotation "
          "node.koordinator.sh/extended-resource-spec is guarded (test: only its system writes it)");
    CHECK(knob(p.cls.container, KnobId::MemoryLimit)->value.num == 3623878656);
    CHECK(p.cls.pod.empty());  // pod facts are for the sandbox event
    REQUIRE(p.calcs.size() == 3);
    CHECK(p.calcs[1].rfind("container cpu.cfs_quota_us = 100000 = batch-cpu limit 1k (1000m) × period 100000 / 1000 [koordinator.batch_cfs_quota]",
                           0) == 0);

    Request s = req_from("sandbox-create.json", {{"spec", {{"annotations", {{"node.koordinator.sh/extended-resource-spec", spec}}}}}});
    p = e.run(cls, s);
    CHECK(p.cls.container.empty());
    CHECK(knob(p.cls.pod, KnobId::CpuShares)->value.num == milli_cpu_to_shares(1025));
    CHECK(knob(p.cls.pod, KnobId::CpuQuota)->value.kind == KnobValue::Max);  // "other" has no limits
    CHECK(knob(p.cls.pod, KnobId::MemoryLimit)->value.kind == KnobValue::Max);

    // a container the annotation does not list keeps kubelet's values: skipped, with the reason
    Request o = req_from("container-create.json",
                         {{"spec", {{"annotations", {{"node.koordinator.sh/extended-resource-spec", R"({"containers":{"x":{}}})"}}}}}});
    p = e.run(cls, o);
    CHECK(p.cls.container.empty());
    REQUIRE(p.skipped.size() == 3);
    CHECK(p.skipped[0] ==
          "cpu_shares: fact koordinator.batch_cpu_shares absent: container \"cgfs-ctr\" is not in "
          "node.koordinator.sh/extended-resource-spec (koordlet keeps kubelet's values)");
    CHECK(p.refused.empty());

    // a malformed annotation is a failure (refused), the class's fail mode decides
    Request bad = req_from("container-create.json", {{"spec", {{"annotations", {{"node.koordinator.sh/extended-resource-spec", "{"}}}}}});
    p = e.run(cls, bad);
    CHECK(p.refused.size() == 3);
    CHECK(p.refused[0].rfind("cpu_shares: fact koordinator.batch_cpu_shares: node.koordinator.sh/extended-resource-spec: malformed JSON", 0) == 0);

    // no annotation: absent; with if_absent = "fail": refused
    ClassDef strict = class_of("[classes.C.container]\ncpu_shares = { fact = \"koordinator.batch_cpu_shares\", if_absent = \"fail\" }\n");
    Request none = req_from("container-create.json", {});
    p = e.run(strict, none);
    REQUIRE(p.refused.size() == 1);
    CHECK(p.refused[0] ==
          "cpu_shares: fact koordinator.batch_cpu_shares absent: no node.koordinator.sh/extended-resource-spec annotation "
          "(koordlet keeps kubelet's values)");
}

TEST_CASE("facts: an annotation the runtime does not pass is not reported as absent (issue #25 §1)", "[facts][not-passed]") {
    ClassDef cls = class_of(
        "[classes.C.container]\ncpu_shares = { fact = \"koordinator.batch_cpu_shares\" }\n"
        "cpu_quota_us = { fact = \"koordinator.batch_cfs_quota\" }\n");
    json j = json::parse(slurp(NRI_QOS_SRCDIR "/tests/fixtures/requests/containerd-1.6.20/container-create.json"));
    Request none = parse_v01_request(j.dump());
    // containerd 1.6.20 with pod_annotations unset: nothing passes
    AnnotationPasslist pl;
    pl.runtime = "containerd 1.6.20";
    pl.where = "[plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.runc] pod_annotations in /etc/containerd/config.toml";
    std::optional<AnnotationPasslist> rec = pl;
    int asked = 0;
    Env e;
    e.not_passed = [&](const std::string& k) {
        ++asked;
        return annotation_not_passed_reason(rec, k);
    };
    FactPlan p = e.run(cls, none);
    REQUIRE(p.skipped.size() == 2);
    CHECK(p.skipped[0] ==
          "cpu_shares: fact koordinator.batch_cpu_shares absent: not passed by containerd 1.6.20: add "
          "node.koordinator.sh/extended-resource-spec to pod_annotations ([plugins.\"io.containerd.grpc.v1.cri\"."
          "containerd.runtimes.runc] pod_annotations in /etc/containerd/config.toml; nri-qos register --pass-annotations)");
    CHECK(p.not_passed == std::vector<std::string>{"node.koordinator.sh/extended-resource-spec"});  // once per key
    // passed by a pattern (Go path.Match: "node.koordinator.sh/*"): a plain absence
    rec->patterns = {"node.koordinator.sh/*"};
    p = e.run(cls, none);
    CHECK(p.skipped[0] ==
          "cpu_shares: fact koordinator.batch_cpu_shares absent: no node.koordinator.sh/extended-resource-spec annotation "
          "(koordlet keeps kubelet's values)");
    CHECK(p.not_passed.empty());
    // a runtime passing all of them (containerd >= 1.7 through the v010-adapter): plain
    rec->patterns.clear();
    rec->passes_all = true;
    p = e.run(cls, none);
    CHECK(p.not_passed.empty());
    // nothing recorded: the absence says the runtime may not pass it; no not-passed claim
    rec.reset();
    p = e.run(cls, none);
    CHECK(p.skipped[0] ==
          "cpu_shares: fact koordinator.batch_cpu_shares absent: no node.koordinator.sh/extended-resource-spec annotation "
          "(containerd may not pass it: check pod_annotations; nri-qos register records what it passes)");
    CHECK(p.not_passed.empty());
    // the annotation present: never asked (no cost on the hot path)
    asked = 0;
    json with = j;
    with["spec"]["annotations"]["node.koordinator.sh/extended-resource-spec"] = R"({"containers":{"cgfs-ctr":{}}})";
    Request has = parse_v01_request(with.dump());
    e.run(cls, has);
    CHECK(asked == 0);
    // native NRI (no callback): a plain absence
    Env native;
    p = native.run(cls, none);
    CHECK(p.skipped[0].find("no node.koordinator.sh/extended-resource-spec annotation (koordlet keeps kubelet's values)") != std::string::npos);
}

TEST_CASE("annotation passlist record: round trip, staleness", "[facts][not-passed]") {
    Tmp t;
    t.put("config.toml", "version = 2\n");
    AnnotationPasslist p;
    p.runtime = "containerd 1.6.20";
    p.set = true;
    p.patterns = {"volcano.sh/*"};
    p.where = "somewhere";
    struct stat st {};
    REQUIRE(stat((t.path + "/config.toml").c_str(), &st) == 0);
    p.files = {{t.path + "/config.toml", static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec}};
    REQUIRE(record_annotation_passlist(t.path + "/state", p) == "");
    auto back = load_annotation_passlist(t.get("state/" + std::string(kAnnotationPasslistFile)));
    REQUIRE(back);
    CHECK(back->runtime == p.runtime);
    CHECK(back->patterns == p.patterns);
    CHECK(back->set);
    CHECK_FALSE(annotation_passlist_stale(*back));
    CHECK(annotation_not_passed_reason(back, "volcano.sh/qos-level") == "");
    CHECK(annotation_not_passed_reason(back, "node.koordinator.sh/extended-resource-spec").rfind("not passed by containerd 1.6.20: add ", 0) == 0);
    std::system(("touch -d '+1 minute' '" + t.path + "/config.toml'").c_str());
    CHECK(annotation_passlist_stale(*back));
    CHECK_FALSE(load_annotation_passlist("{\"v\":2}"));
    CHECK_FALSE(load_annotation_passlist("not json"));
}

TEST_CASE("facts: a value outside the knob's range is refused", "[facts]") {
    // volcano.qos_level on memory_qos_level is not allowed by the registry; test the range check
    // through a cpuset fact whose text is checked as a cpuset list and a level within range
    ClassDef cls = class_of("[classes.C.container]\ncpu_qos_level = { fact = \"volcano.qos_level\" }\n");
    Env e;
    Request r = req_from("container-create.json", {{"spec", {{"annotations", {{"volcano.sh/qos-level", "HLS"}}}}}});
    const Policy trust = guarding({"volcano.sh/qos-level"});
    e.policy = &trust;
    FactPlan p = e.run(cls, r);
    CHECK(knob(p.cls.container, KnobId::CpuQosLevel)->value.num == 2);
    r = req_from("container-create.json", {{"spec", {{"annotations", {{"volcano.sh/qos-level", "weird"}}}}}});
    CHECK(knob(e.run(cls, r).cls.container, KnobId::CpuQosLevel)->value.num == 0);
}

TEST_CASE("facts: scheduler cpuset lifts the quota only within what the quota paid for", "[facts]") {
    ClassDef cls = class_of(R"([classes.C.container]
cpuset_cpus = { fact = "koordinator.cpuset" }
cpu_quota_us = { fact = "koordinator.cpuset_quota" }
)");
    Env e;
    // the fixture container has quota 50000 / period 100000 (half a CPU)? use explicit resources
    auto with = [&](const std::string& cpuset, int64_t quota) {
        return req_from("container-create.json",
                        {{"spec",
                          {{"annotations", {{"scheduling.koordinator.sh/resource-status", "{\"cpuset\":\"" + cpuset + "\"}"}}},
                           {"resources", {{"cpu", {{"quota", quota}, {"period", 100000}}}}}}}});
    };
    make_sysfs(e.t, "0-63", {{0, "0-63"}});
    e.t.put("cg/cpuset/" + resolve_cgroups_path(*with("2-3", 1).cgroups_path).pod + "/cpuset.effective_cpus", "0-63\n");
    FactPlan p = e.run(cls, with("2-3", 200000));
    CHECK(knob(p.cls.container, KnobId::CpusetCpus)->value.text == "2-3");
    CHECK(knob(p.cls.container, KnobId::CpuQuota)->needs_cpuset == "2-3");  // the lift waits for the cpuset
    CHECK(knob(p.cls.container, KnobId::CpuQuota)->value.kind == KnobValue::Max);
    CHECK(json(p.calcs).dump().find("untrusted, applied: does not raise (2 CPUs (2-3) × period 100000 ≤ kubelet's CFS quota 200000)") !=
          std::string::npos);
    p = e.run(cls, with("0-63", 200000));  // a pod-written wide cpuset: neither bound nor lifted
    CHECK(p.cls.container.empty());
    REQUIRE(p.refused.size() == 2);
    std::sort(p.refused.begin(), p.refused.end());
    CHECK(p.refused[1] ==
          "cpuset_cpus: fact koordinator.cpuset refused: would pin to 64 CPUs (0-63) × period 100000, more than kubelet's "
          "CFS quota 200000 pays for; untrusted annotation scheduling.koordinator.sh/resource-status (declare it in "
          "[guarded.annotations] to trust it)");
    CHECK(p.refused[0].rfind("cpu_quota_us: fact koordinator.cpuset_quota refused: would lift the CFS quota (kubelet's CFS quota 200000 → max)", 0) ==
          0);
    // koord-scheduler declared as the annotation's owner: koordlet's behaviour, the lift included
    const Policy trust = guarding({"scheduling.koordinator.sh/resource-status"});
    e.policy = &trust;
    p = e.run(cls, with("0-63", 200000));
    CHECK(knob(p.cls.container, KnobId::CpusetCpus)->value.text == "0-63");
    CHECK(knob(p.cls.container, KnobId::CpuQuota)->value.kind == KnobValue::Max);
}

TEST_CASE("facts: CPU burst by carrier (Volcano agent vs rubik) and the pod sum ledger", "[facts]") {
    ClassDef cls = class_of(R"([classes.C.container]
cpu_burst_us = { fact = "volcano.cpu_burst_us" }
[classes.C.pod]
cpu_burst_us = { fact = "volcano.pod_cpu_burst_us" }
)");
    Env e;
    make_sysfs(e.t, "0-7", {{0, "0-7"}});
    Request base = req_from("container-create.json", {});
    const std::string pod = resolve_cgroups_path(*base.cgroups_path).pod;
    e.t.put("cg/cpu/" + pod + "/cpu.cfs_quota_us", "400000\n");
    e.t.put("cg/cpu/" + pod + "/cpu.cfs_period_us", "100000\n");
    auto ctr = [&](const std::string& id, const json& ann, int64_t quota, const char* state = "create") {
        return req_from(
            "container-create.json",
            {{"id", id}, {"state", state}, {"spec", {{"annotations", ann}, {"resources", {{"cpu", {{"quota", quota}, {"period", 100000}}}}}}}});
    };
    auto burst = [&](const FactPlan& p) {
        auto k = knob(p.cls.container, KnobId::CpuBurst);
        return k ? k->value.num : -1;
    };
    auto podsum = [&](const FactPlan& p) {
        auto k = knob(p.pod_refresh, KnobId::CpuBurst);
        return k ? k->value.num : -1;
    };

    const json volcano = {{"volcano.sh/enable-quota-burst", "true"}};
    FactPlan p = e.run(cls, ctr("c1", volcano, 200000));
    CHECK(burst(p) == 200000);  // opt-in: burst = quota
    CHECK(podsum(p) == 200000);
    p = e.run(cls, ctr("c2", volcano, 100000));
    CHECK(burst(p) == 100000);
    CHECK(podsum(p) == 300000);  // Σ over the pod's containers
    p = e.run(cls, ctr("c2", volcano, 100000));  // its StartContainer: counted once
    CHECK(podsum(p) == 300000);
    p = e.run(cls, ctr("c1", volcano, 200000, "delete"));  // a container ends: re-summed
    CHECK(p.cls.container.empty());
    CHECK(podsum(p) == 100000);
    CHECK(e.run(cls, ctr("c1", {{"volcano.sh/enable-quota-burst", "true"}, {"volcano.sh/quota-burst-time", "500000"}}, 200000), Layout::V1, true)
              .cls.container.at(0)
              .value.num == 200000);  // capped at the quota (explain: not recorded)
    CHECK(burst(e.run(cls, ctr("c3", {{"volcano.sh/enable-quota-burst", "false"}}, 200000))) == -1);
    CHECK(burst(e.run(cls, ctr("c3", volcano, -1))) == -1);  // no quota: no burst

    // rubik: quota-burst-time alone; refused (not capped) above the quota
    const json rubik = {{"volcano.sh/quota-burst-time", "2000"}};
    CHECK(burst(e.run(cls, ctr("r1", rubik, 200000))) == 2000);
    p = e.run(cls, ctr("r2", {{"volcano.sh/quota-burst-time", "500000"}}, 200000));
    CHECK(burst(p) == -1);
    REQUIRE_FALSE(p.skipped.empty());
    CHECK(p.skipped[0].find("rubik refuses (matchQuota)") != std::string::npos);
    CHECK(burst(e.run(cls, ctr("r3", rubik, 900000))) == -1);  // ≥ period × 8 CPUs
    p = e.run(cls, ctr("r4", {{"volcano.sh/quota-burst-time", "-5"}}, 200000));
    REQUIRE(p.refused.size() == 1);  // malformed: a failure
    CHECK(p.refused[0].find("negative") != std::string::npos);
    // no annotation: nothing, and no state is created for the pod
    Env f;
    p = f.run(cls, ctr("n1", json::object(), 200000));
    CHECK(p.skipped.size() == 2);
    struct stat st {};
    CHECK(stat((f.t.path + "/state/facts").c_str(), &st) != 0);
}

TEST_CASE("facts: Katalyst numa_binding places on a NUMA node", "[facts][numa]") {
    ClassDef cls = class_of(R"([classes.C.container]
cpuset_cpus = { fact = "katalyst.numa_cpus" }
cpuset_mems = { fact = "katalyst.numa_mems" }
)");
    Env e;
    make_sysfs(e.t, "0-7", {{0, "0-3"}, {1, "4-7"}});
    Request r0 = req_from("container-create.json", {});
    const std::string pod = resolve_cgroups_path(*r0.cgroups_path).pod;
    e.t.put("cg/cpuset/" + pod + "/cpuset.cpus", "0-7\n");
    e.t.put("cpu_manager_state", R"({"policyName":"static","entries":{"podX":{"ctr":"2"}}})");  // kubelet gave CPU 2 to pod X
    const json ann = {{"katalyst.kubewharf.io/qos_level", "dedicated_cores"},
                      {"katalyst.kubewharf.io/memory_enhancement", R"({"numa_binding":"true","numa_exclusive":"true"})"}};
    const Policy trust =
        guarding({"katalyst.kubewharf.io/qos_level", "katalyst.kubewharf.io/memory_enhancement", "katalyst.kubewharf.io/cpu_enhancement"});
    e.policy = &trust;
    Request r = req_from("container-create.json", {{"spec", {{"annotations", ann}}}});
    FactPlan p = e.run(cls, r);
    CHECK(knob(p.cls.container, KnobId::CpusetCpus)->value.text == "4-7");
    CHECK(knob(p.cls.container, KnobId::CpusetMems)->value.text == "1");
    CHECK(p.calcs[0].find("held CPUs: 2 = 2 (kubelet static, pod podX)") != std::string::npos);
    // without numa_binding: nothing (Katalyst refuses dedicated_cores then)
    Request nb = req_from("container-create.json", {{"spec", {{"annotations", {{"katalyst.kubewharf.io/qos_level", "dedicated_cores"}}}}}});
    p = e.run(cls, nb);
    CHECK(p.cls.container.empty());
    CHECK(p.skipped.size() == 2);
    // bound (not exclusive): the container's integer CPUs
    const json bound = {{"katalyst.kubewharf.io/qos_level", "dedicated_cores"},
                        {"katalyst.kubewharf.io/memory_enhancement", R"({"numa_binding":"true"})"}};
    Request b = req_from(
        "container-create.json",
        {{"id", "b0b0"}, {"spec", {{"annotations", bound}, {"resources", {{"cpu", {{"quota", 150000}, {"period", 100000}, {"shares", 1536}}}}}}}});
    p = e.run(cls, b, Layout::V1, true);
    CHECK(knob(p.cls.container, KnobId::CpusetCpus)->value.text == "0-1");  // 2 CPUs, node0 (CPU 2 held; node1 is the first container's)
}

TEST_CASE("policy: fact values parse, validate and round-trip through the compiled forms", "[facts][policy]") {
    auto err = [](const std::string& knobs) {
        return error_of([&] { parse_policy_toml("version = 1\n[settings]\ndefault_class = \"A\"\n[classes.A]\n" + knobs, "p.toml"); });
    };
    CHECK(err("[classes.A.container]\ncpu_shares = { fact = \"koordinator.batch_cpu_shares\" }\n") == "");
    CHECK(err("[classes.A.container]\ncpu_shares = { fact = \"koordinator.batch_cpu_share\" }\n") ==
          "p.toml:6: classes.A.container.cpu_shares.fact: unknown fact \"koordinator.batch_cpu_share\" (did you mean "
          "\"koordinator.batch_cpu_shares\"?) (see FACTS in nri-qos.toml(5))");
    CHECK(err("[classes.A.container]\ncpu_period_us = { fact = \"koordinator.batch_cfs_quota\" }\n") ==
          "p.toml:6: classes.A.container.cpu_period_us: fact koordinator.batch_cfs_quota (us) cannot feed cpu_period_us; it feeds cpu_quota_us");
    CHECK(err("[classes.A.pod]\ncpu_shares = { fact = \"koordinator.batch_cpu_shares\" }\n").find("container-level value") != std::string::npos);
    CHECK(err("[classes.A.container]\ncpu_shares = { fact = \"koordinator.batch_cpu_shares\", if_absent = \"maybe\" }\n") ==
          "p.toml:6: classes.A.container.cpu_shares.if_absent: expected \"skip\" or \"fail\", got \"maybe\"");
    CHECK(err("[classes.A.container]\ncpu_shares = { fakt = \"x\" }\n").find("unknown key \"fakt\"") != std::string::npos);
    CHECK(err("[classes.A.container]\ncpu_shares = { if_absent = \"fail\" }\n").find("needs fact = ") != std::string::npos);

    Policy p = load_policy_toml(NRI_QOS_SRCDIR "/conf/nri.d/nri-qos.toml");
    const KnobSetting* k = knob(p.classes.at("KOORD-BE").container, KnobId::CpuQuota);
    REQUIRE(k);
    CHECK(k->value.kind == KnobValue::Fact);
    CHECK(k->value.text == "koordinator.batch_cfs_quota");
    Policy q = policy_from_json(policy_to_json(p));
    CHECK(policy_to_json(q) == policy_to_json(p));
    json bad = policy_to_json(p);
    bad["classes"]["KOORD-BE"]["c"][0][3] = "no.such_fact";
    CHECK(error_of([&] { policy_from_json(bad); }) == "compiled policy: unknown fact");
    // the flat compiled cache keeps facts too
    std::string blob = policy_cache::compile(p, "key", false, 0);
    Policy d;
    REQUIRE(policy_cache::decode(blob, "key", nullptr, d, nullptr) == policy_cache::Decoded::Ok);
    CHECK(policy_to_json(d).dump() == policy_to_json(p).dump());
}

TEST_CASE("facts: the pod burst forgets containers whose cgroup is gone (native NRI reports no removal)", "[facts]") {
    ClassDef cls = class_of(R"([classes.C.container]
cpu_burst_us = { fact = "volcano.cpu_burst_us" }
[classes.C.pod]
cpu_burst_us = { fact = "volcano.pod_cpu_burst_us" }
)");
    Env e;
    Request base = req_from("container-create.json", {});
    const std::string pod = resolve_cgroups_path(*base.cgroups_path).pod;
    e.t.put("cg/cpu/" + pod + "/cpu.cfs_quota_us", "400000\n");
    auto ctr = [&](const std::string& id, int64_t quota) {
        e.t.mkdir("cg/cpu/" + pod + "/" + id);
        return req_from("container-create.json", {{"id", id},
                                                  {"spec",
                                                   {{"cgroupsPath", "/" + pod + "/" + id},
                                                    {"annotations", {{"volcano.sh/enable-quota-burst", "true"}}},
                                                    {"resources", {{"cpu", {{"quota", quota}, {"period", 100000}}}}}}}});
    };
    auto podsum = [&](const FactPlan& p) {
        auto k = knob(p.pod_refresh, KnobId::CpuBurst);
        return k ? k->value.num : -1;
    };
    CHECK(podsum(e.run(cls, ctr("c1", 200000))) == 200000);
    CHECK(podsum(e.run(cls, ctr("c2", 100000))) == 300000);
    e.t.rm("cg/cpu/" + pod + "/c1");  // c1 exited and runc removed its cgroup; no event came
    CHECK(podsum(e.run(cls, ctr("c2", 100000))) == 300000);  // young entry: may be a container being created
    const std::string entry = "state/facts/ledger/" + base.sandbox_id + "/c1.json";
    json j = json::parse(e.t.get(entry));
    j["time"] = 1;  // long ago
    e.t.put(entry, j.dump());
    CHECK(podsum(e.run(cls, ctr("c2", 100000))) == 100000);
    CHECK(e.t.get(entry).empty());  // dropped
}

TEST_CASE("NUMA placement: a record whose container cgroup is gone is pruned after the grace period", "[facts][numa]") {
    Tmp t;
    make_sysfs(t, "0-7", {{0, "0-3"}, {1, "4-7"}});
    t.put("cpuset/kubepods/podA/cpuset.cpus", "0-7\n");
    t.put("cpuset/kubepods/podA/c1/cpuset.cpus", "\n");
    FactState st(t.path + "/state");
    REQUIRE(st.lock().empty());
    NumaRequest r;
    r.sysfs_root = t.path + "/sys";
    r.cgroup_root = t.path;
    r.container_id = "c1";
    r.sandbox_id = "sa";
    r.pod_dir = "kubepods/podA";
    r.ctr_dir = "kubepods/podA/c1";
    r.mode = NumaMode::Bound;
    r.need = 4;
    CHECK(place_kept(r, st).cpus.str() == "0-3");
    t.rm("cpuset/kubepods/podA/c1");
    NumaRequest r2 = r;
    r2.container_id = "c2";
    r2.ctr_dir = "kubepods/podA/c2";
    CHECK(place_kept(r2, st).cpus.str() == "4-7");  // c1's record is young: still held
    NumaRecord old = *st.numa_record("c1");
    old.time = 1;
    REQUIRE(st.put_numa(old).empty());
    st.drop_numa("c2");
    CHECK(place_kept(r2, st).cpus.str() == "0-3");  // c1 pruned: its CPUs are free again
    CHECK_FALSE(st.numa_record("c1"));
}

TEST_CASE("facts: Katalyst cpu_enhancement CPU burst policy", "[facts]") {
    ClassDef cls = class_of("[classes.C.container]\ncpu_burst_us = { fact = \"katalyst.cpu_burst_us\" }\n");
    Env e;
    auto burst = [&](const std::string& enh, const char* level = "shared_cores", int64_t quota = 200000) -> std::string {
        json ann = {{"katalyst.kubewharf.io/qos_level", level}};
        if (!enh.empty()) ann["katalyst.kubewharf.io/cpu_enhancement"] = enh;
        FactPlan p = e.run(cls, req_from("container-create.json",
                                         {{"spec", {{"annotations", ann}, {"resources", {{"cpu", {{"quota", quota}, {"period", 100000}}}}}}}}));
        if (auto k = knob(p.cls.container, KnobId::CpuBurst)) return std::to_string(k->value.num);
        return p.refused.empty() ? "absent" : "refused";
    };
    CHECK(burst("") == "absent");
    CHECK(burst(R"({"cpu_burst_policy":"default"})") == "absent");
    CHECK(burst(R"({"cpu_burst_policy":"static"})") == "200000");
    CHECK(burst(R"({"cpu_burst_policy":"static","cpu_burst_percent":"50"})") == "100000");
    CHECK(burst(R"({"cpu_burst_policy":"static","cpu_burst_percent":"250"})") == "200000");  // at most 100 %
    CHECK(burst(R"({"cpu_burst_policy":"static","cpu_burst_percent":"x"})") == "refused");
    CHECK(burst(R"({"cpu_burst_policy":"static","cpu_burst_percent":"nan"})") == "refused");
    CHECK(burst(R"({"cpu_burst_policy":"closed"})") == "0");
    CHECK(burst(R"({"cpu_burst_policy":"static"})", "reclaimed_cores") == "0");
    CHECK(burst(R"({"cpu_burst_policy":"dynamic"})") == "absent");
    CHECK(burst(R"({"cpu_burst_policy":"static"})", "shared_cores", -1) == "absent");
}

TEST_CASE("facts: Katalyst dedicated_cores default CPU burst and default percent (settings)", "[facts][katalyst-settings]") {
    // katalyst-core@d8c28ea pkg/agent/qrm-plugins/cpu/util/util.go getOverriddenDedicatedCoresPodBurstPolicy:
    // a dedicated_cores pod whose policy is default takes EnableDedicatedCoresDefaultCPUBurst
    // (true → static, false → closed, nil → no change); GetPodCPUBurstPercent: no percent → DefaultCPUBurstPercent.
    ClassDef cls = class_of("[classes.C.container]\ncpu_burst_us = { fact = \"katalyst.cpu_burst_us\" }\n");
    Env e;
    Policy pol;
    e.policy = &pol;
    auto burst = [&](const std::string& enh, const char* level) -> std::string {
        json ann = {{"katalyst.kubewharf.io/qos_level", level}};
        if (!enh.empty()) ann["katalyst.kubewharf.io/cpu_enhancement"] = enh;
        FactPlan p = e.run(cls, req_from("container-create.json",
                                         {{"spec", {{"annotations", ann}, {"resources", {{"cpu", {{"quota", 200000}, {"period", 100000}}}}}}}}));
        if (auto k = knob(p.cls.container, KnobId::CpuBurst)) return std::to_string(k->value.num) + " " + k->note;
        return p.refused.empty() ? "absent" : "refused";
    };
    // unset (the agent's default): no change
    CHECK(burst("", "dedicated_cores") == "absent");
    pol.katalyst_dedicated_default_burst = Policy::KatalystBurst::Static;
    CHECK(burst("", "dedicated_cores").rfind("200000 dedicated_cores default → static (settings.katalyst_dedicated_default_burst = \"static\"", 0) ==
          0);
    CHECK(burst(R"({"cpu_burst_policy":"default"})", "dedicated_cores").rfind("200000 ", 0) == 0);
    CHECK(burst(R"({"cpu_burst_policy":"closed"})", "dedicated_cores").rfind("0 ", 0) == 0);  // the pod's own policy wins
    CHECK(burst("", "shared_cores") == "absent");  // dedicated_cores only
    CHECK(burst("", "reclaimed_cores") == "absent");
    CHECK(burst(R"({"cpu_burst_policy":"default"})", "reclaimed_cores").rfind("0 reclaimed_cores never burst", 0) == 0);
    pol.katalyst_default_burst_percent = 30;
    CHECK(burst("", "dedicated_cores").rfind("60000 ", 0) == 0);
    CHECK(burst("", "dedicated_cores").find("default percent 30 (settings.katalyst_default_burst_percent)") != std::string::npos);
    CHECK(burst(R"({"cpu_burst_percent":"50"})", "dedicated_cores").rfind("100000 ", 0) == 0);  // the pod's percent wins
    pol.katalyst_dedicated_default_burst = Policy::KatalystBurst::Closed;
    CHECK(burst("", "dedicated_cores").rfind("0 dedicated_cores default → closed", 0) == 0);
    CHECK(burst(R"({"cpu_burst_policy":"static"})", "dedicated_cores").rfind("60000 ", 0) == 0);

    // the settings parse, check and survive the compiled forms
    Policy f = parse_policy_toml(
        "version = 1\n[settings]\ndefault_class = \"C\"\nkatalyst_dedicated_default_burst = \"static\"\n"
        "katalyst_default_burst_percent = 40\nkatalyst_default_numa_exclusive = true\n[classes.C]\n",
        "t.toml");
    CHECK(f.katalyst_dedicated_default_burst == Policy::KatalystBurst::Static);
    CHECK(f.katalyst_default_burst_percent == 40);
    CHECK(f.katalyst_default_numa_exclusive);
    Policy j = policy_from_json(policy_to_json(f));
    CHECK(j.katalyst_dedicated_default_burst == Policy::KatalystBurst::Static);
    CHECK(j.katalyst_default_burst_percent == 40);
    CHECK(j.katalyst_default_numa_exclusive);
    Policy d = parse_policy_toml("version = 1\n[settings]\ndefault_class = \"C\"\n[classes.C]\n", "t.toml");
    CHECK(d.katalyst_dedicated_default_burst == Policy::KatalystBurst::Unset);  // off by default, as in the agent
    CHECK(d.katalyst_default_burst_percent == 100);
    CHECK_FALSE(d.katalyst_default_numa_exclusive);
    CHECK_THROWS_WITH(
        parse_policy_toml("version = 1\n[settings]\ndefault_class = \"C\"\nkatalyst_dedicated_default_burst = \"on\"\n[classes.C]\n", "t.toml"),
        Catch::Contains("t.toml:4: settings.katalyst_dedicated_default_burst: expected \"unset\""));
    CHECK_THROWS_WITH(
        parse_policy_toml("version = 1\n[settings]\ndefault_class = \"C\"\nkatalyst_default_burst_percent = 101\n[classes.C]\n", "t.toml"),
        Catch::Contains("t.toml:4: settings.katalyst_default_burst_percent: expected an integer from 0 to 100"));
    CHECK_THROWS_WITH(
        parse_policy_toml("version = 1\n[settings]\ndefault_class = \"C\"\nkatalyst_default_numa_exclusive = \"true\"\n[classes.C]\n", "t.toml"),
        Catch::Contains("t.toml:4: settings.katalyst_default_numa_exclusive: expected true"));
}

TEST_CASE("facts: NRI UpdatePodSandbox recomputes the fact-valued pod knobs; one it cannot is reported (issue 19)", "[facts]") {
    ClassDef cls = class_of(R"([classes.C.container]
cpu_burst_us = { fact = "volcano.cpu_burst_us" }
[classes.C.pod]
cpu_idle = 1
cpu_burst_us = { fact = "volcano.pod_cpu_burst_us" }
cpu_qos_level = { fact = "volcano.qos_level", if_absent = "fail" }
)");
    ClassDef lift = class_of("[classes.C.pod]\ncpu_quota_us = { fact = \"koordinator.cpuset_quota\" }\n");
    Env e;
    make_sysfs(e.t, "0-7", {{0, "0-7"}});
    const std::string pod = "kubepods/burstable/pod0e2e0000-0000-4000-8000-000000000000";
    e.t.put("cg/cpu/" + pod + "/cpu.cfs_quota_us", "400000\n");
    e.t.put("cg/cpu/" + pod + "/cpu.cfs_period_us", "100000\n");
    e.t.put("cg/cpuset/" + pod + "/cpuset.effective_cpus", "0-7\n");  // the cpuset is validated against it
    const json ann = {{"volcano.sh/enable-quota-burst", "true"},
                      {"scheduling.koordinator.sh/resource-status", R"({"cpuset":"2-3"})"},
                      {"node.koordinator.sh/extended-resource-spec", R"({"containers":{"app":{"requests":{"kubernetes.io/batch-cpu":"1k"}}}})"}};
    // a container of the pod with a 200000 µs burst in the ledger
    json ce = {
        {"event", "StartContainer"},
        {"pod", {{"id", "p1"}, {"name", "web"}, {"namespace", "prod"}, {"annotations", ann}}},
        {"container",
         {{"id", "c1"},
          {"pod_sandbox_id", "p1"},
          {"name", "app"},
          {"linux",
           {{"cgroups_path", "/" + pod + "/c1"}, {"resources", {{"cpu", {{"quota", {{"value", 200000}}}, {"period", {{"value", 100000}}}}}}}}}}}};
    e.t.mkdir("cg/cpu/" + pod + "/c1");
    Request c = parse_nri_event(ce.dump());
    REQUIRE(knob(e.run(cls, c).pod_refresh, KnobId::CpuBurst));
    // kubelet resized the pod: UpdatePodSandbox with the new pod resources
    json pe = {
        {"event", "UpdatePodSandbox"},
        {"pod", {{"id", "p1"}, {"name", "web"}, {"namespace", "prod"}, {"annotations", ann}, {"linux", {{"cgroups_path", "/" + pod + "/p1"}}}}},
        {"linux_resources", {{"cpu", {{"quota", {{"value", 400000}}}, {"period", {{"value", 100000}}}}}}}};
    Request u = parse_nri_event(pe.dump());
    FactPlan p = e.run(cls, u);
    REQUIRE(knob(p.cls.pod, KnobId::CpuIdle));  // literal: kept, as before
    REQUIRE(knob(p.cls.pod, KnobId::CpuBurst));
    CHECK(knob(p.cls.pod, KnobId::CpuBurst)->value.num == 200000);  // Σ of the ledger
    // the one it cannot recompute (no volcano.sh/qos-level annotation): reported, with the reason
    CHECK_FALSE(knob(p.cls.pod, KnobId::CpuQosLevel));
    REQUIRE(p.refused.size() == 1);
    CHECK(p.refused[0].rfind("pod:cpu_qos_level: fact volcano.qos_level absent: no volcano.sh/qos-level annotation", 0) == 0);
    // the scheduler cpuset's quota lift, against the pod cgroup as kubelet left it
    FactPlan l = e.run(lift, u);
    REQUIRE(knob(l.cls.pod, KnobId::CpuQuota));
    CHECK(knob(l.cls.pod, KnobId::CpuQuota)->value.kind == KnobValue::Max);  // 2 CPUs × 100000 ≤ 400000: lifted again
}

// ---- issue #19 §1: a cpuset from an annotation, played by a hostile pod author ---------------

namespace {
const char* kLsr = R"([classes.C.container]
cpuset_cpus = { fact = "koordinator.cpuset" }
cpu_quota_us = { fact = "koordinator.cpuset_quota" }
)";
/// A container create asking for `cpuset` through resource-status, quota 4 CPUs (it pays for them).
Request pinned(const std::string& cpuset, const std::string& id = "c1", const std::string& sandbox = "sb1", const std::string& uid = "uid1") {
    return req_from("container-create.json",
                    {{"id", id},
                     {"sandboxID", sandbox},
                     {"spec",
                      {{"cgroupsPath", "/kubepods/pod" + uid + "/" + id},
                       {"annotations",
                        {{"scheduling.koordinator.sh/resource-status", "{\"cpuset\":\"" + cpuset + "\"}"}, {"io.kubernetes.cri.sandbox-uid", uid}}},
                       {"resources", {{"cpu", {{"quota", 400000}, {"period", 100000}, {"shares", 4096}}}}}}}});
}
/// A node with CPUs 0-7 (two nodes), pod cgroups of uid1..uid3 with effective cpusets 0-7.
void lsr_node(Env& e) {
    make_sysfs(e.t, "0-7", {{0, "0-3"}, {1, "4-7"}});
    for (const char* u : {"uid1", "uid2", "uid3"}) e.t.put(std::string("cg/cpuset/kubepods/pod") + u + "/cpuset.effective_cpus", "0-7\n");
}
bool refused_with(const FactPlan& p, const std::string& what) {
    for (const auto& r : p.refused)
        if (r.find(what) != std::string::npos) return true;
    return false;
}
}  // namespace

TEST_CASE("annotation cpuset: within the node's online CPUs", "[facts][cpuset-trust]") {
    Env e;
    lsr_node(e);
    FactPlan p = e.run(class_of(kLsr), pinned("6-9"));
    CHECK_FALSE(knob(p.cls.container, KnobId::CpusetCpus));
    CHECK_FALSE(knob(p.cls.container, KnobId::CpuQuota));  // a refused cpuset never lifts the quota
    CHECK(refused_with(
        p,
        "cpuset_cpus: fact koordinator.cpuset: scheduling.koordinator.sh/resource-status: cpuset 6-9 is not within the node's online CPUs 0-7 (CPUs 8-9)"));
    CHECK(refused_with(p, "cpu_quota_us: fact koordinator.cpuset_quota: cpuset not applied: quota kept"));
    CHECK(e.state.numa_records().empty());
}

TEST_CASE("annotation cpuset: within the pod cgroup's effective cpuset", "[facts][cpuset-trust]") {
    for (Layout lay : {Layout::V1, Layout::V2}) {
        Env e;
        make_sysfs(e.t, "0-7", {{0, "0-7"}});
        const bool v2 = lay == Layout::V2;
        e.t.put(std::string(v2 ? "cg/" : "cg/cpuset/") + "kubepods/poduid1/" + (v2 ? "cpuset.cpus.effective" : "cpuset.effective_cpus"), "0-3\n");
        FactPlan p = e.run(class_of(kLsr), pinned("2-5"), lay);
        CHECK_FALSE(knob(p.cls.container, KnobId::CpusetCpus));
        CHECK_FALSE(knob(p.cls.container, KnobId::CpuQuota));
        CHECK(refused_with(p, std::string("cpuset 2-5 is not within ") + (v2 ? "" : "cpuset/") + "kubepods/poduid1/" +
                                  (v2 ? "cpuset.cpus.effective" : "cpuset.effective_cpus") + " 0-3 (CPUs 4-5)"));
        // within it: pinned, and the lift waits for the cpuset
        p = e.run(class_of(kLsr), pinned("2-3"), lay);
        CHECK(knob(p.cls.container, KnobId::CpusetCpus)->value.text == "2-3");
        CHECK(knob(p.cls.container, KnobId::CpuQuota)->needs_cpuset == "2-3");
    }
    // no effective cpuset to check against: refused (fail-safe)
    Env e;
    make_sysfs(e.t, "0-7", {{0, "0-7"}});
    e.t.mkdir("cg/cpuset/kubepods/poduid1");
    FactPlan p = e.run(class_of(kLsr), pinned("2-3"));
    CHECK(refused_with(p, "cannot read cpuset.effective_cpus of cpuset/kubepods/poduid1 or its parents"));
}

TEST_CASE("annotation cpuset: never on CPUs kubelet's static CPU manager gave another pod", "[facts][cpuset-trust]") {
    Env e;
    lsr_node(e);
    e.t.put("cpu_manager_state",
            R"({"policyName":"static","defaultCpuSet":"0-1,4-7","entries":{"uid2":{"db":"2-3"},"uid1":{"own":"6"}},"checksum":7})");
    FactPlan p = e.run(class_of(kLsr), pinned("3-4"));
    CHECK_FALSE(knob(p.cls.container, KnobId::CpusetCpus));
    CHECK_FALSE(knob(p.cls.container, KnobId::CpuQuota));
    CHECK(refused_with(p, "cpuset 3-4 overlaps CPUs held exclusively by another pod: 3 (2-3 (kubelet static, pod uid2))"));
    // the pod's own exclusive CPUs are no obstacle
    p = e.run(class_of(kLsr), pinned("5-6"));
    CHECK(knob(p.cls.container, KnobId::CpusetCpus)->value.text == "5-6");
    // a malformed checkpoint refuses the pin
    e.t.put("cpu_manager_state", "{\"entries\":{\"uid2\":{\"db\":\"2-\"}}}");
    p = e.run(class_of(kLsr), pinned("0-1", "c9", "sb9", "uid3"));
    CHECK_FALSE(knob(p.cls.container, KnobId::CpusetCpus));
    CHECK(refused_with(p, "kubelet cpu_manager_state: entries.uid2.db"));
}

TEST_CASE("annotation cpuset: kubelet's exclusive CPUs unknown refuses the pin; policy none allows it (issue #30 §3)",
          "[facts][cpuset-trust][kubelet-unknown]") {
    Env e;
    lsr_node(e);
    // the checkpoint out of sight (its directory missing: a container without the host's
    // /var/lib/kubelet): kubelet may hold any CPU, so the pod-written cpuset is refused
    e.kubelet_cpu_state = e.t.path + "/host/var/lib/kubelet/cpu_manager_state";
    FactPlan p = e.run(class_of(kLsr), pinned("2-3"));
    CHECK_FALSE(knob(p.cls.container, KnobId::CpusetCpus));
    CHECK_FALSE(knob(p.cls.container, KnobId::CpuQuota));
    CHECK(refused_with(p, "cpuset_cpus: fact koordinator.cpuset: scheduling.koordinator.sh/resource-status: kubelet's exclusive CPUs unknown: " +
                              *e.kubelet_cpu_state + " cannot be read: kubelet's directory " + e.t.path +
                              "/host/var/lib/kubelet does not exist here"));
    CHECK(e.state.numa_records().empty());
    // explain (dry run) says the same
    p = e.run(class_of(kLsr), pinned("2-3"), Layout::V1, true);
    CHECK(refused_with(p, "kubelet's exclusive CPUs unknown: "));
    // a NUMA placement is refused for the same reason
    NumaRequest rq;
    rq.sysfs_root = e.t.path + "/sys";
    rq.cgroup_root = e.t.path + "/cg";
    rq.kubelet_cpu_state = *e.kubelet_cpu_state;
    rq.container_id = "n1";
    rq.sandbox_id = "sbn";
    rq.pod_uid = "uid3";
    rq.pod_dir = "kubepods/poduid3";
    rq.mode = NumaMode::Bound;
    rq.need = 2;
    rq.dry_run = true;
    CHECK(error_of([&] { place_numa(rq, e.state); }).find("kubelet's exclusive CPUs unknown: ") == 0);
    // kubelet's none policy (its checkpoint written with policyName "none", stale entries and
    // all): nothing held, the pin applies
    e.t.put("host/var/lib/kubelet/cpu_manager_state", R"({"policyName":"none","defaultCpuSet":"","entries":{"uid2":{"db":"2-3"}},"checksum":3})");
    p = e.run(class_of(kLsr), pinned("2-3"));
    REQUIRE(knob(p.cls.container, KnobId::CpusetCpus));
    CHECK(knob(p.cls.container, KnobId::CpusetCpus)->value.text == "2-3");
    CHECK(place_numa(rq, e.state).cpus.count() == 2);
}

TEST_CASE("annotation cpuset: never on CPUs nri-qos pinned or placed for another pod", "[facts][cpuset-trust]") {
    Env e;
    lsr_node(e);
    // resource-status declared: koord-scheduler's allocation, a pin that reserves its CPUs
    const Policy trust = guarding({"scheduling.koordinator.sh/resource-status"});
    e.policy = &trust;
    FactPlan p = e.run(class_of(kLsr), pinned("2-3"));  // pod 1 pins 2-3: recorded
    CHECK(knob(p.cls.container, KnobId::CpusetCpus)->value.text == "2-3");
    REQUIRE(e.state.numa_record("c1"));
    CHECK(e.state.numa_record("c1")->mode == "pin");
    p = e.run(class_of(kLsr), pinned("3", "c2", "sb2", "uid2"));  // pod 2 writes a cpuset on pod 1's CPU
    CHECK_FALSE(knob(p.cls.container, KnobId::CpusetCpus));
    CHECK_FALSE(knob(p.cls.container, KnobId::CpuQuota));
    CHECK(refused_with(p, "cpuset 3 overlaps CPUs held exclusively by another pod: 3 (2-3 (nri-qos pin c1)"));
    // another container of pod 1 shares the pod's cpuset
    p = e.run(class_of(kLsr), pinned("2-3", "c1b", "sb1", "uid1"));
    CHECK(knob(p.cls.container, KnobId::CpusetCpus)->value.text == "2-3");
    // an exclusive NUMA placement of another pod counts too
    NumaRecord r;
    r.container_id = "k1";
    r.sandbox_id = "sb3";
    r.pod_dir = "kubepods/poduid3";
    r.mode = "exclusive";
    r.nodes = "1";
    r.node = 1;
    r.cpus = "4-7";
    REQUIRE(e.state.put_numa(r).empty());
    p = e.run(class_of(kLsr), pinned("5", "c2", "sb2", "uid2"));
    CHECK(refused_with(p, "overlaps CPUs held exclusively by another pod: 5 (4-7 (nri-qos exclusive k1)"));
    // explain (dry run) checks the same and records nothing
    p = e.run(class_of(kLsr), pinned("0-1", "c2", "sb2", "uid2"), Layout::V1, true);
    CHECK(knob(p.cls.container, KnobId::CpusetCpus)->value.text == "0-1");
    CHECK(p.keep.empty());
    CHECK_FALSE(e.state.numa_record("c2"));
}

TEST_CASE("annotation cpuset: a refused pin keeps nothing; an untrusted one reserves nothing", "[facts][cpuset-trust][trust]") {
    Env e;
    lsr_node(e);  // nothing trusted
    // 8 CPUs on a quota of 4: the trust rule refuses it (issue #30 §2: it used to stay recorded)
    FactPlan p = e.run(class_of(kLsr), pinned("0-7"));
    CHECK_FALSE(knob(p.cls.container, KnobId::CpusetCpus));
    CHECK(p.keep.empty());
    CHECK(e.state.numa_records().empty());
    // so another pod's valid pin on those CPUs goes through; untrusted, it is recorded as the
    // container's own pin, no reservation
    p = e.run(class_of(kLsr), pinned("2-3", "c2", "sb2", "uid2"));
    CHECK(knob(p.cls.container, KnobId::CpusetCpus)->value.text == "2-3");
    REQUIRE(p.keep.size() == 1);
    CHECK(p.keep[0].rec.mode == "pin-shared");
    p = e.run(class_of(kLsr), pinned("3", "c3", "sb3", "uid3"));
    CHECK(knob(p.cls.container, KnobId::CpusetCpus)->value.text == "3");
    // kept only by the caller once the write landed: resolve_facts itself records nothing
    e.keep = false;
    p = e.run(class_of(kLsr), pinned("4-5", "c4", "sb3", "uid3"));
    REQUIRE(p.keep.size() == 1);
    CHECK_FALSE(e.state.numa_record("c4"));
}

TEST_CASE("sink: a quota lift waits for the cpuset, written and read back", "[facts][cpuset-trust]") {
    for (Layout lay : {Layout::V1, Layout::V2}) {
        const bool v2 = lay == Layout::V2;
        const std::string cs = v2 ? "kubepods/pod1/c1/cpuset.cpus" : "cpuset/kubepods/pod1/c1/cpuset.cpus";
        const std::string qf = v2 ? "kubepods/pod1/c1/cpu.max" : "cpu/kubepods/pod1/c1/cpu.cfs_quota_us";
        auto plan_of = [&](bool with_cpuset) {
            Plan plan;
            plan.layout = lay;
            if (with_cpuset) {
                Write c;
                c.knob = "cpuset_cpus";
                c.id = KnobId::CpusetCpus;
                c.scope = "container";
                c.rel = cs;
                c.value = "2-3";
                plan.writes.push_back(c);
            }
            Write q;
            q.knob = "cpu_quota_us";
            q.id = KnobId::CpuQuota;
            q.scope = "container";
            q.rel = qf;
            q.value = v2 ? "max" : "-1";
            q.needs_cpuset = "2-3";
            plan.writes.insert(plan.writes.begin(), q);  // the quota first in plan order: the sink still waits
            return plan;
        };
        auto quota_write = [](const Plan& p) -> const Write& { return p.writes[0]; };
        {  // the cpuset write succeeds and reads back: the quota is lifted after it
            Tmp t;
            t.put(cs, "");
            t.put(qf, "400000");
            FsKernel k(t.path, t.path + "/proc", t.path + "/rc");
            Plan p = plan_of(true);
            apply_plan(p, k);
            CHECK(p.writes[1].status == Write::Applied);
            CHECK(quota_write(p).status == Write::Applied);
            CHECK(quota_write(p).seq > p.writes[1].seq);
            CHECK(t.get(qf) == (v2 ? "max" : "-1"));
        }
        {  // the kernel refuses the cpuset write (here: cpuset.cpus is not a writable file)
            Tmp t;
            t.mkdir(cs);
            t.put(qf, "400000");
            FsKernel k(t.path, t.path + "/proc", t.path + "/rc");
            Plan p = plan_of(true);
            apply_plan(p, k);
            CHECK(p.writes[1].status == Write::Failed);
            CHECK(quota_write(p).status == Write::Failed);
            CHECK(quota_write(p).reason.find("cpuset not applied: quota kept (cpuset.cpus 2-3 failed") == 0);
            CHECK(t.get(qf) == "400000");
        }
        {  // native NRI StartContainer: the runtime applied something else; read back decides
            Tmp t;
            t.put(cs, "0-7\n");
            t.put(qf, "400000");
            FsKernel k(t.path, t.path + "/proc", t.path + "/rc");
            Plan p = plan_of(false);
            apply_plan(p, k);
            CHECK(quota_write(p).status == Write::Failed);
            CHECK(quota_write(p).reason == "cpuset not applied: quota kept (" + cs + " reads \"0-7\", not 2-3)");
            CHECK(t.get(qf) == "400000");
            t.put(cs, "2,3\n");  // the same set, written differently
            p = plan_of(false);
            apply_plan(p, k);
            CHECK(quota_write(p).status == Write::Applied);
        }
        if (v2) {  // cgroup v2 takes any cpuset.cpus; what counts is the effective set
            Tmp t;
            t.put(cs, "");
            t.put("kubepods/pod1/c1/cpuset.cpus.effective", "2\n");
            t.put(qf, "400000");
            FsKernel k(t.path, t.path + "/proc", t.path + "/rc");
            Plan p = plan_of(true);
            apply_plan(p, k);
            CHECK(quota_write(p).status == Write::Failed);
            CHECK(quota_write(p).reason.find("cpuset.cpus.effective reads \"2\", not 2-3") != std::string::npos);
        }
    }
}

TEST_CASE("Katalyst numa_exclusive: sized from the CPU request, across nodes", "[facts][numa][cpuset-trust]") {
    ClassDef cls = class_of(R"([classes.C.container]
cpuset_cpus = { fact = "katalyst.numa_cpus" }
cpuset_mems = { fact = "katalyst.numa_mems" }
)");
    const json ann = {{"katalyst.kubewharf.io/qos_level", "dedicated_cores"},
                      {"katalyst.kubewharf.io/memory_enhancement", R"({"numa_binding":"true","numa_exclusive":"true"})"}};
    auto ctr = [&](const std::string& id, const std::string& pod, int64_t shares) {
        return req_from(
            "container-create.json",
            {{"id", id},
             {"sandboxID", "sb-" + pod},
             {"spec", {{"cgroupsPath", "/kubepods/" + pod + "/" + id}, {"annotations", ann}, {"resources", {{"cpu", {{"shares", shares}}}}}}}});
    };
    Env e;
    // Katalyst's annotations declared (trusted): the placement itself is under test here
    const Policy trust =
        guarding({"katalyst.kubewharf.io/qos_level", "katalyst.kubewharf.io/memory_enhancement", "katalyst.kubewharf.io/cpu_enhancement"});
    e.policy = &trust;
    make_sysfs(e.t, "0-15", {{0, "0-3"}, {1, "4-7"}, {2, "8-11"}, {3, "12-15"}});
    for (const char* p : {"podA", "podB", "podC"}) e.t.mkdir(std::string("cg/cpuset/kubepods/") + p);
    // 6 CPUs on 4-CPU nodes: two nodes, all their CPUs, mems of both
    FactPlan p = e.run(cls, ctr("a1", "podA", 6144));
    CHECK(knob(p.cls.container, KnobId::CpusetCpus)->value.text == "0-7");
    CHECK(knob(p.cls.container, KnobId::CpusetMems)->value.text == "0-1");
    CHECK(p.calcs[0].find("ceil(shares 6144 / 1024) = 6 CPU(s)") != std::string::npos);
    // a later container of the pod: the same nodes
    p = e.run(cls, ctr("a2", "podA", 1024));
    CHECK(knob(p.cls.container, KnobId::CpusetMems)->value.text == "0-1");
    // kubelet holds CPU 9: node2 is not free, the next pair is skipped past it
    e.t.put("cpu_manager_state", R"({"policyName":"static","entries":{"podZ":{"c":"9"}}})");
    p = e.run(cls, ctr("b1", "podB", 5120), Layout::V1, true);
    CHECK_FALSE(knob(p.cls.container, KnobId::CpusetCpus));
    CHECK(refused_with(p, "no NUMA node fits exclusive placement of 5 CPU(s)"));
    p = e.run(cls, ctr("b1", "podB", 4096));  // one free node is enough
    CHECK(knob(p.cls.container, KnobId::CpusetCpus)->value.text == "12-15");
    CHECK(knob(p.cls.container, KnobId::CpusetMems)->value.text == "3");
}

TEST_CASE("Katalyst reserved CPUs: never handed out, never disqualifying (settings.katalyst_reserved_cpus)", "[facts][numa][katalyst-reserved]") {
    // katalyst-core pkg/agent/qrm-plugins/cpu/dynamicpolicy/policy_hint_handlers.go calculateHints:
    // a numa_exclusive request sees 0 CPUs only on a node with allocated CPUs; elsewhere
    // GetAvailableCPUSet(reservedCPUs) = the node's CPUs minus the reserved ones;
    // allocateNumaBindingCPUs hands out those.
    NumaTopology t;
    t.nodes = {{0, *CpuSet::parse("0-3")}, {1, *CpuSet::parse("4-7")}};
    t.online = *CpuSet::parse("0-7");
    std::string why;
    const CpuSet reserved = *CpuSet::parse("0-1");
    auto c = choose_numa(t, CpuSet(), NumaMode::Exclusive, 2, std::nullopt, why, reserved);
    REQUIRE(c);
    CHECK(c->node == 0);  // node0 still qualifies
    CHECK(c->cpus.str() == "2-3");  // but its reserved CPUs are not handed out
    CHECK(c->why.find("node0 has reserved CPUs 0-1 (not handed out, not disqualifying)") != std::string::npos);
    // 6 CPUs on 4-CPU nodes with 2 reserved: 2 + 4 available on the two nodes — enough
    c = choose_numa(t, CpuSet(), NumaMode::Exclusive, 6, std::nullopt, why, reserved);
    REQUIRE(c);
    CHECK(c->cpus.str() == "2-7");
    CHECK(c->nodes.str() == "0-1");
    // 7 CPUs: only 6 available: refused (without the reserve it fits)
    CHECK_FALSE(choose_numa(t, CpuSet(), NumaMode::Exclusive, 7, std::nullopt, why, reserved));
    CHECK(choose_numa(t, CpuSet(), NumaMode::Exclusive, 7, std::nullopt, why));
    // a held CPU still disqualifies; a reserved one is never given to bound/shared placements
    c = choose_numa(t, *CpuSet::parse("4"), NumaMode::Exclusive, 2, std::nullopt, why, reserved);
    REQUIRE(c);
    CHECK(c->cpus.str() == "2-3");
    c = choose_numa(t, CpuSet(), NumaMode::Bound, 2, std::nullopt, why, reserved);
    REQUIRE(c);
    CHECK(c->cpus.str() == "2-3");
    c = choose_numa(t, CpuSet(), NumaMode::Shared, 1, std::nullopt, why, *CpuSet::parse("4-6"));
    REQUIRE(c);
    CHECK(c->cpus.str() == "0-3");
    // the count form: TakeHTByNUMABalance, one CPU of each node per round
    CHECK(katalyst_reserved_by_count(t, 2).str() == "0,4");
    CHECK(katalyst_reserved_by_count(t, 3).str() == "0-1,4");
    CHECK(katalyst_reserved_by_count(t, 0).str() == "");
    CHECK(katalyst_reserved_by_count(t, 100).str() == "0-7");
}

TEST_CASE("NUMA choice: Katalyst numa_number / numa_ids (NumaSpan), bound placements across nodes", "[facts][numa][katalyst-span]") {
    // katalyst-core@d8c28ea pkg/agent/qrm-plugins/cpu/dynamicpolicy/policy_hint_handlers.go calculateHints
    // on machine.GenerateDummyCPUTopology(16, 2, 4): node n = cores 2n, 2n+1 and their siblings +8.
    NumaTopology t;
    t.nodes = {{0, *CpuSet::parse("0-1,8-9")}, {1, *CpuSet::parse("2-3,10-11")}, {2, *CpuSet::parse("4-5,12-13")}, {3, *CpuSet::parse("6-7,14-15")}};
    t.online = *CpuSet::parse("0-15");
    t.siblings.assign(16, CpuSet());
    for (unsigned c = 0; c < 16; ++c) t.siblings[c] = *CpuSet::parse(std::to_string(c % 8) + "," + std::to_string(c % 8 + 8));
    std::string why;
    NumaSpan two;
    two.number = 2;
    // exclusive, numa_number 2 ("req with numa number makes sure that the hints only belong to those numa nodes")
    auto c = choose_numa(t, CpuSet(), NumaMode::Exclusive, 2, std::nullopt, why, CpuSet(), two);
    REQUIRE(c);
    CHECK(c->nodes.str() == "0-1");
    CHECK(c->cpus.str() == "0-3,8-11");
    CHECK(c->why.find("(cpu_enhancement numa_number 2)") != std::string::npos);
    // without the span: the one node it fits
    c = choose_numa(t, CpuSet(), NumaMode::Exclusive, 2, std::nullopt, why);
    REQUIRE(c);
    CHECK(c->nodes.str() == "0");
    // a held CPU disqualifies node0 for exclusive: {1,2}
    c = choose_numa(t, *CpuSet::parse("9"), NumaMode::Exclusive, 2, std::nullopt, why, CpuSet(), two);
    REQUIRE(c);
    CHECK(c->nodes.str() == "1-2");
    // numa_ids 1-3 ("req with numa ID for multiple numa nodes"), and ids win over number
    NumaSpan ids;
    ids.ids = *CpuSet::parse("1-3");
    ids.number = 2;
    c = choose_numa(t, CpuSet(), NumaMode::Exclusive, 4, std::nullopt, why, CpuSet(), ids);
    REQUIRE(c);
    CHECK(c->nodes.str() == "1-3");
    CHECK(c->cpus.str() == "2-7,10-15");
    // a named node that is not free: refused
    CHECK_FALSE(choose_numa(t, *CpuSet::parse("3"), NumaMode::Exclusive, 4, std::nullopt, why, CpuSet(), ids));
    // a number below the nodes the request needs (12 CPUs: 3 nodes of 4): no combination
    CHECK_FALSE(choose_numa(t, CpuSet(), NumaMode::Exclusive, 12, std::nullopt, why, CpuSet(), two));
    CHECK(why.find("no cpu_enhancement numa_number 2 combination") != std::string::npos);
    // out of range: AnnotationsGetNUMANumber / AnnotationsGetNUMAIDs refuse
    NumaSpan five;
    five.number = 5;
    CHECK_FALSE(choose_numa(t, CpuSet(), NumaMode::Bound, 2, std::nullopt, why, CpuSet(), five));
    CHECK(why == "cpu_enhancement numa_number 5 is outside the node's NUMA nodes 0-3 (Katalyst refuses the pod)");
    NumaSpan far;
    far.ids = *CpuSet::parse("4");
    CHECK_FALSE(choose_numa(t, CpuSet(), NumaMode::Exclusive, 2, std::nullopt, why, CpuSet(), far));

    // bound, larger than one node, no numa_number: refused as Katalyst refuses it
    CHECK_FALSE(choose_numa(t, CpuSet(), NumaMode::Bound, 8, std::nullopt, why));
    CHECK(why.find("8 CPUs are more than one node's 4: a non-exclusive binding spans nodes only with cpu_enhancement numa_number ≥ 2") !=
          std::string::npos);
    // bound, numa_number 4, each node with one CPU held ("req with numa number gives valid hints
    // when each numa has 1 CPU allocated": 9, 2, 4, 6): 8 CPUs of nodes 0-3, whole cores first
    NumaSpan four;
    four.number = 4;
    c = choose_numa(t, *CpuSet::parse("2,4,6,9"), NumaMode::Bound, 8, std::nullopt, why, CpuSet(), four);
    REQUIRE(c);
    CHECK(c->nodes.str() == "0-3");
    CHECK(c->node == 0);
    CHECK(c->cpus.str() == "0,3,5,7-8,11,13,15");
    // bound, numa_number 2: the lowest pair whose free CPUs hold the request, never a held CPU
    c = choose_numa(t, *CpuSet::parse("0-1,8"), NumaMode::Bound, 6, std::nullopt, why, CpuSet(), two);
    REQUIRE(c);
    CHECK(c->nodes.str() == "1-2");
    CHECK(c->cpus.str() == "2-4,10-12");
    CHECK_FALSE(c->cpus.intersects(*CpuSet::parse("0-1,8")));
    // bound with numa_number 1 or numa_ids of one node: one node, the named one
    NumaSpan one_id;
    one_id.ids = *CpuSet::parse("2");
    c = choose_numa(t, CpuSet(), NumaMode::Bound, 2, std::nullopt, why, CpuSet(), one_id);
    REQUIRE(c);
    CHECK(c->nodes.str() == "2");
    CHECK(c->cpus.str() == "4,12");
    // shared placements take no span (calculateHintsForNUMABindingSharedCores passes none)
    c = choose_numa(t, CpuSet(), NumaMode::Shared, 2, std::nullopt, why, CpuSet(), four);
    REQUIRE(c);
    CHECK(c->nodes.count() == 1);
}

TEST_CASE("Katalyst numa_number through the facts: recorded, held against the next pod, numa_exclusive by default (settings)",
          "[facts][numa][katalyst-span]") {
    ClassDef cls = class_of(R"([classes.C.container]
cpuset_cpus = { fact = "katalyst.numa_cpus" }
cpuset_mems = { fact = "katalyst.numa_mems" }
)");
    Policy trust = guarding({"katalyst.kubewharf.io/qos_level", "katalyst.kubewharf.io/memory_enhancement", "katalyst.kubewharf.io/cpu_enhancement"});
    auto ctr = [&](const std::string& id, const std::string& pod, int64_t shares, const std::string& mem, const std::string& cpu) {
        json ann = {{"katalyst.kubewharf.io/qos_level", "dedicated_cores"}, {"katalyst.kubewharf.io/memory_enhancement", mem}};
        if (!cpu.empty()) ann["katalyst.kubewharf.io/cpu_enhancement"] = cpu;
        return req_from(
            "container-create.json",
            {{"id", id},
             {"sandboxID", "sb-" + pod},
             {"spec", {{"cgroupsPath", "/kubepods/" + pod + "/" + id}, {"annotations", ann}, {"resources", {{"cpu", {{"shares", shares}}}}}}}});
    };
    Env e;
    e.policy = &trust;
    make_sysfs(e.t, "0-15", {{0, "0-3"}, {1, "4-7"}, {2, "8-11"}, {3, "12-15"}}, true);
    for (const char* p : {"podA", "podB", "podC", "podD"}) e.t.mkdir(std::string("cg/cpuset/kubepods/") + p);
    // bound, 6 CPUs, numa_number 2: spans nodes 0-1, recorded like an exclusive placement
    FactPlan a = e.run(cls, ctr("a1", "podA", 6144, R"({"numa_binding":"true"})", R"({"katalyst.kubewharf.io/numa_number":"2"})"));
    REQUIRE(knob(a.cls.container, KnobId::CpusetCpus));
    CHECK(knob(a.cls.container, KnobId::CpusetCpus)->value.text == "0-5");
    CHECK(knob(a.cls.container, KnobId::CpusetMems)->value.text == "0-1");
    CHECK(a.calcs[0].find("katalyst dedicated_cores numa_binding + numa_number 2") != std::string::npos);
    auto rec = e.state.numa_record("a1");
    REQUIRE(rec);
    CHECK(rec->mode == "bound");
    CHECK(rec->nodes == "0-1");
    CHECK(rec->cpus == "0-5");
    // the next pod never gets those CPUs: 4 CPUs on exactly 2 nodes; {0,1} has 2 free (6-7), the
    // next pair {0,2} has 4 (node0 none: Katalyst sums a mask's available CPUs, an empty node included)
    FactPlan b = e.run(cls, ctr("b1", "podB", 4096, R"({"numa_binding":"true"})", R"({"katalyst.kubewharf.io/numa_number":"2"})"));
    REQUIRE(knob(b.cls.container, KnobId::CpusetCpus));
    CHECK(knob(b.cls.container, KnobId::CpusetCpus)->value.text == "8-11");
    CHECK(knob(b.cls.container, KnobId::CpusetMems)->value.text == "0,2");
    // without numa_number, a bound placement larger than a node is refused (one line, no record)
    FactPlan c = e.run(cls, ctr("c1", "podC", 6144, R"({"numa_binding":"true"})", ""));
    CHECK_FALSE(knob(c.cls.container, KnobId::CpusetCpus));
    REQUIRE_FALSE(c.refused.empty());
    CHECK(c.refused[0].find("a non-exclusive binding spans nodes only with cpu_enhancement numa_number") != std::string::npos);
    CHECK(c.refused[0].find('\n') == std::string::npos);
    CHECK_FALSE(e.state.numa_record("c1"));
    // a bad numa_number: one-line error
    FactPlan bad = e.run(cls, ctr("c2", "podC", 1024, R"({"numa_binding":"true"})", R"({"katalyst.kubewharf.io/numa_number":"two"})"));
    REQUIRE_FALSE(bad.refused.empty());
    CHECK(bad.refused[0].find("numa_number \"two\" is not a number of NUMA nodes") != std::string::npos);
    // settings.katalyst_default_numa_exclusive: an undeclared numa_exclusive is true → node3 whole
    trust.katalyst_default_numa_exclusive = true;
    FactPlan d = e.run(cls, ctr("d1", "podD", 1024, R"({"numa_binding":"true"})", ""));
    REQUIRE(knob(d.cls.container, KnobId::CpusetCpus));
    CHECK(knob(d.cls.container, KnobId::CpusetCpus)->value.text == "12-15");
    CHECK(d.calcs[0].find("numa_exclusive (settings.katalyst_default_numa_exclusive") != std::string::npos);
    // a declared "false" wins over the default
    e.t.mkdir("cg/cpuset/kubepods/podE");
    FactPlan x = e.run(cls, ctr("e1", "podE", 1024, R"({"numa_binding":"true","numa_exclusive":"false"})", ""));
    REQUIRE(knob(x.cls.container, KnobId::CpusetCpus));
    CHECK(knob(x.cls.container, KnobId::CpusetCpus)->value.text == "6");
}

TEST_CASE("Katalyst reserved CPUs through the policy and the katalyst.numa_* facts", "[facts][numa][katalyst-reserved]") {
    auto text = [](const std::string& settings) {
        return "version = 1\n[settings]\ndefault_class = \"C\"\n" + settings +
               "[guarded.annotations]\n\"katalyst.kubewharf.io/qos_level\" = \"t\"\n"
               "\"katalyst.kubewharf.io/memory_enhancement\" = \"t\"\n"
               "\"katalyst.kubewharf.io/cpu_enhancement\" = \"t\"\n"
               "[classes.C.container]\ncpuset_cpus = { fact = \"katalyst.numa_cpus\" }\n"
               "cpuset_mems = { fact = \"katalyst.numa_mems\" }\n";
    };
    auto policy = [&](const std::string& settings) {
        PolicyCheck chk = check_policy_text(text(settings), "p.toml");
        INFO(settings);
        REQUIRE(chk.errors() == 0);
        return chk.policy;
    };
    const Policy list = policy("katalyst_reserved_cpus = \"1,0\"\n");
    CHECK(list.katalyst_reserved_cpus == "0-1");
    const Policy count = policy("katalyst_reserved_cpus = 2\n");
    CHECK(count.katalyst_reserved_count == 2);
    const Policy none = policy("");
    for (const char* bad : {"katalyst_reserved_cpus = \"x\"\n", "katalyst_reserved_cpus = -1\n", "katalyst_reserved_cpus = true\n"}) {
        INFO(bad);
        PolicyCheck chk = check_policy_text(text(bad), "p.toml");
        REQUIRE(chk.errors() == 1);
        CHECK(format_diag("p.toml", chk.diags[0]).find("settings.katalyst_reserved_cpus") != std::string::npos);
    }
    // the compiled forms keep it
    CHECK(policy_from_json(policy_to_json(list)).katalyst_reserved_cpus == "0-1");
    CHECK(policy_from_json(policy_to_json(count)).katalyst_reserved_count == 2);

    const json ann = {{"katalyst.kubewharf.io/qos_level", "dedicated_cores"},
                      {"katalyst.kubewharf.io/memory_enhancement", R"({"numa_binding":"true","numa_exclusive":"true"})"}};
    auto ctr = [&](const std::string& id, const std::string& pod, int64_t shares) {
        return req_from(
            "container-create.json",
            {{"id", id},
             {"sandboxID", "sb-" + pod},
             {"spec", {{"cgroupsPath", "/kubepods/" + pod + "/" + id}, {"annotations", ann}, {"resources", {{"cpu", {{"shares", shares}}}}}}}});
    };
    for (const Policy* p : {&list, &count, &none}) {
        Env e;
        e.policy = p;
        make_sysfs(e.t, "0-7", {{0, "0-3"}, {1, "4-7"}});
        e.t.mkdir("cg/cpuset/kubepods/podA");
        FactPlan r = e.run(p->classes.at("C"), ctr("a1", "podA", 2048), Layout::V1, true);
        const KnobSetting* k = knob(r.cls.container, KnobId::CpusetCpus);
        REQUIRE(k);
        if (p == &list) {
            CHECK(k->value.text == "2-3");  // node0, without its reserved CPUs
            CHECK(r.calcs[0].find("Katalyst reserved CPUs 0-1 (settings.katalyst_reserved_cpus)") != std::string::npos);
        } else if (p == &count) {
            CHECK(k->value.text == "1-3");  // 2 reserved by NUMA balance: 0 and 4
            CHECK(r.calcs[0].find("Katalyst reserved CPUs 0,4") != std::string::npos);
        } else {
            CHECK(k->value.text == "0-3");
        }
    }
    // generic numa.* placements are not Katalyst's: the reserve does not apply to them
    Env e;
    e.policy = &list;
    make_sysfs(e.t, "0-7", {{0, "0-3"}, {1, "4-7"}});
    e.t.mkdir("cg/cpuset/kubepods/podG");
    FactPlan g =
        e.run(class_of("[classes.C.container]\ncpuset_cpus = { fact = \"numa.exclusive_cpus\" }\n"),
              req_from("container-create.json", {{"spec", {{"cgroupsPath", "/kubepods/podG/c1"}, {"resources", {{"cpu", {{"shares", 2048}}}}}}}}),
              Layout::V1, true);
    CHECK(knob(g.cls.container, KnobId::CpusetCpus)->value.text == "0-3");
}

TEST_CASE("NUMA: a BestEffort pod, or one without a CPU request, never reserves a node", "[facts][numa][cpuset-trust]") {
    ClassDef cls = class_of(R"([classes.C.container]
cpuset_cpus = { fact = "numa.exclusive_cpus" }
cpuset_mems = { fact = "numa.exclusive_mems" }
)");
    Env e;
    make_sysfs(e.t, "0-7", {{0, "0-3"}, {1, "4-7"}});
    auto ctr = [&](const std::string& path, const json& cpu) {
        return req_from("container-create.json", {{"spec", {{"cgroupsPath", path}, {"resources", {{"cpu", cpu}}}}}});
    };
    e.t.mkdir("cg/cpuset/kubepods/besteffort/podbe");
    FactPlan p = e.run(cls, ctr("/kubepods/besteffort/podbe/c1", {{"shares", 2}}));
    CHECK(p.cls.container.empty());
    REQUIRE(p.skipped.size() == 2);
    CHECK(p.skipped[0].find("a BestEffort pod has no CPU request: no exclusive NUMA placement") != std::string::npos);
    // even with shares forged into the spec: the BestEffort tier decides
    p = e.run(cls, ctr("/kubepods/besteffort/podbe/c1", {{"shares", 8192}}));
    CHECK(p.cls.container.empty());
    e.t.mkdir("cg/cpuset/kubepods/burstable/podnr");
    p = e.run(cls, ctr("/kubepods/burstable/podnr/c1", {{"shares", 2}, {"quota", 800000}, {"period", 100000}}));
    CHECK(p.cls.container.empty());  // a limit is no request
    CHECK(p.skipped[0].find("the container has no CPU request (shares 2)") != std::string::npos);
    CHECK(e.state.numa_records().empty());
    struct stat st {};
    CHECK(stat((e.t.path + "/state/facts").c_str(), &st) != 0);  // no lock, no state for them
}

TEST_CASE("NUMA: the shared_cores pool is not held", "[facts][numa][cpuset-trust]") {
    ClassDef cls = class_of(R"([classes.C.container]
cpuset_cpus = { fact = "numa.exclusive_cpus" }
cpuset_mems = { fact = "numa.exclusive_mems" }
)");
    Env e;
    make_sysfs(e.t, "0-7", {{0, "0-3"}, {1, "4-7"}});
    // a Guaranteed shared_cores pod on Katalyst's share pool 0-3 (no Burstable pod shows the pool)
    e.t.put("cg/cpuset/kubepods/podshared/app/cpuset.cpus", "0-3\n");
    e.t.mkdir("cg/cpuset/kubepods/poddedicated");
    Request r =
        req_from("container-create.json", {{"spec", {{"cgroupsPath", "/kubepods/poddedicated/c1"}, {"resources", {{"cpu", {{"shares", 4096}}}}}}}});
    FactPlan p = e.run(cls, r);
    CHECK(knob(p.cls.container, KnobId::CpusetCpus)->value.text == "0-3");  // placed on the pool's node, as Katalyst does
    CHECK(p.calcs[0].find("held CPUs: none") != std::string::npos);
}

// ---- trust (issue #19): a hostile pod author per raising fact -----------------------------------

namespace {
/// The fixture container create, in pod cgroup kubepods/<qos>/podt (qos "" = Guaranteed), with
/// `ann` as its annotations and `cpu` as its OCI CPU resources.
Request hostile_req(const std::string& qos, const json& ann, const json& cpu = json::object(), const char* file = "container-create.json") {
    json patch = {
        {"spec",
         {{"annotations", ann},
          {"cgroupsPath", "/kubepods/" + (qos.empty() ? "" : qos + "/") + "podt/" + (std::string(file) == "sandbox-create.json" ? "sb" : "c1")}}}};
    if (!cpu.empty()) patch["spec"]["resources"] = {{"cpu", cpu}};
    if (qos == "besteffort") patch["spec"]["resources"]["memory"] = nullptr;  // kubelet: no limit
    return req_from(file, patch);
}
}  // namespace

TEST_CASE("trust: Koordinator batch facts apply only to BestEffort pods", "[facts][trust]") {
    ClassDef cls = class_of(R"([classes.C.container]
cpu_shares = { fact = "koordinator.batch_cpu_shares" }
cpu_quota_us = { fact = "koordinator.batch_cfs_quota" }
memory_limit = { fact = "koordinator.batch_memory_limit" }
)");
    const json ann = {
        {"node.koordinator.sh/extended-resource-spec",
         R"({"containers":{"cgfs-ctr":{"limits":{"kubernetes.io/batch-cpu":"64k","kubernetes.io/batch-memory":"64Gi"},"requests":{"kubernetes.io/batch-cpu":"64k"}}}})"}};
    Env e;
    const Policy trust = guarding({"node.koordinator.sh/extended-resource-spec"});
    e.policy = &trust;  // even declared: koord-manager never writes it on a non-BestEffort pod
    for (const char* qos : {"burstable", ""}) {
        INFO(qos);
        FactPlan p = e.run(cls, hostile_req(qos, ann));
        CHECK(p.cls.container.empty());
        REQUIRE(p.refused.size() == 3);
        CHECK(p.refused[0] == std::string("cpu_shares: fact koordinator.batch_cpu_shares refused: koord-manager gives batch resources only to "
                                          "BestEffort pods, this pod is ") +
                                  (*qos ? "burstable" : "guaranteed") + " (kubelet's values stay)");
    }
    FactPlan p = e.run(cls, hostile_req("besteffort", ann, {{"shares", 2}}));
    CHECK(knob(p.cls.container, KnobId::CpuShares)->value.num == milli_cpu_to_shares(64000));
    CHECK(p.refused.empty());
}

TEST_CASE("trust: untrusted batch resources apply only where they lower", "[facts][trust]") {
    ClassDef cls = class_of(R"([classes.C.container]
cpu_shares = { fact = "koordinator.batch_cpu_shares" }
cpu_quota_us = { fact = "koordinator.batch_cfs_quota" }
memory_limit = { fact = "koordinator.batch_memory_limit" }
[classes.C.pod]
cpu_shares = { fact = "koordinator.pod_batch_cpu_shares" }
cpu_quota_us = { fact = "koordinator.pod_batch_cfs_quota" }
memory_limit = { fact = "koordinator.pod_batch_memory_limit" }
)");
    const json ann = {
        {"node.koordinator.sh/extended-resource-spec",
         R"({"containers":{"cgfs-ctr":{"limits":{"kubernetes.io/batch-cpu":"2k","kubernetes.io/batch-memory":"1Gi"},"requests":{"kubernetes.io/batch-cpu":"64k"}}}})"}};
    Env e;  // nothing guarded: a pod author wrote the annotation
    FactPlan p = e.run(cls, hostile_req("besteffort", ann, {{"shares", 2}}));
    CHECK_FALSE(knob(p.cls.container, KnobId::CpuShares));  // 64 CPUs of shares above kubelet's 2: refused
    REQUIRE(p.refused.size() == 1);
    CHECK(p.refused[0] ==
          "cpu_shares: fact koordinator.batch_cpu_shares refused: would raise cpu.shares (kubelet's cpu.shares 2 → 65536); "
          "untrusted annotation node.koordinator.sh/extended-resource-spec (declare it in [guarded.annotations] to trust it)");
    CHECK(knob(p.cls.container, KnobId::CpuQuota)->value.num == 200000);  // BestEffort has no quota: a quota restricts
    CHECK(knob(p.cls.container, KnobId::MemoryLimit)->value.num == 1073741824);
    CHECK(knob(p.cls.container, KnobId::CpuQuota)
              ->note.find("; untrusted, applied: does not raise (kubelet set no CFS quota: a quota only restricts)") != std::string::npos);
    // pod level at the sandbox event: kubelet's BestEffort pod cgroup (shares 2, no quota, no limit)
    e.t.put("cg/cpu/kubepods/besteffort/podt/cpu.shares", "2\n");
    e.t.put("cg/cpu/kubepods/besteffort/podt/cpu.cfs_quota_us", "-1\n");
    e.t.put("cg/memory/kubepods/besteffort/podt/memory.limit_in_bytes", "9223372036854771712\n");
    p = e.run(cls, hostile_req("besteffort", ann, json::object(), "sandbox-create.json"));
    INFO(json(p.refused).dump());
    CHECK_FALSE(knob(p.cls.pod, KnobId::CpuShares));
    REQUIRE(p.refused.size() == 1);
    CHECK(p.refused[0].rfind("pod:cpu_shares: fact koordinator.pod_batch_cpu_shares refused: would raise cpu.shares (the pod's cpu.shares 2 → 65536)",
                             0) == 0);
    CHECK(knob(p.cls.pod, KnobId::CpuQuota)->value.num == 200000);
    CHECK(knob(p.cls.pod, KnobId::MemoryLimit)->value.num == 1073741824);
    // a memory limit above a Burstable-like pod's own limit (the container's OCI limit 64Mi)
    ClassDef mem = class_of("[classes.C.container]\nmemory_limit = { fact = \"koordinator.batch_memory_limit\" }\n");
    Request lim = hostile_req("besteffort", ann);
    lim.resources.mem_limit = 67108864;  // as if the container had a 64 MiB limit
    p = e.run(mem, lim);
    REQUIRE(p.refused.size() == 1);
    CHECK(p.refused[0].find("would set memory_limit 1073741824 above the container's memory limit 67108864") != std::string::npos);
}

TEST_CASE("trust: a CPU burst above kubelet's quota needs a trusted annotation", "[facts][trust]") {
    // container: the class raises the quota to 300 % and the pod opts into a burst = quota
    ClassDef cls = class_of(R"([classes.C.container]
cpu_quota_us = 300000
cpu_burst_us = { fact = "volcano.cpu_burst_us" }
[classes.C.pod]
cpu_burst_us = { fact = "volcano.pod_cpu_burst_us" }
)");
    Env e;
    make_sysfs(e.t, "0-7", {{0, "0-7"}});
    e.t.put("cg/cpu/kubepods/burstable/podt/cpu.cfs_quota_us", "100000\n");  // kubelet's pod quota: 1 CPU
    e.t.put("cg/cpu/kubepods/burstable/podt/cpu.cfs_period_us", "100000\n");
    const json ann = {{"volcano.sh/enable-quota-burst", "true"}};
    FactPlan p = e.run(cls, hostile_req("burstable", ann, {{"quota", 100000}, {"period", 100000}}));
    CHECK_FALSE(knob(p.cls.container, KnobId::CpuBurst));
    REQUIRE_FALSE(p.refused.empty());
    CHECK(p.refused[0] ==
          "cpu_burst_us: fact volcano.cpu_burst_us refused: would set a CFS burst 300000 above kubelet's CFS quota 100000; "
          "untrusted annotation volcano.sh/enable-quota-burst, volcano.sh/quota-burst-time (declare it in [guarded.annotations] to trust it)");
    // pod: the ledger sums two containers' bursts within their own quotas, above the pod's quota
    ClassDef plain = class_of(R"([classes.C.container]
cpu_burst_us = { fact = "volcano.cpu_burst_us" }
[classes.C.pod]
cpu_burst_us = { fact = "volcano.pod_cpu_burst_us" }
)");
    auto ctr = [&](const char* id) {
        Request r = hostile_req("burstable", ann, {{"quota", 100000}, {"period", 100000}});
        r.id = id;
        return r;
    };
    p = e.run(plain, ctr("c1"));
    CHECK(knob(p.cls.container, KnobId::CpuBurst)->value.num == 100000);  // ≤ its quota: applied untrusted
    CHECK(knob(p.pod_refresh, KnobId::CpuBurst)->value.num == 100000);
    p = e.run(plain, ctr("c2"));
    CHECK_FALSE(knob(p.pod_refresh, KnobId::CpuBurst));  // Σ 200000 above the pod's 100000
    REQUIRE(p.refused.size() == 1);
    CHECK(p.refused[0].rfind(
              "pod:cpu_burst_us: fact volcano.pod_cpu_burst_us refused: would set a CFS burst 200000 above the pod's cpu.cfs_quota_us 100000", 0) ==
          0);
    // declared: Volcano's behaviour
    const Policy trust = guarding({"volcano.sh/enable-quota-burst", "volcano.sh/quota-burst-time"});
    e.policy = &trust;
    CHECK(knob(e.run(plain, ctr("c2")).pod_refresh, KnobId::CpuBurst)->value.num == 200000);
    CHECK(knob(e.run(cls, hostile_req("burstable", ann, {{"quota", 100000}, {"period", 100000}})).cls.container, KnobId::CpuBurst)->value.num ==
          300000);
}

TEST_CASE("trust: volcano.sh/qos-level raises cpu.qos_level only when trusted", "[facts][trust]") {
    ClassDef cls = class_of(
        "[classes.C.container]\ncpu_qos_level = { fact = \"volcano.qos_level\" }\n"
        "[classes.C.pod]\ncpu_qos_level = { fact = \"volcano.qos_level\" }\n");
    Env e;
    FactPlan p = e.run(cls, hostile_req("burstable", {{"volcano.sh/qos-level", "HLS"}}));
    CHECK(p.cls.container.empty());
    REQUIRE(p.refused.size() == 1);
    CHECK(p.refused[0] ==
          "cpu_qos_level: fact volcano.qos_level refused: would raise cpu_qos_level to 2 (unclassified pods have 0); "
          "untrusted annotation volcano.sh/qos-level (declare it in [guarded.annotations] to trust it)");
    CHECK(knob(e.run(cls, hostile_req("burstable", {{"volcano.sh/qos-level", "BE"}})).cls.container, KnobId::CpuQosLevel)->value.num == -1);
    // trusted by namespace: the class's gate.namespaces lists the pod's namespace
    ClassDef gated = class_of("[classes.C.container]\ncpu_qos_level = { fact = \"volcano.qos_level\" }\n");
    gated.gate.enabled = true;
    gated.gate.namespaces = {"default"};
    Request r = hostile_req("burstable", {{"volcano.sh/qos-level", "HLS"}});
    REQUIRE(r.pod_namespace == "default");
    p = e.run(gated, r);
    CHECK(knob(p.cls.container, KnobId::CpuQosLevel)->value.num == 2);
    CHECK(p.calcs[0].find("trusted: namespace \"default\" is in classes.C.gate.namespaces") != std::string::npos);
}

TEST_CASE("trust: an untrusted Katalyst NUMA binding reserves nothing", "[facts][trust][numa]") {
    ClassDef cls = class_of(R"([classes.C.container]
cpuset_cpus = { fact = "katalyst.numa_cpus" }
cpuset_mems = { fact = "katalyst.numa_mems" }
)");
    Env e;
    make_sysfs(e.t, "0-7", {{0, "0-3"}, {1, "4-7"}});
    e.t.put("cg/cpuset/kubepods/burstable/podt/cpuset.cpus", "0-7\n");
    const json ann = {{"katalyst.kubewharf.io/qos_level", "dedicated_cores"},
                      {"katalyst.kubewharf.io/memory_enhancement", R"({"numa_binding":"true","numa_exclusive":"true"})"}};
    FactPlan p = e.run(cls, hostile_req("burstable", ann));
    CHECK(p.cls.container.empty());
    REQUIRE(p.refused.size() == 2);
    CHECK(
        p.refused[0].rfind("cpuset_cpus: fact katalyst.numa_cpus refused: would reserve CPUs of a NUMA node (katalyst dedicated_cores numa_binding + "
                           "numa_exclusive); untrusted annotation katalyst.kubewharf.io/memory_enhancement, katalyst.kubewharf.io/qos_level",
                           0) == 0);
    CHECK(e.state.numa_records().empty());  // nothing recorded
    const Policy trust =
        guarding({"katalyst.kubewharf.io/qos_level", "katalyst.kubewharf.io/memory_enhancement", "katalyst.kubewharf.io/cpu_enhancement"});
    e.policy = &trust;
    p = e.run(cls, hostile_req("burstable", ann));
    CHECK(knob(p.cls.container, KnobId::CpusetCpus)->value.text == "0-3");
    CHECK(e.state.numa_records().size() == 1);
}

TEST_CASE("trust: the registry declares what each fact raises and the keys it trusts", "[facts][trust]") {
    for (const auto& f : fact_table()) {
        INFO(f.name);
        // a fact that reads a pod-written annotation and can raise names its keys, and vice versa
        if (std::string(f.name).rfind("numa.", 0) != 0 && std::string(f.name) != "rubik.qos_level" &&
            std::string(f.name) != "volcano.memory_qos_level" &&
            std::string(f.name) != "rubik.cache_limit" &&  // held at the class's level by construction: only lowers
            std::string(f.name) != "rubik.blkio_limit" &&  // a throttle only lowers (issue #21)
            std::string(f.name) != "volcano.memory_high") {  // memory.high only throttles (issue #32)
            CHECK(f.raises != 0);
            CHECK(*f.trust_keys);
        }
        CHECK(f.besteffort_only == (std::string(f.name).rfind("koordinator.", 0) == 0 && std::string(f.name).find("batch") != std::string::npos));
    }
    CHECK(raise_names(find_fact("katalyst.numa_cpus")->raises) == "cpuset pin, NUMA reservation");
}

TEST_CASE("trust: check notes which declaration unlocks which behaviour, never a warning", "[facts][trust][policy]") {
    const std::string bundled = slurp(NRI_QOS_SRCDIR "/conf/nri.d/nri-qos.toml");
    PolicyCheck chk = check_policy_text(bundled, "b.toml");
    CHECK(chk.diags.empty());  // the safe default: notes only
    REQUIRE(chk.notes.size() == 13);
    for (const auto& n : chk.notes) {
        INFO(n.message);
        CHECK(n.level == PolicyDiag::Note);
        CHECK(n.message.find("untrusted: applied only where it does not raise; declaring \"") != std::string::npos);
    }
    CHECK(format_diag("b.toml", chk.notes[0])
              .rfind("b.toml: note: fact koordinator.batch_cpu_shares (class KOORD-BE) can raise: shares above "
                     "kubelet's (BestEffort pods only); untrusted",
                     0) == 0);
    // declared: trusted, the seed system's full behaviour
    std::string declared = bundled;
    const std::string line = "# \"node.koordinator.sh/extended-resource-spec\" = ";
    declared.replace(declared.find(line), 2, "");
    chk = check_policy_text(declared, "b.toml");
    CHECK(chk.diags.empty());
    CHECK(chk.notes[0].message.find("trusted: [guarded.annotations] declares \"node.koordinator.sh/extended-resource-spec\": "
                                    "koordinator-sh/koordinator's full behaviour") != std::string::npos);
}

TEST_CASE("facts: settings.koordinator_quota_lift — \"cpuset\" (koordlet) lifts for any cpuset, \"fits\" keeps the quota of a wider one",
          "[facts][trust]") {
    // koordinator-sh/koordinator@v1.8.0 pkg/util/pod_qos_utils.go IsPodCfsQuotaNeedUnset: any cpuset.
    ClassDef cls = class_of(R"([classes.C.container]
cpuset_cpus = { fact = "koordinator.cpuset" }
cpu_quota_us = { fact = "koordinator.cpuset_quota" }
[classes.C.pod]
cpu_quota_us = { fact = "koordinator.cpuset_quota" }
)");
    Env e;
    auto with = [&](const char* file, const std::string& cpuset, int64_t quota) {
        return req_from(file, {{"spec",
                                {{"annotations", {{"scheduling.koordinator.sh/resource-status", "{\"cpuset\":\"" + cpuset + "\"}"}}},
                                 {"resources", {{"cpu", {{"quota", quota}, {"period", 100000}}}}}}}});
    };
    make_sysfs(e.t, "0-63", {{0, "0-63"}});
    const std::string pod = resolve_cgroups_path(*with("container-create.json", "2-3", 1).cgroups_path).pod;
    e.t.put("cg/cpuset/" + pod + "/cpuset.effective_cpus", "0-63\n");
    e.t.put("cg/cpu/" + pod + "/cpu.cfs_quota_us", "200000\n");
    e.t.put("cg/cpu/" + pod + "/cpu.cfs_period_us", "100000\n");
    Policy trust = guarding({"scheduling.koordinator.sh/resource-status"});
    e.policy = &trust;
    // default "cpuset": 4 CPUs for a 2-CPU quota, trusted: lifted (container and pod)
    FactPlan p = e.run(cls, with("container-create.json", "2-5", 200000));
    CHECK(knob(p.cls.container, KnobId::CpusetCpus)->value.text == "2-5");
    REQUIRE(knob(p.cls.container, KnobId::CpuQuota));
    CHECK(knob(p.cls.container, KnobId::CpuQuota)->value.kind == KnobValue::Max);
    p = e.run(cls, with("sandbox-create.json", "2-5", 200000));
    REQUIRE(knob(p.cls.pod, KnobId::CpuQuota));
    CHECK(knob(p.cls.pod, KnobId::CpuQuota)->value.kind == KnobValue::Max);
    // "fits": the cpuset applies, the quota stays (skipped with the reason, not a failure), trusted or not
    trust.koordinator_quota_lift = Policy::QuotaLift::Fits;
    p = e.run(cls, with("container-create.json", "2-5", 200000));
    CHECK(knob(p.cls.container, KnobId::CpusetCpus)->value.text == "2-5");
    CHECK(!knob(p.cls.container, KnobId::CpuQuota));
    CHECK(p.refused.empty());
    REQUIRE(p.skipped.size() == 1);
    CHECK(p.skipped[0] ==
          "cpu_quota_us: fact koordinator.cpuset_quota absent: cpuset 2-5 (4 CPUs × 100000) is wider than the container's CFS "
          "quota 200000: quota kept (settings.koordinator_quota_lift = \"fits\")");
    p = e.run(cls, with("sandbox-create.json", "2-5", 200000));
    CHECK(!knob(p.cls.pod, KnobId::CpuQuota));
    // within the quota both lift
    p = e.run(cls, with("container-create.json", "2-3", 200000));
    CHECK(knob(p.cls.container, KnobId::CpuQuota)->value.kind == KnobValue::Max);
    // "never" (koordlet --disable-unset-cpu-quota, cpuset_test.go "should NOT unset cfs quota when
    // config is true"): the cpuset applies, no quota is lifted, even within the quota, container and pod
    trust.koordinator_quota_lift = Policy::QuotaLift::Never;
    p = e.run(cls, with("container-create.json", "2-3", 200000));
    CHECK(knob(p.cls.container, KnobId::CpusetCpus)->value.text == "2-3");
    CHECK(!knob(p.cls.container, KnobId::CpuQuota));
    CHECK(p.refused.empty());
    REQUIRE(p.skipped.size() == 1);
    CHECK(p.skipped[0] ==
          "cpu_quota_us: fact koordinator.cpuset_quota absent: bound to cpuset 2-3 by koord-scheduler: quota kept "
          "(settings.koordinator_quota_lift = \"never\", koordlet --disable-unset-cpu-quota)");
    p = e.run(cls, with("sandbox-create.json", "2-5", 200000));
    CHECK(!knob(p.cls.pod, KnobId::CpuQuota));
    // the setting parses, round-trips and is refused when misspelt
    Policy f = parse_policy_toml("version = 1\n[settings]\ndefault_class = \"C\"\nkoordinator_quota_lift = \"fits\"\n[classes.C]\n", "t.toml");
    CHECK(f.koordinator_quota_lift == Policy::QuotaLift::Fits);
    CHECK(policy_from_json(policy_to_json(f)).koordinator_quota_lift == Policy::QuotaLift::Fits);
    f = parse_policy_toml("version = 1\n[settings]\ndefault_class = \"C\"\nkoordinator_quota_lift = \"never\"\n[classes.C]\n", "t.toml");
    CHECK(policy_from_json(policy_to_json(f)).koordinator_quota_lift == Policy::QuotaLift::Never);
    CHECK_THROWS_WITH(
        parse_policy_toml("version = 1\n[settings]\ndefault_class = \"C\"\nkoordinator_quota_lift = \"always\"\n[classes.C]\n", "t.toml"),
        Catch::Contains("t.toml:4: settings.koordinator_quota_lift: expected \"cpuset\""));
}

TEST_CASE("facts: rubik dynCache level from volcano.sh/cache-limit, never above the class's default", "[facts][resctrl]") {
    // openeuler-mirror/rubik pkg/services/dyncache/sync.go syncLevel: no annotation -> max (static
    // mode); the annotation names the level; only offline pods (volcano.sh/preemptable).
    auto level = [](const std::string& dflt, json ann) {
        Env e;
        ClassDef cls = class_of("[classes.C.container]\nresctrl_group = { fact = \"rubik.cache_limit\"" +
                                (dflt.empty() ? std::string() : ", default = \"" + dflt + "\"") + " }\n");
        Request r = req_from("container-create.json", {{"spec", {{"annotations", ann}}}});
        FactPlan p = e.run(cls, r);
        const KnobSetting* k = knob(p.cls.container, KnobId::ResctrlGroup);
        return k ? k->value.text + " | " + k->note
                 : "none | " + (p.skipped.empty() ? std::string() : p.skipped[0]) + (p.refused.empty() ? std::string() : p.refused[0]);
    };
    const json off = {{"volcano.sh/preemptable", "true"}};
    CHECK(level("", off).rfind("rubik_max | no volcano.sh/cache-limit: rubik's defaultLimitMode static", 0) == 0);
    json low = off;
    low["volcano.sh/cache-limit"] = "low";
    CHECK(level("", low).rfind("rubik_low | ", 0) == 0);
    json mx = off;
    mx["volcano.sh/cache-limit"] = "max";
    CHECK(level("middle", mx).rfind("rubik_middle | volcano.sh/cache-limit \"max\" is above the class's default middle", 0) == 0);
    json dyn = off;
    dyn["volcano.sh/cache-limit"] = "dynamic";
    CHECK(level("middle", dyn).rfind("rubik_middle | ", 0) == 0);  // dynamic reaches high's percentages
    CHECK(level("high", dyn).rfind("rubik_dynamic | ", 0) == 0);
    json bad = off;
    bad["volcano.sh/cache-limit"] = "huge";
    CHECK(level("", bad).find("not low, middle, high, max or dynamic") != std::string::npos);
    CHECK(level("", json::object()).find("online, rubik's dynCache leaves the pod") != std::string::npos);
    CHECK(check_policy_text("version = 1\n[settings]\ndefault_class = \"C\"\n[classes.C.container]\n"
                            "cpu_shares = { fact = \"koordinator.batch_cpu_shares\", default = \"low\" }\n",
                            "p")
              .errors() == 1);
    CHECK(check_policy_text("version = 1\n[settings]\ndefault_class = \"C\"\n[classes.C.container]\n"
                            "resctrl_group = { fact = \"rubik.cache_limit\", default = \"lowest\" }\n",
                            "p")
              .errors() == 1);
}

// ---- rubik ioLimit (issue #21) ---------------------------------------------------------------

TEST_CASE("volcano.sh/blkio-limit: rubik's BlkConfig as Go's encoding/json decodes it", "[facts][readers][blkio]") {
    // openeuler-mirror/rubik@1b6fece pkg/services/iolimit/iolimit_test.go TestConfigIOLimit "valid config"
    BlkioLimit b = parse_blkio_limit(R"({"device_read_bps": [{"device": "/dev/sda", "value": "1048576"}],
        "device_write_bps": [{"device": "8:16", "value": "2097152"}],
        "device_read_iops": [{"device": "/dev/nvme0n1", "value": "1000"}],
        "device_write_iops": [{"device": "253:1", "value": "2000"}]})");
    REQUIRE(b.lists[0].size() == 1);
    CHECK(b.lists[0][0].device == "/dev/sda");
    CHECK(b.lists[0][0].value == "1048576");
    CHECK(b.lists[1][0].device == "8:16");
    CHECK(b.lists[2][0].value == "1000");
    CHECK(b.lists[3][0].device == "253:1");
    // keys match case-insensitively, other keys are ignored, null is empty, absent members are ""
    b = parse_blkio_limit(R"({"Device_Read_BPS": [{"Device": "8:0", "VALUE": "5"}, {"device": "8:16"}, null], "x": 1, "device_write_bps": null})");
    REQUIRE(b.lists[0].size() == 3);
    CHECK(b.lists[0][0].device == "8:0");
    CHECK(b.lists[0][0].value == "5");
    CHECK(b.lists[0][1].value.empty());
    CHECK(b.lists[1].empty());
    CHECK(parse_blkio_limit("null").lists[2].empty());
    // what fails rubik's json Decode fails here: the whole annotation (one line)
    CHECK_THROWS_WITH(parse_blkio_limit("invalid json"), Catch::StartsWith("volcano.sh/blkio-limit: "));
    CHECK_THROWS_WITH(parse_blkio_limit(R"({"device_read_bps": {"device": "8:0"}})"),
                      Catch::Contains("device_read_bps: expected a list, got object"));
    CHECK_THROWS_WITH(parse_blkio_limit(R"({"device_read_bps": [{"device": "8:0", "value": 1048576}]})"),
                      Catch::Contains("value must be a string, got number"));
    CHECK_THROWS_WITH(parse_blkio_limit("[]"), Catch::Contains("expected a JSON object, got array"));
}

TEST_CASE("blkio_throttle values: syntax, bounds, the kernel's keyed files", "[facts][blkio]") {
    std::vector<ThrottleEntry> e;
    std::string err;
    REQUIRE(parse_throttle("8:0 rbps=1048576,8:16 wbps=2097152, 259:0 riops=1000,253:1 wiops=2000", e, err));
    REQUIRE(e.size() == 4);
    CHECK(e[1].major == 8);
    CHECK(e[1].minor == 16);
    CHECK(e[2].key == ThrottleEntry::Riops);
    CHECK(throttle_text(e) == "8:0 rbps=1048576,8:16 wbps=2097152,259:0 riops=1000,253:1 wiops=2000");
    for (const char* bad : {"", "8:0 rbps=0", "8:0 rbps=-1", "8:0 rbps=1.5", "8:0 xbps=1", "8 rbps=1", "a:0 rbps=1", "4096:0 rbps=1",
                            "8:1048576 rbps=1", "8:0 rbps=99999999999999999999", "8:0 rbps=1,", "8:0=1 rbps"}) {
        INFO(bad);
        CHECK_FALSE(parse_throttle(bad, e, err));
        CHECK(err.find('\n') == std::string::npos);
    }
    std::string many;
    for (int i = 0; i <= static_cast<int>(kMaxThrottleEntries); ++i) many += (i ? "," : "") + std::string("8:0 rbps=2");
    CHECK_FALSE(parse_throttle(many, e, err));
    CHECK(err == "more than 64 device limits");
    // a policy literal takes the same syntax, canonicalised
    Policy p =
        parse_policy_toml("version = 1\n[settings]\ndefault_class = \"C\"\n[classes.C.container]\nblkio_throttle = \"8:0  rbps=10\"\n", "t.toml");
    CHECK(p.classes.at("C").container.at(0).value.text == "8:0 rbps=10");
    CHECK_THROWS_WITH(
        parse_policy_toml("version = 1\n[settings]\ndefault_class = \"C\"\n[classes.C.container]\nblkio_throttle = \"8:0 rbps=0\"\n", "t.toml"),
        Catch::Contains("blkio_throttle: \"8:0 rbps=0\": rate must be an integer 1..2^63-1"));
    // what the kernel shows after several one-device writes (explain --pod's scratch tree)
    std::string v2 = merge_throttle_file("kubepods/pod1/c/io.max", "", "8:16 wbps=2097152");
    v2 = merge_throttle_file("kubepods/pod1/c/io.max", v2, "8:0 rbps=1048576");
    v2 = merge_throttle_file("kubepods/pod1/c/io.max", v2, "8:0 riops=1000");
    CHECK(v2 == "8:0 rbps=1048576 wbps=max riops=1000 wiops=max\n8:16 rbps=max wbps=2097152 riops=max wiops=max\n");
    std::string v1 = merge_throttle_file("blkio/c/blkio.throttle.read_bps_device", "8:16 5\n", "8:0 7");
    CHECK(v1 == "8:0 7\n8:16 5\n");
    CHECK(merge_throttle_file("blkio/c/blkio.throttle.read_bps_device", v1, "8:16 0") == "8:0 7\n");
    CHECK(is_throttle_file("blkio/x/blkio.throttle.write_iops_device"));
    CHECK(is_throttle_file("x/io.max"));
    CHECK_FALSE(is_throttle_file("x/io.weight"));
    // status/reconcile: the written device's limit is in the kernel's line
    CHECK(kernel_value_matches("c/io.max", "8:0 rbps=1048576", v2));
    CHECK_FALSE(kernel_value_matches("c/io.max", "8:0 wbps=1048576", v2));
    CHECK(kernel_value_matches("blkio/c/blkio.throttle.read_bps_device", "8:16 5", "8:0 7\n8:16 5\n"));
    CHECK_FALSE(kernel_value_matches("blkio/c/blkio.throttle.read_bps_device", "8:16 6", "8:0 7\n8:16 5\n"));
}

TEST_CASE("facts: rubik ioLimit from volcano.sh/blkio-limit, devices checked against the node", "[facts][blkio]") {
    // openeuler-mirror/rubik@1b6fece pkg/services/iolimit/iolimit.go configIOLimit, applyDeviceConfig,
    // convertToMajorMinorImpl: MAJ:MIN as is, /dev/<name> by stat; bad entries skipped.
    ClassDef cls = class_of("[classes.C.container]\nblkio_throttle = { fact = \"rubik.blkio_limit\" }\n");
    auto run = [&](Env& e, const std::string& ann, Layout lay = Layout::V1) {
        json a = ann.empty() ? json::object() : json{{"volcano.sh/blkio-limit", ann}};
        FactPlan p = e.run(cls, req_from("container-create.json", {{"spec", {{"annotations", a}}}}), lay);
        const KnobSetting* k = knob(p.cls.container, KnobId::BlkioThrottle);
        return k ? k->value.text + " | " + k->note
                 : "none | " + (p.skipped.empty() ? std::string() : p.skipped[0]) + (p.refused.empty() ? std::string() : "refused " + p.refused[0]);
    };
    Env e;
    for (const char* d : {"8:0", "8:16", "253:1", "259:0"}) e.t.mkdir(std::string("sys/dev/block/") + d);
    e.t.put("sys/dev/block/8:17/partition", "1\n");
    e.t.mkdir("dev");
    const bool nodes = mknod((e.t.path + "/dev/sda").c_str(), S_IFBLK | 0600, makedev(8, 0)) == 0 &&
                       mknod((e.t.path + "/dev/nvme0n1").c_str(), S_IFBLK | 0600, makedev(259, 0)) == 0;
    e.t.put("dev/null-ish", "");
    const std::string fixture = R"({"device_read_bps": [{"device": "/dev/sda", "value": "1048576"}],
        "device_write_bps": [{"device": "8:16", "value": "2097152"}],
        "device_read_iops": [{"device": "/dev/nvme0n1", "value": "1000"}],
        "device_write_iops": [{"device": "253:1", "value": "2000"}]})";
    if (nodes) {
        CHECK(run(e, fixture)
                  .rfind("8:0 rbps=1048576,8:16 wbps=2097152,259:0 riops=1000,253:1 wiops=2000 | volcano.sh/blkio-limit: "
                         "device_read_bps \"/dev/sda\" → 8:0 rbps=1048576, ",
                         0) == 0);
    } else {
        WARN("mknod refused (not root): device paths not checked");
    }
    // MAJ:MIN only: no device node needed
    CHECK(run(e, R"({"device_write_iops":[{"device":"8:0","value":"1000"}]})").rfind("8:0 wiops=1000 | ", 0) == 0);
    // entries skipped with the reason, the others apply (applyDeviceConfig)
    std::string r = run(e, R"({"device_read_bps":[{"device":"8:17","value":"5"},{"device":"9:9","value":"5"},{"device":"/dev/null-ish","value":"5"},
        {"device":"8:0","value":"0"},{"device":"8:16","value":"12x"},{"device":"sda","value":"5"},{"device":"8:0"},{"device":"8:16","value":"7"}]})");
    CHECK(r.rfind("8:16 rbps=7 | ", 0) == 0);
    CHECK(r.find("skipped: device_read_bps \"8:17\": 8:17 is a partition; the kernel throttles whole disks only; "
                 "device_read_bps \"9:9\": no block device 9:9 on this node (sysfs dev/block); "
                 "device_read_bps \"/dev/null-ish\": not a block device; device_read_bps \"8:0\": value 0 would lift a limit") != std::string::npos);
    CHECK(r.find("; 3 more") != std::string::npos);
    // nothing usable: absent (skipped), never a failure
    CHECK(run(e, R"({"device_read_bps":[{"device":"/dev/../etc/passwd","value":"5"}]})") ==
          "none | blkio_throttle: fact rubik.blkio_limit absent: volcano.sh/blkio-limit: no usable device limit (device_read_bps "
          "\"/dev/../etc/passwd\": not a device path below /dev)");
    CHECK(run(e, "").find("absent: no volcano.sh/blkio-limit annotation") != std::string::npos);
    // cgroup v2 io.max refuses a rate of 1 (blk-throttle tg_set_limit); v1 takes it
    CHECK(run(e, R"({"device_read_bps":[{"device":"8:0","value":"1"}]})").rfind("8:0 rbps=1 | ", 0) == 0);
    CHECK(run(e, R"({"device_read_bps":[{"device":"8:0","value":"1"}]})", Layout::V2).find("value 1: cgroup v2 io.max takes rates from 2") !=
          std::string::npos);
    // malformed JSON: refused (a failure, one line), as rubik applies nothing
    CHECK(run(e, "{").rfind("none | refused blkio_throttle: fact rubik.blkio_limit: volcano.sh/blkio-limit: ", 0) == 0);
    // trust: no declaration needed (a throttle only lowers)
    CHECK(find_fact("rubik.blkio_limit")->raises == 0);
    CHECK(std::string(find_fact("rubik.blkio_limit")->trust_keys).empty());
}

// ---- issue #32 §3: Volcano memory QoS v2 and koordlet's oom_score_adj ---------------------------

TEST_CASE("volcano.sh/colocation-config: parseColocationConfig with Go's decoding", "[facts][readers][memqos]") {
    // volcano-sh/volcano@ed72c7c815a9fd547a787134676f73d42e9d049c memoryqosv2_linux_test.go TestParseColocationConfig
    ColocationMemoryQos v = parse_colocation_memory_qos(R"({"memoryQos": {"highRatio": 80, "lowRatio": 20, "minRatio": 10}})");
    CHECK((v.high_ratio == 80 && v.low_ratio == 20 && v.min_ratio == 10 && !v.defaulted));
    v = parse_colocation_memory_qos("{}");  // "missing memoryQos": the agent's defaults
    CHECK((v.high_ratio == 100 && v.low_ratio == 0 && v.min_ratio == 0 && v.defaulted));
    CHECK(error_of([] { parse_colocation_memory_qos("{invalid}"); }).rfind("volcano.sh/colocation-config: ", 0) == 0);  // "invalid json"
    // Go: case-insensitive keys, omitted ratios are 0, null leaves 0, memoryQos null → defaults
    v = parse_colocation_memory_qos(R"({"MEMORYQOS": {"HighRatio": 50}})");
    CHECK((v.high_ratio == 50 && v.low_ratio == 0 && v.min_ratio == 0));
    CHECK(parse_colocation_memory_qos(R"({"memoryQos": null})").defaulted);
    CHECK(parse_colocation_memory_qos("null").defaulted);
    CHECK(parse_colocation_memory_qos(R"({"memoryQos": {"lowRatio": -5}})").low_ratio == -5);
    // hostile: wrong types, floats, out of int64, not an object — one line, never a crash
    for (const char* bad :
         {R"({"memoryQos": {"lowRatio": "20"}})", R"({"memoryQos": {"lowRatio": 20.5}})", R"({"memoryQos": {"minRatio": 1e3}})",
          R"({"memoryQos": {"highRatio": 99999999999999999999}})", R"({"memoryQos": 5})", "[]", "\"x\"", R"({"memoryQos": {"lowRatio": true}})"}) {
        INFO(bad);
        std::string e = error_of([&] { parse_colocation_memory_qos(bad); });
        CHECK(e.rfind("volcano.sh/colocation-config: ", 0) == 0);
        CHECK(e.find('\n') == std::string::npos);
    }
}

TEST_CASE("koordinator.sh/oom-score-adj-spec: map[string]int64", "[facts][readers][oom]") {
    auto m = parse_oom_score_adj_spec(R"({"c1": 100, "c2": -500, "c3": null})");
    CHECK(m == std::map<std::string, int64_t>{{"c1", 100}, {"c2", -500}, {"c3", 0}});
    for (const char* bad : {"{invalid}", "[1]", R"({"c1": "100"})", R"({"c1": 1.5})", R"({"c1": 9223372036854775808})", R"({"c1": {}})"}) {
        INFO(bad);
        std::string e = error_of([&] { parse_oom_score_adj_spec(bad); });
        CHECK(e.rfind("koordinator.sh/oom-score-adj-spec: ", 0) == 0);
        CHECK(e.find('\n') == std::string::npos);
    }
}

TEST_CASE("facts: koordlet's oom_score_adj from the -spec map, else the pod annotation", "[facts][oom]") {
    // koordinator-sh/koordinator@a7a1b76bbf81abd26f9c377de1f31a60dd965f6e
    // pkg/koordlet/runtimehooks/hooks/oomscoreadj/helper_test.go Test_getOOMScoreAdjForContainer and
    // oom_score_adj_test.go TestPlugin_SetContainerOOMScoreAdj (the fixture's container is "cgfs-ctr")
    ClassDef cls = class_of("[classes.C.container]\noom_score_adj = { fact = \"koordinator.oom_score_adj\" }\n");
    Env e;
    const Policy trust = guarding({"koordinator.sh/oom-score-adj", "koordinator.sh/oom-score-adj-spec"});
    e.policy = &trust;
    auto val = [&](const json& ann) -> std::optional<int64_t> {
        FactPlan p = e.run(cls, hostile_req("burstable", ann));
        const KnobSetting* k = knob(p.cls.container, KnobId::OomScoreAdj);
        return k ? std::optional<int64_t>(k->value.num) : std::nullopt;
    };
    CHECK_FALSE(val({{"foo", "bar"}}));  // no oom score adj annotations
    CHECK(val({{"koordinator.sh/oom-score-adj", "-500"}}) == -500);  // pod-level default applied
    CHECK(val({{"koordinator.sh/oom-score-adj", "-500"}, {"koordinator.sh/oom-score-adj-spec", R"({"cgfs-ctr": 100})"}}) == 100);  // spec overrides
    CHECK(val({{"koordinator.sh/oom-score-adj", "-500"}, {"koordinator.sh/oom-score-adj-spec", R"({"c2": 100})"}}) ==
          -500);  // not listed: falls back
    CHECK_FALSE(val({{"koordinator.sh/oom-score-adj-spec", R"({"c2": 100})"}}));  // not listed, no default
    CHECK_FALSE(val({{"koordinator.sh/oom-score-adj", "-2000"}}));  // out of range: koordlet skips
    FactPlan p = e.run(cls, hostile_req("burstable", {{"koordinator.sh/oom-score-adj-spec", "{invalid}"}, {"koordinator.sh/oom-score-adj", "-500"}}));
    CHECK_FALSE(knob(p.cls.container, KnobId::OomScoreAdj));  // invalid spec: nothing, no fallback
    REQUIRE(p.refused.size() == 1);
    CHECK(p.refused[0].rfind("oom_score_adj: fact koordinator.oom_score_adj: koordinator.sh/oom-score-adj-spec: ", 0) == 0);
    p = e.run(cls, hostile_req("burstable", {{"koordinator.sh/oom-score-adj", "not-a-number"}}));  // invalid pod-level value
    REQUIRE(p.refused.size() == 1);
    CHECK(
        p.refused[0] ==
        "oom_score_adj: fact koordinator.oom_score_adj: koordinator.sh/oom-score-adj \"not-a-number\" is not an integer (koordlet: failed to parse, sets nothing)");
    p = e.run(cls, hostile_req("burstable", {{"koordinator.sh/oom-score-adj", "-2000"}}));
    REQUIRE(p.skipped.size() == 1);
    CHECK(p.skipped[0] ==
          "oom_score_adj: fact koordinator.oom_score_adj absent: koordinator.sh/oom-score-adj = -2000 is outside [-1000, 1000]: koordlet skips it");
    for (const char* huge : {"99999999999999999999", "1e3", " 5", ""}) {
        INFO(huge);
        p = e.run(cls, hostile_req("burstable", {{"koordinator.sh/oom-score-adj", huge}}));
        CHECK_FALSE(knob(p.cls.container, KnobId::OomScoreAdj));
        CHECK(p.refused.size() + p.skipped.size() == 1);
    }
}

TEST_CASE("trust: an untrusted oom_score_adj may only raise the score above kubelet's", "[facts][trust][oom]") {
    ClassDef cls = class_of("[classes.C.container]\noom_score_adj = { fact = \"koordinator.oom_score_adj\" }\n");
    Env e;  // nothing guarded
    // Burstable: kubelet gives at most 999 → only 999..1000 proves no lowering without the process
    FactPlan p = e.run(cls, hostile_req("burstable", {{"koordinator.sh/oom-score-adj", "-500"}}));
    CHECK_FALSE(knob(p.cls.container, KnobId::OomScoreAdj));
    REQUIRE(p.refused.size() == 1);
    CHECK(p.refused[0] ==
          "oom_score_adj: fact koordinator.oom_score_adj refused: would lower oom_score_adj below kubelet's Burstable oom_score_adj "
          "(at most 999) → -500; untrusted annotation koordinator.sh/oom-score-adj-spec, koordinator.sh/oom-score-adj "
          "(declare it in [guarded.annotations] to trust it)");
    CHECK(knob(e.run(cls, hostile_req("burstable", {{"koordinator.sh/oom-score-adj", "1000"}})).cls.container, KnobId::OomScoreAdj)->value.num ==
          1000);
    // the process exists (v0.1 create): runc set kubelet's value, compared exactly
    e.t.put("proc/2529/oom_score_adj", "600\n");
    CHECK_FALSE(knob(e.run(cls, hostile_req("burstable", {{"koordinator.sh/oom-score-adj", "599"}})).cls.container, KnobId::OomScoreAdj));
    p = e.run(cls, hostile_req("burstable", {{"koordinator.sh/oom-score-adj", "600"}}));
    REQUIRE(knob(p.cls.container, KnobId::OomScoreAdj));
    CHECK(knob(p.cls.container, KnobId::OomScoreAdj)->note.find("untrusted, applied: does not raise (600 ≥ the process's oom_score_adj 600") !=
          std::string::npos);
    e.t.rm("proc/2529");
    // Guaranteed -997: any value at or above it only lowers the pod's standing
    CHECK(knob(e.run(cls, hostile_req("", {{"koordinator.sh/oom-score-adj", "-997"}})).cls.container, KnobId::OomScoreAdj)->value.num == -997);
    CHECK_FALSE(knob(e.run(cls, hostile_req("", {{"koordinator.sh/oom-score-adj", "-998"}})).cls.container, KnobId::OomScoreAdj));
    // declared: koordlet's behaviour
    const Policy trust = guarding({"koordinator.sh/oom-score-adj", "koordinator.sh/oom-score-adj-spec"});
    e.policy = &trust;
    CHECK(knob(e.run(cls, hostile_req("burstable", {{"koordinator.sh/oom-score-adj", "-500"}})).cls.container, KnobId::OomScoreAdj)->value.num ==
          -500);
}

TEST_CASE("facts: Volcano memoryqosv2 memory.high/low/min of the container (cgroup v2 only)", "[facts][memqos]") {
    ClassDef cls = class_of(R"([classes.C.container]
memory_high = { fact = "volcano.memory_high" }
memory_low = { fact = "volcano.memory_low" }
memory_min = { fact = "volcano.memory_min" }
)");
    Env e;
    const Policy trust = guarding({"volcano.sh/colocation-config"});
    e.policy = &trust;
    const std::string cfg = R"({"memoryQos":{"highRatio":80,"lowRatio":20,"minRatio":10}})";
    // memoryqosv2_linux_test.go TestHandle: limit 1Gi, request 512Mi (Burstable) — the request is
    // not in an NRI request; a Guaranteed 1Gi pod (request = limit) shows the same arithmetic
    Request r = hostile_req("", {{"volcano.sh/qos-level", "LC"}, {"volcano.sh/colocation-config", cfg}});
    r.resources.mem_limit = 1073741824;
    FactPlan p = e.run(cls, r, Layout::V2);
    INFO(json(p.refused).dump() << json(p.skipped).dump());
    CHECK(knob(p.cls.container, KnobId::MemoryHigh)->value.num == 858993459);  // 1Gi × 80 / 100
    CHECK(knob(p.cls.container, KnobId::MemoryLow)->value.num == 214748364);  // 1Gi × 20 / 100
    CHECK(knob(p.cls.container, KnobId::MemoryMin)->value.num == 107374182);  // 1Gi × 10 / 100
    // cgroup v1: skipped with the reason
    p = e.run(cls, r, Layout::V1);
    CHECK(p.cls.container.empty());
    REQUIRE(p.skipped.size() == 3);
    CHECK(p.skipped[0] ==
          "memory_high: fact volcano.memory_high absent: cgroup v1: the Volcano agent's memoryqosv2 handler sets memory.high on cgroup v2 only");
    // Burstable: the request is not carried — low/min absent with the reason, high from the limit
    Request b = hostile_req("burstable", {{"volcano.sh/qos-level", "HLS"}, {"volcano.sh/colocation-config", cfg}});
    p = e.run(cls, b, Layout::V2);
    CHECK(knob(p.cls.container, KnobId::MemoryHigh)->value.num == 53687091);  // 64Mi × 80 / 100
    CHECK_FALSE(knob(p.cls.container, KnobId::MemoryLow));
    REQUIRE(p.skipped.size() == 2);
    CHECK(p.skipped[0].find("the request does not carry the container's memory request (burstable pod") != std::string::npos);
    // the defaults ({} → high 100, low 0, min 0) decide without any quantity, at any level
    p = e.run(cls, hostile_req("burstable", {{"volcano.sh/colocation-config", "{}"}}), Layout::V2);
    CHECK(knob(p.cls.container, KnobId::MemoryHigh)->value.kind == KnobValue::Max);
    CHECK(knob(p.cls.container, KnobId::MemoryLow)->value.num == 0);
    CHECK(knob(p.cls.container, KnobId::MemoryMin)->value.num == 0);
    // qos level ≤ 1 with a ratio that needs a quantity: the extended memory resource is unknown
    p = e.run(cls, hostile_req("burstable", {{"volcano.sh/qos-level", "LS"}, {"volcano.sh/colocation-config", cfg}}), Layout::V2);
    CHECK(p.cls.container.empty());
    CHECK(p.skipped[0].find("extended memory resource") != std::string::npos);
    // BestEffort LC (no request): low/min 0; no limit: high max
    p = e.run(cls, hostile_req("besteffort", {{"volcano.sh/qos-level", "LC"}, {"volcano.sh/colocation-config", cfg}}), Layout::V2);
    CHECK(knob(p.cls.container, KnobId::MemoryHigh)->value.kind == KnobValue::Max);
    CHECK(knob(p.cls.container, KnobId::MemoryLow)->value.num == 0);
    // highRatio 0: the agent writes memory.high 0 (the product), as Go computes it
    r.annotations["volcano.sh/colocation-config"] = R"({"memoryQos":{"highRatio":0,"lowRatio":-1}})";
    p = e.run(cls, r, Layout::V2);
    CHECK(knob(p.cls.container, KnobId::MemoryHigh)->value.num == 0);
    CHECK(knob(p.cls.container, KnobId::MemoryLow)->value.kind == KnobValue::Max);  // negative → "max"
    // hostile documents: a one-line refusal per knob, nothing applied
    for (const char* bad : {"{invalid}", R"({"memoryQos":{"lowRatio":"x"}})", "[]", R"({"memoryQos":{"minRatio":9223372036854775807}})"}) {
        INFO(bad);
        r.annotations["volcano.sh/colocation-config"] = bad;
        p = e.run(cls, r, Layout::V2);
        CHECK(p.cls.container.empty() == (std::string(bad) != R"({"memoryQos":{"minRatio":9223372036854775807}})"));
        for (const auto& l : p.refused) CHECK(l.find('\n') == std::string::npos);
    }
    r.annotations["volcano.sh/colocation-config"] = R"({"memoryQos":{"minRatio":9223372036854775807}})";
    p = e.run(cls, r, Layout::V2);
    REQUIRE(p.refused.size() == 1);
    CHECK(p.refused[0].find("overflows int64") != std::string::npos);
}

TEST_CASE("trust: an untrusted memory protection applies only up to the pod cgroup's", "[facts][trust][memqos]") {
    ClassDef cls = class_of(R"([classes.C.container]
memory_high = { fact = "volcano.memory_high" }
memory_low = { fact = "volcano.memory_low" }
memory_min = { fact = "volcano.memory_min" }
)");
    Env e;  // nothing guarded
    Request r = hostile_req(
        "", {{"volcano.sh/qos-level", "LC"}, {"volcano.sh/colocation-config", R"({"memoryQos":{"highRatio":80,"lowRatio":20,"minRatio":10}})"}});
    r.resources.mem_limit = 1073741824;
    // kubelet without MemoryQoS: the pod's memory.min/low are 0 → any protection is a raise
    e.t.put("cg/kubepods/podt/memory.min", "0\n");
    e.t.put("cg/kubepods/podt/memory.low", "0\n");
    FactPlan p = e.run(cls, r, Layout::V2);
    CHECK(knob(p.cls.container, KnobId::MemoryHigh)->value.num == 858993459);  // a throttle only lowers
    CHECK_FALSE(knob(p.cls.container, KnobId::MemoryLow));
    CHECK_FALSE(knob(p.cls.container, KnobId::MemoryMin));
    REQUIRE(p.refused.size() == 2);
    CHECK(p.refused[0] ==
          "memory_low: fact volcano.memory_low refused: would protect 214748364 bytes (memory.low) above the pod's memory.low 0; "
          "untrusted annotation volcano.sh/colocation-config (declare it in [guarded.annotations] to trust it)");
    // kubelet's MemoryQoS gate set the pod's memory.min = its requests: within it, applied untrusted
    e.t.put("cg/kubepods/podt/memory.min", "1073741824\n");
    p = e.run(cls, r, Layout::V2);
    REQUIRE(knob(p.cls.container, KnobId::MemoryMin));
    CHECK(knob(p.cls.container, KnobId::MemoryMin)->note.find("untrusted, applied: does not raise (107374182 ≤ the pod's memory.min 1073741824)") !=
          std::string::npos);
    CHECK_FALSE(knob(p.cls.container, KnobId::MemoryLow));
    // lowered to 0: applied untrusted
    r.annotations["volcano.sh/colocation-config"] = R"({"memoryQos":{"lowRatio":0,"minRatio":0}})";
    p = e.run(cls, r, Layout::V2);
    CHECK(knob(p.cls.container, KnobId::MemoryLow)->value.num == 0);
    CHECK(knob(p.cls.container, KnobId::MemoryMin)->value.num == 0);
    // a negative ratio ("max") is a raise: refused untrusted
    r.annotations["volcano.sh/colocation-config"] = R"({"memoryQos":{"lowRatio":-1}})";
    p = e.run(cls, r, Layout::V2);
    CHECK_FALSE(knob(p.cls.container, KnobId::MemoryLow));
}
