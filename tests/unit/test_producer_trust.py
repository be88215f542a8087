"""The compile check of `suggest` runs a compiler with options taken from a profile (the
DW_AT_producer of an archived binary, a compile_commands.json found through its DWARF
compile directory): only options that shape a compile are passed on, never one that runs
a program, loads a plugin or writes a file (docs/security.md)."""

from __future__ import annotations

import json
import os

import pytest

from numaprof.analyzer.buildflags import parse_producer, recorded_binaries
from numaprof.errors import ProfileError
from numaprof.recommender.patch.compile import compile_database_entry

HOSTILE = [
    ("-wrapper", "sh,-c,touch${IFS}/tmp/x"),  # gcc runs every subcommand under it
    ("-B/tmp/evil",), ("-B", "/tmp/evil"),  # where gcc looks for cc1
    ("-specs=/tmp/evil.specs",), ("@/tmp/evil.rsp",),
    ("-fplugin=/tmp/evil.so",), ("-fplugin=evil",), ("-fpass-plugin=/tmp/p.so",),
    ("-Xclang", "-load"), ("-Xclang", "/tmp/evil.so"), ("-mllvm", "-x86-asm-syntax=intel"),
    ("-Wl,-rpath,/x",), ("-Wp,-MD,/tmp/dep",), ("-Wa,-adhln=/tmp/lst",),
    ("-include", "/dev/stdin"), ("-imacros", "/etc/shadow"),
    ("-fprofile-use=/x",), ("-fprofile-generate",), ("-fstack-usage",),
    ("-fdump-tree-all",), ("-fopt-info=/tmp/o",), ("-fsave-optimization-record",),
    ("-fcallgraph-info",), ("-fcrash-diagnostics-dir=/tmp",), ("-save-temps",),
    ("-o", "/home/u/.bashrc"), ("-MF", "/tmp/d"), ("--sysroot=/tmp/root",),
    ("-fuse-ld=/tmp/ld",), ("-Werror",), ("-fcolor-diagnostics",),
]


@pytest.mark.parametrize("words", HOSTILE, ids=lambda w: " ".join(w)[:30])
def test_no_hostile_option_reaches_the_compiler(words):
    for producer in (f"GNU C17 12.2.0 -O2 {' '.join(words)} -fopenmp",
                     f"clang version 16.0.6 /usr/bin/clang -O2 {' '.join(words)} -fopenmp"):
        flags = parse_producer(producer).flags
        assert not set(words) & set(flags), (producer, flags)
        assert "-O2" in flags and "-fopenmp" in flags  # the rest is still read


def test_the_options_a_compile_needs_are_kept():
    p = parse_producer("GNU C++17 13.1.0 -march=znver3 -mtune=generic -mavx2 -O3 -std=c++17 "
                       "-fopenmp -fPIC -fno-exceptions -fvisibility=hidden -DNDEBUG -D X=1 "
                       "-Iinc -isystem /opt/x/include -Wall -Wno-unused -pthread")
    assert p.flags == ("-march=znver3", "-mtune=generic", "-mavx2", "-O3", "-std=c++17",
                       "-fopenmp", "-fPIC", "-fno-exceptions", "-fvisibility=hidden",
                       "-DNDEBUG", "-D", "X=1", "-Iinc", "-isystem", "/opt/x/include", "-Wall",
                       "-Wno-unused", "-pthread")


def test_gfortran_module_output_becomes_a_search_directory():
    p = parse_producer("GNU Fortran2008 12.2.0 -O2 -J /home/u/.config -Jmods")
    assert p.flags == ("-O2", "-I", "/home/u/.config", "-Imods")


@pytest.mark.parametrize("version", ["x/../../../tmp/evil", "12;sh", "../12", ""])
def test_a_version_that_is_no_version_names_no_compiler(version):
    """find_compiler looks up gcc-<major>: a version with a slash would be a path to run."""
    assert parse_producer(f"GNU C11 {version} -O2").version == ""
    assert parse_producer(f"clang version {version} -O2").version == ""


def test_compile_database_in_a_directory_anyone_may_write_is_ignored(tmp_path):
    src = tmp_path / "app.c"
    src.write_text("int main(void) { return 0; }\n")
    shared = tmp_path / "shared"
    shared.mkdir()
    (shared / "compile_commands.json").write_text(json.dumps([
        {"directory": str(tmp_path), "file": str(src),
         "arguments": ["/tmp/evil-cc", "-O2", "-c", str(src)]}]))
    assert compile_database_entry(str(src), [str(shared)])[0] == "/tmp/evil-cc"
    os.chmod(shared, 0o1777)  # as /tmp is
    assert compile_database_entry(str(src), [str(shared)]) is None


@pytest.mark.parametrize("digest", ["../../elsewhere/bin", "/usr/bin/true", "x"])
def test_recorded_binaries_checks_archive_digests(tmp_path, digest):
    prof = tmp_path / "p"
    (prof / "archive").mkdir(parents=True)
    (prof / "archive.json").write_text(json.dumps({"binaries": {"/src/app": digest}}))
    with pytest.raises(ProfileError, match="archive.json: a digest is"):
        recorded_binaries(prof)


def test_recorded_binaries_skips_a_fifo_named_by_the_mappings(tmp_path):
    import profgen

    fifo = tmp_path / "fifo-binary"
    os.mkfifo(fifo)
    w = profgen.ProfileWriter(tmp_path / "p")
    w.table("mappings", time=[1], pid=[1], start=[0x400000], len=[0x1000], pgoff=[0],
            prot=[5], flags=[2], path=[str(fifo)])
    assert recorded_binaries(tmp_path / "p") == []
