/* Columnar table writer: see nmp_table.h. */
#include "nmp_schema.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Values go into the column's own buffer and reach the (unbuffered) FILE a buffer at a
 * time: one fwrite per value cost more than the collector's whole sample handling. */
#define NMP_COL_BUF 65536

struct nmp_col {
    FILE *f;
    FILE *heap; /* string columns only */
    uint64_t heap_off;
    enum nmp_coltype type;
    int slot;   /* index of the column's value in the rows given to nmp_table_append */
    size_t len; /* bytes in buf */
    unsigned char buf[NMP_COL_BUF];
};

struct nmp_table {
    int ncols;
    int failed; /* errno of the first failed write, or 0 */
    uint64_t rows;
    struct nmp_col cols[];
};

const char *nmp_coltype_dtype(enum nmp_coltype t)
{
    switch (t) {
    case NMP_U8: return "|u1";
    case NMP_U16: return "<u2";
    case NMP_U32: return "<u4";
    case NMP_U64: return "<u8";
    case NMP_I16: return "<i2";
    case NMP_I32: return "<i4";
    case NMP_I64: return "<i8";
    case NMP_STR: return "<u8";
    }
    return "<u8";
}

static size_t size_of(enum nmp_coltype t)
{
    switch (t) {
    case NMP_U8: return 1;
    case NMP_U16: case NMP_I16: return 2;
    case NMP_U32: case NMP_I32: return 4;
    default: return 8;
    }
}

static FILE *open_0600(const char *dir, const char *table, const char *col, const char *ext)
{
    char path[4096];
    int n = snprintf(path, sizeof path, "%s/%s.%s.%s", dir, table, col, ext);
    if (n < 0 || (size_t)n >= sizeof path) {
        errno = ENAMETOOLONG;
        return NULL;
    }
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0)
        return NULL;
    FILE *f = fdopen(fd, "wb");
    if (!f)
        close(fd);
    return f;
}

static FILE *open_col(const char *dir, const char *table, const char *col)
{
    FILE *f = open_0600(dir, table, col, "col");
    if (f)
        setvbuf(f, NULL, _IONBF, 0); /* buffered in struct nmp_col */
    return f;
}

struct nmp_table *nmp_table_create(const char *dir, const char *table,
                                   const struct nmp_coldef *cols, int ncols)
{
    return nmp_table_create_slots(dir, table, cols, NULL, ncols);
}

struct nmp_table *nmp_table_create_slots(const char *dir, const char *table,
                                         const struct nmp_coldef *cols, const int *slots,
                                         int ncols)
{
    struct nmp_table *t = calloc(1, sizeof *t + (size_t)ncols * sizeof t->cols[0]);
    if (!t)
        return NULL;
    t->ncols = ncols;
    for (int i = 0; i < ncols; i++) {
        struct nmp_col *c = &t->cols[i];
        c->type = cols[i].type;
        c->slot = slots ? slots[i] : i;
        c->f = open_col(dir, table, cols[i].name);
        if (!c->f)
            goto fail;
        char header[NMP_COL_HEADER] = {0};
        memcpy(header, NMP_COL_MAGIC, 8);
        strncpy(header + 8, nmp_coltype_dtype(c->type), 7);
        if (fwrite(header, 1, sizeof header, c->f) != sizeof header)
            goto fail;
        if (c->type == NMP_STR) {
            c->heap = open_0600(dir, table, cols[i].name, "heap");
            if (!c->heap)
                goto fail;
        }
    }
    return t;
fail: {
    int saved = errno;
    nmp_table_close(t);
    errno = saved;
    return NULL;
}
}

/* Keeps the first error: later ones are usually its consequences. */
static void failed_with(struct nmp_table *t)
{
    if (!t->failed)
        t->failed = errno ? errno : EIO;
}

static void flush_col(struct nmp_table *t, struct nmp_col *c)
{
    if (c->len && c->f && fwrite(c->buf, 1, c->len, c->f) != c->len)
        failed_with(t);
    c->len = 0;
}

int nmp_table_append(struct nmp_table *t, const uint64_t *values)
{
    for (int i = 0; i < t->ncols; i++) {
        struct nmp_col *c = &t->cols[i];
        uint64_t v = values[c->slot];
        if (c->type == NMP_STR) {
            const char *s = (const char *)(uintptr_t)v;
            size_t len = s ? strlen(s) : 0;
            v = c->heap_off;
            if (fwrite(s ? s : "", 1, len + 1, c->heap) != len + 1)
                failed_with(t);
            c->heap_off += len + 1;
        }
        /* x86-64 is little-endian: the low bytes of v are the value */
        size_t n = size_of(c->type);
        if (c->len + n > sizeof c->buf)
            flush_col(t, c);
        memcpy(c->buf + c->len, &v, n);
        c->len += n;
    }
    t->rows++;
    if (t->failed) {
        errno = t->failed;
        return -1;
    }
    return 0;
}

uint64_t nmp_table_rows(const struct nmp_table *t) { return t->rows; }

int nmp_table_flush(struct nmp_table *t)
{
    for (int i = 0; i < t->ncols; i++) {
        /* the strings before their offsets: a collector killed between the two leaves no
         * offset beyond its heap */
        if (t->cols[i].heap && fflush(t->cols[i].heap))
            failed_with(t);
        flush_col(t, &t->cols[i]);
        if (t->cols[i].f && fflush(t->cols[i].f))
            failed_with(t);
    }
    if (t->failed) {
        errno = t->failed;
        return -1;
    }
    return 0;
}

int nmp_table_close(struct nmp_table *t)
{
    if (!t)
        return 0;
    for (int i = 0; i < t->ncols; i++) {
        if (t->cols[i].heap && fclose(t->cols[i].heap))
            failed_with(t);
        flush_col(t, &t->cols[i]);
        if (t->cols[i].f && fclose(t->cols[i].f))
            failed_with(t);
    }
    int failed = t->failed;
    free(t);
    if (failed) {
        errno = failed;
        return -1;
    }
    return 0;
}
