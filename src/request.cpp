#include "request.hpp"

#include <unordered_set>
#include <vector>

using nlohmann::json;

namespace nriqos {

const char* event_name(Event e) {
    switch (e) {
        case Event::Create: return "create";
        case Event::Update: return "update";
        case Event::Delete: return "delete";
        case Event::Pause: return "pause";
        case Event::Resume: return "resume";
        case Event::RunPodSandbox: return "RunPodSandbox";
        case Event::StopPodSandbox: return "StopPodSandbox";
        case Event::RemovePodSandbox: return "RemovePodSandbox";
        case Event::CreateContainer: return "CreateContainer";
        case Event::StartContainer: return "StartContainer";
        case Event::UpdateContainer: return "UpdateContainer";
        case Event::StopContainer: return "StopContainer";
        case Event::RemoveContainer: return "RemoveContainer";
        case Event::PostUpdateContainer: return "PostUpdateContainer";
        case Event::UpdatePodSandbox: return "UpdatePodSandbox";
        case Event::Other: break;
    }
    return "other";
}

namespace {

const char* type_name(const json& j) {
    switch (j.type()) {
        case json::value_t::null: return "null";
        case json::value_t::object: return "object";
        case json::value_t::array: return "array";
        case json::value_t::string: return "string";
        case json::value_t::boolean: return "boolean";
        case json::value_t::number_float: return "non-integer number";
        case json::value_t::number_integer:
        case json::value_t::number_unsigned: return "integer";
        default: return "value";
    }
}

[[noreturn]] void fail(const std::string& where, const std::string& what) {
    throw InputError((where.empty() ? std::string("/") : where) + ": " + what);
}

void expect(const json& j, json::value_t t, const std::string& where, const char* want) {
    bool ok = j.type() == t || (t == json::value_t::number_integer && j.type() == json::value_t::number_unsigned);
    if (!ok) fail(where, std::string("expected ") + want + ", got " + type_name(j));
}

/// Escape a key for use in a JSON pointer (RFC 6901) in messages.
std::string ptr_key(const std::string& k) {
    std::string out;
    for (char c : k) {
        if (c == '~') out += "~0";
        else if (c == '/') out += "~1";
        else if (static_cast<unsigned char>(c) < 0x20) out += '?';
        else out += c;
    }
    return out.size() > 80 ? out.substr(0, 80) + "..." : out;
}

const json* member(const json& obj, const char* key) {
    auto it = obj.find(key);
    return it == obj.end() ? nullptr : &*it;
}

std::string get_string(const json& obj, const char* key, const std::string& where, bool required = false) {
    const json* v = member(obj, key);
    if (!v || v->is_null()) {
        if (required) fail(where + "/" + key, "required field missing");
        return {};
    }
    expect(*v, json::value_t::string, where + "/" + key, "string");
    return v->get<std::string>();
}

/// Integer in [lo, hi]; accepts a decimal string too (proto3 JSON prints 64-bit ints as strings).
std::optional<int64_t> get_int(const json* v, const std::string& where, int64_t lo, int64_t hi) {
    if (!v || v->is_null()) return std::nullopt;
    int64_t x = 0;
    if (v->is_number_unsigned()) {
        uint64_t u = v->get<uint64_t>();
        if (u > static_cast<uint64_t>(INT64_MAX)) fail(where, "integer out of range");
        x = static_cast<int64_t>(u);
    } else if (v->is_number_integer()) {
        x = v->get<int64_t>();
    } else if (v->is_string()) {
        const std::string& s = v->get_ref<const std::string&>();
        size_t i = (!s.empty() && s[0] == '-') ? 1 : 0;
        if (s.size() == i || s.size() > 20) fail(where, "expected an integer");
        for (size_t k = i; k < s.size(); ++k)
            if (s[k] < '0' || s[k] > '9') fail(where, "expected an integer");
        try {
            x = std::stoll(s);
        } catch (...) {
            fail(where, "integer out of range");
        }
    } else {
        fail(where, std::string("expected integer, got ") + type_name(*v));
    }
    if (x < lo || x > hi) fail(where, "integer " + std::to_string(x) + " out of range [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
    return x;
}

/// NRI Go JSON Optional wrapper {"value": N}; a bare number is accepted too.
std::optional<int64_t> get_opt_wrapped(const json& obj, const char* key, const std::string& where, bool nri, int64_t lo, int64_t hi) {
    const json* v = member(obj, key);
    std::string w = where + "/" + key;
    if (!v || v->is_null()) return std::nullopt;
    if (nri && v->is_object()) {
        const json* inner = member(*v, "value");
        if (!inner) return int64_t{0};  // Go omits zero values: {"value":0} may print as {}
        return get_int(inner, w + "/value", lo, hi);
    }
    return get_int(v, w, lo, hi);
}

void check_text(const std::string& s, const std::string& where, size_t max, bool allow_ctl) {
    if (s.size() > max) fail(where, "longer than " + std::to_string(max) + " bytes");
    if (!allow_ctl)
        for (unsigned char c : s)
            if (c < 0x20 || c == 0x7f) fail(where, "contains a control character");
}

std::map<std::string, std::string> get_string_map(const json& obj, const char* key, const std::string& where) {
    std::map<std::string, std::string> out;
    const json* v = member(obj, key);
    std::string w = where + "/" + key;
    if (!v || v->is_null()) return out;
    expect(*v, json::value_t::object, w, "object");
    if (v->size() > limits::kMaxMapEntries) fail(w, "more than " + std::to_string(limits::kMaxMapEntries) + " entries");
    for (auto it = v->begin(); it != v->end(); ++it) {
        std::string kw = w + "/" + ptr_key(it.key());
        check_text(it.key(), kw, limits::kMaxKeyBytes, false);
        expect(it.value(), json::value_t::string, kw, "string");
        const std::string& s = it.value().get_ref<const std::string&>();
        check_text(s, kw, limits::kMaxValueBytes, true);
        if (s.find('\0') != std::string::npos) fail(kw, "contains a NUL byte");
        out.emplace(it.key(), s);
    }
    return out;
}

/// Container/sandbox ids: containerd uses 64 hex chars; accept [A-Za-z0-9_.-], no "." / "..".
void check_id(const std::string& id, const std::string& where) {
    if (id.empty()) fail(where, "empty id");
    if (id.size() > limits::kMaxIdBytes) fail(where, "id longer than " + std::to_string(limits::kMaxIdBytes) + " bytes");
    if (id == "." || id == "..") fail(where, "invalid id");
    for (unsigned char c : id)
        if (!(isalnum(c) || c == '-' || c == '_' || c == '.')) fail(where, "id may contain only [A-Za-z0-9_.-]");
}

std::optional<std::string> get_cgroups_path(const json& obj, const char* key, const std::string& where) {
    const json* v = member(obj, key);
    if (!v || v->is_null()) return std::nullopt;
    std::string w = where + "/" + key;
    expect(*v, json::value_t::string, w, "string");
    const std::string& s = v->get_ref<const std::string&>();
    if (s.empty()) return std::nullopt;
    check_text(s, w, limits::kMaxCgroupsPathBytes, false);
    return s;
}

void fill_names(Request& r) {
    auto pick = [&](const char* ann, const char* label) -> std::string {
        auto a = r.annotations.find(ann);
        if (a != r.annotations.end()) return a->second;
        auto l = r.labels.find(label);
        return l != r.labels.end() ? l->second : std::string();
    };
    if (r.pod_namespace.empty()) r.pod_namespace = pick("io.kubernetes.cri.sandbox-namespace", "io.kubernetes.pod.namespace");
    if (r.pod_name.empty()) r.pod_name = pick("io.kubernetes.cri.sandbox-name", "io.kubernetes.pod.name");
    if (r.pod_uid.empty()) r.pod_uid = pick("io.kubernetes.cri.sandbox-uid", "io.kubernetes.pod.uid");
    if (r.container_name.empty() && !r.is_sandbox)
        r.container_name = pick("io.kubernetes.cri.container-name", "io.kubernetes.container.name");
}

}  // namespace

json parse_json_limited(std::string_view text, int max_depth) {
    if (text.size() > limits::kMaxRequestBytes)
        throw InputError("request larger than " + std::to_string(limits::kMaxRequestBytes) + " bytes");
    if (text.find_first_not_of(" \t\r\n") == std::string_view::npos) throw InputError("empty input");
    // nlohmann's lexer takes a raw NUL as the end of input: what follows would be ignored.
    if (text.find('\0') != std::string_view::npos) throw InputError("malformed JSON: NUL byte in the request");
    // Keys seen per open object, to refuse duplicate keys (which Go and nlohmann resolve
    // differently: a smuggling vector between the runtime and the hook).
    std::vector<std::unordered_set<std::string>> keys;
    auto cb = [&](int depth, json::parse_event_t ev, json& parsed) -> bool {
        switch (ev) {
            case json::parse_event_t::object_start:
            case json::parse_event_t::array_start:
                if (depth >= max_depth) throw InputError("JSON nested deeper than " + std::to_string(max_depth) + " levels");
                if (ev == json::parse_event_t::object_start) keys.emplace_back();
                break;
            case json::parse_event_t::object_end:
                if (!keys.empty()) keys.pop_back();
                break;
            case json::parse_event_t::key: {
                if (keys.empty()) break;
                auto& k = keys.back();
                // Bound the work on hostile documents early (labels/annotations are checked
                // again, with their field name, after parsing).
                if (k.size() >= limits::kMaxMapEntries)
                    throw InputError("JSON object with more than " + std::to_string(limits::kMaxMapEntries) + " keys");
                const std::string& name = parsed.get_ref<const std::string&>();
                if (!k.insert(name).second) throw InputError("duplicate JSON key \"" + ptr_key(name) + "\"");
                break;
            }
            default: break;
        }
        return true;
    };
    try {
        return json::parse(text.begin(), text.end(), cb, /*allow_exceptions=*/true, /*ignore_comments=*/false);
    } catch (const json::parse_error& e) {
        std::string m = e.what();
        auto p = m.find("parse error");
        throw InputError("malformed JSON: " + (p == std::string::npos ? m : m.substr(p)));
    } catch (const json::exception& e) {
        throw InputError(std::string("malformed JSON: ") + e.what());
    }
}

Resources parse_resources(const json& j, const std::string& w, bool nri) {
    Resources r;
    if (j.is_null()) return r;
    expect(j, json::value_t::object, w, "object");
    constexpr int64_t kMax = INT64_MAX;
    if (const json* cpu = member(j, "cpu"); cpu && !cpu->is_null()) {
        std::string cw = w + "/cpu";
        expect(*cpu, json::value_t::object, cw, "object");
        r.cpu_shares = get_opt_wrapped(*cpu, "shares", cw, nri, 0, kMax);
        r.cpu_quota = get_opt_wrapped(*cpu, "quota", cw, nri, -1, kMax);
        r.cpu_period = get_opt_wrapped(*cpu, "period", cw, nri, 0, kMax);
        std::string cpus = get_string(*cpu, "cpus", cw), mems = get_string(*cpu, "mems", cw);
        check_text(cpus, cw + "/cpus", 4096, false);
        check_text(mems, cw + "/mems", 4096, false);
        if (!cpus.empty()) r.cpu_cpus = cpus;
        if (!mems.empty()) r.cpu_mems = mems;
    }
    if (const json* mem = member(j, "memory"); mem && !mem->is_null()) {
        std::string mw = w + "/memory";
        expect(*mem, json::value_t::object, mw, "object");
        r.mem_limit = get_opt_wrapped(*mem, "limit", mw, nri, -1, kMax);
        r.mem_swap = get_opt_wrapped(*mem, "swap", mw, nri, -1, kMax);
        r.mem_reservation = get_opt_wrapped(*mem, "reservation", mw, nri, -1, kMax);
    }
    if (const json* p = member(j, "pids"); p && !p->is_null()) {
        expect(*p, json::value_t::object, w + "/pids", "object");
        r.pids_limit = get_int(member(*p, "limit"), w + "/pids/limit", -1, kMax);
    }
    return r;
}

Request parse_v01_request(std::string_view text) {
    json j = parse_json_limited(text);
    expect(j, json::value_t::object, "", "a JSON object (NRI v0.1 request)");
    Request r;
    r.wire = Request::Wire::V01;
    r.version = get_string(j, "version", "", true);
    if (r.version != "0.1" && r.version.rfind("0.1.", 0) != 0)
        fail("/version", "unsupported NRI version \"" + ptr_key(r.version) + "\" (nri-qos speaks 0.1)");
    std::string state = get_string(j, "state", "", true);
    if (state == "create") r.event = Event::Create;
    else if (state == "update") r.event = Event::Update;
    else if (state == "delete") r.event = Event::Delete;
    else if (state == "pause") r.event = Event::Pause;
    else if (state == "resume") r.event = Event::Resume;
    else fail("/state", "unknown state \"" + ptr_key(state) + "\" (create|update|delete|pause|resume)");
    r.id = get_string(j, "id", "", true);
    check_id(r.id, "/id");
    r.sandbox_id = get_string(j, "sandboxID", "");
    if (r.sandbox_id.empty()) r.sandbox_id = r.id;
    check_id(r.sandbox_id, "/sandboxID");
    r.pid = get_int(member(j, "pid"), "/pid", 0, 4194304);
    if (r.pid && *r.pid == 0) r.pid.reset();
    if (const json* c = member(j, "conf"); c && !c->is_null()) {
        expect(*c, json::value_t::object, "/conf", "object");
        r.conf = *c;
    }
    r.labels = get_string_map(j, "labels", "");
    if (const json* spec = member(j, "spec"); spec && !spec->is_null()) {
        expect(*spec, json::value_t::object, "/spec", "object");
        r.cgroups_path = get_cgroups_path(*spec, "cgroupsPath", "/spec");
        r.annotations = get_string_map(*spec, "annotations", "/spec");
        if (const json* res = member(*spec, "resources")) r.resources = parse_resources(*res, "/spec/resources", false);
        if (const json* ns = member(*spec, "namespaces"); ns && !ns->is_null())
            expect(*ns, json::value_t::object, "/spec/namespaces", "object");
    }
    if (const json* res = member(j, "results"); res && !res->is_null())
        expect(*res, json::value_t::array, "/results", "array");
    auto ct = r.annotations.find("io.kubernetes.cri.container-type");
    r.is_sandbox = r.id == r.sandbox_id || (ct != r.annotations.end() && ct->second == "sandbox");
    fill_names(r);
    return r;
}

Request parse_nri_event(std::string_view text) {
    json j = parse_json_limited(text);
    expect(j, json::value_t::object, "", "a JSON object (nri-eval event)");
    Request r;
    r.wire = Request::Wire::NriEvent;
    r.version = "nri";
    static const std::pair<const char*, Event> kEvents[] = {
        {"RunPodSandbox", Event::RunPodSandbox}, {"StopPodSandbox", Event::StopPodSandbox},
        {"RemovePodSandbox", Event::RemovePodSandbox}, {"CreateContainer", Event::CreateContainer},
        {"StartContainer", Event::StartContainer}, {"UpdateContainer", Event::UpdateContainer},
        {"StopContainer", Event::StopContainer}, {"RemoveContainer", Event::RemoveContainer},
        {"PostUpdateContainer", Event::PostUpdateContainer}, {"UpdatePodSandbox", Event::UpdatePodSandbox},
        {"Synchronize", Event::Other},
    };
    std::string ev = get_string(j, "event", "", true);
    bool known = false;
    for (const auto& [n, e] : kEvents)
        if (ev == n) { r.event = e; known = true; }
    if (!known) fail("/event", "unknown event \"" + ptr_key(ev) + "\"");
    if (const json* rt = member(j, "runtime"); rt && !rt->is_null()) {
        expect(*rt, json::value_t::object, "/runtime", "object");
        r.runtime_name = get_string(*rt, "name", "/runtime");
        r.runtime_version = get_string(*rt, "version", "/runtime");
        check_text(r.runtime_name, "/runtime/name", 128, false);
        check_text(r.runtime_version, "/runtime/version", 128, false);
    }
    const json* pod = member(j, "pod");
    if (!pod || pod->is_null()) fail("/pod", "required field missing");
    expect(*pod, json::value_t::object, "/pod", "object");
    std::string pod_id = get_string(*pod, "id", "/pod", true);
    check_id(pod_id, "/pod/id");
    r.pod_name = get_string(*pod, "name", "/pod");
    r.pod_namespace = get_string(*pod, "namespace", "/pod");
    r.pod_uid = get_string(*pod, "uid", "/pod");
    check_text(r.pod_name, "/pod/name", 253, false);
    check_text(r.pod_namespace, "/pod/namespace", 253, false);
    check_text(r.pod_uid, "/pod/uid", 128, false);
    r.labels = get_string_map(*pod, "labels", "/pod");
    r.annotations = get_string_map(*pod, "annotations", "/pod");
    r.sandbox_id = pod_id;
    const json* podlinux = member(*pod, "linux");
    if (podlinux && !podlinux->is_null()) expect(*podlinux, json::value_t::object, "/pod/linux", "object");

    const json* ctr = member(j, "container");
    if (ctr && !ctr->is_null()) {
        expect(*ctr, json::value_t::object, "/container", "object");
        r.is_sandbox = false;
        r.id = get_string(*ctr, "id", "/container", true);
        check_id(r.id, "/container/id");
        std::string psid = get_string(*ctr, "pod_sandbox_id", "/container");
        if (!psid.empty() && psid != pod_id) fail("/container/pod_sandbox_id", "does not match /pod/id");
        r.container_name = get_string(*ctr, "name", "/container");
        check_text(r.container_name, "/container/name", 253, false);
        // Container annotations are the OCI ones (allow-listed pod annotations included);
        // they refine the pod's. Labels stay the pod's, as in v0.1.
        for (auto& [k, v] : get_string_map(*ctr, "annotations", "/container")) r.annotations[k] = v;
        r.pid = get_int(member(*ctr, "pid"), "/container/pid", 0, 4194304);
        if (const json* cl = member(*ctr, "linux"); cl && !cl->is_null()) {
            expect(*cl, json::value_t::object, "/container/linux", "object");
            r.cgroups_path = get_cgroups_path(*cl, "cgroups_path", "/container/linux");
            if (const json* res = member(*cl, "resources")) r.resources = parse_resources(*res, "/container/linux/resources", true);
        }
        if (const json* lr = member(j, "linux_resources"); lr && !lr->is_null())
            r.resources = parse_resources(*lr, "/linux_resources", true);
    } else {
        r.is_sandbox = true;
        r.id = pod_id;
        r.pid = get_int(member(*pod, "pid"), "/pod/pid", 0, 4194304);
        if (podlinux && !podlinux->is_null()) {
            r.cgroups_path = get_cgroups_path(*podlinux, "cgroups_path", "/pod/linux");
            if (const json* res = member(*podlinux, "resources")) r.resources = parse_resources(*res, "/pod/linux/resources", true);
        }
        // UpdatePodSandbox: the pod's new resources
        if (const json* lr = member(j, "linux_resources"); lr && !lr->is_null())
            r.resources = parse_resources(*lr, "/linux_resources", true);
    }
    if (r.pid && *r.pid == 0) r.pid.reset();
    fill_names(r);
    return r;
}

}  // namespace nriqos
