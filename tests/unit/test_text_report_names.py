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


def test_the_table_fits_the_console_with_every_column(tmp_path):
    """A long name with an allocation count and a long site: the table stays within the
    160 columns of a file, the local column included (before, the name's count pushed
    the pages column to nothing, or the table past the edge, where it was cut off)."""
    acc = sa.access_regular(64, 2)
    rows_obj = replace(sa.obj("PowerMethod::m_rows[]", "regular", acc, serial=False, n_threads=2),
                       site="PowerMethod::assemble(unsigned long, int) [clone ._omp_fn.0]@rows.cpp:72",
                       count=1630208, attribution="allocation_sample")
    out = tmp_path / "r.txt"
    text_report.render(sa.analysis([rows_obj], sa.threads(2)), out=out)
    lines = out.read_text().splitlines()
    table = [ln for ln in lines if ln.startswith(("┏", "┃", "│", "└"))]
    assert table and max(len(ln) for ln in table) <= 160
    row = next(ln for ln in table if "m_rows" in ln)
    assert row.rstrip().endswith("│") and "100%" in row.split("│")[-2]  # the local column
    assert "~x1.6M" in row and "…assemble(…)@rows.cpp:72" in row and "clone" not in row


def test_count_words():
    assert [text_report.count_words(n) for n in (2, 9999, 10_000, 812_345, 1_630_208, 42_000_000)] == \
        ["2", "9999", "10k", "812k", "1.6M", "42M"]


def test_a_missing_pattern_says_why(tmp_path):
    """No pattern: `needs +N samples` when more samples would tell it, `serial only` when
    one thread at a time accessed the array (more samples would not change that), else
    `unknown`."""
    acc = sa.access_regular(64, 2)
    base = sa.obj("a", "unknown", acc, serial=True, n_threads=1)
    objs = [replace(base, name="few", samples_needed=12, features={"parallel_samples": 3.0}),
            replace(base, name="solo", samples_needed=0, features={"parallel_samples": 0.0}),
            replace(base, name="undecided", samples_needed=0, features={"parallel_samples": 80.0}),
            replace(base, name="known", pattern="regular", features={"parallel_samples": 80.0})]
    out = tmp_path / "r.txt"
    text_report.render(sa.analysis(objs, sa.threads(2)), out=out)
    rows = {ln.split("│")[1].strip(): ln for ln in out.read_text().splitlines()
            if ln.startswith("│") and ln.split("│")[1].strip() in ("few", "solo", "undecided", "known")}
    assert "needs +12 samples" in rows["few"], rows
    assert "serial only" in rows["solo"], rows
    assert "unknown" in rows["undecided"] and "serial only" not in rows["undecided"], rows
    assert "regular (0.90)" in rows["known"], rows


def test_shorten_drops_template_arguments_first_and_keeps_annotations():
    """A C++ type's template arguments go before its middle does (`Eigen::Matrix<double,
    -1, 1, 0, -1, 1>`, an Eigen vector named by its type, read `Eigen::Ma…-1, 1>`), and
    what numaprof adds to a name stays whole."""
    assert text_report.shorten("Eigen::Matrix<double, -1, 1, 0, -1, 1>", 26) == "Eigen::Matrix<…>"
    assert text_report.shorten(LONG, 32) == "ParticleSystem<…>::m_positions"
    got = text_report.shorten("a_rather_long_pointer_name (pointer)", 24)
    assert got.endswith(" (pointer)") and got.startswith("a_rat") and len(got) == 24
    assert text_report.shorten("grids[].energy", 32) == "grids[].energy"
    # what the memory is stays whole too: LULESH's spills were `(spil…olForElems`
    got = text_report.shorten("(spills) CalcHourglassControlForElems", 22)
    assert got.startswith("(spills) ") and got.endswith("ForElems") and len(got) == 22, got
    for text, width in [(LONG, 12), ("Eigen::Matrix<double, -1, 1, 0, -1, 1>", 10), ("x (descriptor)", 8)]:
        assert len(text_report.shorten(text, width)) <= width


def test_long_file_names_in_sites_keep_the_table_within_the_console(tmp_path):
    """Sites whose file name alone is longer than the site column (HPCG's
    `GenerateCoarseProblem(…)@GenerateCoarseProblem.cpp:52`) beside wide cells (a
    serial first touch, `needs +N samples`): the file name is shortened too, so every
    column, the local one included, stays within the 160 columns of a file."""
    acc = sa.access_regular(64, 2)
    sites = ("InitializeSparseCGData(SparseMatrix_STRUCT&, CGData_STRUCT&)@CGData.hpp:45",
             "GenerateCoarseProblem(SparseMatrix_STRUCT const&)@GenerateCoarseProblem.cpp:52",
             "GenerateProblem_ref(SparseMatrix_STRUCT&, Vector_STRUCT*)@GenerateProblem_ref.cpp:109")
    objs = [replace(sa.obj(name, "unknown", acc, serial=True, n_threads=1), site=site,
                    count=count, attribution="allocation_sample", samples_needed=103,
                    features={"parallel_samples": 3.0})
            for name, site, count in (("data.z.values", sites[0], 1),
                                      ("f2cOperator", sites[1], 16),
                                      ("SparseMatrix_STRUCT::matrixValues[]", sites[2], 37_000))]
    out = tmp_path / "r.txt"
    text_report.render(sa.analysis(objs, sa.threads(2)), out=out)
    table = [ln for ln in out.read_text().splitlines() if ln.startswith(("┏", "┃", "│", "└"))]
    assert table and max(len(ln) for ln in table) <= 160, "\n".join(table)
    for name, line in (("data.z.values", ":45"), ("f2cOperator", ".cpp:52"), ("rixValues[]", ".cpp:109")):
        row = next(ln for ln in table if name in ln)
        assert row.rstrip().endswith("│"), row
        cells = [c.strip() for c in row.split("│")]
        assert cells[2].endswith(line), cells  # the line number stays
        assert cells[-2], cells  # the local column is there


def test_fortran_procedures_are_shown_as_their_source_names_them():
    """gfortran's symbols in a Fortran site: a module procedure `__m_MOD_p` is `m::p`, an
    external procedure loses the trailing underscore, an OpenMP region its `._omp_fn.N`;
    a C function's underscore stays."""
    assert text_report.short_site("__mesh_mod_MOD_field_alloc@derived_fields.f90:15", 60) == \
        "mesh_mod::field_alloc@derived_fields.f90:15"
    assert text_report.short_site("build_field_@build_field.f90:34", 60) == "build_field@build_field.f90:34"
    assert text_report.short_site("__visc_MOD_visc_kernel._omp_fn.0@visc.F90:73", 60) == \
        "visc::visc_kernel@visc.F90:73"
    assert text_report.short_site("foo_@x.c:3", 60) == "foo_@x.c:3"
    assert text_report.short_site("main._omp_fn.0@app.c:3", 60) == "main._omp_fn.0@app.c:3"


def test_one_object_shown_says_where_the_code_accesses_it(tmp_path):
    """`report --object NAME`: the object's access sites under the table, Fortran
    procedures as their source names them, with shares of its samples; the JSON and the
    HTML carry them for every object."""
    rho = replace(sa.obj("rho", "regular", sa.access_regular(64, 2), serial=False, n_threads=2),
                  samples=200, access_sites=[("__hydro_MOD_sweep._omp_fn.0@hydro.f90:41", 150),
                                             ("__hydro_MOD_sweep._omp_fn.0@hydro.f90:44", 30)])
    u = replace(sa.obj("u", "regular", sa.access_regular(64, 2), serial=False, n_threads=2),
                access_sites=[("init@init.c:3", 5)])
    out = tmp_path / "r.txt"
    text_report.render(sa.analysis([rho], sa.threads(2)), out=out)
    text = out.read_text()
    assert "rho: accessed at hydro::sweep@hydro.f90:41 (75%), hydro::sweep@hydro.f90:44 (15%)" in text, text
    text_report.render(sa.analysis([rho, u], sa.threads(2)), out=out)
    assert "accessed at" not in out.read_text()  # the whole table: too many lines
    doc = json_report.report(sa.analysis([rho, u], sa.threads(2)))
    by = {o["name"]: o["access_sites"] for o in doc["objects"]}
    assert by == {"rho": [{"site": "__hydro_MOD_sweep._omp_fn.0@hydro.f90:41", "samples": 150},
                          {"site": "__hydro_MOD_sweep._omp_fn.0@hydro.f90:44", "samples": 30}],
                  "u": [{"site": "init@init.c:3", "samples": 5}]}
    from numaprof.cli.render import html_report

    page = html_report.render(sa.analysis([rho, u], sa.threads(2)))
    assert "accessed at __hydro_MOD_sweep._omp_fn.0@hydro.f90:41 (75%)" in page
    assert "accessed at init@init.c:3" in page
