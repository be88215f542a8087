/* Node-level memory-controller counters: Intel uncore IMC, AMD DF and AMD UMC PMUs
 * found in sysfs, counted CPU-wide on one cpu of each PMU's cpumask.
 * Facts from the Linux sources: arch/x86/events/intel/uncore.c, uncore_snbep.c,
 * arch/x86/events/amd/uncore.c, tools/perf/pmu-events/arch/x86/amdzen3/data-fabric.json
 * and amdzen4/memory-controller.json.
 */
#include "nmp_hw_priv.h"
#include "nmp_hw_uncore.h"
#include "nmp_schema.h"

#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

struct counter {
    struct nmp_hw_counter_plan p;
    int fd;
};

struct nmp_hw_counters {
    int n;
    struct counter c[];
};

static double unit_bytes(const char *unit)
{
    if (!strcmp(unit, "MiB"))
        return 1048576.0;
    if (!strcmp(unit, "KiB"))
        return 1024.0;
    if (!strcmp(unit, "GiB"))
        return 1073741824.0;
    return 1.0; /* "B", "bytes", or none: counts already in bytes (or scaled by us) */
}

static int plan_add(struct nmp_hw_counter_plan *plan, int *n, int max, const char *pmu,
                    int cpu, const char *name, const char *event,
                    const struct perf_event_attr *a, double bytes)
{
    if (*n >= max)
        return -1;
    struct nmp_hw_counter_plan *e = &plan[(*n)++];
    memset(e, 0, sizeof *e);
    snprintf(e->pmu, sizeof e->pmu, "%s", pmu);
    snprintf(e->name, sizeof e->name, "%s", name);
    snprintf(e->event, sizeof e->event, "%s", event);
    e->cpu = cpu;
    e->node = nmp_hw_node_of_cpu(cpu);
    e->attr = *a;
    e->bytes_per_count = bytes;
    return 0;
}

static int pmu_type_cpu(const char *pmu, uint64_t *type, int *cpu)
{
    char path[512], list[4096];
    snprintf(path, sizeof path, NMP_PMU_DIR "/%s/type", pmu);
    if (nmp_hw_read_u64(path, type) < 0)
        return -1;
    snprintf(path, sizeof path, NMP_PMU_DIR "/%s/cpumask", pmu);
    if (nmp_hw_read_file(path, list, sizeof list) <= 0)
        return -1;
    *cpu = nmp_hw_cpulist_first(list);
    return *cpu < 0 ? -1 : 0;
}

static int cmp_names(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* PMU names of the sysfs directory, sorted, NULL-terminated; free with free_names. */
static char **pmu_names(void)
{
    char p[4096];
    DIR *d = opendir(nmp_hw_path(p, sizeof p, NMP_PMU_DIR));
    if (!d)
        return NULL;
    size_t n = 0, cap = 0;
    char **v = NULL;
    struct dirent *e;
    if (NMP_GROW(v, cap, 1, 32) != 0) {
        closedir(d);
        return NULL;
    }
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        if (NMP_GROW(v, cap, n + 2, 32) != 0) /* and the NULL at the end */
            break;
        v[n++] = strdup(e->d_name);
    }
    closedir(d);
    v[n] = NULL;
    qsort(v, n, sizeof *v, cmp_names);
    return v;
}

static void free_names(char **v)
{
    for (size_t i = 0; v && v[i]; i++)
        free(v[i]);
    free(v);
}

int nmp_hw_node_counters_plan(struct nmp_hw_counter_plan *plan, int max, char *why,
                              size_t whylen)
{
    char **names = pmu_names();
    int n = 0, have_umc = 0;
    char err[256];
    if (!names) {
        snprintf(why, whylen, "cannot list " NMP_PMU_DIR);
        return -1;
    }
    for (size_t i = 0; names[i]; i++)
        if (!strncmp(names[i], "amd_umc_", 8))
            have_umc = 1;
    for (size_t i = 0; names[i]; i++) {
        const char *pmu = names[i];
        uint64_t type;
        int cpu;
        if (!strncmp(pmu, "uncore_imc", 10) && !strstr(pmu, "free_running")) {
            /* Intel: cas_count_read/write with .scale (6.103515625e-5) and .unit (MiB),
             * i.e. 64 bytes per CAS (uncore_snbep.c) */
            static const char *const ev[2][2] = {{"cas_count_read", "imc.read_bytes"},
                                                 {"cas_count_write", "imc.write_bytes"}};
            if (pmu_type_cpu(pmu, &type, &cpu) < 0)
                continue;
            for (int k = 0; k < 2; k++) {
                struct perf_event_attr a;
                double scale;
                char unit[32];
                if (nmp_hw_sysfs_event(pmu, ev[k][0], &a, &scale, unit, sizeof unit, err,
                                       sizeof err) < 0)
                    continue;
                if (plan_add(plan, &n, max, pmu, cpu, ev[k][1], ev[k][0], &a,
                             scale * unit_bytes(unit)) < 0)
                    goto full;
            }
        } else if (!strncmp(pmu, "amd_umc_", 8)) {
            /* Zen4+: one PMU per memory channel; umc_cas_cmd.rd / .wr = event 0x0a with
             * rdwrmask 1 / 2 (amdzen4/memory-controller.json), 64 bytes per CAS */
            static const char *const ev[2][2] = {{"event=0x0a,rdwrmask=0x1", "umc.read_bytes"},
                                                 {"event=0x0a,rdwrmask=0x2", "umc.write_bytes"}};
            if (pmu_type_cpu(pmu, &type, &cpu) < 0)
                continue;
            for (int k = 0; k < 2; k++) {
                struct perf_event_attr a;
                memset(&a, 0, sizeof a);
                a.size = sizeof a;
                a.type = (uint32_t)type;
                if (nmp_hw_sysfs_encode(pmu, ev[k][0], &a, err, sizeof err) < 0)
                    continue;
                if (plan_add(plan, &n, max, pmu, cpu, ev[k][1], ev[k][0], &a, 64.0) < 0)
                    goto full;
            }
        } else if (!strcmp(pmu, "amd_df") && !have_umc) {
            /* Zen2/Zen3 data fabric: dram_channel_data_controller_0..7, EventCode
             * 0x07 + 0x40*k, UMask 0x38, 64 bytes per count (amdzen3/data-fabric.json);
             * EventCode bits 8-11 go to config 32-35 through format/event. */
            if (pmu_type_cpu(pmu, &type, &cpu) < 0)
                continue;
            for (int k = 0; k < 8; k++) {
                char evs[64];
                struct perf_event_attr a;
                memset(&a, 0, sizeof a);
                a.size = sizeof a;
                a.type = (uint32_t)type;
                snprintf(evs, sizeof evs, "event=%#x,umask=0x38", 0x07 + 0x40 * k);
                if (nmp_hw_sysfs_encode(pmu, evs, &a, err, sizeof err) < 0)
                    break;
                if (plan_add(plan, &n, max, pmu, cpu, "df.dram_bytes", evs, &a, 64.0) < 0)
                    goto full;
            }
        }
    }
    free_names(names);
    if (n == 0)
        snprintf(why, whylen, "no memory-controller PMU (uncore_imc*, amd_umc_*, amd_df) in "
                              NMP_PMU_DIR);
    return n;
full:
    free_names(names);
    snprintf(why, whylen, "more than %d node-level counters", max);
    return n;
}

int nmp_hw_node_counters_open(struct nmp_hw_counters **out, char *why, size_t whylen)
{
    struct nmp_hw_counter_plan plan[256];
    *out = NULL;
    int n = nmp_hw_node_counters_plan(plan, 256, why, whylen);
    if (n <= 0)
        return n;
    /* CPU-wide events: perf_event_paranoid <= 0 or CAP_PERFMON (kernel.rst) */
    int paranoid = nmp_hw_paranoid();
    if (paranoid > 0 && !nmp_hw_has_perfmon()) {
        snprintf(why, whylen, "%d node-level counters (%s...) not opened: CPU-wide events "
                 "need perf_event_paranoid <= 0 (it is %d) or CAP_PERFMON", n, plan[0].pmu,
                 paranoid);
        return 0;
    }
    struct nmp_hw_counters *c = calloc(1, sizeof *c + (size_t)n * sizeof c->c[0]);
    if (!c) {
        snprintf(why, whylen, "out of memory");
        return -1;
    }
    int first_err = 0;
    for (int i = 0; i < n; i++) {
        struct perf_event_attr a = plan[i].attr;
        a.read_format = PERF_FORMAT_TOTAL_TIME_ENABLED | PERF_FORMAT_TOTAL_TIME_RUNNING;
        /* uncore PMUs: no sampling, no exclude_* (PERF_PMU_CAP_NO_EXCLUDE), pid -1 */
        long fd = syscall(SYS_perf_event_open, &a, -1, plan[i].cpu, -1, PERF_FLAG_FD_CLOEXEC);
        if (fd < 0) {
            if (!first_err) {
                first_err = errno;
                snprintf(why, whylen, "%s %s on cpu %d: perf_event_open: %s", plan[i].pmu,
                         plan[i].event, plan[i].cpu, strerror(errno));
            }
            continue;
        }
        c->c[c->n].p = plan[i];
        c->c[c->n].fd = (int)fd;
        c->n++;
    }
    if (c->n == 0) {
        free(c);
        return 0;
    }
    *out = c;
    return c->n;
}

struct nmp_hw_counters *nmp_hw_node_counters_adopt(const struct nmp_hw_counter_plan *plan,
                                                   const int *fds, int n)
{
    struct nmp_hw_counters *c = calloc(1, sizeof *c + (size_t)(n > 0 ? n : 0) * sizeof c->c[0]);
    if (!c)
        return NULL;
    for (int i = 0; i < n; i++) {
        c->c[i].p = plan[i];
        c->c[i].fd = fds[i];
    }
    c->n = n;
    return c;
}

int nmp_hw_node_counters_read(struct nmp_hw_counters *c, struct nmp_table *t,
                              uint64_t time_ns, int phase)
{
    if (!c || !t)
        return -1;
    /* sum per (node, name): several IMC boxes / UMC channels feed one node */
    struct {
        int node;
        const char *name;
        double bytes;
    } agg[256];
    int na = 0;
    for (int i = 0; i < c->n; i++) {
        uint64_t v[3];
        if (read(c->c[i].fd, v, sizeof v) != (ssize_t)sizeof v)
            continue;
        double val = (double)v[0];
        if (v[2] && v[2] < v[1]) /* multiplexed: scale by enabled/running */
            val = val * (double)v[1] / (double)v[2];
        double bytes = val * c->c[i].p.bytes_per_count;
        int k;
        for (k = 0; k < na; k++)
            if (agg[k].node == c->c[i].p.node && !strcmp(agg[k].name, c->c[i].p.name))
                break;
        if (k == na) {
            if (na == 256)
                continue;
            agg[na].node = c->c[i].p.node;
            agg[na].name = c->c[i].p.name;
            agg[na].bytes = 0;
            na++;
        }
        agg[k].bytes += bytes;
    }
    for (int k = 0; k < na; k++) {
        uint64_t row[NMP_counters_NCOLS] = {
            [NMP_counters_time] = time_ns, [NMP_counters_phase] = (uint64_t)phase,
            [NMP_counters_node] = (uint64_t)(int64_t)agg[k].node,
            [NMP_counters_name] = (uint64_t)(uintptr_t)agg[k].name,
            [NMP_counters_value] = (uint64_t)(agg[k].bytes + 0.5)};
        if (nmp_table_append(t, row) < 0)
            return -1;
    }
    return na;
}

void nmp_hw_node_counters_close(struct nmp_hw_counters *c)
{
    if (!c)
        return;
    for (int i = 0; i < c->n; i++)
        close(c->c[i].fd);
    free(c);
}
