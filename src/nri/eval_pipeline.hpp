// The relay's in-process evaluator: nri-qos's own pipeline (src/pipeline.*) run inside a forked
// spare evaluator process (evaluator.hpp, fork mode), the same work `nri-qos nri-eval` does for
// one event, minus the exec.
#pragma once

#include <string>
#include <vector>

#include "nri/evaluator.hpp"
#include "event/pipeline.hpp"

namespace nriqos::nri {

/// Apply plugin-config child flags (as RelayOptions' config mapping produces them:
/// "--policy" FILE, "--cgroup-root" DIR, "--cgroup-layout" auto|v1|hybrid|v2, "--proc-root",
/// "--resctrl-root", "--sysfs-root", "--kubelet-cpu-state", "--state-dir", "--cache-dir" DIR, "--last-good-dir" DIR,
/// "--debug") to `o` (without "--last-good-dir", pipeline.hpp last_good_dir_of decides). Returns
/// "" or why a flag was refused (that flag is skipped, the others are applied).
std::string apply_eval_flags(nriqos::Options& o, const std::vector<std::string>& flags);

/// The evaluator of the real binary. prepare(): apply the flags to a copy of `base`, then
/// install the sandbox (src/os/sandbox.hpp install_sandbox: seccomp allow-list + Landlock write
/// roots) unless NRI_QOS_NO_SANDBOX is set. evaluate(budget): arm the self-imposed deadline
/// (pipeline.hpp arm_deadline, NriEval), read the event from stdin, run the pipeline (which loads
/// the policy now: the file's current contents, through the compiled cache, and narrows the
/// sandbox's procfs access to /proc/<pid>), write the answer to stdout and end it (EOF) as soon as
/// it is final — before the event's records, which the process writes afterwards while the relay
/// already replies (pipeline.hpp Options::deliver, docs/native-nri.md "Timeline").
InProcessEval pipeline_evaluator(const nriqos::Options& base);

}  // namespace nriqos::nri
