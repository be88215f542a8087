/* What shimconv.c (the allocation shim's records turned into objects) and shimstate.c
 * (where the slices of a running program stop and resume) share.  Internal to the
 * collector. */
#ifndef NMP_SHIMCONV_INT_H
#define NMP_SHIMCONV_INT_H

#include <stddef.h>
#include <stdint.h>

#include "nmp_schema.h"
#include "nmp_shim_format.h"

#define NO_STACK 0xffffffffu
#define NONE 0xffffffffu

struct obj {
    uint64_t time, free_time, addr, size, prev;
    uint64_t lifetime, extent; /* a summary of short-lived blocks (extent > 0) */
    uint32_t pid, tid, stack, period, instances;
    uint32_t next_same_addr; /* live chain per address, newest first */
    uint8_t kind, live;
};

struct stack {
    uint32_t nframes;
    uint64_t frames[NMP_SHIM_MAX_FRAMES];
};

struct conv {
    struct obj *objs;
    size_t nobjs, capobjs;
    struct stack *stacks;
    size_t nstacks, capstacks;
    uint32_t *stack_slots; /* open addressing: stack id + 1, 0 empty */
    size_t nstack_slots;
    /* per file: address -> newest live object (open addressing, tombstones) */
    uint64_t *live_keys;
    uint32_t *live_vals; /* object index, NONE empty, NONE-1 tombstone */
    size_t nlive_slots, nlive_used, nlive_keys; /* used counts tombstones, keys not */
    uint32_t *live_mmaps; /* live objects of mmap / numa kind (munmap ranges) */
    size_t nlive_mmaps, caplive_mmaps;
    uint64_t (*pages)[NMP_object_pages_NCOLS]; /* object_pages rows */
    size_t npages, cappages;
    uint64_t small_period; /* of the current image (its START) */
    /* per file: blocks just freed that their thread may allocate again (see the top) */
    uint32_t *repeat;
    size_t nrepeat, caprepeat;
};

#define DONE_MAX (1u << 20) /* records listed as read after an incomplete slot, at most */

/* One file's part of a conversion, and where its next slice resumes. */
struct file_part {
    size_t obj_lo, obj_hi;   /* objects from its records (those of its pool follow) */
    size_t page_lo, page_hi; /* its object_pages rows */
    uint64_t resume;         /* the first record index not read, or an incomplete slot */
    uint64_t hole;           /* resume is a slot seen incomplete (1), or not (0) */
    uint64_t *done;          /* records after the incomplete slot that were read */
    size_t ndone, capdone;
    uint64_t small_period;   /* of the image the last record read belongs to */
    uint64_t dev, ino;       /* the file's identity */
};

/* A call stack's id, added if new (NO_STACK for an empty one): 0, or -1 (out of memory). */
int nmp_conv_stack_id(struct conv *c, const uint64_t *frames, unsigned n, uint32_t *id);
/* A new object at the end of c->objs (not counted in c->nobjs yet), or NULL. */
struct obj *nmp_conv_new_obj(struct conv *c, const struct nmp_shim_record *r, uint32_t pid,
                             uint32_t sid);
/* Object idx is live at its address: 0, or -1 (out of memory). */
int nmp_conv_live_add(struct conv *c, uint32_t idx);
/* No object is live (a new file). */
void nmp_conv_live_reset(struct conv *c);

/* shim.<pid>.<ext> beside shim.<pid>.bin */
void nmp_conv_sibling(const char *bin, const char *ext, char *out, size_t len);
/* The objects, page rows and resume point the previous slice left for file `bin` of
 * `records` complete slots into c and fp; without a state that fits, nothing. */
void nmp_conv_state_load(struct conv *c, const char *bin, uint32_t pid, uint64_t records,
                         struct file_part *fp);
/* What of file <dir>/<bin> a slice after the window ending at `hi` still needs: 0 or -1. */
int nmp_conv_state_save(const struct conv *c, const char *dir, const char *bin,
                        const struct file_part *fp, uint64_t hi);
/* Record idx was read in this pass; listed when an incomplete slot precedes it. */
void nmp_conv_part_read(struct file_part *fp, uint64_t idx, uint64_t first_zero);

#endif
