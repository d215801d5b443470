#include "os/cpuset.hpp"

#include <algorithm>

namespace nriqos {

namespace {
bool parse_uint(std::string_view s, unsigned& out) {
    if (s.empty() || s.size() > 5) return false;
    unsigned v = 0;
    for (char c : s) {
        if (c < '0' || c > '9') return false;
        v = v * 10 + static_cast<unsigned>(c - '0');
    }
    out = v;
    return true;
}
/// At most 16 bytes of `s` for an error message, control characters replaced: one line.
std::string shown(std::string_view s) {
    std::string o;
    for (char c : s.substr(0, 16)) o += (static_cast<unsigned char>(c) < 0x20 || c == 0x7f || c == '"') ? '?' : c;
    return o;
}
std::string_view trim(std::string_view s) {
    while (!s.empty() && (s.front() == ' ' || s.front() == '\t' || s.front() == '\n')) s.remove_prefix(1);
    while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\n')) s.remove_suffix(1);
    return s;
}
}  // namespace

std::optional<CpuSet> CpuSet::parse(std::string_view s, std::string* why) {
    auto bad = [&](const std::string& m) -> std::optional<CpuSet> {
        if (why) *why = m;
        return std::nullopt;
    };
    if (s.size() > (64u << 10)) return bad("list longer than 64 KiB");
    s = trim(s);
    CpuSet out;
    if (s.empty()) return out;
    size_t pos = 0;
    while (true) {
        size_t comma = s.find(',', pos);
        std::string_view part = s.substr(pos, comma == std::string_view::npos ? std::string_view::npos : comma - pos);
        size_t dash = part.find('-');
        unsigned a = 0, b = 0;
        if (dash == std::string_view::npos) {
            if (!parse_uint(part, a)) return bad("\"" + shown(part) + "\" is not a CPU number");
            b = a;
        } else if (!parse_uint(part.substr(0, dash), a) || !parse_uint(part.substr(dash + 1), b)) {
            return bad("\"" + shown(part) + "\" is not a range A-B");
        }
        if (b < a) return bad("range " + std::to_string(a) + "-" + std::to_string(b) + " is descending");
        if (b > kMaxId) return bad("id " + std::to_string(b) + " above " + std::to_string(kMaxId));
        out.add_range(a, b);
        if (comma == std::string_view::npos) break;
        pos = comma + 1;
        if (pos == s.size()) return bad("trailing comma");
    }
    return out;
}

void CpuSet::add(unsigned id) {
    if (id > kMaxId) return;
    if (w_.size() <= id / 64) w_.resize(id / 64 + 1, 0);
    w_[id / 64] |= uint64_t(1) << (id % 64);
}

void CpuSet::add_range(unsigned a, unsigned b) {
    for (unsigned i = a; i <= b && i <= kMaxId; ++i) add(i);
}

bool CpuSet::has(unsigned id) const { return id / 64 < w_.size() && (w_[id / 64] >> (id % 64) & 1); }

bool CpuSet::empty() const {
    return std::all_of(w_.begin(), w_.end(), [](uint64_t x) { return x == 0; });
}

unsigned CpuSet::count() const {
    unsigned n = 0;
    for (uint64_t x : w_) n += static_cast<unsigned>(__builtin_popcountll(x));
    return n;
}

std::vector<unsigned> CpuSet::ids() const {
    std::vector<unsigned> out;
    for (size_t i = 0; i < w_.size(); ++i)
        for (unsigned b = 0; b < 64; ++b)
            if (w_[i] >> b & 1) out.push_back(static_cast<unsigned>(i * 64 + b));
    return out;
}

std::string CpuSet::str() const {
    std::string out;
    std::vector<unsigned> v = ids();
    for (size_t i = 0; i < v.size();) {
        size_t j = i;
        while (j + 1 < v.size() && v[j + 1] == v[j] + 1) ++j;
        if (!out.empty()) out += ',';
        out += std::to_string(v[i]);
        if (j > i) out += "-" + std::to_string(v[j]);
        i = j + 1;
    }
    return out;
}

CpuSet CpuSet::operator|(const CpuSet& o) const {
    CpuSet r = *this;
    r |= o;
    return r;
}

CpuSet& CpuSet::operator|=(const CpuSet& o) {
    if (w_.size() < o.w_.size()) w_.resize(o.w_.size(), 0);
    for (size_t i = 0; i < o.w_.size(); ++i) w_[i] |= o.w_[i];
    return *this;
}

CpuSet CpuSet::operator&(const CpuSet& o) const {
    CpuSet r;
    r.w_.resize(std::min(w_.size(), o.w_.size()), 0);
    for (size_t i = 0; i < r.w_.size(); ++i) r.w_[i] = w_[i] & o.w_[i];
    return r;
}

CpuSet CpuSet::operator-(const CpuSet& o) const {
    CpuSet r = *this;
    for (size_t i = 0; i < r.w_.size() && i < o.w_.size(); ++i) r.w_[i] &= ~o.w_[i];
    return r;
}

bool CpuSet::operator==(const CpuSet& o) const {
    size_t n = std::max(w_.size(), o.w_.size());
    for (size_t i = 0; i < n; ++i) {
        uint64_t a = i < w_.size() ? w_[i] : 0, b = i < o.w_.size() ? o.w_[i] : 0;
        if (a != b) return false;
    }
    return true;
}

bool CpuSet::subset_of(const CpuSet& o) const { return (*this - o).empty(); }

}  // namespace nriqos
