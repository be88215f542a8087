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
 *
 * Repeats.  A program that allocates and frees blocks again and again (malloc's top
 * chunk trimmed and grown back, scattered blocks) faults the same scattered pages from
 * the same threads and instructions over and over: 28 000 recorded faults of alloc_heavy
 * in 5 s fall on 117 pages.  A fault that does not continue its run, on a page where its
 * thread and instruction (same process, cpu, flags, source and page size) began a run
 * before, is a repeat: the page's repeats until the next flush of the tables (about a
 * second) are one row with `stride` 0, `run` repeats in all, the first repeat's address
 * and time and the `span` to the last one.  Which thread first touched which page is
 * kept; when each repeat happened within the span is not.  An array filled again at each
 * step stays a run a step: only the page its run begins on repeats.  A table of
 * NMP_REPEAT_SLOTS pages holds the pages runs began on; one whose slot another page takes
 * is written out and forgotten, so it begins a run of its own when faulted again.
 */
#include "nmp_collector.h"

#include <stdlib.h>
#include <string.h>

#define NMP_RUN_SLOTS 256              /* open runs at once: a slot per thread and instruction */
#define NMP_RUN_MAX_STRIDE (1u << 30)   /* bytes between two faults of a run */
#define NMP_RUN_MAX_SPAN 4000000000ull  /* ns from a run's first fault to its last */
#define NMP_PAGE 4096u                  /* strides are whole base pages */

#define NMP_REPEAT_SLOTS 4096          /* pages faulted in the window, whose repeats are counted */

struct nmp_fault_run {
    uint64_t v[NMP_faults_NCOLS]; /* the first fault's row; run, stride, span kept up to date */
    uint64_t last_addr;
    int open;
};

/* A page faulted in this window: its first fault went to the runs; its repeats, if any,
 * are counted in v (run > 0: the first repeat's row, run and span kept up to date). */
struct nmp_fault_repeat {
    uint64_t v[NMP_faults_NCOLS];
    uint64_t page;
    int used;
};

struct nmp_fault_state {
    struct nmp_fault_run runs[NMP_RUN_SLOTS];
    struct nmp_fault_repeat repeats[NMP_REPEAT_SLOTS];
};


/* Whether fault `v` continues the open run `r`; updates the run if so. */
/* The columns a fault shares with the others of its run, or with its page's repeats. */
static const int same_source[] = {NMP_faults_pid,   NMP_faults_tid,   NMP_faults_cpu,
                                  NMP_faults_ip,    NMP_faults_flags, NMP_faults_source,
                                  NMP_faults_page_size};

static int extend(struct nmp_fault_run *r, const uint64_t *v)
{
    if (!r->open)
        return 0;
    for (size_t i = 0; i < sizeof same_source / sizeof *same_source; i++)
        if (r->v[same_source[i]] != v[same_source[i]])
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

/* Writes the repeats counted in slot p, if any; the page stays known (run 0: none since). */
static void write_repeats(struct nmp_collector *c, struct nmp_fault_repeat *p)
{
    if (p->used && p->v[NMP_faults_run] > 0 && nmp_table_append(c->t.faults, p->v) != 0)
        nmp_table_failed(c, "faults");
    p->v[NMP_faults_run] = 0;
}

/* Whether fault `v` repeats the page of slot `p` (counted there if so); else the slot is
 * written out and taken over by v's page. */
static int repeat(struct nmp_collector *c, struct nmp_fault_repeat *p, const uint64_t *v)
{
    uint64_t page = v[NMP_faults_addr] / NMP_PAGE, t = v[NMP_faults_time];
    int same = p->used && p->page == page;
    for (size_t i = 0; same && i < sizeof same_source / sizeof *same_source; i++)
        same = p->v[same_source[i]] == v[same_source[i]];
    if (same && p->v[NMP_faults_run] == 0) { /* the first repeat: its row */
        memcpy(p->v, v, sizeof p->v);
        p->v[NMP_faults_run] = 1;
        p->v[NMP_faults_stride] = 0;
        p->v[NMP_faults_span] = 0;
        return 1;
    }
    uint64_t t0 = p->v[NMP_faults_time];
    if (same && t >= t0 && t - t0 <= NMP_RUN_MAX_SPAN && p->v[NMP_faults_run] < UINT32_MAX) {
        p->v[NMP_faults_run]++;
        p->v[NMP_faults_span] = t - t0;
        return 1;
    }
    write_repeats(c, p);
    memcpy(p->v, v, sizeof p->v); /* the page and its source; run 0: no repeat yet */
    p->v[NMP_faults_run] = 0;
    p->page = page;
    p->used = 1;
    return 0;
}

/* The repeats' slot of a fault's page, thread and instruction. */
static struct nmp_fault_repeat *repeat_slot(struct nmp_collector *c, const uint64_t *v)
{
    uint64_t h = (v[NMP_faults_tid] * 0x9E3779B97F4A7C15ull) ^ (v[NMP_faults_ip] * 0xC2B2AE3D27D4EB4Full) ^
                 ((v[NMP_faults_addr] / NMP_PAGE) * 0x165667B19E3779F9ull);
    return &c->fault_state->repeats[(h >> 32) % NMP_REPEAT_SLOTS];
}

static void write_run(struct nmp_collector *c, struct nmp_fault_run *r)
{
    if (!r->open)
        return;
    r->open = 0;
    if (nmp_table_append(c->t.faults, r->v) != 0)
        nmp_table_failed(c, "faults");
}

void nmp_fault_add(struct nmp_collector *c, const uint64_t *row)
{
    if (!c->fault_state && !(c->fault_state = calloc(1, sizeof *c->fault_state))) {
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
    struct nmp_fault_run *r = &c->fault_state->runs[(h >> 32) % NMP_RUN_SLOTS];
    if (extend(r, row))
        return;
    /* not the next page of its run: a repeat of a page that began a run in this window,
     * or it begins one (and its page is looked for in the window from now on) */
    if (repeat(c, repeat_slot(c, row), row))
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
    if (!c->fault_state || !c->t.faults)
        return;
    for (size_t i = 0; i < NMP_RUN_SLOTS; i++)
        write_run(c, &c->fault_state->runs[i]);
    for (size_t i = 0; i < NMP_REPEAT_SLOTS; i++)
        write_repeats(c, &c->fault_state->repeats[i]); /* the pages stay known */
}
