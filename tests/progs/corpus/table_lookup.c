/* Macroscopic cross-section lookups in the style of a Monte Carlo transport proxy: each
 * nuclide has an energy grid (sorted energies) and, per grid point, NXS cross sections;
 * a lookup draws a random neutron energy and, for every nuclide, binary-searches its
 * energy grid and interpolates its cross sections.
 *
 * The tables hang off an array of `struct grid { long n; double *energy; double *xs; }`
 * and are allocated by a helper, `grid_alloc(g, n)` (`g->energy = malloc(...)`), once
 * per nuclide: 68 energy grids of 88 KiB and 68 cross-section tables of 442 KiB, each
 * set from one allocation site.  Lookups are shared out with schedule(static); their
 * results go to `macro`.
 *
 * Hot arrays and their known answer:
 *   energy  double[npts] per nuclide (g->energy): binary searches at uniformly random
 *           energies, by every thread over every grid                        random
 *   xs      double[npts * NXS] per nuclide (g->xs): read at the search's result random
 * Colder, not asserted: `macro` (double[lookups * NXS], the results, written once per
 * lookup: stores are rarely sampled), `grids` (struct grid[68], 1.6 KiB, read by every
 * lookup, always in cache), `conc` (static).
 * No array is thread-private.
 *
 * numaprof-corpus: run table_lookup
 * numaprof-corpus: array energy pattern=random
 * numaprof-corpus: array xs pattern=random
 *
 * usage: table_lookup [lookups]
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define NNUC 68
#define NPTS 11303
#define NXS 5

struct grid {
    long n;
    double *energy;  /* sorted, energy[0] = 0, energy[n - 1] = 1 */
    double *xs;      /* NXS values per energy point */
};

static double conc[NNUC];  /* number density of each nuclide in the material */

static void grid_alloc(struct grid *g, long n)
{
    g->n = n;
    g->energy = malloc((size_t)n * sizeof *g->energy);
    g->xs = malloc((size_t)n * NXS * sizeof *g->xs);
    if (!g->energy || !g->xs)
        abort();
}

static uint64_t mix(uint64_t x)
{
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

static double uniform(uint64_t key)
{
    return (double)(mix(key) >> 11) * 0x1.0p-53;
}

static int cmp_double(const void *pa, const void *pb)
{
    double a = *(const double *)pa, b = *(const double *)pb;
    return (a > b) - (a < b);
}

/* Index lo with energy[lo] <= e < energy[lo + 1]. */
static long find_energy(const struct grid *g, double e)
{
    long lo = 0, hi = g->n - 1;
    while (hi - lo > 1) {
        long mid = lo + (hi - lo) / 2;
        if (g->energy[mid] > e)
            hi = mid;
        else
            lo = mid;
    }
    return lo;
}

int main(int argc, char **argv)
{
    long lookups = argc > 1 ? atol(argv[1]) : 300000;
    if (lookups < 1) {
        fprintf(stderr, "usage: table_lookup [lookups >= 1]\n");
        return 2;
    }
    struct grid *grids = malloc(NNUC * sizeof *grids);
    if (!grids)
        return 1;
    for (int nuc = 0; nuc < NNUC; nuc++)
        grid_alloc(&grids[nuc], NPTS);

#pragma omp parallel for schedule(dynamic)
    for (int nuc = 0; nuc < NNUC; nuc++) {
        struct grid *g = &grids[nuc];
        for (long k = 0; k < g->n; k++)
            g->energy[k] = uniform((uint64_t)nuc << 32 | (uint64_t)k);
        qsort(g->energy, (size_t)g->n, sizeof *g->energy, cmp_double);
        g->energy[0] = 0.0;
        g->energy[g->n - 1] = 1.0;
        for (long k = 0; k < g->n * NXS; k++)
            g->xs[k] = 1.0 + uniform((uint64_t)(nuc + NNUC) << 32 | (uint64_t)k);
        conc[nuc] = 0.5 + 0.01 * nuc;
    }

    double *macro = malloc((size_t)lookups * NXS * sizeof *macro);
    if (!macro)
        return 1;
#pragma omp parallel for schedule(static)
    for (long l = 0; l < lookups; l++) {
        double e = uniform(0xE0000000ull + (uint64_t)l);
        double m[NXS] = {0};
        for (int nuc = 0; nuc < NNUC; nuc++) {
            const struct grid *g = &grids[nuc];
            long lo = find_energy(g, e);
            double f = (e - g->energy[lo]) / (g->energy[lo + 1] - g->energy[lo]);
            const double *x0 = &g->xs[lo * NXS], *x1 = x0 + NXS;
            for (int c = 0; c < NXS; c++)
                m[c] += conc[nuc] * (x0[c] + f * (x1[c] - x0[c]));
        }
        for (int c = 0; c < NXS; c++)
            macro[l * NXS + c] = m[c];
    }

    double sum = 0.0;
    for (long l = 0; l < lookups; l += 97)
        sum += macro[l * NXS];
    printf("table_lookup: %d nuclides x %d points, %ld lookups, checksum %.6f\n", NNUC, NPTS,
           lookups, sum);
    for (int nuc = 0; nuc < NNUC; nuc++) {
        free(grids[nuc].xs);
        free(grids[nuc].energy);
    }
    free(grids);
    free(macro);
    return 0;
}
