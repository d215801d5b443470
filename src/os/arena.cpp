#include "os/arena.hpp"

#include <algorithm>
#include <alloca.h>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <new>
#include <sys/mman.h>
#include <unistd.h>

#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ 22
#define MADV_POPULATE_WRITE 23
#endif

// The hot path's code (src/hot-text.ld places it first and marks it; without the script, as in
// the sanitizer builds, the symbols are absent and no text is prefaulted).
extern "C" char __nriqos_hot_text_start[] __attribute__((weak));
extern "C" char __nriqos_hot_text_end[] __attribute__((weak));

namespace nriqos::arena {

namespace {
alignas(16) unsigned char g_buf[kBytes];
size_t g_top = 0;
bool g_on = false;
}  // namespace

void enable() { g_on = true; }
size_t used() { return g_top; }
bool contains(const void* p) {
    auto a = reinterpret_cast<uintptr_t>(p), b = reinterpret_cast<uintptr_t>(g_buf);
    return a >= b && a < b + kBytes;
}

void trim(void* p, size_t had, size_t keep) {
    if (!contains(p) || keep > had) return;
    auto round = [](size_t n) { return n ? (n + 15) & ~static_cast<size_t>(15) : 16; };  // as operator new
    auto* b = static_cast<unsigned char*>(p);
    if (b + round(had) == g_buf + g_top) g_top = static_cast<size_t>(b - g_buf) + round(keep);
}

namespace {
uintptr_t page_down(uintptr_t a) { return a & ~uintptr_t(4095); }

// Write one byte per page of `n` bytes of stack below the caller's frame (a callee's frame:
// the pages the evaluation's own frames will use).
__attribute__((noinline)) void touch_stack(size_t n) {
    char* pad = static_cast<char*>(alloca(n));
    for (size_t i = 0; i < n; i += 4096) pad[i] = 0;
    asm volatile("" : : "r"(pad) : "memory");  // the writes must happen
}
}  // namespace

void prefault(size_t arena_bytes) {
    uintptr_t lo = page_down(reinterpret_cast<uintptr_t>(__nriqos_hot_text_start));
    uintptr_t hi = reinterpret_cast<uintptr_t>(__nriqos_hot_text_end);
    if (lo && hi > lo) madvise(reinterpret_cast<void*>(lo), hi - lo, MADV_POPULATE_READ);
    uintptr_t a = page_down(reinterpret_cast<uintptr_t>(g_buf + g_top) + 4095);
    uintptr_t e = page_down(reinterpret_cast<uintptr_t>(g_buf) + std::min(kBytes, g_top + arena_bytes));
    if (e > a) madvise(reinterpret_cast<void*>(a), e - a, MADV_POPULATE_WRITE);
    touch_stack(48u << 10);
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
}

}  // namespace nriqos::arena

// The sanitizer builds (tests/fuzz) keep their own operator new, which checks every block.
#if !defined(NRI_QOS_FUZZ) && !defined(__SANITIZE_ADDRESS__)

using nriqos::arena::g_buf;
using nriqos::arena::g_on;
using nriqos::arena::g_top;

void* operator new(std::size_t n) {
    if (g_on && n <= nriqos::arena::kBytes) {
        size_t need = n ? (n + 15) & ~static_cast<size_t>(15) : 16;  // new(0): a distinct address too
        if (need <= nriqos::arena::kBytes - g_top) {
            void* p = g_buf + g_top;
            g_top += need;
            return p;
        }
        if (n <= 4096) g_on = false;  // full (a cache miss compiling a policy): malloc from now on
    }
    for (;;) {
        if (void* p = std::malloc(n ? n : 1)) return p;
        std::new_handler h = std::get_new_handler();
        if (!h) throw std::bad_alloc();
        h();
    }
}

void operator delete(void* p) noexcept {
    if (!nriqos::arena::contains(p)) std::free(p);
}

// Sized delete (what std::allocator uses): the newest block is given back, so the temporaries
// of a function (strings built and dropped in turn) reuse the same bytes.
void operator delete(void* p, std::size_t n) noexcept {
    if (!nriqos::arena::contains(p)) {
        std::free(p);
        return;
    }
    size_t had = n ? (n + 15) & ~static_cast<size_t>(15) : 16;
    if (static_cast<unsigned char*>(p) + had == g_buf + g_top) g_top -= had;
}

#endif
