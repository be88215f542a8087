"""The LD_PRELOAD allocation shim (docs/record.md) on a torture program.

tests/progs/shimtorture.c allocates with every intercepted allocator from many threads,
forks while they run, execs itself in the child and allocates from a SIGALRM handler.
With the shim preloaded its stdout and exit status must not change, and the recorded
objects (after nmp_shim_convert) must be exactly the large allocations it made.

The shim is taken from $NUMAPROF_LIBEXEC/libnumaprof_shim.so, else built with CMake once
per session.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import stat
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from helpers import ROOT, run_numaprof

PROGS = ROOT / "tests" / "progs"

try:
    from numaprof.analyzer.profile import read_table
except ImportError:  # plain `pytest` from elsewhere: use the checkout
    sys.path.insert(0, str(ROOT))
    from numaprof.analyzer.profile import read_table

pytestmark = pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc")

# Sizes and counts of tests/progs/shimtorture.c
NTHREADS, ITERS, NSIGNAL = 8, 12, 20
KIND = {"malloc": 1, "calloc": 2, "realloc": 3, "aligned": 4, "mmap": 5, "numa": 6}
BASES = {  # base size -> objects.kind
    200000: KIND["malloc"], 210000: KIND["calloc"], 220000: KIND["realloc"],
    70000: KIND["realloc"], 230000: KIND["realloc"], 240000: KIND["mmap"],
    250000: KIND["aligned"], 260000: KIND["aligned"], 280000: KIND["aligned"],
    290000: KIND["aligned"], 310000: KIND["mmap"], 320000: KIND["mmap"],
}
BASE_ALIGNED_ALLOC, BASE_NUMA = 270000, 300000
SIZE_SIGNAL_MALLOC, SIZE_SIGNAL_MMAP = 333333, 200704
SIZE_MAIN, SIZE_FORK_CHILD, SIZE_EXEC_CHILD = 555555, 666666, 777777
SIZE_ALTSTACK, SIZE_LEAF = 444444, 454545

# nmp_shim_format.h
SHIM_RECORD = np.dtype([
    ("type", "<u4"), ("tid", "<u4"), ("time", "<u8"), ("addr", "<u8"), ("size", "<u8"),
    ("prev", "<u8"), ("kind", "u1"), ("nframes", "u1"), ("flags", "<u2"), ("period", "<u4"),
    ("frames", "<u8", (16,)), ("end", "<u8"), ("extra", "<u8"),
])
ALLOC, FREE, TOTALS, START, PAGES, SHORT = 1, 2, 3, 4, 5, 6
AT_FREE, AT_EXIT = 1, 2
F_SAMPLED, F_ENDED, F_OWNER_FREED = 2, 4, 8
POOL_SLOTS = 8192  # NMP_SHIM_POOL_SLOTS


def slots_of(path: Path) -> np.ndarray:
    """Every slot of a shim file (claimed or not), after its header."""
    return np.frombuffer(path.read_bytes()[4096:], SHIM_RECORD)


# the torture run samples small allocations often, to exercise that path under threads,
# signals, fork and exec too
TORTURE_SMALL_SAMPLE = 4096


def _without_sampled(recs):
    """The records of tracked allocations: a sample of the small ones (ALLOC with
    F_SAMPLED) and the FREEs that end them left out."""
    keep = np.ones(len(recs), dtype=bool)
    sampled_live: set[int] = set()
    for i in np.flatnonzero((recs["type"] == ALLOC) | (recs["type"] == FREE)).tolist():
        a = int(recs["addr"][i])
        if recs["type"][i] == ALLOC:
            if recs["flags"][i] & F_SAMPLED and recs["flags"][i] & F_ENDED:
                keep[i] = False  # a deferred record: its release is in it
            elif recs["flags"][i] & F_SAMPLED:
                sampled_live.add(a)
                keep[i] = False
            else:
                sampled_live.discard(a)
        elif a in sampled_live and recs["kind"][i] == 1:
            sampled_live.discard(a)
            keep[i] = False
    return recs[keep]


def _run(cmd, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, timeout=600, **kw)


@pytest.fixture(scope="session")
def shim_lib(tmp_path_factory) -> Path:
    libexec = os.environ.get("NUMAPROF_LIBEXEC")
    if libexec:
        lib = Path(libexec) / "libnumaprof_shim.so"
        assert lib.exists(), f"NUMAPROF_LIBEXEC={libexec} has no libnumaprof_shim.so"
        return lib
    if shutil.which("cmake") is None:
        pytest.skip("needs cmake to build the shim (or set NUMAPROF_LIBEXEC)")
    build = tmp_path_factory.mktemp("shim-build")
    r = _run(["cmake", "-S", str(ROOT), "-B", str(build), "-DCMAKE_BUILD_TYPE=RelWithDebInfo"])
    assert r.returncode == 0, r.stdout + r.stderr
    r = _run(["cmake", "--build", str(build), "--target", "numaprof_shim", "-j2"])
    assert r.returncode == 0, r.stdout + r.stderr
    libs = list(build.rglob("libnumaprof_shim.so"))
    assert libs, "the build produced no libnumaprof_shim.so"
    return libs[0]


@pytest.fixture(scope="session")
def shimconv(tmp_path_factory) -> Path:
    """tests/progs/shimconv_main.c: nmp_shim_convert(dir) as a command."""
    out = tmp_path_factory.mktemp("shimconv") / "shimconv"
    src = ROOT / "collector" / "src"
    r = _run(["gcc", "-O1", "-g", "-Wall", "-Wextra", "-Werror", "-D_GNU_SOURCE",
              f"-I{ROOT / 'collector' / 'include'}", f"-I{src}", str(PROGS / "shimconv_main.c"),
              str(src / "shimconv.c"), str(src / "shimstate.c"), str(src / "table.c"), str(src / "schema.c"), str(src / "util.c"), "-o", str(out)])
    assert r.returncode == 0, r.stderr
    return out


def _has_libnuma(tmp: Path) -> bool:
    probe = tmp / "probe.c"
    probe.write_text("#include <numa.h>\nint main(void) { return numa_available() < -1; }\n")
    return _run(["gcc", str(probe), "-o", str(tmp / "probe"), "-lnuma"]).returncode == 0


@pytest.fixture(scope="session")
def torture(tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("torture")
    exe = tmp / "shimtorture"
    # -O0 -no-pie: the marked sites keep their own frames and absolute addresses for addr2line
    cmd = ["gcc", "-O0", "-g", "-no-pie", "-Wall", "-Wextra", "-Werror", "-pthread",
           str(PROGS / "shimtorture.c"), "-o", str(exe)]
    if _has_libnuma(tmp):
        cmd[1:1] = ["-DWITH_LIBNUMA"]
        cmd.append("-lnuma")
    r = _run(cmd)
    assert r.returncode == 0, r.stderr
    return exe


class Run:
    def __init__(self, exe: Path, shim: Path | None, outdir: Path | None, extra_env=None):
        env = {k: v for k, v in os.environ.items()
               if k not in ("LD_PRELOAD", "NUMAPROF_DIR", "NUMAPROF_ALLOC_THRESHOLD")}
        if shim:
            env["LD_PRELOAD"] = str(shim)
        if outdir:
            outdir.mkdir(mode=0o700, exist_ok=True)
            env["NUMAPROF_DIR"] = str(outdir)
        env.update(extra_env or {})
        self.proc = _run([str(exe)], env=env, cwd=outdir or exe.parent)
        self.roles = dict(re.findall(r"^role (\w+) (\d+)$", self.proc.stderr, re.M))
        self.roles = {k: int(v) for k, v in self.roles.items()}
        self.numa = "numa yes" in self.proc.stderr
        self.dir = outdir


@pytest.fixture(scope="session")
def plain(torture):
    return Run(torture, None, None)


@pytest.fixture(scope="session")
def shimmed(torture, shim_lib, tmp_path_factory):
    # where the pages are is asked on one memory node too (it is not, by default); every
    # block recorded one by one, however short its life (the summaries: test_short_lived_*)
    return Run(torture, shim_lib, tmp_path_factory.mktemp("shimmed") / "prof",
               extra_env={"NUMAPROF_SHIM_PAGES": "1", "NUMAPROF_SHORT_LIVED": "0",
                          "NUMAPROF_SMALL_SAMPLE": str(TORTURE_SMALL_SAMPLE)})


@pytest.fixture(scope="session")
def raw_records(all_records):
    """{pid: records} of the tracked allocations (no sampled small ones)."""
    return {pid: _without_sampled(r) for pid, r in all_records.items()}


@pytest.fixture(scope="session")
def all_records(shimmed):
    """{pid: records} of the shim files, read before conversion removes them."""
    out = {}
    for f in sorted(shimmed.dir.glob("shim.*.bin")):
        data = f.read_bytes()
        assert data[:8] == b"NMPSHIM1", f
        version, recsize, header_size, pool_slots = np.frombuffer(data[8:24], "<u4")
        assert (version, recsize, header_size, pool_slots) == (5, SHIM_RECORD.itemsize, 4096, POOL_SLOTS)
        # every process ended normally: the blocks still live went from the pool into slots
        pool = np.frombuffer(f.with_suffix(".pool").read_bytes(), SHIM_RECORD)
        assert len(pool) == POOL_SLOTS and not pool["type"].any(), f
        next_slot = int(np.frombuffer(data[24:32], "<u8")[0])
        assert (len(data) - header_size) % recsize == 0, "slots are whole"
        recs = np.frombuffer(data[header_size:], SHIM_RECORD)
        # mapped mode: slots are claimed in order; the rest of the last chunk is empty
        assert next_slot <= len(recs) and not recs["type"][next_slot:].any()
        recs = recs[:next_slot]
        # every claimed slot was completed; the only empty ones are the unused end of the
        # previous image's last chunk, right before the exec'd image's first records: the
        # blocks the previous image left live (from its pool), then its START
        empty = np.flatnonzero(recs["type"] == 0)
        for k in (empty[np.append(np.diff(empty) != 1, True)] if len(empty) else empty).tolist():
            nxt = k + 1 + np.flatnonzero(recs["type"][k + 1:] != ALLOC)[0]
            assert recs["type"][nxt] == START, f
            assert not (recs["flags"][k + 1:nxt] & F_ENDED).any(), f
        out[int(f.name.split(".")[1])] = recs[recs["type"] != 0]
    return out


@pytest.fixture(scope="session")
def converted(shimmed, all_records, shimconv):
    """(totals, the tracked allocations' objects, stack_frames); the sampled small ones
    are in `sampled_objects`."""
    r = _run([str(shimconv), str(shimmed.dir)])
    assert r.returncode == 0, r.stdout + r.stderr
    totals = json.loads(r.stdout)
    objs = {k: np.asarray(v) for k, v in read_table(shimmed.dir, "objects").items()}
    frames = read_table(shimmed.dir, "stack_frames")
    tracked = objs["sample_period"] == 0
    return totals, {k: v[tracked] for k, v in objs.items()}, \
        {k: np.asarray(v) for k, v in frames.items()}


@pytest.fixture(scope="session")
def sampled_objects(shimmed, converted):
    objs = {k: np.asarray(v) for k, v in read_table(shimmed.dir, "objects").items()}
    return {k: v[objs["sample_period"] > 0] for k, v in objs.items()}


def test_plain_run_is_sane(plain):
    assert plain.proc.returncode == 0, plain.proc.stderr
    assert "failures: 0" in plain.proc.stdout
    assert "child: exit 3" in plain.proc.stdout
    assert set(plain.roles) == {"main", "fork_child", "exec_child"}


def test_shim_changes_nothing_the_program_sees(plain, shimmed):
    assert shimmed.proc.stdout == plain.proc.stdout
    assert shimmed.proc.returncode == plain.proc.returncode == 0


def test_one_file_per_process_and_image(shimmed, raw_records):
    main, child = shimmed.roles["main"], shimmed.roles["fork_child"]
    assert shimmed.roles["exec_child"] == child  # execve keeps the pid
    assert set(raw_records) == {main, child}
    for pid in (main, child):
        st = os.stat(shimmed.dir / f"numa_maps.{pid}")
        assert stat.S_IMODE(st.st_mode) == 0o600
    starts = {pid: int((r["type"] == START).sum()) for pid, r in raw_records.items()}
    assert starts == {main: 1, child: 2}  # the fork child's image and the exec'd one
    for r in raw_records.values():
        assert r[0]["type"] == START
        assert set(np.unique(r["type"])) <= {ALLOC, FREE, TOTALS, START, PAGES}
        allocs = (r["type"] == ALLOC) & (r["size"] != SIZE_ALTSTACK)
        assert np.all(r["nframes"][allocs] > 0)


def _pages_asked(rec) -> tuple[int, dict[int, int], dict[int, int]]:
    """(pages asked, {node: count}, {segment: count}) of one PAGES record (node -1: not
    present; NMP_PAGES_ENTRY in nmp_shim_format.h)."""
    nodes: dict[int, int] = {}
    segments: dict[int, int] = {}
    for e in (int(e) for e in rec["frames"][: rec["nframes"]]):
        count = e & ((1 << 40) - 1)
        nodes[(e >> 48) - 1] = nodes.get((e >> 48) - 1, 0) + count
        segments[(e >> 40) & 0xFF] = segments.get((e >> 40) & 0xFF, 0) + count
    return int(rec["prev"]), nodes, segments


def test_pages_are_asked_at_release_and_at_exit(shimmed, raw_records, converted):
    """Every release of a tracked block is preceded by the kernel's answer on where its
    pages were (the torture test frees fewer than the 4096 that are always asked), and
    every block live at exit gets one then; the counts add up to the pages asked (all of
    them, up to 1024 spread over the block), sixteenth by sixteenth."""
    main = shimmed.roles["main"]
    r = raw_records[main]
    pages = np.flatnonzero(r["type"] == PAGES)
    assert len(pages) > 0
    asked_at = {}
    # one query may take several records (more than 16 node x sixteenth entries), one
    # after the other with the same time and address
    queries: dict[tuple[int, int, int], list[int]] = {}
    for i in pages:
        queries.setdefault((int(r["time"][i]), int(r["addr"][i]), int(r["kind"][i])), []).append(i)
    for rows in queries.values():
        i = rows[0]
        parts = [_pages_asked(r[j]) for j in rows]
        asked = parts[0][0]
        nodes = {n: sum(p[1].get(n, 0) for p in parts) for p in parts for n in p[1]}
        segments = {k: sum(p[2].get(k, 0) for p in parts) for p in parts for k in p[2]}
        span = (int(r["addr"][i]) + int(r["size"][i]) + 4095) // 4096 - int(r["addr"][i]) // 4096
        assert asked == min(span, 1024)
        assert sum(nodes.values()) == asked
        # the pages asked, spread in address order over the sixteenths of the block
        assert segments == {k: n for k in range(16)
                            if (n := sum(1 for p in range(asked) if p * 16 // asked == k))}
        assert all(n >= -1 for n in nodes)
        asked_at.setdefault((int(r["addr"][i]), int(r["kind"][i])), []).append(i)
    last_alloc = {}
    missing = []
    ended = 0
    for i, rec in enumerate(r):
        if rec["type"] == ALLOC and rec["flags"] & F_ENDED:
            # a deferred record, written at the release: asked during the block's life,
            # before this record
            a, t0, t1 = int(rec["addr"]), int(rec["time"]), int(rec["end"])
            ended += 1
            if not any(j < i and t0 <= int(r["time"][j]) <= t1 for j in asked_at.get((a, AT_FREE), [])):
                missing.append(a)
        elif rec["type"] == ALLOC:
            last_alloc[int(rec["addr"])] = i
        elif rec["type"] == FREE and rec["kind"] == 1 and int(rec["addr"]) in last_alloc:
            # free() of a tracked block: asked after its allocation, before this record
            a = int(rec["addr"])
            if not any(last_alloc[a] < j < i for j in asked_at.get((a, AT_FREE), [])):
                missing.append(a)
    assert ended > 0
    assert not missing, [hex(a) for a in missing]
    _, objs, _ = converted
    live = objs["free_time"] == 0
    assert live.sum() > 0
    for pid, recs in raw_records.items():
        exit_asked = {int(x["addr"]) for x in recs if x["type"] == PAGES and x["kind"] == AT_EXIT}
        assert {int(a) for a in objs["addr"][live & (objs["pid"] == pid)]} <= exit_asked, pid
    op = read_table(shimmed.dir, "object_pages")
    assert int((np.asarray(op["source"]) == AT_EXIT).sum()) >= live.sum()


def test_pages_are_not_asked_on_one_memory_node(torture, shim_lib, tmp_path):
    """With one memory node there is no placement to find: no move_pages per release."""
    nodes = list(Path("/sys/devices/system/node").glob("node[0-9]*"))
    if len(nodes) != 1:
        pytest.skip(f"{len(nodes)} memory nodes here")
    run = Run(torture, shim_lib, tmp_path / "prof")
    recs = np.concatenate([slots_of(f) for f in run.dir.glob("shim.*.bin")])
    assert (recs["type"] == ALLOC).sum() > 0
    assert (recs["type"] == PAGES).sum() == 0


def test_threads_running_at_exit_are_counted(shimmed, raw_records):
    tid = int(re.search(r"^lingering thread (\d+)$", shimmed.proc.stderr, re.M).group(1))
    r = raw_records[shimmed.roles["main"]]
    totals = r[(r["type"] == TOTALS) & (r["tid"] == tid)]
    assert len(totals) == 1, "reported once, by the exit path"
    assert 1000 <= int(totals["prev"][0]) < 1100  # LINGER_ALLOCS plus the thread's own
    assert int(totals["size"][0]) >= 1000 * 100


def test_exec_boundary_in_the_child_file(shimmed, raw_records):
    r = raw_records[shimmed.roles["fork_child"]]
    start_idx = np.flatnonzero(r["type"] == START)
    fork_alloc = np.flatnonzero((r["type"] == ALLOC) & (r["size"] == SIZE_FORK_CHILD))
    exec_alloc = np.flatnonzero((r["type"] == ALLOC) & (r["size"] == SIZE_EXEC_CHILD))
    assert len(fork_alloc) == 1 and len(exec_alloc) == 1
    assert start_idx[0] < fork_alloc[0] < start_idx[1] < exec_alloc[0]


def _sizes(objs, pid, kind, base, threads, stride=1):
    """Sizes of pid's objects of `kind` among base + stride*(100*thread + iteration)."""
    want = sorted(base + stride * (100 * t + i) for t in threads for i in range(ITERS))
    sel = (objs["pid"] == pid) & (objs["kind"] == kind) & np.isin(objs["size"], want)
    return sorted(objs["size"][sel].tolist()), want, sel


def test_every_large_allocation_is_an_object(shimmed, converted):
    totals, objs, _ = converted
    main, child = shimmed.roles["main"], shimmed.roles["fork_child"]
    # main: 8 worker threads; the child: 3 workers before exec, 2 after
    for pid, threads in ((main, range(NTHREADS)), (child, [0, 1, 2, 0, 1])):
        for base, kind in BASES.items():
            got, want, sel = _sizes(objs, pid, kind, base, threads)
            assert got == want, f"pid {pid} base {base}"
            assert np.all(objs["free_time"][sel] >= objs["time"][sel])
            assert np.all(objs["free_time"][sel] > 0), f"base {base}: all were freed"
            assert np.all(objs["tid"][sel] != pid), "allocated by worker threads"
        got, want, _ = _sizes(objs, pid, KIND["aligned"], BASE_ALIGNED_ALLOC, threads, 64)
        assert got == want
        got, want, sel = _sizes(objs, pid, KIND["numa"], BASE_NUMA, threads)
        assert got == (want if shimmed.numa else [])
        # libnuma's own mmap of a numa_alloc_onnode block is not a second object
        assert not np.any((objs["pid"] == pid) & (objs["kind"] == KIND["mmap"])
                          & (objs["size"] >= BASE_NUMA) & (objs["size"] < BASE_NUMA + 1000))
    # a block freed and allocated again at its address from the same stack within 100 us
    # is one row (objects.instances): the signal handler's mallocs when, on a loaded
    # machine, the next SIGALRM comes as the last handler returns (2 of 20 in one run)
    assert totals["tracked_allocs"] == int(objs["instances"].sum())
    assert totals["processes"] == 2
    assert totals["small_allocs"] >= NTHREADS * ITERS * 64
    assert not list(shimmed.dir.glob("shim.*")), "converted files are removed"


def test_realloc_chains_link_to_the_previous_block(converted):
    _, objs, _ = converted
    mid = (objs["kind"] == KIND["realloc"]) & (objs["size"] >= 70000) & (objs["size"] < 71000)
    big = (objs["kind"] == KIND["realloc"]) & (objs["size"] >= 220000) & (objs["size"] < 221000)
    assert mid.sum() == big.sum() > 0
    assert np.all(objs["prev"][mid] != 0)
    for k in np.flatnonzero(big):
        same = np.flatnonzero(mid & (objs["addr"] == objs["prev"][k]) & (objs["pid"] == objs["pid"][k])
                              & (objs["tid"] == objs["tid"][k]) & (objs["size"] - 70000 == objs["size"][k] - 220000))
        assert len(same) == 1, "the middle block of the same chain"
        # the realloc ended the middle block at the moment it made the big one
        assert objs["free_time"][same[0]] == objs["time"][k]


def test_signal_handler_allocations(shimmed, converted):
    _, objs, _ = converted
    main = shimmed.roles["main"]
    sig = (objs["pid"] == main) & (objs["size"] == SIZE_SIGNAL_MALLOC)
    assert int(objs["instances"][sig].sum()) == NSIGNAL  # rows of repeats: see above
    assert np.all(objs["kind"][sig] == KIND["malloc"]) and np.all(objs["free_time"][sig] > 0)
    maps = (objs["pid"] == main) & (objs["size"] == SIZE_SIGNAL_MMAP) & (objs["kind"] == KIND["mmap"])
    assert maps.sum() >= NSIGNAL
    assert np.all(objs["free_time"][maps] > 0)
    # on an alternate signal stack the shim records the block but does not unwind
    alt = (objs["pid"] == main) & (objs["size"] == SIZE_ALTSTACK)
    assert alt.sum() == 3
    assert np.all(objs["stack"][alt] == 0xFFFFFFFF) and np.all(objs["free_time"][alt] > 0)


def test_fork_exec_lifetimes(shimmed, converted):
    _, objs, _ = converted
    child = shimmed.roles["fork_child"]
    f = np.flatnonzero((objs["pid"] == child) & (objs["size"] == SIZE_FORK_CHILD))
    e = np.flatnonzero((objs["pid"] == child) & (objs["size"] == SIZE_EXEC_CHILD))
    assert len(f) == 1 and len(e) == 1
    assert objs["kind"][f[0]] == KIND["calloc"] and objs["kind"][e[0]] == KIND["malloc"]
    # never freed, ended by the execve; the exec'd image's block lives to the end
    assert 0 < objs["free_time"][f[0]] <= objs["time"][e[0]]
    assert objs["free_time"][e[0]] == 0
    m = np.flatnonzero((objs["pid"] == shimmed.roles["main"]) & (objs["size"] == SIZE_MAIN))
    assert len(m) == 1 and objs["tid"][m[0]] == shimmed.roles["main"]


def _site_lines() -> dict[str, int]:
    lines = (PROGS / "shimtorture.c").read_text().splitlines()
    return {m.group(1): n for n, line in enumerate(lines, 1)
            if (m := re.search(r"/\* SITE (\w+) \*/", line))}


@pytest.mark.skipif(shutil.which("addr2line") is None, reason="needs addr2line")
def test_innermost_frame_is_the_allocation_site(torture, converted):
    _, objs, frames = converted
    sites = _site_lines()
    stacks = {}
    for s, d, ip in zip(frames["stack"], frames["depth"], frames["ip"], strict=True):
        stacks.setdefault(int(s), {})[int(d)] = int(ip)
    assert all(0 in st for st in stacks.values())
    ids = set(objs["stack"][objs["size"] != SIZE_ALTSTACK].tolist())
    assert 0xFFFFFFFF not in ids and ids <= set(stacks)
    for size, site in ((SIZE_MAIN, "main"), (SIZE_FORK_CHILD, "fork_child"),
                       (SIZE_EXEC_CHILD, "exec_child")):
        k = np.flatnonzero(objs["size"] == size)[0]
        ip = stacks[int(objs["stack"][k])][0]
        # a return address: the call is the instruction before it
        out = _run(["addr2line", "-e", str(torture), hex(ip - 1)]).stdout.strip()
        assert out.endswith(f"shimtorture.c:{sites[site]}"), (site, out)
        assert len(stacks[int(objs["stack"][k])]) >= 2, "the caller of the site is there too"


def test_no_dir_no_recording(torture, shim_lib, tmp_path, plain):
    work = tmp_path / "cwd"
    work.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("NUMAPROF_")}
    env["LD_PRELOAD"] = str(shim_lib)
    r = _run([str(torture)], env=env, cwd=work)
    assert r.stdout == plain.proc.stdout and r.returncode == 0
    assert list(work.iterdir()) == []


def test_threshold_from_environment(torture, shim_lib, shimconv, tmp_path):
    run = Run(torture, shim_lib, tmp_path / "p", {"NUMAPROF_ALLOC_THRESHOLD": "300000"})
    assert run.proc.returncode == 0
    r = _run([str(shimconv), str(run.dir)])
    assert r.returncode == 0, r.stdout
    objs = read_table(run.dir, "objects")
    tracked = np.asarray(objs["sample_period"]) == 0
    sizes = np.asarray(objs["size"])[tracked]
    assert sizes.min() >= 300000
    assert np.asarray(objs["size"])[~tracked].max(initial=0) < 300000  # the sampled ones
    for size in (SIZE_SIGNAL_MALLOC, SIZE_ALTSTACK, SIZE_MAIN, SIZE_FORK_CHILD, SIZE_EXEC_CHILD):
        assert size in sizes
    # everything smaller was counted, not recorded
    assert json.loads(r.stdout)["small_allocs"] > NTHREADS * ITERS * 10


@pytest.mark.skipif(shutil.which("addr2line") is None, reason="needs addr2line")
def test_same_site_and_stack_pointer_different_callers(torture, shimmed, converted):
    """The shim caches stacks by stack pointer; a cached stack must not be reused when
    the same site is reached through another caller at the same depth."""
    _, objs, frames = converted
    sites = _site_lines()
    k = np.flatnonzero((objs["pid"] == shimmed.roles["main"]) & (objs["size"] == SIZE_LEAF))
    k = k[np.argsort(objs["time"][k])]
    assert len(k) == 6
    stack_ids = objs["stack"][k].tolist()
    assert stack_ids[0::2] == [stack_ids[0]] * 3 and stack_ids[1::2] == [stack_ids[1]] * 3
    assert stack_ids[0] != stack_ids[1]
    for sid, path in ((stack_ids[0], "path_a"), (stack_ids[1], "path_b")):
        sel = frames["stack"] == sid
        ips = dict(zip(frames["depth"][sel].tolist(), frames["ip"][sel].tolist(), strict=True))
        lines = [_run(["addr2line", "-e", str(torture), hex(ips[d] - 1)]).stdout.strip()
                 for d in (0, 1)]
        assert lines[0].endswith(f"shimtorture.c:{sites['leaf']}"), lines
        assert lines[1].endswith(f"shimtorture.c:{sites[path]}"), lines


def test_write_mode_records_the_same(torture, shim_lib, shimconv, shimmed, converted, tmp_path):
    """The fallback (one write(2) per record, NUMAPROF_SHIM_MODE=write) gives the same
    objects as the mapped file."""
    run = Run(torture, shim_lib, tmp_path / "p", {"NUMAPROF_SHIM_MODE": "write"})
    assert run.proc.stdout == shimmed.proc.stdout and run.proc.returncode == 0
    for f in run.dir.glob("shim.*.bin"):
        assert (f.stat().st_size - 4096) % SHIM_RECORD.itemsize == 0
        assert np.frombuffer(f.read_bytes()[24:32], "<u8")[0] == 0, "no slot was claimed"
    r = _run([str(shimconv), str(run.dir)])
    assert r.returncode == 0, r.stdout
    got = {k: np.asarray(v) for k, v in read_table(run.dir, "objects").items()}
    got = {k: v[got["sample_period"] == 0] for k, v in got.items()}
    _, want, _ = converted
    # same allocations (sizes and kinds, per role), apart from signal phase 2, whose
    # number of handler mmaps and loop mallocs depends on timing
    def summary(objs, roles):
        phase2 = (objs["kind"] == KIND["malloc"]) & (objs["size"] >= 250000) & (objs["size"] < 250007)
        keep = (objs["size"] != SIZE_SIGNAL_MMAP) & ~phase2
        role = np.where(objs["pid"] == roles["main"], 0, 1)[keep]
        n = objs["instances"][keep]  # a row per allocation, repeats counted (see above)
        return sorted(zip(np.repeat(role, n).tolist(), np.repeat(objs["size"][keep], n).tolist(),
                          np.repeat(objs["kind"][keep], n).tolist(),
                          np.repeat(objs["free_time"][keep] > 0, n).tolist(), strict=True))
    assert summary(got, run.roles) == summary(want, shimmed.roles)


def test_many_records_cross_chunk_sizes(shim_lib, shimconv, tmp_path):
    """140000 records: past the doubling chunks of the mapped file into the fixed-size
    ones; every allocation and its release is there."""
    exe = tmp_path / "mallocbench"
    r = _run(["gcc", "-O2", str(PROGS / "mallocbench.c"), "-o", str(exe)])
    assert r.returncode == 0, r.stderr
    out = tmp_path / "p"
    out.mkdir()
    # every block recorded (one deferred record each, written at its release)
    env = {**os.environ, "LD_PRELOAD": str(shim_lib), "NUMAPROF_DIR": str(out),
           "NUMAPROF_SHORT_LIVED": "0"}
    assert _run([str(exe), "100000", "140000"], env=env).returncode == 0
    r = _run([str(shimconv), str(out)])
    assert r.returncode == 0, r.stdout
    objs = read_table(out, "objects")
    mine = np.asarray(objs["size"]) == 100000
    # allocations freed and made again at the same address are one row each run of them
    assert int(np.asarray(objs["instances"])[mine].sum()) == 140000
    assert np.all(np.asarray(objs["free_time"])[mine] > 0)
    assert np.all(np.diff(np.asarray(objs["time"])[mine].astype(np.int64)) > 0)


def test_sampled_small_allocations_under_torture(converted, sampled_objects, all_records):
    """With threads, signals, fork and exec, the small allocations are sampled at about
    one in every NUMAPROF_SMALL_SAMPLE bytes, each with its call stack, none at or above
    the threshold, and each sampled block's release ends it."""
    totals, _, _ = converted
    s = sampled_objects
    assert len(s["size"]) > 0
    assert s["size"].max() < 65536 and np.all(s["sample_period"] == TORTURE_SMALL_SAMPLE)
    expected = totals["small_bytes"] / TORTURE_SMALL_SAMPLE
    assert 0.7 * expected <= len(s["size"]) <= 1.3 * expected, (len(s["size"]), expected)
    assert totals["sampled_allocs"] == len(s["size"])
    for recs in all_records.values():
        sampled = recs[(recs["type"] == ALLOC) & ((recs["flags"] & F_SAMPLED) != 0)]
        assert np.all(sampled["period"] == TORTURE_SMALL_SAMPLE)
        assert np.mean(sampled["nframes"] > 0) > 0.99  # (a signal handler on an alternate stack has none)


@pytest.fixture(scope="session")
def small_rows(tmp_path_factory) -> Path:
    exe = tmp_path_factory.mktemp("small_rows") / "small_rows"
    r = _run(["gcc", "-O1", "-g", str(PROGS / "small_rows.c"), "-o", str(exe)])
    assert r.returncode == 0, r.stderr
    return exe


def _small_rows_objects(exe, shim_lib, shimconv, out, period):
    env = {**os.environ, "LD_PRELOAD": str(shim_lib), "NUMAPROF_DIR": str(out),
           "NUMAPROF_SHORT_LIVED": "0"}
    if period is not None:
        env["NUMAPROF_SMALL_SAMPLE"] = str(period)
    out.mkdir()
    r = _run([str(exe), "20000", "20000"], env=env)
    assert r.returncode == 0, r.stderr
    r = _run([str(shimconv), str(out)])
    assert r.returncode == 0, r.stdout
    return {k: np.asarray(v) for k, v in read_table(out, "objects").items()}, json.loads(r.stdout)


def test_small_rows_sampled_per_site(small_rows, shim_lib, shimconv, tmp_path):
    """20000 rows of 1000 bytes kept and 20000 of 500 bytes freed, at one sample in
    65536 bytes: about 305 and 153 sampled blocks, each site one call stack, the kept
    ones live at exit, the freed ones ended by their free, a realloc'd one by its
    realloc."""
    objs, totals = _small_rows_objects(small_rows, shim_lib, shimconv, tmp_path / "p", 65536)
    sampled = objs["sample_period"] == 65536
    assert np.all(objs["sample_period"][~sampled] == 0)
    keep = sampled & (objs["size"] == 1000)
    temp = sampled & (objs["size"] == 500)
    grown = sampled & np.isin(objs["size"], (300, 600))
    assert 0.75 * 305 <= keep.sum() <= 1.25 * 305, keep.sum()
    assert 0.75 * 153 <= temp.sum() <= 1.25 * 153, temp.sum()
    assert len(np.unique(objs["stack"][keep])) == 1 and len(np.unique(objs["stack"][temp])) == 1
    assert objs["stack"][keep][0] != objs["stack"][temp][0]
    assert kind_of(objs, keep) == {KIND["malloc"]} and kind_of(objs, temp) == {KIND["calloc"]}
    assert np.all(objs["free_time"][keep] == 0)
    assert np.all(objs["free_time"][temp] > objs["time"][temp])
    assert np.all(objs["free_time"][grown] > 0)
    assert totals["sampled_allocs"] == int(sampled.sum())


def kind_of(objs, sel) -> set[int]:
    return set(objs["kind"][sel].tolist())


def test_small_sampling_off(small_rows, shim_lib, shimconv, tmp_path):
    objs, totals = _small_rows_objects(small_rows, shim_lib, shimconv, tmp_path / "p", 0)
    assert not np.any(objs["sample_period"]) and totals["sampled_allocs"] == 0
    assert totals["small_allocs"] >= 41000


def test_per_step_temporaries_are_a_few_rows_and_every_allocation_counted(tmp_path):
    """tests/progs/temporaries.c: 2 threads x 3000 buffers of 256 KiB, each freed and
    allocated again at its address: a few rows (objects.instances) instead of 6000, and
    the report's site counts all 6000."""
    exe = tmp_path / "temporaries"
    r = _run(["gcc", "-O2", "-g", "-fopenmp", str(PROGS / "temporaries.c"), "-o", str(exe)])
    assert r.returncode == 0, r.stderr
    prof = tmp_path / "p.data"
    run_numaprof("record", "-o", prof, "--", exe, "3000", env={"OMP_NUM_THREADS": "2"}, check=True)
    objs = read_table(prof, "objects")
    mine = np.asarray(objs["size"]) == 262144
    inst = np.asarray(objs["instances"])[mine]
    assert int(inst.sum()) == 6000
    assert 2 <= int(mine.sum()) <= 600, int(mine.sum())  # rows: per thread, runs of repeats
    doc = json.loads(run_numaprof("report", prof, "--format", "json", check=True).stdout)
    work = [o for o in doc["objects"] if o["name"] == "work"]
    assert work and work[0]["count"] == 6000, [(o["name"], o["count"]) for o in doc["objects"]]


def _mallocbench(shim_lib, shimconv, tmp_path, count, extra_env):
    tmp_path.mkdir()
    exe = tmp_path / "mallocbench"
    r = _run(["gcc", "-O2", str(PROGS / "mallocbench.c"), "-o", str(exe)])
    assert r.returncode == 0, r.stderr
    out = tmp_path / "p"
    out.mkdir()
    env = {**os.environ, "LD_PRELOAD": str(shim_lib), "NUMAPROF_DIR": str(out), **extra_env}
    assert _run([str(exe), "100000", str(count)], env=env).returncode == 0
    slots = sum(int(np.frombuffer(f.read_bytes()[24:32], "<u8")[0]) for f in out.glob("shim.*.bin"))
    r = _run([str(shimconv), str(out)])
    assert r.returncode == 0, r.stdout
    objs = {k: np.asarray(v) for k, v in read_table(out, "objects").items()}
    return objs, json.loads(r.stdout), slots


def test_short_lived_blocks_are_summarised_per_site(shim_lib, shimconv, tmp_path):
    """A block freed within the short-lived limit (NUMAPROF_SHORT_LIVED, default 1 ms)
    costs no record of its own: 20000 malloc/free pairs of 100000 bytes, each living a
    few microseconds, become a summary row or two of their site (every allocation
    counted in `instances`, the lowest address and the extent of the range they took,
    their lifetimes' sum), from a handful of records.  With a limit of 1 ns each is a
    record and a row again.  The limit is set at 10 s here: which blocks count as short
    must not depend on how long a loaded machine deschedules the program."""
    objs, totals, slots = _mallocbench(shim_lib, shimconv, tmp_path / "short", 20000,
                                       {"NUMAPROF_SHORT_LIVED": str(10 * 10**9)})
    mine = objs["size"] == 100000
    summary = mine & (objs["extent"] > 0)
    assert int(objs["instances"][mine].sum()) == 20000
    assert 1 <= int(summary.sum()) <= 4 and int(objs["instances"][summary].sum()) == 20000
    assert totals["short_lived_allocs"] == int(objs["instances"][summary].sum())
    assert slots < 100, "a handful of records, not one per block"
    assert len(np.unique(objs["stack"][mine])) == 1
    assert np.all(objs["extent"][summary] >= 100000)
    assert np.all(objs["free_time"][summary] > objs["time"][summary])
    # each lived some time; one after the other in one thread, so their lives add up to
    # no more than the span from the first allocation to the last release
    life, span = objs["lifetime"][summary], objs["free_time"][summary] - objs["time"][summary]
    assert np.all((life > 0) & (life <= span)), (life, span)
    one_by_one, totals, slots = _mallocbench(shim_lib, shimconv, tmp_path / "each", 20000,
                                             {"NUMAPROF_SHORT_LIVED": "1"})
    mine = one_by_one["size"] == 100000
    assert not one_by_one["extent"].any() and totals["short_lived_allocs"] == 0
    assert int(one_by_one["instances"][mine].sum()) == 20000 and slots >= 20000


CRASH_C = r"""
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
int main(void)
{
    char *kept = malloc(3 << 20), *volatile gone = malloc(5 << 20);
    memset(kept, 1, 3 << 20);
    gone[9] = kept[7];
    free(gone);
    kill(getpid(), SIGKILL); /* no exit handlers: the shim cannot write anything more */
    return kept[7];
}
"""


def test_blocks_live_at_a_crash_are_in_the_profile(shim_lib, shimconv, tmp_path):
    """The records of live blocks wait in the file's pool, which a process killed
    without its exit handlers leaves behind: the converter takes them as live to the end.
    (Every block recorded here: the summaries of short-lived ones are in the threads'
    memory until they are written, and a crash loses the last ones.)"""
    src = tmp_path / "crash.c"
    src.write_text(CRASH_C)
    exe = tmp_path / "crash"
    r = _run(["gcc", "-O1", "-g", str(src), "-o", str(exe)])
    assert r.returncode == 0, r.stderr
    out = tmp_path / "p"
    out.mkdir()
    env = {**os.environ, "LD_PRELOAD": str(shim_lib), "NUMAPROF_DIR": str(out),
           "NUMAPROF_SHORT_LIVED": "0"}
    assert _run([str(exe)], env=env).returncode == -signal.SIGKILL
    (f,) = out.glob("shim.*.pool")
    pool = np.frombuffer(f.read_bytes(), SHIM_RECORD)
    assert int((pool["type"] == ALLOC).sum()) == 1
    r = _run([str(shimconv), str(out)])
    assert r.returncode == 0, r.stdout
    assert not list(out.glob("shim.*"))
    objs = {k: np.asarray(v) for k, v in read_table(out, "objects").items()}
    kept = np.flatnonzero(objs["size"] == 3 << 20)
    assert len(kept) == 1 and objs["free_time"][kept[0]] == 0 and objs["stack"][kept[0]] != 0xFFFFFFFF
    gone = np.flatnonzero(objs["size"] == 5 << 20)
    assert len(gone) == 1 and objs["free_time"][gone[0]] > 0


def test_record_short_lived_option(tmp_path):
    """`record --short-lived 0` records every block (no summary row); the default counts
    a malloc/free loop's blocks in summaries; the manifest says which limit applied."""
    exe = tmp_path / "mallocbench"
    r = _run(["gcc", "-O2", str(PROGS / "mallocbench.c"), "-o", str(exe)])
    assert r.returncode == 0, r.stderr
    got = {}
    for name, opts in (("each", ["--short-lived", "0"]), ("default", [])):
        prof = tmp_path / f"{name}.data"
        run_numaprof("record", "-o", prof, *opts, "--", exe, "100000", "3000", check=True)
        objs = {k: np.asarray(v) for k, v in read_table(prof, "objects").items()}
        mine = objs["size"] == 100000
        assert int(objs["instances"][mine].sum()) == 3000
        manifest = json.loads((prof / "manifest.json").read_text())
        got[name] = (int((objs["extent"][mine] > 0).sum()), manifest["sampling"]["short_lived"])
    assert got["each"] == (0, 0), got
    assert got["default"][0] >= 1 and got["default"][1] == 1_000_000, got
