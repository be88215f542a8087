/* The profile directory of a recording (--rotate): an existing profile is kept as
 * <dir>.old, as perf record keeps perf.data.old, and <dir> is made anew.
 *
 * Only what numaprof wrote is ever moved or removed: <dir> is rotated only when it is a
 * numaprof profile (a directory, not a symbolic link, whose manifest.json names the
 * profile format), and an existing <dir>.old is removed only when it is one too and holds
 * nothing but what numaprof writes.  Otherwise nothing is touched and the one line of the
 * refusal says what to do.  The new directory gets a placeholder manifest at once, so
 * that a recording killed before `numaprof record` writes the whole one is still a
 * profile (marked incomplete) that the next recording rotates.  docs/record.md,
 * "Where the profile goes". */
#include "nmp_collect.h"
#include "numaprof_format.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MANIFEST_LIMIT (64u << 20) /* bytes: a manifest larger than this is not one of ours */

/* What `numaprof record` (and the perf.data importer) put in a profile directory,
 * including the temporary files of a run killed while it wrote them (POSIX ERE). */
static const char PROFILE_ENTRY[] =
    "^((manifest|collector|archive|sources|topology)\\.json|topology\\.xml|archive"
    "|[a-z_]+\\.[a-z_0-9]+\\.(col|heap)|numa_maps\\.[0-9]+|shim\\.[0-9]+\\.(bin|pool)|tls\\.[0-9]+"
    "|(manifest|archive|sources)\\.json\\.tmp"
    "|\\.(collector\\.json|manifest\\.json|topology\\.(json|xml))\\.tmp(\\.[0-9]+)?"
    "|\\.numa_maps\\.[0-9]+\\.(shim|tmp\\.[0-9]+))$";
/* the archive's content-addressed copies */
static const char ARCHIVE_ENTRY[] = "^[0-9a-f]{16,128}$";

static const char PLACEHOLDER[] =
    "{\"format\": \"" NMP_PROFILE_FORMAT "\", \"version\": %d, \"complete\": false,"
    " \"incomplete_reason\": \"recording in progress, or numaprof record was killed\"}\n";

/* Whether `path` is a directory (not a symbolic link) holding the manifest of a numaprof
 * profile.  Opens nothing but a regular file, and reads a bounded amount. */
static int is_profile(const char *path)
{
    struct stat st;
    if (lstat(path, &st) != 0 || !S_ISDIR(st.st_mode))
        return 0;
    int dfd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (dfd < 0)
        return 0;
    int fd = openat(dfd, "manifest.json", O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    close(dfd);
    if (fd < 0)
        return 0;
    int ok = 0;
    char *buf = NULL;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || (uint64_t)st.st_size > MANIFEST_LIMIT)
        goto out;
    size_t want = (size_t)st.st_size, got = 0;
    if (!(buf = malloc(want + 1)))
        goto out;
    while (got < want) {
        ssize_t n = read(fd, buf + got, want - got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        got += (size_t)n;
    }
    json_error_t jerr;
    json_t *doc = json_loadb(buf, got, 0, &jerr);
    if (doc) {
        json_t *format = json_is_object(doc) ? json_object_get(doc, "format") : NULL;
        ok = json_is_string(format) && !strcmp(json_string_value(format), NMP_PROFILE_FORMAT);
        json_decref(doc);
    }
out:
    free(buf);
    close(fd);
    return ok;
}

static int by_name(const struct dirent **a, const struct dirent **b)
{
    return strcmp((*a)->d_name, (*b)->d_name);
}

static int not_dots(const struct dirent *d)
{
    return strcmp(d->d_name, ".") && strcmp(d->d_name, "..");
}

static int is_kind(int dfd, const char *name, mode_t kind)
{
    struct stat st;
    return fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && (st.st_mode & S_IFMT) == kind;
}

/* The first entry (by name) of profile directory `path` that numaprof does not write,
 * into `out`: a user's file kept in an old profile, or the backup of an --apply.
 * 1 if there is one (or the directory cannot be read through), else 0. */
static int foreign_entry(const char *path, char *out, size_t outlen)
{
    regex_t entry_re, archive_re;
    if (regcomp(&entry_re, PROFILE_ENTRY, REG_EXTENDED | REG_NOSUB) != 0)
        return snprintf(out, outlen, "?"), 1;
    if (regcomp(&archive_re, ARCHIVE_ENTRY, REG_EXTENDED | REG_NOSUB) != 0) {
        regfree(&entry_re);
        return snprintf(out, outlen, "?"), 1;
    }
    int found = 0;
    struct dirent **names = NULL;
    int dfd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    int n = dfd < 0 ? -1 : scandirat(dfd, ".", &names, not_dots, by_name);
    if (n < 0) {
        snprintf(out, outlen, ".");
        found = 1;
    }
    for (int i = 0; i < n && !found; i++) {
        const char *name = names[i]->d_name;
        if (regexec(&entry_re, name, 0, NULL, 0) != 0) {
            snprintf(out, outlen, "%s", name);
            found = 1;
        } else if (!strcmp(name, "archive")) {
            int afd = is_kind(dfd, name, S_IFDIR)
                          ? openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
                          : -1;
            DIR *d = afd < 0 ? NULL : fdopendir(afd);
            if (!d) {
                if (afd >= 0)
                    close(afd);
                snprintf(out, outlen, "%s", name);
                found = 1;
                break;
            }
            struct dirent *sub;
            while (!found && (sub = readdir(d))) {
                if (!not_dots(sub))
                    continue;
                if (regexec(&archive_re, sub->d_name, 0, NULL, 0) != 0 ||
                    !is_kind(afd, sub->d_name, S_IFREG)) {
                    snprintf(out, outlen, "archive/%s", sub->d_name);
                    found = 1;
                }
            }
            closedir(d);
        } else if (!is_kind(dfd, name, S_IFREG)) {
            snprintf(out, outlen, "%s", name);
            found = 1;
        }
    }
    for (int i = 0; i < n; i++)
        free(names[i]);
    free(names);
    if (dfd >= 0)
        close(dfd);
    regfree(&entry_re);
    regfree(&archive_re);
    return found;
}

/* Removes an old profile that foreign_entry() found to hold only numaprof's files: its
 * regular files, the archive's, the archive, itself.  0, or -1 with errno. */
static int remove_profile(const char *path)
{
    int dfd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (dfd < 0)
        return -1;
    int rc = 0, saved = 0;
    int afd = openat(dfd, "archive", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (afd >= 0) {
        DIR *d = fdopendir(afd);
        struct dirent *e;
        while (d && (e = readdir(d)))
            if (not_dots(e) && unlinkat(afd, e->d_name, 0) != 0 && !saved)
                saved = errno;
        if (d)
            closedir(d);
        else
            close(afd);
        if (!saved && unlinkat(dfd, "archive", AT_REMOVEDIR) != 0)
            saved = errno;
    }
    DIR *d = saved ? NULL : fdopendir(dup(dfd));
    struct dirent *e;
    while (d && (e = readdir(d)))
        if (not_dots(e) && strcmp(e->d_name, "archive") && unlinkat(dfd, e->d_name, 0) != 0 &&
            !saved)
            saved = errno;
    if (d)
        closedir(d);
    close(dfd);
    if (!saved && rmdir(path) != 0)
        saved = errno;
    if (saved) {
        errno = saved;
        rc = -1;
    }
    return rc;
}

int nmp_outdir_prepare(const char *out, int *kept, char *err)
{
    char old[4096];
    struct stat st;
    *kept = 0;
    if ((size_t)snprintf(old, sizeof old, "%s.old", out) >= sizeof old) {
        nmp_set_err(err, "cannot use %s: %s", out, strerror(ENAMETOOLONG));
        return -1;
    }
    int exists = lstat(out, &st) == 0;
    if (!exists && errno != ENOENT) { /* a parent one cannot search, or not a directory */
        nmp_set_err(err, "cannot use %s: %s", out, strerror(errno));
        return -1;
    }
    if (exists) {
        if (!is_profile(out)) {
            nmp_set_err(err, "%s exists and is not a numaprof profile; remove it or choose "
                             "another -o", out);
            return -1;
        }
        if (lstat(old, &st) == 0) {
            char foreign[1024];
            if (!is_profile(old)) {
                nmp_set_err(err, "%s exists and is not a numaprof profile (numaprof would keep "
                                 "the previous profile there); move it away or choose another -o",
                            old);
                return -1;
            }
            if (foreign_entry(old, foreign, sizeof foreign)) {
                nmp_set_err(err, "%s/%s was not written by numaprof record, so %s is not "
                                 "removed to keep the previous profile there; move it away or "
                                 "choose another -o", old, foreign, old);
                return -1;
            }
            if (remove_profile(old) != 0) {
                nmp_set_err(err, "cannot keep the previous profile as %s: %s", old,
                            strerror(errno));
                return -1;
            }
        }
        if (rename(out, old) != 0) {
            nmp_set_err(err, "cannot keep the previous profile as %s: %s", old, strerror(errno));
            return -1;
        }
        *kept = 1;
    }
    if (mkdir(out, 0700) != 0) {
        int saved = errno;
        const char *where = "";
        if (*kept && rename(old, out) != 0)
            where = old;
        nmp_set_err(err, "cannot create %s: %s%s%s%s", out, strerror(saved),
                    *where ? " (the previous profile is in " : "", where, *where ? ")" : "");
        return -1;
    }
    char doc[sizeof PLACEHOLDER + 16];
    int len = snprintf(doc, sizeof doc, PLACEHOLDER, NMP_PROFILE_VERSION);
    if (nmp_write_atomic(out, "manifest.json", doc, (size_t)len, NULL) != 0) {
        /* as numaprof record leaves a profile it cannot finish: none, the previous back */
        int saved = errno;
        rmdir(out);
        char back[4200] = "";
        if (*kept && rename(old, out) != 0)
            snprintf(back, sizeof back, "; the previous profile stays in %s (%s)", old,
                     strerror(errno));
        else if (*kept)
            snprintf(back, sizeof back, "; the previous profile is back in %s", out);
        nmp_set_err(err, "cannot write %s/manifest.json: %s%s", out, strerror(saved), back);
        return -1;
    }
    return 0;
}
