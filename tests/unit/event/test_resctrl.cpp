// Unit tests for declared resctrl groups (resctrl.hpp, policy [resctrl.<name>]) on a scratch tree
// shaped like the kernel's resctrl mount (Documentation/arch/x86/resctrl.rst): info/L3/cbm_mask,
// min_cbm_bits, num_closids, info/MB/bandwidth_gran, min_bandwidth, num_closids, the default
// group's schemata and tasks. The scratch tree is no resctrl filesystem: nri-qos creates the
// files the kernel would create with a group, and the CLOSID count stands in for mkdir's ENOSPC.
#include <catch2/catch.hpp>

#include <cerrno>
#include <fcntl.h>
#include <sys/file.h>
#include <fstream>
#include <sstream>
#include <sys/stat.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "event/pipeline.hpp"
#include "event/resctrl.hpp"
#include "event/sinks.hpp"
#include "os/kernel.hpp"
#include "policy/policy.hpp"

#include "../scratch.hpp"

using namespace nriqos;

namespace {
struct Tree {
    unit::ScratchDir scratch{"resctrl-test"};
    const std::string root = scratch.path, res = root + "/resctrl", state = root + "/state";
    Tree(const std::string& cbm = "fffff", int closids = 16, const std::string& l3ids = "0=fffff;1=fffff") {
        mkdir(res.c_str(), 0755);
        mkdir((res + "/info").c_str(), 0755);
        mkdir((res + "/info/L3").c_str(), 0755);
        mkdir((res + "/info/MB").c_str(), 0755);
        put("info/L3/cbm_mask", cbm + "\n");
        put("info/L3/min_cbm_bits", "1\n");
        put("info/L3/num_closids", std::to_string(closids) + "\n");
        put("info/MB/bandwidth_gran", "10\n");
        put("info/MB/min_bandwidth", "10\n");
        put("info/MB/num_closids", "8\n");
        put("schemata", "    L3:" + l3ids + "\n    MB:0=100;1=100\n");
        put("tasks", "1\n2\n");
    }
    void put(const std::string& rel, const std::string& text) const { std::ofstream(res + "/" + rel) << text; }
    std::string get(const std::string& rel) const {
        std::ifstream f(res + "/" + rel);
        std::stringstream s;
        s << f.rdbuf();
        return s.str();
    }
    bool has(const std::string& rel) const {
        struct stat sb {};
        return stat((res + "/" + rel).c_str(), &sb) == 0;
    }
};

ResctrlGroupDef pct(const std::string& name, int l3, int mb, bool down = false) {
    ResctrlGroupDef g;
    g.name = name;
    g.l3_percent = l3;
    g.mb_percent = mb;
    g.l3_round_down = down;
    return g;
}
}  // namespace

TEST_CASE("resctrl: percentages become the kernel's schemata lines", "[resctrl]") {
    Tree t;
    std::string why;
    // koordlet DefaultResctrlQOS BE: CAT 0-30 %, MBA 100 % on 20 ways: ceil(6) = 6 ways.
    CHECK(resctrl_schemata(pct("BE", 30, 100), t.res, why) == "L3:0=3f;1=3f\nMB:0=100;1=100\n");
    // rubik dyncache low: L3 20 %, MB 10 % (floor(4) = 4 ways: f).
    CHECK(resctrl_schemata(pct("rubik_low", 20, 10, true), t.res, why) == "L3:0=f;1=f\nMB:0=10;1=10\n");
    // MB rounded up to bandwidth_gran (koordlet calculateIntel; the kernel rounds up as well).
    CHECK(resctrl_schemata(pct("x", 100, 35), t.res, why) == "L3:0=fffff;1=fffff\nMB:0=40;1=40\n");
    // 11 ways: koordlet's ceil gives 4 ways for 30 %, rubik's floor 3.
    Tree t11("7ff", 16, "0=7ff");
    CHECK(resctrl_schemata(pct("a", 30, -1), t11.res, why) == "L3:0=f\n");
    CHECK(resctrl_schemata(pct("b", 30, -1, true), t11.res, why) == "L3:0=7\n");
    // koordlet's range start: 10-50 % of 11 ways = ways 2-5 (CalculateCatL3MaskValue's example 0x3c).
    ResctrlGroupDef r = pct("r", 50, -1);
    r.l3_start_percent = 10;
    CHECK(resctrl_schemata(r, t11.res, why) == "L3:0=3c\n");
    // min_cbm_bits: never fewer ways than the kernel accepts.
    t11.put("info/L3/min_cbm_bits", "2\n");
    CHECK(resctrl_schemata(pct("c", 1, -1, true), t11.res, why) == "L3:0=3\n");
    // raw lines are written as given
    ResctrlGroupDef raw;
    raw.name = "raw";
    raw.l3 = "L3:0=ff;1=ff";
    raw.mb = "MB:0=50;1=50";
    CHECK(resctrl_schemata(raw, t.res, why) == "L3:0=ff;1=ff\nMB:0=50;1=50\n");
    // AMD-style MB (bandwidth, not percent) refuses a percentage
    t.put("schemata", "L3:0=fffff\nMB:0=2048\n");
    CHECK(resctrl_schemata(pct("m", -1, 50), t.res, why).empty());
    CHECK(why.find("not percentages") != std::string::npos);
}

TEST_CASE("resctrl: a declared group is created once, with its schemata, and remembered", "[resctrl]") {
    Tree t;
    ResctrlGroupDef g = pct("BE", 30, 100);
    GroupOutcome o = ensure_resctrl_group(g, t.res, t.state, false);
    REQUIRE(o.status == GroupOutcome::Ready);
    CHECK(o.note.find("created") != std::string::npos);
    CHECK(t.get("BE/schemata") == "L3:0=3f;1=3f\nMB:0=100;1=100\n");
    CHECK(t.has("BE/tasks"));
    CHECK(created_resctrl_groups(t.state) == std::set<std::string>{"BE"});
    // idempotent: in force, nothing rewritten
    t.put("BE/tasks", "42\n");
    o = ensure_resctrl_group(g, t.res, t.state, false);
    CHECK(o.status == GroupOutcome::Ready);
    CHECK(o.note.find("in force") != std::string::npos);
    CHECK(t.get("BE/tasks") == "42\n");
    // the kernel reads masks back zero-padded to the cbm width, lines indented: still in force
    t.put("BE/schemata", "    L3:0=0003f;1=0003f\n    MB:0=100;1=100\n");
    o = ensure_resctrl_group(g, t.res, t.state, false);
    CHECK(o.note.find("in force") != std::string::npos);
    CHECK(t.get("BE/schemata") == "    L3:0=0003f;1=0003f\n    MB:0=100;1=100\n");
    // drifted schemata of a group nri-qos made is restored
    t.put("BE/schemata", "L3:0=fffff;1=fffff\nMB:0=100;1=100\n");
    o = ensure_resctrl_group(g, t.res, t.state, false);
    CHECK(o.note.find("rewritten") != std::string::npos);
    CHECK(t.get("BE/schemata") == "L3:0=3f;1=3f\nMB:0=100;1=100\n");
}

TEST_CASE("resctrl: a group nri-qos did not make is joined, never changed unless managed", "[resctrl]") {
    Tree t;
    mkdir((t.res + "/LS").c_str(), 0755);
    t.put("LS/schemata", "L3:0=ff;1=ff\n");
    ResctrlGroupDef g = pct("LS", 100, 100);
    GroupOutcome o = ensure_resctrl_group(g, t.res, t.state, false);
    CHECK(o.status == GroupOutcome::Ready);
    CHECK(o.note.find("not made by nri-qos") != std::string::npos);
    CHECK(t.get("LS/schemata") == "L3:0=ff;1=ff\n");
    CHECK(created_resctrl_groups(t.state).empty());
    g.manage = true;
    o = ensure_resctrl_group(g, t.res, t.state, false);
    CHECK(t.get("LS/schemata") == "L3:0=fffff;1=fffff\nMB:0=100;1=100\n");
    CHECK(created_resctrl_groups(t.state).empty());  // managed, still not ours to remove
}

TEST_CASE("resctrl: no free CLOSID is a failure with the reason, nothing made", "[resctrl]") {
    Tree t("fffff", 3);  // default group + 2
    REQUIRE(ensure_resctrl_group(pct("A", 50, -1), t.res, t.state, false).status == GroupOutcome::Ready);
    REQUIRE(ensure_resctrl_group(pct("B", 50, -1), t.res, t.state, false).status == GroupOutcome::Ready);
    GroupOutcome o = ensure_resctrl_group(pct("C", 50, -1), t.res, t.state, false);
    CHECK(o.status == GroupOutcome::Failed);
    CHECK(o.note.find("no free CLOSID") != std::string::npos);
    CHECK(!t.has("C"));
    CHECK(created_resctrl_groups(t.state) == std::set<std::string>{"A", "B"});
}

TEST_CASE("resctrl: without a resctrl mount the group is skipped with the reason", "[resctrl]") {
    Tree t;
    unlink((t.res + "/schemata").c_str());
    GroupOutcome o = ensure_resctrl_group(pct("BE", 30, 100), t.res, t.state, false);
    CHECK(o.status == GroupOutcome::Skipped);
    CHECK(o.note.find("not mounted") != std::string::npos);
    CHECK(!t.has("BE"));
}

TEST_CASE("resctrl: a plan's adjustment and tasks write follow the group's outcome", "[resctrl]") {
    Tree t("fffff", 2);  // room for one group only
    Policy p;
    p.resctrl_groups["A"] = pct("A", 50, -1);
    p.resctrl_groups["B"] = pct("B", 50, -1);
    Plan ok;
    ok.adjustment = {{"linux", {{"resources", {{"rdt_class", {{"value", "A"}}}}}}}};
    ensure_plan_groups(ok, p, t.res, t.state, false);
    CHECK(ok.adjustment.dump() == R"({"linux":{"resources":{"rdt_class":{"value":"A"}}}})");
    CHECK(t.has("A/schemata"));
    Plan full;
    full.adjustment = {{"linux", {{"resources", {{"rdt_class", {{"value", "B"}}}}}}}};
    ensure_plan_groups(full, p, t.res, t.state, false);
    CHECK(full.adjustment.is_object());
    CHECK(full.adjustment.dump() == "{}");
    REQUIRE(full.refused.size() == 1);
    CHECK(full.refused[0].find("no free CLOSID") != std::string::npos);
    Plan w;
    Write tw;
    tw.knob = "resctrl_group";
    tw.id = KnobId::ResctrlGroup;
    tw.root = Root::Resctrl;
    tw.rel = "B/tasks";
    tw.value = "123";
    w.writes.push_back(tw);
    ensure_plan_groups(w, p, t.res, t.state, false);
    CHECK(w.writes[0].status == Write::Failed);
    CHECK(w.writes[0].reason.find("no free CLOSID") != std::string::npos);
}

TEST_CASE("resctrl: reconcile removes the unused empty groups nri-qos made, nothing else", "[resctrl]") {
    Tree t;
    REQUIRE(ensure_resctrl_group(pct("old", 50, -1), t.res, t.state, false).status == GroupOutcome::Ready);
    REQUIRE(ensure_resctrl_group(pct("busy", 50, -1), t.res, t.state, false).status == GroupOutcome::Ready);
    REQUIRE(ensure_resctrl_group(pct("used", 50, -1), t.res, t.state, false).status == GroupOutcome::Ready);
    mkdir((t.res + "/foreign").c_str(), 0755);
    t.put("foreign/tasks", "");
    t.put("busy/tasks", "77\n");
    std::string out;
    CHECK(cleanup_resctrl_groups({"used"}, t.res, t.state, true, out) == 0);  // dry run
    CHECK(t.has("old"));
    out.clear();
    CHECK(cleanup_resctrl_groups({"used"}, t.res, t.state, false, out) == 0);
    CHECK(!t.has("old"));
    CHECK(t.has("busy"));
    CHECK(t.has("used"));
    CHECK(t.has("foreign"));
    CHECK(out.find("removed  resctrl group old") != std::string::npos);
    CHECK(out.find("kept     resctrl group busy") != std::string::npos);
    CHECK(created_resctrl_groups(t.state) == std::set<std::string>{"busy", "used"});
}

// Issue #30 item 6: reconcile's cleanup must not remove a group between an event's check of it
// (ensure_plan_groups) and its tasks write. The event holds the mount's lock through the write
// (ResctrlLock); a cleanup that runs in between (here: with a policy that no longer names the
// group, as a reconcile pass that loaded the previous version would) waits for it, gives up after
// 500 ms and removes nothing. Before the fix the lock ended with the check: the cleanup removed
// the empty group, and the tasks write failed ("resctrl group A does not exist").
TEST_CASE("resctrl: a cleanup racing an event never removes the group between its check and its tasks write", "[resctrl][race]") {
    Tree t;
    Policy p;
    p.resctrl_groups["A"] = pct("A", 50, -1);
    Plan plan;
    Write tw;
    tw.knob = "resctrl_group";
    tw.id = KnobId::ResctrlGroup;
    tw.root = Root::Resctrl;
    tw.rel = "A/tasks";
    tw.value = "4242";
    plan.writes.push_back(tw);
    ResctrlLock held = ensure_plan_groups(plan, p, t.res, t.state, false);
    REQUIRE(plan.writes[0].status == Write::Planned);
    REQUIRE(t.has("A/tasks"));
    CHECK(held.held());
    std::string out;
    CHECK(cleanup_resctrl_groups({}, t.res, t.state, false, out) == 1);
    CHECK(out == "failed   resctrl: mount locked by another process (flock); groups not cleaned up\n");
    CHECK(t.has("A"));
    FsKernel k(t.root + "/cg", t.root + "/proc", t.res);
    apply_plan(plan, k);
    CHECK(plan.writes[0].status == Write::Applied);
    CHECK(t.get("A/tasks") == "4242");
    held.release();
    // After the write the group holds a task: kept; unused and empty, it goes.
    out.clear();
    CHECK(cleanup_resctrl_groups({}, t.res, t.state, false, out) == 0);
    CHECK(out.find("kept     resctrl group A") != std::string::npos);
    t.put("A/tasks", "");
    out.clear();
    CHECK(cleanup_resctrl_groups({}, t.res, t.state, false, out) == 0);
    CHECK(!t.has("A"));
    // Without a tasks write to protect (only the adjustment's rdt_class, joined by the runtime
    // later) no lock is handed over.
    Plan adj;
    adj.adjustment = {{"linux", {{"resources", {{"rdt_class", {{"value", "A"}}}}}}}};
    ResctrlLock none = ensure_plan_groups(adj, p, t.res, t.state, false);
    CHECK_FALSE(none.held());
    CHECK(t.has("A/schemata"));
}

// The same race through the event's real path (run_pipeline, an NRI v0.1 create): the test seam
// Options::before_writes runs a cleanup where a concurrent reconcile could act. The group
// survives and the container joins it.
TEST_CASE("resctrl: an event's group survives a reconcile cleanup between its check and its tasks write", "[resctrl][race]") {
    Tree t;
    const std::string policy = t.root + "/p.toml";
    {
        std::ofstream(policy) << "version = 1\n[settings]\ndefault_class = \"BE\"\n[resctrl.A]\nl3_percent = 50\n"
                                 "[classes.BE.container]\nresctrl_group = \"A\"\n";
    }
    mkdir((t.root + "/proc").c_str(), 0755);
    mkdir((t.root + "/proc/4242").c_str(), 0755);
    Options o;
    o.policy = policy;
    o.policy_from_flag = true;
    o.cgroup_root = t.root + "/cg";
    o.proc_root = t.root + "/proc";
    o.resctrl_root = t.res;
    o.sysfs_root = t.root + "/sys";
    o.state_dir = t.state;
    o.cache_dir = "";
    o.last_good_dir_set = true;
    o.last_good_dir = "";
    o.event_log = "";
    o.metrics_file = "";
    o.layout = Layout::V1;
    o.systemd_helper = "";
    std::string cleanup;
    int failures = -1;
    bool existed = false;
    o.before_writes = [&] {
        existed = t.has("A/tasks");
        failures = cleanup_resctrl_groups({}, t.res, t.state, false, cleanup);
    };
    const std::string req = R"({"version":"0.1","state":"create","id":"c1","sandboxID":"s1","pid":4242,)"
                            R"("spec":{"cgroupsPath":"/kubepods/besteffort/pod1/c1","annotations":{}}})";
    int code = -1;
    std::string res = run_pipeline(Mode::Invoke, o, req, code);
    CAPTURE(res, cleanup);
    CHECK(existed);
    CHECK(failures == 1);
    CHECK(cleanup.find("mount locked by another process") != std::string::npos);
    CHECK(t.has("A"));
    CHECK(t.get("A/tasks") == "4242");
    nlohmann::json r = nlohmann::json::parse(res);
    CHECK(r.value("error", "") == "");
    CHECK(r["metadata"].value("failed", "") == "");
}

// The native runtime joins the group of a CreateContainer answer's rdt_class after the answer,
// outside any lock of ours: there the cleanup's rule "never a group a policy in use names"
// protects it — provided the policy is still the one in use. A reconcile pass that read the
// policy before an edit which introduced the group would remove it; it asks, under the lock,
// whether its policies are still current, and removes nothing when not.
TEST_CASE("resctrl: a cleanup whose policy changed during the pass removes nothing; asked under the lock", "[resctrl][race]") {
    Tree t;
    REQUIRE(ensure_resctrl_group(pct("new", 50, -1), t.res, t.state, false).status == GroupOutcome::Ready);
    std::string out;
    bool under_lock = false;
    auto changed = [&] {
        int fd = open(t.res.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        under_lock = fd >= 0 && flock(fd, LOCK_EX | LOCK_NB) != 0 && errno == EWOULDBLOCK;
        if (fd >= 0) close(fd);
        return false;
    };
    CHECK(cleanup_resctrl_groups({}, t.res, t.state, false, out, changed) == 0);
    CHECK(under_lock);
    CHECK(t.has("new"));
    CHECK(out == "kept     resctrl groups: a policy changed during this pass; none removed (the next pass decides)\n");
    CHECK(created_resctrl_groups(t.state) == std::set<std::string>{"new"});
    out.clear();
    CHECK(cleanup_resctrl_groups({}, t.res, t.state, false, out, [] { return true; }) == 0);
    CHECK(!t.has("new"));
    CHECK(out.find("removed  resctrl group new") != std::string::npos);
}

TEST_CASE("policy: [resctrl.<name>] declarations are checked", "[resctrl][policy]") {
    const std::string head = "version = 1\n[settings]\ndefault_class = \"D\"\n[classes.D]\n[classes.D.container]\nresctrl_group = \"BE\"\n";
    PolicyCheck ok = check_policy_text(
        head + "[resctrl.BE]\nl3_percent = 30\nmb_percent = 100\n[resctrl.raw]\nl3 = \"L3:0=ff;1=ff\"\nmb = \"MB:0=50\"\nmanage = true\n", "p");
    REQUIRE(ok.errors() == 0);
    REQUIRE(ok.policy.resctrl_groups.size() == 2);
    CHECK(ok.policy.resctrl_groups.at("BE").l3_percent == 30);
    CHECK(ok.policy.resctrl_groups.at("raw").manage);
    // the JSON form keeps the groups
    Policy back = policy_from_json(policy_to_json(ok.policy));
    CHECK(back.resctrl_groups.at("raw").l3 == "L3:0=ff;1=ff");
    for (const char* bad : {"[resctrl.info]\nl3_percent = 30\n", "[resctrl.x]\nl3_percent = 0\n", "[resctrl.x]\nl3 = \"MB:0=1\"\n",
                            "[resctrl.x]\nl3 = \"L3:0=zz\"\n", "[resctrl.x]\nl3 = \"L3:0=f\"\nl3_percent = 3\n", "[resctrl.x]\nmanage = true\n",
                            "[resctrl.x]\nl3_percent = 30\nl3_round = \"sideways\"\n", "[resctrl.x]\nl3_pct = 30\n"}) {
        INFO(bad);
        CHECK(check_policy_text(head + bad, "p").errors() > 0);
    }
}
