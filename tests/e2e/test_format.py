"""The profile format has one definition (collector/include/numaprof_format.h): the
collector's tables are generated from it and the Python reader reads it.  These tests
make a disagreement impossible to miss: the header as Python parses it equals what the
built collector reports (`numaprof-collect --schema`), every column a real recording
writes is in it with its type, and the parser refuses a header it does not understand."""

from __future__ import annotations

import json
import subprocess

import pytest
from helpers import EXAMPLES, ROOT, compile_openmp, run_numaprof

from numaprof import defaults, paths
from numaprof.analyzer import core
from numaprof.analyzer import format as fmt


def test_the_collector_was_built_from_the_definition_python_reads():
    out = subprocess.run([str(paths.collector()), "--schema"], capture_output=True, text=True,
                         check=True, timeout=30).stdout
    built = json.loads(out)
    assert (built["format"], built["version"], built["magic"]) == (
        fmt.FORMAT, fmt.VERSION, fmt.MAGIC.decode())
    assert list(built["tables"]) == list(fmt.SCHEMA)
    for table, cols in built["tables"].items():
        assert [(c, (d, req, is_str)) for c, d, req, is_str in cols] == \
            list(fmt.SCHEMA[table].items()), table
    # the sample rules: the collector's enum and the analyzer's names, from one list
    assert built["rules"] == {name: value for value, name in core.RULE_NAMES.items()}


def test_every_column_a_recording_writes_is_defined_with_its_type(examples_built, tmp_path):
    prof = tmp_path / "p"
    run_numaprof("record", "-o", prof, "--", EXAMPLES / "gather", "16", "4",
                 env={"OMP_NUM_THREADS": "2"}, check=True)
    written = sorted(prof.glob("*.col"))
    assert written
    tables = set()
    for path in written:
        table, column = path.name.removesuffix(".col").split(".", 1)
        tables.add(table)
        assert column in fmt.SCHEMA.get(table, {}), f"{path.name} is not in the format"
        head = path.read_bytes()[:fmt.HEADER]
        assert head[:8] == fmt.MAGIC
        dtype, _required, is_str = fmt.SCHEMA[table][column]
        assert head[8:].rstrip(b"\0").decode() == dtype, path.name
        assert (prof / f"{table}.{column}.heap").exists() == is_str, path.name
    for table in tables:  # every required column of a written table is there
        for column, (_d, required, _s) in fmt.SCHEMA[table].items():
            if required:
                assert (prof / f"{table}.{column}.col").exists(), f"{table}.{column}"
    assert {"samples", "faults", "mappings", "threads", "objects"} <= tables
    rules = json.loads((prof / "collector.json").read_text())["rules"]
    assert list(rules) == list(core.RULE_NAMES.values())
    # the defaults the collector was compiled with are the ones Python reads
    sampling = json.loads((prof / "manifest.json").read_text())["sampling"]
    assert sampling["freq"] == defaults.FREQ
    assert sampling["alloc_threshold"] == defaults.ALLOC_THRESHOLD


def test_initialisation_faults_are_written_as_runs(examples_built, tmp_path):
    """collector/src/faultruns.c: the master thread's loop first-touching three 64 MiB
    arrays is a few rows of the faults table, not one per recorded fault; every recorded
    fault is still counted, and each array's 16384 pages are first-touched by it."""
    from numaprof.analyzer.firsttouch import fault_count
    from numaprof.analyzer.profile import open_profile

    prof = tmp_path / "p"
    run_numaprof("record", "-o", prof, "--", EXAMPLES / "serial_init", "64", "2",
                 env={"OMP_NUM_THREADS": "2"}, check=True)
    ft = open_profile(prof).table("faults")
    recorded = json.loads((prof / "manifest.json").read_text())["counts"]["faults"]
    assert fault_count(ft) == recorded > 1000
    assert len(ft["time"]) < recorded / 20, (len(ft["time"]), recorded)
    doc = json.loads(run_numaprof("report", prof, "--format", "json", check=True).stdout)
    for name in ("a", "b", "c"):
        o = next(o for o in doc["objects"] if o["name"] == name)
        assert o["first_touch"]["pages"] == 16384 and o["first_touch"]["serial"], o["first_touch"]


HEADER = (fmt.header_path()).read_text()


@pytest.mark.parametrize("edit, why", [
    (("COL(samples, rule, U8, OPT)", "COL(samples, rule, U9, OPT)"), "bad column"),
    (("COL(samples, rule, U8, OPT)", "COL(faults, rule, U8, OPT)"), "bad column"),
    (("COL(samples, rule, U8, OPT)", "COL(samples, rule, U8, MAYBE)"), "unexpected line"),
    (("    T(stack_frames) \\\n", ""), "NMP_TABLES lists"),
    (('#define NMP_COL_MAGIC "NMPCOL01"', '#define NMP_COL_MAGIC "NMP"'), "8 characters"),
    (("#define NMP_PROFILE_VERSION 1", ""), "missing or bad define"),
])
def test_the_parser_refuses_a_header_outside_its_grammar(edit, why):
    old, new = edit
    assert old in HEADER
    with pytest.raises(fmt.FormatDefinitionError, match=why):
        fmt.parse(HEADER.replace(old, new))


def test_the_parser_reads_every_table_and_column_of_the_header():
    _f, _v, _m, _h, schema = fmt.parse(HEADER)
    n_cols = HEADER.count("    COL(")
    assert sum(len(c) for c in schema.values()) == n_cols
    assert len(schema) == HEADER.count("    T(")


@pytest.mark.parametrize("edit, why", [
    (("    R(SPIN, spin, 16)", "    R(SPIN, spin, 15)"), "repeats"),
    (("    R(SPIN, spin, 16)", "    R(SPIN, skid, 16)"), "repeats"),
    (("    R(SPIN, spin, 16)", "    R(SPIN, spin, 256)"), "outside the u8"),
    (("    R(SPIN, spin, 16)", "    R(SPIN, spin)"), "unexpected line"),
    (("#define NMP_SAMPLE_RULES(R)", "#define NMP_RULES(R)"), "no NMP_SAMPLE_RULES"),
])
def test_the_rule_list_is_refused_outside_its_grammar(edit, why):
    old, new = edit
    assert old in HEADER
    with pytest.raises(fmt.FormatDefinitionError, match=why):
        fmt._rule_names(HEADER.replace(old, new))


def test_scattered_faults_on_the_same_pages_are_repeats(tmp_path):
    """collector/src/faultruns.c: bench/alloc_heavy allocates and frees scattered blocks
    whose pages malloc trims and grows back, so its threads fault the same few pages
    again and again.  The repeats of a page in a window are one row of the faults table
    (stride 0), every recorded fault still counted; the blocks' site still has both
    threads as its first touchers."""
    import numpy as np

    from numaprof.analyzer.firsttouch import fault_count
    from numaprof.analyzer.profile import open_profile

    exe = tmp_path / "alloc_heavy"
    compile_openmp(ROOT / "bench" / "alloc_heavy.c", exe)
    prof = tmp_path / "p"
    run_numaprof("record", "-o", prof, "--", exe, "40000000", env={"OMP_NUM_THREADS": "2"}, check=True)
    ft = open_profile(prof).table("faults")
    recorded = json.loads((prof / "manifest.json").read_text())["counts"]["faults"]
    assert fault_count(ft) == recorded > 2000
    repeats = (np.asarray(ft["stride"]) == 0) & (np.asarray(ft["run"]) > 1)
    assert repeats.any() and len(ft["time"]) < recorded / 4, (len(ft["time"]), int(repeats.sum()), recorded)
    doc = json.loads(run_numaprof("report", prof, "--format", "json", check=True).stdout)
    site = max((o for o in doc["objects"] if o["kind"] == "heap"), key=lambda o: o["samples"])
    assert site["count"] > 1000 and site["first_touch"]["threads"] == 2, site
