// In-process end-to-end tests of the native NRI relay (src/nri/relay.*): the test plays
// containerd on one end of a socketpair, run_relay() runs in a forked process on the other end
// (like a launched plugin on fd 3), and a small /bin/sh script plays the `nri-eval` child.
#include "../scratch.hpp"
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <cstring>
#include <deque>
#include <filesystem>
#include <map>
#include <fstream>
#include <functional>
#include <sstream>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "nri/eval_pipeline.hpp"
#include "nri/failure_record.hpp"
#include "nri/mux.hpp"
#include "nri/nri.pb.h"
#include "nri/relay.hpp"
#include "nri/relay_internal.hpp"
#include "nri/service.hpp"
#include "nri/sync.hpp"
#include "nri/ttrpc.hpp"
#include "event/pipeline.hpp"
#include "model/request.hpp"
#include "policy/policy_cache.hpp"
#include "policy/policy_store.hpp"
#include "os/sandbox.hpp"

using nlohmann::json;
namespace pb = ::nri::pkg::api::v1alpha1;

namespace {

int64_t mono_ms() {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return int64_t(ts.tv_sec) * 1000 + ts.tv_nsec / 1000000;
}

std::string slurp(const std::string& path) {
    std::ifstream f(path);
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
}

// Temporary directory for the fake child's traces; removed at scope end (tests/unit/scratch.hpp).
struct TempDir : unit::ScratchDir {
    TempDir() : ScratchDir("relay-test") {}
};

// Fake `nri-eval`: records stdin/argv, behaves according to the pod label "mode".
std::string fake_child_script(const std::string& dir) {
    return "in=$(cat); printf '%s' \"$in\" > " + dir + "/stdin.json; echo \"$0 $*\" > " + dir +
           "/argv;\n"
           "case \"$in\" in\n"
           "  *'\"mode\":\"hang\"'*) echo $$ > " +
           dir +
           "/hang.pid; exec sleep 30;;\n"
           "  *'\"mode\":\"garbage\"'*) echo 'this is not json'; exit 0;;\n"
           "  *'\"mode\":\"crash\"'*) kill -SEGV $$;;\n"
           "  *'\"mode\":\"error\"'*) printf '{\"error\":\"refused by test policy\"}';;\n"
           "  *'\"mode\":\"closed\"'*) printf '{\"error\":\"\",\"on_child_failure\":\"closed\"}';;\n"
           "  *'\"mode\":\"open\"'*) printf '{\"error\":\"\",\"on_child_failure\":\"open\"}';;\n"
           // what `nri-eval` prints when its own deadline fires (src/event/pipeline.cpp arm_deadline)
           "  *'\"mode\":\"deadline\"'*) printf '{\"adjustment\":null,\"deadline\":true,\"error\":\"\",\"metadata\":"
           "{\"warning\":\"deadline exceeded\"},\"on_child_failure\":\"open\",\"update\":null}';;\n"
           "  *'\"mode\":\"badadj\"'*) printf '{\"adjustment\":{\"linux\":{\"resources\":{\"cpu\":{\"shares\":7}}}}}';;\n"
           "  *'\"container\":'*'\"event\":\"Synchronize\"'*) printf '{\"update\":{\"cpu\":{\"shares\":{\"value\":4}}}}';;\n"
           "  *'\"event\":\"UpdateContainer\"'*) printf '{\"update\":{\"cpu\":{\"shares\":{\"value\":4}},\"unified\":{\"memory.high\":\"1000\"}}}';;\n"
           "  *'\"event\":\"CreateContainer\"'*) printf '{\"error\":\"\",\"metadata\":{\"class\":\"be\"},\"adjustment\":"
           "{\"annotations\":{\"nri-qos/class\":\"be\"},\"linux\":{\"resources\":{\"cpu\":{\"shares\":{\"value\":2}},"
           "\"memory\":{\"limit\":{\"value\":\"67108864\"}}},\"oom_score_adj\":{\"value\":1000}}}}';;\n"
           "  *) printf '{\"error\":\"\"}';;\n"
           "esac\n";
}

// The test's side of the trunk: a minimal "containerd".
class FakeRuntime {
public:
    explicit FakeRuntime(nriqos::nri::RelayOptions opts, const std::string& log_path = "") {
        int sv[2];
        REQUIRE(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0);
        pid_ = fork();
        REQUIRE(pid_ >= 0);
        if (pid_ == 0) {
            close(sv[0]);
            if (!log_path.empty()) {
                int fd = open(log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
                if (fd >= 0) dup2(fd, 2);
            }
            int fd = dup(sv[1]);  // like containerd's ExtraFiles: the plugin's fd is not close-on-exec
            opts.fd = fd;
            _exit(nriqos::nri::run_relay(opts));
        }
        close(sv[1]);
        fd_ = sv[0];
    }
    // The runtime's end of a connection the plugin made itself (external plugin, nri.sock).
    explicit FakeRuntime(int accepted_fd) : fd_(accepted_fd) {}
    // Launch an nri-qos binary the way containerd does: trunk on fd 3, NRI_PLUGIN_* env.
    explicit FakeRuntime(const std::vector<std::string>& exec_argv) {
        int sv[2];
        REQUIRE(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0);
        std::vector<char*> argv;
        for (const auto& a : exec_argv) argv.push_back(const_cast<char*>(a.c_str()));
        argv.push_back(nullptr);
        pid_ = fork();
        REQUIRE(pid_ >= 0);
        if (pid_ == 0) {
            dup2(sv[1], 3);  // dup2 clears close-on-exec
            int null = open("/dev/null", O_RDWR);
            dup2(null, 0);
            dup2(null, 1);
            char* envp[] = {const_cast<char*>("NRI_PLUGIN_NAME=nri-qos"), const_cast<char*>("NRI_PLUGIN_IDX=10"),
                            const_cast<char*>("NRI_PLUGIN_SOCKET=3"), nullptr};
            execve(argv[0], argv.data(), envp);
            _exit(127);
        }
        close(sv[1]);
        fd_ = sv[0];
    }

    ~FakeRuntime() {
        if (fd_ >= 0) close(fd_);
        if (pid_ > 0 && !reaped_) {
            kill(pid_, SIGKILL);
            waitpid(pid_, nullptr, 0);
        }
    }

    pid_t pid() const { return pid_; }

    void send_raw(const std::string& bytes) {
        size_t off = 0;
        while (off < bytes.size()) {
            ssize_t n = write(fd_, bytes.data() + off, bytes.size() - off);
            REQUIRE(n > 0);
            off += size_t(n);
        }
    }

    void request(uint32_t stream, const std::string& method, const std::string& payload, int64_t timeout_nano = 2000000000,
                 const std::string& service = nriqos::nri::kPluginService, size_t chunk = nriqos::nri::kMuxSendChunk) {
        std::string out;
        nriqos::nri::mux_encode(
            nriqos::nri::kPluginServiceConn,
            nriqos::nri::ttrpc_encode(stream, nriqos::nri::kTtrpcRequest, 0, nriqos::nri::encode_request(service, method, payload, timeout_nano)),
            out, chunk);
        send_raw(out);
    }

    // Next ttrpc message on `conn`, waiting at most timeout_ms. False on timeout or EOF.
    bool next(uint32_t conn, nriqos::nri::TtrpcMessage& m, int timeout_ms = 3000) {
        int64_t end = mono_ms() + timeout_ms;
        for (;;) {
            for (auto it = inbox_.begin(); it != inbox_.end(); ++it) {
                if (it->first == conn) {
                    m = std::move(it->second);
                    inbox_.erase(it);
                    return true;
                }
            }
            int64_t left = end - mono_ms();
            if (left <= 0 || eof_) return false;
            struct pollfd p = {fd_, POLLIN, 0};
            if (poll(&p, 1, int(left)) <= 0) continue;
            char buf[8192];
            ssize_t n = read(fd_, buf, sizeof buf);
            if (n <= 0) {
                eof_ = true;
                continue;
            }
            REQUIRE(mux_.feed(buf, size_t(n)));
            for (uint32_t c = 1; c <= 2; ++c) {
                nriqos::nri::TtrpcMessage x;
                while (conns_[c - 1].next(x)) inbox_.emplace_back(c, std::move(x));
            }
        }
    }

    // Reply on conn 1 for `stream`; returns the decoded envelope.
    nriqos::nri::ResponseEnvelope reply(uint32_t stream, int timeout_ms = 3000) {
        nriqos::nri::TtrpcMessage m;
        REQUIRE(next(nriqos::nri::kPluginServiceConn, m, timeout_ms));
        REQUIRE(m.type == nriqos::nri::kTtrpcResponse);
        REQUIRE(m.flags == 0);
        REQUIRE(m.stream_id == stream);
        nriqos::nri::ResponseEnvelope r;
        REQUIRE(nriqos::nri::decode_response(m.payload, r));
        return r;
    }

    // Answer RegisterPlugin and run Configure; returns the subscribed event mask.
    int handshake(const std::string& config = "", const std::string& version = "1.7.24~ds1", const std::string& nri_version = "",
                  int64_t request_timeout_ms = 0) {
        nriqos::nri::TtrpcMessage m;
        REQUIRE(next(nriqos::nri::kRuntimeServiceConn, m));
        REQUIRE(m.type == nriqos::nri::kTtrpcRequest);
        REQUIRE(m.stream_id == 1);
        std::string out;
        nriqos::nri::mux_encode(nriqos::nri::kRuntimeServiceConn, nriqos::nri::ttrpc_encode(1, nriqos::nri::kTtrpcResponse, 0, ""), out);
        send_raw(out);
        pb::ConfigureRequest cfg;
        cfg.set_config(config);
        cfg.set_runtime_name("containerd");
        cfg.set_runtime_version(version);
        if (!nri_version.empty()) cfg.set_nri_version(nri_version);
        if (request_timeout_ms > 0) cfg.set_request_timeout(request_timeout_ms);
        request(1, "Configure", cfg.SerializeAsString(), 1999972404);
        nriqos::nri::ResponseEnvelope r = reply(1);
        REQUIRE(r.code == 0);
        pb::ConfigureResponse cr;
        REQUIRE(cr.ParseFromString(r.payload));
        return cr.events();
    }

    // Close our end; wait for the relay to exit; returns its exit status (or -1 on timeout).
    int close_and_wait(int timeout_ms = 3000) {
        close(fd_);
        fd_ = -1;
        return wait_exit(timeout_ms);
    }

    int wait_exit(int timeout_ms) {
        int64_t end = mono_ms() + timeout_ms;
        while (mono_ms() < end) {
            int st = 0;
            pid_t r = waitpid(pid_, &st, WNOHANG);
            if (r == pid_) {
                reaped_ = true;
                return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
            }
            usleep(5000);
        }
        return -1;
    }

private:
    pid_t pid_ = -1;
    int fd_ = -1;
    bool reaped_ = false;
    bool eof_ = false;
    nriqos::nri::TtrpcReassembler conns_[2];
    nriqos::nri::MuxDecoder mux_{[this](uint32_t c, const char* d, size_t n) { conns_[c - 1].append(d, n); }};
    std::deque<std::pair<uint32_t, nriqos::nri::TtrpcMessage>> inbox_;
};

pb::PodSandbox make_pod(const std::string& mode) {
    pb::PodSandbox p;
    p.set_id("sb-" + mode);
    p.set_name("pod-" + mode);
    p.set_uid("uid-" + mode);
    p.set_namespace_("default");
    if (!mode.empty()) (*p.mutable_labels())["mode"] = mode;
    p.mutable_linux()->set_cgroup_parent("/kubepods/besteffort/pod-" + mode);
    return p;
}

std::string create_request(const std::string& mode) {
    pb::CreateContainerRequest req;
    *req.mutable_pod() = make_pod(mode);
    auto* c = req.mutable_container();
    c->set_id("ctr-" + mode);
    c->set_pod_sandbox_id("sb-" + mode);
    c->set_name("app");
    c->mutable_linux()->mutable_resources()->mutable_cpu()->mutable_shares()->set_value(512);
    return req.SerializeAsString();
}

void put_file(const std::string& path, const std::string& text) {
    std::ofstream f(path, std::ios::trunc);
    f << text;
}

// Fake in-process evaluator (fork mode): the same behaviours as fake_child_script, run in the
// relay's forked/cloned spare. prepare() records the flags, detach() that it ran.
nriqos::nri::InProcessEval fake_inproc(const std::string& dir) {
    nriqos::nri::InProcessEval e;
    e.prepare = [dir](const std::vector<std::string>& flags, bool zygote) -> std::string {
        std::string line;
        for (const auto& f : flags) line += (line.empty() ? "" : " ") + f;
        put_file(dir + (zygote ? "/zygote.flags" : "/spare.flags"), line + "\n");
        put_file(dir + (zygote ? "/zygote.pid" : "/forked.pid"), std::to_string(getpid()));
        return "";
    };
    e.detach = [dir]() -> std::string {
        put_file(dir + "/detached.pid", std::to_string(getpid()));
        return "";
    };
    e.record = [dir](const std::vector<std::string>&, const std::string& msg) -> int {
        // One line per relay-level failure, written by the keeper's recorder process.
        int fd = open((dir + "/records").c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
        std::string line = msg + "\n";
        ssize_t w = fd >= 0 ? write(fd, line.data(), line.size()) : -1;
        if (fd >= 0) close(fd);
        put_file(dir + "/recorder.comm", slurp("/proc/self/comm"));
        return w == ssize_t(line.size()) ? 0 : 1;
    };
    e.evaluate = [dir](int budget_ms) -> int {
        std::string in;
        char buf[65536];
        ssize_t n;
        while ((n = read(0, buf, sizeof buf)) > 0) in.append(buf, size_t(n));
        put_file(dir + "/stdin.json", in);
        put_file(dir + "/budget", std::to_string(budget_ms));
        put_file(dir + "/eval.pid", std::to_string(getpid()));
        auto has = [&in](const char* k) { return in.find(k) != std::string::npos; };
        std::string out;
        if (has("\"mode\":\"hang\"")) {
            put_file(dir + "/hang.pid", std::to_string(getpid()));
            for (;;) sleep(30);  // spins where the sandbox refuses nanosleep; killed at the deadline
        } else if (has("\"mode\":\"garbage\"")) {
            out = "this is not json\n";
        } else if (has("\"mode\":\"crash\"")) {
            kill(getpid(), SIGSEGV);  // (raise() needs the thread id, stale in a cloned spare)
            pause();
        } else if (has("\"mode\":\"error\"")) {
            out = "{\"error\":\"refused by test policy\"}";
        } else if (has("\"mode\":\"closed\"")) {
            out = "{\"error\":\"\",\"on_child_failure\":\"closed\"}";
        } else if (has("\"mode\":\"open\"")) {
            out = "{\"error\":\"\",\"on_child_failure\":\"open\"}";
        } else if (has("\"mode\":\"deadline\"")) {
            out =
                "{\"adjustment\":null,\"deadline\":true,\"error\":\"\",\"metadata\":{\"warning\":\"deadline exceeded\"},"
                "\"on_child_failure\":\"open\",\"update\":null}";
        } else if (has("\"mode\":\"badadj\"")) {
            out = "{\"adjustment\":{\"linux\":{\"resources\":{\"cpu\":{\"shares\":7}}}}}";
        } else if (has("\"mode\":\"slowrec\"") || has("\"mode\":\"cut74\"")) {
            // The real evaluator's order (pipeline.hpp Options::deliver): the answer, its end (EOF),
            // then the records — here records that never end (slowrec: killed at the relay's deadline)
            // or cut by the evaluator's own deadline (cut74: exit status kExitRecordsCut).
            out = "{\"error\":\"\",\"adjustment\":{\"annotations\":{\"answered\":\"early\"}}}";
            ssize_t w = write(1, out.data(), out.size());
            (void)w;
            dup3(2, 1, 0);
            put_file(dir + "/answered.pid", std::to_string(getpid()));
            if (has("\"mode\":\"cut74\"")) return nriqos::kExitRecordsCut;
            for (;;) sleep(30);
        } else if (has("\"mode\":\"exit3\"")) {  // a complete answer, then a bad exit: the answer counts
            out = "{\"error\":\"\",\"adjustment\":{\"annotations\":{\"after\":\"exit3\"}}}";
            ssize_t w = write(1, out.data(), out.size());
            (void)w;
            return 3;
        } else if (has("\"event\":\"Synchronize\"") && has("\"container\":")) {
            out = "{\"update\":{\"cpu\":{\"shares\":{\"value\":4}}}}";
        } else if (has("\"event\":\"UpdateContainer\"")) {
            out = "{\"update\":{\"cpu\":{\"shares\":{\"value\":4}},\"unified\":{\"memory.high\":\"1000\"}}}";
        } else if (has("\"event\":\"CreateContainer\"")) {
            out =
                "{\"error\":\"\",\"metadata\":{\"class\":\"be\"},\"adjustment\":{\"annotations\":{\"nri-qos/class\":\"be\"},"
                "\"linux\":{\"resources\":{\"cpu\":{\"shares\":{\"value\":2}},\"memory\":{\"limit\":{\"value\":\"67108864\"}}},"
                "\"oom_score_adj\":{\"value\":1000}}}}";
        } else {
            out = "{\"error\":\"\"}";
        }
        size_t off = 0;
        while (off < out.size()) {
            ssize_t w = write(1, out.data() + off, out.size() - off);
            if (w <= 0) break;
            off += size_t(w);
        }
        return 0;
    };
    return e;
}

// Relay options with the fake child: exec'd /bin/sh script, or (fork) the fake in-process
// evaluator in forked spares.
nriqos::nri::RelayOptions child_opts(const std::string& dir, int deadline_ms = 1500, bool fork_mode = false) {
    nriqos::nri::RelayOptions o;
    o.plugin_name = "nri-qos";
    o.plugin_idx = "10";
    o.child_argv = {"/bin/sh", "-c", fake_child_script(dir)};
    if (fork_mode) o.inproc = fake_inproc(dir);
    o.child_deadline_ms = deadline_ms;
    return o;
}

bool process_gone(pid_t pid) {
    std::string stat = slurp("/proc/" + std::to_string(pid) + "/stat");
    return stat.empty();
}

}  // namespace

TEST_CASE("relay: RegisterPlugin is the first thing on the wire", "[nri][relay]") {
    TempDir t;
    nriqos::nri::RelayOptions o = child_opts(t.path);
    o.plugin_name = "qos-test";
    o.plugin_idx = "42";
    FakeRuntime rt(o);
    nriqos::nri::TtrpcMessage m;
    REQUIRE(rt.next(nriqos::nri::kRuntimeServiceConn, m));
    CHECK(m.type == nriqos::nri::kTtrpcRequest);
    CHECK(m.stream_id == 1);
    nriqos::nri::RequestEnvelope req;
    REQUIRE(nriqos::nri::decode_request(m.payload, req));
    CHECK(req.service == "nri.pkg.api.v1alpha1.Runtime");
    CHECK(req.method == "RegisterPlugin");
    pb::RegisterPluginRequest reg;
    REQUIRE(reg.ParseFromString(req.payload));
    CHECK(reg.plugin_name() == "qos-test");
    CHECK(reg.plugin_idx() == "42");
    // NRI_version (field 3, NRI v0.12): the protocol this build speaks; containerd 2.3 logs
    // "(with NRI version unknown)" without it. Old code: empty.
    CHECK(reg.nri_version() == "v0.12.0");
    CHECK(rt.close_and_wait() == 0);
}

TEST_CASE("relay: Configure subscribes exactly the handled events; bits >= 0x800 only for NRI v0.10+", "[nri][relay]") {
    TempDir t;
    // RunPodSandbox(1) RemovePodSandbox(3) CreateContainer(4) StartContainer(6) UpdateContainer(8)
    // PostUpdateContainer(9): bit = 1 << (event - 1); UpdatePodSandbox(12) = 0x800.
    struct Case {
        const char* version;
        const char* nri;
        int mask;
    } cases[] = {
        {"1.7.24~ds1", "", 0x5ad},  // NRI v0.6: 0x800 would fail Configure (fatal for containerd)
        {"1.7.26", "", 0x5ad},  // v0.8
        {"2.1.9~ds1", "", 0x5ad},  // v0.8
        {"v2.2.0", "", 0xdad},  // v0.10: UpdatePodSandbox
        {"2.3.0", "v0.12.0", 0xdad}, {"9.9", "v0.9.0", 0x5ad},  // NRI_version wins over the runtime's version
        {"1.9.0", "", 0x5ad},  // unknown containerd 1.x after 1.7: v0.8
    };
    for (const auto& c : cases) {
        CAPTURE(c.version, c.nri);
        FakeRuntime rt(child_opts(t.path));
        CHECK(rt.handshake("", c.version, c.nri) == c.mask);
        CHECK(rt.close_and_wait() == 0);
    }
    FakeRuntime other(child_opts(t.path));  // another runtime (iSulad, CRI-O): the oldest NRI
    int mask = 0;
    {
        nriqos::nri::TtrpcMessage m;
        REQUIRE(other.next(nriqos::nri::kRuntimeServiceConn, m));
        pb::ConfigureRequest cfg;
        cfg.set_runtime_name("iSulad");
        cfg.set_runtime_version("2.2.0");
        other.request(1, "Configure", cfg.SerializeAsString());
        nriqos::nri::ResponseEnvelope r = other.reply(1);
        pb::ConfigureResponse cr;
        REQUIRE(cr.ParseFromString(r.payload));
        mask = cr.events();
    }
    CHECK(mask == 0x5ad);
    CHECK(other.close_and_wait() == 0);
}

TEST_CASE("relay: the NRI minor a runtime speaks, from NRI_version or containerd's go.mod", "[nri][relay]") {
    // containerd tags' go.mod (github.com/containerd/nri vX.Y): 1.7.14-1.7.25 v0.6 (1.7.0-1.7.13:
    // v0.3/v0.4, taken as the oldest the evaluator knows, 6), 1.7.26 v0.8, 2.0/2.1 v0.8, 2.2.0
    // v0.10, 2.2.1-2.2.7 v0.11, 2.3.x v0.12. It was 10 for every 2.2.x until 2026-11-29.
    struct Case {
        const char* name;
        const char* version;
        const char* nri;
        int minor;
    } cases[] = {
        {"containerd", "v1.7.0", "", 6},    {"containerd", "1.7.13", "", 6},
        {"containerd", "1.7.14", "", 6},    {"containerd", "1.7.24~ds1", "", 6},
        {"containerd", "1.7.26", "", 8},    {"containerd", "2.0.0", "", 8},
        {"containerd", "2.1.9~ds1", "", 8}, {"containerd", "v2.2.0", "", 10},
        {"containerd", "v2.2.1", "", 11},   {"containerd", "2.2.7", "", 11},
        {"containerd", "2.3.4", "", 12},    {"containerd", "2.3.4", "v0.12.0", 12},
        {"containerd", "9.9", "v0.9.0", 9}, {"containerd", "garbage", "", 6},
        {"iSulad", "2.2.0", "", 6},         {"cri-o", "1.31", "", 6},
    };
    for (const auto& c : cases) {
        CAPTURE(c.name, c.version, c.nri);
        CHECK(nriqos::nri::runtime_nri_minor(c.name, c.version, c.nri) == c.minor);
    }
}

TEST_CASE("relay: CreateContainer is evaluated by the child and adjusted", "[nri][relay]") {
    TempDir t;
    FakeRuntime rt(child_opts(t.path), t.path + "/relay.log");
    rt.handshake("{\"policy\": \"/etc/nri/test-policy.toml\", \"debug\": true}\n");

    rt.request(3, "CreateContainer", create_request(""));
    nriqos::nri::ResponseEnvelope r = rt.reply(3);
    REQUIRE(r.code == 0);
    pb::CreateContainerResponse rsp;
    REQUIRE(rsp.ParseFromString(r.payload));
    REQUIRE(rsp.has_adjust());
    CHECK(rsp.adjust().annotations().at("nri-qos/class") == "be");
    CHECK(rsp.adjust().linux().resources().cpu().shares().value() == 2);
    CHECK(rsp.adjust().linux().resources().memory().limit().value() == 67108864);
    CHECK(rsp.adjust().linux().oom_score_adj().value() == 1000);
    CHECK(rsp.update_size() == 0);

    // what the child saw on stdin
    json in = json::parse(slurp(t.path + "/stdin.json"));
    CHECK(in["event"] == "CreateContainer");
    CHECK(in["runtime"] == json({{"name", "containerd"}, {"version", "1.7.24~ds1"}}));
    CHECK(in["pod"]["id"] == "sb-");
    CHECK(in["pod"]["namespace"] == "default");
    CHECK(in["pod"]["linux"]["cgroup_parent"] == "/kubepods/besteffort/pod-");
    CHECK(in["container"]["id"] == "ctr-");
    CHECK(in["container"]["linux"]["resources"]["cpu"]["shares"]["value"] == 512);
    CHECK_FALSE(in.contains("linux_resources"));
    // argv: plugin config keys became flags, then the child's own deadline
    std::string argv = slurp(t.path + "/argv");
    CHECK_THAT(argv, Catch::StartsWith("--policy /etc/nri/test-policy.toml --debug --event-deadline-ms "));
    int own = std::atoi(argv.substr(argv.rfind(' ') + 1).c_str());
    CHECK(own > 1000);
    CHECK(own <= 1400);
    CHECK(rt.close_and_wait() == 0);
}

TEST_CASE("relay: command-line flags win over the plugin config", "[nri][relay]") {
    TempDir t;
    nriqos::nri::RelayOptions o = child_opts(t.path);
    o.child_argv.push_back("--policy=/cli.toml");  // becomes $0 of the sh script
    o.deadline_flag = "";
    FakeRuntime rt(o);
    rt.handshake("{\"policy\": \"/conf.toml\", \"state_dir\": \"/run/x\", \"bogus\": 1}");
    rt.request(3, "CreateContainer", create_request(""));
    CHECK(rt.reply(3).code == 0);
    CHECK(slurp(t.path + "/argv") == "--policy=/cli.toml --state-dir /run/x\n");
    CHECK(rt.close_and_wait() == 0);
}

TEST_CASE("relay: plugin config log_file receives the relay's log", "[nri][relay]") {
    TempDir t;
    FakeRuntime rt(child_opts(t.path));
    rt.handshake("{\"log_file\": \"" + t.path + "/from-config.log\"}");
    rt.request(3, "CreateContainer", create_request("garbage"));
    CHECK(rt.reply(3).code == 0);
    CHECK(rt.close_and_wait() == 0);
    std::string log = slurp(t.path + "/from-config.log");
    CHECK_THAT(log, Catch::Contains("CreateContainer default/pod-garbage/app: evaluation failed: child output is "
                                    "not a JSON object: \"this is not json.\"; failing open"));
    // log_file is not a child flag; the child's budget is the remaining time (≤ 1400 ms here)
    std::string argv = slurp(t.path + "/argv");
    REQUIRE_THAT(argv, Catch::StartsWith("--event-deadline-ms "));
    int budget = std::stoi(argv.substr(20));
    CHECK(budget > 1000);
    CHECK(budget <= 1400);
}

TEST_CASE("relay: child errors, hangs, garbage and crashes", "[nri][relay]") {
    const bool fork_mode = GENERATE(false, true);
    CAPTURE(fork_mode);
    TempDir t;
    FakeRuntime rt(child_opts(t.path, 600, fork_mode), t.path + "/relay.log");
    rt.handshake();
    uint32_t s = 1;

    SECTION("error from the policy -> status 2 with its message, relay stays") {
        rt.request(s += 2, "CreateContainer", create_request("error"));
        nriqos::nri::ResponseEnvelope r = rt.reply(s);
        CHECK(r.code == 2);
        CHECK(r.message == "refused by test policy");
        CHECK(r.payload.empty());
    }
    SECTION("hanging child is killed at the deadline; fail open; relay keeps serving") {
        int64_t t0 = mono_ms();
        rt.request(s += 2, "CreateContainer", create_request("hang"));
        nriqos::nri::ResponseEnvelope r = rt.reply(s, 3000);
        int64_t took = mono_ms() - t0;
        CHECK(r.code == 0);
        CHECK(r.payload.empty());  // empty CreateContainerResponse
        CHECK(took >= 550);
        CHECK(took < 1200);
        pid_t hung = std::atoi(slurp(t.path + "/hang.pid").c_str());
        REQUIRE(hung > 0);
        bool gone = false;
        for (int i = 0; i < 100 && !gone; ++i) {
            gone = process_gone(hung);  // killed AND reaped by the relay (no zombie)
            if (!gone) usleep(10000);
        }
        CHECK(gone);
        rt.request(s += 2, "CreateContainer", create_request(""));
        nriqos::nri::ResponseEnvelope r2 = rt.reply(s);
        CHECK(r2.code == 0);
        pb::CreateContainerResponse rsp;
        REQUIRE(rsp.ParseFromString(r2.payload));
        CHECK(rsp.adjust().linux().resources().cpu().shares().value() == 2);
    }
    SECTION("request deadline (timeout_nano) caps the child's deadline") {
        int64_t t0 = mono_ms();
        rt.request(s += 2, "CreateContainer", create_request("hang"), 500000000);  // 500 ms
        CHECK(rt.reply(s).code == 0);
        CHECK(mono_ms() - t0 < 500);  // 500 - 250 ms reply margin = 250 ms; answered before the runtime gives up
    }
    SECTION("garbage output -> fail open") {
        rt.request(s += 2, "CreateContainer", create_request("garbage"));
        nriqos::nri::ResponseEnvelope r = rt.reply(s);
        CHECK(r.code == 0);
        CHECK(r.payload.empty());
    }
    SECTION("crashing child -> fail open") {
        rt.request(s += 2, "CreateContainer", create_request("crash"));
        nriqos::nri::ResponseEnvelope r = rt.reply(s);
        CHECK(r.code == 0);
        CHECK(r.payload.empty());
    }
    SECTION("adjustment with a wrong type -> treated as garbage") {
        rt.request(s += 2, "CreateContainer", create_request("badadj"));
        nriqos::nri::ResponseEnvelope r = rt.reply(s);
        CHECK(r.code == 0);
        CHECK(r.payload.empty());
    }
    SECTION("on_child_failure=closed is cached and applied to admission events only") {
        rt.request(s += 2, "CreateContainer", create_request("closed"));
        CHECK(rt.reply(s).code == 0);
        for (const char* mode : {"garbage", "crash", "hang"}) {
            rt.request(s += 2, "CreateContainer", create_request(mode));
            nriqos::nri::ResponseEnvelope r = rt.reply(s);
            CHECK(r.code == 2);
            CHECK_THAT(r.message, Catch::Contains("nri-qos") && Catch::Contains("CreateContainer"));
        }
        // teardown events always fail open
        pb::StateChangeEvent ev;
        ev.set_event(pb::STOP_POD_SANDBOX);
        *ev.mutable_pod() = make_pod("garbage");
        rt.request(s += 2, "StateChange", ev.SerializeAsString());
        CHECK(rt.reply(s).code == 0);
        // "open" switches back
        rt.request(s += 2, "CreateContainer", create_request("open"));
        CHECK(rt.reply(s).code == 0);
        rt.request(s += 2, "CreateContainer", create_request("garbage"));
        CHECK(rt.reply(s).code == 0);
    }
    SECTION("a deadline answer never changes the cached fail mode (issue #9)") {
        rt.request(s += 2, "CreateContainer", create_request("closed"));
        CHECK(rt.reply(s).code == 0);
        // The child's own deadline fired: its answer says "open" only because the deadline answer
        // is prepared before the policy is known. Under the cached "closed" it fails the event ...
        rt.request(s += 2, "CreateContainer", create_request("deadline"));
        nriqos::nri::ResponseEnvelope r = rt.reply(s);
        CHECK(r.code == 2);
        CHECK_THAT(r.message, Catch::Contains("deadline"));
        // ... and a later crash still fails closed.
        rt.request(s += 2, "CreateContainer", create_request("crash"));
        r = rt.reply(s);
        CHECK(r.code == 2);
        CHECK_THAT(r.message, Catch::Contains("on_child_failure=closed"));
        // Teardown events still fail open.
        pb::StateChangeEvent ev;
        ev.set_event(pb::REMOVE_POD_SANDBOX);
        *ev.mutable_pod() = make_pod("deadline");
        rt.request(s += 2, "StateChange", ev.SerializeAsString());
        CHECK(rt.reply(s).code == 0);
    }
    SECTION("a deadline answer under the default (open) mode is used as it is") {
        rt.request(s += 2, "CreateContainer", create_request("deadline"));
        nriqos::nri::ResponseEnvelope r = rt.reply(s);
        CHECK(r.code == 0);
        CHECK(r.payload.empty());
    }
    CHECK(rt.close_and_wait() == 0);
    CHECK_THAT(slurp(t.path + "/relay.log"), !Catch::Contains("internal error"));
}

TEST_CASE("relay: UpdateContainer, StateChange, PostUpdateContainer, Synchronize", "[nri][relay]") {
    const bool fork_mode = GENERATE(false, true);
    CAPTURE(fork_mode);
    TempDir t;
    FakeRuntime rt(child_opts(t.path, 1500, fork_mode));
    rt.handshake();

    pb::UpdateContainerRequest up;
    *up.mutable_pod() = make_pod("");
    up.mutable_container()->set_id("ctr-up");
    // the container as it is: shares 2 (the class's), quota 50000, 64 MiB
    auto* cur = up.mutable_container()->mutable_linux()->mutable_resources();
    cur->mutable_cpu()->mutable_shares()->set_value(2);
    cur->mutable_cpu()->mutable_quota()->set_value(50000);
    cur->mutable_cpu()->mutable_period()->set_value(100000);
    cur->mutable_memory()->mutable_limit()->set_value(64 << 20);
    // an in-place resize as containerd passes it (zero wrappers = unchanged): quota 80000, 128 MiB
    auto* req = up.mutable_linux_resources();
    req->mutable_cpu()->mutable_shares()->set_value(0);
    req->mutable_cpu()->mutable_quota()->set_value(80000);
    req->mutable_cpu()->mutable_period()->set_value(0);
    req->mutable_memory()->mutable_limit()->set_value(128 << 20);
    rt.request(3, "UpdateContainer", up.SerializeAsString());
    nriqos::nri::ResponseEnvelope r = rt.reply(3);
    REQUIRE(r.code == 0);
    pb::UpdateContainerResponse ursp;
    REQUIRE(ursp.ParseFromString(r.payload));
    REQUIRE(ursp.update_size() == 1);
    CHECK(ursp.update(0).container_id() == "ctr-up");
    CHECK(ursp.update(0).linux().resources().cpu().shares().value() == 4);
    CHECK(ursp.update(0).linux().resources().unified().at("memory.high") == "1000");
    json in = json::parse(slurp(t.path + "/stdin.json"));
    CHECK(in["event"] == "UpdateContainer");
    // the update as containerd sent it, beside the container's current resources: the evaluator
    // merges the two (model/request.hpp granted_resources, the one definition of kubelet's grant)
    CHECK(in["linux_resources"]["cpu"]["quota"]["value"] == 80000);
    CHECK(in["linux_resources"]["cpu"]["shares"]["value"] == 0);
    CHECK(in["linux_resources"]["cpu"]["period"]["value"] == 0);
    CHECK(in["linux_resources"]["memory"]["limit"]["value"] == 128 << 20);
    CHECK(in["container"]["linux"]["resources"]["cpu"]["quota"]["value"] == 50000);
    {
        nriqos::Request got = nriqos::parse_nri_event(in.dump());
        CHECK(got.resources.cpu_quota == 80000);
        CHECK(got.resources.cpu_shares == 2);
        CHECK(got.resources.cpu_period == 100000);
        CHECK(got.resources.mem_limit == int64_t(128 << 20));
    }

    // the static CPU manager's update: cpuset only; everything else stays
    pb::UpdateContainerRequest cpuset = up;
    cpuset.mutable_linux_resources()->mutable_cpu()->mutable_quota()->set_value(0);
    cpuset.mutable_linux_resources()->mutable_memory()->mutable_limit()->set_value(0);
    cpuset.mutable_linux_resources()->mutable_cpu()->set_cpus("0-1");
    rt.request(17, "UpdateContainer", cpuset.SerializeAsString());
    REQUIRE(rt.reply(17).code == 0);
    in = json::parse(slurp(t.path + "/stdin.json"));
    CHECK(in["linux_resources"]["cpu"]["cpus"] == "0-1");
    {
        nriqos::Request got = nriqos::parse_nri_event(in.dump());
        CHECK(got.resources.cpu_cpus == std::string("0-1"));
        CHECK(got.resources.cpu_shares == 2);
        CHECK(got.resources.cpu_quota == 50000);
        CHECK(got.resources.mem_limit == int64_t(64 << 20));
    }

    pb::StateChangeEvent ev;
    ev.set_event(pb::RUN_POD_SANDBOX);
    *ev.mutable_pod() = make_pod("");
    rt.request(5, "StateChange", ev.SerializeAsString());
    r = rt.reply(5);
    CHECK(r.code == 0);
    CHECK(r.payload.empty());
    in = json::parse(slurp(t.path + "/stdin.json"));
    CHECK(in["event"] == "RunPodSandbox");
    CHECK_FALSE(in.contains("container"));

    ev.set_event(pb::START_CONTAINER);
    ev.mutable_container()->set_id("ctr-start");
    rt.request(7, "StateChange", ev.SerializeAsString());
    CHECK(rt.reply(7).code == 0);
    in = json::parse(slurp(t.path + "/stdin.json"));
    CHECK(in["event"] == "StartContainer");
    CHECK(in["container"]["id"] == "ctr-start");

    // not-evaluated event: answered without a child
    ::unlink((t.path + "/stdin.json").c_str());
    ev.set_event(pb::POST_START_CONTAINER);
    rt.request(9, "StateChange", ev.SerializeAsString());
    CHECK(rt.reply(9).code == 0);
    CHECK(slurp(t.path + "/stdin.json").empty());

    // not subscribed any more (nothing to do there): StopPodSandbox answered without a child,
    // and so is its dedicated RPC StopContainer (NRI v0.12: an empty StopContainerResponse)
    ev.set_event(pb::STOP_POD_SANDBOX);
    rt.request(19, "StateChange", ev.SerializeAsString());
    CHECK(rt.reply(19).code == 0);
    CHECK(slurp(t.path + "/stdin.json").empty());
    rt.request(21, "StopContainer", "");
    r = rt.reply(21);
    CHECK(r.code == 0);
    CHECK(r.payload.empty());
    CHECK(slurp(t.path + "/stdin.json").empty());

    ev.set_event(pb::POST_UPDATE_CONTAINER);
    ev.mutable_container()->set_id("ctr-postupdate");
    rt.request(11, "StateChange", ev.SerializeAsString());
    r = rt.reply(11);
    CHECK(r.code == 0);
    CHECK(r.payload.empty());
    in = json::parse(slurp(t.path + "/stdin.json"));
    CHECK(in["event"] == "PostUpdateContainer");
    CHECK(in["container"]["id"] == "ctr-postupdate");

    pb::SynchronizeRequest sync;
    sync.set_more(true);
    rt.request(13, "Synchronize", sync.SerializeAsString());
    r = rt.reply(13);
    CHECK(r.code == 0);
    pb::SynchronizeResponse srsp;
    REQUIRE(srsp.ParseFromString(r.payload));
    CHECK(srsp.more());
    CHECK(srsp.update_size() == 0);
    rt.request(15, "Synchronize", "");
    r = rt.reply(15);
    CHECK(r.code == 0);
    CHECK(r.payload.empty());
    CHECK(rt.close_and_wait() == 0);
}

pb::Container sync_ctr(const std::string& id, const std::string& pod_id, pb::ContainerState state) {
    pb::Container c;
    c.set_id(id);
    c.set_pod_sandbox_id(pod_id);
    c.set_name("app-" + id);
    c.set_state(state);
    return c;
}

// Issue #20: every existing pod and container is evaluated at Synchronize, in a process of its
// own, pods first; a part with more = true gets an empty reply echoing it; the last part's reply
// carries one update per evaluated container. Stopped containers and containers whose pod the
// runtime did not list are not evaluated (logged). Old code: the reply carried no update.
TEST_CASE("relay: Synchronize evaluates every pod and container; updates in the last part's reply", "[nri][relay][sync]") {
    const bool fork_mode = GENERATE(false, true);
    CAPTURE(fork_mode);
    TempDir t;
    nriqos::nri::RelayOptions o = child_opts(t.path, 1500, fork_mode);
    o.debug = true;
    FakeRuntime rt(o, t.path + "/relay.log");
    rt.handshake("", "2.1.9~ds1");
    pb::SynchronizeRequest p1;
    *p1.add_pods() = make_pod("a");
    *p1.add_pods() = make_pod("b");
    *p1.add_containers() = sync_ctr("ctr-a1", "sb-a", pb::CONTAINER_RUNNING);
    p1.set_more(true);
    rt.request(3, "Synchronize", p1.SerializeAsString());
    nriqos::nri::ResponseEnvelope r = rt.reply(3);
    REQUIRE(r.code == 0);
    pb::SynchronizeResponse rsp;
    REQUIRE(rsp.ParseFromString(r.payload));
    CHECK(rsp.more());
    CHECK(rsp.update_size() == 0);
    CHECK(slurp(t.path + "/stdin.json").empty());  // nothing evaluated before the last part
    pb::SynchronizeRequest p2;
    *p2.add_containers() = sync_ctr("ctr-b1", "sb-b", pb::CONTAINER_CREATED);
    *p2.add_containers() = sync_ctr("ctr-b2", "sb-b", pb::CONTAINER_STOPPED);
    *p2.add_containers() = sync_ctr("ctr-x1", "sb-gone", pb::CONTAINER_RUNNING);
    rt.request(5, "Synchronize", p2.SerializeAsString(), 1900000000);
    r = rt.reply(5, 5000);
    REQUIRE(r.code == 0);
    rsp.Clear();
    REQUIRE(rsp.ParseFromString(r.payload));
    CHECK_FALSE(rsp.more());
    REQUIRE(rsp.update_size() == 2);
    CHECK(rsp.update(0).container_id() == "ctr-a1");
    CHECK(rsp.update(1).container_id() == "ctr-b1");
    CHECK(rsp.update(1).linux().resources().cpu().shares().value() == 4);
    // the last evaluation was the last container's, with its pod
    json in = json::parse(slurp(t.path + "/stdin.json"));
    CHECK(in["event"] == "Synchronize");
    CHECK(in["container"]["id"] == "ctr-b1");
    CHECK(in["pod"]["id"] == "sb-b");
    // an event after the pass is served as usual
    rt.request(7, "CreateContainer", create_request(""));
    CHECK(rt.reply(7).code == 0);
    CHECK(rt.close_and_wait() == 0);
    std::string log = slurp(t.path + "/relay.log");
    CHECK_THAT(log, Catch::Contains("ctr-b2") && Catch::Contains("stopped (no cgroup to write)"));
    CHECK_THAT(log, Catch::Contains("sb-gone is not in the runtime's list"));
    CHECK_THAT(log, Catch::Contains("2 pods, 4 containers (2 part(s)): 4 evaluated, 0 failed (open), 2 not evaluated; 2 container updates"));
}

// Issue #33 §4 (e2e c23-native-unseen, try 3 of a run at load 3): a container CREATED when the
// relay's Synchronize lists it was created without nri-qos's CreateContainer adjustment, and the
// pass's ContainerUpdate only changes its spec when containerd's CRI StartContainer already made
// its task (internal/cri/server/container_update_resources.go: no task.Update unless RUNNING;
// container_start.go: NewTask before BlockPluginSync): CRI's cpu.shares and oom_score_adj stayed,
// with records that said BE. Now its StartContainer goes to the evaluator with "unadjusted": true
// (every knob written, adjust.cpp), once; other containers' input is unchanged. Old code: no such
// member, StartContainer wrote only what NRI cannot carry.
TEST_CASE("relay: StartContainer of a container CREATED in the Synchronize is marked unadjusted, once", "[nri][relay][sync]") {
    TempDir t;
    nriqos::nri::RelayOptions o = child_opts(t.path);
    FakeRuntime rt(o, t.path + "/relay.log");
    rt.handshake("", "v2.3.4");
    pb::SynchronizeRequest sync;
    *sync.add_pods() = make_pod("a");
    *sync.add_containers() = sync_ctr("ctr-run", "sb-a", pb::CONTAINER_RUNNING);
    *sync.add_containers() = sync_ctr("ctr-new", "sb-a", pb::CONTAINER_CREATED);
    rt.request(3, "Synchronize", sync.SerializeAsString());
    REQUIRE(rt.reply(3, 5000).code == 0);
    auto start = [&](uint32_t stream, const std::string& id, const char* method) {
        pb::StateChangeEvent sc;
        sc.set_event(pb::START_CONTAINER);
        *sc.mutable_pod() = make_pod("a");
        *sc.mutable_container() = sync_ctr(id, "sb-a", pb::CONTAINER_CREATED);
        pb::StartContainerRequest dreq;
        *dreq.mutable_pod() = sc.pod();
        *dreq.mutable_container() = sc.container();
        rt.request(stream, method, std::string(method) == "StartContainer" ? dreq.SerializeAsString() : sc.SerializeAsString());
        REQUIRE(rt.reply(stream).code == 0);
        return json::parse(slurp(t.path + "/stdin.json"));
    };
    json in = start(5, "ctr-new", "StartContainer");
    CHECK(in["event"] == "StartContainer");
    CHECK(in["container"]["id"] == "ctr-new");
    CHECK(in.value("unadjusted", false));
    CHECK_FALSE(start(7, "ctr-new", "StateChange").contains("unadjusted"));  // once: a second start is not
    CHECK_FALSE(start(9, "ctr-other", "StateChange").contains("unadjusted"));  // created under our watch
    CHECK(rt.close_and_wait() == 0);
    CHECK_THAT(slurp(t.path + "/relay.log"), Catch::Contains("StartContainer default/pod-a/app-ctr-new: CREATED in this relay's Synchronize"));
}

// Issue #20 §2: `nri-qos relay --socket` as a service. The runtime goes away (the connection
// closes) and the service connects again, with a fresh relay: a full registration and
// Synchronize; its liveness is on record (status file, metrics textfile with build info).
// Old code: the relay exited with the connection, nothing kept it up or on record.
TEST_CASE("relay service: reconnects after the runtime goes away; liveness on record", "[nri][relay][service]") {
    TempDir t;
    std::string sock = t.path + "/nri.sock";
    int lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    REQUIRE(lfd >= 0);
    struct sockaddr_un a {};
    a.sun_family = AF_UNIX;
    REQUIRE(sock.size() < sizeof a.sun_path);
    std::strcpy(a.sun_path, sock.c_str());
    REQUIRE(bind(lfd, reinterpret_cast<struct sockaddr*>(&a), sizeof a) == 0);
    REQUIRE(listen(lfd, 4) == 0);
    nriqos::nri::RelayOptions o = child_opts(t.path);
    o.socket_path = sock;
    nriqos::nri::ServiceOptions so;
    so.status_file = t.path + "/state/relay.json";
    so.metrics_file = t.path + "/prom/nri_qos_relay.prom";
    so.version = "9.9.9";
    so.policy_sha256 = "abc123";
    so.backoff_min_ms = 50;
    so.backoff_max_ms = 200;
    pid_t svc = fork();
    REQUIRE(svc >= 0);
    if (svc == 0) {
        int fd = open((t.path + "/service.log").c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (fd >= 0) dup2(fd, 2);
        _exit(nriqos::nri::run_relay_service(o, so));
    }
    auto accept_one = [&]() {
        struct pollfd p = {lfd, POLLIN, 0};
        REQUIRE(poll(&p, 1, 5000) == 1);
        int c = accept4(lfd, nullptr, nullptr, SOCK_CLOEXEC);
        REQUIRE(c >= 0);
        return c;
    };
    auto status_when = [&](const std::function<bool(const json&)>& ok) {
        json st;
        for (int64_t end = mono_ms() + 3000; mono_ms() < end; usleep(10000)) {
            st = nriqos::nri::read_service_status(so.status_file);
            if (st.is_object() && !st.contains("error") && ok(st)) break;
        }
        return st;
    };
    {
        FakeRuntime rt(accept_one());
        rt.handshake("", "2.1.9~ds1");
        json st = status_when([](const json& j) { return j.value("registered", false); });
        CHECK(st.value("registered", false));
        CHECK(st.value("runtime", "") == "containerd");
        CHECK(st.value("runtime_version", "") == "2.1.9~ds1");
        CHECK(st.value("reconnects", -1) == 0);
        CHECK(st.value("relay_pid", 0) > 0);
        CHECK(st.value("pid", 0) == svc);
    }  // the runtime goes away (containerd restarted)
    FakeRuntime rt(accept_one());  // the service came back by itself
    rt.handshake("", "2.1.9~ds1");
    pb::SynchronizeRequest sync;
    *sync.add_pods() = make_pod("a");
    *sync.add_containers() = sync_ctr("ctr-a1", "sb-a", pb::CONTAINER_RUNNING);
    rt.request(3, "Synchronize", sync.SerializeAsString());
    nriqos::nri::ResponseEnvelope r = rt.reply(3, 5000);
    REQUIRE(r.code == 0);
    pb::SynchronizeResponse rsp;
    REQUIRE(rsp.ParseFromString(r.payload));
    CHECK(rsp.update_size() == 1);  // a full Synchronize on the new connection
    json st = status_when([](const json& j) { return j.value("last_sync", 0) > 0; });
    CHECK(st.value("reconnects", -1) == 1);
    CHECK(st.value("registered", false));
    CHECK(st.value("last_sync", 0) > 0);
    CHECK_THAT(slurp(so.metrics_file), Catch::Contains("nri_qos_relay_up 1") && Catch::Contains("nri_qos_relay_reconnects_total 1") &&
                                           Catch::Contains("nri_qos_build_info{version=\"9.9.9\",policy_sha256=\"abc123\"} 1"));
    // SIGTERM: forwarded to the relay; the service exits 0 and says the relay is down
    kill(svc, SIGTERM);
    int stw = 0;
    pid_t w = 0;
    for (int64_t end = mono_ms() + 3000; mono_ms() < end && (w = waitpid(svc, &stw, WNOHANG)) == 0;) usleep(10000);
    REQUIRE(w == svc);
    CHECK(WIFEXITED(stw));
    CHECK(WEXITSTATUS(stw) == 0);
    st = nriqos::nri::read_service_status(so.status_file);
    CHECK_FALSE(st.value("registered", true));
    CHECK_FALSE(st.value("up", true));  // the service is gone
    CHECK_THAT(slurp(so.metrics_file), Catch::Contains("nri_qos_relay_up 0"));
    CHECK_THAT(slurp(t.path + "/service.log"), Catch::Contains("connecting to " + sock + " again (reconnect 1)"));
    close(lfd);
}

TEST_CASE("relay: unsolicited UpdateContainers only on NRI v0.12.1+ (containerd/containerd#13733)", "[nri][sync]") {
    CHECK_FALSE(nriqos::nri::unsolicited_updates_safe(""));
    CHECK_FALSE(nriqos::nri::unsolicited_updates_safe("v0.6.1"));
    CHECK_FALSE(nriqos::nri::unsolicited_updates_safe("v0.12.0"));
    CHECK_FALSE(nriqos::nri::unsolicited_updates_safe("v0.12"));
    CHECK_FALSE(nriqos::nri::unsolicited_updates_safe("garbage"));
    CHECK(nriqos::nri::unsolicited_updates_safe("v0.12.1"));
    CHECK(nriqos::nri::unsolicited_updates_safe("0.13.0"));
    CHECK(nriqos::nri::unsolicited_updates_safe("v1.0.0"));
}

TEST_CASE("sync pass: bounded, pods first, containers without a cgroup skipped", "[nri][sync]") {
    nriqos::nri::SyncPass pass;
    pb::SynchronizeRequest part;
    *part.add_pods() = make_pod("p");
    *part.add_containers() = sync_ctr("c-paused", "sb-p", pb::CONTAINER_PAUSED);
    *part.add_containers() = sync_ctr("c-unknown", "sb-p", pb::CONTAINER_UNKNOWN);
    nriqos::nri::sync_add_part(pass, part);
    CHECK(part.pods_size() == 0);
    nriqos::nri::sync_plan(pass);
    REQUIRE(pass.items.size() == 2);
    CHECK(pass.items[0].ctr == -1);
    CHECK(pass.items[1].ctr == 0);
    REQUIRE(pass.skipped.size() == 1);
    CHECK_THAT(pass.skipped[0], Catch::Contains("c-unknown") && Catch::Contains("unknown"));
    // past the object bound: counted, not kept
    nriqos::nri::SyncPass big;
    pb::SynchronizeRequest many;
    for (size_t i = 0; i < nriqos::nri::kMaxSyncObjects + 3; ++i)
        *many.add_containers() = sync_ctr("c" + std::to_string(i), "sb-p", pb::CONTAINER_RUNNING);
    nriqos::nri::sync_add_part(big, many);
    CHECK(big.containers.size() == nriqos::nri::kMaxSyncObjects);
    CHECK(big.dropped == 3);
}

TEST_CASE("relay: UpdatePodSandbox (NRI v0.10+) is evaluated; older runtimes never send it", "[nri][relay]") {
    TempDir t;
    pb::UpdatePodSandboxRequest req;
    *req.mutable_pod() = make_pod("");
    req.mutable_linux_resources()->mutable_cpu()->mutable_quota()->set_value(200000);
    SECTION("containerd 2.2") {
        FakeRuntime rt(child_opts(t.path));
        REQUIRE(rt.handshake("", "2.2.0") == 0xdad);
        rt.request(3, "UpdatePodSandbox", req.SerializeAsString());
        nriqos::nri::ResponseEnvelope r = rt.reply(3);
        CHECK(r.code == 0);
        CHECK(r.payload.empty());  // UpdatePodSandboxResponse{}
        json in = json::parse(slurp(t.path + "/stdin.json"));
        CHECK(in["event"] == "UpdatePodSandbox");
        CHECK(in["linux_resources"]["cpu"]["quota"]["value"] == 200000);
        CHECK_FALSE(in.contains("container"));
        CHECK(rt.close_and_wait() == 0);
    }
    SECTION("containerd 2.1: not subscribed, not served") {
        FakeRuntime rt(child_opts(t.path));
        REQUIRE(rt.handshake("", "2.1.9") == 0x5ad);
        rt.request(3, "UpdatePodSandbox", req.SerializeAsString());
        CHECK(rt.reply(3).code == 12);
        CHECK(slurp(t.path + "/stdin.json").empty());
        CHECK(rt.close_and_wait() == 0);
    }
}

TEST_CASE("relay: unknown methods and services answer UNIMPLEMENTED", "[nri][relay]") {
    TempDir t;
    FakeRuntime rt(child_opts(t.path));
    rt.handshake();
    rt.request(3, "ValidateContainerAdjustment", "");  // NRI v0.11 validators: nri-qos is none
    nriqos::nri::ResponseEnvelope r = rt.reply(3);
    CHECK(r.code == 12);
    CHECK_THAT(r.message, Catch::Contains("ValidateContainerAdjustment"));
    rt.request(5, "Configure", "", 0, "some.other.Service");
    r = rt.reply(5);
    CHECK(r.code == 12);
    CHECK_THAT(r.message, Catch::Contains("some.other.Service"));
    CHECK(rt.close_and_wait() == 0);
}

// Issue #31 item 2: NRI v0.12 (containerd 2.3) calls one RPC per event. Each one nri-qos
// subscribes is evaluated exactly as its StateChange equivalent (same child input, same empty
// reply); the others get their empty response without a child. Old code: every one answered
// UNIMPLEMENTED (code 12), which sends containerd 2.3 to its deprecated StateChange fallback
// ("does not implement a dedicated ... RPC call").
TEST_CASE("relay: NRI v0.12 dedicated event RPCs are served like their StateChange", "[nri][relay][nri012]") {
    const bool fork_mode = GENERATE(false, true);
    CAPTURE(fork_mode);
    TempDir t;
    FakeRuntime rt(child_opts(t.path, 1500, fork_mode), t.path + "/relay.log");
    REQUIRE(rt.handshake("", "v2.3.4", "v0.12.0") == 0xdad);
    const std::string input = t.path + "/stdin.json";
    pb::PodSandbox pod = make_pod("");
    pb::Container ctr;
    ctr.set_id("ctr-v012");
    ctr.set_pod_sandbox_id(pod.id());
    ctr.set_name("app");
    uint32_t stream = 3;

    // the subscribed events: evaluated, the child sees the event's name, pod and container
    struct Evaluated {
        const char* method;
        bool with_container;
    } evaluated[] = {{"RunPodSandbox", false}, {"StartContainer", true}, {"PostUpdateContainer", true}, {"RemovePodSandbox", false}};
    for (const auto& e : evaluated) {
        CAPTURE(e.method);
        ::unlink(input.c_str());
        pb::StartContainerRequest req;  // {pod = 1, container = 2}: the layout of every one
        *req.mutable_pod() = pod;
        if (e.with_container) *req.mutable_container() = ctr;
        rt.request(
            stream, e.method, e.with_container ? req.SerializeAsString() : [&] {
                pb::RunPodSandboxRequest p;
                *p.mutable_pod() = pod;
                return p.SerializeAsString();
            }());
        nriqos::nri::ResponseEnvelope r = rt.reply(stream);
        stream += 2;
        CHECK(r.code == 0);
        CHECK(r.message.empty());
        CHECK(r.payload.empty());  // RunPodSandboxResponse{}, StartContainerResponse{}, ...
        std::string in_text = slurp(input);
        REQUIRE_FALSE(in_text.empty());
        json in = json::parse(in_text);
        CHECK(in["event"] == e.method);
        CHECK(in["pod"]["name"] == pod.name());
        CHECK(in["pod"]["id"] == pod.id());
        if (e.with_container) CHECK(in["container"]["id"] == "ctr-v012");
        else CHECK_FALSE(in.contains("container"));
    }

    // the same input as the StateChange of the same event, byte for byte
    pb::StateChangeEvent sc;
    sc.set_event(pb::START_CONTAINER);
    *sc.mutable_pod() = pod;
    *sc.mutable_container() = ctr;
    rt.request(stream, "StateChange", sc.SerializeAsString());
    CHECK(rt.reply(stream).code == 0);
    stream += 2;
    const std::string via_state_change = slurp(input);
    pb::StartContainerRequest start;
    *start.mutable_pod() = pod;
    *start.mutable_container() = ctr;
    rt.request(stream, "StartContainer", start.SerializeAsString());
    CHECK(rt.reply(stream).code == 0);
    stream += 2;
    CHECK(slurp(input) == via_state_change);

    // not subscribed: the empty response at once, no evaluation
    for (const char* m : {"StopPodSandbox", "PostUpdatePodSandbox", "PostCreateContainer", "PostStartContainer", "StopContainer"}) {
        CAPTURE(m);
        ::unlink(input.c_str());
        rt.request(stream, m, start.SerializeAsString());
        nriqos::nri::ResponseEnvelope r = rt.reply(stream);
        stream += 2;
        CHECK(r.code == 0);
        CHECK(r.payload.empty());
        CHECK(slurp(input).empty());
    }

    // RemoveContainer: answered empty, never evaluated; a container nri-qos adjusted at create and
    // that never started is an undone create (Relay::on_removed), as over StateChange
    rt.request(stream, "CreateContainer", create_request("undo"));
    REQUIRE(rt.reply(stream).code == 0);
    stream += 2;
    ::unlink(input.c_str());
    pb::RemoveContainerRequest rm;
    *rm.mutable_pod() = make_pod("undo");
    rm.mutable_container()->set_id("ctr-undo");
    rm.mutable_container()->set_name("app");
    rt.request(stream, "RemoveContainer", rm.SerializeAsString());
    nriqos::nri::ResponseEnvelope r = rt.reply(stream);
    stream += 2;
    CHECK(r.code == 0);
    CHECK(r.payload.empty());
    CHECK(slurp(input).empty());
    // one that started first (dedicated StartContainer) was not undone
    rt.request(stream, "CreateContainer", create_request("ran"));
    REQUIRE(rt.reply(stream).code == 0);
    stream += 2;
    pb::StartContainerRequest ran;
    *ran.mutable_pod() = make_pod("ran");
    ran.mutable_container()->set_id("ctr-ran");
    ran.mutable_container()->set_name("app");
    rt.request(stream, "StartContainer", ran.SerializeAsString());
    REQUIRE(rt.reply(stream).code == 0);
    stream += 2;
    rt.request(stream, "RemoveContainer", ran.SerializeAsString());
    CHECK(rt.reply(stream).code == 0);
    stream += 2;

    // a malformed dedicated request: named by its method, answered with the event's fail mode
    rt.request(stream, "RunPodSandbox", std::string("\x0a\xff", 2));
    r = rt.reply(stream);
    CHECK(r.code == 0);  // fail-open (the policy's default)
    stream += 2;
    CHECK(rt.close_and_wait() == 0);
    const std::string log = slurp(t.path + "/relay.log");
    CHECK_THAT(log, Catch::Contains("CreateContainer default/pod-undo/app: the runtime removed the container without starting it"));
    CHECK_THAT(log, !Catch::Contains("pod-ran/app: the runtime removed"));
    CHECK_THAT(log, Catch::Contains("malformed RunPodSandbox request"));
    CHECK_THAT(log, !Catch::Contains("UNIMPLEMENTED"));
}

TEST_CASE("relay: requests split into tiny mux frames and queued while a child runs", "[nri][relay]") {
    const bool fork_mode = GENERATE(false, true);
    CAPTURE(fork_mode);
    TempDir t;
    FakeRuntime rt(child_opts(t.path, 1500, fork_mode));
    rt.handshake();
    // three requests back to back, 7-byte frames; answered in order, nothing lost
    rt.request(3, "CreateContainer", create_request(""), 2000000000, nriqos::nri::kPluginService, 7);
    rt.request(5, "CreateContainer", create_request("error"), 2000000000, nriqos::nri::kPluginService, 7);
    rt.request(7, "CreateContainer", create_request(""), 2000000000, nriqos::nri::kPluginService, 7);
    CHECK(rt.reply(3).code == 0);
    CHECK(rt.reply(5).code == 2);
    nriqos::nri::ResponseEnvelope r = rt.reply(7);
    CHECK(r.code == 0);
    CHECK_FALSE(r.payload.empty());
    CHECK(rt.close_and_wait() == 0);
}

TEST_CASE("relay: exits 0 on EOF, also while a child runs", "[nri][relay]") {
    const bool fork_mode = GENERATE(false, true);
    CAPTURE(fork_mode);
    TempDir t;
    SECTION("idle") {
        FakeRuntime rt(child_opts(t.path, 1500, fork_mode));
        rt.handshake();
        CHECK(rt.close_and_wait(1000) == 0);
    }
    SECTION("before registration was answered") {
        FakeRuntime rt(child_opts(t.path, 1500, fork_mode));
        CHECK(rt.close_and_wait(1000) == 0);
    }
    SECTION("child running") {
        FakeRuntime rt(child_opts(t.path, 5000, fork_mode));
        rt.handshake();
        rt.request(3, "CreateContainer", create_request("hang"));
        for (int i = 0; i < 200 && slurp(t.path + "/hang.pid").empty(); ++i) usleep(10000);
        pid_t hung = std::atoi(slurp(t.path + "/hang.pid").c_str());
        REQUIRE(hung > 0);
        int64_t t0 = mono_ms();
        CHECK(rt.close_and_wait(2000) == 0);
        CHECK(mono_ms() - t0 < 1000);
        bool gone = false;
        for (int i = 0; i < 100 && !gone; ++i) {
            std::string st = slurp("/proc/" + std::to_string(hung) + "/stat");
            gone = st.empty() || st.find(") Z") != std::string::npos;  // killed (reaped by init)
            if (!gone) usleep(10000);
        }
        CHECK(gone);
    }
}

namespace {

std::vector<pid_t> children_of(pid_t pid) {
    std::istringstream in(slurp("/proc/" + std::to_string(pid) + "/task/" + std::to_string(pid) + "/children"));
    std::vector<pid_t> v;
    pid_t k;
    while (in >> k) v.push_back(k);
    return v;
}

// Wait (at most ~3 s) until `path` exists and is not empty; returns its content.
std::string wait_file(const std::string& path) {
    for (int i = 0; i < 300; ++i) {
        std::string c = slurp(path);
        if (!c.empty()) return c;
        usleep(10000);
    }
    return "";
}

// The file's contents once they contain `needle` (an evaluator writes the event's records after
// its answer), or what is there after ~3 s.
std::string wait_contains(const std::string& path, const std::string& needle) {
    std::string c;
    for (int i = 0; i < 300; ++i) {
        c = slurp(path);
        if (c.find(needle) != std::string::npos) break;
        usleep(10000);
    }
    return c;
}

bool gone_or_zombie(pid_t pid) {
    for (int i = 0; i < 100; ++i) {
        std::string st = slurp("/proc/" + std::to_string(pid) + "/stat");
        if (st.empty() || st.find(") Z") != std::string::npos) return true;
        usleep(10000);
    }
    return false;
}

bool has(const std::vector<pid_t>& v, pid_t p) { return std::find(v.begin(), v.end(), p) != v.end(); }

}  // namespace

TEST_CASE("relay (fork): every event in a process of its own, made ready before the event", "[nri][relay]") {
    TempDir t;
    FakeRuntime rt(child_opts(t.path, 1500, true), t.path + "/relay.log");
    rt.handshake("{\"policy\": \"/etc/nri/test-policy.toml\", \"debug\": true}");
    // The zygote got the plugin config flags; a spare is cloned before any event exists.
    pid_t zygote = std::atoi(wait_file(t.path + "/zygote.pid").c_str());
    pid_t spare = std::atoi(wait_file(t.path + "/detached.pid").c_str());
    REQUIRE(zygote > 0);
    REQUIRE(spare > 0);
    CHECK(slurp(t.path + "/zygote.flags") == "--policy /etc/nri/test-policy.toml --debug\n");
    std::vector<pid_t> kids = children_of(rt.pid());
    CHECK(has(kids, zygote));
    CHECK(has(kids, spare));  // CLONE_PARENT: the relay's child, reaped and killed by the relay
    CHECK(slurp("/proc/" + std::to_string(zygote) + "/comm") == "nri-qos-zygote\n");
    CHECK(slurp("/proc/" + std::to_string(spare) + "/comm") == "nri-qos-eval\n");
    bool keeper = false;
    for (pid_t k : kids) keeper = keeper || slurp("/proc/" + std::to_string(k) + "/comm") == "nri-qos-keeper\n";
    CHECK(keeper);
    CHECK(slurp(t.path + "/stdin.json").empty());

    std::vector<pid_t> seen;
    for (uint32_t s = 3; s <= 7; s += 2) {
        rt.request(s, "CreateContainer", create_request(""));
        nriqos::nri::ResponseEnvelope r = rt.reply(s);
        REQUIRE(r.code == 0);
        pb::CreateContainerResponse rsp;
        REQUIRE(rsp.ParseFromString(r.payload));
        CHECK(rsp.adjust().linux().resources().cpu().shares().value() == 2);
        pid_t ev = std::atoi(slurp(t.path + "/eval.pid").c_str());
        CHECK(ev != rt.pid());
        CHECK(ev != zygote);
        CHECK_FALSE(has(seen, ev));
        seen.push_back(ev);
        if (s == 3) CHECK(ev == spare);  // the one made ahead of the event
        int budget = std::atoi(slurp(t.path + "/budget").c_str());
        CHECK(budget > 1000);  // 1500 ms - 100 ms head start - the time in the queue
        CHECK(budget <= 1400);
        CHECK(json::parse(slurp(t.path + "/stdin.json"))["container"]["id"] == "ctr-");
    }
    for (pid_t p : seen) CHECK(gone_or_zombie(p));
    CHECK(rt.close_and_wait() == 0);
    CHECK(gone_or_zombie(zygote));  // nothing is left behind
    CHECK(gone_or_zombie(std::atoi(slurp(t.path + "/detached.pid").c_str())));
}

TEST_CASE("relay (fork): dead spares and zygotes are replaced; a crash costs that event only", "[nri][relay]") {
    TempDir t;
    FakeRuntime rt(child_opts(t.path, 1500, true), t.path + "/relay.log");
    rt.handshake();
    uint32_t s = 1;
    auto adjusted = [&](const std::string& mode) {
        rt.request(s += 2, "CreateContainer", create_request(mode));
        nriqos::nri::ResponseEnvelope r = rt.reply(s);
        pb::CreateContainerResponse rsp;
        return r.code == 0 && rsp.ParseFromString(r.payload) && rsp.adjust().linux().resources().cpu().shares().value() == 2;
    };
    SECTION("idle spare killed from outside") {
        pid_t spare = std::atoi(wait_file(t.path + "/detached.pid").c_str());
        REQUIRE(spare > 0);
        REQUIRE(kill(spare, SIGKILL) == 0);
        CHECK(gone_or_zombie(spare));
        usleep(50000);
        CHECK(adjusted(""));
        CHECK(std::atoi(slurp(t.path + "/eval.pid").c_str()) != spare);
        CHECK(rt.close_and_wait() == 0);
        CHECK_THAT(slurp(t.path + "/relay.log"), Catch::Contains("spare evaluator " + std::to_string(spare) + " killed by signal 9"));
    }
    SECTION("zygote killed from outside") {
        pid_t zygote = std::atoi(wait_file(t.path + "/zygote.pid").c_str());
        REQUIRE(zygote > 0);
        REQUIRE(kill(zygote, SIGKILL) == 0);
        usleep(50000);
        for (int i = 0; i < 3; ++i) CHECK(adjusted(""));
        pid_t again = std::atoi(wait_file(t.path + "/zygote.pid").c_str());
        CHECK(again != zygote);
        CHECK(has(children_of(rt.pid()), again));
        CHECK(rt.close_and_wait() == 0);
        CHECK_THAT(slurp(t.path + "/relay.log"), Catch::Contains("evaluator zygote " + std::to_string(zygote)));
    }
    SECTION("a crashing evaluator fails that event only") {
        rt.request(s += 2, "CreateContainer", create_request("crash"));
        nriqos::nri::ResponseEnvelope r = rt.reply(s);
        CHECK(r.code == 0);
        CHECK(r.payload.empty());
        CHECK(adjusted(""));
        CHECK(adjusted(""));
        CHECK(rt.close_and_wait() == 0);
        CHECK_THAT(slurp(t.path + "/relay.log"), Catch::Contains("evaluation failed: child killed by signal 11; failing open"));
    }
    SECTION("a complete answer counts without waiting for the exit") {
        rt.request(s += 2, "CreateContainer", create_request("exit3"));
        nriqos::nri::ResponseEnvelope r = rt.reply(s);
        REQUIRE(r.code == 0);
        pb::CreateContainerResponse rsp;
        REQUIRE(rsp.ParseFromString(r.payload));
        CHECK(rsp.adjust().annotations().at("after") == "exit3");
        CHECK(rt.close_and_wait() == 0);
    }
}

namespace {
// An evaluator's answer (child contract) whose adjustment carries `r` as annotations: how the
// in-process test evaluators below report what they observed from inside their sandbox.
void answer_annotations(const std::map<std::string, std::string>& r) {
    std::string out = "{\"adjustment\":{\"annotations\":{";
    bool first = true;
    for (auto& kv : r) {
        out += std::string(first ? "" : ",") + "\"" + kv.first + "\":\"" + kv.second + "\"";
        first = false;
    }
    out += "}}}";
    ssize_t n = write(1, out.data(), out.size());
    (void)n;
}
}  // namespace

namespace {
// Evaluator options on a scratch tree `dir`: cg/, proc/, resctrl/, state/, cache/ and p.toml.
nriqos::Options scratch_eval_options(const std::string& dir) {
    nriqos::Options eo;
    eo.cgroup_root = dir + "/cg";
    eo.proc_root = dir + "/proc";
    eo.resctrl_root = dir + "/resctrl";
    eo.state_dir = dir + "/state";
    eo.cache_dir = dir + "/cache";
    eo.policy = dir + "/p.toml";
    return eo;
}
}  // namespace

TEST_CASE("relay (fork): the real evaluator is confined before the event", "[nri][relay][sandbox][confined]") {
    if (nriqos::sandbox_disabled_by_env()) {
        WARN("NRI_QOS_NO_SANDBOX set; skipped");
        return;
    }
    TempDir t;
    mkdir((t.path + "/cg").c_str(), 0755);
    mkdir((t.path + "/outside").c_str(), 0755);
    nriqos::Options eo = scratch_eval_options(t.path);
    nriqos::nri::RelayOptions o = child_opts(t.path, 1500, true);
    o.inproc = nriqos::nri::pipeline_evaluator(eo);  // the real prepare (sandbox) and detach
    std::string dir = t.path;
    o.inproc.evaluate = [dir](int) -> int {  // instead of the pipeline: try what it must not do
        auto err = [](int rc) { return rc >= 0 ? std::string("ok") : std::string(strerrorname_np(errno)); };
        std::map<std::string, std::string> r;
        r["socket"] = err(socket(AF_INET, SOCK_STREAM, 0));
        char* argv[] = {const_cast<char*>("/bin/true"), nullptr};
        r["execve"] = err(execve("/bin/true", argv, environ));
        r["clone"] = err(int(syscall(SYS_clone, CLONE_PARENT | SIGCHLD, 0, nullptr, nullptr, 0)));
        r["prctl"] = err(prctl(PR_SET_PDEATHSIG, SIGKILL));
        r["outside"] = err(open((dir + "/outside/x").c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644));
        r["inside"] = err(open((dir + "/cg/x").c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644));
        answer_annotations(r);
        return 0;
    };
    FakeRuntime rt(o, t.path + "/relay.log");
    rt.handshake();
    rt.request(3, "CreateContainer", create_request(""));
    nriqos::nri::ResponseEnvelope r = rt.reply(3);
    REQUIRE(r.code == 0);
    pb::CreateContainerResponse rsp;
    REQUIRE(rsp.ParseFromString(r.payload));
    const auto& a = rsp.adjust().annotations();
    CHECK(a.at("socket") == "EPERM");
    CHECK(a.at("execve") == "EPERM");
    CHECK(a.at("clone") == "EPERM");  // the zygote may clone; its spares may not
    CHECK(a.at("prctl") == "EPERM");
    CHECK(a.at("inside") == "ok");
    if (nriqos::landlock_abi_version() > 0) CHECK(a.at("outside") == "EACCES");
    CHECK(rt.close_and_wait() == 0);
}

// Issue #13: a zygote's spare narrows with a ruleset it readied before its event (its own: a
// ruleset fd is one kernel object), from the directories the zygote opened. Two spares of the
// same zygote narrow to two different pids: each may write beneath its own /proc/<pid> only (a
// ruleset shared between spares would let the second one write to the first one's pid too),
// still beneath the static roots, never outside them nor beneath the procfs root itself.
TEST_CASE("relay (fork): each spare of the zygote narrows to its own /proc/<pid>", "[nri][relay][sandbox][confined]") {
    if (nriqos::sandbox_disabled_by_env() || nriqos::landlock_abi_version() == 0) {
        WARN("NRI_QOS_NO_SANDBOX set or no Landlock; skipped");
        return;
    }
    TempDir t;
    for (const char* d : {"/cg", "/outside", "/proc", "/proc/111", "/proc/222"}) mkdir((t.path + d).c_str(), 0755);
    for (const char* f : {"/proc/111/oom_score_adj", "/proc/222/oom_score_adj", "/proc/sysrq", "/outside/victim"}) put_file(t.path + f, "0");
    nriqos::Options eo = scratch_eval_options(t.path);
    nriqos::nri::RelayOptions o = child_opts(t.path, 1500, true);
    o.inproc = nriqos::nri::pipeline_evaluator(eo);  // the real prepare (zygote sandbox) and detach
    std::string dir = t.path;
    o.inproc.evaluate = [dir](int) -> int {  // instead of the pipeline: narrow as it does, then try
        std::string in;
        char buf[4096];
        for (ssize_t n; (n = read(0, buf, sizeof buf)) > 0;) in.append(buf, size_t(n));
        long pid = in.find("ctr-first") != std::string::npos ? 111 : 222;
        long other = pid == 111 ? 222 : 111;
        auto w = [](const std::string& path, bool create) {
            int fd = open(path.c_str(), O_WRONLY | O_CLOEXEC | (create ? O_CREAT : 0), 0644);
            if (fd < 0) return std::string(strerrorname_np(errno));
            close(fd);
            return std::string("ok");
        };
        std::map<std::string, std::string> r;
        r["narrow"] = nriqos::narrow_installed_sandbox(pid);
        r["own"] = w(dir + "/proc/" + std::to_string(pid) + "/oom_score_adj", false);
        r["other"] = w(dir + "/proc/" + std::to_string(other) + "/oom_score_adj", false);
        r["procroot"] = w(dir + "/proc/sysrq", false);
        r["cgroup"] = w(dir + "/cg/x" + std::to_string(pid), true);
        r["outside"] = w(dir + "/outside/victim", false);
        answer_annotations(r);
        return 0;
    };
    FakeRuntime rt(o, t.path + "/relay.log");
    rt.handshake();
    uint32_t s = 3;
    for (const char* mode : {"first", "second"}) {
        INFO(mode);
        rt.request(s, "CreateContainer", create_request(mode));
        nriqos::nri::ResponseEnvelope r = rt.reply(s);
        s += 2;
        REQUIRE(r.code == 0);
        pb::CreateContainerResponse rsp;
        REQUIRE(rsp.ParseFromString(r.payload));
        const auto& a = rsp.adjust().annotations();
        REQUIRE(a.count("narrow") == 1);
        CHECK(a.at("narrow") == "");
        CHECK(a.at("own") == "ok");
        CHECK(a.at("other") == "EACCES");
        CHECK(a.at("procroot") == "EACCES");
        CHECK(a.at("cgroup") == "ok");
        CHECK(a.at("outside") == "EACCES");
    }
    CHECK(slurp(t.path + "/outside/victim") == "0");
    CHECK(rt.close_and_wait() == 0);
}

TEST_CASE("relay: the zygote's prober compiles the policy (and its last good copy) outside the events, again when it changes",
          "[nri][relay][policy]") {
    TempDir t;
    nriqos::Options eo = scratch_eval_options(t.path);
    const std::string lg = nriqos::last_good_dir_of(eo);
    nriqos::nri::InProcessEval ev = nriqos::nri::pipeline_evaluator(eo);
    auto policy = [&](int shares, const char* fail) {
        put_file(eo.policy, std::string("version = 1\n[settings]\ndefault_class = \"BE\"\nfail = \"") + fail +
                                "\"\n[classes.BE.container]\ncpu_shares = " + std::to_string(shares) + "\n");
    };
    // In the cache, for the file as it is now (a read-only load: no compile of its own)?
    auto compiled = [&] { return nriqos::load_policy_file(eo.policy, eo.cache_dir, nullptr, false).from_cache; };
    policy(2, "closed");
    // The zygote's first prober (when it starts): the fail mode, and the policy compiled into the
    // cache and saved as the last good copy, so that no event has to compile it.
    CHECK(ev.probe_fail_mode() == 1);
    CHECK(compiled());
    CHECK(slurp(lg + "/" + nriqos::last_good_name(eo.policy)) == slurp(eo.policy));
    CHECK(nriqos::last_good_fail_closed(lg, eo.policy) == std::optional<bool>(true));
    // Before a spare: compiled, nothing to do.
    CHECK_FALSE(ev.before_spare());
    // Edited (the relay runs for weeks): the next spare's preparation notices it once, and a
    // prober compiles it; until then, no second prober for the same version.
    policy(33, "open");
    CHECK_FALSE(compiled());
    CHECK(ev.before_spare());
    CHECK_FALSE(ev.before_spare());
    CHECK(ev.probe_fail_mode() == 0);
    CHECK(compiled());
    CHECK(nriqos::last_good_fail_closed(lg, eo.policy) == std::optional<bool>(false));
    CHECK_FALSE(ev.before_spare());
}

TEST_CASE("relay (fork): the real pipeline reads the policy file's current contents at every event", "[nri][relay]") {
    TempDir t;
    for (const char* d : {"/cg", "/state", "/cache", "/proc"}) mkdir((t.path + d).c_str(), 0755);
    auto policy = [&](int shares) {
        put_file(t.path + "/p.toml",
                 "version = 1\n[settings]\ndefault_class = \"BE\"\n[classes.BE.container]\ncpu_shares = " + std::to_string(shares) + "\n");
    };
    policy(2);
    nriqos::Options eo = scratch_eval_options(t.path);
    eo.policy_from_flag = true;
    eo.layout = nriqos::Layout::V1;
    nriqos::nri::RelayOptions o = child_opts(t.path, 1500, true);
    o.inproc = nriqos::nri::pipeline_evaluator(eo);
    FakeRuntime rt(o, t.path + "/relay.log");
    rt.handshake();
    auto shares = [&](uint32_t s) {
        rt.request(s, "CreateContainer", create_request(""));
        nriqos::nri::ResponseEnvelope r = rt.reply(s);
        pb::CreateContainerResponse rsp;
        if (r.code != 0 || !rsp.ParseFromString(r.payload)) return uint64_t(0);
        return uint64_t(rsp.adjust().linux().resources().cpu().shares().value());
    };
    CHECK(shares(3) == 2);
    usleep(20000);  // the spare for the next event is ready and idle when the file changes
    policy(7);
    CHECK(shares(5) == 7);
    policy(5);
    CHECK(shares(7) == 5);
    // The zygote now holds the compiled entry of this version in memory (policy_cache::preload,
    // before each spare): unchanged, it is used; edited while a spare holds it, never.
    CHECK(shares(9) == 5);
    CHECK(shares(11) == 5);
    usleep(20000);
    policy(3);
    CHECK(shares(13) == 3);
    CHECK(shares(15) == 3);
    CHECK(rt.close_and_wait() == 0);
    CHECK_THAT(slurp(t.path + "/relay.log"), !Catch::Contains("failed"));
}

// Issue #30 item 5: a fail-closed policy of 10,000 rules, just written (no compiled entry, no
// last good copy), while the relay runs. The event's evaluator compiles it, and its own deadline
// (the relay's 1,500 ms less the child margin) fires long before the compile ends (about 4 s
// for 10,000 rules on an idle machine, BENCHMARKS.md "cold path"; more under load). Its answer
// must be the file's settings.fail (closed, read ahead of the compile): the container is
// refused. Before, it was the built-in policy's (open): the container started unadjusted.
TEST_CASE("relay (real pipeline): a fail-closed 10,000-rule policy just written fails closed at the deadline of its compile",
          "[nri][relay][policy]") {
    TempDir t;
    for (const char* d : {"/cg", "/state", "/cache", "/proc"}) mkdir((t.path + d).c_str(), 0755);
    const std::string small = "version = 1\n[settings]\ndefault_class = \"BE\"\n[classes.BE.container]\ncpu_shares = 2\n";
    put_file(t.path + "/p.toml", small);  // fail-open: the relay's own mode stays open
    nriqos::Options eo = scratch_eval_options(t.path);
    eo.policy_from_flag = true;
    eo.layout = nriqos::Layout::V1;
    eo.last_good_dir_set = true;
    eo.last_good_dir = "";  // no last good copy
    nriqos::nri::RelayOptions o = child_opts(t.path, 1500, true);
    o.inproc = nriqos::nri::pipeline_evaluator(eo);
    FakeRuntime rt(o, t.path + "/relay.log");
    rt.handshake();
    rt.request(3, "CreateContainer", create_request(""));
    REQUIRE(rt.reply(3).code == 0);  // served with the small policy (compiled by the zygote's prober)
    usleep(20000);  // the spare for the next event is ready and idle when the file changes
    std::string big = "version = 1\n[settings]\ndefault_class = \"BE\"\nfail = \"closed\"\n[classes.BE.container]\ncpu_shares = 2\n[classes.LS]\n";
    for (int i = 1; i <= 10000; ++i)
        big += "[[rules]]\nname = \"gen-" + std::to_string(i) + "\"\nclass = \"LS\"\nmatch.labels = { \"app\" = \"svc-" + std::to_string(i) +
               "\" }\nmatch.namespace = [\"tenant-" + std::to_string(i) + "\", \"tenant-" + std::to_string(i) + "-staging\"]\n";
    put_file(t.path + "/p.toml.tmp", big);
    REQUIRE(rename((t.path + "/p.toml.tmp").c_str(), (t.path + "/p.toml").c_str()) == 0);
    int64_t t0 = mono_ms();
    rt.request(5, "CreateContainer", create_request(""));
    nriqos::nri::ResponseEnvelope r = rt.reply(5, 5000);
    CAPTURE(r.message, mono_ms() - t0);
    CHECK(r.code == 2);
    CHECK_THAT(r.message, Catch::Contains("while the policy was being compiled: fail-closed (the policy file's settings.fail, read ahead of "
                                          "its compile), container refused"));
    CHECK(mono_ms() - t0 < 1500);
    CHECK(rt.close_and_wait() == 0);
}

namespace {

// A relay with the real pipeline in fork mode on a scratch tree of `layout`, with `policy`.
struct RealRelay {
    TempDir t;
    std::unique_ptr<FakeRuntime> rt;
    RealRelay(const std::string& policy, nriqos::Layout layout, const std::vector<std::string>& files,
              const std::string& runtime_version = "2.1.9~ds1", int64_t request_timeout_ms = 0, bool sync_batch = true) {
        for (const char* d : {"/cg", "/state", "/cache", "/proc"}) mkdir((t.path + d).c_str(), 0755);
        for (const auto& f : files) {
            std::string cmd = "mkdir -p \"$(dirname '" + t.path + "/cg/" + f + "')\" && echo 0 > '" + t.path + "/cg/" + f + "'";
            REQUIRE(system(cmd.c_str()) == 0);
        }
        put_file(t.path + "/p.toml", policy);
        nriqos::Options eo = scratch_eval_options(t.path);
        eo.policy_from_flag = true;
        eo.layout = layout;
        eo.event_log = t.path + "/events.log";  // the record of each event (never the node's own)
        eo.metrics_file = t.path + "/nri_qos.prom";
        nriqos::nri::RelayOptions o = child_opts(t.path, 1500, true);
        o.inproc = nriqos::nri::pipeline_evaluator(eo);
        o.inproc.synchronize_batch = sync_batch;  // false: one evaluator per pod and container (the old path)
        rt.reset(new FakeRuntime(o, t.path + "/relay.log"));
        mkdir((t.path + "/proc/4242").c_str(), 0755);
        put_file(t.path + "/proc/4242/oom_score_adj", "0");
        rt->handshake("", runtime_version, "", request_timeout_ms);
    }
    std::string cg(const std::string& rel) { return slurp(t.path + "/cg/" + rel); }
};

pb::Container burstable_ctr(int64_t quota, int64_t mem) {
    pb::Container c;
    c.set_id("ctr-u");
    c.set_pod_sandbox_id("sb-");
    c.set_name("app");
    c.set_pid(4242);
    auto* r = c.mutable_linux()->mutable_resources();
    r->mutable_cpu()->mutable_shares()->set_value(512);
    r->mutable_cpu()->mutable_quota()->set_value(quota);
    r->mutable_cpu()->mutable_period()->set_value(100000);
    r->mutable_memory()->mutable_limit()->set_value(mem);
    c.mutable_linux()->set_cgroups_path("/kubepods/burstable/podu/ctr-u");
    return c;
}

}  // namespace

TEST_CASE("relay (real pipeline): updates keep the class in force; percentages follow the new limits", "[nri][relay]") {
    const std::string policy =
        "version = 1\n[settings]\ndefault_class = \"C\"\n[classes.C.container]\n"
        "cpu_shares = 2\ncpu_burst_us = \"100%\"\nmemory_high = \"90%\"\n";
    SECTION("cgroup v1: shares in the update; burst (written by nri-qos) again after the update") {
        RealRelay rr(policy, nriqos::Layout::V1, {"cpu/kubepods/burstable/podu/ctr-u/cpu.cfs_burst_us"});
        mkdir((rr.t.path + "/cg/memory").c_str(), 0755);  // memory.high: no such v1 file (skipped), the cgroup exists
        REQUIRE(system(("mkdir -p '" + rr.t.path + "/cg/memory/kubepods/burstable/podu/ctr-u'").c_str()) == 0);
        FakeRuntime& rt = *rr.rt;
        // the static CPU manager: cpuset only (zero wrappers)
        pb::UpdateContainerRequest up;
        *up.mutable_pod() = make_pod("");
        *up.mutable_container() = burstable_ctr(50000, 64 << 20);
        auto* lr = up.mutable_linux_resources();
        lr->mutable_cpu()->mutable_shares()->set_value(0);
        lr->mutable_cpu()->mutable_quota()->set_value(0);
        lr->mutable_memory()->mutable_limit()->set_value(0);
        lr->mutable_cpu()->set_cpus("1");
        rt.request(3, "UpdateContainer", up.SerializeAsString());
        nriqos::nri::ResponseEnvelope r = rt.reply(3);
        REQUIRE(r.code == 0);
        pb::UpdateContainerResponse rsp;
        REQUIRE(rsp.ParseFromString(r.payload));
        REQUIRE(rsp.update_size() == 1);
        CHECK(rsp.update(0).linux().resources().cpu().shares().value() == 2);  // BE-like shares stay 2
        // after the runtime's update (resize to quota 80000): the burst follows the new quota
        pb::StateChangeEvent post;
        post.set_event(pb::POST_UPDATE_CONTAINER);
        *post.mutable_pod() = make_pod("");
        *post.mutable_container() = burstable_ctr(80000, 128 << 20);
        rt.request(5, "StateChange", post.SerializeAsString());
        CHECK(rt.reply(5).code == 0);
        CHECK(rr.cg("cpu/kubepods/burstable/podu/ctr-u/cpu.cfs_burst_us") == "80000");
        CHECK(rt.close_and_wait() == 0);
        CHECK_THAT(slurp(rr.t.path + "/relay.log"), !Catch::Contains("failed"));
    }
    SECTION("cgroup v2: memory.high and cpu.max.burst of the resized limits travel in the update") {
        RealRelay rr(policy, nriqos::Layout::V2,
                     {"kubepods/burstable/podu/memory.high", "kubepods/burstable/podu/cpu.max.burst", "kubepods/burstable/podu/ctr-u/memory.high"});
        FakeRuntime& rt = *rr.rt;
        pb::UpdateContainerRequest up;
        *up.mutable_pod() = make_pod("");
        *up.mutable_container() = burstable_ctr(50000, 64 << 20);
        auto* lr = up.mutable_linux_resources();  // in-place resize: quota 80000, 128 MiB
        lr->mutable_cpu()->mutable_shares()->set_value(1024);
        lr->mutable_cpu()->mutable_quota()->set_value(80000);
        lr->mutable_cpu()->mutable_period()->set_value(100000);
        lr->mutable_memory()->mutable_limit()->set_value(128 << 20);
        rt.request(3, "UpdateContainer", up.SerializeAsString());
        nriqos::nri::ResponseEnvelope r = rt.reply(3);
        REQUIRE(r.code == 0);
        pb::UpdateContainerResponse rsp;
        REQUIRE(rsp.ParseFromString(r.payload));
        REQUIRE(rsp.update_size() == 1);
        const auto& res = rsp.update(0).linux().resources();
        CHECK(res.cpu().shares().value() == 2);
        CHECK(res.unified().at("memory.high") == std::to_string((int64_t(128) << 20) * 90 / 100));
        CHECK(res.unified().at("cpu.max.burst") == "80000");
        CHECK(rt.close_and_wait() == 0);
    }
}

namespace {

// The runtime's view of a node for Synchronize: `pods` pods with `per_pod` containers each,
// cgroup v1 paths below /kubepods/burstable/pod<i>; `files` gets the cgroup files the test
// policy writes (pod cpu.shares, container cpu.cfs_burst_us) relative to the cgroup root.
void sync_node(int pods, int per_pod, std::vector<pb::PodSandbox>& out_pods, std::vector<pb::Container>& out_ctrs,
               std::vector<std::string>* files = nullptr) {
    for (int i = 0; i < pods; ++i) {
        pb::PodSandbox p;
        std::string n = std::to_string(i);
        p.set_id("sb" + n);
        p.set_name("pod" + n);
        p.set_uid("uid" + n);
        p.set_namespace_("default");
        (*p.mutable_annotations())["io.kubernetes.cri.annotation-x"] = std::string(60, 'x');
        p.mutable_linux()->set_cgroup_parent("/kubepods/burstable/pod" + n);
        p.mutable_linux()->set_cgroups_path("/kubepods/burstable/pod" + n + "/sb" + n);
        out_pods.push_back(p);
        if (files) files->push_back("cpu/kubepods/burstable/pod" + n + "/cpu.shares");
        for (int j = 0; j < per_pod; ++j) {
            pb::Container c = sync_ctr("c" + n + "-" + std::to_string(j), "sb" + n, pb::CONTAINER_RUNNING);
            c.set_pid(4242);
            auto* r = c.mutable_linux()->mutable_resources();
            r->mutable_cpu()->mutable_shares()->set_value(512);
            r->mutable_cpu()->mutable_quota()->set_value(50000);
            r->mutable_cpu()->mutable_period()->set_value(100000);
            r->mutable_memory()->mutable_limit()->set_value(64 << 20);
            c.mutable_linux()->set_cgroups_path("/kubepods/burstable/pod" + n + "/" + c.id());
            if (files) files->push_back("cpu/kubepods/burstable/pod" + n + "/" + c.id() + "/cpu.cfs_burst_us");
            out_ctrs.push_back(c);
        }
    }
}

// Send a node's state as Synchronize in `parts` parts (pods first, as NRI pkg/adaptation splits
// it); returns the last part's reply and, in `took_ms`, the time from the first part to it.
pb::SynchronizeResponse sync_node_in_parts(FakeRuntime& rt, const std::vector<pb::PodSandbox>& pods, const std::vector<pb::Container>& ctrs,
                                           int parts, int64_t& took_ms, int64_t runtime_timeout_ms = 2000) {
    size_t total = pods.size() + ctrs.size(), per = (total + size_t(parts) - 1) / size_t(parts), k = 0;
    uint32_t stream = 101;
    int64_t t0 = mono_ms();
    pb::SynchronizeResponse rsp;
    for (int part = 0; part < parts; ++part) {
        pb::SynchronizeRequest req;
        for (size_t n = 0; n < per && k < total; ++n, ++k) {
            if (k < pods.size()) *req.add_pods() = pods[k];
            else *req.add_containers() = ctrs[k - pods.size()];
        }
        req.set_more(part + 1 < parts);
        // the runtime's context spans every part: what is left of its timeout (containerd: 2 s)
        int64_t left_ns = (runtime_timeout_ms - (mono_ms() - t0)) * 1000000;
        rt.request(stream, "Synchronize", req.SerializeAsString(), left_ns);
        nriqos::nri::ResponseEnvelope r = rt.reply(stream, int(runtime_timeout_ms + 3000));
        REQUIRE(r.code == 0);
        rsp.Clear();
        REQUIRE(rsp.ParseFromString(r.payload));
        REQUIRE(rsp.more() == req.more());
        if (req.more()) REQUIRE(rsp.update_size() == 0);
        stream += 2;
    }
    took_ms = mono_ms() - t0;
    return rsp;
}

}  // namespace

// Issue #20, the real pipeline: at Synchronize each pod gets its pod knobs and its class memo
// (so that status/reconcile and the pod's next container event know it), each container its
// NRI fields in the reply's update and the rest written by nri-qos, and every evaluation leaves
// an event record "Synchronize". Old code: empty reply, nothing written, no memo, no record.
TEST_CASE("relay (real pipeline): Synchronize of 20 containers in 2 parts", "[nri][relay][sync]") {
    const std::string policy =
        "version = 1\n[settings]\ndefault_class = \"C\"\n[classes.C.container]\ncpu_shares = 2\ncpu_burst_us = 5000\n"
        "[classes.C.pod]\ncpu_shares = 3\n";
    std::vector<pb::PodSandbox> pods;
    std::vector<pb::Container> ctrs;
    std::vector<std::string> files;
    sync_node(10, 2, pods, ctrs, &files);
    // A generous runtime timeout: this checks what is done, not how fast (bench/sync.sh measures
    // that; under a loaded CI machine 30 evaluations may exceed containerd's 2 s).
    RealRelay rr(policy, nriqos::Layout::V1, files, "2.1.9~ds1", 30000);
    int64_t took = 0;
    pb::SynchronizeResponse rsp = sync_node_in_parts(*rr.rt, pods, ctrs, 2, took, 30000);
    INFO(slurp(rr.t.path + "/relay.log"));
    REQUIRE(rsp.update_size() == 20);
    for (int i = 0; i < 20; ++i) {
        CHECK(rsp.update(i).container_id() == ctrs[size_t(i)].id());
        CHECK(rsp.update(i).linux().resources().cpu().shares().value() == 2);
    }
    CHECK(rr.rt->close_and_wait() == 0);
    for (int i = 0; i < 10; ++i) {
        std::string n = std::to_string(i);
        CHECK(rr.cg("cpu/kubepods/burstable/pod" + n + "/cpu.shares") == "3");
        CHECK(rr.cg("cpu/kubepods/burstable/pod" + n + "/c" + n + "-1/cpu.cfs_burst_us") == "5000");
        std::string memo = slurp(rr.t.path + "/state/sb" + n + ".json");
        CHECK_THAT(memo, Catch::Contains("\"C\""));
    }
    std::istringstream log(slurp(rr.t.path + "/events.log"));
    std::string line;
    int pod_recs = 0, ctr_recs = 0;
    while (std::getline(log, line)) {
        json j = json::parse(line);
        if (j.value("event", "") != "Synchronize") continue;
        if (j.value("container", "").empty()) ++pod_recs;
        else ++ctr_recs;
    }
    CHECK(pod_recs == 10);
    CHECK(ctr_recs == 20);
    CHECK_THAT(slurp(rr.t.path + "/relay.log"), Catch::Contains("30 evaluated, 0 failed (open), 0 not evaluated; 20 container updates"));
}

// Issue #20/#22: a node too large (or too slow) for one request timeout. The relay answers the
// pass by its deadline with the updates it has, and evaluates the rest after the reply as
// "SynchronizeLate": every knob of those containers written directly (cpu.shares in the file,
// not in an update nobody would read), each on record. Old code: the rest failed open, never
// classified until the container's next event.
TEST_CASE("relay (real pipeline): a Synchronize pass past its deadline answers in time and classifies the rest after the reply",
          "[nri][relay][sync]") {
    const std::string policy =
        "version = 1\n[settings]\ndefault_class = \"C\"\n[classes.C.container]\ncpu_shares = 2\ncpu_burst_us = 5000\n"
        "[classes.C.pod]\ncpu_shares = 3\n";
    std::vector<pb::PodSandbox> pods;
    std::vector<pb::Container> ctrs;
    std::vector<std::string> files;
    const int kPods = 40;
    sync_node(kPods, 2, pods, ctrs, &files);
    for (const auto& c : ctrs) {
        std::string d = "cpu/kubepods/burstable/pod" + c.pod_sandbox_id().substr(2) + "/" + c.id();
        files.push_back(d + "/cpu.shares");
    }
    // containerd's request timeout 400 ms: the relay's cut is 150 ms after the first part, far
    // less than 120 sandboxed evaluations take.
    RealRelay rr(policy, nriqos::Layout::V1, files, "2.1.9~ds1", 400);
    int64_t took = 0;
    pb::SynchronizeResponse rsp = sync_node_in_parts(*rr.rt, pods, ctrs, 2, took, 400);
    CHECK(took < 400 + 100);  // answered by the runtime's deadline (a little slack for the poll loop)
    CHECK(rsp.update_size() < 2 * kPods);
    std::set<std::string> updated;
    for (int i = 0; i < rsp.update_size(); ++i) updated.insert(rsp.update(i).container_id());
    // the late evaluations end with one log line; then everything is on file
    std::string log;
    for (int64_t end = mono_ms() + 60000; mono_ms() < end; usleep(20000)) {
        log = slurp(rr.t.path + "/relay.log");
        if (log.find("evaluated late") != std::string::npos) break;
    }
    INFO(log);
    REQUIRE_THAT(log, Catch::Contains("evaluated after this reply (SynchronizeLate)") && Catch::Contains("evaluated late"));
    CHECK(rr.rt->close_and_wait() == 0);
    int late_direct = 0;
    for (int i = 0; i < kPods; ++i) {
        std::string n = std::to_string(i);
        CHECK(rr.cg("cpu/kubepods/burstable/pod" + n + "/cpu.shares") == "3");
        for (int j = 0; j < 2; ++j) {
            std::string id = "c" + n + "-" + std::to_string(j);
            CHECK(rr.cg("cpu/kubepods/burstable/pod" + n + "/" + id + "/cpu.cfs_burst_us") == "5000");
            if (!updated.count(id)) {  // not in the reply: its shares written by nri-qos itself
                CHECK(rr.cg("cpu/kubepods/burstable/pod" + n + "/" + id + "/cpu.shares") == "2");
                ++late_direct;
            }
        }
    }
    CHECK(late_direct > 0);
    std::istringstream events(slurp(rr.t.path + "/events.log"));
    std::string line;
    int sync_recs = 0, late_recs = 0;
    while (std::getline(events, line)) {
        json j = json::parse(line);
        if (j.value("event", "") == "Synchronize") ++sync_recs;
        if (j.value("event", "") == "SynchronizeLate") ++late_recs;
    }
    CHECK(late_recs > 0);
    CHECK(sync_recs + late_recs == 3 * kPods);
    // the end-of-pass line counts exactly the evaluations made late (one SynchronizeLate record each)
    CHECK_THAT(slurp(rr.t.path + "/relay.log"), Catch::Contains(" " + std::to_string(late_recs) + " pods/containers evaluated late"));
}

namespace {

// What a Synchronize pass leaves, for comparing two ways of evaluating it: the reply's updates,
// the files written (cgroup, procfs), the pod memos, the event records (minus times and the
// evaluator's pid) and the relay's summary line.
struct SyncResult {
    std::vector<std::string> updates;  // container id + its update, in reply order
    std::map<std::string, std::string> files;
    std::map<std::string, std::string> memos;
    std::vector<std::string> records;  // event-log lines without times
    std::string summary;  // "N evaluated, M failed (open), ..."
    std::string log;
};

std::vector<json> wait_records(const std::string& dir, size_t n);

json without_times(json j) {
    if (!j.is_object()) return j;
    for (auto it = j.begin(); it != j.end();) {
        const std::string& k = it.key();
        if (k == "ts" || k == "time" || k == "pid" || k.find("duration") != std::string::npos || k.find("_us") != std::string::npos ||
            k.find("_ms") != std::string::npos || k == "start_ns" ||
            k == "evaluator")  // which process served it (synchronize-pass vs one-shot), not what it did
            it = j.erase(it);
        else {
            *it = without_times(*it);
            ++it;
        }
    }
    return j;
}

// A node of three classes (namespace rules), each container with a pid of its own (its
// oom_score_adj written by nri-qos: the sandbox's procfs narrowing must cover every one), and one
// hostile container whose id the request parser refuses (its evaluation fails, the others not).
SyncResult sync_classes(bool batch) {
    const std::string policy =
        "version = 1\n[settings]\ndefault_class = \"C\"\n"
        "[[rules]]\nname = \"be\"\nclass = \"BE\"\nmatch.namespace = [\"batch\"]\n"
        "[[rules]]\nname = \"ls\"\nclass = \"LS\"\nmatch.namespace = [\"online\"]\n"
        "[classes.C.container]\ncpu_shares = 2\ncpu_burst_us = 5000\n[classes.C.pod]\ncpu_shares = 3\n"
        "[classes.BE.container]\ncpu_shares = 4\noom_score_adj = 900\n[classes.BE.pod]\ncpu_shares = 5\n"
        "[classes.LS.container]\ncpu_burst_us = 7000\noom_score_adj = -500\n";
    std::vector<pb::PodSandbox> pods;
    std::vector<pb::Container> ctrs;
    std::vector<std::string> files;
    sync_node(6, 2, pods, ctrs, &files);
    const char* ns[] = {"default", "batch", "online"};
    for (size_t i = 0; i < pods.size(); ++i) pods[i].set_namespace_(ns[i % 3]);
    for (size_t i = 0; i < ctrs.size(); ++i) {
        ctrs[i].set_pid(uint32_t(5000 + i));
        std::string d = "cpu/kubepods/burstable/pod" + ctrs[i].pod_sandbox_id().substr(2) + "/" + ctrs[i].id();
        files.push_back(d + "/cpu.shares");
    }
    pb::Container evil = sync_ctr("../../evil", "sb1", pb::CONTAINER_RUNNING);
    evil.set_pid(6000);
    evil.mutable_linux()->set_cgroups_path("/kubepods/burstable/pod1/evil");
    ctrs.insert(ctrs.begin() + 3, evil);
    RealRelay rr(policy, nriqos::Layout::V1, files, "2.1.9~ds1", 30000, batch);
    for (size_t i = 0; i < ctrs.size(); ++i) {
        std::string d = rr.t.path + "/proc/" + std::to_string(ctrs[i].pid());
        mkdir(d.c_str(), 0755);
        put_file(d + "/oom_score_adj", "0");
    }
    int64_t took = 0;
    pb::SynchronizeResponse rsp = sync_node_in_parts(*rr.rt, pods, ctrs, 2, took, 30000);
    SyncResult res;
    for (const auto& u : rsp.update()) { res.updates.push_back(u.container_id() + " " + u.SerializeAsString()); }
    CHECK(rr.rt->close_and_wait() == 0);
    for (const auto& f : files) res.files["cg/" + f] = rr.cg(f);
    for (const auto& c : ctrs)
        res.files["proc/" + std::to_string(c.pid())] = slurp(rr.t.path + "/proc/" + std::to_string(c.pid()) + "/oom_score_adj");
    for (const auto& p : pods) res.memos[p.id()] = slurp(rr.t.path + "/state/" + p.id() + ".json");
    std::istringstream log(slurp(rr.t.path + "/events.log"));
    std::string line;
    while (std::getline(log, line)) res.records.push_back(without_times(json::parse(line)).dump());
    res.log = slurp(rr.t.path + "/relay.log");
    size_t at = res.log.find(" part(s)): ");
    if (at != std::string::npos) res.summary = res.log.substr(at, res.log.find(';', at) - at);
    return res;
}

}  // namespace

// Issue #31 §8: a Synchronize request is evaluated in ONE sandboxed process. Whatever the way,
// every pod and container must end as it did with one evaluator per item: the same updates in
// the reply, the same cgroup and procfs files (oom_score_adj of containers with pids of their own:
// the sandbox's narrowing to the union of their /proc/<pid>), the same memos, the same records;
// and a container whose evaluation fails (a hostile id) does not keep the others from being
// answered. Old code (one process per item): the same results, one clone each (bench/sync.sh).
TEST_CASE("relay (real pipeline): Synchronize in one evaluator leaves what one evaluator per item left", "[nri][relay][sync]") {
    SyncResult one = sync_classes(true);
    SyncResult per = sync_classes(false);
    INFO("one evaluator: " << one.log);
    INFO("per item: " << per.log);
    CHECK(one.updates == per.updates);
    CHECK(one.files == per.files);
    CHECK(one.memos == per.memos);
    // the same records; their order in the log is the order their writers got to it (one
    // evaluator per item: up to kMaxFinishing write theirs at once)
    std::vector<std::string> a = one.records, b = per.records;
    std::sort(a.begin(), a.end());
    std::sort(b.begin(), b.end());
    CHECK(a == b);
    CHECK(one.summary == per.summary);
    // the classes as the policy says, so that the comparison compares something
    CHECK(one.updates.size() == 8);  // C and BE containers (cpu_shares); LS sets none NRI carries; not the hostile one
    CHECK(one.files["cg/cpu/kubepods/burstable/pod0/cpu.shares"] == "3");
    CHECK(one.files["cg/cpu/kubepods/burstable/pod1/cpu.shares"] == "5");
    CHECK(one.files["cg/cpu/kubepods/burstable/pod2/c2-1/cpu.cfs_burst_us"] == "7000");
    CHECK(one.files["cg/cpu/kubepods/burstable/pod0/c0-0/cpu.cfs_burst_us"] == "5000");
    CHECK(one.files["proc/5002"] == "900");  // pod1's first container (BE)
    CHECK(one.files["proc/5005"] == "-500");  // pod2's second (LS); the hostile one shifted the list
    CHECK(one.files["proc/6000"] == "0");  // the hostile one: nothing written
    CHECK_THAT(one.summary, Catch::Contains("19 evaluated, 0 failed (open), 0 not evaluated"));
    // the hostile container is on the record with its error (a request that does not parse has
    // no identity to record: event "unparsed", as at any event); every other item has its record
    int errors = 0, recs = 0;
    for (const auto& r : one.records) {
        json j = json::parse(r);
        if (j.value("event", "") == "Synchronize" && j.value("outcome", "") == "ok") ++recs;
        if (j.value("event", "") == "unparsed" && j.value("outcome", "") == "error" &&
            j.value("message", "").find("/container/id") != std::string::npos)
            ++errors;
    }
    CHECK(recs == 18);
    CHECK(errors == 1);
    CHECK(one.records.size() == 19);
    // one evaluator, not one per item: the relay started one for the whole pass
    CHECK_THAT(one.log, !Catch::Contains("evaluated one by one"));
}

// The pass's one evaluator ends early (here: it crashes on one pod's input): what it answered
// stands, every item after is evaluated alone, the one that crashes it crashes alone too and is
// on the record under its own name (kind crash), next to the record of the pass's evaluator.
// Nothing is dropped: the reply carries every other container's update.
TEST_CASE("relay (fork): the pass's one evaluator crashes; the rest are evaluated alone, the crasher recorded", "[nri][relay][sync]") {
    TempDir t;
    nriqos::nri::RelayOptions o = child_opts(t.path, 1500, true);
    nriqos::nri::InProcessEval single = o.inproc;
    o.inproc.synchronize_batch = true;
    const std::string dir = t.path;
    o.inproc.evaluate = [single, dir](int budget_ms) -> int {
        std::string in;
        char buf[65536];
        ssize_t n;
        while ((n = read(0, buf, sizeof buf)) > 0) in.append(buf, size_t(n));
        if (in.compare(0, sizeof nriqos::nri::kBatchHeader - 1, nriqos::nri::kBatchHeader) != 0) {
            // one item: as the fake evaluator does (its stdin, again, through a pipe)
            int p[2];
            if (pipe(p) != 0) return 9;
            ssize_t w = write(p[1], in.data(), in.size());
            (void)w;
            close(p[1]);
            dup2(p[0], 0);
            close(p[0]);
            return single.evaluate(budget_ms);
        }
        put_file(dir + "/batch.json", in);
        std::istringstream lines(in.substr(in.find('\n') + 1));
        std::string line;
        int k = 0;
        while (std::getline(lines, line)) {
            if (line.find("\"mode\":\"crash\"") != std::string::npos) {
                signal(SIGSEGV, SIG_DFL);  // not Catch's handler, which reports on stdout
                kill(getpid(), SIGSEGV);
                pause();
            }
            std::string out =
                line.find("\"container\":") != std::string::npos ? "{\"update\":{\"cpu\":{\"shares\":{\"value\":4}}}}\n" : "{\"error\":\"\"}\n";
            ssize_t w = write(1, out.data(), out.size());
            (void)w;
            ++k;
        }
        std::string end = std::string(nriqos::nri::kBatchEnd) + std::to_string(k) + "}\n";
        ssize_t w = write(1, end.data(), end.size());
        (void)w;
        return 0;
    };
    o.debug = true;
    FakeRuntime rt(o, t.path + "/relay.log");
    rt.handshake("", "2.1.9~ds1");
    pb::SynchronizeRequest req;
    *req.add_pods() = make_pod("a");
    *req.add_pods() = make_pod("crash");
    *req.add_pods() = make_pod("b");
    *req.add_containers() = sync_ctr("ctr-a1", "sb-a", pb::CONTAINER_RUNNING);
    *req.add_containers() = sync_ctr("ctr-crash1", "sb-crash", pb::CONTAINER_RUNNING);
    *req.add_containers() = sync_ctr("ctr-b1", "sb-b", pb::CONTAINER_RUNNING);
    *req.add_containers() = sync_ctr("ctr-b2", "sb-b", pb::CONTAINER_RUNNING);
    rt.request(3, "Synchronize", req.SerializeAsString(), 1900000000);
    nriqos::nri::ResponseEnvelope r = rt.reply(3, 5000);
    REQUIRE(r.code == 0);
    pb::SynchronizeResponse rsp;
    REQUIRE(rsp.ParseFromString(r.payload));
    std::string log = slurp(t.path + "/relay.log");
    INFO(log);
    // one evaluator got the whole pass (header: 7 items, the pids), and ended at the crasher
    CHECK(slurp(t.path + "/batch.json").rfind(std::string(nriqos::nri::kBatchHeader) + "7,", 0) == 0);
    CHECK_THAT(log, Catch::Contains("after 1 answers; the other 6 are evaluated one by one"));
    std::set<std::string> updated;
    for (const auto& u : rsp.update()) {
        updated.insert(u.container_id());
        CHECK(u.linux().resources().cpu().shares().value() == 4);
    }
    CHECK(updated == std::set<std::string>{"ctr-a1", "ctr-b1", "ctr-b2"});
    CHECK_THAT(log, Catch::Contains("5 evaluated, 2 failed (open), 0 not evaluated; 3 container updates"));
    std::vector<json> recs = wait_records(t.path, 3);
    REQUIRE(recs.size() == 3);
    int batch_rec = 0, named = 0;
    for (const auto& j : recs) {
        CHECK(j.value("kind", "") == "crash");
        CHECK(j.value("event", "") == "Synchronize");
        if (j.value("reason", "").find("Synchronize evaluator of 7 pods/containers") != std::string::npos) ++batch_rec;
        if (j.value("pod", "") == "pod-crash") ++named;
    }
    CHECK(batch_rec == 1);
    CHECK(named == 2);  // the pod and its container, each under its own name
    CHECK(rt.close_and_wait() == 0);
}

// A resize below the container's CFS burst: the kernel refuses a limited quota below the
// current burst (EINVAL), and runc writes the update's quota without any burst (NRI cannot carry
// one; runc 1.1 does not know it; v2 `unified` comes after cpu.max). The burst must therefore be
// lowered by nri-qos itself while it handles UpdateContainer, i.e. before the reply lets the
// runtime apply the update, and the write must be in the event's record.
TEST_CASE("relay (real pipeline): a quota lowered below the burst lowers the burst before the reply", "[nri][relay][update]") {
    const std::string policy = "version = 1\n[settings]\ndefault_class = \"C\"\n[classes.C.container]\ncpu_burst_us = \"100%\"\n";
    struct Layout {
        const char* name;
        nriqos::Layout layout;
        std::string burst;  // the container's burst file below the scratch cgroup root
        std::vector<std::string> files;
    };
    const std::string v1 = "cpu/kubepods/burstable/podu/ctr-u/cpu.cfs_burst_us";
    const std::string v2 = "kubepods/burstable/podu/ctr-u/cpu.max.burst";
    for (const Layout& l :
         {Layout{"v1", nriqos::Layout::V1, v1, {v1}}, Layout{"v2", nriqos::Layout::V2, v2, {v2, "kubepods/burstable/podu/cpu.max.burst"}}}) {
        DYNAMIC_SECTION("cgroup " << l.name) {
            RealRelay rr(policy, l.layout, l.files);
            FakeRuntime& rt = *rr.rt;
            put_file(rr.t.path + "/cg/" + l.burst, "80000\n");  // burst = 100 % of the current quota 80000
            auto update = [&](uint32_t stream, int64_t cur_quota, int64_t new_quota) {
                pb::UpdateContainerRequest up;
                *up.mutable_pod() = make_pod("");
                *up.mutable_container() = burstable_ctr(cur_quota, 128 << 20);
                auto* lr = up.mutable_linux_resources();
                lr->mutable_cpu()->mutable_shares()->set_value(512);
                lr->mutable_cpu()->mutable_quota()->set_value(new_quota);
                lr->mutable_cpu()->mutable_period()->set_value(100000);
                lr->mutable_memory()->mutable_limit()->set_value(48 << 20);
                rt.request(stream, "UpdateContainer", up.SerializeAsString());
                nriqos::nri::ResponseEnvelope r = rt.reply(stream);
                REQUIRE(r.code == 0);
                pb::UpdateContainerResponse rsp;
                REQUIRE(rsp.ParseFromString(r.payload));
                return rsp;
            };
            // down: 80000 -> 30000. Before the runtime writes the quota, the burst is 30000 already.
            // (The record follows the reply: the evaluator answers first, issue #13.)
            pb::UpdateContainerResponse rsp = update(3, 80000, 30000);
            CHECK(rr.cg(l.burst) == "30000");
            if (l.layout == nriqos::Layout::V2) {  // the final value travels too, written by runc after cpu.max
                REQUIRE(rsp.update_size() == 1);
                CHECK(rsp.update(0).linux().resources().unified().at("cpu.max.burst") == "30000");
            }
            std::string log = wait_contains(rr.t.path + "/events.log", "\"event\":\"UpdateContainer\"");
            CHECK_THAT(log, Catch::Contains("\"event\":\"UpdateContainer\""));
            CHECK_THAT(log, Catch::Contains("cpu." + std::string(l.layout == nriqos::Layout::V2 ? "max.burst" : "cfs_burst_us") + "=30000"));
            // up: 30000 -> 80000. The burst is within the new quota: UpdateContainer leaves it (the
            // kernel would refuse 80000 above the current quota 30000); it follows after the update.
            put_file(rr.t.path + "/cg/" + l.burst, "30000\n");
            update(5, 30000, 80000);
            CHECK(rr.cg(l.burst) == "30000\n");
            CHECK(rt.close_and_wait() == 0);
        }
    }
    SECTION("a burst the class does not set is left alone, and the record says why the update will fail") {
        RealRelay rr("version = 1\n[settings]\ndefault_class = \"C\"\n[classes.C.container]\ncpu_shares = 2\n", nriqos::Layout::V1, {v1});
        FakeRuntime& rt = *rr.rt;
        put_file(rr.t.path + "/cg/" + v1, "80000\n");
        pb::UpdateContainerRequest up;
        *up.mutable_pod() = make_pod("");
        *up.mutable_container() = burstable_ctr(80000, 128 << 20);
        up.mutable_linux_resources()->mutable_cpu()->mutable_quota()->set_value(30000);
        rt.request(3, "UpdateContainer", up.SerializeAsString());
        REQUIRE(rt.reply(3).code == 0);
        CHECK(rr.cg(v1) == "80000\n");
        CHECK_THAT(wait_contains(rr.t.path + "/events.log", "the class does not set cpu_burst_us"),
                   Catch::Contains("the class does not set cpu_burst_us"));
        CHECK(rt.close_and_wait() == 0);
    }
}

TEST_CASE("relay (real pipeline): oom_score_adj as an adjustment on NRI 0.8+, written after start on 0.6", "[nri][relay]") {
    const std::string policy = "version = 1\n[settings]\ndefault_class = \"BE\"\n[classes.BE.container]\ncpu_shares = 2\noom_score_adj = 1000\n";
    auto run = [&](const std::string& version, bool want_adjusted) {
        RealRelay rr(policy, nriqos::Layout::V1, {}, version);
        FakeRuntime& rt = *rr.rt;
        pb::CreateContainerRequest create;
        *create.mutable_pod() = make_pod("");
        *create.mutable_container() = burstable_ctr(50000, 64 << 20);
        create.mutable_container()->set_pid(0);
        rt.request(3, "CreateContainer", create.SerializeAsString());
        nriqos::nri::ResponseEnvelope r = rt.reply(3);
        REQUIRE(r.code == 0);
        pb::CreateContainerResponse rsp;
        REQUIRE(rsp.ParseFromString(r.payload));
        CHECK(rsp.adjust().linux().has_oom_score_adj() == want_adjusted);
        if (want_adjusted) CHECK(rsp.adjust().linux().oom_score_adj().value() == 1000);
        pb::StateChangeEvent start;
        start.set_event(pb::START_CONTAINER);
        *start.mutable_pod() = make_pod("");
        *start.mutable_container() = burstable_ctr(50000, 64 << 20);
        rt.request(5, "StateChange", start.SerializeAsString());
        REQUIRE(rt.reply(5).code == 0);
        std::string after_start = slurp(rr.t.path + "/proc/4242/oom_score_adj");
        // an UpdateContainer never writes it; PostUpdateContainer writes it again where nri-qos
        // owns it (NRI 0.6), so whatever the runtime's update did, the class's value stays
        put_file(rr.t.path + "/proc/4242/oom_score_adj", "-997");  // as if something had reset it
        pb::UpdateContainerRequest up;
        *up.mutable_pod() = make_pod("");
        *up.mutable_container() = burstable_ctr(50000, 64 << 20);
        up.mutable_linux_resources()->mutable_cpu()->set_cpus("0");
        rt.request(7, "UpdateContainer", up.SerializeAsString());
        REQUIRE(rt.reply(7).code == 0);
        std::string after_update = slurp(rr.t.path + "/proc/4242/oom_score_adj");
        pb::StateChangeEvent post = start;
        post.set_event(pb::POST_UPDATE_CONTAINER);
        rt.request(9, "StateChange", post.SerializeAsString());
        REQUIRE(rt.reply(9).code == 0);
        std::string after_post = slurp(rr.t.path + "/proc/4242/oom_score_adj");
        CHECK(rt.close_and_wait() == 0);
        return std::vector<std::string>{after_start, after_update, after_post};
    };
    SECTION("containerd 1.7.24 (NRI 0.6): written at StartContainer and again after an update") {
        CHECK(run("1.7.24~ds1", false) == std::vector<std::string>{"1000", "-997", "1000"});
    }
    SECTION("containerd 2.1.9 (NRI 0.8): in the adjustment; nri-qos never writes it") {
        CHECK(run("2.1.9~ds1", true) == std::vector<std::string>{"0", "-997", "-997"});
    }
}

TEST_CASE("relay (fork): the policy's fail mode holds from the first event; the runtime's timeouts are kept", "[nri][relay]") {
    TempDir t;
    for (const char* d : {"/cg", "/state", "/cache", "/proc"}) mkdir((t.path + d).c_str(), 0755);
    nriqos::Options eo = scratch_eval_options(t.path);
    eo.layout = nriqos::Layout::V1;
    auto relay_with = [&](const std::string& fail, int deadline_ms) {
        put_file(t.path + "/p.toml",
                 "version = 1\n[settings]\ndefault_class = \"BE\"\nfail = \"" + fail + "\"\n[classes.BE.container]\ncpu_shares = 2\n");
        nriqos::nri::RelayOptions o = child_opts(t.path, deadline_ms, true);
        nriqos::nri::InProcessEval real = nriqos::nri::pipeline_evaluator(eo);
        o.inproc.prepare = real.prepare;  // the real sandbox and policy probe,
        o.inproc.detach = real.detach;
        o.inproc.probe_fail_mode = real.probe_fail_mode;  // the fake evaluation (hang, crash)
        return o;
    };
    SECTION("fail-closed policy: the very first event, hanging, is refused in time") {
        FakeRuntime rt(relay_with("closed", 1500), t.path + "/relay.log");
        // containerd 2.1 with plugin_request_timeout = 700ms: ConfigureRequest.request_timeout
        REQUIRE(rt.handshake("", "2.1.9~ds1", "", 700) == 0x5ad);
        wait_file(t.path + "/detached.pid");  // the zygote is ready (and has told its policy's mode)
        int64_t t0 = mono_ms();
        rt.request(3, "CreateContainer", create_request("hang"), 0);  // no timeout_nano: Configure's
        nriqos::nri::ResponseEnvelope r = rt.reply(3, 3000);
        int64_t took = mono_ms() - t0;
        CHECK(r.code == 2);
        CHECK_THAT(r.message, Catch::Contains("on_child_failure=closed"));
        CHECK(took < 700);  // 700 - 250 ms reply margin: answered before the runtime gives up
        CHECK(took >= 400);
        // a crash fails closed too; the relay stays and serves
        rt.request(5, "CreateContainer", create_request("crash"));
        CHECK(rt.reply(5).code == 2);
        // teardown still fails open
        pb::StateChangeEvent ev;
        ev.set_event(pb::REMOVE_POD_SANDBOX);
        *ev.mutable_pod() = make_pod("crash");
        rt.request(7, "StateChange", ev.SerializeAsString());
        CHECK(rt.reply(7).code == 0);
        CHECK(rt.close_and_wait() == 0);
        CHECK_THAT(slurp(t.path + "/relay.log"), Catch::Contains("policy fail mode: closed"));
    }
    SECTION("fail-open policy: the hanging first event is answered empty in time") {
        FakeRuntime rt(relay_with("open", 1500), t.path + "/relay.log");
        REQUIRE(rt.handshake("", "2.1.9~ds1", "", 700) == 0x5ad);
        wait_file(t.path + "/detached.pid");
        int64_t t0 = mono_ms();
        rt.request(3, "CreateContainer", create_request("hang"), 0);
        nriqos::nri::ResponseEnvelope r = rt.reply(3, 3000);
        CHECK(r.code == 0);
        CHECK(r.payload.empty());
        CHECK(mono_ms() - t0 < 700);
        CHECK(rt.close_and_wait() == 0);
    }
}

TEST_CASE("relay (fork): the relay confines itself after Configure; forbidden calls fail", "[nri][relay][sandbox][confined]") {
    if (nriqos::sandbox_disabled_by_env()) {
        WARN("NRI_QOS_NO_SANDBOX set; skipped");
        return;
    }
    TempDir t;
    int rep[2];
    REQUIRE(pipe(rep) == 0);
    nriqos::nri::RelayOptions o = child_opts(t.path, 1500, true);
    std::string dir = t.path;
    int wfd = rep[1];
    o.after_confine = [dir, wfd]() {  // runs in the relay, right after confine_relay()
        auto err = [](long rc) { return rc >= 0 ? std::string("ok") : std::string(strerrorname_np(errno)); };
        std::string r;
        r += "socket=" + err(socket(AF_INET, SOCK_STREAM, 0)) + "\n";
        char* argv[] = {const_cast<char*>("/bin/true"), nullptr};
        r += "execve=" + err(execve("/bin/true", argv, environ)) + "\n";
        r += "open_write=" + err(open((dir + "/written-by-relay").c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644)) + "\n";
        r += "open_read=" + err(open("/etc/hostname", O_RDONLY | O_CLOEXEC)) + "\n";
        r += "fork=" + err(syscall(SYS_clone, SIGCHLD, 0, nullptr, nullptr, 0)) + "\n";
        r += "ptrace=" + err(syscall(SYS_ptrace, 0 /* PTRACE_TRACEME */, 0, 0, 0)) + "\n";
        r += "mount=" + err(syscall(SYS_mount, "none", "/mnt", "tmpfs", 0, nullptr)) + "\n";
        ssize_t w = write(wfd, r.data(), r.size());
        (void)w;
        close(wfd);
    };
    FakeRuntime rt(o, t.path + "/relay.log");
    close(rep[1]);
    rt.handshake();
    std::string got;
    char buf[512];
    ssize_t n;
    while ((n = read(rep[0], buf, sizeof buf)) > 0) got.append(buf, size_t(n));
    close(rep[0]);
    CHECK_THAT(got, Catch::Contains("socket=EPERM"));
    CHECK_THAT(got, Catch::Contains("execve=EPERM"));
    CHECK_THAT(got, Catch::Contains("open_write=EPERM"));
    CHECK_THAT(got, Catch::Contains("open_read=EPERM"));  // the relay opens nothing at all any more
    CHECK_THAT(got, Catch::Contains("fork=EPERM"));
    CHECK_THAT(got, Catch::Contains("ptrace=EPERM"));
    CHECK_THAT(got, Catch::Contains("mount=EPERM"));
    CHECK(slurp(t.path + "/written-by-relay").empty());
    std::string st = slurp("/proc/" + std::to_string(rt.pid()) + "/status");
    CHECK_THAT(st, Catch::Contains("NoNewPrivs:\t1"));
    CHECK_THAT(st, Catch::Contains("Seccomp:\t2"));
    // ... and it still serves: events are evaluated (the zygote comes from the keeper)
    for (uint32_t s = 3; s <= 7; s += 2) {
        rt.request(s, "CreateContainer", create_request(""));
        nriqos::nri::ResponseEnvelope r = rt.reply(s);
        REQUIRE(r.code == 0);
        pb::CreateContainerResponse rsp;
        REQUIRE(rsp.ParseFromString(r.payload));
        CHECK(rsp.adjust().linux().resources().cpu().shares().value() == 2);
    }
    CHECK(rt.close_and_wait() == 0);
    CHECK_THAT(slurp(t.path + "/relay.log"), !Catch::Contains("confinement incomplete"));
}

TEST_CASE("relay (fork): confined, a dead zygote is replaced by the keeper", "[nri][relay]") {
    TempDir t;
    FakeRuntime rt(child_opts(t.path, 1500, true), t.path + "/relay.log");
    rt.handshake();
    for (int round = 0; round < 2; ++round) {
        ::unlink((t.path + "/zygote.pid").c_str());
        usleep(50000);
        pid_t zygote = std::atoi(wait_file(t.path + "/zygote.pid").c_str());
        if (round == 0) {  // the first one is there already
            REQUIRE(zygote > 0);
        }
        if (zygote > 0) kill(zygote, SIGKILL);
        usleep(50000);
        for (uint32_t s = uint32_t(3 + 20 * round); s <= uint32_t(7 + 20 * round); s += 2) {
            rt.request(s, "CreateContainer", create_request(""));
            nriqos::nri::ResponseEnvelope r = rt.reply(s);
            CHECK(r.code == 0);
            CHECK_FALSE(r.payload.empty());
        }
    }
    CHECK(rt.close_and_wait() == 0);
}

TEST_CASE("relay: Shutdown is answered, then the relay exits 0", "[nri][relay]") {
    TempDir t;
    FakeRuntime rt(child_opts(t.path));
    rt.handshake();
    rt.request(3, "Shutdown", "");
    CHECK(rt.reply(3).code == 0);
    CHECK(rt.wait_exit(2000) == 0);
}

TEST_CASE("relay: protocol errors and bad set-ups", "[nri][relay]") {
    TempDir t;
    SECTION("mux frame over 16 MiB closes the connection with exit 1") {
        FakeRuntime rt(child_opts(t.path), t.path + "/relay.log");
        rt.handshake();
        rt.send_raw(std::string("\x00\x00\x00\x01\x01\x00\x00\x01", 8));
        CHECK(rt.wait_exit(2000) == 1);
        CHECK_THAT(slurp(t.path + "/relay.log"), Catch::Contains("16 MiB"));
    }
    SECTION("ttrpc message over 4 MiB gets RESOURCE_EXHAUSTED, relay stays") {
        FakeRuntime rt(child_opts(t.path));
        rt.handshake();
        uint32_t len = nriqos::nri::kTtrpcMaxMessage + 1;
        std::string msg = std::string("\x00\x40\x00\x01\x00\x00\x00\x03\x01\x00", 10) + std::string(len, 'x');
        std::string out;
        nriqos::nri::mux_encode(nriqos::nri::kPluginServiceConn, msg, out);
        rt.send_raw(out);
        CHECK(rt.reply(3, 5000).code == 8);
        rt.request(5, "CreateContainer", create_request(""));
        CHECK(rt.reply(5).code == 0);
    }
    SECTION("no child command: every event fails open") {
        nriqos::nri::RelayOptions o;
        FakeRuntime rt(o);
        rt.handshake();
        rt.request(3, "CreateContainer", create_request(""));
        nriqos::nri::ResponseEnvelope r = rt.reply(3);
        CHECK(r.code == 0);
        CHECK(r.payload.empty());
    }
    SECTION("child binary missing: fail open") {
        nriqos::nri::RelayOptions o = child_opts(t.path);
        o.child_argv = {"/nonexistent/nri-qos", "nri-eval"};
        FakeRuntime rt(o);
        rt.handshake();
        rt.request(3, "CreateContainer", create_request(""));
        CHECK(rt.reply(3).code == 0);
    }
    SECTION("no connection at all: exit 1") {
        nriqos::nri::RelayOptions o;
        o.fd = 987;  // not open
        CHECK(nriqos::nri::run_relay(o) == 1);
        o.fd = -1;
        o.socket_path = t.path + "/no.sock";
        CHECK(nriqos::nri::run_relay(o) == 1);
    }
}

TEST_CASE("relay: options from the launch environment", "[nri][relay]") {
    const char* keep[] = {"NRI_PLUGIN_SOCKET", "NRI_PLUGIN_NAME", "NRI_PLUGIN_IDX"};
    for (const char* k : keep) unsetenv(k);
    nriqos::nri::RelayOptions o;
    nriqos::nri::relay_options_from_env(o, "/opt/nri/plugins/05-qos");
    CHECK(o.fd == -1);
    CHECK(o.plugin_name == "qos");
    CHECK(o.plugin_idx == "05");
    setenv("NRI_PLUGIN_SOCKET", "3", 1);
    setenv("NRI_PLUGIN_NAME", "nri-qos", 1);
    setenv("NRI_PLUGIN_IDX", "10", 1);
    nriqos::nri::RelayOptions e;
    nriqos::nri::relay_options_from_env(e, "/usr/bin/nri-qos");
    CHECK(e.fd == 3);
    CHECK(e.plugin_name == "nri-qos");
    CHECK(e.plugin_idx == "10");
    for (const char* k : keep) unsetenv(k);
    nriqos::nri::RelayOptions d;
    nriqos::nri::relay_options_from_env(d, "/usr/bin/nri-qos");
    CHECK(d.plugin_name == "nri-qos");  // defaults kept
    CHECK(d.plugin_idx == "10");
}

namespace {

// VmHWM / VmRSS of a process in KiB (0 when unknown).
long status_kib(pid_t pid, const char* key) {
    std::istringstream in(slurp("/proc/" + std::to_string(pid) + "/status"));
    std::string line;
    while (std::getline(in, line)) {
        if (line.compare(0, strlen(key), key) == 0) return std::atol(line.c_str() + strlen(key) + 1);
    }
    return 0;
}

std::vector<std::string> split_words(const char* s) {
    std::vector<std::string> out;
    std::istringstream in(s ? s : "");
    std::string w;
    while (in >> w) out.push_back(w);
    return out;
}

}  // namespace

// Memory budget of the static binary in relay mode. Hidden (needs a built binary):
//   NRI_RELAY_LOAD_CMD="build/nri-qos relay --policy P --cgroup-root D ..."
//   NRI_RELAY_LOAD_EVENTS=10000 build/unit-tests "[.nri-load]"
// The command is exec'd like containerd launches a plugin (fd 3, NRI_PLUGIN_* env only).
TEST_CASE("relay load: peak RSS <= 3 MiB and no growth over many events", "[.nri-load]") {
    std::vector<std::string> cmd = split_words(getenv("NRI_RELAY_LOAD_CMD"));
    if (cmd.empty()) {
        WARN("NRI_RELAY_LOAD_CMD not set; skipped");
        return;
    }
    long events = getenv("NRI_RELAY_LOAD_EVENTS") ? std::atol(getenv("NRI_RELAY_LOAD_EVENTS")) : 2000;
    FakeRuntime rt(cmd);
    rt.handshake();
    // a pod the size containerd sends (~2.7 KB CreateContainer request)
    pb::CreateContainerRequest req;
    *req.mutable_pod() = make_pod("");
    for (int i = 0; i < 20; ++i) {
        (*req.mutable_pod()->mutable_annotations())["io.kubernetes.cri.annotation-" + std::to_string(i)] = std::string(60, 'a' + i % 26);
    }
    req.mutable_container()->set_id(std::string(64, 'c'));
    req.mutable_container()->set_name("app");
    // BestEffort container as kubelet creates it (cpu.shares 2, no memory limit)
    req.mutable_container()->mutable_linux()->mutable_resources()->mutable_cpu()->mutable_shares()->set_value(2);
    req.mutable_container()->mutable_linux()->set_cgroups_path("/kubepods/besteffort/pod-/" + std::string(64, 'c'));
    std::string payload = req.SerializeAsString();
    long rss_early = 0, anon_early = 0, codes_ok = 0, adjusted = 0;
    std::set<std::string> answers;  // the distinct CreateContainerResponse payloads (the adjustments)
    uint32_t s = 1;
    int64_t t0 = mono_ms();
    for (long i = 0; i < events; ++i) {
        rt.request(s += 2, "CreateContainer", payload);
        nriqos::nri::ResponseEnvelope r = rt.reply(s, 5000);
        if (r.code == 0) ++codes_ok;
        if (r.code == 0 && !r.payload.empty()) ++adjusted, answers.insert(r.payload);
        if (i == events / 10) {
            rss_early = status_kib(rt.pid(), "VmRSS");
            anon_early = status_kib(rt.pid(), "RssAnon");
        }
    }
    int64_t took = mono_ms() - t0;
    long hwm = status_kib(rt.pid(), "VmHWM");
    long rss_end = status_kib(rt.pid(), "VmRSS");
    long rss_anon = status_kib(rt.pid(), "RssAnon");
    long rss_file = status_kib(rt.pid(), "RssFile");
    long seccomp = status_kib(rt.pid(), "Seccomp");  // 2: the relay confined itself (fork mode)
    WARN("events " << events << " (" << codes_ok << " OK, " << adjusted << " with an adjustment) in " << took << " ms; VmHWM " << hwm
                   << " KiB, VmRSS after 10% " << rss_early << " KiB (anon " << anon_early << "), at end " << rss_end << " KiB (anon " << rss_anon
                   << ", file " << rss_file << "); relay Seccomp " << seccomp);
    // What the runtime got, as one line a suite can compare between two runs (nri_relay.sh
    // relay-resident-same-results: evaluator_events 1 and 1000 must answer byte for byte the same).
    std::string all;
    for (const auto& a : answers) all += a + '\0';
    WARN("answers: " << answers.size() << " distinct, digest " << std::hex << std::hash<std::string>{}(all) << std::dec);
    CHECK(hwm > 0);
    CHECK(hwm <= 3 * 1024);
    // No growth: a leak grows the anonymous memory. The file-backed text may still gain a window or
    // two after event 1,000 (a rarely taken path faulting in 64 KiB of code, bounded by the binary
    // and by the peak check above): with the relay's per-event code packed in .text.relay_path
    // (src/hot-text.ld) its steady RSS is ~1.9 MiB, and one such window is +3%.
    if (events >= 10) CHECK(rss_anon <= anon_early + 64);
    if (events >= 10) CHECK(rss_end <= rss_early + 256);
    CHECK(rt.close_and_wait() == 0);
}

namespace {

// utime+stime (self) or cutime+cstime (reaped children) of a process, in clock ticks
// (proc(5) fields 14-17); both when `which` is 0.
long long cpu_ticks(pid_t pid, int which = 0) {
    std::string st = slurp("/proc/" + std::to_string(pid) + "/stat");
    size_t p = st.rfind(')');
    if (p == std::string::npos) return 0;
    std::istringstream in(st.substr(p + 2));
    std::string f;
    long long v[17] = {0};
    for (int i = 3; i <= 17 && (in >> f); ++i) v[i - 1] = std::atoll(f.c_str());
    if (which == 1) return v[13] + v[14];
    if (which == 2) return v[15] + v[16];
    return v[13] + v[14] + v[15] + v[16];
}

// cpu_ticks of a process plus the utime+stime of its live direct children (a relay's zygote and
// spare evaluators are counted before they are reaped).
long long tree_ticks(pid_t pid) {
    long long t = cpu_ticks(pid);
    std::istringstream kids(slurp("/proc/" + std::to_string(pid) + "/task/" + std::to_string(pid) + "/children"));
    pid_t k;
    while (kids >> k) t += cpu_ticks(k, 1);
    return t;
}

// RSS (KiB) of a process and of its direct children (a relay's spare evaluator).
long tree_kib(pid_t pid, const char* key) {
    long sum = status_kib(pid, key);
    std::istringstream kids(slurp("/proc/" + std::to_string(pid) + "/task/" + std::to_string(pid) + "/children"));
    pid_t k;
    while (kids >> k) sum += status_kib(k, key);
    return sum;
}

long long pctl(std::vector<long long> v, double p) {
    if (v.empty()) return 0;
    std::sort(v.begin(), v.end());
    size_t i = size_t(p * double(v.size() - 1) + 0.5);
    return v[std::min(i, v.size() - 1)];
}

}  // namespace

// Latency benchmark of native NRI plugins, each launched like containerd does (fd 3, NRI_PLUGIN_*
// env) and driven interleaved, one pod (RunPodSandbox, CreateContainer, StartContainer) per
// plugin per round. Hidden; prints percentiles, never asserts on time:
//   NRI_BENCH_PEERS="relay=build/nri-qos relay --policy P ...;go=/path/gostub" NRI_BENCH_PODS=500
//   NRI_BENCH_PID=<pid the requests name> build/unit-tests "[.nri-bench]"
TEST_CASE("relay bench: per-event latency, CPU and RSS against peers", "[.nri-bench]") {
    const char* peers_env = getenv("NRI_BENCH_PEERS");
    if (!peers_env) {
        WARN("NRI_BENCH_PEERS not set; skipped");
        return;
    }
    int pods = getenv("NRI_BENCH_PODS") ? std::atoi(getenv("NRI_BENCH_PODS")) : 300;
    uint32_t pid = getenv("NRI_BENCH_PID") ? uint32_t(std::atoi(getenv("NRI_BENCH_PID"))) : 4242;
    struct Peer {
        std::string name;
        std::unique_ptr<FakeRuntime> rt;
        uint32_t s = 1;
        std::vector<long long> lat[3];
        long long cpu0 = 0, self0 = 0;
    };
    std::vector<Peer> peers;
    std::string all = peers_env;
    for (size_t b = 0; b < all.size();) {
        size_t e = all.find(';', b);
        if (e == std::string::npos) e = all.size();
        std::string item = all.substr(b, e - b);
        b = e + 1;
        size_t eq = item.find('=');
        if (eq == std::string::npos) continue;
        Peer p;
        p.name = item.substr(0, eq);
        p.rt.reset(new FakeRuntime(split_words(item.substr(eq + 1).c_str())));
        p.rt->handshake();
        peers.push_back(std::move(p));
    }
    // A BestEffort Koordinator pod as containerd 1.7 sends it (about 2.7 KB per CreateContainer).
    pb::PodSandbox pod = make_pod("");
    (*pod.mutable_labels())["koordinator.sh/qosClass"] = "BE";
    for (int i = 0; i < 20; ++i) (*pod.mutable_annotations())["io.kubernetes.cri.annotation-" + std::to_string(i)] = std::string(60, 'a' + i % 26);
    pod.mutable_linux()->set_cgroup_parent("/kubepods/besteffort/podbench");
    pod.mutable_linux()->set_cgroups_path("/kubepods/besteffort/podbench/" + std::string(64, 's'));
    pod.set_pid(pid);
    pb::Container ctr;
    ctr.set_id(std::string(64, 'c'));
    ctr.set_pod_sandbox_id(pod.id());
    ctr.set_name("app");
    ctr.mutable_linux()->mutable_resources()->mutable_cpu()->mutable_shares()->set_value(2);
    ctr.mutable_linux()->set_cgroups_path("/kubepods/besteffort/podbench/" + std::string(64, 'c'));
    pb::StateChangeEvent run;
    run.set_event(pb::RUN_POD_SANDBOX);
    *run.mutable_pod() = pod;
    pb::CreateContainerRequest create;
    *create.mutable_pod() = pod;
    *create.mutable_container() = ctr;
    pb::StateChangeEvent start;
    start.set_event(pb::START_CONTAINER);
    *start.mutable_pod() = pod;
    *start.mutable_container() = ctr;
    start.mutable_container()->set_pid(pid);
    const std::pair<const char*, std::string> evs[3] = {
        {"StateChange", run.SerializeAsString()}, {"CreateContainer", create.SerializeAsString()}, {"StateChange", start.SerializeAsString()}};
    const char* names[3] = {"RunPodSandbox", "CreateContainer", "StartContainer"};
    // warm-up, then measure
    for (auto& p : peers)
        for (int i = 0; i < 20; ++i)
            for (const auto& ev : evs) {
                p.rt->request(p.s += 2, ev.first, ev.second);
                p.rt->reply(p.s, 5000);
            }
    for (auto& p : peers) {
        p.cpu0 = tree_ticks(p.rt->pid());
        p.self0 = cpu_ticks(p.rt->pid(), 1);
    }
    long fails = 0;
    for (int i = 0; i < pods; ++i) {
        for (auto& p : peers) {
            for (int k = 0; k < 3; ++k) {
                struct timespec a, z;
                clock_gettime(CLOCK_MONOTONIC, &a);
                p.rt->request(p.s += 2, evs[k].first, evs[k].second);
                nriqos::nri::ResponseEnvelope r = p.rt->reply(p.s, 5000);
                clock_gettime(CLOCK_MONOTONIC, &z);
                if (r.code != 0 || (k == 1 && r.payload.empty())) ++fails;
                p.lat[k].push_back((z.tv_sec - a.tv_sec) * 1000000LL + (z.tv_nsec - a.tv_nsec) / 1000);
            }
        }
    }
    usleep(100000);  // let the last spare settle before RSS is read
    std::ostringstream out;
    out << pods << " pods per peer, interleaved; failed or unadjusted replies: " << fails << "\n";
    out << "peer            event             p50 us  p90 us  p99 us\n";
    for (auto& p : peers) {
        for (int k = 0; k < 3; ++k) {
            char line[160];
            snprintf(line, sizeof line, "%-15s %-16s %7lld %7lld %7lld\n", p.name.c_str(), names[k], pctl(p.lat[k], 0.5), pctl(p.lat[k], 0.9),
                     pctl(p.lat[k], 0.99));
            out << line;
        }
    }
    long hz = sysconf(_SC_CLK_TCK);
    for (auto& p : peers) {
        long long ticks = tree_ticks(p.rt->pid()) - p.cpu0;
        long long self = cpu_ticks(p.rt->pid(), 1) - p.self0;
        double per = 1e6 / double(hz) / double(pods * 3);
        char line[240];
        snprintf(line, sizeof line, "%-15s CPU %.1f us/event (plugin process %.1f, children %.1f); RSS %ld KiB (+children), VmHWM %ld KiB\n",
                 p.name.c_str(), double(ticks) * per, double(self) * per, double(ticks - self) * per, tree_kib(p.rt->pid(), "VmRSS"),
                 status_kib(p.rt->pid(), "VmHWM"));
        out << line;
    }
    fputs(out.str().c_str(), stdout);  // not WARN: Catch would wrap the table
    fflush(stdout);
    for (auto& p : peers) CHECK(p.rt->close_and_wait() == 0);
}

namespace {

// The failure records the fake recorder received (tests/unit: fake_inproc record), waiting at
// most ~3 s for `n` of them.
std::vector<json> wait_records(const std::string& dir, size_t n) {
    std::vector<json> v;
    for (int i = 0; i < 300; ++i) {
        v.clear();
        std::istringstream in(slurp(dir + "/records"));
        std::string line;
        while (std::getline(in, line))
            if (!line.empty()) v.push_back(json::parse(line, nullptr, false));
        if (v.size() >= n) break;
        usleep(10000);
    }
    return v;
}

}  // namespace

TEST_CASE("relay (fork): relay-level failures are handed to the keeper's recorder", "[nri][relay][record]") {
    TempDir t;
    FakeRuntime rt(child_opts(t.path, 600, true), t.path + "/relay.log");
    rt.handshake();
    uint32_t s = 1;
    auto one = [&](const std::string& mode) {
        rt.request(s += 2, "CreateContainer", create_request(mode));
        return rt.reply(s, 3000);
    };
    SECTION("crash: outcome failed, kind crash, the container's identity and the fail mode") {
        CHECK(one("crash").code == 0);
        std::vector<json> r = wait_records(t.path, 1);
        REQUIRE(r.size() == 1);
        CHECK(r[0]["event"] == "CreateContainer");
        CHECK(r[0]["outcome"] == "failed");
        CHECK(r[0]["kind"] == "crash");
        CHECK(r[0]["fail_mode"] == "open");
        CHECK(r[0]["reason"] == "child killed by signal 11");
        CHECK(r[0]["namespace"] == "default");
        CHECK(r[0]["pod"] == "pod-crash");
        CHECK(r[0]["container"] == "app");
        CHECK(r[0]["id"] == "ctr-crash");
        CHECK(r[0]["sandbox_id"] == "sb-crash");
        CHECK(r[0]["duration_us"].get<int64_t>() >= 0);
        // written by a recorder process of the keeper, not by the relay
        CHECK(wait_file(t.path + "/recorder.comm") == "nri-qos-record\n");
    }
    SECTION("hang: killed at the relay's deadline, kind timeout") {
        CHECK(one("hang").code == 0);
        std::vector<json> r = wait_records(t.path, 1);
        REQUIRE(r.size() == 1);
        CHECK(r[0]["kind"] == "timeout");
        CHECK(r[0]["outcome"] == "failed");
        CHECK_THAT(r[0]["reason"].get<std::string>(), Catch::Contains("did not answer within"));
        CHECK(r[0]["duration_us"].get<int64_t>() >= 500000);
    }
    SECTION("fail-closed: outcome refused") {
        CHECK(one("closed").code == 0);  // caches on_child_failure = closed
        CHECK(one("garbage").code == 2);
        std::vector<json> r = wait_records(t.path, 1);
        REQUIRE(r.size() == 1);
        CHECK(r[0]["kind"] == "bad-output");
        CHECK(r[0]["outcome"] == "refused");
        CHECK(r[0]["fail_mode"] == "closed");
    }
    SECTION("the evaluator's own deadline answer is not recorded twice") {
        CHECK(one("closed").code == 0);
        CHECK(one("deadline").code == 2);
        CHECK(one("crash").code == 2);
        std::vector<json> r = wait_records(t.path, 1);
        usleep(200000);
        r = wait_records(t.path, 1);
        REQUIRE(r.size() == 1);
        CHECK(r[0]["kind"] == "crash");
    }
    SECTION("relay refusals: malformed request, unknown method") {
        rt.request(s += 2, "CreateContainer", std::string("\xff\xff\xff", 3));
        CHECK(rt.reply(s).code == 0);
        rt.request(s += 2, "NoSuchMethod", "");
        CHECK(rt.reply(s).code == 12);
        std::vector<json> r = wait_records(t.path, 2);
        REQUIRE(r.size() == 2);
        CHECK(r[0]["kind"] == "malformed");
        CHECK(r[0]["event"] == "CreateContainer");
        CHECK(r[0]["outcome"] == "failed");
        CHECK(r[1]["kind"] == "unknown-method");
        CHECK(r[1]["event"] == "unknown");
        CHECK(r[1]["outcome"] == "refused");
        CHECK(r[1].count("fail_mode") == 0);
        CHECK_THAT(r[1]["reason"].get<std::string>(), Catch::Contains("NoSuchMethod"));
    }
    SECTION("records sent just before the relay exits are still written") {
        CHECK(one("crash").code == 0);
        CHECK(one("garbage").code == 0);
        CHECK(rt.close_and_wait() == 0);
        CHECK(wait_records(t.path, 2).size() == 2);
        return;
    }
    CHECK(rt.close_and_wait() == 0);
}

// Overload (issue 22 §3, docs/native-nri.md "Overload"): one evaluation runs at a time, at most
// 64 event requests wait behind it (src/nri/relay_internal.hpp kMaxQueued); the requests past that are
// answered at once with their event's fail mode and recorded; every queued one is answered too.
TEST_CASE("relay (fork): overload: past 64 queued requests answered at once with the fail mode, none hangs", "[nri][relay][overload]") {
    const bool closed = GENERATE(false, true);
    CAPTURE(closed);
    TempDir t;
    FakeRuntime rt(child_opts(t.path, 800, true), t.path + "/relay.log");
    rt.handshake();
    uint32_t s = 1;
    if (closed) {  // the policy says "closed": cached from this answer
        rt.request(s += 2, "CreateContainer", create_request("closed"));
        REQUIRE(rt.reply(s).code == 0);
    }
    // one evaluation that runs until the relay kills it at its deadline (800 ms)...
    const uint32_t hang = s += 2;
    rt.request(hang, "CreateContainer", create_request("hang"));
    REQUIRE_FALSE(wait_file(t.path + "/hang.pid").empty());
    // ...64 requests queued behind it (the bound), then 3 more CreateContainer and a RunPodSandbox
    // (a StateChange: an admission event, refused under "closed" like CreateContainer), all in one write.
    std::vector<uint32_t> queued, excess;
    std::string burst;
    auto add = [&](const std::string& method, const std::string& payload) {
        s += 2;
        nriqos::nri::mux_encode(nriqos::nri::kPluginServiceConn,
                                nriqos::nri::ttrpc_encode(s, nriqos::nri::kTtrpcRequest, 0,
                                                          nriqos::nri::encode_request(nriqos::nri::kPluginService, method, payload, 2000000000)),
                                burst);
        return s;
    };
    for (int i = 0; i < 64; ++i) queued.push_back(add("CreateContainer", create_request("")));
    for (int i = 0; i < 3; ++i) excess.push_back(add("CreateContainer", create_request("over")));
    pb::StateChangeEvent run;
    run.set_event(pb::RUN_POD_SANDBOX);
    *run.mutable_pod() = make_pod("overpod");
    excess.push_back(add("StateChange", run.SerializeAsString()));
    const int64_t sent = mono_ms();
    rt.send_raw(burst);
    // The excess is answered first, while the evaluation still runs: no wait for a queue slot.
    for (size_t i = 0; i < excess.size(); ++i) {
        nriqos::nri::ResponseEnvelope r = rt.reply(excess[i], 500);
        if (closed) {
            CHECK(r.code == 2);
            CHECK_THAT(r.message, Catch::Contains("relay overloaded") && Catch::Contains("on_child_failure=closed") &&
                                      Catch::Contains(i < 3 ? "CreateContainer" : "RunPodSandbox"));
        } else {
            CHECK(r.code == 0);
            CHECK(r.payload.empty());  // fail-open: the empty reply, nothing adjusted
        }
    }
    CHECK(mono_ms() - sent < 500);
    // Everything else is answered (evaluated, or failed at its deadline): nothing hangs.
    std::map<uint32_t, int> codes;
    nriqos::nri::TtrpcMessage m;
    while (codes.size() < queued.size() + 1 && rt.next(nriqos::nri::kPluginServiceConn, m, 3000)) {
        nriqos::nri::ResponseEnvelope r;
        REQUIRE(nriqos::nri::decode_response(m.payload, r));
        codes[m.stream_id] = r.code;
    }
    CHECK(codes.size() == queued.size() + 1);
    CHECK(codes.count(hang) == 1);
    for (uint32_t q : queued) CHECK(codes.count(q) == 1);
    CHECK(mono_ms() - sent < 2500);
    // On the record: one "overloaded" failure per refused request, named like an evaluated event
    // (queued requests that reached their deadline behind a slow evaluation may be recorded as
    // "overloaded" too, with a reason of their own: not counted here).
    std::vector<json> over;
    for (int i = 0; i < 300 && over.size() < excess.size(); ++i, usleep(10000)) {
        over.clear();
        for (const json& r : wait_records(t.path, 1))
            if (r.is_object() && r.value("kind", "") == "overloaded" && r.value("reason", "").rfind("relay overloaded (", 0) == 0) over.push_back(r);
    }
    REQUIRE(over.size() == excess.size());
    for (size_t i = 0; i < over.size(); ++i) {
        CHECK(over[i]["event"] == (i < 3 ? "CreateContainer" : "RunPodSandbox"));
        CHECK(over[i]["pod"] == (i < 3 ? "pod-over" : "pod-overpod"));
        CHECK(over[i]["outcome"] == (closed ? "refused" : "failed"));
        CHECK(over[i]["fail_mode"] == (closed ? "closed" : "open"));
        CHECK_THAT(over[i]["reason"].get<std::string>(), Catch::Contains("relay overloaded (64 requests"));
        // counted as nri_qos_relay_failures_total{event=...,reason="overloaded"}
        nriqos::nri::RelayFailure f;
        std::string err;
        REQUIRE(nriqos::nri::parse_failure_message(over[i].dump(), f, err));
        CHECK(nriqos::nri::failure_metrics(f).relay_failure == "overloaded");
    }
    CHECK(rt.close_and_wait() == 0);
}

TEST_CASE("relay (fork): overload: a queued request is answered at its own deadline, not after the evaluation ahead", "[nri][relay][overload]") {
    const bool closed = GENERATE(false, true);
    CAPTURE(closed);
    TempDir t;
    FakeRuntime rt(child_opts(t.path, 800, true), t.path + "/relay.log");
    rt.handshake();
    uint32_t s = 1;
    if (closed) {
        rt.request(s += 2, "CreateContainer", create_request("closed"));
        REQUIRE(rt.reply(s).code == 0);
    }
    const uint32_t hang = s += 2;
    rt.request(hang, "CreateContainer", create_request("hang"));  // killed at 800 ms
    REQUIRE_FALSE(wait_file(t.path + "/hang.pid").empty());
    // A request with a 400 ms timeout (budget 150 ms after the 250 ms reply margin) behind it.
    const uint32_t late = s += 2;
    const int64_t sent = mono_ms();
    rt.request(late, "CreateContainer", create_request("late"), 400000000);
    nriqos::nri::ResponseEnvelope r = rt.reply(late, 400);  // before the runtime's 400 ms, not at ~800 ms
    CHECK(mono_ms() - sent < 400);
    if (closed) {
        CHECK(r.code == 2);
        CHECK_THAT(r.message, Catch::Contains("relay overloaded: waited") && Catch::Contains("on_child_failure=closed"));
    } else {
        CHECK(r.code == 0);
        CHECK(r.payload.empty());
    }
    CHECK(rt.reply(hang, 2000).code == (closed ? 2 : 0));  // the evaluation ahead: killed at its deadline
    std::vector<json> over;
    for (int i = 0; i < 300 && over.empty(); ++i, usleep(10000))
        for (const json& x : wait_records(t.path, 1))
            if (x.is_object() && x.value("kind", "") == "overloaded") over.push_back(x);
    REQUIRE(over.size() == 1);
    CHECK(over[0]["event"] == "CreateContainer");
    CHECK(over[0]["pod"] == "pod-late");
    CHECK(over[0]["fail_mode"] == (closed ? "closed" : "open"));
    CHECK_THAT(over[0]["reason"].get<std::string>(), Catch::Contains("in the queue behind an evaluation and 0 requests"));
    CHECK(rt.close_and_wait() == 0);
}

TEST_CASE("relay (fork): the answer is replied before the evaluator's records; what happens to them after is recorded", "[nri][relay][record]") {
    TempDir t;
    FakeRuntime rt(child_opts(t.path, 600, true), t.path + "/relay.log");
    rt.handshake();
    uint32_t s = 1;
    auto early = [&](const std::string& mode, int64_t& took) {
        int64_t t0 = mono_ms();
        rt.request(s += 2, "CreateContainer", create_request(mode));
        nriqos::nri::ResponseEnvelope r = rt.reply(s, 3000);
        took = mono_ms() - t0;
        pb::CreateContainerResponse rsp;
        return r.code == 0 && rsp.ParseFromString(r.payload) && rsp.adjust().annotations().count("answered") == 1;
    };
    auto adjusted = [&]() {
        rt.request(s += 2, "CreateContainer", create_request(""));
        nriqos::nri::ResponseEnvelope r = rt.reply(s, 3000);
        pb::CreateContainerResponse rsp;
        return r.code == 0 && rsp.ParseFromString(r.payload) && rsp.adjust().annotations().count("nri-qos/class") == 1;
    };
    int64_t took = 0;
    SECTION("records that hang: the answer at once, records-cut at the deadline, no process left") {
        REQUIRE(early("slowrec", took));
        CHECK(took < 300);  // the deadline is 600 ms
        pid_t pid = std::atoi(wait_file(t.path + "/answered.pid").c_str());
        REQUIRE(pid > 0);
        CHECK_FALSE(process_gone(pid));  // still "writing its records": not killed at the answer
        // the next event runs meanwhile, on the next spare
        CHECK(adjusted());
        std::vector<json> r = wait_records(t.path, 1);
        REQUIRE(r.size() == 1);
        CHECK(r[0]["kind"] == "records-cut");
        CHECK(r[0]["outcome"] == "answered");
        CHECK(r[0]["pod"] == "pod-slowrec");
        CHECK(r[0].count("fail_mode") == 0);
        CHECK_THAT(r[0]["reason"].get<std::string>(), Catch::Contains("at the event's deadline"));
        CHECK(gone_or_zombie(pid));
    }
    SECTION("the evaluator's own deadline after the answer: records-cut from its exit status") {
        REQUIRE(early("cut74", took));
        std::vector<json> r = wait_records(t.path, 1);
        REQUIRE(r.size() == 1);
        CHECK(r[0]["kind"] == "records-cut");
        CHECK(r[0]["outcome"] == "answered");
        CHECK_THAT(r[0]["reason"].get<std::string>(), Catch::Contains("own deadline"));
    }
    SECTION("a bad exit after a complete answer: the answer stands, died-after-answer recorded") {
        rt.request(s += 2, "CreateContainer", create_request("exit3"));
        REQUIRE(rt.reply(s).code == 0);
        std::vector<json> r = wait_records(t.path, 1);
        REQUIRE(r.size() == 1);
        CHECK(r[0]["kind"] == "died-after-answer");
        CHECK(r[0]["outcome"] == "answered");
        CHECK_THAT(r[0]["reason"].get<std::string>(), Catch::Contains("exited with status 3"));
    }
    SECTION("at most kMaxFinishing evaluators finish their records; then the oldest makes room") {
        for (size_t i = 0; i <= nriqos::nri::kMaxFinishing; ++i) {
            REQUIRE(early("slowrec", took));
            CHECK(took < 300);
        }
        std::vector<json> r = wait_records(t.path, 1);
        REQUIRE(r.size() >= 1);
        CHECK(r[0]["kind"] == "records-cut");
        CHECK_THAT(r[0]["reason"].get<std::string>(), Catch::Contains("evaluators were finishing theirs"));
        r = wait_records(t.path, nriqos::nri::kMaxFinishing + 1);
        CHECK(r.size() == nriqos::nri::kMaxFinishing + 1);
    }
    SECTION("an ordinary evaluator: nothing recorded by the relay") {
        CHECK(adjusted());
        CHECK(adjusted());
        usleep(200000);
        CHECK(slurp(t.path + "/records").empty());
    }
    CHECK(rt.close_and_wait() == 0);
}

TEST_CASE("relay (fork): before Configure (no keeper yet) the unconfined relay forks the recorder itself", "[nri][relay][record]") {
    TempDir t;
    FakeRuntime rt(child_opts(t.path, 600, true), t.path + "/relay.log");
    rt.request(3, "NoSuchMethod", "");
    CHECK(rt.reply(3).code == 12);
    std::vector<json> r = wait_records(t.path, 1);
    REQUIRE(r.size() == 1);
    CHECK(r[0]["kind"] == "unknown-method");
    CHECK(wait_file(t.path + "/recorder.comm") == "nri-qos-record\n");
    rt.handshake();
    CHECK(rt.close_and_wait() == 0);
}

TEST_CASE("relay failure message: bounded, validated on the keeper side", "[nri][record]") {
    nriqos::nri::RelayFailure f;
    f.event = "CreateContainer";
    f.outcome = "failed";
    f.kind = "timeout";
    f.fail_mode = "open";
    f.reason = "child did not answer within 1250 ms (killed)";
    f.ns = "default";
    f.pod = "web\x01";  // a control character from the runtime becomes '?'
    f.id = std::string(64, 'c');
    f.duration_us = 1250000;
    std::string msg = nriqos::nri::failure_message(f);
    nriqos::nri::RelayFailure g;
    std::string err;
    REQUIRE(nriqos::nri::parse_failure_message(msg, g, err));
    CHECK(g.pod == "web?");
    CHECK(g.id == f.id);
    CHECK(g.duration_us == 1250000);
    nriqos::EventRecord r = nriqos::nri::failure_record(g);
    CHECK(r.source == "relay");
    CHECK_THAT(nriqos::record_logfmt(r), Catch::Contains("outcome=failed failure=timeout fail_mode=open"));
    CHECK(nriqos::nri::failure_metrics(g).relay_failure == "timeout");
    CHECK(nriqos::nri::failure_metrics(g).cls.empty());

    // over-long fields are cut by the sender, the message always fits
    f.reason = std::string(100000, 'x');
    f.container = std::string(1000, 'y');
    msg = nriqos::nri::failure_message(f);
    CHECK(msg.size() < nriqos::nri::kMaxFailureMsg);
    REQUIRE(nriqos::nri::parse_failure_message(msg, g, err));
    CHECK(g.container.size() == 253);

    // what the keeper side refuses
    auto refused = [&](const std::string& m) {
        nriqos::nri::RelayFailure x;
        std::string e;
        bool ok = nriqos::nri::parse_failure_message(m, x, e);
        CAPTURE(m, e);
        return !ok && !e.empty();
    };
    const std::string good = R"("event":"CreateContainer","outcome":"failed","kind":"crash","reason":"r")";
    CHECK_FALSE(refused("{" + good + "}"));
    CHECK(refused("not json"));
    CHECK(refused("[1]"));
    CHECK(refused("{" + good + R"(,"path":"/etc/shadow"})"));  // unknown key
    CHECK(refused(R"({"event":"Exec","outcome":"failed","kind":"crash","reason":"r"})"));
    CHECK(refused(R"({"event":"CreateContainer","outcome":"ok","kind":"crash","reason":"r"})"));
    CHECK(refused(R"({"event":"CreateContainer","outcome":"failed","kind":"oops","reason":"r"})"));
    CHECK(refused(R"({"event":"CreateContainer","outcome":"failed","kind":"crash"})"));  // no reason
    CHECK(refused("{" + good + R"(,"fail_mode":"maybe"})"));
    CHECK(refused("{" + good + R"(,"pod":"a\nb"})"));
    CHECK(refused("{" + good + R"(,"pod":7})"));
    CHECK(refused("{" + good + R"(,"duration_us":-1})"));
    CHECK(refused("{" + good + ",\"pod\":\"" + std::string(300, 'p') + "\"}"));
    CHECK(refused("{" + good + ",\"reason\":\"" + std::string(5000, 'r') + "\"}"));
}

namespace {

// A live direct child of `parent` named `comm` (not stopped, not `other`); 0 when none within ~3 s.
pid_t wait_child_named(pid_t parent, const std::string& comm, pid_t other = 0) {
    for (int i = 0; i < 300; ++i) {
        for (pid_t k : children_of(parent)) {
            std::string st = slurp("/proc/" + std::to_string(k) + "/stat");
            size_t p = st.rfind(')');
            bool running = p != std::string::npos && p + 2 < st.size() && st[p + 2] != 'T' && st[p + 2] != 'Z';
            if (k != other && running && slurp("/proc/" + std::to_string(k) + "/comm") == comm + "\n") return k;
        }
        usleep(10000);
    }
    return 0;
}

}  // namespace

// Relay-level failures of the real binary (tests/nri_relay.sh checks the event log and the metrics
// afterwards). Hidden (needs a built binary):
//   NRI_RELAY_FAIL_CMD="build/nri-qos relay --policy P --event-log L --metrics-file M ..."
//   build/unit-tests "[.nri-failrec]"
// 1. the spare evaluator is stopped, the event sent to it, then it is SIGKILLed: "killed by signal 9";
// 2. the next spare is stopped (it cannot run its own deadline handler) and the event sent: the
//    relay kills it at its deadline.
// Both events are answered empty (the shipped policy fails open); the pods are "victim-kill" and
// "victim-hang". An ordinary event (pod "ok-first") comes first.
TEST_CASE("relay failures of the real binary: killed and timed-out evaluators", "[.nri-failrec]") {
    std::vector<std::string> cmd = split_words(getenv("NRI_RELAY_FAIL_CMD"));
    if (cmd.empty()) {
        WARN("NRI_RELAY_FAIL_CMD not set; skipped");
        return;
    }
    FakeRuntime rt(cmd);
    rt.handshake();
    // An ordinary event first: the evaluator's own record and metrics exist either way.
    rt.request(1001, "CreateContainer", create_request("ok-first"));
    CHECK(rt.reply(1001, 5000).code == 0);
    usleep(200000);  // its evaluator, which writes its records after the answer, is gone; the next spare is ready
    pid_t spare = wait_child_named(rt.pid(), "nri-qos-eval");
    REQUIRE(spare > 0);
    REQUIRE(kill(spare, SIGSTOP) == 0);
    rt.request(3, "CreateContainer", create_request("victim-kill"));
    usleep(300000);  // the relay has handed the event to the (stopped) spare
    REQUIRE(kill(spare, SIGKILL) == 0);
    nriqos::nri::ResponseEnvelope r1 = rt.reply(3, 5000);
    CHECK(r1.code == 0);
    CHECK(r1.payload.empty());

    pid_t next = wait_child_named(rt.pid(), "nri-qos-eval", spare);
    REQUIRE(next > 0);
    REQUIRE(kill(next, SIGSTOP) == 0);
    int64_t t0 = mono_ms();
    rt.request(5, "CreateContainer", create_request("victim-hang"));
    nriqos::nri::ResponseEnvelope r2 = rt.reply(5, 5000);
    CHECK(r2.code == 0);
    CHECK(r2.payload.empty());
    WARN("timed-out event answered after " << (mono_ms() - t0) << " ms");
    CHECK(gone_or_zombie(next));
    CHECK(rt.close_and_wait(5000) == 0);
}

// Answer before records, with the real binary (tests/nri_relay.sh). Hidden (needs a built binary):
//   NRI_RELAY_CUT_CMD="build/nri-qos relay --policy P ... --event-log FIFO --metrics-file M"
//   NRI_RELAY_CUT_FIFO=FIFO build/unit-tests "[.nri-records-cut]"
// The event log is a FIFO that nobody reads. Two CreateContainer events must come back with
// their adjustment well before the relay's deadline (1.5 s; before issue #13 the records came
// first: the relay killed the evaluator at its deadline and answered empty). Since issue 19 §2
// the evaluator refuses the FIFO at once (kernel.hpp open_record: O_NONBLOCK, regular files
// only) instead of hanging in its open until the relay cuts its records: nothing is written
// into the FIFO, the relay log says why (tests/nri_relay.sh), the metrics count both events.
TEST_CASE("relay of the real binary: the answer comes at once, a FIFO event log is refused", "[.nri-records-cut]") {
    std::vector<std::string> cmd = split_words(getenv("NRI_RELAY_CUT_CMD"));
    const char* fifo = getenv("NRI_RELAY_CUT_FIFO");
    if (cmd.empty() || !fifo) {
        WARN("NRI_RELAY_CUT_CMD / NRI_RELAY_CUT_FIFO not set; skipped");
        return;
    }
    FakeRuntime rt(cmd);
    rt.handshake();
    uint32_t s = 1;
    for (int i = 0; i < 2; ++i) {
        // a BestEffort container as kubelet creates it (as in the load test: the policy adjusts it)
        pb::CreateContainerRequest req;
        *req.mutable_pod() = make_pod("cut-" + std::to_string(i));
        req.mutable_container()->set_id("ctr-cut-" + std::to_string(i));
        req.mutable_container()->set_name("app");
        req.mutable_container()->mutable_linux()->mutable_resources()->mutable_cpu()->mutable_shares()->set_value(2);
        req.mutable_container()->mutable_linux()->set_cgroups_path("/kubepods/besteffort/pod-cut/ctr-cut-" + std::to_string(i));
        int64_t t0 = mono_ms();
        rt.request(s += 2, "CreateContainer", req.SerializeAsString());
        nriqos::nri::ResponseEnvelope r = rt.reply(s, 5000);
        int64_t took = mono_ms() - t0;
        WARN("CreateContainer " << i << " answered after " << took << " ms with " << r.payload.size() << " bytes");
        CHECK(r.code == 0);
        pb::CreateContainerResponse rsp;
        CHECK(rsp.ParseFromString(r.payload));
        CHECK(rsp.has_adjust());  // the real adjustment, not the relay's empty fail-open answer
        CHECK(took < 700);
    }
    usleep(300000);  // the evaluators' records (refused at once) are done
    int fd = open(fifo, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    REQUIRE(fd >= 0);
    char buf[256];
    CHECK(read(fd, buf, sizeof buf) <= 0);  // no record was ever written into the FIFO
    close(fd);
    CHECK(rt.close_and_wait(5000) == 0);
}

namespace {

// The oldest live direct child of `parent` named `comm` (start time, /proc/<pid>/stat field 22);
// 0 when none within ~3 s.
pid_t oldest_child_named(pid_t parent, const std::string& comm) {
    for (int i = 0; i < 300; ++i) {
        pid_t best = 0;
        unsigned long long best_start = ~0ull;
        for (pid_t k : children_of(parent)) {
            std::string st = slurp("/proc/" + std::to_string(k) + "/stat");
            size_t p = st.rfind(')');
            if (p == std::string::npos || p + 2 >= st.size() || st[p + 2] == 'Z') continue;
            if (slurp("/proc/" + std::to_string(k) + "/comm") != comm + "\n") continue;
            std::istringstream in(st.substr(p + 2));
            std::string f;
            unsigned long long start = 0;
            for (int n = 3; n <= 22 && (in >> f); ++n)
                if (n == 22) start = std::stoull(f);
            if (start < best_start) best = k, best_start = start;
        }
        if (best) return best;
        usleep(10000);
    }
    return 0;
}

}  // namespace

// Issue 19 §2 "A lost keeper or zygote is replaced", with the real binary (tests/nri_relay.sh
// checks the event log and the metrics afterwards). Hidden (needs a built binary):
//   NRI_RELAY_RESPAWN_CMD="build/nri-qos relay --policy P ... --event-log L --metrics-file M"
//   build/unit-tests "[.nri-respawn]"
// The zygote, then the keeper, then the zygote again, then the new keeper and the zygote are
// SIGKILLed (an OOM kill, a stray kill); after each loss two events must get the real
// adjustment: the first may use the spare cloned before the loss, the second needs a new
// one. Before: once the keeper was gone, the next zygote loss left no evaluator for good
// (every later event failed open, "the zygote is being replaced" while nothing was).
TEST_CASE("relay of the real binary: a lost keeper or zygote is replaced", "[.nri-respawn]") {
    std::vector<std::string> cmd = split_words(getenv("NRI_RELAY_RESPAWN_CMD"));
    if (cmd.empty()) {
        WARN("NRI_RELAY_RESPAWN_CMD not set; skipped");
        return;
    }
    FakeRuntime rt(cmd);
    rt.handshake();
    uint32_t s = 1;
    int n = 0;
    auto event = [&](const char* when) {
        pb::CreateContainerRequest req;
        std::string i = std::to_string(n++);
        *req.mutable_pod() = make_pod("respawn-" + i);
        req.mutable_container()->set_id("ctr-respawn-" + i);
        req.mutable_container()->set_name("app");
        req.mutable_container()->mutable_linux()->mutable_resources()->mutable_cpu()->mutable_shares()->set_value(2);
        req.mutable_container()->mutable_linux()->set_cgroups_path("/kubepods/besteffort/pod-respawn/ctr-respawn-" + i);
        rt.request(s += 2, "CreateContainer", req.SerializeAsString());
        nriqos::nri::ResponseEnvelope r = rt.reply(s, 5000);
        CAPTURE(when, i);
        CHECK(r.code == 0);
        pb::CreateContainerResponse rsp;
        CHECK(rsp.ParseFromString(r.payload));
        CHECK(rsp.has_adjust());  // a real evaluation, not the relay's empty fail-open answer
        usleep(100000);  // the next spare is asked for after the reply
    };
    auto kill_one = [&](const char* comm) {
        pid_t p = oldest_child_named(rt.pid(), comm);  // the keeper in charge is the older one
        REQUIRE(p > 0);
        REQUIRE(kill(p, SIGKILL) == 0);
        usleep(300000);  // reaped, replaced
    };
    event("before any loss");
    kill_one("nri-qos-zygote");
    event("zygote lost (1)");
    event("zygote lost (2)");
    kill_one("nri-qos-keeper");
    event("keeper lost (1)");
    kill_one("nri-qos-zygote");
    event("keeper and zygote lost (1)");
    event("keeper and zygote lost (2)");
    kill_one("nri-qos-keeper");
    kill_one("nri-qos-zygote");
    event("second keeper and zygote lost (1)");
    event("second keeper and zygote lost (2)");
    CHECK(rt.close_and_wait(5000) == 0);
}

// The binary-level Synchronize check and measurement (tests/nri_relay.sh, bench/sync.sh): the
// real `nri-qos relay` launched like containerd does, a node of NRI_SYNC_CONTAINERS containers
// (default 20, NRI_SYNC_PER_POD per pod, default 2) sent in NRI_SYNC_PARTS parts (default 2)
// within the runtime's timeout (NRI_SYNC_TIMEOUT_MS, default containerd's 2 s); the cgroup files
// are made below NRI_SYNC_CGROUP_ROOT when set.
// Checks that every container's update comes back; prints the wall time of the pass.
TEST_CASE("relay sync: Synchronize of a whole node through the real binary", "[.nri-sync]") {
    std::vector<std::string> cmd = split_words(getenv("NRI_SYNC_CMD"));
    if (cmd.empty()) {
        WARN("NRI_SYNC_CMD not set; skipped");
        return;
    }
    auto env_int = [](const char* k, int d) { return getenv(k) ? std::atoi(getenv(k)) : d; };
    int n = env_int("NRI_SYNC_CONTAINERS", 20), per_pod = std::max(1, env_int("NRI_SYNC_PER_POD", 2)),
        parts = std::max(1, env_int("NRI_SYNC_PARTS", 2));
    std::vector<pb::PodSandbox> pods;
    std::vector<pb::Container> ctrs;
    std::vector<std::string> files;
    sync_node((n + per_pod - 1) / per_pod, per_pod, pods, ctrs, &files);
    ctrs.resize(size_t(n));
    if (const char* root = getenv("NRI_SYNC_CGROUP_ROOT")) {
        // In-process (no `sh -c mkdir` per file: 5,000 containers took minutes of forks under load,
        // bench/sync.sh and bench/fullnode.sh).
        for (const auto& f : files) {
            std::string path = std::string(root) + "/" + f;
            std::error_code ec;
            std::filesystem::create_directories(std::filesystem::path(path).parent_path(), ec);
            REQUIRE_FALSE(ec);
            put_file(path, "0\n");
        }
    }
    // The runtime's timeout for the whole pass (containerd: 2 s); NRI_SYNC_TIMEOUT_MS raises it so
    // that a slow machine's pass is measured whole instead of cut at 1.75 s.
    int64_t timeout_ms = env_int("NRI_SYNC_TIMEOUT_MS", 2000);
    struct rusage ru0 {};
    getrusage(RUSAGE_CHILDREN, &ru0);  // children reaped before the relay starts are not the relay's
    FakeRuntime rt(cmd);
    rt.handshake("", "2.1.9~ds1", "", timeout_ms);
    int64_t took = 0;
    pb::SynchronizeResponse rsp = sync_node_in_parts(rt, pods, ctrs, parts, took, timeout_ms);
    CHECK(rsp.update_size() == n);
    CHECK(rt.close_and_wait() == 0);
    // The relay and every process it reaped (its evaluators, zygote, keeper): CPU time (minus the
    // mkdir children above) and the largest peak RSS among them (getrusage(2) RUSAGE_CHILDREN).
    struct rusage ru {};
    getrusage(RUSAGE_CHILDREN, &ru);
    auto ms = [](const struct rusage& r) {
        return (r.ru_utime.tv_sec + r.ru_stime.tv_sec) * 1000L + (r.ru_utime.tv_usec + r.ru_stime.tv_usec) / 1000L;
    };
    const long cpu_ms = ms(ru) - ms(ru0);
    WARN("sync: " << n << " containers in " << pods.size() << " pods, " << parts << " parts: " << rsp.update_size() << " updates, last reply " << took
                  << " ms after the first part; cpu " << cpu_ms << " ms; maxrss " << ru.ru_maxrss << " KiB");
}

// A container nri-qos adjusted that the runtime removes without starting it (issue 20 item 5):
// containerd undoes a create whose NRI result conflicted ("plugins ... both tried to set ...")
// with StopContainer + RemoveContainer. Hidden (needs a built binary; tests/nri_relay.sh checks
// the event log, the metrics and `status` afterwards):
//   NRI_RELAY_CONFLICT_CMD="build/nri-qos relay --policy P --runtime-log LOG ..."
//   build/unit-tests "[.nri-conflict]"
// Pod "conflict": created (adjusted), removed without a start: one record. Pod "fine": created,
// started, removed: none.
TEST_CASE("relay of the real binary: an adjusted container removed unstarted is recorded", "[.nri-conflict]") {
    std::vector<std::string> cmd = split_words(getenv("NRI_RELAY_CONFLICT_CMD"));
    if (cmd.empty()) {
        WARN("NRI_RELAY_CONFLICT_CMD not set; skipped");
        return;
    }
    FakeRuntime rt(cmd);
    rt.handshake();
    uint32_t s = 1;
    for (const char* mode : {"fine", "conflict"}) {
        pb::CreateContainerRequest creq;
        REQUIRE(creq.ParseFromString(create_request(mode)));
        (*creq.mutable_pod()->mutable_labels())["koordinator.sh/qosClass"] = "BE";  // BE: cpu.shares 2
        creq.mutable_container()->mutable_linux()->set_cgroups_path(std::string("/kubepods/besteffort/pod-") + mode + "/ctr-" + mode);
        rt.request(s += 2, "CreateContainer", creq.SerializeAsString());
        nriqos::nri::ResponseEnvelope r = rt.reply(s, 5000);
        REQUIRE(r.code == 0);
        pb::CreateContainerResponse rsp;
        REQUIRE(rsp.ParseFromString(r.payload));
        REQUIRE(rsp.has_adjust());
        pb::StateChangeEvent ev;
        *ev.mutable_pod() = make_pod(mode);
        ev.mutable_container()->set_id(std::string("ctr-") + mode);
        ev.mutable_container()->set_pod_sandbox_id(std::string("sb-") + mode);
        ev.mutable_container()->set_name("app");
        if (std::string(mode) == "fine") {
            ev.set_event(pb::START_CONTAINER);
            rt.request(s += 2, "StateChange", ev.SerializeAsString());
            CHECK(rt.reply(s, 5000).code == 0);
        }
        ev.set_event(pb::REMOVE_CONTAINER);  // containerd's undo: StopContainer (not subscribed), then this
        rt.request(s += 2, "StateChange", ev.SerializeAsString());
        nriqos::nri::ResponseEnvelope rm = rt.reply(s, 5000);
        CHECK(rm.code == 0);
        CHECK(rm.payload.empty());
    }
    usleep(2500000);  // the recorder reads the runtime's log after its wait, then writes
    CHECK(rt.close_and_wait(5000) == 0);
}

TEST_CASE("adjustment-rejected: the message, the record, the metrics and the runtime's log", "[nri][relay][conflict]") {
    nriqos::nri::RelayFailure f;
    f.event = "CreateContainer";
    f.outcome = "undone";
    f.kind = "adjustment-rejected";
    f.reason = "removed unstarted";
    f.sandbox_id = "0123abcd";
    f.container = "app";
    f.self = "10-nri-qos";
    f.fields = "CPU shares, memory limit";
    nriqos::nri::RelayFailure g;
    std::string err;
    REQUIRE(nriqos::nri::parse_failure_message(nriqos::nri::failure_message(f), g, err));
    CHECK(g.self == "10-nri-qos");
    CHECK(g.fields == "CPU shares, memory limit");
    CHECK(nriqos::nri::failure_metrics(g).rejected_by == "unknown");
    CHECK_FALSE(nriqos::nri::failure_metrics(g).count_event);  // the CreateContainer was counted by its evaluator
    g.other = "05-gostub";
    CHECK(nriqos::nri::failure_metrics(g).rejected_by == "05-gostub");
    f.other = "bad name";
    CHECK_FALSE(nriqos::nri::parse_failure_message(nriqos::nri::failure_message(f), g, err));

    // containerd's CRI log line (logfmt, quotes escaped), as containerd 1.7/2.x writes it
    const std::string other_pod =
        R"(time="2026-11-27T10:00:00Z" level=error msg="CreateContainer within sandbox \"ffff\" for &ContainerMetadata{Name:app,Attempt:0,} failed" error="failed to create containerd container: plugins \"10-nri-qos\" and \"07-x\" both tried to set memory limit")";
    const std::string ours =
        R"(time="2026-11-27T10:00:01Z" level=error msg="CreateContainer within sandbox \"0123abcd\" for &ContainerMetadata{Name:app,Attempt:0,} failed" error="failed to create containerd container: plugins \"10-nri-qos\" and \"05-gostub\" both tried to set CPU shares")";
    const std::string other_ctr =
        R"(time="2026-11-27T10:00:02Z" level=error msg="CreateContainer within sandbox \"0123abcd\" for &ContainerMetadata{Name:side,Attempt:0,} failed" error="plugins \"20-late\" and \"10-nri-qos\" both tried to set CPU quota")";
    nriqos::nri::RuntimeConflict c =
        nriqos::nri::runtime_conflict(other_pod + "\n" + ours + "\n" + other_ctr + "\n", "0123abcd", "app", "10-nri-qos");
    CHECK(c.other == "05-gostub");
    CHECK(c.subject == "CPU shares");
    c = nriqos::nri::runtime_conflict(other_ctr + "\n", "0123abcd", "side", "10-nri-qos");
    CHECK(c.other == "20-late");  // nri-qos first in the pair when the other plugin runs later
    CHECK(c.subject == "CPU quota");
    CHECK(nriqos::nri::runtime_conflict(other_pod + "\n", "0123abcd", "app", "10-nri-qos").other.empty());
    // NRI v0.11+ (containerd 2.2.x, 2.3): the field's enum name and its qualifiers
    // (pkg/api/owners.go Conflict: Field.String() + " " + qualifiers, so a trailing space), given
    // in the older words, the ones of the record's `fields`. Old code: subject "CPUShares".
    const std::string v011 =
        R"(time="2026-11-29T06:00:00Z" level=error msg="CreateContainer within sandbox \"0123abcd\" for &ContainerMetadata{Name:app,Attempt:0,} failed" error="failed to create containerd container: plugins \"10-nri-qos\" and \"05-gostub\" both tried to set CPUShares ")";
    c = nriqos::nri::runtime_conflict(v011 + "\n", "0123abcd", "app", "10-nri-qos");
    CHECK(c.other == "05-gostub");
    CHECK(c.subject == "CPU shares");
    const std::string v012_annotation =
        R"(time="2026-11-29T06:00:01Z" level=error msg="CreateContainer within sandbox \"0123abcd\" for &ContainerMetadata{Name:app,Attempt:0,} failed" error="plugins \"05-gostub\" and \"10-nri-qos\" both tried to set Annotations nri-qos/class")";
    c = nriqos::nri::runtime_conflict(v012_annotation + "\n", "0123abcd", "app", "10-nri-qos");
    CHECK(c.other == "05-gostub");
    CHECK(c.subject == "annotation nri-qos/class");
    const std::string unknown_field =
        R"(time="2026-11-29T06:00:02Z" level=error msg="CreateContainer within sandbox \"0123abcd\" for &ContainerMetadata{Name:app,Attempt:0,} failed" error="plugins \"05-gostub\" and \"10-nri-qos\" both tried to set SeccompPolicy ")";
    CHECK(nriqos::nri::runtime_conflict(unknown_field + "\n", "0123abcd", "app", "10-nri-qos").subject == "SeccompPolicy");
    // v0.11's process fields, which nri-qos sets now (sched_policy, issue #31 item 5), in words
    const std::string sched_field =
        R"(time="2026-11-29T06:00:02Z" level=error msg="CreateContainer within sandbox \"0123abcd\" for &ContainerMetadata{Name:app,Attempt:0,} failed" error="plugins \"05-gostub\" and \"10-nri-qos\" both tried to set LinuxSched ")";
    CHECK(nriqos::nri::runtime_conflict(sched_field + "\n", "0123abcd", "app", "10-nri-qos").subject == "scheduling policy");
    CHECK(nriqos::nri::runtime_conflict(ours, "", "app", "10-nri-qos").other.empty());

    // a log file: its conflict lines only
    unit::ScratchDir dir("conflict");
    const std::string log = dir / "containerd.log";
    put_file(log, "time=x level=info msg=\"starting\"\n" + ours + "\n");
    std::string why;
    std::string ex = nriqos::nri::runtime_log_excerpt(log, 400, why);
    CHECK(ex == ours + "\n");
    CHECK(nriqos::nri::runtime_log_excerpt("none", 400, why).empty());
    CHECK_THAT(why, Catch::Contains("no runtime log configured"));
    CHECK(nriqos::nri::runtime_log_excerpt("relative/path", 400, why).empty());
    CHECK_THAT(why, Catch::Contains("expected a file path, journal:<unit> or none"));
}

// The relay service's /metrics (issue #33 §2) while it serves events, through the real binary.
// Hidden (needs the built binaries; tests/nri_relay.sh runs it):
//   NRI_METRICS_CMD="build/nri-qos relay --policy P --state-dir D ... --metrics-listen 127.0.0.1:PORT"
//   NRI_METRICS_SCRAPE="python3 tests/metrics_scrape.py URL ..."   build/unit-tests "[.nri-metrics]"
// The test listens on an NRI socket, runs the service on it (--socket), registers it, gets a
// CreateContainer answered, then runs the scrape command while the relay is connected: its exit
// status is the verdict (the scraper parses the answer with a Prometheus text parser).
TEST_CASE("relay service of the real binary: /metrics while it serves events", "[.nri-metrics]") {
    std::vector<std::string> cmd = split_words(getenv("NRI_METRICS_CMD"));
    const char* scrape = getenv("NRI_METRICS_SCRAPE");
    if (cmd.empty() || !scrape) {
        WARN("NRI_METRICS_CMD / NRI_METRICS_SCRAPE not set; skipped");
        return;
    }
    TempDir t;
    std::string sock = t.path + "/nri.sock";
    int lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    REQUIRE(lfd >= 0);
    struct sockaddr_un a {};
    a.sun_family = AF_UNIX;
    REQUIRE(sock.size() < sizeof a.sun_path);
    std::strcpy(a.sun_path, sock.c_str());
    REQUIRE(bind(lfd, reinterpret_cast<struct sockaddr*>(&a), sizeof a) == 0);
    REQUIRE(listen(lfd, 4) == 0);
    cmd.push_back("--socket");
    cmd.push_back(sock);
    std::vector<char*> argv;
    for (auto& w : cmd) argv.push_back(const_cast<char*>(w.c_str()));
    argv.push_back(nullptr);
    pid_t svc = fork();
    REQUIRE(svc >= 0);
    if (svc == 0) {
        execv(argv[0], argv.data());
        _exit(127);
    }
    struct pollfd p = {lfd, POLLIN, 0};
    REQUIRE(poll(&p, 1, 10000) == 1);
    int c = accept4(lfd, nullptr, nullptr, SOCK_CLOEXEC);
    REQUIRE(c >= 0);
    {
        FakeRuntime rt(c);
        rt.handshake("", "2.1.9~ds1");
        rt.request(3, "CreateContainer", create_request("metrics"));
        CHECK(rt.reply(3, 5000).code == 0);
        CHECK(std::system(scrape) == 0);  // while the relay is registered and serving
    }
    kill(svc, SIGTERM);
    int st = 0;
    pid_t w = 0;
    for (int64_t end = mono_ms() + 5000; mono_ms() < end && (w = waitpid(svc, &st, WNOHANG)) == 0;) usleep(10000);
    if (w != svc) kill(svc, SIGKILL), waitpid(svc, &st, 0);
    CHECK(w == svc);
    CHECK((WIFEXITED(st) && WEXITSTATUS(st) == 0));
    close(lfd);
}

// Resident evaluators of the real binary (settings.evaluator_events > 1, issue #34; the checks of
// the records are tests/nri_relay.sh's). Hidden (needs a built binary):
//   NRI_RELAY_RESIDENT_CMD="build/nri-qos relay --policy P(evaluator_events = 1000) ..."
//   build/unit-tests "[.nri-resident]"
// 1. five events (pods res-0..res-4) are all answered with their adjustment by one evaluator
//    process: the oldest nri-qos-eval child of the relay stays the same (the spare made after it
//    is younger);
// 2. a planted crash: that resident is stopped, an event sent (pod victim-resident), then it is
//    SIGKILLed: the event is answered empty (fail open) and the next event (pod after-crash) gets
//    its adjustment from a fresh evaluator (another pid), which serves the one after it too.
TEST_CASE("relay of the real binary: resident evaluators, a crash contained", "[.nri-resident]") {
    std::vector<std::string> cmd = split_words(getenv("NRI_RELAY_RESIDENT_CMD"));
    if (cmd.empty()) {
        WARN("NRI_RELAY_RESIDENT_CMD not set; skipped");
        return;
    }
    FakeRuntime rt(cmd);
    rt.handshake();
    uint32_t s = 1;
    auto create = [&](const std::string& mode, bool& adjusted) {
        pb::CreateContainerRequest req;
        *req.mutable_pod() = make_pod(mode);
        req.mutable_container()->set_id("ctr-" + mode);
        req.mutable_container()->set_pod_sandbox_id("sb-" + mode);
        req.mutable_container()->set_name("app");
        req.mutable_container()->mutable_linux()->mutable_resources()->mutable_cpu()->mutable_shares()->set_value(2);
        req.mutable_container()->mutable_linux()->set_cgroups_path("/kubepods/besteffort/pod-" + mode + "/ctr-" + mode);
        rt.request(s += 2, "CreateContainer", req.SerializeAsString());
        nriqos::nri::ResponseEnvelope r = rt.reply(s, 5000);
        pb::CreateContainerResponse rsp;
        adjusted = r.code == 0 && !r.payload.empty() && rsp.ParseFromString(r.payload) && rsp.has_adjust();
        return r;
    };
    pid_t resident = 0;
    for (int i = 0; i < 5; ++i) {
        bool adjusted = false;
        nriqos::nri::ResponseEnvelope r = create("res-" + std::to_string(i), adjusted);
        CHECK(r.code == 0);
        CHECK(adjusted);
        usleep(100000);  // its records are written; the next spare (younger) is ready
        pid_t oldest = oldest_child_named(rt.pid(), "nri-qos-eval");
        REQUIRE(oldest > 0);
        if (i == 0) resident = oldest;
        CHECK(oldest == resident);  // the same process served every event
    }
    REQUIRE(kill(resident, SIGSTOP) == 0);
    bool adjusted = true;
    s += 2;
    {
        pb::CreateContainerRequest req;  // sent while the resident is stopped
        *req.mutable_pod() = make_pod("victim-resident");
        req.mutable_container()->set_id("ctr-victim-resident");
        req.mutable_container()->set_name("app");
        req.mutable_container()->mutable_linux()->mutable_resources()->mutable_cpu()->mutable_shares()->set_value(2);
        req.mutable_container()->mutable_linux()->set_cgroups_path("/kubepods/besteffort/pod-victim-resident/ctr-victim-resident");
        rt.request(s, "CreateContainer", req.SerializeAsString());
    }
    usleep(300000);  // the relay has handed the event to the (stopped) resident
    REQUIRE(kill(resident, SIGKILL) == 0);
    nriqos::nri::ResponseEnvelope rv = rt.reply(s, 5000);
    CHECK(rv.code == 0);
    CHECK(rv.payload.empty());  // failed open
    CHECK(gone_or_zombie(resident));
    for (int i = 0; i < 2; ++i) {
        nriqos::nri::ResponseEnvelope r = create(i == 0 ? "after-crash" : "after-crash-2", adjusted);
        CHECK(r.code == 0);
        CHECK(adjusted);
    }
    usleep(100000);
    pid_t fresh = oldest_child_named(rt.pid(), "nri-qos-eval");
    CHECK(fresh > 0);
    CHECK(fresh != resident);
    CHECK(rt.close_and_wait(5000) == 0);
}
