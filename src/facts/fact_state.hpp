// What the fact readers keep in the state directory (default /run/nri-qos) between events, all
// below <state>/facts/ (created only for pods whose class uses such a fact):
//  * lock           — one flock(2) serialising the read-choose-record steps of concurrent hooks
//                     (NUMA placement, pod-level sums); released when the process exits;
//  * numa/<id>.json — the NUMA placement of container <id> (numa.hpp), or the cpuset an annotation
//                     pinned it to (mode "pin", or "pin-shared" for an untrusted one), kept only
//                     once the trust rule accepted the value and its write landed (issue #30 §2:
//                     the pipeline's keep_fact_records), so that its later events
//                     (StartContainer, UpdateContainer) and concurrent starts see it before the
//                     runtime has written cpuset.cpus;
//  * ledger/<sandbox-id>/<id>.json — per-container contributions to pod-level sums (the CFS
//                     burst of each container, summed into the pod cgroup's burst).
// Everything is small JSON written atomically (temp file + rename(2)) beneath the state
// directory through open_beneath (no symlinks, no escapes); a corrupt or foreign file is ignored
// and reported, never trusted. Sizes are bounded (4 KiB per file, 4096 files per directory).
// Additive to state.hpp (the sandbox memo): separate files, separate directories.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace nriqos {

/// A record younger than this (seconds) is kept even when its container's cgroup does not exist
/// (yet): native NRI records at CreateContainer, before runc creates the cgroup.
constexpr int64_t kFactRecordGraceSeconds = 60;

/// One NUMA placement record.
struct NumaRecord {
    std::string container_id, sandbox_id;
    std::string pod_dir;  ///< pod cgroup directory (relative, as in CgroupPaths::pod)
    std::string ctr_dir;  ///< the container's cgroup directory (CgroupPaths::container)
    /// "exclusive", "bound", "shared", "pin" (an annotation cpuset from a trusted source: koord-
    /// scheduler's allocation, held exclusively) or "pin-shared" (an untrusted annotation cpuset
    /// the trust rule let through because it raises nothing: the container's own pin, never a
    /// reservation against other pods). numa.hpp check_pinned_cpuset, pin_record.
    std::string mode;
    unsigned node = 0;  ///< NUMA node id (the first one)
    std::string nodes;  ///< all NUMA nodes, a list ("0-1"); "" = just `node` (records before multi-node placements)
    std::string cpus;  ///< cpuset list
    int64_t time = 0;  ///< unix seconds when recorded

    /// Whether the record holds its CPUs against other pods' placements and pins: every mode but
    /// "shared" (locality) and "pin-shared" (an untrusted pin).
    bool reserves() const { return mode != "shared" && mode != "pin-shared"; }
};

/// Access to the fact state beneath one state directory. Not thread-safe; one per process.
class FactState {
public:
    explicit FactState(std::string state_dir);
    ~FactState();
    FactState(const FactState&) = delete;
    FactState& operator=(const FactState&) = delete;

    /// Take the exclusive lock <state>/facts/lock (creating the directory and file), blocking
    /// until it is free; no-op when already held. The hook's deadline bounds the wait. Returns ""
    /// or a one-line error (the caller treats that as a failed fact).
    std::string lock();
    bool locked() const { return lock_fd_ >= 0; }

    /// All NUMA records (unreadable or corrupt ones are skipped and named in `problems`).
    std::vector<NumaRecord> numa_records(std::vector<std::string>* problems = nullptr);
    std::optional<NumaRecord> numa_record(const std::string& container_id);
    std::string put_numa(const NumaRecord& r);
    std::string drop_numa(const std::string& container_id);

    /// One container's entry in its pod's ledger.
    struct LedgerEntry {
        std::map<std::string, int64_t> kv;  ///< e.g. {"cpu_burst_us": 200000}
        std::string ctr_dir;  ///< the container's cgroup directory (relative)
        int64_t time = 0;  ///< unix seconds when written
    };
    /// Ledger of one pod: container id → entry. Native NRI does not report container removal
    /// (the relay subscribes to pod events and container create/start/update only), so readers
    /// drop entries whose container cgroup is gone and that are older than
    /// kFactRecordGraceSeconds (facts_volcano.cpp burst_pod); the pod's end drops them all.
    std::map<std::string, LedgerEntry> ledger(const std::string& sandbox_id);
    std::string put_ledger(const std::string& sandbox_id, const std::string& container_id, const std::map<std::string, int64_t>& kv,
                           const std::string& ctr_dir);
    std::string drop_ledger(const std::string& sandbox_id, const std::string& container_id);
    /// Whether anything is kept for a container / a pod (no lock needed: read-only probes, so
    /// that pods without such facts never take the lock).
    bool has_container(const std::string& sandbox_id, const std::string& container_id);
    bool has_pod(const std::string& sandbox_id);
    /// Remove everything kept for a pod (its ledger directory and its NUMA records).
    std::string drop_pod(const std::string& sandbox_id);

private:
    int dir_fd(bool create);
    int sub_fd(const std::string& rel, bool create);
    std::string write_file(int dfd, const std::string& name, const std::string& text);
    std::optional<std::string> read_file(int dfd, const std::string& name);
    std::vector<std::string> list(int dfd, const char* suffix);

    std::string dir_;
    int dir_fd_ = -1;
    int lock_fd_ = -1;
    bool absent_ = false;  ///< <state>/facts did not exist when probed (and nothing created it since)
};

}  // namespace nriqos
