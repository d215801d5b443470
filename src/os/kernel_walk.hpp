// The path walk of open_beneath (os/kernel.hpp) on kernels without openat2, on its own so
// that the unit tests reach it (tests/unit/os/test_kernel.cpp).
#pragma once

#include <string>
#include <sys/types.h>

namespace nriqos {

/// open_beneath's path on kernels without openat2 (before Linux 5.6; qemu-user 7.2 has none
/// either): `rel` walked one component at a time from `dirfd`, each opened with O_NOFOLLOW
/// (O_PATH | O_DIRECTORY for all but the last, `flags` | O_NOFOLLOW | O_CLOEXEC for the last).
/// Returns the fd or -errno: -EXDEV for an empty, `.` or `..` component, -ELOOP for a symlink
/// anywhere on the path (as openat2's RESOLVE_NO_SYMLINKS), -ENOENT / -ENOTDIR for a missing
/// component or a file where a directory is expected. Public so that the unit tests run it on
/// kernels that have openat2.
int walk_open(int dirfd, const std::string& rel, int flags, mode_t mode = 0);

}  // namespace nriqos
