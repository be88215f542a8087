/* Small helpers shared by the collector's modules: clock, debug logging, error lines,
 * growable arrays, a u32 map, the /proc/PID/maps reader and files written whole. */
#include "nmp_collect.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

uint64_t nmp_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Debug output goes to stderr only when NUMAPROF_DEBUG is set (and not "0"), so the
 * collector never writes anything the user did not ask for. */
void nmp_debug(const char *fmt, ...)
{
    static int enabled = -1;
    if (enabled < 0) {
        const char *e = getenv("NUMAPROF_DEBUG");
        enabled = e && *e && !(e[0] == '0' && e[1] == 0);
    }
    if (!enabled)
        return;
    va_list ap;
    va_start(ap, fmt);
    fputs("numaprof-collect: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

void nmp_set_err(char *err, const char *fmt, ...)
{
    if (!err)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, NMP_ERRLEN, fmt, ap);
    va_end(ap);
}

int nmp_grow(void *arrp, size_t *cap, size_t need, size_t size, size_t first)
{
    if (need <= *cap)
        return 0;
    size_t n = *cap ? *cap * 2 : first;
    while (n < need && n <= SIZE_MAX / 2)
        n *= 2;
    if (n < need || n > SIZE_MAX / size) {
        errno = ENOMEM;
        return -1;
    }
    /* through memcpy: the array may be any object pointer type (same representation) */
    void *old;
    memcpy(&old, arrp, sizeof old);
    void *p = realloc(old, n * size);
    if (!p)
        return -1;
    memcpy(arrp, &p, sizeof p);
    *cap = n;
    return 0;
}

static size_t u32map_slot(const uint32_t *keys, const uint32_t *vals, size_t cap, uint32_t key)
{
    size_t mask = cap - 1, k = nmp_mix64(key) & mask;
    while (vals[k] && keys[k] != key)
        k = (k + 1) & mask;
    return k;
}

int nmp_u32map_put(struct nmp_u32map *m, uint32_t key, uint32_t val)
{
    if ((m->n + 1) * 2 > m->cap) {
        size_t ncap = m->cap ? m->cap * 2 : 256;
        uint32_t *keys = calloc(ncap, sizeof *keys), *vals = calloc(ncap, sizeof *vals);
        if (!keys || !vals) {
            free(keys);
            free(vals);
            return -1;
        }
        for (size_t i = 0; i < m->cap; i++)
            if (m->vals[i]) {
                size_t k = u32map_slot(keys, vals, ncap, m->keys[i]);
                keys[k] = m->keys[i];
                vals[k] = m->vals[i];
            }
        free(m->keys);
        free(m->vals);
        m->keys = keys;
        m->vals = vals;
        m->cap = ncap;
    }
    size_t k = u32map_slot(m->keys, m->vals, m->cap, key);
    if (!m->vals[k])
        m->n++;
    m->keys[k] = key;
    m->vals[k] = val;
    return 0;
}

uint32_t nmp_u32map_get(const struct nmp_u32map *m, uint32_t key)
{
    return m->cap ? m->vals[u32map_slot(m->keys, m->vals, m->cap, key)] : 0;
}

void nmp_u32map_free(struct nmp_u32map *m)
{
    free(m->keys);
    free(m->vals);
    memset(m, 0, sizeof *m);
}

int nmp_proc_maps_each(uint32_t pid, int (*fn)(void *arg, const struct nmp_maps_line *m),
                       void *arg)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%" PRIu32 "/maps", pid);
    FILE *f = fopen(path, "re");
    if (!f)
        return -1;
    char line[4096 + 128];
    int n = 0;
    while (fgets(line, sizeof line, f)) {
        unsigned long long s, e, off;
        char perms[8];
        int pos = 0;
        if (sscanf(line, "%llx-%llx %7s %llx %*s %*s%n", &s, &e, perms, &off, &pos) < 4)
            continue;
        char *name = line + pos;
        while (*name == ' ')
            name++;
        name[strcspn(name, "\n")] = 0;
        struct nmp_maps_line m = {
            .start = s, .end = e, .pgoff = off, .path = name,
            .prot = (perms[0] == 'r' ? PROT_READ : 0) | (perms[1] == 'w' ? PROT_WRITE : 0) |
                    (perms[2] == 'x' ? PROT_EXEC : 0),
            .flags = perms[3] == 's' ? MAP_SHARED : MAP_PRIVATE};
        if (fn(arg, &m) == 0)
            n++;
    }
    fclose(f);
    return n;
}

/* Writes `len` bytes to <dir>/<name> through a temporary file and rename(2), mode 0600,
 * so a reader never sees a half-written file. */
int nmp_write_atomic(const char *dir, const char *name, const void *data, size_t len,
                     char *err)
{
    const char *buf = data;
    char path[4096], tmp[4200];
    if ((size_t)snprintf(path, sizeof path, "%s/%s", dir, name) >= sizeof path) {
        nmp_set_err(err, "%s/%s: path too long", dir, name);
        errno = ENAMETOOLONG;
        return -1;
    }
    snprintf(tmp, sizeof tmp, "%s/.%s.tmp.%ld", dir, name, (long)getpid());
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) {
        nmp_set_err(err, "%s: %s", tmp, strerror(errno));
        return -1;
    }
    size_t off = 0;
    while (off < len) {
        ssize_t n = write(fd, buf + off, len - off);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            int saved = n < 0 ? errno : EIO;
            nmp_set_err(err, "%s: %s", tmp, strerror(saved));
            close(fd);
            unlink(tmp);
            errno = saved;
            return -1;
        }
        off += (size_t)n;
    }
    if (close(fd) < 0 || rename(tmp, path) < 0) {
        int saved = errno;
        nmp_set_err(err, "%s: %s", path, strerror(saved));
        unlink(tmp);
        errno = saved;
        return -1;
    }
    return 0;
}
