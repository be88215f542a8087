"""First touch of transparent huge pages (one fault covers 2 MiB):
the collector samples completed minor/major faults with the size of the page they mapped,
and the analyzer counts a 2 MiB fault as the 512 base pages it placed."""

import json

import numpy as np
import profgen
import pytest
from helpers import ROOT, compile_openmp, run_numaprof

from numaprof.analyzer import analyze
from numaprof.analyzer.profile import open_profile

MiB = 1 << 20
PAGE = 4096


@pytest.fixture(scope="module")
def thp_profile(tmp_path_factory):
    d = tmp_path_factory.mktemp("thp")
    exe = d / "thp_touch"
    compile_openmp(ROOT / "tests" / "progs" / "thp_touch.c", exe)
    prof = d / "p.data"
    # every fault recorded: what is tested is a 2 MiB fault counted as its 512 pages (at the
    # default one in 17 under THP "madvise", an array of 8 huge faults may have no record)
    proc = run_numaprof("record", "--fault-period", "1", "-o", prof, "--", exe, "16", "60",
                        env={"OMP_NUM_THREADS": "2"}, check=True)
    sizes = np.asarray(open_profile(prof).table("faults")["page_size"])
    if "huge=1" not in proc.stdout or not (sizes == 2 * MiB).any():
        pytest.skip("the kernel gave no transparent huge page here "
                    "(/sys/kernel/mm/transparent_hugepage/enabled is never?)")
    doc = json.loads(run_numaprof("report", prof, "--format", "json", check=True).stdout)
    return prof, {o["name"]: o for o in doc["objects"]}


def test_every_base_page_of_a_huge_page_is_first_touched(thp_profile):
    prof, objs = thp_profile
    pages = 16 * MiB // PAGE
    split, master = objs["split"]["first_touch"], objs["master"]["first_touch"]
    # one fault per 2 MiB, counted as the 512 pages it placed
    assert split["pages"] == pages and master["pages"] == pages, (split, master)
    assert 0 < master["huge_pages"] <= pages and master["huge_page_size"] == 2 * MiB, master
    assert master["threads"] == 1 and master["serial"], master
    # the static schedule gives each of the 2 threads its own 8 MiB (four huge pages)
    assert split["threads"] == 2 and not split["serial"], split
    assert abs(split["master_fraction"] - 0.5) <= 0.13, split
    manifest = json.loads((prof / "manifest.json").read_text())
    assert manifest["sampling"]["fault_event"] == "minor-faults+major-faults"


def test_huge_fault_expands_within_its_2mib_and_objects(tmp_path):
    """Synthetic: one 2 MiB fault and two 4 KiB faults; the huge one covers the 512 pages of
    its aligned 2 MiB, split between the two objects it spans; 4 KiB faults stay single."""
    w = profgen.ProfileWriter(tmp_path / "p")
    w.manifest()
    w.topology([[0, 1]])
    base = 0x7F00_0000_0000  # 2 MiB aligned
    # a: the first 1 MiB of the huge page; b: the next 3 MiB (its first MiB is in it)
    w.table("objects", time=[1, 1], free_time=[0, 0], pid=[9, 9], tid=[9, 9],
            addr=[base, base + MiB], size=[MiB, 3 * MiB], kind=[1, 1], stack=[1, 2], prev=[0, 0])
    w.table("stack_frames", stack=[1, 2], depth=[0, 0], ip=[0x401000, 0x401040])
    w.table("samples", time=[10, 11], pid=[9, 9], tid=[9, 10], cpu=[0, 1], ip=[0, 0],
            addr=[base + 64, base + MiB + 64], access=[1, 1])
    w.table("faults", time=[5, 6, 7], pid=[9, 9, 9], tid=[9, 10, 10], cpu=[0, 1, 1],
            ip=[0x401100] * 3, addr=[base + 4096 * 7 + 12, base + 2 * MiB, base + 2 * MiB + PAGE],
            flags=[0] * 3, source=[3] * 3, page_size=[2 * MiB, PAGE, PAGE])
    objs = {o.address: o for o in analyze(w.path).objects}
    a, b = objs[base], objs[base + MiB]
    assert a.first_touch.pages == 256 and a.first_touch.threads == 1
    assert b.first_touch.pages == 256 + 2  # the huge page's second MiB, then two 4 KiB pages
    assert b.first_touch.threads == 2
    # which of them a huge page placed (the recommender's parallel first touch of them)
    assert (a.first_touch.huge_pages, a.first_touch.huge_page_size) == (256, 2 * MiB)
    assert (b.first_touch.huge_pages, b.first_touch.huge_page_size) == (256, 2 * MiB)
