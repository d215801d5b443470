#include "facts/fact_readers.hpp"

#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <unistd.h>

#include "os/cpuset.hpp"
#include "model/request.hpp"

using nlohmann::json;

namespace nriqos {

namespace {

__extension__ typedef unsigned __int128 u128;  // exact arithmetic on quantities (GCC/Clang)

bool all_digits(std::string_view s) {
    for (char c : s)
        if (c < '0' || c > '9') return false;
    return true;
}

std::string_view strip_zeros_left(std::string_view s) {
    while (!s.empty() && s.front() == '0') s.remove_prefix(1);
    return s;
}

/// Decimal digits (no sign) → value, refusing more than `limit`.
bool digits_to_u128(std::string_view d, u128 limit, u128& out) {
    u128 v = 0;
    for (char c : d) {
        v = v * 10 + static_cast<unsigned>(c - '0');
        if (v > limit) return false;
    }
    out = v;
    return true;
}

std::string clip(std::string_view s) {
    std::string o;
    for (char c : s.substr(0, 32)) o += (static_cast<unsigned char>(c) < 0x20 || c == '"' || c == '\\') ? '?' : c;
    return o + (s.size() > 32 ? "..." : "");
}

}  // namespace

std::optional<int64_t> parse_quantity(std::string_view s, std::string* why) { return parse_quantity_scaled(s, 0, why); }

std::optional<int64_t> parse_quantity_milli(std::string_view s, std::string* why) { return parse_quantity_scaled(s, 3, why); }

std::optional<int64_t> parse_quantity_scaled(std::string_view s, int scale10, std::string* why) {
    auto bad = [&](const std::string& m) -> std::optional<int64_t> {
        if (why) *why = "quantity \"" + clip(s) + "\": " + m;
        return std::nullopt;
    };
    if (s.empty()) return bad("empty");
    if (s.size() > kMaxQuantityBytes) return bad("longer than " + std::to_string(kMaxQuantityBytes) + " bytes");
    size_t i = 0;
    bool neg = false;
    if (s[0] == '+' || s[0] == '-') {
        neg = s[0] == '-';
        i = 1;
    }
    // number: digits [. digits] | . digits | digits .
    size_t int_start = i;
    while (i < s.size() && s[i] >= '0' && s[i] <= '9') ++i;
    std::string_view int_digits = s.substr(int_start, i - int_start);
    std::string_view frac_digits;
    if (i < s.size() && s[i] == '.') {
        ++i;
        size_t f = i;
        while (i < s.size() && s[i] >= '0' && s[i] <= '9') ++i;
        frac_digits = s.substr(f, i - f);
    }
    if (int_digits.empty() && frac_digits.empty()) return bad("no digits");
    std::string_view suffix = s.substr(i);
    // suffix → decimal exponent and binary shift (apimachinery quantity.go / suffix.go)
    int64_t exp10 = 0;
    unsigned shift2 = 0;
    if (suffix.empty()) {
    } else if (suffix == "m") exp10 = -3;
    else if (suffix == "k") exp10 = 3;
    else if (suffix == "M") exp10 = 6;
    else if (suffix == "G") exp10 = 9;
    else if (suffix == "T") exp10 = 12;
    else if (suffix == "P") exp10 = 15;
    else if (suffix == "E") exp10 = 18;
    else if (suffix == "Ki") shift2 = 10;
    else if (suffix == "Mi") shift2 = 20;
    else if (suffix == "Gi") shift2 = 30;
    else if (suffix == "Ti") shift2 = 40;
    else if (suffix == "Pi") shift2 = 50;
    else if (suffix == "Ei") shift2 = 60;
    else if (suffix[0] == 'e' || suffix[0] == 'E') {
        std::string_view e = suffix.substr(1);
        bool eneg = false;
        if (!e.empty() && (e[0] == '+' || e[0] == '-')) {
            eneg = e[0] == '-';
            e.remove_prefix(1);
        }
        if (e.empty() || !all_digits(e) || e.size() > 4) return bad("bad exponent");
        exp10 = std::stoll(std::string(e)) * (eneg ? -1 : 1);
    } else {
        return bad("unknown suffix \"" + clip(suffix) + "\" (Ki Mi Gi Ti Pi Ei, m k M G T P E, or e<N>)");
    }
    exp10 += scale10;
    // value = D × 10^(exp10 - |frac|) × 2^shift2, D = int_digits ‖ frac_digits
    std::string digits = std::string(int_digits) + std::string(frac_digits);
    int64_t point = exp10 - static_cast<int64_t>(frac_digits.size());  // decimal exponent of D
    // normalise: strip leading zeros; move trailing zeros into the exponent
    std::string_view d = strip_zeros_left(digits);
    while (!d.empty() && d.back() == '0') {
        d.remove_suffix(1);
        ++point;
    }
    const u128 limit = static_cast<u128>(kMaxQuantityValue);
    auto too_large = [&]() { return bad("larger than 2^62"); };
    u128 mag = 0;  // ceil(|value|)
    if (d.empty()) {
        mag = 0;
    } else if (point >= 0) {
        // integer: D × 10^point × 2^shift2
        if (static_cast<int64_t>(d.size()) + point > 19) return too_large();
        u128 v = 0;
        if (!digits_to_u128(d, limit, v)) return too_large();
        for (int64_t k = 0; k < point; ++k)
            if ((v *= 10) > limit) return too_large();
        if (shift2 && v > (limit >> shift2)) return too_large();
        mag = v << shift2;
    } else {
        // D has -point digits after the decimal point: split into integer and fraction parts
        size_t fl = static_cast<size_t>(-point);
        std::string_view ip = fl >= d.size() ? std::string_view() : d.substr(0, d.size() - fl);
        std::string_view fp = fl >= d.size() ? d : d.substr(d.size() - fl);
        size_t lead = fl > d.size() ? fl - d.size() : 0;  // zeros between the point and fp
        u128 iv = 0;
        if (ip.size() > 19 || !digits_to_u128(ip, limit, iv)) return too_large();
        if (shift2 && iv > (limit >> shift2)) return too_large();
        iv <<= shift2;
        // fp is non-empty and does not end in 0 (normalised): the fraction f is > 0.
        // Value() rounds up: |x| rounds up for x > 0 and down for x < 0 (ceil of a negative).
        u128 fceil = 1, ffloor = 0;  // ceil / floor of f × 2^shift2
        if (shift2) {
            if (lead + fp.size() > 18) return bad("more than 18 fraction digits with a binary suffix");
            u128 num = 0, den = 1;
            digits_to_u128(fp, ~u128(0), num);
            for (size_t k = 0; k < lead + fp.size(); ++k) den *= 10;
            num <<= shift2;
            ffloor = num / den;
            fceil = (num + den - 1) / den;
        }
        mag = iv + (neg ? ffloor : fceil);
    }
    if (mag > limit) return too_large();
    return neg ? -static_cast<int64_t>(mag) : static_cast<int64_t>(mag);
}

std::optional<int64_t> quantity_from_json(const json& v, std::string* why) {
    if (v.is_null()) return 0;
    if (v.is_string()) {
        std::string_view s = v.get_ref<const std::string&>();
        while (!s.empty() && (s.front() == ' ' || s.front() == '\t' || s.front() == '\n' || s.front() == '\r')) s.remove_prefix(1);
        while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\n' || s.back() == '\r')) s.remove_suffix(1);
        return parse_quantity(s, why);
    }
    if (v.is_number_integer()) {
        if (v.is_number_unsigned()) {
            uint64_t u = v.get<uint64_t>();
            if (u > static_cast<uint64_t>(kMaxQuantityValue)) {
                if (why) *why = "quantity " + std::to_string(u) + ": larger than 2^62";
                return std::nullopt;
            }
            return static_cast<int64_t>(u);
        }
        int64_t i = v.get<int64_t>();
        if (i > kMaxQuantityValue || i < -kMaxQuantityValue) {
            if (why) *why = "quantity " + std::to_string(i) + ": larger than 2^62";
            return std::nullopt;
        }
        return i;
    }
    if (v.is_number_float()) {
        char buf[64];
        std::snprintf(buf, sizeof buf, "%.17g", v.get<double>());
        std::string t = buf;
        // %g may print "1e+20": the quantity grammar takes that exponent form as it is
        return parse_quantity(t, why);
    }
    if (why) *why = std::string("quantity: expected a string or a number, got ") + v.type_name();
    return std::nullopt;
}

std::optional<bool> go_parse_bool(std::string_view s) {
    if (s == "1" || s == "t" || s == "T" || s == "TRUE" || s == "true" || s == "True") return true;
    if (s == "0" || s == "f" || s == "F" || s == "FALSE" || s == "false" || s == "False") return false;
    return std::nullopt;
}

std::optional<int64_t> go_parse_int(std::string_view s) {
    if (s.empty() || s.size() > 20) return std::nullopt;
    bool neg = false;
    if (s[0] == '+' || s[0] == '-') {
        neg = s[0] == '-';
        s.remove_prefix(1);
    }
    if (s.empty() || !all_digits(s)) return std::nullopt;
    u128 v = 0;
    const u128 lim = static_cast<u128>(INT64_MAX) + (neg ? 1 : 0);
    if (!digits_to_u128(s, lim, v)) return std::nullopt;
    if (neg) return v == static_cast<u128>(INT64_MAX) + 1 ? INT64_MIN : -static_cast<int64_t>(v);
    return static_cast<int64_t>(v);
}

int64_t milli_cpu_to_shares(int64_t m) {
    if (m <= 0) return 2;
    if (m >= 256000) return 262144;  // 256000 × 1024 / 1000 = 262144: the maximum
    int64_t s = m * 1024 / 1000;
    return s < 2 ? 2 : s;
}

int64_t milli_cpu_to_quota(int64_t m) {
    if (m <= 0) return -1;
    if (m > INT64_MAX / 100) return INT64_MAX;  // × 100000 / 1000 = × 100
    int64_t q = m * 100;
    return q < 1000 ? 1000 : q;
}

namespace {

json parse_doc(std::string_view text, const char* what) {
    if (text.size() > kMaxFactAnnotationBytes)
        throw InputError(std::string(what) + ": longer than " + std::to_string(kMaxFactAnnotationBytes) + " bytes");
    try {
        return parse_json_limited(text, kMaxFactJsonDepth);
    } catch (const InputError& e) { throw InputError(std::string(what) + ": " + e.what()); }
}

void read_resource_list(const json& list, const std::string& where, std::optional<int64_t>& cpu, std::string& cpu_text, std::optional<int64_t>& mem,
                        std::string& mem_text) {
    if (list.is_null()) return;
    if (!list.is_object()) throw InputError(where + ": expected an object of quantities, got " + list.type_name());
    for (const auto& [res, q] : list.items()) {
        bool is_cpu = res == "kubernetes.io/batch-cpu", is_mem = res == "kubernetes.io/batch-memory";
        if (!is_cpu && !is_mem) continue;  // other extended resources: not ours (Go ignores them too)
        std::string why;
        auto v = quantity_from_json(q, &why);
        if (!v) throw InputError(where + "." + res + ": " + why);
        std::string text = q.is_string() ? q.get<std::string>() : q.dump();
        if (is_cpu) {
            cpu = *v;
            cpu_text = text;
        } else {
            mem = *v;
            mem_text = text;
        }
    }
}

}  // namespace

ExtendedResourceSpec parse_extended_resource_spec(std::string_view text) {
    static const char* kWhat = "node.koordinator.sh/extended-resource-spec";
    json j = parse_doc(text, kWhat);
    if (!j.is_object()) throw InputError(std::string(kWhat) + ": expected a JSON object, got " + j.type_name());
    ExtendedResourceSpec out;
    auto it = j.find("containers");
    if (it == j.end() || it->is_null()) return out;
    if (!it->is_object()) throw InputError(std::string(kWhat) + ": containers: expected an object, got " + it->type_name());
    if (it->size() > 4096) throw InputError(std::string(kWhat) + ": more than 4096 containers");
    out.present = true;
    for (const auto& [name, spec] : it->items()) {
        std::string where = std::string(kWhat) + ": containers." + clip(name);
        if (spec.is_null()) {
            out.containers[name] = {};
            continue;
        }
        if (!spec.is_object()) throw InputError(where + ": expected an object, got " + spec.type_name());
        BatchResources b;
        if (auto r = spec.find("requests"); r != spec.end() && !r->is_null()) {
            b.has_requests = true;
            read_resource_list(*r, where + ".requests", b.cpu_request, b.cpu_request_text, b.mem_request, b.mem_request_text);
        }
        if (auto l = spec.find("limits"); l != spec.end() && !l->is_null()) {
            b.has_limits = true;
            read_resource_list(*l, where + ".limits", b.cpu_limit, b.cpu_limit_text, b.mem_limit, b.mem_limit_text);
        }
        out.containers[name] = std::move(b);
    }
    return out;
}

std::string parse_resource_status_cpuset(std::string_view text) {
    static const char* kWhat = "scheduling.koordinator.sh/resource-status";
    json j = parse_doc(text, kWhat);
    if (!j.is_object()) throw InputError(std::string(kWhat) + ": expected a JSON object, got " + j.type_name());
    auto it = j.find("cpuset");
    if (it == j.end() || it->is_null()) return "";
    if (!it->is_string()) throw InputError(std::string(kWhat) + ": cpuset: expected a string, got " + it->type_name());
    const std::string& s = it->get_ref<const std::string&>();
    if (s.empty()) return "";
    std::string why;
    auto set = CpuSet::parse(s, &why);
    if (!set) throw InputError(std::string(kWhat) + ": cpuset \"" + clip(s) + "\": " + why);
    if (set->empty()) return "";
    return set->str();
}

std::optional<std::map<std::string, std::string>> parse_string_map(std::string_view text, std::string* why) {
    json j;
    try {
        j = parse_doc(text, "annotation");
    } catch (const InputError& e) {
        if (why) *why = e.what();
        return std::nullopt;
    }
    if (!j.is_object()) {
        if (why) *why = std::string("expected a JSON object of strings, got ") + j.type_name();
        return std::nullopt;
    }
    // Go's json.Unmarshal into map[string]string skips a value of the wrong type, keeps the
    // others and reports the first such error (encoding/json: "Unmarshal ... completes the
    // unmarshaling as best it can"); katalyst-core pkg/config/generic/qos.go
    // GetQoSEnhancementKVs then returns that partial map. null becomes "".
    std::map<std::string, std::string> out;
    std::string skipped;
    for (const auto& [k, v] : j.items()) {
        if (v.is_string()) out[k] = v.get<std::string>();
        else if (v.is_null()) out[k] = "";
        else if (skipped.empty()) skipped = "value of \"" + clip(k) + "\" is a " + v.type_name() + ", not a string (ignored, as Katalyst does)";
    }
    if (why) *why = skipped;
    return out;
}

BlkioLimit parse_blkio_limit(std::string_view text) {
    static const char* const kWhat = "volcano.sh/blkio-limit";
    static const char* const kLists[] = {"device_read_bps", "device_write_bps", "device_read_iops", "device_write_iops"};
    json j = parse_doc(text, kWhat);
    // json.NewDecoder(...).Decode(&BlkConfig{}): null is "no config" for Go too (all lists empty)
    if (j.is_null()) return {};
    if (!j.is_object()) throw InputError(std::string(kWhat) + ": expected a JSON object, got " + j.type_name());
    auto fold = [](std::string s) {  // encoding/json field matching is case-insensitive
        for (char& ch : s) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
        return s;
    };
    BlkioLimit out;
    for (const auto& [k, v] : j.items()) {
        int idx = -1;
        for (int i = 0; i < 4; ++i)
            if (fold(k) == kLists[i]) idx = i;
        if (idx < 0 || v.is_null()) continue;  // other keys: ignored, as Go does
        const std::string where = std::string(kWhat) + ": " + kLists[idx];
        if (!v.is_array()) throw InputError(where + ": expected a list, got " + v.type_name());
        if (v.size() > kMaxBlkioDevices) throw InputError(where + ": more than " + std::to_string(kMaxBlkioDevices) + " devices");
        auto& list = out.lists[idx];
        list.clear();  // a key given twice (other case): the last wins, as in Go
        for (const auto& e : v) {
            BlkioDeviceValue dv;
            if (e.is_null()) {
                list.push_back(dv);
                continue;
            }
            if (!e.is_object()) throw InputError(where + ": expected {\"device\": ..., \"value\": ...}, got " + e.type_name());
            for (const auto& [ek, ev] : e.items()) {
                const std::string f = fold(ek);
                if (f != "device" && f != "value") continue;
                if (ev.is_null()) continue;
                if (!ev.is_string()) throw InputError(where + ": " + f + " must be a string, got " + ev.type_name());
                (f == "device" ? dv.device : dv.value) = ev.get<std::string>();
            }
            list.push_back(std::move(dv));
        }
    }
    return out;
}

namespace {

/// A JSON integer in int64 range, as Go's json.Unmarshal into int / int64 accepts it.
std::optional<int64_t> go_json_int(const json& v) {
    if (v.is_number_integer() && !v.is_number_unsigned()) return v.get<int64_t>();
    if (v.is_number_unsigned() && v.get<uint64_t>() <= static_cast<uint64_t>(INT64_MAX)) return static_cast<int64_t>(v.get<uint64_t>());
    return std::nullopt;
}

std::string lower(std::string s) {
    for (char& ch : s)
        if (ch >= 'A' && ch <= 'Z') ch = static_cast<char>(ch - 'A' + 'a');
    return s;
}

}  // namespace

ColocationMemoryQos parse_colocation_memory_qos(std::string_view text) {
    static const char* kWhat = "volcano.sh/colocation-config";
    json j = parse_doc(text, kWhat);
    ColocationMemoryQos out;
    out.defaulted = true;
    if (j.is_null()) return out;  // json.Unmarshal of null: nothing set, MemoryQos nil
    if (!j.is_object()) throw InputError(std::string(kWhat) + ": expected a JSON object, got " + j.type_name());
    const json* mq = nullptr;
    for (const auto& [k, v] : j.items())
        if (lower(k) == "memoryqos") mq = &v;  // encoding/json: case-insensitive field match
    if (!mq || mq->is_null()) return out;
    if (!mq->is_object()) throw InputError(std::string(kWhat) + ": memoryQos: expected an object, got " + mq->type_name());
    out = ColocationMemoryQos{0, 0, 0, false};  // present: Go's zero values for what it omits
    for (const auto& [k, v] : mq->items()) {
        const std::string f = lower(k);
        int64_t* dst = f == "highratio" ? &out.high_ratio : f == "lowratio" ? &out.low_ratio : f == "minratio" ? &out.min_ratio : nullptr;
        if (!dst || v.is_null()) continue;
        auto n = go_json_int(v);
        if (!n)
            throw InputError(std::string(kWhat) + ": memoryQos." + clip(k) + ": expected an integer, got " +
                             (v.is_number() ? v.dump() : std::string(v.type_name())));
        *dst = *n;
    }
    return out;
}

std::map<std::string, int64_t> parse_oom_score_adj_spec(std::string_view text) {
    static const char* kWhat = "koordinator.sh/oom-score-adj-spec";
    json j = parse_doc(text, kWhat);
    if (!j.is_object()) throw InputError(std::string(kWhat) + ": expected a JSON object of container name → integer, got " + j.type_name());
    std::map<std::string, int64_t> out;
    for (const auto& [k, v] : j.items()) {
        // null: encoding/json stores the element's zero value under the key
        auto n = v.is_null() ? std::optional<int64_t>(0) : go_json_int(v);
        if (!n)
            throw InputError(std::string(kWhat) + ": " + clip(k) + ": expected an integer, got " +
                             (v.is_number() ? v.dump() : std::string(v.type_name())));
        out[k] = *n;
    }
    return out;
}

KubeletCpuState parse_kubelet_cpu_state(std::string_view text) {
    static const char* kWhat = "kubelet cpu_manager_state";
    if (text.size() > (1u << 20)) throw InputError(std::string(kWhat) + ": larger than 1 MiB");
    json j;
    try {
        j = parse_json_limited(text, 4);
    } catch (const InputError& e) { throw InputError(std::string(kWhat) + ": " + e.what()); }
    if (!j.is_object()) throw InputError(std::string(kWhat) + ": expected a JSON object, got " + j.type_name());
    KubeletCpuState out;
    if (auto p = j.find("policyName"); p != j.end() && !p->is_null()) {
        if (!p->is_string()) throw InputError(std::string(kWhat) + ": policyName: expected a string");
        out.policy = p->get<std::string>();
    }
    auto list = [&](const json& v, const std::string& where) {
        if (!v.is_string()) throw InputError(std::string(kWhat) + ": " + where + ": expected a CPU list string, got " + v.type_name());
        std::string why;
        auto s = CpuSet::parse(v.get_ref<const std::string&>(), &why);
        if (!s) throw InputError(std::string(kWhat) + ": " + where + ": " + why);
        return *s;
    };
    auto e = j.find("entries");
    if (e == j.end() || e->is_null()) return out;
    if (!e->is_object()) throw InputError(std::string(kWhat) + ": entries: expected an object, got " + e->type_name());
    size_t n = 0;
    for (const auto& [key, v] : e->items()) {
        if (++n > 16384) throw InputError(std::string(kWhat) + ": more than 16384 entries");
        CpuSet cpus;
        std::string pod = key;
        if (v.is_string()) {  // V1: container id → CPUs
            cpus = list(v, "entries." + clip(key));
            pod.clear();
        } else if (v.is_object()) {
            for (const auto& [ctr, c] : v.items()) {
                if (++n > 16384) throw InputError(std::string(kWhat) + ": more than 16384 entries");
                cpus |= list(c, "entries." + clip(key) + "." + clip(ctr));
            }
        } else {
            throw InputError(std::string(kWhat) + ": entries." + clip(key) + ": expected an object, got " + v.type_name());
        }
        out.by_pod[pod] |= cpus;
        out.held |= cpus;
    }
    if (out.policy == "none") {  // kubelet's none policy never holds CPUs (stale entries ignored)
        out.by_pod.clear();
        out.held = CpuSet();
    }
    return out;
}

std::optional<KubeletCpuState> read_kubelet_cpu_state(const std::string& path) {
    int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    if (fd < 0 && errno == ENOENT) return std::nullopt;
    if (fd < 0) throw InputError("kubelet cpu_manager_state " + path + ": " + std::strerror(errno));
    std::string text;
    char buf[8192];
    while (true) {
        ssize_t r = read(fd, buf, sizeof buf);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) {
            int err = errno;
            close(fd);
            throw InputError("kubelet cpu_manager_state " + path + ": " + std::strerror(err));
        }
        if (r == 0) break;
        text.append(buf, static_cast<size_t>(r));
        if (text.size() > (1u << 20)) {
            close(fd);
            throw InputError("kubelet cpu_manager_state " + path + ": larger than 1 MiB");
        }
    }
    close(fd);
    try {
        return parse_kubelet_cpu_state(text);
    } catch (const InputError& e) { throw InputError(std::string(e.what()) + " (" + path + ")"); }
}

}  // namespace nriqos
