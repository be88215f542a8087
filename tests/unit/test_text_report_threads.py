"""The text report of a run with many threads: a summary per node and the busiest threads,
not one row per thread; with few threads, every thread."""

import synth_analysis as sa

from numaprof.cli.render import text_report


def _render(tmp_path, n_threads):
    ths = sa.threads(n_threads, nodes=[i % 2 for i in range(n_threads)])
    for i, th in enumerate(ths):
        th.samples = 1000 + i  # the last ones are the busiest
    a = sa.analysis([sa.obj("u", "regular", sa.access_regular(64, 2), serial=False, n_threads=2)], ths)
    out = tmp_path / "r.txt"
    text_report.render(a, out=out)
    return out.read_text()


def test_many_threads_are_summarised_by_node(tmp_path):
    text = _render(tmp_path, 128)
    assert "threads by node (128 threads)" in text
    cells = [[c.strip() for c in ln.split("│")[1:-1]] for ln in text.splitlines() if ln.startswith("│")]
    listed = [c for c in cells if len(c) == 7 and c[1] == "app"]
    assert len(listed) == text_report.THREADS_SHOWN, listed
    assert listed[0][0] == "227"  # tid 100 + 127: the busiest first
    assert ["…", "112 more"] == [c for c in cells if c and c[0] == "…"][0][:2]
    # per node: 64 threads each, their samples summed
    node0 = sum(1000 + i for i in range(0, 128, 2))
    assert ["0", "64", str(node0)] in [c[:3] for c in cells if len(c) == 6]


def test_few_threads_are_all_listed(tmp_path):
    text = _render(tmp_path, 4)
    assert "threads by node" not in text
    assert all(f"│ {100 + i} " in text for i in range(4))
