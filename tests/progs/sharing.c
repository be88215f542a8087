/* Sharing between threads, for tests/e2e/test_sharing.py.
 *
 *   sharing MODE ITERS      MODE: false | true | padded
 *
 * Each of 2 OpenMP threads sums a private array ITERS times into an accumulator:
 *   false:  slot[t], neighbouring doubles of one shared array (false sharing);
 *   true:   one shared counter updated atomically (true sharing);
 *   padded: slot[t] in a 64-byte aligned struct of its own (no sharing).
 */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>

#define N 4096

struct padded { double v; } __attribute__((aligned(64)));

/* Globals, and a call the compiler cannot see through in the loop: every update is a
 * store to memory, as in a real code whose loop body calls out. */
double slot[8];
struct padded pad[8];
double counter;

__attribute__((noinline)) double term(double x)
{
    __asm__ volatile("" : : : "memory");
    return x * 0.5;
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "false";
    long iters = argc > 2 ? atol(argv[2]) : 2000;
    double *data = malloc(2 * N * sizeof(double));
    for (long i = 0; i < 2 * N; i++)
        data[i] = (double)(i % 13);
#pragma omp parallel num_threads(2)
    {
        int t = omp_get_thread_num();
        const double *mine = data + (size_t)t * N;
        for (long it = 0; it < iters; it++)
            for (long i = 0; i < N; i++) {
                if (mode[0] == 'f')
                    slot[t] += term(mine[i]);
                else if (mode[0] == 't') {
#pragma omp atomic
                    counter += term(mine[i]);
                } else
                    pad[t].v += term(mine[i]);
            }
    }
    printf("%g\n", slot[0] + slot[1] + counter + pad[0].v + pad[1].v);
    free(data);
    return 0;
}
