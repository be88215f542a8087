"""The text report's objects table with the long names real C++ codes have: shortened in
the middle (the leaf kept), one line per object, the whole name left to JSON."""

from dataclasses import replace

import synth_analysis as sa

from numaprof.cli.render import json_report, text_report

LONG = "ParticleSystem<double, 3ul, std::allocator<double> >::m_positions"
SITE = ("ParticleSystem<double, 3ul, std::allocator<double> >::allocate(unsigned long, "
        "double const*)@particles.cpp:120")


def _analysis():
    acc = sa.access_regular(64, 2)
    long_obj = replace(sa.obj(LONG, "regular", acc, serial=False, n_threads=2), site=SITE)
    short_obj = sa.obj("rho", "regular", sa.access_regular(64, 2), serial=False, n_threads=2)
    return sa.analysis([long_obj, short_obj], sa.threads(2))


def test_long_names_are_shortened_keeping_the_leaf_and_one_line_per_object(tmp_path):
    out = tmp_path / "r.txt"
    text_report.render(_analysis(), out=out)
    text = out.read_text()
    rows = [ln for ln in text.splitlines() if "m_positions" in ln]
    assert len(rows) == 1, text  # not folded over several lines
    assert "ParticleSystem<" in rows[0] and "…" in rows[0]
    assert "@particles.cpp:120" in rows[0]  # the site keeps its file and line
    assert LONG not in text
    assert any("rho" in ln for ln in text.splitlines())


def test_json_keeps_the_whole_name():
    doc = json_report.report(_analysis())
    assert {o["name"] for o in doc["objects"]} >= {LONG}
    assert any(o["site"] == SITE for o in doc["objects"])
