"""Command lines to run the recorded program with a placement (SPEC §4.3, first bullet).

Every line is a complete POSIX shell command: environment assignments, an optional
``numactl`` prefix, then the recorded argv, each word shell-quoted.  The predicted
effect follows as a shell comment, so the line can be pasted as is.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence

DEFAULT_COMMAND = ("./app",)


def binding_env(kind: str) -> dict[str, str]:
    """OpenMP thread binding: ``spread`` or ``close`` over cores (OMP_PLACES=cores)."""
    if kind not in ("spread", "close"):
        raise ValueError(f"unknown binding {kind!r}")
    return {"OMP_PROC_BIND": kind, "OMP_PLACES": "cores"}


def interleave_args(node_ids: Sequence[int] | None = None) -> list[str]:
    """numactl arguments interleaving pages over ``node_ids`` (None: all nodes)."""
    nodes = "all" if node_ids is None else ",".join(str(n) for n in node_ids)
    return ["numactl", f"--interleave={nodes}"]


def one_node_args(node_id: int) -> list[str]:
    """numactl arguments running threads and memory on one node (`001` §3.1)."""
    return ["numactl", "-N", str(node_id), "-m", str(node_id)]


def command_line(command: Sequence[str] | None, *, env: dict[str, str] | None = None,
                 prefix: Sequence[str] = (), comment: str | None = None) -> str:
    """One shell line: ``VAR=value ... prefix... argv...  # comment``, properly quoted."""
    argv = list(command) if command else list(DEFAULT_COMMAND)
    words = [f"{k}={shlex.quote(v)}" for k, v in (env or {}).items()]
    rest = [shlex.quote(w) for w in (*prefix, *argv)]
    if rest and "=" in rest[0] and not rest[0].startswith("'"):
        rest[0] = f"'{rest[0]}'"  # a bare NAME=value first word would be an assignment
    words += rest
    line = " ".join(words)
    if comment:
        line += "  # " + " ".join(comment.split())
    return line
