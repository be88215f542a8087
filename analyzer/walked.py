"""Heap blocks found by reading an attached process's heap (analyzer/attach.py), named by
the code that accessed them (docs/analyzer.md, attach mode).

Such a block has no allocation site: ``heap@0x…``.  The sampled instructions say what it
is -- the pointer variable, or the type and member, an access went through (analyzer/
varattr.py's register and type attribution, as perf's data-type profiling names an
access).  When the code names one variable, the block takes its name and keeps its
samples and bounds.  When it names several, each with a share of the samples, the memory
held different arrays during the recording: a program that allocates its temporaries
every step gets the same addresses back from the allocator, while the walks at the
attach and at the end saw only one block there.  The samples then go to the variables
that named them, as samples on no object do; the block keeps those the code did not
name."""

from __future__ import annotations

import numpy as np

from numaprof.analyzer.objects import NO_STACK, Obj

#: A block takes the name of the variable its accesses went through when at least this
#: many samples and this share of those named by code agree on it.
CODE_NAME_MIN_SAMPLES = 3
CODE_NAME_MIN_SHARE = 0.5
#: ... unless another variable has this share of them too: then the memory held both
OTHER_NAME_SHARE = 0.2
BY_CODE = ("register", "type")


def walked_blocks(objs: list[Obj]) -> np.ndarray:
    """Per object (and one more entry for "no object"): a heap block known only by its
    address and size, no allocation site."""
    return np.array([o.kind == "heap" and o.stack == NO_STACK and not o.name for o in objs] + [False])


def settle(objs: list[Obj], idx: np.ndarray, was_obj: np.ndarray, was_iv: np.ndarray, a_obj: np.ndarray,
           a_iv: np.ndarray) -> None:
    """After the variables' attribution of the samples ``idx`` (on walked blocks
    ``was_obj``, intervals ``was_iv``; their objects now in ``a_obj``, ``a_iv``): a block
    the code names one variable gets its samples back, and that name; a block it names
    two or more, each for OTHER_NAME_SHARE of its named samples, keeps only the samples
    the code did not name."""
    now = a_obj[idx]
    named = np.array([n != w and objs[n].attribution in BY_CODE for n, w in zip(now.tolist(), was_obj.tolist(),
                                                                               strict=True)], dtype=bool)
    chosen: dict[int, Obj] = {}
    back = np.zeros(len(idx), dtype=bool)
    for oi in np.unique(was_obj).tolist():
        mine = was_obj == oi
        by_code = mine & named
        n = int(by_code.sum())
        counts = np.bincount(now[by_code], minlength=len(objs)) if n else np.zeros(1, dtype=np.int64)
        strong = np.flatnonzero(counts >= max(CODE_NAME_MIN_SAMPLES, OTHER_NAME_SHARE * n))
        best = int(np.argmax(counts))
        dominant = counts[best] >= max(CODE_NAME_MIN_SAMPLES, CODE_NAME_MIN_SHARE * n)
        if len(strong) >= 2 or (not dominant and np.count_nonzero(counts >= CODE_NAME_MIN_SAMPLES) >= 2):
            back |= mine & ~by_code  # reused memory: the named samples are their variables'
        elif dominant:
            chosen[oi] = objs[best]
            back |= mine
        else:
            back |= mine
    a_obj[idx[back]] = was_obj[back]
    a_iv[idx[back]] = was_iv[back]
    uses: dict[str, int] = {}
    for vo in chosen.values():
        uses[vo.name] = uses.get(vo.name, 0) + 1
    for oi, vo in chosen.items():
        # blocks read through one variable (a kernel's parameter, called on several
        # tables) would share its name: each keeps its address beside it (`xs@0x7f…`),
        # the same across the slices of one process so that they still merge
        o = objs[oi]
        o.name = vo.name if uses[vo.name] == 1 else f"{vo.name}@{o.address:#x}"
        o.site = f"{o.site}, read as {vo.name} in {vo.site}" if o.site else vo.site
        o.attribution = vo.attribution


def named_or_back(objs: list[Obj], idx: np.ndarray, was_obj: np.ndarray, was_iv: np.ndarray, a_obj: np.ndarray,
                  a_iv: np.ndarray) -> None:
    """After the variables' attribution of the samples ``idx`` (on objects ``was_obj``,
    intervals ``was_iv``, that the program's code does not own: a block a system library
    allocated): a sample the code names by register or type keeps that variable, any
    other goes back to where its address put it."""
    now = a_obj[idx]
    named = np.array([n != w and objs[n].attribution in BY_CODE for n, w in zip(now.tolist(), was_obj.tolist(),
                                                                               strict=True)], dtype=bool)
    back = ~named
    a_obj[idx[back]] = was_obj[back]
    a_iv[idx[back]] = was_iv[back]
