/* Event attributes of the hardware backends: PEBS events encoded by libpfm4, IBS op
 * attrs built from the ibs_op PMU's sysfs entries.  The kernel and libpfm4 sources are
 * cited where used (docs/backends.md lists them).
 */
#include <linux/perf_event.h> /* before perfmon: libpfm4 include/perfmon/perf_event.h:40 */
#include <perfmon/pfmlib_perf_event.h>

#include "nmp_hw_priv.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define PEBS_LOAD_PERIOD 2003   /* a load above ldlat every ~2000: a few kHz per thread */
#define PEBS_STORE_PERIOD 20011 /* stores are frequent and carry no latency */
#define IBS_OP_PERIOD 0x40000   /* ops; must be a multiple of 16 (perf_ibs_init) */
#define IBS_OP_MAX_PERIOD 0xFFFF0ULL /* 0xFFFF<<4 without IBS_CAPS_OPCNTEXT (ibs.c) */

/* MEM_TRANS_RETIRED.LOAD_LATENCY and the aux event: Linux arch/x86/events/intel/core.c
 * (mem-loads event=0xcd,umask=0x1; mem-loads-aux event=0x03,umask=0x82). */
#define INTEL_ARCH_EVENT_MASK 0xffffULL
#define INTEL_MEM_LOADS 0x01cdULL
#define INTEL_MEM_LOADS_AUX 0x8203ULL

static int pfm_ready(char *why, size_t whylen)
{
    static int rc = -1;
    if (rc < 0)
        rc = pfm_initialize();
    if (rc != PFM_SUCCESS) {
        snprintf(why, whylen, "libpfm4 failed to initialise: %s", pfm_strerror(rc));
        return -1;
    }
    return 0;
}

const char *nmp_hw_pfm_core_pmu(char *buf, size_t len)
{
    char why[256];
    if (pfm_ready(why, sizeof why) < 0)
        return NULL;
    pfm_pmu_t p;
    const char *found = NULL;
    pfm_for_all_pmus(p)
    {
        pfm_pmu_info_t info;
        memset(&info, 0, sizeof info);
        info.size = sizeof info;
        if (pfm_get_pmu_info(p, &info) != PFM_SUCCESS || !info.is_present ||
            info.type != PFM_PMU_TYPE_CORE)
            continue;
        snprintf(buf, len, "%s", info.name);
        found = buf;
        /* hybrid parts list the atom PMU too: prefer the one with load latency */
        if (nmp_hw_pfm_needs_aux(info.name) || !strstr(info.name, "grt"))
            break;
    }
    return found;
}

int nmp_hw_pfm_needs_aux(const char *pmu)
{
    /* PMU_FL_MEM_LOADS_AUX: Sapphire Rapids (and its successors on the same core path)
     * and the big cores of Alder Lake (Linux arch/x86/events/intel/core.c intel_pmu_init). */
    static const char *const aux[] = {"spr", "emr", "gnr", "adl_glc", "rpl_glc", "mtl_rwc"};
    for (size_t i = 0; i < sizeof aux / sizeof *aux; i++)
        if (pmu && !strcmp(pmu, aux[i]))
            return 1;
    return 0;
}

static int pfm_encode(const char *pmu, const char *event, struct perf_event_attr *attr,
                      char *why, size_t whylen)
{
    char full[256];
    snprintf(full, sizeof full, "%s::%s", pmu, event);
    memset(attr, 0, sizeof *attr);
    attr->size = sizeof *attr; /* size 0 would copy only PERF_ATTR_SIZE_VER0 */
    pfm_perf_encode_arg_t e;
    memset(&e, 0, sizeof e);
    e.attr = attr;
    e.size = sizeof e;
    int rc = pfm_get_os_event_encoding(full, PFM_PLM3, PFM_OS_PERF_EVENT_EXT, &e);
    if (rc != PFM_SUCCESS) {
        snprintf(why, whylen, "libpfm4 cannot encode %s: %s", full, pfm_strerror(rc));
        return -1;
    }
    attr->size = sizeof *attr;
    return 0;
}

/* Encodes the first of `names` (+ `suffix`) that libpfm4 knows for `pmu`: libpfm4 names
 * the same event differently per model.  The name used goes into `name`.  0, or -1 with
 * `why` naming `what` and the names tried. */
static int pfm_encode_any(const char *pmu, const char *const *names, size_t count,
                          const char *suffix, const char *what, char *name, size_t namelen,
                          struct perf_event_attr *attr, char *why, size_t whylen)
{
    char tried[256] = "";
    for (size_t i = 0; i < count; i++) {
        snprintf(name, namelen, "%s%s", names[i], suffix);
        if (pfm_encode(pmu, name, attr, why, whylen) == 0)
            return 0;
        snprintf(tried + strlen(tried), sizeof tried - strlen(tried), "%s%s", i ? ", " : "",
                 names[i]);
    }
    snprintf(why, whylen, "libpfm4 %s has no %s event (tried %s)", pmu, what, tried);
    return -1;
}

static int phys_allowed(void)
{
    /* PERF_SAMPLE_PHYS_ADDR needs perf_allow_kernel(): paranoid <= 1 or CAP_PERFMON
     * (Linux kernel/events/core.c perf_event_open). */
    return nmp_hw_paranoid() <= 1 || nmp_hw_has_perfmon();
}

/* Sampling attrs shared by the backends.  `user_only` asks for user-level samples only
 * (exclude_kernel, exclude_hv, as perf's :u and libpfm4's PFM_PLM3): at the default
 * perf_event_paranoid 2 the kernel refuses anything else to an unprivileged user
 * (perf_event_open: !exclude_kernel needs perf_allow_kernel(), Linux kernel/events/core.c). */
static void common_attr(struct perf_event_attr *a, uint64_t period, uint64_t sample_type,
                        int user_only)
{
    if (user_only) {
        a->exclude_kernel = 1;
        a->exclude_hv = 1;
    }
    a->sample_period = period;
    a->freq = 0;
    a->sample_type = sample_type;
    a->sample_id_all = 1;
    a->use_clockid = 1;
    a->clockid = CLOCK_MONOTONIC;
    a->disabled = 0;
}

static int add_event(struct nmp_hw_event *ev, int *n, int max, const char *name,
                     const char *role, const char *source, const struct perf_event_attr *a,
                     char *why, size_t whylen)
{
    if (*n >= max) {
        snprintf(why, whylen, "too many hardware events for the caller's array (%d)", max);
        return -1;
    }
    struct nmp_hw_event *e = &ev[(*n)++];
    memset(e, 0, sizeof *e);
    snprintf(e->name, sizeof e->name, "%s", name);
    snprintf(e->role, sizeof e->role, "%s", role);
    snprintf(e->source, sizeof e->source, "%s", source);
    e->attr = *a;
    return 0;
}

/* A CPU newer than the installed libpfm4: the kernel's own event descriptions in
 * cpu/events/ (mem-loads, mem-loads-aux, mem-stores; Linux arch/x86/events/intel/core.c). */
int nmp_hw_build_pebs_sysfs(const struct nmp_hw_options *opt, int precise,
                            struct nmp_hw_event *ev, int max, char *why, size_t whylen)
{
    unsigned ldlat = opt && opt->ldlat ? opt->ldlat : 30;
    uint64_t st = PERF_SAMPLE_IP | PERF_SAMPLE_TID | PERF_SAMPLE_TIME | PERF_SAMPLE_CPU |
                  PERF_SAMPLE_ADDR | PERF_SAMPLE_DATA_SRC | PERF_SAMPLE_WEIGHT_STRUCT |
                  PERF_SAMPLE_IDENTIFIER;
    if (phys_allowed())
        st |= PERF_SAMPLE_PHYS_ADDR;
    uint64_t period = opt && opt->period ? opt->period : PEBS_LOAD_PERIOD;
    const char *src = "sysfs cpu/events (libpfm4 does not know this CPU)";
    struct perf_event_attr a;
    char name[96];
    int n = 0;
    if (nmp_hw_exists(NMP_PMU_DIR "/cpu/events/mem-loads-aux")) {
        if (nmp_hw_sysfs_event("cpu", "mem-loads-aux", &a, NULL, NULL, 0, why, whylen) < 0)
            return -1;
        common_attr(&a, period, st, 1);
        a.precise_ip = (unsigned)precise;
        if (add_event(ev, &n, max, "mem-loads-aux", "aux-leader", src, &a, why, whylen) < 0)
            return -1;
    }
    if (nmp_hw_sysfs_event("cpu", "mem-loads", &a, NULL, NULL, 0, why, whylen) < 0)
        return -1;
    a.config1 = 0; /* replace the sysfs default ldlat=3 */
    char term[32];
    snprintf(term, sizeof term, "ldlat=%u", ldlat);
    if (nmp_hw_sysfs_encode("cpu", term, &a, why, whylen) < 0)
        return -1;
    common_attr(&a, period, st, 1);
    a.precise_ip = (unsigned)precise;
    snprintf(name, sizeof name, "mem-loads,ldlat=%u", ldlat);
    if (add_event(ev, &n, max, name, "loads", src, &a, why, whylen) < 0)
        return -1;
    if (opt && opt->stores && nmp_hw_exists(NMP_PMU_DIR "/cpu/events/mem-stores")) {
        if (nmp_hw_sysfs_event("cpu", "mem-stores", &a, NULL, NULL, 0, why, whylen) < 0)
            return -1;
        common_attr(&a, opt->period ? opt->period : PEBS_STORE_PERIOD, st, 1);
        a.precise_ip = (unsigned)precise;
        if (add_event(ev, &n, max, "mem-stores", "stores", src, &a, why, whylen) < 0)
            return -1;
    }
    return n;
}

static int build_pebs(const struct nmp_hw_options *opt, const char *pfm_pmu, int precise,
                      struct nmp_hw_event *ev, int max, char *why, size_t whylen)
{
    char pmubuf[64], name[96], src[96];
    if (pfm_ready(why, whylen) < 0)
        return -1;
    if (!pfm_pmu) {
        pfm_pmu = nmp_hw_pfm_core_pmu(pmubuf, sizeof pmubuf);
        if (!pfm_pmu && nmp_hw_exists(NMP_PMU_DIR "/cpu/events/mem-loads"))
            return nmp_hw_build_pebs_sysfs(opt, precise, ev, max, why, whylen);
        if (!pfm_pmu) {
            snprintf(why, whylen, "libpfm4 knows no core PMU for this CPU "
                                  "(set LIBPFM_FORCE_PMU to list another model's events)");
            return -1;
        }
    }
    unsigned ldlat = opt && opt->ldlat ? opt->ldlat : 30; /* perf mem's default */
    if (ldlat > 65535) {
        snprintf(why, whylen, "ldlat %u out of range: libpfm4 and the kernel take 1-65535",
                 ldlat);
        return -1;
    }
    uint64_t st = PERF_SAMPLE_IP | PERF_SAMPLE_TID | PERF_SAMPLE_TIME | PERF_SAMPLE_CPU |
                  PERF_SAMPLE_ADDR | PERF_SAMPLE_DATA_SRC | PERF_SAMPLE_WEIGHT_STRUCT |
                  PERF_SAMPLE_IDENTIFIER;
    if (phys_allowed())
        st |= PERF_SAMPLE_PHYS_ADDR;
    int n = 0, aux = nmp_hw_pfm_needs_aux(pfm_pmu);
    uint64_t period = opt && opt->period ? opt->period : PEBS_LOAD_PERIOD;
    struct perf_event_attr a;

    if (aux) {
        /* The load-latency event with DATA_SRC needs 0x8203 in its group, opened first
         * (PMU_FL_MEM_LOADS_AUX, -ENODATA otherwise; Linux arch/x86/events/intel/core.c
         * intel_pmu_hw_config).  perf samples it with the same attrs
         * (tools/perf/arch/x86/util/mem-events.c "{mem-loads-aux,mem-loads}:P"). */
        if (pfm_encode(pfm_pmu, "LD_BLOCKS:STORE_FORWARD", &a, why, whylen) < 0)
            return -1;
        snprintf(src, sizeof src, "libpfm4 %s", pfm_pmu);
        if ((a.config & INTEL_ARCH_EVENT_MASK) != INTEL_MEM_LOADS_AUX) {
            snprintf(why, whylen, "libpfm4 %s encodes LD_BLOCKS:STORE_FORWARD as %#llx, not "
                     "the kernel's mem-loads-aux 0x8203", pfm_pmu, (unsigned long long)a.config);
            return -1;
        }
        common_attr(&a, period, st, 1);
        a.precise_ip = (unsigned)precise;
        if (add_event(ev, &n, max, "LD_BLOCKS:STORE_FORWARD", "aux-leader", src, &a, why,
                      whylen) < 0)
            return -1;
    }
    /* MEM_TRANS_RETIRED umask 0x1 (the kernel's mem-loads, 0x1cd) is LOAD_LATENCY in
     * libpfm4 from Haswell on and LATENCY_ABOVE_THRESHOLD on Sandy and Ivy Bridge
     * (libpfm4 4.13 snb, snb_ep, ivb, ivb_ep). */
    static const char *const loads[] = {"MEM_TRANS_RETIRED:LOAD_LATENCY",
                                        "MEM_TRANS_RETIRED:LATENCY_ABOVE_THRESHOLD"};
    char suffix[32];
    snprintf(suffix, sizeof suffix, ":ldlat=%u", ldlat);
    if (pfm_encode_any(pfm_pmu, loads, 2, suffix, "load-latency", name, sizeof name, &a, why,
                       whylen) < 0)
        return -1;
    if ((a.config & INTEL_ARCH_EVENT_MASK) != INTEL_MEM_LOADS) {
        snprintf(why, whylen, "libpfm4 %s encodes %s as %#llx, not the kernel's mem-loads "
                 "0x1cd", pfm_pmu, name, (unsigned long long)a.config);
        return -1;
    }
    common_attr(&a, period, st, 1);
    a.precise_ip = (unsigned)precise;
    snprintf(src, sizeof src, "libpfm4 %s", pfm_pmu);
    if (add_event(ev, &n, max, name, "loads", src, &a, why, whylen) < 0)
        return -1;

    if (opt && opt->stores) {
        uint64_t speriod = opt->period ? opt->period : PEBS_STORE_PERIOD;
        uint64_t sst = st & ~(uint64_t)PERF_SAMPLE_WEIGHT_STRUCT;
        if (aux) {
            /* libpfm4 spr::MEM_TRANS_RETIRED:STORE_SAMPLE encodes 0x3cd (its .code is
             * 0x01cd, libpfm4 lib/events/intel_spr_events.h); the kernel's SPR mem-stores is
             * event=0xcd,umask=0x2 = 0x2cd (Linux arch/x86/events/intel/core.c
             * spr_events_attrs). */
            snprintf(name, sizeof name, "MEM_TRANS_RETIRED:STORE_SAMPLE");
            if (pfm_encode(pfm_pmu, name, &a, why, whylen) < 0)
                return -1;
            if ((a.config & INTEL_ARCH_EVENT_MASK) == 0x3cd) {
                a.config = (a.config & ~INTEL_ARCH_EVENT_MASK) | 0x2cd;
                snprintf(src, sizeof src, "libpfm4 %s, umask fixed 0x3cd->0x2cd", pfm_pmu);
            }
            sst |= PERF_SAMPLE_WEIGHT_STRUCT; /* STLAT stores carry a latency */
        } else {
            /* The kernel's mem-stores: event=0xcd,umask=0x2 (MEM_TRANS_RETIRED.
             * PRECISE_STORE) on Sandy and Ivy Bridge, event=0xd0,umask=0x82 (ALL_STORES)
             * from Haswell on (Linux arch/x86/events/intel/core.c mem_st_snb, mem_st_hsw).
             * On Sandy/Ivy Bridge 0xd0 is a PEBS event without a data address
             * (ds.c intel_snb_pebs_event_constraints: INTEL_EXCLEVT_CONSTRAINT, while 0x2cd
             * is INTEL_PST_CONSTRAINT).  Only libpfm4's snb/ivb tables know PRECISE_STORE. */
            static const char *const stores[] = {"MEM_TRANS_RETIRED:PRECISE_STORE",
                                                 "MEM_INST_RETIRED:ALL_STORES",
                                                 "MEM_UOPS_RETIRED:ALL_STORES"};
            if (pfm_encode_any(pfm_pmu, stores, 3, "", "store-sampling", name, sizeof name, &a,
                               why, whylen) < 0)
                return -1;
            snprintf(src, sizeof src, "libpfm4 %s", pfm_pmu);
        }
        common_attr(&a, speriod, sst, 1);
        a.precise_ip = (unsigned)precise;
        if (add_event(ev, &n, max, name, "stores", src, &a, why, whylen) < 0)
            return -1;
    }
    return n;
}

static int build_ibs(const struct nmp_hw_options *opt, struct nmp_hw_event *ev, int max,
                     char *why, size_t whylen)
{
    uint64_t type;
    if (nmp_hw_read_u64(NMP_PMU_DIR "/ibs_op/type", &type) < 0) {
        snprintf(why, whylen, "no IBS PMU: " NMP_PMU_DIR "/ibs_op is absent");
        return -1;
    }
    struct perf_event_attr a;
    memset(&a, 0, sizeof a);
    a.size = sizeof a;
    a.type = (uint32_t)type;
    char src[96] = "sysfs ibs_op";
    /* cnt_ctl (config:19) = count dispatched ops rather than cycles, so that samples
     * are spread over instructions, as perf mem does on AMD (amd-sample-raw.c). */
    if (nmp_hw_exists(NMP_PMU_DIR "/ibs_op/format/cnt_ctl") &&
        nmp_hw_sysfs_encode("ibs_op", "cnt_ctl=1", &a, why, whylen) < 0)
        return -1;
    /* swfilt (format "config2:0", Linux 6.14, commit 9290c1b27402 "perf/x86: Relax
     * privilege filter restriction on AMD IBS"): with it perf_ibs_init() accepts
     * exclude_kernel / exclude_user / exclude_hv and perf_ibs_handle_irq() drops those
     * samples (and, with exclude_kernel, ops whose data address is in the kernel) itself
     * (Linux arch/x86/events/amd/ibs.c).  Without it any exclude_* is -EINVAL.  So where the
     * PMU has it, sample user level only, which perf_event_paranoid 2 allows without
     * CAP_PERFMON, as `perf record -e ibs_op/swfilt=1/u` does. */
    int swfilt = nmp_hw_exists(NMP_PMU_DIR "/ibs_op/format/swfilt");
    if (swfilt) {
        if (nmp_hw_sysfs_encode("ibs_op", "swfilt=1", &a, why, whylen) < 0)
            return -1;
        snprintf(src, sizeof src, "sysfs ibs_op, swfilt: user level only");
    }
    if (opt && opt->l3missonly) {
        if (!nmp_hw_exists(NMP_PMU_DIR "/ibs_op/format/l3missonly")) {
            snprintf(why, whylen, "ibs_op has no l3missonly format (IBS L3-miss filtering "
                                  "needs Zen4 and Linux 5.19)");
            return -1;
        }
        if (nmp_hw_sysfs_encode("ibs_op", "l3missonly=1", &a, why, whylen) < 0)
            return -1;
    }
    /* Period: with sample_period set, the MaxCnt bits of config must be 0 and the low 4
     * bits of the period must be 0 (-EINVAL otherwise; perf_ibs_init in ibs.c). */
    uint64_t period = opt && opt->period ? opt->period : IBS_OP_PERIOD;
    period &= ~0xfULL;
    if (period < 0x10)
        period = 0x10;
    if (period > IBS_OP_MAX_PERIOD)
        period = IBS_OP_MAX_PERIOD;
    uint64_t st = PERF_SAMPLE_IP | PERF_SAMPLE_TID | PERF_SAMPLE_TIME | PERF_SAMPLE_CPU |
                  PERF_SAMPLE_RAW | PERF_SAMPLE_ADDR | PERF_SAMPLE_DATA_SRC |
                  PERF_SAMPLE_WEIGHT | PERF_SAMPLE_IDENTIFIER;
    if (phys_allowed())
        st |= PERF_SAMPLE_PHYS_ADDR;
    /* exclude_guest, exclude_host and exclude_idle stay 0: -EINVAL even with swfilt.
     * Without swfilt kernel samples arrive too; the reader drops them by header.misc
     * (nmp_hw_misc_is_user). */
    common_attr(&a, period, st, swfilt);
    int n = 0;
    if (add_event(ev, &n, max, "ibs_op", "ibs-op", src, &a, why, whylen) < 0)
        return -1;
    return n;
}

int nmp_hw_build(enum nmp_backend backend, const struct nmp_hw_options *opt,
                 const char *pfm_pmu, int precise, struct nmp_hw_event *ev, int max,
                 char *why, size_t whylen)
{
    switch (backend) {
    case NMP_BACKEND_PEBS: return build_pebs(opt, pfm_pmu, precise, ev, max, why, whylen);
    case NMP_BACKEND_IBS: return build_ibs(opt, ev, max, why, whylen);
    default: break;
    }
    snprintf(why, whylen, "backend %d has no hardware events", (int)backend);
    return -1;
}

static long sys_perf_event_open(struct perf_event_attr *attr, pid_t pid, int cpu, int group_fd,
                                unsigned long flags)
{
    return syscall(SYS_perf_event_open, attr, pid, cpu, group_fd, flags);
}

static nmp_hw_open_fn g_open = sys_perf_event_open;

void nmp_hw_set_open(nmp_hw_open_fn fn)
{
    g_open = fn ? fn : sys_perf_event_open;
}

int nmp_hw_try_open(const struct perf_event_attr *attrs, int n)
{
    int fds[16], err = 0, i;
    if (n > 16) {
        errno = E2BIG;
        return -1;
    }
    for (i = 0; i < n; i++) {
        struct perf_event_attr a = attrs[i];
        a.disabled = 1;
        long fd = g_open(&a, 0, -1, i ? fds[0] : -1, PERF_FLAG_FD_CLOEXEC);
        if (fd < 0) {
            err = errno;
            break;
        }
        fds[i] = (int)fd;
    }
    for (int j = 0; j < i; j++)
        close(fds[j]);
    if (err) {
        errno = err;
        return -1;
    }
    return 0;
}

void nmp_hw_open_advice(int err, const char *what, char *why, size_t whylen)
{
    char virt[256];
    int paranoid = nmp_hw_paranoid();
    nmp_hw_virt(virt, sizeof virt);
    if (paranoid >= 3 && !nmp_hw_has_perfmon()) {
        snprintf(why, whylen, "perf_event_paranoid is %d: run `sysctl "
                 "kernel.perf_event_paranoid=2` (or grant CAP_PERFMON)", paranoid);
    } else if (err == EACCES || err == EPERM) {
        if (virt[0] && strstr(virt, "container"))
            snprintf(why, whylen, "%s: perf_event_open denied (%s) while %s: start the "
                     "container with --cap-add PERFMON (or --privileged) and a seccomp "
                     "profile that allows perf_event_open", what, strerror(err), virt);
        else
            snprintf(why, whylen, "%s: perf_event_open denied (%s) at perf_event_paranoid "
                     "%d: run `sysctl kernel.perf_event_paranoid=1` or grant CAP_PERFMON "
                     "(setcap cap_perfmon+ep numaprof-collect)", what, strerror(err), paranoid);
    } else if (err == ENODATA) {
        snprintf(why, whylen, "%s: the kernel wants the mem-loads-aux event (0x8203) as "
                 "group leader and refused this group (ENODATA)", what);
    } else if (err == ENOENT || err == EOPNOTSUPP || err == ENODEV || err == EINVAL) {
        snprintf(why, whylen, "%s: the PMU refused the event (%s)%s%s", what, strerror(err),
                 virt[0] ? "; " : "", virt[0] ? virt : "");
        if (virt[0] && strstr(virt, "VM"))
            snprintf(why + strlen(why), whylen - strlen(why),
                     ": the hypervisor must pass PEBS/IBS through (e.g. KVM with "
                     "-cpu host,pmu=on on a kernel with PEBS virtualization)");
    } else {
        snprintf(why, whylen, "%s: perf_event_open failed: %s", what, strerror(err));
    }
}

int nmp_hw_attrs(enum nmp_backend backend, const struct nmp_hw_options *opt,
                 struct perf_event_attr *attrs, int max, char *why, size_t whylen)
{
    struct nmp_hw_event ev[8];
    struct perf_event_attr tmp[8];
    const char *what = backend == NMP_BACKEND_IBS ? "ibs_op" : "PEBS load latency";
    if (backend == NMP_BACKEND_IBS) {
        int n = nmp_hw_build(backend, opt, NULL, 0, ev, 8, why, whylen);
        if (n < 0)
            return -1;
        for (int i = 0; i < n; i++)
            tmp[i] = ev[i].attr;
        if (nmp_hw_try_open(tmp, n) < 0) {
            nmp_hw_open_advice(errno, what, why, whylen);
            return -1;
        }
    } else {
        /* precise_ip: the highest level the kernel accepts for the whole group
         * (3 = zero skid required, 2 requested, 1 constant skid; uapi perf_event.h).
         * Kernels before 5.12 know no PERF_SAMPLE_WEIGHT_STRUCT and refuse it with
         * EINVAL (perf_copy_attr: a sample_type bit beyond PERF_SAMPLE_MAX); then, as
         * perf does (tools/perf/util/evsel.c evsel__detect_missing_features, "switching
         * off weight struct support"), ask for PERF_SAMPLE_WEIGHT, whose low 32 bits are
         * the same load latency (ds.c setup_pebs_*_sample_data). */
        int n = -1, err = 0;
        for (int legacy_weight = 0; legacy_weight < 2; legacy_weight++) {
            for (int precise = 3; precise >= 1; precise--) {
                n = nmp_hw_build(backend, opt, NULL, precise, ev, 8, why, whylen);
                if (n < 0)
                    return -1;
                for (int i = 0; i < n; i++) {
                    tmp[i] = ev[i].attr;
                    if (legacy_weight && (tmp[i].sample_type & PERF_SAMPLE_WEIGHT_STRUCT)) {
                        tmp[i].sample_type &= ~(uint64_t)PERF_SAMPLE_WEIGHT_STRUCT;
                        tmp[i].sample_type |= PERF_SAMPLE_WEIGHT;
                    }
                }
                err = nmp_hw_try_open(tmp, n) == 0 ? 0 : errno;
                if (!err)
                    break;
            }
            if (err != EINVAL)
                break;
        }
        if (err) {
            nmp_hw_open_advice(err, what, why, whylen);
            return -1;
        }
        if (n > max) {
            snprintf(why, whylen, "%d events do not fit in the caller's %d", n, max);
            return -1;
        }
        for (int i = 0; i < n; i++)
            attrs[i] = tmp[i];
        return n;
    }
    if (max < 1) {
        snprintf(why, whylen, "no room for the ibs_op event");
        return -1;
    }
    attrs[0] = ev[0].attr;
    return 1;
}

int nmp_hw_attr_is_aux(const struct perf_event_attr *attr)
{
    return attr->type == PERF_TYPE_RAW &&
           (attr->config & INTEL_ARCH_EVENT_MASK) == INTEL_MEM_LOADS_AUX;
}
