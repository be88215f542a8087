"""End-to-end: a loop's register spills (tests/progs/spills.c).  The slots of its
variables are named after them from their DWARF locations; the slots of the
loop-invariant products and differences the compiler keeps across a call are no one
variable's: they are named by both operands (`u * v (temp)`), thread-private objects of
their function, not an anonymous `[stack]`, and the local array of the same frame keeps
its name."""

import re

import pytest
from helpers import recorded_report

#: the invariants of spills.c: `u * v`, `u * w`, `v * w`, `u - v`, `v - w`, `u - w`
INVARIANT = re.compile(r"^[uvw] [-*] [uvw] \(temp\)$")

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    return recorded_report(tmp_path_factory.mktemp("spills"), "spills", "1000", "150000")


def test_spill_slots_of_invariants_are_named_by_their_operands(report):
    invariants = [o for o in report["objects"] if INVARIANT.match(o["name"])]
    assert invariants, sorted(o["name"] for o in report["objects"])
    for sp in invariants:
        assert sp["kind"] == "stack" and sp["attribution"] == "spill" and sp["thread_private"] is True, sp
        assert 8 <= sp["size"] <= 64, sp  # one or two factors of 8 bytes
    top = max(invariants, key=lambda o: o["samples"])
    assert top["count"] == 2 and top["threads"] == 2 and top["reads"] >= 0.9, top  # a frame per thread
    assert sum(o["share"] for o in invariants) >= 0.1, invariants
    # no slot of the frame is left to the function's anonymous spills
    spills = [o for o in report["objects"] if o["name"] == "(spills) main._omp_fn.0"]
    assert sum(o["samples"] for o in spills) <= 0.02 * report["profile"]["with_address"], spills
    # nothing is left on an anonymous stack
    anon = [o for o in report["objects"] if o["name"] == "[stack]" or o["name"].startswith("stack@")]
    assert sum(o["samples"] for o in anon) <= 0.02 * report["profile"]["with_address"], anon


def test_variables_of_the_frame_keep_their_names(report):
    objs = {o["name"]: o for o in report["objects"]}
    assert objs["hist"]["attribution"] == "frame" and objs["hist"]["thread_private"] is True
    assert objs["hist"]["size"] == 4096
    # the accumulators' own slots are named after them (their DWARF locations say so)
    spilled_vars = [n for n in "abcdef" if n in objs]
    assert spilled_vars and all(objs[n]["attribution"] == "frame" for n in spilled_vars), sorted(objs)


@pytest.fixture(scope="module")
def report_novar(tmp_path_factory):
    return recorded_report(tmp_path_factory.mktemp("spills_novar"), "spills_novar", "1000", "150000")


def test_spills_of_a_frame_with_no_variable_in_it(report_novar):
    """The outlined loop keeps every variable in a register and only the compiler's
    invariants in its frame (tests/progs/spills_novar.c): its DWARF still describes the
    function, so they are its spills, not an anonymous `[stack]` (before: 85 % of the
    samples on `[stack]` and `stack@…`)."""
    objs = {o["name"]: o for o in report_novar["objects"]}
    sp = objs.get("(spills) relax._omp_fn.0")
    assert sp is not None, sorted(objs)
    assert sp["attribution"] == "spill" and sp["thread_private"] is True and sp["threads"] == 2, sp
    # with the invariants named by their operands (`u * w (temp)`), the frame's slots
    # are the function's: together most of the samples
    frame = [o for o in report_novar["objects"] if o["attribution"] == "spill" and o["site"] == "relax._omp_fn.0"]
    assert all(o["size"] <= 64 and o["thread_private"] for o in frame), frame
    assert sum(o["share"] for o in frame) >= 0.5, frame
    anon = [o for o in report_novar["objects"] if o["name"] == "[stack]" or o["name"].startswith("stack@")]
    assert sum(o["samples"] for o in anon) <= 0.02 * report_novar["profile"]["with_address"], anon


def test_line_tables_only_name_no_spills(tmp_path):
    """At -g1 the DWARF has the functions but not their variables: a frame holding a real
    array (spills.c's `hist`) cannot be told from the compiler's slots, so nothing in it
    is called a spill."""
    doc = recorded_report(tmp_path, "spills", "1000", "60000", flags=("-g1",))
    assert not [o["name"] for o in doc["objects"] if o["name"].startswith("(spills)")]
    assert any(o["kind"] == "stack" for o in doc["objects"])  # the frame's samples are there


def test_private_scalars_are_regular_and_wider_objects_are_classified(report):
    """A thread-private object no wider than a cache line is regular by the patterns'
    definitions (docs/classifier.md "Thread-private scalars"): the accumulators `a`..`f`
    (8 bytes each, a frame per thread) and the invariants' slots.  `hist` of the same
    frame, 4 KiB updated at random, is wider: its pattern is the model's."""
    objs = {o["name"]: o for o in report["objects"]}
    scalars = [objs[n] for n in "abcdef" if n in objs] + [o for o in objs.values() if INVARIANT.match(o["name"])]
    for o in scalars:
        assert o["thread_private"] and o["size"] <= 64, o["name"]
        assert (o["pattern"], o["pattern_confidence"], o["samples_needed"]) == ("regular", 1.0, 0), o
    hist = objs["hist"]
    assert hist["pattern"] == "random", hist  # not made regular: the model's answer


def test_a_callers_local_reached_through_a_callee_is_its_threads(tmp_path):
    """`accumulate` updates its caller's `double sums[4]` through its parameter `v`
    (tests/progs/callee_local.c): the addresses are outside the sampled frame but on the
    sampled thread's own stack, so each instance is that thread's (before: owner
    unknown, not thread-private, and the model's `irregular`)."""
    doc = recorded_report(tmp_path, "callee_local", "4096", "100000")
    objs = {o["name"]: o for o in doc["objects"]}
    v = objs.get("v")
    assert v is not None, sorted(objs)
    assert (v["kind"], v["attribution"], v["count"], v["threads"]) == ("stack", "register", 2, 2), v
    assert v["thread_private"] is True and v["pattern"] == "regular", v
    assert v["share"] >= 0.5, v


def test_slots_holding_an_arrays_elements_are_its_copies(tmp_path):
    """tests/progs/block_solve.c: BT's matmul_sub in C.  gcc -O2 reads the elements of
    the blocks `a` and `b` once and keeps some of them in the frame: every store into
    such a slot stored a register loaded from `a` (or `b`) through its pointer, so the
    slot is `a (copy)`, private to its thread.  The products in progress it keeps there
    (`a[0][i] * b[j][0]`, computed from a register holding a's element) are a's
    temporaries, `a (temp)`, and b's and out's likewise: named, not the function's
    anonymous spills (before: 40 % of the samples on `(spills) matmul_sub`).  The
    blocks' arrays keep their own names."""
    doc = recorded_report(tmp_path, "block_solve", "200000", "100")
    objs = {o["name"]: o for o in doc["objects"]}
    copy = objs.get("a (copy)")
    assert copy is not None, sorted(objs)
    assert (copy["kind"], copy["attribution"], copy["site"]) == ("stack", "spill", "matmul_sub"), copy
    assert copy["thread_private"] is True and copy["threads"] == 2, copy
    assert copy["share"] >= 0.02 and copy["size"] <= 64, copy
    temps = [o for o in doc["objects"] if o["name"].endswith(" (temp)")]
    assert {o["name"] for o in temps} <= {"a (temp)", "b (temp)", "out (temp)"}, sorted(objs)
    for o in temps:
        assert (o["kind"], o["attribution"], o["site"], o["thread_private"]) == (
            "stack", "spill", "matmul_sub", True), o
    rest = objs.get("(spills) matmul_sub", {"samples": 0, "share": 0.0})
    assert sum(o["share"] for o in temps) >= 0.2, (temps, rest)
    assert rest["samples"] < sum(o["samples"] for o in temps), (temps, rest)
    # the heap arrays: by address, named after their variables as ever
    assert objs["lhs"]["kind"] == "heap" and objs["c"]["kind"] == "heap", sorted(objs)
    assert "a" not in objs and "b" not in objs, sorted(objs)  # no copy taken for the array


def test_slots_holding_thread_local_elements_are_their_arrays_copies(tmp_path):
    """tests/progs/tls_blocks.c: BT's threadprivate Jacobians `fjac` and `njac` in C,
    multiplied block by block.  The code reaches them from the thread pointer (`mov
    %fs:0, %rsi; lea -0x1900(%rsi), %rcx`), and gcc -O2 keeps some of the elements it
    read, and products in progress, in the frame: those slots are the arrays' copies and
    temporaries, private to their thread, not `(spills) combine` (before: 23 % of the
    samples there).  The arrays themselves stay one thread-local object each."""
    doc = recorded_report(tmp_path, "tls_blocks", "4096", "40")
    objs = {o["name"]: o for o in doc["objects"]}
    for name in ("fjac", "njac"):
        assert (objs[name]["kind"], objs[name]["thread_private"]) == ("static", True), objs[name]
    mine = [o for o in doc["objects"] if o["name"].split(" (")[0] in ("fjac", "njac")
            and o["name"].endswith((" (copy)", " (temp)"))]
    assert mine, sorted(objs)
    for o in mine:
        assert (o["kind"], o["attribution"], o["site"], o["thread_private"]) == (
            "stack", "spill", "combine", True), o
    rest = objs.get("(spills) combine", {"samples": 0, "share": 0.0})
    assert sum(o["share"] for o in mine) >= 0.1, (mine, rest)
    assert rest["samples"] < 0.1 * sum(o["samples"] for o in mine), (mine, rest)
