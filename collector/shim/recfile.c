/* The allocation shim's record file, <NUMAPROF_DIR>/shim.<pid>.bin (nmp_shim_format.h):
 * opening it, mapping its chunks and claiming a slot per record (emit), or the write(2)
 * fallback.  The interposed functions and what they record are shim.c's; every symbol
 * here is hidden (shim_int.h). */
#include "nmp_shim_format.h"
#include "shim_int.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

/* The record file of this process.  Mapped (the default), no descriptor stays open: the
 * file is opened by name for the moment a chunk is mapped, so the program sees no
 * descriptor of ours, and closing or dup2()ing over descriptors it did not open (closefrom,
 * a daemon's close-all loop) neither stops the recording nor sends records into a file of
 * the program's.  The inode is checked on each open: a file put in its place is not ours.
 * In write(2) mode (the fallback) opening by name per record cost 6x, so one descriptor
 * stays open, high and close-on-exec, and is checked against the inode before each
 * write: closed or taken over by the program, it is replaced, never written through. */
static char g_path[3200];
static dev_t g_dev;
static ino_t g_ino;
static int g_wfd = -1;
/* Mapped mode (nmp_shim_format.h): the header and the chunks of the file; NULL where not
 * mapped yet.  g_hdr NULL: write(2) mode.  Chunk sizes double from 256 slots (11 pages:
 * a short-lived process costs 48 KiB of disk) to 65536 slots (11 MiB), then stay. */
#define NMP_CHUNK0 256u
#define NMP_DOUBLINGS 9
#define NMP_CHUNK_BIG ((uint64_t)NMP_CHUNK0 << (NMP_DOUBLINGS - 1))
#define NMP_DOUBLING_END ((uint64_t)NMP_CHUNK0 * ((1u << NMP_DOUBLINGS) - 1))
#define NMP_CHUNKS 4096 /* 268 million records */
#ifdef MADV_POPULATE_WRITE
#define NMP_MADV_POPULATE_WRITE MADV_POPULATE_WRITE
#else
#define NMP_MADV_POPULATE_WRITE 23
#endif
struct nmp_shim_header *g_hdr;
int g_pool_on;                  /* the file has a pool of deferred records */
struct nmp_shim_record *g_pool; /* the pool, mapped at its first use (pool_map); NULL before */
static char g_pool_path[3200];
#define NMP_POOL_BYTES ((size_t)NMP_SHIM_POOL_SLOTS * sizeof(struct nmp_shim_record))
static char *g_chunks[NMP_CHUNKS];
uint64_t g_dropped; /* records write(2) refused (atomic) */

uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

void *sys_mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
    long r = syscall(SYS_mmap, addr, len, prot, flags, fd, off);
    return r < 0 && r > -4096 ? MAP_FAILED : (void *)r;
}

/* Slots [first, first + count) of chunk k. */
static void chunk_range(unsigned k, uint64_t *first, uint64_t *count)
{
    if (k < NMP_DOUBLINGS) {
        *first = (uint64_t)NMP_CHUNK0 * ((1ULL << k) - 1);
        *count = (uint64_t)NMP_CHUNK0 << k;
    } else {
        *first = NMP_DOUBLING_END + (k - NMP_DOUBLINGS) * NMP_CHUNK_BIG;
        *count = NMP_CHUNK_BIG;
    }
}

static unsigned chunk_of(uint64_t idx)
{
    if (idx < NMP_DOUBLING_END)
        return 63 - (unsigned)__builtin_clzll(idx / NMP_CHUNK0 + 1);
    uint64_t k = NMP_DOUBLINGS + (idx - NMP_DOUBLING_END) / NMP_CHUNK_BIG;
    return k < NMP_CHUNKS ? (unsigned)k : NMP_CHUNKS;
}

/* Opens the record file (close it after use); -1 if it is gone or was replaced. */
int open_record_file(int flags)
{
    int fd = open(g_path, flags | O_CLOEXEC);
    struct stat st;
    if (fd >= 0 && (fstat(fd, &st) != 0 || st.st_dev != g_dev || st.st_ino != g_ino)) {
        close(fd);
        fd = -1;
    }
    return fd;
}

/* write(2) mode: the descriptor to append to, -1 if the file cannot be opened. */
static int write_fd(void)
{
    int fd = __atomic_load_n(&g_wfd, __ATOMIC_ACQUIRE);
    struct stat st;
    if (fd >= 0 && fstat(fd, &st) == 0 && st.st_dev == g_dev && st.st_ino == g_ino)
        return fd;
    /* never closed here: that number may be the program's now */
    int nfd = open_record_file(O_WRONLY | O_APPEND);
    if (nfd < 0)
        return -1;
    int hi = fcntl(nfd, F_DUPFD_CLOEXEC, 512); /* clear of the numbers programs dup2() onto */
    if (hi >= 0) {
        close(nfd);
        nfd = hi;
    }
    if (!__atomic_compare_exchange_n(&g_wfd, &fd, nfd, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
        close(nfd); /* another thread reopened it first */
        return fd;
    }
    return nfd;
}

/* Maps chunk k (allocating its disk blocks first: a shared mapping of a hole would raise
 * SIGBUS in the target when the disk is full).  Only system calls: signal-safe. */
static __attribute__((noinline)) char *map_chunk(unsigned k)
{
    uint64_t first, count;
    chunk_range(k, &first, &count);
    off_t off = NMP_SHIM_HEADER_SIZE + (off_t)(first * sizeof(struct nmp_shim_record));
    size_t len = (size_t)count * sizeof(struct nmp_shim_record);
    int fd = open_record_file(O_RDWR);
    if (fd < 0)
        return NULL;
    if (syscall(SYS_fallocate, fd, 0, off, (off_t)len) != 0) {
        struct stat st;
        /* a file system without fallocate: extend the file instead */
        if (errno != EOPNOTSUPP || fstat(fd, &st) != 0 ||
            (st.st_size < off + (off_t)len && ftruncate(fd, off + (off_t)len) != 0)) {
            close(fd);
            return NULL;
        }
    }
    /* Populated now, in the kernel, and writable: the target takes no page fault per page
     * of records (each one a write-protect fault with the file system's page_mkwrite, and
     * a page-fault sample the collector would process).  MAP_POPULATE alone maps a shared
     * file mapping read-only, so MADV_POPULATE_WRITE (Linux 5.14) does the write faults
     * here in one go; older kernels fall back to the read-only population. */
    char *m = sys_mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, off);
    if (m != MAP_FAILED && syscall(SYS_madvise, m, len, NMP_MADV_POPULATE_WRITE) != 0) {
        syscall(SYS_munmap, m, len);
        m = sys_mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, off);
    }
    close(fd);
    if (m == MAP_FAILED)
        return NULL;
    char *expect = NULL;
    if (!__atomic_compare_exchange_n(&g_chunks[k], &expect, m, 0, __ATOMIC_ACQ_REL,
                                     __ATOMIC_ACQUIRE)) {
        syscall(SYS_munmap, m, len); /* another thread (or a signal handler) was first */
        return expect;
    }
    return m;
}

static struct nmp_shim_record *claim_slot_in_file(void)
{
    uint64_t idx = __atomic_fetch_add(&g_hdr->next, 1, __ATOMIC_RELAXED);
    unsigned k = chunk_of(idx);
    if (k >= NMP_CHUNKS)
        return NULL;
    uint64_t first, count;
    chunk_range(k, &first, &count);
    char *base = __atomic_load_n(&g_chunks[k], __ATOMIC_ACQUIRE);
    if (!base && !(base = map_chunk(k)))
        return NULL;
    return (struct nmp_shim_record *)base + (idx - first);
}

void emit(struct nmp_shim_record *r)
{
    if (!r->tid)
        r->tid = shim_tid();
    if (!r->time)
        r->time = now_ns();
    if (g_hdr) {
        struct nmp_shim_record *slot = claim_slot_in_file();
        if (!slot) {
            __atomic_add_fetch(&g_dropped, 1, __ATOMIC_RELAXED);
            return;
        }
        /* the type last: a reader never takes a half-written slot for a record */
        memcpy((char *)slot + sizeof slot->type, (char *)r + sizeof r->type,
               sizeof *r - sizeof r->type);
        __atomic_store_n(&slot->type, r->type, __ATOMIC_RELEASE);
        return;
    }
    int fd = write_fd();
    for (;;) {
        ssize_t n = fd >= 0 ? write(fd, r, sizeof *r) : -1;
        if (n == (ssize_t)sizeof *r)
            break;
        if (n < 0 && errno == EINTR)
            continue;
        __atomic_add_fetch(&g_dropped, 1, __ATOMIC_RELAXED);
        /* part of a record (disk full): whatever followed would be misaligned */
        if (n > 0)
            __atomic_store_n(&g_active, 0, __ATOMIC_RELAXED);
        break;
    }
}


/* Drops this process's view of the file (after fork: the parent's mappings). */
void close_record_file(void)
{
    for (unsigned k = 0; k < NMP_CHUNKS; k++) {
        if (g_chunks[k]) {
            uint64_t first, count;
            chunk_range(k, &first, &count);
            syscall(SYS_munmap, g_chunks[k], (size_t)count * sizeof(struct nmp_shim_record));
            g_chunks[k] = NULL;
        }
    }
    if (g_hdr)
        syscall(SYS_munmap, g_hdr, NMP_SHIM_HEADER_SIZE);
    g_hdr = NULL;
    if (g_pool)
        syscall(SYS_munmap, g_pool, NMP_POOL_BYTES);
    g_pool = NULL;
    g_pool_on = 0;
    struct stat st;
    if (g_wfd >= 0 && fstat(g_wfd, &st) == 0 && st.st_dev == g_dev && st.st_ino == g_ino)
        close(g_wfd); /* still ours, not a descriptor of the program's */
    g_wfd = -1;
}

/* Maps the header of an open shim file; returns 0, or -1 for write(2) mode. */
static int map_header(int fd, int created)
{
    struct stat st;
    if (fstat(fd, &st) != 0)
        return -1;
    struct nmp_shim_header *h = sys_mmap(NULL, NMP_SHIM_HEADER_SIZE, PROT_READ | PROT_WRITE,
                                         MAP_SHARED, fd, 0);
    if (h == MAP_FAILED)
        return -1;
    if (!created) {
        if (memcmp(h->magic, NMP_SHIM_MAGIC, 8) != 0 || h->version != NMP_SHIM_VERSION ||
            h->record_size != sizeof(struct nmp_shim_record)) {
            syscall(SYS_munmap, h, NMP_SHIM_HEADER_SIZE);
            return -1;
        }
        /* a previous image may have appended with write(2): continue after that */
        const uint64_t rs = sizeof(struct nmp_shim_record);
        uint64_t in_file = st.st_size > NMP_SHIM_HEADER_SIZE
                               ? ((uint64_t)st.st_size - NMP_SHIM_HEADER_SIZE + rs - 1) / rs
                               : 0;
        if (h->next < in_file)
            h->next = in_file;
    }
    g_hdr = h;
    g_pool_on = h->pool_slots == NMP_SHIM_POOL_SLOTS;
    return 0;
}

/* Maps the pool, creating shim.<pid>.pool with its disk blocks allocated (a shared
 * mapping of a hole would raise SIGBUS in the target when the disk is full), at its first
 * use: a process that never allocates a tracked or sampled block pays nothing for it.
 * NULL if it cannot be mapped (blocks are then recorded at once).  Only system calls:
 * signal-safe. */
struct nmp_shim_record *pool_map(void)
{
    struct nmp_shim_record *pool = __atomic_load_n(&g_pool, __ATOMIC_ACQUIRE);
    if (pool || !g_pool_on)
        return pool;
    int fd = open(g_pool_path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0) {
        g_pool_on = 0;
        return NULL;
    }
    void *m = MAP_FAILED;
    struct stat st;
    if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) &&
        ((uint64_t)st.st_size >= NMP_POOL_BYTES ||
         syscall(SYS_fallocate, fd, 0, (off_t)0, (off_t)NMP_POOL_BYTES) == 0))
        m = sys_mmap(NULL, NMP_POOL_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (m == MAP_FAILED) {
        g_pool_on = 0; /* no space, or no mapping: every record at once */
        return NULL;
    }
    struct nmp_shim_record *expect = NULL;
    if (!__atomic_compare_exchange_n(&g_pool, &expect, (struct nmp_shim_record *)m, 0,
                                     __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
        syscall(SYS_munmap, m, NMP_POOL_BYTES); /* another thread (or a signal handler) was first */
        return expect;
    }
    return m;
}

/* A new image of this process: the blocks the previous one left in the pool died with
 * it; their records go into slots before the new image's START closes them. */
static void drain_previous_pool(void)
{
    if (!g_pool_on || access(g_pool_path, F_OK) != 0 || !pool_map())
        return;
    for (unsigned k = 0; k < NMP_SHIM_POOL_SLOTS; k++) {
        struct nmp_shim_record *r = &g_pool[k];
        if (!__atomic_load_n(&r->type, __ATOMIC_ACQUIRE))
            continue;
        struct nmp_shim_record copy = *r;
        emit(&copy);
        __atomic_store_n(&r->type, 0, __ATOMIC_RELEASE);
    }
}

int open_record(const char *dir, uint64_t threshold, uint64_t small_period)
{
    snprintf(g_path, sizeof g_path, "%s/shim.%ld.bin", dir, (long)getpid());
    snprintf(g_pool_path, sizeof g_pool_path, "%s/shim.%ld.pool", dir, (long)getpid());
    int created = 1;
    int fd = open(g_path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0 && errno == EEXIST) {
        created = 0; /* a previous image of this process (execve) */
        fd = open(g_path, O_RDWR | O_CLOEXEC);
    }
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0) {
        shim_debug("cannot open %s: %s; not recording", g_path, strerror(errno));
        if (fd >= 0)
            close(fd);
        return -1;
    }
    g_dev = st.st_dev;
    g_ino = st.st_ino;
    if (created) {
        static char page[NMP_SHIM_HEADER_SIZE];
        struct nmp_shim_header h;
        memset(&h, 0, sizeof h);
        memcpy(h.magic, NMP_SHIM_MAGIC, 8);
        h.version = NMP_SHIM_VERSION;
        h.record_size = sizeof(struct nmp_shim_record);
        h.header_size = NMP_SHIM_HEADER_SIZE;
        /* a pool only where records are mapped (created at its first use, pool_map) */
        const char *m = getenv("NUMAPROF_SHIM_MODE");
        if (!(m && strcmp(m, "write") == 0))
            h.pool_slots = NMP_SHIM_POOL_SLOTS;
        memcpy(page, &h, sizeof h);
        if (pwrite(fd, page, sizeof page, 0) != (ssize_t)sizeof page) {
            close(fd);
            return -1;
        }
    }
    /* NUMAPROF_SHIM_MODE=write: for file systems where shared mappings misbehave */
    const char *mode = getenv("NUMAPROF_SHIM_MODE");
    if ((mode && strcmp(mode, "write") == 0) || map_header(fd, created) != 0)
        shim_debug("%s: one write(2) per record", g_path);
    close(fd);
    if (!created)
        drain_previous_pool();
    struct nmp_shim_record r;
    memset(&r, 0, sizeof r);
    r.type = NMP_SHIM_START;
    r.addr = threshold;
    r.size = small_period;
    emit(&r);
    return 0;
}
