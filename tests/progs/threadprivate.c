/* Thread-private storage the OpenMP way: a file-scope work array made threadprivate and a
 * C11 _Thread_local histogram (static thread-local storage, accessed %fs-relative), each
 * thread updating its own copy at random; a shared input array read in order.
 *
 * usage: threadprivate [elements] [repetitions] */
#include <stdio.h>
#include <stdlib.h>

#define NW 200000
static double work[NW];
#pragma omp threadprivate(work)
static _Thread_local long hist[1 << 18];

/* splitmix64's finalizer: indices with no stride for a sampler to find */
static unsigned long mix(unsigned long x)
{
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ul;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebul;
    return x ^ (x >> 31);
}

int main(int argc, char **argv)
{
    long n = argc > 1 ? atol(argv[1]) : 4000000;
    int reps = argc > 2 ? atoi(argv[2]) : 10;
    double *in = malloc((size_t)n * sizeof *in);
    if (!in)
        return 1;
    for (long i = 0; i < n; i++)
        in[i] = (double)(mix((unsigned long)i) % 1000003);
    double total = 0;
    for (int r = 0; r < reps; r++) {
#pragma omp parallel reduction(+ : total)
        {
#pragma omp for
            for (long i = 0; i < n; i++) {
                long k = (long)in[i] % NW;
                work[k] += in[i];
                hist[(unsigned long)(in[i] * 7) & ((1 << 18) - 1)]++;
            }
            for (long k = 0; k < NW; k += 64)
                total += work[k];
            total += (double)hist[r];
        }
    }
    printf("%f\n", total);
    free(in);
    return 0;
}
