/* numaprof: the command users run.  It starts the collector itself for an ordinary
 * `numaprof record [options] [--] COMMAND...` and runs the Python CLI (numaprof-cli, the
 * same directory) for everything else.
 *
 * A Python interpreter takes tens of milliseconds to start and import the CLI (more in a
 * development install); `record` used to spend them before the program started, so that
 * a short program paid them whole.  Here the collector, which makes the profile directory
 * (collector/src/outdir.c) and starts the program, is forked first, and this process then
 * becomes the CLI (execv), which starts while the program runs and adopts the collector:
 * it writes the manifest, relays the signals sent to it, waits, and finishes the profile
 * as it does when it started the collector itself (cli/supervise.py, cli/recording.py).
 * Nothing else is done here: whatever this reads differently from the CLI, or cannot
 * decide (an option it does not know, -h, -p, %r in -o), goes to the CLI unchanged, which
 * then starts the collector itself.  tests/unit/test_launcher.py checks that both read
 * the same arguments alike (NUMAPROF_LAUNCHER_DRY_RUN prints what this would run).
 *
 * For the CLI the launcher sets NUMAPROF_LAUNCHED=PID:CONTROL:ERROR (the collector's pid,
 * this end of its control socket, the read end of its error pipe), made subreaper and
 * with the signals the CLI relays (those not ignored) and SIGCHLD blocked, so that none
 * is lost before the CLI takes them.  The collector itself gets the caller's mask,
 * dispositions and descriptors, as the program must (cli/supervise.py).
 */
#include "numaprof_defaults.h"

#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <limits.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#define CLI_NAME "numaprof-cli"

/* What the CLI reads from the fast path (cli/recording.py, parse_args and make_config). */
struct record_args {
    const char *output; /* as given; NULL: the default profile */
    const char *backend;
    uint64_t freq, alloc_threshold, fault_period; /* 0: not given */
    const char *small_sample, *short_lived;       /* decimal, normalised; NULL: not given */
    char **command;
};

/* record's integer options and their ranges: cli/recording.py's INT_OPTIONS, which the
 * click command reads too; the test of this file compares them. */
static const struct int_option {
    const char *name;
    uint64_t least, most;
} INT_OPTIONS[] = {
    {"--freq", 10, 100000},
    {"--alloc-threshold", 1, UINT64_MAX},
    {"--small-sample", 0, 0x7FFFFFFF},
    {"--short-lived", 0, (UINT64_C(1) << 63) - 1},
    {"--fault-period", 1, 1u << 20},
};

static char numbers[2][24]; /* --small-sample, --short-lived, normalised */

/* A decimal of ASCII digits only, as Python's str.isascii() and isdigit(); 0 on
 * success.  A number past UINT64_MAX is not this one's to read (the CLI reads it). */
static int parse_decimal(const char *s, uint64_t *out)
{
    uint64_t v = 0;
    if (!*s)
        return -1;
    for (; *s; s++) {
        if (*s < '0' || *s > '9')
            return -1;
        unsigned d = (unsigned)(*s - '0');
        if (v > (UINT64_MAX - d) / 10)
            return -1;
        v = v * 10 + d;
    }
    *out = v;
    return 0;
}

/* parse_args of cli/recording.py: 0 and `a` for the ordinary forms, -1 for anything
 * else (which the CLI parses and explains). */
static int parse_record(int argc, char **argv, struct record_args *a)
{
    memset(a, 0, sizeof *a);
    a->backend = "auto";
    int i = 0;
    while (i < argc) {
        const char *arg = argv[i];
        if (!strcmp(arg, "--")) {
            i++;
            break;
        }
        if (arg[0] != '-' || !strcmp(arg, "-"))
            break;
        char name[64];
        const char *value = NULL;
        const char *eq = strncmp(arg, "--", 2) ? NULL : strchr(arg, '=');
        size_t len = eq ? (size_t)(eq - arg) : strlen(arg);
        if (len >= sizeof name)
            return -1;
        memcpy(name, arg, len);
        name[len] = 0;
        if (!strcmp(name, "--redact-args") && !eq) {
            i++; /* the CLI keeps it in the manifest: nothing for the collector */
            continue;
        }
        const struct int_option *opt = NULL;
        for (size_t k = 0; k < sizeof INT_OPTIONS / sizeof *INT_OPTIONS; k++)
            if (!strcmp(name, INT_OPTIONS[k].name))
                opt = &INT_OPTIONS[k];
        if (!opt && strcmp(name, "-o") && strcmp(name, "--output") && strcmp(name, "--backend"))
            return -1;
        if (eq) {
            value = eq + 1;
        } else {
            if (i + 1 >= argc)
                return -1;
            value = argv[++i];
        }
        i++;
        if (value[0] == '-' || !value[0])
            return -1;
        if (!strcmp(name, "-o") || !strcmp(name, "--output")) {
            a->output = value;
        } else if (!strcmp(name, "--backend")) {
            if (strcmp(value, "auto") && strcmp(value, "pebs") && strcmp(value, "ibs") &&
                strcmp(value, "soft"))
                return -1;
            a->backend = value;
        } else {
            uint64_t v;
            if (parse_decimal(value, &v) || v < opt->least || v > opt->most)
                return -1;
            if (!strcmp(name, "--freq"))
                a->freq = v;
            else if (!strcmp(name, "--alloc-threshold"))
                a->alloc_threshold = v;
            else if (!strcmp(name, "--fault-period"))
                a->fault_period = v;
            else {
                int k = !strcmp(name, "--short-lived");
                snprintf(numbers[k], sizeof numbers[k], "%llu", (unsigned long long)v);
                *(k ? &a->short_lived : &a->small_sample) = numbers[k];
            }
        }
    }
    char **command = argv + i;
    int n = argc - i;
    if (n > 0 && !strcmp(command[0], "--")) {
        command++;
        n--;
    }
    if (n <= 0)
        return -1;
    a->command = command;
    return 0;
}

/* expand_output of cli/recording.py for %h, %p and %% (%r, any other % and an overlong
 * path: -1, for the CLI), then the path as pathlib.Path prints it: no empty or "."
 * components, no trailing slash (a path pathlib would keep otherwise, "//x" or one ending
 * in "..", or ".": -1). */
static int output_path(const char *template, char *out, size_t cap)
{
    char buf[PATH_MAX];
    size_t n = 0;
    for (const char *p = template; *p; p++) {
        const char *piece = NULL;
        char pid[24];
        struct utsname u;
        if (p[0] == '%' && p[1]) {
            if (p[1] == 'h') {
                if (uname(&u) != 0)
                    return -1;
                piece = u.nodename;
            } else if (p[1] == 'p') {
                snprintf(pid, sizeof pid, "%ld", (long)getpid());
                piece = pid;
            } else if (p[1] == '%') {
                piece = "%";
            } else {
                return -1;
            }
            p++;
        }
        size_t len = piece ? strlen(piece) : 1;
        if (n + len >= sizeof buf)
            return -1;
        memcpy(buf + n, piece ? piece : p, len);
        n += len;
    }
    buf[n] = 0;
    if (!strncmp(buf, "//", 2) && buf[2] != '/')
        return -1;
    size_t m = 0;
    if (buf[0] == '/')
        out[m++] = '/';
    for (char *save = NULL, *part = strtok_r(buf, "/", &save); part;
         part = strtok_r(NULL, "/", &save)) {
        if (!strcmp(part, "."))
            continue;
        size_t len = strlen(part);
        int sep = m > 0 && out[m - 1] != '/';
        if (m + sep + len + 1 > cap)
            return -1;
        if (sep)
            out[m++] = '/';
        memcpy(out + m, part, len);
        m += len;
    }
    out[m] = 0;
    const char *last = strrchr(out, '/');
    last = last ? last + 1 : out;
    return !*last || !strcmp(last, "..") ? -1 : 0;
}

/* The directory of this executable, with a trailing slash. */
static int own_dir(char *dir, size_t cap)
{
    ssize_t n = readlink("/proc/self/exe", dir, cap - 1);
    if (n <= 0)
        return -1;
    dir[n] = 0;
    char *slash = strrchr(dir, '/');
    if (!slash)
        return -1;
    slash[1] = 0;
    return 0;
}

static int executable(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode) && access(path, X_OK) == 0;
}

/* The collector's directory, as numaprof/paths.py finds it: NUMAPROF_LIBEXEC; in an
 * editable install the checkout's build (NMP_CHECKOUT_LIBEXEC, where `make build` puts
 * it); else the installed package's, beside this executable's directory (bin/ and
 * lib/pythonX.Y/site-packages/numaprof/libexec of the same prefix).  -1 if none, or more
 * than one interpreter's. */
static int libexec_dir(const char *bindir, char *out, size_t cap)
{
    char path[PATH_MAX + 64];
    const char *env = getenv("NUMAPROF_LIBEXEC");
    if (env && *env) {
        snprintf(path, sizeof path, "%s/numaprof-collect", env);
        if (!executable(path))
            return -1; /* the CLI says what is wrong with it */
        return snprintf(out, cap, "%s", env) < (int)cap ? 0 : -1;
    }
#ifdef NMP_CHECKOUT_LIBEXEC
    snprintf(path, sizeof path, "%s/numaprof-collect", NMP_CHECKOUT_LIBEXEC);
    if (executable(path))
        return snprintf(out, cap, "%s", NMP_CHECKOUT_LIBEXEC) < (int)cap ? 0 : -1;
#endif
    snprintf(path, sizeof path, "%s../libexec/numaprof-collect", bindir);
    if (executable(path)) /* a plain CMake installation (bin/, libexec/) */
        return snprintf(out, cap, "%s../libexec", bindir) < (int)cap ? 0 : -1;
    glob_t g;
    snprintf(path, sizeof path, "%s../lib/python3*/*-packages/numaprof/libexec/numaprof-collect",
             bindir);
    int rc = -1;
    if (glob(path, GLOB_NOSORT, NULL, &g) == 0 && g.gl_pathc == 1) {
        char *slash = strrchr(g.gl_pathv[0], '/');
        *slash = 0;
        char real[PATH_MAX]; /* as paths.py names it: the package's resolved directory */
        if (realpath(g.gl_pathv[0], real))
            rc = snprintf(out, cap, "%s", real) < (int)cap ? 0 : -1;
    }
    globfree(&g);
    return rc;
}

static const int STOP_SIGNALS[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT};
static const char *const SHIM_SETTINGS[] = {"NUMAPROF_SMALL_SAMPLE", "NUMAPROF_SHORT_LIVED"};

/* Starts the collector for `a`; its pid, with *ctl and *err this end of its control
 * socket and error pipe.  -1 if it could not be started (the CLI then tries, and says). */
static pid_t start_collector(const char *libexec, const char *output, const struct record_args *a,
                             int *ctl, int *err, const sigset_t *callers)
{
    char collector[PATH_MAX + 32], shim[PATH_MAX + 32];
    snprintf(collector, sizeof collector, "%s/numaprof-collect", libexec);
    snprintf(shim, sizeof shim, "%s/libnumaprof_shim.so", libexec);
    int sv[2], ep[2], xp[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
        return -1;
    if (pipe2(ep, O_CLOEXEC) != 0) {
        close(sv[0]);
        close(sv[1]);
        return -1;
    }
    if (pipe2(xp, O_CLOEXEC) != 0) {
        close(sv[0]), close(sv[1]), close(ep[0]), close(ep[1]);
        return -1;
    }
    char efd[16], cfd[16], thr[24], freq[24], period[24];
    snprintf(efd, sizeof efd, "%d", ep[1]);
    snprintf(cfd, sizeof cfd, "%d", sv[1]);
    snprintf(thr, sizeof thr, "%llu", (unsigned long long)(a->alloc_threshold
                                                                ? a->alloc_threshold
                                                                : NMP_DEFAULT_ALLOC_THRESHOLD));
    snprintf(freq, sizeof freq, "%llu", (unsigned long long)a->freq);
    snprintf(period, sizeof period, "%llu", (unsigned long long)a->fault_period);
    size_t ncmd = 0;
    while (a->command[ncmd])
        ncmd++;
    char **argv = calloc(ncmd + 24, sizeof *argv);
    if (!argv)
        return -1;
    size_t k = 0;
    /* the order of cli/recording.py's _collector_argv, after run_collector's two fds */
    const char *fixed[] = {collector, "--error-fd", efd, "--control-fd", cfd, "-o", output,
                           "--rotate", "--backend", a->backend, "--alloc-threshold", thr};
    for (size_t i = 0; i < sizeof fixed / sizeof *fixed; i++)
        argv[k++] = (char *)fixed[i];
    if (access(shim, F_OK) == 0) {
        argv[k++] = "--shim";
        argv[k++] = shim;
    }
    if (a->freq) {
        argv[k++] = "--freq";
        argv[k++] = freq;
    }
    if (a->fault_period) {
        argv[k++] = "--fault-period";
        argv[k++] = period;
    }
    argv[k++] = "--";
    for (size_t i = 0; i < ncmd; i++)
        argv[k++] = a->command[i];
    argv[k] = NULL;
    if (getenv("NUMAPROF_LAUNCHER_DRY_RUN")) { /* the test's view: what would be run */
        for (size_t i = 0; i < sizeof SHIM_SETTINGS / sizeof *SHIM_SETTINGS; i++)
            if (getenv(SHIM_SETTINGS[i]))
                printf("env %s=%s\n", SHIM_SETTINGS[i], getenv(SHIM_SETTINGS[i]));
        for (size_t i = 0; i < k; i++)
            printf("%s%s", i ? "\n" : "", i == 2 || i == 4 ? "FD" : argv[i]);
        printf("\n");
        exit(0);
    }
    pid_t pid = fork();
    if (pid == 0) {
        /* the collector: the caller's mask, and only the two descriptors it is given */
        sigprocmask(SIG_SETMASK, callers, NULL);
        fcntl(ep[1], F_SETFD, 0);
        fcntl(sv[1], F_SETFD, 0);
        execv(collector, argv);
        int e = errno;
        (void)!write(xp[1], &e, sizeof e);
        _exit(127);
    }
    free(argv);
    close(xp[1]);
    close(ep[1]);
    close(sv[1]);
    int e = 0;
    ssize_t n = pid > 0 ? read(xp[0], &e, sizeof e) : 0;
    close(xp[0]);
    if (pid < 0 || n > 0) {
        if (pid > 0)
            waitpid(pid, NULL, 0);
        close(ep[0]);
        close(sv[0]);
        return -1;
    }
    /* the CLI's ends, inherited through its exec */
    fcntl(ep[0], F_SETFD, 0);
    fcntl(sv[0], F_SETFD, 0);
    *ctl = sv[0];
    *err = ep[0];
    return pid;
}

int main(int argc, char **argv)
{
    char bindir[PATH_MAX], cli[PATH_MAX + 32];
    unsetenv("NUMAPROF_LAUNCHED"); /* only ever this process's, set below */
    if (own_dir(bindir, sizeof bindir) != 0) {
        fprintf(stderr, "numaprof: cannot find the directory of this executable\n");
        return 125;
    }
    snprintf(cli, sizeof cli, "%s%s", bindir, CLI_NAME);
    int first = argc > 1 && (!strcmp(argv[1], "-v") || !strcmp(argv[1], "--verbose")) ? 2 : 1;
    struct record_args a;
    char output[PATH_MAX], libexec[PATH_MAX];
    int fast = argc > first && !strcmp(argv[first], "record") &&
               parse_record(argc - first - 1, argv + first + 1, &a) == 0 &&
               output_path(a.output ? a.output : NMP_DEFAULT_PROFILE, output, sizeof output) == 0 &&
               libexec_dir(bindir, libexec, sizeof libexec) == 0 && executable(cli);
    if (getenv("NUMAPROF_LAUNCHER_DRY_RUN") && !fast) {
        printf("cli\n");
        return 0;
    }
    if (fast) {
        /* the shim's settings reach it through the environment, as make_config sets them */
        if (a.small_sample)
            setenv(SHIM_SETTINGS[0], a.small_sample, 1);
        if (a.short_lived)
            setenv(SHIM_SETTINGS[1], a.short_lived, 1);
        sigset_t block, callers;
        sigemptyset(&block);
        for (size_t i = 0; i < sizeof STOP_SIGNALS / sizeof *STOP_SIGNALS; i++) {
            struct sigaction sa;
            if (sigaction(STOP_SIGNALS[i], NULL, &sa) == 0 && sa.sa_handler != SIG_IGN)
                sigaddset(&block, STOP_SIGNALS[i]);
        }
        sigaddset(&block, SIGCHLD);
        sigprocmask(SIG_BLOCK, &block, &callers);
        /* orphans (the program, if the collector dies) come to the CLI, as when it
         * starts the collector itself */
        prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
        int ctl, err;
        pid_t pid = start_collector(libexec, output, &a, &ctl, &err, &callers);
        if (pid > 0) {
            char launched[64];
            snprintf(launched, sizeof launched, "%ld:%d:%d", (long)pid, ctl, err);
            setenv("NUMAPROF_LAUNCHED", launched, 1);
        } else {
            prctl(PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0);
            sigprocmask(SIG_SETMASK, &callers, NULL);
        }
    }
    argv[0] = cli;
    execv(cli, argv);
    fprintf(stderr, "numaprof: cannot run %s: %s\n", cli, strerror(errno));
    return 125;
}
