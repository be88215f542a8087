/* Instruction decoding for the software backend: see nmp_decode.h.
 *
 * A code range is decoded once into a compact instruction list (address, length,
 * control flow: kind of transfer, direct branch targets and the branches to each
 * instruction; registers written and how; memory operand formula).  skid.c then charges
 * the sample at `ip` to one memory operand of that list.
 */
#include "nmp_decode.h"
#include "nmp_decode_int.h"

#include <capstone/capstone.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <Zydis/Zydis.h>

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

/* The decoders: Capstone, and Zydis for what Capstone cannot decode.  Capstone 4.0.2
 * (Debian 12's) decodes none of many EVEX-encoded scalar and 128-bit instructions that
 * GCC emits for -march with AVX-512 (x86-64-v4, znver4, skylake-avx512): `vfmadd132sd
 * (%r14,%rcx,1),%xmm28,%xmm1`, `vsubsd (%r9,%r15,8),%xmm25,%xmm14`, `vandpd
 * %xmm5,%xmm31,%xmm2` (2.6 % of CloverLeaf's samples built so, and the bytes after each
 * were decoded out of step). */
struct nmp_cs {
    csh h;
    cs_insn *ci;
    ZydisDecoder zd;
    ZydisDecodedInstruction zi;
    ZydisDecodedOperand zo[ZYDIS_MAX_OPERAND_COUNT];
    uint64_t zaddr;
};

enum { DEC_NONE = 0, DEC_CS, DEC_ZY };

static int cs_false_vsib(const cs_insn *ci);

/* Decodes the instruction at *p into c (Capstone's ci, else Zydis's zi / zo) and steps
 * past it; DEC_NONE when neither decodes it (nothing moves). */
static int decode_one(struct nmp_cs *c, const uint8_t **p, size_t *left, uint64_t *a)
{
    const uint8_t *p0 = *p;
    size_t left0 = *left;
    uint64_t a0 = *a;
    if (cs_disasm_iter(c->h, p, left, a, c->ci)) {
        if (!cs_false_vsib(c->ci))
            return DEC_CS;
        *p = p0, *left = left0, *a = a0; /* Capstone misread it: Zydis decodes it */
    }
    if (!ZYAN_SUCCESS(ZydisDecoderDecodeFull(&c->zd, *p, *left, &c->zi, c->zo)) ||
        c->zi.length == 0 || c->zi.length > *left)
        return DEC_NONE;
    c->zaddr = *a;
    *p += c->zi.length;
    *left -= c->zi.length;
    *a += c->zi.length;
    return DEC_ZY;
}

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
    if (!c->ci || !ZYAN_SUCCESS(ZydisDecoderInit(&c->zd, ZYDIS_MACHINE_MODE_LONG_64,
                                                ZYDIS_STACK_WIDTH_64))) {
        if (c->ci)
            cs_free(c->ci, 1);
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
    /* VEX / EVEX instructions never read-modify-write memory: a memory destination is a
     * store (vmov*, vextract*, vmaskmov*, vcompress*, vpmov* narrowing, vcvtps2ph), a
     * memory source a load (Capstone 4 gives masked loads and vexpand* no access at all,
     * and masked or compressing stores as loads) */
    if (mnem[0] == 'v' && strcmp(mnem, "vldmxcsr") != 0)
        return opidx == 0 ? NMP_ACC_STORE : NMP_ACC_LOAD;
    if (!strncmp(mnem, "mov", 3))
        return opidx == 0 ? NMP_ACC_STORE : NMP_ACC_LOAD;
    if (opidx == 0 && (!strncmp(mnem, "extract", 7) || !strncmp(mnem, "pextr", 5)))
        return NMP_ACC_STORE;
    return acc;
}

/* The x86 condition code (0 o, 1 no, 2 b, 3 ae, 4 e, 5 ne, 6 be, 7 a, 8 s, 9 ns, 10 p,
 * 11 np, 12 l, 13 ge, 14 le, 15 g) of a cmovcc. */
/* The condition code of a conditional jump on the flags (jrcxz & co test a register:
 * -1, as any other instruction). */
static int jcc_cc(unsigned id)
{
    static const unsigned ids[16] = {
        X86_INS_JO, X86_INS_JNO, X86_INS_JB, X86_INS_JAE, X86_INS_JE, X86_INS_JNE,
        X86_INS_JBE, X86_INS_JA, X86_INS_JS, X86_INS_JNS, X86_INS_JP, X86_INS_JNP,
        X86_INS_JL, X86_INS_JGE, X86_INS_JLE, X86_INS_JG};
    for (int k = 0; k < 16; k++)
        if (ids[k] == id)
            return k;
    return -1;
}

/* cmp_*: `test %r,%r` or `cmp $imm,%r` on a general register of 4 or 8 bytes. */
static void fill_compare(struct nmp_insn *in, unsigned id, const cs_x86 *x)
{
    in->cmp_reg = -1;
    if (x->op_count != 2 || x->operands[0].type != X86_OP_REG ||
        (x->operands[0].size != 4 && x->operands[0].size != 8))
        return;
    int is32 = 0, r = perf_reg(x->operands[0].reg, &is32);
    if (r < 0 || r == NMP_REG_IP || r == NMP_REG_FLAGS)
        return;
    const cs_x86_op *s = &x->operands[1];
    if (id == X86_INS_TEST && s->type == X86_OP_REG && s->reg == x->operands[0].reg) {
        in->cmp_kind = NMP_CMP_TEST;
    } else if (id == X86_INS_CMP && s->type == X86_OP_IMM && s->imm >= INT32_MIN &&
               s->imm <= INT32_MAX) {
        in->cmp_kind = NMP_CMP_IMM;
        in->cmp_imm = (int32_t)s->imm;
    } else {
        return;
    }
    in->cmp_reg = (int8_t)r;
    in->cmp_32 = (uint8_t)(x->operands[0].size == 4);
}

static int cmov_cc(unsigned id)
{
    static const unsigned ids[16] = {
        X86_INS_CMOVO, X86_INS_CMOVNO, X86_INS_CMOVB, X86_INS_CMOVAE, X86_INS_CMOVE,
        X86_INS_CMOVNE, X86_INS_CMOVBE, X86_INS_CMOVA, X86_INS_CMOVS, X86_INS_CMOVNS,
        X86_INS_CMOVP, X86_INS_CMOVNP, X86_INS_CMOVL, X86_INS_CMOVGE, X86_INS_CMOVLE,
        X86_INS_CMOVG};
    for (int k = 0; k < 16; k++)
        if (ids[k] == id)
            return k;
    return -1;
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
                in->def_op = NMP_DEF_MOV;
                in->def_src = (int8_t)src;
            }
        }
        return;
    case X86_INS_MOVSXD:
        if (s->type == X86_OP_REG && s->size == 4 && dsize == 8) {
            int src = perf_reg(s->reg, &s32);
            if (src >= 0 && src != 8) {
                in->def_op = NMP_DEF_SX32;
                in->def_src = (int8_t)src;
            }
        }
        return;
    case X86_INS_AND: case X86_INS_ADD: case X86_INS_SUB:
    case X86_INS_SHL: case X86_INS_SAL: case X86_INS_SHR: case X86_INS_SAR:
        if (s->type != X86_OP_IMM)
            return;
        in->def_op = NMP_DEF_ALU;
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
            in->def_op = NMP_DEF_NONE;
        if (id == X86_INS_SUB && imm == INT32_MIN)
            in->def_op = NMP_DEF_NONE;
        return;
    case X86_INS_CMOVO: case X86_INS_CMOVNO: case X86_INS_CMOVB: case X86_INS_CMOVAE:
    case X86_INS_CMOVE: case X86_INS_CMOVNE: case X86_INS_CMOVBE: case X86_INS_CMOVA:
    case X86_INS_CMOVS: case X86_INS_CMOVNS: case X86_INS_CMOVP: case X86_INS_CMOVNP:
    case X86_INS_CMOVL: case X86_INS_CMOVGE: case X86_INS_CMOVLE: case X86_INS_CMOVG:
        if (s->type == X86_OP_REG && s->size == dsize) {
            int src = perf_reg(s->reg, &s32);
            if (src >= 0 && src != NMP_REG_IP) {
                in->def_op = NMP_DEF_CMOV;
                in->def_src = (int8_t)src;
                in->def_imm = cmov_cc(id);
            }
        }
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
        in->def_op = NMP_DEF_LEA;
        in->def_src = (int8_t)b;
        in->def_src2 = (int8_t)i;
        in->def_scale = (uint8_t)(s->mem.scale > 0 ? s->mem.scale : 1);
        in->def_imm = (int32_t)s->mem.disp;
        return;
    default:
        return;
    }
}

/* The divides and square roots: the arithmetic whose latency (11 to 20 cycles for SSE and
 * AVX floating point, 20 to 90 for integer division; Intel's optimization manual, Fog's
 * instruction tables) is a cache miss's to the L2 or L3.  Reciprocal estimates
 * (rcpps, rsqrtps: 4 cycles) are not among them. */
static int is_divide(unsigned id)
{
    switch (id) {
    case X86_INS_DIV: case X86_INS_IDIV:
    case X86_INS_DIVSS: case X86_INS_DIVSD: case X86_INS_DIVPS: case X86_INS_DIVPD:
    case X86_INS_VDIVSS: case X86_INS_VDIVSD: case X86_INS_VDIVPS: case X86_INS_VDIVPD:
    case X86_INS_SQRTSS: case X86_INS_SQRTSD: case X86_INS_SQRTPS: case X86_INS_SQRTPD:
    case X86_INS_VSQRTSS: case X86_INS_VSQRTSD: case X86_INS_VSQRTPS: case X86_INS_VSQRTPD:
    case X86_INS_FDIV: case X86_INS_FDIVP: case X86_INS_FDIVR: case X86_INS_FDIVRP:
    case X86_INS_FIDIV: case X86_INS_FIDIVR: case X86_INS_FSQRT:
        return 1;
    default:
        return 0;
    }
}

/* Control-flow flags of the instruction in c->ci, and the target of a direct branch. */
static void fill_flow(struct nmp_cs *c, struct nmp_insn *in, uint64_t *target)
{
    cs_insn *ci = c->ci;
    cs_x86 *x = &ci->detail->x86;
    unsigned id = ci->id;
    int jump = cs_insn_group(c->h, ci, CS_GRP_JUMP) || id == X86_INS_LOOP ||
               id == X86_INS_LOOPE || id == X86_INS_LOOPNE;
    *target = 0;
    if (jump) {
        in->flags |= NMP_F_CF;
        if (id == X86_INS_JMP || id == X86_INS_LJMP)
            in->flags |= NMP_F_NOFALL;
        if (x->op_count == 1 && x->operands[0].type == X86_OP_IMM)
            *target = (uint64_t)x->operands[0].imm;
    } else if (cs_insn_group(c->h, ci, CS_GRP_RET) || cs_insn_group(c->h, ci, CS_GRP_IRET) ||
               id == X86_INS_UD2 || id == X86_INS_HLT || id == X86_INS_INT3) {
        in->flags |= NMP_F_CF | NMP_F_NOFALL;
    } else if (cs_insn_group(c->h, ci, CS_GRP_CALL) || cs_insn_group(c->h, ci, CS_GRP_INT) ||
               id == X86_INS_SYSCALL || id == X86_INS_SYSENTER) {
        in->flags |= NMP_F_CF | NMP_F_CALL;
    }
    /* a thread waiting: pause in a spin loop, or reading the time-stamp counter to time
     * one out (the LLVM OpenMP runtime's barrier waits call __kmp_hardware_timestamp,
     * rdtsc and nothing else, between their pauses) */
    if (id == X86_INS_PAUSE || id == X86_INS_RDTSC || id == X86_INS_RDTSCP)
        in->flags |= NMP_F_PAUSE;
    if (id == X86_INS_NOP)
        in->flags |= NMP_F_NOP;
    if (is_divide(id))
        in->flags |= NMP_F_DIVIDE;
}

/* A step of one 64-bit register that the skid rule can undo: add/sub by a constant or by
 * another register, inc/dec, lea reg,[reg+d] or lea reg,[reg+src*s+d] (the pointer or
 * index of a loop after its access, stepped by a constant or by a stride in a register),
 * a multiplication by a constant (lea reg,[reg+reg*s+d], imul reg,reg,imm: an index
 * scaled for its next use).  A 32-bit step zero-extends and is not one. */
static void fill_step(struct nmp_insn *in, unsigned id, const cs_x86 *x)
{
    in->step_reg = in->step_src = -1;
    in->step_mul = 1;
    if ((id == X86_INS_PUSH || id == X86_INS_POP) && x->op_count == 1 &&
        (x->operands[0].size == 8 || x->operands[0].type == X86_OP_IMM)) {
        /* the stack pointer stepped by the quadword pushed or popped (a popped register,
         * also written, is no step) */
        in->step_reg = NMP_REG_SP;
        in->step = id == X86_INS_PUSH ? -8 : 8;
        return;
    }
    const cs_x86_op *d = &x->operands[0], *s = &x->operands[1];
    int r32 = 0, s32 = 0, dst = -1;
    if (x->op_count >= 1 && d->type == X86_OP_REG && d->size == 8)
        dst = perf_reg(d->reg, &r32);
    if (dst < 0 || dst == NMP_REG_IP || in->wregs != (1u << dst))
        return;
    if ((id == X86_INS_ADD || id == X86_INS_SUB) && x->op_count == 2 && s->type == X86_OP_IMM) {
        if (s->imm > INT32_MIN && s->imm < INT32_MAX) {
            in->step_reg = (int8_t)dst;
            in->step = (int32_t)(id == X86_INS_ADD ? s->imm : -s->imm);
        }
    } else if ((id == X86_INS_ADD || id == X86_INS_SUB) && x->op_count == 2 &&
               s->type == X86_OP_REG && s->size == 8) {
        int src = perf_reg(s->reg, &s32);
        if (src >= 0 && src != dst && src != NMP_REG_IP) {
            in->step_reg = (int8_t)dst;
            in->step_src = (int8_t)src;
            in->step_scale = id == X86_INS_ADD ? 1 : -1;
        }
    } else if (id == X86_INS_IMUL && x->op_count == 3 && s->type == X86_OP_REG &&
               s->reg == d->reg && x->operands[2].type == X86_OP_IMM &&
               x->operands[2].imm > 1 && x->operands[2].imm < INT32_MAX) {
        in->step_reg = (int8_t)dst; /* imul r,r,imm */
        in->step_mul = (int32_t)x->operands[2].imm;
    } else if ((id == X86_INS_INC || id == X86_INS_DEC) && x->op_count == 1) {
        in->step_reg = (int8_t)dst;
        in->step = id == X86_INS_INC ? 1 : -1;
    } else if (id == X86_INS_LEA && x->op_count == 2 && s->type == X86_OP_MEM &&
               s->mem.segment == X86_REG_INVALID && s->mem.disp > INT32_MIN &&
               s->mem.disp < INT32_MAX) {
        int b32 = 0, i32 = 0;
        int b = s->mem.base == X86_REG_INVALID ? -1 : perf_reg(s->mem.base, &b32);
        int i = s->mem.index == X86_REG_INVALID ? -1 : perf_reg(s->mem.index, &i32);
        int sc = s->mem.scale > 0 ? s->mem.scale : 1;
        if (b32 || i32 || b == NMP_REG_IP || i == NMP_REG_IP)
            return;
        if (b == dst && i == dst) {                 /* lea r,[r+r*s+d]: r * (s+1) + d */
            in->step_mul = sc + 1;
        } else if (b == dst && i < 0) {             /* lea r,[r+d] */
            in->step_src = -1;
        } else if (b == dst) {                      /* lea r,[r+src*s+d] */
            in->step_src = (int8_t)i;
            in->step_scale = (int8_t)sc;
        } else if (i == dst && sc == 1 && b >= 0) { /* lea r,[src+r+d] */
            in->step_src = (int8_t)b;
            in->step_scale = 1;
        } else {
            return;
        }
        in->step_reg = (int8_t)dst;
        in->step = (int32_t)s->mem.disp;
    }
}

/* A gather or scatter (one address per vector lane, from a vector index register): by
 * name, because Capstone 4 decodes the VSIB index of EVEX scatters and of the gather /
 * scatter prefetches as a general register (vpscatterdd [rdi+zmm0*4] as [rdi+rax*4]). */
static int is_vsib(const char *mnem)
{
    return strstr(mnem, "gather") || strstr(mnem, "scatter");
}

/* Whether Capstone 4 gave a vector index register to the memory operand of an EVEX
 * instruction that is no gather or scatter: it reads EVEX.V' (the high bit of the
 * second source, xmm16-31) as the high bit of a VSIB index, so that
 * vminsd (%r14,%rax,8),%xmm25,%xmm19 comes out as vminsd [r14 + xmm0*8], xmm9, xmm19:
 * wrong registers and no address (gcc -march=znver4 code is full of them). */
static int cs_false_vsib(const cs_insn *ci)
{
    const cs_x86 *x = &ci->detail->x86;
    if (is_vsib(ci->mnemonic))
        return 0;
    for (int i = 0; i < x->op_count; i++)
        if (x->operands[i].type == X86_OP_MEM && x->operands[i].mem.index != X86_REG_INVALID &&
            is_vector_reg(x->operands[i].mem.index))
            return 1;
    return 0;
}

/* A string instruction (movs, stos, lods, cmps, scas); X86_INS_MOVSD and CMPSD are also
 * the SSE movsd / cmpsd, which have a vector register operand. */
static int is_string(unsigned id, const cs_x86 *x)
{
    switch (id) {
    case X86_INS_MOVSB: case X86_INS_MOVSW: case X86_INS_MOVSD: case X86_INS_MOVSQ:
    case X86_INS_STOSB: case X86_INS_STOSW: case X86_INS_STOSD: case X86_INS_STOSQ:
    case X86_INS_LODSB: case X86_INS_LODSW: case X86_INS_LODSD: case X86_INS_LODSQ:
    case X86_INS_CMPSB: case X86_INS_CMPSW: case X86_INS_CMPSD: case X86_INS_CMPSQ:
    case X86_INS_SCASB: case X86_INS_SCASW: case X86_INS_SCASD: case X86_INS_SCASQ:
        for (int i = 0; i < x->op_count; i++)
            if (x->operands[i].type == X86_OP_REG && is_vector_reg(x->operands[i].reg))
                return 0;
        return 1;
    default:
        return 0;
    }
}

/* The stack access of an instruction with no memory operand (NMP_F_STACK): push (a
 * quadword stored at rsp - 8), pop (loaded from rsp), a return (the return address
 * loaded from rsp); a call's return address slot, rsp - 8 (NMP_F_RETSLOT), which the
 * callee's ret read last before the instruction after the call. */
static void stack_access(struct nmp_insn *in, unsigned id, const cs_x86 *x)
{
    struct nmp_memop *m = &in->mem;
    int push = id == X86_INS_PUSH && x->op_count == 1 &&
               (x->operands[0].type == X86_OP_IMM || x->operands[0].size == 8);
    int pop = id == X86_INS_POP && x->op_count == 1 && x->operands[0].size == 8;
    int ret = id == X86_INS_RET, call = (in->flags & NMP_F_CALL) && id == X86_INS_CALL;
    if (!push && !pop && !ret && !call)
        return;
    m->insn = in->addr;
    m->size = 8;
    m->base = NMP_REG_SP;
    m->index = -1;
    m->scale = 1;
    m->disp = push || call ? -8 : 0;
    m->access = push ? NMP_ACC_STORE : NMP_ACC_LOAD;
    m->rule = NMP_RULE_AT_IP;
    in->flags |= call ? NMP_F_RETSLOT : NMP_F_STACK;
    if (call) /* rsp comes back as it was: the slot is at the rsp of the return */
        in->wregs &= ~(1u << NMP_REG_SP);
}

/* Fills one compact instruction from Capstone's decode in c->ci. */
#define REG_NONE (-2) /* set_address: no such register in the operand */

/* A memory operand's address registers, whichever decoder read them: rip-relative (the
 * displacement made absolute from the next instruction's address `next`), or a base
 * and an index as perf register indexes (REG_NONE: absent; -1: a register perf does not
 * sample, so the address cannot be computed). */
static void set_address(struct nmp_memop *m, int rip, int eip, uint64_t next, int base, int index,
                        int addr32)
{
    if (rip) {
        m->disp = (int64_t)next + m->disp;
        m->addr32 = (uint8_t)eip;
    } else if (base != REG_NONE) {
        m->base = (int8_t)base;
        if (base < 0)
            m->rule = NMP_RULE_UNDECODABLE;
    }
    if (index != REG_NONE) {
        m->index = (int8_t)index;
        if (index < 0)
            m->rule = NMP_RULE_UNDECODABLE;
    }
    if (addr32)
        m->addr32 = 1;
}

/* A gather or scatter: one address per vector lane, from a vector index register perf
 * does not sample.  Its base register plus displacement (or the displacement alone, a
 * static array's address) is in the array the lanes index: rule vsib_base, whose
 * address names the object but not the element (docs/backends.md).  Rule vsib when the
 * base is a register perf does not sample. */
static void set_vsib_base(struct nmp_memop *m, int base, int b32)
{
    m->rule = NMP_RULE_VSIB_BASE;
    set_address(m, 0, 0, 0, base, REG_NONE, b32);
    if (m->rule != NMP_RULE_VSIB_BASE) {
        m->base = -1;
        m->rule = NMP_RULE_VSIB;
    }
}

static void fill_insn(struct nmp_cs *c, struct nmp_insn *in, uint64_t *target)
{
    cs_insn *ci = c->ci;
    cs_x86 *x = &ci->detail->x86;
    memset(in, 0, sizeof *in);
    in->addr = ci->address;
    in->len = (uint8_t)ci->size;
    in->tgt = in->src_first = in->src_next = -1;
    fill_flow(c, in, target);
    in->jcc = (int8_t)jcc_cc(ci->id);
    fill_compare(in, ci->id, x);

    cs_regs rr, rw;
    uint8_t nr = 0, nw = 0;
    if (cs_regs_access(c->h, ci, rr, &nr, rw, &nw) == CS_ERR_OK) {
        for (int i = 0; i < nw; i++) {
            int p = perf_reg(rw[i], NULL);
            if (p == NMP_REG_FLAGS)
                in->flags |= NMP_F_WFLAGS;
            else if (p >= 0 && p != NMP_REG_IP)
                in->wregs |= 1u << p;
        }
    }
    fill_step(in, ci->id, x);
    fill_def(in, ci->id, x);

    if (no_data_access(ci->id) || (is_vsib(ci->mnemonic) && strstr(ci->mnemonic, "pf")))
        return; /* lea, nop, prefetches (vgatherpf0dps & co too) */
    int string = is_string(ci->id, x);
    if (string) {
        in->flags |= NMP_F_STRING;
        if (x->prefix[0] == X86_PREFIX_REP || x->prefix[0] == X86_PREFIX_REPNE)
            in->flags |= NMP_F_REP;
    }
    /* the memory operand: the first, or for a string instruction with two (movs, cmps)
     * the source, [rsi]: a copy waits on its loads, its stores retire into the store
     * buffer */
    int mi = -1;
    for (int i = 0; i < x->op_count; i++) {
        if (x->operands[i].type != X86_OP_MEM)
            continue;
        if (mi < 0 || (string && x->operands[i].mem.base == X86_REG_RSI))
            mi = i;
    }
    if (mi < 0) {
        stack_access(in, ci->id, x);
        return;
    }
    cs_x86_op *op = &x->operands[mi];
    struct nmp_memop *m = &in->mem;
    in->flags |= NMP_F_MEM;
    m->insn = ci->address;
    m->size = op->size;
    int rd = (op->access & CS_AC_READ) != 0, wr = (op->access & CS_AC_WRITE) != 0;
    m->access = rd && wr ? NMP_ACC_RMW : wr ? NMP_ACC_STORE : rd ? NMP_ACC_LOAD : NMP_ACC_NONE;
    m->access = (uint8_t)fix_access(ci->id, ci->mnemonic, mi, m->access);
    m->base = m->index = -1;
    m->scale = (uint8_t)(op->mem.scale > 0 ? op->mem.scale : 1);
    m->disp = op->mem.disp;
    m->rule = NMP_RULE_AT_IP;
    /* %fs: a thread's static TLS (x86-64 user space), at the thread pointer plus what
     * the registers give, which the sampled registers lack (nmp_sample.tls) */
    if (op->mem.segment == X86_REG_FS)
        m->tls = 1;
    else if (op->mem.segment != X86_REG_INVALID) {
        m->rule = NMP_RULE_SEGMENT;
        return;
    }
    int b32 = 0, i32 = 0;
    int rip = op->mem.base == X86_REG_RIP || op->mem.base == X86_REG_EIP;
    int base = op->mem.base == X86_REG_INVALID ? REG_NONE : perf_reg(op->mem.base, &b32);
    if (is_vsib(ci->mnemonic) ||
        (op->mem.index != X86_REG_INVALID && is_vector_reg(op->mem.index))) {
        set_vsib_base(m, base, b32);
        return;
    }
    int index = op->mem.index == X86_REG_INVALID ? REG_NONE : perf_reg(op->mem.index, &i32);
    set_address(m, rip, op->mem.base == X86_REG_EIP, ci->address + ci->size, base, index, b32 || i32);
}

/* Zydis register -> perf_event_x86_regs index, as perf_reg (the enclosing 64-bit
 * register; *is32 for a 32-bit one); -1 for the others. */
static int zy_perf_reg(ZydisRegister r, int *is32)
{
    static const ZydisRegister gpr[] = {
        ZYDIS_REGISTER_RAX, ZYDIS_REGISTER_RBX, ZYDIS_REGISTER_RCX, ZYDIS_REGISTER_RDX,
        ZYDIS_REGISTER_RSI, ZYDIS_REGISTER_RDI, ZYDIS_REGISTER_RBP, ZYDIS_REGISTER_RSP};
    if (is32)
        *is32 = ZydisRegisterGetClass(r) == ZYDIS_REGCLASS_GPR32;
    if (r == ZYDIS_REGISTER_RIP || r == ZYDIS_REGISTER_EIP)
        return NMP_REG_IP;
    if (r == ZYDIS_REGISTER_RFLAGS || r == ZYDIS_REGISTER_EFLAGS || r == ZYDIS_REGISTER_FLAGS)
        return NMP_REG_FLAGS;
    ZydisRegister big = ZydisRegisterGetLargestEnclosing(ZYDIS_MACHINE_MODE_LONG_64, r);
    for (int i = 0; i < 8; i++)
        if (big == gpr[i])
            return i;
    if (big >= ZYDIS_REGISTER_R8 && big <= ZYDIS_REGISTER_R15)
        return 16 + (int)(big - ZYDIS_REGISTER_R8);
    return -1;
}

/* An instruction only Zydis decodes (decode_one): its control flow, the general
 * registers and flags it writes, its memory operand.  No step or definition the skid
 * rule could undo or replay is described: a register it writes is one the rule cannot
 * see through, which is the safe side. */
static void fill_insn_zy(struct nmp_cs *c, struct nmp_insn *in, uint64_t *target)
{
    const ZydisDecodedInstruction *zi = &c->zi;
    memset(in, 0, sizeof *in);
    in->addr = c->zaddr;
    in->len = zi->length;
    in->tgt = in->src_first = in->src_next = -1;
    in->jcc = in->cmp_reg = -1;
    in->step_reg = in->step_src = -1;
    in->step_mul = 1;
    in->def_src = in->def_src2 = -1;
    *target = 0;
    switch (zi->meta.category) {
    case ZYDIS_CATEGORY_COND_BR:
    case ZYDIS_CATEGORY_UNCOND_BR:
        in->flags |= NMP_F_CF;
        if (zi->meta.category == ZYDIS_CATEGORY_UNCOND_BR)
            in->flags |= NMP_F_NOFALL;
        if (zi->operand_count_visible == 1 && c->zo[0].type == ZYDIS_OPERAND_TYPE_IMMEDIATE)
            ZydisCalcAbsoluteAddress(zi, &c->zo[0], in->addr, target);
        break;
    case ZYDIS_CATEGORY_RET:
        in->flags |= NMP_F_CF | NMP_F_NOFALL;
        break;
    case ZYDIS_CATEGORY_CALL:
    case ZYDIS_CATEGORY_SYSCALL:
    case ZYDIS_CATEGORY_INTERRUPT:
        in->flags |= NMP_F_CF | NMP_F_CALL;
        break;
    default:
        break;
    }
    if (zi->cpu_flags && (zi->cpu_flags->modified | zi->cpu_flags->set_0 | zi->cpu_flags->set_1 |
                          zi->cpu_flags->undefined))
        in->flags |= NMP_F_WFLAGS;
    const ZydisDecodedOperand *mem = NULL;
    for (int i = 0; i < zi->operand_count; i++) {
        const ZydisDecodedOperand *o = &c->zo[i];
        if (o->type == ZYDIS_OPERAND_TYPE_REGISTER && (o->actions & ZYDIS_OPERAND_ACTION_MASK_WRITE)) {
            int r = zy_perf_reg(o->reg.value, NULL);
            if (r == NMP_REG_FLAGS)
                in->flags |= NMP_F_WFLAGS;
            else if (r >= 0 && r != NMP_REG_IP)
                in->wregs |= 1u << r;
        }
        if (o->type == ZYDIS_OPERAND_TYPE_MEMORY && o->mem.type != ZYDIS_MEMOP_TYPE_AGEN && !mem)
            mem = o;
    }
    if (!mem || zi->meta.category == ZYDIS_CATEGORY_NOP || (in->flags & NMP_F_CF))
        return; /* no data access; a branch through memory is left to Capstone's list */
    struct nmp_memop *m = &in->mem;
    in->flags |= NMP_F_MEM;
    m->insn = in->addr;
    m->size = (uint8_t)(mem->size / 8 > 255 ? 255 : mem->size / 8);
    int rd = (mem->actions & ZYDIS_OPERAND_ACTION_MASK_READ) != 0;
    int wr = (mem->actions & ZYDIS_OPERAND_ACTION_MASK_WRITE) != 0;
    m->access = rd && wr ? NMP_ACC_RMW : wr ? NMP_ACC_STORE : rd ? NMP_ACC_LOAD : NMP_ACC_NONE;
    m->base = m->index = -1;
    m->scale = (uint8_t)(mem->mem.scale > 0 ? mem->mem.scale : 1);
    m->disp = mem->mem.disp.has_displacement ? mem->mem.disp.value : 0;
    m->rule = NMP_RULE_AT_IP;
    if (mem->mem.segment == ZYDIS_REGISTER_FS)
        m->tls = 1;
    else if (mem->mem.segment != ZYDIS_REGISTER_NONE && mem->mem.segment != ZYDIS_REGISTER_DS &&
             mem->mem.segment != ZYDIS_REGISTER_SS && mem->mem.segment != ZYDIS_REGISTER_ES &&
             mem->mem.segment != ZYDIS_REGISTER_CS) {
        m->rule = NMP_RULE_SEGMENT; /* Zydis names the default segment; only fs/gs are bases */
        return;
    }
    int b32 = 0, i32 = 0;
    ZydisRegister b = mem->mem.base, x = mem->mem.index;
    int rip = b == ZYDIS_REGISTER_RIP || b == ZYDIS_REGISTER_EIP;
    int base = b == ZYDIS_REGISTER_NONE ? REG_NONE : zy_perf_reg(b, &b32);
    if (mem->mem.type == ZYDIS_MEMOP_TYPE_VSIB) {
        set_vsib_base(m, base, b32);
        return;
    }
    int index = x == ZYDIS_REGISTER_NONE ? REG_NONE : zy_perf_reg(x, &i32);
    set_address(m, rip, b == ZYDIS_REGISTER_EIP, in->addr + in->len, base, index, b32 || i32);
}

/* Index of the instruction starting at addr, or -1. */
long nmp_insn_find(const struct nmp_insn *v, size_t n, uint64_t addr)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (v[mid].addr < addr)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < n && v[lo].addr == addr ? (long)lo : -1;
}

/* How far after a load its statement's store of the same address is looked for. */
#define STORE_BACK_SPAN 8

static int same_operand(const struct nmp_memop *a, const struct nmp_memop *b)
{
    return a->base == b->base && a->index == b->index && a->scale == b->scale &&
           a->disp == b->disp && a->addr32 == b->addr32 && a->size == b->size &&
           a->tls == b->tls;
}

/* `x += y` on a double is a load, an add and a store of one address (`movsd x,%xmm1;
 * addsd %xmm0,%xmm1; movsd %xmm1,x`): a sample on the load belongs to a statement that
 * writes that line (what the sharing analysis and the write mix need), and a sampled ip
 * is rarely the store (docs/backends.md).  Such a load is marked read-modify-write when
 * the straight-line code after it (no branch, call or jump target in between, at most
 * STORE_BACK_SPAN instructions) stores to the same operand before any of its address
 * registers changes. */
static void mark_stored_back(struct nmp_insn *v, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        struct nmp_memop *m = &v[i].mem;
        if (!(v[i].flags & NMP_F_MEM) || (v[i].flags & (NMP_F_CF | NMP_F_STRING)) ||
            m->access != NMP_ACC_LOAD || m->rule != NMP_RULE_AT_IP)
            continue;
        uint32_t regs = (m->base >= 0 ? 1u << m->base : 0) | (m->index >= 0 ? 1u << m->index : 0);
        if (v[i].wregs & regs)
            continue; /* loads over its own address register */
        for (size_t j = i + 1; j < n && j <= i + STORE_BACK_SPAN; j++) {
            const struct nmp_insn *s = &v[j];
            if (s->flags & (NMP_F_TARGET | NMP_F_GAP))
                break;
            if ((s->flags & NMP_F_MEM) && s->mem.rule == NMP_RULE_AT_IP &&
                s->mem.access == NMP_ACC_STORE && same_operand(m, &s->mem)) {
                m->access = NMP_ACC_RMW;
                break;
            }
            if ((s->flags & (NMP_F_CF | NMP_F_CALL)) || (s->wregs & regs))
                break;
        }
    }
}

/* Linear decode of [addr, addr+len); undecodable bytes are skipped one at a time and
 * the next instruction is marked NMP_F_GAP.  Direct branches to an instruction of the
 * range link it (tgt, and the src_first / src_next chain of the target, which is marked
 * NMP_F_TARGET).  Returns 0 or -1 (ENOMEM). */
int nmp_cs_decode_range(struct nmp_cs *c, const uint8_t *code, size_t len, uint64_t addr,
                        struct nmp_insn **out, size_t *nout)
{
    size_t cap = len / 3 + 8, n = 0;
    struct nmp_insn *v = malloc(cap * sizeof *v);
    uint64_t *tg = malloc(cap * sizeof *tg); /* each instruction's branch target, 0 none */
    if (!v || !tg)
        goto oom;
    const uint8_t *p = code;
    size_t left = len;
    uint64_t a = addr;
    int gap = 0;
    while (left > 0) {
        int dec = decode_one(c, &p, &left, &a);
        if (dec == DEC_NONE) {
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
            uint64_t *nt = realloc(tg, cap * sizeof *tg);
            if (!nt)
                goto oom;
            tg = nt;
        }
        if (dec == DEC_CS)
            fill_insn(c, &v[n], &tg[n]);
        else
            fill_insn_zy(c, &v[n], &tg[n]);
        if (gap)
            v[n].flags |= NMP_F_GAP;
        gap = 0;
        n++;
    }
    for (size_t i = 0; i < n; i++) {
        long t = tg[i] >= addr && tg[i] < addr + len ? nmp_insn_find(v, n, tg[i]) : -1;
        if (t < 0)
            continue;
        v[i].tgt = (int32_t)t;
        v[i].src_next = v[t].src_first;
        v[t].src_first = (int32_t)i;
        v[t].flags |= NMP_F_TARGET;
    }
    mark_stored_back(v, n);
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
        while (left > 0 && decode_one(c, &p, &left, &a) != DEC_NONE)
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
