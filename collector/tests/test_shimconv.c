/* nmp_shim_convert on hand-written shim files: pairing of frees, realloc, munmap ranges,
 * exec boundaries, stack dedup, totals, foreign and truncated files; the objects and
 * stack_frames columns are read back from disk. */
#include "nmp_collect.h"
#include "nmp_shim_format.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "nmp_check.h"


static char dir[2048];

/* ---- writing shim files ---- */

static FILE *shim_open(unsigned pid)
{
    char path[2200];
    snprintf(path, sizeof path, "%s/shim.%u.bin", dir, pid);
    FILE *f = fopen(path, "wb");
    if (!f)
        abort();
    static char page[NMP_SHIM_HEADER_SIZE];
    struct nmp_shim_header h = {{0}, NMP_SHIM_VERSION, sizeof(struct nmp_shim_record),
                                NMP_SHIM_HEADER_SIZE, 0, 0};
    memcpy(h.magic, NMP_SHIM_MAGIC, 8);
    memcpy(page, &h, sizeof h);
    fwrite(page, sizeof page, 1, f);
    return f;
}

static uint64_t clock_ns = 1000;

static uint64_t rec(FILE *f, uint32_t type, uint32_t tid, uint64_t addr, uint64_t size,
                    int kind, uint64_t prev, uint16_t flags, int nframes, uint64_t frame0)
{
    struct nmp_shim_record r;
    memset(&r, 0, sizeof r);
    r.type = type;
    r.tid = tid;
    r.time = clock_ns += 10;
    r.addr = addr;
    r.size = size;
    r.kind = (uint8_t)kind;
    r.prev = prev;
    r.flags = flags;
    r.nframes = (uint8_t)nframes;
    for (int i = 0; i < nframes; i++)
        r.frames[i] = frame0 + (uint64_t)i;
    fwrite(&r, sizeof r, 1, f);
    return r.time;
}

#define ALLOC(f, tid, addr, size, kind, frame0) \
    rec(f, NMP_SHIM_ALLOC, tid, addr, size, kind, 0, 0, 3, frame0)
#define FREE(f, addr) rec(f, NMP_SHIM_FREE, 1, addr, 0, 1, 0, 0, 0, 0)

/* ---- reading the tables back ---- */

struct col {
    unsigned char *data;
    size_t n; /* values */
};

static struct col read_col(const char *table, const char *name, const char *dtype, size_t width)
{
    char path[2300];
    snprintf(path, sizeof path, "%s/%s.%s.col", dir, table, name);
    struct col c = {0};
    FILE *f = fopen(path, "rb");
    CHECK(f != NULL);
    if (!f)
        return c;
    struct stat st;
    CHECK(fstat(fileno(f), &st) == 0 && (st.st_mode & 0777) == 0600);
    c.data = malloc((size_t)st.st_size + 1);
    size_t got = fread(c.data, 1, (size_t)st.st_size, f);
    fclose(f);
    CHECK(got == (size_t)st.st_size && got >= 16);
    CHECK(memcmp(c.data, "NMPCOL01", 8) == 0);
    CHECK(strncmp((char *)c.data + 8, dtype, 8) == 0);
    CHECK((got - 16) % width == 0);
    c.n = (got - 16) / width;
    return c;
}

static uint64_t at(const struct col *c, size_t i, size_t width)
{
    uint64_t v = 0;
    if (i < c->n)
        memcpy(&v, c->data + 16 + i * width, width);
    return v;
}

struct objects {
    struct col time, free_time, pid, tid, addr, size, kind, stack, prev;
    size_t n;
};

static void read_objects(struct objects *o)
{
    o->time = read_col("objects", "time", "<u8", 8);
    o->free_time = read_col("objects", "free_time", "<u8", 8);
    o->pid = read_col("objects", "pid", "<u4", 4);
    o->tid = read_col("objects", "tid", "<u4", 4);
    o->addr = read_col("objects", "addr", "<u8", 8);
    o->size = read_col("objects", "size", "<u8", 8);
    o->kind = read_col("objects", "kind", "|u1", 1);
    o->stack = read_col("objects", "stack", "<u4", 4);
    o->prev = read_col("objects", "prev", "<u8", 8);
    o->n = o->time.n;
    CHECK(o->free_time.n == o->n && o->pid.n == o->n && o->tid.n == o->n && o->addr.n == o->n &&
          o->size.n == o->n && o->kind.n == o->n && o->stack.n == o->n && o->prev.n == o->n);
}

static void free_objects(struct objects *o)
{
    struct col *cs[] = {&o->time, &o->free_time, &o->pid, &o->tid, &o->addr,
                        &o->size, &o->kind, &o->stack, &o->prev};
    for (size_t i = 0; i < sizeof cs / sizeof cs[0]; i++)
        free(cs[i]->data);
}

/* index of the object allocated at time t */
static size_t by_time(const struct objects *o, uint64_t t)
{
    for (size_t i = 0; i < o->n; i++)
        if (at(&o->time, i, 8) == t)
            return i;
    CHECK(!"object not found");
    return 0;
}

static int exists(const char *name)
{
    char path[2300];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    return access(path, F_OK) == 0;
}

static void fresh_dir(const char *name)
{
    check_fresh_dir(dir, sizeof dir, name);
}

static void test_pairing(void)
{
    fresh_dir("shimconv_pairing");
    FILE *f = shim_open(100);
    rec(f, NMP_SHIM_START, 100, 65536, 0, 0, 0, 0, 0, 0);
    uint64_t tA = ALLOC(f, 101, 0x1000, 100000, NMP_KIND_MALLOC, 0x400100);
    uint64_t tB = ALLOC(f, 102, 0x2000, 200000, NMP_KIND_CALLOC, 0x400100); /* same stack */
    uint64_t fA = FREE(f, 0x1000);
    uint64_t tC = ALLOC(f, 101, 0x1000, 300000, NMP_KIND_MALLOC, 0x500000); /* reuse */
    FREE(f, 0x9999000); /* unmatched: ignored */
    uint64_t fC = FREE(f, 0x1000);
    /* realloc of a tracked block */
    uint64_t tD = ALLOC(f, 101, 0x3000, 70000, NMP_KIND_MALLOC, 0x400100);
    uint64_t tE = rec(f, NMP_SHIM_ALLOC, 101, 0x5000, 140000, NMP_KIND_REALLOC, 0x3000,
                      NMP_SHIM_F_PREV_TRACKED, 3, 0x400100);
    /* race: thread 102 got 0x6000 after the realloc freed it, before its record */
    uint64_t tF = ALLOC(f, 101, 0x6000, 80000, NMP_KIND_MALLOC, 0x400100);
    uint64_t tG = ALLOC(f, 102, 0x6000, 90000, NMP_KIND_ALIGNED, 0x400100);
    uint64_t tH = rec(f, NMP_SHIM_ALLOC, 101, 0x8000, 160000, NMP_KIND_REALLOC, 0x6000,
                      NMP_SHIM_F_PREV_TRACKED, 3, 0x400100);
    uint64_t fG = FREE(f, 0x6000);
    /* realloc of an untracked (small) block: nothing at prev is ended */
    uint64_t tJ = ALLOC(f, 102, 0x7000, 90000, NMP_KIND_MALLOC, 0x400100);
    uint64_t tI = rec(f, NMP_SHIM_ALLOC, 101, 0x9000, 100000, NMP_KIND_REALLOC, 0x7000, 0, 3,
                      0x400100);
    /* munmap of a range ends every mapping starting inside it, not heap blocks */
    uint64_t tK = ALLOC(f, 101, 0x100000, 0x20000, NMP_KIND_MMAP, 0x600000);
    uint64_t tL = ALLOC(f, 101, 0x120000, 0x10000, NMP_KIND_NUMA, 0x600000);
    uint64_t tM = ALLOC(f, 101, 0x128000, 0x10000, NMP_KIND_MALLOC, 0x600000);
    uint64_t tP = ALLOC(f, 101, 0x12f000, 0x10000, NMP_KIND_MMAP, 0x600000);
    uint64_t tU = ALLOC(f, 101, 0x130000, 0x10000, NMP_KIND_MMAP, 0x600000);
    uint64_t fKL = rec(f, NMP_SHIM_FREE, 101, 0x100000, 0x30000, NMP_KIND_MMAP, 0, 0, 0, 0);
    /* MAP_FIXED over a live mapping replaces it */
    uint64_t tV = ALLOC(f, 101, 0x180000, 0x20000, NMP_KIND_MMAP, 0x600000);
    uint64_t tW = ALLOC(f, 101, 0x170000, 0x20000, NMP_KIND_MMAP, 0x600000);
    /* numa_free */
    uint64_t tN = ALLOC(f, 101, 0x200000, 0x10000, NMP_KIND_NUMA, 0x600000);
    uint64_t fN = rec(f, NMP_SHIM_FREE, 101, 0x200000, 0, NMP_KIND_NUMA, 0, 0, 0, 0);
    /* a slot never completed (a thread killed while writing it): skipped */
    static const struct nmp_shim_record zero;
    fwrite(&zero, sizeof zero, 1, f);
    /* no stack */
    uint64_t tQ = rec(f, NMP_SHIM_ALLOC, 101, 0x300000, 70000, NMP_KIND_MALLOC, 0, 0, 0, 0);
    /* small-allocation totals of two threads */
    rec(f, NMP_SHIM_TOTALS, 101, 0, 1000, 0, 10, 0, 0, 0);
    rec(f, NMP_SHIM_TOTALS, 102, 0, UINT32_MAX + 5ULL, 0, 7, 0, 0, 0);
    /* exec: what is live dies with the old image */
    uint64_t tR = ALLOC(f, 100, 0x400000, 100000, NMP_KIND_MALLOC, 0x700000);
    uint64_t exec_t = rec(f, NMP_SHIM_START, 100, 65536, 0, 0, 0, 0, 0, 0);
    uint64_t tS = ALLOC(f, 100, 0x400000, 100000, NMP_KIND_MALLOC, 0x700000);
    /* the unused end of the last mapped chunk, then a record cut short by a crash */
    for (int z = 0; z < 5; z++)
        fwrite(&zero, sizeof zero, 1, f);
    struct nmp_shim_record part;
    memset(&part, 0xab, sizeof part);
    fwrite(&part, 1, 40, f);
    fclose(f);

    /* a second process with the same addresses */
    f = shim_open(7);
    rec(f, NMP_SHIM_START, 7, 65536, 0, 0, 0, 0, 0, 0);
    uint64_t t7 = ALLOC(f, 7, 0x1000, 100000, NMP_KIND_MALLOC, 0x400100);
    fclose(f);
    /* not ours: reported and left alone */
    char path[2300];
    snprintf(path, sizeof path, "%s/shim.99.bin", dir);
    f = fopen(path, "wb");
    fputs("GARBAGE-GARBAGE-GARBAGE", f);
    fclose(f);
    /* names that are not shim files are ignored */
    snprintf(path, sizeof path, "%s/shim.x.bin", dir);
    fclose(fopen(path, "wb"));

    struct nmp_shim_totals tot;
    char err[NMP_ERRLEN];
    int rc = nmp_shim_convert(dir, &tot, err);
    CHECK(rc == 0);
    CHECK(strstr(err, "shim.99.bin") != NULL);
    CHECK(tot.processes == 2);
    CHECK(tot.small_allocs == 17);
    CHECK(tot.small_bytes == 1000ULL + UINT32_MAX + 5ULL);
    if (tot.small_bytes != 1000ULL + UINT32_MAX + 5ULL)
        fprintf(stderr, "small_bytes %llu\n", (unsigned long long)tot.small_bytes);
    CHECK(tot.tracked_allocs == 22);
    CHECK(!exists("shim.100.bin") && !exists("shim.7.bin"));
    CHECK(exists("shim.99.bin") && exists("shim.x.bin"));

    struct objects o;
    read_objects(&o);
    CHECK(o.n == 22);
    /* files in pid order: pid 7 first */
    CHECK(at(&o.pid, 0, 4) == 7 && at(&o.time, 0, 8) == t7 && at(&o.free_time, 0, 8) == 0);
    size_t a = by_time(&o, tA), b = by_time(&o, tB), c = by_time(&o, tC);
    CHECK(at(&o.pid, a, 4) == 100 && at(&o.tid, a, 4) == 101 && at(&o.tid, b, 4) == 102);
    CHECK(at(&o.addr, a, 8) == 0x1000 && at(&o.size, a, 8) == 100000);
    CHECK(at(&o.kind, a, 1) == NMP_KIND_MALLOC && at(&o.kind, b, 1) == NMP_KIND_CALLOC);
    CHECK(at(&o.free_time, a, 8) == fA && at(&o.free_time, c, 8) == fC);
    CHECK(at(&o.free_time, b, 8) == exec_t); /* live until the execve */
    CHECK(at(&o.stack, a, 4) == at(&o.stack, b, 4));
    CHECK(at(&o.stack, a, 4) != at(&o.stack, c, 4));
    size_t d = by_time(&o, tD), e = by_time(&o, tE);
    CHECK(at(&o.free_time, d, 8) == tE && at(&o.prev, e, 8) == 0x3000);
    CHECK(at(&o.kind, e, 1) == NMP_KIND_REALLOC && at(&o.prev, d, 8) == 0);
    size_t fi = by_time(&o, tF), g = by_time(&o, tG), h = by_time(&o, tH);
    CHECK(at(&o.free_time, fi, 8) == tH);
    CHECK(at(&o.free_time, g, 8) == fG);
    CHECK(at(&o.free_time, h, 8) == exec_t);
    size_t j = by_time(&o, tJ), i = by_time(&o, tI);
    CHECK(at(&o.free_time, j, 8) == exec_t && at(&o.prev, i, 8) == 0x7000);
    CHECK(at(&o.free_time, by_time(&o, tK), 8) == fKL);
    CHECK(at(&o.free_time, by_time(&o, tL), 8) == fKL);
    CHECK(at(&o.free_time, by_time(&o, tM), 8) == exec_t);
    CHECK(at(&o.free_time, by_time(&o, tP), 8) == fKL);
    CHECK(at(&o.free_time, by_time(&o, tU), 8) == exec_t); /* starts where the range ends */
    CHECK(at(&o.free_time, by_time(&o, tN), 8) == fN);
    CHECK(at(&o.free_time, by_time(&o, tV), 8) == tW);
    CHECK(at(&o.free_time, by_time(&o, tW), 8) == exec_t);
    CHECK(at(&o.stack, by_time(&o, tQ), 4) == 0xffffffffu);
    CHECK(at(&o.free_time, by_time(&o, tR), 8) == exec_t);
    CHECK(at(&o.free_time, by_time(&o, tS), 8) == 0);
    /* pid 7's block at 0x1000 is not ended by pid 100's frees */
    CHECK(at(&o.free_time, 0, 8) == 0);

    /* stacks: ids 0.. in first-seen order, depth 0 innermost */
    struct col st = read_col("stack_frames", "stack", "<u4", 4);
    struct col dp = read_col("stack_frames", "depth", "<u2", 2);
    struct col ip = read_col("stack_frames", "ip", "<u8", 8);
    CHECK(st.n == dp.n && dp.n == ip.n);
    /* distinct stacks: 0x400100.., 0x500000.., 0x600000.., 0x700000.. -> 4 x 3 frames */
    CHECK(st.n == 12);
    uint32_t sa = (uint32_t)at(&o.stack, a, 4);
    int seen = 0;
    for (size_t k = 0; k < st.n; k++) {
        if (at(&st, k, 4) != sa)
            continue;
        CHECK(at(&ip, k, 8) == 0x400100 + at(&dp, k, 2));
        seen++;
    }
    CHECK(seen == 3);
    for (size_t k = 0; k < o.n; k++)
        CHECK(at(&o.stack, k, 4) == 0xffffffffu || at(&o.stack, k, 4) < 4);
    free(st.data);
    free(dp.data);
    free(ip.data);
    free_objects(&o);
}

/* A damaged record (a partial write followed by more data) ends the file's conversion:
 * what came before is kept, the damage is reported. */
static void test_damaged(void)
{
    fresh_dir("shimconv_damaged");
    FILE *f = shim_open(11);
    rec(f, NMP_SHIM_START, 11, 65536, 0, 0, 0, 0, 0, 0);
    uint64_t t0 = ALLOC(f, 11, 0x1000, 100000, NMP_KIND_MALLOC, 0x400000);
    fwrite("partial", 1, 7, f);
    ALLOC(f, 11, 0x2000, 100000, NMP_KIND_MALLOC, 0x400000);
    ALLOC(f, 11, 0x3000, 100000, NMP_KIND_MALLOC, 0x400000);
    fclose(f);
    struct nmp_shim_totals tot;
    char err[NMP_ERRLEN];
    CHECK(nmp_shim_convert(dir, &tot, err) == 0);
    CHECK(strstr(err, "shim.11.bin: damaged record 2") != NULL);
    struct objects o;
    read_objects(&o);
    /* the misaligned rest ("part..." as a record type) is not read as objects */
    CHECK(o.n == 1 && at(&o.time, 0, 8) == t0);
    free_objects(&o);
}

static void test_empty_dir(void)
{
    fresh_dir("shimconv_empty");
    struct nmp_shim_totals tot;
    char err[NMP_ERRLEN] = "x";
    CHECK(nmp_shim_convert(dir, &tot, err) == 0);
    CHECK(err[0] == 0);
    CHECK(tot.processes == 0 && tot.tracked_allocs == 0);
    struct objects o;
    read_objects(&o);
    CHECK(o.n == 0);
    free_objects(&o);
    CHECK(exists("stack_frames.ip.col"));
    CHECK(nmp_shim_convert("/nonexistent/dir", &tot, err) < 0 && strstr(err, "/nonexistent"));
}

/* Many short-lived blocks at a few recycled addresses: the live-address table must not
 * grow without bound or lose pairs among its tombstones. */
static void test_many(void)
{
    fresh_dir("shimconv_many");
    FILE *f = shim_open(5);
    rec(f, NMP_SHIM_START, 5, 65536, 0, 0, 0, 0, 0, 0);
    enum { N = 200000, LIVE = 3000 };
    for (int k = 0; k < N; k++) {
        uint64_t addr = 0x10000000ULL + (uint64_t)(k % 5000) * 0x100000ULL;
        if (k >= LIVE)
            FREE(f, 0x10000000ULL + (uint64_t)((k - LIVE) % 5000) * 0x100000ULL);
        ALLOC(f, 5, addr, 70000, NMP_KIND_MALLOC, 0x400000 + (uint64_t)(k % 7) * 16);
    }
    fclose(f);
    struct nmp_shim_totals tot;
    char err[NMP_ERRLEN];
    CHECK(nmp_shim_convert(dir, &tot, err) == 0);
    CHECK(tot.tracked_allocs == N);
    struct objects o;
    read_objects(&o);
    CHECK(o.n == N);
    size_t live = 0, bad = 0;
    for (size_t k = 0; k < o.n; k++) {
        uint64_t ft = at(&o.free_time, k, 8);
        if (!ft)
            live++;
        else if (ft <= at(&o.time, k, 8))
            bad++;
    }
    CHECK(live == LIVE);
    CHECK(bad == 0);
    struct col st = read_col("stack_frames", "stack", "<u4", 4);
    CHECK(st.n == 7 * 3);
    free(st.data);
    free_objects(&o);
}

/* PAGES records become object_pages rows, one per node entry, with the allocation's
 * address, the pages it spans, the pages asked and the policy; also across two records
 * of one allocation on more nodes than one record holds. */
static void test_pages(void)
{
    fresh_dir("shimconv_pages");
    FILE *f = shim_open(21);
    rec(f, NMP_SHIM_START, 21, 65536, 0, 0, 0, 0, 0, 0);
    ALLOC(f, 21, 0x10010, 2 << 20, NMP_KIND_MALLOC, 0x400000);
    struct nmp_shim_record r;
    memset(&r, 0, sizeof r);
    r.type = NMP_SHIM_PAGES;
    r.tid = 21;
    r.time = clock_ns += 10;
    r.addr = 0x10010;
    r.size = 2 << 20;
    r.prev = 513;
    r.kind = NMP_PAGES_AT_FREE;
    r.flags = 1 | NMP_PAGES_F_MIXED; /* preferred, not the same node throughout */
    r.nframes = NMP_SHIM_MAX_FRAMES;
    for (int k = 0; k < NMP_SHIM_MAX_FRAMES; k++)
        r.frames[k] = NMP_PAGES_ENTRY(k, k % NMP_PAGES_SEGMENTS, 30);
    fwrite(&r, sizeof r, 1, f);
    r.nframes = 2;
    r.frames[0] = NMP_PAGES_ENTRY(16, 15, 20);
    r.frames[1] = NMP_PAGES_ENTRY(-1, 15, 13); /* not present */
    fwrite(&r, sizeof r, 1, f);
    FREE(f, 0x10010);
    fclose(f);
    struct nmp_shim_totals tot;
    char err[NMP_ERRLEN];
    CHECK(nmp_shim_convert(dir, &tot, err) == 0);
    CHECK(err[0] == 0);
    struct col addr = read_col("object_pages", "addr", "<u8", 8);
    struct col src = read_col("object_pages", "source", "|u1", 1);
    struct col pages = read_col("object_pages", "pages", "<u8", 8);
    struct col sampled = read_col("object_pages", "sampled", "<u8", 8);
    struct col node = read_col("object_pages", "node", "<i2", 2);
    struct col count = read_col("object_pages", "count", "<u8", 8);
    struct col pol = read_col("object_pages", "policy", "|u1", 1);
    struct col mixed = read_col("object_pages", "mixed", "|u1", 1);
    struct col seg = read_col("object_pages", "segment", "|u1", 1);
    CHECK(node.n == NMP_SHIM_MAX_FRAMES + 2);
    uint64_t total = 0;
    for (size_t k = 0; k < node.n; k++) {
        CHECK(at(&addr, k, 8) == 0x10010 && at(&src, k, 1) == NMP_PAGES_AT_FREE);
        /* 0x10010 .. +2 MiB touches 513 pages */
        CHECK(at(&pages, k, 8) == 513 && at(&sampled, k, 8) == 513);
        CHECK(at(&pol, k, 1) == 1 && at(&mixed, k, 1) == 1);
        CHECK(at(&seg, k, 1) == (k < NMP_SHIM_MAX_FRAMES ? k % NMP_PAGES_SEGMENTS : 15));
        total += at(&count, k, 8);
    }
    CHECK(total == 513);
    CHECK(at(&node, 16, 2) == 16 && at(&count, 16, 8) == 20);
    CHECK((int16_t)at(&node, 17, 2) == -1 && at(&count, 17, 8) == 13);
    struct objects o;
    read_objects(&o);
    CHECK(o.n == 1 && at(&o.free_time, 0, 8) > at(&o.time, 0, 8));
    free_objects(&o);
    free(addr.data), free(src.data), free(pages.data), free(sampled.data);
    free(node.data), free(count.data), free(pol.data), free(mixed.data), free(seg.data);
}

/* A buffer freed and allocated again by its thread (same stack, address and size, soon
 * after) is one row with a count of instances; not when another allocation took some of
 * its bytes in between, after a pause, or when anything else differs. */
static void test_repeats(void)
{
    fresh_dir("shimconv_repeats");
    FILE *f = shim_open(200);
    rec(f, NMP_SHIM_START, 200, 65536, 0, 0, 0, 0, 0, 0);
#define TFREE(tid, addr) rec(f, NMP_SHIM_FREE, tid, addr, 0, 1, 0, 0, 0, 0)
    uint64_t t1 = ALLOC(f, 201, 0x100000, 262144, NMP_KIND_MALLOC, 0x400100);
    uint64_t t2 = ALLOC(f, 202, 0x200000, 262144, NMP_KIND_MALLOC, 0x400100);
    for (int k = 0; k < 3; k++) { /* both threads repeat, interleaved */
        TFREE(201, 0x100000);
        TFREE(202, 0x200000);
        ALLOC(f, 201, 0x100000, 262144, NMP_KIND_MALLOC, 0x400100);
        ALLOC(f, 202, 0x200000, 262144, NMP_KIND_MALLOC, 0x400100);
    }
    uint64_t f1 = TFREE(201, 0x100000);
    /* thread 202's sampled small block inside 201's freed buffer: no repeat after it */
    rec(f, NMP_SHIM_ALLOC, 202, 0x101000, 64, NMP_KIND_MALLOC, 0, NMP_SHIM_F_SAMPLED, 3, 0x400900);
    uint64_t t3 = ALLOC(f, 201, 0x100000, 262144, NMP_KIND_MALLOC, 0x400100);
    uint64_t f3 = TFREE(201, 0x100000);
    /* after a pause: a new row */
    clock_ns += 1000000;
    uint64_t t4 = ALLOC(f, 201, 0x100000, 262144, NMP_KIND_MALLOC, 0x400100);
    TFREE(201, 0x100000);
    /* another size, then another stack: new rows */
    uint64_t t5 = ALLOC(f, 201, 0x100000, 131072, NMP_KIND_MALLOC, 0x400100);
    TFREE(201, 0x100000);
    uint64_t t6 = ALLOC(f, 201, 0x100000, 131072, NMP_KIND_MALLOC, 0x500100);
    /* freed by another thread: its allocating thread's next block is a new row */
    TFREE(202, 0x100000);
    uint64_t t7 = ALLOC(f, 201, 0x100000, 131072, NMP_KIND_MALLOC, 0x500100);
#undef TFREE
    fclose(f);
    struct nmp_shim_totals tot;
    char err[NMP_ERRLEN];
    CHECK(nmp_shim_convert(dir, &tot, err) == 0);
    CHECK(tot.tracked_allocs == 14); /* 13 and the small block (rec() leaves its period 0) */
    struct objects o;
    read_objects(&o);
    struct col inst = read_col("objects", "instances", "<u4", 4);
    CHECK(inst.n == o.n);
    CHECK(o.n == 8); /* t1, t2, the sampled block, t3 .. t7 */
    size_t a = by_time(&o, t1), b = by_time(&o, t2);
    CHECK(at(&inst, a, 4) == 4 && at(&o.free_time, a, 8) == f1);
    CHECK(at(&inst, b, 4) == 4 && at(&o.free_time, b, 8) == 0); /* live at the end */
    CHECK(at(&inst, by_time(&o, t3), 4) == 1 && at(&o.free_time, by_time(&o, t3), 8) == f3);
    uint64_t ts[] = {t4, t5, t6, t7};
    for (size_t k = 0; k < 4; k++)
        CHECK(at(&inst, by_time(&o, ts[k]), 4) == 1);
    uint64_t sum = 0;
    for (size_t k = 0; k < o.n; k++)
        sum += at(&inst, k, 4);
    CHECK(sum == 14); /* every allocation once */
    free(inst.data);
    free_objects(&o);
}

/* Deferred records: ALLOCs written at their release (NMP_SHIM_F_ENDED, no FREE), a
 * summary of short-lived blocks (SHORT), and a block whose record was still in the pool
 * when the process died. */
static void test_deferred(void)
{
    fresh_dir("shimconv_deferred");
    char path[2200];
    snprintf(path, sizeof path, "%s/shim.300.bin", dir);
    FILE *f = fopen(path, "wb");
    if (!f)
        abort();
    static char page[NMP_SHIM_HEADER_SIZE];
    struct nmp_shim_header h = {{0}, NMP_SHIM_VERSION, sizeof(struct nmp_shim_record),
                                NMP_SHIM_HEADER_SIZE, NMP_SHIM_POOL_SLOTS, 0};
    memcpy(h.magic, NMP_SHIM_MAGIC, 8);
    memcpy(page, &h, sizeof h);
    fwrite(page, sizeof page, 1, f);
    /* the pool (its own file): one live block in slot 37, the rest empty */
    char pool_path[2200];
    snprintf(pool_path, sizeof pool_path, "%s/shim.300.pool", dir);
    FILE *pf = fopen(pool_path, "wb");
    if (!pf)
        abort();
    struct nmp_shim_record r, zero;
    memset(&zero, 0, sizeof zero);
    for (unsigned k = 0; k < NMP_SHIM_POOL_SLOTS; k++) {
        r = zero;
        if (k == 37) {
            r.type = NMP_SHIM_ALLOC;
            r.tid = 303;
            r.time = 5000;
            r.addr = 0x700000;
            r.size = 1 << 20;
            r.kind = NMP_KIND_CALLOC;
            r.nframes = 2;
            r.frames[0] = 0x400700;
            r.frames[1] = 0x400701;
        }
        fwrite(&r, sizeof r, 1, pf);
    }
    fclose(pf);
    rec(f, NMP_SHIM_START, 300, 65536, 4096, 0, 0, 0, 0, 0);
    /* one buffer freed and allocated again by its thread: one row of two */
    uint64_t times[2], ends[2];
    for (int k = 0; k < 2; k++) {
        r = zero;
        r.type = NMP_SHIM_ALLOC;
        r.tid = 301;
        r.time = times[k] = clock_ns += 10;
        r.end = ends[k] = clock_ns += 2000000;
        r.addr = 0x100000;
        r.size = 262144;
        r.kind = NMP_KIND_MALLOC;
        r.flags = NMP_SHIM_F_ENDED | NMP_SHIM_F_OWNER_FREED;
        r.nframes = 1;
        r.frames[0] = 0x400100;
        fwrite(&r, sizeof r, 1, f);
    }
    /* 1000 short-lived blocks of one site */
    r = zero;
    r.type = NMP_SHIM_SHORT;
    r.tid = 302;
    r.time = 3000;
    r.end = 900000;
    r.addr = 0x500000;
    r.prev = 0x600000;
    r.size = 0x40000;
    r.period = 1000;
    r.extra = 5000000;
    r.kind = NMP_KIND_MALLOC;
    r.nframes = 1;
    r.frames[0] = 0x400500;
    fwrite(&r, sizeof r, 1, f);
    fclose(f);
    struct nmp_shim_totals tot;
    char err[NMP_ERRLEN];
    CHECK(nmp_shim_convert(dir, &tot, err) == 0 && err[0] == 0);
    CHECK(tot.tracked_allocs == 3 && tot.short_lived_allocs == 1000);
    CHECK(!exists("shim.300.bin") && !exists("shim.300.pool")); /* both converted */
    struct objects o;
    read_objects(&o);
    struct col inst = read_col("objects", "instances", "<u4", 4);
    struct col life = read_col("objects", "lifetime", "<u8", 8);
    struct col extent = read_col("objects", "extent", "<u8", 8);
    CHECK(o.n == 3 && inst.n == 3 && life.n == 3 && extent.n == 3);
    size_t a = by_time(&o, times[0]), s = by_time(&o, 3000), live = by_time(&o, 5000);
    CHECK(at(&inst, a, 4) == 2 && at(&o.free_time, a, 8) == ends[1] && at(&extent, a, 8) == 0);
    CHECK(at(&inst, s, 4) == 1000 && at(&o.free_time, s, 8) == 900000);
    CHECK(at(&o.addr, s, 8) == 0x500000 && at(&o.size, s, 8) == 0x40000);
    CHECK(at(&extent, s, 8) == 0x100000 && at(&life, s, 8) == 5000000);
    CHECK(at(&o.tid, s, 4) == 302 && at(&o.stack, s, 4) != at(&o.stack, a, 4));
    CHECK(at(&o.free_time, live, 8) == 0 && at(&o.size, live, 8) == 1 << 20);
    CHECK(at(&o.kind, live, 1) == NMP_KIND_CALLOC && at(&extent, live, 8) == 0);
    free(inst.data);
    free(life.data);
    free(extent.data);
    free_objects(&o);
}

/* A slice of a sliced launch (nmp_shim_convert_window): from the files of a program
 * still running, into another profile, only the objects alive during [lo, hi]; the files
 * stay for the next slice. */
static void test_window(void)
{
    fresh_dir("shimconv_window_src");
    char src[2048];
    snprintf(src, sizeof src, "%s", dir);
    FILE *f = shim_open(400);
    rec(f, NMP_SHIM_START, 400, 65536, 0, 0, 0, 0, 0, 0);
    uint64_t tA = ALLOC(f, 401, 0x100000, 100000, NMP_KIND_MALLOC, 0x400100); /* ends before */
    FREE(f, 0x100000);
    uint64_t tB = ALLOC(f, 401, 0x200000, 100000, NMP_KIND_MALLOC, 0x400200); /* ends inside */
    uint64_t lo = clock_ns + 5;
    uint64_t tC = ALLOC(f, 401, 0x300000, 100000, NMP_KIND_MALLOC, 0x400300); /* live */
    FREE(f, 0x200000);
    uint64_t hi = clock_ns + 5;
    uint64_t tD = ALLOC(f, 401, 0x400000, 100000, NMP_KIND_MALLOC, 0x400400); /* after */
    fclose(f);
    fresh_dir("shimconv_window_out");
    struct nmp_shim_totals tot;
    char err[NMP_ERRLEN];
    CHECK(nmp_shim_convert_window(src, dir, lo, hi, 1, &tot, err) == 0 && err[0] == 0);
    char path[2300];
    snprintf(path, sizeof path, "%s/shim.400.bin", src);
    CHECK(access(path, F_OK) == 0); /* kept */
    CHECK(!exists("shim.400.bin"));
    struct objects o;
    read_objects(&o);
    CHECK(o.n == 2);
    size_t b = by_time(&o, tB), c = by_time(&o, tC);
    CHECK(b < o.n && c < o.n && at(&o.addr, b, 8) == 0x200000 && at(&o.free_time, b, 8) > lo);
    CHECK(at(&o.addr, c, 8) == 0x300000 && at(&o.free_time, c, 8) == 0);
    for (size_t i = 0; i < o.n; i++)
        CHECK(at(&o.time, i, 8) != tA && at(&o.time, i, 8) != tD);
    free_objects(&o);
}

/* The frame at `depth` of object i's stack, in the stack_frames table of `dir`. */
static uint64_t frame_of(const struct objects *o, size_t i, unsigned depth)
{
    struct col st = read_col("stack_frames", "stack", "<u4", 4);
    struct col dp = read_col("stack_frames", "depth", "<u2", 2);
    struct col ip = read_col("stack_frames", "ip", "<u8", 8);
    uint64_t found = 0;
    for (size_t k = 0; k < st.n; k++)
        if (at(&st, k, 4) == at(&o->stack, i, 4) && at(&dp, k, 2) == depth)
            found = at(&ip, k, 8);
    free(st.data);
    free(dp.data);
    free(ip.data);
    return found;
}

static void slice(const char *src, const char *name, uint64_t lo, uint64_t hi,
                  struct nmp_shim_totals *tot, struct objects *o)
{
    char err[NMP_ERRLEN];
    fresh_dir(name);
    CHECK(nmp_shim_convert_window(src, dir, lo, hi, 1, tot, err) == 0 && err[0] == 0);
    read_objects(o);
}

static long slot_of(FILE *f)
{
    return (ftell(f) - NMP_SHIM_HEADER_SIZE) / (long)sizeof(struct nmp_shim_record);
}

/* Slices of a running program: each converts the records written since the previous
 * one (resuming where its state file says), with the objects that were still live or
 * not yet ended carried over, their stacks with them; a slot not completed when one
 * slice reads the file is read by the next, the completed ones after it not twice. */
static void test_slices(void)
{
    fresh_dir("shimconv_slices_src");
    char src[2048];
    snprintf(src, sizeof src, "%s", dir);
    FILE *f = shim_open(500);
    rec(f, NMP_SHIM_START, 500, 65536, 0, 0, 0, 0, 0, 0);
    uint64_t tA = ALLOC(f, 501, 0x100000, 100000, NMP_KIND_MALLOC, 0x400100);
    uint64_t tL = ALLOC(f, 501, 0x200000, 100000, NMP_KIND_MALLOC, 0x400200); /* never freed */
    uint64_t lo = clock_ns + 5;
    FREE(f, 0x100000);
    uint64_t tB = ALLOC(f, 501, 0x300000, 100000, NMP_KIND_MALLOC, 0x400300);
    uint64_t hi = clock_ns + 5;
    uint64_t tC = ALLOC(f, 501, 0x500000, 100000, NMP_KIND_MALLOC, 0x400500); /* after hi */
    fflush(f);
    struct nmp_shim_totals tot;
    struct objects o;
    slice(src, "shimconv_slices_1", lo, hi, &tot, &o);
    CHECK(o.n == 3 && tot.tracked_allocs == 4);
    size_t a = by_time(&o, tA), b = by_time(&o, tB);
    CHECK(at(&o.free_time, a, 8) > lo && at(&o.free_time, b, 8) == 0);
    free_objects(&o);
    char path[2300];
    snprintf(path, sizeof path, "%s/shim.500.state", src);
    CHECK(access(path, F_OK) == 0);

    lo = clock_ns + 5;
    FREE(f, 0x300000);
    uint64_t tD = ALLOC(f, 501, 0x600000, 100000, NMP_KIND_MALLOC, 0x400600);
    FREE(f, 0x600000);
    hi = clock_ns + 5;
    fflush(f);
    slice(src, "shimconv_slices_2", lo, hi, &tot, &o);
    CHECK(tot.tracked_allocs == 1); /* only D was read */
    CHECK(o.n == 4); /* L, B, C, D; not A */
    size_t l = by_time(&o, tL);
    b = by_time(&o, tB);
    size_t cc = by_time(&o, tC), d = by_time(&o, tD);
    CHECK(at(&o.free_time, l, 8) == 0 && at(&o.free_time, cc, 8) == 0);
    CHECK(at(&o.free_time, b, 8) > lo && at(&o.free_time, d, 8) > at(&o.time, d, 8));
    CHECK(at(&o.addr, b, 8) == 0x300000 && at(&o.size, b, 8) == 100000);
    CHECK(frame_of(&o, b, 0) == 0x400300 && frame_of(&o, b, 2) == 0x400302);
    CHECK(frame_of(&o, l, 0) == 0x400200);
    for (size_t i = 0; i < o.n; i++)
        CHECK(at(&o.time, i, 8) != tA);
    free_objects(&o);

    /* a slot claimed but not written yet, then a completed one after it */
    long hole = slot_of(f);
    rec(f, 0, 0, 0, 0, 0, 0, 0, 0, 0);
    uint64_t tE = ALLOC(f, 501, 0x700000, 100000, NMP_KIND_MALLOC, 0x400700);
    hi = clock_ns + 5;
    fflush(f);
    slice(src, "shimconv_slices_3", lo, hi, &tot, &o);
    CHECK(tot.tracked_allocs == 1);
    by_time(&o, tE);
    free_objects(&o);
    /* its writer completes it; the next slice reads it, and E not again */
    long end = ftell(f);
    long at_hole = NMP_SHIM_HEADER_SIZE + hole * (long)sizeof(struct nmp_shim_record);
    CHECK(fseek(f, at_hole, SEEK_SET) == 0);
    uint64_t tF = ALLOC(f, 501, 0x800000, 100000, NMP_KIND_MALLOC, 0x400800);
    CHECK(fseek(f, end, SEEK_SET) == 0);
    uint64_t tG = ALLOC(f, 501, 0x900000, 100000, NMP_KIND_MALLOC, 0x400900);
    hi = clock_ns + 5;
    fflush(f);
    slice(src, "shimconv_slices_4", lo, hi, &tot, &o);
    CHECK(tot.tracked_allocs == 2);
    by_time(&o, tE);
    by_time(&o, tF);
    by_time(&o, tG);
    free_objects(&o);

    /* a slot never completed (its writer died) is passed over after one slice */
    rec(f, 0, 0, 0, 0, 0, 0, 0, 0, 0);
    uint64_t tH = ALLOC(f, 501, 0xa00000, 100000, NMP_KIND_MALLOC, 0x400a00);
    hi = clock_ns + 5;
    fflush(f);
    slice(src, "shimconv_slices_5", lo, hi, &tot, &o);
    free_objects(&o);
    uint64_t tI = ALLOC(f, 501, 0xb00000, 100000, NMP_KIND_MALLOC, 0x400b00);
    hi = clock_ns + 5;
    fflush(f);
    slice(src, "shimconv_slices_6", lo, hi, &tot, &o);
    CHECK(tot.tracked_allocs == 1);
    by_time(&o, tH);
    by_time(&o, tI);
    free_objects(&o);
    int fd = open(path, O_RDONLY);
    struct {
        char magic[8];
        uint32_t record_size, header_size;
        uint64_t dev, ino, resume, hole;
    } st;
    CHECK(fd >= 0 && read(fd, &st, sizeof st) == (ssize_t)sizeof st && st.hole == 0 &&
          st.resume == (uint64_t)slot_of(f));
    close(fd);
    fclose(f);
}

int main(void)
{
    test_window();
    test_slices();
    test_deferred();
    test_repeats();
    test_pages();
    test_pairing();
    test_empty_dir();
    test_damaged();
    test_many();
    return check_result();
}
