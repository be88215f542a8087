/* What the allocation shim's files share (not installed).  Every symbol here is hidden:
 * the library exports only the interposed functions (shim.c). */
#ifndef NMP_SHIM_INT_H
#define NMP_SHIM_INT_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "nmp_shim_format.h"

#pragma GCC visibility push(hidden)

/* shim.c */
extern int g_active; /* recording: set once the file is open, cleared after a partial write */
uint32_t shim_tid(void);
void shim_debug(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* recfile.c: the record file and its helpers */
extern struct nmp_shim_header *g_hdr; /* the mapped file's header; NULL: write(2) mode */
extern uint64_t g_dropped;            /* records that could not be written (atomic) */
void emit(struct nmp_shim_record *r);
uint64_t now_ns(void);
void *sys_mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off);
int open_record_file(int flags);
/* Opens (or, after an execve, reopens) this process's file in `dir` and writes its START
 * record (addr = the tracking threshold); 0, or -1: not recording. */
int open_record(const char *dir, uint64_t threshold);
void close_record_file(void); /* drops this process's view of it (after fork) */

/* pages.c: where a tracked allocation's pages are (object_pages records) */
extern int g_mem_nodes; /* memory nodes this process may use */
extern int g_pages_on;  /* ask at all: two memory nodes, or NUMAPROF_SHIM_PAGES=1 */
int count_mem_nodes(void);
uint64_t record_pages(void *p, size_t bytes, int source);
void pages_at_exit(void);

#pragma GCC visibility pop

#endif
