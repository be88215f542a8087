/* Software node-level counters (docs/record.md): /sys/devices/system/node/node<N>/numastat per
 * node and the numa_* lines of /proc/vmstat machine-wide, as rows of the counters table
 * (docs/profile-format.md).  /sys and /proc are read below NUMAPROF_SYSROOT (default "")
 * so tests can use stored trees of real machines, as hwloc does with HWLOC_FSROOT.
 */
#include "nmp_collect.h"
#include "nmp_schema.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct nmp_table *nmp_counters_open(const char *dir)
{
    return nmp_table_open(dir, NMP_TABLE_ID_counters, -1);
}

static const char *sysroot(void)
{
    const char *r = getenv("NUMAPROF_SYSROOT");
    return r ? r : "";
}

/* Appends one row per "<field> <value>" line of `path` whose field starts with `prefix`.
 * Returns the number of rows, or -1 if the file cannot be opened or a write failed. */
static int read_counter_file(struct nmp_table *t, const char *path, const char *prefix,
                             const char *name_prefix, int node, uint64_t time_ns, int phase)
{
    FILE *f = fopen(path, "re");
    if (!f)
        return -1;
    char line[256], name[320];
    int rows = 0, failed = 0;
    size_t plen = strlen(prefix);
    while (fgets(line, sizeof line, f)) {
        char field[128];
        unsigned long long value;
        if (sscanf(line, "%127s %llu", field, &value) != 2)
            continue;
        if (strncmp(field, prefix, plen) != 0)
            continue;
        snprintf(name, sizeof name, "%s.%s", name_prefix, field);
        uint64_t row[NMP_counters_NCOLS] = {
            [NMP_counters_time] = time_ns, [NMP_counters_phase] = (uint64_t)phase,
            [NMP_counters_node] = (uint64_t)(int64_t)node,
            [NMP_counters_name] = (uint64_t)(uintptr_t)name, [NMP_counters_value] = value};
        if (nmp_table_append(t, row) < 0)
            failed = 1;
        rows++;
    }
    fclose(f);
    return failed ? -1 : rows;
}

static int by_node_number(const struct dirent **a, const struct dirent **b)
{
    long x = strtol((*a)->d_name + 4, NULL, 10), y = strtol((*b)->d_name + 4, NULL, 10);
    return (x > y) - (x < y);
}

static int is_node_dir(const struct dirent *d)
{
    if (strncmp(d->d_name, "node", 4) != 0 || !d->d_name[4])
        return 0;
    for (const char *p = d->d_name + 4; *p; p++)
        if (!isdigit((unsigned char)*p))
            return 0;
    return 1;
}

int nmp_counters_snapshot(struct nmp_table *t, uint64_t time_ns, int phase)
{
    if (!t) {
        errno = EINVAL;
        return -1;
    }
    char path[4096];
    int found = 0, failed = 0;

    snprintf(path, sizeof path, "%s/sys/devices/system/node", sysroot());
    struct dirent **ents = NULL;
    int n = scandir(path, &ents, is_node_dir, by_node_number);
    for (int i = 0; i < n; i++) {
        int node = (int)strtol(ents[i]->d_name + 4, NULL, 10);
        snprintf(path, sizeof path, "%s/sys/devices/system/node/%s/numastat", sysroot(),
                 ents[i]->d_name);
        int r = read_counter_file(t, path, "", "numastat", node, time_ns, phase);
        if (r > 0)
            found += r;
        else if (r < 0 && errno != ENOENT)
            failed = 1;
        free(ents[i]);
    }
    free(ents);

    snprintf(path, sizeof path, "%s/proc/vmstat", sysroot());
    int r = read_counter_file(t, path, "numa_", "vmstat", -1, time_ns, phase);
    if (r > 0)
        found += r;
    else if (r < 0 && errno != ENOENT)
        failed = 1;

    nmp_debug("counters: phase %d, %d values", phase, found);
    if (failed)
        return -1;
    if (!found) {
        errno = ENOENT; /* no NUMA statistics at all (a kernel without CONFIG_NUMA) */
        return -1;
    }
    return 0;
}
