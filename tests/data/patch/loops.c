/* Loops for the parallel-first-touch safety check (tests/test_patch.py).
 * Each loop is marked with the verdict the check must give. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#define N 1000
#define HALF (N / 2)
#define TOTAL total_count
static long total_count;

static double grid[N];
static double table[N];

struct acc {
    double total;
};

double work(double *a, double *b, double *x, size_t n, int *flags)
{
    double sum = 0.0;
    int i;
    struct acc s = {0.0};

    /* SAFE: element-wise, pure math call, locals declared in the body */
    for (size_t k = 0; k < n; ++k) {
        double t = sqrt((double)k);
        a[k] = t * 2.0;
        b[k] = fabs(x[k]) + a[k];
    }

    /* UNSAFE: prefix sum, a[k] depends on a[k-1] */
    for (size_t k = 1; k < n; k++)
        a[k] = a[k - 1] + x[k];

    /* UNSAFE: calls printf */
    for (size_t k = 0; k < n; k++) {
        a[k] = 1.0;
        printf("%f\n", a[k]);
    }

    /* UNSAFE: leaves early */
    for (size_t k = 0; k < n; k++) {
        if (flags[k])
            break;
        a[k] = 2.0;
    }

    /* UNSAFE: scalar accumulation */
    for (size_t k = 0; k < n; k++)
        sum += x[k];

    /* UNSAFE: writes a[k + 1] */
    for (size_t k = 0; k < n - 1; k++)
        a[k + 1] = 0.0;

    /* UNSAFE: counter declared outside and used after the loop */
    for (i = 0; i < (int)n; i++)
        b[i] = 3.0;
    a[0] = (double)i;

    /* NESTED: the outer loop is safe (inner counter is local, writes b[r]) */
    for (size_t r = 0; r < n; r++) {
        double v = 0.0;
        for (size_t c = 0; c < 4; c++)
            v += x[c];
        b[r] = v;
    }

    /* NESTED: outer loop is a time loop, inner loop is safe */
    for (int it = 0; it < 3; it++) {
        for (size_t j = 0; j < n; j++)
            a[j] = x[j] * it;
    }

    /* UNSAFE: writes a struct member declared outside */
    for (size_t k = 0; k < n; k++)
        s.total = x[k];

    /* UNSAFE: bound is changed in the body */
    for (size_t k = 0; k < n; k++) {
        a[k] = 1.0;
        n = n - 1;
    }

    /* UNSAFE: steps by two */
    for (size_t k = 0; k < n; k += 2)
        a[k] = 0.0;

    /* UNSAFE: writes through a pointer local to the body */
    for (size_t k = 0; k < n - 1; k++) {
        double *row = a + k;
        row[1] = 0.0;
    }

    /* SAFE: a local array is private to the iteration */
    for (size_t k = 0; k < n; k++) {
        double tmp[2];
        tmp[0] = x[k];
        tmp[1] = 2.0 * x[k];
        b[k] = tmp[0] + tmp[1];
    }

    /* SAFE: a constant macro in the bound */
    for (size_t k = 0; k < HALF; k++)
        a[k] = 1.0;

    /* UNSAFE: a macro that writes a global */
    for (size_t k = 0; k < n; k++) {
        a[k] = 0.5;
        TOTAL++;
    }

    /* UNSAFE: goto */
    for (size_t k = 0; k < n; k++) {
        if (flags[k])
            goto done;
        a[k] = 5.0;
    }
done:
    return sum + s.total;
}

int main(void)
{
    double *a = malloc(N * sizeof(double));
    double *b = calloc(N, sizeof *b);
    double *x = NULL;
    int flags[N] = {0};

    x = (double *)malloc(sizeof(double) * N);
    if (!a || !b || !x)
        return 1;
    for (int k = 0; k < N; k++) {
        grid[k] = 1.0;
        table[k] = 2.0;
        x[k] = 0.5;
    }
    printf("%f\n", work(a, b, x, N, flags) + grid[3] + table[4]);
    free(a);
    free(b);
    free(x);
    return 0;
}
