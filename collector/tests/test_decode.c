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

/* perf_event_x86_regs indexes */
enum { AX = 0, BX = 1, CX = 2, DX = 3, SI = 4, DI = 5, BP = 6, SP = 7, R8 = 16 };


struct expect {
    uint64_t addr;
    int access, size, rule;
};

static void check_case(struct nmp_decoder *d, const char *name, const uint8_t *code, size_t len,
                       uint64_t code_addr, uint64_t ip, int aligned, const struct nmp_regs *r,
                       struct expect e)
{
    struct nmp_memop m;
    nmp_decode_code(d, code, len, code_addr, ip, aligned, &m);
    uint64_t a = nmp_memop_addr(&m, r);
    CHECK_MSG(m.rule == e.rule, "%s: rule %d, expected %d", name, m.rule, e.rule);
    CHECK_MSG(a == e.addr, "%s: addr 0x%" PRIx64 ", expected 0x%" PRIx64, name, a, e.addr);
    if (e.rule != NMP_RULE_NO_MEM) {
        CHECK_MSG(m.access == e.access, "%s: access %d, expected %d", name, m.access, e.access);
        CHECK_MSG(m.size == e.size, "%s: size %d, expected %d", name, m.size, e.size);
    }
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
    const uint64_t A = 0x401000;

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

    /* mov rax, fs:[0x28] */
    static const uint8_t fs[] = {0x64, 0x48, 0x8b, 0x04, 0x25, 0x28, 0x00, 0x00, 0x00};
    check_case(d, "fs segment", fs, sizeof fs, A, A, 1, &r,
               (struct expect){0, NMP_ACC_LOAD, 8, NMP_RULE_SEGMENT});

    /* vpgatherdd ymm0, [rax+ymm1*4], ymm2 */
    static const uint8_t vsib[] = {0xc4, 0xe2, 0x6d, 0x90, 0x04, 0x88};
    check_case(d, "vsib gather", vsib, sizeof vsib, A, A, 1, &r,
               (struct expect){0, NMP_ACC_LOAD, 4, NMP_RULE_VSIB});

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
        /* a jump target between the mask and the load: the value may come from elsewhere
         * mov rdx,rax; and edx,0x3fffff; jmp +0; mov edx,[r10+rdx*4]; mulsd <- ip */
        static const uint8_t gatj[] = {0x48, 0x89, 0xc2, 0x81, 0xe2, 0xff, 0xff, 0x3f, 0x00, 0xeb,
                                       0x00, 0x41, 0x8b, 0x14, 0x92, 0xf2, 0x0f, 0x59, 0xc2};
        check_case(d, "no rebuild across a jump target", gatj, sizeof gatj, A, A + 15, 1, &g,
                   (struct expect){0, NMP_ACC_LOAD, 4, NMP_RULE_CLOBBERED});
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

    /* push writes rsp: mov rax,[rsp+8]; push rbx; add rcx,rax <- ip */
    static const uint8_t pushc[] = {0x48, 0x8b, 0x44, 0x24, 0x08, 0x53, 0x48, 0x01, 0xc1};
    check_case(d, "push clobbers rsp", pushc, sizeof pushc, A, A + 6, 1, &r,
               (struct expect){0, NMP_ACC_LOAD, 8, NMP_RULE_CLOBBERED});

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

    /* control flow ends the block: mov rax,[rsi]; jmp +0; add rcx,rax <- ip */
    static const uint8_t cf[] = {0x48, 0x8b, 0x06, 0xeb, 0x00, 0x48, 0x01, 0xc1};
    check_case(d, "jmp boundary", cf, sizeof cf, A, A + 5, 1, &r,
               (struct expect){0, 0, 0, NMP_RULE_NO_MEM});

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
        }
        /* exec invalidates the process's mappings and cache */
        nmp_decoder_exec(d, pid);
        s.ip = 0x500000 + 4096 + 4;
        nmp_decode_sample(d, &r, &s);
        CHECK_MSG(s.rule == NMP_RULE_UNREADABLE, "after exec: rule %d", s.rule);
        unlink(path);
        struct nmp_sample k = {.pid = pid, .ip = 0xffffffff81000000ULL};
        nmp_decode_sample(d, &r, &k);
        CHECK_MSG(k.rule == NMP_RULE_KERNEL, "kernel ip: rule %d", k.rule);
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
