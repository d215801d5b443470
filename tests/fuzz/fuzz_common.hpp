// Shared helpers of the libFuzzer targets (tests/fuzz/run.sh builds and runs them).
// An invariant violation calls die(), which aborts: libFuzzer records the input as a crash.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <string>

#include "model/model.hpp"

namespace fuzz {

[[noreturn]] inline void die(const char* what, const std::string& detail = {}) {
    std::fprintf(stderr, "INVARIANT VIOLATED: %s %s\n", what, detail.substr(0, 400).c_str());
    std::abort();
}

/// A resolved cgroup path must stay below its hierarchy root: relative, no empty, "." or ".."
/// component, no control characters or backslashes (model.hpp resolve_cgroups_path contract).
inline void check_rel_path(const std::string& p, const char* what) {
    if (p.empty()) return;
    if (p[0] == '/') die(what, "absolute: " + p);
    size_t pos = 0;
    while (true) {
        size_t slash = p.find('/', pos);
        std::string c = p.substr(pos, slash == std::string::npos ? std::string::npos : slash - pos);
        if (c.empty() || c == "." || c == "..") die(what, "bad component in: " + p);
        for (unsigned char ch : c)
            if (ch < 0x20 || ch == 0x7f || ch == '\\') die(what, "control char/backslash in: " + p);
        if (slash == std::string::npos) break;
        pos = slash + 1;
    }
}

inline void check_paths(const nriqos::CgroupPaths& cp) {
    check_rel_path(cp.container, "container path");
    check_rel_path(cp.pod, "pod path");
    if (cp.container.empty()) die("empty container path");
    if (!cp.pod.empty() && cp.container.compare(0, cp.pod.size() + 1, cp.pod + "/") != 0)
        die("container path not below pod path", cp.container + " vs " + cp.pod);
}

}  // namespace fuzz
