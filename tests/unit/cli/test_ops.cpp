// Unit tests for the operator's sinks and commands: record formats (record.hpp), the metrics
// textfile (metrics.hpp), kernel read-back comparison (replay.hpp), rule trace (classify.hpp).
#include "../scratch.hpp"
#include <catch2/catch.hpp>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "event/classify.hpp"
#include "records/metrics.hpp"
#include "policy/policy.hpp"
#include "records/record.hpp"
#include "event/replay.hpp"
#include "os/sha256.hpp"
#include "records/state.hpp"
#include "os/kernel.hpp"
#include "facts/fact_state.hpp"

namespace {
std::string tmpdir() { return unit::make_scratch_dir("ops-test"); }
std::string slurp(const std::string& p) {
    std::ifstream f(p);
    std::stringstream s;
    s << f.rdbuf();
    return s.str();
}
void rmrf(const std::string& d) { unit::remove_tree(d); }
}  // namespace

TEST_CASE("record: logfmt quotes and escapes, JSON is one line", "[ops]") {
    nriqos::EventRecord r;
    r.time_ns = 1700000000123456789;
    r.source = "invoke";
    r.event = "create";
    r.ns = "default";
    r.pod = "p";
    r.id = "0123456789abcdef";
    r.cls = "BE";
    r.outcome = "partial";
    r.failed = "cpu.shares=2 (Invalid argument)";
    r.message = "a \"quoted\"\nline";
    std::string l = nriqos::record_logfmt(r);
    CHECK(l ==
          "nri-qos: time=2023-11-14T22:13:20.123456Z level=warn source=invoke event=create ns=default pod=p id=0123456789ab class=BE "
          "outcome=partial failed=\"cpu.shares=2 (Invalid argument)\" msg=\"a \\\"quoted\\\"\\nline\"\n");
    std::string j = nriqos::record_json(r);
    CHECK(j.find('\n') == j.size() - 1);
    auto p = nlohmann::json::parse(j);
    CHECK(p["id"] == "0123456789abcdef");
    CHECK(p["message"] == "a \"quoted\"\nline");
    CHECK(p["level"] == "warn");
}

TEST_CASE("record: event log rotates under its size bound and keeps every line across generations", "[ops]") {
    std::string d = tmpdir();
    std::string log = d + "/sub/events.log";
    std::string line(1000, 'x');
    line += "\n";
    for (int i = 0; i < 100; ++i) REQUIRE(nriqos::append_event_log(log, 20000, line) == "");
    auto size = [&](const std::string& p) { return slurp(p).size(); };
    CHECK(size(log) <= 20000 + line.size());
    CHECK(size(log + ".1") > 0);
    CHECK(size(log + ".2") > 0);
    CHECK(size(log) + size(log + ".1") + size(log + ".2") <= 3 * (20000 + line.size()));
    CHECK(size(log) % line.size() == 0);  // never a torn line
    rmrf(d);
}

TEST_CASE("metrics: counters accumulate across concurrent processes without losing increments", "[ops]") {
    std::string d = tmpdir();
    std::string prom = d + "/tf/nri_qos.prom";
    const int kProcs = 40, kEach = 10;
    std::vector<pid_t> kids;
    for (int p = 0; p < kProcs; ++p) {
        pid_t pid = fork();
        REQUIRE(pid >= 0);
        if (pid == 0) {
            for (int i = 0; i < kEach; ++i) {
                nriqos::MetricsEvent e;
                e.event = "create";
                e.cls = p % 2 ? "BE" : "LS";
                e.outcome = "ok";
                e.duration_us = 300 + i;
                if (i == 0) e.failed_knobs = {"cpu_shares"};
                if (!nriqos::update_metrics(prom, {e}, {"", "file", "abc"}, 10000).empty()) _exit(1);
            }
            _exit(0);
        }
        kids.push_back(pid);
    }
    int bad = 0;
    for (pid_t k : kids) {
        int st = 0;
        waitpid(k, &st, 0);
        bad += !(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    }
    CHECK(bad == 0);
    std::string text = slurp(prom);
    CHECK(text.find("nri_qos_events_total{event=\"create\",class=\"BE\",outcome=\"ok\"} 200\n") != std::string::npos);
    CHECK(text.find("nri_qos_events_total{event=\"create\",class=\"LS\",outcome=\"ok\"} 200\n") != std::string::npos);
    CHECK(text.find("nri_qos_knob_failures_total{knob=\"cpu_shares\"} 40\n") != std::string::npos);
    CHECK(text.find("nri_qos_event_duration_seconds_count 400\n") != std::string::npos);
    CHECK(text.find("nri_qos_event_duration_seconds_bucket{le=\"0.0005\"} 400\n") != std::string::npos);
    CHECK(text.find("nri_qos_policy_info{sha256=\"abc\",source=\"file\",path=\"\"} 1") != std::string::npos);
    rmrf(d);
}

TEST_CASE("event log: a line is appended even when the rotation lock is not obtained in time", "[ops]") {
    std::string d = tmpdir();
    std::string log = d + "/events.log";
    REQUIRE(nriqos::append_event_log(log, 0, "first\n") == "");
    int holder = open(log.c_str(), O_RDONLY | O_CLOEXEC);
    REQUIRE(holder >= 0);
    REQUIRE(flock(holder, LOCK_EX) == 0);
    CHECK(nriqos::append_event_log(log, 0, "second\n", 5) == "");
    close(holder);
    CHECK(slurp(log) == "first\nsecond\n");
    rmrf(d);
}

TEST_CASE("metrics: an event that does not get the lock in time is queued, not dropped", "[ops]") {
    std::string d = tmpdir();
    std::string prom = d + "/m.prom";
    REQUIRE(nriqos::update_metrics(prom, {}, {"", "file", "abc"}) == "");
    // Another updater holds the counters' lock (a burst of events on a busy node).
    int holder = open((d + "/.m.prom.state").c_str(), O_RDWR | O_CLOEXEC);
    REQUIRE(holder >= 0);
    REQUIRE(flock(holder, LOCK_EX) == 0);
    nriqos::MetricsEvent e{"create", "BE", "failed", {"cpu_shares"}, {}, 700, false};
    CHECK(nriqos::update_metrics(prom, {e}, {"", "file", "abc"}, 5) == "");  // queued: no error
    CHECK(slurp(prom).find("outcome=\"failed\"") == std::string::npos);  // not folded yet
    close(holder);
    // The next event folds the queued one (with its knob failure) into the counters.
    REQUIRE(nriqos::update_metrics(prom, {{"create", "LS", "ok", {}, {}, 300, false}}, {"", "file", "abc"}) == "");
    std::string text = slurp(prom);
    CHECK(text.find("nri_qos_events_total{event=\"create\",class=\"BE\",outcome=\"failed\"} 1\n") != std::string::npos);
    CHECK(text.find("nri_qos_events_total{event=\"create\",class=\"LS\",outcome=\"ok\"} 1\n") != std::string::npos);
    CHECK(text.find("nri_qos_knob_failures_total{knob=\"cpu_shares\"} 1\n") != std::string::npos);
    CHECK(text.find("nri_qos_event_duration_seconds_count 2\n") != std::string::npos);
    rmrf(d);
}

TEST_CASE("metrics: a reconcile pass has its own series, never a runtime event's (issue #25 §4)", "[ops][reconcile]") {
    std::string d = tmpdir();
    std::string prom = d + "/m.prom";
    REQUIRE(nriqos::update_metrics(prom, {{"create", "BE", "ok", {}, {}, 300, false}}, {"", "file", "abc"}) == "");
    // the runtime's last event, an hour ago
    std::string st = slurp(d + "/.m.prom.state");
    size_t t = st.find("\nT\t");
    REQUIRE(t != std::string::npos);
    st = st.substr(0, t) + "\nT\t1000" + st.substr(st.find('\n', t + 1));
    {
        FILE* f = fopen((d + "/.m.prom.state").c_str(), "w");
        REQUIRE(f);
        fputs(st.c_str(), f);
        fclose(f);
    }
    nriqos::ReconcilePass pass;
    pass.containers = 30;
    pass.drift_found = 2;
    pass.corrected_knobs = {"cpu_shares"};
    pass.failed_knobs = {"memory_limit"};
    pass.duration_us = 7000;
    pass.policy_broken = true;
    REQUIRE(nriqos::update_metrics(prom, {}, {"", "last-good", "abc"}, 500, &pass) == "");
    std::string text = slurp(prom);
    CHECK(text.find("nri_qos_last_event_timestamp_seconds 1000\n") != std::string::npos);  // not refreshed
    CHECK(text.find("nri_qos_event_duration_seconds_count 1\n") != std::string::npos);  // not observed
    CHECK(text.find("event=\"reconcile\"") == std::string::npos);  // not an event
    CHECK(text.find("nri_qos_policy_errors_total 0\n") != std::string::npos);
    CHECK(text.find("nri_qos_reconcile_passes_total 1\n") != std::string::npos);
    CHECK(text.find("nri_qos_reconcile_containers_total 30\n") != std::string::npos);
    CHECK(text.find("nri_qos_reconcile_drift_found_total 2\n") != std::string::npos);
    CHECK(text.find("nri_qos_reconcile_corrected_total 1\n") != std::string::npos);
    CHECK(text.find("nri_qos_drift_corrected_total{knob=\"cpu_shares\"} 1\n") != std::string::npos);
    CHECK(text.find("nri_qos_reconcile_knob_failures_total{knob=\"memory_limit\"} 1\n") != std::string::npos);
    CHECK(text.find("nri_qos_knob_failures_total{knob=\"memory_limit\"}") == std::string::npos);
    CHECK(text.find("nri_qos_reconcile_duration_seconds_bucket{le=\"0.01\"} 1\n") != std::string::npos);
    CHECK(text.find("nri_qos_reconcile_duration_seconds_count 1\n") != std::string::npos);
    CHECK(text.find("nri_qos_reconcile_policy_broken 1\n") != std::string::npos);
    // the next pass, queued behind a held lock, folds in later and clears the gauge
    int holder = open((d + "/.m.prom.state").c_str(), O_RDWR | O_CLOEXEC);
    REQUIRE(holder >= 0);
    REQUIRE(flock(holder, LOCK_EX) == 0);
    nriqos::ReconcilePass ok;
    ok.containers = 30;
    ok.corrected_knobs = {"cpu_shares", "cpu_quota_us"};
    ok.drift_found = 2;
    CHECK(nriqos::update_metrics(prom, {}, {}, 5, &ok) == "");
    close(holder);
    REQUIRE(nriqos::update_metrics(prom, {}, {}) == "");
    text = slurp(prom);
    CHECK(text.find("nri_qos_reconcile_passes_total 2\n") != std::string::npos);
    CHECK(text.find("nri_qos_reconcile_containers_total 60\n") != std::string::npos);
    CHECK(text.find("nri_qos_drift_corrected_total{knob=\"cpu_shares\"} 2\n") != std::string::npos);
    CHECK(text.find("nri_qos_drift_corrected_total{knob=\"cpu_quota_us\"} 1\n") != std::string::npos);
    CHECK(text.find("nri_qos_reconcile_policy_broken 0\n") != std::string::npos);
    CHECK(text.find("nri_qos_last_event_timestamp_seconds 1000\n") != std::string::npos);
    rmrf(d);
}

TEST_CASE("metrics: annotations the runtime does not pass, by key (issue #25 §1)", "[ops][not-passed]") {
    std::string d = tmpdir();
    std::string prom = d + "/m.prom";
    nriqos::MetricsEvent e{"create", "KOORD-BE", "ok", {}, {}, 300, false};
    e.not_passed = {"node.koordinator.sh/extended-resource-spec"};
    REQUIRE(nriqos::update_metrics(prom, {e, e}, {"", "file", "abc"}) == "");
    CHECK(slurp(prom).find("nri_qos_annotation_not_passed_total{key=\"node.koordinator.sh/extended-resource-spec\"} 2\n") != std::string::npos);
    rmrf(d);
}

TEST_CASE("metrics: relay failures by event and reason, also through the pending queue", "[ops][record]") {
    std::string d = tmpdir();
    std::string prom = d + "/m.prom";
    nriqos::MetricsEvent crash{"CreateContainer", "", "failed", {}, {}, 1500000, false};
    crash.relay_failure = "crash";
    REQUIRE(nriqos::update_metrics(prom, {crash}, {}) == "");
    int holder = open((d + "/.m.prom.state").c_str(), O_RDWR | O_CLOEXEC);
    REQUIRE(holder >= 0);
    REQUIRE(flock(holder, LOCK_EX) == 0);
    nriqos::MetricsEvent timeout{"CreateContainer", "", "refused", {}, {}, 1500000, false};
    timeout.relay_failure = "timeout";
    CHECK(nriqos::update_metrics(prom, {timeout}, {}, 5) == "");  // queued
    close(holder);
    REQUIRE(nriqos::update_metrics(prom, {crash}, {}) == "");
    std::string text = slurp(prom);
    CHECK(text.find("nri_qos_relay_failures_total{event=\"CreateContainer\",reason=\"crash\"} 2\n") != std::string::npos);
    CHECK(text.find("nri_qos_relay_failures_total{event=\"CreateContainer\",reason=\"timeout\"} 1\n") != std::string::npos);
    CHECK(text.find("nri_qos_events_total{event=\"CreateContainer\",class=\"none\",outcome=\"failed\"} 2\n") != std::string::npos);
    CHECK(text.find("nri_qos_events_total{event=\"CreateContainer\",class=\"none\",outcome=\"refused\"} 1\n") != std::string::npos);
    rmrf(d);
}

TEST_CASE("metrics: policy_info is the identity of the policy in force; broken files are counted", "[ops]") {
    std::string d = tmpdir();
    std::string prom = d + "/m.prom";
    const std::string good = nriqos::sha256_hex("abc"), builtin = nriqos::sha256_hex("builtin");
    REQUIRE(nriqos::update_metrics(prom, {}, {d + "/p.toml", "file", good}) == "");
    CHECK(slurp(prom).find("nri_qos_policy_info{sha256=\"" + good + "\",source=\"file\",path=\"" + d + "/p.toml\"} 1\n") != std::string::npos);
    CHECK(slurp(prom).find("nri_qos_policy_errors_total 0\n") != std::string::npos);
    // The file broke: the last good copy applies; one event, one policy error.
    REQUIRE(nriqos::update_metrics(prom, {{"create", "BE", "ok", {}, {}, -1, true}}, {d + "/p.toml", "last-good", good}) == "");
    CHECK(slurp(prom).find("nri_qos_policy_info{sha256=\"" + good + "\",source=\"last-good\",") != std::string::npos);
    CHECK(slurp(prom).find("source=\"file\"") == std::string::npos);  // one series: the policy in force now
    CHECK(slurp(prom).find("nri_qos_policy_errors_total 1\n") != std::string::npos);
    // An event recorded by a deadline handler with a broken policy counts too (pending line).
    { std::ofstream(d + "/.m.prom.pending") << nriqos::metrics_pending_line("create", "BE", "error", 1000000, true); }
    REQUIRE(nriqos::update_metrics(prom, {{"create", "", "ok", {}, {}, -1, true}}, {d + "/p.toml", "builtin", builtin}) == "");
    CHECK(slurp(prom).find("nri_qos_policy_errors_total 3\n") != std::string::npos);
    CHECK(slurp(prom).find("sha256=\"" + builtin + "\",source=\"builtin\"") != std::string::npos);
    // An event whose policy was never resolved (source "") leaves the identity as it was.
    REQUIRE(nriqos::update_metrics(prom, {{"unparsed", "", "error", {}, {}, -1, false}}, {}) == "");
    CHECK(slurp(prom).find("source=\"builtin\"") != std::string::npos);
    rmrf(d);
}

TEST_CASE("replay: kernel read-back comparison follows the kernel's formats", "[ops]") {
    using nriqos::kernel_value_matches;
    CHECK(kernel_value_matches("cpu/x/cpu.shares", "2", "2\n"));
    CHECK_FALSE(kernel_value_matches("cpu/x/cpu.shares", "2", "512\n"));
    CHECK(kernel_value_matches("x/cpu.max", "50000", "50000 100000\n"));
    CHECK(kernel_value_matches("x/cpu.max", "max 100000", "max 100000\n"));
    CHECK_FALSE(kernel_value_matches("x/cpu.max", "max", "50000 100000\n"));
    CHECK(kernel_value_matches("memory/x/memory.limit_in_bytes", "-1", "9223372036854771712\n"));
    CHECK(kernel_value_matches("memory/x/memory.limit_in_bytes", "60397977", "60395520\n"));  // page-rounded
    CHECK(kernel_value_matches("x/memory.high", "max", "max\n"));
    CHECK(kernel_value_matches("cpuset/x/cpuset.cpus", "0,1,2,3", "0-3\n"));
    CHECK(kernel_value_matches("BE/tasks", "123", "5\n123\n77\n"));
    CHECK_FALSE(kernel_value_matches("BE/tasks", "12", "5\n123\n"));
}

TEST_CASE("classify: rule_mismatch says why a rule does not match", "[ops]") {
    nriqos::Policy p = nriqos::parse_policy_toml(
        "version = 1\n[settings]\ndefault_class = \"LS\"\n[classes.LS]\n[classes.BE]\n"
        "[[rules]]\nname = \"ns\"\nclass = \"BE\"\nmatch.namespace = \"batch-*\"\n"
        "[[rules]]\nname = \"lbl\"\nclass = \"BE\"\nmatch.labels = { \"q\" = \"BE\" }\n",
        "p.toml");
    nriqos::Request r;
    r.pod_namespace = "default";
    r.labels["q"] = "LS";
    nriqos::Facts f{&r, nriqos::KubeQos::Burstable};
    CHECK(nriqos::rule_mismatch(p.rules[0], f) == "namespace \"default\" not in [batch-*]");
    CHECK(nriqos::rule_mismatch(p.rules[1], f) == "labels: q=\"LS\" does not match \"BE\"");
    r.labels["q"] = "BE";
    CHECK(nriqos::rule_mismatch(p.rules[1], f) == "");
}

TEST_CASE("metrics: the policy path is a label, never read", "[ops]") {
    // Regression: conf.policy = /dev/zero made the metrics hash the policy file forever
    // (tests/hostile.sh). The digest now comes with the policy in force (policy_store.hpp).
    std::string d = tmpdir();
    REQUIRE(nriqos::update_metrics(d + "/m.prom", {}, {"/dev/zero", "builtin", "x"}) == "");
    CHECK(slurp(d + "/m.prom").find("nri_qos_policy_info{sha256=\"x\",source=\"builtin\",path=\"/dev/zero\"} 1") != std::string::npos);
    rmrf(d);
}

TEST_CASE("metrics: the duration histogram prints its seconds as printf %g / %.6f did", "[ops]") {
    std::string d = tmpdir();
    std::vector<nriqos::MetricsEvent> evs;
    for (int64_t us : {1234567, 250, 999999, 1}) evs.push_back({"create", "LS", "ok", {}, {}, us, false});
    REQUIRE(nriqos::update_metrics(d + "/m.prom", evs, {"", "file", "abc"}) == "");
    std::string text = slurp(d + "/m.prom");
    char want[96];
    snprintf(want, sizeof want, "nri_qos_event_duration_seconds_sum %.6f\n", (1234567 + 250 + 999999 + 1) / 1e6);
    CHECK(text.find(want) != std::string::npos);
    for (int64_t b : nriqos::kDurationBucketsUs) {
        snprintf(want, sizeof want, "nri_qos_event_duration_seconds_bucket{le=\"%g\"} ", b / 1e6);
        CHECK(text.find(want) != std::string::npos);
    }
    CHECK(text.find("nri_qos_event_duration_seconds_bucket{le=\"0.00025\"} 2\n") != std::string::npos);
    CHECK(text.find("nri_qos_event_duration_seconds_bucket{le=\"1\"} 3\n") != std::string::npos);
    CHECK(text.find("nri_qos_event_duration_seconds_bucket{le=\"2.5\"} 4\n") != std::string::npos);
    rmrf(d);
}

// Issue 19 §2 "Records never block the answer": a FIFO, a device or a symlink at a record path is
// refused at once with a one-line reason (before: the event log's open blocked on a FIFO nobody
// reads, holding the event past its deadline with SIGALRM blocked; a symlink or FIFO planted at
// the predictable temporary name <file>.<pid>.tmp failed or blocked the write).
TEST_CASE("records: a FIFO, a device or a symlink is refused at once, never opened for writing", "[ops][records]") {
    std::string d = tmpdir();
    std::string fifo = d + "/events.fifo";
    REQUIRE(mkfifo(fifo.c_str(), 0600) == 0);
    pid_t pid = fork();  // a hang must not hang the test run
    REQUIRE(pid >= 0);
    if (pid == 0) {
        alarm(5);
        std::string e = nriqos::append_event_log(fifo, 0, "x\n", 5);
        _exit(e == "event log " + fifo + ": not a regular file (a FIFO without a reader)" ? 0 : 1);
    }
    int st = 0;
    REQUIRE(waitpid(pid, &st, 0) == pid);
    CHECK((WIFEXITED(st) && WEXITSTATUS(st) == 0));
    // A FIFO with a reader: the open succeeds, fstat refuses it; nothing is written into it.
    int rd = open(fifo.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    REQUIRE(rd >= 0);
    CHECK(nriqos::append_event_log(fifo, 0, "x\n", 5) == "event log " + fifo + ": not a regular file (a FIFO)");
    char b[4];
    CHECK(read(rd, b, sizeof b) <= 0);
    close(rd);
    CHECK(nriqos::append_event_log("/dev/null", 0, "x\n", 5) == "event log /dev/null: not a regular file (a character device)");
    // A symlink at the event log is not followed.
    std::string target = d + "/target.log", link = d + "/events.log";
    REQUIRE(symlink(target.c_str(), link.c_str()) == 0);
    CHECK(nriqos::append_event_log(link, 0, "x\n", 5) == "event log " + link + ": is a symlink (not followed)");
    struct stat tst;
    CHECK(stat(target.c_str(), &tst) != 0);
    // The metrics file: a FIFO there is refused and left in place (not renamed over).
    std::string mfifo = d + "/m.prom";
    REQUIRE(mkfifo(mfifo.c_str(), 0600) == 0);
    std::string e = nriqos::update_metrics(mfifo, {{"create", "LS", "ok", {}, {}, 300, false}}, {"", "file", "abc"}, 5);
    CHECK(e == "metrics: " + mfifo + ": not a regular file (a FIFO); this event is not counted");
    struct stat mst;
    REQUIRE(lstat(mfifo.c_str(), &mst) == 0);
    CHECK(S_ISFIFO(mst.st_mode));
    // Its counters file as a FIFO: refused, not read or written.
    std::string prom = d + "/n.prom", state = d + "/.n.prom.state";
    REQUIRE(mkfifo(state.c_str(), 0600) == 0);
    e = nriqos::update_metrics(prom, {{"create", "LS", "ok", {}, {}, 300, false}}, {"", "file", "abc"}, 5);
    CHECK(e == "metrics: " + state + ": not a regular file (a FIFO); this event is not counted");
    CHECK(e.find('\n') == std::string::npos);
    rmrf(d);
}

TEST_CASE("records: temporary files are new files (O_EXCL): a symlink at the old temporary name is never used", "[ops][records]") {
    std::string d = tmpdir();
    std::string victim = d + "/victim";
    std::string pid = std::to_string(getpid());
    // The names the writers used before (<dir>/.<file>.<pid>.tmp): a symlink there made them fail.
    REQUIRE(symlink(victim.c_str(), (d + "/.m.prom." + pid + ".tmp").c_str()) == 0);
    CHECK(nriqos::update_metrics(d + "/m.prom", {{"create", "LS", "ok", {}, {}, 300, false}}, {"", "file", "abc"}) == "");
    CHECK(slurp(d + "/m.prom").find("nri_qos_events_total{event=\"create\",class=\"LS\",outcome=\"ok\"} 1") != std::string::npos);
    std::string sd = d + "/state";
    REQUIRE(mkdir(sd.c_str(), 0700) == 0);
    REQUIRE(symlink(victim.c_str(), (sd + "/.sb1.json." + pid + ".tmp").c_str()) == 0);
    nriqos::StateDir st(sd);
    nriqos::Memo m;
    m.cls = "BE";
    CHECK(st.store("sb1", m) == "");
    REQUIRE(st.load("sb1"));
    CHECK(st.load("sb1")->cls == "BE");
    struct stat vst;
    CHECK(lstat(victim.c_str(), &vst) != 0);  // never created through a link
    // create_temp itself: a fresh regular file each time, never an existing name.
    std::string n1, n2, why;
    int f1 = nriqos::create_temp(-1, d + "/.x", 0600, n1, why);
    int f2 = nriqos::create_temp(-1, d + "/.x", 0600, n2, why);
    REQUIRE(f1 >= 0);
    REQUIRE(f2 >= 0);
    CHECK(n1 != n2);
    close(f1);
    close(f2);
    rmrf(d);
}
