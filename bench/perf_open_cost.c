/* What the first per-task perf event costs the process that opens it: times
 * perf_event_open(2) of a cpu-clock sampling event on the calling thread, as numaprof-collect
 * and perf record open theirs.  The first such event after a second with none enables the
 * scheduler's perf hooks (kernel/events/core.c, account_event: the perf_sched_events static
 * key, then synchronize_rcu()); the others are cheap.  bench/README.md, "The fixed cost".
 *
 *   cc -O2 -o perf_open_cost bench/perf_open_cost.c && ./perf_open_cost; sleep 2; ./perf_open_cost
 */
#include <linux/perf_event.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

int main(void)
{
    for (int k = 0; k < 3; k++) {
        struct perf_event_attr a;
        memset(&a, 0, sizeof a);
        a.size = sizeof a;
        a.type = PERF_TYPE_SOFTWARE;
        a.config = PERF_COUNT_SW_CPU_CLOCK;
        a.freq = 1;
        a.sample_freq = 1009;
        a.sample_type = PERF_SAMPLE_IP | PERF_SAMPLE_TID;
        a.disabled = 1;
        double t = now_ms();
        long fd = syscall(SYS_perf_event_open, &a, 0, -1, -1, 0);
        printf("event %d: fd %ld, %.3f ms\n", k, fd, now_ms() - t);
    }
    return 0;
}
