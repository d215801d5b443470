// What kubelet granted after an update (model/request.hpp granted_resources; issue #30 §1):
// an update's unset fields (0, "") keep the current values, on every event that carries one.
#include <catch2/catch.hpp>

#include <string>

#include <nlohmann/json.hpp>

#include "model/request.hpp"

using nlohmann::json;
using namespace nriqos;

namespace {
json wrap(int64_t v) { return {{"value", v}}; }

/// A container's current resources as containerd holds them: 1 CPU of quota, 1 GiB, swap = limit.
json current() {
    return {{"cpu", {{"shares", wrap(1024)}, {"quota", wrap(100000)}, {"period", wrap(100000)}, {"cpus", "0-15"}}},
            {"memory", {{"limit", wrap(1 << 30)}, {"swap", wrap(1 << 30)}}}};
}

/// kubelet's static CPU manager update as containerd passes it to NRI: cpuset only, 0 elsewhere.
json cpuset_only() {
    return {{"cpu", {{"shares", wrap(0)}, {"quota", wrap(0)}, {"period", wrap(0)}, {"cpus", "2-3"}, {"mems", ""}}},
            {"memory", {{"limit", wrap(0)}, {"swap", wrap(0)}}}};
}

json container_event(const char* event, const json& update) {
    json e = {
        {"event", event},
        {"pod", {{"id", "p1"}, {"name", "web"}, {"namespace", "prod"}, {"linux", {{"cgroups_path", "/kubepods/podp1"}, {"resources", current()}}}}},
        {"container",
         {{"id", "c1"}, {"pod_sandbox_id", "p1"}, {"name", "app"}, {"linux", {{"cgroups_path", "/kubepods/podp1/c1"}, {"resources", current()}}}}}};
    if (!update.is_null()) e["linux_resources"] = update;
    return e;
}
}  // namespace

TEST_CASE("granted resources: an update's zeros keep the current values (containerd updateOCIResource)", "[request][trust]") {
    Resources cur;
    cur.cpu_shares = 1024;
    cur.cpu_quota = 100000;
    cur.cpu_period = 100000;
    cur.cpu_cpus = "0-15";
    cur.mem_limit = int64_t(1) << 30;
    cur.mem_swap = int64_t(1) << 30;
    Resources up;
    up.cpu_shares = 0;
    up.cpu_quota = 0;
    up.cpu_period = 0;
    up.cpu_cpus = "2-3";
    up.cpu_mems = "";
    up.mem_limit = 0;
    Resources g = granted_resources(cur, up);
    CHECK(g.cpu_shares == 1024);
    CHECK(g.cpu_quota == 100000);
    CHECK(g.cpu_period == 100000);
    CHECK(g.cpu_cpus == std::string("2-3"));
    CHECK_FALSE(g.cpu_mems);
    CHECK(g.mem_limit == int64_t(1) << 30);
    // a resize: the set fields win; a new limit takes the swap limit along
    up = Resources();
    up.cpu_quota = 200000;
    up.mem_limit = int64_t(2) << 30;
    g = granted_resources(cur, up);
    CHECK(g.cpu_quota == 200000);
    CHECK(g.cpu_shares == 1024);
    CHECK(g.mem_limit == int64_t(2) << 30);
    CHECK(g.mem_swap == int64_t(2) << 30);
    // -1 is a value (unlimited), not "unset"
    up = Resources();
    up.cpu_quota = -1;
    CHECK(granted_resources(cur, up).cpu_quota == -1);
    // nothing current: the update's set fields only
    g = granted_resources(Resources(), up);
    CHECK(g.cpu_quota == -1);
    CHECK_FALSE(g.cpu_shares);
}

TEST_CASE("granted resources: every event kind that carries an update reads the same grant", "[request][trust]") {
    // UpdateContainer: kubelet's cpuset-only update never reads as "no CFS quota"
    Request u = parse_nri_event(container_event("UpdateContainer", cpuset_only()).dump());
    CHECK(u.resources.cpu_quota == 100000);
    CHECK(u.resources.cpu_period == 100000);
    CHECK(u.resources.cpu_shares == 1024);
    CHECK(u.resources.mem_limit == int64_t(1) << 30);
    CHECK(u.resources.cpu_cpus == std::string("2-3"));
    // an update with no field set at all
    u = parse_nri_event(container_event("UpdateContainer", json{{"cpu", {{"quota", wrap(0)}}}}).dump());
    CHECK(u.resources.cpu_quota == 100000);
    CHECK(u.resources.cpu_cpus == std::string("0-15"));
    // CreateContainer / StartContainer / Synchronize carry the container's resources whole
    for (const char* ev : {"CreateContainer", "StartContainer", "Synchronize", "SynchronizeLate", "PostUpdateContainer"}) {
        CAPTURE(ev);
        Request r = parse_nri_event(container_event(ev, nullptr).dump());
        CHECK(r.resources.cpu_quota == 100000);
    }
    // UpdatePodSandbox (pod resize): the pod's current resources with the update's set fields
    json pe = {{"event", "UpdatePodSandbox"},
               {"pod", {{"id", "p1"}, {"linux", {{"cgroups_path", "/kubepods/podp1"}, {"resources", current()}}}}},
               {"linux_resources", {{"cpu", {{"quota", wrap(0)}, {"shares", wrap(2048)}}}}}};
    Request p = parse_nri_event(pe.dump());
    CHECK(p.is_sandbox);
    CHECK(p.resources.cpu_quota == 100000);
    CHECK(p.resources.cpu_shares == 2048);
}
