#include "event/detect.hpp"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/wait.h>
#include <fnmatch.h>
#include <fstream>
#include <glob.h>
#include <map>
#include <sstream>
#include <sys/stat.h>
#include <unistd.h>

#include <nlohmann/json.hpp>
#include <toml.hpp>

#include "event/containerd_config.hpp"
#include "event/publish.hpp"
#include "records/state.hpp"
#include "os/clock.hpp"
#include "os/dir.hpp"

namespace nriqos {

const char* hook_mode_name(HookMode m) {
    switch (m) {
        case HookMode::V01: return "v0.1 (/etc/nri/conf.json)";
        case HookMode::Native: return "native NRI plugin";
        case HookMode::None: return "none";
        case HookMode::Unknown: break;
    }
    return "unknown";
}

bool parse_containerd_version(const std::string& out, std::string& version, int& major, int& minor) {
    std::istringstream in(out);
    std::string tok;
    while (in >> tok) {
        std::string t = tok[0] == 'v' ? tok.substr(1) : tok;
        int a = 0, b = 0, c = 0;
        if (std::sscanf(t.c_str(), "%d.%d.%d", &a, &b, &c) >= 2 && std::isdigit(static_cast<unsigned char>(t[0]))) {
            size_t end = t.find_first_not_of("0123456789.");
            version = t.substr(0, end);
            major = a;
            minor = b;
            return true;
        }
    }
    return false;
}

void read_nri_config(const std::string& text, RuntimeInfo& info) {
    RuntimeInfo one = info;
    one.error.clear();
    read_containerd_layers({{info.config.empty() ? "config.toml" : info.config, text}}, one);
    info.nri_disable = one.nri_disable;
    info.plugin_path = one.plugin_path;
    if (!one.runtime_binary.empty()) info.runtime_binary = one.runtime_binary;
    if (!one.error.empty()) info.error = one.error;
}

namespace {

std::string run_version(const std::string& bin) {
    std::string cmd = "'" + bin + "' --version 2>/dev/null";
    FILE* p = popen(cmd.c_str(), "r");
    if (!p) return "";
    char buf[512];
    std::string out;
    while (fgets(buf, sizeof buf, p)) out += buf;
    pclose(p);
    return out;
}

std::string slurp(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    std::stringstream s;
    s << f.rdbuf();
    return s.str();
}

}  // namespace

RuntimeInfo detect_runtime(const std::string& config_override, const std::string& version_override) {
    RuntimeInfo r;
    r.config = "/etc/containerd/config.toml";
    // A running containerd: its own binary and --config/-c.
    list_dir("/proc", [&](const DirEntry& e) {
        if (!std::isdigit(static_cast<unsigned char>(e.name[0]))) return true;
        std::string base = std::string("/proc/") + e.name;
        std::string comm = slurp(base + "/comm");
        if (comm != "containerd\n") return true;
        char exe[4096];
        ssize_t n = readlink((base + "/exe").c_str(), exe, sizeof exe - 1);
        if (n > 0) r.binary = std::string(exe, static_cast<size_t>(n));
        std::string cmdline = slurp(base + "/cmdline");
        std::vector<std::string> args;
        for (size_t a = 0; a < cmdline.size();) {
            size_t z = cmdline.find('\0', a);
            args.push_back(cmdline.substr(a, z - a));
            if (z == std::string::npos) break;
            a = z + 1;
        }
        for (size_t i = 0; i + 1 < args.size(); ++i)
            if (args[i] == "--config" || args[i] == "-c") r.config = args[i + 1];
        for (const auto& a : args)
            if (a.rfind("--config=", 0) == 0) r.config = a.substr(9);
        r.running = true;
        return false;
    });
    if (r.binary.empty()) {
        for (const char* p : {"/usr/bin/containerd", "/usr/local/bin/containerd", "/usr/sbin/containerd", "/bin/containerd"}) {
            if (access(p, X_OK) == 0) {
                r.binary = p;
                break;
            }
        }
    }
    if (!version_override.empty()) parse_containerd_version(version_override, r.version, r.major, r.minor);
    else if (!r.binary.empty()) parse_containerd_version(run_version(r.binary), r.version, r.major, r.minor);
    if (ContainerdRelease rel; parse_containerd_release(r.version, rel)) r.patch = rel.patch;
    if (!config_override.empty()) r.config = config_override;
    struct stat st {};
    if (stat(r.config.c_str(), &st) == 0 && S_ISREG(st.st_mode)) {
        r.config_found = true;
        read_containerd_config(r);
    }
    list_dir(r.plugin_path.c_str(), [&](const DirEntry& e) {
        std::string n = e.name;
        if (n.size() > 3 && n.find("v010-adapter") != std::string::npos) r.adapter = true;
        return true;
    });
    return r;
}

RuntimeFormula probe_runtime_formula(const std::string& binary, std::string& why, int timeout_ms) {
    RuntimeFormula f;
    f.binary = binary.empty() ? "runc" : binary;
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0) {
        why = std::string("pipe: ") + std::strerror(errno);
        return f;
    }
    pid_t pid = fork();
    if (pid < 0) {
        why = std::string("fork: ") + std::strerror(errno);
        close(fds[0]), close(fds[1]);
        return f;
    }
    if (pid == 0) {
        int null = open("/dev/null", O_RDWR | O_CLOEXEC);
        if (null >= 0) dup2(null, STDIN_FILENO), dup2(null, STDERR_FILENO);
        dup2(fds[1], STDOUT_FILENO);
        char* const argv[] = {const_cast<char*>(f.binary.c_str()), const_cast<char*>("--version"), nullptr};
        if (f.binary.find('/') == std::string::npos && !getenv("PATH"))
            setenv("PATH", "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", 1);
        execvp(argv[0], argv);
        _exit(127);
    }
    close(fds[1]);
    std::string out;
    const int64_t until = monotonic_ns() + int64_t(timeout_ms) * 1000000;
    bool timed_out = false;
    while (out.size() < 4096) {
        int64_t left = (until - monotonic_ns()) / 1000000;
        if (left <= 0) {
            timed_out = true;
            break;
        }
        struct pollfd p {
            fds[0], POLLIN, 0
        };
        int n = poll(&p, 1, static_cast<int>(left));
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
            timed_out = n == 0;
            break;
        }
        char buf[512];
        ssize_t r = read(fds[0], buf, sizeof buf);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) break;
        out.append(buf, static_cast<size_t>(r));
    }
    close(fds[0]);
    if (timed_out) kill(pid, SIGKILL);
    int st = 0;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {}
    if (timed_out) {
        why = f.binary + " --version did not answer within " + std::to_string(timeout_ms) + " ms";
        return f;
    }
    if (WIFEXITED(st) && WEXITSTATUS(st) == 127 && out.empty()) {
        why = "cannot run " + f.binary + " (not found on PATH?)";
        return f;
    }
    f.formula = runtime_version_formula(out, f.version);
    if (f.formula == WeightFormula::Auto) {
        std::string line = out.substr(0, out.find('\n')).substr(0, 80);
        why = f.binary + " --version named no runc/crun version (\"" + line + "\")";
    }
    return f;
}

std::string refresh_runtime_formula(const std::string& state_dir, const std::string& binary, int timeout_ms) {
    std::string why;
    RuntimeFormula f = probe_runtime_formula(binary, why, timeout_ms);
    // A runtime too slow to answer this time is asked again next time: nothing is cached.
    if (why.find("did not answer") != std::string::npos) return "cannot read the runtime's version: " + why + " (not cached; asked again next time)";
    nlohmann::json j = {{"v", 1}, {"binary", f.binary}, {"version", f.version}, {"formula", weight_formula_name(f.formula)}, {"note", why}};
    StateDir st(state_dir);
    std::string e = st.write_file(kRuntimeFormulaFile, j.dump() + "\n");
    if (!e.empty()) return "cannot cache the runtime's cpu.weight formula: " + e;
    if (f.formula == WeightFormula::Auto)
        return "runtime probe: " + why + "; settings.cpu_weight_formula = \"auto\" falls back to log-quadratic (cached in " + state_dir + "/" +
               kRuntimeFormulaFile + ")";
    return f.version + " (" + f.binary + " --version): " + weight_formula_name(f.formula) + " cpu.weight formula, cached in " + state_dir + "/" +
           kRuntimeFormulaFile;
}

std::string implicit_runtime_probe(const std::string& state_dir, const std::string& default_state_dir, bool only_if_missing, int timeout_ms) {
    const char* env = getenv("NRI_QOS_RUNTIME_BINARY");
    if (env && std::strcmp(env, "none") == 0) return "";
    if (!env && state_dir != default_state_dir) return "";
    StateDir st(state_dir);
    std::optional<std::string> cached = st.read_file(kRuntimeFormulaFile);
    if (only_if_missing && cached) return "";
    std::string binary = env && *env ? env : "";
    if (binary.empty() && cached)
        if (auto f = load_runtime_formula(*cached)) binary = f->binary;
    return refresh_runtime_formula(state_dir, binary, timeout_ms);
}

std::optional<RuntimeFormula> load_runtime_formula(const std::string& text) {
    try {
        nlohmann::json j = nlohmann::json::parse(text);
        if (!j.is_object() || j.value("v", 0) != 1) return std::nullopt;
        RuntimeFormula f;
        f.binary = j.at("binary").get<std::string>().substr(0, 256);
        f.version = j.at("version").get<std::string>().substr(0, 64);
        const std::string n = j.at("formula").get<std::string>();
        f.formula = n == "linear" ? WeightFormula::Linear : n == "log-quadratic" ? WeightFormula::LogQuadratic : WeightFormula::Auto;
        return f;
    } catch (...) { return std::nullopt; }
}

HookMode mode_called(const RuntimeInfo& r) {
    if (r.version.empty()) return HookMode::Unknown;
    if (r.major < 1 || (r.major == 1 && r.minor < 7)) return HookMode::V01;
    bool disabled = r.nri_disable ? *r.nri_disable : r.major < 2;  // 1.7: off by default; 2.x: on
    if (disabled || !r.nri_disabled_in.empty()) return HookMode::None;
    return r.adapter ? HookMode::V01 : HookMode::Native;  // the adapter relays native → v0.1
}

std::string describe(const RuntimeInfo& r) {
    if (r.version.empty()) return r.binary.empty() ? "no containerd found" : "containerd at " + r.binary + " (version unknown)";
    std::string s = "containerd " + r.version + " (" + r.binary + (r.running ? ", running" : "") + ")";
    if (r.major > 1 || (r.major == 1 && r.minor >= 7)) {
        bool disabled = r.nri_disable ? *r.nri_disable : r.major < 2;
        if (!r.nri_disabled_in.empty()) s += ", native NRI disabled (disabled_plugins in " + r.nri_disabled_in + ")";
        else
            s += std::string(", native NRI ") + (disabled ? "disabled" : "enabled") +
                 (r.nri_disable    ? " in " + (r.nri_file.empty() ? r.config : r.nri_file)
                  : r.config_found ? " (default; not set in " + r.config + ")"
                                   : " (default)");
        if (r.adapter) s += ", v010-adapter in " + r.plugin_path;
    } else {
        s += ", NRI v0.1 only";
    }
    if (!r.error.empty()) s += "; " + r.error;
    return s;
}

// ---- containerd config `imports`, iSulad, CRI-O ----

namespace {

std::string config_dir_of(const std::string& p) {
    size_t k = p.find_last_of('/');
    if (k == std::string::npos) return ".";
    return k == 0 ? "/" : p.substr(0, k);
}

/// Go's filepath.Clean for absolute or relative paths: "." and empty elements dropped, ".."
/// removes the element before it (lexically).
std::string clean_path(const std::string& p) {
    const bool abs = !p.empty() && p[0] == '/';
    std::vector<std::string> parts;
    std::istringstream in(p);
    std::string el;
    while (std::getline(in, el, '/')) {
        if (el.empty() || el == ".") continue;
        if (el == "..") {
            if (!parts.empty() && parts.back() != "..") parts.pop_back();
            else if (!abs) parts.push_back(el);
            continue;
        }
        parts.push_back(el);
    }
    std::string out = abs ? "/" : "";
    for (size_t i = 0; i < parts.size(); ++i) out += (i ? "/" : "") + parts[i];
    return out.empty() ? "." : out;
}

/// The first process whose /proc/PID/comm is `comm` (exe path in `exe`); false when none.
bool find_process(const std::string& comm, std::string& exe) {
    bool found = false;
    list_dir("/proc", [&](const DirEntry& e) {
        if (!std::isdigit(static_cast<unsigned char>(e.name[0]))) return true;
        std::string base = std::string("/proc/") + e.name;
        if (slurp(base + "/comm") != comm + "\n") return true;
        char buf[4096];
        ssize_t n = readlink((base + "/exe").c_str(), buf, sizeof buf - 1);
        if (n > 0) exe = std::string(buf, static_cast<size_t>(n));
        found = true;
        return false;
    });
    return found;
}

bool regular_file(const std::string& p) {
    struct stat st {};
    return stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

const toml::value* table_at(const toml::value& v, const std::string& key) {
    if (!v.is_table() || !v.contains(key)) return nullptr;
    const toml::value& x = v.at(key);
    return x.is_table() ? &x : nullptr;
}

}  // namespace

void read_containerd_config(RuntimeInfo& r) {
    std::vector<std::string> texts;
    std::string err;
    std::vector<std::string> files = containerd_config_files(r.config, texts, err, r.major);
    std::vector<std::pair<std::string, std::string>> layers;
    for (size_t i = 0; i < files.size() && i < texts.size(); ++i) layers.emplace_back(files[i], texts[i]);
    read_containerd_layers(layers, r);
    if (!err.empty() && r.error.empty()) r.error = err;
}

std::string resolve_import(const std::string& imp, const std::string& importer, int containerd_major) {
    if (!imp.empty() && imp[0] == '/') return imp.find('*') != std::string::npos ? imp : clean_path(imp);
    if (imp.find('*') == std::string::npos || containerd_major >= 2) return clean_path(config_dir_of(importer) + "/" + imp);
    return clean_path("/" + imp);  // 1.x: filepath.Glob as written, from containerd's working directory
}

std::vector<std::string> containerd_config_files(const std::string& main_path, std::vector<std::string>& texts, std::string& error,
                                                 int containerd_major) {
    std::vector<std::string> out, pending{main_path};
    texts.clear();
    while (!pending.empty()) {
        std::string path = pending.front();
        pending.erase(pending.begin());
        if (std::find(out.begin(), out.end(), path) != out.end()) continue;  // circular imports
        if (!regular_file(path)) {
            error = "cannot read " + path + (path == main_path ? "" : " (imported)");
            return out;
        }
        std::string text = slurp(path);
        std::vector<std::string> imports;
        try {
            std::istringstream in(text);
            toml::value v = toml::parse(in, path);
            if (v.is_table() && v.contains("imports") && v.at("imports").is_array())
                for (const auto& x : v.at("imports").as_array())
                    if (x.is_string()) imports.push_back(x.as_string().str);
        } catch (const std::exception& e) {
            std::string w = e.what();
            error = "cannot parse " + path + ": " + w.substr(0, w.find('\n'));
            out.push_back(path);
            texts.push_back(text);
            return out;
        }
        out.push_back(path);
        texts.push_back(text);
        for (const std::string& imp : imports) {
            const std::string where = resolve_import(imp, path, containerd_major);
            if (where.find('*') != std::string::npos) {
                glob_t g{};
                if (glob(where.c_str(), 0, nullptr, &g) == 0)
                    for (size_t i = 0; i < g.gl_pathc; ++i) pending.push_back(g.gl_pathv[i]);
                globfree(&g);
            } else {
                pending.push_back(where);
            }
        }
    }
    return out;
}

void read_containerd_layers(const std::vector<std::pair<std::string, std::string>>& files, RuntimeInfo& info) {
    info.config_files.clear();
    info.nri_disable.reset();
    info.plugin_path = "/opt/nri/plugins";
    info.nri_file.clear();
    info.nri_section.clear();
    info.nri_disabled_in.clear();
    info.validator_enable.reset();
    info.required_plugins.reset();
    info.cri_file.clear();
    info.runtime_name = "runc";
    info.runtime_table = false;
    info.runtime_section.clear();
    info.pod_annotations.reset();
    info.dropin_dir.clear();
    info.import_patterns.clear();
    info.config_notes.clear();
    info.config_version = 0;
    for (const auto& f : files) info.config_files.push_back(f.first);
    ContainerdRelease rel;
    parse_containerd_release(info.version, rel);
    const ContainerdConfigView v = read_containerd_view(files, rel);
    if (!v.error.empty()) info.error = v.error;
    info.config_version = v.version;
    info.import_patterns = v.import_patterns;
    info.nri_disabled_in = v.nri_disabled_in;
    info.config_notes = v.notes;
    const std::string tail = "/*.toml";
    for (const auto& imp : v.import_patterns)
        if (imp.size() > tail.size() && imp[0] == '/' && imp.compare(imp.size() - tail.size(), tail.size(), tail) == 0 &&
            imp.find('*') == imp.size() - tail.size() + 1) {
            info.dropin_dir = imp.substr(0, imp.size() - tail.size());
            break;
        }
    info.nri_section = toml_header({"plugins", nri_id_for_file(v, new_file_version(v))});
    if (const ConfigNode* nri = v.plugins.at({v.nri_id}); nri && nri->is_table) {
        info.nri_file = nri->file;
        info.nri_section = toml_header(nri->path);
        if (const ConfigNode* d = nri->at({"disable"}); d && !d->is_table && d->leaf.is_boolean()) {
            info.nri_disable = d->leaf.as_boolean();
            info.nri_file = d->file;
            std::vector<std::string> table = d->path;
            table.pop_back();
            info.nri_section = toml_header(table);
        }
        if (const ConfigNode* pp = nri->at({"plugin_path"}); pp && !pp->is_table && pp->leaf.is_string()) info.plugin_path = pp->leaf.as_string().str;
        if (const ConfigNode* en = nri->at({"default_validator", "enable"}); en && !en->is_table && en->leaf.is_boolean())
            info.validator_enable = en->leaf.as_boolean();
        if (const ConfigNode* rp = nri->at({"default_validator", "required_plugins"}); rp && !rp->is_table && rp->leaf.is_array()) {
            std::vector<std::string> names;
            for (const auto& e : rp->leaf.as_array())
                if (e.is_string()) names.push_back(e.as_string().str);
            info.required_plugins = names;
        }
    }
    const ConfigNode* cri = v.plugins.at({v.cri_runtime_id});
    if (cri && cri->is_table) {
        info.cri_file = cri->file;
        if (const ConfigNode* n = cri->at({"containerd", "default_runtime_name"}); n && !n->is_table && n->leaf.is_string())
            info.runtime_name = n->leaf.as_string().str;
    }
    std::vector<std::string> rt_path{"plugins", cri_runtime_id_for_file(v, new_file_version(v)), "containerd", "runtimes", info.runtime_name};
    if (const ConfigNode* rt = cri ? cri->at({"containerd", "runtimes", info.runtime_name}) : nullptr; rt && rt->is_table) {
        info.runtime_table = true;
        info.cri_file = rt->file;
        rt_path = rt->path;
        if (const ConfigNode* pa = rt->at({"pod_annotations"}); pa && !pa->is_table && pa->leaf.is_array()) {
            std::vector<std::string> pats;
            for (const auto& x : pa->leaf.as_array())
                if (x.is_string()) pats.push_back(x.as_string().str);
            info.pod_annotations = pats;
            info.cri_file = pa->file;
            rt_path = pa->path;
            rt_path.pop_back();
        }
        if (const ConfigNode* b = rt->at({"options", "BinaryName"}); b && !b->is_table && b->leaf.is_string())
            info.runtime_binary = b->leaf.as_string().str;
    }
    info.runtime_section = toml_header(rt_path);
}

bool annotation_passed(const std::vector<std::string>& patterns, const std::string& key) {
    for (const auto& p : patterns)
        if (fnmatch(p.c_str(), key.c_str(), FNM_PATHNAME) == 0) return true;
    return false;
}

namespace {
int64_t mtime_ns_of(const std::string& path) {
    struct stat st {};
    if (stat(path.c_str(), &st) != 0) return -1;
    return static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
}
}  // namespace

std::optional<AnnotationPasslist> annotation_passlist_of(const RuntimeInfo& info) {
    if (info.version.empty()) return std::nullopt;
    AnnotationPasslist p;
    p.runtime = "containerd " + info.version;
    // containerd ≥ 1.7 calls v0.1 hooks only through the v010-adapter, a native NRI plugin that
    // receives every annotation; < 1.7 passes the default runtime's pod_annotations only
    // (pkg/cri/server/helpers.go getPassthroughAnnotations).
    p.passes_all = info.major > 1 || (info.major == 1 && info.minor >= 7);
    if (info.pod_annotations) {
        p.set = true;
        p.patterns = *info.pod_annotations;
    }
    std::string file = !info.cri_file.empty() ? info.cri_file : info.config_found ? info.config : info.config + " (absent)";
    p.where = info.runtime_section + " pod_annotations in " + file;
    if (!info.binary.empty()) p.files.emplace_back(info.binary, mtime_ns_of(info.binary));
    p.files.emplace_back(info.config, mtime_ns_of(info.config));
    for (const auto& f : info.config_files)
        if (f != info.config) p.files.emplace_back(f, mtime_ns_of(f));
    return p;
}

std::string record_annotation_passlist(const std::string& state_dir, const AnnotationPasslist& p) {
    nlohmann::json files = nlohmann::json::array();
    for (const auto& [f, t] : p.files) files.push_back({{"path", f}, {"mtime_ns", t}});
    nlohmann::json j = {{"v", 1},           {"runtime", p.runtime}, {"passes_all", p.passes_all}, {"set", p.set}, {"patterns", p.patterns},
                        {"where", p.where}, {"files", files}};
    StateDir st(state_dir);
    std::string e = st.write_file(kAnnotationPasslistFile, j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n");
    return e.empty() ? e : "cannot record the annotations the runtime passes: " + e;
}

std::optional<AnnotationPasslist> load_annotation_passlist(const std::string& text) {
    try {
        nlohmann::json j = nlohmann::json::parse(text);
        if (!j.is_object() || j.value("v", 0) != 1) return std::nullopt;
        AnnotationPasslist p;
        p.runtime = j.at("runtime").get<std::string>().substr(0, 64);
        p.passes_all = j.at("passes_all").get<bool>();
        p.set = j.at("set").get<bool>();
        for (const auto& x : j.at("patterns")) p.patterns.push_back(x.get<std::string>());
        p.where = j.at("where").get<std::string>().substr(0, 512);
        for (const auto& f : j.at("files")) p.files.emplace_back(f.at("path").get<std::string>(), f.at("mtime_ns").get<int64_t>());
        return p;
    } catch (...) { return std::nullopt; }
}

bool annotation_passlist_stale(const AnnotationPasslist& p) {
    for (const auto& [f, t] : p.files)
        if (mtime_ns_of(f) != t) return true;
    return false;
}

std::string refresh_annotation_passlist(const std::string& state_dir, const std::string& default_state_dir) {
    const char* cfg = getenv("NRI_QOS_CONTAINERD_CONFIG");
    const char* ver = getenv("NRI_QOS_CONTAINERD_VERSION");
    if (!cfg && state_dir != default_state_dir) return "";
    StateDir st(state_dir);
    if (auto text = st.read_file(kAnnotationPasslistFile, 65536))
        if (auto p = load_annotation_passlist(*text); p && !annotation_passlist_stale(*p)) return "";
    RuntimeInfo info = detect_runtime(cfg ? cfg : "", ver ? ver : "");
    std::optional<AnnotationPasslist> p = annotation_passlist_of(info);
    if (!p) return "";  // no containerd here: nothing to record
    if (std::string e = record_annotation_passlist(state_dir, *p); !e.empty()) return e;
    std::string what = p->passes_all ? "all" : p->set ? "" : "none (pod_annotations not set)";
    if (!p->passes_all && p->set) {
        for (const auto& x : p->patterns) what += (what.empty() ? "[" : ", ") + x;
        what += what.empty() ? "[]" : "]";
    }
    return "annotations  " + p->runtime + " passes to v0.1 hooks: " + what + " (recorded in " + state_dir + "/" + kAnnotationPasslistFile + ")";
}

std::string annotation_not_passed_reason(const std::optional<AnnotationPasslist>& p, const std::string& key) {
    if (!p) return "containerd may not pass it: check pod_annotations; nri-qos register records what it passes";
    if (p->passes_all || annotation_passed(p->patterns, key)) return "";
    return "not passed by " + p->runtime + ": add " + key + " to pod_annotations (" + p->where + "; nri-qos register --pass-annotations)";
}

void read_isulad_config(const std::string& json_text, NativeRuntimeInfo& info) {
    try {
        nlohmann::json j = nlohmann::json::parse(json_text);
        if (!j.is_object()) {
            info.error = "daemon.json is not a JSON object";
            return;
        }
        // The keys of libisula's schema (read_isulad_config, detect.hpp); a wrong type makes
        // iSulad's generated parser fail, and iSulad with it.
        auto typed = [&](const char* key, bool (nlohmann::json::*is)() const noexcept, const char* type) {
            if (!j.contains(key)) return false;
            if ((j[key].*is)()) return true;
            if (info.error.empty()) info.error = std::string("daemon.json: \"") + key + "\" must be " + type + " (iSulad refuses to start)";
            return false;
        };
        if (typed("nri-support", &nlohmann::json::is_boolean, "true or false")) info.nri_enabled = j["nri-support"].get<bool>();
        if (typed("enable-cri-v1", &nlohmann::json::is_boolean, "true or false")) info.cri_v1 = j["enable-cri-v1"].get<bool>();
        if (typed("plugin-path", &nlohmann::json::is_string, "a string")) info.plugin_path = j["plugin-path"].get<std::string>();
        typed("plugin-config-path", &nlohmann::json::is_string, "a string");
        if (typed("disable-connections", &nlohmann::json::is_boolean, "true or false") && j["disable-connections"].get<bool>())
            info.notes.push_back(
                "iSulad: \"disable-connections\": true: no external NRI plugin may connect (the nri-qos relay service "
                "cannot); the launched plugin in " +
                info.plugin_path + " is not affected");
        for (const char* k : {"plugin-registration-timeout", "plugin-requst-timeout"})
            if (typed(k, &nlohmann::json::is_number_unsigned, "a whole number of seconds"))
                info.notes.push_back(std::string("iSulad: \"") + k + "\": " + std::to_string(j[k].get<uint64_t>()) + " s");
        // The spellings iSulad's NRI design doc uses, which its parser does not read.
        static const struct {
            const char* doc;
            const char* parsed;
        } kDocKeys[] = {{"plugin_path", "plugin-path"},
                        {"plugin_config_path", "plugin-config-path"},
                        {"disable_connections", "disable-connections"},
                        {"plugin_registration_timeout", "plugin-registration-timeout"},
                        {"plugin_request_timeout", "plugin-requst-timeout"},
                        {"plugin-request-timeout", "plugin-requst-timeout"},
                        {"socket_path", "(none: iSulad's NRI socket is /var/run/nri/nri.sock)"},
                        {"nri_support", "nri-support"},
                        {"enable_cri_v1", "enable-cri-v1"}};
        for (const auto& k : kDocKeys)
            if (j.contains(k.doc))
                info.notes.push_back(std::string("iSulad does not read \"") + k.doc + "\" in daemon.json (it parses \"" + k.parsed +
                                     "\": lcr src/json/schema/isulad-daemon-configs.json); the setting has no effect");
    } catch (const std::exception& e) {
        std::string w = e.what();
        info.error = "cannot parse daemon.json: " + w.substr(0, w.find('\n'));
    }
}

void read_crio_configs(const std::vector<std::pair<std::string, std::string>>& files, NativeRuntimeInfo& info) {
    for (const auto& [path, text] : files) {
        info.config_files.push_back(path);
        try {
            std::istringstream in(text);
            toml::value v = toml::parse(in, path);
            const toml::value* crio = table_at(v, "crio");
            const toml::value* nri = crio ? table_at(*crio, "nri") : nullptr;
            if (!nri) continue;
            if (nri->contains("enable_nri") && nri->at("enable_nri").is_boolean()) info.nri_enabled = nri->at("enable_nri").as_boolean();
            if (nri->contains("nri_plugin_dir") && nri->at("nri_plugin_dir").is_string())
                info.plugin_path = nri->at("nri_plugin_dir").as_string().str;
        } catch (const std::exception& e) {
            std::string w = e.what();
            info.error = "cannot parse " + path + ": " + w.substr(0, w.find('\n'));
            return;
        }
    }
}

std::optional<bool> isulad_links_nri(const std::string& binary) {
    std::ifstream f(binary, std::ios::binary);
    if (!f) return std::nullopt;
    // The dynamic string table names every DT_NEEDED library; 64 MiB bounds a hostile file.
    std::string buf(1 << 16, '\0'), tail;
    static const std::string kLib = "libisula_nri.so";
    size_t total = 0;
    while (f && total < (64u << 20)) {
        f.read(&buf[0], static_cast<std::streamsize>(buf.size()));
        const size_t n = static_cast<size_t>(f.gcount());
        if (n == 0) break;
        total += n;
        const std::string window = tail + buf.substr(0, n);
        if (window.find(kLib) != std::string::npos) return true;
        tail = window.substr(window.size() > kLib.size() ? window.size() - kLib.size() : 0);
    }
    return false;
}

NativeRuntimeInfo detect_isulad(const std::string& config) {
    NativeRuntimeInfo r;
    r.name = "iSulad";
    r.running = find_process("isulad", r.binary);
    if (r.binary.empty())
        for (const char* p : {"/usr/bin/isulad", "/usr/local/bin/isulad"})
            if (access(p, X_OK) == 0) {
                r.binary = p;
                break;
            }
    const std::string cfg = config.empty() ? "/etc/isulad/daemon.json" : config;
    if (regular_file(cfg)) {
        r.config_files.push_back(cfg);
        read_isulad_config(slurp(cfg), r);
    }
    if (!r.binary.empty()) r.nri_built = isulad_links_nri(r.binary);
    r.found = !r.binary.empty() || r.running || !r.config_files.empty();
    return r;
}

NativeRuntimeInfo detect_crio(const std::string& config) {
    NativeRuntimeInfo r;
    r.name = "CRI-O";
    r.running = find_process("crio", r.binary);
    if (r.binary.empty())
        for (const char* p : {"/usr/bin/crio", "/usr/local/bin/crio"})
            if (access(p, X_OK) == 0) {
                r.binary = p;
                break;
            }
    const std::string cfg = config.empty() ? "/etc/crio/crio.conf" : config;
    std::vector<std::pair<std::string, std::string>> files;
    if (regular_file(cfg)) files.emplace_back(cfg, slurp(cfg));
    glob_t g{};
    if (glob((cfg + ".d/*.conf").c_str(), 0, nullptr, &g) == 0)
        for (size_t i = 0; i < g.gl_pathc; ++i) files.emplace_back(g.gl_pathv[i], slurp(g.gl_pathv[i]));
    globfree(&g);
    read_crio_configs(files, r);
    r.found = !r.binary.empty() || r.running || !r.config_files.empty();
    return r;
}

std::string describe_native(const NativeRuntimeInfo& r) {
    std::string s = r.name + " (" + (r.binary.empty() ? "binary not found" : r.binary) + (r.running ? ", running" : "") + ")";
    std::string where = r.config_files.empty() ? "no configuration file" : r.config_files.back();
    if (r.nri_enabled) s += std::string(", native NRI ") + (*r.nri_enabled ? "enabled" : "disabled") + " in " + where;
    else
        s += ", native NRI not enabled (" + std::string(r.name == "iSulad" ? "\"nri-support\"" : "[crio.nri] enable_nri") + " not set in " + where +
             ")";
    if (!r.error.empty()) s += "; " + r.error;
    return s;
}

}  // namespace nriqos
