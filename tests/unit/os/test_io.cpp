// Unit tests for the os/ primitives that replaced the tree's copies (issue #35): the monotonic
// clock (os/clock.hpp), the Fd owner and read_all / write_all (os/fd.hpp) and the directory
// lister (os/dir.hpp). Real descriptors, pipes, signals and a real scratch directory.
#include "../scratch.hpp"
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <map>
#include <string>
#include <thread>

#include "os/clock.hpp"
#include "os/dir.hpp"
#include "os/fd.hpp"

using namespace nriqos;

namespace {

bool is_open(int fd) { return fcntl(fd, F_GETFD) != -1; }
bool is_closed(int fd) { return fcntl(fd, F_GETFD) == -1 && errno == EBADF; }

std::string pattern(size_t n) {
    std::string s(n, '\0');
    for (size_t i = 0; i < n; ++i) s[i] = static_cast<char>('a' + (i * 7 + i / 251) % 26);
    return s;
}

void on_usr1(int) {}

}  // namespace

TEST_CASE("monotonic_ns / monotonic_ms: CLOCK_MONOTONIC in ns and in whole ms", "[os-io][clock]") {
    struct timespec before, after;
    clock_gettime(CLOCK_MONOTONIC, &before);
    const int64_t ns = monotonic_ns();
    const int64_t ms = monotonic_ms();
    clock_gettime(CLOCK_MONOTONIC, &after);
    const int64_t b = int64_t(before.tv_sec) * 1000000000 + before.tv_nsec, a = int64_t(after.tv_sec) * 1000000000 + after.tv_nsec;
    CHECK(ns >= b);
    CHECK(ns <= a);
    CHECK(ms >= b / 1000000);
    CHECK(ms <= a / 1000000);
    const int64_t t0 = monotonic_ns();
    usleep(20000);
    CHECK(monotonic_ns() - t0 >= 20000000);
}

TEST_CASE("Fd: closes on destruction and reset, hands over on move, release keeps it open", "[os-io][fd]") {
    int raw = open("/dev/null", O_RDONLY | O_CLOEXEC);
    REQUIRE(raw >= 0);
    {
        Fd f(raw);
        CHECK(f.get() == raw);
        CHECK(static_cast<bool>(f));
        CHECK(is_open(raw));
    }
    CHECK(is_closed(raw));

    raw = open("/dev/null", O_RDONLY | O_CLOEXEC);
    REQUIRE(raw >= 0);
    {
        Fd a(raw);
        Fd b(std::move(a));
        CHECK(a.get() == -1);
        CHECK_FALSE(static_cast<bool>(a));
        CHECK(b.get() == raw);
        CHECK(is_open(raw));  // the moved-from a did not close it
        Fd c;
        c = std::move(b);
        CHECK(b.get() == -1);
        CHECK(is_open(raw));
        int other = open("/dev/null", O_RDONLY | O_CLOEXEC);
        REQUIRE(other >= 0);
        Fd d(other);
        d = std::move(c);  // d's own descriptor is closed, raw is d's now
        CHECK(is_closed(other));
        CHECK(is_open(raw));
        CHECK(d.get() == raw);
    }
    CHECK(is_closed(raw));

    raw = open("/dev/null", O_RDONLY | O_CLOEXEC);
    REQUIRE(raw >= 0);
    {
        Fd f(raw);
        CHECK(f.release() == raw);
        CHECK(f.get() == -1);
    }
    CHECK(is_open(raw));
    {
        Fd f(raw);
        f.reset();
        CHECK(is_closed(raw));
        CHECK(f.get() == -1);
    }
    {
        Fd err(-ENOENT);
        CHECK(err.get() == -ENOENT);
        CHECK_FALSE(static_cast<bool>(err));
    }  // a -errno is held, never closed
}

TEST_CASE("read_all: to end of file, appending; past the limit it stops; a failed read is false with errno", "[os-io][read_all]") {
    struct sigaction ign {
    }, old_pipe{};
    ign.sa_handler = SIG_IGN;
    REQUIRE(sigaction(SIGPIPE, &ign, &old_pipe) == 0);
    const std::string data = pattern(300000);
    int p[2];
    REQUIRE(pipe(p) == 0);
    std::thread writer([&] {
        CHECK(write_all(p[1], data));
        close(p[1]);
    });
    std::string out = "x";
    CHECK(read_all(p[0], out, 1u << 20));
    writer.join();
    close(p[0]);
    CHECK(out == "x" + data);

    REQUIRE(pipe(p) == 0);
    std::thread writer2([&] {
        write_all(p[1], data);  // the reader stops early: EPIPE is expected (SIGPIPE ignored below)
        close(p[1]);
    });
    out.clear();
    CHECK(read_all(p[0], out, 100000));
    CHECK(out.size() > 100000);
    CHECK(out.size() <= 100000 + 65536);  // one read of at most 64 KiB past the limit
    CHECK(data.compare(0, out.size(), out) == 0);
    close(p[0]);
    writer2.join();

    out = "keep";
    errno = 0;
    CHECK_FALSE(read_all(-1, out, 10));
    CHECK(errno == EBADF);
    CHECK(out == "keep");
    sigaction(SIGPIPE, &old_pipe, nullptr);
}

TEST_CASE("write_all: continues short writes and EINTR; false with errno on a failed write", "[os-io][write_all]") {
    struct sigaction sa {
    }, old_usr1{}, old_pipe{};
    sa.sa_handler = on_usr1;  // no SA_RESTART: a blocked write(2) returns short (or EINTR)
    sigemptyset(&sa.sa_mask);
    REQUIRE(sigaction(SIGUSR1, &sa, &old_usr1) == 0);
    struct sigaction ign {};
    ign.sa_handler = SIG_IGN;
    REQUIRE(sigaction(SIGPIPE, &ign, &old_pipe) == 0);

    const std::string data = pattern(4u << 20);
    int p[2];
    REQUIRE(pipe(p) == 0);
    fcntl(p[1], F_SETPIPE_SZ, 4096);  // a small pipe: the writer blocks often
    std::atomic<bool> done{false};
    bool ok = false;
    std::thread writer([&] {
        ok = write_all(p[1], data);
        done = true;
        close(p[1]);
    });
    const pthread_t wt = writer.native_handle();
    std::string got;
    char buf[1000];
    int signals = 0;
    while (true) {
        if (!done && ++signals % 4 == 0) pthread_kill(wt, SIGUSR1);
        ssize_t n = read(p[0], buf, sizeof buf);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        got.append(buf, static_cast<size_t>(n));
    }
    writer.join();
    close(p[0]);
    CHECK(ok);
    CHECK(got.size() == data.size());
    CHECK(got == data);
    CHECK(signals > 100);  // the writer was interrupted many times while blocked

    REQUIRE(pipe(p) == 0);
    close(p[0]);
    errno = 0;
    CHECK_FALSE(write_all(p[1], "no reader"));
    CHECK(errno == EPIPE);
    close(p[1]);
    errno = 0;
    CHECK_FALSE(write_all(-1, "x"));
    CHECK(errno == EBADF);
    CHECK(write_all(-1, ""));  // nothing to write: no write(2) at all

    sigaction(SIGUSR1, &old_usr1, nullptr);
    sigaction(SIGPIPE, &old_pipe, nullptr);
}

TEST_CASE("list_dir: every entry but . and .., with d_type; early stop; fd taken over; errors as -errno", "[os-io][list_dir]") {
    unit::ScratchDir s("os-io");
    s.put("a", "1");
    s.put(".hidden", "2");
    s.mkdir("sub");
    REQUIRE(symlink("a", (s / "link").c_str()) == 0);

    std::map<std::string, unsigned char> seen;
    CHECK(list_dir(s.path.c_str(), [&](const DirEntry& e) {
              seen[e.name] = e.type;
              return true;
          }) == 0);
    REQUIRE(seen.size() == 4);
    CHECK(seen.count(".hidden") == 1);
    CHECK(seen.count(".") == 0);
    CHECK(seen.count("..") == 0);
    auto type_is = [&](const char* n, unsigned char t) { return seen.at(n) == t || seen.at(n) == DT_UNKNOWN; };
    CHECK(type_is("a", DT_REG));
    CHECK(type_is("sub", DT_DIR));
    CHECK(type_is("link", DT_LNK));

    int calls = 0;
    CHECK(list_dir(s.path.c_str(), [&](const DirEntry&) { return ++calls < 2; }) == 0);
    CHECK(calls == 2);

    int fd = open(s.path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    REQUIRE(fd >= 0);
    bool stat_ok = true;
    int n = 0;
    CHECK(list_dir(fd, [&](const DirEntry& e) {
              struct stat st {};
              stat_ok = stat_ok && fstatat(e.dir_fd, e.name, &st, AT_SYMLINK_NOFOLLOW) == 0;
              ++n;
              return true;
          }) == 0);
    CHECK(n == 4);
    CHECK(stat_ok);
    CHECK(is_closed(fd));

    int file = open((s / "a").c_str(), O_RDONLY | O_CLOEXEC);
    REQUIRE(file >= 0);
    CHECK(list_dir(file, [](const DirEntry&) { return true; }) == -ENOTDIR);
    CHECK(is_closed(file));
    CHECK(list_dir((s / "missing").c_str(), [](const DirEntry&) { return true; }) == -ENOENT);
    CHECK(list_dir((s / "a").c_str(), [](const DirEntry&) { return true; }) == -ENOTDIR);
}
