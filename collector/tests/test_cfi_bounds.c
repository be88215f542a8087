/* Functions no symbol covers (a stripped library's internal ones: libm's exp kernels) are
 * decoded whole, from the bounds their .eh_frame entry gives (codemap.c, fde_bounds),
 * not from a 64-byte window re-synchronised at a guess.  Checked on the system's libm:
 * an internal function is found by the test with libdw, its instructions decoded whole
 * (the expected answers) and in a window as before; at an IP where the two differ, a
 * sample through a mapping of the file must get the whole function's answer.  Skipped
 * (exit 0 with a note) when libm is not where Debian puts it or has no such function. */
#include "nmp_decode.h"

#include <capstone/capstone.h>
#include <elfutils/libdw.h>
#include <fcntl.h>
#include <gelf.h>
#include <inttypes.h>
#include <libelf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "nmp_check.h"

#define LIBM "/lib/x86_64-linux-gnu/libm.so.6"
#define BASE 0x7f0000000000ULL

struct range {
    uint64_t lo, hi;
};

/* The function symbols' ranges of an ELF file (.symtab and .dynsym). */
static size_t symbol_ranges(Elf *e, struct range *out, size_t cap)
{
    size_t n = 0;
    Elf_Scn *scn = NULL;
    while ((scn = elf_nextscn(e, scn)) != NULL) {
        GElf_Shdr sh;
        if (!gelf_getshdr(scn, &sh) || (sh.sh_type != SHT_SYMTAB && sh.sh_type != SHT_DYNSYM))
            continue;
        Elf_Data *data = elf_getdata(scn, NULL);
        for (size_t k = 0; data && k < sh.sh_size / sizeof(Elf64_Sym) && n < cap; k++) {
            GElf_Sym s;
            if (gelf_getsym(data, (int)k, &s) && GELF_ST_TYPE(s.st_info) == STT_FUNC && s.st_size)
                out[n++] = (struct range){s.st_value, s.st_value + s.st_size};
        }
    }
    return n;
}

static int covered(const struct range *r, size_t n, uint64_t lo, uint64_t hi)
{
    for (size_t k = 0; k < n; k++)
        if (r[k].lo < hi && lo < r[k].hi)
            return 1;
    return 0;
}

int main(void)
{
    int fd = open(LIBM, O_RDONLY);
    if (fd < 0) {
        printf("test_cfi_bounds: skipped, no %s\n", LIBM);
        return 0;
    }
    elf_version(EV_CURRENT);
    Elf *e = elf_begin(fd, ELF_C_READ_MMAP, NULL);
    Dwarf_CFI *cfi = e ? dwarf_getcfi_elf(e) : NULL;
    CHECK_MSG(cfi != NULL, "no CFI in %s", LIBM);
    static struct range syms[1 << 16];
    size_t nsyms = e ? symbol_ranges(e, syms, sizeof syms / sizeof *syms) : 0;
    /* the executable segment */
    uint64_t seg_va = 0, seg_off = 0, seg_sz = 0;
    size_t nph = 0;
    elf_getphdrnum(e, &nph);
    for (size_t i = 0; i < nph; i++) {
        GElf_Phdr ph;
        if (gelf_getphdr(e, (int)i, &ph) && ph.p_type == PT_LOAD && (ph.p_flags & PF_X)) {
            seg_va = ph.p_vaddr;
            seg_off = ph.p_offset;
            seg_sz = ph.p_filesz;
        }
    }
    CHECK_MSG(seg_sz > 0, "no code segment");
    csh cs;
    CHECK_MSG(cs_open(CS_ARCH_X86, CS_MODE_64, &cs) == CS_ERR_OK, "capstone");
    struct nmp_decoder *d = nmp_decoder_new();
    CHECK_MSG(d != NULL, "decoder");
    const uint32_t pid = 424242;
    CHECK_MSG(nmp_decoder_mmap(d, pid, BASE + (seg_va & ~4095ULL), seg_sz + 4096, seg_off & ~4095ULL,
                               LIBM) == 0, "mmap");
    struct nmp_regs r;
    memset(&r, 0, sizeof r);
    int checked = 0, functions = 0;
    for (uint64_t va = seg_va; cfi && va < seg_va + seg_sz && checked < 20;) {
        Dwarf_Frame *frame = NULL;
        Dwarf_Addr lo = 0, hi = 0;
        if (dwarf_cfi_addrframe(cfi, va, &frame) != 0 || !frame ||
            dwarf_frame_info(frame, &lo, &hi, NULL) < 0 || hi <= va) {
            free(frame);
            va += 16;
            continue;
        }
        free(frame);
        va = hi;
        if (hi - lo < 256 || hi - lo > 65536 || covered(syms, nsyms, lo, hi))
            continue;
        functions++;
        size_t len = hi - lo;
        uint8_t *code = malloc(len);
        if (!code || pread(fd, code, len, (off_t)(lo - seg_va + seg_off)) != (ssize_t)len) {
            free(code);
            continue;
        }
        cs_insn *insn = NULL;
        size_t n = cs_disasm(cs, code, len, lo, 0, &insn);
        for (size_t k = 0; k < n && checked < 20; k++) {
            uint64_t ip = insn[k].address;
            if (ip < lo + 64 || ip + 16 > hi)
                continue;
            struct nmp_memop whole, window;
            nmp_decode_code(d, code, len, lo, ip, 1, &whole);
            nmp_decode_code(d, code + (ip - 64 - lo), 80, ip - 64, ip, 0, &window);
            if (whole.rule == window.rule && whole.insn == window.insn)
                continue;
            struct nmp_memop taken;
            nmp_memop_taken(&whole, &r, &taken);
            struct nmp_sample s = {.pid = pid, .tid = pid, .ip = BASE + ip};
            nmp_decode_sample(d, &r, &s);
            CHECK_MSG(s.rule == taken.rule, "%s+%#" PRIx64 " (function %#" PRIx64 "-%#" PRIx64
                      "): rule %d, the whole function's %d (the window's %d)", LIBM, ip, (uint64_t)lo,
                      (uint64_t)hi, s.rule, taken.rule, window.rule);
            checked++;
        }
        cs_free(insn, n);
        free(code);
    }
    printf("test_cfi_bounds: %d functions without a symbol, %d IPs where the window differed\n",
           functions, checked);
    nmp_decoder_free(d);
    cs_close(&cs);
    dwarf_cfi_end(cfi);
    elf_end(e);
    close(fd);
    return check_result();
}
