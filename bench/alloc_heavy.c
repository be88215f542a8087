/* Allocation-heavy benchmark workload: threads allocate, touch and free blocks of mixed
 * sizes (mostly below the shim's 64 KiB threshold, some above). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv)
{
    long rounds = argc > 1 ? atol(argv[1]) : 2000000;
    double total = 0.0;
#pragma omp parallel reduction(+ : total)
    {
        unsigned x = 12345u;
        void *keep[64] = {0};
#pragma omp for schedule(static)
        for (long i = 0; i < rounds; i++) {
            x = x * 1103515245u + 12345u;
            size_t size = (x >> 8) % 100 == 0 ? 256 * 1024 : 16 + (x >> 16) % 2048;
            int slot = (int)(x >> 20) % 64;
            free(keep[slot]);
            char *p = malloc(size);
            p[0] = (char)i;
            p[size - 1] = 1;
            total += p[0];
            keep[slot] = p;
        }
        for (int s = 0; s < 64; s++)
            free(keep[s]);
    }
    printf("checksum %.0f\n", total);
    return 0;
}
