// Unit tests of the protobuf <-> NRI Go JSON mapping (src/nri/nri_json.*).
#include <catch2/catch.hpp>

#include <string>

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
  bool ok = nri::adjustment_from_json(json::parse(text), a, err);
  return ok ? std::string("OK") : err;
}

}  // namespace

TEST_CASE("json: every adjustment field maps to protobuf", "[nri][json]") {
  pb::ContainerAdjustment a;
  std::string err;
  REQUIRE(nri::adjustment_from_json(json::parse(kFullAdjustment), a, err));
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
  CHECK(nri::adjustment_to_json(a) == json::parse(kFullAdjustment));
}

TEST_CASE("json: absent vs present-zero wrappers", "[nri][json]") {
  pb::ContainerAdjustment a;
  std::string err;
  REQUIRE(nri::adjustment_from_json(
      json::parse(R"({"linux":{"resources":{"cpu":{"shares":{},"quota":null},"memory":{}}}})"), a, err));
  const auto& c = a.linux().resources().cpu();
  CHECK(c.has_shares());           // {} = Go omitempty of value 0: present, set to 0
  CHECK(c.shares().value() == 0);
  CHECK_FALSE(c.has_quota());      // null = absent = do not touch
  CHECK_FALSE(c.has_period());
  CHECK(a.linux().resources().has_memory());
  CHECK_FALSE(a.linux().has_oom_score_adj());
  CHECK(a.annotations().empty());
  // null / empty adjustments are valid and empty
  REQUIRE(nri::adjustment_from_json(json(), a, err));
  CHECK(a.ByteSizeLong() == 0);
  REQUIRE(nri::adjustment_from_json(json::object(), a, err));
  CHECK(a.ByteSizeLong() == 0);
}

TEST_CASE("json: 64-bit integers are accepted as numbers or decimal strings", "[nri][json]") {
  pb::LinuxResources r;
  std::string err;
  REQUIRE(nri::resources_from_json(json::parse(R"({
      "cpu": {"quota": {"value": "-1"}, "shares": {"value": "18446744073709551615"}},
      "memory": {"limit": {"value": "9223372036854775807"}},
      "hugepage_limits": [{"page_size": "2MB", "limit": "4096"}],
      "pids": {"limit": "-1"}})"), r, err));
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
  CHECK_THAT(map_error(R"({"linux":{"resources":{"cpu":{"shares":5}}}})"),
             Catch::Contains("cpu.shares: expected an object"));
  CHECK_THAT(map_error(R"({"linux":{"resources":{"cpu":{"quota":{"value":1.5}}}}})"),
             Catch::Contains("cpu.quota.value: expected an integer"));
  CHECK_THAT(map_error(R"({"linux":{"resources":{"cpu":{"quota":{"value":"12x"}}}}})"),
             Catch::Contains("cpu.quota.value"));
  CHECK_THAT(map_error(R"({"linux":{"resources":{"cpu":{"shares":{"value":2,"extra":1}}}}})"),
             Catch::Contains("cpu.shares.extra: unknown field"));
  CHECK_THAT(map_error(R"({"linux":{"resources":{"memory":{"limit":{"value":18446744073709551615}}}}})"),
             Catch::Contains("memory.limit.value: integer out of int64 range"));
  CHECK_THAT(map_error(R"({"linux":{"resources":{"memory":{"disable_oom_killer":{"value":"true"}}}}})"),
             Catch::Contains("memory.disable_oom_killer.value: expected a boolean"));
  CHECK_THAT(map_error(R"({"linux":{"resources":{"cpu":{"cpus":3}}}})"),
             Catch::Contains("cpu.cpus: expected a string"));
  CHECK_THAT(map_error(R"({"linux":{"resources":{"hugepage_limits":{"page_size":"2MB"}}}})"),
             Catch::Contains("hugepage_limits: expected an array"));
  CHECK_THAT(map_error(R"({"linux":{"resources":{"hugepage_limits":[{"limit":-1}]}}})"),
             Catch::Contains("hugepage_limits[0].limit"));
  CHECK_THAT(map_error(R"({"linux":{"resources":{"unified":{"memory.high":60397977}}}})"),
             Catch::Contains("unified.memory.high: expected a string"));
  CHECK_THAT(map_error(R"({"linux":{"resources":{"rdt_class":"BE"}}})"),
             Catch::Contains("rdt_class: expected an object"));
  CHECK_THAT(map_error(R"({"linux":{"resources":{"pids":{"limit":true}}}})"),
             Catch::Contains("pids.limit: expected an integer"));
  CHECK_THAT(map_error(R"({"linux":{"resources":{"devices":[{"allow":"yes"}]}}})"),
             Catch::Contains("devices[0].allow: expected a boolean"));
  CHECK_THAT(map_error(R"({"linux":{"oom_score_adj":{"value":1001}}})"),
             Catch::Contains("oom_score_adj.value: out of range"));
  CHECK_THAT(map_error(R"({"annotations":{"k":1}})"), Catch::Contains("annotations.k: expected a string"));
  CHECK_THAT(map_error(R"({"annotations":["k"]})"), Catch::Contains("annotations: expected an object"));
  CHECK_THAT(map_error(R"({"mounts":[]})"), Catch::Contains("adjustment.mounts: unknown field"));
  CHECK_THAT(map_error(R"({"linux":{"cgroups_path":"/x"}})"), Catch::Contains("linux.cgroups_path: unknown field"));
  CHECK_THAT(map_error(R"([1,2])"), Catch::Contains("adjustment: expected an object"));
  CHECK(map_error(R"({"linux":{"oom_score_adj":{"value":-1000}}})") == "OK");

  pb::LinuxResources r;
  std::string err;
  CHECK_FALSE(nri::resources_from_json(json::parse(R"({"cpu":{"period":{"value":-5}}})"), r, err));
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

  json j = nri::pod_to_json(p);
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
  CHECK(nri::pod_to_json(pb::PodSandbox()) == json::object());
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
  json j = nri::container_to_json(c);
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
  REQUIRE(nri::resources_from_json(full, res, err));
  CHECK(nri::resources_to_json(res) == full);
}
