// Several objects of one class whose constructor allocates its member (miniFE's
// Vector: `coefs(local_size)` in the constructor; cg_solve builds r, p and Ap), for
// tests/e2e/test_instances.py.
//
//   vectors N ITERS
//
// Each vector's coefficients are `Vector<double>::coefs` in the constructor; the report
// must tell them apart by the object each caller constructs: `x.coefs`, `r.coefs`,
// `p->coefs` (made with new), and `b.coefs`, built by a constructor that delegates to
// the other (GAP's pvector(n, init) : pvector(n)).
#include <cstdio>
#include <cstdlib>
#include <vector>

template <typename T> struct Vector {
    explicit Vector(long len) : n(len), coefs(len)
    {
#pragma omp parallel for schedule(static)
        for (long i = 0; i < n; i++)
            coefs[i] = T(i % 7);
    }
    Vector(long len, T init) : Vector(len)
    {
        for (long i = 0; i < n; i++)
            coefs[i] += init;
    }
    long n;
    std::vector<T> coefs;
};

int main(int argc, char **argv)
{
    long n = argc > 1 ? atol(argv[1]) : 1L << 21;
    int iters = argc > 2 ? atoi(argv[2]) : 40;
    Vector<double> x(n);
    Vector<double> r(n);
    Vector<double> *p = new Vector<double>(n);
    Vector<double> b(n, 1.0);
    for (int it = 0; it < iters; it++) {
#pragma omp parallel for schedule(static)
        for (long i = 0; i < n; i++)
            r.coefs[i] = 0.5 * r.coefs[i] + x.coefs[i] * p->coefs[i] - b.coefs[i];
#pragma omp parallel for schedule(static)
        for (long i = 0; i < n; i++)
            p->coefs[i] = r.coefs[i] - 0.25 * p->coefs[i];
    }
    std::printf("%f\n", r.coefs[n / 3] + p->coefs[n / 5]);
    delete p;
    return 0;
}
