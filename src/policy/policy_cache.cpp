// The on-disk compiled-policy cache (policy_cache.hpp): the build identity and the cache key,
// cache file names, the trusted directory and files (ownership, mode, size; read(2) or mmap(2)),
// the atomic write (store_file), the racy check against the policy text, load_file (hit, broken
// entry or miss: parse, compile, store), the in-memory preload of the native evaluator, and the
// load_policy* entry points. The flat form itself (hash64, compile, decode): policy_flat.cpp.
#include "policy/policy_cache.hpp"
#include "policy/policy_flat.hpp"

#include "os/sha256.hpp"
#include "os/clock.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <ctime>
#include <fcntl.h>
#include <signal.h>
#include <link.h>
#include <sys/mman.h>
#include <unistd.h>

namespace nriqos {
namespace policy_cache {

namespace {

constexpr size_t kMmapThreshold = 256u << 10;  ///< larger files are mmap(2)ed instead of read(2)

// ---- build identity -----------------------------------------------------------------------
int find_build_id(struct dl_phdr_info* info, size_t, void* data) {
    auto* out = static_cast<std::string*>(data);
    for (int i = 0; i < info->dlpi_phnum; ++i) {
        const ElfW(Phdr)& ph = info->dlpi_phdr[i];
        if (ph.p_type != PT_NOTE) continue;
        const auto* p = reinterpret_cast<const unsigned char*>(info->dlpi_addr + ph.p_vaddr);
        size_t off = 0;
        while (off + sizeof(ElfW(Nhdr)) <= ph.p_memsz) {
            ElfW(Nhdr) nh;
            std::memcpy(&nh, p + off, sizeof nh);
            size_t name_at = off + sizeof nh, desc_at = name_at + ((nh.n_namesz + 3u) & ~3u);
            size_t next = desc_at + ((nh.n_descsz + 3u) & ~3u);
            if (next > ph.p_memsz) break;
            if (nh.n_type == NT_GNU_BUILD_ID && nh.n_namesz == 4 && std::memcmp(p + name_at, "GNU", 4) == 0 && nh.n_descsz > 0) {
                static const char hex[] = "0123456789abcdef";
                std::string s = "build-id:";
                for (size_t j = 0; j < nh.n_descsz; ++j) {
                    s += hex[p[desc_at + j] >> 4];
                    s += hex[p[desc_at + j] & 15];
                }
                *out = std::move(s);
                return 1;
            }
            off = next;
        }
    }
    return 1;  // only the main executable (first object) is of interest
}

bool read_fd(int fd, char* buf, size_t n) {
    size_t got = 0;
    while (got < n) {
        ssize_t k = read(fd, buf + got, n - got);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) return false;
        got += static_cast<size_t>(k);
    }
    return true;
}

/// The bytes of a cache file: read(2) for small files, a private read-only mapping for large
/// ones, of which only the pages used are touched (and checksummed).
class Blob {
public:
    ~Blob() {
        if (map_) munmap(map_, size_);
    }
    bool load(int fd, size_t size) {
        size_ = size;
        if (size >= kMmapThreshold) {
            void* m = mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
            if (m == MAP_FAILED) return false;
            map_ = m;
            return true;
        }
        buf_.resize(size);
        return read_fd(fd, buf_.data(), size);
    }
    std::string_view view() const {
        return map_ ? std::string_view(static_cast<const char*>(map_), size_) : std::string_view(buf_.data(), buf_.size());
    }

private:
    void* map_ = nullptr;
    size_t size_ = 0;
    std::string buf_;
};

/// Root-only directory: owned by us, not writable by group or others.
bool dir_trusted(const struct stat& st) { return S_ISDIR(st.st_mode) && st.st_uid == geteuid() && !(st.st_mode & 022); }

bool racy_now(const struct stat& st) {
    struct timespec now {};
    clock_gettime(CLOCK_REALTIME, &now);
    time_t newest = std::max(st.st_mtim.tv_sec, st.st_ctim.tv_sec);
    return now.tv_sec < newest + kRacySeconds;
}

/// Read the policy text (for the racy check); false when it cannot be read.
bool policy_text_hash(const std::string& path, uint64_t& h) {
    int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
    if (fd < 0) return false;
    struct stat st {};
    bool ok = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && static_cast<uint64_t>(st.st_size) <= kMaxPolicyBytes;
    std::string text;
    if (ok) {
        text.resize(static_cast<size_t>(st.st_size));
        ok = read_fd(fd, text.data(), text.size());
    }
    close(fd);
    if (ok) h = hash64(text.data(), text.size());
    return ok;
}

void mkdir_p(const std::string& dir) {
    for (size_t pos = dir.find('/', 1);; pos = dir.find('/', pos + 1)) {
        std::string part = dir.substr(0, pos);
        if (!part.empty() && mkdir(part.c_str(), 0700) != 0 && errno != EEXIST) return;
        if (pos == std::string::npos) break;
    }
}

/// True when `fd`'s file is a cache file we may trust: regular, ours, not group/world-writable,
/// not too large; its bytes are then in `blob`.
bool load_trusted(int fd, Blob& blob) {
    struct stat fst {};
    return fstat(fd, &fst) == 0 && S_ISREG(fst.st_mode) && fst.st_uid == geteuid() && !(fst.st_mode & 022) &&
           static_cast<size_t>(fst.st_size) <= kMaxCacheBytes && blob.load(fd, static_cast<size_t>(fst.st_size));
}

}  // namespace

namespace {
const std::string* g_compiling = nullptr;  // compiling_policy_text()
}  // namespace

FileLoad load_file(const std::string& path, const std::string& cache_dir, const Request* filter, bool write,
                   const std::function<void()>* before_compile) {
    FileLoad r;
    struct stat st {};
    if (stat(path.c_str(), &st) != 0) {
        r.missing = errno == ENOENT || errno == ENOTDIR;
        r.error = path + ": cannot open policy: " + std::strerror(errno);
        return r;
    }
    std::string key, name;
    if (!cache_dir.empty() && S_ISREG(st.st_mode)) {
        key = cache_key(path, st);
        name = cache_file_name(path);
        Policy p;
        DecodeInfo info;
        Decoded d = read_file(cache_dir, name, key, filter, p, &info);
        if (d == Decoded::Racy || (d == Decoded::Broken && info.racy)) {
            // Still the text it was compiled from: a hit while the file is young. Once it is old
            // enough, a normal entry is stored (below, from a fresh compile) so later loads skip
            // this check.
            uint64_t now_hash = 0;
            bool same = policy_text_hash(path, now_hash) && now_hash == info.text_hash;
            if (!same || !racy_now(st)) d = Decoded::Invalid;
            else if (d == Decoded::Racy) d = Decoded::Ok;
        }
        if (d == Decoded::Ok || d == Decoded::Broken) {
            r.from_cache = true;
            r.sha256 = std::move(info.sha256);
            if (d == Decoded::Broken) {
                r.error = std::move(info.error);
                return r;
            }
            r.ok = true;
            r.policy = std::move(p);
            return r;
        }
    }
    // Miss (or a racy entry whose file is now old enough: rewrite it as a normal entry).
    // read_policy_file checks (regular file, not procfs/sysfs, size) with its usual messages.
    // The text is hashed again afterwards: a policy that changed meanwhile is not stored (the
    // hash is what a racy entry is verified against).
    std::string text;
    try {
        text = read_policy_file(path);
    } catch (const InputError& e) {
        r.error = e.what();
        return r;
    }
    uint64_t before = hash64(text.data(), text.size());
    r.sha256 = sha256_hex(text);
    if (before_compile && *before_compile) {
        // The text is what the hook may read (compiling_policy_text) while it runs.
        struct Compiling {
            explicit Compiling(const std::string& t) { g_compiling = &t; }
            ~Compiling() { g_compiling = nullptr; }
        } compiling(text);
        (*before_compile)();
    }
    bool valid = false;
    try {
        r.policy = parse_policy_toml(text, path);
        valid = true;
    } catch (const InputError& e) { r.error = e.what(); }
    if (write && !key.empty()) {
        uint64_t after = 0;
        struct stat st2 {};
        if (policy_text_hash(path, after) && after == before && stat(path.c_str(), &st2) == 0 && cache_key(path, st2) == key)
            store_file(
                cache_dir, name,
                valid ? compile(r.policy, key, racy_now(st2), before, r.sha256) : compile_broken(key, racy_now(st2), before, r.sha256, r.error));
    }
    r.ok = valid;
    if (valid) r.text = std::move(text);
    return r;
}

namespace {
// preload(): one compiled entry held in memory (the zygote's, inherited by its spares).
struct Preloaded {
    std::string dir, name, key, bytes;
    bool racy = false;  // a racy entry is replaced on disk once the file is old enough: read again
};
Preloaded* g_preloaded = nullptr;  // never freed: lives as long as the process

// The cache file `dir`/`name` into `blob` when the directory and the file are trusted
// (dir_trusted, load_trusted); false when absent or untrusted.
bool read_trusted(const std::string& dir, const std::string& name, Blob& blob) {
    struct stat dst {};
    if (dir.empty() || stat(dir.c_str(), &dst) != 0 || !dir_trusted(dst)) return false;
    int fd = open((dir + "/" + name).c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY);
    if (fd < 0) return false;
    bool ok = load_trusted(fd, blob);
    close(fd);
    return ok;
}
}  // namespace

bool preload(const std::string& path, const std::string& cache_dir) {
    try {
        struct stat st {};
        if (cache_dir.empty() || stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return false;
        std::string key = cache_key(path, st), name = cache_file_name(path);
        if (g_preloaded && !g_preloaded->racy && g_preloaded->dir == cache_dir && g_preloaded->name == name && g_preloaded->key == key) return true;
        Blob blob;
        if (!read_trusted(cache_dir, name, blob)) return false;
        Policy p;
        DecodeInfo info;
        std::string_view v = blob.view();
        if (decode(v, key, nullptr, p, &info) == Decoded::Invalid) return false;  // stale or damaged: keep nothing new
        if (!g_preloaded) g_preloaded = new Preloaded;
        *g_preloaded = Preloaded{cache_dir, name, key, std::string(v), info.racy};
        return true;
    } catch (...) { return false; }
}

Decoded read_file(const std::string& dir, const std::string& name, std::string_view key, const Request* filter, Policy& out, DecodeInfo* info) {
    if (g_preloaded && g_preloaded->key == key && g_preloaded->dir == dir && g_preloaded->name == name) {
        Decoded d = decode(g_preloaded->bytes, key, filter, out, info);
        if (d != Decoded::Invalid) return d;
        out = Policy();
    }
    Blob blob;
    return read_trusted(dir, name, blob) ? decode(blob.view(), key, filter, out, info) : Decoded::Invalid;
}

const std::string& build_identity() {
    static const std::string id = [] {
        std::string s;
        dl_iterate_phdr(find_build_id, &s);
        if (s.empty()) {
            struct stat self {};
            if (stat("/proc/self/exe", &self) == 0)
                s = "exe:" + std::to_string(self.st_dev) + ":" + std::to_string(self.st_ino) + ":" + std::to_string(self.st_size) + ":" +
                    std::to_string(self.st_mtim.tv_sec) + "." + std::to_string(self.st_mtim.tv_nsec);
        }
        return s;
    }();
    return id;
}

std::string cache_key(const std::string& path, const struct stat& st) {
    Writer w;
    w.str("nri-qos " NRI_QOS_VERSION);
    w.str(build_identity());
    w.str(path);
    w.u64(static_cast<uint64_t>(st.st_dev));
    w.u64(static_cast<uint64_t>(st.st_ino));
    w.i64(static_cast<int64_t>(st.st_size));
    w.i64(static_cast<int64_t>(st.st_mtim.tv_sec));
    w.i64(st.st_mtim.tv_nsec);
    w.i64(static_cast<int64_t>(st.st_ctim.tv_sec));
    w.i64(st.st_ctim.tv_nsec);
    return std::move(w.b);
}

std::string name_hash(const std::string& s) {
    char buf[24];
    snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(hash64(s.data(), s.size(), 0x6e7269)));
    return buf;
}

std::string cache_file_name(const std::string& path) { return "policy-" + name_hash(path) + ".bin"; }

bool store_file(const std::string& dir, const std::string& name, const std::string& bytes) {
    mkdir_p(dir);
    int dfd = open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0) return false;
    struct stat dst {};
    if (fstat(dfd, &dst) != 0 || !dir_trusted(dst)) {
        close(dfd);
        return false;
    }
    const int64_t nsec = monotonic_ns() % 1000000000;  // the clock's nanoseconds within its second
    char tmp[96];
    snprintf(tmp, sizeof tmp, ".%.40s.%d.%lx.tmp", name.c_str(), static_cast<int>(getpid()), static_cast<unsigned long>(nsec));
    // The deadline's handler _exit()s: held back from the temporary file's creation to its
    // rename or removal, so that it never leaves a .tmp behind (it fires right after).
    sigset_t alrm, old_mask;
    sigemptyset(&alrm);
    sigaddset(&alrm, SIGALRM);
    sigprocmask(SIG_BLOCK, &alrm, &old_mask);
    int fd = openat(dfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    bool stored = false;
    if (fd >= 0) {
        size_t off = 0;
        bool ok = true;
        while (ok && off < bytes.size()) {
            ssize_t n = write(fd, bytes.data() + off, bytes.size() - off);
            if (n < 0 && errno == EINTR) continue;
            ok = n > 0;
            if (ok) off += static_cast<size_t>(n);
        }
        ok = close(fd) == 0 && ok;
        stored = ok && renameat(dfd, tmp, dfd, name.c_str()) == 0;
        if (!stored) unlinkat(dfd, tmp, 0);
    }
    sigprocmask(SIG_SETMASK, &old_mask, nullptr);
    close(dfd);
    return stored;
}

}  // namespace policy_cache

const std::string* compiling_policy_text() { return policy_cache::g_compiling; }

FileLoad load_policy_file(const std::string& path, const std::string& cache_dir, const Request* filter, bool write,
                          const std::function<void()>* before_compile) {
    return policy_cache::load_file(path, cache_dir, filter, write, before_compile);
}

namespace {
Policy load_or_throw(const std::string& path, const std::string& cache_dir, const Request* filter, bool* from_cache) {
    FileLoad r = policy_cache::load_file(path, cache_dir, filter, true, nullptr);
    if (from_cache) *from_cache = r.from_cache && r.ok;
    if (!r.ok) throw InputError(r.error);
    return std::move(r.policy);
}
}  // namespace

Policy load_policy(const std::string& path, const std::string& cache_dir, bool* from_cache) {
    return load_or_throw(path, cache_dir, nullptr, from_cache);
}

Policy load_policy_for(const std::string& path, const std::string& cache_dir, const Request& req, bool* from_cache) {
    return load_or_throw(path, cache_dir, &req, from_cache);
}

}  // namespace nriqos
