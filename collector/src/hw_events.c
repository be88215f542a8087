/* numaprof-collect --list-events [--json]: the events numaprof would use here. */
#include <linux/perf_event.h> /* before perfmon: libpfm4 include/perfmon/perf_event.h:40 */
#include <perfmon/pfmlib_perf_event.h>

#include "nmp_hw_priv.h"
#include "nmp_hw_uncore.h"

#include <stdlib.h>
#include <string.h>

/* Counting events for local/remote DRAM loads per core PMU model (libpfm4
 * lib/events/intel_skl_events.h, intel_icl_events.h,
 * intel_spr_events.h, amd64_events_fam17h_zen2.h, amd64_events_fam19h_zen3.h, _zen4.h). */
static const char *const dram_events[][2] = {
    {"MEM_LOAD_L3_MISS_RETIRED:LOCAL_DRAM", "dram-loads.local"},
    {"MEM_LOAD_L3_MISS_RETIRED:REMOTE_DRAM", "dram-loads.remote"},
    {"ANY_DATA_CACHE_FILLS_FROM_SYSTEM:DRAM_IO_NEAR", "dram-fills.local"},
    {"ANY_DATA_CACHE_FILLS_FROM_SYSTEM:DRAM_IO_FAR", "dram-fills.remote"},
    {"ANY_DATA_CACHE_FILLS_FROM_SYSTEM:MEM_IO_LCL", "dram-fills.local"},
    {"ANY_DATA_CACHE_FILLS_FROM_SYSTEM:MEM_IO_RMT", "dram-fills.remote"},
    {"DATA_CACHE_REFILLS_FROM_SYSTEM:LS_MABRESP_LCL_DRAM", "dram-fills.local"},
    {"DATA_CACHE_REFILLS_FROM_SYSTEM:LS_MABRESP_RMT_DRAM", "dram-fills.remote"},
};

static void json_str(FILE *out, const char *s)
{
    fputc('"', out);
    for (; *s; s++) {
        if (*s == '"' || *s == '\\')
            fprintf(out, "\\%c", *s);
        else if ((unsigned char)*s < 0x20)
            fprintf(out, "\\u%04x", *s);
        else
            fputc(*s, out);
    }
    fputc('"', out);
}

static void print_event(FILE *out, int json, int *first, const char *role, const char *name,
                        const char *source, const struct perf_event_attr *a)
{
    if (json) {
        fprintf(out, "%s\n    {\"role\": ", *first ? "" : ",");
        json_str(out, role);
        fprintf(out, ", \"name\": ");
        json_str(out, name);
        fprintf(out, ", \"source\": ");
        json_str(out, source);
        fprintf(out, ", \"type\": %u, \"config\": \"%#llx\", \"config1\": \"%#llx\", "
                     "\"config2\": \"%#llx\", \"precise\": %u, \"sample_type\": \"%#llx\", "
                     "\"period\": %llu}",
                a->type, (unsigned long long)a->config, (unsigned long long)a->config1,
                (unsigned long long)a->config2, a->precise_ip,
                (unsigned long long)a->sample_type, (unsigned long long)a->sample_period);
    } else {
        fprintf(out, "  %-18s %-48s type=%-3u config=%#-10llx config1=%#-12llx precise=%u  (%s)\n",
                role, name, a->type, (unsigned long long)a->config,
                (unsigned long long)a->config1, a->precise_ip, source);
    }
    *first = 0;
}

static void section(FILE *out, int json, int *opened, const char *key, const char *title)
{
    if (json)
        fprintf(out, "%s\n  \"%s\": [", *opened ? "]," : "", key);
    else
        fprintf(out, "%s:\n", title);
    *opened = 1;
}

int nmp_hw_list_events(FILE *out, int json)
{
    char pmubuf[64], why[NMP_ERRLEN];
    const char *forced = getenv("LIBPFM_FORCE_PMU");
    const char *core = nmp_hw_pfm_core_pmu(pmubuf, sizeof pmubuf);
    char pebs_why[NMP_ERRLEN] = "", ibs_why[NMP_ERRLEN] = "";
    int pebs_ok = forced ? 0 : nmp_hw_probe(NMP_BACKEND_PEBS, pebs_why, sizeof pebs_why);
    int ibs_ok = forced ? 0 : nmp_hw_probe(NMP_BACKEND_IBS, ibs_why, sizeof ibs_why);
    if (forced) {
        snprintf(pebs_why, sizeof pebs_why, "not probed: LIBPFM_FORCE_PMU=%s", forced);
        snprintf(ibs_why, sizeof ibs_why, "not probed: LIBPFM_FORCE_PMU=%s", forced);
    }
    int opened = 0, first;

    if (json) {
        fprintf(out, "{\n  \"core_pmu\": ");
        if (core)
            json_str(out, core);
        else
            fprintf(out, "null");
        fprintf(out, ",\n  \"forced\": %s,\n  \"backends\": {\"pebs\": {\"usable\": %s, "
                     "\"why\": ", forced ? "true" : "false", pebs_ok ? "true" : "false");
        json_str(out, pebs_why);
        fprintf(out, "}, \"ibs\": {\"usable\": %s, \"why\": ", ibs_ok ? "true" : "false");
        json_str(out, ibs_why);
        fprintf(out, "}},");
    } else {
        fprintf(out, "core PMU (libpfm4): %s%s\n", core ? core : "none",
                forced ? " (forced by LIBPFM_FORCE_PMU)" : "");
        fprintf(out, "pebs: %s\nibs:  %s\n", pebs_ok ? "usable" : pebs_why,
                ibs_ok ? "usable" : ibs_why);
    }

    /* memory sampling */
    section(out, json, &opened, "sampling", "memory sampling");
    first = 1;
    struct nmp_hw_event ev[8];
    struct nmp_hw_options opt = {.ldlat = 30, .stores = 1};
    int n = -1;
    if (pebs_ok) {
        struct perf_event_attr attrs[8];
        n = nmp_hw_attrs(NMP_BACKEND_PEBS, &opt, attrs, 8, why, sizeof why);
        int m = nmp_hw_build(NMP_BACKEND_PEBS, &opt, NULL, 0, ev, 8, why, sizeof why);
        for (int i = 0; i < n && i < m; i++)
            print_event(out, json, &first, ev[i].role, ev[i].name, ev[i].source, &attrs[i]);
    } else if (core && strncmp(core, "amd64", 5) != 0) {
        /* precise_ip is lowered from 3 at open time until the kernel accepts it */
        n = nmp_hw_build(NMP_BACKEND_PEBS, &opt, core, 3, ev, 8, why, sizeof why);
        for (int i = 0; i < n; i++)
            print_event(out, json, &first, ev[i].role, ev[i].name, ev[i].source, &ev[i].attr);
    }
    if (nmp_hw_exists(NMP_PMU_DIR "/ibs_op")) {
        n = nmp_hw_build(NMP_BACKEND_IBS, &opt, NULL, 0, ev, 8, why, sizeof why);
        for (int i = 0; i < n; i++)
            print_event(out, json, &first, ev[i].role, ev[i].name, ev[i].source, &ev[i].attr);
    }
    if (first && !json)
        fprintf(out, "  (none)\n");

    /* counting events of the core PMU */
    section(out, json, &opened, "counting", "local/remote DRAM counting (core PMU)");
    first = 1;
    for (size_t i = 0; core && i < sizeof dram_events / sizeof *dram_events; i++) {
        struct perf_event_attr a;
        char full[160];
        snprintf(full, sizeof full, "%s::%s", core, dram_events[i][0]);
        memset(&a, 0, sizeof a);
        a.size = sizeof a;
        pfm_perf_encode_arg_t e;
        memset(&e, 0, sizeof e);
        e.attr = &a;
        e.size = sizeof e;
        if (pfm_get_os_event_encoding(full, PFM_PLM3, PFM_OS_PERF_EVENT_EXT, &e) != PFM_SUCCESS)
            continue;
        char src[96];
        snprintf(src, sizeof src, "libpfm4 %s", core);
        print_event(out, json, &first, dram_events[i][1], dram_events[i][0], src, &a);
    }
    if (first && !json)
        fprintf(out, "  (none)\n");

    /* node-level counters */
    section(out, json, &opened, "node_counters", "node-level counters (uncore)");
    first = 1;
    struct nmp_hw_counter_plan *plan = calloc(256, sizeof *plan);
    int np = plan ? nmp_hw_node_counters_plan(plan, 256, why, sizeof why) : -1;
    for (int i = 0; i < np; i++) {
        char role[64], src[128];
        snprintf(role, sizeof role, "%s", plan[i].name);
        snprintf(src, sizeof src, "sysfs %s, cpu %d, node %d, %g bytes/count", plan[i].pmu,
                 plan[i].cpu, plan[i].node, plan[i].bytes_per_count);
        print_event(out, json, &first, role, plan[i].event, src, &plan[i].attr);
    }
    free(plan);
    if (first && !json)
        fprintf(out, "  (none: %s)\n", np < 0 ? "sysfs unreadable" : why);
    if (json)
        fprintf(out, "]\n}\n");
    return 0;
}
