"""Text rendering of an Analysis for the terminal (rich)."""

from __future__ import annotations

import io
import re
from pathlib import Path

from rich.console import Console
from rich.markup import escape as esc

from numaprof.analyzer.model import PLACING_POLICIES, Analysis
from numaprof.cli.render.text_common import Table, console, heatmap, human_bytes, pct

SOFT_NOTE = ("software backend: register sampling is biased toward long-latency (cache-missing) "
             "instructions, like a latency-weighted sample; stores are under-represented")


def _console(out: Path | None) -> Console:
    return console(io.StringIO() if out is not None else None)


#: objects with a smaller share of the samples are left out of the hot-objects table
#: (one sample of a library's data is noise, not a hot object) unless nothing else is there
MIN_SHARE = 0.005
# where an object's pages by node came from (ObjectResult.pages_source), in the table
PAGES_SHORT = {"numa_maps": "numa_maps", "move_pages_at_free": "free", "move_pages_at_exit": "exit",
               "move_pages": "sampled", "first_touch": "inferred"}


NAME_WIDTH = 32  # characters of a name in the objects table (the whole name: JSON, HTML)
SITE_WIDTH = 30


# what numaprof adds to a name: `p (pointer)`, `u (descriptor)`, `table (copies)`; and
# before it, what the memory is when no variable names it: `(spills) f`, `(temporary) …`
_ANNOTATION = re.compile(r" \((?:pointer|descriptor|copies)\)$")
_KIND = re.compile(r"^\((?:spills|temporary)\) ")
_INNER_TEMPLATE = re.compile(r"<(?!…>)(?:[^<>]|<…>)*>")


def shorten(text: str, width: int) -> str:
    """``text`` in at most ``width`` characters: a C++ name's template arguments left out
    first, innermost first (``Eigen::Matrix<double, -1, 1, 0, -1, 1>`` →
    ``Eigen::Matrix<…>``), then the middle (``…``), keeping the start and the leaf
    (``std::vector<dou…>::m_pos``); an annotation numaprof added (``vals (pointer)``)
    stays whole."""
    if len(text) <= width:
        return text
    note = _ANNOTATION.search(text)
    if note and width - len(note.group()) >= 6:
        return shorten(text[:note.start()], width - len(note.group())) + note.group()
    kind = _KIND.match(text)
    if kind and width - len(kind.group()) >= 6:
        return kind.group() + shorten(text[kind.end():], width - len(kind.group()))
    while len(text) > width and _INNER_TEMPLATE.search(text):
        text = _INNER_TEMPLATE.sub("<…>", text)
    if len(text) <= width:
        return text
    cut = max(text.rfind("::"), text.rfind("->"), text.rfind("."), text.rfind("%"))
    tail = len(text) - cut if 0 < cut and len(text) - cut <= width - 6 else (width - 1) * 2 // 3
    return text[:width - 1 - tail] + "…" + text[len(text) - tail:]


ACCESS_SITE_WIDTH = 60  # characters of an access site in `--object` (JSON has it whole)
_CLONE = re.compile(r" \[clone [^\]]*\]$")
# gfortran's symbols: a module procedure `__mesh_mod_MOD_field_alloc`, an OpenMP region
# outlined from one `…._omp_fn.0`, an external procedure `build_field_`
_FORTRAN_MODULE_PROC = re.compile(r"^__(\w+?)_MOD_(\w+)")
_OUTLINED = re.compile(r"\._omp_fn\.\d+$")
_FORTRAN_FILE = re.compile(r"\.(f|for|ftn|f77|f90|f95|f03|f08)$", re.I)


def count_words(n: int) -> str:
    """An allocation count in at most 5 characters: 812, 16k, 1.6M."""
    if n < 10_000:
        return str(n)
    if n < 1_000_000:
        return f"{n // 1000}k"
    return f"{n / 1e6:.1f}M" if n < 10_000_000 else f"{n // 1_000_000}M"


def short_site(site: str, width: int = SITE_WIDTH) -> str:
    """A site with its function shortened (its parameters first) and its ``@file:line``
    kept whole."""
    func, at, where = site.rpartition("@")
    if at and _FORTRAN_FILE.search(where.rsplit(":", 1)[0]):
        # a Fortran procedure as its source names it (`mesh_mod::field_alloc`,
        # `build_field`), an OpenMP region by the procedure it is in
        func = _OUTLINED.sub("", func)
        module = _FORTRAN_MODULE_PROC.match(func)
        func = f"{module.group(1)}::{module.group(2)}" if module else \
            func[:-1] if func.endswith("_") and func[:-1].isidentifier() else func
        site = f"{func}@{where}"
    if not at or len(site) <= width:
        return shorten(site, width)
    # a compiler's clone of the function (gcc's OpenMP region `f(int) [clone ._omp_fn.0]`):
    # the function and the line say where
    func = _CLONE.sub("", func)
    paren = func.find("(")
    if paren > 0 and func.endswith(")"):
        func = func[:paren] + "(…)"  # the parameters go first: the name tells the function
    # the function's own name before its classes and namespaces: `…assemble(…)`
    cut = func.rfind("::", 0, paren if paren > 0 else len(func))
    leaf = func[cut + 2:] if cut > 0 else func
    compact = len(leaf) + 1 if cut > 0 else len(func)
    if compact + len(where) + 1 > width:
        # a long file name too: its middle goes, its end and line stay (`Gener….cpp:52`),
        # the function keeps up to half the column
        where = shorten(where, max(8, width - 1 - max(8, min(compact, (width - 1) // 2))))
    w = max(8, width - len(where) - 1)
    if len(func) > w:
        func = "…" + leaf if len(leaf) + 1 <= w else shorten(func, w)
    return func + "@" + where


OBJECT_COLUMNS = ("name", "site", "size", "samples", "pattern", "R/W", "first touch",
                  "pages by node", "local")
PAGES_MIN = 12  # the pages-by-node column wraps, down to this width
TOUCH_MIN = 15  # ... and the first touch, down to `1 thread (100%)`
WRAPPING = {"pages by node": PAGES_MIN, "first touch": TOUCH_MIN}


def _object_row(o) -> list[str]:
    """The cells of one object (name and its count suffix apart, unshortened)."""
    ft = o.first_touch
    if ft.pages == 0:
        toucher = "-"
    elif ft.threads == 1 or ft.serial:
        toucher = f"1 thread ({pct(ft.master_fraction)})" + (" serial" if ft.serial else "")
    else:
        toucher = f"{ft.threads} threads"
    pages = " ".join(f"{i}:{v}" for i, v in enumerate(o.pages_by_node))
    if o.pages_source in PAGES_SHORT:
        pages += f" ({PAGES_SHORT[o.pages_source]})"
    if o.pages_policy in PLACING_POLICIES:
        pages += f" [{o.pages_policy}{', mixed' if o.pages_policy_mixed else ''}]"
    # size and count estimated (many small blocks), or size (an array carved out of a block)
    approx = "~" if o.attribution in ("allocation_sample", "carved") else ""
    count = (f" {approx}x{count_words(o.count)}" if o.count > 1 else "") + (
        " (private)" if o.thread_private else "") + (" (read-only)" if o.read_only else "")
    pattern = _pattern_cell(o)
    return [o.name, count, o.site, approx + human_bytes(o.size), f"{o.samples} ({pct(o.share)})",
            pattern, f"{pct(o.reads)}/{pct(o.writes)}", toucher, pages, pct(o.local_fraction)]


def _pattern_cell(o) -> str:
    """The pattern and its confidence (? when tentative); else why there is none: more
    samples would tell (how many), or only one thread at a time accessed the array (serial
    phases: its initialisation, a serial solver step), which more samples would not
    change."""
    if o.pattern != "unknown":
        # ?: random or irregular on too few samples to tell the two apart (the findings say
        # how many more)
        return f"{o.pattern}{'?' if o.pattern_tentative else ''} ({o.pattern_confidence:.2f})"
    if o.samples_needed:
        return f"needs +{o.samples_needed} samples"
    if o.samples and not float(o.features.get("parallel_samples", 0.0) or 0.0):
        return "serial only"
    return "unknown"


def _fit_name_and_site(rows: list[list[str]], width: int) -> tuple[int, int]:
    """Widths of the name and site columns (at most NAME_WIDTH and SITE_WIDTH) that keep
    the objects table within ``width`` columns: the other columns' cells are short and
    kept whole (the pages and the first touch wrap down to PAGES_MIN, TOUCH_MIN); name and site give up what is missing,
    the longer one first, down to 12 each."""
    fixed = sum(max([len(OBJECT_COLUMNS[k - 1])] + [len(r[k]) for r in rows])
                for k in (3, 4, 5, 6, 9)) + PAGES_MIN + 3 * len(OBJECT_COLUMNS) + 1
    fixed += min(TOUCH_MIN, max([len(OBJECT_COLUMNS[6])] + [len(r[7]) for r in rows]))
    name = min(NAME_WIDTH, max([4] + [len(r[0]) + len(r[1]) for r in rows]))
    site = min(SITE_WIDTH, max([4] + [len(r[2]) for r in rows]))
    while fixed + name + site > width and max(name, site) > 12:
        if name >= site:
            name -= 1
        else:
            site -= 1
    return name, site


def _table_width(widths: list[int]) -> int:
    """Columns of a rich table with these column widths (a space either side of each
    cell, a border between and around them)."""
    return sum(widths) + 3 * len(widths) + 1


def hot_objects(a: Analysis, top: int) -> tuple[list, int]:
    """The objects the table shows (at most ``top``, those with at least MIN_SHARE of the
    samples, or all of them when none has) and how many were left out for their share."""
    first = a.objects[:top]
    shown = [o for o in first if o.share >= MIN_SHARE] or first
    return shown, len(first) - len(shown)


def render(a: Analysis, top: int = 15, out: Path | None = None) -> None:
    con = _console(out)
    p = a.profile
    t = a.topology
    con.print(f"[bold]numaprof report[/bold]  {esc(p.path)}")
    # no exit status: a running process was attached to (record -p, or a slice)
    ended = f"exit {p.exit_status}" if p.exit_status is not None else "attached"
    con.print(f"command      {esc(' '.join(p.command))}   ({ended}, {p.duration_s:.2f} s)")
    if not p.complete:
        con.print(f"[yellow]incomplete profile: {esc(str(p.incomplete_reason))}[/yellow]")
    con.print(f"backend      {esc(p.backend)}")
    for k, v in p.backend_reason.items():
        if k != p.backend:
            con.print(f"  not {k}: {esc(v)}", overflow="ellipsis", no_wrap=True, soft_wrap=False)
    spin, divide = p.rules.get("spin", 0), p.rules.get("divide", 0)
    waits = " and ".join(w for w, n in (("spin-waiting", spin), ("on divides", divide)) if n)
    con.print(f"samples      {p.samples}  with a data address {p.with_address} "
              f"({pct(p.address_coverage)}"
              + (f" of those not {waits}" if waits else "") + f")  lost {p.lost}  "
              f"unresolved {p.unresolved}  outside any object {p.outside_objects}")
    if spin:
        con.print(f"spin-waiting {spin} samples ({pct(spin / p.samples)}) of threads busy-waiting "
                  "(OpenMP barriers, spin locks): load imbalance or more threads than cpus")
    if divide:
        con.print(f"on divides   {divide} samples ({pct(divide / p.samples)}) waiting on a divide "
                  "or square root after the last memory access: arithmetic, not memory")
    if p.backend == "soft":
        con.print(f"[dim]{SOFT_NOTE}[/dim]")
    dist = " | ".join(" ".join(str(int(v)) for v in row) for row in t.distances.tolist())
    fmax = float(t.numa_factor().max())
    con.print(f"topology     {t.n_nodes} node(s), cpus "
              + ", ".join(f"n{n.id}:{len(n.cpus)}" for n in t.nodes)
              + f"; distances {dist}; NUMA factor max {fmax:.2f}")
    con.print()

    shown, hidden = hot_objects(a, top)
    # thread-private stack arrays and a file's constants below the shared ones, apart:
    # placement never moves them
    apart = [o for o in shown if o.thread_private or o.read_only]
    shown = [o for o in shown if not (o.thread_private or o.read_only)] + apart
    rows = [_object_row(o) for o in shown]
    if len({o.pid for o in shown if o.kind in ("heap", "static")}) > 1:
        # several processes (mpirun under record): objects of the same name are each one's
        rows = [[name, count + (f" [pid {o.pid}]" if o.pid else ""), *rest]
                for o, (name, count, *rest) in zip(shown, rows, strict=True)]
    name_w, site_w = _fit_name_and_site(rows, con.width)
    cells = [[shorten(name, max(4, name_w - len(count))) + count, short_site(site, site_w), *rest]
             for name, count, site, *rest in rows]
    widths = [max([len(col)] + [len(r[k]) for r in cells]) for k, col in enumerate(OBJECT_COLUMNS)]
    # the wrapping columns get what the others leave (rich's own share-out of a table
    # wider than the console could leave it a column wider, and cut off the last one)
    touch, pages = OBJECT_COLUMNS.index("first touch"), OBJECT_COLUMNS.index("pages by node")
    widths[touch] = min(widths[touch], max(TOUCH_MIN, widths[touch] - max(0, _table_width(widths) - con.width)))
    widths[pages] = min(widths[pages], max(PAGES_MIN, widths[pages] - max(0, _table_width(widths) - con.width)))
    table = Table(title="hot objects", title_justify="left")
    for k, (col, just) in enumerate(zip(OBJECT_COLUMNS, ("left", "left", "right", "right", "left", "right",
                                                          "left", "left", "right"), strict=True)):
        table.add_column(col, justify=just, no_wrap=col not in WRAPPING, overflow="fold",
                         width=widths[k] if col in WRAPPING else None)
    for o, row in zip(shown, cells, strict=True):
        if apart and o is apart[0] and len(shown) > len(apart):
            table.add_section()
        table.add_row(*(esc(c) for c in row))
    con.print(table)
    if any(o.pages_source in PAGES_SHORT for o in shown):
        con.print("[dim]" + esc("pages by node, from the kernel: (numa_maps) at exit, (free) / "
                                "(exit) move_pages when the program released the object / at "
                                "exit, (sampled) move_pages of the sampled pages only; (inferred) "
                                "from the node of the cpu that first touched each page, which a "
                                "memory policy would make wrong; [policy] the kernel's memory "
                                "policy on the pages") + "[/dim]")
    if any(o.attribution == "allocation_sample" for o in shown):
        con.print("[dim]~: an array of many small allocations, found from a sample of them: its "
                  "size (the most bytes live at once) and allocation count are estimates[/dim]")
    if any(o.attribution == "carved" for o in shown):
        con.print("[dim]block (variable): one of the arrays carved out of one allocation, told "
                  "apart by the pointer variables the code read them through; its size is "
                  "estimated from the sampled offsets[/dim]")
    if any(o.read_only for o in apart):
        con.print("[dim](read-only): read-only data of a program or library file at no symbol (its .rodata, "
                  "read through an index: a table the compiler or the program put there): page-cache "
                  "pages, read from every core's caches; no placement moves them[/dim]")
    if any(o.thread_private for o in apart):
        con.print("[dim](private): thread-private, one instance (xN) per thread (its stack frame or thread-local storage); always "
                  "local to its thread, whatever the placement[/dim]")
    if hidden:
        con.print(f"[dim]+{hidden} object(s) with under {MIN_SHARE:.1%} of the samples each "
                  "(--object NAME or --format json shows them)[/dim]")
    if len(shown) == 1 and shown[0].access_sites:  # --object NAME: where the code reads it
        o = shown[0]
        con.print(f"  {esc(o.name)}: accessed at " + ", ".join(
            f"{esc(short_site(site, ACCESS_SITE_WIDTH))} ({pct(n / o.samples) if o.samples else '-'})"
            for site, n in o.access_sites))
    for o in shown:
        if len(o.phases) > 1:
            con.print(f"  {esc(o.name)}: phases " + ", ".join(
                f"{p_.pattern}{'' if p_.parallel else ' (serial)'} "
                f"{p_.start / 1e9:.2f}-{p_.end / 1e9:.2f}s" for p_ in o.phases))
    con.print()
    con.print(heatmap(a.traffic, f"traffic (samples), local {pct(a.local_fraction)}, "
                      f"node load imbalance {a.imbalance:.2f}"))
    con.print()
    if len(a.threads) > THREADS_SHOWN:
        con.print(_threads_by_node(a))
    threads = Table(title="threads" if len(a.threads) <= THREADS_SHOWN else
                    f"threads: the {THREADS_SHOWN} with most samples", title_justify="left")
    for col in ("tid", "comm", "samples", "nodes", "cpus", "migrations", "bound"):
        threads.add_column(col)
    busiest = sorted(a.threads, key=lambda th: -th.samples)[:THREADS_SHOWN]
    for th in (a.threads if len(a.threads) <= THREADS_SHOWN else busiest):
        threads.add_row(str(th.tid), esc(th.comm), str(th.samples),
                        ",".join(map(str, th.nodes)), ",".join(map(str, th.cpus[:16])),
                        str(th.migrations), "yes" if th.bound else ("no" if th.affinity else "?"))
    if len(a.threads) > THREADS_SHOWN:
        left = len(a.threads) - len(busiest)
        threads.add_row("…", f"{left} more", str(sum(th.samples for th in a.threads) -
                                                  sum(th.samples for th in busiest)),
                        "", "", "", "", style="dim")
    con.print(threads)
    if a.sharing:
        con.print(_sharing(a))
        for f in a.sharing:
            con.print(f"- {f.object}: {f.fix}", markup=False)
    if a.node_counters:
        con.print(_node_counters(a))
    for f in a.findings:
        con.print(f"- {f}", markup=False)
    if out is not None:
        from numaprof.cli.render import write_atomic

        write_atomic(out, con.file.getvalue())


THREADS_SHOWN = 16  # threads listed one per row; beyond, a summary per node and the busiest


def _threads_by_node(a: Analysis) -> Table:
    """Many threads (a 128-thread run): per node where they ran, how many, their samples,
    the cpus they used, how many moved between nodes and how many are bound."""
    t = Table(title=f"threads by node ({len(a.threads)} threads)", title_justify="left")
    for col, just in (("node", "left"), ("threads", "right"), ("samples", "right"),
                      ("cpus used", "right"), ("migrated", "right"), ("bound", "right")):
        t.add_column(col, justify=just)
    groups: dict[int, list] = {}
    for th in a.threads:
        groups.setdefault(th.node, []).append(th)
    for node in sorted(groups):
        ths = groups[node]
        t.add_row(str(node) if node >= 0 else "?", str(len(ths)), str(sum(th.samples for th in ths)),
                  str(len({c for th in ths for c in th.cpus})),
                  str(sum(1 for th in ths if th.migrations)), str(sum(1 for th in ths if th.bound)))
    return t


def _sharing(a: Analysis) -> Table:
    """Cache lines of an object written by one thread and accessed by another."""
    t = Table(title="sharing between threads (cache lines accessed by several threads, one "
                    "writing, within 10 ms; page: pages written by several threads, each on "
                    "lines of its own)", title_justify="left")
    for col, just in (("object", "left"), ("sharing", "left"), ("lines", "right"),
                      ("threads", "right"), ("samples", "right"), ("writes", "right"),
                      ("windows", "right"), ("where", "left")):
        t.add_column(col, justify=just)
    for f in a.sharing:
        lines = f"{f.lines} in {f.pages} pages" if f.kind == "page" else str(f.lines)
        t.add_row(esc(f.object), f"{f.kind} sharing", lines, str(f.threads),
                  f"{f.samples} ({pct(f.share)})" + (f", {f.hitm} HITM" if f.hitm else ""),
                  str(f.writes), str(f.windows), esc(", ".join(f.sources)))
    return t


def _node_counters(a: Analysis) -> Table:
    """Memory-controller bandwidth per node (hardware counters) and the kernel's numastat."""
    t = Table(title="node counters (numastat is machine-wide, in pages)", title_justify="left")
    hw = any(c.bandwidth_gbs is not None for c in a.node_counters)
    cols = ["node"] + (["DRAM GB/s", "of peak"] if hw else []) + [
        "numa_hit", "numa_miss", "numa_foreign", "other_node"]
    for col in cols:
        t.add_column(col, justify="left" if col == "node" else "right")
    for c in a.node_counters:
        row = [str(c.node)]
        if hw:
            row += ["-" if c.bandwidth_gbs is None else f"{c.bandwidth_gbs:.2f}",
                    pct(c.bandwidth_gbs / c.peak_gbs) if c.peak_gbs and c.bandwidth_gbs is not None
                    else "-"]
        row += [str(c.numastat.get(k, "-")) for k in ("numa_hit", "numa_miss", "numa_foreign",
                                                      "other_node")]
        t.add_row(*row)
    return t


def render_ranks(ranks: list[Analysis], combined: Analysis, top: int = 15) -> None:
    """Several profiles (MPI ranks): one line per rank, then the combined report."""
    con = console()
    table = Table(title="profiles (ranks, or slices of one run)", title_justify="left")
    for col in ("profile", "samples", "with address", "hot object", "local", "imbalance"):
        table.add_column(col)
    for a in ranks:
        hot = a.objects[0].name if a.objects else "-"
        table.add_row(esc(a.profile.path), str(a.profile.samples), pct(a.profile.address_coverage),
                      esc(hot), pct(a.local_fraction), f"{a.imbalance:.2f}")
    con.print(table)
    con.print("[bold]combined[/bold]")
    render(combined, top=top)
