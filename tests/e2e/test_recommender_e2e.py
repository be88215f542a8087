"""End-to-end: the recommender on real recordings of the bundled examples (2 threads, this
one-node machine), evaluated for the source documents' platforms with --target.

Agreement with Pousa Ribeiro et al. 2009, Table I, and Pousa Ribeiro et al. 2010, §4: local
placement for the master-initialised streamed arrays on the high-NUMA-factor Itanium 2 and
on the low-factor Opteron, a spreading policy for the randomly gathered array, no change
for the NUMA-aware program, and nothing to place on the recorded one-node machine.
"""

import pytest

pytestmark = pytest.mark.e2e

SPREADING = {"cyclic", "cyclic_block", "skew_mapp", "prime_mapp", "random", "random_block",
             "weighted_interleave"}
LOCAL = {"parallel_init", "bind_block"}
TARGETS = ["2s", "4s", "itanium2", "8n-opteron"]


def _suggest(recorded, program, target):
    from numaprof.analyzer import analyze
    from numaprof.recommender import suggest
    from numaprof.recommender.targets import resolve_target

    analysis = analyze(recorded(program).dir)
    return {o.name: o for o in suggest(analysis, resolve_target(target, analysis.topology)).objects}


@pytest.mark.parametrize("target", TARGETS)
def test_master_initialised_streams_are_placed_locally(recorded, target):
    s = _suggest(recorded, "serial_init", target)
    placed = [n for n in ("a", "b", "c") if n in s]
    assert placed, list(s)
    for name in placed:
        assert s[name].policy in LOCAL, (target, name, s[name].reason)
        assert s[name].policy != "first_touch"


@pytest.mark.parametrize("target", TARGETS)
def test_gathered_array_is_spread(recorded, target):
    s = _suggest(recorded, "gather", target)
    assert s["lookup"].policy in SPREADING, (target, s["lookup"].reason)
    if "idx" in s:
        assert s["idx"].policy in LOCAL, (target, s["idx"].reason)


@pytest.mark.parametrize("target", TARGETS)
def test_numa_aware_program_is_left_alone(recorded, target):
    s = _suggest(recorded, "numa_aware", target)
    assert s
    for o in s.values():
        assert o.policy == "first_touch" and o.change == "none", (target, o.name, o.reason)


@pytest.mark.parametrize("program", ["serial_init", "gather", "numa_aware"])
def test_one_node_machine_changes_nothing(recorded, program):
    from numaprof.analyzer import analyze
    from numaprof.recommender import suggest

    analysis = analyze(recorded(program).dir)
    if analysis.topology.n_nodes != 1:
        pytest.skip("this machine has more than one NUMA node")
    s = suggest(analysis)
    assert all(o.policy == "first_touch" for o in s.objects)
    assert s.commands == []
    assert any("one NUMA node" in n for n in s.notes)


def test_code_change_note_names_the_final_policies(recorded):
    """The note listing code changes is written after the patch fallbacks: an array whose
    parallel first-touch loop cannot be added (serial_init's `a` is first touched inside
    libc) is named with the policy it finally gets, as its suggestion says."""
    doc = recorded("serial_init").suggest
    patched = [o for o in doc["objects"] if o["change"] == "patch"]
    assert patched, doc["objects"]
    notes = [n for n in doc["notes"] if n.startswith("placement changes needing a code change")]
    assert len(notes) == 1, doc["notes"]
    for o in patched:
        assert f"{o['name']} ({o['policy']})" in notes[0], (o["name"], o["policy"], notes[0])
