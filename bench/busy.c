/* A cpu-bound loop with no memory traffic, for bench/sample_cost.py: what sampling costs
 * the sampled thread itself, apart from caches and memory.  Prints its own user and
 * system time (getrusage) on stderr, so that the start-up of whatever runs it does not
 * count. */
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>

int main(int argc, char **argv)
{
    long n = argc > 1 ? atol(argv[1]) : 1500000000L;
    double x = 1.0;
    for (long i = 0; i < n; i++)
        x = x * 1.0000001 + 1e-9;
    struct rusage u;
    getrusage(RUSAGE_SELF, &u);
    fprintf(stderr, "busy-cpu %.6f\n", u.ru_utime.tv_sec + u.ru_utime.tv_usec / 1e6 +
                                          u.ru_stime.tv_sec + u.ru_stime.tv_usec / 1e6);
    printf("%g\n", x);
    return 0;
}
