/* Measures the cost of malloc/free pairs (run it with and without the shim preloaded):
 *   mallocbench SIZE COUNT  ->  prints "SIZE ns_per_pair"
 * Used for the shim's overhead figures; not a test (no timing assertions anywhere). */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

int main(int argc, char **argv)
{
    size_t size = argc > 1 ? strtoul(argv[1], NULL, 10) : 32;
    long count = argc > 2 ? strtol(argv[2], NULL, 10) : 10000000;
    void *volatile sink;
    double t0 = now();
    for (long i = 0; i < count; i++) {
        char *p = malloc(size);
        p[0] = (char)i;
        sink = p;
        free(p);
    }
    double t1 = now();
    (void)sink;
    printf("%zu %.1f\n", size, (t1 - t0) / (double)count);
    return 0;
}
