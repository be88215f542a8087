/* The recording: run (or attach to) the command, sample it and write the profile.  This
 * file only wires the modules that do the work (nmp_collector.h lists them) and owns the
 * run loop: poll the rings, the signals and the control socket; drain the rings; ask for
 * page locations every tick; copy numa_maps and flush the tables every slow tick.
 */
#include "nmp_collector.h"

#include "nmp_decode.h"

#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#define TICK_NS 50000000ULL          /* drain + page queries */
#define SLOW_TICK_NS 1000000000ULL   /* numa_maps, table flush */
#define FIRST_SLOW_TICK_NS 200000000ULL

void nmp_warn(struct nmp_collector *c, const char *fmt, ...)
{
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    nmp_debug("warning: %s", buf);
    char *w = strdup(buf);
    if (w && NMP_GROW(c->warnings, c->warncap, c->nwarn + 1, 8) == 0)
        c->warnings[c->nwarn++] = w;
    else
        free(w);
}

void nmp_table_failed(struct nmp_collector *c, const char *table)
{
    if (!c->table_warned++)
        nmp_warn(c, "writing the %s table failed: %s", table, strerror(errno));
}

/* ---- tables ---- */

static int open_tables(struct nmp_collector *c)
{
    const char *dir = c->cfg->dir;
    /* the software backend has no latency, data source or physical address columns; the
     * hardware backends sample no registers */
    uint64_t regs = NMP_COLUMN(NMP_samples_sp) | NMP_COLUMN(NMP_samples_bp_sp) |
                    NMP_COLUMN(NMP_samples_insn_off) | NMP_COLUMN(NMP_samples_base_reg) |
                    NMP_COLUMN(NMP_samples_index_reg) | NMP_COLUMN(NMP_samples_base_off);
    uint64_t cols = c->be.backend == NMP_BACKEND_SOFT
                        ? (NMP_COLUMN(NMP_samples_rule + 1) - 1) | regs
                        : (NMP_COLUMN(NMP_samples_NCOLS) - 1) & ~regs & ~NMP_COLUMN(NMP_samples_bp);
    if (!(c->t.samples = nmp_table_open(dir, NMP_TABLE_ID_samples, cols)) ||
        !(c->t.faults = nmp_table_open(dir, NMP_TABLE_ID_faults, -1)) ||
        !(c->t.pages = nmp_table_open(dir, NMP_TABLE_ID_page_nodes, -1)) ||
        !(c->t.maps = nmp_table_open(dir, NMP_TABLE_ID_mappings, -1))) {
        snprintf(c->err, NMP_ERRLEN, "cannot create the profile tables in %s: %s", dir,
                 strerror(errno));
        return -1;
    }
    return 0;
}

static void flush_tables(struct nmp_collector *c)
{
    nmp_fault_runs_close(c);
    if (nmp_table_flush(c->t.samples) || nmp_table_flush(c->t.faults) ||
        nmp_table_flush(c->t.pages) || nmp_table_flush(c->t.maps))
        nmp_table_failed(c, "profile");
}

static int close_tables(struct nmp_collector *c)
{
    int first = 0; /* errno of the first table that failed */
    nmp_fault_runs_close(c);
    struct nmp_table **ts[] = {&c->t.samples, &c->t.faults, &c->t.pages, &c->t.maps,
                               &c->t.counters};
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

/* The counters table: numastat and vmstat, and the memory controllers' counters where
 * the machine and permissions allow; phase 0 before the run, 1 after. */
static void counters_snapshot(struct nmp_collector *c, int phase)
{
    if (!c->t.counters)
        return;
    uint64_t now = nmp_now_ns();
    if (phase == 0) {
        nmp_counters_snapshot(c->t.counters, now, 0);
        c->nodes.n = nmp_hw_node_counters_open(&c->nodes.h, c->nodes.why, sizeof c->nodes.why);
        if (c->nodes.n > 0)
            nmp_hw_node_counters_read(c->nodes.h, c->t.counters, now, 0);
        else
            c->nodes.h = NULL;
    } else {
        if (c->nodes.h)
            nmp_hw_node_counters_read(c->nodes.h, c->t.counters, now, 1);
        nmp_counters_snapshot(c->t.counters, now, 1);
    }
}

/* ---- the run loop ---- */

/* Returns the delay until the next slow tick: ~1 s, longer when copying numa_maps (a
 * page-table walk of every mapping) is expensive, so it stays under ~1 % of a cpu. */
static uint64_t tick_slow(struct nmp_collector *c)
{
    uint64_t t0 = nmp_now_ns();
    nmp_numa_maps_copy_all(c);
    uint64_t spent = nmp_now_ns() - t0;
    flush_tables(c);
    return spent * 100 > SLOW_TICK_NS ? spent * 100 : SLOW_TICK_NS;
}

/* Polls the rings and the signals until the command exits (or the attach time is up). */
static void run_loop(struct nmp_collector *c, int sfd, int pidfd, uint64_t deadline)
{
    size_t nring = c->ev.nring;
    enum { SIG_FD, PID_FD, CONTROL_FD, NFIXED }; /* after the rings */
    struct pollfd *pfd = calloc(nring + NFIXED, sizeof *pfd);
    if (!pfd)
        return;
    struct pollfd *fixed = pfd + nring;
    uint64_t next_tick = nmp_now_ns() + TICK_NS, next_slow = nmp_now_ns() + FIRST_SLOW_TICK_NS;
    int done = 0;
    while (!done) {
        for (size_t i = 0; i < nring; i++) {
            pfd[i].fd = c->ev.rings[i].hup ? -1 : c->ev.rings[i].fd;
            pfd[i].events = POLLIN;
        }
        fixed[SIG_FD] = (struct pollfd){.fd = sfd, .events = POLLIN};
        fixed[PID_FD] = (struct pollfd){.fd = pidfd, .events = POLLIN};
        fixed[CONTROL_FD] = (struct pollfd){.fd = c->run.cli_gone ? -1 : c->cfg->control_fd,
                                            .events = POLLIN};
        uint64_t now = nmp_now_ns();
        int timeout = next_tick > now ? (int)((next_tick - now) / 1000000) + 1 : 0;
        int r = poll(pfd, (nfds_t)(nring + NFIXED), timeout);
        if (r < 0 && errno != EINTR)
            break;
        for (size_t i = 0; i < nring; i++)
            if (pfd[i].revents & (POLLHUP | POLLERR))
                c->ev.rings[i].hup = 1; /* the task exited: drained on the ticks */
        if (r > 0 && (fixed[SIG_FD].revents & POLLIN))
            nmp_signals_read(c, sfd, &done);
        if (r > 0 && (fixed[CONTROL_FD].revents & (POLLIN | POLLHUP | POLLERR)))
            nmp_control_read(c, sfd, &done);
        if (pidfd >= 0 && (fixed[PID_FD].revents & POLLIN))
            done = 1;
        if (deadline && nmp_now_ns() >= deadline)
            done = 1;
        nmp_drain(c);
        now = nmp_now_ns();
        if (now >= next_tick) {
            nmp_pages_query(c);
            next_tick = now + TICK_NS;
        }
        if (now >= next_slow)
            next_slow = now + tick_slow(c);
    }
    free(pfd);
    if (c->cfg->attach_pid > 0) {
        nmp_events_disable(c);
        nmp_numa_maps_copy_all(c);
    }
    nmp_drain(c);
    nmp_pages_query(c);
}

/* ---- the steps of nmp_collect_run ---- */

/* Everything before the program runs: backend, decoder, watcher, tables and the first
 * counters (the topology is written while it runs).  0, or -1 with c->err. */
static int prepare(struct nmp_collector *c)
{
    const struct nmp_config *cfg = c->cfg;
    if (nmp_backend_select(c) != 0)
        return -1;
    if (realpath(cfg->dir, c->own.dir))
        c->own.dir_len = strlen(c->own.dir);
    if (!cfg->shim || !realpath(cfg->shim, c->own.shim))
        c->own.shim[0] = 0;
    if (cfg->alloc_dir && realpath(cfg->alloc_dir, c->own.alloc_dir))
        c->own.alloc_dir_len = strlen(c->own.alloc_dir);
    if (!(c->dec = nmp_decoder_new())) {
        snprintf(c->err, NMP_ERRLEN, "cannot initialise the Capstone x86-64 decoder");
        return -1;
    }
    if (!(c->aff = nmp_aff_new())) {
        snprintf(c->err, NMP_ERRLEN, "cannot initialise the affinity watcher: %s",
                 strerror(errno));
        return -1;
    }
    if (open_tables(c) != 0)
        return -1;
    if (!(c->t.counters = nmp_counters_open(cfg->dir)))
        nmp_warn(c, "counters: %s", strerror(errno));
    counters_snapshot(c, 0);
    return 0;
}

static void started(struct nmp_collector *c, uint32_t pid)
{
    nmp_process_add(c, pid);
    if (nmp_aff_start(c->aff) != 0)
        nmp_warn(c, "thread affinities are not recorded: cannot start the watcher thread");
}

static void mark_start(struct nmp_collector *c)
{
    c->run.start_ns = nmp_now_ns();
    clock_gettime(CLOCK_REALTIME, &c->run.start_rt);
}

/* -p: the events on every thread of the running process, its current mappings.
 * 0, or -1 with c->err. */
static int attach(struct nmp_collector *c, int *pidfd, uint64_t *deadline)
{
    pid_t pid = c->cfg->attach_pid;
    c->run.root = pid;
    nmp_topology_start(&c->topo, c->cfg->dir);
    *pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
    if (*pidfd < 0) {
        snprintf(c->err, NMP_ERRLEN, "cannot attach to process %d: %s", (int)pid,
                 strerror(errno));
        return -1;
    }
    if (nmp_events_open(c, pid, 0) != 0)
        return -1;
    started(c, (uint32_t)pid);
    nmp_mappings_from_proc(c, (uint32_t)pid);
    if (c->cfg->children) {
        /* what a launched command started before this recording, as if it had been
         * followed since (its events inherit to what it starts from now on) */
        pid_t kids[NMP_MAX_CHILDREN];
        size_t n = nmp_descendants(pid, kids, NMP_MAX_CHILDREN);
        if (n > NMP_MAX_CHILDREN)
            nmp_warn(c, "process %d has %zu processes below it: the first %d are recorded",
                     (int)pid, n, NMP_MAX_CHILDREN);
        for (size_t i = 0; i < n && i < NMP_MAX_CHILDREN; i++) {
            if (nmp_events_open(c, kids[i], 0) != 0) {
                c->err[0] = 0; /* ended meanwhile */
                continue;
            }
            nmp_process_add(c, (uint32_t)kids[i]);
            nmp_mappings_from_proc(c, (uint32_t)kids[i]);
        }
    }
    mark_start(c);
    if (c->cfg->duration > 0)
        *deadline = c->run.start_ns + (uint64_t)(c->cfg->duration * 1e9);
    return 0;
}

/* The command: started stopped, the events opened on it, then let go to exec.  0, -1
 * with c->err, or 1 when the exec failed (c->run has its status, c->err the reason). */
static int launch(struct nmp_collector *c, char **envp, const sigset_t *mask,
                  struct nmp_child *child)
{
    const struct nmp_config *cfg = c->cfg;
    if (nmp_child_spawn(cfg->cmd, envp, mask, child) != 0) {
        snprintf(c->err, NMP_ERRLEN, "cannot start %s: %s", cfg->cmd[0], strerror(errno));
        return -1;
    }
    c->run.root = child->pid;
    nmp_topology_start(&c->topo, cfg->dir);
    if (cfg->control_fd >= 0) {
        /* numaprof record supervises the program if numaprof-collect dies */
        char line[32];
        int len = snprintf(line, sizeof line, "pid %d\n", (int)child->pid);
        if (send(cfg->control_fd, line, (size_t)len, MSG_NOSIGNAL) != len)
            nmp_debug("control socket: %s", strerror(errno));
    }
    if (nmp_events_open(c, child->pid, 1) != 0) {
        kill(child->pid, SIGKILL);
        waitpid(child->pid, NULL, 0);
        child->pid = -1;
        return -1;
    }
    nmp_thread_add(&c->tasks, (uint32_t)child->pid, (uint32_t)child->pid, (uint32_t)getpid(), 0);
    started(c, (uint32_t)child->pid);
    mark_start(c);
    int e = nmp_child_release(child);
    if (!e)
        return 0;
    c->run.end_ns = nmp_now_ns();
    c->run.end_rt = c->run.start_rt;
    c->run.have_status = 1;
    c->run.exit_status = e == ENOENT ? NMP_EXIT_NOTFOUND : NMP_EXIT_NOEXEC;
    snprintf(c->run.exec_error, sizeof c->run.exec_error, "%s",
             e == ENOENT ? "command not found" : strerror(e));
    snprintf(c->err, NMP_ERRLEN, "%s: %s", cfg->cmd[0], c->run.exec_error);
    nmp_warn(c, "%s", c->err);
    child->pid = -1;
    return 1;
}

/* Everything after the program: the last counters, the shim's allocations, the threads
 * table, the tables closed, collector.json.  The command ran: its status stands even if
 * the profile could not be finished. */
static void finish(struct nmp_collector *c)
{
    const struct nmp_config *cfg = c->cfg;
    counters_snapshot(c, 1);
    struct nmp_shim_totals shim;
    memset(&shim, 0, sizeof shim);
    char serr[NMP_ERRLEN] = "";
    /* a slice of a launched command: the allocations its shim recorded since its start,
     * those alive during the slice (the files stay for the next one) */
    int conv = cfg->alloc_dir ? nmp_shim_convert_window(cfg->alloc_dir, cfg->dir, c->run.start_ns,
                                                        c->run.end_ns, 1, &shim, serr)
                              : nmp_shim_convert(cfg->dir, &shim, serr);
    if (conv != 0)
        nmp_warn(c, "allocation shim data: %s", serr[0] ? serr : strerror(errno));
    if (c->n.lost)
        nmp_warn(c, "%" PRIu64 " records lost (ring buffer overflow)", c->n.lost);
    if (nmp_threads_write(c) != 0) {
        c->write_errno = errno ? errno : EIO;
        nmp_warn(c, "writing the threads table failed: %s", strerror(errno));
    }
    if (close_tables(c) != 0) {
        if (!c->write_errno)
            c->write_errno = errno;
        nmp_warn(c, "writing the profile tables failed: %s", strerror(c->write_errno));
    }
    if (nmp_topology_join(&c->topo) != 0)
        nmp_warn(c, "topology: %s", c->topo.err);
    if (nmp_report_write(c, &shim) != 0 && !c->err[0])
        snprintf(c->err, NMP_ERRLEN, "cannot write %s/collector.json: %s", cfg->dir,
                 strerror(errno));
    nmp_debug("samples %" PRIu64 " with address %" PRIu64 " lost %" PRIu64 " faults %" PRIu64,
              c->n.samples, c->n.with_address, c->n.lost, c->n.faults);
}

static void free_collector(struct nmp_collector *c)
{
    nmp_topology_join(&c->topo);
    close_tables(c);
    nmp_events_close(c);
    if (c->nodes.h)
        nmp_hw_node_counters_close(c->nodes.h);
    nmp_decoder_free(c->dec);
    free(c->maps_seen);
    free(c->fault_state);
    c->fault_state = NULL;
    nmp_aff_free(c->aff);
    nmp_tasks_free(&c->tasks);
    nmp_pages_free(&c->pages);
    nmp_drain_free(&c->drain);
    for (size_t i = 0; i < c->nwarn; i++)
        free(c->warnings[i]);
    free(c->warnings);
}

int nmp_collect_run(const struct nmp_config *cfg, char *err)
{
    struct nmp_collector *c = calloc(1, sizeof *c);
    if (!c) {
        snprintf(err, NMP_ERRLEN, "out of memory");
        return NMP_EXIT_SELF;
    }
    c->cfg = cfg;
    c->err = err;
    err[0] = 0;
    int rc = NMP_EXIT_SELF;
    int sfd = -1, pidfd = -1;
    uint64_t deadline = 0;
    char **envp = NULL;
    struct nmp_child child = {.pid = -1, .go_fd = -1, .err_fd = -1};
    /* the stopping signals and the child's end come through a signalfd; the child
     * starts with the mask of before */
    sigset_t mask, oldmask;
    sigemptyset(&mask);
    sigaddset(&mask, SIGCHLD);
    sigaddset(&mask, SIGINT);
    sigaddset(&mask, SIGTERM);
    sigaddset(&mask, SIGHUP);
    sigaddset(&mask, SIGQUIT);

    if (prepare(c) != 0)
        goto out;
    if (sigprocmask(SIG_BLOCK, &mask, &oldmask) != 0 ||
        (sfd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK)) < 0) {
        snprintf(err, NMP_ERRLEN, "signalfd: %s", strerror(errno));
        goto out;
    }
    if (cfg->attach_pid > 0) {
        if (attach(c, &pidfd, &deadline) != 0)
            goto out;
        if (cfg->release_fd >= 0) {
            /* a command numaprof record holds before its exec until it is attached to:
             * it goes on from its first instruction (its end of the pipe then closes) */
            ssize_t w;
            do
                w = write(cfg->release_fd, "g", 1);
            while (w < 0 && errno == EINTR);
            close(cfg->release_fd);
        }
    } else {
        if (!(envp = nmp_child_env(cfg->shim, cfg->dir, cfg->alloc_threshold))) {
            snprintf(err, NMP_ERRLEN, "cannot start %s: %s", cfg->cmd[0], strerror(errno));
            goto out;
        }
        int r = launch(c, envp, &oldmask, &child);
        if (r < 0)
            goto out;
        if (r > 0) { /* the exec failed: no run, but a profile that says so */
            rc = c->run.exit_status;
            finish(c);
            goto out;
        }
    }
    run_loop(c, sfd, pidfd, deadline);
    c->run.end_ns = nmp_now_ns();
    clock_gettime(CLOCK_REALTIME, &c->run.end_rt);
    rc = cfg->attach_pid > 0 ? 0 : (c->run.have_status ? c->run.exit_status : NMP_EXIT_SELF);
    finish(c);
out:
    if (child.pid > 0 && !c->run.have_status && !c->run.cli_gone) {
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
    free_collector(c);
    free(c);
    return rc;
}
