/* Master-thread initialisation (the 3DFD bug of Gogar, docs/references.md): one thread
 * first-touches every page of a, b and c, then all threads stream over them with a
 * static schedule.  On a multi-node machine every page lands on the master's node.
 * Known answer: a, b, c regular; a written, b and c read; first touch by one thread
 * (master_fraction >= 0.9); suggestion on a 2-socket target: parallel_init / bind_block.
 * usage: serial_init [MiB per array] [iterations]
 */
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
    size_t mib = argc > 1 ? strtoul(argv[1], NULL, 10) : 64;
    int iters = argc > 2 ? atoi(argv[2]) : 300;
    size_t n = mib * 1024 * 1024 / sizeof(double);

    double *a = malloc(n * sizeof(double));
    double *b = malloc(n * sizeof(double));
    double *c = malloc(n * sizeof(double));
    if (!a || !b || !c)
        return 1;

    for (size_t j = 0; j < n; j++) {
        a[j] = 0.0;
        b[j] = 1.0 + (double)(j % 7);
        c[j] = 2.0;
    }

    for (int it = 0; it < iters; it++) {
#pragma omp parallel for schedule(static)
        for (size_t j = 0; j < n; j++)
            a[j] = b[j] + c[j] * (double)it;
    }

    double sum = 0.0;
    for (size_t j = 0; j < n; j += 4096)
        sum += a[j];
    printf("checksum %.1f\n", sum);
    free(a);
    free(b);
    free(c);
    return 0;
}
