// `nri-qos explain --pod FILE`: preview what the policy does to a whole pod before any node runs
// it (issue #21 §5). The manifest (pod_manifest.hpp) is laid out as kubelet and containerd would
// lay it out; the pod's events then go through the same pipeline as `explain` — RunPodSandbox,
// and CreateContainer + StartContainer of each container (init containers first) — against a
// scratch node made for the preview (a temporary directory, removed afterwards):
//  * a cgroup tree of the node's layout holding the pod cgroup with kubelet's values
//    (ResourceConfigForPod), the sandbox's, and each container's cgroup as runc creates it from
//    the OCI resources with nri-qos's CreateContainer adjustment applied (as the runtime does);
//    which knob files exist is copied from the node's own kubepods cgroup (--cgroup-root), so a
//    knob the node's kernel lacks is skipped as on the node (without a kubepods cgroup to copy,
//    every knob file of the layout is taken as present, and the output says so);
//  * a procfs with each task's oom_score_adj as kubelet sets it, made-up pids;
//  * a resctrl tree with the node's group names;
//  * a state directory, so that the sandbox memo, the pod-level sums' ledger and the NUMA
//    records of one event are seen by the next (today's single-request explain computes each
//    container's pod sum alone).
// Facts read the node's sysfs (--sysfs-root) and kubelet's CPU manager checkpoint read only.
// The output is every event's class, rule, writes, skips and refusals, then the END state: each
// knob file of the pod cgroup and of every container cgroup with its final value and who set it
// (kubelet/runc, or nri-qos at which event).
#pragma once

#include <optional>
#include <string>

#include "model/model.hpp"
#include "event/pipeline.hpp"
#include "cli/pod_manifest.hpp"

namespace nriqos {

struct PodPreviewOptions {
    /// Policy, cache, node roots to copy and read (cgroup_root: the node's cgroup tree, only
    /// read; sysfs_root, kubelet_cpu_state, resctrl_root: read), layout (nullopt: the node's).
    Options eval;
    std::string manifest = "-";  ///< file, or "-" for stdin
    std::optional<CgroupDriver> driver;  ///< nullopt: the node's (node_cgroup_driver)
    bool json = false;
};

/// The kubelet cgroup driver of the node: from its kubepods cgroup (kubepods.slice → systemd,
/// kubepods → cgroupfs, under <root> on v2, <root>/cpu on v1), else `cgroupDriver:` of kubelet's
/// config file `kubelet_config` (/var/lib/kubelet/config.yaml), else cgroupfs (kubelet's flag
/// default). `why` says which.
CgroupDriver node_cgroup_driver(const std::string& cgroup_root, Layout layout, const std::string& kubelet_config, std::string& why);

/// The preview itself, in this process, with `scratch` an existing empty directory it may fill
/// (the unit tests call it directly). `manifest_text` is the manifest. Returns the text (or JSON)
/// to print; `code` 0, or 1 when an event ended with an error (a fail-closed refusal), 2 on a bad
/// manifest (the text is then the one-line error).
std::string preview_pod(const std::string& manifest_text, const PodPreviewOptions& o, const std::string& scratch, int& code);

/// `nri-qos explain --pod`: makes the scratch directory, runs preview_pod in a sandboxed child
/// (seccomp + Landlock: writes beneath the scratch directory and the policy cache only; the
/// manifest is parsed there), prints its output, removes the scratch directory. Returns the
/// exit status.
int explain_pod(const PodPreviewOptions& o);

}  // namespace nriqos
