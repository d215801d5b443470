// Stage 5 — the systemd side of the cgroup sink (issue #25 §2). On the systemd cgroup driver
// the container's scope and the pod's slice are systemd units, and runc registered the OCI
// resources as their properties: `systemctl daemon-reload` (every package install) makes systemd
// write those back into the cgroup files, undoing nri-qos's writes. So, as runc's systemd cgroup
// manager does (opencontainers/cgroups systemd/v2.go UnifiedManager.Set), the writes that have a
// unit property are first set as properties with SetUnitProperties(unit, runtime=true, ...), then
// the files are written. build/nri-qos is static and Debian has libsystemd only as a shared
// library: the D-Bus call is made by the companion nri-qos-systemd (src/helper/), run here.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "event/adjust.hpp"

namespace nriqos {

/// Default path of the companion (Makefile install, deb, rpm). --systemd-helper overrides it.
inline constexpr const char* kSystemdHelper = "/usr/libexec/nri-qos/nri-qos-systemd";

/// One unit property, D-Bus type `t` (uint64) or `ay` (byte array).
struct UnitProp {
    std::string unit;  ///< "kubepods-besteffort-pod<uid_>.slice", "cri-containerd-<id>.scope"
    std::string name;  ///< systemd's property name, e.g. "CPUWeight"
    bool bytes = false;  ///< `ay` (AllowedCPUs, AllowedMemoryNodes); else `t`
    uint64_t num = 0;  ///< `t` value; UINT64_MAX is systemd's infinity ("max")
    std::vector<uint8_t> mask;  ///< `ay` value
    size_t write = 0;  ///< index of the Plan write it stands for
    /// "CPUWeight=1", "MemoryMax=infinity", "AllowedCPUs=0x0f" (mask bytes in order).
    std::string text() const;
    /// The companion's input line: "UNIT\tNAME\tt\tDECIMAL" or "UNIT\tNAME\tay\tHEX".
    std::string line() const;
};

/// The systemd unit a cgroup directory (relative to the v2 root) is: its last component when
/// that ends in ".scope" or ".slice" (the systemd driver's "<prefix>-<name>.scope" or the pod's
/// "kubepods-…-pod<uid_>.slice", model.hpp resolve_cgroups_path), else "".
std::string systemd_unit_of(const std::string& cgroup_dir);

/// runc's AllowedCPUs / AllowedMemoryNodes value (opencontainers/cgroups systemd/cpuset.go
/// RangeToBits): bit n of the little-endian byte array is CPU (node) n — byte n/8, bit n%8 —
/// and the array is as long as the highest member needs ("0-3,8" → {0x0f, 0x01}). nullopt for a
/// list that is not a cpuset list (cpuset(7)) or is empty.
std::optional<std::vector<uint8_t>> cpuset_to_mask(const std::string& list);

/// runc's CPUQuotaPerSecUSec for a CFS quota and period in µs (systemd/common.go addCpuQuota):
/// quota × 1000000 / period, rounded up to a multiple of 10000 (systemd keeps the quota as a
/// whole percentage of a CPU); quota < 0 ("max") → UINT64_MAX (USEC_INFINITY). period 0 → 100000.
uint64_t cpu_quota_per_sec_usec(int64_t quota, uint64_t period);

/// The unit properties of one cgroup v2 file write (`file` its name, `value` the bytes written):
///   cpu.weight N → CPUWeight; cpu.max "Q P" → CPUQuotaPeriodUSec P, CPUQuotaPerSecUSec
///   (cpu_quota_per_sec_usec; "max P" → infinity); memory.max/high/low/min, memory.swap.max →
///   MemoryMax/High/Low/Min, MemorySwapMax; pids.max → TasksMax; io.weight "default N" →
///   IOWeight; cpuset.cpus/mems → AllowedCPUs/AllowedMemoryNodes ("max" → UINT64_MAX).
/// Other files (cpu.max.burst, cpu.idle, the qos levels, raw files) have no property: empty,
/// with `why` saying so. A value it cannot read also gives empty and `why`.
std::vector<UnitProp> systemd_props_for(const std::string& file, const std::string& value, std::string& why);

/// Sets unit properties; one answer per property, in order: "" (set) or why not.
class UnitSetter {
public:
    virtual ~UnitSetter() = default;
    virtual std::vector<std::string> set(const std::vector<UnitProp>& props) = 0;
};

/// The real setter: runs the companion `path` (vfork + execve, no argument, empty environment),
/// writes UnitProp::line()s to its stdin and reads one "ok" / "error REASON" line each. A
/// companion that cannot be run or answers short fails every property with the reason.
class HelperSetter : public UnitSetter {
public:
    explicit HelperSetter(std::string path) : path_(std::move(path)) {}
    std::vector<std::string> set(const std::vector<UnitProp>& props) override;
    /// Wall time of the last set() in µs (the extra cost per event).
    long last_us = 0;

private:
    std::string path_;
};

/// How apply_plan treats the systemd driver. `setter` null or `off` non-empty: the properties are
/// not set, and each write that has one says "skipped: <off>".
struct SystemdSink {
    UnitSetter* setter = nullptr;
    std::string off;  ///< why properties are not set ("" = they are)
};

/// Why properties cannot be set on this node, or "": `helper` empty (disabled), the cgroup root
/// is not /sys/fs/cgroup (scratch trees: systemd manages only the real hierarchy), systemd is
/// not running (no /run/systemd/system: sd_booted(3)), the helper is not executable.
std::string systemd_sink_off(const std::string& helper, const std::string& cgroup_root);

/// The ELF interpreter (PT_INTERP, e.g. "/lib64/ld-linux-x86-64.so.2") of executable `path`, ""
/// when it has none (static) or cannot be read: the hook's sandbox must let it be executed too
/// (the kernel opens it for execution when it runs the companion).
std::string elf_interpreter(const std::string& path);

/// For a plan on the systemd driver and cgroup v2 (Plan::driver, Plan::layout): each Planned
/// cgroup write gets Write::systemd — "applied: CPUWeight=1 on <unit>", "failed: CPUWeight=1 on
/// <unit>: <reason>", or "skipped: <reason>" (no property for the file, not a unit's cgroup,
/// `sink.off`) — after the properties are set, all in one helper run. cgroup v1 on the systemd
/// driver: each write says it is not set through systemd (not implemented). Other plans: nothing.
/// A cpu.max write of the quota alone ("20000": the kernel keeps the period) takes the period in
/// force from `kernel` (the cgroup's cpu.max; 100000 when unreadable, and the write's text says
/// so), so that the properties give systemd the same quota and period.
void set_systemd_properties(Plan& plan, const SystemdSink& sink, Kernel* kernel = nullptr);

}  // namespace nriqos
