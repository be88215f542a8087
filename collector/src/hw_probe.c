/* nmp_hw_probe: is PEBS / IBS usable here, and if not, exactly why and how to fix it. */
#include "nmp_hw_priv.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

static void with_virt(char *why, size_t whylen, const char *base)
{
    char virt[256];
    nmp_hw_virt(virt, sizeof virt);
    snprintf(why, whylen, "%s%s%s", base, virt[0] ? "; " : "", virt);
}

static int paranoid_blocks(char *why, size_t whylen)
{
    int paranoid = nmp_hw_paranoid();
    /* Debian's and Ubuntu's level 3 forbids perf_event_open to unprivileged users. */
    if (paranoid >= 3 && !nmp_hw_has_perfmon()) {
        snprintf(why, whylen, "perf_event_paranoid is %d: run `sysctl "
                 "kernel.perf_event_paranoid=2` (or grant CAP_PERFMON)", paranoid);
        return 1;
    }
    return 0;
}

static int probe_pebs(char *why, size_t whylen)
{
    if (!nmp_hw_exists(NMP_PMU_DIR "/cpu")) {
        if (nmp_hw_exists(NMP_PMU_DIR "/cpu_core"))
            snprintf(why, whylen, "no PEBS-capable PMU: " NMP_PMU_DIR "/cpu is absent "
                     "(a hybrid CPU with cpu_core/cpu_atom PMUs, not supported yet: use "
                     "--backend soft)");
        else
            with_virt(why, whylen, "no PEBS-capable PMU: " NMP_PMU_DIR "/cpu is absent "
                                   "(a VM without a virtual PMU?)");
        return 0;
    }
    if (!nmp_hw_exists(NMP_PMU_DIR "/cpu/events/mem-loads")) {
        with_virt(why, whylen, "no PEBS load-latency event: " NMP_PMU_DIR
                  "/cpu/events/mem-loads is absent (not an Intel CPU with PEBS, or a "
                  "virtual PMU without PEBS)");
        return 0;
    }
    if (paranoid_blocks(why, whylen))
        return 0;
    struct perf_event_attr attrs[8];
    struct nmp_hw_options opt = {.ldlat = 30};
    if (nmp_hw_attrs(NMP_BACKEND_PEBS, &opt, attrs, 8, why, whylen) < 0)
        return 0;
    return 1;
}

static int probe_ibs(char *why, size_t whylen)
{
    if (!nmp_hw_exists(NMP_PMU_DIR "/ibs_op")) {
        with_virt(why, whylen, "no IBS PMU: " NMP_PMU_DIR "/ibs_op is absent (not an AMD "
                               "CPU with IBS, or a VM that does not expose IBS)");
        return 0;
    }
    if (paranoid_blocks(why, whylen))
        return 0;
    struct perf_event_attr attr;
    if (nmp_hw_attrs(NMP_BACKEND_IBS, NULL, &attr, 1, why, whylen) < 0)
        return 0;
    return 1;
}

int nmp_hw_probe(enum nmp_backend backend, char *why, size_t whylen)
{
    if (whylen)
        why[0] = 0;
    switch (backend) {
    case NMP_BACKEND_PEBS: return probe_pebs(why, whylen);
    case NMP_BACKEND_IBS: return probe_ibs(why, whylen);
    case NMP_BACKEND_SOFT: return 1;
    }
    snprintf(why, whylen, "unknown backend %d", (int)backend);
    return 0;
}
