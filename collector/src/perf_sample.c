/* The sample-body parser of nmp_perf_sample.h: every field of the body in the kernel's
 * order, kept or skipped, each length checked against the record. */
#include "nmp_perf_sample.h"

#include <string.h>

struct cursor {
    const uint8_t *p, *end;
};

static int take(struct cursor *c, void *dst, size_t n)
{
    if ((size_t)(c->end - c->p) < n)
        return -1;
    if (dst)
        memcpy(dst, c->p, n);
    c->p += n;
    return 0;
}

static int take_u64(struct cursor *c, uint64_t *v)
{
    return take(c, v, 8);
}

static int skip_u64s(struct cursor *c, uint64_t n)
{
    if (n > (uint64_t)(c->end - c->p) / 8)
        return -1;
    c->p += n * 8;
    return 0;
}

/* READ: read_format-dependent (Linux include/uapi/linux/perf_event.h, struct read_format). */
static int skip_read(struct cursor *c, uint64_t rf)
{
    uint64_t per = 1 + !!(rf & PERF_FORMAT_ID) + !!(rf & (1U << 4) /* PERF_FORMAT_LOST */);
    if (rf & PERF_FORMAT_GROUP) {
        uint64_t nr;
        if (take_u64(c, &nr) < 0)
            return -1;
        uint64_t extra = !!(rf & PERF_FORMAT_TOTAL_TIME_ENABLED) +
                         !!(rf & PERF_FORMAT_TOTAL_TIME_RUNNING);
        if (skip_u64s(c, extra) < 0 || nr > (1u << 20))
            return -1;
        return skip_u64s(c, nr * per);
    }
    return skip_u64s(c, per + !!(rf & PERF_FORMAT_TOTAL_TIME_ENABLED) +
                            !!(rf & PERF_FORMAT_TOTAL_TIME_RUNNING));
}

/* Bits set in x, without a call into libgcc (__builtin_popcountll is one unless the
 * build targets a cpu with popcnt): the SWAR sum (Warren, Hacker's Delight, 5-1). */
static uint32_t popcount64(uint64_t x)
{
    x -= (x >> 1) & 0x5555555555555555ULL;
    x = (x & 0x3333333333333333ULL) + ((x >> 2) & 0x3333333333333333ULL);
    x = (x + (x >> 4)) & 0x0f0f0f0f0f0f0f0fULL;
    return (uint32_t)((x * 0x0101010101010101ULL) >> 56);
}

/* REGS_USER / REGS_INTR: the ABI, then one u64 per register of the mask unless it is 0.
 * Inlined: every software sample has them (a call costs ~10 % of the parse). */
static inline __attribute__((always_inline)) int
take_regs(struct cursor *c, uint64_t mask, uint64_t *abi, const uint8_t **regs, uint32_t *nregs)
{
    if (take_u64(c, abi) < 0)
        return -1;
    if (!*abi)
        return 0;
    uint32_t n = popcount64(mask);
    if (regs)
        *regs = c->p;
    if (nregs)
        *nregs = n;
    return skip_u64s(c, n);
}

int nmp_perf_sample_parse(const struct perf_event_attr *attr, const void *data, size_t len,
                          struct nmp_perf_sample *b)
{
    struct cursor c = {data, (const uint8_t *)data + len};
    uint64_t st = attr->sample_type, v;
    uint32_t u32[2];
    memset(b, 0, sizeof *b);
    if ((st & PERF_SAMPLE_IDENTIFIER) && take_u64(&c, &b->id) < 0)
        return -1;
    if ((st & PERF_SAMPLE_IP) && take_u64(&c, &b->ip) < 0)
        return -1;
    if (st & PERF_SAMPLE_TID) {
        if (take(&c, u32, 8) < 0)
            return -1;
        b->pid = u32[0];
        b->tid = u32[1];
    }
    if ((st & PERF_SAMPLE_TIME) && take_u64(&c, &b->time) < 0)
        return -1;
    if (st & PERF_SAMPLE_ADDR) {
        if (take_u64(&c, &b->addr) < 0)
            return -1;
        b->has_addr = 1;
    }
    if ((st & PERF_SAMPLE_ID) && take_u64(&c, NULL) < 0)
        return -1;
    if ((st & PERF_SAMPLE_STREAM_ID) && take_u64(&c, NULL) < 0)
        return -1;
    if (st & PERF_SAMPLE_CPU) {
        if (take(&c, u32, 8) < 0)
            return -1;
        b->cpu = u32[0];
    }
    if ((st & PERF_SAMPLE_PERIOD) && take_u64(&c, NULL) < 0)
        return -1;
    if ((st & PERF_SAMPLE_READ) && skip_read(&c, attr->read_format) < 0)
        return -1;
    if (st & PERF_SAMPLE_CALLCHAIN) {
        if (take_u64(&c, &v) < 0 || skip_u64s(&c, v) < 0)
            return -1;
    }
    if (st & PERF_SAMPLE_RAW) {
        uint32_t size;
        if (take(&c, &size, 4) < 0 || (size_t)(c.end - c.p) < size)
            return -1;
        b->raw = c.p;
        b->raw_size = size;
        c.p += size;
    }
    if (st & PERF_SAMPLE_BRANCH_STACK) {
        if (take_u64(&c, &v) < 0 || v > (1u << 20))
            return -1;
        if ((attr->branch_sample_type & PERF_SAMPLE_BRANCH_HW_INDEX) && take_u64(&c, NULL) < 0)
            return -1;
        if (skip_u64s(&c, v * 3) < 0) /* struct perf_branch_entry: 3 u64 */
            return -1;
        /* PERF_SAMPLE_BRANCH_COUNTERS (1U << 19): one u64 per entry */
        if ((attr->branch_sample_type & (1ULL << 19)) && skip_u64s(&c, v) < 0)
            return -1;
    }
    if ((st & PERF_SAMPLE_REGS_USER) &&
        take_regs(&c, attr->sample_regs_user, &b->regs_abi, &b->regs, &b->nregs) < 0)
        return -1;
    if (st & PERF_SAMPLE_STACK_USER) {
        if (take_u64(&c, &v) < 0) /* size, data[size], then dyn_size if size != 0 */
            return -1;
        if (v) {
            if ((size_t)(c.end - c.p) < v)
                return -1;
            c.p += v;
            if (take_u64(&c, NULL) < 0)
                return -1;
        }
    }
    if (st & (PERF_SAMPLE_WEIGHT | PERF_SAMPLE_WEIGHT_STRUCT)) {
        if (take_u64(&c, &b->weight) < 0)
            return -1;
        b->has_weight = 1;
    }
    if (st & PERF_SAMPLE_DATA_SRC) {
        if (take_u64(&c, &b->data_src) < 0)
            return -1;
        b->has_data_src = 1;
    }
    if ((st & PERF_SAMPLE_TRANSACTION) && take_u64(&c, NULL) < 0)
        return -1;
    if (st & PERF_SAMPLE_REGS_INTR) {
        uint64_t abi;
        if (take_regs(&c, attr->sample_regs_intr, &abi, NULL, NULL) < 0)
            return -1;
    }
    if (st & PERF_SAMPLE_PHYS_ADDR) {
        if (take_u64(&c, &b->phys_addr) < 0)
            return -1;
        b->has_phys = 1;
    }
    if ((st & PERF_SAMPLE_CGROUP) && take_u64(&c, NULL) < 0)
        return -1;
    if ((st & PERF_SAMPLE_DATA_PAGE_SIZE) && take_u64(&c, &b->data_page_size) < 0)
        return -1;
    return 0;
}
