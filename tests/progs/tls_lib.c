/* A solver library with a thread-local scratch array (built as a shared library: its
 * static TLS block is placed by the dynamic linker, below the executable's), updated at
 * hashed positions by whichever thread calls it.  With tls_lib_main.c. */
static __thread double scratch[100000];

double *lib_scratch(void)
{
    return scratch;
}

double lib_work(const double *in, long n)
{
    double s = 0;
    for (long i = 0; i < n; i++) {
        unsigned long h = (unsigned long)(in[i] * 2654435761.0);
        h ^= h >> 29;
        h *= 0xbf58476d1ce4e5b9ul;
        long k = (long)((h ^ (h >> 32)) % 100000);
        scratch[k] += in[i];
        s += scratch[(k * 7) % 100000];
    }
    return s;
}
