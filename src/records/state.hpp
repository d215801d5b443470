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
#include <vector>

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

    // ---- last request of each live sandbox/container (status, reconcile, explain --container)
    // <dir>/last/<sandbox id>/<id>.json, mode 0600 (directories 0700): one JSON document per
    // sandbox or container (format: src/event/replay.hpp LastRequest), replaced atomically at each of
    // its events, removed with its container (v0.1 delete) or with its sandbox (the whole
    // <sandbox id> directory). Ids must match [A-Za-z0-9_.-]{1,128}; others are not stored.

    /// Store `text` as the last request of `id` in sandbox `sandbox_id`. Returns "" or an error.
    std::string store_last(const std::string& sandbox_id, const std::string& id, const std::string& text);
    /// Remove one record (absent is fine). Returns "" or an error.
    std::string remove_last(const std::string& sandbox_id, const std::string& id);
    /// Remove the records of a sandbox and of all its containers. Returns "" or an error.
    std::string remove_last_sandbox(const std::string& sandbox_id);
    /// One stored record.
    struct LastFile {
        std::string sandbox_id, id, text;
    };
    /// All records (at most `max`; files larger than kMaxLastBytes are skipped), sorted by
    /// sandbox id then id.
    std::vector<LastFile> list_last(size_t max = 65536);
    /// The records of one sandbox (its own and its containers'), at most `max`, sorted by id.
    std::vector<LastFile> list_last_of(const std::string& sandbox_id, size_t max = 64);
    /// Largest record stored (bytes); a larger request is recorded without its body.
    static constexpr size_t kMaxLastBytes = 512u << 10;

    /// A small file of the state dir itself (not a memo: `name` has no ".json"), e.g. the runtime
    /// probe's cache "runc-formula" (detect.hpp). nullopt: absent, unreadable or above `max` bytes.
    std::optional<std::string> read_file(const std::string& name, size_t max = 4096);
    /// Replace it atomically (temp file + rename, mode 0600; the dir is created). "" or an error.
    std::string write_file(const std::string& name, const std::string& text);

    /// The directory as configured.
    const std::string& path() const { return dir_; }

private:
    int open_dir(bool create);
    std::vector<LastFile> list_last_in(size_t max, const std::string* only_sandbox);
    std::string dir_;
    int fd_ = -1;
};

}  // namespace nriqos
