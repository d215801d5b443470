// protobuf <-> NRI Go JSON mapping, see nri_json.hpp.
#include "nri/nri_json.hpp"

#include <algorithm>
#include <charconv>
#include <cerrno>
#include <cstdlib>
#include <limits>
#include <stdexcept>
#include <vector>

#include "model/knobs.hpp"
#include "os/json_print.hpp"

namespace nriqos::nri {

using nlohmann::json;

namespace {

// ------------------------------------------------------------------ writing

// The NRI enum names nri-qos's process knobs use, with their numbers (containerd/nri pkg/api/api.proto
// IOPrioClass, LinuxSchedulerPolicy v0.11.0, MpolMode v0.12.0).
struct EnumName {
    const char* name;
    int num;
};
const char* enum_name(int n, std::initializer_list<EnumName> all) {
    for (const auto& a : all)
        if (a.num == n) return a.name;
    return "unknown";
}
const std::initializer_list<EnumName> kIoClasses = {{"IOPRIO_CLASS_RT", 1}, {"IOPRIO_CLASS_BE", 2}, {"IOPRIO_CLASS_IDLE", 3}};
const std::initializer_list<EnumName> kSchedPolicies = {{"SCHED_OTHER", 1}, {"SCHED_BATCH", 4}, {"SCHED_IDLE", 6}};
const std::initializer_list<EnumName> kMpolModes = {
    {"MPOL_DEFAULT", 0},        {"MPOL_PREFERRED", 1},          {"MPOL_BIND", 2}, {"MPOL_INTERLEAVE", 3}, {"MPOL_LOCAL", 4},
    {"MPOL_PREFERRED_MANY", 5}, {"MPOL_WEIGHTED_INTERLEAVE", 6}};

template <typename Map>
void put_map(json& j, const char* key, const Map& m) {
    if (m.empty()) return;
    json o = json::object();
    for (const auto& kv : m) o[kv.first] = kv.second;
    j[key] = std::move(o);
}

void put_str(json& j, const char* key, const std::string& s) {
    if (!s.empty()) j[key] = s;
}

json namespaces_json(const google::protobuf::RepeatedPtrField<pb::LinuxNamespace>& nss) {
    json a = json::array();
    for (const auto& ns : nss) {
        json o = json::object();
        put_str(o, "type", ns.type());
        put_str(o, "path", ns.path());
        a.push_back(std::move(o));
    }
    return a;
}

// ------------------------------------------------------------------ reading

struct MapError : std::runtime_error {
    using std::runtime_error::runtime_error;
};

[[noreturn]] void fail(const std::string& path, const std::string& what) { throw MapError(path + ": " + what); }

std::string describe(const json& v) {
    // dump escapes control characters (one line); replace: invalid UTF-8 never throws here.
    std::string d = v.dump(-1, ' ', false, json::error_handler_t::replace);
    if (d.size() > 40) d = d.substr(0, 37) + "...";
    return std::string(v.type_name()) + " " + d;
}

// `path.key` for messages. A key from the input (an annotation, an unknown field) that is not
// plain printable ASCII is printed as a JSON string (json_quoted: escaped, one line, cut).
std::string join(const std::string& path, const std::string& key) {
    if (key.size() <= 80 && nriqos::json_plain_ascii(key)) return path + "." + key;
    return path + "." + nriqos::json_quoted(key);
}

// Check that `j` is an object whose keys are all in `allowed`.
void expect_object(const json& j, const std::string& path, std::initializer_list<const char*> allowed) {
    if (!j.is_object()) fail(path, "expected an object, got " + describe(j));
    for (auto it = j.begin(); it != j.end(); ++it) {
        bool ok = false;
        for (const char* a : allowed) {
            if (it.key() == a) {
                ok = true;
                break;
            }
        }
        if (!ok) fail(join(path, it.key()), "unknown field");
    }
}

// Present and not null.
const json* field(const json& obj, const char* key) {
    auto it = obj.find(key);
    if (it == obj.end() || it->is_null()) return nullptr;
    return &*it;
}

int64_t to_int64(const json& v, const std::string& path) {
    if (v.is_number_unsigned()) {
        uint64_t u = v.get<uint64_t>();
        if (u > uint64_t(std::numeric_limits<int64_t>::max())) fail(path, "integer out of int64 range");
        return int64_t(u);
    }
    if (v.is_number_integer()) return v.get<int64_t>();
    if (v.is_string()) {
        const std::string& s = v.get_ref<const std::string&>();
        if (!s.empty() && (s[0] == '-' || (s[0] >= '0' && s[0] <= '9'))) {
            errno = 0;
            char* end = nullptr;
            long long r = std::strtoll(s.c_str(), &end, 10);
            if (errno == 0 && end && *end == '\0' && end != s.c_str() && s != "-") return r;
        }
        fail(path, "expected an int64 (number or decimal string), got " + describe(v));
    }
    fail(path, "expected an integer, got " + describe(v));
}

uint64_t to_uint64(const json& v, const std::string& path) {
    if (v.is_number_unsigned()) return v.get<uint64_t>();
    if (v.is_number_integer()) {
        int64_t i = v.get<int64_t>();
        if (i < 0) fail(path, "expected an unsigned integer, got " + describe(v));
        return uint64_t(i);
    }
    if (v.is_string()) {
        const std::string& s = v.get_ref<const std::string&>();
        if (!s.empty() && s[0] >= '0' && s[0] <= '9') {
            errno = 0;
            char* end = nullptr;
            unsigned long long r = std::strtoull(s.c_str(), &end, 10);
            if (errno == 0 && end && *end == '\0') return r;
        }
        fail(path, "expected a uint64 (number or decimal string), got " + describe(v));
    }
    fail(path, "expected an unsigned integer, got " + describe(v));
}

bool to_bool(const json& v, const std::string& path) {
    if (!v.is_boolean()) fail(path, "expected a boolean, got " + describe(v));
    return v.get<bool>();
}

const std::string& to_string(const json& v, const std::string& path) {
    if (!v.is_string()) fail(path, "expected a string, got " + describe(v));
    return v.get_ref<const std::string&>();
}

void read_string_map(const json& v, const std::string& path, google::protobuf::Map<std::string, std::string>* out) {
    if (!v.is_object()) fail(path, "expected an object of strings, got " + describe(v));
    for (auto it = v.begin(); it != v.end(); ++it) { (*out)[it.key()] = to_string(it.value(), join(path, it.key())); }
}

// Optional* wrappers: {"value": X}; missing "value" = zero value (Go omitempty).
const json* wrapper_value(const json& v, const std::string& path) {
    expect_object(v, path, {"value"});
    return field(v, "value");
}

#define READ_WRAPPER(OBJ, KEY, PATH, MSG, CONV)                      \
    do {                                                             \
        if (const json* w_ = field(OBJ, #KEY)) {                     \
            std::string p_ = join(PATH, #KEY);                       \
            const json* val_ = wrapper_value(*w_, p_);               \
            auto* m_ = (MSG)->mutable_##KEY();                       \
            if (val_) m_->set_value(CONV(*val_, join(p_, "value"))); \
        }                                                            \
    } while (0)

void read_memory(const json& j, const std::string& path, pb::LinuxMemory* m) {
    expect_object(j, path, {"limit", "reservation", "swap", "kernel", "kernel_tcp", "swappiness", "disable_oom_killer", "use_hierarchy"});
    READ_WRAPPER(j, limit, path, m, to_int64);
    READ_WRAPPER(j, reservation, path, m, to_int64);
    READ_WRAPPER(j, swap, path, m, to_int64);
    READ_WRAPPER(j, kernel, path, m, to_int64);
    READ_WRAPPER(j, kernel_tcp, path, m, to_int64);
    READ_WRAPPER(j, swappiness, path, m, to_uint64);
    READ_WRAPPER(j, disable_oom_killer, path, m, to_bool);
    READ_WRAPPER(j, use_hierarchy, path, m, to_bool);
}

void read_cpu(const json& j, const std::string& path, pb::LinuxCPU* c) {
    expect_object(j, path, {"shares", "quota", "period", "realtime_runtime", "realtime_period", "cpus", "mems"});
    READ_WRAPPER(j, shares, path, c, to_uint64);
    READ_WRAPPER(j, quota, path, c, to_int64);
    READ_WRAPPER(j, period, path, c, to_uint64);
    READ_WRAPPER(j, realtime_runtime, path, c, to_int64);
    READ_WRAPPER(j, realtime_period, path, c, to_uint64);
    if (const json* v = field(j, "cpus")) c->set_cpus(to_string(*v, join(path, "cpus")));
    if (const json* v = field(j, "mems")) c->set_mems(to_string(*v, join(path, "mems")));
}

void read_resources(const json& j, const std::string& path, pb::LinuxResources* r) {
    expect_object(j, path, {"memory", "cpu", "hugepage_limits", "blockio_class", "rdt_class", "unified", "devices", "pids"});
    if (const json* v = field(j, "memory")) read_memory(*v, join(path, "memory"), r->mutable_memory());
    if (const json* v = field(j, "cpu")) read_cpu(*v, join(path, "cpu"), r->mutable_cpu());
    if (const json* v = field(j, "hugepage_limits")) {
        std::string p = join(path, "hugepage_limits");
        if (!v->is_array()) fail(p, "expected an array, got " + describe(*v));
        for (size_t i = 0; i < v->size(); ++i) {
            std::string pi = p + "[" + std::to_string(i) + "]";
            const json& e = (*v)[i];
            expect_object(e, pi, {"page_size", "limit"});
            auto* h = r->add_hugepage_limits();
            if (const json* s = field(e, "page_size")) h->set_page_size(to_string(*s, join(pi, "page_size")));
            if (const json* l = field(e, "limit")) h->set_limit(to_uint64(*l, join(pi, "limit")));
        }
    }
    READ_WRAPPER(j, blockio_class, path, r, to_string);
    READ_WRAPPER(j, rdt_class, path, r, to_string);
    if (const json* v = field(j, "unified")) read_string_map(*v, join(path, "unified"), r->mutable_unified());
    if (const json* v = field(j, "devices")) {
        std::string p = join(path, "devices");
        if (!v->is_array()) fail(p, "expected an array, got " + describe(*v));
        for (size_t i = 0; i < v->size(); ++i) {
            std::string pi = p + "[" + std::to_string(i) + "]";
            const json& e = (*v)[i];
            expect_object(e, pi, {"allow", "type", "major", "minor", "access"});
            auto* d = r->add_devices();
            if (const json* a = field(e, "allow")) d->set_allow(to_bool(*a, join(pi, "allow")));
            if (const json* t = field(e, "type")) d->set_type(to_string(*t, join(pi, "type")));
            READ_WRAPPER(e, major, pi, d, to_int64);
            READ_WRAPPER(e, minor, pi, d, to_int64);
            if (const json* a = field(e, "access")) d->set_access(to_string(*a, join(pi, "access")));
        }
    }
    if (const json* v = field(j, "pids")) {
        std::string p = join(path, "pids");
        expect_object(*v, p, {"limit"});
        auto* pids = r->mutable_pids();
        if (const json* l = field(*v, "limit")) pids->set_limit(to_int64(*l, join(p, "limit")));
    }
}

#undef READ_WRAPPER

}  // namespace

// ------------------------------------------------------------------ public: writing

nlohmann::json resources_to_json(const pb::LinuxResources& r) {
    json j = json::object();
    if (r.has_memory()) {
        const auto& m = r.memory();
        json o = json::object();
        if (m.has_limit()) o["limit"] = {{"value", m.limit().value()}};
        if (m.has_reservation()) o["reservation"] = {{"value", m.reservation().value()}};
        if (m.has_swap()) o["swap"] = {{"value", m.swap().value()}};
        if (m.has_kernel()) o["kernel"] = {{"value", m.kernel().value()}};
        if (m.has_kernel_tcp()) o["kernel_tcp"] = {{"value", m.kernel_tcp().value()}};
        if (m.has_swappiness()) o["swappiness"] = {{"value", m.swappiness().value()}};
        if (m.has_disable_oom_killer()) o["disable_oom_killer"] = {{"value", m.disable_oom_killer().value()}};
        if (m.has_use_hierarchy()) o["use_hierarchy"] = {{"value", m.use_hierarchy().value()}};
        j["memory"] = std::move(o);
    }
    if (r.has_cpu()) {
        const auto& c = r.cpu();
        json o = json::object();
        if (c.has_shares()) o["shares"] = {{"value", c.shares().value()}};
        if (c.has_quota()) o["quota"] = {{"value", c.quota().value()}};
        if (c.has_period()) o["period"] = {{"value", c.period().value()}};
        if (c.has_realtime_runtime()) o["realtime_runtime"] = {{"value", c.realtime_runtime().value()}};
        if (c.has_realtime_period()) o["realtime_period"] = {{"value", c.realtime_period().value()}};
        put_str(o, "cpus", c.cpus());
        put_str(o, "mems", c.mems());
        j["cpu"] = std::move(o);
    }
    if (r.hugepage_limits_size() > 0) {
        json a = json::array();
        for (const auto& h : r.hugepage_limits()) a.push_back({{"page_size", h.page_size()}, {"limit", h.limit()}});
        j["hugepage_limits"] = std::move(a);
    }
    if (r.has_blockio_class()) j["blockio_class"] = {{"value", r.blockio_class().value()}};
    if (r.has_rdt_class()) j["rdt_class"] = {{"value", r.rdt_class().value()}};
    put_map(j, "unified", r.unified());
    if (r.devices_size() > 0) {
        json a = json::array();
        for (const auto& d : r.devices()) {
            json o = json::object();
            o["allow"] = d.allow();
            put_str(o, "type", d.type());
            if (d.has_major()) o["major"] = {{"value", d.major().value()}};
            if (d.has_minor()) o["minor"] = {{"value", d.minor().value()}};
            put_str(o, "access", d.access());
            a.push_back(std::move(o));
        }
        j["devices"] = std::move(a);
    }
    if (r.has_pids()) j["pids"] = {{"limit", r.pids().limit()}};
    return j;
}

nlohmann::json pod_to_json(const pb::PodSandbox& p) {
    json j = json::object();
    put_str(j, "id", p.id());
    put_str(j, "name", p.name());
    put_str(j, "uid", p.uid());
    put_str(j, "namespace", p.namespace_());
    put_map(j, "labels", p.labels());
    put_map(j, "annotations", p.annotations());
    put_str(j, "runtime_handler", p.runtime_handler());
    if (p.has_linux()) {
        const auto& l = p.linux();
        json o = json::object();
        if (l.has_pod_overhead()) o["pod_overhead"] = resources_to_json(l.pod_overhead());
        if (l.has_pod_resources()) o["pod_resources"] = resources_to_json(l.pod_resources());
        put_str(o, "cgroup_parent", l.cgroup_parent());
        put_str(o, "cgroups_path", l.cgroups_path());
        if (l.namespaces_size() > 0) o["namespaces"] = namespaces_json(l.namespaces());
        if (l.has_resources()) o["resources"] = resources_to_json(l.resources());
        j["linux"] = std::move(o);
    }
    if (p.pid() != 0) j["pid"] = p.pid();
    if (p.ips_size() > 0) {
        json a = json::array();
        for (const auto& ip : p.ips()) a.push_back(ip);
        j["ips"] = std::move(a);
    }
    return j;
}

nlohmann::json container_to_json(const pb::Container& c) {
    json j = json::object();
    put_str(j, "id", c.id());
    put_str(j, "pod_sandbox_id", c.pod_sandbox_id());
    put_str(j, "name", c.name());
    if (c.state() != 0) j["state"] = static_cast<int>(c.state());
    put_map(j, "labels", c.labels());
    put_map(j, "annotations", c.annotations());
    if (c.has_linux()) {
        const auto& l = c.linux();
        json o = json::object();
        if (l.namespaces_size() > 0) o["namespaces"] = namespaces_json(l.namespaces());
        if (l.has_resources()) o["resources"] = resources_to_json(l.resources());
        if (l.has_oom_score_adj()) o["oom_score_adj"] = {{"value", l.oom_score_adj().value()}};
        put_str(o, "cgroups_path", l.cgroups_path());
        j["linux"] = std::move(o);
    }
    if (c.pid() != 0) j["pid"] = c.pid();
    return j;
}

nlohmann::json adjustment_to_json(const pb::ContainerAdjustment& a) {
    json j = json::object();
    put_map(j, "annotations", a.annotations());
    if (a.has_linux()) {
        json o = json::object();
        if (a.linux().has_resources()) o["resources"] = resources_to_json(a.linux().resources());
        if (a.linux().has_oom_score_adj()) o["oom_score_adj"] = {{"value", a.linux().oom_score_adj().value()}};
        if (a.linux().has_io_priority()) {
            const auto& p = a.linux().io_priority();
            o["io_priority"] = {{"class", enum_name(p.class_(), kIoClasses)}, {"priority", p.priority()}};
        }
        if (a.linux().has_scheduler()) {
            const auto& p = a.linux().scheduler();
            o["scheduler"] = {{"policy", enum_name(p.policy(), kSchedPolicies)}, {"nice", p.nice()}, {"priority", p.priority()}};
        }
        if (a.linux().has_memory_policy()) {
            const auto& p = a.linux().memory_policy();
            o["memory_policy"] = {{"mode", enum_name(p.mode(), kMpolModes)}, {"nodes", p.nodes()}};
        }
        j["linux"] = std::move(o);
    }
    return j;
}

nlohmann::json event_to_json(const std::string& event, const std::string& runtime_name, const std::string& runtime_version, const pb::PodSandbox& pod,
                             const pb::Container* ctr, const pb::LinuxResources* linux_resources, bool unadjusted) {
    json ev = json::object();
    if (unadjusted) ev["unadjusted"] = true;
    if (linux_resources) ev["linux_resources"] = resources_to_json(*linux_resources);
    ev["event"] = event;
    ev["runtime"] = {{"name", runtime_name}, {"version", runtime_version}};
    ev["pod"] = pod_to_json(pod);
    if (ctr) ev["container"] = container_to_json(*ctr);
    return ev;
}

// ------------------------------------------------------------------ printing (no DOM)

namespace {

// Prints what the *_to_json functions above build, in the order their dump() prints it:
// nlohmann::json keeps object members in a std::map, so members come sorted bytewise by key
// (std::string's operator<), not in insertion order. Each member function below prints its
// members in that order; the unit test "[nri][json]" "print_event is byte-identical ..." and the fuzzer
// (tests/fuzz/fuzz_nri_json.cpp) hold the two paths to the same bytes.
class EventPrinter {
public:
    explicit EventPrinter(std::string& out) : p_(out), out_(out) {}

    void event(const std::string& event, const std::string& runtime_name, const std::string& runtime_version, const pb::PodSandbox& pod,
               const pb::Container* ctr, const pb::LinuxResources* linux_resources, bool unadjusted) {
        p_.open();
        if (ctr) container(p_.key("container"), *ctr);
        p_.key("event").str(event);
        if (linux_resources) resources(p_.key("linux_resources"), *linux_resources);
        sandbox(p_.key("pod"), pod);
        p_.key("runtime").open();
        p_.key("name").str(runtime_name);
        p_.key("version").str(runtime_version);
        p_.close();
        if (unadjusted) p_.key("unadjusted").boolean(true);
        p_.close();
    }

private:
    template <typename Int>
    void num(Int v) {
        char buf[24];
        out_.append(buf, size_t(std::to_chars(buf, buf + sizeof buf, v).ptr - buf));  // as dump_integer
    }
    void str_if(const char* k, const std::string& s) {
        if (!s.empty()) p_.key(k).str(s);
    }
    // A scalar as the DOM stores it: int64 (number_integer), uint64/uint32 (number_unsigned),
    // bool, string.
    void val(int64_t v) { num(v); }
    void val(uint64_t v) { num(v); }
    void val(uint32_t v) { num(uint64_t(v)); }
    void val(bool v) { p_.boolean(v); }
    void val(const std::string& v) { p_.str(v); }
    // An Optional* wrapper: {"value": X}, "value" always written.
    template <typename W>
    void wrap(const char* k, bool has, const W& w) {
        if (!has) return;
        p_.key(k).open();
        p_.key("value");
        val(w.value());
        p_.close();
    }

    // {string: string}, entries sorted by key (protobuf's Map iterates in no defined order).
    void map(const char* k, const google::protobuf::Map<std::string, std::string>& m) {
        if (m.empty()) return;
        p_.key(k);
        sorted_.clear();
        for (const auto& kv : m) sorted_.push_back(&kv);
        std::sort(sorted_.begin(), sorted_.end(), [](const Entry* a, const Entry* b) { return a->first < b->first; });
        out_ += '{';
        for (size_t i = 0; i < sorted_.size(); ++i) {
            if (i) out_ += ',';
            p_.str(sorted_[i]->first);
            out_ += ':';
            p_.str(sorted_[i]->second);
        }
        out_ += '}';
    }

    // namespaces_json: [{path, type}].
    void namespaces(nriqos::JsonPrinter& p, const google::protobuf::RepeatedPtrField<pb::LinuxNamespace>& nss) {
        out_ += '[';
        for (int i = 0; i < nss.size(); ++i) {
            if (i) out_ += ',';
            p.open();
            str_if("path", nss.Get(i).path());
            str_if("type", nss.Get(i).type());
            p.close();
        }
        out_ += ']';
    }

    // resources_to_json: blockio_class, cpu, devices, hugepage_limits, memory, pids, rdt_class, unified.
    void resources(nriqos::JsonPrinter& p, const pb::LinuxResources& r) {
        p.open();
        wrap("blockio_class", r.has_blockio_class(), r.blockio_class());
        if (r.has_cpu()) {
            const auto& c = r.cpu();
            p.key("cpu").open();
            str_if("cpus", c.cpus());
            str_if("mems", c.mems());
            wrap("period", c.has_period(), c.period());
            wrap("quota", c.has_quota(), c.quota());
            wrap("realtime_period", c.has_realtime_period(), c.realtime_period());
            wrap("realtime_runtime", c.has_realtime_runtime(), c.realtime_runtime());
            wrap("shares", c.has_shares(), c.shares());
            p.close();
        }
        if (r.devices_size() > 0) {
            p.key("devices");
            out_ += '[';
            for (int i = 0; i < r.devices_size(); ++i) {
                const auto& d = r.devices(i);
                if (i) out_ += ',';
                p.open();
                str_if("access", d.access());
                p.key("allow").boolean(d.allow());
                wrap("major", d.has_major(), d.major());
                wrap("minor", d.has_minor(), d.minor());
                str_if("type", d.type());
                p.close();
            }
            out_ += ']';
        }
        if (r.hugepage_limits_size() > 0) {
            p.key("hugepage_limits");
            out_ += '[';
            for (int i = 0; i < r.hugepage_limits_size(); ++i) {
                const auto& h = r.hugepage_limits(i);
                if (i) out_ += ',';
                p.open();
                p.key("limit");
                val(h.limit());
                p.key("page_size").str(h.page_size());
                p.close();
            }
            out_ += ']';
        }
        if (r.has_memory()) {
            const auto& m = r.memory();
            p.key("memory").open();
            wrap("disable_oom_killer", m.has_disable_oom_killer(), m.disable_oom_killer());
            wrap("kernel", m.has_kernel(), m.kernel());
            wrap("kernel_tcp", m.has_kernel_tcp(), m.kernel_tcp());
            wrap("limit", m.has_limit(), m.limit());
            wrap("reservation", m.has_reservation(), m.reservation());
            wrap("swap", m.has_swap(), m.swap());
            wrap("swappiness", m.has_swappiness(), m.swappiness());
            wrap("use_hierarchy", m.has_use_hierarchy(), m.use_hierarchy());
            p.close();
        }
        if (r.has_pids()) {
            p.key("pids").open();
            p.key("limit");
            val(r.pids().limit());
            p.close();
        }
        wrap("rdt_class", r.has_rdt_class(), r.rdt_class());
        map("unified", r.unified());
        p.close();
    }

    // pod_to_json: annotations, id, ips, labels, linux, name, namespace, pid, runtime_handler, uid.
    void sandbox(nriqos::JsonPrinter& p, const pb::PodSandbox& s) {
        p.open();
        map("annotations", s.annotations());
        str_if("id", s.id());
        if (s.ips_size() > 0) {
            p.key("ips");
            out_ += '[';
            for (int i = 0; i < s.ips_size(); ++i) {
                if (i) out_ += ',';
                p.str(s.ips(i));
            }
            out_ += ']';
        }
        map("labels", s.labels());
        if (s.has_linux()) {
            // cgroup_parent, cgroups_path, namespaces, pod_overhead, pod_resources, resources
            const auto& l = s.linux();
            p.key("linux").open();
            str_if("cgroup_parent", l.cgroup_parent());
            str_if("cgroups_path", l.cgroups_path());
            if (l.namespaces_size() > 0) namespaces(p.key("namespaces"), l.namespaces());
            if (l.has_pod_overhead()) resources(p.key("pod_overhead"), l.pod_overhead());
            if (l.has_pod_resources()) resources(p.key("pod_resources"), l.pod_resources());
            if (l.has_resources()) resources(p.key("resources"), l.resources());
            p.close();
        }
        str_if("name", s.name());
        str_if("namespace", s.namespace_());
        if (s.pid() != 0) {
            p.key("pid");
            val(s.pid());
        }
        str_if("runtime_handler", s.runtime_handler());
        str_if("uid", s.uid());
        p.close();
    }

    // container_to_json: annotations, id, labels, linux, name, pid, pod_sandbox_id, state.
    void container(nriqos::JsonPrinter& p, const pb::Container& c) {
        p.open();
        map("annotations", c.annotations());
        str_if("id", c.id());
        map("labels", c.labels());
        if (c.has_linux()) {
            // cgroups_path, namespaces, oom_score_adj, resources
            const auto& l = c.linux();
            p.key("linux").open();
            str_if("cgroups_path", l.cgroups_path());
            if (l.namespaces_size() > 0) namespaces(p.key("namespaces"), l.namespaces());
            wrap("oom_score_adj", l.has_oom_score_adj(), l.oom_score_adj());
            if (l.has_resources()) resources(p.key("resources"), l.resources());
            p.close();
        }
        str_if("name", c.name());
        if (c.pid() != 0) {
            p.key("pid");
            val(c.pid());
        }
        str_if("pod_sandbox_id", c.pod_sandbox_id());
        if (c.state() != 0) {
            p.key("state");
            num(int64_t(c.state()));
        }
        p.close();
    }

    using Entry = google::protobuf::Map<std::string, std::string>::value_type;
    nriqos::JsonPrinter p_;
    std::string& out_;
    std::vector<const Entry*> sorted_;
};

}  // namespace

void print_event(std::string& out, const std::string& event, const std::string& runtime_name, const std::string& runtime_version,
                 const pb::PodSandbox& pod, const pb::Container* ctr, const pb::LinuxResources* linux_resources, bool unadjusted) {
    EventPrinter(out).event(event, runtime_name, runtime_version, pod, ctr, linux_resources, unadjusted);
}

// ------------------------------------------------------------------ public: reading

namespace {

// SAX handler of parse_answer: forwards every event to nlohmann's own DOM builder except those
// of a top-level member the relay does not read, which it skips (nested containers included).
class AnswerSax {
public:
    explicit AnswerSax(json& out) : dom_(out, false) {}
    bool errored() const { return dom_.is_errored(); }

    bool null() { return skip_value() || dom_.null(); }
    bool boolean(bool v) { return skip_value() || dom_.boolean(v); }
    bool number_integer(json::number_integer_t v) { return skip_value() || dom_.number_integer(v); }
    bool number_unsigned(json::number_unsigned_t v) { return skip_value() || dom_.number_unsigned(v); }
    bool number_float(json::number_float_t v, const json::string_t& s) { return skip_value() || dom_.number_float(v, s); }
    bool string(json::string_t& v) { return skip_value() || dom_.string(v); }
    bool binary(json::binary_t& v) { return skip_value() || dom_.binary(v); }
    bool start_object(std::size_t n) {
        if (depth_++ == 0) top_object_ = true;
        return skip_open() || dom_.start_object(n);
    }
    bool start_array(std::size_t n) {
        ++depth_;
        return skip_open() || dom_.start_array(n);
    }
    bool end_object() { return skip_close() || dom_.end_object(); }
    bool end_array() { return skip_close() || dom_.end_array(); }
    bool key(json::string_t& k) {
        if (skip_from_) return true;
        if (depth_ == 1 && top_object_ && !wanted(k)) {
            skip_next_ = true;
            return true;
        }
        return dom_.key(k);
    }
    template <class Exception>
    bool parse_error(std::size_t pos, const std::string& tok, const Exception& ex) {
        return dom_.parse_error(pos, tok, ex);
    }

private:
    static bool wanted(const std::string& k) {
        return k == "adjustment" || k == "update" || k == "error" || k == "on_child_failure" || k == "deadline";
    }
    // A scalar: the value of a skipped member, or inside one.
    bool skip_value() {
        if (skip_next_) {
            skip_next_ = false;
            return true;
        }
        return skip_from_ != 0;
    }
    // After ++depth_: a container that is a skipped member's value, or inside one.
    bool skip_open() {
        if (skip_next_) {
            skip_next_ = false;
            skip_from_ = depth_;
            return true;
        }
        return skip_from_ != 0;
    }
    bool skip_close() {
        bool skipped = skip_from_ != 0;
        if (skip_from_ == depth_) skip_from_ = 0;
        --depth_;
        return skipped;
    }

    nlohmann::detail::json_sax_dom_parser<json> dom_;
    int depth_ = 0;  // containers open
    int skip_from_ = 0;  // > 0: depth of the skipped member's container being read
    bool skip_next_ = false;  // the next value is a skipped member's
    bool top_object_ = false;
};

}  // namespace

nlohmann::json parse_answer(const std::string& text) {
    json out;
    AnswerSax sax(out);
    bool ok = json::sax_parse(text, &sax, json::input_format_t::json, true);
    if (!ok || sax.errored()) out = json(json::value_t::discarded);
    return out;
}

bool resources_from_json(const nlohmann::json& j, pb::LinuxResources& out, std::string& err, const std::string& path) {
    out.Clear();
    if (j.is_null()) return true;
    try {
        read_resources(j, path, &out);
        return true;
    } catch (const std::exception& e) {  // MapError, or nlohmann type errors as a backstop
        err = e.what();
        return false;
    }
}

namespace {

// An NRI enum field: its NRI name ("SCHED_IDLE", as protojson and nri-qos's plan write it) or
// its number, one of `allowed` (the values nri-qos's knobs produce: nriqos::knob_choices).
int read_enum(const json& v, const std::string& path, std::initializer_list<EnumName> allowed) {
    std::string names;
    for (const auto& a : allowed) names += std::string(names.empty() ? "" : ", ") + a.name;
    for (const auto& a : allowed)
        if ((v.is_string() && v.get_ref<const std::string&>() == a.name) || (v.is_number_integer() && v.get<int64_t>() == a.num)) return a.num;
    fail(path, "expected one of " + names + ", got " + describe(v));
}
int32_t read_int_in(const json& v, const std::string& path, int64_t lo, int64_t hi) {
    int64_t n = to_int64(v, path);
    if (n < lo || n > hi) fail(path, "out of range " + std::to_string(lo) + ".." + std::to_string(hi));
    return static_cast<int32_t>(n);
}

// linux.io_priority {class, priority}: ioprio_set(2) classes RT, BE, IDLE, levels 0..7.
void read_io_priority(const json& j, const std::string& path, pb::LinuxIOPriority* o) {
    expect_object(j, path, {"class", "priority"});
    if (const json* c = field(j, "class")) o->set_class_(static_cast<pb::IOPrioClass>(read_enum(*c, join(path, "class"), kIoClasses)));
    else fail(join(path, "class"), "missing (the runtime ignores an io_priority without a class)");
    if (const json* p = field(j, "priority")) o->set_priority(read_int_in(*p, join(path, "priority"), 0, 7));
}

// linux.scheduler {policy, nice, priority}: the non-realtime policies of sched(7); priority 0
// (their only static priority), nice -20..19.
void read_scheduler(const json& j, const std::string& path, pb::LinuxScheduler* o) {
    expect_object(j, path, {"policy", "nice", "priority"});
    if (const json* c = field(j, "policy")) o->set_policy(static_cast<pb::LinuxSchedulerPolicy>(read_enum(*c, join(path, "policy"), kSchedPolicies)));
    else fail(join(path, "policy"), "missing (the runtime drops a scheduler without a policy)");
    if (const json* n = field(j, "nice")) o->set_nice(read_int_in(*n, join(path, "nice"), -20, 19));
    if (const json* p = field(j, "priority")) o->set_priority(read_int_in(*p, join(path, "priority"), 0, 0));
}

// linux.memory_policy {mode, nodes}: set_mempolicy(2) modes, nodes a cpuset(7)-style list.
void read_memory_policy(const json& j, const std::string& path, pb::LinuxMemoryPolicy* o) {
    expect_object(j, path, {"mode", "nodes"});
    if (const json* c = field(j, "mode")) o->set_mode(static_cast<pb::MpolMode>(read_enum(*c, join(path, "mode"), kMpolModes)));
    if (const json* n = field(j, "nodes")) {
        const std::string& t = to_string(*n, join(path, "nodes"));
        if (!t.empty() && !nriqos::valid_cpuset(t)) fail(join(path, "nodes"), "expected a node list like \"0-1,3\", got " + describe(*n));
        o->set_nodes(t);
    }
}

}  // namespace

bool adjustment_from_json(const nlohmann::json& j, pb::ContainerAdjustment& out, std::string& err, const std::string& path) {
    out.Clear();
    if (j.is_null()) return true;
    try {
        expect_object(j, path, {"annotations", "linux"});
        if (const json* v = field(j, "annotations")) { read_string_map(*v, join(path, "annotations"), out.mutable_annotations()); }
        if (const json* l = field(j, "linux")) {
            std::string lp = join(path, "linux");
            expect_object(*l, lp, {"resources", "oom_score_adj", "io_priority", "scheduler", "memory_policy"});
            auto* lin = out.mutable_linux();
            if (const json* r = field(*l, "resources")) { read_resources(*r, join(lp, "resources"), lin->mutable_resources()); }
            if (const json* o = field(*l, "oom_score_adj")) {
                std::string op = join(lp, "oom_score_adj");
                const json* val = wrapper_value(*o, op);
                int64_t v = val ? to_int64(*val, join(op, "value")) : 0;
                // Kernel range of /proc/<pid>/oom_score_adj (proc(5)).
                if (v < -1000 || v > 1000) fail(join(op, "value"), "out of range -1000..1000");
                lin->mutable_oom_score_adj()->set_value(v);
            }
            if (const json* o = field(*l, "io_priority")) read_io_priority(*o, join(lp, "io_priority"), lin->mutable_io_priority());
            if (const json* o = field(*l, "scheduler")) read_scheduler(*o, join(lp, "scheduler"), lin->mutable_scheduler());
            if (const json* o = field(*l, "memory_policy")) read_memory_policy(*o, join(lp, "memory_policy"), lin->mutable_memory_policy());
        }
        return true;
    } catch (const std::exception& e) {
        err = e.what();
        return false;
    }
}

}  // namespace nriqos::nri
