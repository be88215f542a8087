/* numaprof-collect: run (or attach to) a command, sample it, write the profile tables
 * and collector.json.  main.c only parses arguments into struct nmp_config. */
#ifndef NMP_SAMPLER_H
#define NMP_SAMPLER_H

#include <signal.h>
#include <stdint.h>
#include <sys/types.h>

#include "nmp_collect.h"

#include "numaprof_defaults.h" /* NMP_DEFAULT_FREQ, NMP_DEFAULT_ALLOC_THRESHOLD */

enum nmp_backend_req { NMP_REQ_AUTO = -1, NMP_REQ_SOFT = 0, NMP_REQ_PEBS = 1, NMP_REQ_IBS = 2 };

struct nmp_config {
    const char *dir;          /* existing output directory */
    unsigned freq;            /* samples per second per thread */
    int backend;              /* enum nmp_backend_req */
    const char *shim;         /* LD_PRELOAD library for the command, or NULL */
    uint64_t alloc_threshold;
    unsigned fault_period;    /* record one page fault in this many (per thread and cpu) */
    pid_t attach_pid;         /* -p: attach instead of launching */
    const char *alloc_dir;    /* with -p: the shim's files of the program (--alloc-dir) */
    int release_fd;           /* with -p: a byte written to it once attached, or -1 */
    int children;             /* with -p: also the processes it started (--children) */
    double duration;          /* seconds, with -p (0: until it exits) */
    char **cmd;               /* NULL-terminated command to run */
    int control_fd;           /* socket to numaprof record, or -1 (see main.c) */
};

unsigned nmp_fault_period(const struct nmp_config *cfg);

/* Exit statuses of numaprof-collect besides the command's own. */
enum { NMP_EXIT_SELF = 125, NMP_EXIT_NOEXEC = 126, NMP_EXIT_NOTFOUND = 127 };

/* Runs the whole collection.  Returns the status numaprof-collect exits with (the
 * command's, 128+signal, or NMP_EXIT_*); when `err` is non-empty on return, it is the one
 * line to print on stderr (without the "numaprof: " prefix). */
int nmp_collect_run(const struct nmp_config *cfg, char *err);

/* launch.c: the command, started stopped so events can be opened before it runs. */
struct nmp_child {
    pid_t pid;
    int go_fd;   /* write end: one byte releases the child into execvp */
    int err_fd;  /* read end (CLOEXEC pipe): errno of a failed exec, EOF on success */
};
/* Forks the child with `envp` and signal mask `mask` (NULL: none blocked), blocked in a
 * read until nmp_child_release(). */
int nmp_child_spawn(char **cmd, char **envp, const sigset_t *mask, struct nmp_child *c);
/* Lets the child exec; returns 0 if exec succeeded, else the exec errno (the child then
 * exits with 127 and has been reaped). */
int nmp_child_release(struct nmp_child *c);
/* Builds the child's environment: the current one with LD_PRELOAD (shim prepended),
 * NUMAPROF_DIR and NUMAPROF_ALLOC_THRESHOLD set.  Free with nmp_env_free. */
char **nmp_child_env(const char *shim, const char *dir, uint64_t threshold);
void nmp_env_free(char **envp);

/* cpu lists ("0-3,8") */
int nmp_cpulist_parse(const char *s, int *cpus, int max);
void nmp_cpulist_format(const unsigned char *set, int n, char *out, size_t len);

#endif
