/* libnumaprof_shim.so, where the pages are (object_pages, and the copy of numa_maps at
 * exit): the cold path of the shim, apart from the allocation path of shim.c
 * (docs/record.md).
 *
 * When a tracked allocation is released, and at process exit for those still live, the
 * kernel is asked where its pages are: move_pages(2) with no target nodes only reports.
 * Without this an allocation freed before exit has no numa_maps line and its placement
 * could only be guessed from who first touched it, which is wrong whenever a memory
 * policy applies (mbind, numactl --interleave, numaprof_place).  The cost is bounded: at
 * most NMP_PAGES_SAMPLE pages per allocation (one at a hashed offset in each of that many
 * equal strides through larger ones: an even stride would alias with a policy's period,
 * every page of an interleave on one node), asked in chunks on the stack, plus a few
 * get_mempolicy(2) calls for the policy in effect.  move_pages costs ~0.1 us a page, so a
 * program that frees thousands of tracked blocks gets the first NMP_PAGES_EVERY_FREE of
 * them asked, then one in NMP_PAGES_THEN.  With one memory node there is no placement to
 * find and nothing is asked, unless NUMAPROF_SHIM_PAGES=1 (for tests).
 */
#include "shim_int.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#define NMP_PAGES_SAMPLE 1024
#define NMP_PAGES_EVERY_FREE 4096u
#define NMP_PAGES_THEN 64u
#define NMP_PAGES_CHUNK 128
#define NMP_PAGES_NODES 64         /* distinct nodes counted per segment */
#define NMP_PAGES_ENTRIES 256      /* (node, segment) counts per allocation */
#define NMP_PAGES_POLICY_PROBES 4  /* pages whose policy is asked */
#define NMP_PAGES_EXIT_BUDGET (1u << 20) /* pages asked at exit, all allocations together */
#define NMP_MASK_WORDS 16          /* 1024 nodes */

struct node_count {
    int node;
    uint32_t count;
};

/* Memory nodes this process may use (get_mempolicy MPOL_F_MEMS_ALLOWED, read once in the
 * constructor); with one, no policy can place anything and none is asked. */
int g_mem_nodes;
int g_pages_on;                 /* ask at all: two memory nodes, or NUMAPROF_SHIM_PAGES=1 */
static uint32_t g_pages_frees;  /* releases seen by record_pages (atomic) */

/* A well-mixed 32 bits of k (the sample offset inside a stride). */
static uint32_t nmp_hash(uint64_t k)
{
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdULL;
    k ^= k >> 33;
    return (uint32_t)k;
}

int count_mem_nodes(void)
{
    unsigned long mask[NMP_MASK_WORDS];
    memset(mask, 0, sizeof mask);
    if (syscall(SYS_get_mempolicy, NULL, mask, (unsigned long)NMP_MASK_WORDS * 64, 0UL,
                4UL /* MPOL_F_MEMS_ALLOWED */) != 0)
        return 0;
    int n = 0;
    for (int i = 0; i < NMP_MASK_WORDS; i++)
        n += __builtin_popcountl(mask[i]);
    return n;
}

/* The policy mode of the range holding `addr` (MPOL_F_ADDR) and its node mask; -1 if it
 * cannot be asked. */
static int policy_at(uintptr_t addr, unsigned long *mask)
{
    int mode = -1;
    memset(mask, 0, NMP_MASK_WORDS * sizeof *mask);
    if (syscall(SYS_get_mempolicy, &mode, mask, (unsigned long)NMP_MASK_WORDS * 64, addr,
                2UL /* MPOL_F_ADDR */) != 0)
        return -1;
    return mode & 0xff; /* without the MPOL_F_* mode flags */
}

/* The policy that places [first, first + npages pages): the first mode other than the
 * default among a few pages spread over the range (the first may hold only malloc's
 * header), else the thread's own (numactl sets it for the whole process); *mixed when
 * those pages differ in mode or nodes.  NMP_PAGES_POLICY_UNKNOWN on one memory node. */
static unsigned placing_policy(uintptr_t first, uint64_t npages, int *mixed)
{
    const uintptr_t pg = 4096;
    unsigned long mask0[NMP_MASK_WORDS], mask[NMP_MASK_WORDS];
    int mode = -1;
    *mixed = 0;
    if (g_mem_nodes < 2)
        return NMP_PAGES_POLICY_UNKNOWN;
    for (unsigned i = 0; i < NMP_PAGES_POLICY_PROBES && i < npages; i++) {
        uint64_t at = npages > 1 ? i * (npages - 1) / (NMP_PAGES_POLICY_PROBES - 1) : 0;
        int m = policy_at(first + (uintptr_t)at * pg, i ? mask : mask0);
        if (m < 0)
            return NMP_PAGES_POLICY_UNKNOWN;
        if (i == 0)
            mode = m;
        else if (m != mode || memcmp(mask, mask0, sizeof mask) != 0) {
            *mixed = 1;
            if (mode == 0) {
                mode = m;
                memcpy(mask0, mask, sizeof mask);
            }
        }
    }
    if (mode == 0 && syscall(SYS_get_mempolicy, &mode, mask, (unsigned long)NMP_MASK_WORDS * 64,
                             0UL, 0UL) != 0)
        return NMP_PAGES_POLICY_UNKNOWN;
    return (unsigned)(mode & 0xff);
}

/* Appends the node counts of segment `seg` to entries[0..n); returns the new n (entries
 * past NMP_PAGES_ENTRIES are dropped, as nodes past NMP_PAGES_NODES are). */
static int flush_segment(uint64_t *entries, int n, const struct node_count *nodes, int nnodes,
                         unsigned seg)
{
    for (int k = 0; k < nnodes && n < NMP_PAGES_ENTRIES; k++)
        entries[n++] = NMP_PAGES_ENTRY(nodes[k].node, seg, nodes[k].count);
    return n;
}

/* Asks where the pages of [p, p + bytes) are and writes NMP_SHIM_PAGES records (before
 * the FREE record of the release, so the reader pairs them with the allocation).
 * Returns the number of pages asked. */
__attribute__((noinline, cold)) uint64_t record_pages(void *p, size_t bytes, int source)
{
    const uintptr_t pg = 4096;
    uintptr_t first = (uintptr_t)p & ~(pg - 1);
    uintptr_t end = ((uintptr_t)p + bytes + pg - 1) & ~(pg - 1);
    if (!bytes || end <= first || !g_pages_on)
        return 0;
    if (source == NMP_PAGES_AT_FREE) {
        uint32_t k = __atomic_fetch_add(&g_pages_frees, 1, __ATOMIC_RELAXED);
        if (k >= NMP_PAGES_EVERY_FREE && k % NMP_PAGES_THEN)
            return 0;
    }
    int saved = errno;
    uint64_t npages = (end - first) / pg;
    uint64_t asked = npages < NMP_PAGES_SAMPLE ? npages : NMP_PAGES_SAMPLE;
    struct node_count nodes[NMP_PAGES_NODES]; /* of the current segment */
    int nnodes = 0;
    unsigned seg = 0;
    uint64_t entries[NMP_PAGES_ENTRIES];
    int nentries = 0;
    void *addrs[NMP_PAGES_CHUNK];
    int status[NMP_PAGES_CHUNK];
    uint64_t done = 0;
    while (done < asked) {
        unsigned n = asked - done < NMP_PAGES_CHUNK ? (unsigned)(asked - done) : NMP_PAGES_CHUNK;
        for (unsigned i = 0; i < n; i++) {
            /* stride k covers pages [k * npages / asked, (k + 1) * npages / asked) */
            uint64_t k = done + i, lo = k * npages / asked, hi = (k + 1) * npages / asked;
            uint64_t at = lo + (hi > lo + 1 ? (uint64_t)nmp_hash(k) % (hi - lo) : 0);
            addrs[i] = (void *)(first + (uintptr_t)at * pg);
        }
        if (syscall(SYS_move_pages, 0, (unsigned long)n, addrs, NULL, status, 0) != 0) {
            errno = saved;
            return 0; /* no NUMA support in this kernel, or not allowed: nothing known */
        }
        for (unsigned i = 0; i < n; i++) {
            int node = status[i] >= 0 ? status[i] : -1; /* -ENOENT: not present */
            /* the strides run in address order: a segment's pages come together */
            unsigned s = (unsigned)((done + i) * NMP_PAGES_SEGMENTS / asked);
            if (s != seg) {
                nentries = flush_segment(entries, nentries, nodes, nnodes, seg);
                nnodes = 0;
                seg = s;
            }
            int k = 0;
            while (k < nnodes && nodes[k].node != node)
                k++;
            if (k == nnodes) {
                if (nnodes == NMP_PAGES_NODES)
                    continue;
                nodes[nnodes++] = (struct node_count){node, 0};
            }
            nodes[k].count++;
        }
        done += n;
    }
    nentries = flush_segment(entries, nentries, nodes, nnodes, seg);
    int mixed;
    unsigned flags = placing_policy(first, npages, &mixed) | (mixed ? NMP_PAGES_F_MIXED : 0u);
    struct nmp_shim_record r;
    uint64_t t = now_ns();
    for (int k = 0; k < nentries || k == 0; k += NMP_SHIM_MAX_FRAMES) {
        memset(&r, 0, sizeof r);
        r.type = NMP_SHIM_PAGES;
        r.time = t;
        r.addr = (uint64_t)(uintptr_t)p;
        r.size = bytes;
        r.prev = asked;
        r.kind = (uint8_t)source;
        r.flags = (uint16_t)flags;
        for (int j = k; j < nentries && j - k < NMP_SHIM_MAX_FRAMES; j++)
            r.frames[r.nframes++] = entries[j];
        emit(&r);
    }
    errno = saved;
    return asked;
}

/* Live set of the exit scan: address -> bytes, open addressing (0 empty, 1 removed). */
struct live_ent {
    uint64_t addr, size;
};

static size_t live_slot(const struct live_ent *t, size_t cap, uint64_t addr, int for_insert)
{
    size_t k = (size_t)((addr >> 4) * 0x9E3779B97F4A7C15ULL) & (cap - 1);
    while (t[k].addr && t[k].addr != addr && !(for_insert && t[k].addr == 1))
        k = (k + 1) & (cap - 1);
    return k;
}

/* At process exit: the pages of the allocations still live, found by reading this
 * image's own records back (the same pairing as the collector's, by address; what a
 * partial munmap left behind is asked too, and the reader discards it, as no live
 * allocation has its address). */
void pages_at_exit(void)
{
    int fd = open_record_file(O_RDONLY);
    if (fd < 0)
        return;
    struct stat st;
    uint64_t nrec = 0;
    if (fstat(fd, &st) == 0 && st.st_size > NMP_SHIM_HEADER_SIZE)
        nrec = ((uint64_t)st.st_size - NMP_SHIM_HEADER_SIZE) / sizeof(struct nmp_shim_record);
    if (g_hdr && __atomic_load_n(&g_hdr->next, __ATOMIC_ACQUIRE) < nrec)
        nrec = __atomic_load_n(&g_hdr->next, __ATOMIC_ACQUIRE);
    if (!nrec || nrec > (1u << 22)) { /* beyond 4 M records the table would cost too much */
        close(fd);
        return;
    }
    size_t cap = 64;
    while (cap < 2 * nrec)
        cap *= 2;
    struct live_ent *t = sys_mmap(NULL, cap * sizeof *t, PROT_READ | PROT_WRITE,
                                  MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (t == MAP_FAILED || lseek(fd, NMP_SHIM_HEADER_SIZE, SEEK_SET) != NMP_SHIM_HEADER_SIZE) {
        if (t != MAP_FAILED)
            syscall(SYS_munmap, t, cap * sizeof *t);
        close(fd);
        return;
    }
    struct nmp_shim_record buf[32];
    uint64_t seen = 0;
    while (seen < nrec) {
        ssize_t n = read(fd, buf, sizeof buf);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < (ssize_t)sizeof buf[0])
            break;
        for (size_t i = 0; i < (size_t)n / sizeof buf[0] && seen < nrec; i++, seen++) {
            const struct nmp_shim_record *r = &buf[i];
            if (r->type == NMP_SHIM_START) {
                memset(t, 0, cap * sizeof *t); /* what the previous image left died with it */
            } else if (r->type == NMP_SHIM_ALLOC && r->addr > 1) {
                if (r->kind == NMP_KIND_REALLOC && (r->flags & NMP_SHIM_F_PREV_TRACKED)) {
                    size_t k = live_slot(t, cap, r->prev, 0);
                    if (t[k].addr == r->prev)
                        t[k].addr = 1;
                }
                if (r->flags & NMP_SHIM_F_ENDED)
                    continue; /* released already (a deferred record) */
                size_t k = live_slot(t, cap, r->addr, 0);
                if (t[k].addr != r->addr)
                    k = live_slot(t, cap, r->addr, 1);
                t[k] = (struct live_ent){r->addr, r->size};
            } else if (r->type == NMP_SHIM_FREE && r->addr > 1) {
                size_t k = live_slot(t, cap, r->addr, 0);
                if (t[k].addr == r->addr)
                    t[k].addr = 1;
            }
        }
    }
    close(fd);
    uint64_t budget = NMP_PAGES_EXIT_BUDGET;
    for (size_t k = 0; k < cap && budget; k++) {
        if (t[k].addr <= 1)
            continue;
        uint64_t asked = record_pages((void *)(uintptr_t)t[k].addr, t[k].size, NMP_PAGES_AT_EXIT);
        budget = asked < budget ? budget - asked : 0;
    }
    syscall(SYS_munmap, t, cap * sizeof *t);
}

/* At process exit: /proc/self/numa_maps copied to <dir>/numa_maps.<pid>. */
void copy_numa_maps(const char *dir)
{
    char dst[3200], tmp[3300];
    snprintf(dst, sizeof dst, "%s/numa_maps.%ld", dir, (long)getpid());
    snprintf(tmp, sizeof tmp, "%s/.numa_maps.%ld.shim", dir, (long)getpid());
    int in = open("/proc/self/numa_maps", O_RDONLY | O_CLOEXEC);
    if (in < 0)
        return;
    int out = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (out < 0) {
        close(in);
        return;
    }
    char buf[8192];
    int ok = 1;
    for (;;) {
        ssize_t n = read(in, buf, sizeof buf);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            ok = n == 0;
            break;
        }
        if (write(out, buf, (size_t)n) != n) {
            ok = 0;
            break;
        }
    }
    close(in);
    if (close(out) < 0)
        ok = 0;
    if (!ok || rename(tmp, dst) < 0)
        unlink(tmp);
}
