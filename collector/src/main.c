/* numaprof-collect: argument parsing only; the work is in sampler.c and its modules.
 *
 *   numaprof-collect -o DIR [--freq HZ] [--backend auto|soft|pebs|ibs]
 *                    [--shim LIB] [--alloc-threshold BYTES] [--fault-period N]
 *                    [-p PID --duration SECONDS [--alloc-dir DIR] [--release-fd FD] [--children]]
 *                    [--error-fd FD] [--control-fd FD] [--rotate]
 *                    -- CMD ARGS...
 *   numaprof-collect --list-events [--json]
 *   numaprof-collect --schema     (the profile tables and sample rules, as JSON)
 *   numaprof-collect --convert-shim -o DIR
 *   numaprof-collect --source-files EXE...   (srcfiles.c: each one's count, then its
 *                    sources' paths, all NUL-terminated)
 *
 * Exit status: the command's; 128+N if it died of signal N; 127 command not found;
 * 126 not executable; 125 numaprof-collect itself failed (one line on stderr).
 * The one line of a failure (of the collector, not of the command) goes to stderr, or to
 * FD with --error-fd, so that `numaprof record` can say it in its own one line.
 * --control-fd is a stream socket to numaprof record: the collector writes "pid N\n" when
 * the command is started; numaprof record writes one byte (the signal number) for each
 * stopping signal it receives, and its end of file means numaprof record is gone
 * (signals.c).  Both descriptors are close-on-exec: the command never sees them.
 * --rotate: DIR is made anew, an existing profile there kept as DIR.old (outdir.c); with
 * --control-fd the collector first writes "out K\n" (K 1 if it kept one, else 0).
 * --convert-shim turns the allocation shim's files of DIR into the objects table, for a
 * profile whose collector was killed before it could (numaprof record does it then).
 * --alloc-dir DIR (with -p): the program runs with the allocation shim writing into DIR
 * (a command numaprof record started to record in slices); the allocations alive during
 * this recording become its objects, and DIR is left as it is.  --release-fd FD (with
 * -p): once attached, one byte is written to FD (and FD closed): the process waits for it
 * before its exec, so that it is recorded from its first instruction.  --children (with
 * -p): the processes PID started before the attach, and theirs, are recorded too (those
 * it starts after are followed in any case).
 */
#include "nmp_hw.h"
#include "nmp_sampler.h"
#include "nmp_schema.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

static int error_fd = STDERR_FILENO;

static int fail(const char *msg, const char *arg)
{
    dprintf(error_fd, "numaprof: %s%s%s\n", msg, arg ? ": " : "", arg ? arg : "");
    return NMP_EXIT_SELF;
}

/* The format, every table and column this build writes and the sample rules, for the
 * tests that compare them with the Python reader's reading of numaprof_format.h. */
static int print_schema(FILE *f)
{
    fprintf(f, "{\"format\": \"%s\", \"version\": %d, \"magic\": \"%s\", \"tables\": {",
            NMP_PROFILE_FORMAT, NMP_PROFILE_VERSION, NMP_COL_MAGIC);
    for (int t = 0; t < NMP_NTABLES; t++) {
        const struct nmp_table_schema *s = &nmp_schema[t];
        fprintf(f, "%s\"%s\": [", t ? ", " : "", s->name);
        for (int i = 0; i < s->ncols; i++)
            fprintf(f, "%s[\"%s\", \"%s\", %s, %s]", i ? ", " : "", s->cols[i].name,
                    nmp_coltype_dtype(s->cols[i].type), s->required[i] ? "true" : "false",
                    s->cols[i].type == NMP_STR ? "true" : "false");
        fputc(']', f);
    }
    fputs("}, \"rules\": {", f);
    const char *sep = "";
#define PRINT_RULE_(id, name, value) fprintf(f, "%s\"" #name "\": %d", sep, value), sep = ", ";
    NMP_SAMPLE_RULES(PRINT_RULE_)
#undef PRINT_RULE_
    fputs("}}\n", f);
    return ferror(f) ? NMP_EXIT_SELF : 0;
}

static int parse_u64(const char *s, uint64_t *out)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || end == s || *end || s[0] == '-')
        return -1;
    *out = v;
    return 0;
}

/* An open descriptor given on the command line, made close-on-exec (not inherited by the
 * command); -1 if it is not one. */
static int parse_fd(const char *s)
{
    uint64_t v;
    if (parse_u64(s, &v) || v > 0x7fffffff || fcntl((int)v, F_SETFD, FD_CLOEXEC) != 0)
        return -1;
    return (int)v;
}

/* The recorded share of page faults when --fault-period is not given: every fault where
 * transparent huge pages are "always" on (an array's faults are then 2 MiB each, few and
 * cheap to record, and one in 17 would leave arrays of tens of MiB with a record or
 * two), else one in NMP_DEFAULT_FAULT_PERIOD. */
static unsigned default_fault_period(void)
{
    char line[128] = "";
    FILE *f = fopen("/sys/kernel/mm/transparent_hugepage/enabled", "re");
    if (f) {
        if (!fgets(line, sizeof line, f))
            line[0] = 0;
        fclose(f);
    }
    return strstr(line, "[always]") ? 1 : NMP_DEFAULT_FAULT_PERIOD;
}

int main(int argc, char **argv)
{
    struct nmp_config cfg = {.freq = NMP_DEFAULT_FREQ, .backend = NMP_REQ_AUTO,
                             .alloc_threshold = NMP_DEFAULT_ALLOC_THRESHOLD, .control_fd = -1,
                             .release_fd = -1};
    static const struct option opts[] = {
        {"output", required_argument, 0, 'o'},   {"freq", required_argument, 0, 'F'},
        {"backend", required_argument, 0, 'b'},  {"shim", required_argument, 0, 's'},
        {"alloc-threshold", required_argument, 0, 't'},
        {"fault-period", required_argument, 0, 'P'},
        {"pid", required_argument, 0, 'p'},      {"duration", required_argument, 0, 'd'},
        {"list-events", no_argument, 0, 'L'},    {"json", no_argument, 0, 'J'},
        {"error-fd", required_argument, 0, 'E'}, {"control-fd", required_argument, 0, 'C'},
        {"convert-shim", no_argument, 0, 'S'},   {"schema", no_argument, 0, 'D'},
        {"alloc-dir", required_argument, 0, 'A'}, {"release-fd", required_argument, 0, 'R'},
        {"children", no_argument, 0, 'K'},       {"rotate", no_argument, 0, 'O'},
        {"source-files", no_argument, 0, 'Q'},
        {0, 0, 0, 0},
    };
    int ch, list_events = 0, json = 0, convert_shim = 0, schema = 0, rotate = 0, sources = 0;
    uint64_t v;
    opterr = 0;
    while ((ch = getopt_long(argc, argv, "+o:F:b:s:t:p:d:", opts, NULL)) != -1) {
        switch (ch) {
        case 'o':
            cfg.dir = optarg;
            break;
        case 'F':
            if (parse_u64(optarg, &v) || v == 0 || v > 100000)
                return fail("--freq must be 1..100000 Hz", optarg);
            cfg.freq = (unsigned)v;
            break;
        case 'b':
            if (!strcmp(optarg, "auto"))
                cfg.backend = NMP_REQ_AUTO;
            else if (!strcmp(optarg, "soft"))
                cfg.backend = NMP_REQ_SOFT;
            else if (!strcmp(optarg, "pebs"))
                cfg.backend = NMP_REQ_PEBS;
            else if (!strcmp(optarg, "ibs"))
                cfg.backend = NMP_REQ_IBS;
            else
                return fail("--backend must be auto, soft, pebs or ibs", optarg);
            break;
        case 's':
            cfg.shim = optarg;
            break;
        case 't':
            if (parse_u64(optarg, &v))
                return fail("--alloc-threshold must be a byte count", optarg);
            cfg.alloc_threshold = v;
            break;
        case 'P':
            if (parse_u64(optarg, &v) || v == 0 || v > (1u << 20))
                return fail("--fault-period must be 1..1048576", optarg);
            cfg.fault_period = (unsigned)v;
            break;
        case 'p':
            if (parse_u64(optarg, &v) || v == 0 || v > 0x7fffffff)
                return fail("-p needs a process id", optarg);
            cfg.attach_pid = (pid_t)v;
            break;
        case 'd': {
            char *end;
            cfg.duration = strtod(optarg, &end);
            if (end == optarg || *end || cfg.duration < 0)
                return fail("--duration must be a number of seconds", optarg);
            break;
        }
        case 'L':
            list_events = 1;
            break;
        case 'J':
            json = 1;
            break;
        case 'D':
            schema = 1;
            break;
        case 'E': {
            int fd = parse_fd(optarg); /* a bad fd leaves errors on stderr */
            if (fd < 0)
                return fail("--error-fd needs an open file descriptor", optarg);
            error_fd = fd;
            break;
        }
        case 'C':
            if ((cfg.control_fd = parse_fd(optarg)) < 0)
                return fail("--control-fd needs an open file descriptor", optarg);
            break;
        case 'S':
            convert_shim = 1;
            break;
        case 'A':
            cfg.alloc_dir = optarg;
            break;
        case 'K':
            cfg.children = 1;
            break;
        case 'O':
            rotate = 1;
            break;
        case 'Q':
            sources = 1;
            break;
        case 'R':
            if ((cfg.release_fd = parse_fd(optarg)) < 0)
                return fail("--release-fd needs an open file descriptor", optarg);
            break;
        default:
            return fail("unknown or incomplete option", argv[optind - 1]);
        }
    }
    /* the modes that print to stdout: it is asked for */
    if (schema)
        return print_schema(stdout);
    if (list_events)
        return nmp_hw_list_events(stdout, json) == 0 ? 0 : NMP_EXIT_SELF;
    if (sources)
        return nmp_source_files(argv + optind, argc - optind, stdout) == 0 ? 0 : NMP_EXIT_SELF;
    if (!cfg.dir)
        return fail("-o DIR is required", NULL);
    struct stat st;
    if (rotate && convert_shim)
        return fail("--rotate makes a new profile; --convert-shim finishes one", NULL);
    if (!rotate && (stat(cfg.dir, &st) != 0 || !S_ISDIR(st.st_mode)))
        return fail("output directory does not exist", cfg.dir);
    char err[NMP_ERRLEN] = "";
    if (convert_shim) {
        struct nmp_shim_totals totals;
        if (nmp_shim_convert(cfg.dir, &totals, err) != 0)
            return fail("allocation shim data", err[0] ? err : strerror(errno));
        return 0;
    }
    if (cfg.alloc_dir && (cfg.attach_pid <= 0 || stat(cfg.alloc_dir, &st) != 0 || !S_ISDIR(st.st_mode)))
        return fail("--alloc-dir needs -p and an existing directory", cfg.alloc_dir);
    if ((cfg.release_fd >= 0 || cfg.children) && cfg.attach_pid <= 0)
        return fail(cfg.children ? "--children needs -p" : "--release-fd needs -p", NULL);
    if (cfg.attach_pid > 0) {
        if (optind < argc)
            return fail("give either -p PID or a command, not both", NULL);
    } else {
        if (optind >= argc)
            return fail("no command given", NULL);
        cfg.cmd = argv + optind;
    }
    if (!cfg.fault_period)
        cfg.fault_period = default_fault_period();
    if (cfg.shim && access(cfg.shim, R_OK) != 0)
        return fail("allocation shim not readable", cfg.shim);
    if (rotate) {
        int kept;
        if (nmp_outdir_prepare(cfg.dir, &kept, err) != 0)
            return fail(err, NULL);
        if (cfg.control_fd >= 0) {
            /* numaprof record learns that the directory is its own (it may remove it if
             * the run cannot finish) and whether the previous profile is in <dir>.old */
            char line[16];
            int len = snprintf(line, sizeof line, "out %d\n", kept);
            (void)!send(cfg.control_fd, line, (size_t)len, MSG_NOSIGNAL); /* gone: seen later */
        }
    }

    int rc = nmp_collect_run(&cfg, err);
    /* numaprof record may be gone (killed): no SIGPIPE for this last line.  The command
     * was started long ago with the dispositions numaprof-collect was given. */
    signal(SIGPIPE, SIG_IGN);
    if (err[0])
        dprintf(error_fd, "numaprof: %s\n", err);
    return rc;
}
