"""The presets of servers whose nodes are parts of a socket (SNC-4, NPS4): 8 and 16 nodes,
a symmetric SLIT, nearer inside a socket than across."""

import numpy as np
import pytest

from numaprof.recommender.targets import PRESETS, preset_topology


@pytest.mark.parametrize("name,nodes,within,across", [
    ("2s-snc4", 8, {12}, 21), ("2s-nps4", 8, {11, 12}, 32), ("4s-snc4", 16, {12}, 21)])
def test_clustered_socket_presets(name, nodes, within, across):
    t = preset_topology(name)
    d = t.distances
    assert t.n_nodes == nodes and d.shape == (nodes, nodes)
    assert np.array_equal(d, d.T) and set(np.diag(d)) == {10.0}
    for a in range(nodes):
        for b in range(nodes):
            if a != b:
                same_socket = a // 4 == b // 4
                assert (d[a, b] in within) if same_socket else d[a, b] == across, (a, b, d[a, b])
    # cores are numbered node by node, as OMP_PLACES=cores enumerates them
    assert [n.cpus[0] for n in t.nodes] == [i * PRESETS[name].cores_per_node for i in range(nodes)]


def test_nps4_diagonal_quadrant_is_farther():
    d = preset_topology("2s-nps4").distances
    assert d[0, 1] == d[0, 2] == 11 and d[0, 3] == 12 and d[1, 2] == 12
