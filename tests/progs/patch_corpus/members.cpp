// A C++ class holding its arrays as members, sized and filled in member functions:
// `m_u` is a std::vector constructed in the member initialiser list (libstdc++ writes
// its elements there, inside the standard library), `m_v` a vector sized by
// `m_v.resize(n)` in Field::allocate (written inside resize), `m_w` a raw array from
// `new double[n]` in the same function, filled with a recurrence in Field::fill.  All
// three are then streamed by every thread's static block.  The vectors cannot get a
// parallel first-touch loop (their elements are written before any loop runs): they are
// placed through data() — at the start of the constructor body for m_u, right after the
// resize for m_v; m_w is placed after its new[].
//
// numaprof-patch: Field::m_u kind=place_in_constructor
// numaprof-patch: Field::m_v kind=place_vector
// numaprof-patch: Field::m_w kind=place_after_allocation
// (the profile names data members of the object a member function works on Class::member)
//
// usage: members [elements] [iterations]
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <vector>

class Field {
public:
    explicit Field(std::size_t n) : m_n(n), m_u(n)
    {
    }
    ~Field() { delete[] m_w; }
    Field(const Field &) = delete;
    Field &operator=(const Field &) = delete;

    void allocate();
    void fill();
    double sweep() const;

private:
    std::size_t m_n;
    std::vector<double> m_u;
    std::vector<double> m_v;
    double *m_w = nullptr;
};

void Field::allocate()
{
    m_v.resize(m_n);
    m_w = new double[m_n];
}

void Field::fill()
{
    m_w[0] = 1.0;
    for (std::size_t i = 1; i < m_n; i++)
        m_w[i] = 0.5 * m_w[i - 1] + 0.25;
    for (std::size_t i = 0; i < m_n; i++) {
        m_u[i] = static_cast<double>(i % 7);
        m_v[i] = static_cast<double>(i % 5);
    }
}

double Field::sweep() const
{
    const long n = static_cast<long>(m_n);
    double total = 0.0;
#pragma omp parallel for schedule(static) reduction(+ : total)
    for (long i = 0; i < n; i++)
        total += m_u[i] * 1.0001;
#pragma omp parallel for schedule(static) reduction(+ : total)
    for (long i = 0; i < n; i++)
        total += m_v[i] * 0.9999;
#pragma omp parallel for schedule(static) reduction(+ : total)
    for (long i = 0; i < n; i++)
        total += m_w[i] * 1.0002;
    return total;
}

int main(int argc, char **argv)
{
    std::size_t n = argc > 1 ? std::strtoul(argv[1], nullptr, 10) : std::size_t(1) << 21;
    int iters = argc > 2 ? std::atoi(argv[2]) : 60;
    // never deleted: the arrays stay mapped until the process exits, where numa_maps
    // shows the policy each page range got
    Field *f = new Field(n);
    f->allocate();
    f->fill();
    double total = 0.0;
    for (int it = 0; it < iters; it++)
        total += f->sweep();
    std::printf("checksum %.3f\n", total);
    return 0;
}
