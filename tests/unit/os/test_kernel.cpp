// Unit tests for src/os/kernel.{hpp,cpp}: the path walk of kernels without openat2 (walk_open).
// It is the path taken on Linux < 5.6 and under qemu-user 7.2 (no openat2 for the guest:
// docs/aarch64.md), so it is run here directly, whatever the build machine's kernel has.
#include "../scratch.hpp"
#include <catch2/catch.hpp>

#include <cerrno>
#include <cstdlib>
#include <fcntl.h>
#include <string>
#include <sys/stat.h>
#include <unistd.h>

#include "os/kernel.hpp"
#include "os/kernel_walk.hpp"

namespace {

struct Tree {  // root/{cg/pod/cpu.shares, outside/pod/cpu.shares, cg/evil -> ../outside, cg/file}
    std::string dir;
    int fd = -1;
    Tree() {
        dir = unit::make_scratch_dir("kernel-test");
        for (const char* d : {"/cg", "/cg/pod", "/outside", "/outside/pod"}) mkdir((dir + d).c_str(), 0755);
        for (const char* f : {"/cg/pod/cpu.shares", "/outside/pod/cpu.shares", "/cg/file"}) close(open((dir + f).c_str(), O_CREAT | O_WRONLY, 0644));
        REQUIRE(symlink("../outside", (dir + "/cg/evil").c_str()) == 0);
        REQUIRE(symlink("pod/cpu.shares", (dir + "/cg/link.shares").c_str()) == 0);
        fd = open((dir + "/cg").c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
        REQUIRE(fd >= 0);
    }
    ~Tree() {
        close(fd);
        unit::remove_tree(dir);
    }
};

int result(int fd) {  // the fd closed, 0 for an open file; -errno as is
    if (fd < 0) return fd;
    close(fd);
    return 0;
}

}  // namespace

TEST_CASE("walk_open: a symlinked directory on the path is ELOOP, as openat2's RESOLVE_NO_SYMLINKS", "[kernel][openat2]") {
    Tree t;
    // before: O_PATH | O_DIRECTORY | O_NOFOLLOW on the symlink gave ENOTDIR, and a write through
    // it was reported as a missing cgroup instead of "crosses a symlink"
    CHECK(nriqos::walk_open(t.fd, "evil/pod/cpu.shares", O_WRONLY) == -ELOOP);
    CHECK(nriqos::walk_open(t.fd, "evil/pod", O_PATH | O_DIRECTORY) == -ELOOP);
    CHECK(nriqos::walk_open(t.fd, "evil", O_PATH | O_DIRECTORY) == -ELOOP);
    CHECK(nriqos::walk_open(t.fd, "link.shares", O_WRONLY) == -ELOOP);
}

TEST_CASE("walk_open: missing components, files as directories, dot components", "[kernel][openat2]") {
    Tree t;
    CHECK(result(nriqos::walk_open(t.fd, "pod/cpu.shares", O_WRONLY)) == 0);
    CHECK(result(nriqos::walk_open(t.fd, "pod", O_PATH | O_DIRECTORY)) == 0);
    CHECK(nriqos::walk_open(t.fd, "gone/cpu.shares", O_WRONLY) == -ENOENT);
    CHECK(nriqos::walk_open(t.fd, "pod/cpu.weight", O_WRONLY) == -ENOENT);
    CHECK(nriqos::walk_open(t.fd, "file/cpu.shares", O_WRONLY) == -ENOTDIR);  // a file, not a symlink
    CHECK(nriqos::walk_open(t.fd, "../outside/pod/cpu.shares", O_WRONLY) == -EXDEV);
    CHECK(nriqos::walk_open(t.fd, "pod/./cpu.shares", O_WRONLY) == -EXDEV);
    CHECK(nriqos::walk_open(t.fd, "pod//cpu.shares", O_WRONLY) == -EXDEV);
}

TEST_CASE("open_beneath: the same answers as the walk, with or without openat2", "[kernel][openat2]") {
    Tree t;
    CHECK(nriqos::open_beneath(t.fd, "evil/pod/cpu.shares", O_WRONLY) == -ELOOP);
    CHECK(nriqos::open_beneath(t.fd, "link.shares", O_WRONLY) == -ELOOP);
    CHECK(result(nriqos::open_beneath(t.fd, "pod/cpu.shares", O_WRONLY)) == 0);
    CHECK(nriqos::open_beneath(t.fd, "gone/cpu.shares", O_WRONLY) == -ENOENT);
}
