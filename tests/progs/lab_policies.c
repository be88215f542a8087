/* Lab: numaprof_place.h on a real multi-node kernel.  For each policy named on the
 * command line, maps PAGES fresh pages, places them over nodes 0..M-1 with the policy
 * (weights 3,1,1,... for weighted_interleave, seed 7 for the random ones, 4-page blocks,
 * thread k of bind_block on node k), writes every page, and prints the node of every
 * page as the kernel says (move_pages with nodes = NULL):
 *     policy NAME rc RC nodes N0 N1 ...
 * usage: lab_policies M PAGES policy...
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include "numaprof_place.h"

static const struct { const char *name; enum numaprof_policy p; } POLICIES[] = {
    {"bind_all", NUMAPROF_BIND_ALL},         {"bind_block", NUMAPROF_BIND_BLOCK},
    {"cyclic", NUMAPROF_CYCLIC},             {"cyclic_block", NUMAPROF_CYCLIC_BLOCK},
    {"skew_mapp", NUMAPROF_SKEW_MAPP},       {"prime_mapp", NUMAPROF_PRIME_MAPP},
    {"random", NUMAPROF_RANDOM},             {"random_block", NUMAPROF_RANDOM_BLOCK},
    {"weighted_interleave", NUMAPROF_WEIGHTED_INTERLEAVE},
};

int main(int argc, char **argv)
{
    if (argc < 4)
        return 2;
    int m = atoi(argv[1]);
    size_t pages = strtoul(argv[2], NULL, 10);
    long psz = sysconf(_SC_PAGESIZE);
    int nodes[64];
    unsigned weights[64];
    for (int k = 0; k < m && k < 64; k++) {
        nodes[k] = k;
        weights[k] = k == 0 ? 3u : 1u;
    }
    for (int a = 3; a < argc; a++) {
        enum numaprof_policy pol = NUMAPROF_N_POLICIES;
        for (size_t k = 0; k < sizeof POLICIES / sizeof *POLICIES; k++)
            if (!strcmp(argv[a], POLICIES[k].name))
                pol = POLICIES[k].p;
        if (pol == NUMAPROF_N_POLICIES)
            return 2;
        char *p = mmap(NULL, pages * (size_t)psz, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED)
            return 1;
        struct numaprof_place_opts o;
        memset(&o, 0, sizeof o);
        o.nodes = nodes;
        o.n_nodes = m;
        o.threads_nodes = nodes;
        o.n_threads = m;
        o.block_pages = 4;
        o.seed = 7;
        o.weights = weights;
        int rc = numaprof_place_ex(p, pages * (size_t)psz, pol, &o);
        for (size_t i = 0; i < pages; i++)
            p[i * (size_t)psz] = 1;
        void **addrs = malloc(pages * sizeof *addrs);
        int *where = malloc(pages * sizeof *where);
        if (!addrs || !where)
            return 1;
        for (size_t i = 0; i < pages; i++)
            addrs[i] = p + i * (size_t)psz;
        long q = syscall(SYS_move_pages, 0, (unsigned long)pages, addrs, NULL, where, 0);
        printf("policy %s rc %d query %ld nodes", argv[a], rc, q);
        for (size_t i = 0; i < pages; i++)
            printf(" %d", where[i]);
        printf("\n");
        free(addrs);
        free(where);
        munmap(p, pages * (size_t)psz);
    }
    return 0;
}
