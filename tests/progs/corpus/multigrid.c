/* Implicit heat equation on an n x n x n grid, one multigrid solve per time step, in
 * the style of older C codes: every grid is a `double ***` built one row at a time
 * (`g[i][j] = calloc(n, sizeof(double))`, n doubles = 1 KiB a row at n = 128, far
 * below any large-allocation threshold), so a 16 MiB grid is 16 513 small blocks from
 * the general heap (its two levels of row pointers are small blocks too).
 *
 * Each time step allocates a temporary grid `uold` (the solution at the start of the
 * step, again row by row) and frees it at the end; then it solves
 * (1/dt - Laplacian) u = uold/dt + source with V-cycles of red-black Gauss-Seidel.
 * Every loop over a grid is an `omp parallel for schedule(static)` over its first index
 * i, so each thread works on the same slab of planes of every grid in every phase
 * (restriction and prolongation map fine planes 2i, 2i+1 to coarse plane i, the same
 * slab).  The grids of the coarser levels are allocated by the same lines; the finest
 * level has 7/8 of the points.
 *
 * Hot arrays and their known answer:
 *   u     level solution (`lv->u = grid_alloc(n)`): smoothed in place     regular
 *   f     level right-hand side                                            regular
 *   r     level residual, written by the residual, read by the restriction regular
 *   uold  per-step temporary copy of the finest u, allocated and freed in every
 *         step: one logical array with one instance per step             regular
 * First touch: calloc zeroes the rows on the master thread (serial).  No array is
 * thread-private.
 *
 * numaprof-corpus: run multigrid
 * numaprof-corpus: array u pattern=regular
 * numaprof-corpus: array f pattern=regular
 * numaprof-corpus: array r pattern=regular
 * numaprof-corpus: array uold pattern=regular
 *
 * usage: multigrid [n] [steps]   (n a power of two, at least 16)
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#define MAX_LEVELS 8

struct level {
    int n;         /* points per dimension, boundary included */
    double h2;     /* grid spacing squared */
    double shift;  /* h^2 / dt: the implicit term in units of the stencil */
    double ***u, ***f, ***r;
};

static double ***grid_alloc(int n)
{
    double ***g = malloc((size_t)n * sizeof *g);
    if (!g)
        abort();
    for (int i = 0; i < n; i++) {
        g[i] = malloc((size_t)n * sizeof *g[i]);
        if (!g[i])
            abort();
        for (int j = 0; j < n; j++) {
            g[i][j] = calloc((size_t)n, sizeof *g[i][j]);
            if (!g[i][j])
                abort();
        }
    }
    return g;
}

static void grid_free(double ***g, int n)
{
    for (int i = 0; i < n; i++) {
        for (int j = 0; j < n; j++)
            free(g[i][j]);
        free(g[i]);
    }
    free(g);
}

/* One colour of red-black Gauss-Seidel on (shift + 6) u - sum(neighbours) = h^2 f. */
static void smooth(const struct level *lv, int colour)
{
    int n = lv->n;
    double ***u = lv->u, ***f = lv->f;
    double diag = 6.0 + lv->shift, h2 = lv->h2;
#pragma omp parallel for schedule(static)
    for (int i = 1; i < n - 1; i++)
        for (int j = 1; j < n - 1; j++) {
            double *c = u[i][j];
            const double *w = u[i - 1][j], *e = u[i + 1][j], *s = u[i][j - 1], *nn = u[i][j + 1];
            const double *rhs = f[i][j];
            for (int k = 1 + ((i + j + colour) & 1); k < n - 1; k += 2)
                c[k] = (w[k] + e[k] + s[k] + nn[k] + c[k - 1] + c[k + 1] + h2 * rhs[k]) / diag;
        }
}

static void residual(const struct level *lv)
{
    int n = lv->n;
    double ***u = lv->u, ***f = lv->f, ***r = lv->r;
    double diag = 6.0 + lv->shift, inv_h2 = 1.0 / lv->h2;
#pragma omp parallel for schedule(static)
    for (int i = 1; i < n - 1; i++)
        for (int j = 1; j < n - 1; j++) {
            const double *c = u[i][j];
            const double *w = u[i - 1][j], *e = u[i + 1][j], *s = u[i][j - 1], *nn = u[i][j + 1];
            for (int k = 1; k < n - 1; k++)
                r[i][j][k] = f[i][j][k] -
                             (diag * c[k] - w[k] - e[k] - s[k] - nn[k] - c[k - 1] - c[k + 1]) * inv_h2;
        }
}

/* Coarse f = average of the fine residual over the 2x2x2 children; coarse u = 0. */
static void restrict_residual(const struct level *fine, const struct level *coarse)
{
    int nc = coarse->n;
    double ***r = fine->r;
#pragma omp parallel for schedule(static)
    for (int i = 0; i < nc; i++)
        for (int j = 0; j < nc; j++)
            for (int k = 0; k < nc; k++) {
                double s = 0.0;
                for (int a = 0; a < 2; a++)
                    for (int b = 0; b < 2; b++)
                        s += r[2 * i + a][2 * j + b][2 * k] + r[2 * i + a][2 * j + b][2 * k + 1];
                int inside = i > 0 && j > 0 && k > 0 && i < nc - 1 && j < nc - 1 && k < nc - 1;
                coarse->f[i][j][k] = inside ? 0.125 * s : 0.0;
                coarse->u[i][j][k] = 0.0;
            }
}

/* Fine u += the coarse correction of the parent point. */
static void prolong(const struct level *coarse, const struct level *fine)
{
    int n = fine->n;
    double ***uc = coarse->u;
#pragma omp parallel for schedule(static)
    for (int i = 1; i < n - 1; i++)
        for (int j = 1; j < n - 1; j++) {
            double *c = fine->u[i][j];
            const double *p = uc[i / 2][j / 2];
            for (int k = 1; k < n - 1; k++)
                c[k] += p[k / 2];
        }
}

static void vcycle(struct level *lv, int l, int nlev)
{
    for (int s = 0; s < 2; s++) {
        smooth(&lv[l], 0);
        smooth(&lv[l], 1);
    }
    if (l + 1 < nlev) {
        residual(&lv[l]);
        restrict_residual(&lv[l], &lv[l + 1]);
        vcycle(lv, l + 1, nlev);
        prolong(&lv[l + 1], &lv[l]);
    }
    for (int s = 0; s < 2; s++) {
        smooth(&lv[l], 0);
        smooth(&lv[l], 1);
    }
}

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 128;
    int steps = argc > 2 ? atoi(argv[2]) : 36;
    if (n < 16 || (n & (n - 1)) || steps < 1) {
        fprintf(stderr, "usage: multigrid [n: a power of two >= 16] [steps >= 1]\n");
        return 2;
    }
    double dt = 1e-3;
    struct level levels[MAX_LEVELS];
    int nlev = 0;
    for (int m = n; m >= 8 && nlev < MAX_LEVELS; m /= 2) {
        struct level *lv = &levels[nlev++];
        double h = 1.0 / (m - 1);
        lv->n = m;
        lv->h2 = h * h;
        lv->shift = h * h / dt;
        lv->u = grid_alloc(m);
        lv->f = grid_alloc(m);
        lv->r = grid_alloc(m);
    }

    struct level *top = &levels[0];
    double change = 0.0;
    for (int step = 0; step < steps; step++) {
        double ***uold = grid_alloc(n);
        /* a heat source in the middle of the box, switched on at step 0 */
#pragma omp parallel for schedule(static)
        for (int i = 0; i < n; i++)
            for (int j = 0; j < n; j++)
                for (int k = 0; k < n; k++) {
                    uold[i][j][k] = top->u[i][j][k];
                    double x = (double)i / n - 0.5, y = (double)j / n - 0.5, z = (double)k / n - 0.5;
                    double source = x * x + y * y + z * z < 0.01 ? 100.0 : 0.0;
                    top->f[i][j][k] = uold[i][j][k] / dt + source;
                }
        vcycle(levels, 0, nlev);
        vcycle(levels, 0, nlev);
        change = 0.0;
#pragma omp parallel for schedule(static) reduction(max : change)
        for (int i = 0; i < n; i++)
            for (int j = 0; j < n; j++)
                for (int k = 0; k < n; k++)
                    change = fmax(change, fabs(top->u[i][j][k] - uold[i][j][k]));
        grid_free(uold, n);
    }
    printf("multigrid: n=%d levels=%d steps=%d last change %.6e centre %.6f\n", n, nlev, steps,
           change, top->u[n / 2][n / 2][n / 2]);
    for (int l = 0; l < nlev; l++) {
        grid_free(levels[l].u, levels[l].n);
        grid_free(levels[l].f, levels[l].n);
        grid_free(levels[l].r, levels[l].n);
    }
    return 0;
}
