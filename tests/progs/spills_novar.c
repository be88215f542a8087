/* Register spills in a frame where DWARF places no variable in memory, for
 * tests/e2e/test_spills.py.
 *
 *   spills_novar N ITERS
 *
 * Each thread of the parallel loop updates its elements of `out` in place, calling a
 * function the compiler cannot see through (`step`, noipa) every iteration.  The loop's
 * variables live in registers the call preserves (the pointer, the indices); the three
 * loop-invariant factors (`u * v`, ...) are doubles, and no xmm register survives a call
 * in the x86-64 System V ABI: the compiler keeps them in the frame and reloads them after
 * each call.  Those slots belong to no variable, and no variable of the function has a
 * slot in the frame at all (the outlined loop of an OpenMP region, as in molecular
 * dynamics kernels that call exp() in their inner loop).
 */
#include <stdio.h>
#include <stdlib.h>

__attribute__((noipa)) double step(double x)
{
    __asm__ volatile("" : : : "memory");
    return x * 0.999 + 0.5;
}

static void relax(double *out, long n, long iters, double u, double v, double w)
{
#pragma omp parallel for schedule(static)
    for (long i = 0; i < n; i++)
        for (long it = 0; it < iters; it++)
            out[i] = out[i] * (u * v) + step(out[i]) * (u * w) + (v - w);
}

int main(int argc, char **argv)
{
    long n = argc > 1 ? atol(argv[1]) : 1000;
    long iters = argc > 2 ? atol(argv[2]) : 20000;
    double *out = calloc((size_t)n, sizeof *out);
    if (!out)
        return 1;
    relax(out, n, iters, 0.5 + 1.0 / (double)(n + 2), 0.25 + 1.0 / (double)(iters + 3), 0.125);
    double total = 0.0;
    for (long i = 0; i < n; i++)
        total += out[i];
    printf("%g\n", total);
    free(out);
    return 0;
}
