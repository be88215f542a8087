/* numaprof_place.h — apply a NUMA placement policy to an address range.
 *
 * Header-only, no libnuma: the raw mbind(2), move_pages(2), get_mempolicy(2) and
 * getcpu(2) system calls.  The page→node map of every policy is the one of numaprof's
 * recommender (recommender/policies.py, docs/recommender.md), so what `numaprof suggest`
 * predicted is what this places, page for page:
 *
 *     #include <numaprof_place.h>
 *     double *a = malloc(n * sizeof *a);
 *     numaprof_place(a, n * sizeof *a, NUMAPROF_CYCLIC);
 *
 *     static const int nodes[] = {0, 1};
 *     static const unsigned weights[] = {3u, 1u};   (3 pages on node 0 per 1 on node 1)
 *     numaprof_place_weighted(a, n * sizeof *a, nodes, weights, 2);
 *
 * Page i of a range is the i-th page of memory overlapping [ptr, ptr + bytes); the first
 * one contains ptr, so partial first and last pages are placed too (with whatever else
 * shares them).  Call it after allocating and before other threads use the range: pages
 * already present are migrated, absent ones are populated first (MADV_POPULATE_WRITE, or
 * a read and write back of one byte per page on kernels without it).
 *
 * Placement is a preference (MPOL_PREFERRED): a full node falls back to another rather
 * than failing the program.  Functions return 0, or -1 with errno set; nothing prints
 * and nothing exits.  Build flags: `numaprof config --cflags` (just -I to this header).
 */
#ifndef NUMAPROF_PLACE_H
#define NUMAPROF_PLACE_H

#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

/* Strict ISO C (-std=c99 / -std=c11 without _GNU_SOURCE or _DEFAULT_SOURCE) hides these
 * Linux declarations, and a patch includes this header after the file's own includes, too
 * late to ask for them with a feature macro.  (C++ compilers define _GNU_SOURCE.) */
#if !defined(__cplusplus) && !defined(__USE_MISC) && !defined(_DEFAULT_SOURCE) && \
    !defined(_GNU_SOURCE) && !defined(_BSD_SOURCE)
extern long syscall(long number, ...);
extern int madvise(void *addr, size_t length, int advice);
#endif
#ifndef O_CLOEXEC
#define O_CLOEXEC 02000000 /* the x86-64 and arm64 value */
#endif
#ifndef MADV_DONTNEED
#define MADV_DONTNEED 4
#endif
#ifndef MAP_ANONYMOUS
#define MAP_ANONYMOUS 0x20 /* the x86-64 and arm64 value; strict ISO C hides it */
#endif

#ifdef __cplusplus
extern "C" {
#endif

enum numaprof_policy {
    NUMAPROF_FIRST_TOUCH = 0,      /* reset to the default policy (no placement) */
    NUMAPROF_BIND_ALL,             /* nodes[0] until full (capacity_pages), then nodes[1]... */
    NUMAPROF_BIND_BLOCK,           /* static-schedule block k → node of thread k */
    NUMAPROF_CYCLIC,               /* nodes[i mod M] */
    NUMAPROF_CYCLIC_BLOCK,         /* nodes[(i div B) mod M] */
    NUMAPROF_SKEW_MAPP,            /* nodes[(i + i div M + 1) mod M] */
    NUMAPROF_PRIME_MAPP,           /* cyclic over P >= M prime virtual nodes, overflow dealt cyclically */
    NUMAPROF_RANDOM,               /* nodes[splitmix64(seed, i) mod M] */
    NUMAPROF_RANDOM_BLOCK,         /* nodes[splitmix64(seed, i div B) mod M] */
    NUMAPROF_WEIGHTED_INTERLEAVE,  /* weights[] pages per node per round */
    NUMAPROF_N_POLICIES
};

#define NUMAPROF_MAX_NODES 1024
#define NUMAPROF_DEFAULT_BLOCK_PAGES 16

/* Options of numaprof_place_ex(); zero-initialise and set what you need.  Unset
 * (NULL / 0) fields take the defaults of numaprof_place(). */
struct numaprof_place_opts {
    const int *nodes;           /* the M memory nodes, in order; default: the allowed ones */
    int n_nodes;
    const int *threads_nodes;   /* BIND_BLOCK: node of OpenMP thread k; default: one thread per node */
    int n_threads;
    size_t block_pages;         /* B of CYCLIC_BLOCK / RANDOM_BLOCK; default 16 */
    uint64_t seed;              /* RANDOM / RANDOM_BLOCK */
    const unsigned *weights;    /* WEIGHTED_INTERLEAVE: one per node; default all 1 */
    const size_t *capacity_pages; /* BIND_ALL: pages per node; default unlimited */
    size_t page_size;           /* default sysconf(_SC_PAGESIZE) */
};

/* ---- internals (nmp_place_ prefix) --------------------------------------------------- */

#define NMP_PLACE_MPOL_DEFAULT 0
#define NMP_PLACE_MPOL_PREFERRED 1
#define NMP_PLACE_MPOL_MF_MOVE (1u << 1)
#define NMP_PLACE_MPOL_F_MEMS_ALLOWED (1u << 2)
#define NMP_PLACE_MADV_POPULATE_WRITE 23
#define NMP_PLACE_MADV_NOHUGEPAGE 15
#define NMP_PLACE_MASK_WORDS (NUMAPROF_MAX_NODES / (8 * sizeof(unsigned long)))
/* Up to this many runs of equal-node pages, one mbind(2) per run; beyond, move_pages(2)
 * page by page, which does not split the mapping into thousands of VMAs. */
#ifndef NMP_PLACE_MAX_MBIND_RUNS
#define NMP_PLACE_MAX_MBIND_RUNS 256
#endif
#define NMP_PLACE_BATCH 1024

static inline uint64_t nmp_place_splitmix64(uint64_t seed, uint64_t index)
{
    uint64_t z = seed + (index + 1) * UINT64_C(0x9E3779B97F4A7C15);
    z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
    return z ^ (z >> 31);
}

static inline size_t nmp_place_prime_at_least(size_t m)
{
    size_t p = m < 2 ? 2 : m;
    for (;; p++) {
        size_t d;
        int prime = 1;
        for (d = 2; d * d <= p; d++)
            if (p % d == 0) {
                prime = 0;
                break;
            }
        if (prime)
            return p;
    }
}

/* Thread owning page i of n under schedule(static) over t threads (libgomp's split). */
static inline size_t nmp_place_static_owner(size_t i, size_t n, size_t t)
{
    size_t q = n / t, r = n % t;
    if (i < r * (q + 1))
        return i / (q + 1);
    return r + (i - r * (q + 1)) / q;
}

/* ---- public API ------------------------------------------------------------------------ */

/* Node of page i (0-based) of an n_pages range under `policy`, or -1 (errno EINVAL) when
 * the options do not define it.  FIRST_TOUCH has no node: -1 with errno ENOENT. */
static inline int numaprof_node_of_page(enum numaprof_policy policy, size_t i, size_t n_pages,
                                        const struct numaprof_place_opts *o)
{
    size_t m = (size_t)o->n_nodes, b = o->block_pages ? o->block_pages : NUMAPROF_DEFAULT_BLOCK_PAGES;
    if (i >= n_pages || (policy != NUMAPROF_BIND_BLOCK && (m == 0 || !o->nodes))) {
        errno = EINVAL;
        return -1;
    }
    switch (policy) {
    case NUMAPROF_FIRST_TOUCH:
        errno = ENOENT;
        return -1;
    case NUMAPROF_BIND_ALL: {
        size_t k, end = 0;
        if (!o->capacity_pages)
            return o->nodes[0];
        for (k = 0; k < m; k++) {
            end += o->capacity_pages[k];
            if (i < end)
                return o->nodes[k];
        }
        return o->nodes[m - 1];
    }
    case NUMAPROF_BIND_BLOCK:
        if (o->threads_nodes && o->n_threads > 0)
            return o->threads_nodes[nmp_place_static_owner(i, n_pages, (size_t)o->n_threads)];
        if (m == 0 || !o->nodes) {
            errno = EINVAL;
            return -1;
        }
        return o->nodes[nmp_place_static_owner(i, n_pages, m)];
    case NUMAPROF_CYCLIC:
        return o->nodes[i % m];
    case NUMAPROF_CYCLIC_BLOCK:
        return o->nodes[(i / b) % m];
    case NUMAPROF_SKEW_MAPP:
        return o->nodes[(i + i / m + 1) % m];
    case NUMAPROF_PRIME_MAPP: {
        size_t p = nmp_place_prime_at_least(m), v = i % p;
        if (v < m)
            return o->nodes[v];
        return o->nodes[((i / p) * (p - m) + (v - m)) % m];
    }
    case NUMAPROF_RANDOM:
        return o->nodes[nmp_place_splitmix64(o->seed, i) % m];
    case NUMAPROF_RANDOM_BLOCK:
        return o->nodes[nmp_place_splitmix64(o->seed, i / b) % m];
    case NUMAPROF_WEIGHTED_INTERLEAVE: {
        size_t k, total = 0, r, end = 0;
        for (k = 0; k < m; k++)
            total += o->weights ? o->weights[k] : 1;
        if (total == 0) {
            errno = EINVAL;
            return -1;
        }
        r = i % total;
        for (k = 0; k < m; k++) {
            end += o->weights ? o->weights[k] : 1;
            if (r < end)
                return o->nodes[k];
        }
        return o->nodes[m - 1];
    }
    default:
        errno = EINVAL;
        return -1;
    }
}

/* The memory nodes this process may allocate on (get_mempolicy MPOL_F_MEMS_ALLOWED), in
 * increasing order: up to `max` into nodes[]; returns how many, or -1 with errno. */
static inline int numaprof_allowed_nodes(int *nodes, int max)
{
    unsigned long mask[NMP_PLACE_MASK_WORDS];
    int n = 0, bit;
    memset(mask, 0, sizeof mask);
    if (syscall(SYS_get_mempolicy, NULL, mask, (unsigned long)NUMAPROF_MAX_NODES + 1, NULL,
                (unsigned long)NMP_PLACE_MPOL_F_MEMS_ALLOWED) != 0) {
        if (errno != ENOSYS)
            return -1;
        mask[0] = 1; /* kernel without NUMA: node 0 only */
    }
    for (bit = 0; bit < NUMAPROF_MAX_NODES; bit++)
        if ((mask[bit / (8 * sizeof(unsigned long))] >> (bit % (8 * sizeof(unsigned long)))) & 1UL) {
            if (n < max)
                nodes[n] = bit;
            n++;
        }
    return n;
}

/* Node of the cpu the calling thread runs on (getcpu(2)), or -1 with errno.  Inside an
 * OpenMP parallel region, `tn[omp_get_thread_num()] = numaprof_current_node();` builds
 * the threads_nodes of BIND_BLOCK. */
static inline int numaprof_current_node(void)
{
    unsigned cpu = 0, node = 0;
    if (syscall(SYS_getcpu, &cpu, &node, NULL) != 0)
        return -1;
    return (int)node;
}

/* Bind the calling thread to the cpus of `node` (its /sys cpulist, sched_setaffinity(2)):
 * the thread-placement half of bind_block when OpenMP binding is not available.
 * Returns 0, or -1 with errno (ENOENT: no such node, EINVAL: no cpus). */
static inline int numaprof_bind_to_node(int node)
{
    char path[64], list[4096];
    unsigned long mask[NMP_PLACE_MASK_WORDS];
    const char *c;
    int fd, any = 0;
    ssize_t len;
    if (node < 0 || node >= NUMAPROF_MAX_NODES) {
        errno = EINVAL;
        return -1;
    }
    snprintf(path, sizeof path, "/sys/devices/system/node/node%d/cpulist", node);
    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    len = read(fd, list, sizeof list - 1);
    close(fd);
    if (len < 0)
        return -1;
    list[len] = 0;
    memset(mask, 0, sizeof mask);
    for (c = list; *c && *c != '\n';) {
        char *end;
        unsigned long lo = strtoul(c, &end, 10), hi = lo, cpu;
        if (end == c)
            break;
        if (*end == '-')
            hi = strtoul(end + 1, &end, 10);
        for (cpu = lo; cpu <= hi && cpu < NUMAPROF_MAX_NODES; cpu++) {
            mask[cpu / (8 * sizeof(unsigned long))] |= 1UL << (cpu % (8 * sizeof(unsigned long)));
            any = 1;
        }
        c = *end == ',' ? end + 1 : end;
    }
    if (!any) {
        errno = EINVAL;
        return -1;
    }
    return syscall(SYS_sched_setaffinity, 0, sizeof mask, mask) == 0 ? 0 : -1;
}

/* Nodes of the pages of [ptr, ptr + bytes) (move_pages with nodes = NULL): up to `max`
 * entries into out[] (negative: -errno of that page, e.g. -ENOENT not present). */
static inline int numaprof_page_nodes(const void *ptr, size_t bytes, int *out, size_t max)
{
    size_t ps = (size_t)sysconf(_SC_PAGESIZE);
    uintptr_t first = (uintptr_t)ptr & ~(uintptr_t)(ps - 1);
    size_t n = bytes ? ((uintptr_t)ptr + bytes - 1 - first) / ps + 1 : 0, done = 0;
    void *pages[NMP_PLACE_BATCH];
    while (done < n && done < max) {
        size_t k, cnt = n - done < NMP_PLACE_BATCH ? n - done : NMP_PLACE_BATCH;
        if (cnt > max - done)
            cnt = max - done;
        for (k = 0; k < cnt; k++)
            pages[k] = (void *)(first + (done + k) * ps);
        if (syscall(SYS_move_pages, 0, (unsigned long)cnt, pages, NULL, out + done, 0) != 0)
            return -1;
        done += cnt;
    }
    return 0;
}

static inline int nmp_place_populate(uintptr_t first, size_t n, size_t ps)
{
    size_t k;
    if (madvise((void *)first, n * ps, NMP_PLACE_MADV_POPULATE_WRITE) == 0)
        return 0;
    if (errno != EINVAL)
        return -1;
    for (k = 0; k < n; k++) { /* kernels before 5.14: write each page's first byte back */
        volatile char *p = (volatile char *)(first + k * ps);
        char c = *p;
        *p = c;
    }
    return 0;
}

static inline int nmp_place_mbind(uintptr_t addr, size_t len, int mode, int node)
{
    unsigned long mask[NMP_PLACE_MASK_WORDS];
    memset(mask, 0, sizeof mask);
    if (node >= 0)
        mask[(size_t)node / (8 * sizeof(unsigned long))] |= 1UL << ((size_t)node % (8 * sizeof(unsigned long)));
    return (int)syscall(SYS_mbind, (void *)addr, (unsigned long)len, mode, node >= 0 ? mask : NULL,
                        node >= 0 ? (unsigned long)NUMAPROF_MAX_NODES + 1 : 0UL,
                        node >= 0 ? NMP_PLACE_MPOL_MF_MOVE : 0u);
}

/* Fault page `addr` in again on `node`: copy it out, drop it (MADV_DONTNEED), write it
 * back with the thread's policy preferring `node`.  For pages migration cannot move one
 * by one, typically 4 KiB parts of a transparent huge page.  Private memory only. */
static inline int nmp_place_refault(uintptr_t addr, size_t ps, int node)
{
    unsigned long old_mask[NMP_PLACE_MASK_WORDS], mask[NMP_PLACE_MASK_WORDS];
    unsigned char copy[65536];
    int old_mode = 0, rc = 0;
    if (ps > sizeof copy)
        return EINVAL;
    memset(old_mask, 0, sizeof old_mask);
    memset(mask, 0, sizeof mask);
    mask[(size_t)node / (8 * sizeof(unsigned long))] |= 1UL << ((size_t)node % (8 * sizeof(unsigned long)));
    if (syscall(SYS_get_mempolicy, &old_mode, old_mask, (unsigned long)NUMAPROF_MAX_NODES + 1, NULL, 0UL) != 0)
        return errno;
    if (syscall(SYS_set_mempolicy, NMP_PLACE_MPOL_PREFERRED, mask, (unsigned long)NUMAPROF_MAX_NODES + 1) != 0)
        return errno;
    memcpy(copy, (const void *)addr, ps);
    if (madvise((void *)addr, ps, MADV_DONTNEED) != 0)
        rc = errno;
    memcpy((void *)addr, copy, ps);
    if (syscall(SYS_set_mempolicy, old_mode, old_mode ? old_mask : NULL,
                old_mode ? (unsigned long)NUMAPROF_MAX_NODES + 1 : 0UL) != 0 && !rc)
        rc = errno;
    return rc;
}

/* Move the pages of [first, first + n pages) that are present but not on their node.
 * mbind(MPOL_MF_MOVE) without MPOL_MF_STRICT skips pages it cannot migrate silently, and
 * move_pages(2) moves a transparent huge page whole or, asked for its 4 KiB parts one by
 * one, leaves them in a state it reports as absent: so this pass queries every page,
 * moves the strays, then faults in again those still astray or reported absent.
 * Returns 0 or an errno. */
static inline int nmp_place_fix_present(uintptr_t first, size_t n, size_t ps,
                                        enum numaprof_policy policy,
                                        const struct numaprof_place_opts *o)
{
    void *pages[NMP_PLACE_BATCH], *move[NMP_PLACE_BATCH];
    int where[NMP_PLACE_BATCH], to[NMP_PLACE_BATCH], status[NMP_PLACE_BATCH];
    size_t start, k, cnt, nm;
    int attempt;
    for (attempt = 0; attempt < 4; attempt++) {
        int astray = 0;
        for (start = 0; start < n; start += NMP_PLACE_BATCH) {
            cnt = n - start < NMP_PLACE_BATCH ? n - start : NMP_PLACE_BATCH;
            for (k = 0; k < cnt; k++)
                pages[k] = (void *)(first + (start + k) * ps);
            if (syscall(SYS_move_pages, 0, (unsigned long)cnt, pages, NULL, where, 0) != 0)
                return errno;
            nm = 0;
            for (k = 0; k < cnt; k++) {
                int node = numaprof_node_of_page(policy, start + k, n, o);
                /* absent pages take the policy when touched; after a failed move they
                 * may be parts of a huge page in migration: fault those in again too */
                if (where[k] == node || (where[k] < 0 && (attempt == 0 || attempt == 3)))
                    continue;
                move[nm] = pages[k];
                to[nm++] = node;
            }
            if (nm == 0)
                continue;
            astray = 1;
            if (attempt == 3) /* moved, faulted in again twice, still astray */
                return EBUSY;
            if (attempt == 0) {
                if (syscall(SYS_move_pages, 0, (unsigned long)nm, move, to, status,
                            (int)NMP_PLACE_MPOL_MF_MOVE) < 0 && errno != EBUSY && errno != ENOENT)
                    return errno;
            } else {
                for (k = 0; k < nm; k++) {
                    int rc = nmp_place_refault((uintptr_t)move[k], ps, to[k]);
                    if (rc)
                        return rc;
                }
            }
        }
        if (!astray)
            return 0;
    }
    return 0;
}

/* Place [ptr, ptr + bytes) with `policy` and options `opts` (NULL: all defaults). */
static inline int numaprof_place_ex(void *ptr, size_t bytes, enum numaprof_policy policy,
                                    const struct numaprof_place_opts *opts)
{
    struct numaprof_place_opts o;
    int allowed[NUMAPROF_MAX_NODES];
    size_t ps, n, i, runs, start, shortest;
    uintptr_t first;
    int err = 0;
    if ((unsigned)policy >= NUMAPROF_N_POLICIES || (!ptr && bytes)) {
        errno = EINVAL;
        return -1;
    }
    if (bytes == 0)
        return 0;
    memset(&o, 0, sizeof o);
    if (opts)
        o = *opts;
    ps = o.page_size ? o.page_size : (size_t)sysconf(_SC_PAGESIZE);
    first = (uintptr_t)ptr & ~(uintptr_t)(ps - 1);
    n = ((uintptr_t)ptr + bytes - 1 - first) / ps + 1;
    if (policy == NUMAPROF_FIRST_TOUCH)
        return nmp_place_mbind(first, n * ps, NMP_PLACE_MPOL_DEFAULT, -1);
    if (!o.nodes || o.n_nodes <= 0) {
        int m = numaprof_allowed_nodes(allowed, NUMAPROF_MAX_NODES);
        if (m <= 0)
            return -1;
        o.nodes = allowed;
        o.n_nodes = m;
    }
    for (i = 0; i < (size_t)o.n_nodes; i++)
        if (o.nodes[i] < 0 || o.nodes[i] >= NUMAPROF_MAX_NODES) {
            errno = EINVAL;
            return -1;
        }
    /* count runs of pages going to the same node, and the shortest one */
    runs = 0;
    shortest = n;
    start = 0;
    for (i = 0; i < n; i++) {
        int node = numaprof_node_of_page(policy, i, n, &o);
        if (node < 0 || node >= NUMAPROF_MAX_NODES) {
            errno = EINVAL;
            return -1;
        }
        if (i > 0 && node != numaprof_node_of_page(policy, i - 1, n, &o)) {
            shortest = i - start < shortest ? i - start : shortest;
            start = i;
        }
        if (i == 0 || node != numaprof_node_of_page(policy, i - 1, n, &o))
            runs++;
    }
    shortest = n - start < shortest ? n - start : shortest;
    /* A transparent huge page would put 2 MiB on one node: keep them out of ranges whose
     * placement changes at a finer grain. */
    if (runs > 1 && shortest * ps < ((size_t)2 << 20))
        (void)madvise((void *)first, n * ps, NMP_PLACE_MADV_NOHUGEPAGE);
    if (runs <= NMP_PLACE_MAX_MBIND_RUNS) {
        start = 0;
        for (i = 1; i <= n; i++) {
            int node = numaprof_node_of_page(policy, start, n, &o);
            if (i < n && numaprof_node_of_page(policy, i, n, &o) == node)
                continue;
            if (nmp_place_mbind(first + start * ps, (i - start) * ps, NMP_PLACE_MPOL_PREFERRED, node) != 0
                && !err)
                err = errno;
            start = i;
        }
    } else if (nmp_place_populate(first, n, ps) != 0) {
        return -1;
    }
    if (!err)
        err = nmp_place_fix_present(first, n, ps, policy, &o);
    if (err) {
        errno = err;
        return -1;
    }
    return 0;
}

/* Place [ptr, ptr + bytes) with `policy` over all allowed memory nodes (defaults of
 * struct numaprof_place_opts). */
static inline int numaprof_place(void *ptr, size_t bytes, enum numaprof_policy policy)
{
    return numaprof_place_ex(ptr, bytes, policy, NULL);
}

/* Same, over the given nodes (BIND_BLOCK: threads_nodes[k] = node of OpenMP thread k). */
static inline int numaprof_place_nodes(void *ptr, size_t bytes, enum numaprof_policy policy,
                                       const int *nodes, int n_nodes)
{
    struct numaprof_place_opts o;
    memset(&o, 0, sizeof o);
    o.nodes = nodes;
    o.n_nodes = n_nodes;
    return numaprof_place_ex(ptr, bytes, policy, &o);
}

/* WEIGHTED_INTERLEAVE over the given nodes: weights[k] pages on nodes[k] per round (the
 * map of `numaprof suggest`, whose patches call this).  nodes must be given (n_nodes > 0,
 * else -1 with errno EINVAL: the weights belong to these nodes); weights NULL: all 1;
 * all weights 0: -1 with errno EINVAL. */
static inline int numaprof_place_weighted(void *ptr, size_t bytes, const int *nodes,
                                          const unsigned *weights, int n_nodes)
{
    struct numaprof_place_opts o;
    if (!nodes || n_nodes <= 0) {
        errno = EINVAL;
        return -1;
    }
    memset(&o, 0, sizeof o);
    o.nodes = nodes;
    o.n_nodes = n_nodes;
    o.weights = weights;
    return numaprof_place_ex(ptr, bytes, NUMAPROF_WEIGHTED_INTERLEAVE, &o);
}

/* ---- replicas: a copy of read-mostly data on every node ----------------------------
 *
 * Data that every node's threads read and none writes once it is initialised (a lookup
 * table, a mesh's connectivity) has no placement that is local to all of them; a copy
 * per memory node is (the replication of Dashti et al., "Traffic management: a holistic
 * approach to memory placement on NUMA systems", ASPLOS 2013, §3):
 *
 *     fill(table, n);                                   (written once, then only read)
 *     numaprof_replicate(table, n * sizeof *table);
 *     #pragma omp parallel
 *     {
 *         const double *t = numaprof_local(table);      (the copy on this thread's node)
 *         ... reads of t[i] ...
 *     }
 *     numaprof_replicate_free(table);                   (before table is freed or written)
 *
 * numaprof_replicate copies [ptr, ptr + bytes) once onto each allowed memory node (fresh
 * anonymous memory bound to that node with MPOL_BIND before the copy faults it in).
 * numaprof_local(ptr) returns the calling thread's node's copy, or ptr itself (one node,
 * ptr not replicated, or a thread on a node without a copy); it asks getcpu(2) once per
 * NMP_LOCAL_REUSE calls of a thread and otherwise answers from a per-thread cache, so
 * `NUMAPROF_LOCAL(table)[i]` at each read is affordable.  Writes to ptr after the copy are not seen
 * through the copies.  Up to NUMAPROF_MAX_REPLICATED ranges at a time; the registry is
 * shared by every translation unit of the program (a weak definition).  Call
 * numaprof_replicate and numaprof_replicate_free from one thread at a time (serial code);
 * numaprof_local from any.  numaprof_replicate returns 0, or -1 with errno (nothing is
 * replicated then: EEXIST already replicated, ENOSPC registry full). */
#ifndef NUMAPROF_MAX_REPLICATED
#define NUMAPROF_MAX_REPLICATED 64
#endif

struct nmp_replica {
    const void *src;  /* the replicated range; NULL: a free entry */
    size_t map_bytes; /* each copy's mapping */
    void **copy;      /* copy[node]: NUMAPROF_MAX_NODES entries, NULL where none */
};

struct nmp_replica_registry {
    struct nmp_replica e[NUMAPROF_MAX_REPLICATED];
    unsigned gen; /* changed by every numaprof_replicate and numaprof_replicate_free */
};

/* One registry for the whole program: a weak definition in every file that includes this
 * header, merged into one by the linker. */
__attribute__((weak)) struct nmp_replica_registry nmp_replicas;

static inline struct nmp_replica *nmp_replica_find(const void *src)
{
    int k;
    for (k = 0; k < NUMAPROF_MAX_REPLICATED; k++)
        if (src && __atomic_load_n(&nmp_replicas.e[k].src, __ATOMIC_ACQUIRE) == src)
            return &nmp_replicas.e[k];
    return NULL;
}

static inline void nmp_replica_unmap(void **copy, size_t map_bytes)
{
    int node;
    for (node = 0; node < NUMAPROF_MAX_NODES; node++)
        if (copy[node])
            munmap(copy[node], map_bytes);
    munmap((void *)copy, NUMAPROF_MAX_NODES * sizeof *copy);
}

static inline int numaprof_replicate(const void *ptr, size_t bytes)
{
    int allowed[NUMAPROF_MAX_NODES];
    size_t ps = (size_t)sysconf(_SC_PAGESIZE), map_bytes;
    void **copy;
    int m, i, k;
    if (!ptr || !bytes) {
        errno = EINVAL;
        return -1;
    }
    if (nmp_replica_find(ptr)) {
        errno = EEXIST;
        return -1;
    }
    m = numaprof_allowed_nodes(allowed, NUMAPROF_MAX_NODES);
    if (m < 0)
        return -1;
    if (m > NUMAPROF_MAX_NODES)
        m = NUMAPROF_MAX_NODES;
    map_bytes = (bytes + ps - 1) / ps * ps;
    copy = (void **)mmap(NULL, NUMAPROF_MAX_NODES * sizeof *copy, PROT_READ | PROT_WRITE,
                         MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (copy == MAP_FAILED)
        return -1;
    for (i = 0; m > 1 && i < m; i++) {
        void *c = mmap(NULL, map_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (c == MAP_FAILED)
            goto fail;
        copy[allowed[i]] = c;
        /* bound, not preferred: a copy spilling onto another node is no local copy */
        if (nmp_place_mbind((uintptr_t)c, map_bytes, 2 /* MPOL_BIND */, allowed[i]) != 0)
            goto fail;
        memcpy(c, ptr, bytes);
    }
    for (k = 0; k < NUMAPROF_MAX_REPLICATED; k++) {
        const void *expect = NULL;
        if (__atomic_load_n(&nmp_replicas.e[k].src, __ATOMIC_RELAXED) != NULL)
            continue;
        nmp_replicas.e[k].map_bytes = map_bytes;
        nmp_replicas.e[k].copy = copy;
        if (__atomic_compare_exchange_n(&nmp_replicas.e[k].src, &expect, ptr, 0, __ATOMIC_RELEASE,
                                        __ATOMIC_RELAXED)) {
            __atomic_add_fetch(&nmp_replicas.gen, 1, __ATOMIC_RELEASE);
            return 0;
        }
    }
    errno = ENOSPC;
fail:
    {
        int saved = errno;
        nmp_replica_unmap(copy, map_bytes);
        errno = saved;
    }
    return -1;
}

/* The answers numaprof_local gave this thread lately: valid while the registry's
 * generation is unchanged, and for NMP_LOCAL_REUSE calls (then the thread's node is asked
 * again: a thread that moved to another node gets that node's copy). */
#define NMP_LOCAL_WAYS 4
#define NMP_LOCAL_REUSE 4096
struct nmp_local_answer {
    const void *src;
    void *copy;
    unsigned gen, left;
};
static __thread struct nmp_local_answer nmp_local_cache[NMP_LOCAL_WAYS];
/* The calling thread's node's copy of `ptr`, or ptr itself. */
static inline void *numaprof_local(const void *ptr)
{
    struct nmp_local_answer *c = &nmp_local_cache[((uintptr_t)ptr >> 4) % NMP_LOCAL_WAYS];
    unsigned gen = __atomic_load_n(&nmp_replicas.gen, __ATOMIC_ACQUIRE);
    struct nmp_replica *r;
    void *copy = (void *)ptr;
    int node;
    if (c->src == ptr && c->gen == gen && c->left) {
        c->left--;
        return c->copy;
    }
    r = nmp_replica_find(ptr);
    if (r) {
        node = numaprof_current_node();
        if (node >= 0 && node < NUMAPROF_MAX_NODES && r->copy[node])
            copy = r->copy[node];
    }
    c->src = ptr;
    c->copy = copy;
    c->gen = gen;
    c->left = NMP_LOCAL_REUSE;
    return copy;
}
/* numaprof_local with the type of `p` (a pointer or an array): NUMAPROF_LOCAL(table)[i]
 * reads element i of this node's copy.  Cheap enough to use at every access (a lookup in
 * a per-thread cache); once per region and thread is cheaper still. */
#define NUMAPROF_LOCAL(p) ((__typeof__(&(p)[0]))numaprof_local(p))

/* Drops the copies of `ptr` (no thread may still use them); 0, or -1 with errno ENOENT
 * if ptr is not replicated. */
static inline int numaprof_replicate_free(const void *ptr)
{
    struct nmp_replica *r = nmp_replica_find(ptr);
    void **copy;
    if (!r) {
        errno = ENOENT;
        return -1;
    }
    copy = r->copy;
    nmp_replica_unmap(copy, r->map_bytes);
    r->copy = NULL;
    __atomic_store_n(&r->src, (const void *)NULL, __ATOMIC_RELEASE);
    __atomic_add_fetch(&nmp_replicas.gen, 1, __ATOMIC_RELEASE);
    return 0;
}

#ifdef __cplusplus
}
#endif
#endif /* NUMAPROF_PLACE_H */
