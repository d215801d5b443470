// Stage 5 — sinks: the cgroupfs writer (applies a Plan through Kernel) and the JSON printers
// (NRI v0.1 Result, nri-eval result, explain).
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "event/adjust.hpp"
#include "os/json_print.hpp"
#include "os/kernel.hpp"
#include "event/systemd_unit.hpp"

namespace nriqos {

/// Apply the plan's Planned writes, step by step (Plan::steps; see Step for runc's orders and
/// retries). A knob file absent from an existing directory (the kernel does not provide it)
/// becomes Skipped; an absent cgroup directory, process or resctrl group, and any other error,
/// Failed. Each write's `seq` records the order it was written in. Never throws; every Planned
/// write is attempted at least once, except a write with Write::needs_cpuset (a quota lift paid
/// for by a cpuset): it is made only after the container's cpuset.cpus write (made first if the
/// plan has one) succeeded and the kernel reads the asked cpuset back; else it is Failed with
/// "cpuset not applied: quota kept (...)" and the quota stays. Writes in another state are left
/// alone, and a step runs over its Planned writes only (reconcile marks the files already in
/// force Applied first; a MemorySwap step with one write left is a single write). The one writer
/// of kernel files: the hook (invoke, nri-eval) and reconcile.
/// With `systemd` (the systemd cgroup driver on cgroup v2), the writes that have a unit property
/// are first set as properties of the scope/slice (systemd_unit.hpp set_systemd_properties:
/// runc's order, properties then files); each says so in Write::systemd. The file writes happen
/// whatever the property's outcome.
void apply_plan(Plan& plan, Kernel& kernel, const SystemdSink* systemd = nullptr);

/// Summaries for Result metadata: "cpu.shares=2 pod:cpu.idle=1" style, one line each. The plan's
/// `refused` knobs count as failed, its `skipped` (not applicable) knobs as skipped.
struct Summary {
    std::string applied, skipped, failed;
    int n_applied = 0, n_skipped = 0, n_failed = 0;
};
Summary summarize(const Plan& plan);

/// The writes' unit-property outcomes (Write::systemd) for the Result metadata "systemd":
/// "applied: cpu.weight pod:cpu.max; failed: memory.max (MemoryMax=… (why) on <unit>); skipped:
/// cpu.max.burst (why)" — for the Result and the event record (which has no writes). "" when no
/// write has one (cgroupfs driver).
std::string systemd_summary(const Plan& plan);

/// The JSON list of writes (knob, scope, file, value, status, reason, note, seq), for the
/// Result's "writes" key and explain.
nlohmann::json writes_json(const Plan& plan);

/// Serialize a Result object for containerd: metadata values are forced to strings (containerd
/// decodes metadata into map[string]string; anything else breaks every container start).
std::string dump_result(nlohmann::json result);

/// The NRI v0.1 Result — {"adjustment", "error", "metadata", "plugin", "version", "writes"};
/// without a plan only error, metadata, plugin, version — printed member by member, without
/// building a DOM of it. Byte-identical to dump_result() of the same object (keys in the sorted
/// order of the DOM; values, escaping and invalid-UTF-8 replacement by nlohmann's serializer;
/// metadata values forced to strings), followed by a newline.
std::string dump_v01_result(const std::string& version, const std::string& error, const nlohmann::json& metadata, const Plan* plan);

/// The nri-eval result — {"adjustment", "error", "metadata", "on_child_failure", "update",
/// "writes" (with a plan)} — the same way as dump_v01_result. Without a plan, adjustment and
/// update are null.
std::string dump_eval_result(const std::string& error, bool fail_closed, const nlohmann::json& metadata, const Plan* plan);

/// Appends plan.writes as the Result's "writes" array (the members writes_json() gives, in the same
/// order and bytes) to `p`: for the DOM-free printers (the Result, the last request).
void print_writes(JsonPrinter& p, const Plan& plan);

}  // namespace nriqos
