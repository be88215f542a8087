/* Page locations (docs/record.md, "Page location"): every page a sample touched is
 * queued once, and the ticks of the run loop ask move_pages(2) which node it is on (at
 * most once a second per page, a bounded number per tick), one page_nodes row each. */
#include "nmp_collector.h"

#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#define PAGE_REQUERY_NS 1000000000ULL
#define MAX_PAGE_QUERIES_PER_TICK 8192
#define PAGE_MASK_4K (~4095ULL)

static size_t page_slot(uint64_t page, uint32_t pid, size_t cap)
{
    return nmp_mix64(page ^ ((uint64_t)pid << 48)) & (cap - 1);
}

static int pages_grow(struct nmp_pages *p)
{
    size_t ncap = p->cap ? p->cap * 2 : 1 << 14;
    struct nmp_page_ent *ne = calloc(ncap, sizeof *ne);
    if (!ne)
        return -1;
    /* rehashing moves entries: pending indexes are rebuilt */
    p->npend = 0;
    for (size_t i = 0; i < p->cap; i++) {
        struct nmp_page_ent *e = &p->ents[i];
        if (!e->used)
            continue;
        size_t k = page_slot(e->page, e->pid, ncap);
        while (ne[k].used)
            k = (k + 1) & (ncap - 1);
        ne[k] = *e;
        if (e->pending && p->npend < p->pendcap)
            p->pend[p->npend++] = k;
        else
            ne[k].pending = 0;
    }
    free(p->ents);
    p->ents = ne;
    p->cap = ncap;
    return 0;
}

void nmp_page_note(struct nmp_collector *c, uint32_t pid, uint64_t addr, uint64_t now)
{
    struct nmp_pages *p = &c->pages;
    uint64_t page = addr & PAGE_MASK_4K;
    if (p->count * 2 >= p->cap && pages_grow(p) != 0)
        return;
    size_t mask = p->cap - 1;
    size_t k = page_slot(page, pid, p->cap);
    while (p->ents[k].used && !(p->ents[k].page == page && p->ents[k].pid == pid))
        k = (k + 1) & mask;
    struct nmp_page_ent *e = &p->ents[k];
    if (!e->used) {
        *e = (struct nmp_page_ent){.page = page, .pid = pid, .used = 1};
        p->count++;
    }
    if (e->pending || (e->last_ns && now - e->last_ns < PAGE_REQUERY_NS))
        return;
    if (NMP_GROW(p->pend, p->pendcap, p->npend + 1, 4096) != 0)
        return;
    e->pending = 1;
    p->pend[p->npend++] = k;
}

static int cmp_pend(const void *a, const void *b, void *arg)
{
    const struct nmp_page_ent *p = arg;
    const struct nmp_page_ent *x = &p[*(const uint64_t *)a], *y = &p[*(const uint64_t *)b];
    if (x->pid != y->pid)
        return x->pid < y->pid ? -1 : 1;
    return x->page < y->page ? -1 : x->page > y->page;
}

/* move_pages(pid, n, pages, NULL, status, 0): the node of each page, or -errno. */
void nmp_pages_query(struct nmp_collector *c)
{
    struct nmp_pages *p = &c->pages;
    if (!p->npend)
        return;
    size_t n = p->npend < MAX_PAGE_QUERIES_PER_TICK ? p->npend : MAX_PAGE_QUERIES_PER_TICK;
    qsort_r(p->pend, n, sizeof *p->pend, cmp_pend, p->ents);
    enum { CHUNK = 1024 };
    void *addrs[CHUNK];
    int status[CHUNK];
    uint64_t now = nmp_now_ns();
    for (size_t i = 0; i < n;) {
        uint32_t pid = p->ents[p->pend[i]].pid;
        size_t j = i;
        while (j < n && j - i < CHUNK && p->ents[p->pend[j]].pid == pid) {
            addrs[j - i] = (void *)(uintptr_t)p->ents[p->pend[j]].page;
            j++;
        }
        long r = syscall(SYS_move_pages, (int)pid, (unsigned long)(j - i), addrs, NULL, status, 0);
        for (size_t k = i; k < j; k++) {
            struct nmp_page_ent *e = &p->ents[p->pend[k]];
            e->pending = 0;
            e->last_ns = now;
            if (r < 0)
                continue; /* process gone (ESRCH) or not allowed */
            uint64_t v[NMP_page_nodes_NCOLS] = {
                [NMP_page_nodes_time] = now, [NMP_page_nodes_pid] = pid,
                [NMP_page_nodes_page] = e->page,
                [NMP_page_nodes_node] = (uint64_t)(int64_t)status[k - i]};
            if (nmp_table_append(c->t.pages, v) != 0)
                nmp_table_failed(c, "page_nodes");
            c->n.page_queries++;
        }
        i = j;
    }
    memmove(p->pend, p->pend + n, (p->npend - n) * sizeof *p->pend);
    p->npend -= n;
}

void nmp_pages_free(struct nmp_pages *p)
{
    free(p->ents);
    free(p->pend);
}
