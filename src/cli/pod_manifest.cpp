#include "cli/pod_manifest.hpp"

#include <algorithm>

#include <sstream>

#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/yaml.h>

#include "facts/fact_readers.hpp"
#include "os/sha256.hpp"

using nlohmann::json;

namespace nriqos {

namespace {

[[noreturn]] void bad(const std::string& where, const std::string& what) { throw InputError(where + ": " + what); }

const char* node_kind(const YAML::Node& n) {
    switch (n.Type()) {
        case YAML::NodeType::Map: return "a mapping";
        case YAML::NodeType::Sequence: return "a list";
        case YAML::NodeType::Scalar: return "a scalar";
        case YAML::NodeType::Null: return "null";
        default: return "nothing";
    }
}

/// Printable, clipped copy of untrusted text for a message.
std::string clip(const std::string& s) {
    std::string o;
    for (char c : s.substr(0, 64)) o += (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) ? '?' : c;
    return o + (s.size() > 64 ? "..." : "");
}

/// Nesting depth over `limit`, or more than `budget` nodes visited: yaml-cpp shares aliased nodes
/// (`*a` is the node `&a`, not a copy), so a small document of aliases of aliases names
/// exponentially many nodes; the walk stops at the budget instead of expanding them.
bool too_deep_or_large(const YAML::Node& n, int limit, size_t& budget) {
    if (budget == 0) return true;
    --budget;
    if (!n.IsMap() && !n.IsSequence()) return false;
    if (limit <= 0) return true;
    if (n.IsMap()) {
        for (const auto& kv : n)
            if (too_deep_or_large(kv.first, limit - 1, budget) || too_deep_or_large(kv.second, limit - 1, budget)) return true;
    } else {
        for (const auto& v : n)
            if (too_deep_or_large(v, limit - 1, budget)) return true;
    }
    return false;
}

/// Strict UTF-8 (no overlong forms, no surrogates, nothing above U+10FFFF): a YAML escape
/// ("\\uD800") can make bytes the JSON of the NRI events could not carry.
bool valid_utf8(const std::string& s) {
    size_t i = 0;
    while (i < s.size()) {
        unsigned char c = static_cast<unsigned char>(s[i]);
        if (c < 0x80) {
            ++i;
            continue;
        }
        size_t n = c >= 0xf0 && c <= 0xf4 ? 3 : c >= 0xe0 && c <= 0xef ? 2 : c >= 0xc2 && c <= 0xdf ? 1 : 0;
        if (n == 0) return false;
        uint32_t cp = c & (0x3f >> n);
        for (size_t k = 1; k <= n; ++k) {
            if (i + k >= s.size()) return false;
            unsigned char d = static_cast<unsigned char>(s[i + k]);
            if ((d & 0xc0) != 0x80) return false;
            cp = (cp << 6) | (d & 0x3f);
        }
        if ((n == 2 && cp < 0x800) || (n == 3 && (cp < 0x10000 || cp > 0x10ffff)) || (cp >= 0xd800 && cp <= 0xdfff)) return false;
        i += n + 1;
    }
    return true;
}

std::string scalar(const YAML::Node& n, const std::string& where, size_t max_bytes) {
    if (!n.IsScalar()) bad(where, std::string("expected a string, got ") + node_kind(n));
    const std::string& s = n.Scalar();
    if (s.size() > max_bytes) bad(where, "longer than " + std::to_string(max_bytes) + " bytes");
    if (s.find('\0') != std::string::npos) bad(where, "contains a NUL byte");
    if (!valid_utf8(s)) bad(where, "not valid UTF-8");
    return s;
}

/// A name-like field: ≤ 253 bytes, no control characters.
std::string name_field(const YAML::Node& n, const std::string& where) {
    std::string s = scalar(n, where, 253);
    for (char c : s)
        if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f || c == '/') bad(where, "\"" + clip(s) + "\": not a Kubernetes name");
    return s;
}

std::map<std::string, std::string> string_map(const YAML::Node& n, const std::string& where) {
    std::map<std::string, std::string> out;
    if (!n || n.IsNull()) return out;
    if (!n.IsMap()) bad(where, std::string("expected a mapping, got ") + node_kind(n));
    if (n.size() > limits::kMaxMapEntries) bad(where, "more than " + std::to_string(limits::kMaxMapEntries) + " entries");
    size_t total = 0;
    for (const auto& kv : n) {
        std::string k = scalar(kv.first, where, limits::kMaxKeyBytes);
        // Kubernetes keys are qualified names; the NRI request parser (request.cpp key_problem)
        // refuses a key with a control character, so the manifest reader refuses it first.
        for (unsigned char ch : k)
            if (ch < 0x20 || ch == 0x7f) bad(where, "key \"" + clip(k) + "\": contains a control character");
        std::string v = scalar(kv.second, where + "." + clip(k), limits::kMaxValueBytes);
        total += k.size() + v.size();
        if (total > limits::kMaxValueBytes) bad(where, "more than " + std::to_string(limits::kMaxValueBytes) + " bytes in all (Kubernetes' limit)");
        if (!out.emplace(k, std::move(v)).second) bad(where, "duplicate key \"" + clip(k) + "\"");
    }
    return out;
}

/// One resource list (requests, limits, overhead): cpu → millicores, memory → bytes; other
/// resources (hugepages, extended) are not read.
void resource_list(const YAML::Node& n, const std::string& where, std::optional<int64_t>& cpu, std::optional<int64_t>& mem) {
    if (!n || n.IsNull()) return;
    if (!n.IsMap()) bad(where, std::string("expected a mapping, got ") + node_kind(n));
    if (n.size() > 64) bad(where, "more than 64 resources");
    for (const auto& kv : n) {
        std::string k = scalar(kv.first, where, 253);
        if (k != "cpu" && k != "memory") continue;
        std::string text = scalar(kv.second, where + "." + k, kMaxQuantityBytes);
        std::string why;
        auto v = k == "cpu" ? parse_quantity_milli(text, &why) : parse_quantity(text, &why);
        if (!v) bad(where + "." + k, why);
        if (*v < 0) bad(where + "." + k, "quantity \"" + clip(text) + "\": negative");
        (k == "cpu" ? cpu : mem) = *v;
    }
}

ManifestContainer container(const YAML::Node& n, const std::string& where, bool init) {
    if (!n.IsMap()) bad(where, std::string("expected a mapping, got ") + node_kind(n));
    ManifestContainer c;
    c.init = init;
    if (!n["name"]) bad(where + ".name", "required field missing");
    c.name = name_field(n["name"], where + ".name");
    if (c.name.empty()) bad(where + ".name", "empty");
    if (init && n["restartPolicy"]) c.sidecar = scalar(n["restartPolicy"], where + ".restartPolicy", 64) == "Always";
    if (YAML::Node r = n["resources"]; r && !r.IsNull()) {
        if (!r.IsMap()) bad(where + ".resources", std::string("expected a mapping, got ") + node_kind(r));
        resource_list(r["requests"], where + ".resources.requests", c.cpu_request, c.mem_request);
        resource_list(r["limits"], where + ".resources.limits", c.cpu_limit, c.mem_limit);
    }
    // pkg/apis/core/v1/defaults.go SetDefaults_Pod: a limit without a request defaults the request.
    if (c.cpu_limit && !c.cpu_request) c.cpu_request = c.cpu_limit;
    if (c.mem_limit && !c.mem_request) c.mem_request = c.mem_limit;
    return c;
}

/// Counts the documents of a YAML stream without building nodes. yaml-cpp 0.7 (Debian bookworm)
/// never gets past a flow token at the top level (a stray "," or "]"): each HandleNextDocument
/// returns one more empty document without consuming it, so YAML::LoadAll loops for ever,
/// allocating (found by fuzz-pod_manifest). Counting first, and stopping at kMaxDocs, bounds that.
class DocumentCounter final : public YAML::EventHandler {
public:
    static constexpr size_t kMaxDocs = 16;
    void OnDocumentStart(const YAML::Mark& m) override {
        if (++docs_ > kMaxDocs)
            bad("manifest", "more than " + std::to_string(kMaxDocs) + " YAML documents (the next starts at line " + std::to_string(m.line + 1) +
                                ", column " + std::to_string(m.column + 1) + "; a stray ',' or ']' reads as endless empty documents): give one pod");
    }
    void OnDocumentEnd() override {}
    void OnNull(const YAML::Mark&, YAML::anchor_t) override {}
    void OnAlias(const YAML::Mark&, YAML::anchor_t) override {}
    void OnScalar(const YAML::Mark&, const std::string&, YAML::anchor_t, const std::string&) override {}
    void OnSequenceStart(const YAML::Mark&, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override {}
    void OnSequenceEnd() override {}
    void OnMapStart(const YAML::Mark&, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override {}
    void OnMapEnd() override {}

private:
    size_t docs_ = 0;
};

YAML::Node load(std::string_view text) {
    if (text.size() > manifest_limits::kMaxBytes) bad("manifest", "larger than " + std::to_string(manifest_limits::kMaxBytes) + " bytes");
    if (text.find('\0') != std::string_view::npos) bad("manifest", "contains a NUL byte");
    try {
        std::string owned(text);
        {
            std::istringstream in(owned);
            YAML::Parser parser(in);
            DocumentCounter counter;
            while (parser.HandleNextDocument(counter)) {}
        }
        std::vector<YAML::Node> docs = YAML::LoadAll(owned);
        docs.erase(std::remove_if(docs.begin(), docs.end(), [](const YAML::Node& d) { return !d || d.IsNull(); }), docs.end());
        if (docs.empty()) bad("manifest", "empty");
        if (docs.size() > 1) bad("manifest", std::to_string(docs.size()) + " YAML documents: give one pod");
        return docs[0];
    } catch (const YAML::Exception& e) {
        // e.what() is "yaml-cpp: error at line L, column C: message"
        std::string m = e.what();
        for (char& c : m)
            if (c == '\n') c = ' ';
        bad("manifest", m);
    }
}

bool positive(const std::optional<int64_t>& v) { return v && *v > 0; }

}  // namespace

std::string made_up_uid(const std::string& ns, const std::string& name) {
    std::string h = sha256_hex("nri-qos explain --pod " + ns + "/" + name);
    // 8-4-4-4-12 with version 4 and variant 10xx, as a random UUID looks
    return h.substr(0, 8) + "-" + h.substr(8, 4) + "-4" + h.substr(13, 3) + "-8" + h.substr(17, 3) + "-" + h.substr(20, 12);
}

PodManifest parse_pod_manifest(std::string_view text) {
    YAML::Node doc;
    try {
        doc = load(text);
        size_t budget = manifest_limits::kMaxNodes;
        if (too_deep_or_large(doc, manifest_limits::kMaxDepth, budget))
            bad("manifest", budget == 0 ? "more than " + std::to_string(manifest_limits::kMaxNodes) + " nodes (counting each use of an alias)"
                                        : "nested deeper than " + std::to_string(manifest_limits::kMaxDepth) + " levels");
        if (!doc.IsMap()) bad("manifest", std::string("expected a mapping (a Pod), got ") + node_kind(doc));
        std::string kind = doc["kind"] ? scalar(doc["kind"], "kind", 64) : "";
        if (kind == "List") {
            YAML::Node items = doc["items"];
            if (!items || !items.IsSequence() || items.size() != 1)
                bad("items", "a List must hold exactly one Pod (got " + std::to_string(items && items.IsSequence() ? items.size() : 0) + " items)");
            doc = items[0];
            if (!doc.IsMap()) bad("items[0]", std::string("expected a mapping, got ") + node_kind(doc));
            kind = doc["kind"] ? scalar(doc["kind"], "items[0].kind", 64) : "";
        }
        if (!kind.empty() && kind != "Pod") bad("kind", "\"" + clip(kind) + "\": not a Pod (give the pod itself, e.g. kubectl get pod NAME -o yaml)");
        PodManifest m;
        YAML::Node md = doc["metadata"];
        if (md && !md.IsNull()) {
            if (!md.IsMap()) bad("metadata", std::string("expected a mapping, got ") + node_kind(md));
            if (md["name"]) m.name = name_field(md["name"], "metadata.name");
            else if (md["generateName"]) m.name = name_field(md["generateName"], "metadata.generateName") + "preview";
            if (md["namespace"]) m.ns = name_field(md["namespace"], "metadata.namespace");
            if (md["uid"]) {
                m.uid = scalar(md["uid"], "metadata.uid", 64);
                // kubelet puts it into cgroup names: what the API server makes (a UUID) and nothing else
                if (m.uid.empty() || !std::all_of(m.uid.begin(), m.uid.end(), [](char c) {
                        return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F') || c == '-';
                    }))
                    bad("metadata.uid", "\"" + clip(m.uid) + "\": not a UUID");
            }
            m.labels = string_map(md["labels"], "metadata.labels");
            m.annotations = string_map(md["annotations"], "metadata.annotations");
        }
        if (m.name.empty()) bad("metadata.name", "required field missing");
        if (m.uid.empty()) {
            m.uid = made_up_uid(m.ns, m.name);
            m.uid_made_up = true;
        }
        YAML::Node spec = doc["spec"];
        if (!spec || !spec.IsMap())
            bad("spec", spec ? std::string("expected a mapping, got ") + node_kind(spec) : std::string("required field missing"));
        YAML::Node ctrs = spec["containers"], inits = spec["initContainers"];
        if (!ctrs || !ctrs.IsSequence() || ctrs.size() == 0)
            bad("spec.containers", ctrs && !ctrs.IsSequence() ? std::string("expected a list, got ") + node_kind(ctrs)
                                                              : std::string("at least one container is required"));
        if (inits && !inits.IsNull() && !inits.IsSequence()) bad("spec.initContainers", std::string("expected a list, got ") + node_kind(inits));
        size_t n = ctrs.size() + (inits && inits.IsSequence() ? inits.size() : 0);
        if (n > manifest_limits::kMaxContainers)
            bad("spec", std::to_string(n) + " containers: more than " + std::to_string(manifest_limits::kMaxContainers));
        if (inits && inits.IsSequence())
            for (size_t i = 0; i < inits.size(); ++i)
                m.containers.push_back(container(inits[i], "spec.initContainers[" + std::to_string(i) + "]", true));
        for (size_t i = 0; i < ctrs.size(); ++i) m.containers.push_back(container(ctrs[i], "spec.containers[" + std::to_string(i) + "]", false));
        for (size_t i = 0; i < m.containers.size(); ++i)
            for (size_t j = 0; j < i; ++j)
                if (m.containers[i].name == m.containers[j].name) bad("spec", "two containers named \"" + clip(m.containers[i].name) + "\"");
        resource_list(spec["overhead"], "spec.overhead", m.overhead_cpu, m.overhead_mem);
        if (YAML::Node st = doc["status"]; st && st.IsMap() && st["qosClass"] && st["qosClass"].IsScalar())
            m.status_qos = scalar(st["qosClass"], "status.qosClass", 64);
        return m;
    } catch (const YAML::Exception& e) {  // a conversion inside the tree (should not happen: scalars only)
        std::string msg = e.what();
        for (char& c : msg)
            if (c == '\n') c = ' ';
        bad("manifest", msg);
    }
}

KubeQos pod_qos(const PodManifest& m) {
    // qos.go GetPodQOS: only cpu and memory count; zero quantities are ignored.
    int64_t req_cpu = 0, req_mem = 0, lim_cpu = 0, lim_mem = 0;
    bool any_req_cpu = false, any_req_mem = false, any_lim_cpu = false, any_lim_mem = false;
    bool guaranteed = true;
    for (const auto& c : m.containers) {
        if (positive(c.cpu_request)) req_cpu += *c.cpu_request, any_req_cpu = true;
        if (positive(c.mem_request)) req_mem += *c.mem_request, any_req_mem = true;
        if (positive(c.cpu_limit)) lim_cpu += *c.cpu_limit, any_lim_cpu = true;
        if (positive(c.mem_limit)) lim_mem += *c.mem_limit, any_lim_mem = true;
        if (!positive(c.cpu_limit) || !positive(c.mem_limit)) guaranteed = false;
    }
    if (!any_req_cpu && !any_req_mem && !any_lim_cpu && !any_lim_mem) return KubeQos::BestEffort;
    // requests and limits must name the same resources with equal sums
    if (guaranteed && any_req_cpu == any_lim_cpu && any_req_mem == any_lim_mem && req_cpu == lim_cpu && req_mem == lim_mem)
        return KubeQos::Guaranteed;
    return KubeQos::Burstable;
}

PodCgroupConfig resource_config_for_pod(const PodManifest& m, KubeQos qos) {
    // component-helpers resource PodRequests / PodLimits: Σ app containers and sidecars; each
    // regular init container runs alone (with the sidecars started before it), so the pod needs
    // the max of that and the Σ.
    auto sum = [&](auto get, bool& all_set) {
        int64_t app = 0, sidecars = 0, init_max = 0;
        for (const auto& c : m.containers) {
            std::optional<int64_t> v = get(c);
            if (!positive(v)) all_set = false;  // ContainerFn: a container without this limit
            int64_t x = v ? *v : 0;
            if (!c.init || c.sidecar) {
                app += x;
                if (c.sidecar) sidecars += x;
            } else {
                init_max = std::max(init_max, sidecars + x);
            }
        }
        return std::max(app, init_max);
    };
    bool cpu_req_all = true, mem_req_all = true, cpu_limits_declared = true, mem_limits_declared = true;
    int64_t cpu_req = sum([](const ManifestContainer& c) { return c.cpu_request; }, cpu_req_all);
    int64_t cpu_lim = sum([](const ManifestContainer& c) { return c.cpu_limit; }, cpu_limits_declared);
    int64_t mem_lim = sum([](const ManifestContainer& c) { return c.mem_limit; }, mem_limits_declared);
    (void)mem_req_all;
    // overhead: added to the requests; to a limit only where the pod has that limit
    if (m.overhead_cpu) {
        cpu_req += *m.overhead_cpu;
        if (cpu_lim > 0) cpu_lim += *m.overhead_cpu;
    }
    if (m.overhead_mem && mem_lim > 0) mem_lim += *m.overhead_mem;
    PodCgroupConfig p;
    const int64_t shares = milli_cpu_to_shares(cpu_req);
    // Guaranteed pods and Burstable ones with every CPU limit declared have cpu_lim > 0.
    const int64_t quota = cpu_lim > 0 ? milli_cpu_to_quota(cpu_lim) : -1;
    switch (qos) {
        case KubeQos::Guaranteed:
            p.cpu_shares = shares;
            p.cpu_quota = quota;
            p.cpu_period = 100000;
            p.memory_limit = mem_lim;
            break;
        case KubeQos::Burstable:
            p.cpu_shares = shares;
            if (cpu_limits_declared) {
                p.cpu_quota = quota;
                p.cpu_period = 100000;
            }
            if (mem_limits_declared) p.memory_limit = mem_lim;
            break;
        default:
            p.cpu_shares = 2;  // MinShares
            break;
    }
    return p;
}

Resources container_oci_resources(const ManifestContainer& c) {
    Resources r;
    // calculateLinuxResources: a request of zero with a limit takes the limit's shares.
    int64_t req = c.cpu_request ? *c.cpu_request : 0;
    if (req == 0 && positive(c.cpu_limit)) req = *c.cpu_limit;
    r.cpu_shares = milli_cpu_to_shares(req);
    r.cpu_period = 100000;  // kubelet sets CpuPeriod whenever cpuCFSQuota (the default)
    if (positive(c.cpu_limit)) r.cpu_quota = milli_cpu_to_quota(*c.cpu_limit);  // MilliCPUToQuota(0) = 0: left out
    if (positive(c.mem_limit)) {
        r.mem_limit = *c.mem_limit;
        r.mem_swap = *c.mem_limit;  // containerd WithResources: swap = limit (no swapping by default)
    }
    return r;
}

namespace {

std::string qos_dir(KubeQos q) { return q == KubeQos::Burstable ? "burstable" : q == KubeQos::BestEffort ? "besteffort" : ""; }

std::string made_up_id(const std::string& uid, const std::string& what) { return sha256_hex("nri-qos explain --pod " + uid + "/" + what); }

}  // namespace

KubeletPod kubelet_pod(const PodManifest& m, CgroupDriver driver) {
    KubeletPod k;
    k.qos = pod_qos(m);
    k.driver = driver;
    k.pod = resource_config_for_pod(m, k.qos);
    const std::string q = qos_dir(k.qos);
    if (driver == CgroupDriver::Cgroupfs) {
        // GetPodContainerName: <qos cgroup>/pod<uid>; the Guaranteed pods sit in kubepods itself
        k.cgroup_parent = "/kubepods/" + (q.empty() ? "" : q + "/") + "pod" + m.uid;
        k.pod_dir = k.cgroup_parent.substr(1);
    } else {
        // cgroup_manager_linux.go ToSystemd: every '-' of a name part becomes '_'
        std::string u = m.uid;
        std::replace(u.begin(), u.end(), '-', '_');
        const std::string qs = q.empty() ? "kubepods" : "kubepods-" + q;
        k.cgroup_parent = qs + "-pod" + u + ".slice";
        k.pod_dir = "kubepods.slice/" + (q.empty() ? "" : qs + ".slice/") + k.cgroup_parent;
    }
    // containerd getCgroupsPath: "<leaf slice>:cri-containerd:<id>" or "<parent>/<id>"
    auto cg_path = [&](const std::string& id) {
        return driver == CgroupDriver::Systemd ? k.cgroup_parent + ":cri-containerd:" + id : k.cgroup_parent + "/" + id;
    };
    k.sandbox.id = made_up_id(m.uid, "sandbox");
    k.sandbox.cgroups_path = cg_path(k.sandbox.id);
    k.sandbox.oci.cpu_shares = 2;  // containerd WithDefaultSandboxShares
    for (const auto& c : m.containers) {
        PreviewContainer p;
        p.name = c.name;
        p.init = c.init;
        p.sidecar = c.sidecar;
        p.id = made_up_id(m.uid, "container/" + c.name);
        p.cgroups_path = cg_path(p.id);
        p.oci = container_oci_resources(c);
        k.containers.push_back(std::move(p));
    }
    return k;
}

json nri_resources_json(const Resources& r) {
    json j = json::object();
    auto w = [](int64_t v) { return json{{"value", v}}; };
    json cpu = json::object(), mem = json::object();
    if (r.cpu_shares) cpu["shares"] = w(*r.cpu_shares);
    if (r.cpu_quota) cpu["quota"] = w(*r.cpu_quota);
    if (r.cpu_period) cpu["period"] = w(*r.cpu_period);
    if (r.cpu_cpus) cpu["cpus"] = *r.cpu_cpus;
    if (r.cpu_mems) cpu["mems"] = *r.cpu_mems;
    if (r.mem_limit) mem["limit"] = w(*r.mem_limit);
    if (r.mem_swap) mem["swap"] = w(*r.mem_swap);
    if (r.mem_reservation) mem["reservation"] = w(*r.mem_reservation);
    j["cpu"] = cpu;
    j["memory"] = mem;
    if (r.pids_limit) j["pids"] = {{"limit", *r.pids_limit}};
    return j;
}

namespace {

json pod_json(const PodManifest& m, const KubeletPod& k, std::optional<int64_t> pid) {
    json ann = json::object();
    for (const auto& [a, v] : m.annotations) ann[a] = v;
    // what containerd's CRI adds to the sandbox's annotations
    ann["io.kubernetes.cri.container-type"] = "sandbox";
    ann["io.kubernetes.cri.sandbox-id"] = k.sandbox.id;
    ann["io.kubernetes.cri.sandbox-name"] = m.name;
    ann["io.kubernetes.cri.sandbox-namespace"] = m.ns;
    ann["io.kubernetes.cri.sandbox-uid"] = m.uid;
    json p = {
        {"id", k.sandbox.id},
        {"name", m.name},
        {"namespace", m.ns},
        {"uid", m.uid},
        {"labels", m.labels},
        {"annotations", ann},
        {"runtime_handler", "runc"},
        {"linux", {{"cgroup_parent", k.cgroup_parent}, {"cgroups_path", k.sandbox.cgroups_path}, {"resources", nri_resources_json(k.sandbox.oci)}}}};
    if (pid) p["pid"] = *pid;
    return p;
}

}  // namespace

json nri_pod_event(const PodManifest& m, const KubeletPod& k, const char* event, int64_t pid) {
    return {{"event", event}, {"runtime", {{"name", "containerd"}, {"version", "2.0.0"}}}, {"pod", pod_json(m, k, pid)}};
}

json nri_container_event(const PodManifest& m, const KubeletPod& k, size_t i, const char* event, const Resources& res, std::optional<int64_t> pid) {
    const PreviewContainer& c = k.containers.at(i);
    // The container's own OCI annotations (the pod's are in `pod`; containerd adds pod annotations
    // here only for its pod_annotations allow-list) and kubelet's container labels.
    json ann = json::object();
    ann["io.kubernetes.cri.container-type"] = "container";
    ann["io.kubernetes.cri.container-name"] = c.name;
    ann["io.kubernetes.cri.sandbox-id"] = k.sandbox.id;
    ann["io.kubernetes.cri.sandbox-name"] = m.name;
    ann["io.kubernetes.cri.sandbox-namespace"] = m.ns;
    ann["io.kubernetes.cri.sandbox-uid"] = m.uid;
    json labels = {{"io.kubernetes.container.name", c.name},
                   {"io.kubernetes.pod.name", m.name},
                   {"io.kubernetes.pod.namespace", m.ns},
                   {"io.kubernetes.pod.uid", m.uid}};
    json ctr = {{"id", c.id},         {"pod_sandbox_id", k.sandbox.id},
                {"name", c.name},     {"labels", labels},
                {"annotations", ann}, {"linux", {{"cgroups_path", c.cgroups_path}, {"resources", nri_resources_json(res)}}}};
    if (pid) ctr["pid"] = *pid;
    return {{"event", event}, {"runtime", {{"name", "containerd"}, {"version", "2.0.0"}}}, {"pod", pod_json(m, k, std::nullopt)}, {"container", ctr}};
}

}  // namespace nriqos
