/* A system library's work on its own data, for tests/e2e/test_libstate.py.
 *
 *   libcalls N REPS LINES
 *
 * A parallel loop calls exp() on every element of `x` (libm reads its tables, in its own
 * .rodata, at every call), then the program writes LINES formatted lines to /dev/null
 * (fprintf works in its own stack frame and on stdio's state).  Those accesses are the C
 * library's and libm's, not an array of the program's; `x` and `y` are.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
    long n = argc > 1 ? atol(argv[1]) : 100000;
    int reps = argc > 2 ? atoi(argv[2]) : 100;
    long lines = argc > 3 ? atol(argv[3]) : 100000;
    double *x = malloc((size_t)n * sizeof *x), *y = calloc((size_t)n, sizeof *y);
    if (!x || !y)
        return 1;
#pragma omp parallel for schedule(static)
    for (long i = 0; i < n; i++)
        x[i] = (double)(i % 1000) / 250.0 - 2.0;
    for (int r = 0; r < reps; r++) {
#pragma omp parallel for schedule(static)
        for (long i = 0; i < n; i++)
            y[i] += exp(-x[i] * x[i] * (1.0 + r * 1e-3));
    }
    FILE *out = fopen("/dev/null", "w");
    if (!out)
        return 1;
    for (long k = 0; k < lines; k++)
        fprintf(out, "%ld %.6f %.3e\n", k, y[k % n], x[k % n]);
    fclose(out);
    printf("%g\n", y[n / 2]);
    free(x);
    free(y);
    return 0;
}
