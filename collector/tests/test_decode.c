/* Decoder tests: hand-assembled x86-64 instructions with given register values; checks
 * the effective address, access type, size and attribution rule.  Exit 0 = pass. */
#include "nmp_decode.h"

#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "nmp_check.h"
#include "decode_vectors.h"

#include "decode_check.h"

/* `code` written to the file <base>.<suffix> (its name into `out`), mapped at `at` in
 * process `pid` as code the decoder reads from the file; the caller unlinks it. */
static void map_code(struct nmp_decoder *d, uint32_t pid, uint64_t at, char *out, size_t outlen,
                     const char *base, const char *suffix, const uint8_t *code, size_t len)
{
    snprintf(out, outlen, "%s.%s", base, suffix);
    int fd = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    CHECK_MSG(fd >= 0 && write(fd, code, len) == (ssize_t)len, "write %s", out);
    if (fd >= 0)
        close(fd);
    CHECK_MSG(nmp_decoder_mmap(d, pid, at, 4096, 0, out) == 0, "mmap %s", suffix);
}

/* A step of the address register by a stride held in another register, or by a constant
 * factor, is undone when what it depends on is unchanged at ip. */
static void test_register_steps(struct nmp_decoder *d)
{
    struct nmp_regs r;
    memset(&r, 0, sizeof r);
    r.r[R15] = 0x7f0000200000;
    r.r[CX] = 0x2000; /* the column stride, in bytes */
    /* adi -O2: addsd 0x8(%r15); add %rcx,%r15; ...; divsd <- ip */
    check_case(d, "adi -O2 register stride", adi_o2_sweep_y, sizeof adi_o2_sweep_y, 0x13f0,
               0x1433, 1, &r,
               (struct expect){r.r[R15] - r.r[CX] + 8, NMP_ACC_LOAD, 8, NMP_RULE_SKID});
    /* ...; divsd; divsd; xorpd <- ip: waiting on the divides (rule divide) */
    check_case(d, "adi -O2 past its divides", adi_o2_sweep_y, sizeof adi_o2_sweep_y, 0x13f0,
               0x143b, 1, &r, (struct expect){0, NMP_ACC_NONE, 0, NMP_RULE_DIVIDE});
    check_case(d, "adi -O2 register stride, first after", adi_o2_sweep_y, sizeof adi_o2_sweep_y,
               0x13f0, 0x1423, 1, &r,
               (struct expect){r.r[R15] - r.r[CX] + 8, NMP_ACC_LOAD, 8, NMP_RULE_SKID});
    /* adi -O3: addsd 0x8(%rdx); add %r8,%rdx; ...; divsd <- ip */
    r.r[DX] = 0x7f0000210000;
    r.r[R8] = 0x4000;
    check_case(d, "adi -O3 register stride", adi_o3_sweep_y, sizeof adi_o3_sweep_y, 0x1518,
               0x155b, 1, &r,
               (struct expect){r.r[DX] - r.r[R8] + 8, NMP_ACC_LOAD, 8, NMP_RULE_SKID});
    /* addsd 0x8(%r15),%xmm0; add %ecx,%r15d (32 bits: zero-extends); mulsd <- ip */
    static const uint8_t s32[] = {0xf2, 0x41, 0x0f, 0x58, 0x47, 0x08, 0x41, 0x01, 0xcf,
                                  0xf2, 0x0f, 0x59, 0xc4, 0xc3};
    check_case(d, "32-bit register step", s32, sizeof s32, A, A + 9, 1, &r,
               (struct expect){0, NMP_ACC_LOAD, 8, NMP_RULE_CLOBBERED});
    /* addsd 0x8(%r15),%xmm0; add %rcx,%r15; mov %rax,%rcx (the stride is gone); mulsd <- ip */
    static const uint8_t gone[] = {0xf2, 0x41, 0x0f, 0x58, 0x47, 0x08, 0x49, 0x01, 0xcf,
                                   0x48, 0x89, 0xc1, 0xf2, 0x0f, 0x59, 0xc4, 0xc3};
    check_case(d, "stride register overwritten", gone, sizeof gone, A, A + 12, 1, &r,
               (struct expect){0, NMP_ACC_LOAD, 8, NMP_RULE_CLOBBERED});
    /* mov (%rdi,%rdx,8),%rax; imul $40,%rdx,%rdx; add %rax,%rcx <- ip: rdx / 40 */
    static const uint8_t imul[] = {0x48, 0x8b, 0x04, 0xd7, 0x48, 0x6b, 0xd2, 0x28,
                                   0x48, 0x01, 0xc1, 0xc3};
    r.r[DI] = 0x7f0000220000;
    r.r[DX] = 7 * 40;
    check_case(d, "constant factor undone", imul, sizeof imul, A, A + 8, 1, &r,
               (struct expect){r.r[DI] + 7 * 8, NMP_ACC_LOAD, 8, NMP_RULE_SKID});
    r.r[DX] = 7 * 40 + 1; /* not a multiple: the product overflowed, no address */
    check_case(d, "inexact factor: no address", imul, sizeof imul, A, A + 8, 1, &r,
               (struct expect){0, NMP_ACC_LOAD, 8, NMP_RULE_SKID});
    /* table_lookup -O3: movsd 0x8(%rsi,%rdx,8); lea (%rdx,%rdx,4),%rdx; ... <- ip */
    r.r[SI] = 0x7f0000230000;
    r.r[DX] = 5 * 1234;
    check_case(d, "lea multiplies the index", lookup_o3_bsearch, sizeof lookup_o3_bsearch, 0x14c8,
               0x152a, 1, &r,
               (struct expect){r.r[SI] + 1234 * 8 + 8, NMP_ACC_LOAD, 8, NMP_RULE_SKID});
    /* mov (%rdi,%rdx,8),%rax; mov %rdx,%r8; xor %edx,%edx; add %rax,%rcx <- ip: the index
     * survives in r8 */
    static const uint8_t copy[] = {0x48, 0x8b, 0x04, 0xd7, 0x49, 0x89, 0xd0, 0x31, 0xd2,
                                   0x48, 0x01, 0xc1, 0xc3};
    r.r[DX] = 0;
    r.r[R8] = 5;
    check_case(d, "index copied by mov", copy, sizeof copy, A, A + 9, 1, &r,
               (struct expect){r.r[DI] + 5 * 8, NMP_ACC_LOAD, 8, NMP_RULE_SKID});
    /* A copy made before the access, which overwrites its own index (GAP's RMAT
     * generator, gcc -O3): mov %r9,%rax; lea 0x1(%rax),%r9; mov 0x30(%rsp,%rax,8),%rax;
     * add %r13d,%r13d <- ip; the index is r9 - 1 */
    static const uint8_t lea_before[] = {0x4c, 0x89, 0xc8, 0x4c, 0x8d, 0x48, 0x01, 0x48, 0x8b,
                                         0x44, 0xc4, 0x30, 0x45, 0x01, 0xed, 0xc3};
    r.r[SP] = 0x7ffd00001000;
    r.r[R9] = 8;
    r.r[AX] = 0x1234; /* what the load gave */
    check_case(d, "index copied by lea before the access", lea_before, sizeof lea_before, A,
               A + 0xc, 1, &r, (struct expect){r.r[SP] + 0x30 + 7 * 8, NMP_ACC_LOAD, 8, NMP_RULE_SKID});
    /* the copy taken before a shift (GAP's bottom-up step): movslq (%rax),%rsi; mov
     * %rsi,%rdi; shr $6,%rsi; mov (%r15,%rsi,8),%rsi; and $1,%edi <- ip: rsi = rdi >> 6 */
    static const uint8_t before_shift[] = {0x48, 0x63, 0x30, 0x48, 0x89, 0xf7, 0x48, 0xc1, 0xee,
                                           0x06, 0x49, 0x8b, 0x34, 0xf7, 0x83, 0xe7, 0x01, 0xc3};
    r.r[R15] = 0x7f0000240000;
    r.r[DI] = 1000;
    r.r[SI] = 0x5555; /* what the load gave */
    check_case(d, "copy before a shift", before_shift, sizeof before_shift, A, A + 0xe, 1, &r,
               (struct expect){r.r[R15] + (1000 >> 6) * 8, NMP_ACC_LOAD, 8, NMP_RULE_SKID});
    /* after `and $1,%edi` the copy is gone too */
    check_case(d, "copy before a shift, copy overwritten", before_shift, sizeof before_shift, A,
               A + 0x11, 1, &r, (struct expect){0, NMP_ACC_LOAD, 8, NMP_RULE_CLOBBERED});
}

/* Through conditional branches and joins: the other paths into a join must keep the
 * registers the address is computed from. */
/* A divide or square root on registers between the last access and ip: the core was
 * waiting on it (rule divide, no address); up to it, and past a divide that reads memory
 * itself, the access is charged as before. */
static void test_divides(struct nmp_decoder *d)
{
    struct nmp_regs r;
    memset(&r, 0, sizeof r);
    r.r[AX] = 0x7f0000001000;
    /* movss (%rax),%xmm0; divss %xmm1,%xmm0; addss %xmm0,%xmm2; ret */
    static const uint8_t fdiv[] = {0xf3, 0x0f, 0x10, 0x00, 0xf3, 0x0f, 0x5e, 0xc1,
                                   0xf3, 0x0f, 0x58, 0xd0, 0xc3};
    check_case(d, "at the divide", fdiv, sizeof fdiv, A, A + 4, 1, &r,
               (struct expect){r.r[AX], NMP_ACC_LOAD, 4, NMP_RULE_SKID});
    check_case(d, "past the divide", fdiv, sizeof fdiv, A, A + 8, 1, &r,
               (struct expect){0, NMP_ACC_NONE, 0, NMP_RULE_DIVIDE});
    check_case(d, "two past the divide", fdiv, sizeof fdiv, A, A + 12, 1, &r,
               (struct expect){0, NMP_ACC_NONE, 0, NMP_RULE_DIVIDE});
    /* divss (%rax),%xmm0; addss %xmm0,%xmm2: the divide's own load is the access */
    static const uint8_t mdiv[] = {0xf3, 0x0f, 0x5e, 0x00, 0xf3, 0x0f, 0x58, 0xd0, 0xc3};
    check_case(d, "past a divide from memory", mdiv, sizeof mdiv, A, A + 4, 1, &r,
               (struct expect){r.r[AX], NMP_ACC_LOAD, 4, NMP_RULE_SKID});
    /* mov (%rax),%rcx; div %rcx; add $1,%rdx */
    static const uint8_t idiv[] = {0x48, 0x8b, 0x08, 0x48, 0xf7, 0xf1, 0x48, 0x83, 0xc2, 0x01, 0xc3};
    check_case(d, "past an integer divide", idiv, sizeof idiv, A, A + 6, 1, &r,
               (struct expect){0, NMP_ACC_NONE, 0, NMP_RULE_DIVIDE});
    /* movsd (%rax),%xmm0; sqrtsd %xmm0,%xmm0; vdivsd %xmm2,%xmm1,%xmm3; addsd %xmm0,%xmm3 */
    static const uint8_t roots[] = {0xf2, 0x0f, 0x10, 0x00, 0xf2, 0x0f, 0x51, 0xc0, 0xc5, 0xf3,
                                    0x5e, 0xda, 0xf2, 0x0f, 0x58, 0xd8, 0xc3};
    check_case(d, "past a square root", roots, sizeof roots, A, A + 8, 1, &r,
               (struct expect){0, NMP_ACC_NONE, 0, NMP_RULE_DIVIDE});
    check_case(d, "past an AVX divide", roots, sizeof roots, A, A + 12, 1, &r,
               (struct expect){0, NMP_ACC_NONE, 0, NMP_RULE_DIVIDE});
    /* the same without arithmetic of that kind: mulss, an estimate (rcpss) */
    static const uint8_t fmul[] = {0xf3, 0x0f, 0x10, 0x00, 0xf3, 0x0f, 0x53, 0xc8,
                                   0xf3, 0x0f, 0x59, 0xc1, 0xf3, 0x0f, 0x58, 0xd0, 0xc3};
    check_case(d, "past a reciprocal estimate", fmul, sizeof fmul, A, A + 12, 1, &r,
               (struct expect){r.r[AX], NMP_ACC_LOAD, 4, NMP_RULE_SKID});
}

static void test_strings(struct nmp_decoder *d)
{
    struct nmp_regs r;
    memset(&r, 0, sizeof r);
    r.r[DI] = 0x7f0000500000;
    r.r[SI] = 0x7f0000510000;
    r.r[BX] = 0x7f0000520000;
    check_case(d, "rep stosq", gcc_rep_stosq, sizeof gcc_rep_stosq, 0x28f, 0x299, 1, &r,
               (struct expect){r.r[DI], NMP_ACC_STORE, 8, NMP_RULE_AT_IP});
    check_case(d, "after rep stosq", gcc_rep_stosq, sizeof gcc_rep_stosq, 0x28f, 0x29c, 1, &r,
               (struct expect){r.r[DI] - 8, NMP_ACC_STORE, 8, NMP_RULE_SKID});
    r.r[FLAGS] = 0x602; /* DF: the string ran downwards */
    check_case(d, "after rep stosq, DF set", gcc_rep_stosq, sizeof gcc_rep_stosq, 0x28f, 0x29c, 1,
               &r, (struct expect){r.r[DI] + 8, NMP_ACC_STORE, 8, NMP_RULE_SKID});
    r.r[FLAGS] = 0x202;
    /* a copy is charged to its source */
    check_case(d, "rep movsq", gcc_rep_movsq, sizeof gcc_rep_movsq, 0x315, 0x330, 1, &r,
               (struct expect){r.r[SI], NMP_ACC_LOAD, 8, NMP_RULE_AT_IP});
    check_case(d, "after rep movsq", gcc_rep_movsq, sizeof gcc_rep_movsq, 0x315, 0x333, 1, &r,
               (struct expect){r.r[SI] - 8, NMP_ACC_LOAD, 8, NMP_RULE_SKID});
    /* mov (%rbx),%rax; rep movsb <- ip: the rep is the access, not the mov before it */
    static const uint8_t pair[] = {0x48, 0x8b, 0x03, 0xf3, 0xa4, 0xc3};
    check_case(d, "rep movsb after a load", pair, sizeof pair, A, A + 3, 1, &r,
               (struct expect){r.r[SI], NMP_ACC_LOAD, 1, NMP_RULE_AT_IP});
}

/* A load whose statement stores the same address back (x += y on a double: load, add,
 * store) is a read-modify-write; not when the address register changes in between or
 * the store goes elsewhere. */
static void test_stored_back(struct nmp_decoder *d)
{
    struct nmp_regs r;
    memset(&r, 0, sizeof r);
    r.r[AX] = 3;
    r.r[BX] = 0x7f0000700000;
    /* movsd slot(,%rax,8),%xmm1; addsd %xmm0,%xmm1; movsd %xmm1,slot(,%rax,8); ret */
    static const uint8_t add_back[] = {0xf2, 0x0f, 0x10, 0x0c, 0xc5, 0x00, 0x10, 0x40, 0x00,
                                       0xf2, 0x0f, 0x58, 0xc8,
                                       0xf2, 0x0f, 0x11, 0x0c, 0xc5, 0x00, 0x10, 0x40, 0x00,
                                       0xc3};
    check_case(d, "load, add, store back", add_back, sizeof add_back, A, A, 1, &r,
               (struct expect){0x401000 + 3 * 8, NMP_ACC_RMW, 8, NMP_RULE_AT_IP});
    /* addsd (%rbx),%xmm0; movsd %xmm0,(%rbx); ret */
    static const uint8_t op_back[] = {0xf2, 0x0f, 0x58, 0x03, 0xf2, 0x0f, 0x11, 0x03, 0xc3};
    check_case(d, "addsd mem, store back", op_back, sizeof op_back, A, A, 1, &r,
               (struct expect){r.r[BX], NMP_ACC_RMW, 8, NMP_RULE_AT_IP});
    /* movsd (%rbx),%xmm1; add $8,%rbx; movsd %xmm1,(%rbx): another address */
    static const uint8_t moved[] = {0xf2, 0x0f, 0x10, 0x0b, 0x48, 0x83, 0xc3, 0x08,
                                    0xf2, 0x0f, 0x11, 0x0b, 0xc3};
    check_case(d, "store after the base moved", moved, sizeof moved, A, A, 1, &r,
               (struct expect){r.r[BX], NMP_ACC_LOAD, 8, NMP_RULE_AT_IP});
    /* movsd (%rbx),%xmm1; movsd %xmm1,8(%rbx): a copy to the next element */
    static const uint8_t copy[] = {0xf2, 0x0f, 0x10, 0x0b, 0xf2, 0x0f, 0x11, 0x4b, 0x08, 0xc3};
    check_case(d, "store to the next element", copy, sizeof copy, A, A, 1, &r,
               (struct expect){r.r[BX], NMP_ACC_LOAD, 8, NMP_RULE_AT_IP});
    /* movsd (%rbx),%xmm1; ret; movsd %xmm1,(%rbx): not on the same straight line */
    static const uint8_t apart[] = {0xf2, 0x0f, 0x10, 0x0b, 0xc3, 0xf2, 0x0f, 0x11, 0x0b, 0xc3};
    check_case(d, "store after a return", apart, sizeof apart, A, A, 1, &r,
               (struct expect){r.r[BX], NMP_ACC_LOAD, 8, NMP_RULE_AT_IP});
}

/* AVX-512: masked, compressing, narrowing, broadcast; gathers and scatters. */
static void test_vector(struct nmp_decoder *d)
{
    struct nmp_regs r;
    memset(&r, 0, sizeof r);
    r.r[AX] = 0x40;
    r.r[SI] = 0x7f0000600000;
    r.r[DI] = 0x7f0000610000;
    /* vmovupd %zmm0,(%rdi,%rax,1){%k1}: gcc -O3 -march=native, a loop epilogue */
    static const uint8_t mst[] = {0x62, 0xf1, 0xfd, 0x49, 0x11, 0x04, 0x07};
    check_case(d, "masked store", mst, sizeof mst, A, A, 1, &r,
               (struct expect){r.r[DI] + r.r[AX], NMP_ACC_STORE, 64, NMP_RULE_AT_IP});
    /* vmovupd (%rsi),%zmm0{%k1}{z} */
    static const uint8_t mld[] = {0x62, 0xf1, 0xfd, 0xc9, 0x10, 0x06};
    check_case(d, "masked load", mld, sizeof mld, A, A, 1, &r,
               (struct expect){r.r[SI], NMP_ACC_LOAD, 64, NMP_RULE_AT_IP});
    /* vexpandpd (%rsi),%zmm0{%k1}{z} */
    static const uint8_t exp[] = {0x62, 0xf2, 0xfd, 0xc9, 0x88, 0x06};
    check_case(d, "expand load", exp, sizeof exp, A, A, 1, &r,
               (struct expect){r.r[SI], NMP_ACC_LOAD, 64, NMP_RULE_AT_IP});
    /* vcompresspd %zmm0,(%rdi){%k1} */
    static const uint8_t cmp[] = {0x62, 0xf2, 0xfd, 0x49, 0x8a, 0x07};
    check_case(d, "compress store", cmp, sizeof cmp, A, A, 1, &r,
               (struct expect){r.r[DI], NMP_ACC_STORE, 64, NMP_RULE_AT_IP});
    static const uint8_t nar[] = {0x62, 0xf2, 0x7e, 0x48, 0x35, 0x07}; /* vpmovqd %zmm0,(%rdi) */
    check_case(d, "narrowing store", nar, sizeof nar, A, A, 1, &r,
               (struct expect){r.r[DI], NMP_ACC_STORE, 32, NMP_RULE_AT_IP});
    static const uint8_t bc[] = {0x62, 0xf2, 0xf5, 0x58, 0xb8, 0x10}; /* vfmadd231pd (%rax){1to8} */
    r.r[AX] = 0x7f0000620000;
    check_case(d, "broadcast load", bc, sizeof bc, A, A, 1, &r,
               (struct expect){r.r[AX], NMP_ACC_LOAD, 8, NMP_RULE_AT_IP});
    /* one address per lane, from a vector register perf does not sample: the base
     * register's address, in the array the lanes index (rule vsib_base) */
    static const uint8_t gat[] = {0x62, 0xf2, 0xfd, 0x4a, 0x92, 0x14, 0xc6}; /* gcc: vgatherdpd */
    check_case(d, "gather", gat, sizeof gat, A, A, 1, &r,
               (struct expect){r.r[SI], NMP_ACC_LOAD, 8, NMP_RULE_VSIB_BASE});
    static const uint8_t sca[] = {0x62, 0xf2, 0xfd, 0x4a, 0xa2, 0x24, 0xc7}; /* gcc: vscatterdpd */
    check_case(d, "scatter", sca, sizeof sca, A, A, 1, &r,
               (struct expect){r.r[DI], NMP_ACC_STORE, 8, NMP_RULE_VSIB_BASE});
    /* vpscatterdd %zmm1,(%rdi,%zmm0,4){%k1}: Capstone 4 reads its index as rax */
    static const uint8_t sc2[] = {0x62, 0xf2, 0x7d, 0x49, 0xa0, 0x0c, 0x87};
    check_case(d, "scatter, zmm index", sc2, sizeof sc2, A, A, 1, &r,
               (struct expect){r.r[DI], NMP_ACC_STORE, 4, NMP_RULE_VSIB_BASE});
    /* vgatherdpd %ymm6,0x4040(,%xmm0,8),%ymm1: no base register, a static array's
     * address in the displacement */
    static const uint8_t gst[] = {0xc4, 0xe2, 0xcd, 0x92, 0x0c, 0xc5, 0x40, 0x40, 0x00, 0x00};
    check_case(d, "gather, static array", gst, sizeof gst, A, A, 1, &r,
               (struct expect){0x4040, NMP_ACC_LOAD, 8, NMP_RULE_VSIB_BASE});
    /* vgatherdpd %ymm6,(%rsi,%xmm0,8),%ymm1; add $0x20,%rsi <- ip: the base stepped
     * since, undone (rule vsib_base, not skid) */
    static const uint8_t gsk[] = {0xc4, 0xe2, 0xcd, 0x92, 0x0c, 0xc6, 0x48, 0x83, 0xc6, 0x20,
                                  0x48, 0x83, 0xc1, 0x01};
    check_case(d, "gather, skid", gsk, sizeof gsk, A, A + 10, 1, &r,
               (struct expect){r.r[SI] - 0x20, NMP_ACC_LOAD, 8, NMP_RULE_VSIB_BASE});
    /* EVEX-encoded scalar forms (xmm16-31) that gcc -O3 -march=znver4 emits and Capstone
     * 4.0.2 does not decode (CloverLeaf's kernels): Zydis does */
    r.r[R14] = 0x7f0000630000;
    r.r[CX] = 0x88;
    static const uint8_t fma[] = {0x62, 0xd2, 0x9d, 0x00, 0x99, 0x0c, 0x0e}; /* vfmadd132sd (%r14,%rcx,1),%xmm28,%xmm1 */
    check_case(d, "evex scalar fma", fma, sizeof fma, A, A, 1, &r,
               (struct expect){r.r[R14] + r.r[CX], NMP_ACC_LOAD, 8, NMP_RULE_AT_IP});
    /* vmovsd (%r9,%r14,8),%xmm25; vsubsd (%r9,%r15,8),%xmm25,%xmm14; add $0x1,%rax: a
     * sample on the add is the subtraction's (rule skid), decoded in step */
    r.r[R9] = 0x7f0000640000;
    r.r[R14] = 3;
    r.r[R15] = 5;
    static const uint8_t sub[] = {0x62, 0x01, 0xff, 0x08, 0x10, 0x0c, 0xf1, 0x62, 0x11, 0xb7, 0x00,
                                  0x5c, 0x34, 0xf9, 0x48, 0x83, 0xc0, 0x01};
    /* on the subtraction: the load before it, the first of two in a row (rule skid) */
    check_case(d, "evex scalar load before", sub, sizeof sub, A, A + 7, 1, &r,
               (struct expect){r.r[R9] + 8 * r.r[R14], NMP_ACC_LOAD, 8, NMP_RULE_SKID});
    check_case(d, "evex scalar sub, skid", sub, sizeof sub, A, A + 14, 1, &r,
               (struct expect){r.r[R9] + 8 * r.r[R15], NMP_ACC_LOAD, 8, NMP_RULE_SKID});
    /* the same sample with the walk started 3 bytes into the first instruction: the
     * decoder re-synchronises through the Zydis-only instructions */
    check_case(d, "evex scalar sub, resync", sub, sizeof sub, A, A + 14, 0, &r,
               (struct expect){r.r[R9] + 8 * r.r[R15], NMP_ACC_LOAD, 8, NMP_RULE_SKID});
    /* EVEX forms whose second source is xmm16-31, which Capstone 4 decodes with a vector
     * index (vminsd [r14 + xmm0*8], xmm9, xmm19): no gathers, addressed as any load */
    r.r[R14] = 0x7f0000650000;
    r.r[AX] = 0x21;
    static const uint8_t mn[] = {0x62, 0xc1, 0xb7, 0x00, 0x5d, 0x1c, 0xc6}; /* vminsd (%r14,%rax,8),%xmm25,%xmm19 */
    check_case(d, "evex V' is no vsib index", mn, sizeof mn, A, A, 1, &r,
               (struct expect){r.r[R14] + 8 * r.r[AX], NMP_ACC_LOAD, 8, NMP_RULE_AT_IP});
    /* the same, then vcomisd %xmm3,%xmm23: a sample there is the minimum's load */
    static const uint8_t mn2[] = {0x62, 0xc1, 0xb7, 0x00, 0x5d, 0x1c, 0xc6, 0x62, 0xe1, 0xfd, 0x08,
                                  0x2f, 0xfb};
    check_case(d, "evex V' is no vsib index, skid", mn2, sizeof mn2, A, A + 7, 1, &r,
               (struct expect){r.r[R14] + 8 * r.r[AX], NMP_ACC_LOAD, 8, NMP_RULE_SKID});
    r.r[AX] = 0x7f0000001000;
    /* vgatherpf0dps (%rax,%zmm1,4){%k1}: a prefetch */
    static const uint8_t pf[] = {0x62, 0xf2, 0x7d, 0x49, 0xc6, 0x0c, 0x88};
    check_case(d, "gather prefetch", pf, sizeof pf, A, A, 1, &r,
               (struct expect){0, 0, 0, NMP_RULE_NO_MEM});
}


/* A function with a load followed by an ALU instruction, for the ELF symbol path. */
__asm__(".text\n"
        ".globl nmp_test_fn\n"
        ".type nmp_test_fn,@function\n"
        "nmp_test_fn:\n"
        "  mov (%rdi,%rsi,8), %rax\n"
        "  add %rax, %rcx\n"
        "  ret\n"
        ".size nmp_test_fn, .-nmp_test_fn\n");
void nmp_test_fn(void);

int main(void)
{
    struct nmp_decoder *d = nmp_decoder_new();
    if (!d) {
        fprintf(stderr, "cannot create decoder\n");
        return 1;
    }
    struct nmp_regs r;
    memset(&r, 0, sizeof r);
    r.r[AX] = 0x7f0000001000;
    r.r[BX] = 0x7f0000002000;
    r.r[CX] = 0x7f0000003000;
    r.r[DX] = 5;
    r.r[SI] = 3;
    r.r[DI] = 0x7f0000004000;
    r.r[R8] = 0x10;

    /* PERF_SAMPLE_REGS_USER with mask 0xff0fff: 20 values, AX..SS then R8..R15 */
    {
        uint64_t vals[20];
        for (int k = 0; k < 20; k++)
            vals[k] = 100 + (uint64_t)k;
        struct nmp_regs u;
        nmp_regs_unpack(NMP_REGS_MASK, vals, 20, &u);
        CHECK_MSG(u.r[AX] == 100 && u.r[SP] == 107 && u.r[NMP_REG_IP] == 108 && u.r[11] == 111 &&
                  u.r[12] == 0 && u.r[15] == 0 && u.r[R8] == 112 && u.r[23] == 119,
              "regs unpack: r8=%" PRIu64 " r15=%" PRIu64, u.r[R8], u.r[23]);
    }

    /* mov rax, [rbx+8] */
    static const uint8_t load[] = {0x48, 0x8b, 0x43, 0x08};
    check_case(d, "mov load", load, sizeof load, A, A, 1, &r,
               (struct expect){r.r[BX] + 8, NMP_ACC_LOAD, 8, NMP_RULE_AT_IP});

    /* mov [rcx], edx */
    static const uint8_t store[] = {0x89, 0x11};
    check_case(d, "mov store", store, sizeof store, A, A, 1, &r,
               (struct expect){r.r[CX], NMP_ACC_STORE, 4, NMP_RULE_AT_IP});

    /* add [rdi+rsi*4+0x10], eax */
    static const uint8_t rmw[] = {0x01, 0x44, 0xb7, 0x10};
    check_case(d, "add rmw", rmw, sizeof rmw, A, A, 1, &r,
               (struct expect){r.r[DI] + 3 * 4 + 0x10, NMP_ACC_RMW, 4, NMP_RULE_AT_IP});

    /* OpenMP barrier spin (libgomp): pause; add rax,1; cmp rax,rsi -- sampled on the
     * pause or just after it, the thread is waiting: rule spin, no address */
    static const uint8_t spin[] = {0xf3, 0x90, 0x48, 0x83, 0xc0, 0x01, 0x48, 0x39, 0xf0};
    check_case(d, "spin after pause", spin, sizeof spin, A, A + 2, 1, &r,
               (struct expect){0, NMP_ACC_NONE, 0, NMP_RULE_SPIN});
    check_case(d, "spin at pause", spin, sizeof spin, A, A, 1, &r,
               (struct expect){0, NMP_ACC_NONE, 0, NMP_RULE_SPIN});
    /* mov ecx,[rdi]; pause; add rax,1: the pause between them means waiting */
    static const uint8_t spin2[] = {0x8b, 0x0f, 0xf3, 0x90, 0x48, 0x83, 0xc0, 0x01};
    check_case(d, "load then pause", spin2, sizeof spin2, A, A + 4, 1, &r,
               (struct expect){0, NMP_ACC_NONE, 0, NMP_RULE_SPIN});

    /* libgomp's barrier wait (Debian 12, libgomp.so.1 at 0x1f620): pause; add $1,%rax;
     * cmp %rsi,%rax; je out; mov (%rdi),%ecx; cmp %ecx,%edx; je back to the pause; ...
     * Sampled on the load of the barrier word or after it, the thread is waiting too */
    static const uint8_t gomp_wait[] = {0xf3, 0x90, 0x48, 0x83, 0xc0, 0x01, 0x48, 0x39, 0xf0,
                                        0x74, 0x15, 0x8b, 0x0f, 0x39, 0xca, 0x74, 0xef, 0x8b,
                                        0x07, 0x39, 0xd0, 0x74, 0xc9, 0xc3};
    check_case(d, "spin: the waited-on load", gomp_wait, sizeof gomp_wait, A, A + 0xb, 1, &r,
               (struct expect){0, NMP_ACC_NONE, 0, NMP_RULE_SPIN});
    check_case(d, "spin: after the waited-on load", gomp_wait, sizeof gomp_wait, A, A + 0xd, 1,
               &r, (struct expect){0, NMP_ACC_NONE, 0, NMP_RULE_SPIN});
    /* the same loop without its pause is a loop reading memory: mov (%rdi),%ecx;
     * cmp %ecx,%edx; je back */
    static const uint8_t poll[] = {0x48, 0x83, 0xc0, 0x01, 0x8b, 0x0f, 0x39, 0xca, 0x74, 0xf6, 0xc3};
    check_case(d, "a loop without pause reads", poll, sizeof poll, A, A + 4, 1, &r,
               (struct expect){r.r[DI], NMP_ACC_LOAD, 4, NMP_RULE_AT_IP});

    /* libomp's __kmp_hardware_timestamp, called in its barrier wait loops: rdtsc; shl
     * $0x20,%rdx <- ip; or %rdx,%rax; ret */
    static const uint8_t tsc[] = {0x0f, 0x31, 0x48, 0xc1, 0xe2, 0x20, 0x48, 0x09, 0xd0, 0xc3};
    check_case(d, "spin: timestamp", tsc, sizeof tsc, A, A + 2, 1, &r,
               (struct expect){0, NMP_ACC_NONE, 0, NMP_RULE_SPIN});

    /* mov rax, [rip+0x100] */
    static const uint8_t riprel[] = {0x48, 0x8b, 0x05, 0x00, 0x01, 0x00, 0x00};
    check_case(d, "rip-relative", riprel, sizeof riprel, A, A, 1, &r,
               (struct expect){A + 7 + 0x100, NMP_ACC_LOAD, 8, NMP_RULE_AT_IP});

    /* mov eax, [rbx+rdx*8-0x20] */
    static const uint8_t sib[] = {0x8b, 0x44, 0xd3, 0xe0};
    check_case(d, "sib", sib, sizeof sib, A, A, 1, &r,
               (struct expect){r.r[BX] + 5 * 8 - 0x20, NMP_ACC_LOAD, 4, NMP_RULE_AT_IP});

    /* movsd xmm0, [r8+rsi*8] (SSE load, 8 bytes) */
    static const uint8_t sse[] = {0xf2, 0x41, 0x0f, 0x10, 0x04, 0xf0};
    r.r[R8] = 0x7f0000005000;
    check_case(d, "sse load r8", sse, sizeof sse, A, A, 1, &r,
               (struct expect){r.r[R8] + 3 * 8, NMP_ACC_LOAD, 8, NMP_RULE_AT_IP});

    /* mov rax, fs:[0x28]: static TLS, the offset from the thread pointer (which the
     * collector adds, records.c) */
    static const uint8_t fs[] = {0x64, 0x48, 0x8b, 0x04, 0x25, 0x28, 0x00, 0x00, 0x00};
    check_case(d, "fs segment", fs, sizeof fs, A, A, 1, &r,
               (struct expect){0x28, NMP_ACC_LOAD, 8, NMP_RULE_AT_IP});
    struct nmp_memop tm;
    nmp_decode_code(d, fs, sizeof fs, A, A, 1, &tm);
    CHECK_MSG(tm.tls == 1, "fs segment: tls %d", tm.tls);
    /* movsd xmm1, fs:[rdi+rdx*8] (an OpenMP threadprivate array, gcc -O2) */
    static const uint8_t fs_sib[] = {0x64, 0xf2, 0x0f, 0x10, 0x0c, 0xd7};
    r.r[DI] = (uint64_t)-0x186a00;
    check_case(d, "fs segment, indexed", fs_sib, sizeof fs_sib, A, A, 1, &r,
               (struct expect){(uint64_t)-0x186a00 + r.r[DX] * 8, NMP_ACC_LOAD, 8, NMP_RULE_AT_IP});
    /* mov rax, gs:[0x28]: not a user-space TLS base on x86-64 Linux */
    static const uint8_t gs[] = {0x65, 0x48, 0x8b, 0x04, 0x25, 0x28, 0x00, 0x00, 0x00};
    check_case(d, "gs segment", gs, sizeof gs, A, A, 1, &r,
               (struct expect){0, NMP_ACC_LOAD, 8, NMP_RULE_SEGMENT});
    nmp_decode_code(d, gs, sizeof gs, A, A, 1, &tm);
    CHECK_MSG(tm.tls == 0, "gs segment: tls %d", tm.tls);

    /* vpgatherdd ymm0, [rax+ymm1*4], ymm2 */
    static const uint8_t vsib[] = {0xc4, 0xe2, 0x6d, 0x90, 0x04, 0x88};
    check_case(d, "vsib gather", vsib, sizeof vsib, A, A, 1, &r,
               (struct expect){r.r[AX], NMP_ACC_LOAD, 4, NMP_RULE_VSIB_BASE});

    /* skid: mov rax, [rsi+rdx*8]; add rcx, rax  <- ip */
    static const uint8_t skid[] = {0x48, 0x8b, 0x04, 0xd6, 0x48, 0x01, 0xc1};
    check_case(d, "skid", skid, sizeof skid, A, A + 4, 1, &r,
               (struct expect){r.r[SI] + r.r[DX] * 8, NMP_ACC_LOAD, 8, NMP_RULE_SKID});

    /* two accesses in a row: the one that just retired is charged.
     * movsd xmm0,[rdi+rdx*8]; addsd xmm0,[rsi+rdx*8] <- ip */
    static const uint8_t pair[] = {0xf2, 0x0f, 0x10, 0x04, 0xd7, 0xf2, 0x0f, 0x58, 0x04, 0xd6};
    check_case(d, "retired access", pair, sizeof pair, A, A + 5, 1, &r,
               (struct expect){r.r[DI] + r.r[DX] * 8, NMP_ACC_LOAD, 8, NMP_RULE_SKID});
    /* ... unless its address is gone: mov rax,[rax]; mov rcx,[rbx] <- ip */
    static const uint8_t pairc[] = {0x48, 0x8b, 0x00, 0x48, 0x8b, 0x0b};
    check_case(d, "retired access clobbered", pairc, sizeof pairc, A, A + 3, 1, &r,
               (struct expect){r.r[BX], NMP_ACC_LOAD, 8, NMP_RULE_AT_IP});

    /* skid across two ALU instructions: mov rax,[rbx]; add rcx,rax; imul rdx,rcx <- ip */
    static const uint8_t skid2[] = {0x48, 0x8b, 0x03, 0x48, 0x01, 0xc1, 0x48, 0x0f, 0xaf, 0xd1};
    check_case(d, "skid 2", skid2, sizeof skid2, A, A + 6, 1, &r,
               (struct expect){r.r[BX], NMP_ACC_LOAD, 8, NMP_RULE_SKID});

    /* clobbered: mov rax, [rax]; add rcx, rax <- ip */
    static const uint8_t clob[] = {0x48, 0x8b, 0x00, 0x48, 0x01, 0xc1};
    check_case(d, "clobbered self", clob, sizeof clob, A, A + 3, 1, &r,
               (struct expect){0, NMP_ACC_LOAD, 8, NMP_RULE_CLOBBERED});

    /* clobbered in between: mov rax, [rsi]; mov rsi, rbx; add rcx, rax <- ip */
    static const uint8_t clob2[] = {0x48, 0x8b, 0x06, 0x48, 0x89, 0xde, 0x48, 0x01, 0xc1};
    check_case(d, "clobbered between", clob2, sizeof clob2, A, A + 6, 1, &r,
               (struct expect){0, NMP_ACC_LOAD, 8, NMP_RULE_CLOBBERED});

    /* an index loaded over (the gather x = lut[i & mask]): rebuilt from what computed it.
     * mov rdx,rax; and edx,0x3fffff; mov edx,[r10+rdx*4]; mulsd xmm0,xmm2 <- ip */
    {
        struct nmp_regs g = r;
        g.r[18] = 0x7f0000100000; /* r10 */
        g.r[DX] = 77;             /* what the load put in edx */
        static const uint8_t gat[] = {0x48, 0x89, 0xc2, 0x81, 0xe2, 0xff, 0xff, 0x3f, 0x00,
                                      0x41, 0x8b, 0x14, 0x92, 0xf2, 0x0f, 0x59, 0xc2};
        check_case(d, "rebuilt masked index", gat, sizeof gat, A, A + 13, 1, &g,
                   (struct expect){g.r[18] + (g.r[AX] & 0x3fffff) * 4, NMP_ACC_LOAD, 4,
                                   NMP_RULE_SKID});
        /* the same, ip on the next access: the retired load is charged, rebuilt */
        static const uint8_t gat2[] = {0x48, 0x89, 0xc2, 0x81, 0xe2, 0xff, 0xff, 0x3f, 0x00,
                                       0x41, 0x8b, 0x14, 0x92, 0xf2, 0x0f, 0x10, 0x0e};
        check_case(d, "rebuilt masked index, next access", gat2, sizeof gat2, A, A + 13, 1, &g,
                   (struct expect){g.r[18] + (g.r[AX] & 0x3fffff) * 4, NMP_ACC_LOAD, 4,
                                   NMP_RULE_SKID});
        /* a branch to the load skips the mask: the index may come from the other path
         * test ecx,ecx; jne L; mov rdx,rax; and edx,0x3fffff; L: mov edx,[r10+rdx*4];
         * mulsd <- ip */
        static const uint8_t gatj[] = {0x85, 0xc9, 0x75, 0x09, 0x48, 0x89, 0xc2, 0x81, 0xe2, 0xff,
                                       0xff, 0x3f, 0x00, 0x41, 0x8b, 0x14, 0x92, 0xf2, 0x0f, 0x59,
                                       0xc2};
        check_case(d, "no rebuild across a join", gatj, sizeof gatj, A, A + 17, 1, &g,
                   (struct expect){0, NMP_ACC_LOAD, 4, NMP_RULE_CLOBBERED});
        /* ... but an unconditional jmp is the only way to its target: mov rdx,rax; and
         * edx,0x3fffff; jmp +0; mov edx,[r10+rdx*4]; mulsd <- ip */
        static const uint8_t gatjmp[] = {0x48, 0x89, 0xc2, 0x81, 0xe2, 0xff, 0xff, 0x3f, 0x00,
                                         0xeb, 0x00, 0x41, 0x8b, 0x14, 0x92, 0xf2, 0x0f, 0x59,
                                         0xc2};
        check_case(d, "rebuild across a jmp", gatjmp, sizeof gatjmp, A, A + 15, 1, &g,
                   (struct expect){g.r[18] + (g.r[AX] & 0x3fffff) * 4, NMP_ACC_LOAD, 4,
                                   NMP_RULE_SKID});
        /* lea rdx,[rax+rbx+8]; mov rdx,[rdx]; add rcx,rdx <- ip */
        static const uint8_t lea[] = {0x48, 0x8d, 0x54, 0x18, 0x08, 0x48, 0x8b, 0x12,
                                      0x48, 0x01, 0xd1};
        check_case(d, "rebuilt lea", lea, sizeof lea, A, A + 8, 1, &g,
                   (struct expect){g.r[AX] + g.r[BX] + 8, NMP_ACC_LOAD, 8, NMP_RULE_SKID});
        /* movsxd rdx,eax (negative); mov rdx,[rdi+rdx*8]; add rcx,rdx <- ip */
        g.r[AX] = 0x12345678fffffff0ULL;
        static const uint8_t sx[] = {0x48, 0x63, 0xd0, 0x48, 0x8b, 0x14, 0xd7, 0x48, 0x01, 0xd1};
        check_case(d, "rebuilt movsxd", sx, sizeof sx, A, A + 7, 1, &g,
                   (struct expect){g.r[DI] - 16 * 8, NMP_ACC_LOAD, 8, NMP_RULE_SKID});
        /* an index that was itself loaded cannot be rebuilt:
         * movsxd rdx,[rsi]; mov rdx,[rdi+rdx*8]; add rcx,rdx <- ip */
        static const uint8_t ld[] = {0x48, 0x63, 0x16, 0x48, 0x8b, 0x14, 0xd7, 0x48, 0x01, 0xd1};
        check_case(d, "loaded index stays clobbered", ld, sizeof ld, A, A + 7, 1, &g,
                   (struct expect){0, NMP_ACC_LOAD, 8, NMP_RULE_CLOBBERED});
    }

    /* a push steps rsp by -8: mov rax,[rsp+8]; push rbx; add rcx,rax <- ip */
    static const uint8_t pushc[] = {0x48, 0x8b, 0x44, 0x24, 0x08, 0x53, 0x48, 0x01, 0xc1};
    check_case(d, "a push steps rsp", pushc, sizeof pushc, A, A + 6, 1, &r,
               (struct expect){r.r[SP] + 8 + 8, NMP_ACC_LOAD, 8, NMP_RULE_SKID});

    /* a constant step of the index is undone: movsd [rcx+rdx*8],xmm0; add rdx,1;
     * cmp rax,rdx <- ip  (the address used rdx-1) */
    static const uint8_t step[] = {0xf2, 0x0f, 0x11, 0x04, 0xd1, 0x48, 0x83, 0xc2, 0x01,
                                   0x48, 0x39, 0xd0};
    check_case(d, "index step undone", step, sizeof step, A, A + 9, 1, &r,
               (struct expect){r.r[CX] + (r.r[DX] - 1) * 8, NMP_ACC_STORE, 8, NMP_RULE_SKID});

    /* pointer bump: mov rax,[rsi]; add rsi,8; lea rsi,[rsi+16]; inc rsi; add rcx,rax <- ip */
    static const uint8_t bump[] = {0x48, 0x8b, 0x06, 0x48, 0x83, 0xc6, 0x08, 0x48, 0x8d,
                                   0x76, 0x10, 0x48, 0xff, 0xc6, 0x48, 0x01, 0xc1};
    check_case(d, "pointer bumps undone", bump, sizeof bump, A, A + 14, 1, &r,
               (struct expect){r.r[SI] - 8 - 16 - 1, NMP_ACC_LOAD, 8, NMP_RULE_SKID});

    /* a 32-bit step (add esi,8 zero-extends) is not undone */
    static const uint8_t step32[] = {0x48, 0x8b, 0x06, 0x83, 0xc6, 0x08, 0x48, 0x01, 0xc1};
    check_case(d, "32-bit step clobbers", step32, sizeof step32, A, A + 6, 1, &r,
               (struct expect){0, NMP_ACC_LOAD, 8, NMP_RULE_CLOBBERED});

    /* a jmp is the only way to its target: mov rax,[rsi]; jmp +0; add rcx,rax <- ip */
    static const uint8_t cf[] = {0x48, 0x8b, 0x06, 0xeb, 0x00, 0x48, 0x01, 0xc1};
    check_case(d, "across a jmp", cf, sizeof cf, A, A + 5, 1, &r,
               (struct expect){r.r[SI], NMP_ACC_LOAD, 8, NMP_RULE_SKID_PATH});
    /* code nothing reaches (after a jmp, no branch to it): mov rax,[rsi]; jmp L;
     * add rcx,rax <- ip; L: ret */
    static const uint8_t cf2[] = {0x48, 0x8b, 0x06, 0xeb, 0x03, 0x48, 0x01, 0xc1, 0xc3};
    check_case(d, "unreachable after jmp", cf2, sizeof cf2, A, A + 5, 1, &r,
               (struct expect){0, 0, 0, NMP_RULE_NO_MEM});
    /* the sample follows a call: mov rax,[rsi]; call f; add rcx,rax <- ip: what ran
     * last was f's ret, reading the return address (test_skid.c, test_stack) */
    static const uint8_t call[] = {0x48, 0x8b, 0x06, 0xe8, 0x00, 0x00,
                                   0x00, 0x00, 0x48, 0x01, 0xc1};
    check_case(d, "after a call", call, sizeof call, A, A + 8, 1, &r,
               (struct expect){r.r[SP] - 8, NMP_ACC_LOAD, 8, NMP_RULE_SKID_PATH});

    /* branch target between: mov rax,[rsi]; L: add rcx,rax <- ip; jne L */
    static const uint8_t tgt[] = {0x48, 0x8b, 0x06, 0x48, 0x01, 0xc1, 0x75, 0xfb};
    check_case(d, "branch target", tgt, sizeof tgt, A, A + 3, 1, &r,
               (struct expect){0, 0, 0, NMP_RULE_NO_MEM});

    /* lea is not a memory access: lea rax,[rbx+8]; add rcx,rax <- ip */
    static const uint8_t lea[] = {0x48, 0x8d, 0x43, 0x08, 0x48, 0x01, 0xc1};
    check_case(d, "lea", lea, sizeof lea, A, A + 4, 1, &r,
               (struct expect){0, 0, 0, NMP_RULE_NO_MEM});

    /* cmp [rbx+8], rax reads */
    static const uint8_t cmp[] = {0x48, 0x39, 0x43, 0x08};
    check_case(d, "cmp read", cmp, sizeof cmp, A, A, 1, &r,
               (struct expect){r.r[BX] + 8, NMP_ACC_LOAD, 8, NMP_RULE_AT_IP});

    /* access-flag corrections over Capstone 4 */
    static const uint8_t vstore[] = {0xc5, 0xfd, 0x11, 0x1a}; /* vmovupd [rdx], ymm3 */
    check_case(d, "avx store", vstore, sizeof vstore, A, A, 1, &r,
               (struct expect){r.r[DX], NMP_ACC_STORE, 32, NMP_RULE_AT_IP});
    static const uint8_t cas[] = {0xf0, 0x0f, 0xb1, 0x0b}; /* lock cmpxchg [rbx], ecx */
    check_case(d, "lock cmpxchg", cas, sizeof cas, A, A, 1, &r,
               (struct expect){r.r[BX], NMP_ACC_RMW, 4, NMP_RULE_AT_IP});
    static const uint8_t tst[] = {0xf6, 0x07, 0x01}; /* test byte [rdi], 1 */
    check_case(d, "test", tst, sizeof tst, A, A, 1, &r,
               (struct expect){r.r[DI], NMP_ACC_LOAD, 1, NMP_RULE_AT_IP});
    static const uint8_t nti[] = {0x48, 0x0f, 0xc3, 0x08}; /* movnti [rax], rcx */
    check_case(d, "movnti", nti, sizeof nti, A, A, 1, &r,
               (struct expect){r.r[AX], NMP_ACC_STORE, 8, NMP_RULE_AT_IP});

    /* 32-bit address size: mov eax, [ebx] */
    static const uint8_t a32[] = {0x67, 0x8b, 0x03};
    check_case(d, "addr32", a32, sizeof a32, A, A, 1, &r,
               (struct expect){r.r[BX] & 0xffffffffu, NMP_ACC_LOAD, 4, NMP_RULE_AT_IP});

    /* re-synchronisation without a known start: 9 bytes of a movabs whose immediate looks
     * like instructions, then the skid case. */
    static const uint8_t resync[] = {0x48, 0xb8, 0x8b, 0x04, 0xd6, 0x48, 0x01, 0xc1, 0x90, 0x90,
                                     0x48, 0x8b, 0x04, 0xd6, 0x48, 0x01, 0xc1};
    check_case(d, "resync skid", resync, sizeof resync, A, A + 14, 0, &r,
               (struct expect){r.r[SI] + r.r[DX] * 8, NMP_ACC_LOAD, 8, NMP_RULE_SKID});

    test_register_steps(d);
    test_divides(d);
    test_strings(d);
    test_stored_back(d);
    test_vector(d);

    /* End to end through a file mapping (no ELF: re-synchronised window). */
    const char *tmp = getenv("NMP_TEST_TMP");
    char path[4096];
    snprintf(path, sizeof path, "%s/test_decode.%d.bin", tmp ? tmp : "/tmp", (int)getpid());
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    CHECK_MSG(fd >= 0, "create %s", path);
    if (fd >= 0) {
        static const uint8_t pad[4096] = {0};
        CHECK_MSG(write(fd, pad, sizeof pad) == (ssize_t)sizeof pad, "write");
        CHECK_MSG(write(fd, skid, sizeof skid) == (ssize_t)sizeof skid, "write");
        close(fd);
        const uint32_t pid = 999999;
        CHECK_MSG(nmp_decoder_mmap(d, pid, 0x500000, 8192, 0, path) == 0, "mmap");
        struct nmp_sample s = {.pid = pid, .tid = pid, .ip = 0x500000 + 4096 + 4};
        for (int k = 0; k < 2; k++) { /* second time from the cache */
            nmp_decode_sample(d, &r, &s);
            CHECK_MSG(s.rule == NMP_RULE_SKID && s.addr == r.r[SI] + r.r[DX] * 8 &&
                      s.access == NMP_ACC_LOAD && s.size == 8,
                  "file mapping: rule %d addr 0x%" PRIx64, s.rule, s.addr);
            /* the registers of the access (docs/profile-format.md): mov (%rsi,%rdx,8) four
             * bytes before ip; DWARF rsi is 4, rdx 1 (stored + 1); addr - rsi */
            CHECK_MSG(s.sp == r.r[SP] && s.bp == r.r[BP] && s.insn_off == 4 && s.base_reg == 5 &&
                      s.index_reg == 2 && s.base_off == (int32_t)(r.r[DX] * 8),
                  "file mapping: sp %" PRIx64 " insn_off %d base_reg %d index_reg %d base_off %d",
                  s.sp, s.insn_off, s.base_reg, s.index_reg, s.base_off);
        }
        /* a base register stepped after the access (mov (%rsi),%rax; add $8,%rsi; add
         * %rax,%rcx, ip on the last): base_off is from the value rsi had at the access */
        static const uint8_t stepped[] = {0x48, 0x8b, 0x06, 0x48, 0x83, 0xc6, 0x08, 0x48, 0x01, 0xc1};
        char path2[4200];
        map_code(d, pid, 0x600000, path2, sizeof path2, path, "stepped", stepped, sizeof stepped);
        struct nmp_regs rs = r;
        rs.r[SI] = 0x7f0000009008;
        rs.r[SP] = 0x7ffc00001000;
        struct nmp_sample t = {.pid = pid, .tid = pid, .ip = 0x600000 + 7};
        nmp_decode_sample(d, &rs, &t);
        CHECK_MSG(t.rule == NMP_RULE_SKID && t.addr == 0x7f0000009000 && t.insn_off == 7 &&
                      t.base_reg == 5 && t.index_reg == 0 && t.base_off == 0 &&
                      t.sp == 0x7ffc00001000,
                  "stepped base: rule %d addr 0x%" PRIx64 " insn_off %d base_reg %d base_off %d",
                  t.rule, t.addr, t.insn_off, t.base_reg, t.base_off);
        unlink(path2);
        /* base and index swapped by the compiler (scale 1): movups %xmm0,0x10(%r8,%rdi,1)
         * with an offset in r8 and the pointer in rdi, ip on the next instruction.  The
         * register the access is a small offset from is the base: rdi (DWARF 5, stored
         * 6), r8 the index (DWARF 8, stored 9), base_off r8 + 0x10 */
        static const uint8_t swapped[] = {0x41, 0x0f, 0x11, 0x44, 0x38, 0x10, 0x48, 0x01, 0xc1};
        char path3[4200];
        map_code(d, pid, 0x700000, path3, sizeof path3, path, "swapped", swapped, sizeof swapped);
        struct nmp_regs rw = r;
        rw.r[R8] = 0x120;
        rw.r[DI] = 0x7f0000100000;
        struct nmp_sample w = {.pid = pid, .tid = pid, .ip = 0x700000 + 6};
        nmp_decode_sample(d, &rw, &w);
        CHECK_MSG(w.rule == NMP_RULE_SKID && w.addr == 0x7f0000100130 && w.access == NMP_ACC_STORE &&
                      w.insn_off == 6 && w.base_reg == 6 && w.index_reg == 9 && w.base_off == 0x130,
                  "swapped base: rule %d addr 0x%" PRIx64 " insn_off %d base_reg %d index_reg %d "
                  "base_off %d", w.rule, w.addr, w.insn_off, w.base_reg, w.index_reg, w.base_off);
        /* both too far from the address (two pointers added): no base offset */
        rw.r[R8] = 0x7e0000000000;
        rw.r[DI] = 0x10000000000;
        nmp_decode_sample(d, &rw, &w);
        CHECK_MSG(w.addr == 0x7f0000000010 && w.base_reg == 9 && w.base_off == NMP_BASE_OFF_UNKNOWN,
                  "no small offset: base_reg %d base_off %d", w.base_reg, w.base_off);
        unlink(path3);
        /* exec invalidates the process's mappings and cache */
        nmp_decoder_exec(d, pid);
        s.ip = 0x500000 + 4096 + 4;
        nmp_decode_sample(d, &r, &s);
        CHECK_MSG(s.rule == NMP_RULE_UNREADABLE, "after exec: rule %d", s.rule);
        unlink(path);
        struct nmp_sample k = {.pid = pid, .ip = 0xffffffff81000000ULL};
        nmp_decode_sample(d, &r, &k);
        CHECK_MSG(k.rule == NMP_RULE_KERNEL && k.base_reg == 0 && k.sp == 0,
                  "kernel ip: rule %d", k.rule);
    }

    /* End to end through this executable's ELF symbol table (/proc/self/maps). */
    CHECK_MSG(nmp_decoder_load_proc_maps(d, (uint32_t)getpid()) > 0, "load /proc/self/maps");
    {
        static uint64_t arr[8] = {0};
        struct nmp_regs rr;
        memset(&rr, 0, sizeof rr);
        rr.r[DI] = (uint64_t)(uintptr_t)arr;
        rr.r[SI] = 3;
        struct nmp_sample s = {.pid = (uint32_t)getpid(),
                               .ip = (uint64_t)(uintptr_t)&nmp_test_fn + 4};
        nmp_decode_sample(d, &rr, &s);
        CHECK_MSG(s.rule == NMP_RULE_SKID && s.addr == (uint64_t)(uintptr_t)&arr[3],
              "elf function: rule %d addr 0x%" PRIx64, s.rule, s.addr);
        struct nmp_decode_stats st;
        nmp_decoder_stats(d, &st);
        CHECK_MSG(st.functions >= 1, "elf function decoded from its symbol (functions=%" PRIu64 ")",
              st.functions);
    }

    nmp_decoder_free(d);
    if (!failures)
        printf("test_decode: all passed\n");
    return check_result();
}
