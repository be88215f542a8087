/* Arrays built from many small allocations, for the allocation shim's sampling of them:
 * `rows` (KEEP rows of 1000 bytes, kept until exit) and `temp` (TEMP rows of 500 bytes,
 * freed before exit), allocated by two call sites in turns of 100 rows, then `grown`:
 * 1000 blocks of 300 bytes, each realloc'd to 600 (the sampled ones end at the realloc).
 * usage: small_rows KEEP TEMP */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char **rows, **temp;

static __attribute__((noinline)) char *row(size_t n)
{
    char *p = malloc(n);
    if (!p)
        abort();
    memset(p, 1, n);
    return p;
}

static __attribute__((noinline)) char *temp_row(size_t n)
{
    char *p = calloc(1, n);
    if (!p)
        abort();
    return p;
}

int main(int argc, char **argv)
{
    int keep = argc > 1 ? atoi(argv[1]) : 20000, ntemp = argc > 2 ? atoi(argv[2]) : 20000;
    rows = malloc(sizeof *rows * (size_t)keep);
    temp = malloc(sizeof *temp * (size_t)ntemp);
    for (int i = 0, j = 0; i < keep || j < ntemp;) {
        for (int k = 0; k < 100 && i < keep; k++)
            rows[i++] = row(1000);
        for (int k = 0; k < 100 && j < ntemp; k++)
            temp[j++] = temp_row(500);
    }
    long sum = 0;
    for (int j = 0; j < ntemp; j++) {
        sum += temp[j][0];
        free(temp[j]);
    }
    for (int i = 0; i < 1000; i++) {
        char *p = malloc(300);
        char *q = realloc(p, 600);
        sum += q != NULL;
        free(q);
    }
    printf("%ld\n", sum + rows[keep - 1][999]);
    return 0;
}
