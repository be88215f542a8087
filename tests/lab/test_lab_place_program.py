"""Lab tier: numaprof_place.h on a 4-node guest puts every page on the node
recommender/policies.py gives, for every policy (docs/recommender.md)."""

import pytest
from placekit import C_POLICIES, build, check_pages_against_python

pytestmark = pytest.mark.lab


def test_lab_four_nodes_c_placement_equals_python_model(tmp_path, labkit):
    """Ranges that are not a multiple of the page size, every policy, page for page."""
    labkit.require_lab()
    exe = build(tmp_path)
    proc = labkit.run_lab(tmp_path, ["--nodes", "4", "--timeout", "900"], [str(exe), "place"])
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert proc.stdout.count(" ok") == len(C_POLICIES) - 1, proc.stdout[-3000:]
    assert check_pages_against_python(proc.stdout, min_nodes=4) == (len(C_POLICIES) - 1) * 5
