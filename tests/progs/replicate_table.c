/* A read-only lookup table every thread reads: the replicate tests (tests/e2e,
 * tests/lab).
 *
 *   replicate_table ENTRIES LOOKUPS
 *
 * The main thread fills `table` (ENTRIES doubles on the heap) in a serial loop; then every
 * OpenMP thread makes its share of LOOKUPS reads at pseudo-random entries, summed in a
 * reduction; the sum is printed (the same on every run and thread count: the entries and
 * the lookups are fixed).
 */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
    long n = argc > 1 ? atol(argv[1]) : 1 << 20;
    long lookups = argc > 2 ? atol(argv[2]) : 20000000;
    double *table = malloc(n * sizeof *table);
    if (!table)
        return 2;
    for (long i = 0; i < n; i++)
        table[i] = (double)(i % 1000) * 0.5;
    double total = 0;
#pragma omp parallel for schedule(static) reduction(+:total)
    for (long k = 0; k < lookups; k++) {
        unsigned long x = (unsigned long)k * 0x9e3779b97f4a7c15UL;
        x ^= x >> 29;
        total += table[x % (unsigned long)n];
    }
    printf("%.1f\n", total);
    free(table);
    return 0;
}
