/* Instruction decoding for the software backend: see nmp_decode.h.
 *
 * A code range is decoded once into a compact instruction list (address, length,
 * control-flow / branch-target flags, registers written, memory operand formula).  The
 * sample at `ip` is then attributed to the memory operand of the instruction at ip
 * (rule at_ip) or, when that has none, to the nearest preceding memory instruction of
 * the same basic block whose address registers nothing has written since (rule skid).
 * When the instruction at ip and the one just before it both access memory, the one
 * before (the access that just retired, the one the interrupt waited for) is charged,
 * rule skid, if its address registers are intact.
 */
#include "nmp_decode.h"
#include "nmp_decode_int.h"

#include <capstone/capstone.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

enum { F_CF = 1, F_TARGET = 2, F_MEM = 4, F_GAP = 8, F_PAUSE = 16 };
/* nmp_insn.def_op: dst = src (mov), dst = sx32(src) (movsxd), dst = dst OP imm, or
 * dst = src + src2 * scale + imm (lea) */
enum { DEF_NONE = 0, DEF_MOV = 32, DEF_SX32, DEF_ALU, DEF_LEA };

/* Capstone register -> perf_event_x86_regs index (aliases map to the full register);
 * -1 for anything else (vector, segment, control registers). */
static int perf_reg(unsigned r, int *is32)
{
    int w32 = 0, idx = -1;
    switch (r) {
    case X86_REG_EAX: w32 = 1; /* fallthrough */
    case X86_REG_RAX: case X86_REG_AX: case X86_REG_AL: case X86_REG_AH: idx = 0; break;
    case X86_REG_EBX: w32 = 1; /* fallthrough */
    case X86_REG_RBX: case X86_REG_BX: case X86_REG_BL: case X86_REG_BH: idx = 1; break;
    case X86_REG_ECX: w32 = 1; /* fallthrough */
    case X86_REG_RCX: case X86_REG_CX: case X86_REG_CL: case X86_REG_CH: idx = 2; break;
    case X86_REG_EDX: w32 = 1; /* fallthrough */
    case X86_REG_RDX: case X86_REG_DX: case X86_REG_DL: case X86_REG_DH: idx = 3; break;
    case X86_REG_ESI: w32 = 1; /* fallthrough */
    case X86_REG_RSI: case X86_REG_SI: case X86_REG_SIL: idx = 4; break;
    case X86_REG_EDI: w32 = 1; /* fallthrough */
    case X86_REG_RDI: case X86_REG_DI: case X86_REG_DIL: idx = 5; break;
    case X86_REG_EBP: w32 = 1; /* fallthrough */
    case X86_REG_RBP: case X86_REG_BP: case X86_REG_BPL: idx = 6; break;
    case X86_REG_ESP: w32 = 1; /* fallthrough */
    case X86_REG_RSP: case X86_REG_SP: case X86_REG_SPL: idx = 7; break;
    case X86_REG_EIP: w32 = 1; /* fallthrough */
    case X86_REG_RIP: case X86_REG_IP: idx = 8; break;
    case X86_REG_EFLAGS: idx = 9; break;
    case X86_REG_R8D: w32 = 1; /* fallthrough */
    case X86_REG_R8: case X86_REG_R8W: case X86_REG_R8B: idx = 16; break;
    case X86_REG_R9D: w32 = 1; /* fallthrough */
    case X86_REG_R9: case X86_REG_R9W: case X86_REG_R9B: idx = 17; break;
    case X86_REG_R10D: w32 = 1; /* fallthrough */
    case X86_REG_R10: case X86_REG_R10W: case X86_REG_R10B: idx = 18; break;
    case X86_REG_R11D: w32 = 1; /* fallthrough */
    case X86_REG_R11: case X86_REG_R11W: case X86_REG_R11B: idx = 19; break;
    case X86_REG_R12D: w32 = 1; /* fallthrough */
    case X86_REG_R12: case X86_REG_R12W: case X86_REG_R12B: idx = 20; break;
    case X86_REG_R13D: w32 = 1; /* fallthrough */
    case X86_REG_R13: case X86_REG_R13W: case X86_REG_R13B: idx = 21; break;
    case X86_REG_R14D: w32 = 1; /* fallthrough */
    case X86_REG_R14: case X86_REG_R14W: case X86_REG_R14B: idx = 22; break;
    case X86_REG_R15D: w32 = 1; /* fallthrough */
    case X86_REG_R15: case X86_REG_R15W: case X86_REG_R15B: idx = 23; break;
    default: break;
    }
    if (is32)
        *is32 = w32;
    return idx;
}

static int is_vector_reg(unsigned r)
{
    return (r >= X86_REG_XMM0 && r <= X86_REG_XMM31) ||
           (r >= X86_REG_YMM0 && r <= X86_REG_YMM31) ||
           (r >= X86_REG_ZMM0 && r <= X86_REG_ZMM31);
}

void nmp_regs_unpack(uint64_t mask, const uint64_t *vals, size_t n, struct nmp_regs *out)
{
    memset(out, 0, sizeof *out);
    size_t k = 0;
    for (int b = 0; b < NMP_NREGS && k < n; b++)
        if (mask & (1ULL << b))
            out->r[b] = vals[k++];
}

static uint64_t rebuilt(const struct nmp_rebuild *rb, const struct nmp_regs *r)
{
    uint64_t v = r->r[(int)rb->src];
    for (int k = 0; k < rb->nops && k < NMP_REBUILD_OPS; k++) {
        const struct nmp_rop *o = &rb->ops[k];
        switch (o->op) {
        case NMP_ROP_ADD: v += (uint64_t)(int64_t)o->imm; break;
        case NMP_ROP_AND: v &= (uint64_t)(int64_t)o->imm; break;
        case NMP_ROP_SHL: v <<= (unsigned)o->imm & 63; break;
        case NMP_ROP_SHR: v >>= (unsigned)o->imm & 63; break;
        case NMP_ROP_SAR: v = (uint64_t)((int64_t)v >> ((unsigned)o->imm & 63)); break;
        case NMP_ROP_ZX32: v &= 0xffffffffULL; break;
        case NMP_ROP_SX32: v = (uint64_t)(int64_t)(int32_t)(uint32_t)v; break;
        case NMP_ROP_ADDREG:
            v += r->r[(int)o->reg] * o->scale + (uint64_t)(int64_t)o->imm;
            break;
        default: break;
        }
    }
    return v;
}

uint64_t nmp_memop_addr(const struct nmp_memop *m, const struct nmp_regs *r)
{
    if (m->rule != NMP_RULE_AT_IP && m->rule != NMP_RULE_SKID)
        return 0;
    uint64_t a = (uint64_t)m->disp;
    if (m->base >= 0)
        a += m->rb.used && m->rb.reg == m->base ? rebuilt(&m->rb, r) : r->r[(int)m->base];
    if (m->index >= 0)
        a += (m->rb.used && m->rb.reg == m->index ? rebuilt(&m->rb, r) : r->r[(int)m->index]) * m->scale;
    if (m->addr32)
        a &= 0xffffffffULL;
    return a;
}

struct nmp_cs {
    csh h;
    cs_insn *ci;
};

int nmp_cs_open(struct nmp_cs **out)
{
    struct nmp_cs *c = calloc(1, sizeof *c);
    if (!c)
        return -1;
    if (cs_open(CS_ARCH_X86, CS_MODE_64, &c->h) != CS_ERR_OK) {
        free(c);
        errno = EINVAL;
        return -1;
    }
    cs_option(c->h, CS_OPT_DETAIL, CS_OPT_ON);
    c->ci = cs_malloc(c->h);
    if (!c->ci) {
        cs_close(&c->h);
        free(c);
        return -1;
    }
    *out = c;
    return 0;
}

void nmp_cs_close(struct nmp_cs *c)
{
    if (!c)
        return;
    cs_free(c->ci, 1);
    cs_close(&c->h);
    free(c);
}

static int no_data_access(unsigned id)
{
    switch (id) {
    case X86_INS_LEA: case X86_INS_NOP:
    case X86_INS_PREFETCH: case X86_INS_PREFETCHNTA: case X86_INS_PREFETCHT0:
    case X86_INS_PREFETCHT1: case X86_INS_PREFETCHT2: case X86_INS_PREFETCHW:
        return 1;
    default:
        return 0;
    }
}

/* Capstone 4's operand access flags are wrong for some instructions (AVX/non-temporal
 * stores come out as loads, cmpxchg as a load, test as read-modify-write); correct the
 * families we can name.  opidx is the memory operand's index (0 = destination). */
static int fix_access(unsigned id, const char *mnem, int opidx, int acc)
{
    switch (id) {
    case X86_INS_CMPXCHG: case X86_INS_CMPXCHG8B: case X86_INS_CMPXCHG16B:
    case X86_INS_XADD: case X86_INS_XCHG:
        return NMP_ACC_RMW;
    case X86_INS_TEST: case X86_INS_CMP: case X86_INS_BT: case X86_INS_UCOMISS:
    case X86_INS_UCOMISD: case X86_INS_COMISS: case X86_INS_COMISD: case X86_INS_VUCOMISS:
    case X86_INS_VUCOMISD: case X86_INS_VCOMISS: case X86_INS_VCOMISD: case X86_INS_PTEST:
    case X86_INS_VPTEST:
        return NMP_ACC_LOAD;
    default:
        break;
    }
    if (!strncmp(mnem, "mov", 3) || !strncmp(mnem, "vmov", 4))
        return opidx == 0 ? NMP_ACC_STORE : NMP_ACC_LOAD;
    if (opidx == 0 && (!strncmp(mnem, "vextract", 8) || !strncmp(mnem, "extract", 7) ||
                       !strncmp(mnem, "pextr", 5) || !strncmp(mnem, "vpextr", 6) ||
                       !strncmp(mnem, "vmaskmov", 8) || !strncmp(mnem, "vpmaskmov", 9) ||
                       !strncmp(mnem, "vcvtps2ph", 9)))
        return NMP_ACC_STORE;
    return acc;
}

/* The def_* fields: what an instruction that writes exactly one general register (8 or
 * 4 bytes wide) computed into it, for the forms that can be replayed. */
static void fill_def(struct nmp_insn *in, unsigned id, const cs_x86 *x)
{
    in->def_src = in->def_src2 = -1;
    if (x->op_count != 2 || x->operands[0].type != X86_OP_REG)
        return;
    int d32 = 0, s32 = 0;
    int dst = perf_reg(x->operands[0].reg, &d32);
    uint8_t dsize = x->operands[0].size;
    if (dst < 0 || dst == 7 || dst == 8 || (dsize != 8 && dsize != 4) || in->wregs != (1u << dst))
        return;
    const cs_x86_op *s = &x->operands[1];
    int64_t imm = s->type == X86_OP_IMM ? s->imm : 0;
    if (s->type == X86_OP_IMM && (d32 ? (imm < INT32_MIN || imm > (int64_t)UINT32_MAX)
                                      : (imm < INT32_MIN || imm > INT32_MAX)))
        return;
    in->def_32 = (uint8_t)(dsize == 4);
    in->def_imm = (int32_t)(uint32_t)(uint64_t)imm;
    switch (id) {
    case X86_INS_MOV:
        if (s->type == X86_OP_REG && s->size == dsize) {
            int src = perf_reg(s->reg, &s32);
            if (src >= 0 && src != 8) {
                in->def_op = DEF_MOV;
                in->def_src = (int8_t)src;
            }
        }
        return;
    case X86_INS_MOVSXD:
        if (s->type == X86_OP_REG && s->size == 4 && dsize == 8) {
            int src = perf_reg(s->reg, &s32);
            if (src >= 0 && src != 8) {
                in->def_op = DEF_SX32;
                in->def_src = (int8_t)src;
            }
        }
        return;
    case X86_INS_AND: case X86_INS_ADD: case X86_INS_SUB:
    case X86_INS_SHL: case X86_INS_SAL: case X86_INS_SHR: case X86_INS_SAR:
        if (s->type != X86_OP_IMM)
            return;
        in->def_op = DEF_ALU;
        in->def_src = (int8_t)dst;
        in->def_scale = id == X86_INS_AND ? NMP_ROP_AND
                        : id == X86_INS_ADD ? NMP_ROP_ADD
                        : id == X86_INS_SUB ? NMP_ROP_ADD
                        : id == X86_INS_SHR ? NMP_ROP_SHR
                        : id == X86_INS_SAR ? NMP_ROP_SAR : NMP_ROP_SHL;
        if (id == X86_INS_SUB)
            in->def_imm = (int32_t)-(int64_t)in->def_imm;
        if ((id == X86_INS_SHL || id == X86_INS_SAL || id == X86_INS_SHR || id == X86_INS_SAR) &&
            (imm < 0 || imm > 63))
            in->def_op = DEF_NONE;
        if (id == X86_INS_SUB && imm == INT32_MIN)
            in->def_op = DEF_NONE;
        return;
    case X86_INS_LEA:
        if (s->type != X86_OP_MEM || s->mem.segment != X86_REG_INVALID ||
            s->mem.base == X86_REG_RIP || s->mem.base == X86_REG_EIP ||
            s->mem.disp < INT32_MIN || s->mem.disp > INT32_MAX)
            return;
        int b = -1, i = -1, b32 = 0, i32 = 0;
        if (s->mem.base != X86_REG_INVALID && (b = perf_reg(s->mem.base, &b32)) < 0)
            return;
        if (s->mem.index != X86_REG_INVALID && (i = perf_reg(s->mem.index, &i32)) < 0)
            return;
        if (b32 || i32 || b == 8 || i == 8)
            return; /* 32-bit address arithmetic: not replayed */
        in->def_op = DEF_LEA;
        in->def_src = (int8_t)b;
        in->def_src2 = (int8_t)i;
        in->def_scale = (uint8_t)(s->mem.scale > 0 ? s->mem.scale : 1);
        in->def_imm = (int32_t)s->mem.disp;
        return;
    default:
        return;
    }
}

/* Fills one compact instruction from Capstone's decode in c->ci. */
static void fill_insn(struct nmp_cs *c, struct nmp_insn *in, uint64_t *target)
{
    cs_insn *ci = c->ci;
    cs_x86 *x = &ci->detail->x86;
    memset(in, 0, sizeof *in);
    in->addr = ci->address;
    in->len = (uint8_t)ci->size;
    *target = 0;
    if (ci->id == X86_INS_PAUSE)
        in->flags |= F_PAUSE;
    if (cs_insn_group(c->h, ci, CS_GRP_JUMP) || cs_insn_group(c->h, ci, CS_GRP_CALL) ||
        cs_insn_group(c->h, ci, CS_GRP_RET) || cs_insn_group(c->h, ci, CS_GRP_INT) ||
        cs_insn_group(c->h, ci, CS_GRP_IRET) || ci->id == X86_INS_SYSCALL ||
        ci->id == X86_INS_SYSENTER || ci->id == X86_INS_UD2 || ci->id == X86_INS_HLT) {
        in->flags |= F_CF;
        if (cs_insn_group(c->h, ci, CS_GRP_JUMP) && x->op_count == 1 &&
            x->operands[0].type == X86_OP_IMM)
            *target = (uint64_t)x->operands[0].imm;
    }

    cs_regs rr, rw;
    uint8_t nr = 0, nw = 0;
    if (cs_regs_access(c->h, ci, rr, &nr, rw, &nw) == CS_ERR_OK) {
        for (int i = 0; i < nw; i++) {
            int p = perf_reg(rw[i], NULL);
            if (p >= 0 && p != 8 && p != 9)
                in->wregs |= 1u << p;
        }
    }

    /* a constant step of one 64-bit register (the loop induction variable after its
     * access) can be undone by the skid rule */
    in->step_reg = -1;
    int r32 = 0;
    if ((ci->id == X86_INS_ADD || ci->id == X86_INS_SUB) && x->op_count == 2 &&
        x->operands[0].type == X86_OP_REG && x->operands[1].type == X86_OP_IMM) {
        int p = perf_reg(x->operands[0].reg, &r32);
        int64_t imm = x->operands[1].imm;
        if (p >= 0 && !r32 && x->operands[0].size == 8 && imm > INT32_MIN && imm < INT32_MAX) {
            in->step_reg = (int8_t)p;
            in->step = (int32_t)(ci->id == X86_INS_ADD ? imm : -imm);
        }
    } else if ((ci->id == X86_INS_INC || ci->id == X86_INS_DEC) && x->op_count == 1 &&
               x->operands[0].type == X86_OP_REG && x->operands[0].size == 8) {
        int p = perf_reg(x->operands[0].reg, &r32);
        if (p >= 0) {
            in->step_reg = (int8_t)p;
            in->step = ci->id == X86_INS_INC ? 1 : -1;
        }
    } else if (ci->id == X86_INS_LEA && x->op_count == 2 && x->operands[0].type == X86_OP_REG &&
               x->operands[0].reg == x->operands[1].mem.base &&
               x->operands[1].mem.index == X86_REG_INVALID && x->operands[0].size == 8 &&
               x->operands[1].mem.disp > INT32_MIN && x->operands[1].mem.disp < INT32_MAX) {
        int p = perf_reg(x->operands[0].reg, &r32);
        if (p >= 0 && p != 8) {
            in->step_reg = (int8_t)p;
            in->step = (int32_t)x->operands[1].mem.disp;
        }
    }
    if (in->step_reg >= 0 && in->wregs != (1u << in->step_reg))
        in->step_reg = -1;
    fill_def(in, ci->id, x);

    if (no_data_access(ci->id))
        return;
    for (int i = 0; i < x->op_count; i++) {
        cs_x86_op *op = &x->operands[i];
        if (op->type != X86_OP_MEM)
            continue;
        struct nmp_memop *m = &in->mem;
        in->flags |= F_MEM;
        m->insn = ci->address;
        m->size = op->size;
        int rd = (op->access & CS_AC_READ) != 0, wr = (op->access & CS_AC_WRITE) != 0;
        m->access = rd && wr ? NMP_ACC_RMW : wr ? NMP_ACC_STORE : rd ? NMP_ACC_LOAD : NMP_ACC_NONE;
        m->access = (uint8_t)fix_access(ci->id, ci->mnemonic, i, m->access);
        m->base = m->index = -1;
        m->scale = (uint8_t)(op->mem.scale > 0 ? op->mem.scale : 1);
        m->disp = op->mem.disp;
        m->rule = NMP_RULE_AT_IP;
        if (op->mem.segment == X86_REG_FS || op->mem.segment == X86_REG_GS) {
            m->rule = NMP_RULE_SEGMENT;
            break;
        }
        if (op->mem.index != X86_REG_INVALID && is_vector_reg(op->mem.index)) {
            m->rule = NMP_RULE_VSIB;
            break;
        }
        int b32 = 0, i32 = 0;
        if (op->mem.base == X86_REG_RIP || op->mem.base == X86_REG_EIP) {
            m->disp = (int64_t)(ci->address + ci->size) + op->mem.disp;
            m->addr32 = op->mem.base == X86_REG_EIP;
        } else if (op->mem.base != X86_REG_INVALID) {
            m->base = (int8_t)perf_reg(op->mem.base, &b32);
            if (m->base < 0)
                m->rule = NMP_RULE_UNDECODABLE;
        }
        if (op->mem.index != X86_REG_INVALID) {
            m->index = (int8_t)perf_reg(op->mem.index, &i32);
            if (m->index < 0)
                m->rule = NMP_RULE_UNDECODABLE;
        }
        if (b32 || i32)
            m->addr32 = 1;
        break;
    }
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* Linear decode of [addr, addr+len); undecodable bytes are skipped one at a time and
 * the next instruction is marked F_GAP.  Direct branch targets inside the range mark
 * their instruction F_TARGET.  Returns 0 or -1 (ENOMEM). */
int nmp_cs_decode_range(struct nmp_cs *c, const uint8_t *code, size_t len, uint64_t addr,
                        struct nmp_insn **out, size_t *nout)
{
    size_t cap = len / 3 + 8, n = 0, ntg = 0, tcap = 16;
    struct nmp_insn *v = malloc(cap * sizeof *v);
    uint64_t *tg = malloc(tcap * sizeof *tg);
    if (!v || !tg) {
        free(v);
        free(tg);
        return -1;
    }
    const uint8_t *p = code;
    size_t left = len;
    uint64_t a = addr;
    int gap = 0;
    while (left > 0) {
        if (!cs_disasm_iter(c->h, &p, &left, &a, c->ci)) {
            p++;
            left--;
            a++;
            gap = 1;
            continue;
        }
        if (n == cap) {
            cap *= 2;
            struct nmp_insn *nv = realloc(v, cap * sizeof *v);
            if (!nv)
                goto oom;
            v = nv;
        }
        uint64_t t;
        fill_insn(c, &v[n], &t);
        if (gap)
            v[n].flags |= F_GAP;
        gap = 0;
        n++;
        if (t >= addr && t < addr + len) {
            if (ntg == tcap) {
                tcap *= 2;
                uint64_t *nt = realloc(tg, tcap * sizeof *tg);
                if (!nt)
                    goto oom;
                tg = nt;
            }
            tg[ntg++] = t;
        }
    }
    qsort(tg, ntg, sizeof *tg, cmp_u64);
    for (size_t i = 0, k = 0; i < n && k < ntg; i++) {
        while (k < ntg && tg[k] < v[i].addr)
            k++;
        if (k < ntg && tg[k] == v[i].addr)
            v[i].flags |= F_TARGET;
    }
    free(tg);
    *out = v;
    *nout = n;
    return 0;
oom:
    free(v);
    free(tg);
    errno = ENOMEM;
    return -1;
}

/* Index of the instruction starting at ip, or -1. */
static long find_insn(const struct nmp_insn *v, size_t n, uint64_t ip)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (v[mid].addr < ip)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < n && v[lo].addr == ip ? (long)lo : -1;
}

static int push_op(struct nmp_rebuild *rb, int op, int reg, int scale, int64_t imm)
{
    if (rb->nops >= NMP_REBUILD_OPS || imm < INT32_MIN || imm > INT32_MAX)
        return -1;
    struct nmp_rop *o = &rb->ops[rb->nops++];
    o->op = (uint8_t)op;
    o->reg = (int8_t)reg;
    o->scale = (uint8_t)scale;
    o->pad = 0;
    o->imm = (int32_t)imm;
    return 0;
}

/* 1 if v[from..to) wrote `reg` only by constant steps (their sum, negated, in *undo). */
static int steps_only(const struct nmp_insn *v, long from, long to, int reg, int64_t *undo)
{
    *undo = 0;
    for (long k = from; k < to; k++) {
        if (!(v[k].wregs & (1u << reg)))
            continue;
        if (v[k].step_reg != reg)
            return 0;
        *undo -= v[k].step;
    }
    return 1;
}

static int log2_scale(int s)
{
    return s == 1 ? 0 : s == 2 ? 1 : s == 4 ? 2 : s == 8 ? 3 : -1;
}

/* Rebuilds into rb the value `reg` had just before v[at], from the registers at the
 * sample (taken before v[ipi]): intact up to constant steps, or replayed from the
 * instruction that last set it in the same straight-line block (mov, movsxd, and / add /
 * sub / shifts by a constant, lea), recursively.  0, or -1 when it cannot be known. */
static int rebuild(const struct nmp_insn *v, long at, long ipi, int reg, struct nmp_rebuild *rb,
                   int depth)
{
    int64_t undo;
    if (steps_only(v, at, ipi, reg, &undo)) {
        rb->src = (int8_t)reg;
        rb->nops = 0;
        return undo ? push_op(rb, NMP_ROP_ADD, -1, 0, undo) : 0;
    }
    if (depth >= 4)
        return -1;
    for (long k = at - 1; k >= 0; k--) {
        if ((v[k + 1].flags & (F_TARGET | F_GAP)) || (v[k].flags & F_CF))
            return -1; /* the value came from another path */
        if (!(v[k].wregs & (1u << reg)))
            continue;
        const struct nmp_insn *d = &v[k];
        int b = d->def_src, x = d->def_src2, sh = log2_scale(d->def_scale);
        int64_t ub = 0, ux = 0;
        switch (d->def_op) {
        case DEF_MOV:
            if (rebuild(v, k, ipi, b, rb, depth + 1) < 0)
                return -1;
            break;
        case DEF_SX32:
            if (rebuild(v, k, ipi, b, rb, depth + 1) < 0 || push_op(rb, NMP_ROP_SX32, -1, 0, 0) < 0)
                return -1;
            break;
        case DEF_ALU:
            if (rebuild(v, k, ipi, reg, rb, depth + 1) < 0 ||
                push_op(rb, d->def_scale, -1, 0, d->def_imm) < 0)
                return -1;
            break;
        case DEF_LEA:
            if (x < 0) { /* base + disp */
                if (b < 0 || rebuild(v, k, ipi, b, rb, depth + 1) < 0)
                    return -1;
            } else if (b < 0 || (b != x && steps_only(v, k, ipi, b, &ub))) {
                /* index * scale (+ an intact base) + disp */
                if (sh < 0 || rebuild(v, k, ipi, x, rb, depth + 1) < 0 ||
                    (sh && push_op(rb, NMP_ROP_SHL, -1, 0, sh) < 0) ||
                    (b >= 0 && push_op(rb, NMP_ROP_ADDREG, b, 1, ub) < 0))
                    return -1;
            } else if (b != x && steps_only(v, k, ipi, x, &ux)) {
                /* base + an intact index * scale + disp */
                if (rebuild(v, k, ipi, b, rb, depth + 1) < 0 ||
                    push_op(rb, NMP_ROP_ADDREG, x, d->def_scale, ux * d->def_scale) < 0)
                    return -1;
            } else {
                return -1;
            }
            if (d->def_imm && push_op(rb, NMP_ROP_ADD, -1, 0, d->def_imm) < 0)
                return -1;
            break;
        default:
            return -1;
        }
        if (d->def_32 && push_op(rb, NMP_ROP_ZX32, -1, 0, 0) < 0)
            return -1;
        return 0;
    }
    return -1;
}

/* Charges the access of v[j] to a sample taken before v[i] (rule skid): each address
 * register is either intact up to constant steps (undone in the displacement) or
 * rebuilt (at most one of them).  Returns 0, or -1 with rule clobbered. */
static int skid_to(const struct nmp_insn *v, long j, long i, struct nmp_memop *out)
{
    *out = v[j].mem;
    out->rule = NMP_RULE_SKID;
    memset(&out->rb, 0, sizeof out->rb);
    int64_t dbase = 0, dindex = 0;
    int regs[2] = {out->base, out->index};
    int64_t *undo[2] = {&dbase, &dindex};
    for (int w = 0; w < 2; w++) {
        int reg = regs[w];
        if (reg < 0)
            continue;
        if (w == 1 && reg == regs[0]) { /* (%rax,%rax,s): as the base */
            dindex = dbase;
            continue;
        }
        if (steps_only(v, j, i, reg, undo[w]))
            continue;
        struct nmp_rebuild rb;
        memset(&rb, 0, sizeof rb);
        if (out->rb.used || rebuild(v, j, i, reg, &rb, 0) < 0) {
            memset(&out->rb, 0, sizeof out->rb);
            out->rule = NMP_RULE_CLOBBERED;
            return -1;
        }
        rb.used = 1;
        rb.reg = (int8_t)reg;
        out->rb = rb;
    }
    out->disp += dbase + dindex * out->scale;
    return 0;
}

/* The at_ip / skid rule on a decoded instruction list.  Returns 0, or -1 if ip is not an
 * instruction boundary of the list. */
int nmp_attribute(const struct nmp_insn *v, size_t n, uint64_t ip, struct nmp_memop *out)
{
    long i = find_insn(v, n, ip);
    memset(out, 0, sizeof *out);
    out->base = out->index = -1;
    if (i < 0)
        return -1;
    if (v[i].flags & F_MEM) {
        /* Two memory instructions in a row (movsd a; addsd b; movsd c in a stream loop):
         * a timer interrupt is taken at an instruction boundary once the instruction it
         * waited for has retired, so ip is the instruction *after* the stalled one.  The
         * first instruction of such a run is never at ip (measured: 0 of 12 766 samples
         * on `patterns irregular static rw`, whose loads of `a` open both loops), so the
         * access that just retired is charged (rule skid) when its address is known. */
        const struct nmp_insn *p = i > 0 ? &v[i - 1] : NULL;
        if (p && !(v[i].flags & (F_TARGET | F_GAP)) && (p->flags & F_MEM) && !(p->flags & F_CF) &&
            p->mem.rule == NMP_RULE_AT_IP && skid_to(v, i - 1, i, out) == 0)
            return 0;
        *out = v[i].mem;
        return 0;
    }
    out->rule = NMP_RULE_NO_MEM;
    /* a thread busy-waiting (OpenMP barrier, spin lock) is sampled on or just after its
     * `pause`: it is waiting, not accessing memory */
    if (v[i].flags & F_PAUSE) {
        out->rule = NMP_RULE_SPIN;
        return 0;
    }
    for (long j = i - 1; j >= 0; j--) {
        const struct nmp_insn *in = &v[j];
        if (v[j + 1].flags & (F_TARGET | F_GAP))
            break;
        if (in->flags & F_PAUSE) {
            out->rule = NMP_RULE_SPIN;
            return 0;
        }
        if (in->flags & F_CF)
            break;
        if (!(in->flags & F_MEM))
            continue;
        *out = in->mem;
        if (out->rule != NMP_RULE_AT_IP)
            return 0; /* segment / vsib / undecodable: the nearest access is not computable */
        /* writes in between: constant steps are undone, a register overwritten since the
         * access is rebuilt from the instructions that computed it, else it is clobbered */
        skid_to(v, j, i, out);
        return 0;
    }
    return 0;
}

void nmp_decode_code_cs(struct nmp_cs *c, const uint8_t *code, size_t len, uint64_t code_addr,
                        uint64_t ip, int aligned, struct nmp_memop *out, int *resynced)
{
    memset(out, 0, sizeof *out);
    out->base = out->index = -1;
    if (resynced)
        *resynced = 0;
    if (ip < code_addr || ip >= code_addr + len) {
        out->rule = NMP_RULE_UNREADABLE;
        return;
    }
    struct nmp_insn *v = NULL;
    size_t n = 0;
    if (aligned) {
        if (nmp_cs_decode_range(c, code, len, code_addr, &v, &n) == 0 &&
            nmp_attribute(v, n, ip, out) == 0) {
            free(v);
            return;
        }
        free(v);
        v = NULL;
    }
    if (resynced)
        *resynced = 1;
    /* Re-synchronise: the earliest start within 64 bytes before ip whose linear decode
     * lands exactly on ip (x86 decoding converges quickly, so these paths agree). */
    uint64_t lo = ip - code_addr > 64 ? ip - 64 : code_addr;
    uint64_t end = ip + 16 < code_addr + len ? ip + 16 : code_addr + len;
    uint64_t start = ip;
    for (uint64_t s = lo; s < ip; s++) {
        const uint8_t *p = code + (s - code_addr);
        size_t left = (size_t)(ip - s);
        uint64_t a = s;
        while (left > 0 && cs_disasm_iter(c->h, &p, &left, &a, c->ci))
            ;
        if (left == 0 && a == ip) {
            start = s;
            break;
        }
    }
    if (nmp_cs_decode_range(c, code + (start - code_addr), (size_t)(end - start), start, &v,
                            &n) != 0 ||
        nmp_attribute(v, n, ip, out) != 0) {
        memset(out, 0, sizeof *out);
        out->base = out->index = -1;
        out->rule = NMP_RULE_UNDECODABLE;
    }
    free(v);
}
