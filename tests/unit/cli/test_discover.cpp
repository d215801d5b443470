// Unit tests for `reconcile --discover`'s conversion of the CRI client's document (verbose
// PodSandboxStatus/ContainerStatus, containerd 1.6's "info" shape) into NRI v0.1 requests
// (discover.hpp discovery_from_cri_json), checked with the hook's own request parser.
#include "../scratch.hpp"
#include <catch2/catch.hpp>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <sys/stat.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "cli/discover.hpp"
#include "model/request.hpp"
#include "cli/status.hpp"
#include "event/systemd_unit.hpp"

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
    CHECK(r.labels.at("koordinator.sh/qosClass") == "BE");  // the pod's CRI labels
    CHECK(r.annotations.at("node.koordinator.sh/extended-resource-spec") == "{\"containers\":{}}");  // runtime spec's
    CHECK(r.annotations.at("kubernetes.io/config.seen") == "2026-11-27T09:00:00Z");  // the pod's CRI annotation, not in the spec
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

TEST_CASE("discover: the pod's CRI annotations reach the requests when containerd's pod_annotations drops them", "[discover]") {
    // containerd 1.6 without pod_annotations (Debian's default): the runtime specs carry only the
    // io.kubernetes.cri.* annotations; CRI's PodSandbox.annotations still has the pod's own.
    json doc = json::parse(fixture());
    doc["sandboxes"][0]["info"]["info"]["runtimeSpec"]["annotations"].erase("node.koordinator.sh/extended-resource-spec");
    doc["containers"][0]["info"]["info"]["runtimeSpec"]["annotations"].erase("node.koordinator.sh/extended-resource-spec");
    doc["sandboxes"][0]["annotations"]["node.koordinator.sh/extended-resource-spec"] = "{\"containers\":{\"worker\":{}}}";
    doc["sandboxes"][0]["annotations"]["io.kubernetes.cri.sandbox-name"] = "not-the-spec";  // the spec's value wins
    nriqos::Discovery d = nriqos::discovery_from_cri_json(doc.dump(), kConf);
    for (size_t i : {size_t(0), size_t(1)}) {
        INFO("entry " << i);
        REQUIRE(d.entries[i].skip.empty());
        nriqos::Request r = nriqos::parse_v01_request(d.entries[i].request);
        CHECK(r.annotations.at("node.koordinator.sh/extended-resource-spec") == "{\"containers\":{\"worker\":{}}}");
        CHECK(r.annotations.at("io.kubernetes.cri.sandbox-name") == "batch-pod");
        CHECK(r.annotations.at("kubernetes.io/config.seen") == "2026-11-27T09:00:00Z");
    }
    // A container's own CRI annotations (io.kubernetes.container.*) are not pod annotations.
    CHECK(nriqos::parse_v01_request(d.entries[1].request).annotations.count("io.kubernetes.container.hash") == 0);
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
    unit::ScratchDir t("discover-test");
    const std::string p = t / "conf.json";
    CHECK(nriqos::v01_plugin_conf(p) == json({{"policy", "/etc/nri/nri-qos.toml"}}));  // absent
    std::ofstream(p) << R"({"version":"0.1","plugins":[{"type":"other","conf":{}},{"type":"nri-qos","conf":{"policy":"/x.toml"}}]})";
    CHECK(nriqos::v01_plugin_conf(p) == json({{"policy", "/x.toml"}}));
    std::ofstream(p) << "{broken";
    CHECK(nriqos::v01_plugin_conf(p) == json({{"policy", "/etc/nri/nri-qos.toml"}}));
}

namespace {
std::string read_all(const std::string& p) {
    std::ifstream f(p);
    std::stringstream s;
    s << f.rdbuf();
    return s.str();
}
void put(const std::string& p, const std::string& text) { std::ofstream(p) << text; }
/// Records the properties it is asked to set and, at that moment, the container's cpu.weight file
/// (the properties must come before the files).
struct RecordingSetter : nriqos::UnitSetter {
    std::vector<std::string> asked;
    std::string weight_file, weight_then;
    std::vector<std::string> set(const std::vector<nriqos::UnitProp>& props) override {
        weight_then = read_all(weight_file);
        for (const auto& p : props) asked.push_back(p.line());
        return std::vector<std::string>(props.size());
    }
};
}  // namespace

TEST_CASE("discover on the systemd driver: what an adoption writes is set as unit properties first (the postinst's daemon-reload follows)",
          "[discover][systemd]") {
    unit::ScratchDir scratch("discover-sd");
    const std::string dir = scratch.path;
    json doc = json::parse(fixture());
    const std::string sb = doc["sandboxes"][0]["id"], ct = doc["containers"][0]["id"];
    // containerd with SystemdCgroup = true: cgroupsPath "slice:prefix:id", the scope in the pod's slice
    const std::string slice = "kubepods-besteffort-pod0e2e0000_7a1b_4c2d_9e3f_0a1b2c3d4e5f.slice";
    doc["sandboxes"][0]["info"]["info"]["runtimeSpec"]["linux"]["cgroupsPath"] = slice + ":cri-containerd:" + sb;
    doc["containers"][0]["info"]["info"]["runtimeSpec"]["linux"]["cgroupsPath"] = slice + ":cri-containerd:" + ct;
    doc["containers"] = json::array({doc["containers"][0]});
    doc["errors"] = json::array();
    put(dir + "/doc.json", doc.dump());
    put(dir + "/cri", "#!/bin/sh\ncat " + dir + "/doc.json\n");
    REQUIRE(chmod((dir + "/cri").c_str(), 0755) == 0);
    const std::string pod = dir + "/cg/kubepods.slice/kubepods-besteffort.slice/" + slice;
    const std::string scope = pod + "/cri-containerd-" + ct + ".scope";
    REQUIRE(std::system(("mkdir -p '" + scope + "' '" + pod + "/cri-containerd-" + sb + ".scope'").c_str()) == 0);
    put(scope + "/cpu.weight", "20\n");  // what runc made of CRI's 512
    put(scope + "/cpu.max", "50000 100000\n");
    put(dir + "/policy.toml", R"(version = 1
[settings]
default_class = "none"
[classes.none]
description = "nothing"
[classes.BE]
description = "test"
[classes.BE.container]
cpu_shares = 2
cpu_quota_us = 20000
[[rules]]
name = "be"
class = "BE"
match.labels = { "koordinator.sh/qosClass" = "BE" }
)");
    RecordingSetter rs;
    rs.weight_file = scope + "/cpu.weight";
    nriqos::StateCommandOptions o;
    o.state_dir = dir + "/state";
    o.last_good_dir = "";
    o.roots.policy = dir + "/policy.toml";
    o.roots.cgroup_root = dir + "/cg";
    o.roots.proc_root = dir + "/proc";
    o.roots.resctrl_root = dir + "/resctrl";
    o.roots.layout = nriqos::Layout::V2;
    o.roots.cache_dir = "";
    o.roots.kubelet_cpu_state = "";
    o.metrics_file = "";
    o.event_log = dir + "/events.log";
    o.systemd_setter = &rs;
    nriqos::DiscoverOptions d;
    d.cri_client = dir + "/cri";
    d.cri_socket = "/run/test/cri.sock";
    d.nri_conf = dir + "/absent-conf.json";
    std::string out;
    CHECK(nriqos::run_discover(o, d, out) == 0);
    INFO(out);
    CHECK(out.find("adopted  default/batch-pod/worker (" + ct.substr(0, 12) + ") class BE: cpu.weight 20->1") != std::string::npos);
    const std::string unit = "cri-containerd-" + ct + ".scope";
    std::string asked;
    for (const auto& a : rs.asked) asked += a + "\n";
    CHECK(asked.find(unit + "\tCPUWeight\tt\t1\n") != std::string::npos);
    CHECK(asked.find(unit + "\tCPUQuotaPerSecUSec\tt\t200000\n") != std::string::npos);
    CHECK(asked.find(unit + "\tCPUQuotaPeriodUSec\tt\t100000\n") != std::string::npos);
    CHECK(rs.weight_then == "20\n");  // properties before the files (runc's order)
    CHECK(read_all(scope + "/cpu.weight").rfind("1", 0) == 0);
    const std::string log = read_all(dir + "/events.log");
    CHECK((log.find("\"systemd\":\"applied: cpu.weight cpu.max\"") != std::string::npos ||
           log.find("\"systemd\":\"applied: cpu.max cpu.weight\"") != std::string::npos));
    // A pass with nothing to write back runs no companion.
    rs.asked.clear();
    out.clear();
    CHECK(nriqos::run_reconcile(o, out) == 0);
    CHECK(rs.asked.empty());
    CHECK(out.find("0 restored") != std::string::npos);
}

// ---- the unseen pass's decision (discover.hpp plan_unseen, issue #33 §4) ----------------------

namespace {

/// A brief listing as nri-qos-cri --verbose-ids prints it: sandboxes {id, created_at}, containers
/// {id, pod_sandbox_id, created_at}, no "info".
nriqos::Discovery listing(const std::vector<std::pair<std::string, int64_t>>& sbs,
                          const std::vector<std::tuple<std::string, std::string, int64_t>>& ctrs) {
    json doc = {{"v", 1},
                {"runtime", {{"name", "containerd"}, {"version", "2.3.4"}}},
                {"sandboxes", json::array()},
                {"containers", json::array()},
                {"errors", json::array()}};
    for (const auto& [id, t] : sbs)
        doc["sandboxes"].push_back({{"id", id}, {"created_at", t}, {"brief", true}, {"metadata", {{"name", "p-" + id}, {"namespace", "default"}}}});
    for (const auto& [id, sb, t] : ctrs)
        doc["containers"].push_back({{"id", id}, {"pod_sandbox_id", sb}, {"created_at", t}, {"brief", true}, {"metadata", {{"name", "c-" + id}}}});
    return nriqos::discovery_from_cri_json(doc.dump(), json::object());
}

constexpr int64_t kSec = 1000000000;

}  // namespace

TEST_CASE("unseen pass: only what the state dir never saw and is old enough is adopted", "[discover][unseen]") {
    const int64_t now = 1000 * kSec;
    auto d = listing({{"sbA", now - 60 * kSec}, {"sbB", now - 60 * kSec}},
                     {{"cA1", "sbA", now - 50 * kSec},  // seen by its event
                      {"cA2", "sbA", now - 50 * kSec},  // created during a Synchronize: never seen
                      {"cA3", "sbA", now - 2 * kSec},  // being created now: its event may be in flight
                      {"cB1", "sbB", now - 30 * kSec},  // of an unseen pod
                      {"cX", "sbGone", now - 60 * kSec}});  // pod not listed (not ready)
    auto p = nriqos::plan_unseen(d, {"sbA", "cA1"}, {}, now, 10000, 256);
    CHECK(p.adopt == std::vector<std::string>{"sbB", "cA2", "cB1"});
    CHECK(p.known == 2);
    CHECK(p.too_new == 1);
    CHECK(p.no_pod == 1);
    CHECK(p.deferred == 0);
}

TEST_CASE("unseen pass: nothing new decides nothing (no status call follows)", "[discover][unseen]") {
    const int64_t now = 1000 * kSec;
    auto d = listing({{"sbA", now - 60 * kSec}}, {{"cA1", "sbA", now - 50 * kSec}});
    auto p = nriqos::plan_unseen(d, {"sbA", "cA1"}, {}, now, 10000, 256);
    CHECK(p.adopt.empty());
    CHECK(p.known == 2);
    CHECK(p.too_new + p.deferred + p.no_pod + p.given_up == 0);
}

TEST_CASE("unseen pass: a young unseen pod holds its containers back; an unknown age counts as old", "[discover][unseen]") {
    const int64_t now = 1000 * kSec;
    auto d = listing({{"sbY", now - 1 * kSec}, {"sbZ", 0}}, {{"cY1", "sbY", now - 1 * kSec}, {"cZ1", "sbZ", 0}});
    auto p = nriqos::plan_unseen(d, {}, {}, now, 10000, 256);
    CHECK(p.adopt == std::vector<std::string>{"sbZ", "cZ1"});
    CHECK(p.too_new == 2);
    // min age 0: everything unseen is adopted at once
    CHECK(nriqos::plan_unseen(d, {}, {}, now, 0, 256).adopt.size() == 4);
}

TEST_CASE("unseen pass: ids given up before are not asked again; a bounded number per pass", "[discover][unseen]") {
    const int64_t now = 1000 * kSec;
    auto d = listing({{"sbA", now - 60 * kSec}}, {{"c1", "sbA", now - 60 * kSec}, {"c2", "sbA", now - 60 * kSec}, {"c3", "sbA", now - 60 * kSec}});
    auto p = nriqos::plan_unseen(d, {"sbA"}, {"c1", "gone"}, now, 10000, 1);
    CHECK(p.adopt == std::vector<std::string>{"c2"});
    CHECK(p.given_up == 1);
    CHECK(p.still_given_up == std::vector<std::string>{"c1"});  // "gone" is no longer listed: forgotten
    CHECK(p.deferred == 1);
}
