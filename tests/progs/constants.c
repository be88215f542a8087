/* A hot loop that reads the compiler's constants, for tests/e2e/test_constants.py.
 *
 *   constants N REPS
 *
 * `transfer` is called once per element and cannot be inlined or vectorised (noipa): each
 * call loads its literals (0.5, 3.25, 1e-3, fabs's sign mask) from the executable's
 * .rodata, which gcc -O2 addresses RIP-relative and keeps at no symbol.  Those loads are
 * no array of the program: they belong to a read-only object of the file, which is
 * never placed.  `x` and `y`, the arrays of the loop, keep their own names and patterns.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

__attribute__((noipa)) double transfer(double v)
{
    return fabs(v - 3.25) * 0.5 + v * 1e-3;
}

int main(int argc, char **argv)
{
    long n = argc > 1 ? atol(argv[1]) : 1 << 20;
    int reps = argc > 2 ? atoi(argv[2]) : 20;
    double *x = malloc((size_t)n * sizeof *x);
    if (!x)
        return 1;
#pragma omp parallel for schedule(static)
    for (long i = 0; i < n; i++)
        x[i] = (double)(i % 1000) * 0.01;
    double *y = malloc((size_t)n * sizeof *y);
    if (!y)
        return 1;
    for (int r = 0; r < reps; r++) {
#pragma omp parallel for schedule(static)
        for (long i = 0; i < n; i++)
            y[i] = transfer(x[i]) + y[i] * 0.5;
    }
    printf("%f\n", y[n / 3]);
    free(y);
    free(x);
    return 0;
}
