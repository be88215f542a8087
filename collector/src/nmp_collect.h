/* Internal interfaces of numaprof-collect shared by its modules (not installed).
 * Conventions (docs/architecture.md): prefix nmp_, return 0 / -1 with errno (or a message written
 * into `err`), never exit() or print from library code; debug logging when the
 * environment variable NUMAPROF_DEBUG is set (nmp_debug()).
 */
#ifndef NMP_COLLECT_H
#define NMP_COLLECT_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "nmp_schema.h"
#include "nmp_table.h"

/* One sample in the common schema of all backends (docs/profile-format.md, samples). */
struct nmp_sample {
    uint64_t time, ip, addr, data_src, phys_addr;
    uint32_t pid, tid, weight;
    uint16_t cpu;
    uint8_t access; /* NMP_ACC_* */
    uint8_t size;
    uint8_t rule; /* enum nmp_rule */
    /* addr is relative to the thread pointer (a %fs access: static TLS), which the
     * collector adds (records.c) */
    uint8_t tls;
    /* The registers of the access (software backend; zeros elsewhere), which the
     * analyzer names stack and register-held objects by (docs/analyzer.md): the stack
     * and frame pointers at ip; ip minus the address of the instruction charged; the
     * DWARF numbers + 1 of its base and index registers (0: none); addr minus the value
     * of its base register at the access.  *_UNKNOWN: too far to store. */
    uint64_t sp, bp;
    int32_t base_off;
    int16_t insn_off;
    uint8_t base_reg, index_reg;
};

#define NMP_BASE_OFF_UNKNOWN INT32_MIN
#define NMP_INSN_OFF_UNKNOWN INT16_MIN
#define NMP_BP_SP_UNKNOWN INT32_MIN

/* The `bp_sp` column: rbp - rsp, which fits in 4 bytes wherever rbp is a frame pointer
 * (both in one thread's stack); NMP_BP_SP_UNKNOWN where rbp holds some other value,
 * which no frame is then computed from. */
static inline int32_t nmp_bp_sp(uint64_t sp, uint64_t bp)
{
    int64_t d = (int64_t)(bp - sp);
    return d > INT32_MIN && d <= INT32_MAX ? (int32_t)d : NMP_BP_SP_UNKNOWN;
}

enum { NMP_ACC_NONE = 0, NMP_ACC_LOAD = 1, NMP_ACC_STORE = 2, NMP_ACC_RMW = 3 };
/* NMP_RULE_*: enum nmp_rule, generated (nmp_schema.h) from the one list of the sample
 * rules, NMP_SAMPLE_RULES in numaprof_format.h. */

/* mappings.flags: besides the kernel's MAP_SHARED/MAP_PRIVATE bits, a mapping of one of
 * numaprof's own files in the program (the allocation shim's library and record files):
 * never an object of the program (docs/profile-format.md). */
#define NMP_MAP_NUMAPROF 0x80000000u

/* The rules whose sample carries a data address computed from the sampled registers. */
static inline int nmp_rule_has_address(int rule)
{
    return rule == NMP_RULE_AT_IP || rule == NMP_RULE_SKID || rule == NMP_RULE_SKID_PATH ||
           rule == NMP_RULE_SKID_LOOP || rule == NMP_RULE_VSIB_BASE;
}

#define NMP_ERRLEN 512

/* topology.c: hwloc topology of this machine -> <dir>/topology.xml and topology.json. */
int nmp_topology_write(const char *dir, char *err);

/* The same in a thread of its own, while the program runs (discovery reads sysfs for
 * every CPU and cache: tens of ms on a large machine, none of it needed before the
 * program starts).  Start after the program's fork, so that no descriptor hwloc has open
 * is inherited; join before the profile is declared complete: rc 0, or -1 with err. */
struct nmp_topology_job {
    const char *dir;
    struct hwloc_topology *topo;
    pthread_t th;
    int running, rc;
    char err[NMP_ERRLEN];
};
void nmp_topology_start(struct nmp_topology_job *j, const char *dir);
int nmp_topology_join(struct nmp_topology_job *j);

/* counters.c: one snapshot of numastat (per node) and /proc/vmstat numa_* into `t`
 * (columns of the counters table); phase 0 before, 1 after, 2 during. */
struct nmp_table *nmp_counters_open(const char *dir);
int nmp_counters_snapshot(struct nmp_table *t, uint64_t time_ns, int phase);

/* procfs.c: copy /proc/<pid>/numa_maps to <dir>/numa_maps.<pid> (atomic rename). */
int nmp_numa_maps_copy(pid_t pid, const char *dir);

/* shimconv.c: turn every <dir>/shim.<pid>.bin into the objects and stack_frames tables,
 * then remove them.  Fills the small-allocation totals. */
struct nmp_shim_totals {
    uint64_t small_allocs, small_bytes, tracked_allocs, sampled_allocs, short_lived_allocs;
    uint64_t processes;
};
int nmp_shim_convert(const char *dir, struct nmp_shim_totals *totals, char *err);
/* The same from the shim's files in `dir`, of a program that may still be running (the
 * blocks in its pool are live), into the tables of `out`: only the objects alive at some
 * time in [lo, hi] (CLOCK_MONOTONIC ns) and the page counts asked in it; the files are
 * removed unless `keep`.  A slice of a recording (`record --switch-output -- CMD`). */
int nmp_shim_convert_window(const char *dir, const char *out, uint64_t lo, uint64_t hi, int keep,
                            struct nmp_shim_totals *totals, char *err);

/* outdir.c: the profile directory `out` made anew for a recording, an existing profile
 * there kept as <out>.old (*kept = 1) and nothing that numaprof did not write touched.
 * 0, or -1 with the one line of the refusal in `err` (and everything as it was). */
int nmp_outdir_prepare(const char *out, int *kept, char *err);

/* srcfiles.c: for each of the `n` files `paths`, the number of source files its DWARF
 * line tables name and their absolute, normalised paths, NUL-terminated, to `out`.
 * 0, or -1 if `out` could not be written. */
int nmp_source_files(char **paths, int n, FILE *out);

/* util.c: small helpers shared by the modules */
uint64_t nmp_now_ns(void); /* CLOCK_MONOTONIC */
void nmp_debug(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Formats the one line of a failure into `err` (NMP_ERRLEN bytes; NULL: none wanted). */
void nmp_set_err(char *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Writes `len` bytes to <dir>/<name> through a temporary file and rename(2), mode 0600,
 * so that a reader never sees it half-written: 0, or -1 with errno and `err`. */
int nmp_write_atomic(const char *dir, const char *name, const void *data, size_t len, char *err);

/* A growable array: makes room for `need` elements of `size` bytes in the array at
 * `*arrp` (any object pointer, passed by address) of capacity *cap, doubling from `first`.
 * 0, or -1 with errno (ENOMEM) and the array as it was.  NMP_GROW names the element
 * size from the array itself. */
int nmp_grow(void *arrp, size_t *cap, size_t need, size_t size, size_t first);
#define NMP_GROW(arr, cap, need, first) nmp_grow(&(arr), &(cap), (need), sizeof *(arr), (first))

/* The hash of the open-addressing tables: MurmurHash3's 64-bit finalizer (fmix64; A.
 * Appleby, MurmurHash3.cpp), a bijection in which every input bit changes every output
 * bit with probability ~1/2, so masking off the low bits of a page address or a tid
 * spreads well. */
static inline uint64_t nmp_mix64(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ULL;
    x ^= x >> 33;
    return x;
}

/* A map from a u32 key (a tid) to a nonzero u32 value (an index + 1 into an array):
 * open addressing, no removal; a put replaces the key's value. */
struct nmp_u32map {
    uint32_t *keys, *vals; /* vals 0: empty slot */
    size_t cap, n;
};
int nmp_u32map_put(struct nmp_u32map *m, uint32_t key, uint32_t val); /* 0, or -1 (ENOMEM) */
uint32_t nmp_u32map_get(const struct nmp_u32map *m, uint32_t key);   /* 0: absent */
void nmp_u32map_free(struct nmp_u32map *m);

/* One line of /proc/PID/maps (proc(5)). */
struct nmp_maps_line {
    uint64_t start, end, pgoff;
    uint32_t prot;  /* PROT_READ | PROT_WRITE | PROT_EXEC */
    uint32_t flags; /* MAP_SHARED or MAP_PRIVATE */
    const char *path; /* "" for an anonymous mapping; valid during the call only */
};
/* Calls fn(arg, line) for every mapping of process pid.  Returns how many calls returned
 * 0, or -1 with errno when the file cannot be read. */
int nmp_proc_maps_each(uint32_t pid, int (*fn)(void *arg, const struct nmp_maps_line *m),
                       void *arg);

#endif
