/* Which sampling backend a run uses: PEBS or IBS where the machine and permissions allow
 * (or as --backend asks), else the software backend; and for each backend the reason it
 * was or was not taken, which collector.json records (docs/backends.md). */
#include "nmp_collector.h"

#include <stdio.h>

const char *nmp_backend_name(enum nmp_backend b)
{
    return b == NMP_BACKEND_PEBS ? "pebs" : b == NMP_BACKEND_IBS ? "ibs" : "soft";
}

/* --backend pebs|ibs names a backend that cannot be used: the run fails. */
static int unavailable(struct nmp_collector *c, enum nmp_backend b)
{
    snprintf(c->err, NMP_ERRLEN, "backend %s unavailable: %s", nmp_backend_name(b),
             c->be.reason[b]);
    return -1;
}

int nmp_backend_select(struct nmp_collector *c)
{
    struct nmp_backend_choice *be = &c->be;
    int req = c->cfg->backend;
    for (int b = 0; b < NMP_NBACKENDS; b++)
        be->reason[b][0] = 0;
    be->backend = NMP_BACKEND_SOFT;
    if (req == NMP_REQ_SOFT) {
        snprintf(be->reason[NMP_BACKEND_PEBS], NMP_REASON_LEN, "not tried (--backend soft)");
        snprintf(be->reason[NMP_BACKEND_IBS], NMP_REASON_LEN, "not tried (--backend soft)");
        snprintf(be->reason[NMP_BACKEND_SOFT], NMP_REASON_LEN, "selected");
        return 0;
    }
    static const enum nmp_backend order[2] = {NMP_BACKEND_PEBS, NMP_BACKEND_IBS};
    for (int i = 0; i < 2; i++) {
        enum nmp_backend b = order[i];
        char *reason = be->reason[b];
        if (req != NMP_REQ_AUTO && req != (int)b) {
            snprintf(reason, NMP_REASON_LEN, "not tried (--backend %s)",
                     nmp_backend_name((enum nmp_backend)req));
            continue;
        }
        if (be->backend != NMP_BACKEND_SOFT) {
            snprintf(reason, NMP_REASON_LEN, "not tried (%s selected)",
                     nmp_backend_name(be->backend));
            continue;
        }
        char why[NMP_REASON_LEN] = "";
        if (!nmp_hw_probe(b, why, sizeof why)) {
            snprintf(reason, NMP_REASON_LEN, "%s", why[0] ? why : "unavailable");
            if (req == (int)b)
                return unavailable(c, b);
            continue;
        }
        struct nmp_hw_options opt = {.ldlat = 30, .period = 0, .l3missonly = 0, .stores = 1};
        int n = nmp_hw_attrs(b, &opt, be->hw_attrs, NMP_MAX_HW_ATTRS, why, sizeof why);
        if (n <= 0) {
            snprintf(reason, NMP_REASON_LEN, "%s", why[0] ? why : "no usable events");
            if (req == (int)b)
                return unavailable(c, b);
            continue;
        }
        be->nhw = n;
        be->backend = b;
        snprintf(reason, NMP_REASON_LEN, "selected");
    }
    if (be->backend == NMP_BACKEND_SOFT)
        snprintf(be->reason[NMP_BACKEND_SOFT], NMP_REASON_LEN, "selected");
    else
        snprintf(be->reason[NMP_BACKEND_SOFT], NMP_REASON_LEN, "not needed (%s selected)",
                 nmp_backend_name(be->backend));
    return 0;
}
