/* Arrays allocated in one function and first touched in another.  `field` is a
 * file-scope pointer that alloc_field() allocates and init_field() fills with a plain
 * counted loop, which can run in parallel: the patch is the OpenMP directive on that loop
 * in the callee.  `weights` is allocated in main() and filled by fill_weights() through a
 * parameter with a recurrence (not parallel): the placement goes right after the
 * allocation, in main(), where `weights` and `n` are what the allocation used.
 *
 * numaprof-patch: field kind=parallel_first_touch in=init_field
 * numaprof-patch: weights kind=place_after_allocation in=main
 *
 * usage: callee [elements] [iterations]
 */
#include <stdio.h>
#include <stdlib.h>

static double *field;

static int alloc_field(size_t n)
{
    field = malloc(n * sizeof *field);
    return field != NULL;
}

static void init_field(size_t n)
{
    for (size_t i = 0; i < n; i++)
        field[i] = (double)(i % 97) * 0.5;
}

static void fill_weights(double *w, size_t n)
{
    w[0] = 1.0;
    for (size_t i = 1; i < n; i++)
        w[i] = 0.5 * w[i - 1] + 0.25;
}

int main(int argc, char **argv)
{
    size_t n = argc > 1 ? strtoul(argv[1], NULL, 10) : (size_t)1 << 21;
    int iters = argc > 2 ? atoi(argv[2]) : 60;
    if (!alloc_field(n))
        return 1;
    double *weights = malloc(n * sizeof(double));
    if (!weights)
        return 1;
    init_field(n);
    fill_weights(weights, n);
    double total = 0.0;
    for (int it = 0; it < iters; it++) {
#pragma omp parallel for schedule(static) reduction(+ : total)
        for (size_t i = 0; i < n; i++)
            total += field[i] * 1.0001;
#pragma omp parallel for schedule(static) reduction(+ : total)
        for (size_t i = 0; i < n; i++)
            total += weights[i] * 0.9999;
    }
    printf("checksum %.3f\n", total);
    return 0;
}
