// Replay of a container's last request (kept in the state dir by the hook, publish.hpp) with the
// current policy: what `status` compares with the kernel, what `reconcile` writes back, and what
// `explain --container` shows with a rule trace and the percentage calculations.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "event/adjust.hpp"
#include "event/classify.hpp"
#include "facts/facts.hpp"
#include "policy/policy.hpp"
#include "model/request.hpp"
#include "records/state.hpp"

namespace nriqos {

/// One record of <state_dir>/last/<sandbox>/<id>.json (written by publish.cpp make_last_request).
struct LastRequest {
    std::string sandbox_dir, file_id;  ///< where it is stored
    std::string time, source, event, id, sandbox_id, ns, pod, container, cls, rule, outcome;
    /// Which evaluator of the native relay served that event: "one-shot", "resident",
    /// "synchronize-pass" (record.hpp EventRecord::evaluator); "" for the others.
    std::string evaluator;
    bool sandbox = false;
    std::string policy, cgroup_root, proc_root, resctrl_root, layout;  ///< options of that event
    nlohmann::json writes;  ///< the Result's writes at that event
    std::string request;  ///< the request document ("" when it was too large)
};

/// Parse a stored record; nullopt when it is not one of ours (corrupt, foreign, wrong version).
std::optional<LastRequest> parse_last(const StateDir::LastFile& f);

/// All stored records, parsed (unparseable ones are skipped).
std::vector<LastRequest> load_last(StateDir& st);

/// Records matching `query`: a container/sandbox id or unique id prefix (≥ 4 characters), a pod
/// name, or "namespace/pod". Containers before sandboxes.
std::vector<LastRequest> find_last(const std::vector<LastRequest>& all, const std::string& query);

/// Paths and layout to use for a record: the command line's when given, else the record's.
struct ReplayRoots {
    std::optional<std::string> policy, cgroup_root, proc_root, resctrl_root;
    std::optional<Layout> layout;
    std::string cache_dir;
    std::string sysfs_root = "/sys";  ///< NUMA topology (fact knobs numa.*), block devices
    std::string dev_root = "/dev";  ///< device nodes of blkio limits (rubik.blkio_limit)
    /// kubelet's CPU manager checkpoint (numa.hpp held CPUs; "" none)
    std::string kubelet_cpu_state = "/var/lib/kubelet/cpu_manager_state";
};

/// What the current policy wants for a recorded container, as direct kernel writes (the
/// reconcile view: a v0.1 create of the container, or the pod knobs of a sandbox), planned but
/// not applied. `error` is set (and the plan empty) when the request cannot be replayed.
struct Desired {
    Request req;
    Plan plan;
    bool have_plan = false;
    bool fail_closed = false;  ///< the class (or, without a class, the policy) fails closed
    std::string error;
    std::string cgroup_root, proc_root, resctrl_root;
    std::shared_ptr<const ClassDef> resolved_cls;  ///< plan.decision.cls: the class with its facts resolved
};

/// Build the desired plan of `rec` with `policy` (already loaded by the caller). Merges the
/// sandbox memo like the hook does. Reads the kernel only for plan inputs (cpu.max on v2).
Desired desired_plan(const LastRequest& rec, const Policy& policy, const ReplayRoots& roots, StateDir& state);

/// The fact stage's input (facts.hpp FactInput) for the plan input `pin` (its request, policy,
/// kube QoS, cgroup paths, layout and kernel): the one construction used by an event
/// (pipeline.cpp run_pipeline) and a replay (desired_plan: status, reconcile, explain
/// --container), so that both compute facts from the same inputs. `cgroup_root`, `sysfs_root`,
/// `dev_root`, `kubelet_cpu_state`: the roots the fact readers look at (FactInput); `dry_run`:
/// compute only, record nothing, take no lock. FactInput::not_passed stays unset (a plain
/// absence): the event sets it for a v0.1 request.
FactInput fact_input(const PlanInput& pin, const std::string& cgroup_root, const std::string& sysfs_root, const std::string& dev_root,
                     const std::string& kubelet_cpu_state, bool dry_run);

/// A container request completed from its sandbox memo (records/state.hpp Memo), as an event and
/// a replay do before classifying: the pod annotations the request lacks (its own win), and the
/// pod namespace and name when it has none.
void merge_memo(Request& r, const Memo& m);

/// settings.cpu_weight_formula = "auto", the pod-level evidence (adjust.hpp decide_weight_formula): the
/// (OCI shares, cpu.weight) pairs of the other sandboxes/containers of `r`'s pod recorded in the
/// state dir — their stored request's shares and their cgroup's cpu.weight now. Left out: `r`
/// itself, records without shares or cgroupsPath, and those whose recorded writes include a
/// cpu.weight (nri-qos rewrote it: not the runtime's). A BestEffort pod gives none (kubelet gives
/// each of its containers shares 2, which both formulas map to 1). At most 32 records are read.
std::vector<WeightPair> sibling_weight_pairs(StateDir& state, const Request& r, KubeQos kube_qos, Kernel& kernel);

/// The runtime probe's cache in the state dir (detect.hpp), or nullopt.
std::optional<RuntimeFormula> cached_runtime_formula(StateDir& state);

/// True when the kernel's `actual` content satisfies the written `wanted` value for `file`
/// (whitespace trimmed; memory limits rounded to the page size by the kernel; "-1" ≡ unlimited
/// on v1; cpu.max "Q" ≡ "Q <period>"; cpuset lists compared as sets; resctrl tasks: pid listed;
/// blkio.throttle.*_device and io.max: the written device's line holds the written limit).
bool kernel_value_matches(const std::string& file, const std::string& wanted, const std::string& actual);

/// explain --container: the rule trace (every rule until the match: which, line, why not) and,
/// after build_plan, the percentage calculations. Text lines are appended to `text`, JSON to `j`.
void explain_trace(const Policy& p, const Facts& f, const Decision& d, std::string& text, nlohmann::json& j);
void explain_calculations(const Policy& p, const Decision& d, const Request& r, const Plan& plan, std::string& text, nlohmann::json& j);

}  // namespace nriqos
