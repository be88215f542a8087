/* Columnar profile tables (docs/profile-format.md).
 *
 * A table is a set of column files <dir>/<table>.<column>.col, each a 16-byte header
 * ("NMPCOL01" then an 8-byte NUL-padded numpy dtype string such as "<u8") followed by
 * little-endian values.  String columns ("str") hold u64 offsets into
 * <dir>/<table>.<column>.heap, a blob of NUL-terminated strings.  Rows are appended
 * through a buffer; a table cut short by a crash is still readable (the reader takes the
 * shortest column).  Files are created 0600.
 */
#ifndef NMP_TABLE_H
#define NMP_TABLE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "numaprof_format.h" /* NMP_COL_MAGIC, NMP_COL_HEADER */

enum nmp_coltype { NMP_U8, NMP_U16, NMP_U32, NMP_U64, NMP_I16, NMP_I32, NMP_I64, NMP_STR };

struct nmp_coldef {
    const char *name;
    enum nmp_coltype type;
};

struct nmp_table;

/* Creates the column files; returns NULL with errno set on failure. */
struct nmp_table *nmp_table_create(const char *dir, const char *table,
                                   const struct nmp_coldef *cols, int ncols);
/* As nmp_table_create, but the value of column i is values[slots[i]] in the rows given
 * to nmp_table_append (a table that writes some of a wider row's columns); slots NULL:
 * column i is values[i]. */
struct nmp_table *nmp_table_create_slots(const char *dir, const char *table,
                                         const struct nmp_coldef *cols, const int *slots,
                                         int ncols);
/* Appends one row: values[i] holds column i (integers as uint64_t bits, strings as
 * (uintptr_t)const char *).  Returns 0, or -1 with errno on a write error. */
int nmp_table_append(struct nmp_table *t, const uint64_t *values);
uint64_t nmp_table_rows(const struct nmp_table *t);
int nmp_table_flush(struct nmp_table *t);
/* Flushes and closes; returns -1 if any write failed during the table's life. */
int nmp_table_close(struct nmp_table *t);

#endif
