/* numaprof-measure: memory latency and bandwidth for every (cpu node i, memory node j)
 * pair, the measurements behind the measured NUMA factor (docs/measure.md; the method of
 * Pousa Ribeiro et al. 2010, §3.1 and Table 4, docs/references.md: threads bound to node i, data bound to node j,
 * data larger than the caches).
 *
 * (a) latency: a dependent pointer chase over a random cyclic permutation of the cache
 *     lines of one buffer, ns per load, median of the repetitions;
 * (b) bandwidth: the STREAM triad a[k] = b[k] + s*c[k] run by T threads, GB/s counted as
 *     STREAM counts it (24 bytes per iteration), best of the repetitions.
 *
 * No libnuma: node cpus come from /sys/devices/system/node/nodeN/cpulist, threads are
 * bound with sched_setaffinity, memory with mbind(2) before the first touch, and the
 * placement is checked afterwards with move_pages(2).  The result is JSON on stdout
 * (docs/measure.md).  Exit status: 0 all measurable pairs measured, 1 a pair failed (the
 * JSON is still written, with the reason in "errors"), 2 bad usage.
 *
 * NUMAPROF_SYSROOT prefixes every /sys path (test trees); NUMAPROF_DEBUG=1 prints progress
 * on stderr.
 *
 * One file (~800 lines) on purpose: a standalone program that builds without the rest of
 * the collector (cmake -S collector/measure), so it shares no module with it.
 */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <linux/mempolicy.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define NMP_LINE 64
#define NMP_MAX_NODES 1024 /* bits in the mbind node mask */
#define NMP_HUGE (2UL << 20)
#define NMP_VERIFY_PAGES 1024 /* pages sampled with move_pages per buffer */
#define NMP_MIN_LOADS (1UL << 20)
#define NMP_MAX_ERRORS 256

struct nmp_node {
    int id;
    int *cpus; /* allowed cpus of the node (intersection with our affinity) */
    int ncpus;
    int sys_cpus; /* cpus listed in sysfs, allowed or not */
    long long mem_kb;
    long long free_kb; /* -1: unknown */
};

struct nmp_opts {
    size_t size;
    int reps;
    int threads;
    int hugepages;
    uint64_t seed;
};

static const char *nmp_root = "";
static int nmp_verbose;
static char *nmp_errors[NMP_MAX_ERRORS];
static int nmp_nerrors;
static char nmp_binding[256] = "mbind MPOL_BIND";
static int nmp_bind_available = 1;
static long nmp_page;
static void *volatile nmp_sink;

static void nmp_debug(const char *fmt, ...)
{
    if (!nmp_verbose)
        return;
    va_list ap;
    va_start(ap, fmt);
    fputs("numaprof-measure: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

static void nmp_error(const char *fmt, ...)
{
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    nmp_debug("%s", buf);
    if (nmp_nerrors < NMP_MAX_ERRORS)
        nmp_errors[nmp_nerrors++] = strdup(buf);
}

static double nmp_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static uint64_t nmp_rand(uint64_t *state)
{
    /* xorshift64*: enough randomness to defeat the prefetchers, and reproducible. */
    uint64_t x = *state;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *state = x;
    return x * 0x2545F4914F6CDD1DULL;
}

/* ---------------------------------------------------------------- sysfs */

static char *nmp_read_file(const char *path)
{
    char full[4096];
    snprintf(full, sizeof full, "%s%s", nmp_root, path);
    FILE *f = fopen(full, "re");
    if (!f)
        return NULL;
    size_t cap = 4096, len = 0;
    char *buf = malloc(cap);
    if (!buf) {
        fclose(f);
        return NULL;
    }
    size_t n;
    while ((n = fread(buf + len, 1, cap - len - 1, f)) > 0) {
        len += n;
        if (cap - len - 1 == 0) {
            char *nb = realloc(buf, cap * 2);
            if (!nb) {
                free(buf);
                fclose(f);
                return NULL;
            }
            buf = nb;
            cap *= 2;
        }
    }
    buf[len] = 0;
    fclose(f);
    return buf;
}

/* "0-3,8,10-11" -> cpu numbers; returns the count or -1 on a malformed list. */
static int nmp_parse_cpulist(const char *s, int **out)
{
    int cap = 16, n = 0;
    int *v = malloc(sizeof *v * (size_t)cap);
    if (!v)
        return -1;
    while (*s && !isspace((unsigned char)*s)) {
        char *end;
        long lo = strtol(s, &end, 10), hi = lo;
        if (end == s || lo < 0)
            goto bad;
        s = end;
        if (*s == '-') {
            hi = strtol(s + 1, &end, 10);
            if (end == s + 1 || hi < lo)
                goto bad;
            s = end;
        }
        for (long c = lo; c <= hi; c++) {
            if (n == cap) {
                int *nv = realloc(v, sizeof *v * (size_t)(cap *= 2));
                if (!nv)
                    goto bad;
                v = nv;
            }
            v[n++] = (int)c;
        }
        if (*s == ',')
            s++;
        else if (*s && !isspace((unsigned char)*s))
            goto bad;
    }
    *out = v;
    return n;
bad:
    free(v);
    return -1;
}

static int nmp_cmp_node(const void *a, const void *b)
{
    const struct nmp_node *x = a, *y = b;
    return (x->id > y->id) - (x->id < y->id);
}

/* Nodes from /sys/devices/system/node/node*.  A kernel without NUMA has no such
 * directory: then one node 0 holds every cpu and all memory. */
static int nmp_load_nodes(struct nmp_node **out, const cpu_set_t *allowed)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/sys/devices/system/node", nmp_root);
    int cap = 8, n = 0;
    struct nmp_node *nodes = calloc((size_t)cap, sizeof *nodes);
    if (!nodes)
        return -1;
    DIR *d = opendir(path);
    if (d) {
        struct dirent *e;
        while ((e = readdir(d))) {
            char *end;
            if (strncmp(e->d_name, "node", 4) || !isdigit((unsigned char)e->d_name[4]))
                continue;
            long id = strtol(e->d_name + 4, &end, 10);
            if (*end)
                continue;
            if (n == cap) {
                struct nmp_node *nn = realloc(nodes, sizeof *nodes * (size_t)(cap *= 2));
                if (!nn)
                    break;
                nodes = nn;
            }
            memset(&nodes[n], 0, sizeof nodes[n]);
            nodes[n++].id = (int)id;
        }
        closedir(d);
    }
    if (n == 0) {
        nodes[0].id = 0;
        n = 1;
        nmp_bind_available = 0;
        snprintf(nmp_binding, sizeof nmp_binding, "none: the kernel shows no NUMA nodes");
    }
    qsort(nodes, (size_t)n, sizeof *nodes, nmp_cmp_node);

    for (int k = 0; k < n; k++) {
        struct nmp_node *nd = &nodes[k];
        int *cpus = NULL, ncpus;
        char *text;
        if (nmp_bind_available) {
            snprintf(path, sizeof path, "/sys/devices/system/node/node%d/cpulist", nd->id);
            text = nmp_read_file(path);
        } else {
            text = nmp_read_file("/sys/devices/system/cpu/online");
        }
        ncpus = text ? nmp_parse_cpulist(text, &cpus) : 0;
        free(text);
        if (ncpus < 0) {
            fprintf(stderr, "numaprof-measure: malformed cpulist for node %d\n", nd->id);
            return -1;
        }
        nd->sys_cpus = ncpus;
        nd->cpus = malloc(sizeof(int) * (size_t)(ncpus ? ncpus : 1));
        if (!nd->cpus) {
            free(cpus);
            return -1;
        }
        for (int c = 0; c < ncpus; c++)
            if (cpus[c] < CPU_SETSIZE && CPU_ISSET(cpus[c], allowed))
                nd->cpus[nd->ncpus++] = cpus[c];
        free(cpus);

        nd->mem_kb = nd->free_kb = -1; /* unknown: assume it has memory */
        snprintf(path, sizeof path, "/sys/devices/system/node/node%d/meminfo", nd->id);
        text = nmp_bind_available ? nmp_read_file(path) : NULL;
        if (text) {
            char *p = strstr(text, "MemTotal:");
            if (p)
                nd->mem_kb = strtoll(p + 9, NULL, 10);
            if ((p = strstr(text, "MemFree:")))
                nd->free_kb = strtoll(p + 8, NULL, 10);
            free(text);
        }
    }
    *out = nodes;
    return n;
}

static void nmp_thp_mode(char *buf, size_t len)
{
    char *t = nmp_read_file("/sys/kernel/mm/transparent_hugepage/enabled");
    char *l, *r;
    snprintf(buf, len, "unknown");
    if (t && (l = strchr(t, '[')) && (r = strchr(l, ']'))) {
        *r = 0;
        snprintf(buf, len, "%s", l + 1);
    }
    free(t);
}

/* ---------------------------------------------------------------- memory */

struct nmp_buf {
    void *map;
    size_t map_len;
    char *p; /* aligned start */
    size_t len;
};

/* An anonymous buffer with its memory policy set to node `node` before any page exists,
 * so the first touch cannot place it anywhere else. */
static int nmp_alloc_on(struct nmp_buf *b, size_t len, int node, int hugepages)
{
    memset(b, 0, sizeof *b);
    b->map_len = len + NMP_HUGE;
    b->map = mmap(NULL, b->map_len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (b->map == MAP_FAILED) {
        b->map = NULL;
        return -1;
    }
    b->p = (char *)(((uintptr_t)b->map + NMP_HUGE - 1) & ~(uintptr_t)(NMP_HUGE - 1));
    b->len = len;
    /* Huge pages take the TLB misses out of the chase, which otherwise add the same
     * page-walk cost to local and remote loads and flatten the ratio. */
    if (hugepages)
        madvise(b->p, len, MADV_HUGEPAGE);
    if (nmp_bind_available && node >= 0) {
        unsigned long mask[NMP_MAX_NODES / (8 * sizeof(unsigned long))];
        memset(mask, 0, sizeof mask);
        mask[(size_t)node / (8 * sizeof(unsigned long))] |= 1UL << ((size_t)node % (8 * sizeof(unsigned long)));
        if (syscall(SYS_mbind, b->p, len, MPOL_BIND, mask, (unsigned long)NMP_MAX_NODES + 1,
                    MPOL_MF_STRICT | MPOL_MF_MOVE) != 0) {
            int e = errno;
            munmap(b->map, b->map_len);
            b->map = NULL;
            errno = e;
            return -2;
        }
    }
    return 0;
}

static void nmp_free(struct nmp_buf *b)
{
    if (b->map)
        munmap(b->map, b->map_len);
    b->map = NULL;
}

/* Fraction of sampled pages of b that move_pages(2) reports on `node`; -1 when the
 * kernel cannot tell (no NUMA, syscall refused). */
static double nmp_placed_fraction(const struct nmp_buf *b, int node)
{
    size_t pages = b->len / (size_t)nmp_page;
    size_t n = pages < NMP_VERIFY_PAGES ? pages : NMP_VERIFY_PAGES;
    if (n == 0)
        return -1;
    void **addr = malloc(sizeof *addr * n);
    int *status = malloc(sizeof *status * n);
    double frac = -1;
    if (addr && status) {
        for (size_t k = 0; k < n; k++)
            addr[k] = b->p + (k * pages / n) * (size_t)nmp_page;
        if (syscall(SYS_move_pages, 0, (unsigned long)n, addr, NULL, status, 0) == 0) {
            size_t on = 0;
            for (size_t k = 0; k < n; k++)
                on += status[k] == node;
            frac = (double)on / (double)n;
        } else {
            nmp_debug("move_pages: %s", strerror(errno));
        }
    }
    free(addr);
    free(status);
    return frac;
}

/* ---------------------------------------------------------------- latency */

/* Each cache line's first word points to the next line of one random cycle through all
 * lines (Sattolo's algorithm), so every load depends on the previous one and the
 * prefetchers cannot guess the next address. */
static void nmp_build_chase(char *p, size_t lines, uint64_t seed)
{
    uint64_t st = seed ? seed : 1;
    for (size_t i = 0; i < lines; i++)
        *(size_t *)(p + i * NMP_LINE) = i;
    for (size_t i = lines - 1; i > 0; i--) {
        size_t j = (size_t)(nmp_rand(&st) % i);
        size_t *a = (size_t *)(p + i * NMP_LINE), *b = (size_t *)(p + j * NMP_LINE);
        size_t t = *a;
        *a = *b;
        *b = t;
    }
    for (size_t i = 0; i < lines; i++) {
        size_t *slot = (size_t *)(p + i * NMP_LINE);
        *(void **)slot = p + *slot * NMP_LINE;
    }
}

static double nmp_chase_ns(char *p, size_t loads)
{
    void **q = (void **)p;
    double t0 = nmp_now();
    for (size_t k = 0; k < loads; k++)
        q = (void **)*q;
    double t1 = nmp_now();
    nmp_sink = q;
    return (t1 - t0) * 1e9 / (double)loads;
}

static int nmp_cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* ---------------------------------------------------------------- bandwidth */

struct nmp_triad {
    double *a, *b, *c;
    size_t n;
    int nthreads, reps;
    pthread_barrier_t start, end;
};

struct nmp_worker {
    pthread_t th;
    struct nmp_triad *t;
    size_t lo, hi;
    double start, end; /* of the current repetition */
};

static void *nmp_triad_worker(void *arg)
{
    struct nmp_worker *w = arg;
    struct nmp_triad *t = w->t;
    const double s = 3.0;
    /* The buffer is the chase buffer, already placed: this only sets the operands. */
    for (size_t k = w->lo; k < w->hi; k++) {
        t->a[k] = 0.0;
        t->b[k] = 1.0;
        t->c[k] = 2.0;
    }
    for (int r = 0; r < t->reps; r++) {
        pthread_barrier_wait(&t->start);
        w->start = nmp_now();
        double *restrict a = t->a;
        const double *restrict b = t->b, *restrict c = t->c;
        for (size_t k = w->lo; k < w->hi; k++)
            a[k] = b[k] + s * c[k];
        w->end = nmp_now();
        pthread_barrier_wait(&t->end);
    }
    return NULL;
}

/* Best GB/s of `reps` triads by `nthreads` threads on `cpus`, arrays in buf. */
static double nmp_triad_gbs(struct nmp_buf *buf, const int *cpus, int ncpus, int nthreads,
                            int reps, const char **why)
{
    struct nmp_triad t = {0};
    t.n = buf->len / (3 * sizeof(double));
    t.a = (double *)buf->p;
    t.b = t.a + t.n;
    t.c = t.b + t.n;
    t.nthreads = nthreads;
    t.reps = reps;
    struct nmp_worker *w = calloc((size_t)nthreads, sizeof *w);
    if (!w) {
        *why = "out of memory";
        return -1;
    }
    pthread_barrier_init(&t.start, NULL, (unsigned)nthreads + 1);
    pthread_barrier_init(&t.end, NULL, (unsigned)nthreads + 1);
    int started = 0;
    for (int k = 0; k < nthreads; k++) {
        pthread_attr_t attr;
        cpu_set_t set;
        CPU_ZERO(&set);
        CPU_SET(cpus[k % ncpus], &set);
        pthread_attr_init(&attr);
        pthread_attr_setaffinity_np(&attr, sizeof set, &set);
        w[k].t = &t;
        w[k].lo = t.n * (size_t)k / (size_t)nthreads;
        w[k].hi = t.n * (size_t)(k + 1) / (size_t)nthreads;
        int rc = pthread_create(&w[k].th, &attr, nmp_triad_worker, &w[k]);
        pthread_attr_destroy(&attr);
        if (rc != 0) {
            *why = strerror(rc);
            break;
        }
        started++;
    }
    double best = -1;
    if (started == nthreads) {
        for (int r = 0; r < reps; r++) {
            /* The workers time themselves: this thread shares their cpus and, woken
             * after them, would start its clock late. */
            pthread_barrier_wait(&t.start);
            pthread_barrier_wait(&t.end);
            double t0 = w[0].start, t1 = w[0].end;
            for (int k = 1; k < nthreads; k++) {
                t0 = w[k].start < t0 ? w[k].start : t0;
                t1 = w[k].end > t1 ? w[k].end : t1;
            }
            double secs = t1 - t0;
            double gbs = 3.0 * sizeof(double) * (double)t.n / secs / 1e9;
            nmp_debug("triad rep %d: %.6f s, %.2f GB/s", r, secs, gbs);
            if (gbs > best)
                best = gbs;
        }
        for (int k = 0; k < nthreads; k++)
            pthread_join(w[k].th, NULL);
        /* The kernel really ran: every a[k] is 1 + 3 * 2. */
        for (size_t k = 0; k < t.n; k += t.n / 7 + 1)
            if (t.a[k] != 7.0) {
                *why = "triad result is wrong";
                best = -1;
            }
    } else {
        /* Threads that did start wait at the barrier forever; we cannot unwind them. */
        fprintf(stderr, "numaprof-measure: pthread_create: %s\n", *why);
        exit(1);
    }
    pthread_barrier_destroy(&t.start);
    pthread_barrier_destroy(&t.end);
    free(w);
    return best;
}

/* ---------------------------------------------------------------- one pair */

static int nmp_bind_cpus(const struct nmp_node *nd)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    for (int c = 0; c < nd->ncpus; c++)
        CPU_SET(nd->cpus[c], &set);
    return sched_setaffinity(0, sizeof set, &set);
}

static const char *nmp_bind_reason(int e)
{
    if (e == EPERM)
        return "operation not permitted (seccomp or missing CAP_SYS_NICE in a container?)";
    return strerror(e);
}

static void nmp_measure_pair(const struct nmp_node *cpu, const struct nmp_node *mem,
                             const struct nmp_opts *o, int nthreads, double *lat, double *bw,
                             double *placed)
{
    struct nmp_buf b;
    *lat = *bw = *placed = NAN;
    if (nmp_bind_cpus(cpu) != 0) {
        nmp_error("cpu node %d: sched_setaffinity: %s", cpu->id, strerror(errno));
        return;
    }

    /* MPOL_BIND does not spill to other nodes: a buffer larger than the node's free
     * memory would end in the OOM killer, not in an error. */
    if (mem->free_kb >= 0 && (long long)(o->size >> 10) > mem->free_kb / 10 * 9) {
        nmp_error("cpu node %d, memory node %d: %zu MiB do not fit in the node's %lld MiB "
                  "of free memory (use --size-mib)", cpu->id, mem->id, o->size >> 20,
                  mem->free_kb >> 10);
        return;
    }
    int rc = nmp_alloc_on(&b, o->size, mem->id, o->hugepages);
    if (rc == -2 && cpu == mem && (errno == ENOSYS || errno == EPERM)) {
        /* Without mbind the memory of a thread bound to node i lands on node i under the
         * default local policy: the diagonal stays measurable. */
        snprintf(nmp_binding, sizeof nmp_binding, "first touch (mbind: %s)",
                 nmp_bind_reason(errno));
        rc = nmp_alloc_on(&b, o->size, -1, o->hugepages);
    }
    if (rc != 0) {
        nmp_error("cpu node %d, memory node %d: %s: %s", cpu->id, mem->id,
                  rc == -2 ? "mbind" : "mmap", nmp_bind_reason(errno));
        return;
    }
    size_t lines = b.len / NMP_LINE;
    nmp_build_chase(b.p, lines, o->seed);
    double frac = nmp_placed_fraction(&b, mem->id);
    *placed = frac;
    if (frac >= 0 && frac < 1.0 && nmp_bind_available)
        nmp_error("cpu node %d, memory node %d: only %.0f%% of the sampled pages are on "
                  "node %d", cpu->id, mem->id, frac * 100, mem->id);

    size_t loads = lines > NMP_MIN_LOADS ? lines : NMP_MIN_LOADS;
    double *v = malloc(sizeof *v * (size_t)o->reps);
    if (!v) {
        nmp_error("cpu node %d, memory node %d: out of memory", cpu->id, mem->id);
        nmp_free(&b);
        return;
    }
    nmp_chase_ns(b.p, lines < 65536 ? lines : 65536); /* warm the page tables */
    for (int r = 0; r < o->reps; r++)
        v[r] = nmp_chase_ns(b.p, loads);
    qsort(v, (size_t)o->reps, sizeof *v, nmp_cmp_double);
    *lat = o->reps % 2 ? v[o->reps / 2] : (v[o->reps / 2 - 1] + v[o->reps / 2]) / 2;
    free(v);

    const char *why = "";
    double g = nmp_triad_gbs(&b, cpu->cpus, cpu->ncpus, nthreads, o->reps, &why);
    if (g <= 0)
        nmp_error("cpu node %d, memory node %d: triad: %s", cpu->id, mem->id, why);
    else
        *bw = g;
    nmp_free(&b);
    nmp_debug("cpu node %d, memory node %d: %.1f ns, %.2f GB/s (%d threads), %.0f%% placed",
              cpu->id, mem->id, *lat, *bw, nthreads, frac * 100);
}

/* ---------------------------------------------------------------- output */

static void nmp_json_num(double x, int prec)
{
    if (isnan(x) || x < 0)
        fputs("null", stdout);
    else
        printf("%.*f", prec, x);
}

static void nmp_json_str(const char *s)
{
    putchar('"');
    for (; *s; s++) {
        if (*s == '"' || *s == '\\')
            printf("\\%c", *s);
        else if ((unsigned char)*s < 0x20)
            printf("\\u%04x", *s);
        else
            putchar(*s);
    }
    putchar('"');
}

static void nmp_json_matrix(const char *name, const double *m, int n, int prec)
{
    printf("  \"%s\": [", name);
    for (int i = 0; i < n; i++) {
        printf("%s[", i ? ", " : "");
        for (int j = 0; j < n; j++) {
            if (j)
                fputs(", ", stdout);
            nmp_json_num(m[i * n + j], prec);
        }
        putchar(']');
    }
    puts("],");
}

static void nmp_usage(FILE *f)
{
    fputs("usage: numaprof-measure [--size-mib N] [--reps N] [--threads N] [--seed N]\n"
          "                        [--no-hugepages] [--verbose]\n"
          "Latency (pointer chase, ns/load, median) and bandwidth (triad, GB/s, best) for\n"
          "every (cpu node, memory node) pair, as JSON on stdout.\n"
          "  --size-mib N     latency buffer, and the three triad arrays together (default 256)\n"
          "  --reps N         repetitions per pair (default 5)\n"
          "  --threads N      triad threads (default: the cpus of the cpu node)\n"
          "  --seed N         seed of the random chase (default 1)\n"
          "  --no-hugepages   do not ask for transparent huge pages\n",
          f);
}

static int nmp_parse_long(const char *s, long lo, long hi, long *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi)
        return -1;
    *out = v;
    return 0;
}

int main(int argc, char **argv)
{
    struct nmp_opts o = {.size = 256UL << 20, .reps = 5, .threads = 0, .hugepages = 1,
                         .seed = 1};
    static const struct option longopts[] = {
        {"size-mib", required_argument, NULL, 's'}, {"reps", required_argument, NULL, 'r'},
        {"threads", required_argument, NULL, 't'},  {"seed", required_argument, NULL, 'S'},
        {"no-hugepages", no_argument, NULL, 'H'},   {"verbose", no_argument, NULL, 'v'},
        {"help", no_argument, NULL, 'h'},           {NULL, 0, NULL, 0}};
    int opt;
    long v;
    const char *e = getenv("NUMAPROF_DEBUG");
    nmp_verbose = e && *e && strcmp(e, "0") != 0;
    while ((opt = getopt_long(argc, argv, "s:r:t:S:Hvh", longopts, NULL)) != -1) {
        switch (opt) {
        case 's':
            if (nmp_parse_long(optarg, 1, 1L << 20, &v))
                goto usage;
            o.size = (size_t)v << 20;
            break;
        case 'r':
            if (nmp_parse_long(optarg, 1, 1000, &v))
                goto usage;
            o.reps = (int)v;
            break;
        case 't':
            if (nmp_parse_long(optarg, 0, 4096, &v))
                goto usage;
            o.threads = (int)v;
            break;
        case 'S':
            if (nmp_parse_long(optarg, 0, LONG_MAX, &v))
                goto usage;
            o.seed = (uint64_t)v;
            break;
        case 'H':
            o.hugepages = 0;
            break;
        case 'v':
            nmp_verbose = 1;
            break;
        case 'h':
            nmp_usage(stdout);
            return 0;
        default:
            goto usage;
        }
    }
    if (optind != argc)
        goto usage;

    const char *root = getenv("NUMAPROF_SYSROOT");
    if (root)
        nmp_root = root;
    nmp_page = sysconf(_SC_PAGESIZE);

    cpu_set_t allowed;
    if (sched_getaffinity(0, sizeof allowed, &allowed) != 0) {
        fprintf(stderr, "numaprof-measure: sched_getaffinity: %s\n", strerror(errno));
        return 1;
    }
    struct nmp_node *nodes;
    int n = nmp_load_nodes(&nodes, &allowed);
    if (n < 0)
        return 1;

    double *lat = malloc(sizeof *lat * (size_t)(n * n));
    double *bw = malloc(sizeof *bw * (size_t)(n * n));
    double *placed = malloc(sizeof *placed * (size_t)(n * n));
    int *threads = calloc((size_t)n, sizeof *threads);
    if (!lat || !bw || !placed || !threads) {
        fputs("numaprof-measure: out of memory\n", stderr);
        return 1;
    }
    for (int i = 0; i < n; i++) {
        threads[i] = o.threads ? o.threads : nodes[i].ncpus;
        for (int j = 0; j < n; j++) {
            int k = i * n + j;
            lat[k] = bw[k] = placed[k] = NAN;
            /* Nodes without cpus (memory expanders) or memory give no row or column. */
            if (nodes[i].sys_cpus == 0 || nodes[j].mem_kb == 0)
                continue;
            if (nodes[i].ncpus == 0) {
                nmp_error("cpu node %d: none of its cpus is in our affinity mask", nodes[i].id);
                continue;
            }
            nmp_measure_pair(&nodes[i], &nodes[j], &o, threads[i], &lat[k], &bw[k],
                             &placed[k]);
        }
    }
    sched_setaffinity(0, sizeof allowed, &allowed);

    char thp[64];
    nmp_thp_mode(thp, sizeof thp);
    puts("{");
    fputs("  \"version\": 1,\n  \"nodes\": [", stdout);
    for (int i = 0; i < n; i++)
        printf("%s%d", i ? ", " : "", nodes[i].id);
    fputs("],\n  \"node_cpus\": [", stdout);
    for (int i = 0; i < n; i++) {
        printf("%s[", i ? ", " : "");
        for (int c = 0; c < nodes[i].ncpus; c++)
            printf("%s%d", c ? ", " : "", nodes[i].cpus[c]);
        putchar(']');
    }
    puts("],");
    nmp_json_matrix("latency_ns", lat, n, 3);
    nmp_json_matrix("bandwidth_gbs", bw, n, 3);
    nmp_json_matrix("placed_fraction", placed, n, 4);
    printf("  \"settings\": {\"size_mib\": %zu, \"reps\": %d, \"threads\": [", o.size >> 20,
           o.reps);
    for (int i = 0; i < n; i++)
        printf("%s%d", i ? ", " : "", threads[i]);
    printf("], \"line_bytes\": %d, \"chase_loads\": %zu, \"seed\": %llu, ", NMP_LINE,
           (o.size / NMP_LINE) > NMP_MIN_LOADS ? o.size / NMP_LINE : NMP_MIN_LOADS,
           (unsigned long long)o.seed);
    printf("\"triad_bytes_per_iteration\": 24, \"latency_statistic\": \"median\", "
           "\"bandwidth_statistic\": \"best\", \"hugepages\": %s, \"thp\": ",
           o.hugepages ? "true" : "false");
    nmp_json_str(thp);
    fputs(", \"binding\": ", stdout);
    nmp_json_str(nmp_binding);
    fputs("},\n  \"errors\": [", stdout);
    for (int k = 0; k < nmp_nerrors; k++) {
        if (k)
            fputs(", ", stdout);
        nmp_json_str(nmp_errors[k]);
    }
    puts("]\n}");
    fflush(stdout);

    for (int k = 0; k < nmp_nerrors; k++)
        free(nmp_errors[k]);
    for (int i = 0; i < n; i++)
        free(nodes[i].cpus);
    free(nodes);
    free(lat);
    free(bw);
    free(placed);
    free(threads);
    return nmp_nerrors ? 1 : 0;

usage:
    nmp_usage(stderr);
    return 2;
}
