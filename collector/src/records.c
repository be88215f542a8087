/* One perf record at a time, in time order (drain.c): samples become rows of the samples
 * table (the software backend's through the decoder, a hardware backend's through
 * nmp_hw_decode), fault samples rows of the faults table, MMAP/MMAP2 rows of the mappings
 * table, and FORK/EXIT/COMM the threads and processes (threads.c).  Records that cannot
 * be parsed are counted (collector.json "malformed"), never dropped silently.
 * Layouts: Linux include/uapi/linux/perf_event.h, enum perf_event_type.
 */
#include "nmp_collector.h"

#include "nmp_decode.h"
#include "nmp_perf_sample.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

/* The fixed parts of the side-band records we read. */
struct rec_mmap2 { /* PERF_RECORD_MMAP2, then char filename[] */
    uint32_t pid, tid;
    uint64_t addr, len, pgoff;
    /* PERF_RECORD_MMAP has the filename here */
    uint32_t maj, min; /* or the build id (PERF_RECORD_MISC_MMAP_BUILD_ID) */
    uint64_t ino, ino_generation;
    uint32_t prot, flags;
};
#define REC_MMAP_SIZE offsetof(struct rec_mmap2, maj)

struct rec_comm { /* PERF_RECORD_COMM, then char comm[] */
    uint32_t pid, tid;
};

struct rec_task { /* PERF_RECORD_FORK, PERF_RECORD_EXIT */
    uint32_t pid, ppid, tid, ptid;
    uint64_t time;
};

struct rec_lost { /* PERF_RECORD_LOST */
    uint64_t id, lost;
};

struct rec_lost_samples { /* PERF_RECORD_LOST_SAMPLES */
    uint64_t lost;
};

_Static_assert(REC_MMAP_SIZE == 32 && sizeof(struct rec_mmap2) == 64 &&
                   sizeof(struct rec_task) == 24,
               "perf record layouts");

/* x86 page-fault error code: the access was a write (X86_PF_WRITE, Linux
 * arch/x86/include/asm/trap_pf.h) */
#define X86_PF_WRITE (1u << 1)

/* A sample in the common schema of all backends: counted, its page queued for a location
 * query, one row.  (The software backend's table stops at `rule`: the later columns are
 * zero for it and not written.) */
static void add_sample(struct nmp_collector *c, const struct nmp_sample *s)
{
    c->n.samples++;
    c->n.rules[s->rule]++;
    /* a gather's base register (rule vsib_base) names its object, not the element: no
     * data address, and its page is no page the program accessed */
    if (s->addr && s->rule != NMP_RULE_VSIB_BASE) {
        c->n.with_address++;
        nmp_page_note(c, s->pid, s->addr, nmp_now_ns());
    }
    struct nmp_thread *t = nmp_thread_of(&c->tasks, s->pid, s->tid, s->time);
    if (t)
        t->samples++;
    uint64_t v[NMP_samples_NCOLS] = {
        [NMP_samples_time] = s->time, [NMP_samples_pid] = s->pid, [NMP_samples_tid] = s->tid,
        [NMP_samples_cpu] = s->cpu, [NMP_samples_ip] = s->ip, [NMP_samples_addr] = s->addr,
        [NMP_samples_access] = s->access, [NMP_samples_size] = s->size,
        [NMP_samples_rule] = s->rule, [NMP_samples_weight] = s->weight,
        [NMP_samples_data_src] = s->data_src, [NMP_samples_phys_addr] = s->phys_addr,
        [NMP_samples_sp] = s->sp, [NMP_samples_bp_sp] = (uint64_t)(int64_t)nmp_bp_sp(s->sp, s->bp),
        [NMP_samples_insn_off] = (uint64_t)(int64_t)s->insn_off,
        [NMP_samples_base_reg] = s->base_reg, [NMP_samples_index_reg] = s->index_reg,
        [NMP_samples_base_off] = (uint64_t)(int64_t)s->base_off};
    if (nmp_table_append(c->t.samples, v) != 0)
        nmp_table_failed(c, "samples");
}

/* The software backend: the data address from the instruction at IP and the sampled
 * registers (decode.c). */
static void on_soft_sample(struct nmp_collector *c, const struct nmp_ev *e, const uint8_t *body,
                           size_t len)
{
    struct nmp_perf_sample ps;
    if (nmp_perf_sample_parse(&e->attr, body, len, &ps) != 0 || ps.nregs > NMP_NREGS) {
        c->n.malformed++;
        return;
    }
    struct nmp_sample s = {.time = ps.time, .ip = ps.ip, .pid = ps.pid, .tid = ps.tid,
                           .cpu = (uint16_t)ps.cpu};
    if (ps.regs_abi && ps.regs) {
        uint64_t vals[NMP_NREGS];
        memcpy(vals, ps.regs, ps.nregs * sizeof *vals);
        struct nmp_regs regs;
        nmp_regs_unpack(e->attr.sample_regs_user, vals, ps.nregs, &regs);
        nmp_decode_sample(c->dec, &regs, &s);
    } else {
        nmp_decode_sample(c->dec, NULL, &s);
    }
    if (s.tls && nmp_rule_has_address(s.rule)) {
        /* a thread-local variable: at the thread's pointer plus the offset decoded; the
         * registers name no variable (the offset is not an address) */
        uint64_t tp = nmp_thread_pointer(c, s.pid, s.tid, s.time);
        s.addr = tp ? tp + s.addr : 0;
        if (!tp)
            s.rule = NMP_RULE_SEGMENT;
        s.base_reg = s.index_reg = 0;
        s.base_off = NMP_BASE_OFF_UNKNOWN;
    }
    if (s.rule == NMP_RULE_KERNEL) /* (a hardware backend counts by header.misc instead) */
        c->n.outside_user++;
    add_sample(c, &s);
}

static void on_hw_sample(struct nmp_collector *c, const struct nmp_ev *e, uint16_t misc,
                         const uint8_t *body, size_t len)
{
    if (!nmp_hw_misc_is_user(misc)) {
        c->n.outside_user++;
        return;
    }
    struct nmp_sample s;
    memset(&s, 0, sizeof s);
    int r = nmp_hw_decode(c->be.backend, &e->attr, body, len, &s);
    if (r == NMP_HW_SKIP)
        return; /* a helper event of the group (e.g. mem-loads-aux), not a memory sample */
    if (r != 0) {
        c->n.hw_decode_errors++;
        return;
    }
    add_sample(c, &s);
}

static void on_fault(struct nmp_collector *c, const struct nmp_ev *e, const uint8_t *body,
                     size_t len)
{
    struct nmp_perf_sample ps;
    if (nmp_perf_sample_parse(&e->attr, body, len, &ps) != 0) {
        c->n.malformed++;
        return;
    }
    uint64_t ip = ps.ip, addr = ps.addr;
    uint8_t flags = 0;
    enum nmp_fault_source source = e->kind == NMP_EV_FAULT_DONE ? NMP_FAULTS_DONE : NMP_FAULTS_SW;
    if (e->kind == NMP_EV_FAULT_TP) {
        const struct nmp_events *ev = &c->ev;
        source = NMP_FAULTS_TP;
        if (!ps.raw || ps.raw_size < (uint32_t)ev->tp_off_err + 8) {
            c->n.malformed++;
            return;
        }
        addr = nmp_rd64(ps.raw + ev->tp_off_addr);
        ip = nmp_rd64(ps.raw + ev->tp_off_ip);
        uint64_t ec = nmp_rd64(ps.raw + ev->tp_off_err);
        flags = NMP_FAULT_WRITE_KNOWN | ((ec & X86_PF_WRITE) ? NMP_FAULT_WRITE : 0);
    }
    c->n.faults++;
    /* the page the fault mapped: 4 KiB, or 2 MiB for a transparent huge page (only the
     * completed-fault events know it; 0 = not known) */
    uint64_t v[NMP_faults_NCOLS] = {
        [NMP_faults_time] = ps.time, [NMP_faults_pid] = ps.pid, [NMP_faults_tid] = ps.tid,
        [NMP_faults_cpu] = ps.cpu, [NMP_faults_ip] = ip, [NMP_faults_addr] = addr,
        [NMP_faults_flags] = flags, [NMP_faults_source] = (uint64_t)source,
        [NMP_faults_page_size] = ps.data_page_size};
    nmp_fault_add(c, v);
}

static void on_sample(struct nmp_collector *c, uint16_t misc, const uint8_t *b, size_t blen)
{
    if (blen < sizeof(uint64_t)) /* PERF_SAMPLE_IDENTIFIER comes first */
        return;
    const struct nmp_ev *e = nmp_ev_of(&c->ev, nmp_rd64(b));
    if (!e) {
        c->n.malformed++;
        return;
    }
    switch (e->kind) {
    case NMP_EV_SOFT:
        on_soft_sample(c, e, b, blen);
        break;
    case NMP_EV_HW:
        on_hw_sample(c, e, misc, b, blen);
        break;
    case NMP_EV_FAULT_SW:
    case NMP_EV_FAULT_TP:
    case NMP_EV_FAULT_DONE:
        on_fault(c, e, b, blen);
        break;
    case NMP_EV_SIDEBAND:
        break;
    }
}

#define MAPS_SEEN_SLOTS (1u << 16)

/* Whether this data mapping (all of its fields) was written already; remembers it if not.
 * At most half the table is filled: past that every new mapping is written. */
static int mapping_seen(struct nmp_collector *c, uint32_t pid, uint64_t start, uint64_t len,
                        uint64_t pgoff, uint32_t prot, uint32_t flags, const char *path)
{
    uint64_t h = nmp_mix64(((uint64_t)pid << 32) ^ prot ^ ((uint64_t)flags << 8));
    h = nmp_mix64(h ^ start);
    h = nmp_mix64(h ^ len);
    h = nmp_mix64(h ^ pgoff);
    for (const char *p = path ? path : ""; *p; p++)
        h = (h ^ (unsigned char)*p) * 0x100000001b3ull;
    h = nmp_mix64(h) | 1;
    if (!c->maps_seen && !(c->maps_seen = calloc(MAPS_SEEN_SLOTS, sizeof *c->maps_seen)))
        return 0;
    for (size_t i = h & (MAPS_SEEN_SLOTS - 1);; i = (i + 1) & (MAPS_SEEN_SLOTS - 1)) {
        if (c->maps_seen[i] == h)
            return 1;
        if (!c->maps_seen[i]) {
            if (c->nmaps_seen < MAPS_SEEN_SLOTS / 2) {
                c->maps_seen[i] = h;
                c->nmaps_seen++;
            }
            return 0;
        }
    }
}

void nmp_mapping_add(struct nmp_collector *c, uint64_t time, uint32_t pid, uint64_t start,
                     uint64_t len, uint64_t pgoff, uint32_t prot, uint32_t flags,
                     const char *path)
{
    const struct nmp_own_files *own = &c->own;
    nmp_decoder_mmap(c->dec, pid, start, len, pgoff, path);
    /* the kernel names a mapping by its canonical path (d_path), as realpath() does */
    if (path && ((own->dir_len && !strncmp(path, own->dir, own->dir_len) &&
                  path[own->dir_len] == '/') ||
                 (own->alloc_dir_len && !strncmp(path, own->alloc_dir, own->alloc_dir_len) &&
                  path[own->alloc_dir_len] == '/') ||
                 (own->shim[0] && !strcmp(path, own->shim))))
        flags |= NMP_MAP_NUMAPROF;
    if (!(prot & PROT_EXEC) && mapping_seen(c, pid, start, len, pgoff, prot, flags, path))
        return; /* the same data mapping again: its first row stands for it (an interval
                   from its time on, docs/profile-format.md) */
    uint64_t v[NMP_mappings_NCOLS] = {
        [NMP_mappings_time] = time, [NMP_mappings_pid] = pid, [NMP_mappings_start] = start,
        [NMP_mappings_len] = len, [NMP_mappings_pgoff] = pgoff, [NMP_mappings_prot] = prot,
        [NMP_mappings_flags] = flags, [NMP_mappings_path] = (uintptr_t)path};
    if (nmp_table_append(c->t.maps, v) != 0)
        nmp_table_failed(c, "mappings");
}

/* MMAP and MMAP2 (the same fields up to the filename; MMAP has no prot and flags). */
static void on_mmap(struct nmp_collector *c, uint16_t type, const uint8_t *b, size_t blen,
                    uint64_t time)
{
    size_t fixed = type == PERF_RECORD_MMAP2 ? sizeof(struct rec_mmap2) : REC_MMAP_SIZE;
    if (blen <= fixed)
        return;
    struct rec_mmap2 m = {0};
    memcpy(&m, b, fixed);
    char path[4096];
    size_t n = strnlen((const char *)b + fixed, blen - fixed);
    if (n >= sizeof path)
        n = sizeof path - 1;
    memcpy(path, b + fixed, n);
    path[n] = 0;
    nmp_mapping_add(c, time, m.pid, m.addr, m.len, m.pgoff, m.prot, m.flags, path);
}

static void on_comm(struct nmp_collector *c, uint16_t misc, const uint8_t *b, size_t blen,
                    uint64_t time)
{
    struct rec_comm r;
    if (blen <= sizeof r)
        return;
    memcpy(&r, b, sizeof r);
    struct nmp_thread *t = nmp_thread_of(&c->tasks, r.pid, r.tid, time);
    if (misc & PERF_RECORD_MISC_COMM_EXEC) {
        nmp_decoder_exec(c->dec, r.pid);
        nmp_process_add(c, r.pid);
        if (t && !t->start)
            t->start = time;
    }
    if (t) {
        size_t n = strnlen((const char *)b + sizeof r, blen - sizeof r);
        if (n > NMP_COMM_LEN)
            n = NMP_COMM_LEN;
        memcpy(t->comm, b + sizeof r, n);
        t->comm[n] = 0;
    }
}

static void on_task_fork(struct nmp_collector *c, const uint8_t *b, size_t blen)
{
    struct rec_task r;
    if (blen < sizeof r)
        return;
    memcpy(&r, b, sizeof r);
    char comm[sizeof c->tasks.threads->comm] = "";
    struct nmp_thread *parent = nmp_thread_find(&c->tasks, r.ptid);
    if (parent) /* copied first: adding a thread may move the array */
        memcpy(comm, parent->comm, sizeof comm);
    struct nmp_thread *t = nmp_thread_add(&c->tasks, r.pid, r.tid, r.ppid, r.time);
    if (t) /* its affinity: the watcher's, read while it runs */
        memcpy(t->comm, comm, sizeof t->comm);
    if (r.pid != r.ppid) {
        nmp_decoder_fork(c->dec, r.ppid, r.pid);
        nmp_process_add(c, r.pid);
    }
}

static void on_task_exit(struct nmp_collector *c, const uint8_t *b, size_t blen)
{
    struct rec_task r;
    if (blen < sizeof r)
        return;
    memcpy(&r, b, sizeof r);
    struct nmp_thread *t = nmp_thread_find(&c->tasks, r.tid);
    if (t) {
        t->end = r.time;
        t->alive = 0;
    }
    if (r.pid == r.tid) {
        struct nmp_process *p = nmp_process_find(&c->tasks, r.pid);
        if (p)
            p->alive = 0;
    }
}

void nmp_record(struct nmp_collector *c, const uint8_t *rec, uint32_t len, uint64_t time)
{
    struct perf_event_header h;
    memcpy(&h, rec, sizeof h);
    const uint8_t *b = rec + sizeof h;
    size_t blen = len - sizeof h;
    switch (h.type) {
    case PERF_RECORD_SAMPLE:
        on_sample(c, h.misc, b, blen);
        break;
    case PERF_RECORD_MMAP:
    case PERF_RECORD_MMAP2:
        on_mmap(c, (uint16_t)h.type, b, blen, time);
        break;
    case PERF_RECORD_COMM:
        on_comm(c, h.misc, b, blen, time);
        break;
    case PERF_RECORD_FORK:
        on_task_fork(c, b, blen);
        break;
    case PERF_RECORD_EXIT:
        on_task_exit(c, b, blen);
        break;
    case PERF_RECORD_LOST:
        if (blen >= sizeof(struct rec_lost))
            c->n.lost += nmp_rd64(b + offsetof(struct rec_lost, lost));
        break;
    case PERF_RECORD_LOST_SAMPLES:
        if (blen >= sizeof(struct rec_lost_samples))
            c->n.lost += nmp_rd64(b + offsetof(struct rec_lost_samples, lost));
        break;
    case PERF_RECORD_THROTTLE:
        c->n.throttled++;
        break;
    case PERF_RECORD_UNTHROTTLE:
        c->n.unthrottled++;
        break;
    default:
        break;
    }
}
