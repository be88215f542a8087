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
extern int g_pool_on;                 /* the file has a pool of deferred records */
extern struct nmp_shim_record *g_pool; /* the pool once mapped; NULL before (pool_map) */
struct nmp_shim_record *pool_map(void); /* maps the pool if needed; NULL: not available */
void emit(struct nmp_shim_record *r);
uint64_t now_ns(void);
void *sys_mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off);
int open_record_file(int flags);
/* Opens (or, after an execve, reopens) this process's file in `dir` and writes its START
 * record (addr = the tracking threshold); 0, or -1: not recording. */
int open_record(const char *dir, uint64_t threshold, uint64_t small_period);
void close_record_file(void); /* drops this process's view of it (after fork) */

/* pages.c: where a tracked allocation's pages are (object_pages records) */
void shim_watch_thread(void); /* run thread_exit (shim.c) when this thread ends */

/* tls.c: thread pointers (tls.<pid>) */
void tls_init(const char *dir);   /* records the calling (main) thread's */
void tls_record_thread(void);     /* records the calling thread's */
void tls_record_modules(void);    /* records the loaded modules' static TLS offsets */

/* stack.c */
void stack_init(void);
void stack_thread_exit(void);
void shim_call_stack(struct nmp_shim_record *r, uintptr_t sp); /* fills frames, nframes */

extern int g_mem_nodes; /* memory nodes this process may use */
extern int g_pages_on;  /* ask at all: two memory nodes, or NUMAPROF_SHIM_PAGES=1 */
int count_mem_nodes(void);
uint64_t record_pages(void *p, size_t bytes, int source);
void pages_at_exit(void);
void copy_numa_maps(const char *dir);

#pragma GCC visibility pop

#endif
