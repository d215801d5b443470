/* The exec floor: the least a one-shot NRI v0.1 hook can do — read the request on stdin and
 * print a Result ("{}"). Built by bench/run.sh with `gcc -O2 -static`; nri-qos is measured
 * against it in the same run. */
#include <unistd.h>

int main(void) {
    char buf[65536];
    for (;;) {
        ssize_t n = read(0, buf, sizeof buf);
        if (n <= 0) break;
    }
    static const char out[] = "{}\n";
    return write(1, out, sizeof out - 1) == (ssize_t)(sizeof out - 1) ? 0 : 1;
}
