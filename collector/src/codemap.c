/* The decoder's view of the target processes: mappings (from PERF_RECORD_MMAP2 or
 * /proc/<pid>/maps), code bytes (from the mapped ELF file, so this works after the
 * process exited; process_vm_readv for anonymous code), function bounds from the ELF
 * symbol tables, and the caches (decoded functions; attribution per (pid, ip)).
 */
#include "nmp_decode.h"
#include "nmp_decode_int.h"

#include <elf.h>
#include <elfutils/libdw.h>
#include <errno.h>
#include <fcntl.h>
#include <libelf.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#define KERNEL_START 0x800000000000ULL
#define MAX_FUNC_BYTES (1u << 20)
#define MAX_SEGS 16

struct fsym {
    uint64_t addr, size;
};

struct nmp_file {
    char *path;
    int fd;
    int nseg;
    struct {
        uint64_t off, filesz, vaddr;
    } seg[MAX_SEGS];
    struct fsym *syms;
    size_t nsyms;
    /* the file's call frame information (.eh_frame, read by libdw), for the bounds of
     * functions no symbol covers (a stripped library's internal ones), opened at the
     * first such lookup */
    Elf *elf;
    Dwarf_CFI *cfi;
    int cfi_tried;
    struct nmp_file *next;
};

struct nmp_map {
    uint64_t start, end, pgoff;
    struct nmp_file *file; /* NULL: not a regular file we can read */
};

struct nmp_proc {
    uint32_t pid, epoch;
    struct nmp_map *maps;
    size_t n, cap;
    uint64_t maps_loaded_ns;
    struct nmp_proc *next;
};

struct fentry {
    struct nmp_file *f;
    uint64_t func_ip;
    struct nmp_insn *v;
    size_t n;
};

struct ientry {
    uint64_t ip;
    uint32_t pid, epoch; /* epoch 0 = empty slot */
    struct nmp_memop m;
};

struct nmp_decoder {
    struct nmp_cs *cs;
    struct nmp_file *files;
    struct nmp_proc *procs;
    uint32_t next_epoch;
    struct ientry *ic;
    size_t icap, icount;
    struct fentry *fc;
    size_t fcap, fcount;
    struct nmp_decode_stats st;
};

struct nmp_decoder *nmp_decoder_new(void)
{
    struct nmp_decoder *d = calloc(1, sizeof *d);
    if (!d)
        return NULL;
    if (nmp_cs_open(&d->cs) != 0) {
        free(d);
        return NULL;
    }
    d->next_epoch = 1;
    return d;
}

static void free_file(struct nmp_file *f)
{
    if (f->cfi)
        dwarf_cfi_end(f->cfi);
    if (f->elf)
        elf_end(f->elf);
    if (f->fd >= 0)
        close(f->fd);
    free(f->path);
    free(f->syms);
    free(f);
}

void nmp_decoder_free(struct nmp_decoder *d)
{
    if (!d)
        return;
    nmp_cs_close(d->cs);
    for (struct nmp_file *f = d->files, *nx; f; f = nx) {
        nx = f->next;
        free_file(f);
    }
    for (struct nmp_proc *p = d->procs, *nx; p; p = nx) {
        nx = p->next;
        free(p->maps);
        free(p);
    }
    for (size_t i = 0; i < d->fcap; i++)
        free(d->fc[i].v);
    free(d->fc);
    free(d->ic);
    free(d);
}

void nmp_decode_code(struct nmp_decoder *d, const uint8_t *code, size_t len,
                     uint64_t code_addr, uint64_t ip, int aligned, struct nmp_memop *out)
{
    nmp_decode_code_cs(d->cs, code, len, code_addr, ip, aligned, out, NULL);
}

void nmp_decoder_stats(const struct nmp_decoder *d, struct nmp_decode_stats *st)
{
    *st = d->st;
}

/* ---- ELF files ---------------------------------------------------------------- */

static int cmp_sym(const void *a, const void *b)
{
    const struct fsym *x = a, *y = b;
    if (x->addr != y->addr)
        return x->addr < y->addr ? -1 : 1;
    return x->size < y->size ? -1 : x->size > y->size;
}

static int pread_full(int fd, void *buf, size_t len, uint64_t off)
{
    size_t got = 0;
    while (got < len) {
        ssize_t r = pread(fd, (char *)buf + got, len - got, (off_t)(off + got));
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return -1;
        got += (size_t)r;
    }
    return 0;
}

/* Loadable segments and function symbols (.symtab and .dynsym) of a 64-bit ELF file. */
static void load_elf(struct nmp_file *f)
{
    Elf64_Ehdr eh;
    if (pread_full(f->fd, &eh, sizeof eh, 0) != 0 || memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 ||
        eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_phentsize != sizeof(Elf64_Phdr))
        return;
    for (int i = 0; i < eh.e_phnum && f->nseg < MAX_SEGS; i++) {
        Elf64_Phdr ph;
        if (pread_full(f->fd, &ph, sizeof ph, eh.e_phoff + (uint64_t)i * sizeof ph) != 0)
            return;
        if (ph.p_type != PT_LOAD)
            continue;
        f->seg[f->nseg].off = ph.p_offset;
        f->seg[f->nseg].filesz = ph.p_filesz;
        f->seg[f->nseg].vaddr = ph.p_vaddr;
        f->nseg++;
    }
    if (eh.e_shentsize != sizeof(Elf64_Shdr) || eh.e_shnum == 0 || eh.e_shnum > 4096)
        return;
    Elf64_Shdr *sh = malloc((size_t)eh.e_shnum * sizeof *sh);
    if (!sh)
        return;
    if (pread_full(f->fd, sh, (size_t)eh.e_shnum * sizeof *sh, eh.e_shoff) != 0) {
        free(sh);
        return;
    }
    size_t cap = 0;
    for (int i = 0; i < eh.e_shnum; i++) {
        if (sh[i].sh_type != SHT_SYMTAB && sh[i].sh_type != SHT_DYNSYM)
            continue;
        size_t nsym = sh[i].sh_size / sizeof(Elf64_Sym);
        if (nsym == 0 || nsym > (1u << 22))
            continue;
        Elf64_Sym *syms = malloc(nsym * sizeof *syms);
        if (!syms)
            continue;
        if (pread_full(f->fd, syms, nsym * sizeof *syms, sh[i].sh_offset) == 0) {
            for (size_t k = 0; k < nsym; k++) {
                int type = ELF64_ST_TYPE(syms[k].st_info);
                if ((type != STT_FUNC && type != STT_GNU_IFUNC) || syms[k].st_size == 0 ||
                    syms[k].st_shndx == SHN_UNDEF)
                    continue;
                if (NMP_GROW(f->syms, cap, f->nsyms + 1, 256) != 0)
                    break;
                f->syms[f->nsyms].addr = syms[k].st_value;
                f->syms[f->nsyms].size = syms[k].st_size;
                f->nsyms++;
            }
        }
        free(syms);
    }
    free(sh);
    if (f->nsyms)
        qsort(f->syms, f->nsyms, sizeof *f->syms, cmp_sym);
}

static struct nmp_file *get_file(struct nmp_decoder *d, const char *path)
{
    for (struct nmp_file *f = d->files; f; f = f->next)
        if (strcmp(f->path, path) == 0)
            return f;
    struct nmp_file *f = calloc(1, sizeof *f);
    if (!f)
        return NULL;
    f->path = strdup(path);
    if (!f->path) {
        free(f);
        return NULL;
    }
    f->fd = open(path, O_RDONLY | O_CLOEXEC);
    if (f->fd >= 0)
        load_elf(f);
    else
        nmp_debug("cannot open %s: %s", path, strerror(errno));
    f->next = d->files;
    d->files = f;
    return f;
}

/* The bounds, in link-time addresses, of the frame description entry (.eh_frame) that
 * covers link-time address va: a function's, or one part of it (a `.cold` part has one
 * of its own), as an unwinder finds it.  0, or -1 when the file has no CFI there. */
static int fde_bounds(struct nmp_file *f, uint64_t va, uint64_t *lo, uint64_t *hi)
{
    if (!f->cfi_tried) {
        f->cfi_tried = 1;
        elf_version(EV_CURRENT);
        f->elf = elf_begin(f->fd, ELF_C_READ_MMAP, NULL);
        f->cfi = f->elf ? dwarf_getcfi_elf(f->elf) : NULL;
    }
    Dwarf_Frame *frame = NULL;
    if (!f->cfi || dwarf_cfi_addrframe(f->cfi, va, &frame) != 0 || !frame)
        return -1;
    Dwarf_Addr start = 0, end = 0;
    int rc = dwarf_frame_info(frame, &start, &end, NULL) >= 0 && start <= va && va < end ? 0 : -1;
    free(frame);
    *lo = start;
    *hi = end;
    return rc;
}

/* Function [start, start+size) in file offsets containing file offset `off`: from the
 * symbols, else from the call frame information. */
static int find_function(struct nmp_file *f, uint64_t off, uint64_t *fstart, uint64_t *fsize)
{
    for (int s = 0; s < f->nseg; s++) {
        if (off < f->seg[s].off || off >= f->seg[s].off + f->seg[s].filesz)
            continue;
        uint64_t va = off - f->seg[s].off + f->seg[s].vaddr;
        size_t lo = 0, hi = f->nsyms;
        while (lo < hi) {
            size_t mid = (lo + hi) / 2;
            if (f->syms[mid].addr <= va)
                lo = mid + 1;
            else
                hi = mid;
        }
        for (size_t k = lo, tries = 0; k > 0 && tries < 16; k--, tries++) {
            const struct fsym *y = &f->syms[k - 1];
            if (va >= y->addr && va < y->addr + y->size && y->addr >= f->seg[s].vaddr &&
                y->size <= MAX_FUNC_BYTES) {
                *fstart = y->addr - f->seg[s].vaddr + f->seg[s].off;
                *fsize = y->size;
                return 0;
            }
        }
        uint64_t lo_va, hi_va;
        if (fde_bounds(f, va, &lo_va, &hi_va) == 0 && lo_va >= f->seg[s].vaddr &&
            hi_va - lo_va <= MAX_FUNC_BYTES &&
            hi_va - f->seg[s].vaddr <= f->seg[s].filesz) {
            *fstart = lo_va - f->seg[s].vaddr + f->seg[s].off;
            *fsize = hi_va - lo_va;
            return 0;
        }
        return -1;
    }
    return -1;
}

/* ---- processes and mappings --------------------------------------------------------- */

static struct nmp_proc *get_proc(struct nmp_decoder *d, uint32_t pid, int create)
{
    struct nmp_proc **pp = &d->procs;
    for (struct nmp_proc *p = d->procs; p; pp = &p->next, p = p->next) {
        if (p->pid == pid) {
            *pp = p->next; /* move to front: samples come in runs of one process */
            p->next = d->procs;
            d->procs = p;
            return p;
        }
    }
    if (!create)
        return NULL;
    struct nmp_proc *p = calloc(1, sizeof *p);
    if (!p)
        return NULL;
    p->pid = pid;
    p->epoch = d->next_epoch++;
    p->next = d->procs;
    d->procs = p;
    return p;
}

/* maps is sorted by start and its mappings do not overlap (so the ends are sorted too):
 * a new mapping replaces the run of those it overlaps, keeping the parts of the first
 * and last that stick out, with one memmove (no sort: a program that maps and unmaps
 * blocks all the time sends an MMAP2 record for each). */
static int add_map(struct nmp_proc *p, uint64_t start, uint64_t end, uint64_t pgoff,
                   struct nmp_file *file)
{
    if (end <= start)
        return 0;
    if (NMP_GROW(p->maps, p->cap, p->n + 2, 64) != 0) /* up to two more: a split */
        return -1;
    size_t lo = 0, hi = p->n;
    while (lo < hi) { /* the first mapping that ends after start */
        size_t mid = (lo + hi) / 2;
        if (p->maps[mid].end <= start)
            lo = mid + 1;
        else
            hi = mid;
    }
    size_t first = lo, last = lo; /* [first, last): the overlapped ones */
    while (last < p->n && p->maps[last].start < end)
        last++;
    struct nmp_map repl[3];
    size_t k = 0;
    if (first < last && p->maps[first].start < start) {
        repl[k] = p->maps[first];
        repl[k++].end = start;
    }
    repl[k++] = (struct nmp_map){start, end, pgoff, file};
    if (first < last && p->maps[last - 1].end > end) {
        struct nmp_map right = p->maps[last - 1];
        right.pgoff += end - right.start;
        right.start = end;
        repl[k++] = right;
    }
    memmove(&p->maps[first + k], &p->maps[last], (p->n - last) * sizeof *p->maps);
    memcpy(&p->maps[first], repl, k * sizeof *repl);
    p->n = p->n - (last - first) + k;
    return 0;
}

static const struct nmp_map *find_map(const struct nmp_proc *p, uint64_t ip)
{
    size_t lo = 0, hi = p->n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (p->maps[mid].start <= ip)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo > 0 && ip < p->maps[lo - 1].end)
        return &p->maps[lo - 1];
    return NULL;
}

static int is_file_path(const char *path)
{
    return path && path[0] == '/' && strncmp(path, "//anon", 6) != 0;
}

int nmp_decoder_mmap(struct nmp_decoder *d, uint32_t pid, uint64_t start, uint64_t len,
                     uint64_t pgoff, const char *path)
{
    struct nmp_proc *p = get_proc(d, pid, 1);
    if (!p)
        return -1;
    struct nmp_file *f = is_file_path(path) ? get_file(d, path) : NULL;
    return add_map(p, start, start + len, pgoff, f);
}

void nmp_decoder_fork(struct nmp_decoder *d, uint32_t ppid, uint32_t pid)
{
    if (ppid == pid)
        return;
    struct nmp_proc *parent = get_proc(d, ppid, 0);
    struct nmp_proc *p = get_proc(d, pid, 1);
    if (!p)
        return;
    p->epoch = d->next_epoch++;
    p->n = 0;
    if (parent && parent->n) {
        struct nmp_map *nm = realloc(p->maps, parent->cap * sizeof *nm);
        if (!nm)
            return;
        memcpy(nm, parent->maps, parent->n * sizeof *nm);
        p->maps = nm;
        p->cap = parent->cap;
        p->n = parent->n;
    }
}

void nmp_decoder_exec(struct nmp_decoder *d, uint32_t pid)
{
    struct nmp_proc *p = get_proc(d, pid, 1);
    if (!p)
        return;
    p->epoch = d->next_epoch++; /* invalidates this pid's cached decodes */
    p->n = 0;
}

struct proc_maps_ctx {
    struct nmp_decoder *d;
    struct nmp_proc *p;
};

static int add_proc_map(void *arg, const struct nmp_maps_line *m)
{
    struct proc_maps_ctx *x = arg;
    struct nmp_file *f = is_file_path(m->path) ? get_file(x->d, m->path) : NULL;
    return add_map(x->p, m->start, m->end, m->pgoff, f);
}

int nmp_decoder_load_proc_maps(struct nmp_decoder *d, uint32_t pid)
{
    struct nmp_proc *p = get_proc(d, pid, 1);
    if (!p)
        return -1;
    p->maps_loaded_ns = nmp_now_ns();
    struct proc_maps_ctx x = {d, p};
    return nmp_proc_maps_each(pid, add_proc_map, &x);
}

/* ---- caches ------------------------------------------------------------------------ */

static struct ientry *ic_find(struct nmp_decoder *d, uint32_t pid, uint32_t epoch, uint64_t ip,
                              int *found)
{
    size_t mask = d->icap - 1;
    size_t i = nmp_mix64(ip ^ ((uint64_t)epoch << 40) ^ pid) & mask;
    while (d->ic[i].epoch) {
        if (d->ic[i].ip == ip && d->ic[i].epoch == epoch && d->ic[i].pid == pid) {
            *found = 1;
            return &d->ic[i];
        }
        i = (i + 1) & mask;
    }
    *found = 0;
    return &d->ic[i];
}

static int ic_grow(struct nmp_decoder *d)
{
    size_t ncap = d->icap ? d->icap * 2 : 4096;
    struct ientry *old = d->ic;
    size_t ocap = d->icap;
    d->ic = calloc(ncap, sizeof *d->ic);
    if (!d->ic) {
        d->ic = old;
        return -1;
    }
    d->icap = ncap;
    for (size_t i = 0; i < ocap; i++) {
        if (!old[i].epoch)
            continue;
        int found;
        *ic_find(d, old[i].pid, old[i].epoch, old[i].ip, &found) = old[i];
    }
    free(old);
    return 0;
}

static struct fentry *fc_get(struct nmp_decoder *d, struct nmp_file *f, uint64_t func_ip,
                             const uint8_t *code, size_t len)
{
    if (d->fcount * 2 >= d->fcap) {
        size_t ncap = d->fcap ? d->fcap * 2 : 256;
        struct fentry *nf = calloc(ncap, sizeof *nf);
        if (!nf)
            return NULL;
        for (size_t i = 0; i < d->fcap; i++) {
            if (!d->fc[i].f)
                continue;
            size_t k = nmp_mix64(d->fc[i].func_ip ^ (uintptr_t)d->fc[i].f) & (ncap - 1);
            while (nf[k].f)
                k = (k + 1) & (ncap - 1);
            nf[k] = d->fc[i];
        }
        free(d->fc);
        d->fc = nf;
        d->fcap = ncap;
    }
    size_t k = nmp_mix64(func_ip ^ (uintptr_t)f) & (d->fcap - 1);
    while (d->fc[k].f) {
        if (d->fc[k].f == f && d->fc[k].func_ip == func_ip)
            return &d->fc[k];
        k = (k + 1) & (d->fcap - 1);
    }
    if (!code)
        return NULL;
    struct fentry e = {f, func_ip, NULL, 0};
    if (nmp_cs_decode_range(d->cs, code, len, func_ip, &e.v, &e.n) != 0)
        return NULL;
    d->fc[k] = e;
    d->fcount++;
    d->st.functions++;
    return &d->fc[k];
}

/* ---- resolution ---------------------------------------------------------------------- */

static void set_rule(struct nmp_memop *m, int rule)
{
    memset(m, 0, sizeof *m);
    m->base = m->index = -1;
    m->rule = (uint8_t)rule;
}

/* Code bytes of [lo, hi) from the live process. */
static int read_vm(uint32_t pid, uint64_t lo, uint64_t hi, uint8_t *buf)
{
    struct iovec local = {buf, (size_t)(hi - lo)};
    struct iovec remote = {(void *)(uintptr_t)lo, (size_t)(hi - lo)};
    ssize_t r = process_vm_readv((pid_t)pid, &local, 1, &remote, 1, 0);
    return r == (ssize_t)(hi - lo) ? 0 : -1;
}

static void resolve(struct nmp_decoder *d, struct nmp_proc *p, uint64_t ip, struct nmp_memop *out)
{
    const struct nmp_map *m = find_map(p, ip);
    if (!m && nmp_now_ns() - p->maps_loaded_ns > 200000000ULL) {
        nmp_decoder_load_proc_maps(d, p->pid);
        m = find_map(p, ip);
    }
    if (m && m->file && m->file->fd >= 0) {
        struct nmp_file *f = m->file;
        uint64_t off = ip - m->start + m->pgoff;
        uint64_t fstart, fsize;
        if (find_function(f, off, &fstart, &fsize) == 0 && fstart >= m->pgoff) {
            uint64_t func_ip = m->start + (fstart - m->pgoff);
            struct fentry *fe = fc_get(d, f, func_ip, NULL, 0);
            if (!fe) {
                uint8_t *code = malloc(fsize);
                if (code && pread_full(f->fd, code, fsize, fstart) == 0) {
                    d->st.file_reads++;
                    fe = fc_get(d, f, func_ip, code, fsize);
                }
                free(code);
            }
            if (fe && nmp_attribute(fe->v, fe->n, ip, out) == 0)
                return;
        }
        /* no symbol (stripped code) or ip not on the function's instruction boundaries */
        uint64_t lo = ip - m->start > 64 ? ip - 64 : m->start;
        uint64_t hi = m->end - ip > 16 ? ip + 16 : m->end;
        uint8_t buf[96];
        ssize_t got = pread(f->fd, buf, hi - lo, (off_t)(lo - m->start + m->pgoff));
        if (got > (ssize_t)(ip - lo)) { /* the file may end before the mapping does */
            d->st.file_reads++;
            d->st.resyncs++;
            nmp_decode_code_cs(d->cs, buf, (size_t)got, lo, ip, 0, out, NULL);
            return;
        }
    }
    /* anonymous (JIT) code, [vdso], or a file we cannot open: read the process */
    uint64_t lo = m ? (ip - m->start > 64 ? ip - 64 : m->start) : (ip & ~4095ULL);
    if (ip - lo > 64)
        lo = ip - 64;
    uint64_t hi = m ? (m->end - ip > 16 ? ip + 16 : m->end) : ((ip | 4095ULL) + 1);
    if (hi - ip > 16)
        hi = ip + 16;
    uint8_t buf[96];
    if (read_vm(p->pid, lo, hi, buf) != 0 && read_vm(p->pid, lo = ip, hi, buf) != 0) {
        set_rule(out, NMP_RULE_UNREADABLE);
        return;
    }
    d->st.vm_reads++;
    d->st.resyncs++;
    nmp_decode_code_cs(d->cs, buf, hi - lo, lo, ip, 0, out, NULL);
}

/* The registers of the access that the analyzer names frames and register-held
 * objects by (struct nmp_sample): the stack and frame pointers at ip, always; with an
 * address, where the charged instruction is and which registers it used. */
static void access_registers(const struct nmp_memop *m, const struct nmp_regs *regs,
                             struct nmp_sample *s)
{
    s->sp = regs->r[NMP_REG_SP];
    s->bp = regs->r[6];
    s->insn_off = 0;
    s->base_reg = s->index_reg = 0;
    s->base_off = NMP_BASE_OFF_UNKNOWN;
    if (!s->addr)
        return;
    int64_t back = (int64_t)(s->ip - m->insn);
    s->insn_off = back > INT16_MIN && back <= INT16_MAX ? (int16_t)back : NMP_INSN_OFF_UNKNOWN;
    s->base_reg = (uint8_t)(nmp_dwarf_reg(m->base) + 1);
    s->index_reg = (uint8_t)(nmp_dwarf_reg(m->index) + 1);
    uint64_t b;
    if (m->base >= 0 && nmp_memop_reg(m, regs, m->base, &b) == 0) {
        int64_t off = (int64_t)(s->addr - b);
        if (off > INT32_MIN && off <= INT32_MAX) {
            s->base_off = (int32_t)off;
            return;
        }
    }
    /* With a scale of 1 base and index are the same to the cpu, and compilers put the
     * pointer in either: `movups %xmm0,0x10(%r8,%rdi,1)` with the offset in r8 and the
     * array's pointer in rdi (NPB FT's fftz2, gfortran -O2).  The register the access is
     * a small offset from is the one holding the pointer: it is named the base. */
    if (m->scale == 1 && m->index >= 0 && m->index < NMP_NREGS &&
        nmp_memop_reg(m, regs, m->index, &b) == 0) {
        int64_t off = (int64_t)(s->addr - b);
        if (off > INT32_MIN && off <= INT32_MAX) {
            s->base_reg = (uint8_t)(nmp_dwarf_reg(m->index) + 1);
            s->index_reg = (uint8_t)(nmp_dwarf_reg(m->base) + 1);
            s->base_off = (int32_t)off;
        }
    }
}

void nmp_decode_sample(struct nmp_decoder *d, const struct nmp_regs *regs, struct nmp_sample *s)
{
    struct nmp_memop m;
    s->addr = 0;
    if (s->ip >= KERNEL_START || s->ip == 0) {
        s->rule = NMP_RULE_KERNEL;
        s->access = NMP_ACC_NONE;
        s->size = 0;
        return;
    }
    struct nmp_proc *p = get_proc(d, s->pid, 1);
    if (!p) {
        set_rule(&m, NMP_RULE_UNREADABLE);
    } else {
        if (d->icount * 2 >= d->icap && ic_grow(d) != 0) {
            resolve(d, p, s->ip, &m);
        } else {
            int found;
            struct ientry *e = ic_find(d, p->pid, p->epoch, s->ip, &found);
            if (found) {
                d->st.cache_hits++;
                m = e->m;
            } else {
                d->st.cache_misses++;
                resolve(d, p, s->ip, &m);
                /* resolve() may have re-read the maps but never touches the cache */
                e->ip = s->ip;
                e->pid = p->pid;
                e->epoch = p->epoch;
                e->m = m;
                d->icount++;
            }
        }
    }
    if (regs && m.guard) {
        struct nmp_memop g = m;
        nmp_memop_taken(&g, regs, &m); /* the way the flags at ip say ran */
    }
    s->rule = m.rule;
    s->access = m.access;
    s->size = m.size;
    s->addr = regs ? nmp_memop_addr(&m, regs) : 0;
    s->tls = m.tls;
    if (!regs && (m.rule == NMP_RULE_AT_IP || m.rule == NMP_RULE_SKID))
        s->rule = NMP_RULE_UNREADABLE;
    else if (!regs && m.rule == NMP_RULE_VSIB_BASE)
        s->rule = NMP_RULE_VSIB;
    if (regs)
        access_registers(&m, regs, s);
}
