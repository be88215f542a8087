/* Starting the command stopped: fork, the child waits on a pipe while the parent opens
 * the perf events on its pid (enable_on_exec), then execs.  A CLOEXEC pipe reports the
 * exec errno back, so "command not found" is known before any sampling. */
#include "nmp_sampler.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

static char *kv(const char *k, const char *v1, const char *sep, const char *v2)
{
    size_t n = strlen(k) + 1 + strlen(v1) + strlen(sep) + strlen(v2) + 1;
    char *s = malloc(n);
    if (s)
        snprintf(s, n, "%s=%s%s%s", k, v1, sep, v2);
    return s;
}

char **nmp_child_env(const char *shim, const char *dir, uint64_t threshold)
{
    size_t n = 0;
    while (environ[n])
        n++;
    char **env = calloc(n + 4, sizeof *env);
    if (!env)
        return NULL;
    size_t k = 0;
    const char *old_preload = getenv("LD_PRELOAD");
    for (size_t i = 0; i < n; i++) {
        if (!strncmp(environ[i], "LD_PRELOAD=", 11) || !strncmp(environ[i], "NUMAPROF_DIR=", 13) ||
            !strncmp(environ[i], "NUMAPROF_ALLOC_THRESHOLD=", 25))
            continue;
        if (!(env[k++] = strdup(environ[i])))
            goto fail;
    }
    char thr[32];
    snprintf(thr, sizeof thr, "%" PRIu64, threshold);
    if (!(env[k++] = kv("NUMAPROF_DIR", dir, "", "")) ||
        !(env[k++] = kv("NUMAPROF_ALLOC_THRESHOLD", thr, "", "")))
        goto fail;
    if (shim && *shim) {
        if (!(env[k++] = old_preload && *old_preload ? kv("LD_PRELOAD", shim, ":", old_preload)
                                                      : kv("LD_PRELOAD", shim, "", "")))
            goto fail;
    } else if (old_preload) {
        if (!(env[k++] = kv("LD_PRELOAD", old_preload, "", "")))
            goto fail;
    }
    env[k] = NULL;
    return env;
fail:
    nmp_env_free(env);
    return NULL;
}

void nmp_env_free(char **envp)
{
    if (!envp)
        return;
    for (char **p = envp; *p; p++)
        free(*p);
    free(envp);
}

int nmp_child_spawn(char **cmd, char **envp, const sigset_t *mask, struct nmp_child *c)
{
    int go[2], er[2];
    if (pipe2(go, O_CLOEXEC) != 0)
        return -1;
    if (pipe2(er, O_CLOEXEC) != 0) {
        close(go[0]);
        close(go[1]);
        return -1;
    }
    pid_t pid = fork();
    if (pid < 0) {
        int e = errno;
        close(go[0]);
        close(go[1]);
        close(er[0]);
        close(er[1]);
        errno = e;
        return -1;
    }
    if (pid == 0) {
        /* child: the signal mask numaprof-collect was started with (dispositions are
         * inherited untouched, e.g. SIGINT ignored in a background job), wait for the go
         * byte, exec */
        close(go[1]);
        close(er[0]);
        sigset_t none;
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, mask ? mask : &none, NULL);
        char b;
        ssize_t r;
        do
            r = read(go[0], &b, 1);
        while (r < 0 && errno == EINTR);
        if (r != 1)
            _exit(NMP_EXIT_SELF);
        execvpe(cmd[0], cmd, envp);
        int e = errno;
        ssize_t w = write(er[1], &e, sizeof e);
        (void)w;
        _exit(e == ENOENT ? NMP_EXIT_NOTFOUND : NMP_EXIT_NOEXEC);
    }
    close(go[0]);
    close(er[1]);
    c->pid = pid;
    c->go_fd = go[1];
    c->err_fd = er[0];
    return 0;
}

int nmp_child_release(struct nmp_child *c)
{
    char b = 1;
    ssize_t w;
    do
        w = write(c->go_fd, &b, 1);
    while (w < 0 && errno == EINTR);
    close(c->go_fd);
    c->go_fd = -1;
    int e = 0;
    ssize_t r;
    do
        r = read(c->err_fd, &e, sizeof e);
    while (r < 0 && errno == EINTR);
    close(c->err_fd);
    c->err_fd = -1;
    if (w != 1)
        e = EPIPE;
    if (r == (ssize_t)sizeof e && e != 0) {
        int st;
        while (waitpid(c->pid, &st, 0) < 0 && errno == EINTR)
            ;
        return e;
    }
    return 0;
}

int nmp_cpulist_parse(const char *s, int *cpus, int max)
{
    int n = 0;
    while (*s && *s != '\n') {
        char *end;
        long a = strtol(s, &end, 10);
        if (end == s)
            return -1;
        long b = a;
        s = end;
        if (*s == '-') {
            b = strtol(s + 1, &end, 10);
            if (end == s + 1)
                return -1;
            s = end;
        }
        for (long i = a; i <= b && n < max; i++)
            cpus[n++] = (int)i;
        if (*s == ',')
            s++;
    }
    return n;
}

void nmp_cpulist_format(const unsigned char *set, int n, char *out, size_t len)
{
    size_t pos = 0;
    out[0] = 0;
    for (int i = 0; i < n;) {
        if (!set[i]) {
            i++;
            continue;
        }
        int j = i;
        while (j + 1 < n && set[j + 1])
            j++;
        int w = j > i ? snprintf(out + pos, len - pos, "%s%d-%d", pos ? "," : "", i, j)
                      : snprintf(out + pos, len - pos, "%s%d", pos ? "," : "", i);
        if (w < 0 || (size_t)w >= len - pos) {
            out[pos] = 0;
            return;
        }
        pos += (size_t)w;
        i = j + 1;
    }
}
