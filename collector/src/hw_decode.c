/* Decoding of PERF_RECORD_SAMPLE bodies of the hardware backends into struct nmp_sample
 * (the body's fields: perf_sample.c), the IBS op register decode and the data-source
 * classification.
 * Layouts from the Linux sources: include/uapi/linux/perf_event.h, kernel/events/core.c
 * (perf_output_sample), arch/x86/events/amd/ibs.c, arch/x86/include/asm/amd-ibs.h.
 */
#include "nmp_hw_priv.h"

#include "nmp_perf_sample.h"

#include <string.h>

#define S(field, v) ((uint64_t)(v) << NMP_MEM_##field##_SHIFT)
#define L(x) (S(LVL, NMP_MEM_LVL_##x) | S(LVL, NMP_MEM_LVL_HIT))
#define LN(x) S(LVLNUM, NMP_MEM_LVLNUM_##x)
#define REM S(REMOTE, 1)
#define HOPS(x) S(HOPS, (x) + 1) /* PERF_MEM_HOPS_0 is 1 */

/* ---- IBS op ---- */

int nmp_ibs_parse_raw(const void *data, uint32_t size, struct nmp_ibs_op *op)
{
    /* u32 caps, then u64 regs in MSR order (perf_ibs_data, ibs.c) */
    const uint8_t *p = data;
    memset(op, 0, sizeof *op);
    if (size < 4 + 7 * 8)
        return -1;
    memcpy(&op->caps, p, 4);
    uint64_t r[9] = {0};
    int n = (int)((size - 4) / 8);
    if (n > 9)
        n = 9;
    memcpy(r, p + 4, (size_t)n * 8);
    op->nregs = n;
    op->ctl = r[0];
    op->rip = r[1];
    op->data = r[2];
    op->data2 = r[3];
    op->data3 = r[4];
    op->dc_linaddr = r[5];
    op->dc_physaddr = r[6];
    int i = 7;
    if ((op->caps & NMP_IBS_CAPS_BRNTRGT) && i < n)
        op->br_target = r[i++];
    if ((op->caps & NMP_IBS_CAPS_OPDATA4) && i < n)
        op->data4 = r[i++];
    /* a valid op sample has op_en (17) and op_val (18) of IBS_OP_CTL set
     * (Linux tools/perf/util/amd-sample-raw.c) */
    if (!(op->ctl >> 17 & 1) || !(op->ctl >> 18 & 1))
        return -1;
    return 0;
}

#define BIT(v, n) (((v) >> (n)) & 1)
#define BITS(v, lo, w) (((v) >> (lo)) & ((1ULL << (w)) - 1))

/* IBS_OP_DATA3 fields (Linux arch/x86/include/asm/amd-ibs.h, union ibs_op_data3) */
#define D3_LD_OP(d) BIT(d, 0)
#define D3_ST_OP(d) BIT(d, 1)
#define D3_L1TLB_MISS(d) BIT(d, 2)
#define D3_L2TLB_MISS(d) BIT(d, 3)
#define D3_DC_MISS(d) BIT(d, 7)
#define D3_UC_MEM_ACC(d) BIT(d, 14)
#define D3_LOCKED(d) BIT(d, 15)
#define D3_NO_MAB_ALLOC(d) BIT(d, 16)
#define D3_LIN_VALID(d) BIT(d, 17)
#define D3_PHY_VALID(d) BIT(d, 18)
#define D3_L2_MISS(d) BIT(d, 20)
#define D3_SW_PF(d) BIT(d, 21)
#define D3_MEM_WIDTH(d) BITS(d, 22, 4)
#define D3_MISS_LAT(d) BITS(d, 32, 16)
/* IBS_OP_DATA2 (union ibs_op_data2) */
#define D2_SRC_LO(d) BITS(d, 0, 3)
#define D2_RMT_NODE(d) BIT(d, 4)
#define D2_CACHE_HIT_ST(d) BIT(d, 5)
#define D2_SRC_HI(d) BITS(d, 6, 2)

/* DataSrc values (amd-ibs.h IBS_DATA_SRC_*, IBS_DATA_SRC_EXT_*) */
enum { SRC_LOC_CACHE = 2, SRC_DRAM = 3, SRC_REM_CACHE = 4, SRC_IO = 7 };
enum {
    SRCX_LOC_CACHE = 1, SRCX_NEAR_CCX_CACHE = 2, SRCX_DRAM = 3, SRCX_FAR_CCX_CACHE = 5,
    SRCX_PMEM = 6, SRCX_IO = 7, SRCX_EXT_MEM = 8, SRCX_PEER_AGENT_MEM = 12,
};

static int erratum_1293(unsigned family, unsigned model, uint64_t d3)
{
    /* Fam 19h models 0x0-0xF: with SwPf or DcMissNoMabAlloc, OP_DATA2 (and L2Miss) are
     * invalid (ibs.c perf_ibs_get_op_data2 / perf_ibs_get_mem_lvl, "Erratum #1293"). */
    return family == 0x19 && model <= 0xF && (D3_SW_PF(d3) || D3_NO_MAB_ALLOC(d3));
}

static int ibs_src(const struct nmp_ibs_op *op, uint64_t d2)
{
    if (op->caps & NMP_IBS_CAPS_ZEN4)
        return (int)((D2_SRC_HI(d2) << 3) | D2_SRC_LO(d2));
    return (int)D2_SRC_LO(d2);
}

/* perf_ibs_get_mem_lvl() of ibs.c (the L/LN/REM/HOPS table form, Linux 6.6+) */
static uint64_t ibs_mem_lvl(const struct nmp_ibs_op *op, uint64_t d2, uint64_t d3,
                            int is_load, unsigned family, unsigned model)
{
    int src = ibs_src(op, d2);
    int zen4 = !!(op->caps & NMP_IBS_CAPS_ZEN4);
    /* DcUcMemAcc invalidates everything but an IO DataSrc (IBS_DATA_SRC_EXT_IO = 7) */
    if (D3_UC_MEM_ACC(d3) && src != SRCX_IO)
        return L(UNC) | LN(UNC);
    if (!D3_DC_MISS(d3))
        return L(L1) | LN(L1);
    if (!D3_L2_MISS(d3) && !erratum_1293(family, model, d3))
        return L(L2) | LN(L2);
    if (is_load) { /* OP_DATA2 is valid only for loads */
        uint64_t val = 0;
        int rmt = (int)D2_RMT_NODE(d2);
        if (zen4) {
            switch (src) {
            case SRCX_LOC_CACHE: val = L(L3) | LN(L3); break;
            case SRCX_NEAR_CCX_CACHE: val = L(REM_CCE1) | LN(ANY_CACHE) | REM | HOPS(0); break;
            case SRCX_DRAM: val = L(LOC_RAM) | LN(RAM); break;
            case SRCX_FAR_CCX_CACHE: val = L(REM_CCE2) | LN(ANY_CACHE) | REM | HOPS(1); break;
            case SRCX_PMEM: val = LN(PMEM); break;
            case SRCX_IO: val = L(IO) | LN(IO); break;
            case SRCX_EXT_MEM: val = LN(CXL); break;
            default: break;
            }
            /* HOPS_1 because IBS doesn't provide remote socket detail (ibs.c) */
            if (val && rmt && (src == SRCX_DRAM || src == SRCX_PMEM || src == SRCX_EXT_MEM))
                val = src == SRCX_DRAM ? L(REM_RAM1) | LN(RAM) | REM | HOPS(1)
                                       : val | REM | HOPS(1);
        } else {
            switch (src) {
            case SRC_LOC_CACHE: val = L(L3) | L(REM_CCE1) | LN(ANY_CACHE) | HOPS(0); break;
            case SRC_DRAM: val = L(LOC_RAM) | LN(RAM); break;
            case SRC_REM_CACHE: val = L(REM_CCE2) | LN(ANY_CACHE) | REM | HOPS(1); break;
            case SRC_IO: val = L(IO) | LN(IO); break;
            default: break;
            }
            if (val && rmt && src == SRC_DRAM)
                val = L(REM_RAM1) | LN(RAM) | REM | HOPS(1);
        }
        if (val)
            return val;
    }
    /* MAB hit, only when IBS gives no DataSrc */
    if (D3_NO_MAB_ALLOC(d3))
        return L(LFB) | LN(LFB);
    return S(LVL, NMP_MEM_LVL_NA) | LN(NA);
}

static int cache_hit_st_valid(unsigned family, unsigned model)
{
    /* invalid on Fam 19h models 0x0-0xF and 0x20-0x5F (ibs.c perf_ibs_cache_hit_st_valid) */
    return !(family == 0x19 && (model <= 0xF || (model >= 0x20 && model <= 0x5F)));
}

uint64_t nmp_ibs_data_src(const struct nmp_ibs_op *op, unsigned family, unsigned model)
{
    uint64_t d3 = op->data3, d2 = op->data2;
    uint64_t ds = NMP_MEM_NA;
    uint64_t mop;
    if (D3_LD_OP(d3))
        mop = NMP_MEM_OP_LOAD;
    else if (D3_ST_OP(d3))
        mop = NMP_MEM_OP_STORE;
    else
        return NMP_MEM_NA;
    ds = (ds & ~S(OP, 0x1f)) | S(OP, mop);
    if (erratum_1293(family, model, d3))
        d2 = 0;
    int is_load = mop == NMP_MEM_OP_LOAD;
    /* mem_lvl and mem_lvl_num cleared, then OR-ed with the level (perf_ibs_get_data_src) */
    ds &= ~(S(LVL, 0x3fff) | S(LVLNUM, 0xf));
    uint64_t lvl = ibs_mem_lvl(op, d2, d3, is_load, family, model);
    ds |= lvl;
    /* snoop: HITM for a load served by a cache line in M state (cache_hit_st == 0) */
    uint64_t snoop = NMP_MEM_SNOOP_NA;
    uint64_t mem_lvl = lvl >> NMP_MEM_LVL_SHIFT & 0x3fff;
    if (cache_hit_st_valid(family, model) && is_load &&
        !(mem_lvl & (NMP_MEM_LVL_L1 | NMP_MEM_LVL_L2)) && !D2_CACHE_HIT_ST(d2)) {
        int src = ibs_src(op, d2);
        if (op->caps & NMP_IBS_CAPS_ZEN4) {
            if (src == SRCX_LOC_CACHE || src == SRCX_NEAR_CCX_CACHE || src == SRCX_FAR_CCX_CACHE)
                snoop = NMP_MEM_SNOOP_HITM;
        } else if (src == SRC_LOC_CACHE) {
            snoop = NMP_MEM_SNOOP_HITM;
        }
    }
    ds = (ds & ~S(SNOOP, 0x1f)) | S(SNOOP, snoop);
    /* TLB (perf_ibs_get_tlb_lvl) */
    uint64_t tlb = NMP_MEM_TLB_NA;
    if (D3_LIN_VALID(d3)) {
        if (!D3_L1TLB_MISS(d3))
            tlb = NMP_MEM_TLB_L1 | NMP_MEM_TLB_HIT;
        else if (!D3_L2TLB_MISS(d3))
            tlb = NMP_MEM_TLB_L2 | NMP_MEM_TLB_HIT;
        else
            tlb = NMP_MEM_TLB_L2 | NMP_MEM_TLB_MISS;
    }
    ds = (ds & ~S(TLB, 0x7f)) | S(TLB, tlb);
    /* lock (perf_ibs_get_mem_lock) */
    ds = (ds & ~S(LOCK, 0x3)) | S(LOCK, D3_LOCKED(d3) ? NMP_MEM_LOCK_LOCKED : NMP_MEM_LOCK_NA);
    return ds;
}

int nmp_ibs_rip_invalid(const struct nmp_ibs_op *op)
{
    /* IBS_RIP_INVALID is IBS_OP_DATA bit 38 (Linux arch/x86/include/asm/perf_event.h) */
    return (op->caps & NMP_IBS_CAPS_RIPINVALIDCHK) && BIT(op->data, 38);
}

void nmp_ibs_fill(const struct nmp_ibs_op *op, unsigned family, unsigned model,
                  struct nmp_sample *out)
{
    uint64_t d3 = op->data3;
    int ld = (int)D3_LD_OP(d3), st = (int)D3_ST_OP(d3);
    out->access = ld && st ? NMP_ACC_RMW : ld ? NMP_ACC_LOAD : st ? NMP_ACC_STORE : NMP_ACC_NONE;
    out->data_src = nmp_ibs_data_src(op, family, model);
    out->addr = 0;
    out->phys_addr = 0;
    out->weight = 0;
    out->size = 0;
    /* Without a valid RIP the sample's IP is where the interrupt landed, not the op: the
     * data address stays (DC_LINADDR has its own valid bit), the op's IP is unknown (0). */
    if (nmp_ibs_rip_invalid(op))
        out->ip = 0;
    if (!ld && !st) {
        out->rule = NMP_RULE_NO_MEM; /* a sampled op that does not access memory */
        return;
    }
    out->rule = NMP_RULE_HW;
    if (D3_LIN_VALID(d3))
        out->addr = op->dc_linaddr;
    if (D3_PHY_VALID(d3))
        out->phys_addr = op->dc_physaddr;
    /* the kernel's WEIGHT: dc_miss_lat for loads that missed the data cache */
    if (ld && D3_DC_MISS(d3))
        out->weight = (uint32_t)D3_MISS_LAT(d3);
    unsigned w = (unsigned)D3_MEM_WIDTH(d3); /* bytes = 1 << (w - 1) (amd-sample-raw.c) */
    if (w >= 1 && w <= 8)
        out->size = (uint8_t)(1u << (w - 1));
}

/* ---- nmp_hw_decode ---- */

static unsigned g_family, g_model;
static int g_cpu_known;

void nmp_hw_set_cpu(unsigned family, unsigned model)
{
    g_family = family;
    g_model = model;
    g_cpu_known = 1;
}

static void cpu_once(void)
{
    if (!g_cpu_known) {
        unsigned f = 0, m = 0;
        if (nmp_hw_cpu_id(&f, &m, NULL, 0) == 0)
            nmp_hw_set_cpu(f, m);
        g_cpu_known = 1;
    }
}

static int is_kernel_ip(uint64_t ip)
{
    return ip >> 63; /* x86-64 kernel half of the address space */
}

int nmp_hw_decode(enum nmp_backend backend, const struct perf_event_attr *attr,
                  const void *body, size_t len, struct nmp_sample *out)
{
    struct nmp_perf_sample b;
    if (!attr || !body || !out || nmp_perf_sample_parse(attr, body, len, &b) < 0)
        return -1;
    memset(out, 0, sizeof *out);
    out->time = b.time;
    out->ip = b.ip;
    out->pid = b.pid;
    out->tid = b.tid;
    out->cpu = (uint16_t)b.cpu;
    if (backend == NMP_BACKEND_IBS) {
        struct nmp_ibs_op op;
        if (b.raw) {
            if (nmp_ibs_parse_raw(b.raw, b.raw_size, &op) < 0)
                return -1;
            cpu_once();
            nmp_ibs_fill(&op, g_family, g_model, out);
        } else {
            /* only what the kernel filled (Linux >= 6.1) */
            uint64_t mop = b.data_src & 0x1f;
            out->data_src = b.has_data_src ? b.data_src : 0;
            out->access = mop & NMP_MEM_OP_LOAD ? NMP_ACC_LOAD
                        : mop & NMP_MEM_OP_STORE ? NMP_ACC_STORE : NMP_ACC_NONE;
            out->addr = b.has_addr ? b.addr : 0;
            out->phys_addr = b.has_phys ? b.phys_addr : 0;
            out->weight = b.has_weight ? (uint32_t)b.weight : 0;
            out->rule = out->access ? NMP_RULE_HW : NMP_RULE_NO_MEM;
        }
    } else if (backend == NMP_BACKEND_PEBS) {
        if (nmp_hw_attr_is_aux(attr))
            return NMP_HW_SKIP;
        out->addr = b.has_addr ? b.addr : 0;
        out->phys_addr = b.has_phys ? b.phys_addr : 0;
        out->data_src = b.has_data_src ? b.data_src : 0;
        /* WEIGHT_STRUCT var1_dw is the load (cache) latency on every PEBS format; a plain
         * WEIGHT carries it in its low bits (ds.c setup_pebs_*_sample_data). */
        out->weight = b.has_weight ? (uint32_t)(b.weight & 0xffffffffu) : 0;
        uint64_t mop = out->data_src & 0x1f;
        if (b.has_data_src && (mop & NMP_MEM_OP_LOAD))
            out->access = NMP_ACC_LOAD;
        else if (b.has_data_src && (mop & NMP_MEM_OP_STORE))
            out->access = NMP_ACC_STORE;
        else if ((attr->config & 0xffff) == 0x01cd)
            out->access = NMP_ACC_LOAD;
        else
            out->access = NMP_ACC_STORE; /* the store events 0x82d0 / 0x2cd */
        out->rule = NMP_RULE_HW;
    } else {
        return -1;
    }
    if (is_kernel_ip(out->ip))
        out->rule = NMP_RULE_KERNEL;
    return 0;
}

/* ---- classification (docs/backends.md, "Classifying data_src") ----
 *
 * The kernel fills mem_lvl (a bit set) and, since 4.14, mem_lvl_num (one level) + the
 * remote bit + mem_hops.  The two disagree on some PEBS models: the base table of
 * Linux arch/x86/events/intel/ds.c (pebs_data_source[], used as is on Sandy Bridge to
 * Broadwell, -EP included) says 0x0b "L3 miss, shared" is P(LVL, REM_RAM1) with
 * LEVEL(L3) | REM, i.e. remote DRAM; perf c2c counts it as remote DRAM from mem_lvl
 * (tools/perf/util/mem-events.c c2c_decode_stats).  So a remote DRAM level in mem_lvl
 * wins, then mem_lvl_num, then the rest of mem_lvl. */

struct nmp_memsrc_class nmp_memsrc_classify(uint64_t ds)
{
    struct nmp_memsrc_class r = {NMP_SRC_OTHER, 0, 0};
    uint64_t lvl = ds >> NMP_MEM_LVL_SHIFT & 0x3fff;
    unsigned num = (unsigned)(ds >> NMP_MEM_LVLNUM_SHIFT & 0xf);
    int rem_bit = (int)(ds >> NMP_MEM_REMOTE_SHIFT & 1);
    r.hops = (int)(ds >> NMP_MEM_HOPS_SHIFT & 7);
    /* REMOTE with HOPS_0 is "remote core, same node" (uapi perf_event.h; Zen4's near
     * CCX in ibs.c): not another node.  HOPS unknown (0, all of Intel) keeps REMOTE. */
    int same_node = r.hops == NMP_MEM_HOPS_0;
    int remote = rem_bit && !same_node;
    r.remote = remote;
    /* MISS without HIT names the level that missed, not where the data came from: the
     * base table's 0x00 (L3 miss, source unknown), a store that missed L1
     * (precise_store_data, precise_datala_hsw). */
    if ((lvl & NMP_MEM_LVL_MISS) && !(lvl & NMP_MEM_LVL_HIT))
        return r;
    if (lvl & (NMP_MEM_LVL_REM_RAM1 | NMP_MEM_LVL_REM_RAM2)) {
        r.src = NMP_SRC_REMOTE_DRAM;
        r.remote = 1;
        return r;
    }
    switch (num) {
    case NMP_MEM_LVLNUM_RAM:
        r.src = remote ? NMP_SRC_REMOTE_DRAM : NMP_SRC_LOCAL_DRAM;
        return r;
    case NMP_MEM_LVLNUM_PMEM:
    case NMP_MEM_LVLNUM_CXL: r.src = NMP_SRC_PMEM_CXL; return r;
    case NMP_MEM_LVLNUM_L1:
    case NMP_MEM_LVLNUM_L2:
    case NMP_MEM_LVLNUM_L3:
    case NMP_MEM_LVLNUM_L4:
    case NMP_MEM_LVLNUM_ANY_CACHE:
        if (remote)
            r.src = NMP_SRC_REMOTE_CACHE;
        else if (rem_bit)
            r.src = NMP_SRC_PEER_CACHE;
        else /* L4 / ANY_CACHE of this node: beyond L2 (pre-Zen4 IBS "local node
              * cache" is L3|REM_CCE1 + ANY_CACHE + HOPS_0 without REMOTE) */
            r.src = num == NMP_MEM_LVLNUM_L1 ? NMP_SRC_L1
                  : num == NMP_MEM_LVLNUM_L2 ? NMP_SRC_L2 : NMP_SRC_L3;
        return r;
    case NMP_MEM_LVLNUM_LFB: r.src = NMP_SRC_LFB; return r;
    default: break; /* NA, 0 (before 4.14), IO, UNC, unknown: mem_lvl decides */
    }
    if ((lvl & NMP_MEM_LVL_L3) && (lvl & NMP_MEM_LVL_REM_CCE1)) {
        /* IBS before Zen4, Linux 6.1-6.5: "shared L3 or another CCX's cache in this
         * node" (ibs.c IBS_DATA_SRC_LOC_CACHE) */
        r.src = NMP_SRC_L3;
    } else if (lvl & (NMP_MEM_LVL_REM_CCE1 | NMP_MEM_LVL_REM_CCE2)) {
        r.src = same_node ? NMP_SRC_PEER_CACHE : NMP_SRC_REMOTE_CACHE;
        r.remote = !same_node;
    } else if (lvl & NMP_MEM_LVL_LOC_RAM) {
        r.src = NMP_SRC_LOCAL_DRAM;
    } else if (lvl & NMP_MEM_LVL_L3) {
        r.src = NMP_SRC_L3;
    } else if (lvl & NMP_MEM_LVL_L2) {
        r.src = NMP_SRC_L2;
    } else if (lvl & NMP_MEM_LVL_LFB) {
        r.src = NMP_SRC_LFB;
    } else if (lvl & NMP_MEM_LVL_L1) {
        r.src = NMP_SRC_L1;
    }
    return r;
}

const char *nmp_memsrc_name(enum nmp_memsrc src)
{
    static const char *const names[] = {"other", "L1", "LFB", "L2", "L3", "local DRAM",
                                        "remote DRAM", "remote cache", "PMEM/CXL",
                                        "peer cache (same node)"};
    return (unsigned)src < sizeof names / sizeof *names ? names[src] : "other";
}
