"""A function's static arrays are named as the source wrote them (gcc's symbol table says
`u1.1`; the DWARF variable at the symbol's address says `u1`), with the function in the
site; file-scope statics keep theirs (tests/progs/static_locals.c)."""

from __future__ import annotations

import shutil
import subprocess

import pytest
from helpers import PROGS

from numaprof.analyzer import objects, staticvars, symbols


def _build(tmp_path):
    if shutil.which("gcc") is None:
        pytest.skip("gcc not installed")
    exe = tmp_path / "static_locals"
    subprocess.run(["gcc", "-g", "-O2", "-fopenmp", "-o", str(exe), str(PROGS / "static_locals.c")],
                   check=True, capture_output=True)
    return exe


def _names(exe) -> dict[str, tuple[str, str]]:
    """(name, site) of every static of `exe`, as static_intervals and then name_object
    (for an object with samples) give them."""
    info = symbols.elf_info(str(exe))
    assert info is not None
    mappings = symbols.Mappings({"pid": [1], "start": [0x400000], "len": [1 << 30], "pgoff": [0],
                                 "path": [str(exe)], "time": [0], "flags": [0]})
    objs: list[objects.Obj] = []
    objects.static_intervals(mappings, objs, symbols.EMPTY)
    for o in objs:
        objects.name_object(o, None, None)
    return {o.key[2]: (o.name, o.site) for o in objs}


def test_static_locals_get_their_source_names(tmp_path):
    exe = _build(tmp_path)
    names = _names(exe)
    by_name = {name: (sym, site) for sym, (name, site) in names.items()}
    for var, function in (("u0", "main"), ("u1", "main"), ("coef", "coefficients")):
        assert var in by_name, names
        sym, site = by_name[var]
        assert sym != var, sym  # the symbol table's name is not the source's ...
        assert site == f"in {function} .bss@{exe.name}", site  # ... the function is in the site
    # a file-scope static: its own symbol name, its section as the site
    assert by_name["grid"] == ("grid", f".bss@{exe.name}"), names


def test_without_dwarf_the_symbol_name_stays(tmp_path):
    exe = _build(tmp_path)
    stripped = tmp_path / "stripped"
    subprocess.run(["objcopy", "--strip-debug", str(exe), str(stripped)], check=True, capture_output=True)
    names = _names(stripped)
    dotted = [sym for sym in names if sym.startswith(("u0.", "u1.", "coef."))]
    assert len(dotted) == 3, names
    for sym in dotted:
        assert names[sym][0] == sym, names[sym]  # nothing guessed from the spelling


def test_a_pointer_held_in_a_static_local_is_named_by_its_source_name(tmp_path):
    exe = _build(tmp_path)
    info = symbols.elf_info(str(exe))
    sym = next(s for s in info.objects if s.name.startswith("u1."))
    assert staticvars.display_name(sym.name, info, sym.address) == "u1"
    assert staticvars.display_name(sym.name) == sym.name  # without the file: as written
