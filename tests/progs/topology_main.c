/* Test driver: nmp_topology_write(argv[1]) (HWLOC_XMLFILE selects a canned topology).
 * Built by tests/test_roundtrip.py from collector/src/{topology,util}.c and hwloc. */
#include "nmp_collect.h"

#include <stdio.h>

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: %s PROFILE_DIR\n", argv[0]);
        return 2;
    }
    char err[NMP_ERRLEN] = "";
    if (nmp_topology_write(argv[1], err) != 0) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    return 0;
}
