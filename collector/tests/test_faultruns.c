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

/* A collector with only its faults table, in a fresh directory; 0, or -1. */
static int open_faults(struct nmp_collector *c, const char *name)
{
    fresh(name);
    memset(c, 0, sizeof *c);
    c->t.faults = nmp_table_open(dir, NMP_TABLE_ID_faults, (uint64_t)-1);
    CHECK(c->t.faults != NULL);
    return c->t.faults ? 0 : -1;
}

/* Closes what open_faults made: the last runs and repeats written, the table closed. */
static void close_faults(struct nmp_collector *c)
{
    nmp_fault_runs_close(c);
    CHECK(nmp_table_close(c->t.faults) == 0);
    free(c->fault_state);
}

static void test_runs(void)
{
    struct nmp_collector c;
    if (open_faults(&c, "faultruns") != 0)
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
    close_faults(&c);

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

/* A temporary allocated and freed again and again: its two pages faulted by one thread
 * from two instructions (malloc's chunk header, the program's store), 1000 times each in
 * one window, and by another thread once.  The first fault of each page and instruction
 * is a row of its own; the repeats are one row each (stride 0), all counted.  After a
 * flush the page is still known: its next fault is a row of repeats of one. */
static void test_repeats(void)
{
    struct nmp_collector c;
    if (open_faults(&c, "faultrepeats") != 0)
        return;
    for (int k = 0; k < 1000; k++) {
        fault(&c, 100000 + 50 * k, 10, 0x7f0000001000, 0x40000010);      /* header */
        fault(&c, 100010 + 50 * k, 10, 0x400500, 0x40000000 + 0x3fff8); /* p[size - 1] */
    }
    fault(&c, 200000, 11, 0x400500, 0x40000000 + 0x3fff8); /* another thread: its own */
    nmp_fault_runs_close(&c);
    fault(&c, 300000, 10, 0x7f0000001000, 0x40000010); /* after the flush */
    close_faults(&c);

    uint64_t run[16], stride[16], span[16], addr[16], time[16], tid[16];
    size_t n = column("run", 4, run, 16);
    CHECK_EQ(n, 6); /* 2 first faults + 2 rows of repeats, thread 11's, the one after */
    CHECK_EQ(column("stride", 4, stride, 16), n);
    CHECK_EQ(column("span", 4, span, 16), n);
    CHECK_EQ(column("addr", 8, addr, 16), n);
    CHECK_EQ(column("time", 8, time, 16), n);
    CHECK_EQ(column("tid", 4, tid, 16), n);
    uint64_t total = 0;
    int repeats = 0;
    for (size_t i = 0; i < n; i++) {
        total += run[i];
        CHECK_EQ(stride[i], 0);
        if (run[i] > 1) {
            repeats++;
            CHECK_EQ(run[i], 999);
            CHECK_EQ(tid[i], 10);
            CHECK(time[i] == 100050 || time[i] == 100060); /* the first repeat's */
            CHECK_EQ(span[i], 998 * 50);
        }
    }
    CHECK_EQ(repeats, 2);
    CHECK_EQ(total, 2002); /* every fault counted once */
    CHECK_EQ(time[n - 1], 300000); /* the repeat after the flush: a row of its own, stride 0 */
    CHECK_EQ(run[n - 1], 1);
}

/* An array of 100 pages filled again at each of 3 steps (recorded faults 17 pages apart):
 * a run a step, its beginnings' pages as repeats, every fault counted. */
static void test_refills(void)
{
    struct nmp_collector c;
    if (open_faults(&c, "faultrefills") != 0)
        return;
    for (int step = 0; step < 3; step++)
        for (int k = 0; k < 100; k++)
            fault(&c, 1000000 * (uint64_t)(step + 1) + 10 * k, 10, 0x400600,
                  0x50000000 + (uint64_t)k * 17 * 4096);
    close_faults(&c);

    uint64_t run[16], stride[16];
    size_t n = column("run", 4, run, 16);
    CHECK_EQ(column("stride", 4, stride, 16), n);
    uint64_t total = 0, in_runs = 0;
    for (size_t i = 0; i < n; i++) {
        total += run[i];
        if (stride[i] == 17 * 4096)
            in_runs += run[i];
    }
    CHECK_EQ(total, 300);
    CHECK_EQ(in_runs, 297); /* runs of 100, 99, 98; 3 faults repeat a run's first page */
    CHECK(n <= 5);
}

int main(void)
{
    test_runs();
    test_repeats();
    test_refills();
    return check_result();
}
