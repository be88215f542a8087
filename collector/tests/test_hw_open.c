/* nmp_hw_attrs() against kernels that refuse part of what it asks, played by a stand-in
 * perf_event_open (nmp_hw_set_open):
 *  - before Linux 5.12 PERF_SAMPLE_WEIGHT_STRUCT is unknown and perf_copy_attr() refuses
 *    the attr with EINVAL (Linux kernel/events/core.c: sample_type beyond PERF_SAMPLE_MAX);
 *    perf then switches to PERF_SAMPLE_WEIGHT (tools/perf/util/evsel.c
 *    evsel__detect_missing_features), and so must numaprof;
 *  - EACCES (perf_event_paranoid) is not a missing feature: no fallback;
 *  - a precise_ip the PMU cannot do is lowered before WEIGHT_STRUCT is given up.
 * The events are libpfm4's Sapphire Rapids ones (LIBPFM_FORCE_PMU=spr: aux leader, loads,
 * stores, all with WEIGHT_STRUCT), the sysroot the Skylake fixture (paranoid 2).
 */
#include "nmp_hw_priv.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "nmp_check.h"

enum kernel { MODERN, BEFORE_5_12, DENIED, PRECISE_1_ONLY };
static enum kernel g_kernel;
static int g_calls, g_struct_calls, g_plain_weight_calls;

static long fake_open(struct perf_event_attr *attr, pid_t pid, int cpu, int group_fd,
                      unsigned long flags)
{
    (void)pid, (void)cpu, (void)group_fd, (void)flags;
    g_calls++;
    if (attr->sample_type & PERF_SAMPLE_WEIGHT_STRUCT)
        g_struct_calls++;
    if (attr->sample_type & PERF_SAMPLE_WEIGHT)
        g_plain_weight_calls++;
    switch (g_kernel) {
    case BEFORE_5_12:
        if (attr->sample_type & PERF_SAMPLE_WEIGHT_STRUCT) {
            errno = EINVAL;
            return -1;
        }
        break;
    case DENIED: errno = EACCES; return -1;
    case PRECISE_1_ONLY:
        if (attr->precise_ip > 1) {
            errno = EOPNOTSUPP;
            return -1;
        }
        break;
    case MODERN: break;
    }
    return open("/dev/null", O_RDONLY | O_CLOEXEC); /* an fd nmp_hw_try_open can close */
}

static int attrs_for(enum kernel k, struct perf_event_attr *attrs, char *why, size_t whylen)
{
    struct nmp_hw_options opt = {.ldlat = 30, .stores = 1};
    g_kernel = k;
    g_calls = g_struct_calls = g_plain_weight_calls = 0;
    return nmp_hw_attrs(NMP_BACKEND_PEBS, &opt, attrs, 8, why, whylen);
}

int main(void)
{
    char data_dir[4096], why[NMP_ERRLEN];
    snprintf(data_dir, sizeof data_dir, "%s", __FILE__);
    char *d = dirname(dirname(dirname(data_dir)));
    char root[4200];
    snprintf(root, sizeof root, "%s/tests/data/sysroot-skx", d);
    setenv("NUMAPROF_SYSROOT", root, 1);
    setenv("LIBPFM_FORCE_PMU", "spr", 1); /* before libpfm4 initialises */
    nmp_hw_set_open(fake_open);
    struct perf_event_attr a[8];

    /* a current kernel: WEIGHT_STRUCT at the highest precise_ip, opened once */
    int n = attrs_for(MODERN, a, why, sizeof why);
    CHECK_EQ(n, 3);
    for (int i = 0; i < n; i++) {
        CHECK(a[i].sample_type & PERF_SAMPLE_WEIGHT_STRUCT);
        CHECK(!(a[i].sample_type & PERF_SAMPLE_WEIGHT));
        CHECK_EQ(a[i].precise_ip, 3);
    }
    CHECK_EQ(g_calls, 3);

    /* before 5.12: every precise_ip fails with EINVAL, then PERF_SAMPLE_WEIGHT opens */
    n = attrs_for(BEFORE_5_12, a, why, sizeof why);
    CHECK_EQ(n, 3);
    if (n < 0)
        fprintf(stderr, "BEFORE_5_12: %s\n", why);
    for (int i = 0; i < n; i++) {
        CHECK_MSG(!(a[i].sample_type & PERF_SAMPLE_WEIGHT_STRUCT) &&
                      (a[i].sample_type & PERF_SAMPLE_WEIGHT),
                  "event %d sample_type %#llx", i, (unsigned long long)a[i].sample_type);
        CHECK_EQ(a[i].precise_ip, 3);
        /* the rest of the sample_type is unchanged */
        CHECK_EQ(a[i].sample_type & ~(uint64_t)PERF_SAMPLE_WEIGHT,
                 PERF_SAMPLE_IDENTIFIER | PERF_SAMPLE_IP | PERF_SAMPLE_TID | PERF_SAMPLE_TIME |
                     PERF_SAMPLE_CPU | PERF_SAMPLE_ADDR | PERF_SAMPLE_DATA_SRC);
    }
    CHECK_EQ(g_struct_calls, 3); /* the leader refused at precise 3, 2, 1 */
    CHECK_EQ(g_plain_weight_calls, 3);

    /* EACCES is not a missing feature: no second try without WEIGHT_STRUCT */
    n = attrs_for(DENIED, a, why, sizeof why);
    CHECK_EQ(n, -1);
    CHECK(strstr(why, "perf_event_open denied") != NULL);
    CHECK_EQ(g_plain_weight_calls, 0);

    /* a PMU without zero-skid sampling: precise_ip comes down, WEIGHT_STRUCT stays */
    n = attrs_for(PRECISE_1_ONLY, a, why, sizeof why);
    CHECK_EQ(n, 3);
    for (int i = 0; i < n; i++) {
        CHECK_EQ(a[i].precise_ip, 1);
        CHECK(a[i].sample_type & PERF_SAMPLE_WEIGHT_STRUCT);
    }
    CHECK_EQ(g_plain_weight_calls, 0);

    /* a PERF_SAMPLE_WEIGHT record decodes like a WEIGHT_STRUCT one: the latency is in
     * the low 32 bits (ds.c: weight.full = latency) */
    uint64_t body[3] = {0x401000, 0x7f0000002000, 412};
    struct perf_event_attr w;
    memset(&w, 0, sizeof w);
    w.type = PERF_TYPE_RAW;
    w.config = 0x1cd;
    w.sample_type = PERF_SAMPLE_IP | PERF_SAMPLE_ADDR | PERF_SAMPLE_WEIGHT;
    struct nmp_sample s;
    CHECK_EQ(nmp_hw_decode(NMP_BACKEND_PEBS, &w, body, sizeof body, &s), 0);
    CHECK_EQ(s.weight, 412);
    CHECK_EQ(s.addr, 0x7f0000002000);
    CHECK_EQ(s.access, NMP_ACC_LOAD);
    nmp_hw_set_open(NULL);
    return check_result();
}
