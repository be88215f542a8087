/* A program to attach to (`numaprof record -p PID`, tests/e2e/test_attach.py): one heap
 * block that two kernels use as two different arrays.
 *
 *   attach_reuse GOFILE SECONDS
 *
 * main allocates `work` (4 MiB, no global points to it), prints "ready" with its pid and
 * waits until GOFILE exists.  Then, for SECONDS seconds, the threads of a parallel
 * region sweep the block through `smooth`, which reads it as `u`, and through
 * `residual`, which reads and writes it as `r` -- as a solver that allocates its
 * temporaries every step gets the same memory back from the allocator for a different
 * array.  The heap walks at the attach and at the end see one block there.
 */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#define N (512L * 1024L)

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

__attribute__((noinline)) double smooth(const double *u, long lo, long hi)
{
    double s = 0.0;
    for (long i = lo + 1; i < hi - 1; i++)
        s += 0.25 * u[i - 1] + 0.5 * u[i] + 0.25 * u[i + 1];
    return s;
}

__attribute__((noinline)) void residual(double *r, long lo, long hi, double f)
{
    for (long i = lo; i < hi; i++)
        r[i] = f - 0.5 * r[i];
}

int main(int argc, char **argv)
{
    if (argc < 3)
        return 2;
    double seconds = atof(argv[2]);
    double *work = malloc(N * sizeof *work);
    if (!work)
        return 1;
    for (long i = 0; i < N; i++)
        work[i] = (double)(i % 97);
    printf("ready %d\n", (int)getpid());
    fflush(stdout);
    while (access(argv[1], F_OK) != 0)
        usleep(10000);
    double total = 0.0, end = now() + seconds;
#pragma omp parallel reduction(+ : total)
    {
        int t = omp_get_thread_num(), nt = omp_get_num_threads();
        long lo = N * t / nt, hi = N * (t + 1) / nt;
        while (now() < end) {
            total += smooth(work, lo, hi);
            residual(work, lo, hi, 1.0 + total * 1e-12);
        }
    }
    printf("%g\n", total);
    free(work);
    return 0;
}
