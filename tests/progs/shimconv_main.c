/* Test driver: runs nmp_shim_convert(argv[1]) and prints the totals as one JSON line.
 * Built by tests/test_shim.py from collector/src/{shimconv,table,util}.c. */
#include "nmp_collect.h"

#include <stdio.h>

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: %s PROFILE_DIR\n", argv[0]);
        return 2;
    }
    struct nmp_shim_totals t;
    char err[NMP_ERRLEN] = "";
    int rc = nmp_shim_convert(argv[1], &t, err);
    printf("{\"rc\": %d, \"err\": \"%s\", \"small_allocs\": %llu, \"small_bytes\": %llu, "
           "\"tracked_allocs\": %llu, \"sampled_allocs\": %llu, \"short_lived_allocs\": %llu, "
           "\"processes\": %llu}\n",
           rc, err, (unsigned long long)t.small_allocs, (unsigned long long)t.small_bytes,
           (unsigned long long)t.tracked_allocs, (unsigned long long)t.sampled_allocs,
           (unsigned long long)t.short_lived_allocs,
           (unsigned long long)t.processes);
    return rc < 0 ? 1 : 0;
}
