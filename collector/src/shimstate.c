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

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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

static int read_all(int fd, void *buf, size_t len)
{
    for (size_t got = 0; got < len;) {
        ssize_t n = read(fd, (char *)buf + got, len - got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return -1;
        got += (size_t)n;
    }
    return 0;
}

static int write_all(int fd, const void *buf, size_t len)
{
    for (size_t put = 0; put < len;) {
        ssize_t n = write(fd, (const char *)buf + put, len - put);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return -1;
        put += (size_t)n;
    }
    return 0;
}

/* The objects, page rows and resume point the previous slice left for file `bin`
 * (nmp_conv_state_save); without a state that fits the file, the file is read from its start. */
void nmp_conv_state_load(struct conv *c, const char *bin, uint32_t pid, uint64_t records,
                       struct file_part *fp)
{
    char path[4096];
    nmp_conv_sibling(bin, ".state", path, sizeof path);
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0)
        return;
    size_t nobj0 = c->nobjs, npage0 = c->npages;
    struct state_head h;
    int ok = read_all(fd, &h, sizeof h) == 0 && memcmp(h.magic, STATE_MAGIC, 8) == 0 &&
             h.record_size == sizeof(struct nmp_shim_record) &&
             h.header_size == NMP_SHIM_HEADER_SIZE && h.dev == fp->dev && h.ino == fp->ino &&
             h.resume <= records && h.ndone <= DONE_MAX && h.nobjs < NONE && h.npages < NONE;
    for (uint64_t k = 0; ok && k < h.nobjs; k++) {
        struct state_obj so;
        uint32_t sid;
        struct obj *o;
        ok = read_all(fd, &so, sizeof so) == 0 && so.nframes <= NMP_SHIM_MAX_FRAMES &&
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
        ok = NMP_GROW(c->pages, c->cappages, c->npages + h.npages, 256) == 0 &&
             read_all(fd, c->pages[c->npages], h.npages * sizeof c->pages[0]) == 0;
        if (ok)
            c->npages += h.npages;
    }
    uint64_t *done = NULL;
    if (ok && h.ndone) {
        ok = (done = malloc(h.ndone * sizeof *done)) != NULL &&
             read_all(fd, done, h.ndone * sizeof *done) == 0;
    }
    close(fd);
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

/* What of file `bin` a slice after the window ending at `hi` still needs: its objects
 * live at the end or ended or made after `hi`, their page rows after `hi`, and where to
 * resume.  Written whole or not at all (a new name, then renamed over the old state). */
int nmp_conv_state_save(const struct conv *c, const char *bin, const struct file_part *fp,
                      uint64_t hi)
{
    char path[4096], tmp[4200];
    nmp_conv_sibling(bin, ".state", path, sizeof path);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0)
        return -1;
    struct state_head h = {.record_size = sizeof(struct nmp_shim_record),
                           .header_size = NMP_SHIM_HEADER_SIZE, .dev = fp->dev, .ino = fp->ino,
                           .resume = fp->resume, .hole = fp->hole,
                           .small_period = fp->small_period, .ndone = fp->ndone};
    memcpy(h.magic, STATE_MAGIC, 8);
    for (size_t k = fp->obj_lo; k < fp->obj_hi; k++)
        h.nobjs += c->objs[k].live || c->objs[k].free_time > hi || c->objs[k].time > hi;
    for (size_t k = fp->page_lo; k < fp->page_hi; k++)
        h.npages += c->pages[k][NMP_object_pages_time] > hi;
    int rc = write_all(fd, &h, sizeof h);
    for (size_t k = fp->obj_lo; rc == 0 && k < fp->obj_hi; k++) {
        const struct obj *o = &c->objs[k];
        if (!(o->live || o->free_time > hi || o->time > hi))
            continue;
        struct state_obj so = {.time = o->time, .free_time = o->free_time, .addr = o->addr,
                               .size = o->size, .prev = o->prev, .lifetime = o->lifetime,
                               .extent = o->extent, .tid = o->tid, .period = o->period,
                               .instances = o->instances, .kind = o->kind, .live = o->live};
        if (o->stack != NO_STACK) {
            so.nframes = c->stacks[o->stack].nframes;
            memcpy(so.frames, c->stacks[o->stack].frames, sizeof so.frames);
        }
        rc = write_all(fd, &so, sizeof so);
    }
    for (size_t k = fp->page_lo; rc == 0 && k < fp->page_hi; k++)
        if (c->pages[k][NMP_object_pages_time] > hi)
            rc = write_all(fd, c->pages[k], sizeof c->pages[0]);
    if (rc == 0 && fp->ndone)
        rc = write_all(fd, fp->done, fp->ndone * sizeof *fp->done);
    if (close(fd) != 0 || rc != 0 || rename(tmp, path) != 0) {
        unlink(tmp);
        return -1;
    }
    return 0;
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

