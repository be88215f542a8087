/* Spectral smoothing of an N x N complex field with a hand-written 2-D FFT, the way a
 * small pseudo-spectral code does it: radix-2 FFTs of rows, and columns reached through
 * cache-blocked transposes, in C99 complex arithmetic.
 *
 * Each step: FFT the rows of `a`; transpose a -> b; FFT the rows of b (the columns of
 * the field: the spectrum stays transposed in b, as FFT libraries allow); damp the high
 * wavenumbers; inverse FFT the rows of b; transpose b -> a; inverse FFT the rows of a.
 * A row FFT copies its row into `work`, a local array of the FFT function (16 KiB on
 * the calling thread's stack), in bit-reversed order, runs the butterflies there with
 * the shared twiddle table `tw` and copies the result back.  A transpose moves 32 x 32
 * blocks through `tile`, a local array (16 KiB, on the stack) of the parallel loop's
 * body.  Rows are shared out with schedule(static): in the row FFTs, the filter and as
 * the destination of a transpose a thread owns a band of rows, but as the *source* of a
 * transpose it reads a band of columns, strided through every row.
 *
 * Hot arrays and their known answer:
 *   work  double complex[N], FFT work array, one per thread on its stack: every row
 *         FFT sweeps all of it ~log2(N) times in ~10 us, so between two samples a
 *         thread has been everywhere in it                       random, thread-private
 *   a     double complex[N*N], the field: a band of rows per thread in its row FFTs and
 *         as a transpose destination, a band of columns as a transpose source -- each
 *         thread's part changes between phases                            irregular
 *   b     double complex[N*N], the transposed spectrum: the same        irregular
 *   tw    double complex[N/2] twiddle factors, 8 KiB from malloc, read by every
 *         butterfly of every thread at strides that cover it all            random
 * Colder, not asserted: `tile` (double complex[32][32], the transpose block on each
 * thread's stack, ~1 % of the samples: the transposes wait on a and b), `bitrev` (static).
 *
 * numaprof-corpus: run fft
 * numaprof-corpus: array work pattern=random private=yes
 * numaprof-corpus: array a pattern=irregular
 * numaprof-corpus: array b pattern=irregular
 * numaprof-corpus: array tw pattern=random
 *
 * usage: fft [steps]
 */
#include <complex.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#define LOGN 10
#define N (1 << LOGN)
#define TB 32

static unsigned bitrev[N];

static void fft_row(double complex *row, const double complex *tw, int inverse)
{
    double complex work[N];
    for (int k = 0; k < N; k++)
        work[bitrev[k]] = row[k];
    for (int len = 2; len <= N; len <<= 1) {
        int half = len / 2, stride = N / len;
        for (int start = 0; start < N; start += len)
            for (int k = 0; k < half; k++) {
                double complex w = inverse ? conj(tw[k * stride]) : tw[k * stride];
                double complex x = work[start + k], y = work[start + k + half] * w;
                work[start + k] = x + y;
                work[start + k + half] = x - y;
            }
    }
    double scale = inverse ? 1.0 / N : 1.0;
    for (int k = 0; k < N; k++)
        row[k] = work[k] * scale;
}

static void fft_rows(double complex *m, const double complex *tw, int inverse)
{
#pragma omp parallel for schedule(static)
    for (int r = 0; r < N; r++)
        fft_row(m + (size_t)r * N, tw, inverse);
}

/* dst = src^T; thread bands are bands of dst rows (= bands of src columns). */
static void transpose(const double complex *src, double complex *dst)
{
#pragma omp parallel for schedule(static)
    for (int bj = 0; bj < N; bj += TB) {
        double complex tile[TB][TB];
        for (int bi = 0; bi < N; bi += TB) {
            for (int i = 0; i < TB; i++)
                for (int j = 0; j < TB; j++)
                    tile[j][i] = src[(size_t)(bi + i) * N + bj + j];
            for (int j = 0; j < TB; j++)
                for (int i = 0; i < TB; i++)
                    dst[(size_t)(bj + j) * N + bi + i] = tile[j][i];
        }
    }
}

/* Damps wavenumber k by exp(-|k|^2 / (2 sigma^2)).  b holds the spectrum transposed;
 * the damping is symmetric in the two wavenumbers, so that does not matter here. */
static void damp(double complex *b, double sigma)
{
#pragma omp parallel for schedule(static)
    for (int r = 0; r < N; r++) {
        int kr = r <= N / 2 ? r : r - N;
        for (int c = 0; c < N; c++) {
            int kc = c <= N / 2 ? c : c - N;
            b[(size_t)r * N + c] *= exp(-(double)(kr * kr + kc * kc) / (2.0 * sigma * sigma));
        }
    }
}

int main(int argc, char **argv)
{
    int steps = argc > 1 ? atoi(argv[1]) : 56;
    if (steps < 1) {
        fprintf(stderr, "usage: fft [steps >= 1]\n");
        return 2;
    }
    double complex *a = malloc((size_t)N * N * sizeof *a);
    double complex *b = malloc((size_t)N * N * sizeof *b);
    double complex *tw = malloc(N / 2 * sizeof *tw);
    if (!a || !b || !tw)
        return 1;
    for (int k = 0; k < N / 2; k++)
        tw[k] = cexp(-2.0 * M_PI * I * k / N);
    for (unsigned k = 0; k < N; k++) {
        unsigned r = 0;
        for (int bit = 0; bit < LOGN; bit++)
            r |= ((k >> bit) & 1u) << (LOGN - 1 - bit);
        bitrev[k] = r;
    }
#pragma omp parallel for schedule(static)
    for (int r = 0; r < N; r++)
        for (int c = 0; c < N; c++) {
            double x = (double)c / N, y = (double)r / N;
            double noise = (double)((r * 7919u + c * 104729u) % 1000u) / 1000.0 - 0.5;
            a[(size_t)r * N + c] = sin(2 * M_PI * x) * cos(4 * M_PI * y) + 0.3 * noise;
        }

    for (int s = 0; s < steps; s++) {
        fft_rows(a, tw, 0);
        transpose(a, b);
        fft_rows(b, tw, 0);
        damp(b, N / 8.0);
        fft_rows(b, tw, 1);
        transpose(b, a);
        fft_rows(a, tw, 1);
    }
    double sum = 0.0;
    for (size_t k = 0; k < (size_t)N * N; k += 4099)
        sum += cabs(a[k]);
    printf("fft: %d x %d, %d steps, checksum %.6f\n", N, N, steps, sum);
    free(tw);
    free(b);
    free(a);
    return 0;
}
