"""Helpers of the lab tier (tests/lab): checks that need a multi-node kernel, run in
`numaprof lab` guests.

A boot costs about 30 s under TCG, so each group of checks is one guest: a shell script
runs every check of the group inside the guest, writing `NAME.out`, `NAME.err` and
`NAME.rc` into the shared work directory; the tests then assert on the host, one check
per test.  Without QEMU, a kernel image or virtme-ng the tier is skipped with the reason
(set NUMAPROF_LAB_REQUIRED=1 to make that a failure).
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
from helpers import PROGS, ROOT, numaprof_argv

from numaprof.lab.runner import kill_group

LAB_TIMEOUT = 900  # whole guest run, boot included (TCG: programs run ~20x slower)

def run_lab(workdir: Path, lab_args: list[str], command: list[str],
            timeout: float = LAB_TIMEOUT, env: dict[str, str] | None = None):
    """`numaprof lab LAB_ARGS -- COMMAND` in workdir; returns the CompletedProcess."""
    e = dict(os.environ)
    if env:
        e.update(env)
    return subprocess.run(
        [*numaprof_argv(), "lab", *lab_args, "--", *command],
        cwd=workdir, env=e, capture_output=True, text=True, timeout=timeout + 60,
    )


def require_lab() -> None:
    from numaprof.errors import NumaprofError
    from numaprof.lab.runner import find_tools

    try:
        find_tools()
    except NumaprofError as e:
        if os.environ.get("NUMAPROF_LAB_REQUIRED"):
            pytest.fail(f"the NUMA lab is required but unavailable: {e}")
        pytest.skip(f"the NUMA lab is unavailable: {e}")


def build_prog(name: str, out: Path, *flags: str, src: Path | None = None) -> Path:
    src = src or PROGS / f"{name}.c"
    exe = out / name
    subprocess.run(["gcc", "-O1", "-g", "-Wall", "-Wextra", "-pthread", *flags, "-o",
                    str(exe), str(src)], check=True)
    return exe


@dataclass
class GuestRun:
    """The results of one guest: per check, its stdout, stderr and exit status."""

    workdir: Path
    proc: subprocess.CompletedProcess

    def rc(self, name: str) -> int:
        path = self.workdir / f"{name}.rc"
        assert path.exists(), (
            f"check {name!r} did not run in the guest (lab exit {self.proc.returncode})\n"
            f"{self.proc.stdout[-3000:]}\n{self.proc.stderr[-3000:]}"
        )
        return int(path.read_text().strip())

    def out(self, name: str, ok: bool = True) -> str:
        rc = self.rc(name)
        text = (self.workdir / f"{name}.out").read_text()
        if ok:
            err = (self.workdir / f"{name}.err").read_text()
            hang = self.workdir / f"{name}.hang"
            stuck = f"\nstuck ({name}.hang):\n{hang.read_text()[-6000:]}" if hang.exists() else ""
            assert rc == 0, f"check {name!r} exited {rc} in the guest:\n{text[-2000:]}\n{err[-3000:]}{stuck}"
        return text


#: A check still running after this many seconds is stuck: what its processes are doing
#: is written to <check>.hang, they are killed, its status is 124 and the next check runs
#: (so one stuck program does not cost the whole guest its timeout, and says where it was).
CHECK_TIMEOUT = 420

# the watchdog of guest_script: `check NAME` runs NAME.cmd in a session of its own
_CHECK_FN = r"""
check() {
  setsid sh "$1.cmd" > "$1.out" 2> "$1.err" &
  p=$!
  w=0
  while kill -0 $p 2>/dev/null; do
    sleep 1
    w=$((w + 1))
    if [ $w -ge %(timeout)d ]; then
      # what the stuck processes are doing; bounded, as reading a process's cmdline
      # waits for its memory map's lock, which a stuck process may hold
      timeout -s KILL 60 sh -c '
        echo "still running after %(timeout)d s:"; ps -eo pid,ppid,pgid,stat,wchan:32,etime,args
        for d in /proc/[0-9]*; do
          if [ "$(cut -d" " -f5 $d/stat 2>/dev/null)" = "$0" ]; then
            echo "== ${d#/proc/} $(tr "\0" " " < $d/cmdline)"
            cat $d/stack 2>/dev/null
            for t in $d/task/*; do echo "task ${t##*/} $(cat $t/wchan 2>/dev/null) $(cut -d" " -f3 $t/stat)"; done
          fi
        done' $p > "$1.hang" 2>&1
      kill -KILL -$p 2>/dev/null
      wait $p 2>/dev/null
      echo 124 > "$1.rc"
      return
    fi
  done
  wait $p
  echo $? > "$1.rc"
}
"""


def guest_script(checks: list[tuple[str, str]], timeout: int = CHECK_TIMEOUT) -> str:
    """One /bin/sh script running every check in order; a failing check does not stop it,
    nor does a stuck one (CHECK_TIMEOUT).  Each check's command goes to <name>.cmd."""
    # the heartbeat tells a stalled guest (TCG stopped making progress: it stops too)
    # from a check stuck past its watchdog (it goes on): labkit._progress
    lines = [": > started", "(while :; do : > heartbeat; sleep 5; done) & beat=$!",
             "NUMAPROF=" + shlex.quote(shlex.join(numaprof_argv())),
             "export NUMAPROF",
             _CHECK_FN % {"timeout": timeout}]
    for name, cmd in checks:
        lines.append(f"printf '%s\\n' {shlex.quote(cmd)} > {name}.cmd\ncheck {name}")
    lines.append("kill $beat 2>/dev/null")
    lines.append("exit 0")
    return "\n".join(lines) + "\n"


#: A TCG guest now and then stops making progress with QEMU busy: no check starts after
#: the boot, or none ends although each has the guest's own CHECK_TIMEOUT watchdog (seen
#: with 4 nodes in a full test run and with 2 under host load; the same guests passed
#: before and after; in CI on 2026-12-02 twice in a row for one group).  Such a guest is
#: killed and the group booted again, up to STALL_ATTEMPTS times in all -- unless the
#: guest's heartbeat shows it still ran: then a check is stuck, and the group fails.
BOOT_DEADLINE = 300  # s from `numaprof lab` to the guest script's first line
STALL_DEADLINE = CHECK_TIMEOUT + 180  # s with no check ending: the guest-side watchdog is stuck too
STALL_ATTEMPTS = 3
HEARTBEAT_ALIVE = 60  # s: a heartbeat this recent at a stall is a live guest's


def run_watched(workdir: Path, lab_args: list[str], timeout: float = LAB_TIMEOUT, *,
                boot_deadline: float = BOOT_DEADLINE, stall_deadline: float = STALL_DEADLINE,
                poll: float = 5.0, names: list[str] = ()):
    """run_lab of checks.sh, killed with its process group when the guest stalls:
    (CompletedProcess, None), or (None, why) after a stall."""
    # a group's checks may run twice: numaprof lab boots a guest that stalled again itself
    proc = subprocess.Popen([*numaprof_argv(), "lab", "--rerun-stalled", *lab_args, "--",
                             "sh", "checks.sh"],
                            cwd=workdir, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True)
    start = time.monotonic()
    out: dict[str, str] = {}

    def drain():
        out["stdout"], out["stderr"] = proc.communicate()

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    why = None
    while reader.is_alive():
        reader.join(poll)
        now = time.monotonic()
        marks = [p.stat().st_mtime for p in (workdir / "started", *workdir.glob("*.rc"))
                 if p.exists()]
        if now - start > timeout + 60:
            why = f"no end after {timeout + 60:.0f} s"
        elif not marks and now - start > boot_deadline:
            why = f"no check started {boot_deadline:.0f} s after the boot began"
        elif marks and time.time() - max(marks) > stall_deadline:
            why = f"no check ended for {stall_deadline:.0f} s"
        if why:
            # SIGTERM first, as lab/runner.py stops its own guest: the guest (vng, QEMU)
            # runs in a session of its own, which numaprof lab kills when it is
            # terminated; SIGKILL alone left a stalled guest's QEMU running, orphaned,
            # beside its retry (in CI, at 170 % cpu).  numaprof lab's own stop takes up
            # to 10 s: give it 20.
            kill_group(proc, grace=20.0)
            reader.join(30)
            return None, why + _progress(workdir, names, out)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out.get("stdout", ""),
                                       out.get("stderr", "")), None


def heartbeat_age(workdir: Path) -> float | None:
    """Seconds since the guest script last touched its heartbeat; None before the first."""
    try:
        return max(0.0, time.time() - (workdir / "heartbeat").stat().st_mtime)
    except FileNotFoundError:
        return None


def _progress(workdir: Path, names: list[str], out: dict[str, str]) -> str:
    """Where a stalled guest was: which of the checks ``names`` ended, the one running
    (its .cmd is written as it starts), and the guest's last lines, for the failure."""
    ended = [n for n in names if (workdir / f"{n}.rc").exists()]
    running = [n for n in names if (workdir / f"{n}.cmd").exists() and n not in ended]
    age = heartbeat_age(workdir)
    alive = f"the guest's heartbeat {age:.0f} s old" if age is not None else "no heartbeat"
    tail = "\n".join((out.get("stdout", "") + out.get("stderr", "")).splitlines()[-15:])
    return (f"; ended: {', '.join(ended) or 'none'}; not ended: {', '.join(running) or 'none'}; {alive}"
            + (f"; the guest's last lines:\n{tail}" if tail else ""))


def run_group(workdir: Path, lab_args: list[str], checks: list[tuple[str, str]]) -> GuestRun:
    require_lab()
    (workdir / "checks.sh").write_text(guest_script(checks))
    stalls = []
    for _ in range(STALL_ATTEMPTS):
        for old in (workdir / "started", workdir / "heartbeat", *[workdir / f"{name}.{ext}" for name, _ in checks
                                           for ext in ("rc", "out", "err", "hang", "cmd")]):
            old.unlink(missing_ok=True)
        proc, why = run_watched(workdir, lab_args, names=[name for name, _ in checks])
        if proc is not None:
            break
        stalls.append(why)
        age = heartbeat_age(workdir)
        if age is not None and age < HEARTBEAT_ALIVE:
            # the guest ran on: a check is stuck past its own watchdog, which another
            # boot would not change
            pytest.fail(f"numaprof lab {' '.join(lab_args)}: a check is stuck in a live guest ({why})")
        print(f"labkit: the guest of `numaprof lab {' '.join(lab_args)}` stalled ({why}): "
              "killed, booting again", file=sys.stderr)
    else:
        pytest.fail(f"numaprof lab {' '.join(lab_args)}: the guest stalled {len(stalls)} times "
                    f"({'; '.join(stalls)})")
    assert proc.returncode == 0, (
        f"numaprof lab {' '.join(lab_args)} exited {proc.returncode}:\n"
        f"{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    )
    return GuestRun(workdir, proc)


# ---- parsers of what the guest printed ----------------------------------------------

def parse_numactl_hardware(text: str) -> tuple[int, dict[int, list[int]], list[list[int]]]:
    """`numactl -H` -> (node count, cpus per node, distance matrix)."""
    m = re.search(r"^available: (\d+) nodes", text, re.M)
    assert m, f"not numactl -H output:\n{text}"
    n = int(m.group(1))
    cpus = {int(k): [int(c) for c in v.split()]
            for k, v in re.findall(r"^node (\d+) cpus:(.*)$", text, re.M)}
    rows = re.findall(r"^\s*(\d+):((?:\s+\d+)+)\s*$", text.split("node distances:")[1], re.M)
    matrix = [[int(x) for x in r[1].split()] for r in rows]
    return n, cpus, matrix


@dataclass
class Placement:
    pid: int
    addr: int
    nodes: list[int]  # node of every page, from move_pages
    numa_maps: dict[int, int]  # node -> pages, from the N<node>= fields
    policy: str  # numa_maps' policy field
    touchers: dict[int, int]  # thread -> node it ran on while touching


def parse_lab_place(text: str) -> Placement:
    pid = int(re.search(r"^pid (\d+)$", text, re.M).group(1))
    addr = int(re.search(r"^addr (0x[0-9a-f]+)$", text, re.M).group(1), 16)
    nodes = [int(x) for x in re.search(r"^move_pages((?: -?\d+)+)$", text, re.M)
             .group(1).split()]
    line = re.search(r"^numa_maps (.*)$", text, re.M).group(1)
    fields = line.split()
    assert int(fields[0], 16) == addr, line
    per_node = {int(k): int(v) for k, v in re.findall(r"\bN(\d+)=(\d+)", line)}
    touchers = {int(k): int(v) for k, v in re.findall(r"^toucher (\d+) (-?\d+)$", text, re.M)}
    return Placement(pid, addr, nodes, per_node, fields[1], touchers)


def counts(nodes: list[int], n_nodes: int) -> list[int]:
    return [sum(1 for x in nodes if x == k) for k in range(n_nodes)]


# ---- the guests: one boot per group of checks ----------------------------------------

# numaprof_place.h policies run by tests/progs/lab_policies.c (its parameters: weights 3,1,..,
# seed 7, 4-page blocks, thread k of bind_block on node k)
PLACE_POLICIES = ("bind_all", "bind_block", "cyclic", "cyclic_block", "skew_mapp", "prime_mapp",
                  "random", "random_block", "weighted_interleave")
INCLUDE = ROOT / "collector" / "include"


def build_policies(out: Path) -> Path:
    build_prog("lab_replicate", out, f"-I{INCLUDE}")
    return build_prog("lab_policies", out, f"-I{INCLUDE}")


def placement_checks(n_nodes: int, pages: int) -> list[tuple[str, str]]:
    last = n_nodes - 1
    return [
        ("numactl", "numactl -H"),
        ("balancing", "cat /proc/sys/kernel/numa_balancing"),
        ("topology", "$NUMAPROF topology --format json"),
        ("membind", f"numactl --membind={last} ./lab_place touch {pages}"),
        ("interleave", f"numactl --interleave=all ./lab_place touch {pages}"),
        ("cpunodebind", f"numactl --cpunodebind={last} ./lab_place touch {pages}"),
        ("threads", f"./lab_place threads {pages} {n_nodes}"),
        ("policies", f"./lab_policies {n_nodes} {pages} {' '.join(PLACE_POLICIES)}"),
        ("replicate", f"./lab_replicate {pages}"),
        # QEMU 7.2's TCG mis-executed numpy's AVX2 argsort until the lab hid AVX2.
        ("numpy_sort", f"{shlex.quote(sys.executable)} -c " + shlex.quote(
            "import numpy as np\n"
            "a = np.random.default_rng(1).integers(0, 1000, 100000)\n"
            "for kind in ('quicksort', 'stable'):\n"
            "    assert (np.diff(a[np.argsort(a, kind=kind)]) >= 0).all(), kind\n"
            "print('sorted')\n")),
    ]


# 4 nodes: every pair different, and one asymmetric pair (0->1 = 12, 1->0 = 14).
DISTANCES_4 = ["0,1=12", "1,0=14", "0,2=20", "0,3=31", "1,2=25", "1,3=17", "2,3=40"]
MATRIX_4 = [[10, 12, 20, 31], [14, 10, 25, 17], [20, 25, 10, 40], [31, 17, 40, 10]]
MATRIX_2 = [[10, 17], [17, 10]]


