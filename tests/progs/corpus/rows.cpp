// A sparse matrix held the way C++ finite-element and graph codes often assemble it: one
// std::vector of entries per row (`std::vector<std::vector<Entry>> m_rows`), each row
// grown by push_back while the matrix is assembled, so the matrix is tens of thousands of
// small heap blocks (a few hundred bytes each, far below any "large allocation"
// threshold) that no single allocation names.  Its vectors x and y are std::vector
// members sized in a member function.  Each iteration of a power method computes
// y = A x, then its norm, and copies y / norm back into x.
//
// Every loop over rows is an `omp parallel for schedule(static)`; assembly is too, so each
// thread grows its own rows (glibc gives each thread an arena of its own) and first
// touches them.
//
// Hot arrays and their known answer:
//   m_rows  the entries of all rows: each thread streams its rows in order, entry after
//           entry (the rows of one thread lie in its arena in the order it built
//           them)                                                              regular
//   x       std::vector<double> member: gathered through the entries' random column
//           indices by every thread                                             random
// Colder, not asserted: y (written by row, read twice), the row headers (the
// std::vector<Entry> objects themselves, one 24-byte header per row, read by row).
// No array is thread-private.
//
// numaprof-corpus: run rows
// numaprof-corpus: array m_rows pattern=regular
// numaprof-corpus: array x pattern=random
//
// usage: rows [rows] [entries per row] [iterations]
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

struct Entry {
    std::uint32_t col;
    double val;
};

static std::uint64_t mix(std::uint64_t x)
{
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

class PowerMethod {
public:
    void assemble(std::size_t n, int per_row);
    double iterate();

private:
    std::size_t m_n = 0;
    std::vector<std::vector<Entry>> m_rows;
    std::vector<double> x;
    std::vector<double> y;
};

void PowerMethod::assemble(std::size_t n, int per_row)
{
    m_n = n;
    m_rows.resize(n);
    x.resize(n);
    y.resize(n);
    const long rows = static_cast<long>(n);
#pragma omp parallel for schedule(static)
    for (long i = 0; i < rows; i++) {
        x[i] = 1.0;
        y[i] = 0.0;
        for (int k = 0; k < per_row; k++) {
            std::uint64_t h = mix(static_cast<std::uint64_t>(i) * 131 + k);
            m_rows[i].push_back({static_cast<std::uint32_t>(h % n), 1.0 / (1 + (h >> 40) % 7)});
        }
    }
}

double PowerMethod::iterate()
{
    const long rows = static_cast<long>(m_n);
    double norm = 0.0;
#pragma omp parallel for schedule(static) reduction(+ : norm)
    for (long i = 0; i < rows; i++) {
        double s = 0.0;
        for (const Entry &e : m_rows[i])
            s += e.val * x[e.col];
        y[i] = s;
        norm += s * s;
    }
    norm = std::sqrt(norm);
#pragma omp parallel for schedule(static)
    for (long i = 0; i < rows; i++)
        x[i] = y[i] / norm;
    return norm;
}

int main(int argc, char **argv)
{
    long n = argc > 1 ? std::atol(argv[1]) : 1L << 18;
    int per_row = argc > 2 ? std::atoi(argv[2]) : 24;
    int iterations = argc > 3 ? std::atoi(argv[3]) : 250;
    if (n < 2 || n > UINT32_MAX || per_row < 1 || iterations < 1) {
        std::fprintf(stderr, "usage: rows [rows >= 2] [entries per row >= 1] [iterations >= 1]\n");
        return 2;
    }
    PowerMethod pm;
    pm.assemble(static_cast<std::size_t>(n), per_row);
    double lambda = 0.0;
    for (int it = 0; it < iterations; it++)
        lambda = pm.iterate();
    std::printf("rows: %ld rows, %d entries each, %d iterations, lambda %.6f\n", n, per_row,
                iterations, lambda);
    return 0;
}
