/* Records the LD_PRELOAD shim appends to <NUMAPROF_DIR>/shim.<pid>.bin.
 * Owned by collector/shim; read by collector/src/shimconv.c.
 *
 * The file starts with a struct nmp_shim_header, written once by the process image that
 * creates it.  Then fixed-size struct nmp_shim_record entries follow, each written with
 * one write(2) to an O_APPEND descriptor, so that threads and signal handlers never
 * interleave and file order is causal: a FREE is written before the memory is released,
 * an ALLOC after it was obtained, so an address reused by another thread is always
 * recorded after the free of its previous owner.
 *
 * Every process image (the first one and each one after an execve, which keeps the pid
 * and so appends to the same file) writes one START record first: allocations still live
 * at a START died with the previous image.
 */
#ifndef NMP_SHIM_FORMAT_H
#define NMP_SHIM_FORMAT_H

#include <stdint.h>

#define NMP_SHIM_MAGIC "NMPSHIM1"
#define NMP_SHIM_VERSION 1
#define NMP_SHIM_MAX_FRAMES 16

struct nmp_shim_header {
    char magic[8];        /* NMP_SHIM_MAGIC, not NUL-terminated */
    uint32_t version;     /* NMP_SHIM_VERSION */
    uint32_t record_size; /* sizeof(struct nmp_shim_record) */
};

enum nmp_shim_rectype {
    NMP_SHIM_ALLOC = 1,  /* addr, size, kind, prev (realloc), frames */
    NMP_SHIM_FREE = 2,   /* addr; size = munmap length (0 for free()); kind: 1 free,
                            5 munmap, 6 numa_free */
    NMP_SHIM_TOTALS = 3, /* one thread's allocations below the threshold (at its exit,
                            or at process exit for threads still running): size = bytes,
                            prev = count; in the process-exit record of tid 0 or the
                            exiting thread, addr = records that could not be written
                            (disk full) */
    NMP_SHIM_START = 4,  /* a process image started recording; addr = threshold */
};

/* ALLOC of kind realloc: the old block was itself tracked (at or above the threshold), so
 * `prev` names a live object that this realloc ended. */
#define NMP_SHIM_F_PREV_TRACKED 1u

/* objects.kind codes (docs/profile-format.md) */
enum nmp_shim_kind {
    NMP_KIND_MALLOC = 1, NMP_KIND_CALLOC = 2, NMP_KIND_REALLOC = 3, NMP_KIND_ALIGNED = 4,
    NMP_KIND_MMAP = 5, NMP_KIND_NUMA = 6,
};

struct nmp_shim_record {
    uint32_t type;   /* nmp_shim_rectype */
    uint32_t tid;
    uint64_t time;   /* CLOCK_MONOTONIC ns */
    uint64_t addr;
    uint64_t size;   /* TOTALS: small_bytes */
    uint64_t prev;   /* realloc: old address; TOTALS: small_allocs */
    uint8_t kind;    /* nmp_shim_kind */
    uint8_t nframes; /* frames[0] = return address into the caller of the allocator */
    uint16_t flags;  /* NMP_SHIM_F_* */
    uint32_t pad32;
    uint64_t frames[NMP_SHIM_MAX_FRAMES];
};

_Static_assert(sizeof(struct nmp_shim_header) == 16, "shim header layout");
_Static_assert(sizeof(struct nmp_shim_record) == 48 + 8 * NMP_SHIM_MAX_FRAMES,
               "shim record layout");

#endif
