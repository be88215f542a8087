"""Source hashes from DWARF (recommender/sources.py): what `--apply` checks against."""

from __future__ import annotations

import hashlib
import json
import stat
import subprocess
from pathlib import Path

import pytest

from numaprof.errors import ProfileError
from numaprof.recommender import sources
from numaprof.recommender.sources import (
    HashCache,
    dwarf_source_files,
    hash_sources,
    read_sources_json,
    write_sources_json,
)

MAIN_C = """\
#include <stdio.h>
#include "inc/util.h"
int main(void) { printf("%d\\n", twice(21)); return 0; }
"""
UTIL_H = "static inline int twice(int x) { return 2 * x; }\n"


@pytest.fixture(params=["-gdwarf-5", "-gdwarf-4"])
def program(tmp_path, request) -> tuple[Path, Path, Path]:
    """A program built from a relative path, so the DWARF names need the comp dir."""
    src = tmp_path / "src"
    (src / "inc").mkdir(parents=True)
    (src / "main.c").write_text(MAIN_C)
    (src / "inc" / "util.h").write_text(UTIL_H)
    exe = tmp_path / "prog"
    subprocess.run(["gcc", request.param, "-O0", "-o", exe, "main.c"], cwd=src, check=True)
    return exe, src / "main.c", src / "inc" / "util.h"


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_hashes_cover_the_user_sources_and_no_system_headers(program):
    exe, main_c, util_h = program
    assert str(main_c) in dwarf_source_files(exe)
    hashes = hash_sources([exe])
    assert hashes == {str(main_c): sha(main_c), str(util_h): sha(util_h)}


def test_a_cache_filled_before_the_run_gives_the_hashes_after_it(program, monkeypatch):
    """`record` hashes while the program runs; a source edited meanwhile is hashed again,
    an unchanged one is not read again."""
    exe, main_c, util_h = program
    cache = HashCache()
    before = hash_sources([exe], cache)
    assert before == hash_sources([exe])
    reads = []
    real_sha = sources.sha256_file
    monkeypatch.setattr(sources, "sha256_file", lambda p: reads.append(str(p)) or real_sha(p))
    util_h.write_text(UTIL_H.replace("2 * x", "x + x"))  # an edit during the run
    after = hash_sources([exe], cache)
    assert after == {str(main_c): sha(main_c), str(util_h): sha(util_h)}
    assert after[str(util_h)] != before[str(util_h)]
    assert reads == [str(util_h)]  # main.c did not change: its hash came from the cache
    util_h.unlink()
    assert hash_sources([exe], cache) == {str(main_c): sha(main_c)}


def test_missing_deleted_and_non_elf_files_give_nothing(program, tmp_path):
    exe, main_c, util_h = program
    util_h.unlink()
    assert hash_sources([exe]) == {str(main_c): sha(main_c)}
    assert hash_sources([tmp_path / "nope"]) == {}
    script = tmp_path / "run.sh"
    script.write_text("#!/bin/sh\n")
    assert hash_sources([script]) == {}


def test_stripped_binary_gives_nothing(program, tmp_path):
    exe, _, _ = program
    stripped = tmp_path / "stripped"
    subprocess.run(["strip", "-o", stripped, exe], check=True)
    assert hash_sources([stripped]) == {}


def test_sources_json_round_trip_and_permissions(program, tmp_path):
    exe, main_c, _ = program
    prof = tmp_path / "numaprof.data"
    prof.mkdir()
    written = write_sources_json(prof, [exe])
    assert stat.S_IMODE((prof / "sources.json").stat().st_mode) == 0o600
    assert read_sources_json(prof) == written and str(main_c) in written


def test_read_sources_json_refuses_missing_and_foreign(tmp_path):
    with pytest.raises(ProfileError, match="no sources.json"):
        read_sources_json(tmp_path)
    (tmp_path / "sources.json").write_text(json.dumps({"schema": "other/9", "files": {}}))
    with pytest.raises(ProfileError, match="not a numaprof.sources/1"):
        read_sources_json(tmp_path)
    (tmp_path / "sources.json").write_text("{truncated")
    with pytest.raises(ProfileError, match="sources.json: corrupted"):
        read_sources_json(tmp_path)


def test_a_fifo_named_as_a_source_is_refused_not_waited_on(tmp_path):
    """A path from a profile's sources.json may be anything: hashing or parsing it for a
    patch must not block on a FIFO (os.mkfifo) or read a device."""
    import errno
    import os

    import pytest

    from numaprof.recommender.patch.source import load
    from numaprof.recommender.sources import sha256_file

    fifo = tmp_path / "trap.c"
    os.mkfifo(fifo)
    with pytest.raises(OSError) as e:
        sha256_file(fifo)
    assert e.value.errno == errno.EINVAL
    refused = load(str(fifo))
    assert "FIFO" in refused.reason
    with pytest.raises(OSError):
        sha256_file("/dev/zero")


def test_fortran_module_procedure_of_a_module_named_something_mod(tmp_path):
    """gfortran spells a module procedure ``__<module>_MOD_<name>``, names in lower case and
    the separator in upper: a module called ``mesh_mod`` (a common convention) gives
    ``__mesh_mod_MOD_field_alloc``, whose procedure is ``field_alloc``, not
    ``mod_field_alloc``; its file is found by that definition."""
    from numaprof.recommender.patch.sites import fortran_symbol_names, resolve_source

    assert "field_alloc" in fortran_symbol_names("__mesh_mod_MOD_field_alloc")
    assert "mod_field_alloc" not in fortran_symbol_names("__mesh_mod_MOD_field_alloc")
    assert "sweep" in fortran_symbol_names("__grid_MOD_sweep")
    src = tmp_path / "dt.f90"
    src.write_text("module mesh_mod\ncontains\n  subroutine field_alloc(a)\n"
                   "    real(8), allocatable :: a(:)\n    allocate(a(10))\n"
                   "  end subroutine field_alloc\nend module mesh_mod\n")
    assert resolve_source("dt.f90", [str(src)], "__mesh_mod_MOD_field_alloc") == str(src)
    assert resolve_source("dt.f90", [str(src)], "__mesh_mod_MOD_other") is None
