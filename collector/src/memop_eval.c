/* A decoded memory operand evaluated on one sample's registers (see nmp_decode.h): the
 * address its formula gives, the rebuilt value of a register the instructions since
 * overwrote, and whether the access ran at all or the branch around it was taken (the
 * flags or a compared register sampled at ip).  decode.c builds the operands; this is
 * what each sample costs.
 */
#include "nmp_decode.h"
#include "nmp_decode_int.h"

#include <stdint.h>
#include <string.h>

void nmp_regs_unpack(uint64_t mask, const uint64_t *vals, size_t n, struct nmp_regs *out)
{
    memset(out, 0, sizeof *out);
    size_t k = 0;
    for (int b = 0; b < NMP_NREGS && k < n; b++)
        if (mask & (1ULL << b))
            out->r[b] = vals[k++];
}

/* Whether x86 condition code cc (the low nibble of jcc / cmovcc) holds on EFLAGS. */
static int cond_holds(uint64_t fl, int cc)
{
    int cf = fl & 1, pf = (fl >> 2) & 1, zf = (fl >> 6) & 1, sf = (fl >> 7) & 1,
        of = (fl >> 11) & 1, h;
    switch ((cc >> 1) & 7) {
    case 0: h = of; break;
    case 1: h = cf; break;
    case 2: h = zf; break;
    case 3: h = cf | zf; break;
    case 4: h = sf; break;
    case 5: h = pf; break;
    case 6: h = sf != of; break;
    default: h = zf | (sf != of); break;
    }
    return h ^ (cc & 1);
}

/* The value rb rebuilds under registers r: 0, or -1 when a division is not exact (the
 * multiplication it undoes overflowed: no address rather than a wrong one). */
static int rebuilt(const struct nmp_rebuild *rb, const struct nmp_regs *r, uint64_t *out)
{
    uint64_t v = r->r[(int)rb->src];
    for (int k = 0; k < rb->nops && k < NMP_REBUILD_OPS; k++) {
        const struct nmp_rop *o = &rb->ops[k];
        uint64_t imm = (uint64_t)(int64_t)o->imm;
        switch (o->op) {
        case NMP_ROP_ADD: v += imm; break;
        case NMP_ROP_AND: v &= imm; break;
        case NMP_ROP_SHL: v <<= imm & 63; break;
        case NMP_ROP_SHR: v >>= imm & 63; break;
        case NMP_ROP_SAR: v = (uint64_t)((int64_t)v >> (imm & 63)); break;
        case NMP_ROP_ZX32: v &= 0xffffffffULL; break;
        case NMP_ROP_SX32: v = (uint64_t)(int64_t)(int32_t)(uint32_t)v; break;
        case NMP_ROP_ADDREG: v += r->r[(int)o->reg] * (uint64_t)(int64_t)o->scale + imm; break;
        case NMP_ROP_STRBACK: /* EFLAGS.DF (bit 10): the string ran downwards */
            v += (r->r[NMP_REG_FLAGS] & (1u << 10)) ? imm : -imm;
            break;
        case NMP_ROP_DIV:
            if (o->imm <= 0 || (int64_t)v % o->imm != 0)
                return -1;
            v = (uint64_t)((int64_t)v / o->imm);
            break;
        case NMP_ROP_SELECT:
            if (!cond_holds(r->r[NMP_REG_FLAGS], o->imm))
                v = r->r[(int)o->reg];
            break;
        default: break;
        }
    }
    *out = v;
    return 0;
}

int nmp_memop_reg(const struct nmp_memop *m, const struct nmp_regs *r, int reg, uint64_t *out)
{
    if (reg < 0 || reg >= NMP_NREGS || (reg != m->base && reg != m->index))
        return -1;
    if (m->rb.used && m->rb.reg == reg)
        return rebuilt(&m->rb, r, out);
    /* a constant step since the access is undone in disp; the register had it less */
    *out = r->r[reg] + (uint64_t)(int64_t)(reg == m->base ? m->base_step : m->index_step);
    return 0;
}

/* The arithmetic flags (CF, PF, ZF, SF, OF) `test %r,%r` or `cmp $imm,%r` sets on v. */
static uint64_t compare_flags(uint64_t v, int kind, int is32, int64_t imm)
{
    uint64_t mask = is32 ? 0xffffffffULL : ~0ULL, msb = is32 ? 1ULL << 31 : 1ULL << 63;
    uint64_t a = v & mask, b = (uint64_t)imm & mask, res = kind == NMP_CMP_TEST ? a : (a - b) & mask;
    uint64_t fl = 0;
    if (kind == NMP_CMP_IMM) {
        fl |= a < b ? 1 : 0;                                  /* CF: borrow */
        fl |= (((a ^ b) & (a ^ res)) & msb) ? 1ULL << 11 : 0; /* OF */
    }
    fl |= __builtin_parity((unsigned)(res & 0xff)) ? 0 : 1ULL << 2; /* PF: even parity */
    fl |= res == 0 ? 1ULL << 6 : 0;
    fl |= (res & msb) ? 1ULL << 7 : 0;
    return fl;
}

static int memop_ran(const struct nmp_memop *m, const struct nmp_regs *r)
{
    if (!m->guard)
        return 1;
    uint64_t fl = m->guard_reg ? compare_flags(r->r[m->guard_reg - 1], m->guard_kind, m->guard_32,
                                               m->guard_imm)
                               : r->r[NMP_REG_FLAGS];
    return cond_holds(fl, m->guard & 15);
}

void nmp_memop_taken(const struct nmp_memop *m, const struct nmp_regs *r, struct nmp_memop *out)
{
    *out = *m;
    if (memop_ran(m, r) || !nmp_rule_has_address(m->rule))
        return;
    memset(out, 0, sizeof *out);
    out->base = out->index = -1;
    out->rule = NMP_RULE_CLOBBERED;
    out->access = m->access;
    out->size = m->size;
    out->insn = m->insn;
    if (m->alt.access == NMP_ACC_NONE)
        return;
    out->rule = NMP_RULE_SKID_PATH;
    out->disp = m->alt.disp;
    out->insn = m->alt.insn;
    out->base = m->alt.base;
    out->index = m->alt.index;
    out->scale = m->alt.scale;
    out->addr32 = m->alt.addr32;
    out->access = m->alt.access;
    out->size = m->alt.size;
}

uint64_t nmp_memop_addr(const struct nmp_memop *m, const struct nmp_regs *r)
{
    if (!nmp_rule_has_address(m->rule) || !memop_ran(m, r))
        return 0;
    uint64_t a = (uint64_t)m->disp, rb = 0;
    if (m->rb.used && rebuilt(&m->rb, r, &rb) != 0)
        return 0;
    if (m->base >= 0)
        a += m->rb.used && m->rb.reg == m->base ? rb : r->r[(int)m->base];
    if (m->index >= 0)
        a += (m->rb.used && m->rb.reg == m->index ? rb : r->r[(int)m->index]) * m->scale;
    if (m->addr32)
        a &= 0xffffffffULL;
    return a;
}

int nmp_dwarf_reg(int perf_reg)
{
    /* perf_event_x86_regs: AX BX CX DX SI DI BP SP IP FLAGS ... R8..R15 at 16..23;
     * DWARF: rax rdx rcx rbx rsi rdi rbp rsp r8..r15 */
    static const int8_t low[8] = {0, 3, 2, 1, 4, 5, 6, 7};
    if (perf_reg >= 0 && perf_reg < 8)
        return low[perf_reg];
    if (perf_reg >= 16 && perf_reg < 24)
        return perf_reg - 8;
    return -1;
}
