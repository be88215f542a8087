/* libpfm4 encodings for forced PMUs (LIBPFM_FORCE_PMU, libpfm4 lib/pfmlib_common.c) match the
 * values of libpfm4 lib/events/
 * intel_skl_events.h (skx), intel_icl_events.h (icx), intel_spr_events.h (spr),
 * amd64_events_fam19h_zen3.h / _zen4.h, and the kernel's SPR store event 0x2cd
 * (Linux arch/x86/events/intel/core.c spr_events_attrs).  libpfm4 reads LIBPFM_FORCE_PMU once
 * at pfm_initialize(), so each model runs in its own child process.
 */
#include "nmp_hw_priv.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "nmp_check.h"

static void intel(const char *pmu, int aux, uint64_t store_config, const char *load_name)
{
    char why[NMP_ERRLEN], buf[64];
    struct nmp_hw_event ev[4];
    struct nmp_hw_options opt = {.ldlat = 32, .stores = 1};
    CHECK(nmp_hw_pfm_core_pmu(buf, sizeof buf) && strcmp(buf, pmu) == 0);
    CHECK_EQ(nmp_hw_pfm_needs_aux(pmu), aux);
    int n = nmp_hw_build(NMP_BACKEND_PEBS, &opt, NULL, 2, ev, 4, why, sizeof why);
    if (n < 0)
        fprintf(stderr, "%s: %s\n", pmu, why);
    CHECK_EQ(n, 2 + aux);
    if (n != 2 + aux)
        return;
    int i = 0;
    if (aux) {
        CHECK(strcmp(ev[0].role, "aux-leader") == 0);
        CHECK_EQ(ev[0].attr.type, 4);
        CHECK_EQ(ev[0].attr.config, 0x8203);
        i = 1;
    }
    /* MEM_TRANS_RETIRED:LOAD_LATENCY:ldlat=32 -> 0x1cd, config1 0x20, type 4 RAW */
    CHECK(strcmp(ev[i].role, "loads") == 0);
    CHECK_MSG(strncmp(ev[i].name, load_name, strlen(load_name)) == 0, "%s: loads are %s", pmu,
              ev[i].name);
    CHECK_EQ(ev[i].attr.type, 4);
    CHECK_EQ(ev[i].attr.config, 0x1cd);
    CHECK_EQ(ev[i].attr.config1, 0x20);
    CHECK_EQ(ev[i].attr.precise_ip, 2);
    CHECK(ev[i].attr.exclude_kernel); /* PFM_PLM3: user level only */
    CHECK_EQ(ev[i].attr.sample_type & (PERF_SAMPLE_ADDR | PERF_SAMPLE_DATA_SRC |
                                       PERF_SAMPLE_WEIGHT_STRUCT),
             PERF_SAMPLE_ADDR | PERF_SAMPLE_DATA_SRC | PERF_SAMPLE_WEIGHT_STRUCT);
    CHECK(strcmp(ev[i + 1].role, "stores") == 0);
    CHECK_EQ(ev[i + 1].attr.config, store_config);
    for (int k = 0; k < n; k++)
        CHECK_MSG(ev[k].attr.exclude_kernel && ev[k].attr.exclude_hv, "%s %s samples the kernel",
                  pmu, ev[k].name);
    /* ldlat out of range is refused before libpfm4 sees it */
    opt.ldlat = 70000;
    CHECK_EQ(nmp_hw_build(NMP_BACKEND_PEBS, &opt, NULL, 2, ev, 4, why, sizeof why), -1);
}

static void counting(const char *needle1, const char *needle2)
{
    char buf[16384];
    FILE *f = tmpfile();
    CHECK(f != NULL);
    if (!f)
        return;
    CHECK_EQ(nmp_hw_list_events(f, 1), 0);
    rewind(f);
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = 0;
    fclose(f);
    if (!strstr(buf, needle1) || !strstr(buf, needle2)) {
        fprintf(stderr, "list-events lacks %s / %s:\n%s\n", needle1, needle2, buf);
        failures++;
    }
}

static int run(const char *pmu)
{
    fflush(stderr);
    pid_t pid = fork();
    if (pid == 0) {
        setenv("LIBPFM_FORCE_PMU", pmu, 1);
        setenv("NUMAPROF_SYSROOT", "/nonexistent-sysroot", 1); /* no sysfs PMUs */
        if (!strcmp(pmu, "skx")) {
            /* stores: MEM_INST_RETIRED:ALL_STORES (MEM_UOPS alias) */
            intel(pmu, 0, 0x82d0, "MEM_TRANS_RETIRED:LOAD_LATENCY");
            counting("\"name\": \"MEM_LOAD_L3_MISS_RETIRED:LOCAL_DRAM\", \"source\": "
                     "\"libpfm4 skx\", \"type\": 4, \"config\": \"0x1d3\"",
                     "\"config\": \"0x2d3\"");
        } else if (!strcmp(pmu, "icx") || !strcmp(pmu, "hsw_ep") || !strcmp(pmu, "bdw_ep")) {
            intel(pmu, 0, 0x82d0, "MEM_TRANS_RETIRED:LOAD_LATENCY");
        } else if (!strcmp(pmu, "snb_ep") || !strcmp(pmu, "ivb_ep")) {
            /* libpfm4's name for 0x1cd there; stores: the kernel's mem_st_snb 0x2cd */
            intel(pmu, 0, 0x2cd, "MEM_TRANS_RETIRED:LATENCY_ABOVE_THRESHOLD");
        } else if (!strcmp(pmu, "spr")) {
            /* stores: libpfm4 says 0x3cd, fixed to the kernel's 0x2cd */
            intel(pmu, 1, 0x2cd, "MEM_TRANS_RETIRED:LOAD_LATENCY");
            counting("\"role\": \"aux-leader\"", "umask fixed 0x3cd->0x2cd");
        } else if (!strcmp(pmu, "amd64_fam19h_zen3")) {
            counting("ANY_DATA_CACHE_FILLS_FROM_SYSTEM:MEM_IO_LCL\", \"source\": \"libpfm4 "
                     "amd64_fam19h_zen3\", \"type\": 4, \"config\": \"0x844\"",
                     "MEM_IO_RMT\", \"source\": \"libpfm4 amd64_fam19h_zen3\", \"type\": 4, "
                     "\"config\": \"0x4044\"");
        } else if (!strcmp(pmu, "amd64_fam19h_zen4")) {
            counting("DRAM_IO_NEAR\", \"source\": \"libpfm4 amd64_fam19h_zen4\", \"type\": 4, "
                     "\"config\": \"0x844\"",
                     "DRAM_IO_FAR\", \"source\": \"libpfm4 amd64_fam19h_zen4\", \"type\": 4, "
                     "\"config\": \"0x4044\"");
        }
        fflush(stderr);
        _exit(failures != 0);
    }
    int st = 0;
    if (pid < 0 || waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        fprintf(stderr, "forced PMU %s: failed\n", pmu);
        return 1;
    }
    return 0;
}

int main(void)
{
    static const char *const pmus[] = {"snb_ep", "ivb_ep", "hsw_ep", "bdw_ep", "skx", "icx",
                                       "spr", "amd64_fam19h_zen3", "amd64_fam19h_zen4"};
    int bad = 0;
    for (size_t i = 0; i < sizeof pmus / sizeof *pmus; i++)
        bad += run(pmus[i]);
    if (bad)
        fprintf(stderr, "%d model(s) failed\n", bad);
    return bad != 0;
}
