/* Hardware sampling backends (PEBS, IBS) and node-level counters: the interface the
 * sampler (main.c / sampler.c) uses.  Owned by the hardware-backends work (hw_*.c).
 */
#ifndef NMP_HW_H
#define NMP_HW_H

#include <linux/perf_event.h>
#include <stddef.h>
#include <stdint.h>

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

#endif
