/* numaprof-collect during a run: struct nmp_collector and the interfaces between the
 * modules that share it (not installed).  As perf keeps evsel.c, mmap.c and session.c
 * apart and builtin-record.c only wires them, sampler.c only wires these:
 *
 *   backend.c     which sampling backend, and why the others were not taken
 *   events.c      the perf events of every cpu and their ring buffers, with fallbacks
 *   drain.c       records copied out of the rings, in time order across them
 *   records.c     one record -> rows of the samples, faults and mappings tables
 *   threads.c     the threads and processes seen, and the threads table
 *   affinity.c    the watcher thread that reads the threads' cpu affinities
 *   pages.c       which node each sampled page is on (move_pages queue)
 *   procfs.c      /proc snapshots: mappings when attaching, numa_maps copies
 *   signals.c     stopping signals and numaprof record's control socket
 *   report.c      collector.json
 *
 * Each part of struct nmp_collector below is owned by one of them (named on the part);
 * the others only read it.  Conventions as in nmp_collect.h.
 */
#ifndef NMP_COLLECTOR_H
#define NMP_COLLECTOR_H

#include <linux/perf_event.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/types.h>
#include <time.h>

#include "nmp_hw.h"
#include "nmp_sampler.h"

#define NMP_MAX_CPUS 4096
#define NMP_MAX_HW_ATTRS 8
#define NMP_MAX_CHILDREN 256 /* --children: processes below the attached one, at most */
#define NMP_REASON_LEN 256
#define NMP_NBACKENDS 3 /* enum nmp_backend */
#define NMP_COMM_LEN 16 /* a thread's name: the kernel's TASK_COMM_LEN without its NUL */

/* ---- backend.c ---- */

struct nmp_backend_choice {
    enum nmp_backend backend;
    char reason[NMP_NBACKENDS][NMP_REASON_LEN]; /* per enum nmp_backend: why taken or not */
    struct perf_event_attr hw_attrs[NMP_MAX_HW_ATTRS];
    int nhw;
};

/* ---- events.c ---- */

/* What an event's samples are. */
enum nmp_ev_kind {
    NMP_EV_SOFT,       /* cpu-clock with the user registers (software backend) */
    NMP_EV_FAULT_SW,   /* page-faults */
    NMP_EV_FAULT_TP,   /* exceptions:page_fault_user */
    NMP_EV_FAULT_DONE, /* minor-faults / major-faults with the data page size */
    NMP_EV_HW,         /* an event of a hardware backend */
    NMP_EV_SIDEBAND,   /* a dummy event: side-band records only */
};

/* How first touches are recorded: the values are those of faults.source
 * (docs/profile-format.md); UNTRIED before the first cpu, NONE when nothing opened. */
enum nmp_fault_source {
    NMP_FAULTS_NONE = -1,
    NMP_FAULTS_UNTRIED = 0,
    NMP_FAULTS_SW = 1,   /* page-faults: before the fault is handled, page size unknown */
    NMP_FAULTS_TP = 2,   /* the tracepoint (root only): with the write bit */
    NMP_FAULTS_DONE = 3, /* completed minor + major faults with the page size (Linux >= 5.11) */
};

struct nmp_ev {
    uint64_t id;
    enum nmp_ev_kind kind;
    int fd;
    struct perf_event_attr attr; /* as opened: the layout of its samples */
};

struct nmp_ring {
    int fd, cpu, hup;
    struct perf_event_mmap_page *meta;
    uint8_t *data;
    size_t data_size, map_len;
};

struct nmp_events {
    struct nmp_ev *evs; /* sorted by id once all are open (nmp_ev_of) */
    size_t nev, evcap;
    struct nmp_ring *rings; /* one per cpu */
    size_t nring, ringcap;
    int ncpus, cpus[NMP_MAX_CPUS];
    enum nmp_fault_source fault_source;
    int tp_off_addr, tp_off_ip, tp_off_err; /* the tracepoint's fields in its raw data */
};

/* ---- drain.c ---- */

struct nmp_rec {
    uint64_t time, seq;
    size_t off;
    uint32_t len;
    uint16_t type, misc;
};

struct nmp_drain {
    uint8_t *stage; /* the records of one drain, copied out of the rings */
    size_t stage_len, stage_cap;
    struct nmp_rec *recs;
    size_t nrecs, reccap;
    uint64_t seq;
};

/* ---- threads.c ---- */

struct nmp_thread {
    uint32_t pid, tid, ppid;
    uint64_t start, end, samples;
    uint64_t tls_base; /* its thread pointer (%fs base), from the shim or ptrace; 0 unknown */
    char comm[NMP_COMM_LEN + 1];
    int alive;
    int tls_asked; /* its registers were asked for the pointer (once: it may have ended) */
};

struct nmp_tls_module {
    uint64_t base, offset; /* load address; the block's offset below a thread's pointer */
};

struct nmp_process {
    uint32_t pid;
    int alive;
    uint64_t tls_read; /* bytes of its shim's tls.<pid> read */
    struct nmp_tls_module *tls_mods; /* its modules' static TLS blocks (shim) */
    size_t ntls_mods, tls_mods_cap;
};

struct nmp_tasks {
    struct nmp_thread *threads;
    size_t nthreads, thcap;
    struct nmp_u32map tid_index; /* tid -> index+1 of its latest entry in threads */
    struct nmp_process *procs;
    size_t nprocs, pcap;
};

/* ---- pages.c ---- */

struct nmp_page_ent {
    uint64_t page, last_ns; /* last_ns == 0: never queried */
    uint32_t pid;
    uint8_t used, pending;
};

struct nmp_pages {
    struct nmp_page_ent *ents; /* open addressing by (pid, page) */
    size_t cap, count;
    uint64_t *pend; /* indexes into ents, waiting for move_pages */
    size_t npend, pendcap;
};

/* faults.flags (docs/profile-format.md) */
enum nmp_fault_flags { NMP_FAULT_WRITE = 1, NMP_FAULT_WRITE_KNOWN = 2 };

/* ---- sampler.c (the counts: records.c and pages.c) ---- */

struct nmp_counts {
    uint64_t samples, with_address, lost, throttled, unthrottled, faults, page_queries,
        outside_user, hw_decode_errors, malformed;
    uint64_t rules[NMP_RULE_LIMIT]; /* samples per value of samples.rule */
};

struct nmp_tables {
    struct nmp_table *samples, *faults, *pages, *maps, *counters;
};

struct nmp_fault_state; /* faultruns.c */

/* The program and how its run ended (sampler.c, signals.c). */
struct nmp_run {
    pid_t root;
    uint64_t start_ns, end_ns;
    struct timespec start_rt, end_rt;
    int exit_status, term_signal, have_status;
    const char *interrupted;
    char exec_error[96]; /* why the command could not be executed ("command not found"); "" ran */
    int cli_gone; /* numaprof record ended before the program: leave the program alone */
};

/* Signals received directly and not yet matched by numaprof record's relay of the same
 * signal (signals.c). */
struct nmp_relay {
    unsigned direct_unmatched[NSIG];
    uint64_t direct_time[NSIG];
};

/* numaprof's own files in the program: the profile directory (the shim's record files)
 * and the shim library; their mappings are flagged NMP_MAP_NUMAPROF (records.c). */
struct nmp_own_files {
    char dir[4096], shim[4096], alloc_dir[4096];
    size_t dir_len, alloc_dir_len;
};

struct nmp_node_counters {
    struct nmp_hw_counters *h;
    int n;
    char why[256];
};

struct nmp_collector {
    const struct nmp_config *cfg;
    char *err; /* NMP_ERRLEN: the one line of a failure */
    struct nmp_backend_choice be;
    struct nmp_events ev;
    struct nmp_drain drain;
    struct nmp_decoder *dec;
    struct nmp_tables t;
    struct nmp_fault_state *fault_state; /* open runs and repeats of faults (faultruns.c) */
    /* data mappings written already (hashes; 0 empty): a heap that glibc grows and trims
     * with brk repeats a few ranges 10^5 times a second, each a PERF_RECORD_MMAP2 */
    uint64_t *maps_seen;
    size_t nmaps_seen;
    struct nmp_tasks tasks;
    struct nmp_affwatch *aff;
    struct nmp_topology_job topo; /* topology.xml/json, written while the program runs */
    struct nmp_pages pages;
    struct nmp_counts n;
    struct nmp_node_counters nodes;
    struct nmp_run run;
    struct nmp_relay relay;
    struct nmp_own_files own;
    char **warnings;
    size_t nwarn, warncap;
    int table_warned; /* a table write failure was reported */
    int write_errno;  /* the profile's tables could not be written (ENOSPC, EIO, ...) */
};

/* Unaligned little-endian reads from a record. */
static inline uint64_t nmp_rd64(const uint8_t *p)
{
    uint64_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

static inline uint32_t nmp_rd32(const uint8_t *p)
{
    uint32_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

/* sampler.c: a warning for collector.json (and the debug log). */
void nmp_warn(struct nmp_collector *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* A table append failed: one warning for the whole run. */
void nmp_table_failed(struct nmp_collector *c, const char *table);

/* backend.c */
int nmp_backend_select(struct nmp_collector *c);
const char *nmp_backend_name(enum nmp_backend b);

/* events.c: opens the events of `pid` (launch: the stopped child, enabled at its exec;
 * else every thread of a running process).  0, or -1 with c->err. */
int nmp_events_open(struct nmp_collector *c, pid_t pid, int launch);
void nmp_events_disable(struct nmp_collector *c);
void nmp_events_close(struct nmp_collector *c);
/* The event of a record's id, NULL if unknown. */
const struct nmp_ev *nmp_ev_of(const struct nmp_events *ev, uint64_t id);

/* drain.c: copies every complete record out of the rings and processes them in time
 * order (nmp_record). */
void nmp_drain(struct nmp_collector *c);
void nmp_drain_free(struct nmp_drain *d);

/* faultruns.c: a fault's row (NMP_faults_* columns), counted with its page's repeats in
 * the window or joined to its thread's open run when it continues it; nmp_fault_runs_close
 * writes the open runs and the repeats, and starts a new window (before a flush, at the
 * end). */
void nmp_fault_add(struct nmp_collector *c, const uint64_t *row);
void nmp_fault_runs_close(struct nmp_collector *c);

/* records.c */
void nmp_record(struct nmp_collector *c, const uint8_t *rec, uint32_t len, uint64_t time);
/* One row of the mappings table (and the decoder's view of the process). */
void nmp_mapping_add(struct nmp_collector *c, uint64_t time, uint32_t pid, uint64_t start,
                     uint64_t len, uint64_t pgoff, uint32_t prot, uint32_t flags,
                     const char *path);

/* threads.c */
struct nmp_thread *nmp_thread_find(struct nmp_tasks *t, uint32_t tid);
struct nmp_thread *nmp_thread_add(struct nmp_tasks *t, uint32_t pid, uint32_t tid,
                                  uint32_t ppid, uint64_t start);
/* The thread of a record at `time`: a new entry when the tid is unknown or was reused. */
struct nmp_thread *nmp_thread_of(struct nmp_tasks *t, uint32_t pid, uint32_t tid,
                                 uint64_t time);
/* The thread pointer of thread `tid` of process `pid`: what the shim recorded in
 * <dir>/tls.<pid> as the thread started (read again when a thread is not found); without
 * the shim (attach mode, a static program) the thread's registers, through ptrace, once;
 * 0 when unknown (the thread ended, ptrace refused). */
uint64_t nmp_thread_pointer(struct nmp_collector *c, uint32_t pid, uint32_t tid, uint64_t time);
/* Reads its name from /proc (attach: threads that exist before the events). */
void nmp_thread_read_comm(struct nmp_tasks *t, uint32_t pid, uint32_t tid);
struct nmp_process *nmp_process_find(struct nmp_tasks *t, uint32_t pid);
/* A process of the program: its numa_maps is copied, its threads' affinities read. */
void nmp_process_add(struct nmp_collector *c, uint32_t pid);
/* Stops the affinity watcher and writes the threads table. */
int nmp_threads_write(struct nmp_collector *c);
void nmp_tasks_free(struct nmp_tasks *t);

/* affinity.c: a thread of the collector's own lists the program's threads in /proc and
 * reads their affinities (why: the top of affinity.c). */
struct nmp_affwatch;
struct nmp_affwatch *nmp_aff_new(void); /* NULL with errno */
/* Starts the thread; call with the stopping signals blocked (it inherits the mask). */
int nmp_aff_start(struct nmp_affwatch *w);
void nmp_aff_watch_pid(struct nmp_affwatch *w, uint32_t pid);
/* Stops the thread (a last scan first) and indexes what it read, for nmp_aff_lookup. */
void nmp_aff_finish(struct nmp_affwatch *w);
/* The first and last affinity read of thread tid of pid during [start, end] (end 0:
 * still running); NULL when never read. */
void nmp_aff_lookup(const struct nmp_affwatch *w, uint32_t pid, uint32_t tid, uint64_t start,
                    uint64_t end, const char **first, const char **last);
void nmp_aff_free(struct nmp_affwatch *w);

/* pages.c */
void nmp_page_note(struct nmp_collector *c, uint32_t pid, uint64_t addr, uint64_t now);
/* Asks move_pages for the pending pages (a bounded number per call). */
void nmp_pages_query(struct nmp_collector *c);
void nmp_pages_free(struct nmp_pages *p);

/* procfs.c */
/* Attach mode: the process's current mappings, as if MMAP2 records had come. */
void nmp_mappings_from_proc(struct nmp_collector *c, uint32_t pid);
/* Copies numa_maps of every process still running. */
void nmp_numa_maps_copy_all(struct nmp_collector *c);
/* The processes `pid` started, and theirs, running now (from each one's parent in
 * /proc/<pid>/stat), into out[0..max); how many there are (may exceed max). */
size_t nmp_descendants(pid_t pid, pid_t *out, size_t max);

/* signals.c: read what is pending; *done is set when the recording must stop. */
void nmp_signals_read(struct nmp_collector *c, int sfd, int *done);
/* The program's exit status from a wait(2) status that ended it. */
void nmp_status_from_wait(struct nmp_run *run, int st);
void nmp_control_read(struct nmp_collector *c, int sfd, int *done);

/* report.c: <dir>/collector.json, atomically.  0, or -1 with errno. */
int nmp_report_write(struct nmp_collector *c, const struct nmp_shim_totals *shim);

#endif
