// Unit tests for src/cli/register.{hpp,cpp}: NRI v0.1 conf.json editing and the native NRI
// plugin symlink. Every case checks the exact file content / message / exit code.
#include "../scratch.hpp"
#include <catch2/catch.hpp>

#include <dirent.h>
#include <fcntl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "event/detect.hpp"
#include "policy/policy.hpp"
#include "policy/policy_builtin.hpp"
#include "cli/register.hpp"

namespace {

using nriqos::RegisterResult;

/// A fresh scratch directory, removed (recursively) at scope exit (tests/unit/scratch.hpp).
struct TempDir : unit::ScratchDir {
    TempDir() : ScratchDir("register-test") {}
};

std::string slurp(const std::string& p) {
    std::ifstream f(p, std::ios::binary);
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
}

void spit(const std::string& p, const std::string& text) {
    std::ofstream f(p, std::ios::binary | std::ios::trunc);
    f << text;
}

bool exists(const std::string& p) {
    struct stat st {};
    return ::lstat(p.c_str(), &st) == 0;
}

std::vector<std::string> entries(const std::string& dir) {
    std::vector<std::string> out;
    if (DIR* d = ::opendir(dir.c_str())) {
        while (struct dirent* e = ::readdir(d)) {
            std::string n = e->d_name;
            if (n != "." && n != "..") out.push_back(n);
        }
        ::closedir(d);
    }
    std::sort(out.begin(), out.end());
    return out;
}

const char* kFresh =
    "{\n"
    "  \"version\": \"0.1\",\n"
    "  \"plugins\": [\n"
    "    {\n"
    "      \"type\": \"nri-qos\",\n"
    "      \"conf\": {}\n"
    "    }\n"
    "  ]\n"
    "}\n";

const char* kOther =
    "{\"version\":\"0.1\",\"plugins\":[{\"type\":\"other\",\"conf\":{\"b\":1,\"a\":[1,2]}}],"
    "\"zeta\":{\"y\":1,\"x\":2}}";

/// Put an executable `nri-qos` on PATH for the rest of the test process: `register` warns about
/// a conf.json entry whose binary containerd cannot find (issue #31 §6), which a test that
/// registers "nri-qos" and wants no warning must not meet.
void nri_qos_on_path() {
    static const unit::ScratchDir d("register-path");  // removed at the test process's exit
    static const bool done = [] {
        const std::string f = d / "nri-qos";
        spit(f, "#!/bin/sh\n");
        ::chmod(f.c_str(), 0755);
        const char* old = std::getenv("PATH");
        ::setenv("PATH", (d.path + ":" + (old ? old : "/usr/bin:/bin")).c_str(), 1);
        return true;
    }();
    (void)done;
}

/// A scratch state dir for `register` (it records the annotations the runtime passes there:
/// never the host's /run/nri-qos from a unit test).
std::string register_state_dir() {
    static const unit::ScratchDir d("register-state");  // removed at the test process's exit
    return d.path;
}
/// `args` with --state-dir register_state_dir() after a leading "register".
std::vector<std::string> with_scratch_state(std::vector<std::string> args) {
    if (!args.empty() && args[0] == "register") args.insert(args.begin() + 1, {"--state-dir", register_state_dir()});
    return args;
}

}  // namespace

TEST_CASE("register_v01: absent file and directories are created", "[register]") {
    TempDir t;
    std::string p = t / "etc/nri/conf.json";
    RegisterResult r = nriqos::register_v01(p, "nri-qos", nlohmann::json::object());
    CHECK(r.exit_code == 0);
    CHECK(r.changed);
    CHECK(r.message == "nri-qos: registered \"nri-qos\" in " + p + " (new file; NRI v0.1 reads it at every pod/container event)");
    CHECK(slurp(p) == kFresh);
    struct stat st {};
    REQUIRE(::stat(p.c_str(), &st) == 0);
    CHECK((st.st_mode & 07777) == 0644);
    REQUIRE(::stat((t / "etc/nri").c_str(), &st) == 0);
    CHECK((st.st_mode & 07777) == 0755);
    CHECK(entries(t / "etc/nri") == std::vector<std::string>{"conf.json"});  // no temp file left

    // Idempotent: second run changes nothing, not even the inode.
    struct stat before {};
    ::stat(p.c_str(), &before);
    r = nriqos::register_v01(p, "nri-qos", nlohmann::json::object());
    CHECK(r.exit_code == 0);
    CHECK_FALSE(r.changed);
    CHECK(r.message == "nri-qos: \"nri-qos\" already registered in " + p + " (unchanged)");
    struct stat after {};
    ::stat(p.c_str(), &after);
    CHECK(before.st_ino == after.st_ino);
}

TEST_CASE("register_v01: empty or whitespace-only file is treated as absent, mode kept", "[register]") {
    TempDir t;
    std::string p = t / "conf.json";
    spit(p, GENERATE(std::string(""), std::string(" \n\t\n")));
    ::chmod(p.c_str(), 0600);
    RegisterResult r = nriqos::register_v01(p, "nri-qos", nlohmann::json::object());
    CHECK(r.exit_code == 0);
    CHECK(slurp(p) == kFresh);
    struct stat st {};
    ::stat(p.c_str(), &st);
    CHECK((st.st_mode & 07777) == 0600);
}

TEST_CASE("register_v01: other plugins and keys are kept in order", "[register]") {
    TempDir t;
    std::string p = t / "conf.json";
    spit(p, kOther);
    ::chmod(p.c_str(), 0640);
    nlohmann::ordered_json conf = nlohmann::ordered_json::parse(R"({"policy":"/p.toml"})");
    RegisterResult r = nriqos::register_v01_ordered(p, "nri-qos", conf);
    CHECK(r.exit_code == 0);
    CHECK(r.changed);
    CHECK(r.message == "nri-qos: registered \"nri-qos\" in " + p + " (NRI v0.1 reads it at every pod/container event)");
    CHECK(slurp(p) ==
          "{\n"
          "  \"version\": \"0.1\",\n"
          "  \"plugins\": [\n"
          "    {\n"
          "      \"type\": \"other\",\n"
          "      \"conf\": {\n"
          "        \"b\": 1,\n"
          "        \"a\": [\n"
          "          1,\n"
          "          2\n"
          "        ]\n"
          "      }\n"
          "    },\n"
          "    {\n"
          "      \"type\": \"nri-qos\",\n"
          "      \"conf\": {\n"
          "        \"policy\": \"/p.toml\"\n"
          "      }\n"
          "    }\n"
          "  ],\n"
          "  \"zeta\": {\n"
          "    \"y\": 1,\n"
          "    \"x\": 2\n"
          "  }\n"
          "}\n");
    struct stat st {};
    ::stat(p.c_str(), &st);
    CHECK((st.st_mode & 07777) == 0640);

    // Unregister restores the other plugin and keys (normalised formatting).
    r = nriqos::unregister_v01(p, "nri-qos");
    CHECK(r.exit_code == 0);
    CHECK(r.changed);
    CHECK(r.message == "nri-qos: unregistered \"nri-qos\" from " + p);
    CHECK(nlohmann::ordered_json::parse(slurp(p)) == nlohmann::ordered_json::parse(kOther));
    CHECK(nlohmann::ordered_json::parse(slurp(p)).dump() == kOther);  // same key order
    ::stat(p.c_str(), &st);
    CHECK((st.st_mode & 07777) == 0640);

    // Nothing left to remove.
    r = nriqos::unregister_v01(p, "nri-qos");
    CHECK(r.exit_code == 0);
    CHECK_FALSE(r.changed);
    CHECK(r.message == "nri-qos: \"nri-qos\" not registered in " + p);
}

TEST_CASE("register_v01: existing entry is updated in place, duplicates dropped", "[register]") {
    TempDir t;
    std::string p = t / "conf.json";
    const std::string old = R"({"plugins":[{"type":"nri-qos","conf":{"old":1},"extra":"x"},{"type":"other"},)"
                            R"({"type":"nri-qos","conf":{}}],"version":"0.1"})";
    spit(p, old);

    SECTION("explicit conf replaces the old one, entry's other members kept") {
        RegisterResult r = nriqos::register_v01(p, "nri-qos", nlohmann::json{{"policy", "/new.toml"}});
        CHECK(r.exit_code == 0);
        CHECK(r.message == "nri-qos: updated \"nri-qos\" in " + p + " (NRI v0.1 reads it at every pod/container event)");
        CHECK(nlohmann::ordered_json::parse(slurp(p)).dump() ==
              R"({"plugins":[{"type":"nri-qos","conf":{"policy":"/new.toml"},"extra":"x"},{"type":"other"}],"version":"0.1"})");
    }
    SECTION("replace_conf=false keeps the administrator's conf (package upgrade)") {
        RegisterResult r = nriqos::register_v01(p, "nri-qos", nlohmann::json::object(), /*replace_conf=*/false);
        CHECK(r.exit_code == 0);
        // ... and says that the hook refuses it (a key other than "policy").
        CHECK(r.message.find("; warning: its conf has an error the hook reports on every event (unknown key \"old\" (known: policy))") !=
              std::string::npos);
        CHECK(nlohmann::ordered_json::parse(slurp(p)).dump() ==
              R"({"plugins":[{"type":"nri-qos","conf":{"old":1},"extra":"x"},{"type":"other"}],"version":"0.1"})");
    }
    SECTION("unregister removes every entry of our type and keeps the file") {
        RegisterResult r = nriqos::unregister_v01(p, "nri-qos");
        CHECK(r.exit_code == 0);
        CHECK(nlohmann::ordered_json::parse(slurp(p)).dump() == R"({"plugins":[{"type":"other"}],"version":"0.1"})");
    }
}

TEST_CASE("register_v01: invalid JSON is refused and the file left untouched", "[register]") {
    TempDir t;
    std::string p = t / "conf.json";
    const std::string bad = "{\"version\":\"0.1\",\n\"plugins\":[{\"type\":\"other\"},]}\n";
    spit(p, bad);
    RegisterResult r = nriqos::register_v01(p, "nri-qos", nlohmann::json::object());
    CHECK(r.exit_code == 1);
    CHECK_FALSE(r.changed);
    CHECK(r.message == "nri-qos: error: " + p +
                           " is not valid JSON (parse error at line 2, column 29: syntax error while parsing "
                           "value - unexpected ']'; expected '[', '{', or a literal); left untouched");
    CHECK(slurp(p) == bad);
    CHECK(entries(t.path) == std::vector<std::string>{"conf.json"});

    r = nriqos::unregister_v01(p, "nri-qos");
    CHECK(r.exit_code == 1);
    CHECK(slurp(p) == bad);
}

TEST_CASE("register_v01: wrong shape is refused and the file left untouched", "[register]") {
    TempDir t;
    std::string p = t / "conf.json";
    struct Case {
        std::string text, why;
    };
    auto c = GENERATE(Case{"[]", "top level is not an object"}, Case{R"({"plugins":{}})", "\"plugins\" is not an array"},
                      Case{R"({"version":1,"plugins":[]})", "\"version\" is not a string"},
                      Case{R"({"plugins":["nri-qos"]})", "plugins[0] is not an object"},
                      Case{R"({"plugins":[{"type":"a"},{"conf":{}}]})", "plugins[1] has no string \"type\""},
                      Case{R"({"plugins":[{"type":7}]})", "plugins[0] has no string \"type\""});
    spit(p, c.text);
    const std::string want = "nri-qos: error: " + p + " is not an NRI v0.1 config: " + c.why + "; left untouched";
    RegisterResult r = nriqos::register_v01(p, "nri-qos", nlohmann::json::object());
    CHECK(r.exit_code == 1);
    CHECK(r.message == want);
    CHECK(slurp(p) == c.text);
    r = nriqos::unregister_v01(p, "nri-qos");
    CHECK(r.exit_code == 1);
    CHECK(r.message == want);
    CHECK(slurp(p) == c.text);
}

TEST_CASE("register_v01: missing plugins array is appended, missing version not added", "[register]") {
    TempDir t;
    std::string p = t / "conf.json";
    spit(p, R"({"comment":"site"})");
    RegisterResult r = nriqos::register_v01(p, "nri-qos", nlohmann::json::object());
    CHECK(r.exit_code == 0);
    CHECK(nlohmann::ordered_json::parse(slurp(p)).dump() == R"({"comment":"site","plugins":[{"type":"nri-qos","conf":{}}]})");
}

TEST_CASE("register_v01: bad arguments", "[register]") {
    TempDir t;
    std::string p = t / "conf.json";
    RegisterResult r = nriqos::register_v01(p, "../evil", nlohmann::json::object());
    CHECK(r.exit_code == 2);
    CHECK(r.message == "nri-qos: error: invalid plugin type \"../evil\" (allowed: letters, digits, '.', '_', '-')");
    r = nriqos::register_v01(p, "nri-qos", nlohmann::json::array({1}));
    CHECK(r.exit_code == 2);
    CHECK(r.message == "nri-qos: error: plugin conf must be a JSON object, got array");
    CHECK_FALSE(exists(p));
}

TEST_CASE("register_v01: unwritable locations give a clear error", "[register]") {
    TempDir t;
    SECTION("parent path is a regular file") {
        spit(t / "file", "x");
        std::string p = t / "file/nri/conf.json";
        RegisterResult r = nriqos::register_v01(p, "nri-qos", nlohmann::json::object());
        CHECK(r.exit_code == 1);
        CHECK(r.message == "nri-qos: error: cannot read " + p + ": Not a directory");
        CHECK(slurp(t / "file") == "x");
    }
    SECTION("conf path is a directory") {
        ::mkdir((t / "conf.json").c_str(), 0755);
        RegisterResult r = nriqos::register_v01(t / "conf.json", "nri-qos", nlohmann::json::object());
        CHECK(r.exit_code == 1);
        CHECK(r.message == "nri-qos: error: cannot read " + (t / "conf.json") + ": Is a directory");
    }
    SECTION("read-only file system (tmpfs mounted ro; root bypasses mode bits, not EROFS)") {
        std::string d = t / "ro";
        ::mkdir(d.c_str(), 0755);
        if (::mount("tmpfs", d.c_str(), "tmpfs", 0, "size=64k") != 0) {
            WARN("cannot mount tmpfs (not root / no CAP_SYS_ADMIN): read-only case not run");
            return;
        }
        struct Unmount {
            std::string dir;
            ~Unmount() { ::umount2(dir.c_str(), MNT_DETACH); }
        } unmount{d};
        spit(d + "/conf.json", kOther);
        REQUIRE(::mount("tmpfs", d.c_str(), nullptr, MS_REMOUNT | MS_RDONLY, nullptr) == 0);
        RegisterResult r = nriqos::register_v01(d + "/conf.json", "nri-qos", nlohmann::json::object());
        RegisterResult r2 = nriqos::register_v01(d + "/sub/conf.json", "nri-qos", nlohmann::json::object());
        RegisterResult r3 = nriqos::unregister_v01(d + "/conf.json", "other");
        const std::string after = slurp(d + "/conf.json");
        CHECK(r.exit_code == 1);
        CHECK(r.message == "nri-qos: error: cannot write " + d + "/conf.json: cannot create a temporary file in " + d + ": Read-only file system");
        CHECK(r2.exit_code == 1);
        CHECK(r2.message == "nri-qos: error: cannot create directory " + d + "/sub: Read-only file system");
        CHECK(r3.exit_code == 1);
        CHECK(after == kOther);
    }
}

TEST_CASE("register_v01: a symlinked conf.json is edited through the link", "[register]") {
    TempDir t;
    spit(t / "real.json", kOther);
    REQUIRE(::symlink((t / "real.json").c_str(), (t / "conf.json").c_str()) == 0);
    RegisterResult r = nriqos::register_v01(t / "conf.json", "nri-qos", nlohmann::json::object());
    CHECK(r.exit_code == 0);
    struct stat st {};
    ::lstat((t / "conf.json").c_str(), &st);
    CHECK(S_ISLNK(st.st_mode));
    CHECK(nlohmann::ordered_json::parse(slurp(t / "real.json"))["plugins"][1]["type"] == "nri-qos");
}

TEST_CASE("unregister_v01: absent file, and the file created by register is removed", "[register]") {
    TempDir t;
    std::string p = t / "nri/conf.json";
    RegisterResult r = nriqos::unregister_v01(p, "nri-qos");
    CHECK(r.exit_code == 0);
    CHECK_FALSE(r.changed);
    CHECK(r.message == "nri-qos: \"nri-qos\" not registered (" + p + " absent or empty)");
    CHECK_FALSE(exists(p));

    REQUIRE(nriqos::register_v01(p, "nri-qos", nlohmann::json{{"policy", "/a.toml"}}).ok());
    r = nriqos::unregister_v01(p, "nri-qos");
    CHECK(r.exit_code == 0);
    CHECK(r.message == "nri-qos: unregistered \"nri-qos\": removed " + p + " (it listed no other plugin)");
    CHECK_FALSE(exists(p));
    CHECK(exists(t / "nri"));  // the directory is left alone

    // Same plugin list but an extra key: not ours alone → file kept with an empty list.
    spit(p, R"({"version":"0.1","plugins":[{"type":"nri-qos","conf":{}}],"site":1})");
    r = nriqos::unregister_v01(p, "nri-qos");
    CHECK(r.exit_code == 0);
    CHECK(slurp(p) == "{\n  \"version\": \"0.1\",\n  \"plugins\": [],\n  \"site\": 1\n}\n");
}

TEST_CASE("enable_native / disable_native manage the NN-nri-qos symlink", "[register]") {
    TempDir t;
    std::string bin = t / "bin/nri-qos";
    ::mkdir((t / "bin").c_str(), 0755);
    spit(bin, "#!/bin/sh\n");
    ::chmod(bin.c_str(), 0755);
    std::string dir = t / "plugins";

    RegisterResult r = nriqos::enable_native(dir, "10", bin);
    CHECK(r.exit_code == 0);
    CHECK(r.changed);
    CHECK(r.message == "nri-qos: enabled native NRI plugin " + dir + "/10-nri-qos -> " + bin + " (restart the runtime, e.g. containerd, to load it)");
    char buf[4096] = {};
    REQUIRE(::readlink((dir + "/10-nri-qos").c_str(), buf, sizeof buf - 1) > 0);
    CHECK(std::string(buf) == bin);

    r = nriqos::enable_native(dir, "10", bin);
    CHECK(r.exit_code == 0);
    CHECK_FALSE(r.changed);
    CHECK(r.message == "nri-qos: native NRI plugin " + dir + "/10-nri-qos -> " + bin + " already in place");

    // Moving the index removes the old link.
    r = nriqos::enable_native(dir, "05", bin);
    CHECK(r.exit_code == 0);
    CHECK(entries(dir) == std::vector<std::string>{"05-nri-qos"});
    CHECK(r.message == "nri-qos: enabled native NRI plugin " + dir + "/05-nri-qos -> " + bin +
                           "; removed 10-nri-qos (restart the runtime, e.g. containerd, to load it)");

    // Bad arguments.
    CHECK(nriqos::enable_native(dir, "5", bin).message == "nri-qos: error: invalid plugin index \"5\" (need two digits, 00-99)");
    CHECK(nriqos::enable_native(dir, "10", "bin/nri-qos").exit_code == 2);
    CHECK(nriqos::enable_native(dir, "10", t / "nope").message == "nri-qos: error: cannot use " + (t / "nope") + ": No such file or directory");
    spit(dir + "/20-nri-qos", "copy");
    CHECK(nriqos::enable_native(dir, "20", bin).message == "nri-qos: error: " + dir + "/20-nri-qos exists and is not a symlink (remove it first)");

    // disable: only symlinks to our binary go; the foreign copy is reported and kept.
    r = nriqos::disable_native(dir, "", bin);
    CHECK(r.exit_code == 1);
    CHECK(r.message == "nri-qos: error: removed " + dir + "/05-nri-qos; kept " + dir + "/20-nri-qos: not a symlink to " + bin);
    CHECK(entries(dir) == std::vector<std::string>{"20-nri-qos"});
    ::unlink((dir + "/20-nri-qos").c_str());
    r = nriqos::disable_native(dir, "", bin);
    CHECK(r.exit_code == 0);
    CHECK_FALSE(r.changed);
    CHECK(r.message == "nri-qos: no native NRI plugin entry for \"nri-qos\" in " + dir);
    // A dangling link to our path (binary already removed) is still removed.
    ::symlink(bin.c_str(), (dir + "/10-nri-qos").c_str());
    ::unlink(bin.c_str());
    r = nriqos::disable_native(dir, "10", bin);
    CHECK(r.exit_code == 0);
    CHECK(r.message == "nri-qos: disabled native NRI plugin: removed " + dir + "/10-nri-qos (restart the runtime to stop the running relay)");
    CHECK(entries(dir).empty());
}

TEST_CASE("add_register_commands: CLI wiring and exit codes", "[register]") {
    TempDir t;
    std::string p = t / "conf.json";
    // --mode v01: the conf.json contract under test; auto would detect a containerd >= 1.7
    // running on this host (an e2e suite) and register natively instead.
    auto run = [](std::vector<std::string> args) {
        args = with_scratch_state(std::move(args));
        CLI::App app{"nri-qos"};
        nriqos::add_register_commands(app);
        std::vector<const char*> argv{"nri-qos"};
        for (auto& a : args) argv.push_back(a.c_str());
        try {
            app.parse(static_cast<int>(argv.size()), const_cast<char**>(argv.data()));
        } catch (const CLI::ParseError& e) { return app.exit(e); }
        return 0;
    };
    CHECK(run({"register", "--mode", "v01", "--conf-json", p, "--plugin-conf", R"({"policy":"/b.toml"})"}) == 0);
    CHECK(nlohmann::ordered_json::parse(slurp(p)).dump() == R"({"version":"0.1","plugins":[{"type":"nri-qos","conf":{"policy":"/b.toml"}}]})");
    // Without --plugin-conf an existing entry keeps its conf.
    CHECK(run({"register", "--mode", "v01", "--conf-json", p}) == 0);
    CHECK(nlohmann::ordered_json::parse(slurp(p)).dump() == R"({"version":"0.1","plugins":[{"type":"nri-qos","conf":{"policy":"/b.toml"}}]})");
    // A settings typo is an error (exit 2), never written: the hook would refuse it.
    CHECK(run({"register", "--mode", "v01", "--conf-json", p, "--plugin-conf", R"({"polcy":"/c.toml"})"}) == 2);
    CHECK(run({"register", "--mode", "v01", "--conf-json", p, "--plugin-conf", R"({"policy":"/c.toml","debug":true})"}) == 2);
    CHECK(run({"register", "--mode", "v01", "--conf-json", p, "--plugin-conf", R"({"policy":7})"}) == 2);
    CHECK(nlohmann::ordered_json::parse(slurp(p)).dump() == R"({"version":"0.1","plugins":[{"type":"nri-qos","conf":{"policy":"/b.toml"}}]})");
    CHECK(run({"register", "--mode", "v01", "--conf-json", p, "--plugin-conf", "{"}) == 2);
    CHECK(run({"register", "--mode", "v01", "--conf-json", p, "--plugin-conf", "[]"}) == 2);
    spit(t / "bad.json", "nope");
    CHECK(run({"register", "--mode", "v01", "--conf-json", t / "bad.json"}) == 1);
    CHECK(slurp(t / "bad.json") == "nope");
    CHECK(run({"unregister", "--conf-json", p}) == 0);
    CHECK_FALSE(exists(p));
}

// ---- register reads real nodes (issue #20 §4, issue #25 §1): containerd `imports`, iSulad,
// CRI-O, NRI disabled, --enable-nri, the pod_annotations allow-list, --pass-annotations. The
// CLI cases use only the `register` command, so they also run against the code before the
// change (where they fail). Fixture configs are written to scratch directories.

namespace {

/// Run `nri-qos ARGS`; stdout+stderr of the command in `out`, the exit status returned.
int run_cli(std::vector<std::string> args, std::string& out) {
    args = with_scratch_state(std::move(args));
    CLI::App app{"nri-qos"};
    nriqos::add_register_commands(app);
    std::vector<const char*> argv{"nri-qos"};
    for (auto& a : args) argv.push_back(a.c_str());
    std::ostringstream cap;
    auto* old_err = std::cerr.rdbuf(cap.rdbuf());
    auto* old_out = std::cout.rdbuf(cap.rdbuf());
    int rc = 0;
    try {
        app.parse(static_cast<int>(argv.size()), const_cast<char**>(argv.data()));
    } catch (const CLI::ParseError& e) { rc = app.exit(e, cap, cap); }
    std::cerr.rdbuf(old_err);
    std::cout.rdbuf(old_out);
    out = cap.str();
    return rc;
}

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

/// The backup directory of a test in scratch dir `dir` (register --backup-dir).
std::string bdir(const std::string& dir) { return dir + "/backup"; }

/// Backups of `<dir>/<base>`: `<bdir(dir)><dir>/<base>.<stamp>` (register keeps the file's
/// absolute path under its backup directory).
std::vector<std::string> backups(const std::string& dir, const std::string& base) {
    std::vector<std::string> out;
    for (const auto& e : entries(bdir(dir) + dir))
        if (e.rfind(base + ".", 0) == 0) out.push_back(bdir(dir) + dir + "/" + e);
    return out;
}

/// Any file named like an old-style backup `*.nri-qos.bak.*` below `dir`, but outside bdir(dir).
std::vector<std::string> stray_backups(const std::string& dir) {
    std::vector<std::string> out;
    for (const auto& e : entries(dir)) {
        const std::string p = dir + "/" + e;
        if (p == bdir(dir)) continue;
        struct stat st {};
        if (::stat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode))
            for (const auto& x : stray_backups(p)) out.push_back(x);
        else if (e.find(".nri-qos.bak.") != std::string::npos) out.push_back(p);
    }
    return out;
}

const char* kPolicyFixture =
    "version = 1\n"
    "[settings]\n"
    "default_class = \"BE\"\n"
    "[[rules]]\n"
    "name = \"tier\"\n"
    "class = \"BE\"\n"
    "match.annotations = { \"example.com/tier\" = \"batch\" }\n"
    "[classes.BE]\n"
    "description = \"batch\"\n"
    "[classes.BE.container]\n"
    "cpu_shares = { fact = \"koordinator.batch_cpu_shares\" }\n";

}  // namespace

TEST_CASE("register: containerd config imports are followed (drop-in enables NRI)", "[register][node]") {
    TempDir t;
    ::mkdir((t / "conf.d").c_str(), 0755);
    spit(t / "config.toml", "version = 2\nimports = [\"" + t.path +
                                "/conf.d/*.toml\"]\n"
                                "[plugins.\"io.containerd.nri.v1.nri\"]\n  disable = true\n");
    spit(t / "conf.d/50-nri.toml",
         "version = 2\n[plugins.\"io.containerd.nri.v1.nri\"]\n  disable = false\n"
         "  plugin_path = \"" +
             t.path + "/plugins\"\n");
    std::string out;
    int rc = run_cli({"register", "--containerd-config", t / "config.toml", "--containerd-version", "1.7.20", "--conf-json", t / "conf.json",
                      "--plugins-dir", t / "plugins", "--binary", "/bin/sh", "--isulad-config", t / "none.json", "--crio-config", t / "none.conf"},
                     out);
    INFO(out);
    CHECK(rc == 0);
    // The drop-in's section replaces the main file's: native NRI is on, the plugin is linked.
    CHECK(exists(t / "plugins/10-nri-qos"));
    CHECK_FALSE(exists(t / "conf.json"));
    CHECK_FALSE(has(out, "WARNING"));
}

TEST_CASE("register: never the launched plugin beside a running relay service (a package upgrade's postinst)", "[register][node]") {
    // The node VM's deb-upgrade (tests/e2e/containerd17.sh): the operator switched to
    // nri-qos-relay.service (unregister --native); the upgrade's postinst ran `nri-qos register`,
    // which linked /opt/nri/plugins/10-nri-qos again: a second 10-nri-qos at containerd's next start.
    TempDir t;
    spit(t / "config.toml",
         "version = 2\n[plugins.\"io.containerd.nri.v1.nri\"]\n  disable = false\n"
         "  plugin_path = \"" +
             t.path + "/plugins\"\n");
    // the service as read_service_status sees it: a live process whose argv[0] names nri-qos
    pid_t pid = ::fork();
    if (pid == 0) {
        ::execl("/bin/sleep", "nri-qos-relay-test", "30", static_cast<char*>(nullptr));
        ::_exit(127);
    }
    REQUIRE(pid > 0);
    const std::string status = register_state_dir() + "/relay.json";
    spit(status,
         "{\"pid\":" + std::to_string(pid) + ",\"registered\":true,\"runtime\":\"containerd\",\"runtime_version\":\"2.1.9\",\"started\":1}\n");
    const std::vector<std::string> reg{"register",    "--containerd-config", t / "config.toml", "--containerd-version", "2.1.9",
                                       "--conf-json", t / "conf.json",       "--plugins-dir",   t / "plugins",          "--binary",
                                       "/bin/sh",     "--isulad-config",     t / "none.json",   "--crio-config",        t / "none.conf"};
    std::string out;
    for (int i = 0; i < 200 && slurp("/proc/" + std::to_string(pid) + "/cmdline").rfind("nri-qos-relay-test", 0) != 0; ++i)
        ::usleep(10000);  // until the child has exec'd
    int rc = run_cli(reg, out);  // auto mode, as the postinst runs it
    INFO(out);
    CHECK(rc == 0);
    CHECK_FALSE(exists(t / "plugins/10-nri-qos"));
    CHECK(has(out, "nri-qos relay service (pid " + std::to_string(pid) + ", registered with containerd 2.1.9) serves the runtime"));
    std::vector<std::string> native = reg;
    native.push_back("--native");
    rc = run_cli(native, out);  // asked for by hand: refused, with what to do
    INFO(out);
    CHECK(rc == 1);
    CHECK(has(out, "systemctl disable --now nri-qos-relay"));
    CHECK_FALSE(exists(t / "plugins/10-nri-qos"));
    // the service gone (its relay.json stays): the launched plugin is installed again
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
    rc = run_cli(reg, out);
    INFO(out);
    CHECK(rc == 0);
    CHECK(exists(t / "plugins/10-nri-qos"));
    ::unlink(status.c_str());
}

TEST_CASE("register: no runtime found registers v0.1 with a loud warning", "[register][node]") {
    TempDir t;
    std::string out;
    int rc = run_cli({"register", "--containerd-config", t / "absent.toml", "--containerd-version", "none", "--conf-json", t / "conf.json",
                      "--isulad-config", t / "none.json", "--crio-config", t / "none.conf"},
                     out);
    INFO(out);
    CHECK(rc == 0);
    CHECK(exists(t / "conf.json"));
    CHECK(has(out, "nri-qos: WARNING: no container runtime found"));
    CHECK(has(out, "nri-qos: WARNING: Nothing calls nri-qos"));
}

TEST_CASE("register: iSulad with nri-support gets the native plugin, never conf.json", "[register][node]") {
    TempDir t;
    spit(t / "daemon.json", R"({"group": "isula", "enable-cri-v1": true, "nri-support": true, "plugin-path": ")" + t.path + R"(/plugins"})");
    std::string out;
    int rc = run_cli({"register", "--containerd-config", t / "absent.toml", "--containerd-version", "none", "--conf-json", t / "conf.json",
                      "--isulad-config", t / "daemon.json", "--crio-config", t / "none.conf", "--plugins-dir", t / "plugins", "--binary", "/bin/sh"},
                     out);
    INFO(out);
    CHECK(rc == 0);
    CHECK(exists(t / "plugins/10-nri-qos"));
    CHECK_FALSE(exists(t / "conf.json"));
    CHECK(has(out, "iSulad"));
    CHECK_FALSE(has(out, "WARNING"));
    // nri-support off: still the native plugin (the only kind iSulad runs), and a warning.
    spit(t / "daemon.json", R"({"enable-cri-v1": true, "nri-support": false})");
    rc = run_cli({"register", "--containerd-config", t / "absent.toml", "--containerd-version", "none", "--conf-json", t / "conf.json",
                  "--isulad-config", t / "daemon.json", "--crio-config", t / "none.conf", "--plugins-dir", t / "plugins", "--binary", "/bin/sh"},
                 out);
    CHECK(rc == 0);
    CHECK(has(out, "nri-qos: WARNING: iSulad native NRI is DISABLED: nri-qos will NEVER be called."));
    CHECK(has(out, "\"nri-support\": true"));
    CHECK_FALSE(exists(t / "conf.json"));
}

TEST_CASE("register: CRI-O drop-ins are read (crio.conf.d enables NRI)", "[register][node]") {
    TempDir t;
    ::mkdir((t / "crio.conf.d").c_str(), 0755);
    spit(t / "crio.conf", "[crio.nri]\nenable_nri = false\n");
    spit(t / "crio.conf.d/10-nri.conf", "[crio.nri]\nenable_nri = true\n");
    std::string out;
    int rc = run_cli({"register", "--containerd-config", t / "absent.toml", "--containerd-version", "none", "--conf-json", t / "conf.json",
                      "--isulad-config", t / "none.json", "--crio-config", t / "crio.conf", "--plugins-dir", t / "plugins", "--binary", "/bin/sh"},
                     out);
    INFO(out);
    CHECK(rc == 0);
    CHECK(exists(t / "plugins/10-nri-qos"));
    CHECK_FALSE(exists(t / "conf.json"));
    CHECK_FALSE(has(out, "WARNING"));
    nriqos::NativeRuntimeInfo crio = nriqos::detect_crio(t / "crio.conf");
    CHECK(crio.config_files == std::vector<std::string>{t / "crio.conf", t / "crio.conf.d/10-nri.conf"});
    REQUIRE(crio.nri_enabled);
    CHECK(*crio.nri_enabled);
}

TEST_CASE("register: NRI disabled on containerd 1.7 is a loud warning, --enable-nri fixes it after a backup", "[register][node]") {
    TempDir t;
    const std::string orig =
        "version = 2\n"
        "# site settings\n"
        "[plugins.\"io.containerd.nri.v1.nri\"]\n"
        "  disable = true  # the 1.7 default\n"
        "  plugin_path = \"" +
        t.path +
        "/plugins\"\n"
        "[plugins.\"io.containerd.grpc.v1.cri\"]\n"
        "  sandbox_image = \"pause:3.9\"\n";
    spit(t / "config.toml", orig);
    std::vector<std::string> common{"--containerd-config", t / "config.toml", "--containerd-version", "1.7.20",       "--conf-json",
                                    t / "conf.json",       "--plugins-dir",   t / "plugins",          "--binary",     "/bin/sh",
                                    "--isulad-config",     t / "none.json",   "--crio-config",        t / "none.conf"};
    std::string out;
    std::vector<std::string> args{"register"};
    args.insert(args.end(), common.begin(), common.end());
    int rc = run_cli(args, out);
    INFO(out);
    CHECK(rc == 0);
    CHECK(has(out, "nri-qos: WARNING: containerd 1.7.20 has native NRI DISABLED"));
    CHECK(has(out, "nri-qos: WARNING: nri-qos will NEVER be called until NRI is enabled"));
    CHECK(has(out, "nri-qos register --enable-nri"));
    CHECK(slurp(t / "config.toml") == orig);  // nothing edited unless asked
    CHECK_FALSE(exists(t / "conf.json"));  // conf.json is never read on 1.7 without the adapter

    args.insert(args.end(), {"--enable-nri", "--backup-dir", bdir(t.path)});
    rc = run_cli(args, out);
    INFO(out);
    CHECK(rc == 0);
    auto b = backups(t.path, "config.toml");
    REQUIRE(b.size() == 1);
    CHECK(slurp(b[0]) == orig);
    const std::string now = slurp(t / "config.toml");
    CHECK(has(now, "# site settings"));
    CHECK(has(now, "plugin_request_timeout = \"2s\""));
    nriqos::RuntimeInfo ri;
    ri.config = t / "config.toml";
    nriqos::read_nri_config(now, ri);
    REQUIRE(ri.error.empty());
    REQUIRE(ri.nri_disable);
    CHECK_FALSE(*ri.nri_disable);
    CHECK(has(out, "restart containerd"));
    CHECK(exists(t / "plugins/10-nri-qos"));
    CHECK_FALSE(has(out, "WARNING"));
    // Idempotent: nothing more to change, no second backup.
    rc = run_cli(args, out);
    CHECK(rc == 0);
    CHECK(backups(t.path, "config.toml").size() == 1);
    CHECK(slurp(t / "config.toml") == now);
}

TEST_CASE("enable_containerd_nri: a drop-in in the imports directory, else appended to config.toml", "[register][node]") {
    TempDir t;
    ::mkdir((t / "conf.d").c_str(), 0755);
    // imports cover conf.d and nobody defines the NRI section: a new drop-in, config.toml untouched.
    const std::string main = "version = 2\nimports = [\"" + t.path + "/conf.d/*.toml\"]\n";
    spit(t / "config.toml", main);
    nriqos::RuntimeInfo info = nriqos::detect_runtime(t / "config.toml", "1.7.20");
    CHECK(info.dropin_dir == t / "conf.d");
    RegisterResult r = nriqos::enable_containerd_nri(info, "STAMP", bdir(t.path));
    INFO(r.message);
    CHECK(r.exit_code == 0);
    CHECK(r.changed);
    CHECK(slurp(t / "config.toml") == main);
    CHECK(backups(t.path, "config.toml").empty());
    nriqos::RuntimeInfo after = nriqos::detect_runtime(t / "config.toml", "1.7.20");
    CHECK(after.nri_file == t / "conf.d/90-nri-qos.toml");
    REQUIRE(after.nri_disable);
    CHECK_FALSE(*after.nri_disable);
    CHECK(nriqos::mode_called(after) == nriqos::HookMode::Native);

    // No imports: the section is appended to config.toml after a backup.
    const std::string plain = "version = 2\n[plugins.\"io.containerd.grpc.v1.cri\"]\n  sandbox_image = \"pause\"\n";
    spit(t / "plain.toml", plain);
    info = nriqos::detect_runtime(t / "plain.toml", "1.7.20");
    r = nriqos::enable_containerd_nri(info, "STAMP", bdir(t.path));
    CHECK(r.exit_code == 0);
    CHECK(slurp(bdir(t.path) + t.path + "/plain.toml.STAMP") == plain);
    nriqos::RuntimeInfo ri;
    nriqos::read_nri_config(slurp(t / "plain.toml"), ri);
    REQUIRE(ri.nri_disable);
    CHECK_FALSE(*ri.nri_disable);
    CHECK(has(slurp(t / "plain.toml"), "sandbox_image = \"pause\""));

    // containerd 1.6 has no native NRI: refused, nothing written.
    info = nriqos::detect_runtime(t / "plain.toml", "1.6.20");
    r = nriqos::enable_containerd_nri(info, "STAMP2", bdir(t.path));
    CHECK(r.exit_code == 1);
    CHECK_FALSE(exists(bdir(t.path) + t.path + "/plain.toml.STAMP2"));
}

TEST_CASE("containerd config: a relative imports glob is the config directory's on 2.x, containerd's \"/\" on 1.x", "[register][node]") {
    // containerd 2.x joins a relative entry with the importing file's directory before it globs;
    // 1.6/1.7 glob it as written, from containerd's working directory ("/" under systemd). The
    // caller's working directory must play no part (before: the glob ran from nri-qos's cwd).
    TempDir t;
    ::mkdir((t / "conf.d").c_str(), 0755);
    ::mkdir((t / "elsewhere").c_str(), 0755);
    spit(t / "config.toml", "version = 3\nimports = [\"conf.d/*.toml\"]\n");
    spit(t / "conf.d/10-nri.toml", "[plugins.\"io.containerd.nri.v1.nri\"]\n  disable = false\n");
    char old_cwd[4096];
    REQUIRE(::getcwd(old_cwd, sizeof old_cwd) != nullptr);
    std::vector<std::string> texts;
    std::string err;
    REQUIRE(::chdir((t / "elsewhere").c_str()) == 0);  // not where the glob points
    auto v2 = nriqos::containerd_config_files(t / "config.toml", texts, err, 2);
    REQUIRE(::chdir(t.path.c_str()) == 0);  // where a cwd-relative glob would find conf.d
    auto v1 = nriqos::containerd_config_files(t / "config.toml", texts, err, 1);
    REQUIRE(::chdir(old_cwd) == 0);
    CHECK(err.empty());
    CHECK(v2 == std::vector<std::string>{t / "config.toml", t / "conf.d/10-nri.toml"});
    CHECK(v1 == std::vector<std::string>{t / "config.toml"});
    CHECK(nriqos::resolve_import("conf.d/*.toml", "/etc/containerd/config.toml", 2) == "/etc/containerd/conf.d/*.toml");
    CHECK(nriqos::resolve_import("conf.d/*.toml", "/etc/containerd/config.toml", 1) == "/conf.d/*.toml");
    CHECK(nriqos::resolve_import("../x.toml", "/etc/containerd/config.toml", 1) == "/etc/x.toml");
    CHECK(nriqos::resolve_import("/etc/containerd/conf.d/*.toml", "/etc/containerd/config.toml", 1) == "/etc/containerd/conf.d/*.toml");
}

TEST_CASE("containerd config: import order, relative paths, cycles, last definer of a plugin wins (v2, v3)", "[register][node]") {
    TempDir t;
    ::mkdir((t / "conf.d").c_str(), 0755);
    spit(t / "config.toml", "version = 2\nimports = [\"" + t.path +
                                "/conf.d/*.toml\", \"extra.toml\"]\n"
                                "[plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.runc]\n  runtime_type = \"io.containerd.runc.v2\"\n"
                                "  pod_annotations = [\"a.example/*\"]\n");
    spit(t / "conf.d/20-cri.toml",
         "version = 2\n[plugins.\"io.containerd.grpc.v1.cri\".containerd]\n  default_runtime_name = \"crun\"\n"
         "[plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.crun]\n  pod_annotations = [\"volcano.sh/*\"]\n");
    spit(t / "conf.d/10-x.toml", "imports = [\"../config.toml\"]\n");  // a cycle back to the main file
    spit(t / "extra.toml", "[plugins.\"io.containerd.nri.v1.nri\"]\n  disable = false\n");
    std::vector<std::string> texts;
    std::string err;
    auto files = nriqos::containerd_config_files(t / "config.toml", texts, err);
    CHECK(err.empty());
    CHECK(files == std::vector<std::string>{t / "config.toml", t / "conf.d/10-x.toml", t / "conf.d/20-cri.toml", t / "extra.toml"});
    nriqos::RuntimeInfo info = nriqos::detect_runtime(t / "config.toml", "1.6.20");
    CHECK(info.error.empty());
    CHECK(info.cri_file == t / "conf.d/20-cri.toml");
    CHECK(info.runtime_name == "crun");
    REQUIRE(info.pod_annotations);
    CHECK(*info.pod_annotations == std::vector<std::string>{"volcano.sh/*"});
    CHECK(info.nri_file == t / "extra.toml");

    // A drop-in that sets one CRI key replaces the main file's whole CRI section (mergeConfig),
    // so the main file's pod_annotations no longer apply: a key-level merge would keep them.
    spit(t / "conf.d/20-cri.toml", "[plugins.\"io.containerd.grpc.v1.cri\".containerd]\n  snapshotter = \"native\"\n");
    info = nriqos::detect_runtime(t / "config.toml", "1.6.20");
    CHECK(info.cri_file == t / "conf.d/20-cri.toml");
    CHECK(info.runtime_name == "runc");
    CHECK_FALSE(info.runtime_table);
    CHECK_FALSE(info.pod_annotations);

    // Version 3 (containerd 2.x): the runtime's table is under io.containerd.cri.v1.runtime.
    spit(t / "v3.toml",
         "version = 3\n[plugins.\"io.containerd.cri.v1.runtime\".containerd.runtimes.runc]\n"
         "  pod_annotations = [\"node.koordinator.sh/*\"]\n"
         "[plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.runc]\n  pod_annotations = [\"x/*\"]\n");
    info = nriqos::detect_runtime(t / "v3.toml", "2.0.0");
    REQUIRE(info.pod_annotations);
    CHECK(*info.pod_annotations == std::vector<std::string>{"node.koordinator.sh/*"});
    RegisterResult r = nriqos::pass_annotations(info, {"volcano.sh/qos-level"}, "S3", bdir(t.path));
    INFO(r.message);
    CHECK(r.exit_code == 0);
    info = nriqos::detect_runtime(t / "v3.toml", "2.0.0");
    CHECK(*info.pod_annotations == std::vector<std::string>{"node.koordinator.sh/*", "volcano.sh/qos-level"});
    CHECK(slurp(bdir(t.path) + t.path + "/v3.toml.S3").find("x/*") != std::string::npos);
}

TEST_CASE("annotation_passed follows containerd's path.Match: * never crosses '/'", "[register][node]") {
    CHECK_FALSE(nriqos::annotation_passed({"*"}, "volcano.sh/qos-level"));
    CHECK(nriqos::annotation_passed({"volcano.sh/*"}, "volcano.sh/qos-level"));
    CHECK(nriqos::annotation_passed({"*/*"}, "volcano.sh/qos-level"));
    CHECK(nriqos::annotation_passed({"qos.class"}, "qos.class"));
    CHECK_FALSE(nriqos::annotation_passed({}, "qos.class"));
}

TEST_CASE("policy_annotation_keys: rules' annotation keys and the facts' annotations", "[register][node]") {
    nriqos::PolicyCheck c = nriqos::check_policy_text(kPolicyFixture, "p.toml");
    REQUIRE(c.errors() == 0);
    CHECK(nriqos::policy_annotation_keys(c.policy) == std::vector<std::string>{"example.com/tier", "node.koordinator.sh/extended-resource-spec"});
    // The bundled policy: Koordinator, Volcano (rules and burst facts), Katalyst keys.
    auto keys = nriqos::policy_annotation_keys(nriqos::builtin_policy());
    for (const char* k : {"node.koordinator.sh/extended-resource-spec", "volcano.sh/qos-level", "volcano.sh/preemptable",
                          "volcano.sh/enable-quota-burst", "volcano.sh/quota-burst-time", "katalyst.kubewharf.io/qos_level"})
        CHECK(std::find(keys.begin(), keys.end(), k) != keys.end());
}

TEST_CASE("register: containerd 1.6 pod_annotations missing the policy's keys warn; --pass-annotations adds them", "[register][node]") {
    nri_qos_on_path();
    TempDir t;
    spit(t / "policy.toml", kPolicyFixture);
    const std::string orig =
        "version = 2\n"
        "[plugins.\"io.containerd.grpc.v1.cri\"]\n"
        "  sandbox_image = \"pause:3.9\"\n"
        "  [plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.runc]\n"
        "    runtime_type = \"io.containerd.runc.v2\"\n"
        "    pod_annotations = [\n"
        "      \"example.com/*\",  # site\n"
        "    ]\n"
        "  [plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.runc.options]\n"
        "    SystemdCgroup = true\n";
    spit(t / "config.toml", orig);
    std::vector<std::string> args{"register",      "--containerd-config", t / "config.toml", "--containerd-version", "1.6.20",
                                  "--conf-json",   t / "conf.json",       "--policy",        t / "policy.toml",      "--isulad-config",
                                  t / "none.json", "--crio-config",       t / "none.conf"};
    std::string out;
    int rc = run_cli(args, out);
    INFO(out);
    CHECK(rc == 0);
    CHECK(exists(t / "conf.json"));
    CHECK(has(out, "nri-qos: WARNING: containerd 1.6.20 passes NRI v0.1 hooks only the pod annotations listed in"));
    CHECK(has(out, "nri-qos: WARNING:   node.koordinator.sh/extended-resource-spec\n"));  // example.com/tier passes
    CHECK(has(out, "--pass-annotations"));
    CHECK(slurp(t / "config.toml") == orig);

    args.insert(args.end(), {"--pass-annotations", "--backup-dir", bdir(t.path)});
    rc = run_cli(args, out);
    INFO(out);
    CHECK(rc == 0);
    auto b = backups(t.path, "config.toml");
    REQUIRE(b.size() == 1);
    CHECK(slurp(b[0]) == orig);
    nriqos::RuntimeInfo info = nriqos::detect_runtime(t / "config.toml", "1.6.20");
    REQUIRE(info.error.empty());
    REQUIRE(info.pod_annotations);
    CHECK(*info.pod_annotations == std::vector<std::string>{"example.com/*", "node.koordinator.sh/extended-resource-spec"});
    CHECK(has(slurp(t / "config.toml"), "SystemdCgroup = true"));
    CHECK_FALSE(has(out, "WARNING"));
    // Now nothing is missing: no warning, no second backup.
    rc = run_cli(args, out);
    CHECK(rc == 0);
    CHECK_FALSE(has(out, "WARNING"));
    CHECK(backups(t.path, "config.toml").size() == 1);
}

// ---- containerd config versions 1-4 as each release reads them (issue #30 §4) ----------------
// Fixtures follow containerd's own layouts: version 1 (no `version`, short plugin IDs, what
// `containerd config default` printed on 1.x before version 2), 2 (1.6/1.7), 3 (2.0-2.2) and 4
// (2.3). src/event/containerd_config.hpp cites the containerd functions behind each rule.

namespace {

nriqos::RuntimeInfo read_as(const std::string& config, const std::string& release) { return nriqos::detect_runtime(config, release); }

}  // namespace

TEST_CASE("containerd config: where NRI and pod_annotations live, per version and release", "[register][node][containerd-config]") {
    TempDir t;
    // Version 1: short IDs on 1.x; long IDs in it are ignored there (and said so).
    spit(t / "v1.toml",
         "[plugins.nri]\n  disable = false\n  plugin_path = \"/x/plugins\"\n"
         "[plugins.cri.containerd.runtimes.runc]\n  pod_annotations = [\"a.example/*\"]\n"
         "[plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.runc]\n  pod_annotations = [\"ignored/*\"]\n");
    for (const char* rel : {"1.6.20", "1.7.24"}) {
        INFO(rel);
        nriqos::RuntimeInfo i = read_as(t / "v1.toml", rel);
        CHECK(i.error.empty());
        CHECK(i.config_version == 1);
        REQUIRE(i.nri_disable);
        CHECK_FALSE(*i.nri_disable);
        CHECK(i.plugin_path == "/x/plugins");
        CHECK(i.nri_section == "[plugins.nri]");
        REQUIRE(i.pod_annotations);
        CHECK(*i.pod_annotations == std::vector<std::string>{"a.example/*"});
        CHECK(i.runtime_section == "[plugins.cri.containerd.runtimes.runc]");
        CHECK(has(nriqos::annotation_passlist_of(i)->where, "[plugins.cri.containerd.runtimes.runc] pod_annotations in " + t / "v1.toml"));
        REQUIRE(i.config_notes.size() == 1);
        CHECK(has(i.config_notes[0], "ignores [plugins.\"io.containerd.grpc.v1.cri\"]"));
    }
    // 2.x migrates a version-1 file: [plugins.nri] becomes io.containerd.grpc.v1.nri: not NRI
    // (default: on). [plugins.cri] becomes io.containerd.grpc.v1.cri, which 2.3 migrates into
    // the runtime plugin's section; 2.0-2.2 give the file the current version (3) first, so the
    // merged config is version 3 and no CRI migration runs: its runtimes are not read.
    spit(t / "v1off.toml", "[plugins.nri]\n  disable = true\n[plugins.cri.containerd.runtimes.runc]\n  pod_annotations = [\"a.example/*\"]\n");
    for (const char* rel : {"2.1.9", "2.3.4"}) {
        INFO(rel);
        nriqos::RuntimeInfo i = read_as(t / "v1off.toml", rel);
        CHECK(i.error.empty());
        CHECK_FALSE(i.nri_disable);
        CHECK(nriqos::mode_called(i) == nriqos::HookMode::Native);
        REQUIRE_FALSE(i.config_notes.empty());
        CHECK(has(i.config_notes[0], "ignores [plugins.nri]"));
        if (std::string(rel) == "2.3.4") {
            REQUIRE(i.pod_annotations);
            CHECK(*i.pod_annotations == std::vector<std::string>{"a.example/*"});
            CHECK(i.runtime_section == "[plugins.cri.containerd.runtimes.runc]");
            CHECK(i.config_notes.size() == 1);
        } else {
            CHECK_FALSE(i.pod_annotations);
            REQUIRE(i.config_notes.size() == 2);
            CHECK(has(i.config_notes[1], "ignores the runtimes under [plugins.cri.containerd]"));
            CHECK(i.runtime_section == "[plugins.\"io.containerd.cri.v1.runtime\".containerd.runtimes.runc]");
        }
    }
    // Version 2 on every release: io.containerd.grpc.v1.cri (2.x migrates it).
    spit(t / "v2.toml", "version = 2\n[plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.runc]\n  pod_annotations = [\"b/*\"]\n");
    for (const char* rel : {"1.6.20", "1.7.24", "2.1.9", "2.3.4"}) {
        INFO(rel);
        nriqos::RuntimeInfo i = read_as(t / "v2.toml", rel);
        CHECK(i.error.empty());
        REQUIRE(i.pod_annotations);
        CHECK(*i.pod_annotations == std::vector<std::string>{"b/*"});
        CHECK(i.runtime_section == "[plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.runc]");
    }
    // Version 3: 2.x reads io.containerd.cri.v1.runtime; 1.7.17+ refuses it, 1.6.20 reads it as 2.
    spit(t / "v3.toml", "version = 3\n[plugins.\"io.containerd.cri.v1.runtime\".containerd.runtimes.runc]\n  pod_annotations = [\"c/*\"]\n");
    for (const char* rel : {"2.1.9", "2.3.4"}) {
        nriqos::RuntimeInfo i = read_as(t / "v3.toml", rel);
        CHECK(i.error.empty());
        REQUIRE(i.pod_annotations);
        CHECK(*i.pod_annotations == std::vector<std::string>{"c/*"});
    }
    // A version-3 file's io.containerd.grpc.v1.cri runtimes: 2.3 migrates them (every file below
    // 4), 2.0-2.2 do not (as `containerd config dump` of 2.2.7 and 2.3.4 show).
    spit(t / "v3g.toml", "version = 3\n[plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.runc]\n  pod_annotations = [\"g/*\"]\n");
    CHECK_FALSE(read_as(t / "v3g.toml", "2.2.7").pod_annotations);
    CHECK(has(read_as(t / "v3g.toml", "2.2.7").config_notes.at(0), "ignores the runtimes under [plugins.\"io.containerd.grpc.v1.cri\".containerd]"));
    REQUIRE(read_as(t / "v3g.toml", "2.3.4").pod_annotations);
    CHECK(*read_as(t / "v3g.toml", "2.3.4").pod_annotations == std::vector<std::string>{"g/*"});
    CHECK(has(read_as(t / "v3.toml", "1.7.24").error, "containerd 1.7.24 refuses config version 3"));
    CHECK(has(read_as(t / "v3.toml", "1.6.20").error, "reads config version 3 as version 2"));
    // Version 4 (containerd 2.3: version/version.go ConfigVersion 4): same plugin names as 3.
    spit(t / "v4.toml",
         "version = 4\n[plugins.\"io.containerd.cri.v1.runtime\".containerd.runtimes.runc]\n  pod_annotations = [\"d/*\"]\n"
         "[plugins.\"io.containerd.nri.v1.nri\"]\n  disable = true\n");
    nriqos::RuntimeInfo v4 = read_as(t / "v4.toml", "2.3.4");
    CHECK(v4.error.empty());
    CHECK(v4.config_version == 4);
    REQUIRE(v4.pod_annotations);
    CHECK(*v4.pod_annotations == std::vector<std::string>{"d/*"});
    REQUIRE(v4.nri_disable);
    CHECK(*v4.nri_disable);
    CHECK(has(read_as(t / "v4.toml", "2.2.7").error, "containerd 2.2.7 refuses config version 4"));
    CHECK(read_as(t / "v4.toml", "none").error.empty());  // unknown release: 2.3's rules for version 4
    // 2.3 refuses a drop-in above the root's version; 1.x refuses a short name in version 2.
    ::mkdir((t / "d").c_str(), 0755);
    spit(t / "root2.toml", "version = 2\nimports = [\"d/*.toml\"]\n");
    spit(t / "d/10.toml", "version = 3\n");
    CHECK(has(read_as(t / "root2.toml", "2.3.4").error, "has version 3, above the root config's 2"));
    CHECK(read_as(t / "root2.toml", "2.1.9").error.empty());
    spit(t / "short2.toml", "version = 2\n[plugins.cri]\n  sandbox_image = \"p\"\n");
    CHECK(has(read_as(t / "short2.toml", "1.7.24").error, "plugin name \"cri\""));
    spit(t / "badver.toml", "version = \"2\"\n");
    CHECK(has(read_as(t / "badver.toml", "1.7.24").error, "`version` must be a small non-negative integer"));
}

TEST_CASE("containerd config: 1.x replaces a plugin's section with a drop-in's, 2.x merges it key by key", "[register][node][containerd-config]") {
    TempDir t;
    ::mkdir((t / "conf.d").c_str(), 0755);
    spit(t / "config.toml", "version = 2\nimports = [\"" + t.path +
                                "/conf.d/*.toml\"]\n"
                                "[plugins.\"io.containerd.nri.v1.nri\"]\n  disable = true\n  plugin_path = \"/x\"\n");
    spit(t / "conf.d/10.toml", "version = 2\n[plugins.\"io.containerd.nri.v1.nri\"]\n  plugin_request_timeout = \"5s\"\n");
    nriqos::RuntimeInfo a = read_as(t / "config.toml", "1.7.24");  // mergeConfig: to.Plugins[k] = v
    CHECK_FALSE(a.nri_disable);
    CHECK(a.plugin_path == "/opt/nri/plugins");
    CHECK(a.nri_file == t / "conf.d/10.toml");
    nriqos::RuntimeInfo b = read_as(t / "config.toml", "2.1.9");  // mergo.Merge of the plugins map
    REQUIRE(b.nri_disable);
    CHECK(*b.nri_disable);
    CHECK(b.plugin_path == "/x");
    CHECK(b.nri_file == t / "config.toml");
    // --enable-nri edits the file that sets `disable` on 2.x (the drop-in's section does not).
    nriqos::RegisterResult r = nriqos::enable_containerd_nri(b, "S", bdir(t.path));
    INFO(r.message);
    CHECK(r.exit_code == 0);
    CHECK(has(slurp(t / "config.toml"), "  disable = false  # nri-qos register --enable-nri (S)\n  plugin_path = \"/x\"\n"));
    nriqos::RuntimeInfo c = read_as(t / "config.toml", "2.1.9");
    REQUIRE(c.nri_disable);
    CHECK_FALSE(*c.nri_disable);
}

TEST_CASE("register --enable-nri on a version-1 config of containerd 1.7 writes [plugins.nri], keeping comments",
          "[register][node][containerd-config]") {
    // Before: the long name was written, which 1.7 ignores in a config without `version`; the
    // check read the long name too and reported success (issue #30 §4).
    TempDir t;
    const std::string orig =
        "# node config (version 1: no version key)\n"
        "[plugins.nri]\n"
        "  disable = true  # off until the NRI rollout\n"
        "  plugin_path = \"" +
        t.path +
        "/plugins\"\n"
        "[plugins.cri]\n"
        "  sandbox_image = \"pause:3.9\"\n";
    spit(t / "config.toml", orig);
    std::string out;
    int rc = run_cli({"register", "--containerd-config", t / "config.toml", "--containerd-version", "1.7.24", "--conf-json", t / "conf.json",
                      "--plugins-dir", t / "plugins", "--binary", "/bin/sh", "--isulad-config", t / "none.json", "--crio-config", t / "none.conf",
                      "--enable-nri", "--backup-dir", bdir(t.path)},
                     out);
    INFO(out);
    CHECK(rc == 0);
    const std::string now = slurp(t / "config.toml");
    CHECK(now ==
          "# node config (version 1: no version key)\n"
          "[plugins.nri]\n"
          "  plugin_request_timeout = \"2s\"\n"
          "  disable = false  # off until the NRI rollout\n"
          "  plugin_path = \"" +
              t.path +
              "/plugins\"\n"
              "[plugins.cri]\n"
              "  sandbox_image = \"pause:3.9\"\n");
    CHECK_FALSE(has(now, "io.containerd.nri.v1.nri"));
    CHECK(has(out, "[plugins.nri] disable = false"));
    nriqos::RuntimeInfo i = read_as(t / "config.toml", "1.7.24");
    REQUIRE(i.nri_disable);
    CHECK_FALSE(*i.nri_disable);
    CHECK(exists(t / "plugins/10-nri-qos"));
    REQUIRE(backups(t.path, "config.toml").size() == 1);
    CHECK(slurp(backups(t.path, "config.toml")[0]) == orig);
    CHECK(stray_backups(t.path).empty());

    // No NRI section at all: appended with the short name, no `version` added (it would turn
    // the whole config into version 2, where [plugins.cri] stops containerd 1.7 from starting).
    spit(t / "bare.toml", "[plugins.cri]\n  sandbox_image = \"pause:3.9\"\n");
    nriqos::RuntimeInfo bare = read_as(t / "bare.toml", "1.7.24");
    nriqos::RegisterResult r = nriqos::enable_containerd_nri(bare, "S", bdir(t.path));
    INFO(r.message);
    CHECK(r.exit_code == 0);
    CHECK(has(slurp(t / "bare.toml"), "\n[plugins.nri]\n  disable = false\n"));
    CHECK_FALSE(has(slurp(t / "bare.toml"), "version"));
    nriqos::RuntimeInfo after = read_as(t / "bare.toml", "1.7.24");
    CHECK(after.error.empty());
    REQUIRE(after.nri_disable);
    CHECK_FALSE(*after.nri_disable);
}

TEST_CASE("register --pass-annotations on a version-1 config of containerd 1.6: [plugins.cri...], the array's comments kept",
          "[register][node][containerd-config]") {
    nri_qos_on_path();
    TempDir t;
    spit(t / "policy.toml", kPolicyFixture);
    const std::string orig =
        "[plugins.cri]\n"
        "  sandbox_image = \"pause:3.9\"\n"
        "  [plugins.cri.containerd.runtimes.runc]\n"
        "    runtime_type = \"io.containerd.runc.v2\"\n"
        "    pod_annotations = [\n"
        "      # the site's own keys\n"
        "      \"example.com/*\"  # site\n"
        "    ]  # keep\n";
    spit(t / "config.toml", orig);
    std::vector<std::string> args{"register",        "--containerd-config", t / "config.toml", "--containerd-version",
                                  "1.6.20",          "--conf-json",         t / "conf.json",   "--policy",
                                  t / "policy.toml", "--isulad-config",     t / "none.json",   "--crio-config",
                                  t / "none.conf",   "--pass-annotations",  "--backup-dir",    bdir(t.path)};
    std::string out;
    int rc = run_cli(args, out);
    INFO(out);
    CHECK(rc == 0);
    CHECK(slurp(t / "config.toml") ==
          "[plugins.cri]\n"
          "  sandbox_image = \"pause:3.9\"\n"
          "  [plugins.cri.containerd.runtimes.runc]\n"
          "    runtime_type = \"io.containerd.runc.v2\"\n"
          "    pod_annotations = [\n"
          "      # the site's own keys\n"
          "      \"example.com/*\",  # site\n"
          "      \"node.koordinator.sh/extended-resource-spec\",\n"
          "    ]  # keep\n");
    nriqos::RuntimeInfo i = read_as(t / "config.toml", "1.6.20");
    REQUIRE(i.pod_annotations);
    CHECK(*i.pod_annotations == std::vector<std::string>{"example.com/*", "node.koordinator.sh/extended-resource-spec"});
    CHECK(has(out, "[plugins.cri.containerd.runtimes.runc] pod_annotations"));
    CHECK_FALSE(has(out, "WARNING"));
    CHECK(stray_backups(t.path).empty());
}

TEST_CASE("register edits keep comments: disable's trailing comment, one-line and multi-line arrays (v2, v3, v4)",
          "[register][node][containerd-config]") {
    TempDir t;
    spit(t / "v2.toml", "version = 2\n[plugins.\"io.containerd.nri.v1.nri\"]\n  disable = true  # reason: change 1234\n");
    nriqos::RuntimeInfo i = read_as(t / "v2.toml", "1.7.24");
    nriqos::RegisterResult r = nriqos::enable_containerd_nri(i, "S", bdir(t.path));
    INFO(r.message);
    CHECK(r.exit_code == 0);
    CHECK(slurp(t / "v2.toml") ==
          "version = 2\n[plugins.\"io.containerd.nri.v1.nri\"]\n  plugin_request_timeout = \"2s\"\n"
          "  disable = false  # reason: change 1234\n");
    // One-line array with a comment after it (version 3, containerd 2.1).
    spit(t / "v3.toml",
         "version = 3\n[plugins.\"io.containerd.cri.v1.runtime\".containerd.runtimes.runc]\n"
         "  pod_annotations = [\"a/*\"]  # ticket 42\n");
    i = read_as(t / "v3.toml", "2.1.9");
    r = nriqos::pass_annotations(i, {"b.example/k", "c.example/k"}, "S", bdir(t.path));
    INFO(r.message);
    CHECK(r.exit_code == 0);
    CHECK(slurp(t / "v3.toml") ==
          "version = 3\n[plugins.\"io.containerd.cri.v1.runtime\".containerd.runtimes.runc]\n"
          "  pod_annotations = [\"a/*\", \"b.example/k\", \"c.example/k\"]  # ticket 42\n");
    // Multi-line array, trailing comma, comments between elements (version 4, containerd 2.3).
    const std::string v4 =
        "version = 4\n[plugins.\"io.containerd.cri.v1.runtime\".containerd.runtimes.runc]\n"
        "  pod_annotations = [\n    \"a/*\",  # first\n    # between\n    \"b/*\",\n  ]\n";
    spit(t / "v4.toml", v4);
    i = read_as(t / "v4.toml", "2.3.4");
    r = nriqos::pass_annotations(i, {"c.example/k"}, "S", bdir(t.path));
    INFO(r.message);
    CHECK(r.exit_code == 0);
    CHECK(slurp(t / "v4.toml") ==
          "version = 4\n[plugins.\"io.containerd.cri.v1.runtime\".containerd.runtimes.runc]\n"
          "  pod_annotations = [\n    \"a/*\",  # first\n    # between\n    \"b/*\",\n    \"c.example/k\",\n  ]\n");
    CHECK(slurp(backups(t.path, "v4.toml").at(0)) == v4);
    // Version 2 read by containerd 2.3 (migrated): written under the file's own name.
    spit(t / "v2cri.toml",
         "version = 2\n[plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.runc]\n  runtime_type = \"io.containerd.runc.v2\"\n");
    i = read_as(t / "v2cri.toml", "2.3.4");
    r = nriqos::pass_annotations(i, {"c.example/k"}, "S", bdir(t.path));
    INFO(r.message);
    CHECK(r.exit_code == 0);
    CHECK(has(slurp(t / "v2cri.toml"), "[plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.runc]\n  pod_annotations = [\"c.example/k\"]"));
    CHECK(*read_as(t / "v2cri.toml", "2.3.4").pod_annotations == std::vector<std::string>{"c.example/k"});
}

TEST_CASE("register backups go where no imports glob reads them", "[register][node][containerd-config]") {
    // Before: <file>.nri-qos.bak.<stamp> beside a drop-in that imports = ["conf.d/*"] matches,
    // loaded after the edited file: the old section came back (issue #30 §4).
    TempDir t;
    ::mkdir((t / "conf.d").c_str(), 0755);
    spit(t / "config.toml", "version = 2\nimports = [\"" + t.path + "/conf.d/*\"]\n");
    const std::string drop = "version = 2\n[plugins.\"io.containerd.nri.v1.nri\"]\n  disable = true\n";
    spit(t / "conf.d/50-nri.toml", drop);
    std::string out;
    std::vector<std::string> args{"register",     "--containerd-config", t / "config.toml", "--containerd-version", "1.7.24",
                                  "--conf-json",  t / "conf.json",       "--plugins-dir",   t / "plugins",          "--binary",
                                  "/bin/sh",      "--isulad-config",     t / "none.json",   "--crio-config",        t / "none.conf",
                                  "--enable-nri", "--backup-dir",        bdir(t.path)};
    int rc = run_cli(args, out);
    INFO(out);
    CHECK(rc == 0);
    CHECK(entries(t / "conf.d") == std::vector<std::string>{"50-nri.toml"});
    nriqos::RuntimeInfo i = read_as(t / "config.toml", "1.7.24");
    CHECK(i.config_files == std::vector<std::string>{t / "config.toml", t / "conf.d/50-nri.toml"});
    REQUIRE(i.nri_disable);
    CHECK_FALSE(*i.nri_disable);
    REQUIRE(entries(bdir(t.path) + t.path + "/conf.d").size() == 1);
    CHECK(slurp(bdir(t.path) + t.path + "/conf.d/" + entries(bdir(t.path) + t.path + "/conf.d")[0]) == drop);

    // A backup an older register left beside the drop-in is loaded by the glob: said loudly.
    spit(t / "conf.d/50-nri.toml.nri-qos.bak.20261101T000000", drop);
    args.pop_back(), args.pop_back(), args.pop_back();  // no --enable-nri: just read the node
    rc = run_cli(args, out);
    CHECK(rc == 0);
    CHECK(has(out, "nri-qos: WARNING: containerd loads " + t.path + "/conf.d/50-nri.toml.nri-qos.bak.20261101T000000 (an imports glob"));
    ::unlink((t / "conf.d/50-nri.toml.nri-qos.bak.20261101T000000").c_str());

    // A backup directory an imports glob reads is refused, nothing written.
    spit(t / "conf.d/50-nri.toml", drop);
    spit(t / "config.toml", "version = 2\nimports = [\"" + t.path + "/conf.d/*\", \"" + t.path + "/bk/*/*/*/*\"]\n");
    i = read_as(t / "config.toml", "1.7.24");
    nriqos::RegisterResult r = nriqos::enable_containerd_nri(i, "S", t / "bk");
    INFO(r.message);
    CHECK(r.exit_code == 1);
    CHECK(has(r.message, "would be read by containerd"));
    CHECK(slurp(t / "conf.d/50-nri.toml") == drop);
}

TEST_CASE("register refuses what it cannot edit safely, with one line saying why", "[register][node][containerd-config]") {
    TempDir t;
    auto refused = [&](const std::string& text, const std::string& release, const std::string& why, bool nri = true) {
        spit(t / "c.toml", text);
        nriqos::RuntimeInfo i = read_as(t / "c.toml", release);
        nriqos::RegisterResult r =
            nri ? nriqos::enable_containerd_nri(i, "S", bdir(t.path)) : nriqos::pass_annotations(i, {"x.example/k"}, "S", bdir(t.path));
        INFO(text << " on " << release << ": " << r.message);
        CHECK(r.exit_code == 1);
        CHECK(has(r.message, why));
        CHECK(r.message.find('\n') == std::string::npos);
        CHECK(slurp(t / "c.toml") == text);
        CHECK(entries(bdir(t.path)).empty());
    };
    refused("version = 2\n[plugins]\n  \"io.containerd.nri.v1.nri\".disable = true\n", "1.7.24", "dotted keys or an inline table");
    refused("version = 2\n[plugins]\n  \"io.containerd.nri.v1.nri\" = { disable = true }\n", "1.7.24", "dotted keys or an inline table");
    refused("version = 2\n[plugins.\"io.containerd.grpc.v1.cri\".containerd]\n  runtimes.runc.pod_annotations = [\"a/*\"]\n", "1.6.20",
            "without its own table header", false);
    refused("version = 2\n[plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.runc]\n  pod_annotations = [\"a/*\", 1]\n", "1.6.20",
            "not a plain array of strings", false);
    refused("version = 3\n[plugins.\"io.containerd.nri.v1.nri\"]\n  disable = true\n", "1.7.24", "refuses config version 3");
    refused("version = 7\n[plugins.\"io.containerd.nri.v1.nri\"]\n  disable = true\n", "2.3.4", "refuses config version 7");
    refused("version = 4\n[plugins.\"io.containerd.nri.v1.nri\"]\n  disable = true\n", "2.2.7", "refuses config version 4");
    refused("[plugins.nri]\n  disable = true\n", "none", "containerd's version is unknown");
}

TEST_CASE("register reads the config again after writing and restores it when containerd would not read the edit",
          "[register][node][containerd-config]") {
    TempDir t;
    ::mkdir((t / "conf.d").c_str(), 0755);
    spit(t / "config.toml", "version = 2\nimports = [\"" + t.path + "/conf.d/*.toml\"]\n");
    const std::string a = "version = 2\n[plugins.\"io.containerd.nri.v1.nri\"]\n  disable = true  # a\n";
    spit(t / "conf.d/10-a.toml", a);
    nriqos::RuntimeInfo i = read_as(t / "config.toml", "1.7.24");
    REQUIRE(i.nri_file == t / "conf.d/10-a.toml");
    // A drop-in that appears after the config was read, and sets NRI again (last loaded wins).
    spit(t / "conf.d/20-late.toml", "version = 2\n[plugins.\"io.containerd.nri.v1.nri\"]\n  disable = true\n");
    nriqos::RegisterResult r = nriqos::enable_containerd_nri(i, "S", bdir(t.path));
    INFO(r.message);
    CHECK(r.exit_code == 1);
    CHECK(has(r.message, "would still read NRI as disabled"));
    CHECK(has(r.message, "restored it from " + bdir(t.path) + t.path + "/conf.d/10-a.toml.S"));
    CHECK(slurp(t / "conf.d/10-a.toml") == a);
}

TEST_CASE("register --pass-annotations adds runc's table where the release reads it, another runtime's is refused",
          "[register][node][containerd-config]") {
    TempDir t;
    // Version 1 on 1.6: into the file that defines [plugins.cri] (a section elsewhere would replace it).
    spit(t / "v1.toml", "[plugins.cri]\n  sandbox_image = \"pause:3.9\"  # mirror\n");
    nriqos::RuntimeInfo i = read_as(t / "v1.toml", "1.6.20");
    nriqos::RegisterResult r = nriqos::pass_annotations(i, {"x.example/k"}, "S", bdir(t.path));
    INFO(r.message);
    CHECK(r.exit_code == 0);
    CHECK(slurp(t / "v1.toml") ==
          "[plugins.cri]\n  sandbox_image = \"pause:3.9\"  # mirror\n\n"
          "# Added by `nri-qos register --pass-annotations (S)`.\n"
          "[plugins.cri.containerd.runtimes.runc]\n  runtime_type = \"io.containerd.runc.v2\"\n"
          "  pod_annotations = [\"x.example/k\"]\n");
    REQUIRE(read_as(t / "v1.toml", "1.6.20").pod_annotations);
    // Version 4, no CRI section at all: appended to the main config under the 2.3 name.
    spit(t / "v4.toml", "version = 4\n");
    i = read_as(t / "v4.toml", "2.3.4");
    r = nriqos::pass_annotations(i, {"x.example/k"}, "S", bdir(t.path));
    INFO(r.message);
    CHECK(r.exit_code == 0);
    CHECK(has(slurp(t / "v4.toml"), "[plugins.\"io.containerd.cri.v1.runtime\".containerd.runtimes.runc]\n"));
    CHECK(*read_as(t / "v4.toml", "2.3.4").pod_annotations == std::vector<std::string>{"x.example/k"});
    // Another default runtime without a table: refused, nothing written.
    const std::string crun = "version = 2\n[plugins.\"io.containerd.grpc.v1.cri\".containerd]\n  default_runtime_name = \"crun\"\n";
    spit(t / "crun.toml", crun);
    i = read_as(t / "crun.toml", "1.6.20");
    r = nriqos::pass_annotations(i, {"x.example/k"}, "S", bdir(t.path));
    CHECK(r.exit_code == 1);
    CHECK(has(r.message, "no [plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.crun] table"));
    CHECK(slurp(t / "crun.toml") == crun);
}

TEST_CASE("containerd config: disabled_plugins turns NRI off as each release names it; --enable-nri refuses it",
          "[register][node][containerd-config]") {
    TempDir t;
    spit(t / "v2.toml",
         "version = 2\ndisabled_plugins = [\"io.containerd.nri.v1.nri\"]\n[plugins.\"io.containerd.nri.v1.nri\"]\n  disable = false\n");
    nriqos::RuntimeInfo i = read_as(t / "v2.toml", "1.7.24");
    CHECK(i.nri_disabled_in == t / "v2.toml");
    CHECK(nriqos::mode_called(i) == nriqos::HookMode::None);
    nriqos::RegisterResult r = nriqos::enable_containerd_nri(i, "S", bdir(t.path));
    CHECK(r.exit_code == 1);
    CHECK(has(r.message, "lists the NRI plugin in disabled_plugins"));
    spit(t / "v1.toml", "disabled_plugins = [\"nri\"]\n");  // version 1: the short ID on 1.x ...
    CHECK(nriqos::mode_called(read_as(t / "v1.toml", "1.7.24")) == nriqos::HookMode::None);
    CHECK(nriqos::mode_called(read_as(t / "v1.toml", "2.1.9")) == nriqos::HookMode::Native);  // ... io.containerd.grpc.v1.nri on 2.x
    spit(t / "v3.toml", "version = 3\ndisabled_plugins = [\"io.containerd.nri.v1.nri\"]\n");
    CHECK(nriqos::mode_called(read_as(t / "v3.toml", "2.1.9")) == nriqos::HookMode::None);
}

// ---- register --require: NRI's default validator (containerd >= 2.2, issue #31 §4) ----------
// Config keys: containerd v2.2.7 internal/nri/config.go (`default_validator`) and containerd/nri
// v0.11.0 plugins/default-validator DefaultValidatorConfig (`enable`, `required_plugins`).

TEST_CASE("register --require: a default_validator table beside the NRI section, after a backup (v3, containerd 2.2)",
          "[register][node][containerd-config][require]") {
    TempDir t;
    const std::string orig =
        "version = 3\n# site\n[plugins.\"io.containerd.nri.v1.nri\"]\n  disable = false\n"
        "[plugins.\"io.containerd.cri.v1.images\"]\n  snapshotter = \"overlayfs\"\n";
    spit(t / "config.toml", orig);
    nriqos::RuntimeInfo i = read_as(t / "config.toml", "2.2.7");
    CHECK_FALSE(i.validator_enable);
    CHECK_FALSE(i.required_plugins);
    nriqos::RegisterResult r = nriqos::require_plugin(i, "nri-qos", "S", bdir(t.path));
    INFO(r.message);
    CHECK(r.exit_code == 0);
    CHECK(r.changed);
    CHECK(has(r.message, "restart containerd"));
    const std::string now = slurp(t / "config.toml");
    CHECK(has(now, "# site\n"));
    CHECK(has(now, "[plugins.\"io.containerd.nri.v1.nri\".default_validator]\n  enable = true\n  required_plugins = [\"nri-qos\"]\n"));
    auto b = backups(t.path, "config.toml");
    REQUIRE(b.size() == 1);
    CHECK(slurp(b[0]) == orig);
    nriqos::RuntimeInfo a = read_as(t / "config.toml", "2.2.7");
    REQUIRE(a.error.empty());
    REQUIRE(a.validator_enable);
    CHECK(*a.validator_enable);
    REQUIRE(a.required_plugins);
    CHECK(*a.required_plugins == std::vector<std::string>{"nri-qos"});
    // Again: nothing to change, no second backup.
    r = nriqos::require_plugin(a, "nri-qos", "S2", bdir(t.path));
    CHECK(r.exit_code == 0);
    CHECK_FALSE(r.changed);
    CHECK(has(r.message, "already requires nri-qos"));
    CHECK(backups(t.path, "config.toml").size() == 1);
    CHECK(slurp(t / "config.toml") == now);
}

TEST_CASE("register --require: an existing validator table is edited in place, other plugins kept (v2, containerd 2.3)",
          "[register][node][containerd-config][require]") {
    TempDir t;
    spit(t / "config.toml",
         "version = 2\n[plugins.\"io.containerd.nri.v1.nri\"]\n  disable = false\n"
         "  [plugins.\"io.containerd.nri.v1.nri\".default_validator]\n"
         "    enable = false  # ticket 7\n    reject_oci_hook_adjustment = true\n"
         "    required_plugins = [\"05-dranet\"]\n");
    nriqos::RuntimeInfo i = read_as(t / "config.toml", "2.3.4");
    REQUIRE(i.validator_enable);
    CHECK_FALSE(*i.validator_enable);
    nriqos::RegisterResult r = nriqos::require_plugin(i, "nri-qos", "S", bdir(t.path));
    INFO(r.message);
    CHECK(r.exit_code == 0);
    CHECK(slurp(t / "config.toml") ==
          "version = 2\n[plugins.\"io.containerd.nri.v1.nri\"]\n  disable = false\n"
          "  [plugins.\"io.containerd.nri.v1.nri\".default_validator]\n"
          "    enable = true  # ticket 7\n    reject_oci_hook_adjustment = true\n"
          "    required_plugins = [\"05-dranet\", \"nri-qos\"]\n");
    nriqos::RuntimeInfo a = read_as(t / "config.toml", "2.3.4");
    REQUIRE(a.required_plugins);
    CHECK(*a.required_plugins == std::vector<std::string>{"05-dranet", "nri-qos"});
}

TEST_CASE("register --require: no NRI section: a drop-in of the imports directory, else the main config",
          "[register][node][containerd-config][require]") {
    TempDir t;
    ::mkdir((t / "conf.d").c_str(), 0755);
    spit(t / "config.toml", "version = 3\nimports = [\"" + t.path + "/conf.d/*.toml\"]\n");
    nriqos::RuntimeInfo i = read_as(t / "config.toml", "2.2.7");
    nriqos::RegisterResult r = nriqos::require_plugin(i, "nri-qos", "S", bdir(t.path));
    INFO(r.message);
    CHECK(r.exit_code == 0);
    CHECK(has(slurp(t / "conf.d/90-nri-qos.toml"),
              "version = 3\n\n# Added by `nri-qos register --require` (S).\n"
              "[plugins.\"io.containerd.nri.v1.nri\".default_validator]\n  enable = true\n  required_plugins = [\"nri-qos\"]\n"));
    nriqos::RuntimeInfo a = read_as(t / "config.toml", "2.2.7");
    REQUIRE(a.validator_enable);
    CHECK(*a.validator_enable);
    spit(t / "plain.toml", "version = 3\n");
    i = read_as(t / "plain.toml", "2.3.4");
    r = nriqos::require_plugin(i, "nri-qos", "S", bdir(t.path));
    INFO(r.message);
    CHECK(r.exit_code == 0);
    CHECK(has(slurp(t / "plain.toml"), "[plugins.\"io.containerd.nri.v1.nri\".default_validator]\n  enable = true\n"));
}

TEST_CASE("register --require is refused, with one line, where containerd has no default validator or the edit is unsafe",
          "[register][node][containerd-config][require]") {
    TempDir t;
    const std::string orig = "version = 2\n[plugins.\"io.containerd.nri.v1.nri\"]\n  disable = false\n";
    spit(t / "config.toml", orig);
    for (const char* rel : {"2.1.9", "1.7.24"}) {
        nriqos::RegisterResult r = nriqos::require_plugin(read_as(t / "config.toml", rel), "nri-qos", "S", bdir(t.path));
        INFO(r.message);
        CHECK(r.exit_code == 1);
        CHECK(has(r.message,
                  std::string("--require: containerd ") + rel + " has no NRI default validator (required_plugins needs containerd 2.2 or later)"));
        CHECK(r.message.find('\n') == std::string::npos);
    }
    nriqos::RuntimeInfo unknown = read_as(t / "config.toml", "2.2.7");
    unknown.version.clear();
    unknown.major = unknown.minor = 0;
    nriqos::RegisterResult r = nriqos::require_plugin(unknown, "nri-qos", "S", bdir(t.path));
    CHECK(r.exit_code == 1);
    CHECK(has(r.message, "containerd's version is unknown"));
    // An inline validator table cannot take a key: refused, nothing written.
    const std::string inl = "version = 3\n[plugins.\"io.containerd.nri.v1.nri\"]\n  default_validator = { enable = false }\n";
    spit(t / "inline.toml", inl);
    r = nriqos::require_plugin(read_as(t / "inline.toml", "2.2.7"), "nri-qos", "S", bdir(t.path));
    INFO(r.message);
    CHECK(r.exit_code == 1);
    CHECK(has(r.message, "without its own table header"));
    CHECK(slurp(t / "inline.toml") == inl);
    CHECK(slurp(t / "config.toml") == orig);
    CHECK(backups(t.path, "config.toml").empty());
    // The CLI: on 2.1 the whole command fails before registering anything.
    std::string out;
    int rc = run_cli(
        {"register", "--native", "--require", "--containerd-config", t / "config.toml", "--containerd-version", "2.1.9", "--plugins-dir",
         t / "plugins", "--binary", "/bin/sh", "--isulad-config", t / "none.json", "--crio-config", t / "none.conf", "--backup-dir", bdir(t.path)},
        out);
    INFO(out);
    CHECK(rc == 1);
    CHECK(has(out, "--require: containerd 2.1.9 has no NRI default validator"));
    CHECK_FALSE(exists(t / "plugins/10-nri-qos"));
    // On 2.2 it writes the validator and installs the plugin.
    rc = run_cli(
        {"register", "--native", "--require", "--containerd-config", t / "config.toml", "--containerd-version", "2.2.7", "--plugins-dir",
         t / "plugins", "--binary", "/bin/sh", "--isulad-config", t / "none.json", "--crio-config", t / "none.conf", "--backup-dir", bdir(t.path)},
        out);
    INFO(out);
    CHECK(rc == 0);
    CHECK(has(out, "NRI's default validator requires nri-qos"));
    CHECK(exists(t / "plugins/10-nri-qos"));
    CHECK(backups(t.path, "config.toml").size() == 1);
}

// ---- issue #31 §7: the real layouts of each config version (tests/fixtures/containerd) -------

namespace {

/// A fixture of tests/fixtures/containerd copied into `t` as `name`, its plugin_path moved into
/// `t` (a v010-adapter in the host's /opt/nri/plugins must not change the test).
std::string real_layout(const TempDir& t, const std::string& fixture, const std::string& name = "config.toml") {
    std::string text = slurp(std::string(NRI_QOS_SRCDIR) + "/tests/fixtures/containerd/" + fixture);
    REQUIRE(!text.empty());
    for (size_t p = text.find("/opt/nri/plugins"); p != std::string::npos; p = text.find("/opt/nri/plugins", p + 1))
        text.replace(p, std::string("/opt/nri/plugins").size(), t / "plugins");
    spit(t / name, text);
    return t / name;
}

}  // namespace

TEST_CASE("containerd config: `config default` of 1.6.20, 1.7.24, 2.2.7 and 2.3.4 read as each release reads it",
          "[register][node][containerd-config]") {
    struct Case {
        const char* fixture;
        const char* release;
        int version;
        const char* nri_section;  // as register would write it
        std::optional<bool> disable;
        const char* runtime_section;
        nriqos::HookMode called;
    };
    const Case cases[] = {
        {"default-1.6.20.toml", "1.6.20", 2, "[plugins.\"io.containerd.nri.v1.nri\"]", std::nullopt,
         "[plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.runc]", nriqos::HookMode::V01},
        {"default-1.7.24.toml", "1.7.24", 2, "[plugins.\"io.containerd.nri.v1.nri\"]", true,
         "[plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.runc]", nriqos::HookMode::None},
        {"default-2.2.7.toml", "2.2.7", 3, "[plugins.\"io.containerd.nri.v1.nri\"]", false,
         "[plugins.\"io.containerd.cri.v1.runtime\".containerd.runtimes.runc]", nriqos::HookMode::Native},
        {"default-2.3.4.toml", "2.3.4", 4, "[plugins.\"io.containerd.nri.v1.nri\"]", false,
         "[plugins.\"io.containerd.cri.v1.runtime\".containerd.runtimes.runc]", nriqos::HookMode::Native},
        // 2.3.4's own `config migrate` of 1.6's default: version 4, the same names as its default.
        {"migrate-v2-2.3.4.toml", "2.3.4", 4, "[plugins.\"io.containerd.nri.v1.nri\"]", false,
         "[plugins.\"io.containerd.cri.v1.runtime\".containerd.runtimes.runc]", nriqos::HookMode::Native},
    };
    for (const Case& c : cases) {
        TempDir t;
        INFO(c.fixture << " as containerd " << c.release);
        nriqos::RuntimeInfo i = read_as(real_layout(t, c.fixture), c.release);
        CHECK(i.error.empty());
        CHECK(i.config_version == c.version);
        CHECK(i.nri_section == c.nri_section);
        CHECK(i.nri_disable == c.disable);
        CHECK(i.runtime_section == c.runtime_section);
        REQUIRE(i.pod_annotations);
        CHECK(i.pod_annotations->empty());
        CHECK(i.plugin_path == (c.disable ? t / "plugins" : std::string("/opt/nri/plugins")));
        CHECK(nriqos::mode_called(i) == c.called);
        CHECK(i.config_notes.empty());
    }
    // Each version's file on a release that does not read it: 2.2 refuses version 4, 1.7 refuses 3.
    {
        TempDir t;
        CHECK(has(read_as(real_layout(t, "default-2.3.4.toml"), "2.2.7").error, "refuses config version 4"));
        CHECK(has(read_as(real_layout(t, "default-2.2.7.toml"), "1.7.24").error, "version 3"));
    }
}

TEST_CASE("containerd config: a version-1 [plugins.nri] is not the NRI plugin on 2.3, as 2.3.4's own `config migrate` shows",
          "[register][node][containerd-config]") {
    TempDir t;
    // 2.3.4 migrated v1-1.x.toml's [plugins.nri] to io.containerd.grpc.v1.nri and kept the NRI
    // plugin's own section at its default (on): what register must read from the version-1 file.
    const std::string migrated = slurp(std::string(NRI_QOS_SRCDIR) + "/tests/fixtures/containerd/migrate-v1-2.3.4.toml");
    REQUIRE(has(migrated, "[plugins.'io.containerd.grpc.v1.nri']"));
    REQUIRE(has(migrated, "pod_annotations = ['koordinator.sh/*']"));
    nriqos::RuntimeInfo v1 = read_as(real_layout(t, "v1-1.x.toml"), "2.3.4");
    CHECK(v1.error.empty());
    CHECK(v1.config_version == 4);
    CHECK_FALSE(v1.nri_disable);  // unset: 2.x's default, on
    CHECK(nriqos::mode_called(v1) == nriqos::HookMode::Native);
    REQUIRE(v1.pod_annotations);
    CHECK(*v1.pod_annotations == std::vector<std::string>{"koordinator.sh/*"});
    REQUIRE(v1.config_notes.size() == 1);
    CHECK(has(v1.config_notes[0], "io.containerd.grpc.v1.nri"));
    // The migrated file reads the same.
    nriqos::RuntimeInfo m = read_as(real_layout(t, "migrate-v1-2.3.4.toml", "m.toml"), "2.3.4");
    CHECK(m.error.empty());
    REQUIRE(m.nri_disable);
    CHECK_FALSE(*m.nri_disable);
    REQUIRE(m.pod_annotations);
    CHECK(*m.pod_annotations == std::vector<std::string>{"koordinator.sh/*"});
    // The same file on 1.7: short IDs are the plugins.
    nriqos::RuntimeInfo on17 = read_as(t / "config.toml", "1.7.24");
    CHECK(on17.config_version == 1);
    REQUIRE(on17.nri_disable);
    CHECK_FALSE(*on17.nri_disable);
    CHECK(on17.nri_section == "[plugins.nri]");
}

TEST_CASE("register edits the real default configs: --enable-nri on 1.7.24's, --pass-annotations on 1.6.20's and 2.3.4's",
          "[register][node][containerd-config]") {
    {
        TempDir t;
        const std::string cfg = real_layout(t, "default-1.7.24.toml");
        std::string out;
        int rc = run_cli({"register", "--containerd-config", cfg, "--containerd-version", "1.7.24", "--conf-json", t / "conf.json", "--plugins-dir",
                          t / "plugins", "--binary", "/bin/sh", "--isulad-config", t / "none.json", "--crio-config", t / "none.conf", "--enable-nri",
                          "--backup-dir", bdir(t.path)},
                         out);
        INFO(out);
        CHECK(rc == 0);
        nriqos::RuntimeInfo i = read_as(cfg, "1.7.24");
        CHECK(i.error.empty());
        REQUIRE(i.nri_disable);
        CHECK_FALSE(*i.nri_disable);
        CHECK(has(slurp(cfg), "[plugins.\"io.containerd.nri.v1.nri\"]\n    disable = false"));
        CHECK(exists(t / "plugins/10-nri-qos"));
    }
    for (const char* rel : {"1.6.20", "2.3.4"}) {
        TempDir t;
        INFO(rel);
        const std::string cfg = real_layout(t, std::string("default-") + rel + ".toml");
        nriqos::RuntimeInfo before = read_as(cfg, rel);
        nriqos::RegisterResult r = nriqos::pass_annotations(before, {"koordinator.sh/qosClass"}, "S", bdir(t.path));
        INFO(r.message);
        CHECK(r.exit_code == 0);
        nriqos::RuntimeInfo after = read_as(cfg, rel);
        CHECK(after.error.empty());
        REQUIRE(after.pod_annotations);
        CHECK(*after.pod_annotations == std::vector<std::string>{"koordinator.sh/qosClass"});
        CHECK(after.runtime_section == before.runtime_section);
    }
}

// ---- issue #31 §6: the v0.1 path on containerd 2.x ----------------------------------------------

TEST_CASE("register --mode both: conf.json only where it adds events; nri-qos's entry removed on 2.x", "[register][node][v01-2x]") {
    const std::string theirs = R"({"version":"0.1","plugins":[{"type":"sh"},{"type":"nri-qos","conf":{}}]})";
    struct Case {
        const char* fixture;
        const char* release;
        bool conf_json_entry;
        const char* says;
    };
    const Case cases[] = {
        {"default-2.3.4.toml", "2.3.4", false, "a conf.json entry would make containerd evaluate each pod sandbox a second time"},
        {"default-2.2.7.toml", "2.2.7", false, "registering the native plugin only"},
        {"default-1.7.24.toml", "1.7.24", false, "containerd 1.7 never reads conf.json"},
        {"default-1.6.20.toml", "1.6.20", true, "registering the NRI v0.1 hook (conf.json) and the native NRI plugin"},
    };
    for (const Case& c : cases) {
        TempDir t;
        INFO(c.release);
        spit(t / "conf.json", theirs);
        std::string out;
        int rc = run_cli({"register", "--mode", "both", "--containerd-config", real_layout(t, c.fixture), "--containerd-version", c.release,
                          "--conf-json", t / "conf.json", "--plugins-dir", t / "plugins", "--binary", "/bin/sh", "--isulad-config", t / "none.json",
                          "--crio-config", t / "none.conf"},
                         out);
        INFO(out);
        CHECK(rc == 0);
        CHECK(exists(t / "plugins/10-nri-qos"));
        CHECK(has(slurp(t / "conf.json"), "\"nri-qos\"") == c.conf_json_entry);
        CHECK(has(slurp(t / "conf.json"), "\"sh\""));  // another plugin's entry is never touched
        CHECK(has(out, c.says));
        CHECK_FALSE(has(out, "evaluated twice"));
    }
    // No containerd known: both, and a warning about 2.x.
    TempDir t;
    std::string out;
    int rc = run_cli(
        {"register", "--mode", "both", "--containerd-config", t / "absent.toml", "--containerd-version", "none", "--conf-json", t / "conf.json",
         "--plugins-dir", t / "plugins", "--binary", "/bin/sh", "--isulad-config", t / "none.json", "--crio-config", t / "none.conf"},
        out);
    INFO(out);
    CHECK(rc == 0);
    CHECK(exists(t / "plugins/10-nri-qos"));
    CHECK(has(slurp(t / "conf.json"), "\"nri-qos\""));
    CHECK(has(out, "nri-qos: WARNING: On containerd 2.x the conf.json entry makes every pod sandbox evaluated twice"));
}

TEST_CASE("register warns in one line about a conf.json entry whose binary is missing, and ours beside the native plugin on 2.x",
          "[register][node][v01-2x]") {
    TempDir t;
    ::mkdir((t / "bin").c_str(), 0755);
    spit(t / "bin/present", "#!/bin/sh\n");
    ::chmod((t / "bin/present").c_str(), 0755);
    spit(t / "conf.json", R"({"version":"0.1","plugins":[{"type":"present"},{"type":"nri-qos-gone"},{"type":"nri-qos"}]})");
    const std::string search = t / "bin";
    auto info = [&](const char* fixture, const char* rel) { return read_as(real_layout(t, fixture), rel); };
    // 2.3.4 (native on) with the native plugin: the missing binaries, and ours doubling sandboxes.
    std::vector<std::string> p = nriqos::conf_json_problems(t / "conf.json", "nri-qos", info("default-2.3.4.toml", "2.3.4"), true, search);
    std::string all;
    for (const auto& line : p) all += line + "\n";
    INFO(all);
    REQUIRE(p.size() == 3);
    CHECK(p[0] == t / "conf.json" +
                      " lists \"nri-qos-gone\", which is no executable in PATH or /opt/nri/bin: containerd 2.3.4 (at every pod "
                      "sandbox start) fails every pod start with it (\"nri invoke: plugin: nri-qos-gone: exec: ...\"). Fix: nri-qos unregister "
                      "--type nri-qos-gone --conf-json " +
                      t / "conf.json" + ", or reinstall nri-qos-gone");
    CHECK(has(p[1], "lists \"nri-qos\", which is no executable"));
    CHECK(p[2] == t / "conf.json" +
                      " lists \"nri-qos\" beside the native plugin: containerd 2.3.4 still runs it at every pod sandbox start "
                      "and stop (podsandbox controller), so each sandbox is evaluated twice. Fix: nri-qos unregister --conf-json " +
                      t / "conf.json");
    for (const auto& line : p) CHECK(line.find('\n') == std::string::npos);
    // Without the native plugin: only the missing binaries.
    CHECK(nriqos::conf_json_problems(t / "conf.json", "nri-qos", info("default-2.3.4.toml", "2.3.4"), false, search).size() == 2);
    // 1.6.20 reads it at every event: the missing binaries; no doubling (no native NRI).
    CHECK(nriqos::conf_json_problems(t / "conf.json", "nri-qos", info("default-1.6.20.toml", "1.6.20"), true, search).size() == 2);
    // 1.7.24 (no adapter) never reads it: nothing.
    CHECK(nriqos::conf_json_problems(t / "conf.json", "nri-qos", info("default-1.7.24.toml", "1.7.24"), true, search).empty());
    // A conf.json containerd cannot read fails every pod start too.
    spit(t / "bad.json", "{\"plugins\": [");
    p = nriqos::conf_json_problems(t / "bad.json", "nri-qos", info("default-2.3.4.toml", "2.3.4"), false, search);
    REQUIRE(p.size() == 1);
    CHECK(has(p[0], "is not valid JSON"));
    CHECK(has(p[0], "fails every pod start (\"unable to create nri client\")"));
    // Absent or empty: nothing.
    CHECK(nriqos::conf_json_problems(t / "absent.json", "nri-qos", info("default-2.3.4.toml", "2.3.4"), true, search).empty());
    // The CLI: `register --mode v01` on 2.3.4 with the native plugin in place warns about both,
    // and says a conf.json hook gets no container there.
    ::mkdir((t / "plugins").c_str(), 0755);
    REQUIRE(::symlink("/bin/sh", (t / "plugins/10-nri-qos").c_str()) == 0);
    spit(t / "conf.json", R"({"version":"0.1","plugins":[{"type":"nri-qos-gone"}]})");
    std::string out;
    int rc = run_cli(
        {"register", "--mode", "v01", "--containerd-config", real_layout(t, "default-2.3.4.toml"), "--containerd-version", "2.3.4", "--conf-json",
         t / "conf.json", "--plugins-dir", t / "plugins", "--isulad-config", t / "none.json", "--crio-config", t / "none.conf"},
        out);
    INFO(out);
    CHECK(rc == 0);
    CHECK(has(out, "nri-qos: WARNING: it runs /etc/nri/conf.json hooks only at pod sandbox start and stop, never for a container:"));
    CHECK(has(out, "nri-qos: WARNING: " + t / "conf.json" + " lists \"nri-qos-gone\", which is no executable"));
    CHECK(has(out, "lists \"nri-qos\" beside the native plugin"));
}

// ---- issue #31 §7: iSulad's daemon.json as iSulad parses it -------------------------------------

TEST_CASE("iSulad daemon.json: the keys libisula's schema parses, not the design doc's spellings", "[register][node][isulad]") {
    // The daemon.json iSulad ships (src/contrib/config/daemon.json at fd0fcf85): neither CRI v1
    // nor NRI set.
    const std::string shipped = slurp(std::string(NRI_QOS_SRCDIR) + "/tests/fixtures/isulad/daemon.json");
    REQUIRE(has(shipped, "\"pod-sandbox-image\""));
    nriqos::NativeRuntimeInfo a;
    nriqos::read_isulad_config(shipped, a);
    CHECK(a.error.empty());
    CHECK_FALSE(a.nri_enabled);
    CHECK_FALSE(a.cri_v1);
    CHECK(a.plugin_path == "/opt/nri/plugins");
    CHECK(a.notes.empty());
    // The same with what iSulad's k8s guide (enable-cri-v1) and the schema's NRI keys add.
    nlohmann::json j = nlohmann::json::parse(shipped);
    j["enable-cri-v1"] = true;
    j["nri-support"] = true;
    j["plugin-path"] = "/usr/libexec/nri/plugins";
    j["disable-connections"] = true;
    j["plugin-registration-timeout"] = 10;
    nriqos::NativeRuntimeInfo b;
    nriqos::read_isulad_config(j.dump(4), b);
    CHECK(b.error.empty());
    REQUIRE(b.nri_enabled);
    CHECK(*b.nri_enabled);
    REQUIRE(b.cri_v1);
    CHECK(*b.cri_v1);
    CHECK(b.plugin_path == "/usr/libexec/nri/plugins");
    REQUIRE(b.notes.size() == 2);
    CHECK(has(b.notes[0], "\"disable-connections\": true: no external NRI plugin may connect"));
    CHECK(b.notes[1] == "iSulad: \"plugin-registration-timeout\": 10 s");
    // The design doc's layout (nri_design.md: "disable_connections", "plugin_path", ...): iSulad
    // reads none of those keys; before, register took "plugin_path" for the plugin directory.
    nriqos::NativeRuntimeInfo c;
    nriqos::read_isulad_config(R"({"nri-support": true, "disable_connections": true, "plugin_config_path": "/etc/nri/conf.d",
                                   "plugin_path": "/srv/plugins", "plugin_registration_timeout": "5s", "plugin_request_timeout": "2s"})",
                               c);
    CHECK(c.error.empty());
    CHECK(c.plugin_path == "/opt/nri/plugins");
    REQUIRE(c.notes.size() == 5);
    CHECK(c.notes[0] ==
          "iSulad does not read \"plugin_path\" in daemon.json (it parses \"plugin-path\": lcr "
          "src/json/schema/isulad-daemon-configs.json); the setting has no effect");
    // A key of the wrong type stops iSulad: an error.
    nriqos::NativeRuntimeInfo d;
    nriqos::read_isulad_config(R"({"nri-support": "true"})", d);
    CHECK(d.error == "daemon.json: \"nri-support\" must be true or false (iSulad refuses to start)");
    CHECK_FALSE(d.nri_enabled);
}

TEST_CASE("register on iSulad: warns when CRI v1 or NRI is off, or the binary has no NRI", "[register][node][isulad]") {
    TempDir t;
    auto reg = [&](std::string& out) {
        return run_cli(
            {"register", "--containerd-config", t / "absent.toml", "--containerd-version", "none", "--conf-json", t / "conf.json", "--isulad-config",
             t / "daemon.json", "--crio-config", t / "none.conf", "--plugins-dir", t / "plugins", "--binary", "/bin/sh"},
            out);
    };
    // The shipped daemon.json: native plugin, warnings for both switches.
    spit(t / "daemon.json", slurp(std::string(NRI_QOS_SRCDIR) + "/tests/fixtures/isulad/daemon.json"));
    std::string out;
    CHECK(reg(out) == 0);
    INFO(out);
    CHECK(exists(t / "plugins/10-nri-qos"));
    CHECK_FALSE(exists(t / "conf.json"));
    CHECK(has(out, "nri-qos: WARNING: iSulad's CRI v1 is NOT ENABLED (\"enable-cri-v1\" not set in " + t / "daemon.json" + "):"));
    CHECK(has(out, "nri-qos: WARNING: Fix: set \"enable-cri-v1\": true in /etc/isulad/daemon.json, then restart iSulad."));
    CHECK(has(out, "nri-qos: WARNING: iSulad native NRI is NOT ENABLED (switch not set): nri-qos will NEVER be called."));
    // The design doc's plugin_path: a note, and the plugin directory stays iSulad's default.
    spit(t / "daemon.json", R"({"enable-cri-v1": true, "nri-support": true, "plugin_path": "/srv/plugins"})");
    CHECK(reg(out) == 0);
    CHECK_FALSE(has(out, "WARNING"));
    CHECK(has(out, "nri-qos: iSulad does not read \"plugin_path\" in daemon.json (it parses \"plugin-path\""));
    CHECK_FALSE(has(out, "use --plugins-dir /srv/plugins"));
    // plugin-path set: register says where iSulad loads plugins from.
    spit(t / "daemon.json", R"({"enable-cri-v1": true, "nri-support": true, "plugin-path": "/srv/plugins"})");
    CHECK(reg(out) == 0);
    CHECK(has(out, "iSulad loads plugins from /srv/plugins: use --plugins-dir /srv/plugins"));
    // A binary that does not link libisula_nri.so, and one that does.
    spit(t / "isulad-no", std::string("\x7f"
                                      "ELF....libisula_libutils.so.0\0liblcr.so\0",
                                      40));
    spit(t / "isulad-yes", std::string(65531, 'x') + "libisula_nri.so" + std::string(10, '\0'));
    REQUIRE(nriqos::isulad_links_nri(t / "isulad-no"));
    CHECK_FALSE(*nriqos::isulad_links_nri(t / "isulad-no"));
    REQUIRE(nriqos::isulad_links_nri(t / "isulad-yes"));
    CHECK(*nriqos::isulad_links_nri(t / "isulad-yes"));
    CHECK_FALSE(nriqos::isulad_links_nri(t / "absent"));
    nriqos::NativeRuntimeInfo i = nriqos::detect_isulad(t / "daemon.json");
    i.found = true;
    i.binary = t / "isulad-no";
    i.nri_built = false;
    nriqos::RegisterPlan p = nriqos::plan_register(nriqos::RuntimeInfo{}, i, nriqos::NativeRuntimeInfo{}, "auto", {});
    std::string w;
    for (const auto& x : p.warnings) w += x + "\n";
    INFO(w);
    CHECK(has(w, "iSulad (" + t / "isulad-no" + ") is built without NRI (it does not link libisula_nri.so"));
}
