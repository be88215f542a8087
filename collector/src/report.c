/* collector.json: how the recording went (docs/profile-format.md, collector.json): the
 * backend and why, the events, the program's times and exit, every count (samples by
 * rule, lost, malformed, ...), the shim's and the decoder's totals and the warnings.
 * Written through a temporary file and rename(2), fsync'd. */
#include "nmp_collector.h"

#include "nmp_decode.h"

#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

static void json_str(FILE *f, const char *s)
{
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)s; p && *p; p++) {
        if (*p == '"' || *p == '\\')
            fprintf(f, "\\%c", *p);
        else if (*p < 0x20)
            fprintf(f, "\\u%04x", *p);
        else
            fputc(*p, f);
    }
    fputc('"', f);
}

static void json_str_or_null(FILE *f, const char *s)
{
    if (s)
        json_str(f, s);
    else
        fputs("null", f);
}

static void iso_time(const struct timespec *ts, char *out, size_t len)
{
    struct tm tm;
    gmtime_r(&ts->tv_sec, &tm);
    strftime(out, len, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

static const char *fault_event_name(enum nmp_fault_source s)
{
    switch (s) {
    case NMP_FAULTS_DONE: return "minor-faults+major-faults";
    case NMP_FAULTS_TP: return "exceptions:page_fault_user";
    case NMP_FAULTS_SW: return "page-faults";
    case NMP_FAULTS_UNTRIED:
    case NMP_FAULTS_NONE: break;
    }
    return NULL;
}

static void write_backend(FILE *f, const struct nmp_collector *c)
{
    const struct nmp_backend_choice *be = &c->be;
    fprintf(f, "{\"backend\": \"%s\",\n \"backend_reason\": {", nmp_backend_name(be->backend));
    static const enum nmp_backend order[NMP_NBACKENDS] = {NMP_BACKEND_PEBS, NMP_BACKEND_IBS,
                                                          NMP_BACKEND_SOFT};
    for (int b = 0; b < NMP_NBACKENDS; b++) {
        fprintf(f, "%s\"%s\": ", b ? ", " : "", nmp_backend_name(order[b]));
        json_str(f, be->reason[order[b]]);
    }
    fprintf(f, "},\n \"freq\": %u, \"event\": \"%s\", \"fault_event\": ", c->cfg->freq,
            be->backend == NMP_BACKEND_SOFT ? "cpu-clock" : nmp_backend_name(be->backend));
    const char *fault_event = fault_event_name(c->ev.fault_source);
    if (fault_event)
        fprintf(f, "\"%s\"", fault_event);
    else
        fputs("null", f);
    fprintf(f, ", \"fault_period\": %u", nmp_fault_period(c->cfg));
}

static void write_run(FILE *f, const struct nmp_collector *c)
{
    const struct nmp_run *run = &c->run;
    char t0[32], t1[32];
    iso_time(&run->start_rt, t0, sizeof t0);
    iso_time(&run->end_rt, t1, sizeof t1);
    fprintf(f, ",\n \"start_ns\": %" PRIu64 ", \"end_ns\": %" PRIu64
               ", \"start_time\": \"%s\", \"end_time\": \"%s\",\n",
            run->start_ns, run->end_ns, t0, t1);
    if (run->have_status)
        fprintf(f, " \"exit_status\": %d, ", run->exit_status);
    else
        fputs(" \"exit_status\": null, ", f);
    if (run->term_signal)
        fprintf(f, "\"signal\": %d, ", run->term_signal);
    else
        fputs("\"signal\": null, ", f);
    if (run->interrupted)
        fprintf(f, "\"interrupted\": \"%s\", ", run->interrupted);
    else
        fputs("\"interrupted\": null, ", f);
    fputs("\"exec_error\": ", f);
    json_str_or_null(f, run->exec_error[0] ? run->exec_error : NULL);
    fputs(", ", f);
    fprintf(f, "\"pid\": %d, \"attached\": %s,\n", (int)run->root,
            c->cfg->attach_pid > 0 ? "true" : "false");
}

static void write_counts(FILE *f, const struct nmp_counts *n)
{
    /* no address although the sample is a user-space memory instruction (a gather's
     * base register is not the element's address, but its object is resolved) */
    uint64_t unresolved = n->samples - n->with_address - n->rules[NMP_RULE_NO_MEM] -
                          n->rules[NMP_RULE_KERNEL] - n->rules[NMP_RULE_SPIN] -
                          n->rules[NMP_RULE_VSIB_BASE] - n->rules[NMP_RULE_DIVIDE];
    fprintf(f,
            " \"counts\": {\"samples\": %" PRIu64 ", \"with_address\": %" PRIu64
            ", \"lost\": %" PRIu64 ", \"throttled\": %" PRIu64 ", \"unresolved\": %" PRIu64
            ", \"faults\": %" PRIu64 ", \"page_queries\": %" PRIu64 ", \"outside_user\": %" PRIu64
            ", \"malformed\": %" PRIu64 ", \"hw_decode_errors\": %" PRIu64 "},\n \"rules\": {",
            n->samples, n->with_address, n->lost, n->throttled, unresolved, n->faults,
            n->page_queries, n->outside_user, n->malformed, n->hw_decode_errors);
    const char *sep = "";
#define RULE_COUNT_(id, name, value) \
    fprintf(f, "%s\"" #name "\": %" PRIu64, sep, n->rules[NMP_RULE_##id]); \
    sep = ", ";
    NMP_SAMPLE_RULES(RULE_COUNT_)
#undef RULE_COUNT_
    fputs("},\n", f);
}

static void write_totals(FILE *f, const struct nmp_collector *c, const struct nmp_shim_totals *shim)
{
    fprintf(f,
            " \"shim\": {\"small_allocs\": %" PRIu64 ", \"small_bytes\": %" PRIu64
            ", \"tracked_allocs\": %" PRIu64 ", \"sampled_allocs\": %" PRIu64
            ", \"short_lived_allocs\": %" PRIu64 ", \"processes\": %" PRIu64 "},\n",
            shim->small_allocs, shim->small_bytes, shim->tracked_allocs, shim->sampled_allocs,
            shim->short_lived_allocs, shim->processes);
    struct nmp_decode_stats ds;
    nmp_decoder_stats(c->dec, &ds);
    fprintf(f,
            " \"decoder\": {\"cache_hits\": %" PRIu64 ", \"cache_misses\": %" PRIu64
            ", \"functions\": %" PRIu64 ", \"resyncs\": %" PRIu64 "},\n",
            ds.cache_hits, ds.cache_misses, ds.functions, ds.resyncs);
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    uint64_t self_ns = (uint64_t)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000000000ULL +
                       (uint64_t)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1000ULL;
    const struct nmp_node_counters *nodes = &c->nodes;
    fprintf(f, " \"collector_cpu_ns\": %" PRIu64 ",\n \"node_counters\": {\"count\": %d, \"why\": ",
            self_ns, nodes->n > 0 ? nodes->n : 0);
    json_str_or_null(f, nodes->n > 0 || !nodes->why[0] ? NULL : nodes->why);
    fputs("},\n", f);
}

int nmp_report_write(struct nmp_collector *c, const struct nmp_shim_totals *shim)
{
    char tmp[4096], path[4096];
    snprintf(path, sizeof path, "%s/collector.json", c->cfg->dir);
    snprintf(tmp, sizeof tmp, "%s/.collector.json.tmp", c->cfg->dir);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0)
        return -1;
    FILE *f = fdopen(fd, "w");
    if (!f) {
        close(fd);
        return -1;
    }
    write_backend(f, c);
    write_run(f, c);
    write_counts(f, &c->n);
    write_totals(f, c, shim);
    fputs(" \"write_error\": ", f);
    json_str_or_null(f, c->write_errno ? strerror(c->write_errno) : NULL);
    fputs(",\n \"warnings\": [", f);
    for (size_t i = 0; i < c->nwarn; i++) {
        if (i)
            fputs(", ", f);
        json_str(f, c->warnings[i]);
    }
    fputs("]}\n", f);
    int bad = ferror(f);
    if (fflush(f) != 0 || fsync(fd) != 0)
        bad = 1;
    if (fclose(f) != 0 || bad) {
        unlink(tmp);
        return -1;
    }
    return rename(tmp, path);
}
