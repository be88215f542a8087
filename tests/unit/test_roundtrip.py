"""Round trip of the profile format: every table written from C, read in Python field by field.

collector/tests/test_roundtrip.c writes each table of docs/profile-format.md with the
values below (byte patterns, maxima of every width, negative node ids, empty / long /
non-ASCII strings).  Each column is read twice: by the minimal reader here (header dtype,
np.memmap at offset 16, strings from the .heap), which checks the documented layout
itself, and by the analyzer's read_table, which the rest of numaprof uses.  The topology
files written through hwloc are read back with the analyzer's two topology loaders.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from helpers import ROOT

try:
    from numaprof.analyzer.profile import read_table
    from numaprof.analyzer.topology import load_hwloc_xml, load_topology_json
except ImportError:  # plain `pytest` from elsewhere: use the checkout
    sys.path.insert(0, str(ROOT))
    from numaprof.analyzer.profile import read_table
    from numaprof.analyzer.topology import load_hwloc_xml, load_topology_json

M8, M4, M2, M1 = 2**64 - 1, 2**32 - 1, 2**16 - 1, 2**8 - 1
LONG_PATH = "/" + "a" * 2999

# table -> column -> (documented dtype, values); "str" columns hold text
EXPECTED: dict[str, dict[str, tuple[str, list]]] = {
    "samples": {
        "time": ("<u8", [1, M8, 0x0102030405060708]),
        "pid": ("<u4", [2, M4, 0x01020304]),
        "tid": ("<u4", [3, M4, 0x05060708]),
        "cpu": ("<u2", [4, M2, 0x0102]),
        "ip": ("<u8", [0x401000, M8, 0x1122334455667788]),
        "addr": ("<u8", [0x7FFD0000, M8, 0x8877665544332211]),
        "access": ("|u1", [1, 3, 2]),
        "size": ("|u1", [8, M1, 64]),
        "rule": ("|u1", [1, 15, 2]),
        "weight": ("<u4", [30, M4, 0x01020304]),
        "data_src": ("<u8", [0x68100142, M8, 0x0807060504030201]),
        "phys_addr": ("<u8", [0x1234000, M8, 0xDEADBEEFCAFEF00D]),
        "sp": ("<u8", [0x7FFD0010, M8, 0x0102030405060708]),
        "bp": ("<u8", [0x7FFD0040, M8, 0x1020304050607080]),
        "bp_sp": ("<i4", [0x30, -(2**31), 2**31 - 1]),
        "insn_off": ("<i2", [0, -(2**15), 2**15 - 1]),
        "base_reg": ("|u1", [8, M1, 16]),
        "index_reg": ("|u1", [1, M1, 0]),
        "base_off": ("<i4", [-16, -(2**31), 2**31 - 1]),
    },
    "faults": {
        "time": ("<u8", [10, M8]),
        "pid": ("<u4", [11, M4]),
        "tid": ("<u4", [12, M4]),
        "cpu": ("<u2", [1, M2]),
        "ip": ("<u8", [0x401234, M8]),
        "addr": ("<u8", [0x7F0000001000, M8]),
        "flags": ("|u1", [3, M1]),
        "source": ("|u1", [1, 2]),
        "page_size": ("<u4", [4096, M4]),
        "run": ("<u4", [1, M4]),
        "stride": ("<u4", [0, M4]),
        "span": ("<u4", [0, M4]),
    },
    "page_nodes": {
        "time": ("<u8", [5, 6, M8, 7]),
        "pid": ("<u4", [6, 6, M4, 1]),
        "page": ("<u8", [0x7F0000000000, 0x7F0000001000, M8, 4096]),
        "node": ("<i2", [0, -2, 32767, -32768]),
    },
    "mappings": {
        "time": ("<u8", [100, 101, 102, M8, 0]),
        "pid": ("<u4", [7, 7, 7, M4, 0]),
        "start": ("<u8", [0x7F1234560000, 0x7F0000000000, 0x7FFC00000000, M8, 0]),
        "len": ("<u8", [0x1C3000, 0x100000, 0x21000, M8, 0]),
        "pgoff": ("<u8", [0x28000, 0, 0, M8, 0]),
        "prot": ("<u4", [5, 3, 3, M4, 0]),
        "flags": ("<u4", [2, 0x22, 0x22, M4, 0]),
        "path": ("str", ["/usr/lib/x86_64-linux-gnu/libc.so.6", "", "[stack]",
                         "/tmp/dir with spaces/\u00fc.so", LONG_PATH]),
    },
    "threads": {
        "pid": ("<u4", [100, M4]),
        "tid": ("<u4", [101, M4]),
        "ppid": ("<u4", [1, M4]),
        "start_time": ("<u8", [123456789, M8]),
        "end_time": ("<u8", [0, M8]),
        "comm": ("str", ["worker-1", ""]),
        "affinity_first": ("str", ["0-3,8", ""]),
        "affinity_last": ("str", ["2", "0-1023"]),
        "samples": ("<u8", [42, M8]),
        "tls_base": ("<u8", [0x7F0012345640, M8]),
    },
    "tls_modules": {
        "pid": ("<u4", [100, M4]),
        "base": ("<u8", [0x7F0012000000, M8]),
        "offset": ("<u8", [0x1040, M8]),
    },
    "counters": {
        "time": ("<u8", [1, 2, 3, 4]),
        "phase": ("|u1", [0, 1, 2, 0]),
        "node": ("<i2", [-1, 0, 32767, -32768]),
        "name": ("str", ["vmstat.numa_hit", "numastat.numa_miss", "x", ""]),
        "value": ("<u8", [12345, M8, 0, 1]),
    },
    # through nmp_shim_convert: malloc (freed), realloc with 16 frames, mmap without stack,
    # a summary of short-lived blocks
    "objects": {
        "time": ("<u8", [2, 0x0102030405060708, 3, 4]),
        "free_time": ("<u8", [M8 - 1, 0, 0, M8 - 2]),
        "pid": ("<u4", [M4, M4, M4, M4]),
        "tid": ("<u4", [M4, 0x01020304, 9, 7]),
        "addr": ("<u8", [0xFFFFFFFFFFFFF000, 0x1122334455667788, 0x7F0000000000, 0x10000]),
        "size": ("<u8", [M8, 0x0807060504030201, 65536, 0x20000]),
        "kind": ("|u1", [1, 3, 5, 2]),
        "stack": ("<u4", [0, 1, M4, 2]),
        "prev": ("<u8", [0, 0xFFFFFFFFFFFFF000, 0, 0]),
        "holder": ("str", ["", "", "", ""]),  # only attach mode names what points to an object
        "sample_period": ("<u4", [0, M4, 0, 0]),
        "instances": ("<u4", [1, 1, 1, M4]),  # no block allocated again at its address
        "lifetime": ("<u8", [0, 0, 0, M8]),
        "extent": ("<u8", [0, 0, 0, M8 - 0x10000]),
    },
    # through nmp_shim_convert: one PAGES record of two node entries
    "object_pages": {
        "time": ("<u8", [M8, M8]),
        "pid": ("<u4", [M4, M4]),
        "addr": ("<u8", [0xFFFFFFFFFFFFF001] * 2),
        "source": ("|u1", [2, 2]),
        "pages": ("<u8", [(1 + M8 + 4095) // 4096] * 2),  # the span from offset 1
        "sampled": ("<u8", [M8, M8]),
        "node": ("<i2", [32766, -1]),
        "count": ("<u8", [(1 << 40) - 1, 0]),
        "policy": ("|u1", [255, 255]),
        "mixed": ("|u1", [1, 1]),
        "segment": ("|u1", [255, 0]),
    },
    "stack_frames": {
        "stack": ("<u4", [0] * 3 + [1] * 16 + [2]),
        "depth": ("<u2", [0, 1, 2] + list(range(16)) + [0]),
        "ip": ("<u8", [M8, 1, 0x7FFFFFFFFFFF] + [0x400000 + 0x10 * i for i in range(16)] + [0x400ABC]),
    },
}


def read_column(directory: Path, table: str, column: str):
    """The documented layout, independently of numaprof's reader."""
    path = directory / f"{table}.{column}.col"
    head = path.read_bytes()[:16]
    assert head[:8] == b"NMPCOL01", path
    dtype = head[8:].rstrip(b"\0").decode()
    values = np.memmap(path, dtype=np.dtype(dtype), mode="r", offset=16)
    heap_path = directory / f"{table}.{column}.heap"
    if not heap_path.exists():
        return dtype, values
    heap = heap_path.read_bytes()
    strings = [heap[o:heap.index(b"\0", o)].decode("utf-8") for o in values.tolist()]
    return "str", strings


@pytest.fixture(scope="module")
def written(tmp_path_factory) -> Path:
    if shutil.which("gcc") is None:
        pytest.skip("needs gcc")
    tmp = tmp_path_factory.mktemp("roundtrip")
    exe = tmp / "test_roundtrip"
    src = ROOT / "collector" / "src"
    srcs = [ROOT / "collector" / "tests" / "test_roundtrip.c"] + \
        [src / f for f in ("table.c", "schema.c", "shimconv.c", "shimstate.c", "counters.c", "util.c")]
    r = subprocess.run(["gcc", "-O1", "-g", "-Wall", "-Wextra", "-Werror", "-D_GNU_SOURCE",
                        f"-I{ROOT / 'collector' / 'include'}", f"-I{src}", *map(str, srcs),
                        "-o", str(exe)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    out = tmp / "profile"
    r = subprocess.run([str(exe), str(out)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    return out


def test_every_table_and_column_is_written(written):
    cols = {p.name.removesuffix(".col") for p in written.glob("*.col")}
    want = {f"{t}.{c}" for t, columns in EXPECTED.items() for c in columns}
    assert cols == want
    for p in written.iterdir():
        assert stat.S_IMODE(p.stat().st_mode) == 0o600, p


@pytest.mark.parametrize("table", sorted(EXPECTED))
def test_fields_read_back(written, table):
    for column, (dtype, values) in EXPECTED[table].items():
        got_dtype, got = read_column(written, table, column)
        assert got_dtype == dtype, f"{table}.{column}: dtype"
        if dtype == "str":
            assert got == values, f"{table}.{column}"
        else:
            assert got.tolist() == values, f"{table}.{column}"


@pytest.mark.parametrize("table", sorted(EXPECTED))
def test_analyzer_reader_agrees(written, table):
    t = read_table(written, table)
    assert set(t) >= set(EXPECTED[table])
    for column, (dtype, values) in EXPECTED[table].items():
        got = t[column]
        if dtype == "str":
            assert [str(s) for s in got] == values, f"{table}.{column}"
        else:
            assert np.asarray(got).dtype == np.dtype(dtype), f"{table}.{column}"
            assert np.asarray(got).tolist() == values, f"{table}.{column}"


def test_a_cut_short_table_drops_the_partial_row(written, tmp_path):
    """A crash leaves one column a value short: readers take the shortest column."""
    d = tmp_path / "cut"
    shutil.copytree(written, d)
    col = d / "samples.phys_addr.col"
    col.write_bytes(col.read_bytes()[:-3])
    t = read_table(d, "samples")
    assert all(len(v) == 2 for v in t.values())
    assert np.asarray(t["time"]).tolist() == EXPECTED["samples"]["time"][1][:2]


# Two packages; the tree lists node 1 first (hwloc logical order != node id) and the
# SLIT is asymmetric, so a mix-up of rows, columns or node order shows.
PU = ('<object type="Core" os_index="{i}" cpuset="{m}" complete_cpuset="{m}">'
      '<object type="PU" os_index="{i}" cpuset="{m}" complete_cpuset="{m}"/></object>')


def _package(pkg: int, node: int, cpus: list[int], mem: int) -> str:
    mask = hex(sum(1 << c for c in cpus))
    nodemask = hex(1 << node)
    pus = "".join(PU.format(i=c, m=hex(1 << c)) for c in cpus)
    return (f'<object type="Package" os_index="{pkg}" cpuset="{mask}" complete_cpuset="{mask}" '
            f'nodeset="{nodemask}" complete_nodeset="{nodemask}">'
            f'<object type="NUMANode" os_index="{node}" cpuset="{mask}" complete_cpuset="{mask}" '
            f'nodeset="{nodemask}" complete_nodeset="{nodemask}" local_memory="{mem}">'
            f'<page_type size="4096" count="{mem // 4096}"/></object>{pus}</object>')


CANNED_XML = (
    '<?xml version="1.0" encoding="UTF-8"?>\n<!DOCTYPE topology SYSTEM "hwloc2.dtd">\n'
    '<topology version="2.0"><object type="Machine" os_index="0" cpuset="0x0000000f" '
    'complete_cpuset="0x0000000f" allowed_cpuset="0x0000000f" nodeset="0x3" '
    'complete_nodeset="0x3" allowed_nodeset="0x3">'
    + _package(0, 1, [0, 1], 2 << 30) + _package(1, 0, [2, 3], 1 << 30)
    + '</object><distances2 type="NUMANode" nbobjs="2" kind="5" name="NUMALatency" '
    'indexing="os"><indexes length="4">0 1 </indexes>'
    '<u64values length="12">10 21 31 10 </u64values></distances2></topology>\n'
)


@pytest.fixture(scope="module")
def topology_writer(tmp_path_factory) -> Path:
    if shutil.which("gcc") is None or shutil.which("pkg-config") is None:
        pytest.skip("needs gcc and pkg-config")
    flags = subprocess.run(["pkg-config", "--cflags", "--libs", "hwloc"], capture_output=True,
                           text=True)
    if flags.returncode != 0:
        pytest.skip("needs libhwloc-dev")
    exe = tmp_path_factory.mktemp("topo") / "topology_main"
    src = ROOT / "collector" / "src"
    r = subprocess.run(["gcc", "-O1", "-Wall", "-Wextra", "-Werror", "-D_GNU_SOURCE",
                        f"-I{ROOT / 'collector' / 'include'}", f"-I{src}",
                        str(ROOT / "tests" / "progs" / "topology_main.c"), str(src / "topology.c"),
                        str(src / "util.c"), "-o", str(exe), *flags.stdout.split()],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return exe


def _write_topology(exe: Path, out: Path, xmlfile: Path | None):
    env = {k: v for k, v in os.environ.items() if k != "HWLOC_XMLFILE"}
    if xmlfile:
        env["HWLOC_XMLFILE"] = str(xmlfile)
    out.mkdir()
    r = subprocess.run([str(exe), str(out)], env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    for name in ("topology.json", "topology.xml"):
        assert stat.S_IMODE((out / name).stat().st_mode) == 0o600
    assert sorted(p.name for p in out.iterdir()) == ["topology.json", "topology.xml"]


def test_canned_topology_both_loaders_agree(topology_writer, tmp_path):
    xml = tmp_path / "canned.xml"
    xml.write_text(CANNED_XML)
    out = tmp_path / "prof"
    _write_topology(topology_writer, out, xml)
    raw = json.loads((out / "topology.json").read_text())
    assert raw["nodes"] == [{"id": 0, "cpus": [2, 3], "memory_bytes": 1 << 30},
                            {"id": 1, "cpus": [0, 1], "memory_bytes": 2 << 30}]
    assert raw["distances"] == [[10, 21], [31, 10]]  # row = from node id, column = to
    assert (raw["pus"], raw["cores"], raw["packages"], raw["page_size"]) == (4, 4, 2, 4096)
    assert raw["source"].startswith("hwloc 2.")
    from_json = load_topology_json(out / "topology.json")
    from_xml = load_hwloc_xml(out / "topology.xml")
    for t in (from_json, from_xml):
        assert [(n.id, n.cpus, n.memory_bytes) for n in t.nodes] == \
            [(0, (2, 3), 1 << 30), (1, (0, 1), 2 << 30)]
        assert t.distances.tolist() == [[10, 21], [31, 10]]


def test_this_machine_both_loaders_agree(topology_writer, tmp_path):
    out = tmp_path / "prof"
    _write_topology(topology_writer, out, None)
    from_json = load_topology_json(out / "topology.json")
    from_xml = load_hwloc_xml(out / "topology.xml")
    assert from_json.nodes == from_xml.nodes
    assert from_json.distances.tolist() == from_xml.distances.tolist()
    assert np.all(np.diag(from_json.distances) == 10)
    assert sum(len(n.cpus) for n in from_json.nodes) == json.loads(
        (out / "topology.json").read_text())["pus"]
