/* Table-driven tests of the hardware-sample decoders, on records built byte by byte from
 * the documented layouts:
 *  - PERF_RECORD_SAMPLE body order: Linux include/uapi/linux/perf_event.h (the comment above
 *    PERF_RECORD_SAMPLE) and perf_output_sample() in Linux kernel/events/core.c;
 *  - union perf_mem_data_src bits and the SKL test vectors: Linux include/uapi/linux/
 *    perf_event.h, Linux arch/x86/events/intel/ds.c __intel_pmu_pebs_data_source_skl;
 *  - IBS_OP_DATA2/3 and the RAW payload: Linux arch/x86/include/asm/amd-ibs.h and
 *    Linux arch/x86/events/amd/ibs.c (perf_ibs_handle_irq, perf_ibs_parse_ld_st_data,
 *    perf_ibs_get_mem_lvl in its L()/LN()/REM/HOPS() table form).
 */
#include "nmp_hw_priv.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nmp_check.h"

/* ---- byte builder ---- */
struct buf {
    uint8_t b[1024];
    size_t n;
};
static void u64(struct buf *b, uint64_t v)
{
    memcpy(b->b + b->n, &v, 8);
    b->n += 8;
}
static void u32(struct buf *b, uint32_t v)
{
    memcpy(b->b + b->n, &v, 4);
    b->n += 4;
}

/* perf_mem_data_src composition from the uapi field shifts */
#define DS(op, lvl, snoop, lock, tlb, lvlnum, remote, snoopx, blk, hops)                     \
    ((uint64_t)(op) | (uint64_t)(lvl) << 5 | (uint64_t)(snoop) << 19 |                     \
     (uint64_t)(lock) << 24 | (uint64_t)(tlb) << 26 | (uint64_t)(lvlnum) << 33 |           \
     (uint64_t)(remote) << 37 | (uint64_t)(snoopx) << 38 | (uint64_t)(blk) << 40 |         \
     (uint64_t)(hops) << 43)

/* ---- 1. classification of perf_mem_data_src values ---- */
static void test_classify(void)
{
    static const struct {
        const char *what;
        uint64_t ds;
        enum nmp_memsrc src;
        int hops, remote;
    } t[] = {
        /* test vectors from the ds.c SKL table (Linux arch/x86/events/intel/ds.c) */
        {"SKL DSE 0x0a local DRAM", 0x11a68201042ULL, NMP_SRC_LOCAL_DRAM, 0, 0},
        {"SKL DSE 0x0b remote DRAM (mem_lvl HIT only)", 0x13a68100042ULL, NMP_SRC_REMOTE_DRAM, 0, 1},
        {"SKL DSE 0x0c remote cache forward", 0x17668000042ULL, NMP_SRC_REMOTE_CACHE, 0, 1},
        {"AMD IBS 6.1 remote DRAM (mem_lvl only)", 0x1e29082042ULL, NMP_SRC_REMOTE_DRAM, 0, 1},
        /* lvl_num first */
        {"L1 hit", DS(2, 0x8 | 0x2, 1, 1, 0xa, 1, 0, 0, 1, 0), NMP_SRC_L1, 0, 0},
        {"LFB hit", DS(2, 0x10 | 0x2, 1, 1, 0xa, 0xc, 0, 0, 1, 0), NMP_SRC_LFB, 0, 0},
        {"L2 hit", DS(2, 0x20 | 0x2, 1, 1, 0xa, 2, 0, 0, 1, 0), NMP_SRC_L2, 0, 0},
        {"L3 hit", DS(2, 0x40 | 0x2, 1, 1, 0xa, 3, 0, 0, 1, 0), NMP_SRC_L3, 0, 0},
        {"remote DRAM, hops 2 (remote socket)", DS(2, 0x100 | 2, 1, 1, 1, 0xd, 1, 0, 1, 3),
         NMP_SRC_REMOTE_DRAM, 3, 1},
        {"remote cache other socket, lvl_num L3", DS(2, 2, 0x10, 1, 1, 3, 1, 0, 1, 3),
         NMP_SRC_REMOTE_CACHE, 3, 1},
        {"PMEM", DS(2, 0, 1, 1, 1, 0xe, 0, 0, 1, 0), NMP_SRC_PMEM_CXL, 0, 0},
        {"CXL remote", DS(2, 0, 1, 1, 1, 0x9, 1, 0, 1, 2), NMP_SRC_PMEM_CXL, 2, 1},
        {"pre-Zen4 IBS local-node cache: ANY_CACHE, not remote", DS(2, 0x40 | 0x400 | 2, 1, 1, 1, 0xb, 0, 0, 0, 1),
         NMP_SRC_L3, 1, 0},
        /* mem_lvl fallback: lvl_num 0 (old kernels), NA, or unknown */
        {"old kernel LOC_RAM", DS(2, 0x80 | 2, 1, 1, 1, 0, 0, 0, 0, 0), NMP_SRC_LOCAL_DRAM, 0, 0},
        {"old kernel REM_RAM2", DS(2, 0x200 | 2, 1, 1, 1, 0, 0, 0, 0, 0), NMP_SRC_REMOTE_DRAM, 0, 1},
        {"lvl_num NA, REM_CCE2", DS(2, 0x800 | 2, 1, 1, 1, 0xf, 0, 0, 0, 0), NMP_SRC_REMOTE_CACHE, 0, 1},
        {"unknown lvl_num 6 (MSC), mem_lvl L2", DS(2, 0x20 | 2, 1, 1, 1, 6, 0, 0, 0, 0), NMP_SRC_L2, 0, 0},
        {"HSW store L1 hit (precise_datala_hsw)", DS(4, 0x8 | 0x2, 1, 1, 1, 0, 0, 0, 0, 0), NMP_SRC_L1, 0, 0},
        {"PERF_MEM_NA", NMP_MEM_NA, NMP_SRC_OTHER, 0, 0},
        {"uncached", DS(2, 0x2000 | 2, 1, 1, 1, 8, 0, 0, 0, 0), NMP_SRC_OTHER, 0, 0},
        {"IO", DS(2, 0x1000 | 2, 1, 1, 1, 0xa, 0, 0, 0, 0), NMP_SRC_OTHER, 0, 0},
        {"zero", 0, NMP_SRC_OTHER, 0, 0},
        /* HOPS_0 (remote core, same node) is not another node */
        {"REMOTE + HOPS_0, lvl_num L2 (a peer core's L2)", DS(2, 0x20 | 2, 1, 1, 1, 2, 1, 0, 1, 1),
         NMP_SRC_PEER_CACHE, 1, 0},
        {"REMOTE + HOPS_0, lvl_num RAM", DS(2, 2, 1, 1, 1, 0xd, 1, 0, 1, 1), NMP_SRC_LOCAL_DRAM, 1, 0},
        {"REMOTE + HOPS_1, ANY_CACHE", DS(2, 2, 1, 1, 1, 0xb, 1, 0, 1, 2), NMP_SRC_REMOTE_CACHE, 2, 1},
        {"lvl_num NA, REM_CCE1 + HOPS_0", DS(2, 0x400 | 2, 1, 1, 1, 0xf, 0, 0, 0, 1),
         NMP_SRC_PEER_CACHE, 1, 0},
        /* IBS on Linux 6.1-6.5 (mem_lvl only, ibs.c of that time) */
        {"IBS 6.1 pre-Zen4 local-node cache L3|REM_CCE1", DS(2, 0x40 | 0x400 | 2, 1, 1, 1, 0xf, 0, 0, 0, 0),
         NMP_SRC_L3, 0, 0},
        {"IBS 6.1 far CCX REM_CCE2", DS(2, 0x800 | 2, 1, 1, 1, 0xf, 0, 0, 0, 0), NMP_SRC_REMOTE_CACHE, 0, 1},
        /* MISS: the level that missed, not the source */
        {"L3 miss with lvl_num L3 (ds.c 0x00)", DS(2, 0x4, 1, 0, 0x1a, 3, 0, 0, 1, 0), NMP_SRC_OTHER, 0, 0},
        {"L1 miss, old kernel (mem_lvl only)", DS(4, 0x8 | 0x4, 1, 1, 1, 0, 0, 0, 0, 0), NMP_SRC_OTHER, 0, 0},
    };
    for (size_t i = 0; i < sizeof t / sizeof *t; i++) {
        struct nmp_memsrc_class c = nmp_memsrc_classify(t[i].ds);
        if (c.src != t[i].src || c.hops != t[i].hops || c.remote != t[i].remote) {
            fprintf(stderr, "classify %s (%#llx): got %s hops %d remote %d, want %s hops %d "
                    "remote %d\n", t[i].what, (unsigned long long)t[i].ds,
                    nmp_memsrc_name(c.src), c.hops, c.remote, nmp_memsrc_name(t[i].src),
                    t[i].hops, t[i].remote);
            failures++;
        }
    }
    CHECK(strcmp(nmp_memsrc_name(NMP_SRC_REMOTE_DRAM), "remote DRAM") == 0);
}

/* ---- 1b. the kernel's own PEBS data-source tables ----
 * Transcribed from Linux arch/x86/events/intel/ds.c @c058e7a (pebs_data_source[],
 * intel_pmu_pebs_data_source_nhm, __intel_pmu_pebs_data_source_skl/_grt/_cmt,
 * load_latency_data, pebs_set_tlb_lock, store_latency_data, precise_store_data,
 * precise_datala_hsw) and composed here with the kernel's uapi macros (PERF_MEM_S of
 * <linux/perf_event.h>), not with our NMP_MEM_* constants.  Which table a model uses:
 * Linux arch/x86/events/intel/core.c @4383cfa intel_pmu_init(): Sandy Bridge, Ivy Bridge,
 * Haswell and Broadwell (client and -EP/-X) keep the base table; Skylake, Ice Lake and
 * Sapphire Rapids call intel_pmu_pebs_data_source_skl(pmem), pmem = true on the server
 * parts (SKYLAKE_X, ICELAKE_X/_D, SAPPHIRERAPIDS_X; Emerald and Granite Rapids share
 * the Sapphire Rapids path in later kernels); Nehalem/Westmere patch three L3 entries. */
#define P(a, b) PERF_MEM_S(a, b)
#define OP_LH (P(OP, LOAD) | P(LVL, HIT))
#define LEVEL(x) P(LVLNUM, x)
#define KREM P(REMOTE, REMOTE)
#define SNOOP_NONE_MISS (P(SNOOP, NONE) | P(SNOOP, MISS))

struct ktab {
    unsigned dse;
    const char *what; /* the kernel's comment */
    uint64_t val;
    enum nmp_memsrc src;
    int remote;
};

/* pebs_data_source[] ("Version for Sandy Bridge and later"), all 16 encodings */
static const struct ktab base_table[16] = {
    {0x00, "ukn L3", P(OP, LOAD) | P(LVL, MISS) | LEVEL(L3) | P(SNOOP, NA), NMP_SRC_OTHER, 0},
    {0x01, "L1 local", OP_LH | P(LVL, L1) | LEVEL(L1) | P(SNOOP, NONE), NMP_SRC_L1, 0},
    {0x02, "LFB hit", OP_LH | P(LVL, LFB) | LEVEL(LFB) | P(SNOOP, NONE), NMP_SRC_LFB, 0},
    {0x03, "L2 hit", OP_LH | P(LVL, L2) | LEVEL(L2) | P(SNOOP, NONE), NMP_SRC_L2, 0},
    {0x04, "L3 hit", OP_LH | P(LVL, L3) | LEVEL(L3) | P(SNOOP, NONE), NMP_SRC_L3, 0},
    {0x05, "L3 hit, snoop miss", OP_LH | P(LVL, L3) | LEVEL(L3) | P(SNOOP, MISS), NMP_SRC_L3, 0},
    {0x06, "L3 hit, snoop hit", OP_LH | P(LVL, L3) | LEVEL(L3) | P(SNOOP, HIT), NMP_SRC_L3, 0},
    {0x07, "L3 hit, snoop hitm", OP_LH | P(LVL, L3) | LEVEL(L3) | P(SNOOP, HITM), NMP_SRC_L3, 0},
    {0x08, "L3 miss snoop hit", OP_LH | P(LVL, REM_CCE1) | KREM | LEVEL(L3) | P(SNOOP, HIT),
     NMP_SRC_REMOTE_CACHE, 1},
    {0x09, "L3 miss snoop hitm", OP_LH | P(LVL, REM_CCE1) | KREM | LEVEL(L3) | P(SNOOP, HITM),
     NMP_SRC_REMOTE_CACHE, 1},
    {0x0a, "L3 miss, shared", OP_LH | P(LVL, LOC_RAM) | LEVEL(RAM) | P(SNOOP, HIT),
     NMP_SRC_LOCAL_DRAM, 0},
    {0x0b, "L3 miss, shared", OP_LH | P(LVL, REM_RAM1) | KREM | LEVEL(L3) | P(SNOOP, HIT),
     NMP_SRC_REMOTE_DRAM, 1},
    {0x0c, "L3 miss, excl", OP_LH | P(LVL, LOC_RAM) | LEVEL(RAM) | SNOOP_NONE_MISS,
     NMP_SRC_LOCAL_DRAM, 0},
    {0x0d, "L3 miss, excl", OP_LH | P(LVL, REM_RAM1) | LEVEL(RAM) | KREM | SNOOP_NONE_MISS,
     NMP_SRC_REMOTE_DRAM, 1},
    {0x0e, "I/O", OP_LH | P(LVL, IO) | LEVEL(NA) | P(SNOOP, NONE), NMP_SRC_OTHER, 0},
    {0x0f, "uncached", OP_LH | P(LVL, UNC) | LEVEL(NA) | P(SNOOP, NONE), NMP_SRC_OTHER, 0},
};

/* entries the model patches replace */
static const struct ktab patches[] = {
    /* intel_pmu_pebs_data_source_nhm */
    {0x05, "NHM L3 hit, snoop hit", OP_LH | P(LVL, L3) | LEVEL(L3) | P(SNOOP, HIT), NMP_SRC_L3, 0},
    {0x06, "NHM L3 hit, snoop hitm", OP_LH | P(LVL, L3) | LEVEL(L3) | P(SNOOP, HITM), NMP_SRC_L3, 0},
    {0x07, "NHM L3 hit, snoop hitm", OP_LH | P(LVL, L3) | LEVEL(L3) | P(SNOOP, HITM), NMP_SRC_L3, 0},
    /* __intel_pmu_pebs_data_source_skl(pmem = true): SKX, ICX, SPR, EMR, GNR */
    {0x08, "SKL+ server: local PMEM", OP_LH | LEVEL(PMEM) | P(SNOOP, HIT), NMP_SRC_PMEM_CXL, 0},
    {0x09, "SKL+ server: remote PMEM", OP_LH | LEVEL(PMEM) | KREM | P(SNOOP, HIT),
     NMP_SRC_PMEM_CXL, 1},
    {0x0b, "SKL+: remote DRAM", OP_LH | LEVEL(RAM) | KREM | P(SNOOP, NONE), NMP_SRC_REMOTE_DRAM, 1},
    {0x0c, "SKL+: remote cache, forward", OP_LH | LEVEL(ANY_CACHE) | KREM | P(SNOOPX, FWD),
     NMP_SRC_REMOTE_CACHE, 1},
    {0x0d, "SKL+: remote cache, hitm", OP_LH | LEVEL(ANY_CACHE) | KREM | P(SNOOP, HITM),
     NMP_SRC_REMOTE_CACHE, 1},
    /* __intel_pmu_pebs_data_source_skl(pmem = false): client parts, L4 (eDRAM) */
    {0x08, "SKL client: local L4", OP_LH | LEVEL(L4) | P(SNOOP, HIT), NMP_SRC_L3, 0},
    {0x09, "SKL client: remote L4", OP_LH | LEVEL(L4) | KREM | P(SNOOP, HIT),
     NMP_SRC_REMOTE_CACHE, 1},
    /* __intel_pmu_pebs_data_source_grt (ADL E-cores) */
    {0x08, "GRT L3 forward", OP_LH | P(LVL, L3) | LEVEL(L3) | P(SNOOPX, FWD), NMP_SRC_L3, 0},
    /* __intel_pmu_pebs_data_source_cmt (MTL E-cores) */
    {0x0a, "CMT local DRAM", OP_LH | P(LVL, LOC_RAM) | LEVEL(RAM) | P(SNOOP, NONE),
     NMP_SRC_LOCAL_DRAM, 0},
    {0x0b, "CMT remote DRAM", OP_LH | LEVEL(RAM) | KREM | P(SNOOP, NONE), NMP_SRC_REMOTE_DRAM, 1},
    {0x0c, "CMT remote DRAM, forward", OP_LH | LEVEL(RAM) | KREM | P(SNOOPX, FWD),
     NMP_SRC_REMOTE_DRAM, 1},
    {0x0d, "CMT remote DRAM, hitm", OP_LH | LEVEL(RAM) | KREM | P(SNOOP, HITM),
     NMP_SRC_REMOTE_DRAM, 1},
};

/* load_latency_data() on Sandy Bridge .. Ice Lake (no block info: BLK NA) for a record
 * whose DSE has ld_stlb_miss / ld_locked as given (pebs_set_tlb_lock) */
static uint64_t load_latency(uint64_t table_val, int stlb_miss, int locked)
{
    uint64_t v = table_val;
    v |= stlb_miss ? P(TLB, MISS) | P(TLB, L2) : P(TLB, HIT) | P(TLB, L1) | P(TLB, L2);
    if (locked)
        v |= P(LOCK, LOCKED);
    return v | P(BLK, NA);
}

/* store_latency_data() (Sapphire Rapids STLAT stores): the same table, mem_op STORE */
static uint64_t store_latency(uint64_t table_val)
{
    uint64_t v = table_val | P(TLB, HIT) | P(TLB, L1) | P(TLB, L2) | P(BLK, NA);
    return (v & ~(uint64_t)0x1f) | P(OP, STORE);
}

static void check_class(const char *what, uint64_t ds, enum nmp_memsrc src, int remote)
{
    struct nmp_memsrc_class c = nmp_memsrc_classify(ds);
    if (c.src != src || c.remote != remote) {
        fprintf(stderr, "classify %s (%#llx): got %s remote %d, want %s remote %d\n", what,
                (unsigned long long)ds, nmp_memsrc_name(c.src), c.remote,
                nmp_memsrc_name(src), remote);
        failures++;
    }
}

static void test_kernel_tables(void)
{
    for (size_t i = 0; i < 16; i++) {
        const struct ktab *t = &base_table[i];
        CHECK_EQ(t->dse, i);
        for (int tlb = 0; tlb < 2; tlb++)
            for (int lock = 0; lock < 2; lock++)
                check_class(t->what, load_latency(t->val, tlb, lock), t->src, t->remote);
        /* a Sapphire Rapids store is classified like the load from the same DSE */
        check_class(t->what, store_latency(t->val), t->src, t->remote);
        CHECK_EQ(store_latency(t->val) & 0x1f, P(OP, STORE));
    }
    for (size_t i = 0; i < sizeof patches / sizeof *patches; i++)
        check_class(patches[i].what, load_latency(patches[i].val, 0, 0), patches[i].src,
                    patches[i].remote);
    /* The values the audit quoted (issue 18), as the kernel writes them on a
     * Haswell-EP/Broadwell-EP load: DSE 0x0b remote DRAM, DSE 0x00 L3 miss. */
    CHECK_EQ(load_latency(base_table[0x0b].val, 0, 0), 0x12668202042ULL);
    CHECK_EQ(load_latency(base_table[0x00].val, 0, 0), 0x10668080082ULL);
    /* and the Skylake-SP vectors of the existing table */
    CHECK_EQ(load_latency(patches[5].val, 0, 0), 0x13a68100042ULL);
    CHECK_EQ(load_latency(base_table[0x0a].val, 0, 0), 0x11a68201042ULL);

    /* Stores before Sapphire Rapids carry only L1 hit/miss: precise_store_data (Sandy
     * and Ivy Bridge) and precise_datala_hsw (Haswell to Ice Lake, PERF_MEM_NA with
     * mem_op STORE and mem_lvl L1 | HIT or MISS). */
    uint64_t snb_st = P(OP, STORE) | P(SNOOP, NA) | P(LVL, L1) | P(TLB, L2) | P(TLB, HIT);
    check_class("SNB store, L1 hit", snb_st | P(LVL, HIT), NMP_SRC_L1, 0);
    check_class("SNB store, L1 miss", snb_st | P(LVL, MISS), NMP_SRC_OTHER, 0);
    uint64_t hsw_na = P(OP, NA) | P(LVL, NA) | P(SNOOP, NA) | P(LOCK, NA) | P(TLB, NA) |
                      LEVEL(NA); /* PERF_MEM_NA (include/linux/perf_event.h) */
    uint64_t hsw_st = (hsw_na & ~(uint64_t)0x1f & ~((uint64_t)0x3fff << 5)) | P(OP, STORE);
    CHECK_EQ(hsw_na, NMP_MEM_NA);
    check_class("HSW store, L1 hit", hsw_st | P(LVL, L1) | P(LVL, HIT), NMP_SRC_L1, 0);
    check_class("HSW store, L1 miss", hsw_st | P(LVL, L1) | P(LVL, MISS), NMP_SRC_OTHER, 0);
    CHECK_EQ(hsw_st | P(LVL, L1) | P(LVL, MISS), 0x1e05080184ULL); /* the audit's value */
}

/* ---- 2. PEBS sample bodies ---- */
static void test_pebs(void)
{
    struct perf_event_attr a;
    memset(&a, 0, sizeof a);
    a.type = PERF_TYPE_RAW;
    a.config = 0x1cd;
    a.sample_type = PERF_SAMPLE_IDENTIFIER | PERF_SAMPLE_IP | PERF_SAMPLE_TID |
                    PERF_SAMPLE_TIME | PERF_SAMPLE_CPU | PERF_SAMPLE_ADDR |
                    PERF_SAMPLE_DATA_SRC | PERF_SAMPLE_WEIGHT_STRUCT | PERF_SAMPLE_PHYS_ADDR;
    struct buf b = {.n = 0};
    u64(&b, 77);                        /* IDENTIFIER */
    u64(&b, 0x401234);                  /* IP */
    u32(&b, 1000);                      /* pid */
    u32(&b, 1001);                      /* tid */
    u64(&b, 123456789);                 /* TIME */
    u64(&b, 0x7f0000001000);            /* ADDR */
    u32(&b, 3);                         /* cpu */
    u32(&b, 0);                         /* res */
    /* WEIGHT_STRUCT: var1_dw = 250 cache latency, var2_w = 40 instr latency (SPR) */
    u64(&b, 250 | (uint64_t)40 << 32 | (uint64_t)7 << 48);
    u64(&b, 0x13a68100042ULL);          /* DATA_SRC: SKL remote DRAM */
    u64(&b, 0x12345000);                /* PHYS_ADDR */
    struct nmp_sample s;
    CHECK_EQ(nmp_hw_decode(NMP_BACKEND_PEBS, &a, b.b, b.n, &s), 0);
    CHECK_EQ(s.ip, 0x401234);
    CHECK_EQ(s.pid, 1000);
    CHECK_EQ(s.tid, 1001);
    CHECK_EQ(s.time, 123456789);
    CHECK_EQ(s.addr, 0x7f0000001000);
    CHECK_EQ(s.cpu, 3);
    CHECK_EQ(s.weight, 250);
    CHECK_EQ(s.data_src, 0x13a68100042ULL);
    CHECK_EQ(s.phys_addr, 0x12345000);
    CHECK_EQ(s.access, NMP_ACC_LOAD);
    CHECK_EQ(s.size, 0);
    CHECK_EQ(s.rule, NMP_RULE_HW);
    /* every shorter body is malformed */
    for (size_t n = 0; n < b.n; n++)
        if (nmp_hw_decode(NMP_BACKEND_PEBS, &a, b.b, n, &s) != -1) {
            fprintf(stderr, "PEBS body truncated to %zu bytes was accepted\n", n);
            failures++;
        }

    /* HSW-ICX store event 0x82d0: DATA_SRC op STORE, L1 hit; no weight requested */
    a.config = 0x82d0;
    a.sample_type = PERF_SAMPLE_IP | PERF_SAMPLE_TID | PERF_SAMPLE_ADDR | PERF_SAMPLE_DATA_SRC;
    b.n = 0;
    u64(&b, 0x401300);
    u32(&b, 5);
    u32(&b, 6);
    u64(&b, 0x601000);
    u64(&b, DS(4, 0x8 | 0x2, 1, 1, 1, 0, 0, 0, 0, 0));
    CHECK_EQ(nmp_hw_decode(NMP_BACKEND_PEBS, &a, b.b, b.n, &s), 0);
    CHECK_EQ(s.access, NMP_ACC_STORE);
    CHECK_EQ(s.addr, 0x601000);
    CHECK_EQ(s.weight, 0);
    CHECK_EQ(s.time, 0);

    /* the SPR aux leader's records are skipped, not decoded */
    a.config = 0x8203;
    CHECK_EQ(nmp_hw_decode(NMP_BACKEND_PEBS, &a, b.b, b.n, &s), NMP_HW_SKIP);
    CHECK(nmp_hw_attr_is_aux(&a));
    a.config = 0x1cd;
    CHECK(!nmp_hw_attr_is_aux(&a));

    /* a kernel IP */
    a.sample_type = PERF_SAMPLE_IP | PERF_SAMPLE_ADDR;
    b.n = 0;
    u64(&b, 0xffffffff81001234ULL);
    u64(&b, 0xffff888000001000ULL);
    CHECK_EQ(nmp_hw_decode(NMP_BACKEND_PEBS, &a, b.b, b.n, &s), 0);
    CHECK_EQ(s.rule, NMP_RULE_KERNEL);
}

/* Every field that precedes WEIGHT/DATA_SRC/PHYS_ADDR present, with sentinel values, in
 * the uapi order: IDENTIFIER IP TID TIME ADDR ID STREAM_ID CPU PERIOD READ CALLCHAIN RAW
 * BRANCH_STACK REGS_USER STACK_USER WEIGHT DATA_SRC TRANSACTION REGS_INTR PHYS_ADDR. */
static void test_field_order(void)
{
    struct perf_event_attr a;
    memset(&a, 0, sizeof a);
    a.type = PERF_TYPE_RAW;
    a.config = 0x1cd;
    a.sample_type = PERF_SAMPLE_IDENTIFIER | PERF_SAMPLE_IP | PERF_SAMPLE_TID |
                    PERF_SAMPLE_TIME | PERF_SAMPLE_ADDR | PERF_SAMPLE_ID |
                    PERF_SAMPLE_STREAM_ID | PERF_SAMPLE_CPU | PERF_SAMPLE_PERIOD |
                    PERF_SAMPLE_READ | PERF_SAMPLE_CALLCHAIN | PERF_SAMPLE_RAW |
                    PERF_SAMPLE_BRANCH_STACK | PERF_SAMPLE_REGS_USER |
                    PERF_SAMPLE_STACK_USER | PERF_SAMPLE_WEIGHT | PERF_SAMPLE_DATA_SRC |
                    PERF_SAMPLE_TRANSACTION | PERF_SAMPLE_REGS_INTR | PERF_SAMPLE_PHYS_ADDR;
    a.read_format = PERF_FORMAT_GROUP | PERF_FORMAT_ID | PERF_FORMAT_TOTAL_TIME_ENABLED;
    a.branch_sample_type = PERF_SAMPLE_BRANCH_ANY | PERF_SAMPLE_BRANCH_HW_INDEX;
    a.sample_regs_user = 0xff0fff; /* 20 registers */
    a.sample_regs_intr = 0x3;      /* 2 registers */
    struct buf b = {.n = 0};
    u64(&b, 1);            /* IDENTIFIER */
    u64(&b, 0x400100);     /* IP */
    u32(&b, 10);
    u32(&b, 11);           /* TID */
    u64(&b, 999);          /* TIME */
    u64(&b, 0x5000);       /* ADDR */
    u64(&b, 2);            /* ID */
    u64(&b, 3);            /* STREAM_ID */
    u32(&b, 1);
    u32(&b, 0);            /* CPU */
    u64(&b, 2003);         /* PERIOD */
    u64(&b, 2);            /* READ: nr */
    u64(&b, 100);          /* time_enabled */
    for (int i = 0; i < 4; i++)
        u64(&b, 0xaaaa);   /* {value, id} x 2 */
    u64(&b, 3);            /* CALLCHAIN nr */
    for (int i = 0; i < 3; i++)
        u64(&b, 0xbbbb);
    u32(&b, 12);           /* RAW size: 12 bytes, 4 + 12 = 16 stays 8-aligned */
    u32(&b, 0xcccc);
    u64(&b, 0xcccc);
    u64(&b, 1);            /* BRANCH_STACK nr */
    u64(&b, 0xdddd);       /* hw_idx */
    for (int i = 0; i < 3; i++)
        u64(&b, 0xdddd);   /* one perf_branch_entry */
    u64(&b, 2);            /* REGS_USER abi 64 */
    for (int i = 0; i < 20; i++)
        u64(&b, 0xeeee);
    u64(&b, 16);           /* STACK_USER size */
    u64(&b, 0xffff);
    u64(&b, 0xffff);
    u64(&b, 8);            /* dyn_size */
    u64(&b, 321);          /* WEIGHT */
    u64(&b, 0x11a68201042ULL); /* DATA_SRC */
    u64(&b, 0x1111);       /* TRANSACTION */
    u64(&b, 2);            /* REGS_INTR abi */
    u64(&b, 0x2222);
    u64(&b, 0x2222);
    u64(&b, 0xabc000);     /* PHYS_ADDR */
    struct nmp_sample s;
    CHECK_EQ(nmp_hw_decode(NMP_BACKEND_PEBS, &a, b.b, b.n, &s), 0);
    CHECK_EQ(s.ip, 0x400100);
    CHECK_EQ(s.tid, 11);
    CHECK_EQ(s.time, 999);
    CHECK_EQ(s.addr, 0x5000);
    CHECK_EQ(s.cpu, 1);
    CHECK_EQ(s.weight, 321);
    CHECK_EQ(s.data_src, 0x11a68201042ULL);
    CHECK_EQ(s.phys_addr, 0xabc000);
    CHECK_EQ(nmp_memsrc_classify(s.data_src).src, NMP_SRC_LOCAL_DRAM);

    /* BRANCH_STACK without PERF_SAMPLE_BRANCH_HW_INDEX: nr, then the entries, no hw_idx
     * (perf_output_sample writes hw_idx only when branch_sample_hw_index(event)) */
    a.sample_type = PERF_SAMPLE_IP | PERF_SAMPLE_BRANCH_STACK | PERF_SAMPLE_WEIGHT |
                    PERF_SAMPLE_DATA_SRC;
    a.branch_sample_type = PERF_SAMPLE_BRANCH_ANY | PERF_SAMPLE_BRANCH_USER;
    for (uint64_t nr = 0; nr < 3; nr++) {
        b.n = 0;
        u64(&b, 0x400300);
        u64(&b, nr);
        for (uint64_t e = 0; e < 3 * nr; e++)
            u64(&b, 0xdddd);
        u64(&b, 77);               /* WEIGHT */
        u64(&b, 0x11a68201042ULL); /* DATA_SRC */
        CHECK_EQ(nmp_hw_decode(NMP_BACKEND_PEBS, &a, b.b, b.n, &s), 0);
        CHECK_EQ(s.weight, 77);
        CHECK_EQ(s.data_src, 0x11a68201042ULL);
        CHECK_EQ(nmp_hw_decode(NMP_BACKEND_PEBS, &a, b.b, b.n - 1, &s), -1);
    }
    a.branch_sample_type = 0;

    /* REGS_USER with abi NONE carries no registers; STACK_USER size 0 has no dyn_size */
    a.sample_type = PERF_SAMPLE_IP | PERF_SAMPLE_REGS_USER | PERF_SAMPLE_STACK_USER |
                    PERF_SAMPLE_DATA_SRC;
    b.n = 0;
    u64(&b, 0x400200);
    u64(&b, 0);            /* abi NONE */
    u64(&b, 0);            /* stack size 0 */
    u64(&b, 0x11a68201042ULL);
    CHECK_EQ(nmp_hw_decode(NMP_BACKEND_PEBS, &a, b.b, b.n, &s), 0);
    CHECK_EQ(s.data_src, 0x11a68201042ULL);
}

/* ---- 3. IBS op: IBS_OP_DATA2/3 per generation ---- */
#define CTL_VALID ((1ULL << 17) | (1ULL << 18)) /* op_en, op_val */
#define D3(ld, st, l1tlbmiss, l2tlbmiss, dcmiss, uc, locked, nomab, lin, phy, l2miss, swpf, \
           width, lat)                                                                    \
    ((uint64_t)(ld) | (uint64_t)(st) << 1 | (uint64_t)(l1tlbmiss) << 2 |                  \
     (uint64_t)(l2tlbmiss) << 3 | (uint64_t)(dcmiss) << 7 | (uint64_t)(uc) << 14 |        \
     (uint64_t)(locked) << 15 | (uint64_t)(nomab) << 16 | (uint64_t)(lin) << 17 |         \
     (uint64_t)(phy) << 18 | (uint64_t)(l2miss) << 20 | (uint64_t)(swpf) << 21 |          \
     (uint64_t)(width) << 22 | (uint64_t)(lat) << 32)
#define D2(src, rmt, hitst) \
    ((uint64_t)((src) & 7) | (uint64_t)(rmt) << 4 | (uint64_t)(hitst) << 5 | \
     (uint64_t)(((src) >> 3) & 3) << 6)

/* perf_mem_data_src pieces as ibs.c builds them */
#define OP_LOAD 2
#define OP_STORE 4
#define LVLHIT(x) ((uint64_t)((x) | 0x2) << 5)
#define LVLNUM(x) ((uint64_t)(x) << 33)
#define REMOTE (1ULL << 37)
#define HOPS(x) ((uint64_t)((x) + 1) << 43)
#define SNOOP(x) ((uint64_t)(x) << 19)
#define LOCK(x) ((uint64_t)(x) << 24)
#define TLB(x) ((uint64_t)(x) << 26)
#define BASE_NA (SNOOP(1) | LOCK(1)) /* snoop NA, lock NA */

static void test_ibs_data_src(void)
{
    static const struct {
        const char *what;
        uint32_t caps;
        unsigned family, model;
        uint64_t data2, data3;
        uint64_t want;
        enum nmp_memsrc cls;
    } t[] = {
        {"Zen3 remote DRAM load, L1 TLB hit", 0, 0x19, 0x01, D2(3, 1, 0),
         D3(1, 0, 0, 0, 1, 0, 0, 0, 1, 1, 1, 0, 4, 300),
         OP_LOAD | LVLHIT(0x100) | LVLNUM(0xd) | REMOTE | HOPS(1) | BASE_NA | TLB(0x8 | 0x2),
         NMP_SRC_REMOTE_DRAM},
        {"Zen3 local DRAM load, L2 TLB hit", 0, 0x19, 0x01, D2(3, 0, 0),
         D3(1, 0, 1, 0, 1, 0, 0, 0, 1, 0, 1, 0, 3, 200),
         OP_LOAD | LVLHIT(0x80) | LVLNUM(0xd) | BASE_NA | TLB(0x10 | 0x2), NMP_SRC_LOCAL_DRAM},
        {"Zen2 local-node cache in M state: HITM", 0, 0x17, 0x31, D2(2, 0, 0),
         D3(1, 0, 1, 1, 1, 0, 0, 0, 1, 0, 1, 0, 4, 90),
         OP_LOAD | LVLHIT(0x40 | 0x400) | LVLNUM(0xb) | HOPS(0) | SNOOP(0x10) | LOCK(1) |
             TLB(0x10 | 0x4),
         NMP_SRC_L3},
        {"Zen3 model 0x01: cache_hit_st invalid, no HITM", 0, 0x19, 0x01, D2(2, 0, 0),
         D3(1, 0, 0, 0, 1, 0, 0, 0, 0, 0, 1, 0, 4, 90),
         OP_LOAD | LVLHIT(0x40 | 0x400) | LVLNUM(0xb) | HOPS(0) | BASE_NA | TLB(1), NMP_SRC_L3},
        {"pre-Zen4 remote-node cache", 0, 0x17, 0x31, D2(4, 1, 1),
         D3(1, 0, 0, 0, 1, 0, 0, 0, 0, 0, 1, 0, 4, 400),
         OP_LOAD | LVLHIT(0x800) | LVLNUM(0xb) | REMOTE | HOPS(1) | BASE_NA | TLB(1),
         NMP_SRC_REMOTE_CACHE},
        {"L1 hit, locked", 0, 0x17, 0x31, 0, D3(1, 0, 0, 0, 0, 0, 1, 0, 1, 1, 0, 0, 3, 0),
         OP_LOAD | LVLHIT(0x8) | LVLNUM(1) | SNOOP(1) | LOCK(2) | TLB(0xa), NMP_SRC_L1},
        {"L2 hit", 0, 0x17, 0x31, 0, D3(1, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 3, 12),
         OP_LOAD | LVLHIT(0x20) | LVLNUM(2) | BASE_NA | TLB(1), NMP_SRC_L2},
        {"erratum 1293 (Fam19h model <= 0xF, SwPf): OP_DATA2 and L2Miss ignored", 0, 0x19, 0x01,
         D2(3, 1, 0), D3(1, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 1, 3, 12),
         OP_LOAD | ((uint64_t)1 << 5) | LVLNUM(0xf) | BASE_NA | TLB(1), NMP_SRC_OTHER},
        {"same op on Zen4 (model 0x11): L2 hit", NMP_IBS_CAPS_ZEN4, 0x19, 0x11, D2(3, 1, 0),
         D3(1, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 1, 3, 12),
         OP_LOAD | LVLHIT(0x20) | LVLNUM(2) | BASE_NA | TLB(1), NMP_SRC_L2},
        {"erratum 1293 with DcMissNoMabAlloc: MAB hit (LFB)", 0, 0x19, 0x01, D2(3, 0, 0),
         D3(1, 0, 0, 0, 1, 0, 0, 1, 0, 0, 1, 0, 3, 12),
         OP_LOAD | LVLHIT(0x10) | LVLNUM(0xc) | BASE_NA | TLB(1), NMP_SRC_LFB},
        {"uncached access", 0, 0x17, 0x31, D2(3, 0, 0), D3(1, 0, 0, 0, 1, 1, 0, 0, 0, 0, 1, 0, 3, 0),
         OP_LOAD | LVLHIT(0x2000) | LVLNUM(8) | BASE_NA | TLB(1), NMP_SRC_OTHER},
        {"Zen4 local L3 (DataSrc 1)", NMP_IBS_CAPS_ZEN4, 0x19, 0x11, D2(1, 0, 1),
         D3(1, 0, 0, 0, 1, 0, 0, 0, 0, 0, 1, 0, 4, 50),
         OP_LOAD | LVLHIT(0x40) | LVLNUM(3) | BASE_NA | TLB(1), NMP_SRC_L3},
        {"Zen4 near CCX (DataSrc 2) in M state", NMP_IBS_CAPS_ZEN4, 0x19, 0x11, D2(2, 0, 0),
         D3(1, 0, 0, 0, 1, 0, 0, 0, 0, 0, 1, 0, 4, 80),
         OP_LOAD | LVLHIT(0x400) | LVLNUM(0xb) | REMOTE | HOPS(0) | SNOOP(0x10) | LOCK(1) |
             TLB(1),
         NMP_SRC_PEER_CACHE}, /* REMOTE with HOPS_0: another CCX of this node */
        {"Zen4 far CCX (DataSrc 5)", NMP_IBS_CAPS_ZEN4, 0x19, 0x11, D2(5, 0, 1),
         D3(1, 0, 0, 0, 1, 0, 0, 0, 0, 0, 1, 0, 4, 200),
         OP_LOAD | LVLHIT(0x800) | LVLNUM(0xb) | REMOTE | HOPS(1) | BASE_NA | TLB(1),
         NMP_SRC_REMOTE_CACHE},
        {"Zen4 remote DRAM", NMP_IBS_CAPS_ZEN4, 0x19, 0x11, D2(3, 1, 0),
         D3(1, 0, 0, 0, 1, 0, 0, 0, 0, 0, 1, 0, 4, 350),
         OP_LOAD | LVLHIT(0x100) | LVLNUM(0xd) | REMOTE | HOPS(1) | BASE_NA | TLB(1),
         NMP_SRC_REMOTE_DRAM},
        {"Zen4 remote PMEM (DataSrc 6)", NMP_IBS_CAPS_ZEN4, 0x19, 0x11, D2(6, 1, 0),
         D3(1, 0, 0, 0, 1, 0, 0, 0, 0, 0, 1, 0, 4, 900),
         OP_LOAD | LVLNUM(0xe) | REMOTE | HOPS(1) | BASE_NA | TLB(1), NMP_SRC_PMEM_CXL},
        {"Zen4 CXL (DataSrc 8 = data_src_hi 1)", NMP_IBS_CAPS_ZEN4, 0x19, 0x11, D2(8, 0, 0),
         D3(1, 0, 0, 0, 1, 0, 0, 0, 0, 0, 1, 0, 4, 700),
         OP_LOAD | LVLNUM(0x9) | BASE_NA | TLB(1), NMP_SRC_PMEM_CXL},
        {"DataSrc 8 without Zen4 caps reads as lo 0: no source", 0, 0x19, 0x01, D2(8, 0, 0),
         D3(1, 0, 0, 0, 1, 0, 0, 0, 0, 0, 1, 0, 4, 700),
         OP_LOAD | ((uint64_t)1 << 5) | LVLNUM(0xf) | BASE_NA | TLB(1), NMP_SRC_OTHER},
        {"Zen4 peer-agent memory (12): not in the table", NMP_IBS_CAPS_ZEN4, 0x19, 0x11,
         D2(12, 0, 0), D3(1, 0, 0, 0, 1, 0, 0, 0, 0, 0, 1, 0, 4, 700),
         OP_LOAD | ((uint64_t)1 << 5) | LVLNUM(0xf) | BASE_NA | TLB(1), NMP_SRC_OTHER},
        {"store missing L2: OP_DATA2 not used", 0, 0x17, 0x31, D2(3, 1, 0),
         D3(0, 1, 0, 0, 1, 0, 0, 0, 1, 0, 1, 0, 3, 0),
         OP_STORE | ((uint64_t)1 << 5) | LVLNUM(0xf) | BASE_NA | TLB(0xa), NMP_SRC_OTHER},
        {"not a memory op", 0, 0x17, 0x31, D2(3, 1, 0), 0, NMP_MEM_NA, NMP_SRC_OTHER},
    };
    for (size_t i = 0; i < sizeof t / sizeof *t; i++) {
        struct nmp_ibs_op op;
        memset(&op, 0, sizeof op);
        op.caps = t[i].caps;
        op.ctl = CTL_VALID;
        op.data2 = t[i].data2;
        op.data3 = t[i].data3;
        uint64_t got = nmp_ibs_data_src(&op, t[i].family, t[i].model);
        if (got != t[i].want) {
            fprintf(stderr, "IBS %s: data_src %#llx, expected %#llx\n", t[i].what,
                    (unsigned long long)got, (unsigned long long)t[i].want);
            failures++;
        }
        if (nmp_memsrc_classify(got).src != t[i].cls) {
            fprintf(stderr, "IBS %s: class %s, expected %s\n", t[i].what,
                    nmp_memsrc_name(nmp_memsrc_classify(got).src), nmp_memsrc_name(t[i].cls));
            failures++;
        }
    }
    /* The Linux 6.1 vector (remote DRAM load, L1 TLB hit) is the
     * current kernel's value without lvl_num / remote / hops, which 6.1 did not set. */
    struct nmp_ibs_op op = {.ctl = CTL_VALID, .data2 = D2(3, 1, 0),
                            .data3 = D3(1, 0, 0, 0, 1, 0, 0, 0, 1, 0, 1, 0, 4, 300)};
    uint64_t now = nmp_ibs_data_src(&op, 0x17, 0x31);
    uint64_t old = (now & ~(LVLNUM(0xf) | REMOTE | (7ULL << 43))) | LVLNUM(0xf);
    CHECK_EQ(old, 0x1e29082042ULL);
}

static void test_ibs_fill(void)
{
    struct nmp_ibs_op op;
    struct nmp_sample s;
    memset(&op, 0, sizeof op);
    op.ctl = CTL_VALID;
    op.dc_linaddr = 0x7ffd0000beef;
    op.dc_physaddr = 0x1beef;
    /* 8-byte load (width 4), missed: latency 300, both addresses valid */
    op.data2 = D2(3, 1, 0);
    op.data3 = D3(1, 0, 0, 0, 1, 0, 0, 0, 1, 1, 1, 0, 4, 300);
    nmp_ibs_fill(&op, 0x19, 0x01, &s);
    CHECK_EQ(s.access, NMP_ACC_LOAD);
    CHECK_EQ(s.size, 8);
    CHECK_EQ(s.weight, 300);
    CHECK_EQ(s.addr, 0x7ffd0000beef);
    CHECK_EQ(s.phys_addr, 0x1beef);
    CHECK_EQ(s.rule, NMP_RULE_HW);
    /* load hitting L1: no latency (the kernel reports WEIGHT only with dc_miss) */
    op.data3 = D3(1, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 3, 55);
    nmp_ibs_fill(&op, 0x19, 0x01, &s);
    CHECK_EQ(s.weight, 0);
    CHECK_EQ(s.size, 4);
    CHECK_EQ(s.phys_addr, 0);
    /* store: no latency even when it misses; address only when valid */
    op.data3 = D3(0, 1, 0, 0, 1, 0, 0, 0, 0, 0, 1, 0, 1, 80);
    nmp_ibs_fill(&op, 0x19, 0x01, &s);
    CHECK_EQ(s.access, NMP_ACC_STORE);
    CHECK_EQ(s.weight, 0);
    CHECK_EQ(s.addr, 0);
    CHECK_EQ(s.size, 1);
    /* read-modify-write: ld_op and st_op */
    op.data3 = D3(1, 1, 0, 0, 0, 0, 1, 0, 1, 0, 0, 0, 4, 0);
    nmp_ibs_fill(&op, 0x19, 0x01, &s);
    CHECK_EQ(s.access, NMP_ACC_RMW);
    CHECK_EQ(s.data_src & 0x1f, OP_LOAD);
    /* not a memory op */
    op.data3 = 0;
    nmp_ibs_fill(&op, 0x19, 0x01, &s);
    CHECK_EQ(s.access, NMP_ACC_NONE);
    CHECK_EQ(s.rule, NMP_RULE_NO_MEM);
    CHECK_EQ(s.addr, 0);
}

/* A whole ibs_op record: sample_type as nmp_hw_attrs() sets it. */
static uint64_t g_op_data = 0x0000000000640010ULL; /* IBS_OP_DATA: tag_to_ret 0x64 */
static size_t ibs_body(struct buf *b, uint32_t caps, int nregs, uint64_t ctl, uint64_t ip)
{
    b->n = 0;
    u64(b, 42);             /* IDENTIFIER */
    u64(b, ip);             /* IP (the kernel sets it from IBS_OP_RIP) */
    u32(b, 2000);
    u32(b, 2001);           /* TID */
    u64(b, 5555);           /* TIME */
    u64(b, 0x7f00000a0000); /* ADDR: the kernel's copy of IBS_DC_LINADDR */
    u32(b, 1);
    u32(b, 0);              /* CPU */
    /* RAW: u32 size = 4 + 8n, u32 caps, u64 regs[n] (perf_ibs_data; ibs.c) */
    u32(b, (uint32_t)(4 + 8 * nregs));
    u32(b, caps);
    uint64_t regs[9] = {ctl, ip, g_op_data,
                        D2(3, 1, 0), D3(1, 0, 0, 0, 1, 0, 0, 0, 1, 1, 1, 0, 4, 300),
                        0x7f00000a0000, 0x9a0000, 0xb0b0, 0xd4d4};
    for (int i = 0; i < nregs; i++)
        u64(b, regs[i]);
    u64(b, 300);            /* WEIGHT (kernel) */
    u64(b, 0x1e29082042ULL); /* DATA_SRC (kernel, 6.1 form) */
    u64(b, 0x9a0000);       /* PHYS_ADDR */
    return b->n;
}

static void test_ibs_record(void)
{
    struct perf_event_attr a;
    memset(&a, 0, sizeof a);
    a.type = 11;
    a.sample_type = PERF_SAMPLE_IDENTIFIER | PERF_SAMPLE_IP | PERF_SAMPLE_TID |
                    PERF_SAMPLE_TIME | PERF_SAMPLE_CPU | PERF_SAMPLE_RAW | PERF_SAMPLE_ADDR |
                    PERF_SAMPLE_DATA_SRC | PERF_SAMPLE_WEIGHT | PERF_SAMPLE_PHYS_ADDR;
    struct buf b;
    struct nmp_sample s;
    nmp_hw_set_cpu(0x19, 0x01);
    size_t n = ibs_body(&b, 0, 7, CTL_VALID, 0x401500);
    CHECK_EQ(n % 8, 0); /* 4 + 60 bytes of RAW keep the record 8-byte aligned */
    CHECK_EQ(nmp_hw_decode(NMP_BACKEND_IBS, &a, b.b, n, &s), 0);
    CHECK_EQ(s.ip, 0x401500);
    CHECK_EQ(s.pid, 2000);
    CHECK_EQ(s.tid, 2001);
    CHECK_EQ(s.time, 5555);
    CHECK_EQ(s.cpu, 1);
    CHECK_EQ(s.addr, 0x7f00000a0000);
    CHECK_EQ(s.phys_addr, 0x9a0000);
    CHECK_EQ(s.weight, 300);
    CHECK_EQ(s.size, 8);
    CHECK_EQ(s.access, NMP_ACC_LOAD);
    CHECK_EQ(s.rule, NMP_RULE_HW);
    CHECK_EQ(s.data_src, OP_LOAD | LVLHIT(0x100) | LVLNUM(0xd) | REMOTE | HOPS(1) | BASE_NA |
                             TLB(0xa));
    CHECK_EQ(nmp_memsrc_classify(s.data_src).src, NMP_SRC_REMOTE_DRAM);
    for (size_t k = 0; k < n; k++)
        if (nmp_hw_decode(NMP_BACKEND_IBS, &a, b.b, k, &s) != -1) {
            fprintf(stderr, "IBS body truncated to %zu bytes was accepted\n", k);
            failures++;
        }
    /* with BR_TARGET and OP_DATA4 (caps bits 5, 10): 9 registers */
    n = ibs_body(&b, NMP_IBS_CAPS_BRNTRGT | NMP_IBS_CAPS_OPDATA4, 9, CTL_VALID, 0x401600);
    CHECK_EQ(nmp_hw_decode(NMP_BACKEND_IBS, &a, b.b, n, &s), 0);
    CHECK_EQ(s.addr, 0x7f00000a0000);
    CHECK_EQ(s.ip, 0x401600);
    struct nmp_ibs_op op;
    CHECK_EQ(nmp_ibs_parse_raw(b.b + 52, 4 + 8 * 9, &op), 0);
    CHECK_EQ(op.br_target, 0xb0b0);
    CHECK_EQ(op.data4, 0xd4d4);
    CHECK_EQ(op.nregs, 9);
    /* op_en or op_val clear: not a valid op sample */
    n = ibs_body(&b, 0, 7, 0, 0x401500);
    CHECK_EQ(nmp_hw_decode(NMP_BACKEND_IBS, &a, b.b, n, &s), -1);
    n = ibs_body(&b, 0, 7, 1ULL << 18, 0x401500);
    CHECK_EQ(nmp_hw_decode(NMP_BACKEND_IBS, &a, b.b, n, &s), -1);
    n = ibs_body(&b, 0, 7, 1ULL << 17, 0x401500);
    CHECK_EQ(nmp_hw_decode(NMP_BACKEND_IBS, &a, b.b, n, &s), -1);
    /* kernel IP: kept, marked (the sampler drops it by header.misc) */
    n = ibs_body(&b, 0, 7, CTL_VALID, 0xffffffff81000000ULL);
    CHECK_EQ(nmp_hw_decode(NMP_BACKEND_IBS, &a, b.b, n, &s), 0);
    CHECK_EQ(s.rule, NMP_RULE_KERNEL);
    CHECK(nmp_hw_misc_is_user(PERF_RECORD_MISC_USER | PERF_RECORD_MISC_EXACT_IP));
    CHECK(!nmp_hw_misc_is_user(PERF_RECORD_MISC_KERNEL));
    /* IBS_OP_DATA rip_invalid (bit 38) with caps RIPINVALIDCHK (bit 7): the kernel keeps
     * the interrupted IP and clears the exact flag (ibs.c perf_ibs_handle_irq), so the
     * sample's IP is not the op's: the IP is unknown, the data address stays. */
    g_op_data = 0x0000000000640010ULL | 1ULL << 38;
    n = ibs_body(&b, NMP_IBS_CAPS_RIPINVALIDCHK, 7, CTL_VALID, 0x401abc);
    CHECK_EQ(nmp_hw_decode(NMP_BACKEND_IBS, &a, b.b, n, &s), 0);
    CHECK_EQ(s.ip, 0);
    CHECK_EQ(s.addr, 0x7f00000a0000);
    CHECK_EQ(s.access, NMP_ACC_LOAD);
    CHECK_EQ(s.rule, NMP_RULE_HW);
    CHECK_EQ(s.weight, 300);
    /* a kernel-side interrupted IP with an invalid RIP is no kernel op either */
    n = ibs_body(&b, NMP_IBS_CAPS_RIPINVALIDCHK, 7, CTL_VALID, 0xffffffff81000000ULL);
    CHECK_EQ(nmp_hw_decode(NMP_BACKEND_IBS, &a, b.b, n, &s), 0);
    CHECK_EQ(s.ip, 0);
    /* bit 38 counts only where the CPU has RIPINVALIDCHK: the IP is the op's */
    n = ibs_body(&b, 0, 7, CTL_VALID, 0x401abc);
    CHECK_EQ(nmp_hw_decode(NMP_BACKEND_IBS, &a, b.b, n, &s), 0);
    CHECK_EQ(s.ip, 0x401abc);
    g_op_data = 0x0000000000640010ULL;
    n = ibs_body(&b, NMP_IBS_CAPS_RIPINVALIDCHK, 7, CTL_VALID, 0x401abc);
    CHECK_EQ(nmp_hw_decode(NMP_BACKEND_IBS, &a, b.b, n, &s), 0);
    CHECK_EQ(s.ip, 0x401abc);
    /* without RAW: the kernel's own fields */
    a.sample_type = PERF_SAMPLE_IP | PERF_SAMPLE_ADDR | PERF_SAMPLE_WEIGHT | PERF_SAMPLE_DATA_SRC;
    b.n = 0;
    u64(&b, 0x401700);
    u64(&b, 0x1000);
    u64(&b, 77);
    u64(&b, 0x1e29082042ULL);
    CHECK_EQ(nmp_hw_decode(NMP_BACKEND_IBS, &a, b.b, b.n, &s), 0);
    CHECK_EQ(s.addr, 0x1000);
    CHECK_EQ(s.weight, 77);
    CHECK_EQ(s.access, NMP_ACC_LOAD);
    CHECK_EQ(s.data_src, 0x1e29082042ULL);
    /* the soft backend is not decoded here */
    CHECK_EQ(nmp_hw_decode(NMP_BACKEND_SOFT, &a, b.b, b.n, &s), -1);
}

int main(void)
{
    test_classify();
    test_kernel_tables();
    test_pebs();
    test_field_order();
    test_ibs_data_src();
    test_ibs_fill();
    test_ibs_record();
    return check_result();
}
