// Memory of the one-shot commands (invoke, explain, nri-eval): a bump arena behind the global
// operator new.
//
// A cache hit makes ~300 small allocations (request maps, policy strings, the plan, the Result)
// and exits a millisecond later. glibc's malloc/free cost ~50,000 instructions of the ~350,000
// of such an invocation; most of it is free() of memory the exit returns anyway. With the
// arena enabled, operator new carves 16-byte-aligned blocks off a static buffer and operator
// delete of such a block does nothing (the newest block is given back); a block that does not
// fit goes to malloc, and once a small one does not fit either, malloc serves everything (as
// for aligned new and C code), so memory stays bounded by the buffer plus what malloc would
// have used. Off unless enable() is called: the relay (a
// long-running, threaded process), the unit tests and every other command use malloc only.
#pragma once

#include <cstddef>

namespace nriqos::arena {

constexpr size_t kBytes = 256u << 10;  ///< static buffer; a hit uses ~30 KiB

/// Serve operator new from the arena from now on. Not thread-safe: call it in a process that
/// stays single-threaded (the one-shot commands, after the command line is parsed).
void enable();

/// Bytes handed out by the arena so far (tests, --debug).
size_t used();

/// True when `p` points into the arena.
bool contains(const void* p);

/// Give back the end of the newest block: `p`, allocated with operator new (or new[]) for
/// `had` bytes, keeps its first `keep` bytes (≤ had) and the next allocations start after them.
/// For a buffer sized before its content is known (main.cpp read_stdin: 64 KiB for a request of
/// a few KiB), so that the blocks after it share its last page instead of starting 60 KiB
/// further (a page fault per page, bench/oneshot-profile.sh). Does nothing when `p` is not the
/// arena's newest block (malloc'd, or allocations followed it).
void trim(void* p, size_t had, size_t keep);

/// Map now, in a few system calls, the pages an evaluation is about to touch, instead of taking
/// one page fault per page while the event waits: the hot path's code (src/hot-text.ld; read,
/// from the page cache: MADV_POPULATE_READ), the first `arena_bytes` of the arena
/// (MADV_POPULATE_WRITE), 48 KiB of stack and the vDSO's clock page. For a native spare evaluator, which has nothing to do
/// until its event arrives (src/nri/evaluator_procs.cpp): every fault it takes here is one fewer on
/// the event's critical path. MADV_POPULATE_* need Linux 5.14; older kernels refuse them
/// (EINVAL) and the pages fault in as before. Never fails.
void prefault(size_t arena_bytes);

}  // namespace nriqos::arena
