"""Write synthetic numaprof profiles in exactly the on-disk format of docs/profile-format.md.

Two layers:

* :class:`ProfileWriter` writes a manifest, column files (16-byte header + values), string
  heaps and topology.json — used to build broken profiles for the loader tests too;
* :func:`synth_run` builds a whole run with known answers: N threads on given cpus of a
  multi-node topology, heap arrays accessed in phases (serial or parallel initialisation,
  regular / reversed / dynamic / random loops), first-touch faults and page nodes that
  follow a placement.  Everything is vectorised so ten million samples take seconds.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

# The format's dtypes and column writers are the package's own (one definition).
from numaprof import defaults  # noqa: E402
from numaprof.analyzer.format import FORMAT, VERSION  # noqa: E402
from numaprof.analyzer.writer import DTYPES, MAGIC, write_column, write_str_column  # noqa: E402,F401

SWEEPS = 20  # passes of a dynamic-schedule loop in one phase
PAGE = 4096


class ProfileWriter:
    """Builds a profile directory piece by piece."""

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)
        self.path.mkdir(parents=True, exist_ok=True, mode=0o700)

    def table(self, name: str, /, **columns) -> None:  # a column may be called "name"
        types = DTYPES.get(name, {})
        for col, values in columns.items():
            dtype = types.get(col)
            if dtype is None:
                dtype = np.asarray(values).dtype.str
            target = self.path / f"{name}.{col}.col"
            if dtype == "str":
                write_str_column(target, list(values))
            else:
                write_column(target, values, dtype)

    def manifest(self, **fields) -> dict:
        m = {
            "format": FORMAT, "version": VERSION, "numaprof_version": "0.1.0",
            "complete": True, "incomplete_reason": None,
            "command": ["./synthetic"], "argv": ["numaprof", "record", "./synthetic"],
            "cwd": str(self.path.parent), "env": {"OMP_NUM_THREADS": "4"},
            "start_time": "2026-11-22T05:00:00Z", "end_time": "2026-11-22T05:00:02Z",
            "exit_status": 0, "backend": "soft",
            "backend_reason": {"pebs": "no PEBS-capable PMU", "ibs": "no ibs_op PMU", "soft": "selected"},
            "sampling": {"freq": 4000, "event": "cpu-clock", "fault_event": "page-faults",
                         "alloc_threshold": defaults.ALLOC_THRESHOLD},
            # the row counts (samples, faults) are the tables' own: a caller that writes
            # tables passes them (a count limits what the reader accepts)
            "counts": {"lost": 0, "throttled": 0, "unresolved": 0},
        }
        m.update(fields)
        (self.path / "manifest.json").write_text(json.dumps(m, indent=1))
        return m

    def topology(self, nodes: list[list[int]], distances=None, memory_bytes: int = 8 << 30) -> None:
        n = len(nodes)
        if distances is None:
            distances = [[10 if i == j else 21 for j in range(n)] for i in range(n)]
        cpus = sum(len(c) for c in nodes)
        t = {"source": "hwloc 2.9.0 (synthetic)",
             "nodes": [{"id": i, "cpus": list(c), "memory_bytes": memory_bytes} for i, c in enumerate(nodes)],
             "distances": distances, "pus": cpus, "cores": cpus, "packages": n,
             "caches": [{"level": 3, "size": 32 << 20, "type": "unified"}], "page_size": PAGE}
        (self.path / "topology.json").write_text(json.dumps(t))


# --------------------------------------------------------------------------- synthetic runs

@dataclass
class Array:
    """A heap array and what the program does with it, phase after phase.

    ``phases`` items: "serial_init" (thread 0 writes it all: master-thread first touch),
    "parallel_init" (static blocks, each thread writes its own), "regular" (static
    partition), "reversed" (static partition, thread k gets the block of thread T-1-k),
    "shifted" (thread k gets block k+1), "alternating" (a forward and a backward loop,
    two instructions, taking turns faster than a time window), "rows" (a square
    column-major array whose rows are shared out: thread k owns the k-th band of rows of
    every column), "alternating_rows" (a loop over columns, static, and a loop over rows
    taking turns faster than a time window: an ADI solver's two sweeps), "dynamic" (chunks
    handed out in loop order to random threads),
    "random" (uniform gathers over the whole array), "serial" (thread 0 alone reads it all).
    """

    name: str
    size: int
    phases: list[str]
    mix: tuple[float, float, float] = (0.7, 0.2, 0.1)  # load, store, rmw shares of loop samples
    samples: int = 2000  # per loop phase
    addr: int = 0  # 0: assigned by synth_run
    stack: int = 0  # 0: assigned by synth_run
    alloc_ip: int = 0
    free_time: int = 0
    placement: str = "first_touch"  # first_touch | node<k> | interleave
    chunk_pages: int = 4  # dynamic chunk size
    located: bool = True  # False: no page_nodes rows (move_pages never answered for it)


@dataclass
class Run:
    path: Path
    tids: list[int]
    cpus: list[int]
    nodes_of_threads: list[int]
    arrays: list[Array]
    samples: int
    page_node: dict[str, np.ndarray] = field(default_factory=dict)  # array name → node per page
    first_toucher: dict[str, np.ndarray] = field(default_factory=dict)  # → thread index per page


def synth_run(
    path: str | os.PathLike,
    arrays: list[Array],
    *,
    nodes: list[list[int]] = ((0, 1), (2, 3)),
    thread_cpus: list[int] = (0, 1, 2, 3),
    distances=None,
    seed: int = 1,
    extra_samples: int = 0,
    weight: bool = False,
    pid: int = 4000,
    fault_period: int = 1,
    no_address_rules: tuple[int, ...] = (0,),
) -> Run:
    """Write a synthetic profile to ``path`` and return what it contains (the truth)."""
    rng = np.random.default_rng(seed)
    nodes = [list(c) for c in nodes]
    cpu_node = {c: i for i, cs in enumerate(nodes) for c in cs}
    T = len(thread_cpus)
    tids = [pid + k for k in range(T)]
    tnode = [cpu_node[c] for c in thread_cpus]
    w = ProfileWriter(path)
    w.topology(nodes, distances)
    t0 = 1_000_000_000
    phase_ns = 100_000_000
    cols: dict[str, list] = {k: [] for k in ("time", "tid", "cpu", "ip", "addr", "access")}
    wts: list[np.ndarray] = []
    faults: dict[str, list] = {k: [] for k in ("time", "tid", "cpu", "ip", "addr", "flags")}
    pn_page, pn_node = [], []
    obj = {k: [] for k in ("time", "free_time", "addr", "size", "stack", "tid")}
    frames = {k: [] for k in ("stack", "depth", "ip")}
    run = Run(Path(path), tids, list(thread_cpus), tnode, arrays, 0)
    base = 0x7F00_0000_0000
    for ai, a in enumerate(arrays):
        if not a.addr:
            a.addr = base
            base += (a.size + 2 * 1024 * 1024) & ~0xFFFFF
        if not a.stack:
            a.stack = ai + 1
        if not a.alloc_ip:
            a.alloc_ip = 0x401000 + 0x40 * ai
        npages = (a.size + PAGE - 1) // PAGE
        obj["time"].append(t0 - 1000 + ai)
        obj["free_time"].append(a.free_time)
        obj["addr"].append(a.addr)
        obj["size"].append(a.size)
        obj["stack"].append(a.stack)
        obj["tid"].append(tids[0])
        frames["stack"] += [a.stack, a.stack]
        frames["depth"] += [0, 1]
        frames["ip"] += [a.alloc_ip, 0x400800]
        toucher = np.zeros(npages, dtype=np.int64)
        touched = False
        t = t0
        for ph in a.phases:
            if ph in ("serial_init", "parallel_init"):
                if ph == "serial_init":
                    who = np.zeros(npages, dtype=np.int64)
                else:
                    who = np.minimum(np.arange(npages) * T // npages, T - 1)
                if not touched:
                    toucher = who
                    touched = True
                    faults["time"].append(t + np.arange(npages) * (phase_ns // max(npages, 1)))
                    faults["tid"].append(np.asarray(tids)[who])
                    faults["cpu"].append(np.asarray(thread_cpus)[who])
                    faults["ip"].append(np.full(npages, 0x402000 + 0x40 * ai + (0 if ph == "serial_init" else 0x10)))
                    faults["addr"].append(a.addr + np.arange(npages) * PAGE)
                    faults["flags"].append(np.full(npages, 3))
                # initialisation loops are sampled too: stores by the touching threads
                n = max(a.samples // 4, 1)
                off = np.sort(rng.integers(0, a.size // 8, n)) * 8
                thr = who[off // PAGE]
                _emit(cols, wts, rng, t, phase_ns, off, thr, tids, thread_cpus, a, (0, 1, 0), ai, weight)
            else:
                n = a.samples
                thr = rng.integers(0, T, n)
                tt = rng.random(n)  # position in the phase, 0..1
                elems = a.size // 8
                ip_sub = None
                if ph in ("regular", "reversed", "shifted", "alternating"):
                    if ph == "alternating":
                        # a forward loop (ip +0) and a backward loop (ip +8) take turns
                        # 5000 times per phase: faster than the sampling, as with a
                        # cache-resident array, so a thread's samples land at independent
                        # places of whichever block the current loop gives it
                        ip_sub = (np.floor(tt * 5000).astype(np.int64) % 2) * 8
                        blk = np.where(ip_sub == 0, thr, T - 1 - thr)
                    else:
                        blk = {"regular": thr, "reversed": T - 1 - thr, "shifted": (thr + 1) % T}[ph]
                    lo = blk * elems // T
                    hi = (blk + 1) * elems // T
                    # each thread sweeps its block twice during the phase (or once per turn)
                    pos = rng.random(n) if ph == "alternating" else (tt * 2) % 1.0
                    off = (lo + (pos * (hi - lo)).astype(np.int64)) * 8
                elif ph in ("rows", "alternating_rows"):
                    side = int(np.sqrt(elems))
                    assert side * side == elems, "rows phases need a square array of doubles"
                    band = (np.minimum(thr * side // T + (rng.random(n) * (side // T)).astype(np.int64), side - 1))
                    col = rng.integers(0, side, n)
                    off = (col * side + band) * 8  # column-major: element (band, col)
                    if ph == "alternating_rows":
                        ip_sub = (np.floor(tt * 5000).astype(np.int64) % 2) * 8
                        blocks = (thr * elems // T + (rng.random(n) * (elems // T)).astype(np.int64)) * 8
                        off = np.where(ip_sub == 0, blocks, off)
                elif ph == "dynamic":
                    # schedule(dynamic): chunks are handed out in loop order to whichever
                    # thread is free, so at any moment all threads work on neighbouring
                    # chunks and which thread gets which part changes all the time
                    # (the threads sample at the same time: in each round of T chunks
                    # each thread has one, which one drawn anew every round; the loop
                    # runs SWEEPS times in the phase, as a time step loop runs it)
                    cp = a.chunk_pages * PAGE // 8
                    nchunks = max(elems // cp, 1)
                    rounds = -(-nchunks // T) * SWEEPS
                    slot = np.argsort(rng.random((rounds, T)), axis=1)
                    rnd = np.minimum((tt * rounds).astype(np.int64), rounds - 1)
                    thr = rng.integers(0, T, n)
                    chunk = np.minimum((rnd * T) % (-(-nchunks // T) * T) + slot[rnd, thr], nchunks - 1)
                    off = (chunk * cp + rng.integers(0, cp, n)) * 8
                elif ph == "random":
                    off = rng.integers(0, elems, n) * 8
                elif ph == "serial":
                    thr = np.zeros(n, dtype=np.int64)
                    off = (tt * elems).astype(np.int64) * 8
                else:
                    raise ValueError(f"unknown phase {ph!r}")
                off = np.minimum(off, a.size - 8)
                order = np.argsort(tt, kind="stable")
                times_frac = tt[order]
                _emit(cols, wts, rng, t, phase_ns, off[order], thr[order], tids, thread_cpus, a, a.mix,
                      ai, weight, frac=times_frac, ip_add=None if ip_sub is None else ip_sub[order])
            t += phase_ns
        # where the pages live
        if a.placement == "first_touch":
            pnode = np.asarray(tnode)[toucher]
        elif a.placement == "interleave":
            pnode = np.arange(npages) % len(nodes)
        elif a.placement.startswith("node"):
            pnode = np.full(npages, int(a.placement[4:]))
        else:
            raise ValueError(a.placement)
        run.page_node[a.name] = pnode
        run.first_toucher[a.name] = toucher
        if a.located:
            pn_page.append(a.addr + np.arange(npages) * PAGE)
            pn_node.append(pnode)
    if extra_samples:
        # samples with addresses outside every object, and samples without an address
        n = extra_samples
        cols["time"].append(np.full(n, t0 + 5))
        cols["tid"].append(np.full(n, tids[0]))
        cols["cpu"].append(np.full(n, thread_cpus[0]))
        cols["ip"].append(np.full(n, 0x401234))
        cols["addr"].append(np.where(np.arange(n) % 2 == 0, 0x10, 0))
        cols["access"].append(np.where(np.arange(n) % 2 == 0, 1, 0))
        if weight:
            wts.append(np.full(n, 100))
    s = {k: np.concatenate(v) if v else np.zeros(0, dtype=np.int64) for k, v in cols.items()}
    order = np.argsort(s["time"], kind="stable")
    s = {k: v[order] for k, v in s.items()}
    n = len(s["time"])
    run.samples = n
    # the samples without an address take these rules in turn (0: no_mem)
    rule = np.where(s["addr"] != 0, 1, 0)
    none = np.flatnonzero(s["addr"] == 0)
    rule[none] = np.resize(np.asarray(no_address_rules), len(none))
    extra = {"weight": np.concatenate(wts)[order]} if weight else {}
    w.table("samples", time=s["time"], pid=np.full(n, pid), tid=s["tid"], cpu=s["cpu"], ip=s["ip"],
            addr=s["addr"], access=s["access"], size=np.full(n, 8), rule=rule, **extra)
    f = {k: np.concatenate(v) if v else np.zeros(0, dtype=np.int64) for k, v in faults.items()}
    if fault_period > 1:
        # as the kernel records with a sample period: every fault_period-th fault of each
        # thread, in time order
        o = np.lexsort((f["time"], f["tid"]))
        nth = np.arange(len(o)) - np.searchsorted(f["tid"][o], f["tid"][o])
        keep = np.sort(o[nth % fault_period == fault_period - 1])
        f = {k: v[keep] for k, v in f.items()}
    nf = len(f["time"])
    w.table("faults", time=f["time"], pid=np.full(nf, pid), tid=f["tid"], cpu=f["cpu"], ip=f["ip"],
            addr=f["addr"], flags=f["flags"], source=np.ones(nf))
    pp = np.concatenate(pn_page) if pn_page else np.zeros(0)
    w.table("page_nodes", time=np.full(len(pp), t0 + 10 * phase_ns), pid=np.full(len(pp), pid),
            page=pp, node=np.concatenate(pn_node) if pn_node else np.zeros(0))
    no = len(obj["time"])
    w.table("objects", time=obj["time"], free_time=obj["free_time"], pid=np.full(no, pid), tid=obj["tid"],
            addr=obj["addr"], size=obj["size"], kind=np.ones(no), stack=obj["stack"], prev=np.zeros(no))
    w.table("stack_frames", **frames)
    allc = ",".join(str(c) for cs in nodes for c in cs)
    per_thread = np.bincount(np.searchsorted(np.asarray(tids), s["tid"]), minlength=T) if n else np.zeros(T)
    w.table("threads", pid=np.full(T, pid), tid=tids, ppid=np.full(T, 1), start_time=np.full(T, t0 - 10_000),
            end_time=np.zeros(T), comm=["synthetic"] * T, affinity_first=[allc] * T, affinity_last=[allc] * T,
            samples=per_thread)
    w.table("mappings", time=[t0 - 100_000], pid=[pid], start=[0x400000], len=[0x10000], pgoff=[0],
            prot=[5], flags=[2], path=["/nonexistent/synthetic"])
    w.manifest(counts={"samples": n, "with_address": int((s["addr"] != 0).sum()), "lost": 0,
                       "throttled": 0, "unresolved": int((s["addr"] == 0).sum()), "faults": nf},
               env={"OMP_NUM_THREADS": str(T)},
               collector={"backend": "soft", "fault_period": fault_period})
    return run


def _emit(cols, wts, rng, t, phase_ns, off, thr, tids, thread_cpus, a, mix, ai, weight, frac=None, ip_add=None):
    n = len(off)
    if frac is None:
        frac = np.linspace(0, 1, n, endpoint=False)
    cols["time"].append(t + (frac * phase_ns).astype(np.int64))
    cols["tid"].append(np.asarray(tids)[thr])
    cols["cpu"].append(np.asarray(thread_cpus)[thr])
    cols["ip"].append(np.full(n, 0x403000 + 0x40 * ai) + (0 if ip_add is None else ip_add))
    cols["addr"].append(a.addr + off)
    p = np.asarray(mix, dtype=float)
    cols["access"].append(rng.choice([1, 2, 3], n, p=p / p.sum()))
    if weight:
        wts.append(rng.integers(50, 300, n))


def repeat_samples(path: str | os.PathLike, times: int) -> int:
    """Make the samples of the profile at ``path`` ``times`` times as many: the run played
    again ``times - 1`` times after itself (each copy's times shifted past the previous
    one's), a column at a time, so a profile larger than memory can be written.  The
    manifest's counts and the threads' samples follow.  Returns the rows written."""
    path = Path(path)
    cols = sorted(path.glob("samples.*.col"))
    t = np.memmap(path / "samples.time.col", dtype="<u8", mode="r", offset=16)
    span = int(t[-1]) - int(t[0]) + 1_000_000
    n = len(t)
    del t
    for col in cols:
        head = col.read_bytes()[:16]
        dtype = head[8:].rstrip(b"\0").decode()
        values = np.fromfile(col, dtype=dtype, offset=16)
        tmp = col.with_suffix(".tmp")
        with open(tmp, "wb") as f:
            f.write(head)
            for k in range(times):
                (values + np.asarray(k * span, dtype=dtype) if col.name == "samples.time.col" else values).tofile(f)
        os.replace(tmp, col)
    m = json.loads((path / "manifest.json").read_text())
    for key in ("samples", "with_address", "unresolved"):
        m["counts"][key] = int(m["counts"].get(key, 0)) * times
    (path / "manifest.json").write_text(json.dumps(m, indent=1))
    th = path / "threads.samples.col"
    if th.exists():
        write_column(th, np.fromfile(th, dtype="<u8", offset=16) * times, "<u8")
    return n * times
