#include "event/sinks.hpp"

#include <cerrno>
#include <cstdlib>

#include "os/cpuset.hpp"

using nlohmann::json;

namespace nriqos {

namespace {

std::string dir_of(const std::string& rel) {
    size_t slash = rel.rfind('/');
    return slash == std::string::npos ? std::string() : rel.substr(0, slash);
}
std::string file_of(const std::string& rel) { return rel.substr(rel.rfind('/') + 1); }

/// Applies a plan's steps through a Kernel, numbering the writes in the order they happen.
struct Applier {
    Plan& plan;
    Kernel& kernel;
    int seq = 0;

    /// Write plan.writes[i] and record its outcome. A knob file absent from an existing
    /// directory is the only skip; an absent cgroup, process or resctrl group is a failure.
    IoResult write(size_t i) {
        Write& w = plan.writes[i];
        if (!w.needs_cpuset.empty()) {
            std::string why = cpuset_not_applied(i);
            if (!why.empty()) {
                w.status = Write::Failed;
                w.reason = "cpuset not applied: quota kept (" + why + ")";
                IoResult r;
                r.status = IoResult::Failed;
                r.message = w.reason;
                return r;
            }
        }
        IoResult r = kernel.write(w.root, w.rel, w.value);
        w.seq = ++seq;
        switch (r.status) {
            case IoResult::Ok:
                w.status = Write::Applied;
                w.reason.clear();
                break;
            case IoResult::NoFile:
                w.status = Write::Skipped;
                w.reason = "kernel does not provide this file";
                // Group identity is a feature of Anolis / Alibaba Cloud Linux kernels only.
                if (w.id == KnobId::CpuBvtWarpNs)
                    w.reason += " (cpu.bvt_warp_ns: group identity exists on Anolis / Alibaba Cloud Linux kernels only)";
                break;
            case IoResult::NoDir:
                w.status = Write::Failed;
                switch (w.root) {
                    case Root::Proc: w.reason = "process " + dir_of(w.rel) + " does not exist"; break;
                    case Root::Resctrl: w.reason = "resctrl group " + dir_of(w.rel) + " does not exist"; break;
                    default: w.reason = "cgroup " + dir_of(w.rel) + " does not exist"; break;
                }
                break;
            case IoResult::Failed:
                w.status = Write::Failed;
                w.reason = r.message;
                break;
        }
        return r;
    }

    /// Why write `i` (Write::needs_cpuset) may not go ahead, or "": the plan's cpuset.cpus write
    /// of the container (if any) is made first and must have been Applied; then the container's
    /// cpuset.cpus (and on cgroup v2 cpuset.cpus.effective, when the kernel shows it) is read back
    /// and must be the asked cpuset (compared as CPU sets, not as text). In native NRI the runtime
    /// applied the cpuset from the CreateContainer adjustment; at StartContainer only the
    /// read-back decides. Unreadable or different: the dependent write is refused.
    std::string cpuset_not_applied(size_t i) {
        const Write& w = plan.writes[i];
        auto want = CpuSet::parse(w.needs_cpuset);
        if (!want) return "\"" + w.needs_cpuset.substr(0, 32) + "\" is not a cpuset list";
        std::string rel;
        for (size_t j = 0; j < plan.writes.size(); ++j) {
            Write& c = plan.writes[j];
            if (c.id != KnobId::CpusetCpus || c.scope != w.scope || c.root != Root::Cgroup) continue;
            if (c.status == Write::Planned) write(j);
            if (c.status != Write::Applied)
                return "cpuset.cpus " + c.value + " " + (c.status == Write::Skipped ? "skipped" : "failed") +
                       (c.reason.empty() ? "" : ": " + c.reason);
            rel = c.rel;
        }
        const bool v2 = plan.layout == Layout::V2;
        if (rel.empty()) {  // the runtime wrote it (native NRI): the container's own cpuset files
            std::string dir = dir_of(w.rel);
            if (!v2) dir = "cpuset" + dir.substr(dir.find('/') == std::string::npos ? dir.size() : dir.find('/'));
            rel = dir + "/cpuset.cpus";
        }
        auto check = [&](const std::string& f, bool must) -> std::string {
            auto t = kernel.read(Root::Cgroup, f);
            if (!t) return must ? "cannot read back " + f : "";
            std::string why;
            auto got = CpuSet::parse(*t, &why);
            if (!got) return f + ": " + why;
            if (*got != *want) return f + " reads \"" + got->str() + "\", not " + want->str();
            return "";
        };
        std::string bad = check(rel, true);
        if (bad.empty() && v2) bad = check(dir_of(rel) + "/cpuset.cpus.effective", false);
        return bad;
    }

    /// opencontainers/cgroups fs/memory.go setMemoryAndSwap: the kernel keeps
    /// memory.limit_in_bytes <= memory.memsw.limit_in_bytes at every moment, so when the new
    /// memsw is unlimited or above the current limit (raising), memsw goes first; else the limit.
    void memory_swap(const Step& s) {
        Write& lim = plan.writes[s.w[0]];
        Write& sw = plan.writes[s.w[1]];
        bool swap_first = sw.value == "-1";
        if (!swap_first) {
            auto cur = kernel.read(lim.root, dir_of(lim.rel) + "/memory.limit_in_bytes");
            char* end = nullptr;
            unsigned long long c = cur ? std::strtoull(cur->c_str(), &end, 10) : 0;
            long long want = std::strtoll(sw.value.c_str(), nullptr, 10);
            if (cur && end != cur->c_str() && want > 0 && c < static_cast<unsigned long long>(want)) swap_first = true;
        }
        if (swap_first) {
            sw.note += std::string(sw.note.empty() ? "" : "; ") +
                       "written before memory.limit_in_bytes: the kernel keeps limit <= memsw (runc setMemoryAndSwap)";
            write(s.w[1]);
            write(s.w[0]);
        } else {
            write(s.w[0]);
            write(s.w[1]);
        }
    }

    /// opencontainers/cgroups fs/cpu.go Set and fs2/cpu.go setCPU: the kernel checks a new CFS
    /// period or burst against the current quota (and the parent's bandwidth), and a new quota
    /// against the current burst; runc writes the period and the burst first and retries one
    /// refused with EINVAL after the quota. Generalised: every write of the group refused with
    /// EINVAL is retried after the others, until a pass applies nothing more.
    void cpu(const Step& s) {
        std::vector<size_t> pending = s.w;
        std::vector<int> first_seq(plan.writes.size(), 0);
        for (size_t pass = 0; !pending.empty() && pass < s.w.size(); ++pass) {
            std::vector<size_t> refused;
            bool progress = false;
            for (size_t i : pending) {
                IoResult r = write(i);
                if (!first_seq[i]) first_seq[i] = plan.writes[i].seq;
                if (r.status == IoResult::Ok) {
                    progress = true;
                    if (pass > 0) {
                        std::string after;
                        for (size_t j : s.w)
                            if (j != i && plan.writes[j].status == Write::Applied && plan.writes[j].seq > first_seq[i])
                                after += (after.empty() ? "" : ", ") + file_of(plan.writes[j].rel);
                        plan.writes[i].note += std::string(plan.writes[i].note.empty() ? "" : "; ") + "EINVAL at first; applied after " + after +
                                               " (runc " + (plan.layout == Layout::V2 ? "fs2/cpu.go setCPU" : "fs/cpu.go Set") + ")";
                    }
                } else if (r.status == IoResult::Failed && r.err == EINVAL) {
                    refused.push_back(i);
                }
            }
            pending = std::move(refused);
            if (!progress) break;
        }
    }

    void run() {
        if (plan.steps.empty()) {
            for (size_t i = 0; i < plan.writes.size(); ++i)
                if (plan.writes[i].status == Write::Planned) write(i);
            return;
        }
        for (const auto& whole : plan.steps) {
            // The step's writes still Planned (a caller may have settled some already: reconcile
            // marks the files in force as Applied); the others are left as they are.
            Step s{whole.kind, {}};
            for (size_t i : whole.w)
                if (i < plan.writes.size() && plan.writes[i].status == Write::Planned) s.w.push_back(i);
            if (s.w.empty()) continue;
            if (s.kind == Step::MemorySwap && s.w.size() != 2) s.kind = Step::Single;  // one of the pair: nothing to order
            switch (s.kind) {
                case Step::MemorySwap: memory_swap(s); break;
                case Step::Cpu: cpu(s); break;
                case Step::Single:
                    for (size_t i : s.w) write(i);
                    break;
            }
        }
    }
};

}  // namespace

void apply_plan(Plan& plan, Kernel& kernel, const SystemdSink* systemd) {
    if (systemd) set_systemd_properties(plan, *systemd, &kernel);  // runc's order: unit properties, then files
    Applier{plan, kernel}.run();
}

namespace {
const char* root_prefix(Root r) {
    switch (r) {
        case Root::Proc: return "proc:";
        case Root::Resctrl: return "resctrl:";
        default: return "";
    }
}
std::string label(const Write& w) {
    // "cpu.shares=2" for the container, "pod:cpu.idle=1" for the pod, file name only.
    std::string file = w.rel.substr(w.rel.rfind('/') + 1);
    return (w.scope == "container" ? "" : w.scope + ":") + file + "=" + w.value;
}
void append(std::string& s, const std::string& item) {
    if (!s.empty()) s += ' ';
    s += item;
}
}  // namespace

Summary summarize(const Plan& plan) {
    Summary s;
    for (const auto& w : plan.writes) {
        switch (w.status) {
            case Write::Applied:
                append(s.applied, label(w));
                ++s.n_applied;
                break;
            case Write::Skipped:
                append(s.skipped, label(w) + " (" + w.reason + ")");
                ++s.n_skipped;
                break;
            case Write::Failed:
                append(s.failed, label(w) + " (" + w.reason + ")");
                ++s.n_failed;
                break;
            case Write::Planned: break;
        }
    }
    for (const auto& k : plan.skipped) {
        append(s.skipped, k);
        ++s.n_skipped;
    }
    for (const auto& k : plan.refused) {
        append(s.failed, k);
        ++s.n_failed;
    }
    return s;
}

std::string systemd_summary(const Plan& plan) {
    // "applied: cpu.weight memory.max; failed: pod:cpu.max (why); skipped: cpu.max.burst (why)":
    // the event log's record has no writes, so every failure and skip keeps its reason here.
    std::string applied, failed, skipped;
    for (const auto& w : plan.writes) {
        if (w.systemd.empty()) continue;
        const std::string name = (w.scope == "container" ? "" : w.scope + ":") + file_of(w.rel);
        if (w.systemd.rfind("applied:", 0) == 0) applied += (applied.empty() ? "" : " ") + name;
        else if (w.systemd.rfind("failed:", 0) == 0) failed += (failed.empty() ? "" : " ") + name + " (" + w.systemd.substr(8) + ")";
        else skipped += (skipped.empty() ? "" : " ") + name + " (" + w.systemd.substr(w.systemd.find(' ') + 1) + ")";
    }
    std::string out;
    if (!applied.empty()) out += "applied: " + applied;
    if (!failed.empty()) out += (out.empty() ? "" : "; ") + std::string("failed: ") + failed;
    if (!skipped.empty()) out += (out.empty() ? "" : "; ") + std::string("skipped: ") + skipped;
    return out;
}

namespace {
/// The members of one entry of the Result's "writes" list, in key order (the order the DOM prints
/// them in, which the DOM-free printer below relies on): v.str(key, string), v.num(key, int).
/// The one list of them for writes_json() and dump_v01_result() / dump_eval_result().
template <class V>
void visit_write(const Write& w, V& v) {
    static const char* kStatus[] = {"planned", "applied", "skipped", "failed"};
    v.str("file", root_prefix(w.root) + w.rel);
    v.str("knob", w.knob);
    if (!w.note.empty()) v.str("note", w.note);
    if (!w.reason.empty()) v.str("reason", w.reason);
    v.str("scope", w.scope);
    if (w.seq > 0) v.num("seq", w.seq);
    v.str("status", kStatus[w.status]);
    if (!w.systemd.empty()) v.str("systemd", w.systemd);
    v.str("value", w.value);
}
}  // namespace

json writes_json(const Plan& plan) {
    json a = json::array();
    struct {
        json e = json::object();
        void str(const char* k, const std::string& s) { e[k] = s; }
        void num(const char* k, int n) { e[k] = n; }
    } v;
    for (const auto& w : plan.writes) {
        v.e = json::object();
        visit_write(w, v);
        a.push_back(std::move(v.e));
    }
    return a;
}

std::string dump_result(json r) {
    if (r.contains("metadata")) {
        for (auto& [k, v] : r["metadata"].items())
            if (!v.is_string()) v = v.dump();
    }
    // Replace invalid UTF-8 instead of throwing: output must always be one valid JSON object.
    return r.dump(-1, ' ', false, json::error_handler_t::replace) + "\n";
}

namespace {

/// The Result's printer (json_print.hpp) with its metadata member.
class Printer : public JsonPrinter {
public:
    using JsonPrinter::JsonPrinter;
    /// Metadata: a string-to-string object (non-string values printed as their JSON text).
    /// String values go through str(): plain ASCII (nearly all of them: class, rule, applied,
    /// skipped, policy_sha256) is copied as it is, the rest through the serializer, which is
    /// what value() would print, byte for byte (json_print.hpp).
    void metadata(const json& md) {
        out() += '{';
        bool first = true;
        for (auto it = md.begin(); it != md.end(); ++it) {
            if (!first) out() += ',';
            first = false;
            str(it.key());
            out() += ':';
            if (it->is_string()) str(it->get_ref<const std::string&>());
            else str(it->dump());
        }
        out() += '}';
    }
};

}  // namespace

void print_writes(JsonPrinter& p, const Plan& plan) {
    struct {
        JsonPrinter* p;
        void str(const char* k, const std::string& s) { p->key(k).str(s); }
        void num(const char* k, int n) { p->key(k).num(n); }
    } v{&p};
    p.out() += '[';
    bool first = true;
    for (const auto& w : plan.writes) {
        if (!first) p.out() += ',';
        first = false;
        p.open();
        visit_write(w, v);
        p.close();
    }
    p.out() += ']';
}

std::string dump_v01_result(const std::string& version, const std::string& error, const json& metadata, const Plan* plan) {
    std::string out;
    out.reserve(1024);
    Printer p(out);
    p.open();
    if (plan) {
        if (plan->adjustment.is_null()) p.key("adjustment").value(json::object());
        else p.key("adjustment").value(plan->adjustment);
    }
    p.key("error").str(error);
    p.key("metadata");
    p.metadata(metadata);
    p.key("plugin").str("nri-qos");
    p.key("version").str(version);
    if (plan) print_writes(p.key("writes"), *plan);
    p.close();
    out += '\n';
    return out;
}

std::string dump_eval_result(const std::string& error, bool fail_closed, const json& metadata, const Plan* plan) {
    std::string out;
    out.reserve(1024);
    Printer p(out);
    p.open();
    p.key("adjustment").value(plan ? plan->adjustment : json(nullptr));
    p.key("error").str(error);
    p.key("metadata");
    p.metadata(metadata);
    p.key("on_child_failure").str(fail_closed ? "closed" : "open");
    p.key("update").value(plan ? plan->update : json(nullptr));
    if (plan) print_writes(p.key("writes"), *plan);
    p.close();
    out += '\n';
    return out;
}

}  // namespace nriqos
