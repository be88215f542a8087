/* Internals shared by decode.c (Capstone analysis), skid.c (attribution of a sample to
 * a memory instruction) and codemap.c (code bytes, caches). */
#ifndef NMP_DECODE_INT_H
#define NMP_DECODE_INT_H

#include "nmp_decode.h"

/* nmp_insn.flags */
enum {
    NMP_F_CF = 1 << 0,     /* any control transfer (branch, call, return, trap) */
    NMP_F_TARGET = 1 << 1, /* a direct branch of the list jumps here */
    NMP_F_MEM = 1 << 2,    /* accesses memory: mem is valid */
    NMP_F_GAP = 1 << 3,    /* follows undecodable bytes: what precedes it is unknown */
    NMP_F_PAUSE = 1 << 4,  /* pause or rdtsc: a waiting thread (rule spin) */
    NMP_F_NOFALL = 1 << 5, /* never continues with the next instruction (jmp, ret, ud2) */
    NMP_F_CALL = 1 << 6,   /* other code runs before the next instruction (call, syscall) */
    NMP_F_NOP = 1 << 7,    /* nop: alignment padding when nothing reaches it */
    NMP_F_REP = 1 << 8,    /* rep string instruction: interruptible, ip stays on it */
    NMP_F_STRING = 1 << 9, /* string instruction: steps rsi / rdi by its size itself */
    NMP_F_WFLAGS = 1 << 10, /* writes the arithmetic flags */
    NMP_F_DIVIDE = 1 << 11, /* a divide or square root (rule divide when it is between
                             * ip and the access the walk would charge) */
    /* the stack accesses of instructions with no memory operand, in mem (NMP_F_MEM not
     * set): charged only where the walk finds no other access (skid.c) */
    NMP_F_STACK = 1 << 12,   /* push, pop, ret: the quadword at rsp - 8 / rsp */
    NMP_F_RETSLOT = 1 << 13, /* a call: the return address's slot, rsp - 8, which the
                              * callee's ret read last before the instruction after it */
};

/* nmp_insn.def_op: dst = src (mov), dst = sx32(src) (movsxd), dst = dst OP imm (def_scale
 * holds the nmp_rop_kind), or dst = src + src2 * scale + imm (lea) */
enum { NMP_DEF_NONE = 0, NMP_DEF_MOV = 32, NMP_DEF_SX32, NMP_DEF_ALU, NMP_DEF_LEA,
       NMP_DEF_CMOV /* dst = src if condition def_imm holds */ };

/* One decoded instruction, compact enough to cache whole functions. */
struct nmp_insn {
    uint64_t addr;
    uint32_t wregs; /* perf register indexes written (bit per index), IP/FLAGS excluded */
    uint16_t flags; /* NMP_F_* */
    uint8_t len;
    /* a step of one 64-bit register, which the skid rule can undo: step_reg =
     * step_reg * step_mul + step + step_scale * r[step_src] (add/sub by a constant or a
     * register, inc/dec, lea reg,[reg+d] / [reg+src*s+d] / [reg+reg*s+d], imul
     * reg,reg,imm); step_reg -1: none, step_src -1: no register, step_mul 1: none */
    int8_t step_reg, step_src, step_scale;
    int32_t step, step_mul;
    /* what the instruction computed into its only written register, when it is one of
     * the forms the skid rule can replay (mov, movsxd, and/add/sub/shifts by a constant,
     * lea): def_op (NMP_DEF_*) of def_src / def_src2 */
    uint8_t def_op, def_32;  /* def_32: a 32-bit destination (the result is zero-extended) */
    int8_t def_src, def_src2;
    uint8_t def_scale;
    int32_t def_imm;
    /* control flow inside the list: the index of a direct branch's target (-1: none, or
     * outside the list); the branches jumping to this instruction, as a chain through
     * src_next starting at src_first (-1: end) */
    int32_t tgt, src_first, src_next;
    int8_t jcc; /* a conditional jump on the flags: its condition code (0-15), else -1 */
    /* flags set from one register alone: `test %r,%r` (NMP_CMP_TEST) or `cmp $imm,%r`
     * (NMP_CMP_IMM, cmp_imm), 32 or 64 bits wide (cmp_32); cmp_reg a perf register index */
    uint8_t cmp_kind, cmp_32;
    int8_t cmp_reg;
    int32_t cmp_imm;
    struct nmp_memop mem; /* valid when flags has NMP_F_MEM */
};

struct nmp_cs;
int nmp_cs_open(struct nmp_cs **out);
void nmp_cs_close(struct nmp_cs *c);
/* Index of the instruction of v starting at addr, or -1. */
long nmp_insn_find(const struct nmp_insn *v, size_t n, uint64_t addr);
int nmp_cs_decode_range(struct nmp_cs *c, const uint8_t *code, size_t len, uint64_t addr,
                        struct nmp_insn **out, size_t *nout);
/* skid.c: the memory operand a sample at ip is charged to (rule at_ip, skid, skid_path,
 * skid_loop, or why none).  Returns 0, or -1 if ip is not an instruction boundary of v. */
int nmp_attribute(const struct nmp_insn *v, size_t n, uint64_t ip, struct nmp_memop *out);
void nmp_decode_code_cs(struct nmp_cs *c, const uint8_t *code, size_t len, uint64_t code_addr,
                        uint64_t ip, int aligned, struct nmp_memop *out, int *resynced);

#endif
