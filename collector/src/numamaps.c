/* Final page placement per mapping (docs/record.md, "Page location"): a copy of
 * /proc/<pid>/numa_maps as <dir>/numa_maps.<pid>, written through a temporary file and
 * rename(2) so a reader never sees a partial copy (the shim writes the same file at the
 * target's exit; whichever is last wins, both are complete).  /proc is read below
 * NUMAPROF_SYSROOT for tests.
 */
#include "nmp_collect.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
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
    for (;;) {
        ssize_t n = read(in, buf, sizeof buf);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            saved = errno;
            break;
        }
        if (n == 0)
            break;
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
