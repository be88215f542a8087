/* A Jacobi relaxation over two file-scope grids used through pointer aliases that swap
 * every sweep (`cur`, `nxt`).  init_grids() fills them serially with a recurrence (one
 * element from the one before: no parallel loop), then every sweep streams each thread's
 * static block.  The placements name the arrays themselves, before their first touch in
 * init_grids(), where `grid_a` and `grid_b` are the file-scope arrays.
 *
 * numaprof-patch: grid_a kind=place_static in=init_grids
 * numaprof-patch: grid_b kind=place_static in=init_grids
 *
 * usage: alias [sweeps]
 */
#include <stdio.h>
#include <stdlib.h>

#define NPTS (1 << 21)

static double grid_a[NPTS];
static double grid_b[NPTS];
static double *cur = grid_a;
static double *nxt = grid_b;

static void init_grids(void)
{
    cur[0] = 1.0;
    nxt[0] = 1.0;
    for (long i = 1; i < NPTS; i++) {
        cur[i] = 0.5 * cur[i - 1] + 1.0 / (double)i;
        nxt[i] = cur[i];
    }
}

static void sweep(void)
{
#pragma omp parallel for schedule(static)
    for (long i = 1; i < NPTS - 1; i++)
        nxt[i] = (cur[i - 1] + cur[i] + cur[i + 1]) / 3.0;
    double *t = cur;
    cur = nxt;
    nxt = t;
}

int main(int argc, char **argv)
{
    int sweeps = argc > 1 ? atoi(argv[1]) : 60;
    init_grids();
    for (int s = 0; s < sweeps; s++)
        sweep();
    printf("checksum %.6f\n", cur[NPTS / 2] + nxt[NPTS / 3]);
    return 0;
}
