/* The body of a PERF_RECORD_SAMPLE, parsed by the attr of the event that wrote it: one
 * parser for every event of the collector (software sampling, page faults, hardware
 * backends).  Field order: Linux include/uapi/linux/perf_event.h (PERF_RECORD_SAMPLE) and
 * perf_output_sample() in Linux kernel/events/core.c.
 */
#ifndef NMP_PERF_SAMPLE_H
#define NMP_PERF_SAMPLE_H

#include <linux/perf_event.h>
#include <stddef.h>
#include <stdint.h>

struct nmp_perf_sample {
    uint64_t id, ip, time, addr, weight, data_src, phys_addr, data_page_size;
    uint32_t pid, tid, cpu;
    const uint8_t *raw; /* PERF_SAMPLE_RAW: raw_size bytes */
    uint32_t raw_size;
    /* PERF_SAMPLE_REGS_USER: the ABI (0: no registers, a kernel thread) and nregs values
     * of the registers in attr.sample_regs_user, ascending; not aligned: copy them out */
    uint64_t regs_abi;
    const uint8_t *regs;
    uint32_t nregs;
    uint8_t has_addr, has_weight, has_data_src, has_phys;
};

/* Parses `len` bytes of a sample body.  0, or -1 when the body is shorter than its attr
 * says (a malformed record). */
int nmp_perf_sample_parse(const struct perf_event_attr *attr, const void *body, size_t len,
                          struct nmp_perf_sample *s);

#endif
