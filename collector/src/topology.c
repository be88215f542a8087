/* Topology at record time (docs/record.md): the hwloc topology of this machine, exported as
 * <dir>/topology.xml and summarised in <dir>/topology.json (docs/profile-format.md), so
 * that a report made on another machine uses the recorded one.  HWLOC_XMLFILE, when set,
 * replaces discovery with a canned topology (tests, --target files).
 */
#include "nmp_collect.h"

#include <errno.h>
#include <fcntl.h>
#include <hwloc.h>
#include <hwloc/autogen/config.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* SLIT-style distance matrix for the nodes in `nodes` order: "NUMALatency" (the Linux
 * backend's name, hwloc >= 2.1), else any latency matrix over NUMA nodes.  Without one
 * (a single node, or a machine without SLIT), the kernel's defaults: 10 local, 20 remote
 * (LOCAL_DISTANCE / REMOTE_DISTANCE, include/linux/topology.h). */
static void fill_distances(hwloc_topology_t topo, hwloc_obj_t *nodes, unsigned nn,
                           uint64_t *out)
{
    for (unsigned i = 0; i < nn; i++)
        for (unsigned j = 0; j < nn; j++)
            out[i * nn + j] = i == j ? 10 : 20;
    struct hwloc_distances_s *d = NULL;
    unsigned nr = 1;
    if (hwloc_distances_get_by_name(topo, "NUMALatency", &nr, &d, 0) < 0 || nr == 0) {
        nr = 1;
        d = NULL;
        if (hwloc_distances_get_by_type(topo, HWLOC_OBJ_NUMANODE, &nr, &d,
                                        HWLOC_DISTANCES_KIND_MEANS_LATENCY, 0) < 0 ||
            nr == 0)
            return;
    }
    for (unsigned i = 0; i < nn; i++) {
        for (unsigned j = 0; j < nn; j++) {
            int a = -1, b = -1;
            for (unsigned k = 0; k < d->nbobjs; k++) {
                if (d->objs[k] == nodes[i])
                    a = (int)k;
                if (d->objs[k] == nodes[j])
                    b = (int)k;
            }
            if (a >= 0 && b >= 0)
                out[i * nn + j] = d->values[(unsigned)a * d->nbobjs + (unsigned)b];
        }
    }
    hwloc_distances_release(topo, d);
}

static const char *cache_type(hwloc_obj_cache_type_t t)
{
    switch (t) {
    case HWLOC_OBJ_CACHE_DATA: return "data";
    case HWLOC_OBJ_CACHE_INSTRUCTION: return "instruction";
    default: return "unified";
    }
}

static int write_json(hwloc_topology_t topo, FILE *f)
{
    int nn = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_NUMANODE);
    if (nn < 1)
        nn = 0;
    hwloc_obj_t *nodes = calloc((size_t)nn + 1, sizeof *nodes);
    uint64_t *dist = calloc((size_t)nn * (size_t)nn + 1, sizeof *dist);
    if (!nodes || !dist) {
        free(nodes);
        free(dist);
        return -1;
    }
    for (int i = 0; i < nn; i++)
        nodes[i] = hwloc_get_obj_by_type(topo, HWLOC_OBJ_NUMANODE, (unsigned)i);
    /* by node id (os_index), as numactl and the kernel number them, whatever order the
     * hwloc tree has them in */
    for (int i = 1; i < nn; i++)
        for (int j = i; j > 0 && nodes[j - 1]->os_index > nodes[j]->os_index; j--) {
            hwloc_obj_t tmp = nodes[j];
            nodes[j] = nodes[j - 1];
            nodes[j - 1] = tmp;
        }

    uint64_t page_size = (uint64_t)sysconf(_SC_PAGESIZE);
    fprintf(f, "{\"source\": \"hwloc %s\", \"nodes\": [", HWLOC_VERSION);
    for (int i = 0; i < nn; i++) {
        hwloc_obj_t n = nodes[i];
        fprintf(f, "%s{\"id\": %u, \"cpus\": [", i ? ", " : "", n->os_index);
        int first = 1;
        if (n->cpuset) {
            unsigned pu;
            hwloc_bitmap_foreach_begin(pu, n->cpuset) {
                fprintf(f, "%s%u", first ? "" : ", ", pu);
                first = 0;
            }
            hwloc_bitmap_foreach_end();
        }
        fprintf(f, "], \"memory_bytes\": %llu}",
                (unsigned long long)n->attr->numanode.local_memory);
        if (i == 0 && n->attr->numanode.page_types_len > 0 &&
            n->attr->numanode.page_types[0].size)
            page_size = n->attr->numanode.page_types[0].size;
    }
    fputs("], \"distances\": [", f);
    if (nn == 0) {
        fputs("[10]", f);
    } else {
        fill_distances(topo, nodes, (unsigned)nn, dist);
        for (int i = 0; i < nn; i++) {
            fprintf(f, "%s[", i ? ", " : "");
            for (int j = 0; j < nn; j++)
                fprintf(f, "%s%llu", j ? ", " : "", (unsigned long long)dist[i * nn + j]);
            fputc(']', f);
        }
    }
    fprintf(f, "], \"pus\": %d, \"cores\": %d, \"packages\": %d, \"caches\": [",
            hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_PU),
            hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_CORE),
            hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_PACKAGE));
    /* one entry per distinct (level, type, size), from L1 up */
    int ncache = 0;
    struct { unsigned depth; int type; uint64_t size; } seen[64];
    for (hwloc_obj_type_t t = HWLOC_OBJ_L1CACHE; t <= HWLOC_OBJ_L3ICACHE; t++) {
        if (!hwloc_obj_type_is_cache(t))
            continue;
        int cnt = hwloc_get_nbobjs_by_type(topo, t);
        for (int i = 0; i < cnt; i++) {
            hwloc_obj_t c = hwloc_get_obj_by_type(topo, t, (unsigned)i);
            int dup = 0;
            for (int k = 0; k < ncache; k++)
                dup |= seen[k].depth == c->attr->cache.depth &&
                       seen[k].type == (int)c->attr->cache.type &&
                       seen[k].size == c->attr->cache.size;
            if (dup || ncache >= 64)
                continue;
            seen[ncache].depth = c->attr->cache.depth;
            seen[ncache].type = (int)c->attr->cache.type;
            seen[ncache].size = c->attr->cache.size;
            fprintf(f, "%s{\"level\": %u, \"size\": %llu, \"type\": \"%s\"}",
                    ncache ? ", " : "", c->attr->cache.depth,
                    (unsigned long long)c->attr->cache.size, cache_type(c->attr->cache.type));
            ncache++;
        }
    }
    fprintf(f, "], \"page_size\": %llu}\n", (unsigned long long)page_size);
    free(nodes);
    free(dist);
    return ferror(f) ? -1 : 0;
}

/* hwloc's plugins (docs: "Components and plugins"): I/O discovery (PCI, GPUs, OpenCL,
 * X displays) and the libxml2 XML back end.  The profile needs none of them (CPUs,
 * caches, NUMA nodes and distances come from the built-in Linux and x86 back ends; the
 * built-in XML code reads and writes the same format), and loading them costs more than
 * the rest of the topology: hwloc_gl.so alone pulls in libX11 and five more libraries,
 * hwloc_xml_libxml.so libxml2 and ICU, hwloc_pci.so scans the PCI bus — 20-30 ms of the
 * recording's start on the development machine.  hwloc dlopens every plugin at the first
 * hwloc_topology_init unless its file name is in $HWLOC_PLUGINS_BLACKLIST (read there
 * and then, components.c); a user's own setting is left alone. */
static const char PLUGINS_NOT_NEEDED[] =
    "hwloc_pci.so,hwloc_gl.so,hwloc_opencl.so,hwloc_cuda.so,hwloc_nvml.so,hwloc_rsmi.so,"
    "hwloc_levelzero.so,hwloc_xml_libxml.so";

static int topology_init(hwloc_topology_t *topo)
{
    int own = getenv("HWLOC_PLUGINS_BLACKLIST") == NULL &&
              setenv("HWLOC_PLUGINS_BLACKLIST", PLUGINS_NOT_NEEDED, 0) == 0;
    int rc = hwloc_topology_init(topo);
    int e = errno;
    if (own)
        unsetenv("HWLOC_PLUGINS_BLACKLIST"); /* the program's environment is the user's */
    errno = e;
    return rc;
}

/* Discovers the initialised `topo` and writes both files; destroys it.  0, or -1 with
 * err and errno. */
static int load_and_write(hwloc_topology_t topo, const char *dir, char *err)
{
    const char *xmlfile = getenv("HWLOC_XMLFILE");
    if (xmlfile && *xmlfile && hwloc_topology_set_xml(topo, xmlfile) < 0) {
        nmp_set_err(err, "HWLOC_XMLFILE=%s: cannot be read by hwloc: %s", xmlfile, strerror(errno));
        hwloc_topology_destroy(topo);
        return -1;
    }
    if (hwloc_topology_load(topo) < 0) {
        nmp_set_err(err, "hwloc_topology_load: %s", strerror(errno));
        hwloc_topology_destroy(topo);
        return -1;
    }
    int rc = -1;
    char *xml = NULL;
    int xmllen = 0;
    if (hwloc_topology_export_xmlbuffer(topo, &xml, &xmllen, 0) < 0) {
        nmp_set_err(err, "hwloc_topology_export_xmlbuffer: %s", strerror(errno));
        goto out;
    }
    /* xmllen counts the terminating NUL */
    if (nmp_write_atomic(dir, "topology.xml", xml, xmllen > 0 ? (size_t)xmllen - 1 : 0, err) < 0)
        goto out;

    char *json = NULL;
    size_t jsonlen = 0;
    FILE *f = open_memstream(&json, &jsonlen);
    if (!f) {
        nmp_set_err(err, "open_memstream: %s", strerror(errno));
        goto out;
    }
    int wrc = write_json(topo, f);
    if (fclose(f) != 0 || wrc < 0) {
        nmp_set_err(err, "topology.json: out of memory");
        free(json);
        errno = ENOMEM;
        goto out;
    }
    rc = nmp_write_atomic(dir, "topology.json", json, jsonlen, err);
    free(json);
    nmp_debug("topology: wrote %s/topology.{xml,json}%s%s", dir, xmlfile ? " from " : "",
              xmlfile ? xmlfile : "");
out:
    if (xml)
        hwloc_free_xmlbuffer(topo, xml);
    hwloc_topology_destroy(topo);
    return rc;
}

int nmp_topology_write(const char *dir, char *err)
{
    hwloc_topology_t topo;
    if (topology_init(&topo) < 0) {
        nmp_set_err(err, "hwloc_topology_init: %s", strerror(errno));
        return -1;
    }
    return load_and_write(topo, dir, err);
}

static void *topology_thread(void *arg)
{
    struct nmp_topology_job *j = arg;
    j->rc = load_and_write(j->topo, j->dir, j->err);
    if (j->rc != 0 && !j->err[0])
        snprintf(j->err, sizeof j->err, "%s", strerror(errno));
    return NULL;
}

void nmp_topology_start(struct nmp_topology_job *j, const char *dir)
{
    memset(j, 0, sizeof *j);
    j->dir = dir;
    /* in this thread: hwloc reads its environment at the first init, and the plugin
     * list above is set and taken back around it */
    if (topology_init(&j->topo) < 0) {
        j->rc = -1;
        snprintf(j->err, sizeof j->err, "hwloc_topology_init: %s", strerror(errno));
        return;
    }
    /* the thread takes no signal: the collector's come through its signalfd */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int e = pthread_create(&j->th, NULL, topology_thread, j);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (e == 0) {
        j->running = 1;
        return;
    }
    topology_thread(j); /* no thread: in line, as before */
}

int nmp_topology_join(struct nmp_topology_job *j)
{
    if (j->running) {
        pthread_join(j->th, NULL);
        j->running = 0;
    }
    return j->rc;
}
