#include "cli/pod_preview.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dirent.h>
#include <fcntl.h>
#include <ftw.h>
#include <set>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "model/knobs.hpp"
#include "policy/policy_store.hpp"
#include "os/sandbox.hpp"
#include "os/fd.hpp"
#include "os/dir.hpp"

using nlohmann::json;

namespace nriqos {

namespace {

// ---- small file helpers (the scratch tree is ours: plain paths) ------------------------------

bool mkdirs(const std::string& p) {
    std::string cur;
    for (size_t i = 0; i <= p.size(); ++i) {
        if (i == p.size() || p[i] == '/') {
            if (!cur.empty() && mkdir(cur.c_str(), 0700) != 0 && errno != EEXIST) return false;
        }
        if (i < p.size()) cur += p[i];
    }
    return true;
}

bool put(const std::string& path, const std::string& v) {
    int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0) return false;
    bool ok = write(fd, v.data(), v.size()) == static_cast<ssize_t>(v.size());
    close(fd);
    return ok;
}

std::optional<std::string> get(const std::string& path) {
    int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) return std::nullopt;
    std::string s;
    char buf[4096];
    ssize_t n;
    while ((n = read(fd, buf, sizeof buf)) > 0 && s.size() < 65536) s.append(buf, static_cast<size_t>(n));
    close(fd);
    if (n < 0) return std::nullopt;
    while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
    return s;
}

bool is_dir(const std::string& p) {
    struct stat st {};
    return stat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}
bool exists(const std::string& p) {
    struct stat st {};
    return stat(p.c_str(), &st) == 0;
}

// ---- the knob files of a layout, their kernel defaults, and which ones the node has ---------

struct KnobFile {
    std::string ctrl;  ///< v1 controller directory ("" on v2)
    std::string file;
    std::string dflt;  ///< the value of a new cgroup
};

std::string kernel_default(const std::string& f) {
    static const std::map<std::string, std::string> d = {
        {"cpu.shares", "1024"},
        {"cpu.cfs_quota_us", "-1"},
        {"cpu.cfs_period_us", "100000"},
        {"cpu.cfs_burst_us", "0"},
        {"cpu.weight", "100"},
        {"cpu.max", "max 100000"},
        {"cpu.max.burst", "0"},
        {"cpu.idle", "0"},
        {"memory.limit_in_bytes", "9223372036854771712"},
        {"memory.memsw.limit_in_bytes", "9223372036854771712"},
        {"memory.soft_limit_in_bytes", "9223372036854771712"},
        {"memory.max", "max"},
        {"memory.high", "max"},
        {"memory.swap.max", "max"},
        {"memory.low", "0"},
        {"memory.min", "0"},
        {"pids.max", "max"},
        {"blkio.weight", "500"},
        {"io.weight", "default 100"},
        {"io.bfq.weight", "default 100"},
        {"io.max", ""},
        {"blkio.throttle.read_bps_device", ""},
        {"blkio.throttle.write_bps_device", ""},
        {"blkio.throttle.read_iops_device", ""},
        {"blkio.throttle.write_iops_device", ""},
    };
    auto it = d.find(f);
    return it == d.end() ? "0" : it->second;
}

std::vector<KnobFile> layout_files(Layout l) {
    std::vector<KnobFile> out;
    std::set<std::string> seen;
    auto add = [&](const char* ctrl, const char* file) {
        if (!file) return;
        std::string key = std::string(ctrl ? ctrl : "") + "/" + file;
        if (!seen.insert(key).second) return;
        out.push_back({ctrl ? ctrl : "", file, kernel_default(file)});
    };
    for (const auto& k : knob_table()) {
        if (l == Layout::V2) add(nullptr, k.v2_file);
        else add(k.v1_ctrl, k.v1_file);
    }
    if (l == Layout::V2) add(nullptr, "io.bfq.weight");
    else {
        add("memory", "memory.high");  // openEuler's v1 memory.high (knob table); only where the node has it
        for (auto k : {ThrottleEntry::Wbps, ThrottleEntry::Riops, ThrottleEntry::Wiops}) add("blkio", throttle_v1_file(k));
    }
    return out;
}

/// Which knob files a new cgroup of the node has: those of its kubepods cgroup.
struct NodeTemplate {
    Layout layout = Layout::V1;
    std::string root;
    bool mirrored = false;
    std::string note;
    std::map<std::string, std::string> dir_of_ctrl;  ///< v1 controller (or "" on v2) → template dir

    bool has(const KnobFile& f) const {
        if (!mirrored) return true;
        auto it = dir_of_ctrl.find(f.ctrl);
        if (it == dir_of_ctrl.end()) return false;  // controller not mounted on the node
        return exists(it->second + "/" + f.file);
    }
};

NodeTemplate node_template(const std::string& root, Layout l) {
    NodeTemplate t;
    t.layout = l;
    t.root = root;
    auto pick = [&](const std::string& base) -> std::string {
        for (const char* d : {"kubepods.slice", "kubepods"})
            if (is_dir(base + "/" + d)) return base + "/" + d;
        return "";
    };
    if (l == Layout::V2) {
        std::string d = pick(root);
        if (!d.empty()) t.dir_of_ctrl[""] = d;
    } else {
        std::set<std::string> ctrls;
        for (const auto& f : layout_files(l)) ctrls.insert(f.ctrl);
        for (const auto& c : ctrls) {
            std::string d = pick(root + "/" + c);
            if (!d.empty()) t.dir_of_ctrl[c] = d;
        }
    }
    t.mirrored = !t.dir_of_ctrl.empty();
    t.note = t.mirrored ? "knob files as in the node's kubepods cgroup under " + root
                        : "no kubepods cgroup under " + root + ": every knob file of cgroup " + (l == Layout::V2 ? "v2" : "v1") +
                              " taken as present (give --cgroup-root of a node, or a copy of its tree, to preview that kernel)";
    return t;
}

// ---- kubelet's oom_score_adj (pkg/kubelet/qos/policy.go GetContainerOOMScoreAdjust) --------

int64_t kubelet_oom_score_adj(KubeQos q, const std::optional<int64_t>& mem_request, int64_t mem_capacity) {
    if (q == KubeQos::Guaranteed) return -997;
    if (q == KubeQos::BestEffort) return 1000;
    int64_t req = mem_request ? *mem_request : 0;
    int64_t adj = mem_capacity > 0 ? 1000 - (1000 * (req > INT64_MAX / 1000 ? INT64_MAX / 1000 : req)) / mem_capacity : 1000;
    if (adj < 3) return 3;
    if (adj >= 1000) return 999;
    return adj;
}

int64_t node_memory(const std::string& proc_root) {
    auto t = get(proc_root + "/meminfo");
    if (!t) return 0;
    long long kb = 0;
    const char* p = std::strstr(t->c_str(), "MemTotal:");
    if (!p || std::sscanf(p, "MemTotal: %lld kB", &kb) != 1) return 0;
    return static_cast<int64_t>(kb) * 1024;
}

// ---- the preview ------------------------------------------------------------------------------

struct Cg {
    std::string label;  ///< "pod", "sandbox", "container NAME"
    std::string dir;  ///< relative cgroup directory
    std::optional<int64_t> pid;
    bool gone = false;  ///< an init container that ran to completion
};

class Preview {
public:
    Preview(const PodPreviewOptions& o, const std::string& scratch) : o_(o), scratch_(scratch) {}

    std::string run(const std::string& text, int& code);
    /// The end state of every cgroup `cgs` names (and its process's oom_score_adj and resctrl
    /// group): appended to the text, returned as the JSON form's "end_state" array.
    json end_state(const std::vector<Cg>& cgs);

private:
    std::string cgp(const std::string& ctrl, const std::string& dir, const std::string& file) const {
        return scratch_ + "/cgroup/" + (ctrl.empty() ? "" : ctrl + "/") + dir + (file.empty() ? "" : "/" + file);
    }
    std::string rel(const std::string& ctrl, const std::string& dir, const std::string& file) const {
        return (ctrl.empty() ? "" : ctrl + "/") + dir + "/" + file;
    }
    void make_cgroup(const std::string& dir, const std::map<std::string, std::string>& values, const std::string& who);
    void runc_create(const Cg& c, const Resources& r, const json& unified, const std::set<std::string>& from_adj);
    json event(const json& ev, const std::string& what);
    void note(const std::string& s) { notes_.push_back(s); }

    const PodPreviewOptions& o_;
    std::string scratch_;
    Layout layout_ = Layout::V1;
    NodeTemplate tpl_;
    std::vector<KnobFile> files_;
    std::map<std::string, std::string> throttle_;  ///< blk-throttle file (rel path) → merged content
    std::map<std::string, std::string> who_;  ///< rel path (cgroup "", proc "proc:", resctrl "resctrl:") → who set it
    std::vector<std::string> notes_;
    std::string text_;
    json events_ = json::array();
    int code_ = 0;
};

void Preview::make_cgroup(const std::string& dir, const std::map<std::string, std::string>& values, const std::string& who) {
    for (const auto& f : files_) {
        if (!tpl_.has(f)) continue;
        mkdirs(cgp(f.ctrl, dir, ""));
        auto v = values.find(f.file);
        put(cgp(f.ctrl, dir, f.file), v != values.end() ? v->second : f.dflt);
        if (v != values.end()) who_[rel(f.ctrl, dir, f.file)] = who;
    }
    // the cpuset controller of v1 needs its directory for cpuset writes even without the files
    if (layout_ != Layout::V2) mkdirs(cgp("cpuset", dir, ""));
}

/// runc creating the container's cgroup from its OCI resources (opencontainers/cgroups fs, fs2).
void Preview::runc_create(const Cg& c, const Resources& r, const json& unified, const std::set<std::string>& from_adj) {
    std::map<std::string, std::string> v;
    std::map<std::string, std::string> src;  // file → OCI field
    const bool v2 = layout_ == Layout::V2;
    if (r.cpu_shares && *r.cpu_shares > 0) {
        if (v2) v["cpu.weight"] = std::to_string(shares_to_weight(static_cast<uint64_t>(*r.cpu_shares), WeightFormula::LogQuadratic));
        else v["cpu.shares"] = std::to_string(*r.cpu_shares);
        src[v2 ? "cpu.weight" : "cpu.shares"] = "shares";
    }
    const int64_t period = r.cpu_period && *r.cpu_period > 0 ? *r.cpu_period : 100000;
    if (v2) {
        if ((r.cpu_quota && *r.cpu_quota != 0) || r.cpu_period) {
            v["cpu.max"] = (r.cpu_quota && *r.cpu_quota > 0 ? std::to_string(*r.cpu_quota) : std::string("max")) + " " + std::to_string(period);
            src["cpu.max"] = from_adj.count("quota") || from_adj.count("period") ? "quota" : "period";
        }
    } else {
        if (r.cpu_period) v["cpu.cfs_period_us"] = std::to_string(period), src["cpu.cfs_period_us"] = "period";
        if (r.cpu_quota && *r.cpu_quota != 0) v["cpu.cfs_quota_us"] = std::to_string(*r.cpu_quota), src["cpu.cfs_quota_us"] = "quota";
    }
    if (r.cpu_cpus && !r.cpu_cpus->empty()) v["cpuset.cpus"] = *r.cpu_cpus, src["cpuset.cpus"] = "cpus";
    if (r.cpu_mems && !r.cpu_mems->empty()) v["cpuset.mems"] = *r.cpu_mems, src["cpuset.mems"] = "mems";
    if (r.mem_limit && *r.mem_limit != 0) {
        v[v2 ? "memory.max" : "memory.limit_in_bytes"] = *r.mem_limit < 0 ? (v2 ? "max" : "-1") : std::to_string(*r.mem_limit);
        src[v2 ? "memory.max" : "memory.limit_in_bytes"] = "limit";
        if (r.mem_swap && *r.mem_swap != 0) {
            if (v2) {  // fs2 ConvertMemorySwapToCgroupV2Value: swap.max = memsw - limit
                int64_t s = *r.mem_swap < 0 || *r.mem_limit < 0 ? -1 : *r.mem_swap - *r.mem_limit;
                v["memory.swap.max"] = s < 0 ? "max" : std::to_string(s);
                src["memory.swap.max"] = "swap";
            } else {
                v["memory.memsw.limit_in_bytes"] = std::to_string(*r.mem_swap);
                src["memory.memsw.limit_in_bytes"] = "swap";
            }
        }
    }
    if (r.pids_limit && *r.pids_limit != 0) v["pids.max"] = *r.pids_limit < 0 ? "max" : std::to_string(*r.pids_limit), src["pids.max"] = "pids";
    if (v2 && unified.is_object())
        for (auto& [f, val] : unified.items())
            if (val.is_string()) v[f] = val.get<std::string>(), src[f] = "unified";
    for (const auto& f : files_) {
        if (!tpl_.has(f)) continue;
        mkdirs(cgp(f.ctrl, c.dir, ""));
        auto it = v.find(f.file);
        put(cgp(f.ctrl, c.dir, f.file), it != v.end() ? it->second : f.dflt);
        if (it != v.end()) {
            const std::string& field = src[f.file];
            who_[rel(f.ctrl, c.dir, f.file)] = from_adj.count(field) || (field == "unified" && from_adj.count("unified/" + f.file))
                                                   ? "runc, from nri-qos's CreateContainer adjustment"
                                                   : "runc (kubelet's OCI " + field + ")";
        }
    }
    if (!v2) mkdirs(cgp("cpuset", c.dir, ""));
    for (const auto& fv : v) {
        const std::string& f = fv.first;  // not a structured binding: C++17 lambdas cannot capture those (clang)
        const auto& val = fv.second;
        bool known = std::any_of(files_.begin(), files_.end(), [&](const KnobFile& k) { return k.file == f && tpl_.has(k); });
        if (!known)
            note("container " + c.label + ": " + f + " = " + val +
                 " not previewed (the node has no such file; runc would refuse a unified file it lacks)");
    }
}

json Preview::event(const json& ev, const std::string& what) {
    Options e = o_.eval;
    e.cgroup_root = scratch_ + "/cgroup";
    e.proc_root = scratch_ + "/proc";
    e.resctrl_root = scratch_ + "/resctrl";
    e.state_dir = scratch_ + "/state";
    e.layout = layout_;
    e.explain_json = true;
    e.explain_nri_event = true;
    e.explain_simulate = true;
    e.sandbox_keep_wide = true;
    e.metrics_file = "";
    e.event_log = "";
    e.default_sinks = false;
    e.deadline_ms = 0;
    int rc = 0;
    std::string out = run_pipeline(Mode::Explain, e, ev.dump(), rc);
    json j;
    try {
        j = json::parse(out);
    } catch (const std::exception& x) { j = {{"error", std::string("explain output: ") + x.what()}}; }
    j["event"] = ev.value("event", "");
    j["subject"] = what;
    // who set each applied write
    const std::string cls = j.value("class", "");
    if (j.contains("writes") && j["writes"].is_array())
        for (const auto& w : j["writes"]) {
            if (w.value("status", "") != "applied") continue;
            const std::string f = w.value("file", "");
            who_[f] = "nri-qos " + j["event"].get<std::string>() + " (class " + cls + ")";
            // blk-throttle files keep one line per device; the scratch file stored only the last
            // write: show what the kernel would (knobs.hpp merge_throttle_file)
            if (is_throttle_file(f) && f.find("..") == std::string::npos) {
                std::string& m = throttle_[f];
                m = merge_throttle_file(f, m, w.value("value", ""));
                put(scratch_ + "/cgroup/" + f, m);
            }
        }
    // text
    text_ += "\n== " + j["event"].get<std::string>() + " " + what + "\n";
    if (j.contains("class")) {
        text_ += "class:    " + cls + " (rule " + j.value("rule", "") + ", kube QoS " + j.value("kube_qos", "") + ")\n";
        if (j.contains("gate") && j["gate"].is_string()) text_ += "gate:     " + j["gate"].get<std::string>() + "\n";
    }
    auto lines = [&](const char* key, const char* tag) {
        if (j.contains(key) && j[key].is_array())
            for (const auto& s : j[key])
                if (s.is_string()) text_ += std::string(tag) + s.get<std::string>() + "\n";
    };
    if (j.contains("writes") && j["writes"].is_array())
        for (const auto& w : j["writes"]) {
            std::string st = w.value("status", "");
            text_ += "write:    " + w.value("scope", "") + " " + w.value("file", "") + " = " + w.value("value", "") +
                     (st == "applied" ? "" : " (" + st + (w.contains("reason") ? ": " + w.value("reason", "") : "") + ")") + "\n";
        }
    lines("facts", "fact:     ");
    lines("not_applicable", "skip:     ");
    lines("refused", "refuse:   ");
    if (j.contains("adjustment") && !j["adjustment"].is_null()) text_ += "nri:      " + j["adjustment"].dump() + "\n";
    if (j.contains("metadata") && j["metadata"].is_object()) {
        for (const char* k : {"error", "warning", "policy_error", "pod_class_note", "cpu_weight_formula"})
            if (j["metadata"].contains(k) && j["metadata"][k].is_string())
                text_ += std::string(k) + ": " + j["metadata"][k].get<std::string>() + "\n";
    }
    if (j.contains("error") && j["error"].is_string()) {
        text_ += "error:    " + j["error"].get<std::string>() + "\n";
        code_ = 1;
    }
    events_.push_back(j);
    return j;
}

/// Apply an NRI ContainerAdjustment to the container's OCI resources, as the runtime does
/// (containerd's NRI adaptation: linux.resources fields replace the spec's; unified entries are
/// added; oom_score_adj replaces the process's). `from` collects the fields it set.
void apply_adjustment(const json& adj, Resources& r, json& unified, std::optional<int64_t>& oom, std::string& rdt, std::set<std::string>& from,
                      std::vector<std::string>& unhandled) {
    if (!adj.is_object()) return;
    auto val = [](const json& w) -> std::optional<int64_t> {
        if (w.is_object() && w.contains("value") && w["value"].is_number_integer()) return w["value"].get<int64_t>();
        if (w.is_number_integer()) return w.get<int64_t>();
        return std::nullopt;
    };
    for (auto& [k, v] : adj.items()) {
        if (k != "linux") {
            unhandled.push_back(k);
            continue;
        }
        for (auto& [lk, lv] : v.items()) {
            if (lk == "oom_score_adj") {
                oom = val(lv);
                from.insert("oom_score_adj");
            } else if (lk == "resources" && lv.is_object()) {
                for (auto& [rk, rv] : lv.items()) {
                    if (rk == "cpu" && rv.is_object()) {
                        for (auto& [ck, cv] : rv.items()) {
                            if (ck == "shares") r.cpu_shares = val(cv);
                            else if (ck == "quota") r.cpu_quota = val(cv);
                            else if (ck == "period") r.cpu_period = val(cv);
                            else if (ck == "cpus" && cv.is_string()) r.cpu_cpus = cv.get<std::string>();
                            else if (ck == "mems" && cv.is_string()) r.cpu_mems = cv.get<std::string>();
                            else {
                                unhandled.push_back("linux.resources.cpu." + ck);
                                continue;
                            }
                            from.insert(ck);
                        }
                    } else if (rk == "memory" && rv.is_object()) {
                        for (auto& [mk, mv] : rv.items()) {
                            if (mk == "limit") r.mem_limit = val(mv);
                            else if (mk == "swap") r.mem_swap = val(mv);
                            else if (mk == "reservation") r.mem_reservation = val(mv);
                            else {
                                unhandled.push_back("linux.resources.memory." + mk);
                                continue;
                            }
                            from.insert(mk);
                        }
                    } else if (rk == "pids" && rv.is_object()) {
                        r.pids_limit = val(rv.value("limit", json()));
                        from.insert("pids");
                    } else if (rk == "unified" && rv.is_object()) {
                        for (auto& [uk, uv] : rv.items()) {
                            unified[uk] = uv;
                            from.insert("unified/" + uk);
                        }
                    } else if (rk == "rdt_class") {
                        if (rv.is_object() && rv.contains("value") && rv["value"].is_string()) rdt = rv["value"].get<std::string>();
                        else if (rv.is_string()) rdt = rv.get<std::string>();
                    } else {
                        unhandled.push_back("linux.resources." + rk);
                    }
                }
            } else {
                unhandled.push_back("linux." + lk);
            }
        }
    }
}

std::string kube_qos_title(KubeQos q) {
    switch (q) {
        case KubeQos::Guaranteed: return "Guaranteed";
        case KubeQos::Burstable: return "Burstable";
        case KubeQos::BestEffort: return "BestEffort";
        default: return "Unknown";
    }
}

json Preview::end_state(const std::vector<Cg>& cgs) {
    json end = json::array();
    text_ += "\n== END STATE (after all events)\n";
    for (const auto& c : cgs) {
        json e = {{"cgroup", c.label}, {"dir", c.dir}, {"files", json::array()}};
        text_ += c.label + (c.gone ? " (ran to completion)" : "") + ": " + c.dir + "\n";
        for (const auto& f : files_) {
            if (!tpl_.has(f)) continue;
            std::string r = rel(f.ctrl, c.dir, f.file);
            auto v = get(scratch_ + "/cgroup/" + r);
            if (!v) continue;
            auto w = who_.find(r);
            if (w == who_.end() && *v == f.dflt) continue;  // untouched kernel default
            std::string who = w == who_.end() ? "kernel default" : w->second;
            e["files"].push_back({{"file", f.file}, {"value", *v}, {"set_by", who}});
            char line[512];
            std::snprintf(line, sizeof line, "  %-28s = %-22s %s\n", f.file.c_str(), v->c_str(), who.c_str());
            text_ += line;
        }
        if (c.pid) {
            std::string r = "proc:" + std::to_string(*c.pid) + "/oom_score_adj";
            if (auto v = get(scratch_ + "/proc/" + std::to_string(*c.pid) + "/oom_score_adj")) {
                std::string who = who_.count(r) ? who_[r] : "kubelet";
                e["files"].push_back({{"file", "oom_score_adj"}, {"value", *v}, {"set_by", who}});
                char line[512];
                std::snprintf(line, sizeof line, "  %-28s = %-22s %s\n", "oom_score_adj (process)", v->c_str(), who.c_str());
                text_ += line;
            }
            for (const auto& [path, who] : who_) {
                if (path.rfind("resctrl:", 0) != 0) continue;
                auto t = get(scratch_ + "/resctrl/" + path.substr(8));
                if (t && t->find(std::to_string(*c.pid)) != std::string::npos) {
                    std::string g = path.substr(8, path.size() - 8 - 6);
                    e["files"].push_back({{"file", "resctrl group"}, {"value", g}, {"set_by", who}});
                    text_ += "  resctrl group                = " + g + "  " + who + "\n";
                }
            }
        }
        end.push_back(e);
    }
    return end;
}

std::string Preview::run(const std::string& text, int& code) {
    PodManifest m;
    try {
        m = parse_pod_manifest(text);
    } catch (const InputError& e) {
        code = 2;
        return std::string("nri-qos: explain --pod: ") + e.what() + "\n";
    }
    const std::string node_root = o_.eval.cgroup_root;
    layout_ = o_.eval.layout ? *o_.eval.layout : detect_layout(node_root);
    std::string driver_why;
    CgroupDriver driver = o_.driver ? *o_.driver : node_cgroup_driver(node_root, layout_, "/var/lib/kubelet/config.yaml", driver_why);
    if (o_.driver) driver_why = "--cgroup-driver";
    tpl_ = node_template(node_root, layout_);
    files_ = layout_files(layout_);
    KubeletPod k = kubelet_pod(m, driver);

    text_ += "pod:      " + m.ns + "/" + m.name + " uid " + m.uid +
             (m.uid_made_up ? " (made up: the manifest has no metadata.uid; stable for this namespace/name)" : "") + "\n";
    text_ += "kubelet:  QoS " + kube_qos_title(k.qos) + " (GetPodQOS)";
    if (!m.status_qos.empty() && m.status_qos != kube_qos_title(k.qos))
        text_ += "; status.qosClass says " + m.status_qos + ": the API server's, kept by kubelet";
    text_ += "; cgroup driver " + std::string(driver == CgroupDriver::Systemd ? "systemd" : "cgroupfs") + " (" + driver_why + "); parent " +
             k.cgroup_parent + "\n";
    text_ += "node:     cgroup " + std::string(layout_name(layout_)) + "; " + tpl_.note + "\n";
    if (layout_ == Layout::V2)
        text_ += "note:     cgroup v2 weights written by kubelet and runc are shown with the log-quadratic conversion (runc >= 1.3.2)\n";
    const std::string cls = ":     ";
    {
        std::string p = "pod cgroup: cpu.shares " + std::to_string(k.pod.cpu_shares);
        if (k.pod.cpu_quota) p += ", quota " + std::to_string(*k.pod.cpu_quota) + " / period " + std::to_string(*k.pod.cpu_period);
        if (k.pod.memory_limit) p += ", memory limit " + std::to_string(*k.pod.memory_limit);
        text_ += "kubelet:  " + p + " (ResourceConfigForPod)\n";
    }
    for (const auto& c : k.containers) {
        std::string p =
            "container " + c.name + (c.init ? (c.sidecar ? " (sidecar init)" : " (init)") : "") + ": OCI shares " + std::to_string(*c.oci.cpu_shares);
        if (c.oci.cpu_quota) p += ", quota " + std::to_string(*c.oci.cpu_quota);
        p += ", period " + std::to_string(*c.oci.cpu_period);
        if (c.oci.mem_limit) p += ", memory limit " + std::to_string(*c.oci.mem_limit);
        text_ += "kubelet:  " + p + " (calculateLinuxResources)\n";
    }

    // the scratch node: directories, the pod and sandbox cgroups as kubelet and runc leave them
    for (const char* d : {"/cgroup", "/proc", "/resctrl", "/state"}) mkdirs(scratch_ + d);
    const bool v2 = layout_ == Layout::V2;
    std::map<std::string, std::string> pod_vals;
    if (v2) {
        pod_vals["cpu.weight"] = std::to_string(shares_to_weight(static_cast<uint64_t>(k.pod.cpu_shares), WeightFormula::LogQuadratic));
        if (k.pod.cpu_quota)
            pod_vals["cpu.max"] = (*k.pod.cpu_quota > 0 ? std::to_string(*k.pod.cpu_quota) : "max") + " " + std::to_string(*k.pod.cpu_period);
        if (k.pod.memory_limit) pod_vals["memory.max"] = std::to_string(*k.pod.memory_limit);
    } else {
        pod_vals["cpu.shares"] = std::to_string(k.pod.cpu_shares);
        if (k.pod.cpu_quota)
            pod_vals["cpu.cfs_quota_us"] = std::to_string(*k.pod.cpu_quota), pod_vals["cpu.cfs_period_us"] = std::to_string(*k.pod.cpu_period);
        if (k.pod.memory_limit) pod_vals["memory.limit_in_bytes"] = std::to_string(*k.pod.memory_limit);
    }
    std::vector<Cg> cgs;
    const std::string pod_dir = k.pod_dir;
    cgs.push_back({"pod " + m.ns + "/" + m.name, pod_dir, std::nullopt, false});
    make_cgroup(pod_dir, pod_vals, "kubelet (ResourceConfigForPod)");
    // The pod cgroup's effective cpuset, which a cpuset from an annotation is checked against
    // (numa.hpp check_pinned_cpuset): a new pod cgroup's is the node's online CPUs (the
    // kubepods cpuset spans them; kubelet writes none of its own).
    if (auto online = get(o_.eval.sysfs_root + "/devices/system/cpu/online"))
        put(layout_ == Layout::V2 ? cgp("", pod_dir, "cpuset.cpus.effective") : cgp("cpuset", pod_dir, "cpuset.effective_cpus"), *online + "\n");
    // resctrl: the node's group names, each with an empty task list
    list_dir(o_.eval.resctrl_root.c_str(), [&](const DirEntry& e) {
        std::string n = e.name;
        if (n == "info" || n.rfind("mon_", 0) == 0) return true;
        if (is_dir(o_.eval.resctrl_root + "/" + n) && mkdirs(scratch_ + "/resctrl/" + n)) put(scratch_ + "/resctrl/" + n + "/tasks", "");
        return true;
    });
    const int64_t mem_capacity = node_memory(o_.eval.proc_root);
    auto make_proc = [&](int64_t pid, int64_t adj, const std::string& who) {
        mkdirs(scratch_ + "/proc/" + std::to_string(pid));
        put(scratch_ + "/proc/" + std::to_string(pid) + "/oom_score_adj", std::to_string(adj));
        who_["proc:" + std::to_string(pid) + "/oom_score_adj"] = who;
    };
    const int64_t sandbox_pid = 1000000;
    {
        CgroupPaths sp = resolve_cgroups_path(k.sandbox.cgroups_path);
        Cg sb{"sandbox (pause)", sp.container, sandbox_pid, false};
        runc_create(sb, k.sandbox.oci, json(), {});
        make_proc(sandbox_pid, -998, "kubelet (pause: PodInfraOOMAdj)");
        cgs.push_back(sb);
    }
    event(nri_pod_event(m, k, "RunPodSandbox", sandbox_pid), "sandbox " + k.sandbox.id.substr(0, 12));
    for (size_t i = 0; i < k.containers.size(); ++i) {
        const PreviewContainer& pc = k.containers[i];
        const ManifestContainer& mc = m.containers[i];
        const std::string what = "container " + pc.name + (pc.init ? (pc.sidecar ? " (sidecar init container)" : " (init container)") : "");
        json cj = event(nri_container_event(m, k, i, "CreateContainer", pc.oci, std::nullopt), what);
        Resources res = pc.oci;
        json unified = json::object();
        std::optional<int64_t> oom;
        std::string rdt;
        std::set<std::string> from;
        std::vector<std::string> unhandled;
        if (cj.contains("adjustment")) apply_adjustment(cj["adjustment"], res, unified, oom, rdt, from, unhandled);
        for (const auto& u : unhandled) note("container " + pc.name + ": adjustment field " + u + " not previewed");
        CgroupPaths cp = resolve_cgroups_path(pc.cgroups_path);
        const int64_t pid = sandbox_pid + 1 + static_cast<int64_t>(i);
        Cg c{"container " + pc.name, cp.container, pid, false};
        runc_create(c, res, unified, from);
        make_proc(pid, oom ? *oom : kubelet_oom_score_adj(k.qos, mc.mem_request, mem_capacity),
                  oom ? "runc, from nri-qos's CreateContainer adjustment" : "kubelet (GetContainerOOMScoreAdjust)");
        if (!rdt.empty()) {
            if (put(scratch_ + "/resctrl/" + rdt + "/tasks", std::to_string(pid)))
                who_["resctrl:" + rdt + "/tasks"] = "runc, from nri-qos's CreateContainer adjustment";
            else note("container " + pc.name + ": resctrl group " + rdt + " does not exist on the node; runc would fail the container");
        }
        event(nri_container_event(m, k, i, "StartContainer", res, pid), what);
        if (pc.init && !pc.sidecar) c.gone = true;
        cgs.push_back(c);
    }
    if (std::any_of(cgs.begin(), cgs.end(), [](const Cg& c) { return c.gone; }))
        note(
            "init containers run to completion before the app containers start; their cgroups are shown as they were while they ran "
            "(native NRI reports no container exit: a pod-level sum drops an exited container once its cgroup has been gone 60 s)");

    json end = end_state(cgs);
    for (const auto& n : notes_) text_ += "note:     " + n + "\n";
    code = code_;
    if (!o_.json) return text_;
    json out = {{"pod",
                 {{"namespace", m.ns},
                  {"name", m.name},
                  {"uid", m.uid},
                  {"uid_made_up", m.uid_made_up},
                  {"kube_qos", kube_qos_name(k.qos)},
                  {"cgroup_driver", driver == CgroupDriver::Systemd ? "systemd" : "cgroupfs"},
                  {"cgroup_parent", k.cgroup_parent},
                  {"layout", layout_name(layout_)}}},
                {"node", tpl_.note},
                {"events", events_},
                {"end_state", end},
                {"notes", notes_}};
    (void)cls;
    return out.dump(2, ' ', false, json::error_handler_t::replace) + "\n";
}

int rm_entry(const char* p, const struct stat*, int, struct FTW*) { return remove(p); }

}  // namespace

CgroupDriver node_cgroup_driver(const std::string& root, Layout l, const std::string& kubelet_config, std::string& why) {
    const std::string base = l == Layout::V2 ? root : root + "/cpu";
    if (is_dir(base + "/kubepods.slice")) {
        why = "the node's " + base + "/kubepods.slice";
        return CgroupDriver::Systemd;
    }
    if (is_dir(base + "/kubepods")) {
        why = "the node's " + base + "/kubepods";
        return CgroupDriver::Cgroupfs;
    }
    if (auto t = get(kubelet_config)) {
        // kubelet's KubeletConfiguration: a top-level "cgroupDriver: systemd|cgroupfs" line
        size_t p = 0;
        while (p < t->size()) {
            size_t e = t->find('\n', p);
            std::string line = t->substr(p, e == std::string::npos ? std::string::npos : e - p);
            p = e == std::string::npos ? t->size() : e + 1;
            if (line.rfind("cgroupDriver:", 0) != 0) continue;
            std::string v = line.substr(13);
            v.erase(0, v.find_first_not_of(" \t\"'"));
            v.erase(v.find_last_not_of(" \t\r\"'") + 1);
            if (v == "systemd" || v == "cgroupfs") {
                why = "cgroupDriver in " + kubelet_config;
                return v == "systemd" ? CgroupDriver::Systemd : CgroupDriver::Cgroupfs;
            }
        }
    }
    why = "no kubepods cgroup under " + base + " and no cgroupDriver in " + kubelet_config + ": kubelet's default";
    return CgroupDriver::Cgroupfs;
}

std::string preview_pod(const std::string& manifest_text, const PodPreviewOptions& o, const std::string& scratch, int& code) {
    Preview p(o, scratch);
    try {
        return p.run(manifest_text, code);
    } catch (const InputError& e) {
        code = 2;
        return std::string("nri-qos: explain --pod: ") + e.what() + "\n";
    } catch (const std::exception& e) {
        code = 2;
        return std::string("nri-qos: explain --pod: internal error: ") + e.what() + "\n";
    }
}

int explain_pod(const PodPreviewOptions& o) {
    const char* tmp = std::getenv("TMPDIR");
    std::string tmpl = std::string(tmp && *tmp ? tmp : "/tmp") + "/nri-qos-preview.XXXXXX";
    std::vector<char> buf(tmpl.begin(), tmpl.end());
    buf.push_back('\0');
    if (!mkdtemp(buf.data())) {
        write_all(2, "nri-qos: explain --pod: cannot create a scratch directory in " + tmpl.substr(0, tmpl.rfind('/')) + ": " + std::strerror(errno) +
                         "\n");
        return 1;
    }
    const std::string scratch = buf.data();
    int status = 0;
    pid_t child = fork();
    if (child < 0) {
        write_all(2, std::string("nri-qos: explain --pod: fork: ") + std::strerror(errno) + "\n");
        rmdir(scratch.c_str());
        return 1;
    }
    if (child == 0) {
        // The manifest is read and parsed in the confined child: writes beneath the scratch
        // directory (and the policy cache, as explain) only.
        if (!sandbox_disabled_by_env()) {
            SandboxRoots roots{scratch, scratch, scratch, scratch, o.eval.cache_dir, o.eval.policy, {}, {}};
            if (!o.eval.cache_dir.empty()) roots.last_good_dir = last_good_dir_of(o.eval);
            SandboxStatus sb = install_sandbox(roots);
            if (o.eval.debug || !sb.seccomp) write_all(2, "nri-qos: sandbox: " + sb.summary() + "\n");
        }
        std::string text;
        bool ok;
        if (o.manifest == "-") ok = read_all(0, text, manifest_limits::kMaxBytes);
        else {
            int fd = open(o.manifest.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
            struct stat st {};
            ok = fd >= 0 && fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && read_all(fd, text, manifest_limits::kMaxBytes);
            if (fd >= 0) close(fd);
            if (!ok) {
                write_all(2, "nri-qos: explain --pod: cannot read " + o.manifest + ": " +
                                 (fd < 0 ? std::strerror(errno) : std::string(S_ISREG(st.st_mode) ? "read error" : "not a regular file")) + "\n");
                _exit(2);
            }
        }
        if (!ok) {
            write_all(2, "nri-qos: explain --pod: cannot read the manifest from stdin\n");
            _exit(2);
        }
        int code = 0;
        std::string out = preview_pod(text, o, scratch + "/node", code);
        write_all(code == 2 ? 2 : 1, out);
        _exit(code);
    }
    while (waitpid(child, &status, 0) < 0 && errno == EINTR) {}
    nftw(scratch.c_str(), rm_entry, 16, FTW_DEPTH | FTW_PHYS);
    if (WIFEXITED(status)) return WEXITSTATUS(status);
    write_all(2, "nri-qos: explain --pod: the preview process ended by signal " + std::to_string(WTERMSIG(status)) + "\n");
    return 1;
}

}  // namespace nriqos
