/* Round trip of the on-disk format: writes every table of numaprof_format.h
 * (docs/profile-format.md) through the collector's own table definitions, with
 * distinctive values -- byte patterns that expose a wrong width or byte order, the maximum of every width, negative node ids, empty, long and
 * non-ASCII strings -- into argv[1] (default $NMP_TEST_TMP/roundtrip).
 * tests/test_roundtrip.py reads them back field by field with numpy; the expected
 * values there are the ones written here.  objects/stack_frames go through the real
 * converter (hand-made shim records) and counters through nmp_counters_open's columns.
 * Run alone (ctest), it checks that every column file has the size its rows imply.
 */
#include "nmp_collect.h"
#include "nmp_schema.h"
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

#define W 32 /* values in a row: at least the widest table's columns */

/* Writes `nrows` rows of table `id` through the collector's own table definitions
 * (nmp_schema.h, generated from numaprof_format.h): no copy of the column lists here. */
static void write_table(const char *dir, enum nmp_table_id id, const uint64_t (*rows)[W],
                        int nrows)
{
    CHECK(nmp_schema[id].ncols <= W);
    struct nmp_table *t = nmp_table_open(dir, id, -1);
    CHECK(t != NULL);
    if (!t)
        return;
    for (int r = 0; r < nrows; r++)
        CHECK(nmp_table_append(t, rows[r]) == 0);
    CHECK(nmp_table_rows(t) == (uint64_t)nrows);
    CHECK(nmp_table_close(t) == 0);
}

#define SAMPLE(t, p, ti, c, i, a, ac, sz, ru, w, ds, pa, sp, bp, bs, io, br, ir, bo)            \
    {[NMP_samples_time] = t, [NMP_samples_pid] = p, [NMP_samples_tid] = ti,                    \
     [NMP_samples_cpu] = c, [NMP_samples_ip] = i, [NMP_samples_addr] = a,                      \
     [NMP_samples_access] = ac, [NMP_samples_size] = sz, [NMP_samples_rule] = ru,              \
     [NMP_samples_weight] = w, [NMP_samples_data_src] = ds, [NMP_samples_phys_addr] = pa,      \
     [NMP_samples_sp] = sp, [NMP_samples_bp] = bp, [NMP_samples_bp_sp] = (uint64_t)(int64_t)(bs), \
     [NMP_samples_insn_off] = (uint64_t)(int64_t)(io), [NMP_samples_base_reg] = br,            \
     [NMP_samples_index_reg] = ir, [NMP_samples_base_off] = (uint64_t)(int64_t)(bo)}

static void samples(const char *dir)
{
    const uint64_t rows[][W] = {
        SAMPLE(1, 2, 3, 4, 0x401000, 0x7ffd0000, NMP_ACC_LOAD, 8, NMP_RULE_AT_IP, 30, 0x68100142,
               0x1234000, 0x7ffd0010, 0x7ffd0040, 0x30, 0, 8, 1, -16),
        SAMPLE(M8, M4, M4, 0xffff, M8, M8, NMP_ACC_RMW, 0xff, NMP_RULE_CLOBBERED, M4, M8, M8, M8,
               M8, INT32_MIN, INT16_MIN, 0xff, 0xff, INT32_MIN),
        SAMPLE(0x0102030405060708, 0x01020304, 0x05060708, 0x0102, 0x1122334455667788,
               0x8877665544332211, NMP_ACC_STORE, 64, NMP_RULE_SKID, 0x01020304,
               0x0807060504030201, 0xdeadbeefcafef00d, 0x0102030405060708, 0x1020304050607080,
               INT32_MAX, INT16_MAX, 16, 0, INT32_MAX),
    };
    write_table(dir, NMP_TABLE_ID_samples, rows, 3);
}

#define FAULT(t, p, ti, c, i, a, fl, so, ps, r, st, sp)                                         \
    {[NMP_faults_time] = t, [NMP_faults_pid] = p, [NMP_faults_tid] = ti, [NMP_faults_cpu] = c, \
     [NMP_faults_ip] = i, [NMP_faults_addr] = a, [NMP_faults_flags] = fl,                      \
     [NMP_faults_source] = so, [NMP_faults_page_size] = ps, [NMP_faults_run] = r,              \
     [NMP_faults_stride] = st, [NMP_faults_span] = sp}

static void faults(const char *dir)
{
    const uint64_t rows[][W] = {
        FAULT(10, 11, 12, 1, 0x401234, 0x7f0000001000, 3, 1, 4096, 1, 0, 0),
        FAULT(M8, M4, M4, 0xffff, M8, M8, 0xff, 2, M4, M4, M4, M4),
    };
    write_table(dir, NMP_TABLE_ID_faults, rows, 2);
}

#define PAGE(t, p, pg, n)                                                                       \
    {[NMP_page_nodes_time] = t, [NMP_page_nodes_pid] = p, [NMP_page_nodes_page] = pg,          \
     [NMP_page_nodes_node] = (uint64_t)(int64_t)(n)}

static void page_nodes(const char *dir)
{
    const uint64_t rows[][W] = {
        PAGE(5, 6, 0x7f0000000000, 0),
        PAGE(6, 6, 0x7f0000001000, -ENOENT),
        PAGE(M8, M4, M8, 32767),
        PAGE(7, 1, 4096, -32768),
    };
    write_table(dir, NMP_TABLE_ID_page_nodes, rows, 4);
}

#define MAPPING(t, p, st, l, o, pr, fl, pa)                                                     \
    {[NMP_mappings_time] = t, [NMP_mappings_pid] = p, [NMP_mappings_start] = st,               \
     [NMP_mappings_len] = l, [NMP_mappings_pgoff] = o, [NMP_mappings_prot] = pr,               \
     [NMP_mappings_flags] = fl, [NMP_mappings_path] = S(pa)}

static void mappings(const char *dir)
{
    const uint64_t rows[][W] = {
        MAPPING(100, 7, 0x7f1234560000, 0x1c3000, 0x28000, 5, 2,
                "/usr/lib/x86_64-linux-gnu/libc.so.6"),
        MAPPING(101, 7, 0x7f0000000000, 0x100000, 0, 3, 0x22, ""),
        MAPPING(102, 7, 0x7ffc00000000, 0x21000, 0, 3, 0x22, "[stack]"),
        MAPPING(M8, M4, M8, M8, M8, M4, M4, "/tmp/dir with spaces/\xc3\xbc.so"),
        MAPPING(0, 0, 0, 0, 0, 0, 0, long_path),
    };
    write_table(dir, NMP_TABLE_ID_mappings, rows, 5);
}

#define THREAD(p, t, pp, st, en, co, af, al, sa, tp)                                            \
    {[NMP_threads_pid] = p, [NMP_threads_tid] = t, [NMP_threads_ppid] = pp,                    \
     [NMP_threads_start_time] = st, [NMP_threads_end_time] = en, [NMP_threads_comm] = S(co),   \
     [NMP_threads_affinity_first] = S(af), [NMP_threads_affinity_last] = S(al),               \
     [NMP_threads_samples] = sa, [NMP_threads_tls_base] = tp}

static void threads(const char *dir)
{
    const uint64_t rows[][W] = {
        THREAD(100, 101, 1, 123456789, 0, "worker-1", "0-3,8", "2", 42, 0x7f0012345640),
        THREAD(M4, M4, M4, M8, M8, "", "", "0-1023", M8, M8),
    };
    write_table(dir, NMP_TABLE_ID_threads, rows, 2);
}

static void tls_modules(const char *dir)
{
    const uint64_t rows[][W] = {
        {[NMP_tls_modules_pid] = 100, [NMP_tls_modules_base] = 0x7f0012000000,
         [NMP_tls_modules_offset] = 0x1040},
        {[NMP_tls_modules_pid] = M4, [NMP_tls_modules_base] = M8, [NMP_tls_modules_offset] = M8},
    };
    write_table(dir, NMP_TABLE_ID_tls_modules, rows, 2);
}

static void counters(const char *dir)
{
    struct nmp_table *t = nmp_counters_open(dir);
    CHECK(t != NULL);
    if (!t)
        return;
#define COUNTER(ti, ph, n, na, v)                                                              \
    {[NMP_counters_time] = ti, [NMP_counters_phase] = ph,                                     \
     [NMP_counters_node] = (uint64_t)(int64_t)(n), [NMP_counters_name] = S(na),               \
     [NMP_counters_value] = v}
    const uint64_t rows[][NMP_counters_NCOLS] = {
        COUNTER(1, 0, -1, "vmstat.numa_hit", 12345),
        COUNTER(2, 1, 0, "numastat.numa_miss", M8),
        COUNTER(3, 2, 32767, "x", 0),
        COUNTER(4, 0, -32768, "", 1),
    };
    for (int r = 0; r < 4; r++)
        CHECK(nmp_table_append(t, rows[r]) == 0);
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
    struct nmp_shim_record r[7];
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
    /* a realloc with a full stack, never freed, recorded as a sampled small allocation
     * (the widest period) */
    r[3].type = NMP_SHIM_ALLOC;
    r[3].flags = NMP_SHIM_F_SAMPLED;
    r[3].period = M4;
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
    /* where the pages of the mmap were at exit: the widest node and count, not present */
    r[5].type = NMP_SHIM_PAGES;
    r[5].time = M8;
    r[5].addr = 0xfffffffffffff001;
    r[5].size = M8;
    r[5].prev = M8;
    r[5].kind = NMP_PAGES_AT_EXIT;
    r[5].flags = 0xff | NMP_PAGES_F_MIXED;
    r[5].nframes = 2;
    r[5].frames[0] = NMP_PAGES_ENTRY(32766, 255, (1ULL << 40) - 1);
    r[5].frames[1] = NMP_PAGES_ENTRY(-1, 0, 0);
    /* a summary of short-lived blocks: the most blocks, the widest range and lifetime */
    r[6].type = NMP_SHIM_SHORT;
    r[6].tid = 7;
    r[6].time = 4;
    r[6].end = M8 - 2;
    r[6].addr = 0x10000;
    r[6].prev = M8;
    r[6].size = 0x20000;
    r[6].period = M4;
    r[6].extra = M8;
    r[6].kind = NMP_KIND_CALLOC;
    r[6].nframes = 1;
    r[6].frames[0] = 0x400abc;
    fwrite(r, sizeof r[0], 7, f);
    CHECK(fclose(f) == 0);
    struct nmp_shim_totals tot;
    char err[NMP_ERRLEN];
    CHECK(nmp_shim_convert(dir, &tot, err) == 0);
    CHECK(tot.tracked_allocs == 2 && tot.sampled_allocs == 1 && tot.processes == 1);
    CHECK(tot.short_lived_allocs == M4);
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

static int width_of(enum nmp_coltype t)
{
    switch (t) {
    case NMP_U8: return 1;
    case NMP_U16: case NMP_I16: return 2;
    case NMP_U32: case NMP_I32: return 4;
    default: return 8;
    }
}

/* Every column file of every table of the format holds 16 + rows * width bytes. */
static void check_sizes(const char *dir)
{
    static const int rows[NMP_NTABLES] = {
        [NMP_TABLE_ID_samples] = 3, [NMP_TABLE_ID_faults] = 2, [NMP_TABLE_ID_page_nodes] = 4,
        [NMP_TABLE_ID_mappings] = 5, [NMP_TABLE_ID_threads] = 2, [NMP_TABLE_ID_counters] = 4,
        [NMP_TABLE_ID_objects] = 4, [NMP_TABLE_ID_stack_frames] = 3 + NMP_SHIM_MAX_FRAMES + 1,
        [NMP_TABLE_ID_object_pages] = 2, [NMP_TABLE_ID_tls_modules] = 2,
    };
    for (int t = 0; t < NMP_NTABLES; t++) {
        CHECK(rows[t] > 0); /* a table of the format that this test does not write */
        for (int i = 0; i < nmp_schema[t].ncols; i++) {
            char name[128];
            snprintf(name, sizeof name, "%s.%s.col", nmp_schema[t].name, nmp_schema[t].cols[i].name);
            long size = file_size(dir, name);
            long want = NMP_COL_HEADER + (long)rows[t] * width_of(nmp_schema[t].cols[i].type);
            if (size != want)
                fprintf(stderr, "%s: %ld bytes, expected %ld\n", name, size, want);
            CHECK(size == want);
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
    tls_modules(dir);
    counters(dir);
    objects(dir);
    check_sizes(dir);
    return check_result();
}
