// The per-sandbox memo: what the sandbox event showed about its pod (annotations, names, class),
// so that the pod's containers — whose v0.1 requests often lack the pod annotations — are
// classified with the same facts (under the current policy), and a container whose class differs
// from the class the sandbox got (whose pod knobs the pod cgroup keeps) is reported as such
// (pipeline.cpp note_pod_class: Result metadata pod_class, pod_class_note). One small JSON file per sandbox id in the state directory
// (default /run/nri-qos), written atomically (temp file + rename), removed on the sandbox's
// delete; stale or corrupt entries are harmless (ignored).
#pragma once

#include <map>
#include <optional>
#include <string>

namespace nriqos {

struct Memo {
    std::map<std::string, std::string> annotations;  ///< pod annotations seen at the sandbox event
    std::string pod_namespace, pod_name;
    std::string cls;  ///< the sandbox's class: its pod knobs are the pod cgroup's
};

class StateDir {
public:
    /// `dir` is created (mode 0700, parents too) on the first store().
    explicit StateDir(std::string dir);
    ~StateDir();
    StateDir(const StateDir&) = delete;
    StateDir& operator=(const StateDir&) = delete;

    /// The memo for `sandbox_id`, or nullopt (absent, unreadable, corrupt, larger than 256 KiB).
    std::optional<Memo> load(const std::string& sandbox_id);
    /// Store atomically. Returns "" or a one-line error (never throws).
    std::string store(const std::string& sandbox_id, const Memo& m);
    /// Remove; absent is fine. Returns "" or a one-line error.
    std::string remove(const std::string& sandbox_id);

private:
    int open_dir(bool create);
    std::string dir_;
    int fd_ = -1;
};

}  // namespace nriqos
