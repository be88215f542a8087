/* A residual sweep in the style of solvers that make one allocation for all their vectors
 * and carve them out of it (LAPACK-style `work` arrays, a solver context's workspace):
 * `ws_init` mallocs one block and points the context's members into it,
 *
 *     w->b = w->work;  w->r = w->b + n;  w->t = w->r + n;  w->col = (int *)(w->t + n);
 *
 * so the four arrays are one 56 MiB allocation with one call stack.  Each step computes a
 * residual against a table read through an index array (a gather), then its norm; both
 * loops are `omp parallel for schedule(static)` in kernels that take the arrays as
 * parameters, as library-style code does.
 *
 * Hot arrays and their known answer:
 *   t    double[n], read at col[i]: random positions, every thread all over  random
 *   col  int[n], read in order by each thread's slab                         regular
 *   b    double[n], read in order                                            regular
 *   r    double[n], written by the residual, read by the norm                regular
 * First touch: ws_init fills every array on the master thread (serial).  No array is
 * thread-private.
 *
 * numaprof-corpus: run workspace
 * numaprof-corpus: array t pattern=random
 * numaprof-corpus: array col pattern=regular
 * numaprof-corpus: array b pattern=regular
 * numaprof-corpus: array r pattern=regular
 *
 * usage: workspace [n] [steps]
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

struct ws {
    size_t n;
    double *work;  /* the one allocation */
    double *b, *r, *t;
    int *col;
};

static void ws_init(struct ws *w, size_t n)
{
    w->n = n;
    w->work = malloc(n * (3 * sizeof(double) + sizeof(int)));
    if (!w->work)
        abort();
    w->b = w->work;
    w->r = w->b + n;
    w->t = w->r + n;
    w->col = (int *)(w->t + n);
    uint64_t h = 0x9e3779b97f4a7c15ull;
    for (size_t i = 0; i < n; i++) {
        h ^= h << 13;
        h ^= h >> 7;
        h ^= h << 17;
        w->b[i] = 1.0 + (double)(i % 7);
        w->r[i] = 0.0;
        w->t[i] = (double)(h % 1000) * 1e-3;
        w->col[i] = (int)(h % n);
    }
}

static void residual(size_t n, const double *restrict b, const double *restrict t,
                     const int *restrict col, double *restrict r)
{
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++)
        r[i] = b[i] - t[col[i]];
}

static double norm(size_t n, const double *restrict r)
{
    double s = 0.0;
#pragma omp parallel for schedule(static) reduction(+ : s)
    for (size_t i = 0; i < n; i++)
        s += r[i] * r[i];
    return sqrt(s);
}

int main(int argc, char **argv)
{
    size_t n = argc > 1 ? strtoul(argv[1], NULL, 10) : 2000000;
    int steps = argc > 2 ? atoi(argv[2]) : 180;
    if (n < 1000 || n > (size_t)1 << 28 || steps < 1)
        return 2;
    struct ws w;
    ws_init(&w, n);
    double acc = 0.0;
    for (int s = 0; s < steps; s++) {
        residual(w.n, w.b, w.t, w.col, w.r);
        acc += norm(w.n, w.r);
        w.t[s % n] += 1e-9;  /* the table changes a little every step */
    }
    printf("%.6e\n", acc);
    free(w.work);
    return 0;
}
