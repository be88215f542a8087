"""Self-contained HTML report: one file, plots embedded as PNG data, no external URL.

Plots (matplotlib, Agg backend): the global traffic heatmap, per hot object an
offset x time scatter coloured by thread (the picture of regular / irregular / random)
and its pages-by-node bars, and the topology's distance matrix.
"""

from __future__ import annotations

import base64
import html
import io

import numpy as np

from numaprof.analyzer.model import Analysis, ObjectResult, Topology
from numaprof.cli.render import clean
from numaprof.cli.render.text_common import human_bytes, pct

CSS = """
body{font-family:system-ui,sans-serif;margin:1.5em;color:#222;max-width:1200px}
h1{font-size:1.4em}h2{font-size:1.15em;border-bottom:1px solid #ccc;margin-top:1.6em}
table{border-collapse:collapse;margin:.5em 0}td,th{border:1px solid #ccc;padding:.2em .5em;
text-align:right}th{background:#f0f0f0}td.l,th.l{text-align:left}.note{color:#666}
.obj{display:flex;flex-wrap:wrap;gap:1em;align-items:flex-start}img{max-width:100%}
"""


def _h(text: str) -> str:
    """Text from a profile as HTML: control and bidirectional-override characters made
    visible (:func:`~numaprof.cli.render.clean`), then HTML-escaped."""
    return html.escape(clean(str(text), newlines=True))


def _label(text: str) -> str:
    """Text from a profile as a matplotlib label: cleaned, and ``$`` escaped so that it is
    not read as mathtext (an unbalanced ``$`` would be an error)."""
    return clean(str(text)).replace("$", r"\$")


def _png(fig) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=90, bbox_inches="tight")
    import matplotlib.pyplot as plt

    plt.close(fig)
    data = base64.b64encode(buf.getvalue()).decode("ascii")
    return f'<img alt="plot" src="data:image/png;base64,{data}">'


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _heatmap(matrix, title: str, fmt: str = "{:.0f}", cmap: str = "Blues") -> str:
    plt = _plt()
    m = np.asarray(matrix, dtype=float)
    n = m.shape[0]
    fig, ax = plt.subplots(figsize=(1.2 + 0.8 * n, 1.0 + 0.7 * n))
    im = ax.imshow(m, cmap=cmap)
    ax.set_xticks(range(n), [f"node {j}" for j in range(n)])
    ax.set_yticks(range(n), [f"node {i}" for i in range(n)])
    ax.set_xlabel("memory on")
    ax.set_ylabel("threads on")
    ax.set_title(title)
    for i in range(n):
        for j in range(n):
            ax.text(j, i, fmt.format(m[i, j]), ha="center", va="center",
                    color="white" if m[i, j] > m.max() / 2 else "black")
    fig.colorbar(im, ax=ax, shrink=0.8)
    return _png(fig)


def _scatter(o: ObjectResult, thread_names: list[str]) -> str:
    plt = _plt()
    fig, ax = plt.subplots(figsize=(6, 3.2))
    acc = o.access
    if acc is not None and len(acc.page) and getattr(acc, "time", None) is not None:
        t = (np.asarray(acc.time, dtype=float) - float(np.min(acc.time))) / 1e9
        threads = np.asarray(acc.thread)
        for k in np.unique(threads):
            sel = threads == k
            label = _label(thread_names[k]) if k < len(thread_names) else str(k)
            ax.scatter(t[sel], acc.page[sel], s=3, label=label, alpha=0.6)
        if len(np.unique(threads)) <= 12:
            ax.legend(fontsize=6, markerscale=3, loc="upper right")
    ax.set_xlabel("time (s)")
    ax.set_ylabel("page in array")
    ax.set_title(f"{_label(o.name)}: {o.pattern} accesses by thread")
    return _png(fig)


def _accessed_at(o: ObjectResult) -> str:
    """The source lines whose code accessed the object most, with their shares."""
    if not o.access_sites:
        return ""
    return "<p>accessed at " + ", ".join(
        f"{_h(site)} ({pct(n / o.samples) if o.samples else '-'})" for site, n in o.access_sites) + "</p>"


def _bars(o: ObjectResult) -> str:
    plt = _plt()
    fig, ax = plt.subplots(figsize=(3, 2.4))
    n = len(o.pages_by_node)
    ax.bar(range(n), o.pages_by_node, color="#4477aa")
    ax.set_xticks(range(n), [f"node {i}" for i in range(n)])
    ax.set_ylabel("pages")
    ax.set_title(f"{_label(o.name)}: pages by node")
    return _png(fig)


def _table(headers: list[str], rows: list[list[str]], left: int = 1) -> str:
    def cell(tag: str, i: int, v: str) -> str:
        cls = ' class="l"' if i < left else ""
        return f"<{tag}{cls}>{_h(str(v))}</{tag}>"

    head = "".join(cell("th", i, h) for i, h in enumerate(headers))
    body = "".join("<tr>" + "".join(cell("td", i, v) for i, v in enumerate(r)) + "</tr>"
                   for r in rows)
    return f"<table><tr>{head}</tr>{body}</table>"


def _topology(t: Topology) -> str:
    rows = [[f"node {n.id}", ",".join(map(str, n.cpus)), human_bytes(n.memory_bytes)]
            for n in t.nodes]
    out = _table(["node", "cpus", "memory"], rows, left=2)
    if t.n_nodes > 1:
        out += _heatmap(t.distances, "SLIT distances", cmap="Oranges")
    else:
        out += '<p class="note">one NUMA node: distance matrix [[10]]</p>'
    return out


def _suggestions(s) -> str:
    out = [f"<p>target <b>{_h(s.target_name)}</b>: {s.target.n_nodes} node(s)</p>"]
    out += [f'<p class="note">{_h(n)}</p>' for n in s.notes]
    for o in s.objects:
        verdict = "keep as is (first touch)" if o.policy == "first_touch" else o.policy
        out.append(f"<h3>{_h(o.name)}: {_h(verdict)}</h3>"
                   f"<p>{_h(o.reason)}</p>")
        out.append(_table(["policy", "predicted local", "max/mean load", "score"],
                          [[a.policy, pct(a.local_fraction), f"{a.imbalance:.2f}",
                            f"{a.score:.3f}"] for a in o.alternatives]))
        if o.patch:
            out.append(f'<pre class="patch">{_h(o.patch)}</pre>')
    if s.commands:
        out.append("<h3>to run</h3><pre>" + _h("\n".join(s.commands)) + "</pre>")
    return "".join(out)


def render(a: Analysis, suggestions=None, top: int = 10) -> str:
    """The whole report as one HTML string."""
    p = a.profile
    objects = a.objects[:top]
    header = _table(["", ""], [
        ["command", " ".join(p.command)],
        ["backend", f"{p.backend} ({'; '.join(f'{k}: {v}' for k, v in p.backend_reason.items())})"],
        ["samples", f"{p.samples}, {pct(p.address_coverage)} with a data address, "
                    f"{p.lost} lost, {p.unresolved} unresolved"],
        ["complete", "yes" if p.complete else f"no: {p.incomplete_reason}"],
        ["duration", f"{p.duration_s:.2f} s, exit status {p.exit_status}"],
    ], left=2)
    rows = []
    for o in objects:
        ft = o.first_touch
        rows.append([o.name, o.site, human_bytes(o.size), f"{o.samples} ({pct(o.share)})",
                     f"{o.pattern}{'?' if o.pattern_tentative else ''} ({o.pattern_confidence:.2f})",
                     f"{pct(o.reads)}/{pct(o.writes)}",
                     f"{ft.threads} thread(s), master {pct(ft.master_fraction)}",
                     " ".join(f"{i}:{v}" for i, v in enumerate(o.pages_by_node)),
                     pct(o.local_fraction)])
    hot = _table(["name", "site", "size", "samples", "pattern", "R/W", "first touch",
                  "pages by node", "local"], rows, left=2)
    names = [f"{t.comm or 'thread'} {t.tid}" for t in a.threads]
    per_object = "".join(
        f"<h3>{_h(o.name)}</h3><div class=\"obj\">{_scatter(o, names)}{_bars(o)}</div>{_accessed_at(o)}"
        for o in objects)
    parts = [
        "<!DOCTYPE html><html><head><meta charset=\"utf-8\">",
        f"<title>numaprof report: {_h(' '.join(p.command))}</title>",
        f"<style>{CSS}</style></head><body>",
        f"<h1>numaprof report</h1>{header}",
        f"<h2>Hot objects</h2>{hot}",
        "<h2>Traffic</h2>",
        _heatmap(a.traffic, f"traffic (samples), local {pct(a.local_fraction)}"),
        f"<h2>Objects</h2>{per_object}",
        f"<h2>Topology</h2>{_topology(a.topology)}",
    ]
    if a.node_counters:
        parts.append("<h2>Node counters</h2>" + _table(
            ["node", "DRAM GB/s", "of measured peak", "numa_hit", "numa_miss", "numa_foreign",
             "other_node"],
            [[str(c.node), "-" if c.bandwidth_gbs is None else f"{c.bandwidth_gbs:.2f}",
              pct(c.bandwidth_gbs / c.peak_gbs) if c.peak_gbs and c.bandwidth_gbs is not None
              else "-"]
             + [str(c.numastat.get(k, "-")) for k in ("numa_hit", "numa_miss", "numa_foreign",
                                                      "other_node")]
             for c in a.node_counters]))
    if a.sharing:
        parts.append("<h2>Sharing between threads</h2>" + _table(
            ["object", "sharing", "cache lines", "threads", "samples", "writes", "windows of 10 ms",
             "where", "fix"],
            [[_h(f.object), f"{f.kind} sharing",
              f"{f.lines} in {f.pages} pages" if f.kind == "page" else str(f.lines), str(f.threads),
              f"{f.samples} ({pct(f.share)})", str(f.writes), str(f.windows),
              _h(", ".join(f.sources)), _h(f.fix)] for f in a.sharing]))
    if suggestions is not None:
        parts.append(f"<h2>Suggestions</h2>{_suggestions(suggestions)}")
    if a.findings:
        parts.append("<h2>Findings</h2><ul>" + "".join(f"<li>{_h(f)}</li>"
                                                      for f in a.findings) + "</ul>")
    parts.append("</body></html>\n")
    return "".join(parts)
