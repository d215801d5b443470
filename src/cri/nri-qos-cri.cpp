// nri-qos-cri: the CRI client of `nri-qos reconcile --discover` (issue #25 §3), a separate,
// dynamically linked executable so that the hook exec'd on every container event (build/nri-qos,
// fully static) carries no gRPC (its static initialisers and size would cost every event).
//
// It asks the runtime's CRI RuntimeService (k8s.io/cri-api runtime/v1: Version, ListPodSandbox,
// PodSandboxStatus(verbose), ListContainers, ContainerStatus(verbose); src/cri/cri.proto) for
// the live pod sandboxes and containers and prints ONE JSON document on stdout:
//
//   {"v": 1, "endpoint": "unix:///run/containerd/containerd.sock",
//    "runtime": {"name": "containerd", "version": "1.6.20~ds1", "api_version": "v1"},
//    "sandboxes": [{"id", "state": "SANDBOX_READY", "metadata": {"name", "uid", "namespace", "attempt"},
//                   "labels": {}, "annotations": {}, "runtime_handler", "info": {KEY: VALUE}}],
//    "containers": [{"id", "pod_sandbox_id", "state": "CONTAINER_RUNNING", "metadata": {"name", "attempt"},
//                    "labels": {}, "annotations": {}, "resources": {LinuxContainerResources}|null,
//                    "info": {KEY: VALUE}}],
//    "errors": ["one line per sandbox/container whose status could not be read"]}
//
// "info" is the verbose status map; each value that is a JSON document (containerd's "info":
// pid, config, runtimeSpec with cgroupsPath, resources and annotations) is embedded parsed,
// any other value as a string. Sandboxes that are not ready and containers that are neither
// created nor running are left out. Every item also carries "created_at" (CRI's, unix ns).
// `--verbose-ids ID,ID,...` (the periodic unseen pass, `reconcile --unseen`): the status calls
// are made only for the listed ids; every other item is printed from the List answer alone
// (its labels, annotations and metadata as listed, no "info", "brief": true), so a pass that
// finds nothing new costs Version + ListPodSandbox + ListContainers. An empty list: no status
// call at all. Exit 0, or 1 with one line on stderr when the runtime cannot
// be asked (nothing on stdout then); 2 on a usage error.
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <set>
#include <sstream>
#include <string>

#include <grpcpp/grpcpp.h>
#include <nlohmann/json.hpp>

#include "cri.grpc.pb.h"

using nlohmann::json;
namespace v1 = runtime::v1;

namespace {

constexpr const char* kDefaultEndpoint = "unix:///run/containerd/containerd.sock";

json str_map(const google::protobuf::Map<std::string, std::string>& m) {
    json o = json::object();
    for (const auto& [k, v] : m) o[k] = v;
    return o;
}

/// The verbose map: values that parse as JSON objects/arrays embedded, others kept as strings.
json info_map(const google::protobuf::Map<std::string, std::string>& m) {
    json o = json::object();
    for (const auto& [k, v] : m) {
        json parsed = json::parse(v, nullptr, false);
        o[k] = (!parsed.is_discarded() && (parsed.is_object() || parsed.is_array())) ? parsed : json(v);
    }
    return o;
}

json linux_resources(const v1::LinuxContainerResources& r) {
    json o = {{"cpu_period", r.cpu_period()},       {"cpu_quota", r.cpu_quota()},
              {"cpu_shares", r.cpu_shares()},       {"memory_limit_in_bytes", r.memory_limit_in_bytes()},
              {"oom_score_adj", r.oom_score_adj()}, {"cpuset_cpus", r.cpuset_cpus()},
              {"cpuset_mems", r.cpuset_mems()},     {"memory_swap_limit_in_bytes", r.memory_swap_limit_in_bytes()},
              {"unified", str_map(r.unified())}};
    json h = json::array();
    for (const auto& l : r.hugepage_limits()) h.push_back({{"page_size", l.page_size()}, {"limit", l.limit()}});
    o["hugepage_limits"] = h;
    return o;
}

std::string one_line(std::string s) {
    for (char& c : s)
        if (c == '\n' || c == '\r') c = ' ';
    return s;
}

void usage() {
    std::fprintf(stderr,
                 "usage: nri-qos-cri [--socket ENDPOINT] [--timeout-ms N] [--verbose-ids ID,...]\n"
                 "  list the CRI runtime's live pod sandboxes and containers (verbose status) as one JSON document\n"
                 "  --verbose-ids: ask the status of these ids only (\"\" none); the others as listed\n"
                 "  ENDPOINT: unix:///path or /path (default %s)\n",
                 kDefaultEndpoint);
}

}  // namespace

int main(int argc, char** argv) {
    std::string endpoint = kDefaultEndpoint;
    long timeout_ms = 10000;
    bool only = false;  // --verbose-ids given: status calls for `verbose` only
    std::set<std::string> verbose;
    for (int i = 1; i < argc; ++i) {
        std::string a = argv[i];
        if ((a == "--socket" || a == "--cri-socket") && i + 1 < argc) endpoint = argv[++i];
        else if (a == "--verbose-ids" && i + 1 < argc) {
            only = true;
            std::istringstream in(argv[++i]);
            std::string id;
            while (std::getline(in, id, ','))
                if (!id.empty()) verbose.insert(id);
        } else if (a == "--timeout-ms" && i + 1 < argc) timeout_ms = std::strtol(argv[++i], nullptr, 10);
        else if (a == "--help" || a == "-h") {
            usage();
            return 0;
        } else {
            usage();
            return 2;
        }
    }
    if (timeout_ms <= 0) timeout_ms = 10000;
    if (!endpoint.empty() && endpoint[0] == '/') endpoint = "unix://" + endpoint;

    grpc::ChannelArguments args;
    args.SetMaxReceiveMessageSize(64 << 20);  // many pods, each with its runtime spec
    auto channel = grpc::CreateCustomChannel(endpoint, grpc::InsecureChannelCredentials(), args);
    auto stub = v1::RuntimeService::NewStub(channel);
    const auto deadline = [timeout_ms] { return std::chrono::system_clock::now() + std::chrono::milliseconds(timeout_ms); };
    auto fail = [&](const char* what, const grpc::Status& st) {
        std::fprintf(stderr, "nri-qos-cri: %s on %s: %s\n", what, endpoint.c_str(), one_line(st.error_message()).c_str());
        return 1;
    };

    json out = {{"v", 1}, {"endpoint", endpoint}};
    json errors = json::array();
    {
        grpc::ClientContext ctx;
        ctx.set_deadline(deadline());
        v1::VersionRequest rq;
        v1::VersionResponse rs;
        grpc::Status st = stub->Version(&ctx, rq, &rs);
        if (!st.ok()) return fail("CRI Version", st);
        out["runtime"] = {{"name", rs.runtime_name()}, {"version", rs.runtime_version()}, {"api_version", rs.runtime_api_version()}};
    }
    json sandboxes = json::array();
    {
        grpc::ClientContext ctx;
        ctx.set_deadline(deadline());
        v1::ListPodSandboxRequest rq;
        v1::ListPodSandboxResponse rs;
        grpc::Status st = stub->ListPodSandbox(&ctx, rq, &rs);
        if (!st.ok()) return fail("CRI ListPodSandbox", st);
        for (const auto& sb : rs.items()) {
            if (sb.state() != v1::SANDBOX_READY) continue;
            if (only && !verbose.count(sb.id())) {
                sandboxes.push_back({{"id", sb.id()},
                                     {"state", v1::PodSandboxState_Name(sb.state())},
                                     {"created_at", sb.created_at()},
                                     {"brief", true},
                                     {"metadata",
                                      {{"name", sb.metadata().name()},
                                       {"uid", sb.metadata().uid()},
                                       {"namespace", sb.metadata().namespace_()},
                                       {"attempt", sb.metadata().attempt()}}},
                                     {"labels", str_map(sb.labels())},
                                     {"annotations", str_map(sb.annotations())},
                                     {"runtime_handler", sb.runtime_handler()}});
                continue;
            }
            grpc::ClientContext c2;
            c2.set_deadline(deadline());
            v1::PodSandboxStatusRequest q2;
            q2.set_pod_sandbox_id(sb.id());
            q2.set_verbose(true);
            v1::PodSandboxStatusResponse r2;
            grpc::Status s2 = stub->PodSandboxStatus(&c2, q2, &r2);
            if (!s2.ok()) {
                errors.push_back("sandbox " + sb.id() + ": PodSandboxStatus: " + one_line(s2.error_message()));
                continue;
            }
            const v1::PodSandboxStatus& s = r2.status();
            sandboxes.push_back({{"id", sb.id()},
                                 {"state", v1::PodSandboxState_Name(s.state())},
                                 {"created_at", s.created_at()},
                                 {"metadata",
                                  {{"name", s.metadata().name()},
                                   {"uid", s.metadata().uid()},
                                   {"namespace", s.metadata().namespace_()},
                                   {"attempt", s.metadata().attempt()}}},
                                 {"labels", str_map(s.labels())},
                                 {"annotations", str_map(s.annotations())},
                                 {"runtime_handler", s.runtime_handler()},
                                 {"info", info_map(r2.info())}});
        }
    }
    json containers = json::array();
    {
        grpc::ClientContext ctx;
        ctx.set_deadline(deadline());
        v1::ListContainersRequest rq;
        v1::ListContainersResponse rs;
        grpc::Status st = stub->ListContainers(&ctx, rq, &rs);
        if (!st.ok()) return fail("CRI ListContainers", st);
        for (const auto& c : rs.containers()) {
            if (c.state() != v1::CONTAINER_CREATED && c.state() != v1::CONTAINER_RUNNING) continue;
            if (only && !verbose.count(c.id())) {
                containers.push_back({{"id", c.id()},
                                      {"pod_sandbox_id", c.pod_sandbox_id()},
                                      {"state", v1::ContainerState_Name(c.state())},
                                      {"created_at", c.created_at()},
                                      {"brief", true},
                                      {"metadata", {{"name", c.metadata().name()}, {"attempt", c.metadata().attempt()}}},
                                      {"labels", str_map(c.labels())},
                                      {"annotations", str_map(c.annotations())}});
                continue;
            }
            grpc::ClientContext c2;
            c2.set_deadline(deadline());
            v1::ContainerStatusRequest q2;
            q2.set_container_id(c.id());
            q2.set_verbose(true);
            v1::ContainerStatusResponse r2;
            grpc::Status s2 = stub->ContainerStatus(&c2, q2, &r2);
            if (!s2.ok()) {
                errors.push_back("container " + c.id() + ": ContainerStatus: " + one_line(s2.error_message()));
                continue;
            }
            const v1::ContainerStatus& s = r2.status();
            containers.push_back(
                {{"id", c.id()},
                 {"pod_sandbox_id", c.pod_sandbox_id()},
                 {"state", v1::ContainerState_Name(s.state())},
                 {"created_at", s.created_at()},
                 {"metadata", {{"name", s.metadata().name()}, {"attempt", s.metadata().attempt()}}},
                 {"labels", str_map(s.labels())},
                 {"annotations", str_map(s.annotations())},
                 {"resources", s.has_resources() && s.resources().has_linux() ? linux_resources(s.resources().linux()) : json(nullptr)},
                 {"info", info_map(r2.info())}});
        }
    }
    out["sandboxes"] = std::move(sandboxes);
    out["containers"] = std::move(containers);
    out["errors"] = std::move(errors);
    std::string text = out.dump(-1, ' ', false, json::error_handler_t::replace);
    text += "\n";
    return std::fwrite(text.data(), 1, text.size(), stdout) == text.size() && std::fflush(stdout) == 0 ? 0 : 1;
}
