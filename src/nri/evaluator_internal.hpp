// Private to src/nri/evaluator*.cpp (not API; the supervisor's API is evaluator.hpp): what the
// Supervisor's files share. Its concerns, one file each:
//  * evaluator.cpp: the evaluation: start one (a ready spare, a forked one or an exec'd child),
//    feed its input, read its answer, its deadline, how it ended (Outcome), the evaluators that
//    answered and still write their records (AfterAnswer), the reaping of every child, stop_all;
//  * evaluator_spares.cpp: where fork mode's evaluators come from: the spares, the zygote that
//    clones them, the keeper that makes zygotes once the relay is confined and its reserve, the
//    plugin-config flags they were made with, their losses, and the hand-off of failure records
//    to the keeper (or a recorder).
// What runs inside those processes is in evaluator_procs.cpp.
#pragma once

namespace nriqos::nri {

// Our ends of the pipes and sockets: non-blocking (evaluator.cpp).
void set_nonblock(int fd);

}  // namespace nriqos::nri
