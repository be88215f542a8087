"""Text from a profile is shown, never obeyed (docs/security.md): control characters are
made visible in every text view and on stderr, HTML is escaped, JSON stays faithful;
report files are private (0600) like the profile they come from."""

from __future__ import annotations

import json
import os
import shutil
import stat

import numpy as np
import profgen
import pytest
from helpers import ROOT

from numaprof.analyzer import analyze

SEEDS = ROOT / "tests" / "data" / "fuzz-seed"  # small profiles


@pytest.fixture
def prof(tmp_path):
    p = tmp_path / "prof"
    shutil.copytree(SEEDS / "recorded", p)
    return p


def _manifest(p, **changes):
    m = json.loads((p / "manifest.json").read_text())
    m.update(changes)
    (p / "manifest.json").write_text(json.dumps(m))


def test_clean_shows_control_characters():
    from numaprof.cli.render import clean

    assert clean("a\x1b[2Jb") == "a\\x1b[2Jb"
    assert clean("x\x1b]0;t\x07") == "x\\x1b]0;t\\x07"
    assert clean("c\x9bd\u202ee\ud800") == "c\\x9bd\\u202ee\\ud800"
    assert clean("one\ntwo\tthree") == "one\\x0atwo\tthree"
    assert clean("one\ntwo", newlines=True) == "one\ntwo"
    assert clean("plain ünïcode → ok") == "plain ünïcode → ok"


def test_every_text_view_escapes_profile_strings(prof, capsys):
    from numaprof.cli.render import text_diff, text_report, text_suggest, text_topology
    from numaprof.recommender import suggest
    from numaprof.recommender.targets import resolve_target

    esc = "\x1b]0;owned\x07\x1b[2J"
    _manifest(prof, command=[f"./app{esc}"], backend=f"soft{esc}",
              backend_reason={"pebs": esc}, complete=False, incomplete_reason=esc,
              warnings=[f"w{esc}"])
    for name in ("threads.comm.heap",):
        (prof / name).write_bytes((esc + "\0").encode() * 2)
    profgen.write_column(prof / "threads.comm.col", np.zeros(2, dtype="<u8"), "<u8")
    a = analyze(prof)
    text_report.render(a)
    s = suggest(a, resolve_target("2s", a.topology))
    text_suggest.render(s, a)
    text_diff.render(a, a)
    text_topology.render(a.topology)
    out = capsys.readouterr()
    assert "\x1b" not in out.out + out.err and "\x07" not in out.out
    assert out.out.count("\\x1b]0;owned\\x07\\x1b[2J") >= 5


def test_html_report_escapes_profile_strings(prof):
    from numaprof.cli.render import html_report

    _manifest(prof, command=["<script>alert(1)</script>\x1b[2J", "$x$ $"])
    page = html_report.render(analyze(prof))
    assert "<script>alert" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;\\x1b[2J" in page


def test_names_with_dollar_signs_are_plotted(prof):
    """matplotlib reads $...$ as mathtext: an object or thread name with an unbalanced $
    must not make the HTML report fail."""
    from numaprof.cli.render import html_report

    (prof / "threads.comm.heap").write_bytes(b"a$b\\frac{$\0" * 2)
    profgen.write_column(prof / "threads.comm.col", np.zeros(2, dtype="<u8"), "<u8")
    assert "<html>" in html_report.render(analyze(prof))


def test_error_line_is_one_clean_line(prof, capsys):
    from numaprof.cli.main import main

    (prof / "topology.json").write_text(json.dumps({"nodes": [{"id": "\x1b[2J\nx"}]}))
    with pytest.raises(SystemExit) as e:
        main(["report", str(prof)])
    err = capsys.readouterr().err
    assert e.value.code == 2
    assert err.count("\n") == 1 and "\x1b" not in err and err.startswith("numaprof: ")


def test_write_atomic_creates_private_files(tmp_path):
    from numaprof.cli.render import write_atomic

    old = os.umask(0)
    try:
        write_atomic(tmp_path / "r.html", "<html>")
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "r.html").stat().st_mode) == 0o600


