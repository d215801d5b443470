// Native NRI Synchronize: the pass's parts and evaluation order. See sync.hpp.
#include "nri/sync.hpp"

#include <cstdio>
#include <unordered_map>

namespace nriqos::nri {

void sync_add_part(SyncPass& pass, pb::SynchronizeRequest& part) {
    ++pass.parts;
    auto fits = [&pass](size_t n) { return pass.pods.size() + pass.containers.size() < kMaxSyncObjects && pass.bytes + n <= kMaxSyncBytes; };
    for (auto& p : *part.mutable_pods()) {
        size_t n = p.ByteSizeLong();
        if (!fits(n)) {
            ++pass.dropped;
            continue;
        }
        pass.bytes += n;
        pass.pods.push_back(std::move(p));
    }
    for (auto& c : *part.mutable_containers()) {
        size_t n = c.ByteSizeLong();
        if (!fits(n)) {
            ++pass.dropped;
            continue;
        }
        pass.bytes += n;
        pass.containers.push_back(std::move(c));
    }
    part.Clear();
}

void sync_plan(SyncPass& pass) {
    pass.items.clear();
    pass.skipped.clear();
    std::unordered_map<std::string, int> pod_of;
    for (size_t i = 0; i < pass.pods.size(); ++i) {
        pod_of.emplace(pass.pods[i].id(), int(i));
        pass.items.push_back({int(i), -1});
    }
    for (size_t i = 0; i < pass.containers.size(); ++i) {
        const pb::Container& c = pass.containers[i];
        auto it = pod_of.find(c.pod_sandbox_id());
        std::string why;
        if (it == pod_of.end()) {
            why = "its pod sandbox " + c.pod_sandbox_id().substr(0, 64) + " is not in the runtime's list";
        } else if (c.state() == pb::CONTAINER_STOPPED) {
            why = "stopped (no cgroup to write)";
        } else if (c.state() != pb::CONTAINER_CREATED && c.state() != pb::CONTAINER_RUNNING && c.state() != pb::CONTAINER_PAUSED) {
            why = "state " + std::to_string(int(c.state())) + " (unknown): not evaluated";
        }
        if (!why.empty()) {
            std::string who =
                it == pod_of.end() ? std::string("?") : pass.pods[size_t(it->second)].namespace_() + "/" + pass.pods[size_t(it->second)].name();
            pass.skipped.push_back(who + "/" + c.name() + " (" + c.id().substr(0, 12) + "): " + why);
            continue;
        }
        pass.items.push_back({it->second, int(i)});
    }
}

bool unsolicited_updates_safe(const std::string& nri_version) {
    unsigned maj = 0, min = 0, patch = 0;
    const char* v = nri_version.c_str();
    if (*v == 'v') ++v;
    int n = std::sscanf(v, "%u.%u.%u", &maj, &min, &patch);
    if (n < 2) return false;
    if (n == 2) patch = 0;
    if (maj != 0) return maj > 0;
    return min > 12 || (min == 12 && patch >= 1);
}

}  // namespace nriqos::nri
