/* Per-thread scratch buffers, the way solvers write them: every step, each OpenMP thread
 * allocates its own histogram inside the parallel region, fills it from its share of
 * the input at random bins, and adds it into the shared result.  One allocation line,
 * one buffer per thread per step: a thread-private heap array (tests/e2e/test_private_heap.py).
 *
 *   private_buffers [steps]
 */
#include <stdio.h>
#include <stdlib.h>

#define BINS (1 << 18)
#define N (1 << 21)

int main(int argc, char **argv)
{
    int steps = argc > 1 ? atoi(argv[1]) : 30;
    unsigned *in = malloc(N * sizeof *in);
    double *result = calloc(BINS, sizeof *result);
    for (long i = 0; i < N; i++)
        in[i] = (unsigned)(i * 2654435761u);
    for (int s = 0; s < steps; s++) {
#pragma omp parallel
        {
            double *hist = calloc(BINS, sizeof *hist);
#pragma omp for schedule(static)
            for (long i = 0; i < N; i++)
                hist[(in[i] >> 7) % BINS] += 1.0;
#pragma omp critical
            for (long b = 0; b < BINS; b++)
                result[b] += hist[b];
            free(hist);
        }
    }
    double t = 0;
    for (long b = 0; b < BINS; b++)
        t += result[b];
    printf("%.0f\n", t);
    free(in);
    free(result);
    return 0;
}
