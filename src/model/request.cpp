// Stage 1 — request. The request document is read in one pass with nlohmann's SAX interface
// (json::sax_parse): nlohmann tokenises and validates the JSON (syntax, UTF-8, numbers), and the
// handlers below put the values nri-qos reads straight into staging fields — no DOM of the
// request is built. Subtrees nri-qos does not read (spec.namespaces, devices, results, ...) are
// only checked against the limits.
//
// The checks run in two phases, as they did when the request was a DOM:
//  1. while reading: size, NUL bytes, syntax, UTF-8, nesting depth, keys per object, duplicate
//     keys (json_read.hpp) — the first of these in document order is the error;
//  2. after the whole document was read: the fields, in a fixed order (version, state, id, ...),
//     from the staged values; the first failing field is the error, named by its JSON pointer.
// So a malformed document is always reported as malformed, and a document with several bad
// fields always reports the same one, whatever the key order.
#include "model/request.hpp"

#include <cstring>
#include <memory>
#include <vector>

#include "model/json_read.hpp"

using nlohmann::json;

namespace nriqos {

using json_read::DocLimits;
using json_read::DomBuilder;
using json_read::fail_syntax;
using json_read::precheck;
using json_read::ptr_key;
using json_read::sax_read;

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
        case Event::Synchronize: return "Synchronize";
        case Event::SynchronizeLate: return "SynchronizeLate";
        case Event::Other: break;
    }
    return "other";
}

namespace {

// ---- staging: what phase 1 read, for phase 2 ----------------------------------------------

/// A JSON value's kind, named in messages as the DOM code named it.
enum class Kind : uint8_t { Absent, Null, Object, Array, String, Boolean, Float, Integer, Unsigned };

const char* kind_name(Kind k) {
    switch (k) {
        case Kind::Null: return "null";
        case Kind::Object: return "object";
        case Kind::Array: return "array";
        case Kind::String: return "string";
        case Kind::Boolean: return "boolean";
        case Kind::Float: return "non-integer number";
        case Kind::Integer:
        case Kind::Unsigned: return "integer";
        case Kind::Absent: break;
    }
    return "value";
}

/// One scalar field as read (objects and arrays in its place are only noted).
struct Val {
    Kind kind = Kind::Absent;
    std::string str;  // Kind::String
    int64_t i = 0;  // Kind::Integer
    uint64_t u = 0;  // Kind::Unsigned
    bool missing() const { return kind == Kind::Absent || kind == Kind::Null; }
};

/// An integer that NRI Go JSON may wrap as {"value": N}.
struct Wrapped {
    Val outer;  // the member itself (Kind::Object when wrapped)
    bool inner_present = false;
    Val inner;  // its "value"
};

/// labels / annotations: entries go straight into `out`; the error of the first bad entry in
/// key order is kept (the order in which the DOM code met them).
struct StrMap {
    Kind kind = Kind::Absent;
    std::map<std::string, std::string> out;
    bool bad = false;
    std::string bad_key, bad_what;
};

struct Res {  // OCI LinuxResources (v0.1 names) or NRI LinuxResources
    Kind kind = Kind::Absent, cpu = Kind::Absent, mem = Kind::Absent, pids = Kind::Absent;
    Wrapped shares, quota, period, limit, swap, reservation;
    Val cpus, mems, pids_limit;
};

struct V01Stage {
    Val version, state, id, sandbox_id, pid;
    Kind conf = Kind::Absent, spec = Kind::Absent, namespaces = Kind::Absent, results = Kind::Absent;
    StrMap labels, annotations;
    Val cgroups_path;
    Res res;
    json conf_dom;
};

struct EventStage {
    Val event, rt_name, rt_version, unadjusted;
    Kind runtime = Kind::Absent, pod = Kind::Absent, pod_linux = Kind::Absent, ctr = Kind::Absent, ctr_linux = Kind::Absent;
    Val pod_id, pod_name, pod_ns, pod_uid, pod_pid, pod_cgroups_path;
    StrMap pod_labels, pod_annotations, ctr_annotations;
    Res pod_res, ctr_res, linux_res;
    Val ctr_id, ctr_psid, ctr_name, ctr_pid, ctr_cgroups_path;
};

// ---- phase 1: the SAX handler --------------------------------------------------------------

/// Where an object's members go.
enum class Ctx : uint8_t {
    Skip,  // not read: only the limits apply
    V01Root,
    V01Spec,
    Conf,  // v0.1 request
    EvRoot,
    Runtime,
    Pod,
    PodLinux,
    Ctr,
    CtrLinux,  // nri-eval event
    Res,
    Cpu,
    Mem,
    Pids,
    Wrapper,
    Map,
};

/// The member a key selects: nothing (skip), a scalar, a map, a wrapped integer or an object.
struct Slot {
    enum Type : uint8_t { None, Scalar, Map, Wrap, Object } type = None;
    void* target = nullptr;  // Val*, StrMap*, Wrapped*, or the object's staging struct
    Kind* kind = nullptr;  // Object: where the member's kind is noted
    Ctx ctx = Ctx::Skip;  // Object: the context of its members
};

class RequestReader {
public:
    RequestReader(V01Stage* v, EventStage* e) : v01_(v), ev_(e), limits_(limits::kMaxDepth) {}

    Kind root = Kind::Absent;

    bool null() {
        if (in_conf()) conf_->value(nullptr);
        else scalar(Kind::Null);
        return true;
    }
    bool boolean(bool b) {
        if (in_conf()) conf_->value(b);
        else if (Val* v = scalar(Kind::Boolean)) v->i = b;
        return true;
    }
    bool number_integer(json::number_integer_t x) {
        if (in_conf()) conf_->value(x);
        else if (Val* v = scalar(Kind::Integer)) v->i = x;
        return true;
    }
    bool number_unsigned(json::number_unsigned_t x) {
        if (in_conf()) conf_->value(x);
        else if (Val* v = scalar(Kind::Unsigned)) v->u = x;
        return true;
    }
    bool number_float(json::number_float_t x, const std::string&) {
        if (in_conf()) conf_->value(x);
        else scalar(Kind::Float);
        return true;
    }
    bool string(std::string& s) {
        if (in_conf()) conf_->value(s);
        else if (!frames_.empty() && frames_.back().ctx == Ctx::Map) map_string(s);
        else if (Val* v = scalar(Kind::String)) v->str.assign(s);  // the lexer keeps its buffer
        return true;
    }
    bool binary(json::binary_t&) { return false; }  // not produced by the JSON reader
    bool start_object(std::size_t) { return open(true), true; }
    bool start_array(std::size_t) { return open(false), true; }
    bool end_object() { return close(), true; }
    bool end_array() { return close(), true; }
    bool key(std::string& k) {
        limits_.key(k);
        Frame& f = frames_.back();
        if (f.ctx == Ctx::Conf) {
            conf_->key(k);
        } else if (f.ctx == Ctx::Map) {
            map_key_ = k;
        } else {
            pending_ = lookup(f, k);
        }
        return true;
    }
    bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& e) { fail_syntax(e); }

private:
    struct Frame {
        Ctx ctx;
        bool object;
        void* target;  // Res*, Wrapped*, StrMap* of this object
    };

    /// A scalar arrived: store it where the pending slot says. Returns the Val to fill, if any.
    Val* scalar(Kind k) {
        if (frames_.empty()) {
            root = k;
            return nullptr;
        }
        Frame& f = frames_.back();
        if (f.ctx == Ctx::Map) {
            map_other(k);
            return nullptr;
        }
        if (!f.object) return nullptr;  // array element
        Slot s = pending_;
        pending_ = Slot{};
        switch (s.type) {
            case Slot::Scalar: {
                Val* v = static_cast<Val*>(s.target);
                v->kind = k;
                return v;
            }
            case Slot::Wrap: {
                Val* v = &static_cast<Wrapped*>(s.target)->outer;
                v->kind = k;
                return v;
            }
            case Slot::Map: static_cast<StrMap*>(s.target)->kind = k; break;
            case Slot::Object: *s.kind = k; break;
            case Slot::None: break;
        }
        return nullptr;
    }

    void open(bool object) {
        limits_.open(object);
        Kind k = object ? Kind::Object : Kind::Array;
        if (frames_.empty()) {
            root = k;
            frames_.push_back({object ? (ev_ ? Ctx::EvRoot : Ctx::V01Root) : Ctx::Skip, object, nullptr});
            return;
        }
        Frame& f = frames_.back();
        if (f.ctx == Ctx::Conf) {
            conf_->open(object);
            frames_.push_back({Ctx::Conf, object, nullptr});
            return;
        }
        if (f.ctx == Ctx::Map) {
            map_other(k);
            frames_.push_back({Ctx::Skip, object, nullptr});
            return;
        }
        Slot s = f.object ? pending_ : Slot{};
        pending_ = Slot{};
        Frame child{Ctx::Skip, object, nullptr};
        switch (s.type) {
            case Slot::Scalar: static_cast<Val*>(s.target)->kind = k; break;
            case Slot::Wrap: {
                auto* w = static_cast<Wrapped*>(s.target);
                w->outer.kind = k;
                if (object && ev_) child = {Ctx::Wrapper, true, w};  // NRI Go JSON {"value": N}
                break;
            }
            case Slot::Map: {
                auto* m = static_cast<StrMap*>(s.target);
                m->kind = k;
                if (object) child = {Ctx::Map, true, m};
                break;
            }
            case Slot::Object:
                *s.kind = k;
                if (object) {
                    child = {s.ctx, true, s.target};
                    if (s.ctx == Ctx::Conf) {
                        conf_ = std::make_unique<DomBuilder>(v01_->conf_dom);
                        conf_->open(true);
                    }
                }
                break;
            case Slot::None: break;
        }
        frames_.push_back(child);
    }

    void close() {
        limits_.close();
        if (frames_.back().ctx == Ctx::Conf) conf_->close();
        frames_.pop_back();
    }

    bool in_conf() const { return !frames_.empty() && frames_.back().ctx == Ctx::Conf; }

    // ---- labels / annotations ----
    void map_string(const std::string& s) {
        auto* m = static_cast<StrMap*>(frames_.back().target);
        const std::string& k = map_key_;
        if (const char* what = key_problem(k)) return map_bad(m, what);
        if (s.size() > limits::kMaxValueBytes) return map_bad(m, ("longer than " + std::to_string(limits::kMaxValueBytes) + " bytes").c_str());
        if (s.find('\0') != std::string::npos) return map_bad(m, "contains a NUL byte");
        m->out.emplace(k, s);
    }
    void map_other(Kind k) {
        auto* m = static_cast<StrMap*>(frames_.back().target);
        if (const char* what = key_problem(map_key_)) return map_bad(m, what);
        map_bad(m, (std::string("expected string, got ") + kind_name(k)).c_str());
    }
    const char* key_problem(const std::string& k) {
        if (k.size() > limits::kMaxKeyBytes) {
            key_msg_ = "longer than " + std::to_string(limits::kMaxKeyBytes) + " bytes";
            return key_msg_.c_str();
        }
        for (unsigned char c : k)
            if (c < 0x20 || c == 0x7f) return "contains a control character";
        return nullptr;
    }
    [[gnu::cold]] void map_bad(StrMap* m, const char* what) {
        if (m->bad && !(map_key_ < m->bad_key)) return;
        m->bad = true;
        m->bad_key = map_key_;
        m->bad_what = what;
    }

    // ---- which member a key selects ----
    static Slot val(Val& v) { return {Slot::Scalar, &v, nullptr, Ctx::Skip}; }
    static Slot map(StrMap& m) { return {Slot::Map, &m, nullptr, Ctx::Skip}; }
    static Slot wrap(Wrapped& w) { return {Slot::Wrap, &w, nullptr, Ctx::Skip}; }
    static Slot obj(Kind& k, Ctx c, void* t = nullptr) { return {Slot::Object, t, &k, c}; }
    static Slot res(Res& r) { return {Slot::Object, &r, &r.kind, Ctx::Res}; }

    /// Key equals a literal (sizes first: most keys differ in length).
    template <size_t N>
    static bool is(const std::string& k, const char (&lit)[N]) {
        return k.size() == N - 1 && std::memcmp(k.data(), lit, N - 1) == 0;
    }

    Slot lookup(const Frame& f, const std::string& k) {
        switch (f.ctx) {
            case Ctx::V01Root: {
                V01Stage& s = *v01_;
                if (is(k, "version")) return val(s.version);
                if (is(k, "state")) return val(s.state);
                if (is(k, "id")) return val(s.id);
                if (is(k, "sandboxID")) return val(s.sandbox_id);
                if (is(k, "pid")) return val(s.pid);
                if (is(k, "labels")) return map(s.labels);
                if (is(k, "spec")) return obj(s.spec, Ctx::V01Spec);
                if (is(k, "conf")) return obj(s.conf, Ctx::Conf);
                if (is(k, "results")) return obj(s.results, Ctx::Skip);
                break;
            }
            case Ctx::V01Spec: {
                V01Stage& s = *v01_;
                if (is(k, "cgroupsPath")) return val(s.cgroups_path);
                if (is(k, "annotations")) return map(s.annotations);
                if (is(k, "resources")) return res(s.res);
                if (is(k, "namespaces")) return obj(s.namespaces, Ctx::Skip);
                break;
            }
            case Ctx::EvRoot:
                if (is(k, "event")) return val(ev_->event);
                if (is(k, "pod")) return obj(ev_->pod, Ctx::Pod);
                if (is(k, "container")) return obj(ev_->ctr, Ctx::Ctr);
                if (is(k, "linux_resources")) return res(ev_->linux_res);
                if (is(k, "runtime")) return obj(ev_->runtime, Ctx::Runtime);
                if (is(k, "unadjusted")) return val(ev_->unadjusted);  // the relay's note (Request::unadjusted)
                break;
            case Ctx::Runtime:
                if (is(k, "name")) return val(ev_->rt_name);
                if (is(k, "version")) return val(ev_->rt_version);
                break;
            case Ctx::Pod: {
                EventStage& s = *ev_;
                if (is(k, "id")) return val(s.pod_id);
                if (is(k, "name")) return val(s.pod_name);
                if (is(k, "namespace")) return val(s.pod_ns);
                if (is(k, "uid")) return val(s.pod_uid);
                if (is(k, "labels")) return map(s.pod_labels);
                if (is(k, "annotations")) return map(s.pod_annotations);
                if (is(k, "linux")) return obj(s.pod_linux, Ctx::PodLinux);
                if (is(k, "pid")) return val(s.pod_pid);
                break;
            }
            case Ctx::PodLinux:
                if (is(k, "cgroups_path")) return val(ev_->pod_cgroups_path);
                if (is(k, "resources")) return res(ev_->pod_res);
                break;
            case Ctx::Ctr: {
                EventStage& s = *ev_;
                if (is(k, "id")) return val(s.ctr_id);
                if (is(k, "pod_sandbox_id")) return val(s.ctr_psid);
                if (is(k, "name")) return val(s.ctr_name);
                if (is(k, "annotations")) return map(s.ctr_annotations);
                if (is(k, "pid")) return val(s.ctr_pid);
                if (is(k, "linux")) return obj(s.ctr_linux, Ctx::CtrLinux);
                break;
            }
            case Ctx::CtrLinux:
                if (is(k, "cgroups_path")) return val(ev_->ctr_cgroups_path);
                if (is(k, "resources")) return res(ev_->ctr_res);
                break;
            case Ctx::Res: {
                Res& r = *static_cast<Res*>(f.target);
                if (is(k, "cpu")) return obj(r.cpu, Ctx::Cpu, &r);
                if (is(k, "memory")) return obj(r.mem, Ctx::Mem, &r);
                if (is(k, "pids")) return obj(r.pids, Ctx::Pids, &r);
                break;
            }
            case Ctx::Cpu: {
                Res& r = *static_cast<Res*>(f.target);
                if (is(k, "shares")) return wrap(r.shares);
                if (is(k, "quota")) return wrap(r.quota);
                if (is(k, "period")) return wrap(r.period);
                if (is(k, "cpus")) return val(r.cpus);
                if (is(k, "mems")) return val(r.mems);
                break;
            }
            case Ctx::Mem: {
                Res& r = *static_cast<Res*>(f.target);
                if (is(k, "limit")) return wrap(r.limit);
                if (is(k, "swap")) return wrap(r.swap);
                if (is(k, "reservation")) return wrap(r.reservation);
                break;
            }
            case Ctx::Pids:
                if (is(k, "limit")) return val(static_cast<Res*>(f.target)->pids_limit);
                break;
            case Ctx::Wrapper:
                if (is(k, "value")) {
                    auto* w = static_cast<Wrapped*>(f.target);
                    w->inner_present = true;
                    return val(w->inner);
                }
                break;
            case Ctx::Skip:
            case Ctx::Conf:
            case Ctx::Map: break;
        }
        return Slot{};
    }

    V01Stage* v01_;
    EventStage* ev_;
    DocLimits limits_;
    std::vector<Frame> frames_;
    Slot pending_;
    std::string map_key_, key_msg_;
    std::unique_ptr<DomBuilder> conf_;
};

// ---- phase 2: the fields, in a fixed order --------------------------------------------------

/// A JSON pointer for messages, in up to three literal pieces, joined only for a message.
struct Ptr {
    const char* a;
    const char* b = "";
    const char* c = "";
    std::string str() const {
        std::string s = std::string(a) + b + c;
        return s.empty() ? "/" : s;
    }
};

[[noreturn, gnu::cold]] void fail(const Ptr& where, const std::string& what) { throw InputError(where.str() + ": " + what); }

void expect(Kind k, Kind want, const Ptr& where, const char* want_name) {
    if (k != want) fail(where, std::string("expected ") + want_name + ", got " + kind_name(k));
}

std::string get_string(Val& v, const Ptr& where, bool required = false) {
    if (v.missing()) {
        if (required) fail(where, "required field missing");
        return {};
    }
    expect(v.kind, Kind::String, where, "string");
    return std::move(v.str);
}

/// Integer in [lo, hi]; accepts a decimal string too (proto3 JSON prints 64-bit ints as strings).
std::optional<int64_t> get_int(const Val& v, const Ptr& where, int64_t lo, int64_t hi) {
    if (v.missing()) return std::nullopt;
    int64_t x = 0;
    if (v.kind == Kind::Unsigned) {
        if (v.u > static_cast<uint64_t>(INT64_MAX)) fail(where, "integer out of range");
        x = static_cast<int64_t>(v.u);
    } else if (v.kind == Kind::Integer) {
        x = v.i;
    } else if (v.kind == Kind::String) {
        const std::string& s = v.str;
        size_t i = (!s.empty() && s[0] == '-') ? 1 : 0;
        if (s.size() == i || s.size() > 20) fail(where, "expected an integer");
        for (size_t k = i; k < s.size(); ++k)
            if (s[k] < '0' || s[k] > '9') fail(where, "expected an integer");
        try {
            x = std::stoll(s);
        } catch (...) { fail(where, "integer out of range"); }
    } else {
        fail(where, std::string("expected integer, got ") + kind_name(v.kind));
    }
    if (x < lo || x > hi) fail(where, "integer " + std::to_string(x) + " out of range [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
    return x;
}

/// NRI Go JSON Optional wrapper {"value": N}; a bare number is accepted too.
std::optional<int64_t> get_opt_wrapped(const Wrapped& w, const Ptr& where, bool nri, int64_t lo, int64_t hi) {
    if (w.outer.missing()) return std::nullopt;
    if (nri && w.outer.kind == Kind::Object) {
        if (!w.inner_present) return int64_t{0};  // Go omits zero values: {"value":0} may print as {}
        return get_int(w.inner, {where.a, where.b, {"/value"}}, lo, hi);
    }
    return get_int(w.outer, where, lo, hi);
}

void check_text(const std::string& s, const Ptr& where, size_t max, bool allow_ctl) {
    if (s.size() > max) fail(where, "longer than " + std::to_string(max) + " bytes");
    if (!allow_ctl)
        for (unsigned char c : s)
            if (c < 0x20 || c == 0x7f) fail(where, "contains a control character");
}

std::map<std::string, std::string> take_string_map(StrMap& m, const char* where) {
    if (m.kind == Kind::Absent || m.kind == Kind::Null) return {};
    expect(m.kind, Kind::Object, {where}, "object");
    if (m.bad) {
        std::string key = "/" + ptr_key(m.bad_key);
        fail({where, key.c_str()}, m.bad_what);
    }
    return std::move(m.out);
}

/// Container/sandbox ids: containerd uses 64 hex chars; accept [A-Za-z0-9_.-], no "." / "..".
void check_id(const std::string& id, const Ptr& where) {
    if (id.empty()) fail(where, "empty id");
    if (id.size() > limits::kMaxIdBytes) fail(where, "id longer than " + std::to_string(limits::kMaxIdBytes) + " bytes");
    if (id == "." || id == "..") fail(where, "invalid id");
    for (unsigned char c : id)
        if (!(isalnum(c) || c == '-' || c == '_' || c == '.')) fail(where, "id may contain only [A-Za-z0-9_.-]");
}

std::optional<std::string> get_cgroups_path(Val& v, const Ptr& where) {
    if (v.missing()) return std::nullopt;
    expect(v.kind, Kind::String, where, "string");
    if (v.str.empty()) return std::nullopt;
    check_text(v.str, where, limits::kMaxCgroupsPathBytes, false);
    return std::move(v.str);
}

bool present(Kind k) { return k != Kind::Absent && k != Kind::Null; }

/// OCI LinuxResources (v0.1 camelCase OCI names) or NRI Go JSON (`nri`); `w` is its pointer.
Resources take_resources(Res& s, const char* w, bool nri) {
    Resources r;
    if (!present(s.kind)) return r;
    expect(s.kind, Kind::Object, {w}, "object");
    constexpr int64_t kMax = INT64_MAX;
    if (present(s.cpu)) {
        expect(s.cpu, Kind::Object, {w, {"/cpu"}}, "object");
        r.cpu_shares = get_opt_wrapped(s.shares, {w, "/cpu/shares"}, nri, 0, kMax);
        r.cpu_quota = get_opt_wrapped(s.quota, {w, "/cpu/quota"}, nri, -1, kMax);
        r.cpu_period = get_opt_wrapped(s.period, {w, "/cpu/period"}, nri, 0, kMax);
        std::string cpus = get_string(s.cpus, {w, {"/cpu/cpus"}}), mems = get_string(s.mems, {w, {"/cpu/mems"}});
        check_text(cpus, {w, {"/cpu/cpus"}}, 4096, false);
        check_text(mems, {w, {"/cpu/mems"}}, 4096, false);
        if (!cpus.empty()) r.cpu_cpus = std::move(cpus);
        if (!mems.empty()) r.cpu_mems = std::move(mems);
    }
    if (present(s.mem)) {
        expect(s.mem, Kind::Object, {w, {"/memory"}}, "object");
        r.mem_limit = get_opt_wrapped(s.limit, {w, "/memory/limit"}, nri, -1, kMax);
        r.mem_swap = get_opt_wrapped(s.swap, {w, "/memory/swap"}, nri, -1, kMax);
        r.mem_reservation = get_opt_wrapped(s.reservation, {w, "/memory/reservation"}, nri, -1, kMax);
    }
    if (present(s.pids)) {
        expect(s.pids, Kind::Object, {w, {"/pids"}}, "object");
        r.pids_limit = get_int(s.pids_limit, {w, {"/pids/limit"}}, -1, kMax);
    }
    return r;
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
    if (r.container_name.empty() && !r.is_sandbox) r.container_name = pick("io.kubernetes.cri.container-name", "io.kubernetes.container.name");
}

}  // namespace

Resources granted_resources(const Resources& current, const Resources& update) {
    Resources r = current;
    auto set = [](const std::optional<int64_t>& v) { return v && *v != 0; };
    if (set(update.cpu_shares)) r.cpu_shares = update.cpu_shares;
    if (set(update.cpu_quota)) r.cpu_quota = update.cpu_quota;
    if (set(update.cpu_period)) r.cpu_period = update.cpu_period;
    if (update.cpu_cpus && !update.cpu_cpus->empty()) r.cpu_cpus = update.cpu_cpus;
    if (update.cpu_mems && !update.cpu_mems->empty()) r.cpu_mems = update.cpu_mems;
    if (set(update.mem_limit)) {
        if (!set(update.mem_swap) && r.mem_swap) r.mem_swap = update.mem_limit;
        r.mem_limit = update.mem_limit;
    }
    if (set(update.mem_swap)) r.mem_swap = update.mem_swap;
    if (set(update.mem_reservation)) r.mem_reservation = update.mem_reservation;
    if (set(update.pids_limit)) r.pids_limit = update.pids_limit;
    return r;
}

Request parse_v01_request(std::string_view text) {
    precheck(text);
    V01Stage s;
    RequestReader rd(&s, nullptr);
    sax_read(text, rd);

    if (rd.root != Kind::Object) fail({""}, std::string("expected a JSON object (NRI v0.1 request), got ") + kind_name(rd.root));
    Request r;
    r.wire = Request::Wire::V01;
    r.version = get_string(s.version, {"/version"}, true);
    if (r.version != "0.1" && r.version.rfind("0.1.", 0) != 0)
        fail({"/version"}, "unsupported NRI version \"" + ptr_key(r.version) + "\" (nri-qos speaks 0.1)");
    std::string state = get_string(s.state, {"/state"}, true);
    if (state == "create") r.event = Event::Create;
    else if (state == "update") r.event = Event::Update;
    else if (state == "delete") r.event = Event::Delete;
    else if (state == "pause") r.event = Event::Pause;
    else if (state == "resume") r.event = Event::Resume;
    else fail({"/state"}, "unknown state \"" + ptr_key(state) + "\" (create|update|delete|pause|resume)");
    r.id = get_string(s.id, {"/id"}, true);
    check_id(r.id, {"/id"});
    r.sandbox_id = get_string(s.sandbox_id, {"/sandboxID"});
    if (r.sandbox_id.empty()) r.sandbox_id = r.id;
    check_id(r.sandbox_id, {"/sandboxID"});
    r.pid = get_int(s.pid, {"/pid"}, 0, 4194304);
    if (r.pid && *r.pid == 0) r.pid.reset();
    if (present(s.conf)) {
        expect(s.conf, Kind::Object, {"/conf"}, "object");
        r.conf = std::move(s.conf_dom);
    }
    r.labels = take_string_map(s.labels, "/labels");
    if (present(s.spec)) {
        expect(s.spec, Kind::Object, {"/spec"}, "object");
        r.cgroups_path = get_cgroups_path(s.cgroups_path, {"/spec/cgroupsPath"});
        r.annotations = take_string_map(s.annotations, "/spec/annotations");
        r.resources = take_resources(s.res, "/spec/resources", false);
        if (present(s.namespaces)) expect(s.namespaces, Kind::Object, {"/spec/namespaces"}, "object");
    }
    if (present(s.results)) expect(s.results, Kind::Array, {"/results"}, "array");
    auto ct = r.annotations.find("io.kubernetes.cri.container-type");
    r.is_sandbox = r.id == r.sandbox_id || (ct != r.annotations.end() && ct->second == "sandbox");
    fill_names(r);
    return r;
}

Request parse_nri_event(std::string_view text) {
    precheck(text);
    EventStage s;
    RequestReader rd(nullptr, &s);
    sax_read(text, rd);

    if (rd.root != Kind::Object) fail({""}, std::string("expected a JSON object (nri-eval event), got ") + kind_name(rd.root));
    Request r;
    r.wire = Request::Wire::NriEvent;
    r.version = "nri";
    static const std::pair<const char*, Event> kEvents[] = {
        {"RunPodSandbox", Event::RunPodSandbox},
        {"StopPodSandbox", Event::StopPodSandbox},
        {"RemovePodSandbox", Event::RemovePodSandbox},
        {"CreateContainer", Event::CreateContainer},
        {"StartContainer", Event::StartContainer},
        {"UpdateContainer", Event::UpdateContainer},
        {"StopContainer", Event::StopContainer},
        {"RemoveContainer", Event::RemoveContainer},
        {"PostUpdateContainer", Event::PostUpdateContainer},
        {"UpdatePodSandbox", Event::UpdatePodSandbox},
        {"Synchronize", Event::Synchronize},
        {"SynchronizeLate", Event::SynchronizeLate},
    };
    std::string ev = get_string(s.event, {"/event"}, true);
    bool known = false;
    for (const auto& [n, e] : kEvents)
        if (ev == n) {
            r.event = e;
            known = true;
        }
    if (!known) fail({"/event"}, "unknown event \"" + ptr_key(ev) + "\"");
    if (present(s.runtime)) {
        expect(s.runtime, Kind::Object, {"/runtime"}, "object");
        r.runtime_name = get_string(s.rt_name, {"/runtime/name"});
        r.runtime_version = get_string(s.rt_version, {"/runtime/version"});
        check_text(r.runtime_name, {"/runtime/name"}, 128, false);
        check_text(r.runtime_version, {"/runtime/version"}, 128, false);
    }
    if (!present(s.pod)) fail({"/pod"}, "required field missing");
    expect(s.pod, Kind::Object, {"/pod"}, "object");
    std::string pod_id = get_string(s.pod_id, {"/pod/id"}, true);
    check_id(pod_id, {"/pod/id"});
    r.pod_name = get_string(s.pod_name, {"/pod/name"});
    r.pod_namespace = get_string(s.pod_ns, {"/pod/namespace"});
    r.pod_uid = get_string(s.pod_uid, {"/pod/uid"});
    check_text(r.pod_name, {"/pod/name"}, 253, false);
    check_text(r.pod_namespace, {"/pod/namespace"}, 253, false);
    check_text(r.pod_uid, {"/pod/uid"}, 128, false);
    r.labels = take_string_map(s.pod_labels, "/pod/labels");
    r.annotations = take_string_map(s.pod_annotations, "/pod/annotations");
    r.sandbox_id = pod_id;
    if (present(s.pod_linux)) expect(s.pod_linux, Kind::Object, {"/pod/linux"}, "object");

    if (present(s.ctr)) {
        expect(s.ctr, Kind::Object, {"/container"}, "object");
        r.is_sandbox = false;
        r.id = get_string(s.ctr_id, {"/container/id"}, true);
        check_id(r.id, {"/container/id"});
        std::string psid = get_string(s.ctr_psid, {"/container/pod_sandbox_id"});
        if (!psid.empty() && psid != pod_id) fail({"/container/pod_sandbox_id"}, "does not match /pod/id");
        r.container_name = get_string(s.ctr_name, {"/container/name"});
        check_text(r.container_name, {"/container/name"}, 253, false);
        // Container annotations are the OCI ones (allow-listed pod annotations included);
        // they refine the pod's. Labels stay the pod's, as in v0.1.
        for (auto& [k, v] : take_string_map(s.ctr_annotations, "/container/annotations")) r.annotations[k] = std::move(v);
        r.pid = get_int(s.ctr_pid, {"/container/pid"}, 0, 4194304);
        if (present(s.ctr_linux)) {
            expect(s.ctr_linux, Kind::Object, {"/container/linux"}, "object");
            r.cgroups_path = get_cgroups_path(s.ctr_cgroups_path, {"/container/linux/cgroups_path"});
            r.resources = take_resources(s.ctr_res, "/container/linux/resources", true);
        }
        // UpdateContainer: the update's set fields over the container's current resources.
        if (present(s.linux_res.kind)) r.resources = granted_resources(r.resources, take_resources(s.linux_res, "/linux_resources", true));
    } else {
        r.is_sandbox = true;
        r.id = pod_id;
        r.pid = get_int(s.pod_pid, {"/pod/pid"}, 0, 4194304);
        if (present(s.pod_linux)) {
            r.cgroups_path = get_cgroups_path(s.pod_cgroups_path, {"/pod/linux/cgroups_path"});
            r.resources = take_resources(s.pod_res, "/pod/linux/resources", true);
        }
        // UpdatePodSandbox (pod resize): the update's set fields over the pod's current resources.
        if (present(s.linux_res.kind)) r.resources = granted_resources(r.resources, take_resources(s.linux_res, "/linux_resources", true));
    }
    if (r.pid && *r.pid == 0) r.pid.reset();
    // The relay's own note (never the runtime's): a StartContainer whose CreateContainer went by
    // without nri-qos (docs/native-nri.md "Child contract", "unadjusted").
    if (!s.unadjusted.missing()) {
        expect(s.unadjusted.kind, Kind::Boolean, {"/unadjusted"}, "boolean");
        if (s.unadjusted.i && (r.event != Event::StartContainer || r.is_sandbox)) fail({"/unadjusted"}, "only for a container's StartContainer");
        r.unadjusted = s.unadjusted.i != 0;
    }
    fill_names(r);
    return r;
}

}  // namespace nriqos
