// Native NRI relay: the child contract of one event (docs/native-nri.md "Child contract"). The
// NRI request decoded into the evaluator's input (Relay::prepare), the evaluator's answer turned
// into the NRI reply (Relay::finish_event), and the containers a CreateContainer adjustment was
// given, remembered until they start: a RemoveContainer before that means the runtime undid the
// create, most often a conflict with another NRI plugin (Relay::on_removed).
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "nri/evaluator.hpp"
#include "nri/failure_record.hpp"
#include "nri/nri.pb.h"
#include "nri/nri_json.hpp"
#include "nri/relay_internal.hpp"
#include "nri/sync.hpp"
#include "os/clock.hpp"

namespace nriqos::nri {

namespace {

using nlohmann::json;

// Child-contract event name of a StateChange event, or nullptr when not evaluated (not
// subscribed; a runtime that sends it anyway gets an empty reply).
const char* state_change_name(pb::Event e) {
    switch (e) {
        case pb::RUN_POD_SANDBOX: return "RunPodSandbox";
        case pb::REMOVE_POD_SANDBOX: return "RemovePodSandbox";
        case pb::START_CONTAINER: return "StartContainer";
        case pb::POST_UPDATE_CONTAINER: return "PostUpdateContainer";
        default: return nullptr;
    }
}

// The fields an adjustment sets, in containerd's words (containerd/nri pkg/adaptation/result.go,
// the subjects of its "both tried to set" conflicts), comma-separated; "" when it sets nothing.
std::string adjusted_fields(const pb::ContainerAdjustment& a) {
    std::string out;
    auto add = [&out](const std::string& w) { out += (out.empty() ? "" : ", ") + w; };
    for (const auto& kv : a.annotations()) add("annotation " + kv.first);
    if (a.has_linux()) {
        const pb::LinuxContainerAdjustment& l = a.linux();
        if (l.has_resources()) {
            const pb::LinuxResources& r = l.resources();
            if (r.has_memory()) {
                if (r.memory().has_limit()) add("memory limit");
                if (r.memory().has_reservation()) add("memory reservation");
                if (r.memory().has_swap()) add("memory swap limit");
            }
            if (r.has_cpu()) {
                if (r.cpu().has_shares()) add("CPU shares");
                if (r.cpu().has_quota()) add("CPU quota");
                if (r.cpu().has_period()) add("CPU period");
                if (!r.cpu().cpus().empty()) add("CPU pinning");
                if (!r.cpu().mems().empty()) add("memory pinning");
            }
            if (r.has_pids()) add("pids limit");
            if (r.has_blockio_class()) add("block I/O class");
            if (r.has_rdt_class()) add("RDT class");
            for (const auto& kv : r.unified()) add("unified resource " + kv.first);
        }
        if (l.has_oom_score_adj()) add("oom_score_adj");
        if (l.has_io_priority()) add("I/O priority");
        if (l.has_scheduler()) add("scheduling policy");
        if (l.has_memory_policy()) add("memory policy");
    }
    return out;
}

std::string snippet(const std::string& s) {
    std::string r;
    for (char c : s.substr(0, 60)) r.push_back((c >= 32 && c < 127) ? c : '.');
    if (s.size() > 60) r += "...";
    return r;
}

}  // namespace

// The Event a dedicated NRI v0.12 event RPC stands for (containerd/nri v0.12.0 pkg/api/api.proto
// service Plugin; pkg/adaptation/plugin_type.go origImplWrapper funnels the same events over
// StateChange), 0 when `method` is none of them; `with_container`: its request carries one.
// Not here: CreateContainer, UpdateContainer and UpdatePodSandbox (requests of their own, with
// replies that carry adjustments; no StateChange equivalent).
int dedicated_event(const std::string& method, bool& with_container) {
    static const struct {
        const char* method;
        int event;
        bool container;
    } kRpcs[] = {
        {"RunPodSandbox", pb::RUN_POD_SANDBOX, false},
        {"StopPodSandbox", pb::STOP_POD_SANDBOX, false},
        {"RemovePodSandbox", pb::REMOVE_POD_SANDBOX, false},
        {"PostUpdatePodSandbox", pb::POST_UPDATE_POD_SANDBOX, false},
        {"PostCreateContainer", pb::POST_CREATE_CONTAINER, true},
        {"StartContainer", pb::START_CONTAINER, true},
        {"PostStartContainer", pb::POST_START_CONTAINER, true},
        {"PostUpdateContainer", pb::POST_UPDATE_CONTAINER, true},
        {"StopContainer", pb::STOP_CONTAINER, true},
        {"RemoveContainer", pb::REMOVE_CONTAINER, true},
    };
    for (const auto& r : kRpcs) {
        if (method == r.method) {
            with_container = r.container;
            return r.event;
        }
    }
    return 0;
}

// Decode the request, build the child's stdin. Returns false when no child is needed;
// `answered` tells whether a reply was already sent.
bool Relay::prepare(Pending& p, Current& c) {
    c = Current();
    c.stream = p.stream;
    c.method = p.method;
    const pb::PodSandbox* pod = nullptr;
    const pb::LinuxResources* linux_resources = nullptr;  // "linux_resources" of the input
    const pb::Container* ctr = nullptr;
    pb::CreateContainerRequest creq;
    pb::UpdateContainerRequest ureq;
    pb::UpdatePodSandboxRequest preq;
    pb::StateChangeEvent sc;
    bool ok = true;
    bool unadjusted = false;  // a container CREATED in the Synchronize, now starting (created_at_sync_)
    if (p.method == "CreateContainer") {
        ok = creq.ParseFromString(p.payload);
        c.event = "CreateContainer";
        pod = &creq.pod();
        ctr = creq.has_container() ? &creq.container() : nullptr;
    } else if (p.method == "UpdateContainer") {
        ok = ureq.ParseFromString(p.payload);
        c.event = "UpdateContainer";
        pod = &ureq.pod();
        ctr = ureq.has_container() ? &ureq.container() : nullptr;
        // The update as containerd passes it (zero wrappers: unchanged); the evaluator lays it over
        // the container's current resources (model/request.hpp granted_resources).
        if (ok && ureq.has_linux_resources()) linux_resources = &ureq.linux_resources();
    } else if (p.method == "UpdatePodSandbox") {
        ok = preq.ParseFromString(p.payload);
        c.event = "UpdatePodSandbox";
        pod = &preq.pod();
        if (ok && preq.has_linux_resources()) linux_resources = &preq.linux_resources();
    } else if (p.sync && p.item == kBatchItem) {  // the whole pass in one evaluator (relay_sync.cpp)
        prepare_batch(p.sync, c);
        return true;
    } else if (p.sync) {  // one pod or container of a Synchronize pass (decoded already)
        const SyncPass::Item& it = p.sync->items[size_t(p.item)];
        c.event = p.sync->replied ? "SynchronizeLate" : "Synchronize";
        c.sync = p.sync;
        c.item = p.item;
        pod = &p.sync->pods[size_t(it.pod)];
        ctr = it.ctr >= 0 ? &p.sync->containers[size_t(it.ctr)] : nullptr;
    } else {  // StateChange, or its NRI v0.12 dedicated RPC: the same event, the same evaluation
        bool with_container = false;
        const int dedicated = dedicated_event(p.method, with_container);
        if (dedicated) {
            // Every dedicated request is {pod = 1, container = 2} (the pod events without field 2):
            // one decoder for all, its pod and container moved into the StateChange form.
            pb::StartContainerRequest dreq;
            ok = dreq.ParseFromString(p.payload);
            sc.set_event(pb::Event(dedicated));
            sc.mutable_pod()->Swap(dreq.mutable_pod());
            if (with_container && dreq.has_container()) sc.mutable_container()->Swap(dreq.mutable_container());
        } else {
            ok = sc.ParseFromString(p.payload);
        }
        // A malformed request is named by the event its RPC stands for where nri-qos evaluates it
        // (a dedicated RunPodSandbox keeps its admission fail mode), else "StateChange" (the closed
        // set of failure_record.cpp kEvents; the reason names the method).
        const char* name = state_change_name(sc.event());
        if (!ok) name = name && dedicated ? name : "StateChange";
        if (ok && sc.event() == pb::REMOVE_CONTAINER) {  // never evaluated: see on_removed
            reply_ok(p.stream, std::string());
            on_removed(sc);
            return false;
        }
        if (!name) {  // not subscribed (e.g. POST_* events): nothing to evaluate
            reply_ok(p.stream, std::string());
            return false;
        }
        if (sc.event() == pb::START_CONTAINER && sc.has_container()) unadjusted = on_started(sc);
        c.event = name;
        pod = &sc.pod();
        ctr = sc.has_container() ? &sc.container() : nullptr;
    }
    c.subject = pod->namespace_() + "/" + pod->name();
    if (ctr) {
        c.subject += "/" + ctr->name();
        c.container_id = ctr->id();
    }
    if (!ok) {
        fail_event(p.stream, c.event, "", "malformed " + p.method + " request", "malformed");
        return false;
    }
    c.ns = pod->namespace_();
    c.pod = pod->name();
    c.sandbox_id = pod->id();
    if (ctr) c.container = ctr->name();
    // The child contract's input, printed member by member: byte for byte what the DOM of
    // event_to_json() dumps, without building it (nri_json.hpp print_event).
    c.input.reserve(2 * p.payload.size() + 256);
    print_event(c.input, c.event, runtime_name_, runtime_version_, *pod, ctr, linux_resources, unadjusted);
    c.input.push_back('\n');
    return true;
}

// StartContainer: the container is no longer one whose creation may be undone (adjusted_). True,
// with a log line, when the last Synchronize listed it CREATED (created_at_sync_): its evaluator
// writes every knob (model/request.hpp Request::unadjusted). Once per container.
bool Relay::on_started(const pb::StateChangeEvent& sc) {
    adjusted_.erase(sc.container().id());
    if (!created_at_sync_.erase(sc.container().id())) return false;
    logf("StartContainer %s/%s/%s: CREATED in this relay's Synchronize (no CreateContainer adjustment of nri-qos): every knob written at its start",
         sc.pod().namespace_().c_str(), sc.pod().name().c_str(), sc.container().name().c_str());
    return true;
}

// RemoveContainer of a container nri-qos adjusted and that never started: the runtime undid its
// creation after the NRI call (containerd's CRI: UndoCreateContainer sends StopContainer and
// RemoveContainer to the plugins, internal/cri/nri/nri_api_linux.go; pkg/cri/nri on 1.7). The
// usual cause is another NRI plugin that set one of the same fields: containerd/nri
// pkg/adaptation/result.go refuses the create with "plugins %q and %q both tried to set %s". On
// the record (event log, nri_qos_relay_failures_total and nri_qos_adjustment_rejected_total); the
// recorder names the other plugin from the runtime's log (failure_record.hpp runtime_conflict).
void Relay::on_removed(const pb::StateChangeEvent& sc) {
    if (!sc.has_container()) return;
    created_at_sync_.erase(sc.container().id());
    auto it = adjusted_.find(sc.container().id());
    if (it == adjusted_.end()) return;
    Adjusted a = std::move(it->second);
    adjusted_.erase(it);
    RelayFailure f;
    f.event = "CreateContainer";
    f.outcome = "undone";
    f.kind = "adjustment-rejected";
    f.reason = "the runtime removed the container without starting it, after nri-qos's CreateContainer adjustment set " + a.fields +
               ": the create failed after the NRI call, most often because another NRI plugin set one of these fields";
    f.ns = a.ns;
    f.pod = a.pod;
    f.container = a.container;
    f.id = sc.container().id();
    f.sandbox_id = a.sandbox_id;
    f.self = o_.plugin_idx + "-" + o_.plugin_name;
    f.fields = a.fields;
    logf("CreateContainer %s/%s/%s: %s", a.ns.c_str(), a.pod.c_str(), a.container.c_str(), f.reason.c_str());
    std::string why = sup_.record_failure(failure_message(f));
    if (!why.empty() && unrecorded_++ % 100 == 0)
        logf("CreateContainer: adjustment-rejected not written to the event log or the metrics: %s", why.c_str());
}

void Relay::finish_event(Outcome& oc) {
    if (cur_.sync && cur_.item == kBatchItem) {  // the whole pass's answers, one per item
        finish_batch(oc);
        return;
    }
    Current& c = cur_;
    if (oc.after_answer) {  // its evaluator still writes the event's records (or ended badly after)
        Current& who = answered_[oc.id];
        who = c;
        std::string().swap(who.input);
    }
    std::string failure = oc.failure;
    std::string kind = oc.failure.empty() ? std::string() : oc.kind.empty() ? std::string("crash") : oc.kind;
    json out;
    bool deadline_answer = false;
    if (failure.empty()) {
        out = parse_answer(oc.output);  // the members read below; metadata and writes are skipped
        // A deadline answer ("deadline": true) is prepared before the policy is known: its
        // on_child_failure is not the policy's choice and must never change ours (issue #9).
        if (out.is_object()) {
            auto d = out.find("deadline");
            deadline_answer = d != out.end() && d->is_boolean() && d->get<bool>();
        }
        if (out.is_object() && !deadline_answer) {  // cache the policy's choice even if the rest is unusable
            auto f = out.find("on_child_failure");
            if (f != out.end() && f->is_string()) {
                if (*f == "open") fail_closed_ = false;
                else if (*f == "closed") fail_closed_ = true;
                else logf("child: on_child_failure \"%s\" is neither \"open\" nor \"closed\"; ignored", f->get<std::string>().c_str());
            }
        }
        if (oc.output.empty()) {
            failure = "child printed nothing";
        } else if (!out.is_object()) {
            failure = "child output is not a JSON object: \"" + snippet(oc.output) + "\"";
        }
        if (!failure.empty()) kind = "bad-output";
    }
    std::string().swap(oc.output);

    // The record says which evaluator failed: a resident one ends at once (evaluator.hpp), the
    // next event gets a fresh one.
    if (!failure.empty() && oc.resident) failure = "resident evaluator (ended; the next event gets a fresh one): " + failure;
    if (!failure.empty()) {
        fail_event(c.stream, c.event, c.subject, failure, kind.c_str(), &c, oc.took_ms);
        return;
    }
    if (c.sync) {  // a Synchronize evaluation: its update joins the pass's reply (reply_sync)
        auto e = out.find("error");
        if (e != out.end() && e->is_string() && !e->get_ref<const std::string&>().empty()) {
            // A running container cannot be refused: the evaluator's error is on its record; said here too.
            logf("Synchronize %s: %s (the container already runs: nothing to refuse)", c.subject.c_str(), e->get_ref<const std::string&>().c_str());
        }
        auto u = out.find("update");
        if (!c.container_id.empty() && c.event == "Synchronize" && c.sync->replied) {
            // Evaluated for the reply, which went out meanwhile (the pass's deadline): what NRI would
            // have carried was not written; the container is evaluated again, late (writes directly).
            if (o_.debug) logf("Synchronize %s: ended after the pass's reply; evaluated again after it", c.subject.c_str());
            Pending again;
            again.method = "Synchronize";
            again.arrival_ms = nriqos::monotonic_ms();
            again.sync = c.sync;
            again.item = c.item;
            ++c.sync->late;
            syncq_.push_front(std::move(again));
            return;
        }
        if (!c.container_id.empty() && u != out.end() && !u->is_null()) {
            pb::ContainerUpdate up;
            up.set_container_id(c.container_id);
            std::string err;
            if (!resources_from_json(*u, *up.mutable_linux()->mutable_resources(), err)) {
                fail_event(c.stream, c.event, c.subject, "bad child output: " + err, "bad-output", &c, oc.took_ms);
                return;
            }
            *c.sync->response.add_update() = std::move(up);
        }
        ++c.sync->evaluated;
        if (o_.debug) logf("Synchronize %s: answered in %lld ms", c.subject.c_str(), (long long)oc.took_ms);
        return;
    }
    auto e = out.find("error");
    if (e != out.end() && !e->is_null()) {
        if (!e->is_string()) {
            fail_event(c.stream, c.event, c.subject, "child output: \"error\" is not a string", "bad-output", &c, oc.took_ms);
            return;
        }
        if (!e->get_ref<const std::string&>().empty()) {
            logf("%s %s: refused: %s", c.event.c_str(), c.subject.c_str(), e->get_ref<const std::string&>().c_str());
            reply_error(c.stream, kCodeUnknown, e->get<std::string>());
            return;
        }
    }
    if (deadline_answer && fail_closed_ && is_admission(c.event)) {
        // The child gave up at its own deadline without an error of its own: under the cached
        // "closed" this is a failed evaluation like any other.
        // Not recorded again: the evaluator's deadline handler wrote the record (outcome refused).
        fail_event(c.stream, c.event, c.subject, "child hit its own deadline", nullptr);
        return;
    }
    std::string reply;
    std::string err;
    if (c.method == "CreateContainer") {
        auto a = out.find("adjustment");
        pb::CreateContainerResponse rsp;
        if (a != out.end() && !a->is_null()) {
            if (!adjustment_from_json(*a, *rsp.mutable_adjust(), err)) {
                fail_event(c.stream, c.event, c.subject, "bad child output: " + err, "bad-output", &c, oc.took_ms);
                return;
            }
        }
        // Remembered until it starts: a removal before that is the runtime undoing the create.
        std::string fields = rsp.has_adjust() ? adjusted_fields(rsp.adjust()) : std::string();
        if (!fields.empty() && !c.container_id.empty()) {
            if (!adjusted_.count(c.container_id)) adjusted_order_.push_back(c.container_id);
            adjusted_[c.container_id] = Adjusted{c.ns, c.pod, c.container, c.sandbox_id, fields};
            while (adjusted_order_.size() > kMaxAdjusted || (!adjusted_order_.empty() && !adjusted_.count(adjusted_order_.front()))) {
                if (adjusted_order_.size() > kMaxAdjusted) adjusted_.erase(adjusted_order_.front());
                adjusted_order_.pop_front();
            }
        }
        reply = rsp.SerializeAsString();
    } else if (c.method == "UpdateContainer") {
        auto u = out.find("update");
        pb::UpdateContainerResponse rsp;
        if (u != out.end() && !u->is_null()) {
            pb::ContainerUpdate* up = rsp.add_update();
            up->set_container_id(c.container_id);
            if (!resources_from_json(*u, *up->mutable_linux()->mutable_resources(), err)) {
                fail_event(c.stream, c.event, c.subject, "bad child output: " + err, "bad-output", &c, oc.took_ms);
                return;
            }
        }
        reply = rsp.SerializeAsString();
    }
    if (o_.debug) { logf("%s %s: answered in %lld ms (%zu reply bytes)", c.event.c_str(), c.subject.c_str(), (long long)oc.took_ms, reply.size()); }
    reply_ok(c.stream, reply);
}

}  // namespace nriqos::nri
