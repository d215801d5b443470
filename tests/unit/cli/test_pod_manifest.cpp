// Unit tests of `explain --pod` (issue #21 §5): the manifest reader (yaml-cpp), each kubelet rule
// of the manifest → requests conversion (cited in src/cli/pod_manifest.hpp), the kubelet values of
// every conformance case (tests/conformance/cases/*/*/kubelet.json, computed by gen.py from the
// same kubelet sources, independently), the NRI events, and the preview's end state.
#include "../scratch.hpp"
#include <catch2/catch.hpp>

#include <cstdlib>
#include <dirent.h>
#include <fstream>
#include <sys/stat.h>
#include <unistd.h>

#include "facts/fact_readers.hpp"
#include "cli/pod_manifest.hpp"
#include "cli/pod_preview.hpp"
#include "model/request.hpp"

using namespace nriqos;
using nlohmann::json;

namespace {

struct Tmp : unit::ScratchDir {
    Tmp() : ScratchDir("podpreview-test") {}
};

std::string error_of(const std::string& manifest) {
    try {
        parse_pod_manifest(manifest);
    } catch (const InputError& e) { return e.what(); }
    return "";
}

PodManifest pod(const std::string& containers, const std::string& extra = "") {
    return parse_pod_manifest("apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\n  uid: 0e2e0000-0000-4000-8000-000000000001\n" + extra +
                              "spec:\n  containers:\n" + containers);
}

std::string ctr(const std::string& name, const std::string& req, const std::string& lim) {
    std::string s = "  - name: " + name + "\n    image: busybox\n    resources:\n";
    if (!req.empty()) s += "      requests: {" + req + "}\n";
    if (!lim.empty()) s += "      limits: {" + lim + "}\n";
    return s;
}

}  // namespace

TEST_CASE("parse_quantity_milli is Quantity.MilliValue (rounded up)", "[podpreview]") {
    std::string why;
    CHECK(parse_quantity_milli("500m", &why) == 500);
    CHECK(parse_quantity_milli("0.5", &why) == 500);
    CHECK(parse_quantity_milli("2", &why) == 2000);
    CHECK(parse_quantity_milli("1.0005", &why) == 1001);  // ceil
    CHECK(parse_quantity_milli("1e-3", &why) == 1);
    CHECK(parse_quantity_milli("1k", &why) == 1000000);
    CHECK_FALSE(parse_quantity_milli("1x", &why));
    CHECK(parse_quantity("500m", &why) == 1);  // Value() unchanged
}

TEST_CASE("manifest: API defaulting gives a limited resource its limit as the request (SetDefaults_Pod)", "[podpreview]") {
    PodManifest m = pod(ctr("a", "", "cpu: 250m, memory: 64Mi"));
    REQUIRE(m.containers.size() == 1);
    CHECK(m.containers[0].cpu_request == 250);
    CHECK(m.containers[0].mem_request == 64 << 20);
    CHECK(m.uid == "0e2e0000-0000-4000-8000-000000000001");
    CHECK_FALSE(m.uid_made_up);
    // a request of its own stays
    PodManifest n = pod(ctr("a", "cpu: 100m", "cpu: 250m"));
    CHECK(n.containers[0].cpu_request == 100);
}

TEST_CASE("manifest: GetPodQOS (pkg/apis/core/v1/helper/qos/qos.go)", "[podpreview]") {
    CHECK(pod_qos(pod(ctr("a", "", ""))) == KubeQos::BestEffort);
    CHECK(pod_qos(pod(ctr("a", "cpu: \"0\"", ""))) == KubeQos::BestEffort);  // zero quantities do not count
    CHECK(pod_qos(pod(ctr("a", "", "cpu: 1, memory: 1Gi"))) == KubeQos::Guaranteed);  // requests defaulted to limits
    CHECK(pod_qos(pod(ctr("a", "cpu: 1, memory: 1Gi", "cpu: 1, memory: 1Gi") + ctr("b", "", "cpu: 2, memory: 1Gi"))) == KubeQos::Guaranteed);
    CHECK(pod_qos(pod(ctr("a", "cpu: 500m", "cpu: 1, memory: 1Gi"))) == KubeQos::Burstable);  // request below the limit
    CHECK(pod_qos(pod(ctr("a", "", "cpu: 1"))) == KubeQos::Burstable);  // no memory limit
    CHECK(pod_qos(pod(ctr("a", "", "cpu: 1, memory: 1Gi") + ctr("b", "", ""))) == KubeQos::Burstable);  // one container without limits
    // init containers count too
    PodManifest m = pod(ctr("a", "", "cpu: 1, memory: 1Gi"), "");
    PodManifest i = parse_pod_manifest(
        "kind: Pod\nmetadata: {name: p}\nspec:\n  initContainers:\n  - name: init\n    resources: {requests: {cpu: 100m}}\n"
        "  containers:\n  - name: a\n    resources: {limits: {cpu: 1, memory: 1Gi}}\n");
    CHECK(pod_qos(m) == KubeQos::Guaranteed);
    CHECK(pod_qos(i) == KubeQos::Burstable);
    REQUIRE(i.containers.size() == 2);
    CHECK(i.containers[0].init);
    CHECK(i.containers[0].name == "init");
}

TEST_CASE("manifest: ResourceConfigForPod (pkg/kubelet/cm/helpers_linux.go)", "[podpreview]") {
    SECTION("Guaranteed: shares, quota and memory are the sums") {
        PodManifest m = pod(ctr("a", "", "cpu: 1, memory: 100Mi") + ctr("b", "", "cpu: 500m, memory: 100Mi"));
        PodCgroupConfig c = resource_config_for_pod(m, pod_qos(m));
        CHECK(c.cpu_shares == 1536);  // MilliCPUToShares(1500) = 1500 × 1024 / 1000
        CHECK(c.cpu_quota == 150000);  // MilliCPUToQuota(1500, 100000)
        CHECK(c.cpu_period == 100000);
        CHECK(c.memory_limit == 200 << 20);
    }
    SECTION("Burstable: quota only when every container limits CPU, memory only when every one limits memory") {
        PodManifest m = pod(ctr("a", "cpu: 100m", "cpu: 1, memory: 100Mi") + ctr("b", "cpu: 100m", "memory: 50Mi"));
        PodCgroupConfig c = resource_config_for_pod(m, pod_qos(m));
        CHECK(c.cpu_shares == 204);  // MilliCPUToShares(200)
        CHECK_FALSE(c.cpu_quota);
        CHECK_FALSE(c.cpu_period);
        CHECK(c.memory_limit == 150 << 20);
    }
    SECTION("BestEffort: MinShares only") {
        PodManifest m = pod(ctr("a", "", ""));
        PodCgroupConfig c = resource_config_for_pod(m, pod_qos(m));
        CHECK(c.cpu_shares == 2);
        CHECK_FALSE(c.cpu_quota);
        CHECK_FALSE(c.memory_limit);
    }
    SECTION("init containers: the max of the app containers' sum and each init container") {
        PodManifest m = parse_pod_manifest(
            "kind: Pod\nmetadata: {name: p}\nspec:\n  initContainers:\n  - name: i\n    resources: {requests: {cpu: 3}}\n"
            "  containers:\n  - name: a\n    resources: {requests: {cpu: 1}}\n  - name: b\n    resources: {requests: {cpu: 1}}\n");
        CHECK(resource_config_for_pod(m, pod_qos(m)).cpu_shares == 3072);
    }
    SECTION("a sidecar (restartPolicy Always) adds to the app containers and to later init containers") {
        PodManifest m = parse_pod_manifest(
            "kind: Pod\nmetadata: {name: p}\nspec:\n  initContainers:\n  - name: s\n    restartPolicy: Always\n    resources: {requests: {cpu: 1}}\n"
            "  - name: i\n    resources: {requests: {cpu: 2}}\n"
            "  containers:\n  - name: a\n    resources: {requests: {cpu: 500m}}\n");
        CHECK(m.containers[0].sidecar);
        CHECK(resource_config_for_pod(m, pod_qos(m)).cpu_shares == 3072);  // max(1 + 0.5, 1 + 2) = 3 CPUs
    }
    SECTION("overhead is added to the requests, and to a limit that is set") {
        PodManifest m = pod(ctr("a", "", "cpu: 1, memory: 100Mi"), "");
        m.overhead_cpu = 250;
        m.overhead_mem = 10 << 20;
        PodCgroupConfig c = resource_config_for_pod(m, KubeQos::Guaranteed);
        CHECK(c.cpu_shares == 1280);
        CHECK(c.cpu_quota == 125000);
        CHECK(c.memory_limit == 110 << 20);
    }
}

TEST_CASE("manifest: calculateLinuxResources (kuberuntime_container_linux.go) and containerd's WithResources", "[podpreview]") {
    ManifestContainer c;
    c.cpu_limit = 250;  // no request (not defaulted here): shares from the limit
    Resources r = container_oci_resources(c);
    CHECK(r.cpu_shares == 256);
    CHECK(r.cpu_quota == 25000);
    CHECK(r.cpu_period == 100000);
    CHECK_FALSE(r.mem_limit);
    ManifestContainer tiny;
    tiny.cpu_request = 1;
    tiny.cpu_limit = 5;
    tiny.mem_limit = 1 << 20;
    Resources t = container_oci_resources(tiny);
    CHECK(t.cpu_shares == 2);  // MinShares
    CHECK(t.cpu_quota == 1000);  // MinQuotaPeriod
    CHECK(t.mem_limit == 1 << 20);
    CHECK(t.mem_swap == 1 << 20);  // swap = limit
    ManifestContainer none;
    Resources n = container_oci_resources(none);
    CHECK(n.cpu_shares == 2);
    CHECK_FALSE(n.cpu_quota);  // MilliCPUToQuota(0) = 0: containerd leaves it out
    CHECK(n.cpu_period == 100000);
}

TEST_CASE("manifest: cgroup parents per driver (pod_container_manager_linux.go, ToSystemd) and containerd's getCgroupsPath", "[podpreview]") {
    PodManifest g = pod(ctr("a", "", "cpu: 1, memory: 1Gi"));
    PodManifest b = pod(ctr("a", "cpu: 1", ""));
    PodManifest e = pod(ctr("a", "", ""));
    const std::string u = "0e2e0000-0000-4000-8000-000000000001", u_ = "0e2e0000_0000_4000_8000_000000000001";
    CHECK(kubelet_pod(g, CgroupDriver::Cgroupfs).cgroup_parent == "/kubepods/pod" + u);
    CHECK(kubelet_pod(b, CgroupDriver::Cgroupfs).cgroup_parent == "/kubepods/burstable/pod" + u);
    CHECK(kubelet_pod(e, CgroupDriver::Cgroupfs).cgroup_parent == "/kubepods/besteffort/pod" + u);
    CHECK(kubelet_pod(g, CgroupDriver::Systemd).cgroup_parent == "kubepods-pod" + u_ + ".slice");
    KubeletPod s = kubelet_pod(b, CgroupDriver::Systemd);
    CHECK(s.cgroup_parent == "kubepods-burstable-pod" + u_ + ".slice");
    CHECK(s.pod_dir == "kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + u_ + ".slice");
    CHECK(s.containers[0].cgroups_path == s.cgroup_parent + ":cri-containerd:" + s.containers[0].id);
    // the hook's own resolution of those paths finds the same pod cgroup and QoS class
    for (CgroupDriver d : {CgroupDriver::Cgroupfs, CgroupDriver::Systemd})
        for (const PodManifest* m : {&g, &b, &e}) {
            KubeletPod k = kubelet_pod(*m, d);
            CgroupPaths p = resolve_cgroups_path(k.containers[0].cgroups_path);
            CHECK(p.pod == k.pod_dir);
            CHECK(p.no_pod.empty());
            CHECK(kube_qos_from_path(p.pod) == k.qos);
            CHECK(resolve_cgroups_path(k.sandbox.cgroups_path).pod == k.pod_dir);
        }
}

TEST_CASE("manifest: the kubelet values of every conformance case (gen.py, computed independently)", "[podpreview]") {
    const std::string root = std::string(NRI_QOS_SRCDIR) + "/tests/conformance/cases";
    int n = 0;
    DIR* sys = opendir(root.c_str());
    REQUIRE(sys);
    while (dirent* s = readdir(sys)) {
        if (s->d_name[0] == '.') continue;
        DIR* cases = opendir((root + "/" + s->d_name).c_str());
        if (!cases) continue;
        while (dirent* c = readdir(cases)) {
            if (c->d_name[0] == '.') continue;
            const std::string dir = root + "/" + s->d_name + "/" + c->d_name;
            std::ifstream cf(dir + "/case.json"), kf(dir + "/kubelet.json");
            if (!cf || !kf) continue;
            json cj = json::parse(cf), kj = json::parse(kf);
            if (cj.contains("kubelet_static_cpus")) continue;  // kubelet's static CPU manager: not previewed
            INFO(dir);
            json p = cj["pod"];
            json manifest = {{"apiVersion", "v1"},
                             {"kind", "Pod"},
                             {"metadata",
                              {{"name", p["name"]},
                               {"namespace", p.value("namespace", "default")},
                               {"uid", kj["uid"]},
                               {"labels", p.value("labels", json::object())},
                               {"annotations", p.value("annotations", json::object())}}},
                             {"spec", {{"containers", p["containers"]}}}};
            PodManifest m = parse_pod_manifest(manifest.dump());
            KubeletPod k = kubelet_pod(m, cj.value("driver", "cgroupfs") == "systemd" ? CgroupDriver::Systemd : CgroupDriver::Cgroupfs);
            CHECK(kube_qos_name(k.qos) == kj["kube_qos"].get<std::string>());
            CHECK(k.cgroup_parent == kj["paths"]["cgroup_parent"].get<std::string>());
            const json& pc = kj["pod"];
            CHECK(k.pod.cpu_shares == pc["cpu_shares"].get<int64_t>());
            CHECK(k.pod.cpu_quota.value_or(0) == pc.value("cpu_quota", int64_t(0)));
            CHECK(k.pod.cpu_period.value_or(0) == pc.value("cpu_period", int64_t(0)));
            CHECK(k.pod.memory_limit.value_or(0) == pc.value("memory_limit", int64_t(0)));
            for (const auto& pcn : k.containers) {
                const json& oci = kj["containers"][pcn.name]["oci"];
                CHECK(pcn.oci.cpu_shares.value_or(0) == oci["cpu"].value("shares", int64_t(0)));
                CHECK(pcn.oci.cpu_quota.value_or(0) == oci["cpu"].value("quota", int64_t(0)));
                CHECK(pcn.oci.cpu_period.value_or(0) == oci["cpu"].value("period", int64_t(0)));
                const json mem = oci.value("memory", json::object());
                CHECK(pcn.oci.mem_limit.value_or(0) == mem.value("limit", int64_t(0)));
                CHECK(pcn.oci.mem_swap.value_or(0) == mem.value("swap", int64_t(0)));
            }
            ++n;
        }
        closedir(cases);
    }
    closedir(sys);
    CHECK(n >= 20);
}

TEST_CASE("manifest: JSON, kubectl's List of one pod, made-up uid", "[podpreview]") {
    PodManifest j = parse_pod_manifest(R"({"apiVersion":"v1","kind":"Pod","metadata":{"name":"x","namespace":"ns1","labels":{"a":"b"}},
        "spec":{"containers":[{"name":"c","resources":{"limits":{"cpu":"1"}}}]}})");
    CHECK(j.ns == "ns1");
    CHECK(j.labels.at("a") == "b");
    CHECK(j.uid_made_up);
    CHECK(j.uid == made_up_uid("ns1", "x"));
    CHECK(j.uid == parse_pod_manifest(R"({"kind":"Pod","metadata":{"name":"x","namespace":"ns1"},"spec":{"containers":[{"name":"c"}]}})").uid);
    CHECK(j.uid.size() == 36);
    CHECK(j.uid[14] == '4');
    PodManifest l = parse_pod_manifest(
        "apiVersion: v1\nkind: List\nitems:\n- kind: Pod\n  metadata: {name: y}\n  spec: {containers: [{name: c}]}\n"
        "  status: {qosClass: BestEffort}\n");
    CHECK(l.name == "y");
    CHECK(l.status_qos == "BestEffort");
}

TEST_CASE("manifest: hostile and bad manifests are refused with one line", "[podpreview][hostile]") {
    CHECK(error_of("kind: Deployment\n").find("not a Pod") != std::string::npos);
    CHECK(error_of("kind: List\nitems: []\n").find("exactly one Pod") != std::string::npos);
    CHECK(error_of("- a\n- b\n").find("expected a mapping") != std::string::npos);
    CHECK(error_of("kind: Pod\nmetadata: {name: p}\n").find("spec: required field missing") != std::string::npos);
    CHECK(error_of("kind: Pod\nmetadata: {name: p}\nspec: {containers: []}\n").find("at least one container") != std::string::npos);
    CHECK(error_of("kind: Pod\nmetadata: {name: p}\nspec: {containers: [{name: c, resources: {limits: {cpu: 1x}}}]}\n") ==
          "spec.containers[0].resources.limits.cpu: quantity \"1x\": unknown suffix \"x\" (Ki Mi Gi Ti Pi Ei, m k M G T P E, or e<N>)");
    CHECK(error_of("kind: Pod\nmetadata: {name: p}\nspec: {containers: [{name: c, resources: {limits: {cpu: \"-1\"}}}]}\n").find("negative") !=
          std::string::npos);
    CHECK(error_of("kind: Pod\nmetadata: {name: p, uid: \"../../x\"}\nspec: {containers: [{name: c}]}\n") == "metadata.uid: \"../../x\": not a UUID");
    CHECK(error_of("kind: Pod\nmetadata: {name: p, labels: {a: [1]}}\nspec: {containers: [{name: c}]}\n")
              .find("metadata.labels.a: expected a string") != std::string::npos);
    CHECK(error_of("kind: Pod\nmetadata: {name: p}\nspec: {containers: [{name: c}, {name: c}]}\n").find("two containers named") != std::string::npos);
    CHECK(error_of("kind: Pod\nmetadata: {name: \"a/b\"}\nspec: {containers: [{name: c}]}\n").find("not a Kubernetes name") != std::string::npos);
    CHECK(error_of("a: [1, 2\n").rfind("manifest: yaml-cpp: error at line", 0) == 0);
    // raw bytes yaml-cpp passes through (an overlong "/", a lone 0xff); its own escapes it checks
    CHECK(error_of("kind: Pod\nmetadata: {name: p, labels: {a: \"x\xc0\xafy\"}}\nspec: {containers: [{name: c}]}\n") ==
          "metadata.labels.a: not valid UTF-8");
    CHECK(error_of("kind: Pod\nmetadata: {name: p, labels: {a: x\xffy}}\nspec: {containers: [{name: c}]}\n") == "metadata.labels.a: not valid UTF-8");
    CHECK(error_of("kind: Pod\nmetadata: {name: p, labels: {a: \"\\uD800\"}}\nspec: {containers: [{name: c}]}\n").find("invalid unicode") !=
          std::string::npos);
    CHECK(error_of("kind: Pod\n---\nkind: Pod\n").find("2 YAML documents") != std::string::npos);
    // yaml-cpp 0.7 reads a top-level flow token as endless empty documents (LoadAll never returned:
    // fuzz-pod_manifest timeout of 2026-11-27)
    CHECK(error_of(",").rfind("manifest: more than 16 YAML documents (the next starts at line 1, column 1;", 0) == 0);
    CHECK(error_of("- a\n,\n").find("more than 16 YAML documents") != std::string::npos);
    // a control character in an annotation key: the NRI request parser refuses it, so the
    // manifest reader does too (fuzz-pod_manifest crash of 2026-11-27, CI)
    CHECK(error_of("kind: Pod\nmetadata: {name: p, annotations: {\"node.koordinator\\x01sh/x\": v}}\nspec: {containers: [{name: c}]}\n") ==
          "metadata.annotations: key \"node.koordinator?sh/x\": contains a control character");
    // too many containers
    std::string many = "kind: Pod\nmetadata: {name: p}\nspec:\n  containers:\n";
    for (int i = 0; i < 257; ++i) many += "  - name: c" + std::to_string(i) + "\n";
    CHECK(error_of(many).find("more than 256") != std::string::npos);
    // deep nesting
    std::string deep = "kind: Pod\nmetadata: {name: p}\nspec: {containers: [{name: c}]}\nx: " + std::string(100, '[') + std::string(100, ']') + "\n";
    CHECK(error_of(deep).find("nested deeper than 64") != std::string::npos);
    // aliases of aliases ("billion laughs"): bounded by the node budget, not expanded
    std::string bomb = "a: &a [x, x, x, x, x, x, x, x, x, x]\n";
    char prev = 'a';
    for (char c = 'b'; c <= 'i'; ++c) {
        bomb += std::string(1, c) + ": &" + c + " [";
        for (int i = 0; i < 10; ++i) bomb += std::string(i ? ", " : "") + "*" + prev;
        bomb += "]\n";
        prev = c;
    }
    bomb += "kind: Pod\nmetadata: {name: p}\nspec: {containers: [{name: c}]}\n";
    CHECK(error_of(bomb).find("nodes (counting each use of an alias)") != std::string::npos);
    // over the size limit
    CHECK(error_of(std::string(manifest_limits::kMaxBytes + 1, ' ')).find("larger than") != std::string::npos);
    CHECK(error_of(std::string("kind: Pod\0", 10)).find("NUL") != std::string::npos);
    for (const char* t : {"", "\n", "{}", "null", "kind: Pod\nmetadata: 3\n", "kind: Pod\nmetadata: {name: p}\nspec: {containers: 3}\n"}) {
        INFO(t);
        std::string e = error_of(t);
        CHECK_FALSE(e.empty());
        CHECK(e.find('\n') == std::string::npos);
    }
}

TEST_CASE("manifest: the NRI events parse as the relay child's input", "[podpreview]") {
    PodManifest m = pod(ctr("a", "cpu: 100m", "cpu: 1, memory: 64Mi"), "  labels: {koordinator.sh/qosClass: BE}\n  annotations: {x: y}\n");
    KubeletPod k = kubelet_pod(m, CgroupDriver::Systemd);
    Request s = parse_nri_event(nri_pod_event(m, k, "RunPodSandbox", 1000).dump());
    CHECK(s.event == Event::RunPodSandbox);
    CHECK(s.is_sandbox);
    CHECK(s.labels.at("koordinator.sh/qosClass") == "BE");
    CHECK(s.annotations.at("x") == "y");
    CHECK(s.cgroups_path == k.sandbox.cgroups_path);
    CHECK(s.resources.cpu_shares == 2);
    Request c = parse_nri_event(nri_container_event(m, k, 0, "CreateContainer", k.containers[0].oci, std::nullopt).dump());
    CHECK(c.event == Event::CreateContainer);
    CHECK_FALSE(c.is_sandbox);
    CHECK(c.container_name == "a");
    CHECK(c.sandbox_id == k.sandbox.id);
    CHECK(c.resources.cpu_shares == 102);
    CHECK(c.resources.cpu_quota == 100000);
    CHECK(c.resources.mem_limit == 64 << 20);
    CHECK(c.annotations.at("x") == "y");  // the pod's, from /pod
}

TEST_CASE("preview: the pod's burst is the end state of all its containers (issue #21 §5)", "[podpreview]") {
    // Volcano CPU burst on a two-container pod (shaped after volcano-sh/volcano@v1.15.1
    // docs/design/colocation/Overview.md): each container's burst is its quota-burst-time
    // 100000; the pod's, written at each container event, ends as their sum 200000. The old
    // single-request explain computed each container event's pod sum alone (100000).
    Tmp t;
    for (const char* f : {"cpu.shares", "cpu.cfs_quota_us", "cpu.cfs_period_us", "cpu.cfs_burst_us"})
        t.put(std::string("node/cpu/kubepods/") + f, "");
    t.put("node/memory/kubepods/memory.limit_in_bytes", "");
    t.put("sys/devices/system/cpu/online", "0-7\n");
    t.put("policy.toml",
          "version = 1\n[settings]\ndefault_class = \"D\"\n[classes.D.container]\ncpu_burst_us = { fact = \"volcano.cpu_burst_us\" }\n"
          "[classes.D.pod]\ncpu_burst_us = { fact = \"volcano.pod_cpu_burst_us\" }\n");
    t.put("scratch/.keep", "");
    PodPreviewOptions o;
    o.eval.policy = t.path + "/policy.toml";
    o.eval.policy_from_flag = true;
    o.eval.cache_dir = "";
    o.eval.last_good_dir_set = true;
    o.eval.last_good_dir = "";
    o.eval.cgroup_root = t.path + "/node";
    o.eval.sysfs_root = t.path + "/sys";
    o.eval.kubelet_cpu_state = "";
    o.eval.resctrl_root = t.path + "/none";
    o.eval.proc_root = t.path + "/none";
    o.eval.layout = Layout::V1;
    o.driver = CgroupDriver::Cgroupfs;
    o.json = true;
    const std::string manifest =
        "kind: Pod\nmetadata:\n  name: burst\n  annotations: {volcano.sh/enable-quota-burst: \"true\", volcano.sh/quota-burst-time: \"100000\"}\n"
        "spec:\n  containers:\n  - name: a\n    resources: {limits: {cpu: 1}}\n  - name: b\n    resources: {limits: {cpu: 1}}\n";
    int code = -1;
    std::string out = preview_pod(manifest, o, t.path + "/scratch", code);
    INFO(out);
    REQUIRE(code == 0);
    json j = json::parse(out);
    auto value = [&](const std::string& cg, const std::string& file) {
        for (const auto& e : j["end_state"])
            if (e["cgroup"].get<std::string>().find(cg) == 0)
                for (const auto& f : e["files"])
                    if (f["file"] == file) return f["value"].get<std::string>() + " | " + f["set_by"].get<std::string>();
        return std::string("none");
    };
    CHECK(value("pod ", "cpu.cfs_burst_us") == "200000 | nri-qos StartContainer (class D)");
    CHECK(value("pod ", "cpu.cfs_quota_us") == "200000 | kubelet (ResourceConfigForPod)");
    CHECK(value("container a", "cpu.cfs_burst_us") == "100000 | nri-qos StartContainer (class D)");
    CHECK(value("container b", "cpu.cfs_burst_us") == "100000 | nri-qos StartContainer (class D)");
    CHECK(value("container b", "cpu.cfs_quota_us") == "100000 | runc (kubelet's OCI quota)");
    CHECK(j["pod"]["uid_made_up"] == true);
    CHECK(j["events"].size() == 5);  // RunPodSandbox, Create + Start × 2
}
