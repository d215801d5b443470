// resctrl groups the policy declares ([resctrl.<name>], policy.hpp ResctrlGroupDef): their
// schemata computed from the resctrl mount's info files, the group created when missing, and
// the groups nri-qos made removed again by `reconcile` once no class uses them.
//
// The kernel's interface (Documentation/arch/x86/resctrl.rst): the mount (default
// /sys/fs/resctrl, --resctrl-root) holds info/L3/{cbm_mask,min_cbm_bits,num_closids},
// info/MB/{bandwidth_gran,min_bandwidth,num_closids}, the default group's `schemata` (one line
// per resource: "L3:<cache id>=<hex mask>;...", "MB:<domain id>=<percent>;...") and `tasks`.
// mkdir of a directory there creates a group (its schemata, tasks... appear at once); each group
// takes a CLOSID, and mkdir fails with ENOSPC when all num_closids are taken (the default group
// holds one). The documented lock between resctrl users is flock(2) on the mount's root
// directory ("Examples for RDT allocation usage", "Locking"), LOCK_EX to change groups.
//
// Trust: group declarations come from the operator's policy only; a pod can at most pick a
// group through a fact that may only lower its cache (rubik.cache_limit, facts.hpp).
#pragma once

#include <functional>
#include <set>
#include <string>
#include <vector>

#include "event/adjust.hpp"
#include "policy/policy.hpp"

namespace nriqos {

/// The schemata nri-qos writes for `g` on the resctrl mount at `root` (only the lines `g`
/// declares, '\n'-terminated). Percentages are converted with the mount's info files and the
/// cache ids / domains of the default group's schemata lines (ResctrlGroupDef). Sets `why` and
/// returns "" when it cannot be computed (no such resource on this node, unreadable info). Each
/// conversion is described in `notes` ("L3 30% of 20 ways (cbm_mask fffff) = 6 ways: 3f").
std::string resctrl_schemata(const ResctrlGroupDef& g, const std::string& root, std::string& why, std::vector<std::string>* notes = nullptr);

/// What ensure_resctrl_group did.
struct GroupOutcome {
    enum Status { Ready, Skipped, Failed } status = Ready;
    std::string note;  ///< Ready: "created with schemata ...", "exists (created by nri-qos)", ...;
        ///< Skipped/Failed: the one-line reason
};

/// Make group `g` ready on the mount at `root`, under flock(LOCK_EX) of the mount's root
/// directory (bounded wait: 500 ms): an existing group nri-qos created (listed in
/// <state_dir>/resctrl-groups) or that the policy lets it manage (g.manage) gets its schemata
/// rewritten when it differs; an existing group of someone else is joined as it is. A missing
/// group is created: schemata computed first, then the free CLOSIDs checked (the groups present
/// + the default group against the smallest info/<resource>/num_closids: the kernel's ENOSPC
/// foreseen, so a tree without a kernel behind it reports it the same way), the name recorded in
/// the state dir, mkdir (ENOSPC: "no free CLOSID"), the schemata written; if a step fails the
/// group is removed again and the record dropped (never half made). Skipped when there is no
/// resctrl mount at `root` (no `schemata` file). `dry_run` (explain): computes and checks, changes
/// nothing. On a directory that is not a resctrl filesystem (a test's scratch tree: statfs magic
/// differs) the files the kernel would create with the group (schemata, tasks) are created.
GroupOutcome ensure_resctrl_group(const ResctrlGroupDef& g, const std::string& root, const std::string& state_dir, bool dry_run);

/// The resctrl mount's lock — flock(LOCK_EX) of its root directory — held while this object
/// holds it (ensure_plan_groups returns it), released by release() or the destructor.
///
/// Lock order (no cycle, and every wait for this lock is bounded by 500 ms): an event takes the
/// fact lock (<state>/facts/lock, facts/fact_state.hpp) first, then this lock, and holds both
/// through its writes; `reconcile` takes this lock alone — per recorded container from its
/// groups' check through that container's writes (replay takes no fact lock), then for the
/// cleanup (cleanup_resctrl_groups) — and never waits for the fact lock while holding it.
class ResctrlLock {
public:
    ResctrlLock() = default;
    ~ResctrlLock() { release(); }
    ResctrlLock(const ResctrlLock&) = delete;
    ResctrlLock& operator=(const ResctrlLock&) = delete;
    ResctrlLock(ResctrlLock&& o) noexcept : fd_(o.fd_) { o.fd_ = -1; }
    ResctrlLock& operator=(ResctrlLock&& o) noexcept {
        if (this != &o) {
            release();
            fd_ = o.fd_;
            o.fd_ = -1;
        }
        return *this;
    }
    bool held() const { return fd_ >= 0; }
    /// Unlock now (closes the locked directory fd); no-op when not held (inline: every event
    /// passes here, most without a lock).
    void release() {
        if (fd_ >= 0) unlock();
    }

private:
    explicit ResctrlLock(int fd) : fd_(fd) {}
    void unlock();
    int fd_ = -1;  ///< the mount's root directory, flock(LOCK_EX)ed; -1: not held
    friend ResctrlLock ensure_plan_groups(Plan&, const Policy&, const std::string&, const std::string&, bool);
};

/// For each resctrl_group of `plan` (a direct `tasks` write, or the NRI adjustment's rdt_class)
/// naming a group `policy` declares: ensure_resctrl_group, all under one lock of the mount. A
/// group Skipped or Failed takes its knob with it: the write is marked Skipped/Failed with the
/// reason (so apply_plan leaves it), the adjustment's rdt_class removed and the knob listed in
/// plan.skipped / plan.refused — a container is never handed to a group that is not there.
/// Ready notes go on the write's note.
/// Returns the mount's lock, still held (not dry_run) when a `tasks` write of the plan joins a
/// group made ready here; the caller keeps it until apply_plan has written that `tasks` file: a
/// `reconcile` cleanup (cleanup_resctrl_groups, which takes the same lock) can then never rmdir
/// the group between its check and the write (issue #30 item 6). Otherwise not held: the lock
/// ended with the check (and a caller that drops the result releases it at once). The NRI
/// adjustment's rdt_class is joined by the runtime after the answer, outside any lock of ours:
/// there the cleanup's own rule protects the group (it never removes a group a policy in use names).
ResctrlLock ensure_plan_groups(Plan& plan, const Policy& policy, const std::string& root, const std::string& state_dir, bool dry_run);

/// The declared groups some class of `policy` can put a container in: named by a literal
/// resctrl_group, or one of the rubik_* groups when a class uses the rubik.cache_limit fact.
std::set<std::string> resctrl_groups_in_use(const Policy& policy);

/// `reconcile`: remove the groups nri-qos created (<state_dir>/resctrl-groups) that `in_use`
/// does not name, when their `tasks` is empty (a group with tasks is kept and reported); a group
/// gone already is dropped from the record. Under the mount's lock (ResctrlLock; 500 ms at
/// most, else nothing is removed this pass and that is one failure): an event between its
/// groups' check and its `tasks` write holds it, so its group is never removed under it.
/// `in_use` is what the caller's policies named when it read them; `still_current` (when set;
/// not on a dry run) is asked under the lock whether they are still the files in force: false
/// (a policy edited since, which may name a group an event has just made ready for the runtime
/// to join after its answer — native NRI's rdt_class) removes nothing ("kept", no failure): the
/// next pass decides with the new policy. Appends one line per group to `out`. Returns the
/// number of failures (rmdir refused, unreadable tasks).
int cleanup_resctrl_groups(const std::set<std::string>& in_use, const std::string& root, const std::string& state_dir, bool dry_run, std::string& out,
                           const std::function<bool()>& still_current = {});

/// The names listed in <state_dir>/resctrl-groups (groups nri-qos created), sorted.
std::set<std::string> created_resctrl_groups(const std::string& state_dir);

}  // namespace nriqos
