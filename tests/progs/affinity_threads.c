/* Threads whose affinity numaprof must record, each living only THREAD_MS milliseconds:
 *   "attr"   bound to the last cpu by its creator (pthread_attr_setaffinity_np, as libgomp's
 *            OMP_PROC_BIND does): bound from its first instruction;
 *   "self"   binds itself to the first cpu once it runs (sched_setaffinity);
 *   "free"   never bound.
 * usage: affinity_threads [THREAD_MS]
 * Prints "thread NAME TID CPULIST" with the affinity each thread had before it ended.
 * Exit 0, or 1 with a message on stderr. */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

struct th {
    const char *name;
    int bind_self; /* cpu to bind to once running, or -1 */
    long tid;
    char cpus[256];
};

static double thread_ms = 100.0;

static void spin(double ms)
{
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    volatile unsigned long x = 0;
    do {
        for (int i = 0; i < 10000; i++)
            x += (unsigned long)i;
        clock_gettime(CLOCK_MONOTONIC, &t);
    } while ((t.tv_sec - t0.tv_sec) * 1e3 + (t.tv_nsec - t0.tv_nsec) * 1e-6 < ms);
}

static void *body(void *arg)
{
    struct th *t = arg;
    t->tid = syscall(SYS_gettid);
    if (t->bind_self >= 0) {
        cpu_set_t set;
        CPU_ZERO(&set);
        CPU_SET(t->bind_self, &set);
        if (sched_setaffinity(0, sizeof set, &set) != 0)
            return NULL;
    }
    spin(thread_ms);
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) != 0)
        return NULL;
    char *p = t->cpus;
    for (int c = 0; c < CPU_SETSIZE; c++)
        if (CPU_ISSET(c, &set) && p < t->cpus + sizeof t->cpus - 8)
            p += sprintf(p, "%s%d", p == t->cpus ? "" : ",", c);
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc > 1)
        thread_ms = strtod(argv[1], NULL);
    cpu_set_t all;
    if (sched_getaffinity(0, sizeof all, &all) != 0 || CPU_COUNT(&all) < 2) {
        fprintf(stderr, "affinity_threads: needs at least 2 cpus\n");
        return 1;
    }
    int first = -1, last = -1;
    for (int c = 0; c < CPU_SETSIZE; c++)
        if (CPU_ISSET(c, &all)) {
            first = first < 0 ? c : first;
            last = c;
        }
    struct th ts[3] = {{"attr", -1, 0, ""}, {"self", first, 0, ""}, {"free", -1, 0, ""}};
    pthread_t ids[3];
    for (int i = 0; i < 3; i++) {
        pthread_attr_t attr;
        pthread_attr_init(&attr);
        if (i == 0) {
            cpu_set_t one;
            CPU_ZERO(&one);
            CPU_SET(last, &one);
            pthread_attr_setaffinity_np(&attr, sizeof one, &one);
        }
        if (pthread_create(&ids[i], &attr, body, &ts[i]) != 0) {
            fprintf(stderr, "affinity_threads: pthread_create failed\n");
            return 1;
        }
        pthread_attr_destroy(&attr);
    }
    for (int i = 0; i < 3; i++)
        pthread_join(ids[i], NULL);
    spin(thread_ms); /* the main thread outlives them */
    for (int i = 0; i < 3; i++) {
        if (!ts[i].cpus[0]) {
            fprintf(stderr, "affinity_threads: thread %s failed\n", ts[i].name);
            return 1;
        }
        printf("thread %s %ld %s\n", ts[i].name, ts[i].tid, ts[i].cpus);
    }
    return 0;
}
