/* Static arrays reached through parameters of the same name: the function that fills
 * them sees `int keys[]` and `unsigned *perm`, where sizeof gives a pointer's 8 bytes.
 * Both are filled serially (a xorshift sequence: the fill loop cannot run in parallel)
 * and then streamed by every thread's static block, so a 2-node target wants each block
 * on its thread's node: bind_block, through a placement that names the file-scope array
 * where it is in scope (the start of main), never inside fill_keys / fill_perm.
 *
 * numaprof-patch: keys kind=place_static in=main
 * numaprof-patch: perm kind=place_static in=main
 *
 * usage: static_params [iterations]
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define NKEYS (1 << 22)

static int keys[NKEYS];
static unsigned perm[NKEYS];

static void fill_keys(int keys[], int n)
{
    uint64_t x = 88172645463325252ull;
    for (int i = 0; i < n; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        keys[i] = (int)(x & 0xffff);
    }
}

static void fill_perm(unsigned *perm, int n)
{
    unsigned v = 12345u;
    for (int i = 0; i < n; i++) {
        v = v * 1103515245u + 12345u;
        perm[i] = v >> 8;
    }
}

static long sweep(const int *k, const unsigned *p, int n)
{
    long s = 0;
#pragma omp parallel for schedule(static) reduction(+ : s)
    for (int i = 0; i < n; i++)
        s += (long)k[i] % 13;
#pragma omp parallel for schedule(static) reduction(+ : s)
    for (int i = 0; i < n; i++)
        s += (long)(p[i] % 7u);
    return s;
}

int main(int argc, char **argv)
{
    int iters = argc > 1 ? atoi(argv[1]) : 60;
    long total = 0;
    fill_keys(keys, NKEYS);
    fill_perm(perm, NKEYS);
    for (int it = 0; it < iters; it++)
        total += sweep(keys, perm, NKEYS);
    printf("checksum %ld\n", total);
    return 0;
}
