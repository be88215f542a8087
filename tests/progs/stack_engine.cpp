// A C++ random-number engine on each thread's stack, for tests/e2e/test_stack_engine.py.
//
//   stack_engine N
//
// Each thread of the parallel region draws N numbers from its own std::mt19937_64 `rng`,
// a local of the region (5000 bytes of state in its frame).  The engine refills its state
// in a member function of the library (std::mersenne_twister_engine::_M_gen_rand, not
// inlined), which reaches `rng` through `this`: an address in the caller's frame, which
// is the local `rng`, not an object of the engine's type beside it.
#include <cstdio>
#include <cstdlib>
#include <omp.h>
#include <random>

int main(int argc, char **argv)
{
    long n = argc > 1 ? atol(argv[1]) : 1000000;
    double total = 0.0;
#pragma omp parallel reduction(+ : total)
    {
        std::mt19937_64 rng(12345u + (unsigned)omp_get_thread_num());
        std::uniform_real_distribution<double> uniform(0.0, 1.0);
        for (long i = 0; i < n; i++)
            total += uniform(rng);
    }
    std::printf("%f\n", total);
    return 0;
}
