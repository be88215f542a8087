"""Command lines to run the recorded program with a placement (docs/suggest.md).

Every line is a complete POSIX shell command: environment assignments, an optional
``numactl`` prefix, then the recorded argv, each word shell-quoted.  The predicted
effect follows as a shell comment, so the line can be pasted as is.
"""

from __future__ import annotations

import re
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


def weighted_interleave_args(node_ids: Sequence[int]) -> list[str]:
    """numactl (>= 2.0.19, Linux >= 6.9) arguments for MPOL_WEIGHTED_INTERLEAVE over
    ``node_ids``; the weights are the kernel's, see :func:`weighted_interleave_sysfs`."""
    return ["numactl", "--weighted-interleave=" + ",".join(str(n) for n in node_ids)]


def weighted_interleave_sysfs(node_ids: Sequence[int], weights: Sequence[int]) -> list[str]:
    """Shell lines (root) setting the kernel's per-node interleave weights (Linux >= 6.9,
    1..255 each), which MPOL_WEIGHTED_INTERLEAVE uses for every process."""
    return [f"echo {int(w)} > /sys/kernel/mm/mempolicy/weighted_interleave/node{int(n)}"
            for n, w in zip(node_ids, weights, strict=True)]


def weighted_place_statement(ptr: str, size: str, node_ids: Sequence[int],
                               weights: Sequence[int]) -> str:
    """One C and C++ statement placing ``size`` bytes at ``ptr`` with weighted_interleave:
    a block with the node ids and weights as static const arrays and the call of
    ``numaprof_place_weighted`` (numaprof_place.h).  What `suggest --apply` writes."""
    if not node_ids or len(node_ids) != len(weights):
        raise ValueError("weighted_interleave needs one weight per node")
    nodes = ", ".join(str(int(n)) for n in node_ids)
    ws = ", ".join(f"{int(w)}u" for w in weights)
    return (f"{{ static const int nmp_nodes[] = {{{nodes}}}; "
            f"static const unsigned nmp_weights[] = {{{ws}}}; "
            f"numaprof_place_weighted({ptr}, {size}, nmp_nodes, nmp_weights, {len(node_ids)}); }}")


def weighted_place_call(name: str, size: int, node_ids: Sequence[int],
                        weights: Sequence[int]) -> str:
    """`weighted_place_statement` for one array as recorded, to add by hand: ``name`` is
    the pointer when it is a C identifier (else ``ptr``), ``size`` the recorded bytes."""
    ptr = name if re.fullmatch(r"[A-Za-z_]\w*", name or "") else "ptr"
    return weighted_place_statement(ptr, f"{int(size)} /* bytes of {_in_comment(name)} as "
                                    "recorded */", node_ids, weights)


def _in_comment(text: str) -> str:
    """``text`` made safe inside a C block comment: a name from a profile must not end the
    comment (``*/``) or the line in the statement the user pastes."""
    text = re.sub(r"[\x00-\x1f\x7f]", "?", text or "")
    return text.replace("*/", "*\u2215").replace("/*", "\u2215*")


def one_node_args(node_id: int) -> list[str]:
    """numactl arguments running threads and memory on one node (Gogar §3.1)."""
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
