/* Internal interfaces of numaprof-collect shared by its modules (not installed).
 * Conventions (docs/architecture.md): prefix nmp_, return 0 / -1 with errno (or a message written
 * into `err`), never exit() or print from library code; debug logging when the
 * environment variable NUMAPROF_DEBUG is set (nmp_debug()).
 */
#ifndef NMP_COLLECT_H
#define NMP_COLLECT_H

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
};

enum { NMP_ACC_NONE = 0, NMP_ACC_LOAD = 1, NMP_ACC_STORE = 2, NMP_ACC_RMW = 3 };
/* NMP_RULE_*: enum nmp_rule, generated (nmp_schema.h) from the one list of the sample
 * rules, NMP_SAMPLE_RULES in numaprof_format.h. */

/* mappings.flags: besides the kernel's MAP_SHARED/MAP_PRIVATE bits, a mapping of one of
 * numaprof's own files in the program (the allocation shim's library and record files):
 * never an object of the program (docs/profile-format.md). */
#define NMP_MAP_NUMAPROF 0x80000000u

#define NMP_ERRLEN 512

/* topology.c: hwloc topology of this machine -> <dir>/topology.xml and topology.json. */
int nmp_topology_write(const char *dir, char *err);

/* counters.c: one snapshot of numastat (per node) and /proc/vmstat numa_* into `t`
 * (columns of the counters table); phase 0 before, 1 after, 2 during. */
struct nmp_table *nmp_counters_open(const char *dir);
int nmp_counters_snapshot(struct nmp_table *t, uint64_t time_ns, int phase);

/* numamaps.c: copy /proc/<pid>/numa_maps to <dir>/numa_maps.<pid> (atomic rename). */
int nmp_numa_maps_copy(pid_t pid, const char *dir);

/* shimconv.c: turn every <dir>/shim.<pid>.bin into the objects and stack_frames tables,
 * then remove them.  Fills the small-allocation totals. */
struct nmp_shim_totals {
    uint64_t small_allocs, small_bytes, tracked_allocs, processes;
};
int nmp_shim_convert(const char *dir, struct nmp_shim_totals *totals, char *err);

/* util */
uint64_t nmp_now_ns(void); /* CLOCK_MONOTONIC */
void nmp_debug(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
