// Private to src/cli (issue #23): what the files of `register` share, split out of register.cpp.
// Where things are defined (each file opens with what it owns):
//    register.cpp             the `register` / `unregister` commands (add_register_commands)
//    register_files.cpp       the one-line results and the file primitives below
//    register_v01.cpp         NRI v0.1: the plugin entry in /etc/nri/conf.json
//    register_native.cpp      native NRI: the plugin symlink in /opt/nri/plugins, the relay service
//    register_plan.cpp        reading the node's runtime: the mode to register, warnings, notes
//    register_containerd.cpp  editing containerd's config (--enable-nri, --pass-annotations)
// Not public API (register.hpp is): everything here is in the namespace
// nriqos::register_internal (it was file-local to register.cpp; the nested namespace keeps
// generic names such as read_file and dir_of out of nriqos).
#pragma once

#include <sys/types.h>
#include <sys/stat.h>

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/register.hpp"

namespace nriqos {
namespace register_internal {

using ojson = nlohmann::ordered_json;

// ---- register_files.cpp ------------------------------------------------------------------------

/// Success: exit 0, `changed`, "nri-qos: <msg>".
RegisterResult ok_result(bool changed, const std::string& msg);
/// Failure: exit `code` (1 refused/failed, 2 bad argument), "nri-qos: error: <msg>" on one line.
RegisterResult fail_result(const std::string& msg, int code = 1);
/// strerror(e).
std::string errno_text(int e);
/// The directory part of `path` ("." without a slash, "/" for a top-level name).
std::string dir_of(const std::string& path);
/// A plugin type / name: [A-Za-z0-9._-]+, not "." or ".." (it is exec'd as a binary name).
bool valid_type(const std::string& t);
/// mkdir -p with mode 0755; returns "" or an error text naming the failing component.
std::string make_dirs(const std::string& dir);

struct ReadOutcome {
    bool exists = false;  // file exists and is not whitespace-only
    std::string text;  // content
    std::string error;  // non-empty: could not read
    struct stat st {};  // valid when the file exists
};

/// Read a regular file (absent: exists false, no error; whitespace only: exists false, text kept).
ReadOutcome read_file(const std::string& path);
/// Resolve `path` to the file that must actually be rewritten: the target when `path` is a
/// symlink (so the link survives), `path` itself otherwise.
std::string write_target(const std::string& path);
/// Write `text` to `path` atomically (temp file in the same directory, fsync, rename, fsync of
/// the directory). `mode`/`uid`/`gid` are applied to the new file (uid == -1: leave as is).
std::string atomic_write(const std::string& path, const std::string& text, mode_t mode, uid_t uid, gid_t gid);

// ---- register_v01.cpp --------------------------------------------------------------------------

/// The plugin conf must be a JSON object the hook accepts: it refuses a conf with an unknown key
/// (a typo like "polcy") on every event, so none is written (policy_store.hpp plugin_conf_error).
RegisterResult check_plugin_conf(const ojson& plugin_conf);

// ---- register_plan.cpp -------------------------------------------------------------------------

/// The items of `v` joined by `sep`.
std::string join_list(const std::vector<std::string>& v, const std::string& sep = ", ");
/// containerd >= 1.7: it has native NRI.
bool containerd_native_capable(const RuntimeInfo& c);

}  // namespace register_internal
}  // namespace nriqos
