"""The OpenMP runtime's work on its own state (docs/analyzer.md): samples of its code on
its barrier, loop-scheduling and lock counters, which are no object of the program's.
They are counted apart, as numaprof's own work is, and a finding says what cuts them."""

from __future__ import annotations

import os
import re

import numpy as np

from numaprof.analyzer import attribution as att
from numaprof.analyzer.objects import NO_STACK, PROT_EXEC, Obj, mapping_rows

#: The OpenMP runtimes' libraries (GCC's libgomp, LLVM's libomp, Intel's libiomp5), by
#: the file name of their mapping.
OPENMP_RUNTIME = re.compile(r"lib(gomp|omp|iomp5)(-[0-9a-f]+)?\.so(\.[0-9]+)*")


def code_mappings(mt: dict, keep) -> tuple[att.Intervals, list[str]] | None:
    """The code mappings of the files whose path ``keep`` accepts (all of their mappings
    when the profile has no protections) and those files' names; None when none is
    mapped."""
    prot = np.asarray(mt["prot"])
    known_prot = bool(prot.any())
    rows, names = [], []
    for i, path in enumerate(mt["path"]):
        if path and keep(str(path)) and (not known_prot or int(prot[i]) & PROT_EXEC):
            rows.append(i)
            names.append(os.path.basename(str(path)))
    if not rows:
        return None
    return mapping_rows(mt, np.asarray(rows)), sorted(set(names))


def is_openmp_runtime(path: str) -> bool:
    return OPENMP_RUNTIME.fullmatch(os.path.basename(path)) is not None


#: The share of the samples with an address from which the OpenMP runtime's work on its own
#: state is a finding (below it, a few barriers of any program).
RUNTIME_NOTE_SHARE = 0.01


def runtime_samples(mt: dict, frames: dict[int, list[int]], pid, ip, addr, time, layers, ivs: att.Intervals,
                     objs: list[Obj]):
    """(which samples are an OpenMP runtime's work on its own state, the runtimes' file
    names): the runtime's code (libgomp, libomp) accessing no object of the program's —
    an address in no object, in a whole mapping or thread stack that no allocation,
    static or variable of the program names, or in a block the runtime's code allocated
    (its allocation stack's first frame in the runtime: the shim sampled it).  (None, [])
    without a runtime or such a sample.  A user array the runtime touches (a reduction's
    target) stays the array's."""
    rt = code_mappings(mt, is_openmp_runtime)
    if rt is None or not len(addr):
        return None, []
    idx = np.flatnonzero(att.locate(pid, ip, time, rt[0]) >= 0)
    if not len(idx):
        return None, []
    iv = att.locate_layers(pid[idx], addr[idx], time[idx], layers)
    where = np.where(iv >= 0, ivs.obj[np.maximum(iv, 0)], -1) if len(ivs) else np.full(len(idx), -1)
    mine: dict[int, bool] = {}  # object → allocated by the runtime's code itself

    def runtimes_block(o: int) -> bool:
        if o not in mine:
            ob = objs[o]
            top = frames.get(ob.stack, [])[:1] if ob.kind == "heap" and ob.stack != NO_STACK else []
            # the allocating instruction in the runtime's code, mapped at any time before
            mine[o] = bool(top) and bool(att.locate(np.asarray([ob.pid], dtype=np.int64),
                                                    np.asarray(top, dtype=np.uint64),
                                                    np.asarray([att.NEVER - np.uint64(1)]), rt[0])[0] >= 0)
        return mine[o]

    theirs = np.array([o < 0 or objs[o].kind in ("mapping", "stack") or runtimes_block(o)
                       for o in where.tolist()], dtype=bool)
    if not theirs.any():
        return None, []
    mask = np.zeros(len(addr), dtype=bool)
    mask[idx[theirs]] = True
    return mask, rt[1]


def runtime_note(n: int, rmw: int, with_address: int, runtimes: list[str]) -> str:
    """The finding of the samples the OpenMP runtime spent on its own state."""
    share = n / max(with_address, 1)
    head = (f"{n} samples ({100.0 * share:.1f}% of those with an address) were the OpenMP runtime's "
            f"({', '.join(runtimes)}) work on its own state — barrier, loop-scheduling and lock "
            f"counters{f', {100.0 * rmw / n:.0f}% of them atomic read-modify-writes' if rmw else ''}")
    if share < RUNTIME_NOTE_SHARE:
        return f"{head}: left out of the objects and the traffic"
    return (f"{head}: the threads synchronise often (many short parallel loops, each ending in a "
            "barrier). Fewer, longer loops per parallel region — fused loops, `nowait` where the next "
            "loop does not need this one's results, larger chunks of a dynamic schedule — cut it. "
            "Left out of the objects and the traffic")
