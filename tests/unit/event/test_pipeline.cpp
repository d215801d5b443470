// The ordering rules of run_pipeline's stages (event/pipeline.cpp, "the stages of run_pipeline"),
// asserted on the real path of an event: the deadline's answer is the class's before the first
// write; with Options::deliver the sandbox memo and the record paths are stored before the answer
// and the records come after it; without it (plain invoke) the records are written and the
// deadline disarmed before run_pipeline returns (the caller then writes the answer).
#include <catch2/catch.hpp>

#include <fstream>
#include <sys/stat.h>
#include <sys/time.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "event/pipeline.hpp"
#include "records/state.hpp"

#include "../scratch.hpp"

using namespace nriqos;
using nlohmann::json;

namespace {

struct Scratch : unit::ScratchDir {
    const std::string root = path;
    Scratch() : ScratchDir("pipeline") {
        mkdir("cg");
        mkdir("proc");
        mkdir("resctrl");
    }
    /// Writes `name` and returns its path.
    std::string put(const std::string& name, const std::string& text) const {
        ScratchDir::put(name, text);
        return *this / name;
    }
    bool has(const std::string& rel) const {
        struct stat st {};
        return stat((root + "/" + rel).c_str(), &st) == 0;
    }
    Options options(const std::string& policy) const {
        Options o;
        o.policy = policy;
        o.policy_from_flag = true;
        o.cgroup_root = root + "/cg";
        o.proc_root = root + "/proc";
        o.resctrl_root = root + "/resctrl";
        o.sysfs_root = root + "/sys";
        o.state_dir = root + "/state";
        o.cache_dir = "";
        o.last_good_dir_set = true;
        o.last_good_dir = "";
        o.metrics_file = "";
        o.layout = Layout::V1;
        o.systemd_helper = "";
        o.kubelet_cpu_state = "";
        o.sandbox_keep_wide = true;
        return o;
    }
};

std::string slurp(const std::string& p) {
    std::ifstream in(p);
    REQUIRE(in.good());
    return std::string(std::istreambuf_iterator<char>(in), {});
}

bool timer_running() {
    struct itimerval it {};
    getitimer(ITIMER_REAL, &it);
    return it.it_value.tv_sec != 0 || it.it_value.tv_usec != 0;
}

// A policy whose own fail mode (open) differs from its only class's (closed), so the answer in
// force tells which stage prepared it.
const char* kPolicy =
    "version = 1\n[settings]\ndefault_class = \"BE\"\nfail = \"open\"\n"
    "[classes.BE]\nfail = \"closed\"\n[classes.BE.container]\ncpu_shares = 2\n";

const char* kRequest = R"({"version":"0.1","state":"create","id":"c1","sandboxID":"s1","pid":4242,)"
                       R"("spec":{"cgroupsPath":"/kubepods/besteffort/pod1/c1","annotations":{}}})";

}  // namespace

TEST_CASE("pipeline order: the class's deadline answer is in force before the first write", "[pipeline][order][deadline]") {
    Scratch t;
    Options o = t.options(t.put("p.toml", kPolicy));
    o.event_log = "";
    std::string at_writes;
    bool timer_at_writes = false;
    o.before_writes = [&] {
        at_writes = deadline_answer_in_force();
        timer_at_writes = timer_running();
    };
    arm_deadline(Mode::Invoke, 600000);  // never fires: the answer in force is what is checked
    int code = -1;
    std::string res = run_pipeline(Mode::Invoke, o, kRequest, code);
    CAPTURE(res, at_writes);
    CHECK(timer_at_writes);
    json a = json::parse(at_writes, nullptr, false);
    REQUIRE(a.is_object());
    // The class's fail mode (closed, the policy's is open) and its name: prepared by the class stage.
    CHECK(a.value("error", "").find("fail-closed") != std::string::npos);
    CHECK(a.value("error", "").find("(class BE)") != std::string::npos);
    CHECK(a["metadata"].value("class", "") == "BE");
    CHECK(json::parse(res)["metadata"].value("class", "") == "BE");
}

TEST_CASE("pipeline order: without deliver the records are written and the deadline disarmed when run_pipeline returns",
          "[pipeline][order][deadline]") {
    Scratch t;
    Options o = t.options(t.put("p.toml", kPolicy));
    o.event_log = t.root + "/events.log";
    arm_deadline(Mode::Invoke, 600000);
    REQUIRE(timer_running());
    REQUIRE_FALSE(deadline_answer_in_force().empty());
    int code = -1;
    std::string res = run_pipeline(Mode::Invoke, o, kRequest, code);
    CAPTURE(res);
    CHECK(code == 1);  // the class fails closed, and the scratch node has no cgroup for the write
    // The caller writes `res` after this: the record is already there, the deadline off.
    REQUIRE(t.has("events.log"));
    const std::string log = t.get("events.log");
    CHECK(log.find("\"id\":\"c1\"") != std::string::npos);
    CHECK(log.find("deadline exceeded") == std::string::npos);
    CHECK_FALSE(timer_running());
    CHECK(deadline_answer_in_force().empty());
}

TEST_CASE("pipeline order: the memo and the record paths are stored before a delivered answer, the records after it", "[pipeline][order][deliver]") {
    Scratch t;
    const std::string log = t.root + "/events.log";
    // The policy names its record paths: the relay reads them (<state>/sinks) right after the answer.
    Options o = t.options(t.put(
        "p.toml", "version = 1\n[settings]\ndefault_class = \"BE\"\nevent_log = \"" + log + "\"\n[classes.BE]\n[classes.BE.pod]\ncpu_shares = 2\n"));
    const std::string sandbox = "49cc8f6195d1c96955bb4efb5e5f6d04e196c5e4752e29550000000000000000";
    bool delivered = false, memo_before = false, sinks_before = false, log_before = true;
    std::string answer;
    o.deliver = [&](const std::string& out) {
        delivered = true;
        answer = out;
        StateDir st(o.state_dir);
        memo_before = st.load(sandbox).has_value();
        sinks_before = t.has("state/sinks");
        log_before = t.has("events.log") && !t.get("events.log").empty();
    };
    const std::string req = slurp(NRI_QOS_SRCDIR "/tests/fixtures/requests/nri-events/run-pod-sandbox.json");
    int code = -1;
    std::string res = run_pipeline(Mode::NriEval, o, req, code);
    arm_next_deadline(Mode::NriEval, 0, o);  // this process's next event starts afresh (answered = 0)
    CAPTURE(res, answer);
    REQUIRE(delivered);
    CHECK(answer == res);
    CHECK(memo_before);
    CHECK(sinks_before);
    CHECK_FALSE(log_before);
    // ... and the record came after the answer, before run_pipeline returned.
    REQUIRE(t.has("events.log"));
    CHECK(t.get("events.log").find("RunPodSandbox") != std::string::npos);
}
