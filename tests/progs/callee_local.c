/* A caller's small local array written through a callee's pointer, for
 * tests/e2e/test_spills.py.
 *
 *   callee_local N ITERS
 *
 * Each of 2 OpenMP threads keeps `double sums[4]` in its frame and passes it to
 * `accumulate` (noinline), which adds a shared array into it: the callee's samples name
 * the memory by its parameter `v`, an address on the sampled thread's own stack but
 * outside the sampled frame.  Each thread's `sums` is its own: the object is
 * thread-private, and at 32 bytes within a cache line, regular.
 */
#include <stdio.h>
#include <stdlib.h>

__attribute__((noinline)) void accumulate(double *v, const double *x, long n)
{
    for (long i = 0; i < n; i++)
        v[i & 3] += x[i] * 0.5; /* v may alias x: every update is a load and a store */
}

int main(int argc, char **argv)
{
    long n = argc > 1 ? atol(argv[1]) : 4096;
    long iters = argc > 2 ? atol(argv[2]) : 20000;
    double *x = malloc(n * sizeof *x);
    for (long i = 0; i < n; i++)
        x[i] = (double)(i % 7);
    double total = 0.0;
#pragma omp parallel reduction(+ : total)
    {
        double sums[4] = {0.0, 0.0, 0.0, 0.0};
        for (long it = 0; it < iters; it++)
            accumulate(sums, x, n);
        total += sums[0] + sums[1] + sums[2] + sums[3];
    }
    printf("%g\n", total);
    free(x);
    return 0;
}
