/* sysfs / procfs helpers of the hardware backends, all through NUMAPROF_SYSROOT. */
#include "nmp_hw_priv.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

char *nmp_hw_path(char *buf, size_t len, const char *path)
{
    const char *root = getenv("NUMAPROF_SYSROOT");
    snprintf(buf, len, "%s%s", root ? root : "", path);
    return buf;
}

int nmp_hw_read_file(const char *path, char *buf, size_t len)
{
    char p[4096];
    FILE *f = fopen(nmp_hw_path(p, sizeof p, path), "r");
    if (!f)
        return -1;
    size_t n = fread(buf, 1, len - 1, f);
    int err = ferror(f);
    fclose(f);
    if (err) {
        errno = EIO;
        return -1;
    }
    buf[n] = 0;
    while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == ' '))
        buf[--n] = 0;
    return (int)n;
}

int nmp_hw_read_u64(const char *path, uint64_t *v)
{
    char buf[64], *end;
    if (nmp_hw_read_file(path, buf, sizeof buf) <= 0)
        return -1;
    errno = 0;
    unsigned long long x = strtoull(buf, &end, 0);
    if (errno || end == buf) {
        errno = EINVAL;
        return -1;
    }
    *v = x;
    return 0;
}

int nmp_hw_exists(const char *path)
{
    char p[4096];
    return access(nmp_hw_path(p, sizeof p, path), F_OK) == 0;
}

int nmp_hw_paranoid(void)
{
    char buf[32];
    if (nmp_hw_read_file("/proc/sys/kernel/perf_event_paranoid", buf, sizeof buf) <= 0)
        return 2;
    return atoi(buf);
}

int nmp_hw_has_perfmon(void)
{
    char p[4096], line[256];
    FILE *f = fopen(nmp_hw_path(p, sizeof p, "/proc/self/status"), "r");
    if (!f)
        return 0;
    unsigned long long eff = 0;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "CapEff: %llx", &eff) == 1)
            break;
    fclose(f);
    /* CAP_SYS_ADMIN 21, CAP_PERFMON 38 (include/uapi/linux/capability.h) */
    return (eff >> 21 & 1) || (eff >> 38 & 1);
}

static int file_contains(const char *path, const char *needle, char *line, size_t len)
{
    char p[4096];
    FILE *f = fopen(nmp_hw_path(p, sizeof p, path), "r");
    if (!f)
        return 0;
    int found = 0;
    while (!found && fgets(line, (int)len, f))
        found = strstr(line, needle) != NULL;
    fclose(f);
    return found;
}

void nmp_hw_virt(char *buf, size_t len)
{
    char line[1024], vendor[128] = "", product[128] = "";
    buf[0] = 0;
    if (nmp_hw_exists("/.dockerenv")) {
        snprintf(buf, len, "running in a container (/.dockerenv exists)");
        return;
    }
    if (nmp_hw_exists("/run/.containerenv")) {
        snprintf(buf, len, "running in a container (/run/.containerenv exists)");
        return;
    }
    static const char *const engines[] = {"docker", "kubepods", "lxc", "libpod", "containerd"};
    for (size_t i = 0; i < sizeof engines / sizeof *engines; i++)
        if (file_contains("/proc/1/cgroup", engines[i], line, sizeof line)) {
            snprintf(buf, len, "running in a container (/proc/1/cgroup mentions %s)",
                     engines[i]);
            return;
        }
    nmp_hw_read_file("/sys/class/dmi/id/sys_vendor", vendor, sizeof vendor);
    nmp_hw_read_file("/sys/class/dmi/id/product_name", product, sizeof product);
    /* the strings systemd-detect-virt matches in src/basic/virt.c (detect_vm_dmi) */
    static const char *const vms[] = {"KVM", "QEMU", "VMware", "VMW", "innotek GmbH",
                                      "VirtualBox", "Xen", "Bochs", "Parallels",
                                      "Microsoft Corporation", "Amazon EC2", "Google",
                                      "OpenStack", "BHYVE", "Hyper-V"};
    for (size_t i = 0; i < sizeof vms / sizeof *vms; i++)
        if (strstr(vendor, vms[i]) || strstr(product, vms[i])) {
            snprintf(buf, len, "running in a VM (%s in /sys/class/dmi/id)", vms[i]);
            return;
        }
    if (file_contains("/proc/cpuinfo", " hypervisor", line, sizeof line))
        snprintf(buf, len, "running in a VM (hypervisor flag in /proc/cpuinfo)");
}

int nmp_hw_cpu_id(unsigned *family, unsigned *model, char *vendor, size_t vlen)
{
    char p[4096], line[512];
    FILE *f = fopen(nmp_hw_path(p, sizeof p, "/proc/cpuinfo"), "r");
    if (!f)
        return -1;
    int got = 0;
    while (fgets(line, sizeof line, f)) {
        unsigned v;
        char s[64];
        if (!strncmp(line, "processor", 9) && got)
            break;
        if (sscanf(line, "cpu family : %u", &v) == 1) {
            *family = v;
            got |= 1;
        } else if (sscanf(line, "model : %u", &v) == 1) {
            *model = v;
            got |= 2;
        } else if (vendor && sscanf(line, "vendor_id : %63s", s) == 1) {
            snprintf(vendor, vlen, "%s", s);
            got |= 4;
        }
    }
    fclose(f);
    return (got & 3) == 3 ? 0 : -1;
}

/* Puts `value` into the bit ranges of a format spec such as "config:0-7,32-35", lowest
 * value bits into the first range (the kernel's and perf's pmu_format_value()). */
static int apply_format(const char *spec, uint64_t value, struct perf_event_attr *attr)
{
    __u64 *field;
    if (!strncmp(spec, "config2:", 8)) {
        field = &attr->config2;
        spec += 8;
    } else if (!strncmp(spec, "config1:", 8)) {
        field = &attr->config1;
        spec += 8;
    } else if (!strncmp(spec, "config:", 7)) {
        field = &attr->config;
        spec += 7;
    } else {
        return -1;
    }
    int vbit = 0;
    while (*spec) {
        char *end;
        long lo = strtol(spec, &end, 10), hi = lo;
        if (end == spec)
            return -1;
        if (*end == '-') {
            spec = end + 1;
            hi = strtol(spec, &end, 10);
            if (end == spec)
                return -1;
        }
        if (lo < 0 || hi > 63 || hi < lo)
            return -1;
        for (long b = lo; b <= hi; b++, vbit++)
            if (vbit < 64 && (value >> vbit & 1))
                *field |= 1ULL << b;
        spec = end;
        if (*spec == ',')
            spec++;
        else if (*spec)
            return -1;
    }
    return 0;
}

int nmp_hw_sysfs_encode(const char *pmu, const char *event, struct perf_event_attr *attr,
                        char *why, size_t whylen)
{
    char copy[512], *save = NULL;
    snprintf(copy, sizeof copy, "%s", event);
    for (char *term = strtok_r(copy, ",", &save); term; term = strtok_r(NULL, ",", &save)) {
        while (isspace((unsigned char)*term))
            term++;
        char *eq = strchr(term, '=');
        uint64_t value = 1;
        if (eq) {
            *eq = 0;
            char *end;
            value = strtoull(eq + 1, &end, 0);
            if (end == eq + 1) {
                snprintf(why, whylen, "%s: bad value in event term '%s=%s'", pmu, term, eq + 1);
                return -1;
            }
        }
        char path[512], spec[128];
        snprintf(path, sizeof path, NMP_PMU_DIR "/%s/format/%s", pmu, term);
        if (nmp_hw_read_file(path, spec, sizeof spec) <= 0) {
            snprintf(why, whylen, "%s: no format file for event term '%s'", pmu, term);
            return -1;
        }
        if (apply_format(spec, value, attr) < 0) {
            snprintf(why, whylen, "%s: cannot parse format '%s' of term '%s'", pmu, spec, term);
            return -1;
        }
    }
    return 0;
}

int nmp_hw_sysfs_event(const char *pmu, const char *name, struct perf_event_attr *attr,
                       double *scale, char *unit, size_t unitlen, char *why, size_t whylen)
{
    char path[512], ev[512], buf[64];
    uint64_t type;
    snprintf(path, sizeof path, NMP_PMU_DIR "/%s/type", pmu);
    if (nmp_hw_read_u64(path, &type) < 0) {
        snprintf(why, whylen, "%s: cannot read %s", pmu, path);
        return -1;
    }
    snprintf(path, sizeof path, NMP_PMU_DIR "/%s/events/%s", pmu, name);
    if (nmp_hw_read_file(path, ev, sizeof ev) <= 0) {
        snprintf(why, whylen, "%s: no event %s (%s)", pmu, name, path);
        return -1;
    }
    memset(attr, 0, sizeof *attr);
    attr->size = sizeof *attr;
    attr->type = (uint32_t)type;
    if (nmp_hw_sysfs_encode(pmu, ev, attr, why, whylen) < 0)
        return -1;
    if (scale) {
        *scale = 1.0;
        snprintf(path, sizeof path, NMP_PMU_DIR "/%s/events/%s.scale", pmu, name);
        if (nmp_hw_read_file(path, buf, sizeof buf) > 0)
            *scale = strtod(buf, NULL);
    }
    if (unit) {
        unit[0] = 0;
        snprintf(path, sizeof path, NMP_PMU_DIR "/%s/events/%s.unit", pmu, name);
        nmp_hw_read_file(path, unit, unitlen);
    }
    return 0;
}

int nmp_hw_cpulist_first(const char *list)
{
    while (isspace((unsigned char)*list))
        list++;
    if (!isdigit((unsigned char)*list))
        return -1;
    return atoi(list);
}

static int cpulist_has(const char *list, int cpu)
{
    const char *s = list;
    while (*s) {
        char *end;
        long lo = strtol(s, &end, 10), hi = lo;
        if (end == s)
            return 0;
        if (*end == '-') {
            s = end + 1;
            hi = strtol(s, &end, 10);
        }
        if (cpu >= lo && cpu <= hi)
            return 1;
        s = end;
        while (*s == ',' || isspace((unsigned char)*s))
            s++;
    }
    return 0;
}

int nmp_hw_node_of_cpu(int cpu)
{
    char p[4096];
    DIR *d = opendir(nmp_hw_path(p, sizeof p, "/sys/devices/system/node"));
    if (!d)
        return -1;
    int node = -1;
    struct dirent *e;
    while (node < 0 && (e = readdir(d))) {
        int n;
        char list[4096], path[512];
        if (sscanf(e->d_name, "node%d", &n) != 1)
            continue;
        snprintf(path, sizeof path, "/sys/devices/system/node/node%d/cpulist", n);
        if (nmp_hw_read_file(path, list, sizeof list) > 0 && cpulist_has(list, cpu))
            node = n;
    }
    closedir(d);
    return node;
}
