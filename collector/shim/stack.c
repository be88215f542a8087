/* The allocation shim's call stacks: unwinding with libgcc's unwinder (DWARF CFI), and a
 * per-thread cache of the stacks unwound.  Every symbol here is hidden (shim_int.h). */
#include "nmp_shim_format.h"
#include "shim_int.h"

#include <link.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <unwind.h>

#define NMP_TLS __thread __attribute__((tls_model("initial-exec")))

static uintptr_t g_text_lo, g_text_hi; /* the shim's own code: frames to skip */

/* ---- call stacks ----
 *
 * Unwinding (libgcc, DWARF CFI) costs microseconds, and programs allocate their large
 * blocks again and again from the same places.  So each thread keeps the stacks it
 * unwound together with the stack addresses where their return addresses live (CFA - 8
 * of the frame below, x86-64), keyed by the stack pointer at the allocation.  A later
 * allocation at the same stack pointer reuses a cached stack only if every cached return
 * address is still in its slot, innermost first: the innermost slot belongs to the
 * shim's own live frame, so each match proves the next slot is a live frame of the same
 * function too.  Stacks through signal frames are not cached.
 */
#define NMP_UNWIND_MAX (NMP_SHIM_MAX_FRAMES + 8)
#define NMP_CACHE_SETS 16
#define NMP_CACHE_WAYS 4

struct stack_entry {
    uintptr_t sp;   /* key: address of a local of record_alloc */
    uint32_t nframes;
    uint32_t pad;
    uint64_t frames[NMP_SHIM_MAX_FRAMES];
    uintptr_t slots[NMP_SHIM_MAX_FRAMES]; /* where frames[k] is stored on the stack */
};

struct stack_cache {
    struct stack_entry e[NMP_CACHE_SETS][NMP_CACHE_WAYS];
    uint8_t next[NMP_CACHE_SETS]; /* round-robin victim per set */
};

static NMP_TLS struct stack_cache *t_cache;
static NMP_TLS int t_cache_failed;

struct unwind {
    int n, signal_frame;
    uint64_t ip[NMP_UNWIND_MAX];
    uint64_t cfa[NMP_UNWIND_MAX];
};

static _Unwind_Reason_Code unwind_step(struct _Unwind_Context *ctx, void *arg)
{
    struct unwind *u = arg;
    if (u->n >= NMP_UNWIND_MAX)
        return _URC_END_OF_STACK;
    int before = 0;
    u->ip[u->n] = _Unwind_GetIPInfo(ctx, &before);
    u->cfa[u->n] = _Unwind_GetCFA(ctx);
    u->signal_frame |= before;
    u->n++;
    return _URC_NO_REASON;
}

static int in_shim(uintptr_t a) { return a >= g_text_lo && a < g_text_hi; }

/* Unwinds into `e` (frames from the return address into the allocator's caller on, the
 * shim's own frames dropped by address).  Returns 1 if the result may be cached. */
static __attribute__((noinline)) int unwind_into(struct stack_entry *e)
{
    struct unwind u;
    u.n = u.signal_frame = 0;
    _Unwind_Backtrace(unwind_step, &u);
    int i = 0;
    while (i < u.n && in_shim((uintptr_t)u.ip[i]))
        i++;
    unsigned k = 0;
    for (; i < u.n && k < NMP_SHIM_MAX_FRAMES && u.ip[i]; i++, k++) {
        e->frames[k] = u.ip[i];
        /* libgcc's context for a frame carries the CFA of the frame it was unwound
         * from, where the call pushed this frame's return address */
        e->slots[k] = (uintptr_t)u.cfa[i] - 8;
    }
    e->nframes = k;
    return !u.signal_frame && i > 0 && k > 0;
}

static int still_valid(const struct stack_entry *e, uintptr_t sp)
{
    if (e->sp != sp || !e->nframes)
        return 0;
    for (uint32_t k = 0; k < e->nframes; k++) {
        uintptr_t slot = e->slots[k];
        if (slot <= sp || *(const uint64_t *)slot != e->frames[k])
            return 0;
    }
    return 1;
}

/* Fills r->frames / r->nframes.  `sp` identifies the stack position of the caller. */
void shim_call_stack(struct nmp_shim_record *r, uintptr_t sp)
{
    struct stack_cache *c = t_cache;
    unsigned set = (unsigned)((sp >> 4) ^ (sp >> 10)) % NMP_CACHE_SETS;
    if (c) {
        for (int w = 0; w < NMP_CACHE_WAYS; w++) {
            const struct stack_entry *e = &c->e[set][w];
            if (still_valid(e, sp)) {
                r->nframes = (uint8_t)e->nframes;
                memcpy(r->frames, e->frames, e->nframes * sizeof e->frames[0]);
                return;
            }
        }
    }
    /* libgcc's unwinder needs a few KiB of stack: not on a small signal stack */
    stack_t ss;
    if (sigaltstack(NULL, &ss) == 0 && (ss.ss_flags & SS_ONSTACK))
        return;
    if (!c && !t_cache_failed) {
        /* mmap, not malloc: this may run in a signal handler */
        void *m = sys_mmap(NULL, sizeof *c, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                           -1, 0);
        if (m == MAP_FAILED)
            t_cache_failed = 1;
        else {
            t_cache = c = m;
            shim_watch_thread(); /* unmapped at thread exit */
        }
    }
    struct stack_entry tmp, *e = &tmp;
    if (c) {
        e = &c->e[set][c->next[set]];
        c->next[set] = (uint8_t)((c->next[set] + 1) % NMP_CACHE_WAYS);
    }
    e->sp = 0; /* invalid while being filled (a signal handler may look) */
    int cacheable = unwind_into(e);
    r->nframes = (uint8_t)e->nframes;
    memcpy(r->frames, e->frames, e->nframes * sizeof e->frames[0]);
    if (cacheable)
        e->sp = sp;
}

static int find_text(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size;
    uintptr_t me = (uintptr_t)data;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_LOAD || !(ph->p_flags & PF_X))
            continue;
        uintptr_t lo = info->dlpi_addr + ph->p_vaddr, hi = lo + ph->p_memsz;
        if (me >= lo && me < hi) {
            g_text_lo = lo;
            g_text_hi = hi;
            return 1;
        }
    }
    return 0;
}

void stack_init(void)
{
    dl_iterate_phdr(find_text, (void *)(uintptr_t)&unwind_into);
    /* the unwinder's first use initialises it: not in a signal handler later */
    struct stack_entry warm;
    unwind_into(&warm);
}

void stack_thread_exit(void)
{
    struct stack_cache *c = t_cache;
    t_cache = NULL;
    t_cache_failed = 1; /* a tracked allocation while the thread ends: no new cache */
    if (c)
        syscall(SYS_munmap, c, sizeof *c);
}
