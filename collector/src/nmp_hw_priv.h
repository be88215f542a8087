/* Internals of the hardware backends (hw_*.c), shared with their tests.
 *
 * Every read of /sys and /proc goes through the root prefix in the environment variable
 * NUMAPROF_SYSROOT (default ""), so tests run against fixture trees (hwloc's practice).
 */
#ifndef NMP_HW_PRIV_H
#define NMP_HW_PRIV_H

#include "nmp_hw.h"

#define NMP_PMU_DIR "/sys/bus/event_source/devices"

/* perf_mem_data_src fields (Linux include/uapi/linux/perf_event.h); defined here so the
 * values do not depend on the age of the installed uapi header. */
#define NMP_MEM_OP_NA 0x01ULL
#define NMP_MEM_OP_LOAD 0x02ULL
#define NMP_MEM_OP_STORE 0x04ULL
#define NMP_MEM_OP_SHIFT 0
#define NMP_MEM_LVL_NA 0x01ULL
#define NMP_MEM_LVL_HIT 0x02ULL
#define NMP_MEM_LVL_MISS 0x04ULL
#define NMP_MEM_LVL_L1 0x08ULL
#define NMP_MEM_LVL_LFB 0x10ULL
#define NMP_MEM_LVL_L2 0x20ULL
#define NMP_MEM_LVL_L3 0x40ULL
#define NMP_MEM_LVL_LOC_RAM 0x80ULL
#define NMP_MEM_LVL_REM_RAM1 0x100ULL
#define NMP_MEM_LVL_REM_RAM2 0x200ULL
#define NMP_MEM_LVL_REM_CCE1 0x400ULL
#define NMP_MEM_LVL_REM_CCE2 0x800ULL
#define NMP_MEM_LVL_IO 0x1000ULL
#define NMP_MEM_LVL_UNC 0x2000ULL
#define NMP_MEM_LVL_SHIFT 5
#define NMP_MEM_SNOOP_NA 0x01ULL
#define NMP_MEM_SNOOP_HITM 0x10ULL
#define NMP_MEM_SNOOP_SHIFT 19
#define NMP_MEM_LOCK_NA 0x01ULL
#define NMP_MEM_LOCK_LOCKED 0x02ULL
#define NMP_MEM_LOCK_SHIFT 24
#define NMP_MEM_TLB_NA 0x01ULL
#define NMP_MEM_TLB_HIT 0x02ULL
#define NMP_MEM_TLB_MISS 0x04ULL
#define NMP_MEM_TLB_L1 0x08ULL
#define NMP_MEM_TLB_L2 0x10ULL
#define NMP_MEM_TLB_SHIFT 26
#define NMP_MEM_LVLNUM_L1 0x01ULL
#define NMP_MEM_LVLNUM_L2 0x02ULL
#define NMP_MEM_LVLNUM_L3 0x03ULL
#define NMP_MEM_LVLNUM_L4 0x04ULL
#define NMP_MEM_LVLNUM_UNC 0x08ULL
#define NMP_MEM_LVLNUM_CXL 0x09ULL
#define NMP_MEM_LVLNUM_IO 0x0aULL
#define NMP_MEM_LVLNUM_ANY_CACHE 0x0bULL
#define NMP_MEM_LVLNUM_LFB 0x0cULL
#define NMP_MEM_LVLNUM_RAM 0x0dULL
#define NMP_MEM_LVLNUM_PMEM 0x0eULL
#define NMP_MEM_LVLNUM_NA 0x0fULL
#define NMP_MEM_LVLNUM_SHIFT 33
#define NMP_MEM_REMOTE_SHIFT 37
#define NMP_MEM_HOPS_0 1 /* remote core, same node */
#define NMP_MEM_HOPS_SHIFT 43
/* PERF_MEM_NA of current kernels: op, lvl, snoop, lock, tlb and lvl_num all NA. */
#define NMP_MEM_NA 0x1e05080021ULL

/* ---- sysfs / procfs through NUMAPROF_SYSROOT (hw_sysfs.c) ---- */
/* "<sysroot><path>" into buf; returns buf. */
char *nmp_hw_path(char *buf, size_t len, const char *path);
/* Reads a whole small file (path relative to the sysroot) into buf, NUL-terminated,
 * trailing newline stripped.  Returns its length, or -1 with errno. */
int nmp_hw_read_file(const char *path, char *buf, size_t len);
int nmp_hw_read_u64(const char *path, uint64_t *v);
int nmp_hw_exists(const char *path);
/* kernel.perf_event_paranoid, or 2 (the default) if unreadable. */
int nmp_hw_paranoid(void);
/* CAP_PERFMON or CAP_SYS_ADMIN in this process's effective set (/proc/self/status). */
int nmp_hw_has_perfmon(void);
/* One line saying whether this looks like a container or a VM and why ("" if neither):
 * /.dockerenv, /run/.containerenv, /proc/1/cgroup, /sys/class/dmi/id/sys_vendor and
 * product_name, the cpuinfo hypervisor flag. */
void nmp_hw_virt(char *buf, size_t len);
/* cpu family/model/vendor of cpu 0 from /proc/cpuinfo; 0 on success. */
int nmp_hw_cpu_id(unsigned *family, unsigned *model, char *vendor, size_t vlen);

/* Encodes a sysfs event string ("event=0xcd,umask=0x1,ldlat=3") with the PMU's
 * format/ files into attr->config/config1/config2.  0, or -1 with `why`. */
int nmp_hw_sysfs_encode(const char *pmu, const char *event, struct perf_event_attr *attr,
                        char *why, size_t whylen);
/* Reads <pmu>/events/<name> and encodes it; also its .scale (1.0 if absent) and .unit. */
int nmp_hw_sysfs_event(const char *pmu, const char *name, struct perf_event_attr *attr,
                       double *scale, char *unit, size_t unitlen, char *why, size_t whylen);
/* Parses a cpu list ("0-3,8") into mask (up to `max` cpus); returns the first cpu or -1. */
int nmp_hw_cpulist_first(const char *list);
/* NUMA node of a cpu from /sys/devices/system/node/node<N>/cpulist, or -1. */
int nmp_hw_node_of_cpu(int cpu);

/* ---- event encodings (hw_attrs.c) ---- */
struct nmp_hw_event {
    char name[96];     /* what the event is, e.g. "MEM_TRANS_RETIRED:LOAD_LATENCY:ldlat=30" */
    char role[32];     /* "loads", "stores", "aux-leader", "ibs-op" */
    char source[96];   /* "libpfm4 skx", "libpfm4 spr (fixed: ...)", "sysfs ibs_op" */
    struct perf_event_attr attr;
};
/* Builds the events of `backend` for the libpfm4 PMU `pfm_pmu` (NULL = the detected
 * default one) without opening anything; precise_ip is left at `precise`.  Returns the
 * count or -1 with `why`. */
int nmp_hw_build(enum nmp_backend backend, const struct nmp_hw_options *opt,
                 const char *pfm_pmu, int precise, struct nmp_hw_event *ev, int max,
                 char *why, size_t whylen);
/* The PEBS events from the kernel's cpu/events/ descriptions, as nmp_hw_build() uses
 * them when libpfm4 does not know the CPU.  Returns the count or -1 with `why`. */
int nmp_hw_build_pebs_sysfs(const struct nmp_hw_options *opt, int precise,
                            struct nmp_hw_event *ev, int max, char *why, size_t whylen);
/* Name of the libpfm4 core PMU in use (forced or detected), or NULL. */
const char *nmp_hw_pfm_core_pmu(char *buf, size_t len);
/* Does this libpfm4 PMU need the mem-loads-aux leader (PMU_FL_MEM_LOADS_AUX)? */
int nmp_hw_pfm_needs_aux(const char *pfm_pmu);
/* Opens the group attrs[0..n) on the calling thread (pid 0, cpu -1) and closes it:
 * 0, or -1 with errno of the first failing open. */
int nmp_hw_try_open(const struct perf_event_attr *attrs, int n);
/* The perf_event_open used by nmp_hw_try_open (and so nmp_hw_attrs): the system call,
 * or for tests a stand-in that plays an older or stricter kernel; NULL restores the
 * system call.  Returns an fd, or -1 with errno. */
typedef long (*nmp_hw_open_fn)(struct perf_event_attr *attr, pid_t pid, int cpu, int group_fd,
                               unsigned long flags);
void nmp_hw_set_open(nmp_hw_open_fn fn);
/* perf_event_open errno -> one line of advice (paranoid, CAP_PERFMON, VM/container). */
void nmp_hw_open_advice(int err, const char *what, char *why, size_t whylen);

/* ---- IBS (hw_decode.c) ---- */
/* The registers of one ibs_op PERF_SAMPLE_RAW payload (Linux arch/x86/include/asm/amd-ibs.h). */
struct nmp_ibs_op {
    uint32_t caps;
    uint64_t ctl, rip, data, data2, data3, dc_linaddr, dc_physaddr;
    uint64_t br_target, data4;
    int nregs;
};
#define NMP_IBS_CAPS_BRNTRGT (1u << 5)
#define NMP_IBS_CAPS_RIPINVALIDCHK (1u << 7)
#define NMP_IBS_CAPS_OPDATA4 (1u << 10)
#define NMP_IBS_CAPS_ZEN4 (1u << 11)
/* Splits a RAW payload (after its u32 size) of `size` bytes; 0, or -1 if malformed or
 * not a valid op sample (op_en and op_val clear). */
int nmp_ibs_parse_raw(const void *data, uint32_t size, struct nmp_ibs_op *op);
/* The perf_mem_data_src the kernel synthesizes for this op (Linux arch/x86/events/amd/ibs.c
 * perf_ibs_parse_ld_st_data and its helpers), for a cpu of this family/model. */
uint64_t nmp_ibs_data_src(const struct nmp_ibs_op *op, unsigned family, unsigned model);
/* Fills addr, phys_addr, access, size, weight, data_src, rule of `out` from the op, and
 * clears ip when the op's RIP is invalid (nmp_ibs_rip_invalid). */
void nmp_ibs_fill(const struct nmp_ibs_op *op, unsigned family, unsigned model,
                  struct nmp_sample *out);
/* IBS could not record the op's RIP: IBS_OP_DATA rip_invalid (bit 38), which counts only
 * where caps has RIPINVALIDCHK (ibs.c perf_ibs_handle_irq).  The kernel then keeps the
 * interrupted IP as the sample's IP and clears the exact flag. */
int nmp_ibs_rip_invalid(const struct nmp_ibs_op *op);
/* The cpu family/model used by nmp_hw_decode for IBS errata (read once from cpuinfo);
 * tests set it. */
void nmp_hw_set_cpu(unsigned family, unsigned model);

#endif
