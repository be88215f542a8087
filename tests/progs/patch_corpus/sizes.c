/* Sizes from macros and from a variable.  `mat` is a file-scope float[ROWS][COLS] whose
 * dimensions are macros of macros; `vec` is malloc'd with a macro length, `dyn` with a
 * length read at run time.  Each is filled serially by a recurrence (no parallel loop
 * possible) and then streamed and updated by every thread's static block (updated, so
 * that no copy per node, replicate, can serve it): bind_block, with the
 * placement's byte count equal to what the profile recorded (evaluated from the macros
 * for mat and vec, the allocation's own expression for dyn).
 *
 * numaprof-patch: mat kind=place_static bytes=16777216
 * numaprof-patch: vec kind=place_after_allocation bytes=16777216
 * numaprof-patch: dyn kind=place_after_allocation bytes=run-time
 *
 * usage: sizes [elements of dyn] [iterations]
 */
#include <stdio.h>
#include <stdlib.h>

#define ROWS 1024
#define COLS (ROWS * 4)
#define NVEC (ROWS * COLS / 2)

static float mat[ROWS][COLS];

int main(int argc, char **argv)
{
    size_t n = argc > 1 ? strtoul(argv[1], NULL, 10) : (size_t)1 << 21;
    int iters = argc > 2 ? atoi(argv[2]) : 40;
    double *vec = malloc(NVEC * sizeof *vec);
    double *dyn = malloc(n * sizeof(double));
    if (!vec || !dyn)
        return 1;
    mat[0][0] = 1.0f;
    for (long r = 0; r < ROWS; r++)
        for (long c = (r == 0); c < COLS; c++)
            mat[r][c] = 0.5f * (c ? mat[r][c - 1] : mat[r - 1][COLS - 1]) + 1.0f;
    vec[0] = 1.0;
    for (long i = 1; i < NVEC; i++)
        vec[i] = 0.25 * vec[i - 1] + 1.0;
    dyn[0] = 2.0;
    for (size_t i = 1; i < n; i++)
        dyn[i] = 0.75 * dyn[i - 1] + 0.5;
    double total = 0.0;
    for (int it = 0; it < iters; it++) {
#pragma omp parallel for schedule(static) reduction(+ : total)
        for (long r = 0; r < ROWS; r++)
            for (long c = 0; c < COLS; c++) {
                mat[r][c] = mat[r][c] * 0.9999f + 1e-6f;
                total += mat[r][c];
            }
#pragma omp parallel for schedule(static) reduction(+ : total)
        for (long i = 0; i < NVEC; i++) {
            vec[i] = vec[i] * 1.0001 - 1e-6;
            total += vec[i];
        }
#pragma omp parallel for schedule(static) reduction(+ : total)
        for (size_t i = 0; i < n; i++) {
            dyn[i] = dyn[i] * 0.9999 + 1e-6;
            total += dyn[i];
        }
    }
    printf("checksum %.3f\n", total);
    return 0;
}
