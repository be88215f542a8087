"""Text rendering of a Topology."""

from __future__ import annotations

from rich.markup import escape as esc

from numaprof.analyzer.model import Topology
from numaprof.cli.render.text_common import Table, console, human_bytes


def render(t: Topology, measurement=None) -> None:
    con = console()
    label = f" ({t.name})" if t.name else ""
    con.print(f"[bold]{t.n_nodes} NUMA node(s){esc(label)}[/bold], source {esc(t.source)}")
    nodes = Table(title_justify="left")
    for col in ("node", "cpus", "memory"):
        nodes.add_column(col)
    for n in t.nodes:
        nodes.add_row(str(n.id), _cpulist(n.cpus), human_bytes(n.memory_bytes))
    con.print(nodes)
    matrices = [("distances (SLIT)", t.distances, "{:.0f}"),
                ("NUMA factor" + (" (measured latency ratio)" if measurement is not None
                                  else " (SLIT ratio)"), t.numa_factor(), "{:.2f}")]
    if measurement is not None:
        matrices += [("measured latency (ns)", measurement.latency_ns, "{:.0f}"),
                     ("measured bandwidth (GB/s)", measurement.bandwidth_gbs, "{:.1f}")]
    for title, m, fmt in matrices:
        table = Table(title=title, title_justify="left")
        table.add_column("from \\ to")
        for n in t.nodes:
            table.add_column(f"node {n.id}", justify="right")
        for i, n in enumerate(t.nodes):
            table.add_row(f"node {n.id}", *(fmt.format(v) for v in m[i]))
        con.print(table)


def _cpulist(cpus) -> str:
    cpus = sorted(cpus)
    out, i = [], 0
    while i < len(cpus):
        j = i
        while j + 1 < len(cpus) and cpus[j + 1] == cpus[j] + 1:
            j += 1
        out.append(str(cpus[i]) if i == j else f"{cpus[i]}-{cpus[j]}")
        i = j + 1
    return ",".join(out) or "-"
