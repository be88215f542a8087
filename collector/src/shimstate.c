/* Where the slices of a running program stop and resume (nmp_shim_convert_window with
 * `keep`, shimconv.c).  Each slice leaves shim.<pid>.state beside the record file: the
 * record to resume at (or the slot it found incomplete, with the completed ones after it
 * that it read), the image's sampling period, and what a later slice still needs of what
 * it converted -- the objects live at its end or ended or made after its window, with
 * their call stacks, and their object_pages rows after the window.  The next slice
 * starts from those instead of reading the file from its start: a slice costs what was
 * written since the last one, not what was written since the program started. */
#include "nmp_collect.h"
#include "shimconv_int.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

void nmp_conv_sibling(const char *bin, const char *ext, char *out, size_t len)
{
    snprintf(out, len, "%s", bin);
    size_t n = strlen(out);
    if (n > 4 && n - 4 + strlen(ext) < len && strcmp(out + n - 4, ".bin") == 0)
        strcpy(out + n - 4, ext);
}

#define STATE_MAGIC "NMPSTAT1"

struct state_head {
    char magic[8];
    uint32_t record_size, header_size;
    uint64_t dev, ino, resume, hole, small_period, nobjs, npages, ndone;
};

struct state_obj {
    uint64_t time, free_time, addr, size, prev, lifetime, extent;
    uint32_t tid, period, instances, nframes;
    uint8_t kind, live, pad[6];
    uint64_t frames[NMP_SHIM_MAX_FRAMES];
};

/* An object a slice after the window ending at `hi` may still see. */
static int carried(const struct obj *o, uint64_t hi)
{
    return o->live || o->free_time > hi || o->time > hi;
}

/* The objects, page rows and resume point the previous slice left for file `bin`
 * (nmp_conv_state_save); without a state that fits the file, the file is read from its
 * start. */
void nmp_conv_state_load(struct conv *c, const char *bin, uint32_t pid, uint64_t records,
                         struct file_part *fp)
{
    char path[4096];
    nmp_conv_sibling(bin, ".state", path, sizeof path);
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0)
        return;
    struct stat st;
    const char *m = MAP_FAILED;
    size_t size = 0;
    if (fstat(fd, &st) == 0 && (size_t)st.st_size >= sizeof(struct state_head)) {
        size = (size_t)st.st_size;
        m = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
    }
    close(fd);
    if (m == MAP_FAILED)
        return;
    size_t nobj0 = c->nobjs, npage0 = c->npages;
    struct state_head h;
    memcpy(&h, m, sizeof h);
    int ok = memcmp(h.magic, STATE_MAGIC, 8) == 0 &&
             h.record_size == sizeof(struct nmp_shim_record) &&
             h.header_size == NMP_SHIM_HEADER_SIZE && h.dev == fp->dev && h.ino == fp->ino &&
             h.resume <= records && h.ndone <= DONE_MAX && h.nobjs < NONE && h.npages < NONE &&
             size == sizeof h + h.nobjs * sizeof(struct state_obj) +
                         h.npages * sizeof c->pages[0] + h.ndone * sizeof(uint64_t);
    const char *at = m + sizeof h;
    for (uint64_t k = 0; ok && k < h.nobjs; k++, at += sizeof(struct state_obj)) {
        struct state_obj so;
        memcpy(&so, at, sizeof so);
        uint32_t sid;
        struct obj *o;
        ok = so.nframes <= NMP_SHIM_MAX_FRAMES &&
             nmp_conv_stack_id(c, so.frames, so.nframes, &sid) == 0 &&
             (o = nmp_conv_new_obj(c, &(struct nmp_shim_record){.tid = so.tid, .time = so.time,
                                                                 .addr = so.addr, .size = so.size,
                                                                 .kind = so.kind},
                                   pid, sid)) != NULL;
        if (!ok)
            break;
        o->free_time = so.free_time;
        o->prev = so.prev;
        o->lifetime = so.lifetime;
        o->extent = so.extent;
        o->period = so.period;
        o->instances = so.instances;
        c->nobjs++;
        ok = !so.live || nmp_conv_live_add(c, (uint32_t)(c->nobjs - 1)) == 0;
    }
    if (ok && h.npages) {
        ok = NMP_GROW(c->pages, c->cappages, c->npages + h.npages, 256) == 0;
        if (ok) {
            memcpy(c->pages[c->npages], at, h.npages * sizeof c->pages[0]);
            c->npages += h.npages;
            at += h.npages * sizeof c->pages[0];
        }
    }
    uint64_t *done = NULL;
    if (ok && h.ndone) {
        ok = (done = malloc(h.ndone * sizeof *done)) != NULL;
        if (ok)
            memcpy(done, at, h.ndone * sizeof *done);
    }
    munmap((void *)m, size);
    if (!ok) { /* read the file from its start instead */
        free(done);
        c->nobjs = nobj0;
        c->npages = npage0;
        nmp_conv_live_reset(c);
        nmp_debug("shim: %s does not fit %s, read from its start", path, bin);
        return;
    }
    fp->resume = h.resume;
    fp->hole = h.hole;
    fp->done = done;
    fp->ndone = fp->capdone = h.ndone;
    c->small_period = h.small_period;
}

/* What of file <dir>/<bin> a slice after the window ending at `hi` still needs: its
 * objects live at the end or ended or made after `hi`, their page rows after `hi`, and
 * where to resume; written whole or not at all (nmp_write_atomic). */
int nmp_conv_state_save(const struct conv *c, const char *dir, const char *bin,
                        const struct file_part *fp, uint64_t hi)
{
    struct state_head h = {.record_size = sizeof(struct nmp_shim_record),
                           .header_size = NMP_SHIM_HEADER_SIZE, .dev = fp->dev, .ino = fp->ino,
                           .resume = fp->resume, .hole = fp->hole,
                           .small_period = fp->small_period, .ndone = fp->ndone};
    memcpy(h.magic, STATE_MAGIC, 8);
    for (size_t k = fp->obj_lo; k < fp->obj_hi; k++)
        h.nobjs += carried(&c->objs[k], hi);
    for (size_t k = fp->page_lo; k < fp->page_hi; k++)
        h.npages += c->pages[k][NMP_object_pages_time] > hi;
    size_t len = sizeof h + h.nobjs * sizeof(struct state_obj) + h.npages * sizeof c->pages[0] +
                 h.ndone * sizeof *fp->done;
    char *buf = malloc(len), *at = buf;
    if (!buf)
        return -1;
    memcpy(at, &h, sizeof h);
    at += sizeof h;
    for (size_t k = fp->obj_lo; k < fp->obj_hi; k++) {
        const struct obj *o = &c->objs[k];
        if (!carried(o, hi))
            continue;
        struct state_obj so = {.time = o->time, .free_time = o->free_time, .addr = o->addr,
                               .size = o->size, .prev = o->prev, .lifetime = o->lifetime,
                               .extent = o->extent, .tid = o->tid, .period = o->period,
                               .instances = o->instances, .kind = o->kind, .live = o->live};
        if (o->stack != NO_STACK) {
            so.nframes = c->stacks[o->stack].nframes;
            memcpy(so.frames, c->stacks[o->stack].frames, sizeof so.frames);
        }
        memcpy(at, &so, sizeof so);
        at += sizeof so;
    }
    for (size_t k = fp->page_lo; k < fp->page_hi; k++)
        if (c->pages[k][NMP_object_pages_time] > hi) {
            memcpy(at, c->pages[k], sizeof c->pages[0]);
            at += sizeof c->pages[0];
        }
    if (fp->ndone)
        memcpy(at, fp->done, fp->ndone * sizeof *fp->done);
    char name[512];
    nmp_conv_sibling(bin, ".state", name, sizeof name);
    int rc = nmp_write_atomic(dir, name, buf, len, NULL);
    free(buf);
    return rc;
}

/* Notes record `idx` as read in this pass, listed if an incomplete slot precedes it. */
void nmp_conv_part_read(struct file_part *fp, uint64_t idx, uint64_t first_zero)
{
    if (first_zero == UINT64_MAX || fp->ndone > DONE_MAX)
        return;
    if (NMP_GROW(fp->done, fp->capdone, fp->ndone + 1, 256) < 0)
        fp->ndone = DONE_MAX + 1; /* forget the incomplete slot */
    else
        fp->done[fp->ndone++] = idx;
}

