/* A bound thread and a migrated one, for the NUMA lab's thread-placement checks.
 *
 * usage: lab_migrate [SECONDS_PER_PHASE] [KIB_PER_ARRAY]
 *   thread "bound":    affinity = the cpus of node 0 for the whole run (set at creation);
 *   thread "migrated": node 0's cpus for the first phase, then sched_setaffinity to the
 *                      cpus of the last node for the second phase.
 * Each thread first-touches and then streams over its own malloc'ed array (phases are
 * measured in wall-clock seconds so that they are long enough to be sampled even under
 * TCG; nothing here is a performance measurement).  Prints one line per thread:
 *   thread bound TID NODE_FIRST NODE_LAST
 *   thread migrated TID NODE_FIRST NODE_LAST
 * where the nodes are those getcpu(2) reported at the end of each phase.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static double phase_seconds = 1.5;
static size_t array_bytes = 1 << 20;
static int last_node;

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

static int bind_to_node(int node)
{
    cpu_set_t set;
    if (node_cpus(node, &set) != 0)
        return -1;
    return sched_setaffinity(0, sizeof set, &set);
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int current_node(void)
{
    unsigned cpu, node;
    if (syscall(SYS_getcpu, &cpu, &node, NULL) != 0)
        return -1;
    return (int)node;
}

/* Streams over the array (read-modify-write) until the phase's time is up. */
static double stream(volatile double *a, size_t n)
{
    double sum = 0.0, end = now() + phase_seconds;
    while (now() < end)
        for (size_t i = 0; i < n; i++) {
            a[i] = a[i] * 0.5 + 1.0;
            sum += a[i];
        }
    return sum;
}

struct worker {
    const char *name;
    int migrate;
    long tid;
    int node_first, node_last;
    int err;
    double sum;
};

static void *work(void *arg)
{
    struct worker *w = arg;
    w->tid = syscall(SYS_gettid);
    size_t n = array_bytes / sizeof(double);
    double *a = malloc(array_bytes);
    if (!a) {
        w->err = ENOMEM;
        return NULL;
    }
    for (size_t i = 0; i < n; i++)
        a[i] = (double)i;
    w->sum += stream(a, n);
    w->node_first = current_node();
    if (w->migrate && bind_to_node(last_node) != 0) {
        w->err = errno ? errno : EINVAL;
        free(a);
        return NULL;
    }
    w->sum += stream(a, n);
    w->node_last = current_node();
    free(a);
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc > 1)
        phase_seconds = strtod(argv[1], NULL);
    if (argc > 2)
        array_bytes = (size_t)strtoul(argv[2], NULL, 10) * 1024;
    for (last_node = 0;; last_node++) {
        char path[96];
        snprintf(path, sizeof path, "/sys/devices/system/node/node%d", last_node + 1);
        if (access(path, F_OK) != 0)
            break;
    }
    struct worker w[2] = {{.name = "bound", .migrate = 0}, {.name = "migrated", .migrate = 1}};
    pthread_t t[2];
    pthread_attr_t attr;
    cpu_set_t node0;
    /* Bound from their first instruction, so no sample can come from another node. */
    if (node_cpus(0, &node0) != 0 || pthread_attr_init(&attr) != 0 ||
        pthread_attr_setaffinity_np(&attr, sizeof node0, &node0) != 0) {
        fprintf(stderr, "lab_migrate: cannot bind to node 0\n");
        return 1;
    }
    for (int k = 0; k < 2; k++)
        if (pthread_create(&t[k], &attr, work, &w[k]) != 0) {
            fprintf(stderr, "lab_migrate: pthread_create failed\n");
            return 1;
        }
    int rc = 0;
    for (int k = 0; k < 2; k++) {
        pthread_join(t[k], NULL);
        if (w[k].err) {
            fprintf(stderr, "lab_migrate: %s thread: %s\n", w[k].name, strerror(w[k].err));
            rc = 1;
        }
        printf("thread %s %ld %d %d\n", w[k].name, w[k].tid, w[k].node_first, w[k].node_last);
    }
    return rc;
}
