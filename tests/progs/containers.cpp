// A C++ class with containers of small nodes filled from several lines of one
// constructor, as miniFE's boundary-row set is: `rows` is inserted into from three
// loops (each insertion a 40-byte node, below the allocation threshold, known from a
// sample of them), `cols` from one loop of its own.  Then both are searched at random
// by two OpenMP threads.
//
//   containers N REPS     prints the rows and cols counts and a checksum
#include <cstdio>
#include <cstdlib>
#include <set>
#include <vector>

struct Boundary {
    std::set<long> rows;
    std::set<long> cols;
    std::vector<double> values;
    explicit Boundary(long n) : values(n, 1.0) {
        for (long i = 0; i < n; i += 3)
            rows.insert(i);  // the x faces
        for (long i = 1; i < n; i += 7)
            rows.insert(i * 2 % n);  // the y faces
        for (long i = 2; i < n; i += 5)
            rows.insert(i * 13 % n);  // the z faces
        for (long i = 0; i < n; i += 4)
            cols.insert(i * 7 % n);  // another container, one line
    }
};

int main(int argc, char **argv)
{
    long n = argc > 1 ? atol(argv[1]) : 1000000;
    int reps = argc > 2 ? atoi(argv[2]) : 4;
    Boundary b(n);
    double sum = 0;
    for (int r = 0; r < reps; r++) {
#pragma omp parallel for reduction(+ : sum) schedule(static)
        for (long i = 0; i < n; i++) {
            long k = (i * 2654435761L + r) % n;
            if (b.rows.count(k))
                sum += b.values[k];
            if (b.cols.count(n - 1 - k))
                sum += 0.5;
        }
    }
    printf("rows %ld cols %ld sum %g\n", (long)b.rows.size(), (long)b.cols.size(), sum);
    return 0;
}
