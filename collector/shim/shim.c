/* libnumaprof_shim.so: the LD_PRELOAD allocation tracker (docs/record.md).
 *
 * With NUMAPROF_DIR set, every allocation of at least NUMAPROF_ALLOC_THRESHOLD bytes
 * (default 64 KiB) through malloc, calloc, realloc, reallocarray, posix_memalign,
 * aligned_alloc, memalign, valloc, pvalloc, mmap/mmap64/mremap and numa_alloc_* is
 * recorded with its call stack in <NUMAPROF_DIR>/shim.<pid>.bin (nmp_shim_format.h), and
 * so is the release of such a block (free, realloc, munmap, mremap, numa_free).  Smaller
 * allocations bump per-thread counters, written as one TOTALS record when the thread
 * ends, or at process exit for the threads still running then; and about one in every
 * NUMAPROF_SMALL_SAMPLE bytes a thread allocates below the threshold (default 256 KiB)
 * is recorded with its call stack and, when it is freed, its release: a sample of the
 * small blocks, from which the analyzer finds arrays built from many of them.  The record
 * of a heap block (tracked or sampled) waits in the file's pool until its release; one
 * released within NUMAPROF_SHORT_LIVED ns (default 1 ms) is only counted in a per-site
 * summary, any other becomes one record carrying its release time (nmp_shim_format.h,
 * "Deferred records").  Without NUMAPROF_DIR the shim only forwards calls.
 *
 * Properties the target relies on:
 *  - Reentrant: a thread-local guard passes allocations made while the shim itself is
 *    working (backtrace, dlsym, libnuma's internal mmap) straight to the real allocator.
 *  - Thread- and signal-safe: a record is built on the stack and copied into a slot of
 *    the shared-mapped file claimed by an atomic increment (or, where the file cannot be
 *    mapped, written with one write(2) in O_APPEND mode); the recording path uses no
 *    locks and no stdio, only clock_gettime, the libgcc unwinder (initialised in the
 *    constructor) and system calls.
 *  - Invisible: no descriptor of the shim stays open in the program (the file is opened
 *    by name to map a chunk, then closed), so a program that closes every descriptor or
 *    dup2()s onto any number neither loses records nor gets them written into its files.
 *  - Fork-safe: the child of fork() opens shim.<childpid>.bin (pthread_atfork).
 *  - Exec-safe: the environment survives execve; the new image's constructor appends a
 *    START record to the same file (same pid) and its own records after it.
 *  - The real allocators are glibc's __libc_* entry points, so there is no dlsym
 *    bootstrap problem; mmap/munmap/libnuma are found with dlsym(RTLD_NEXT).
 * Where the pages of a tracked allocation are is asked of the kernel when it is released
 * and, for those still live, at process exit (NMP_SHIM_PAGES records).
 * At process exit /proc/self/numa_maps is copied to <NUMAPROF_DIR>/numa_maps.<pid>.
 * Debug messages go to stderr only when NUMAPROF_DEBUG is set.
 *
 * Everything but the interposed functions is static (or hidden, shim_int.h), so the
 * library exports nothing else, and the path every malloc takes (a threshold test, the
 * small-allocation countdown, then the real allocator) and the record path inline without
 * link-time optimisation.  The record file (opening, mapping, claiming slots) is
 * recfile.c; the cold path asking where freed pages are is pages.c; call stacks are
 * stack.c.
 */
#include "nmp_shim_format.h"
#include "shim_int.h"
#include "numaprof_defaults.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define NMP_EXPORT __attribute__((visibility("default")))
/* initial-exec: no __tls_get_addr (which may allocate) on the allocation path; fine for a
 * library loaded at startup through LD_PRELOAD. */
#define NMP_TLS __thread __attribute__((tls_model("initial-exec")))

extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void __libc_free(void *);
extern void *__libc_memalign(size_t, size_t);
extern void *__libc_valloc(size_t);
extern void *__libc_pvalloc(size_t);

int g_active;                          /* set once the file is open */
static uint64_t g_threshold = NMP_DEFAULT_ALLOC_THRESHOLD;
static char g_dir[3072];
static pthread_key_t g_key;
static int g_key_ok;
static void *(*real_mmap)(void *, size_t, int, int, int, off_t);
static int (*real_munmap)(void *, size_t);
static void *(*real_mremap)(void *, size_t, size_t, int, ...);

static NMP_TLS int t_guard;
static NMP_TLS uint32_t t_tid;

/* Counters of the allocations below the threshold: one slot per live thread rather than
 * plain thread-locals, so that process exit can also report the threads still running
 * then (an OpenMP pool is never joined).  Only the owner writes its slot. */
#define NMP_SLOTS 1024
enum { SLOT_FREE, SLOT_OWNED, SLOT_TAKEN, SLOT_FLUSHING };
struct sums;
struct slot {
    uint32_t state, tid;
    uint64_t allocs, bytes;
    struct sums *sums; /* its thread's short-lived block summaries; NULL until needed */
    char pad[32];
};
_Static_assert(sizeof(struct slot) == 64, "a slot is a cache line");
static struct slot g_slots[NMP_SLOTS] __attribute__((aligned(64)));
static struct slot g_overflow; /* threads beyond NMP_SLOTS: updated atomically */
static NMP_TLS struct slot *t_slot;

/* Sampling of the allocations below the threshold.  Each thread counts down the bytes
 * it allocates; the allocation that reaches zero is recorded, and the next countdown is
 * drawn uniformly from [1, 2 * period] (mean period, never in step with a program that
 * allocates in a fixed cycle of sizes).  The sampled blocks still live are kept in a
 * small set-associative table (one cache line a set), so that free() can tell one from
 * the blocks that were not sampled with one load; a block the table has no room for is
 * not sampled. */
#define NMP_SAMPLED_SETS 4096
#define NMP_SAMPLED_WAYS 8
static uint64_t g_small_period = NMP_DEFAULT_SMALL_SAMPLE;
static uintptr_t (*g_sampled)[NMP_SAMPLED_WAYS]; /* mapped in the constructor */
static uint32_t g_sampled_live;                   /* entries in use (atomic) */
/* Sampled blocks whose records are in the pool, counted per hashed address: a small
 * block's free() looks in the pool only when its counter is not 0 (two bytes of an
 * 8 KiB table, instead of a set of the pool's keys for every free). */
#define NMP_POOLED_FILTER 4096
static uint16_t g_pooled_small[NMP_POOLED_FILTER]; /* atomic */

static inline uint16_t *pooled_count(uintptr_t p)
{
    return &g_pooled_small[((uint64_t)(p >> 4) * 0x9e3779b97f4a7c15ull) >> (64 - 12)];
}
_Static_assert(NMP_POOLED_FILTER == 1 << 12, "pooled_count takes the top 12 bits");
static NMP_TLS int64_t t_small_left;              /* bytes to the next sample */
static NMP_TLS uint64_t t_rng;                    /* 0: this thread has not drawn yet */

/* ---- async-signal-safe helpers ---- */

void shim_debug(const char *fmt, ...)
{
    const char *e = getenv("NUMAPROF_DEBUG");
    if (!e || !*e || (e[0] == '0' && !e[1]))
        return;
    char buf[512];
    int n = snprintf(buf, sizeof buf, "numaprof shim[%ld]: ", (long)getpid());
    va_list ap;
    va_start(ap, fmt);
    if (n > 0 && n < (int)sizeof buf)
        n += vsnprintf(buf + n, sizeof buf - (size_t)n, fmt, ap);
    va_end(ap);
    if (n > (int)sizeof buf - 2)
        n = (int)sizeof buf - 2;
    if (n > 0) {
        buf[n++] = '\n';
        ssize_t w = write(2, buf, (size_t)n);
        (void)w;
    }
}

uint32_t shim_tid(void)
{
    if (!t_tid)
        t_tid = (uint32_t)syscall(SYS_gettid);
    return t_tid;
}

static int pool_put(const struct nmp_shim_record *r);
static int sampled_add(const void *p);

/* `t`: the allocation's time, 0 for now. */
static __attribute__((noinline)) void record_alloc_at(void *p, size_t size, int kind,
                                                      void *prev, unsigned flags, uint64_t t)
{
    int saved = errno;
    t_guard = 1;
    struct nmp_shim_record r;
    memset(&r, 0, sizeof r);
    r.type = NMP_SHIM_ALLOC;
    r.addr = (uint64_t)(uintptr_t)p;
    r.size = size;
    r.kind = (uint8_t)kind;
    r.prev = (uint64_t)(uintptr_t)prev;
    r.flags = (uint16_t)flags;
    if (flags & NMP_SHIM_F_SAMPLED)
        r.period = (uint32_t)g_small_period;
    shim_call_stack(&r, (uintptr_t)&r);
    r.time = t ? t : now_ns();
    r.tid = shim_tid();
    /* a heap block's record waits in the pool for its release (deferred records, below);
     * a sampled block the pool has no room for goes into the table of sampled blocks,
     * and is not sampled after all if that is full too */
    int deferred = kind != NMP_KIND_MMAP && kind != NMP_KIND_NUMA && pool_put(&r);
    if (deferred && (flags & NMP_SHIM_F_SAMPLED))
        __atomic_add_fetch(pooled_count((uintptr_t)p), 1, __ATOMIC_RELAXED);
    else if (!deferred && (!(flags & NMP_SHIM_F_SAMPLED) || sampled_add(p)))
        emit(&r);
    t_guard = 0;
    errno = saved;
}

static inline void record_alloc(void *p, size_t size, int kind, void *prev, unsigned flags)
{
    record_alloc_at(p, size, kind, prev, flags, 0);
}

static __attribute__((noinline, cold)) void record_free(void *p, size_t len, int kind)
{
    int saved = errno;
    struct nmp_shim_record r;
    /* only the header part: the frames stay zero */
    memset(&r, 0, sizeof r);
    r.type = NMP_SHIM_FREE;
    r.addr = (uint64_t)(uintptr_t)p;
    r.size = len;
    r.kind = (uint8_t)kind;
    emit(&r);
    errno = saved;
}

static void emit_totals(uint32_t owner, uint64_t allocs, uint64_t bytes, uint64_t dropped)
{
    if (!allocs && !dropped)
        return;
    struct nmp_shim_record r;
    memset(&r, 0, sizeof r);
    r.type = NMP_SHIM_TOTALS;
    r.tid = owner;
    r.size = bytes;
    r.prev = allocs;
    r.addr = dropped;
    emit(&r);
}

void shim_watch_thread(void)
{
    /* a non-NULL value makes the key's destructor run at thread exit */
    if (g_key_ok)
        pthread_setspecific(g_key, (void *)1);
}

static __attribute__((noinline)) struct slot *claim_slot(void)
{
    for (int i = 0; i < NMP_SLOTS; i++) {
        uint32_t expect = SLOT_FREE;
        if (__atomic_load_n(&g_slots[i].state, __ATOMIC_RELAXED) == SLOT_FREE &&
            __atomic_compare_exchange_n(&g_slots[i].state, &expect, SLOT_OWNED, 0,
                                        __ATOMIC_ACQ_REL, __ATOMIC_RELAXED)) {
            struct slot *s = &g_slots[i];
            s->tid = shim_tid();
            __atomic_store_n(&s->allocs, 0, __ATOMIC_RELAXED);
            __atomic_store_n(&s->bytes, 0, __ATOMIC_RELAXED);
            t_slot = s;
            shim_watch_thread();
            return s;
        }
    }
    return t_slot = &g_overflow;
}

/* The next countdown; 0 (no sample) when the thread draws for the first time. */
static __attribute__((noinline)) int small_draw(void)
{
    int first = t_rng == 0;
    if (first)
        t_rng = (now_ns() ^ ((uint64_t)shim_tid() << 32)) | 1;
    /* xorshift64 */
    t_rng ^= t_rng << 13;
    t_rng ^= t_rng >> 7;
    t_rng ^= t_rng << 17;
    t_small_left = (int64_t)(1 + t_rng % (2 * g_small_period));
    return !first;
}

/* Counts an allocation below the threshold; 1 if it is to be sampled. */
static inline int count_small(size_t n)
{
    struct slot *s = t_slot;
    if (__builtin_expect(!s, 0))
        s = claim_slot();
    if (__builtin_expect(s == &g_overflow, 0)) {
        __atomic_add_fetch(&s->allocs, 1, __ATOMIC_RELAXED);
        __atomic_add_fetch(&s->bytes, n, __ATOMIC_RELAXED);
    } else {
        /* owner-only plain updates; the relaxed stores keep the exit path's reads whole */
        __atomic_store_n(&s->allocs, s->allocs + 1, __ATOMIC_RELAXED);
        __atomic_store_n(&s->bytes, s->bytes + n, __ATOMIC_RELAXED);
    }
    if (__builtin_expect((t_small_left -= (int64_t)n) > 0, 1) || !g_sampled)
        return 0;
    return small_draw();
}

static inline uintptr_t (*sampled_set(const void *p))[NMP_SAMPLED_WAYS]
{
    uint64_t h = ((uint64_t)(uintptr_t)p >> 4) * 0x9e3779b97f4a7c15ull;
    return &g_sampled[h >> (64 - 12)]; /* 4096 = 2^12 sets */
}

_Static_assert(NMP_SAMPLED_SETS == 1 << 12, "sampled_set takes the top 12 bits");

static int sampled_add(const void *p)
{
    uintptr_t *set = *sampled_set(p);
    for (int w = 0; w < NMP_SAMPLED_WAYS; w++) {
        uintptr_t expect = 0;
        if (__atomic_load_n(&set[w], __ATOMIC_RELAXED) == 0 &&
            __atomic_compare_exchange_n(&set[w], &expect, (uintptr_t)p, 0, __ATOMIC_ACQ_REL,
                                        __ATOMIC_RELAXED)) {
            __atomic_add_fetch(&g_sampled_live, 1, __ATOMIC_RELAXED);
            return 1;
        }
    }
    return 0;
}

/* Was `p` a sampled block?  Takes it out of the table. */
static inline int sampled_take(const void *p)
{
    if (!__atomic_load_n(&g_sampled_live, __ATOMIC_RELAXED))
        return 0;
    uintptr_t *set = *sampled_set(p);
    for (int w = 0; w < NMP_SAMPLED_WAYS; w++) {
        uintptr_t expect = (uintptr_t)p;
        if (__atomic_load_n(&set[w], __ATOMIC_RELAXED) == (uintptr_t)p &&
            __atomic_compare_exchange_n(&set[w], &expect, 0, 0, __ATOMIC_ACQ_REL,
                                        __ATOMIC_RELAXED)) {
            __atomic_sub_fetch(&g_sampled_live, 1, __ATOMIC_RELAXED);
            return 1;
        }
    }
    return 0;
}

/* ---- deferred records of tracked heap blocks (nmp_shim_format.h) ----
 *
 * The ALLOC record of a tracked malloc/calloc/realloc/aligned block is written into the
 * file's pool (set-associative by address) rather than into a slot; at the release it
 * comes out: a block that lived less than g_short_ns becomes a count in its releasing
 * thread's summary of its site, any other one record with its release time.  An
 * allocation-heavy program's short-lived blocks so cost no slot, no FREE record and no
 * objects row each.  g_pool_keys, private memory, says which pool slot holds which
 * address (0 empty, KEY_BUSY while a thread writes or reads the slot's record). */
#define KEY_BUSY ((uintptr_t)1)
static uintptr_t (*g_pool_keys)[NMP_SHIM_POOL_WAYS]; /* mapped with the pool */
static uint64_t g_short_ns = NMP_DEFAULT_SHORT_LIVED;

static inline unsigned pool_set(uintptr_t p)
{
    uint64_t h = ((uint64_t)p >> 4) * 0x9e3779b97f4a7c15ull;
    return (unsigned)(h >> (64 - 10)); /* 1024 = 2^10 sets */
}
_Static_assert(NMP_SHIM_POOL_SETS == 1 << 10, "pool_set takes the top 10 bits");

/* Puts a complete ALLOC record into the pool; 0 if its set is full (or there is none). */
static int pool_put(const struct nmp_shim_record *r)
{
    struct nmp_shim_record *pool = g_pool;
    if (!g_pool_keys || (!pool && !(pool = pool_map())))
        return 0;
    unsigned set = pool_set((uintptr_t)r->addr);
    uintptr_t *keys = g_pool_keys[set];
    for (int w = 0; w < NMP_SHIM_POOL_WAYS; w++) {
        uintptr_t expect = 0;
        if (__atomic_load_n(&keys[w], __ATOMIC_RELAXED) == 0 &&
            __atomic_compare_exchange_n(&keys[w], &expect, KEY_BUSY, 0, __ATOMIC_ACQUIRE,
                                        __ATOMIC_RELAXED)) {
            struct nmp_shim_record *slot = &pool[set * NMP_SHIM_POOL_WAYS + (unsigned)w];
            memcpy((char *)slot + sizeof slot->type, (const char *)r + sizeof r->type,
                   sizeof *r - sizeof r->type);
            __atomic_store_n(&slot->type, r->type, __ATOMIC_RELEASE); /* last: see the file */
            __atomic_store_n(&keys[w], (uintptr_t)r->addr, __ATOMIC_RELEASE);
            return 1;
        }
    }
    return 0;
}

/* Takes the record of block `p` out of the pool into `out`; 0 if it is not there. */
static int pool_take(uintptr_t p, struct nmp_shim_record *out)
{
    if (!g_pool_keys || p <= KEY_BUSY)
        return 0;
    unsigned set = pool_set(p);
    uintptr_t *keys = g_pool_keys[set];
    for (int w = 0; w < NMP_SHIM_POOL_WAYS; w++) {
        uintptr_t expect = p;
        if (__atomic_load_n(&keys[w], __ATOMIC_RELAXED) == p &&
            __atomic_compare_exchange_n(&keys[w], &expect, KEY_BUSY, 0, __ATOMIC_ACQUIRE,
                                        __ATOMIC_RELAXED)) {
            struct nmp_shim_record *slot = &g_pool[set * NMP_SHIM_POOL_WAYS + (unsigned)w];
            memcpy(out, slot, sizeof *out);
            __atomic_store_n(&slot->type, 0, __ATOMIC_RELEASE);
            __atomic_store_n(&keys[w], 0, __ATOMIC_RELEASE);
            return 1;
        }
    }
    return 0;
}

/* At process exit: the blocks still live go into slots as ordinary ALLOC records (what
 * the pages query at exit and a reader of the slots expect). */
static void pool_drain(void)
{
    if (!g_pool_keys || !g_pool)
        return;
    for (unsigned set = 0; set < NMP_SHIM_POOL_SETS; set++)
        for (int w = 0; w < NMP_SHIM_POOL_WAYS; w++) {
            uintptr_t p = __atomic_load_n(&g_pool_keys[set][w], __ATOMIC_RELAXED);
            struct nmp_shim_record r;
            if (p > KEY_BUSY && pool_take(p, &r))
                emit(&r);
        }
}

/* Per-thread summaries of short-lived blocks: direct-mapped by site (call stack, kind,
 * allocating thread); a summary is written out (a SHORT record) when another site takes
 * its entry, when it spans NMP_SUM_WINDOW_NS, and when its thread or the process ends. */
#define NMP_SUMS 16
#define NMP_SUM_WINDOW_NS 1000000000ull
struct sums {
    uint64_t key[NMP_SUMS];
    /* sampled small blocks: the allocations they stand for, sum of max(period / size, 1)
     * (written out as the size that gives it, below) */
    double stands_for[NMP_SUMS];
    struct nmp_shim_record r[NMP_SUMS];
};
static NMP_TLS int t_in_sums; /* a signal handler's free() must not touch the summaries */

static uint64_t site_key(const struct nmp_shim_record *r)
{
    uint64_t h = ((uint64_t)r->tid << 32) ^ ((uint64_t)r->flags << 16) ^
                 ((uint64_t)r->kind << 8) ^ r->nframes;
    for (unsigned i = 0; i < r->nframes && i < NMP_SHIM_MAX_FRAMES; i++) {
        h = (h ^ r->frames[i]) * 0x9e3779b97f4a7c15ull;
        h ^= h >> 29;
    }
    return h | 1;
}

static void sum_flush(struct sums *m, unsigned i)
{
    if (!m->key[i])
        return;
    struct nmp_shim_record r = m->r[i];
    m->key[i] = 0;
    /* a sampled block of s bytes stands for period / s allocations: the size written is
     * the one for which count x period / size is what the blocks counted stand for */
    if ((r.flags & NMP_SHIM_F_SAMPLED) && m->stands_for[i] > 0) {
        double size = (double)g_small_period * (double)r.period / m->stands_for[i];
        r.size = size < 1 ? 1 : (uint64_t)(size + 0.5);
    }
    emit(&r);
}

static void sums_flush_all(struct sums *m)
{
    for (unsigned i = 0; m && i < NMP_SUMS; i++)
        sum_flush(m, i);
}

/* Counts block `r`, released at `t`, in this thread's summary of its site; 0 if it
 * cannot (no table: it is then recorded one by one). */
static int sum_add(const struct nmp_shim_record *r, uint64_t t)
{
    struct slot *s = t_slot;
    if (!s)
        s = claim_slot();
    if (s == &g_overflow || t_in_sums)
        return 0;
    t_in_sums = 1;
    struct sums *m = s->sums;
    if (!m) {
        void *p = sys_mmap(NULL, sizeof *m, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                           -1, 0);
        if (p == MAP_FAILED) {
            t_in_sums = 0;
            return 0;
        }
        s->sums = m = p;
    }
    uint64_t key = site_key(r);
    unsigned i = (unsigned)(key >> 32) % NMP_SUMS;
    struct nmp_shim_record *e = &m->r[i];
    uint64_t end = r->addr + r->size;
    if (m->key[i] != key) {
        sum_flush(m, i);
        memcpy(e, r, sizeof *e);
        e->type = NMP_SHIM_SHORT;
        e->flags = r->flags & NMP_SHIM_F_SAMPLED;
        e->period = 1;
        e->prev = end;
        e->end = t;
        e->extra = t - r->time;
        m->key[i] = key;
        m->stands_for[i] = 0;
    } else {
        e->period++;
        if (r->addr < e->addr)
            e->addr = r->addr;
        if (end > e->prev)
            e->prev = end;
        if (r->size > e->size)
            e->size = r->size;
        if (r->time < e->time)
            e->time = r->time;
        if (t > e->end)
            e->end = t;
        e->extra += t - r->time;
    }
    if (r->flags & NMP_SHIM_F_SAMPLED) {
        double w = (double)g_small_period / (double)(r->size ? r->size : 1);
        m->stands_for[i] += w > 1 ? w : 1;
    }
    if (e->period == UINT32_MAX || t - e->time >= NMP_SUM_WINDOW_NS)
        sum_flush(m, i);
    t_in_sums = 0;
    return 1;
}

/* The release of a block whose record was in the pool: 1 if it was short-lived (counted
 * in its summary; nothing else to record).  Otherwise the caller asks where its pages
 * are and calls release_ended(). */
static int release_short(const struct nmp_shim_record *r, uint64_t t)
{
    return t - r->time < g_short_ns && sum_add(r, t);
}

static void release_ended(struct nmp_shim_record *r, uint64_t t)
{
    r->end = t;
    r->flags |= NMP_SHIM_F_ENDED | (r->tid == shim_tid() ? NMP_SHIM_F_OWNER_FREED : 0u);
    emit(r);
}

/* Releases tracked heap block `p` (free, or realloc before the call): its deferred record
 * leaves the pool, or, recorded at once, its FREE is written. */
static __attribute__((noinline)) void release_tracked(void *p)
{
    int saved = errno;
    struct nmp_shim_record r;
    if (pool_take((uintptr_t)p, &r)) {
        uint64_t t = now_ns();
        if (!release_short(&r, t)) {
            record_pages(p, malloc_usable_size(p), NMP_PAGES_AT_FREE);
            release_ended(&r, now_ns());
        }
    } else {
        record_pages(p, malloc_usable_size(p), NMP_PAGES_AT_FREE);
        record_free(p, 0, 1);
    }
    errno = saved;
}

/* A sampled allocation below the threshold (not sampled after all if the table is full). */
static __attribute__((noinline)) void record_small(void *p, size_t size, int kind)
{
    if (p)
        record_alloc(p, size, kind, NULL, NMP_SHIM_F_SAMPLED);
}

/* The release of a block below the threshold: if it was sampled, its record. */
static inline void release_small(void *p)
{
    struct nmp_shim_record r;
    uint16_t *count = pooled_count((uintptr_t)p);
    if (__atomic_load_n(count, __ATOMIC_RELAXED) && pool_take((uintptr_t)p, &r)) {
        __atomic_sub_fetch(count, 1, __ATOMIC_RELAXED);
        int saved = errno;
        uint64_t t = now_ns();
        if (!release_short(&r, t))
            release_ended(&r, t);
        errno = saved;
    } else if (sampled_take(p))
        record_free(p, 0, 1);
}

static void thread_exit(void *unused)
{
    (void)unused;
    stack_thread_exit();
    struct slot *s = t_slot;
    t_slot = &g_overflow; /* what this thread still allocates while it ends */
    if (!g_active || !s || s == &g_overflow)
        return;
    uint32_t expect = SLOT_OWNED;
    /* unless process exit has already reported this slot */
    if (__atomic_compare_exchange_n(&s->state, &expect, SLOT_FLUSHING, 0, __ATOMIC_ACQ_REL,
                                    __ATOMIC_RELAXED)) {
        sums_flush_all(s->sums);
        emit_totals(s->tid, s->allocs, s->bytes, 0);
        __atomic_store_n(&s->state, SLOT_FREE, __ATOMIC_RELEASE);
    }
}

/* At process exit: every live thread's counters, the overflow and the lost records. */
static void flush_all_totals(void)
{
    for (int i = 0; i < NMP_SLOTS; i++) {
        struct slot *s = &g_slots[i];
        uint32_t expect = SLOT_OWNED;
        if (__atomic_load_n(&s->state, __ATOMIC_RELAXED) == SLOT_OWNED &&
            __atomic_compare_exchange_n(&s->state, &expect, SLOT_TAKEN, 0, __ATOMIC_ACQ_REL,
                                        __ATOMIC_RELAXED)) {
            /* a thread still running may be adding to its summaries: what it adds from
             * here on is not counted */
            sums_flush_all(s->sums);
            emit_totals(s->tid, __atomic_load_n(&s->allocs, __ATOMIC_RELAXED),
                        __atomic_load_n(&s->bytes, __ATOMIC_RELAXED), 0);
        }
    }
    emit_totals(0, __atomic_exchange_n(&g_overflow.allocs, 0, __ATOMIC_RELAXED),
                __atomic_exchange_n(&g_overflow.bytes, 0, __ATOMIC_RELAXED),
                __atomic_load_n(&g_dropped, __ATOMIC_RELAXED));
}

static void atfork_child(void)
{
    t_tid = 0;
    if (!g_active)
        return;
    t_guard = 1;
    /* the parent's counters stay the parent's; its other threads do not exist here */
    for (int i = 0; i < NMP_SLOTS; i++)
        if (g_slots[i].sums)
            syscall(SYS_munmap, g_slots[i].sums, sizeof *g_slots[i].sums);
    memset(g_slots, 0, sizeof g_slots);
    memset(&g_overflow, 0, sizeof g_overflow);
    t_slot = NULL;
    __atomic_store_n(&g_dropped, 0, __ATOMIC_RELAXED);
    close_record_file();
    /* the parent's blocks stay the parent's: freed here, they are recorded as FREEs */
    if (g_pool_keys)
        memset(g_pool_keys, 0, sizeof(uintptr_t[NMP_SHIM_POOL_SETS][NMP_SHIM_POOL_WAYS]));
    if (g_sampled)
        memset(g_sampled, 0, sizeof(uintptr_t[NMP_SAMPLED_SETS][NMP_SAMPLED_WAYS]));
    __atomic_store_n(&g_sampled_live, 0, __ATOMIC_RELAXED);
    memset(g_pooled_small, 0, sizeof g_pooled_small);
    if (open_record(g_dir, g_threshold, g_small_period) < 0)
        g_active = 0;
    else {
        tls_record_thread(); /* the child's one thread, in its own tls.<pid> */
        tls_record_modules();
    }
    t_guard = 0;
}

__attribute__((constructor(101))) static void shim_init(void)
{
    const char *dir = getenv("NUMAPROF_DIR");
    if (!dir || !*dir || strlen(dir) >= sizeof g_dir - 64)
        return;
    t_guard = 1;
    g_dir[0] = 0;
    if (dir[0] != '/') {
        /* the program may chdir(): anchor a relative directory now */
        if (!getcwd(g_dir, sizeof g_dir - 64) ||
            strlen(g_dir) + strlen(dir) + 2 >= sizeof g_dir - 64) {
            t_guard = 0;
            return;
        }
        strcat(g_dir, "/");
    }
    strcat(g_dir, dir);
    const char *th = getenv("NUMAPROF_ALLOC_THRESHOLD");
    if (th && *th) {
        char *end;
        unsigned long long v = strtoull(th, &end, 10);
        if (*end == 0)
            g_threshold = v;
    }
    const char *sl = getenv("NUMAPROF_SHORT_LIVED");
    if (sl && *sl) {
        char *end;
        unsigned long long v = strtoull(sl, &end, 10);
        if (*end == 0)
            g_short_ns = v;
    }
    const char *ss = getenv("NUMAPROF_SMALL_SAMPLE");
    if (ss && *ss) {
        char *end;
        unsigned long long v = strtoull(ss, &end, 10);
        if (*end == 0 && v <= UINT32_MAX / 2)
            g_small_period = v;
    }
    if (g_small_period) {
        /* pages of the table the program never reaches cost nothing */
        void *m = sys_mmap(NULL, sizeof(uintptr_t[NMP_SAMPLED_SETS][NMP_SAMPLED_WAYS]),
                           PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (m != MAP_FAILED)
            g_sampled = m;
    }
    real_mmap = (void *(*)(void *, size_t, int, int, int, off_t))dlsym(RTLD_NEXT, "mmap");
    real_munmap = (int (*)(void *, size_t))dlsym(RTLD_NEXT, "munmap");
    real_mremap = (void *(*)(void *, size_t, size_t, int, ...))dlsym(RTLD_NEXT, "mremap");
    stack_init();
    g_key_ok = pthread_key_create(&g_key, thread_exit) == 0;
    g_mem_nodes = count_mem_nodes();
    const char *force = getenv("NUMAPROF_SHIM_PAGES");
    g_pages_on = g_mem_nodes >= 2 || (force && strcmp(force, "1") == 0);
    pthread_atfork(NULL, NULL, atfork_child);
    void *keys = sys_mmap(NULL, sizeof(uintptr_t[NMP_SHIM_POOL_SETS][NMP_SHIM_POOL_WAYS]),
                          PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (keys != MAP_FAILED)
        g_pool_keys = keys;
    if (open_record(g_dir, g_threshold, g_small_period) == 0) {
        tls_init(g_dir);
        __atomic_store_n(&g_active, 1, __ATOMIC_RELEASE);
        shim_debug("recording allocations >= %llu bytes into %s", (unsigned long long)g_threshold,
              g_dir);
    }
    t_guard = 0;
}

__attribute__((destructor(101))) static void shim_fini(void)
{
    if (!g_active)
        return;
    int g = t_guard;
    t_guard = 1;
    flush_all_totals();
    pool_drain();
    pages_at_exit();
    copy_numa_maps(g_dir);
    t_guard = g;
}

/* ---- the interposed functions ---- */

#define TRACKING() (__builtin_expect(g_active, 1) && !t_guard)

/* Was this heap block at or above the threshold?  glibc keeps the chunk size (plus three
 * flag bits) in the word before the block, and a chunk is never smaller than its usable
 * size: small blocks are ruled out without a call. */
static inline int tracked_block(void *p)
{
    size_t chunk = ((const size_t *)p)[-1] & ~(size_t)7;
    return chunk >= g_threshold && malloc_usable_size(p) >= g_threshold;
}

NMP_EXPORT void *malloc(size_t n)
{
    void *p = __libc_malloc(n);
    if (!TRACKING())
        return p;
    if (n < g_threshold) {
        if (count_small(n))
            record_small(p, n, NMP_KIND_MALLOC);
    } else if (p)
        record_alloc(p, n, NMP_KIND_MALLOC, NULL, 0);
    return p;
}

NMP_EXPORT void *calloc(size_t n, size_t m)
{
    void *p = __libc_calloc(n, m);
    size_t bytes;
    if (!TRACKING() || __builtin_mul_overflow(n, m, &bytes))
        return p;
    if (bytes < g_threshold) {
        if (count_small(bytes))
            record_small(p, bytes, NMP_KIND_CALLOC);
    } else if (p)
        record_alloc(p, bytes, NMP_KIND_CALLOC, NULL, 0);
    return p;
}

NMP_EXPORT void free(void *p)
{
    if (p && TRACKING()) {
        /* before the block can be handed to another thread */
        if (tracked_block(p))
            release_tracked(p);
        else
            release_small(p);
    }
    __libc_free(p);
}

NMP_EXPORT void *realloc(void *p, size_t n)
{
    if (!TRACKING())
        return __libc_realloc(p, n);
    int old_tracked = p && tracked_block(p);
    /* a deferred old block leaves the pool before the allocator may give its address to
     * another thread; whether it was short-lived is decided now, counted once it is gone */
    struct nmp_shim_record old;
    int pooled = old_tracked && pool_take((uintptr_t)p, &old);
    int old_short = pooled && now_ns() - old.time < g_short_ns;
    if (old_tracked && !old_short)
        record_pages(p, malloc_usable_size(p), NMP_PAGES_AT_FREE);
    else if (!old_tracked && p)
        release_small(p); /* a sampled small block ends, before the allocator may hand its
                             address to another thread */
    if (n < g_threshold) {
        if (pooled) {
            uint64_t t = now_ns();
            if (!old_short || !sum_add(&old, t))
                release_ended(&old, t);
        } else if (old_tracked)
            record_free(p, 0, 1);
        int sample = n && count_small(n);
        void *q = __libc_realloc(p, n);
        if (sample)
            record_small(q, n, NMP_KIND_REALLOC);
        return q;
    }
    void *q = __libc_realloc(p, n);
    int saved = errno;
    uint64_t t = now_ns(); /* the old block's end is the new one's start */
    if (pooled) {
        if (!q) {
            if (!pool_put(&old)) /* not released after all */
                emit(&old);
        } else if (!old_short || !sum_add(&old, t))
            release_ended(&old, t);
    }
    errno = saved;
    if (q)
        record_alloc_at(q, n, NMP_KIND_REALLOC, p,
                        old_tracked && !pooled ? NMP_SHIM_F_PREV_TRACKED : 0, t);
    return q;
}

NMP_EXPORT void *reallocarray(void *p, size_t n, size_t m)
{
    size_t bytes;
    if (__builtin_mul_overflow(n, m, &bytes)) {
        errno = ENOMEM;
        return NULL;
    }
    return realloc(p, bytes);
}

static void *aligned(void *p, size_t n)
{
    if (TRACKING()) {
        if (n < g_threshold) {
            if (count_small(n))
                record_small(p, n, NMP_KIND_ALIGNED);
        } else if (p)
            record_alloc(p, n, NMP_KIND_ALIGNED, NULL, 0);
    }
    return p;
}

NMP_EXPORT int posix_memalign(void **out, size_t align, size_t n)
{
    if (align < sizeof(void *) || (align & (align - 1)))
        return EINVAL;
    int saved = errno;
    void *p = __libc_memalign(align, n);
    errno = saved;
    if (!p)
        return ENOMEM;
    *out = aligned(p, n);
    return 0;
}

NMP_EXPORT void *aligned_alloc(size_t align, size_t n)
{
    return aligned(__libc_memalign(align, n), n);
}
NMP_EXPORT void *memalign(size_t align, size_t n) { return aligned(__libc_memalign(align, n), n); }
NMP_EXPORT void *valloc(size_t n) { return aligned(__libc_valloc(n), n); }
NMP_EXPORT void *pvalloc(size_t n) { return aligned(__libc_pvalloc(n), n); }

static void *do_mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
    void *(*fn)(void *, size_t, int, int, int, off_t) = real_mmap;
    void *p;
    if (fn) {
        p = fn(addr, len, prot, flags, fd, off);
    } else {
        /* called before the constructor (another library's initialiser) */
        long r = syscall(SYS_mmap, addr, len, prot, flags, fd, off);
        p = r < 0 && r > -4096 ? MAP_FAILED : (void *)r;
    }
    /* PROT_NONE reservations and guard areas hold no data */
    if (p != MAP_FAILED && len >= g_threshold && prot != PROT_NONE && TRACKING())
        record_alloc(p, len, NMP_KIND_MMAP, NULL, 0);
    return p;
}

NMP_EXPORT void *mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
    return do_mmap(addr, len, prot, flags, fd, off);
}

NMP_EXPORT void *mmap64(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
    return do_mmap(addr, len, prot, flags, fd, off);
}

NMP_EXPORT int munmap(void *addr, size_t len)
{
    if (len >= g_threshold && TRACKING()) {
        record_pages(addr, len, NMP_PAGES_AT_FREE);
        record_free(addr, len, NMP_KIND_MMAP);
    }
    if (real_munmap)
        return real_munmap(addr, len);
    return (int)syscall(SYS_munmap, addr, len);
}

/* A mapping that grows, shrinks or moves: the old one ends (recorded before the call, as
 * its range may be reused as soon as the kernel let go of it), the result is a new one. */
NMP_EXPORT void *mremap(void *old, size_t old_len, size_t new_len, int flags, ...)
{
    void *want = NULL;
    if (flags & MREMAP_FIXED) {
        va_list ap;
        va_start(ap, flags);
        want = va_arg(ap, void *);
        va_end(ap);
    }
    int track = TRACKING() && (old_len >= g_threshold || new_len >= g_threshold);
    if (track && old_len >= g_threshold) {
        record_pages(old, old_len, NMP_PAGES_AT_FREE);
        record_free(old, old_len, NMP_KIND_MMAP);
    }
    void *p;
    if (real_mremap)
        p = real_mremap(old, old_len, new_len, flags, want);
    else {
        long r = syscall(SYS_mremap, old, old_len, new_len, flags, want);
        p = r < 0 && r > -4096 ? MAP_FAILED : (void *)r;
    }
    if (track && p != MAP_FAILED && new_len >= g_threshold)
        record_alloc(p, new_len, NMP_KIND_MMAP, NULL, 0);
    else if (track && p == MAP_FAILED && old_len >= g_threshold) {
        int saved = errno;
        record_alloc(old, old_len, NMP_KIND_MMAP, NULL, 0); /* it was not ended after all */
        errno = saved;
    }
    return p;
}

/* ---- libnuma (only when the program uses it; resolved on first use) ---- */

static void *next_sym(void **slot, const char *name)
{
    void *fn = __atomic_load_n(slot, __ATOMIC_ACQUIRE);
    if (!fn) {
        int g = t_guard;
        t_guard = 1;
        fn = dlsym(RTLD_NEXT, name);
        t_guard = g;
        __atomic_store_n(slot, fn, __ATOMIC_RELEASE);
    }
    return fn;
}

/* Calls the real libnuma function with the guard up (its own mmap is not a second
 * object), then records the result. */
#define NUMA_ALLOC_WRAPPER(name, params, args)                                     \
    NMP_EXPORT void *name params                                                    \
    {                                                                               \
        static void *slot;                                                          \
        void *(*fn) params = (void *(*) params)next_sym(&slot, #name);              \
        if (!fn) {                                                                  \
            errno = ENOSYS;                                                         \
            return NULL;                                                            \
        }                                                                           \
        int g = t_guard;                                                            \
        t_guard = 1;                                                                \
        void *p = fn args;                                                          \
        t_guard = g;                                                                \
        if (p && size >= g_threshold && TRACKING())                                 \
            record_alloc(p, size, NMP_KIND_NUMA, NULL, 0);                          \
        return p;                                                                   \
    }

NUMA_ALLOC_WRAPPER(numa_alloc_onnode, (size_t size, int node), (size, node))
NUMA_ALLOC_WRAPPER(numa_alloc_interleaved, (size_t size), (size))
NUMA_ALLOC_WRAPPER(numa_alloc_local, (size_t size), (size))
NUMA_ALLOC_WRAPPER(numa_alloc, (size_t size), (size))

NMP_EXPORT void numa_free(void *mem, size_t size)
{
    static void *slot;
    void (*fn)(void *, size_t) = (void (*)(void *, size_t))next_sym(&slot, "numa_free");
    if (mem && size >= g_threshold && TRACKING()) {
        record_pages(mem, size, NMP_PAGES_AT_FREE);
        record_free(mem, 0, NMP_KIND_NUMA);
    }
    if (!fn)
        return;
    int g = t_guard;
    t_guard = 1;
    fn(mem, size);
    t_guard = g;
}
