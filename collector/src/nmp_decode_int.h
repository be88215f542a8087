/* Internals shared by decode.c (Capstone analysis) and codemap.c (code bytes, caches). */
#ifndef NMP_DECODE_INT_H
#define NMP_DECODE_INT_H

#include "nmp_decode.h"

/* One decoded instruction, compact enough to cache whole functions. */
struct nmp_insn {
    uint64_t addr;
    uint32_t wregs; /* perf register indexes written (bit per index), IP/FLAGS excluded */
    uint8_t len;
    uint8_t flags;
    int8_t step_reg;  /* `reg += step` (add/sub imm, inc/dec, lea reg,[reg+d]): reg, or -1 */
    int32_t step;
    /* what the instruction computed into its only written register, when it is one of
     * the forms the skid rule can replay (mov, movsxd, and/add/sub/shifts by a constant,
     * lea): def_op (a nmp_rop_kind, 0 = none) of def_src / def_src2 */
    uint8_t def_op, def_32;  /* def_32: a 32-bit destination (the result is zero-extended) */
    int8_t def_src, def_src2;
    uint8_t def_scale;
    int32_t def_imm;
    struct nmp_memop mem; /* valid when flags has the memory-operand bit */
};

struct nmp_cs;
int nmp_cs_open(struct nmp_cs **out);
void nmp_cs_close(struct nmp_cs *c);
int nmp_cs_decode_range(struct nmp_cs *c, const uint8_t *code, size_t len, uint64_t addr,
                        struct nmp_insn **out, size_t *nout);
int nmp_attribute(const struct nmp_insn *v, size_t n, uint64_t ip, struct nmp_memop *out);
void nmp_decode_code_cs(struct nmp_cs *c, const uint8_t *code, size_t len, uint64_t code_addr,
                        uint64_t ip, int aligned, struct nmp_memop *out, int *resynced);

#endif
