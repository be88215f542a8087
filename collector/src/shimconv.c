/* Turns the shim's raw allocation events (<dir>/shim.<pid>.bin, nmp_shim_format.h) into
 * the objects and stack_frames tables (docs/profile-format.md).
 *
 * Pairing, per file (= per pid), in file order (which is causal, see nmp_shim_format.h):
 *  - FREE from free()/numa_free closes the newest live allocation at that address;
 *  - FREE from munmap closes every live allocation that starts inside the unmapped range;
 *  - a realloc ALLOC of a tracked block (NMP_SHIM_F_PREV_TRACKED) closes the oldest live
 *    allocation at `prev` (the realloc's own free
 *    happens inside the allocator before the record is written, so another thread may
 *    already have been given the old address: its allocation is the newer one);
 *  - a new mapping closes the live mappings that start inside it (MAP_FIXED replaced
 *    them, or they were unmapped in pieces below the threshold);
 *  - START (a new image after execve) closes everything still live.
 * PAGES records (where an allocation's pages were when it was released, or at exit)
 * become rows of object_pages as they are, one per node; the analyzer pairs them with
 * the allocations by process, address and time.
 * Slots whose type is 0 were never completed and are skipped.
 * Unmatched FREEs (blocks allocated before the shim was active, in the parent before a
 * fork, or just below the threshold) are ignored.  Identical call stacks share one id.
 *
 * Repeats are one row: a tracked block freed by the thread that allocated it, then
 * allocated again by that thread from the same call stack, at the same address and size,
 * within MERGE_GAP_NS, and no other allocation given any of its bytes in between (a loop
 * that mallocs, uses and frees a buffer per iteration), continues the same object: its
 * free_time moves on and `instances` counts the allocations it stands for.  An
 * allocation-heavy program's 600 K rows of one site become a row or two per thread.
 *
 * The slices of a running program (nmp_shim_convert_window with `keep`) do not read a
 * file again from its start: each resumes where the previous one stopped (shimstate.c).
 * A slot still being written when a slice reads the file (type 0 before a completed one)
 * is where the next slice resumes, the completed ones after it listed as read; a slot
 * still incomplete at the next slice was abandoned (its writer died) and is passed over.
 * What a slice boundary loses: a repeat (see below) that continues across it starts a
 * new row.
 *
 * A file with a foreign header is left in place and named in `err`, and the conversion of
 * the others still succeeds (returns 0 with err set); so does a file whose records become
 * invalid part-way (what precedes is kept).  The converted files are removed only after
 * both tables were written successfully.
 */
#include "nmp_collect.h"
#include "nmp_schema.h"
#include "nmp_shim_format.h"
#include "shimconv_int.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MERGE_GAP_NS 100000ULL          /* 100 us between a free and the next allocation */
#define MERGE_MAX_SIZE (64ULL << 20)     /* larger blocks stay one row each */

/* The object_pages rows of one PAGES record. */
static int add_pages(struct conv *c, const struct nmp_shim_record *r, uint32_t pid)
{
    for (unsigned i = 0; i < r->nframes; i++) {
        if (NMP_GROW(c->pages, c->cappages, c->npages + 1, 256) < 0)
            return -1;
        uint64_t *row = c->pages[c->npages++];
        memset(row, 0, sizeof c->pages[0]);
        row[NMP_object_pages_time] = r->time;
        row[NMP_object_pages_pid] = pid;
        row[NMP_object_pages_addr] = r->addr;
        row[NMP_object_pages_source] = r->kind;
        /* pages spanned, without overflow at the top of the range */
        row[NMP_object_pages_pages] = r->size / 4096 + (r->size % 4096 + (r->addr & 4095) + 4095) / 4096;
        row[NMP_object_pages_sampled] = r->prev;
        row[NMP_object_pages_node] = (uint64_t)(int64_t)NMP_PAGES_NODE(r->frames[i]);
        row[NMP_object_pages_count] = NMP_PAGES_COUNT(r->frames[i]);
        row[NMP_object_pages_policy] = r->flags & 0xffu;
        row[NMP_object_pages_mixed] = (r->flags & NMP_PAGES_F_MIXED) != 0;
        row[NMP_object_pages_segment] = NMP_PAGES_SEG(r->frames[i]);
    }
    return 0;
}

#define TOMB (NONE - 1)

/* ---- stacks ---- */

static uint64_t stack_hash(const uint64_t *frames, unsigned n)
{
    uint64_t h = n;
    for (unsigned i = 0; i < n; i++)
        h = nmp_mix64(h ^ frames[i]);
    return h;
}

static int stack_rehash(struct conv *c, size_t nslots)
{
    uint32_t *slots = calloc(nslots, sizeof *slots);
    if (!slots)
        return -1;
    for (size_t id = 0; id < c->nstacks; id++) {
        size_t i = stack_hash(c->stacks[id].frames, c->stacks[id].nframes) & (nslots - 1);
        while (slots[i])
            i = (i + 1) & (nslots - 1);
        slots[i] = (uint32_t)id + 1;
    }
    free(c->stack_slots);
    c->stack_slots = slots;
    c->nstack_slots = nslots;
    return 0;
}

/* Returns the id of this call stack, adding it if new; NO_STACK for an empty one. */
int nmp_conv_stack_id(struct conv *c, const uint64_t *frames, unsigned n, uint32_t *id)
{
    if (n == 0) {
        *id = NO_STACK;
        return 0;
    }
    if ((c->nstacks + 1) * 2 > c->nstack_slots &&
        stack_rehash(c, c->nstack_slots ? c->nstack_slots * 2 : 1024) < 0)
        return -1;
    size_t mask = c->nstack_slots - 1;
    size_t i = stack_hash(frames, n) & mask;
    for (; c->stack_slots[i]; i = (i + 1) & mask) {
        const struct stack *s = &c->stacks[c->stack_slots[i] - 1];
        if (s->nframes == n && memcmp(s->frames, frames, n * sizeof frames[0]) == 0) {
            *id = c->stack_slots[i] - 1;
            return 0;
        }
    }
    if (NMP_GROW(c->stacks, c->capstacks, c->nstacks + 1, 64) < 0)
        return -1;
    struct stack *s = &c->stacks[c->nstacks];
    memset(s, 0, sizeof *s);
    s->nframes = n;
    memcpy(s->frames, frames, n * sizeof frames[0]);
    c->stack_slots[i] = (uint32_t)c->nstacks + 1;
    *id = (uint32_t)c->nstacks++;
    return 0;
}

/* ---- live allocations of the current file ---- */

static size_t live_find(const struct conv *c, uint64_t addr)
{
    if (!c->nlive_slots)
        return (size_t)-1;
    size_t mask = c->nlive_slots - 1;
    for (size_t i = nmp_mix64(addr) & mask;; i = (i + 1) & mask) {
        if (c->live_vals[i] == NONE)
            return (size_t)-1;
        if (c->live_vals[i] != TOMB && c->live_keys[i] == addr)
            return i;
    }
}

static int live_rehash(struct conv *c, size_t nslots)
{
    uint64_t *keys = malloc(nslots * sizeof *keys);
    uint32_t *vals = malloc(nslots * sizeof *vals);
    if (!keys || !vals) {
        free(keys);
        free(vals);
        return -1;
    }
    memset(vals, 0xff, nslots * sizeof *vals);
    size_t used = 0;
    for (size_t j = 0; j < c->nlive_slots; j++) {
        if (c->live_vals[j] == NONE || c->live_vals[j] == TOMB)
            continue;
        size_t i = nmp_mix64(c->live_keys[j]) & (nslots - 1);
        while (vals[i] != NONE)
            i = (i + 1) & (nslots - 1);
        keys[i] = c->live_keys[j];
        vals[i] = c->live_vals[j];
        used++;
    }
    free(c->live_keys);
    free(c->live_vals);
    c->live_keys = keys;
    c->live_vals = vals;
    c->nlive_slots = nslots;
    c->nlive_used = used;
    c->nlive_keys = used;
    return 0;
}

void nmp_conv_live_reset(struct conv *c)
{
    if (c->live_vals)
        memset(c->live_vals, 0xff, c->nlive_slots * sizeof *c->live_vals);
    c->nlive_used = 0;
    c->nlive_keys = 0;
    c->nlive_mmaps = 0;
}

int nmp_conv_live_add(struct conv *c, uint32_t idx)
{
    struct obj *o = &c->objs[idx];
    if ((c->nlive_used + 1) * 2 > c->nlive_slots) {
        /* grow only for live keys; otherwise rebuild at the same size to drop tombstones */
        size_t nslots = c->nlive_slots ? c->nlive_slots : 1024;
        if ((c->nlive_keys + 1) * 4 > nslots)
            nslots *= 2;
        if (live_rehash(c, nslots) < 0)
            return -1;
    }
    size_t i = live_find(c, o->addr);
    if (i != (size_t)-1) {
        o->next_same_addr = c->live_vals[i];
        c->live_vals[i] = idx;
    } else {
        size_t mask = c->nlive_slots - 1;
        for (i = nmp_mix64(o->addr) & mask; c->live_vals[i] != NONE && c->live_vals[i] != TOMB;
             i = (i + 1) & mask)
            ;
        if (c->live_vals[i] == NONE)
            c->nlive_used++;
        c->live_keys[i] = o->addr;
        c->live_vals[i] = idx;
        o->next_same_addr = NONE;
        c->nlive_keys++;
    }
    o->live = 1;
    if (o->kind == NMP_KIND_MMAP || o->kind == NMP_KIND_NUMA) {
        if (NMP_GROW(c->live_mmaps, c->caplive_mmaps, c->nlive_mmaps + 1, 64) < 0)
            return -1;
        c->live_mmaps[c->nlive_mmaps++] = idx;
    }
    return 0;
}

/* Unlinks object `idx` from its address chain and marks it freed at `t`. */
static void live_close(struct conv *c, uint32_t idx, uint64_t t)
{
    struct obj *o = &c->objs[idx];
    if (!o->live)
        return;
    size_t i = live_find(c, o->addr);
    if (i != (size_t)-1) {
        uint32_t *link = &c->live_vals[i];
        while (*link != NONE && *link != idx)
            link = &c->objs[*link].next_same_addr;
        if (*link == idx)
            *link = o->next_same_addr;
        if (c->live_vals[i] == NONE) {
            c->live_vals[i] = TOMB; /* chain emptied; nlive_used keeps counting it */
            c->nlive_keys--;
        }
    }
    o->live = 0;
    o->free_time = t;
}

static void close_oldest(struct conv *c, uint64_t addr, uint64_t t)
{
    size_t i = live_find(c, addr);
    if (i == (size_t)-1)
        return;
    uint32_t idx = c->live_vals[i];
    while (c->objs[idx].next_same_addr != NONE)
        idx = c->objs[idx].next_same_addr;
    live_close(c, idx, t);
}

static void close_mapped_range(struct conv *c, uint64_t addr, uint64_t len, uint64_t t)
{
    size_t keep = 0;
    for (size_t k = 0; k < c->nlive_mmaps; k++) {
        uint32_t idx = c->live_mmaps[k];
        struct obj *o = &c->objs[idx];
        if (o->live && o->addr >= addr && o->addr - addr < len)
            live_close(c, idx, t);
        if (o->live)
            c->live_mmaps[keep++] = idx;
    }
    c->nlive_mmaps = keep;
}

static void close_all(struct conv *c, size_t first_obj, uint64_t t)
{
    for (size_t k = first_obj; k < c->nobjs; k++)
        if (c->objs[k].live) {
            c->objs[k].live = 0;
            c->objs[k].free_time = t;
        }
    nmp_conv_live_reset(c);
}

/* ---- repeats ---- */

static int mergeable_kind(int kind)
{
    return kind == NMP_KIND_MALLOC || kind == NMP_KIND_CALLOC || kind == NMP_KIND_ALIGNED;
}

/* A tracked block was freed by `tid`: a candidate for its next allocation. */
static int repeat_add(struct conv *c, uint32_t idx, uint32_t tid)
{
    const struct obj *o = &c->objs[idx];
    if (o->period || !mergeable_kind(o->kind) || o->tid != tid || o->size > MERGE_MAX_SIZE)
        return 0;
    for (size_t k = 0; k < c->nrepeat; k++)
        if (c->objs[c->repeat[k]].tid == tid) {
            c->repeat[k] = idx; /* the thread's latest */
            return 0;
        }
    if (NMP_GROW(c->repeat, c->caprepeat, c->nrepeat + 1, 16) < 0)
        return -1;
    c->repeat[c->nrepeat++] = idx;
    return 0;
}

/* An allocation [addr, addr + size) of `r`: the object it repeats (index), or NONE.
 * Candidates too old, or whose bytes this allocation takes otherwise, are dropped. */
static uint32_t repeat_take(struct conv *c, const struct nmp_shim_record *r, uint32_t stack)
{
    uint32_t hit = NONE;
    size_t keep = 0;
    for (size_t k = 0; k < c->nrepeat; k++) {
        uint32_t idx = c->repeat[k];
        const struct obj *o = &c->objs[idx];
        if (o->live || r->time > o->free_time + MERGE_GAP_NS)
            continue; /* allocated again already (or too long ago): no longer a candidate */
        int same = hit == NONE && !(r->flags & NMP_SHIM_F_SAMPLED) && r->tid == o->tid &&
                   r->addr == o->addr && r->size == o->size && r->kind == o->kind &&
                   stack == o->stack && stack != NO_STACK;
        if (same) {
            hit = idx;
            continue;
        }
        if (r->addr < o->addr + o->size && o->addr < r->addr + r->size)
            continue; /* its bytes went to another allocation */
        c->repeat[keep++] = idx;
    }
    c->nrepeat = keep;
    return hit;
}

/* ---- files ---- */

/* The next object (not counted in nobjs yet) from record `r`'s time, thread, address,
 * size, kind and call stack `sid`; NULL when out of memory. */
struct obj *nmp_conv_new_obj(struct conv *c, const struct nmp_shim_record *r, uint32_t pid,
                             uint32_t sid)
{
    if (NMP_GROW(c->objs, c->capobjs, c->nobjs + 1, 64) < 0)
        return NULL;
    struct obj *o = &c->objs[c->nobjs];
    memset(o, 0, sizeof *o);
    o->time = r->time;
    o->pid = pid;
    o->tid = r->tid;
    o->addr = r->addr;
    o->size = r->size;
    o->kind = r->kind;
    o->stack = sid;
    return o;
}

/* One record of a file whose objects start at `first_obj`: 0, or -1 (out of memory). */
static int convert_record(struct conv *c, const struct nmp_shim_record *r, uint32_t pid,
                          struct nmp_shim_totals *tot, size_t first_obj)
{
    int rc = 0;
    switch (r->type) {
    case NMP_SHIM_ALLOC: {
        if (r->kind == NMP_KIND_REALLOC && (r->flags & NMP_SHIM_F_PREV_TRACKED))
            close_oldest(c, r->prev, r->time);
        /* the kernel hands out a range only when nothing is mapped there (or
         * MAP_FIXED replaced it): mappings still live inside it are gone */
        if (r->kind == NMP_KIND_MMAP || r->kind == NMP_KIND_NUMA)
            close_mapped_range(c, r->addr, r->size, r->time);
        unsigned nf0 = r->nframes > NMP_SHIM_MAX_FRAMES ? NMP_SHIM_MAX_FRAMES : r->nframes;
        uint32_t sid;
        if (nmp_conv_stack_id(c, r->frames, nf0, &sid) < 0) {
            rc = -1;
            break;
        }
        /* a deferred record, written at the release: the object is over already */
        int ended = (r->flags & NMP_SHIM_F_ENDED) != 0;
        uint32_t owner = (r->flags & NMP_SHIM_F_OWNER_FREED) ? r->tid : 0;
        uint32_t again = c->nrepeat ? repeat_take(c, r, sid) : NONE;
        if (again != NONE) {
            c->objs[again].free_time = ended ? r->end : 0;
            c->objs[again].instances++;
            if ((ended ? repeat_add(c, again, owner) : nmp_conv_live_add(c, again)) < 0) {
                rc = -1;
                break;
            }
            tot->tracked_allocs++;
            break;
        }
        struct obj *o = nmp_conv_new_obj(c, r, pid, sid);
        if (!o) {
            rc = -1;
            break;
        }
        o->prev = r->kind == NMP_KIND_REALLOC ? r->prev : 0;
        o->period = (r->flags & NMP_SHIM_F_SAMPLED) ? r->period : 0;
        o->instances = 1;
        o->free_time = ended ? r->end : 0;
        if ((ended ? repeat_add(c, (uint32_t)c->nobjs, owner)
                   : nmp_conv_live_add(c, (uint32_t)c->nobjs)) < 0) {
            rc = -1;
            break;
        }
        c->nobjs++;
        if (o->period)
            tot->sampled_allocs++;
        else
            tot->tracked_allocs++;
        break;
    }
    case NMP_SHIM_FREE:
        if (r->kind == NMP_KIND_MMAP && r->size) {
            close_mapped_range(c, r->addr, r->size, r->time);
        } else {
            size_t li = live_find(c, r->addr);
            if (li != (size_t)-1) {
                uint32_t idx = c->live_vals[li];
                live_close(c, idx, r->time);
                if (repeat_add(c, idx, r->tid) < 0)
                    rc = -1;
            }
        }
        break;
    case NMP_SHIM_SHORT: {
        /* short-lived blocks of one site: one row, not matched to samples by address */
        unsigned nf0 = r->nframes > NMP_SHIM_MAX_FRAMES ? NMP_SHIM_MAX_FRAMES : r->nframes;
        uint32_t sid;
        struct obj *o = nmp_conv_stack_id(c, r->frames, nf0, &sid) < 0
                            ? NULL
                            : nmp_conv_new_obj(c, r, pid, sid);
        if (!o) {
            rc = -1;
            break;
        }
        c->nobjs++;
        o->free_time = r->end;
        o->instances = r->period;
        o->lifetime = r->extra;
        if (r->flags & NMP_SHIM_F_SAMPLED)
            o->period = c->small_period ? (uint32_t)c->small_period : 1;
        o->extent = r->prev > r->addr ? r->prev - r->addr : 1;
        tot->short_lived_allocs += r->period;
        break;
    }
    case NMP_SHIM_TOTALS:
        tot->small_bytes += r->size;
        tot->small_allocs += r->prev;
        break;
    case NMP_SHIM_START:
        c->small_period = r->size;
        close_all(c, first_obj, r->time);
        c->nrepeat = 0;
        break;
    case NMP_SHIM_PAGES:
        if (add_pages(c, r, pid) < 0)
            rc = -1;
        break;
    default:
        break; /* unknown record types of this version are skipped */
    }
    return rc;
}


/* shim.<pid>.pool beside shim.<pid>.bin (nmp_shim_format.h, "Deferred records"). */
static void pool_of(const char *bin, char *out, size_t len)
{
    nmp_conv_sibling(bin, ".pool", out, len);
}

/* Converts file `path` of process `pid`; with `fp` (a slice of a running program), from
 * where the previous slice stopped, and notes where the next one is to start. */
static int convert_file(struct conv *c, const char *path, uint32_t pid,
                        struct nmp_shim_totals *tot, char *err, struct file_part *fp)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        nmp_set_err(err, "%s: %s", path, strerror(errno));
        return -1;
    }
    struct nmp_shim_header h;
    ssize_t n = read(fd, &h, sizeof h);
    if (n != (ssize_t)sizeof h || memcmp(h.magic, NMP_SHIM_MAGIC, 8) != 0 ||
        h.version != NMP_SHIM_VERSION || h.record_size != sizeof(struct nmp_shim_record) ||
        h.pool_slots > NMP_SHIM_POOL_SLOTS || h.header_size != NMP_SHIM_HEADER_SIZE ||
        lseek(fd, NMP_SHIM_HEADER_SIZE, SEEK_SET) != NMP_SHIM_HEADER_SIZE) {
        nmp_set_err(err, "%s: not a numaprof shim file of version %d (left in place)", path,
                NMP_SHIM_VERSION);
        close(fd);
        return 1;
    }
    nmp_conv_live_reset(c);
    c->nrepeat = 0;
    size_t first_obj = c->nobjs;
    uint64_t index = 0; /* of recs[0] in the file */
    struct file_part old = {0}; /* where the previous slice stopped */
    struct stat st;
    if (fp && fstat(fd, &st) != 0)
        fp = NULL; /* read whole; the next slice too */
    if (fp) {
        fp->dev = st.st_dev;
        fp->ino = st.st_ino;
        fp->obj_lo = first_obj;
        fp->page_lo = c->npages;
        uint64_t size = (uint64_t)st.st_size, records = 0;
        if (size > NMP_SHIM_HEADER_SIZE)
            records = (size - NMP_SHIM_HEADER_SIZE) / sizeof(struct nmp_shim_record);
        nmp_conv_state_load(c, path, pid, records, fp);
        old = *fp;
        fp->done = NULL;
        fp->ndone = fp->capdone = 0;
        index = old.resume;
        if (lseek(fd, NMP_SHIM_HEADER_SIZE + (off_t)(index * sizeof(struct nmp_shim_record)),
                  SEEK_SET) < 0) {
            nmp_set_err(err, "%s: %s", path, strerror(errno));
            free(old.done);
            close(fd);
            return -1;
        }
    }
    uint64_t first_zero = UINT64_MAX, last = UINT64_MAX, stop = UINT64_MAX;
    size_t di = 0; /* in old.done */
    enum { CHUNK = 1024 };
    struct nmp_shim_record *recs = malloc(CHUNK * sizeof *recs);
    if (!recs) {
        close(fd);
        nmp_set_err(err, "out of memory");
        return -1;
    }
    size_t have = 0; /* bytes in recs */
    int rc = 0, damaged = 0;
    for (;;) {
        n = read(fd, (char *)recs + have, CHUNK * sizeof *recs - have);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            nmp_set_err(err, "%s: %s", path, strerror(errno));
            rc = -1;
            break;
        }
        have += (size_t)n;
        size_t nrec = have / sizeof *recs;
        for (size_t k = 0; k < nrec && rc == 0 && !damaged; k++) {
            const struct nmp_shim_record *r = &recs[k];
            uint64_t idx = index + k;
            if (r->type == 0) {
                /* a slot not completed yet, or past the last one; one the previous
                 * slice found incomplete too was abandoned */
                if (first_zero == UINT64_MAX && !(old.hole && idx == old.resume))
                    first_zero = idx;
                continue;
            }
            if (r->type < NMP_SHIM_ALLOC || r->type > NMP_SHIM_SHORT ||
                r->nframes > NMP_SHIM_MAX_FRAMES ||
                (r->type == NMP_SHIM_ALLOC &&
                 (r->kind < NMP_KIND_MALLOC || r->kind > NMP_KIND_NUMA))) {
                /* the shim stops after a partial write; a file that goes on past one is
                 * misaligned from here: keep what came before */
                nmp_set_err(err, "%s: damaged record %llu; the rest of the file is ignored", path,
                        (unsigned long long)(index + k));
                damaged = 1;
                stop = idx;
                break;
            }
            last = idx;
            if (fp)
                nmp_conv_part_read(fp, idx, first_zero);
            while (di < old.ndone && old.done[di] < idx)
                di++;
            if (di < old.ndone && old.done[di] == idx)
                continue; /* converted by the previous slice */
            rc = convert_record(c, r, pid, tot, first_obj);
        }
        if (rc < 0) {
            if (!err || !*err)
                nmp_set_err(err, "%s: out of memory", path);
            break;
        }
        if (damaged)
            break;
        index += nrec;
        size_t used = nrec * sizeof *recs;
        memmove(recs, (char *)recs + used, have - used);
        have -= used;
        if (n == 0)
            break; /* a partial last record (a run cut short) is dropped */
    }
    close(fd);
    if (fp) {
        uint64_t end = stop != UINT64_MAX ? stop : index;
        int hole = first_zero != UINT64_MAX && last != UINT64_MAX && first_zero < last;
        if (hole && fp->ndone <= DONE_MAX) {
            fp->resume = first_zero;
            fp->hole = 1;
        } else {
            fp->resume = hole ? (stop != UINT64_MAX ? stop : last + 1)
                              : (first_zero < end ? first_zero : end);
            fp->hole = 0;
            fp->ndone = 0;
        }
        fp->small_period = c->small_period;
        fp->obj_hi = c->nobjs;
        fp->page_hi = c->npages;
        free(old.done);
    }
    /* blocks whose records were still in the pool (deferred): live when the process
     * died without its exit handlers (they are written into slots at a normal exit) */
    char pool_path[4096];
    pool_of(path, pool_path, sizeof pool_path);
    fd = h.pool_slots ? open(pool_path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW) : -1;
    for (uint32_t k = 0; fd >= 0 && rc == 0 && k < h.pool_slots; k += CHUNK) {
        size_t want = (h.pool_slots - k < CHUNK ? h.pool_slots - k : CHUNK) * sizeof *recs;
        ssize_t got = pread(fd, recs, want, (off_t)k * (off_t)sizeof *recs);
        if (got <= 0)
            break;
        for (size_t j = 0; j < (size_t)got / sizeof *recs && rc == 0; j++) {
            const struct nmp_shim_record *r = &recs[j];
            if (r->type == NMP_SHIM_ALLOC && r->nframes <= NMP_SHIM_MAX_FRAMES &&
                r->kind >= NMP_KIND_MALLOC && r->kind <= NMP_KIND_NUMA)
                rc = convert_record(c, r, pid, tot, first_obj);
        }
    }
    if (rc < 0 && (!err || !*err))
        nmp_set_err(err, "%s: out of memory", path);
    free(recs);
    if (fd >= 0)
        close(fd);
    return rc;
}

static int is_shim_file(const struct dirent *d)
{
    const char *s = d->d_name;
    if (strncmp(s, "shim.", 5) != 0)
        return 0;
    const char *p = s + 5;
    if (!isdigit((unsigned char)*p))
        return 0;
    while (isdigit((unsigned char)*p))
        p++;
    return strcmp(p, ".bin") == 0;
}

static int by_pid(const struct dirent **a, const struct dirent **b)
{
    unsigned long x = strtoul((*a)->d_name + 5, NULL, 10), y = strtoul((*b)->d_name + 5, NULL, 10);
    return (x > y) - (x < y);
}

/* The objects and page counts of the window [lo, hi] (CLOCK_MONOTONIC ns) into dir: the
 * objects alive at some time in it, the page counts asked in it. */
static int write_tables(const struct conv *c, const char *dir, uint64_t lo, uint64_t hi, char *err)
{
    struct nmp_table *t = nmp_table_open(dir, NMP_TABLE_ID_objects, -1);
    if (!t) {
        nmp_set_err(err, "%s/objects: %s", dir, strerror(errno));
        return -1;
    }
    for (size_t k = 0; k < c->nobjs; k++) {
        const struct obj *o = &c->objs[k];
        if (o->time > hi || (o->free_time != 0 && o->free_time < lo))
            continue;
        uint64_t row[NMP_objects_NCOLS] = {
            [NMP_objects_time] = o->time, [NMP_objects_free_time] = o->free_time,
            [NMP_objects_pid] = o->pid, [NMP_objects_tid] = o->tid, [NMP_objects_addr] = o->addr,
            [NMP_objects_size] = o->size, [NMP_objects_kind] = o->kind,
            [NMP_objects_stack] = o->stack, [NMP_objects_prev] = o->prev,
            [NMP_objects_sample_period] = o->period, [NMP_objects_instances] = o->instances,
            [NMP_objects_lifetime] = o->lifetime, [NMP_objects_extent] = o->extent};
        nmp_table_append(t, row);
    }
    if (nmp_table_close(t) < 0) {
        nmp_set_err(err, "%s/objects: write failed: %s", dir, strerror(errno ? errno : EIO));
        return -1;
    }
    t = nmp_table_open(dir, NMP_TABLE_ID_object_pages, -1);
    if (!t) {
        nmp_set_err(err, "%s/object_pages: %s", dir, strerror(errno));
        return -1;
    }
    for (size_t k = 0; k < c->npages; k++)
        if (c->pages[k][NMP_object_pages_time] >= lo && c->pages[k][NMP_object_pages_time] <= hi)
            nmp_table_append(t, c->pages[k]);
    if (nmp_table_close(t) < 0) {
        nmp_set_err(err, "%s/object_pages: write failed: %s", dir, strerror(errno ? errno : EIO));
        return -1;
    }
    t = nmp_table_open(dir, NMP_TABLE_ID_stack_frames, -1);
    if (!t) {
        nmp_set_err(err, "%s/stack_frames: %s", dir, strerror(errno));
        return -1;
    }
    for (size_t id = 0; id < c->nstacks; id++)
        for (uint32_t d = 0; d < c->stacks[id].nframes; d++) {
            uint64_t row[NMP_stack_frames_NCOLS] = {
                [NMP_stack_frames_stack] = id, [NMP_stack_frames_depth] = d,
                [NMP_stack_frames_ip] = c->stacks[id].frames[d]};
            nmp_table_append(t, row);
        }
    if (nmp_table_close(t) < 0) {
        nmp_set_err(err, "%s/stack_frames: write failed: %s", dir, strerror(errno ? errno : EIO));
        return -1;
    }
    return 0;
}

int nmp_shim_convert(const char *dir, struct nmp_shim_totals *totals, char *err)
{
    return nmp_shim_convert_window(dir, dir, 0, UINT64_MAX, 0, totals, err);
}

int nmp_shim_convert_window(const char *dir, const char *out, uint64_t lo, uint64_t hi, int keep,
                            struct nmp_shim_totals *totals, char *err)
{
    struct nmp_shim_totals tot = {0};
    struct conv c = {0};
    if (err)
        err[0] = 0;
    struct dirent **ents = NULL;
    int n = scandir(dir, &ents, is_shim_file, by_pid);
    if (n < 0) {
        nmp_set_err(err, "%s: %s", dir, strerror(errno));
        return -1;
    }
    char *done = calloc((size_t)n + 1, 1);
    struct file_part *parts = keep ? calloc((size_t)n + 1, sizeof *parts) : NULL;
    int rc = done && (parts || !keep) ? 0 : -1;
    char path[4096];
    for (int i = 0; i < n && rc == 0; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, ents[i]->d_name);
        uint32_t pid = (uint32_t)strtoul(ents[i]->d_name + 5, NULL, 10);
        char ferr[NMP_ERRLEN] = "";
        int r = convert_file(&c, path, pid, &tot, ferr, parts ? &parts[i] : NULL);
        if (r < 0) {
            nmp_set_err(err, "%s", ferr);
            rc = -1;
        } else if (r > 0) {
            nmp_set_err(err, "%s", ferr); /* foreign file: reported, others still converted */
        } else {
            if (ferr[0])
                nmp_set_err(err, "%s", ferr); /* damaged tail: reported, the rest converted */
            done[i] = 1;
            tot.processes++;
        }
    }
    if (rc == 0) {
        char werr[NMP_ERRLEN] = "";
        if (write_tables(&c, out, lo, hi, werr) < 0) {
            nmp_set_err(err, "%s", werr);
            rc = -1;
        }
    }
    for (int i = 0; i < n; i++) {
        if (rc == 0 && done[i] && keep) {
            snprintf(path, sizeof path, "%s/%s", dir, ents[i]->d_name);
            if (nmp_conv_state_save(&c, dir, ents[i]->d_name, &parts[i], hi) != 0)
                nmp_debug("shim: cannot save where %s stopped: %s", path, strerror(errno));
        }
        if (parts)
            free(parts[i].done);
        if (rc == 0 && done[i] && !keep) {
            snprintf(path, sizeof path, "%s/%s", dir, ents[i]->d_name);
            unlink(path);
            char pool[4096];
            pool_of(path, pool, sizeof pool);
            unlink(pool);
        }
        free(ents[i]);
    }
    free(ents);
    free(done);
    free(parts);
    nmp_debug("shim: %llu processes, %zu objects, %zu page counts, %zu stacks, %llu small allocations",
              (unsigned long long)tot.processes, c.nobjs, c.npages, c.nstacks,
              (unsigned long long)tot.small_allocs);
    free(c.objs);
    free(c.stacks);
    free(c.stack_slots);
    free(c.live_keys);
    free(c.live_vals);
    free(c.live_mmaps);
    free(c.pages);
    free(c.repeat);
    if (totals)
        *totals = tot;
    return rc;
}
