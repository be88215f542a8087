/* Per-step temporaries: every OpenMP thread allocates a 256 KiB work buffer, fills it and
 * frees it, once per step (as a solver's scratch array allocated inside its time loop).
 * glibc hands each thread's buffer back at the same address, so numaprof keeps one row
 * per run of them (objects.instances) and reports the site with every allocation counted.
 * usage: temporaries [steps per thread]   prints the sum */
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
    int steps = argc > 1 ? atoi(argv[1]) : 2000;
    double total = 0;
#pragma omp parallel reduction(+ : total)
    for (int s = 0; s < steps; s++) {
        double *work = malloc(32768 * sizeof(double));
        if (!work)
            abort();
        for (int j = 0; j < 32768; j++)
            work[j] = s + j;
        total += work[s % 32768];
        free(work);
    }
    printf("%g\n", total);
    return 0;
}
