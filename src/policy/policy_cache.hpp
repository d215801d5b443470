// Compiled policy cache: the hot path must not parse TOML. A validated policy is compiled once
// into a compact flat binary form (format below), cached in a root-only directory keyed by the
// policy file's identity and the nri-qos build, and loaded cheaply afterwards.
//
// Cache file: <cache_dir>/policy-<16 hex digits of a hash of the policy path>.bin, mode 0600, in a
// directory owned by the effective uid and not writable by group/others (0700 when we create it).
// Written to a temporary file in the same directory and rename(2)d into place, so concurrent
// rebuilds are safe and readers see either the old or the new complete file.
//
// Flat format (host byte order; a foreign architecture fails the endianness probe or the key):
//   [0,8)   magic "NRIQOSPC"          [8,12)  u32 format version (kFormatVersion)
//   [12,16) u32 0x01020304            [16,24) u64 total file size
//   [24,32) u64 end of section A      [32,40) u64 checksum of section A
//   [40,48) u64 checksum of everything after the header
//   A       key, racy flag + policy text hash, SHA-256 of the policy text, status (0 valid,
//           1 broken: followed by the error and nothing else), policy version, settings of
//           flat block "head", source, guarded keys, settings of block "middle", resctrl groups,
//           settings of block "tail", classes, rule count, offset of section B, rule offset
//           table. Which settings each block holds, in which order and encoding: the one
//           declaration of [settings], policy_settings.hpp (FlatBlock, SettingType).
//   records one per rule: u32 length, u64 checksum, the rule
//   B       u64 checksum of the rest of B, the unindexed rule numbers, the rule index (sorted
//           (u32 anchor hash, u32 rule) pairs)
// Checksums are xxh64-style (hash64). A file up to 256 KiB (the bundled policy compiles to
// 3.5 KiB; ~2,000 rules) is verified whole: any damaged byte means a rebuild. A larger one is
// verified as it is used — A always, B and each rule record when read — so a hit on a
// 10,000-rule policy touches only what the request needs, and a damaged byte is never used.
// Every read is bounds-checked; any defect (magic, version, size, checksum, key, structure,
// unknown class) makes the file "not a hit": it is ignored and rebuilt from the TOML, never trusted.
//
// A policy that does not validate is cached too, as a "broken" entry holding its first error
// (same key, same racy rule): while the file stays broken, each event gets the error without
// parsing the TOML again, and goes on with the last good policy (policy_store.hpp).
//
// The same format carries the built-in policy (compiled at build time, key kBuiltinKey) and the
// last good copy of each policy (policy_store.hpp).
//
// Key: nri-qos version + the build's ELF GNU build-id (fallback: identity of /proc/self/exe) +
// the policy path + its (st_dev, st_ino, st_size, st_mtim, st_ctim). A policy modified within
// kRacySeconds of compilation could change without changing that identity (coarse timestamps):
// such an entry is stored "racy" with the hash of the policy text, verified on every load, and
// rewritten as a normal entry once the file is old enough (Git's "racily clean" index problem).
//
// Rule index: each rule is filed under one of its necessary conditions (a literal label or
// annotation value, a literal namespace / pod name / container name list, a label or annotation
// key), or under "always". load_policy_for materialises only the rules whose condition can hold
// for the request, in policy order: a superset of the matching rules, so classify() decides the
// same as on the full rule list (glob semantics: policy/glob.hpp glob_match — a pattern without
// "*?[" is compared literally; change kFormatVersion if that ever changes).
//
// Knob lists: an event uses the knobs of one class, so a filtered decode (one event) only steps
// over the classes' knob lists and keeps their bytes (Policy::packed_knobs); the pipeline decodes
// the chosen class's lists after classify (decode_knobs). A list that does not decode then (its
// bytes passed the checksums, so only a defect of the writer could do that) makes the pipeline
// load the policy again without a filter, which checks every list: the entry is Invalid, ignored
// and rebuilt from the TOML, as any damaged entry. No change of the file format.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <sys/stat.h>

#include "policy/policy.hpp"
#include "model/request.hpp"

namespace nriqos {

/// What load_policy_file found.
struct FileLoad {
    bool ok = false;  ///< `policy` holds the file's policy
    bool missing = false;  ///< the file does not exist (ENOENT / ENOTDIR)
    bool from_cache = false;  ///< answered from the cache (a valid or a broken entry)
    Policy policy;
    std::string text;  ///< the policy text, when it was read (cache miss) and is valid
    std::string sha256;  ///< of the policy text (hex), when known
    std::string error;  ///< !ok: one line, "<path>[:<line>]: <message>"
};

/// Load the policy file `path` through the cache in `cache_dir` ("" = no cache; `write` false =
/// read the cache but never write it). Never throws on a bad or missing file: the outcome is in
/// the result. With `filter`, a cache hit materialises only the rules that can match that
/// request (see load_policy_for) and leaves the knob lists encoded (policy_cache::decode_knobs).
/// `before_compile` (when set) is called once the text is read and before it is parsed and
/// compiled — only on a miss, the slow path (about a second per 10,000 rules: BENCHMARKS.md
/// "cold path"): the pipeline prepares its deadline answer from what it can know cheaply (the
/// text's settings.fail, compiling_policy_text + policy.hpp read_fail_mode; policy_store.hpp
/// last_good_fail_closed), since the compiled policy's own mode is known only afterwards.
FileLoad load_policy_file(const std::string& path, const std::string& cache_dir, const Request* filter, bool write = true,
                          const std::function<void()>* before_compile = nullptr);

/// While load_policy_file's `before_compile` runs: the policy text it is about to parse and
/// compile (valid until the hook returns); nullptr at any other time. (The hook keeps its
/// signature, and with it the hot path's code layout, src/hot-text.ld: the hook is built on every
/// event, the text is read only on a miss.) One event per process: not for concurrent loads.
const std::string* compiling_policy_text();

/// Load the policy at `path`, through the cache in `cache_dir` ("" = no cache). A corrupt,
/// truncated or foreign cache file is ignored and rebuilt, never trusted. `from_cache` tells
/// whether the cache was hit. Throws InputError like load_policy_toml. All rules are returned.
Policy load_policy(const std::string& path, const std::string& cache_dir, bool* from_cache = nullptr);

/// Like load_policy, but on a cache hit `rules` holds only the rules that can match `req`
/// (request after the sandbox memo was merged into it), in policy order. classify() gives the
/// same Decision as with all rules. Without a cache hit all rules are returned. This keeps the
/// cost of a cache hit independent of the number of rules (10,000 rules: see BENCHMARKS.md).
/// On a cache hit the classes' knob lists are still encoded: call policy_cache::decode_knobs
/// for the class classify() chose before reading its knobs.
Policy load_policy_for(const std::string& path, const std::string& cache_dir, const Request& req, bool* from_cache = nullptr);

/// Building blocks, exposed for tests and the benchmark.
namespace policy_cache {

constexpr uint32_t kFormatVersion =
    11;  ///< 11 (parallel branches merged): 10a classes' sandbox knob list (after pod) and knob cpu_bvt_warp_ns before raw (raw's id moved), 10b settings.katalyst_default_numa_exclusive / katalyst_dedicated_default_burst / katalyst_default_burst_percent, settings.evaluator_events, classes' container_cpu_weight_formula (high half of the pod formula byte); 9: knob ids of sched_policy..memory_policy_nodes before raw (raw's id moved); 2: SHA-256, broken entries, [guarded] (pol) / sink settings (ops); 3: both; 4: cpu_weight_formula 0 auto / 1 log-quadratic / 2 linear (was a bool: 1 meant linear); 5 (on parallel branches): settings.koordinator_quota_lift + classes' pod_cpu_weight_formula + rules' merge, or [resctrl.*] groups, or settings.leave_to_others; 6: the first two; 7: all three; 8: and settings.katalyst_reserved_cpus
constexpr int kRacySeconds = 2;  ///< policy younger than this: store as racy
constexpr size_t kMaxCacheBytes = 64u << 20;  ///< larger cache files are not read

/// Identity of this nri-qos build: "build-id:<hex>" from the ELF NT_GNU_BUILD_ID note of the
/// running executable, else "exe:<dev>:<ino>:<size>:<mtime ns>" of /proc/self/exe. Cached.
const std::string& build_identity();

/// Cache key bytes for the policy `path` with stat `st` (see the header comment).
std::string cache_key(const std::string& path, const struct stat& st);

/// File name (no directory) of the cache entry of `path`.
std::string cache_file_name(const std::string& path);

/// 64-bit checksum/hash used by the format (xxh64-style rounds; not cryptographic).
uint64_t hash64(const void* data, size_t n, uint64_t seed = 0);

/// Key of the built-in policy's compiled form (the bytes are part of the binary: no file
/// identity, no build-id).
constexpr std::string_view kBuiltinKey = "nri-qos built-in policy";

/// Compile a validated policy into the flat format. `racy` + `text_hash`: see the header
/// comment; `sha256`: of the policy text, carried for reports.
std::string compile(const Policy& p, const std::string& key, bool racy, uint64_t text_hash, const std::string& sha256 = "");

/// A "broken" entry: the policy text with this key does not validate; `error` says why.
std::string compile_broken(const std::string& key, bool racy, uint64_t text_hash, const std::string& sha256, const std::string& error);

/// Result of decoding a cache file.
enum class Decoded {
    Ok,  ///< `out` holds the policy
    Racy,  ///< valid, but racy: the caller must check the policy text hash (info->text_hash)
    Broken,  ///< a broken entry: info->error holds the error (check info->racy before trusting it)
    Invalid,  ///< corrupt, truncated, foreign or stale: ignore and rebuild
};

/// What a decoded entry says besides the policy.
struct DecodeInfo {
    uint64_t text_hash = 0;
    bool racy = false;
    std::string sha256;
    std::string error;  ///< Broken only
};

/// Decode `blob` if its key equals `key`. With `filter`, only the rules that can match that
/// request are materialised, and the classes' knob lists are left encoded (checked for bounds,
/// knob ids and value kinds only; ClassDef::knobs_pending) until decode_knobs decodes the one
/// class the event uses. Without `filter`, everything is decoded and checked. Never reads
/// outside `blob`; never throws.
Decoded decode(std::string_view blob, std::string_view key, const Request* filter, Policy& out, DecodeInfo* info = nullptr);

/// Decode the knob lists (ClassDef::container, ::pod, ::sandbox) of class `cls` of `p` when a filtered
/// decode left them encoded (ClassDef::knobs_pending); true at once when they are decoded
/// already. False when `cls` is unknown or its encoded lists do not decode (an unknown fact
/// name, a bad bound): the class is then left as it was, pending with empty lists (never
/// partly filled), and the caller must load the policy again without a filter, which checks
/// every list and rebuilds a damaged entry from the TOML (as any damaged entry). Never throws
/// except std::bad_alloc.
bool decode_knobs(Policy& p, const std::string& cls);

/// Read a cache-format file written by store_file (root-owned, not group/world-writable, in a
/// trusted directory, at most kMaxCacheBytes) and decode it. Invalid when absent or untrusted.
Decoded read_file(const std::string& dir, const std::string& name, std::string_view key, const Request* filter, Policy& out, DecodeInfo* info);

/// Keep the compiled entry of the policy file `path` (in `cache_dir`) in this process's memory, so
/// that later read_file calls for that entry decode the copy instead of checking the directory and
/// opening, checking and reading the file (7 syscalls of every native event). Called by the native
/// evaluator zygote before it clones each spare (src/nri/eval_pipeline.cpp): a spare inherits the
/// copy. Cheap when nothing changed (one stat of `path`: the copy is kept while the file's
/// identity — the cache key — is the same). A stale copy can never be used: decode checks the key,
/// and a mismatch reads the file as before. Never throws; without an entry on disk, keeps nothing.
/// Returns true when the copy held is the entry of the file as it is now (a hit for the next
/// event); false when there is none (no cache, no entry for the file's current identity: it
/// changed and was not compiled yet, or it cannot be stat'ed).
bool preload(const std::string& path, const std::string& cache_dir);

/// Write `bytes` as `dir/name` atomically (temp file + rename; `dir` created 0700, with parents,
/// and used only when owned by us and not writable by group/others). False when it could not.
bool store_file(const std::string& dir, const std::string& name, const std::string& bytes);

/// Hash of `path`-like text used in file names: 16 hex digits.
std::string name_hash(const std::string& s);

}  // namespace policy_cache
}  // namespace nriqos
