/* Thread pointers for the collector (nmp_shim_format.h, tls.<pid>): where each thread's
 * static thread-local storage is.
 *
 * An OpenMP threadprivate array, a C11 _Thread_local or a C++ thread_local is accessed
 * `%fs`-relative on x86-64, at the thread pointer plus what the registers give; the
 * kernel's register samples lack the %fs base, so the shim records it: the main thread's
 * when the shim starts (and a fork child's), every other thread's as it starts, from a
 * pthread_create that runs the start routine through a trampoline. */
#include "shim_int.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <unistd.h>

#define TRAMPOLINES 1024 /* threads starting at once; more start without a record */

struct trampoline {
    void *(*fn)(void *);
    void *arg;
    int busy; /* atomic: claimed by a pthread_create, released by its thread */
};

static struct trampoline g_tramps[TRAMPOLINES];
static char g_tls_dir[3072];
static int (*real_create)(pthread_t *, const pthread_attr_t *, void *(*)(void *), void *);

static void append(const struct nmp_shim_tls *r, size_t n)
{
    char path[sizeof g_tls_dir + 32];
    snprintf(path, sizeof path, "%s/" NMP_SHIM_TLS_FILE, g_tls_dir, (uint32_t)getpid());
    int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0)
        return;
    if (write(fd, r, n * sizeof *r) != (ssize_t)(n * sizeof *r))
        shim_debug("tls: short write to %s", path);
    close(fd);
}

static uint64_t thread_pointer(void)
{
    uint64_t tp;
    __asm__ volatile("mov %%fs:0, %0" : "=r"(tp)); /* the TCB's pointer to itself */
    return tp;
}

void tls_record_thread(void)
{
    if (!g_tls_dir[0])
        return;
    struct nmp_shim_tls r = {.tid = shim_tid(), .kind = NMP_SHIM_TLS_THREAD, .tp = thread_pointer()};
    append(&r, 1);
}

#define MAX_MODULES 64

struct modules {
    uint64_t tp;
    size_t n;
    struct nmp_shim_tls r[MAX_MODULES];
};

static int module(struct dl_phdr_info *info, size_t size, void *data)
{
    struct modules *m = data;
    if (size < offsetof(struct dl_phdr_info, dlpi_tls_data) + sizeof info->dlpi_tls_data ||
        !info->dlpi_tls_modid || !info->dlpi_tls_data || m->n == MAX_MODULES)
        return 0;
    uint64_t block = (uint64_t)(uintptr_t)info->dlpi_tls_data;
    if (block >= m->tp || m->tp - block > UINT32_MAX) /* static TLS lies below the pointer */
        return 0;
    m->r[m->n++] = (struct nmp_shim_tls){
        .tid = (uint32_t)(m->tp - block), .kind = NMP_SHIM_TLS_MODULE, .tp = info->dlpi_addr};
    return 0;
}

static struct modules g_modules;

void tls_record_modules(void)
{
    /* the modules loaded with the program, whose static TLS blocks the dynamic linker has
     * placed below every thread's pointer, each at its own offset (libraries' blocks come
     * after the executable's, in load order: glibc's _dl_determine_tlsoffset); found once,
     * at the start (a fork child has the same offsets, and after a fork of a threaded
     * program the loader's lock dl_iterate_phdr takes may be held by a thread gone) */
    if (g_tls_dir[0] && g_modules.n)
        append(g_modules.r, g_modules.n);
}

void tls_init(const char *dir)
{
    snprintf(g_tls_dir, sizeof g_tls_dir, "%s", dir);
    real_create = (int (*)(pthread_t *, const pthread_attr_t *, void *(*)(void *), void *))dlsym(
        RTLD_NEXT, "pthread_create");
    tls_record_thread();
    g_modules.tp = thread_pointer();
    g_modules.n = 0;
    dl_iterate_phdr(module, &g_modules);
    tls_record_modules();
}

static void *start(void *p)
{
    struct trampoline *t = p;
    void *(*fn)(void *) = t->fn;
    void *arg = t->arg;
    __atomic_store_n(&t->busy, 0, __ATOMIC_RELEASE);
    tls_record_thread();
    return fn(arg);
}

__attribute__((visibility("default"))) int pthread_create(pthread_t *th, const pthread_attr_t *attr,
                                                          void *(*fn)(void *), void *arg)
{
    if (!real_create) {
        real_create = (int (*)(pthread_t *, const pthread_attr_t *, void *(*)(void *), void *))dlsym(
            RTLD_NEXT, "pthread_create");
        if (!real_create)
            return EAGAIN;
    }
    if (g_tls_dir[0]) {
        for (int i = 0; i < TRAMPOLINES; i++) {
            int free_ = 0;
            if (__atomic_compare_exchange_n(&g_tramps[i].busy, &free_, 1, 0, __ATOMIC_ACQUIRE,
                                            __ATOMIC_RELAXED)) {
                g_tramps[i].fn = fn;
                g_tramps[i].arg = arg;
                int rc = real_create(th, attr, start, &g_tramps[i]);
                if (rc != 0)
                    __atomic_store_n(&g_tramps[i].busy, 0, __ATOMIC_RELEASE);
                return rc;
            }
        }
    }
    return real_create(th, attr, fn, arg);
}
