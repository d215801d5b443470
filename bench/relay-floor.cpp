// bench/relay-floor.cpp — the process-per-event floor of native mode (bench/native.sh, issue 13).
//
// Linked instead of src/nri/eval_pipeline.cpp into build/bench/nri-qos-relay-floor (Makefile
// target of that name; never installed, never packaged): the same relay, keeper, zygote and
// one cloned process per event as build/nri-qos, but the evaluator does nothing. It reads the
// event to EOF, writes a fixed "no change" answer in the child contract (src/nri/evaluator.hpp:
// JSON with adjustment, update, writes, metadata, error, on_child_failure) and exits: no
// sandbox (seccomp, Landlock), no prefault, no parse, no policy, no records.
//
// What it measures: the cost of the architecture the issue keeps ("every event is evaluated in a
// process of its own"), on this machine, next to the Go plugin in the same run. Whatever nri-qos
// spends above this floor is its evaluation and sandbox; whatever the floor spends above the Go
// plugin is the process per event itself (clone, two pipe wake-ups, exit).
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <vector>

#include "nri/eval_pipeline.hpp"

namespace nriqos::nri {

// No evaluation flags: the floor takes none (the plugin config's flags are ignored).
std::string apply_eval_flags(nriqos::Options&, const std::vector<std::string>&) { return ""; }

InProcessEval pipeline_evaluator(const nriqos::Options&) {
    InProcessEval e;
    e.prepare = [](const std::vector<std::string>&, bool) -> std::string { return ""; };
    e.probe_fail_mode = []() -> int { return 0; };  // fail open, as an absent policy
    e.evaluate = [](int) -> int {
        char buf[16384];
        for (;;) {  // the event, to EOF
            ssize_t n = read(STDIN_FILENO, buf, sizeof buf);
            if (n > 0) continue;
            if (n < 0 && errno == EINTR) continue;
            break;
        }
        static const char kAnswer[] =
            "{\"adjustment\":null,\"error\":\"\",\"metadata\":{},\"on_child_failure\":\"open\",\"update\":null,\"writes\":[]}";
        size_t off = 0;
        while (off < sizeof kAnswer - 1) {
            ssize_t n = write(STDOUT_FILENO, kAnswer + off, sizeof kAnswer - 1 - off);
            if (n > 0) off += size_t(n);
            else if (n < 0 && errno == EINTR) continue;
            else return 1;
        }
        return 0;
    };
    return e;
}

}  // namespace nriqos::nri
