/* Reading an input file with fscanf, as Rodinia's bfs reads its graph, for
 * tests/e2e/test_libstate.py.
 *
 *   scan_stream N REPS PATH
 *
 * The main thread writes N pairs of numbers to PATH with fprintf and reads them back with
 * fscanf into `pairs` (REPS times); a parallel loop then sums them.  fscanf parses the
 * stream's buffer, a 4 KiB block glibc's _IO_file_doallocate mallocs at the first read
 * (the library's own, touched by no code of the program's), against the format string
 * "%d %d" in the program's read-only data; `pairs`, written through the pointers fscanf
 * was given and read by the loop, is the program's.
 */
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
    if (argc < 4) {
        fprintf(stderr, "usage: scan_stream N REPS PATH\n");
        return 2;
    }
    long n = atol(argv[1]);
    int reps = atoi(argv[2]);
    int *pairs = malloc((size_t)n * 2 * sizeof *pairs);
    if (!pairs)
        return 1;
    FILE *out = fopen(argv[3], "w");
    if (!out)
        return 1;
    for (long i = 0; i < n; i++)
        fprintf(out, "%ld %ld\n", i, (i * 7919) % n);
    fclose(out);
    long long sum = 0;
    for (int r = 0; r < reps; r++) {
        FILE *in = fopen(argv[3], "r");
        if (!in)
            return 1;
        long got = 0;
        while (got < n && fscanf(in, "%d %d", &pairs[2 * got], &pairs[2 * got + 1]) == 2)
            got++;
        fclose(in);
#pragma omp parallel for reduction(+ : sum)
        for (long i = 0; i < 2 * got; i++)
            sum += pairs[i];
    }
    printf("sum %lld\n", sum);
    free(pairs);
    return 0;
}
