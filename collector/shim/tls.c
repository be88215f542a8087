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
#include <pthread.h>
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

void tls_record_thread(void)
{
    if (!g_tls_dir[0])
        return;
    struct nmp_shim_tls r = {.tid = shim_tid()};
    __asm__ volatile("mov %%fs:0, %0" : "=r"(r.tp)); /* the TCB's pointer to itself */
    char path[sizeof g_tls_dir + 32];
    snprintf(path, sizeof path, "%s/" NMP_SHIM_TLS_FILE, g_tls_dir, (uint32_t)getpid());
    int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0)
        return;
    if (write(fd, &r, sizeof r) != (ssize_t)sizeof r)
        shim_debug("tls: short write to %s", path);
    close(fd);
}

void tls_init(const char *dir)
{
    snprintf(g_tls_dir, sizeof g_tls_dir, "%s", dir);
    real_create = (int (*)(pthread_t *, const pthread_attr_t *, void *(*)(void *), void *))dlsym(
        RTLD_NEXT, "pthread_create");
    tls_record_thread();
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
