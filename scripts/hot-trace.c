/* hot-trace — print the distinct instruction addresses a static non-PIE program executes in its
 * own image, in first-execution order (scripts/hot-text.sh). The program runs under ptrace(2),
 * single-stepped; SIGALRM (nri-qos's self-imposed deadline) is not delivered, other signals are.
 * Usage: hot-trace OUT LO HI PROG [ARG...]   (OUT: file for the addresses, one hex address a
 * line; LO/HI: hex address range to record) */
#define _GNU_SOURCE
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/ptrace.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <unistd.h>

int main(int argc, char** argv) {
    if (argc < 5) {
        fprintf(stderr, "usage: hot-trace OUT LO HI PROG [ARG...]\n");
        return 2;
    }
    FILE* out = fopen(argv[1], "w");
    if (!out) return 2;
    uint64_t lo = strtoull(argv[2], NULL, 16), hi = strtoull(argv[3], NULL, 16);
    if (hi <= lo || hi - lo > (1u << 30)) return 2;
    unsigned char* seen = calloc((hi - lo) / 8 + 1, 1);
    if (!seen) return 2;
    pid_t pid = fork();
    if (pid < 0) return 2;
    if (pid == 0) {
        ptrace(PTRACE_TRACEME, 0, NULL, NULL);
        execv(argv[4], argv + 4);
        _exit(127);
    }
    int st;
    if (waitpid(pid, &st, 0) != pid || !WIFSTOPPED(st)) return 2; /* stopped at exec */
    int sig = 0;
    unsigned long steps = 0;
    for (;;) {
        if (ptrace(PTRACE_SINGLESTEP, pid, NULL, (void*)(long)sig) != 0) break;
        if (waitpid(pid, &st, 0) != pid) break;
        if (WIFEXITED(st) || WIFSIGNALED(st)) break;
        sig = WSTOPSIG(st) == SIGTRAP || WSTOPSIG(st) == SIGALRM ? 0 : WSTOPSIG(st);
        struct user_regs_struct r;
        if (ptrace(PTRACE_GETREGS, pid, NULL, &r) != 0) break;
        ++steps;
        uint64_t ip = r.rip;
        if (ip >= lo && ip < hi) {
            uint64_t k = ip - lo;
            if (!(seen[k / 8] & (1u << (k % 8)))) {
                seen[k / 8] |= (unsigned char)(1u << (k % 8));
                fprintf(out, "%lx\n", (unsigned long)ip);
            }
        }
    }
    fclose(out);
    fprintf(stderr, "hot-trace: %lu steps\n", steps);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 1;
}
