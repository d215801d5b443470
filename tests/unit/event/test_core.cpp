// Unit tests of the pipeline stages: request, model, knobs, policy, classify, adjustment.
#include <catch2/catch.hpp>

#include <cstring>

#include <algorithm>
#include <fstream>
#include <functional>
#include <set>
#include <sys/stat.h>
#include <unistd.h>

#include "event/adjust.hpp"
#include "event/classify.hpp"
#include "model/knobs.hpp"
#include "model/model.hpp"
#include "policy/policy.hpp"
#include "model/request.hpp"
#include "event/sinks.hpp"

#include "../scratch.hpp"

using namespace nriqos;
using nlohmann::json;

namespace {
std::string slurp(const std::string& p) {
    std::ifstream in(p);
    REQUIRE(in.good());
    return std::string(std::istreambuf_iterator<char>(in), {});
}
std::string fixture(const std::string& rel) { return slurp(std::string(NRI_QOS_SRCDIR "/tests/fixtures/") + rel); }
Policy bundled() { return load_policy_toml(NRI_QOS_SRCDIR "/conf/nri.d/nri-qos.toml"); }

std::string v01(const json& patch) {
    json j = json::parse(fixture("requests/containerd-1.6.20/container-create.json"));
    j.merge_patch(patch);
    return j.dump();
}

std::string error_of(const std::function<void()>& f) {
    try {
        f();
    } catch (const InputError& e) { return e.what(); }
    return "";
}
}  // namespace

TEST_CASE("v0.1 requests captured from containerd 1.6 and 1.7 parse", "[request]") {
    for (const char* dir : {"containerd-1.6.20", "containerd-1.7.24-adapter"}) {
        Request sc = parse_v01_request(fixture(std::string("requests/") + dir + "/sandbox-create.json"));
        CHECK(sc.event == Event::Create);
        CHECK(sc.is_sandbox);
        CHECK(sc.pid.has_value());
        CHECK(sc.pod_name == "cgfs-pod");
        CHECK(sc.pod_namespace == "default");
        CHECK(sc.resources.cpu_shares == 2);

        Request cc = parse_v01_request(fixture(std::string("requests/") + dir + "/container-create.json"));
        CHECK_FALSE(cc.is_sandbox);
        CHECK(cc.container_name == "cgfs-ctr");
        CHECK(cc.resources.cpu_shares == 512);
        CHECK(cc.resources.mem_limit == 67108864);
        CHECK(cc.labels.at("app") == "nri-e2e");
        REQUIRE(cc.cgroups_path);
        CHECK(cc.cgroups_path->rfind("/kubepods/burstable/pod0e2e0000-", 0) == 0);

        Request sd = parse_v01_request(fixture(std::string("requests/") + dir + "/sandbox-delete.json"));
        CHECK(sd.event == Event::Delete);
        CHECK(sd.is_sandbox);
    }
    // 1.7 + adapter sandbox delete: no pid, no cgroupsPath, resources null
    Request d = parse_v01_request(fixture("requests/containerd-1.7.24-adapter/sandbox-delete.json"));
    CHECK_FALSE(d.pid.has_value());
    CHECK_FALSE(d.cgroups_path.has_value());
}

TEST_CASE("request validation errors name the field", "[request]") {
    CHECK(error_of([] { parse_v01_request(""); }) == "empty input");
    CHECK(error_of([] { parse_v01_request("null"); }) == "/: expected a JSON object (NRI v0.1 request), got null");
    CHECK(error_of([] { parse_v01_request("[]"); }) == "/: expected a JSON object (NRI v0.1 request), got array");
    CHECK(error_of([] { parse_v01_request(v01({{"pid", "x"}})); }) == "/pid: expected an integer");
    CHECK(error_of([] { parse_v01_request(v01({{"pid", 1.5}})); }) == "/pid: expected integer, got non-integer number");
    CHECK(error_of([] { parse_v01_request(v01({{"state", "frobnicate"}})); }).find("/state: unknown state") == 0);
    CHECK(error_of([] { parse_v01_request(v01({{"version", "0.2"}})); }).find("/version: unsupported NRI version") == 0);
    CHECK(error_of([] { parse_v01_request(v01({{"id", "../x"}})); }) == "/id: id may contain only [A-Za-z0-9_.-]");
    CHECK(error_of([] { parse_v01_request(v01({{"labels", {{"a", 1}}}})); }) == "/labels/a: expected string, got integer");
    CHECK(error_of([] { parse_v01_request(v01({{"spec", {{"cgroupsPath", 5}}}})); }) == "/spec/cgroupsPath: expected string, got integer");
    CHECK(error_of([] {
              parse_v01_request(v01({{"spec", {{"resources", {{"cpu", {{"shares", "lots"}}}}}}}}));
          }) == "/spec/resources/cpu/shares: expected an integer");
    CHECK(error_of([] { parse_v01_request(R"({"a":1,"a":2})"); }) == "duplicate JSON key \"a\"");
    CHECK(error_of([] { parse_v01_request(std::string(100, '[')); }) == "JSON nested deeper than 32 levels");
    CHECK(error_of([] { parse_v01_request("{\"version\":\"0.1\"} x"); }).find("malformed JSON") == 0);
    CHECK(error_of([] { parse_v01_request(std::string(limits::kMaxRequestBytes + 1, ' ')); }).find("request larger than") == 0);
}

TEST_CASE("nri-eval events parse PodSandbox and Container in NRI Go JSON", "[request]") {
    json ev = {{"event", "CreateContainer"},
               {"runtime", {{"name", "containerd"}, {"version", "1.7.24~ds1"}}},
               {"pod",
                {{"id", "p1"},
                 {"name", "web"},
                 {"namespace", "prod"},
                 {"uid", "u1"},
                 {"labels", {{"koordinator.sh/qosClass", "BE"}}},
                 {"annotations", {{"a", "pod"}}},
                 {"linux", {{"cgroup_parent", "/kubepods/besteffort/podu1"}, {"cgroups_path", "/kubepods/besteffort/podu1/p1"}}}}},
               {"container",
                {{"id", "c1"},
                 {"pod_sandbox_id", "p1"},
                 {"name", "app"},
                 {"annotations", {{"a", "ctr"}}},
                 {"linux",
                  {{"cgroups_path", "/kubepods/besteffort/podu1/c1"},
                   {"resources",
                    {{"cpu", {{"shares", {{"value", "512"}}}, {"quota", {{"value", 50000}}}}}, {"memory", {{"limit", {{"value", 1 << 20}}}}}}}}}}}};
    Request r = parse_nri_event(ev.dump());
    CHECK(r.event == Event::CreateContainer);
    CHECK_FALSE(r.is_sandbox);
    CHECK(r.id == "c1");
    CHECK(r.sandbox_id == "p1");
    CHECK(r.pod_name == "web");
    CHECK(r.container_name == "app");
    CHECK(r.annotations.at("a") == "ctr");
    CHECK(r.resources.cpu_shares == 512);
    CHECK(r.resources.cpu_quota == 50000);
    CHECK(r.resources.mem_limit == 1 << 20);
    CHECK(*r.cgroups_path == "/kubepods/besteffort/podu1/c1");

    json pod_ev = {{"event", "RunPodSandbox"}, {"pod", ev["pod"]}};
    Request p = parse_nri_event(pod_ev.dump());
    CHECK(p.is_sandbox);
    CHECK(p.id == "p1");
    CHECK(*p.cgroups_path == "/kubepods/besteffort/podu1/p1");

    ev["container"]["pod_sandbox_id"] = "other";
    CHECK(error_of([&] { parse_nri_event(ev.dump()); }) == "/container/pod_sandbox_id: does not match /pod/id");
    CHECK(error_of([] { parse_nri_event(R"({"event":"Boom","pod":{"id":"x"}})"); }) == "/event: unknown event \"Boom\"");
}

TEST_CASE("cgroupsPath: cgroupfs and systemd forms resolve like runc", "[model]") {
    CgroupPaths a = resolve_cgroups_path("/kubepods/burstable/pod123/abc");
    CHECK(a.driver == CgroupDriver::Cgroupfs);
    CHECK(a.container == "kubepods/burstable/pod123/abc");
    CHECK(a.pod == "kubepods/burstable/pod123");

    CgroupPaths s = resolve_cgroups_path("kubepods-burstable-pod0e2e0000_ef0a_44a5_a124_d95febe27612.slice:cri-containerd:abc");
    CHECK(s.driver == CgroupDriver::Systemd);
    CHECK(s.pod == "kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod0e2e0000_ef0a_44a5_a124_d95febe27612.slice");
    CHECK(s.container == s.pod + "/cri-containerd-abc.scope");
    CHECK(resolve_cgroups_path("-.slice:docker:x").container == "docker-x.scope");
    CHECK(resolve_cgroups_path(":cri-containerd:x").container == "system.slice/cri-containerd-x.scope");
    CHECK(resolve_cgroups_path("kubepods.slice:cri-containerd:x").container == "kubepods.slice/cri-containerd-x.scope");

    for (const char* bad : {"/kubepods/../../etc", "/a/./b", "/a//b", "..", "/a/b\n/c", "a-.slice:p:n", "a--b.slice:p:n", "kubepods.slice:p:../x",
                            "kubepods.slice:p", "kubepods:p:n", "a.slice:p:n:x", "/a\\b"}) {
        INFO(bad);
        CHECK_THROWS_AS(resolve_cgroups_path(bad), InputError);
    }
}

TEST_CASE("Kubernetes QoS class from the cgroup parent", "[model]") {
    CHECK(kube_qos_from_path("kubepods/besteffort/pod1") == KubeQos::BestEffort);
    CHECK(kube_qos_from_path("kubepods/burstable/pod1") == KubeQos::Burstable);
    CHECK(kube_qos_from_path("kubepods/pod1") == KubeQos::Guaranteed);
    CHECK(kube_qos_from_path("kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod1.slice") == KubeQos::BestEffort);
    CHECK(kube_qos_from_path("kubepods.slice/kubepods-pod1.slice") == KubeQos::Guaranteed);
    CHECK(kube_qos_from_path("k8s.io") == KubeQos::Unknown);
}

TEST_CASE("cgroup v1 to v2 conversions", "[knobs]") {
    // log-quadratic (runc >= 1.3.2, Kubernetes 2025): 2 → 1, 1024 → 100, 262144 → 10000
    CHECK(shares_to_weight(2) == 1);
    CHECK(shares_to_weight(1024) == 100);
    CHECK(shares_to_weight(262144) == 10000);
    CHECK(shares_to_weight(0) == 0);
    CHECK(shares_to_weight(1) == 1);  // clamped to 2
    CHECK(shares_to_weight(1000000) == 10000);  // clamped to 262144
    CHECK(shares_to_weight(512) > 1);
    CHECK(shares_to_weight(512) < 100);
    // linear (runc < 1.3.2): 1024 → 39
    CHECK(shares_to_weight_linear(2) == 1);
    CHECK(shares_to_weight_linear(1024) == 39);
    CHECK(shares_to_weight_linear(262144) == 10000);
    CHECK(blkio_to_io_weight(10) == 1);
    CHECK(blkio_to_io_weight(1000) == 10000);
    CHECK(blkio_to_io_weight(500) == 1 + 490 * 9999 / 990);
}

TEST_CASE("knob values: ranges, units, max and percentages", "[knobs]") {
    auto val = [](const char* key, const std::string& s) { return parse_knob_value(*find_knob(key), &s, nullptr); };
    auto ival = [](const char* key, int64_t i) { return parse_knob_value(*find_knob(key), nullptr, &i); };
    CHECK(val("memory_limit", "512Mi").num == 512LL << 20);
    CHECK(val("memory_limit", "1G").num == 1000000000LL);
    CHECK(val("memory_limit", "max").kind == KnobValue::Max);
    CHECK(ival("memory_limit", -1).kind == KnobValue::Max);
    CHECK(val("memory_high", "80%").kind == KnobValue::Percent);
    CHECK(ival("cpu_shares", 2).num == 2);
    CHECK_THROWS_WITH(ival("cpu_shares", 1), "cpu_shares: 1 out of range [2, 262144] or \"N%\"");
    CHECK_THROWS_WITH(ival("cpu_shares", 262145), Catch::Contains("out of range"));
    CHECK_THROWS_WITH(ival("oom_score_adj", 1001), Catch::Contains("out of range [-1000, 1000]"));
    CHECK_THROWS_WITH(ival("cpu_qos_level", 3), Catch::Contains("out of range [-1, 2]"));
    CHECK_THROWS_WITH(val("cpu_idle", "50%"), "cpu_idle: percentages are not supported for this knob");
    CHECK_THROWS_WITH(val("memory_high", "101%"), Catch::Contains("0%..100%"));
    CHECK_THROWS_WITH(val("memory_limit", "9999999Ti"), Catch::Contains("overflows"));
    CHECK(val("cpuset_cpus", "0-3,8").text == "0-3,8");
    for (const char* bad : {"", "3-1", "1,1", "a", "0-", ",1", "1,", "9000"}) {
        INFO(bad);
        CHECK_FALSE(valid_cpuset(bad));
    }
    CHECK_THROWS_WITH(val("resctrl_group", "../x"), Catch::Contains("resctrl_group: expected a name"));
}

TEST_CASE("policy: bundled default loads and round-trips through its compiled form", "[policy]") {
    Policy p = bundled();
    CHECK(p.default_class == "DEFAULT");
    CHECK(p.classes.count("KOORD-BE"));
    CHECK(p.classes.count("VOLCANO-HLS"));
    CHECK(p.classes.at("VOLCANO-HLS").gate.enabled);
    Policy q = policy_from_json(policy_to_json(p));
    CHECK(policy_to_json(q) == policy_to_json(p));
    CHECK(json::from_cbor(json::to_cbor(policy_to_json(p))) == policy_to_json(p));
}

TEST_CASE("policy errors are one line with file:line", "[policy]") {
    auto err = [](const std::string& text) { return error_of([&] { parse_policy_toml(text, "p.toml"); }); };
    const std::string head = "version = 1\n[settings]\ndefault_class = \"A\"\n[classes.A]\n";
    CHECK(err(head) == "");
    CHECK(err("") == "p.toml: missing \"version = 1\" (+2 more errors: run nri-qos check)");
    CHECK(err("version = 2\n[settings]\ndefault_class = \"A\"\n[classes.A]\n") == "p.toml:1: version: this nri-qos reads policy version 1");
    CHECK(err(head + "[classes.A.container]\ncpu_sharez = 2\n") ==
          "p.toml:6: classes.A.container: unknown knob \"cpu_sharez\" (did you mean \"cpu_shares\"? see nri-qos.toml(5))");
    CHECK(err(head + "[classes.A.container]\nfoo = 2\n") == "p.toml:6: classes.A.container: unknown knob \"foo\" (see nri-qos.toml(5))");
    CHECK(err(head + "[classes.A.container]\ncpu_shares = 1\n") == "p.toml:6: classes.A.container.cpu_shares: 1 out of range [2, 262144] or \"N%\"");
    CHECK(err(head + "[classes.A.container]\ncpu_shares = true\n") ==
          "p.toml:6: classes.A.container.cpu_shares: expected an integer, a string or { fact = \"...\" }, got boolean");
    CHECK(
        err(head + "bogus = 1\n") ==
        "p.toml:5: classes.A: unknown key \"bogus\" (allowed: description, fail, container, pod, sandbox, gate, pod_cpu_weight_formula, container_cpu_weight_formula, accept_merge)");
    CHECK(err(head + "[[rules]]\nclass = \"B\"\n") == "p.toml:6: rules.class: unknown class \"B\"");
    CHECK(err(head + "[[rules]]\nclass = \"A\"\nmatch.kind = \"pod\"\n") ==
          "p.toml:7: match.kind: expected \"sandbox\" or \"container\", got \"pod\"");
    CHECK(err(head + "[classes.A.container]\nraw = [{file = \"cgroup.procs\", value = \"1\"}]\n").find("is not an allowed kernel file name") !=
          std::string::npos);
    CHECK(err(head + "[classes.A.container]\nraw = [{file = \"tasks\", controller = \"cpu\", value = \"1\"}]\n")
              .find("is not an allowed kernel file name") != std::string::npos);
    CHECK(err(head + "[classes.A.pod]\noom_score_adj = 5\n").find("applies to processes") != std::string::npos);
    CHECK(err("version = 1\n[settings]\ndefault_class = \"B\"\n[classes.B]\n[classes.A]\ngate.fallback = \"A\"\n").find("is gated itself") !=
          std::string::npos);
    CHECK(err("version = 1\nx = [" + std::string(40, '[')).find("nesting deeper than 32 levels") != std::string::npos);
    CHECK(err("version = = 1\n").find("p.toml:1: TOML syntax error") == 0);
    CHECK(err(head + "fail = \"sometimes\"\n") == "p.toml:5: classes.A.fail: expected \"open\" or \"closed\", got \"sometimes\"");
}

TEST_CASE("policy files that are not regular files are refused without reading", "[policy]") {
    CHECK(error_of([] { load_policy_toml("/proc/self/status"); }) == "/proc/self/status: policy is not a regular file");
    const unit::ScratchDir dir("fifo");
    const std::string fifo = dir / "p.toml";
    REQUIRE(mkfifo(fifo.c_str(), 0600) == 0);
    CHECK(error_of([&] { load_policy_toml(fifo); }) == fifo + ": policy is not a regular file");
    CHECK(error_of([] { load_policy_toml("/nonexistent/p.toml"); }) == "/nonexistent/p.toml: cannot open policy: No such file or directory");
}

namespace {
Decision classify_req(const Policy& p, const json& patch) {
    static Request r;
    r = parse_v01_request(v01(patch));
    Facts f{&r, kube_qos_from_path(resolve_cgroups_path(*r.cgroups_path).pod)};
    return classify(p, f);
}
}  // namespace

TEST_CASE("bundled policy recognises every colocation system's carrier", "[classify]") {
    Policy p = bundled();
    struct Case {
        json patch;
        const char* cls;
        const char* rule;
    };
    const std::vector<Case> cases = {
        // Koordinator BE batch pods are kube-BestEffort; a BE label elsewhere keeps kubelet's weight
        {{{"labels", {{"koordinator.sh/qosClass", "BE"}}}, {"spec", {{"cgroupsPath", "/kubepods/besteffort/pod1/abc"}}}},
         "KOORD-BE",
         "koordinator-be"},
        {{{"labels", {{"koordinator.sh/qosClass", "BE"}}}}, "DEFAULT", "default"},  // Burstable: kubelet's values
        {{{"labels", {{"koordinator.sh/qosClass", "LSR"}}}}, "KOORD-LSR", "koordinator-lse-lsr"},
        {{{"labels", {{"koordinator.sh/qosClass", "LS"}}}}, "DEFAULT", "koordinator-ls-system"},
        {{{"labels", {{"koordinator.sh/qosClass", "SYSTEM"}}}}, "DEFAULT", "koordinator-system"},
        {{{"spec", {{"annotations", {{"openfuyao.com/qos-level", "BE"}}}}}}, "OFFLINE", "openfuyao-be"},
        // LS raises cpu.qos_level above unclassified pods: gated, DEFAULT unless guarded
        {{{"spec", {{"annotations", {{"openfuyao.com/qos-level", "LS"}}}}}}, "DEFAULT", "openfuyao-ls"},
        {{{"spec", {{"annotations", {{"volcano.sh/qos-level", "LS"}}}}}}, "DEFAULT", "volcano-ls"},
        {{{"spec", {{"annotations", {{"volcano.sh/qos-level", "BE"}}}}}}, "OFFLINE", "volcano-be"},
        {{{"spec", {{"annotations", {{"katalyst.kubewharf.io/qos_level", "reclaimed_cores"}}}}}}, "KATALYST", "katalyst-reclaimed"},
        {{{"spec", {{"annotations", {{"katalyst.kubewharf.io/qos_level", "dedicated_cores"}}}}}}, "KATALYST", "katalyst-dedicated"},
        {{{"spec", {{"annotations", {{"katalyst.kubewharf.io/qos_level", "dec_cores"}}}}}}, "KATALYST-UNKNOWN-LEVEL", "katalyst-unknown-level"},
        {{{"spec", {{"annotations", {{"volcano.sh/preemptable", "true"}}}}}}, "OFFLINE", "rubik-offline"},
        {{{"labels", {{"volcano.sh/preemptable", "true"}}}}, "OFFLINE", "rubik-offline"},
        // offline wins over a claimed online level (rubik refuses promotion)
        {{{"spec", {{"annotations", {{"volcano.sh/preemptable", "true"}, {"volcano.sh/qos-level", "HLS"}}}}}}, "OFFLINE", "rubik-offline"},
        // no carrier: kubelet's values (no kube-QoS fallback classes)
        {{{"spec", {{"cgroupsPath", "/kubepods/besteffort/pod1/abc"}}}}, "DEFAULT", "default"},
        {{{"spec", {{"cgroupsPath", "/kubepods/pod1/abc"}}}}, "DEFAULT", "default"},
        {{{"spec", {{"cgroupsPath", "/k8s.io/abc"}}}}, "DEFAULT", "default"},
        {{{"spec", {{"annotations", {{"io.kubernetes.cri.sandbox-namespace", "kube-system"}}}}}, {"labels", {{"koordinator.sh/qosClass", "BE"}}}},
         "SYSTEM",
         "kube-system"},
    };
    for (const auto& c : cases) {
        INFO(c.patch.dump());
        Decision d = classify_req(p, c.patch);
        CHECK(d.cls->name == c.cls);
        CHECK(d.rule == c.rule);
    }
}

TEST_CASE("promotion gates: a pod label alone never passes; namespaces and guarded keys do", "[classify]") {
    Policy p = bundled();
    const json hls = {{"volcano.sh/qos-level", "HLS"}}, ls = {{"volcano.sh/qos-level", "LS"}};
    Decision d = classify_req(p, {{"spec", {{"annotations", hls}}}});
    CHECK(d.requested == "VOLCANO-HLS");
    CHECK(d.cls->name == "DEFAULT");
    CHECK(d.gate_note.find("class VOLCANO-HLS is gated: namespace \"default\" does not qualify") == 0);
    CHECK(d.gate_note.find("annotation \"volcano.sh/qos-level\" is not declared in [guarded.annotations]") != std::string::npos);
    CHECK(classify_req(p, {{"spec", {{"annotations", ls}}}}).cls->name == "DEFAULT");
    // The label the old bundled gate trusted, set by the pod author: no way in.
    d = classify_req(p, {{"spec", {{"annotations", hls}}}, {"labels", {{"nri-qos.io/allow-hls", "true"}}}});
    CHECK(d.cls->name == "DEFAULT");
    json a = hls;
    a["io.kubernetes.cri.sandbox-namespace"] = "online-shop";
    CHECK(classify_req(p, {{"spec", {{"annotations", a}}}}).cls->name == "DEFAULT");
    // clearcfs asks for LS-unthrottled: gated the same way
    d = classify_req(p, {{"spec", {{"annotations", {{"qos.class", "ls"}}}}}});
    CHECK(d.cls->name == "DEFAULT");
    CHECK(d.gate_note.find("class LS-unthrottled is gated") == 0);
    // The operator declares Volcano's annotation guarded: LS gets 1, HLS 2.
    p.guarded_annotations = {{"volcano.sh/qos-level", "volcano webhook + VAP"}};
    d = classify_req(p, {{"spec", {{"annotations", hls}}}});
    CHECK(d.cls->name == "VOLCANO-HLS");
    CHECK(d.gate_note.empty());
    CHECK(classify_req(p, {{"spec", {{"annotations", ls}}}}).cls->name == "VOLCANO-LS");
    // Offline needs no gate.
    CHECK(classify_req(p, {{"spec", {{"annotations", {{"volcano.sh/qos-level", "BE"}}}}}}).cls->name == "OFFLINE");
}

TEST_CASE("promotion gates: gate.labels qualify only when declared guarded", "[classify]") {
    const std::string text = R"(version = 1
[settings]
default_class = "LS"
[[rules]]
name = "ask"
class = "HLS"
match.labels = { "tier" = "gold" }
[classes.LS]
[classes.HLS]
gate.labels = { "example.com/hls-approved" = "true" }
gate.fallback = "LS"
)";
    Policy p = parse_policy_toml(text, "g.toml");
    const json req = {{"labels", {{"tier", "gold"}, {"example.com/hls-approved", "true"}}}};
    Decision d = classify_req(p, req);
    CHECK(d.cls->name == "LS");
    CHECK(d.gate_note.find("gate label \"example.com/hls-approved\" is not declared in [guarded.labels]") != std::string::npos);
    p = parse_policy_toml(text + "[guarded.labels]\n\"example.com/hls-approved\" = \"set by webhook hls-approval only\"\n", "g.toml");
    d = classify_req(p, req);
    CHECK(d.cls->name == "HLS");
    CHECK(d.gate_pass.find("gate.labels match") != std::string::npos);
    d = classify_req(p, {{"labels", {{"tier", "gold"}, {"example.com/hls-approved", "yes"}}}});
    CHECK(d.cls->name == "LS");
}

namespace {
struct FakeKernel : Kernel {
    std::set<std::string> files;
    IoResult write(Root, const std::string&, std::string_view) override { return {}; }
    std::optional<std::string> read(Root, const std::string& rel) override {
        if (rel.size() > 7 && rel.compare(rel.size() - 7, 7, "cpu.max") == 0) return std::string("50000 100000\n");
        return std::nullopt;
    }
    bool exists(Root, const std::string& rel) override { return files.count(rel) > 0; }
};

Plan plan_for(const std::string& policy_text, const std::string& req_text, Layout layout, FakeKernel* k = nullptr, bool nri = false) {
    static Policy p;
    static Request r;
    p = parse_policy_toml(policy_text, "t.toml");
    r = nri ? parse_nri_event(req_text) : parse_v01_request(req_text);
    PlanInput in;
    in.req = &r;
    in.policy = &p;
    in.paths = resolve_cgroups_path(*r.cgroups_path);
    in.kube_qos = kube_qos_from_path(in.paths->pod);
    Facts f{&r, in.kube_qos};
    in.decision = classify(p, f);
    in.layout = layout;
    static FakeKernel fk;
    in.kernel = k ? k : &fk;
    return build_plan(in);
}

std::map<std::string, std::string> writes_of(const Plan& p) {
    std::map<std::string, std::string> m;
    for (const auto& w : p.writes) m[w.rel.substr(w.rel.rfind('/') + 1) + (w.scope == "pod" ? "@pod" : "")] = w.value;
    return m;
}

const char* kAllKnobs = R"(version = 1
[settings]
default_class = "X"
[classes.X.container]
cpu_shares = 1024
cpu_quota_us = "50%"
cpu_period_us = 50000
cpu_burst_us = 1000
memory_limit = "max"
memory_swap = "128Mi"
memory_high = "50%"
memory_low = "16Mi"
pids_max = 100
blkio_weight = 500
cpu_idle = 0
oom_score_adj = 500
raw = [{file = "cpu.bvt_warp_ns", value = 2}]
[classes.X.pod]
cpu_idle = 1
)";
}  // namespace

TEST_CASE("adjustment: cgroup v1 files and values", "[adjust]") {
    json req = json::parse(v01({{"spec", {{"resources", {{"cpu", {{"quota", 100000}}}}}}}}));
    Plan p = plan_for(kAllKnobs, req.dump(), Layout::V1);
    auto w = writes_of(p);
    CHECK(w["cpu.shares"] == "1024");
    CHECK(w["cpu.cfs_quota_us"] == "50000");
    CHECK(w["cpu.cfs_period_us"] == "50000");
    CHECK(w["cpu.cfs_burst_us"] == "1000");
    CHECK(w["memory.limit_in_bytes"] == "-1");
    CHECK(w["memory.memsw.limit_in_bytes"] == std::to_string(128 << 20));
    // memory_high = "50%" follows the class's own memory_limit ("max"): nothing to take 50 % of
    CHECK(w.count("memory.high") == 0);
    CHECK(std::find(p.skipped.begin(), p.skipped.end(), "memory_high: the class's memory_limit is max: no limit to take 50% of") != p.skipped.end());
    CHECK(w["pids.max"] == "100");
    CHECK(w["blkio.weight"] == "500");
    CHECK(w["oom_score_adj"] == "500");
    CHECK(w["cpu.bvt_warp_ns"] == "2");
    CHECK(w.count("cpu.idle@pod") == 0);  // container event: pod knobs are applied at the sandbox event
    const std::string ctr =
        "kubepods/burstable/pod0e2e0000-6edd-4127-830b-934cae53b469/f9159d083de20134b90778a5c6d8ee69ecb3b500f2ef34976b11b59554b7bc8e";
    for (const auto& x : p.writes)
        if (x.knob == "cpu_shares") CHECK(x.rel == "cpu/" + ctr + "/cpu.shares");
        else if (x.knob == "memory_high") CHECK(x.rel == "memory/" + ctr + "/memory.high");
        else if (x.knob == "oom_score_adj") CHECK(x.rel == "2529/oom_score_adj");
    // period written before quota (the kernel checks quota against the period)
    size_t iq = 0, ip = 0;
    for (size_t i = 0; i < p.writes.size(); ++i) {
        if (p.writes[i].knob == "cpu_quota_us") iq = i;
        if (p.writes[i].knob == "cpu_period_us") ip = i;
    }
    CHECK(ip < iq);
    bool low_skipped = false;
    for (const auto& s : p.skipped) low_skipped = low_skipped || s == "memory_low: no cgroup v1 file";
    CHECK(low_skipped);
}

TEST_CASE("adjustment: cgroup v2 conversions", "[adjust]") {
    json req = json::parse(v01({{"spec", {{"resources", {{"cpu", {{"quota", 100000}}}}}}}}));
    Plan p = plan_for(kAllKnobs, req.dump(), Layout::V2);
    auto w = writes_of(p);
    CHECK(w["cpu.weight"] == "100");  // shares 1024 → weight 100 (log-quadratic)
    CHECK(w["cpu.max"] == "50000 50000");  // quota 50% of 100000, period 50000, one write
    CHECK(w["cpu.max.burst"] == "1000");
    CHECK(w["memory.max"] == "max");
    // opencontainers/cgroups ConvertMemorySwapToCgroupV2Value: unlimited memory, the swap value as is
    CHECK(w["memory.swap.max"] == std::to_string(128 << 20));
    CHECK(w.count("memory.high") == 0);  // 50 % of the class's memory_limit = max
    CHECK(w["memory.low"] == std::to_string(16 << 20));
    CHECK(w["pids.max"] == "100");
    CHECK(w["io.weight"] == "default " + std::to_string(blkio_to_io_weight(500)));
    CHECK(w["cpu.bvt_warp_ns"] == "2");
    for (const auto& x : p.writes)
        if (x.knob == "cpu_shares") CHECK(x.rel.rfind("kubepods/", 0) == 0);  // no controller directory on v2

    // linear formula when the policy asks for it
    std::string lin = std::string(kAllKnobs).replace(std::string(kAllKnobs).find("[settings]\n") + 11, 0, "cpu_weight_formula = \"linear\"\n");
    CHECK(writes_of(plan_for(lin, req.dump(), Layout::V2))["cpu.weight"] == "39");
    // only the period: the current quota is kept
    const char* period_only = "version = 1\n[settings]\ndefault_class = \"X\"\n[classes.X.container]\ncpu_period_us = 20000\n";
    CHECK(writes_of(plan_for(period_only, req.dump(), Layout::V2))["cpu.max"] == "50000 20000");
}

TEST_CASE("adjustment: memory+swap on v2 is swap alone", "[adjust]") {
    const char* pol = "version = 1\n[settings]\ndefault_class = \"X\"\n[classes.X.container]\nmemory_swap = \"96Mi\"\n";
    Plan p = plan_for(pol, v01(json::object()), Layout::V2);  // OCI limit 64 MiB
    CHECK(writes_of(p)["memory.swap.max"] == std::to_string(32 << 20));
    CHECK(writes_of(plan_for(pol, v01(json::object()), Layout::V1))["memory.memsw.limit_in_bytes"] == std::to_string(96 << 20));
}

TEST_CASE("adjustment: sandbox events set pod knobs on the pod cgroup only", "[adjust]") {
    std::string sb = fixture("requests/containerd-1.6.20/sandbox-create.json");
    Plan p = plan_for(kAllKnobs, sb, Layout::V1);
    auto w = writes_of(p);
    CHECK(w.size() == 1);
    CHECK(w["cpu.idle@pod"] == "1");
    CHECK(p.writes[0].rel == "cpu/kubepods/burstable/pod0e2e0000-6edd-4127-830b-934cae53b469/cpu.idle");
    // delete: nothing
    CHECK(plan_for(kAllKnobs, fixture("requests/containerd-1.6.20/container-delete.json"), Layout::V1).writes.empty());
}

TEST_CASE("adjustment: percentages need a base value", "[adjust]") {
    const char* pol = "version = 1\n[settings]\ndefault_class = \"X\"\n[classes.X.container]\ncpu_burst_us = \"100%\"\n";
    Plan p = plan_for(pol, v01(json::object()), Layout::V1);  // captured request has no CFS quota
    CHECK(p.writes.empty());
    REQUIRE(p.skipped.size() == 1);
    CHECK(p.skipped[0] == "cpu_burst_us: no OCI cpu.quota to take 100% of");
}

namespace {
/// A native NRI event (the child contract's JSON) of container prod/web/app (pid 4242, cgroup
/// /kubepods/besteffort/podu1/c1) on containerd `version`, with OCI `resources`.
json native_ctr_event(const char* event, const char* version, json resources) {
    return {{"event", event},
            {"runtime", {{"name", "containerd"}, {"version", version}}},
            {"pod", {{"id", "p1"}, {"name", "web"}, {"namespace", "prod"}}},
            {"container",
             {{"id", "c1"},
              {"pod_sandbox_id", "p1"},
              {"name", "app"},
              {"pid", 4242},
              {"linux", {{"cgroups_path", "/kubepods/besteffort/podu1/c1"}, {"resources", std::move(resources)}}}}}};
}
}  // namespace

TEST_CASE("native NRI: CreateContainer adjusts, StartContainer writes the rest", "[adjust][nri]") {
    json ev = native_ctr_event("CreateContainer", "1.7.24~ds1",
                               {{"cpu", {{"quota", {{"value", 100000}}}}}, {"memory", {{"limit", {{"value", 128 << 20}}}}}});
    Plan c = plan_for(kAllKnobs, ev.dump(), Layout::V1, nullptr, true);
    CHECK(c.nri_api == "0.6");
    CHECK(c.writes.empty());  // nothing exists yet at CreateContainer
    const json& res = c.adjustment["linux"]["resources"];
    CHECK(res["cpu"]["shares"]["value"] == 1024);
    CHECK(res["cpu"]["quota"]["value"] == 50000);
    CHECK(res["cpu"]["period"]["value"] == 50000);
    CHECK(res["memory"]["limit"]["value"] == -1);
    CHECK(res["memory"]["swap"]["value"] == 128 << 20);
    CHECK_FALSE(res.contains("pids"));  // NRI 0.6: no pids adjustment
    CHECK_FALSE(c.adjustment["linux"].contains("oom_score_adj"));  // NRI 0.6: no oom_score_adj
    CHECK_FALSE(res.contains("unified"));  // cgroup v1

    ev["event"] = "StartContainer";
    Plan s = plan_for(kAllKnobs, ev.dump(), Layout::V1, nullptr, true);
    auto w = writes_of(s);
    CHECK(w.count("cpu.shares") == 0);  // applied by the runtime from the adjustment
    CHECK(w["pids.max"] == "100");
    CHECK(w["oom_score_adj"] == "500");
    CHECK(w["cpu.cfs_burst_us"] == "1000");
    CHECK(w["cpu.bvt_warp_ns"] == "2");
    CHECK(s.adjustment.is_null());

    // containerd 2.x (NRI 0.8+), cgroup v2 with the files present in the pod cgroup
    ev["event"] = "CreateContainer";
    ev["runtime"]["version"] = "2.1.0";
    FakeKernel k;
    k.files = {"kubepods/besteffort/podu1/memory.high", "kubepods/besteffort/podu1/cpu.max.burst"};
    Plan c2 = plan_for(kAllKnobs, ev.dump(), Layout::V2, &k, true);
    CHECK(c2.nri_api == "0.8+");
    CHECK(c2.adjustment["linux"]["oom_score_adj"]["value"] == 500);
    CHECK(c2.adjustment["linux"]["resources"]["pids"]["limit"] == 100);
    CHECK_FALSE(c2.adjustment["linux"]["resources"]["unified"].contains("memory.high"));  // 50 % of memory_limit = max
    CHECK(c2.adjustment["linux"]["resources"]["unified"]["cpu.max.burst"] == "1000");
    CHECK_FALSE(c2.adjustment["linux"]["resources"]["unified"].contains("memory.low"));  // pod cgroup lacks it: written directly

    ev["event"] = "UpdateContainer";
    Plan u = plan_for(kAllKnobs, ev.dump(), Layout::V1, nullptr, true);
    CHECK(u.update["cpu"]["shares"]["value"] == 1024);
    CHECK(u.writes.empty());
}

// Issue #33 §4: a container the relay first saw CREATED in its Synchronize (its CreateContainer
// went by without nri-qos; the pass's update may have changed only its spec) gets every knob
// written at its StartContainer ("unadjusted": true, set by the relay only). Old code: the member
// was not read, StartContainer left cpu.shares and oom_score_adj to an adjustment that never came.
TEST_CASE("native NRI: StartContainer of an unadjusted container writes every knob", "[adjust][nri][unseen]") {
    json ev = native_ctr_event("StartContainer", "v2.3.4", {{"cpu", {{"quota", {{"value", 100000}}}}}});
    auto normal = writes_of(plan_for(kAllKnobs, ev.dump(), Layout::V1, nullptr, true));
    CHECK(normal.count("cpu.shares") == 0);  // the CreateContainer adjustment's
    CHECK(normal.count("oom_score_adj") == 0);
    ev["unadjusted"] = true;
    Plan s = plan_for(kAllKnobs, ev.dump(), Layout::V1, nullptr, true);
    auto w = writes_of(s);
    CHECK(w["cpu.shares"] == "1024");
    CHECK(w["oom_score_adj"] == "500");
    CHECK(w["cpu.cfs_burst_us"] == normal["cpu.cfs_burst_us"]);
    CHECK(s.adjustment.is_null());
    // the relay's note only: on a StartContainer of a container, a boolean
    ev["unadjusted"] = 1;
    CHECK(error_of([&] { parse_nri_event(ev.dump()); }) == "/unadjusted: expected boolean, got integer");
    ev["unadjusted"] = true;
    ev["event"] = "CreateContainer";
    CHECK(error_of([&] { parse_nri_event(ev.dump()); }) == "/unadjusted: only for a container's StartContainer");
    ev["unadjusted"] = false;
    CHECK_FALSE(parse_nri_event(ev.dump()).unadjusted);
}

// Issue #20: at Synchronize the container already runs, and NRI's ContainerUpdate carries only
// linux.resources (NRI pkg/api ContainerUpdate{linux{resources}}): oom_score_adj, which NRI 0.8+
// carries in a CreateContainer adjustment, must be written to /proc/<pid>/oom_score_adj by the
// evaluator, never dropped (found by the e2e c21-native-sync-existing: the running BE container
// kept oom_score_adj 0).
TEST_CASE("native NRI: Synchronize writes what ContainerUpdate cannot carry (oom_score_adj)", "[adjust][nri][sync]") {
    json ev = {{"event", "Synchronize"},
               {"runtime", {{"name", "containerd"}, {"version", "2.1.9"}}},
               {"pod", {{"id", "p1"}, {"name", "web"}, {"namespace", "prod"}}},
               {"container",
                {{"id", "c1"},
                 {"pod_sandbox_id", "p1"},
                 {"name", "app"},
                 {"pid", 4242},
                 {"linux",
                  {{"cgroups_path", "/kubepods/besteffort/podu1/c1"},
                   {"resources", {{"cpu", {{"quota", {{"value", 100000}}}}}, {"memory", {{"limit", {{"value", 128 << 20}}}}}}}}}}}};
    for (const char* version : {"2.1.9", "1.7.24~ds1"}) {
        CAPTURE(version);
        ev["runtime"]["version"] = version;
        Plan p = plan_for(kAllKnobs, ev.dump(), Layout::V1, nullptr, true);
        auto w = writes_of(p);
        CHECK(w["oom_score_adj"] == "500");  // /proc/4242/oom_score_adj, written now
        CHECK(p.update["cpu"]["shares"]["value"] == 1024);  // the runtime applies this one
        CHECK_FALSE(p.update.contains("oom_score_adj"));
    }
}

TEST_CASE("NRI API level from the runtime version", "[adjust][nri]") {
    CHECK(nri_api_level("containerd", "1.7.24~ds1") == "0.6");
    CHECK(nri_api_level("containerd", "1.7.25") == "0.6");
    CHECK(nri_api_level("containerd", "1.7.26") == "0.8+");
    CHECK(nri_api_level("containerd", "v2.0.0") == "0.8+");  // upstream builds report "v..."
    CHECK(nri_api_level("containerd", "devel") == "0.6");  // unparsable: conservative
    CHECK(nri_api_level("containerd", "2.1.4") == "0.8+");
    CHECK(nri_api_level("isulad", "2.1.5") == "0.6");
}

TEST_CASE("Result metadata is always strings", "[sinks]") {
    json r = {{"plugin", "nri-qos"}, {"error", ""}, {"metadata", {{"n", 3}, {"o", {{"a", 1}}}, {"s", "x"}}}};
    json back = json::parse(dump_result(r));
    for (auto& [k, v] : back["metadata"].items()) CHECK(v.is_string());
    CHECK(back["metadata"]["n"] == "3");
    // invalid UTF-8 does not break the output
    json bad = {{"metadata", {{"m", std::string("\xff\xfe")}}}};
    CHECK_NOTHROW(json::parse(dump_result(bad)));
}

// ---- issue #24: cpu.weight on the scale of the runtime's own weights ---------------------------

TEST_CASE("cpu.weight formulas at their boundary values", "[knobs][weight]") {
    // linear: opencontainers/cgroups utils.go ConvertCPUSharesToCgroupV2Value before PR #20 (runc < 1.3.2)
    CHECK(shares_to_weight(2, WeightFormula::Linear) == 1);
    CHECK(shares_to_weight(3, WeightFormula::Linear) == 1);  // 1 + 9999 / 262142 (integer division)
    CHECK(shares_to_weight(1024, WeightFormula::Linear) == 39);
    CHECK(shares_to_weight(262144, WeightFormula::Linear) == 10000);
    // log-quadratic: PR #20 (runc >= 1.3.2): ceil(10^((L^2 + 125 L)/612 - 7/34)), L = log2(shares)
    CHECK(shares_to_weight(2, WeightFormula::LogQuadratic) == 1);
    CHECK(shares_to_weight(3, WeightFormula::LogQuadratic) == 2);
    CHECK(shares_to_weight(1024, WeightFormula::LogQuadratic) == 100);
    CHECK(shares_to_weight(262144, WeightFormula::LogQuadratic) == 10000);
    // Auto converts like log-quadratic; 0 is "unset" in both
    CHECK(shares_to_weight(1024, WeightFormula::Auto) == 100);
    CHECK(shares_to_weight(0, WeightFormula::Linear) == 0);
    CHECK(shares_to_weight(0, WeightFormula::LogQuadratic) == 0);
    // the issue's pods: Koordinator batch (shares 256) and burstable (512)
    CHECK(shares_to_weight(256, WeightFormula::Linear) == 10);
    CHECK(shares_to_weight(256, WeightFormula::LogQuadratic) == 35);
    CHECK(shares_to_weight(512, WeightFormula::Linear) == 20);
    CHECK(shares_to_weight(512, WeightFormula::LogQuadratic) == 59);
}

TEST_CASE("cpu.weight evidence: a (shares, weight) pair fits one formula, both or none", "[knobs][weight]") {
    CHECK(weight_fit(512, 20) == WeightFit::Linear);
    CHECK(weight_fit(512, 59) == WeightFit::LogQuadratic);
    CHECK(weight_fit(3, 1) == WeightFit::Linear);
    CHECK(weight_fit(3, 2) == WeightFit::LogQuadratic);
    CHECK(weight_fit(2, 1) == WeightFit::Both);  // ambiguous: no evidence
    CHECK(weight_fit(262144, 10000) == WeightFit::Both);
    CHECK(weight_fit(512, 21) == WeightFit::None);  // written by someone else
    CHECK(weight_fit(1, 1) == WeightFit::None);  // shares out of range
    CHECK(weight_fit(262145, 10000) == WeightFit::None);
}

TEST_CASE("cpu.weight formula of a runtime from its --version output", "[knobs][weight]") {
    std::string v;
    CHECK(runtime_version_formula("runc version 1.1.5+ds1\ncommit: 1.1.5+ds1-1+deb12u1\nspec: 1.0.2-dev\n", v) == WeightFormula::Linear);
    CHECK(v == "runc 1.1.5");
    CHECK(runtime_version_formula("runc version 1.3.1\n", v) == WeightFormula::Linear);
    CHECK(runtime_version_formula("runc version 1.3.2\n", v) == WeightFormula::LogQuadratic);
    CHECK(runtime_version_formula("runc version 1.4.0-rc.1\n", v) == WeightFormula::LogQuadratic);
    CHECK(v == "runc 1.4.0");
    CHECK(runtime_version_formula("crun version 1.23\ncommit: x\n", v) == WeightFormula::LogQuadratic);
    CHECK(runtime_version_formula("crun version 1.21\n", v) == WeightFormula::Linear);
    CHECK(runtime_version_formula("youki 0.5\n", v) == WeightFormula::Auto);
    CHECK(v.empty());
    CHECK(runtime_version_formula("", v) == WeightFormula::Auto);
}

TEST_CASE("cpu.weight formula detection: own pair, pod-level pairs, runtime, default", "[adjust][weight]") {
    auto rt = [](WeightFormula f) { return std::function<std::optional<RuntimeFormula>()>([f] { return RuntimeFormula{f, "runc 1.1.5", "runc"}; }); };
    bool sib_called = false;
    std::function<std::vector<WeightPair>()> sibs_linear = [&] {
        sib_called = true;
        return std::vector<WeightPair>{{2, 1, "pod sandbox aaaa"}, {512, 20, "sibling container bbbb"}};
    };
    // 1. the container's own pair decides; nothing after it is looked at
    WeightChoice c = decide_weight_formula(WeightPair{512, 20, "container's own"}, "", sibs_linear, rt(WeightFormula::LogQuadratic));
    CHECK(c.formula == WeightFormula::Linear);
    CHECK(c.text() == "linear: container's own cpu.weight 20 = linear of OCI shares 512");
    CHECK_FALSE(sib_called);
    c = decide_weight_formula(WeightPair{512, 59, "container's own"}, "", nullptr, rt(WeightFormula::Linear));
    CHECK(c.text() == "log-quadratic: container's own cpu.weight 59 = log-quadratic of OCI shares 512");
    // 2. an ambiguous own pair (shares 2 → 1 in both formulas) is no evidence: the pod's pairs decide
    //    (the sandbox's 2 → 1 is ambiguous too; the sibling's 512 → 20 is linear)
    c = decide_weight_formula(WeightPair{2, 1, "container's own"}, "", sibs_linear, rt(WeightFormula::LogQuadratic));
    CHECK(sib_called);
    CHECK(c.formula == WeightFormula::Linear);
    CHECK(c.why == "sibling container bbbb cpu.weight 20 = linear of OCI shares 512; container's own cpu.weight 1 of shares 2 fits both formulas");
    // pod-level pairs that disagree decide nothing: 3. the runtime's version does
    std::function<std::vector<WeightPair>()> mixed = [] {
        return std::vector<WeightPair>{{512, 20, "sibling container a"}, {512, 59, "sibling container b"}};
    };
    c = decide_weight_formula(std::nullopt, "no OCI shares in the request: no evidence of its own", mixed, rt(WeightFormula::Linear));
    CHECK(c.formula == WeightFormula::Linear);
    CHECK(c.why ==
          "runc 1.1.5 (runc --version, cached in the state dir runc-formula); no OCI shares in the request: no evidence of its own; "
          "sibling container a (linear) and sibling container b (log-quadratic) disagree");
    // a pair no formula gives (someone else wrote the weight) is no evidence either
    c = decide_weight_formula(WeightPair{512, 21, "container's own"}, "", nullptr, rt(WeightFormula::Linear));
    CHECK(c.formula == WeightFormula::Linear);
    CHECK(c.why.find("container's own cpu.weight 21 fits no formula of shares 512 (written by someone else)") != std::string::npos);
    // 4. nothing at all: log-quadratic, and the reason says the runtime was never probed
    c = decide_weight_formula(std::nullopt, "", nullptr, nullptr);
    CHECK(c.formula == WeightFormula::LogQuadratic);
    CHECK(c.why.rfind("default (no pair decided, runtime not probed", 0) == 0);
    // a runtime that named no known version: still log-quadratic, and said so
    c = decide_weight_formula(std::nullopt, "", nullptr, rt(WeightFormula::Auto));
    CHECK(c.formula == WeightFormula::LogQuadratic);
    CHECK(c.why == "default (runtime runc reported no known version)");
}

namespace {
/// A cgroup tree in memory: path → content.
struct MapKernel : Kernel {
    std::map<std::string, std::string> files;
    IoResult write(Root, const std::string&, std::string_view) override { return {}; }
    std::optional<std::string> read(Root, const std::string& rel) override {
        auto it = files.find(rel);
        if (it == files.end()) return std::nullopt;
        return it->second;
    }
    bool exists(Root, const std::string& rel) override { return files.count(rel) > 0; }
};

Plan weight_plan(const std::string& formula, MapKernel& k, const std::string& req_text,
                 std::function<std::optional<RuntimeFormula>()> runtime = nullptr) {
    static Policy p;
    static Request r;
    p = parse_policy_toml(
        "version = 1\n[settings]\ndefault_class = \"X\"\n" + formula + "[classes.X.container]\ncpu_shares = 256\n[classes.X.pod]\ncpu_shares = 256\n",
        "w.toml");
    r = parse_v01_request(req_text);
    PlanInput in;
    in.req = &r;
    in.policy = &p;
    in.paths = resolve_cgroups_path(*r.cgroups_path);
    in.kube_qos = kube_qos_from_path(in.paths->pod);
    Facts f{&r, in.kube_qos};
    in.decision = classify(p, f);
    in.layout = Layout::V2;
    in.kernel = &k;
    in.runtime_formula = std::move(runtime);
    return build_plan(in);
}
const std::string kCtrDir =
    "kubepods/burstable/pod0e2e0000-6edd-4127-830b-934cae53b469/f9159d083de20134b90778a5c6d8ee69ecb3b500f2ef34976b11b59554b7bc8e";
}  // namespace

TEST_CASE("cgroup v2 writes convert shares with the formula runc used for the container", "[adjust][weight]") {
    const std::string req = v01(json::object());  // OCI shares 512
    MapKernel k;
    // runc 1.1 wrote the container's weight from shares 512 with the linear formula: 20
    k.files[kCtrDir + "/cpu.weight"] = "20\n";
    Plan p = weight_plan("", k, req);
    CHECK(writes_of(p)["cpu.weight"] == "10");  // the class's 256, linear, below the burstable 20
    CHECK(p.weight_formula == "linear: container's own cpu.weight 20 = linear of OCI shares 512");
    REQUIRE(!p.writes.empty());
    CHECK(p.writes[0].from_shares == 256);
    // runc >= 1.3.2 wrote 59: log-quadratic
    k.files[kCtrDir + "/cpu.weight"] = "59\n";
    p = weight_plan("", k, req);
    CHECK(writes_of(p)["cpu.weight"] == "35");
    CHECK(p.weight_formula == "log-quadratic: container's own cpu.weight 59 = log-quadratic of OCI shares 512");
    // the policy's explicit formula wins over the evidence
    k.files[kCtrDir + "/cpu.weight"] = "20\n";
    p = weight_plan("cpu_weight_formula = \"log-quadratic\"\n", k, req);
    CHECK(writes_of(p)["cpu.weight"] == "35");
    CHECK(p.weight_formula == "log-quadratic: settings.cpu_weight_formula");
    // no evidence of its own (no OCI shares): the runtime probe's cache decides
    json noshares = json::parse(req);
    noshares["spec"]["resources"]["cpu"].erase("shares");
    p = weight_plan("", k, noshares.dump(), [] { return RuntimeFormula{WeightFormula::Linear, "runc 1.1.5", "runc"}; });
    CHECK(writes_of(p)["cpu.weight"] == "10");
    CHECK(p.weight_formula ==
          "linear: runc 1.1.5 (runc --version, cached in the state dir runc-formula); no OCI shares in the request: no evidence of its own");
    // cgroup v1: nothing is converted, nothing is said
    CHECK(plan_for("version = 1\n[settings]\ndefault_class = \"X\"\n[classes.X.container]\ncpu_shares = 256\n", req, Layout::V1)
              .weight_formula.empty());
}

TEST_CASE("pod-level writes follow the same rule: the sandbox's own pair, then the runtime", "[adjust][weight]") {
    std::string sb = fixture("requests/containerd-1.6.20/sandbox-create.json");  // OCI shares 2
    const std::string pod = "kubepods/burstable/pod0e2e0000-6edd-4127-830b-934cae53b469";
    const std::string sbdir = pod + "/97f836f797313b8c1bbda96922a46fc700e505e212b0350c0b7e3d951d01c666";
    MapKernel k;
    k.files[sbdir + "/cpu.weight"] = "1\n";  // shares 2 → 1 in both formulas: no evidence
    k.files[pod + "/cpu.weight"] = "39\n";  // kubelet's pod weight: never used as evidence
    Plan p = weight_plan("", k, sb, [] { return RuntimeFormula{WeightFormula::Linear, "runc 1.1.5", "/usr/sbin/runc"}; });
    CHECK(writes_of(p)["cpu.weight@pod"] == "10");
    CHECK(
        p.weight_formula ==
        "linear: runc 1.1.5 (/usr/sbin/runc --version, cached in the state dir runc-formula); sandbox's own cpu.weight 1 of shares 2 fits both formulas");
    // a sandbox with pod-level shares runc converted (containerd with pod resources): its own pair decides
    json j = json::parse(sb);
    j["spec"]["resources"]["cpu"]["shares"] = 1024;
    k.files[sbdir + "/cpu.weight"] = "100\n";
    p = weight_plan("", k, j.dump(), [] { return RuntimeFormula{WeightFormula::Linear, "runc 1.1.5", "runc"}; });
    CHECK(writes_of(p)["cpu.weight@pod"] == "35");
    CHECK(p.weight_formula == "log-quadratic: sandbox's own cpu.weight 100 = log-quadratic of OCI shares 1024");
    // nothing decides and no probe: log-quadratic
    k.files[sbdir + "/cpu.weight"] = "1\n";
    p = weight_plan("", k, sb);
    CHECK(writes_of(p)["cpu.weight@pod"] == "35");
    CHECK(p.weight_formula.rfind("log-quadratic: default (no pair decided, runtime not probed", 0) == 0);
}

TEST_CASE("settings.cpu_weight_formula: auto by default, round-trips, rejects others", "[policy][weight]") {
    Policy p = parse_policy_toml("version = 1\n[settings]\ndefault_class = \"X\"\n[classes.X]\n", "a.toml");
    CHECK(p.cpu_weight_formula == WeightFormula::Auto);
    CHECK(bundled().cpu_weight_formula == WeightFormula::Auto);
    for (const char* f : {"auto", "log-quadratic", "linear"}) {
        Policy q = parse_policy_toml(std::string("version = 1\n[settings]\ndefault_class = \"X\"\ncpu_weight_formula = \"") + f + "\"\n[classes.X]\n",
                                     "f.toml");
        CHECK(weight_formula_name(q.cpu_weight_formula) == std::string(f));
        CHECK(weight_formula_name(policy_from_json(policy_to_json(q)).cpu_weight_formula) == std::string(f));
    }
    CHECK(error_of([] {
              parse_policy_toml("version = 1\n[settings]\ndefault_class = \"X\"\ncpu_weight_formula = \"runc\"\n[classes.X]\n", "b.toml");
          }).find("settings.cpu_weight_formula: expected \"auto\", \"log-quadratic\" or \"linear\"") != std::string::npos);
}

// ---- issue #21: seed fidelity round 3 ----------------------------------------------------------

namespace {
/// The captured container (or sandbox) request as a kube-BestEffort pod's, with `labels` and
/// `annotations` added.
std::string be_request(const char* file, const json& labels, const json& annotations) {
    json j = json::parse(fixture(std::string("requests/containerd-1.6.20/") + file));
    std::string cp = j["spec"]["cgroupsPath"];
    j["spec"]["cgroupsPath"] = "/kubepods/besteffort/" + cp.substr(std::string("/kubepods/burstable/").size());
    j.merge_patch({{"labels", labels}, {"spec", {{"annotations", annotations}}}});
    return j.dump();
}
}  // namespace

TEST_CASE("adjustment: a class's pod_cpu_weight_formula converts its pod-level shares; containers keep the settings' formula", "[adjust][weight]") {
    // koordlet writes the pod-level cpu.shares itself with its linear ConvertCPUSharesToWeight
    // (koordinator-sh/koordinator pkg/koordlet/util/system/cgroup2.go); runc converts the
    // containers' (log-quadratic, runc >= 1.3.2).
    const std::string pol =
        "version = 1\n[settings]\ndefault_class = \"X\"\ncpu_weight_formula = \"log-quadratic\"\n"
        "[classes.X]\npod_cpu_weight_formula = \"linear\"\n[classes.X.container]\ncpu_shares = 1536\n"
        "[classes.X.pod]\ncpu_shares = 1536\n";
    Plan sb = plan_for(pol, fixture("requests/containerd-1.6.20/sandbox-create.json"), Layout::V2);
    CHECK(writes_of(sb)["cpu.weight@pod"] == "59");  // 1 + (1536 - 2) × 9999 / 262142
    REQUIRE(sb.writes.size() == 1);
    CHECK(sb.writes[0].note == "linear of shares 1536 (classes.X.pod_cpu_weight_formula)");
    Plan ct = plan_for(pol, v01(json::object()), Layout::V2);
    CHECK(writes_of(ct)["cpu.weight"] == "138");  // log-quadratic, as runc writes it
    // without the class setting the pod follows settings.cpu_weight_formula
    std::string plain = pol;
    plain.erase(plain.find("pod_cpu_weight_formula = \"linear\"\n"), std::string("pod_cpu_weight_formula = \"linear\"\n").size());
    CHECK(writes_of(plan_for(plain, fixture("requests/containerd-1.6.20/sandbox-create.json"), Layout::V2))["cpu.weight@pod"] == "138");
    // v1: no conversion
    CHECK(writes_of(plan_for(pol, fixture("requests/containerd-1.6.20/sandbox-create.json"), Layout::V1))["cpu.shares@pod"] == "1536");
    CHECK(error_of([] {
              parse_policy_toml("version = 1\n[settings]\ndefault_class = \"X\"\n[classes.X]\npod_cpu_weight_formula = \"lin\"\n", "t.toml");
          }) == "t.toml:5: classes.X.pod_cpu_weight_formula: expected \"auto\", \"log-quadratic\" or \"linear\"");
}

TEST_CASE("adjustment: a class's container_cpu_weight_formula is the node agent's rewrite of the container's cpu.weight (issue #32 §6)",
          "[adjust][weight]") {
    // koordlet's container reconciler rewrites the batch shares of BE containers every 10 s with
    // its linear ConvertCPUSharesToWeight (koordinator-sh/koordinator@a7a1b76bbf81abd26f9c377de1f31a60dd965f6e
    // batch_resource.go Register; cgroup2_test.go TestConvertCPUSharesToWeight: 1024 → 39, 2000 → 77).
    const std::string pol =
        "version = 1\n[settings]\ndefault_class = \"X\"\ncpu_weight_formula = \"log-quadratic\"\n"
        "[classes.X]\ncontainer_cpu_weight_formula = \"linear\"\n[classes.X.container]\ncpu_shares = 2000\n";
    // v0.1: written directly with the class's formula, the note says whose rewrite it is
    Plan ct = plan_for(pol, v01(json::object()), Layout::V2);
    CHECK(writes_of(ct)["cpu.weight"] == "77");
    REQUIRE(ct.writes.size() == 1);
    CHECK(ct.writes[0].note ==
          "linear of shares 2000 (classes.X.container_cpu_weight_formula): the node agent's periodic rewrite of the "
          "container's cpu.weight (koordlet's container reconciler, every 10 s), not the runtime's formula");
    // the pod level is not touched by it
    CHECK(writes_of(plan_for(pol + "[classes.X.pod]\ncpu_shares = 2000\n", fixture("requests/containerd-1.6.20/sandbox-create.json"),
                             Layout::V2))["cpu.weight@pod"] == "170");
    // v1: cpu.shares as is
    CHECK(writes_of(plan_for(pol, v01(json::object()), Layout::V1))["cpu.shares"] == "2000");
    // native NRI: the runtime gets the shares at CreateContainer (its formula), nri-qos writes
    // the class's at StartContainer and at Synchronize (no shares in the update then)
    json ev = {
        {"event", "CreateContainer"},
        {"runtime", {{"name", "containerd"}, {"version", "2.1.0"}}},
        {"pod", {{"id", "p1"}, {"name", "web"}, {"namespace", "prod"}}},
        {"container",
         {{"id", "c1"}, {"pod_sandbox_id", "p1"}, {"name", "app"}, {"pid", 4242}, {"linux", {{"cgroups_path", "/kubepods/besteffort/podu1/c1"}}}}}};
    Plan c = plan_for(pol, ev.dump(), Layout::V2, nullptr, true);
    CHECK(c.adjustment["linux"]["resources"]["cpu"]["shares"]["value"] == 2000);
    CHECK(c.writes.empty());
    ev["event"] = "StartContainer";
    Plan s = plan_for(pol, ev.dump(), Layout::V2, nullptr, true);
    CHECK(writes_of(s)["cpu.weight"] == "77");
    ev["event"] = "UpdateContainer";
    Plan u = plan_for(pol, ev.dump(), Layout::V2, nullptr, true);
    CHECK(u.update["cpu"]["shares"]["value"] == 2000);
    CHECK(u.writes.empty());
    ev["event"] = "PostUpdateContainer";
    CHECK(writes_of(plan_for(pol, ev.dump(), Layout::V2, nullptr, true))["cpu.weight"] == "77");
    // without the setting: the runtime's conversion only, nothing written at StartContainer
    std::string plain = pol;
    plain.erase(plain.find("container_cpu_weight_formula = \"linear\"\n"), std::string("container_cpu_weight_formula = \"linear\"\n").size());
    CHECK(writes_of(plan_for(plain, ev.dump(), Layout::V2, nullptr, true)).count("cpu.weight") == 0);
    CHECK(writes_of(plan_for(plain, v01(json::object()), Layout::V2))["cpu.weight"] == "170");
    CHECK(error_of([] {
              parse_policy_toml("version = 1\n[settings]\ndefault_class = \"X\"\n[classes.X]\ncontainer_cpu_weight_formula = \"lin\"\n", "t.toml");
          }) == "t.toml:5: classes.X.container_cpu_weight_formula: expected \"auto\", \"log-quadratic\" or \"linear\"");
}

TEST_CASE("bundled policy: Koordinator classes convert pod-level shares linearly (koordlet) on cgroup v2", "[adjust][weight][bundled]") {
    Policy p = bundled();
    CHECK(p.classes.at("KOORD-BE").pod_weight_formula_set);
    CHECK(p.classes.at("KOORD-BE").pod_weight_formula == WeightFormula::Linear);
    CHECK(p.classes.at("KOORD-LSR").pod_weight_formula == WeightFormula::Linear);
    CHECK(!p.classes.at("DEFAULT").pod_weight_formula_set);
    CHECK(p.classes.at("KOORD-BE").ctr_weight_formula == WeightFormula::Linear);  // koordlet's container reconciler
    CHECK(!p.classes.at("KOORD-LSR").ctr_weight_formula_set);  // no container shares there
    CHECK(p.koordinator_quota_lift == Policy::QuotaLift::Cpuset);
}

TEST_CASE("merge: a pod labelled for Koordinator BE and Volcano BE gets both agents' knobs, in rule order", "[classify][merge]") {
    Policy p = bundled();
    Request r = parse_v01_request(be_request("container-create.json", {{"koordinator.sh/qosClass", "BE"}}, {{"volcano.sh/qos-level", "BE"}}));
    Facts f{&r, KubeQos::BestEffort};
    Decision d = classify(p, f);
    CHECK(d.cls->name == "KOORD-BE");
    CHECK(d.rule == "koordinator-be");
    REQUIRE(d.merges.size() == 1);
    CHECK(d.merges[0].rule == "volcano-be");
    CHECK(d.merges[0].cls == "OFFLINE");
    CHECK(d.merges[0].applied);
    CHECK(d.merges[0].note ==
          "cpu_qos_level memory_qos_level blkio_throttle pod:cpu_qos_level pod:memory_qos_level sandbox:cpu_qos_level sandbox:memory_qos_level");
    CHECK(
        d.merge_text() ==
        "OFFLINE (rule volcano-be): cpu_qos_level memory_qos_level blkio_throttle pod:cpu_qos_level pod:memory_qos_level sandbox:cpu_qos_level sandbox:memory_qos_level");
    auto has = [](const std::vector<KnobSetting>& l, KnobId id) {
        return std::any_of(l.begin(), l.end(), [&](const KnobSetting& k) { return k.id == id; });
    };
    CHECK(has(d.cls->container, KnobId::CpuShares));  // KOORD-BE's batch facts
    CHECK(has(d.cls->container, KnobId::CpuQosLevel));  // OFFLINE's -1
    CHECK(has(d.cls->pod, KnobId::MemoryQosLevel));
    CHECK(d.cls->fail_closed == false);
    // the burst both classes set stays KOORD-BE's, once
    CHECK(std::count_if(d.cls->container.begin(), d.cls->container.end(), [](const KnobSetting& k) { return k.id == KnobId::CpuBurst; }) == 1);
    // the policy's own class is untouched
    CHECK(!has(p.classes.at("KOORD-BE").container, KnobId::CpuQosLevel));
    // a pod with only one carrier: no merge
    Request only = parse_v01_request(be_request("container-create.json", {{"koordinator.sh/qosClass", "BE"}}, json::object()));
    Facts fo{&only, KubeQos::BestEffort};
    CHECK(classify(p, fo).merges.empty());
    // rubik's offline label too (merge rule rubik-offline), and SYSTEM takes no merges
    Request rb = parse_v01_request(
        be_request("container-create.json", {{"koordinator.sh/qosClass", "BE"}, {"volcano.sh/preemptable", "true"}}, json::object()));
    Facts fr{&rb, KubeQos::BestEffort};
    Decision dr = classify(p, fr);
    REQUIRE(dr.merges.size() == 1);
    CHECK(dr.merges[0].rule == "rubik-offline");
    json sys = json::parse(be_request("container-create.json", json::object(), {{"volcano.sh/qos-level", "BE"}}));
    sys["spec"]["annotations"]["io.kubernetes.cri.sandbox-namespace"] = "kube-system";
    Request rs = parse_v01_request(sys.dump());
    Facts fs{&rs, KubeQos::BestEffort};
    Decision ds = classify(p, fs);
    CHECK(ds.cls->name == "SYSTEM");
    REQUIRE(ds.merges.size() == 1);
    CHECK(!ds.merges[0].applied);
    CHECK(ds.merges[0].note == "class SYSTEM takes no merges (accept_merge = false)");
    CHECK(ds.cls->container.empty());
}

TEST_CASE("merge: a gated class merges only when the pod passes its gate; check does not call merge rules unreachable", "[classify][merge]") {
    const char* pol = R"(version = 1
[settings]
default_class = "D"
[[rules]]
name = "base"
class = "B"
match.labels = { "a" = "1" }
[[rules]]
name = "up"
class = "UP"
merge = true
match.labels = { "a" = "1" }
[[rules]]
name = "down"
class = "DOWN"
merge = true
match.labels = { "a" = "*" }
[classes.D]
[classes.B.container]
cpu_shares = 100
[classes.UP]
gate.namespaces = ["trusted"]
gate.fallback = "D"
[classes.UP.container]
cpu_qos_level = 2
[classes.DOWN]
fail = "closed"
[classes.DOWN.container]
cpu_shares = 2
memory_qos_level = -1
)";
    CHECK(check_policy_text(pol, "t.toml").diags.empty());
    Policy p = parse_policy_toml(pol, "t.toml");
    Request r = parse_v01_request(v01({{"labels", {{"a", "1"}}}}));
    Facts f{&r, KubeQos::Burstable};
    Decision d = classify(p, f);
    CHECK(d.cls->name == "B");
    REQUIRE(d.merges.size() == 2);
    CHECK(!d.merges[0].applied);
    CHECK(d.merges[0].note.rfind("class UP is gated: namespace \"default\" does not qualify", 0) == 0);
    CHECK(d.merges[1].applied);
    CHECK(d.merges[1].note == "memory_qos_level");  // cpu_shares: B's 100 wins
    REQUIRE(d.cls->container.size() == 2);
    CHECK(d.cls->container[0].value.num == 100);
    CHECK(d.cls->fail_closed);  // DOWN says closed
    CHECK(error_of([] {
              parse_policy_toml("version = 1\n[settings]\ndefault_class = \"D\"\n[classes.D]\n[[rules]]\nclass = \"D\"\nmerge = 1\n", "t.toml");
          }) == "t.toml:7: rules.merge: expected true or false");
}

TEST_CASE("leave_to_others: knobs another NRI plugin owns are never set, each skipped 'left to <plugin>'", "[adjust][nri][leave]") {
    // The same class as kAllKnobs, with settings.leave_to_others.
    std::string text = kAllKnobs;
    text.replace(text.find("default_class = \"X\"\n"), std::strlen("default_class = \"X\"\n"),
                 "default_class = \"X\"\nleave_to_others = [{field = \"cpu.shares\", plugin = \"koordlet\"},\n"
                 "  {field = [\"memory_limit\", \"raw:cpu.bvt_warp_ns\", \"cpu_idle\"], plugin = \"05-balloons\"}]\n");
    json ev = {{"event", "CreateContainer"},
               {"runtime", {{"name", "containerd"}, {"version", "2.1.0"}}},
               {"pod", {{"id", "p1"}, {"name", "web"}, {"namespace", "prod"}}},
               {"container",
                {{"id", "c1"},
                 {"pod_sandbox_id", "p1"},
                 {"name", "app"},
                 {"pid", 4242},
                 {"linux", {{"cgroups_path", "/kubepods/besteffort/podu1/c1"}, {"resources", {{"cpu", {{"quota", {{"value", 100000}}}}}}}}}}}};
    Plan c = plan_for(text, ev.dump(), Layout::V1, nullptr, true);
    const json& res = c.adjustment["linux"]["resources"];
    CHECK_FALSE(res["cpu"].contains("shares"));  // koordlet's
    CHECK_FALSE((res.contains("memory") && res["memory"].contains("limit")));
    CHECK(res["cpu"]["quota"]["value"] == 50000);  // still nri-qos's
    auto skipped = [&](const Plan& p, const std::string& line) { return std::find(p.skipped.begin(), p.skipped.end(), line) != p.skipped.end(); };
    CHECK(skipped(c, "cpu_shares: left to koordlet (settings.leave_to_others: cpu.shares)"));
    CHECK(skipped(c, "memory_limit: left to 05-balloons (settings.leave_to_others: memory_limit)"));
    ev["event"] = "StartContainer";
    Plan s = plan_for(text, ev.dump(), Layout::V1, nullptr, true);
    auto w = writes_of(s);
    CHECK(w.count("cpu.bvt_warp_ns") == 0);  // raw knob, by file
    CHECK(w.count("cpu.idle") == 0);
    CHECK(w.count("cpu.shares") == 0);
    CHECK(w["cpu.cfs_burst_us"] == "1000");
    CHECK(skipped(s, "raw:cpu.bvt_warp_ns: left to 05-balloons (settings.leave_to_others: raw:cpu.bvt_warp_ns)"));
    CHECK(skipped(s, "cpu_idle: left to 05-balloons (settings.leave_to_others: cpu_idle)"));
    // cgroup v2: cpu.shares covers the cpu_weight knob's file too; UpdateContainer carries neither
    ev["event"] = "UpdateContainer";
    Plan u = plan_for(text, ev.dump(), Layout::V2, nullptr, true);
    CHECK_FALSE(u.update["cpu"].contains("shares"));
    CHECK(skipped(u, "cpu_shares: left to koordlet (settings.leave_to_others: cpu.shares)"));

    // The pipeline's own strip (before facts): pod knobs too, with the "pod:" prefix.
    Policy p = parse_policy_toml(text, "t.toml");
    ClassDef cls = p.classes.at("X");
    std::vector<std::string> left = leave_to_others(cls, p);
    CHECK(std::find(left.begin(), left.end(), "pod:cpu_idle: left to 05-balloons (settings.leave_to_others: cpu_idle)") != left.end());
    CHECK(cls.pod.empty());
    for (const auto& k : cls.container) {
        CHECK(k.id != KnobId::CpuShares);
        CHECK(k.id != KnobId::MemoryLimit);
        CHECK(k.id != KnobId::Raw);
    }
}

// Issue #31 item 5: the process-attribute knobs (NRI v0.10-v0.12 LinuxContainerAdjustment
// io_priority, scheduler, memory_policy): policy syntax, one-line errors, the adjustment per
// runtime NRI version, and the skip reason on runtimes (and paths) that cannot carry them.
namespace {
const char* kProcKnobs = R"(version = 1
[settings]
default_class = "X"
[classes.X.container]
sched_policy = "idle"
sched_nice = 19
io_class = "idle"
memory_policy = "bind"
memory_policy_nodes = "0"
)";
json proc_event(const char* event, const char* version) {
    return {
        {"event", event},
        {"runtime", {{"name", "containerd"}, {"version", version}}},
        {"pod", {{"id", "p1"}, {"name", "web"}, {"namespace", "prod"}}},
        {"container",
         {{"id", "c1"}, {"pod_sandbox_id", "p1"}, {"name", "app"}, {"pid", 4242}, {"linux", {{"cgroups_path", "/kubepods/besteffort/podu1/c1"}}}}}};
}
std::string skipped_of(const Plan& p, const std::string& knob) {
    for (const auto& s : p.skipped)
        if (s.rfind(knob + ": ", 0) == 0) return s;
    return "";
}
}  // namespace

TEST_CASE("process knobs: values and one-line errors", "[knobs][process]") {
    auto val = [](const char* key, const std::string& s) { return parse_knob_value(*find_knob(key), &s, nullptr); };
    auto ival = [](const char* key, int64_t i) { return parse_knob_value(*find_knob(key), nullptr, &i); };
    CHECK(val("sched_policy", "idle").num == 2);
    CHECK(knob_choices(KnobId::SchedPolicy)[2].nri == 6);  // SCHED_IDLE
    CHECK(val("io_class", "idle").num == 2);
    CHECK(knob_choices(KnobId::IoClass)[2].nri == 3);  // IOPRIO_CLASS_IDLE
    CHECK(val("memory_policy", "weighted_interleave").num == 6);
    CHECK(ival("sched_nice", -20).num == -20);
    CHECK_THROWS_WITH(val("sched_policy", "fifo"), "sched_policy: expected \"other\", \"batch\" or \"idle\", got \"fifo\"");
    CHECK_THROWS_WITH(ival("sched_policy", 6), "sched_policy: expected \"other\", \"batch\" or \"idle\"");
    CHECK_THROWS_WITH(ival("sched_nice", 20), "sched_nice: 20 out of range [-20, 19]");
    CHECK_THROWS_WITH(ival("io_level", 8), "io_level: 8 out of range [0, 7]");
    CHECK_THROWS_WITH(val("io_class", "none"), "io_class: expected \"rt\", \"be\" or \"idle\", got \"none\"");
    CHECK_THROWS_WITH(val("memory_policy_nodes", "1-0"), Catch::Contains("memory_policy_nodes: expected a cpuset list"));

    auto err = [](const std::string& text) { return error_of([&] { parse_policy_toml(text, "p.toml"); }); };
    const std::string head = "version = 1\n[settings]\ndefault_class = \"A\"\n[classes.A]\n";
    CHECK(err(head + "[classes.A.container]\nsched_policy = \"rr\"\n") ==
          "p.toml:6: classes.A.container.sched_policy: expected \"other\", \"batch\" or \"idle\", got \"rr\"");
    CHECK(err(head + "[classes.A.container]\nmemory_policy = \"bind\"\n") ==
          "p.toml:5: classes.A.container: memory_policy = \"bind\" needs memory_policy_nodes (set_mempolicy(2))");
    CHECK(err(head + "[classes.A.container]\nmemory_policy = \"local\"\nmemory_policy_nodes = \"0\"\n") ==
          "p.toml:5: classes.A.container: memory_policy = \"local\" takes no memory_policy_nodes (set_mempolicy(2))");
    CHECK(err(head + "[classes.A.container]\nmemory_policy_nodes = \"0\"\n") ==
          "p.toml:5: classes.A.container: memory_policy_nodes needs memory_policy (the mode)");
    CHECK(err(head + "[classes.A.pod]\nsched_policy = \"idle\"\n").find("sched_policy applies to processes, set it under .container") !=
          std::string::npos);
    CHECK(err(head + "[classes.A.container]\nmemory_policy = \"preferred\"\n") == "");  // empty nodes: local allocation
    // the compiled form keeps them (knob ids before raw; format version 9)
    Policy p = parse_policy_toml(kProcKnobs, "t.toml");
    Policy q = policy_from_json(policy_to_json(p));
    CHECK(policy_to_json(q) == policy_to_json(p));
    // leave_to_others: NRI's field names cover both knobs of one message
    FieldKnobs fk;
    std::string e;
    REQUIRE(field_knobs("memory_policy", fk, e));
    CHECK(fk.knobs == (knob_bit(KnobId::MemoryPolicy) | knob_bit(KnobId::MemoryPolicyNodes)));
    REQUIRE(field_knobs("scheduler", fk, e));
    CHECK(fk.knobs == (knob_bit(KnobId::SchedPolicy) | knob_bit(KnobId::SchedNice)));
    REQUIRE(field_knobs("io_priority", fk, e));
    CHECK(fk.knobs == (knob_bit(KnobId::IoClass) | knob_bit(KnobId::IoLevel)));
}

TEST_CASE("NRI minor version from the runtime version", "[adjust][nri][process]") {
    CHECK(nri_api_minor("containerd", "1.7.24~ds1") == 6);
    CHECK(nri_api_minor("containerd", "1.7.26") == 8);
    CHECK(nri_api_minor("containerd", "2.1.9") == 8);
    CHECK(nri_api_minor("containerd", "v2.2.0") == 10);
    CHECK(nri_api_minor("containerd", "v2.2.7") == 11);
    CHECK(nri_api_minor("containerd", "v2.3.4") == 12);
    CHECK(nri_api_minor("containerd", "v2.4.0-beta.0") == 12);
    CHECK(nri_api_minor("isulad", "2.3.4") == 6);
    CHECK(nri_api_minor("containerd", "devel") == 6);
}

TEST_CASE("process knobs: carried per runtime NRI version, else skipped with the reason", "[adjust][nri][process]") {
    // containerd 2.3.4 (NRI 0.12): all three messages in the CreateContainer adjustment
    Plan c = plan_for(kProcKnobs, proc_event("CreateContainer", "v2.3.4").dump(), Layout::V2, nullptr, true);
    const json& l = c.adjustment["linux"];
    CHECK(l["scheduler"] == json({{"policy", "SCHED_IDLE"}, {"nice", 19}}));
    CHECK(l["io_priority"] == json({{"class", "IOPRIO_CLASS_IDLE"}, {"priority", 0}}));
    CHECK(l["memory_policy"] == json({{"mode", "MPOL_BIND"}, {"nodes", "0"}}));
    CHECK(c.skipped.empty());
    CHECK(c.writes.empty());
    CHECK(c.via_runtime == std::vector<std::string>{"sched_policy=idle (NRI scheduler SCHED_IDLE)", "sched_nice=19 (NRI scheduler)",
                                                    "io_class=idle (NRI io_priority IOPRIO_CLASS_IDLE)",
                                                    "memory_policy=bind (NRI memory_policy MPOL_BIND)", "memory_policy_nodes=0 (NRI memory_policy)"});
    // StartContainer: applied by the runtime already, nothing written, nothing skipped
    Plan s = plan_for(kProcKnobs, proc_event("StartContainer", "v2.3.4").dump(), Layout::V2, nullptr, true);
    CHECK(s.writes.empty());
    CHECK(s.skipped.empty());

    // containerd 2.2.7 (NRI 0.11): scheduler and io_priority; memory policy skipped with why
    Plan c22 = plan_for(kProcKnobs, proc_event("CreateContainer", "v2.2.7").dump(), Layout::V2, nullptr, true);
    CHECK(c22.adjustment["linux"].contains("scheduler"));
    CHECK(c22.adjustment["linux"].contains("io_priority"));
    CHECK_FALSE(c22.adjustment["linux"].contains("memory_policy"));
    CHECK(skipped_of(c22, "memory_policy") ==
          "memory_policy: containerd v2.2.7 speaks NRI 0.11, which has no NRI memory_policy (NRI >= 0.12, containerd >= 2.3.0); "
          "no process can set another's memory policy (set_mempolicy(2) acts on the calling thread only)");

    // containerd 2.2.0 (NRI 0.10): io_priority only
    Plan c220 = plan_for(kProcKnobs, proc_event("CreateContainer", "v2.2.0").dump(), Layout::V2, nullptr, true);
    CHECK(c220.adjustment["linux"].contains("io_priority"));
    CHECK_FALSE(c220.adjustment["linux"].contains("scheduler"));
    CHECK(skipped_of(c220, "sched_policy")
              .find("speaks NRI 0.10, which has no NRI scheduler (NRI >= 0.11, containerd >= 2.2.1); "
                    "nri-qos does not call sched_setattr(2)") != std::string::npos);

    // containerd 2.1.9 (NRI 0.8): nothing carried, each knob skipped with the reason, at both events
    for (const char* ev : {"CreateContainer", "StartContainer"}) {
        CAPTURE(ev);
        Plan o = plan_for(kProcKnobs, proc_event(ev, "2.1.9").dump(), Layout::V2, nullptr, true);
        CHECK(o.adjustment.is_null());
        CHECK(o.writes.empty());
        CHECK(o.skipped.size() == 5);
        CHECK(skipped_of(o, "io_class")
                  .rfind("io_class: containerd 2.1.9 speaks NRI 0.8, which has no NRI io_priority (NRI >= 0.10, "
                         "containerd >= 2.2.0); nri-qos does not call ioprio_set(2)",
                         0) == 0);
    }
    // the v0.1 hook (containerd 1.6/1.7/2.x conf.json): no adjustment to carry them in
    Plan v = plan_for(kProcKnobs, fixture("requests/containerd-1.6.20/container-create.json"), Layout::V1);
    CHECK(v.writes.empty());
    CHECK(skipped_of(v, "sched_policy").rfind("sched_policy: the v0.1 hook has no NRI adjustment to carry it in NRI scheduler", 0) == 0);
    // an update (or Synchronize) cannot carry them: said so
    Plan u = plan_for(kProcKnobs, proc_event("UpdateContainer", "v2.3.4").dump(), Layout::V2, nullptr, true);
    CHECK(u.update.is_null());
    CHECK(skipped_of(u, "sched_policy").find("set by the runtime at CreateContainer only") != std::string::npos);
    // a nice alone: SCHED_OTHER with that nice; a level alone: the best-effort class
    Plan n = plan_for("version = 1\n[settings]\ndefault_class = \"X\"\n[classes.X.container]\nsched_nice = 10\nio_level = 7\n",
                      proc_event("CreateContainer", "v2.3.4").dump(), Layout::V2, nullptr, true);
    CHECK(n.adjustment["linux"]["scheduler"] == json({{"policy", "SCHED_OTHER"}, {"nice", 10}}));
    CHECK(n.adjustment["linux"]["io_priority"] == json({{"class", "IOPRIO_CLASS_BE"}, {"priority", 7}}));
}
