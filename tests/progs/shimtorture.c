/* Torture program for the allocation shim (tests/test_shim.py).
 *
 * Allocates from many threads with every allocator the shim intercepts, below and above
 * the 64 KiB threshold (realloc chains across it, mmap/munmap, libnuma when built with
 * -DWITH_LIBNUMA), forks while those threads run, the child execs this program again, and
 * allocates and frees from a SIGALRM handler.  stdout is a deterministic digest of what
 * it computed, identical with and without the shim; stderr says which pid played which
 * role and where the marked allocation sites are, for the test to check the shim's
 * records.  Large allocations use distinctive sizes: BASE_<allocator> + 100*thread + iter.
 */
#define _GNU_SOURCE /* gettid */
#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>
#ifdef WITH_LIBNUMA
#include <numa.h>
#endif

enum {
    NTHREADS = 8, ITERS = 12, NSIGNAL = 20,
    BASE_MALLOC = 200000, BASE_CALLOC = 210000, BASE_REALLOC = 220000,
    BASE_REALLOC_MID = 70000, BASE_REALLOCARRAY = 230000, BASE_MMAP = 240000,
    BASE_MEMALIGN = 250000, BASE_POSIX_MEMALIGN = 260000, BASE_ALIGNED_ALLOC = 270000,
    BASE_VALLOC = 280000, BASE_PVALLOC = 290000, BASE_NUMA = 300000,
    BASE_MREMAP_FROM = 310000, BASE_MREMAP_TO = 320000,
    SIZE_SIGNAL_MALLOC = 333333, SIZE_SIGNAL_MMAP = 200704,
    SIZE_ALTSTACK = 444444, SIZE_LEAF = 454545, SIZE_FORK_CHILD = 666666, SIZE_EXEC_CHILD = 777777, SIZE_MAIN = 555555,
};

static int failures;

static uint64_t fnv(uint64_t h, uint64_t v)
{
    for (int i = 0; i < 8; i++) {
        h ^= (v >> (8 * i)) & 0xff;
        h *= 0x100000001b3ULL;
    }
    return h;
}

static void fail(const char *what, int t, int i)
{
    fprintf(stderr, "shimtorture: %s failed (thread %d, iteration %d)\n", what, t, i);
    __atomic_add_fetch(&failures, 1, __ATOMIC_RELAXED);
}

/* Fills n bytes with a pattern, checks it and returns a digest of sampled bytes. */
static uint64_t use(unsigned char *p, size_t n, unsigned seed, uint64_t h)
{
    memset(p, (int)(seed & 0xff), n);
    for (size_t k = 0; k < n; k += 4093)
        p[k] = (unsigned char)(seed + k);
    for (size_t k = 0; k < n; k += 4093)
        h = fnv(h, p[k]);
    return fnv(h, p[n - 1]);
}

/* The marked allocation sites: the test maps the shim's innermost frame of these sizes
 * back to these lines with addr2line. */
static __attribute__((noinline)) void *site_fork_child(void)
{
    return calloc(1, SIZE_FORK_CHILD); /* SITE fork_child */
}

static __attribute__((noinline)) void *site_exec_child(void)
{
    return malloc(SIZE_EXEC_CHILD); /* SITE exec_child */
}

static __attribute__((noinline)) void *site_main(void)
{
    return malloc(SIZE_MAIN); /* SITE main */
}

/* One allocation site reached through two callers with identical frames: the stack
 * pointer at the allocation is the same, the call stacks are not. */
static __attribute__((noinline)) void *site_leaf(size_t n)
{
    return malloc(n); /* SITE leaf */
}

static __attribute__((noinline)) void *path_a(size_t n)
{
    void *p = site_leaf(n); /* SITE path_a */
    return p;
}

static __attribute__((noinline)) void *path_b(size_t n)
{
    void *p = site_leaf(n); /* SITE path_b */
    return p;
}

static void two_paths(void)
{
    int bad = 0;
    for (int i = 0; i < 6; i++) {
        void *(*path)(size_t) = (i & 1) ? path_b : path_a;
        unsigned char *p = path(SIZE_LEAF);
        if (!p)
            bad = 1;
        else
            p[SIZE_LEAF - 1] = (unsigned char)i;
        free(p);
    }
    printf("two paths: %s\n", bad ? "BAD" : "ok");
}

struct job {
    int t;
    uint64_t digest;
};

static void *worker(void *arg)
{
    struct job *j = arg;
    int t = j->t;
    uint64_t h = 0xcbf29ce484222325ULL;
    unsigned lcg = 12345u + (unsigned)t * 7919u;
    void *keep[64] = {0};
    for (int i = 0; i < ITERS; i++) {
        size_t off = (size_t)(100 * t + i);
        unsigned seed = (unsigned)(t * 131 + i);
        /* small blocks, some kept alive across iterations */
        for (int k = 0; k < 64; k++) {
            lcg = lcg * 1103515245u + 12345u;
            size_t n = 1 + (lcg >> 16) % 4096;
            unsigned char *p = malloc(n);
            if (!p) {
                fail("small malloc", t, i);
                continue;
            }
            h = use(p, n, seed + (unsigned)k, h);
            free(keep[k]);
            keep[k] = (k & 1) ? p : NULL;
            if (!(k & 1))
                free(p);
        }
        unsigned char *p = malloc(BASE_MALLOC + off);
        if (!p)
            fail("malloc", t, i);
        else {
            h = use(p, BASE_MALLOC + off, seed, h);
            free(p);
        }
        p = calloc(BASE_CALLOC + off, 1);
        if (!p)
            fail("calloc", t, i);
        else {
            for (size_t k = 0; k < BASE_CALLOC + off; k += 997)
                if (p[k])
                    fail("calloc zero", t, i);
            h = use(p, BASE_CALLOC + off, seed, h);
            free(p);
        }
        /* realloc chain: small -> tracked -> bigger tracked -> small -> freed */
        p = malloc(1000);
        if (p) {
            memset(p, 0x5a, 1000);
            unsigned char *q = realloc(p, BASE_REALLOC_MID + off);
            if (!q) {
                fail("realloc mid", t, i);
                free(p);
            } else {
                q[BASE_REALLOC_MID + off - 1] = 0x33;
                unsigned char *r = realloc(q, BASE_REALLOC + off);
                if (!r) {
                    fail("realloc big", t, i);
                    free(q);
                } else {
                    if (r[999] != 0x5a || r[BASE_REALLOC_MID + off - 1] != 0x33)
                        fail("realloc contents", t, i);
                    h = fnv(h, r[0]);
                    unsigned char *s = realloc(r, 500);
                    if (!s) {
                        fail("realloc shrink", t, i);
                        free(r);
                    } else {
                        if (s[499] != 0x5a)
                            fail("realloc shrink contents", t, i);
                        free(s);
                    }
                }
            }
        }
        p = reallocarray(NULL, 1, BASE_REALLOCARRAY + off);
        if (!p)
            fail("reallocarray", t, i);
        else {
            h = use(p, BASE_REALLOCARRAY + off, seed, h);
            free(p);
        }
        errno = 0;
        volatile size_t huge = SIZE_MAX / 2;
        if (reallocarray(NULL, huge, 4) != NULL || errno != ENOMEM)
            fail("reallocarray overflow", t, i);
        p = mmap(NULL, BASE_MMAP + off, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED)
            fail("mmap", t, i);
        else {
            h = use(p, BASE_MMAP + off, seed, h);
            if (munmap(p, BASE_MMAP + off) != 0)
                fail("munmap", t, i);
        }
        /* a mapping that grows (and may move) */
        p = mmap(NULL, BASE_MREMAP_FROM + off, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED)
            fail("mmap for mremap", t, i);
        else {
            p[BASE_MREMAP_FROM + off - 1] = 0x44;
            unsigned char *q = mremap(p, BASE_MREMAP_FROM + off, BASE_MREMAP_TO + off, MREMAP_MAYMOVE);
            if (q == MAP_FAILED) {
                fail("mremap", t, i);
                munmap(p, BASE_MREMAP_FROM + off);
            } else {
                if (q[BASE_MREMAP_FROM + off - 1] != 0x44)
                    fail("mremap contents", t, i);
                h = use(q, BASE_MREMAP_TO + off, seed, h);
                munmap(q, BASE_MREMAP_TO + off);
            }
        }
        p = memalign(4096, BASE_MEMALIGN + off);
        if (!p || ((uintptr_t)p & 4095))
            fail("memalign", t, i);
        else
            h = use(p, BASE_MEMALIGN + off, seed, h);
        free(p);
        void *v = NULL;
        if (posix_memalign(&v, 256, BASE_POSIX_MEMALIGN + off) != 0 || ((uintptr_t)v & 255))
            fail("posix_memalign", t, i);
        else
            h = use(v, BASE_POSIX_MEMALIGN + off, seed, h);
        free(v);
        if (posix_memalign(&v, 3, 100) != EINVAL)
            fail("posix_memalign EINVAL", t, i);
        p = aligned_alloc(64, BASE_ALIGNED_ALLOC + 64 * off);
        if (!p || ((uintptr_t)p & 63))
            fail("aligned_alloc", t, i);
        else
            h = use(p, BASE_ALIGNED_ALLOC + 64 * off, seed, h);
        free(p);
        p = valloc(BASE_VALLOC + off);
        if (!p || ((uintptr_t)p & 4095))
            fail("valloc", t, i);
        else
            h = use(p, BASE_VALLOC + off, seed, h);
        free(p);
        p = pvalloc(BASE_PVALLOC + off);
        if (!p || ((uintptr_t)p & 4095))
            fail("pvalloc", t, i);
        else
            h = use(p, BASE_PVALLOC + off, seed, h);
        free(p);
#ifdef WITH_LIBNUMA
        if (numa_available() >= 0) {
            p = numa_alloc_onnode(BASE_NUMA + off, 0);
            if (!p)
                fail("numa_alloc_onnode", t, i);
            else {
                h = use(p, BASE_NUMA + off, seed, h);
                numa_free(p, BASE_NUMA + off);
            }
        }
#endif
    }
    for (int k = 0; k < 64; k++)
        free(keep[k]);
    j->digest = h;
    return NULL;
}

/* Runs the workers; returns the digest of all of them in thread order. */
static uint64_t run_workers(int n)
{
    pthread_t th[NTHREADS];
    struct job jobs[NTHREADS];
    for (int t = 0; t < n; t++) {
        jobs[t].t = t;
        if (pthread_create(&th[t], NULL, worker, &jobs[t]) != 0) {
            fail("pthread_create", t, -1);
            worker(&jobs[t]);
            th[t] = 0;
        }
    }
    uint64_t h = 0;
    for (int t = 0; t < n; t++) {
        if (th[t])
            pthread_join(th[t], NULL);
        h = fnv(h, jobs[t].digest);
    }
    return h;
}

/* ---- signal handlers ---- */

static volatile sig_atomic_t sig_runs, sig_bad, sig_mode;

static void on_alarm(int sig)
{
    (void)sig;
    int saved = errno;
    if (sig_mode == 1 && sig_runs < NSIGNAL) {
        /* the interrupted code does not allocate: malloc is safe here */
        unsigned char *p = malloc(SIZE_SIGNAL_MALLOC);
        unsigned char *q = malloc(48);
        if (!p || !q)
            sig_bad = 1;
        else {
            p[0] = p[SIZE_SIGNAL_MALLOC - 1] = 7;
            q[47] = 1;
            if (p[0] + p[SIZE_SIGNAL_MALLOC - 1] != 14)
                sig_bad = 1;
        }
        free(q);
        free(p);
    }
    if (sig_mode >= 1 && (sig_mode == 2 || sig_runs < NSIGNAL)) {
        /* mmap/munmap are async-signal-safe even when the interrupted code allocates */
        unsigned char *m = mmap(NULL, SIZE_SIGNAL_MMAP, PROT_READ | PROT_WRITE,
                                MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (m == MAP_FAILED)
            sig_bad = 1;
        else {
            m[4096] = 9;
            if (m[4096] != 9)
                sig_bad = 1;
            munmap(m, SIZE_SIGNAL_MMAP);
        }
        sig_runs++;
    }
    errno = saved;
}

static void set_timer(long usec)
{
    struct itimerval it = {{0, usec}, {0, usec}};
    setitimer(ITIMER_REAL, &it, NULL);
}

static void signal_phases(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_alarm;
    sa.sa_flags = SA_RESTART;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGALRM, &sa, NULL);

    /* phase 1: the handler allocates while this thread only computes */
    sig_runs = 0;
    sig_mode = 1;
    set_timer(2000);
    volatile uint64_t spin = 0;
    while (sig_runs < NSIGNAL)
        spin = spin * 6364136223846793005ULL + 1;
    set_timer(0);
    sig_mode = 0;
    printf("signal handler: %d allocation rounds, %s\n", NSIGNAL, sig_bad ? "BAD" : "ok");

    /* phase 2: the handler maps memory while this thread allocates through the shim */
    sig_bad = 0;
    sig_runs = 0;
    sig_mode = 2;
    set_timer(500);
    uint64_t h = 0;
    for (int i = 0; i < 400 || sig_runs < 3; i++) {
        unsigned char *p = malloc(BASE_MALLOC + 50000 + (size_t)(i % 7));
        if (!p) {
            sig_bad = 1;
            break;
        }
        if (i < 400)
            h = use(p, 4096, (unsigned)i, h);
        free(p);
        if (i > 100000)
            break;
    }
    set_timer(0);
    sig_mode = 0;
    printf("signal during allocation: digest %016llx, %s\n", (unsigned long long)h,
           sig_bad ? "BAD" : "ok");
}

/* a handler on an alternate signal stack, raised synchronously */
static void on_usr1(int sig)
{
    (void)sig;
    unsigned char *p = malloc(SIZE_ALTSTACK);
    if (!p)
        sig_bad = 1;
    else {
        p[SIZE_ALTSTACK - 1] = 1;
        free(p);
    }
}

static void altstack_phase(void)
{
    static unsigned char stack[65536];
    stack_t ss = {.ss_sp = stack, .ss_size = sizeof stack, .ss_flags = 0};
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_usr1;
    sa.sa_flags = SA_ONSTACK;
    sigemptyset(&sa.sa_mask);
    sig_bad = 0;
    if (sigaltstack(&ss, NULL) != 0 || sigaction(SIGUSR1, &sa, NULL) != 0)
        sig_bad = 1;
    for (int i = 0; i < 3; i++)
        raise(SIGUSR1);
    ss.ss_flags = SS_DISABLE;
    sigaltstack(&ss, NULL);
    printf("alternate signal stack: %s\n", sig_bad ? "BAD" : "ok");
}

/* A thread still running when the process exits (like an OpenMP pool thread): its small
 * allocations must be counted all the same. */
enum { LINGER_ALLOCS = 1000 };
static volatile int linger_ready;

static void *linger(void *arg)
{
    (void)arg;
    fprintf(stderr, "lingering thread %ld\n", (long)gettid());
    for (int i = 0; i < LINGER_ALLOCS; i++) {
        char *p = malloc(100);
        if (p)
            p[99] = 1;
        free(p);
    }
    __atomic_store_n(&linger_ready, 1, __ATOMIC_RELEASE);
    for (;;)
        pause();
    return NULL;
}

static void start_lingering_thread(void)
{
    pthread_t th;
    if (pthread_create(&th, NULL, linger, NULL) != 0)
        return;
    pthread_detach(th);
    while (!__atomic_load_n(&linger_ready, __ATOMIC_ACQUIRE))
        usleep(1000);
}

/* ---- roles ---- */

static int exec_child(void)
{
    fprintf(stderr, "role exec_child %ld\n", (long)getpid());
    unsigned char *p = site_exec_child();
    if (!p)
        return 1;
    uint64_t h = use(p, SIZE_EXEC_CHILD, 3, 0);
    /* deliberately not freed: live until the process ends */
    printf("exec child: digest %016llx, workers %016llx\n", (unsigned long long)h,
           (unsigned long long)run_workers(2));
    return failures ? 1 : 3;
}

static int fork_child(const char *self)
{
    fprintf(stderr, "role fork_child %ld\n", (long)getpid());
    unsigned char *p = site_fork_child();
    if (!p)
        _exit(1);
    /* not freed: the exec below ends it */
    uint64_t h = use(p, SIZE_FORK_CHILD, 2, 0);
    printf("fork child: digest %016llx, workers %016llx\n", (unsigned long long)h,
           (unsigned long long)run_workers(3));
    fflush(stdout);
    execl(self, self, "exec-child", (char *)NULL);
    perror("execl");
    _exit(1);
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "exec-child") == 0)
        return exec_child();
    char self[4096];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0)
        return 1;
    self[n] = 0;
    fprintf(stderr, "role main %ld\n", (long)getpid());
#ifdef WITH_LIBNUMA
    fprintf(stderr, "numa %s\n", numa_available() >= 0 ? "yes" : "no");
#else
    fprintf(stderr, "numa no\n");
#endif
    fprintf(stderr, "sites %p %p %p\n", (void *)site_main, (void *)site_fork_child,
            (void *)site_exec_child);

    unsigned char *big = site_main();
    if (!big)
        return 1;
    uint64_t hb = use(big, SIZE_MAIN, 1, 0);

    /* fork while the workers allocate */
    pthread_t th[NTHREADS];
    struct job jobs[NTHREADS];
    for (int t = 0; t < NTHREADS; t++) {
        jobs[t].t = t;
        if (pthread_create(&th[t], NULL, worker, &jobs[t]) != 0)
            return 1;
    }
    fflush(stdout);
    pid_t child = fork();
    if (child == 0)
        fork_child(self);
    uint64_t h = 0;
    for (int t = 0; t < NTHREADS; t++) {
        pthread_join(th[t], NULL);
        h = fnv(h, jobs[t].digest);
    }
    int status = 0;
    if (child < 0 || waitpid(child, &status, 0) != child)
        return 1;

    printf("main: digest %016llx, workers %016llx\n", (unsigned long long)hb,
           (unsigned long long)h);
    printf("child: %s %d\n", WIFEXITED(status) ? "exit" : "signal",
           WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
    signal_phases();
    altstack_phase();
    two_paths();
    start_lingering_thread();
    free(big);
    printf("failures: %d\n", failures);
    return failures ? 1 : 0;
}
