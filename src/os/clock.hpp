// The one monotonic clock of the tree (issue #35): CLOCK_MONOTONIC (clock_gettime(2)), which
// never jumps with the wall clock (NTP steps, settimeofday), for event durations, deadlines,
// timeouts and the relay's spare/keeper timers. Header-inline: the hot path (plain `invoke`,
// `nri-eval`) calls it without a call into another object, and it has no static state.
#pragma once

#include <time.h>

#include <cstdint>

namespace nriqos {

/// CLOCK_MONOTONIC in nanoseconds since an unspecified start (the boot, on Linux). Never fails:
/// clock_gettime(CLOCK_MONOTONIC) has no error for a valid pointer (clock_gettime(2)).
inline int64_t monotonic_ns() {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return int64_t(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

/// CLOCK_MONOTONIC in milliseconds (monotonic_ns() / 10^6, rounded down): the relay's unit for
/// deadlines and timers (Synchronize, spares, the keeper).
inline int64_t monotonic_ms() { return monotonic_ns() / 1000000; }

}  // namespace nriqos
