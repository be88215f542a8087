"""Small formatting helpers shared by the text renderers."""

from __future__ import annotations

import numpy as np
from rich import table as rich_table
from rich.console import Console
from rich.text import Text

from numaprof.cli.render import clean
from numaprof.units import human_bytes  # noqa: F401  (the renderers import it from here)


class SafeConsole(Console):
    """A rich Console that shows the text it prints, never lets a terminal act on it:
    every str printed goes through :func:`~numaprof.cli.render.clean` (escape sequences,
    carriage returns and newlines inside a field become visible escapes).  Emoji codes
    (``:smile:``) are not replaced.  Renderers still escape markup (``rich.markup.escape``)
    in what comes from a profile."""

    def print(self, *objects, **kwargs) -> None:
        super().print(*(clean(o) if isinstance(o, str) else o for o in objects), **kwargs)


class Table(rich_table.Table):
    """A rich Table whose title and str cells are cleaned like :class:`SafeConsole` text."""

    def __init__(self, *headers, title=None, **kwargs):
        super().__init__(*headers, title=clean(title) if isinstance(title, str) else title,
                         **kwargs)

    def add_row(self, *cells, **kwargs) -> None:
        super().add_row(*(clean(c) if isinstance(c, str) else c for c in cells), **kwargs)


def console(file=None) -> Console:
    """A console for reports: the terminal's width, or 160 columns when piped to a file."""
    con = SafeConsole(file=file, highlight=False, emoji=False)
    if not con.is_terminal:
        con = SafeConsole(file=file, highlight=False, emoji=False, width=160)
    return con


def pct(x: float) -> str:
    return f"{100.0 * x:.0f}%"


def heatmap(matrix, title: str, row_label: str = "threads on", col_label: str = "memory on"):
    """A node x node table whose cells are shaded by their share of the total."""
    m = np.asarray(matrix, dtype=float)
    total = m.sum()
    table = Table(title=title, title_justify="left", show_lines=False)
    table.add_column(f"{row_label} \\ {col_label}", justify="right")
    for j in range(m.shape[1] if m.ndim == 2 else 0):
        table.add_column(f"node {j}", justify="right")
    for i in range(m.shape[0] if m.ndim == 2 else 0):
        cells = []
        for j in range(m.shape[1]):
            share = m[i, j] / total if total > 0 else 0.0
            shade = int(40 + 180 * share)
            style = f"on rgb({shade // 3},{shade // 3},{shade})" if share > 0 else ""
            label = f"{m[i, j]:.0f} ({100 * share:.0f}%)"
            cells.append(Text(label, style=("bold " if i == j else "") + style))
        table.add_row(f"node {i}", *cells)
    return table
