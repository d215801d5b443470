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

namespace nriqos::nri {

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

/// ContainerAdjustment → JSON object: annotations, linux{resources, oom_score_adj, io_priority,
/// scheduler, memory_policy} (enums by their NRI names).
nlohmann::json adjustment_to_json(const pb::ContainerAdjustment& adj);

/// The child-contract event document (docs/native-nri.md "Child contract") as a DOM:
/// {"container": container_to_json(*ctr) (absent when `ctr` is null), "event": event,
///  "linux_resources": resources_to_json(*linux_resources) (absent when null),
///  "pod": pod_to_json(pod), "runtime": {"name", "version"} (always, also when empty),
///  "unadjusted": true (only when `unadjusted`: model/request.hpp Request::unadjusted)}.
/// The reference for print_event (tests, fuzzer); the relay prints with print_event.
nlohmann::json event_to_json(const std::string& event, const std::string& runtime_name, const std::string& runtime_version, const pb::PodSandbox& pod,
                             const pb::Container* ctr, const pb::LinuxResources* linux_resources, bool unadjusted = false);

/// Appends the text of event_to_json(...) to `out`, byte for byte what its dump() prints
/// (compact, keys sorted bytewise as nlohmann::json's std::map orders them, map entries
/// sorted the same way, non-ASCII UTF-8 as is), without building the DOM: member by member
/// through src/os/json_print.hpp JsonPrinter (one serializer, plain-ASCII strings appended as
/// they are). The relay's per-event input to its evaluator (Relay::prepare). Invalid UTF-8
/// cannot arrive here from the wire (protobuf rejects it in proto3 string fields while
/// parsing the request); given anyway it is replaced by U+FFFD where dump() would throw.
/// Never throws except std::bad_alloc.
void print_event(std::string& out, const std::string& event, const std::string& runtime_name, const std::string& runtime_version,
                 const pb::PodSandbox& pod, const pb::Container* ctr, const pb::LinuxResources* linux_resources, bool unadjusted = false);

/// The evaluator's answer (docs/native-nri.md "Child contract", stdout) as a DOM holding only
/// the top-level members the relay reads: "adjustment", "deadline", "error",
/// "on_child_failure", "update". The others ("metadata", "writes": for the records, which the
/// evaluator writes itself) are read by nlohmann's SAX parser and dropped without building a
/// value. Otherwise what json::parse(text, nullptr, false) returns: the same values for those
/// members (a repeated key: the last one), a non-object top-level value as parsed, and a
/// discarded value (is_discarded()) for text that is not exactly one JSON value (trailing
/// whitespace allowed). Never throws except std::bad_alloc.
nlohmann::json parse_answer(const std::string& text);

/// JSON (child's "update" object) → LinuxResources. `path` prefixes error messages.
/// Returns false and sets `err` to a one-line message ("update.cpu.shares.value: expected an
/// unsigned integer, got string \"x\"") on a wrong type, out-of-range number or unknown key;
/// `out` is then unspecified. JSON null yields an empty message. Never throws.
bool resources_from_json(const nlohmann::json& j, pb::LinuxResources& out, std::string& err, const std::string& path = "update");

/// JSON (child's "adjustment" object) → ContainerAdjustment. Accepted keys: annotations
/// {string: string}, linux{resources (as resources_from_json), oom_score_adj {"value": N},
/// io_priority {class: "IOPRIO_CLASS_RT|BE|IDLE" (or its number; required), priority 0..7},
/// scheduler {policy: "SCHED_OTHER|BATCH|IDLE" (or its number; required), nice -20..19,
/// priority 0}, memory_policy {mode: "MPOL_*" (or its number), nodes: "" or a list "0-1,3"}}
/// (NRI v0.10/v0.11/v0.12 LinuxContainerAdjustment fields 5, 10, 12).
/// Same error contract as resources_from_json. Never throws.
bool adjustment_from_json(const nlohmann::json& j, pb::ContainerAdjustment& out, std::string& err, const std::string& path = "adjustment");

}  // namespace nriqos::nri
