// Native NRI relay: the relay process itself. Its set-up (fds 0-2, SIGCHLD, heap), its
// confinement after Configure (the keeper forked first), its log file (containerd gives a
// launched plugin /dev/null), the dropping of start-up text pages from its RSS, and the options
// of containerd's launch environment (NRI_PLUGIN_SOCKET, NRI_PLUGIN_NAME, NRI_PLUGIN_IDX).
#include <fcntl.h>
#include <malloc.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "nri/evaluator.hpp"
#include "nri/relay.hpp"
#include "nri/relay_internal.hpp"
#include "os/kernel.hpp"
#include "os/sandbox.hpp"
#include "records/record.hpp"

namespace nriqos::nri {

// Drop the page-table entries of our read-only, file-backed mappings (text, rodata) of the
// executable. Start-up code (static initialisers, command-line parsing) is never run again, but
// its pages, and their 64 KiB fault-around neighbours, would stay in our RSS for the life of the
// plugin. MADV_DONTNEED on a private file mapping whose pages were never written only unmaps
// them: they stay in the page cache and fault back in on use (madvise(2)). A mapping with any
// anonymous (copy-on-write) page, e.g. RELRO after relocation, is skipped: dropping it would
// lose the relocated data. Writable mappings are never touched.
// Called three times: on entry (what main ran), after registration and set-up, and after
// Configure and the confinement (their code — the config's JSON, the keeper's fork, the
// sandbox's set-up — runs once: ~0.25-0.3 MiB of the relay's RSS for good). Later calls reuse
// the ranges the first one found (a confined relay cannot open /proc/self/smaps).
namespace {

std::vector<std::pair<unsigned long, unsigned long>> g_text_ranges;
bool g_text_ranges_known = false;

}  // namespace

void drop_resident_text() {
    if (g_text_ranges_known) {
        for (const auto& r : g_text_ranges) madvise(reinterpret_cast<void*>(r.first), r.second - r.first, MADV_DONTNEED);
        return;
    }
    g_text_ranges_known = true;
    char exe[4096];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0) return;
    exe[n] = '\0';
    FILE* f = fopen("/proc/self/smaps", "re");
    if (!f) return;
    struct Range {
        unsigned long lo, hi;
    };
    std::vector<Range> drop;
    char line[4352];
    bool candidate = false;
    Range cur = {0, 0};
    while (fgets(line, sizeof line, f)) {
        unsigned long lo = 0, hi = 0;
        char perms[8] = {0};
        int path_at = 0;
        if (sscanf(line, "%lx-%lx %7s %*s %*s %*s %n", &lo, &hi, perms, &path_at) >= 3 && strchr(line, '-') && line[0] != ' ' &&
            strlen(perms) == 4) {  // header line of a new mapping
            char* path = path_at > 0 ? line + path_at : line + strlen(line);
            path[strcspn(path, "\n")] = '\0';
            candidate = perms[0] == 'r' && perms[1] == '-' && perms[3] == 'p' && strcmp(path, exe) == 0;
            cur = {lo, hi};
            continue;
        }
        unsigned long anon_kb = 0;
        if (candidate && sscanf(line, "Anonymous: %lu kB", &anon_kb) == 1) {
            if (anon_kb == 0) drop.push_back(cur);
            candidate = false;
        }
    }
    fclose(f);
    for (const Range& r : drop) {
        madvise(reinterpret_cast<void*>(r.lo), r.hi - r.lo, MADV_DONTNEED);
        g_text_ranges.emplace_back(r.lo, r.hi);
    }
}

// Send our stderr (and the children's) to `path`, appending. containerd starts launched plugins
// with fds 0-2 on /dev/null, so without this nothing the relay logs is visible.
void redirect_log(const std::string& path) {
    if (path.empty()) return;
    if (path[0] == '/') nriqos::make_dirs(nriqos::dir_name(path), 0750);
    // open_record: a FIFO or device at the log path must not block the relay's start or its
    // writes (issue 19 §2); stderr stays where it was.
    std::string why;
    int fd = nriqos::open_record(-1, path, O_WRONLY | O_APPEND | O_CREAT, 0640, why);
    if (fd < 0) {
        logf("cannot open log file %s: %s", path.c_str(), why.c_str());
        return;
    }
    dup2(fd, 2);
    close(fd);
}

// stderr is /dev/null (containerd's launch) or closed: then the relay logs to the default file
// (issue #11: never to /dev/null by default). Its evaluators inherit it, so the log also holds
// the one record line per event each evaluation writes to stderr.
bool stderr_is_devnull() {
    struct stat st, dn;
    if (fstat(2, &st) != 0) return true;
    return S_ISCHR(st.st_mode) && stat("/dev/null", &dn) == 0 && st.st_rdev == dn.st_rdev;
}

void Relay::setup_process() {
    // fds 0-2 must be open so that pipes never land on them (containerd gives /dev/null).
    for (int fd = 0; fd <= 2; ++fd) {
        if (fcntl(fd, F_GETFD) < 0) {
            int n = open("/dev/null", O_RDWR);
            if (n >= 0 && n != fd) {
                dup2(n, fd);
                close(n);
            }
        }
    }
    sup_.setup();
    // Keep the heap small: large blocks go to mmap and are returned on free.
    mallopt(M_MMAP_THRESHOLD, 64 * 1024);
    mallopt(M_TRIM_THRESHOLD, 128 * 1024);
}

// After Configure (the plugin config's flags are final): the keeper is forked while the relay can
// still fork, then the relay confines itself (issue #12 §5). From then on it only moves bytes
// between the runtime's socket and its evaluators' pipes.
void Relay::confine() {
    confine_done_ = true;
    if (!sup_.fork_mode()) return;  // exec mode: the relay itself execs every child
    if (!sup_.start_keeper()) {
        logf("cannot fork the evaluator keeper: %s; the relay stays unconfined", strerror(errno));
        return;
    }
    if (!o_.confine || nriqos::sandbox_disabled_by_env()) return;
    std::string why = nriqos::confine_relay();
    sup_.set_confined();  // attempted: never fork again (a child would inherit what did apply)
    if (!why.empty()) logf("relay confinement incomplete: %s", why.c_str());
    else if (o_.debug) logf("confined: seccomp allow-list, no filesystem writes, no exec");
    if (o_.after_confine) o_.after_confine();
}

void relay_options_from_env(RelayOptions& o, const char* argv0) {
    const char* s = getenv("NRI_PLUGIN_SOCKET");
    if (s && *s) {
        char* end = nullptr;
        long v = strtol(s, &end, 10);
        if (end && *end == '\0' && v >= 0 && v < 65536) o.fd = int(v);
    }
    const char* name = getenv("NRI_PLUGIN_NAME");
    const char* idx = getenv("NRI_PLUGIN_IDX");
    std::string base = argv0 ? argv0 : "";
    auto slash = base.rfind('/');
    if (slash != std::string::npos) base = base.substr(slash + 1);
    bool nri_form = base.size() > 3 && isdigit((unsigned char)base[0]) && isdigit((unsigned char)base[1]) && base[2] == '-';
    if (name && *name) o.plugin_name = name;
    else if (nri_form) o.plugin_name = base.substr(3);
    if (idx && *idx) o.plugin_idx = idx;
    else if (nri_form) o.plugin_idx = base.substr(0, 2);
}

}  // namespace nriqos::nri
