/* nmp_perf_sample_parse on sample bodies built byte by byte in the order of Linux
 * include/uapi/linux/perf_event.h (PERF_RECORD_SAMPLE) and perf_output_sample() in
 * kernel/events/core.c, as the collector's own events write them: the software backend's
 * cpu-clock with the user registers, the completed-fault events with the data page size,
 * the fault tracepoint's raw data.  Every shorter body is refused.  Exit 0 = pass. */
#include "nmp_perf_sample.h"

#include <string.h>

#include "nmp_check.h"

struct buf {
    uint8_t b[512];
    size_t n;
};

static void put(struct buf *b, const void *v, size_t n)
{
    memcpy(b->b + b->n, v, n);
    b->n += n;
}

static void u64(struct buf *b, uint64_t v)
{
    put(b, &v, 8);
}

static void u32x2(struct buf *b, uint32_t x, uint32_t y)
{
    put(b, &x, 4);
    put(b, &y, 4);
}

/* The fields every collector event starts with: IDENTIFIER, IP, TID, TIME. */
static void head(struct buf *b)
{
    u64(b, 0x1d);                 /* identifier */
    u64(b, 0x401000);             /* ip */
    u32x2(b, 100, 101);           /* pid, tid */
    u64(b, 123456789);            /* time */
}

/* Every strict prefix of a good body is malformed. */
static void check_truncations(const struct perf_event_attr *a, const struct buf *b)
{
    struct nmp_perf_sample s;
    CHECK(nmp_perf_sample_parse(a, b->b, b->n, &s) == 0);
    for (size_t n = 0; n < b->n; n++)
        CHECK_MSG(nmp_perf_sample_parse(a, b->b, n, &s) == -1, "%zu of %zu bytes", n, b->n);
}

static void test_soft_sample_with_registers(void)
{
    struct perf_event_attr a = {
        .sample_type = PERF_SAMPLE_IDENTIFIER | PERF_SAMPLE_IP | PERF_SAMPLE_TID |
                       PERF_SAMPLE_TIME | PERF_SAMPLE_CPU | PERF_SAMPLE_REGS_USER,
        .sample_regs_user = (1u << 0) | (1u << 3) | (1u << 8)}; /* three registers */
    struct buf b = {.n = 0};
    head(&b);
    u32x2(&b, 3, 0);   /* cpu, res */
    u64(&b, 2);        /* abi: PERF_SAMPLE_REGS_ABI_64 */
    u64(&b, 0xaaaa);
    u64(&b, 0xbbbb);
    u64(&b, 0x401000);
    struct nmp_perf_sample s;
    CHECK(nmp_perf_sample_parse(&a, b.b, b.n, &s) == 0);
    CHECK_EQ(s.id, 0x1d);
    CHECK_EQ(s.ip, 0x401000);
    CHECK_EQ(s.pid, 100);
    CHECK_EQ(s.tid, 101);
    CHECK_EQ(s.time, 123456789);
    CHECK_EQ(s.cpu, 3);
    CHECK_EQ(s.regs_abi, 2);
    CHECK_EQ(s.nregs, 3);
    uint64_t regs[3];
    CHECK(s.regs != NULL);
    if (s.regs) {
        memcpy(regs, s.regs, sizeof regs);
        CHECK_EQ(regs[0], 0xaaaa);
        CHECK_EQ(regs[2], 0x401000);
    }
    check_truncations(&a, &b);

    /* a kernel thread's sample: ABI 0, no register values follow */
    struct buf k = {.n = 0};
    head(&k);
    u32x2(&k, 1, 0);
    u64(&k, 0);
    CHECK(nmp_perf_sample_parse(&a, k.b, k.n, &s) == 0);
    CHECK(s.regs_abi == 0 && s.regs == NULL && s.nregs == 0);
}

static void test_fault_with_page_size(void)
{
    /* completed-fault events: the data page size comes last, after a cgroup id when one
     * is asked for, and after the physical address */
    struct perf_event_attr a = {
        .sample_type = PERF_SAMPLE_IDENTIFIER | PERF_SAMPLE_IP | PERF_SAMPLE_TID |
                       PERF_SAMPLE_TIME | PERF_SAMPLE_ADDR | PERF_SAMPLE_CPU |
                       PERF_SAMPLE_PHYS_ADDR | PERF_SAMPLE_CGROUP | PERF_SAMPLE_DATA_PAGE_SIZE};
    struct buf b = {.n = 0};
    head(&b);
    u64(&b, 0x7f0000200000); /* addr */
    u32x2(&b, 1, 0);         /* cpu */
    u64(&b, 0x1234000);      /* phys_addr */
    u64(&b, 77);             /* cgroup */
    u64(&b, 2 << 20);        /* data_page_size: a transparent huge page */
    struct nmp_perf_sample s;
    CHECK(nmp_perf_sample_parse(&a, b.b, b.n, &s) == 0);
    CHECK(s.has_addr && s.has_phys);
    CHECK_EQ(s.addr, 0x7f0000200000);
    CHECK_EQ(s.phys_addr, 0x1234000);
    CHECK_EQ(s.data_page_size, 2 << 20);
    check_truncations(&a, &b);
}

static void test_tracepoint_raw(void)
{
    struct perf_event_attr a = {
        .sample_type = PERF_SAMPLE_IDENTIFIER | PERF_SAMPLE_IP | PERF_SAMPLE_TID |
                       PERF_SAMPLE_TIME | PERF_SAMPLE_CPU | PERF_SAMPLE_RAW};
    struct buf b = {.n = 0};
    head(&b);
    u32x2(&b, 0, 0);
    uint32_t size = 28;
    put(&b, &size, 4);
    uint8_t raw[28];
    for (size_t i = 0; i < sizeof raw; i++)
        raw[i] = (uint8_t)i;
    put(&b, raw, sizeof raw);
    struct nmp_perf_sample s;
    CHECK(nmp_perf_sample_parse(&a, b.b, b.n, &s) == 0);
    CHECK_EQ(s.raw_size, 28);
    CHECK(s.raw && s.raw[27] == 27);
    check_truncations(&a, &b);
}

int main(void)
{
    test_soft_sample_with_registers();
    test_fault_with_page_size();
    test_tracepoint_raw();
    return check_result();
}
