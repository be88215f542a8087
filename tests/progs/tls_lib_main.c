/* Calls tls_lib.c's solver from an OpenMP loop; prints each thread's copy of the
 * library's thread-local scratch array ("scratch <address>") and a checksum.
 *
 * usage: tls_lib_main [elements] [repetitions] */
#include <stdio.h>
#include <stdlib.h>

double *lib_scratch(void);
double lib_work(const double *in, long n);

int main(int argc, char **argv)
{
    long n = argc > 1 ? atol(argv[1]) : 4000000;
    int reps = argc > 2 ? atoi(argv[2]) : 10;
    double *in = malloc((size_t)n * sizeof *in);
    if (!in)
        return 1;
    for (long i = 0; i < n; i++)
        in[i] = (double)((i * 11400714819323198485ull) >> 40) / 1e6;
    double t = 0;
#pragma omp parallel
#pragma omp critical
    printf("scratch %p\n", (void *)lib_scratch());
    for (int r = 0; r < reps; r++) {
#pragma omp parallel for reduction(+ : t) schedule(static)
        for (long b = 0; b < n; b += 10000)
            t += lib_work(in + b, n - b < 10000 ? n - b : 10000);
    }
    printf("%f\n", t);
    free(in);
    return 0;
}
