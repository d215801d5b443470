// Unit tests of the protobuf <-> NRI Go JSON mapping (src/nri/nri_json.*).
#include <catch2/catch.hpp>

#include <cstdio>
#include <limits>
#include <string>
#include <vector>

#include "os/json_print.hpp"
#include "nri/nri_json.hpp"

using nlohmann::json;
namespace pb = ::nri::pkg::api::v1alpha1;

namespace {

// An adjustment that sets every field the child may return.
const char* kFullAdjustment = R"({
  "annotations": {"k": "v", "nri-qos/class": "be"},
  "linux": {
    "resources": {
      "memory": {"limit": {"value": 67108864}, "reservation": {"value": 33554432},
                 "swap": {"value": 134217728}, "kernel": {"value": 1024}, "kernel_tcp": {"value": 2048},
                 "swappiness": {"value": 60}, "disable_oom_killer": {"value": true},
                 "use_hierarchy": {"value": false}},
      "cpu": {"shares": {"value": 2}, "quota": {"value": -1}, "period": {"value": 100000},
              "realtime_runtime": {"value": 950000}, "realtime_period": {"value": 1000000},
              "cpus": "0-3", "mems": "0"},
      "hugepage_limits": [{"page_size": "2MB", "limit": 1048576}, {"page_size": "1GB", "limit": 0}],
      "blockio_class": {"value": "x"},
      "rdt_class": {"value": "BE"},
      "unified": {"memory.high": "60397977", "cpu.idle": "1"},
      "devices": [{"allow": false, "access": "rwm"},
                  {"allow": true, "type": "c", "major": {"value": 1}, "minor": {"value": 3}, "access": "rw"}],
      "pids": {"limit": 100}
    },
    "oom_score_adj": {"value": 1000}
  }
})";

std::string map_error(const std::string& text) {
    pb::ContainerAdjustment a;
    std::string err;
    bool ok = nriqos::nri::adjustment_from_json(json::parse(text), a, err);
    return ok ? std::string("OK") : err;
}

}  // namespace

TEST_CASE("json: every adjustment field maps to protobuf", "[nri][json]") {
    pb::ContainerAdjustment a;
    std::string err;
    REQUIRE(nriqos::nri::adjustment_from_json(json::parse(kFullAdjustment), a, err));
    CHECK(err.empty());
    CHECK(a.annotations().at("k") == "v");
    CHECK(a.annotations().at("nri-qos/class") == "be");
    REQUIRE(a.has_linux());
    const auto& r = a.linux().resources();
    const auto& m = r.memory();
    CHECK(m.limit().value() == 67108864);
    CHECK(m.reservation().value() == 33554432);
    CHECK(m.swap().value() == 134217728);
    CHECK(m.kernel().value() == 1024);
    CHECK(m.kernel_tcp().value() == 2048);
    CHECK(m.swappiness().value() == 60);
    CHECK(m.has_disable_oom_killer());
    CHECK(m.disable_oom_killer().value() == true);
    CHECK(m.has_use_hierarchy());
    CHECK(m.use_hierarchy().value() == false);
    const auto& c = r.cpu();
    CHECK(c.shares().value() == 2);
    CHECK(c.quota().value() == -1);
    CHECK(c.period().value() == 100000);
    CHECK(c.realtime_runtime().value() == 950000);
    CHECK(c.realtime_period().value() == 1000000);
    CHECK(c.cpus() == "0-3");
    CHECK(c.mems() == "0");
    REQUIRE(r.hugepage_limits_size() == 2);
    CHECK(r.hugepage_limits(0).page_size() == "2MB");
    CHECK(r.hugepage_limits(0).limit() == 1048576);
    CHECK(r.hugepage_limits(1).page_size() == "1GB");
    CHECK(r.hugepage_limits(1).limit() == 0);
    CHECK(r.blockio_class().value() == "x");
    CHECK(r.rdt_class().value() == "BE");
    CHECK(r.unified().at("memory.high") == "60397977");
    CHECK(r.unified().at("cpu.idle") == "1");
    REQUIRE(r.devices_size() == 2);
    CHECK_FALSE(r.devices(0).allow());
    CHECK(r.devices(0).access() == "rwm");
    CHECK_FALSE(r.devices(0).has_major());
    CHECK(r.devices(1).allow());
    CHECK(r.devices(1).type() == "c");
    CHECK(r.devices(1).major().value() == 1);
    CHECK(r.devices(1).minor().value() == 3);
    CHECK(r.pids().limit() == 100);
    CHECK(a.linux().oom_score_adj().value() == 1000);

    // and back: protobuf -> JSON reproduces the input exactly
    CHECK(nriqos::nri::adjustment_to_json(a) == json::parse(kFullAdjustment));
}

TEST_CASE("json: absent vs present-zero wrappers", "[nri][json]") {
    pb::ContainerAdjustment a;
    std::string err;
    REQUIRE(nriqos::nri::adjustment_from_json(json::parse(R"({"linux":{"resources":{"cpu":{"shares":{},"quota":null},"memory":{}}}})"), a, err));
    const auto& c = a.linux().resources().cpu();
    CHECK(c.has_shares());  // {} = Go omitempty of value 0: present, set to 0
    CHECK(c.shares().value() == 0);
    CHECK_FALSE(c.has_quota());  // null = absent = do not touch
    CHECK_FALSE(c.has_period());
    CHECK(a.linux().resources().has_memory());
    CHECK_FALSE(a.linux().has_oom_score_adj());
    CHECK(a.annotations().empty());
    // null / empty adjustments are valid and empty
    REQUIRE(nriqos::nri::adjustment_from_json(json(), a, err));
    CHECK(a.ByteSizeLong() == 0);
    REQUIRE(nriqos::nri::adjustment_from_json(json::object(), a, err));
    CHECK(a.ByteSizeLong() == 0);
}

TEST_CASE("json: 64-bit integers are accepted as numbers or decimal strings", "[nri][json]") {
    pb::LinuxResources r;
    std::string err;
    REQUIRE(nriqos::nri::resources_from_json(json::parse(R"({
      "cpu": {"quota": {"value": "-1"}, "shares": {"value": "18446744073709551615"}},
      "memory": {"limit": {"value": "9223372036854775807"}},
      "hugepage_limits": [{"page_size": "2MB", "limit": "4096"}],
      "pids": {"limit": "-1"}})"),
                                             r, err));
    CHECK(r.cpu().quota().value() == -1);
    CHECK(r.cpu().shares().value() == 18446744073709551615ULL);
    CHECK(r.memory().limit().value() == 9223372036854775807LL);
    CHECK(r.hugepage_limits(0).limit() == 4096);
    CHECK(r.pids().limit() == -1);
}

TEST_CASE("json: wrong types and unknown keys are rejected with the JSON path", "[nri][json]") {
    CHECK_THAT(map_error(R"({"linux":{"resources":{"cpu":{"shares":{"value":"abc"}}}}})"),
               Catch::Contains("adjustment.linux.resources.cpu.shares.value") && Catch::Contains("uint64"));
    CHECK_THAT(map_error(R"({"linux":{"resources":{"cpu":{"shares":{"value":-2}}}}})"),
               Catch::Contains("cpu.shares.value: expected an unsigned integer"));
    CHECK_THAT(map_error(R"({"linux":{"resources":{"cpu":{"shares":5}}}})"), Catch::Contains("cpu.shares: expected an object"));
    CHECK_THAT(map_error(R"({"linux":{"resources":{"cpu":{"quota":{"value":1.5}}}}})"), Catch::Contains("cpu.quota.value: expected an integer"));
    CHECK_THAT(map_error(R"({"linux":{"resources":{"cpu":{"quota":{"value":"12x"}}}}})"), Catch::Contains("cpu.quota.value"));
    CHECK_THAT(map_error(R"({"linux":{"resources":{"cpu":{"shares":{"value":2,"extra":1}}}}})"), Catch::Contains("cpu.shares.extra: unknown field"));
    CHECK_THAT(map_error(R"({"linux":{"resources":{"memory":{"limit":{"value":18446744073709551615}}}}})"),
               Catch::Contains("memory.limit.value: integer out of int64 range"));
    CHECK_THAT(map_error(R"({"linux":{"resources":{"memory":{"disable_oom_killer":{"value":"true"}}}}})"),
               Catch::Contains("memory.disable_oom_killer.value: expected a boolean"));
    CHECK_THAT(map_error(R"({"linux":{"resources":{"cpu":{"cpus":3}}}})"), Catch::Contains("cpu.cpus: expected a string"));
    CHECK_THAT(map_error(R"({"linux":{"resources":{"hugepage_limits":{"page_size":"2MB"}}}})"),
               Catch::Contains("hugepage_limits: expected an array"));
    CHECK_THAT(map_error(R"({"linux":{"resources":{"hugepage_limits":[{"limit":-1}]}}})"), Catch::Contains("hugepage_limits[0].limit"));
    CHECK_THAT(map_error(R"({"linux":{"resources":{"unified":{"memory.high":60397977}}}})"),
               Catch::Contains("unified.memory.high: expected a string"));
    CHECK_THAT(map_error(R"({"linux":{"resources":{"rdt_class":"BE"}}})"), Catch::Contains("rdt_class: expected an object"));
    CHECK_THAT(map_error(R"({"linux":{"resources":{"pids":{"limit":true}}}})"), Catch::Contains("pids.limit: expected an integer"));
    CHECK_THAT(map_error(R"({"linux":{"resources":{"devices":[{"allow":"yes"}]}}})"), Catch::Contains("devices[0].allow: expected a boolean"));
    CHECK_THAT(map_error(R"({"linux":{"oom_score_adj":{"value":1001}}})"), Catch::Contains("oom_score_adj.value: out of range"));
    CHECK_THAT(map_error(R"({"annotations":{"k":1}})"), Catch::Contains("annotations.k: expected a string"));
    CHECK_THAT(map_error(R"({"annotations":["k"]})"), Catch::Contains("annotations: expected an object"));
    CHECK_THAT(map_error(R"({"mounts":[]})"), Catch::Contains("adjustment.mounts: unknown field"));
    CHECK_THAT(map_error(R"({"linux":{"cgroups_path":"/x"}})"), Catch::Contains("linux.cgroups_path: unknown field"));
    CHECK_THAT(map_error(R"([1,2])"), Catch::Contains("adjustment: expected an object"));
    CHECK(map_error(R"({"linux":{"oom_score_adj":{"value":-1000}}})") == "OK");

    pb::LinuxResources r;
    std::string err;
    CHECK_FALSE(nriqos::nri::resources_from_json(json::parse(R"({"cpu":{"period":{"value":-5}}})"), r, err));
    CHECK_THAT(err, Catch::StartsWith("update.cpu.period.value"));
}

TEST_CASE("json: pod sandbox in NRI Go JSON", "[nri][json]") {
    pb::PodSandbox p;
    p.set_id("sb1");
    p.set_name("web");
    p.set_uid("uid-1");
    p.set_namespace_("default");
    (*p.mutable_labels())["app"] = "web";
    (*p.mutable_annotations())["io.kubernetes.cri.sandbox-id"] = "sb1";
    p.set_runtime_handler("runc");
    p.set_pid(4242);
    p.add_ips("10.0.0.5");
    auto* l = p.mutable_linux();
    l->set_cgroup_parent("/kubepods/burstable/pod1");
    l->set_cgroups_path("/kubepods/burstable/pod1/sb1");
    l->mutable_resources()->mutable_cpu()->mutable_shares()->set_value(2);
    l->mutable_pod_resources()->mutable_memory()->mutable_limit()->set_value(1 << 20);
    l->mutable_pod_overhead()->mutable_cpu()->set_cpus("");
    auto* ns = l->add_namespaces();
    ns->set_type("network");
    ns->set_path("/proc/4242/ns/net");

    json j = nriqos::nri::pod_to_json(p);
    CHECK(j == json::parse(R"({
    "id": "sb1", "name": "web", "uid": "uid-1", "namespace": "default",
    "labels": {"app": "web"}, "annotations": {"io.kubernetes.cri.sandbox-id": "sb1"},
    "runtime_handler": "runc",
    "linux": {"pod_overhead": {"cpu": {}},
              "pod_resources": {"memory": {"limit": {"value": 1048576}}},
              "cgroup_parent": "/kubepods/burstable/pod1",
              "cgroups_path": "/kubepods/burstable/pod1/sb1",
              "namespaces": [{"type": "network", "path": "/proc/4242/ns/net"}],
              "resources": {"cpu": {"shares": {"value": 2}}}},
    "pid": 4242, "ips": ["10.0.0.5"]})"));
    // empty fields are omitted like Go's omitempty
    CHECK(nriqos::nri::pod_to_json(pb::PodSandbox()) == json::object());
}

TEST_CASE("json: container and linux resources in NRI Go JSON", "[nri][json]") {
    pb::Container c;
    c.set_id("c1");
    c.set_pod_sandbox_id("sb1");
    c.set_name("app");
    c.set_state(pb::CONTAINER_CREATED);
    (*c.mutable_labels())["io.cri-containerd.kind"] = "container";
    auto* l = c.mutable_linux();
    l->mutable_oom_score_adj()->set_value(0);
    l->set_cgroups_path("/kubepods/pod1/c1");
    auto* r = l->mutable_resources();
    r->mutable_cpu()->mutable_shares()->set_value(512);
    r->mutable_memory();
    auto* d = r->add_devices();
    d->set_access("rwm");
    json j = nriqos::nri::container_to_json(c);
    CHECK(j == json::parse(R"({
    "id": "c1", "pod_sandbox_id": "sb1", "name": "app", "state": 1,
    "labels": {"io.cri-containerd.kind": "container"},
    "linux": {"resources": {"cpu": {"shares": {"value": 512}}, "memory": {},
                            "devices": [{"allow": false, "access": "rwm"}]},
              "oom_score_adj": {"value": 0},
              "cgroups_path": "/kubepods/pod1/c1"}})"));

    // resources: JSON -> protobuf -> JSON round trip of a full object
    json full = json::parse(kFullAdjustment)["linux"]["resources"];
    pb::LinuxResources res;
    std::string err;
    REQUIRE(nriqos::nri::resources_from_json(full, res, err));
    CHECK(nriqos::nri::resources_to_json(res) == full);
}

// ------------------------------------------------------------------ print_event (no DOM)

namespace {

std::string slurp_file(const std::string& path) {
    FILE* f = fopen(path.c_str(), "rb");
    REQUIRE(f);
    std::string s;
    char buf[4096];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, f)) > 0) s.append(buf, n);
    fclose(f);
    return s;
}

// Test-only reverse of pod_to_json / container_to_json for the captured events (the relay never
// reads these objects from JSON).
void map_from(const json& j, google::protobuf::Map<std::string, std::string>* m) {
    if (j.is_object())
        for (auto it = j.begin(); it != j.end(); ++it) (*m)[it.key()] = it.value().get<std::string>();
}
void namespaces_from(const json& j, google::protobuf::RepeatedPtrField<pb::LinuxNamespace>* out) {
    if (!j.is_array()) return;
    for (const auto& e : j) {
        auto* ns = out->Add();
        ns->set_type(e.value("type", ""));
        ns->set_path(e.value("path", ""));
    }
}
void resources_from(const json& j, pb::LinuxResources* r) {
    std::string err;
    REQUIRE(nriqos::nri::resources_from_json(j, *r, err, "resources"));
}
pb::PodSandbox pod_from(const json& j) {
    pb::PodSandbox p;
    p.set_id(j.value("id", ""));
    p.set_name(j.value("name", ""));
    p.set_uid(j.value("uid", ""));
    p.set_namespace_(j.value("namespace", ""));
    if (j.contains("labels")) map_from(j["labels"], p.mutable_labels());
    if (j.contains("annotations")) map_from(j["annotations"], p.mutable_annotations());
    p.set_runtime_handler(j.value("runtime_handler", ""));
    if (j.contains("linux")) {
        const json& l = j["linux"];
        auto* pl = p.mutable_linux();
        if (l.contains("pod_overhead")) resources_from(l["pod_overhead"], pl->mutable_pod_overhead());
        if (l.contains("pod_resources")) resources_from(l["pod_resources"], pl->mutable_pod_resources());
        pl->set_cgroup_parent(l.value("cgroup_parent", ""));
        pl->set_cgroups_path(l.value("cgroups_path", ""));
        if (l.contains("namespaces")) namespaces_from(l["namespaces"], pl->mutable_namespaces());
        if (l.contains("resources")) resources_from(l["resources"], pl->mutable_resources());
    }
    p.set_pid(j.value("pid", 0u));
    if (j.contains("ips"))
        for (const auto& ip : j["ips"]) p.add_ips(ip.get<std::string>());
    return p;
}
pb::Container container_from(const json& j) {
    pb::Container c;
    c.set_id(j.value("id", ""));
    c.set_pod_sandbox_id(j.value("pod_sandbox_id", ""));
    c.set_name(j.value("name", ""));
    c.set_state(pb::ContainerState(j.value("state", 0)));
    if (j.contains("labels")) map_from(j["labels"], c.mutable_labels());
    if (j.contains("annotations")) map_from(j["annotations"], c.mutable_annotations());
    if (j.contains("linux")) {
        const json& l = j["linux"];
        auto* cl = c.mutable_linux();
        if (l.contains("namespaces")) namespaces_from(l["namespaces"], cl->mutable_namespaces());
        if (l.contains("resources")) resources_from(l["resources"], cl->mutable_resources());
        if (l.contains("oom_score_adj")) cl->mutable_oom_score_adj()->set_value(l["oom_score_adj"].value("value", 0));
        cl->set_cgroups_path(l.value("cgroups_path", ""));
    }
    c.set_pid(j.value("pid", 0u));
    return c;
}

// The printer's text, checked against the DOM path (event_to_json + dump, what Relay::prepare
// printed before) byte for byte.
std::string printed(const std::string& event, const std::string& rt_name, const std::string& rt_version, const pb::PodSandbox& pod,
                    const pb::Container* ctr, const pb::LinuxResources* res) {
    std::string out = "prefix:";  // appends, never clears
    nriqos::nri::print_event(out, event, rt_name, rt_version, pod, ctr, res);
    REQUIRE(out.compare(0, 7, "prefix:") == 0);
    return out.substr(7);
}
std::string dom_dump(const std::string& event, const std::string& rt_name, const std::string& rt_version, const pb::PodSandbox& pod,
                     const pb::Container* ctr, const pb::LinuxResources* res) {
    return nriqos::nri::event_to_json(event, rt_name, rt_version, pod, ctr, res).dump();
}

// Every LinuxResources field set, with extreme values.
void fill_resources(pb::LinuxResources* r, const std::string& s) {
    auto* m = r->mutable_memory();
    m->mutable_limit()->set_value(std::numeric_limits<int64_t>::max());
    m->mutable_reservation()->set_value(std::numeric_limits<int64_t>::min());
    m->mutable_swap()->set_value(-1);
    m->mutable_kernel()->set_value(0);
    m->mutable_kernel_tcp()->set_value(4096);
    m->mutable_swappiness()->set_value(std::numeric_limits<uint64_t>::max());
    m->mutable_disable_oom_killer()->set_value(true);
    m->mutable_use_hierarchy()->set_value(false);
    auto* c = r->mutable_cpu();
    c->mutable_shares()->set_value(uint64_t(1) << 63);
    c->mutable_quota()->set_value(-1);
    c->mutable_period()->set_value(100000);
    c->mutable_realtime_runtime()->set_value(-950000);
    c->mutable_realtime_period()->set_value(0);
    c->set_cpus("0-3," + s);
    c->set_mems(s);
    auto* h = r->add_hugepage_limits();
    h->set_page_size("2MB");
    h->set_limit(std::numeric_limits<uint64_t>::max());
    r->add_hugepage_limits();  // both fields empty: still written
    r->mutable_blockio_class()->set_value(s);
    r->mutable_rdt_class();  // present, empty value: {"value":""}
    (*r->mutable_unified())["memory.high"] = "max";
    (*r->mutable_unified())[s] = s;
    (*r->mutable_unified())[""] = "";
    auto* d = r->add_devices();
    d->set_allow(true);
    d->set_type("c");
    d->mutable_major()->set_value(-1);
    d->mutable_minor()->set_value(std::numeric_limits<int64_t>::min());
    d->set_access(s);
    r->add_devices();  // allow false, nothing else
    r->mutable_pids()->set_limit(-9);
}

// Strings the pod author controls: quotes, backslashes, control characters (every byte below
// 0x20, and DEL), JSON-looking text, non-ASCII UTF-8 of 2, 3 and 4 bytes, and bytes that sort
// around ASCII (0xc3 after 'z').
const char* const kHostile[] = {
    "",
    "plain",
    "q\"uote",
    "back\\slash\\",
    "\\u0000",
    "ctl\x01\x02\x1f\x7f",
    "nl\nret\rtab\tbs\bff\f",
    "\",\"x\":{\"y\":[1,2]}",
    "caf\xc3\xa9",
    "\xe6\x97\xa5\xe6\x9c\xac",
    "\xf0\x9f\x98\x80 emoji",
    "z",
    "Z",
    "a",
    "a.b",
    "a-b",
    "a\x01",
    "</script>",
};

}  // namespace

TEST_CASE("json: print_event is byte-identical to the DOM's dump for the captured events", "[nri][json]") {
    // The fixtures are what the relay wrote to its evaluators' stdin (tests/fixtures/requests/
    // nri-events/README.md): pod and container from them, printed again, give the same bytes.
    for (const char* f : {"run-pod-sandbox.json", "create-container.json", "start-container.json"}) {
        INFO(f);
        std::string text = slurp_file(std::string(NRI_QOS_SRCDIR "/tests/fixtures/requests/nri-events/") + f);
        json ev = json::parse(text);
        pb::PodSandbox pod = pod_from(ev["pod"]);
        pb::Container ctr;
        if (ev.contains("container")) ctr = container_from(ev["container"]);
        const pb::Container* c = ev.contains("container") ? &ctr : nullptr;
        std::string name = ev["event"], rn = ev["runtime"]["name"], rv = ev["runtime"]["version"];
        std::string out = printed(name, rn, rv, pod, c, nullptr);
        CHECK(out == dom_dump(name, rn, rv, pod, c, nullptr));
        CHECK(out + "\n" == text);
    }
}

// Issue #33 §4: the relay's "unadjusted" note (a StartContainer of a container CREATED in its
// Synchronize) is the last member, as dump() sorts it, and only when set.
TEST_CASE("json: print_event prints \"unadjusted\" as the DOM does", "[nri][json][unseen]") {
    pb::PodSandbox pod;
    pod.set_id("p1");
    pb::Container ctr;
    ctr.set_id("c1");
    std::string out = "prefix:";
    nriqos::nri::print_event(out, "StartContainer", "containerd", "v2.3.4", pod, &ctr, nullptr, true);
    CHECK(out.substr(7) == nriqos::nri::event_to_json("StartContainer", "containerd", "v2.3.4", pod, &ctr, nullptr, true).dump());
    CHECK(
        out.substr(7) ==
        R"({"container":{"id":"c1"},"event":"StartContainer","pod":{"id":"p1"},"runtime":{"name":"containerd","version":"v2.3.4"},"unadjusted":true})");
    CHECK(printed("StartContainer", "containerd", "v2.3.4", pod, &ctr, nullptr).find("unadjusted") == std::string::npos);
}

TEST_CASE("json: print_event is byte-identical to the DOM's dump for hostile and full objects", "[nri][json]") {
    pb::PodSandbox empty_pod;
    pb::Container empty_ctr;
    pb::LinuxResources empty_res;
    // Nothing set: {"event":...,"pod":{},"runtime":{"name":"","version":""}} and friends.
    CHECK(printed("RunPodSandbox", "", "", empty_pod, nullptr, nullptr) ==
          R"({"event":"RunPodSandbox","pod":{},"runtime":{"name":"","version":""}})");
    CHECK(printed("UpdateContainer", "", "", empty_pod, &empty_ctr, &empty_res) ==
          dom_dump("UpdateContainer", "", "", empty_pod, &empty_ctr, &empty_res));
    CHECK(printed("UpdateContainer", "", "", empty_pod, &empty_ctr, &empty_res) ==
          R"({"container":{},"event":"UpdateContainer","linux_resources":{},"pod":{},"runtime":{"name":"","version":""}})");
    // Present but empty sub-messages and maps with only empty strings.
    pb::PodSandbox p0;
    p0.mutable_linux()->mutable_resources()->mutable_memory();
    p0.mutable_linux()->mutable_pod_overhead();
    p0.mutable_linux()->add_namespaces();
    (*p0.mutable_labels())[""] = "";
    pb::Container c0;
    c0.mutable_linux();
    CHECK(printed("CreateContainer", "x", "y", p0, &c0, nullptr) == dom_dump("CreateContainer", "x", "y", p0, &c0, nullptr));

    for (const char* s : kHostile) {
        INFO("hostile string: " << json(std::string(s)).dump());
        pb::PodSandbox p;
        p.set_id(s);
        p.set_name(s);
        p.set_uid(s);
        p.set_namespace_(s);
        for (const char* k : kHostile) {
            (*p.mutable_labels())[k] = s;
            (*p.mutable_annotations())[std::string(k) + s] = k;
        }
        p.set_runtime_handler(s);
        auto* l = p.mutable_linux();
        fill_resources(l->mutable_pod_overhead(), s);
        fill_resources(l->mutable_pod_resources(), s);
        fill_resources(l->mutable_resources(), s);
        l->set_cgroup_parent(s);
        l->set_cgroups_path(s);
        auto* ns = l->add_namespaces();
        ns->set_type("network");
        ns->set_path(s);
        l->add_namespaces()->set_type(s);
        p.set_pid(std::numeric_limits<uint32_t>::max());
        p.add_ips(s);
        p.add_ips("");
        pb::Container c;
        c.set_id(s);
        c.set_pod_sandbox_id(s);
        c.set_name(s);
        c.set_state(pb::CONTAINER_RUNNING);
        for (const char* k : kHostile) (*c.mutable_labels())[s + std::string(k)] = s;
        (*c.mutable_annotations())[s] = "";
        auto* cl = c.mutable_linux();
        cl->add_namespaces()->set_path(s);
        fill_resources(cl->mutable_resources(), s);
        cl->mutable_oom_score_adj()->set_value(-1000);
        cl->set_cgroups_path(s);
        c.set_pid(1);
        pb::LinuxResources upd;
        fill_resources(&upd, s);
        for (const char* ev : {"CreateContainer", s}) {
            CHECK(printed(ev, s, s, p, &c, &upd) == dom_dump(ev, s, s, p, &c, &upd));
            CHECK(printed(ev, s, "1.7", p, nullptr, nullptr) == dom_dump(ev, s, "1.7", p, nullptr, nullptr));
            CHECK(printed(ev, "containerd", s, p, nullptr, &upd) == dom_dump(ev, "containerd", s, p, nullptr, &upd));
        }
        // What the evaluator reads back is the same document.
        CHECK(json::parse(printed("CreateContainer", s, s, p, &c, &upd)) == nriqos::nri::event_to_json("CreateContainer", s, s, p, &c, &upd));
    }
}

TEST_CASE("json: print_event replaces invalid UTF-8 where dump() would throw", "[nri][json]") {
    // Unreachable from the wire (protobuf rejects invalid UTF-8 in proto3 strings when the
    // request is parsed), but the printer must not throw into the relay's loop.
    pb::PodSandbox p;
    p.set_name(
        "bad\xff\xfe"
        "end");
    (*p.mutable_labels())["k\xc3"] = "v";
    json dom = nriqos::nri::event_to_json("RunPodSandbox", "", "", p, nullptr, nullptr);
    CHECK_THROWS(dom.dump());
    CHECK(printed("RunPodSandbox", "", "", p, nullptr, nullptr) == dom.dump(-1, ' ', false, json::error_handler_t::replace));
}

TEST_CASE("json: parse_answer keeps what json::parse gives for the members the relay reads", "[nri][json]") {
    // json::parse(text, nullptr, false) with the members the relay does not read removed.
    auto reference = [](const std::string& text) {
        json j = json::parse(text, nullptr, false);
        if (j.is_object()) {
            for (auto it = j.begin(); it != j.end();) {
                const std::string& k = it.key();
                if (k == "adjustment" || k == "update" || k == "error" || k == "on_child_failure" || k == "deadline") ++it;
                else it = j.erase(it);
            }
        }
        return j;
    };
    std::vector<std::string> texts = {
        // what the evaluator prints (src/event/sinks.cpp dump_eval_result), adjustment and update
        std::string(R"({"adjustment":)") + kFullAdjustment +
            R"(,"error":"","metadata":{"class":"BE","skipped":"a \"b\" \\ c"},"on_child_failure":"closed","update":null,)"
            R"("writes":[{"file":"cpu.shares","path":"/sys/fs/cgroup/cpu/x","value":"2"},{"nested":[[],[{}],{"a":[1,2.5,-3,true,null]}]}]})"
            "\n",
        R"({"adjustment":null,"error":"","metadata":{},"on_child_failure":"open","update":{"cpu":{"shares":{"value":2}}},"writes":[]})",
        R"({"deadline":true,"error":"","on_child_failure":"open","adjustment":null,"update":null})",
        R"({"error":"nri-qos: refused","metadata":{"x":{"y":{"z":[{"w":{}}]}}}})",
        // skipped members of every type, before, between and after the read ones
        R"({"a":1,"error":"","b":-1,"c":1.5,"d":"s","e":true,"f":null,"g":[],"h":{},"i":[{"k":[{}]}],"on_child_failure":"open","z":{}})",
        // repeated keys: the last one counts, also after a skipped member of the same name inside
        R"({"error":"first","metadata":{"error":"inner"},"error":"second","on_child_failure":"open","on_child_failure":"closed"})",
        R"({"writes":{"adjustment":{"linux":{}}},"adjustment":{"annotations":{"k":"v"}}})",
        // whitespace, unicode escapes, non-ASCII
        " \n\t{ \"error\" : \"caf\\u00e9 \xe6\x97\xa5\" , \"metadata\" : { \"k\" : [ 1 , { } ] } }\n\n",
        // not an object
        R"([{"error":"x"},{"metadata":1}])",
        R"("just a string")",
        "42",
        "null",
        "true",
        "[]",
        "{}",
    };
    for (const auto& t : texts) {
        INFO(t);
        json got = nriqos::nri::parse_answer(t), want = reference(t);
        REQUIRE_FALSE(want.is_discarded());
        CHECK(got == want);
        CHECK(got.dump() == want.dump());
    }
    // Not exactly one JSON value: discarded, like json::parse(text, nullptr, false); also when the
    // fault is inside a member that is skipped.
    for (std::string t :
         {std::string(""), std::string("   "), std::string("{"), std::string(R"({"error":""} x)"), std::string(R"({"error":""}{})"),
          std::string(R"({"metadata":{"k":"v",}},"error":""})"), std::string(R"({"metadata":"bad \xff utf-8","error":""})"),
          std::string(R"({"writes":[1 2]})"), std::string(R"({"error":"")"), std::string("{\"metadata\":\"ctl \x01\"}"), std::string("garbage")}) {
        INFO(t);
        CHECK(json::parse(t, nullptr, false).is_discarded());
        CHECK(nriqos::nri::parse_answer(t).is_discarded());
    }
    // Deep nesting inside a skipped member.
    std::string deep = R"({"metadata":)" + std::string(5000, '[') + std::string(5000, ']') + R"(,"error":"e"})";
    CHECK(nriqos::nri::parse_answer(deep) == json::parse(R"({"error":"e"})"));
}

// Issue 19 §2: the fuzz smoke of nri_json found an adjustment key with a newline printed raw
// into the message (tests/fuzz/corpus/nri_json/regress-adjustment-key-newline). Every message is one line, with
// the input's keys escaped as JSON strings.
TEST_CASE("json: keys from the input are escaped in errors (one line)", "[nri][json]") {
    std::string e = map_error("{\"ano\\ntions\":{\"a\":\"b\"}}");
    CHECK(e.find('\n') == std::string::npos);
    CHECK(e == "adjustment.\"ano\\ntions\": unknown field");
    e = map_error("{\"annotations\":{\"k\\r\\u0007\\u007f\":1}}");
    CHECK(e.find_first_of("\r\n\a") == std::string::npos);
    CHECK_THAT(e, Catch::Contains("annotations.\"k\\r\\u0007"));
    e = map_error("{\"linux\":{\"resources\":{\"unified\":{\"x\\ny\":2}}}}");
    CHECK(e.find('\n') == std::string::npos);
    CHECK_THAT(e, Catch::Contains("unified.\"x\\ny\": expected a string"));
    e = map_error("{\"linux\":{\"resources\":{\"cpu\":{\"cpus\":[\"a\\nb\"]}}}}");
    CHECK(e.find('\n') == std::string::npos);
    // Long keys are cut; invalid UTF-8 never throws out of the message.
    e = map_error("{\"" + std::string(300, 'k') + "\":1}");
    CHECK(e.size() < 120);
    CHECK_THAT(e, Catch::Contains("...: unknown field"));
    nlohmann::json bad = nlohmann::json::object();
    bad[std::string("\xff\n", 2)] = 1;
    pb::ContainerAdjustment a;
    std::string err;
    CHECK_FALSE(nriqos::nri::adjustment_from_json(bad, a, err));
    CHECK(err.find('\n') == std::string::npos);
    CHECK_THAT(err, Catch::Contains("unknown field"));
    // The shared escaper itself.
    CHECK(nriqos::json_quoted("a\nb") == "\"a\\nb\"");
    CHECK(nriqos::json_quoted(std::string(100, 'x'), 10) == "\"xxxxxxxxxx\"...");
}

// Issue #31 item 5: the process knobs' NRI fields on the wire. The bytes are walked by hand, so
// the check holds against containerd/nri's numbering (pkg/api/api.proto: ContainerAdjustment
// linux = 6; LinuxContainerAdjustment io_priority = 5 (v0.10.0), scheduler = 10 (v0.11.0),
// memory_policy = 12 (v0.12.0); LinuxIOPriority class = 1, priority = 2; LinuxScheduler
// policy = 1, nice = 2; LinuxMemoryPolicy mode = 1, nodes = 2; enum numbers SCHED_IDLE 6,
// IOPRIO_CLASS_IDLE 3, MPOL_BIND 2), not against this tree's own .proto.
namespace {
struct Field {
    uint32_t num = 0;
    uint64_t varint = 0;
    std::string bytes;
};
uint64_t varint(const std::string& b, size_t& i) {
    uint64_t v = 0;
    for (int shift = 0; i < b.size(); shift += 7) {
        uint8_t c = static_cast<uint8_t>(b[i++]);
        v |= uint64_t(c & 0x7f) << shift;
        if (!(c & 0x80)) break;
    }
    return v;
}
std::vector<Field> fields(const std::string& b) {
    std::vector<Field> out;
    size_t i = 0;
    while (i < b.size()) {
        uint64_t key = varint(b, i);
        Field f;
        f.num = static_cast<uint32_t>(key >> 3);
        if ((key & 7) == 0) {
            f.varint = varint(b, i);
        } else if ((key & 7) == 2) {
            uint64_t n = varint(b, i);
            f.bytes = b.substr(i, n);
            i += n;
        } else {
            FAIL("unexpected wire type " << (key & 7));
        }
        out.push_back(f);
    }
    return out;
}
const Field* get(const std::vector<Field>& fs, uint32_t n) {
    for (const auto& f : fs)
        if (f.num == n) return &f;
    return nullptr;
}
}  // namespace

TEST_CASE("json: process knobs encode with NRI's field numbers", "[nri][json][process]") {
    pb::ContainerAdjustment a;
    std::string err;
    REQUIRE(nriqos::nri::adjustment_from_json(json::parse(R"({"linux": {
      "scheduler": {"policy": "SCHED_IDLE", "nice": -5},
      "io_priority": {"class": "IOPRIO_CLASS_IDLE", "priority": 0},
      "memory_policy": {"mode": "MPOL_BIND", "nodes": "0-1"}}})"),
                                              a, err));
    INFO(err);
    std::string wire = a.SerializeAsString();
    auto top = fields(wire);
    REQUIRE(get(top, 6));
    auto lin = fields(get(top, 6)->bytes);
    REQUIRE(get(lin, 10));
    auto sch = fields(get(lin, 10)->bytes);
    CHECK(get(sch, 1)->varint == 6);  // SCHED_IDLE
    CHECK(static_cast<int32_t>(get(sch, 2)->varint) == -5);  // int32 nice, two's complement varint
    REQUIRE(get(lin, 5));
    auto io = fields(get(lin, 5)->bytes);
    CHECK(get(io, 1)->varint == 3);  // IOPRIO_CLASS_IDLE
    CHECK(get(io, 2) == nullptr);  // priority 0: proto3 default, not sent
    REQUIRE(get(lin, 12));
    auto mp = fields(get(lin, 12)->bytes);
    CHECK(get(mp, 1)->varint == 2);  // MPOL_BIND
    CHECK(get(mp, 2)->bytes == "0-1");
    // and back, by NRI's names
    json back = nriqos::nri::adjustment_to_json(a);
    CHECK(back["linux"]["scheduler"]["policy"] == "SCHED_IDLE");
    CHECK(back["linux"]["io_priority"]["class"] == "IOPRIO_CLASS_IDLE");
    CHECK(back["linux"]["memory_policy"] == json({{"mode", "MPOL_BIND"}, {"nodes", "0-1"}}));
    // numbers are accepted as well (Go's encoding/json writes enums as numbers)
    REQUIRE(nriqos::nri::adjustment_from_json(json::parse(R"({"linux": {"scheduler": {"policy": 4}}})"), a, err));
    CHECK(a.linux().scheduler().policy() == 4);
}

TEST_CASE("json: bad process-knob fields are one-line errors", "[nri][json][process]") {
    CHECK(map_error(R"({"linux": {"scheduler": {"policy": "SCHED_FIFO"}}})") ==
          "adjustment.linux.scheduler.policy: expected one of SCHED_OTHER, SCHED_BATCH, SCHED_IDLE, got string \"SCHED_FIFO\"");
    CHECK(map_error(R"({"linux": {"scheduler": {"nice": 3}}})") ==
          "adjustment.linux.scheduler.policy: missing (the runtime drops a scheduler without a policy)");
    CHECK(map_error(R"({"linux": {"scheduler": {"policy": "SCHED_BATCH", "nice": 20}}})") == "adjustment.linux.scheduler.nice: out of range -20..19");
    CHECK(map_error(R"({"linux": {"scheduler": {"policy": "SCHED_BATCH", "priority": 5}}})") ==
          "adjustment.linux.scheduler.priority: out of range 0..0");
    CHECK(map_error(R"({"linux": {"io_priority": {"class": "IOPRIO_CLASS_BE", "priority": 8}}})") ==
          "adjustment.linux.io_priority.priority: out of range 0..7");
    CHECK(map_error(R"({"linux": {"io_priority": {"class": 0}}})") ==
          "adjustment.linux.io_priority.class: expected one of IOPRIO_CLASS_RT, IOPRIO_CLASS_BE, IOPRIO_CLASS_IDLE, got number 0");
    CHECK(map_error(R"({"linux": {"memory_policy": {"mode": "MPOL_BIND", "nodes": "1-0"}}})") ==
          "adjustment.linux.memory_policy.nodes: expected a node list like \"0-1,3\", got string \"1-0\"");
    CHECK(map_error(R"({"linux": {"memory_policy": {"flags": []}}})") == "adjustment.linux.memory_policy.flags: unknown field");
}
