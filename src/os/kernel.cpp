#include "os/kernel.hpp"
#include "os/kernel_walk.hpp"
#include "os/clock.hpp"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace nriqos {

namespace {
int g_openat2 = -1;  // -1 unknown, 0 no, 1 yes

int sys_openat2(int dirfd, const char* path, int flags, mode_t mode) {
    struct open_how how {};
    how.flags = static_cast<uint64_t>(flags) | O_CLOEXEC;
    how.mode = (flags & O_CREAT) ? mode : 0;
    how.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS;
    long r = syscall(SYS_openat2, dirfd, path, &how, sizeof how);
    return r < 0 ? -errno : static_cast<int>(r);
}

}  // namespace

int walk_open(int dirfd, const std::string& rel, int flags, mode_t mode) {
    int cur = dirfd;
    bool owned = false;
    size_t pos = 0;
    while (true) {
        size_t slash = rel.find('/', pos);
        std::string comp = rel.substr(pos, slash == std::string::npos ? std::string::npos : slash - pos);
        bool last = slash == std::string::npos;
        if (comp.empty() || comp == "." || comp == "..") {
            if (owned) close(cur);
            return -EXDEV;
        }
        int fl = last ? (flags | O_NOFOLLOW | O_CLOEXEC) : (O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        int fd = openat(cur, comp.c_str(), fl, mode);
        int e = errno;
        // O_PATH | O_NOFOLLOW opens a symlink itself, and O_DIRECTORY then fails with ENOTDIR
        // (open(2)): a symlinked directory would read as a missing one. Report it as openat2's
        // RESOLVE_NO_SYMLINKS does, ELOOP (openat2(2)).
        struct stat st {};
        if (fd < 0 && e == ENOTDIR && fstatat(cur, comp.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(st.st_mode)) e = ELOOP;
        if (owned) close(cur);
        if (fd < 0) return -e;
        if (last) return fd;
        cur = fd;
        owned = true;
        pos = slash + 1;
    }
}

bool have_openat2() {
    if (g_openat2 < 0) {
        int fd = sys_openat2(AT_FDCWD, ".", O_PATH, 0);
        g_openat2 = (fd == -ENOSYS) ? 0 : 1;
        if (fd >= 0) close(fd);
    }
    return g_openat2 == 1;
}

int open_beneath(int dirfd, const std::string& rel, int flags, mode_t mode) {
    if (!rel.empty() && rel[0] == '/') return -EXDEV;
    const std::string& p = rel.empty() ? std::string(".") : rel;
    if (g_openat2 != 0) {
        int fd = sys_openat2(dirfd, p.c_str(), flags, mode);
        if (fd != -ENOSYS) {
            g_openat2 = 1;
            return fd;
        }
        g_openat2 = 0;
    }
    if (rel.empty()) {
        int fd = openat(dirfd, ".", flags | O_CLOEXEC, mode);
        return fd < 0 ? -errno : fd;
    }
    return walk_open(dirfd, rel, flags, mode);
}

const char* file_kind(mode_t m) {
    if (S_ISREG(m)) return "a regular file";
    if (S_ISDIR(m)) return "a directory";
    if (S_ISFIFO(m)) return "a FIFO";
    if (S_ISSOCK(m)) return "a socket";
    if (S_ISCHR(m)) return "a character device";
    if (S_ISBLK(m)) return "a block device";
    if (S_ISLNK(m)) return "a symlink";
    return "not a regular file";
}

namespace {
int open_at(int dirfd, const std::string& rel, int flags, mode_t mode) {
    if (dirfd >= 0) return open_beneath(dirfd, rel, flags, mode);
    int fd = open(rel.c_str(), flags, mode);
    return fd < 0 ? -errno : fd;
}
}  // namespace

int open_record(int dirfd, const std::string& rel, int flags, mode_t mode, std::string& why) {
    int fd = open_at(dirfd, rel, flags | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY, mode);
    if (fd < 0) {
        errno = -fd;
        why = fd == -ENXIO ? "not a regular file (a FIFO without a reader)" : fd == -ELOOP ? "is a symlink (not followed)" : std::strerror(-fd);
        return -1;
    }
    struct stat st {};
    if (fstat(fd, &st) != 0) {
        why = std::string("fstat: ") + std::strerror(errno);
        close(fd);
        return -1;
    }
    if (!S_ISREG(st.st_mode)) {
        why = std::string("not a regular file (") + file_kind(st.st_mode) + ")";
        close(fd);
        return -1;
    }
    return fd;
}

int create_temp(int dirfd, const std::string& prefix, mode_t mode, std::string& name, std::string& why) {
    static unsigned counter = 0;
    const int64_t nsec = monotonic_ns() % 1000000000;  // the clock's nanoseconds within its second
    int fd = -EEXIST;
    for (int i = 0; i < 8 && fd == -EEXIST; ++i) {
        name = prefix + "." + std::to_string(getpid()) + "-" +
               std::to_string((static_cast<unsigned>(nsec) ^ (counter++ * 2654435761u)) % 1000000007u) + ".tmp";
        fd = open_at(dirfd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | O_NOCTTY, mode);
    }
    if (fd < 0) why = std::strerror(-fd);
    return fd;
}

bool replace_file(int dirfd, const std::string& name, const std::string& text, mode_t mode, std::string& why, bool& temp_failed) {
    std::string tmp;
    temp_failed = false;
    int fd = create_temp(dirfd, "." + name, mode, tmp, why);
    if (fd < 0) {
        temp_failed = true;
        return false;
    }
    bool ok = write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
    ok = close(fd) == 0 && ok;
    if (ok && renameat(dirfd, tmp.c_str(), dirfd, name.c_str()) == 0) return true;
    why = std::strerror(errno);
    unlinkat(dirfd, tmp.c_str(), 0);
    return false;
}

std::optional<std::string> read_small_beneath(int dirfd, const std::string& rel, size_t max_bytes) {
    int fd = open_beneath(dirfd, rel, O_RDONLY | O_NONBLOCK);
    if (fd < 0) return std::nullopt;
    struct stat st {};
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || static_cast<size_t>(st.st_size) > max_bytes) {
        close(fd);
        return std::nullopt;
    }
    std::string text(static_cast<size_t>(st.st_size), '\0');
    ssize_t n = read(fd, text.data(), text.size());
    close(fd);
    if (n != st.st_size) return std::nullopt;
    return text;
}

FsKernel::FsKernel(std::string cgroup_root, std::string proc_root, std::string resctrl_root)
    : paths_{std::move(cgroup_root), std::move(proc_root), std::move(resctrl_root)} {}

FsKernel::~FsKernel() {
    for (int fd : fds_)
        if (fd >= 0) close(fd);
}

const std::string& FsKernel::root_path(Root root) const { return paths_[static_cast<int>(root)]; }

int FsKernel::root_fd(Root root) {
    int i = static_cast<int>(root);
    if (fds_[i] < 0) {
        int fd = open(paths_[i].c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
        fds_[i] = fd < 0 ? -errno : fd;
    }
    return fds_[i];
}

IoResult FsKernel::write(Root root, const std::string& rel, std::string_view value) {
    IoResult r;
    int dfd = root_fd(root);
    int fd = dfd < 0 ? dfd : open_beneath(dfd, rel, O_WRONLY | O_TRUNC | O_NOCTTY | O_NONBLOCK);
    if (fd < 0) {
        r.err = -fd;
        r.status = IoResult::Failed;
        if (dfd >= 0 && (r.err == ENOENT || r.err == ENOTDIR)) {
            // Which is absent: the knob file (the kernel does not provide it) or its directory
            // (the cgroup, process or resctrl group is not there)? Probe the parent, with the
            // same resolution rules. Only on this cold path.
            size_t slash = rel.rfind('/');
            std::string parent = slash == std::string::npos ? std::string() : rel.substr(0, slash);
            int pfd = open_beneath(dfd, parent, O_PATH | O_DIRECTORY);
            if (pfd >= 0) close(pfd);
            r.status = (pfd >= 0 && r.err == ENOENT) ? IoResult::NoFile : IoResult::NoDir;
        } else if (dfd < 0 && (r.err == ENOENT || r.err == ENOTDIR)) {
            r.status = IoResult::NoDir;  // the root itself (e.g. /sys/fs/resctrl) is not there
        }
        if (r.err == ELOOP || r.err == EXDEV) r.message = "path escapes its root or crosses a symlink";
        else r.message = std::strerror(r.err);
        return r;
    }
    // Kernel control files take the whole value in one write(2); a short write is an error.
    ssize_t n = ::write(fd, value.data(), value.size());
    int e = errno;
    close(fd);
    if (n < 0 || static_cast<size_t>(n) != value.size()) {
        r.status = IoResult::Failed;
        r.err = n < 0 ? e : EIO;
        r.message = n < 0 ? std::strerror(e) : "short write";
    }
    return r;
}

std::optional<std::string> FsKernel::read(Root root, const std::string& rel) {
    int dfd = root_fd(root);
    int fd = dfd < 0 ? dfd : open_beneath(dfd, rel, O_RDONLY | O_NOCTTY | O_NONBLOCK);
    if (fd < 0) return std::nullopt;
    std::string out;
    char buf[4096];
    while (out.size() < 65536) {
        ssize_t n = ::read(fd, buf, sizeof buf);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        out.append(buf, static_cast<size_t>(n));
    }
    close(fd);
    return out;
}

bool FsKernel::exists(Root root, const std::string& rel) {
    int dfd = root_fd(root);
    if (dfd < 0) return false;
    int fd = open_beneath(dfd, rel, O_PATH);
    if (fd < 0) return false;
    close(fd);
    return true;
}

}  // namespace nriqos
