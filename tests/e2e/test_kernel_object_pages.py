"""End-to-end: kernel_object_pages (what `suggest --verify` reads from a lab recording)
on a profile recorded here: the arrays serial_init frees before it exits are located by
the shim's move_pages at free (forced on this one-node machine), named from the profile's
archive, counted per node and per sixteenth of the array."""

import pytest
from helpers import EXAMPLES, run_numaprof

from numaprof.analyzer.pages import kernel_object_pages

pytestmark = pytest.mark.e2e


def test_freed_arrays_are_located_and_named(tmp_path):
    prof = tmp_path / "p.data"
    run_numaprof("record", "-o", prof, "--", EXAMPLES / "serial_init", "8", "5",
                 env={"OMP_NUM_THREADS": "2", "NUMAPROF_SHIM_PAGES": "1"}, check=True)
    got = {o.name: o for o in kernel_object_pages(prof)}
    assert set(got) >= {"a", "b", "c"}, sorted(got)
    for name in "abc":
        o = got[name]
        assert o.pages_source == "move_pages_at_free", o
        assert o.site.startswith("main@serial_init.c:")
        # 8 MiB: 2048 pages, one more when malloc's header pushes it over a page boundary
        assert 2048 <= sum(o.pages_by_node) <= 2049, o
        # part by part: 1024 of the pages asked, 64 in each sixteenth (scaled to the
        # object: 128), all on the one node
        assert len(o.pages_by_segment) == 1 and len(o.pages_by_segment[0]) == 16, o
        assert all(127 <= n <= 129 for n in o.pages_by_segment[0]), o.pages_by_segment
        assert abs(sum(o.pages_by_segment[0]) - sum(o.pages_by_node)) <= 16, o  # rounding
