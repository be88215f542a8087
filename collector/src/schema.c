/* The column tables of numaprof_format.h as data: see nmp_schema.h. */
#include "nmp_schema.h"

#include <errno.h>

#define NMP_SCHEMA_REQ_REQ 1
#define NMP_SCHEMA_REQ_OPT 0
#define NMP_SCHEMA_COLDEF_(table, name, type, req) {#name, NMP_##type},
#define NMP_SCHEMA_REQUIRED_(table, name, type, req) NMP_SCHEMA_REQ_##req,
#define NMP_SCHEMA_COLS_(table) \
    static const struct nmp_coldef table##_cols[] = {NMP_TABLE_##table(NMP_SCHEMA_COLDEF_)}; \
    static const unsigned char table##_required[] = {NMP_TABLE_##table(NMP_SCHEMA_REQUIRED_)};
NMP_TABLES(NMP_SCHEMA_COLS_)

/* a table's columns are chosen by a 64-bit mask (nmp_table_open) */
#define NMP_SCHEMA_WIDTH_(table) \
    _Static_assert(NMP_##table##_NCOLS <= 64, #table " has more than 64 columns");
NMP_TABLES(NMP_SCHEMA_WIDTH_)

#define NMP_SCHEMA_ENTRY_(table) {#table, table##_cols, table##_required, NMP_##table##_NCOLS},
const struct nmp_table_schema nmp_schema[NMP_NTABLES] = {NMP_TABLES(NMP_SCHEMA_ENTRY_)};

struct nmp_table *nmp_table_open(const char *dir, enum nmp_table_id id, uint64_t cols)
{
    if ((int)id < 0 || id >= NMP_NTABLES) {
        errno = EINVAL;
        return NULL;
    }
    const struct nmp_table_schema *s = &nmp_schema[id];
    struct nmp_coldef defs[64];
    int slots[64], n = 0;
    for (int k = 0; k < s->ncols && k < 64; k++) {
        if (!(cols & NMP_COLUMN(k)))
            continue;
        defs[n] = s->cols[k];
        slots[n++] = k;
    }
    if (n == 0) {
        errno = EINVAL;
        return NULL;
    }
    return nmp_table_create_slots(dir, s->name, defs, slots, n);
}
