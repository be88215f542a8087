/* A random gather through an index array: sum += lookup[idx[i]].
 * Known answer: lookup random and read-only; idx regular (each thread streams its own
 * static block) and read-only; hist regular and written.  Suggestion on a 2-socket
 * target: a copy of lookup per node (replicate: it is written first, then only read), and
 * among the placements a spreading policy (cyclic / interleave family).
 * usage: gather [MiB of lookup] [iterations]
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
    size_t mib = argc > 1 ? strtoul(argv[1], NULL, 10) : 64;
    int iters = argc > 2 ? atoi(argv[2]) : 60;
    size_t n = mib * 1024 * 1024 / sizeof(double);
    size_t m = n; /* number of gathers per iteration */

    double *lookup = malloc(n * sizeof(double));
    uint32_t *idx = malloc(m * sizeof(uint32_t));
    double *hist = malloc(m / 16 * sizeof(double));
    if (!lookup || !idx || !hist)
        return 1;

#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++)
        lookup[i] = (double)(i & 1023);

    uint64_t x = 88172645463325252ull; /* xorshift: reproducible indices */
    for (size_t i = 0; i < m; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        idx[i] = (uint32_t)(x % n);
    }

    double total = 0.0;
    for (int it = 0; it < iters; it++) {
#pragma omp parallel for schedule(static) reduction(+ : total)
        for (size_t k = 0; k < m / 16; k++) {
            double s = 0.0;
            for (size_t i = k * 16; i < k * 16 + 16; i++)
                s += lookup[idx[i]];
            hist[k] = s;
            total += s;
        }
    }
    printf("checksum %.1f\n", total);
    free(lookup);
    free(idx);
    free(hist);
    return 0;
}
