// CPU and memory-node sets in the kernel's list format ("0-3,8,10-11"; cpuset(7) "FORMATS",
// Documentation/admin-guide/cgroup-v1/cpusets.rst), as sysfs (node*/cpulist, cpu/online) and the
// cpuset controller (cpuset.cpus, cpuset.mems) print them and accept them.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace nriqos {

/// A set of CPU (or NUMA node) numbers 0..kMaxId. Small and value-typed.
class CpuSet {
public:
    /// Largest id accepted: the kernel's NR_CPUS ceiling on the architectures nri-qos runs on
    /// (CONFIG_NR_CPUS ≤ 8192 on x86_64 and arm64 distributions).
    static constexpr unsigned kMaxId = 8191;

    CpuSet() = default;

    /// Parse the list format: comma-separated "N" or "A-B" (A ≤ B), ids ≤ kMaxId, surrounding
    /// whitespace and one trailing newline allowed (sysfs files end with "\n"); "" and "\n" are
    /// the empty set. Ranges may come in any order and overlap (the kernel accepts that too).
    /// Returns nullopt with `why` set on anything else (strides "0-7:2" included; sysfs and
    /// cgroup files never print them). Input longer than 64 KiB is refused.
    static std::optional<CpuSet> parse(std::string_view s, std::string* why = nullptr);

    /// The kernel's canonical list: ascending, ranges merged ("0-2,5"); "" when empty.
    std::string str() const;

    void add(unsigned id);
    void add_range(unsigned a, unsigned b);
    bool has(unsigned id) const;
    bool empty() const;
    unsigned count() const;
    /// Ids in ascending order.
    std::vector<unsigned> ids() const;

    CpuSet operator|(const CpuSet& o) const;
    CpuSet operator&(const CpuSet& o) const;
    CpuSet operator-(const CpuSet& o) const;  ///< set difference
    CpuSet& operator|=(const CpuSet& o);
    bool operator==(const CpuSet& o) const;
    bool operator!=(const CpuSet& o) const { return !(*this == o); }
    /// Every id of this set is in `o`.
    bool subset_of(const CpuSet& o) const;
    /// subset_of(o) and not equal to `o`.
    bool strict_subset_of(const CpuSet& o) const { return subset_of(o) && *this != o; }
    bool intersects(const CpuSet& o) const { return !(*this & o).empty(); }

private:
    std::vector<uint64_t> w_;  ///< grown on demand (most sets fit one or two words)
};

}  // namespace nriqos
