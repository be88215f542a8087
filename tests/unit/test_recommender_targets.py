"""--target resolution (recommender/targets.py) and the command-line emitter (emit.py)."""

import numpy as np
import pytest

from numaprof.analyzer.model import Node, Topology
from numaprof.errors import UsageError
from numaprof.recommender import emit
from numaprof.recommender.targets import OPTERON_TABLE4, PRESETS, resolve_target

RECORDED = Topology(nodes=(Node(0, (0, 1), 1 << 33),), distances=np.array([[10.0]]), source="test")


def test_none_is_the_recorded_topology():
    assert resolve_target(None, RECORDED) is RECORDED


def test_2s():
    t = resolve_target("2s", RECORDED)
    assert t.n_nodes == 2 and t.name == "2s"
    assert t.distances.tolist() == [[10, 21], [21, 10]]
    assert np.allclose(t.numa_factor(), [[1, 2.1], [2.1, 1]])
    assert set(t.nodes[0].cpus).isdisjoint(t.nodes[1].cpus)


def test_4s_fully_connected():
    t = resolve_target("4s", RECORDED)
    d = t.distances
    assert t.n_nodes == 4 and (np.diag(d) == 10).all() and (d[~np.eye(4, dtype=bool)] == 21).all()


def test_8n_opteron_carries_table4_factors():
    t = resolve_target("8n-opteron", RECORDED)
    f = t.numa_factor()
    assert t.n_nodes == 8
    assert f.max() == pytest.approx(1.55) and f[~np.eye(8, dtype=bool)].min() == pytest.approx(1.02, abs=0.01)
    assert f[3, 6] == pytest.approx(1.0337) and f[0, 3] == pytest.approx(1.1974)
    assert np.allclose(f, np.array(OPTERON_TABLE4))
    assert all(len(n.cpus) == 2 for n in t.nodes)  # dual-core Opteron 875 per node


def test_itanium2_factor_between_2_and_2_5():
    f = resolve_target("itanium2", RECORDED).numa_factor()
    off = f[~np.eye(4, dtype=bool)]
    assert off.min() == pytest.approx(2.0) and off.max() == pytest.approx(2.5)


def test_threads_beyond_the_preset_cores_get_cores():
    t = resolve_target("8n-opteron", RECORDED, threads=40)
    assert all(len(n.cpus) == 5 for n in t.nodes)
    assert len({c for n in t.nodes for c in n.cpus}) == 40


def test_unknown_target_is_a_one_line_usage_error():
    with pytest.raises(UsageError) as e:
        resolve_target("3s", RECORDED)
    msg = str(e.value)
    assert "\n" not in msg and all(p in msg for p in PRESETS)
    assert e.value.exit_code == 2


def test_missing_xml_file_is_named(tmp_path):
    with pytest.raises(UsageError, match="no such hwloc XML file"):
        resolve_target(str(tmp_path / "server.xml"), RECORDED)


HWLOC_XML = """<?xml version="1.0" encoding="UTF-8"?>
<!DOCTYPE topology SYSTEM "hwloc2.dtd">
<topology version="2.0">
  <object type="Machine" os_index="0" cpuset="0x0000000f" gp_index="1">
    <object type="Package" os_index="0" cpuset="0x00000003" gp_index="2">
      <object type="NUMANode" os_index="0" cpuset="0x00000003" local_memory="1073741824" gp_index="3"/>
      <object type="PU" os_index="0" cpuset="0x00000001" gp_index="4"/>
      <object type="PU" os_index="1" cpuset="0x00000002" gp_index="5"/>
    </object>
    <object type="Package" os_index="1" cpuset="0x0000000c" gp_index="6">
      <object type="NUMANode" os_index="1" cpuset="0x0000000c" local_memory="1073741824" gp_index="7"/>
      <object type="PU" os_index="2" cpuset="0x00000004" gp_index="8"/>
      <object type="PU" os_index="3" cpuset="0x00000008" gp_index="9"/>
    </object>
  </object>
  <distances2 type="NUMANode" nbobjs="2" kind="5" name="NUMALatency" indexing="os">
    <indexes length="3">0 1</indexes>
    <u64values length="11">10 32 32 10</u64values>
  </distances2>
</topology>
"""


def test_hwloc_xml_file(tmp_path):
    p = tmp_path / "server.xml"
    p.write_text(HWLOC_XML)
    t = resolve_target(str(p), RECORDED)
    assert t.n_nodes == 2
    assert t.distances.tolist() == [[10, 32], [32, 10]]
    assert t.nodes[1].cpus == (2, 3)


def test_command_line_quotes_and_comments():
    line = emit.command_line(["./my app", "--out", "a b;rm -rf /"], env=emit.binding_env("spread"),
                             prefix=emit.interleave_args(), comment="predicted: local 50% -> 100%")
    assert line == ("OMP_PROC_BIND=spread OMP_PLACES=cores numactl --interleave=all "
                    "'./my app' --out 'a b;rm -rf /'  # predicted: local 50% -> 100%")
    assert emit.command_line([], prefix=emit.one_node_args(1)) == "numactl -N 1 -m 1 ./app"
    assert emit.command_line(["A=b", "x"]) == "'A=b' x"
    assert emit.interleave_args([0, 2]) == ["numactl", "--interleave=0,2"]
    with pytest.raises(ValueError):
        emit.binding_env("scatter")


def test_a_name_from_a_profile_cannot_end_the_comment_of_a_line_to_paste():
    """weighted_place_call writes the recorded name inside a C comment: a crafted name
    with */ or a newline must stay inside it."""
    from numaprof.recommender.emit import weighted_place_call

    line = weighted_place_call('a*/ system("rm -rf ~"); /*\nb', 4096, [0, 1], [3, 1])
    comment = line[line.index("/*") + 2:line.index("*/")]
    assert "system" in comment and "\n" not in line
    assert line.count("/*") == 1 and line.count("*/") == 1
