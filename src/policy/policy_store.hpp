// Which policy an event uses, and where it came from: the configured file, its last good copy,
// or the built-in policy. A policy is never missing and never silently off (issue 9 §4):
//
//   configured file valid            → the file (through the compiled cache)       source "file"
//   file broken (typo, unreadable,   → its last good copy, if there is one          source "last-good"
//     not a regular file, ...)         else the built-in policy                     source "builtin"
//     — and the error is reported on every event until the file is fixed
//   file missing, default path       → the built-in policy, no error                source "builtin"
//   file missing, other path         → as "broken" (a configured path that does not exist is a
//                                      mistake: last good copy, else built-in, with the error)
//
// Last good copy: every time a valid policy file is compiled into the shared cache (a
// compiled-cache miss of an event, explain, status, reconcile, or `nri-qos check --cache-dir`),
// its exact text is saved as
// <last_good_dir>/last-good-<16 hex digits of a hash of the path>.toml (mode 0600, atomic
// rename, only when it differs), its settings.fail in last-good-<same>.fail (read by a deadline
// that fires while a policy is being compiled), and is loaded like any policy file (through the
// compiled cache, so a broken state costs two small cache reads per event, no TOML parse). The default directory
// is /var/lib/nri-qos — persistent, unlike /run (emptied on reboot) where the compiled cache
// lives: a typo that is still there after a reboot must not drop the node to the built-in
// policy. The copy is text, not the compiled form, so a new nri-qos build re-validates it and a
// copy the new build rejects is not used. The directory and file must be owned by the effective
// uid and not writable by group or others, else they are ignored (never trusted).
#pragma once

#include <functional>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "policy/policy.hpp"
#include "model/request.hpp"

namespace nriqos {

enum class PolicySource { File, LastGood, Builtin };

/// "file", "last-good" or "builtin" (the Result metadata value of `policy`).
const char* policy_source_name(PolicySource s);

/// The policy in force for one event: what the Result metadata (`policy`, `policy_sha256`,
/// `policy_error`), explain, --version and the metrics
/// (nri_qos_policy_info{sha256,source}, nri_qos_policy_errors_total) report.
struct PolicyInfo {
    PolicySource source = PolicySource::Builtin;
    std::string path;  ///< the configured policy file
    std::string sha256;  ///< SHA-256 (hex) of the policy text in force (file, last good copy or bundled text)
    std::string error;  ///< "" or why the configured file is not in force, one line ("<file>:<line>: <message>")
    bool from_cache = false;  ///< the policy in force came from the compiled cache (or is built in)
    bool broken() const { return !error.empty(); }
    /// "" when !broken(), else one line for the Result metadata and stderr:
    /// "<error>; applying the last good copy (sha256 <12 hex>) until it is fixed" or
    /// "<error>; applying the built-in policy until it is fixed".
    std::string error_line() const;
};

/// Where the hook keeps copies of the policy.
struct PolicyPlaces {
    std::string cache_dir;  ///< compiled cache ("" = none)
    std::string last_good_dir;  ///< last good copies ("" = none kept, none used)
    /// false: use the cache and copies but write nothing (check, --version, the relay's probe).
    /// true: a file compiled on a cache miss is written to the cache and, when valid, saved as
    /// the last good copy — both, always: whatever puts an edited policy into the shared cache
    /// (an event, explain, status, reconcile) also makes it the last good copy, so that the
    /// next broken edit falls back to it and not to an older copy (issue 19 §2).
    bool write = true;
    /// With write but without a cache dir (nothing shared is written): save a compiled valid file
    /// as the last good copy anyway (events: true) or not (explain --cache-dir "": a dry run
    /// that leaves no state behind).
    bool save_uncached = true;
    /// Called before a policy text is parsed and compiled (a cache miss of the file or of its last
    /// good copy; see policy_cache.hpp load_policy_file). nullptr or empty: nothing. Not owned.
    const std::function<void()>* before_compile = nullptr;
};

/// The policy for an event (see the file comment). `default_path`: `path` is the default policy
/// location (a missing file there is not an error). With `filter`, only the rules that can match
/// that request are materialised, and the classes' knob lists stay encoded until
/// policy_cache::decode_knobs (policy_cache.hpp load_policy_for). Never throws for a bad or
/// missing policy; `info` says what was used and why.
Policy effective_policy(const std::string& path, bool default_path, const PolicyPlaces& where, const Request* filter, PolicyInfo& info);

/// Save `text` (a valid policy read from `path`) as the last good copy of `path` in `dir`, when
/// it differs from the copy there, and its settings.fail (`fail_closed`, when known) in the side
/// file beside it (last_good_mode_name) when that differs. Both atomically (store_file: a
/// temporary file, then rename(2)). Returns "" or a one-line error (never throws).
std::string save_last_good(const std::string& dir, const std::string& path, const std::string& text, std::optional<bool> fail_closed = std::nullopt);

/// The settings.fail of the last good copy of `path` in `dir` (true: "closed"), from its side
/// file — one small read, no TOML parse: what a deadline answers while the file itself is being
/// compiled and its own fail mode is not known yet. nullopt when there is no trusted side file
/// (same trust rule as the copy: owned by the effective uid, not writable by group or others).
std::optional<bool> last_good_fail_closed(const std::string& dir, const std::string& path);

/// File name of the fail-mode side file of `path`'s last good copy: "last-good-<16 hex>.fail",
/// holding "closed\n" or "open\n".
std::string last_good_mode_name(const std::string& path);

/// File name of the last good copy of `path` in its directory: "last-good-<16 hex>.toml".
std::string last_good_name(const std::string& path);

/// Keys the NRI v0.1 plugin `conf` object (conf.json's plugins[].conf, and
/// `register --plugin-conf`) may hold, with their meaning: currently only "policy" (a non-empty
/// path string, at most 4096 bytes).
/// Returns "" when `conf` is valid, else one line naming every problem, e.g.
/// "unknown key \"polcy\" (did you mean \"policy\"?; known: policy)".
std::string plugin_conf_error(const nlohmann::json& conf);

}  // namespace nriqos
