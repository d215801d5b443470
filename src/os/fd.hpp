// The one file-descriptor owner and the one read-all / write-all pair of the tree (issue #35).
// Header-inline and without static state: the hot path (plain `invoke`, `nri-eval`) writes its
// answer with write_all, and no iostream comes in with it.
#pragma once

#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <string>
#include <string_view>

namespace nriqos {

/// Owns one file descriptor: closes it (close(2)) when destroyed or reset. Move-only: a move
/// hands the descriptor over and leaves the source empty (-1). A negative value (an open(2)
/// that failed, or a -errno) is held as "none" and never closed.
class Fd {
public:
    Fd() = default;
    explicit Fd(int fd) : fd_(fd) {}
    ~Fd() { reset(); }
    Fd(const Fd&) = delete;
    Fd& operator=(const Fd&) = delete;
    Fd(Fd&& o) noexcept : fd_(o.release()) {}
    Fd& operator=(Fd&& o) noexcept {
        if (this != &o) reset(o.release());
        return *this;
    }

    /// The descriptor (negative: none); still owned.
    int get() const { return fd_; }
    /// Whether a descriptor is held (get() >= 0).
    explicit operator bool() const { return fd_ >= 0; }
    /// Gives the descriptor up without closing it; the Fd is empty (-1) afterwards.
    int release() {
        int f = fd_;
        fd_ = -1;
        return f;
    }
    /// Closes the descriptor held, if any, and holds `fd` instead.
    void reset(int fd = -1) {
        if (fd_ >= 0) close(fd_);
        fd_ = fd;
    }

private:
    int fd_ = -1;
};

/// Appends what `fd` gives until end of file, in read(2)s of at most 64 KiB, a read that fails
/// with EINTR being made again. Stops early once `out` holds more than `limit` bytes: the caller
/// sees out.size() > limit and reports "too large" itself (the request parser, the manifest
/// reader); nothing more is read then. Returns false when a read fails (errno kept; `out` holds
/// what was read before), true at end of file or past the limit.
inline bool read_all(int fd, std::string& out, size_t limit) {
    char buf[65536];
    while (true) {
        ssize_t n = read(fd, buf, sizeof buf);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) return false;
        if (n == 0) return true;
        out.append(buf, static_cast<size_t>(n));
        if (out.size() > limit) return true;
    }
}

/// Writes all of `data` to `fd`: a short write (a pipe, a signal) is continued where it stopped
/// and a write that fails with EINTR is made again (write(2): a blocked write that a signal
/// handler interrupts returns the bytes written so far, or EINTR before the first, signal(7)).
/// Returns false when a write fails (errno kept) or writes nothing; the bytes before it were
/// written. An empty `data` makes no write(2).
inline bool write_all(int fd, std::string_view data) {
    size_t off = 0;
    while (off < data.size()) {
        ssize_t n = write(fd, data.data() + off, data.size() - off);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return false;
        off += static_cast<size_t>(n);
    }
    return true;
}

}  // namespace nriqos
