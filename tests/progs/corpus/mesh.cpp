// A spring network (nodes joined to `degree` random neighbours, as in a mesh-free or
// graph-based solver) written the way C++ simulation codes hold their data: a class whose
// members are std::vector's sized in a member function (`m_pos.resize(n)` inside
// Mesh::allocate), a std::unique_ptr<double[]>, and an array from a small template
// allocation wrapper (`template <typename T> T *alloc_array(std::size_t)`).  Each time
// step builds a temporary std::vector `pressure` and drops it at the end of the step.
//
// Every loop over nodes is an `omp parallel for schedule(static)`.  A step computes each
// node's pressure from the stretch of its springs (gathering its neighbours' positions),
// then its force from its neighbours' positions, pressures and charges, and moves it.
//
// Hot arrays and their known answer:
//   m_pos     std::vector<double> member: 16 random neighbour reads per node per step
//             (every thread all over it), plus the node's own read and update    random
//   pressure  std::vector<double> local of Mesh::step, one per step: written by node,
//             then gathered through the neighbour lists: one logical array with one
//             instance per step                                                  random
//   m_charge  double * member from alloc_array<double>, gathered like pressure  random
//   m_mass    std::unique_ptr<double[]> member, read by node (each thread its own
//             nodes; the division after the load keeps the sampler on it)      regular
// Colder arrays, not asserted: m_nbr (std::vector<uint32_t>, the neighbour lists,
// streamed by node, a few % of the samples), m_vel (std::vector<double>, by node).
// No array is thread-private.
//
// numaprof-corpus: run mesh
// numaprof-corpus: array m_pos pattern=random
// numaprof-corpus: array pressure pattern=random
// numaprof-corpus: array m_charge pattern=random
// numaprof-corpus: array m_mass pattern=regular
//
// usage: mesh [nodes] [steps]
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <new>
#include <vector>

template <typename T>
T *alloc_array(std::size_t n)
{
    void *p = nullptr;
    if (posix_memalign(&p, 64, n * sizeof(T)) != 0)
        throw std::bad_alloc();
    return static_cast<T *>(p);
}

class Mesh {
public:
    Mesh() = default;
    ~Mesh() { std::free(m_charge); }
    Mesh(const Mesh &) = delete;
    Mesh &operator=(const Mesh &) = delete;

    void allocate(std::size_t n, int degree);
    void connect();
    void step(double dt);
    double kinetic() const;

private:
    std::size_t m_n = 0;
    int m_degree = 0;
    std::vector<double> m_pos;
    std::vector<double> m_vel;
    std::vector<std::uint32_t> m_nbr;
    std::unique_ptr<double[]> m_mass;
    double *m_charge = nullptr;
};

void Mesh::allocate(std::size_t n, int degree)
{
    m_n = n;
    m_degree = degree;
    m_pos.resize(n);
    m_vel.resize(n);
    m_nbr.resize(n * degree);
    m_mass = std::make_unique<double[]>(n);
    m_charge = alloc_array<double>(n);
}

static std::uint64_t mix(std::uint64_t x)
{
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

void Mesh::connect()
{
    const long n = static_cast<long>(m_n);
#pragma omp parallel for schedule(static)
    for (long i = 0; i < n; i++) {
        m_pos[i] = static_cast<double>(mix(static_cast<std::uint64_t>(i)) % 1000) * 1e-3;
        m_vel[i] = 0.0;
        m_mass[i] = 1.0 + static_cast<double>(i % 5);
        m_charge[i] = (i % 3 == 0 ? -0.5 : 0.25) * 1e-3;
        for (int k = 0; k < m_degree; k++)
            m_nbr[i * m_degree + k] =
                static_cast<std::uint32_t>(mix(static_cast<std::uint64_t>(i) * 64 + k) % m_n);
    }
}

void Mesh::step(double dt)
{
    std::vector<double> pressure(m_n);
    const long n = static_cast<long>(m_n);
#pragma omp parallel for schedule(static)
    for (long i = 0; i < n; i++) {
        const std::uint32_t *nb = &m_nbr[i * m_degree];
        double stretch = 0.0;
        for (int k = 0; k < m_degree; k++)
            stretch += std::fabs(m_pos[nb[k]] - m_pos[i]);
        pressure[i] = 0.1 * stretch;
    }
#pragma omp parallel for schedule(static)
    for (long i = 0; i < n; i++) {
        const std::uint32_t *nb = &m_nbr[i * m_degree];
        double f = 0.0;
        for (int k = 0; k < m_degree; k++) {
            std::uint32_t j = nb[k];
            double d = m_pos[j] - m_pos[i];
            f += (pressure[i] + pressure[j]) * d - m_charge[i] * m_charge[j] * d;
        }
        m_vel[i] = 0.99 * m_vel[i] + dt * f / m_mass[i];
    }
#pragma omp parallel for schedule(static)
    for (long i = 0; i < n; i++)
        m_pos[i] += dt * m_vel[i];
}

double Mesh::kinetic() const
{
    double e = 0.0;
    const long n = static_cast<long>(m_n);
#pragma omp parallel for schedule(static) reduction(+ : e)
    for (long i = 0; i < n; i++)
        e += 0.5 * m_mass[i] * m_vel[i] * m_vel[i];
    return e;
}

int main(int argc, char **argv)
{
    long nodes = argc > 1 ? std::atol(argv[1]) : 2L << 20;
    int steps = argc > 2 ? std::atoi(argv[2]) : 14;
    if (nodes < 2 || nodes > UINT32_MAX || steps < 1) {
        std::fprintf(stderr, "usage: mesh [nodes] [steps >= 1]\n");
        return 2;
    }
    Mesh mesh;
    mesh.allocate(static_cast<std::size_t>(nodes), 8);
    mesh.connect();
    for (int s = 0; s < steps; s++)
        mesh.step(1e-3);
    std::printf("mesh: %ld nodes, %d steps, kinetic energy %.6e\n", nodes, steps, mesh.kinetic());
    return 0;
}
