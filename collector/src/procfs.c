/* Snapshots of the program from /proc: its mappings when attaching (the MMAP2 records of
 * mappings made before the events were opened never come), and its numa_maps.
 *
 * Final page placement per mapping (docs/record.md, "Page location"): a copy of
 * /proc/<pid>/numa_maps as <dir>/numa_maps.<pid>, written through a temporary file and
 * rename(2) so a reader never sees a partial copy (the shim writes the same file at the
 * target's exit; whichever is last wins, both are complete; an empty read, a process
 * that exited meanwhile, replaces nothing).  /proc is read below NUMAPROF_SYSROOT for
 * tests.
 */
#include "nmp_collector.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <unistd.h>

int nmp_numa_maps_copy(pid_t pid, const char *dir)
{
    const char *root = getenv("NUMAPROF_SYSROOT");
    char src[4096], dst[4096], tmp[4200];
    snprintf(src, sizeof src, "%s/proc/%ld/numa_maps", root ? root : "", (long)pid);
    if ((size_t)snprintf(dst, sizeof dst, "%s/numa_maps.%ld", dir, (long)pid) >= sizeof dst) {
        errno = ENAMETOOLONG;
        return -1;
    }
    snprintf(tmp, sizeof tmp, "%s/.numa_maps.%ld.tmp.%ld", dir, (long)pid, (long)getpid());

    int in = open(src, O_RDONLY | O_CLOEXEC);
    if (in < 0)
        return -1;
    int out = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (out < 0) {
        int saved = errno;
        close(in);
        errno = saved;
        return -1;
    }
    char buf[65536];
    int saved = 0;
    size_t total = 0;
    for (;;) {
        ssize_t n = read(in, buf, sizeof buf);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            saved = errno;
            break;
        }
        if (n == 0) {
            /* A live process has mappings: an empty numa_maps is one that exited between
             * the caller's check and this read (its memory is gone), and must not replace
             * the copy the shim made at its exit. */
            if (total == 0)
                saved = ESRCH;
            break;
        }
        total += (size_t)n;
        for (ssize_t off = 0; off < n;) {
            ssize_t w = write(out, buf + off, (size_t)(n - off));
            if (w < 0 && errno == EINTR)
                continue;
            if (w <= 0) {
                saved = w < 0 ? errno : EIO;
                break;
            }
            off += w;
        }
        if (saved)
            break;
    }
    close(in);
    if (close(out) < 0 && !saved)
        saved = errno;
    if (!saved && rename(tmp, dst) < 0)
        saved = errno;
    if (saved) {
        unlink(tmp);
        errno = saved;
        return -1;
    }
    nmp_debug("numa_maps: copied %s to %s", src, dst);
    return 0;
}

/* Is the process still running (not a zombie whose memory is gone)?  Its EXIT record may
 * not be drained yet, and an exited process's numa_maps is empty: copying it would
 * replace the shim's final copy written at exit. */
static int proc_running(uint32_t pid)
{
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/%" PRIu32 "/stat", pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        return 0;
    buf[n] = 0;
    const char *p = strrchr(buf, ')'); /* comm may contain spaces and parentheses */
    return p && p[1] == ' ' && p[2] != 'Z' && p[2] != 'X' && p[2] != 'x';
}

void nmp_numa_maps_copy_all(struct nmp_collector *c)
{
    for (size_t i = 0; i < c->tasks.nprocs; i++) {
        const struct nmp_process *p = &c->tasks.procs[i];
        if (!p->alive || !proc_running(p->pid))
            continue;
        if (nmp_numa_maps_copy((pid_t)p->pid, c->cfg->dir) != 0)
            nmp_debug("numa_maps of %" PRIu32 ": %s", p->pid, strerror(errno));
    }
}

struct from_proc {
    struct nmp_collector *c;
    uint32_t pid;
    uint64_t now;
};

static int add_proc_mapping(void *arg, const struct nmp_maps_line *m)
{
    struct from_proc *x = arg;
    nmp_mapping_add(x->c, x->now, x->pid, m->start, m->end - m->start, m->pgoff, m->prot,
                    m->flags, m->path);
    return 0;
}

void nmp_mappings_from_proc(struct nmp_collector *c, uint32_t pid)
{
    struct from_proc x = {c, pid, nmp_now_ns()};
    if (nmp_proc_maps_each(pid, add_proc_mapping, &x) < 0)
        nmp_warn(c, "cannot read /proc/%" PRIu32 "/maps: %s", pid, strerror(errno));
}

/* The parent of process `pid` from /proc/<pid>/stat (after the command name, which may
 * hold spaces and parentheses: the last ')'), or -1. */
static pid_t parent_of(pid_t pid)
{
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        return -1;
    buf[n] = 0;
    const char *p = strrchr(buf, ')');
    int ppid;
    char state;
    if (!p || sscanf(p + 1, " %c %d", &state, &ppid) != 2)
        return -1;
    return (pid_t)ppid;
}

size_t nmp_descendants(pid_t pid, pid_t *out, size_t max)
{
    DIR *d = opendir("/proc");
    if (!d)
        return 0;
    size_t cap = 256, n = 0;
    pid_t(*pairs)[2] = malloc(cap * sizeof *pairs); /* (pid, parent) of every process */
    struct dirent *de;
    while (pairs && (de = readdir(d))) {
        if (de->d_name[0] < '1' || de->d_name[0] > '9')
            continue;
        pid_t p = (pid_t)strtol(de->d_name, NULL, 10), pp = parent_of(p);
        if (pp <= 0)
            continue;
        if (n == cap) {
            pid_t(*more)[2] = realloc(pairs, 2 * cap * sizeof *pairs);
            if (!more)
                break;
            pairs = more;
            cap *= 2;
        }
        pairs[n][0] = p;
        pairs[n++][1] = pp;
    }
    closedir(d);
    /* breadth first from pid: out[] is the queue; past max the found ones are counted */
    size_t found = 0, head = 0;
    pid_t *queue = malloc((n + 1) * sizeof *queue);
    if (queue && pairs) {
        queue[0] = pid;
        size_t tail = 1;
        while (head < tail) {
            pid_t parent = queue[head++];
            for (size_t i = 0; i < n; i++)
                if (pairs[i][1] == parent && tail <= n) {
                    queue[tail++] = pairs[i][0];
                    if (found < max)
                        out[found] = pairs[i][0];
                    found++;
                }
        }
    }
    free(queue);
    free(pairs);
    return found;
}
