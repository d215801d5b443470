// Mapping between NRI protobuf objects and "NRI Go JSON" (the JSON Go's encoding/json prints
// for NRI's generated types), the format the relay uses toward its one-shot child
// (`nri-qos nri-eval`, see docs/native-nri.md).
//
// Rules (NRI Go JSON):
//  * keys are the snake_case proto field names (`pod_sandbox_id`, `oom_score_adj`, ...);
//  * Optional* wrappers (OptionalInt64, OptionalString, ...) are objects {"value": X};
//  * 64-bit integers are JSON numbers;
//  * like Go's `omitempty`, empty strings, zero scalars, empty maps/lists and absent messages are
//    left out when WRITING, with two deliberate exceptions that keep the meaning explicit:
//    a wrapper always carries "value" (a present wrapper with 0 means "set to 0"), and
//    LinuxDeviceCgroup.allow / HugepageLimit fields / LinuxPids.limit are always written.
// When READING (child stdout): a missing "value" in a wrapper means 0 (Go omitempty), JSON null
// means "absent", 64-bit integers may also be decimal strings ("512"), numbers must be integral
// and in range, and every unknown key or wrong type is an error naming the JSON path.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "nri/nri.pb.h"

namespace nri {

namespace pb = ::nri::pkg::api::v1alpha1;

/// PodSandbox → JSON object: id, name, uid, namespace, labels, annotations, runtime_handler,
/// linux{pod_overhead, pod_resources, cgroup_parent, cgroups_path, namespaces, resources},
/// pid, ips.
nlohmann::json pod_to_json(const pb::PodSandbox& pod);

/// Container → JSON object: id, pod_sandbox_id, name, state (enum number, 0 omitted), labels,
/// annotations, linux{namespaces, resources, oom_score_adj, cgroups_path}, pid.
nlohmann::json container_to_json(const pb::Container& ctr);

/// OCI-style LinuxResources → JSON object: memory{limit, reservation, swap, kernel, kernel_tcp,
/// swappiness, disable_oom_killer, use_hierarchy}, cpu{shares, quota, period, realtime_runtime,
/// realtime_period, cpus, mems}, hugepage_limits[{page_size, limit}], blockio_class, rdt_class,
/// unified{file: value}, devices[{allow, type, major, minor, access}], pids{limit}.
nlohmann::json resources_to_json(const pb::LinuxResources& res);

/// ContainerAdjustment → JSON object: annotations, linux{resources, oom_score_adj}.
nlohmann::json adjustment_to_json(const pb::ContainerAdjustment& adj);

/// JSON (child's "update" object) → LinuxResources. `path` prefixes error messages.
/// Returns false and sets `err` to a one-line message ("update.cpu.shares.value: expected an
/// unsigned integer, got string \"x\"") on a wrong type, out-of-range number or unknown key;
/// `out` is then unspecified. JSON null yields an empty message. Never throws.
bool resources_from_json(const nlohmann::json& j, pb::LinuxResources& out, std::string& err,
                         const std::string& path = "update");

/// JSON (child's "adjustment" object) → ContainerAdjustment. Accepted keys: annotations
/// {string: string}, linux{resources (as resources_from_json), oom_score_adj {"value": N}}.
/// Same error contract as resources_from_json. Never throws.
bool adjustment_from_json(const nlohmann::json& j, pb::ContainerAdjustment& out,
                          std::string& err, const std::string& path = "adjustment");

}  // namespace nri
