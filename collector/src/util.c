/* Small helpers shared by the collector's modules: clock and debug logging. */
#include "nmp_collect.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

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
