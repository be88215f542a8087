/* The sampler: perf events per cpu (inherited by every thread and child process of the
 * command), ring-buffer draining, the side-band records (FORK/EXIT/COMM/MMAP2) that give
 * the threads and mappings tables, page-location queries, and collector.json.  One more
 * thread, the affinity watcher, reads the threads' cpu affinities from /proc.
 *
 * Events are opened per cpu with pid = the command and inherit=1, one ring buffer per
 * cpu (an inherited per-task event with cpu=-1 cannot be mmapped).  Every event carries
 * PERF_SAMPLE_IDENTIFIER so the records of several events sharing a ring (SET_OUTPUT)
 * can be told apart, and sample_id_all so side-band records carry their time; records
 * of one drain are processed in time order across the rings.
 */
#include "nmp_sampler.h"

#include "nmp_decode.h"
#include "nmp_hw.h"
#include "nmp_schema.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/perf_event.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define TICK_NS 50000000ULL          /* drain + page queries */
#define SLOW_TICK_NS 1000000000ULL   /* affinity, numa_maps, table flush */
#define PAGE_REQUERY_NS 1000000000ULL
#define MAX_PAGE_QUERIES_PER_TICK 8192
#define MAX_CPUS 4096
#define MAX_HW_ATTRS 8

enum ev_kind { EV_SOFT, EV_FAULT_SW, EV_FAULT_TP, EV_FAULT_DONE, EV_HW, EV_SIDEBAND };

struct ev {
    uint64_t id;
    int kind;
    int attr_idx; /* EV_HW: index into hw_attrs */
    uint64_t sample_type;
    int fd;
};

struct ring {
    int fd, cpu, hup;
    struct perf_event_mmap_page *meta;
    uint8_t *data;
    size_t data_size, map_len;
};

struct rec {
    uint64_t time, seq;
    size_t off;
    uint32_t len;
    uint16_t type, misc;
};

struct thread {
    uint32_t pid, tid, ppid;
    uint64_t start, end, samples;
    char comm[17];
    int alive;
};

struct affent {
    uint32_t pid, tid;
    uint64_t seen_first, seen_last, read_last, sum; /* CLOCK_MONOTONIC ns */
    char *first, *last;                             /* last NULL: same as first */
    uint32_t scan;
};

struct affwatch {
    pthread_t th;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int init, started, stop; /* stop: under mu */
    uint32_t *pids;      /* processes to list: under mu */
    size_t npids, pidcap;
    /* the watcher's own (the main thread reads them after the join) */
    struct affent *ents;
    size_t nents, entcap;
    uint32_t *hash; /* tid -> index+1 of its newest entry */
    size_t hcap;
    uint32_t scan;
    size_t *order; /* after the stop: entries by tid */
};


struct proc {
    uint32_t pid;
    int alive;
};

struct page_ent {
    uint64_t page, last_ns; /* last_ns == 0: never queried */
    uint32_t pid;
    uint8_t used, pending;
};

struct collector {
    const struct nmp_config *cfg;
    char *err;
    int backend; /* enum nmp_backend */
    char reason[3][256];
    struct perf_event_attr hw_attrs[MAX_HW_ATTRS];
    int nhw;
    int fault_source;
    int tp_off_addr, tp_off_ip, tp_off_err;
    int ncpus, cpus[MAX_CPUS];

    struct ev *evs;
    int nev, evcap;
    struct ring *rings;
    int nring;

    struct nmp_decoder *dec;
    struct nmp_table *t_samples, *t_faults, *t_pages, *t_maps, *t_counters;

    struct thread *threads;
    size_t nthreads, thcap;
    uint32_t *thash; /* tid -> index+1 of its latest entry in threads (open addressing) */
    size_t thash_cap;
    struct proc *procs;
    size_t nprocs, pcap;
    struct affwatch aff;

    struct page_ent *pages;
    size_t pcapacity, pcount;
    uint64_t *pend; /* indexes into pages */
    size_t npend, pendcap;

    uint8_t *stage;
    size_t stage_len, stage_cap;
    struct rec *recs;
    size_t nrecs, reccap;
    uint64_t seq;

    uint64_t samples, with_address, lost, throttled, unthrottled, faults, page_queries,
        outside_user, hw_decode_errors, malformed;
    uint64_t rules[NMP_RULE_LIMIT]; /* samples per value of samples.rule */
    char **warnings;
    int nwarn;
    int write_errno; /* the profile's tables could not be written (ENOSPC, EIO, ...) */

    struct nmp_hw_counters *node_counters;
    int n_node_counters;
    char node_counters_why[256];

    uint64_t start_ns, end_ns;
    struct timespec start_rt, end_rt;
    pid_t root;
    int exit_status, term_signal, have_status;
    const char *interrupted;
    int cli_gone; /* numaprof record ended before the program: leave the program alone */
    /* numaprof's own files in the program: the profile directory (the shim's record
     * files) and the shim library; their mappings are flagged NMP_MAP_NUMAPROF */
    char own_dir[4096], own_shim[4096];
    size_t own_dir_len;
    /* signals received directly and not yet matched by numaprof record's relay of the
     * same signal (see on_relayed) */
    unsigned direct_unmatched[NSIG];
    uint64_t direct_time[NSIG];
};

/* ---------------------------------------------------------------- small helpers */

static void warn(struct collector *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void warn(struct collector *c, const char *fmt, ...)
{
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    nmp_debug("warning: %s", buf);
    char **nw = realloc(c->warnings, (size_t)(c->nwarn + 1) * sizeof *nw);
    if (!nw)
        return;
    c->warnings = nw;
    if ((c->warnings[c->nwarn] = strdup(buf)))
        c->nwarn++;
}

static int read_int_file(const char *path, long *out)
{
    FILE *f = fopen(path, "re");
    if (!f)
        return -1;
    int ok = fscanf(f, "%ld", out) == 1;
    fclose(f);
    return ok ? 0 : -1;
}

static long perf_open(struct perf_event_attr *a, pid_t pid, int cpu, int group)
{
    return syscall(SYS_perf_event_open, a, pid, cpu, group, PERF_FLAG_FD_CLOEXEC);
}

static const char *backend_name(int b)
{
    return b == NMP_BACKEND_PEBS ? "pebs" : b == NMP_BACKEND_IBS ? "ibs" : "soft";
}

/* One line of advice for a perf_event_open failure (as perf does). */
static void perf_error(struct collector *c, const char *what, int e)
{
    long paranoid = 99;
    read_int_file("/proc/sys/kernel/perf_event_paranoid", &paranoid);
    if ((e == EACCES || e == EPERM) && c->cfg->attach_pid > 0)
        snprintf(c->err, NMP_ERRLEN,
                 "perf_event_open(%s) on process %d denied: attaching needs the same user "
                 "(and ptrace access: kernel.yama.ptrace_scope) or root/CAP_PERFMON, and "
                 "perf_event_paranoid <= 2 (now %ld)",
                 what, (int)c->cfg->attach_pid, paranoid);
    else if (e == EACCES || e == EPERM)
        snprintf(c->err, NMP_ERRLEN,
                 "perf_event_open(%s) denied (perf_event_paranoid=%ld): user-space sampling "
                 "of your own processes needs perf_event_paranoid <= 2 (sysctl "
                 "kernel.perf_event_paranoid=2), CAP_PERFMON or root; in a container the "
                 "runtime's seccomp profile may block perf_event_open",
                 what, paranoid);
    else if (e == ENOENT || e == EOPNOTSUPP || e == ENODEV)
        snprintf(c->err, NMP_ERRLEN, "perf_event_open(%s): event not supported by this kernel (%s)",
                 what, strerror(e));
    else if (e == EMFILE)
        snprintf(c->err, NMP_ERRLEN, "perf_event_open(%s): too many open files (raise ulimit -n)",
                 what);
    else
        snprintf(c->err, NMP_ERRLEN, "perf_event_open(%s) failed: %s", what, strerror(e));
}

/* ---------------------------------------------------------------- tables */


static int open_tables(struct collector *c)
{
    const char *dir = c->cfg->dir;
    /* the software backend has no latency, data source or physical address columns */
    int nsc = c->backend == NMP_BACKEND_SOFT ? NMP_samples_rule + 1 : NMP_samples_NCOLS;
    if (!(c->t_samples = nmp_table_open(dir, NMP_TABLE_ID_samples, nsc)) ||
        !(c->t_faults = nmp_table_open(dir, NMP_TABLE_ID_faults, -1)) ||
        !(c->t_pages = nmp_table_open(dir, NMP_TABLE_ID_page_nodes, -1)) ||
        !(c->t_maps = nmp_table_open(dir, NMP_TABLE_ID_mappings, -1))) {
        snprintf(c->err, NMP_ERRLEN, "cannot create the profile tables in %s: %s", dir,
                 strerror(errno));
        return -1;
    }
    return 0;
}

static void table_fail(struct collector *c, const char *name)
{
    static int reported;
    if (!reported++)
        warn(c, "writing the %s table failed: %s", name, strerror(errno));
}

/* ---------------------------------------------------------------- threads, processes */

static size_t thash_slot(const struct collector *c, uint32_t tid)
{
    size_t mask = c->thash_cap - 1;
    size_t k = (tid * 2654435761u) & mask;
    while (c->thash[k] && c->threads[c->thash[k] - 1].tid != tid)
        k = (k + 1) & mask;
    return k;
}

static struct thread *find_thread(struct collector *c, uint32_t tid)
{
    if (!c->thash_cap)
        return NULL;
    uint32_t v = c->thash[thash_slot(c, tid)];
    return v ? &c->threads[v - 1] : NULL;
}

/* Makes threads[idx] the entry found for its tid. */
static void thash_put(struct collector *c, size_t idx)
{
    if ((c->nthreads + 1) * 2 > c->thash_cap) {
        size_t ncap = c->thash_cap ? c->thash_cap * 2 : 256;
        uint32_t *old = c->thash;
        size_t ocap = c->thash_cap;
        uint32_t *nh = calloc(ncap, sizeof *nh);
        if (!nh)
            return;
        c->thash = nh;
        c->thash_cap = ncap;
        for (size_t i = 0; i < ocap; i++)
            if (old[i])
                c->thash[thash_slot(c, c->threads[old[i] - 1].tid)] = old[i];
        free(old);
    }
    c->thash[thash_slot(c, c->threads[idx].tid)] = (uint32_t)(idx + 1);
}

static struct thread *add_thread(struct collector *c, uint32_t pid, uint32_t tid, uint32_t ppid,
                                 uint64_t start)
{
    if (c->nthreads == c->thcap) {
        size_t nc = c->thcap ? c->thcap * 2 : 64;
        struct thread *nt = realloc(c->threads, nc * sizeof *nt);
        if (!nt)
            return NULL;
        c->threads = nt;
        c->thcap = nc;
    }
    struct thread *t = &c->threads[c->nthreads++];
    memset(t, 0, sizeof *t);
    t->pid = pid;
    t->tid = tid;
    t->ppid = ppid;
    t->start = start;
    t->alive = 1;
    thash_put(c, c->nthreads - 1);
    return t;
}

static struct thread *thread_of(struct collector *c, uint32_t pid, uint32_t tid, uint64_t time)
{
    struct thread *t = find_thread(c, tid);
    if (!t || (!t->alive && t->end && time > t->end))
        t = add_thread(c, pid, tid, 0, time);
    return t;
}

static struct proc *find_proc(struct collector *c, uint32_t pid)
{
    for (size_t i = 0; i < c->nprocs; i++)
        if (c->procs[i].pid == pid)
            return &c->procs[i];
    return NULL;
}

static void aff_watch_pid(struct affwatch *w, uint32_t pid);

static void add_proc(struct collector *c, uint32_t pid)
{
    aff_watch_pid(&c->aff, pid);
    struct proc *p = find_proc(c, pid);
    if (p) {
        p->alive = 1;
        return;
    }
    if (c->nprocs == c->pcap) {
        size_t nc = c->pcap ? c->pcap * 2 : 16;
        struct proc *np = realloc(c->procs, nc * sizeof *np);
        if (!np)
            return;
        c->procs = np;
        c->pcap = nc;
    }
    c->procs[c->nprocs++] = (struct proc){pid, 1};
}

/* The affinity of a thread as a cpulist ("0-3,8"), malloc'd; NULL when it cannot be read
 * (the thread is gone).  *sum, when given, gets a checksum of the mask to spot changes. */
static char *affinity_of(uint32_t tid, uint64_t *sum)
{
    size_t setsize = CPU_ALLOC_SIZE(MAX_CPUS);
    cpu_set_t *set = CPU_ALLOC(MAX_CPUS);
    if (!set)
        return NULL;
    char *out = NULL;
    if (sched_getaffinity((pid_t)tid, setsize, set) == 0) {
        unsigned char flags[MAX_CPUS];
        char text[8192];
        uint64_t h = 1469598103934665603ULL;
        for (int i = 0; i < MAX_CPUS; i++) {
            flags[i] = CPU_ISSET_S(i, setsize, set) != 0;
            h = (h ^ flags[i]) * 1099511628211ULL;
        }
        nmp_cpulist_format(flags, MAX_CPUS, text, sizeof text);
        out = strdup(text);
        if (sum)
            *sum = h;
    }
    CPU_FREE(set);
    return out;
}

/* ---------------------------------------------------------------- affinity watcher */

/* Threads' affinities are read from /proc by a thread of the collector's own, not by the
 * main loop: that loop can be seconds behind the program (the first records of a run make
 * the decoder load every mapped binary; a loaded machine; the lab's emulated cpus), and a
 * thread that started and ended within that lag was gone (ESRCH) by the time its FORK
 * record was processed, leaving its affinity empty.  The watcher lists
 * /proc/PID/task of every recorded process every AFF_SCAN_NS (longer when a scan is
 * costly: at most ~2 % of a cpu).  A thread is re-read on every scan while it is young,
 * since its first read can come before the affinity its creator gives it right after
 * clone (glibc's pthread_attr_setaffinity_np, libgomp's places), then every
 * AFF_REFRESH_NS: the last value read is the thread's final affinity. */
#define AFF_SCAN_NS 10000000ULL
#define AFF_YOUNG_NS 100000000ULL
#define AFF_REFRESH_NS 100000000ULL

static size_t aff_slot(const struct affwatch *w, uint32_t tid)
{
    size_t mask = w->hcap - 1, k = (tid * 2654435761u) & mask;
    while (w->hash[k] && w->ents[w->hash[k] - 1].tid != tid)
        k = (k + 1) & mask;
    return k;
}

static struct affent *aff_new(struct affwatch *w, uint32_t pid, uint32_t tid, uint64_t now)
{
    if ((w->nents + 1) * 2 > w->hcap) {
        size_t ncap = w->hcap ? w->hcap * 2 : 256;
        uint32_t *nh = calloc(ncap, sizeof *nh);
        if (!nh)
            return NULL;
        uint32_t *old = w->hash;
        size_t ocap = w->hcap;
        w->hash = nh;
        w->hcap = ncap;
        for (size_t i = 0; i < ocap; i++)
            if (old[i])
                w->hash[aff_slot(w, w->ents[old[i] - 1].tid)] = old[i];
        free(old);
    }
    if (w->nents == w->entcap) {
        size_t nc = w->entcap ? w->entcap * 2 : 64;
        struct affent *ne = realloc(w->ents, nc * sizeof *ne);
        if (!ne)
            return NULL;
        w->ents = ne;
        w->entcap = nc;
    }
    struct affent *e = &w->ents[w->nents++];
    *e = (struct affent){.pid = pid, .tid = tid, .seen_first = now};
    w->hash[aff_slot(w, tid)] = (uint32_t)w->nents;
    return e;
}

/* One thread listed by the scan: a new entry, or a re-read when it is due. */
static void aff_see(struct affwatch *w, uint32_t pid, uint32_t tid, uint64_t now)
{
    uint32_t v = w->hcap ? w->hash[aff_slot(w, tid)] : 0;
    struct affent *e = v ? &w->ents[v - 1] : NULL;
    /* not listed by the previous scan: a new thread that reuses the tid */
    if (e && (e->pid != pid || e->scan + 1 < w->scan))
        e = NULL;
    if (!e) {
        uint64_t sum;
        char *a = affinity_of(tid, &sum);
        if (!a || !(e = aff_new(w, pid, tid, now))) {
            free(a);
            return;
        }
        e->first = a;
        e->sum = sum;
        e->read_last = now;
    } else if (now - e->read_last >= (now - e->seen_first < AFF_YOUNG_NS ? 0 : AFF_REFRESH_NS)) {
        uint64_t sum;
        char *a = affinity_of(tid, &sum);
        if (a && sum != e->sum) {
            free(e->last);
            e->last = a;
            e->sum = sum;
        } else {
            free(a);
        }
        if (a)
            e->read_last = now;
    }
    e->scan = w->scan;
    e->seen_last = now;
}

static void aff_scan(struct affwatch *w)
{
    pthread_mutex_lock(&w->mu);
    size_t n = w->npids;
    uint32_t *pids = n ? malloc(n * sizeof *pids) : NULL;
    if (pids)
        memcpy(pids, w->pids, n * sizeof *pids);
    pthread_mutex_unlock(&w->mu);
    if (!pids)
        return;
    w->scan++;
    size_t ngone = 0;
    for (size_t i = 0; i < n; i++) {
        char path[64];
        snprintf(path, sizeof path, "/proc/%" PRIu32 "/task", pids[i]);
        DIR *d = opendir(path);
        if (!d) {
            if (errno == ENOENT)
                pids[ngone++] = pids[i]; /* gone: not listed again */
            continue;
        }
        uint64_t now = nmp_now_ns();
        struct dirent *de;
        while ((de = readdir(d)) != NULL) {
            char *end;
            unsigned long tid = strtoul(de->d_name, &end, 10);
            if (*end || end == de->d_name)
                continue;
            aff_see(w, pids[i], (uint32_t)tid, now);
        }
        closedir(d);
    }
    pthread_mutex_lock(&w->mu);
    for (size_t g = 0; g < ngone; g++)
        for (size_t i = 0; i < w->npids; i++)
            if (w->pids[i] == pids[g]) {
                w->pids[i] = w->pids[--w->npids];
                break;
            }
    pthread_mutex_unlock(&w->mu);
    free(pids);
}

static void *aff_main(void *arg)
{
    struct affwatch *w = arg;
    pthread_mutex_lock(&w->mu);
    while (!w->stop) {
        pthread_mutex_unlock(&w->mu);
        uint64_t t0 = nmp_now_ns();
        aff_scan(w);
        uint64_t spent = nmp_now_ns() - t0;
        uint64_t wait = spent * 50 > AFF_SCAN_NS ? spent * 50 : AFF_SCAN_NS;
        struct timespec until;
        clock_gettime(CLOCK_MONOTONIC, &until);
        until.tv_sec += (time_t)(wait / 1000000000ULL);
        until.tv_nsec += (long)(wait % 1000000000ULL);
        if (until.tv_nsec >= 1000000000L) {
            until.tv_sec++;
            until.tv_nsec -= 1000000000L;
        }
        pthread_mutex_lock(&w->mu);
        while (!w->stop && pthread_cond_timedwait(&w->cv, &w->mu, &until) == 0)
            ;
    }
    pthread_mutex_unlock(&w->mu);
    aff_scan(w); /* attach mode: the final affinities of threads still running */
    return NULL;
}

/* Adds a process whose threads the watcher lists. */
static void aff_watch_pid(struct affwatch *w, uint32_t pid)
{
    if (!w->init)
        return;
    pthread_mutex_lock(&w->mu);
    int known = 0;
    for (size_t i = 0; i < w->npids && !known; i++)
        known = w->pids[i] == pid;
    if (!known && w->npids == w->pidcap) {
        size_t nc = w->pidcap ? w->pidcap * 2 : 16;
        uint32_t *np = realloc(w->pids, nc * sizeof *np);
        if (np) {
            w->pids = np;
            w->pidcap = nc;
        }
    }
    if (!known && w->npids < w->pidcap)
        w->pids[w->npids++] = pid;
    pthread_mutex_unlock(&w->mu);
}

static int aff_init(struct affwatch *w)
{
    pthread_condattr_t ca;
    if (pthread_condattr_init(&ca) != 0)
        return -1;
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    int r = pthread_cond_init(&w->cv, &ca);
    pthread_condattr_destroy(&ca);
    if (r != 0)
        return -1;
    if (pthread_mutex_init(&w->mu, NULL) != 0) {
        pthread_cond_destroy(&w->cv);
        return -1;
    }
    w->init = 1;
    return 0;
}

/* Started once the signals are blocked: the watcher inherits the mask (the signalfd
 * receives them). */
static int aff_start(struct affwatch *w)
{
    if (pthread_create(&w->th, NULL, aff_main, w) != 0)
        return -1;
    w->started = 1;
    return 0;
}

static void aff_stop(struct affwatch *w)
{
    if (!w->started)
        return;
    pthread_mutex_lock(&w->mu);
    w->stop = 1;
    pthread_cond_signal(&w->cv);
    pthread_mutex_unlock(&w->mu);
    pthread_join(w->th, NULL);
    w->started = 0;
}

static void aff_free(struct affwatch *w)
{
    if (!w->init)
        return;
    aff_stop(w);
    pthread_mutex_destroy(&w->mu);
    pthread_cond_destroy(&w->cv);
    for (size_t i = 0; i < w->nents; i++) {
        free(w->ents[i].first);
        free(w->ents[i].last);
    }
    free(w->ents);
    free(w->hash);
    free(w->pids);
    free(w->order);
}

static int cmp_affent_tid(const void *a, const void *b, void *arg)
{
    const struct affent *e = arg;
    uint32_t x = e[*(const size_t *)a].tid, y = e[*(const size_t *)b].tid;
    return x < y ? -1 : x > y;
}

/* Stops the watcher and sorts its entries by tid, for aff_lookup. */
static void aff_sort(struct affwatch *w)
{
    aff_stop(w);
    free(w->order);
    w->order = w->nents ? malloc(w->nents * sizeof *w->order) : NULL;
    if (!w->order)
        return;
    for (size_t i = 0; i < w->nents; i++)
        w->order[i] = i;
    qsort_r(w->order, w->nents, sizeof *w->order, cmp_affent_tid, w->ents);
}

/* The affinity the watcher read for a thread of the threads table: of its entries with the
 * same tid and pid that overlap [start, end] (tids are reused), the first read of the
 * earliest and the last of the newest.  NULL: never read. */
static void aff_lookup(const struct affwatch *w, const struct thread *t, const char **first,
                       const char **last)
{
    const struct affent *lo = NULL, *hi = NULL;
    size_t a = 0, b = w->order ? w->nents : 0;
    while (a < b) { /* the first entry with this tid */
        size_t m = a + (b - a) / 2;
        if (w->ents[w->order[m]].tid < t->tid)
            a = m + 1;
        else
            b = m;
    }
    for (size_t i = a; w->order && i < w->nents && w->ents[w->order[i]].tid == t->tid; i++) {
        const struct affent *e = &w->ents[w->order[i]];
        if (e->pid != t->pid || (t->end && e->seen_first > t->end) || e->seen_last < t->start)
            continue;
        if (!lo || e->seen_first < lo->seen_first)
            lo = e;
        if (!hi || e->seen_first > hi->seen_first)
            hi = e;
    }
    *first = lo ? lo->first : NULL;
    *last = hi ? (hi->last ? hi->last : hi->first) : NULL;
}

static void thread_comm(struct collector *c, uint32_t pid, uint32_t tid)
{
    struct thread *t = find_thread(c, tid);
    char path[64];
    snprintf(path, sizeof path, "/proc/%" PRIu32 "/task/%" PRIu32 "/comm", pid, tid);
    FILE *f = t ? fopen(path, "re") : NULL;
    if (!f)
        return;
    if (fgets(t->comm, sizeof t->comm, f))
        t->comm[strcspn(t->comm, "\n")] = 0;
    fclose(f);
}

static int write_threads(struct collector *c)
{
    struct nmp_table *t = nmp_table_open(c->cfg->dir, NMP_TABLE_ID_threads, -1);
    if (!t)
        return -1;
    aff_sort(&c->aff);
    for (size_t i = 0; i < c->nthreads; i++) {
        struct thread *th = &c->threads[i];
        const char *first, *last;
        aff_lookup(&c->aff, th, &first, &last);
        first = first ? first : "";
        last = last ? last : first;
        uint64_t v[NMP_threads_NCOLS] = {
            [NMP_threads_pid] = th->pid, [NMP_threads_tid] = th->tid,
            [NMP_threads_ppid] = th->ppid, [NMP_threads_start_time] = th->start,
            [NMP_threads_end_time] = th->end, [NMP_threads_comm] = (uintptr_t)th->comm,
            [NMP_threads_affinity_first] = (uintptr_t)first,
            [NMP_threads_affinity_last] = (uintptr_t)last, [NMP_threads_samples] = th->samples};
        nmp_table_append(t, v);
    }
    return nmp_table_close(t);
}

/* ---------------------------------------------------------------- page locations */

static int pages_grow(struct collector *c)
{
    size_t ncap = c->pcapacity ? c->pcapacity * 2 : 1 << 14;
    struct page_ent *np = calloc(ncap, sizeof *np);
    if (!np)
        return -1;
    /* rehashing moves entries: pending indexes are rebuilt */
    c->npend = 0;
    for (size_t i = 0; i < c->pcapacity; i++) {
        struct page_ent *e = &c->pages[i];
        if (!e->used)
            continue;
        size_t k = nmp_mix64(e->page ^ ((uint64_t)e->pid << 48)) & (ncap - 1);
        while (np[k].used)
            k = (k + 1) & (ncap - 1);
        np[k] = *e;
        if (e->pending && c->npend < c->pendcap)
            c->pend[c->npend++] = k;
        else
            np[k].pending = 0;
    }
    free(c->pages);
    c->pages = np;
    c->pcapacity = ncap;
    return 0;
}

static void page_note(struct collector *c, uint32_t pid, uint64_t addr, uint64_t now)
{
    uint64_t page = addr & ~4095ULL;
    if (c->pcount * 2 >= c->pcapacity && pages_grow(c) != 0)
        return;
    size_t mask = c->pcapacity - 1;
    size_t k = nmp_mix64(page ^ ((uint64_t)pid << 48)) & mask;
    while (c->pages[k].used && !(c->pages[k].page == page && c->pages[k].pid == pid))
        k = (k + 1) & mask;
    struct page_ent *e = &c->pages[k];
    if (!e->used) {
        *e = (struct page_ent){.page = page, .pid = pid, .used = 1};
        c->pcount++;
    }
    if (e->pending || (e->last_ns && now - e->last_ns < PAGE_REQUERY_NS))
        return;
    if (c->npend == c->pendcap) {
        size_t nc = c->pendcap ? c->pendcap * 2 : 4096;
        uint64_t *np = realloc(c->pend, nc * sizeof *np);
        if (!np)
            return;
        c->pend = np;
        c->pendcap = nc;
    }
    e->pending = 1;
    c->pend[c->npend++] = k;
}

static int cmp_pend(const void *a, const void *b, void *arg)
{
    const struct page_ent *p = arg;
    const struct page_ent *x = &p[*(const uint64_t *)a], *y = &p[*(const uint64_t *)b];
    if (x->pid != y->pid)
        return x->pid < y->pid ? -1 : 1;
    return x->page < y->page ? -1 : x->page > y->page;
}

/* move_pages(pid, n, pages, NULL, status, 0): the node of each page, or -errno. */
static void query_pages(struct collector *c)
{
    if (!c->npend)
        return;
    size_t n = c->npend < MAX_PAGE_QUERIES_PER_TICK ? c->npend : MAX_PAGE_QUERIES_PER_TICK;
    qsort_r(c->pend, n, sizeof *c->pend, cmp_pend, c->pages);
    enum { CHUNK = 1024 };
    void *addrs[CHUNK];
    int status[CHUNK];
    uint64_t now = nmp_now_ns();
    for (size_t i = 0; i < n;) {
        uint32_t pid = c->pages[c->pend[i]].pid;
        size_t j = i;
        while (j < n && j - i < CHUNK && c->pages[c->pend[j]].pid == pid) {
            addrs[j - i] = (void *)(uintptr_t)c->pages[c->pend[j]].page;
            j++;
        }
        long r = syscall(SYS_move_pages, (int)pid, (unsigned long)(j - i), addrs, NULL, status, 0);
        for (size_t k = i; k < j; k++) {
            struct page_ent *e = &c->pages[c->pend[k]];
            e->pending = 0;
            e->last_ns = now;
            if (r < 0)
                continue; /* process gone (ESRCH) or not allowed */
            uint64_t v[NMP_page_nodes_NCOLS] = {
                [NMP_page_nodes_time] = now, [NMP_page_nodes_pid] = pid,
                [NMP_page_nodes_page] = e->page,
                [NMP_page_nodes_node] = (uint64_t)(int64_t)status[k - i]};
            if (nmp_table_append(c->t_pages, v) != 0)
                table_fail(c, "page_nodes");
            c->page_queries++;
        }
        i = j;
    }
    memmove(c->pend, c->pend + n, (c->npend - n) * sizeof *c->pend);
    c->npend -= n;
}

/* ---------------------------------------------------------------- events */

static struct ev *add_ev(struct collector *c, int fd, int kind, int attr_idx, uint64_t st)
{
    if (c->nev == c->evcap) {
        int nc = c->evcap ? c->evcap * 2 : 16;
        struct ev *ne = realloc(c->evs, (size_t)nc * sizeof *ne);
        if (!ne)
            return NULL;
        c->evs = ne;
        c->evcap = nc;
    }
    struct ev *e = &c->evs[c->nev++];
    e->fd = fd;
    e->kind = kind;
    e->attr_idx = attr_idx;
    e->sample_type = st;
    e->id = 0;
    if (ioctl(fd, PERF_EVENT_IOC_ID, &e->id) != 0)
        nmp_debug("PERF_EVENT_IOC_ID: %s", strerror(errno));
    return e;
}

/* The event of a record's id (evs is sorted by id once all are open). */
static const struct ev *ev_of(const struct collector *c, uint64_t id)
{
    int lo = 0, hi = c->nev;
    while (lo < hi) {
        int mid = (lo + hi) / 2;
        if (c->evs[mid].id < id)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < c->nev && c->evs[lo].id == id ? &c->evs[lo] : NULL;
}

static int cmp_ev(const void *a, const void *b)
{
    const struct ev *x = a, *y = b;
    return x->id < y->id ? -1 : x->id > y->id;
}

static void base_attr(const struct collector *c, struct perf_event_attr *a, int launch)
{
    a->size = sizeof *a;
    a->exclude_kernel = 1;
    a->exclude_hv = 1;
    a->use_clockid = 1;
    a->clockid = CLOCK_MONOTONIC;
    a->inherit = 1;
    a->sample_id_all = 1;
    a->disabled = launch;
    a->enable_on_exec = launch;
    a->sample_type |= PERF_SAMPLE_IDENTIFIER | PERF_SAMPLE_TID | PERF_SAMPLE_TIME |
                      PERF_SAMPLE_CPU;
    (void)c;
}

static void sideband_attr(struct perf_event_attr *a, size_t ring_bytes)
{
    a->task = a->comm = a->mmap = a->mmap2 = a->mmap_data = 1;
    a->watermark = 1;
    a->wakeup_watermark = (uint32_t)(ring_bytes / 4);
}

/* exceptions:page_fault_user: id and field offsets from tracefs (root only). */
static int tracepoint_setup(struct collector *c, uint64_t *id)
{
    static const char *roots[] = {"/sys/kernel/tracing", "/sys/kernel/debug/tracing"};
    for (size_t r = 0; r < 2; r++) {
        char path[256];
        long v;
        snprintf(path, sizeof path, "%s/events/exceptions/page_fault_user/id", roots[r]);
        if (read_int_file(path, &v) != 0)
            continue;
        snprintf(path, sizeof path, "%s/events/exceptions/page_fault_user/format", roots[r]);
        FILE *f = fopen(path, "re");
        if (!f)
            continue;
        char line[512];
        c->tp_off_addr = c->tp_off_ip = c->tp_off_err = -1;
        while (fgets(line, sizeof line, f)) {
            char *fld = strstr(line, "field:");
            char *off = strstr(line, "offset:");
            if (!fld || !off)
                continue;
            int o = atoi(off + 7);
            if (strstr(fld, " address;"))
                c->tp_off_addr = o;
            else if (strstr(fld, " ip;"))
                c->tp_off_ip = o;
            else if (strstr(fld, " error_code;"))
                c->tp_off_err = o;
        }
        fclose(f);
        if (c->tp_off_addr < 0 || c->tp_off_ip < 0 || c->tp_off_err < 0)
            return -1;
        *id = (uint64_t)v;
        return 0;
    }
    return -1;
}

static int online_cpus(struct collector *c)
{
    FILE *f = fopen("/sys/devices/system/cpu/online", "re");
    char buf[4096];
    int n = -1;
    if (f) {
        if (fgets(buf, sizeof buf, f))
            n = nmp_cpulist_parse(buf, c->cpus, MAX_CPUS);
        fclose(f);
    }
    if (n <= 0) {
        long k = sysconf(_SC_NPROCESSORS_ONLN);
        n = k > 0 ? (int)(k < MAX_CPUS ? k : MAX_CPUS) : 1;
        for (int i = 0; i < n; i++)
            c->cpus[i] = i;
    }
    c->ncpus = n;
    return n;
}

static int map_ring(struct collector *c, int fd, int cpu)
{
    long psz = sysconf(_SC_PAGESIZE);
    for (size_t pages = 256; pages >= 8; pages /= 2) {
        size_t len = (pages + 1) * (size_t)psz;
        void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        if (p == MAP_FAILED) {
            if (errno == EPERM || errno == ENOMEM)
                continue;
            snprintf(c->err, NMP_ERRLEN, "mmap of the perf ring buffer failed: %s",
                     strerror(errno));
            return -1;
        }
        struct ring *nr = realloc(c->rings, (size_t)(c->nring + 1) * sizeof *nr);
        if (!nr) {
            munmap(p, len);
            return -1;
        }
        c->rings = nr;
        struct ring *r = &c->rings[c->nring++];
        r->fd = fd;
        r->cpu = cpu;
        r->hup = 0;
        r->meta = p;
        r->data = (uint8_t *)p + psz;
        r->data_size = pages * (size_t)psz;
        r->map_len = len;
        if (pages < 64)
            warn(c, "perf ring buffer limited to %zu KiB per cpu (perf_event_mlock_kb); "
                    "samples may be lost", pages * (size_t)psz / 1024);
        return 0;
    }
    snprintf(c->err, NMP_ERRLEN,
             "cannot mmap a perf ring buffer (locked-memory limit: raise "
             "kernel.perf_event_mlock_kb or ulimit -l)");
    return -1;
}

/* Opens every event of one task (or, with inherit, its future descendants) on every
 * cpu.  The first event opened on a cpu owns that cpu's ring; the others write into it. */
static int open_task_events(struct collector *c, pid_t pid, int launch, int *owner_fd,
                            uint64_t tp_id)
{
    size_t ring_guess = 256 * 4096;
    for (int ci = 0; ci < c->ncpus; ci++) {
        int cpu = c->cpus[ci];
        struct perf_event_attr a;
        int lead = -1;
        if (c->backend == NMP_BACKEND_SOFT) {
            memset(&a, 0, sizeof a);
            a.type = PERF_TYPE_SOFTWARE;
            a.config = PERF_COUNT_SW_CPU_CLOCK;
            a.freq = 1;
            a.sample_freq = c->cfg->freq;
            a.sample_type = PERF_SAMPLE_IP | PERF_SAMPLE_REGS_USER;
            a.sample_regs_user = NMP_REGS_MASK;
            base_attr(c, &a, launch);
            sideband_attr(&a, ring_guess);
            long fd = perf_open(&a, pid, cpu, -1);
            if (fd < 0) {
                if (errno == ESRCH)
                    return 1; /* attach: the thread is gone */
                perf_error(c, "cpu-clock", errno);
                return -1;
            }
            if (!add_ev(c, (int)fd, EV_SOFT, 0, a.sample_type))
                return -1;
            lead = (int)fd;
        } else {
            /* a dummy event carries the side-band records and owns the ring */
            memset(&a, 0, sizeof a);
            a.type = PERF_TYPE_SOFTWARE;
            a.config = PERF_COUNT_SW_DUMMY;
            a.sample_period = 1;
            base_attr(c, &a, launch);
            sideband_attr(&a, ring_guess);
            long fd = perf_open(&a, pid, cpu, -1);
            if (fd < 0) {
                if (errno == ESRCH)
                    return 1;
                perf_error(c, "dummy", errno);
                return -1;
            }
            if (!add_ev(c, (int)fd, EV_SIDEBAND, 0, a.sample_type))
                return -1;
            lead = (int)fd;
        }
        if (owner_fd[ci] < 0) {
            if (map_ring(c, lead, cpu) != 0)
                return -1;
            owner_fd[ci] = lead;
        } else if (ioctl(lead, PERF_EVENT_IOC_SET_OUTPUT, owner_fd[ci]) != 0) {
            snprintf(c->err, NMP_ERRLEN, "PERF_EVENT_IOC_SET_OUTPUT: %s", strerror(errno));
            return -1;
        }

        if (c->backend != NMP_BACKEND_SOFT) {
            int group = -1;
            for (int h = 0; h < c->nhw; h++) {
                a = c->hw_attrs[h];
                /* the backend's exclude_* bits stay (IBS cannot exclude the kernel; its
                 * kernel samples are dropped by header.misc) */
                unsigned ek = a.exclude_kernel, eh = a.exclude_hv;
                base_attr(c, &a, launch);
                a.exclude_kernel = ek;
                a.exclude_hv = eh;
                if (h > 0)
                    a.disabled = 0, a.enable_on_exec = 0; /* members follow the leader */
                long fd = perf_open(&a, pid, cpu, group);
                if (fd < 0) {
                    perf_error(c, backend_name(c->backend), errno);
                    return -1;
                }
                if (!add_ev(c, (int)fd, EV_HW, h, a.sample_type))
                    return -1;
                c->hw_attrs[h] = a; /* as opened, for nmp_hw_decode */
                if (h == 0)
                    group = (int)fd;
                if (ioctl((int)fd, PERF_EVENT_IOC_SET_OUTPUT, owner_fd[ci]) != 0) {
                    snprintf(c->err, NMP_ERRLEN, "PERF_EVENT_IOC_SET_OUTPUT: %s", strerror(errno));
                    return -1;
                }
            }
        }

        /* first-touch faults: completed minor and major faults with the size of the page
         * they mapped (a 2 MiB transparent huge page is one fault: Linux >= 5.11
         * PERF_SAMPLE_DATA_PAGE_SIZE, and the minor/major fault events fire after the
         * fault is handled, when the page table has the page); else the tracepoint
         * (write bit known) when allowed, else the software page-faults event with the
         * address (which fires before the fault is handled: page size unknown) */
        if (c->fault_source == 0 || c->fault_source == 3) {
            int opened = 0;
            static const uint64_t done_events[2] = {PERF_COUNT_SW_PAGE_FAULTS_MIN,
                                                    PERF_COUNT_SW_PAGE_FAULTS_MAJ};
            for (int k = 0; k < 2; k++) {
                memset(&a, 0, sizeof a);
                a.type = PERF_TYPE_SOFTWARE;
                a.config = done_events[k];
                a.sample_period = 1;
                a.sample_type = PERF_SAMPLE_IP | PERF_SAMPLE_ADDR | PERF_SAMPLE_DATA_PAGE_SIZE;
                base_attr(c, &a, launch);
                long fd = perf_open(&a, pid, cpu, -1);
                if (fd < 0)
                    break;
                if (!add_ev(c, (int)fd, EV_FAULT_DONE, 0, a.sample_type) ||
                    ioctl((int)fd, PERF_EVENT_IOC_SET_OUTPUT, owner_fd[ci]) != 0) {
                    snprintf(c->err, NMP_ERRLEN, "page-fault events: %s", strerror(errno));
                    return -1;
                }
                opened++;
            }
            if (opened == 2) {
                c->fault_source = 3;
                continue;
            }
            if (c->fault_source == 3 || opened) {
                perf_error(c, "minor-faults/major-faults", errno);
                return -1;
            }
            nmp_debug("minor/major fault events with the data page size: %s", strerror(errno));
        }
        if (c->fault_source != 1 && tp_id) {
            memset(&a, 0, sizeof a);
            a.type = PERF_TYPE_TRACEPOINT;
            a.config = tp_id;
            a.sample_period = 1;
            a.sample_type = PERF_SAMPLE_IP | PERF_SAMPLE_RAW;
            base_attr(c, &a, launch);
            a.exclude_kernel = 0; /* the tracepoint fires in the kernel's fault handler */
            long fd = perf_open(&a, pid, cpu, -1);
            if (fd >= 0) {
                c->fault_source = 2;
                if (!add_ev(c, (int)fd, EV_FAULT_TP, 0, a.sample_type) ||
                    ioctl((int)fd, PERF_EVENT_IOC_SET_OUTPUT, owner_fd[ci]) != 0) {
                    snprintf(c->err, NMP_ERRLEN, "page-fault tracepoint: %s", strerror(errno));
                    return -1;
                }
                continue;
            }
            if (c->fault_source == 2) {
                perf_error(c, "exceptions:page_fault_user", errno);
                return -1;
            }
            nmp_debug("tracepoint exceptions:page_fault_user: %s", strerror(errno));
        }
        memset(&a, 0, sizeof a);
        a.type = PERF_TYPE_SOFTWARE;
        a.config = PERF_COUNT_SW_PAGE_FAULTS;
        a.sample_period = 1;
        a.sample_type = PERF_SAMPLE_IP | PERF_SAMPLE_ADDR;
        base_attr(c, &a, launch);
        long fd = perf_open(&a, pid, cpu, -1);
        if (fd < 0) {
            if (c->fault_source == 0)
                warn(c, "page-faults event unavailable (%s): no first-touch data",
                     strerror(errno));
            c->fault_source = -1;
            continue;
        }
        c->fault_source = 1;
        if (!add_ev(c, (int)fd, EV_FAULT_SW, 0, a.sample_type) ||
            ioctl((int)fd, PERF_EVENT_IOC_SET_OUTPUT, owner_fd[ci]) != 0) {
            snprintf(c->err, NMP_ERRLEN, "page-faults event: %s", strerror(errno));
            return -1;
        }
    }
    return 0;
}

static int open_events(struct collector *c, pid_t pid, int launch)
{
    if (online_cpus(c) <= 0)
        return -1;
    int *owner = malloc((size_t)c->ncpus * sizeof *owner);
    if (!owner)
        return -1;
    for (int i = 0; i < c->ncpus; i++)
        owner[i] = -1;
    uint64_t tp_id = 0;
    if (geteuid() == 0 && tracepoint_setup(c, &tp_id) != 0)
        tp_id = 0;
    int rc = 0;
    if (launch) {
        rc = open_task_events(c, pid, 1, owner, tp_id);
        if (rc > 0) {
            snprintf(c->err, NMP_ERRLEN, "the command's process vanished before it started");
            rc = -1;
        }
    } else {
        /* every existing thread; inherit covers the ones created later */
        char path[64];
        snprintf(path, sizeof path, "/proc/%d/task", (int)pid);
        DIR *d = opendir(path);
        if (!d) {
            snprintf(c->err, NMP_ERRLEN, "no process %d (%s)", (int)pid, strerror(errno));
            free(owner);
            return -1;
        }
        struct dirent *de;
        int opened = 0;
        while ((de = readdir(d))) {
            if (de->d_name[0] < '0' || de->d_name[0] > '9')
                continue;
            uint32_t tid = (uint32_t)strtoul(de->d_name, NULL, 10);
            int r = open_task_events(c, (pid_t)tid, 0, owner, tp_id);
            if (r < 0) {
                rc = -1;
                break;
            }
            if (r == 0) {
                opened++;
                struct thread *t = add_thread(c, (uint32_t)pid, tid, 0, nmp_now_ns());
                if (t)
                    thread_comm(c, (uint32_t)pid, tid);
            }
        }
        closedir(d);
        if (rc == 0 && !opened) {
            snprintf(c->err, NMP_ERRLEN, "process %d has no threads left", (int)pid);
            rc = -1;
        }
    }
    free(owner);
    qsort(c->evs, (size_t)c->nev, sizeof *c->evs, cmp_ev);
    return rc;
}

static void close_events(struct collector *c)
{
    for (int i = 0; i < c->nring; i++)
        munmap(c->rings[i].meta, c->rings[i].map_len);
    for (int i = 0; i < c->nev; i++)
        close(c->evs[i].fd);
    free(c->rings);
    free(c->evs);
    c->rings = NULL;
    c->evs = NULL;
    c->nring = c->nev = 0;
}

/* ---------------------------------------------------------------- records */

static uint64_t rd64(const uint8_t *p)
{
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
}

static uint32_t rd32(const uint8_t *p)
{
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}

struct psample {
    uint64_t id, ip, time, addr, data_page_size;
    uint32_t pid, tid, cpu, raw_size;
    const uint8_t *raw;
    uint64_t abi;
    const uint64_t *regs; /* unaligned-safe copy below */
    size_t nregs;
};

/* Parses the sample body fields our events use, in the kernel's order. */
static int parse_sample(const uint8_t *p, size_t len, uint64_t st, struct psample *s)
{
    const uint8_t *end = p + len;
    memset(s, 0, sizeof *s);
#define NEED(n) if ((size_t)(end - p) < (n)) return -1
    if (st & PERF_SAMPLE_IDENTIFIER) { NEED(8); s->id = rd64(p); p += 8; }
    if (st & PERF_SAMPLE_IP) { NEED(8); s->ip = rd64(p); p += 8; }
    if (st & PERF_SAMPLE_TID) { NEED(8); s->pid = rd32(p); s->tid = rd32(p + 4); p += 8; }
    if (st & PERF_SAMPLE_TIME) { NEED(8); s->time = rd64(p); p += 8; }
    if (st & PERF_SAMPLE_ADDR) { NEED(8); s->addr = rd64(p); p += 8; }
    if (st & PERF_SAMPLE_ID) { NEED(8); p += 8; }
    if (st & PERF_SAMPLE_STREAM_ID) { NEED(8); p += 8; }
    if (st & PERF_SAMPLE_CPU) { NEED(8); s->cpu = rd32(p); p += 8; }
    if (st & PERF_SAMPLE_PERIOD) { NEED(8); p += 8; }
    if (st & (PERF_SAMPLE_READ | PERF_SAMPLE_CALLCHAIN))
        return 0; /* not used by our own events; stop before them */
    if (st & PERF_SAMPLE_RAW) {
        NEED(4);
        s->raw_size = rd32(p);
        p += 4;
        NEED(s->raw_size);
        s->raw = p;
        p += s->raw_size;
    }
    if (st & PERF_SAMPLE_BRANCH_STACK)
        return 0;
    if (st & PERF_SAMPLE_REGS_USER) {
        NEED(8);
        s->abi = rd64(p);
        p += 8;
        if (s->abi) {
            s->nregs = (size_t)__builtin_popcountll(NMP_REGS_MASK);
            NEED(s->nregs * 8);
            s->regs = (const uint64_t *)(const void *)p;
            p += s->nregs * 8;
        }
    }
    if (st & (PERF_SAMPLE_STACK_USER | PERF_SAMPLE_REGS_INTR))
        return 0; /* not used by our own events */
    /* fixed-size fields up to the page size of the data address (perf_event.h order) */
    uint64_t fixed[] = {PERF_SAMPLE_WEIGHT | PERF_SAMPLE_WEIGHT_STRUCT, PERF_SAMPLE_DATA_SRC,
                        PERF_SAMPLE_TRANSACTION, PERF_SAMPLE_PHYS_ADDR, PERF_SAMPLE_CGROUP};
    for (size_t i = 0; i < sizeof fixed / sizeof *fixed; i++)
        if (st & fixed[i]) {
            NEED(8);
            p += 8;
        }
    if (st & PERF_SAMPLE_DATA_PAGE_SIZE) {
        NEED(8);
        s->data_page_size = rd64(p);
        p += 8;
    }
#undef NEED
    return 0;
}

/* Time of a record: samples carry it after IDENTIFIER/IP/TID; side-band records in the
 * sample_id trailer (sample_id_all), located from the trailing IDENTIFIER. */
static uint64_t record_time(const struct collector *c, const uint8_t *rec, uint32_t len,
                            uint16_t type)
{
    const uint8_t *body = rec + sizeof(struct perf_event_header);
    size_t blen = len - sizeof(struct perf_event_header);
    if (blen < 8)
        return 0;
    const struct ev *e = ev_of(c, type == PERF_RECORD_SAMPLE ? rd64(body) : rd64(body + blen - 8));
    if (!e)
        return 0;
    uint64_t st = e->sample_type;
    if (type == PERF_RECORD_SAMPLE) {
        size_t off = 8 + ((st & PERF_SAMPLE_IP) ? 8 : 0) + ((st & PERF_SAMPLE_TID) ? 8 : 0);
        return off + 8 <= blen ? rd64(body + off) : 0;
    }
    size_t trailer = 0;
    uint64_t bits[] = {PERF_SAMPLE_TID, PERF_SAMPLE_TIME, PERF_SAMPLE_ID, PERF_SAMPLE_STREAM_ID,
                       PERF_SAMPLE_CPU, PERF_SAMPLE_IDENTIFIER};
    for (size_t i = 0; i < 6; i++)
        if (st & bits[i])
            trailer += 8;
    size_t toff = blen - trailer + ((st & PERF_SAMPLE_TID) ? 8 : 0);
    return trailer <= blen && (st & PERF_SAMPLE_TIME) ? rd64(body + toff) : 0;
}

static void on_soft_sample(struct collector *c, const uint8_t *body, size_t len, uint64_t st)
{
    struct psample ps;
    if (parse_sample(body, len, st, &ps) != 0) {
        c->malformed++;
        return;
    }
    struct nmp_sample s = {.time = ps.time, .ip = ps.ip, .pid = ps.pid, .tid = ps.tid,
                           .cpu = (uint16_t)ps.cpu};
    if (ps.abi && ps.regs) {
        uint64_t vals[NMP_NREGS];
        memcpy(vals, ps.regs, ps.nregs * 8);
        struct nmp_regs regs;
        nmp_regs_unpack(NMP_REGS_MASK, vals, ps.nregs, &regs);
        nmp_decode_sample(c->dec, &regs, &s);
    } else {
        nmp_decode_sample(c->dec, NULL, &s);
    }
    c->samples++;
    c->rules[s.rule]++;
    if (s.rule == NMP_RULE_KERNEL)
        c->outside_user++;
    if (s.addr) {
        c->with_address++;
        page_note(c, s.pid, s.addr, nmp_now_ns());
    }
    struct thread *t = thread_of(c, s.pid, s.tid, s.time);
    if (t)
        t->samples++;
    uint64_t v[NMP_samples_NCOLS] = {
        [NMP_samples_time] = s.time, [NMP_samples_pid] = s.pid, [NMP_samples_tid] = s.tid,
        [NMP_samples_cpu] = s.cpu, [NMP_samples_ip] = s.ip, [NMP_samples_addr] = s.addr,
        [NMP_samples_access] = s.access, [NMP_samples_size] = s.size,
        [NMP_samples_rule] = s.rule};
    if (nmp_table_append(c->t_samples, v) != 0)
        table_fail(c, "samples");
}

static void on_hw_sample(struct collector *c, const struct ev *e, uint16_t misc,
                         const uint8_t *body, size_t len)
{
    struct nmp_sample s;
    memset(&s, 0, sizeof s);
    if (!nmp_hw_misc_is_user(misc)) {
        c->outside_user++;
        return;
    }
    int r = nmp_hw_decode((enum nmp_backend)c->backend, &c->hw_attrs[e->attr_idx], body, len, &s);
    if (r == NMP_HW_SKIP)
        return; /* a helper event of the group (e.g. mem-loads-aux), not a memory sample */
    if (r != 0) {
        c->hw_decode_errors++;
        return;
    }
    c->samples++;
    c->rules[s.rule]++;
    if (s.addr) {
        c->with_address++;
        page_note(c, s.pid, s.addr, nmp_now_ns());
    }
    struct thread *t = thread_of(c, s.pid, s.tid, s.time);
    if (t)
        t->samples++;
    uint64_t v[NMP_samples_NCOLS] = {
        [NMP_samples_time] = s.time, [NMP_samples_pid] = s.pid, [NMP_samples_tid] = s.tid,
        [NMP_samples_cpu] = s.cpu, [NMP_samples_ip] = s.ip, [NMP_samples_addr] = s.addr,
        [NMP_samples_access] = s.access, [NMP_samples_size] = s.size,
        [NMP_samples_rule] = s.rule, [NMP_samples_weight] = s.weight,
        [NMP_samples_data_src] = s.data_src, [NMP_samples_phys_addr] = s.phys_addr};
    if (nmp_table_append(c->t_samples, v) != 0)
        table_fail(c, "samples");
}

static void on_fault(struct collector *c, const struct ev *e, const uint8_t *body, size_t len)
{
    struct psample ps;
    if (parse_sample(body, len, e->sample_type, &ps) != 0) {
        c->malformed++;
        return;
    }
    uint64_t ip = ps.ip, addr = ps.addr;
    uint8_t flags = 0, source = e->kind == EV_FAULT_DONE ? 3 : 1;
    if (e->kind == EV_FAULT_TP) {
        source = 2;
        if (!ps.raw || ps.raw_size < (uint32_t)c->tp_off_err + 8) {
            c->malformed++;
            return;
        }
        addr = rd64(ps.raw + c->tp_off_addr);
        ip = rd64(ps.raw + c->tp_off_ip);
        uint64_t ec = rd64(ps.raw + c->tp_off_err);
        flags = (uint8_t)(((ec >> 1) & 1) | 2); /* error_code bit1 = write */
    }
    c->faults++;
    /* the page the fault mapped: 4 KiB, or 2 MiB for a transparent huge page (only the
     * completed-fault events know it; 0 = not known) */
    uint64_t v[NMP_faults_NCOLS] = {
        [NMP_faults_time] = ps.time, [NMP_faults_pid] = ps.pid, [NMP_faults_tid] = ps.tid,
        [NMP_faults_cpu] = ps.cpu, [NMP_faults_ip] = ip, [NMP_faults_addr] = addr,
        [NMP_faults_flags] = flags, [NMP_faults_source] = source,
        [NMP_faults_page_size] = ps.data_page_size};
    if (nmp_table_append(c->t_faults, v) != 0)
        table_fail(c, "faults");
}

static void add_mapping_row(struct collector *c, uint64_t time, uint32_t pid, uint64_t start,
                            uint64_t len, uint64_t pgoff, uint32_t prot, uint32_t flags,
                            const char *path)
{
    nmp_decoder_mmap(c->dec, pid, start, len, pgoff, path);
    /* the kernel names a mapping by its canonical path (d_path), as realpath() does */
    if (path && ((c->own_dir_len && !strncmp(path, c->own_dir, c->own_dir_len) &&
                  path[c->own_dir_len] == '/') ||
                 (c->own_shim[0] && !strcmp(path, c->own_shim))))
        flags |= NMP_MAP_NUMAPROF;
    uint64_t v[NMP_mappings_NCOLS] = {
        [NMP_mappings_time] = time, [NMP_mappings_pid] = pid, [NMP_mappings_start] = start,
        [NMP_mappings_len] = len, [NMP_mappings_pgoff] = pgoff, [NMP_mappings_prot] = prot,
        [NMP_mappings_flags] = flags, [NMP_mappings_path] = (uintptr_t)path};
    if (nmp_table_append(c->t_maps, v) != 0)
        table_fail(c, "mappings");
}

static void on_record(struct collector *c, const uint8_t *rec, uint32_t len, uint64_t time)
{
    struct perf_event_header h;
    memcpy(&h, rec, sizeof h);
    const uint8_t *b = rec + sizeof h;
    size_t blen = len - sizeof h;
    switch (h.type) {
    case PERF_RECORD_SAMPLE: {
        if (blen < 8)
            break;
        const struct ev *e = ev_of(c, rd64(b));
        if (!e) {
            c->malformed++;
            break;
        }
        if (e->kind == EV_SOFT)
            on_soft_sample(c, b, blen, e->sample_type);
        else if (e->kind == EV_HW)
            on_hw_sample(c, e, h.misc, b, blen);
        else if (e->kind == EV_FAULT_SW || e->kind == EV_FAULT_TP || e->kind == EV_FAULT_DONE)
            on_fault(c, e, b, blen);
        break;
    }
    case PERF_RECORD_MMAP2:
        if (blen > 64) {
            char path[4096];
            size_t n = strnlen((const char *)b + 64, blen - 64);
            if (n >= sizeof path)
                n = sizeof path - 1;
            memcpy(path, b + 64, n);
            path[n] = 0;
            add_mapping_row(c, time, rd32(b), rd64(b + 8), rd64(b + 16), rd64(b + 24),
                            rd32(b + 56), rd32(b + 60), path);
        }
        break;
    case PERF_RECORD_MMAP:
        if (blen > 32) {
            char path[4096];
            size_t n = strnlen((const char *)b + 32, blen - 32);
            if (n >= sizeof path)
                n = sizeof path - 1;
            memcpy(path, b + 32, n);
            path[n] = 0;
            add_mapping_row(c, time, rd32(b), rd64(b + 8), rd64(b + 16), rd64(b + 24), 0, 0, path);
        }
        break;
    case PERF_RECORD_COMM:
        if (blen > 8) {
            uint32_t pid = rd32(b), tid = rd32(b + 4);
            struct thread *t = thread_of(c, pid, tid, time);
            if (h.misc & PERF_RECORD_MISC_COMM_EXEC) {
                nmp_decoder_exec(c->dec, pid);
                add_proc(c, pid);
                if (t && !t->start)
                    t->start = time;
            }
            if (t) {
                size_t n = strnlen((const char *)b + 8, blen - 8);
                if (n > 16)
                    n = 16;
                memcpy(t->comm, b + 8, n);
                t->comm[n] = 0;
            }
        }
        break;
    case PERF_RECORD_FORK:
        if (blen >= 24) {
            uint32_t pid = rd32(b), ppid = rd32(b + 4), tid = rd32(b + 8), ptid = rd32(b + 12);
            uint64_t t0 = rd64(b + 16);
            char comm[17] = "";
            struct thread *parent = find_thread(c, ptid);
            if (parent) /* copied first: add_thread may move the array */
                memcpy(comm, parent->comm, sizeof comm);
            struct thread *t = add_thread(c, pid, tid, ppid, t0);
            if (t) /* its affinity: the watcher's, read while it runs */
                memcpy(t->comm, comm, sizeof t->comm);
            if (pid != ppid) {
                nmp_decoder_fork(c->dec, ppid, pid);
                add_proc(c, pid);
            }
        }
        break;
    case PERF_RECORD_EXIT:
        if (blen >= 24) {
            uint32_t pid = rd32(b), tid = rd32(b + 8);
            struct thread *t = find_thread(c, tid);
            if (t) {
                t->end = rd64(b + 16);
                t->alive = 0;
            }
            if (pid == tid) {
                struct proc *p = find_proc(c, pid);
                if (p)
                    p->alive = 0;
            }
        }
        break;
    case PERF_RECORD_LOST:
        if (blen >= 16)
            c->lost += rd64(b + 8);
        break;
    case PERF_RECORD_LOST_SAMPLES:
        if (blen >= 8)
            c->lost += rd64(b);
        break;
    case PERF_RECORD_THROTTLE:
        c->throttled++;
        break;
    case PERF_RECORD_UNTHROTTLE:
        c->unthrottled++;
        break;
    default:
        break;
    }
}

static int cmp_rec(const void *a, const void *b)
{
    const struct rec *x = a, *y = b;
    if (x->time != y->time)
        return x->time < y->time ? -1 : 1;
    return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/* Copies every complete record out of the rings, then processes them in time order. */
static void drain(struct collector *c)
{
    c->stage_len = 0;
    c->nrecs = 0;
    for (int i = 0; i < c->nring; i++) {
        struct ring *r = &c->rings[i];
        uint64_t head = __atomic_load_n(&r->meta->data_head, __ATOMIC_ACQUIRE);
        uint64_t tail = r->meta->data_tail;
        while (tail + sizeof(struct perf_event_header) <= head) {
            struct perf_event_header h;
            size_t off = (size_t)(tail % r->data_size);
            uint8_t hb[sizeof h];
            for (size_t k = 0; k < sizeof h; k++)
                hb[k] = r->data[(off + k) % r->data_size];
            memcpy(&h, hb, sizeof h);
            if (h.size < sizeof h || tail + h.size > head)
                break;
            if (c->stage_len + h.size > c->stage_cap) {
                size_t nc = c->stage_cap ? c->stage_cap * 2 : 1 << 20;
                while (nc < c->stage_len + h.size)
                    nc *= 2;
                uint8_t *ns = realloc(c->stage, nc);
                if (!ns)
                    break;
                c->stage = ns;
                c->stage_cap = nc;
            }
            if (c->nrecs == c->reccap) {
                size_t nc = c->reccap ? c->reccap * 2 : 4096;
                struct rec *nr = realloc(c->recs, nc * sizeof *nr);
                if (!nr)
                    break;
                c->recs = nr;
                c->reccap = nc;
            }
            uint8_t *dst = c->stage + c->stage_len;
            size_t first = r->data_size - off < h.size ? r->data_size - off : h.size;
            memcpy(dst, r->data + off, first);
            memcpy(dst + first, r->data, h.size - first);
            c->recs[c->nrecs++] = (struct rec){.time = record_time(c, dst, h.size, h.type),
                                               .seq = c->seq++, .off = c->stage_len,
                                               .len = h.size, .type = h.type, .misc = h.misc};
            c->stage_len += h.size;
            tail += h.size;
        }
        __atomic_store_n(&r->meta->data_tail, tail, __ATOMIC_RELEASE);
    }
    if (!c->nrecs)
        return;
    qsort(c->recs, c->nrecs, sizeof *c->recs, cmp_rec);
    for (size_t i = 0; i < c->nrecs; i++)
        on_record(c, c->stage + c->recs[i].off, c->recs[i].len, c->recs[i].time);
}

/* ---------------------------------------------------------------- /proc snapshots */

struct synth_ctx {
    struct collector *c;
    uint32_t pid;
    uint64_t now;
};

static int synth_mapping(void *arg, const struct nmp_maps_line *m)
{
    struct synth_ctx *x = arg;
    add_mapping_row(x->c, x->now, x->pid, m->start, m->end - m->start, m->pgoff, m->prot,
                    m->flags, m->path);
    return 0;
}

/* Attach mode: the process's current mappings, as if MMAP2 records had come. */
static void synth_mappings(struct collector *c, uint32_t pid)
{
    struct synth_ctx x = {c, pid, nmp_now_ns()};
    if (nmp_proc_maps_each(pid, synth_mapping, &x) < 0)
        warn(c, "cannot read /proc/%" PRIu32 "/maps: %s", pid, strerror(errno));
}

/* Is the process still running (not a zombie whose memory is gone)?  Its EXIT record may
 * not be drained yet, and an exited process's numa_maps is empty: copying it would
 * replace the shim's final copy written at exit. */
static int proc_running(uint32_t pid)
{
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/%" PRIu32 "/stat", pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        return 0;
    buf[n] = 0;
    const char *p = strrchr(buf, ')'); /* comm may contain spaces and parentheses */
    return p && p[1] == ' ' && p[2] != 'Z' && p[2] != 'X' && p[2] != 'x';
}

static void copy_numa_maps(struct collector *c)
{
    for (size_t i = 0; i < c->nprocs; i++) {
        if (!c->procs[i].alive || !proc_running(c->procs[i].pid))
            continue;
        if (nmp_numa_maps_copy((pid_t)c->procs[i].pid, c->cfg->dir) != 0)
            nmp_debug("numa_maps of %" PRIu32 ": %s", c->procs[i].pid, strerror(errno));
    }
}

static void flush_tables(struct collector *c)
{
    if (nmp_table_flush(c->t_samples) || nmp_table_flush(c->t_faults) ||
        nmp_table_flush(c->t_pages) || nmp_table_flush(c->t_maps))
        table_fail(c, "profile");
}

/* ---------------------------------------------------------------- collector.json */

static void json_str(FILE *f, const char *s)
{
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)s; p && *p; p++) {
        if (*p == '"' || *p == '\\')
            fprintf(f, "\\%c", *p);
        else if (*p < 0x20)
            fprintf(f, "\\u%04x", *p);
        else
            fputc(*p, f);
    }
    fputc('"', f);
}

static void iso_time(const struct timespec *ts, char *out, size_t len)
{
    struct tm tm;
    gmtime_r(&ts->tv_sec, &tm);
    strftime(out, len, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

static int write_collector_json(struct collector *c, const struct nmp_shim_totals *shim)
{
    char tmp[4096], path[4096];
    snprintf(path, sizeof path, "%s/collector.json", c->cfg->dir);
    snprintf(tmp, sizeof tmp, "%s/.collector.json.tmp", c->cfg->dir);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0)
        return -1;
    FILE *f = fdopen(fd, "w");
    if (!f) {
        close(fd);
        return -1;
    }
    char t0[32], t1[32];
    iso_time(&c->start_rt, t0, sizeof t0);
    iso_time(&c->end_rt, t1, sizeof t1);
    fprintf(f, "{\"backend\": \"%s\",\n \"backend_reason\": {", backend_name(c->backend));
    for (int b = 0; b < 3; b++) {
        static const int order[3] = {NMP_BACKEND_PEBS, NMP_BACKEND_IBS, NMP_BACKEND_SOFT};
        fprintf(f, "%s\"%s\": ", b ? ", " : "", backend_name(order[b]));
        json_str(f, c->reason[order[b]]);
    }
    fprintf(f, "},\n \"freq\": %u, \"event\": \"%s\", \"fault_event\": ",
            c->cfg->freq, c->backend == NMP_BACKEND_SOFT ? "cpu-clock" : backend_name(c->backend));
    if (c->fault_source == 3)
        fputs("\"minor-faults+major-faults\"", f);
    else if (c->fault_source == 2)
        fputs("\"exceptions:page_fault_user\"", f);
    else if (c->fault_source == 1)
        fputs("\"page-faults\"", f);
    else
        fputs("null", f);
    fprintf(f, ",\n \"start_ns\": %" PRIu64 ", \"end_ns\": %" PRIu64
               ", \"start_time\": \"%s\", \"end_time\": \"%s\",\n",
            c->start_ns, c->end_ns, t0, t1);
    if (c->have_status)
        fprintf(f, " \"exit_status\": %d, ", c->exit_status);
    else
        fputs(" \"exit_status\": null, ", f);
    if (c->term_signal)
        fprintf(f, "\"signal\": %d, ", c->term_signal);
    else
        fputs("\"signal\": null, ", f);
    if (c->interrupted)
        fprintf(f, "\"interrupted\": \"%s\", ", c->interrupted);
    else
        fputs("\"interrupted\": null, ", f);
    fprintf(f, "\"pid\": %d, \"attached\": %s,\n", (int)c->root,
            c->cfg->attach_pid > 0 ? "true" : "false");
    uint64_t unresolved = c->samples - c->with_address - c->rules[NMP_RULE_NO_MEM] -
                          c->rules[NMP_RULE_KERNEL] - c->rules[NMP_RULE_SPIN];
    fprintf(f,
            " \"counts\": {\"samples\": %" PRIu64 ", \"with_address\": %" PRIu64
            ", \"lost\": %" PRIu64 ", \"throttled\": %" PRIu64 ", \"unresolved\": %" PRIu64
            ", \"faults\": %" PRIu64 ", \"page_queries\": %" PRIu64 ", \"outside_user\": %" PRIu64
            ", \"malformed\": %" PRIu64 ", \"hw_decode_errors\": %" PRIu64 "},\n \"rules\": {",
            c->samples, c->with_address, c->lost, c->throttled, unresolved, c->faults,
            c->page_queries, c->outside_user, c->malformed, c->hw_decode_errors);
    const char *sep = "";
#define RULE_COUNT_(id, name, value) \
    fprintf(f, "%s\"" #name "\": %" PRIu64, sep, c->rules[NMP_RULE_##id]); \
    sep = ", ";
    NMP_SAMPLE_RULES(RULE_COUNT_)
#undef RULE_COUNT_
    fprintf(f,
            "},\n \"shim\": {\"small_allocs\": %" PRIu64 ", \"small_bytes\": %" PRIu64
            ", \"tracked_allocs\": %" PRIu64 ", \"processes\": %" PRIu64 "},\n",
            shim->small_allocs, shim->small_bytes, shim->tracked_allocs, shim->processes);
    struct nmp_decode_stats ds;
    nmp_decoder_stats(c->dec, &ds);
    fprintf(f,
            " \"decoder\": {\"cache_hits\": %" PRIu64 ", \"cache_misses\": %" PRIu64
            ", \"functions\": %" PRIu64 ", \"resyncs\": %" PRIu64 "},\n",
            ds.cache_hits, ds.cache_misses, ds.functions, ds.resyncs);
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    uint64_t self_ns = (uint64_t)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000000000ULL +
                       (uint64_t)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1000ULL;
    fprintf(f, " \"collector_cpu_ns\": %" PRIu64 ",\n \"node_counters\": {\"count\": %d, \"why\": ",
            self_ns, c->n_node_counters > 0 ? c->n_node_counters : 0);
    if (c->n_node_counters > 0 || !c->node_counters_why[0])
        fputs("null", f);
    else
        json_str(f, c->node_counters_why);
    fputs("},\n", f);
    fputs(" \"write_error\": ", f);
    if (c->write_errno)
        json_str(f, strerror(c->write_errno));
    else
        fputs("null", f);
    fputs(",\n \"warnings\": [", f);
    for (int i = 0; i < c->nwarn; i++) {
        if (i)
            fputs(", ", f);
        json_str(f, c->warnings[i]);
    }
    fputs("]}\n", f);
    int bad = ferror(f);
    if (fflush(f) != 0 || fsync(fd) != 0)
        bad = 1;
    if (fclose(f) != 0 || bad) {
        unlink(tmp);
        return -1;
    }
    return rename(tmp, path);
}

/* ---------------------------------------------------------------- backend selection */

static int select_backend(struct collector *c)
{
    int req = c->cfg->backend;
    for (int b = 0; b < 3; b++)
        c->reason[b][0] = 0;
    c->backend = NMP_BACKEND_SOFT;
    if (req == NMP_REQ_SOFT) {
        snprintf(c->reason[NMP_BACKEND_PEBS], 256, "not tried (--backend soft)");
        snprintf(c->reason[NMP_BACKEND_IBS], 256, "not tried (--backend soft)");
        snprintf(c->reason[NMP_BACKEND_SOFT], 256, "selected");
        return 0;
    }
    static const int order[2] = {NMP_BACKEND_PEBS, NMP_BACKEND_IBS};
    for (int i = 0; i < 2; i++) {
        int b = order[i];
        if (req != NMP_REQ_AUTO && req != b) {
            snprintf(c->reason[b], 256, "not tried (--backend %s)", backend_name(req));
            continue;
        }
        if (c->backend != NMP_BACKEND_SOFT) {
            snprintf(c->reason[b], 256, "not tried (%s selected)", backend_name(c->backend));
            continue;
        }
        char why[256] = "";
        if (!nmp_hw_probe((enum nmp_backend)b, why, sizeof why)) {
            snprintf(c->reason[b], 256, "%s", why[0] ? why : "unavailable");
            if (req == b) {
                snprintf(c->err, NMP_ERRLEN, "backend %s unavailable: %s", backend_name(b),
                         c->reason[b]);
                return -1;
            }
            continue;
        }
        struct nmp_hw_options opt = {.ldlat = 30, .period = 0, .l3missonly = 0, .stores = 1};
        int n = nmp_hw_attrs((enum nmp_backend)b, &opt, c->hw_attrs, MAX_HW_ATTRS, why, sizeof why);
        if (n <= 0) {
            snprintf(c->reason[b], 256, "%s", why[0] ? why : "no usable events");
            if (req == b) {
                snprintf(c->err, NMP_ERRLEN, "backend %s unavailable: %s", backend_name(b),
                         c->reason[b]);
                return -1;
            }
            continue;
        }
        c->nhw = n;
        c->backend = b;
        snprintf(c->reason[b], 256, "selected");
    }
    if (c->backend == NMP_BACKEND_SOFT)
        snprintf(c->reason[NMP_BACKEND_SOFT], 256, "selected");
    else
        snprintf(c->reason[NMP_BACKEND_SOFT], 256, "not needed (%s selected)",
                 backend_name(c->backend));
    return 0;
}

/* ---------------------------------------------------------------- the run */

static void status_from_wait(struct collector *c, int st)
{
    c->have_status = 1;
    if (WIFEXITED(st)) {
        c->exit_status = WEXITSTATUS(st);
    } else if (WIFSIGNALED(st)) {
        c->term_signal = WTERMSIG(st);
        c->exit_status = 128 + c->term_signal;
    }
}

/* Returns the delay until the next slow tick: ~1 s, longer when copying numa_maps (a
 * page-table walk of every mapping) is expensive, so it stays under ~1 % of a cpu. */
static uint64_t tick_slow(struct collector *c)
{
    uint64_t t0 = nmp_now_ns();
    copy_numa_maps(c);
    uint64_t spent = nmp_now_ns() - t0;
    flush_tables(c);
    return spent * 100 > SLOW_TICK_NS ? spent * 100 : SLOW_TICK_NS;
}

/* ---------------------------------------------------------------- signals
 *
 * The program must get each SIGINT/SIGTERM/SIGHUP/SIGQUIT exactly as in a plain run.  A
 * signal sent to the process group (Ctrl-C at a terminal, kill -TERM -PGID, a batch
 * system, timeout) reaches numaprof record, numaprof-collect and the program at once (the
 * program only if it stayed in the group, as in a plain run); a signal sent to numaprof
 * record's pid reaches only numaprof record.  numaprof record relays every one it gets
 * through the control socket, and the collector also sees the group's signals directly.
 * So a relayed signal that the collector received directly too was a group signal and is
 * not passed on; any other relayed signal was meant for numaprof record alone and is.
 */
#define RELAY_MATCH_NS 5000000000ULL /* a direct signal this old is not matched any more */

static const char *signal_name(int sig)
{
    switch (sig) {
    case SIGINT: return "SIGINT";
    case SIGTERM: return "SIGTERM";
    case SIGHUP: return "SIGHUP";
    case SIGQUIT: return "SIGQUIT";
    }
    return "signal";
}

/* A stopping signal received directly: through the process group (a signal sent to
 * numaprof-collect's pid alone is taken for one too: that pid is not numaprof's
 * advertised one).  numaprof record's relay of it follows and is matched against it. */
static void on_direct(struct collector *c, int sig)
{
    c->interrupted = signal_name(sig);
    c->direct_unmatched[sig]++;
    c->direct_time[sig] = nmp_now_ns();
}

static void read_signals(struct collector *c, int sfd, int *done);

/* numaprof record got `sig`.  If it came through the process group, the collector got it
 * too: the kernel delivers a group signal to every member under tasklist_lock held for
 * reading (kernel/signal.c, kill_something_info and kill_pgrp), and setpgid() takes that
 * lock for writing (kernel/sys.c, ksys_setpgid), so after the setpgid below a group
 * signal that reached numaprof record before it relayed it is pending here too. */
static void on_relayed(struct collector *c, int sfd, int sig, int *done)
{
    if (sig <= 0 || sig >= NSIG)
        return;
    if (setpgid(0, getpgrp()) != 0)
        nmp_debug("setpgid: %s", strerror(errno));
    read_signals(c, sfd, done);
    c->interrupted = signal_name(sig);
    if (c->direct_unmatched[sig] && nmp_now_ns() - c->direct_time[sig] < RELAY_MATCH_NS) {
        c->direct_unmatched[sig]--; /* a group signal: already dealt with in on_direct */
        return;
    }
    c->direct_unmatched[sig] = 0;
    if (c->cfg->attach_pid > 0)
        *done = 1; /* stop profiling; leave the process alone */
    else
        kill(c->root, sig); /* sent to numaprof record's pid only */
}

static void read_signals(struct collector *c, int sfd, int *done)
{
    struct signalfd_siginfo si;
    while (read(sfd, &si, sizeof si) == (ssize_t)sizeof si) {
        int sig = (int)si.ssi_signo;
        if (sig == SIGINT || sig == SIGTERM || sig == SIGHUP || sig == SIGQUIT) {
            if (c->cfg->attach_pid > 0) {
                c->interrupted = signal_name(sig);
                *done = 1;
            } else {
                on_direct(c, sig);
            }
        } else if (sig == SIGCHLD && c->cfg->attach_pid <= 0) {
            int st;
            pid_t w = waitpid(c->root, &st, WNOHANG);
            if (w == c->root) {
                status_from_wait(c, st);
                *done = 1;
            }
        }
    }
}

/* The control socket: one byte per signal numaprof record received; end of file when
 * numaprof record is gone (killed): the recording stops and the program goes on. */
static void read_control(struct collector *c, int sfd, int *done)
{
    unsigned char buf[64];
    for (;;) {
        ssize_t n = recv(c->cfg->control_fd, buf, sizeof buf, MSG_DONTWAIT);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return;
        if (n <= 0) {
            c->cli_gone = 1;
            if (!c->interrupted)
                c->interrupted = "numaprof record ended";
            *done = 1;
            return;
        }
        for (ssize_t i = 0; i < n; i++)
            on_relayed(c, sfd, buf[i], done);
    }
}

/* Polls the rings and the signals until the command exits (or the attach time is up). */
static void run_loop(struct collector *c, int sfd, int pidfd, uint64_t deadline)
{
    int n = c->nring + 3;
    struct pollfd *pfd = calloc((size_t)n, sizeof *pfd);
    if (!pfd)
        return;
    uint64_t next_tick = nmp_now_ns() + TICK_NS, next_slow = nmp_now_ns() + 200000000ULL;
    int done = 0;
    while (!done) {
        for (int i = 0; i < c->nring; i++) {
            pfd[i].fd = c->rings[i].hup ? -1 : c->rings[i].fd;
            pfd[i].events = POLLIN;
        }
        pfd[c->nring].fd = sfd;
        pfd[c->nring].events = POLLIN;
        pfd[c->nring + 1].fd = pidfd;
        pfd[c->nring + 1].events = POLLIN;
        pfd[c->nring + 2].fd = c->cli_gone ? -1 : c->cfg->control_fd;
        pfd[c->nring + 2].events = POLLIN;
        uint64_t now = nmp_now_ns();
        int timeout = next_tick > now ? (int)((next_tick - now) / 1000000) + 1 : 0;
        int r = poll(pfd, (nfds_t)n, timeout);
        if (r < 0 && errno != EINTR)
            break;
        for (int i = 0; i < c->nring; i++)
            if (pfd[i].revents & (POLLHUP | POLLERR))
                c->rings[i].hup = 1; /* the task exited: drained on the ticks */
        if (r > 0 && (pfd[c->nring].revents & POLLIN))
            read_signals(c, sfd, &done);
        if (r > 0 && (pfd[c->nring + 2].revents & (POLLIN | POLLHUP | POLLERR)))
            read_control(c, sfd, &done);
        if (pidfd >= 0 && (pfd[c->nring + 1].revents & POLLIN))
            done = 1;
        if (deadline && nmp_now_ns() >= deadline)
            done = 1;
        drain(c);
        now = nmp_now_ns();
        if (now >= next_tick) {
            query_pages(c);
            next_tick = now + TICK_NS;
        }
        if (now >= next_slow) {
            next_slow = now + tick_slow(c);
        }
    }
    free(pfd);
    if (c->cfg->attach_pid > 0) {
        for (int i = 0; i < c->nev; i++)
            ioctl(c->evs[i].fd, PERF_EVENT_IOC_DISABLE, 0);
        copy_numa_maps(c);
    }
    drain(c);
    query_pages(c);
}

static void free_collector(struct collector *c)
{
    close_events(c);
    if (c->node_counters)
        nmp_hw_node_counters_close(c->node_counters);
    nmp_decoder_free(c->dec);
    aff_free(&c->aff);
    free(c->threads);
    free(c->thash);
    free(c->procs);
    free(c->pages);
    free(c->pend);
    free(c->stage);
    free(c->recs);
    for (int i = 0; i < c->nwarn; i++)
        free(c->warnings[i]);
    free(c->warnings);
}

static int close_tables(struct collector *c)
{
    int first = 0; /* errno of the first table that failed */
    struct nmp_table **ts[] = {&c->t_samples, &c->t_faults, &c->t_pages, &c->t_maps,
                               &c->t_counters};
    for (size_t i = 0; i < sizeof ts / sizeof *ts; i++) {
        if (*ts[i] && nmp_table_close(*ts[i]) != 0 && !first)
            first = errno;
        *ts[i] = NULL;
    }
    if (first) {
        errno = first;
        return -1;
    }
    return 0;
}

int nmp_collect_run(const struct nmp_config *cfg, char *err)
{
    struct collector col;
    struct collector *c = &col;
    memset(c, 0, sizeof *c);
    c->cfg = cfg;
    c->err = err;
    err[0] = 0;
    int rc = NMP_EXIT_SELF;
    int sfd = -1, pidfd = -1;
    char **envp = NULL;
    struct nmp_child child = {.pid = -1, .go_fd = -1, .err_fd = -1};
    sigset_t mask, oldmask;
    sigemptyset(&mask);
    sigaddset(&mask, SIGCHLD);
    sigaddset(&mask, SIGINT);
    sigaddset(&mask, SIGTERM);
    sigaddset(&mask, SIGHUP);
    sigaddset(&mask, SIGQUIT);

    if (select_backend(c) != 0)
        return NMP_EXIT_SELF;
    if (realpath(cfg->dir, c->own_dir))
        c->own_dir_len = strlen(c->own_dir);
    if (!cfg->shim || !realpath(cfg->shim, c->own_shim))
        c->own_shim[0] = 0;
    if (!(c->dec = nmp_decoder_new())) {
        snprintf(err, NMP_ERRLEN, "cannot initialise the Capstone x86-64 decoder");
        return NMP_EXIT_SELF;
    }
    if (aff_init(&c->aff) != 0) {
        snprintf(err, NMP_ERRLEN, "cannot initialise the affinity watcher: %s", strerror(errno));
        goto out;
    }
    if (open_tables(c) != 0)
        goto out;
    char terr[NMP_ERRLEN] = "";
    if (nmp_topology_write(cfg->dir, terr) != 0)
        warn(c, "topology: %s", terr[0] ? terr : strerror(errno));
    if (!(c->t_counters = nmp_counters_open(cfg->dir))) {
        warn(c, "counters: %s", strerror(errno));
    } else {
        uint64_t now = nmp_now_ns();
        nmp_counters_snapshot(c->t_counters, now, 0);
        /* uncore memory-controller counters where the machine and permissions allow */
        c->n_node_counters = nmp_hw_node_counters_open(&c->node_counters, c->node_counters_why,
                                                       sizeof c->node_counters_why);
        if (c->n_node_counters > 0)
            nmp_hw_node_counters_read(c->node_counters, c->t_counters, now, 0);
        else
            c->node_counters = NULL;
    }

    if (sigprocmask(SIG_BLOCK, &mask, &oldmask) != 0 ||
        (sfd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK)) < 0) {
        snprintf(err, NMP_ERRLEN, "signalfd: %s", strerror(errno));
        goto out;
    }

    uint64_t deadline = 0;
    if (cfg->attach_pid > 0) {
        c->root = cfg->attach_pid;
        pidfd = (int)syscall(SYS_pidfd_open, cfg->attach_pid, 0);
        if (pidfd < 0) {
            snprintf(err, NMP_ERRLEN, "cannot attach to process %d: %s", (int)cfg->attach_pid,
                     strerror(errno));
            goto out;
        }
        if (open_events(c, cfg->attach_pid, 0) != 0)
            goto out;
        add_proc(c, (uint32_t)cfg->attach_pid);
        if (aff_start(&c->aff) != 0)
            warn(c, "thread affinities are not recorded: cannot start the watcher thread");
        synth_mappings(c, (uint32_t)cfg->attach_pid);
        c->start_ns = nmp_now_ns();
        clock_gettime(CLOCK_REALTIME, &c->start_rt);
        if (cfg->duration > 0)
            deadline = c->start_ns + (uint64_t)(cfg->duration * 1e9);
    } else {
        if (!(envp = nmp_child_env(cfg->shim, cfg->dir, cfg->alloc_threshold)) ||
            nmp_child_spawn(cfg->cmd, envp, &oldmask, &child) != 0) {
            snprintf(err, NMP_ERRLEN, "cannot start %s: %s", cfg->cmd[0], strerror(errno));
            goto out;
        }
        c->root = child.pid;
        if (cfg->control_fd >= 0) {
            /* numaprof record supervises the program if numaprof-collect dies */
            char line[32];
            int len = snprintf(line, sizeof line, "pid %d\n", (int)child.pid);
            if (send(cfg->control_fd, line, (size_t)len, MSG_NOSIGNAL) != len)
                nmp_debug("control socket: %s", strerror(errno));
        }
        if (open_events(c, child.pid, 1) != 0) {
            kill(child.pid, SIGKILL);
            waitpid(child.pid, NULL, 0);
            child.pid = -1;
            goto out;
        }
        struct thread *t = add_thread(c, (uint32_t)child.pid, (uint32_t)child.pid,
                                      (uint32_t)getpid(), 0);
        (void)t;
        add_proc(c, (uint32_t)child.pid);
        if (aff_start(&c->aff) != 0)
            warn(c, "thread affinities are not recorded: cannot start the watcher thread");
        c->start_ns = nmp_now_ns();
        clock_gettime(CLOCK_REALTIME, &c->start_rt);
        int e = nmp_child_release(&child);
        if (e) {
            c->end_ns = nmp_now_ns();
            c->end_rt = c->start_rt;
            c->have_status = 1;
            c->exit_status = e == ENOENT ? NMP_EXIT_NOTFOUND : NMP_EXIT_NOEXEC;
            snprintf(err, NMP_ERRLEN, "%s: %s", cfg->cmd[0],
                     e == ENOENT ? "command not found" : strerror(e));
            warn(c, "%s", err);
            rc = c->exit_status;
            child.pid = -1;
            goto finish;
        }
    }

    run_loop(c, sfd, pidfd, deadline);
    c->end_ns = nmp_now_ns();
    clock_gettime(CLOCK_REALTIME, &c->end_rt);
    rc = c->cfg->attach_pid > 0 ? 0 : (c->have_status ? c->exit_status : NMP_EXIT_SELF);

finish:;
    if (c->t_counters) {
        uint64_t now = nmp_now_ns();
        if (c->node_counters)
            nmp_hw_node_counters_read(c->node_counters, c->t_counters, now, 1);
        nmp_counters_snapshot(c->t_counters, now, 1);
    }
    struct nmp_shim_totals shim;
    memset(&shim, 0, sizeof shim);
    char serr[NMP_ERRLEN] = "";
    if (nmp_shim_convert(cfg->dir, &shim, serr) != 0)
        warn(c, "allocation shim data: %s", serr[0] ? serr : strerror(errno));
    if (c->lost)
        warn(c, "%" PRIu64 " records lost (ring buffer overflow)", c->lost);
    if (write_threads(c) != 0) {
        c->write_errno = errno ? errno : EIO;
        warn(c, "writing the threads table failed: %s", strerror(errno));
    }
    if (close_tables(c) != 0) {
        if (!c->write_errno)
            c->write_errno = errno;
        warn(c, "writing the profile tables failed: %s", strerror(c->write_errno));
    }
    /* the command ran: its status stands even if the profile could not be finished */
    if (write_collector_json(c, &shim) != 0 && !err[0])
        snprintf(err, NMP_ERRLEN, "cannot write %s/collector.json: %s", cfg->dir, strerror(errno));
    nmp_debug("samples %" PRIu64 " with address %" PRIu64 " lost %" PRIu64 " faults %" PRIu64,
              c->samples, c->with_address, c->lost, c->faults);
out:
    if (child.pid > 0 && !c->have_status && !c->cli_gone) {
        kill(child.pid, SIGKILL);
        waitpid(child.pid, NULL, 0);
    }
    if (child.go_fd >= 0)
        close(child.go_fd);
    if (child.err_fd >= 0)
        close(child.err_fd);
    nmp_env_free(envp);
    if (sfd >= 0) {
        close(sfd);
        sigprocmask(SIG_SETMASK, &oldmask, NULL);
    }
    if (pidfd >= 0)
        close(pidfd);
    close_tables(c);
    free_collector(c);
    return rc;
}
