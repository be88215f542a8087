/* Software-backend address recovery (docs/backends.md, the software backend): decode the instruction at a sampled user
 * IP with Capstone and compute its effective data address from the sampled registers,
 * applying the skid rule when the instruction at IP has no memory operand.
 *
 * Two layers:
 *  - nmp_decode_code(): pure analysis of a code buffer (used by the unit tests);
 *  - nmp_decoder_*(): the per-process view (mappings from PERF_RECORD_MMAP2, code bytes
 *    from the mapped ELF files or the live process, function bounds from the ELF symbol
 *    tables) with a decode cache per (pid, ip).
 */
#ifndef NMP_DECODE_H
#define NMP_DECODE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "nmp_collect.h"

/* Registers of PERF_SAMPLE_REGS_USER, indexed by enum perf_event_x86_regs. */
#define NMP_NREGS 24
#define NMP_REGS_MASK 0xff0fffULL /* AX..SS and R8..R15: every general-purpose register */
#define NMP_REG_SP 7
#define NMP_REG_IP 8
#define NMP_REG_FLAGS 9

struct nmp_regs {
    uint64_t r[NMP_NREGS];
};

/* Unpacks `n` values sampled with `mask` (ascending bit order) into `out`. */
void nmp_regs_unpack(uint64_t mask, const uint64_t *vals, size_t n, struct nmp_regs *out);

/* The value an address register had at the access, rebuilt from registers intact at the
 * sample when the register itself was changed since (`mov (%r10,%rdx,4),%edx` loads over
 * its own index; `add %rcx,%r15` steps a pointer by a stride held in rcx): start from
 * r[src] and apply ops[0..nops) in order. */
enum nmp_rop_kind {
    NMP_ROP_ADD = 1, /* v += imm */
    NMP_ROP_AND,     /* v &= (int64_t)imm */
    NMP_ROP_SHL,     /* v <<= imm */
    NMP_ROP_SHR,     /* v >>= imm (logical) */
    NMP_ROP_SAR,     /* v = (int64_t)v >> imm */
    NMP_ROP_ZX32,    /* v &= 0xffffffff (a 32-bit write) */
    NMP_ROP_SX32,    /* v = (int64_t)(int32_t)v (movsxd) */
    NMP_ROP_ADDREG,  /* v += r[reg] * scale + imm (scale may be negative) */
    NMP_ROP_STRBACK, /* v -= imm, or v += imm when the direction flag is set: back over
                      * the last element a string instruction (movs, stos) stepped past */
    NMP_ROP_DIV,     /* v = (int64_t)v / imm, exact (else no address): undoes v *= imm */
    NMP_ROP_SELECT,  /* v = r[reg] unless condition imm (an x86 condition code, as in
                      * jcc / cmovcc) holds on the sampled flags */
};
#define NMP_REBUILD_OPS 6
struct nmp_rop {
    uint8_t op;   /* nmp_rop_kind */
    int8_t reg;   /* ADDREG: perf register index */
    int8_t scale;
    uint8_t pad;
    int32_t imm;
};
struct nmp_rebuild {
    uint8_t used; /* 0 (a zeroed memop): nothing rebuilt */
    int8_t reg;   /* the memop's base or index register this replaces */
    int8_t src;   /* perf register index the value starts from */
    uint8_t nops;
    uint8_t pad[4];
    struct nmp_rop ops[NMP_REBUILD_OPS];
};

/* How to compute the data address of a sample at one IP: the decode of the memory
 * operand the sample is attributed to.  rule is NMP_RULE_*; the address is meaningful
 * only for the rules of nmp_rule_has_address(). */
enum { NMP_CMP_NONE = 0, NMP_CMP_TEST, NMP_CMP_IMM };

struct nmp_memop {
    int64_t disp;       /* displacement; RIP-relative operands have it resolved */
    uint64_t insn;      /* address of the instruction the sample is attributed to */
    int8_t base, index; /* perf register index, or -1 */
    uint8_t scale;
    uint8_t addr32;     /* 32-bit address size: truncate */
    uint8_t access;     /* NMP_ACC_* */
    uint8_t size;       /* bytes, 0 unknown */
    uint8_t rule;       /* NMP_RULE_* */
    uint8_t tls;        /* %fs-relative: the thread pointer is added to the address */
    struct nmp_rebuild rb; /* rb.used: rb.reg's value at the access, rebuilt */
    /* constant steps of base and index since the access, undone in disp (skid rules):
     * the value each had at the access is the sampled one plus this */
    int32_t base_step, index_step;
    /* 0, or 16 + an x86 condition code: the access ran on the way to ip only when that
     * condition holds on the flags sampled at ip (a branch around it whose flags last to
     * ip; skid_path); else the sample's access is `alt`, the last one before that
     * branch (when alt.access is not NMP_ACC_NONE; its registers intact up to ip, steps
     * undone in its disp), or none (rule clobbered) */
    uint8_t guard;
    /* the guard's flags: those sampled at ip (guard_reg 0), or those `test %r,%r` /
     * `cmp $guard_imm,%r` (guard_kind NMP_CMP_*, guard_32 for 32 bits) gives on register
     * guard_reg - 1 as sampled at ip (a register unchanged since that compare) */
    uint8_t guard_reg, guard_kind, guard_32;
    int32_t guard_imm;
    struct {
        int64_t disp;
        uint64_t insn;
        int8_t base, index;
        uint8_t scale, addr32, access, size;
    } alt;
};

/* The access of a sample at ip under the registers `r` sampled there, into out: `m`,
 * unless its guard says the branch around it was taken: then the access before that
 * branch (rule skid_path), or none (rule clobbered). */
void nmp_memop_taken(const struct nmp_memop *m, const struct nmp_regs *r, struct nmp_memop *out);
/* Effective address of `m` under registers `r` (0 if the rule carries no address, or a
 * guard says the access did not run: nmp_memop_taken gives the one that did). */
uint64_t nmp_memop_addr(const struct nmp_memop *m, const struct nmp_regs *r);
/* The value register `reg` (a perf register index: m's base or index) had at the access
 * `m`, with the skid rule's steps undone or rebuilt: 0, or -1 when it cannot be known. */
int nmp_memop_reg(const struct nmp_memop *m, const struct nmp_regs *r, int reg, uint64_t *out);
/* The DWARF register number (System V x86-64 psABI, "DWARF Register Number Mapping") of
 * a perf register index, -1 for none. */
int nmp_dwarf_reg(int perf_reg);

struct nmp_decoder;

/* Opaque decoder (Capstone handle, per-process mappings, caches).  NULL on failure. */
struct nmp_decoder *nmp_decoder_new(void);
void nmp_decoder_free(struct nmp_decoder *d);

/* Analyses `ip` inside `code` (bytes of [code_addr, code_addr+len)).  If `aligned`,
 * code_addr is an instruction boundary (a function start) and the code is decoded
 * linearly from there; otherwise instruction boundaries are re-synchronised from a
 * window of up to 64 bytes before ip.  Fills `out` (rule set on failure too). */
void nmp_decode_code(struct nmp_decoder *d, const uint8_t *code, size_t len,
                     uint64_t code_addr, uint64_t ip, int aligned, struct nmp_memop *out);

/* Process events from the sampler's side-band records. */
int nmp_decoder_mmap(struct nmp_decoder *d, uint32_t pid, uint64_t start, uint64_t len,
                     uint64_t pgoff, const char *path);
void nmp_decoder_fork(struct nmp_decoder *d, uint32_t ppid, uint32_t pid);
void nmp_decoder_exec(struct nmp_decoder *d, uint32_t pid);
/* Reads /proc/<pid>/maps into the mapping list (attach mode, or a sample in an unknown
 * mapping).  Returns the number of mappings, -1 on error. */
int nmp_decoder_load_proc_maps(struct nmp_decoder *d, uint32_t pid);

/* Decodes one software sample: fills s->addr, access, size, rule from s->pid, s->ip. */
void nmp_decode_sample(struct nmp_decoder *d, const struct nmp_regs *regs,
                       struct nmp_sample *s);

struct nmp_decode_stats {
    uint64_t cache_hits, cache_misses, functions, resyncs, file_reads, vm_reads;
};
void nmp_decoder_stats(const struct nmp_decoder *d, struct nmp_decode_stats *st);

#endif
