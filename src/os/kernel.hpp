// Kernel I/O: the one small interface through which nri-qos touches the kernel's files.
//
// Every file is opened relative to a directory fd of its root (cgroup root, procfs, resctrl)
// with openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS) (Linux 5.6+,
// openat2(2)); on kernels without openat2 the path is walked one component at a time with
// O_NOFOLLOW | O_DIRECTORY. A relative path therefore can never leave its root, through `..`,
// an absolute component or a symlink, whatever the request says.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace nriqos {

/// The roots the hook may touch. Paths given to Kernel are relative to one of them.
enum class Root { Cgroup, Proc, Resctrl };

/// Outcome of one kernel file write.
///  * NoFile: the directory exists but the file does not — the kernel does not provide this knob
///    there (cpu.qos_level on a non-openEuler kernel, memory.high on cgroup v1, a v2 controller
///    not enabled for the cgroup). Callers treat it as "not applicable", never as a failure.
///  * NoDir: the directory that should hold the file does not exist (the cgroup was never
///    created or is gone, /proc/<pid> of a process that exited, a resctrl group nobody made),
///    or a component on the way is not a directory. Callers treat it as a failure.
struct IoResult {
    enum Status { Ok, NoFile, NoDir, Failed } status = Ok;
    int err = 0;  ///< errno for NoFile/NoDir/Failed
    std::string message;  ///< human-readable reason ("" when Ok)
};

/// Abstract kernel file access, so tests can point the hook at a scratch tree or at the
/// real /sys/fs/cgroup, and `explain` can run without writing anything.
class Kernel {
public:
    virtual ~Kernel() = default;
    /// Write `value` to `rel` under `root` (no O_CREAT: kernel files must exist).
    /// NoFile when the file's directory exists but the file does not; NoDir when the directory
    /// itself (or a component on the way) does not exist (ENOENT/ENOTDIR); Failed for any other
    /// error (EINVAL/EBUSY from the kernel, EACCES, a symlink on the way: ELOOP/EXDEV).
    virtual IoResult write(Root root, const std::string& rel, std::string_view value) = 0;
    /// Read a small file (≤ 64 KiB); nullopt when it cannot be opened or read.
    virtual std::optional<std::string> read(Root root, const std::string& rel) = 0;
    /// True when `rel` exists under `root` (resolved with the same rules as write).
    virtual bool exists(Root root, const std::string& rel) = 0;
};

/// Kernel backed by the real filesystem, rooted at configurable directories.
/// Root directories are opened lazily, once, with O_PATH|O_DIRECTORY (the root path itself may
/// contain symlinks: it comes from the operator, not from the request).
class FsKernel : public Kernel {
public:
    FsKernel(std::string cgroup_root, std::string proc_root, std::string resctrl_root);
    ~FsKernel() override;
    FsKernel(const FsKernel&) = delete;
    FsKernel& operator=(const FsKernel&) = delete;

    IoResult write(Root root, const std::string& rel, std::string_view value) override;
    std::optional<std::string> read(Root root, const std::string& rel) override;
    bool exists(Root root, const std::string& rel) override;

    /// Path of a root as configured (for messages).
    const std::string& root_path(Root root) const;

private:
    int root_fd(Root root);
    std::string paths_[3];
    int fds_[3] = {-1, -1, -1};
};

/// Open `rel` beneath directory fd `dirfd` refusing symlinks, magic links and `..` escapes.
/// Returns the fd or -errno. Uses openat2 when available, else an O_NOFOLLOW component walk.
/// `rel` must be relative; an empty `rel` opens dirfd itself (".").
int open_beneath(int dirfd, const std::string& rel, int flags, mode_t mode = 0);

/// Read the whole of regular file `rel` beneath `dirfd` (open_beneath, O_NONBLOCK) when it is at
/// most `max_bytes` long. nullopt when it is missing, not a regular file, larger, or short-read:
/// for the state dir's small files (memos, fact state), where such a file is simply ignored.
std::optional<std::string> read_small_beneath(int dirfd, const std::string& rel, size_t max_bytes);

/// Open a record file — event log, metrics counters and queue, relay log — so that writing the
/// operator's records never holds an event (issue 19 §2): O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC |
/// O_NOCTTY are added to `flags`, so a FIFO without a reader fails at once (ENXIO) instead of
/// blocking the open, a symlink is not followed (ELOOP); then fstat refuses anything that is not
/// a regular file (a FIFO with a reader, a device, a socket). `dirfd` >= 0: `rel` beneath it
/// (open_beneath), else `rel` is a path as given. Returns the fd, or -1 and `why` = one line
/// ("not a regular file (a FIFO)", strerror text). O_NONBLOCK does not make a write to a hung
/// network filesystem return: regular-file I/O ignores it (open(2)); the one-shot deadline and
/// the relay's evaluator (answer delivered before the records) cover that case.
int open_record(int dirfd, const std::string& rel, int flags, mode_t mode, std::string& why);

/// Create a new temporary file for a write-then-rename: `<prefix>.<pid>-<n>.tmp` with O_CREAT |
/// O_EXCL | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | O_NOCTTY, so an existing file, symlink or FIFO
/// at that name is never opened or followed (another name is tried: up to 8). `dirfd` >= 0:
/// beneath it (open_beneath), else `prefix` is a path. Returns the fd and sets `name` (the
/// path to rename and unlink), or -1 and `why` (one line).
int create_temp(int dirfd, const std::string& prefix, mode_t mode, std::string& name, std::string& why);

/// Replace file `name` beneath `dirfd` with `text` atomically: a new temporary file beside it
/// (create_temp: O_EXCL, no symlink), written, closed and renamed over `name`; on a failure the
/// temporary file is removed. Returns true when the new file is in place. Otherwise `temp_failed`
/// says which step failed — the temporary file's creation (`why` = create_temp's reason) or the
/// write, close or rename (`why` = strerror) — so that callers word their own one-line error.
bool replace_file(int dirfd, const std::string& name, const std::string& text, mode_t mode, std::string& why, bool& temp_failed);

/// "a FIFO", "a directory", "a socket", "a character device"... for messages (st_mode).
const char* file_kind(mode_t m);

/// True when the running kernel supports openat2(2) (probed once).
bool have_openat2();

}  // namespace nriqos
