/* Test harness around the collector's own hardware-sample code (collector/src/hw_*.c),
 * so that Python tests can feed it records the kernel wrote and values from the
 * kernel's tables.  Built by tests/hw_harness.py; not installed.
 *
 *   hw_decode_harness classify       stdin: one perf_mem_data_src a line (hex)
 *                                    stdout: "src hops remote" (nmp_memsrc_classify)
 *   hw_decode_harness decode pebs|ibs
 *       stdin: frames of u32 attr_size, struct perf_event_attr as perf.data stores it,
 *              u32 body_size, the PERF_RECORD_SAMPLE body (after the 8-byte header)
 *       stdout: one line a frame, decimal: rc ip pid tid time cpu addr weight data_src
 *               phys_addr access rule (nmp_hw_decode)
 */
#include "nmp_hw_priv.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int read_exact(void *dst, size_t n)
{
    return fread(dst, 1, n, stdin) == n ? 0 : -1;
}

static int classify(void)
{
    char line[128];
    while (fgets(line, sizeof line, stdin)) {
        uint64_t ds = strtoull(line, NULL, 16);
        struct nmp_memsrc_class c = nmp_memsrc_classify(ds);
        printf("%d %d %d\n", (int)c.src, c.hops, c.remote);
    }
    return 0;
}

static int decode(enum nmp_backend backend)
{
    static uint8_t body[1 << 20];
    uint32_t asize, bsize;
    while (read_exact(&asize, 4) == 0) {
        struct perf_event_attr attr;
        uint8_t raw_attr[1024];
        if (asize > sizeof raw_attr || read_exact(raw_attr, asize) < 0 ||
            read_exact(&bsize, 4) < 0 || bsize > sizeof body || read_exact(body, bsize) < 0) {
            fprintf(stderr, "hw_decode_harness: truncated frame\n");
            return 1;
        }
        memset(&attr, 0, sizeof attr);
        memcpy(&attr, raw_attr, asize < sizeof attr ? asize : sizeof attr);
        struct nmp_sample s;
        memset(&s, 0, sizeof s);
        int rc = nmp_hw_decode(backend, &attr, body, bsize, &s);
        printf("%d %llu %u %u %llu %u %llu %u %llu %llu %u %u\n", rc,
               (unsigned long long)s.ip, s.pid, s.tid, (unsigned long long)s.time, s.cpu,
               (unsigned long long)s.addr, s.weight, (unsigned long long)s.data_src,
               (unsigned long long)s.phys_addr, s.access, s.rule);
    }
    return 0;
}

int main(int argc, char **argv)
{
    if (argc == 2 && !strcmp(argv[1], "classify"))
        return classify();
    if (argc == 3 && !strcmp(argv[1], "decode"))
        return decode(!strcmp(argv[2], "ibs") ? NMP_BACKEND_IBS : NMP_BACKEND_PEBS);
    fprintf(stderr, "usage: hw_decode_harness classify | decode pebs|ibs\n");
    return 2;
}
