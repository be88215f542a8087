"""Text rendering of the recommender's Suggestions: decision, reason, what-if table, lines."""

from __future__ import annotations

from rich.markup import escape as esc

from numaprof.analyzer.model import Analysis
from numaprof.cli.render.text_common import Table, console, pct


def render(s, analysis: Analysis, top: int | None = None) -> None:
    con = console()
    t = s.target
    con.print(f"[bold]numaprof suggest[/bold]  target {esc(s.target_name)}: {t.n_nodes} node(s), "
              f"NUMA factor max {float(t.numa_factor().max()):.2f}")
    for note in s.notes:
        con.print(f"[dim]{esc(note)}[/dim]")
    objects = s.objects[:top] if top else s.objects
    if not objects:
        con.print("no hot objects with enough samples to decide on")
    for o in objects:
        verdict = "keep as is (first touch)" if o.policy == "first_touch" else o.policy
        con.print()
        con.print(f"[bold]{esc(o.name)}[/bold]: {verdict}  "
                  f"(predicted local {pct(o.predicted.local_fraction)}, "
                  f"node load max/mean {o.predicted.imbalance:.2f})")
        con.print(f"  {o.reason}", markup=False)
        table = Table(title_justify="left", show_edge=False, pad_edge=False)
        for col, just in (("policy", "left"), ("local", "right"), ("max/mean load", "right"),
                          ("score", "right")):
            table.add_column(col, justify=just)
        for a in o.alternatives:
            mark = "[bold]" if a.policy == o.policy else ""
            end = "[/bold]" if mark else ""
            label = a.policy + (f" ({a.copies} copies)" if a.copies > 1 else "")
            table.add_row(f"{mark}{esc(label)}{end}", pct(a.local_fraction),
                          f"{a.imbalance:.2f}", f"{a.score:.3f}")
        con.print(table)
        if o.patch:
            for line in o.patch.splitlines():
                con.print(line, markup=False, highlight=False)
    for f in getattr(s, "sharing_fixes", []):
        con.print()
        what = {"true": "reduced", "page": "whole pages per chunk"}.get(f.kind, "padded")
        con.print(f"[bold]{esc(f.object)}[/bold]: {f.kind} sharing, "
                  + (what if f.patch else "to fix by hand"))
        con.print(f"  {f.reason}", markup=False)
        if f.patch:
            for line in f.patch.splitlines():
                con.print(line, markup=False, highlight=False)
    if s.commands:
        con.print()
        con.print("[bold]to run[/bold]")
        for c in s.commands:
            con.print(f"  {c}", markup=False)
