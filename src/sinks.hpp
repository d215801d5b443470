// Stage 5 — sinks: the cgroupfs writer (applies a Plan through Kernel) and the JSON printers
// (NRI v0.1 Result, nri-eval result, explain).
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "adjust.hpp"
#include "kernel.hpp"

namespace nriqos {

/// Apply every Planned write in order. A missing file (kernel without the knob, cgroup not there)
/// becomes Skipped; any other error Failed. Never throws; all writes are attempted.
void apply_plan(Plan& plan, Kernel& kernel);

/// Summaries for Result metadata: "cpu.shares=2 pod:cpu.idle=1" style, one line each.
struct Summary {
    std::string applied, skipped, failed;
    int n_applied = 0, n_skipped = 0, n_failed = 0;
};
Summary summarize(const Plan& plan);

/// The JSON list of writes (file, value, status, reason), for the Result's "writes" key and explain.
nlohmann::json writes_json(const Plan& plan);

/// Serialize a Result object for containerd: metadata values are forced to strings (containerd
/// decodes metadata into map[string]string; anything else breaks every container start).
std::string dump_result(nlohmann::json result);

}  // namespace nriqos
