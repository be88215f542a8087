/* Arrays declared `static` inside functions, as older C codes keep their big arrays (the
 * NAS Parallel Benchmarks' FT declares `static dcomplex u0[NZ][NY][NX]` in main), for
 * tests/e2e/test_static_locals.py and tests/unit/test_static_locals.py.
 *
 *   static_locals REPS
 *
 * gcc calls a function's static `u` `u.0`, `u.1`, ... in the symbol table; the report
 * must give the names the source wrote, with the function.
 * `grid` is a file-scope static, `coef` a static local of another function.
 */
#include <stdio.h>
#include <stdlib.h>

#define N (1 << 21)

static double grid[N];

static double *coefficients(void)
{
    static double coef[N];
    for (long i = 0; i < N; i++)
        coef[i] = 1.0 / (double)(i + 1);
    return coef;
}

int main(int argc, char **argv)
{
    static double u0[N];
    static double u1[N];
    int reps = argc > 1 ? atoi(argv[1]) : 20;
    const double *c = coefficients();
#pragma omp parallel for schedule(static)
    for (long i = 0; i < N; i++) {
        u0[i] = (double)(i % 100);
        u1[i] = 0.0;
        grid[i] = 1.0;
    }
    double sum = 0.0;
    for (int r = 0; r < reps; r++) {
#pragma omp parallel for schedule(static) reduction(+ : sum)
        for (long i = 0; i < N; i++) {
            u1[i] += c[i] * u0[i] + grid[i];
            sum += u1[i];
        }
    }
    printf("%g\n", sum);
    return 0;
}
