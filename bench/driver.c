/* bench/driver.c — exec benchmark driver for nri-qos (see bench/run.sh, BENCHMARKS.md).
 *
 * Latency mode (default): runs every command N times, interleaved (A B C A B C ...), each run
 * fork(2) + execv(2) + wait4(2) with stdin = the request file (opened fresh, offset 0) and
 * stdout/stderr = /dev/null. Wall time is CLOCK_MONOTONIC from before fork to after wait4;
 * peak RSS is wait4's ru_maxrss (KiB). A run that exits non-zero aborts the benchmark.
 *
 * Throughput mode (-P K): runs each command N times with K children in flight at once (a new
 * one is started as soon as one exits) and reports invocations per second of wall time.
 *
 * Usage: driver [-n N] [-w WARMUP] [-P K] -i REQUEST  LABEL [<FILE] [^FILE] [%VAR=VALUE] PROG ARG... [--- ...]...
 * ("<FILE": this command's stdin instead of -i REQUEST; "^FILE": touch FILE (mtime = now) before
 * each timed run, outside the timed region — e.g. a policy, to time the first run after a change;
 * "%VAR=VALUE": set VAR in this command's environment only, in the child before execv, so that no
 * wrapper such as env(1) adds an exec to the timed run)
 * Output, one line per command:
 *   latency:    LABEL n=N p50_us=.. p90_us=.. p99_us=.. max_us=.. mean_us=.. rss_kib_max=.. rss_kib_p50=..
 *               user_us=.. sys_us=.. minflt=..   (means per run of ru_utime, ru_stime, ru_minflt)
 *   throughput: LABEL n=N workers=K wall_s=.. per_s=..
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

struct cmd {
    const char* label;
    const char* input; /* stdin for this command ("<FILE" token), else -i */
    const char* touch; /* "^FILE" token: set FILE's mtime to now before each run (untimed) */
    char* env; /* "%VAR=VALUE" token: put in the child's environment, or NULL */
    char** argv;
    double* us;
    long* rss;
    double user_us, sys_us; /* sums of ru_utime / ru_stime */
    long minflt; /* sum of ru_minflt */
};

static double now_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

static const char* g_input;
static int g_null = -1;

static pid_t spawn(const char* input, char* env, char** argv) {
    pid_t pid = fork();
    if (pid < 0) {
        perror("driver: fork");
        exit(2);
    }
    if (pid == 0) {
        int in = open(input, O_RDONLY);
        if (in < 0 || dup2(in, 0) < 0 || dup2(g_null, 1) < 0 || dup2(g_null, 2) < 0) _exit(126);
        close(in);
        if (env && putenv(env) != 0) _exit(126);
        execv(argv[0], argv);
        _exit(127);
    }
    return pid;
}

static void check_status(const struct cmd* c, int status) {
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        fprintf(stderr, "driver: %s: %s %d\n", c->label, WIFEXITED(status) ? "exit status" : "killed by signal",
                WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
        exit(1);
    }
}

static int cmp_d(const void* a, const void* b) {
    double x = *(const double*)a, y = *(const double*)b;
    return x < y ? -1 : x > y;
}
static int cmp_l(const void* a, const void* b) {
    long x = *(const long*)a, y = *(const long*)b;
    return x < y ? -1 : x > y;
}
/* Nearest-rank percentile of a sorted array. */
static double pct(const double* v, int n, double p) {
    int k = (int)(p / 100.0 * n + 0.999999) - 1;
    if (k < 0) k = 0;
    if (k >= n) k = n - 1;
    return v[k];
}

static void usage(void) {
    fprintf(stderr, "usage: driver [-n N] [-w WARMUP] [-P K] -i REQUEST LABEL [<FILE] PROG ARG... [--- ...]...\n");
    exit(2);
}

int main(int argc, char** argv) {
    int n = 1000, warm = 20, par = 0, opt;
    while ((opt = getopt(argc, argv, "+n:w:P:i:")) != -1) {
        switch (opt) {
            case 'n': n = atoi(optarg); break;
            case 'w': warm = atoi(optarg); break;
            case 'P': par = atoi(optarg); break;
            case 'i': g_input = optarg; break;
            default: usage();
        }
    }
    if (!g_input || optind >= argc || n <= 0) usage();
    g_null = open("/dev/null", O_WRONLY);
    /* zeroed: user_us, sys_us and minflt are sums (uninitialised, the go-clearcfs row of the
       2026-11-27 and 2026-11-29 runs showed a stack address as its page faults) */
    struct cmd cmds[16];
    memset(cmds, 0, sizeof cmds);
    int nc = 0;
    for (int i = optind; i < argc;) {
        if (nc == 16 || i + 1 >= argc) usage();
        cmds[nc].label = argv[i];
        cmds[nc].input = g_input;
        int j = i + 1;
        cmds[nc].touch = NULL;
        cmds[nc].env = NULL;
        for (; j < argc && (argv[j][0] == '<' || argv[j][0] == '^' || argv[j][0] == '%'); ++j) {
            if (argv[j][0] == '<') cmds[nc].input = argv[j] + 1;
            else if (argv[j][0] == '^') cmds[nc].touch = argv[j] + 1;
            else if (strchr(argv[j] + 1, '=')) cmds[nc].env = argv[j] + 1;
            else usage();
        }
        cmds[nc].argv = &argv[j];
        while (j < argc && strcmp(argv[j], "---") != 0) ++j;
        argv[j < argc ? j : argc] = NULL; /* terminate this command's argv */
        cmds[nc].us = calloc((size_t)n, sizeof(double));
        cmds[nc].rss = calloc((size_t)n, sizeof(long));
        ++nc;
        i = j + 1;
    }

    if (par > 0) {
        for (int c = 0; c < nc; ++c) {
            int started = 0, done = 0, status;
            for (int w = 0; w < warm; ++w) {
                waitpid(spawn(cmds[c].input, cmds[c].env, cmds[c].argv), &status, 0);
                check_status(&cmds[c], status);
            }
            double t0 = now_us();
            while (done < n) {
                while (started < n && started - done < par) spawn(cmds[c].input, cmds[c].env, cmds[c].argv), ++started;
                if (wait(&status) < 0) {
                    perror("driver: wait");
                    return 2;
                }
                check_status(&cmds[c], status);
                ++done;
            }
            double wall = (now_us() - t0) / 1e6;
            printf("%s n=%d workers=%d wall_s=%.3f per_s=%.0f\n", cmds[c].label, n, par, wall, n / wall);
        }
        return 0;
    }

    for (int w = 0; w < warm; ++w)
        for (int c = 0; c < nc; ++c) {
            int status;
            waitpid(spawn(cmds[c].input, cmds[c].env, cmds[c].argv), &status, 0);
            check_status(&cmds[c], status);
        }
    for (int i = 0; i < n; ++i) {
        for (int c = 0; c < nc; ++c) {
            int status;
            struct rusage ru;
            if (cmds[c].touch && utimensat(AT_FDCWD, cmds[c].touch, NULL, 0) != 0) {
                perror("driver: utimensat");
                return 2;
            }
            double t0 = now_us();
            pid_t pid = spawn(cmds[c].input, cmds[c].env, cmds[c].argv);
            if (wait4(pid, &status, 0, &ru) < 0) {
                perror("driver: wait4");
                return 2;
            }
            cmds[c].us[i] = now_us() - t0;
            cmds[c].rss[i] = ru.ru_maxrss;
            cmds[c].user_us += ru.ru_utime.tv_sec * 1e6 + ru.ru_utime.tv_usec;
            cmds[c].sys_us += ru.ru_stime.tv_sec * 1e6 + ru.ru_stime.tv_usec;
            cmds[c].minflt += ru.ru_minflt;
            check_status(&cmds[c], status);
        }
    }
    for (int c = 0; c < nc; ++c) {
        double sum = 0;
        for (int i = 0; i < n; ++i) sum += cmds[c].us[i];
        qsort(cmds[c].us, (size_t)n, sizeof(double), cmp_d);
        qsort(cmds[c].rss, (size_t)n, sizeof(long), cmp_l);
        printf(
            "%s n=%d p50_us=%.0f p90_us=%.0f p99_us=%.0f max_us=%.0f mean_us=%.0f rss_kib_max=%ld rss_kib_p50=%ld"
            " user_us=%.0f sys_us=%.0f minflt=%.1f\n",
            cmds[c].label, n, pct(cmds[c].us, n, 50), pct(cmds[c].us, n, 90), pct(cmds[c].us, n, 99), cmds[c].us[n - 1], sum / n, cmds[c].rss[n - 1],
            cmds[c].rss[n / 2], cmds[c].user_us / n, cmds[c].sys_us / n, (double)cmds[c].minflt / n);
    }
    return 0;
}
