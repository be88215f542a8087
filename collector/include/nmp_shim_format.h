/* Records the LD_PRELOAD shim appends to <NUMAPROF_DIR>/shim.<pid>.bin.
 * Owned by collector/shim; read by collector/src/shimconv.c.  Fixed-size records,
 * each written with one write(2) so that threads and signal handlers never interleave.
 */
#ifndef NMP_SHIM_FORMAT_H
#define NMP_SHIM_FORMAT_H

#include <stdint.h>

#define NMP_SHIM_MAGIC "NMPSHIM1"
#define NMP_SHIM_MAX_FRAMES 16

enum nmp_shim_rectype { NMP_SHIM_ALLOC = 1, NMP_SHIM_FREE = 2, NMP_SHIM_TOTALS = 3 };

struct nmp_shim_record {
    uint32_t type;   /* nmp_shim_rectype */
    uint32_t tid;
    uint64_t time;   /* CLOCK_MONOTONIC ns */
    uint64_t addr;
    uint64_t size;   /* TOTALS: small_bytes */
    uint64_t prev;   /* realloc: old address; TOTALS: small_allocs */
    uint8_t kind;    /* objects.kind codes (docs/profile-format.md) */
    uint8_t nframes;
    uint16_t pad16;
    uint32_t pad32;
    uint64_t frames[NMP_SHIM_MAX_FRAMES];
};

#endif
