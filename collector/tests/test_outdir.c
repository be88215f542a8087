/* The profile directory (outdir.c): a profile is kept as .old and a new directory made
 * with a placeholder manifest; nothing numaprof did not write is moved or removed. */
#include "nmp_collect.h"
#include "numaprof_format.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "nmp_check.h"

static char dir[2048];

static void put(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    if (!f)
        abort();
    fputs(text, f);
    fclose(f);
}

static int has(const char *path, const char *text)
{
    char buf[512] = "";
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = 0;
    fclose(f);
    return strstr(buf, text) != NULL;
}

static int exists(const char *path)
{
    struct stat st;
    return lstat(path, &st) == 0;
}

/* A profile as `record` leaves one: its manifest and a table file. */
static void profile(const char *path)
{
    char p[2300];
    mkdir(path, 0700);
    snprintf(p, sizeof p, "%s/manifest.json", path);
    put(p, "{\"format\": \"" NMP_PROFILE_FORMAT "\", \"complete\": true}\n");
    snprintf(p, sizeof p, "%s/samples.ip.col", path);
    put(p, "x");
}

int main(void)
{
    char out[2100], old[2200], p[2300], err[NMP_ERRLEN];
    int kept = -1;
    check_fresh_dir(dir, sizeof dir, "outdir");
    snprintf(out, sizeof out, "%s/p", dir);
    snprintf(old, sizeof old, "%s/p.old", dir);

    /* none yet: made, with the placeholder manifest */
    CHECK(nmp_outdir_prepare(out, &kept, err) == 0);
    CHECK_EQ(kept, 0);
    snprintf(p, sizeof p, "%s/manifest.json", out);
    CHECK(has(p, "\"complete\": false") && has(p, "\"format\": \"" NMP_PROFILE_FORMAT "\""));

    /* a profile there (and one at .old, holding only numaprof's files and archive):
     * rotated, the older one removed */
    rmdir(out), unlink(p);
    profile(out);
    profile(old);
    snprintf(p, sizeof p, "%s/archive", old);
    mkdir(p, 0700);
    snprintf(p, sizeof p, "%s/archive/0123456789abcdef0123", old);
    put(p, "copy");
    snprintf(p, sizeof p, "%s/.numa_maps.12.tmp.3", old);
    put(p, "left by a killed run");
    CHECK(nmp_outdir_prepare(out, &kept, err) == 0);
    CHECK_EQ(kept, 1);
    snprintf(p, sizeof p, "%s/samples.ip.col", old);
    CHECK(exists(p)); /* the previous profile, now .old */
    snprintf(p, sizeof p, "%s/archive", old);
    CHECK(!exists(p)); /* the one before it: gone */

    /* a user's file in .old: refused, nothing moved */
    snprintf(p, sizeof p, "%s/thesis.tex", old);
    put(p, "mine");
    CHECK(nmp_outdir_prepare(out, &kept, err) != 0);
    CHECK_MSG(strstr(err, "thesis.tex was not written by numaprof record") != NULL, "%s", err);
    CHECK(exists(p));
    snprintf(p, sizeof p, "%s/manifest.json", out);
    CHECK(has(p, "\"complete\": false")); /* the current one stays where it was */
    snprintf(p, sizeof p, "%s/thesis.tex", old);
    unlink(p);

    /* a file in the archive that is not a digest: refused */
    snprintf(p, sizeof p, "%s/archive", old);
    mkdir(p, 0700);
    snprintf(p, sizeof p, "%s/archive/notes", old);
    put(p, "mine");
    CHECK(nmp_outdir_prepare(out, &kept, err) != 0);
    CHECK_MSG(strstr(err, "p.old/archive/notes was not written") != NULL, "%s", err);
    unlink(p);

    /* .old a symbolic link, or not a profile: refused */
    snprintf(p, sizeof p, "%s/archive", old);
    rmdir(p);
    char moved[2300];
    snprintf(moved, sizeof moved, "%s/elsewhere", dir);
    CHECK(rename(old, moved) == 0);
    CHECK(symlink(moved, old) == 0);
    CHECK(nmp_outdir_prepare(out, &kept, err) != 0);
    CHECK_MSG(strstr(err, "p.old exists and is not a numaprof profile") != NULL, "%s", err);
    CHECK(unlink(old) == 0);

    /* the directory not a profile (a foreign manifest, or none): refused, untouched */
    snprintf(p, sizeof p, "%s/manifest.json", out);
    put(p, "{\"format\": \"results\"}");
    CHECK(nmp_outdir_prepare(out, &kept, err) != 0);
    CHECK_MSG(strstr(err, "p exists and is not a numaprof profile") != NULL, "%s", err);
    CHECK(has(p, "results") && !exists(old));
    put(p, "not json");
    CHECK(nmp_outdir_prepare(out, &kept, err) != 0);

    /* a parent that is not a directory */
    snprintf(p, sizeof p, "%s/file", dir);
    put(p, "x");
    snprintf(p, sizeof p, "%s/file/p", dir);
    CHECK(nmp_outdir_prepare(p, &kept, err) != 0);
    CHECK_MSG(strstr(err, strerror(ENOTDIR)) != NULL, "%s", err);
    return check_result();
}
