// The unit tests' one scratch-directory helper (issue #35): a directory of a test's own under
// /tmp (or /dev/shm where a test needs tmpfs), removed with everything in it afterwards. Every
// test file that needs a scratch tree uses this, so that where scratch trees live, how they are
// named and how they are removed (no shell, symlinks never followed) is decided once.
#pragma once

#include <fcntl.h>
#include <ftw.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <string>

namespace unit {

/// Makes <parent>/nri-qos-<tag>.XXXXXX (mkdtemp(3), mode 0700) and returns its path. `parent` is
/// /tmp unless a test needs another file system: /dev/shm where a write must be at tmpfs speed
/// (test_cache's deadline-during-store_file case times a 256 MiB write; /tmp may be a disk).
/// Throws std::runtime_error with mkdtemp's errno text when it cannot.
inline std::string make_scratch_dir(const std::string& tag, const std::string& parent = "/tmp") {
    std::string tmpl = parent + "/nri-qos-" + tag + ".XXXXXX";
    if (!mkdtemp(tmpl.data())) throw std::runtime_error("mkdtemp " + tmpl + ": " + std::strerror(errno));
    return tmpl;
}

/// Removes `path` and everything below it, depth first, without following symlinks (a test's
/// hostile symlink is removed, never what it points at: nftw FTW_PHYS). Directories a test made
/// read-only are made writable first. Errors are ignored: a scratch tree is best effort.
inline void remove_tree(const std::string& path) {
    if (path.empty() || path == "/") return;
    // pre-order pass: let the owner (root in make check) into every directory
    nftw(
        path.c_str(),
        [](const char* p, const struct stat* st, int type, struct FTW*) { return type == FTW_D ? (chmod(p, st->st_mode | 0700), 0) : 0; }, 64,
        FTW_PHYS);
    nftw(
        path.c_str(), [](const char* p, const struct stat*, int type, struct FTW*) { return (type == FTW_DP ? rmdir(p) : unlink(p)), 0; }, 64,
        FTW_PHYS | FTW_DEPTH);
}

/// A scratch directory for one test's scope: made by the constructor (make_scratch_dir, under
/// `parent`), removed with its contents by the destructor (remove_tree). `path` is absolute,
/// without a trailing '/'.
class ScratchDir {
public:
    explicit ScratchDir(const std::string& tag = "unit", const std::string& parent = "/tmp") : path(make_scratch_dir(tag, parent)) {}
    ~ScratchDir() { remove_tree(path); }
    ScratchDir(const ScratchDir&) = delete;
    ScratchDir& operator=(const ScratchDir&) = delete;

    /// path/rel
    std::string operator/(const std::string& rel) const { return path + "/" + rel; }
    /// Creates path/rel and its parents (mode 0755); existing ones are fine.
    void mkdir(const std::string& rel) const {
        std::string full = path + "/" + rel;
        for (size_t i = path.size() + 1; i <= full.size(); ++i)
            if (i == full.size() || full[i] == '/') ::mkdir(full.substr(0, i).c_str(), 0755);
    }
    /// Writes `text` to path/rel (replacing it), creating its directory first.
    void put(const std::string& rel, const std::string& text) const {
        if (size_t slash = rel.rfind('/'); slash != std::string::npos) mkdir(rel.substr(0, slash));
        std::ofstream(path + "/" + rel) << text;
    }
    /// The contents of path/rel ("" when it cannot be read).
    std::string get(const std::string& rel) const {
        std::ifstream in(path + "/" + rel);
        return std::string(std::istreambuf_iterator<char>(in), {});
    }
    /// Removes path/rel and what is below it.
    void rm(const std::string& rel) const { remove_tree(path + "/" + rel); }

    const std::string path;
};

}  // namespace unit
