/* The affinity watcher: the cpu affinity of every thread of the program, first and last.
 *
 * Threads' affinities are read from /proc by a thread of the collector's own, not by the
 * main loop: that loop can be seconds behind the program (the first records of a run make
 * the decoder load every mapped binary; a loaded machine; the lab's emulated cpus), and a
 * thread that started and ended within that lag was gone (ESRCH) by the time its FORK
 * record was processed, leaving its affinity empty.  The watcher lists
 * /proc/PID/task of every recorded process every AFF_SCAN_NS (longer when a scan is
 * costly: at most ~2 % of a cpu, counted in the watcher's own cpu time).  A thread is re-read on every scan while it is young,
 * since its first read can come before the affinity its creator gives it right after
 * clone (glibc's pthread_attr_setaffinity_np, libgomp's places), then every
 * AFF_REFRESH_NS: the last value read is the thread's final affinity.
 */
#include "nmp_collector.h"

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define AFF_SCAN_NS 10000000ULL
#define AFF_YOUNG_NS 100000000ULL
#define AFF_REFRESH_NS 100000000ULL

struct affent {
    uint32_t pid, tid;
    uint64_t seen_first, seen_last, read_last, sum; /* CLOCK_MONOTONIC ns */
    char *first, *last;                             /* last NULL: same as first */
    uint32_t scan;
};

struct nmp_affwatch {
    pthread_t th;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int started, stop; /* stop: under mu */
    uint32_t *pids;    /* processes to list: under mu */
    size_t npids, pidcap;
    /* the watcher's own (the main thread reads them after the join) */
    struct affent *ents;
    size_t nents, entcap;
    struct nmp_u32map newest; /* tid -> index+1 of its newest entry */
    uint32_t scan;
    size_t *order; /* after nmp_aff_finish: entries by tid */
};

/* The affinity of a thread as a cpulist ("0-3,8"), malloc'd; NULL when it cannot be read
 * (the thread is gone).  *sum, when given, gets a checksum of the mask to spot changes. */
static char *affinity_of(uint32_t tid, uint64_t *sum)
{
    size_t setsize = CPU_ALLOC_SIZE(NMP_MAX_CPUS);
    cpu_set_t *set = CPU_ALLOC(NMP_MAX_CPUS);
    if (!set)
        return NULL;
    char *out = NULL;
    if (sched_getaffinity((pid_t)tid, setsize, set) == 0) {
        unsigned char flags[NMP_MAX_CPUS];
        char text[8192];
        uint64_t h = 1469598103934665603ULL; /* FNV-1a */
        for (int i = 0; i < NMP_MAX_CPUS; i++) {
            flags[i] = CPU_ISSET_S(i, setsize, set) != 0;
            h = (h ^ flags[i]) * 1099511628211ULL;
        }
        nmp_cpulist_format(flags, NMP_MAX_CPUS, text, sizeof text);
        out = strdup(text);
        if (sum)
            *sum = h;
    }
    CPU_FREE(set);
    return out;
}

static struct affent *aff_new(struct nmp_affwatch *w, uint32_t pid, uint32_t tid, uint64_t now)
{
    if (NMP_GROW(w->ents, w->entcap, w->nents + 1, 64) != 0 ||
        nmp_u32map_put(&w->newest, tid, (uint32_t)(w->nents + 1)) != 0)
        return NULL;
    struct affent *e = &w->ents[w->nents++];
    *e = (struct affent){.pid = pid, .tid = tid, .seen_first = now};
    return e;
}

/* One thread listed by the scan: a new entry, or a re-read when it is due. */
static void aff_see(struct nmp_affwatch *w, uint32_t pid, uint32_t tid, uint64_t now)
{
    uint32_t v = nmp_u32map_get(&w->newest, tid);
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

static void aff_scan(struct nmp_affwatch *w)
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

static uint64_t thread_cpu_ns(void)
{
    struct timespec ts;
    if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) != 0)
        return nmp_now_ns();
    return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

static void *aff_main(void *arg)
{
    struct nmp_affwatch *w = arg;
    pthread_mutex_lock(&w->mu);
    while (!w->stop) {
        pthread_mutex_unlock(&w->mu);
        /* the scan's cost in cpu time, not wall time: a watcher preempted by the program's
         * busy threads (the lab's emulated cpus, a loaded machine) would otherwise wait
         * 50 times its preemption, and miss the threads born and gone in between */
        uint64_t t0 = thread_cpu_ns();
        aff_scan(w);
        uint64_t spent = thread_cpu_ns() - t0;
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

void nmp_aff_watch_pid(struct nmp_affwatch *w, uint32_t pid)
{
    if (!w)
        return;
    pthread_mutex_lock(&w->mu);
    int known = 0;
    for (size_t i = 0; i < w->npids && !known; i++)
        known = w->pids[i] == pid;
    if (!known && NMP_GROW(w->pids, w->pidcap, w->npids + 1, 16) == 0)
        w->pids[w->npids++] = pid;
    pthread_mutex_unlock(&w->mu);
}

struct nmp_affwatch *nmp_aff_new(void)
{
    struct nmp_affwatch *w = calloc(1, sizeof *w);
    pthread_condattr_t ca;
    if (!w || pthread_condattr_init(&ca) != 0) {
        free(w);
        return NULL;
    }
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    int r = pthread_cond_init(&w->cv, &ca);
    pthread_condattr_destroy(&ca);
    if (r == 0 && (r = pthread_mutex_init(&w->mu, NULL)) != 0)
        pthread_cond_destroy(&w->cv);
    if (r != 0) {
        free(w);
        errno = r;
        return NULL;
    }
    return w;
}

int nmp_aff_start(struct nmp_affwatch *w)
{
    if (pthread_create(&w->th, NULL, aff_main, w) != 0)
        return -1;
    w->started = 1;
    return 0;
}

static void aff_stop(struct nmp_affwatch *w)
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

void nmp_aff_free(struct nmp_affwatch *w)
{
    if (!w)
        return;
    aff_stop(w);
    pthread_mutex_destroy(&w->mu);
    pthread_cond_destroy(&w->cv);
    for (size_t i = 0; i < w->nents; i++) {
        free(w->ents[i].first);
        free(w->ents[i].last);
    }
    free(w->ents);
    nmp_u32map_free(&w->newest);
    free(w->pids);
    free(w->order);
    free(w);
}

static int cmp_affent_tid(const void *a, const void *b, void *arg)
{
    const struct affent *e = arg;
    uint32_t x = e[*(const size_t *)a].tid, y = e[*(const size_t *)b].tid;
    return x < y ? -1 : x > y;
}

void nmp_aff_finish(struct nmp_affwatch *w)
{
    if (!w)
        return;
    aff_stop(w);
    free(w->order);
    w->order = w->nents ? malloc(w->nents * sizeof *w->order) : NULL;
    if (!w->order)
        return;
    for (size_t i = 0; i < w->nents; i++)
        w->order[i] = i;
    qsort_r(w->order, w->nents, sizeof *w->order, cmp_affent_tid, w->ents);
}

/* Of the entries with the same tid and pid that overlap [start, end] (tids are reused),
 * the first read of the earliest and the last of the newest. */
void nmp_aff_lookup(const struct nmp_affwatch *w, uint32_t pid, uint32_t tid, uint64_t start,
                    uint64_t end, const char **first, const char **last)
{
    const struct affent *lo = NULL, *hi = NULL;
    size_t a = 0, b = w && w->order ? w->nents : 0;
    while (a < b) { /* the first entry with this tid */
        size_t m = a + (b - a) / 2;
        if (w->ents[w->order[m]].tid < tid)
            a = m + 1;
        else
            b = m;
    }
    for (size_t i = a; w && w->order && i < w->nents && w->ents[w->order[i]].tid == tid; i++) {
        const struct affent *e = &w->ents[w->order[i]];
        if (e->pid != pid || (end && e->seen_first > end) || e->seen_last < start)
            continue;
        if (!lo || e->seen_first < lo->seen_first)
            lo = e;
        if (!hi || e->seen_first > hi->seen_first)
            hi = e;
    }
    *first = lo ? lo->first : NULL;
    *last = hi ? (hi->last ? hi->last : hi->first) : NULL;
}
