/* nmp_topology_write on a canned 2-node, 2-package topology (HWLOC_XMLFILE) with a
 * 10/21 SLIT, and on this machine. */
#include "nmp_collect.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "nmp_check.h"


#define PU(os, gp) \
    "<object type=\"Core\" os_index=\"" #os "\" cpuset=\"" gp "\" complete_cpuset=\"" gp "\">" \
    "<object type=\"PU\" os_index=\"" #os "\" cpuset=\"" gp "\" complete_cpuset=\"" gp "\"/></object>"

static const char two_nodes_xml[] =
    "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
    "<!DOCTYPE topology SYSTEM \"hwloc2.dtd\">\n"
    "<topology version=\"2.0\">\n"
    "<object type=\"Machine\" os_index=\"0\" cpuset=\"0x0000000f\" complete_cpuset=\"0x0000000f\""
    " allowed_cpuset=\"0x0000000f\" nodeset=\"0x00000003\" complete_nodeset=\"0x00000003\""
    " allowed_nodeset=\"0x00000003\">\n"
    "<object type=\"Package\" os_index=\"0\" cpuset=\"0x00000003\" complete_cpuset=\"0x00000003\""
    " nodeset=\"0x00000001\" complete_nodeset=\"0x00000001\">\n"
    "<object type=\"NUMANode\" os_index=\"0\" cpuset=\"0x00000003\" complete_cpuset=\"0x00000003\""
    " nodeset=\"0x00000001\" complete_nodeset=\"0x00000001\" local_memory=\"1073741824\">"
    "<page_type size=\"4096\" count=\"262144\"/></object>\n"
    "<object type=\"L3Cache\" cpuset=\"0x00000003\" complete_cpuset=\"0x00000003\""
    " cache_size=\"8388608\" depth=\"3\" cache_linesize=\"64\" cache_associativity=\"0\" cache_type=\"0\">"
    PU(0, "0x00000001") PU(1, "0x00000002") "</object></object>\n"
    "<object type=\"Package\" os_index=\"1\" cpuset=\"0x0000000c\" complete_cpuset=\"0x0000000c\""
    " nodeset=\"0x00000002\" complete_nodeset=\"0x00000002\">\n"
    "<object type=\"NUMANode\" os_index=\"1\" cpuset=\"0x0000000c\" complete_cpuset=\"0x0000000c\""
    " nodeset=\"0x00000002\" complete_nodeset=\"0x00000002\" local_memory=\"2147483648\">"
    "<page_type size=\"4096\" count=\"524288\"/></object>\n"
    "<object type=\"L3Cache\" cpuset=\"0x0000000c\" complete_cpuset=\"0x0000000c\""
    " cache_size=\"8388608\" depth=\"3\" cache_linesize=\"64\" cache_associativity=\"0\" cache_type=\"0\">"
    PU(2, "0x00000004") PU(3, "0x00000008") "</object></object>\n"
    "</object>\n"
    "<distances2 type=\"NUMANode\" nbobjs=\"2\" kind=\"5\" name=\"NUMALatency\" indexing=\"os\">\n"
    "<indexes length=\"4\">0 1 </indexes>\n"
    "<u64values length=\"12\">10 21 21 10 </u64values>\n"
    "</distances2>\n"
    "</topology>\n";

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return NULL;
    static char buf[1 << 20];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = 0;
    fclose(f);
    return buf;
}

static void check_mode(const char *path)
{
    struct stat st;
    CHECK(stat(path, &st) == 0);
    CHECK((st.st_mode & 0777) == 0600);
}

static void make_dir(char *out, size_t len, const char *name)
{
    const char *tmp = getenv("NMP_TEST_TMP");
    snprintf(out, len, "%s/%s", tmp ? tmp : "/tmp", name);
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s' && mkdir -p '%s'", out, out);
    if (system(cmd) != 0)
        abort();
}

int main(void)
{
    char dir[4096], path[4200], err[NMP_ERRLEN];

    /* canned two-node machine */
    make_dir(dir, sizeof dir, "topology2");
    snprintf(path, sizeof path, "%s/in.xml", dir);
    FILE *f = fopen(path, "w");
    CHECK(f && fputs(two_nodes_xml, f) >= 0 && fclose(f) == 0);
    setenv("HWLOC_XMLFILE", path, 1);
    int rc = nmp_topology_write(dir, err);
    if (rc < 0)
        fprintf(stderr, "nmp_topology_write: %s\n", err);
    CHECK(rc == 0);
    snprintf(path, sizeof path, "%s/topology.json", dir);
    check_mode(path);
    char *json = slurp(path);
    CHECK(json != NULL);
    if (json) {
        printf("%s", json);
        CHECK(strncmp(json, "{\"source\": \"hwloc 2.", 20) == 0);
        CHECK(strstr(json, "\"nodes\": [{\"id\": 0, \"cpus\": [0, 1], \"memory_bytes\": 1073741824}, "
                           "{\"id\": 1, \"cpus\": [2, 3], \"memory_bytes\": 2147483648}]"));
        CHECK(strstr(json, "\"distances\": [[10, 21], [21, 10]]"));
        CHECK(strstr(json, "\"pus\": 4, \"cores\": 4, \"packages\": 2"));
        CHECK(strstr(json, "\"caches\": [{\"level\": 3, \"size\": 8388608, \"type\": \"unified\"}]"));
        CHECK(strstr(json, "\"page_size\": 4096}"));
    }
    snprintf(path, sizeof path, "%s/topology.xml", dir);
    check_mode(path);
    char *xml = slurp(path);
    CHECK(xml && strstr(xml, "NUMALatency") && strstr(xml, "local_memory=\"2147483648\""));

    /* a missing XML file is an error with a message, not a crash */
    setenv("HWLOC_XMLFILE", "/nonexistent/topology.xml", 1);
    err[0] = 0;
    CHECK(nmp_topology_write(dir, err) < 0);
    CHECK(strstr(err, "/nonexistent/topology.xml") != NULL);

    /* this machine: at least one node, a square matrix with 10 on the diagonal */
    unsetenv("HWLOC_XMLFILE");
    make_dir(dir, sizeof dir, "topology_here");
    rc = nmp_topology_write(dir, err);
    if (rc < 0)
        fprintf(stderr, "nmp_topology_write: %s\n", err);
    CHECK(rc == 0);
    snprintf(path, sizeof path, "%s/topology.json", dir);
    json = slurp(path);
    CHECK(json && strstr(json, "\"distances\": [[10"));
    long npu = sysconf(_SC_NPROCESSORS_CONF);
    char want[64];
    snprintf(want, sizeof want, "\"pus\": %ld,", npu);
    CHECK(json && strstr(json, want));
    /* no temporary files left behind */
    snprintf(path, sizeof path, "ls -A '%s' | grep -q tmp", dir);
    CHECK(system(path) != 0);

    return check_result();
}
