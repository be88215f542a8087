/* nmp_counters_snapshot and nmp_numa_maps_copy on a fixture sysroot (two nodes, a non-node directory, a
 * malformed line) and on this machine; rows read back from the column files. */
#include "nmp_collect.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <errno.h>
#include <unistd.h>
#include "nmp_check.h"


static void put(const char *root, const char *rel, const char *text)
{
    char path[4096], cmd[4300];
    snprintf(path, sizeof path, "%s/%s", root, rel);
    snprintf(cmd, sizeof cmd, "mkdir -p \"$(dirname '%s')\"", path);
    if (system(cmd) != 0)
        abort();
    FILE *f = fopen(path, "w");
    if (!f || fputs(text, f) < 0 || fclose(f) != 0)
        abort();
}

/* Reads a whole column file; checks the header and returns the values' bytes. */
static unsigned char *read_col(const char *dir, const char *name, const char *dtype,
                               size_t *len)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/counters.%s.col", dir, name);
    FILE *f = fopen(path, "rb");
    CHECK(f != NULL);
    if (!f)
        return NULL;
    static unsigned char bufs[6][1 << 16];
    static int next;
    unsigned char *buf = bufs[next++ % 6];
    size_t n = fread(buf, 1, sizeof bufs[0], f);
    fclose(f);
    CHECK(n >= 16 && memcmp(buf, "NMPCOL01", 8) == 0 && strcmp((char *)buf + 8, dtype) == 0);
    *len = n - 16;
    return buf + 16;
}

static char heap[1 << 16];

enum { ROWS = 10 }; /* rows per snapshot of the fixture */

int main(void)
{
    const char *tmp = getenv("NMP_TEST_TMP");
    char root[2048], out[2048], cmd[8192];
    snprintf(root, sizeof root, "%s/counters_root", tmp ? tmp : "/tmp");
    snprintf(out, sizeof out, "%s/counters_out", tmp ? tmp : "/tmp");
    snprintf(cmd, sizeof cmd, "rm -rf '%s' '%s' && mkdir -p '%s'", root, out, out);
    if (system(cmd) != 0)
        abort();
    put(root, "sys/devices/system/node/node0/numastat",
        "numa_hit 100\nnuma_miss 1\nnuma_foreign 2\ninterleave_hit 3\nlocal_node 99\nother_node 4\n");
    put(root, "sys/devices/system/node/node10/numastat",
        "numa_hit 18446744073709551615\nbroken line\n");
    put(root, "sys/devices/system/node/node2/numastat", "numa_hit 7\n");
    put(root, "sys/devices/system/node/nodefoo/numastat", "numa_hit 5\n");
    put(root, "sys/devices/system/node/possible", "0-10\n");
    put(root, "proc/vmstat", "nr_free_pages 12\nnuma_hit 200\nnuma_other 5\npgfault 9\n");
    setenv("NUMAPROF_SYSROOT", root, 1);

    struct nmp_table *t = nmp_counters_open(out);
    CHECK(t != NULL);
    if (!t)
        return 1;
    CHECK(nmp_counters_snapshot(t, 1234, 0) == 0);
    CHECK(nmp_counters_snapshot(t, 5678, 1) == 0);
    CHECK(nmp_table_rows(t) == 2 * ROWS);
    CHECK(nmp_table_close(t) == 0);

    size_t n;
    const uint64_t *time = (const uint64_t *)read_col(out, "time", "<u8", &n);
    CHECK(n == 2 * ROWS * 8);
    const uint8_t *phase = read_col(out, "phase", "|u1", &n);
    CHECK(n == 2 * ROWS);
    const int16_t *node = (const int16_t *)read_col(out, "node", "<i2", &n);
    CHECK(n == 2 * ROWS * 2);
    const uint64_t *name = (const uint64_t *)read_col(out, "name", "<u8", &n);
    const uint64_t *value = (const uint64_t *)read_col(out, "value", "<u8", &n);
    char path[4200];
    snprintf(path, sizeof path, "%s/counters.name.heap", out);
    FILE *f = fopen(path, "rb");
    CHECK(f && fread(heap, 1, sizeof heap, f) > 0);
    if (f)
        fclose(f);
    struct stat st;
    CHECK(stat(path, &st) == 0 && (st.st_mode & 0777) == 0600);

    /* nodes in numeric order (0, 2, 10; "nodefoo" is not a node), then the machine-wide
     * numa_* lines of vmstat */
    static const struct { int node; const char *name; uint64_t value; } want[ROWS] = {
        {0, "numastat.numa_hit", 100}, {0, "numastat.numa_miss", 1},
        {0, "numastat.numa_foreign", 2}, {0, "numastat.interleave_hit", 3},
        {0, "numastat.local_node", 99}, {0, "numastat.other_node", 4},
        {2, "numastat.numa_hit", 7}, {10, "numastat.numa_hit", UINT64_MAX},
        {-1, "vmstat.numa_hit", 200}, {-1, "vmstat.numa_other", 5},
    };
    for (int r = 0; r < 2 * ROWS && time && phase && node && name && value; r++) {
        int w = r % ROWS;
        CHECK(time[r] == (r < ROWS ? 1234u : 5678u));
        CHECK(phase[r] == (r < ROWS ? 0 : 1));
        CHECK(node[r] == want[w].node);
        CHECK(strcmp(heap + name[r], want[w].name) == 0);
        CHECK(value[r] == want[w].value);
    }

    /* numa_maps: copied whole, 0600, no temporary left; a missing process is an error */
    static const char maps[] =
        "00400000 default file=/bin/app mapped=1 N0=1 kernelpagesize_kB=4\n"
        "7f0000000000 interleave:0-1 anon=512 dirty=512 N0=256 N1=256 kernelpagesize_kB=4\n";
    put(root, "proc/4242/numa_maps", maps);
    CHECK(nmp_numa_maps_copy(4242, out) == 0);
    char mpath[2300];
    snprintf(mpath, sizeof mpath, "%s/numa_maps.4242", out);
    FILE *mf = fopen(mpath, "r");
    char got[512] = "";
    CHECK(mf && fread(got, 1, sizeof got - 1, mf) == strlen(maps));
    if (mf)
        fclose(mf);
    CHECK(strcmp(got, maps) == 0);
    CHECK(stat(mpath, &st) == 0 && (st.st_mode & 0777) == 0600);
    CHECK(nmp_numa_maps_copy(4243, out) < 0 && errno == ENOENT);
    /* a process that exited between the check and the read has an empty numa_maps: the
     * copy made before (the shim's at its exit) stays whole */
    put(root, "proc/4242/numa_maps", "");
    CHECK(nmp_numa_maps_copy(4242, out) < 0 && errno == ESRCH);
    mf = fopen(mpath, "r");
    memset(got, 0, sizeof got);
    CHECK(mf && fread(got, 1, sizeof got - 1, mf) == strlen(maps));
    if (mf)
        fclose(mf);
    CHECK(strcmp(got, maps) == 0);
    snprintf(cmd, sizeof cmd, "ls -A '%s' | grep -q tmp", out);
    CHECK(system(cmd) != 0);

    /* no NUMA statistics at all: an error, not an empty success */
    char nothing[4200];
    snprintf(nothing, sizeof nothing, "%s/nothing", root);
    setenv("NUMAPROF_SYSROOT", nothing, 1);
    t = nmp_counters_open(out);
    CHECK(t && nmp_counters_snapshot(t, 1, 0) < 0 && nmp_table_rows(t) == 0);
    nmp_table_close(t);

    /* this machine (real /sys and /proc) has at least node0 */
    unsetenv("NUMAPROF_SYSROOT");
    CHECK(nmp_numa_maps_copy(getpid(), out) == 0);
    t = nmp_counters_open(out);
    CHECK(t && nmp_counters_snapshot(t, 1, 2) == 0 && nmp_table_rows(t) >= 6);
    nmp_table_close(t);

    return check_result();
}
