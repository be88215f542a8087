/* Lab: numaprof_replicate on a real multi-node kernel.  Fills a table of PAGES pages on
 * the main thread, replicates it, then from one thread bound to each allowed node asks
 * numaprof_local for its copy and prints whether it is a copy (not the table), whether
 * its bytes equal the table's, and the node of every page of it (move_pages):
 *     replica node K copy C equal E nodes N0 N1 ...
 * then frees the copies:
 *     freed RC local_after_free L   (L 1: numaprof_local gives the table itself again)
 * usage: lab_replicate PAGES
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "numaprof_place.h"

static unsigned char *table;
static size_t bytes, pages;

static void *reader(void *arg)
{
    int node = (int)(intptr_t)arg;
    static int where[NUMAPROF_MAX_NODES][4096];
    if (numaprof_bind_to_node(node) != 0) {
        printf("replica node %d bind failed\n", node);
        return NULL;
    }
    const unsigned char *t = NUMAPROF_LOCAL(table);
    int *w = where[node];
    int ok = numaprof_page_nodes(t, bytes, w, pages) == 0;
    printf("replica node %d copy %d equal %d nodes", node, t != table,
           memcmp(t, table, bytes) == 0);
    for (size_t i = 0; i < pages; i++)
        printf(" %d", ok ? w[i] : -1000);
    printf("\n");
    return NULL;
}

int main(int argc, char **argv)
{
    int nodes[NUMAPROF_MAX_NODES];
    pages = argc > 1 ? strtoul(argv[1], NULL, 10) : 64;
    if (pages == 0 || pages > 4096)
        return 2;
    bytes = pages * (size_t)sysconf(_SC_PAGESIZE);
    table = malloc(bytes);
    if (!table)
        return 2;
    for (size_t i = 0; i < bytes; i++)
        table[i] = (unsigned char)(i * 7 + 3);
    int m = numaprof_allowed_nodes(nodes, NUMAPROF_MAX_NODES);
    int rc = numaprof_replicate(table, bytes);
    printf("nodes %d replicate %d\n", m, rc);
    for (int k = 0; k < m; k++) {
        pthread_t th;
        if (pthread_create(&th, NULL, reader, (void *)(intptr_t)nodes[k]) != 0)
            return 3;
        pthread_join(th, NULL);
    }
    /* the main thread's answer is cached now: freeing must invalidate it */
    const unsigned char *before = NUMAPROF_LOCAL(table);
    printf("main copy %d\n", before != table);
    int freed = numaprof_replicate_free(table);
    printf("freed %d local_after_free %d\n", freed, numaprof_local(table) == table);
    free(table);
    return 0;
}
