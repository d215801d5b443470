// Unit tests for `reconcile --discover`'s conversion of the CRI client's document (verbose
// PodSandboxStatus/ContainerStatus, containerd 1.6's "info" shape) into NRI v0.1 requests
// (discover.hpp discovery_from_cri_json), checked with the hook's own request parser.
#include <catch2/catch.hpp>

#include <fstream>
#include <sstream>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "discover.hpp"
#include "request.hpp"

using nlohmann::json;

namespace {
std::string fixture() {
    std::ifstream f(std::string(NRI_QOS_SRCDIR) + "/tests/fixtures/cri/containerd-1.6.20-discover.json");
    std::stringstream s;
    s << f.rdbuf();
    REQUIRE(!s.str().empty());
    return s.str();
}
const json kConf = {{"policy", "/etc/nri/nri-qos.toml"}};
}  // namespace

TEST_CASE("discover: containerd's verbose sandbox status becomes the sandbox's v0.1 create request", "[discover]") {
    nriqos::Discovery d = nriqos::discovery_from_cri_json(fixture(), kConf);
    CHECK(d.runtime == "containerd 1.6.20~ds1");
    REQUIRE(d.entries.size() == 4);
    const auto& sb = d.entries[0];
    REQUIRE(sb.sandbox);
    CHECK(sb.skip.empty());
    CHECK(sb.ns == "default");
    CHECK(sb.pod == "batch-pod");
    nriqos::Request r = nriqos::parse_v01_request(sb.request);
    CHECK(r.is_sandbox);
    CHECK(r.event == nriqos::Event::Create);
    CHECK(r.id == sb.id);
    CHECK(r.sandbox_id == sb.id);
    CHECK(r.pid == 4242);
    REQUIRE(r.cgroups_path);
    CHECK(*r.cgroups_path == "/kubepods/burstable/pod0e2e0000-7a1b-4c2d-9e3f-0a1b2c3d4e5f/" + sb.id);
    CHECK(r.resources.cpu_shares == 2);
    CHECK(r.labels.at("koordinator.sh/qosClass") == "BE");                     // the pod's CRI labels
    CHECK(r.annotations.at("node.koordinator.sh/extended-resource-spec") == "{\"containers\":{}}");  // runtime spec's
    CHECK(r.annotations.count("kubernetes.io/config.seen") == 0);  // not in the runtime spec: not passed (as at the event)
    CHECK(r.conf == kConf);
}

TEST_CASE("discover: containerd's verbose container status becomes the container's v0.1 create request", "[discover]") {
    nriqos::Discovery d = nriqos::discovery_from_cri_json(fixture(), kConf);
    const auto& c = d.entries[1];
    REQUIRE(!c.sandbox);
    CHECK(c.skip.empty());
    CHECK(c.container == "worker");
    CHECK(c.pod == "batch-pod");
    nriqos::Request r = nriqos::parse_v01_request(c.request);
    CHECK_FALSE(r.is_sandbox);
    CHECK(r.sandbox_id == d.entries[0].id);
    CHECK(r.pid == 4300);
    CHECK(r.container_name == "worker");
    CHECK(r.pod_namespace == "default");
    CHECK(r.resources.cpu_shares == 512);
    CHECK(r.resources.cpu_quota == 50000);
    CHECK(r.resources.cpu_period == 100000);
    CHECK(r.resources.mem_limit == 67108864);
    CHECK(r.labels.at("koordinator.sh/qosClass") == "BE");  // v0.1 requests carry the pod's labels
    REQUIRE(r.cgroups_path);
    CHECK(r.cgroups_path->find(c.id) != std::string::npos);
}

TEST_CASE("discover: entries that cannot be adopted say why; the client's errors are kept", "[discover]") {
    nriqos::Discovery d = nriqos::discovery_from_cri_json(fixture(), kConf);
    CHECK(d.entries[2].skip == "the runtime's verbose status has no runtimeSpec (cgroupsPath unknown)");
    CHECK(d.entries[2].request.empty());
    CHECK(d.entries[3].skip == "its pod sandbox ffffffffffff is not ready or not listed");
    REQUIRE(d.errors.size() == 1);
    CHECK(d.errors[0].rfind("container 0123456789ab: ContainerStatus:", 0) == 0);
}

TEST_CASE("discover: without a runtime spec's resources, a container's CRI resources are used", "[discover]") {
    json doc = json::parse(fixture());
    doc["containers"][0]["info"]["info"]["runtimeSpec"]["linux"].erase("resources");
    doc["containers"][0]["resources"]["cpu_shares"] = 1024;
    nriqos::Discovery d = nriqos::discovery_from_cri_json(doc.dump(), kConf);
    nriqos::Request r = nriqos::parse_v01_request(d.entries[1].request);
    CHECK(r.resources.cpu_shares == 1024);
    CHECK(r.resources.mem_limit == 67108864);
}

TEST_CASE("discover: a bad field is refused by the hook's parser and named", "[discover]") {
    json doc = json::parse(fixture());
    doc["containers"][0]["info"]["info"]["runtimeSpec"]["linux"]["resources"]["cpu"]["shares"] = "lots";
    nriqos::Discovery d = nriqos::discovery_from_cri_json(doc.dump(), kConf);
    CHECK(d.entries[1].skip.find("its request is not valid: /spec/resources/cpu/shares") == 0);
}

TEST_CASE("discover: a document that is not the client's is refused", "[discover]") {
    CHECK_THROWS_AS(nriqos::discovery_from_cri_json("not json", kConf), nriqos::InputError);
    CHECK_THROWS_AS(nriqos::discovery_from_cri_json("{\"sandboxes\": []}", kConf), nriqos::InputError);
}

TEST_CASE("discover: the plugin conf comes from conf.json's nri-qos entry", "[discover]") {
    char t[] = "/tmp/nri-qos-discover-test.XXXXXX";
    REQUIRE(mkdtemp(t) != nullptr);
    const std::string p = std::string(t) + "/conf.json";
    CHECK(nriqos::v01_plugin_conf(p) == json({{"policy", "/etc/nri/nri-qos.toml"}}));  // absent
    std::ofstream(p) << R"({"version":"0.1","plugins":[{"type":"other","conf":{}},{"type":"nri-qos","conf":{"policy":"/x.toml"}}]})";
    CHECK(nriqos::v01_plugin_conf(p) == json({{"policy", "/x.toml"}}));
    std::ofstream(p) << "{broken";
    CHECK(nriqos::v01_plugin_conf(p) == json({{"policy", "/etc/nri/nri-qos.toml"}}));
    std::remove(p.c_str());
    rmdir(t);
}
