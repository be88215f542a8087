/* Page placement truth for the NUMA lab: where did the kernel really put each page?
 *
 * usage: lab_place touch NPAGES [1 [SECONDS]]
 *          one thread first-touches NPAGES pages in order; run it under
 *          `numactl --membind=N` or `numactl --interleave=all` to test those policies.
 *        lab_place threads NPAGES NTHREADS [SECONDS]
 *          thread k is bound (sched_setaffinity) to the cpus of node k % nnodes and
 *          first-touches block k (NPAGES / NTHREADS pages) of the array.
 *        SECONDS: then keep reading the array for that long (wall clock), so that a
 *          sampling profiler sees it.  Placement is reported after that, as near to exit
 *          as possible (run with NUMA balancing off, or pages may move meanwhile).
 *
 * Prints, for the array:
 *   pid N                          this process (a profile's page_nodes are per process)
 *   addr 0x...                     start of the mapping (matches a /proc/self/numa_maps line)
 *   toucher K NODE                 (threads mode) node thread K ran on when it touched
 *   move_pages N0 N1 ...           node of every page, from move_pages(2) with nodes=NULL
 *   numa_maps <the numa_maps line of the array>
 * Exit status 0, or 1 with a message on stderr.  No libnuma: raw syscalls and sysfs.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static char *array;
static long page_size;
static long per_block, nnodes; /* pages per thread; nodes of the machine */

/* Node k's cpus from /sys/devices/system/node/nodeK/cpulist ("0-1,4"). */
static int node_cpus(int node, cpu_set_t *set)
{
    char path[96], buf[256];
    snprintf(path, sizeof path, "/sys/devices/system/node/node%d/cpulist", node);
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    if (!fgets(buf, sizeof buf, f)) {
        fclose(f);
        return -1;
    }
    fclose(f);
    CPU_ZERO(set);
    for (char *p = buf; *p && *p != '\n';) {
        char *end;
        long lo = strtol(p, &end, 10), hi = lo;
        if (end == p)
            return -1;
        if (*end == '-')
            hi = strtol(end + 1, &end, 10);
        for (long c = lo; c <= hi; c++)
            CPU_SET((int)c, set);
        p = *end == ',' ? end + 1 : end;
    }
    return 0;
}

static long count_nodes(void)
{
    long n = 0;
    char path[96];
    for (;; n++) {
        snprintf(path, sizeof path, "/sys/devices/system/node/node%ld", n);
        if (access(path, F_OK) != 0)
            return n;
    }
}

struct toucher {
    long k;
    int node; /* node the thread was running on while touching */
    int err;
};

static void *touch_block(void *arg)
{
    struct toucher *t = arg;
    cpu_set_t set;
    int node = (int)(t->k % nnodes);
    if (node_cpus(node, &set) != 0 || sched_setaffinity(0, sizeof set, &set) != 0) {
        t->err = errno ? errno : EINVAL;
        return NULL;
    }
    unsigned cpu, cur_node;
    for (long i = t->k * per_block; i < (t->k + 1) * per_block; i++)
        array[i * page_size] = (char)i;
    if (syscall(SYS_getcpu, &cpu, &cur_node, NULL) != 0) {
        t->err = errno;
        return NULL;
    }
    t->node = (int)cur_node;
    return NULL;
}

static int print_numa_maps(void)
{
    char line[4096], want[32];
    snprintf(want, sizeof want, "%lx ", (unsigned long)array);
    FILE *f = fopen("/proc/self/numa_maps", "r");
    if (!f)
        return -1;
    int found = 0;
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, want, strlen(want)) == 0) {
            printf("numa_maps %s", line);
            found = 1;
        }
    }
    fclose(f);
    return found ? 0 : -1;
}

int main(int argc, char **argv)
{
    if (argc < 3 || (strcmp(argv[1], "touch") && strcmp(argv[1], "threads"))) {
        fprintf(stderr, "usage: lab_place touch|threads NPAGES [NTHREADS [SECONDS]]\n");
        return 1;
    }
    page_size = sysconf(_SC_PAGESIZE);
    long npages = strtol(argv[2], NULL, 10);
    long nthreads = argc > 3 ? strtol(argv[3], NULL, 10) : 1;
    double seconds = argc > 4 ? strtod(argv[4], NULL) : 0.0;
    nnodes = count_nodes();
    if (npages <= 0 || npages > (1L << 20) || nthreads <= 0 || npages % nthreads || nnodes <= 0) {
        fprintf(stderr, "lab_place: NPAGES must be a multiple of NTHREADS, 1 .. 2^20\n");
        return 1;
    }
    per_block = npages / nthreads;
    array = mmap(NULL, (size_t)(npages * page_size), PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (array == MAP_FAILED) {
        perror("lab_place: mmap");
        return 1;
    }
    /* One huge page would put a whole block on one node and hide the per-page truth. */
    madvise(array, (size_t)(npages * page_size), MADV_NOHUGEPAGE);
    printf("pid %ld\naddr %p\n", (long)getpid(), (void *)array);

    if (strcmp(argv[1], "touch") == 0) {
        for (long i = 0; i < npages; i++)
            array[i * page_size] = (char)i;
    } else {
        pthread_t *tids = calloc((size_t)nthreads, sizeof *tids);
        struct toucher *ts = calloc((size_t)nthreads, sizeof *ts);
        /* One thread at a time: the order of first touches must not depend on scheduling. */
        for (long k = 0; k < nthreads; k++) {
            ts[k].k = k;
            ts[k].node = -1;
            if (pthread_create(&tids[k], NULL, touch_block, &ts[k]) != 0) {
                fprintf(stderr, "lab_place: pthread_create failed\n");
                return 1;
            }
            pthread_join(tids[k], NULL);
            if (ts[k].err) {
                fprintf(stderr, "lab_place: thread %ld: %s\n", k, strerror(ts[k].err));
                return 1;
            }
            printf("toucher %ld %d\n", k, ts[k].node);
        }
        free(tids);
        free(ts);
    }

    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    const volatile char *bytes = array; /* the loads are the array's, the sum a register */
    long sum = 0;
    do {
        for (long i = 0; i < npages * page_size; i += 64)
            sum += bytes[i];
        clock_gettime(CLOCK_MONOTONIC, &t);
    } while ((double)(t.tv_sec - t0.tv_sec) + (t.tv_nsec - t0.tv_nsec) * 1e-9 < seconds);
    printf("sum %ld\n", sum);
    void **pages = calloc((size_t)npages, sizeof *pages);
    int *status = calloc((size_t)npages, sizeof *status);
    for (long i = 0; i < npages; i++)
        pages[i] = array + i * page_size;
    if (syscall(SYS_move_pages, 0, (unsigned long)npages, pages, NULL, status, 0) != 0) {
        perror("lab_place: move_pages");
        return 1;
    }
    printf("move_pages");
    for (long i = 0; i < npages; i++)
        printf(" %d", status[i]);
    printf("\n");
    if (print_numa_maps() != 0) {
        fprintf(stderr, "lab_place: the array is not in /proc/self/numa_maps\n");
        return 1;
    }
    free(pages);
    free(status);
    return 0;
}
