#include "arena.hpp"

#include <cstdint>
#include <cstdlib>
#include <new>

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
