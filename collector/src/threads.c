/* The threads and processes of the program as its records show them (FORK, EXIT, COMM;
 * tids are reused, so a thread is an entry per lifetime), and the threads table written
 * from them with the affinities the watcher read (docs/profile-format.md, threads). */
#include "nmp_collector.h"
#include "nmp_shim_format.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <unistd.h>

struct nmp_thread *nmp_thread_find(struct nmp_tasks *t, uint32_t tid)
{
    uint32_t v = nmp_u32map_get(&t->tid_index, tid);
    return v ? &t->threads[v - 1] : NULL;
}

struct nmp_thread *nmp_thread_add(struct nmp_tasks *t, uint32_t pid, uint32_t tid,
                                  uint32_t ppid, uint64_t start)
{
    if (NMP_GROW(t->threads, t->thcap, t->nthreads + 1, 64) != 0)
        return NULL;
    struct nmp_thread *th = &t->threads[t->nthreads++];
    *th = (struct nmp_thread){.pid = pid, .tid = tid, .ppid = ppid, .start = start, .alive = 1};
    /* the newest entry is the one found for its tid */
    nmp_u32map_put(&t->tid_index, tid, (uint32_t)t->nthreads);
    return th;
}

struct nmp_thread *nmp_thread_of(struct nmp_tasks *t, uint32_t pid, uint32_t tid, uint64_t time)
{
    struct nmp_thread *th = nmp_thread_find(t, tid);
    if (!th || (!th->alive && th->end && time > th->end))
        th = nmp_thread_add(t, pid, tid, 0, time);
    return th;
}

/* Reads what is new in the shim's tls.<pid> of process `p` into its threads' entries; the
 * file's path in `path` (PATH_MAX), "" when there is none to read: a run without the shim
 * (attach mode) opens nothing, however many of its samples are thread-local. */
static void read_tls(struct nmp_collector *c, struct nmp_process *p, char *path, size_t cap)
{
    /* attached without --alloc-dir: the program runs without the shim, whatever --shim says */
    const char *dir = c->cfg->alloc_dir                          ? c->cfg->alloc_dir
                      : c->cfg->shim && !c->cfg->attach_pid ? c->cfg->dir
                                                                 : NULL;
    path[0] = 0;
    if (!dir || snprintf(path, cap, "%s/" NMP_SHIM_TLS_FILE, dir, p->pid) >= (int)cap) {
        path[0] = 0;
        return;
    }
    FILE *f = fopen(path, "re");
    if (!f)
        return;
    struct nmp_shim_tls r;
    if (fseek(f, (long)p->tls_read, SEEK_SET) == 0) {
        /* a tid's newest record is its thread of this lifetime (a reused tid, a new
         * program image after an execve): it goes to the tid's newest entry */
        while (fread(&r, sizeof r, 1, f) == 1) {
            p->tls_read += sizeof r;
            if (r.kind == NMP_SHIM_TLS_MODULE) {
                if (NMP_GROW(p->tls_mods, p->tls_mods_cap, p->ntls_mods + 1, 8) == 0)
                    p->tls_mods[p->ntls_mods++] = (struct nmp_tls_module){.base = r.tp, .offset = r.tid};
                continue;
            }
            if (r.kind != NMP_SHIM_TLS_THREAD)
                continue;
            struct nmp_thread *t = nmp_thread_find(&c->tasks, r.tid);
            if (t && t->pid == p->pid)
                t->tls_base = r.tp;
        }
    }
    fclose(f);
}

/* The %fs base of a running thread of another process, from its registers (ptrace(2)):
 * PTRACE_SEIZE and PTRACE_INTERRUPT stop it for the time of one PTRACE_GETREGS and leave
 * no signal behind, unlike PTRACE_ATTACH's SIGSTOP; a signal that arrived meanwhile (a
 * signal-delivery stop instead of the interrupt's event stop) is handed back at the
 * detach.  0 when it cannot be read: the thread ended, another tracer holds it, or ptrace
 * is refused (kernel.yama.ptrace_scope without CAP_SYS_PTRACE). */
static uint64_t registers_fs_base(struct nmp_collector *c, uint32_t pid, uint32_t tid)
{
#if defined(__x86_64__)
    /* the tid still a thread of this process (not reused by another since) */
    char task[64];
    snprintf(task, sizeof task, "/proc/%" PRIu32 "/task/%" PRIu32, pid, tid);
    if (access(task, F_OK) != 0 || ptrace(PTRACE_SEIZE, (pid_t)tid, NULL, NULL) != 0)
        return 0;
    uint64_t fs = 0;
    int st = 0;
    long sig = 0;
    pid_t w = -1;
    if (ptrace(PTRACE_INTERRUPT, (pid_t)tid, NULL, NULL) == 0)
        w = waitpid((pid_t)tid, &st, __WALL);
    if (w == (pid_t)tid && (WIFEXITED(st) || WIFSIGNALED(st))) {
        /* it ended before it stopped, and this wait took its exit: the command itself
         * (numaprof-collect's child) is then never reported to the run loop's waitpid,
         * which waited for it forever (1 recording in 5-7 on a loaded 2-core machine:
         * `sh -c` loops of 20 ms) */
        if ((pid_t)tid == c->run.root && !c->run.have_status)
            nmp_status_from_wait(&c->run, st);
        return 0;
    }
    if (w == (pid_t)tid && WIFSTOPPED(st)) {
        struct user_regs_struct r;
        if (ptrace(PTRACE_GETREGS, (pid_t)tid, NULL, &r) == 0)
            fs = r.fs_base;
        if ((st >> 16) != PTRACE_EVENT_STOP)
            sig = WSTOPSIG(st);
    }
    ptrace(PTRACE_DETACH, (pid_t)tid, NULL, (void *)sig);
    return fs;
#else
    (void)c;
    (void)pid;
    (void)tid;
    return 0;
#endif
}

uint64_t nmp_thread_pointer(struct nmp_collector *c, uint32_t pid, uint32_t tid, uint64_t time)
{
    struct nmp_thread *th = nmp_thread_of(&c->tasks, pid, tid, time);
    if (!th || th->tls_base)
        return th ? th->tls_base : 0;
    struct nmp_process *p = nmp_process_find(&c->tasks, pid);
    char path[4096];
    path[0] = 0;
    if (p)
        read_tls(c, p, path, sizeof path);
    if (!th->tls_base && !path[0] && !th->tls_asked && th->alive) {
        /* no shim to say it: the thread's own registers, while it runs */
        th->tls_asked = 1;
        th->tls_base = registers_fs_base(c, pid, tid);
    }
    return th->tls_base;
}

void nmp_thread_read_comm(struct nmp_tasks *t, uint32_t pid, uint32_t tid)
{
    struct nmp_thread *th = nmp_thread_find(t, tid);
    char path[64];
    snprintf(path, sizeof path, "/proc/%" PRIu32 "/task/%" PRIu32 "/comm", pid, tid);
    FILE *f = th ? fopen(path, "re") : NULL;
    if (!f)
        return;
    if (fgets(th->comm, sizeof th->comm, f))
        th->comm[strcspn(th->comm, "\n")] = 0;
    fclose(f);
}

struct nmp_process *nmp_process_find(struct nmp_tasks *t, uint32_t pid)
{
    for (size_t i = 0; i < t->nprocs; i++)
        if (t->procs[i].pid == pid)
            return &t->procs[i];
    return NULL;
}

void nmp_process_add(struct nmp_collector *c, uint32_t pid)
{
    struct nmp_tasks *t = &c->tasks;
    nmp_aff_watch_pid(c->aff, pid);
    struct nmp_process *p = nmp_process_find(t, pid);
    if (p) {
        p->alive = 1;
        return;
    }
    if (NMP_GROW(t->procs, t->pcap, t->nprocs + 1, 16) == 0)
        t->procs[t->nprocs++] = (struct nmp_process){.pid = pid, .alive = 1};
}

/* The tls_modules table: the modules' static TLS blocks the shim recorded (read with the
 * threads' pointers); no table when there are none. */
static int write_tls_modules(struct nmp_collector *c)
{
    size_t n = 0;
    for (size_t i = 0; i < c->tasks.nprocs; i++)
        n += c->tasks.procs[i].ntls_mods;
    if (!n)
        return 0;
    struct nmp_table *tab = nmp_table_open(c->cfg->dir, NMP_TABLE_ID_tls_modules, -1);
    if (!tab)
        return -1;
    for (size_t i = 0; i < c->tasks.nprocs; i++) {
        const struct nmp_process *p = &c->tasks.procs[i];
        for (size_t k = 0; k < p->ntls_mods; k++) {
            uint64_t v[NMP_tls_modules_NCOLS] = {[NMP_tls_modules_pid] = p->pid,
                                                 [NMP_tls_modules_base] = p->tls_mods[k].base,
                                                 [NMP_tls_modules_offset] = p->tls_mods[k].offset};
            nmp_table_append(tab, v);
        }
    }
    return nmp_table_close(tab);
}

int nmp_threads_write(struct nmp_collector *c)
{
    struct nmp_table *tab = nmp_table_open(c->cfg->dir, NMP_TABLE_ID_threads, -1);
    if (!tab)
        return -1;
    nmp_aff_finish(c->aff);
    /* every thread's pointer (threads.tls_base), then the shim's files are done with
     * (a slice's stay for the next one, with the shim's other files) */
    for (size_t i = 0; i < c->tasks.nprocs; i++) {
        char path[4096];
        read_tls(c, &c->tasks.procs[i], path, sizeof path);
        if (path[0] && !c->cfg->alloc_dir)
            unlink(path);
    }
    for (size_t i = 0; i < c->tasks.nthreads; i++) {
        struct nmp_thread *th = &c->tasks.threads[i];
        const char *first, *last;
        nmp_aff_lookup(c->aff, th->pid, th->tid, th->start, th->end, &first, &last);
        first = first ? first : "";
        last = last ? last : first;
        uint64_t v[NMP_threads_NCOLS] = {
            [NMP_threads_pid] = th->pid, [NMP_threads_tid] = th->tid,
            [NMP_threads_ppid] = th->ppid, [NMP_threads_start_time] = th->start,
            [NMP_threads_end_time] = th->end, [NMP_threads_comm] = (uintptr_t)th->comm,
            [NMP_threads_affinity_first] = (uintptr_t)first,
            [NMP_threads_affinity_last] = (uintptr_t)last, [NMP_threads_samples] = th->samples,
            [NMP_threads_tls_base] = th->tls_base};
        nmp_table_append(tab, v);
    }
    if (nmp_table_close(tab) != 0)
        return -1;
    return write_tls_modules(c);
}

void nmp_tasks_free(struct nmp_tasks *t)
{
    free(t->threads);
    nmp_u32map_free(&t->tid_index);
    for (size_t i = 0; i < t->nprocs; i++)
        free(t->procs[i].tls_mods);
    free(t->procs);
}
