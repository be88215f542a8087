"""`suggest --verify`: prove the suggested placement in the NUMA lab (docs/suggest.md).

In a scratch copy of the source tree the patches are applied (the same all-or-nothing
apply as --apply, journal included), the program is rebuilt with the user's build
command, and run in a `numaprof lab` guest with the target's node count, under the
suggested binding and numactl prefix, recorded by `numaprof record`.  Per object the
prediction is then set against the lab: pages by node as the guest kernel reports them
(numa_maps, the shim's move_pages at free or exit) against the pages the policy puts on
each node, and the local fraction measured from the lab's samples, where there are
enough of them.  Under TCG a recording has few data addresses, so the page map is the
evidence: when it is the predicted one, the predicted local fraction (the host's
measured accesses on that page map) stands.  A disagreement is flagged, not hidden.
The copy is removed at the end, whatever happened.
"""

from __future__ import annotations

import dataclasses
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
from contextlib import redirect_stdout
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from numaprof.errors import NumaprofError

PAGE_TOLERANCE = 0.10  # share of the pages that may sit elsewhere than predicted
LOCAL_TOLERANCE = 0.15  # |measured - predicted| local fraction
MIN_LAB_SAMPLES = 50  # placed samples of an object for its lab local fraction to count
#: An object located on its sampled pages only, on fewer than this share of its pages,
#: has no lab page map to judge by.
MIN_LOCATED_SHARE = 0.5
_SKIP = {".numaprof", ".git"}


@dataclass
class ObjectCheck:
    """One object's prediction against the lab."""

    name: str
    policy: str
    patch: str  # the patch kind and how it was checked, or how the placement is applied
    predicted_local: float
    predicted_pages: list[int]
    lab_pages: list[int] | None = None
    lab_pages_source: str = ""
    lab_local: float | None = None
    lab_samples: int = 0
    verdict: str = ""  # as predicted | disagrees | too few pages located | not found in the lab recording
    why: list[str] = field(default_factory=list)
    # part by part (pages per node row and per sixteenth of the object, in address order):
    # what the policy puts there, and what the lab's kernel reported (None: not counted so)
    predicted_segments: list[list[int]] | None = None
    lab_segments: list[list[int]] | None = None
    # the host's sampled accesses on the lab's page map: the local fraction the lab's
    # placement gives this program's accesses (None: no part-by-part page map)
    lab_map_local: float | None = None


def guest_command(suggestions, command: list[str]) -> tuple[dict[str, str], list[str]]:
    """(environment, prefix) the suggestion runs the program with: the binding variables
    and the numactl words of its first line to run (before the program's own words)."""
    env: dict[str, str] = {}
    prefix: list[str] = []
    if suggestions.commands:
        words = shlex.split(suggestions.commands[0], comments=True)
        if command and words[-len(command):] == list(command):
            words = words[: len(words) - len(command)]
        for w in words:
            name, eq, value = w.partition("=")
            if eq and not prefix and name.isidentifier():
                env[name] = value
            else:
                prefix.append(w)
    return env, prefix


def predicted_map(sug, n_pages: int, target, thread_nodes: list[int]) -> np.ndarray | None:
    """The target node id of each page that the suggested policy places
    (recommender/policies.py); None for first touch (the program decides)."""
    from numaprof.recommender.policies import node_of_page

    ids = [n.id for n in target.nodes]
    nodes = sug.weighted_nodes or ids
    kw = {}
    if sug.policy in ("bind_block", "parallel_init"):
        kw["threads_nodes"] = thread_nodes or ids
    if sug.policy == "weighted_interleave" and sug.weights:
        kw["weights"] = sug.weights
    if sug.policy == "first_touch":
        return None
    return np.asarray(node_of_page(sug.policy, n_pages, nodes, **kw))


def predicted_pages(sug, obj, n_pages: int, target, thread_nodes: list[int]) -> list[int]:
    """Pages per target node that the suggested policy places."""
    return _node_counts(predicted_map(sug, n_pages, target, thread_nodes), obj, target)


def _node_counts(where: np.ndarray | None, obj, target) -> list[int]:
    """Pages per target node of a page map (None, first touch: the object's own)."""
    if where is None:
        return [int(v) for v in obj.pages_by_node]
    return [int((where == n.id).sum()) for n in target.nodes]


def segments_of(where: np.ndarray, ids: list[int]) -> list[list[int]]:
    """Pages per node (rows in ``ids`` order) and per SEGMENTS-th of the object, in
    address order, of a page map (node id per page): how the shim counts them."""
    from numaprof.analyzer.pages import SEGMENTS

    n = len(where)
    seg = np.arange(n) * SEGMENTS // max(n, 1)
    return [[int(((where == i) & (seg == s)).sum()) for s in range(SEGMENTS)] for i in ids]


def map_from_segments(segments, n_pages: int) -> np.ndarray:
    """A page map (node row per page, -1 where nothing was located) with the counts of
    ``segments`` (node rows x SEGMENTS): each segment's pages shared out in proportion to
    its counts, the rows in order (where inside a sixteenth each page is, is not known)."""
    m = np.asarray(segments, dtype=float)
    k = m.shape[1]
    out = np.full(n_pages, -1, dtype=np.int64)
    for s in range(k):
        lo, hi = s * n_pages // k, (s + 1) * n_pages // k
        total = m[:, s].sum()
        if total <= 0 or hi <= lo:
            continue
        cut = np.rint(np.cumsum(m[:, s]) / total * (hi - lo)).astype(np.int64)
        start = 0
        for row, end in enumerate(cut.tolist()):
            out[lo + start: lo + end] = row
            start = end
    return out


def local_on_map(access, page_row: np.ndarray, thread_rows: list[int]) -> float | None:
    """The share (by weight) of the sampled accesses ``access`` (the host's) whose
    thread's node row is the node row of the page they touch, on the page map
    ``page_row``; None when no access falls on a located page."""
    page = np.asarray(access.page, dtype=np.int64)
    thread = np.asarray(access.thread, dtype=np.int64)
    w = np.asarray(access.weight, dtype=float)
    tn = np.asarray(thread_rows, dtype=np.int64)
    ok = (page >= 0) & (page < len(page_row)) & (thread >= 0) & (thread < len(tn))
    ok[ok] &= page_row[page[ok]] >= 0
    if not ok.any() or w[ok].sum() <= 0:
        return None
    local = tn[thread[ok]] == page_row[page[ok]]
    return float(w[ok][local].sum() / w[ok].sum())


def compare(check: ObjectCheck) -> ObjectCheck:
    """The verdict: the lab's page map (and local fraction, when measured) against the
    prediction, within PAGE_TOLERANCE and LOCAL_TOLERANCE."""
    if check.lab_pages is None or not sum(check.lab_pages):
        check.verdict = "not found in the lab recording"
        return check
    p = np.asarray(check.predicted_pages, dtype=float)
    m = np.asarray(check.lab_pages, dtype=float)
    if check.lab_pages_source == "move_pages" and m.sum() < MIN_LOCATED_SHARE * p.sum():
        # only the pages the guest's few samples fell on were asked (a static array: no
        # allocation for the shim to ask about at its release): no page map to judge by
        check.verdict = "too few pages located"
        check.why.append(f"{int(m.sum())} of the {int(p.sum())} pages were located in the lab "
                         "(those its samples fell on): not enough to judge the placement")
        return check
    off = 0.5 * float(np.abs(p / max(p.sum(), 1) - m / max(m.sum(), 1)).sum())
    ok = True
    if off > PAGE_TOLERANCE:
        ok = False
        check.why.append(f"{off:.0%} of the pages are not on the node predicted")
    if check.predicted_segments is not None and check.lab_segments is not None:
        # part by part: the right counts per node in the wrong parts (a block placement
        # reversed, a boundary moved) is no placement as predicted
        ps = np.asarray(check.predicted_segments, dtype=float)
        ms = np.asarray(check.lab_segments, dtype=float)
        if ps.shape == ms.shape and ms.sum() > 0:
            off_parts = 0.5 * float(np.abs(ps / max(ps.sum(), 1) - ms / ms.sum()).sum())
            if off_parts > PAGE_TOLERANCE and off <= PAGE_TOLERANCE:
                ok = False
                check.why.append(f"{off_parts:.0%} of the pages are not in the part of the "
                                 "object their node was predicted for")
    if check.lab_map_local is not None and \
            abs(check.lab_map_local - check.predicted_local) > LOCAL_TOLERANCE:
        ok = False
        check.why.append(f"the host's accesses on the lab's page map are {check.lab_map_local:.0%} "
                         f"local, {check.predicted_local:.0%} predicted")
    if check.lab_local is not None and abs(check.lab_local - check.predicted_local) > LOCAL_TOLERANCE:
        ok = False
        check.why.append(f"local {check.lab_local:.0%} measured, {check.predicted_local:.0%} "
                         "predicted")
    check.verdict = "as predicted" if ok else "disagrees"
    return check


def _recorded_cwd(profile: Path) -> str | None:
    """The directory the program was recorded in (manifest.json `cwd`)."""
    from numaprof.analyzer import profile_io
    from numaprof.errors import ProfileError

    try:
        cwd = profile_io.read_json(Path(profile) / "manifest.json").get("cwd")
    except (OSError, ProfileError, AttributeError):
        return None
    return os.path.realpath(cwd) if isinstance(cwd, str) and cwd else None


def _copy_tree(root: Path, dest: Path, skip: set[str]) -> None:
    def ignore(d, names):
        return [n for n in names if n in _SKIP or os.path.join(d, n) in skip]
    shutil.copytree(root, dest, symlinks=True, ignore=ignore)


_DRIVERS = {("gcc", "c"): "gcc", ("gcc", "c++"): "g++", ("gcc", "fortran"): "gfortran",
            ("clang", "c"): "clang", ("clang", "c++"): "clang++"}


def recorded_build(profile: Path, root: str, exe: str) -> str | None:
    """A build command from the compile lines the binary recorded (DW_AT_producer): each
    of its translation units under `root` compiled with its own compiler and flags, then
    linked with the OpenMP / pthread flags they used and -lm.  None when the binary has
    no such units, or one the compilers above did not build.  Macros (-D) are not
    recorded: a program that needs them needs --build."""
    from numaprof.recommender.patch.compile import BuildInfo

    exe_real = os.path.realpath(exe)
    units = [u for u in BuildInfo.from_profile(profile, root).units
             if os.path.realpath(u.binary) == exe_real
             and os.path.realpath(u.source).startswith(root + os.sep)]
    if not units:
        return None
    steps, objs, link_flags, drivers = [], [], [], set()
    for k, u in enumerate(units):
        driver = _DRIVERS.get((u.producer.family, u.language or u.producer.language))
        if driver is None:
            return None
        drivers.add(driver)
        obj = f".numaprof-verify-{k}.o"
        src = os.path.relpath(os.path.realpath(u.source), root)
        # gcc leaves -D and -I out of DW_AT_producer: the directories of the unit's own
        # headers stand in for its -I
        incs = [f"-I{os.path.relpath(d, root)}" for d in u.include_dirs
                if os.path.realpath(d).startswith(root + os.sep) or os.path.realpath(d) == root]
        # the debug info the binary had (the compile check drops -g, the lab recording
        # needs it to name the objects it measures)
        debug = ["-g"] if re.search(r"(^|\s)-g(gdb)?[0-3]?(\s|$)", u.producer.text) else []
        flags = [*u.producer.flags, *debug, *dict.fromkeys(incs)]
        steps.append(shlex.join([driver, *flags, "-c", src, "-o", obj]) + " $CFLAGS")
        objs.append(obj)
        link_flags += [f for f in flags if f in ("-fopenmp", "-pthread") and f not in link_flags]
    linker = next(d for d in ("gfortran", "g++", "clang++", "gcc", "clang") if d in drivers)
    out = os.path.relpath(exe_real, root)
    steps.append(shlex.join([linker, *objs, *link_flags, "-lm", "-o", out]))
    return " && ".join(steps)


def _patch_words(sug) -> str:
    fix = sug.fix
    if fix is None:
        return {"env": "thread binding", "numactl": "numactl"}.get(sug.change, sug.change)
    if fix.status == "offered":
        return f"{fix.kind}, compile {fix.compile or 'not checked'}"
    return fix.status


def verify(analysis, advice, profile: Path, build: str | None, *, root: str | None = None,
           timeout: float = 1800.0, kernel: Path | None = None,
           log=None) -> list[ObjectCheck]:
    """Apply, rebuild, run in the lab and compare (see the module's docstring).  `build`
    is a shell command run in the copy's root, None for the recorded compile lines
    (recorded_build); `log(line)` reports progress."""
    from numaprof.analyzer import analyze
    from numaprof.analyzer.pages import kernel_object_pages
    from numaprof.cli.diff_match import match
    from numaprof.cli.lab import lab_config
    from numaprof.lab.runner import find_tools, run
    from numaprof.lab.topology import PRESETS
    from numaprof.recommender.apply import apply
    from numaprof.recommender.sources import read_sources_json

    log = log or (lambda _line: None)
    result = advice.suggestions
    target = result.target
    if target is None or target.n_nodes < 2:
        raise NumaprofError("--verify needs a target of at least 2 nodes (--target)", exit_code=2)
    root = os.path.realpath(root or os.getcwd())
    command = list(analysis.profile.command)
    if not command:
        raise NumaprofError("--verify: the profile does not say which command was recorded")
    cwd = _recorded_cwd(profile) or root
    rel_cwd = os.path.relpath(cwd, root)
    if rel_cwd.startswith(".."):
        rel_cwd = "."
    exe = command[0]
    if os.path.isabs(exe) and not os.path.realpath(exe).startswith(root + os.sep):
        raise NumaprofError(f"--verify: {exe} is outside {root}: the rebuilt program would "
                            "not be the one run")
    scratch = Path(tempfile.mkdtemp(prefix="numaprof-verify-"))
    try:
        tree = scratch / "tree"
        _copy_tree(Path(root), tree, {os.path.realpath(profile)})
        log(f"copied {root} to {tree}")
        hashes = read_sources_json(profile) if advice.patches else {}
        moved = {}
        for path, digest in hashes.items():
            real = os.path.realpath(path)
            if real.startswith(root + os.sep):
                moved[str(tree / os.path.relpath(real, root))] = digest
        patches = []
        for p in advice.patches:
            real = os.path.realpath(p.path)
            if not real.startswith(root + os.sep):
                raise NumaprofError(f"--verify: {p.path} is outside {root}; nothing was run")
            patches.append(dataclasses.replace(p, path=str(tree / os.path.relpath(real, root))))
        if patches:
            done = apply(patches, str(tree), moved)
            log(f"applied {len(done.files)} patched file(s) in the copy")
        from numaprof import paths

        cflags = f"-I{paths.include_dir()}"
        env = dict(os.environ, NUMAPROF_CFLAGS=cflags)
        for var in ("CFLAGS", "CXXFLAGS", "FFLAGS", "FCFLAGS"):
            env[var] = (env.get(var, "") + " " + cflags).strip()
        if not build:
            exe_path = command[0] if os.path.isabs(command[0]) else os.path.join(cwd, command[0])
            build = recorded_build(profile, root, exe_path)
            if build is None:
                raise NumaprofError("--verify: the program's compile lines were not recorded "
                                    "(no DWARF from gcc or clang for it): give --build CMD",
                                    exit_code=2)
        log(f"building: {build}")
        built = subprocess.run(build, shell=True, cwd=tree, env=env, capture_output=True,
                               text=True)
        if built.returncode != 0:
            tail = " | ".join((built.stderr or built.stdout).strip().splitlines()[-3:])
            raise NumaprofError(f"--verify: the build failed (exit {built.returncode}): {tail}",
                                exit_code=1)
        guest_env, prefix = guest_command(result, command)
        run_dir = tree / rel_cwd
        data = run_dir / "numaprof-verify.data"
        words = [f"{k}={shlex.quote(v)}" for k, v in guest_env.items()]
        line = " ".join(words + ["numaprof", "record", "-o", shlex.quote(data.name), "--"]
                        + [shlex.quote(w) for w in prefix + command])
        name = result.target_name if result.target_name in PRESETS else None
        config = lab_config(None if name else target.n_nodes, 1, "512M", (), name, timeout,
                            kernel, ("sh", "-c", line), run_dir.resolve(),
                            # a recording in a scratch copy may run twice
                            rerun_stalled=True)
        log(f"running in a {target.n_nodes}-node lab guest: {line}")
        with redirect_stdout(sys.stderr):
            status = run(config, find_tools(kernel))
        if status != 0 or not data.is_dir():
            raise NumaprofError(f"--verify: the program did not record in the lab (exit "
                                f"{status})", exit_code=1)
        lab = analyze(data)
        # the lab's samples (few under TCG) for the local fraction; the kernel's page map
        # of every object, sampled in the guest or not, for the placement
        sampled = {id(p.before): p.after for p in match(analysis, lab) if p.before is not None}
        located = dataclasses.replace(lab, objects=kernel_object_pages(lab.profile.path))
        pages = {id(p.before): p.after for p in match(analysis, located) if p.before is not None}
        objects = {o.name: o for o in analysis.objects}
        checks = []
        for s in result.objects:
            obj = objects.get(s.name)
            if obj is None or s.predicted is None:
                continue
            n_pages = obj.access.n_pages if obj.access is not None else \
                -(-int(obj.size) // 4096)
            placed = predicted_map(s, n_pages, target, list(result.thread_nodes))
            c = ObjectCheck(s.name, s.policy, _patch_words(s), float(s.predicted.local_fraction),
                            _node_counts(placed, obj, target))
            if placed is not None:
                c.predicted_segments = segments_of(placed, [n.id for n in target.nodes])
            where = pages.get(id(obj))
            if where is not None:
                c.lab_pages = [int(v) for v in where.pages_by_node]
                c.lab_pages_source = where.pages_source
                c.lab_segments = where.pages_by_segment
                if c.lab_segments is not None and obj.access is not None:
                    c.lab_map_local = local_on_map(
                        obj.access, map_from_segments(c.lab_segments, n_pages),
                        list(result.thread_nodes))
            got = sampled.get(id(obj))
            if got is not None:
                if where is None and got.pages_source != "first_touch":
                    c.lab_pages = [int(v) for v in got.pages_by_node]
                    c.lab_pages_source = got.pages_source
                placed = int(got.samples - got.unplaced_samples)
                c.lab_samples = placed
                if placed >= MIN_LAB_SAMPLES:
                    c.lab_local = float(got.local_fraction)
            checks.append(compare(c))
        return checks
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def render(checks: list[ObjectCheck]) -> list[str]:
    """One line per object: policy, patch and check, predicted against the lab, verdict."""
    from numaprof.analyzer.model import PAGES_SOURCES

    def pages(v):
        return " ".join(f"{i}:{n}" for i, n in enumerate(v)) if v is not None else "-"

    out = []
    for c in checks:
        local = (f"lab {c.lab_local:.0%} ({c.lab_samples} samples)" if c.lab_local is not None
                 else f"lab: {c.lab_samples} samples, too few to measure")
        src = PAGES_SOURCES.get(c.lab_pages_source, c.lab_pages_source)
        line = (f"{c.name}: {c.policy} ({c.patch}); pages by node predicted "
                f"{pages(c.predicted_pages)}, lab {pages(c.lab_pages)}"
                + (f" ({src})" if src else "")
                + f"; local predicted {c.predicted_local:.0%}, {local}: {c.verdict.upper() if c.verdict == 'disagrees' else c.verdict}")
        if c.why:
            line += " (" + "; ".join(c.why) + ")"
        elif c.verdict == "as predicted" and c.lab_map_local is not None:
            line += (f" (the host's accesses on the lab's page map, part by part: "
                     f"{c.lab_map_local:.0%} local)")
        elif c.verdict == "as predicted" and c.lab_local is None:
            line += " (the page map is the predicted one: the predicted local fraction, from " \
                    "the host's accesses on it, stands)"
        out.append(line)
    return out


def to_json(checks: list[ObjectCheck]) -> dict:
    """The `numaprof.verify/1` document."""
    return {"schema": "numaprof.verify/1",
            "objects": [dataclasses.asdict(c) for c in checks]}
