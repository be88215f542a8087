/* 5x5 block products, as a block-tridiagonal solver forms them, for
 * tests/e2e/test_spills.py.
 *
 *   block_solve CELLS SWEEPS
 *
 * Each of 2 OpenMP threads runs over its cells; per cell, `matmul_sub` (noinline)
 * subtracts the product of the previous cell's blocks `a` (of `lhs`) and `b` (of `c`)
 * from the cell's block of `c`: NPB BT's matmul_sub, written out in C with every loop
 * unrolled.  With the blocks restrict, gcc -O2 reads each element of `a` and `b` once
 * and keeps it; with 25 + 25 + 25 values live and 16 xmm registers, some of those it
 * read stay in the frame until they are used: slots holding copies of `a`'s and `b`'s
 * elements, which no variable of the source names, beside the products in progress.
 */
#include <stdio.h>
#include <stdlib.h>

#define B 5

__attribute__((noinline)) static void matmul_sub(const double (*restrict a)[B],
                                                 const double (*restrict b)[B],
                                                 double (*restrict out)[B])
{
#pragma GCC unroll 5
    for (int j = 0; j < B; j++)
#pragma GCC unroll 5
        for (int i = 0; i < B; i++)
            out[j][i] = out[j][i] - a[0][i] * b[j][0] - a[1][i] * b[j][1] - a[2][i] * b[j][2]
                        - a[3][i] * b[j][3] - a[4][i] * b[j][4];
}

int main(int argc, char **argv)
{
    long cells = argc > 1 ? atol(argv[1]) : 100000;
    int sweeps = argc > 2 ? atoi(argv[2]) : 20;
    double (*lhs)[B][B] = malloc(sizeof(double[B][B]) * cells);
    double (*c)[B][B] = malloc(sizeof(double[B][B]) * cells);
    if (!lhs || !c)
        return 1;
#pragma omp parallel for schedule(static)
    for (long k = 0; k < cells; k++)
        for (int i = 0; i < B; i++)
            for (int j = 0; j < B; j++) {
                lhs[k][i][j] = 0.01 / (1 + i + j) + 1e-6 * (double)(k % 7);
                c[k][i][j] = 0.5;
            }
    double sum = 0.0;
    for (int s = 0; s < sweeps; s++) {
#pragma omp parallel for schedule(static)
        for (long k = 1; k < cells; k++)
            matmul_sub(lhs[k - 1], c[k - 1], c[k]);
        sum += c[cells - 1][0][0];
    }
    printf("%.6e\n", sum);
    free(lhs);
    free(c);
    return 0;
}
