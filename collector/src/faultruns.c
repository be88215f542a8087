/* Runs of page faults: the faults table grows with what the faults say, not with their
 * number (docs/profile-format.md, "faults").
 *
 * A loop that first-touches an array faults page after page, and one fault in
 * fault_period of each thread is recorded: the recorded faults of such a loop come
 * fault_period pages apart, from one thread, cpu and instruction (with several arrays
 * initialised in lockstep, each array's from its own instruction).  A fault that continues
 * its thread and instruction's open run (same process, thread, cpu, instruction, flags, source and page
 * size; its page `stride` bytes after the run's last, the stride set by the run's second
 * fault and at most NMP_RUN_MAX_STRIDE; within NMP_RUN_MAX_SPAN ns of the run's first) is
 * counted in it; any other fault closes the open run as one row and opens its own.  The
 * row is the first fault's, with `run` faults in all, the `stride` between their pages and
 * the `span` from the first fault's time to the last's: the faults between are at
 * first + k x stride (their in-page offset is the first's), their times spread evenly
 * over the span.  Runs are also closed before each flush of the tables (about once a
 * second) and at the end.
 */
#include "nmp_collector.h"

#include <stdlib.h>
#include <string.h>

#define NMP_RUN_SLOTS 256              /* open runs at once: a slot per thread and instruction */
#define NMP_RUN_MAX_STRIDE (1u << 30)   /* bytes between two faults of a run */
#define NMP_RUN_MAX_SPAN 4000000000ull  /* ns from a run's first fault to its last */
#define NMP_PAGE 4096u                  /* strides are whole base pages */

struct nmp_fault_run {
    uint64_t v[NMP_faults_NCOLS]; /* the first fault's row; run, stride, span kept up to date */
    uint64_t last_addr;
    int open;
};

static void write_run(struct nmp_collector *c, struct nmp_fault_run *r)
{
    if (!r->open)
        return;
    r->open = 0;
    if (nmp_table_append(c->t.faults, r->v) != 0)
        nmp_table_failed(c, "faults");
}

/* Whether fault `v` continues the open run `r`; updates the run if so. */
static int extend(struct nmp_fault_run *r, const uint64_t *v)
{
    static const int same[] = {NMP_faults_pid,   NMP_faults_tid,    NMP_faults_cpu,
                               NMP_faults_ip,    NMP_faults_flags,  NMP_faults_source,
                               NMP_faults_page_size};
    if (!r->open)
        return 0;
    for (size_t i = 0; i < sizeof same / sizeof *same; i++)
        if (r->v[same[i]] != v[same[i]])
            return 0;
    uint64_t t = v[NMP_faults_time], t0 = r->v[NMP_faults_time];
    uint64_t page = v[NMP_faults_addr] / NMP_PAGE, last = r->last_addr / NMP_PAGE;
    if (t < t0 || t - t0 > NMP_RUN_MAX_SPAN || r->v[NMP_faults_run] >= UINT32_MAX || page <= last)
        return 0;
    uint64_t stride = (page - last) * NMP_PAGE;
    if (r->v[NMP_faults_run] == 1) {
        if (stride > NMP_RUN_MAX_STRIDE)
            return 0;
        r->v[NMP_faults_stride] = stride;
    } else if (stride != r->v[NMP_faults_stride]) {
        return 0;
    }
    r->v[NMP_faults_run]++;
    r->v[NMP_faults_span] = t - t0;
    r->last_addr = v[NMP_faults_addr];
    return 1;
}

void nmp_fault_add(struct nmp_collector *c, const uint64_t *row)
{
    if (!c->runs && !(c->runs = calloc(NMP_RUN_SLOTS, sizeof *c->runs))) {
        uint64_t v[NMP_faults_NCOLS]; /* no memory for runs: one row per fault */
        memcpy(v, row, sizeof v);
        v[NMP_faults_run] = 1;
        if (nmp_table_append(c->t.faults, v) != 0)
            nmp_table_failed(c, "faults");
        return;
    }
    /* one open run per thread and instruction: a loop initialising several arrays in
     * lockstep faults on them in turn, each from its own store */
    uint64_t h = (row[NMP_faults_tid] * 0x9E3779B97F4A7C15ull) ^ (row[NMP_faults_ip] * 0xC2B2AE3D27D4EB4Full);
    struct nmp_fault_run *r = &c->runs[(h >> 32) % NMP_RUN_SLOTS];
    if (extend(r, row))
        return;
    write_run(c, r);
    memcpy(r->v, row, sizeof r->v);
    r->v[NMP_faults_run] = 1;
    r->v[NMP_faults_stride] = 0;
    r->v[NMP_faults_span] = 0;
    r->last_addr = row[NMP_faults_addr];
    r->open = 1;
}

void nmp_fault_runs_close(struct nmp_collector *c)
{
    if (!c->runs || !c->t.faults)
        return;
    for (size_t i = 0; i < NMP_RUN_SLOTS; i++)
        write_run(c, &c->runs[i]);
}
