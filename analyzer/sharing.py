"""Cache lines written by one thread and accessed by another: true and false sharing,
found from the samples (docs/analyzer.md, "Sharing").

What perf c2c finds from HITM loads (Linux tools/perf/Documentation/perf-c2c.txt) and
NumaPerf (Zhou et al., ICS 2021, §3) predicts from every access, numaprof looks for in
its samples, for every backend: within a time window, a cache line of an object that two
threads accessed, and that was written within 100 ms of it (a store is sampled far less
often than the load before it: one need not fall in the same window).  When both touched the same bytes it is
true sharing (a shared counter or accumulator); when they touched different bytes of the
line, false sharing (neighbouring per-thread slots).  Either makes every write
invalidate the other thread's copy of the line — across sockets when the threads run on
different nodes.

Where no line is shared, the pages may be: threads that write different lines of one
page at the same time (per-thread chunks smaller than a page: `schedule(static, 16)` over
doubles) share no line, but the page lives on one node, so the threads of the other
nodes write it remotely whatever the placement (NumaPerf's page-level false sharing).

Sampling sees a fraction of the accesses: two samples of two threads in one line within
one window are strong evidence of heavy sharing (both accesses had to be frequent to be
sampled), while the absence of such samples does not prove there is none.  A finding
states what was seen (samples, lines, windows) so that a reader can judge it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from numaprof.analyzer import stream

LINE_SHIFT = 6  # 64-byte cache lines
WORD_SHIFT = 3  # "the same bytes": the same aligned 8-byte word
WINDOW_NS = 10_000_000  # accesses of two threads within 10 ms count as concurrent
MIN_WINDOWS = 2  # windows with a contended line before a finding is made
WRITE_WINDOWS = 10  # a write sampled this many windows (100 ms) away still counts
MIN_SHARE = 0.05  # of the object's samples on contended lines
PAGE_SHIFT = 12  # 4 KiB pages (page-level sharing)
MAX_SAMPLES = 1 << 18  # an object's samples beyond this: a uniform sub-sample of them
MIN_PAGES = 4  # contended pages before a page-level finding: an object of a few pages is
# always shared at the boundaries of the threads' parts, and lives in the caches


@dataclass
class SharingFinding:
    """One object's lines accessed by several threads with writes."""
    object: str
    kind: str  # true | false | page
    lines: int  # contended cache lines (page: the lines sampled on the contended pages)
    threads: int  # threads that accessed them
    samples: int  # samples on them
    writes: int  # of which writes (stores and read-modify-writes)
    windows: int  # time windows in which a line was accessed by several threads, one writing
    share: float  # of the object's samples
    sources: list[str] = field(default_factory=list)  # where the accesses are, most first
    thread_index: list[int] = field(default_factory=list)  # the threads (Analysis.threads)
    hitm: int = 0  # samples on the lines that hit a modified line in another cache
    pages: int = 0  # page: contended pages (several threads writing their own lines of each)
    # successive sampled accesses to one of its lines (time order): how many pairs there
    # are, and those by two threads with a write among them, as (thread, thread, count):
    # each of these moves the line between the threads' caches
    pairs: int = 0
    handoffs: list[tuple[int, int, int]] = field(default_factory=list)

    def cross_node(self, thread_node) -> int:
        """Of the handoffs, those between threads on different nodes (`thread_node`:
        node per thread index): each a transfer of the line across the interconnect."""
        return sum(n for a, b, n in self.handoffs
                   if a < len(thread_node) and b < len(thread_node)
                   and thread_node[a] != thread_node[b])

    @property
    def fix(self) -> str:
        """What to change, in words (suggest writes the padding where it can: docs/apply.md)."""
        if self.kind == "page":
            return ("the threads write different lines of the same pages, and a page lives on "
                    "one node: give each thread whole pages (chunks of at least "
                    "4 KiB per thread, e.g. a larger `schedule(static, C)` chunk, or each thread's "
                    "part aligned to 4 KiB), or a private copy per thread combined at the end")
        if self.kind == "true":
            return ("the threads update the same bytes: accumulate in a variable of each "
                    "thread (or an OpenMP reduction clause) and combine once at the end")
        return ("each thread writes its own bytes of a shared line: give each thread's slot a "
                "cache line of its own (pad it to 64 bytes, e.g. a struct with "
                "`__attribute__((aligned(64)))` / `alignas(64)`; an array's per-thread chunks: "
                "align it to 64 bytes and make the chunks whole lines), or accumulate in a local")


#: perf_mem_data_src.mem_snoop (bits 19-23) HITM: the load hit a line modified in another
#: core's cache (Linux include/uapi/linux/perf_event.h; what perf c2c counts)
SNOOP_HITM = 0x10 << 19
MIN_HITM = 2  # HITM samples on a line that alone make it contended


def unique_pairs(a, b, *, inverse: bool = False, counts: bool = False):
    """``np.unique(np.stack([a, b]), axis=1, ...)`` for non-negative integers, through one
    int64 key per pair: a sort of one column instead of the rows' lexicographic sort, ten
    times faster on millions of samples.  Returns the (2, k) pairs, then the inverse and
    the counts when asked."""
    a = np.asarray(a, dtype=np.int64).reshape(-1)
    b = np.asarray(b, dtype=np.int64).reshape(-1)
    m = int(b.max()) + 1 if len(b) else 1
    res = np.unique(a * m + b, return_inverse=inverse, return_counts=counts)
    keys = res[0] if inverse or counts else res
    out = [np.stack([keys // m, keys % m])]
    if inverse:
        out.append(res[1].reshape(-1))
    if counts:
        out.append(res[-1])
    return out[0] if len(out) == 1 else tuple(out)


def hitm(data_src: np.ndarray) -> np.ndarray:
    """Whether each sample's data source says HITM (0 or an NA data source: no)."""
    return (np.asarray(data_src, dtype=np.uint64) & np.uint64(SNOOP_HITM)) != 0


def object_sharing(name: str, addr: np.ndarray, tid: np.ndarray, time: np.ndarray,
                   write: np.ndarray, ip: np.ndarray, where=None,
                   hitm_loads: np.ndarray | None = None) -> SharingFinding | None:
    """The sharing finding of one object from its samples (addresses, thread index, time,
    whether each is a write, ip), or None when too little was seen.  ``where(ip)`` names
    an instruction's source line.  ``hitm_loads`` (per sample, from a data source):
    a line with MIN_HITM HITM loads, accessed by two threads, is contended whether or
    not a write was sampled near them (the HITM is the other thread's write)."""
    n = len(addr)
    if n < 2:
        return None
    if n > MAX_SAMPLES:
        # a uniform sub-sample (the same on every run): as recorded at a lower rate, the
        # counts of the finding scaled back
        keep = stream.uniform(np.arange(n, dtype=np.uint64)) < MAX_SAMPLES / n
        found = object_sharing(name, *(np.asarray(x)[keep] for x in (addr, tid, time, write, ip)), where,
                               None if hitm_loads is None else np.asarray(hitm_loads)[keep])
        if found is not None:
            scale = n / max(int(keep.sum()), 1)
            found.samples, found.writes = round(found.samples * scale), round(found.writes * scale)
        return found
    addr = np.asarray(addr, dtype=np.uint64)
    tid = np.asarray(tid, dtype=np.int64)
    write = np.asarray(write, dtype=bool)
    line = np.unique((addr >> np.uint64(LINE_SHIFT)), return_inverse=True)[1].reshape(-1)
    win = (np.asarray(time, dtype=np.int64) - int(np.min(time))) // WINDOW_NS
    # per (line, window): the threads that accessed it
    uniq, lw = unique_pairs(line, win, inverse=True)
    pairs = unique_pairs(lw, tid)
    multi = np.bincount(pairs[0], minlength=uniq.shape[1]) >= 2
    # ... and written within WRITE_WINDOWS of it (the software backend samples few of the
    # stores of a `slot[t] += x`: the write need not fall in the very same window)
    key = uniq[0] * (1 << 40) + uniq[1]
    wkey = np.unique(line[write] * (1 << 40) + win[write])
    written = np.zeros(len(key), dtype=bool)
    if len(wkey):
        j = np.searchsorted(wkey, key)
        for k in (j - 1, np.minimum(j, len(wkey) - 1)):
            near = wkey[np.clip(k, 0, len(wkey) - 1)]
            written |= (near // (1 << 40) == key // (1 << 40)) & (np.abs(near - key) <= WRITE_WINDOWS)
    hot = (multi & written)[lw]
    if hitm_loads is not None:
        hitm_loads = np.asarray(hitm_loads, dtype=bool)
        n_hitm = np.bincount(line[hitm_loads], minlength=int(line.max()) + 1)
        lt = unique_pairs(line, tid)
        threads_of = np.bincount(lt[0], minlength=len(n_hitm))
        hot |= ((n_hitm >= MIN_HITM) & (threads_of >= 2))[line]
    if not hot.any() or len(np.unique(win[hot])) < MIN_WINDOWS or hot.sum() < MIN_SHARE * n:
        return _page_sharing(name, addr, tid, win, write, ip, where)
    windows = len(np.unique(win[hot]))
    # on those lines, the same word touched by two threads in one window: true sharing
    word = np.unique(addr >> np.uint64(WORD_SHIFT), return_inverse=True)[1].reshape(-1)
    ww = unique_pairs(word[hot], win[hot], inverse=True)[1]
    wpairs = unique_pairs(ww, tid[hot])
    same_bytes = (np.bincount(wpairs[0], minlength=ww.max() + 1) >= 2)[ww]
    kind = "true" if same_bytes.sum() * 2 >= hot.sum() else "false"
    line = (addr >> np.uint64(LINE_SHIFT)).astype(np.int64)
    pairs, handoffs = _handoffs(line, tid, np.asarray(time, dtype=np.int64), write, hot)
    return SharingFinding(
        object=name, kind=kind, lines=len(np.unique(line[hot])),
        threads=len(np.unique(tid[hot])), samples=int(hot.sum()), writes=int(write[hot].sum()),
        windows=windows, share=float(hot.sum()) / n, sources=_sources(ip, hot, where),
        thread_index=[int(x) for x in np.unique(tid[hot])],
        hitm=int(hitm_loads[hot].sum()) if hitm_loads is not None else 0,
        pairs=pairs, handoffs=handoffs)


def _handoffs(line, tid, time, write, hot) -> tuple[int, list[tuple[int, int, int]]]:
    """Successive samples on one contended line, in time order: how many pairs, and the
    pairs of two threads with a write among them, counted per (earlier, later) thread."""
    idx = np.flatnonzero(hot)
    order = idx[np.lexsort((time[idx], line[idx]))]
    same = line[order][1:] == line[order][:-1]
    a, b = tid[order][:-1][same], tid[order][1:][same]
    moved = (a != b) & (write[order][:-1] | write[order][1:])[same]
    if not moved.any():
        return int(same.sum()), []
    keys, counts = unique_pairs(a[moved], b[moved], counts=True)
    return int(same.sum()), [(int(x), int(y), int(c)) for x, y, c in zip(keys[0], keys[1], counts, strict=True)]


def _sources(ip, hot: np.ndarray, where) -> list[str]:
    """The source lines of the samples ``hot``, most samples first (three at most)."""
    if where is None:
        return []
    ips, counts = np.unique(np.asarray(ip)[hot], return_counts=True)
    seen: dict[str, int] = {}
    for k in np.argsort(-counts, kind="stable"):
        s = where(int(ips[k]))
        if s:
            seen[s] = seen.get(s, 0) + int(counts[k])
    return [s for s, _ in sorted(seen.items(), key=lambda kv: -kv[1])][:3]


def _pairs(key: np.ndarray, tid: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per distinct ``key``: (the key, pairs of samples, pairs of samples of two threads)."""
    keys, inv, cnt = np.unique(key, return_inverse=True, return_counts=True)
    inv = inv.reshape(-1)
    total = cnt * (cnt - 1) // 2
    kt, kt_cnt = unique_pairs(inv, tid, counts=True)
    same = np.zeros(len(keys), dtype=np.int64)
    np.add.at(same, kt[0], kt_cnt * (kt_cnt - 1) // 2)
    return keys, total, total - same


MIN_PAIRS = 20  # sample pairs on one page from one instruction before a page-level finding
MIXED = 0.25  # of them, from two threads


def _page_sharing(name: str, addr: np.ndarray, tid: np.ndarray, win: np.ndarray,
                  write: np.ndarray, ip, where) -> SharingFinding | None:
    """Pages whose lines the threads share out among themselves (kind `page`), or lines
    so shared (`false` / `true`), seen over the whole run; or None.

    Sampled at about a thousand a second, two threads' samples seldom fall on one page
    (let alone one line) within a window, so this looks at the whole run: pairs of
    samples on one page taken by one statement that writes the object (one loop: an
    initialisation by one thread and a parallel loop after it are two; a loop that only
    reads it, a gather, is left out) are of two threads in a fourth of cases
    or more (threads taking chunks of under a page in turn: a half, with two; each thread
    a block of pages: only the boundaries), on at least MIN_PAGES pages, and two threads
    or more wrote the object.  That is the threads' ownership of the pages, not their
    timing: a page used by threads of several nodes is remote to some of them whatever
    the placement.  When pairs on one line (of one statement) are mostly of two
    threads too, the lines themselves are shared: false sharing (true when on one word)
    that the windows did not catch because each line is seldom sampled (chunks that do
    not start on a line share their boundary lines)."""
    n = len(addr)
    if len(np.unique(tid[write])) < 2:
        return None
    # the statement of each sample (its source line; the instruction where unknown), and
    # only the statements that write the object: a loop that reads it everywhere (a
    # gather) shares its pages among readers, which is no write sharing
    ips, ipa = np.unique(np.asarray(ip, dtype=np.uint64), return_inverse=True)
    ipa = ipa.reshape(-1)
    names = [(where(int(x)) if where is not None else None) or int(x) for x in ips.tolist()]
    stmt_of = {v: k for k, v in enumerate(dict.fromkeys(names))}
    stmt = np.array([stmt_of[v] for v in names], dtype=np.int64)[ipa]
    writing = np.isin(stmt, np.unique(stmt[write]))
    addr, tid, win, write, ip, stmt = (x[writing] for x in (addr, tid, win, write, np.asarray(ip), stmt))
    page = (addr >> np.uint64(PAGE_SHIFT)).astype(np.int64)
    keys, total, mixed = _pairs(page * (1 << 20) + stmt, tid)
    if total.sum() < MIN_PAIRS or mixed.sum() < MIXED * total.sum():
        return None
    shared_pages = np.unique(keys[mixed > 0] >> 20)
    if len(shared_pages) < MIN_PAGES:
        return None
    line = (addr >> np.uint64(LINE_SHIFT)).astype(np.int64)
    lkeys, ltotal, lmixed = _pairs(line * (1 << 20) + stmt, tid)
    kind, hot = "page", np.isin(page, shared_pages)
    if ltotal.sum() >= MIN_PAIRS // 4 and lmixed.sum() * 2 > ltotal.sum():
        word = (addr >> np.uint64(WORD_SHIFT)).astype(np.int64)
        _, _, wmixed = _pairs(word * (1 << 20) + stmt, tid)
        kind = "true" if wmixed.sum() * 2 >= lmixed.sum() else "false"
        hot = np.isin(line, np.unique(lkeys[lmixed > 0] >> 20))
    elif hot.sum() < MIN_SHARE * n:
        return None
    return SharingFinding(
        object=name, kind=kind, lines=len(np.unique(line[hot])),
        threads=len(np.unique(tid[hot])), samples=int(hot.sum()), writes=int(write[hot].sum()),
        windows=len(np.unique(win[hot])), share=float(hot.sum()) / n,
        sources=_sources(ip, hot, where), thread_index=[int(x) for x in np.unique(tid[hot])],
        pages=len(shared_pages) if kind == "page" else 0)
