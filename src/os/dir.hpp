// The one directory lister of the tree (issue #35): readdir(3) over a directory given by path
// or by an open fd, "." and ".." left out. Header-inline, a template over the callback (no
// std::function, no allocation of its own).
#pragma once

#include <dirent.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace nriqos {

/// One entry of a listing. `name` is valid only during the callback; `type` is readdir's d_type
/// (DT_DIR, DT_REG, DT_LNK, ... or DT_UNKNOWN when the filesystem does not fill it in, readdir(3):
/// the caller then fstatat(2)s `name` relative to `dir_fd`, the listed directory's fd).
struct DirEntry {
    const char* name;
    unsigned char type;
    int dir_fd;
};

namespace detail {
template <class Each>
void each_entry(DIR* d, Each& each) {
    while (struct dirent* e = readdir(d)) {
        if (e->d_name[0] == '.' && (e->d_name[1] == '\0' || (e->d_name[1] == '.' && e->d_name[2] == '\0'))) continue;
        if (!each(DirEntry{e->d_name, e->d_type, dirfd(d)})) break;
    }
    closedir(d);
}
}  // namespace detail

/// Calls `each(const DirEntry&)` for every entry of the directory open at `fd` except "." and
/// "..", in readdir(3) order (the filesystem's, unsorted: a caller that needs an order sorts);
/// `each` returns false to stop early. Takes `fd` over: it is closed when the listing ends, and
/// when fdopendir(3) fails. Returns 0, or -errno when fdopendir fails (ENOTDIR, EBADF). An
/// error of readdir itself ends the listing like its end.
template <class Each>
int list_dir(int fd, Each&& each) {
    DIR* d = fdopendir(fd);
    if (!d) {
        int err = errno;
        close(fd);
        errno = err;
        return -err;
    }
    detail::each_entry(d, each);
    return 0;
}

/// The same for the directory at `path` (opendir(3)). Returns 0, or -errno when opendir fails
/// (ENOENT, ENOTDIR, EACCES), errno kept for the caller's message.
template <class Each>
int list_dir(const char* path, Each&& each) {
    DIR* d = opendir(path);
    if (!d) return -errno;
    detail::each_entry(d, each);
    return 0;
}

}  // namespace nriqos
