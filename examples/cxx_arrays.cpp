// C++ OpenMP program with the kinds of C++ objects numaprof names (known answers):
//   a           double *a = new double[n]        regular, written (static schedule stream)
//   v           std::vector<double> v(n)         random, read (gathered through a hash)
//   grid::field namespaced static array          regular, read
//   Matrix::data_ new double[n] in Matrix::Matrix random (scattered += updates)
//   tiles[t]    4 x new double[n/4] in a loop    one object of 4 allocations (same call
//                                                stack), regular, written
// The vector's memory comes from operator new inside libstdc++, called from inlined
// std::vector / std::allocator code: numaprof names it after the user's line.
// usage: cxx_arrays [iterations]
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

namespace grid {
constexpr std::size_t N = 2097152;
double field[N];
}  // namespace grid

class Matrix {
public:
    explicit Matrix(std::size_t n);
    ~Matrix();
    Matrix(const Matrix &) = delete;
    Matrix &operator=(const Matrix &) = delete;
    double *data_;
    std::size_t n_;
};

Matrix::Matrix(std::size_t n) : n_(n)
{
    data_ = new double[n];
}

Matrix::~Matrix()
{
    delete[] data_;
}

// a reproducible scatter of 0..n-1 (splitmix64 finaliser)
static inline std::size_t scatter(std::uint64_t i, std::size_t n)
{
    std::uint64_t x = i + 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return static_cast<std::size_t>((x ^ (x >> 31)) % n);
}

int main(int argc, char **argv)
{
    int iters = argc > 1 ? std::atoi(argv[1]) : 20;
    const std::size_t n = grid::N;

    double *a = new double[n];
    std::vector<double> v(n);
    Matrix m(n);
    double *tiles[4];
    for (int t = 0; t < 4; t++)
        tiles[t] = new double[n / 4];

#pragma omp parallel for schedule(static)
    for (std::size_t i = 0; i < n; i++) {
        grid::field[i] = static_cast<double>(i % 7);
        v[i] = static_cast<double>(i & 1023);
        m.data_[i] = 1.0;
        a[i] = 0.0;
    }

    double s = 0.0;
    for (int it = 0; it < iters; it++) {
        for (int rep = 0; rep < 2; rep++) {
#pragma omp parallel for schedule(static)
            for (std::size_t i = 0; i < n; i++)
                a[i] = 2.0 * grid::field[i] + it + rep;
        }
#pragma omp parallel
        for (int t = 0; t < 4; t++) {
#pragma omp for schedule(static) nowait
            for (std::size_t i = 0; i < n / 4; i++)
                tiles[t][i] = 0.5 * i + t + it;
        }
#pragma omp parallel for schedule(static) reduction(+ : s)
        for (std::size_t i = 0; i < n / 4; i++)
            s += v[scatter(i + it, n)];
#pragma omp parallel for schedule(static)
        for (std::size_t i = 0; i < n / 4; i++)
            m.data_[scatter(i * 3 + it, n)] += 1.0;
    }
    std::printf("checksum %.1f %.1f %.1f\n", s, a[n / 2], m.data_[n / 3]);
    std::printf("tiles %.1f\n", tiles[3][n / 8]);
    for (int t = 0; t < 4; t++)
        delete[] tiles[t];
    delete[] a;
    return 0;
}
