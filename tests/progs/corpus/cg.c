/* Conjugate gradients on the 7-point Laplacian of an n x n x n grid (Dirichlet
 * boundary), the matrix in CSR, written the way a small mini-app does it: the matrix and
 * the five vectors are malloc'ed in main, every kernel (SpMV, dot products, the vector
 * updates) is an `omp parallel for schedule(static)` over rows.
 *
 * The first argument chooses how the data is initialised: `serial` assembles the matrix
 * and fills the vectors in loops that run on the master thread only (the OpenMP `if`
 * clause is false), so one thread first-touches every page; `parallel` runs the same
 * loops with the solver's static schedule, so each thread places the rows it will use.
 *
 * Hot arrays and their known answer (every one is partitioned by rows under the static
 * schedule in every phase, so each thread works on the same part in every phase):
 *   val     double[nnz]  matrix values, streamed by the SpMV          regular, read
 *   col     int[nnz]     column indexes, streamed by the SpMV        regular, read
 *   rowptr  int[n^3+1]   row starts                                   regular, read
 *   p       double[n^3]  search direction, gathered by the SpMV through col; the
 *                        7-point neighbours of a row are within +-n^2 rows, so each
 *                        thread reads its own rows and a thin halo    regular
 *   q       double[n^3]  q = A p                                      regular, written
 *   r       double[n^3]  residual                                     regular
 *   x       double[n^3]  solution                                     regular
 * First touch: every array by one thread in the `serial` run, by both threads in the
 * `parallel` run.  No array is thread-private.
 *
 * numaprof-corpus: run cg-serial args=serial first_touch=serial
 * numaprof-corpus: run cg-parallel args=parallel first_touch=parallel
 * numaprof-corpus: array val pattern=regular
 * numaprof-corpus: array col pattern=regular
 * numaprof-corpus: array rowptr pattern=regular
 * numaprof-corpus: array p pattern=regular
 * numaprof-corpus: array q pattern=regular
 * numaprof-corpus: array r pattern=regular
 * numaprof-corpus: array x pattern=regular
 *
 * usage: cg serial|parallel [n] [iterations]
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void spmv(int nrows, const int *rowptr, const int *col, const double *val,
                 const double *v, double *out)
{
#pragma omp parallel for schedule(static)
    for (int i = 0; i < nrows; i++) {
        double s = 0.0;
        for (int k = rowptr[i]; k < rowptr[i + 1]; k++)
            s += val[k] * v[col[k]];
        out[i] = s;
    }
}

static double dot(int n, const double *a, const double *b)
{
    double s = 0.0;
#pragma omp parallel for schedule(static) reduction(+ : s)
    for (int i = 0; i < n; i++)
        s += a[i] * b[i];
    return s;
}

/* Number of nonzeros of the row of grid point (i, j, k). */
static int row_length(int i, int j, int k, int n)
{
    return 1 + (i > 0) + (i < n - 1) + (j > 0) + (j < n - 1) + (k > 0) + (k < n - 1);
}

int main(int argc, char **argv)
{
    if (argc < 2 || (strcmp(argv[1], "serial") && strcmp(argv[1], "parallel"))) {
        fprintf(stderr, "usage: cg serial|parallel [n] [iterations]\n");
        return 2;
    }
    int par = !strcmp(argv[1], "parallel");
    int n = argc > 2 ? atoi(argv[2]) : 96;
    int iters = argc > 3 ? atoi(argv[3]) : 300;
    if (n < 3 || iters < 1) {
        fprintf(stderr, "cg: n must be at least 3 and iterations at least 1\n");
        return 2;
    }
    int nrows = n * n * n;

    int *rowptr = malloc(((size_t)nrows + 1) * sizeof *rowptr);
    if (!rowptr)
        return 1;
#pragma omp parallel for schedule(static) if (par)
    for (int row = 0; row < nrows; row++)
        rowptr[row + 1] = row_length(row / (n * n), row / n % n, row % n, n);
    rowptr[0] = 0;
    for (int row = 0; row < nrows; row++)
        rowptr[row + 1] += rowptr[row];
    int nnz = rowptr[nrows];

    int *col = malloc((size_t)nnz * sizeof *col);
    double *val = malloc((size_t)nnz * sizeof *val);
    if (!col || !val)
        return 1;
#pragma omp parallel for schedule(static) if (par)
    for (int row = 0; row < nrows; row++) {
        int i = row / (n * n), j = row / n % n, k = row % n;
        int at = rowptr[row];
        /* columns in increasing order, as an assembly loop over the stencil gives them */
        if (i > 0) { col[at] = row - n * n; val[at++] = -1.0; }
        if (j > 0) { col[at] = row - n; val[at++] = -1.0; }
        if (k > 0) { col[at] = row - 1; val[at++] = -1.0; }
        col[at] = row; val[at++] = 6.0;
        if (k < n - 1) { col[at] = row + 1; val[at++] = -1.0; }
        if (j < n - 1) { col[at] = row + n; val[at++] = -1.0; }
        if (i < n - 1) { col[at] = row + n * n; val[at++] = -1.0; }
    }

    double *x = malloc((size_t)nrows * sizeof *x);
    double *b = malloc((size_t)nrows * sizeof *b);
    double *r = malloc((size_t)nrows * sizeof *r);
    double *p = malloc((size_t)nrows * sizeof *p);
    double *q = malloc((size_t)nrows * sizeof *q);
    if (!x || !b || !r || !p || !q)
        return 1;
    /* x0 = 0, so r0 = p0 = b */
#pragma omp parallel for schedule(static) if (par)
    for (int row = 0; row < nrows; row++) {
        x[row] = 0.0;
        b[row] = 1.0 + 0.001 * (row % 17);
        r[row] = b[row];
        p[row] = b[row];
        q[row] = 0.0;
    }

    double rr = dot(nrows, r, r);
    double rr0 = rr;
    int it;
    for (it = 0; it < iters && rr > 1e-30 * rr0; it++) {
        spmv(nrows, rowptr, col, val, p, q);
        double alpha = rr / dot(nrows, p, q);
#pragma omp parallel for schedule(static)
        for (int row = 0; row < nrows; row++) {
            x[row] += alpha * p[row];
            r[row] -= alpha * q[row];
        }
        double rr_new = dot(nrows, r, r);
        double beta = rr_new / rr;
        rr = rr_new;
#pragma omp parallel for schedule(static)
        for (int row = 0; row < nrows; row++)
            p[row] = r[row] + beta * p[row];
    }
    printf("cg %s: n=%d nnz=%d iterations=%d relative residual %.3e x[mid]=%.6f\n",
           argv[1], n, nnz, it, sqrt(rr / rr0), x[nrows / 2]);
    free(q);
    free(p);
    free(r);
    free(b);
    free(x);
    free(val);
    free(col);
    free(rowptr);
    return 0;
}
