/* Page-level sharing: with OMP_SCHEDULE=static,16 two threads update one array in chunks
 * of 16 doubles (128 bytes, two whole lines: the array is aligned to a line), taken in
 * turn: no cache line is written by both, but every 4 KiB page is, so on two nodes one
 * thread's writes to each page are remote whatever the placement.  With
 * OMP_SCHEDULE=static each thread has a block of pages.  `y` is only read.
 *   page_sharing [STEPS]  ->  prints a checksum */
#include <stdio.h>
#include <stdlib.h>

#define N (1 << 21) /* 16 MiB of doubles */

int main(int argc, char **argv)
{
    int steps = argc > 1 ? atoi(argv[1]) : 60;
    double *x = aligned_alloc(64, sizeof(double) * N), *y = malloc(sizeof(double) * N);
    for (long i = 0; i < N; i++) {
        x[i] = (double)(i % 7);
        y[i] = (double)(i % 5);
    }
    for (int s = 0; s < steps; s++) {
#pragma omp parallel for schedule(runtime)
        for (long i = 0; i < N; i++)
            x[i] = 0.5 * x[i] + y[i]; /* the sharing line */
    }
    double sum = 0;
    for (long i = 0; i < N; i += 4096)
        sum += x[i];
    printf("%.3f\n", sum);
    free(x);
    free(y);
    return 0;
}
