/* Register spills in a hot loop, for tests/e2e/test_spills.py.
 *
 *   spills N ITERS
 *
 * Each of 2 OpenMP threads runs a loop that calls a function the compiler cannot see
 * through (`step`, noipa: not even its register use is known) and keeps six running values live across the call: the
 * x86-64 System V ABI preserves no xmm register across a call, so the compiler stores
 * them in the frame before each call and loads them back after; DWARF names those
 * slots after the variables.  The six factors (`u * v`, ...) are loop-invariant
 * expressions the compiler computes once, before the loop, and spills too: slots of no
 * one variable, named by both operands.  The loop also updates `hist`, a local array of
 * the same frame, at
 * random: it is a variable and must keep its name.
 */
#include <stdio.h>
#include <stdlib.h>

__attribute__((noipa)) double step(double x)
{
    __asm__ volatile("" : : : "memory");
    return x * 0.999 + 0.5;
}

int main(int argc, char **argv)
{
    long n = argc > 1 ? atol(argv[1]) : 1000;
    long iters = argc > 2 ? atol(argv[2]) : 20000;
    double u = 0.5 + 1.0 / (double)(n + 2), v = 0.25 + 1.0 / (double)(iters + 3), w = 0.125;
    double total = 0.0;
#pragma omp parallel reduction(+ : total)
    {
        double hist[512];
        for (int k = 0; k < 512; k++)
            hist[k] = 0.0;
        double a = 1.0, b = 2.0, c = 3.0, d = 4.0, e = 5.0, f = 6.0;
        unsigned seed = 12345u;
        for (long it = 0; it < iters; it++)
            for (long i = 0; i < n; i++) {
                double s = step((double)i);
                a = a * (u * v) + s;
                b = b * (u * w) + a;
                c = c * (v * w) + b;
                d = d * (u - v) + c;
                e = e * (v - w) + d;
                f = f * (u - w) + e;
                seed = seed * 1103515245u + 12345u;
                hist[(seed >> 16) & 511] += f;
            }
        for (int k = 0; k < 512; k++)
            total += hist[k];
        total += a + b + c + d + e + f;
    }
    printf("%g\n", total);
    return 0;
}
