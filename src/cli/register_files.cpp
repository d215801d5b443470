// The one-line results and the file primitives of `register` (issue #23: split out of
// register.cpp): mkdir -p, reading a config file, the target of a symlinked config, and the atomic
// write (temporary file, fsync, rename, fsync of the directory) that conf.json and containerd's
// config edits go through. Declared in register_internal.hpp.
#include "cli/register_internal.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace nriqos {
namespace register_internal {

RegisterResult ok_result(bool changed, const std::string& msg) { return RegisterResult{0, changed, "nri-qos: " + msg}; }

RegisterResult fail_result(const std::string& msg, int code) {
    std::string m = "nri-qos: error: " + msg;
    for (char& c : m)
        if (c == '\n' || c == '\r') c = ' ';
    return RegisterResult{code, false, m};
}

std::string errno_text(int e) { return std::strerror(e); }

std::string dir_of(const std::string& path) {
    auto pos = path.find_last_of('/');
    if (pos == std::string::npos) return ".";
    if (pos == 0) return "/";
    return path.substr(0, pos);
}

namespace {

std::string base_of(const std::string& path) {
    auto pos = path.find_last_of('/');
    return pos == std::string::npos ? path : path.substr(pos + 1);
}

}  // namespace

bool valid_type(const std::string& t) {
    if (t.empty() || t == "." || t == "..") return false;
    for (unsigned char c : t)
        if (!(std::isalnum(c) || c == '.' || c == '_' || c == '-')) return false;
    return true;
}

std::string make_dirs(const std::string& dir) {
    if (dir.empty() || dir == "/" || dir == ".") return "";
    struct stat st {};
    if (::stat(dir.c_str(), &st) == 0) {
        if (S_ISDIR(st.st_mode)) return "";
        return "cannot create directory " + dir + ": " + errno_text(ENOTDIR);
    }
    if (errno != ENOENT) return "cannot access " + dir + ": " + errno_text(errno);
    std::string parent = dir_of(dir);
    if (parent != dir) {
        std::string err = make_dirs(parent);
        if (!err.empty()) return err;
    }
    if (::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) return "cannot create directory " + dir + ": " + errno_text(errno);
    return "";
}

ReadOutcome read_file(const std::string& path) {
    ReadOutcome r;
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        if (errno == ENOENT) return r;
        r.error = "cannot read " + path + ": " + errno_text(errno);
        return r;
    }
    if (::fstat(fd, &r.st) != 0 || !S_ISREG(r.st.st_mode)) {
        int e = S_ISDIR(r.st.st_mode) ? EISDIR : errno;
        ::close(fd);
        r.error = "cannot read " + path + ": " + (e ? errno_text(e) : "not a regular file");
        return r;
    }
    char buf[65536];
    for (;;) {
        ssize_t n = ::read(fd, buf, sizeof buf);
        if (n < 0) {
            if (errno == EINTR) continue;
            r.error = "cannot read " + path + ": " + errno_text(errno);
            ::close(fd);
            return r;
        }
        if (n == 0) break;
        r.text.append(buf, static_cast<size_t>(n));
    }
    ::close(fd);
    r.exists = r.text.find_first_not_of(" \t\r\n") != std::string::npos;
    return r;
}

std::string write_target(const std::string& path) {
    struct stat st {};
    if (::lstat(path.c_str(), &st) == 0 && S_ISLNK(st.st_mode)) {
        char resolved[PATH_MAX];
        if (::realpath(path.c_str(), resolved) != nullptr) return resolved;
    }
    return path;
}

std::string atomic_write(const std::string& path, const std::string& text, mode_t mode, uid_t uid, gid_t gid) {
    std::string dir = dir_of(path);
    std::string tmpl = dir + "/." + base_of(path) + ".nri-qos.XXXXXX";
    std::vector<char> tmp(tmpl.begin(), tmpl.end());
    tmp.push_back('\0');
    int fd = ::mkostemp(tmp.data(), O_CLOEXEC);
    if (fd < 0) return "cannot write " + path + ": cannot create a temporary file in " + dir + ": " + errno_text(errno);
    std::string tmp_path(tmp.data());
    auto fail = [&](const std::string& what) {
        int e = errno;
        ::close(fd);
        ::unlink(tmp_path.c_str());
        return "cannot write " + path + ": " + what + ": " + errno_text(e);
    };
    if (::fchmod(fd, mode) != 0) return fail("fchmod");
    if (uid != static_cast<uid_t>(-1) && ::fchown(fd, uid, gid) != 0 && errno != EPERM) return fail("fchown");
    size_t off = 0;
    while (off < text.size()) {
        ssize_t n = ::write(fd, text.data() + off, text.size() - off);
        if (n < 0) {
            if (errno == EINTR) continue;
            return fail("write");
        }
        off += static_cast<size_t>(n);
    }
    if (::fsync(fd) != 0) return fail("fsync");
    if (::close(fd) != 0) {
        int e = errno;
        ::unlink(tmp_path.c_str());
        return "cannot write " + path + ": close: " + errno_text(e);
    }
    if (::rename(tmp_path.c_str(), path.c_str()) != 0) {
        int e = errno;
        ::unlink(tmp_path.c_str());
        return "cannot write " + path + ": rename: " + errno_text(e);
    }
    int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) {
        ::fsync(dfd);  // best effort: the rename is already visible
        ::close(dfd);
    }
    return "";
}

}  // namespace register_internal
}  // namespace nriqos
