// Stage 5 — sinks: the cgroupfs writer (applies a Plan through Kernel) and the JSON printers
// (NRI v0.1 Result, nri-eval result, explain).
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "adjust.hpp"
#include "kernel.hpp"

namespace nriqos {

/// Apply the plan's Planned writes, step by step (Plan::steps; see Step for runc's orders and
/// retries). A knob file absent from an existing directory (the kernel does not provide it)
/// becomes Skipped; an absent cgroup directory, process or resctrl group, and any other error,
/// Failed. Each write's `seq` records the order it was written in. Never throws; every write is
/// attempted at least once.
void apply_plan(Plan& plan, Kernel& kernel);

/// Summaries for Result metadata: "cpu.shares=2 pod:cpu.idle=1" style, one line each. The plan's
/// `refused` knobs count as failed, its `skipped` (not applicable) knobs as skipped.
struct Summary {
    std::string applied, skipped, failed;
    int n_applied = 0, n_skipped = 0, n_failed = 0;
};
Summary summarize(const Plan& plan);

/// The JSON list of writes (knob, scope, file, value, status, reason, note, seq), for the
/// Result's "writes" key and explain.
nlohmann::json writes_json(const Plan& plan);

/// Serialize a Result object for containerd: metadata values are forced to strings (containerd
/// decodes metadata into map[string]string; anything else breaks every container start).
std::string dump_result(nlohmann::json result);

}  // namespace nriqos
