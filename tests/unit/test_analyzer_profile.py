"""Loading profiles and topologies: the format contract and its failure modes."""

import json
import subprocess

import numpy as np
import profgen  # noqa: E402
import pytest

from numaprof.analyzer.profile import open_profile, read_table  # noqa: E402
from numaprof.analyzer.topology import load_hwloc_xml, load_topology_json, parse_cpuset  # noqa: E402
from numaprof.errors import ProfileError  # noqa: E402


def _small(tmp_path):
    w = profgen.ProfileWriter(tmp_path / "p")
    w.manifest()
    w.topology([[0, 1], [2, 3]])
    w.table("samples", time=[1, 2, 3], pid=[7, 7, 7], tid=[7, 8, 8], cpu=[0, 2, 3],
            ip=[0x400, 0x401, 0x402], addr=[0x1000, 0, 0x2008], access=[1, 0, 2])
    w.table("mappings", time=[0, 0], pid=[7, 7], start=[0x400000, 0x7f0000], len=[4096, 8192],
            pgoff=[0, 4096], prot=[5, 3], flags=[2, 2], path=["/bin/true", "[stack]"])
    return w.path


def test_open_and_read_columns(tmp_path):
    p = open_profile(_small(tmp_path))
    assert p.complete and p.manifest["version"] == 1
    s = p.table("samples")
    assert s["addr"].tolist() == [0x1000, 0, 0x2008]
    assert s["time"].dtype == np.dtype("<u8") and s["cpu"].dtype == np.dtype("<u2")
    assert isinstance(s["time"], np.memmap)
    # optional columns absent → zeros of the documented dtype
    assert s["weight"].tolist() == [0, 0, 0] and s["weight"].dtype == np.dtype("<u4")
    m = p.table("mappings")
    assert list(m["path"]) == ["/bin/true", "[stack]"]
    # a table with no files is empty, with every documented column
    f = p.table("faults")
    assert len(f["addr"]) == 0 and "flags" in f
    t = p.topology()
    assert t.n_nodes == 2 and t.node_of_cpu()[3] == 1 and t.distances[0, 1] == 21


def test_read_table_without_manifest(tmp_path):
    w = profgen.ProfileWriter(tmp_path / "q")
    w.table("page_nodes", time=[1], pid=[2], page=[4096], node=[-2])
    t = read_table(w.path, "page_nodes")
    assert t["node"].tolist() == [-2]


def test_missing_directory_and_manifest(tmp_path):
    with pytest.raises(ProfileError, match="no such profile"):
        open_profile(tmp_path / "nope")
    (tmp_path / "empty").mkdir()
    with pytest.raises(ProfileError, match="no manifest.json"):
        open_profile(tmp_path / "empty")


def test_other_version_names_both(tmp_path):
    path = _small(tmp_path)
    m = json.loads((path / "manifest.json").read_text())
    m["version"] = 2
    (path / "manifest.json").write_text(json.dumps(m))
    with pytest.raises(ProfileError) as e:
        open_profile(path)
    assert "version 2" in str(e.value) and "reads version 1" in str(e.value)
    assert "\n" not in str(e.value)


def test_corrupted_manifest_and_foreign_format(tmp_path):
    path = _small(tmp_path)
    (path / "manifest.json").write_text('{"format": "numaprof.profile", "vers')
    with pytest.raises(ProfileError, match="corrupted"):
        open_profile(path)
    (path / "manifest.json").write_text('{"format": "perf.data", "version": 1}')
    with pytest.raises(ProfileError, match="not a numaprof profile"):
        open_profile(path)


def test_truncated_header_and_bad_magic(tmp_path):
    path = _small(tmp_path)
    col = path / "samples.addr.col"
    data = col.read_bytes()
    col.write_bytes(data[:10])
    with pytest.raises(ProfileError, match="truncated"):
        open_profile(path).table("samples")
    col.write_bytes(b"NMPCOL02" + data[8:])
    with pytest.raises(ProfileError, match="bad magic"):
        open_profile(path).table("samples")
    col.write_bytes(data[:8] + b"<u4\0\0\0\0\0" + data[16:])
    with pytest.raises(ProfileError, match="dtype <u4, expected <u8"):
        open_profile(path).table("samples")


def test_cut_short_run_keeps_whole_rows(tmp_path):
    path = _small(tmp_path)
    col = path / "samples.time.col"
    col.write_bytes(col.read_bytes()[:-3])  # last value partly written
    s = open_profile(path).table("samples")
    assert len(s["addr"]) == 2 and len(s["time"]) == 2 and s["tid"].tolist() == [7, 8]


def test_missing_required_column(tmp_path):
    path = _small(tmp_path)
    (path / "samples.addr.col").unlink()
    with pytest.raises(ProfileError, match="lacks column"):
        open_profile(path).table("samples")


def test_topology_json_errors(tmp_path):
    f = tmp_path / "t.json"
    f.write_text('{"nodes": [{"id": 0, "cpus": [0]}, {"id": 1, "cpus": [1]}], "distances": [[10, 20]]}')
    with pytest.raises(ProfileError, match="distance matrix"):
        load_topology_json(f)
    f.write_text("{")
    with pytest.raises(ProfileError, match="corrupted"):
        load_topology_json(f)


def test_parse_cpuset():
    assert parse_cpuset("0x00000003") == [0, 1]
    assert parse_cpuset("0x00000001,0x00000000") == [32]
    assert parse_cpuset("0x0000000c") == [2, 3]


DIST = """  <distances2 type="NUMANode" nbobjs="2" kind="5" name="NUMALatency" indexing="os">
    <indexes length="4">0 1 </indexes>
    <u64values length="12">10 21 21 10 </u64values>
  </distances2>
</topology>"""


def _lstopo(args):
    try:
        return subprocess.run(["lstopo-no-graphics", *args, "--of", "xml"], capture_output=True,
                              text=True, check=True, timeout=60).stdout
    except (FileNotFoundError, subprocess.CalledProcessError):
        pytest.skip("lstopo (hwloc) not installed")


def test_hwloc_xml_two_nodes_with_distances(tmp_path):
    xml = _lstopo(["--input", "pack:2 [numa] core:2 pu:1"]).replace("</topology>", DIST)
    f = tmp_path / "two.xml"
    f.write_text(xml)
    t = load_hwloc_xml(f)
    assert [n.cpus for n in t.nodes] == [(0, 1), (2, 3)]
    assert t.distances.tolist() == [[10, 21], [21, 10]]
    assert t.numa_factor()[0, 1] == pytest.approx(2.1)


def test_hwloc_xml_this_machine(tmp_path):
    f = tmp_path / "this.xml"
    f.write_text(_lstopo([]))
    t = load_hwloc_xml(f)
    import os

    assert t.n_nodes >= 1
    assert sorted(c for n in t.nodes for c in n.cpus) == sorted(os.sched_getaffinity(0)) or t.n_nodes > 1
    assert t.nodes[0].memory_bytes > 0


def test_hwloc_xml_garbage(tmp_path):
    f = tmp_path / "bad.xml"
    f.write_text("<topology><object")
    with pytest.raises(ProfileError, match="hwloc XML"):
        load_hwloc_xml(f)


V1_XML = """<?xml version="1.0" encoding="UTF-8"?>
<!DOCTYPE topology SYSTEM "hwloc.dtd">
<topology>
  <object type="Machine" os_index="0" cpuset="0x0000000f" local_memory="0">
    <object type="NUMANode" os_index="0" cpuset="0x00000003" local_memory="1073741824">
      <object type="PU" os_index="0" cpuset="0x00000001"/>
      <object type="PU" os_index="1" cpuset="0x00000002"/>
    </object>
    <object type="NUMANode" os_index="1" cpuset="0x0000000c" local_memory="1073741824">
      <object type="PU" os_index="2" cpuset="0x00000004"/>
      <object type="PU" os_index="3" cpuset="0x00000008"/>
    </object>
    <distances nbobjs="2" relative_depth="1" latency_base="10.000000">
      <latency value="1.000000"/>
      <latency value="2.100000"/>
      <latency value="2.100000"/>
      <latency value="1.000000"/>
    </distances>
  </object>
</topology>
"""


def test_hwloc_v1_xml(tmp_path):
    f = tmp_path / "v1.xml"
    f.write_text(V1_XML)
    t = load_hwloc_xml(f)
    assert [n.cpus for n in t.nodes] == [(0, 1), (2, 3)]
    assert t.distances.tolist() == [[10, 21], [21, 10]]
