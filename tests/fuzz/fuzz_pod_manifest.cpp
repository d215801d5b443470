// libFuzzer target: `explain --pod`'s manifest reader (pod_manifest.hpp parse_pod_manifest, with
// yaml-cpp) and what is built from it. Oracle: InputError with a one-line message, or a manifest
// within the limits (≤ 256 containers, a UUID-shaped uid, names without '/' or control
// characters) whose kubelet layout resolves (resolve_cgroups_path) to its own pod cgroup for
// both drivers, and whose NRI events the relay child's parser accepts (parse_nri_event).
#include <cctype>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "fuzz_common.hpp"
#include "model/model.hpp"
#include "cli/pod_manifest.hpp"
#include "model/request.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const std::string_view text(reinterpret_cast<const char*>(data), size);
    nriqos::PodManifest m;
    try {
        m = nriqos::parse_pod_manifest(text);
    } catch (const nriqos::InputError& e) {
        const std::string msg = e.what();
        if (msg.empty() || msg.find('\n') != std::string::npos) fuzz::die("error message not one line", msg);
        return 0;
    }
    if (m.containers.empty() || m.containers.size() > nriqos::manifest_limits::kMaxContainers) fuzz::die("container count accepted");
    for (char c : m.uid)
        if (!isxdigit(static_cast<unsigned char>(c)) && c != '-') fuzz::die("bad uid accepted", m.uid);
    for (const std::string* n : {&m.name, &m.ns})
        for (unsigned char c : *n)
            if (c < 0x20 || c == 0x7f || c == '/') fuzz::die("bad name accepted", *n);
    for (auto d : {nriqos::CgroupDriver::Cgroupfs, nriqos::CgroupDriver::Systemd}) {
        nriqos::KubeletPod k = nriqos::kubelet_pod(m, d);
        try {
            nriqos::Request s = nriqos::parse_nri_event(nriqos::nri_pod_event(m, k, "RunPodSandbox", 1000).dump());
            if (!s.is_sandbox) fuzz::die("sandbox event not a sandbox");
            for (size_t i = 0; i < k.containers.size(); ++i) {
                nriqos::CgroupPaths p = nriqos::resolve_cgroups_path(k.containers[i].cgroups_path);
                if (p.pod != k.pod_dir) fuzz::die("container cgroup outside the pod cgroup", k.containers[i].cgroups_path);
                nriqos::parse_nri_event(nriqos::nri_container_event(m, k, i, "CreateContainer", k.containers[i].oci, std::nullopt).dump());
            }
        } catch (const std::exception& e) { fuzz::die("events of an accepted manifest refused", e.what()); }
    }
    return 0;
}
