/* Records the LD_PRELOAD shim writes to <NUMAPROF_DIR>/shim.<pid>.bin.
 * Owned by collector/shim; read by collector/src/shimconv.c.
 *
 * The file starts with a NMP_SHIM_HEADER_SIZE-byte header (struct nmp_shim_header, then
 * zeros), written once by the process image that creates it.  Fixed-size struct
 * nmp_shim_record slots follow.  The shim maps the file shared and claims slot `next`
 * with an atomic increment of the header's counter, fills it and stores `type` last:
 * threads and signal handlers never share a slot, no system call is made per record,
 * and what was stored survives a crash (the page cache keeps it).  A slot whose type is
 * still 0 was never completed (a process killed while writing it, or the unused end of
 * the last mapped chunk) and is skipped.  Where the file cannot be mapped, the shim
 * falls back to one write(2) per record to an O_APPEND descriptor: same layout.
 * Slot order is causal either way: a FREE claims its slot before the memory is released,
 * an ALLOC after it was obtained, so an address reused by another thread always comes
 * after the free of its previous owner.
 *
 * Every process image (the first one and each one after an execve, which keeps the pid
 * and so appends to the same file) writes one START record first: allocations still live
 * at a START died with the previous image.
 *
 * Deferred records (mapped mode, `pool_slots` > 0).  The ALLOC records of live heap blocks
 * (malloc, calloc, realloc and the aligned allocators: tracked ones and sampled small
 * ones) are written at the allocation into <NUMAPROF_DIR>/shim.<pid>.pool, a file of
 * `pool_slots` records created at the first such block, instead of into a slot.  At the
 * release the record leaves the pool: a block that lived less than the short-lived limit
 * is counted in its thread's per-site SHORT summary, any other becomes one ALLOC with
 * NMP_SHIM_F_ENDED and `end` = the release (no FREE).  A pool record whose type is not 0
 * is a block still live: the shim moves them into slots at process exit and when a new
 * image starts (before its START), so a reader finds some in the pool only after a
 * crash, and takes them as live at the end of the file.  Slot order stays causal for
 * every address: a deferred block's record is written before its memory is released.
 * (A separate file: populating a chunk of a shared file mapping costs in proportion to
 * the file's size, so a pool inside the record file would slow every chunk.)
 */
#ifndef NMP_SHIM_FORMAT_H
#define NMP_SHIM_FORMAT_H

#include <inttypes.h>
#include <stdint.h>

#include "numaprof_format.h" /* NMP_OBJECT_PAGES_SEGMENTS */

#define NMP_SHIM_MAGIC "NMPSHIM1"
#define NMP_SHIM_VERSION 5
#define NMP_SHIM_MAX_FRAMES 16
#define NMP_SHIM_HEADER_SIZE 4096 /* records start here, page-aligned for mmap */
/* The pool of deferred records: set-associative by address, so that a release finds its
 * block's record with one look at one set. */
#define NMP_SHIM_POOL_SETS 1024
#define NMP_SHIM_POOL_WAYS 8
#define NMP_SHIM_POOL_SLOTS (NMP_SHIM_POOL_SETS * NMP_SHIM_POOL_WAYS)

/* <NUMAPROF_DIR>/tls.<pid>: one record per thread of the process as it starts (the main
 * thread at the shim's start, each thread made by pthread_create before its start
 * routine), appended with one write(2).  tp is the thread pointer, the first word of the
 * thread control block (`%fs:0` on x86-64; "ELF Handling For Thread-Local Storage",
 * U. Drepper, 2013, §4.3, variant II): a thread's static TLS lies just below it, so a
 * `%fs`-relative access is at tp plus what its registers give.
 *
 * kind NMP_SHIM_TLS_MODULE (written once per process, at the shim's start): a loaded
 * module's static TLS block, `tid` its offset below every thread's pointer and `tp` the
 * module's load address (dl_iterate_phdr's dlpi_addr; the block is dlpi_tls_data). */
#define NMP_SHIM_TLS_FILE "tls.%" PRIu32
#define NMP_SHIM_TLS_THREAD 0
#define NMP_SHIM_TLS_MODULE 1
struct nmp_shim_tls {
    uint32_t tid;  /* THREAD: the thread; MODULE: the block's offset below the pointer */
    uint32_t kind; /* NMP_SHIM_TLS_THREAD (0) or NMP_SHIM_TLS_MODULE */
    uint64_t tp;   /* THREAD: the thread pointer; MODULE: the module's load address */
};

struct nmp_shim_header {
    char magic[8];        /* NMP_SHIM_MAGIC, not NUL-terminated */
    uint32_t version;     /* NMP_SHIM_VERSION */
    uint32_t record_size; /* sizeof(struct nmp_shim_record) */
    uint32_t header_size; /* NMP_SHIM_HEADER_SIZE */
    uint32_t pool_slots;  /* records in shim.<pid>.pool, if it exists (0: no pool) */
    uint64_t next;        /* slots claimed so far (mapped mode) */
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
    NMP_SHIM_START = 4,  /* a process image started recording; addr = threshold, size =
                            the small allocations' sampling period (0: none) */
    NMP_SHIM_PAGES = 5,  /* where a tracked allocation's pages are (move_pages query),
                            written just before its FREE, or at process exit: addr, size =
                            bytes, prev = pages asked, kind = NMP_PAGES_AT_*, flags =
                            policy mode | NMP_PAGES_F_MIXED, frames[0..nframes) =
                            NMP_PAGES_ENTRY(node, segment, count); more than
                            NMP_SHIM_MAX_FRAMES entries take several records (same time) */
    NMP_SHIM_SHORT = 6,  /* short-lived tracked blocks of one call stack (frames), kind and
                            allocating thread (tid), released by one thread, not recorded
                            one by one (flags: NMP_SHIM_F_SAMPLED for sampled small ones,
                            at the period of the image's START): period = how many, time = the first allocation,
                            end = the last release, addr = the lowest address, prev = the
                            end of the highest block, size = the largest (sampled ones: the
                            size s for which how many x the sampling period / s is the
                            number of allocations they stand for), extra = their lifetimes' sum in
                            ns */
};

/* NMP_SHIM_PAGES: when the pages were asked for (object_pages.source) */
enum { NMP_PAGES_AT_FREE = 1, NMP_PAGES_AT_EXIT = 2 };
#define NMP_PAGES_F_MIXED 0x100u  /* the pages asked do not share one policy */
#define NMP_PAGES_POLICY_UNKNOWN 0xffu
/* The pages asked are counted per node and per segment: the allocation cut into
 * NMP_PAGES_SEGMENTS equal parts in address order, so that where its pages are can be
 * compared part by part with where a policy puts them (a block placement reversed has
 * the right counts per node, in the wrong halves). */
#define NMP_PAGES_SEGMENTS NMP_OBJECT_PAGES_SEGMENTS
/* node + 1 in the top 16 bits (0: not present), the segment in the next 8, the count of
 * pages below */
#define NMP_PAGES_ENTRY(node, seg, count)                                      \
    (((uint64_t)((node) + 1) << 48) | (((uint64_t)(seg) & 0xffu) << 40) |      \
     ((uint64_t)(count) & ((1ULL << 40) - 1)))
#define NMP_PAGES_NODE(e) ((int)((e) >> 48) - 1)
#define NMP_PAGES_SEG(e) ((unsigned)((e) >> 40) & 0xffu)
#define NMP_PAGES_COUNT(e) ((e) & ((1ULL << 40) - 1))

/* ALLOC of kind realloc: the old block was itself tracked (at or above the threshold), so
 * `prev` names a live object that this realloc ended. */
#define NMP_SHIM_F_PREV_TRACKED 1u
/* ALLOC below the threshold, recorded because it was sampled (one in about `period`
 * bytes a thread allocates below the threshold); its release is recorded too. */
#define NMP_SHIM_F_SAMPLED 2u
/* ALLOC written at the block's release (a deferred record): `end` is the release time;
 * no FREE follows. */
#define NMP_SHIM_F_ENDED 4u
/* With NMP_SHIM_F_ENDED: released by the thread that allocated it. */
#define NMP_SHIM_F_OWNER_FREED 8u

/* objects.kind codes (docs/profile-format.md) */
enum nmp_shim_kind {
    NMP_KIND_MALLOC = 1, NMP_KIND_CALLOC = 2, NMP_KIND_REALLOC = 3, NMP_KIND_ALIGNED = 4,
    NMP_KIND_MMAP = 5, NMP_KIND_NUMA = 6,
    NMP_KIND_ATTACH = 7, /* not the shim's: a chunk numaprof record -p found in the heap */
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
    uint32_t period; /* ALLOC with NMP_SHIM_F_SAMPLED: the sampling period, bytes */
    uint64_t frames[NMP_SHIM_MAX_FRAMES];
    uint64_t end;    /* ALLOC with NMP_SHIM_F_ENDED, SHORT: the (last) release time */
    uint64_t extra;  /* SHORT: the lifetimes' sum, ns */
};

_Static_assert(sizeof(struct nmp_shim_header) == 32, "shim header layout");
_Static_assert(sizeof(struct nmp_shim_record) == 64 + 8 * NMP_SHIM_MAX_FRAMES,
               "shim record layout");

#endif
