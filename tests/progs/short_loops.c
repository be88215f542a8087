/* Many short parallel loops, each ending in a barrier, for
 * tests/e2e/test_openmp_runtime.py: libgomp's barrier and loop counters (in a heap block
 * of its own) take a large share of the samples, as in the NAS Parallel Benchmarks' SP
 * at class W.  `a` and `b`, the loops' arrays, stay the program's objects.
 *
 *   short_loops N STEPS
 */
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
    long n = argc > 1 ? atol(argv[1]) : 2048;
    int steps = argc > 2 ? atoi(argv[2]) : 100000;
    double *a = malloc((size_t)n * sizeof *a), *b = malloc((size_t)n * sizeof *b);
    if (!a || !b)
        return 1;
    for (long i = 0; i < n; i++)
        a[i] = b[i] = (double)i;
#pragma omp parallel
    for (int s = 0; s < steps; s++) {
#pragma omp for schedule(static)
        for (long i = 1; i < n - 1; i++)
            b[i] = 0.5 * (a[i - 1] + a[i + 1]);
#pragma omp for schedule(static)
        for (long i = 1; i < n - 1; i++)
            a[i] = b[i];
    }
    printf("%g\n", a[n / 2]);
    free(a);
    free(b);
    return 0;
}
