/* Skid across control flow: the sample at ip charged to the access before it along the
 * way the program went -- paths through branches and joins, loops (the last iteration's
 * index), guards told by the flags or a compared register sampled at ip, and the index a
 * constant trip count pins.  Hand-assembled gcc output, as in test_decode.c.  Exit 0 =
 * pass. */
#include "nmp_decode.h"

#include <stdio.h>
#include <string.h>
#include "decode_check.h"
#include "decode_vectors.h"

static void test_paths(struct nmp_decoder *d)
{
    struct nmp_regs r;
    memset(&r, 0, sizeof r);
    r.r[BP] = 0x7f0000300000;
    r.r[R12] = (uint64_t)-0x400;
    r.r[R14] = 0x600;
    r.r[R9] = 0xdead0000; /* __muldc3 may have changed it on the cold path: not used */
    /* fft -O2: after `jp` to the cold path, and at its return point 0x1699; r9 rebuilt
     * from `lea 0x0(%rbp,%r12,1),%r9` (both callee-saved, kept by the call) */
    const uint64_t want = r.r[BP] + r.r[R12] + r.r[R14];
    check_case(d, "fft: join after the NaN check", fft_o2_fft_row, sizeof fft_o2_fft_row, 0x1540,
               0x169d, 1, &r, (struct expect){want, NMP_ACC_LOAD, 8, NMP_RULE_SKID_PATH});
    check_case(d, "fft: at the join", fft_o2_fft_row, sizeof fft_o2_fft_row, 0x1540, 0x1699, 1, &r,
               (struct expect){want, NMP_ACC_LOAD, 8, NMP_RULE_SKID_PATH});
    check_case(d, "fft: pointers stepped since", fft_o2_fft_row, sizeof fft_o2_fft_row, 0x1540,
               0x16ac, 1, &r, (struct expect){want, NMP_ACC_LOAD, 8, NMP_RULE_SKID_PATH});

    /* fft -O2 after the butterflies: `test %ecx,%ecx; je 170b; movsd 0x94d(%rip),%xmm1;
     * 170b: unpcklpd <- ip`: the constant's address needs no register, but the other
     * way to ip skips its load */
    r.r[FLAGS] = 1u << 6; /* ZF: je taken, the load skipped: the one before, `movsd
                           * 0x964(%rip),%xmm1` at 0x16f4 (x = c1; if (n) x = c2;) */
    check_case(d, "fft: a skipped load, the one before it", fft_o2_fft_row, sizeof fft_o2_fft_row,
               0x1540, 0x170b, 1, &r, (struct expect){0x16fc + 0x964, NMP_ACC_LOAD, 8,
                                                      NMP_RULE_SKID_PATH});
    /* ZF clear: je fell through, so the load ran (the flags of `test` last to ip) */
    r.r[FLAGS] = 0;
    check_case(d, "fft: the load the flags say ran", fft_o2_fft_row, sizeof fft_o2_fft_row,
               0x1540, 0x170b, 1, &r, (struct expect){0x170b + 0x94d, NMP_ACC_LOAD, 8,
                                                      NMP_RULE_SKID_PATH});

    /* gcc -O2 of `for (i = 0; i < n; i++) if (keys[i] == key) *ans = vals[i];`:
     * 10: cmp %ecx,(%rdi,%rax,4); 13: jne 1c; 15: mov (%rsi,%rax,8),%r9;
     * 19: mov %r9,(%r8); 1c: add $0x1,%rax; 20: cmp %rax,%rdx; 23: jne 10; 25: ret */
    static const uint8_t find[] = {0x85, 0xd2, 0x7e, 0x21, 0x48, 0x63, 0xd2, 0x31, 0xc0, 0x0f,
                                   0x1f, 0x80, 0x00, 0x00, 0x00, 0x00, 0x39, 0x0c, 0x87, 0x75,
                                   0x07, 0x4c, 0x8b, 0x0c, 0xc6, 0x4d, 0x89, 0x08, 0x48, 0x83,
                                   0xc0, 0x01, 0x48, 0x39, 0xc2, 0x75, 0xeb, 0xc3};
    struct nmp_regs k;
    memset(&k, 0, sizeof k);
    k.r[R8] = 0x7f0000400000;
    k.r[DI] = 0x7f0000500000;
    k.r[AX] = 12;
    k.r[FLAGS] = 1u << 6; /* ZF: keys[i] == key, jne fell through to the store */
    check_case(d, "conditional store: the flags say it ran", find, sizeof find, A, A + 0x1c, 1, &k,
               (struct expect){k.r[R8], NMP_ACC_STORE, 8, NMP_RULE_SKID_PATH});
    k.r[FLAGS] = 0; /* jne taken: no store on this sample's way, the compare's load before */
    check_case(d, "conditional store: the flags say it was skipped", find, sizeof find, A, A + 0x1c,
               1, &k, (struct expect){k.r[DI] + 12 * 4, NMP_ACC_LOAD, 4, NMP_RULE_SKID_PATH});
    /* mov (%rdi),%eax; add $4,%rdi; test %eax,%eax; je J; mov %eax,(%rsi); J: add
     * %eax,%ecx <- ip: taken, the load before the test, its pointer stepped since */
    static const uint8_t stepped[] = {0x8b, 0x07, 0x48, 0x83, 0xc7, 0x04, 0x85, 0xc0, 0x74, 0x02,
                                      0x89, 0x06, 0x01, 0xc1, 0xc3};
    k.r[SI] = 0x7f0000600000;
    k.r[FLAGS] = 1u << 6;
    check_case(d, "skipped store, the load before it", stepped, sizeof stepped, A, A + 12, 1, &k,
               (struct expect){k.r[DI] - 4, NMP_ACC_LOAD, 4, NMP_RULE_SKID_PATH});
    k.r[FLAGS] = 0;
    check_case(d, "the store the flags say ran", stepped, sizeof stepped, A, A + 12, 1, &k,
               (struct expect){k.r[SI], NMP_ACC_STORE, 4, NMP_RULE_SKID_PATH});
    /* past `add $0x1,%rax` the flags are the add's: which way ran is not known */
    k.r[FLAGS] = 1u << 6;
    check_case(d, "conditional store: flags overwritten since", find, sizeof find, A, A + 0x20, 1,
               &k, (struct expect){0, NMP_ACC_STORE, 8, NMP_RULE_CLOBBERED});

    /* movsd (%rbx),%xmm0; ucomisd; jp C; J: addsd <- ip; add $8,%rbx; ret;
     * C: call f; jmp J -- rbx is callee-saved: kept on the cold path */
    static const uint8_t keep[] = {0xf2, 0x0f, 0x10, 0x03, 0x66, 0x0f, 0x2e, 0xc8, 0x7a, 0x09,
                                   0xf2, 0x0f, 0x58, 0xd0, 0x48, 0x83, 0xc3, 0x08, 0xc3, 0xe8,
                                   0x00, 0x00, 0x00, 0x00, 0xeb, 0xf0};
    r.r[BX] = 0x7f0000310000;
    check_case(d, "cold call keeps rbx", keep, sizeof keep, A, A + 0xa, 1, &r,
               (struct expect){r.r[BX], NMP_ACC_LOAD, 8, NMP_RULE_SKID_PATH});
    check_case(d, "cold call keeps rbx, step after", keep, sizeof keep, A, A + 0x12, 1, &r,
               (struct expect){r.r[BX] - 8, NMP_ACC_LOAD, 8, NMP_RULE_SKID_PATH});
    /* the same on rcx, which a call may change: movsd (%rcx); ucomisd; jp C; J: addsd <- ip;
     * ret; C: call f; jmp J */
    static const uint8_t lose[] = {0xf2, 0x0f, 0x10, 0x01, 0x66, 0x0f, 0x2e, 0xc8, 0x7a, 0x05,
                                   0xf2, 0x0f, 0x58, 0xd0, 0xc3, 0xe8, 0x00, 0x00, 0x00, 0x00,
                                   0xeb, 0xf4};
    check_case(d, "cold call may change rcx", lose, sizeof lose, A, A + 0xa, 1, &r,
               (struct expect){0, NMP_ACC_LOAD, 8, NMP_RULE_CLOBBERED});
    /* movsd (%rbx); ucomisd; jp C; J: addsd <- ip; ret; C: xor %ebx,%ebx; jmp J */
    static const uint8_t wr[] = {0xf2, 0x0f, 0x10, 0x03, 0x66, 0x0f, 0x2e, 0xc8, 0x7a, 0x05,
                                 0xf2, 0x0f, 0x58, 0xd0, 0xc3, 0x31, 0xdb, 0xeb, 0xf7};
    check_case(d, "other path writes rbx", wr, sizeof wr, A, A + 0xa, 1, &r,
               (struct expect){0, NMP_ACC_LOAD, 8, NMP_RULE_CLOBBERED});
    /* test %esi,%esi; je J; movsd (%rbx),%xmm0; J: addsd <- ip: the access may not have
     * run, and the flags of `test`, intact at ip, say whether it did */
    static const uint8_t skip[] = {0x85, 0xf6, 0x74, 0x04, 0xf2, 0x0f, 0x10, 0x03,
                                   0xf2, 0x0f, 0x58, 0xd0, 0xc3};
    r.r[FLAGS] = 1u << 6; /* ZF: je taken */
    check_case(d, "other path skips the access", skip, sizeof skip, A, A + 8, 1, &r,
               (struct expect){0, NMP_ACC_LOAD, 8, NMP_RULE_CLOBBERED});
    r.r[FLAGS] = 0x202; /* IF and bit 1, ZF clear: je fell through */
    check_case(d, "other path skips the access, not taken", skip, sizeof skip, A, A + 8, 1, &r,
               (struct expect){r.r[BX], NMP_ACC_LOAD, 8, NMP_RULE_SKID_PATH});
    /* the same past an instruction that writes the flags: not known */
    static const uint8_t skip2[] = {0x85, 0xf6, 0x74, 0x04, 0xf2, 0x0f, 0x10, 0x03,
                                    0x48, 0x83, 0xc1, 0x01, 0xf2, 0x0f, 0x58, 0xd0, 0xc3};
    check_case(d, "other path skips the access, flags rewritten", skip2, sizeof skip2, A, A + 12, 1,
               &r, (struct expect){0, NMP_ACC_LOAD, 8, NMP_RULE_CLOBBERED});
    r.r[FLAGS] = 0;
}

/* A sample at the top of a loop is charged to the previous iteration's last access. */
static void test_loops(struct nmp_decoder *d)
{
    struct nmp_regs r;
    memset(&r, 0, sizeof r);
    /* bucket_sort -O2: the hash loop's head 0x14a8, and 0x14b2 after `add $0x4,%rdx` */
    r.r[DX] = 0x7f0000400010;
    check_case(d, "loop head", bucket_o2_hash, sizeof bucket_o2_hash, 0x1491, 0x14a8, 1, &r,
               (struct expect){r.r[DX] - 4, NMP_ACC_STORE, 4, NMP_RULE_SKID_LOOP});
    check_case(d, "loop top, stepped", bucket_o2_hash, sizeof bucket_o2_hash, 0x1491, 0x14b2, 1,
               &r, (struct expect){r.r[DX] - 8, NMP_ACC_STORE, 4, NMP_RULE_SKID_LOOP});
    /* table_lookup -O2: at the loop test 0x1509 (entered by jmp from 0x14ed, and from the
     * body: the latch is followed), rdx still the probe's index */
    r.r[R13] = 0x7f0000410000;
    r.r[DX] = 333;
    r.r[DI] = 100;
    r.r[R9] = 900;
    check_case(d, "binary search, loop test", lookup_o2_bsearch, sizeof lookup_o2_bsearch, 0x14e0,
               0x1509, 1, &r,
               (struct expect){r.r[R13] + 333 * 8, NMP_ACC_LOAD, 8, NMP_RULE_SKID_LOOP});
    /* after `mov %r9,%rdx`: the index is in r9 when cmova moved it (flags above: CF=ZF=0),
     * in rdi when cmovbe did */
    r.r[DX] = 800; /* = r9 - rdi now, nothing to do with the probe */
    r.r[FLAGS] = 0x202;
    check_case(d, "binary search, cmova", lookup_o2_bsearch, sizeof lookup_o2_bsearch, 0x14e0,
               0x150c, 1, &r,
               (struct expect){r.r[R13] + 900 * 8, NMP_ACC_LOAD, 8, NMP_RULE_SKID_LOOP});
    r.r[FLAGS] = 0x203; /* CF: below */
    check_case(d, "binary search, cmovbe", lookup_o2_bsearch, sizeof lookup_o2_bsearch, 0x14e0,
               0x150c, 1, &r,
               (struct expect){r.r[R13] + 100 * 8, NMP_ACC_LOAD, 8, NMP_RULE_SKID_LOOP});
    /* after `sub` and `cmp` the flags are gone: which one moved is not known */
    check_case(d, "binary search, flags gone", lookup_o2_bsearch, sizeof lookup_o2_bsearch, 0x14e0,
               0x14f3, 1, &r, (struct expect){0, NMP_ACC_LOAD, 8, NMP_RULE_CLOBBERED});
    /* -O3: cmovbe %rax,%rdx; cmova %rax,%rcx; mov %rcx,%rax <- 0x14fa */
    r.r[SI] = 0x7f0000420000;
    r.r[AX] = 1;
    r.r[DX] = 40;
    r.r[CX] = 60;
    r.r[FLAGS] = 0x246; /* ZF: below or equal */
    check_case(d, "binary search -O3, cmovbe", lookup_o3_bsearch, sizeof lookup_o3_bsearch, 0x14c8,
               0x14fa, 1, &r,
               (struct expect){r.r[SI] + 40 * 8, NMP_ACC_LOAD, 8, NMP_RULE_SKID_LOOP});
    /* movsd (%r13,%rdx,8); comisd; cmova %rdx,%r9; mov %r9,%rdx; sub %rdi,%rdx <- ip: one
     * cmov alone says nothing when its condition fails */
    static const uint8_t one[] = {0xf2, 0x41, 0x0f, 0x10, 0x44, 0xd5, 0x00, 0x66, 0x0f, 0x2f, 0xc1,
                                  0x4c, 0x0f, 0x47, 0xca, 0x4c, 0x89, 0xca, 0x48, 0x29, 0xfa, 0xc3};
    check_case(d, "a single cmov", one, sizeof one, A, A + 0x12, 1, &r,
               (struct expect){0, NMP_ACC_LOAD, 8, NMP_RULE_CLOBBERED});

    /* A binary search with two latches (gcc -O2 of `if (g[base + mid].energy > e) len =
     * half; else { lo = mid; len -= half; }`, 48-byte records): the loop test at 0x2c is
     * reached from the entry (jmp at 0x3), by falling through from 0x29 and by the jmp
     * at 0x46.  Either latch keeps rax and rdi from the load at 0x1e: charged to it. */
    static const uint8_t two_latches[] = {
        0x45, 0x31, 0xc9, 0xeb, 0x27, 0x0f, 0x1f, 0x00, 0x48, 0x89, 0xf1, 0x48, 0xd1, 0xf9,
        0x4d, 0x8d, 0x04, 0x09, 0x49, 0x8d, 0x04, 0x10, 0x48, 0x8d, 0x04, 0x40, 0x48, 0xc1,
        0xe0, 0x04, 0xf2, 0x0f, 0x10, 0x0c, 0x07, 0x66, 0x0f, 0x2f, 0xc8, 0x76, 0x17, 0x48,
        0x89, 0xce, 0x48, 0x83, 0xfe, 0x01, 0x7f, 0xd6, 0x4c, 0x89, 0xc8, 0xc3, 0x66, 0x2e,
        0x0f, 0x1f, 0x84, 0x00, 0x00, 0x00, 0x00, 0x00, 0x48, 0x29, 0xce, 0x4d, 0x89, 0xc1,
        0xeb, 0xe4};
    r.r[DI] = 0x7f0000430000;
    r.r[AX] = 48 * 77;
    check_case(d, "two latches, loop test", two_latches, sizeof two_latches, A, A + 0x2c, 1, &r,
               (struct expect){r.r[DI] + 48 * 77, NMP_ACC_LOAD, 8, NMP_RULE_SKID_LOOP});
    check_case(d, "two latches, loop top", two_latches, sizeof two_latches, A, A + 0x8, 1, &r,
               (struct expect){r.r[DI] + 48 * 77, NMP_ACC_LOAD, 8, NMP_RULE_SKID_LOOP});
    /* after `lea (%r8,%rdx,1),%rax` the probe's offset is gone */
    check_case(d, "two latches, offset recomputed", two_latches, sizeof two_latches, A, A + 0x16,
               1, &r, (struct expect){0, NMP_ACC_LOAD, 8, NMP_RULE_CLOBBERED});
}

/* rep string instructions are interrupted while they run: ip stays on them and rsi / rdi
 * point at the next element. */
/* A loop's zero-trip guard: the join after an inner loop is also reached from `test
 * %ecx,%ecx; jle` before it, and the flags are rewritten by then, but ecx is unchanged up
 * to ip: the compare redone on the sampled ecx says whether the loop ran.  gcc 12 -O2 of
 *   for (i = 0; i < nc; i++) { float d = 0; for (j = 0; j < nf; j++) { float t = pt[j] -
 *   c[i][j]; d += t * t; } if (d < min) { min = d; idx = i; } }
 * with the inner loop inline (zerotrip) or in a static inline function (zerotrip_block:
 * the guard jumps to `pxor %xmm1,%xmm1; jmp join`, as Rodinia kmeans's does). */
static void test_guards(struct nmp_decoder *d)
{
    static const uint8_t zerotrip[] = {
        0x85, 0xd2, 0x7e, 0x6a, 0x4c, 0x63, 0xc1, 0x4c, 0x63, 0xda, 0x45, 0x31,
        0xc9, 0x45, 0x31, 0xd2, 0xf3, 0x0f, 0x10, 0x15, 0x00, 0x00, 0x00, 0x00,
        0x49, 0xc1, 0xe0, 0x02, 0x0f, 0x1f, 0x40, 0x00, 0x66, 0x0f, 0xef, 0xc9,
        0x85, 0xc9, 0x7e, 0x2b, 0x4a, 0x8b, 0x14, 0xce, 0x31, 0xc0, 0x66, 0x0f,
        0xef, 0xc9, 0x66, 0x0f, 0x1f, 0x44, 0x00, 0x00, 0xf3, 0x0f, 0x10, 0x04,
        0x07, 0xf3, 0x0f, 0x5c, 0x04, 0x02, 0x48, 0x83, 0xc0, 0x04, 0xf3, 0x0f,
        0x59, 0xc0, 0xf3, 0x0f, 0x58, 0xc8, 0x49, 0x39, 0xc0, 0x75, 0xe5, 0x0f,
        0x2f, 0xd1, 0xf3, 0x0f, 0x5d, 0xca, 0x45, 0x0f, 0x47, 0xd1, 0x49, 0x83,
        0xc1, 0x01, 0x0f, 0x28, 0xd1, 0x4d, 0x39, 0xcb, 0x75, 0xb6, 0x44, 0x89,
        0xd0, 0xc3, 0x45, 0x31, 0xd2, 0x44, 0x89, 0xd0, 0xc3,
    };
    static const uint8_t zerotrip_block[] = {
        0x85, 0xd2, 0x7e, 0x72, 0x4c, 0x63, 0xc1, 0x4c, 0x63, 0xda, 0x45, 0x31,
        0xc9, 0x45, 0x31, 0xd2, 0xf3, 0x0f, 0x10, 0x15, 0x00, 0x00, 0x00, 0x00,
        0x49, 0xc1, 0xe0, 0x02, 0x0f, 0x1f, 0x40, 0x00, 0x4a, 0x8b, 0x14, 0xce,
        0x85, 0xc9, 0x7e, 0x48, 0x31, 0xc0, 0x66, 0x0f, 0xef, 0xc9, 0x66, 0x90,
        0xf3, 0x0f, 0x10, 0x04, 0x07, 0xf3, 0x0f, 0x5c, 0x04, 0x02, 0x48, 0x83,
        0xc0, 0x04, 0xf3, 0x0f, 0x59, 0xc0, 0xf3, 0x0f, 0x58, 0xc8, 0x49, 0x39,
        0xc0, 0x75, 0xe5, 0x0f, 0x2f, 0xd1, 0xf3, 0x0f, 0x5d, 0xca, 0x45, 0x0f,
        0x47, 0xd1, 0x49, 0x83, 0xc1, 0x01, 0x0f, 0x28, 0xd1, 0x4d, 0x39, 0xcb,
        0x75, 0xbe, 0x44, 0x89, 0xd0, 0xc3, 0x66, 0x2e, 0x0f, 0x1f, 0x84, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x66, 0x0f, 0xef, 0xc9, 0xeb, 0xd5, 0x45, 0x31,
        0xd2, 0x44, 0x89, 0xd0, 0xc3,
    };
    struct nmp_regs r;
    memset(&r, 0, sizeof r);
    r.r[DX] = 0x7f0000700000; /* c[i] */
    r.r[AX] = 34 * 4;         /* past the last feature */
    r.r[FLAGS] = 1;           /* the comiss's: nothing to do with the guard */
    r.r[CX] = 34;
    /* 0x53 comiss; 0x56 minss; 0x5a cmova <- ip: subss (%rdx,%rax,1) of the last j */
    check_case(d, "zero-trip guard: the loop ran", zerotrip, sizeof zerotrip, A, A + 0x5a, 1, &r,
               (struct expect){r.r[DX] + 33 * 4, NMP_ACC_LOAD, 4, NMP_RULE_SKID_PATH});
    check_case(d, "zero-trip guard with a block: the loop ran", zerotrip_block,
               sizeof zerotrip_block, A, A + 0x52, 1, &r,
               (struct expect){r.r[DX] + 33 * 4, NMP_ACC_LOAD, 4, NMP_RULE_SKID_PATH});
    r.r[CX] = 0x100000022; /* 32 bits compared: 34 */
    check_case(d, "zero-trip guard: 32 bits", zerotrip_block, sizeof zerotrip_block, A, A + 0x52,
               1, &r, (struct expect){r.r[DX] + 33 * 4, NMP_ACC_LOAD, 4, NMP_RULE_SKID_PATH});
    r.r[CX] = 0; /* nf == 0: the guard jumped over the loop */
    check_case(d, "zero-trip guard: no iteration", zerotrip, sizeof zerotrip, A, A + 0x5a, 1, &r,
               (struct expect){0, NMP_ACC_LOAD, 4, NMP_RULE_CLOBBERED});
    r.r[CX] = 0xfffffffb; /* -5 */
    check_case(d, "zero-trip guard with a block: negative count", zerotrip_block,
               sizeof zerotrip_block, A, A + 0x52, 1, &r,
               (struct expect){0, NMP_ACC_LOAD, 4, NMP_RULE_CLOBBERED});
}

/* A loop of constant trip count left by `cmp $0x18,%rax; jne`: rax was 0x18 there, so
 * the store `movsd %xmm0,(%r12,%rax,1)` of its last iteration used 0x10, whatever the
 * rare way into the join after it (a call of force(), which changes rax) did.  gcc 12
 * -O2 of
 *   for (i = 1; i < n; i++) { double dr[3], r2 = 0; for (m = 0; m < 3; m++) { dr[m] =
 *   pos[3 * i + m] - pos[m]; r2 += dr[m] * dr[m]; } if (r2 < cut) s += force(dr, r2); }
 * (CoMD's eamForce has the same shape). */
static void test_pinned(struct nmp_decoder *d)
{
    static const uint8_t pairs[] = {
        0x48, 0x83, 0xfe, 0x01, 0x0f, 0x8e, 0xa6, 0x00, 0x00, 0x00, 0x41, 0x56,
        0x66, 0x0f, 0x28, 0xd0, 0x4c, 0x8d, 0x34, 0x76, 0x66, 0x0f, 0xef, 0xdb,
        0x41, 0x55, 0x41, 0xbd, 0x03, 0x00, 0x00, 0x00, 0x41, 0x54, 0x55, 0x48,
        0x89, 0xfd, 0x53, 0x48, 0x8d, 0x5f, 0x18, 0x48, 0x83, 0xec, 0x30, 0x4c,
        0x8d, 0x64, 0x24, 0x10, 0x0f, 0x1f, 0x40, 0x00, 0x31, 0xc0, 0x66, 0x0f,
        0xef, 0xc9, 0xf2, 0x0f, 0x10, 0x04, 0x03, 0xf2, 0x0f, 0x5c, 0x44, 0x05,
        0x00, 0xf2, 0x41, 0x0f, 0x11, 0x04, 0x04, 0xf2, 0x0f, 0x59, 0xc0, 0x48,
        0x83, 0xc0, 0x08, 0xf2, 0x0f, 0x58, 0xc8, 0x48, 0x83, 0xf8, 0x18, 0x75,
        0xdd, 0x66, 0x0f, 0x2f, 0xd1, 0x77, 0x21, 0x49, 0x83, 0xc5, 0x03, 0x48,
        0x83, 0xc3, 0x18, 0x4d, 0x39, 0xee, 0x75, 0xc4, 0x48, 0x83, 0xc4, 0x30,
        0x66, 0x0f, 0x28, 0xc3, 0x5b, 0x5d, 0x41, 0x5c, 0x41, 0x5d, 0x41, 0x5e,
        0xc3, 0x0f, 0x1f, 0x00, 0x66, 0x0f, 0x28, 0xc1, 0x4c, 0x89, 0xe7, 0xf2,
        0x0f, 0x11, 0x54, 0x24, 0x08, 0xf2, 0x0f, 0x11, 0x1c, 0x24, 0xe8, 0x00,
        0x00, 0x00, 0x00, 0xf2, 0x0f, 0x10, 0x1c, 0x24, 0xf2, 0x0f, 0x10, 0x54,
        0x24, 0x08, 0xf2, 0x0f, 0x58, 0xd8, 0xeb, 0xb7, 0x66, 0x0f, 0xef, 0xdb,
        0x66, 0x0f, 0x28, 0xc3, 0xc3,
    };
    struct nmp_regs r;
    memset(&r, 0, sizeof r);
    r.r[R12] = 0x7ffd00002010; /* dr */
    r.r[AX] = 0x4242;          /* what force() left, or 0x18 */
    r.r[BX] = 0x7f0000800018;
    r.r[BP] = 0x7f0000800000;
    /* 0x67 add $0x3,%r13 <- ip, at the join after the loop and the call's way */
    check_case(d, "constant trip count: the index at the exit", pairs, sizeof pairs, A, A + 0x67, 1,
               &r, (struct expect){r.r[R12] + 0x10, NMP_ACC_STORE, 8, NMP_RULE_SKID_PATH});
    check_case(d, "constant trip count: one further", pairs, sizeof pairs, A, A + 0x6b, 1, &r,
               (struct expect){r.r[R12] + 0x10, NMP_ACC_STORE, 8, NMP_RULE_SKID_PATH});
    /* inside the loop the index is the sampled one, stepped: 0x57 addsd <- ip */
    r.r[AX] = 0x10;
    check_case(d, "constant trip count: in the loop", pairs, sizeof pairs, A, A + 0x57, 1, &r,
               (struct expect){r.r[R12] + 0x8, NMP_ACC_STORE, 8, NMP_RULE_SKID});
}

/* The stack accesses of instructions with no memory operand (push, pop, ret, a call's
 * return address), charged only where the walk finds no other access: libm's exp()
 * begins `push %rbx; movq %xmm0,%rbx; call`, and a sample just after a call follows the
 * callee's ret, which read the return address.  An explicit access before them is
 * charged as before, and a push between it and ip is a step of rsp. */
static void test_stack(struct nmp_decoder *d)
{
    struct nmp_regs r;
    memset(&r, 0, sizeof r);
    r.r[SP] = 0x7ffd00001000;
    r.r[DI] = 0x7f0000900000;
    uint64_t sp = r.r[SP];
    static const uint8_t entry[] = {0x53, 0x66, 0x48, 0x0f, 0x7e, 0xc3, 0xe8, 0x00, 0x01, 0x00,
                                    0x00, 0xc3};
    check_case(d, "stack: a push at the entry", entry, sizeof entry, A, A, 1, &r,
               (struct expect){sp - 8, NMP_ACC_STORE, 8, NMP_RULE_AT_IP});
    check_case(d, "stack: after the push", entry, sizeof entry, A, A + 1, 1, &r,
               (struct expect){sp, NMP_ACC_STORE, 8, NMP_RULE_SKID});
    check_case(d, "stack: a call at ip pushes", entry, sizeof entry, A, A + 6, 1, &r,
               (struct expect){sp - 8, NMP_ACC_STORE, 8, NMP_RULE_AT_IP});
    /* call; add $0x8,%rsp; ret (glibc's rand around random) */
    static const uint8_t ret_site[] = {0xe8, 0x00, 0x01, 0x00, 0x00, 0x48, 0x83, 0xc4, 0x08, 0xc3};
    check_case(d, "stack: after a call, the callee's ret", ret_site, sizeof ret_site, A, A + 5, 1,
               &r, (struct expect){sp - 8, NMP_ACC_LOAD, 8, NMP_RULE_SKID_PATH});
    check_case(d, "stack: a ret at ip", ret_site, sizeof ret_site, A, A + 9, 1, &r,
               (struct expect){sp, NMP_ACC_LOAD, 8, NMP_RULE_AT_IP});
    /* pop %rbx; pop %rbp; xor %eax,%eax */
    static const uint8_t pops[] = {0x5b, 0x5d, 0x31, 0xc0, 0xc3};
    check_case(d, "stack: after the pops", pops, sizeof pops, A, A + 2, 1, &r,
               (struct expect){sp - 8, NMP_ACC_LOAD, 8, NMP_RULE_SKID});
    /* mov (%rdi),%rax; push %rbx; nop: the explicit access, as before */
    static const uint8_t before[] = {0x48, 0x8b, 0x07, 0x53, 0x90, 0x90, 0xc3};
    check_case(d, "stack: an explicit access before a push", before, sizeof before, A, A + 4, 1,
               &r, (struct expect){r.r[DI], NMP_ACC_LOAD, 8, NMP_RULE_SKID});
    /* mov 0x10(%rsp),%rax; push %rbx; nop: rsp stepped by the push */
    static const uint8_t frame[] = {0x48, 0x8b, 0x44, 0x24, 0x10, 0x53, 0x90, 0x90, 0xc3};
    check_case(d, "stack: a frame slot before a push", frame, sizeof frame, A, A + 6, 1, &r,
               (struct expect){sp + 8 + 0x10, NMP_ACC_LOAD, 8, NMP_RULE_SKID});
}

int main(void)
{
    struct nmp_decoder *d = nmp_decoder_new();
    if (!d) {
        fprintf(stderr, "cannot create decoder\n");
        return 1;
    }
    test_paths(d);
    test_loops(d);
    test_guards(d);
    test_pinned(d);
    test_stack(d);
    nmp_decoder_free(d);
    if (!failures)
        printf("test_skid: all passed\n");
    return check_result();
}
