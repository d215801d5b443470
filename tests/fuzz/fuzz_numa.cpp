// libFuzzer target: NUMA placement choice (src/facts/numa.hpp choose_numa) on arbitrary topologies and
// held sets. Input lines: "node <id> <cpulist>", "held <cpulist>", "sib <cpu> <cpulist>",
// "need <n>", "mode e|b|s", "prefer <id>". Oracles: a placement uses only CPUs of its nodes (one
// node unless exclusive), never a held CPU (except the pod's own node in exclusive mode), exactly
// `need` CPUs when bound, whole nodes holding at least `need` CPUs when exclusive; a refusal says
// why on one line.
#include <cstddef>
#include <cstdint>
#include <sstream>
#include <string>

#include "os/cpuset.hpp"
#include "fuzz_common.hpp"
#include "facts/numa.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    using namespace nriqos;
    std::istringstream in(std::string(reinterpret_cast<const char*>(data), size));
    NumaTopology t;
    CpuSet held;
    unsigned need = 1;
    NumaMode mode = NumaMode::Exclusive;
    std::optional<unsigned> prefer;
    std::string line;
    while (std::getline(in, line) && t.nodes.size() < 64) {
        std::istringstream l(line);
        std::string w, a, b;
        l >> w >> a >> b;
        if (w == "node" && a.size() < 4 && !a.empty() && a.find_first_not_of("0123456789") == std::string::npos) {
            auto s = CpuSet::parse(b);
            unsigned id = static_cast<unsigned>(std::stoul(a));
            bool dup = false;
            for (const auto& n : t.nodes) dup = dup || n.id == id;
            if (s && !s->empty() && !dup && !s->intersects(t.online)) {
                t.nodes.push_back({id, *s});
                t.online |= *s;
            }
        } else if (w == "held") {
            if (auto s = CpuSet::parse(a)) held |= *s;
        } else if (w == "sib" && a.size() < 5 && !a.empty() && a.find_first_not_of("0123456789") == std::string::npos) {
            unsigned c = static_cast<unsigned>(std::stoul(a));
            auto s = CpuSet::parse(b);
            if (c <= CpuSet::kMaxId && s && s->has(c)) {
                if (t.siblings.size() <= c) t.siblings.resize(c + 1);
                t.siblings[c] = *s;
            }
        } else if (w == "need" && a.size() < 5 && !a.empty() && a.find_first_not_of("0123456789") == std::string::npos) {
            need = static_cast<unsigned>(std::stoul(a));
        } else if (w == "mode") {
            mode = a == "b" ? NumaMode::Bound : a == "s" ? NumaMode::Shared : NumaMode::Exclusive;
        } else if (w == "prefer" && a.size() < 4 && !a.empty() && a.find_first_not_of("0123456789") == std::string::npos) {
            prefer = static_cast<unsigned>(std::stoul(a));
        }
    }
    std::string why;
    auto c = choose_numa(t, held, mode, need, prefer, why);
    if (!c) {
        if (why.empty() || why.find('\n') != std::string::npos) fuzz::die("refusal without a one-line reason", why);
        return 0;
    }
    // The placement's nodes: one, or several for an exclusive request larger than a node.
    if (!c->nodes.has(c->node)) fuzz::die("the first node is not among the placement's nodes");
    if (mode != NumaMode::Exclusive && c->nodes.count() != 1) fuzz::die("a bound/shared placement on several nodes");
    CpuSet all;
    for (unsigned id : c->nodes.ids()) {
        const NumaNode* node = nullptr;
        for (const auto& n : t.nodes)
            if (n.id == id) node = &n;
        if (!node) fuzz::die("placement on an unknown node");
        all |= node->cpus;
    }
    if (!c->cpus.subset_of(all)) fuzz::die("CPUs outside the placement's nodes", c->cpus.str());
    if (c->cpus.empty()) fuzz::die("empty placement");
    bool own = prefer && *prefer == c->node && mode == NumaMode::Exclusive;
    if (!own && c->cpus.intersects(held)) fuzz::die("a held CPU handed out", c->cpus.str() + " held " + held.str());
    if (mode == NumaMode::Exclusive && c->cpus != all) fuzz::die("exclusive placement is not whole nodes");
    if (mode == NumaMode::Exclusive && !own && c->cpus.count() < (need ? need : 1)) fuzz::die("exclusive placement smaller than the request");
    if (mode == NumaMode::Bound && c->cpus.count() != (need ? need : 1)) fuzz::die("bound placement of the wrong size", c->cpus.str());
    return 0;
}
