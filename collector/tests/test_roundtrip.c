/* Round trip of the on-disk format (STYLE.md practice 8): writes every table of
 * docs/profile-format.md with distinctive values -- byte patterns that expose a wrong
 * width or byte order, the maximum of every width, negative node ids, empty, long and
 * non-ASCII strings -- into argv[1] (default $NMP_TEST_TMP/roundtrip).
 * tests/test_roundtrip.py reads them back field by field with numpy; the expected
 * values there are the ones written here.  objects/stack_frames go through the real
 * converter (hand-made shim records) and counters through nmp_counters_open's columns.
 * Run alone (ctest), it checks that every column file has the size its rows imply.
 */
#include "nmp_collect.h"
#include "nmp_shim_format.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "nmp_check.h"

#define M8 UINT64_MAX
#define M4 UINT32_MAX
#define S(s) ((uint64_t)(uintptr_t)(s))


static char long_path[3001];

static void write_table(const char *dir, const char *name, const struct nmp_coldef *cols,
                        int ncols, const uint64_t *rows, int nrows)
{
    struct nmp_table *t = nmp_table_create(dir, name, cols, ncols);
    CHECK(t != NULL);
    if (!t)
        return;
    for (int r = 0; r < nrows; r++)
        CHECK(nmp_table_append(t, rows + (size_t)r * (size_t)ncols) == 0);
    CHECK(nmp_table_rows(t) == (uint64_t)nrows);
    CHECK(nmp_table_close(t) == 0);
}

static void samples(const char *dir)
{
    static const struct nmp_coldef cols[] = {
        {"time", NMP_U64}, {"pid", NMP_U32}, {"tid", NMP_U32}, {"cpu", NMP_U16},
        {"ip", NMP_U64}, {"addr", NMP_U64}, {"access", NMP_U8}, {"size", NMP_U8},
        {"rule", NMP_U8}, {"weight", NMP_U32}, {"data_src", NMP_U64}, {"phys_addr", NMP_U64},
    };
    const uint64_t rows[] = {
        1, 2, 3, 4, 0x401000, 0x7ffd0000, NMP_ACC_LOAD, 8, NMP_RULE_AT_IP, 30, 0x68100142,
        0x1234000,
        M8, M4, M4, 0xffff, M8, M8, NMP_ACC_RMW, 0xff, NMP_RULE_CLOBBERED, M4, M8, M8,
        0x0102030405060708, 0x01020304, 0x05060708, 0x0102, 0x1122334455667788,
        0x8877665544332211, NMP_ACC_STORE, 64, NMP_RULE_SKID, 0x01020304, 0x0807060504030201,
        0xdeadbeefcafef00d,
    };
    write_table(dir, "samples", cols, 12, rows, 3);
}

static void faults(const char *dir)
{
    static const struct nmp_coldef cols[] = {
        {"time", NMP_U64}, {"pid", NMP_U32}, {"tid", NMP_U32}, {"cpu", NMP_U16},
        {"ip", NMP_U64}, {"addr", NMP_U64}, {"flags", NMP_U8}, {"source", NMP_U8},
    };
    const uint64_t rows[] = {
        10, 11, 12, 1, 0x401234, 0x7f0000001000, 3, 1,
        M8, M4, M4, 0xffff, M8, M8, 0xff, 2,
    };
    write_table(dir, "faults", cols, 8, rows, 2);
}

static void page_nodes(const char *dir)
{
    static const struct nmp_coldef cols[] = {
        {"time", NMP_U64}, {"pid", NMP_U32}, {"page", NMP_U64}, {"node", NMP_I16},
    };
    const uint64_t rows[] = {
        5, 6, 0x7f0000000000, 0,
        6, 6, 0x7f0000001000, (uint64_t)(int64_t)-ENOENT,
        M8, M4, M8, 32767,
        7, 1, 4096, (uint64_t)(int64_t)-32768,
    };
    write_table(dir, "page_nodes", cols, 4, rows, 4);
}

static void mappings(const char *dir)
{
    static const struct nmp_coldef cols[] = {
        {"time", NMP_U64}, {"pid", NMP_U32}, {"start", NMP_U64}, {"len", NMP_U64},
        {"pgoff", NMP_U64}, {"prot", NMP_U32}, {"flags", NMP_U32}, {"path", NMP_STR},
    };
    const uint64_t rows[] = {
        100, 7, 0x7f1234560000, 0x1c3000, 0x28000, 5, 2, S("/usr/lib/x86_64-linux-gnu/libc.so.6"),
        101, 7, 0x7f0000000000, 0x100000, 0, 3, 0x22, S(""),
        102, 7, 0x7ffc00000000, 0x21000, 0, 3, 0x22, S("[stack]"),
        M8, M4, M8, M8, M8, M4, M4, S("/tmp/dir with spaces/\xc3\xbc.so"),
        0, 0, 0, 0, 0, 0, 0, S(long_path),
    };
    write_table(dir, "mappings", cols, 8, rows, 5);
}

static void threads(const char *dir)
{
    static const struct nmp_coldef cols[] = {
        {"pid", NMP_U32}, {"tid", NMP_U32}, {"ppid", NMP_U32}, {"start_time", NMP_U64},
        {"end_time", NMP_U64}, {"comm", NMP_STR}, {"affinity_first", NMP_STR},
        {"affinity_last", NMP_STR}, {"samples", NMP_U64},
    };
    const uint64_t rows[] = {
        100, 101, 1, 123456789, 0, S("worker-1"), S("0-3,8"), S("2"), 42,
        M4, M4, M4, M8, M8, S(""), S(""), S("0-1023"), M8,
    };
    write_table(dir, "threads", cols, 9, rows, 2);
}

static void counters(const char *dir)
{
    struct nmp_table *t = nmp_counters_open(dir);
    CHECK(t != NULL);
    if (!t)
        return;
    const uint64_t rows[] = {
        1, 0, (uint64_t)(int64_t)-1, S("vmstat.numa_hit"), 12345,
        2, 1, 0, S("numastat.numa_miss"), M8,
        3, 2, 32767, S("x"), 0,
        4, 0, (uint64_t)(int64_t)-32768, S(""), 1,
    };
    for (int r = 0; r < 4; r++)
        CHECK(nmp_table_append(t, rows + r * 5) == 0);
    CHECK(nmp_table_close(t) == 0);
}

/* objects + stack_frames through nmp_shim_convert, from the shim file of pid 2^32-1 */
static void objects(const char *dir)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/shim.4294967295.bin", dir);
    FILE *f = fopen(path, "wb");
    CHECK(f != NULL);
    if (!f)
        return;
    static char page[NMP_SHIM_HEADER_SIZE];
    struct nmp_shim_header h = {{0}, NMP_SHIM_VERSION, sizeof(struct nmp_shim_record),
                                NMP_SHIM_HEADER_SIZE, 0, 0};
    memcpy(h.magic, NMP_SHIM_MAGIC, 8);
    memcpy(page, &h, sizeof h);
    fwrite(page, sizeof page, 1, f);
    struct nmp_shim_record r[5];
    memset(r, 0, sizeof r);
    r[0].type = NMP_SHIM_START;
    r[0].time = 1;
    /* max widths; freed at the latest possible time */
    r[1].type = NMP_SHIM_ALLOC;
    r[1].tid = M4;
    r[1].time = 2;
    r[1].addr = 0xfffffffffffff000;
    r[1].size = M8;
    r[1].kind = NMP_KIND_MALLOC;
    r[1].nframes = 3;
    r[1].frames[0] = M8;
    r[1].frames[1] = 1;
    r[1].frames[2] = 0x7fffffffffff;
    r[2].type = NMP_SHIM_FREE;
    r[2].time = M8 - 1;
    r[2].addr = 0xfffffffffffff000;
    r[2].kind = 1;
    /* a realloc with a full stack, never freed */
    r[3].type = NMP_SHIM_ALLOC;
    r[3].tid = 0x01020304;
    r[3].time = 0x0102030405060708;
    r[3].addr = 0x1122334455667788;
    r[3].size = 0x0807060504030201;
    r[3].kind = NMP_KIND_REALLOC;
    r[3].prev = 0xfffffffffffff000;
    r[3].nframes = NMP_SHIM_MAX_FRAMES;
    for (int i = 0; i < NMP_SHIM_MAX_FRAMES; i++)
        r[3].frames[i] = 0x400000 + 0x10 * (uint64_t)i;
    /* an mmap without a stack */
    r[4].type = NMP_SHIM_ALLOC;
    r[4].tid = 9;
    r[4].time = 3;
    r[4].addr = 0x7f0000000000;
    r[4].size = 65536;
    r[4].kind = NMP_KIND_MMAP;
    fwrite(r, sizeof r[0], 5, f);
    CHECK(fclose(f) == 0);
    struct nmp_shim_totals tot;
    char err[NMP_ERRLEN];
    CHECK(nmp_shim_convert(dir, &tot, err) == 0);
    CHECK(tot.tracked_allocs == 3 && tot.processes == 1);
}

static long file_size(const char *dir, const char *name)
{
    char path[4400];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    struct stat st;
    if (stat(path, &st) != 0)
        return -1;
    CHECK((st.st_mode & 0777) == 0600);
    return (long)st.st_size;
}

/* Every column file holds 16 + rows * width bytes. */
static void check_sizes(const char *dir)
{
    static const struct { const char *table; int rows; const char *cols; } tabs[] = {
        {"samples", 3, "time8 pid4 tid4 cpu2 ip8 addr8 access1 size1 rule1 weight4 data_src8 phys_addr8"},
        {"faults", 2, "time8 pid4 tid4 cpu2 ip8 addr8 flags1 source1"},
        {"page_nodes", 4, "time8 pid4 page8 node2"},
        {"mappings", 5, "time8 pid4 start8 len8 pgoff8 prot4 flags4 path8"},
        {"threads", 2, "pid4 tid4 ppid4 start_time8 end_time8 comm8 affinity_first8 affinity_last8 samples8"},
        {"counters", 4, "time8 phase1 node2 name8 value8"},
        {"objects", 3, "time8 free_time8 pid4 tid4 addr8 size8 kind1 stack4 prev8"},
        {"stack_frames", 3 + NMP_SHIM_MAX_FRAMES, "stack4 depth2 ip8"},
    };
    for (size_t t = 0; t < sizeof tabs / sizeof tabs[0]; t++) {
        char cols[256];
        snprintf(cols, sizeof cols, "%s", tabs[t].cols);
        for (char *tok = strtok(cols, " "); tok; tok = strtok(NULL, " ")) {
            size_t len = strlen(tok);
            int width = tok[len - 1] - '0';
            tok[len - 1] = 0;
            char name[128];
            snprintf(name, sizeof name, "%s.%s.col", tabs[t].table, tok);
            long size = file_size(dir, name);
            if (size != 16 + (long)tabs[t].rows * width)
                fprintf(stderr, "%s: %ld bytes\n", name, size);
            CHECK(size == 16 + (long)tabs[t].rows * width);
        }
    }
    CHECK(file_size(dir, "mappings.path.heap") ==
          (long)(strlen("/usr/lib/x86_64-linux-gnu/libc.so.6") + 1 + 1 + strlen("[stack]") + 1 +
                 strlen("/tmp/dir with spaces/\xc3\xbc.so") + 1 + 3000 + 1));
    CHECK(file_size(dir, "shim.4294967295.bin") < 0); /* converted and removed */
}

int main(int argc, char **argv)
{
    char dir[4096];
    if (argc > 1) {
        snprintf(dir, sizeof dir, "%s", argv[1]);
    } else {
        const char *tmp = getenv("NMP_TEST_TMP");
        snprintf(dir, sizeof dir, "%s/roundtrip", tmp ? tmp : "/tmp");
    }
    char cmd[8400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s' && mkdir -p -m 700 '%s'", dir, dir);
    if (system(cmd) != 0)
        return 1;
    memset(long_path, 'a', 3000);
    long_path[0] = '/';
    samples(dir);
    faults(dir);
    page_nodes(dir);
    mappings(dir);
    threads(dir);
    counters(dir);
    objects(dir);
    check_sizes(dir);
    return check_result();
}
