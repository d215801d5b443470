// register.cpp — the `register` and `unregister` commands (add_register_commands): options,
// runtime detection, the order of the steps (--enable-nri, the plan, --pass-annotations, the
// annotation pass-list record, v0.1 or native registration) and what is printed. See register.hpp
// for the contract of every function; the steps are in register_v01.cpp, register_native.cpp,
// register_plan.cpp and register_containerd.cpp, their shared helpers in register_files.cpp
// (register_internal.hpp; issue #23).
#include "cli/register.hpp"

#include <sys/stat.h>

#include <ctime>
#include <exception>
#include <iostream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "event/detect.hpp"
#include "policy/policy.hpp"
#include "policy/policy_builtin.hpp"
#include "policy/policy_store.hpp"
#include "cli/register_internal.hpp"

namespace nriqos {

using namespace register_internal;

namespace {

/// Local time "YYYYmmddTHHMMSS" for backup names.
std::string backup_stamp() {
    char buf[32];
    std::time_t t = std::time(nullptr);
    struct tm tmv {};
    localtime_r(&t, &tmv);
    std::strftime(buf, sizeof buf, "%Y%m%dT%H%M%S", &tmv);
    return buf;
}

/// Annotation keys of the policy at `path` ("" = /etc/nri/nri-qos.toml); the built-in policy's
/// when the file is absent or invalid (`note` then says so).
std::vector<std::string> needed_annotations(const std::string& path, std::string& note) {
    const std::string p = path.empty() ? "/etc/nri/nri-qos.toml" : path;
    struct stat st {};
    if (::stat(p.c_str(), &st) != 0) {
        if (!path.empty()) note = "policy " + p + " not found: checking the annotations of the built-in policy";
        return policy_annotation_keys(builtin_policy());
    }
    try {
        PolicyCheck c = check_policy_text(read_policy_file(p), p);
        if (c.errors() == 0) return policy_annotation_keys(c.policy);
        note = "policy " + p + " has errors (nri-qos check " + p + "): checking the annotations of the built-in policy";
    } catch (const std::exception& e) { note = std::string(e.what()) + ": checking the annotations of the built-in policy"; }
    return policy_annotation_keys(builtin_policy());
}

/// The options of `register` and `unregister`, one instance per subcommand (the defaults are
/// register.hpp's kDefault*).
struct Opts {
    std::string conf_json = kDefaultConfJson;
    std::string type = kDefaultType;
    std::string plugin_conf = "{}";
    bool native = false;
    std::string plugins_dir = kDefaultPluginsDir;
    std::string index;
    std::string binary = kDefaultBinary;
    std::string mode = "auto";
    std::string containerd_config, containerd_version;
    bool enable_nri = false, pass_annotations = false, require = false;
    std::string policy, isulad_config, crio_config;
    std::string state_dir = "/run/nri-qos";
    std::string backup_dir = kDefaultBackupDir;
};

/// Prints a step's result: its message on stdout when it succeeded, else on stderr and exits
/// with its exit code (CLI::RuntimeError).
void finish(const RegisterResult& r) {
    if (r.ok()) {
        std::cout << r.message << std::endl;
        return;
    }
    std::cerr << r.message << std::endl;
    throw CLI::RuntimeError(r.exit_code);
}

/// The options of `register` on `r`, stored in `reg`; returns --plugin-conf's (whether it was
/// given decides whether an existing entry keeps its conf).
CLI::Option* add_register_options(CLI::App* r, const std::shared_ptr<Opts>& reg) {
    r->add_option("--conf-json", reg->conf_json, "NRI v0.1 config file")->capture_default_str();
    r->add_option("--type", reg->type, "plugin type (binary name) / native plugin name")->capture_default_str();
    CLI::Option* pc = r->add_option("--plugin-conf", reg->plugin_conf,
                                    "JSON object passed as the request's conf (default {}; "
                                    "without it an existing entry keeps its conf)");
    r->add_flag("--native", reg->native, "install <plugins-dir>/<index>-<type> -> <binary> instead");
    r->add_option("--plugins-dir", reg->plugins_dir, "native NRI plugin_path")->capture_default_str();
    r->add_option("--index", reg->index, "native NRI plugin index (two digits)")->capture_default_str();
    r->add_option("--binary", reg->binary, "absolute path of the nri-qos binary (symlink target)")->capture_default_str();
    r->add_option("--mode", reg->mode,
                  "auto (detect the runtime: src/event/detect.hpp), v01 (conf.json), native, or both (the native plugin, and "
                  "conf.json where it adds events: containerd 1.5/1.6 or unknown)")
        ->check(CLI::IsMember({"auto", "v01", "native", "both"}))
        ->capture_default_str();
    r->add_option("--containerd-config", reg->containerd_config,
                  "containerd config.toml to inspect (default: the running containerd's, else /etc/containerd/config.toml)");
    r->add_option("--containerd-version", reg->containerd_version, "containerd version to assume instead of asking `containerd --version`");
    r->add_flag("--enable-nri", reg->enable_nri,
                "enable containerd's native NRI in its config (disable = false, plugin_request_timeout = \"2s\"), after a backup");
    r->add_flag("--pass-annotations", reg->pass_annotations,
                "add the pod annotations the policy reads to containerd 1.6's pod_annotations allow-list, after a backup");
    r->add_flag("--require", reg->require,
                "containerd >= 2.2: make NRI's default validator refuse containers nri-qos did not see "
                "(default_validator enable = true, required_plugins += <type>), after a backup");
    r->add_option("--backup-dir", reg->backup_dir,
                  "where --enable-nri / --pass-annotations / --require copy a containerd config file before editing it "
                  "(as <dir>/<the file's absolute path>.<stamp>; never where a containerd imports glob reads it)")
        ->capture_default_str();
    r->add_option(
        "--policy", reg->policy,
        "policy whose annotations must reach the hook (default: --plugin-conf's policy, else /etc/nri/nri-qos.toml, else the built-in one)");
    r->add_option("--isulad-config", reg->isulad_config, "iSulad daemon.json to inspect (default /etc/isulad/daemon.json)");
    r->add_option("--state-dir", reg->state_dir,
                  "where the hook keeps its state: the annotations the runtime passes to v0.1 hooks are recorded there (annotation-passlist)")
        ->capture_default_str();
    r->add_option("--crio-config", reg->crio_config, "CRI-O crio.conf to inspect, with its <file>.d/*.conf drop-ins (default /etc/crio/crio.conf)");
    return pc;
}

/// The last steps of `register`, in the mode the plan chose (reg->mode): the v0.1 entry dropped
/// when the plan says so, then the native plugin (unless the external relay serves the runtime),
/// the conf.json entry, or both; each followed by the conf.json check (conf_json_problems).
void register_in_mode(const std::shared_ptr<Opts>& reg, const RuntimeInfo& info, const nlohmann::ordered_json& conf, CLI::Option* pc,
                      const RegisterPlan& plan, bool asked_native) {
    // What conf.json will do wrong once registered: a stale entry fails every pod start, ours
    // beside the native plugin doubles each sandbox on 2.x (issue #31 §6). One line each.
    auto conf_json_check = [&](bool native_serves) {
        for (const auto& w : conf_json_problems(reg->conf_json, reg->type, info, native_serves, v01_search_path()))
            std::cerr << "nri-qos: WARNING: " << w << std::endl;
    };
    if (plan.drop_v01) {
        RegisterResult d = unregister_v01(reg->conf_json, reg->type);
        if (!d.ok()) return finish(d);
        if (d.changed) std::cerr << d.message << std::endl;
    }
    if (reg->mode == "native" || reg->mode == "both") {
        // The external relay serves the runtime already (the operator switched to it, and a
        // package upgrade's postinst runs `register` again): a launched plugin beside it would
        // be a second 10-nri-qos at the runtime's next start (issue #20 §2: never both).
        const std::string serving = external_relay_serving(reg->state_dir);
        if (!serving.empty()) {
            const std::string link = reg->plugins_dir + "/" + reg->index + "-" + reg->type;
            struct stat lst {};
            const bool have_link = ::lstat(link.c_str(), &lst) == 0;
            const std::string what = "the " + serving + " serves the runtime as an external NRI plugin (" + reg->state_dir + "/relay.json)";
            if (asked_native) {
                finish(fail_result(what + ": not installing the launched plugin " + link + " beside it (the runtime would see two " + reg->index +
                                   "-" + reg->type + "); stop it first: systemctl disable --now nri-qos-relay"));
                return;
            }
            if (have_link)
                std::cerr << "nri-qos: WARNING: " << link << " exists as well: the runtime will start it beside "
                          << "the relay service at its next start. Fix: nri-qos unregister --native" << std::endl;
            conf_json_check(true);
            finish(ok_result(false, "native NRI: " + what + "; no launched plugin installed in " + reg->plugins_dir));
            return;
        }
        RegisterResult n = enable_native(reg->plugins_dir, reg->index, reg->binary, reg->type);
        if (reg->mode == "both" && n.ok()) {
            std::cout << n.message << std::endl;
            n = register_v01_ordered(reg->conf_json, reg->type, conf, pc->count() > 0);
        }
        conf_json_check(true);
        finish(n);
        return;
    }
    RegisterResult v = register_v01_ordered(reg->conf_json, reg->type, conf, pc->count() > 0);
    conf_json_check(native_entry_present(reg->plugins_dir, reg->type) || !external_relay_serving(reg->state_dir).empty());
    finish(v);
}

/// `register`: --plugin-conf checked, the runtime detected, --enable-nri, the plan,
/// --pass-annotations, --require, the annotation pass-list record and the plan's notes and
/// warnings, then the registration itself (register_in_mode). Every outcome goes through finish.
void run_register(const std::shared_ptr<Opts>& reg, CLI::Option* pc) {
    // A bad --plugin-conf is refused whatever the mode turns out to be (before detection).
    nlohmann::ordered_json conf;
    try {
        conf = nlohmann::ordered_json::parse(reg->plugin_conf);
    } catch (const nlohmann::json::parse_error& e) {
        std::string w = e.what();
        auto pos = w.find("] ");
        if (pos != std::string::npos) w = w.substr(pos + 2);
        finish(fail_result("--plugin-conf is not valid JSON (" + w + ")", 2));
        return;
    }
    if (pc->count() > 0) {
        RegisterResult bad = check_plugin_conf(conf);
        if (!bad.ok()) {
            finish(bad);
            return;
        }
    }
    // Which runtime runs here, which mode will it call, what does it drop? Register the mode
    // it calls (auto), warn loudly about everything that keeps nri-qos from being called or
    // from seeing the annotations its policy reads (issues #11 §6, #20 §4, #25 §1).
    RuntimeInfo info = detect_runtime(reg->containerd_config, reg->containerd_version);
    const std::string stamp = backup_stamp();
    if (reg->enable_nri) {
        if (info.version.empty() && !info.config_found)
            return finish(fail_result("--enable-nri: no containerd found (give --containerd-config / --containerd-version)"));
        RegisterResult e = enable_containerd_nri(info, stamp, reg->backup_dir);
        if (!e.ok()) {
            finish(e);
            return;
        }
        std::cerr << e.message << std::endl;
        if (e.changed) info = detect_runtime(reg->containerd_config, reg->containerd_version);
    }
    const NativeRuntimeInfo isulad = detect_isulad(reg->isulad_config);
    const NativeRuntimeInfo crio = detect_crio(reg->crio_config);
    std::string policy_path = reg->policy;
    if (policy_path.empty() && conf.is_object() && conf.contains("policy") && conf["policy"].is_string())
        policy_path = conf["policy"].get<std::string>();
    std::string policy_note;
    const std::vector<std::string> needed = needed_annotations(policy_path, policy_note);
    if (reg->native) reg->mode = "native";
    const bool asked_native = reg->mode == "native";
    RegisterPlan plan = plan_register(info, isulad, crio, reg->mode, needed);
    if (reg->pass_annotations && !plan.missing_annotations.empty()) {
        RegisterResult e = pass_annotations(info, plan.missing_annotations, stamp, reg->backup_dir);
        if (!e.ok()) {
            finish(e);
            return;
        }
        std::cerr << e.message << std::endl;
        info = detect_runtime(reg->containerd_config, reg->containerd_version);
        plan = plan_register(info, isulad, crio, reg->mode, needed);
    } else if (reg->pass_annotations) {
        std::cerr << "nri-qos: --pass-annotations: nothing to add (the runtime passes every annotation the policy reads"
                  << (info.version.empty() || containerd_native_capable(info) ? ", or is not an NRI v0.1 containerd" : "") << ")" << std::endl;
    }
    // Runtime-level fail-closed (issue #31 §4): only a native plugin can be required.
    if (reg->require) {
        if (plan.mode != "native")
            return finish(fail_result("--require: nri-qos is registered as an NRI v0.1 hook here (mode " + plan.mode +
                                      "); required_plugins names native NRI plugins: register --native"));
        RegisterResult e = require_plugin(info, reg->type, stamp, reg->backup_dir);
        if (!e.ok()) return finish(e);
        std::cerr << e.message << std::endl;
    }
    // What the runtime passes to a v0.1 hook, for the events to say "not passed by
    // containerd" instead of "no ... annotation" (issue #25 §1; detect.hpp).
    if (plan.mode == "v01" || plan.mode == "both")
        if (auto pl = annotation_passlist_of(info)) {
            std::string e = record_annotation_passlist(reg->state_dir, *pl);
            if (!e.empty()) std::cerr << "nri-qos: " << e << std::endl;
        }
    if (!policy_note.empty()) std::cerr << "nri-qos: " << policy_note << std::endl;
    for (const auto& n : plan.notes) std::cerr << "nri-qos: " << n << std::endl;
    for (const auto& w : plan.warnings) {
        std::istringstream lines(w);
        std::string line;
        while (std::getline(lines, line)) std::cerr << "nri-qos: WARNING: " << line << std::endl;
    }
    reg->mode = plan.mode;
    register_in_mode(reg, info, conf, pc, plan, asked_native);
}

}  // namespace

void add_register_commands(CLI::App& app) {
    // Shared by both subcommands; CLI11 keeps the callbacks alive as long as `app`.
    auto reg = std::make_shared<Opts>();
    auto unreg = std::make_shared<Opts>();
    reg->index = kDefaultIndex;

    CLI::App* r = app.add_subcommand("register",
                                     "Enable nri-qos: add it to the NRI v0.1 conf.json, or with --native install "
                                     "the native NRI plugin symlink");
    CLI::Option* pc = add_register_options(r, reg);
    r->callback([reg, pc]() { run_register(reg, pc); });

    CLI::App* u = app.add_subcommand("unregister",
                                     "Disable nri-qos: remove it from the NRI v0.1 conf.json, or with --native "
                                     "remove the native NRI plugin symlink(s)");
    u->add_option("--conf-json", unreg->conf_json, "NRI v0.1 config file")->capture_default_str();
    u->add_option("--type", unreg->type, "plugin type / native plugin name")->capture_default_str();
    u->add_flag("--native", unreg->native, "remove <plugins-dir>/NN-<type> symlinks to <binary>");
    u->add_option("--plugins-dir", unreg->plugins_dir, "native NRI plugin_path")->capture_default_str();
    u->add_option("--index", unreg->index, "only this index (default: every NN-<type>)");
    u->add_option("--binary", unreg->binary, "only links to this path are removed")->capture_default_str();
    u->callback([unreg]() {
        if (unreg->native) finish(disable_native(unreg->plugins_dir, unreg->index, unreg->binary, unreg->type));
        else finish(unregister_v01(unreg->conf_json, unreg->type));
    });
}

}  // namespace nriqos
