/* Hardware sampling backends (PEBS, IBS) and node-level counters: the interface the
 * collector (backend.c, events.c, records.c) uses.  Owned by the hardware-backends work
 * (hw_*.c).
 */
#ifndef NMP_HW_H
#define NMP_HW_H

#include <linux/perf_event.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "nmp_collect.h"

enum nmp_backend { NMP_BACKEND_SOFT = 0, NMP_BACKEND_PEBS = 1, NMP_BACKEND_IBS = 2 };

struct nmp_hw_options {
    unsigned ldlat;      /* PEBS load-latency threshold (cycles), default 30 */
    uint64_t period;     /* sample period, 0 = backend default */
    int l3missonly;      /* IBS */
    int stores;          /* also sample stores */
};

/* Is `backend` usable here?  Returns 1 if yes, 0 if not with a one-line reason and the
 * fix in `why` (no such PMU / perf_event_paranoid value with the sysctl / CAP_PERFMON /
 * VM or container). */
int nmp_hw_probe(enum nmp_backend backend, char *why, size_t whylen);

/* Up to `max` event attributes to open for `backend` on one cpu, in group order (leader
 * first: e.g. the SPR mem-loads-aux leader).  Returns the count, or -1 with `why` set. */
int nmp_hw_attrs(enum nmp_backend backend, const struct nmp_hw_options *opt,
                 struct perf_event_attr *attrs, int max, char *why, size_t whylen);

/* Decodes the body of one PERF_RECORD_SAMPLE produced by an event opened from
 * nmp_hw_attrs() into the common schema.  Returns 0, or -1 if the record is malformed. */
int nmp_hw_decode(enum nmp_backend backend, const struct perf_event_attr *attr,
                  const void *body, size_t len, struct nmp_sample *out);

/* ---- Extensions (hw_*.c) ------------------------------------------------------------ */

/* nmp_hw_decode() returns 1 (not 0, not -1) for a record of an event that only helps
 * the group, e.g. the mem-loads-aux leader (config 0x8203) on Sapphire Rapids: skip it,
 * it is not a memory sample. */
#define NMP_HW_SKIP 1

/* Is this attr such a helper event (its samples carry no memory information)? */
int nmp_hw_attr_is_aux(const struct perf_event_attr *attr);

/* Hardware events can bring kernel samples (IBS without the kernel's swfilt format
 * cannot exclude them: every exclude_* is 0 for ibs_op there); keep a record only if
 * this is true of its header.misc. */
static inline int nmp_hw_misc_is_user(uint16_t misc)
{
    return (misc & PERF_RECORD_MISC_CPUMODE_MASK) == PERF_RECORD_MISC_USER;
}

/* Where a perf_mem_data_src says the data came from (docs/backends.md, "Classifying
 * data_src").  OTHER also covers a miss whose source is unknown (mem_lvl MISS). */
enum nmp_memsrc {
    NMP_SRC_OTHER = 0, NMP_SRC_L1 = 1, NMP_SRC_LFB = 2, NMP_SRC_L2 = 3, NMP_SRC_L3 = 4,
    NMP_SRC_LOCAL_DRAM = 5, NMP_SRC_REMOTE_DRAM = 6, NMP_SRC_REMOTE_CACHE = 7,
    NMP_SRC_PMEM_CXL = 8,
    NMP_SRC_PEER_CACHE = 9, /* another core's cache on this node (REMOTE with HOPS_0) */
};
struct nmp_memsrc_class {
    enum nmp_memsrc src;
    int hops;   /* mem_hops field: 0 unknown, 1 remote core same node, 2 remote node same
                 * socket, 3 remote socket, 4 remote board */
    int remote; /* another NUMA node: the mem_remote bit unless hops says "same node",
                 * or a remote mem_lvl level (REM_RAM1/2, REM_CCE1/2) */
};
struct nmp_memsrc_class nmp_memsrc_classify(uint64_t data_src);
const char *nmp_memsrc_name(enum nmp_memsrc src);

/* Node-level memory-controller counters (uncore IMC, AMD DF / UMC), opened CPU-wide on
 * one cpu of each PMU's cpumask (needs perf_event_paranoid <= 0 or CAP_PERFMON).
 * open: returns the number of counters opened (>= 1), 0 if there are none here or they
 * may not be opened (reason in `why`), -1 on error (`why`).  *out is NULL unless >= 1.
 * read: appends one row per (node, name) to the counters table (docs/profile-format.md:
 * time u8, phase u1, node i2, name str, value u8), names "imc.read_bytes",
 * "imc.write_bytes", "df.dram_bytes", "umc.read_bytes", "umc.write_bytes"; values are
 * bytes since open.  Returns rows written or -1. */
struct nmp_hw_counters;
int nmp_hw_node_counters_open(struct nmp_hw_counters **out, char *why, size_t whylen);
int nmp_hw_node_counters_read(struct nmp_hw_counters *c, struct nmp_table *t,
                              uint64_t time_ns, int phase);
void nmp_hw_node_counters_close(struct nmp_hw_counters *c);

/* `numaprof-collect --list-events [--json]`: the sampling and node-counter events
 * numaprof would use on this CPU (or the libpfm4 PMU named by LIBPFM_FORCE_PMU), with
 * their encodings.  Returns 0, or -1 if nothing could be listed. */
int nmp_hw_list_events(FILE *out, int json);

#endif
