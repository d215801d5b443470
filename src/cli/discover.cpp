#include "cli/discover.hpp"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <poll.h>
#include <sstream>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "os/kernel.hpp"
#include "event/pipeline.hpp"
#include "policy/policy_store.hpp"
#include "event/publish.hpp"
#include "records/record.hpp"
#include "event/replay.hpp"
#include "model/request.hpp"
#include "os/clock.hpp"

using nlohmann::json;

namespace nriqos {

namespace {

const json& none() {
    static const json n;
    return n;
}

/// obj[key], or a null json when obj is not an object or has no such key.
const json& sub(const json& obj, const char* key) {
    if (!obj.is_object()) return none();
    auto it = obj.find(key);
    return it != obj.end() ? *it : none();
}

std::string str_of(const json& obj, const char* key) {
    const json& v = sub(obj, key);
    return v.is_string() ? v.get<std::string>() : std::string();
}

/// The verbose status document: the "info" entry (containerd, CRI-O), else the first entry that
/// is an object holding a runtimeSpec.
const json& verbose_info(const json& item) {
    const json& info = sub(item, "info");
    if (!info.is_object()) return none();
    const json& i = sub(info, "info");
    if (i.is_object()) return i;
    for (auto it = info.begin(); it != info.end(); ++it)
        if (it->is_object() && it->contains("runtimeSpec")) return *it;
    return none();
}

/// A string map from the document (non-string values are dropped: CRI maps are string maps).
json string_map(const json& m) {
    json o = json::object();
    if (!m.is_object()) return o;
    for (auto it = m.begin(); it != m.end(); ++it)
        if (it->is_string()) o[it.key()] = *it;
    return o;
}

/// OCI linux.resources from the CRI LinuxContainerResources of a container status (no runtime
/// spec): the fields containerd's CRI plugin copies into the spec (pkg/cri/opts WithResources).
json oci_resources_from_cri(const json& r) {
    json o = json::object();
    if (!r.is_object()) return o;
    auto num = [&](const char* k) -> int64_t {
        const json& v = sub(r, k);
        return v.is_number_integer() ? v.get<int64_t>() : 0;
    };
    json cpu = json::object(), mem = json::object();
    if (num("cpu_shares") > 0) cpu["shares"] = num("cpu_shares");
    if (num("cpu_quota") != 0) cpu["quota"] = num("cpu_quota");
    if (num("cpu_period") > 0) cpu["period"] = num("cpu_period");
    if (!str_of(r, "cpuset_cpus").empty()) cpu["cpus"] = str_of(r, "cpuset_cpus");
    if (!str_of(r, "cpuset_mems").empty()) cpu["mems"] = str_of(r, "cpuset_mems");
    if (num("memory_limit_in_bytes") > 0) mem["limit"] = num("memory_limit_in_bytes");
    if (num("memory_swap_limit_in_bytes") > 0) mem["swap"] = num("memory_swap_limit_in_bytes");
    if (!cpu.empty()) o["cpu"] = cpu;
    if (!mem.empty()) o["memory"] = mem;
    const json& u = sub(r, "unified");
    if (u.is_object() && !u.empty()) o["unified"] = string_map(u);
    return o;
}

/// CRI's created_at of an item (unix ns), 0 when absent or not a number.
int64_t created_of(const json& item) {
    const json& v = sub(item, "created_at");
    return v.is_number_integer() ? v.get<int64_t>() : 0;
}

std::string one_line(std::string s) {
    for (char& c : s)
        if (c == '\n' || c == '\r') c = ' ';
    return s;
}

/// Build and check the v0.1 request of one item. `pod_labels`, `pod_annotations`: the sandbox's
/// CRI labels and annotations (string maps).
void build_request(DiscoveredEntry& e, const json& item, const json& pod_labels, const json& pod_annotations, const json& conf) {
    const json& info = verbose_info(item);
    const json& spec = sub(info, "runtimeSpec");
    const json& linux = sub(spec, "linux");
    std::string cgroups = str_of(linux, "cgroupsPath");
    if (cgroups.empty()) {
        e.skip =
            spec.is_object() ? "its runtime spec has no linux.cgroupsPath" : "the runtime's verbose status has no runtimeSpec (cgroupsPath unknown)";
        return;
    }
    json resources = sub(linux, "resources");
    if (!resources.is_object()) resources = e.sandbox ? json::object() : oci_resources_from_cri(sub(item, "resources"));
    json annotations = sub(spec, "annotations");
    if (!annotations.is_object()) annotations = json::object();
    // The pod's annotations as CRI reports them (PodSandbox.annotations: every one the kubelet
    // gave the sandbox). containerd < 1.7 copies into the OCI spec, and so into a v0.1 request,
    // only those its runtime's pod_annotations allow-list passes (pkg/cri/server
    // getPassthroughAnnotations; Debian's containerd 1.6 sets none): a pod that ran before the
    // install would be adopted without the annotations its class's facts read, although it
    // carries them (issue #25 §1/§3). Discovery asks CRI itself, so it adds them; the runtime
    // spec's own value wins for a key in both. Trust is unchanged: [guarded] decides what a
    // pod-written annotation may buy, whichever way it arrived.
    if (pod_annotations.is_object())
        for (auto it = pod_annotations.begin(); it != pod_annotations.end(); ++it)
            if (it->is_string() && !annotations.contains(it.key())) annotations[it.key()] = *it;
    const json& pid = sub(info, "pid");
    json req = {{"conf", conf},
                {"version", "0.1"},
                {"state", "create"},
                {"id", e.id},
                {"sandboxID", e.sandbox_id},
                {"pid", pid.is_number_integer() ? pid.get<int64_t>() : 0},
                {"spec", {{"resources", resources}, {"cgroupsPath", cgroups}, {"annotations", annotations}}},
                {"labels", pod_labels.is_object() ? pod_labels : json::object()}};
    std::string text = req.dump(-1, ' ', false, json::error_handler_t::replace);
    try {
        Request r = parse_v01_request(text);
        if (e.ns.empty()) e.ns = r.pod_namespace;
        if (e.pod.empty()) e.pod = r.pod_name;
        if (!e.sandbox && e.container.empty()) e.container = r.container_name;
        e.request = std::move(text);
    } catch (const InputError& x) { e.skip = std::string("its request is not valid: ") + x.what(); }
}

}  // namespace

Discovery discovery_from_cri_json(const std::string& text, const json& conf) {
    json doc;
    try {
        doc = parse_json_limited(text, 256);
    } catch (const InputError& x) { throw InputError(std::string("the CRI client's output: ") + x.what()); }
    if (!doc.is_object() || sub(doc, "v") != 1) throw InputError("the CRI client's output is not its document (no \"v\": 1)");
    Discovery d;
    const json& rt = sub(doc, "runtime");
    d.runtime = str_of(rt, "name") + (str_of(rt, "version").empty() ? "" : " " + str_of(rt, "version"));
    for (const json& e : sub(doc, "errors").is_array() ? sub(doc, "errors") : json::array())
        if (e.is_string()) d.errors.push_back(one_line(e.get<std::string>()));
    std::map<std::string, json> pod_labels;  // sandbox id -> its CRI labels
    std::map<std::string, json> pod_annots;  // sandbox id -> its CRI annotations
    std::map<std::string, std::pair<std::string, std::string>> pod_names;  // sandbox id -> ns, name
    const json& sbs = sub(doc, "sandboxes");
    if (sbs.is_array())
        for (const json& sb : sbs) {
            DiscoveredEntry e;
            e.sandbox = true;
            e.id = e.sandbox_id = str_of(sb, "id");
            const json& md = sub(sb, "metadata");
            e.ns = str_of(md, "namespace");
            e.pod = str_of(md, "name");
            e.created_ns = created_of(sb);
            e.brief = sub(sb, "brief") == true;
            if (e.id.empty()) continue;
            pod_labels[e.id] = string_map(sub(sb, "labels"));
            pod_annots[e.id] = string_map(sub(sb, "annotations"));
            pod_names[e.id] = {e.ns, e.pod};
            build_request(e, sb, pod_labels[e.id], pod_annots[e.id], conf);
            d.entries.push_back(std::move(e));
        }
    const json& cs = sub(doc, "containers");
    if (cs.is_array())
        for (const json& c : cs) {
            DiscoveredEntry e;
            e.id = str_of(c, "id");
            e.sandbox_id = str_of(c, "pod_sandbox_id");
            e.container = str_of(sub(c, "metadata"), "name");
            e.created_ns = created_of(c);
            e.brief = sub(c, "brief") == true;
            if (e.id.empty()) continue;
            auto pn = pod_names.find(e.sandbox_id);
            if (pn != pod_names.end()) e.ns = pn->second.first, e.pod = pn->second.second;
            if (e.sandbox_id.empty() || pn == pod_names.end()) {
                e.skip = "its pod sandbox " + e.sandbox_id.substr(0, 12) + " is not ready or not listed";
            } else {
                build_request(e, c, pod_labels[e.sandbox_id], pod_annots[e.sandbox_id], conf);
            }
            d.entries.push_back(std::move(e));
        }
    return d;
}

json v01_plugin_conf(const std::string& path) {
    json fallback = {{"policy", defaults::kPolicy}};
    FILE* f = std::fopen(path.c_str(), "re");
    if (!f) return fallback;
    std::string text;
    char buf[4096];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, f)) > 0 && text.size() < (1u << 20)) text.append(buf, n);
    std::fclose(f);
    json j = json::parse(text, nullptr, false);
    const json& plugins = sub(j, "plugins");
    if (!plugins.is_array()) return fallback;
    for (const json& p : plugins)
        if (str_of(p, "type") == "nri-qos") return sub(p, "conf").is_object() ? sub(p, "conf") : json::object();
    return fallback;
}

std::string run_cri_client(const DiscoverOptions& d, std::string& err) {
    std::string client = d.cri_client;
    if (client.empty()) {
        char self[4096];
        ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
        if (n > 0) {
            std::string beside = dir_name(std::string(self, static_cast<size_t>(n))) + "/nri-qos-cri";
            if (access(beside.c_str(), X_OK) == 0) client = beside;
        }
        if (client.empty()) client = kCriClient;
    }
    int out[2], errp[2];
    if (pipe2(out, O_CLOEXEC) != 0) return err = std::string("pipe: ") + std::strerror(errno), "";
    if (pipe2(errp, O_CLOEXEC) != 0) {
        close(out[0]), close(out[1]);
        return err = std::string("pipe: ") + std::strerror(errno), "";
    }
    const std::string tmo = std::to_string(d.timeout_ms > 1000 ? d.timeout_ms - 1000 : d.timeout_ms);
    pid_t pid = fork();
    if (pid < 0) {
        close(out[0]), close(out[1]), close(errp[0]), close(errp[1]);
        return err = std::string("fork: ") + std::strerror(errno), "";
    }
    if (pid == 0) {
        int null = open("/dev/null", O_RDONLY | O_CLOEXEC);
        if (null >= 0) dup2(null, STDIN_FILENO);
        dup2(out[1], STDOUT_FILENO);
        dup2(errp[1], STDERR_FILENO);
        char* argv[] = {const_cast<char*>(client.c_str()),
                        const_cast<char*>("--socket"),
                        const_cast<char*>(d.cri_socket.c_str()),
                        const_cast<char*>("--timeout-ms"),
                        const_cast<char*>(tmo.c_str()),
                        nullptr,
                        nullptr,
                        nullptr};
        if (d.verbose_ids) {
            argv[5] = const_cast<char*>("--verbose-ids");
            argv[6] = const_cast<char*>(d.verbose_ids->c_str());
        }
        execv(argv[0], argv);
        dprintf(STDERR_FILENO, "cannot run %s: %s\n", client.c_str(), std::strerror(errno));
        _exit(127);
    }
    close(out[1]), close(errp[1]);
    std::string text, etext;
    constexpr size_t kMax = 256u << 20;
    const int64_t until = monotonic_ns() + int64_t(d.timeout_ms) * 1000000;
    bool timed_out = false, too_large = false;
    struct pollfd p[2] = {{out[0], POLLIN, 0}, {errp[0], POLLIN, 0}};
    int open_fds = 2;
    while (open_fds > 0) {
        int64_t left = (until - monotonic_ns()) / 1000000;
        if (left <= 0) {
            timed_out = true;
            break;
        }
        int n = poll(p, 2, static_cast<int>(left));
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) break;
        if (n == 0) {
            timed_out = true;
            break;
        }
        for (int i = 0; i < 2; ++i) {
            if (p[i].fd < 0 || !(p[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
            char buf[65536];
            ssize_t r = read(p[i].fd, buf, sizeof buf);
            if (r < 0 && errno == EINTR) continue;
            if (r <= 0) {
                close(p[i].fd);
                p[i].fd = -1;
                --open_fds;
                continue;
            }
            std::string& dst = i == 0 ? text : etext;
            if (dst.size() + static_cast<size_t>(r) > (i == 0 ? kMax : 4096)) {
                if (i == 0) {
                    too_large = true;
                    break;
                }
                continue;
            }
            dst.append(buf, static_cast<size_t>(r));
        }
        if (too_large) break;
    }
    for (auto& q : p)
        if (q.fd >= 0) close(q.fd);
    if (timed_out || too_large) kill(pid, SIGKILL);
    int st = 0;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {}
    if (timed_out) return err = client + " did not answer within " + std::to_string(d.timeout_ms) + " ms", "";
    if (too_large) return err = client + " printed more than 256 MiB", "";
    while (!etext.empty() && (etext.back() == '\n' || etext.back() == ' ')) etext.pop_back();
    etext = one_line(etext.substr(etext.rfind('\n') == std::string::npos ? 0 : etext.rfind('\n') + 1));
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        err = etext.empty() ? client + " exited with status " + std::to_string(WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st)) : etext;
        return "";
    }
    return text;
}

namespace {

/// What adopt() did.
struct AdoptCounts {
    size_t sandboxes = 0, containers = 0, adopted = 0, known = 0, skipped = 0;
};

/// Record every entry of `entries` whose id is not in `known` (and, with `recheck`, that the
/// state dir still does not know when its turn comes: a runtime event for it may have been
/// recorded since the listing) as its last request with source and event `event`, the memo of a
/// sandbox as the hook writes it; ids recorded go to o.discovered. One line per entry skipped.
AdoptCounts adopt(StateCommandOptions& o, const DiscoverOptions& d, const std::vector<DiscoveredEntry>& entries, const std::set<std::string>& known,
                  const std::string& event, bool recheck, std::string& out) {
    AdoptCounts n;
    StateDir st(o.state_dir);
    // The policy the hook would use for these requests: --policy, else the plugin conf's.
    const std::string conf_policy = [&] {
        json conf = v01_plugin_conf(d.nri_conf);
        return str_of(conf, "policy").empty() ? std::string(defaults::kPolicy) : str_of(conf, "policy");
    }();
    const std::string policy_path = o.roots.policy ? *o.roots.policy : conf_policy;
    std::unique_ptr<Policy> policy;
    bool any = false;
    for (const auto& e : entries) any = any || (!known.count(e.id) && e.skip.empty());
    if (any) {
        PolicyPlaces where;
        where.cache_dir = o.roots.cache_dir;
        where.last_good_dir = o.last_good_dir;
        PolicyInfo pinfo;
        try {
            policy = std::make_unique<Policy>(effective_policy(policy_path, policy_path == defaults::kPolicy, where, nullptr, pinfo));
        } catch (const std::exception& x) {
            out += event + ": policy " + policy_path + " cannot be loaded (" + one_line(x.what()) + "); the pods found are recorded unclassified\n";
        }
    }
    for (const auto& e : entries) {
        (e.sandbox ? n.sandboxes : n.containers)++;
        const std::string subject = e.ns + "/" + e.pod + (e.sandbox ? " (sandbox " : "/" + e.container + " (") + e.id.substr(0, 12) + ")";
        if (known.count(e.id)) {
            ++n.known;
            continue;
        }
        if (!e.skip.empty()) {
            ++n.skipped;
            out += "skipped  " + subject + ": " + e.skip + "\n";
            continue;
        }
        if (recheck) {
            bool now_known = false;
            for (const auto& f : st.list_last_of(e.sandbox_id, 4096)) now_known = now_known || f.id == e.id;
            if (now_known) {  // its own event came first: the runtime's record stands
                ++n.known;
                out += "known    " + subject + ": recorded by its own event since the listing; left to it\n";
                continue;
            }
        }
        // The record as the hook keeps it (publish.cpp make_last_request), with the plan the
        // current policy gives (its writes: which files nri-qos sets, replay.hpp sibling_weight_pairs).
        EventRecord r;
        r.source = r.event = event;
        r.id = e.id;
        r.sandbox_id = e.sandbox_id;
        r.sandbox = e.sandbox;
        r.ns = e.ns;
        r.pod = e.pod;
        r.container = e.sandbox ? "" : e.container;
        r.outcome = "ok";
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        r.time_ns = int64_t(ts.tv_sec) * 1000000000 + ts.tv_nsec;
        EventOutcome eo;
        eo.source = event;
        eo.policy_path = policy_path;
        eo.cgroup_root = o.roots.cgroup_root ? *o.roots.cgroup_root : "";
        eo.proc_root = o.roots.proc_root ? *o.roots.proc_root : "";
        eo.resctrl_root = o.roots.resctrl_root ? *o.roots.resctrl_root : "";
        eo.input = e.request;
        Desired des;
        if (policy) {
            StateDir::LastFile lf{e.sandbox_id, e.id, make_last_request(eo, r)};
            if (auto lr = parse_last(lf)) {
                des = desired_plan(*lr, *policy, o.roots, st);
                if (des.have_plan) {
                    r.cls = des.plan.decision.cls->name;
                    r.rule = des.plan.decision.rule;
                    eo.plan = &des.plan;
                }
            }
        }
        if (o.dry_run) {  // nothing is recorded: say what would be adopted
            out += event + " " + subject + (des.have_plan ? " class " + r.cls : std::string()) + ": would be recorded and adopted (dry run)\n";
            ++n.adopted;
            continue;
        }
        std::string w = st.store_last(e.sandbox_id, e.id, make_last_request(eo, r));
        if (!w.empty()) {
            ++n.skipped;
            out += "skipped  " + subject + ": cannot record it (" + w + ")\n";
            continue;
        }
        if (e.sandbox && !st.load(e.id)) {  // the memo the hook writes at the sandbox's create (pipeline.cpp)
            Memo m;
            if (des.have_plan) {
                for (const auto& [k, v] : des.req.annotations)
                    if (k.rfind("io.kubernetes.cri.", 0) != 0) m.annotations.emplace(k, v);
                m.pod_namespace = des.req.pod_namespace;
                m.pod_name = des.req.pod_name;
                m.cls = r.cls;
            } else {
                m.pod_namespace = e.ns;
                m.pod_name = e.pod;
            }
            std::string me = st.store(e.id, m);
            if (!me.empty()) out += "warning: " + me + "\n";
        }
        o.discovered.insert(e.id);
        ++n.adopted;
    }
    return n;
}

std::set<std::string> known_ids(const std::string& state_dir) {
    StateDir st(state_dir);
    std::set<std::string> known;
    for (const auto& f : st.list_last()) known.insert(f.id);
    return known;
}

}  // namespace

int run_discover(StateCommandOptions& o, const DiscoverOptions& d, std::string& out) {
    int rc = 0;
    std::string err;
    std::string text = run_cri_client(d, err);
    Discovery disc;
    if (!err.empty()) {
        out += "discover: cannot list the runtime's pods through CRI (" + d.cri_socket + "): " + err + "\n";
        rc = 1;
    } else {
        try {
            json conf = v01_plugin_conf(d.nri_conf);
            disc = discovery_from_cri_json(text, conf);
        } catch (const InputError& x) {
            out += std::string("discover: ") + x.what() + "\n";
            rc = 1;
        }
    }
    AdoptCounts n = adopt(o, d, disc.entries, known_ids(o.state_dir), "discover", false, out);
    for (const auto& e : disc.errors) out += "skipped  " + e + "\n";
    if (err.empty() && rc == 0)
        out += "discover: " + std::to_string(n.sandboxes) + " sandbox(es) and " + std::to_string(n.containers) + " container(s) live in " +
               (disc.runtime.empty() ? std::string("the runtime") : disc.runtime) + ": " + std::to_string(n.adopted) + " newly recorded, " +
               std::to_string(n.known) + " already known, " + std::to_string(n.skipped + disc.errors.size()) + " skipped\n";
    int rrc = run_reconcile(o, out);
    return rc ? rc : rrc;
}

UnseenPlan plan_unseen(const Discovery& listed, const std::set<std::string>& known, const std::set<std::string>& given_up, int64_t now_ns,
                       int64_t min_age_ms, size_t max_adopt) {
    UnseenPlan p;
    std::set<std::string> sandboxes, waiting_pods;  // listed sandboxes; unseen ones too new
    for (const auto& e : listed.entries)
        if (e.sandbox) sandboxes.insert(e.id);
    const int64_t min_age_ns = min_age_ms * 1000000;
    for (const auto& e : listed.entries) {
        if (known.count(e.id)) {
            ++p.known;
            continue;
        }
        if (given_up.count(e.id)) {
            ++p.given_up;
            p.still_given_up.push_back(e.id);
            continue;
        }
        if (!e.sandbox && !sandboxes.count(e.sandbox_id)) {
            ++p.no_pod;
            continue;
        }
        // A container its own runtime event may be on its way for (CRI lists a container once
        // its CreateContainer returned; the relay's record follows its answer): not yet.
        const bool young = e.created_ns > 0 && now_ns - e.created_ns < min_age_ns;
        if (young || (!e.sandbox && waiting_pods.count(e.sandbox_id))) {
            ++p.too_new;
            if (e.sandbox) waiting_pods.insert(e.id);
            continue;
        }
        if (p.adopt.size() >= max_adopt) {
            ++p.deferred;
            if (e.sandbox) waiting_pods.insert(e.id);
            continue;
        }
        p.adopt.push_back(e.id);
    }
    return p;
}

int run_unseen(StateCommandOptions& o, const DiscoverOptions& d, int64_t min_age_ms, std::string& out) {
    // 1. The listing alone (no status call): Version, ListPodSandbox, ListContainers.
    DiscoverOptions brief = d;
    brief.verbose_ids = std::string();
    std::string err;
    std::string text = run_cri_client(brief, err);
    Discovery listed;
    if (err.empty()) {
        try {
            listed = discovery_from_cri_json(text, json::object());
        } catch (const InputError& x) { err = x.what(); }
    }
    if (!err.empty()) {
        out += "unseen: cannot list the runtime's pods through CRI (" + d.cri_socket + "): " + err + "\n";
        return 1;
    }
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    const int64_t now_ns = int64_t(ts.tv_sec) * 1000000000 + ts.tv_nsec;
    // The ids an earlier pass could not adopt (no runtime spec, an invalid request): not asked
    // again while the runtime lists them (their skip line was printed once).
    StateDir st(o.state_dir);
    std::set<std::string> given_up;
    if (auto t = st.read_file(kUnseenSkippedFile, 1u << 20)) {
        std::istringstream in(*t);
        std::string id;
        while (std::getline(in, id))
            if (!id.empty()) given_up.insert(id);
    }
    UnseenPlan plan = plan_unseen(listed, known_ids(o.state_dir), given_up, now_ns, min_age_ms, kMaxUnseenPerPass);
    auto keep_given_up = [&](const std::vector<std::string>& more) {
        std::string t;
        for (const auto& id : plan.still_given_up) t += id + "\n";
        for (const auto& id : more) t += id + "\n";
        if (t.size() > (1u << 20)) t.clear();  // bounded: asked again rather than never
        if (!o.dry_run && (t.size() != 0 || !given_up.empty())) {
            std::string w = st.write_file(kUnseenSkippedFile, t);
            if (!w.empty()) out += "warning: " + w + "\n";
        }
    };
    auto summary = [&](size_t adopted) {
        return "unseen: " + std::to_string(listed.entries.size()) + " sandboxes/containers live in " +
               (listed.runtime.empty() ? std::string("the runtime") : listed.runtime) + ": " + std::to_string(plan.known) + " known, " +
               std::to_string(adopted) + " adopted, " + std::to_string(plan.too_new) + " younger than " + std::to_string(min_age_ms) +
               " ms (next pass), " + std::to_string(plan.deferred) + " deferred (more than " + std::to_string(kMaxUnseenPerPass) + " per pass), " +
               std::to_string(plan.no_pod) + " without a listed pod, " + std::to_string(plan.given_up) + " not adoptable (said before)\n";
    };
    if (plan.adopt.empty()) {  // nothing new: no status call, no policy load, no record
        if (plan.still_given_up.size() != given_up.size()) keep_given_up({});
        if (o.verbose_pass) out += summary(0);
        return 0;
    }
    // 2. The status (runtime spec) of the unseen ones only.
    DiscoverOptions full = d;
    std::string ids;
    for (const auto& id : plan.adopt) ids += (ids.empty() ? "" : ",") + id;
    full.verbose_ids = ids;
    text = run_cri_client(full, err);
    Discovery disc;
    if (err.empty()) {
        try {
            disc = discovery_from_cri_json(text, v01_plugin_conf(d.nri_conf));
        } catch (const InputError& x) { err = x.what(); }
    }
    if (!err.empty()) {
        out += "unseen: cannot read the status of " + std::to_string(plan.adopt.size()) + " unseen sandbox(es)/container(s) through CRI (" +
               d.cri_socket + "): " + err + "\n";
        return 1;
    }
    std::set<std::string> wanted(plan.adopt.begin(), plan.adopt.end());
    std::vector<DiscoveredEntry> todo;
    for (auto& e : disc.entries)
        if (wanted.count(e.id)) todo.push_back(std::move(e));
    AdoptCounts n = adopt(o, d, todo, {}, "unseen", true, out);
    std::vector<std::string> skipped;
    for (const auto& e : todo)
        if (!e.skip.empty()) skipped.push_back(e.id);
    keep_given_up(skipped);
    for (const auto& e : disc.errors) out += "skipped  " + e + "\n";
    out += summary(n.adopted);
    if (o.discovered.empty()) return 0;
    // 3. Their class applied: the reconcile pass over the adopted ones only.
    o.only = o.discovered;
    o.adopt_event = "unseen";
    return run_reconcile(o, out);
}

}  // namespace nriqos
