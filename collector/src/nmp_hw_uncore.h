/* Node-level counter discovery (hw_uncore.c), apart from opening so tests can check it
 * against fixture sysfs trees. */
#ifndef NMP_HW_UNCORE_H
#define NMP_HW_UNCORE_H

#include "nmp_hw.h"

struct nmp_hw_counter_plan {
    char pmu[64];              /* "uncore_imc_0", "amd_umc_3", "amd_df" */
    char name[32];             /* counters-table name: "imc.read_bytes", ... */
    char event[64];            /* sysfs event name or the term string used */
    int cpu;                   /* first cpu of the PMU's cpumask */
    int node;                  /* NUMA node of that cpu, -1 unknown */
    double bytes_per_count;    /* .scale x .unit, or 64 per CAS / DF beat */
    struct perf_event_attr attr;
};

/* Every memory-controller counter of this machine (through NUMAPROF_SYSROOT).  Returns
 * the count (0 with `why` if none), or -1. */
int nmp_hw_node_counters_plan(struct nmp_hw_counter_plan *plan, int max, char *why,
                              size_t whylen);

/* A counters object over already-open fds (one per plan entry; it takes ownership and
 * closes them in nmp_hw_node_counters_close).  For tests; NULL on allocation failure. */
struct nmp_hw_counters *nmp_hw_node_counters_adopt(const struct nmp_hw_counter_plan *plan,
                                                   const int *fds, int n);

#endif
