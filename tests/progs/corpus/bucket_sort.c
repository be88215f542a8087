/* Binning particles by cell, the counting sort a particle-in-cell or molecular-dynamics
 * code runs every step: each step the particles move (their cell ids are recomputed),
 * and `order` is rebuilt so that the particles of one cell are contiguous.
 *
 * The sort is one OpenMP parallel region.  Each thread counts the cells of its static
 * share of the particles in a histogram `hist` of 2^18 counters -- a 1 MiB local array
 * of the outlined parallel region, so on that thread's stack -- turns the counts into
 * its write offsets (a parallel prefix over cells and threads through the shared
 * `counts`), then scatters the indexes of its particles to `order` with `hist` as its
 * running cursors.  Cell ids are uniform random, so both passes increment `hist` at
 * random places.
 *
 * Hot arrays and their known answer:
 *   hist   unsigned[2^18] on each thread's stack (one instance per thread): counted and
 *          advanced at random cells, every instance all over in every phase  random,
 *          thread-private
 *   cell   uint32_t[n] cell id per particle: written by the move loop, read by both
 *          passes, always the thread's static share                         regular
 *   order  uint32_t[n] the sorted particle indexes: each thread writes its
 *          particles into every cell's slot range, the slots of one cell of
 *          both threads are adjacent, so every page is written by both      random
 *   counts unsigned[threads * 2^18] per-thread counts, written by rows and summed
 *          by cell blocks (small; not asserted)
 *
 * numaprof-corpus: run bucket_sort
 * numaprof-corpus: array hist pattern=random private=yes
 * numaprof-corpus: array cell pattern=regular
 * numaprof-corpus: array order pattern=random
 *
 * usage: bucket_sort [particles] [steps]
 */
#include <omp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CELL_BITS 18
#define NCELLS (1u << CELL_BITS)
#define MAX_THREADS 256

static uint32_t cell_of(uint64_t particle, uint64_t step)
{
    uint64_t h = (particle + 1) * 0x9E3779B97F4A7C15ull ^ (step + 1) * 0xC2B2AE3D27D4EB4Full;
    h ^= h >> 29;
    h *= 0xBF58476D1CE4E5B9ull;
    h ^= h >> 32;
    return (uint32_t)(h >> (64 - CELL_BITS));
}

static void sort_by_cell(size_t n, const uint32_t *cell, uint32_t *order, unsigned *counts)
{
    unsigned block_sum[MAX_THREADS];
#pragma omp parallel
    {
        unsigned hist[NCELLS];
        int t = omp_get_thread_num(), nt = omp_get_num_threads();
        size_t lo = n * (size_t)t / (size_t)nt, hi = n * (size_t)(t + 1) / (size_t)nt;

        memset(hist, 0, sizeof hist);
        for (size_t i = lo; i < hi; i++)
            hist[cell[i]]++;
        memcpy(counts + (size_t)t * NCELLS, hist, sizeof hist);
#pragma omp barrier
        /* exclusive prefix in (cell, thread) order: thread t's slots of cell c start at
         * the particles of all cells < c plus those of cell c of threads < t */
        unsigned c0 = (unsigned)((uint64_t)NCELLS * (unsigned)t / (unsigned)nt);
        unsigned c1 = (unsigned)((uint64_t)NCELLS * (unsigned)(t + 1) / (unsigned)nt);
        unsigned run = 0;
        for (unsigned c = c0; c < c1; c++)
            for (int s = 0; s < nt; s++) {
                unsigned k = counts[(size_t)s * NCELLS + c];
                counts[(size_t)s * NCELLS + c] = run;
                run += k;
            }
        block_sum[t] = run;
#pragma omp barrier
        unsigned base = 0;
        for (int s = 0; s < t; s++)
            base += block_sum[s];
        for (unsigned c = c0; c < c1; c++)
            for (int s = 0; s < nt; s++)
                counts[(size_t)s * NCELLS + c] += base;
#pragma omp barrier
        memcpy(hist, counts + (size_t)t * NCELLS, sizeof hist);
        for (size_t i = lo; i < hi; i++)
            order[hist[cell[i]]++] = (uint32_t)i;
    }
}

int main(int argc, char **argv)
{
    size_t n = argc > 1 ? strtoull(argv[1], NULL, 10) : 16u << 20;
    int steps = argc > 2 ? atoi(argv[2]) : 25;
    if (n < 2 || n > UINT32_MAX || steps < 1 || omp_get_max_threads() > MAX_THREADS) {
        fprintf(stderr, "usage: bucket_sort [particles < 2^32] [steps >= 1]\n");
        return 2;
    }
    uint32_t *cell = malloc(n * sizeof *cell);
    uint32_t *order = malloc(n * sizeof *order);
    unsigned *counts = malloc((size_t)omp_get_max_threads() * NCELLS * sizeof *counts);
    if (!cell || !order || !counts)
        return 1;

    uint64_t check = 0;
    for (int step = 0; step < steps; step++) {
#pragma omp parallel for schedule(static)
        for (size_t i = 0; i < n; i++)
            cell[i] = cell_of(i, (uint64_t)step);
        sort_by_cell(n, cell, order, counts);
        /* spot check: cells along `order` never decrease */
        for (size_t i = 1; i < n; i += n / 1024 + 1)
            if (cell[order[i - 1]] > cell[order[i]]) {
                fprintf(stderr, "bucket_sort: not sorted at %zu\n", i);
                return 1;
            }
        check += order[n / 2];
    }
    printf("bucket_sort: %zu particles, %d steps, check %llu\n", n, steps,
           (unsigned long long)check);
    free(counts);
    free(order);
    free(cell);
    return 0;
}
