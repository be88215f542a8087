/* First touch of transparent huge pages: two 16 MiB arrays asked to be THP-backed
 * (madvise MADV_HUGEPAGE, 2 MiB aligned), `split` first-touched by all OpenMP threads
 * (static schedule, so each thread places its own half), `master` by the master thread
 * alone; then both are read in parallel.  One page fault places 2 MiB: the report's
 * first-touch page counts must still cover every 4 KiB page.
 *
 *   thp_touch [MiB per array [repetitions]]   prints "huge=1" when the kernel gave huge pages
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

static double *huge_array(size_t bytes)
{
    void *p = NULL;
    if (posix_memalign(&p, 2u << 20, bytes) != 0)
        return NULL;
    madvise(p, bytes, MADV_HUGEPAGE); /* THP "madvise" mode: ask; "always": already */
    return p;
}

int main(int argc, char **argv)
{
    size_t mib = argc > 1 ? strtoul(argv[1], NULL, 10) : 16;
    size_t n = mib * (1u << 20) / sizeof(double);
    double *split = huge_array(n * sizeof(double));
    double *master = huge_array(n * sizeof(double));
    if (!split || !master)
        return 1;
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++)
        split[i] = (double)i;
    for (size_t i = 0; i < n; i++)
        master[i] = 1.0;
    double sum = 0;
    int reps = argc > 2 ? atoi(argv[2]) : 20;
    for (int rep = 0; rep < reps; rep++) {
#pragma omp parallel for schedule(static) reduction(+ : sum)
        for (size_t i = 0; i < n; i++)
            sum += split[i];
#pragma omp parallel for schedule(static) reduction(+ : sum)
        for (size_t i = 0; i < n; i++)
            sum += master[i];
    }
    /* did the kernel back them with huge pages? (smaps of this process) */
    FILE *f = fopen("/proc/self/smaps_rollup", "r");
    char line[256];
    long anon_huge_kb = 0;
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, "AnonHugePages:", 14))
            anon_huge_kb = strtol(line + 14, NULL, 10);
    if (f)
        fclose(f);
    printf("sum=%.0f huge=%d\n", sum, anon_huge_kb >= 2048);
    free(split);
    free(master);
    return 0;
}
