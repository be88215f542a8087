/* Reading an input file a line at a time, as Rodinia's hotspot3D and bfs do, for
 * tests/e2e/test_libstate.py.
 *
 *   read_stream N REPS PATH
 *
 * The main thread writes N numbers to PATH with fprintf and reads them back with fgets
 * into `line` and sscanf into `v` (REPS times); a parallel loop then works on `v`.
 * Every fgets, fprintf and fscanf call takes and releases the stream's lock, which
 * glibc keeps right after the FILE in a block fopen allocated (far below the shim's
 * threshold, so seldom sampled): the library's state, not the program's; `line`, which
 * fgets fills through the pointer it was given, is the program's.
 */
#include <stdio.h>
#include <stdlib.h>

static int write_numbers(const char *path, long n, int r)
{
    FILE *out = fopen(path, "w");
    if (!out)
        return -1;
    for (long i = 0; i < n; i++)
        fprintf(out, "%.17g\n", (double)i / 7.0 + r);
    return fclose(out);
}

static long read_numbers(const char *path, double *v, long n)
{
    FILE *in = fopen(path, "r");
    if (!in)
        return -1;
    char line[128];
    long got = 0;
    while (got < n && fgets(line, sizeof line, in) != NULL)
        if (sscanf(line, "%lf", &v[got]) == 1)
            got++;
    fclose(in);
    return got;
}

int main(int argc, char **argv)
{
    if (argc < 4) {
        fprintf(stderr, "usage: read_stream N REPS PATH\n");
        return 2;
    }
    long n = atol(argv[1]);
    int reps = atoi(argv[2]);
    double *v = malloc((size_t)n * sizeof *v);
    if (!v)
        return 1;
    for (int r = 0; r < reps; r++)
        if (write_numbers(argv[3], n, r) != 0 || read_numbers(argv[3], v, n) != n)
            return 1;
    double total = 0.0;
    for (int r = 0; r < 40 * reps; r++) {
#pragma omp parallel for reduction(+ : total) schedule(static)
        for (long i = 0; i < n; i++)
            total += v[i] * v[(i * 7919) % n];
    }
    printf("%g\n", total);
    free(v);
    return 0;
}
