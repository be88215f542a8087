/* Sampler tests: cpu lists, the child's environment, the stopped-child launch protocol,
 * and (where perf_event_open is allowed) one real collection of a small command.
 * Exit 0 = pass. */
#include "nmp_sampler.h"

#include <errno.h>
#include <linux/perf_event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>
#include "nmp_check.h"


static const char *env_get(char **env, const char *key)
{
    size_t n = strlen(key);
    for (; *env; env++)
        if (!strncmp(*env, key, n) && (*env)[n] == '=')
            return *env + n + 1;
    return NULL;
}

static void test_cpulist(void)
{
    int cpus[16];
    int n = nmp_cpulist_parse("0-3,8,10-11\n", cpus, 16);
    CHECK_MSG(n == 7 && cpus[0] == 0 && cpus[3] == 3 && cpus[4] == 8 && cpus[6] == 11,
          "parse: n=%d", n);
    unsigned char set[16] = {0};
    set[0] = set[1] = set[2] = set[5] = set[7] = set[8] = 1;
    char out[64];
    nmp_cpulist_format(set, 16, out, sizeof out);
    CHECK_MSG(!strcmp(out, "0-2,5,7-8"), "format: %s", out);
}

static void test_env(void)
{
    setenv("LD_PRELOAD", "/old/lib.so", 1);
    setenv("NUMAPROF_DIR", "/stale", 1);
    char **env = nmp_child_env("/x/libnumaprof_shim.so", "/out", 4096);
    CHECK_MSG(env != NULL, "env");
    if (env) {
        const char *p = env_get(env, "LD_PRELOAD");
        CHECK_MSG(p && !strcmp(p, "/x/libnumaprof_shim.so:/old/lib.so"), "LD_PRELOAD=%s", p);
        p = env_get(env, "NUMAPROF_DIR");
        CHECK_MSG(p && !strcmp(p, "/out"), "NUMAPROF_DIR=%s", p);
        p = env_get(env, "NUMAPROF_ALLOC_THRESHOLD");
        CHECK_MSG(p && !strcmp(p, "4096"), "threshold=%s", p);
        int count = 0;
        for (char **e = env; *e; e++)
            count += !strncmp(*e, "NUMAPROF_DIR=", 13);
        CHECK_MSG(count == 1, "NUMAPROF_DIR set %d times", count);
        nmp_env_free(env);
    }
    unsetenv("LD_PRELOAD");
    env = nmp_child_env(NULL, "/out", 65536);
    CHECK_MSG(env && !env_get(env, "LD_PRELOAD"), "no shim, no LD_PRELOAD");
    nmp_env_free(env);
    unsetenv("NUMAPROF_DIR");
}

static void test_launch(void)
{
    char *env[] = {"PATH=/usr/bin:/bin", NULL};
    struct nmp_child c;
    char *missing[] = {"numaprof-no-such-command", NULL};
    CHECK_MSG(nmp_child_spawn(missing, env, NULL, &c) == 0, "spawn");
    CHECK_MSG(nmp_child_release(&c) == ENOENT, "missing command reports ENOENT");

    char *ok[] = {"sh", "-c", "exit 5", NULL};
    CHECK_MSG(nmp_child_spawn(ok, env, NULL, &c) == 0, "spawn");
    CHECK_MSG(nmp_child_release(&c) == 0, "exec succeeds");
    int st = 0;
    CHECK_MSG(waitpid(c.pid, &st, 0) == c.pid && WIFEXITED(st) && WEXITSTATUS(st) == 5,
          "child exit status 5 (st=%d)", st);
}

static int perf_allowed(void)
{
    struct perf_event_attr a;
    memset(&a, 0, sizeof a);
    a.size = sizeof a;
    a.type = PERF_TYPE_SOFTWARE;
    a.config = PERF_COUNT_SW_CPU_CLOCK;
    a.exclude_kernel = 1;
    a.exclude_hv = 1;
    long fd = syscall(SYS_perf_event_open, &a, 0, -1, -1, 0);
    if (fd < 0)
        return 0;
    close((int)fd);
    return 1;
}

static void test_collect(void)
{
    if (!perf_allowed()) {
        printf("test_sampler: perf_event_open not permitted here, skipping the collection\n");
        return;
    }
    const char *tmp = getenv("NMP_TEST_TMP");
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/test_sampler.%d", tmp ? tmp : "/tmp", (int)getpid());
    CHECK_MSG(mkdir(dir, 0700) == 0, "mkdir %s", dir);
    char *cmd[] = {"sh", "-c", "i=0; while [ $i -lt 20000 ]; do i=$((i+1)); done; exit 3", NULL};
    struct nmp_config cfg = {.dir = dir, .freq = 997, .backend = NMP_REQ_SOFT,
                             .alloc_threshold = NMP_DEFAULT_ALLOC_THRESHOLD, .cmd = cmd,
                             .control_fd = -1, .release_fd = -1};
    char err[NMP_ERRLEN];
    int rc = nmp_collect_run(&cfg, err);
    CHECK_MSG(rc == 3, "exit status %d (%s)", rc, err);
    char path[8192];
    snprintf(path, sizeof path, "%s/collector.json", dir);
    FILE *f = fopen(path, "r");
    CHECK_MSG(f != NULL, "collector.json written");
    if (f) {
        char buf[16384];
        size_t n = fread(buf, 1, sizeof buf - 1, f);
        buf[n] = 0;
        fclose(f);
        CHECK_MSG(strstr(buf, "\"backend\": \"soft\"") != NULL, "backend soft");
        CHECK_MSG(strstr(buf, "\"exit_status\": 3") != NULL, "exit_status 3");
        CHECK_MSG(strstr(buf, "\"event\": \"cpu-clock\"") != NULL, "event");
        struct stat st;
        CHECK_MSG(stat(path, &st) == 0 && (st.st_mode & 0777) == 0600, "collector.json is 0600");
    }
    static const char *files[] = {"samples.time.col", "samples.addr.col", "faults.addr.col",
                                  "mappings.path.heap", "threads.tid.col", "page_nodes.node.col"};
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, files[i]);
        struct stat st;
        CHECK_MSG(stat(path, &st) == 0, "%s exists", files[i]);
    }
    /* mappings must include the shell's executable */
    snprintf(path, sizeof path, "%s/mappings.path.heap", dir);
    f = fopen(path, "r");
    if (f) {
        char buf[1 << 16];
        size_t n = fread(buf, 1, sizeof buf - 1, f);
        buf[n] = 0;
        int found = 0;
        for (size_t k = 0; k < n; k += strlen(buf + k) + 1)
            if (strstr(buf + k, "/sh") || strstr(buf + k, "dash") || strstr(buf + k, "bash"))
                found = 1;
        CHECK_MSG(found, "the shell's mapping was recorded");
        fclose(f);
    }
    /* child processes created later are followed: 70 forks give 70 more threads rows */
    char *forks[] = {"sh", "-c", "i=0; while [ $i -lt 70 ]; do (:) & i=$((i+1)); done; wait", NULL};
    cfg.cmd = forks;
    rc = nmp_collect_run(&cfg, err);
    CHECK_MSG(rc == 0, "fork loop exit status %d (%s)", rc, err);
    snprintf(path, sizeof path, "%s/threads.tid.col", dir);
    struct stat tst;
    CHECK_MSG(stat(path, &tst) == 0 && (tst.st_size - 16) / 4 >= 71,
          "threads rows: %lld", (long long)((tst.st_size - 16) / 4));

    char cmdline[8400];
    snprintf(cmdline, sizeof cmdline, "rm -rf '%s'", dir);
    CHECK_MSG(system(cmdline) == 0, "cleanup");
}

int main(void)
{
    test_cpulist();
    test_env();
    test_launch();
    test_collect();
    if (!failures)
        printf("test_sampler: all passed\n");
    return check_result();
}
