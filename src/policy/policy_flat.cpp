// The flat compiled form of a policy (policy_cache.hpp "Flat format"): the checksum hash64, the
// encoder (compile, compile_broken), the bounds-checked decoder (decode, and decode_knobs for a
// filtered decode's chosen class), and the rule index of section B (rule_anchors at compile time,
// request_anchors at decode time). The cache files that carry it (paths, trust, atomic writes,
// the key, preload): policy_cache.cpp.
#include "policy/policy_cache.hpp"
#include "policy/policy_flat.hpp"
#include "policy/policy_settings.hpp"

#include "model/fact_table.hpp"

#include <algorithm>
#include <cstring>

namespace nriqos {
namespace policy_cache {

namespace {

constexpr char kMagic[8] = {'N', 'R', 'I', 'Q', 'O', 'S', 'P', 'C'};
constexpr uint32_t kEndianProbe = 0x01020304;
constexpr size_t kHeaderBytes = 48;
constexpr size_t kVerifyWholeBytes = 256u << 10;  ///< files up to this size are checksummed whole

// ---- hashing ------------------------------------------------------------------------------
constexpr uint64_t P1 = 11400714785074694791ULL, P2 = 14029467366897019727ULL, P3 = 1609587929392839161ULL, P4 = 9650029242287828579ULL,
                   P5 = 2870177450012600261ULL;

inline uint64_t rotl(uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }
inline uint64_t round64(uint64_t acc, uint64_t in) { return rotl(acc + in * P2, 31) * P1; }
inline uint64_t load64(const unsigned char* p) {
    uint64_t v;
    std::memcpy(&v, p, 8);
    return v;
}

// ---- reader: every access bounds-checked; a failure sticks --------------------------------
struct Reader {
    const unsigned char* p;
    size_t n, pos = 0;
    bool ok = true;
    Reader(std::string_view s, size_t at) : p(reinterpret_cast<const unsigned char*>(s.data())), n(s.size()), pos(at) {
        if (pos > n) ok = false;
    }
    bool need(size_t k) {
        if (!ok || n - pos < k) ok = false;
        return ok;
    }
    uint8_t u8() { return need(1) ? p[pos++] : 0; }
    uint32_t u32() {
        uint32_t v = 0;
        if (need(4)) std::memcpy(&v, p + pos, 4), pos += 4;
        return v;
    }
    uint64_t u64() {
        uint64_t v = 0;
        if (need(8)) std::memcpy(&v, p + pos, 8), pos += 8;
        return v;
    }
    int64_t i64() { return static_cast<int64_t>(u64()); }
    std::string_view view() {
        uint32_t len = u32();
        if (!need(len)) return {};
        std::string_view s(reinterpret_cast<const char*>(p + pos), len);
        pos += len;
        return s;
    }
    std::string str() { return std::string(view()); }
    /// A count of items each at least `min_bytes` long (refuses counts the blob cannot hold).
    uint32_t count(size_t min_bytes) {
        uint32_t c = u32();
        if (ok && min_bytes && c > (n - pos) / min_bytes) ok = false;
        return ok ? c : 0;
    }
    std::vector<std::string> strs() {
        std::vector<std::string> v;
        uint32_t c = count(4);
        v.reserve(c);
        for (uint32_t i = 0; i < c && ok; ++i) v.push_back(str());
        return v;
    }
    GlobMap globs() {
        GlobMap m;
        uint32_t c = count(8);
        m.reserve(c);
        for (uint32_t i = 0; i < c && ok; ++i) {
            std::string k = str();
            m.emplace_back(std::move(k), str());
        }
        return m;
    }
    std::vector<KnobSetting> knobs() {
        std::vector<KnobSetting> v;
        uint32_t c = count(22);
        v.reserve(c);
        for (uint32_t i = 0; i < c && ok; ++i) {
            uint8_t id = u8(), kind = u8();
            if (id > static_cast<uint8_t>(KnobId::Raw) || kind > KnobValue::Fact) ok = false;
            KnobSetting k{static_cast<KnobId>(id), {}, {}, {}, {}};
            k.value.kind = static_cast<KnobValue::Kind>(kind);
            k.value.num = i64();
            k.value.text = str();
            k.raw_file = str();
            k.raw_ctrl = str();
            if (ok && k.value.kind == KnobValue::Fact && !find_fact(k.value.text)) ok = false;  // model/fact_table.hpp registry
            v.push_back(std::move(k));
        }
        return v;
    }
    /// Step over a knob list as knobs() reads it, checking its bounds, knob ids and value kinds
    /// but building nothing (fact names are checked when the list is decoded: decode_knobs).
    void skip_knobs() {
        uint32_t c = count(22);
        for (uint32_t i = 0; i < c && ok; ++i) {
            uint8_t id = u8(), kind = u8();
            if (id > static_cast<uint8_t>(KnobId::Raw) || kind > KnobValue::Fact) ok = false;
            if (need(8)) pos += 8;
            view(), view(), view();
        }
    }
};

// ---- [settings] (policy_settings.hpp: the table fixes their order and encoding) -------------

/// The flat form of the settings of `block`, in their flat order.
void encode_settings(Writer& w, const Policy& p, FlatBlock block) {
    const auto& rows = flat_settings(block);
    bool given_written = false;
    for (const SettingDef* d : rows) {
        switch (d->type) {
            case SettingType::Text: w.str(d->ref.of<std::string>(p)); break;
            case SettingType::FailMode:
            case SettingType::Bool: w.u8(d->ref.of<bool>(p) ? 1 : 0); break;
            case SettingType::Choice: w.u8(d->ref.of<uint8_t>(p)); break;
            case SettingType::Count:
                if (d->ref.kind == SettingRef::U64) w.u64(d->ref.of<uint64_t>(p));
                else w.u32(d->ref.of<uint32_t>(p));
                break;
            case SettingType::Path:
                if (!given_written) {  // the "given" bits of all of the block's paths, first
                    uint8_t bits = 0, bit = 1;
                    for (const SettingDef* q : rows)
                        if (q->type == SettingType::Path) bits |= q->aux.of<bool>(p) ? bit : 0, bit <<= 1;
                    w.u8(bits);
                    given_written = true;
                }
                w.str(d->ref.of<std::string>(p));
                break;
            case SettingType::CpusOrCount:
                w.str(d->ref.of<std::string>(p));
                w.u32(d->aux.of<uint32_t>(p));
                break;
            case SettingType::FieldOwners: {
                GlobMap pairs;  // (field, plugin) pairs; what a field covers is recomputed on load
                for (const auto& lf : d->ref.of<std::vector<LeftField>>(p)) pairs.emplace_back(lf.field, lf.plugin);
                w.globs(pairs);
                break;
            }
        }
    }
}

/// The settings of `block` as encode_settings wrote them; false for a value it never writes.
bool decode_settings(Reader& rd, Policy& p, FlatBlock block) {
    const auto& rows = flat_settings(block);
    uint8_t given = 0, bit = 0;
    bool given_read = false;
    for (const SettingDef* d : rows) {
        switch (d->type) {
            case SettingType::Text: d->ref.of<std::string>(p) = rd.str(); break;
            case SettingType::FailMode:
            case SettingType::Bool: d->ref.of<bool>(p) = rd.u8() != 0; break;
            case SettingType::Choice: {
                const uint8_t v = rd.u8();
                if (!setting_value_ok(*d, v)) return false;
                d->ref.of<uint8_t>(p) = v;
                break;
            }
            case SettingType::Count: {
                const uint64_t v = d->ref.kind == SettingRef::U64 ? rd.u64() : rd.u32();
                if (v > uint64_t(INT64_MAX) || !setting_value_ok(*d, static_cast<int64_t>(v))) return false;
                if (d->ref.kind == SettingRef::U64) d->ref.of<uint64_t>(p) = v;
                else d->ref.of<uint32_t>(p) = static_cast<uint32_t>(v);
                break;
            }
            case SettingType::Path:
                if (!given_read) given = rd.u8(), given_read = true;
                d->aux.of<bool>(p) = (given >> bit++) & 1;
                d->ref.of<std::string>(p) = rd.str();
                break;
            case SettingType::CpusOrCount:
                d->ref.of<std::string>(p) = rd.str();
                d->aux.of<uint32_t>(p) = rd.u32();
                break;
            case SettingType::FieldOwners:
                for (auto& [field, plugin] : rd.globs()) {
                    LeftField lf;
                    std::string err;
                    if (!field_knobs(field, lf.covers, err)) return false;  // a field this build does not know
                    lf.field = std::move(field);
                    lf.plugin = std::move(plugin);
                    d->ref.of<std::vector<LeftField>>(p).push_back(std::move(lf));
                }
                break;
        }
    }
    return true;
}

// ---- rule index ---------------------------------------------------------------------------
// Anchor tags: 'L' label key=value, 'A' annotation key=value, 'l' label key, 'a' annotation key,
// 'N' namespace, 'P' pod name, 'C' container name.
uint64_t anchor(char tag, std::string_view k, std::string_view v = {}) {
    uint64_t h = hash64(k.data(), k.size(), static_cast<unsigned char>(tag));
    return hash64(v.data(), v.size(), h ^ (v.size() * P5 + 0x9e37));
}

bool literal(const std::string& g) { return g.find_first_of("*?[") == std::string::npos; }
bool all_literal(const std::vector<std::string>& v) {
    if (v.empty()) return false;
    for (const auto& g : v)
        if (!literal(g)) return false;
    return true;
}

/// Hashes of one necessary condition of `m`: the rule can only match a request that produces
/// one of them (see request_anchors). Empty: no usable condition ("always" candidate).
std::vector<uint64_t> rule_anchors(const Match& m) {
    for (const auto& [k, g] : m.labels)
        if (literal(g)) return {anchor('L', k, g)};
    for (const auto& [k, g] : m.annotations)
        if (literal(g)) return {anchor('A', k, g)};
    for (const auto& [k, g] : m.labels_or_annotations)
        if (literal(g)) return {anchor('L', k, g), anchor('A', k, g)};
    std::vector<uint64_t> out;
    auto list = [&](char tag, const std::vector<std::string>& v) {
        if (!all_literal(v)) return false;
        for (const auto& s : v) out.push_back(anchor(tag, s));
        return true;
    };
    if (list('N', m.namespaces) || list('P', m.pod_names) || list('C', m.container_names)) return out;
    if (!m.labels.empty()) return {anchor('l', m.labels.front().first)};
    if (!m.annotations.empty()) return {anchor('a', m.annotations.front().first)};
    if (!m.labels_or_annotations.empty()) {
        const std::string& k = m.labels_or_annotations.front().first;
        return {anchor('l', k), anchor('a', k)};
    }
    return {};
}

void request_anchors(const Request& r, std::vector<uint64_t>& out) {
    out.reserve(2 * (r.labels.size() + r.annotations.size()) + 3);
    for (const auto& [k, v] : r.labels) {
        out.push_back(anchor('L', k, v));
        out.push_back(anchor('l', k));
    }
    for (const auto& [k, v] : r.annotations) {
        out.push_back(anchor('A', k, v));
        out.push_back(anchor('a', k));
    }
    out.push_back(anchor('N', r.pod_namespace));
    out.push_back(anchor('P', r.pod_name));
    if (!r.is_sandbox) out.push_back(anchor('C', r.container_name));  // container_name never matches a sandbox
}

Rule read_rule(Reader& rd) {
    Rule r;
    r.name = rd.str();
    r.cls = rd.str();
    r.line = static_cast<int>(rd.u32());
    {
        const uint8_t m = rd.u8();
        if (m > 1) rd.ok = false;
        r.merge = m == 1;
    }
    r.match.labels = rd.globs();
    r.match.annotations = rd.globs();
    r.match.labels_or_annotations = rd.globs();
    r.match.namespaces = rd.strs();
    r.match.pod_names = rd.strs();
    r.match.container_names = rd.strs();
    r.match.kind = static_cast<int>(rd.u32());
    if (r.match.kind < 0 || r.match.kind > 2) rd.ok = false;
    uint32_t nq = rd.count(1);
    for (uint32_t i = 0; i < nq && rd.ok; ++i) {
        uint8_t q = rd.u8();
        if (q > static_cast<uint8_t>(KubeQos::Guaranteed)) rd.ok = false;
        r.match.kube_qos.push_back(static_cast<KubeQos>(q));
    }
    return r;
}

}  // namespace

uint64_t hash64(const void* data, size_t n, uint64_t seed) {
    const auto* p = static_cast<const unsigned char*>(data);
    const unsigned char* end = p + n;
    uint64_t h;
    if (n >= 32) {
        uint64_t v1 = seed + P1 + P2, v2 = seed + P2, v3 = seed, v4 = seed - P1;
        const unsigned char* limit = end - 32;
        do {
            v1 = round64(v1, load64(p));
            v2 = round64(v2, load64(p + 8));
            v3 = round64(v3, load64(p + 16));
            v4 = round64(v4, load64(p + 24));
            p += 32;
        } while (p <= limit);
        h = rotl(v1, 1) + rotl(v2, 7) + rotl(v3, 12) + rotl(v4, 18);
        for (uint64_t v : {v1, v2, v3, v4}) h = (h ^ round64(0, v)) * P1 + P4;
    } else {
        h = seed + P5;
    }
    h += static_cast<uint64_t>(n);
    for (; end - p >= 8; p += 8) h = rotl(h ^ round64(0, load64(p)), 27) * P1 + P4;
    if (end - p >= 4) {
        uint32_t w;
        std::memcpy(&w, p, 4);
        h = rotl(h ^ (static_cast<uint64_t>(w) * P1), 23) * P2 + P3;
        p += 4;
    }
    for (; p < end; ++p) h = rotl(h ^ (*p * P5), 11) * P1;
    h ^= h >> 33;
    h *= P2;
    h ^= h >> 29;
    h *= P3;
    h ^= h >> 32;
    return h;
}

namespace {
/// Header + the start of section A common to valid and broken entries.
void begin_entry(Writer& w, const std::string& key, bool racy, uint64_t text_hash, const std::string& sha256, bool broken) {
    w.b.append(kMagic, 8);
    w.u32(kFormatVersion);
    w.u32(kEndianProbe);
    w.u64(0);  // [16] total size
    w.u64(0);  // [24] end of section A
    w.u64(0);  // [32] checksum of section A = [kHeaderBytes, end of A)
    w.u64(0);  // [40] checksum of the whole rest [kHeaderBytes, end of file)
    w.str(key);
    w.u8(racy ? 1 : 0);
    w.u64(text_hash);
    w.str(sha256);
    w.u8(broken ? 1 : 0);
}
}  // namespace

std::string compile_broken(const std::string& key, bool racy, uint64_t text_hash, const std::string& sha256, const std::string& error) {
    Writer w;
    begin_entry(w, key, racy, text_hash, sha256, true);
    w.str(error.substr(0, 4096));
    w.put64(24, w.b.size());
    w.put64(16, w.b.size());
    w.put64(32, hash64(w.b.data() + kHeaderBytes, w.b.size() - kHeaderBytes));
    w.put64(40, hash64(w.b.data() + kHeaderBytes, w.b.size() - kHeaderBytes));
    return std::move(w.b);
}

namespace {

/// Section A after the entry's header: the policy version, [settings], source, [guarded] and the
/// [resctrl.*] groups (the settings' places: policy_settings.hpp FlatBlock).
void write_policy_head(Writer& w, const Policy& p) {
    w.u32(static_cast<uint32_t>(p.version));
    encode_settings(w, p, kFlatHead);
    w.str(p.source);
    w.globs(p.guarded_labels);
    w.globs(p.guarded_annotations);
    encode_settings(w, p, kFlatMiddle);
    w.u32(static_cast<uint32_t>(p.resctrl_groups.size()));
    for (const auto& [n, g] : p.resctrl_groups) {
        w.str(n);
        w.str(g.l3);
        w.str(g.mb);
        w.i64(g.l3_percent);
        w.i64(g.l3_start_percent);
        w.i64(g.mb_percent);
        w.u8(static_cast<uint8_t>((g.l3_round_down ? 1 : 0) | (g.manage ? 2 : 0)));
        w.u32(static_cast<uint32_t>(g.line));
    }
    encode_settings(w, p, kFlatTail);
}

void write_class(Writer& w, const std::string& n, const ClassDef& c) {
    w.str(n);
    w.str(c.description);
    w.u8(c.fail_closed);
    w.knobs(c.container);
    w.knobs(c.pod);
    w.knobs(c.sandbox);
    w.u8(c.gate.enabled);
    w.strs(c.gate.namespaces);
    w.globs(c.gate.labels);
    w.str(c.gate.fallback);
    // low nibble: pod_cpu_weight_formula, high nibble: container_cpu_weight_formula (0: the
    // settings' formula; 1 + WeightFormula). A cache without the high nibble reads as unset.
    w.u8(static_cast<uint8_t>((c.pod_weight_formula_set ? 1 + static_cast<unsigned>(c.pod_weight_formula) : 0) |
                              (c.ctr_weight_formula_set ? 1 + static_cast<unsigned>(c.ctr_weight_formula) : 0) << 4));
    w.u8(c.accept_merge);
}

/// One rule record: u32 payload length, u64 checksum of the payload, payload.
void write_rule(Writer& w, const Rule& r) {
    size_t rec = w.b.size();
    w.u32(0);
    w.u64(0);
    w.str(r.name);
    w.str(r.cls);
    w.u32(static_cast<uint32_t>(r.line));
    w.u8(r.merge);
    w.globs(r.match.labels);
    w.globs(r.match.annotations);
    w.globs(r.match.labels_or_annotations);
    w.strs(r.match.namespaces);
    w.strs(r.match.pod_names);
    w.strs(r.match.container_names);
    w.u32(static_cast<uint32_t>(r.match.kind));
    w.u32(static_cast<uint32_t>(r.match.kube_qos.size()));
    for (auto q : r.match.kube_qos) w.u8(static_cast<uint8_t>(q));
    size_t len = w.b.size() - rec - 12;
    w.put32(rec, static_cast<uint32_t>(len));
    w.put64(rec + 4, hash64(w.b.data() + rec + 12, len));
}

/// Section B: u64 checksum of the rest of B, the "always" rules, the sorted index; its offset is
/// patched in at `index_at`.
void write_rule_index(Writer& w, size_t index_at, const std::vector<uint32_t>& always, std::vector<std::pair<uint32_t, uint32_t>> index) {
    std::sort(index.begin(), index.end());
    index.erase(std::unique(index.begin(), index.end()), index.end());
    size_t b_at = w.b.size();
    w.put64(index_at, b_at);
    w.u64(0);
    w.u32(static_cast<uint32_t>(always.size()));
    for (uint32_t i : always) w.u32(i);
    w.u32(static_cast<uint32_t>(index.size()));
    for (const auto& [h, i] : index) {
        w.u32(h);
        w.u32(i);
    }
    w.put64(b_at, hash64(w.b.data() + b_at + 8, w.b.size() - b_at - 8));
}

/// The header's total size and checksums, once everything is written.
void seal(Writer& w) {
    w.put64(16, w.b.size());
    uint64_t a_end;
    std::memcpy(&a_end, w.b.data() + 24, 8);
    w.put64(32, hash64(w.b.data() + kHeaderBytes, a_end - kHeaderBytes));
    w.put64(40, hash64(w.b.data() + kHeaderBytes, w.b.size() - kHeaderBytes));
}

}  // namespace

std::string compile(const Policy& p, const std::string& key, bool racy, uint64_t text_hash, const std::string& sha256) {
    Writer w;
    w.b.reserve(4096 + p.rules.size() * 112);
    // Section A: key, policy header, classes, rule count, index offset, rule offset table.
    begin_entry(w, key, racy, text_hash, sha256, false);
    write_policy_head(w, p);
    w.u32(static_cast<uint32_t>(p.classes.size()));
    for (const auto& [n, c] : p.classes) write_class(w, n, c);
    w.u32(static_cast<uint32_t>(p.rules.size()));
    size_t index_at = w.b.size();
    w.u64(0);  // offset of section B (rule index), patched by write_rule_index
    size_t table = w.b.size();
    w.b.resize(table + 4 * p.rules.size());
    w.put64(24, w.b.size());
    std::vector<std::pair<uint32_t, uint32_t>> index;  // (high 32 bits of the anchor hash, rule)
    std::vector<uint32_t> always;
    for (size_t i = 0; i < p.rules.size(); ++i) {
        w.put32(table + 4 * i, static_cast<uint32_t>(w.b.size()));
        write_rule(w, p.rules[i]);
        std::vector<uint64_t> a = rule_anchors(p.rules[i].match);
        if (a.empty()) always.push_back(static_cast<uint32_t>(i));
        for (uint64_t h : a) index.emplace_back(static_cast<uint32_t>(h >> 32), static_cast<uint32_t>(i));
    }
    write_rule_index(w, index_at, always, std::move(index));
    seal(w);
    return std::move(w.b);
}

namespace {

/// The entry's header and the start of section A (key, racy, text hash, SHA-256, broken): Ok
/// with `rd` on section A after them, Broken (info->error set), or Invalid.
Decoded decode_entry(std::string_view blob, std::string_view key, Reader& rd, size_t& a_end, bool& racy, DecodeInfo* info) {
    if (blob.size() < kHeaderBytes || std::memcmp(blob.data(), kMagic, 8) != 0) return Decoded::Invalid;
    rd = Reader(blob, 8);
    if (rd.u32() != kFormatVersion || rd.u32() != kEndianProbe || rd.u64() != blob.size()) return Decoded::Invalid;
    uint64_t a_at = rd.u64(), a_sum = rd.u64(), all_sum = rd.u64();
    if (!rd.ok || a_at < kHeaderBytes || a_at > blob.size()) return Decoded::Invalid;
    a_end = static_cast<size_t>(a_at);
    // Small files (the usual policies) are verified whole: any damaged byte means a rebuild.
    // Larger ones are verified section by section as they are used (a byte never used cannot
    // change the result), which keeps a hit on a 10,000-rule policy cheap.
    if (blob.size() <= kVerifyWholeBytes && all_sum != hash64(blob.data() + kHeaderBytes, blob.size() - kHeaderBytes)) return Decoded::Invalid;
    if (a_sum != hash64(blob.data() + kHeaderBytes, a_end - kHeaderBytes)) return Decoded::Invalid;
    rd = Reader(blob.substr(0, a_end), kHeaderBytes);  // section A only
    if (rd.view() != key || !rd.ok) return Decoded::Invalid;
    racy = rd.u8() != 0;
    uint64_t th = rd.u64();
    std::string sha = rd.str();
    bool broken = rd.u8() != 0;
    if (!rd.ok) return Decoded::Invalid;
    if (info) {
        info->text_hash = th;
        info->racy = racy;
        info->sha256 = sha;
    }
    if (!broken) return Decoded::Ok;
    std::string err = rd.str();
    if (!rd.ok || rd.pos != a_end || err.empty()) return Decoded::Invalid;
    if (info) info->error = std::move(err);
    return Decoded::Broken;
}

/// What write_policy_head wrote; false for bytes it never writes.
bool decode_policy_head(Reader& rd, Policy& p) {
    p.version = static_cast<int>(rd.u32());
    if (p.version != kPolicyVersion) return false;
    if (!decode_settings(rd, p, kFlatHead)) return false;
    p.source = rd.str();
    p.guarded_labels = rd.globs();
    p.guarded_annotations = rd.globs();
    if (!decode_settings(rd, p, kFlatMiddle)) return false;
    uint32_t ngroups = rd.count(16);
    for (uint32_t i = 0; i < ngroups && rd.ok; ++i) {
        ResctrlGroupDef g;
        g.name = rd.str();
        g.l3 = rd.str();
        g.mb = rd.str();
        g.l3_percent = static_cast<int>(rd.i64());
        g.l3_start_percent = static_cast<int>(rd.i64());
        g.mb_percent = static_cast<int>(rd.i64());
        uint8_t f = rd.u8();
        g.l3_round_down = f & 1;
        g.manage = (f & 2) != 0;
        g.line = static_cast<int>(rd.u32());
        std::string n = g.name;
        p.resctrl_groups.emplace(std::move(n), std::move(g));
    }
    return decode_settings(rd, p, kFlatTail);
}

/// One class as write_class wrote it. With `filter`, its knob lists are only stepped over and
/// their place recorded relative to `classes_at` (ClassDef::packed_at).
bool decode_class(Reader& rd, const Request* filter, size_t classes_at, ClassDef& c) {
    c.name = rd.str();
    c.description = rd.str();
    c.fail_closed = rd.u8() != 0;
    if (filter) {
        c.packed_at = static_cast<uint32_t>(rd.pos - classes_at);
        rd.skip_knobs();
        rd.skip_knobs();
        rd.skip_knobs();
        c.packed_end = static_cast<uint32_t>(rd.pos - classes_at);
    } else {
        c.container = rd.knobs();
        c.pod = rd.knobs();
        c.sandbox = rd.knobs();
    }
    c.gate.enabled = rd.u8() != 0;
    c.gate.namespaces = rd.strs();
    c.gate.labels = rd.globs();
    c.gate.fallback = rd.str();
    const uint8_t b = rd.u8();  // per nibble 0: settings' formula; 1 + WeightFormula
    const uint8_t f = b & 0xf, cf = b >> 4;
    if (f > 1 + static_cast<uint8_t>(WeightFormula::Linear) || cf > 1 + static_cast<uint8_t>(WeightFormula::Linear)) return false;
    c.pod_weight_formula_set = f != 0;
    if (f) c.pod_weight_formula = static_cast<WeightFormula>(f - 1);
    c.ctr_weight_formula_set = cf != 0;
    if (cf) c.ctr_weight_formula = static_cast<WeightFormula>(cf - 1);
    const uint8_t am = rd.u8();
    if (am > 1) return false;
    c.accept_merge = am == 1;
    return true;
}

/// All classes. With a filter (one event), each class's knob lists are only stepped over here and
/// decoded by decode_knobs for the class the event uses (classify picks one of ~10): their bytes
/// are copied into p.packed_knobs. Offsets are relative to the first class; every class has at
/// least its name and two list counts before its lists, so packed_end > 0.
bool decode_classes(Reader& rd, std::string_view blob, const Request* filter, Policy& p) {
    uint32_t nclasses = rd.count(16);
    const size_t classes_at = rd.pos;
    for (uint32_t i = 0; i < nclasses && rd.ok; ++i) {
        ClassDef c;
        if (!decode_class(rd, filter, classes_at, c)) return false;
        std::string n = c.name;
        p.classes.emplace_hint(p.classes.end(), std::move(n), std::move(c));
    }
    if (filter && rd.ok) p.packed_knobs.assign(blob.data() + classes_at, rd.pos - classes_at);
    return true;
}

/// Rule `i` of the offset table at `table`, verified against its own checksum.
bool decode_rule_at(std::string_view blob, size_t table, uint32_t i, Rule& r) {
    uint32_t off;
    std::memcpy(&off, blob.data() + table + 4ull * i, 4);
    Reader hdr(blob, off);
    uint32_t len = hdr.u32();
    uint64_t sum = hdr.u64();
    if (!hdr.need(len) || hash64(blob.data() + hdr.pos, len) != sum) return false;
    Reader rr(blob.substr(0, hdr.pos + len), hdr.pos);
    r = read_rule(rr);
    return rr.ok && rr.pos == rr.n;
}

/// Section B at `b_at`: the numbers of the "always" rules plus every rule filed under a
/// condition `req` meets, sorted and unique; false when B is damaged.
bool pick_rules(std::string_view blob, size_t a_end, uint64_t b_at, const Request& req, std::vector<uint32_t>& pick) {
    if (b_at < a_end || b_at > blob.size() - 8) return false;
    Reader ix(blob, static_cast<size_t>(b_at));
    uint64_t b_sum = ix.u64();
    if (b_sum != hash64(blob.data() + ix.pos, blob.size() - ix.pos)) return false;
    uint32_t nalways = ix.count(4);
    pick.reserve(nalways + 8);
    for (uint32_t i = 0; i < nalways && ix.ok; ++i) pick.push_back(ix.u32());
    uint32_t nindex = ix.count(8);
    if (!ix.ok) return false;
    const char* base = blob.data() + ix.pos;
    auto hash_at = [&](uint32_t i) {
        uint32_t h;
        std::memcpy(&h, base + 8ull * i, 4);
        return h;
    };
    std::vector<uint64_t> want;
    request_anchors(req, want);
    for (uint64_t w64 : want) {
        uint32_t h = static_cast<uint32_t>(w64 >> 32);
        uint32_t lo = 0, hi = nindex;  // first entry with hash >= h
        while (lo < hi) {
            uint32_t mid = lo + (hi - lo) / 2;
            if (hash_at(mid) < h) lo = mid + 1;
            else hi = mid;
        }
        for (; lo < nindex && hash_at(lo) == h; ++lo) {
            uint32_t r;
            std::memcpy(&r, base + 8ull * lo + 4, 4);
            pick.push_back(r);
        }
    }
    std::sort(pick.begin(), pick.end());
    pick.erase(std::unique(pick.begin(), pick.end()), pick.end());
    return true;
}

/// The rule count, section B's offset and the rule offset table that end section A, then the
/// rules: all of them, or with `filter` those pick_rules finds.
bool decode_rules(Reader& rd, std::string_view blob, size_t a_end, const Request* filter, Policy& p) {
    uint32_t nrules = rd.count(4);
    uint64_t b_at = rd.u64();
    size_t table = rd.pos;
    if (!rd.need(4ull * nrules) || rd.pos + 4ull * nrules != a_end) return false;
    std::vector<uint32_t> pick;
    if (filter && !pick_rules(blob, a_end, b_at, *filter, pick)) return false;
    const size_t n = filter ? pick.size() : nrules;
    p.rules.reserve(n);
    for (size_t k = 0; k < n; ++k) {
        const uint32_t i = filter ? pick[k] : static_cast<uint32_t>(k);
        if (i >= nrules) return false;
        p.rules.emplace_back();
        if (!decode_rule_at(blob, table, i, p.rules.back())) return false;
    }
    return true;
}

/// Every class name the policy refers to exists.
bool references_ok(const Policy& p) {
    if (!p.classes.count(p.default_class)) return false;
    for (const auto& r : p.rules)
        if (!p.classes.count(r.cls)) return false;
    for (const auto& [n, c] : p.classes)
        if (c.gate.enabled && !p.classes.count(c.gate.fallback)) return false;
    return true;
}

}  // namespace

Decoded decode(std::string_view blob, std::string_view key, const Request* filter, Policy& out, DecodeInfo* info) {
    Reader rd(blob, 0);
    size_t a_end = 0;
    bool racy = false;
    const Decoded entry = decode_entry(blob, key, rd, a_end, racy, info);
    if (entry != Decoded::Ok) return entry;
    Policy p;
    if (!decode_policy_head(rd, p) || !decode_classes(rd, blob, filter, p) || !decode_rules(rd, blob, a_end, filter, p)) return Decoded::Invalid;
    if (!rd.ok || !references_ok(p)) return Decoded::Invalid;
    out = std::move(p);
    return racy ? Decoded::Racy : Decoded::Ok;
}

bool decode_knobs(Policy& p, const std::string& cls) {
    auto it = p.classes.find(cls);
    if (it == p.classes.end()) return false;
    ClassDef& c = it->second;
    if (!c.knobs_pending()) return true;
    if (c.packed_end > p.packed_knobs.size() || c.packed_at >= c.packed_end) return false;
    Reader rd(std::string_view(p.packed_knobs).substr(0, c.packed_end), c.packed_at);
    std::vector<KnobSetting> container = rd.knobs(), pod = rd.knobs(), sandbox = rd.knobs();
    if (!rd.ok || rd.pos != c.packed_end) return false;  // nothing partial: the lists stay pending
    c.container = std::move(container);
    c.pod = std::move(pod);
    c.sandbox = std::move(sandbox);
    c.packed_at = c.packed_end = 0;
    return true;
}

}  // namespace policy_cache

}  // namespace nriqos
