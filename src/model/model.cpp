#include "model/model.hpp"

#include <sys/vfs.h>

#include <cctype>
#include <vector>

namespace nriqos {

namespace {
constexpr long kCgroup2Magic = 0x63677270;
constexpr size_t kMaxLevels = 32;

void check_component(const std::string& c, const std::string& whole) {
    if (c.empty() || c == "." || c == "..") throw InputError("cgroupsPath \"" + whole + "\": empty, \".\" or \"..\" component is not allowed");
    if (c.size() > 255) throw InputError("cgroupsPath: component longer than 255 bytes");
    for (unsigned char ch : c)
        if (ch < 0x20 || ch == 0x7f || ch == '\\') throw InputError("cgroupsPath: control character or backslash in a component");
}

std::string printable(const std::string& s) {
    std::string o;
    for (unsigned char c : s.substr(0, 200)) o += (c < 0x20 || c == 0x7f) ? '?' : static_cast<char>(c);
    return o;
}

/// kubelet's name for a pod's own cgroup (pkg/kubelet/cm/pod_container_manager_linux.go
/// GetPodContainerName: "pod" + the pod UID; the systemd driver turns the name into the slice
/// "<parent>-pod<uid with '-' as '_'>.slice", cgroup_manager_linux.go ToSystemd): the last
/// component of `rel` is "pod<uid>" or ends in "-pod<uid>.slice" ("pod<uid>.slice" at the top).
bool is_pod_cgroup(const std::string& rel) {
    std::string last = rel.substr(rel.rfind('/') + 1);
    const std::string slice = ".slice";
    if (last.size() > slice.size() && last.compare(last.size() - slice.size(), slice.size(), slice) == 0) {
        last.resize(last.size() - slice.size());
        last = last.substr(last.rfind('-') + 1);
    }
    if (last.size() <= 3 || last.compare(0, 3, "pod") != 0) return false;
    for (size_t i = 3; i < last.size(); ++i) {
        unsigned char c = static_cast<unsigned char>(last[i]);
        if (!std::isalnum(c) && c != '-' && c != '_') return false;
    }
    return true;
}

/// The reason pod knobs are not written to the parent `pod` of `whole` when it is not a pod's
/// own cgroup (another workload's, or one many share: containerd's "/k8s.io", "system.slice",
/// "kubepods" itself), else "".
std::string shared_parent(const std::string& pod, const std::string& whole) {
    if (is_pod_cgroup(pod)) return "";
    return "cgroupsPath \"" + whole + "\": its parent " + pod +
           " is not a pod's own cgroup (kubelet's pod<uid>, or <parent>-pod<uid>.slice) and may be shared with other workloads: no pod cgroup";
}

/// runc ExpandSlice: "a-b-c.slice" → "a.slice/a-b.slice/a-b-c.slice".
std::string expand_slice(const std::string& slice, const std::string& whole) {
    const std::string suffix = ".slice";
    if (slice.size() <= suffix.size() || slice.compare(slice.size() - suffix.size(), suffix.size(), suffix) != 0)
        throw InputError("cgroupsPath \"" + whole + "\": systemd slice must end in .slice");
    if (slice == "-.slice") return "";
    if (slice.find('/') != std::string::npos) throw InputError("cgroupsPath \"" + whole + "\": systemd slice must not contain '/'");
    std::string base = slice.substr(0, slice.size() - suffix.size());
    std::string out, prefix;
    size_t pos = 0;
    while (true) {
        size_t dash = base.find('-', pos);
        std::string comp = base.substr(pos, dash == std::string::npos ? std::string::npos : dash - pos);
        if (comp.empty()) throw InputError("cgroupsPath \"" + whole + "\": malformed systemd slice (empty component)");
        prefix += (prefix.empty() ? "" : "-") + comp;
        check_component(prefix + suffix, whole);
        out += (out.empty() ? "" : "/") + prefix + suffix;
        if (dash == std::string::npos) break;
        pos = dash + 1;
    }
    return out;
}
}  // namespace

const char* kube_qos_name(KubeQos q) {
    switch (q) {
        case KubeQos::BestEffort: return "besteffort";
        case KubeQos::Burstable: return "burstable";
        case KubeQos::Guaranteed: return "guaranteed";
        default: return "unknown";
    }
}

const char* layout_name(Layout l) {
    switch (l) {
        case Layout::V1: return "v1";
        case Layout::Hybrid: return "hybrid";
        default: return "v2";
    }
}

CgroupPaths resolve_cgroups_path(const std::string& oci) {
    CgroupPaths p;
    std::string whole = printable(oci);
    if (oci.empty()) throw InputError("cgroupsPath is empty");
    for (unsigned char ch : oci)
        if (ch < 0x20 || ch == 0x7f) throw InputError("cgroupsPath: contains a control character");
    if (oci[0] != '/' && oci.find(':') != std::string::npos) {
        // systemd driver: "slice:prefix:name"
        p.driver = CgroupDriver::Systemd;
        size_t a = oci.find(':'), b = oci.find(':', a + 1);
        if (b == std::string::npos || oci.find(':', b + 1) != std::string::npos)
            throw InputError("cgroupsPath \"" + whole + "\": systemd form must be slice:prefix:name");
        std::string slice = oci.substr(0, a), prefix = oci.substr(a + 1, b - a - 1), name = oci.substr(b + 1);
        if (name.empty()) throw InputError("cgroupsPath \"" + whole + "\": systemd unit name is empty");
        if (prefix.find('/') != std::string::npos || name.find('/') != std::string::npos)
            throw InputError("cgroupsPath \"" + whole + "\": systemd prefix and name must not contain '/'");
        // opencontainers/cgroups systemd/common.go getUnitName: a scope "<prefix>-<name>.scope"
        // unless the name is a slice; the dash is there even when the prefix is empty.
        std::string unit;
        if (name.size() > 6 && name.compare(name.size() - 6, 6, ".slice") == 0) unit = name;
        else unit = prefix + "-" + name + ".scope";
        check_component(unit, whole);
        p.pod = expand_slice(slice.empty() ? std::string("system.slice") : slice, whole);
        p.container = p.pod.empty() ? unit : p.pod + "/" + unit;
        p.root_or_default = p.pod.empty() || slice.empty();
        if (p.pod.empty()) p.no_pod = "cgroupsPath \"" + whole + "\" is in the root slice: no pod cgroup";
        else if (slice.empty()) p.no_pod = "cgroupsPath \"" + whole + "\" has no slice (systemd's default system.slice): no pod cgroup";
        else p.no_pod = shared_parent(p.pod, whole);
        return p;
    }
    // cgroupfs driver: the path itself, below the hierarchy root.
    std::vector<std::string> comps;
    size_t pos = oci[0] == '/' ? 1 : 0;
    while (pos <= oci.size()) {
        size_t slash = oci.find('/', pos);
        std::string c = oci.substr(pos, slash == std::string::npos ? std::string::npos : slash - pos);
        if (slash == std::string::npos && c.empty() && !comps.empty()) break;  // one trailing '/'
        check_component(c, whole);
        comps.push_back(c);
        if (comps.size() > kMaxLevels) throw InputError("cgroupsPath: more than 32 levels");
        if (slash == std::string::npos) break;
        pos = slash + 1;
    }
    for (size_t i = 0; i < comps.size(); ++i) {
        if (i) p.container += '/';
        p.container += comps[i];
        if (i + 1 < comps.size()) p.pod += (i ? "/" : "") + comps[i];
    }
    p.root_or_default = p.pod.empty();
    if (p.pod.empty()) p.no_pod = "cgroupsPath \"" + whole + "\" is directly below the hierarchy root: no pod cgroup";
    else p.no_pod = shared_parent(p.pod, whole);
    return p;
}

KubeQos kube_qos_from_path(const std::string& rel) {
    if (rel.find("kubepods") == std::string::npos) return KubeQos::Unknown;
    if (rel.find("besteffort") != std::string::npos) return KubeQos::BestEffort;
    if (rel.find("burstable") != std::string::npos) return KubeQos::Burstable;
    return KubeQos::Guaranteed;
}

Layout detect_layout(const std::string& root) {
    struct statfs st {};
    if (statfs(root.c_str(), &st) == 0 && static_cast<long>(st.f_type) == kCgroup2Magic) return Layout::V2;
    std::string uni = root + "/unified";
    if (statfs(uni.c_str(), &st) == 0 && static_cast<long>(st.f_type) == kCgroup2Magic) return Layout::Hybrid;
    return Layout::V1;
}

std::optional<Layout> parse_layout(const std::string& s) {
    if (s == "auto" || s.empty()) return std::nullopt;
    if (s == "v1") return Layout::V1;
    if (s == "hybrid") return Layout::Hybrid;
    if (s == "v2") return Layout::V2;
    throw InputError("--cgroup-layout: expected auto, v1, hybrid or v2, got \"" + s + "\"");
}

}  // namespace nriqos
