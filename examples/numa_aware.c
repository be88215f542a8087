/* A NUMA-aware STREAM-like triad: every array is first-touched in parallel with the
 * same static schedule as the compute loop, so each thread's block lives on its node.
 * Known answer: x, y, z regular; first touch by every thread; suggestion: no change.
 * usage: numa_aware [MiB per array] [iterations]
 */
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
    size_t mib = argc > 1 ? strtoul(argv[1], NULL, 10) : 64;
    int iters = argc > 2 ? atoi(argv[2]) : 300;
    size_t n = mib * 1024 * 1024 / sizeof(double);

    double *x = malloc(n * sizeof(double));
    double *y = malloc(n * sizeof(double));
    double *z = malloc(n * sizeof(double));
    if (!x || !y || !z)
        return 1;

#pragma omp parallel for schedule(static)
    for (size_t j = 0; j < n; j++) {
        x[j] = 0.0;
        y[j] = 1.0;
        z[j] = 2.0;
    }

    for (int it = 0; it < iters; it++) {
#pragma omp parallel for schedule(static)
        for (size_t j = 0; j < n; j++)
            x[j] = y[j] + 3.0 * z[j];
    }

    double sum = 0.0;
    for (size_t j = 0; j < n; j += 4096)
        sum += x[j];
    printf("checksum %.1f\n", sum);
    free(x);
    free(y);
    free(z);
    return 0;
}
