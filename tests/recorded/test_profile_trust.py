"""A profile is data, never instructions (docs/security.md): the reader opens regular files
only, inside the profile, within documented limits, and refuses everything else with one
ProfileError line naming the file; text output shows control characters, never obeys
them."""

from __future__ import annotations

import json
import os
import shutil
import threading

import numpy as np
import profgen
import pytest
from helpers import ROOT

from numaprof.analyzer import analyze, firsttouch, objects, profile_io, symbols, threads
from numaprof.analyzer.archive import Archive
from numaprof.analyzer.profile import open_profile, read_table
from numaprof.analyzer.topology import load_hwloc_xml, load_topology_json, parse_cpuset
from numaprof.errors import ProfileError

SEEDS = ROOT / "tests" / "data" / "fuzz-seed"  # small profiles


@pytest.fixture
def prof(tmp_path):
    p = tmp_path / "prof"
    shutil.copytree(SEEDS / "recorded", p)
    return p


@pytest.fixture
def synth(tmp_path):
    p = tmp_path / "synth"
    shutil.copytree(SEEDS / "synthetic-2n", p)
    return p


def _manifest(p, **changes):
    m = json.loads((p / "manifest.json").read_text())
    m.update(changes)
    (p / "manifest.json").write_text(json.dumps(m))


# ------------------------------------------------------------------- regular files only

def test_fifo_column_is_refused_without_blocking(prof):
    (prof / "samples.cpu.col").unlink()
    os.mkfifo(prof / "samples.cpu.col")
    done = []

    def read():
        try:
            read_table(prof, "samples")
        except ProfileError as e:
            done.append(str(e))

    t = threading.Thread(target=read, daemon=True)
    t.start()
    t.join(20)
    assert done and "samples.cpu.col: a FIFO, not a regular file" in done[0]


def test_symlink_in_the_profile_is_refused(prof, tmp_path):
    (tmp_path / "elsewhere.col").write_bytes((prof / "samples.ip.col").read_bytes())
    (prof / "samples.ip.col").unlink()
    (prof / "samples.ip.col").symlink_to(tmp_path / "elsewhere.col")
    with pytest.raises(ProfileError, match=r"samples.ip.col: a symbolic link"):
        read_table(prof, "samples")


def test_directory_in_place_of_the_manifest_is_refused(prof):
    (prof / "manifest.json").unlink()
    (prof / "manifest.json").mkdir()
    with pytest.raises(ProfileError, match=r"manifest.json: a directory, not a regular file"):
        open_profile(prof)


def test_read_bytes_limit(tmp_path):
    f = tmp_path / "f"
    f.write_bytes(b"x" * 100)
    assert profile_io.read_bytes(f, 100) == b"x" * 100
    with pytest.raises(ProfileError, match="100 bytes, more than the 99"):
        profile_io.read_bytes(f, 99)


# ------------------------------------------------------------------------- manifest

@pytest.mark.parametrize("text,why", [
    ('{"format": "numaprof.profile", "version": 1, "x": NaN}', "NaN is not a JSON number"),
    ("[" * 100000 + "]" * 100000, "nested more than 32 levels"),
    ('{"format": "numaprof.profile", "version": 1, "n": ' + "9" * 5000 + "}", "corrupted"),
])
def test_malformed_manifest_json(prof, text, why):
    (prof / "manifest.json").write_text(text)
    with pytest.raises(ProfileError, match=why):
        open_profile(prof)


@pytest.mark.parametrize("encoding", ["utf-16", "utf-32"])
def test_manifest_in_another_encoding(prof, encoding):
    text = (prof / "manifest.json").read_text()
    (prof / "manifest.json").write_bytes(text.encode(encoding))
    with pytest.raises(ProfileError, match=r"manifest.json: not UTF-8 text \(byte 0x"):
        open_profile(prof)


def test_invalid_utf8_in_manifest(prof):
    data = (prof / "manifest.json").read_bytes().replace(b'"soft"', b'"so\xfft"', 1)
    (prof / "manifest.json").write_bytes(data)
    with pytest.raises(ProfileError, match="not UTF-8 text"):
        open_profile(prof)


@pytest.mark.parametrize("field,value,why", [
    ("command", "./app", "command is './app', expected an array of strings"),
    ("command", [1, 2], "expected an array of strings"),
    ("env", ["OMP_NUM_THREADS"], "env is .*expected an object of strings"),
    ("complete", "yes", "complete is 'yes', expected true or false"),
    ("exit_status", 1.5, "exit_status is 1.5"),
    ("sampling", {"freq": [1, 2]}, "sampling.freq is"),
    ("counts", {"lost": -1}, "counts.lost is -1"),
    ("counts", {"samples": 2**64 + 5}, "counts.samples is"),
    ("backend_reason", {"pebs": None}, "backend_reason is"),
    ("warnings", "x", "warnings is 'x'"),
    ("version", True, "profile format version True"),
])
def test_wrong_typed_manifest_fields(prof, field, value, why):
    _manifest(prof, **{field: value})
    with pytest.raises(ProfileError, match=why):
        analyze(prof)


# ------------------------------------------------------------------- table limits

def test_table_larger_than_the_manifest_count_is_refused(prof):
    m = json.loads((prof / "manifest.json").read_text())
    _manifest(prof, counts={**m["counts"], "samples": 10})
    with pytest.raises(ProfileError, match=r"samples\..*\.col: 84 rows, more than the 10 the "
                                           "samples table may hold"):
        analyze(prof)


def test_sparse_table_is_refused(prof):
    m = json.loads((prof / "manifest.json").read_text())
    del m["counts"]["samples"]
    (prof / "manifest.json").write_text(json.dumps(m))
    for f in prof.glob("samples.*.col"):
        os.truncate(f, 1 << 34)  # billions of rows of holes
    with pytest.raises(ProfileError, match="table samples claims .* rows in sparse files"):
        analyze(prof)


def test_heap_longer_than_its_strings_may_be_is_refused(prof):
    heap = prof / "threads.comm.heap"
    heap.write_bytes(b"x" * (1 << 20) + heap.read_bytes())
    with pytest.raises(ProfileError, match=r"threads.comm.heap: \d+ bytes, more than the"):
        read_table(prof, "threads")


def test_string_longer_than_its_limit_is_refused(prof):
    heap = prof / "threads.comm.heap"
    n = len(read_table(prof, "threads")["tid"])
    # one string of 300 bytes (a comm is at most 256), the heap itself within (n+1)*257
    heap.write_bytes(b"y" * 300 + b"\0" * (n * 257 - 300))
    with pytest.raises(ProfileError, match="longer than 256 bytes"):
        read_table(prof, "threads")


@pytest.mark.parametrize("table,col,value,why", [
    ("faults", "page_size", 2**31 - 1, "is not a page size"),
    ("objects", "size", 2**64 - 1, "beyond the address space"),
    ("mappings", "len", 2**63, "beyond the address space"),
    ("samples", "time", 2**63, "beyond 63 bits"),
])
def test_absurd_column_values_are_refused(prof, table, col, value, why):
    path = prof / f"{table}.{col}.col"
    raw = bytearray(path.read_bytes())
    size = np.dtype(raw[8:16].rstrip(b"\0").decode()).itemsize
    raw[16 : 16 + size] = value.to_bytes(size, "little")
    path.write_bytes(bytes(raw))
    with pytest.raises(ProfileError, match=f"{table}.{col}.col: row 0: {value} .*{why}"):
        analyze(prof)


# ------------------------------------------------------------------------- topology

def _topology(p, nodes, distances=None, page_size=4096):
    doc = {"nodes": nodes, "page_size": page_size}
    if distances is not None:
        doc["distances"] = distances
    (p / "topology.json").write_text(json.dumps(doc))
    return p / "topology.json"


@pytest.mark.parametrize("nodes,distances,page_size,why", [
    ([{"id": i, "cpus": [i]} for i in range(1025)], None, 4096, "1025 NUMA nodes"),
    ([{"id": 0, "cpus": [0]}, {"id": 99999999, "cpus": [1]}], [[10, 20], [20, 10]], 4096,
     "node id 99999999 is not a Linux node id"),
    ([{"id": 0, "cpus": [0, 2**40]}], None, 4096, "cpu id 1099511627776 beyond"),
    ([{"id": 0, "cpus": list(range(70000))}], None, 4096, "70000 cpus"),
    ([{"id": 0, "cpus": [0]}], None, 3, "page size 3 is not a power of two"),
    ([{"id": 0, "cpus": ["0"]}], None, 4096, "a cpu id is '0', expected an integer"),
    ([{"id": 0}, {"id": 1}], [[10, float("nan")], [20, 10]], 4096, "corrupted"),
    ([{"id": 0}, {"id": 1}], [[10, -20], [20, 10]], 4096, "not a positive number"),
    ([{"id": 0}, {"id": 0}], [[10, 20], [20, 10]], 4096, "a node id appears twice"),
])
def test_topology_json_limits(tmp_path, nodes, distances, page_size, why):
    with pytest.raises(ProfileError, match=why):
        load_topology_json(_topology(tmp_path, nodes, distances, page_size))


def test_damaged_topology_is_refused_not_replaced(prof):
    (prof / "topology.json").write_text('{"nodes": 5}')
    with pytest.raises(ProfileError, match="topology.json: corrupted topology"):
        analyze(prof)


def test_hwloc_xml_limits(tmp_path):
    x = tmp_path / "t.xml"
    objs = "".join(f'<object type="NUMANode" os_index="{i}" cpuset="0x1"/>' for i in range(1100))
    x.write_text(f'<topology><object type="Machine">{objs}</object></topology>')
    with pytest.raises(ProfileError, match="1100 NUMA nodes"):
        load_hwloc_xml(x)
    wide = ",".join(["0xffffffff"] * 5000)
    x.write_text(f'<topology><object type="Machine"><object type="NUMANode" os_index="0" '
                 f'cpuset="{wide}"/></object></topology>')
    with pytest.raises(ProfileError, match="a cpuset of 5000 words"):
        load_hwloc_xml(x)
    x.write_text('<topology><object type="NUMANode" os_index="x"/></topology>')
    with pytest.raises(ProfileError, match="corrupted hwloc XML"):
        load_hwloc_xml(x)


def test_profile_topology_xml_must_not_be_a_symlink(prof, tmp_path):
    (prof / "topology.json").unlink()
    shutil.move(prof / "topology.xml", tmp_path / "t.xml")
    (prof / "topology.xml").symlink_to(tmp_path / "t.xml")
    with pytest.raises(ProfileError, match="topology.xml: a symbolic link"):
        open_profile(prof).topology()
    assert load_hwloc_xml(tmp_path / "t.xml").n_nodes == 1  # a --target may be one


def test_parse_cpuset_words():
    # most significant word first
    assert parse_cpuset("0xffffffff,0x0000000f") == [0, 1, 2, 3, *range(32, 64)]
    assert parse_cpuset("0x00000005") == [0, 2]


# ------------------------------------------------------------------------- archive

@pytest.mark.parametrize("digest", ["../../elsewhere/x.c", "/etc/passwd", "", "..", "a/b",
                                    "0" * 63, "G" * 64, 12, None])
def test_archive_digest_must_be_a_sha256(prof, digest):
    doc = json.loads((prof / "archive.json").read_text())
    doc["sources"][next(iter(doc["sources"]))] = digest
    (prof / "archive.json").write_text(json.dumps(doc))
    with pytest.raises(ProfileError, match="archive.json: a digest is .* expected a sha256"):
        Archive.read(prof)


def test_archive_copy_that_is_a_symlink_is_refused(prof, tmp_path):
    doc = json.loads((prof / "archive.json").read_text())
    digest = next(iter(doc["sources"].values()))
    (tmp_path / "secret.c").write_text("double *SECRET = malloc(1);\n")
    (prof / "archive" / digest).unlink()
    (prof / "archive" / digest).symlink_to(tmp_path / "secret.c")
    with pytest.raises(ProfileError, match=f"archive/{digest}: "):
        Archive.read(prof)


def test_archive_directory_that_is_a_symlink_is_refused(prof, tmp_path):
    shutil.move(prof / "archive", tmp_path / "archive")
    (prof / "archive").symlink_to(tmp_path / "archive")
    with pytest.raises(ProfileError, match="archive: a symbolic link, not a directory"):
        Archive.read(prof)


def test_archive_names_objects_from_inside_the_profile(prof):
    """The archive still works: the recorded binary and source are found in it (the
    seed was recorded in a directory that no longer exists)."""
    a = analyze(prof)
    assert {o.name for o in a.objects} >= {"a", "b", "c"}


def test_mapping_naming_a_fifo_or_device_gives_no_symbols(tmp_path):
    """A mappings path is a file of this machine (the binary, as perf reads it): one that
    names a FIFO must not block the report, a device is not read."""
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    got = []
    t = threading.Thread(target=lambda: got.append(symbols.elf_info(str(fifo))), daemon=True)
    t.start()
    t.join(20)
    assert got == [None]
    assert symbols.elf_info("/dev/zero") is None


# ---------------------------------------------------------------------- numa_maps

def test_numa_maps_with_absurd_numbers_is_refused(prof):
    nm = next(prof.glob("numa_maps.*"))
    nm.write_text("7f0000000000 default anon=1 N0=1 kernelpagesize_kB=x\n")
    with pytest.raises(ProfileError, match=rf"{nm.name} line 1: kernelpagesize_kB=x is not a "
                                           "page size"):
        analyze(prof)
    nm.write_text("7f0000000000 default N0=99999999999999999999\n")
    with pytest.raises(ProfileError, match="beyond any address space"):
        analyze(prof)


def test_numa_maps_of_an_impossible_pid_is_refused(prof):
    (prof / "numa_maps.99999999999999999999").write_text("")
    with pytest.raises(ProfileError, match="is not a Linux process id"):
        analyze(prof)


def test_cpulist_beyond_the_cpus_a_profile_holds_is_unknown():
    assert threads.parse_cpulist("0-3,8") == {0, 1, 2, 3, 8}
    assert threads.parse_cpulist("0-4000000000") == set()
    assert threads.parse_cpulist("70000") == set()


# ------------------------------------------------------------ no amplification

def test_thread_placement_without_dense_matrices(synth, monkeypatch):
    """Many threads on high cpu ids: the per-thread counts are the same whether computed
    densely or from the sorted pairs (used when threads x cpus is large)."""
    tid = synth / "samples.tid.col"
    raw = np.fromfile(tid, dtype="<u4", offset=16)
    cpu = np.fromfile(synth / "samples.cpu.col", dtype="<u2", offset=16)
    profgen.write_column(tid, (raw + np.arange(len(raw)) % 50).astype(np.uint32), "<u4")
    profgen.write_column(synth / "samples.cpu.col", np.where(np.arange(len(cpu)) % 7 == 0,
                                                             60000, cpu), "<u2")
    dense = analyze(synth).threads
    monkeypatch.setattr(threads, "_DENSE_CELLS", 0)
    sparse = analyze(synth).threads
    assert len(dense) > 50
    assert [(t.tid, t.cpus, t.nodes, t.samples, t.migrations, t.shares_core_with)
            for t in dense] == [(t.tid, t.cpus, t.nodes, t.samples, t.migrations,
                                 t.shares_core_with) for t in sparse]
    assert any(60000 in t.cpus for t in dense)


def test_huge_sparse_array_is_suggested_for_without_allocating_its_pages(tmp_path):
    """An object of 8 TiB (a sparse reservation) initialised by the master: the
    parallel_init what-if moves the sampled pages only (it allocated an array per page of
    the whole object: 16 GiB)."""
    from numaprof.recommender import suggest
    from numaprof.recommender.targets import resolve_target

    a = profgen.Array("big", 8 << 40, ["serial_init", "regular"], samples=200)
    # serial_init faults one page per 4 KiB page: give it a small size for the faults,
    # then claim the object is 8 TiB
    a.size = 1 << 20
    run = profgen.synth_run(tmp_path / "p", [a])
    size = np.fromfile(run.path / "objects.size.col", dtype="<u8", offset=16)
    profgen.write_column(run.path / "objects.size.col", np.full_like(size, 8 << 40), "<u8")
    an = analyze(run.path)
    obj = next(o for o in an.objects if o.size == 8 << 40)
    assert obj.access.n_pages == (8 << 40) // 4096
    s = suggest(an, resolve_target("2s", an.topology))
    assert s.objects and s.objects[0].policy


def test_core_fault_expansion_is_bounded(monkeypatch):
    ft = {"addr": np.array([0x7f0000000000], dtype=np.uint64),
          "page_size": np.array([1 << 30], dtype=np.uint32)}
    monkeypatch.setattr(firsttouch, "FAULT_PAGES_LIMIT", 1000)
    with pytest.raises(ProfileError, match="placed 262144 base pages, more than the 1000"):
        firsttouch.fault_pages(ft, 12)


def test_return_address_zero_in_a_stack(prof):
    """A call stack frame of 0 (looked up as the call at 0 - 1) names nothing; it is no
    reason to fail the report."""
    ips = prof / "stack_frames.ip.col"
    n = (ips.stat().st_size - 16) // 8
    profgen.write_column(ips, np.zeros(n, dtype=np.uint64), "<u8")
    a = analyze(prof)
    assert a.objects and all(o.name.startswith("heap@") for o in a.objects if o.kind == "heap")


def test_static_symbol_outside_the_address_space_is_skipped(monkeypatch):
    """A mapping whose start is below its segment's link address (a swapped or damaged
    column) puts a static symbol at a negative address: it is no object, not an error."""
    class Elf:
        objects = [symbols.StaticSymbol("neg", 0x10, 8, ".data", True),
                   symbols.StaticSymbol("huge", 0x2000, 2**64 - 1, ".bss", True),
                   symbols.StaticSymbol("ok", 0x3000, 64, ".data", True)]

        def load_bias(self, start, pgoff):
            return start - 0x2000

        def common_blocks(self):
            return {}

    monkeypatch.setattr(symbols, "elf_info", lambda path, archive: Elf())
    table = {"pid": np.array([7], dtype=np.uint32), "start": np.array([0x1000], dtype=np.uint64),
             "len": np.array([0x1000], dtype=np.uint64), "pgoff": np.array([0x2000], dtype=np.uint64),
             "path": np.array(["/bin/x"], dtype=object)}
    objs = []
    iv = objects.static_intervals(symbols.Mappings(table), objs, Archive())
    assert [o.name for o in objs] == ["ok"] and int(iv.start[0]) == 0x2000
