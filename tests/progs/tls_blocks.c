/* 5x5 Jacobian blocks in thread-private storage, as NPB BT's x/y/z_solve keep theirs, for
 * tests/e2e/test_spills.py.
 *
 *   tls_blocks LINES SWEEPS
 *
 * BT's Fortran module declares `fjac(5,5,0:n)` and `njac(5,5,0:n)` threadprivate: each
 * OpenMP thread fills its own copy for the grid line it solves, then combines the cells'
 * blocks.  Here the same in C: two threadprivate arrays of a line's blocks, filled from
 * the shared field `u` and multiplied block by block (every loop unrolled) into the
 * line's `lhs`.  The executable's code addresses them from the thread pointer (%fs plus
 * a constant: the local-exec TLS model); with 25 + 25 elements live and 16 xmm
 * registers, gcc -O2 keeps some of those it read in the frame until they are used:
 * slots holding copies of fjac's and njac's elements, and products in progress.
 */
#include <stdio.h>
#include <stdlib.h>

#define B 5
#define N 32 /* cells of one line */

static double fjac[N][B][B], njac[N][B][B];
#pragma omp threadprivate(fjac, njac)

/* the line's Jacobians, from the field's cells */
__attribute__((noinline)) static void jacobians(const double *u)
{
    for (int k = 0; k < N; k++)
        for (int i = 0; i < B; i++)
            for (int j = 0; j < B; j++) {
                fjac[k][i][j] = u[k] * (double)(1 + i) - 0.1 * (double)j;
                njac[k][i][j] = u[k] * 0.5 + (double)(i == j);
            }
}

/* out = out - fjac(k-1) * njac(k): BT's matmul_sub on the line's blocks */
__attribute__((noinline)) static void combine(double (*restrict out)[B][B])
{
    for (int k = 1; k < N; k++)
#pragma GCC unroll 5
        for (int j = 0; j < B; j++)
#pragma GCC unroll 5
            for (int i = 0; i < B; i++)
                out[k][j][i] = out[k][j][i] - fjac[k - 1][0][i] * njac[k][j][0] - fjac[k - 1][1][i] * njac[k][j][1]
                               - fjac[k - 1][2][i] * njac[k][j][2] - fjac[k - 1][3][i] * njac[k][j][3]
                               - fjac[k - 1][4][i] * njac[k][j][4];
}

int main(int argc, char **argv)
{
    long lines = argc > 1 ? atol(argv[1]) : 4096;
    int sweeps = argc > 2 ? atoi(argv[2]) : 20;
    double *u = malloc(sizeof(double) * N * lines);
    double (*lhs)[B][B] = malloc(sizeof(double[B][B]) * N * lines);
    if (!u || !lhs)
        return 1;
#pragma omp parallel for schedule(static)
    for (long l = 0; l < lines; l++)
        for (int k = 0; k < N; k++) {
            u[l * N + k] = 1.0 + 1e-3 * (double)((l + k) % 11);
            for (int i = 0; i < B; i++)
                for (int j = 0; j < B; j++)
                    lhs[l * N + k][i][j] = 0.0;
        }
    double sum = 0.0;
    for (int s = 0; s < sweeps; s++) {
#pragma omp parallel for schedule(static)
        for (long l = 0; l < lines; l++) {
            jacobians(u + l * N);
            combine(lhs + l * N);
        }
    }
    for (long l = 0; l < lines * N; l++)
        sum += lhs[l][2][3];
    printf("%f\n", sum);
    free(u);
    free(lhs);
    return 0;
}
