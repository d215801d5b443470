// Unit tests of src/event/systemd_unit.{hpp,cpp} (issue #25 §2): the unit properties nri-qos sets on the
// systemd cgroup driver, encoded as runc's systemd cgroup manager encodes them
// (opencontainers/cgroups systemd/common.go addCpuQuota, systemd/cpuset.go RangeToBits,
// systemd/v2.go unifiedResToSystemdProps), the unit names from the cgroupsPath, and the order
// (properties first, then the files) and outcomes through apply_plan with a fake setter.
#include <csignal>
#include <catch2/catch.hpp>

#include <climits>
#include <cstdio>
#include <sys/stat.h>
#include <map>
#include <vector>

#include "event/adjust.hpp"
#include "event/classify.hpp"
#include "model/model.hpp"
#include "policy/policy.hpp"
#include "model/request.hpp"
#include "event/sinks.hpp"
#include "event/systemd_unit.hpp"

#include "../scratch.hpp"

using namespace nriqos;

namespace {

std::vector<uint8_t> B(std::initializer_list<int> v) {
    std::vector<uint8_t> o;
    for (int x : v) o.push_back(static_cast<uint8_t>(x));
    return o;
}

/// Records the writes, in order; every file exists.
struct LogKernel : Kernel {
    std::vector<std::string> log;
    IoResult write(Root, const std::string& rel, std::string_view v) override {
        log.push_back(rel + "=" + std::string(v));
        return {};
    }
    std::optional<std::string> cpu_max = std::string("max 100000\n");
    std::optional<std::string> read(Root, const std::string&) override { return cpu_max; }
    bool exists(Root, const std::string&) override { return true; }
};

/// Answers from a table (property name → "" or an error), recording what it was asked and how
/// many file writes had happened by then.
struct FakeSetter : UnitSetter {
    std::map<std::string, std::string> fail;
    std::vector<std::string> asked;
    const LogKernel* k = nullptr;
    size_t writes_before = SIZE_MAX;
    std::vector<std::string> set(const std::vector<UnitProp>& props) override {
        writes_before = k ? k->log.size() : 0;
        std::vector<std::string> out;
        for (const auto& p : props) {
            asked.push_back(p.line());
            out.push_back(fail.count(p.name) ? fail[p.name] : "");
        }
        return out;
    }
};

const char* kPolicy = R"(version = 1
[settings]
default_class = "BE"
[classes.BE.container]
cpu_shares = 2
cpu_quota_us = 50000
cpu_burst_us = 0
memory_limit = "1Gi"
pids_max = 100
)";

Plan systemd_plan(LogKernel& k, Layout layout = Layout::V2) {
    static Policy p;
    static Request r;
    p = parse_policy_toml(kPolicy, "t.toml");
    r = parse_v01_request(R"({"version":"0.1","state":"create","id":"c1","sandboxID":"s1","pid":1,)"
                          R"("spec":{"cgroupsPath":"kubepods-besteffort-pod1234_5678.slice:cri-containerd:c1","annotations":{},)"
                          R"("resources":{"cpu":{"shares":2}}}})");
    PlanInput in;
    in.req = &r;
    in.policy = &p;
    in.paths = resolve_cgroups_path(*r.cgroups_path);
    in.kube_qos = kube_qos_from_path(in.paths->pod);
    Facts f{&r, in.kube_qos};
    in.decision = classify(p, f);
    in.layout = layout;
    in.kernel = &k;
    return build_plan(in);
}

const Write& write_of(const Plan& p, const std::string& file) {
    for (const auto& w : p.writes)
        if (w.rel.size() >= file.size() && w.rel.compare(w.rel.size() - file.size(), file.size(), file) == 0 &&
            w.rel[w.rel.size() - file.size() - 1] == '/')
            return w;
    FAIL("no write of " << file);
    static Write none;
    return none;
}

}  // namespace

TEST_CASE("systemd: AllowedCPUs/AllowedMemoryNodes bitmask bytes as runc's RangeToBits", "[systemd]") {
    CHECK(cpuset_to_mask("0") == B({0x01}));
    CHECK(cpuset_to_mask("0-3,8") == B({0x0f, 0x01}));
    CHECK(cpuset_to_mask("9") == B({0x00, 0x02}));
    CHECK(cpuset_to_mask("0-7") == B({0xff}));
    CHECK(cpuset_to_mask("63") == B({0, 0, 0, 0, 0, 0, 0, 0x80}));
    CHECK(cpuset_to_mask("1,3,5-6,16") == B({0x6a, 0x00, 0x01}));
    CHECK_FALSE(cpuset_to_mask(""));
    CHECK_FALSE(cpuset_to_mask("3-1"));
    CHECK_FALSE(cpuset_to_mask("a"));
}

TEST_CASE("systemd: CPUQuotaPerSecUSec rounds up to whole percents as runc's addCpuQuota", "[systemd]") {
    CHECK(cpu_quota_per_sec_usec(50000, 100000) == 500000);
    CHECK(cpu_quota_per_sec_usec(12345, 100000) == 130000);  // 123450 → next 10000
    CHECK(cpu_quota_per_sec_usec(1000, 100000) == 10000);
    CHECK(cpu_quota_per_sec_usec(1000, 0) == 10000);  // period 0: the default 100000
    CHECK(cpu_quota_per_sec_usec(25000, 50000) == 500000);
    CHECK(cpu_quota_per_sec_usec(-1, 100000) == UINT64_MAX);  // "max": USEC_INFINITY
    CHECK(cpu_quota_per_sec_usec(200000, 100000) == 2000000);
}

TEST_CASE("systemd: properties of each cgroup v2 file", "[systemd]") {
    std::string why;
    auto one = [&](const std::string& f, const std::string& v) {
        why.clear();
        std::string t;
        for (const auto& p : systemd_props_for(f, v, why)) t += (t.empty() ? "" : " ") + p.text();
        return t;
    };
    CHECK(one("cpu.weight", "1") == "CPUWeight=1");
    CHECK(one("cpu.max", "50000 100000") == "CPUQuotaPeriodUSec=100000 CPUQuotaPerSecUSec=500000");
    CHECK(one("cpu.max", "max 100000") == "CPUQuotaPeriodUSec=100000 CPUQuotaPerSecUSec=infinity");
    CHECK(one("memory.max", "1073741824") == "MemoryMax=1073741824");
    CHECK(one("memory.max", "max") == "MemoryMax=infinity");
    CHECK(one("memory.high", "max") == "MemoryHigh=infinity");
    CHECK(one("memory.low", "4096") == "MemoryLow=4096");
    CHECK(one("memory.min", "0") == "MemoryMin=0");
    CHECK(one("memory.swap.max", "0") == "MemorySwapMax=0");
    CHECK(one("pids.max", "100") == "TasksMax=100");
    CHECK(one("pids.max", "max") == "TasksMax=infinity");
    CHECK(one("io.weight", "default 100") == "IOWeight=100");
    CHECK(one("cpuset.cpus", "0-3,8") == "AllowedCPUs=0x0f01");
    CHECK(one("cpuset.mems", "0") == "AllowedMemoryNodes=0x01");
    for (const char* f : {"cpu.max.burst", "cpu.idle", "cpu.qos_level", "memory.qos_level", "cpu.bvt_warp_ns"}) {
        INFO(f);
        CHECK(one(f, "1").empty());
        CHECK(why.find("no unit property for " + std::string(f)) != std::string::npos);
        CHECK(why.find("reconcile") != std::string::npos);
    }
    CHECK(one("cpu.weight", "x").empty());
    CHECK(why.find("not a number") != std::string::npos);
    CHECK(one("cpu.max", "50000 p").empty());
    CHECK(!why.empty());
}

TEST_CASE("systemd: companion lines and unit names from the cgroupsPath (runc getUnitName)", "[systemd]") {
    UnitProp p;
    p.unit = "cri-containerd-c1.scope";
    p.name = "MemoryMax";
    p.num = UINT64_MAX;
    CHECK(p.line() == "cri-containerd-c1.scope\tMemoryMax\tt\t18446744073709551615");
    p.name = "AllowedCPUs";
    p.bytes = true;
    p.mask = B({0x0f, 0x01});
    CHECK(p.line() == "cri-containerd-c1.scope\tAllowedCPUs\tay\t0f01");
    auto paths = resolve_cgroups_path("kubepods-besteffort-pod1234_5678.slice:cri-containerd:c1");
    CHECK(systemd_unit_of(paths.container) == "cri-containerd-c1.scope");
    CHECK(systemd_unit_of(paths.pod) == "kubepods-besteffort-pod1234_5678.slice");
    CHECK(systemd_unit_of(resolve_cgroups_path("system.slice:docker:abc").container) == "docker-abc.scope");
    CHECK(systemd_unit_of(resolve_cgroups_path("kubepods.slice:cri-containerd:x.slice").container) == "x.slice");
    CHECK(systemd_unit_of("kubepods/besteffort/pod1/c1").empty());  // cgroupfs: no unit
}

TEST_CASE("systemd: apply_plan sets the unit properties before writing the files (runc's order)", "[systemd]") {
    LogKernel k;
    Plan plan = systemd_plan(k);
    REQUIRE(plan.driver == CgroupDriver::Systemd);
    FakeSetter fs;
    fs.k = &k;
    SystemdSink sink{&fs, ""};
    apply_plan(plan, k, &sink);
    CHECK(fs.writes_before == 0);  // properties first
    CHECK_FALSE(k.log.empty());
    const std::string unit = "cri-containerd-c1.scope";
    std::string asked;
    for (const auto& a : fs.asked) asked += a + "\n";
    CHECK(asked.find(unit + "\tCPUWeight\tt\t1\n") != std::string::npos);
    CHECK(asked.find(unit + "\tCPUQuotaPerSecUSec\tt\t500000\n") != std::string::npos);
    CHECK(asked.find(unit + "\tMemoryMax\tt\t1073741824\n") != std::string::npos);
    CHECK(asked.find(unit + "\tTasksMax\tt\t100\n") != std::string::npos);
    CHECK(write_of(plan, "cpu.weight").systemd == "applied: CPUWeight=1 on " + unit);
    CHECK(write_of(plan, "memory.max").systemd == "applied: MemoryMax=1073741824 on " + unit);
    CHECK(write_of(plan, "cpu.max.burst").systemd.rfind("skipped: systemd has no unit property for cpu.max.burst", 0) == 0);
    // In the Result's writes and its metadata summary.
    CHECK(writes_json(plan).dump().find("\"systemd\":\"applied: CPUWeight=1 on " + unit + "\"") != std::string::npos);
    CHECK(systemd_summary(plan) ==
          "applied: cpu.weight cpu.max memory.max pids.max; skipped: cpu.max.burst (systemd has no unit property for "
          "cpu.max.burst: reconcile reapplies it after a daemon-reload)");
    for (const auto& w : plan.writes) CHECK(w.status == Write::Applied);
}

TEST_CASE("systemd: a property systemd refuses is failed with its reason; the file is still written", "[systemd]") {
    LogKernel k;
    Plan plan = systemd_plan(k);
    FakeSetter fs;
    fs.fail["CPUQuotaPerSecUSec"] = "org.freedesktop.DBus.Error.InvalidArgs: nope";
    SystemdSink sink{&fs, ""};
    apply_plan(plan, k, &sink);
    const Write& w = write_of(plan, "cpu.max");
    CHECK(w.systemd ==
          "failed: CPUQuotaPerSecUSec=500000 (org.freedesktop.DBus.Error.InvalidArgs: nope) on cri-containerd-c1.scope "
          "(applied: CPUQuotaPeriodUSec=100000)");
    CHECK(w.status == Write::Applied);
}

TEST_CASE("systemd: not set (scratch root, cgroup v1, cgroupfs driver) says why, per write", "[systemd]") {
    {
        LogKernel k;
        Plan plan = systemd_plan(k);
        FakeSetter fs;
        SystemdSink sink{&fs, "cgroup root /tmp/x is not /sys/fs/cgroup: systemd manages only the real hierarchy"};
        apply_plan(plan, k, &sink);
        CHECK(fs.asked.empty());
        CHECK(write_of(plan, "cpu.weight").systemd ==
              "skipped: CPUWeight=1 on cri-containerd-c1.scope: cgroup root /tmp/x is not /sys/fs/cgroup: systemd manages only the real hierarchy");
    }
    {
        LogKernel k;
        Plan plan = systemd_plan(k, Layout::V1);
        FakeSetter fs;
        SystemdSink sink{&fs, ""};
        apply_plan(plan, k, &sink);
        CHECK(fs.asked.empty());
        CHECK(write_of(plan, "cpu.shares").systemd.rfind("skipped: cgroup v1 on the systemd driver", 0) == 0);
    }
    {
        LogKernel k;
        Plan plan = systemd_plan(k);
        plan.driver = CgroupDriver::Cgroupfs;
        FakeSetter fs;
        SystemdSink sink{&fs, ""};
        apply_plan(plan, k, &sink);
        CHECK(fs.asked.empty());
        for (const auto& w : plan.writes) CHECK(w.systemd.empty());
    }
    CHECK(systemd_sink_off("", "/sys/fs/cgroup").find("--systemd-helper is empty") == 0);
    CHECK(systemd_sink_off("/x", "/tmp/cg").find("is not /sys/fs/cgroup") != std::string::npos);
}

TEST_CASE("systemd: HelperSetter runs the companion and reads one answer a line", "[systemd]") {
    // A stand-in companion: a shell script answering "ok" for CPUWeight and an error otherwise.
    const unit::ScratchDir scratch("systemd-test");
    const std::string dir = scratch.path, bin = dir + "/helper";
    FILE* f = std::fopen(bin.c_str(), "w");
    REQUIRE(f);
    std::fputs(
        "#!/bin/sh\nwhile IFS='\t' read -r u n t v; do\n"
        "  if [ \"$n\" = CPUWeight ]; then echo ok; else echo \"error $n refused on $u\"; fi\ndone\n",
        f);
    std::fclose(f);
    REQUIRE(chmod(bin.c_str(), 0755) == 0);
    HelperSetter hs(bin);
    UnitProp a, b;
    a.unit = b.unit = "x.scope";
    a.name = "CPUWeight";
    a.num = 1;
    b.name = "MemoryMax";
    b.num = 4096;
    auto r = hs.set({a, b});
    REQUIRE(r.size() == 2);
    CHECK(r[0].empty());
    CHECK(r[1] == "MemoryMax refused on x.scope");
    CHECK(hs.last_us > 0);
    // A companion that cannot run is an error line, never a SIGPIPE death of the event process:
    // with SIGPIPE at its default (as in the hook), the write to the gone child must give EPIPE.
    auto old_pipe = std::signal(SIGPIPE, SIG_DFL);
    HelperSetter missing(dir + "/absent");
    r = missing.set({a});
    CHECK(std::signal(SIGPIPE, old_pipe) == SIG_DFL);  // set() put the disposition back
    REQUIRE(r.size() == 1);
    CHECK(r[0].find("cannot run " + dir + "/absent") == 0);
}

TEST_CASE("systemd: a quota written alone takes the period in force for CPUQuotaPerSecUSec", "[systemd]") {
    LogKernel k;
    k.cpu_max = std::string("max 50000\n");  // runc set period 50000: quota 50000 is one CPU
    Plan plan = systemd_plan(k);
    FakeSetter fs;
    SystemdSink sink{&fs, ""};
    apply_plan(plan, k, &sink);
    CHECK(write_of(plan, "cpu.max").systemd == "applied: CPUQuotaPeriodUSec=50000 CPUQuotaPerSecUSec=1000000 on cri-containerd-c1.scope");
    LogKernel k2;
    k2.cpu_max = std::nullopt;
    Plan plan2 = systemd_plan(k2);
    apply_plan(plan2, k2, &sink);
    CHECK(write_of(plan2, "cpu.max").systemd.find("period assumed 100000") != std::string::npos);
}
