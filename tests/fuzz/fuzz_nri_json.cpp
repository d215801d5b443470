// libFuzzer target: the relay's protobuf → NRI JSON conversion (src/nri/nri_json.*) of pod and
// container data — names, labels, annotations are written by pod authors — and the way back
// for the child's answer. The first input byte picks what the rest is:
//   0-3  a CreateContainer / UpdateContainer / UpdatePodSandbox request or a StateChangeEvent
//        (protobuf, as containerd sends it): converted like Relay::prepare() does (an update's
//        linux_resources as sent; the child merges it), printed (json::dump,
//        strict UTF-8, and print_event, which must give the same bytes), and read by the
//        child's parser (request.hpp parse_nri_event);
//   4    a LinuxResources, 5 a ContainerAdjustment (protobuf): to JSON and back;
//   6-7  JSON text as the child could print it: read back into protobuf
//        (adjustment_from_json / resources_from_json) — never throws, one-line errors; and
//        read by the relay's answer reader (parse_answer), which must agree with json::parse.
// Oracles: no crash, no exception out of the converters; the printed event is one JSON document
// the child accepts or refuses with a one-line error; what the child accepts is what the
// protobuf said (ids, names, labels, annotations with the container's over the pod's,
// cgroups path, pid, CPU shares/quota, memory limit; an update's set fields over the
// container's resources, or the pod's without a container: request.hpp granted_resources); JSON → protobuf → JSON → protobuf is
// stable (deterministic serialisation compared); the reader refuses the writer's JSON only for
// values outside a kernel range (oom_score_adj).
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>

#include "fuzz_common.hpp"
#include "nri/nri_json.hpp"
#include "model/request.hpp"

namespace {

namespace pb = ::nri::pkg::api::v1alpha1;
using nlohmann::json;

std::string det(const google::protobuf::MessageLite& m) {
    std::string s;
    {
        google::protobuf::io::StringOutputStream zs(&s);
        google::protobuf::io::CodedOutputStream cs(&zs);
        cs.SetSerializationDeterministic(true);
        m.SerializeToCodedStream(&cs);
    }
    return s;
}

template <class Map>
std::map<std::string, std::string> as_map(const Map& m) {
    return std::map<std::string, std::string>(m.begin(), m.end());
}

/// What the child must have read from the event, when it accepted it.
void check_request(const nriqos::Request& r, const pb::PodSandbox& pod, const pb::Container* ctr, const pb::LinuxResources* update) {
    if (r.sandbox_id != pod.id()) fuzz::die("sandbox id differs", r.sandbox_id);
    if (r.pod_name != pod.name() || r.pod_namespace != pod.namespace_() || r.pod_uid != pod.uid()) fuzz::die("pod name/namespace/uid differ");
    if (r.labels != as_map(pod.labels())) fuzz::die("labels differ");
    std::map<std::string, std::string> ann = as_map(pod.annotations());
    if (ctr)
        for (const auto& [k, v] : ctr->annotations()) ann[k] = v;
    if (r.annotations != ann) fuzz::die("annotations differ");
    const pb::LinuxResources* res = nullptr;
    if (ctr) {
        if (r.is_sandbox || r.id != ctr->id() || r.container_name != ctr->name()) fuzz::die("container id/name differ");
        std::optional<int64_t> pid = ctr->pid() ? std::optional<int64_t>(ctr->pid()) : std::nullopt;
        if (r.pid != pid) fuzz::die("container pid differs");
        std::optional<std::string> cg = ctr->linux().cgroups_path().empty() ? std::nullopt : std::optional<std::string>(ctr->linux().cgroups_path());
        if (r.cgroups_path != cg) fuzz::die("container cgroups path differs");
        if (ctr->linux().has_resources()) res = &ctr->linux().resources();
    } else {
        if (!r.is_sandbox || r.id != pod.id()) fuzz::die("sandbox event read as a container");
        std::optional<int64_t> pid = pod.pid() ? std::optional<int64_t>(pod.pid()) : std::nullopt;
        if (r.pid != pid) fuzz::die("pod pid differs");
        std::optional<std::string> cg = pod.linux().cgroups_path().empty() ? std::nullopt : std::optional<std::string>(pod.linux().cgroups_path());
        if (r.cgroups_path != cg) fuzz::die("pod cgroups path differs");
        if (pod.linux().has_resources()) res = &pod.linux().resources();
    }
    // The resources read: the current ones, with an update's set fields laid over them (the one
    // definition, model/request.hpp granted_resources: a 0 wrapper is "unchanged").
    auto read = [](const pb::LinuxResources* p) {
        nriqos::Resources e;
        if (!p) return e;
        const auto& c = p->cpu();
        if (c.has_shares()) e.cpu_shares = static_cast<int64_t>(c.shares().value());
        if (c.has_quota()) e.cpu_quota = c.quota().value();
        if (p->memory().has_limit()) e.mem_limit = p->memory().limit().value();
        return e;
    };
    nriqos::Resources want = read(res);
    if (update) want = nriqos::granted_resources(want, read(update));
    if (res || update) {
        if (r.resources.cpu_shares != want.cpu_shares) fuzz::die("cpu shares differ");
        if (r.resources.cpu_quota != want.cpu_quota) fuzz::die("cpu quota differs");
        if (r.resources.mem_limit != want.mem_limit) fuzz::die("memory limit differs");
    }
}

void event(int kind, const std::string& bytes) {
    pb::CreateContainerRequest creq;
    pb::UpdateContainerRequest ureq;
    pb::UpdatePodSandboxRequest preq;
    pb::StateChangeEvent sc;
    const pb::PodSandbox* pod = nullptr;
    const pb::Container* ctr = nullptr;
    const pb::LinuxResources* update = nullptr;
    json ev = json::object();
    const char* name = "";
    switch (kind) {
        case 0:
            if (!creq.ParseFromString(bytes)) return;
            pod = &creq.pod(), ctr = creq.has_container() ? &creq.container() : nullptr, name = "CreateContainer";
            break;
        case 1:
            if (!ureq.ParseFromString(bytes)) return;
            pod = &ureq.pod(), ctr = ureq.has_container() ? &ureq.container() : nullptr, name = "UpdateContainer";
            if (ureq.has_linux_resources()) update = &ureq.linux_resources();
            break;
        case 2:
            if (!preq.ParseFromString(bytes)) return;
            pod = &preq.pod(), name = "UpdatePodSandbox";
            if (preq.has_linux_resources()) update = &preq.linux_resources();
            break;
        default:
            if (!sc.ParseFromString(bytes)) return;
            pod = &sc.pod(), ctr = sc.has_container() ? &sc.container() : nullptr;
            name = ctr ? "StartContainer" : "RunPodSandbox";
            break;
    }
    ev = nriqos::nri::event_to_json(name, "containerd", "2.1.4", *pod, ctr, update);
    std::string text;
    try {
        text = ev.dump();  // strict: throws on invalid UTF-8, which protobuf never lets through
    } catch (const json::exception& e) { fuzz::die("event JSON cannot be printed", e.what()); }
    // What Relay::prepare() sends: the printer, byte for byte the DOM's text.
    std::string printed;
    nriqos::nri::print_event(printed, name, "containerd", "2.1.4", *pod, ctr, update);
    if (printed != text) fuzz::die("print_event differs from the DOM's dump", printed + "\n" + text);
    try {
        check_request(nriqos::parse_nri_event(text), *pod, ctr, update);
    } catch (const nriqos::InputError& e) {
        std::string m = e.what();
        if (m.empty() || m.find('\n') != std::string::npos) fuzz::die("error message not one line", m);
    }
}

template <class Msg, class ToJson, class FromJson>
void round_trip(const std::string& bytes, ToJson to_json, FromJson from_json) {
    Msg m;
    if (!m.ParseFromString(bytes)) return;
    json j = to_json(m);
    try {
        (void)j.dump();
    } catch (const json::exception& e) { fuzz::die("JSON cannot be printed", e.what()); }
    Msg back, again;
    std::string err;
    if (!from_json(j, back, err)) {
        // The reader enforces kernel ranges the protobuf types do not (oom_score_adj).
        if (err.find("out of range") == std::string::npos || err.find('\n') != std::string::npos) fuzz::die("own JSON refused", err);
        return;
    }
    if (!from_json(to_json(back), again, err)) fuzz::die("own JSON refused (2nd)", err);
    if (det(back) != det(again)) fuzz::die("JSON round trip is not stable");
}

// The relay's answer reader (nriqos::nri::parse_answer) gives what json::parse gives, minus the
// top-level members it skips.
void check_parse_answer(const std::string& text, json full) {
    json got = nriqos::nri::parse_answer(text);
    if (full.is_discarded() != got.is_discarded()) fuzz::die("parse_answer and json::parse disagree on validity", text);
    if (full.is_discarded()) return;
    if (full.is_object()) {
        for (auto it = full.begin(); it != full.end();) {
            const std::string& k = it.key();
            if (k == "adjustment" || k == "update" || k == "error" || k == "on_child_failure" || k == "deadline") ++it;
            else it = full.erase(it);
        }
    }
    if (got != full) fuzz::die("parse_answer differs from json::parse", text);
}

void from_text(int kind, const std::string& text) {
    json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
    check_parse_answer(text, j);
    if (j.is_discarded()) return;
    std::string err;
    bool ok;
    if (kind == 6) {
        pb::ContainerAdjustment a;
        ok = nriqos::nri::adjustment_from_json(j, a, err);
        if (ok)
            round_trip<pb::ContainerAdjustment>(
                det(a), nriqos::nri::adjustment_to_json,
                [](const json& x, pb::ContainerAdjustment& o, std::string& e) { return nriqos::nri::adjustment_from_json(x, o, e); });
    } else {
        pb::LinuxResources r;
        ok = nriqos::nri::resources_from_json(j, r, err);
        if (ok)
            round_trip<pb::LinuxResources>(det(r), nriqos::nri::resources_to_json, [](const json& x, pb::LinuxResources& o, std::string& e) {
                return nriqos::nri::resources_from_json(x, o, e);
            });
    }
    if (!ok && (err.empty() || err.find('\n') != std::string::npos)) fuzz::die("error message not one line", err);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    if (size == 0) return 0;
    int kind = data[0] % 8;
    std::string rest(reinterpret_cast<const char*>(data + 1), size - 1);
    switch (kind) {
        case 0:
        case 1:
        case 2:
        case 3: event(kind, rest); break;
        case 4:
            round_trip<pb::LinuxResources>(rest, nriqos::nri::resources_to_json, [](const json& x, pb::LinuxResources& o, std::string& e) {
                return nriqos::nri::resources_from_json(x, o, e);
            });
            break;
        case 5:
            round_trip<pb::ContainerAdjustment>(rest, nriqos::nri::adjustment_to_json, [](const json& x, pb::ContainerAdjustment& o, std::string& e) {
                return nriqos::nri::adjustment_from_json(x, o, e);
            });
            break;
        default: from_text(kind, rest); break;
    }
    return 0;
}
