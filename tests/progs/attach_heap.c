/* A program to attach to (`numaprof record -p PID`, tests/e2e/test_attach.py).
 *
 *   attach_heap GOFILE SECONDS
 *
 * Allocates its arrays at start — large ones that glibc maps on their own (next to each
 * other, so that the kernel merges their mappings), smaller ones from the brk heap, two
 * from a worker thread (its own arena, and mapped) — frees one between two brk arrays,
 * prints "ready" with its pid, then waits until GOFILE exists.  Two worker threads then
 * stream over the arrays, each over its half of every array (a static partition: the
 * same half in every pass), for SECONDS seconds.  The main thread waits in
 * pthread_join all along, holding the local `local_h` (which the workers read through
 * their `struct work`) and two tables no global points to (`tab_s`, `tab_t`: mmapped,
 * read only inside sum_table, through its parameter `tab`).  Once GOFILE exists, after
 * the attach, the first worker maps `late_m` and the second allocates `late_k` in an
 * arena of its own; both stream over them too, and each pass allocates, fills, reads
 * and frees a `scratch` buffer, which neither reading of the heap finds.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define KIB 1024L
#define MIB (1024L * 1024L)

double *big_a;   /* 24 MiB: mmapped */
double *big_b;   /* 8 MiB: mmapped, mapped next to big_a */
double *mid_c;   /* 96 KiB: brk heap */
float *mid_d;    /* 72 KiB: brk heap */
int *small_e;    /* 6 KiB: brk heap, below the default threshold */
double *thr_f;   /* 100 KiB: the first worker's arena */
double *thr_g;   /* 16 MiB: mmapped by the first worker */
double *late_m;  /* 12 MiB: mmapped by the first worker after the attach */
double *late_k;  /* 160 KiB: the second worker's arena, after the attach */
struct grid {
    long n;
    double *energy; /* 80 KiB: brk heap, a member of a global struct */
} grid;

static const char *gofile;
static double seconds;
static pthread_barrier_t allocated, late;

struct work {
    int id;
    double *local; /* the main thread's local_h */
    double *tab_s, *tab_t; /* 3 MiB and 1 MiB, the main thread's locals too */
    double sum;
};

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void *xmalloc(size_t n)
{
    void *p = malloc(n);
    if (!p) {
        perror("malloc");
        exit(1);
    }
    memset(p, 1, n);
    return p;
}

/* The only code that reads tab_s and tab_t: named by code, both are `tab`. */
static __attribute__((noinline)) double sum_table(const double *tab, long lo, long hi)
{
    double s = 0;
    for (long i = lo; i < hi; i++)
        s += tab[i];
    return s;
}

/* The half [lo, hi) of n elements of thread id. */
static void half(long n, int id, long *lo, long *hi)
{
    *lo = id * (n / 2);
    *hi = id ? n : n / 2;
}

static void *worker(void *arg)
{
    struct work *w = arg;
    if (w->id == 0) {
        thr_f = xmalloc(100 * KIB);
        thr_g = xmalloc(16 * MIB);
    }
    pthread_barrier_wait(&allocated);
    struct timespec nap = {0, 10 * 1000 * 1000};
    while (access(gofile, F_OK) != 0)
        nanosleep(&nap, NULL);
    if (w->id == 0)
        late_m = xmalloc(12 * MIB);
    else
        late_k = xmalloc(160 * KIB);
    pthread_barrier_wait(&late);
    double end = now() + seconds, s = 0;
    long na = 24 * MIB / 8, nb = 8 * MIB / 8, ng = 16 * MIB / 8, lo, hi;
    while (now() < end) {
        half(na, w->id, &lo, &hi);
        for (long i = lo; i < hi; i++)
            big_a[i] = big_a[i] * 0.5 + 1.0;
        half(nb, w->id, &lo, &hi);
        for (long i = lo; i < hi; i++)
            s += big_b[i];
        half(ng, w->id, &lo, &hi);
        for (long i = lo; i < hi; i++)
            s += thr_g[i];
        half(2 * MIB / 8, w->id, &lo, &hi);
        for (long i = lo; i < hi; i++)
            s += w->local[i];
        half(3 * MIB / 8, w->id, &lo, &hi);
        s += sum_table(w->tab_s, lo, hi);
        half(1 * MIB / 8, w->id, &lo, &hi);
        s += sum_table(w->tab_t, lo, hi);
        for (long i = 0; i < 96 * KIB / 8; i++)
            s += mid_c[i];
        for (long i = 0; i < 72 * KIB / 4; i++)
            s += mid_d[i];
        for (long i = 0; i < 100 * KIB / 8; i++)
            s += thr_f[i];
        for (long i = 0; i < grid.n; i++)
            s += grid.energy[i];
        half(12 * MIB / 8, w->id, &lo, &hi);
        for (long i = lo; i < hi; i++)
            s += late_m[i];
        for (long i = 0; i < 160 * KIB / 8; i++)
            s += late_k[i];
        /* made and freed in every pass: no heap walk sees it */
        double *scratch = malloc(384 * KIB);
        if (!scratch)
            abort();
        for (long i = 0; i < 384 * KIB / 8; i++)
            scratch[i] = s * 1e-9 + (double)i;
        for (long i = 0; i < 384 * KIB / 8; i += 3)
            s += scratch[i];
        free(scratch);
    }
    w->sum = s;
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: attach_heap GOFILE SECONDS\n");
        return 2;
    }
    gofile = argv[1];
    seconds = atof(argv[2]);
    big_a = xmalloc(24 * MIB);
    big_b = xmalloc(8 * MIB);
    mid_c = xmalloc(96 * KIB);
    void *hole = xmalloc(80 * KIB);
    mid_d = xmalloc(72 * KIB);
    small_e = xmalloc(6 * KIB);
    grid.n = 80 * KIB / 8;
    grid.energy = xmalloc(80 * KIB);
    free(hole); /* a free chunk between two arrays: no object */
    double *local_h = xmalloc(2 * MIB);
    double *tab_s = xmalloc(3 * MIB), *tab_t = xmalloc(1 * MIB);

    pthread_barrier_init(&allocated, NULL, 3);
    pthread_barrier_init(&late, NULL, 2);
    pthread_t t[2];
    struct work w[2] = {{0, local_h, tab_s, tab_t, 0}, {1, local_h, tab_s, tab_t, 0}};
    for (int i = 0; i < 2; i++)
        pthread_create(&t[i], NULL, worker, &w[i]);
    pthread_barrier_wait(&allocated);
    printf("ready %d\n", (int)getpid());
    fflush(stdout);
    for (int i = 0; i < 2; i++)
        pthread_join(t[i], NULL);
    printf("%g\n", w[0].sum + w[1].sum + small_e[0]);
    free(tab_t);
    free(tab_s);
    free(local_h);
    return 0;
}
