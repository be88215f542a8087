/* The perf events of a run and their ring buffers.
 *
 * Events are opened per cpu with pid = the command and inherit=1, one ring buffer per
 * cpu (an inherited per-task event with cpu=-1 cannot be mmapped).  On each cpu the first
 * event owns the ring and the others write into it (PERF_EVENT_IOC_SET_OUTPUT): the
 * sampling event (cpu-clock for the software backend; for a hardware backend a dummy
 * event carrying the side-band records, then the backend's group), and the first-touch
 * fault events.  Every event carries PERF_SAMPLE_IDENTIFIER so the records of the events
 * sharing a ring can be told apart, and sample_id_all so side-band records carry their
 * time.  perf_event_open failures become advice, as perf's do.
 */
#include "nmp_collector.h"

#include "nmp_decode.h" /* NMP_REGS_MASK */

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#define RING_PAGES_MAX 256 /* data pages per ring: 1 MiB of 4 KiB pages */
#define RING_PAGES_MIN 8
#define RING_PAGES_WARN 64 /* fewer: samples may be lost */

/* open_task_events: the task is gone (attach: a thread that exited meanwhile). */
#define TASK_GONE 1

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

/* One line of advice for a perf_event_open failure (as perf does). */
static void perf_error(struct nmp_collector *c, const char *what, int e)
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

static struct nmp_ev *add_ev(struct nmp_events *ev, int fd, enum nmp_ev_kind kind,
                             const struct perf_event_attr *a)
{
    if (NMP_GROW(ev->evs, ev->evcap, ev->nev + 1, 16) != 0)
        return NULL;
    struct nmp_ev *e = &ev->evs[ev->nev++];
    *e = (struct nmp_ev){.fd = fd, .kind = kind, .attr = *a};
    if (ioctl(fd, PERF_EVENT_IOC_ID, &e->id) != 0)
        nmp_debug("PERF_EVENT_IOC_ID: %s", strerror(errno));
    return e;
}

const struct nmp_ev *nmp_ev_of(const struct nmp_events *ev, uint64_t id)
{
    size_t lo = 0, hi = ev->nev;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (ev->evs[mid].id < id)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < ev->nev && ev->evs[lo].id == id ? &ev->evs[lo] : NULL;
}

static int cmp_ev(const void *a, const void *b)
{
    const struct nmp_ev *x = a, *y = b;
    return x->id < y->id ? -1 : x->id > y->id;
}

/* What every event has: user space only, the run's clock, inherited by new threads and
 * processes, and enabled at the exec of a launched command. */
static void base_attr(struct perf_event_attr *a, int launch)
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
}

/* The ring owner also carries the side-band records: threads, names, mappings. */
static void sideband_attr(struct perf_event_attr *a, size_t ring_bytes)
{
    a->task = a->comm = a->mmap = a->mmap2 = a->mmap_data = 1;
    a->watermark = 1;
    a->wakeup_watermark = (uint32_t)(ring_bytes / 4);
}

static void software_attr(struct perf_event_attr *a, uint64_t config, uint64_t sample_type,
                          int launch)
{
    memset(a, 0, sizeof *a);
    a->type = PERF_TYPE_SOFTWARE;
    a->config = config;
    a->sample_period = 1;
    a->sample_type = sample_type;
    base_attr(a, launch);
}

/* exceptions:page_fault_user: id and field offsets from tracefs (root only). */
static int tracepoint_setup(struct nmp_events *ev, uint64_t *id)
{
    static const char *roots[] = {"/sys/kernel/tracing", "/sys/kernel/debug/tracing"};
    for (size_t r = 0; r < sizeof roots / sizeof *roots; r++) {
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
        ev->tp_off_addr = ev->tp_off_ip = ev->tp_off_err = -1;
        while (fgets(line, sizeof line, f)) {
            char *fld = strstr(line, "field:");
            char *off = strstr(line, "offset:");
            if (!fld || !off)
                continue;
            int o = atoi(off + strlen("offset:"));
            if (strstr(fld, " address;"))
                ev->tp_off_addr = o;
            else if (strstr(fld, " ip;"))
                ev->tp_off_ip = o;
            else if (strstr(fld, " error_code;"))
                ev->tp_off_err = o;
        }
        fclose(f);
        if (ev->tp_off_addr < 0 || ev->tp_off_ip < 0 || ev->tp_off_err < 0)
            return -1;
        *id = (uint64_t)v;
        return 0;
    }
    return -1;
}

static int online_cpus(struct nmp_events *ev)
{
    FILE *f = fopen("/sys/devices/system/cpu/online", "re");
    char buf[4096];
    int n = -1;
    if (f) {
        if (fgets(buf, sizeof buf, f))
            n = nmp_cpulist_parse(buf, ev->cpus, NMP_MAX_CPUS);
        fclose(f);
    }
    if (n <= 0) {
        long k = sysconf(_SC_NPROCESSORS_ONLN);
        n = k > 0 ? (int)(k < NMP_MAX_CPUS ? k : NMP_MAX_CPUS) : 1;
        for (int i = 0; i < n; i++)
            ev->cpus[i] = i;
    }
    ev->ncpus = n;
    return n;
}

/* The ring of one cpu: as large as the locked-memory limit allows, down to
 * RING_PAGES_MIN pages. */
static int map_ring(struct nmp_collector *c, int fd, int cpu)
{
    struct nmp_events *ev = &c->ev;
    long psz = sysconf(_SC_PAGESIZE);
    for (size_t pages = RING_PAGES_MAX; pages >= RING_PAGES_MIN; pages /= 2) {
        size_t len = (pages + 1) * (size_t)psz; /* the metadata page, then the data */
        void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        if (p == MAP_FAILED) {
            if (errno == EPERM || errno == ENOMEM)
                continue;
            snprintf(c->err, NMP_ERRLEN, "mmap of the perf ring buffer failed: %s",
                     strerror(errno));
            return -1;
        }
        if (NMP_GROW(ev->rings, ev->ringcap, ev->nring + 1, 16) != 0) {
            munmap(p, len);
            return -1;
        }
        ev->rings[ev->nring++] = (struct nmp_ring){
            .fd = fd, .cpu = cpu, .meta = p, .data = (uint8_t *)p + psz,
            .data_size = pages * (size_t)psz, .map_len = len};
        if (pages < RING_PAGES_WARN)
            nmp_warn(c, "perf ring buffer limited to %zu KiB per cpu (perf_event_mlock_kb); "
                        "samples may be lost", pages * (size_t)psz / 1024);
        return 0;
    }
    snprintf(c->err, NMP_ERRLEN,
             "cannot mmap a perf ring buffer (locked-memory limit: raise "
             "kernel.perf_event_mlock_kb or ulimit -l)");
    return -1;
}

/* An opened event joins the list and writes into the cpu's ring.  On failure c->err
 * says `what` failed. */
static int into_ring(struct nmp_collector *c, int fd, enum nmp_ev_kind kind,
                     const struct perf_event_attr *a, int owner_fd, const char *what)
{
    if (!add_ev(&c->ev, fd, kind, a)) {
        close(fd);
        snprintf(c->err, NMP_ERRLEN, "%s: %s", what, strerror(errno));
        return -1;
    }
    if (ioctl(fd, PERF_EVENT_IOC_SET_OUTPUT, owner_fd) != 0) {
        snprintf(c->err, NMP_ERRLEN, "%s: %s", what, strerror(errno));
        return -1;
    }
    return 0;
}

/* The first event of a cpu, which carries the side-band records: the sampling event of
 * the software backend, else a dummy event.  Returns its fd, TASK_GONE's negation, or -1. */
static int open_lead(struct nmp_collector *c, pid_t pid, int cpu, int launch)
{
    struct perf_event_attr a;
    const char *what;
    enum nmp_ev_kind kind;
    if (c->be.backend == NMP_BACKEND_SOFT) {
        software_attr(&a, PERF_COUNT_SW_CPU_CLOCK, PERF_SAMPLE_IP | PERF_SAMPLE_REGS_USER,
                      launch);
        a.freq = 1;
        a.sample_freq = c->cfg->freq; /* shares its field with sample_period */
        a.sample_regs_user = NMP_REGS_MASK;
        what = "cpu-clock";
        kind = NMP_EV_SOFT;
    } else {
        software_attr(&a, PERF_COUNT_SW_DUMMY, 0, launch);
        what = "dummy";
        kind = NMP_EV_SIDEBAND;
    }
    sideband_attr(&a, RING_PAGES_MAX * 4096);
    long fd = perf_open(&a, pid, cpu, -1);
    if (fd < 0) {
        if (errno == ESRCH)
            return -TASK_GONE;
        perf_error(c, what, errno);
        return -1;
    }
    if (!add_ev(&c->ev, (int)fd, kind, &a)) {
        close((int)fd);
        return -1;
    }
    return (int)fd;
}

/* The hardware backend's events, one group, into the cpu's ring. */
static int open_hw_group(struct nmp_collector *c, pid_t pid, int cpu, int launch, int owner_fd)
{
    int group = -1;
    for (int h = 0; h < c->be.nhw; h++) {
        struct perf_event_attr a = c->be.hw_attrs[h];
        /* the backend's exclude_* bits stay (IBS cannot exclude the kernel; its kernel
         * samples are dropped by header.misc) */
        unsigned ek = a.exclude_kernel, eh = a.exclude_hv;
        base_attr(&a, launch);
        a.exclude_kernel = ek;
        a.exclude_hv = eh;
        if (h > 0)
            a.disabled = 0, a.enable_on_exec = 0; /* members follow the leader */
        long fd = perf_open(&a, pid, cpu, group);
        if (fd < 0) {
            perf_error(c, nmp_backend_name(c->be.backend), errno);
            return -1;
        }
        c->be.hw_attrs[h] = a; /* as opened */
        if (h == 0)
            group = (int)fd;
        if (into_ring(c, (int)fd, NMP_EV_HW, &a, owner_fd, "PERF_EVENT_IOC_SET_OUTPUT") != 0)
            return -1;
    }
    return 0;
}

/* The recorded share of page faults: one in this many (0 in a config: every one). */
unsigned nmp_fault_period(const struct nmp_config *cfg)
{
    return cfg->fault_period ? cfg->fault_period : 1;
}

/* First touches, best source first (enum nmp_fault_source): the completed minor and major
 * faults with the size of the page they mapped (a 2 MiB transparent huge page is one
 * fault: Linux >= 5.11 PERF_SAMPLE_DATA_PAGE_SIZE; these events fire after the fault is
 * handled, when the page table has the page); else the tracepoint (write bit known) when
 * allowed; else the software page-faults event with the address (which fires before the
 * fault is handled: page size unknown).  The source the first cpu got is required of the
 * others. */
static int open_fault_events(struct nmp_collector *c, pid_t pid, int cpu, int launch,
                             int owner_fd, uint64_t tp_id)
{
    enum nmp_fault_source *src = &c->ev.fault_source;
    struct perf_event_attr a;
    long fd;
    if (*src == NMP_FAULTS_UNTRIED || *src == NMP_FAULTS_DONE) {
        static const uint64_t done_events[2] = {PERF_COUNT_SW_PAGE_FAULTS_MIN,
                                                PERF_COUNT_SW_PAGE_FAULTS_MAJ};
        int opened = 0;
        for (int k = 0; k < 2; k++) {
            software_attr(&a, done_events[k],
                          PERF_SAMPLE_IP | PERF_SAMPLE_ADDR | PERF_SAMPLE_DATA_PAGE_SIZE, launch);
            a.sample_period = nmp_fault_period(c->cfg);
            if ((fd = perf_open(&a, pid, cpu, -1)) < 0)
                break;
            if (into_ring(c, (int)fd, NMP_EV_FAULT_DONE, &a, owner_fd, "page-fault events") != 0)
                return -1;
            opened++;
        }
        if (opened == 2) {
            *src = NMP_FAULTS_DONE;
            return 0;
        }
        if (*src == NMP_FAULTS_DONE || opened) {
            perf_error(c, "minor-faults/major-faults", errno);
            return -1;
        }
        nmp_debug("minor/major fault events with the data page size: %s", strerror(errno));
    }
    if (*src != NMP_FAULTS_SW && tp_id) {
        memset(&a, 0, sizeof a);
        a.type = PERF_TYPE_TRACEPOINT;
        a.config = tp_id;
        a.sample_period = nmp_fault_period(c->cfg);
        a.sample_type = PERF_SAMPLE_IP | PERF_SAMPLE_RAW;
        base_attr(&a, launch);
        a.exclude_kernel = 0; /* the tracepoint fires in the kernel's fault handler */
        if ((fd = perf_open(&a, pid, cpu, -1)) >= 0) {
            *src = NMP_FAULTS_TP;
            return into_ring(c, (int)fd, NMP_EV_FAULT_TP, &a, owner_fd, "page-fault tracepoint");
        }
        if (*src == NMP_FAULTS_TP) {
            perf_error(c, "exceptions:page_fault_user", errno);
            return -1;
        }
        nmp_debug("tracepoint exceptions:page_fault_user: %s", strerror(errno));
    }
    software_attr(&a, PERF_COUNT_SW_PAGE_FAULTS, PERF_SAMPLE_IP | PERF_SAMPLE_ADDR, launch);
    a.sample_period = nmp_fault_period(c->cfg);
    if ((fd = perf_open(&a, pid, cpu, -1)) < 0) {
        if (*src == NMP_FAULTS_UNTRIED)
            nmp_warn(c, "page-faults event unavailable (%s): no first-touch data",
                     strerror(errno));
        *src = NMP_FAULTS_NONE;
        return 0;
    }
    *src = NMP_FAULTS_SW;
    return into_ring(c, (int)fd, NMP_EV_FAULT_SW, &a, owner_fd, "page-faults event");
}

/* Every event of one task (or, with inherit, its future descendants) on every cpu.
 * owner_fd[i]: the fd that owns cpu i's ring, -1 before the first task.  Returns 0,
 * TASK_GONE, or -1 with c->err. */
static int open_task_events(struct nmp_collector *c, pid_t pid, int launch, int *owner_fd,
                            uint64_t tp_id)
{
    for (int ci = 0; ci < c->ev.ncpus; ci++) {
        int cpu = c->ev.cpus[ci];
        int lead = open_lead(c, pid, cpu, launch);
        if (lead < 0)
            return lead == -TASK_GONE ? TASK_GONE : -1;
        if (owner_fd[ci] < 0) {
            if (map_ring(c, lead, cpu) != 0)
                return -1;
            owner_fd[ci] = lead;
        } else if (ioctl(lead, PERF_EVENT_IOC_SET_OUTPUT, owner_fd[ci]) != 0) {
            snprintf(c->err, NMP_ERRLEN, "PERF_EVENT_IOC_SET_OUTPUT: %s", strerror(errno));
            return -1;
        }
        if (c->be.backend != NMP_BACKEND_SOFT &&
            open_hw_group(c, pid, cpu, launch, owner_fd[ci]) != 0)
            return -1;
        if (open_fault_events(c, pid, cpu, launch, owner_fd[ci], tp_id) != 0)
            return -1;
    }
    return 0;
}

/* Attach: every existing thread of the process (inherit covers the ones created later). */
static int open_process_events(struct nmp_collector *c, pid_t pid, int *owner_fd, uint64_t tp_id)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/task", (int)pid);
    DIR *d = opendir(path);
    if (!d) {
        snprintf(c->err, NMP_ERRLEN, "no process %d (%s)", (int)pid, strerror(errno));
        return -1;
    }
    struct dirent *de;
    int opened = 0, rc = 0;
    while ((de = readdir(d))) {
        if (de->d_name[0] < '0' || de->d_name[0] > '9')
            continue;
        uint32_t tid = (uint32_t)strtoul(de->d_name, NULL, 10);
        int r = open_task_events(c, (pid_t)tid, 0, owner_fd, tp_id);
        if (r < 0) {
            rc = -1;
            break;
        }
        if (r == TASK_GONE)
            continue;
        opened++;
        if (nmp_thread_add(&c->tasks, (uint32_t)pid, tid, 0, nmp_now_ns()))
            nmp_thread_read_comm(&c->tasks, (uint32_t)pid, tid);
    }
    closedir(d);
    if (rc == 0 && !opened) {
        snprintf(c->err, NMP_ERRLEN, "process %d has no threads left", (int)pid);
        rc = -1;
    }
    return rc;
}

int nmp_events_open(struct nmp_collector *c, pid_t pid, int launch)
{
    if (online_cpus(&c->ev) <= 0)
        return -1;
    int *owner = malloc((size_t)c->ev.ncpus * sizeof *owner);
    if (!owner)
        return -1;
    for (int i = 0; i < c->ev.ncpus; i++)
        owner[i] = -1;
    uint64_t tp_id = 0;
    if (geteuid() == 0 && tracepoint_setup(&c->ev, &tp_id) != 0)
        tp_id = 0;
    int rc;
    if (launch) {
        rc = open_task_events(c, pid, 1, owner, tp_id);
        if (rc == TASK_GONE) {
            snprintf(c->err, NMP_ERRLEN, "the command's process vanished before it started");
            rc = -1;
        }
    } else {
        rc = open_process_events(c, pid, owner, tp_id);
    }
    free(owner);
    qsort(c->ev.evs, c->ev.nev, sizeof *c->ev.evs, cmp_ev);
    return rc;
}

void nmp_events_disable(struct nmp_collector *c)
{
    for (size_t i = 0; i < c->ev.nev; i++)
        ioctl(c->ev.evs[i].fd, PERF_EVENT_IOC_DISABLE, 0);
}

void nmp_events_close(struct nmp_collector *c)
{
    struct nmp_events *ev = &c->ev;
    for (size_t i = 0; i < ev->nring; i++)
        munmap(ev->rings[i].meta, ev->rings[i].map_len);
    for (size_t i = 0; i < ev->nev; i++)
        close(ev->evs[i].fd);
    free(ev->rings);
    free(ev->evs);
    ev->rings = NULL;
    ev->evs = NULL;
    ev->nring = ev->nev = ev->ringcap = ev->evcap = 0;
}
