/* Which memory access a software sample is charged to (the skid rule; the rules are
 * listed in docs/profile-format.md, how they work in docs/backends.md).
 *
 * A timer interrupt is taken at an instruction boundary once the instruction the core
 * was waiting for has retired, so the sampled ip is usually just past the access that
 * stalled.  The sample is charged to the instruction at ip when it accesses memory (rule
 * at_ip), else to the nearest memory instruction before it on the way the program most
 * likely came: straight back through the basic block (rule skid), on through conditional
 * branches not taken and joins (skid_path), or around a loop's back edge to the end of
 * the previous iteration (skid_loop).  The address that instruction used is computed
 * from the registers sampled at ip; a register it used must be proved to hold that
 * value, or a value it can be computed from (steps undone, instructions replayed), on
 * every way from the access to ip the walk stepped over: the other paths into a join are
 * explored and must not write it.  The one exception is the entry into a loop whose back
 * edge the walk took: a sample at the top of a loop is charged to the previous
 * iteration's access, which the loop's first iteration does not have.
 */
#include "nmp_decode_int.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define PATH_LEN 192 /* instructions walked back from ip */
#define EXPLORE 2048 /* instructions looked at to prove a loop or what a join keeps */
#define BUDGET 65536 /* instructions looked at for one ip, all explorations together */
#define NPRED 16     /* branches to one instruction that are followed */
#define HSLOTS 8192  /* exploration marks: a power of 2 well above EXPLORE */
#define PSLOTS 512   /* path positions: a power of 2 well above PATH_LEN */
#define REG_RSI 4
#define REG_RDI 5
/* what a call may change: the caller-saved general registers of the System V x86-64 ABI
 * (rax, rcx, rdx, rsi, rdi, r8-r11); rsp comes back as it was */
#define CALL_CLOBBERS ((1u << 0) | (1u << 2) | (1u << 3) | (1u << 4) | (1u << 5) | (0xfu << 16))

enum { J_NONE = 0, J_FALL, J_LATCH }; /* how the walk went into an instruction with several
                                       * predecessors: its fall-through one, a latch */
enum { LOOP_NO = 0, LOOP_YES = 1, LOOP_DEAD = -1, LOOP_UNKNOWN = 2 };

struct walk {
    const struct nmp_insn *v;
    long n;  /* instructions in v */
    int len; /* positions 0 .. len-1 */
    int pj;  /* position of the memory (or pause) instruction found, -1 */
    int sp;  /* position of the first stack access (push, pop, a call's return) before
              * pj or where the walk ended, -1 */
    long at[PATH_LEN];       /* at[0]: the instruction at ip; at[k + 1] ran just before at[k] */
    uint8_t join[PATH_LEN];  /* J_*: at[k] can also be reached otherwise than from at[k + 1] */
    int8_t memo[PATH_LEN][NMP_NREGS + 1]; /* join_keeps() per position and register (or
                                           * none: NMP_NREGS): 1, -1, 0 not known yet */
    long pkey[PSLOTS];       /* instruction index + 1 -> its position (ppos) on the path */
    int16_t ppos[PSLOTS];
    long ekey[HSLOTS];       /* instruction indexes marked by the current exploration */
    uint32_t egen[HSLOTS];
    uint32_t gen;
    long spent; /* instructions explored so far, against BUDGET */
    long stack[EXPLORE + NPRED + 2];
};

static size_t slot(long x, size_t mask)
{
    return ((uint64_t)x * 0x9e3779b97f4a7c15ULL >> 20) & mask;
}

static void path_put(struct walk *w, long x, int pos)
{
    size_t i = slot(x, PSLOTS - 1);
    while (w->pkey[i])
        i = (i + 1) & (PSLOTS - 1);
    w->pkey[i] = x + 1;
    w->ppos[i] = (int16_t)pos;
}

/* Position of v[x] on the path, -1 if not on it. */
static int path_pos(const struct walk *w, long x)
{
    for (size_t i = slot(x, PSLOTS - 1); w->pkey[i]; i = (i + 1) & (PSLOTS - 1))
        if (w->pkey[i] == x + 1)
            return w->ppos[i];
    return -1;
}

/* Marks v[x] for the current exploration: 1 if it was not marked yet. */
static int mark(struct walk *w, long x)
{
    w->spent++;
    size_t i = slot(x, HSLOTS - 1);
    while (w->egen[i] == w->gen) {
        if (w->ekey[i] == x)
            return 0;
        i = (i + 1) & (HSLOTS - 1);
    }
    w->egen[i] = w->gen;
    w->ekey[i] = x;
    return 1;
}

/* Nops after a jmp or ret that no branch goes to: alignment padding nothing runs. */
static int dead_padding(const struct nmp_insn *v, long k)
{
    if (!(v[k].flags & NMP_F_NOP))
        return 0;
    while (k >= 0 && (v[k].flags & NMP_F_NOP) && !(v[k].flags & (NMP_F_TARGET | NMP_F_GAP)))
        k--;
    return k >= 0 && !(v[k].flags & NMP_F_NOP) && (v[k].flags & NMP_F_NOFALL);
}

/* The instructions control comes to v[x] from: the one before it, unless that one never
 * continues (jmp, ret) or is padding nothing reaches, and every direct branch to x.
 * Returns their number (into out), -1 when x can also be entered from outside the list
 * (its first instruction: a function's entry or the start of a window of unknown code;
 * after undecodable bytes), -2 when more branches go to x than are followed. */
static int preds(const struct nmp_insn *v, long x, long *out)
{
    int np = 0;
    if (x == 0 || (v[x].flags & NMP_F_GAP))
        return -1;
    if (!(v[x - 1].flags & NMP_F_NOFALL) && !dead_padding(v, x - 1))
        out[np++] = x - 1;
    for (long s = v[x].src_first; s >= 0; s = v[s].src_next) {
        if (np == NPRED)
            return -2;
        out[np++] = s;
    }
    return np;
}

/* Whether the edge p -> h closes a loop whose header is h: every way into v[p] passes
 * v[h] (found going back from p without passing h).  LOOP_YES; LOOP_NO when an entry is
 * reached without h; LOOP_DEAD when nothing reaches p; LOOP_UNKNOWN past EXPLORE
 * instructions or too many branches. */
static int closes_loop(struct walk *w, long p, long h)
{
    if (p == h)
        return LOOP_YES;
    int sp = 0, seen = 0, met = 0;
    w->gen++;
    mark(w, p);
    w->stack[sp++] = p;
    while (sp) {
        long x = w->stack[--sp], pr[NPRED];
        int np = preds(w->v, x, pr);
        if (np < 0)
            return np == -1 ? LOOP_NO : LOOP_UNKNOWN;
        for (int k = 0; k < np; k++) {
            if (pr[k] == h) {
                met = 1;
            } else if (mark(w, pr[k])) {
                if (++seen > EXPLORE || w->spent > BUDGET)
                    return LOOP_UNKNOWN;
                w->stack[sp++] = pr[k];
            }
        }
    }
    return met ? LOOP_YES : LOOP_DEAD;
}

/* Walks back from v[i] along the way the program most likely came, up to the first
 * memory instruction, pause or divide (w->pj; within `search` instructions), then on while each
 * instruction has a single predecessor (what rebuild() may look at).  At one with several
 * predecessors it takes a latch when one closes a loop (the iterations outnumber the
 * entries; of several, the last in the code), else the instruction before it; it stops
 * at an entry, after a call (the sample follows code elsewhere), where it has been
 * already, after PATH_LEN. */
static void walk_back(struct walk *w, long i, int search)
{
    w->at[0] = i;
    w->len = 1;
    w->pj = w->sp = -1;
    path_put(w, i, 0);
    for (long x = i; w->len < PATH_LEN && (w->pj >= 0 || w->len <= search);) {
        long pr[NPRED], p;
        int np = preds(w->v, x, pr), how = J_NONE;
        if (np <= 0)
            break;
        p = pr[0];
        if (np > 1) {
            if (w->pj >= 0)
                break;
            int latches = 0, layout = 0;
            for (int k = 0; k < np; k++) {
                if (closes_loop(w, pr[k], x) == LOOP_YES) {
                    /* several latches (a binary search's `lo = mid` and `hi = mid` both
                     * jump back): the walk takes the last one in the code, and
                     * join_keeps() holds the others to keeping what it rebuilds */
                    if (!latches || pr[k] > p)
                        p = pr[k];
                    latches++;
                }
                layout |= pr[k] == x - 1;
            }
            if (latches >= 1)
                how = J_LATCH;
            else if (layout)
                p = x - 1, how = J_FALL;
            else
                break;
        }
        if (path_pos(w, p) >= 0)
            break;
        /* a call ends the walk: the sample follows the callee's code.  Its ret, reading
         * the return address the call pushed (NMP_F_RETSLOT), ran last before the
         * instruction after the call: the call is the path's last position then */
        int call = (w->v[p].flags & NMP_F_CALL) != 0;
        if (call && !(w->pj < 0 && w->sp < 0 && (w->v[p].flags & NMP_F_RETSLOT)))
            break;
        w->join[w->len - 1] = (uint8_t)how;
        path_put(w, p, w->len);
        w->at[w->len++] = p;
        x = p;
        if (w->pj < 0 && (w->v[p].flags & (NMP_F_MEM | NMP_F_PAUSE | NMP_F_DIVIDE)))
            w->pj = w->len - 1;
        if (w->pj < 0 && w->sp < 0 && (w->v[p].flags & (NMP_F_STACK | NMP_F_RETSLOT)))
            w->sp = w->len - 1;
        if (call)
            break;
    }
}

/* Whether the instruction may change reg (a perf register index; NMP_REG_FLAGS: the
 * arithmetic flags; -1: none).  A call changes what the ABI lets the callee change. */
static int writes(const struct nmp_insn *in, int reg)
{
    if (reg < 0)
        return 0;
    if (in->flags & NMP_F_CALL)
        return reg == NMP_REG_FLAGS ||
               (((in->wregs & ~(1u << NMP_REG_SP)) | CALL_CLOBBERS) >> reg) & 1;
    return reg == NMP_REG_FLAGS ? (in->flags & NMP_F_WFLAGS) != 0 : (in->wregs >> reg) & 1;
}

/* Whether the path writes reg at positions from .. 1 (what ran after at[from + 1]). */
static int written(const struct walk *w, int from, int reg)
{
    for (int k = from; k >= 1; k--)
        if (writes(&w->v[w->at[k]], reg))
            return 1;
    return 0;
}

/* Whether a detour from the path into the join at position q, ending with the branch
 * v[b], writes reg nowhere (-1: whether it ran the access): explored back from b to where
 * it left the path, which must be after the access (position in (q, pj]); the path
 * instructions it bypassed must not write reg either.  A call on the detour changes the
 * caller-saved registers. */
static int detour_keeps(struct walk *w, int q, long b, int reg)
{
    int sp = 0, seen = 0;
    w->gen++;
    mark(w, b);
    w->stack[sp++] = b;
    while (sp) {
        long x = w->stack[--sp], pr[NPRED];
        int px = path_pos(w, x);
        if (px >= 0) {
            if (px <= q || px > w->pj)
                return 0; /* around the join again, or from before the access */
            for (int k = q + 1; k < px; k++)
                if (writes(&w->v[w->at[k]], reg))
                    return 0;
            continue;
        }
        if (writes(&w->v[x], reg))
            return 0;
        int np = preds(w->v, x, pr);
        if (np < 0)
            return 0;
        for (int k = 0; k < np; k++) {
            if (mark(w, pr[k])) {
                if (++seen > EXPLORE || w->spent > BUDGET)
                    return 0;
                w->stack[sp++] = pr[k];
            }
        }
    }
    return 1;
}

/* Whether reg reaches the join at position q with the value the walked path gives it,
 * whichever way the program came: each other predecessor is dead code, the entry into
 * the loop whose latch the walk took, or the end of a detour that keeps reg. */
static int join_keeps(struct walk *w, int q, int reg)
{
    long x = w->at[q], pr[NPRED];
    int np = preds(w->v, x, pr);
    if (np < 0)
        return 0;
    for (int k = 0; k < np; k++) {
        if (pr[k] == w->at[q + 1])
            continue;
        int c = closes_loop(w, pr[k], x);
        if (c == LOOP_DEAD || (w->join[q] == J_LATCH && c == LOOP_NO))
            continue;
        if (!detour_keeps(w, q, pr[k], reg))
            return 0;
    }
    return 1;
}

/* join_keeps() for every join between at[from] and ip (reg -1: every other way into
 * them ran the access too). */
static int joins_keep(struct walk *w, int from, int reg)
{
    for (int q = 0; q < from && q + 1 < w->len; q++) {
        if (w->join[q] == J_NONE)
            continue;
        int8_t *m = &w->memo[q][reg < 0 ? NMP_NREGS : reg];
        if (!*m)
            *m = join_keeps(w, q, reg) ? 1 : -1;
        if (*m < 0)
            return 0;
    }
    return 1;
}

static int push_op(struct nmp_rebuild *rb, int op, int reg, int scale, int64_t imm)
{
    if (rb->nops >= NMP_REBUILD_OPS || imm < INT32_MIN || imm > INT32_MAX || scale < INT8_MIN ||
        scale > INT8_MAX)
        return -1;
    struct nmp_rop *o = &rb->ops[rb->nops++];
    o->op = (uint8_t)op;
    o->reg = (int8_t)reg;
    o->scale = (int8_t)scale;
    o->pad = 0;
    o->imm = (int32_t)imm;
    return 0;
}

/* v += c, into the last op when that is an addition. */
static int push_add(struct nmp_rebuild *rb, int64_t c)
{
    struct nmp_rop *o = rb->nops ? &rb->ops[rb->nops - 1] : NULL;
    if (!c)
        return 0;
    if (o && (o->op == NMP_ROP_ADD || o->op == NMP_ROP_ADDREG) && o->imm + c >= INT32_MIN &&
        o->imm + c <= INT32_MAX) {
        o->imm = (int32_t)(o->imm + c);
        return 0;
    }
    return push_op(rb, NMP_ROP_ADD, -1, 0, c);
}

/* Whether the value reg had just before at[from] ran is known from the registers at ip,
 * into rb (from r[reg], the steps since undone, latest first): reg was written since only
 * by steps (constants; strides in registers themselves unchanged up to ip; constant
 * factors, undone by exact division; the string instruction that is the access, whose
 * last element is wanted), and the joins passed keep it and the stride registers. */
static int intact(struct walk *w, int from, int reg, struct nmp_rebuild *rb)
{
    uint32_t strides = 0;
    memset(rb, 0, sizeof *rb);
    rb->src = (int8_t)reg;
    for (int k = 1; k <= from; k++) {
        const struct nmp_insn *x = &w->v[w->at[k]];
        if (!(x->wregs & (1u << reg)))
            continue;
        if (x->flags & NMP_F_STRING) {
            /* rsi / rdi past the element the access used; a rep string before the
             * access stepped them by an unknown count */
            if (k != w->pj || (reg != REG_RSI && reg != REG_RDI) ||
                ((x->flags & NMP_F_REP) && from != w->pj) ||
                push_op(rb, NMP_ROP_STRBACK, -1, 0, x->mem.size ? x->mem.size : 1) < 0)
                return 0;
            continue;
        }
        if (x->step_reg != reg)
            return 0;
        if (x->step_src >= 0) {
            if (written(w, k - 1, x->step_src) ||
                push_op(rb, NMP_ROP_ADDREG, x->step_src, -x->step_scale, -(int64_t)x->step) < 0)
                return 0;
            strides |= 1u << x->step_src;
        } else if (push_add(rb, -(int64_t)x->step) < 0) {
            return 0;
        }
        if (x->step_mul != 1 && push_op(rb, NMP_ROP_DIV, -1, 0, x->step_mul) < 0)
            return 0;
    }
    if (!joins_keep(w, from, reg))
        return 0;
    for (int r = 0; r < NMP_NREGS; r++)
        if (((strides >> r) & 1) && !joins_keep(w, from, r))
            return 0;
    return 1;
}

/* The constant rb adds to its register, when that is all it does. */
static int only_add(const struct nmp_rebuild *rb, int64_t *c)
{
    if (rb->nops > 1 || (rb->nops == 1 && rb->ops[0].op != NMP_ROP_ADD))
        return 0;
    *c = rb->nops ? rb->ops[0].imm : 0;
    return 1;
}

/* intact() for a register added in as r[reg] + *c. */
static int intact_const(struct walk *w, int from, int reg, int64_t *c)
{
    struct nmp_rebuild rb;
    return intact(w, from, reg, &rb) && only_add(&rb, c);
}

static int log2_scale(int s)
{
    return s == 1 ? 0 : s == 2 ? 1 : s == 4 ? 2 : s == 8 ? 3 : -1;
}

/* Rebuilds into rb the value reg had just before at[pat] ran, from the registers at ip:
 * intact up to steps, or replayed from the instruction that last set it (mov, movsxd,
 * and / add / sub / shifts by a constant, lea) where that is on the single way into the
 * access, recursively.  0, or -1 when it cannot be known. */
static int rebuild(struct walk *w, int pat, int reg, struct nmp_rebuild *rb, int depth)
{
    if (intact(w, pat, reg, rb))
        return 0;
    if (depth >= 4)
        return -1;
    for (int k = pat; k + 1 < w->len; k++) {
        if (w->join[k] != J_NONE)
            return -1; /* the value may come from another path */
        const struct nmp_insn *d = &w->v[w->at[k + 1]];
        if (!(d->wregs & (1u << reg))) {
            /* a copy of reg made before: `mov %reg,%dst` or `lea c(%reg),%dst` (the RMAT
             * generator's `lea 0x1(%rax),%r9; mov 0x30(%rsp,%rax,8),%rax`, a load over its
             * own index); reg is dst less c wherever dst can be known from there */
            if (d->wregs && !d->def_32 && d->def_src == reg &&
                (d->def_op == NMP_DEF_MOV || (d->def_op == NMP_DEF_LEA && d->def_src2 < 0)) &&
                rebuild(w, k, __builtin_ctz(d->wregs), rb, depth + 1) == 0 &&
                (d->def_op == NMP_DEF_MOV || push_add(rb, -(int64_t)d->def_imm) == 0))
                return 0;
            continue;
        }
        int kd = k + 1, b = d->def_src, x = d->def_src2, sh = log2_scale(d->def_scale);
        int64_t ub = 0, ux = 0;
        switch (d->def_op) {
        case NMP_DEF_MOV:
            if (rebuild(w, kd, b, rb, depth + 1) < 0)
                return -1;
            break;
        case NMP_DEF_SX32:
            if (rebuild(w, kd, b, rb, depth + 1) < 0 || push_op(rb, NMP_ROP_SX32, -1, 0, 0) < 0)
                return -1;
            break;
        case NMP_DEF_ALU:
            if (rebuild(w, kd, reg, rb, depth + 1) < 0 ||
                push_op(rb, d->def_scale, -1, 0, d->def_imm) < 0)
                return -1;
            break;
        case NMP_DEF_LEA:
            if (x < 0) { /* base + disp */
                if (b < 0 || rebuild(w, kd, b, rb, depth + 1) < 0)
                    return -1;
            } else if (b < 0 || (b != x && intact_const(w, kd, b, &ub))) {
                /* index * scale (+ an intact base) + disp */
                if (sh < 0 || rebuild(w, kd, x, rb, depth + 1) < 0 ||
                    (sh && push_op(rb, NMP_ROP_SHL, -1, 0, sh) < 0) ||
                    (b >= 0 && push_op(rb, NMP_ROP_ADDREG, b, 1, ub) < 0))
                    return -1;
            } else if (b != x && intact_const(w, kd, x, &ux)) {
                /* base + an intact index * scale + disp */
                if (rebuild(w, kd, b, rb, depth + 1) < 0 ||
                    push_op(rb, NMP_ROP_ADDREG, x, d->def_scale, ux * d->def_scale) < 0)
                    return -1;
            } else {
                return -1;
            }
            if (d->def_imm && push_op(rb, NMP_ROP_ADD, -1, 0, d->def_imm) < 0)
                return -1;
            break;
        default:
            return -1;
        }
        if (d->def_32 && push_op(rb, NMP_ROP_ZX32, -1, 0, 0) < 0)
            return -1;
        return 0;
    }
    return -1;
}

/* The access's register reg, overwritten since, but copied before that into registers
 * intact at ip: by a mov, or by two cmovs of opposite conditions on flags still those at
 * ip (`cmovbe %rdx,%rdi; cmova %rdx,%r9`, a branch-free binary search whose next
 * `mov %r9,%rdx` overwrites the probe's index).  0 with rb reading it there, or -1. */
static int copied(struct walk *w, int reg, struct nmp_rebuild *rb)
{
    int dst[16], pos[16];
    for (int c = 0; c < 16; c++)
        dst[c] = -1;
    if (w->v[w->at[w->pj]].wregs & (1u << reg))
        return -1; /* the access overwrote it itself */
    for (int k = w->pj - 1; k >= 1; k--) {
        const struct nmp_insn *x = &w->v[w->at[k]];
        if (x->wregs & (1u << reg))
            break;
        if ((x->def_op != NMP_DEF_MOV && x->def_op != NMP_DEF_CMOV) || x->def_src != reg ||
            x->def_32)
            continue;
        int d = __builtin_ctz(x->wregs), cc = x->def_imm & 15, o = cc ^ 1;
        if (written(w, k - 1, d) || !joins_keep(w, k, d))
            continue;
        memset(rb, 0, sizeof *rb);
        rb->src = (int8_t)d;
        if (x->def_op == NMP_DEF_MOV)
            return 0;
        dst[cc] = d;
        pos[cc] = k;
        if (dst[o] < 0)
            continue;
        int first = pos[o] > k ? pos[o] : k; /* the earlier cmov: the flags both saw */
        if (written(w, first - 1, NMP_REG_FLAGS) || !joins_keep(w, first, NMP_REG_FLAGS))
            return -1;
        return push_op(rb, NMP_ROP_SELECT, dst[o], 0, cc);
    }
    return -1;
}

/* The join at position q, which the walk came into by its fall-through, is reached
 * otherwise only by a conditional jump v[b] before the access on the path (`cmp; jne
 * join; ... access; join:`, b+tree's `if (keys[i] == key) ans = ...`), and nothing from b
 * to ip writes the flags: at ip they still say whether b was taken.  Returns the guard
 * (16 + the condition code under which b was not taken: the walked way, through the
 * access, ran), 0 when q is not such a join. */
static int guard_of(struct walk *w, int q, int *pos)
{
    long x = w->at[q], pr[NPRED];
    if (w->join[q] != J_FALL || preds(w->v, x, pr) != 2)
        return 0;
    long b = pr[0] == w->at[q + 1] ? pr[1] : pr[1] == w->at[q + 1] ? pr[0] : -1;
    if (b < 0 || b == w->at[q + 1] || w->v[b].jcc < 0 || w->v[b].tgt != x)
        return 0;
    int pb = path_pos(w, b);
    if (pb <= w->pj || written(w, pb - 1, NMP_REG_FLAGS))
        return 0;
    *pos = pb;
    return 16 + (w->v[b].jcc ^ 1);
}

/* Whether some way from v[from] to v[x] (explored forward, not past x) may write reg:
 * 1 when one does, or may (a call, a return or indirect jump, a branch out of the
 * decoded code, past EXPLORE instructions), 0 when every way keeps it. */
static int forward_writes(struct walk *w, long from, long x, int reg)
{
    int sp = 0, seen = 0;
    w->gen++;
    mark(w, from);
    w->stack[sp++] = from;
    while (sp) {
        long y = w->stack[--sp], succ[2];
        if (y == x)
            continue;
        const struct nmp_insn *in = &w->v[y];
        /* a call, a return, an indirect jump or a branch out of the decoded code */
        if (writes(in, reg) || (in->flags & NMP_F_CALL) || ((in->flags & NMP_F_CF) && in->tgt < 0))
            return 1;
        int ns = 0;
        if (!(in->flags & NMP_F_NOFALL))
            succ[ns++] = y + 1;
        if (in->tgt >= 0)
            succ[ns++] = in->tgt;
        for (int k = 0; k < ns; k++) {
            if (succ[k] >= w->n || (w->v[succ[k]].flags & NMP_F_GAP))
                return 1;
            if (mark(w, succ[k])) {
                if (++seen > EXPLORE || w->spent > BUDGET)
                    return 1;
                w->stack[sp++] = succ[k];
            }
        }
    }
    return 0;
}

/* The other way into the join at q (the walk came in by its fall-through) is a block
 * entered only from a conditional jump b on the flags of a compare of one register
 * (`test %r8d,%r8d; jle D`, where D is `pxor %xmm1,%xmm1; jmp join`: a loop's zero-trip
 * guard, kmeans), or that jump itself, and the register keeps its value from the
 * compare to ip on every way (the loop does not write it, nor the block, nor what runs
 * from the join to ip): the compare redone at sample time on the sampled register says
 * which way ran.  Sets out's register guard and returns 1, else 0. */
static int reg_guard(struct walk *w, int q, struct nmp_memop *out)
{
    long x = w->at[q], pr[NPRED], pp[NPRED], b = -1, t;
    if (w->join[q] != J_FALL || preds(w->v, x, pr) != 2)
        return 0;
    long o = pr[0] == w->at[q + 1] ? pr[1] : pr[1] == w->at[q + 1] ? pr[0] : -1;
    if (o < 0 || o == w->at[q + 1])
        return 0;
    int taken = 1; /* the block is b's taken way */
    if (w->v[o].jcc >= 0 && w->v[o].tgt == x && o + 1 != x) {
        b = o;
        t = x;
    } else {
        for (t = o;; t = pp[0]) {
            if (o - t > 64 || preds(w->v, t, pp) != 1)
                return 0;
            const struct nmp_insn *p = &w->v[pp[0]];
            if (p->jcc >= 0 && (p->tgt == t) != (pp[0] + 1 == t)) {
                b = pp[0];
                taken = p->tgt == t;
                break;
            }
            if (p->flags & NMP_F_CF)
                return 0;
        }
    }
    const struct nmp_insn *c = b > 0 ? &w->v[b - 1] : NULL;
    if (!c || !c->cmp_kind || preds(w->v, b, pp) != 1 || pp[0] != b - 1)
        return 0;
    int reg = c->cmp_reg;
    for (long k = t; b != o && k <= o; k++)
        if (writes(&w->v[k], reg))
            return 0;
    long walked = taken ? b + 1 : w->v[b].tgt;
    if (walked < 0 || written(w, q, reg) || forward_writes(w, walked, x, reg))
        return 0;
    out->guard = (uint8_t)(16 + (taken ? w->v[b].jcc ^ 1 : w->v[b].jcc));
    out->guard_reg = (uint8_t)(reg + 1);
    out->guard_kind = c->cmp_kind;
    out->guard_32 = c->cmp_32;
    out->guard_imm = c->cmp_imm;
    return 1;
}

/* The access of the branch's way (guard_of's jump at position pb taken): the first
 * memory instruction before the jump on the path (`cmp %ecx,(%rdi,%rax,4)` before `jne`),
 * into out->alt when its address registers are intact up to ip up to constant steps
 * (proved along the walked path, which the branch's way only shortens). */
static void alternate(struct walk *w, int pb, struct nmp_memop *out)
{
    memset(&out->alt, 0, sizeof out->alt);
    int pa = pb + 1;
    while (pa < w->len && !(w->v[w->at[pa]].flags & (NMP_F_MEM | NMP_F_PAUSE | NMP_F_DIVIDE)))
        pa++;
    if (pa >= w->len || !(w->v[w->at[pa]].flags & NMP_F_MEM))
        return;
    const struct nmp_memop *a = &w->v[w->at[pa]].mem;
    if (a->rule != NMP_RULE_AT_IP || (w->v[w->at[pa]].flags & NMP_F_STRING))
        return;
    int64_t disp = a->disp;
    int regs[2] = {a->base, a->index};
    for (int k = 0; k < 2; k++) {
        struct nmp_rebuild rb;
        int64_t c = 0;
        if (regs[k] < 0)
            continue;
        if (!intact(w, pa, regs[k], &rb) || !only_add(&rb, &c))
            return;
        disp += k ? c * a->scale : c;
    }
    out->alt.disp = disp;
    out->alt.insn = a->insn;
    out->alt.base = a->base;
    out->alt.index = a->index;
    out->alt.scale = a->scale;
    out->alt.addr32 = a->addr32;
    out->alt.size = a->size;
    out->alt.access = a->access;
}

/* Another way into a join skips the access: when that is one branch around it whose
 * flags last to ip (guard_of), the access is charged on the condition that the flags
 * sampled at ip say the walked way ran (out->guard), and the join is taken as passed
 * that way; 0, or -1 when the ways cannot be told apart. */
static int guard_join(struct walk *w, struct nmp_memop *out)
{
    int q = -1;
    for (int k = 0; k < w->pj && k + 1 < w->len; k++) {
        if (w->join[k] == J_NONE)
            continue;
        int8_t *m = &w->memo[k][NMP_NREGS];
        if (!*m)
            *m = join_keeps(w, k, -1) ? 1 : -1;
        if (*m > 0)
            continue;
        if (q >= 0)
            return -1; /* two joins skip it */
        q = k;
    }
    int pb = 0, g = q >= 0 ? guard_of(w, q, &pb) : 0;
    if (!g && (q < 0 || !reg_guard(w, q, out)))
        return -1;
    w->join[q] = J_NONE; /* on the way through the access the branch fell through */
    if (g) {
        out->guard = (uint8_t)g;
        alternate(w, pb, out); /* the branch's way: through the join, passed as one way */
    }
    return 0;
}

/* The value reg had at the access, when the walk left a loop of constant trip count
 * after it by the fall-through of `cmp $imm,%reg; jne head` (`for (m = 0; m < 3; m++)
 * dr[m] = ...`, CoMD's force loop): reg was imm there, less the constant steps between the
 * access and the compare, on the walked way; and any other way into a join after the
 * loop left it after the compare (joins_keep), so the access ran with that value there
 * too, whatever such a way did to reg since.  0 with *value, or -1. */
static int pinned(struct walk *w, int reg, int64_t *value)
{
    int64_t steps = 0;
    for (int k = w->pj - 1; k >= 2; k--) {
        const struct nmp_insn *x = &w->v[w->at[k]];
        if (w->join[k] != J_NONE)
            return -1; /* another way into the loop's body: other steps */
        const struct nmp_insn *j = &w->v[w->at[k - 1]];
        if (x->cmp_kind == NMP_CMP_IMM && x->cmp_reg == reg && !x->cmp_32 && j->jcc == 5 &&
            w->at[k - 1] == w->at[k] + 1 && w->at[k - 2] == w->at[k - 1] + 1 &&
            w->join[k - 1] == J_NONE) {
            *value = (int64_t)((uint64_t)(int64_t)x->cmp_imm - (uint64_t)steps);
            return 0;
        }
        if (writes(x, reg)) {
            if (x->step_reg != reg || x->step_src >= 0 || x->step_mul != 1)
                return -1;
            steps += x->step;
        }
    }
    return -1;
}

/* Charges the access at[pj] to the sample: each address register is intact up to
 * constant steps (undone in the displacement), or known through rb (at most one of them:
 * steps by a register or a factor undone, a replay, a copy).  0, or -1 with rule
 * clobbered. */
static int skid_to(struct walk *w, struct nmp_memop *out)
{
    *out = w->v[w->at[w->pj]].mem;
    out->rule = NMP_RULE_SKID;
    memset(&out->rb, 0, sizeof out->rb);
    out->guard = out->guard_reg = out->guard_kind = out->guard_32 = 0;
    out->guard_imm = 0;
    memset(&out->alt, 0, sizeof out->alt);
    if (!joins_keep(w, w->pj, -1) && guard_join(w, out) < 0) {
        /* another way to ip skips the access */
        out->rule = NMP_RULE_CLOBBERED;
        return -1;
    }
    int64_t undo[2] = {0, 0};
    int regs[2] = {out->base, out->index};
    for (int k = 0; k < 2; k++) {
        int reg = regs[k];
        if (reg < 0)
            continue;
        if (k == 1 && reg == regs[0]) { /* (%rax,%rax,s): as the base */
            undo[1] = undo[0];
            continue;
        }
        struct nmp_rebuild rb;
        int64_t value;
        if (intact(w, w->pj, reg, &rb) && only_add(&rb, &undo[k]))
            continue;
        if (pinned(w, reg, &value) == 0) { /* a constant at the access: into disp */
            out->disp += k ? value * out->scale : value;
            if (k == 0 && regs[1] == reg) {
                out->disp += value * out->scale;
                out->index = -1;
                regs[1] = -1;
            }
            if (k == 0)
                out->base = -1;
            else
                out->index = -1;
            continue;
        }
        if (out->rb.used ||
            (rebuild(w, w->pj, reg, &rb, 0) < 0 && copied(w, reg, &rb) < 0)) {
            memset(&out->rb, 0, sizeof out->rb);
            out->rule = NMP_RULE_CLOBBERED;
            out->guard = out->guard_reg = 0;
            return -1;
        }
        rb.used = 1;
        rb.reg = (int8_t)reg;
        out->rb = rb;
    }
    out->disp += undo[0] + undo[1] * out->scale;
    out->base_step = (int32_t)undo[0];
    out->index_step = (int32_t)undo[1];
    return 0;
}

/* skid, skid_path or skid_loop: what the walk from the access to ip went through. */
static int path_rule(const struct walk *w)
{
    int rule = NMP_RULE_SKID;
    for (int k = 0; k < w->pj; k++) {
        long x = w->at[k], p = w->at[k + 1];
        if (p > x || w->join[k] == J_LATCH)
            return NMP_RULE_SKID_LOOP; /* a back edge: the previous iteration */
        if (w->join[k] != J_NONE || p != x - 1 || (w->v[p].flags & NMP_F_CF))
            rule = NMP_RULE_SKID_PATH;
    }
    return rule;
}

/* Whether instruction i is in a short loop that executes a pause (or rdtsc): a thread
 * busy-waiting in a spin loop (libgomp's barrier: pause; count; load the barrier word;
 * compare; branch back), sampled on the load it repeats or after it.  The loop's back
 * edge is a direct branch at most SPIN_LOOP instructions after i, to i or before it. */
#define SPIN_LOOP 16
static int in_pause_loop(const struct nmp_insn *v, size_t n, long i)
{
    for (long j = i; j < (long)n && j < i + SPIN_LOOP; j++) {
        const struct nmp_insn *b = &v[j];
        if ((b->flags & NMP_F_CF) && b->tgt >= 0 && b->tgt <= i && j - b->tgt < SPIN_LOOP) {
            for (long k = b->tgt; k <= j; k++)
                if (v[k].flags & NMP_F_PAUSE)
                    return 1;
        }
        if (b->flags & (NMP_F_NOFALL | NMP_F_CALL))
            return 0; /* the code goes elsewhere before any back edge */
    }
    return 0;
}

int nmp_attribute(const struct nmp_insn *v, size_t n, uint64_t ip, struct nmp_memop *out)
{
    long i = nmp_insn_find(v, n, ip);
    memset(out, 0, sizeof *out);
    out->base = out->index = -1;
    if (i < 0)
        return -1;
    /* a thread busy-waiting (OpenMP barrier, spin lock) is sampled on or just after its
     * `pause`, or on the load of the word it waits on: it is waiting, not accessing the
     * program's memory */
    out->rule = (v[i].flags & NMP_F_PAUSE) || in_pause_loop(v, n, i) ? NMP_RULE_SPIN : NMP_RULE_NO_MEM;
    if (out->rule == NMP_RULE_SPIN)
        return 0;
    struct walk *w = calloc(1, sizeof *w);
    if (!w) {
        out->rule = NMP_RULE_UNDECODABLE;
        return 0;
    }
    w->v = v;
    w->n = (long)n;
    walk_back(w, i, v[i].flags & NMP_F_MEM ? 1 : PATH_LEN);
    if (v[i].flags & NMP_F_MEM) {
        /* Two memory instructions in a row (movsd a; addsd b; movsd c in a stream loop):
         * the first of such a run is never at ip (measured: 0 of 12 766 samples on
         * `patterns irregular static rw`, whose loads of `a` open both loops), so the
         * access that just retired is charged (rule skid) when its address is known.  A
         * rep string instruction is interrupted while it runs: it is the access. */
        const struct nmp_insn *p = w->pj == 1 ? &v[w->at[1]] : NULL;
        if (p && !(v[i].flags & NMP_F_REP) && w->at[1] == i - 1 && w->join[0] == J_NONE &&
            (p->flags & NMP_F_MEM) && !(p->flags & NMP_F_CF) && p->mem.rule == NMP_RULE_AT_IP &&
            skid_to(w, out) == 0) {
            free(w);
            return 0;
        }
        *out = v[i].mem;
    } else if (w->pj < 0 && (v[i].flags & (NMP_F_STACK | NMP_F_RETSLOT))) {
        /* nothing before it: the push, pop or return at ip, or the call's push of the
         * return address */
        *out = v[i].mem;
        if (v[i].flags & NMP_F_RETSLOT)
            out->access = NMP_ACC_STORE;
    } else if (w->pj < 0 && w->sp >= 0) {
        /* no access but the stack's on the way back: a function's prologue after its
         * entry, the return from a call (what ran last was the callee's ret) */
        w->pj = w->sp;
        *out = v[w->at[w->pj]].mem;
        if (skid_to(w, out) == 0)
            out->rule = (uint8_t)path_rule(w);
    } else if (w->pj >= 0) {
        const struct nmp_insn *j = &v[w->at[w->pj]];
        if (j->flags & NMP_F_PAUSE) {
            out->rule = NMP_RULE_SPIN;
        } else if (!(j->flags & NMP_F_MEM)) {
            /* a divide or square root on registers after the last access: the core
             * was waiting on it, not on memory (Rodinia cfd's compute_flux: 899 samples
             * just past its divss, 148 from the load before it up to the divss) */
            out->rule = NMP_RULE_DIVIDE;
        } else {
            *out = j->mem;
            /* segment / vsib / undecodable: the nearest access is not computable;
             * otherwise steps are undone, overwritten registers rebuilt, else clobbered
             * (a gather's base register as any address register) */
            if (out->rule == NMP_RULE_AT_IP && skid_to(w, out) == 0)
                out->rule = (uint8_t)(out->guard && path_rule(w) == NMP_RULE_SKID
                                          ? NMP_RULE_SKID_PATH : path_rule(w));
            else if (out->rule == NMP_RULE_VSIB_BASE && skid_to(w, out) == 0)
                out->rule = NMP_RULE_VSIB_BASE;
        }
    }
    free(w);
    return 0;
}
