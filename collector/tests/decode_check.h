/* What the decoder tests share: the perf register indexes, and check_case -- decode a
 * hand-assembled code range, take the way the sampled registers say ran, and check the
 * address, access, size and rule the sample at ip gets. */
#ifndef NMP_DECODE_CHECK_H
#define NMP_DECODE_CHECK_H

#include "nmp_decode.h"

#include <inttypes.h>
#include "nmp_check.h"

/* perf_event_x86_regs indexes */
enum { AX = 0, BX = 1, CX = 2, DX = 3, SI = 4, DI = 5, BP = 6, SP = 7, FLAGS = 9, R8 = 16, R9 = 17,
       R10 = 18, R12 = 20, R13 = 21, R14 = 22, R15 = 23 };


struct expect {
    uint64_t addr;
    int access, size, rule;
};

static void check_case(struct nmp_decoder *d, const char *name, const uint8_t *code, size_t len,
                       uint64_t code_addr, uint64_t ip, int aligned, const struct nmp_regs *r,
                       struct expect e)
{
    struct nmp_memop g, m;
    nmp_decode_code(d, code, len, code_addr, ip, aligned, &g);
    nmp_memop_taken(&g, r, &m); /* as nmp_decode_sample: the way the flags say ran */
    uint64_t a = nmp_memop_addr(&m, r);
    CHECK_MSG(m.rule == e.rule, "%s: rule %d, expected %d", name, m.rule, e.rule);
    CHECK_MSG(a == e.addr, "%s: addr 0x%" PRIx64 ", expected 0x%" PRIx64, name, a, e.addr);
    if (e.rule != NMP_RULE_NO_MEM) {
        CHECK_MSG(m.access == e.access, "%s: access %d, expected %d", name, m.access, e.access);
        CHECK_MSG(m.size == e.size, "%s: size %d, expected %d", name, m.size, e.size);
    }
}

static const uint64_t A = 0x401000;

#endif
