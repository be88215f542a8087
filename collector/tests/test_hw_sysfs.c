/* Probe, IBS attrs and node-level counter discovery on fixture sysfs/procfs trees
 * (tests/data/sysroot-*, read through NUMAPROF_SYSROOT):
 *  - PMU names and files: Linux arch/x86/events/intel/core.c (cpu/events/mem-loads,
 *    mem-loads-aux, mem-stores), uncore.c / uncore_snbep.c (uncore_imc_<n>, cas_count_*
 *    with .scale/.unit), Linux arch/x86/events/amd/ibs.c (ibs_op format cnt_ctl config:19,
 *    l3missonly config:16, swfilt config2:0 since commit 9290c1b27402),
 *    Linux arch/x86/events/amd/uncore.c (amd_df, amd_umc_<n>);
 *  - IBS period rules: perf_ibs_init in Linux arch/x86/events/amd/ibs.c;
 *  - DF/UMC events: amdzen3/data-fabric.json, amdzen4/memory-controller.json (Linux tools/perf/pmu-events/arch/x86).
 */
#include "nmp_hw_priv.h"
#include "nmp_schema.h"
#include "nmp_hw_uncore.h"

#include <errno.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <sys/stat.h>

#include "nmp_check.h"
#define CHECK_HAS(s, sub)                                                           \
    do {                                                                            \
        if (!strstr((s), (sub))) {                                                  \
            fprintf(stderr, "%s:%d: \"%s\" does not contain \"%s\"\n", __FILE__, __LINE__, \
                    (s), (sub));                                                    \
            failures++;                                                             \
        }                                                                           \
    } while (0)

static char data_dir[4096];

static void use_root(const char *name)
{
    char root[4200];
    snprintf(root, sizeof root, "%s/%s", data_dir, name);
    if (access(root, F_OK) != 0) {
        fprintf(stderr, "fixture %s missing\n", root);
        exit(1);
    }
    setenv("NUMAPROF_SYSROOT", root, 1);
}

static void test_probe_messages(void)
{
    char why[NMP_ERRLEN];
    use_root("sysroot-vm");
    CHECK_EQ(nmp_hw_probe(NMP_BACKEND_PEBS, why, sizeof why), 0);
    CHECK_HAS(why, "no PEBS-capable PMU: /sys/bus/event_source/devices/cpu is absent "
                   "(a VM without a virtual PMU?)");
    CHECK_HAS(why, "running in a VM (QEMU in /sys/class/dmi/id)");
    CHECK(strchr(why, '\n') == NULL);
    CHECK_EQ(nmp_hw_probe(NMP_BACKEND_IBS, why, sizeof why), 0);
    CHECK_HAS(why, "no IBS PMU: /sys/bus/event_source/devices/ibs_op is absent");
    CHECK_HAS(why, "running in a VM");
    CHECK_EQ(nmp_hw_probe(NMP_BACKEND_SOFT, why, sizeof why), 1);

    use_root("sysroot-container");
    CHECK_EQ(nmp_hw_probe(NMP_BACKEND_PEBS, why, sizeof why), 0);
    CHECK_HAS(why, "running in a container (/.dockerenv exists)");

    use_root("sysroot-paranoid3");
    CHECK_EQ(nmp_hw_probe(NMP_BACKEND_PEBS, why, sizeof why), 0);
    CHECK(strcmp(why, "perf_event_paranoid is 3: run `sysctl kernel.perf_event_paranoid=2` "
                      "(or grant CAP_PERFMON)") == 0);
    CHECK_EQ(nmp_hw_probe(NMP_BACKEND_IBS, why, sizeof why), 0);
    CHECK_HAS(why, "perf_event_paranoid is 3");

    char virt[256];
    use_root("sysroot-skx"); /* bare metal: neither */
    nmp_hw_virt(virt, sizeof virt);
    CHECK_EQ(virt[0], 0);
    CHECK_EQ(nmp_hw_paranoid(), 2);
    CHECK_EQ(nmp_hw_has_perfmon(), 0);
    use_root("sysroot-zen3"); /* CapEff with CAP_PERFMON */
    CHECK_EQ(nmp_hw_has_perfmon(), 1);
    unsigned fam = 0, model = 0;
    char vendor[32];
    CHECK_EQ(nmp_hw_cpu_id(&fam, &model, vendor, sizeof vendor), 0);
    CHECK_EQ(fam, 0x19);
    CHECK_EQ(model, 1);
    CHECK(strcmp(vendor, "AuthenticAMD") == 0);

    /* cpu PMU with mem-loads: the probe goes on to a real perf_event_open.  Where this
     * machine has no core PMU, that open must fail with a reason; elsewhere it may pass. */
    int real_pmu = access("/sys/bus/event_source/devices/cpu/events/mem-loads", F_OK) == 0;
    use_root("sysroot-skx");
    int ok = nmp_hw_probe(NMP_BACKEND_PEBS, why, sizeof why);
    if (!real_pmu) {
        CHECK_EQ(ok, 0);
        CHECK(why[0] != 0);
        CHECK(strchr(why, '\n') == NULL);
    }
}

static void test_sysfs_encode(void)
{
    char why[256];
    struct perf_event_attr a;
    use_root("sysroot-zen3");
    memset(&a, 0, sizeof a);
    /* EventCode bits 8-11 land in config 32-35 (format event = config:0-7,32-35,59-60) */
    CHECK_EQ(nmp_hw_sysfs_encode("amd_df", "event=0x1c7,umask=0x38", &a, why, sizeof why), 0);
    CHECK_EQ(a.config, 0x1000038c7ULL);
    memset(&a, 0, sizeof a);
    CHECK_EQ(nmp_hw_sysfs_encode("amd_df", "event=0xfff", &a, why, sizeof why), 0);
    CHECK_EQ(a.config, 0xf000000ffULL);
    CHECK_EQ(nmp_hw_sysfs_encode("amd_df", "nosuchterm=1", &a, why, sizeof why), -1);
    CHECK_HAS(why, "nosuchterm");
    use_root("sysroot-skx");
    double scale;
    char unit[16];
    CHECK_EQ(nmp_hw_sysfs_event("cpu", "mem-loads", &a, &scale, unit, sizeof unit, why,
                                sizeof why), 0);
    CHECK_EQ(a.type, 4);
    CHECK_EQ(a.config, 0x1cd);
    CHECK_EQ(a.config1, 3);
    CHECK(scale == 1.0 && unit[0] == 0);
    CHECK_EQ(nmp_hw_sysfs_event("uncore_imc_0", "cas_count_write", &a, &scale, unit,
                                sizeof unit, why, sizeof why), 0);
    CHECK_EQ(a.type, 13);
    CHECK_EQ(a.config, 0xc04);
    CHECK(scale * 1048576.0 == 64.0 && strcmp(unit, "MiB") == 0);
    CHECK_EQ(nmp_hw_node_of_cpu(3), 1);
    CHECK_EQ(nmp_hw_node_of_cpu(0), 0);
    CHECK_EQ(nmp_hw_node_of_cpu(9), -1);
    CHECK_EQ(nmp_hw_cpulist_first("2-5,7"), 2);
    CHECK_EQ(nmp_hw_cpulist_first(""), -1);
}

static void test_ibs_attrs(void)
{
    char why[NMP_ERRLEN];
    struct nmp_hw_event ev[4];
    struct nmp_hw_options opt = {0};
    use_root("sysroot-zen4");
    int n = nmp_hw_build(NMP_BACKEND_IBS, &opt, NULL, 0, ev, 4, why, sizeof why);
    CHECK_EQ(n, 1);
    struct perf_event_attr *a = &ev[0].attr;
    CHECK_EQ(a->type, 97);
    CHECK_EQ(a->config, 1ULL << 19); /* cnt_ctl: count ops */
    CHECK_EQ(a->config2, 1);         /* swfilt, where the PMU has it (this tree) */
    CHECK_EQ(a->sample_period, 0x40000);
    CHECK_EQ(a->sample_period & 0xf, 0);
    /* with swfilt: user level only, which paranoid 2 allows; the other exclude_* bits
     * are -EINVAL even with swfilt (perf_ibs_init, Linux arch/x86/events/amd/ibs.c) */
    CHECK(a->exclude_kernel && a->exclude_hv);
    CHECK(!a->exclude_user && !a->exclude_idle && !a->exclude_host && !a->exclude_guest);
    CHECK_EQ(a->sample_type & (PERF_SAMPLE_RAW | PERF_SAMPLE_ADDR | PERF_SAMPLE_DATA_SRC |
                               PERF_SAMPLE_WEIGHT),
             PERF_SAMPLE_RAW | PERF_SAMPLE_ADDR | PERF_SAMPLE_DATA_SRC | PERF_SAMPLE_WEIGHT);
    /* paranoid 0 in this tree: PHYS_ADDR allowed */
    CHECK(a->sample_type & PERF_SAMPLE_PHYS_ADDR);
    opt.l3missonly = 1;
    opt.period = 100003; /* low 4 bits cleared: the kernel refuses them */
    CHECK_EQ(nmp_hw_build(NMP_BACKEND_IBS, &opt, NULL, 0, ev, 4, why, sizeof why), 1);
    CHECK_EQ(ev[0].attr.config, (1ULL << 19) | (1ULL << 16));
    CHECK_EQ(ev[0].attr.sample_period, 100000);
    opt.period = 5;
    CHECK_EQ(nmp_hw_build(NMP_BACKEND_IBS, &opt, NULL, 0, ev, 4, why, sizeof why), 1);
    CHECK_EQ(ev[0].attr.sample_period, 0x10);
    opt.period = 1ULL << 40;
    CHECK_EQ(nmp_hw_build(NMP_BACKEND_IBS, &opt, NULL, 0, ev, 4, why, sizeof why), 1);
    CHECK_EQ(ev[0].attr.sample_period, 0xFFFF0);

    /* Zen3: no l3missonly format; paranoid 2 but CAP_PERFMON in this tree's CapEff */
    use_root("sysroot-zen3");
    opt.period = 0;
    CHECK_EQ(nmp_hw_build(NMP_BACKEND_IBS, &opt, NULL, 0, ev, 4, why, sizeof why), -1);
    CHECK_HAS(why, "l3missonly");
    opt.l3missonly = 0;
    CHECK_EQ(nmp_hw_build(NMP_BACKEND_IBS, &opt, NULL, 0, ev, 4, why, sizeof why), 1);
    CHECK(ev[0].attr.sample_type & PERF_SAMPLE_PHYS_ADDR);
    CHECK_EQ(ev[0].attr.config2, 0); /* no swfilt format in this tree (Linux < 6.14) */
    a = &ev[0].attr;                 /* no exclude_* at all: -EINVAL without swfilt */
    CHECK(!a->exclude_user && !a->exclude_kernel && !a->exclude_hv && !a->exclude_idle &&
          !a->exclude_host && !a->exclude_guest);

    /* Zen3 on Linux >= 6.14, an ordinary user at paranoid 2: swfilt makes IBS usable */
    use_root("sysroot-zen3-swfilt");
    CHECK_EQ(nmp_hw_build(NMP_BACKEND_IBS, &opt, NULL, 0, ev, 4, why, sizeof why), 1);
    a = &ev[0].attr;
    CHECK_EQ(a->type, 98);
    CHECK_EQ(a->config, 1ULL << 19);
    CHECK_EQ(a->config2, 1);
    CHECK(a->exclude_kernel && a->exclude_hv);
    CHECK(!a->exclude_user && !a->exclude_idle && !a->exclude_host && !a->exclude_guest);
    CHECK(!(a->sample_type & PERF_SAMPLE_PHYS_ADDR)); /* needs perf_allow_kernel() */
    CHECK(strstr(ev[0].source, "swfilt") != NULL);

    /* Skylake tree: paranoid 2, no capability: no PHYS_ADDR; no ibs_op */
    use_root("sysroot-skx");
    CHECK_EQ(nmp_hw_build(NMP_BACKEND_IBS, &opt, NULL, 0, ev, 4, why, sizeof why), -1);
    CHECK_HAS(why, "ibs_op is absent");

    /* nmp_hw_attrs really opens the event: a fake PMU type is refused here */
    use_root("sysroot-zen4");
    struct perf_event_attr attrs[2];
    if (access("/sys/bus/event_source/devices/ibs_op", F_OK) != 0) {
        CHECK_EQ(nmp_hw_attrs(NMP_BACKEND_IBS, &opt, attrs, 2, why, sizeof why), -1);
        CHECK_HAS(why, "ibs_op");
    }
}

/* PEBS from the kernel's sysfs descriptions when libpfm4 does not know the CPU (Emerald
 * and Granite Rapids with libpfm4 4.13).  Every event must be user level only: at the
 * default perf_event_paranoid 2 the kernel refuses exclude_kernel = 0 (EACCES) to an
 * unprivileged user, and perf mem record works there as an ordinary user. */
static void check_user_only(const char *tree, const struct nmp_hw_event *ev, int n)
{
    for (int i = 0; i < n; i++)
        CHECK_MSG(ev[i].attr.exclude_kernel && ev[i].attr.exclude_hv && !ev[i].attr.exclude_user,
                  "%s: %s (%s) samples the kernel: exclude_kernel %u exclude_hv %u", tree,
                  ev[i].name, ev[i].role, ev[i].attr.exclude_kernel, ev[i].attr.exclude_hv);
}

static void test_pebs_sysfs_fallback(void)
{
    char why[NMP_ERRLEN], buf[64];
    struct nmp_hw_event ev[4];
    struct nmp_hw_options opt = {.ldlat = 50, .stores = 1};
    use_root("sysroot-spr");
    int n = nmp_hw_build_pebs_sysfs(&opt, 2, ev, 4, why, sizeof why);
    CHECK_EQ(n, 3);
    if (n == 3) {
        CHECK(strcmp(ev[0].role, "aux-leader") == 0);
        CHECK_EQ(ev[0].attr.config, 0x8203);
        CHECK(nmp_hw_attr_is_aux(&ev[0].attr));
        CHECK_EQ(ev[1].attr.config, 0x1cd);
        CHECK_EQ(ev[1].attr.config1, 50);
        CHECK_EQ(ev[1].attr.precise_ip, 2);
        CHECK_EQ(ev[2].attr.config, 0x2cd);
        CHECK(ev[1].attr.sample_type & PERF_SAMPLE_PHYS_ADDR); /* paranoid 0 */
        check_user_only("sysroot-spr", ev, n);
    }
    use_root("sysroot-skx");
    n = nmp_hw_build_pebs_sysfs(&opt, 2, ev, 4, why, sizeof why);
    CHECK_EQ(n, 2);
    if (n == 2) {
        CHECK_EQ(ev[0].attr.config, 0x1cd);
        CHECK_EQ(ev[1].attr.config, 0x82d0);
        CHECK(!(ev[0].attr.sample_type & PERF_SAMPLE_PHYS_ADDR));
        check_user_only("sysroot-skx", ev, n);
    }
    /* nmp_hw_build() takes this path by itself where libpfm4 knows no core PMU */
    if (!getenv("LIBPFM_FORCE_PMU") && !nmp_hw_pfm_core_pmu(buf, sizeof buf)) {
        use_root("sysroot-spr");
        n = nmp_hw_build(NMP_BACKEND_PEBS, &opt, NULL, 2, ev, 4, why, sizeof why);
        CHECK_EQ(n, 3);
        CHECK(n == 3 && strstr(ev[1].source, "sysfs") != NULL);
        check_user_only("sysroot-spr via nmp_hw_build", ev, n > 0 ? n : 0);
    }
}

static void test_uncore_plan(void)
{
    char why[NMP_ERRLEN];
    struct nmp_hw_counter_plan p[64];
    use_root("sysroot-skx");
    int n = nmp_hw_node_counters_plan(p, 64, why, sizeof why);
    CHECK_EQ(n, 6); /* 3 IMC boxes x read/write; the free-running PMU is skipped */
    for (int i = 0; i < n; i++) {
        CHECK(p[i].bytes_per_count == 64.0);
        CHECK_EQ(p[i].attr.sample_period, 0);
        int rd = strcmp(p[i].name, "imc.read_bytes") == 0;
        CHECK(rd || strcmp(p[i].name, "imc.write_bytes") == 0);
        CHECK_EQ(p[i].attr.config, rd ? 0x304 : 0xc04);
    }
    CHECK_EQ(p[0].attr.type, 13);
    CHECK_EQ(p[0].node, 0);
    CHECK_EQ(p[4].attr.type, 15);
    CHECK_EQ(p[4].cpu, 2);
    CHECK_EQ(p[4].node, 1);

    use_root("sysroot-spr");
    n = nmp_hw_node_counters_plan(p, 64, why, sizeof why);
    CHECK_EQ(n, 2);
    CHECK_EQ(p[0].attr.config, 0xcf05);
    CHECK_EQ(p[1].attr.config, 0xf005);

    use_root("sysroot-zen4"); /* UMC channels; amd_df ignored when UMC exists */
    n = nmp_hw_node_counters_plan(p, 64, why, sizeof why);
    CHECK_EQ(n, 8);
    for (int i = 0; i < n; i++) {
        CHECK(strncmp(p[i].pmu, "amd_umc_", 8) == 0);
        CHECK(p[i].bytes_per_count == 64.0);
    }
    CHECK_EQ(p[0].attr.config, 0x10a); /* umc_cas_cmd.rd: event 0x0a, rdwrmask 1 */
    CHECK_EQ(p[1].attr.config, 0x20a); /* .wr: rdwrmask 2 */
    CHECK(strcmp(p[0].name, "umc.read_bytes") == 0);
    CHECK_EQ(p[0].attr.type, 90);
    CHECK_EQ(p[6].attr.type, 93);
    CHECK_EQ(p[6].node, 1);

    use_root("sysroot-zen3"); /* DF: 8 DRAM channel events */
    n = nmp_hw_node_counters_plan(p, 64, why, sizeof why);
    CHECK_EQ(n, 8);
    CHECK_EQ(p[0].attr.config, 0x3807);
    CHECK_EQ(p[4].attr.config, 0x100003807ULL); /* EventCode 0x107 */
    CHECK_EQ(p[7].attr.config, 0x1000038c7ULL); /* 0x1c7 */
    CHECK(strcmp(p[7].name, "df.dram_bytes") == 0);

    use_root("sysroot-vm");
    CHECK_EQ(nmp_hw_node_counters_plan(p, 64, why, sizeof why), 0);
    CHECK_HAS(why, "no memory-controller PMU");

    /* open: not permitted at paranoid 2 without CAP_PERFMON */
    struct nmp_hw_counters *c = (struct nmp_hw_counters *)&c;
    use_root("sysroot-skx");
    CHECK_EQ(nmp_hw_node_counters_open(&c, why, sizeof why), 0);
    CHECK(c == NULL);
    CHECK_HAS(why, "perf_event_paranoid <= 0 (it is 2) or CAP_PERFMON");
    /* permitted (paranoid 0), but the fixture's PMU types do not exist here */
    use_root("sysroot-zen4");
    if (access("/sys/bus/event_source/devices/amd_umc_0", F_OK) != 0) {
        CHECK_EQ(nmp_hw_node_counters_open(&c, why, sizeof why), 0);
        CHECK(c == NULL);
        CHECK_HAS(why, "perf_event_open");
    }
    CHECK_EQ(nmp_hw_node_counters_read(NULL, NULL, 0, 0), -1);
    nmp_hw_node_counters_close(NULL);
}

static size_t read_col(const char *dir, const char *name, void *dst, size_t max)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/counters.%s", dir, name);
    FILE *f = fopen(path, "rb");
    if (!f)
        return 0;
    size_t n = fread(dst, 1, max, f);
    fclose(f);
    return n;
}

/* nmp_hw_node_counters_read: sums per (node, name), bytes = count x bytes_per_count,
 * rows in the counters table layout.  Software page-fault counters on this process stand
 * in for the uncore fds (uncore PMUs do not exist here). */
static void test_counters_read(void)
{
    struct nmp_hw_counter_plan plan[3];
    memset(plan, 0, sizeof plan);
    const char *names[3] = {"imc.read_bytes", "imc.read_bytes", "imc.write_bytes"};
    const int nodes[3] = {0, 0, 1};
    const double bpc[3] = {64.0, 64.0, 2.0};
    int fds[3];
    for (int i = 0; i < 3; i++) {
        snprintf(plan[i].name, sizeof plan[i].name, "%s", names[i]);
        plan[i].node = nodes[i];
        plan[i].bytes_per_count = bpc[i];
        struct perf_event_attr a;
        memset(&a, 0, sizeof a);
        a.size = sizeof a;
        a.type = PERF_TYPE_SOFTWARE;
        a.config = PERF_COUNT_SW_PAGE_FAULTS;
        a.read_format = PERF_FORMAT_TOTAL_TIME_ENABLED | PERF_FORMAT_TOTAL_TIME_RUNNING;
        a.exclude_kernel = 1;
        fds[i] = (int)syscall(SYS_perf_event_open, &a, 0, -1, -1, 0);
        if (fds[i] < 0) {
            fprintf(stderr, "skip counters read: perf_event_open: %s\n", strerror(errno));
            for (int j = 0; j < i; j++)
                close(fds[j]);
            return;
        }
    }
    size_t len = 64 * 4096;
    char *m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(m != MAP_FAILED);
    if (m != MAP_FAILED) {
        for (size_t off = 0; off < len; off += 4096)
            m[off] = 1;
        munmap(m, len);
    }
    uint64_t v[3][3];
    for (int i = 0; i < 3; i++) {
        CHECK(ioctl(fds[i], PERF_EVENT_IOC_DISABLE, 0) == 0);
        CHECK(read(fds[i], v[i], sizeof v[i]) == (ssize_t)sizeof v[i]);
        CHECK(v[i][0] >= 64); /* at least one fault per touched page */
    }
    struct nmp_hw_counters *c = nmp_hw_node_counters_adopt(plan, fds, 3);
    CHECK(c != NULL);
    if (!c)
        return;
    const char *tmp = getenv("NMP_TEST_TMP");
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/hw_counters.%d", tmp ? tmp : "/tmp", (int)getpid());
    mkdir(dir, 0700);
    struct nmp_table *t = nmp_table_open(dir, NMP_TABLE_ID_counters, -1);
    CHECK(t != NULL);
    if (t) {
        CHECK_EQ(nmp_hw_node_counters_read(c, t, 1234, 2), 2);
        CHECK_EQ(nmp_table_close(t), 0);
        uint64_t time[8], value[8], name[8];
        int16_t node[16];
        uint8_t phase[32];
        char heap[256];
        CHECK_EQ(read_col(dir, "time.col", time, 16 + 16 + 1), 32);
        CHECK_EQ(time[2], 1234);
        CHECK_EQ(read_col(dir, "phase.col", phase, 16 + 2 + 1), 18);
        CHECK_EQ(phase[16], 2);
        CHECK_EQ(read_col(dir, "node.col", node, 16 + 4 + 1), 20);
        CHECK_EQ(node[8], 0);
        CHECK_EQ(node[9], 1);
        CHECK_EQ(read_col(dir, "value.col", value, 16 + 16 + 1), 32);
        CHECK_EQ(value[2], (v[0][0] + v[1][0]) * 64);
        CHECK_EQ(value[3], v[2][0] * 2);
        CHECK_EQ(read_col(dir, "name.col", name, 16 + 16 + 1), 32);
        size_t hn = read_col(dir, "name.heap", heap, sizeof heap - 1);
        heap[hn] = 0;
        CHECK(name[2] < hn && strcmp(heap + name[2], "imc.read_bytes") == 0);
        CHECK(name[3] < hn && strcmp(heap + name[3], "imc.write_bytes") == 0);
    }
    nmp_hw_node_counters_close(c);
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    CHECK(system(cmd) == 0);
}

static void test_list_events(void)
{
    char buf[16384];
    use_root("sysroot-skx");
    FILE *f = tmpfile();
    CHECK(f != NULL);
    if (!f)
        return;
    CHECK_EQ(nmp_hw_list_events(f, 1), 0);
    rewind(f);
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = 0;
    fclose(f);
    CHECK_HAS(buf, "\"node_counters\": [");
    CHECK_HAS(buf, "\"role\": \"imc.read_bytes\", \"name\": \"cas_count_read\"");
    CHECK_HAS(buf, "\"config\": \"0x304\"");
    CHECK_HAS(buf, "\"backends\": {\"pebs\": {\"usable\": ");
}

int main(void)
{
    snprintf(data_dir, sizeof data_dir, "%s", __FILE__);
    /* collector/tests/test_hw_sysfs.c -> tests/data */
    char *d = dirname(dirname(dirname(data_dir)));
    memmove(data_dir, d, strlen(d) + 1);
    strncat(data_dir, "/tests/data", sizeof data_dir - strlen(data_dir) - 1);
    test_probe_messages();
    test_sysfs_encode();
    test_ibs_attrs();
    test_pebs_sysfs_fallback();
    test_uncore_plan();
    test_counters_read();
    test_list_events();
    return check_result();
}
