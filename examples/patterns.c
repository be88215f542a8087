/* The vector-access kernels of Pousa Ribeiro et al. 2010 (docs/references.md), Figure 15, for training and
 * checking the access-pattern classifier.
 *
 *   patterns KIND SCHEDULE OP [MiB per array] [iterations]
 *     KIND      regular | irregular | random | hashed
 *     SCHEDULE  static | dynamic
 *     OP        read | write | rw
 *
 * Each iteration runs a "copy" phase then an "add" phase over arrays a, b, c
 * (parallel first touch).  regular: both phases walk j upwards, so each thread keeps its
 * block.  irregular: the copy phase walks j downwards, so under a static schedule the
 * thread <-> block mapping flips between phases.  random: accesses go through the index
 * array `page` (c[page[j]] = a[page[j]]), spreading every thread over the whole arrays.
 * hashed: the same random accesses, the index computed in registers (the hash that fills
 * `page`) instead of loaded, so the random access is the first memory access of its loop
 * and the only one under `write`; `page` is not touched.
 *
 * Known labels by construction (what the classifier must say):
 *   schedule static : a, c -> KIND; b -> regular (the add phase always walks upwards)
 *                     except random, where b is random too; page -> regular
 *   schedule dynamic: a, b, c -> irregular, or random for KIND=random; page -> irregular
 *   KIND=hashed     : a, b, c -> random under either schedule
 * OP picks the operation: read (sum of the operands), write (store a constant),
 * rw (c = a + b, the STREAM add).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { READ, WRITE, RW };

static size_t n;
static double *a, *b, *c;
static uint32_t *page;
static double sink;

/* a reproducible pseudo-random index in [0, n): page[j] == hidx(j) */
static inline size_t hidx(size_t j)
{
    uint64_t x = (j + 1) * 0x9E3779B97F4A7C15ull;
    x ^= x >> 29;
    x *= 0xBF58476D1CE4E5B9ull;
    x ^= x >> 32;
    return (uint32_t)(x % n);
}

#define LOOP_UP(sched, body)                                                          \
    do {                                                                              \
        double s_ = 0.0;                                                              \
        if (sched) {                                                                  \
            _Pragma("omp parallel for schedule(dynamic, 4096) reduction(+ : s_)")     \
            for (size_t j = 0; j < n; j++) { body; }                                  \
        } else {                                                                      \
            _Pragma("omp parallel for schedule(static) reduction(+ : s_)")            \
            for (size_t j = 0; j < n; j++) { body; }                                  \
        }                                                                             \
        sink += s_;                                                                   \
    } while (0)

#define LOOP_DOWN(sched, body)                                                        \
    do {                                                                              \
        double s_ = 0.0;                                                              \
        if (sched) {                                                                  \
            _Pragma("omp parallel for schedule(dynamic, 4096) reduction(+ : s_)")     \
            for (size_t i = 0; i < n; i++) { size_t j = n - 1 - i; body; }            \
        } else {                                                                      \
            _Pragma("omp parallel for schedule(static) reduction(+ : s_)")            \
            for (size_t i = 0; i < n; i++) { size_t j = n - 1 - i; body; }            \
        }                                                                             \
        sink += s_;                                                                   \
    } while (0)

int main(int argc, char **argv)
{
    if (argc < 4) {
        fprintf(stderr, "usage: patterns regular|irregular|random static|dynamic "
                        "read|write|rw [MiB] [iterations]\n");
        return 2;
    }
    const char *kind = argv[1];
    int dynamic = strcmp(argv[2], "dynamic") == 0;
    int op = strcmp(argv[3], "read") == 0 ? READ : strcmp(argv[3], "write") == 0 ? WRITE : RW;
    size_t mib = argc > 4 ? strtoul(argv[4], NULL, 10) : 32;
    int iters = argc > 5 ? atoi(argv[5]) : 40;
    n = mib * 1024 * 1024 / sizeof(double);

    a = malloc(n * sizeof(double));
    b = malloc(n * sizeof(double));
    c = malloc(n * sizeof(double));
    page = malloc(n * sizeof(uint32_t));
    if (!a || !b || !c || !page)
        return 1;

#pragma omp parallel for schedule(static)
    for (size_t j = 0; j < n; j++) {
        c[j] = a[j] = 1.0;
        b[j] = 2.0;
        page[j] = (uint32_t)hidx(j); /* hash: reproducible, parallel */
    }

    int random = strcmp(kind, "random") == 0;
    int irregular = strcmp(kind, "irregular") == 0;
    int hashed = strcmp(kind, "hashed") == 0;
    for (int it = 0; it < iters; it++) {
        /* copy phase */
        if (hashed) {
            if (op == READ) LOOP_UP(dynamic, s_ += a[hidx(j)]);
            else if (op == WRITE) LOOP_UP(dynamic, c[hidx(j)] = 3.0);
            else LOOP_UP(dynamic, size_t k = hidx(j); c[k] = a[k]);
        } else if (random) {
            if (op == READ) LOOP_UP(dynamic, s_ += a[page[j]]);
            else if (op == WRITE) LOOP_UP(dynamic, c[page[j]] = 3.0);
            else LOOP_UP(dynamic, c[page[j]] = a[page[j]]);
        } else if (irregular) {
            if (op == READ) LOOP_DOWN(dynamic, s_ += a[j]);
            else if (op == WRITE) LOOP_DOWN(dynamic, c[j] = 3.0);
            else LOOP_DOWN(dynamic, c[j] = a[j]);
        } else {
            if (op == READ) LOOP_UP(dynamic, s_ += a[j]);
            else if (op == WRITE) LOOP_UP(dynamic, c[j] = 3.0);
            else LOOP_UP(dynamic, c[j] = a[j]);
        }
        /* add phase */
        if (hashed) {
            if (op == READ) LOOP_UP(dynamic, size_t k = hidx(j); s_ += a[k] + b[k]);
            else if (op == WRITE) LOOP_UP(dynamic, c[hidx(j)] = 4.0);
            else LOOP_UP(dynamic, size_t k = hidx(j); c[k] = a[k] + b[k]);
        } else if (random) {
            if (op == READ) LOOP_UP(dynamic, s_ += a[page[j]] + b[page[j]]);
            else if (op == WRITE) LOOP_UP(dynamic, c[page[j]] = 4.0);
            else LOOP_UP(dynamic, c[page[j]] = a[page[j]] + b[page[j]]);
        } else {
            if (op == READ) LOOP_UP(dynamic, s_ += a[j] + b[j]);
            else if (op == WRITE) LOOP_UP(dynamic, c[j] = 4.0);
            else LOOP_UP(dynamic, c[j] = a[j] + b[j]);
        }
    }
    printf("checksum %.1f %.1f\n", sink, c[n / 3]);
    free(a);
    free(b);
    free(c);
    free(page);
    return 0;
}
