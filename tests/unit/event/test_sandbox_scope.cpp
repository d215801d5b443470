// Unit tests of the sandbox scope ([classes.X.sandbox], issue #32 §1) and the group identity knob
// cpu_bvt_warp_ns (§2): real events through run_pipeline on a scratch cgroup tree, the files
// read back; what the runtime gives no path for is skipped with the reason; the sandbox cpuset
// goes through the pin checks and the trust rule; the policy's checks and the compiled form.
#include <catch2/catch.hpp>

#include <fstream>
#include <sstream>
#include <string>
#include <sys/stat.h>

#include <nlohmann/json.hpp>

#include "event/pipeline.hpp"
#include "policy/policy.hpp"
#include "policy/policy_cache.hpp"

#include "../scratch.hpp"

using namespace nriqos;
using nlohmann::json;

namespace {

const std::string kPodDir = "kubepods/burstable/pod0e2e0000-6edd-4127-830b-934cae53b469";
const std::string kSbId = "97f836f797313b8c1bbda96922a46fc700e505e212b0350c0b7e3d951d01c666";
const std::string kCtrId = "f9159d083de20134b90778a5c6d8ee69ecb3b500f2ef34976b11b59554b7bc8e";

/// A scratch node: a cgroup v1 tree (cpu, memory, cpuset) with the pod, its sandbox and one
/// container, each with the files named in `files` (kernel defaults); sysfs with 8 online CPUs.
struct Node {
    unit::ScratchDir scratch{"sandbox-scope"};
    const std::string root = scratch.path;
    explicit Node(const std::vector<std::string>& files) {
        for (const std::string& d : {kPodDir, kPodDir + "/" + kSbId, kPodDir + "/" + kCtrId})
            for (const std::string& f : files) put(f.substr(0, f.find('.')) + "/" + d + "/" + f, "0");
        put("cpuset/" + kPodDir + "/cpuset.effective_cpus", "0-7");
        put("sys/devices/system/cpu/online", "0-7");
        scratch.mkdir("proc");
        scratch.mkdir("state");
    }
    /// Writes cg/`rel`, or `rel` itself with a newline when it is under sys/.
    void put(const std::string& rel, const std::string& text) const {
        if (rel.rfind("sys/", 0) == 0) scratch.put(rel, text + "\n");
        else scratch.put("cg/" + rel, text);
    }
    std::string get(const std::string& rel) const {
        std::ifstream f(root + "/cg/" + rel);
        if (!f.good()) return "<absent>";
        std::stringstream s;
        s << f.rdbuf();
        return s.str();
    }
    json run(const std::string& policy, const std::string& req, bool native = false) const {
        { std::ofstream(root + "/p.toml") << policy; }
        Options o;
        o.policy = root + "/p.toml";
        o.policy_from_flag = true;
        o.cgroup_root = root + "/cg";
        o.proc_root = root + "/proc";
        o.resctrl_root = root + "/resctrl";
        o.sysfs_root = root + "/sys";
        o.kubelet_cpu_state = "";
        o.state_dir = root + "/state";
        o.cache_dir = "";
        o.last_good_dir_set = true;
        o.last_good_dir = "";
        o.event_log = "";
        o.metrics_file = "";
        o.layout = Layout::V1;
        o.systemd_helper = "";
        int code = -1;
        std::string out = run_pipeline(native ? Mode::NriEval : Mode::Invoke, o, req, code);
        INFO(out);
        return json::parse(out);
    }
};

/// The NRI v0.1 sandbox create of containerd 1.6.20 (tests/fixtures/requests), with `ann`.
std::string v01_sandbox(const json& ann = json::object()) {
    json r = {{"version", "0.1"},
              {"state", "create"},
              {"id", kSbId},
              {"sandboxID", kSbId},
              {"pid", 2470},
              {"spec",
               {{"resources", {{"cpu", {{"shares", 2}}}}},
                {"cgroupsPath", "/" + kPodDir + "/" + kSbId},
                {"annotations",
                 {{"io.kubernetes.cri.container-type", "sandbox"},
                  {"io.kubernetes.cri.sandbox-namespace", "default"},
                  {"io.kubernetes.cri.sandbox-name", "web"}}}}}};
    for (const auto& [k, v] : ann.items()) r["spec"]["annotations"][k] = v;
    return r.dump();
}
std::string v01_container() {
    json r = {{"version", "0.1"},
              {"state", "create"},
              {"id", kCtrId},
              {"sandboxID", kSbId},
              {"pid", 2529},
              {"spec",
               {{"resources", {{"cpu", {{"shares", 512}}}}},
                {"cgroupsPath", "/" + kPodDir + "/" + kCtrId},
                {"annotations",
                 {{"io.kubernetes.cri.container-type", "container"},
                  {"io.kubernetes.cri.sandbox-namespace", "default"},
                  {"io.kubernetes.cri.sandbox-name", "web"}}}}}};
    return r.dump();
}
/// A native RunPodSandbox (NRI Go JSON as the relay hands it to nri-eval), with or without the
/// PodSandbox's linux.cgroups_path.
std::string nri_run_pod(bool with_path) {
    json ev = {{"event", "RunPodSandbox"},
               {"runtime", {{"name", "containerd"}, {"version", "2.1.0"}}},
               {"pod", {{"id", kSbId}, {"name", "web"}, {"namespace", "default"}, {"uid", "0e2e0000-6edd-4127-830b-934cae53b469"}}}};
    if (with_path) ev["pod"]["linux"] = {{"cgroup_parent", "/" + kPodDir}, {"cgroups_path", "/" + kPodDir + "/" + kSbId}};
    return ev.dump();
}

/// The Result's write of `knob` in `scope` (nullptr: none), pointing into `res`.
const json* write_of(const json& res, const std::string& scope, const std::string& knob) {
    if (!res.contains("writes") || !res["writes"].is_array()) return nullptr;
    for (const auto& w : res["writes"])
        if (w.value("scope", "") == scope && w.value("knob", "") == knob) return &w;
    return nullptr;
}
std::string meta(const json& res, const char* k) { return res.contains("metadata") ? res["metadata"].value(k, "") : ""; }

const char* kVolcanoBE = R"(version = 1
[settings]
default_class = "BE"
[classes.BE.container]
cpu_qos_level = -1
[classes.BE.pod]
cpu_qos_level = -1
[classes.BE.sandbox]
cpu_qos_level = -1
memory_qos_level = -1
cpu_bvt_warp_ns = -1
)";

}  // namespace

TEST_CASE("sandbox scope: v0.1 sandbox create writes the pause container's own cgroup; containers never", "[sandbox]") {
    Node n({"cpu.qos_level", "memory.qos_level"});  // an openEuler kernel: no cpu.bvt_warp_ns
    json r = n.run(kVolcanoBE, v01_sandbox());
    CHECK(n.get("cpu/" + kPodDir + "/" + kSbId + "/cpu.qos_level") == "-1");
    CHECK(n.get("memory/" + kPodDir + "/" + kSbId + "/memory.qos_level") == "-1");
    CHECK(n.get("cpu/" + kPodDir + "/cpu.qos_level") == "-1");  // the pod knob, as before
    CHECK(n.get("cpu/" + kPodDir + "/" + kCtrId + "/cpu.qos_level") == "0");  // not a container event
    const json* w = write_of(r, "sandbox", "cpu_qos_level");
    REQUIRE(w);
    CHECK(w->value("status", "") == "applied");
    CHECK(meta(r, "applied").find("sandbox:cpu.qos_level=-1") != std::string::npos);
    // group identity: the file exists only on Anolis kernels — skipped, with the reason, never failed
    const json* b = write_of(r, "sandbox", "cpu_bvt_warp_ns");
    REQUIRE(b);
    CHECK(b->value("status", "") == "skipped");
    CHECK(b->value("reason", "") ==
          "kernel does not provide this file (cpu.bvt_warp_ns: group identity exists on Anolis / Alibaba Cloud Linux kernels only)");
    CHECK(b->value("file", "") == "cpu/" + kPodDir + "/" + kSbId + "/cpu.bvt_warp_ns");
    CHECK(meta(r, "failed").empty());

    // a container event: the container's knobs only, the sandbox's cgroup is left alone
    n.put("cpu/" + kPodDir + "/" + kSbId + "/cpu.qos_level", "0");
    json c = n.run(kVolcanoBE, v01_container());
    CHECK(n.get("cpu/" + kPodDir + "/" + kCtrId + "/cpu.qos_level") == "-1");
    CHECK(n.get("cpu/" + kPodDir + "/" + kSbId + "/cpu.qos_level") == "0");
    CHECK_FALSE(write_of(c, "sandbox", "cpu_qos_level"));
}

TEST_CASE("cpu_bvt_warp_ns: written where the kernel has the file (Anolis), v1 cpu controller", "[sandbox][bvt]") {
    Node n({"cpu.bvt_warp_ns"});
    const char* pol =
        "version = 1\n[settings]\ndefault_class = \"LS\"\n[classes.LS.pod]\ncpu_bvt_warp_ns = 2\n[classes.LS.container]\ncpu_bvt_warp_ns = 2\n";
    n.run(pol, v01_sandbox());
    CHECK(n.get("cpu/" + kPodDir + "/cpu.bvt_warp_ns") == "2");
    CHECK(n.get("cpu/" + kPodDir + "/" + kSbId + "/cpu.bvt_warp_ns") == "0");  // no sandbox knob
    n.run(pol, v01_container());
    CHECK(n.get("cpu/" + kPodDir + "/" + kCtrId + "/cpu.bvt_warp_ns") == "2");
}

TEST_CASE("sandbox scope: native RunPodSandbox uses the PodSandbox's linux.cgroups_path, skips each knob without it", "[sandbox][nri]") {
    Node n({"cpu.qos_level", "memory.qos_level"});
    json with = n.run(kVolcanoBE, nri_run_pod(true), true);
    CHECK(n.get("cpu/" + kPodDir + "/" + kSbId + "/cpu.qos_level") == "-1");
    CHECK(n.get("memory/" + kPodDir + "/" + kSbId + "/memory.qos_level") == "-1");

    Node m({"cpu.qos_level", "memory.qos_level"});
    json without = m.run(kVolcanoBE, nri_run_pod(false), true);
    CHECK(m.get("cpu/" + kPodDir + "/" + kSbId + "/cpu.qos_level") == "0");
    const std::string skipped = meta(without, "skipped");
    for (const char* k : {"sandbox:cpu_qos_level", "sandbox:memory_qos_level", "sandbox:cpu_bvt_warp_ns"}) {
        INFO(k << " in " << skipped);
        CHECK(skipped.find(std::string(k) + ": the runtime gave no sandbox cgroups_path") != std::string::npos);
    }
}

TEST_CASE("sandbox scope: the koordinator cpuset passes the pin checks and the trust rule against the pod's grant", "[sandbox][facts]") {
    const char* pol = "version = 1\n[settings]\ndefault_class = \"K\"\n[classes.K.sandbox]\ncpuset_cpus = { fact = \"koordinator.cpuset\" }\n";
    const json ann = {{"scheduling.koordinator.sh/resource-status", "{\"cpuset\":\"2-3\"}"}};
    const std::string sb = "cpuset/" + kPodDir + "/" + kSbId + "/cpuset.cpus";
    SECTION("untrusted, the pod's quota pays for 2 CPUs: applied") {
        Node n({"cpuset.cpus", "cpu.cfs_quota_us", "cpu.cfs_period_us"});
        n.put("cpu/" + kPodDir + "/cpu.cfs_quota_us", "200000");
        n.put("cpu/" + kPodDir + "/cpu.cfs_period_us", "100000");
        json r = n.run(pol, v01_sandbox(ann));
        CHECK(n.get(sb) == "2-3");
        const json* w = write_of(r, "sandbox", "cpuset_cpus");
        REQUIRE(w);
        CHECK(w->value("note", "").find("untrusted, applied: does not raise") != std::string::npos);
    }
    SECTION("untrusted, the pod's quota pays for 1 CPU: refused, counted as failed") {
        Node n({"cpuset.cpus", "cpu.cfs_quota_us", "cpu.cfs_period_us"});
        n.put("cpu/" + kPodDir + "/cpu.cfs_quota_us", "100000");
        n.put("cpu/" + kPodDir + "/cpu.cfs_period_us", "100000");
        json r = n.run(pol, v01_sandbox(ann));
        CHECK(n.get(sb) == "0");
        CHECK(meta(r, "failed").find("sandbox:cpuset_cpus: fact koordinator.cpuset") != std::string::npos);
    }
    SECTION("a cpuset outside the pod's effective CPUs is refused whoever wrote it") {
        Node n({"cpuset.cpus", "cpu.cfs_quota_us"});
        n.put("cpuset/" + kPodDir + "/cpuset.effective_cpus", "0-1");
        json r = n.run(std::string(pol) + "[guarded.annotations]\n\"scheduling.koordinator.sh/resource-status\" = \"koord-scheduler\"\n",
                       v01_sandbox(ann));
        CHECK(n.get(sb) == "0");
        CHECK(meta(r, "failed").find("sandbox:cpuset_cpus") != std::string::npos);
    }
}

TEST_CASE("policy: [classes.X.sandbox] is checked and survives the compiled form", "[sandbox][policy]") {
    const std::string head = "version = 1\n[settings]\ndefault_class = \"A\"\n[classes.A.sandbox]\n";
    auto err = [&](const std::string& body) {
        try {
            parse_policy_toml(head + body, "p.toml");
        } catch (const std::exception& e) { return std::string(e.what()); }
        return std::string();
    };
    CHECK(err("oom_score_adj = 1\n").find("classes.A.sandbox: oom_score_adj applies to processes, set it under .container") != std::string::npos);
    CHECK(err("sched_policy = \"idle\"\n").find("applies to processes") != std::string::npos);
    CHECK(err("cpu_bvt_warp_ns = 3\n").find("cpu_bvt_warp_ns") != std::string::npos);
    CHECK(err("cpu_bvt_warp_ns = -2\n").find("cpu_bvt_warp_ns") != std::string::npos);
    CHECK(err("pod_cpu_shares = 2\n").find("unknown") != std::string::npos);
    Policy p = parse_policy_toml(head + "cpu_qos_level = -1\ncpuset_cpus = { fact = \"koordinator.cpuset\" }\ncpu_bvt_warp_ns = -1\n", "p.toml");
    REQUIRE(p.classes.at("A").sandbox.size() == 3);
    std::string blob = policy_cache::compile(p, "key", false, 1, "s");
    Policy q;
    REQUIRE(policy_cache::decode(blob, "key", nullptr, q, nullptr) == policy_cache::Decoded::Ok);
    const auto& s = q.classes.at("A").sandbox;
    REQUIRE(s.size() == 3);
    auto find = [&](KnobId id) -> const KnobSetting* {
        for (const auto& k : s)
            if (k.id == id) return &k;
        return nullptr;
    };
    REQUIRE(find(KnobId::CpuQosLevel));
    CHECK(find(KnobId::CpuQosLevel)->value.num == -1);
    REQUIRE(find(KnobId::CpusetCpus));
    CHECK(find(KnobId::CpusetCpus)->value.kind == KnobValue::Fact);
    CHECK(find(KnobId::CpusetCpus)->value.text == "koordinator.cpuset");
    REQUIRE(find(KnobId::CpuBvtWarpNs));
    CHECK(find(KnobId::CpuBvtWarpNs)->value.num == -1);
    CHECK(q.classes.at("A").container.empty());
    CHECK(q.classes.at("A").pod.empty());
}
