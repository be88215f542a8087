/* Runs of page faults (faultruns.c): a thread's evenly spaced faults from one
 * instruction become one row of the faults table; anything else closes the run. */
#include "nmp_collector.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "nmp_check.h"

static char dir[2048];

static void fresh(const char *name)
{
    check_fresh_dir(dir, sizeof dir, name);
}

/* The values of one u4/u8 column of the faults table, after the 16-byte header. */
static size_t column(const char *col, size_t width, uint64_t *out, size_t max)
{
    char path[2200];
    snprintf(path, sizeof path, "%s/faults.%s.col", dir, col);
    FILE *f = fopen(path, "rb");
    if (!f)
        return 0;
    fseek(f, 16, SEEK_SET);
    size_t n = 0;
    unsigned char b[8];
    while (n < max && fread(b, 1, width, f) == width) {
        uint64_t v = 0;
        memcpy(&v, b, width);
        out[n++] = v;
    }
    fclose(f);
    return n;
}

static void fault(struct nmp_collector *c, uint64_t time, uint32_t tid, uint64_t ip, uint64_t addr)
{
    uint64_t v[NMP_faults_NCOLS] = {[NMP_faults_time] = time, [NMP_faults_pid] = 7,
                                   [NMP_faults_tid] = tid,   [NMP_faults_cpu] = 1,
                                   [NMP_faults_ip] = ip,     [NMP_faults_addr] = addr};
    nmp_fault_add(c, v);
}

static void test_runs(void)
{
    fresh("faultruns");
    struct nmp_collector c;
    memset(&c, 0, sizeof c);
    c.t.faults = nmp_table_open(dir, NMP_TABLE_ID_faults, (uint64_t)-1);
    CHECK(c.t.faults != NULL);
    if (!c.t.faults)
        return;
    /* thread 10: two arrays initialised in lockstep (two stores), 17 pages apart each */
    for (int k = 0; k < 100; k++) {
        fault(&c, 1000 + 20 * k, 10, 0x400100, 0x10000000 + (uint64_t)k * 17 * 4096 + 8);
        fault(&c, 1010 + 20 * k, 10, 0x400200, 0x20000000 + (uint64_t)k * 17 * 4096);
    }
    /* thread 11: scattered pages (no run), then a page below the last one */
    fault(&c, 5000, 11, 0x400300, 0x30000000);
    fault(&c, 5001, 11, 0x400300, 0x30005000);
    fault(&c, 5002, 11, 0x400300, 0x30007000); /* 5 pages, then 2: a new run */
    fault(&c, 5003, 11, 0x400300, 0x30001000); /* below: a new run */
    nmp_fault_runs_close(&c);
    CHECK(nmp_table_close(c.t.faults) == 0);
    free(c.runs);

    uint64_t run[16], stride[16], span[16], addr[16], time[16];
    size_t n = column("run", 4, run, 16);
    CHECK_EQ(n, 5);
    CHECK_EQ(column("stride", 4, stride, 16), n);
    CHECK_EQ(column("span", 4, span, 16), n);
    CHECK_EQ(column("addr", 8, addr, 16), n);
    CHECK_EQ(column("time", 8, time, 16), n);
    uint64_t total = 0;
    for (size_t i = 0; i < n; i++)
        total += run[i];
    CHECK_EQ(total, 204); /* every fault counted once */
    for (size_t i = 0; i < n; i++) {
        if (addr[i] == 0x10000008) { /* the first array: one run, its first fault's offset */
            CHECK_EQ(run[i], 100);
            CHECK_EQ(stride[i], 17 * 4096);
            CHECK_EQ(time[i], 1000);
            CHECK_EQ(span[i], 99 * 20);
        } else if (addr[i] == 0x20000000) {
            CHECK_EQ(run[i], 100);
            CHECK_EQ(stride[i], 17 * 4096);
        } else if (addr[i] == 0x30000000) {
            CHECK_EQ(run[i], 2); /* 0x30000000, 0x30005000: the stride set by the second */
            CHECK_EQ(stride[i], 5 * 4096);
        } else {
            CHECK_MSG(addr[i] == 0x30007000 || addr[i] == 0x30001000, "row %zu at %#llx", i,
                      (unsigned long long)addr[i]);
            CHECK_EQ(run[i], 1);
        }
    }
}

int main(void)
{
    test_runs();
    return check_result();
}
