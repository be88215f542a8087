/* CSR sparse matrix-vector product on static arrays, y = A x, repeated.
 * Known answer: values and colidx regular (each thread streams its rows' nonzeros),
 * x random (gathered through colidx), y regular and written, rowptr regular.
 * usage: spmv [iterations]
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define NROWS (1 << 20)
#define NNZ_PER_ROW 8
#define NNZ (NROWS * NNZ_PER_ROW)

static double values[NNZ];
static uint32_t colidx[NNZ];
static uint32_t rowptr[NROWS + 1];
static double x[NROWS];
static double y[NROWS];

int main(int argc, char **argv)
{
    int iters = argc > 1 ? atoi(argv[1]) : 40;

#pragma omp parallel for schedule(static)
    for (uint32_t r = 0; r < NROWS; r++) {
        rowptr[r] = r * NNZ_PER_ROW;
        x[r] = 1.0 + (r & 7);
        y[r] = 0.0;
        for (uint32_t k = 0; k < NNZ_PER_ROW; k++) {
            uint64_t h = ((uint64_t)r * NNZ_PER_ROW + k + 1) * 0x9E3779B97F4A7C15ull;
            h ^= h >> 31;
            colidx[r * NNZ_PER_ROW + k] = (uint32_t)(h % NROWS);
            values[r * NNZ_PER_ROW + k] = 0.5;
        }
    }
    rowptr[NROWS] = NNZ;

    for (int it = 0; it < iters; it++) {
#pragma omp parallel for schedule(static)
        for (uint32_t r = 0; r < NROWS; r++) {
            double s = 0.0;
            for (uint32_t k = rowptr[r]; k < rowptr[r + 1]; k++)
                s += values[k] * x[colidx[k]];
            y[r] = s;
        }
    }
    double sum = 0.0;
    for (uint32_t r = 0; r < NROWS; r += 1024)
        sum += y[r];
    printf("checksum %.1f\n", sum);
    return 0;
}
