"""Lab tier: the guest has the requested topology, and pages land where the policy says.

Exact checks (no statistics): the kernel's own answers (numactl -H, move_pages(2) with
nodes=NULL, /proc/self/numa_maps) against what the topology and the policy imply.
"""

import json

import pytest

pytestmark = pytest.mark.lab

GUESTS = {"guest2": 2, "guest4": 4, "guest8": 8}


def _expected_matrix(labkit, name):
    if name == "guest8":
        from numaprof.lab.topology import PRESETS

        return [list(row) for row in PRESETS["2s-snc4"]]
    return labkit.MATRIX_2 if name == "guest2" else labkit.MATRIX_4


@pytest.fixture(params=sorted(GUESTS))
def guest(request):
    name = request.param
    return name, GUESTS[name], request.getfixturevalue(name)


def test_numactl_shows_requested_topology(guest, labkit):
    name, n, run = guest
    nodes, cpus, matrix = labkit.parse_numactl_hardware(run.out("numactl"))
    assert nodes == n
    per_node = 2 if name == "guest2" else 1
    assert cpus == {k: list(range(k * per_node, (k + 1) * per_node)) for k in range(n)}
    assert matrix == _expected_matrix(labkit, name)


def test_numa_balancing_is_off(guest):
    """The lab turns AutoNUMA off by default: it would move pages away from the policy."""
    _, _, run = guest
    assert run.out("balancing").strip() == "0"


def test_numaprof_topology_in_guest(guest, labkit):
    """`numaprof topology` run inside the guest reports the guest's nodes and distances."""
    name, n, run = guest
    doc = json.loads(run.out("topology"))
    topo = doc.get("topology", doc)
    assert [node["id"] for node in topo["nodes"]] == list(range(n))
    per_node = 2 if name == "guest2" else 1
    assert [list(node["cpus"]) for node in topo["nodes"]] == [
        list(range(k * per_node, (k + 1) * per_node)) for k in range(n)
    ]
    assert topo["distances"] == _expected_matrix(labkit, name)


def test_membind_puts_every_page_on_the_node(guest, labkit):
    _, n, run = guest
    p = labkit.parse_lab_place(run.out("membind"))
    assert p.policy == f"bind:{n - 1}"
    assert p.nodes == [n - 1] * 64
    assert p.numa_maps == {n - 1: 64}


def test_interleave_alternates_nodes(guest, labkit):
    _, n, run = guest
    p = labkit.parse_lab_place(run.out("interleave"))
    assert p.policy.startswith("interleave:")
    assert all(0 <= x < n for x in p.nodes), p.nodes
    # Pages touched in order get consecutive nodes (round robin from wherever it started).
    assert all(p.nodes[i + 1] == (p.nodes[i] + 1) % n for i in range(len(p.nodes) - 1)), p.nodes
    assert p.numa_maps == {k: 64 // n for k in range(n)}


def test_first_touch_follows_the_cpu(guest, labkit):
    """numactl --cpunodebind only moves the thread; default policy puts pages beside it."""
    _, n, run = guest
    p = labkit.parse_lab_place(run.out("cpunodebind"))
    assert p.policy == "default"
    assert p.nodes == [n - 1] * 64
    assert p.numa_maps == {n - 1: 64}


def test_first_touch_by_bound_threads(guest, labkit):
    """Thread k, bound to node k, first-touches block k: block k is on node k."""
    _, n, run = guest
    p = labkit.parse_lab_place(run.out("threads"))
    assert p.touchers == {k: k for k in range(n)}
    per = 64 // n
    assert p.nodes == [k for k in range(n) for _ in range(per)]
    assert p.numa_maps == {k: per for k in range(n)}
    assert labkit.counts(p.nodes, n) == [p.numa_maps.get(k, 0) for k in range(n)]


def test_guest_cpu_computes_right(guest2):
    """numpy's sorts are right in the guest (TCG's AVX2 was not: the lab hides it)."""
    assert guest2.out("numpy_sort").strip() == "sorted"


def _policies(text):
    out = {}
    for line in text.splitlines():
        f = line.split()
        if f[:1] == ["policy"]:
            out[f[1]] = (int(f[3]), int(f[5]), [int(x) for x in f[7:]])
    return out


def test_numaprof_place_puts_every_page_where_its_policy_says(guest, labkit):
    """numaprof_place.h on a real multi-node kernel: for every policy, the node of every page
    (move_pages after the program wrote them) is the one recommender/policies.py predicts —
    the same page→node maps the recommender scores and the patches apply."""
    from numaprof.recommender.policies import node_of_page

    _, n, run = guest
    got = _policies(run.out("policies"))
    assert sorted(got) == sorted(labkit.PLACE_POLICIES), got.keys()
    pages = 64
    for policy, (rc, query, nodes) in got.items():
        assert rc == 0 and query == 0, (policy, rc, query)
        want = node_of_page(policy, pages, range(n), threads_nodes=list(range(n)), block_pages=4,
                            seed=7, weights=[3] + [1] * (n - 1)).tolist()
        assert nodes == want, (policy, nodes, want)
        if policy not in ("bind_all",):
            assert len(set(nodes)) > 1, (policy, nodes)  # the check is not trivially true


def test_replicas_are_one_per_node_and_local(guest):
    """numaprof_replicate (numaprof_place.h): a thread bound to each node gets a copy of
    the table whose every page is on that node and whose bytes are the table's; after
    numaprof_replicate_free the table itself is what numaprof_local gives."""
    _, n, run = guest
    out = run.out("replicate")
    assert f"nodes {n} replicate 0" in out, out
    lines = [ln.split() for ln in out.splitlines() if ln.startswith("replica node")]
    assert sorted(int(f[2]) for f in lines) == list(range(n)), out
    for f in lines:
        node = int(f[2])
        assert f[3:7] == ["copy", "1", "equal", "1"], f
        assert [int(x) for x in f[8:]] == [node] * 64, f
    # the main thread's cached answer (a copy) is dropped with the copies
    assert "main copy 1" in out and "freed 0 local_after_free 1" in out, out
