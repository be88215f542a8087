"""Lab tier: the recommender's predictions against a real 2-node machine.

In a 2-node guest the master-initialised example and the NUMA-aware one (its fix: the
parallel first touch with the compute loop's static schedule) are recorded with two
threads, the latter bound as `suggest` says.  On the host, from those profiles (which
carry the guest's topology): the master-initialised arrays get parallel_init /
bind_block, the NUMA-aware program gets no change, and the local fraction predicted for
the fix is the one measured on the fixed program, within 0.15 (issue 5's margin).
Statistical checks with margins; lab timings are never used.
"""


import numpy as np
import pytest
from helpers import EXAMPLES

pytestmark = pytest.mark.lab

LOCAL = {"parallel_init", "bind_block"}


@pytest.fixture(scope="module")
def recordings(examples_built, tmp_path_factory, labkit):
    work = tmp_path_factory.mktemp("reclab")
    # THP "always": the prediction of a parallel first touch on huge pages is checked
    guest = labkit.run_group(work, ["--nodes", "2", "--cpus-per-node", "2", "--thp", "always",
                                    "--timeout", "900"], [
        ("si", f"OMP_NUM_THREADS=2 $NUMAPROF record -o si.data -- {EXAMPLES}/serial_init 16 20"),
        ("na", "OMP_NUM_THREADS=2 OMP_PROC_BIND=spread OMP_PLACES=cores $NUMAPROF record "
               f"-o na.data -- {EXAMPLES}/numa_aware 16 20"),
    ])
    for name in ("si", "na"):
        guest.out(name)  # asserts that the recording exited 0 in the guest
    from numaprof.analyzer import analyze

    return analyze(work / "si.data"), analyze(work / "na.data")


def _hot_regular(analysis):
    return [o for o in analysis.objects if o.share >= 0.1 and o.pattern == "regular"
            and o.access is not None]


def test_master_initialised_arrays_get_local_placement(recordings):
    from numaprof.recommender import suggest

    si, _ = recordings
    assert si.topology.n_nodes == 2
    s = suggest(si)
    chosen = {o.name: o for o in s.objects}
    hot = _hot_regular(si)
    assert hot, [(o.name, o.pattern, o.share) for o in si.objects]
    for o in hot:
        if o.first_touch.serial:
            assert chosen[o.name].policy in LOCAL, (o.name, chosen[o.name].reason)
            assert chosen[o.name].predicted.local_fraction > 0.85


def test_numa_aware_program_needs_no_change_on_a_real_two_node_machine(recordings):
    from numaprof.recommender import suggest

    _, na = recordings
    s = suggest(na)
    hot = {o.name for o in _hot_regular(na)}
    assert hot
    for o in s.objects:
        if o.name in hot:
            assert o.policy == "first_touch", (o.name, o.reason)


def test_predicted_local_fraction_of_the_fix_is_measured(recordings):
    """The fixed program is the parallel first touch: its what-if row is compared (the
    choice may be bind_block).  With transparent huge pages "always" (the guest's, whatever
    this machine's mode) a 16 MiB array's 2 MiB page across the two blocks' boundary goes
    whole to thread 1: 2-11 % of thread 0's pages were measured remote in 6 recordings
    (2026-12-06).  The prediction models that frame from the first touches' page size; a
    prediction of all pages local was 0.1505 off in one CI run."""
    from numaprof.recommender import suggest

    si, na = recordings
    s = suggest(si)
    predicted = [o.alternative("parallel_init").local_fraction for o in s.objects
                 if o.policy in LOCAL and o.share >= 0.1 and o.alternative("parallel_init")]
    measured = [(o.local_fraction, o.samples) for o in _hot_regular(na)]
    assert predicted and measured
    p = float(np.mean(predicted))
    m = float(np.average([x for x, _ in measured], weights=[w for _, w in measured]))
    assert abs(p - m) <= 0.15, (p, m)
