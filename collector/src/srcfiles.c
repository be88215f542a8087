/* The source files an executable was built from, as its DWARF line tables name them
 * (libdw), for `numaprof record` to hash (recommender/sources.py): `numaprof-collect
 * --source-files EXE...`.  Reading them here takes a few milliseconds where a Python
 * DWARF reader took 30-40 ms of imports alone, after the program's exit for a short
 * program (docs/record.md, "What recording costs"). */
#include "nmp_collect.h"

#include <dwarf.h>
#include <elfutils/libdw.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* `path` made lexically normal in place, as Python's os.path.normpath: no empty or "."
 * components, ".." taking the one before it (never above the root), no trailing slash. */
static void normalize(char *path)
{
    int absolute = path[0] == '/';
    char *out = path, *p = path;
    size_t len = 0;
    char *parts[1024];
    int n = 0, up = 0; /* leading ".." of a relative path */
    while (*p) {
        while (*p == '/')
            p++;
        if (!*p)
            break;
        char *start = p;
        while (*p && *p != '/')
            p++;
        size_t l = (size_t)(p - start);
        if (l == 1 && start[0] == '.')
            continue;
        if (l == 2 && start[0] == '.' && start[1] == '.') {
            if (n > up)
                n--;
            else if (!absolute)
                parts[n++] = start, up++;
            continue;
        }
        if (n < 1024)
            parts[n++] = start;
    }
    if (absolute)
        out[len++] = '/';
    for (int i = 0; i < n; i++) {
        if (i)
            out[len++] = '/';
        for (char *c = parts[i]; *c && *c != '/'; c++)
            out[len++] = *c; /* parts[i] lies at or after out + len */
    }
    if (!len)
        out[len++] = '.';
    out[len] = 0;
}

/* Writes `path`'s source files to `out`: their count, then each, NUL-terminated.  An
 * unreadable file, one that is not ELF or has no DWARF gives none; a damaged line table
 * ends its unit's list. */
static void list_one(const char *path, FILE *out)
{
    char **names = NULL;
    size_t n = 0, cap = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    Dwarf *dw = fd < 0 ? NULL : dwarf_begin(fd, DWARF_C_READ);
    Dwarf_CU *cu = NULL;
    Dwarf_Die cudie;
    uint8_t unit_type;
    while (dw && dwarf_get_units(dw, cu, &cu, NULL, &unit_type, &cudie, NULL) == 0) {
        if (unit_type != DW_UT_compile && unit_type != DW_UT_partial)
            continue;
        Dwarf_Files *files;
        size_t nfiles;
        if (dwarf_getsrcfiles(&cudie, &files, &nfiles) != 0)
            continue;
        const char *const *dirs;
        size_t ndirs;
        const char *comp = dwarf_getsrcdirs(files, &dirs, &ndirs) == 0 && ndirs && dirs[0]
                               ? dirs[0]
                               : "";
        for (size_t i = 0; i < nfiles; i++) {
            const char *name = dwarf_filesrc(files, i, NULL, NULL);
            if (!name || !strcmp(name, "???")) /* DWARF 2-4's file 0: none */
                continue;
            size_t len = strlen(comp) + strlen(name) + 2;
            char *full = malloc(len);
            if (!full || NMP_GROW(names, cap, n + 1, 64) != 0) {
                free(full);
                break;
            }
            if (name[0] == '/' || !*comp)
                snprintf(full, len, "%s", name);
            else
                snprintf(full, len, "%s/%s", comp, name);
            normalize(full);
            size_t k = 0;
            while (k < n && strcmp(names[k], full))
                k++;
            if (k < n)
                free(full);
            else
                names[n++] = full;
        }
    }
    if (dw)
        dwarf_end(dw);
    if (fd >= 0)
        close(fd);
    fprintf(out, "%zu", n);
    fputc(0, out);
    for (size_t i = 0; i < n; i++) {
        fputs(names[i], out);
        fputc(0, out);
        free(names[i]);
    }
    free(names);
}

int nmp_source_files(char **paths, int n, FILE *out)
{
    for (int i = 0; i < n; i++)
        list_one(paths[i], out);
    return fflush(out) == 0 ? 0 : -1;
}
