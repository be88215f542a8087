/* The profile's tables and sample rules as the collector writes them, generated from
 * numaprof_format.h (the one definition of the format, which the Python reader reads too).
 *
 * For each table T: the column indexes NMP_T_<column> (positions in the row given to
 * nmp_table_append) and NMP_T_NCOLS, its id NMP_TABLE_ID_T in nmp_schema[].  A row is
 * best built with designated initialisers, so that it names its columns:
 *     uint64_t v[NMP_samples_NCOLS] = {[NMP_samples_time] = t, [NMP_samples_addr] = a};
 */
#ifndef NMP_SCHEMA_H
#define NMP_SCHEMA_H

#include <stdint.h>

#include "nmp_table.h"
#include "numaprof_format.h"

#define NMP_SCHEMA_COL_INDEX_(table, name, type, req) NMP_##table##_##name,
#define NMP_SCHEMA_TABLE_ENUM_(table) enum { NMP_TABLE_##table(NMP_SCHEMA_COL_INDEX_) NMP_##table##_NCOLS };
NMP_TABLES(NMP_SCHEMA_TABLE_ENUM_)

#define NMP_SCHEMA_TABLE_ID_(table) NMP_TABLE_ID_##table,
enum nmp_table_id { NMP_TABLES(NMP_SCHEMA_TABLE_ID_) NMP_NTABLES };

struct nmp_table_schema {
    const char *name;
    const struct nmp_coldef *cols;
    const unsigned char *required; /* per column: a reader refuses a profile without it */
    int ncols;
};

/* Every table of the format, in the order of NMP_TABLES. */
extern const struct nmp_table_schema nmp_schema[NMP_NTABLES];

/* Creates table `id` in `dir` with the columns whose bits are set in `cols` (bit k:
 * column k, NMP_<table>_<column>; NMP_ALL_COLUMNS or -1: all of them).  Rows given to
 * nmp_table_append are full-width (NMP_<table>_NCOLS values); the columns left out are
 * not written, and a reader takes them as zeros when they are optional.
 * Returns NULL with errno set on failure, as nmp_table_create. */
#define NMP_ALL_COLUMNS (~(uint64_t)0)
#define NMP_COLUMN(k) ((uint64_t)1 << (k))
struct nmp_table *nmp_table_open(const char *dir, enum nmp_table_id id, uint64_t cols);

/* The numpy dtype string of a column type ("<u8", "|u1", ...). */
const char *nmp_coltype_dtype(enum nmp_coltype t);

/* The sample rules NMP_RULE_<ENUM> (values of samples.rule), from NMP_SAMPLE_RULES. */
#define NMP_SCHEMA_RULE_ENUM_(id, name, value) NMP_RULE_##id = value,
enum nmp_rule { NMP_SAMPLE_RULES(NMP_SCHEMA_RULE_ENUM_) };
/* samples.rule is a u8: counts per rule are kept for every value it can hold */
#define NMP_RULE_LIMIT 256

#endif
