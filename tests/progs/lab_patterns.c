/* Figure 15 kernels, one array each, in one process: for the lab classifier test
 * (tests/lab/test_lab_classifier.py), where every `numaprof record` in a TCG guest costs
 * tens of seconds of Python, so one recording holds every kind.
 *
 *   lab_patterns [MiB per array] [iterations]
 *
 * Known labels by construction (OpenMP static schedule, 2+ threads):
 *   reg  regular   read   every loop walks upwards: each thread keeps its block
 *   irr  irregular write  one loop walks downwards, the next upwards: the thread <-> block
 *                         mapping flips (examples/patterns.c, irregular)
 *   rnd  random    read   a pointer chase, k = rnd[k], through one random cycle over
 *                         the whole array (Sattolo's shuffle): every thread everywhere
 *
 * Each loop touches one array only and its first instruction is that array's access: a
 * TCG guest takes a timer interrupt only between translated blocks, so its samples land
 * on the first instruction of a loop, and this way every array is observable there too
 * (a hashed index would put the hash, a loaded index its index array, first).
 */
#include <omp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

static size_t n;

/* this thread's static block [lo, hi) */
static void block(size_t *lo, size_t *hi)
{
    size_t t = (size_t)omp_get_thread_num(), k = (size_t)omp_get_num_threads();
    *lo = n * t / k;
    *hi = n * (t + 1) / k;
}

int main(int argc, char **argv)
{
    size_t mib = argc > 1 ? strtoul(argv[1], NULL, 10) : 8;
    int iters = argc > 2 ? atoi(argv[2]) : 10;
    n = mib * 1024 * 1024 / sizeof(double);
    double *reg = malloc(n * sizeof(double));
    double *irr = malloc(n * sizeof(double));
    uint64_t *rnd = malloc(n * sizeof(uint64_t));
    if (!reg || !irr || !rnd)
        return 1;
    double sum = 0.0;
    uint64_t end = 0;
#pragma omp parallel reduction(+ : sum) reduction(^ : end)
    {
        size_t lo, hi;
        block(&lo, &hi);
        for (size_t j = lo; j < hi; j++) { /* parallel first touch, each thread its block */
            reg[j] = irr[j] = 1.0;
            rnd[j] = j;
        }
#pragma omp barrier
#pragma omp single
        { /* Sattolo: rnd becomes one cycle through every element (xorshift64, fixed seed) */
            uint64_t x = 88172645463325252ull;
            for (size_t i = n - 1; i > 0; i--) {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                size_t j = (size_t)(x % i), t = rnd[i];
                rnd[i] = rnd[j];
                rnd[j] = t;
            }
        } /* implicit barrier */
        for (int it = 0; it < iters; it++) {
            for (size_t j = lo; j < hi; j++) /* reg: regular read */
                sum += reg[j];
#pragma omp barrier
            for (size_t i = lo; i < hi; i++) /* irr: downwards, block of the mirror thread */
                irr[n - 1 - i] = 3.0;
#pragma omp barrier
            for (size_t j = lo; j < hi; j++) /* irr: upwards */
                irr[j] = 4.0;
#pragma omp barrier
            /* rnd: random read, a pointer chase of (hi - lo) / 4 steps (a cache miss
             * each here; in a TCG guest every access costs about the same, so fewer steps
             * would leave rnd few samples there).  In assembly so that the load
             * is the loop's first instruction (the compiler put the counter's increment
             * first), and into another register than its index (mov k,[base+k*8] would
             * leave no address to recompute after the load). */
            uint64_t k = lo + (uint64_t)it, next, steps = (hi - lo) / 4;
            if (steps)
                __asm__ volatile("1: mov (%[base],%[k],8), %[next]\n\t"
                                 "mov %[next], %[k]\n\t"
                                 "dec %[steps]\n\t"
                                 "jnz 1b"
                                 : [k] "+r"(k), [steps] "+r"(steps), [next] "=&r"(next)
                                 : [base] "r"(rnd)
                                 : "memory", "cc");
            end ^= k;
#pragma omp barrier
        }
    }
    printf("checksum %.1f %.1f %llu\n", sum, irr[n / 3], (unsigned long long)end);
    free(reg);
    free(irr);
    free(rnd);
    return 0;
}
