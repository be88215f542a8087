/* Reading numbers from text, as an input file is read, for tests/e2e/test_libstate.py.
 *
 *   parse_lines N REPS
 *
 * The main thread formats N numbers into `line`, a local buffer, and parses them back
 * with sscanf into `v` (REPS times: the input phase of a real program, hotspot's or
 * bfs's); a parallel loop then works on `v`.  The C library's conversion routines run
 * several frames deep below sscanf and work on buffers in those frames (strtod's digit
 * buffers, vfscanf's work area): stack memory of the library's, not the program's.
 * `line`, which the library reads through the pointer it was given, is the program's.
 */
#include <stdio.h>
#include <stdlib.h>

__attribute__((noinline)) static double parse(char *line, size_t size, double x)
{
    double got = 0.0;
    snprintf(line, size, "%.17g %.9e", x, x * 3.0);
    if (sscanf(line, "%lf", &got) != 1)
        return 0.0;
    return got;
}

int main(int argc, char **argv)
{
    long n = argc > 1 ? atol(argv[1]) : 100000;
    int reps = argc > 2 ? atoi(argv[2]) : 10;
    double *v = malloc((size_t)n * sizeof *v);
    if (!v)
        return 1;
    char line[256];
    for (int r = 0; r < reps; r++)
        for (long i = 0; i < n; i++)
            v[i] = parse(line, sizeof line, (double)i / 7.0 + r);
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
