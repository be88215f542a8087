/* The columnar table writer (nmp_table.h): headers, string heaps, NULL strings, a table
 * with no rows, and the failures a recording can meet -- a directory that does not exist
 * and a full disk (column files that are /dev/full). */
#include "nmp_table.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "nmp_check.h"


static char dir[2048];

static long slurp(const char *name, unsigned char *buf, size_t len)
{
    char path[2200];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "rb");
    if (!f)
        return -1;
    long n = (long)fread(buf, 1, len, f);
    fclose(f);
    return n;
}

static void fresh(const char *name)
{
    check_fresh_dir(dir, sizeof dir, name);
}

static const struct nmp_coldef cols[] = {
    {"a", NMP_U8}, {"b", NMP_I16}, {"c", NMP_I32}, {"d", NMP_I64}, {"s", NMP_STR},
};

static void test_layout(void)
{
    fresh("table_layout");
    struct nmp_table *t = nmp_table_create(dir, "t", cols, 5);
    CHECK(t != NULL);
    if (!t)
        return;
    uint64_t r0[5] = {0x1ff, (uint64_t)(int64_t)-2, (uint64_t)(int64_t)INT32_MIN,
                      (uint64_t)INT64_MIN, (uint64_t)(uintptr_t) "abc"};
    uint64_t r1[5] = {7, 0x7fff, 0x7fffffff, (uint64_t)INT64_MAX, 0}; /* NULL string: "" */
    uint64_t r2[5] = {0, 0, 0, 0, (uint64_t)(uintptr_t) "z"};
    CHECK(nmp_table_append(t, r0) == 0);
    CHECK(nmp_table_append(t, r1) == 0);
    CHECK(nmp_table_flush(t) == 0);
    CHECK(nmp_table_append(t, r2) == 0);
    CHECK(nmp_table_rows(t) == 3);
    CHECK(nmp_table_close(t) == 0);

    unsigned char buf[256];
    CHECK(slurp("t.a.col", buf, sizeof buf) == 16 + 3);
    CHECK(memcmp(buf, "NMPCOL01|u1\0\0\0\0\0", 16) == 0);
    CHECK(buf[16] == 0xff && buf[17] == 7 && buf[18] == 0); /* truncated to the width */
    CHECK(slurp("t.b.col", buf, sizeof buf) == 16 + 6);
    CHECK(memcmp(buf + 8, "<i2\0\0\0\0\0", 8) == 0);
    int16_t b[3];
    memcpy(b, buf + 16, sizeof b);
    CHECK(b[0] == -2 && b[1] == 0x7fff && b[2] == 0);
    CHECK(slurp("t.c.col", buf, sizeof buf) == 16 + 12);
    CHECK(memcmp(buf + 8, "<i4\0\0\0\0\0", 8) == 0);
    int32_t c[3];
    memcpy(c, buf + 16, sizeof c);
    CHECK(c[0] == INT32_MIN && c[1] == 0x7fffffff);
    CHECK(slurp("t.d.col", buf, sizeof buf) == 16 + 24);
    CHECK(memcmp(buf + 8, "<i8\0\0\0\0\0", 8) == 0);
    int64_t d[3];
    memcpy(d, buf + 16, sizeof d);
    CHECK(d[0] == INT64_MIN && d[1] == INT64_MAX);
    CHECK(slurp("t.s.col", buf, sizeof buf) == 16 + 24);
    CHECK(memcmp(buf + 8, "<u8\0\0\0\0\0", 8) == 0);
    uint64_t s[3];
    memcpy(s, buf + 16, sizeof s);
    CHECK(s[0] == 0 && s[1] == 4 && s[2] == 5);
    CHECK(slurp("t.s.heap", buf, sizeof buf) == 7);
    CHECK(memcmp(buf, "abc\0\0z\0", 7) == 0);
    char path[2200];
    snprintf(path, sizeof path, "%s/t.s.heap", dir);
    struct stat st;
    CHECK(stat(path, &st) == 0 && (st.st_mode & 0777) == 0600);

    /* a table without rows is just headers */
    t = nmp_table_create(dir, "empty", cols, 1);
    CHECK(t && nmp_table_close(t) == 0);
    CHECK(slurp("empty.a.col", buf, sizeof buf) == 16);
}

/* A table writing some columns of wider rows (nmp_table_open with a column mask: the
 * software backend leaves out the hardware backends' columns and the reverse). */
static void test_slots(void)
{
    fresh("table_slots");
    static const struct nmp_coldef some[] = {{"b", NMP_I16}, {"d", NMP_I64}};
    static const int slots[] = {1, 3};
    struct nmp_table *t = nmp_table_create_slots(dir, "t", some, slots, 2);
    CHECK(t != NULL);
    if (!t)
        return;
    uint64_t r0[5] = {0xaa, (uint64_t)(int64_t)-7, 0xcc, 42, 0};
    CHECK(nmp_table_append(t, r0) == 0);
    CHECK(nmp_table_close(t) == 0);
    unsigned char buf[64];
    CHECK(slurp("t.a.col", buf, sizeof buf) < 0 && slurp("t.c.col", buf, sizeof buf) < 0);
    CHECK(slurp("t.b.col", buf, sizeof buf) == 16 + 2);
    int16_t b;
    memcpy(&b, buf + 16, sizeof b);
    CHECK(b == -7);
    CHECK(slurp("t.d.col", buf, sizeof buf) == 16 + 8);
    int64_t d;
    memcpy(&d, buf + 16, sizeof d);
    CHECK(d == 42);
}

static void test_failures(void)
{
    errno = 0;
    CHECK(nmp_table_create("/nonexistent/dir", "t", cols, 5) == NULL && errno == ENOENT);

    /* a full disk: every write fails; the writer says so instead of losing rows quietly */
    fresh("table_full");
    char path[2200];
    snprintf(path, sizeof path, "%s/t.a.col", dir);
    if (symlink("/dev/full", path) != 0 || access("/dev/full", W_OK) != 0) {
        fprintf(stderr, "no /dev/full: full-disk case skipped\n");
        return;
    }
    struct nmp_table *t = nmp_table_create(dir, "t", cols, 1);
    if (t) {
        uint64_t row[1] = {1};
        int rc = 0;
        /* stdio buffers: the failure shows at the latest when the buffer is flushed */
        for (int i = 0; i < 10000 && rc == 0; i++)
            rc = nmp_table_append(t, row);
        CHECK(rc < 0 || nmp_table_flush(t) < 0);
        CHECK(nmp_table_close(t) < 0);
    } else {
        CHECK(errno == ENOSPC); /* the header write already failed */
    }
}

int main(void)
{
    test_layout();
    test_slots();
    test_failures();
    return check_result();
}
