"""Before/after comparison of two analyses (`report --diff BEFORE AFTER`); objects are
paired by name, site and allocation order across the change (cli/diff_match.py)."""

from __future__ import annotations

from rich.markup import escape as esc

from numaprof.analyzer.model import Analysis
from numaprof.cli.render.text_common import Table, console, pct


def pairs(before: Analysis, after: Analysis):
    """(name, before object, after object, how they were paired) for every object."""
    from numaprof.cli.diff_match import match

    out = []
    for p in match(before, after):
        b, a = p.before, p.after
        if b is None or a is None or a.name == b.name:
            name = (b or a).name
        else:
            name = f"{b.name} -> {a.name}"
        out.append((name, b, a, p.how))
    return out


def to_json(before: Analysis, after: Analysis) -> dict:
    def side(o):
        if o is None:
            return None
        return {"local_fraction": round(o.local_fraction, 4), "imbalance": round(o.imbalance, 3),
                "pages_by_node": [int(v) for v in o.pages_by_node], "pattern": o.pattern,
                "samples": int(o.samples)}

    return {
        "schema": "numaprof.diff/1",
        "before": {"path": before.profile.path, "local_fraction": round(before.local_fraction, 4),
                   "imbalance": round(before.imbalance, 3)},
        "after": {"path": after.profile.path, "local_fraction": round(after.local_fraction, 4),
                  "imbalance": round(after.imbalance, 3)},
        "objects": [{"name": n, "before_name": b.name if b else None,
                     "after_name": a.name if a else None, "paired_by": how or None,
                     "before": side(b), "after": side(a)}
                    for n, b, a, how in pairs(before, after)],
    }


def render(before: Analysis, after: Analysis) -> None:
    con = console()
    con.print(f"[bold]before[/bold] {esc(before.profile.path)}   [bold]after[/bold] {esc(after.profile.path)}")
    con.print(f"program: local {pct(before.local_fraction)} -> {pct(after.local_fraction)}, "
              f"node load max/mean {before.imbalance:.2f} -> {after.imbalance:.2f}")
    table = Table()
    for col in ("object", "local before", "local after", "imbalance", "pages by node",
                "pattern"):
        table.add_column(col)

    def pages(o):
        return " ".join(f"{i}:{v}" for i, v in enumerate(o.pages_by_node)) if o else "-"

    for name, b, a, _how in pairs(before, after):
        table.add_row(
            esc(name),
            pct(b.local_fraction) if b else "-",
            pct(a.local_fraction) if a else "-",
            f"{b.imbalance:.2f} -> {a.imbalance:.2f}" if a and b else "-",
            f"{pages(b)} -> {pages(a)}",
            f"{b.pattern if b else '-'} -> {a.pattern if a else '-'}",
        )
    con.print(table)
