// Build-time generator: compiles nri-qos's seccomp lists (src/os/sandbox_syscalls.hpp) with
// libseccomp and prints them as a C++ header (BPF programs for the build machine's
// architecture, or for the one named on the command line when cross-building: `aarch64`),
// so that no libseccomp compiler runs at container start. Each name is resolved to the target's
// number (libseccomp seccomp_syscall_resolve_name_arch); names the target lacks (aarch64 has only
// the *at variants: no open, stat, mkdir, rename, access, alarm, ...) are left out. Programs:
//   kSeccompBpf            the evaluator (one-shot hook, nri-eval, the relay's spares): allow-list
//   kSeccompZygoteBpf      the relay's evaluator zygote: kSeccompBpf + kZygoteExtra + checked
//                          clone/prctl/seccomp
//   kSeccompDropZygoteBpf  a spare cloned by the zygote: deny kZygoteDrop, allow the rest
//   kSeccompRelayBpf       the native NRI relay once confined: kRelayAllowed
// Usage: seccomp-bpf-gen [x86_64|aarch64] > build/gen/seccomp_bpf.h
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <seccomp.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <unistd.h>
#include <vector>

#include "os/sandbox_syscalls.hpp"

namespace {

using namespace nriqos;

/// The target architecture (libseccomp SCMP_ARCH_*), SCMP_ARCH_NATIVE unless main() is told
/// another. Every filter checks it: a syscall of another ABI gets SCMP_FLTATR_ACT_BADARCH.
uint32_t g_arch = SCMP_ARCH_NATIVE;

/// The number to give seccomp_rule_add for `name`, or -1 when the target has no such call.
/// libseccomp takes rule numbers as the BUILD machine's (or its pseudo numbers for calls it lacks)
/// and translates them by name to each architecture of the filter (libseccomp src/arch.c
/// arch_syscall_translate): the target's own number would be read as a native one and land on
/// another call. So: present on the target (seccomp_syscall_resolve_name_arch), then the native
/// number (seccomp_syscall_resolve_name).
int resolve(const char* name) {
    if (seccomp_syscall_resolve_name_arch(g_arch, name) < 0) return -1;
    return seccomp_syscall_resolve_name(name);
}

/// seccomp_init for g_arch: the native architecture replaced by the target when they differ.
scmp_filter_ctx init_ctx(uint32_t def_action) {
    scmp_filter_ctx ctx = seccomp_init(def_action);
    if (!ctx || g_arch == SCMP_ARCH_NATIVE || g_arch == seccomp_arch_native()) return ctx;
    if (seccomp_arch_add(ctx, g_arch) != 0 || seccomp_arch_remove(ctx, SCMP_ARCH_NATIVE) != 0) {
        seccomp_release(ctx);
        return nullptr;
    }
    return ctx;
}

int add_names(scmp_filter_ctx ctx, uint32_t action, const char* const* names) {
    for (const char* const* n = names; *n; ++n) {
        int nr = resolve(*n);
        if (nr == -1) continue;  // not on the target architecture
        int rc = seccomp_rule_add(ctx, action, nr, 0);
        if (rc) {
            fprintf(stderr, "seccomp_rule_add(%s): %s\n", *n, strerror(-rc));
            return rc;
        }
    }
    return 0;
}

int add_cond(scmp_filter_ctx ctx, const char* name, scmp_datum_t a0) {
    int nr = resolve(name);
    if (nr == -1) return 0;
    return seccomp_rule_add(ctx, SCMP_ACT_ALLOW, nr, 1, SCMP_A0(SCMP_CMP_EQ, a0));
}

/// Export `ctx` as "static const struct sock_filter NAME[]"; `placeholders` = how many tgkill
/// pid placeholders the program must contain.
int emit(scmp_filter_ctx ctx, const char* name, int placeholders) {
    int fd = memfd_create("bpf", 0);
    int rc = fd < 0 ? -errno : seccomp_export_bpf(ctx, fd);
    if (rc) return rc;
    off_t len = lseek(fd, 0, SEEK_END);
    std::vector<sock_filter> prog(static_cast<size_t>(len) / sizeof(sock_filter));
    if (len <= 0 || len % sizeof(sock_filter) || pread(fd, prog.data(), static_cast<size_t>(len), 0) != len) {
        fprintf(stderr, "seccomp-bpf-gen: bad export of %s\n", name);
        return -EINVAL;
    }
    close(fd);
    int found = 0;
    for (const auto& i : prog) found += i.k == kTgkillPidPlaceholder;
    if (found != placeholders) {
        fprintf(stderr, "seccomp-bpf-gen: %s: %d pid placeholders, want %d\n", name, found, placeholders);
        return -EINVAL;
    }
    printf("static const struct sock_filter %s[] = {\n", name);
    for (const auto& i : prog) printf("    {0x%04x, %u, %u, 0x%08x},\n", i.code, i.jt, i.jf, i.k);
    printf("};\n");
    return 0;
}

/// Deny-by-default list: `names` (kSandboxAllowed unless given), tgkill of our own pid, plus the
/// zygote's extras.
scmp_filter_ctx allow_list(bool zygote, int& rc, const char* const* names = kSandboxAllowed, bool systemd = false) {
    scmp_filter_ctx ctx = init_ctx(SCMP_ACT_ERRNO(EPERM));
    if (!ctx) {
        rc = -ENOMEM;
        return nullptr;
    }
    rc = seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_ERRNO(EPERM));
    // A binary tree of syscall numbers instead of libseccomp's default linear list: loading a
    // filter makes the kernel run it for every syscall number (the action cache,
    // seccomp_cache_prepare) and JIT it. seccomp() of the one-shot hook's program: ~94 µs with
    // the list, ~40 µs with the tree on this project's VM; every later syscall is checked in
    // ~6 comparisons instead of up to ~75. Same decisions (libseccomp: layout only).
    if (rc == 0) rc = seccomp_attr_set(ctx, SCMP_FLTATR_CTL_OPTIMIZE, 2);
    if (rc == 0) rc = add_names(ctx, SCMP_ACT_ALLOW, names);
    int tg = resolve("tgkill");
    if (rc == 0 && tg != -1) rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, tg, 1, SCMP_A0(SCMP_CMP_EQ, kTgkillPidPlaceholder));
    if (systemd) {
        if (rc == 0) rc = add_names(ctx, SCMP_ACT_ALLOW, kSystemdExtra);
        int so = resolve("socket");
        if (rc == 0 && so != -1)
            rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, so, 2, SCMP_A0(SCMP_CMP_EQ, AF_UNIX), SCMP_A1(SCMP_CMP_MASKED_EQ, 0xf, SOCK_STREAM));
        if (rc == 0) rc = add_cond(ctx, "prctl", PR_CAPBSET_READ);
        // No vfork system call on aarch64: glibc's vfork() is clone(CLONE_VM|CLONE_VFORK|SIGCHLD)
        // there (glibc sysdeps/unix/sysv/linux/aarch64/vfork.S); allowed with exactly those flags.
        if (rc == 0 && resolve("vfork") == -1) rc = add_cond(ctx, "clone", CLONE_VM | CLONE_VFORK | SIGCHLD);
    }
    if (zygote) {
        if (rc == 0) rc = add_names(ctx, SCMP_ACT_ALLOW, kZygoteExtra);
        if (rc == 0) rc = add_cond(ctx, "clone", CLONE_PARENT | SIGCHLD);
        if (rc == 0) rc = add_cond(ctx, "prctl", PR_SET_PDEATHSIG);
        if (rc == 0) rc = add_cond(ctx, "prctl", PR_SET_NAME);  // "nri-qos-eval" for each spare
        if (rc == 0) rc = add_cond(ctx, "seccomp", SECCOMP_SET_MODE_FILTER);
    }
    return ctx;
}

}  // namespace

int main(int argc, char** argv) {
    if (argc > 2) return fprintf(stderr, "usage: seccomp-bpf-gen [ARCH]\n"), 2;
    if (argc == 2) {
        g_arch = seccomp_arch_resolve_name(argv[1]);  // libseccomp's names: x86_64, aarch64, ...
        if (g_arch == 0) return fprintf(stderr, "seccomp-bpf-gen: unknown architecture '%s'\n", argv[1]), 2;
    }
    printf("// Generated by src/tools/seccomp-bpf-gen.cpp (libseccomp %u.%u.%u) from src/os/sandbox_syscalls.hpp", seccomp_version()->major,
           seccomp_version()->minor, seccomp_version()->micro);
    printf(" for %s.\n", argc == 2 ? argv[1] : "the build machine's architecture");
    printf("#pragma once\n#include <linux/filter.h>\n");
    int rc = 0;
    scmp_filter_ctx ctx = allow_list(false, rc);
    if (rc == 0) rc = emit(ctx, "kSeccompBpf", 1);
    if (ctx) seccomp_release(ctx);
    if (rc == 0) {
        ctx = allow_list(false, rc, kSandboxAllowed, true);
        if (rc == 0) rc = emit(ctx, "kSeccompSystemdBpf", 1);
        if (ctx) seccomp_release(ctx);
    }
    if (rc == 0) {
        ctx = allow_list(true, rc);
        if (rc == 0) rc = emit(ctx, "kSeccompZygoteBpf", 1);
        if (ctx) seccomp_release(ctx);
    }
    if (rc == 0) {
        ctx = init_ctx(SCMP_ACT_ALLOW);
        rc = ctx ? seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_ERRNO(EPERM)) : -ENOMEM;
        if (rc == 0) rc = add_names(ctx, SCMP_ACT_ERRNO(EPERM), kZygoteDrop);
        if (rc == 0) rc = emit(ctx, "kSeccompDropZygoteBpf", 0);
        if (ctx) seccomp_release(ctx);
    }
    if (rc == 0) {
        ctx = allow_list(false, rc, kRelayAllowed);
        if (rc == 0) rc = emit(ctx, "kSeccompRelayBpf", 1);
        if (ctx) seccomp_release(ctx);
    }
    if (rc) return fprintf(stderr, "seccomp-bpf-gen: %s\n", strerror(-rc)), 1;
    return 0;
}
